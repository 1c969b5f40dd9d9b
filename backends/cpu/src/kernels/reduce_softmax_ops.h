// softmax, log_softmax and cumsum along one axis, compiled once per
// instruction-set level. NO include guard: reduce_softmax.cpp includes this
// (after reduce_simd.h) inside each isa_<level> namespace; it needs
// red::AxisPlan and red::AxisOp.
//
// The input is viewed as [outer, n (the axis), inner]; the output is
// contiguous in that order.
//   rows    (inner == 1): one row of n per outer index, read in place when it
//           is contiguous and already in the compute type, else converted
//           into a per-thread buffer; the row loop runs on the OpenMP threads.
//           softmax is two passes over a cache-resident row (max; exp and
//           store, summed block by block) plus a scale; log_softmax keeps
//           the exps of a block in a stack buffer instead.
//   columns (inner > 1): tiles of adjacent inner positions (cache-resident,
//           or up to 2048 wide and streamed when the axis is long); every
//           pass walks the axis and vectorizes across the tile.

// --- the per-row and per-tile computations --------------------------------------------

template <class C> void softmax_row(const C* x, C* y, int64_t n, bool log) {
  const C m = max_contiguous(x, n);
  C buf[kBlock];
  C total = 0;
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t len = std::min(kBlock, n - b);
    C* e = log ? buf : y + b;  // softmax keeps exp(x - max) in y
    exp_shifted(x + b, m, e, len);
    total += block_sum(e, len);
  }
  if (log) {
    const C lse = std::log(total);
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] = (x[i] - m) - lse;
  } else {
    const C inv = C(1) / total;
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] *= inv;
  }
}

// Tile: X(i, j) = x[i * ldx + j], Y likewise, i < n, j < w; `work` holds 2w.
template <class C>
void softmax_tile(const C* x, int64_t ldx, C* y, int64_t ldy, int64_t n, int64_t w, bool log,
                  C* work) {
  C* m = work;
  C* sum = work + w;
  for (int64_t j = 0; j < w; ++j) {
    m[j] = -std::numeric_limits<C>::infinity();
    sum[j] = 0;
  }
  for (int64_t i = 0; i < n; ++i) {
    const C* xi = x + i * ldx;
#pragma omp simd
    for (int64_t j = 0; j < w; ++j) m[j] = xi[j] > m[j] ? xi[j] : m[j];
  }
  for (int64_t i = 0; i < n; ++i) {
    const C* xi = x + i * ldx;
    C* yi = y + i * ldy;
    if (log) {
#pragma omp simd
      for (int64_t j = 0; j < w; ++j) sum[j] += exp_c(xi[j] - m[j]);
    } else {
#pragma omp simd
      for (int64_t j = 0; j < w; ++j) {
        const C e = exp_c(xi[j] - m[j]);
        yi[j] = e;
        sum[j] += e;
      }
    }
  }
  for (int64_t j = 0; j < w; ++j) sum[j] = log ? std::log(sum[j]) : C(1) / sum[j];
  for (int64_t i = 0; i < n; ++i) {
    const C* xi = x + i * ldx;
    C* yi = y + i * ldy;
    if (log) {
#pragma omp simd
      for (int64_t j = 0; j < w; ++j) yi[j] = (xi[j] - m[j]) - sum[j];
    } else {
#pragma omp simd
      for (int64_t j = 0; j < w; ++j) yi[j] *= sum[j];
    }
  }
}

// The running-sum type: float64 for floating types, the unsigned type of the
// same width for integers (wrapping).
template <class C, bool = std::is_floating_point_v<C>> struct ScanAcc { using type = double; };
template <class C> struct ScanAcc<C, false> { using type = std::make_unsigned_t<C>; };

// The running sum starts from the first element itself (so that -0 stays
// -0, as NumPy has it); an exclusive scan starts with +0.
template <class C> void cumsum_row(const C* x, C* y, int64_t n, bool exclusive, bool reverse) {
  using S = typename ScanAcc<C>::type;
  const int64_t step = reverse ? -1 : 1;
  int64_t i = reverse ? n - 1 : 0;
  S acc = static_cast<S>(x[i]);
  y[i] = exclusive ? C(0) : x[i];
  i += step;
  for (int64_t k = 1; k < n; ++k, i += step) {
    const S next = static_cast<S>(acc + static_cast<S>(x[i]));
    y[i] = static_cast<C>(exclusive ? acc : next);
    acc = next;
  }
}

