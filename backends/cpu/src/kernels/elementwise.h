// The loop machinery every elementwise kernel shares (kernels/elementwise_*.cpp).
//
// An elementwise kernel is a *row function* per op and dtype signature: it
// computes `n` results from operands that advance by fixed byte strides
// (ptrs[0] is the output, ptrs[1..] the inputs). Everything else is common:
//
//  - make_loop: all operands have the output's shape (broadcast inputs come
//    expanded, with stride 0); size-1 dims are dropped and neighbouring dims
//    that are contiguous with each other in *every* operand are merged, so a
//    contiguous op is one row, a transposed input two nested loops.
//  - run: the rows are split over the OpenMP threads above `grain` elements
//    (each thread starts mid-row where its share begins); below it the loop
//    runs inline on the stream's worker.
//  - row functions come in three builds (isa.h) from one body: the body is
//    force-inlined into a baseline, an AVX2 and an AVX-512 function, and the
//    vectorizer does the rest. Each body has a fast path for contiguous
//    operands, one for a broadcast scalar (stride 0), and a strided loop.
//
// Adding an op is a functor `Out operator()(In...) const` constructible from
// Params, a pick function that maps the call's dtypes to a row function,
// and a registration line (see elementwise_unary.cpp).
#ifndef CHIPDOCK_CPU_KERNELS_ELEMENTWISE_H_
#define CHIPDOCK_CPU_KERNELS_ELEMENTWISE_H_

#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "chipdock/support/attributes.h"
#include "chipdock/cd_kernel.h"
#include "../error.h"
#include "../memory.h"
#include "isa.h"
#include "kernels.h"
#include "numeric.h"
#include "sleef_map.h"
#include "tensor.h"

namespace chipdock_cpu {
namespace elementwise {

constexpr int kMaxOperands = 4;  // where: 3 inputs and the output

// float16 as elementwise rows hold it: the bits, like bfloat16_t, because
// GCC vectorizes loops over _Float16 arrays badly (see numeric.h).
struct half_t {
  uint16_t bits;
};

// Scalar attributes of an op, resolved before the work is enqueued.
struct Params {
  double a = 0.0;  // leaky_relu alpha; clip min
  double b = 0.0;  // clip max
};

// One row: n elements; ptrs[k] and strides[k] (bytes) for operand k, the
// output first. Runs on a stream worker or an OpenMP thread.
using RowFn = void (*)(char* const* ptrs, const int64_t* strides, int64_t n, const Params& p);

// One dimension of a loop: its size and each operand's stride in bytes.
struct Dim {
  int64_t size;
  int64_t stride[kMaxOperands];
};

// The coalesced iteration space of one call. Small enough to travel to the
// stream's worker cheaply: up to kInlineDims dims live inline (coalescing
// rarely leaves more), the rest on the heap.
class Loop {
 public:
  static constexpr int32_t kInlineDims = 6;

  int32_t operands = 0;       // output + inputs
  int32_t ndim = 0;           // 0: a single element
  int64_t numel = 1;
  char* base[kMaxOperands];   // host address of element (0, ..., 0) per operand

  Dim* dims() { return heap_.empty() ? inline_ : heap_.data(); }  // outermost first
  const Dim* dims() const { return heap_.empty() ? inline_ : heap_.data(); }
  void reserve(size_t n) {
    if (n > static_cast<size_t>(kInlineDims)) heap_.resize(n);
  }

