// The double's pools (hicann ops-nn pooling docs), PyTorch's window rules:
// output row oh covers input rows oh*stride - pad + i*dilation, i < kernel;
// with ceilMode the size rounds up and a last window starting in the
// bottom/right padding is dropped. Paddings are symmetric and at most half
// the kernel. Inputs (N, C, H, W) or (C, H, W); FLOAT, FLOAT16, BFLOAT16.
//   aclnnMaxPool2dWithIndices: padding counts as -inf, NaN propagates, the
//     first of equal maxima (row-major window order) wins; indices (INT32 or
//     INT64) are h * W + w within the plane.
//   aclnnAvgPool2d: with countIncludePad the divisor is the window clipped to
//     the padded input, else the input elements in it; divisorOverride (> 0)
//     replaces it. An empty input is refused (the doc: no empty tensor).
//   aclnnAdaptiveAvgPool2d: window i of OH covers rows
//     [floor(i*H/OH), ceil((i+1)*H/OH)).
#include <cmath>
#include <limits>

#include "nn_sim.h"

namespace cdsim {
namespace {

using nn::invalid;

struct Window {
  int64_t kh, kw, sh, sw, ph, pw, dh = 1, dw = 1;
  bool ceil_mode = false;
};

int64_t pooled_size(int64_t in, int64_t pad, int64_t kernel, int64_t stride, int64_t dilation, bool ceil_mode) {
  const int64_t span = in + 2 * pad - dilation * (kernel - 1) - 1;
  if (span < 0) return 0;
  int64_t out = (ceil_mode ? (span + stride - 1) / stride : span / stride) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

// The checks both window pools share; returns (N*C planes, H, W) and the expected output shape.
Window check_window(const char* op, const TensorInfo& x, const TensorInfo& out, const aclIntArray* kernel,
                    const aclIntArray* stride, const aclIntArray* padding, const aclIntArray* dilation,
                    bool ceil_mode) {
  nn::require_ndim(op, x, 3, 4, "self");
  nn::require_a2_float(op, x, "self");
  nn::require_same_dtype(op, x, "self", out, "out");
  Window w;
  const std::vector<int64_t> k = nn::pair(op, int_array(kernel, "kernelSize"), "kernelSize", false, {});
  const std::vector<int64_t> s = nn::pair(op, int_array(stride, "stride"), "stride", true, k);
  const std::vector<int64_t> p = nn::pair(op, int_array(padding, "padding"), "padding", false, {});
  const std::vector<int64_t> d =
      dilation == nullptr ? std::vector<int64_t>{1, 1} : nn::pair(op, int_array(dilation, "dilation"), "dilation", false, {});
  w.kh = k[0];
  w.kw = k[1];
  w.sh = s[0];
  w.sw = s[1];
  w.ph = p[0];
  w.pw = p[1];
  w.dh = d[0];
  w.dw = d[1];
  w.ceil_mode = ceil_mode;
  if (w.kh < 1 || w.kw < 1 || w.sh < 1 || w.sw < 1 || w.dh < 1 || w.dw < 1) {
    invalid(op, "kernelSize, stride and dilation must be positive");
  }
  if (w.ph < 0 || w.pw < 0 || w.ph > w.kh / 2 || w.pw > w.kw / 2) {
    invalid(op, "padding (%lld, %lld) must be in [0, kernelSize / 2] for kernel (%lld, %lld)",
            static_cast<long long>(w.ph), static_cast<long long>(w.pw), static_cast<long long>(w.kh),
            static_cast<long long>(w.kw));
  }
  std::vector<int64_t> expected = x.shape;
  const size_t nd = expected.size();
  expected[nd - 2] = pooled_size(x.shape[nd - 2], w.ph, w.kh, w.sh, w.dh, ceil_mode);
  expected[nd - 1] = pooled_size(x.shape[nd - 1], w.pw, w.kw, w.sw, w.dw, ceil_mode);
  nn::require_shape(op, out, expected, "out");
  return w;
}

aclnnStatus plan_max_pool(const aclTensor* self, const aclIntArray* kernel, const aclIntArray* stride,
                          const aclIntArray* padding, const aclIntArray* dilation, bool ceil_mode, aclTensor* out,
                          aclTensor* indices, uint64_t* workspace_size, aclOpExecutor** executor) {
  const char* op = "aclnnMaxPool2dWithIndices";
  const TensorInfo x = info(self, "self"), o = info(out, "out"), idx = info(indices, "indices");
  const Window w = check_window(op, x, o, kernel, stride, padding, dilation, ceil_mode);
  if (idx.dtype != ACL_INT32 && idx.dtype != ACL_INT64) {
    invalid(op, "indices has dtype %s; INT32 or INT64", dtype_name(idx.dtype));
  }
  nn::require_shape(op, idx, o.shape, "indices");
  Plan p{op, 0, [x, o, idx, w](char*) {
           if (o.numel() == 0) return;
           const HostTensor tx(x), tout(o), tidx(idx);
           const std::vector<double> in = nn::load(tx);
           const size_t nd = x.shape.size();
           const int64_t H = x.shape[nd - 2], W = x.shape[nd - 1], OH = o.shape[nd - 2], OW = o.shape[nd - 1];
           const int64_t planes = x.numel() / (H * W);
           std::vector<double> result(static_cast<size_t>(o.numel()));
           for (int64_t pl = 0; pl < planes; ++pl) {
             const double* src = in.data() + pl * H * W;
             for (int64_t oh = 0; oh < OH; ++oh) {
               for (int64_t ow = 0; ow < OW; ++ow) {
                 double best = -std::numeric_limits<double>::infinity();
                 int64_t where = -1;
                 for (int64_t i = 0; i < w.kh; ++i) {
                   const int64_t ih = oh * w.sh - w.ph + i * w.dh;
                   if (ih < 0 || ih >= H) continue;
                   for (int64_t j = 0; j < w.kw; ++j) {
                     const int64_t iw = ow * w.sw - w.pw + j * w.dw;
                     if (iw < 0 || iw >= W) continue;
                     const double v = src[ih * W + iw];
                     const bool take = where < 0 || (std::isnan(v) && !std::isnan(best)) || v > best;
                     if (take) {
                       best = v;
                       where = ih * W + iw;
                     }
                   }
                 }
                 const int64_t linear = (pl * OH + oh) * OW + ow;
                 result[static_cast<size_t>(linear)] = best;
                 tidx.set_int(linear, where < 0 ? 0 : where);
               }
             }
           }
           nn::store(tout, result);
         }};
  return plan(std::move(p), workspace_size, executor);
}

aclnnStatus plan_avg_pool(const aclTensor* self, const aclIntArray* kernel, const aclIntArray* strides,
                          const aclIntArray* paddings, bool ceil_mode, bool include_pad, int64_t divisor_override,
                          int8_t cube, aclTensor* out, uint64_t* workspace_size, aclOpExecutor** executor) {
  const char* op = "aclnnAvgPool2d";
  const TensorInfo x = info(self, "self"), o = info(out, "out");
  const Window w = check_window(op, x, o, kernel, strides, paddings, nullptr, ceil_mode);
  if (x.numel() == 0) invalid(op, "self is empty (not supported)");
  if (cube < 0 || cube > 2) invalid(op, "cubeMathType %d: KEEP_DTYPE, ALLOW_FP32_DOWN_PRECISION or USE_FP16", cube);
  if (cube == 1 && x.dtype == ACL_FLOAT) invalid(op, "cubeMathType ALLOW_FP32_DOWN_PRECISION does not take FLOAT on A2");
  if (cube == 2 && x.dtype == ACL_BF16) invalid(op, "cubeMathType USE_FP16 does not take BFLOAT16");
  if (divisor_override < 0) invalid(op, "divisorOverride %lld is negative", static_cast<long long>(divisor_override));
  Plan p{op, 0, [x, o, w, include_pad, divisor_override](char*) {
           if (o.numel() == 0) return;
           const HostTensor tx(x), tout(o);
           const std::vector<double> in = nn::load(tx);
           const size_t nd = x.shape.size();
           const int64_t H = x.shape[nd - 2], W = x.shape[nd - 1], OH = o.shape[nd - 2], OW = o.shape[nd - 1];
           const int64_t planes = x.numel() / (H * W);
           std::vector<double> result(static_cast<size_t>(o.numel()));
           for (int64_t pl = 0; pl < planes; ++pl) {
             const double* src = in.data() + pl * H * W;
             for (int64_t oh = 0; oh < OH; ++oh) {
               for (int64_t ow = 0; ow < OW; ++ow) {
                 int64_t h0 = oh * w.sh - w.ph, w0 = ow * w.sw - w.pw;
                 int64_t h1 = std::min(h0 + w.kh, H + w.ph), w1 = std::min(w0 + w.kw, W + w.pw);
                 const int64_t padded_count = (h1 - h0) * (w1 - w0);
                 h0 = std::max<int64_t>(h0, 0);
                 w0 = std::max<int64_t>(w0, 0);
                 h1 = std::min(h1, H);
                 w1 = std::min(w1, W);
                 double sum = 0.0;
                 for (int64_t ih = h0; ih < h1; ++ih) {
                   for (int64_t iw = w0; iw < w1; ++iw) sum += src[ih * W + iw];
                 }
                 const int64_t divisor =
                     divisor_override > 0 ? divisor_override : include_pad ? padded_count : (h1 - h0) * (w1 - w0);
                 result[static_cast<size_t>((pl * OH + oh) * OW + ow)] = sum / static_cast<double>(divisor);
               }
             }
           }
           nn::store(tout, result);
         }};
  return plan(std::move(p), workspace_size, executor);
}

aclnnStatus plan_adaptive_avg_pool(const aclTensor* self, const aclIntArray* output_size, aclTensor* out,
                                   uint64_t* workspace_size, aclOpExecutor** executor) {
  const char* op = "aclnnAdaptiveAvgPool2d";
  const TensorInfo x = info(self, "self"), o = info(out, "out");
  nn::require_ndim(op, x, 3, 4, "self");
  nn::require_a2_float(op, x, "self");
  nn::require_same_dtype(op, x, "self", o, "out");
  const std::vector<int64_t> size = int_array(output_size, "outputSize");
  if (size.size() != 2 || size[0] < 1 || size[1] < 1) invalid(op, "outputSize must be 2 positive values");
  std::vector<int64_t> expected = x.shape;
  expected[expected.size() - 2] = size[0];
  expected[expected.size() - 1] = size[1];
  nn::require_shape(op, o, expected, "out");
  const size_t nd = x.shape.size();
  if (x.shape[nd - 2] == 0 || x.shape[nd - 1] == 0) invalid(op, "self has an empty spatial dim");
  Plan p{op, 0, [x, o](char*) {
           if (o.numel() == 0) return;
           const HostTensor tx(x), tout(o);
           const std::vector<double> in = nn::load(tx);
           const size_t nd = x.shape.size();
           const int64_t H = x.shape[nd - 2], W = x.shape[nd - 1], OH = o.shape[nd - 2], OW = o.shape[nd - 1];
           const int64_t planes = x.numel() / (H * W);
           std::vector<double> result(static_cast<size_t>(o.numel()));
           for (int64_t pl = 0; pl < planes; ++pl) {
             const double* src = in.data() + pl * H * W;
             for (int64_t oh = 0; oh < OH; ++oh) {
               const int64_t h0 = oh * H / OH, h1 = ((oh + 1) * H + OH - 1) / OH;
               for (int64_t ow = 0; ow < OW; ++ow) {
                 const int64_t w0 = ow * W / OW, w1 = ((ow + 1) * W + OW - 1) / OW;
                 double sum = 0.0;
                 for (int64_t ih = h0; ih < h1; ++ih) {
                   for (int64_t iw = w0; iw < w1; ++iw) sum += src[ih * W + iw];
                 }
                 result[static_cast<size_t>((pl * OH + oh) * OW + ow)] = sum / static_cast<double>((h1 - h0) * (w1 - w0));
               }
             }
           }
           nn::store(tout, result);
         }};
  return plan(std::move(p), workspace_size, executor);
}

}  // namespace
}  // namespace cdsim

extern "C" aclnnStatus aclnnMaxPool2dWithIndicesGetWorkspaceSize(const aclTensor* self, const aclIntArray* kernelSize,
                                                                 const aclIntArray* stride, const aclIntArray* padding,
                                                                 const aclIntArray* dilation, bool ceilMode,
                                                                 aclTensor* out, aclTensor* indices,
                                                                 uint64_t* workspaceSize, aclOpExecutor** executor) {
  return cdsim::guarded_op([&] {
    return cdsim::plan_max_pool(self, kernelSize, stride, padding, dilation, ceilMode, out, indices, workspaceSize,
                                executor);
  });
}
CDSIM_ACLNN_RUN(MaxPool2dWithIndices)

extern "C" aclnnStatus aclnnAvgPool2dGetWorkspaceSize(const aclTensor* self, const aclIntArray* kernelSize,
                                                      const aclIntArray* strides, const aclIntArray* paddings,
                                                      bool ceilMode, bool countIncludePad, int64_t divisorOverride,
                                                      int8_t cubeMathType, aclTensor* out, uint64_t* workspaceSize,
                                                      aclOpExecutor** executor) {
  return cdsim::guarded_op([&] {
    return cdsim::plan_avg_pool(self, kernelSize, strides, paddings, ceilMode, countIncludePad, divisorOverride,
                                cubeMathType, out, workspaceSize, executor);
  });
}
CDSIM_ACLNN_RUN(AvgPool2d)

extern "C" aclnnStatus aclnnAdaptiveAvgPool2dGetWorkspaceSize(const aclTensor* self, const aclIntArray* outputSize,
                                                              aclTensor* out, uint64_t* workspaceSize,
                                                              aclOpExecutor** executor) {
  return cdsim::guarded_op(
      [&] { return cdsim::plan_adaptive_avg_pool(self, outputSize, out, workspaceSize, executor); });
}
CDSIM_ACLNN_RUN(AdaptiveAvgPool2d)
