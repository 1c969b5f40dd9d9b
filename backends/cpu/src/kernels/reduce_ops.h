// The reductions sum, mean, prod, max, min, argmax and argmin, compiled once
// per instruction-set level. NO include guard: reduce.cpp includes this
// (after reduce_simd.h) inside each isa_<level> namespace; it needs
// red::ReducePlan and red::RedOp.
//
// Two drivers cover every layout (see ReducePlan):
//   rows:    each output reduces M rows of L strided elements (the innermost
//            reduced dimension is the row); a row is reduced in blocks of
//            kBlock, blocks and rows combine pairwise. When there are fewer
//            outputs than threads, each output's pairwise tree is cut into
//            leaves that run in parallel.
//   columns: the innermost kept dimension has stride 1; each task owns a
//            tile of up to 2048 adjacent outputs and adds whole input rows
//            into a tile of accumulators (runs of kColumnBlock rows, combined
//            pairwise, for floating sums and products), so the input streams
//            through memory in order.
// Floating sums accumulate in float32 for 16-bit floats and float32 inputs,
// in float64 for float64; integer sums and products wrap in their own width
// (computed unsigned). max/min/argmax/argmin compare integer keys: for floats
// an order-preserving image of the bits (max/min: -0 < +0, the IEEE 754-2019
// maximum/minimum; argmax/argmin: -0 == +0 as in NumPy), with NaN mapped to
// the top key so that NaN wins (and, for arg*, its first occurrence).

// --- per-dtype traits -----------------------------------------------------------------

template <class T> struct FloatBits;
template <> struct FloatBits<float> {
  using Raw = alias_u32;
  using K = int32_t;
  static constexpr uint32_t kMag = 0x7fffffffu, kExp = 0x7f800000u, kQnan = 0x7fc00000u;
};
template <> struct FloatBits<double> {
  using Raw = alias_u64;
  using K = int64_t;
  static constexpr uint64_t kMag = 0x7fffffffffffffffull, kExp = 0x7ff0000000000000ull,
                            kQnan = 0x7ff8000000000000ull;
};
template <> struct FloatBits<float16_t> {
  using Raw = alias_u16;
  using K = int16_t;
  static constexpr uint16_t kMag = 0x7fff, kExp = 0x7c00, kQnan = 0x7e00;
};
template <> struct FloatBits<bfloat16_t> {
  using Raw = alias_u16;
  using K = int16_t;
  static constexpr uint16_t kMag = 0x7fff, kExp = 0x7f80, kQnan = 0x7fc0;
};

// Keys of the ordering reductions. kMin reverses the order (bitwise not), so
// every reduction is a maximum over keys; kArg selects the -0 == +0 keys.
template <class T, bool kMin, bool kArg, bool = is_floating_v<T>> struct Keys;

template <class T, bool kMin, bool kArg> struct Keys<T, kMin, kArg, false> {  // integers
  using Raw = T;
  using K = T;
  static K key(Raw v) { return kMin ? static_cast<K>(~v) : v; }
  static T value(K k) { return kMin ? static_cast<T>(~k) : k; }
};

template <class T, bool kMin, bool kArg> struct Keys<T, kMin, kArg, true> {  // floats
  using FB = FloatBits<T>;
  using Raw = typename FB::Raw;
  using K = typename FB::K;
  using B = std::make_unsigned_t<K>;
  static constexpr int kShift = 8 * sizeof(K) - 1;
  static K order(B b) {  // monotone, -0 < +0; an involution on the bits
    const K k = static_cast<K>(b);
    return static_cast<K>(k ^ static_cast<K>((k >> kShift) & static_cast<K>(FB::kMag)));
  }
  static K key(B b) {
    const B mag = static_cast<B>(b & FB::kMag);
    K k;
    if constexpr (kArg) {
      k = (b >> kShift) ? static_cast<K>(-static_cast<K>(mag)) : static_cast<K>(mag);
    } else {
      k = order(b);
    }
    if (kMin) k = static_cast<K>(~k);
    return mag > FB::kExp ? std::numeric_limits<K>::max() : k;
  }
  static T value(K k) {  // max/min only
    B b;
    if (k == std::numeric_limits<K>::max()) {
      b = FB::kQnan;
    } else {
      b = static_cast<B>(order(static_cast<B>(kMin ? static_cast<K>(~k) : k)));
    }
    T v;
    std::memcpy(&v, &b, sizeof(v));
    return v;
  }
};

