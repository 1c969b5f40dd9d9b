// conv2d, conv2d_fused and conv_transpose2d on aclnnConvolution.
//
// cubeMathType: float16/bfloat16 KEEP_DTYPE (float32 accumulation, one
// rounding). float32: ALLOW_FP32_DOWN_PRECISION, because aclnnConvolution's
// doc refuses KEEP_DTYPE for FLOAT on Atlas A2/A3 ("暂不支持"); on such a chip
// a float32 convolution then runs in HFLOAT32 (an ~11-bit mantissa), which
// the test double does not model: verified on the double only (see README).
// float64: aclnnConvolution takes FLOAT, FLOAT16, BFLOAT16 only.
//
// conv2d's padding (top, left, bottom, right) goes to aclnn as 2 values
// when symmetric, else as aclnn's 4 (top, bottom, left, right).
// conv_transpose2d: aclnn's transposed padding is symmetric, so chipdock's
// (top, bottom) becomes padding = top and outputPadding = top - bottom +
// output_padding where that is in [0, max(stride, dilation)); otherwise the
// full transposed convolution (no padding) goes into workspace and the
// output window is copied out of it (aclnnInplaceCopy), rows that only
// output_padding adds getting the bias.
// conv2d_fused: the convolution, then aclnnAdd of the residual, then
// aclnnRelu, each in place on the output; a 16-bit convolution with a
// residual goes into a float32 workspace first (aclnnConvolution lets the
// output dtype differ when transposed=false) so that the sum is rounded
// once (opset.yaml). layout nhwc: the output descriptor is the NHWC memory
// seen as NCHW (permuted strides), as is the residual.
#include <algorithm>

#include "nn_common.h"