 private:
  Dim inline_[kInlineDims];
  std::vector<Dim> heap_;
};

// The loop over `ops` (ops[0] the output). Throws INVALID_ARGUMENT unless
// every operand has the output's shape and the output is writable (no zero
// stride on a dim of size > 1).
Loop make_loop(const ViewRef* const* ops, int32_t count);

// Runs `row` over the whole loop, on OpenMP threads when numel > grain.
void run(const Loop& loop, RowFn row, const Params& params, int64_t grain);

// Grains: elements below which a loop is not worth waking a second thread.
constexpr int64_t kGrainCheap = 32768;  // a load, an add, a store
constexpr int64_t kGrainMath = 2048;    // exp, erf, pow, ...

// What a kernel's pick function returns: the row function for the call's
// dtypes and attributes (NULL: the dtypes are not supported), and its grain.
struct Plan {
  RowFn row = nullptr;
  Params params;
  int64_t grain = kGrainCheap;
};

// Validates `ctx` (one output, `num_inputs` inputs, same shapes), resolves
// its views, asks `pick` for the plan (dtypes: inputs then output), and
// enqueues the loop on ctx->stream under `label` (static storage).
// Throws INVALID_ARGUMENT for anything the core should not have sent.
using PickFn = Plan (*)(const cd_kernel_context* ctx, const cd_dtype_t* dtypes);
void enqueue(const cd_kernel_context* ctx, const char* label, int32_t num_inputs, PickFn pick);

// Attributes through the backend kit's typed readers (the dispatcher fills
// defaults; raw launches may not, hence the fallbacks).
using chipdock::support::find_attribute;
using chipdock::support::float_attribute;

// --- dtype groups of the opset (device_api/opset/opset.yaml) ------------------------------
constexpr cd_dtype_t kFloat[] = {CD_DTYPE_FLOAT32, CD_DTYPE_FLOAT16, CD_DTYPE_BFLOAT16,
                                 CD_DTYPE_FLOAT64};
constexpr cd_dtype_t kNumeric[] = {CD_DTYPE_FLOAT32, CD_DTYPE_FLOAT16, CD_DTYPE_BFLOAT16,
                                   CD_DTYPE_FLOAT64, CD_DTYPE_INT8,    CD_DTYPE_INT16,
                                   CD_DTYPE_INT32,   CD_DTYPE_INT64,   CD_DTYPE_UINT8};
constexpr cd_dtype_t kSignedNumeric[] = {CD_DTYPE_FLOAT32, CD_DTYPE_FLOAT16, CD_DTYPE_BFLOAT16,
                                         CD_DTYPE_FLOAT64, CD_DTYPE_INT8,    CD_DTYPE_INT16,
                                         CD_DTYPE_INT32,   CD_DTYPE_INT64};
constexpr cd_dtype_t kAll[] = {CD_DTYPE_FLOAT32, CD_DTYPE_FLOAT16, CD_DTYPE_BFLOAT16,
                               CD_DTYPE_FLOAT64, CD_DTYPE_INT8,    CD_DTYPE_INT16,
                               CD_DTYPE_INT32,   CD_DTYPE_INT64,   CD_DTYPE_UINT8,
                               CD_DTYPE_BOOL};

// Registers `fn` for `op` with the signature (T x arity, out) for every T
// in `group`; `out` CD_DTYPE_INVALID means T itself.
template <size_t N>
void register_group(cd_kernel_registry* registry, const char* op, cd_kernel_fn fn,
                    const cd_dtype_t (&group)[N], int32_t arity,
                    cd_dtype_t out = CD_DTYPE_INVALID) {
  for (cd_dtype_t t : group) {
    cd_dtype_t sig[kMaxOperands] = {t, t, t, t};
    sig[arity] = out == CD_DTYPE_INVALID ? t : out;
    register_kernel(registry, op, sig, arity + 1, fn);
  }
}

// --- row functions -------------------------------------------------------------------------

#define CD_EW_INLINE CD_ALWAYS_INLINE  // row bodies and op functors (numeric.h)

template <class Op, class Out, class A>
CD_EW_INLINE void unary_main(const Op& op, char* const* p, const int64_t* s, int64_t n) {
  if (s[0] == sizeof(Out) && s[1] == sizeof(A)) {
    Out* __restrict out = reinterpret_cast<Out*>(p[0]);
    const A* __restrict a = reinterpret_cast<const A*>(p[1]);
    for (int64_t i = 0; i < n; ++i) out[i] = op(a[i]);
    return;
  }
  char* out = p[0];
  const char* a = p[1];
  for (int64_t i = 0; i < n; ++i, out += s[0], a += s[1]) {
    *reinterpret_cast<Out*>(out) = op(*reinterpret_cast<const A*>(a));
  }
}

// --- blocked rows: float32 math over staged buffers (SLEEF, sleef_map.h) ----------------
//
// An op with `static constexpr bool kBlocked = true` computes in float32 on
// a block of a row at a time: the rows stage up to kBlock inputs as float
// (contiguous or strided, float16/bfloat16 widened), pad them to a whole
// number of vectors, call `Op::block(x, n)` (unary; in place) or
// `Op::block(a, b, n)` / `Op::block_scalar(a, b0, n)` (binary, the latter
// when b is one broadcast value), and store the first results rounded to
// the output type. The block functions mix loops the compiler vectorizes
// with calls of SLEEF over the whole buffer.
template <class Op, class = void> struct is_blocked : std::false_type {};
template <class Op>
struct is_blocked<Op, std::void_t<decltype(Op::kBlocked)>> : std::bool_constant<Op::kBlocked> {};

constexpr int64_t kBlock = 256;  // floats per buffer: 1 KiB, in L1 with its siblings

// Loads n elements of A (stride s bytes) into x as float; pads x with zeros
// to a multiple of sleef::kPad, the count it returns.
template <class A>
CD_EW_INLINE int64_t stage(const char* p, int64_t s, int64_t n, float* __restrict x) {
  if (s == sizeof(A)) {
    const A* __restrict a = reinterpret_cast<const A*>(p);
    for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(load(a[i]));
  } else {
    for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(load(*reinterpret_cast<const A*>(p + i * s)));
  }
  const int64_t padded = (n + sleef::kPad - 1) / sleef::kPad * sleef::kPad;
  for (int64_t i = n; i < padded; ++i) x[i] = 0.0f;
  return padded;
}

template <class Out>
CD_EW_INLINE void unstage(const float* __restrict y, char* p, int64_t s, int64_t n) {
  if (s == sizeof(Out)) {
    Out* __restrict out = reinterpret_cast<Out*>(p);
    for (int64_t i = 0; i < n; ++i) out[i] = store<Out>(y[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) *reinterpret_cast<Out*>(p + i * s) = store<Out>(y[i]);
  }
}

template <class Op, class Out, class A>
CD_EW_INLINE void blocked_unary(char* const* p, const int64_t* s, int64_t n) {
  alignas(64) float x[kBlock];
  for (int64_t i = 0; i < n; i += kBlock) {
    const int64_t m = n - i < kBlock ? n - i : kBlock;
    const int64_t padded = stage<A>(p[1] + i * s[1], s[1], m, x);
    Op::block(x, padded);
    unstage<Out>(x, p[0] + i * s[0], s[0], m);
  }
}

template <class Op, class Out, class A, class B>
CD_EW_INLINE void blocked_binary(char* const* p, const int64_t* s, int64_t n) {
  alignas(64) float a[kBlock];
  alignas(64) float b[kBlock];
  const bool b_scalar = s[2] == 0;
  const float b0 = b_scalar ? static_cast<float>(load(*reinterpret_cast<const B*>(p[2]))) : 0.0f;
  for (int64_t i = 0; i < n; i += kBlock) {
    const int64_t m = n - i < kBlock ? n - i : kBlock;
    const int64_t padded = stage<A>(p[1] + i * s[1], s[1], m, a);
    if (b_scalar) {
      Op::block_scalar(a, b0, padded);
    } else {
      stage<B>(p[2] + i * s[2], s[2], m, b);
      Op::block(a, b, padded);
    }
    unstage<Out>(a, p[0] + i * s[0], s[0], m);
  }
}

template <class Op, class Out, class A>
CD_EW_INLINE void unary_elementwise(char* const* p, const int64_t* s, int64_t n, const Params& prm) {
  const Op op(prm);
  unary_main<Op, Out, A>(op, p, s, n);
}

template <class Op, class Out, class A, class B>
CD_EW_INLINE void binary_main(const Op& op, char* const* p, const int64_t* s, int64_t n) {
  if (s[0] == sizeof(Out)) {
    Out* __restrict out = reinterpret_cast<Out*>(p[0]);
    const A* __restrict a = reinterpret_cast<const A*>(p[1]);
    const B* __restrict b = reinterpret_cast<const B*>(p[2]);
    if (s[1] == sizeof(A) && s[2] == sizeof(B)) {
      for (int64_t i = 0; i < n; ++i) out[i] = op(a[i], b[i]);
      return;
    }
    if (s[1] == sizeof(A) && s[2] == 0) {
      const B bv = *b;
      for (int64_t i = 0; i < n; ++i) out[i] = op(a[i], bv);
      return;
    }
    if (s[1] == 0 && s[2] == sizeof(B)) {
      const A av = *a;
      for (int64_t i = 0; i < n; ++i) out[i] = op(av, b[i]);
      return;
    }
  }
  char* out = p[0];
  const char* a = p[1];
  const char* b = p[2];
  for (int64_t i = 0; i < n; ++i, out += s[0], a += s[1], b += s[2]) {
    *reinterpret_cast<Out*>(out) =
        op(*reinterpret_cast<const A*>(a), *reinterpret_cast<const B*>(b));
  }
}

template <class Op, class Out, class A, class B>
CD_EW_INLINE void binary_elementwise(char* const* p, const int64_t* s, int64_t n, const Params& prm) {
  const Op op(prm);
  binary_main<Op, Out, A, B>(op, p, s, n);
}

// A row's body: the blocked one for blocked ops, else element by element.
template <class Op, class Out, class A>
CD_EW_INLINE void unary_body(char* const* p, const int64_t* s, int64_t n, const Params& prm) {
  if constexpr (is_blocked<Op>::value) {
    blocked_unary<Op, Out, A>(p, s, n);
  } else {
    unary_elementwise<Op, Out, A>(p, s, n, prm);
  }
}

template <class Op, class Out, class A, class B>
CD_EW_INLINE void binary_body(char* const* p, const int64_t* s, int64_t n, const Params& prm) {
  if constexpr (is_blocked<Op>::value) {
    blocked_binary<Op, Out, A, B>(p, s, n);
  } else {
    binary_elementwise<Op, Out, A, B>(p, s, n, prm);
  }
}

template <class Op, class Out, class A, class B, class C>
CD_EW_INLINE void ternary_body(char* const* p, const int64_t* s, int64_t n, const Params& prm) {
  const Op op(prm);
  if (s[0] == sizeof(Out) && s[1] == sizeof(A) && s[2] == sizeof(B) && s[3] == sizeof(C)) {
    Out* __restrict out = reinterpret_cast<Out*>(p[0]);
    const A* __restrict a = reinterpret_cast<const A*>(p[1]);
    const B* __restrict b = reinterpret_cast<const B*>(p[2]);
    const C* __restrict c = reinterpret_cast<const C*>(p[3]);
    for (int64_t i = 0; i < n; ++i) out[i] = op(a[i], b[i], c[i]);
    return;
  }
  char* out = p[0];
  const char* a = p[1];
  const char* b = p[2];
  const char* c = p[3];
  for (int64_t i = 0; i < n; ++i, out += s[0], a += s[1], b += s[2], c += s[3]) {
    *reinterpret_cast<Out*>(out) = op(*reinterpret_cast<const A*>(a),
                                      *reinterpret_cast<const B*>(b),
                                      *reinterpret_cast<const C*>(c));
  }
}

// The three builds of a body, and the pick of one for this process.
#define CD_EW_ROW_BUILDS(NAME, BODY, ...)                                                     \
  template <class Op, __VA_ARGS__>                                                            \
  void NAME##_base(char* const* p, const int64_t* s, int64_t n, const Params& prm) {          \
    BODY(p, s, n, prm);                                                                       \
  }                                                                                           \
  template <class Op, __VA_ARGS__>                                                            \
  CD_TARGET_AVX2 void NAME##_avx2(char* const* p, const int64_t* s, int64_t n,                \
                                  const Params& prm) {                                        \
    BODY(p, s, n, prm);                                                                       \
  }                                                                                           \
  template <class Op, __VA_ARGS__>                                                            \
  CD_TARGET_AVX512 void NAME##_avx512(char* const* p, const int64_t* s, int64_t n,            \
                                      const Params& prm) {                                    \
    BODY(p, s, n, prm);                                                                       \
  }

