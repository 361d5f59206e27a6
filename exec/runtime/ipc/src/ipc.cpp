#include "psw/runtime/ipc/ipc.hpp"

#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <iomanip>
#include <sstream>
#include <thread>
#include <utility>

#include "psw/common/error.hpp"

namespace psw::runtime {

namespace {

[[noreturn]] void throw_errno(const std::string& what) {
  throw Error(what + ": " + std::strerror(errno));
}

constexpr std::size_t kMaxFds = 32;

}  // namespace

UniqueFd::~UniqueFd() {
  if (fd_ >= 0) ::close(fd_);
}

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.release();
  }
  return *this;
}

int UniqueFd::release() {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

SharedSegment SharedSegment::create(const std::string& name, std::size_t bytes) {
  PSW_CHECK(bytes > 0, "an empty shared segment '", name, "'");
  UniqueFd fd(::memfd_create(("psw-" + name).c_str(), MFD_CLOEXEC));
  if (!fd) throw_errno("memfd_create " + name);
  if (::ftruncate(fd.get(), static_cast<off_t>(bytes)) != 0) throw_errno("ftruncate " + name);
  return attach(std::move(fd));
}

SharedSegment SharedSegment::attach(UniqueFd fd) {
  const off_t end = ::lseek(fd.get(), 0, SEEK_END);
  if (end <= 0) throw Error("a shared segment passed to this process is empty or unreadable");
  SharedSegment segment;
  segment.size_ = static_cast<std::size_t>(end);
  void* p = ::mmap(nullptr, segment.size_, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (p == MAP_FAILED) throw_errno("mmap of a shared segment");
  segment.data_ = static_cast<std::uint8_t*>(p);
  segment.fd_ = std::move(fd);
  return segment;
}

SharedSegment::~SharedSegment() {
  if (data_ != nullptr) ::munmap(data_, size_);
}

SharedSegment::SharedSegment(SharedSegment&& other) noexcept
    : fd_(std::move(other.fd_)), data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

SharedSegment& SharedSegment::operator=(SharedSegment&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) ::munmap(data_, size_);
    fd_ = std::move(other.fd_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

const char* to_string(MessageType type) {
  switch (type) {
    case MessageType::Hello: return "hello";
    case MessageType::Segments: return "segments";
    case MessageType::Region: return "region";
    case MessageType::Ready: return "ready";
    case MessageType::Infer: return "infer";
    case MessageType::InferDone: return "infer-done";
    case MessageType::Train: return "train";
    case MessageType::TrainStopped: return "train-stopped";
    case MessageType::Cleanup: return "cleanup";
    case MessageType::CleanupDone: return "cleanup-done";
    case MessageType::Shutdown: return "shutdown";
    case MessageType::Failed: return "failed";
    case MessageType::MapInput: return "map-input";
    case MessageType::UnmapInput: return "unmap-input";
    case MessageType::Token: return "token";
    case MessageType::Checkpoint: return "checkpoint";
    case MessageType::CheckpointDone: return "checkpoint-done";
    case MessageType::LoadModel: return "load-model";
    case MessageType::ModelStored: return "model-stored";
    case MessageType::UnloadModel: return "unload-model";
    case MessageType::BindModel: return "bind-model";
    case MessageType::ModelBound: return "model-bound";
    case MessageType::DropModel: return "drop-model";
    case MessageType::ModelDropped: return "model-dropped";
  }
  return "?";
}

const char* to_string(WorkerStartPhase phase) {
  switch (phase) {
    case WorkerStartPhase::Process: return "process";
    case WorkerStartPhase::Context: return "context";
    case WorkerStartPhase::Memory: return "memory";
    case WorkerStartPhase::Models: return "models";
    case WorkerStartPhase::Training: return "training";
    case WorkerStartPhase::Other: return "other";
  }
  return "?";
}

std::optional<WorkerStartSplit> split_worker_start(std::int64_t spawned_ns, std::span<const std::int64_t> ready_times) {
  if (spawned_ns <= 0 || ready_times.size() < kWorkerStartPhases) return std::nullopt;
  WorkerStartSplit split{};
  std::int64_t previous = spawned_ns;
  for (std::size_t i = 0; i < kWorkerStartPhases; ++i) {
    if (ready_times[i] < previous) return std::nullopt;  // unset (0) or out of order
    split[i] = ready_times[i] - previous;
    previous = ready_times[i];
  }
  return split;
}

std::string describe_worker_start(const WorkerStartSplit& split) {
  std::int64_t total = 0;
  for (std::int64_t ns : split) total += ns;
  std::ostringstream out;
  out << std::fixed << std::setprecision(2) << "after " << static_cast<double>(total) * 1e-9 << " s:"
      << std::setprecision(1);
  for (std::size_t i = 0; i < kWorkerStartPhases; ++i) {
    out << (i == 0 ? " " : ", ") << to_string(static_cast<WorkerStartPhase>(i)) << " "
        << static_cast<double>(split[i]) * 1e-6 << " ms";
  }
  return out.str();
}

void Message::set_text(const std::string& s) {
  const std::size_t n = std::min(s.size(), kMessageText - 1);
  std::memcpy(text, s.data(), n);
  text[n] = '\0';
}

std::string Message::get_text() const { return std::string(text, strnlen(text, kMessageText)); }

std::pair<UniqueFd, UniqueFd> message_socket_pair() {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) != 0) throw_errno("socketpair");
  return {UniqueFd(fds[0]), UniqueFd(fds[1])};
}

void send_message(int socket, const Message& message, const std::vector<int>& fds) {
  PSW_CHECK(fds.size() <= kMaxFds, "too many descriptors in one message");
  iovec iov{const_cast<Message*>(&message), sizeof(Message)};
  msghdr header{};
  header.msg_iov = &iov;
  header.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)] = {};
  if (!fds.empty()) {
    header.msg_control = control;
    header.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* cmsg = CMSG_FIRSTHDR(&header);
    cmsg->cmsg_level = SOL_SOCKET;
    cmsg->cmsg_type = SCM_RIGHTS;
    cmsg->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(cmsg), fds.data(), sizeof(int) * fds.size());
  }
  while (true) {
    const ssize_t sent = ::sendmsg(socket, &header, MSG_NOSIGNAL);
    if (sent == static_cast<ssize_t>(sizeof(Message))) return;
    if (sent < 0 && errno == EINTR) continue;
    throw_errno(std::string("sending a ") + to_string(message.type) + " message");
  }
}

