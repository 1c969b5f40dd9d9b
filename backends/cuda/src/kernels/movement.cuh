// Shared by the data-movement, ordering and pooling kernels (movement*.cu,
// sort.cu, pool.cu): checked operands, attributes, scratch memory, value
// conversion, index errors found on the device, and the C-order index
// decomposition the kernels use.
//
// Conventions (those of the CPU reference, backends/cpu/src/kernels/
// movement_common.h): every kernel validates shapes, dtypes and attributes
// before enqueueing; outputs are C-contiguous (the contract), inputs may have
// any strides (zero and negative included). Byte-moving ops move elements as
// words of their size, so they are exact for every dtype.
//
// Index errors: indices are read on the device; a bad one sets a flag in
// scratch memory. The kernel call then waits for its stream and reports
// OUT_OF_RANGE naming the op, the index, the axis and its size (the CPU
// reference reports the same error at the stream's next synchronization;
// here it comes from the call itself, so the output is never read unchecked).
#ifndef CHIPDOCK_CUDA_KERNELS_MOVEMENT_CUH_
#define CHIPDOCK_CUDA_KERNELS_MOVEMENT_CUH_

#include <cmath>
#include <cstdint>
#include <cuda/std/limits>
#include <limits>
#include <string>
#include <vector>

#include "elementwise.cuh"
#include "kernels.h"

namespace chipdock_cuda {
namespace mv {

using ew::bf16;
using ew::half;

// Dims a kernel's index decomposition handles (gather's output has the
// data's dims plus the indices' dims minus one).
constexpr int kMaxDims = 16;
constexpr int kThreads = 256;

// Every dtype of the opset's groups, in ABI order.
extern const cd_dtype_t kAllDtypes[10];
extern const cd_dtype_t kNumericDtypes[9];
extern const cd_dtype_t kFloatDtypes[4];
extern const cd_dtype_t kIndexDtypes[2];

const char* dtype_name(cd_dtype_t dtype);
int64_t itemsize(cd_dtype_t dtype);

// A checked operand: its first element's address, dtype, shape and ELEMENT
// strides.
struct Tensor {
  char* origin = nullptr;
  cd_dtype_t dtype = CD_DTYPE_FLOAT32;
  std::vector<int64_t> shape, strides;
  int64_t numel = 1;
  int64_t item = 4;

  int32_t ndim() const { return static_cast<int32_t>(shape.size()); }
  bool contiguous() const;                  // C order, size-1 dims ignored
  std::vector<int64_t> byte_strides() const;
};

std::vector<int64_t> contiguous_byte_strides(const std::vector<int64_t>& shape, int64_t item);

// A validated kernel call: operand counts in range, a live stream of the
// call's device, that device current on this thread.
struct Call {
  const cd_kernel_context* ctx;
  cudaStream_t stream;
  int32_t device;
};

// max_in / max_out < 0: any number.
Call begin_call(const cd_kernel_context* ctx, int min_in, int max_in, int min_out, int max_out);
// Operand i, its memory checked to lie in one live allocation of the device
// and aligned to its element size; outputs must be C-contiguous.
Tensor input(const Call& call, int32_t i);
Tensor output(const Call& call, int32_t i);

// --- attributes (the dispatcher fills every one) ------------------------------------
int64_t axis_attr(const Call& call, const char* name, int32_t ndim);  // normalized: [0, ndim)

// --- shapes -------------------------------------------------------------------------
int64_t product(const std::vector<int64_t>& v, size_t begin, size_t end);
std::string shape_string(const std::vector<int64_t>& shape);
void require_dtype(const Tensor& t, cd_dtype_t dtype, const char* what);
void require_shape(const Tensor& t, const std::vector<int64_t>& shape, const char* what);
void require_dims(int32_t ndim, const char* what);  // ndim <= kMaxDims

// Scratch memory usable by work on the call's stream (the core's workspace:
// freed after that work, 256-byte aligned).
void* workspace(const Call& call, size_t bytes);

// Blocks for n threads of kThreads each, capped (the kernels stride).
unsigned grid_for(int64_t n);

// Throws "<what>: <cuda error>" if the last launch failed.
void check_launch(const char* what);

// --- index decomposition ------------------------------------------------------------

// Shape and up to K stride sets (any unit) of a C-ordered index space.
template <int K> struct Walk {
  int32_t ndim;
  int64_t shape[kMaxDims];
  int64_t stride[K][kMaxDims];
};

// off[k] = dot(multi-index of linear index i over w.shape, w.stride[k]).
template <int K> __device__ __forceinline__ void walk_offsets(const Walk<K>& w, int64_t i, int64_t* off) {
#pragma unroll
  for (int k = 0; k < K; ++k) off[k] = 0;
  for (int d = w.ndim - 1; d >= 0; --d) {
    const int64_t n = w.shape[d];
    const int64_t q = i / n, c = i - q * n;
    i = q;
#pragma unroll
    for (int k = 0; k < K; ++k) off[k] += c * w.stride[k][d];
  }
}

// --- index errors -------------------------------------------------------------------

struct IndexFault {
  int32_t flag;
  int32_t pad;
  int64_t index, size, axis;
};

// Records the first bad index a thread finds (later ones are dropped).
__device__ __forceinline__ void report_index(IndexFault* f, int64_t index, int64_t size, int64_t axis) {
  if (atomicCAS(&f->flag, 0, 1) == 0) {
    f->index = index;
    f->size = size;
    f->axis = axis;
  }
}

// `raw` normalized into [0, size) (negatives count from the end), or -1
// after reporting it.
__device__ __forceinline__ int64_t wrap_index(int64_t raw, int64_t size, int64_t axis, IndexFault* f) {
  const int64_t k = raw < 0 ? raw + size : raw;
  if (k < 0 || k >= size) {
    report_index(f, raw, size, axis);
    return -1;
  }
  return k;
}

// A cleared fault record on the call's stream; check() waits for the
// stream and throws OUT_OF_RANGE if a kernel reported a bad index.
class IndexCheck {
 public:
  explicit IndexCheck(const Call& call);
  IndexFault* device() const { return fault_; }
  void check() const;

