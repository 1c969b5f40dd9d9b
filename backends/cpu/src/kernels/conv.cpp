// conv2d, conv2d_fused and conv_transpose2d.
//
// conv2d: x (N, C, H, W), weight (K, C/groups, R, S), bias (K) optional;
// out (N, K, OH, OW) with OH = floor((H + top + bottom - dil*(R-1) - 1) / stride) + 1.
// conv_transpose2d: x (N, C, H, W), weight (C, K/groups, R, S), bias (K);
// OH = (H-1)*stride - top - bottom + dil*(R-1) + output_padding + 1 (the
// gradient of conv2d with respect to its input, as in PyTorch).
// conv2d_fused: out = activation(conv2d(x, weight, bias) + residual), the
// residual (optional) of the output's shape; oneDNN runs it as post-ops
// (sum, then eltwise) on the convolution's float32 accumulators, the direct
// loops as a pass over their float32 (float64) sums: on every route the
// result is rounded once, after the epilogue. With layout nhwc the output is
// (N, OH, OW, K): the kernel works on its (N, K, OH, OW) view, whose strides
// are oneDNN's own channels-last layout, so a chain of such convolutions
// reorders nothing.
// Inputs may have any strides.
//
// float32 / bfloat16 run through oneDNN: the convolution picks its blocked
// layouts ("any") and reorders convert from and to the caller's NCHW
// strided tensors; primitives and reorders are cached by problem, and
// weights the core marks with a version (cd_tensor_version) stay reordered
// across calls in the packed cache (packed_cache.h). float16, and bfloat16
// where oneDNN has no bfloat16 convolution (below AVX-512:
// onednn::routes()), are computed in float32 and rounded once; float64 uses
// direct loops, as does a problem oneDNN has no implementation for. Which
// of these runs is decided when the kernel is called (plan_conv), where the
// primitive is made.
#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "chipdock/support/attributes.h"
#include "../error.h"
#include "../stream.h"
#include "isa.h"
#include "kernels.h"
#include "linalg_common.h"
#include "numeric.h"
#include "onednn.h"
#include "packed_cache.h"

