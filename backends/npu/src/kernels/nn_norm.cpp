// batch_norm (inference) on aclnnBatchNorm (+ aclnnRelu in place for the
// fused activation), layer_norm on aclnnLayerNorm, rms_norm on aclnnRmsNorm,
// group_norm on aclnnGroupNorm. The statistics outputs some of them insist
// on (saved mean, inverse std) go to workspace. dtypes: FLOAT, FLOAT16,
// BFLOAT16 (the ops' A2 docs); float64 is declared in unsupported/nn.json.
#include "nn_common.h"

namespace chipdock_npu {
namespace {

using chipdock::support::choice_attribute;
using chipdock::support::fail;
using chipdock::support::float_attribute;
using chipdock::support::guard;
using chipdock::support::int_attribute;
using nn::Operand;

void require_same_shape(const Operand& a, const Operand& b, const char* what_a, const char* what_b) {
  if (a.shape != b.shape) {
    fail(CD_STATUS_INVALID_ARGUMENT, "%s %s and %s %s differ", what_a, nn::shape_string(a.shape).c_str(), what_b,
         nn::shape_string(b.shape).c_str());
  }
}

void require_channels(const Operand& t, int64_t C, const char* what) {
  if (t.ndim() != 1 || t.shape[0] != C) {
    fail(CD_STATUS_INVALID_ARGUMENT, "%s must be (%lld), got %s", what, static_cast<long long>(C),
         nn::shape_string(t.shape).c_str());
  }
}

void batch_norm(const cd_kernel_context* ctx) {
  nn::require_arity(ctx, 5, 5);
  const Operand x = nn::input(ctx, 0), scale = nn::input(ctx, 1), bias = nn::input(ctx, 2);
  const Operand mean = nn::input(ctx, 3), var = nn::input(ctx, 4);
  const Operand out = nn::output(ctx, 0);
  const double eps = float_attribute(ctx, "epsilon", 1e-5);
  const bool relu = choice_attribute(ctx, "activation", {"none", "relu"}) == 1;
  if (x.ndim() < 2) fail(CD_STATUS_INVALID_ARGUMENT, "x must be (N, C, ...), got %s", nn::shape_string(x.shape).c_str());
  const int64_t C = x.shape[1];
  require_channels(scale, C, "scale");
  require_channels(bias, C, "bias");
  require_channels(mean, C, "mean");
  require_channels(var, C, "var");
  require_same_shape(x, out, "x", "the output");
  if (out.numel() == 0) return;
  // Inference (training = false): the running statistics are read, never written.
  const Operand save_mean = nn::scratch(ctx, CD_DTYPE_FLOAT32, {C}, "batch_norm's saved mean");
  const Operand save_invstd = nn::scratch(ctx, CD_DTYPE_FLOAT32, {C}, "batch_norm's saved inverse std");
  const TensorDesc dx = x.desc(), ds = scale.desc(), db = bias.desc(), dm = mean.desc(), dv = var.desc();
  const TensorDesc dout = out.desc(), dsm = save_mean.desc(), dsi = save_invstd.desc();
  run_aclnn(ctx, nn::BatchNorm, dx.get(), ds.get(), db.get(), dm.get(), dv.get(), false, 0.1, eps, dout.get(),
            dsm.get(), dsi.get());
  if (relu) run_aclnn(ctx, nn::Relu, dout.get(), dout.get());  // relu commutes with the rounding
}

// The leading dims of x that `scale` does not cover; throws unless scale is x's trailing shape.
std::vector<int64_t> leading_dims(const Operand& x, const Operand& scale) {
  const int64_t k = scale.ndim();
  bool ok = k >= 1 && k <= x.ndim();
  for (int64_t d = 0; ok && d < k; ++d) ok = x.shape[static_cast<size_t>(x.ndim() - k + d)] == scale.shape[static_cast<size_t>(d)];
  if (!ok) {
    fail(CD_STATUS_INVALID_ARGUMENT, "scale %s must be the trailing dims of x %s", nn::shape_string(scale.shape).c_str(),
         nn::shape_string(x.shape).c_str());
  }
  return std::vector<int64_t>(x.shape.begin(), x.shape.end() - k);
}

void layer_norm(const cd_kernel_context* ctx) {
  nn::require_arity(ctx, 2, 3);
  const Operand x = nn::input(ctx, 0), scale = nn::input(ctx, 1);
  const Operand out = nn::output(ctx, 0);
  const double eps = float_attribute(ctx, "epsilon", 1e-5);
  leading_dims(x, scale);
  Operand bias;
  const bool has_bias = ctx->num_inputs == 3;
  if (has_bias) {
    bias = nn::input(ctx, 2);
    require_same_shape(bias, scale, "bias", "scale");
  }
  require_same_shape(x, out, "x", "the output");
  if (out.numel() == 0) return;
  const IntArrayDesc normalized(scale.shape);
  const TensorDesc dx = x.desc(), ds = scale.desc(), dout = out.desc();
  TensorDesc db;
  if (has_bias) db = bias.desc();
  run_aclnn(ctx, nn::LayerNorm, dx.get(), normalized.get(), ds.get(), db.get(), eps, dout.get(), nullptr, nullptr);
}

void rms_norm(const cd_kernel_context* ctx) {
  nn::require_arity(ctx, 2, 2);
  const Operand x = nn::input(ctx, 0), scale = nn::input(ctx, 1);
  const Operand out = nn::output(ctx, 0);
  const double eps = float_attribute(ctx, "epsilon", 1e-6);
  std::vector<int64_t> rstd_shape = leading_dims(x, scale);
  rstd_shape.resize(static_cast<size_t>(x.ndim()), 1);  // (leading..., 1, ...): aclnnRmsNorm's rstd, float32
  require_same_shape(x, out, "x", "the output");
  if (out.numel() == 0) return;
  const Operand rstd = nn::scratch(ctx, CD_DTYPE_FLOAT32, rstd_shape, "rms_norm's rstd");
  const TensorDesc dx = x.desc(), ds = scale.desc(), dout = out.desc(), dr = rstd.desc();
  run_aclnn(ctx, nn::RmsNorm, dx.get(), ds.get(), eps, dout.get(), dr.get());
}

void group_norm(const cd_kernel_context* ctx) {
  nn::require_arity(ctx, 3, 3);
  const Operand x = nn::input(ctx, 0), scale = nn::input(ctx, 1), bias = nn::input(ctx, 2);
  const Operand out = nn::output(ctx, 0);
  const double eps = float_attribute(ctx, "epsilon", 1e-5);
  const int64_t groups = int_attribute(ctx, "num_groups");
  if (x.ndim() < 2) fail(CD_STATUS_INVALID_ARGUMENT, "x must be (N, C, ...), got %s", nn::shape_string(x.shape).c_str());
  const int64_t N = x.shape[0], C = x.shape[1];
  if (groups < 1 || C % groups != 0) {
    fail(CD_STATUS_INVALID_ARGUMENT, "num_groups %lld must divide the %lld channels", static_cast<long long>(groups),
         static_cast<long long>(C));
  }
  require_channels(scale, C, "scale");
  require_channels(bias, C, "bias");
  require_same_shape(x, out, "x", "the output");
  if (out.numel() == 0) return;
  int64_t hxw = 1;
  for (size_t d = 2; d < x.shape.size(); ++d) hxw *= x.shape[d];
  const Operand mean = nn::scratch(ctx, x.dtype, {N, groups}, "group_norm's mean");
  const Operand rstd = nn::scratch(ctx, x.dtype, {N, groups}, "group_norm's rstd");
  const TensorDesc dx = x.desc(), ds = scale.desc(), db = bias.desc(), dout = out.desc();
  const TensorDesc dm = mean.desc(), dr = rstd.desc();
  run_aclnn(ctx, nn::GroupNorm, dx.get(), ds.get(), db.get(), N, C, hxw, groups, eps, dout.get(), dm.get(), dr.get());
}

cd_error* batch_norm_kernel(const cd_kernel_context* ctx) noexcept {
  return guard("batch_norm", [ctx] { batch_norm(ctx); });
}
cd_error* layer_norm_kernel(const cd_kernel_context* ctx) noexcept {
  return guard("layer_norm", [ctx] { layer_norm(ctx); });
}
cd_error* rms_norm_kernel(const cd_kernel_context* ctx) noexcept {
  return guard("rms_norm", [ctx] { rms_norm(ctx); });
}
cd_error* group_norm_kernel(const cd_kernel_context* ctx) noexcept {
  return guard("group_norm", [ctx] { group_norm(ctx); });
}

}  // namespace

void register_nn_norm(Registrar& r) {
  static const cd_dtype_t kTypes[] = {CD_DTYPE_FLOAT32, CD_DTYPE_FLOAT16, CD_DTYPE_BFLOAT16};
  if (r.resolve(nn::BatchNorm, "batch_norm") && r.resolve(nn::Relu, "batch_norm")) {
    for (cd_dtype_t t : kTypes) r.add("batch_norm", {t, t, t, t, t, t}, batch_norm_kernel);
  }
  if (r.resolve(nn::LayerNorm, "layer_norm")) {
    for (cd_dtype_t t : kTypes) r.add("layer_norm", {t, t, t, t}, layer_norm_kernel);
  }
  if (r.resolve(nn::RmsNorm, "rms_norm")) {
    for (cd_dtype_t t : kTypes) r.add("rms_norm", {t, t, t}, rms_norm_kernel);
  }
  if (r.resolve(nn::GroupNorm, "group_norm")) {
    for (cd_dtype_t t : kTypes) r.add("group_norm", {t, t, t, t}, group_norm_kernel);
  }
}

}  // namespace chipdock_npu
