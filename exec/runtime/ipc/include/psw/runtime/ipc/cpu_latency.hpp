#pragma once
// The host's CPU wake-up latency, held low while a latency-critical process runs.
//
// Note [CPU wake-up latency]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// A request crosses several sleeping threads: the client's, the front end's, the controller's
// and a worker's, each woken by the one before. A thread that sleeps leaves its CPU idle, and
// the kernel's idle driver puts an idle CPU into the deepest state whose exit latency the
// system allows; on this project's virtual machines (cpuidle driver `haltpoll`, guest halt
// polling off) that state is a halt that exits to the hypervisor, and waking from it costs tens
// to hundreds of microseconds per hop. Measured on the 2-core host (results/protocol.md,
// tests/bench/protocol_bench.cpp, 20 calls 150 ms apart): with the limit held at 0, an 8 KB
// ModelInfer took 0.76 x as long as without (0.78 against 1.03 ms), a 4.8 MB one 0.84 x (9.6
// against 11.4 ms), and a cold memcpy of the 4.8 MB there and back 0.79 x (a halted CPU's caches
// are the hypervisor's to reuse). On a 16-core H100 host the same benchmark went the other way
// (results/gpu/2026-12-07-h100-protocol.md: 1.17-1.33 x as long held), and served raw cold
// requests moved by -0.4 to +0.7 ms: whether it pays depends on the host, so it is measured
// there, side by side (scripts/gpu-serve.sh part `staging`), before it is turned on.
//
// The kernel's interface for this is the CPU latency QoS request (Documentation/power/
// pm_qos_interface.rst): a process that opens /dev/cpu_dma_latency and writes a 32-bit
// number of microseconds holds the whole system's limit at most that low until it closes the
// file, or exits, however it exits; the limit in force is the lowest of every holder's. At 0 an
// idle CPU polls instead of halting. The price is an idle CPU that keeps running (power, and
// the host's time where the CPU is virtual); the serve config's `cpu_wakeup_latency_us` asks
// for it (none by default), as tuned's latency-performance profile does for a whole machine.
// Opening the file needs root (or its mode changed); psw serve refuses to start without it
// rather than run without what the config asked for.

#include <cstdint>
#include <filesystem>

namespace psw::runtime {

class CpuWakeupLatency {
 public:
  static constexpr const char* kDevice = "/dev/cpu_dma_latency";

  // Holds the limit at `microseconds` (0 or more) through `device` while this object lives;
  // throws psw::Error naming the file and the system's reason where it cannot.
  explicit CpuWakeupLatency(std::int32_t microseconds, const std::filesystem::path& device = kDevice);
  ~CpuWakeupLatency();
  CpuWakeupLatency(const CpuWakeupLatency&) = delete;
  CpuWakeupLatency& operator=(const CpuWakeupLatency&) = delete;

  std::int32_t held_us() const { return held_us_; }
  // The limit in force now, as the file reads: at most held_us() while this object lives.
  std::int32_t in_force_us() const;

 private:
  std::filesystem::path device_;
  int fd_ = -1;
  std::int32_t held_us_ = 0;
};

}  // namespace psw::runtime
