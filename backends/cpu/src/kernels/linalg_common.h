// Shared pieces of the linear-algebra / NN kernel family (linalg*.cpp,
// conv*.cpp, pool*.cpp, attention*.cpp): context and attribute checks,
// host views of tensors, packing with dtype conversion, reusable scratch
// buffers and the float64 blocked GEMM.
#ifndef CHIPDOCK_CPU_KERNELS_LINALG_COMMON_H_
#define CHIPDOCK_CPU_KERNELS_LINALG_COMMON_H_

#include <cstddef>
#include <cstdint>
#include <exception>
#include <mutex>
#include <vector>

#include "chipdock/cd_kernel.h"
#include "chipdock/support/attributes.h"
#include "numeric.h"
#include "tensor.h"

namespace chipdock_cpu {
namespace linalg {

// ---------------------------------------------------------------- context --

// Validates the context header and that there are [min_inputs, max_inputs]
// inputs and exactly one output, all non-NULL. Throws INVALID_ARGUMENT.
void check_context(const cd_kernel_context* ctx, int32_t min_inputs, int32_t max_inputs);

// Resolves input `i` / the output to host views (see tensor.h).
HostTensor input(const cd_kernel_context* ctx, int32_t i);
HostTensor output(const cd_kernel_context* ctx);

// Throws INVALID_ARGUMENT unless every input has the output's dtype.
void check_same_dtype(const std::vector<HostTensor>& inputs, const HostTensor& out);

// Throws INVALID_ARGUMENT unless `t` has `ndim` dims ("<what> must be 4-d").
void require_ndim(const HostTensor& t, size_t ndim, const char* what);

// Attributes. The dispatcher always passes every declared attribute; these
// fall back to the spec's default when one is absent (raw launches) and
// throw INVALID_ARGUMENT on a wrong type. `float` attributes accept INT too.
// They are the backend kit's typed readers (chipdock/support/attributes.h).
using chipdock::support::find_attribute;
inline int64_t attr_int(const cd_kernel_context* ctx, const char* name, int64_t fallback) {
  return chipdock::support::int_attribute(ctx, name, fallback);
}
inline double attr_float(const cd_kernel_context* ctx, const char* name, double fallback) {
  return chipdock::support::float_attribute(ctx, name, fallback);
}
// `length` >= 0 demands exactly that many values; absent -> `fallback`.
inline std::vector<int64_t> attr_ints(const cd_kernel_context* ctx, const char* name, int64_t length,
                                      const std::vector<int64_t>& fallback) {
  if (length < 0) return chipdock::support::ints_attribute(ctx, name, fallback);
  return chipdock::support::ints_attribute(ctx, name, fallback, static_cast<size_t>(length));
}

// The sliding window of conv2d, conv_transpose2d and the pools: strides,
// padding (top, left, bottom, right) and dilation.
using Window2d = chipdock::support::Window2d;

// Reads `stride` (default `default_stride`), `padding` and, when
// `with_dilation`, `dilation`; strides and dilations must be >= 1, padding
// >= 0 (INVALID_ARGUMENT otherwise).
inline Window2d window_attributes(const cd_kernel_context* ctx, const std::vector<int64_t>& default_stride,
                                  bool with_dilation) {
  return chipdock::support::window2d_attributes(ctx, default_stride, with_dilation);
}

// ------------------------------------------------------------------ views --

// A host-addressable strided array (strides in elements, any sign, 0 = broadcast).
struct View {
  cd_dtype_t dtype = CD_DTYPE_INVALID;
  std::vector<int64_t> shape, strides;
  char* data = nullptr;  // element (0, ..., 0)

