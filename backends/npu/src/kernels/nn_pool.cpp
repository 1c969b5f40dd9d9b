// max_pool2d on aclnnMaxPool2dWithIndices, avg_pool2d on aclnnAvgPool2d,
// global_avg_pool on aclnnAdaptiveAvgPool2d (output size 1 x 1).
//
// Both window ops follow PyTorch's rules, as chipdock does, but aclnn's
// take only symmetric paddings of at most half the kernel. Otherwise (ONNX's
// SAME_UPPER/SAME_LOWER give asymmetric ones) the input is padded explicitly
// into workspace (aclnnConstantPadNd; rows no window reaches are cut off by
// narrowing the view) so that every window lies inside, and pooled with no
// padding: max_pool2d pads with -inf. avg_pool2d pads with zeros, in
// float32, and divides the windows' means by the mean of the same windows
// over a plane of ones that covers what the divisor counts (the input for
// count_include_pad=false, the padded input for true): sum / (kh*kw)
// divided by count / (kh*kw), aclnnDiv rounding once into the output's dtype.
// dtypes: FLOAT, FLOAT16, BFLOAT16 (the ops' docs for A2); integer
// max_pool2d and float64 are declared in unsupported/nn.json.
// max_pool2d's indices output is workspace (int32, as the doc lists it).
#include <algorithm>
#include <limits>

#include "nn_common.h"

