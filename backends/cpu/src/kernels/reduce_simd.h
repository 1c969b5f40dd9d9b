// Numeric primitives of the reduction and normalization kernels, compiled
// once per instruction-set level. NO include guard: a kernel file includes
// this inside `namespace isa_<level> { ... }` with CD_ISA_LEVEL set (0
// baseline x86-64 / other targets, 1 AVX2+FMA+F16C, 2 AVX-512) under a
// matching `#pragma GCC target`. Everything here is plain C++ that the
// vectorizer turns into the level's vector code; only the float16
// conversions use intrinsics. Every level performs the same operations in
// the same order (fixed 128-byte lane sets for sums and products, no FMA
// contraction), so every level gives the same bits.
//
// Conventions: C is the compute type (float for float16/bfloat16/float32,
// double for float64); rows may be strided (`s` elements apart).

typedef uint16_t alias_u16 __attribute__((may_alias));
typedef uint32_t alias_u32 __attribute__((may_alias));
typedef uint64_t alias_u64 __attribute__((may_alias));

// Elements handled per step when a row is converted into a compute buffer.
constexpr int64_t kBlock = 2048;

// --- conversions between storage and compute types ------------------------------

inline void to_compute(const float* x, int64_t s, int64_t n, float* d) {
  if (s == 1) {
    std::memcpy(d, x, static_cast<size_t>(n) * sizeof(float));
    return;
  }
  for (int64_t i = 0; i < n; ++i) d[i] = x[i * s];
}

inline void to_compute(const double* x, int64_t s, int64_t n, double* d) {
  if (s == 1) {
    std::memcpy(d, x, static_cast<size_t>(n) * sizeof(double));
    return;
  }
  for (int64_t i = 0; i < n; ++i) d[i] = x[i * s];
}

// float16 bits to float32 bits, exactly (normals, subnormals, inf, NaN
// payloads); branch-free so that it vectorizes.
inline uint32_t half_to_float_bits(uint32_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  const uint32_t em = h & 0x7fffu;
  // A normal half: rebias the exponent (+112). A subnormal half m * 2^-24:
  // 2^-14 * (1 + m/1024) - 2^-14 computed in float32, exact.
  const uint32_t normal = (em << 13) + (112u << 23);
  float sub;
  const uint32_t sub_bits = (em << 13) | (113u << 23);
  std::memcpy(&sub, &sub_bits, 4);
  sub -= 6.103515625e-05f;  // 2^-14
  uint32_t sub_res;
  std::memcpy(&sub_res, &sub, 4);
  uint32_t r = em < 0x0400u ? sub_res : normal;
  r = em >= 0x7c00u ? (0x7f800000u | (em << 13)) : r;
  return r | sign;
}

inline void to_compute(const float16_t* x, int64_t s, int64_t n, float* d) {
  int64_t i = 0;
#if CD_ISA_LEVEL >= 2
  if (s == 1) {
    for (; i + 16 <= n; i += 16) {
      _mm512_storeu_ps(d + i, _mm512_maskz_cvtph_ps(static_cast<__mmask16>(0xffff), _mm256_loadu_si256(
                                  reinterpret_cast<const __m256i*>(x + i))));
    }
  }
#elif CD_ISA_LEVEL >= 1
  if (s == 1) {
    for (; i + 8 <= n; i += 8) {
      _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128(
                                  reinterpret_cast<const __m128i*>(x + i))));
    }
  }
#endif
  const alias_u16* xb = reinterpret_cast<const alias_u16*>(x);
  alias_u32* db = reinterpret_cast<alias_u32*>(d);
  if (s == 1) {
#pragma omp simd
    for (int64_t j = i; j < n; ++j) db[j] = half_to_float_bits(xb[j]);
  } else {
    for (int64_t j = i; j < n; ++j) db[j] = half_to_float_bits(xb[j * s]);
  }
}

inline void to_compute(const bfloat16_t* x, int64_t s, int64_t n, float* d) {
  const alias_u16* xb = reinterpret_cast<const alias_u16*>(x);
  alias_u32* db = reinterpret_cast<alias_u32*>(d);
  if (s == 1) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) db[i] = static_cast<uint32_t>(xb[i]) << 16;
  } else {
    for (int64_t i = 0; i < n; ++i) db[i] = static_cast<uint32_t>(xb[i * s]) << 16;
  }
}

