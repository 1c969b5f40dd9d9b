// add, sub, mul, div, pow, maximum, minimum over one dtype. Integers wrap
// (computed unsigned); integer division truncates toward zero and x / 0 is
// 0; the 16-bit floats compute in float32 and round once; maximum/minimum
// give NaN if either operand is NaN (numpy.maximum/minimum).
#include "elementwise.cuh"

namespace chipdock_cuda {
namespace ew {
namespace {

// Unsigned arithmetic at least 32 bits wide: wraps without overflow (no
// promotion to int).
template <class T> using U = std::conditional_t<sizeof(T) <= 4, uint32_t, uint64_t>;

#define CD_EW_BINARY(Name, FLOAT_EXPR, INT_EXPR)                                     \
  template <class T> struct Name : Sig<T, T, T, char, 2> {                           \
    __device__ T operator()(T a, T b) const {                                        \
      if constexpr (kIsFloat<T>) {                                                   \
        const auto x = load(a), y = load(b);                                         \
        return store<T>(FLOAT_EXPR);                                                 \
      } else {                                                                       \
        return INT_EXPR;                                                             \
      }                                                                              \
    }                                                                                \
  };

CD_EW_BINARY(Add, x + y, static_cast<T>(static_cast<U<T>>(static_cast<U<T>>(a) + static_cast<U<T>>(b))))
CD_EW_BINARY(Sub, x - y, static_cast<T>(static_cast<U<T>>(static_cast<U<T>>(a) - static_cast<U<T>>(b))))
CD_EW_BINARY(Mul, x * y, static_cast<T>(static_cast<U<T>>(static_cast<U<T>>(a) * static_cast<U<T>>(b))))
CD_EW_BINARY(Maximum, (x > y || x != x) ? x : y, a > b ? a : b)
CD_EW_BINARY(Minimum, (x < y || x != x) ? x : y, a < b ? a : b)
#undef CD_EW_BINARY

template <class T> struct Div : Sig<T, T, T, char, 2> {
  __device__ T operator()(T a, T b) const {
    if constexpr (kIsFloat<T>) {
      return store<T>(load(a) / load(b));
    } else {
      if (b == 0) return T{0};
      if constexpr (std::is_signed_v<T>) {
        if (b == T(-1)) return static_cast<T>(U<T>(0) - static_cast<U<T>>(a));  // wraps for the minimum
      }
      return static_cast<T>(a / b);
    }
  }
};

__device__ __forceinline__ float pow_(float x, float y) { return powf(x, y); }
__device__ __forceinline__ double pow_(double x, double y) { return pow(x, y); }

template <class T> struct Pow : Sig<T, T, T, char, 2> {
  __device__ T operator()(T a, T b) const { return store<T>(pow_(load(a), load(b))); }
};

template <template <class> class Op, uint32_t Mask> cd_error* kernel(const cd_kernel_context* ctx) noexcept {
  return guard(ctx != nullptr && ctx->op != nullptr ? ctx->op : "elementwise", [ctx] {
    require_non_null(ctx, "ctx");
    if (ctx->num_inputs < 1 || ctx->inputs == nullptr || ctx->inputs[0] == nullptr) {
      fail(CD_STATUS_INVALID_ARGUMENT, "missing input 0");
    }
    dispatch<Mask>(ctx->inputs[0]->dtype, [ctx](auto tag) {
      using T = typename decltype(tag)::type;
      launch(ctx, Op<T>{}, "launching an elementwise kernel");
    });
  });
}

}  // namespace

void register_binary(cd_kernel_registry* registry) {
  register_group(registry, "add", kernel<Add, kNumericMask>, kNumericMask, 2);
  register_group(registry, "sub", kernel<Sub, kNumericMask>, kNumericMask, 2);
  register_group(registry, "mul", kernel<Mul, kNumericMask>, kNumericMask, 2);
  register_group(registry, "div", kernel<Div, kNumericMask>, kNumericMask, 2);
  register_group(registry, "pow", kernel<Pow, kFloatMask>, kFloatMask, 2);
  register_group(registry, "maximum", kernel<Maximum, kNumericMask>, kNumericMask, 2);
  register_group(registry, "minimum", kernel<Minimum, kNumericMask>, kNumericMask, 2);
}

}  // namespace ew
}  // namespace chipdock_cuda
