// scaled_dot_product_attention composed of aclnn calls:
//   scores = q @ k^T                   aclnnMatmul, float32 output
//   scores = mask + scale * scores     aclnnAdd (alpha = scale), or aclnnMuls without a mask
//   p = softmax(scores, -1)            aclnnSoftmax
//   out = p @ v                        aclnnMatmul, rounded once into out's dtype
// everything in between in float32 workspace (a 16-bit v is widened first
// with aclnnCast: aclnnMatmul does not mix BFLOAT16 with FLOAT). With
// `causal`, query row i only sees keys 0..i: its softmax and its product
// run on those columns alone (two aclnn calls per row), so no mask tensor
// has to be built on the device.
//
// Why not aclnnFlashAttentionScore / aclnnPromptFlashAttention: their mask is
// a boolean "drop" mask (chipdock's is additive and of any float values),
// they take FLOAT16/BFLOAT16 with fixed layouts (BNSD, BSH, ...), and they
// need q, k and v of one head size, where chipdock allows v's to differ.
#include <cmath>

#include "nn_common.h"

namespace chipdock_npu {
namespace {

using chipdock::support::bool_attribute;
using chipdock::support::fail;
using chipdock::support::float_attribute;
using chipdock::support::guard;
using nn::Operand;

// `t` (..., r, c) seen with the batch dims `batch` (NumPy broadcasting by zero strides).
Operand expand_batch(const Operand& t, const std::vector<int64_t>& batch, const char* what) {
  const int64_t inner = std::min<int64_t>(t.ndim(), 2);
  const int64_t t_batch = t.ndim() - inner;
  if (t_batch > static_cast<int64_t>(batch.size())) {
    fail(CD_STATUS_INVALID_ARGUMENT, "%s %s has more batch dims than the output", what,
         nn::shape_string(t.shape).c_str());
  }
  Operand e = t;
  e.shape = batch;
  e.strides.assign(batch.size(), 0);
  const size_t lead = batch.size() - static_cast<size_t>(t_batch);
  for (size_t d = 0; d < static_cast<size_t>(t_batch); ++d) {
    const int64_t n = t.shape[d];
    if (n != batch[lead + d] && n != 1) {
      fail(CD_STATUS_INVALID_ARGUMENT, "%s %s does not broadcast to the batch %s", what,
           nn::shape_string(t.shape).c_str(), nn::shape_string(batch).c_str());
    }
    e.strides[lead + d] = n == 1 ? 0 : t.strides[d];
  }
  for (int64_t d = t_batch; d < t.ndim(); ++d) {
    e.shape.push_back(t.shape[static_cast<size_t>(d)]);
    e.strides.push_back(t.strides[static_cast<size_t>(d)]);
  }
  return e;
}

void matmul(const cd_kernel_context* ctx, const Operand& a, const Operand& b, const Operand& out) {
  const TensorDesc da = a.desc(), db = b.desc(), dout = out.desc();
  run_aclnn(ctx, nn::Matmul, da.get(), db.get(), dout.get(), nn::kKeepDtype);
}

void softmax(const cd_kernel_context* ctx, const Operand& in, const Operand& out) {
  const TensorDesc din = in.desc(), dout = out.desc();
  run_aclnn(ctx, nn::Softmax, din.get(), int64_t{-1}, dout.get());
}

void attention(const cd_kernel_context* ctx) {
  nn::require_arity(ctx, 3, 4);
  const Operand q = nn::input(ctx, 0), k = nn::input(ctx, 1), v0 = nn::input(ctx, 2);
  const Operand out = nn::output(ctx, 0);
  const bool causal = chipdock::support::find_attribute(ctx, "causal") != nullptr && bool_attribute(ctx, "causal");
  double scale = float_attribute(ctx, "scale", 0.0);
  if (q.ndim() < 2 || k.ndim() < 2 || v0.ndim() < 2 || out.ndim() < 2) {
    fail(CD_STATUS_INVALID_ARGUMENT, "q, k, v and the output must have at least 2 dims");
  }
  const int64_t L = q.dim(-2), E = q.dim(-1), S = k.dim(-2), Ev = v0.dim(-1);
  if (k.dim(-1) != E || v0.dim(-2) != S || out.dim(-2) != L || out.dim(-1) != Ev) {
    fail(CD_STATUS_INVALID_ARGUMENT, "shapes q %s, k %s, v %s and output %s do not fit (..., L, E), (..., S, E), "
         "(..., S, Ev), (..., L, Ev)", nn::shape_string(q.shape).c_str(), nn::shape_string(k.shape).c_str(),
         nn::shape_string(v0.shape).c_str(), nn::shape_string(out.shape).c_str());
  }
  if (scale == 0.0) scale = 1.0 / std::sqrt(static_cast<double>(E));
  const std::vector<int64_t> batch(out.shape.begin(), out.shape.end() - 2);
  Operand mask;
  const bool has_mask = ctx->num_inputs == 4;
  if (has_mask) {
    const Operand m = nn::input(ctx, 3);
    // The mask broadcasts to (batch..., L, S) over every dim, the last two included.
    std::vector<int64_t> full = batch;
    full.push_back(L);
    full.push_back(S);
    if (m.ndim() > static_cast<int64_t>(full.size())) {
      fail(CD_STATUS_INVALID_ARGUMENT, "mask %s has more dims than the scores", nn::shape_string(m.shape).c_str());
    }
    mask = m;
    mask.shape = full;
    mask.strides.assign(full.size(), 0);
    const size_t lead = full.size() - m.shape.size();
    for (size_t d = 0; d < m.shape.size(); ++d) {
      if (m.shape[d] != 1 && m.shape[d] != full[lead + d]) {
        fail(CD_STATUS_INVALID_ARGUMENT, "mask %s does not broadcast to the scores %s",
             nn::shape_string(m.shape).c_str(), nn::shape_string(full).c_str());
      }
      mask.strides[lead + d] = m.shape[d] == 1 ? 0 : m.strides[d];
    }
  }
  if (out.numel() == 0) return;
  const Operand qe = expand_batch(q, batch, "q"), ke = expand_batch(k, batch, "k");
  std::vector<int64_t> score_shape = batch;
  score_shape.push_back(L);
  score_shape.push_back(S);
  const Operand scores = nn::scratch(ctx, CD_DTYPE_FLOAT32, score_shape, "attention scores");
  const Operand probs = nn::scratch(ctx, CD_DTYPE_FLOAT32, score_shape, "attention probabilities");
  matmul(ctx, qe, ke.transposed(), scores);
  const TensorDesc ds = scores.desc();
  if (has_mask) {
    const ScalarDesc alpha(scale, ACL_FLOAT);
    const TensorDesc dm = mask.desc();
    run_aclnn(ctx, nn::Add, dm.get(), ds.get(), alpha.get(), ds.get());  // mask + scale * scores
  } else {
    const ScalarDesc factor(scale, ACL_FLOAT);
    run_aclnn(ctx, nn::Muls, ds.get(), factor.get(), ds.get());
  }
  const Operand v = expand_batch(nn::is_16bit(v0.dtype) ? nn::cast_copy(ctx, v0, CD_DTYPE_FLOAT32, "attention's float32 v")
                                                        : v0,
                                 batch, "v");
  if (!causal) {
    softmax(ctx, scores, probs);
    matmul(ctx, probs, v, out);
    return;
  }
  const int64_t rank = out.ndim();
  for (int64_t i = 0; i < L; ++i) {  // row i: keys 0..i (top-left aligned, as PyTorch's is_causal)
    const int64_t keys = std::min<int64_t>(i + 1, S);
    const Operand row_out = out.narrowed(rank - 2, i, 1);
    if (keys == 0) {
      nn::zero_fill(ctx, row_out);
      continue;
    }
    const Operand row_scores = scores.narrowed(rank - 2, i, 1).narrowed(rank - 1, 0, keys);
    const Operand row_probs = probs.narrowed(rank - 2, i, 1).narrowed(rank - 1, 0, keys);
    softmax(ctx, row_scores, row_probs);
    matmul(ctx, row_probs, v.narrowed(rank - 2, 0, keys), row_out);
  }
}

cd_error* attention_kernel(const cd_kernel_context* ctx) noexcept {
  return guard("scaled_dot_product_attention", [ctx] { attention(ctx); });
}

}  // namespace

void register_nn_attention(Registrar& r) {
  static const cd_dtype_t kTypes[] = {CD_DTYPE_FLOAT32, CD_DTYPE_FLOAT16, CD_DTYPE_BFLOAT16};
  if (r.resolve(nn::Matmul, "scaled_dot_product_attention") && r.resolve(nn::Add, "scaled_dot_product_attention") &&
      r.resolve(nn::Muls, "scaled_dot_product_attention") && r.resolve(nn::Softmax, "scaled_dot_product_attention") &&
      r.resolve(nn::Cast, "scaled_dot_product_attention")) {
    for (cd_dtype_t t : kTypes) r.add("scaled_dot_product_attention", {t, t, t, t, t}, attention_kernel);
  }
}

}  // namespace chipdock_npu
