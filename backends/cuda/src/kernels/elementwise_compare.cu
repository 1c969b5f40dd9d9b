// eq, ne, lt, le, gt, ge (bool output; floats compare in their compute
// type, NaN compares unequal), logical_and, logical_or, and where.
#include "elementwise.cuh"

namespace chipdock_cuda {
namespace ew {
namespace {

#define CD_EW_COMPARE(Name, OP)                                                 \
  template <class T> struct Name : Sig<bool, T, T, char, 2> {                   \
    __device__ bool operator()(T a, T b) const { return load(a) OP load(b); }   \
  };
CD_EW_COMPARE(Eq, ==)
CD_EW_COMPARE(Ne, !=)
CD_EW_COMPARE(Lt, <)
CD_EW_COMPARE(Le, <=)
CD_EW_COMPARE(Gt, >)
CD_EW_COMPARE(Ge, >=)
#undef CD_EW_COMPARE

template <class T> struct LogicalAnd : Sig<bool, bool, bool, char, 2> {
  __device__ bool operator()(bool a, bool b) const { return a && b; }
};
template <class T> struct LogicalOr : Sig<bool, bool, bool, char, 2> {
  __device__ bool operator()(bool a, bool b) const { return a || b; }
};

template <class T> struct Where : Sig<T, bool, T, T, 3> {
  __device__ T operator()(bool c, T a, T b) const { return c ? a : b; }
};

// Dispatches on input `which` (where: the first value, not the condition).
template <template <class> class Op, uint32_t Mask, int Which = 0>
cd_error* kernel(const cd_kernel_context* ctx) noexcept {
  return guard(ctx != nullptr && ctx->op != nullptr ? ctx->op : "elementwise", [ctx] {
    require_non_null(ctx, "ctx");
    if (ctx->num_inputs <= Which || ctx->inputs == nullptr || ctx->inputs[Which] == nullptr) {
      fail(CD_STATUS_INVALID_ARGUMENT, "missing input %d", Which);
    }
    dispatch<Mask>(ctx->inputs[Which]->dtype, [ctx](auto tag) {
      launch(ctx, Op<typename decltype(tag)::type>{}, "launching an elementwise kernel");
    });
  });
}

}  // namespace

void register_compare(cd_kernel_registry* registry) {
  register_group(registry, "eq", kernel<Eq, kAllMask>, kAllMask, 2, true);
  register_group(registry, "ne", kernel<Ne, kAllMask>, kAllMask, 2, true);
  register_group(registry, "lt", kernel<Lt, kNumericMask>, kNumericMask, 2, true);
  register_group(registry, "le", kernel<Le, kNumericMask>, kNumericMask, 2, true);
  register_group(registry, "gt", kernel<Gt, kNumericMask>, kNumericMask, 2, true);
  register_group(registry, "ge", kernel<Ge, kNumericMask>, kNumericMask, 2, true);
  register_group(registry, "logical_and", kernel<LogicalAnd, kBoolMask>, kBoolMask, 2, true);
  register_group(registry, "logical_or", kernel<LogicalOr, kBoolMask>, kBoolMask, 2, true);
  register_group(registry, "where", kernel<Where, kAllMask, 1>, kAllMask, 3, false, true);
}

}  // namespace ew
}  // namespace chipdock_cuda
