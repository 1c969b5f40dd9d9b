// Shared pieces of the data-movement kernels (copy.cpp, movement_*.cpp): the
// aclnn ops they call, view helpers, and the host-side index preparation.
//
// Indices. aclnn's indexed ops (GatherV2, Gather, Scatter, ScatterReduce)
// document index values in [0, size) and say nothing of what happens outside
// (hicann ops-nn index/gather_v2/docs/aclnnGatherV2.md: "取值范围在0 ~
// self.shape[dim]内"). chipdock counts negative indices from the end and makes
// an out-of-range index an error (opset.yaml), so the kernels read the index
// view back to the host, check and normalize it there and hand aclnn a
// contiguous int64 copy in workspace memory. Reading the indices needs the
// stream's earlier work to have finished: these kernels synchronize their
// stream before enqueueing (a cost a device-side check could avoid, but only
// the host can refuse a bad index before anything runs). The same upload
// carries the host-built index tables of pad (reflect, edge) and resize
// (nearest), which are gathers with computed indices.
#ifndef CHIPDOCK_NPU_KERNELS_MOVEMENT_COMMON_H_
#define CHIPDOCK_NPU_KERNELS_MOVEMENT_COMMON_H_

#include <cstdint>
#include <string>
#include <vector>

// aclnn_call.h's run_aclnn uses chipdock::support::fail without including it.
#include "chipdock/support/error.h"
#include "aclnn_call.h"
#include "registry.h"

namespace chipdock_npu::movement {

// The aclnn ops of the family (defined in movement_common.cpp, resolved by
// register_copy / register_movement).
extern AclnnOp<decltype(&::aclnnInplaceCopyGetWorkspaceSize)> InplaceCopy;
extern AclnnOp<decltype(&::aclnnFlipGetWorkspaceSize)> Flip;
extern AclnnOp<decltype(&::aclnnCatGetWorkspaceSize)> Cat;
extern AclnnOp<decltype(&::aclnnSplitWithSizeGetWorkspaceSize)> SplitWithSize;
extern AclnnOp<decltype(&::aclnnGatherV2GetWorkspaceSize)> GatherV2;
extern AclnnOp<decltype(&::aclnnGatherGetWorkspaceSize)> Gather;
extern AclnnOp<decltype(&::aclnnScatterGetWorkspaceSize)> Scatter;
extern AclnnOp<decltype(&::aclnnScatterReduceGetWorkspaceSize)> ScatterReduce;
extern AclnnOp<decltype(&::aclnnConstantPadNdGetWorkspaceSize)> ConstantPadNd;
extern AclnnOp<decltype(&::aclnnRepeatGetWorkspaceSize)> Repeat;
extern AclnnOp<decltype(&::aclnnUpsampleBilinear2dGetWorkspaceSize)> UpsampleBilinear2d;
extern AclnnOp<decltype(&::aclnnArangeGetWorkspaceSize)> Arange;
extern AclnnOp<decltype(&::aclnnInplaceFillScalarGetWorkspaceSize)> InplaceFillScalar;

// The opset's dtype groups, in ABI order.
extern const std::vector<cd_dtype_t> kAllDtypes;      // all
extern const std::vector<cd_dtype_t> kNumericDtypes;  // numeric (all but bool)
extern const std::vector<cd_dtype_t> kFloatDtypes;    // float
extern const std::vector<cd_dtype_t> kIndexDtypes;    // int32, int64

const char* dtype_name(cd_dtype_t dtype) noexcept;
std::string shape_string(const std::vector<int64_t>& shape);

std::vector<int64_t> shape_of(const cd_tensor_view& view);
std::vector<int64_t> strides_of(const cd_tensor_view& view);
int64_t numel(const std::vector<int64_t>& shape);
std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape);

// Throws INVALID_ARGUMENT unless ctx has exactly these many inputs/outputs.
void check_arity(const cd_kernel_context* ctx, int32_t inputs, int32_t outputs);
void require_dtype(const cd_tensor_view& view, cd_dtype_t dtype, const char* what);
void require_shape(const cd_tensor_view& view, const std::vector<int64_t>& shape, const char* what);
// Outputs: strided format, no zero stride on a dim longer than 1, no negative stride.
void require_writable(const cd_tensor_view& view, const char* what);

// An axis attribute, in [0, ndim) (the dispatcher normalizes it; checked again).
int64_t axis_attribute(const cd_kernel_context* ctx, const char* name, size_t ndim);

// A contiguous scratch tensor in workspace memory on ctx's device.
TensorDesc scratch_tensor(const cd_kernel_context* ctx, cd_dtype_t dtype, const std::vector<int64_t>& shape,
                          const char* what);

// Waits for the work already enqueued on ctx's stream (see the header comment).
void synchronize_stream(const cd_kernel_context* ctx);

// The elements of an int32/int64 index view (any strides) in C order, each
// normalized into [0, size); throws OUT_OF_RANGE naming `indices`, the value,
// the axis and the size for the first that is not in [-size, size).
// Synchronizes the stream first.
std::vector<int64_t> read_indices(const cd_kernel_context* ctx, const cd_tensor_view& view, int64_t size,
                                  int64_t axis);

// `values` copied into workspace memory as a contiguous int64 tensor of
// `shape` (numel(shape) == values.size()). Synchronizes the stream first: the
// copy is synchronous and the workspace may be memory queued work still reads.
TensorDesc upload_indices(const cd_kernel_context* ctx, const std::vector<int64_t>& values,
                          const std::vector<int64_t>& shape);
// The same upload, returning the device address (NULL for no values): for
// several tables sent at once and seen through offset descriptors.
void* upload_int64(const cd_kernel_context* ctx, const std::vector<int64_t>& values);

// A float attribute as an aclScalar for `dtype`: the value itself for float
// dtypes (as a DOUBLE scalar, rounded once by the op), truncated toward zero
// for integers (INVALID_ARGUMENT if it leaves the dtype's range), != 0 for bool.
ScalarDesc fill_scalar(double value, cd_dtype_t dtype);

// Register functions of the movement files (register_movement calls them).
void register_layout(Registrar& r);  // concat split pad tile (movement_layout.cpp)
void register_index(Registrar& r);   // gather gather_elements embedding scatter (movement_index.cpp)
void register_fill(Registrar& r);    // arange full resize (movement_fill.cpp)

}  // namespace chipdock_npu::movement

#endif  // CHIPDOCK_NPU_KERNELS_MOVEMENT_COMMON_H_