template <class C>
void cumsum_tile(const C* x, int64_t ldx, C* y, int64_t ldy, int64_t n, int64_t w,
                 bool exclusive, bool reverse, typename ScanAcc<C>::type* acc) {
  using S = typename ScanAcc<C>::type;
  const int64_t step = reverse ? -1 : 1;
  int64_t i = reverse ? n - 1 : 0;
  {
    const C* xi = x + i * ldx;
    C* yi = y + i * ldy;
    for (int64_t j = 0; j < w; ++j) {
      acc[j] = static_cast<S>(xi[j]);
      yi[j] = exclusive ? C(0) : xi[j];
    }
  }
  i += step;
  for (int64_t k = 1; k < n; ++k, i += step) {
    const C* xi = x + i * ldx;
    C* yi = y + i * ldy;
#pragma omp simd
    for (int64_t j = 0; j < w; ++j) {
      const S next = static_cast<S>(acc[j] + static_cast<S>(xi[j]));
      yi[j] = static_cast<C>(exclusive ? acc[j] : next);
      acc[j] = next;
    }
  }
}

// --- drivers -----------------------------------------------------------------------------

// fn(const C* x, C* y, n) on every row; x and y may be the same buffer.
template <class T, class F> void axis_rows(const AxisPlan& p, F&& fn) {
  using C = compute_t<T>;
  const T* x = reinterpret_cast<const T*>(p.in.origin);
  T* y = reinterpret_cast<T*>(p.out.origin);
  const int64_t n = p.n, s = p.s;
  parallel_items(p.outer_count, p.outer_count * n, [&](int64_t begin, int64_t end) {
    std::vector<C> buf;
    Walker w(p.outer, begin);
    for (int64_t o = begin; o < end; ++o, w.next()) {
      const T* xr = x + w.offset();
      T* yr = y + o * n;
      if constexpr (std::is_same_v<T, C>) {
        if (s == 1) {
          fn(xr, yr, n);
          continue;
        }
      }
      buf.resize(static_cast<size_t>(n));
      to_compute(xr, s, n, buf.data());
      fn(buf.data(), buf.data(), n);
      from_compute(buf.data(), n, yr);
    }
  });
}

// fn(const C* x, ldx, C* y, ldy, n, w) on every tile of w inner positions
// (see below for the width); x and y may be the same buffer.
template <class T, class F> void axis_columns(const AxisPlan& p, F&& fn) {
  using C = compute_t<T>;
  const T* x = reinterpret_cast<const T*>(p.in.origin);
  T* y = reinterpret_cast<T*>(p.out.origin);
  const int64_t n = p.n, s = p.s, I = p.inner_count;
  const bool direct = std::is_same_v<T, C> && p.inner.size() == 1 && p.inner[0].stride == 1;
  int64_t tile;
  if (direct && n > 512) {
    // Long axis, read in place: wide tiles (rows of up to 2048 contiguous
    // elements) so that every pass streams through memory in order, and at
    // least one tile per thread.
    int64_t parts = (I + 2047) / 2048;
    const int64_t threads = num_threads();
    if (p.outer_count * parts < threads) {
      parts = std::min((threads + p.outer_count - 1) / p.outer_count, std::max<int64_t>(1, I / 16));
    }
    tile = std::min(I, ((I + parts - 1) / parts + 15) / 16 * 16);
  } else {
    // The tile (n x tile) stays in L2 across the passes, or is a buffer of
    // at most about a million elements.
    tile = std::max<int64_t>(16, (int64_t{1} << (direct ? 18 : 20)) / std::max<int64_t>(n, 1));
    tile = std::min<int64_t>({tile, 256, I});
  }
  const int64_t ntiles = (I + tile - 1) / tile;
  parallel_items(p.outer_count * ntiles, p.outer_count * n * I, [&](int64_t begin, int64_t end) {
    std::vector<C> buf(direct ? 0 : static_cast<size_t>(n * tile));
    std::vector<int64_t> offs(static_cast<size_t>(tile));
    for (int64_t t = begin; t < end; ++t) {
      const int64_t o = t / ntiles, j0 = (t % ntiles) * tile, w = std::min(tile, I - j0);
      const T* xo = x + offset_of(o, p.outer);
      T* yo = y + o * n * I + j0;
      if (direct) {
        fn(reinterpret_cast<const C*>(xo + j0), s, reinterpret_cast<C*>(yo), I, n, w);
        continue;
      }
      if (p.inner.size() == 1) {
        const int64_t si = p.inner[0].stride;
        for (int64_t i = 0; i < n; ++i) to_compute(xo + i * s + j0 * si, si, w, &buf[i * w]);
      } else {
        Walker wk(p.inner, j0);
        for (int64_t j = 0; j < w; ++j, wk.next()) offs[j] = wk.offset();
        for (int64_t i = 0; i < n; ++i) {
          for (int64_t j = 0; j < w; ++j) to_compute(xo + i * s + offs[j], 1, 1, &buf[i * w + j]);
        }
      }
      fn(buf.data(), w, buf.data(), w, n, w);
      for (int64_t i = 0; i < n; ++i) from_compute(&buf[i * w], w, yo + i * I);
    }
  });
}

