// max_pool2d, avg_pool2d and global_avg_pool over x (N, C, ...) with any
// strides; outputs are contiguous.
//
// Window rule (PyTorch's): output row oh covers input rows
// oh*stride - pad_top + i*dilation, i < kernel; the output size comes from
// the dispatcher (ceil_mode included) and is checked here.
//
// max_pool2d: every numeric dtype, own loops; padding counts as -inf (the
// lowest value for integers) and NaN propagates (oneDNN 2.6's max pooling
// drops NaN and has no int16/int64/float64). Exact.
//
// avg_pool2d: float32 / bfloat16 run through oneDNN when its semantics match
// PyTorch's; otherwise (float16, float64, and a ceil_mode window that runs
// past the bottom/right padding with count_include_pad) own loops. The
// divisor is PyTorch's: with count_include_pad, the window clipped to the
// padded input [-pad_begin, size + pad_end); without, the number of input
// elements in it. Sums in float32 (float64 for float64).
//
// global_avg_pool: mean over all dims after the first two, summed in float64.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <utility>

#include "../error.h"
#include "../stream.h"
#include "chipdock/support/checked_math.h"
#include "kernels.h"
#include "linalg_common.h"
#include "isa.h"
#include "numeric.h"
#include "onednn.h"

namespace chipdock_cpu {
namespace linalg {
namespace {

struct PoolShape : Window2d {
  int64_t N = 0, C = 0, H = 0, W = 0, OH = 0, OW = 0;
  int64_t kh = 1, kw = 1;
  bool ceil_mode = false, include_pad = false;
};

// Taps of one window that can reach the input: no more than the input has
// (the loops skip the rest), so a work estimate never overflows.
int64_t window_taps(const PoolShape& s) { return std::min(s.kh, s.H) * std::min(s.kw, s.W); }

// The output size along one dim (0 when the window does not fit); nullopt
// when the padded input or the dilated kernel overflows int64.
std::optional<int64_t> pool_out(int64_t in, int64_t pad_begin, int64_t pad_end, int64_t kernel,
                                int64_t stride, int64_t dilation, bool ceil_mode) {
  using chipdock::support::checked_add;
  using chipdock::support::checked_mul;
  const std::optional<int64_t> pads = checked_add(pad_begin, pad_end);
  const std::optional<int64_t> padded = pads ? checked_add(in, *pads) : std::nullopt;
  const std::optional<int64_t> reach = checked_mul(dilation, kernel - 1);
  // The loops also form window start + kernel: keep that in range too.
  if (!padded || !reach || !checked_add(*padded, *reach + 1) || !checked_add(*padded, kernel)) {
    return std::nullopt;
  }
  const int64_t span = *padded - *reach - 1;
  if (span < 0) return 0;
  int64_t out = (ceil_mode ? (span + stride - 1) / stride : span / stride) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad_begin) --out;
  return out;
}

PoolShape read_pool(const cd_kernel_context* ctx, const HostTensor& x, const HostTensor& out,
                    bool is_max) {
  require_ndim(x, 4, "x");
  require_ndim(out, 4, "the output");
  PoolShape s;
  const auto kernel = attr_ints(ctx, "kernel", 2, {});
  if (kernel[0] < 1 || kernel[1] < 1) fail(CD_STATUS_INVALID_ARGUMENT, "kernel must be >= 1");
  static_cast<Window2d&>(s) = window_attributes(ctx, kernel, is_max);  // stride defaults to the kernel
  s.kh = kernel[0];
  s.kw = kernel[1];
  s.ceil_mode = attr_int(ctx, "ceil_mode", 0) != 0;
  s.include_pad = !is_max && attr_int(ctx, "count_include_pad", 0) != 0;
  s.N = x.shape[0];
  s.C = x.shape[1];
  s.H = x.shape[2];
  s.W = x.shape[3];
  s.OH = out.shape[2];
  s.OW = out.shape[3];
  const std::optional<int64_t> oh_size = pool_out(s.H, s.pt, s.pb, s.kh, s.sh, s.dh, s.ceil_mode);
  const std::optional<int64_t> ow_size = pool_out(s.W, s.pl, s.pr, s.kw, s.sw, s.dw, s.ceil_mode);
  if (!oh_size || !ow_size) {
    fail(CD_STATUS_INVALID_ARGUMENT, "%s x (%lld, %lld, %lld, %lld): the padded input or the dilated "
         "kernel (%lld x %lld) overflows int64", dtype_name(x.dtype), static_cast<long long>(s.N),
         static_cast<long long>(s.C), static_cast<long long>(s.H), static_cast<long long>(s.W),
         static_cast<long long>(s.kh), static_cast<long long>(s.kw));
  }
  const int64_t oh = *oh_size, ow = *ow_size;
  if (out.shape[0] != s.N || out.shape[1] != s.C || s.OH != oh || s.OW != ow) {
    fail(CD_STATUS_INVALID_ARGUMENT, "output is (%lld, %lld, %lld, %lld); expected (%lld, %lld, "
         "%lld, %lld)", static_cast<long long>(out.shape[0]), static_cast<long long>(out.shape[1]),
         static_cast<long long>(s.OH), static_cast<long long>(s.OW), static_cast<long long>(s.N),
         static_cast<long long>(s.C), static_cast<long long>(oh), static_cast<long long>(ow));
  }
  return s;
}

// Output positions i in [0, n) whose tap i*step + off lies in [0, size).
inline void tap_range(int64_t off, int64_t step, int64_t size, int64_t n, int64_t& begin,
                      int64_t& end) {
  // i >= ceil(-off / step), i <= floor((size - 1 - off) / step)
  begin = off >= 0 ? 0 : (-off + step - 1) / step;
  const int64_t top = size - 1 - off;
  end = top < 0 ? 0 : std::min<int64_t>(n, top / step + 1);
  if (end < begin) end = begin;
}

// ---------------------------------------------------------------- rows --

// acc[i] = max(acc[i], in[i * stride]), NaN-propagating for floats.
template <class T, class A>
inline void max_row(A* __restrict acc, const T* __restrict in, int64_t n, int64_t stride) {
  if constexpr (std::is_floating_point_v<A>) {
    for (int64_t i = 0; i < n; ++i) {
      const A v = load(in[i * stride]);
      acc[i] = (v > acc[i] || v != v) ? v : acc[i];
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      const A v = in[i * stride];
      acc[i] = v > acc[i] ? v : acc[i];
    }
  }
}

CD_ALWAYS_INLINE void max_row_f32_impl(float* __restrict acc, const float* __restrict in, int64_t n, int64_t stride) {
  if (stride == 1) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      const float v = in[i];
      acc[i] = (v > acc[i] || v != v) ? v : acc[i];
    }
  } else {
    max_row(acc, in, n, stride);
  }
}
CD_ISA_BUILDS(void, max_row_f32, (float* __restrict acc, const float* __restrict in, int64_t n, int64_t stride),
              (acc, in, n, stride))