namespace chipdock_cpu {
namespace linalg {
namespace {

// conv2d_fused's epilogue: out = act(out + residual).
struct Epilogue {
  bool residual = false;  // the fourth input
  bool relu = false;
  bool nhwc = false;      // layout nhwc: the output (and residual) are (N, OH, OW, K)
  bool any() const { return residual || relu; }
};

struct ConvShape : Window2d {
  Epilogue epilogue;
  bool transposed = false;
  int64_t N = 0, C = 0, H = 0, W = 0;  // input
  int64_t K = 0, OH = 0, OW = 0;       // output channels and size
  int64_t R = 0, S = 0, G = 1;         // kernel, groups
  int64_t oph = 0, opw = 0;            // output_padding (transposed)
};

ConvShape read_shape(const cd_kernel_context* ctx, const HostTensor& x, const HostTensor& w,
                     const HostTensor* bias, const HostTensor& out, bool transposed) {
  require_ndim(x, 4, "x");
  require_ndim(w, 4, "weight");
  require_ndim(out, 4, "the output");
  ConvShape s;
  s.transposed = transposed;
  static_cast<Window2d&>(s) = window_attributes(ctx, {1, 1}, true);
  s.G = attr_int(ctx, "groups", 1);
  if (s.G < 1) fail(CD_STATUS_INVALID_ARGUMENT, "groups must be >= 1");
  s.N = x.shape[0];
  s.C = x.shape[1];
  s.H = x.shape[2];
  s.W = x.shape[3];
  s.R = w.shape[2];
  s.S = w.shape[3];
  if (s.C % s.G != 0) {
    fail(CD_STATUS_INVALID_ARGUMENT, "groups %lld does not divide %lld input channels",
         static_cast<long long>(s.G), static_cast<long long>(s.C));
  }
  int64_t oh = 0, ow = 0;
  if (!transposed) {
    s.K = w.shape[0];
    if (w.shape[1] * s.G != s.C || s.K % s.G != 0) {
      fail(CD_STATUS_INVALID_ARGUMENT, "weight (%lld, %lld, ...) does not fit %lld input channels "
           "in %lld groups", static_cast<long long>(w.shape[0]), static_cast<long long>(w.shape[1]),
           static_cast<long long>(s.C), static_cast<long long>(s.G));
    }
    oh = (s.H + s.pt + s.pb - s.dh * (s.R - 1) - 1);
    ow = (s.W + s.pl + s.pr - s.dw * (s.S - 1) - 1);
    oh = oh < 0 ? 0 : oh / s.sh + 1;
    ow = ow < 0 ? 0 : ow / s.sw + 1;
  } else {
    const auto op = attr_ints(ctx, "output_padding", 2, {0, 0});
    s.oph = op[0];
    s.opw = op[1];
    if (s.oph < 0 || s.opw < 0) fail(CD_STATUS_INVALID_ARGUMENT, "output_padding must be >= 0");
    if (w.shape[0] != s.C) {
      fail(CD_STATUS_INVALID_ARGUMENT, "weight dim 0 (%lld) must equal the %lld input channels",
           static_cast<long long>(w.shape[0]), static_cast<long long>(s.C));
    }
    s.K = w.shape[1] * s.G;
    oh = (s.H - 1) * s.sh - s.pt - s.pb + s.dh * (s.R - 1) + s.oph + 1;
    ow = (s.W - 1) * s.sw - s.pl - s.pr + s.dw * (s.S - 1) + s.opw + 1;
  }
  s.OH = out.shape[2];
  s.OW = out.shape[3];
  if (out.shape[0] != s.N || out.shape[1] != s.K || s.OH != oh || s.OW != ow) {
    fail(CD_STATUS_INVALID_ARGUMENT, "output is (%lld, %lld, %lld, %lld); expected (%lld, %lld, "
         "%lld, %lld)", static_cast<long long>(out.shape[0]), static_cast<long long>(out.shape[1]),
         static_cast<long long>(out.shape[2]), static_cast<long long>(out.shape[3]),
         static_cast<long long>(s.N), static_cast<long long>(s.K), static_cast<long long>(oh),
         static_cast<long long>(ow));
  }
  if (bias != nullptr && (bias->shape.size() != 1 || bias->shape[0] != s.K)) {
    fail(CD_STATUS_INVALID_ARGUMENT, "bias must have shape (%lld,)", static_cast<long long>(s.K));
  }
  return s;
}

// A 4-d (N, H, W, C) tensor's shape and strides seen as (N, C, H, W).
HostTensor nchw_view(HostTensor t) {
  t.shape = {t.shape[0], t.shape[3], t.shape[1], t.shape[2]};
  t.strides = {t.strides[0], t.strides[3], t.strides[1], t.strides[2]};
  return t;
}

void check_residual(const HostTensor& residual, const HostTensor& out) {
  if (residual.shape != out.shape) {
    fail(CD_STATUS_INVALID_ARGUMENT, "residual must have the output's shape (%lld, %lld, %lld, %lld)",
         static_cast<long long>(out.shape[0]), static_cast<long long>(out.shape[1]),
         static_cast<long long>(out.shape[2]), static_cast<long long>(out.shape[3]));
  }
}

// True if a view has no negative or zero strides on dims of size > 1
// (oneDNN reorders take any positive strides).
bool positive_strides(const View& v) {
  for (size_t i = 0; i < v.ndim(); ++i) {
    if (v.shape[i] > 1 && v.strides[i] <= 0) return false;
  }
  return true;
}

// ------------------------------------------------------------- oneDNN path --

struct ConvPrimitive {
  dnnl::primitive conv;
  dnnl::memory::desc src_md, wei_md, dst_md, bias_md, scratch_md;  // the conv's layouts
  dnnl::memory::desc user_src, user_wei, user_dst;
  bool r_src = false, r_wei = false, r_dst = false;
  dnnl::reorder src_reorder, wei_reorder, dst_reorder;
  dnnl::memory::desc src_scratch, wei_scratch, dst_scratch;
  std::string wei_layout;       // the packed cache's name for wei_md over these weights
  dnnl::memory::desc user_res;  // conv2d_fused's residual, reordered into dst_md first
  dnnl::reorder res_reorder;
  dnnl::memory::desc res_scratch;
  bool ok = true;  // false: oneDNN has no implementation
};

dnnl::reorder make_reorder(const dnnl::memory::desc& from, const dnnl::memory::desc& to,
                           dnnl::memory::desc& scratch) {
  dnnl::reorder::primitive_desc pd(onednn::engine(), from, onednn::engine(), to,
                                   onednn::user_scratchpad_attr());
  scratch = pd.scratchpad_desc();
  return dnnl::reorder(pd);
}

// Weight descriptor in oneDNN's (G,) O, I, R, S order over the caller's tensor.
dnnl::memory::desc user_weights(const ConvShape& s, const View& w, cd_dtype_t dt) {
  const int64_t s0 = w.strides[0], s1 = w.strides[1], s2 = w.strides[2], s3 = w.strides[3];
  const int64_t cg = s.C / s.G, kg = s.K / s.G;
  if (!s.transposed) {  // w: (K, C/G, R, S)
    if (s.G == 1) return onednn::strided_desc({s.K, s.C, s.R, s.S}, {s0, s1, s2, s3}, dt);
    return onednn::strided_desc({s.G, kg, cg, s.R, s.S}, {kg * s0, s0, s1, s2, s3}, dt);
  }
  // w: (C, K/G, R, S); oneDNN wants (G, K/G, C/G, R, S).
  if (s.G == 1) return onednn::strided_desc({s.K, s.C, s.R, s.S}, {s1, s0, s2, s3}, dt);
  return onednn::strided_desc({s.G, kg, cg, s.R, s.S}, {cg * s0, s1, s0, s2, s3}, dt);
}

// The oneDNN primitive for a convolution in float32 or bfloat16 (cached by
// problem; ok == false when oneDNN has no implementation). `x`, `w` and
// `residual` are the layouts oneDNN will read (data unused); `out_strides`
// the output's. For a transposed conv whose output_padding exceeds the
// bottom/right padding, `oh`/`ow` are the extents oneDNN produces (the rest
// of the output gets bias only). `single`: built for one thread.
std::shared_ptr<const ConvPrimitive> conv_primitive(const ConvShape& s, cd_dtype_t dt, const View& x, const View& w,
                                                    bool has_bias, const std::vector<int64_t>& out_strides,
                                                    int64_t oh, int64_t ow, const View* residual, bool single) {
  onednn::Key key(s.transposed ? "deconv" : "conv");
  key.add(static_cast<int64_t>(dt)).add(x.shape).add(x.strides).add(w.shape).add(w.strides);
  key.add(std::vector<int64_t>{s.K, oh, ow, s.R, s.S, s.G, s.sh, s.sw, s.dh, s.dw, s.pt, s.pl, s.pb,
                               s.pr, s.oph, s.opw, has_bias});
  key.add(out_strides).add(static_cast<int64_t>(single));
  key.add(std::vector<int64_t>{s.epilogue.residual, s.epilogue.relu});
  if (residual != nullptr) key.add(residual->strides);
  return onednn::cached_as<ConvPrimitive>(key, [&] {
    auto e = std::make_shared<ConvPrimitive>();
    using tag = dnnl::memory::format_tag;
    try {
      const auto ddt = onednn::to_dnnl(dt);
      e->user_src = onednn::strided_desc(x.shape, x.strides, dt);
      e->user_wei = user_weights(s, w, dt);
      e->user_dst = onednn::strided_desc({s.N, s.K, oh, ow}, out_strides, dt);
      const dnnl::memory::desc src_any({s.N, s.C, s.H, s.W}, ddt, tag::any);
      const dnnl::memory::desc dst_any({s.N, s.K, oh, ow}, ddt, tag::any);
      const dnnl::memory::desc wei_any(e->user_wei.dims(), ddt, tag::any);
      const dnnl::memory::desc bias_md = has_bias
          ? dnnl::memory::desc({s.K}, dnnl::memory::data_type::f32, tag::a)
          : dnnl::memory::desc();
      const dnnl::memory::dims strides{s.sh, s.sw}, dil{s.dh - 1, s.dw - 1};
      const dnnl::memory::dims pad_l{s.pt, s.pl};
      dnnl::primitive_attr attr = onednn::user_scratchpad_attr();
      if (s.epilogue.any()) {
        // The residual is placed in the destination first; sum adds the
        // convolution to it, then the activation runs on the total.
        dnnl::post_ops ops;
        if (s.epilogue.residual) ops.append_sum(1.0f);
        // No relu post-op: oneDNN's computes max(x, 0) (NaN becomes 0) and
        // alpha * x (a negative becomes -0); relu_in_place runs after it.
        attr.set_post_ops(ops);
      }
      if (!s.transposed) {
        const dnnl::memory::dims pad_r{s.pb, s.pr};
        auto make = [&](const dnnl::memory::desc& src) {
          return dnnl::convolution_forward::primitive_desc(
              dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                              dnnl::algorithm::convolution_direct, src, wei_any,
                                              bias_md, dst_any, strides, dil, pad_l, pad_r),
              attr, onednn::engine());
        };
        dnnl::convolution_forward::primitive_desc pd;
        bool have = false;
        if (s.C / s.G < 16) {
          // Few input channels (a first layer): oneDNN's direct kernel reads
          // plain NCHW itself, cheaper than reordering it to blocks.
          try {
            pd = make(e->user_src);
            const std::string impl = pd.impl_info_str();
            have = impl.find("gemm") == std::string::npos && !onednn::is_reference(impl.c_str());
          } catch (const dnnl::error&) {
            have = false;
          }
        }
        if (!have) pd = make(src_any);
        e->src_md = pd.src_desc();
        e->wei_md = pd.weights_desc();
        e->dst_md = pd.dst_desc();
        e->bias_md = pd.bias_desc();
        e->scratch_md = pd.scratchpad_desc();
        e->conv = dnnl::convolution_forward(pd);
      } else {
        const dnnl::memory::dims pad_r{std::max<int64_t>(s.pb - s.oph, 0),
                                       std::max<int64_t>(s.pr - s.opw, 0)};
        dnnl::deconvolution_forward::primitive_desc pd(
            dnnl::deconvolution_forward::desc(dnnl::prop_kind::forward_inference,
                                              dnnl::algorithm::deconvolution_direct, src_any,
                                              wei_any, bias_md, dst_any, strides, dil, pad_l, pad_r),
            attr, onednn::engine());
        e->src_md = pd.src_desc();
        e->wei_md = pd.weights_desc();
        e->dst_md = pd.dst_desc();
        e->bias_md = pd.bias_desc();
        e->scratch_md = pd.scratchpad_desc();
        e->conv = dnnl::deconvolution_forward(pd);
      }
      e->r_src = e->src_md != e->user_src;
      e->r_wei = e->wei_md != e->user_wei;
      e->r_dst = e->dst_md != e->user_dst;
      if (e->r_src) e->src_reorder = make_reorder(e->user_src, e->src_md, e->src_scratch);
      if (e->r_wei) {
        e->wei_reorder = make_reorder(e->user_wei, e->wei_md, e->wei_scratch);
        onednn::Key layout("conv-weights");
        layout.add(static_cast<int64_t>(w.dtype)).add(w.shape).add(w.strides);
        layout.add(std::vector<int64_t>{s.G, s.transposed});
        e->wei_layout = layout.str() + onednn::describe(e->wei_md);
      }
      if (e->r_dst) e->dst_reorder = make_reorder(e->dst_md, e->user_dst, e->dst_scratch);
      if (residual != nullptr) {
        e->user_res = onednn::strided_desc(residual->shape, residual->strides, dt);
        e->res_reorder = make_reorder(e->user_res, e->dst_md, e->res_scratch);
      }
    } catch (const dnnl::error&) {
      // No implementation (or no reorder) for this problem: the direct
      // loops run it (decided once per problem, when the kernel is called).
      e->ok = false;
    }
    return e;
  });
}

// Runs `entry` (ok): out (the user layout) = conv(x, w) + bias (float32,
// contiguous, or NULL), with conv2d_fused's residual and activation.
// `wsrc`: where the weights come from when the core versions them (their
// reordered copy is then cached), else NULL.
void execute_conv(const ConvPrimitive& entry, const View& x, const View& w, const float* bias, char* out,
                  const packed_cache::Source* wsrc, const View* residual) {
  Buffer sbuf, wbuf, dbuf;
  dnnl::memory src = onednn::wrap(entry.user_src, x.data);
  dnnl::memory wei = onednn::wrap(entry.user_wei, w.data);
  dnnl::memory dst = onednn::wrap(entry.user_dst, out);
  if (entry.r_src) {
    sbuf.allocate(entry.src_md.get_size());
    dnnl::memory m = onednn::wrap(entry.src_md, sbuf.data());
    onednn::execute(entry.src_reorder, {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, m}}, entry.src_scratch);
    src = m;
  }
  std::shared_ptr<const packed_cache::Packed> packed;  // keeps cached weights alive during the call
  if (entry.r_wei) {
    auto reorder_into = [&](void* to) {
      dnnl::memory m = onednn::wrap(entry.wei_md, to);
      onednn::execute(entry.wei_reorder, {{DNNL_ARG_FROM, wei}, {DNNL_ARG_TO, m}}, entry.wei_scratch);
    };
    void* reordered = nullptr;
    if (wsrc != nullptr) {
      packed = packed_cache::get(*wsrc, entry.wei_layout, entry.wei_md.get_size(), reorder_into);
      reordered = packed->data();
    } else {
      wbuf.allocate(entry.wei_md.get_size());
      reorder_into(wbuf.data());
      reordered = wbuf.data();
    }
    wei = onednn::wrap(entry.wei_md, reordered);
  }
  dnnl::memory conv_dst = dst;
  if (entry.r_dst) {
    dbuf.allocate(entry.dst_md.get_size());
    conv_dst = onednn::wrap(entry.dst_md, dbuf.data());
  }
  if (residual != nullptr) {
    onednn::execute(entry.res_reorder,
                    {{DNNL_ARG_FROM, onednn::wrap(entry.user_res, residual->data)}, {DNNL_ARG_TO, conv_dst}},
                    entry.res_scratch);
  }
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, conv_dst}};
  if (bias != nullptr) args.emplace(DNNL_ARG_BIAS, onednn::wrap(entry.bias_md, bias));
  onednn::execute(entry.conv, std::move(args), entry.scratch_md);
  if (entry.r_dst) {
    onednn::execute(entry.dst_reorder, {{DNNL_ARG_FROM, conv_dst}, {DNNL_ARG_TO, dst}}, entry.dst_scratch);
  }
}