// Integers compute in their own type.
template <class T>
inline std::enable_if_t<std::is_integral_v<T>> to_compute(const T* x, int64_t s, int64_t n, T* d) {
  if (s == 1) {
    std::memcpy(d, x, static_cast<size_t>(n) * sizeof(T));
    return;
  }
  for (int64_t i = 0; i < n; ++i) d[i] = x[i * s];
}

template <class T>
inline std::enable_if_t<std::is_integral_v<T>> from_compute(const T* c, int64_t n, T* d) {
  std::memcpy(d, c, static_cast<size_t>(n) * sizeof(T));
}

inline void from_compute(const float* c, int64_t n, float* d) {
  std::memcpy(d, c, static_cast<size_t>(n) * sizeof(float));
}

inline void from_compute(const double* c, int64_t n, double* d) {
  std::memcpy(d, c, static_cast<size_t>(n) * sizeof(double));
}

inline void from_compute(const float* c, int64_t n, float16_t* d) {
  int64_t i = 0;
#if CD_ISA_LEVEL >= 2
  for (; i + 16 <= n; i += 16) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i),
                        _mm512_maskz_cvtps_ph(static_cast<__mmask16>(0xffff),
                                              _mm512_loadu_ps(c + i),
                                              _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
#elif CD_ISA_LEVEL >= 1
  for (; i + 8 <= n; i += 8) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(c + i),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
#endif
  for (; i < n; ++i) d[i] = static_cast<float16_t>(c[i]);
}

inline void from_compute(const float* c, int64_t n, bfloat16_t* d) {
  const alias_u32* cb = reinterpret_cast<const alias_u32*>(c);
  alias_u16* db = reinterpret_cast<alias_u16*>(d);
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t u = cb[i];
    const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    const uint32_t quiet = (u >> 16) | 0x40u;
    db[i] = static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? quiet : rounded);
  }
}

// One value in compute type to storage type (round once).
template <class T, class C> inline T store_one(C v) {
  if constexpr (std::is_same_v<T, bfloat16_t>) {
    float f = static_cast<float>(v);
    bfloat16_t r;
    from_compute(&f, 1, &r);
    return r;
  } else {
    return static_cast<T>(v);
  }
}

// --- sums ---------------------------------------------------------------------------

// Native vector width of this level, in bytes.
constexpr int kVecBytes = CD_ISA_LEVEL >= 2 ? 64 : CD_ISA_LEVEL == 1 ? 32 : 16;

// Block sums keep 128 bytes of lanes (32 floats, 16 doubles) in kVecBytes
// vectors (2 at AVX-512, 4 at AVX2, 8 at SSE2): lane j sums the elements
// i == j (mod lanes), the tail goes into the lanes in order, and the lanes
// combine as a tree. The order of operations is thus the same at every
// level, and so are the results, bit for bit (the kernel files build with
// -ffp-contract=off: no FMA contraction at any level).
template <class C> struct Lanes {
  static constexpr int kLanes = 128 / sizeof(C);
  static constexpr int kWidth = kVecBytes / sizeof(C);
  static constexpr int kVectors = kLanes / kWidth;
};

template <class C> inline C tree(C* lanes) {
  for (int w = Lanes<C>::kLanes / 2; w > 0; w /= 2) {
    for (int j = 0; j < w; ++j) lanes[j] += lanes[j + w];
  }
  return lanes[0];
}

// Sum of n (up to a few thousand) contiguous values. The lanes start at -0,
// the identity that keeps a sum of -0s at -0 (as NumPy, which starts from
// the first element, has it).
template <class C> inline C block_sum(const C* x, int64_t n) {
  typedef C V __attribute__((vector_size(kVecBytes)));
  using LN = Lanes<C>;
  V a[LN::kVectors];
  for (int k = 0; k < LN::kVectors; ++k) a[k] = -V{};
  int64_t i = 0;
  for (; i + LN::kLanes <= n; i += LN::kLanes) {
    for (int k = 0; k < LN::kVectors; ++k) {
      V v;
      std::memcpy(&v, x + i + k * LN::kWidth, sizeof(V));
      a[k] += v;
    }
  }
  C lanes[LN::kLanes];
  std::memcpy(lanes, a, sizeof(lanes));
  for (int j = 0; i + j < n; ++j) lanes[j] += x[i + j];
  return tree(lanes);
}

