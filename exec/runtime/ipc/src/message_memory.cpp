#include "psw/runtime/ipc/message_memory.hpp"

#include <cstdlib>  // first: a C library header defines __GLIBC__

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace psw::runtime {

bool keep_message_memory() {
#if defined(__GLIBC__)
  // Setting either threshold also turns off glibc's moving of both (mallopt(3)).
  constexpr int kLargestHeapBlock = 32 << 20;  // glibc's ceiling for M_MMAP_THRESHOLD on 64-bit
  constexpr int kKeptAtTop = 1 << 30;
  const bool arenas = mallopt(M_ARENA_MAX, 1) == 1;
  const bool blocks = mallopt(M_MMAP_THRESHOLD, kLargestHeapBlock) == 1;
  const bool kept = mallopt(M_TRIM_THRESHOLD, kKeptAtTop) == 1;
  return arenas && blocks && kept;
#else
  return false;
#endif
}

}  // namespace psw::runtime
