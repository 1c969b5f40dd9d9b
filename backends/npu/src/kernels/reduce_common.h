// Plumbing shared by the reduction-family kernels (reduce*.cpp): the dtype
// lists they register, attribute reading, and descriptors for the shapes
// aclnn needs where chipdock's differ (a 0-d tensor as shape (1), size-1
// dimensions put in front, a contiguous output seen with its kept dimensions).
#ifndef CHIPDOCK_NPU_KERNELS_REDUCE_COMMON_H_
#define CHIPDOCK_NPU_KERNELS_REDUCE_COMMON_H_

#include <cstdint>
#include <vector>

#include "aclnn_call.h"
#include "registry.h"

namespace chipdock_npu {
namespace reduce {

// The dtypes CANN's docs list for Atlas A2 (see each registration).
inline const std::vector<cd_dtype_t>& float_dtypes() {
  static const std::vector<cd_dtype_t> v = {CD_DTYPE_FLOAT32, CD_DTYPE_FLOAT16, CD_DTYPE_BFLOAT16, CD_DTYPE_FLOAT64};
  return v;
}
inline const std::vector<cd_dtype_t>& numeric_dtypes() {
  static const std::vector<cd_dtype_t> v = {CD_DTYPE_FLOAT32, CD_DTYPE_FLOAT16, CD_DTYPE_BFLOAT16,
                                            CD_DTYPE_FLOAT64, CD_DTYPE_INT8,    CD_DTYPE_INT16,
                                            CD_DTYPE_INT32,   CD_DTYPE_INT64,   CD_DTYPE_UINT8};
  return v;
}

// Registers `fn` for `op` once per dtype of `dtypes`: `arity` operands of that
// dtype, the last `index_outputs` of them int64 instead (argmax, topk, ...).
void add_each(Registrar& r, const char* op, const std::vector<cd_dtype_t>& dtypes, int arity, cd_kernel_fn fn,
              int index_outputs = 0);

// Checks the operand counts and that every view is strided (the core's
// contract; a raw ABI call may break it). Throws INVALID_ARGUMENT.
void check_operands(const cd_kernel_context* ctx, int32_t inputs, int32_t outputs);

// The attributes the dispatcher fills in (shape rules `reduce`, `reduce_axis`,
// `same_axis`, `topk`): normalized, so only checked here.
std::vector<int64_t> reduce_axes(const cd_kernel_context* ctx, int32_t ndim);  // sorted, unique; empty = all
int64_t one_axis(const cd_kernel_context* ctx, int32_t ndim);                  // in [0, ndim); 0 for 0-d
bool flag(const cd_kernel_context* ctx, const char* name);
int64_t number(const cd_kernel_context* ctx, const char* name);

int64_t numel(const cd_tensor_view& view);
std::vector<int64_t> shape_of(const cd_tensor_view& view);
std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape);

// `view` as an aclTensor with `lead` size-1 dimensions in front; a 0-d view
// becomes shape (1) (the aclnn ops that take one `dim` want at least one
// dimension). Negative strides are materialized first, as TensorDesc does.
TensorDesc shaped_desc(const cd_kernel_context* ctx, const cd_tensor_view& view, size_t lead = 0);

// A contiguous OUTPUT seen with another shape of the same element count (its
// reduced dimensions kept as 1, or a 0-d output as (1)).
TensorDesc reshaped_output(const cd_kernel_context* ctx, const cd_tensor_view& view,
                           const std::vector<int64_t>& shape);

// Throws INVALID_ARGUMENT unless `view` is C-contiguous (outputs are, by the
// core's contract; kernels that view them with another shape rely on it).
void require_contiguous(const cd_tensor_view& view, const char* what);

// Registration of the two files beside reduce.cpp (called by register_reduce).
void register_axis_ops(Registrar& r);  // softmax, log_softmax, cumsum (reduce_axis.cpp)
void register_sort_ops(Registrar& r);  // sort, argsort, topk (reduce_sort.cpp)

}  // namespace reduce
}  // namespace chipdock_npu

#endif  // CHIPDOCK_NPU_KERNELS_REDUCE_COMMON_H_