template <class T, bool = is_floating_v<T>> struct AccOf { using type = compute_t<T>; };
template <class T> struct AccOf<T, false> { using type = std::make_unsigned_t<T>; };

// a * b wrapping in the unsigned type U (no promotion to a signed int).
template <class U> inline U wrap_mul(U a, U b) {
  using W = std::conditional_t<(sizeof(U) < sizeof(unsigned)), unsigned, U>;
  return static_cast<U>(static_cast<W>(a) * static_cast<W>(b));
}

// --- policies ---------------------------------------------------------------------------
// A policy gives: A (accumulator), kPairwise, identity(), row(x, s, n, base)
// (the reduction of one strided row; `base` is the flattened index of its
// first element), combine(a, b) (a comes first), finish(a, count) and, for
// the column driver: first/next (acc[j] from/with a contiguous input row)
// and merge.

template <class T, bool kMean> struct SumPolicy {
  using A = typename AccOf<T>::type;
  using Out = T;
  static constexpr bool kFloat = is_floating_v<T>;
  static constexpr bool kPairwise = kFloat;
  static constexpr bool kArg = false;
  static A identity() { return A(0); }
  static A row(const T* x, int64_t s, int64_t n, int64_t) {
    if constexpr (kFloat) {
      return sum_row(x, s, n);
    } else {
      A acc = 0;
      if (s == 1) {
#pragma omp simd reduction(+ : acc)
        for (int64_t i = 0; i < n; ++i) acc = static_cast<A>(acc + static_cast<A>(x[i]));
      } else {
        for (int64_t i = 0; i < n; ++i) acc = static_cast<A>(acc + static_cast<A>(x[i * s]));
      }
      return acc;
    }
  }
  static A combine(A a, A b) { return static_cast<A>(a + b); }
  static void first(A* acc, const T* x, int64_t w, int64_t) {
    if constexpr (kFloat) {
      to_compute(x, 1, w, acc);
    } else {
      for (int64_t j = 0; j < w; ++j) acc[j] = static_cast<A>(x[j]);
    }
  }
  static void next(A* acc, const T* x, int64_t w, int64_t, A* tmp) {
    if constexpr (std::is_same_v<T, A>) {
#pragma omp simd
      for (int64_t j = 0; j < w; ++j) acc[j] += x[j];
    } else if constexpr (kFloat) {
      to_compute(x, 1, w, tmp);
#pragma omp simd
      for (int64_t j = 0; j < w; ++j) acc[j] += tmp[j];
    } else {
#pragma omp simd
      for (int64_t j = 0; j < w; ++j) acc[j] = static_cast<A>(acc[j] + static_cast<A>(x[j]));
    }
  }
  static void merge(A* acc, const A* b, int64_t w) {
#pragma omp simd
    for (int64_t j = 0; j < w; ++j) acc[j] = static_cast<A>(acc[j] + b[j]);
  }
  static T finish(A a, int64_t count) {
    if constexpr (kMean) {
      const double m = static_cast<double>(a) / static_cast<double>(count);
      if constexpr (std::is_same_v<T, float16_t>) return static_cast<float16_t>(m);
      return store_one<T>(static_cast<compute_t<T>>(m));
    } else {
      (void)count;
      return store_one<T>(a);
    }
  }
};

