// The double's aclnnConvolution (hicann ops-nn conv/convolution_forward
// docs), 2-d only (NCHW input and weight; the real op also does 1-d and
// 3-d, which chipdock does not call):
//   transposed = false: out[n, k, oh, ow] = bias[k] + sum over the group's
//     channels c and taps (r, s) of x[n, c, oh*sh - pt + r*dh, ow*sw - pl + s*dw] * w[k, c, r, s]
//     padding: 2 values (rows, columns, both sides) or 4 (top, bottom, left, right)
//   transposed = true: the gradient of that with respect to x; weight
//     (C_in, K / groups, R, S), symmetric padding, outputPadding in
//     [0, max(stride, dilation)), OH = (H-1)*sh - 2*ph + dh*(R-1) + oph + 1
// dtypes (A2): FLOAT, FLOAT16, BFLOAT16; input and weight alike; out may
// differ from them only when transposed = false. cubeMathType KEEP_DTYPE is
// refused for FLOAT (the doc: "暂不支持" on A2/A3); ALLOW_FP32_DOWN_PRECISION
// and USE_HF32 let the chip compute a FLOAT convolution in HFLOAT32, which
// this double does not model (it sums in double either way).
// The sums are kept in double in the op's workspace (one per output element).
#include <algorithm>

#include "nn_sim.h"

namespace cdsim {
namespace {

using nn::invalid;

struct ConvArgs {
  TensorInfo x, w, out;
  bool has_bias = false;
  TensorInfo bias;
  int64_t sh = 1, sw = 1, pt = 0, pb = 0, pl = 0, pr = 0, dh = 1, dw = 1, oph = 0, opw = 0, groups = 1;
  bool transposed = false;
};

void forward(const ConvArgs& a, const std::vector<double>& x, const std::vector<double>& w, double* acc) {
  const int64_t N = a.x.shape[0], C = a.x.shape[1], H = a.x.shape[2], W = a.x.shape[3];
  const int64_t K = a.w.shape[0], Cg = a.w.shape[1], R = a.w.shape[2], S = a.w.shape[3];
  const int64_t OH = a.out.shape[2], OW = a.out.shape[3], Kg = K / a.groups;
  std::fill(acc, acc + N * K * OH * OW, 0.0);
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t k = 0; k < K; ++k) {
      double* plane = acc + (n * K + k) * OH * OW;
      const int64_t g = k / Kg;
      for (int64_t c = 0; c < Cg; ++c) {
        const double* xc = x.data() + (n * C + g * Cg + c) * H * W;
        for (int64_t r = 0; r < R; ++r) {
          for (int64_t s = 0; s < S; ++s) {
            const double wv = w[((k * Cg + c) * R + r) * S + s];
            for (int64_t oh = 0; oh < OH; ++oh) {
              const int64_t ih = oh * a.sh - a.pt + r * a.dh;
              if (ih < 0 || ih >= H) continue;
              const double* xrow = xc + ih * W;
              double* orow = plane + oh * OW;
              for (int64_t ow = 0; ow < OW; ++ow) {
                const int64_t iw = ow * a.sw - a.pl + s * a.dw;
                if (iw >= 0 && iw < W) orow[ow] += xrow[iw] * wv;
              }
            }
          }
        }
      }
    }
  }
}

