// max_pool2d on aclnnMaxPool2dWithIndices, avg_pool2d on aclnnAvgPool2d,
// global_avg_pool on aclnnAdaptiveAvgPool2d (output size 1 x 1).
//
// Both window ops follow PyTorch's rules, as chipdock does, but take only
// symmetric paddings of at most half the kernel. max_pool2d otherwise pads
// the input explicitly with -inf (aclnnConstantPadNd into workspace; a row
// no window reaches is cut off by narrowing the view) and pools that with
// no padding. avg_pool2d has no such rewrite (the divisor of a window that
// overlaps an asymmetric padding cannot be expressed): it refuses those
// calls with the reason (CD_STATUS_UNIMPLEMENTED).
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

void max_pool(const cd_kernel_context* ctx) {
  nn::require_arity(ctx, 1, 1);
  Operand x = nn::input(ctx, 0);
  const Operand out = nn::output(ctx, 0);
  require_nchw(x, out);
  Pool p = pool_attributes(ctx, true);
  if (out.numel() == 0) return;
  const int64_t OH = out.shape[2], OW = out.shape[3];
  if (!aclnn_padding_fits(p)) {
    // Pad with -inf so that every window lies inside: rows [-top, (OH-1)*sh + dh*(kh-1) + 1 - top).
    const int64_t need_h = (OH - 1) * p.win.sh + p.win.dh * (p.kh - 1) + 1;
    const int64_t need_w = (OW - 1) * p.win.sw + p.win.dw * (p.kw - 1) + 1;
    const int64_t bottom = need_h - p.win.pt - x.shape[2], right = need_w - p.win.pl - x.shape[3];
    if (bottom < 0) x = x.narrowed(2, 0, x.shape[2] + bottom);  // rows no window reaches
    if (right < 0) x = x.narrowed(3, 0, x.shape[3] + right);
    const Operand padded = nn::scratch(ctx, x.dtype, {x.shape[0], x.shape[1], need_h, need_w},
                                       "max_pool2d's -inf padded input");
    // aclnnConstantPadNd's pad: last dim first (left, right, top, bottom), as torch.nn.functional.pad.
    const IntArrayDesc pad({p.win.pl, std::max<int64_t>(right, 0), p.win.pt, std::max<int64_t>(bottom, 0)});
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

void avg_pool(const cd_kernel_context* ctx) {
  nn::require_arity(ctx, 1, 1);
  const Operand x = nn::input(ctx, 0);
  const Operand out = nn::output(ctx, 0);
  require_nchw(x, out);
  const Pool p = pool_attributes(ctx, false);
  const cd_attribute* cip = chipdock::support::find_attribute(ctx, "count_include_pad");
  const bool include_pad = cip != nullptr && chipdock::support::bool_attribute(ctx, "count_include_pad");
  if (!aclnn_padding_fits(p)) {
    fail(CD_STATUS_UNIMPLEMENTED,
         "padding (%lld, %lld, %lld, %lld) with kernel %lldx%lld: aclnnAvgPool2d takes only symmetric padding "
         "of at most half the kernel",
         static_cast<long long>(p.win.pt), static_cast<long long>(p.win.pl), static_cast<long long>(p.win.pb),
         static_cast<long long>(p.win.pr), static_cast<long long>(p.kh), static_cast<long long>(p.kw));
  }
  if (out.numel() == 0) return;
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
  if (r.resolve(nn::AvgPool2d, "avg_pool2d")) {
    for (cd_dtype_t t : kTypes) r.add("avg_pool2d", {t, t}, avg_pool2d_kernel);
  }
  if (r.resolve(nn::AdaptiveAvgPool2d, "global_avg_pool") && r.resolve(nn::InplaceCopy, "global_avg_pool")) {
    for (cd_dtype_t t : kTypes) r.add("global_avg_pool", {t, t}, global_avg_pool_kernel);
  }
}

}  // namespace chipdock_npu