  size_t ndim() const { return shape.size(); }
  size_t itemsize() const { return dtype_size(dtype); }
  int64_t numel() const;
  // Dimension / stride counted from the end when negative (-1 = last).
  int64_t dim(int64_t i) const { return shape[i < 0 ? shape.size() + i : i]; }
  int64_t stride(int64_t i) const { return strides[i < 0 ? strides.size() + i : i]; }
};

View to_view(const HostTensor& t);

// Scratch memory, 64-byte aligned, recycled through a small per-thread pool
// (page faults of fresh multi-MB allocations cost as much as the work).
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(size_t bytes) { allocate(bytes); }
  ~Buffer() { release(); }
  Buffer(Buffer&& o) noexcept : p_(o.p_), size_(o.size_) { o.p_ = nullptr; o.size_ = 0; }
  Buffer& operator=(Buffer&& o) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void allocate(size_t bytes);  // drops the old memory; throws OUT_OF_MEMORY
  void* data() const { return p_; }
  template <class T> T* as() const { return static_cast<T*>(p_); }

 private:
  void release() noexcept;
  void* p_ = nullptr;
  size_t size_ = 0;
};

// Copies `src` into `dst` (contiguous, dtype `to`), converting between the
// float dtypes (16-bit floats round once, to nearest even) or copying
// same-dtype data of any dtype. Runs on the OpenMP threads when large.
void copy_convert(const View& src, cd_dtype_t to, void* dst);

// A compact copy of `v` in dtype `to`: broadcast dims (stride 0) stay
// broadcast, so an expanded operand is not materialized. The result has
// v's shape, non-negative strides and a unit innermost stride unless that
// dim is broadcast. `buf` owns the memory.
View pack(const View& v, cd_dtype_t to, Buffer& buf);

// A C-contiguous copy of `v` in dtype `to`, broadcast dims materialized.
View materialize(const View& v, cd_dtype_t to, Buffer& buf);

// The layouts pack / materialize give `v` (data NULL), known before copying.
View packed_layout(const View& v, cd_dtype_t to);
View dense_layout(const View& v, cd_dtype_t to);

// Writes n float values as dtype `to` (float32, float16, bfloat16) to dst.
void store_from_f32(const float* src, cd_dtype_t to, void* dst, int64_t n);

// True if any dim of size > 1 has a stride < 0.
bool has_negative_stride(const View& v);

// Batch broadcasting: `shape` right-aligned against `target` (NumPy rules).
// Returns the strides of `v`'s first `v_batch` dims aligned to `target`
// (0 where broadcast); throws INVALID_ARGUMENT naming `what` if they do
// not broadcast.
std::vector<int64_t> align_batch(const View& v, size_t v_batch, const std::vector<int64_t>& target,
                                 const char* what);

// NumPy broadcast of two shapes, or throws INVALID_ARGUMENT.
std::vector<int64_t> broadcast_shapes(const std::vector<int64_t>& a, const std::vector<int64_t>& b,
                                      const char* what);

// Number of OpenMP threads a parallel region gets here.
int max_threads();


// ------------------------------------------------------------ float64 GEMM --

// C[M,N] = alpha * A[M,K] @ B[K,N] + beta * C, in float64. A and B have any
// strides (in elements); C has row stride ldc and unit column stride. With
// beta == 0, C is not read (NaN there does not propagate). `parallel` lets
// it use the OpenMP threads.
void gemm_f64(int64_t M, int64_t N, int64_t K, double alpha, const double* A, int64_t a_rs,
              int64_t a_cs, const double* B, int64_t b_rs, int64_t b_cs, double beta, double* C,
              int64_t ldc, bool parallel);

// C (row stride ldc, unit column stride) = A[M,K] @ B[K,N] in float32
// through oneDNN (cached primitives). A and B: any strides >= 0.
void matmul_f32(int64_t M, int64_t N, int64_t K, const float* A, int64_t a_rs, int64_t a_cs,
                const float* B, int64_t b_rs, int64_t b_cs, float* C, int64_t ldc);

// ---------------------------------------------------------- registration --

void register_conv(cd_kernel_registry* registry);       // conv.cpp
void register_pool(cd_kernel_registry* registry);       // pool.cpp
void register_attention(cd_kernel_registry* registry);  // attention.cpp

// The four float dtypes of the spec's `float` group.
extern const cd_dtype_t kFloatTypes[4];

}  // namespace linalg
}  // namespace chipdock_cpu

#endif  // CHIPDOCK_CPU_KERNELS_LINALG_COMMON_H_