namespace chipdock_npu {
namespace {

using chipdock::support::choice_attribute;
using chipdock::support::fail;
using chipdock::support::guard;
using chipdock::support::int_attribute;
using chipdock::support::ints_attribute;
using chipdock::support::Window2d;
using nn::Operand;

enum class ConvKind { plain, fused, transposed };

int8_t conv_cube_math(cd_dtype_t dtype) {
  return dtype == CD_DTYPE_FLOAT32 ? nn::kAllowFp32DownPrecision : nn::kKeepDtype;
}

void require_4d(const Operand& t, const char* what) {
  if (t.ndim() != 4) {
    fail(CD_STATUS_INVALID_ARGUMENT, "%s must be 4-d, got %s", what, nn::shape_string(t.shape).c_str());
  }
}

// One aclnnConvolution call.
void convolution(const cd_kernel_context* ctx, const Operand& x, const Operand& w, const Operand* bias,
                 const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                 const std::vector<int64_t>& dilation, bool transposed, const std::vector<int64_t>& output_padding,
                 int64_t groups, const Operand& out, cd_dtype_t compute_dtype) {
  const TensorDesc dx = x.desc(), dw = w.desc(), dout = out.desc();
  TensorDesc db;
  if (bias != nullptr) db = bias->desc();
  const IntArrayDesc s(stride), p(padding), d(dilation), op(output_padding);
  run_aclnn(ctx, nn::Convolution, dx.get(), dw.get(), db.get(), s.get(), p.get(), d.get(), transposed, op.get(),
            groups, dout.get(), conv_cube_math(compute_dtype));
}

void relu_in_place(const cd_kernel_context* ctx, const Operand& t) {
  const TensorDesc d = t.desc();
  run_aclnn(ctx, nn::Relu, d.get(), d.get());
}

void forward(const cd_kernel_context* ctx, ConvKind kind) {
  nn::require_arity(ctx, kind == ConvKind::fused ? 3 : 2, kind == ConvKind::fused ? 4 : 3);
  const Operand x = nn::input(ctx, 0), w = nn::input(ctx, 1);
  Operand out = nn::output(ctx, 0);
  require_4d(x, "x");
  require_4d(w, "weight");
  const Window2d win = chipdock::support::window2d_attributes(ctx, {1, 1}, true);
  const int64_t groups = int_attribute(ctx, "groups", 1);
  if (groups < 1) fail(CD_STATUS_INVALID_ARGUMENT, "groups must be >= 1, got %lld", static_cast<long long>(groups));
  const bool nhwc = kind == ConvKind::fused && choice_attribute(ctx, "layout", {"nchw", "nhwc"}) == 1;
  const bool relu = kind == ConvKind::fused && choice_attribute(ctx, "activation", {"none", "relu"}) == 1;
  require_4d(out, "the output");
  // The convolution's NCHW view of the output (and of the residual).
  const std::vector<int64_t> nhwc_as_nchw = {0, 3, 1, 2};
  const Operand conv_out = nhwc ? out.permuted(nhwc_as_nchw) : out;
  Operand bias;
  const bool has_bias = ctx->num_inputs >= 3;
  if (has_bias) bias = nn::input(ctx, 2);
  const bool has_residual = kind == ConvKind::fused && ctx->num_inputs == 4;
  Operand residual;
  if (has_residual) {
    residual = nn::input(ctx, 3);
    if (residual.shape != out.shape) {
      fail(CD_STATUS_INVALID_ARGUMENT, "residual %s must have the output's shape %s",
           nn::shape_string(residual.shape).c_str(), nn::shape_string(out.shape).c_str());
    }
    if (nhwc) residual = residual.permuted(nhwc_as_nchw);
  }
  if (out.numel() == 0) return;
  const std::vector<int64_t> padding = win.pt == win.pb && win.pl == win.pr
                                           ? std::vector<int64_t>{win.pt, win.pl}
                                           : std::vector<int64_t>{win.pt, win.pb, win.pl, win.pr};
  const std::vector<int64_t> stride{win.sh, win.sw}, dilation{win.dh, win.dw};
  const bool widen = has_residual && nn::is_16bit(out.dtype);
  const Operand target = widen ? nn::scratch(ctx, CD_DTYPE_FLOAT32, conv_out.shape, "conv2d_fused's float32 sum")
                               : conv_out;
  convolution(ctx, x, w, has_bias ? &bias : nullptr, stride, padding, dilation, false, {0, 0}, groups, target,
              x.dtype);
  if (has_residual) {
    const ScalarDesc one(1.0, ACL_FLOAT);
    const TensorDesc a = target.desc(), r = residual.desc(), o = conv_out.desc();
    run_aclnn(ctx, nn::Add, a.get(), r.get(), one.get(), o.get());  // float32 + 16-bit, rounded once into out
  }
  if (relu) relu_in_place(ctx, conv_out);  // relu commutes with the final rounding
}

// Fills `t` (N, K, h, w) with the bias broadcast (or zeros without one).
void fill_with_bias(const cd_kernel_context* ctx, const Operand& t, const Operand* bias) {
  if (bias == nullptr) {
    // `t` is a window of the contiguous output: zero it through a copy of a zero scalar.
    Operand zero = nn::scratch(ctx, t.dtype, {1}, "conv_transpose2d's zero");
    nn::zero_fill(ctx, zero);
    zero.shape = t.shape;
    zero.strides.assign(t.shape.size(), 0);
    const TensorDesc dst = t.desc(), src = zero.desc();
    run_aclnn(ctx, nn::InplaceCopy, dst.get(), src.get());
    return;
  }
  Operand b = *bias;  // (K) seen as (N, K, h, w) with zero strides
  b.shape = t.shape;
  b.strides = {0, bias->strides[0], 0, 0};
  const TensorDesc dst = t.desc(), src = b.desc();
  run_aclnn(ctx, nn::InplaceCopy, dst.get(), src.get());
}

void transposed(const cd_kernel_context* ctx) {
  nn::require_arity(ctx, 2, 3);
  const Operand x = nn::input(ctx, 0), w = nn::input(ctx, 1);
  const Operand out = nn::output(ctx, 0);
  require_4d(x, "x");
  require_4d(w, "weight");
  require_4d(out, "the output");
  const Window2d win = chipdock::support::window2d_attributes(ctx, {1, 1}, true);
  const std::vector<int64_t> opad = ints_attribute(ctx, "output_padding", {0, 0}, 2);
  const int64_t groups = int_attribute(ctx, "groups", 1);
  if (groups < 1) fail(CD_STATUS_INVALID_ARGUMENT, "groups must be >= 1, got %lld", static_cast<long long>(groups));
  if (opad[0] < 0 || opad[1] < 0) fail(CD_STATUS_INVALID_ARGUMENT, "output_padding must be >= 0");
  Operand bias;
  const bool has_bias = ctx->num_inputs == 3;
  if (has_bias) bias = nn::input(ctx, 2);
  if (out.numel() == 0) return;
  const std::vector<int64_t> stride{win.sh, win.sw}, dilation{win.dh, win.dw};
  // aclnn's rows: o = i*stride - padding + r*dilation, as chipdock's with padding = top.
  const int64_t oph = win.pt - win.pb + opad[0], opw = win.pl - win.pr + opad[1];
  const int64_t limit_h = std::max(win.sh, win.dh), limit_w = std::max(win.sw, win.dw);
  if (oph >= 0 && oph < limit_h && opw >= 0 && opw < limit_w) {
    convolution(ctx, x, w, has_bias ? &bias : nullptr, stride, {win.pt, win.pl}, dilation, true, {oph, opw},
                groups, out, x.dtype);
    return;
  }
  // The full result (no padding), then the window [top, top + OH) x [left, left + OW) of it.
  const int64_t full_h = (x.shape[2] - 1) * win.sh + win.dh * (w.shape[2] - 1) + 1;
  const int64_t full_w = (x.shape[3] - 1) * win.sw + win.dw * (w.shape[3] - 1) + 1;
  const int64_t OH = out.shape[2], OW = out.shape[3];
  const Operand full = nn::scratch(ctx, out.dtype, {out.shape[0], out.shape[1], full_h, full_w},
                                   "conv_transpose2d's unpadded result");
  convolution(ctx, x, w, has_bias ? &bias : nullptr, stride, {0, 0}, dilation, true, {0, 0}, groups, full, x.dtype);
  const int64_t valid_h = std::min(OH, full_h - win.pt), valid_w = std::min(OW, full_w - win.pl);
  if (valid_h < OH || valid_w < OW) fill_with_bias(ctx, out, has_bias ? &bias : nullptr);
  if (valid_h <= 0 || valid_w <= 0) return;
  const Operand src = full.narrowed(2, win.pt, valid_h).narrowed(3, win.pl, valid_w);
  const Operand dst = out.narrowed(2, 0, valid_h).narrowed(3, 0, valid_w);
  const TensorDesc ddst = dst.desc(), dsrc = src.desc();
  run_aclnn(ctx, nn::InplaceCopy, ddst.get(), dsrc.get());
}

cd_error* conv2d_kernel(const cd_kernel_context* ctx) noexcept {
  return guard("conv2d", [ctx] { forward(ctx, ConvKind::plain); });
}
cd_error* conv2d_fused_kernel(const cd_kernel_context* ctx) noexcept {
  return guard("conv2d_fused", [ctx] { forward(ctx, ConvKind::fused); });
}
cd_error* conv_transpose2d_kernel(const cd_kernel_context* ctx) noexcept {
  return guard("conv_transpose2d", [ctx] { transposed(ctx); });
}

}  // namespace

void register_nn_conv(Registrar& r) {
  static const cd_dtype_t kTypes[] = {CD_DTYPE_FLOAT32, CD_DTYPE_FLOAT16, CD_DTYPE_BFLOAT16};
  if (!r.resolve(nn::Convolution, "conv2d")) return;
  for (cd_dtype_t t : kTypes) r.add("conv2d", {t, t, t, t}, conv2d_kernel);
  if (r.resolve(nn::Add, "conv2d_fused") && r.resolve(nn::Relu, "conv2d_fused")) {
    for (cd_dtype_t t : kTypes) r.add("conv2d_fused", {t, t, t, t, t}, conv2d_fused_kernel);
  }
  if (r.resolve(nn::InplaceCopy, "conv_transpose2d")) {
    for (cd_dtype_t t : kTypes) r.add("conv_transpose2d", {t, t, t, t}, conv_transpose2d_kernel);
  }
}

}  // namespace chipdock_npu