 private:
  const Call& call_;
  IndexFault* fault_;
};

// --- values -------------------------------------------------------------------------

// True if `v` truncated toward zero is a value of the integer dtype `dtype`
// (always true for float and bool dtypes).
bool fits_dtype(double v, cd_dtype_t dtype);

// A double converted to T as the CPU reference's from_double: floats round
// once to nearest even; integers truncate toward zero and saturate (NaN ->
// 0); bool is v != 0. Host and device.
template <class T> __host__ __device__ __forceinline__ T from_double(double v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v != 0.0;
  } else if constexpr (std::is_same_v<T, half>) {
    return __double2half(v);
  } else if constexpr (std::is_same_v<T, bf16>) {
    return __double2bfloat16(v);
  } else if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(v);
  } else {
    if (v != v) return T{0};
    constexpr T kMin = cuda::std::numeric_limits<T>::min(), kMax = cuda::std::numeric_limits<T>::max();
    constexpr double lo = static_cast<double>(kMin);
    constexpr double hi_excl = static_cast<double>(kMax / 2 + 1) * 2.0;  // 2^bits: the first value above
    if (v <= lo) return kMin;
    if (v >= hi_excl) return kMax;
    return static_cast<T>(v);
  }
}

// The bytes of `v` converted to `dtype` (from_double), in the low bytes.
uint64_t value_bits(double v, cd_dtype_t dtype);

// The unsigned word type of an element of `item` bytes: dispatches fn with
// a value of that type.
template <class Fn> void dispatch_word(int64_t item, Fn&& fn) {
  switch (item) {
    case 1: return fn(uint8_t{});
    case 2: return fn(uint16_t{});
    case 4: return fn(uint32_t{});
    case 8: return fn(uint64_t{});
    default: fail(CD_STATUS_INTERNAL, "element size %lld", static_cast<long long>(item));
  }
}

// Registration, one per file.
void register_layout(cd_kernel_registry* registry);  // movement_layout.cu
void register_index(cd_kernel_registry* registry);   // movement_index.cu
void register_fill(cd_kernel_registry* registry);    // movement_fill.cu (arange, full, resize)
void register_sort(cd_kernel_registry* registry);    // sort.cu

}  // namespace mv
}  // namespace chipdock_cuda

#endif  // CHIPDOCK_CUDA_KERNELS_MOVEMENT_CUH_