CD_EW_ROW_BUILDS(unary_row, (unary_body<Op, Out, A>), class Out, class A)
CD_EW_ROW_BUILDS(binary_row, (binary_body<Op, Out, A, B>), class Out, class A, class B)
CD_EW_ROW_BUILDS(ternary_row, (ternary_body<Op, Out, A, B, C>), class Out, class A, class B,
                 class C)
#undef CD_EW_ROW_BUILDS

// The row function of `Op` over (inputs...) -> Out for this process's ISA.
template <class Op, class Out, class A>
RowFn unary_row() {
  switch (kernel_isa()) {
    case Isa::baseline: return &unary_row_base<Op, Out, A>;
    case Isa::avx2: return &unary_row_avx2<Op, Out, A>;
    default: return &unary_row_avx512<Op, Out, A>;
  }
}

template <class Op, class Out, class A, class B>
RowFn binary_row() {
  switch (kernel_isa()) {
    case Isa::baseline: return &binary_row_base<Op, Out, A, B>;
    case Isa::avx2: return &binary_row_avx2<Op, Out, A, B>;
    default: return &binary_row_avx512<Op, Out, A, B>;
  }
}

template <class Op, class Out, class A, class B, class C>
RowFn ternary_row() {
  switch (kernel_isa()) {
    case Isa::baseline: return &ternary_row_base<Op, Out, A, B, C>;
    case Isa::avx2: return &ternary_row_avx2<Op, Out, A, B, C>;
    default: return &ternary_row_avx512<Op, Out, A, B, C>;
  }
}

