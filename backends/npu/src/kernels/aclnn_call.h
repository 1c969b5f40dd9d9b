// How a kernel calls aclnn: descriptors that carry a chipdock view's shape,
// strides and offset (no copy), and the two-phase call with the workspace
// from the core's workspace service.
//
//   CD_NPU_ACLNN(Add);                           // file scope: aclnnAdd's two entry points
//   ...
//   TensorDesc a(ctx, *ctx->inputs[0]), b(ctx, *ctx->inputs[1]), out(ctx, *ctx->outputs[0]);
//   ScalarDesc alpha(1.0, ACL_FLOAT);
//   run_aclnn(ctx, Add, a.get(), b.get(), alpha.get(), out.get());
//
// Everything throws chipdock::support::Error; a kernel runs its body under
// chipdock::support::guard(ctx->op, ...). A failure before the run call
// leaves the outputs untouched (nothing was enqueued).
#ifndef CHIPDOCK_NPU_KERNELS_ACLNN_CALL_H_
#define CHIPDOCK_NPU_KERNELS_ACLNN_CALL_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "../acl_api.h"
#include "../acl_error.h"
#include "../runtime.h"
#include "chipdock/cd_kernel.h"
#include "chipdock/support/error.h"

namespace chipdock_npu {

// The aclDataType of a chipdock dtype; throws INVALID_ARGUMENT for none.
aclDataType acl_dtype(cd_dtype_t dtype);
size_t dtype_size(cd_dtype_t dtype);

// An owned aclTensor. Shape and strides are in elements; the storage handed
// to aclCreateTensor is the allocation-relative 1-D extent the view spans.
class TensorDesc {
 public:
  TensorDesc() = default;
  // `view` as it is, zero strides included. A view with negative strides is
  // first materialized (flipped) into workspace memory by
  // materialize_positive_strides (kernels/copy.cpp), so inputs may have them;
  // an OUTPUT with a negative stride is refused (the core never makes one).
  TensorDesc(const cd_kernel_context* ctx, const cd_tensor_view& view);
  // The same memory seen with another shape and strides (elements), starting
  // `extra_offset` elements further: e.g. a contiguous view as 2-D.
  TensorDesc(const cd_kernel_context* ctx, const cd_tensor_view& view, const std::vector<int64_t>& shape,
             const std::vector<int64_t>& strides, int64_t extra_offset = 0);
  // A C-contiguous tensor over `data` (workspace or another device buffer).
  static TensorDesc contiguous(void* data, cd_dtype_t dtype, const std::vector<int64_t>& shape);
  // Raw form: every field as aclCreateTensor takes it.
  static TensorDesc make(void* data, cd_dtype_t dtype, const std::vector<int64_t>& shape,
                         const std::vector<int64_t>& strides, int64_t offset,
                         const std::vector<int64_t>& storage_shape);

  TensorDesc(TensorDesc&& other) noexcept : tensor_(std::exchange(other.tensor_, nullptr)) {}
  TensorDesc& operator=(TensorDesc&& other) noexcept;
  TensorDesc(const TensorDesc&) = delete;
  TensorDesc& operator=(const TensorDesc&) = delete;
  ~TensorDesc();

  aclTensor* get() const noexcept { return tensor_; }
  // Gives up ownership (a TensorListDesc takes it over).
  aclTensor* release() noexcept { return std::exchange(tensor_, nullptr); }

 private:
  aclTensor* tensor_ = nullptr;
};

class ScalarDesc {
 public:
  ScalarDesc(double value, aclDataType dtype);   // dtype ACL_FLOAT, ACL_DOUBLE, ACL_FLOAT16, ACL_BF16
  ScalarDesc(int64_t value, aclDataType dtype);  // dtype an integer type or ACL_BOOL
  ScalarDesc(const ScalarDesc&) = delete;
  ScalarDesc& operator=(const ScalarDesc&) = delete;
  ~ScalarDesc();
  aclScalar* get() const noexcept { return scalar_; }

 private:
  alignas(8) unsigned char value_[8] = {};
  aclScalar* scalar_ = nullptr;
};

class IntArrayDesc {
 public:
  explicit IntArrayDesc(const std::vector<int64_t>& values);
  IntArrayDesc(const IntArrayDesc&) = delete;
  IntArrayDesc& operator=(const IntArrayDesc&) = delete;
  ~IntArrayDesc();
  aclIntArray* get() const noexcept { return array_; }

