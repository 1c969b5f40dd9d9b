// eq ne lt le gt ge (T x T -> bool) and where (bool x T x T -> T): one
// aclnn call each (aclnnEqTensor ... aclnnGeTensor, aclnnSWhere), every
// chipdock dtype on Atlas A2 (hicann/ops-math math/{equal,not_equal,less,
// less_equal,greater,greater_equal,select}/docs). Floats compare as IEEE
// values there as here (NaN unequal to everything, -0 == +0).
#include "elementwise.h"

namespace chipdock_npu {
namespace ew {
namespace {

CD_NPU_ACLNN(EqTensor);
CD_NPU_ACLNN(NeTensor);
CD_NPU_ACLNN(LtTensor);
CD_NPU_ACLNN(LeTensor);
CD_NPU_ACLNN(GtTensor);
CD_NPU_ACLNN(GeTensor);
CD_NPU_ACLNN(SWhere);

#define CD_NPU_EW_COMPARE(name, Op)                                                \
  cd_error* name##_kernel(const cd_kernel_context* ctx) {                          \
    return run_kernel(ctx, 2, [&](const Operands& o) { run_aclnn(ctx, Op, o.in(0), o.in(1), o.out()); }); \
  }
CD_NPU_EW_COMPARE(eq, EqTensor)
CD_NPU_EW_COMPARE(ne, NeTensor)
CD_NPU_EW_COMPARE(lt, LtTensor)
CD_NPU_EW_COMPARE(le, LeTensor)
CD_NPU_EW_COMPARE(gt, GtTensor)
CD_NPU_EW_COMPARE(ge, GeTensor)
#undef CD_NPU_EW_COMPARE

cd_error* where_kernel(const cd_kernel_context* ctx) {
  return run_kernel(ctx, 3, [&](const Operands& o) { run_aclnn(ctx, SWhere, o.in(0), o.in(1), o.in(2), o.out()); });
}

}  // namespace

void register_compare(Registrar& r) {
  if (r.resolve(EqTensor, "eq")) add_predicate(r, "eq", kAll, 2, eq_kernel);
  if (r.resolve(NeTensor, "ne")) add_predicate(r, "ne", kAll, 2, ne_kernel);
  if (r.resolve(LtTensor, "lt")) add_predicate(r, "lt", kNumeric, 2, lt_kernel);
  if (r.resolve(LeTensor, "le")) add_predicate(r, "le", kNumeric, 2, le_kernel);
  if (r.resolve(GtTensor, "gt")) add_predicate(r, "gt", kNumeric, 2, gt_kernel);
  if (r.resolve(GeTensor, "ge")) add_predicate(r, "ge", kNumeric, 2, ge_kernel);
  if (r.resolve(SWhere, "where")) {
    for (cd_dtype_t t : kAll) r.add("where", {CD_DTYPE_BOOL, t, t, t}, where_kernel);
  }
}

}  // namespace ew
}  // namespace chipdock_npu