// Rows far apart in memory (the axis stride is large) whose outer index
// runs along memory (a transposed input): tiles of up to 64 rows read side
// by side, fn(x, ldx, y, ldy, n, w) as for columns into a buffer, then each
// row copied out.
inline bool rows_transposed(const AxisPlan& p) {
  return p.inner_count == 1 && (p.s >= 16 || p.s <= -16) && !p.outer.empty() &&
         p.outer.back().stride == 1 && p.outer.back().size >= 16 && p.n >= 2 &&
         p.n <= (int64_t{1} << 18);
}

template <class T, class F> void axis_transposed(const AxisPlan& p, F&& fn) {
  using C = compute_t<T>;
  const T* x = reinterpret_cast<const T*>(p.in.origin);
  T* y = reinterpret_cast<T*>(p.out.origin);
  const int64_t n = p.n, s = p.s;
  std::vector<Dim> outer(p.outer);
  const int64_t U = outer.back().size;
  outer.pop_back();
  const int64_t O2 = numel_of(outer);
  const int64_t tile = std::min<int64_t>(U, 64);
  const int64_t ntiles = (U + tile - 1) / tile;
  parallel_items(O2 * ntiles, O2 * U * n, [&](int64_t begin, int64_t end) {
    std::vector<C> xb(std::is_same_v<T, C> ? 0 : static_cast<size_t>(n * tile));
    std::vector<C> yb(static_cast<size_t>(n * tile));
    for (int64_t t = begin; t < end; ++t) {
      const int64_t o2 = t / ntiles, u0 = (t % ntiles) * tile, w = std::min(tile, U - u0);
      const T* base = x + offset_of(o2, outer) + u0;
      if constexpr (std::is_same_v<T, C>) {
        fn(base, s, yb.data(), w, n, w);
      } else {
        for (int64_t i = 0; i < n; ++i) to_compute(base + i * s, 1, w, &xb[i * w]);
        fn(xb.data(), w, yb.data(), w, n, w);
      }
      // Copy out in strips of 16 along the axis: the strip of yb stays in
      // L1 while every row of the tile takes its 16 values.
      for (int64_t i0 = 0; i0 < n; i0 += 16) {
        const int64_t len = std::min<int64_t>(16, n - i0);
        for (int64_t j = 0; j < w; ++j) {
          C strip[16];
          for (int64_t i = 0; i < len; ++i) strip[i] = yb[(i0 + i) * w + j];
          from_compute(strip, len, y + (o2 * U + u0 + j) * n + i0);
        }
      }
    }
  });
}

template <class T> void axis_typed(const AxisPlan& p) {
  using C = compute_t<T>;
  const bool rows = p.inner_count == 1, transposed = rows_transposed(p);
  if (p.op == AxisOp::cumsum) {
    const bool ex = p.exclusive, rev = p.reverse;
    auto tile = [&](const C* x, int64_t ldx, C* y, int64_t ldy, int64_t n, int64_t w) {
      std::vector<typename ScanAcc<C>::type> acc(static_cast<size_t>(w));
      cumsum_tile(x, ldx, y, ldy, n, w, ex, rev, acc.data());
    };
    if (transposed) {
      axis_transposed<T>(p, tile);
    } else if (rows) {
      axis_rows<T>(p, [&](const C* x, C* y, int64_t n) { cumsum_row(x, y, n, ex, rev); });
    } else {
      axis_columns<T>(p, tile);
    }
    return;
  }
  if constexpr (is_floating_v<T>) {
    const bool log = p.op == AxisOp::log_softmax;
    auto tile = [&](const C* x, int64_t ldx, C* y, int64_t ldy, int64_t n, int64_t w) {
      std::vector<C> work(static_cast<size_t>(2 * w));
      softmax_tile(x, ldx, y, ldy, n, w, log, work.data());
    };
    if (transposed) {
      axis_transposed<T>(p, tile);
    } else if (rows) {
      axis_rows<T>(p, [&](const C* x, C* y, int64_t n) { softmax_row(x, y, n, log); });
    } else {
      axis_columns<T>(p, tile);
    }
    return;
  }
  fail(CD_STATUS_INTERNAL, "softmax of an integer dtype is not registered");
}

inline void run_axis(const AxisPlan& p) {
  if (!dispatch_dtype(p.in.dtype, [&](auto tag) {
        using T = decltype(tag);
        if constexpr (std::is_same_v<T, bool> || (CD_ISA_LEVEL == 2 && !CD_RED_WIDE_DTYPE(T))) {
          fail(CD_STATUS_INTERNAL, "no %s kernel at this instruction-set level",
               dtype_name(p.in.dtype));
        } else {
          axis_typed<T>(p);
        }
      })) {
    fail(CD_STATUS_INTERNAL, "unknown dtype %d", p.in.dtype);
  }
}