 private:
  aclIntArray* array_ = nullptr;
};

class FloatArrayDesc {
 public:
  explicit FloatArrayDesc(const std::vector<float>& values);
  FloatArrayDesc(const FloatArrayDesc&) = delete;
  FloatArrayDesc& operator=(const FloatArrayDesc&) = delete;
  ~FloatArrayDesc();
  aclFloatArray* get() const noexcept { return array_; }

 private:
  aclFloatArray* array_ = nullptr;
};

class BoolArrayDesc {
 public:
  explicit BoolArrayDesc(const std::vector<bool>& values);
  BoolArrayDesc(const BoolArrayDesc&) = delete;
  BoolArrayDesc& operator=(const BoolArrayDesc&) = delete;
  ~BoolArrayDesc();
  aclBoolArray* get() const noexcept { return array_; }

 private:
  aclBoolArray* array_ = nullptr;
};

// A tensor list. As in CANN, the list owns its tensors: aclDestroyTensorList
// destroys them too, so the list takes the descriptors over.
class TensorListDesc {
 public:
  explicit TensorListDesc(std::vector<TensorDesc>&& tensors);
  TensorListDesc(const TensorListDesc&) = delete;
  TensorListDesc& operator=(const TensorListDesc&) = delete;
  ~TensorListDesc();
  aclTensorList* get() const noexcept { return list_; }

 private:
  aclTensorList* list_ = nullptr;
};

using AclnnRunFn = aclnnStatus (*)(void*, uint64_t, aclOpExecutor*, aclrtStream);

// One aclnn op's two entry points, resolved by Registrar::resolve.
template <typename GetWorkspaceSizeFn>
struct AclnnOp {
  const char* workspace_symbol;  // "aclnnAddGetWorkspaceSize"
  const char* run_symbol;        // "aclnnAdd"
  GetWorkspaceSizeFn get_workspace_size = nullptr;
  AclnnRunFn run = nullptr;
};

// Defines `Name`, the AclnnOp of aclnn<Name> (declared in aclnn_api.h).
#define CD_NPU_ACLNN(Name)                                                    \
  ::chipdock_npu::AclnnOp<decltype(&::aclnn##Name##GetWorkspaceSize)> Name{ \
      "aclnn" #Name "GetWorkspaceSize", "aclnn" #Name, nullptr, nullptr}

// `bytes` of workspace on ctx's device for work enqueued on ctx's stream
// (the core's workspace service); NULL for 0. Throws OUT_OF_MEMORY.
void* workspace(const cd_kernel_context* ctx, uint64_t bytes, const char* what);

// The two-phase call: op.get_workspace_size(args..., &size, &executor), the
// workspace, then op.run on ctx's stream, with ctx's device bound.
template <typename Fn, typename... Args>
void run_aclnn(const cd_kernel_context* ctx, const AclnnOp<Fn>& op, Args&&... args) {
  if (op.get_workspace_size == nullptr || op.run == nullptr) {
    chipdock::support::fail(CD_STATUS_INTERNAL, "%s was not resolved", op.run_symbol);
  }
  bind_device(ctx->device);
  uint64_t workspace_size = 0;
  aclOpExecutor* executor = nullptr;
  check_aclnn(op.get_workspace_size(std::forward<Args>(args)..., &workspace_size, &executor),
              op.workspace_symbol);
  void* scratch = workspace(ctx, workspace_size, op.run_symbol);
  check_aclnn(op.run(scratch, workspace_size, executor, native_stream(ctx->stream)), op.run_symbol);
}

// A device copy of `view` with every negative stride made positive (the
// data flipped along those dimensions with aclnnFlip), in workspace memory;
// returns the view's new data pointer and writes its strides. Implemented
// with the movement ops (kernels/copy.cpp).
void* materialize_positive_strides(const cd_kernel_context* ctx, const cd_tensor_view& view,
                                   std::vector<int64_t>* strides);

}  // namespace chipdock_npu

#endif  // CHIPDOCK_NPU_KERNELS_ACLNN_CALL_H_