// ------------------------------------------------------------ float64 path --

template <class T>
CD_ALWAYS_INLINE void axpy_impl(T* __restrict out, const T* __restrict in, int64_t n, int64_t in_stride,
                                       T a) {
  if (in_stride == 1) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) out[i] += a * in[i];
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] += a * in[i * in_stride];
  }
}

// out[0:n] += a * in[0:n*in_stride:in_stride], one build per level (the
// overloads share axpy_impl).
CD_ISA_BUILDS(void, axpy, (double* out, const double* in, int64_t n, int64_t in_stride, double a),
              (out, in, n, in_stride, a))
CD_ISA_BUILDS(void, axpy, (float* out, const float* in, int64_t n, int64_t in_stride, float a),
              (out, in, n, in_stride, a))

// First index i in [0, n) with lo <= i*step + off (step > 0), and one past
// the last with i*step + off < hi.
inline void valid_range(int64_t off, int64_t step, int64_t lo, int64_t hi, int64_t n, int64_t& begin,
                        int64_t& end) {
  // i >= ceil((lo - off) / step), i <= floor((hi - 1 - off) / step)
  auto floor_div = [](int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); };
  begin = std::max<int64_t>(0, -floor_div(off - lo, step));
  end = std::min<int64_t>(n, floor_div(hi - 1 - off, step) + 1);
  if (end < begin) end = begin;
}

