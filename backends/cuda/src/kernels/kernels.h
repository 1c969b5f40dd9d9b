// Kernel registration: `copy`, the elementwise family and the linear-algebra
// family; every other op runs through the core's CPU fallback policy.
#ifndef CHIPDOCK_CUDA_KERNELS_H_
#define CHIPDOCK_CUDA_KERNELS_H_

#include "chipdock/cd_kernel.h"

namespace chipdock_cuda {

// Registers one kernel with the core; throws if the core refuses it.
void register_kernel(cd_kernel_registry* registry, const char* op, const cd_dtype_t* dtypes,
                     int32_t num_dtypes, cd_kernel_fn fn);

void register_all_kernels(cd_kernel_registry* registry);
void register_copy(cd_kernel_registry* registry);         // kernels/copy.cu
void register_elementwise(cd_kernel_registry* registry);  // kernels/elementwise*.cu
void register_matmul(cd_kernel_registry* registry);       // kernels/matmul.cu: matmul, gemm
void register_conv(cd_kernel_registry* registry);         // kernels/conv.cu
void register_attention(cd_kernel_registry* registry);    // kernels/attention.cu

}  // namespace chipdock_cuda

#endif  // CHIPDOCK_CUDA_KERNELS_H_