template <class T, class A>
inline void sum_row(A* __restrict acc, const T* __restrict in, int64_t n, int64_t stride) {
  for (int64_t i = 0; i < n; ++i) acc[i] += static_cast<A>(load(in[i * stride]));
}

CD_ALWAYS_INLINE void sum_row_f32_impl(float* __restrict acc, const float* __restrict in, int64_t n, int64_t stride) {
  if (stride == 1) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) acc[i] += in[i];
  } else {
    sum_row(acc, in, n, stride);
  }
}
CD_ISA_BUILDS(void, sum_row_f32, (float* __restrict acc, const float* __restrict in, int64_t n, int64_t stride),
              (acc, in, n, stride))

template <class T>
using acc_t = std::conditional_t<is_floating_v<T>, compute_t<T>, T>;

// What a window starts from: -inf (the lowest integer) for max, 0 for the sum.
template <class T, bool kMax> constexpr acc_t<T> pool_identity() {
  using A = acc_t<T>;
  if constexpr (!kMax) return A(0);
  if constexpr (is_floating_v<T>) return -std::numeric_limits<A>::infinity();
  return std::numeric_limits<A>::lowest();
}

// acc = max(acc, row) or acc += row over `n` contiguous values.
template <class T, class A, bool kMax>
inline void accumulate_contiguous(A* acc, const T* row, int64_t n) {
  if constexpr (kMax && std::is_same_v<T, float>) {
    max_row_f32(acc, row, n, 1);
  } else if constexpr (kMax) {
    max_row(acc, row, n, 1);
  } else if constexpr (std::is_same_v<T, float>) {
    sum_row_f32(acc, row, n, 1);
  } else {
    sum_row(acc, row, n, 1);
  }
}