void backward_data(const ConvArgs& a, const std::vector<double>& x, const std::vector<double>& w, double* acc) {
  const int64_t N = a.x.shape[0], C = a.x.shape[1], H = a.x.shape[2], W = a.x.shape[3];
  const int64_t Kg = a.w.shape[1], R = a.w.shape[2], S = a.w.shape[3];
  const int64_t K = a.out.shape[1], OH = a.out.shape[2], OW = a.out.shape[3], Cg = C / a.groups;
  std::fill(acc, acc + N * K * OH * OW, 0.0);
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t c = 0; c < C; ++c) {
      const int64_t g = c / Cg;
      const double* xc = x.data() + (n * C + c) * H * W;
      for (int64_t kk = 0; kk < Kg; ++kk) {
        double* plane = acc + (n * K + g * Kg + kk) * OH * OW;
        for (int64_t r = 0; r < R; ++r) {
          for (int64_t s = 0; s < S; ++s) {
            const double wv = w[((c * Kg + kk) * R + r) * S + s];
            for (int64_t ih = 0; ih < H; ++ih) {
              const int64_t oh = ih * a.sh - a.pt + r * a.dh;
              if (oh < 0 || oh >= OH) continue;
              for (int64_t iw = 0; iw < W; ++iw) {
                const int64_t ow = iw * a.sw - a.pl + s * a.dw;
                if (ow >= 0 && ow < OW) plane[oh * OW + ow] += xc[ih * W + iw] * wv;
              }
            }
          }
        }
      }
    }
  }
}

std::vector<int64_t> two(const char* op, const aclIntArray* array, const char* what, int64_t min) {
  const std::vector<int64_t> v = int_array(array, what);
  if (v.size() != 2) invalid(op, "%s has %zu values; a 2-d convolution takes 2", what, v.size());
  for (int64_t e : v) {
    if (e < min) invalid(op, "%s value %lld is below %lld", what, static_cast<long long>(e), static_cast<long long>(min));
  }
  return v;
}