// Direct loops (float64, and the float32 fallback), any input strides.
template <class T>
void conv_direct(const ConvShape& s, const View& x, const View& w, const View* bias, T* out) {
  const int64_t cg = s.C / s.G, kg = s.K / s.G;
  const T* X = reinterpret_cast<const T*>(x.data);
  const T* Wt = reinterpret_cast<const T*>(w.data);
  parallel_for(s.N * s.K, 1, [&](int64_t begin, int64_t end) {
    for (int64_t nk = begin; nk < end; ++nk) {
      const int64_t n = nk / s.K, k = nk % s.K, g = k / kg;
      T* o = out + nk * s.OH * s.OW;
      const T b0 = bias ? reinterpret_cast<const T*>(bias->data)[k * bias->strides[0]] : T(0);
      std::fill(o, o + s.OH * s.OW, b0);
      for (int64_t c = 0; c < cg; ++c) {
        const int64_t ci = g * cg + c;
        const T* xp = X + n * x.strides[0] + ci * x.strides[1];
        for (int64_t r = 0; r < s.R; ++r) {
          for (int64_t q = 0; q < s.S; ++q) {
            const T wv = Wt[k * w.strides[0] + c * w.strides[1] + r * w.strides[2] + q * w.strides[3]];
            int64_t ow0, ow1, oh0, oh1;
            valid_range(q * s.dw - s.pl, s.sw, 0, s.W, s.OW, ow0, ow1);
            valid_range(r * s.dh - s.pt, s.sh, 0, s.H, s.OH, oh0, oh1);
            for (int64_t oh = oh0; oh < oh1; ++oh) {
              const int64_t ih = oh * s.sh - s.pt + r * s.dh;
              const int64_t iw0 = ow0 * s.sw - s.pl + q * s.dw;
              axpy(o + oh * s.OW + ow0, xp + ih * x.strides[2] + iw0 * x.strides[3],
                           ow1 - ow0, s.sw * x.strides[3], wv);
            }
          }
        }
      }
    }
  });
}

