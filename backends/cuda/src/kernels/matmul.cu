// matmul and gemm through cuBLASLt (see blas.cuh for the precision).
//
// matmul: a (..., M, K) @ b (..., K, N) with NumPy batch broadcasting and
// numpy.matmul's promotion of 1-d operands, whether or not the dispatcher
// expanded them (as the CPU reference, linalg.cpp). The output is
// C-contiguous with numpy.matmul's shape or the promoted one (the same
// memory). gemm: out = alpha * op(a) @ op(b) + beta * c for 2-d a and b; c
// broadcasts to (M, N) and is not read when beta == 0, as in BLAS.
//
// Strided operands go to cuBLASLt as they are when one of their matrix
// strides is 1 (the other is the leading dimension) and batch dims step
// uniformly (stride 0 = broadcast); anything else is first copied into a
// contiguous scratch buffer. A batch broadcast only in b folds into a's rows
// (a linear layer over a batch is one product).
#include <utility>

#include "blas.cuh"
#include "kernels.h"

namespace chipdock_cuda {
namespace {

using blas::Dims;
using blas::Mat;
using blas::Scratch;

// out[batch..., M, N] (contiguous) = alpha * a[batch..., M, K] @ b[batch..., K, N] + beta * out.
struct Plan {
  Dims batch, sa, sb;  // batch extents and a's / b's strides over them (elements, 0 = broadcast)
  Mat a, b;
  int64_t M = 0, N = 0, K = 0;
};

// Drops size-1 batch dims, merges neighbours that step uniformly in both
// operands, then folds trailing batch dims b does not step over into M.
void simplify(Plan& p) {
  Dims batch, sa, sb;
  for (size_t i = 0; i < p.batch.size(); ++i) {
    const int64_t n = p.batch[i];
    if (n == 1) continue;
    if (!batch.empty() && sa.back() == p.sa[i] * n && sb.back() == p.sb[i] * n) {
      batch.back() *= n;
      sa.back() = p.sa[i];
      sb.back() = p.sb[i];
      continue;
    }
    batch.push_back(n);
    sa.push_back(p.sa[i]);
    sb.push_back(p.sb[i]);
  }
  blas::normalize(p.a);
  blas::normalize(p.b);
  while (!batch.empty() && sb.back() == 0 && sa.back() > 0 && (p.M == 1 || sa.back() == p.M * p.a.rs)) {
    if (p.M == 1) p.a.rs = sa.back();
    p.M *= batch.back();
    p.a.rows = p.M;
    batch.pop_back();
    sa.pop_back();
    sb.pop_back();
    blas::normalize(p.a);
  }
  p.batch = std::move(batch);
  p.sa = std::move(sa);
  p.sb = std::move(sb);
}

// Runs a planned product (K > 0, nothing empty) into the contiguous `out`.
void run(int32_t device, cudaStream_t stream, Plan p, char* out, cd_dtype_t dtype, double alpha, double beta) {
  simplify(p);
  std::unique_ptr<Scratch> abuf, bbuf;
  p.a.batch_stride = p.sa.empty() ? 0 : p.sa.back();
  p.b.batch_stride = p.sb.empty() ? 0 : p.sb.back();
  if (!blas::direct(p.a) || blas::steps_backwards(p.sa)) abuf = blas::pack(p.a, p.sa, p.batch, p.a.dtype, stream);
  if (!blas::direct(p.b) || blas::steps_backwards(p.sb)) bbuf = blas::pack(p.b, p.sb, p.batch, p.b.dtype, stream);
  const int64_t inner = p.batch.empty() ? 1 : p.batch.back();
  const int64_t outer = p.batch.empty() ? 1 : blas::product(p.batch) / inner;
  const int64_t item = blas::itemsize(dtype);
  blas::Gemm g;
  g.M = p.M;
  g.N = p.N;
  g.K = p.K;
  g.batch = inner;
  g.d_dtype = dtype;
  g.ldd = p.N;
  g.d_stride = p.M * p.N;
  g.alpha = alpha;
  g.beta = beta;
  for (int64_t idx = 0; idx < outer; ++idx) {  // batch dims that do not merge: one call each
    int64_t ao = 0, bo = 0, rest = idx;
    for (size_t i = p.batch.size() - (p.batch.empty() ? 0 : 1); i-- > 0;) {
      const int64_t k = rest % p.batch[i];
      rest /= p.batch[i];
      ao += k * p.sa[i];
      bo += k * p.sb[i];
    }
    g.a = p.a;
    g.b = p.b;
    g.a.batch_stride = p.sa.empty() ? 0 : p.sa.back();
    g.b.batch_stride = p.sb.empty() ? 0 : p.sb.back();
    g.a.data = static_cast<const char*>(p.a.data) + ao * item;
    g.b.data = static_cast<const char*>(p.b.data) + bo * item;
    g.d = out + idx * inner * p.M * p.N * item;
    blas::gemm(device, stream, g);
  }
}

// ------------------------------------------------------------------ matmul --

void enqueue_matmul(const cd_kernel_context* ctx) {
  cudaStream_t stream = blas::begin(ctx, 2, 2);
  const blas::Tensor out = blas::output(ctx), a = blas::input(ctx, 0), b = blas::input(ctx, 1);
  if (a.ndim() == 0 || b.ndim() == 0) fail(CD_STATUS_INVALID_ARGUMENT, "matmul does not take 0-d operands");
  const bool a_vec = a.ndim() == 1, b_vec = b.ndim() == 1;
  Plan p;
  p.M = a_vec ? 1 : a.dim(-2);
  p.K = a.dim(-1);
  p.N = b_vec ? 1 : b.dim(-1);
  const int64_t k2 = b_vec ? b.dim(0) : b.dim(-2);
  if (k2 != p.K) {
    fail(CD_STATUS_INVALID_ARGUMENT, "inner dimensions differ: a has %lld columns, b %lld rows",
         static_cast<long long>(p.K), static_cast<long long>(k2));
  }
  const size_t a_batch = a_vec ? 0 : a.ndim() - 2, b_batch = b_vec ? 0 : b.ndim() - 2;
  p.batch = blas::broadcast_shapes(Dims(a.shape.begin(), a.shape.begin() + a_batch),
                                   Dims(b.shape.begin(), b.shape.begin() + b_batch), "matmul batch dims");
  Dims full = p.batch, numpy = p.batch;
  full.push_back(p.M);
  full.push_back(p.N);
  if (!a_vec) numpy.push_back(p.M);
  if (!b_vec) numpy.push_back(p.N);
  if (out.shape != full && out.shape != numpy) {
    fail(CD_STATUS_INVALID_ARGUMENT, "output has %zu dims and %lld elements; expected the shape of numpy.matmul "
         "(%zu dims)", out.ndim(), static_cast<long long>(out.numel()), numpy.size());
  }
  p.sa = blas::align_batch(a, a_batch, p.batch, "a");
  p.sb = blas::align_batch(b, b_batch, p.batch, "b");
  p.a = Mat{a.origin, a.dtype, p.M, p.K, a_vec ? 0 : a.stride(-2), a.stride(-1), 0};
  p.b = Mat{b.origin, b.dtype, p.K, p.N, b_vec ? b.stride(0) : b.stride(-2), b_vec ? 0 : b.stride(-1), 0};
  if (out.numel() == 0) return;
  if (p.K == 0) {  // an empty sum
    check(cudaMemsetAsync(out.origin, 0, static_cast<size_t>(out.numel() * blas::itemsize(out.dtype)), stream),
          "cudaMemsetAsync");
    return;
  }
  run(ctx->device, stream, std::move(p), out.origin, out.dtype, 1.0, 0.0);
}

cd_error* matmul_kernel(const cd_kernel_context* ctx) noexcept {
  return guard("matmul", [ctx] { enqueue_matmul(ctx); });
}

// -------------------------------------------------------------------- gemm --

void enqueue_gemm(const cd_kernel_context* ctx) {
  cudaStream_t stream = blas::begin(ctx, 2, 3);
  const blas::Tensor out = blas::output(ctx), a = blas::input(ctx, 0), b = blas::input(ctx, 1);
  const double alpha = float_attribute(ctx, "alpha", 1.0), beta = float_attribute(ctx, "beta", 1.0);
  const bool ta = int_attribute(ctx, "trans_a", 0) != 0, tb = int_attribute(ctx, "trans_b", 0) != 0;
  blas::require_ndim(a, 2, "a");
  blas::require_ndim(b, 2, "b");
  blas::require_ndim(out, 2, "the output");
  Plan p;
  p.M = a.shape[ta ? 1 : 0];
  p.K = a.shape[ta ? 0 : 1];
  p.N = b.shape[tb ? 0 : 1];
  const int64_t k2 = b.shape[tb ? 1 : 0];
  if (k2 != p.K) {
    fail(CD_STATUS_INVALID_ARGUMENT, "inner dimensions differ (%lld vs %lld)", static_cast<long long>(p.K),
         static_cast<long long>(k2));
  }
  if (out.shape[0] != p.M || out.shape[1] != p.N) {
    fail(CD_STATUS_INVALID_ARGUMENT, "output is %lldx%lld, expected %lldx%lld", static_cast<long long>(out.shape[0]),
         static_cast<long long>(out.shape[1]), static_cast<long long>(p.M), static_cast<long long>(p.N));
  }
  p.a = Mat{a.origin, a.dtype, p.M, p.K, a.strides[ta ? 1 : 0], a.strides[ta ? 0 : 1], 0};
  p.b = Mat{b.origin, b.dtype, p.K, p.N, b.strides[tb ? 1 : 0], b.strides[tb ? 0 : 1], 0};
  Dims c_strides;
  blas::Tensor c;
  if (ctx->num_inputs == 3) {
    c = blas::input(ctx, 2);
    if (c.ndim() > 2) fail(CD_STATUS_INVALID_ARGUMENT, "c has %zu dims; at most 2", c.ndim());
    c_strides = blas::align_batch(c, c.ndim(), out.shape, "c");
  }
  if (out.numel() == 0) return;
  const bool use_c = ctx->num_inputs == 3 && beta != 0.0;
  const Dims out_strides = blas::contiguous_strides(out.shape);
  if (p.K == 0) {  // an empty sum: beta * c (computed in float64, rounded once) or zeros
    if (use_c) {
      blas::copy_convert(c.origin, c.dtype, c_strides, out.origin, out.dtype, out_strides, out.shape, stream, true,
                         beta);
    } else {
      check(cudaMemsetAsync(out.origin, 0, static_cast<size_t>(out.numel() * blas::itemsize(out.dtype)), stream),
            "cudaMemsetAsync");
    }
    return;
  }
  // c broadcast into the output, then cuBLASLt adds alpha * a @ b to beta times it.
  if (use_c) blas::copy_convert(c.origin, c.dtype, c_strides, out.origin, out.dtype, out_strides, out.shape, stream);
  run(ctx->device, stream, std::move(p), out.origin, out.dtype, alpha, use_c ? beta : 0.0);
}

cd_error* gemm_kernel(const cd_kernel_context* ctx) noexcept {
  return guard("gemm", [ctx] { enqueue_gemm(ctx); });
}

}  // namespace

void register_matmul(cd_kernel_registry* registry) {
  static const cd_dtype_t kTypes[4] = {CD_DTYPE_FLOAT32, CD_DTYPE_FLOAT16, CD_DTYPE_BFLOAT16, CD_DTYPE_FLOAT64};
  static cd_dtype_t mm[4][3], gm[4][4];  // outlive registration, as copy.cu's tables
  for (int i = 0; i < 4; ++i) {
    for (cd_dtype_t& d : mm[i]) d = kTypes[i];
    for (cd_dtype_t& d : gm[i]) d = kTypes[i];
    register_kernel(registry, "matmul", mm[i], 3, matmul_kernel);
    register_kernel(registry, "gemm", gm[i], 4, gemm_kernel);
  }
}

}  // namespace chipdock_cuda