// x with adjacent channels (channels last, the layout convolutions hand on):
// one output pixel at a time, vectorized over the channels. Taps are visited
// in window order, so ties and NaN resolve as in the row loops below.
template <class T, bool kMax>
void pool_channels_last(const PoolShape& s, const View& x, T* out, const std::vector<acc_t<T>>& wcount) {
  using A = acc_t<T>;
  const T* X = reinterpret_cast<const T*>(x.data);
  const int64_t sN = x.strides[0], sH = x.strides[2], sW = x.strides[3];
  const int64_t plane = s.OH * s.OW;
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, s.OW * s.C * window_taps(s)));
  parallel_guarded(s.N * s.OH, grain, [&](int64_t begin, int64_t end) {
    // One output row, pixel-major (OW x C), stored channel by channel so
    // that the writes into the (N, C, OH, OW) output stay contiguous.
    std::vector<A> acc(static_cast<size_t>(s.OW * s.C));
    for (int64_t row = begin; row < end; ++row) {
      const int64_t n = row / s.OH, oh = row % s.OH;
      const int64_t hs = oh * s.sh - s.pt;
      std::fill(acc.begin(), acc.end(), pool_identity<T, kMax>());
      // Only the taps inside the input (in window order): a window may be
      // mostly padding, and padding contributes nothing.
      int64_t r0, r1;
      tap_range(hs, s.dh, s.H, s.kh, r0, r1);
      for (int64_t ow = 0; ow < s.OW; ++ow) {
        A* pixel = acc.data() + ow * s.C;
        const int64_t ws = ow * s.sw - s.pl;
        int64_t q0, q1;
        tap_range(ws, s.dw, s.W, s.kw, q0, q1);
        for (int64_t r = r0; r < r1; ++r) {
          const int64_t ih = hs + r * s.dh;
          for (int64_t q = q0; q < q1; ++q) {
            const int64_t iw = ws + q * s.dw;
            accumulate_contiguous<T, A, kMax>(pixel, X + n * sN + ih * sH + iw * sW, s.C);
          }
        }
      }
      A hc = A(1);
      if constexpr (!kMax) {
        const int64_t he = std::min(hs + s.kh, s.H + s.pb);
        hc = static_cast<A>(s.include_pad ? he - hs : std::min(he, s.H) - std::max<int64_t>(hs, 0));
      }
      for (int64_t c = 0; c < s.C; ++c) {
        T* o = out + (n * s.C + c) * plane + oh * s.OW;
        for (int64_t ow = 0; ow < s.OW; ++ow) {
          const A v = acc[static_cast<size_t>(ow * s.C + c)];
          if constexpr (kMax) {
            o[ow] = store<T>(v);
          } else {
            o[ow] = store<T>(v / (hc * wcount[static_cast<size_t>(ow)]));
          }
        }
      }
    }
  });
}

// acc = max(acc, v) (NaN-propagating, the first maximum kept) or acc + v.
template <class A, bool kMax> inline A combine(A acc, A v) {
  if constexpr (!kMax) {
    return acc + v;
  } else if constexpr (std::is_floating_point_v<A>) {
    return (v > acc || v != v) ? v : acc;
  } else {
    return v > acc ? v : acc;
  }
}