template <class T>
void conv_transpose_direct(const ConvShape& s, const View& x, const View& w, const View* bias, T* out) {
  const int64_t cg = s.C / s.G, kg = s.K / s.G;
  const T* X = reinterpret_cast<const T*>(x.data);
  const T* Wt = reinterpret_cast<const T*>(w.data);
  parallel_for(s.N * s.K, 1, [&](int64_t begin, int64_t end) {
    for (int64_t nk = begin; nk < end; ++nk) {
      const int64_t n = nk / s.K, k = nk % s.K, g = k / kg, kl = k % kg;
      T* o = out + nk * s.OH * s.OW;
      const T b0 = bias ? reinterpret_cast<const T*>(bias->data)[k * bias->strides[0]] : T(0);
      std::fill(o, o + s.OH * s.OW, b0);
      for (int64_t c = 0; c < cg; ++c) {
        const int64_t ci = g * cg + c;
        const T* xp = X + n * x.strides[0] + ci * x.strides[1];
        for (int64_t r = 0; r < s.R; ++r) {
          for (int64_t q = 0; q < s.S; ++q) {
            const T wv = Wt[ci * w.strides[0] + kl * w.strides[1] + r * w.strides[2] + q * w.strides[3]];
            // oh = ih*sh - pt + r*dh in [0, OH)
            int64_t ih0, ih1, iw0, iw1;
            valid_range(r * s.dh - s.pt, s.sh, 0, s.OH, s.H, ih0, ih1);
            valid_range(q * s.dw - s.pl, s.sw, 0, s.OW, s.W, iw0, iw1);
            for (int64_t ih = ih0; ih < ih1; ++ih) {
              const int64_t oh = ih * s.sh - s.pt + r * s.dh;
              T* orow = o + oh * s.OW;
              const T* xrow = xp + ih * x.strides[2];
              for (int64_t iw = iw0; iw < iw1; ++iw) {
                orow[iw * s.sw - s.pl + q * s.dw] += wv * xrow[iw * x.strides[3]];
              }
            }
          }
        }
      }
    }
  });
}

// ---------------------------------------------------------------- driver --

// out[n, k, :, :] = bias[k] (0 without bias).
void fill_bias(const ConvShape& s, const View* bias, cd_dtype_t dt, char* out) {
  dispatch_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (is_floating_v<T>) {
      T* o = reinterpret_cast<T*>(out);
      const int64_t plane = s.OH * s.OW;
      for (int64_t nk = 0; nk < s.N * s.K; ++nk) {
        const T v = bias ? reinterpret_cast<const T*>(bias->data)[(nk % s.K) * bias->strides[0]]
                         : store<T>(0.0f);
        std::fill(o + nk * plane, o + (nk + 1) * plane, v);
      }
    }
  });
}

// conv2d_fused's epilogue as a pass over a contiguous (N, K, OH, OW) result
// of dtype `dt` (the residual in that dtype too), for the paths without
// oneDNN post-ops: out = act(out + residual). It rounds to `dt`, so it runs
// on the unrounded float32 or float64 sums (direct_in_f32), never on a
// result already rounded to float16 / bfloat16.
void apply_epilogue(const ConvShape& s, const Epilogue& e, const View* residual, cd_dtype_t dt, char* out) {
  if (!e.any()) return;
  dispatch_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (is_floating_v<T>) {
      T* o = reinterpret_cast<T*>(out);
      const T* r = residual ? reinterpret_cast<const T*>(residual->data) : nullptr;
      parallel_for(s.N * s.K, 16, [&](int64_t begin, int64_t end) {
        for (int64_t nk = begin; nk < end; ++nk) {
          const int64_t n = nk / s.K, k = nk % s.K;
          T* plane = o + nk * s.OH * s.OW;
          for (int64_t h = 0; h < s.OH; ++h) {
            for (int64_t q = 0; q < s.OW; ++q) {
              auto v = load(plane[h * s.OW + q]);
              if (r != nullptr) {
                v += load(r[n * residual->strides[0] + k * residual->strides[1] + h * residual->strides[2] +
                            q * residual->strides[3]]);
              }
              if (e.relu && v < 0) v = 0;  // NaN stays NaN
              plane[h * s.OW + q] = store<T>(v);
            }
          }
        }
      });
    }
  });
}

