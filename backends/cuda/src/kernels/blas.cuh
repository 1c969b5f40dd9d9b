// The linear-algebra family's shared machinery (matmul.cu, conv.cu,
// attention.cu): checked operand views, stream-ordered scratch memory, a
// strided copy-and-convert kernel, NumPy batch broadcasting, and one
// batched GEMM through cuBLASLt.
//
// Precision (device_api/opset/README.md, precision_tables.tolerance): every
// product accumulates in float32 (float64 for float64) and rounds once.
// float16 / bfloat16 run on tensor cores with CUBLAS_COMPUTE_32F; float32
// uses CUBLAS_COMPUTE_32F without TF32, whose 10-bit mantissa the float32
// tolerance (eps_acc = 2^-24) does not allow; float64 CUBLAS_COMPUTE_64F.
#ifndef CHIPDOCK_CUDA_KERNELS_BLAS_CUH_
#define CHIPDOCK_CUDA_KERNELS_BLAS_CUH_

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "../cuda_check.h"
#include "../error.h"
#include "chipdock/cd_kernel.h"
#include "kernels.h"

namespace chipdock_cuda {
namespace blas {

using Dims = std::vector<int64_t>;

int64_t itemsize(cd_dtype_t dtype);
bool is_float(cd_dtype_t dtype);
const char* dtype_name(cd_dtype_t dtype);
int64_t product(const Dims& v);

// The dtype products are computed and accumulated in: float32 for the
// 16-bit floats, the dtype itself otherwise.
cd_dtype_t compute_dtype(cd_dtype_t dtype);

// ---------------------------------------------------------------- operands --

// A checked operand: host copies of shape and strides (elements) and the
// address of element (0, ..., 0).
struct Tensor {
  cd_dtype_t dtype = CD_DTYPE_INVALID;
  Dims shape, strides;
  char* origin = nullptr;

  size_t ndim() const { return shape.size(); }
  int64_t numel() const { return product(shape); }
  int64_t dim(int64_t i) const { return shape[i < 0 ? static_cast<int64_t>(shape.size()) + i : i]; }
  int64_t stride(int64_t i) const { return strides[i < 0 ? static_cast<int64_t>(strides.size()) + i : i]; }
};

// Validates ctx (op name, [min_in, max_in] non-NULL inputs, one output, the
// stream on ctx->device), makes the device current and returns the stream.
cudaStream_t begin(const cd_kernel_context* ctx, int32_t min_in, int32_t max_in);

// Input i / the output as a Tensor: format, device, dtype (all inputs have
// the output's dtype, one of the float dtypes), memory inside one live
// allocation, element-aligned. The output must be C-contiguous.
Tensor input(const cd_kernel_context* ctx, int32_t i);
Tensor output(const cd_kernel_context* ctx);

void require_ndim(const Tensor& t, size_t ndim, const char* what);

// NumPy broadcast of two shapes, or INVALID_ARGUMENT naming `what`.
Dims broadcast_shapes(const Dims& a, const Dims& b, const char* what);
// The strides of t's first `lead` dims right-aligned to `target` (0 where
// broadcast), or INVALID_ARGUMENT naming `what`.
Dims align_batch(const Tensor& t, size_t lead, const Dims& target, const char* what);

// ----------------------------------------------------------------- scratch --

// Device memory from the stream-ordered pool: allocated and freed on
// `stream`, so it is reused only after the work queued before the free.
class Scratch {
 public:
  Scratch(size_t bytes, cudaStream_t stream);
  ~Scratch();
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  char* data() const { return static_cast<char*>(p_); }

 private:
  void* p_ = nullptr;
  cudaStream_t stream_;
};

// ------------------------------------------------------------------ copies --

constexpr int kMaxDims = 12;

// dst[i...] = src[i...] (* scale when `scaled`) over `shape`, converting
// from `from` to `to` (float dtypes; 16-bit floats round once, to nearest
// even; a scaled value is computed in float64 and rounded once). Strides in
// elements, any sign. Enqueued on `stream`.
void copy_convert(const void* src, cd_dtype_t from, const Dims& src_strides, void* dst, cd_dtype_t to,
                  const Dims& dst_strides, const Dims& shape, cudaStream_t stream, bool scaled = false,
                  double scale = 1.0);

// C-contiguous strides of `shape`.
Dims contiguous_strides(const Dims& shape);

// Fills `count` elements of dtype `dtype` at dst with `value` (rounded once).
void fill(void* dst, cd_dtype_t dtype, int64_t count, double value, cudaStream_t stream);

// -------------------------------------------------------------------- GEMM --

// One matrix operand (rows x cols, strides in elements, batch stride 0 =
// shared by every batch entry).
struct Mat {
  const void* data = nullptr;
  cd_dtype_t dtype = CD_DTYPE_INVALID;
  int64_t rows = 0, cols = 0, rs = 0, cs = 0, batch_stride = 0;
};

// Strides of size-1 dims do not matter: gives them values that make the
// matrix row- or column-major where the other stride allows.
void normalize(Mat& m);
// True if cuBLASLt takes the matrix as it is: one unit stride and a
// leading dimension covering the other extent, no negative batch stride.
bool direct(Mat m);

// D[b] = alpha * A[b] @ B[b] + beta * D[b] for b < batch, D row-major with
// row stride ldd (unit column stride) and batch stride d_stride. A and B
// must be `direct` and of one dtype; D is of A's dtype or of its compute
// dtype (float32 scores from 16-bit inputs). K may not be 0 (callers fill
// beta * D themselves). beta == 0 does not read D.
struct Gemm {
  int64_t M = 0, N = 0, K = 0, batch = 1;
  Mat a, b;
  void* d = nullptr;
  cd_dtype_t d_dtype = CD_DTYPE_INVALID;
  int64_t ldd = 0, d_stride = 0;
  double alpha = 1.0, beta = 0.0;
};

void gemm(int32_t device, cudaStream_t stream, const Gemm& g);

// Replaces operand m by a contiguous copy in dtype `to` over the batch dims
// (extents `batch`, m's strides over them `bstrides`) it steps over; dims it
// broadcasts (stride 0) stay broadcast. Updates m and bstrides and returns
// the copy's memory.
std::unique_ptr<Scratch> pack(Mat& m, Dims& bstrides, const Dims& batch, cd_dtype_t to, cudaStream_t stream);

// True if any stride is negative.
bool steps_backwards(const Dims& strides);

}  // namespace blas
}  // namespace chipdock_cuda

#endif  // CHIPDOCK_CUDA_KERNELS_BLAS_CUH_
