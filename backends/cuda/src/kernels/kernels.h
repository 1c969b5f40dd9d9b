// Kernel registration, one function per kernel family; an op without a
// kernel here runs through the core's CPU fallback policy.
#ifndef CHIPDOCK_CUDA_KERNELS_H_
#define CHIPDOCK_CUDA_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "chipdock/cd_kernel.h"
#include "chipdock/support/attributes.h"

namespace chipdock_cuda {

// Kernel attributes are read with the kit's support library, as in every backend.
using chipdock::support::bool_attribute;
using chipdock::support::find_attribute;
using chipdock::support::float_attribute;
using chipdock::support::floats_attribute;
using chipdock::support::int_attribute;
using chipdock::support::ints_attribute;
using chipdock::support::string_attribute;

// Registers one kernel with the core; throws if the core refuses it.
void register_kernel(cd_kernel_registry* registry, const char* op, const cd_dtype_t* dtypes,
                     int32_t num_dtypes, cd_kernel_fn fn);

void register_all_kernels(cd_kernel_registry* registry);
void register_copy(cd_kernel_registry* registry);         // kernels/copy.cu
void register_elementwise(cd_kernel_registry* registry);  // kernels/elementwise*.cu
void register_reductions(cd_kernel_registry* registry);   // kernels/reduce*.cu, softmax.cu, norm.cu
void register_movement(cd_kernel_registry* registry);     // kernels/movement*.cu, sort.cu
void register_pool(cd_kernel_registry* registry);         // kernels/pool.cu

// Enqueues dst[i] = src[i] for every index i of `shape` (nd dims): elements
// of `item` bytes at the given BYTE strides (any sign; zero allowed on the
// source). copy's kernel (copy.cu), shared by the data-movement kernels.
void enqueue_strided_copy(char* dst, const int64_t* dst_strides, const char* src, const int64_t* src_strides,
                          const int64_t* shape, int32_t nd, int64_t item, cudaStream_t stream);
void register_matmul(cd_kernel_registry* registry);       // kernels/matmul.cu: matmul, gemm
void register_conv(cd_kernel_registry* registry);         // kernels/conv.cu
void register_attention(cd_kernel_registry* registry);    // kernels/attention.cu

}  // namespace chipdock_cuda

#endif  // CHIPDOCK_CUDA_KERNELS_H_