// (N, H, W, C) seen as (N, C, H, W): the same memory, dims permuted.
View channels_last_as_nchw(View v) {
  v.shape = {v.shape[0], v.shape[3], v.shape[1], v.shape[2]};
  v.strides = {v.strides[0], v.strides[3], v.strides[1], v.strides[2]};
  return v;
}

// Copies a contiguous (N, K, OH, OW) result into the (N, OH, OW, K) output.
void nchw_to_nhwc(const ConvShape& s, size_t item, const char* from, char* to) {
  const int64_t plane = s.OH * s.OW;
  parallel_for(s.N * plane, 256, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const int64_t n = i / plane, p = i % plane;
      for (int64_t k = 0; k < s.K; ++k) {
        std::memcpy(to + static_cast<size_t>(i * s.K + k) * item,
                    from + static_cast<size_t>((n * s.K + k) * plane + p) * item, item);
      }
    }
  });
}

// A convolution's operands as views. `in`: x, weight, then bias and
// residual when given (s.epilogue.residual says whether the last one is a
// residual, which layout nhwc presents as (N, K, OH, OW)).
struct ConvViews {
  View x, w;
  std::unique_ptr<View> bias, residual;
};

ConvViews views_of(const ConvShape& s, const std::vector<HostTensor>& in) {
  ConvViews v;
  v.x = to_view(in[0]);
  v.w = to_view(in[1]);
  const size_t n_bias = in.size() - (s.epilogue.residual ? 1 : 0);
  if (n_bias == 3) v.bias = std::make_unique<View>(to_view(in[2]));
  if (s.epilogue.residual) {
    const View r = to_view(in.back());
    v.residual = std::make_unique<View>(s.epilogue.nhwc ? channels_last_as_nchw(r) : r);
  }
  return v;
}

// A convolution that runs through oneDNN, decided when the kernel is called.
struct ConvJob {
  cd_dtype_t compute = CD_DTYPE_FLOAT32;  // float32, or bfloat16 where native
  bool copy_x = false, copy_w = false, copy_res = false;  // dense copies in `compute` first
  std::vector<int64_t> out_strides;
  int64_t oh = 0, ow = 0;  // what oneDNN produces (see conv_primitive)
  bool single = false;
  std::shared_ptr<const ConvPrimitive> entry;
};

// The oneDNN job for a float32 / float16 / bfloat16 convolution, or NULL
// where the direct loops run it (float64, no input channels, or a problem
// oneDNN has no implementation for). float16, and bfloat16 where oneDNN has
// no bfloat16 convolution (onednn::routes()), compute in float32.
std::shared_ptr<const ConvJob> plan_conv(const ConvShape& s, cd_dtype_t dt, const ConvViews& v) {
  if (dt == CD_DTYPE_FLOAT64 || v.x.numel() == 0 || v.w.numel() == 0) return nullptr;
  auto job = std::make_shared<ConvJob>();
  const onednn::Routes& routes = onednn::routes();
  job->compute = onednn::compute_dtype(dt, s.transposed ? routes.bf16_deconv : routes.bf16_conv);
  const cd_dtype_t cdt = job->compute;
  job->copy_x = v.x.dtype != cdt || !positive_strides(v.x);
  job->copy_w = v.w.dtype != cdt || !positive_strides(v.w);
  const View x = job->copy_x ? dense_layout(v.x, cdt) : v.x;
  const View w = job->copy_w ? dense_layout(v.w, cdt) : v.w;
  View res;
  if (v.residual) {
    job->copy_res = v.residual->dtype != cdt || !positive_strides(*v.residual);
    res = job->copy_res ? dense_layout(*v.residual, cdt) : *v.residual;
  }
  job->out_strides = s.epilogue.nhwc ? std::vector<int64_t>{s.OH * s.OW * s.K, 1, s.OW * s.K, s.K}
                                      : std::vector<int64_t>{s.K * s.OH * s.OW, s.OH * s.OW, s.OW, 1};
  job->oh = s.OH;
  job->ow = s.OW;
  if (s.transposed) {  // rows / columns that only output_padding adds: bias only
    job->oh -= std::max<int64_t>(s.oph - s.pb, 0);
    job->ow -= std::max<int64_t>(s.opw - s.pr, 0);
  }
  const double flops = 2.0 * static_cast<double>(s.N * s.K) * static_cast<double>(s.C / s.G) *
                       static_cast<double>(s.R * s.S) *
                       static_cast<double>(s.transposed ? s.H * s.W : job->oh * job->ow);
  job->single = onednn::small_work(flops);
  onednn::ThreadScope threads(job->single);
  job->entry = conv_primitive(s, cdt, x, w, v.bias != nullptr, job->out_strides, job->oh, job->ow,
                              v.residual ? &res : nullptr, job->single);
  if (!job->entry->ok) return nullptr;
  return job;
}