namespace chipdock_npu {
namespace {

using chipdock::support::fail;
using chipdock::support::guard;
using chipdock::support::ints_attribute;
using chipdock::support::Window2d;
using nn::Operand;

struct Pool {
  Window2d win;
  int64_t kh = 1, kw = 1;
  bool ceil_mode = false;
};

Pool pool_attributes(const cd_kernel_context* ctx, bool has_dilation) {
  Pool p;
  const std::vector<int64_t> k = ints_attribute(ctx, "kernel");
  if (k.size() != 2 || k[0] < 1 || k[1] < 1) fail(CD_STATUS_INVALID_ARGUMENT, "kernel must be 2 values >= 1");
  p.kh = k[0];
  p.kw = k[1];
  p.win = chipdock::support::window2d_attributes(ctx, {p.kh, p.kw}, has_dilation);
  const cd_attribute* ceil = chipdock::support::find_attribute(ctx, "ceil_mode");
  p.ceil_mode = ceil != nullptr && chipdock::support::bool_attribute(ctx, "ceil_mode");
  return p;
}

// aclnn's pools take symmetric padding of at most kernel / 2 per dim.
bool aclnn_padding_fits(const Pool& p) {
  return p.win.pt == p.win.pb && p.win.pl == p.win.pr && p.win.pt <= p.kh / 2 && p.win.pl <= p.kw / 2;
}

void require_nchw(const Operand& x, const Operand& out) {
  if (x.ndim() != 4 || out.ndim() != 4) {
    fail(CD_STATUS_INVALID_ARGUMENT, "x and the output must be 4-d (N, C, H, W), got %s and %s",
         nn::shape_string(x.shape).c_str(), nn::shape_string(out.shape).c_str());
  }
}

// The rows/cols [0, need) of the explicitly padded input that windows read
// (need = where the last window ends), and how the input fits in them.
struct PaddedExtent {
  int64_t need_h, need_w;    // the padded plane
  int64_t rows, cols;        // input rows/cols any window reaches (the rest is narrowed off)
  int64_t bottom, right;     // explicit padding after them (>= 0)
};

PaddedExtent padded_extent(const Pool& p, const Operand& x, const Operand& out) {
  PaddedExtent e{};
  e.need_h = (out.shape[2] - 1) * p.win.sh + p.win.dh * (p.kh - 1) + 1;
  e.need_w = (out.shape[3] - 1) * p.win.sw + p.win.dw * (p.kw - 1) + 1;
  e.rows = std::min(x.shape[2], e.need_h - p.win.pt);
  e.cols = std::min(x.shape[3], e.need_w - p.win.pl);
  e.bottom = e.need_h - p.win.pt - e.rows;
  e.right = e.need_w - p.win.pl - e.cols;
  return e;
}

void max_pool(const cd_kernel_context* ctx) {
  nn::require_arity(ctx, 1, 1);
  Operand x = nn::input(ctx, 0);
  const Operand out = nn::output(ctx, 0);
  require_nchw(x, out);
  Pool p = pool_attributes(ctx, true);
  if (out.numel() == 0) return;
  if (!aclnn_padding_fits(p)) {
    const PaddedExtent e = padded_extent(p, x, out);
    x = x.narrowed(2, 0, e.rows).narrowed(3, 0, e.cols);
    const Operand padded = nn::scratch(ctx, x.dtype, {x.shape[0], x.shape[1], e.need_h, e.need_w},
                                       "max_pool2d's -inf padded input");
    // aclnnConstantPadNd's pad: last dim first (left, right, top, bottom), as torch.nn.functional.pad.
    const IntArrayDesc pad({p.win.pl, e.right, p.win.pt, e.bottom});
    const ScalarDesc minus_inf(-std::numeric_limits<double>::infinity(), ACL_FLOAT);
    const TensorDesc dx = x.desc(), dp = padded.desc();
    run_aclnn(ctx, nn::ConstantPadNd, dx.get(), pad.get(), minus_inf.get(), dp.get());
    x = padded;
    p.win.pt = p.win.pb = p.win.pl = p.win.pr = 0;
    p.ceil_mode = false;
  }
  const Operand indices = nn::scratch(ctx, CD_DTYPE_INT32, out.shape, "max_pool2d's indices");
  const IntArrayDesc kernel({p.kh, p.kw}), stride({p.win.sh, p.win.sw}), padding({p.win.pt, p.win.pl}),
      dilation({p.win.dh, p.win.dw});
  const TensorDesc dx = x.desc(), dout = out.desc(), didx = indices.desc();
  run_aclnn(ctx, nn::MaxPool2dWithIndices, dx.get(), kernel.get(), stride.get(), padding.get(), dilation.get(),
            p.ceil_mode, dout.get(), didx.get());
}

// `x` (rows x cols of it) zero-padded by (top, left) and the extent's rest into a float32 plane.
Operand zero_padded_float32(const cd_kernel_context* ctx, const Operand& x, int64_t top, int64_t left,
                            const PaddedExtent& e, int64_t rows, int64_t cols, const char* what) {
  Operand src = x.narrowed(2, 0, rows).narrowed(3, 0, cols);
  if (src.dtype != CD_DTYPE_FLOAT32) src = nn::cast_copy(ctx, src, CD_DTYPE_FLOAT32, what);
  const Operand padded = nn::scratch(ctx, CD_DTYPE_FLOAT32, {x.shape[0], x.shape[1], e.need_h, e.need_w}, what);
  const IntArrayDesc pad({left, e.need_w - left - cols, top, e.need_h - top - rows});
  const ScalarDesc zero(0.0, ACL_FLOAT);
  const TensorDesc ds = src.desc(), dp = padded.desc();
  run_aclnn(ctx, nn::ConstantPadNd, ds.get(), pad.get(), zero.get(), dp.get());
  return padded;
}

// aclnnAvgPool2d with no padding (every window inside `x`): window sums / (kh * kw).
void unpadded_mean(const cd_kernel_context* ctx, const Pool& p, const Operand& x, const Operand& out) {
  const IntArrayDesc kernel({p.kh, p.kw}), stride({p.win.sh, p.win.sw}), padding({0, 0});
  const TensorDesc dx = x.desc(), dout = out.desc();
  run_aclnn(ctx, nn::AvgPool2d, dx.get(), kernel.get(), stride.get(), padding.get(), false, true, int64_t{0},
            nn::kKeepDtype, dout.get());
}

// avg_pool2d where aclnnAvgPool2d's padding does not fit (the file comment).
void composed_avg_pool(const cd_kernel_context* ctx, const Pool& p, bool include_pad, const Operand& x,
                       const Operand& out) {
  const PaddedExtent e = padded_extent(p, x, out);
  if (e.rows <= 0 || e.cols <= 0) {
    fail(CD_STATUS_UNIMPLEMENTED,
         "padding (%lld, %lld, %lld, %lld) with kernel %lldx%lld: every window lies wholly in the padding",
         static_cast<long long>(p.win.pt), static_cast<long long>(p.win.pl), static_cast<long long>(p.win.pb),
         static_cast<long long>(p.win.pr), static_cast<long long>(p.kh), static_cast<long long>(p.kw));
  }
  const Operand padded = zero_padded_float32(ctx, x, p.win.pt, p.win.pl, e, e.rows, e.cols,
                                             "avg_pool2d's zero-padded float32 input");
  const Operand means = nn::scratch(ctx, CD_DTYPE_FLOAT32, out.shape, "avg_pool2d's window means");
  unpadded_mean(ctx, p, padded, means);

  // The ones the divisor counts: the input's rows and cols, or with count_include_pad the padded input's
  // [-top, H + bottom) (windows hanging past that, ceil_mode's, do not count it).
  const int64_t rows = include_pad ? std::min(e.need_h, p.win.pt + x.shape[2] + p.win.pb) : e.rows;
  const int64_t cols = include_pad ? std::min(e.need_w, p.win.pl + x.shape[3] + p.win.pr) : e.cols;
  const int64_t top = include_pad ? 0 : p.win.pt, left = include_pad ? 0 : p.win.pl;
  const Operand ones = nn::scratch(ctx, CD_DTYPE_FLOAT32, {1, 1, rows, cols}, "avg_pool2d's ones");
  const ScalarDesc one(1.0, ACL_FLOAT);
  const TensorDesc dones = ones.desc();
  run_aclnn(ctx, nn::InplaceFillScalar, dones.get(), one.get());
  const Operand counted = zero_padded_float32(ctx, ones, top, left, e, rows, cols, "avg_pool2d's padded ones");
  const Operand counts = nn::scratch(ctx, CD_DTYPE_FLOAT32, {1, 1, out.shape[2], out.shape[3]},
                                     "avg_pool2d's divisors / (kh * kw)");
  unpadded_mean(ctx, p, counted, counts);
  const TensorDesc dm = means.desc(), dc = counts.desc(), dout = out.desc();
  run_aclnn(ctx, nn::Div, dm.get(), dc.get(), dout.get());  // broadcast over N and C; 0 / 0 is NaN, as on the CPU
}

void avg_pool(const cd_kernel_context* ctx) {
  nn::require_arity(ctx, 1, 1);
  const Operand x = nn::input(ctx, 0);
  const Operand out = nn::output(ctx, 0);
  require_nchw(x, out);
  const Pool p = pool_attributes(ctx, false);
  const cd_attribute* cip = chipdock::support::find_attribute(ctx, "count_include_pad");
  const bool include_pad = cip != nullptr && chipdock::support::bool_attribute(ctx, "count_include_pad");
  if (out.numel() == 0) return;
  if (!aclnn_padding_fits(p)) {
    composed_avg_pool(ctx, p, include_pad, x, out);
    return;
  }
  const IntArrayDesc kernel({p.kh, p.kw}), stride({p.win.sh, p.win.sw}), padding({p.win.pt, p.win.pl});
  const TensorDesc dx = x.desc(), dout = out.desc();
  run_aclnn(ctx, nn::AvgPool2d, dx.get(), kernel.get(), stride.get(), padding.get(), p.ceil_mode, include_pad,
            int64_t{0}, nn::kKeepDtype, dout.get());
}

void global_avg_pool(const cd_kernel_context* ctx) {
  nn::require_arity(ctx, 1, 1);
  Operand x = nn::input(ctx, 0);
  const Operand out = nn::output(ctx, 0);
  if (x.ndim() < 2 || out.ndim() != x.ndim()) {
    fail(CD_STATUS_INVALID_ARGUMENT, "x must be (N, C, ...) and the output its rank, got %s and %s",
         nn::shape_string(x.shape).c_str(), nn::shape_string(out.shape).c_str());
  }
  if (out.numel() == 0) return;
  const int64_t N = x.shape[0], C = x.shape[1];
  // aclnnAdaptiveAvgPool2d pools the last two dims: the spatial dims become (1, L).
  if (x.ndim() != 4) {
    int64_t L = 1;
    for (size_t d = 2; d < x.shape.size(); ++d) L *= x.shape[d];
    bool ok = false;
    Operand merged = x.reshaped({N, C, 1, L}, &ok);
    if (!ok) merged = nn::contiguous_copy(ctx, x, "global_avg_pool's merged input").reshaped({N, C, 1, L}, &ok);
    x = merged;
  }
  bool ok = false;
  const Operand out4 = out.reshaped({N, C, 1, 1}, &ok);
  if (!ok) fail(CD_STATUS_INVALID_ARGUMENT, "output %s is not C-contiguous", nn::shape_string(out.shape).c_str());
  const IntArrayDesc size({1, 1});
  const TensorDesc dx = x.desc(), dout = out4.desc();
  run_aclnn(ctx, nn::AdaptiveAvgPool2d, dx.get(), size.get(), dout.get());
}

cd_error* max_pool2d_kernel(const cd_kernel_context* ctx) noexcept {
  return guard("max_pool2d", [ctx] { max_pool(ctx); });
}
cd_error* avg_pool2d_kernel(const cd_kernel_context* ctx) noexcept {
  return guard("avg_pool2d", [ctx] { avg_pool(ctx); });
}
cd_error* global_avg_pool_kernel(const cd_kernel_context* ctx) noexcept {
  return guard("global_avg_pool", [ctx] { global_avg_pool(ctx); });
}

}  // namespace

void register_nn_pool(Registrar& r) {
  static const cd_dtype_t kTypes[] = {CD_DTYPE_FLOAT32, CD_DTYPE_FLOAT16, CD_DTYPE_BFLOAT16};
  if (r.resolve(nn::MaxPool2dWithIndices, "max_pool2d") && r.resolve(nn::ConstantPadNd, "max_pool2d")) {
    for (cd_dtype_t t : kTypes) r.add("max_pool2d", {t, t}, max_pool2d_kernel);
  }
  if (r.resolve(nn::AvgPool2d, "avg_pool2d") && r.resolve(nn::ConstantPadNd, "avg_pool2d") &&
      r.resolve(nn::Cast, "avg_pool2d") && r.resolve(nn::Div, "avg_pool2d") &&
      r.resolve(nn::InplaceFillScalar, "avg_pool2d")) {
    for (cd_dtype_t t : kTypes) r.add("avg_pool2d", {t, t}, avg_pool2d_kernel);
  }
  if (r.resolve(nn::AdaptiveAvgPool2d, "global_avg_pool") && r.resolve(nn::InplaceCopy, "global_avg_pool")) {
    for (cd_dtype_t t : kTypes) r.add("global_avg_pool", {t, t}, global_avg_pool_kernel);
  }
}

}  // namespace chipdock_npu
