// batch_norm, layer_norm, rms_norm, group_norm and local_response_norm,
// compiled once per instruction-set level. NO include guard: norm.cpp
// includes this (after reduce_simd.h) inside each isa_<level> namespace; it
// needs red::NormPlan and red::NormOp.
//
// Every op works on rows (contiguous in the output): read in place when the
// row is contiguous in the input and already in the compute type, else
// gathered into a per-thread compute buffer. Statistics are two passes over
// the cache-resident row (mean, then the sum of squared deviations), each a
// blocked, pairwise sum; the row loop runs on the OpenMP threads.

// Gathers the elements of `dims` (row-major) at `base` into `dst`.
template <class T>
void gather(const T* base, const std::vector<Dim>& dims, compute_t<T>* dst) {
  if (dims.empty()) {
    to_compute(base, 1, 1, dst);
    return;
  }
  const Dim last = dims.back();
  if (dims.size() == 1) {
    to_compute(base, last.stride, last.size, dst);
    return;
  }
  const std::vector<Dim> outer(dims.begin(), dims.end() - 1);
  const int64_t m = numel_of(outer);
  Walker w(outer, 0);
  for (int64_t i = 0; i < m; ++i, w.next()) {
    to_compute(base + w.offset(), last.stride, last.size, dst + i * last.size);
  }
}

// A parameter tensor in the compute type, contiguous.
template <class T> std::vector<compute_t<T>> load_param(const HostTensor& t) {
  std::vector<compute_t<T>> v(static_cast<size_t>(t.numel));
  if (t.numel > 0) {
    std::vector<Dim> dims;
    for (size_t i = 0; i < t.shape.size(); ++i) dims.push_back({t.shape[i], t.strides[i]});
    gather(reinterpret_cast<const T*>(t.origin), coalesce(dims), v.data());
  }
  return v;
}

// True if a row with these (coalesced) dims can be read in place.
template <class T> bool row_is_direct(const std::vector<Dim>& dims) {
  return std::is_same_v<T, compute_t<T>> &&
         (dims.empty() || (dims.size() == 1 && dims[0].stride == 1));
}

// Runs fn(x, y, row) over every row of p.rows x p.row: x the row in the
// compute type, y where the result goes (the output row or a buffer, then
// stored). x and y may alias element for element.
template <class T, class F> void for_each_row(const NormPlan& p, F&& fn) {
  using C = compute_t<T>;
  const T* x = reinterpret_cast<const T*>(p.x.origin);
  T* out = reinterpret_cast<T*>(p.out.origin);
  const int64_t len = p.row_len;
  const bool direct = row_is_direct<T>(p.row);
  parallel_items(p.row_count, p.row_count * len, [&](int64_t begin, int64_t end) {
    std::vector<C> buf;
    if (!direct || !std::is_same_v<T, C>) buf.resize(static_cast<size_t>(len));
    Walker w(p.rows, begin);
    for (int64_t r = begin; r < end; ++r, w.next()) {
      const T* xr = x + w.offset();
      T* yr = out + r * len;
      if constexpr (std::is_same_v<T, C>) {
        if (direct) {
          fn(xr, yr, r);
          continue;
        }
        gather(xr, p.row, buf.data());
        fn(static_cast<const C*>(buf.data()), yr, r);
      } else {
        gather(xr, p.row, buf.data());
        fn(static_cast<const C*>(buf.data()), buf.data(), r);
        from_compute(buf.data(), len, yr);
      }
    }
  });
}

// 1 / sqrt(v + eps), in float64.
template <class C> inline C rsqrt_eps(C v, double eps) {
  return static_cast<C>(1.0 / std::sqrt(static_cast<double>(v) + eps));
}

template <class T> void layer_norm_run(const NormPlan& p) {
  using C = compute_t<T>;
  const std::vector<C> scale = load_param<T>(p.params[0]);
  const bool has_bias = p.params.size() > 1;
  const std::vector<C> bias = has_bias ? load_param<T>(p.params[1]) : std::vector<C>();
  const C* g = scale.data();
  const C* b = bias.data();
  const int64_t n = p.row_len;
  const double eps = p.epsilon;
  if (p.op == NormOp::rms_norm) {
    for_each_row<T>(p, [&](const C* x, C* y, int64_t) {
      const C ms = sum_sq_dev_contiguous(x, n, C(0)) / static_cast<C>(n);
      const C r = rsqrt_eps(ms, eps);
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) y[j] = (x[j] * r) * g[j];
    });
    return;
  }
  for_each_row<T>(p, [&](const C* x, C* y, int64_t) {
    const C mean = sum_contiguous(x, n) / static_cast<C>(n);
    const C var = sum_sq_dev_contiguous(x, n, mean) / static_cast<C>(n);
    const C r = rsqrt_eps(var, eps);
    if (has_bias) {
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) y[j] = ((x[j] - mean) * r) * g[j] + b[j];
    } else {
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) y[j] = ((x[j] - mean) * r) * g[j];
    }
  });
}

