// The nn family's shared pieces: the aclnn ops it resolves, and Operand, a
// view of device memory that can be re-shaped, permuted and narrowed before
// it becomes an aclTensor (aclnn takes strided views, so none of that copies).
#ifndef CHIPDOCK_NPU_KERNELS_NN_COMMON_H_
#define CHIPDOCK_NPU_KERNELS_NN_COMMON_H_

#include <cstdint>
#include <string>
#include <vector>

// error.h first: aclnn_call.h's run_aclnn uses chipdock::support::fail without including it.
#include "chipdock/support/error.h"
#include "aclnn_call.h"
#include "chipdock/support/attributes.h"
#include "registry.h"

namespace chipdock_npu {
namespace nn {

// Every aclnn op the nn kernels call (defined in nn.cpp). Add, InplaceCopy:
// the elementwise and movement blocks' declarations; the rest: aclnn_api.h's nn block.
#define CD_NPU_NN_ACLNN_OPS(X)                                                                 \
  X(Matmul) X(Addmm) X(Convolution) X(MaxPool2dWithIndices) X(AvgPool2d) X(AdaptiveAvgPool2d) \
  X(BatchNorm) X(LayerNorm) X(RmsNorm) X(GroupNorm) X(Add) X(Relu) X(Muls) X(Cast) X(Softmax)  \
  X(ConstantPadNd) X(InplaceCopy) X(Div) X(InplaceFillScalar)

#define CD_NPU_NN_DECLARE_OP_(Name) \
  extern ::chipdock_npu::AclnnOp<decltype(&::aclnn##Name##GetWorkspaceSize)> Name;
CD_NPU_NN_ACLNN_OPS(CD_NPU_NN_DECLARE_OP_)
#undef CD_NPU_NN_DECLARE_OP_

// cubeMathType values (aclnn_api.h).
constexpr int8_t kKeepDtype = 0;
constexpr int8_t kAllowFp32DownPrecision = 1;

// A view of device memory: element `index` lives at data + (offset +
// sum(index[d] * strides[d])) * itemsize. Strides are never negative.
struct Operand {
  void* data = nullptr;
  cd_dtype_t dtype = CD_DTYPE_FLOAT32;
  int64_t offset = 0;  // elements
  std::vector<int64_t> shape, strides;

  int64_t ndim() const { return static_cast<int64_t>(shape.size()); }
  int64_t dim(int64_t d) const { return shape[static_cast<size_t>(d < 0 ? d + ndim() : d)]; }
  int64_t numel() const;
  // The aclTensor of this view (ND format, storage = the span it covers).
  TensorDesc desc() const;
  // The same memory with dims in `perm` order.
  Operand permuted(const std::vector<int64_t>& perm) const;
  // Elements [start, start + length) of dim `d`.
  Operand narrowed(int64_t d, int64_t start, int64_t length) const;
  // The last two dims swapped.
  Operand transposed() const;
  // A size-1 dim inserted at `d` (its stride is irrelevant; 0 keeps the span).
  Operand unsqueezed(int64_t d) const;
  // The same memory as `shape`; dims merge only where the strides allow
  // (nullopt-like: `ok` false when they do not).
  Operand reshaped(const std::vector<int64_t>& new_shape, bool* ok) const;
};

// Input `i` of the call; negative strides are first materialized (a flipped
// copy in workspace memory, see materialize_positive_strides).
Operand input(const cd_kernel_context* ctx, int i);
// Output `i` (the core allocates outputs C-contiguous; never negative strides).
Operand output(const cd_kernel_context* ctx, int i);
// A C-contiguous tensor of `shape` in workspace memory (for intermediates).
Operand scratch(const cd_kernel_context* ctx, cd_dtype_t dtype, const std::vector<int64_t>& shape,
                const char* what);
// `t` (contiguous or not) copied into a fresh C-contiguous workspace tensor.
Operand contiguous_copy(const cd_kernel_context* ctx, const Operand& t, const char* what);
// Fills a workspace tensor with zero bytes on ctx's stream (0.0 in every float format).
void zero_fill(const cd_kernel_context* ctx, const Operand& t);
// `src` converted to `dtype` into a fresh contiguous workspace tensor (aclnnCast; exact when widening).
Operand cast_copy(const cd_kernel_context* ctx, const Operand& src, cd_dtype_t dtype, const char* what);

bool is_16bit(cd_dtype_t dtype);
std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape);
// "[2, 3, 4]" for messages.
std::string shape_string(const std::vector<int64_t>& shape);

// Throws INVALID_ARGUMENT unless the call has `min`..`max` inputs and one output.
void require_arity(const cd_kernel_context* ctx, int min_inputs, int max_inputs);

}  // namespace nn

// Each file's registrations (called by register_nn in nn.cpp).
void register_nn_matmul(Registrar& r);     // nn_matmul.cpp: matmul, gemm
void register_nn_conv(Registrar& r);       // nn_conv.cpp: conv2d, conv2d_fused, conv_transpose2d
void register_nn_pool(Registrar& r);       // nn_pool.cpp: max_pool2d, avg_pool2d, global_avg_pool
void register_nn_norm(Registrar& r);       // nn_norm.cpp: batch_norm, layer_norm, rms_norm, group_norm
void register_nn_attention(Registrar& r);  // nn_attention.cpp: scaled_dot_product_attention

}  // namespace chipdock_npu

#endif  // CHIPDOCK_NPU_KERNELS_NN_COMMON_H_