// One contiguous input row into the outputs of a strided window: ext holds
// the row between its paddings (identity outside, set by the caller),
// reduced[t] combines the kw taps starting at padded position t, in window
// order, and output ow takes reduced[ow * sw].
template <class T, class A, bool kMax>
void reduce_row(const PoolShape& s, const T* in_row, A* ext, A* reduced, int64_t span, A* acc) {
  for (int64_t iw = 0; iw < s.W; ++iw) ext[s.pl + iw] = static_cast<A>(load(in_row[iw]));
#pragma omp simd
  for (int64_t t = 0; t < span; ++t) reduced[t] = ext[t];
  for (int64_t q = 1; q < s.kw; ++q) {
    const A* tap = ext + q * s.dw;
#pragma omp simd
    for (int64_t t = 0; t < span; ++t) reduced[t] = combine<A, kMax>(reduced[t], tap[t]);
  }
  for (int64_t ow = 0; ow < s.OW; ++ow) acc[ow] = combine<A, kMax>(acc[ow], reduced[ow * s.sw]);
}

template <class T, bool kMax>
void pool_loops(const PoolShape& s, const View& x, T* out) {
  using A = acc_t<T>;
  const T* X = reinterpret_cast<const T*>(x.data);
  const int64_t sN = x.strides[0], sC = x.strides[1], sH = x.strides[2], sW = x.strides[3];
  const int64_t rows = s.N * s.C * s.OH;
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, s.OW * window_taps(s)));
  // Per output column: the divisor's width factor (avg).
  std::vector<A> wcount(static_cast<size_t>(s.OW));
  if constexpr (!kMax) {
    for (int64_t ow = 0; ow < s.OW; ++ow) {
      const int64_t ws = ow * s.sw - s.pl;
      int64_t we = std::min(ws + s.kw, s.W + s.pr);
      int64_t cnt = we - ws;
      if (!s.include_pad) cnt = std::min(we, s.W) - std::max<int64_t>(ws, 0);
      wcount[static_cast<size_t>(ow)] = static_cast<A>(cnt);
    }
  }
  if (sC == 1 && s.C > 1 && (s.kh > 1 || s.kw > 1)) {
    pool_channels_last<T, kMax>(s, x, out, wcount);
    return;
  }
  // Strided windows over contiguous rows: each input row is first reduced
  // over the kw taps at every position (unit-stride loops that vectorize),
  // then each output reads one value per row instead of kw strided ones.
  const int64_t span = (s.OW - 1) * s.sw + 1;  // positions of the reduced row the outputs read
  const int64_t ext_len = std::max(span + (s.kw - 1) * s.dw, s.pl + s.W);
  // ... unless the padded row is much longer than the input (huge padding
  // or dilation): its buffer would be mostly padding.
  const bool by_row = sW == 1 && s.sw > 1 && s.kw > 1 && ext_len <= 4 * (s.W + span);
  // The taps q that reach the input for some output column, in order.
  int64_t q0, q1;
  tap_range((s.OW - 1) * s.sw - s.pl, s.dw, s.W + (s.OW - 1) * s.sw, s.kw, q0, q1);
  const A identity = pool_identity<T, kMax>();
  parallel_guarded(rows, grain, [&](int64_t begin, int64_t end) {
    std::vector<A> acc(static_cast<size_t>(s.OW));
    std::vector<A> ext(by_row ? static_cast<size_t>(ext_len) : 0, identity), reduced(by_row ? span : 0);
    for (int64_t row = begin; row < end; ++row) {
      const int64_t oh = row % s.OH, nc = row / s.OH;
      const int64_t n = nc / s.C, c = nc % s.C;
      const T* plane = X + n * sN + c * sC;
      std::fill(acc.begin(), acc.end(), pool_identity<T, kMax>());
      int64_t r0, r1;
      tap_range(oh * s.sh - s.pt, s.dh, s.H, s.kh, r0, r1);
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t ih = oh * s.sh - s.pt + r * s.dh;
        const T* in_row = plane + ih * sH;
        if (by_row) {
          reduce_row<T, A, kMax>(s, in_row, ext.data(), reduced.data(), span, acc.data());
          continue;
        }
        for (int64_t q = q0; q < q1; ++q) {
          const int64_t off = q * s.dw - s.pl;
          int64_t b, e;
          tap_range(off, s.sw, s.W, s.OW, b, e);
          if (b >= e) continue;
          const T* p = in_row + (b * s.sw + off) * sW;
          if constexpr (kMax) {
            if constexpr (std::is_same_v<T, float>) {
              max_row_f32(acc.data() + b, p, e - b, s.sw * sW);
            } else {
              max_row(acc.data() + b, p, e - b, s.sw * sW);
            }
          } else {
            if constexpr (std::is_same_v<T, float>) {
              sum_row_f32(acc.data() + b, p, e - b, s.sw * sW);
            } else {
              sum_row(acc.data() + b, p, e - b, s.sw * sW);
            }
          }
        }
      }
      T* o = out + row * s.OW;
      if constexpr (kMax) {
        for (int64_t ow = 0; ow < s.OW; ++ow) o[ow] = store<T>(acc[static_cast<size_t>(ow)]);
      } else {
        const int64_t hs = oh * s.sh - s.pt;
        const int64_t he = std::min(hs + s.kh, s.H + s.pb);
        const A hc = static_cast<A>(s.include_pad ? he - hs
                                                  : std::min(he, s.H) - std::max<int64_t>(hs, 0));
        for (int64_t ow = 0; ow < s.OW; ++ow) {
          o[ow] = store<T>(acc[static_cast<size_t>(ow)] / (hc * wcount[static_cast<size_t>(ow)]));
        }
      }
    }
  });
}

