// Note [CPU wake-up latency]: the hold writes its limit through the kernel's QoS file, keeps it
// open while it lives, and says what went wrong where it cannot.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "psw/common/error.hpp"
#include "psw/runtime/ipc/cpu_latency.hpp"

namespace psw::runtime {
namespace {

std::string error_of(std::int32_t microseconds, const std::filesystem::path& device) {
  try {
    CpuWakeupLatency hold(microseconds, device);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A regular file stands for the device: the bytes written are the kernel's request.
TEST(CpuWakeupLatency, WritesItsLimitAsOneNativeIntegerAndReadsTheFileBack) {
  const std::filesystem::path file =
      std::filesystem::temp_directory_path() / ("psw-cpu-latency-" + std::to_string(::getpid()));
  std::ofstream(file).close();
  {
    CpuWakeupLatency hold(25, file);
    EXPECT_EQ(hold.held_us(), 25);
    EXPECT_EQ(hold.in_force_us(), 25);
    EXPECT_EQ(std::filesystem::file_size(file), sizeof(std::int32_t));
  }
  std::ifstream in(file, std::ios::binary);
  std::int32_t written = -1;
  in.read(reinterpret_cast<char*>(&written), sizeof written);
  EXPECT_EQ(written, 25);
  std::filesystem::remove(file);
}

TEST(CpuWakeupLatency, AFileThatDoesNotOpenIsNamedWithTheReason) {
  const std::string message = error_of(0, "/nonexistent/psw/cpu_dma_latency");
  EXPECT_NE(message.find("/nonexistent/psw/cpu_dma_latency"), std::string::npos) << message;
  EXPECT_NE(message.find("No such file"), std::string::npos) << message;
  EXPECT_NE(message.find("at 0 us"), std::string::npos) << message;
}

TEST(CpuWakeupLatency, ANegativeLimitIsAnInputError) {
  EXPECT_THROW(CpuWakeupLatency(-1, "/dev/null"), InputError);
}

// The kernel's own file: where this process may open it (root), the limit in force is the one
// held (the lowest of every holder's, and none is below 0); where it may not, the refusal says
// which file and why, as psw serve prints it.
TEST(CpuWakeupLatency, TheKernelsFileHoldsTheLimitOrSaysWhyNot) {
  if (::access(CpuWakeupLatency::kDevice, W_OK) == 0) {
    CpuWakeupLatency hold(0);
    EXPECT_EQ(hold.in_force_us(), 0);
  } else {
    const std::string message = error_of(0, CpuWakeupLatency::kDevice);
    EXPECT_NE(message.find(CpuWakeupLatency::kDevice), std::string::npos) << message;
    EXPECT_NE(message.find("does not open for writing"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace psw::runtime
