// matmul on aclnnMatmul, gemm on aclnnAddmm.
//
// Both pass cubeMathType KEEP_DTYPE: on Atlas A2 a float32 product then
// runs in float32 (ALLOW_FP32_DOWN_PRECISION and USE_HF32 would round the
// inputs to HFLOAT32, far outside the opset's float32 tolerance), and a
// float16/bfloat16 product accumulates in float32 and rounds once.
// float64: no aclnn matmul takes it (aclnnMatmul/aclnnAddmm list FLOAT,
// FLOAT16, BFLOAT16 for A2): declared in unsupported/nn.json.
//
// Operands go to aclnn as the strided views they are (transposes and
// broadcasts included: both ops take non-contiguous tensors); a 1-d operand
// is promoted numpy.matmul's way by a size-1 dim in the descriptor.
#include <algorithm>

#include "nn_common.h"

namespace chipdock_npu {
namespace {

using chipdock::support::bool_attribute;
using chipdock::support::fail;
using chipdock::support::float_attribute;
using chipdock::support::guard;
using nn::Operand;

constexpr int kMaxMatmulDims = 6;  // aclnnMatmul: 1-d to 6-d operands

void enqueue_matmul(const cd_kernel_context* ctx) {
  nn::require_arity(ctx, 2, 2);
  Operand a = nn::input(ctx, 0), b = nn::input(ctx, 1);
  const Operand out = nn::output(ctx, 0);
  if (a.ndim() == 0 || b.ndim() == 0) fail(CD_STATUS_INVALID_ARGUMENT, "matmul does not take 0-d operands");
  const bool a_vec = a.ndim() == 1, b_vec = b.ndim() == 1;
  if (a_vec) a = a.unsqueezed(0);                 // (K) -> (1, K)
  if (b_vec) b = b.unsqueezed(1);                 // (K) -> (K, 1)
  const int64_t K = a.dim(-1);
  if (b.dim(-2) != K) {
    fail(CD_STATUS_INVALID_ARGUMENT, "inner dimensions differ: a has %lld columns, b %lld rows",
         static_cast<long long>(K), static_cast<long long>(b.dim(-2)));
  }
  if (a.ndim() > kMaxMatmulDims || b.ndim() > kMaxMatmulDims) {
    fail(CD_STATUS_INVALID_ARGUMENT, "aclnnMatmul takes at most %d dims (a has %lld, b %lld)", kMaxMatmulDims,
         static_cast<long long>(a.ndim()), static_cast<long long>(b.ndim()));
  }
  // The output as the promoted shape (batch..., M, N): the same memory.
  // (The dispatcher may already hand it over in that shape.)
  const int64_t batch_dims = std::max(a.ndim(), b.ndim()) - 2;
  std::vector<int64_t> full(out.shape);
  if (out.ndim() != batch_dims + 2) {
    if (a_vec) full.insert(full.end() - (b_vec ? 0 : 1), 1);
    if (b_vec) full.push_back(1);
  }
  bool ok = false;
  const Operand out_full = out.reshaped(full, &ok);
  if (!ok) fail(CD_STATUS_INVALID_ARGUMENT, "output %s is not C-contiguous", nn::shape_string(out.shape).c_str());
  if (out.numel() == 0) return;
  if (K == 0) {  // an empty sum
    nn::zero_fill(ctx, out);
    return;
  }
  const TensorDesc da = a.desc(), db = b.desc(), dout = out_full.desc();
  run_aclnn(ctx, nn::Matmul, da.get(), db.get(), dout.get(), nn::kKeepDtype);
}

cd_error* matmul_kernel(const cd_kernel_context* ctx) noexcept {
  return guard("matmul", [ctx] { enqueue_matmul(ctx); });
}

void enqueue_gemm(const cd_kernel_context* ctx) {
  nn::require_arity(ctx, 2, 3);
  const double alpha = float_attribute(ctx, "alpha", 1.0), beta = float_attribute(ctx, "beta", 1.0);
  const bool ta = chipdock::support::find_attribute(ctx, "trans_a") != nullptr && bool_attribute(ctx, "trans_a");
  const bool tb = chipdock::support::find_attribute(ctx, "trans_b") != nullptr && bool_attribute(ctx, "trans_b");
  Operand a = nn::input(ctx, 0), b = nn::input(ctx, 1);
  const Operand out = nn::output(ctx, 0);
  if (a.ndim() != 2 || b.ndim() != 2 || out.ndim() != 2) {
    fail(CD_STATUS_INVALID_ARGUMENT, "gemm takes 2-d a, b and output (got %lld, %lld and %lld dims)",
         static_cast<long long>(a.ndim()), static_cast<long long>(b.ndim()), static_cast<long long>(out.ndim()));
  }
  if (ta) a = a.transposed();  // op(a): a view with swapped strides, no copy
  if (tb) b = b.transposed();
  const int64_t M = a.shape[0], K = a.shape[1], N = b.shape[1];
  if (b.shape[0] != K) {
    fail(CD_STATUS_INVALID_ARGUMENT, "inner dimensions differ (%lld vs %lld)", static_cast<long long>(K),
         static_cast<long long>(b.shape[0]));
  }
  if (out.shape[0] != M || out.shape[1] != N) {
    fail(CD_STATUS_INVALID_ARGUMENT, "output is %s, expected [%lld, %lld]", nn::shape_string(out.shape).c_str(),
         static_cast<long long>(M), static_cast<long long>(N));
  }
  const bool has_c = ctx->num_inputs == 3;
  Operand c;
  if (has_c) {
    c = nn::input(ctx, 2);
    if (c.ndim() > 2) fail(CD_STATUS_INVALID_ARGUMENT, "c has %lld dims; at most 2", static_cast<long long>(c.ndim()));
    for (int64_t d = 0; d < c.ndim(); ++d) {
      const int64_t want = out.shape[static_cast<size_t>(2 - c.ndim() + d)];
      if (c.shape[static_cast<size_t>(d)] != 1 && c.shape[static_cast<size_t>(d)] != want) {
        fail(CD_STATUS_INVALID_ARGUMENT, "c %s does not broadcast to [%lld, %lld]", nn::shape_string(c.shape).c_str(),
             static_cast<long long>(M), static_cast<long long>(N));
      }
    }
  }
  if (out.numel() == 0) return;
  // BLAS semantics: c is not read when beta is 0 (a NaN in it stays out).
  const bool use_c = has_c && beta != 0.0;
  if (K == 0) {  // an empty product: beta * c, or zeros
    if (!use_c) {
      nn::zero_fill(ctx, out);
      return;
    }
    Operand cb = c;  // c broadcast to (M, N) by zero strides
    while (cb.ndim() < 2) cb = cb.unsqueezed(0);
    for (size_t d = 0; d < 2; ++d) {
      if (cb.shape[d] == 1) cb.strides[d] = 0;
      cb.shape[d] = out.shape[d];
    }
    const ScalarDesc sbeta(beta, ACL_FLOAT);
    const TensorDesc dc = cb.desc(), dout = out.desc();
    run_aclnn(ctx, nn::Muls, dc.get(), sbeta.get(), dout.get());
    return;
  }
  // Without c, aclnnAddmm gets a one-element zero for self (beta 0): the
  // uninitialized output is never an input.
  Operand self = c;
  if (!use_c) {
    self = nn::scratch(ctx, out.dtype, {1}, "gemm's zero addend");
    nn::zero_fill(ctx, self);
  }
  const ScalarDesc sbeta(use_c ? beta : 0.0, ACL_FLOAT), salpha(alpha, ACL_FLOAT);
  const TensorDesc dself = self.desc(), da = a.desc(), db = b.desc(), dout = out.desc();
  run_aclnn(ctx, nn::Addmm, dself.get(), da.get(), db.get(), sbeta.get(), salpha.get(), dout.get(), nn::kKeepDtype);
}

cd_error* gemm_kernel(const cd_kernel_context* ctx) noexcept {
  return guard("gemm", [ctx] { enqueue_gemm(ctx); });
}

}  // namespace

void register_nn_matmul(Registrar& r) {
  static const cd_dtype_t kTypes[] = {CD_DTYPE_FLOAT32, CD_DTYPE_FLOAT16, CD_DTYPE_BFLOAT16};
  if (r.resolve(nn::Matmul, "matmul")) {
    for (cd_dtype_t t : kTypes) r.add("matmul", {t, t, t}, matmul_kernel);
  }
  if (r.resolve(nn::Addmm, "gemm") && r.resolve(nn::Muls, "gemm")) {
    for (cd_dtype_t t : kTypes) r.add("gemm", {t, t, t, t}, gemm_kernel);
  }
}

}  // namespace chipdock_npu