// --------------------------------------------------------- oneDNN average --

struct PoolPrimitive {
  dnnl::pooling_forward prim;
  dnnl::memory::desc src_md, dst_md, scratch_md;
  bool usable = false;
  bool single = false;  // built for one thread (onednn::ThreadScope)
};

// The oneDNN primitive for average pooling over `x` (a layout; data
// unused) if it matches PyTorch's semantics here and oneDNN has a fast
// implementation; NULL otherwise (the loops run it). Made when the kernel
// is called.
std::shared_ptr<const PoolPrimitive> avg_pool_primitive(const PoolShape& s, const View& x) {
  if (x.numel() == 0 || has_negative_stride(x)) return nullptr;
  for (size_t i = 0; i < 4; ++i) {
    if (x.shape[i] > 1 && x.strides[i] == 0) return nullptr;
  }
  // Effective bottom/right padding that produces the given output size.
  const int64_t pb_eff = (s.OH - 1) * s.sh + s.kh - s.H - s.pt;
  const int64_t pr_eff = (s.OW - 1) * s.sw + s.kw - s.W - s.pl;
  if (s.include_pad && (pb_eff > s.pb || pr_eff > s.pr)) return nullptr;
  // A pool does about a quarter of a convolution's work per "flop" counted.
  const bool single = onednn::small_work(4.0 * static_cast<double>(s.N * s.C * s.OH * s.OW) *
                                         static_cast<double>(s.kh) * static_cast<double>(s.kw));
  onednn::ThreadScope threads(single);
  onednn::Key key("avgpool");
  key.add(static_cast<int64_t>(x.dtype)).add(x.shape).add(x.strides);
  key.add(std::vector<int64_t>{s.OH, s.OW, s.kh, s.kw, s.sh, s.sw, s.pt, s.pl, pb_eff, pr_eff,
                               s.include_pad, single});
  auto entry = onednn::cached_as<PoolPrimitive>(key, [&] {
    auto e = std::make_shared<PoolPrimitive>();
    e->single = single;
    try {
      e->src_md = onednn::strided_desc(x.shape, x.strides, x.dtype);
      e->dst_md = onednn::strided_desc({s.N, s.C, s.OH, s.OW},
                                       {s.C * s.OH * s.OW, s.OH * s.OW, s.OW, 1}, x.dtype);
      dnnl::pooling_forward::primitive_desc pd(
          dnnl::pooling_forward::desc(
              dnnl::prop_kind::forward_inference,
              s.include_pad ? dnnl::algorithm::pooling_avg_include_padding
                            : dnnl::algorithm::pooling_avg_exclude_padding,
              e->src_md, e->dst_md, {s.sh, s.sw}, {s.kh, s.kw}, {s.pt, s.pl},
              {std::max<int64_t>(pb_eff, 0), std::max<int64_t>(pr_eff, 0)}),
          onednn::user_scratchpad_attr(), onednn::engine());
      e->usable = !onednn::is_reference(pd.impl_info_str());
      e->scratch_md = pd.scratchpad_desc();
      e->prim = dnnl::pooling_forward(pd);
    } catch (const dnnl::error&) {
      e->usable = false;
    }
    return e;
  });
  if (!entry->usable) return nullptr;
  return entry;
}