template <class T> struct ProdPolicy {
  using A = typename AccOf<T>::type;
  using Out = T;
  static constexpr bool kFloat = is_floating_v<T>;
  static constexpr bool kPairwise = kFloat;
  static constexpr bool kArg = false;
  static A identity() { return A(1); }
  static A row(const T* x, int64_t s, int64_t n, int64_t) {
    if constexpr (kFloat) {  // like sum_row: blocks with fixed lanes, pairwise
      A buf[kBlock];
      auto f = [&](int64_t b) {
        const int64_t begin = b * kBlock, len = std::min(kBlock, n - begin);
        if constexpr (std::is_same_v<T, A>) {
          if (s == 1) return block_prod(x + begin, len);
        }
        to_compute(x + begin * s, s, len, buf);
        return block_prod(static_cast<const A*>(buf), len);
      };
      auto mul = [](A a, A b) { return a * b; };
      return n > 0 ? pairwise<A>(0, (n + kBlock - 1) / kBlock, f, mul) : A(1);
    } else {
      A p = 1;
      for (int64_t i = 0; i < n; ++i) p = wrap_mul<A>(p, static_cast<A>(x[i * s]));
      return p;
    }
  }
  static A combine(A a, A b) {
    if constexpr (kFloat) {
      return a * b;
    } else {
      return wrap_mul<A>(a, b);
    }
  }
  static void first(A* acc, const T* x, int64_t w, int64_t) {
    if constexpr (kFloat) {
      to_compute(x, 1, w, acc);
    } else {
      for (int64_t j = 0; j < w; ++j) acc[j] = static_cast<A>(x[j]);
    }
  }
  static void next(A* acc, const T* x, int64_t w, int64_t, A* tmp) {
    if constexpr (kFloat) {
      const A* v = tmp;
      if constexpr (std::is_same_v<T, A>) {
        v = x;
      } else {
        to_compute(x, 1, w, tmp);
      }
#pragma omp simd
      for (int64_t j = 0; j < w; ++j) acc[j] *= v[j];
    } else {
#pragma omp simd
      for (int64_t j = 0; j < w; ++j) acc[j] = wrap_mul<A>(acc[j], static_cast<A>(x[j]));
    }
  }
  static void merge(A* acc, const A* b, int64_t w) {
    for (int64_t j = 0; j < w; ++j) acc[j] = combine(acc[j], b[j]);
  }
  static T finish(A a, int64_t) { return store_one<T>(a); }
};

// float32/float64 rows in place: the maximum (kMin: minimum) compared as
// floats, which streams faster than the integer keys. NaN is skipped here;
// `*suspect` is set when the row may hold one (its plain sum is not finite:
// a NaN, an infinity or an overflow), and the caller then looks.
template <class T, bool kMin> inline T float_extreme(const T* x, int64_t n, bool* suspect) {
  typedef T V __attribute__((vector_size(kVecBytes)));
  constexpr int W = kVecBytes / sizeof(T);
  const T init = kMin ? std::numeric_limits<T>::infinity() : -std::numeric_limits<T>::infinity();
  V m0 = V{} + init, m1 = m0, s0 = V{}, s1 = V{};
  int64_t i = 0;
  for (; i + 2 * W <= n; i += 2 * W) {
    V a, b;
    std::memcpy(&a, x + i, sizeof(V));
    std::memcpy(&b, x + i + W, sizeof(V));
    m0 = kMin ? (a < m0 ? a : m0) : (a > m0 ? a : m0);
    m1 = kMin ? (b < m1 ? b : m1) : (b > m1 ? b : m1);
    s0 += a;
    s1 += b;
  }
  m0 = kMin ? (m1 < m0 ? m1 : m0) : (m1 > m0 ? m1 : m0);
  s0 += s1;
  T lm[W], ls[W];
  std::memcpy(lm, &m0, sizeof(V));
  std::memcpy(ls, &s0, sizeof(V));
  T m = init, t = 0;
  for (int j = 0; j < W; ++j) {
    m = kMin ? (lm[j] < m ? lm[j] : m) : (lm[j] > m ? lm[j] : m);
    t += ls[j];
  }
  for (; i < n; ++i) {
    m = kMin ? (x[i] < m ? x[i] : m) : (x[i] > m ? x[i] : m);
    t += x[i];
  }
  *suspect = !(t - t == 0);
  return m;
}

template <class T> inline int64_t first_nan(const T* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    if (x[i] != x[i]) return i;
  }
  return -1;
}

template <class T> constexpr bool kFloatDomain = std::is_same_v<T, float> || std::is_same_v<T, double>;

