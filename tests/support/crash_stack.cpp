// A test binary that crashes says where: on SIGSEGV, SIGBUS, SIGFPE or SIGILL the stack goes to
// stderr (function names where the binary exports them, else binary+offset for addr2line), then
// the signal is raised again with its default action, so ctest still sees the crash. Linked into
// the GPU test binaries, whose crashes happen on a machine where no debugger is at hand. A jump
// to a bad address leaves no frame to unwind from, so the faulting instruction's address and the
// word on top of the stack (the return address, when a call went astray) are printed first.
#include <execinfo.h>
#include <signal.h>
#include <ucontext.h>
#include <unistd.h>

#include <cstring>
#include <initializer_list>

namespace {

void print_stack_and_die(int signal_number, siginfo_t* info, void* context) {
  const char* what = strsignal(signal_number);
  (void)!::write(STDERR_FILENO, "\n*** ", 5);
  (void)!::write(STDERR_FILENO, what, std::strlen(what));
  (void)!::write(STDERR_FILENO, "; the stack:\n", 13);
#if defined(__x86_64__)
  const auto* registers = static_cast<const ucontext_t*>(context)->uc_mcontext.gregs;
  void* at[3] = {reinterpret_cast<void*>(registers[REG_RIP]), *reinterpret_cast<void* const*>(registers[REG_RSP]),
                 info->si_addr};
  (void)!::write(STDERR_FILENO, "(instruction, top of stack, faulting address)\n", 46);
  ::backtrace_symbols_fd(at, 3, STDERR_FILENO);
#else
  (void)info;
  (void)context;
#endif
  void* frames[64];
  const int depth = ::backtrace(frames, 64);
  ::backtrace_symbols_fd(frames, depth, STDERR_FILENO);  // no malloc: safe in a handler
  ::signal(signal_number, SIG_DFL);
  ::raise(signal_number);
}

const bool kInstalled = [] {
  void* warm_up[1];
  ::backtrace(warm_up, 1);  // loads libgcc's unwinder now, not inside the handler
  struct sigaction action {};
  action.sa_sigaction = print_stack_and_die;
  action.sa_flags = SA_SIGINFO;
  sigemptyset(&action.sa_mask);
  for (int s : {SIGSEGV, SIGBUS, SIGFPE, SIGILL}) ::sigaction(s, &action, nullptr);
  return true;
}();

}  // namespace