std::optional<Message> receive_message(int socket, std::vector<UniqueFd>* fds, int timeout_ms) {
  if (timeout_ms >= 0) {
    pollfd p{socket, POLLIN, 0};
    int ready;
    do {
      ready = ::poll(&p, 1, timeout_ms);
    } while (ready < 0 && errno == EINTR);
    if (ready < 0) throw_errno("poll");
    if (ready == 0) throw Error(detail::concat("no message within ", timeout_ms, " ms"));
  }
  Message message;
  iovec iov{&message, sizeof(Message)};
  msghdr header{};
  header.msg_iov = &iov;
  header.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)] = {};
  header.msg_control = control;
  header.msg_controllen = sizeof(control);
  ssize_t got;
  do {
    got = ::recvmsg(socket, &header, MSG_CMSG_CLOEXEC);
  } while (got < 0 && errno == EINTR);
  if (got < 0) {
    if (errno == ECONNRESET) return std::nullopt;
    throw_errno("receiving a message");
  }
  std::vector<UniqueFd> received;
  for (cmsghdr* cmsg = CMSG_FIRSTHDR(&header); cmsg != nullptr; cmsg = CMSG_NXTHDR(&header, cmsg)) {
    if (cmsg->cmsg_level == SOL_SOCKET && cmsg->cmsg_type == SCM_RIGHTS) {
      const std::size_t n = (cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (std::size_t i = 0; i < n; ++i) {
        int fd;
        std::memcpy(&fd, CMSG_DATA(cmsg) + i * sizeof(int), sizeof(int));
        received.emplace_back(fd);
      }
    }
  }
  if (got == 0) return std::nullopt;
  if (got != static_cast<ssize_t>(sizeof(Message)) || (header.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0) {
    throw Error(detail::concat("a malformed message of ", got, " bytes (expected ", sizeof(Message), ")"));
  }
  if (message.rank > kMaxRank) throw Error(detail::concat("a message with a tensor of rank ", message.rank));
  message.text[kMessageText - 1] = '\0';
  if (fds != nullptr) *fds = std::move(received);
  return message;
}

std::int64_t element_bytes(ElementType type) {
  switch (type) {
    case ElementType::Float32: return 4;
    case ElementType::Int64: return 8;
    case ElementType::Float16: return 2;
    case ElementType::BFloat16: return 2;
    case ElementType::Int32: return 4;
    case ElementType::UInt8: return 1;
  }
  throw Error("an unknown element type in a message");
}

namespace {
constexpr std::pair<ElementType, const char*> kDatatypes[] = {
    {ElementType::Float32, "FP32"}, {ElementType::Int64, "INT64"}, {ElementType::Float16, "FP16"},
    {ElementType::BFloat16, "BF16"}, {ElementType::Int32, "INT32"}, {ElementType::UInt8, "UINT8"}};
}  // namespace

std::optional<ElementType> element_type_of(const std::string& datatype) {
  for (const auto& [type, name] : kDatatypes) {
    if (datatype == name) return type;
  }
  return std::nullopt;
}

const char* datatype_name(ElementType type) {
  for (const auto& [t, name] : kDatatypes) {
    if (t == type) return name;
  }
  return "?";
}

bool wait_while_paused(const WorkerControl& control, std::uint32_t resumes_at_pause, const std::function<bool()>& gone,
                       std::chrono::microseconds poll) {
  // Note [Pause and resume]
  while (true) {
    const std::uint32_t stop = control.stop.load(std::memory_order_acquire);
    if (stop == kStopAbort || (gone && gone())) return false;
    if (stop == kStopNone || control.resumes.load(std::memory_order_acquire) != resumes_at_pause) return true;
    std::this_thread::sleep_for(poll);
  }
}

std::int64_t monotonic_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace psw::runtime