template <class T, bool kMin> struct MaxPolicy {
  using KS = Keys<T, kMin, false>;
  using Raw = typename KS::Raw;
  using A = typename KS::K;
  using Out = T;
  static constexpr bool kPairwise = false;
  static constexpr bool kArg = false;
  static A identity() { return std::numeric_limits<A>::lowest(); }
  static A row(const T* x, int64_t s, int64_t n, int64_t) {
    if constexpr (kFloatDomain<T>) {
      if (s == 1) {
        bool suspect;
        T m = float_extreme<T, kMin>(x, n, &suspect);
        if (suspect && first_nan(x, n) >= 0) return std::numeric_limits<A>::max();
        if (m == 0) {  // which zero: maximum prefers +0, minimum -0
          m = kMin ? T(0) : -T(0);
          for (int64_t i = 0; i < n; ++i) {
            if (x[i] == 0 && std::signbit(x[i]) == kMin) {
              m = x[i];
              break;
            }
          }
        }
        typename KS::B b;
        std::memcpy(&b, &m, sizeof(b));
        return KS::key(b);
      }
    }
    const Raw* r = reinterpret_cast<const Raw*>(x);
    A m = identity();
    if (s == 1) {
#pragma omp simd reduction(max : m)
      for (int64_t i = 0; i < n; ++i) {
        const A k = KS::key(r[i]);
        m = k > m ? k : m;
      }
    } else {
      for (int64_t i = 0; i < n; ++i) {
        const A k = KS::key(r[i * s]);
        m = k > m ? k : m;
      }
    }
    return m;
  }
  static A combine(A a, A b) { return b > a ? b : a; }
  static void first(A* acc, const T* x, int64_t w, int64_t) {
    const Raw* r = reinterpret_cast<const Raw*>(x);
#pragma omp simd
    for (int64_t j = 0; j < w; ++j) acc[j] = KS::key(r[j]);
  }
  static void next(A* acc, const T* x, int64_t w, int64_t, A*) {
    const Raw* r = reinterpret_cast<const Raw*>(x);
#pragma omp simd
    for (int64_t j = 0; j < w; ++j) {
      const A k = KS::key(r[j]);
      acc[j] = k > acc[j] ? k : acc[j];
    }
  }
  static void merge(A* acc, const A* b, int64_t w) {
    for (int64_t j = 0; j < w; ++j) acc[j] = b[j] > acc[j] ? b[j] : acc[j];
  }
  static T finish(A a, int64_t) { return KS::value(a); }
};

template <class T, bool kMin> struct ArgPolicy {
  using KS = Keys<T, kMin, true>;
  using Raw = typename KS::Raw;
  using K = typename KS::K;
  struct A {
    K key;
    int64_t index;
  };
  using Out = int64_t;
  static constexpr bool kPairwise = false;
  static constexpr bool kArg = true;
  static A identity() { return {std::numeric_limits<K>::lowest(), 0}; }
  static A row(const T* x, int64_t s, int64_t n, int64_t base) {
    if constexpr (kFloatDomain<T>) {
      if (s == 1) {  // the extreme as floats, then its first position (-0 == +0)
        bool suspect;
        const T m = float_extreme<T, kMin>(x, n, &suspect);
        if (suspect) {
          const int64_t at = first_nan(x, n);
          if (at >= 0) return {std::numeric_limits<K>::max(), base + at};
        }
        constexpr int64_t kStep = 64;
        int64_t i = 0;
        for (; i + kStep <= n; i += kStep) {
          int hit = 0;
#pragma omp simd reduction(| : hit)
          for (int64_t j = 0; j < kStep; ++j) hit |= x[i + j] == m;
          if (hit) break;
        }
        for (; i < n; ++i) {
          if (x[i] == m) break;
        }
        typename KS::B b;
        std::memcpy(&b, &m, sizeof(b));
        return {KS::key(b), base + i};
      }
    }
    const Raw* r = reinterpret_cast<const Raw*>(x);
    K m = std::numeric_limits<K>::lowest();
    if (s == 1) {
#pragma omp simd reduction(max : m)
      for (int64_t i = 0; i < n; ++i) {
        const K k = KS::key(r[i]);
        m = k > m ? k : m;
      }
    } else {
      for (int64_t i = 0; i < n; ++i) {
        const K k = KS::key(r[i * s]);
        m = k > m ? k : m;
      }
    }
    // The first position holding the maximum key (blocks tested vector-wide).
    constexpr int64_t kStep = 64;
    int64_t i = 0;
    if (s == 1) {
      for (; i + kStep <= n; i += kStep) {
        int hit = 0;
#pragma omp simd reduction(| : hit)
        for (int64_t j = 0; j < kStep; ++j) hit |= KS::key(r[i + j]) == m;
        if (hit) break;
      }
    }
    for (; i < n; ++i) {
      if (KS::key(r[i * s]) == m) break;
    }
    return {m, base + i};
  }
  static A combine(const A& a, const A& b) { return b.key > a.key ? b : a; }
  static int64_t finish(const A& a, int64_t) { return a.index; }
};