// --- picking rows and defining kernels ---------------------------------------------------

// Calls fn(T{}) with T the storage type elementwise rows use for `dtype`:
// numeric.h's, with half_t for float16.
template <class F> bool dispatch(cd_dtype_t dtype, F&& fn) {
  return dispatch_dtype_as<half_t>(dtype, std::forward<F>(fn));
}

// The plan for an op whose inputs and output all have one dtype (dtypes[0]
// .. dtypes[arity]); Op<T>::enabled says which dtypes it has.
template <template <class> class Op, int32_t Arity>
Plan same_dtype_plan(const cd_dtype_t* dtypes, int64_t grain, const Params& params = {}) {
  Plan plan;
  plan.grain = grain;
  plan.params = params;
  for (int32_t i = 1; i <= Arity; ++i) {
    if (dtypes[i] != dtypes[0]) return plan;
  }
  dispatch(dtypes[0], [&](auto tag) {
    using T = decltype(tag);
    if constexpr (Op<T>::enabled) {
      if constexpr (Arity == 1) plan.row = unary_row<Op<T>, T, T>();
      if constexpr (Arity == 2) plan.row = binary_row<Op<T>, T, T, T>();
    }
  });
  return plan;
}

// Defines `NAME_kernel`, the ABI entry of op NAME: checks, plans with PICK,
// enqueues. Errors read "NAME: <detail>".
#define CD_EW_KERNEL(NAME, ARITY, PICK)                                    \
  cd_error* NAME##_kernel(const cd_kernel_context* ctx) noexcept {         \
    return guard(#NAME, [ctx] { enqueue(ctx, #NAME, ARITY, PICK); });      \
  }

