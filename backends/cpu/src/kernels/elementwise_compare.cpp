// Comparisons (eq, ne, lt, le, gt, ge: T x T -> bool) and where
// (bool x T x T -> T). Floats compare as IEEE values (NaN is unequal to
// everything, -0 == +0); where copies the chosen element bit for bit.
#include "elementwise.h"

namespace chipdock_cpu {
namespace {

using namespace elementwise;

// Loads floats (float16/bfloat16 widen exactly) and leaves the rest alone.
template <class T> CD_EW_INLINE auto value(T v) {
  if constexpr (is_floating_v<T>) {
    return load(v);
  } else {
    return v;
  }
}

#define CD_EW_COMPARE(NAME, OP, WITH_BOOL)                                      \
  template <class T> struct NAME {                                              \
    static constexpr bool enabled = WITH_BOOL || !std::is_same_v<T, bool>;      \
    explicit NAME(const Params& /*p*/) {}                                       \
    CD_EW_INLINE bool operator()(T a, T b) const { return value(a) OP value(b); }            \
  };

CD_EW_COMPARE(Eq, ==, true)
CD_EW_COMPARE(Ne, !=, true)
CD_EW_COMPARE(Lt, <, false)
CD_EW_COMPARE(Le, <=, false)
CD_EW_COMPARE(Gt, >, false)
CD_EW_COMPARE(Ge, >=, false)
#undef CD_EW_COMPARE

template <template <class> class Op>
Plan compare_plan(const cd_kernel_context* /*ctx*/, const cd_dtype_t* dtypes) {
  Plan plan;
  if (dtypes[0] != dtypes[1] || dtypes[2] != CD_DTYPE_BOOL) return plan;
  dispatch(dtypes[0], [&](auto tag) {
    using T = decltype(tag);
    if constexpr (Op<T>::enabled) plan.row = binary_row<Op<T>, bool, T, T>();
  });
  return plan;
}

template <class T> struct Where {
  explicit Where(const Params& /*p*/) {}
  CD_EW_INLINE T operator()(bool c, T a, T b) const { return c ? a : b; }
};

Plan where_plan(const cd_kernel_context* /*ctx*/, const cd_dtype_t* dtypes) {
  Plan plan;
  if (dtypes[0] != CD_DTYPE_BOOL || dtypes[1] != dtypes[2] || dtypes[2] != dtypes[3]) {
    return plan;
  }
  // By size: where moves bits, so float32 and int32 share a row.
  switch (dtype_size(dtypes[1])) {
    case 1: plan.row = ternary_row<Where<uint8_t>, uint8_t, bool, uint8_t, uint8_t>(); break;
    case 2: plan.row = ternary_row<Where<uint16_t>, uint16_t, bool, uint16_t, uint16_t>(); break;
    case 4: plan.row = ternary_row<Where<uint32_t>, uint32_t, bool, uint32_t, uint32_t>(); break;
    case 8: plan.row = ternary_row<Where<uint64_t>, uint64_t, bool, uint64_t, uint64_t>(); break;
    default: break;
  }
  return plan;
}

CD_EW_KERNEL(eq, 2, compare_plan<Eq>)
CD_EW_KERNEL(ne, 2, compare_plan<Ne>)
CD_EW_KERNEL(lt, 2, compare_plan<Lt>)
CD_EW_KERNEL(le, 2, compare_plan<Le>)
CD_EW_KERNEL(gt, 2, compare_plan<Gt>)
CD_EW_KERNEL(ge, 2, compare_plan<Ge>)
CD_EW_KERNEL(where, 3, where_plan)

}  // namespace

void register_elementwise_compare(cd_kernel_registry* registry) {
  register_group(registry, "eq", eq_kernel, kAll, 2, CD_DTYPE_BOOL);
  register_group(registry, "ne", ne_kernel, kAll, 2, CD_DTYPE_BOOL);
  register_group(registry, "lt", lt_kernel, kNumeric, 2, CD_DTYPE_BOOL);
  register_group(registry, "le", le_kernel, kNumeric, 2, CD_DTYPE_BOOL);
  register_group(registry, "gt", gt_kernel, kNumeric, 2, CD_DTYPE_BOOL);
  register_group(registry, "ge", ge_kernel, kNumeric, 2, CD_DTYPE_BOOL);
  for (cd_dtype_t t : kAll) {
    const cd_dtype_t sig[] = {CD_DTYPE_BOOL, t, t, t};
    register_kernel(registry, "where", sig, 4, where_kernel);
  }
}

}  // namespace chipdock_cpu