// --- drivers -------------------------------------------------------------------------------

// Row driver: outputs x M rows x L elements.
template <class P, class T> void reduce_rows(const ReducePlan& p) {
  using A = typename P::A;
  using Out = typename P::Out;
  const T* x = reinterpret_cast<const T*>(p.in.origin);
  Out* out = reinterpret_cast<Out*>(p.out.origin);
  const std::vector<Dim>& kept = p.kept;
  std::vector<Dim> outer_rows(p.reduced);
  Dim row{1, 1};
  if (!outer_rows.empty()) {
    row = outer_rows.back();
    outer_rows.pop_back();
  }
  const int64_t L = row.size, s = row.stride, M = numel_of(outer_rows);
  const int64_t outputs = p.outputs, count = p.count;
  const int64_t total = outputs * count;

  // [m0, m1) rows, [l0, l1) of each, pairwise over rows.
  auto part = [&](const T* base, int64_t m0, int64_t m1, int64_t l0, int64_t l1) {
    auto one = [&](int64_t m) {
      const int64_t off = outer_rows.empty() ? 0 : offset_of(m, outer_rows);
      return P::row(base + off + l0 * s, s, l1 - l0, m * L + l0);
    };
    struct Rec {
      decltype(one)& f;
      A operator()(int64_t a, int64_t b) const {
        if (b - a == 1) return f(a);
        const int64_t mid = a + (b - a) / 2;
        const A left = (*this)(a, mid);
        return P::combine(left, (*this)(mid, b));
      }
    };
    return Rec{one}(m0, m1);
  };

  // Fewer outputs than threads: each output's work is cut into `split`
  // leaves of the pairwise tree (over its rows, or over the kBlock blocks
  // of its one row), combined back in tree order. The result is the same
  // bits as without the split.
  const int64_t threads = num_threads();
  const int64_t blocks = (L + kBlock - 1) / kBlock;
  int64_t split = 1;
  if (outputs < threads && total >= 2 * kParallelGrain) {
    split = std::min(pow2_ceil((threads + outputs - 1) / outputs),
                     pow2_floor(M > 1 ? M : blocks));
  }
  if (split <= 1) {
    parallel_items(outputs, total, [&](int64_t begin, int64_t end) {
      Walker w(kept, begin);
      for (int64_t o = begin; o < end; ++o, w.next()) {
        out[o] = P::finish(part(x + w.offset(), 0, M, 0, L), count);
      }
    });
    return;
  }
  std::vector<A> partial(static_cast<size_t>(outputs * split));
  parallel_items(outputs * split, total, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t o = t / split, c = t % split;
      const T* base = x + offset_of(o, kept);
      int64_t lo, hi;
      if (M > 1) {
        tree_cut(0, M, split, c, &lo, &hi);
        partial[t] = part(base, lo, hi, 0, L);
      } else {
        tree_cut(0, blocks, split, c, &lo, &hi);
        partial[t] = part(base, 0, 1, lo * kBlock, std::min(hi * kBlock, L));
      }
    }
  });
  for (int64_t o = 0; o < outputs; ++o) {
    A* leaf = partial.data() + o * split;
    for (int64_t step = 1; step < split; step *= 2) {
      for (int64_t c = 0; c + step < split; c += 2 * step) leaf[c] = P::combine(leaf[c], leaf[c + step]);
    }
    out[o] = P::finish(leaf[0], count);
  }
}

// Column tiles: how many and how wide (balanced, multiples of 64).
inline void column_tiles(int64_t inner, int64_t* ntiles, int64_t* width) {
  constexpr int64_t kTile = 2048;
  *ntiles = (inner + kTile - 1) / kTile;
  int64_t w = (inner + *ntiles - 1) / *ntiles;
  w = (w + 63) / 64 * 64;
  *width = std::min(w, inner);
  *ntiles = (inner + *width - 1) / *width;
}

// Rows reduced sequentially in one block before blocks combine pairwise.
constexpr int64_t kColumnBlock = 64;

