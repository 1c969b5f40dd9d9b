// cast: every dtype to every dtype (the `to` attribute names the output's).
//
//  - floats to integers truncate toward zero; to 8-, 16- and 32-bit
//    integers through int32 (so -1.0 -> uint8 is 255, as in NumPy); NaN and
//    out-of-range values are undefined by the opset (x86 gives INT_MIN);
//  - anything to bool is x != 0 (NaN is true), bool to anything is 0 or 1;
//  - integers wrap modulo 2^bits;
//  - to float16, bfloat16 and float32: rounded once, to nearest even
//    (integers and float64 reach the 16-bit floats through a float rounded
//    to odd, which keeps the rounding single; ml_dtypes and PyTorch round
//    twice through float32 there). int64 beyond 2^53 first rounds to double.
// float32 <-> float16 on contiguous rows use the F16C instructions when
// the AVX2 or AVX-512 build runs (the compiler does not vectorize _Float16).
#include "elementwise.h"

#if CD_HAVE_X86_TARGETS
#include <immintrin.h>
#endif

namespace chipdock_cpu {
namespace {

using namespace elementwise;

template <class Out, class In> struct Cast {
  explicit Cast(const Params& /*p*/) {}
  CD_EW_INLINE Out operator()(In x) const {
    if constexpr (std::is_same_v<Out, In>) {
      return x;
    } else if constexpr (std::is_same_v<Out, bool>) {
      if constexpr (is_floating_v<In>) {
        return load(x) != 0;
      } else {
        return x != 0;
      }
    } else if constexpr (std::is_same_v<In, bool>) {
      if constexpr (is_floating_v<Out>) {
        return store<Out>(x ? 1.0f : 0.0f);
      } else {
        return static_cast<Out>(x ? 1 : 0);
      }
    } else if constexpr (is_floating_v<In> && is_floating_v<Out>) {
      return store<Out>(load(x));
    } else if constexpr (is_floating_v<In>) {  // to an integer
      if constexpr (sizeof(Out) == 8) {
        return static_cast<Out>(load(x));
      } else {
        return static_cast<Out>(static_cast<int32_t>(load(x)));
      }
    } else if constexpr (std::is_same_v<Out, double>) {  // integers from here on
      return static_cast<double>(x);
    } else if constexpr (std::is_same_v<Out, float>) {
      return static_cast<float>(x);
    } else if constexpr (is_floating_v<Out>) {  // the 16-bit floats: one rounding
      return store<Out>(static_cast<double>(x));
    } else {
      return static_cast<Out>(x);
    }
  }
};

#if CD_HAVE_X86_TARGETS
// The F16C rows: vector conversion of the contiguous run, the generic body
// for the tail and for strided rows. (The maskz forms of the AVX-512
// intrinsics: GCC 12 warns about the undefined vector inside the plain ones.)
CD_TARGET_AVX2 void f32_to_f16_avx2(char* const* p, const int64_t* s, int64_t n,
                                    const Params& prm) {
  int64_t i = 0;
  if (s[0] == 2 && s[1] == 4) {
    auto* out = reinterpret_cast<__m128i*>(p[0]);
    const auto* in = reinterpret_cast<const float*>(p[1]);
    for (; i + 8 <= n; i += 8) {
      _mm_storeu_si128(out + i / 8, _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT));
    }
  }
  char* rest[2] = {p[0] + i * s[0], p[1] + i * s[1]};
  unary_body<Cast<half_t, float>, half_t, float>(rest, s, n - i, prm);
}

CD_TARGET_AVX512 void f32_to_f16_avx512(char* const* p, const int64_t* s, int64_t n,
                                        const Params& prm) {
  int64_t i = 0;
  if (s[0] == 2 && s[1] == 4) {
    auto* out = reinterpret_cast<__m256i*>(p[0]);
    const auto* in = reinterpret_cast<const float*>(p[1]);
    for (; i + 16 <= n; i += 16) {
      _mm256_storeu_si256(out + i / 16, _mm512_maskz_cvtps_ph(0xffff, _mm512_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT));
    }
  }
  char* rest[2] = {p[0] + i * s[0], p[1] + i * s[1]};
  unary_body<Cast<half_t, float>, half_t, float>(rest, s, n - i, prm);
}

CD_TARGET_AVX2 void f16_to_f32_avx2(char* const* p, const int64_t* s, int64_t n,
                                    const Params& prm) {
  int64_t i = 0;
  if (s[0] == 4 && s[1] == 2) {
    auto* out = reinterpret_cast<float*>(p[0]);
    const auto* in = reinterpret_cast<const __m128i*>(p[1]);
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(in + i / 8)));
  }
  char* rest[2] = {p[0] + i * s[0], p[1] + i * s[1]};
  unary_body<Cast<float, half_t>, float, half_t>(rest, s, n - i, prm);
}

CD_TARGET_AVX512 void f16_to_f32_avx512(char* const* p, const int64_t* s, int64_t n,
                                        const Params& prm) {
  int64_t i = 0;
  if (s[0] == 4 && s[1] == 2) {
    auto* out = reinterpret_cast<float*>(p[0]);
    const auto* in = reinterpret_cast<const __m256i*>(p[1]);
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(out + i, _mm512_maskz_cvtph_ps(0xffff, _mm256_loadu_si256(in + i / 16)));
  }
  char* rest[2] = {p[0] + i * s[0], p[1] + i * s[1]};
  unary_body<Cast<float, half_t>, float, half_t>(rest, s, n - i, prm);
}
#endif

// The F16C row for (in -> out), or NULL where the generic one does.
RowFn f16c_row(cd_dtype_t in, cd_dtype_t out) {
#if CD_HAVE_X86_TARGETS
  const Isa isa = kernel_isa();
  if (isa == Isa::baseline) return nullptr;
  if (in == CD_DTYPE_FLOAT32 && out == CD_DTYPE_FLOAT16) {
    return isa == Isa::avx2 ? f32_to_f16_avx2 : f32_to_f16_avx512;
  }
  if (in == CD_DTYPE_FLOAT16 && out == CD_DTYPE_FLOAT32) {
    return isa == Isa::avx2 ? f16_to_f32_avx2 : f16_to_f32_avx512;
  }
#else
  (void)in;
  (void)out;
#endif
  return nullptr;
}

Plan cast_plan(const cd_kernel_context* ctx, const cd_dtype_t* dtypes) {
  const cd_attribute* to = find_attribute(ctx, "to");
  if (to != nullptr && (to->type != CD_ATTR_INT || to->value.i != dtypes[1])) {
    fail(CD_STATUS_INVALID_ARGUMENT, "attribute 'to' (%lld) is not the output's dtype %s",
         to->type == CD_ATTR_INT ? static_cast<long long>(to->value.i) : -1LL,
         dtype_name(dtypes[1]));
  }
  Plan plan;
  plan.row = f16c_row(dtypes[0], dtypes[1]);
  if (plan.row != nullptr) return plan;
  dispatch(dtypes[0], [&](auto in_tag) {
    using In = decltype(in_tag);
    dispatch(dtypes[1], [&](auto out_tag) {
      using Out = decltype(out_tag);
      plan.row = unary_row<Cast<Out, In>, Out, In>();
    });
  });
  return plan;
}

CD_EW_KERNEL(cast, 1, cast_plan)

}  // namespace

void register_elementwise_cast(cd_kernel_registry* registry) {
  for (cd_dtype_t in : kAll) {
    for (cd_dtype_t out : kAll) {
      const cd_dtype_t sig[] = {in, out};
      register_kernel(registry, "cast", sig, 2, cast_kernel);
    }
  }
}

}  // namespace chipdock_cpu