void run_avg_pool(const PoolPrimitive& e, const View& x, char* out) {
  onednn::ThreadScope threads(e.single);
  onednn::execute(e.prim, {{DNNL_ARG_SRC, onednn::wrap(e.src_md, x.data)}, {DNNL_ARG_DST, onednn::wrap(e.dst_md, out)}},
                  e.scratch_md);
}

// ---------------------------------------------------------------- kernels --

// True if the pool runs on a float32 copy and rounds once: float16 always
// (oneDNN 2.6 has no float16; the conversions are vectorized, and the max
// is exact either way), a bfloat16 average where oneDNN has no bfloat16
// pooling (its float32 one is faster than the loops).
bool pools_through_f32(cd_dtype_t dtype, bool is_max) {
  return dtype == CD_DTYPE_FLOAT16 || (dtype == CD_DTYPE_BFLOAT16 && !is_max && !onednn::routes().bf16_pool);
}

// `avg`: the oneDNN primitive plan_pool chose for an average pool, or NULL.
void run_pool(const PoolShape& s, const HostTensor& in, const HostTensor& out, bool is_max,
              const PoolPrimitive* avg) {
  in.range.check_live("input 0");
  out.range.check_live("output 0");
  const View x = to_view(in);
  if (pools_through_f32(x.dtype, is_max)) {
    Buffer xb, ob(static_cast<size_t>(out.numel) * sizeof(float));
    const View xf = materialize(x, CD_DTYPE_FLOAT32, xb);
    if (is_max) {
      pool_loops<float, true>(s, xf, ob.as<float>());
    } else if (avg != nullptr) {
      run_avg_pool(*avg, xf, static_cast<char*>(ob.data()));
    } else {
      pool_loops<float, false>(s, xf, ob.as<float>());
    }
    store_from_f32(ob.as<float>(), x.dtype, out.origin, out.numel);
    return;
  }
  if (avg != nullptr) {
    run_avg_pool(*avg, x, out.origin);
    return;
  }
  const bool ok = dispatch_dtype(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      fail(CD_STATUS_INVALID_ARGUMENT, "pooling does not take bool");
    } else if (is_max) {
      pool_loops<T, true>(s, x, reinterpret_cast<T*>(out.origin));
    } else if constexpr (is_floating_v<T>) {
      pool_loops<T, false>(s, x, reinterpret_cast<T*>(out.origin));
    } else {
      fail(CD_STATUS_INVALID_ARGUMENT, "avg_pool2d does not take %s", dtype_name(x.dtype));
    }
  });
  if (!ok) fail(CD_STATUS_INVALID_ARGUMENT, "unknown dtype %d", x.dtype);
}

// The oneDNN primitive for an average pool of float32 / bfloat16 (or their
// float32 copy), or NULL where the loops run it.
std::shared_ptr<const PoolPrimitive> plan_pool(const PoolShape& s, const HostTensor& in, bool is_max) {
  if (is_max) return nullptr;
  const View x = to_view(in);
  if (pools_through_f32(x.dtype, false)) return avg_pool_primitive(s, dense_layout(x, CD_DTYPE_FLOAT32));
  if (x.dtype == CD_DTYPE_FLOAT32 || x.dtype == CD_DTYPE_BFLOAT16) return avg_pool_primitive(s, x);
  return nullptr;
}