template <class T> void group_norm_run(const NormPlan& p) {
  using C = compute_t<T>;
  const std::vector<C> scale = load_param<T>(p.params[0]);
  const std::vector<C> bias = load_param<T>(p.params[1]);
  const int64_t n = p.row_len, S = p.spatial, Cg = p.channels / p.groups, G = p.groups;
  const double eps = p.epsilon;
  for_each_row<T>(p, [&](const C* x, C* y, int64_t r) {
    const int64_t c0 = (r % G) * Cg;
    const C mean = sum_contiguous(x, n) / static_cast<C>(n);
    const C var = sum_sq_dev_contiguous(x, n, mean) / static_cast<C>(n);
    const C rs = rsqrt_eps(var, eps);
    for (int64_t c = 0; c < Cg; ++c) {
      const C a = rs * scale[c0 + c], b = bias[c0 + c];
      const C* xc = x + c * S;
      C* yc = y + c * S;
#pragma omp simd
      for (int64_t j = 0; j < S; ++j) yc[j] = (xc[j] - mean) * a + b;
    }
  });
}

// Rows are (n, c) pairs of `spatial` elements, or whole samples of
// channels x spatial when the spatial extent is short (p.row_channels).
template <class T> void batch_norm_run(const NormPlan& p) {
  using C = compute_t<T>;
  const std::vector<C> scale = load_param<T>(p.params[0]);
  const std::vector<C> bias = load_param<T>(p.params[1]);
  const std::vector<C> mean = load_param<T>(p.params[2]);
  const std::vector<C> var = load_param<T>(p.params[3]);
  const int64_t channels = p.channels, S = p.spatial;
  std::vector<C> a(static_cast<size_t>(channels));
  for (int64_t c = 0; c < channels; ++c) {
    a[c] = static_cast<C>(static_cast<double>(scale[c]) /
                          std::sqrt(static_cast<double>(var[c]) + p.epsilon));
  }
  const C* pa = a.data();
  const C* pb = bias.data();
  const C* pm = mean.data();
  // The fused relu: 0 below zero, NaN stays NaN. `lo` is -inf without it.
  const C lo = p.relu ? C(0) : -std::numeric_limits<C>::infinity();
  if (p.row_channels) {  // a row is one sample: channels x S
    for_each_row<T>(p, [&](const C* x, C* y, int64_t) {
      if (S == 1) {
#pragma omp simd
        for (int64_t c = 0; c < channels; ++c) {
          const C v = (x[c] - pm[c]) * pa[c] + pb[c];
          y[c] = v < lo ? lo : v;
        }
        return;
      }
      for (int64_t c = 0; c < channels; ++c) {
        const C m = pm[c], k = pa[c], b = pb[c];
#pragma omp simd
        for (int64_t j = 0; j < S; ++j) {
          const C v = (x[c * S + j] - m) * k + b;
          y[c * S + j] = v < lo ? lo : v;
        }
      }
    });
    return;
  }
  for_each_row<T>(p, [&](const C* x, C* y, int64_t r) {
    const int64_t c = r % channels;
    const C m = pm[c], k = pa[c], b = pb[c];
#pragma omp simd
    for (int64_t j = 0; j < S; ++j) {
      const C v = (x[j] - m) * k + b;
      y[j] = v < lo ? lo : v;
    }
  });
}

