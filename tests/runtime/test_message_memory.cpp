// Note [Message memory]: with keep_message_memory(), a buffer of a request's size that one
// thread freed is reused by another thread without page faults; without it, the other thread
// faults on every page. Each case runs in a child process (a death test's fork), because the
// setting is the whole process's and stays.
#include <gtest/gtest.h>

#include <sys/resource.h>

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include "psw/runtime/ipc/message_memory.hpp"

namespace psw::runtime {
namespace {

constexpr std::size_t kMessageBytes = std::size_t{8} << 20;  // about Inception-v3's batch of 8

long thread_minor_faults() {
  rusage usage{};
  getrusage(RUSAGE_THREAD, &usage);
  return usage.ru_minflt;
}

// One buffer of a message's size allocated, written and freed, as a request's is.
void one_message() {
  auto* bytes = static_cast<char*>(std::malloc(kMessageBytes));
  if (bytes == nullptr) std::_Exit(4);
  std::memset(bytes, 1, kMessageBytes);
  // The writes must happen: without this the compiler may drop the allocation altogether.
  asm volatile("" : : "r"(bytes) : "memory");
  std::free(bytes);
}

// The page faults of a second thread's message after a first thread's, both threads alive (so
// that each has an arena of its own where the C library gives one per thread).
long faults_of_the_second_thread() {
  std::mutex mutex;
  std::condition_variable cv;
  bool first_done = false;
  bool second_done = false;
  long faults = -1;
  std::thread first([&] {
    one_message();
    std::unique_lock lock(mutex);
    first_done = true;
    cv.notify_all();
    cv.wait(lock, [&] { return second_done; });
  });
  std::thread second([&] {
    {
      std::unique_lock lock(mutex);
      cv.wait(lock, [&] { return first_done; });
    }
    const long before = thread_minor_faults();
    one_message();
    faults = thread_minor_faults() - before;
    std::lock_guard lock(mutex);
    second_done = true;
    cv.notify_all();
  });
  first.join();
  second.join();
  return faults;
}

constexpr long kPages = static_cast<long>(kMessageBytes / 4096);

TEST(MessageMemory, AnotherThreadReusesAFreedMessageWithoutFaults) {
  EXPECT_EXIT(
      {
        if (!keep_message_memory()) std::_Exit(3);
        const long faults = faults_of_the_second_thread();
        std::fprintf(stderr, "second thread's faults: %ld of %ld pages\n", faults, kPages);
        std::_Exit(faults < kPages / 16 ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

// What the setting changes: by default the second thread faults on most pages of its message.
TEST(MessageMemory, WithoutItAnotherThreadFaultsOnItsMessage) {
  EXPECT_EXIT(
      {
        const long faults = faults_of_the_second_thread();
        std::fprintf(stderr, "second thread's faults: %ld of %ld pages\n", faults, kPages);
        std::_Exit(faults > kPages / 2 ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace psw::runtime