void enqueue_pool(const cd_kernel_context* ctx, bool is_max) {
  check_context(ctx, 1, 1);
  std::shared_ptr<Stream> stream = stream_from_handle(ctx->stream, ctx->device);
  HostTensor in = input(ctx, 0);
  HostTensor out = output(ctx);
  check_same_dtype({in}, out);
  if (in.dtype == CD_DTYPE_BOOL || (!is_max && !(in.dtype == CD_DTYPE_FLOAT32 ||
                                                 in.dtype == CD_DTYPE_FLOAT16 ||
                                                 in.dtype == CD_DTYPE_BFLOAT16 ||
                                                 in.dtype == CD_DTYPE_FLOAT64))) {
    fail(CD_STATUS_INVALID_ARGUMENT, "%s does not take %s", is_max ? "max_pool2d" : "avg_pool2d",
         dtype_name(in.dtype));
  }
  const PoolShape s = read_pool(ctx, in, out, is_max);
  if (out.numel == 0) return;
  std::shared_ptr<const PoolPrimitive> avg;
  try {
    avg = plan_pool(s, in, is_max);
  } catch (const std::exception& e) {  // oneDNN's own failures fall back to the loops inside
    const auto* known = dynamic_cast<const Error*>(&e);
    fail(known != nullptr ? known->code() : CD_STATUS_INTERNAL, "planning %s x (%lld, %lld, %lld, %lld) failed: %s",
         dtype_name(in.dtype), static_cast<long long>(s.N), static_cast<long long>(s.C),
         static_cast<long long>(s.H), static_cast<long long>(s.W), e.what());
  }
  stream->enqueue(is_max ? "max_pool2d" : "avg_pool2d", [s, in = std::move(in), out = std::move(out), is_max, avg] {
    run_pool(s, in, out, is_max, avg.get());
  });
}

cd_error* max_pool2d_kernel(const cd_kernel_context* ctx) noexcept {
  return guard("max_pool2d", [ctx] { enqueue_pool(ctx, true); });
}

cd_error* avg_pool2d_kernel(const cd_kernel_context* ctx) noexcept {
  return guard("avg_pool2d", [ctx] { enqueue_pool(ctx, false); });
}

// -------------------------------------------------------- global average --

template <class T>
double sum_strided(const T* p, int64_t n, int64_t stride) {
  double acc = 0.0;
  for (int64_t i = 0; i < n; ++i) acc += static_cast<double>(load(p[i * stride]));
  return acc;
}

CD_ALWAYS_INLINE double sum_f32_impl(const float* p, int64_t n) {
  double acc = 0.0;
#pragma omp simd reduction(+ : acc)
  for (int64_t i = 0; i < n; ++i) acc += static_cast<double>(p[i]);
  return acc;
}
CD_ISA_BUILDS(double, sum_f32, (const float* p, int64_t n), (p, n))

CD_ALWAYS_INLINE double sum_f64_impl(const double* p, int64_t n) {
  double acc = 0.0;
#pragma omp simd reduction(+ : acc)
  for (int64_t i = 0; i < n; ++i) acc += p[i];
  return acc;
}
CD_ISA_BUILDS(double, sum_f64, (const double* p, int64_t n), (p, n))

void run_global(const HostTensor& in, const HostTensor& out) {
  in.range.check_live("input 0");
  out.range.check_live("output 0");
  View x = to_view(in);
  Buffer xb;
  if (x.dtype == CD_DTYPE_FLOAT16) x = materialize(x, CD_DTYPE_FLOAT32, xb);  // vectorized conversion
  // Spatial dims, size-1 dropped and mergeable neighbours merged.
  std::vector<int64_t> shape, strides;
  for (size_t i = 2; i < x.ndim(); ++i) {
    if (x.shape[i] == 1) continue;
    if (!shape.empty() && strides.back() == x.strides[i] * x.shape[i]) {
      shape.back() *= x.shape[i];
      strides.back() = x.strides[i];
      continue;
    }
    shape.push_back(x.shape[i]);
    strides.push_back(x.strides[i]);
  }
  if (shape.empty()) {
    shape.push_back(1);
    strides.push_back(1);
  }
  const int64_t inner = shape.back(), inner_stride = strides.back();
  int64_t count = 1;
  for (int64_t d : shape) count *= d;
  const int64_t planes = x.shape[0] * x.shape[1];
  dispatch_dtype(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (is_floating_v<T>) {
      const T* X = reinterpret_cast<const T*>(x.data);
      auto write = [&](int64_t i, double v) {
        if (out.dtype == CD_DTYPE_FLOAT16) {
          reinterpret_cast<float16_t*>(out.origin)[i] = static_cast<float16_t>(v);
        } else {
          reinterpret_cast<T*>(out.origin)[i] = store<T>(v);
        }
      };
      parallel_guarded(planes, std::max<int64_t>(1, 32768 / std::max<int64_t>(count, 1)),
                   [&](int64_t b, int64_t e) {
        std::vector<int64_t> index(shape.size(), 0);
        for (int64_t pl = b; pl < e; ++pl) {
          const T* base = X + (pl / x.shape[1]) * x.strides[0] + (pl % x.shape[1]) * x.strides[1];
          double acc = 0.0;
          if (count == 0) {  // the mean of nothing
            write(pl, std::numeric_limits<double>::quiet_NaN());
            continue;
          }
          // Odometer over the outer spatial dims, a row loop inside.
          std::fill(index.begin(), index.end(), 0);
          int64_t off = 0;
          for (;;) {
            const T* p = base + off;
            if constexpr (std::is_same_v<T, float>) {
              acc += inner_stride == 1 ? sum_f32(p, inner) : sum_strided(p, inner, inner_stride);
            } else if constexpr (std::is_same_v<T, double>) {
              acc += inner_stride == 1 ? sum_f64(p, inner) : sum_strided(p, inner, inner_stride);
            } else {
              acc += sum_strided(p, inner, inner_stride);
            }
            size_t k = shape.size() - 1;
            bool done = true;
            while (k-- > 0) {
              off += strides[k];
              if (++index[k] < shape[k]) {
                done = false;
                break;
              }
              off -= strides[k] * shape[k];
              index[k] = 0;
            }
            if (done) break;
          }
          write(pl, acc / static_cast<double>(count));
        }
      });
    }
  });
}