// Runs a oneDNN job into `out` (the caller's dtype `dt`).
void run_onednn(const ConvShape& s, cd_dtype_t dt, const ConvJob& job, const ConvViews& v, const HostTensor& out,
                const packed_cache::Source* wsrc) {
  onednn::ThreadScope threads(job.single);
  const cd_dtype_t cdt = job.compute;
  Buffer xb, wb, bb, ob, rb;
  const View x = job.copy_x ? materialize(v.x, cdt, xb) : v.x;
  const View w = job.copy_w ? materialize(v.w, cdt, wb) : v.w;
  View res;
  if (v.residual) res = job.copy_res ? materialize(*v.residual, cdt, rb) : *v.residual;
  const float* bias_f32 = nullptr;
  if (v.bias) bias_f32 = reinterpret_cast<const float*>(materialize(*v.bias, CD_DTYPE_FLOAT32, bb).data);
  char* dst = out.origin;
  if (cdt != dt) {
    ob.allocate(static_cast<size_t>(out.numel) * sizeof(float));
    dst = static_cast<char*>(ob.data());
  }
  execute_conv(*job.entry, x, w, bias_f32, dst, wsrc, v.residual ? &res : nullptr);
  if (job.oh != s.OH || job.ow != s.OW) {
    const size_t item = dtype_size(cdt);
    parallel_for(s.N * s.K, 64, [&](int64_t b, int64_t e) {
      for (int64_t nk = b; nk < e; ++nk) {
        const float bv = bias_f32 ? bias_f32[nk % s.K] : 0.0f;
        char* plane = dst + static_cast<size_t>(nk * s.OH * s.OW) * item;
        for (int64_t h = 0; h < s.OH; ++h) {
          for (int64_t q = (h < job.oh ? job.ow : 0); q < s.OW; ++q) {
            char* p = plane + static_cast<size_t>(h * s.OW + q) * item;
            if (cdt == CD_DTYPE_FLOAT32) {
              std::memcpy(p, &bv, sizeof(float));
            } else {
              const bfloat16_t bf = float_to_bf16(bv);
              std::memcpy(p, &bf, sizeof(bf));
            }
          }
        }
      }
    });
  }
  if (cdt != dt) store_from_f32(ob.as<float>(), dt, out.origin, out.numel);
}

// A float32 / float16 / bfloat16 convolution oneDNN has no implementation
// for (bfloat16 forced native beneath AVX-512 included): the direct loops in
// float32 into a contiguous (N, K, OH, OW) `dst` of dtype `dt`, with
// conv2d_fused's epilogue on the float32 sums, so the result is rounded
// once, as on the oneDNN routes (post-ops on float32 accumulators). Rounding
// the convolution first and again after the residual add costs up to half
// an ulp of the convolution where it cancels against the residual: 35 and
// 68 units of the suite's tolerance in conv2d_fused's bfloat16 residual and
// conv2d_fused's relu after a oneDNN convolution, over the whole output (the
// core allocates it contiguous; elementwise, so its layout does not matter):
// NaN stays NaN and a negative becomes +0, as the direct loops' epilogue does.
// Exact on a rounded value, so 16-bit dtypes still round once.
void relu_in_place(cd_dtype_t dt, char* out, int64_t numel) {
  dispatch_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (is_floating_v<T>) {
      T* o = reinterpret_cast<T*>(out);
      parallel_for(numel, 1 << 14, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          auto v = load(o[i]);
          if (v < 0) {
            v = 0;
            o[i] = store<T>(v);
          }
        }
      });
    }
  });
}

// large cases, where the one rounding of the total costs at most 1.
void direct_in_f32(const ConvShape& s, const ConvViews& v, cd_dtype_t dt, int64_t numel, char* dst) {
  Buffer xb, wb, bb, rb, ob;
  const View xf = materialize(v.x, CD_DTYPE_FLOAT32, xb), wf = materialize(v.w, CD_DTYPE_FLOAT32, wb);
  std::unique_ptr<View> bf;
  if (v.bias) bf = std::make_unique<View>(materialize(*v.bias, CD_DTYPE_FLOAT32, bb));
  const View* res = v.residual.get();  // read in float32 by the epilogue (any strides)
  View res_f32;
  if (res != nullptr && res->dtype != CD_DTYPE_FLOAT32) {
    res_f32 = materialize(*res, CD_DTYPE_FLOAT32, rb);
    res = &res_f32;
  }
  float* f32 = reinterpret_cast<float*>(dst);
  if (dt != CD_DTYPE_FLOAT32) {
    ob.allocate(static_cast<size_t>(numel) * sizeof(float));
    f32 = ob.as<float>();
  }
  if (s.transposed) {
    conv_transpose_direct(s, xf, wf, bf.get(), f32);
  } else {
    conv_direct(s, xf, wf, bf.get(), f32);
  }
  apply_epilogue(s, s.epilogue, res, CD_DTYPE_FLOAT32, reinterpret_cast<char*>(f32));
  if (dt != CD_DTYPE_FLOAT32) store_from_f32(f32, dt, dst, numel);
}