// --- arithmetic helpers ops share -------------------------------------------------------

// The opset's `numeric` and `signed_numeric` groups as type predicates (the
// `enabled` of ops declared over them).
template <class T> constexpr bool kIsNumeric = !std::is_same_v<T, bool>;
template <class T> constexpr bool kIsSignedNumeric =
    is_floating_v<T> || (std::is_integral_v<T> && std::is_signed_v<T>);

// Two's-complement wrap-around for integers (signed overflow is undefined in C++).
template <class T> CD_ALWAYS_INLINE T wrap_add(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
}
template <class T> CD_ALWAYS_INLINE T wrap_sub(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(static_cast<U>(a) - static_cast<U>(b)));
}
template <class T> CD_ALWAYS_INLINE T wrap_mul(T a, T b) {
  using U = std::make_unsigned_t<T>;
  // Through unsigned int at least: uint16 * uint16 would promote to (signed) int.
  using W = std::conditional_t<(sizeof(U) < sizeof(unsigned)), unsigned, U>;
  return static_cast<T>(static_cast<U>(static_cast<W>(static_cast<U>(a)) *
                                       static_cast<W>(static_cast<U>(b))));
}
template <class T> CD_ALWAYS_INLINE T wrap_neg(T a) { return wrap_sub(T{0}, a); }

template <class T> CD_ALWAYS_INLINE bool is_nan(T v) { return v != v; }

}  // namespace elementwise

// half_t in numeric.h's vocabulary: a float computed in float32.
template <> struct compute_type<elementwise::half_t> { using type = float; };
template <> constexpr bool is_floating_v<elementwise::half_t> = true;
template <> CD_ALWAYS_INLINE float load<elementwise::half_t>(const elementwise::half_t& v) {
  return f16_bits_to_float(v.bits);
}
template <> CD_ALWAYS_INLINE elementwise::half_t store<elementwise::half_t, float>(float v) {
  return {float_to_f16_bits(v)};
}
template <> CD_ALWAYS_INLINE elementwise::half_t store<elementwise::half_t, double>(double v) {
  return {float_to_f16_bits(round_to_odd(v))};
}

// --- one per kernel file (called by register_elementwise in elementwise.cpp) ---------------
void register_elementwise_unary(cd_kernel_registry* registry);    // elementwise_unary.cpp
void register_elementwise_binary(cd_kernel_registry* registry);   // elementwise_binary.cpp
void register_elementwise_compare(cd_kernel_registry* registry);  // elementwise_compare.cpp
void register_elementwise_cast(cd_kernel_registry* registry);     // elementwise_cast.cpp

}  // namespace chipdock_cpu

#endif  // CHIPDOCK_CPU_KERNELS_ELEMENTWISE_H_
