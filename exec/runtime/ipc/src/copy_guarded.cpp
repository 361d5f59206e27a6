// copy_guarded (declared in shared_memory.hpp) is in psw_ipc, below the server and the workers,
// because both read clients' shared memory (Note [Inputs read in place] in controller.hpp), and
// the workers link no gRPC.
#include <atomic>
#include <csetjmp>
#include <csignal>
#include <cstring>
#include <mutex>

#include "psw/runtime/ipc/shared_memory.hpp"

namespace psw::runtime {

namespace {

// The copy in progress on this thread, if any: where the SIGBUS handler jumps back to.
thread_local sigjmp_buf* t_guard = nullptr;
struct sigaction g_previous_sigbus {};

void on_sigbus(int signal, siginfo_t* info, void* context) {
  if (sigjmp_buf* guard = t_guard; guard != nullptr) {
    t_guard = nullptr;
    siglongjmp(*guard, 1);
  }
  // Not a fault of a guarded copy: let whatever was there before handle it. A plain disposition
  // (the default: terminate with a core) is restored, and returning re-runs the faulting
  // instruction, which faults again under it.
  if ((g_previous_sigbus.sa_flags & SA_SIGINFO) != 0 && g_previous_sigbus.sa_sigaction != nullptr) {
    g_previous_sigbus.sa_sigaction(signal, info, context);
    return;
  }
  ::sigaction(SIGBUS, &g_previous_sigbus, nullptr);
}

void install_sigbus_handler() {
  struct sigaction action {};
  action.sa_sigaction = on_sigbus;
  action.sa_flags = SA_SIGINFO;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGBUS, &action, &g_previous_sigbus);
}

}  // namespace

bool copy_guarded(void* destination, const void* source, std::size_t bytes) noexcept {
  static std::once_flag installed;
  std::call_once(installed, install_sigbus_handler);
  sigjmp_buf guard;
  // savemask: the jump out of the handler restores the signal mask, in which the kernel blocked
  // SIGBUS while the handler ran; without it a second fault would kill the process.
  if (sigsetjmp(guard, 1) != 0) return false;
  t_guard = &guard;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  std::memcpy(destination, source, bytes);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  t_guard = nullptr;
  return true;
}

}  // namespace psw::runtime