void enqueue_global(const cd_kernel_context* ctx) {
  check_context(ctx, 1, 1);
  std::shared_ptr<Stream> stream = stream_from_handle(ctx->stream, ctx->device);
  HostTensor in = input(ctx, 0);
  HostTensor out = output(ctx);
  check_same_dtype({in}, out);
  if (!(in.dtype == CD_DTYPE_FLOAT32 || in.dtype == CD_DTYPE_FLOAT16 ||
        in.dtype == CD_DTYPE_BFLOAT16 || in.dtype == CD_DTYPE_FLOAT64)) {
    fail(CD_STATUS_INVALID_ARGUMENT, "global_avg_pool does not take %s", dtype_name(in.dtype));
  }
  if (in.shape.size() < 2) {
    fail(CD_STATUS_INVALID_ARGUMENT, "x must be (N, C, ...), got %zu dims", in.shape.size());
  }
  bool ok = out.shape.size() == in.shape.size();
  for (size_t i = 0; ok && i < in.shape.size(); ++i) {
    ok = out.shape[i] == (i < 2 ? in.shape[i] : 1);
  }
  if (!ok) fail(CD_STATUS_INVALID_ARGUMENT, "output must be x's shape with spatial dims of size 1");
  if (out.numel == 0) return;
  stream->enqueue("global_avg_pool", [in = std::move(in), out = std::move(out)] { run_global(in, out); });
}

cd_error* global_avg_pool_kernel(const cd_kernel_context* ctx) noexcept {
  return guard("global_avg_pool", [ctx] { enqueue_global(ctx); });
}

}  // namespace

void register_pool(cd_kernel_registry* registry) {
  static const cd_dtype_t kNumeric[] = {CD_DTYPE_FLOAT32, CD_DTYPE_FLOAT16, CD_DTYPE_BFLOAT16,
                                        CD_DTYPE_FLOAT64, CD_DTYPE_INT8,    CD_DTYPE_INT16,
                                        CD_DTYPE_INT32,   CD_DTYPE_INT64,   CD_DTYPE_UINT8};
  for (cd_dtype_t t : kNumeric) {
    const cd_dtype_t sig[2] = {t, t};
    register_kernel(registry, "max_pool2d", sig, 2, max_pool2d_kernel);
  }
  for (cd_dtype_t t : kFloatTypes) {
    const cd_dtype_t sig[2] = {t, t};
    register_kernel(registry, "avg_pool2d", sig, 2, avg_pool2d_kernel);
    register_kernel(registry, "global_avg_pool", sig, 2, global_avg_pool_kernel);
  }
}

}  // namespace linalg
}  // namespace chipdock_cpu