// Sum of (x - mean)^2, the same way.
template <class C> inline C block_sum_sq_dev(const C* x, int64_t n, C mean) {
  typedef C V __attribute__((vector_size(kVecBytes)));
  using LN = Lanes<C>;
  V a[LN::kVectors] = {};
  int64_t i = 0;
  for (; i + LN::kLanes <= n; i += LN::kLanes) {
    for (int k = 0; k < LN::kVectors; ++k) {
      V v;
      std::memcpy(&v, x + i + k * LN::kWidth, sizeof(V));
      v -= mean;
      a[k] += v * v;
    }
  }
  C lanes[LN::kLanes];
  std::memcpy(lanes, a, sizeof(lanes));
  for (int j = 0; i + j < n; ++j) lanes[j] += (x[i + j] - mean) * (x[i + j] - mean);
  return tree(lanes);
}

// Product of n (up to a few thousand) contiguous values, with the lanes of
// block_sum.
template <class C> inline C block_prod(const C* x, int64_t n) {
  typedef C V __attribute__((vector_size(kVecBytes)));
  using LN = Lanes<C>;
  V a[LN::kVectors];
  for (int k = 0; k < LN::kVectors; ++k) a[k] = V{} + C(1);
  int64_t i = 0;
  for (; i + LN::kLanes <= n; i += LN::kLanes) {
    for (int k = 0; k < LN::kVectors; ++k) {
      V v;
      std::memcpy(&v, x + i + k * LN::kWidth, sizeof(V));
      a[k] *= v;
    }
  }
  C lanes[LN::kLanes];
  std::memcpy(lanes, a, sizeof(lanes));
  for (int j = 0; i + j < n; ++j) lanes[j] *= x[i + j];
  for (int w = LN::kLanes / 2; w > 0; w /= 2) {
    for (int j = 0; j < w; ++j) lanes[j] *= lanes[j + w];
  }
  return lanes[0];
}

// Pairwise combination of per-block results f(b), b in [b0, b1): the tree
// splits every range at b0 + (b1 - b0) / 2. Work split over threads cuts
// along the same tree (tree_cut), so results do not depend on the thread
// count either.
template <class A, class F, class Op> inline A pairwise(int64_t b0, int64_t b1, F& f, Op& op) {
  if (b1 - b0 == 1) return f(b0);
  const int64_t mid = b0 + (b1 - b0) / 2;
  const A left = pairwise<A>(b0, mid, f, op);
  return op(left, pairwise<A>(mid, b1, f, op));
}

template <class A, class F> inline A pairwise(int64_t b0, int64_t b1, F& f) {
  auto add = [](A a, A b) { return a + b; };
  return pairwise<A>(b0, b1, f, add);
}

// Leaf `c` of `parts` (a power of two) of the pairwise tree over [lo, hi).
inline void tree_cut(int64_t lo, int64_t hi, int64_t parts, int64_t c, int64_t* begin,
                     int64_t* end) {
  while (parts > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    parts /= 2;
    if (c < parts) {
      hi = mid;
    } else {
      lo = mid;
      c -= parts;
    }
  }
  *begin = lo;
  *end = hi;
}

// The smallest power of two >= n (n >= 1).
inline int64_t pow2_ceil(int64_t n) {
  int64_t p = 1;
  while (p < n) p *= 2;
  return p;
}

