#include "psw/runtime/ipc/cpu_latency.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "psw/common/error.hpp"

namespace psw::runtime {

namespace {

std::string reason(int error) { return std::strerror(error); }

}  // namespace

CpuWakeupLatency::CpuWakeupLatency(std::int32_t microseconds, const std::filesystem::path& device)
    : device_(device), held_us_(microseconds) {
  if (microseconds < 0) throw InputError("a CPU wake-up latency is 0 or more microseconds, not " + std::to_string(microseconds));
  fd_ = ::open(device_.c_str(), O_RDWR | O_CLOEXEC);
  if (fd_ < 0) {
    const int error = errno;
    throw Error("cannot hold the CPU wake-up latency at " + std::to_string(microseconds) + " us: " + device_.string() +
                " does not open for writing (" + reason(error) + ")" +
                (error == EACCES || error == EPERM ? "; it needs root, or its mode changed" : ""));
  }
  // The binary form: one native 32-bit integer (the kernel also takes a 10-character hex string).
  const ssize_t written = ::write(fd_, &microseconds, sizeof microseconds);
  if (written != static_cast<ssize_t>(sizeof microseconds)) {
    const int error = written < 0 ? errno : EIO;
    ::close(fd_);
    throw Error("cannot hold the CPU wake-up latency at " + std::to_string(microseconds) + " us: writing " +
                device_.string() + " failed (" + reason(error) + ")");
  }
}

CpuWakeupLatency::~CpuWakeupLatency() {
  // Closing ends this process's request; the kernel recomputes the limit from the others.
  if (fd_ >= 0) ::close(fd_);
}

std::int32_t CpuWakeupLatency::in_force_us() const {
  std::int32_t value = 0;
  const ssize_t read = ::pread(fd_, &value, sizeof value, 0);
  if (read != static_cast<ssize_t>(sizeof value)) {
    throw Error("cannot read the CPU wake-up latency in force from " + device_.string() + " (" +
                (read < 0 ? reason(errno) : std::string("short read")) + ")");
  }
  return value;
}

}  // namespace psw::runtime