aclnnStatus plan_convolution(const aclTensor* input, const aclTensor* weight, const aclTensor* bias,
                             const aclIntArray* stride, const aclIntArray* padding, const aclIntArray* dilation,
                             bool transposed, const aclIntArray* output_padding, int64_t groups, aclTensor* output,
                             int8_t cube, uint64_t* workspace_size, aclOpExecutor** executor) {
  const char* op = "aclnnConvolution";
  ConvArgs a;
  a.x = info(input, "input");
  a.w = info(weight, "weight");
  a.out = info(output, "output");
  a.transposed = transposed;
  a.groups = groups;
  if (a.x.shape.size() != 4 || a.w.shape.size() != 4 || a.out.shape.size() != 4) {
    invalid(op, "input %s, weight %s, output %s: the simulated runtime does 2-d (NCHW) convolutions only",
            nn::shape_string(a.x.shape).c_str(), nn::shape_string(a.w.shape).c_str(),
            nn::shape_string(a.out.shape).c_str());
  }
  nn::require_a2_float(op, a.x, "input");
  nn::require_same_dtype(op, a.x, "input", a.w, "weight");
  nn::require_a2_float(op, a.out, "output");
  if (transposed) nn::require_same_dtype(op, a.x, "input", a.out, "output");
  if (cube < 0 || cube > 3) invalid(op, "cubeMathType %d is not 0..3", cube);
  if (cube == 0 && a.x.dtype == ACL_FLOAT) invalid(op, "cubeMathType KEEP_DTYPE does not take FLOAT on Atlas A2");
  if (cube == 2 && a.x.dtype == ACL_BF16) invalid(op, "cubeMathType USE_FP16 does not take BFLOAT16");
  const std::vector<int64_t> s = two(op, stride, "stride", 1), d = two(op, dilation, "dilation", 1);
  a.sh = s[0];
  a.sw = s[1];
  a.dh = d[0];
  a.dw = d[1];
  const std::vector<int64_t> p = int_array(padding, "padding");
  if (p.size() == 2) {
    a.pt = a.pb = p[0];
    a.pl = a.pr = p[1];
  } else if (p.size() == 4 && !transposed) {
    a.pt = p[0];
    a.pb = p[1];
    a.pl = p[2];
    a.pr = p[3];
  } else {
    invalid(op, "padding has %zu values; 2, or 4 for a non-transposed conv2d", p.size());
  }
  for (int64_t v : {a.pt, a.pb, a.pl, a.pr}) {
    if (v < 0 || v > 255) invalid(op, "padding value %lld is outside [0, 255]", static_cast<long long>(v));
  }
  if (groups < 1 || groups > 65535) invalid(op, "groups %lld is outside [1, 65535]", static_cast<long long>(groups));
  const int64_t N = a.x.shape[0], C = a.x.shape[1], H = a.x.shape[2], W = a.x.shape[3];
  const int64_t R = a.w.shape[2], S = a.w.shape[3];
  std::vector<int64_t> expected;
  int64_t K = 0;
  if (!transposed) {
    K = a.w.shape[0];
    if (a.w.shape[1] * groups != C || K % groups != 0) {
      invalid(op, "groups %lld with input channels %lld and weight %s", static_cast<long long>(groups),
              static_cast<long long>(C), nn::shape_string(a.w.shape).c_str());
    }
    const int64_t span_h = H + a.pt + a.pb - a.dh * (R - 1) - 1, span_w = W + a.pl + a.pr - a.dw * (S - 1) - 1;
    if (span_h < 0 || span_w < 0) invalid(op, "the padded input is smaller than the dilated kernel");
    expected = {N, K, span_h / a.sh + 1, span_w / a.sw + 1};
  } else {
    const std::vector<int64_t> op_pad = two(op, output_padding, "outputPadding", 0);
    a.oph = op_pad[0];
    a.opw = op_pad[1];
    if (a.oph >= std::max(a.sh, a.dh) || a.opw >= std::max(a.sw, a.dw)) {
      invalid(op, "outputPadding (%lld, %lld) must be less than stride or dilation", static_cast<long long>(a.oph),
              static_cast<long long>(a.opw));
    }
    if (a.w.shape[0] != C || C % groups != 0) {
      invalid(op, "transposed: weight %s must have the input's %lld channels first, divisible by groups %lld",
              nn::shape_string(a.w.shape).c_str(), static_cast<long long>(C), static_cast<long long>(groups));
    }
    K = a.w.shape[1] * groups;
    expected = {N, K, (H - 1) * a.sh - 2 * a.pt + a.dh * (R - 1) + a.oph + 1,
                (W - 1) * a.sw - 2 * a.pl + a.dw * (S - 1) + a.opw + 1};
  }
  nn::require_shape(op, a.out, expected, "output");
  if (bias != nullptr) {
    a.has_bias = true;
    a.bias = info(bias, "bias");
    nn::require_same_dtype(op, a.bias, "bias", a.x, "input");
    nn::require_shape(op, a.bias, {K}, "bias");
  }
  const int64_t count = a.out.numel();
  Plan plan_{op, static_cast<uint64_t>(count) * sizeof(double), [a, count](char* workspace) {
               if (count == 0) return;
               const HostTensor tx(a.x), tw(a.w), tout(a.out);
               double* acc = reinterpret_cast<double*>(workspace);
               const std::vector<double> x = nn::load(tx), w = nn::load(tw);
               if (a.transposed) backward_data(a, x, w, acc);
               else forward(a, x, w, acc);
               std::vector<double> result(acc, acc + count);
               if (a.has_bias) {
                 const std::vector<double> b = nn::load(HostTensor(a.bias));
                 const int64_t K = a.out.shape[1], plane = a.out.shape[2] * a.out.shape[3];
                 for (int64_t i = 0; i < count; ++i) result[static_cast<size_t>(i)] += b[(i / plane) % K];
               }
               nn::store(tout, result);
             }};
  return plan(std::move(plan_), workspace_size, executor);
}

}  // namespace
}  // namespace cdsim

extern "C" aclnnStatus aclnnConvolutionGetWorkspaceSize(const aclTensor* input, const aclTensor* weight,
                                                        const aclTensor* bias, const aclIntArray* stride,
                                                        const aclIntArray* padding, const aclIntArray* dilation,
                                                        bool transposed, const aclIntArray* outputPadding,
                                                        int64_t groups, aclTensor* output, int8_t cubeMathType,
                                                        uint64_t* workspaceSize, aclOpExecutor** executor) {
  return cdsim::guarded_op([&] {
    return cdsim::plan_convolution(input, weight, bias, stride, padding, dilation, transposed, outputPadding, groups,
                                   output, cubeMathType, workspaceSize, executor);
  });
}
CDSIM_ACLNN_RUN(Convolution)
