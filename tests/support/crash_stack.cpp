// A test binary that crashes says where: on SIGSEGV, SIGBUS, SIGFPE or SIGILL the stack goes to
// stderr (function names where the binary exports them, else binary+offset for addr2line), then
// the signal is raised again with its default action, so ctest still sees the crash. Linked into
// the GPU test binaries, whose crashes happen on a machine where no debugger is at hand.
#include <execinfo.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <initializer_list>

namespace {

void print_stack_and_die(int signal_number) {
  const char* what = strsignal(signal_number);
  (void)!::write(STDERR_FILENO, "\n*** ", 5);
  (void)!::write(STDERR_FILENO, what, std::strlen(what));
  (void)!::write(STDERR_FILENO, "; the stack:\n", 13);
  void* frames[64];
  const int depth = ::backtrace(frames, 64);
  ::backtrace_symbols_fd(frames, depth, STDERR_FILENO);  // no malloc: safe in a handler
  std::signal(signal_number, SIG_DFL);
  std::raise(signal_number);
}

const bool kInstalled = [] {
  void* warm_up[1];
  ::backtrace(warm_up, 1);  // loads libgcc's unwinder now, not inside the handler
  for (int s : {SIGSEGV, SIGBUS, SIGFPE, SIGILL}) std::signal(s, print_stack_and_die);
  return true;
}();

}  // namespace
