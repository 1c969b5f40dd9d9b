// The elementwise family's shared machinery (elementwise*.cu): dtypes as
// C++ types, loads and stores (float16 and bfloat16 compute in float32 and
// round once), the operand loop, and one kernel template per op functor.
//
// A functor F describes one (op, dtype signature): F::N inputs of types
// F::A0, F::A1, F::A2 and an output of type F::Out. ew_kernel<F> walks the
// output's linear index (64-bit, grid-stride); all-contiguous operands
// index directly, anything else decomposes the index over the coalesced
// shape and the byte strides of each operand.
#ifndef CHIPDOCK_CUDA_KERNELS_ELEMENTWISE_CUH_
#define CHIPDOCK_CUDA_KERNELS_ELEMENTWISE_CUH_

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <type_traits>

#include "../cuda_check.h"
#include "../error.h"
#include "chipdock/cd_kernel.h"
#include "kernels.h"

namespace chipdock_cuda {
namespace ew {

using half = __half;
using bf16 = __nv_bfloat16;

template <class T> struct Tag { using type = T; };

template <class T> constexpr bool kIsFloat =
    std::is_floating_point_v<T> || std::is_same_v<T, half> || std::is_same_v<T, bf16>;

// The arithmetic type of T: float32 for the 16-bit floats, T otherwise.
template <class T> using compute_t =
    std::conditional_t<std::is_same_v<T, half> || std::is_same_v<T, bf16>, float, T>;

template <class T> constexpr cd_dtype_t dtype_of() {
  if constexpr (std::is_same_v<T, float>) return CD_DTYPE_FLOAT32;
  else if constexpr (std::is_same_v<T, half>) return CD_DTYPE_FLOAT16;
  else if constexpr (std::is_same_v<T, bf16>) return CD_DTYPE_BFLOAT16;
  else if constexpr (std::is_same_v<T, double>) return CD_DTYPE_FLOAT64;
  else if constexpr (std::is_same_v<T, int8_t>) return CD_DTYPE_INT8;
  else if constexpr (std::is_same_v<T, int16_t>) return CD_DTYPE_INT16;
  else if constexpr (std::is_same_v<T, int32_t>) return CD_DTYPE_INT32;
  else if constexpr (std::is_same_v<T, int64_t>) return CD_DTYPE_INT64;
  else if constexpr (std::is_same_v<T, uint8_t>) return CD_DTYPE_UINT8;
  else return CD_DTYPE_BOOL;
}

template <class T> __device__ __forceinline__ compute_t<T> load(T x) {
  if constexpr (std::is_same_v<T, half>) return __half2float(x);
  else if constexpr (std::is_same_v<T, bf16>) return __bfloat162float(x);
  else return x;
}

// One rounding from float32 or float64 to T (a float type).
template <class T, class V> __device__ __forceinline__ T store(V v) {
  if constexpr (std::is_same_v<T, half>) {
    if constexpr (std::is_same_v<V, double>) return __double2half(v);
    else return __float2half_rn(v);
  } else if constexpr (std::is_same_v<T, bf16>) {
    if constexpr (std::is_same_v<V, double>) return __double2bfloat16(v);
    else return __float2bfloat16_rn(v);
  } else {
    return static_cast<T>(v);
  }
}

// Calls fn(Tag<T>{}) for the C++ type of `dtype`; the set is given by Mask
// (bit d for dtype d), others fail.
constexpr uint32_t bit(cd_dtype_t d) { return 1u << d; }
constexpr uint32_t kFloatMask = bit(CD_DTYPE_FLOAT32) | bit(CD_DTYPE_FLOAT16) | bit(CD_DTYPE_BFLOAT16) |
                                bit(CD_DTYPE_FLOAT64);
constexpr uint32_t kSignedIntMask = bit(CD_DTYPE_INT8) | bit(CD_DTYPE_INT16) | bit(CD_DTYPE_INT32) |
                                    bit(CD_DTYPE_INT64);
constexpr uint32_t kSignedNumericMask = kFloatMask | kSignedIntMask;
constexpr uint32_t kNumericMask = kSignedNumericMask | bit(CD_DTYPE_UINT8);
constexpr uint32_t kAllMask = kNumericMask | bit(CD_DTYPE_BOOL);
constexpr uint32_t kBoolMask = bit(CD_DTYPE_BOOL);

template <uint32_t Mask, class Fn> void dispatch(cd_dtype_t d, Fn&& fn) {
#define CD_EW_CASE(D, T)                                   \
  case D:                                                  \
    if constexpr ((Mask & bit(D)) != 0) return fn(Tag<T>{}); \
    break;
  switch (d) {
    CD_EW_CASE(CD_DTYPE_FLOAT32, float)
    CD_EW_CASE(CD_DTYPE_FLOAT16, half)
    CD_EW_CASE(CD_DTYPE_BFLOAT16, bf16)
    CD_EW_CASE(CD_DTYPE_FLOAT64, double)
    CD_EW_CASE(CD_DTYPE_INT8, int8_t)
    CD_EW_CASE(CD_DTYPE_INT16, int16_t)
    CD_EW_CASE(CD_DTYPE_INT32, int32_t)
    CD_EW_CASE(CD_DTYPE_INT64, int64_t)
    CD_EW_CASE(CD_DTYPE_UINT8, uint8_t)
    CD_EW_CASE(CD_DTYPE_BOOL, bool)
    default: break;
  }
#undef CD_EW_CASE
  fail(CD_STATUS_UNIMPLEMENTED, "no kernel for dtype %d", d);
}

// Registers `fn` for op with one signature per dtype in Mask: `num_in`
// inputs of that dtype (where: a bool condition first) and an output of
// that dtype, or bool when `bool_out`.
void register_group(cd_kernel_registry* registry, const char* op, cd_kernel_fn fn, uint32_t mask,
                    int num_in, bool bool_out = false, bool cond_first = false);
void register_one(cd_kernel_registry* registry, const char* op, cd_kernel_fn fn, const cd_dtype_t* dtypes,
                  int num_dtypes);

constexpr int kMaxDims = 12;
constexpr int kMaxOperands = 4;  // the output, then up to 3 inputs

struct Loop {
  int32_t ndim;
  int32_t contiguous;  // every operand dense in order: index directly
  int64_t numel;
  int64_t shape[kMaxDims];
  int64_t stride[kMaxOperands][kMaxDims];  // bytes
};

struct Operands {
  char* out;
  const char* in[kMaxOperands - 1];
};

// Validates ctx against the signature (`dtypes`: output, then inputs;
// shapes equal to the output's; no stride-0 output dims; memory in live
// allocations; aligned elements), coalesces the dims and returns the loop
// and operand pointers. Returns false when there is nothing to do.
bool prepare(const cd_kernel_context* ctx, int num_in, const cd_dtype_t* dtypes, Loop* loop, Operands* ops,
             cudaStream_t* stream);


template <class F> __device__ __forceinline__ void apply(const F& f, const Operands& ops, int64_t i,
                                                         const int64_t* off) {
  using Out = typename F::Out;
  const auto* a0 = reinterpret_cast<const typename F::A0*>(ops.in[0] + off[1]);
  Out r;
  if constexpr (F::N == 1) {
    r = f(*a0);
  } else if constexpr (F::N == 2) {
    r = f(*a0, *reinterpret_cast<const typename F::A1*>(ops.in[1] + off[2]));
  } else {
    r = f(*a0, *reinterpret_cast<const typename F::A1*>(ops.in[1] + off[2]),
          *reinterpret_cast<const typename F::A2*>(ops.in[2] + off[3]));
  }
  *reinterpret_cast<Out*>(ops.out + off[0]) = r;
  (void)i;
}

template <class F> __global__ void ew_kernel(F f, Operands ops, Loop loop) {
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (loop.contiguous) {
    for (; i < loop.numel; i += step) {
      const int64_t off[kMaxOperands] = {i * static_cast<int64_t>(sizeof(typename F::Out)),
                                         i * static_cast<int64_t>(sizeof(typename F::A0)),
                                         i * static_cast<int64_t>(sizeof(typename F::A1)),
                                         i * static_cast<int64_t>(sizeof(typename F::A2))};
      apply(f, ops, i, off);
    }
    return;
  }
  for (; i < loop.numel; i += step) {
    int64_t off[kMaxOperands] = {0, 0, 0, 0};
    int64_t rest = i;
    for (int d = loop.ndim - 1; d >= 0; --d) {
      const int64_t k = rest % loop.shape[d];
      rest /= loop.shape[d];
#pragma unroll
      for (int o = 0; o <= F::N; ++o) off[o] += k * loop.stride[o][d];
    }
    apply(f, ops, i, off);
  }
}

constexpr int kThreads = 256;

// Checks ctx for F's signature and enqueues F on the context's stream.
template <class F> void launch(const cd_kernel_context* ctx, const F& f, const char* what) {
  const cd_dtype_t dtypes[kMaxOperands] = {dtype_of<typename F::Out>(), dtype_of<typename F::A0>(),
                                           dtype_of<typename F::A1>(), dtype_of<typename F::A2>()};
  Loop loop;
  Operands ops;
  cudaStream_t stream;
  if (!prepare(ctx, F::N, dtypes, &loop, &ops, &stream)) return;
  const int64_t blocks = (loop.numel + kThreads - 1) / kThreads;
  const unsigned grid = static_cast<unsigned>(blocks < 65535 * 16 ? blocks : 65535 * 16);
  ew_kernel<F><<<grid, kThreads, 0, stream>>>(f, ops, loop);
  check(cudaGetLastError(), what);
}

// Signatures with unused operand slots name `char` there.
template <class O, class I0, class I1 = char, class I2 = char, int Arity = 1> struct Sig {
  using Out = O;
  using A0 = I0;
  using A1 = I1;
  using A2 = I2;
  static constexpr int N = Arity;
};

// Registration per file.
void register_binary(cd_kernel_registry* registry);   // elementwise_binary.cu
void register_unary(cd_kernel_registry* registry);    // elementwise_unary.cu
void register_compare(cd_kernel_registry* registry);  // elementwise_compare.cu
void register_cast(cd_kernel_registry* registry);     // elementwise_cast.cu

}  // namespace ew
}  // namespace chipdock_cuda

#endif  // CHIPDOCK_CUDA_KERNELS_ELEMENTWISE_CUH_
