// Kernel registration: one register_<op> function per kernel file, all
// called by register_all_kernels (the plugin's kernels_register slot).
#ifndef CHIPDOCK_CPU_KERNELS_KERNELS_H_
#define CHIPDOCK_CPU_KERNELS_KERNELS_H_

#include "chipdock/cd_kernel.h"

namespace chipdock_cpu {

// Registers every kernel of this backend with the core. Throws Error.
void register_all_kernels(cd_kernel_registry* registry);

// Registers one kernel for one dtype signature through the core. Throws
// Error if the core refuses it.
void register_kernel(cd_kernel_registry* registry, const char* op, const cd_dtype_t* dtypes,
                     int32_t num_dtypes, cd_kernel_fn fn);

// --- one per kernel file ---
void register_copy(cd_kernel_registry* registry);         // kernels/copy.cpp
void register_elementwise(cd_kernel_registry* registry);  // kernels/elementwise*.cpp
void register_movement(cd_kernel_registry* registry);  // kernels/movement*.cpp
void register_reductions(cd_kernel_registry* registry);  // kernels/reduce*.cpp, norm*.cpp
void register_linalg(cd_kernel_registry* registry);  // kernels/linalg.cpp (+ conv, pool, attention)

}  // namespace chipdock_cpu

#endif  // CHIPDOCK_CPU_KERNELS_KERNELS_H_