// Column driver for the accumulating policies (sum, mean, prod, max, min).
template <class P, class T> void reduce_columns(const ReducePlan& p) {
  using A = typename P::A;
  const T* x = reinterpret_cast<const T*>(p.in.origin);
  T* out = reinterpret_cast<T*>(p.out.origin);
  std::vector<Dim> outer(p.kept);
  const int64_t inner = outer.back().size;
  outer.pop_back();
  const std::vector<Dim>& red = p.reduced;
  const int64_t O = numel_of(outer), count = p.count;
  const int64_t total = O * inner * count;
  auto row_off = [&](int64_t r) {
    return red.size() == 1 ? r * red[0].stride : offset_of(r, red);
  };
  int64_t ntiles, width;
  column_tiles(inner, &ntiles, &width);
  const int64_t tasks = O * ntiles;
  const int64_t threads = num_threads();
  // Few tiles: the rows are cut into `split` leaves of the pairwise tree
  // (each above kColumnBlock rows), merged back in tree order: the same bits
  // as without the split.
  int64_t split = 1;
  if (tasks < threads && total >= 2 * kParallelGrain) {
    split = pow2_ceil((threads + tasks - 1) / tasks);
    while (split > 1 && count / split <= kColumnBlock) split /= 2;
  }
  int levels = 1;
  for (int64_t r = kColumnBlock; r < count; r *= 2) ++levels;

  // acc[0, w) = the reduction of rows [r0, r1) of the tile at `base`.
  struct Cols {
    const T* base;
    int64_t w;
    decltype(row_off)& off;
    A* tmp;
    void seq(int64_t r0, int64_t r1, A* acc) const {
      P::first(acc, base + off(r0), w, r0);
      for (int64_t r = r0 + 1; r < r1; ++r) P::next(acc, base + off(r), w, r, tmp);
    }
    void pair(int64_t r0, int64_t r1, A* acc, A* scratch) const {
      if (r1 - r0 <= kColumnBlock) {
        seq(r0, r1, acc);
        return;
      }
      const int64_t mid = r0 + (r1 - r0) / 2;
      pair(r0, mid, acc, scratch);
      pair(mid, r1, scratch, scratch + w);
      P::merge(acc, scratch, w);
    }
    void run(int64_t r0, int64_t r1, A* acc, A* scratch) const {
      if (P::kPairwise) {
        pair(r0, r1, acc, scratch);
      } else {
        seq(r0, r1, acc);
      }
    }
  };

  std::vector<A> partial;
  if (split > 1) partial.resize(static_cast<size_t>(split * O * inner));
  parallel_items(tasks * split, total, [&](int64_t begin, int64_t end) {
    std::vector<A> acc(static_cast<size_t>(width * (levels + 2)));
    A* tmp = acc.data() + width * (levels + 1);
    for (int64_t t = begin; t < end; ++t) {
      const int64_t c = t % split, tile = (t / split) % ntiles, o = t / split / ntiles;
      const int64_t j0 = tile * width, w = std::min(width, inner - j0);
      Cols cols{x + offset_of(o, outer) + j0, w, row_off, tmp};
      int64_t r0, r1;
      tree_cut(0, count, split, c, &r0, &r1);
      A* dst = split > 1 ? partial.data() + (c * O + o) * inner + j0 : acc.data();
      cols.run(r0, r1, dst, acc.data() + (split > 1 ? 0 : width));
      if (split == 1) {
        T* y = out + o * inner + j0;
        for (int64_t j = 0; j < w; ++j) y[j] = P::finish(acc[j], count);
      }
    }
  });
  if (split > 1) {
    const int64_t n = O * inner;
    for (int64_t step = 1; step < split; step *= 2) {
      for (int64_t c = 0; c + step < split; c += 2 * step) {
        P::merge(partial.data() + c * n, partial.data() + (c + step) * n, n);
      }
    }
    for (int64_t j = 0; j < n; ++j) out[j] = P::finish(partial[j], count);
  }
}