// x / (bias + alpha / size * sum of x^2 over the channel window) ^ beta; the
// window of channel c is [c - floor((size - 1) / 2), c + ceil((size - 1) / 2)]
// clipped to the channels (ONNX LRN). Tiles of spatial positions, all
// channels at once.
template <class T> void lrn_run(const NormPlan& p) {
  using C = compute_t<T>;
  const T* x = reinterpret_cast<const T*>(p.x.origin);
  T* out = reinterpret_cast<T*>(p.out.origin);
  const int64_t N = p.batch, CH = p.channels, S = p.spatial;
  const int64_t before = (p.size - 1) / 2, after = p.size / 2;  // floor, ceil of (size-1)/2
  const C k = static_cast<C>(p.bias), scale = static_cast<C>(p.alpha / static_cast<double>(p.size));
  const C nbeta = static_cast<C>(-p.beta);
  int64_t tile = std::max<int64_t>(16, 65536 / std::max<int64_t>(CH, 1));
  tile = std::min(tile, S);
  const int64_t ntiles = (S + tile - 1) / tile;
  // Work: each output sums the window's channels, at most CH of them (a
  // huge `size` must not overflow the estimate).
  const int64_t window = std::min(std::max<int64_t>(p.size, 1), std::max<int64_t>(CH, 1));
  parallel_items(N * ntiles, chipdock::support::checked_mul(N * CH * S, window).value_or(INT64_MAX),
                 [&](int64_t begin, int64_t end) {
    std::vector<C> xb(static_cast<size_t>(CH * tile)), sq(xb.size()), yb(static_cast<size_t>(tile));
    std::vector<int64_t> offs(static_cast<size_t>(tile));
    for (int64_t t = begin; t < end; ++t) {
      const int64_t n = t / ntiles, j0 = (t % ntiles) * tile, w = std::min(tile, S - j0);
      const T* xn = x + n * p.batch_stride;
      if (p.spatial_dims.size() <= 1) {
        const int64_t ss = p.spatial_dims.empty() ? 0 : p.spatial_dims[0].stride;
        for (int64_t c = 0; c < CH; ++c) {
          to_compute(xn + c * p.channel_stride + j0 * ss, ss, w, &xb[c * w]);
        }
      } else {
        Walker wk(p.spatial_dims, j0);
        for (int64_t j = 0; j < w; ++j, wk.next()) offs[j] = wk.offset();
        for (int64_t c = 0; c < CH; ++c) {
          for (int64_t j = 0; j < w; ++j) {
            to_compute(xn + c * p.channel_stride + offs[j], 1, 1, &xb[c * w + j]);
          }
        }
      }
#pragma omp simd
      for (int64_t i = 0; i < CH * w; ++i) sq[i] = xb[i] * xb[i];
      for (int64_t c = 0; c < CH; ++c) {
        const int64_t lo = std::max<int64_t>(0, c - before), hi = std::min(CH - 1, c + after);
        for (int64_t j = 0; j < w; ++j) yb[j] = 0;
        for (int64_t cc = lo; cc <= hi; ++cc) {
#pragma omp simd
          for (int64_t j = 0; j < w; ++j) yb[j] += sq[cc * w + j];
        }
        const C* xc = &xb[c * w];
        C* y = yb.data();
        if (p.beta == 0.75) {  // the usual beta (AlexNet, GoogLeNet): v^-3/4 = 1 / sqrt(v * sqrt(v)), vectorized
#pragma omp simd
          for (int64_t j = 0; j < w; ++j) {
            const C v = k + scale * y[j];
            y[j] = xc[j] / std::sqrt(v * std::sqrt(v));
          }
        } else if (p.beta == 0.5) {
#pragma omp simd
          for (int64_t j = 0; j < w; ++j) y[j] = xc[j] / std::sqrt(k + scale * y[j]);
        } else if (k > 0) {
          // (k + s)^-beta = k^-beta * exp(-beta * log1p(s / k)): log1p keeps a
          // sum far below k that k + s would round away, which a large beta
          // turns into the whole result ((1 + 1e-14)^1e300 is inf, not 1).
          const C kpow = std::pow(k, nbeta);
          for (int64_t j = 0; j < w; ++j) {
            const C l = std::log1p(scale * y[j] / k);
            y[j] = xc[j] * (l == 0 ? kpow : kpow * std::exp(nbeta * l));  // an infinite beta times log 1 is 1, not NaN
          }
        } else {
          for (int64_t j = 0; j < w; ++j) y[j] = xc[j] * std::pow(k + scale * y[j], nbeta);
        }
        from_compute(yb.data(), w, out + (n * CH + c) * S + j0);
      }
    }
  });
}

template <class T> void norm_typed(const NormPlan& p) {
  switch (p.op) {
    case NormOp::layer_norm:
    case NormOp::rms_norm: return layer_norm_run<T>(p);
    case NormOp::group_norm: return group_norm_run<T>(p);
    case NormOp::batch_norm: return batch_norm_run<T>(p);
    case NormOp::lrn: return lrn_run<T>(p);
  }
}

inline void run_norm(const NormPlan& p) {
  switch (p.x.dtype) {
    case CD_DTYPE_FLOAT32: return norm_typed<float>(p);
    case CD_DTYPE_FLOAT16: return norm_typed<float16_t>(p);
    case CD_DTYPE_BFLOAT16: return norm_typed<bfloat16_t>(p);
#if CD_ISA_LEVEL < 2
    case CD_DTYPE_FLOAT64: return norm_typed<double>(p);
#endif
    default: fail(CD_STATUS_INTERNAL, "normalization of %s is not registered",
                  dtype_name(p.x.dtype));
  }
}
