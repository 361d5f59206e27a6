// The host backend: LibTorch on the CPU, with a thread in the role of the copy stream.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "psw/common/error.hpp"
#include "psw/exec/backend.hpp"

namespace psw::exec {

namespace {

class HostBackend final : public Backend {
 public:
  HostBackend() : copier_([this] { copy_loop(); }) {}
  ~HostBackend() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    work_ready_.notify_all();
    copier_.join();
  }
  HostBackend(const HostBackend&) = delete;
  HostBackend& operator=(const HostBackend&) = delete;

  std::string name() const override { return "host"; }
  torch::Device device() const override { return torch::kCPU; }

  torch::Tensor allocate_device(Bytes bytes) override {
    return torch::empty({static_cast<std::int64_t>(bytes)}, torch::dtype(torch::kUInt8));
  }
  torch::Tensor allocate_host(Bytes bytes, bool /*pinned*/) override {
    // Page-locking needs a CUDA build; on the host backend both kinds are ordinary memory.
    return torch::empty({static_cast<std::int64_t>(bytes)}, torch::dtype(torch::kUInt8));
  }

  torch::Tensor map_host(const torch::Tensor& host) override { return host; }

  // Note [Managed memory]: host and "device" are one memory here; a copy of `contents` is
  // what the engine binds, and there are no pages to send back.
  torch::Tensor allocate_managed(const torch::Tensor& contents) override {
    PSW_CHECK(contents.dim() == 1 && contents.scalar_type() == torch::kUInt8, "managed memory is filled from uint8 bytes");
    return contents.clone();
  }
  void evict_to_host(const torch::Tensor& /*managed*/) override { synchronize(); }

  void begin_switch(std::size_t num_groups) override {
    synchronize();
    std::lock_guard<std::mutex> lock(mutex_);
    arrived_.assign(num_groups, false);
    pending_.assign(num_groups, 0);
  }

  void copy_group(std::size_t group, const torch::Tensor& dst, const torch::Tensor& src) override {
    PSW_CHECK(dst.nbytes() == src.nbytes(), "copy of ", src.nbytes(), " bytes into ", dst.nbytes());
    {
      std::lock_guard<std::mutex> lock(mutex_);
      PSW_CHECK(group < arrived_.size(), "group ", group, " outside the switch");
      ++pending_[group];
      queue_.push_back({group, dst, src, 0, {}});
    }
    work_ready_.notify_one();
  }

  void wait_group(std::size_t group) override {
    std::unique_lock<std::mutex> lock(mutex_);
    arrived_cv_.wait(lock, [&] { return arrived_.at(group) || error_; });
    if (error_) std::rethrow_exception(error_);
  }

  void synchronize() override {
    std::unique_lock<std::mutex> lock(mutex_);
    arrived_cv_.wait(lock, [&] { return (queue_.empty() && !busy_) || error_; });
    if (error_) std::rethrow_exception(error_);
  }

  void fill(const torch::Tensor& dst, std::uint8_t value) override {
    synchronize();
    dst.fill_(value);
  }

  void copy_to_device(const torch::Tensor& dst, const void* src) override {
    PSW_CHECK(dst.is_contiguous(), "copy_to_device: the destination must be contiguous");
    std::memcpy(dst.data_ptr(), src, dst.nbytes());  // the calling thread is the compute stream
  }

  std::string device_description() const override { return "CPU (LibTorch host backend)"; }

  Duration time_copy(Bytes bytes, bool pinned, int repeats, int back_to_back) override {
    PSW_CHECK(back_to_back >= 1, "back_to_back must be at least 1");
    torch::Tensor src = allocate_host(bytes, pinned).fill_(1);
    torch::Tensor dst = allocate_device(bytes);
    std::vector<Duration> times;
    for (int i = 0; i < repeats; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      for (int k = 0; k < back_to_back; ++k) dst.copy_(src);
      const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
      times.push_back(nanoseconds(ns / back_to_back));
    }
    std::sort(times.begin(), times.end());
    return times.at(times.size() / 2);
  }

  Duration time_mapped_read(Bytes bytes, int repeats) override {
    const torch::Tensor host = allocate_host(bytes, true).fill_(0).view(torch::kFloat32);
    std::vector<Duration> times;
    for (int i = 0; i < repeats; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      (void)host.sum().item<float>();
      times.push_back(nanoseconds(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count()));
    }
    std::sort(times.begin(), times.end());
    return times.at(times.size() / 2);
  }

  // The calling thread is the compute stream: a mark is simply the time it gets there.
  void mark(std::size_t slot) override {
    std::lock_guard<std::mutex> lock(mutex_);
    record(slot);
  }
  // The time the copies queued before it were done (or, if they already were, now): what a
  // CUDA event on the copy stream reports, whenever the copy thread gets to the item.
  void mark_copy(std::size_t slot) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queue_.push_back({kNoGroup, {}, {}, slot, std::chrono::steady_clock::now()});
    }
    work_ready_.notify_one();
  }
  Duration elapsed(std::size_t from, std::size_t to) override {
    std::lock_guard<std::mutex> lock(mutex_);
    return nanoseconds(std::chrono::duration_cast<std::chrono::nanoseconds>(marks_.at(to) - marks_.at(from)).count());
  }

 private:
  static constexpr std::size_t kNoGroup = static_cast<std::size_t>(-1);
  // A copy of one group's piece, or (no group, no tensors) a mark to record.
  struct Copy {
    std::size_t group;
    torch::Tensor dst;
    torch::Tensor src;
    std::size_t mark_slot = 0;
    std::chrono::steady_clock::time_point enqueued;
  };

  void record(std::size_t slot) {  // with mutex_ held
    if (marks_.size() <= slot) marks_.resize(slot + 1);
    marks_[slot] = std::chrono::steady_clock::now();
  }

  void copy_loop() {
    while (true) {
      Copy copy;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        work_ready_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopping
        copy = std::move(queue_.front());
        queue_.pop_front();
        busy_ = true;
      }
      try {
        if (copy.group == kNoGroup) {
          std::lock_guard<std::mutex> lock(mutex_);
          if (marks_.size() <= copy.mark_slot) marks_.resize(copy.mark_slot + 1);
          marks_[copy.mark_slot] = std::max(copy.enqueued, last_copy_done_);
        } else {
          copy.dst.copy_(copy.src);
        }
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex_);
        error_ = std::current_exception();
      }
      {
        std::lock_guard<std::mutex> lock(mutex_);
        busy_ = false;
        if (copy.group != kNoGroup) last_copy_done_ = std::chrono::steady_clock::now();
        // Every copy of a group is enqueued before the forward waits for it, so the group has
        // arrived when its last copy is done.
        if (copy.group < arrived_.size() && --pending_[copy.group] == 0) arrived_[copy.group] = true;
      }
      arrived_cv_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable work_ready_;
  std::condition_variable arrived_cv_;
  std::deque<Copy> queue_;
  std::vector<bool> arrived_;
  std::vector<int> pending_;  // copies of each group not yet done
  bool busy_ = false;
  bool stopping_ = false;
  std::exception_ptr error_;
  std::vector<std::chrono::steady_clock::time_point> marks_;
  std::chrono::steady_clock::time_point last_copy_done_;
  std::thread copier_;  // last: starts after every other member exists
};

}  // namespace

std::unique_ptr<Backend> make_host_backend() { return std::make_unique<HostBackend>(); }

}  // namespace psw::exec
