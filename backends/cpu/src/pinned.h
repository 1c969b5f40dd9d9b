// Pinned ("page-locked") host memory: page-aligned host allocations that are
// mlock()ed when the system allows it. Locking is only an optimisation on a
// CPU backend, so its failure (RLIMIT_MEMLOCK) is ignored.
#ifndef CHIPDOCK_CPU_PINNED_H_
#define CHIPDOCK_CPU_PINNED_H_

#include <cstddef>

namespace chipdock_cpu {

void* host_memory_allocate(size_t bytes);  // 0 bytes -> NULL
void host_memory_free(void* ptr);          // NULL is a no-op

}  // namespace chipdock_cpu

#endif  // CHIPDOCK_CPU_PINNED_H_
