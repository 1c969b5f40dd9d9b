// The elementwise family on aclnn: what its four files share (operand
// checks and descriptors, scratch tensors, multi-step calls, registration).
//
//   elementwise_binary.cpp   add sub mul div pow maximum minimum logical_and logical_or
//   elementwise_unary.cpp    neg abs exp log sqrt rsqrt sin cos tanh erf sigmoid relu
//                            leaky_relu gelu silu clip logical_not
//   elementwise_compare.cpp  eq ne lt le gt ge where
//   elementwise_cast.cpp     cast
//
// Every op is one aclnn call on the views as they are (strides, zero strides
// of broadcast operands and offsets go into the descriptors; nothing is
// copied), except where chipdock's semantics (device_api/opset/opset.yaml)
// differ from what CANN documents; those ops compose several calls, each
// file says where and why.
#ifndef CHIPDOCK_NPU_KERNELS_ELEMENTWISE_H_
#define CHIPDOCK_NPU_KERNELS_ELEMENTWISE_H_

#include <cstdint>
#include <initializer_list>
#include <utility>
#include <vector>

// error.h first: aclnn_call.h's templates use chipdock::support::fail.
#include "chipdock/support/error.h"
#include "aclnn_call.h"
#include "registry.h"

namespace chipdock_npu {
namespace ew {

using DtypeList = std::vector<cd_dtype_t>;

// chipdock's dtype groups (opset.yaml `dtype_groups`).
extern const DtypeList kFloat;          // float32 float16 bfloat16 float64
extern const DtypeList kNumeric;        // kFloat + int8 int16 int32 int64 uint8
extern const DtypeList kSignedNumeric;  // kNumeric without uint8
extern const DtypeList kAll;            // kNumeric + bool

// `group` without `drop` (the dtypes an aclnn op lacks on Atlas A2).
DtypeList without(const DtypeList& group, std::initializer_list<cd_dtype_t> drop);

bool is_float(cd_dtype_t dtype) noexcept;

// The operands of one elementwise call, checked, as aclnn descriptors of the
// views. The core hands every input over with the output's shape (a
// broadcast operand has zero strides), so all operands share one index
// space: dims of extent 1 are dropped and neighbouring dims that every
// operand steps through as one are merged (aclnn takes at most 8 dims, and
// fewer dims are cheaper). A view with a negative stride is not merged; its
// descriptor flips it (TensorDesc).
class Operands {
 public:
  Operands(const cd_kernel_context* ctx, int num_inputs);

  bool empty() const noexcept { return numel_ == 0; }
  aclTensor* in(int i) const noexcept { return in_[static_cast<size_t>(i)].get(); }
  aclTensor* out() const noexcept { return out_.get(); }
  cd_dtype_t in_dtype(int i) const noexcept { return ctx_->inputs[i]->dtype; }
  cd_dtype_t out_dtype() const noexcept { return ctx_->outputs[0]->dtype; }
  // A C-contiguous tensor of the operands' (merged) shape in workspace
  // memory, for an intermediate result of a multi-step op.
  TensorDesc scratch(cd_dtype_t dtype, const char* what) const;

 private:
  const cd_kernel_context* ctx_;
  std::vector<int64_t> shape_;  // merged
  int64_t numel_ = 0;
  std::vector<TensorDesc> in_;
  TensorDesc out_;
};

// Runs `body(operands)` for a kernel call under chipdock::support::guard,
// which names the op in every error; an empty output does nothing.
template <typename Body>
cd_error* run_kernel(const cd_kernel_context* ctx, int num_inputs, Body&& body) noexcept {
  return chipdock::support::guard(ctx != nullptr && ctx->op != nullptr ? ctx->op : "npu elementwise kernel", [&] {
    chipdock::support::require_non_null(ctx, "kernel context");
    const Operands operands(ctx, num_inputs);
    if (!operands.empty()) body(operands);
  });
}

// One planned aclnn call (its GetWorkspaceSize has succeeded).
struct Step {
  const char* run_symbol;
  AclnnRunFn run;
  uint64_t workspace_size;
  aclOpExecutor* executor;
};

template <typename Fn, typename... Args>
Step plan_step(const cd_kernel_context* ctx, const AclnnOp<Fn>& op, Args&&... args) {
  if (op.get_workspace_size == nullptr || op.run == nullptr) {
    chipdock::support::fail(CD_STATUS_INTERNAL, "%s was not resolved", op.run_symbol);
  }
  bind_device(ctx->device);
  Step step{op.run_symbol, op.run, 0, nullptr};
  check_aclnn(op.get_workspace_size(std::forward<Args>(args)..., &step.workspace_size, &step.executor),
              op.workspace_symbol);
  return step;
}

// A multi-step op: every step is planned (plan_step) before any is
// launched and every workspace is had before the first launch, so a
// refused argument or a lack of memory leaves the outputs untouched, as a
// single call does. (An executor is consumed by its run call; CANN has no
// call in our table to free one that never runs, so on that error path the
// steps planned before the failing one are not freed.)
void launch_steps(const cd_kernel_context* ctx, std::initializer_list<Step> steps);

// Registration helpers: one kernel per dtype T of `types`.
//   same:      T x num_inputs -> T
//   predicate: T x num_inputs -> bool
void add_same(Registrar& r, const char* op, const DtypeList& types, int num_inputs, cd_kernel_fn fn);
void add_predicate(Registrar& r, const char* op, const DtypeList& types, int num_inputs, cd_kernel_fn fn);

// Resolves every op (each missing symbol is logged); true if all resolved.
template <typename... Ops>
bool resolve_all(Registrar& r, const char* cd_op, Ops&... ops) {
  bool ok = true;
  ((ok = r.resolve(ops, cd_op) && ok), ...);
  return ok;
}

void register_binary(Registrar& r);
void register_unary(Registrar& r);
void register_compare(Registrar& r);
void register_cast(Registrar& r);

}  // namespace ew
}  // namespace chipdock_npu

#endif  // CHIPDOCK_NPU_KERNELS_ELEMENTWISE_H_