// Runs on the stream's worker: the oneDNN job when there is one, else the
// direct loops.
void run_conv(const ConvShape& s, const std::vector<HostTensor>& in, const HostTensor& out, const ConvJob* job,
              const std::optional<packed_cache::Source>& wsrc) {
  for (const HostTensor& t : in) t.range.check_live("input");
  out.range.check_live("output 0");
  const cd_dtype_t dt = out.dtype;
  const ConvViews v = views_of(s, in);
  if (job != nullptr) {
    run_onednn(s, dt, *job, v, out, wsrc ? &*wsrc : nullptr);
    if (s.epilogue.relu) relu_in_place(dt, out.origin, out.numel);
    return;
  }
  // The direct paths write a contiguous (N, K, OH, OW) result: for layout
  // nhwc into scratch memory, transposed into the output at the end.
  Buffer nchw;
  char* dst = out.origin;
  if (s.epilogue.nhwc) {
    nchw.allocate(static_cast<size_t>(out.numel) * out.itemsize);
    dst = static_cast<char*>(nchw.data());
  }
  if (v.x.numel() == 0 || v.w.numel() == 0) {
    // No input channels: the bias alone (exact in its dtype), so the
    // epilogue's one rounding is the only one.
    fill_bias(s, v.bias.get(), dt, dst);
    apply_epilogue(s, s.epilogue, v.residual.get(), dt, dst);
  } else if (dt == CD_DTYPE_FLOAT64) {
    if (s.transposed) {
      conv_transpose_direct(s, v.x, v.w, v.bias.get(), reinterpret_cast<double*>(dst));
    } else {
      conv_direct(s, v.x, v.w, v.bias.get(), reinterpret_cast<double*>(dst));
    }
    apply_epilogue(s, s.epilogue, v.residual.get(), dt, dst);
  } else {
    direct_in_f32(s, v, dt, out.numel, dst);
  }
  if (s.epilogue.nhwc) nchw_to_nhwc(s, out.itemsize, dst, out.origin);
}

enum class ConvKind { plain, fused, transposed };

void enqueue_conv(const cd_kernel_context* ctx, ConvKind kind) {
  const bool fused = kind == ConvKind::fused, transposed = kind == ConvKind::transposed;
  check_context(ctx, fused ? 3 : 2, fused ? 4 : 3);
  std::shared_ptr<Stream> stream = stream_from_handle(ctx->stream, ctx->device);
  std::vector<HostTensor> in;
  for (int32_t i = 0; i < ctx->num_inputs; ++i) in.push_back(input(ctx, i));
  HostTensor out = output(ctx);
  check_same_dtype(in, out);
  const bool nhwc = fused && chipdock::support::choice_attribute(ctx, "layout", {"nchw", "nhwc"}) == 1;
  if (nhwc) require_ndim(out, 4, "the output");
  ConvShape s = read_shape(ctx, in[0], in[1], in.size() >= 3 ? &in[2] : nullptr,
                           nhwc ? nchw_view(out) : out, transposed);
  if (fused) {
    s.epilogue.relu = chipdock::support::choice_attribute(ctx, "activation", {"none", "relu"}) == 1;
    s.epilogue.nhwc = nhwc;
    s.epilogue.residual = in.size() == 4;
    if (s.epilogue.residual) check_residual(in[3], out);
  }
  if (out.numel == 0) return;
  const std::optional<packed_cache::Source> wsrc = packed_cache::source_of(*ctx->inputs[1]);
  std::shared_ptr<const ConvJob> job = plan_conv(s, out.dtype, views_of(s, in));
  stream->enqueue(fused ? "conv2d_fused" : transposed ? "conv_transpose2d" : "conv2d",
                  [s, in = std::move(in), out = std::move(out), wsrc, job] { run_conv(s, in, out, job.get(), wsrc); });
}

cd_error* conv2d_kernel(const cd_kernel_context* ctx) noexcept {
  return guard("conv2d", [ctx] { enqueue_conv(ctx, ConvKind::plain); });
}

cd_error* conv2d_fused_kernel(const cd_kernel_context* ctx) noexcept {
  return guard("conv2d_fused", [ctx] { enqueue_conv(ctx, ConvKind::fused); });
}

cd_error* conv_transpose2d_kernel(const cd_kernel_context* ctx) noexcept {
  return guard("conv_transpose2d", [ctx] { enqueue_conv(ctx, ConvKind::transposed); });
}

}  // namespace

void register_conv(cd_kernel_registry* registry) {
  for (cd_dtype_t t : kFloatTypes) {
    const cd_dtype_t sig[4] = {t, t, t, t};
    register_kernel(registry, "conv2d", sig, 4, conv2d_kernel);
    register_kernel(registry, "conv_transpose2d", sig, 4, conv_transpose2d_kernel);
    const cd_dtype_t fused_sig[5] = {t, t, t, t, t};  // x, weight, bias, residual, out
    register_kernel(registry, "conv2d_fused", fused_sig, 5, conv2d_fused_kernel);
  }
}

}  // namespace linalg
}  // namespace chipdock_cpu