// Column driver for argmax/argmin: per output the best key and its index.
template <class P, class T> void arg_columns(const ReducePlan& p) {
  using K = typename P::K;
  using KS = typename P::KS;
  using Raw = typename P::Raw;
  const T* x = reinterpret_cast<const T*>(p.in.origin);
  int64_t* out = reinterpret_cast<int64_t*>(p.out.origin);
  std::vector<Dim> outer(p.kept);
  const int64_t inner = outer.back().size;
  outer.pop_back();
  const int64_t O = numel_of(outer), count = p.count;
  const int64_t rs = p.reduced.empty() ? 0 : p.reduced[0].stride;  // one reduced dim at most
  int64_t ntiles, width;
  column_tiles(inner, &ntiles, &width);
  const int64_t tasks = O * ntiles;
  const int64_t threads = num_threads();
  const int64_t total = O * inner * count;
  int64_t split = 1;
  if (tasks < threads && total >= 2 * kParallelGrain) {
    split = std::min((threads + tasks - 1) / tasks, std::max<int64_t>(1, count / 16));
  }  // exact: any cut gives the same result
  const int64_t n = O * inner;
  std::vector<K> keys(static_cast<size_t>(split * n));
  std::vector<int64_t> index(static_cast<size_t>(split * n));
  parallel_items(tasks * split, total, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t c = t % split, tile = (t / split) % ntiles, o = t / split / ntiles;
      const int64_t j0 = tile * width, w = std::min(width, inner - j0);
      const Raw* base = reinterpret_cast<const Raw*>(x + offset_of(o, outer) + j0);
      K* bk = keys.data() + c * n + o * inner + j0;
      int64_t* bi = index.data() + c * n + o * inner + j0;
      const int64_t r0 = count * c / split, r1 = count * (c + 1) / split;
#pragma omp simd
      for (int64_t j = 0; j < w; ++j) {
        bk[j] = KS::key(base[r0 * rs + j]);
        bi[j] = r0;
      }
      for (int64_t r = r0 + 1; r < r1; ++r) {
        const Raw* row = base + r * rs;
#pragma omp simd
        for (int64_t j = 0; j < w; ++j) {
          const K k = KS::key(row[j]);
          const bool better = k > bk[j];
          bk[j] = better ? k : bk[j];
          bi[j] = better ? r : bi[j];
        }
      }
    }
  });
  for (int64_t c = 1; c < split; ++c) {
    for (int64_t j = 0; j < n; ++j) {
      if (keys[c * n + j] > keys[j]) {
        keys[j] = keys[c * n + j];
        index[j] = index[c * n + j];
      }
    }
  }
  std::memcpy(out, index.data(), static_cast<size_t>(n) * sizeof(int64_t));
}

template <class P, class T> void reduce_with(const ReducePlan& p) {
  using Out = typename P::Out;
  Out* out = reinterpret_cast<Out*>(p.out.origin);
  if (p.count == 0) {  // an empty extent: the identity (mean: 0 / 0 = NaN)
    const Out v = P::finish(P::identity(), 0);
    for (int64_t o = 0; o < p.outputs; ++o) out[o] = v;
    return;
  }
  if (p.columns) {
    if constexpr (P::kArg) {
      arg_columns<P, T>(p);
    } else {
      reduce_columns<P, T>(p);
    }
    return;
  }
  reduce_rows<P, T>(p);
}

template <class T> void reduce_typed(const ReducePlan& p) {
  switch (p.op) {
    case RedOp::sum: return reduce_with<SumPolicy<T, false>, T>(p);
    case RedOp::prod: return reduce_with<ProdPolicy<T>, T>(p);
    case RedOp::max: return reduce_with<MaxPolicy<T, false>, T>(p);
    case RedOp::min: return reduce_with<MaxPolicy<T, true>, T>(p);
    case RedOp::argmax: return reduce_with<ArgPolicy<T, false>, T>(p);
    case RedOp::argmin: return reduce_with<ArgPolicy<T, true>, T>(p);
    case RedOp::mean:
      if constexpr (is_floating_v<T>) return reduce_with<SumPolicy<T, true>, T>(p);
      break;
  }
  fail(CD_STATUS_INTERNAL, "reduction %d is not defined for this dtype", static_cast<int>(p.op));
}

inline void run_reduce(const ReducePlan& p) {
  if (!dispatch_dtype(p.in.dtype, [&](auto tag) {
        using T = decltype(tag);
        if constexpr (std::is_same_v<T, bool> || (CD_ISA_LEVEL == 2 && !CD_RED_WIDE_DTYPE(T))) {
          fail(CD_STATUS_INTERNAL, "no %s reduction at this instruction-set level",
               dtype_name(p.in.dtype));
        } else {
          reduce_typed<T>(p);
        }
      })) {
    fail(CD_STATUS_INTERNAL, "unknown dtype %d", p.in.dtype);
  }
}
