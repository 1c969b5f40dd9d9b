// Shared by the reduction and normalization kernels (reduce.cu, softmax.cu,
// norm.cu): checked tensor views and attributes on the host, coalesced
// strided dimensions that kernels decompose an index over, and the
// deterministic warp and block reductions (a fixed shuffle tree and a fixed
// combine order, never atomics, so that results repeat run to run).
//
// Semantics follow the CPU reference (backends/cpu/src/kernels/reduce*,
// norm*): attributes arrive normalized by the core's shape rules (axes
// sorted and non-negative), outputs are C-contiguous, inputs any strided
// view; float16 and bfloat16 compute in float32, float64 in float64.
#ifndef CHIPDOCK_CUDA_KERNELS_REDUCE_CUH_
#define CHIPDOCK_CUDA_KERNELS_REDUCE_CUH_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <vector>

#include "elementwise.cuh"

namespace chipdock_cuda {
namespace red {

using ew::bf16;
using ew::compute_t;
using ew::half;
using ew::load;
using ew::store;
using ew::Tag;

constexpr int kMaxDims = 12;

// The accumulator of a sum or product: the compute type for floats
// (float64: float64; else float32), the unsigned type of the width for
// integers (wrapping, as the CPU reference). Scans use float64 for floats.
template <class T, bool = ew::kIsFloat<T>> struct AccOf { using type = compute_t<T>; };
template <class T> struct AccOf<T, false> { using type = std::make_unsigned_t<T>; };
template <class T> using acc_t = typename AccOf<T>::type;
template <class T> using scan_t = std::conditional_t<ew::kIsFloat<T>, double, acc_t<T>>;

// One dimension of a view: size and stride in elements.
struct Dim {
  int64_t size;
  int64_t stride;
};

// Dimensions passed to kernels by value (row-major, innermost last).
struct Dims {
  int32_t n;
  int64_t size[kMaxDims];
  int64_t stride[kMaxDims];
};

// Element offset of the `i`-th element (row-major) of `d`.
__host__ __device__ __forceinline__ int64_t offset_of(int64_t i, const Dims& d) {
  int64_t off = 0;
  for (int k = d.n - 1; k >= 0; --k) {
    const int64_t q = i / d.size[k];
    off += (i - q * d.size[k]) * d.stride[k];
    i = q;
  }
  return off;
}

// --- host side (reduce_common.cu) ---------------------------------------------------

// A checked operand: dtype, shape, element strides and its first element.
struct Tensor {
  cd_dtype_t dtype = CD_DTYPE_INVALID;
  std::vector<int64_t> shape, strides;
  char* origin = nullptr;
  int64_t numel = 0;
  std::vector<Dim> dims(size_t begin, size_t end) const;
  template <class T> T* as() const { return reinterpret_cast<T*>(origin); }
};

// Checks the operand counts and the stream, makes the device current and
// returns the stream to launch on.
cudaStream_t begin(const cd_kernel_context* ctx, int32_t min_inputs, int32_t max_inputs);
// Input `i` / output 0 of ctx, checked (format, device, alignment, and that
// the bytes it spans lie in one live allocation when it is non-empty).
Tensor input(const cd_kernel_context* ctx, int32_t i);
Tensor output(const cd_kernel_context* ctx);

void require_dtype(const Tensor& t, cd_dtype_t dtype, const char* what);
void require_shape(const Tensor& t, const std::vector<int64_t>& shape, const char* what);
void require_contiguous(const Tensor& t, const char* what);
std::string shape_string(const std::vector<int64_t>& shape);


// Normalized axis of a same-shape op (a 0-d tensor: 0 or -1).
int64_t check_axis(int64_t axis, size_t ndim, const char* name);

// Drops size-1 dims and merges a dim into its outer neighbour when the
// outer one steps exactly over it.
std::vector<Dim> coalesce(const std::vector<Dim>& dims);
int64_t numel_of(const std::vector<Dim>& dims);
Dims to_dims(const std::vector<Dim>& dims);
// True when `dims` walk elements 0, 1, 2, ... (no dims, or one of stride 1).
bool is_dense(const std::vector<Dim>& dims);

// Blocks for `items` work items of `per_block` each, capped (kernels loop).
unsigned grid_for(int64_t items, int64_t per_block);

// Throws if the last launch failed.
void check_launch(const char* what);

// `bytes` of device scratch from the core (cd_core_api.workspace_allocate):
// usable by work enqueued on ctx's stream, freed by the core after it.
void* workspace(const cd_kernel_context* ctx, size_t bytes);

// Registers fn with `arity` copies of each dtype in `mask`, the last one
// replaced by `last` when given.
void register_same(cd_kernel_registry* registry, const char* op, cd_kernel_fn fn, uint32_t mask, int arity,
                   cd_dtype_t last = CD_DTYPE_INVALID);

// --- device side -----------------------------------------------------------------------

constexpr int kWarp = 32;

// Sum over a warp in a fixed butterfly order (every lane gets the result).
template <class A, class Combine> __device__ __forceinline__ A warp_reduce(A v, Combine c) {
#pragma unroll
  for (int s = kWarp / 2; s > 0; s /= 2) v = c(v, __shfl_xor_sync(0xffffffffu, v, s));
  return v;
}

// Reduction over the whole block (blockDim.x a multiple of 32, at most
// 1024): warps, then the warp results in warp order. Every thread gets the
// result; `scratch` holds 32 values and may be reused after the call.
template <class A, class Combine> __device__ __forceinline__ A block_reduce(A v, Combine c, A* scratch) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, warps = blockDim.x / kWarp;
  v = warp_reduce(v, c);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = scratch[0];
  for (int w = 1; w < warps; ++w) v = c(v, scratch[w]);
  return v;
}

// Row kernels (softmax.cu, norm.cu) hold a row in registers, V-element
// vectors per item: at most this many items per thread, which keeps a
// 1024-thread block within 64 registers a thread without spilling.
template <class C> constexpr int kRowValues = sizeof(C) == 8 ? 8 : 32;
template <class C, int V> constexpr int kRowItems = kRowValues<C> / V < 8 ? kRowValues<C> / V : 8;
constexpr int kRowThreads = 1024;

struct Plus {
  template <class A> __device__ __forceinline__ A operator()(A a, A b) const { return a + b; }
};
struct Max {
  __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
  __device__ __forceinline__ double operator()(double a, double b) const { return fmax(a, b); }
};

// Registration per file.
void register_reduce_ops(cd_kernel_registry* registry);   // reduce.cu
void register_softmax_ops(cd_kernel_registry* registry);  // softmax.cu
void register_norm_ops(cd_kernel_registry* registry);     // norm.cu

}  // namespace red
}  // namespace chipdock_cuda

#endif  // CHIPDOCK_CUDA_KERNELS_REDUCE_CUH_