// The largest power of two <= n (n >= 1).
inline int64_t pow2_floor(int64_t n) {
  int64_t p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

// Sum of a contiguous compute-type row: blocks of kBlock, combined pairwise.
template <class C> inline C sum_contiguous(const C* x, int64_t n) {
  if (n <= kBlock) return block_sum(x, n);  // n == 0 included
  auto f = [&](int64_t b) {
    const int64_t begin = b * kBlock;
    return block_sum(x + begin, std::min(kBlock, n - begin));
  };
  return pairwise<C>(0, (n + kBlock - 1) / kBlock, f);
}

// Sum of (x - mean)^2 over a contiguous row, the same way.
template <class C> inline C sum_sq_dev_contiguous(const C* x, int64_t n, C mean) {
  if (n <= kBlock) return block_sum_sq_dev(x, n, mean);  // n == 0 included
  auto f = [&](int64_t b) {
    const int64_t begin = b * kBlock;
    return block_sum_sq_dev(x + begin, std::min(kBlock, n - begin), mean);
  };
  return pairwise<C>(0, (n + kBlock - 1) / kBlock, f);
}

// Sum of any floating row (strided, 16-bit): converted block by block.
template <class T> inline compute_t<T> sum_row(const T* x, int64_t s, int64_t n) {
  using C = compute_t<T>;
  if constexpr (std::is_same_v<T, C>) {
    if (s == 1) return sum_contiguous(x, n);
  }
  C buf[kBlock];
  auto f = [&](int64_t b) {
    const int64_t begin = b * kBlock;
    const int64_t len = std::min(kBlock, n - begin);
    to_compute(x + begin * s, s, len, buf);
    return block_sum(buf, len);
  };
  return n > 0 ? pairwise<C>(0, (n + kBlock - 1) / kBlock, f) : C(0);
}

// --- exp ----------------------------------------------------------------------------

// e^x in float32, branch-free and vectorizable, within 2 ulp (Cody-Waite
// reduction, a degree-6 polynomial, 2^n applied in two halves so that
// subnormal results come out right). exp(-inf) = 0, exp(inf) = inf,
// exp(NaN) = NaN.
inline float exp_f32(float x) {
  const float hi = 88.72283935546875f, lo = -103.972084045410f;
  float xc = x >= lo ? x : lo;  // NaN too, so that the int conversion below is defined
  xc = xc > hi ? hi : xc;
  const float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // round to nearest
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  const int32_t ni = static_cast<int32_t>(n);
  const int32_t n1 = ni >> 1, n2 = ni - n1;
  const uint32_t b1 = static_cast<uint32_t>(n1 + 127) << 23;
  const uint32_t b2 = static_cast<uint32_t>(n2 + 127) << 23;
  float s1, s2;
  std::memcpy(&s1, &b1, 4);
  std::memcpy(&s2, &b2, 4);
  const float res = (p * s1) * s2;
  return x > hi ? std::numeric_limits<float>::infinity() : x == x ? res : x;
}

// exp_f32 on a native vector of floats (the same operations lane by lane,
// written with vector types so that the clamps become plain selects).
typedef float vfloat __attribute__((vector_size(kVecBytes)));
typedef int32_t vint __attribute__((vector_size(kVecBytes)));
constexpr int kFloatLanes = kVecBytes / 4;

inline vfloat exp_vec(vfloat x) {
  const vfloat hi = vfloat{} + 88.72283935546875f, lo = vfloat{} + -103.972084045410f;
  vfloat xc = x >= lo ? x : lo;
  xc = xc > hi ? hi : xc;
  const vfloat n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  vfloat r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  vfloat p = vfloat{} + 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  const vint ni = __builtin_convertvector(n, vint);
  const vint n1 = ni >> 1, n2 = ni - n1;
  const vint b1 = (n1 + 127) << 23, b2 = (n2 + 127) << 23;
  vfloat s1, s2;
  std::memcpy(&s1, &b1, sizeof(s1));
  std::memcpy(&s2, &b2, sizeof(s2));
  const vfloat res = (p * s1) * s2;
  return x > hi ? vfloat{} + std::numeric_limits<float>::infinity() : x == x ? res : x;
}

// y[i] = exp(x[i] - m), i < n (y may be x).
inline void exp_shifted(const float* x, float m, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + kFloatLanes <= n; i += kFloatLanes) {
    vfloat v;
    std::memcpy(&v, x + i, sizeof(v));
    const vfloat e = exp_vec(v - m);
    std::memcpy(y + i, &e, sizeof(e));
  }
  for (; i < n; ++i) y[i] = exp_f32(x[i] - m);
}

inline void exp_shifted(const double* x, double m, double* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::exp(x[i] - m);
}

inline float exp_c(float x) { return exp_f32(x); }
inline double exp_c(double x) { return std::exp(x); }

// Max of a contiguous compute row, ignoring NaN (-inf if all are NaN); NaN
// then propagates through exp(x - max).
template <class C> inline C max_contiguous(const C* x, int64_t n) {
  C m = -std::numeric_limits<C>::infinity();
#pragma omp simd reduction(max : m)
  for (int64_t i = 0; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}
