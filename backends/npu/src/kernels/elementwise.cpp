// The elementwise family's shared part (see elementwise.h) and
// register_elementwise.
#include "elementwise.h"

#include <algorithm>

namespace chipdock_npu {
namespace ew {

using chipdock::support::fail;

const DtypeList kFloat = {CD_DTYPE_FLOAT32, CD_DTYPE_FLOAT16, CD_DTYPE_BFLOAT16, CD_DTYPE_FLOAT64};
const DtypeList kNumeric = {CD_DTYPE_FLOAT32, CD_DTYPE_FLOAT16, CD_DTYPE_BFLOAT16, CD_DTYPE_FLOAT64,
                            CD_DTYPE_INT8,    CD_DTYPE_INT16,   CD_DTYPE_INT32,    CD_DTYPE_INT64,
                            CD_DTYPE_UINT8};
const DtypeList kSignedNumeric = {CD_DTYPE_FLOAT32, CD_DTYPE_FLOAT16, CD_DTYPE_BFLOAT16, CD_DTYPE_FLOAT64,
                                  CD_DTYPE_INT8,    CD_DTYPE_INT16,   CD_DTYPE_INT32,    CD_DTYPE_INT64};
const DtypeList kAll = {CD_DTYPE_FLOAT32, CD_DTYPE_FLOAT16, CD_DTYPE_BFLOAT16, CD_DTYPE_FLOAT64, CD_DTYPE_INT8,
                        CD_DTYPE_INT16,   CD_DTYPE_INT32,   CD_DTYPE_INT64,    CD_DTYPE_UINT8,   CD_DTYPE_BOOL};

DtypeList without(const DtypeList& group, std::initializer_list<cd_dtype_t> drop) {
  DtypeList out;
  for (cd_dtype_t t : group) {
    if (std::find(drop.begin(), drop.end(), t) == drop.end()) out.push_back(t);
  }
  return out;
}

bool is_float(cd_dtype_t dtype) noexcept {
  return dtype == CD_DTYPE_FLOAT32 || dtype == CD_DTYPE_FLOAT16 || dtype == CD_DTYPE_BFLOAT16 ||
         dtype == CD_DTYPE_FLOAT64;
}

namespace {

// aclnn's limit on the rank of a tensor (every op's docs: "不超过8维").
constexpr size_t kMaxAclnnDims = 8;

const cd_tensor_view& checked_view(const cd_tensor_view* view, const cd_kernel_context* ctx, const char* what,
                                   int index) {
  if (view == nullptr) fail(CD_STATUS_INVALID_ARGUMENT, "%s %d is NULL", what, index);
  if (view->ndim < 0 || (view->ndim > 0 && (view->shape == nullptr || view->strides == nullptr))) {
    fail(CD_STATUS_INVALID_ARGUMENT, "%s %d has a malformed shape", what, index);
  }
  if (view->device != ctx->device) {
    fail(CD_STATUS_INVALID_ARGUMENT, "%s %d is on npu:%d, the call on npu:%d", what, index, view->device,
         ctx->device);
  }
  return *view;
}

}  // namespace

Operands::Operands(const cd_kernel_context* ctx, int num_inputs) : ctx_(ctx) {
  if (ctx->num_inputs != num_inputs || ctx->num_outputs != 1 || ctx->inputs == nullptr || ctx->outputs == nullptr) {
    fail(CD_STATUS_INVALID_ARGUMENT, "takes %d inputs and 1 output, got %d and %d", num_inputs, ctx->num_inputs,
         ctx->num_outputs);
  }
  const cd_tensor_view& out = checked_view(ctx->outputs[0], ctx, "output", 0);
  std::vector<const cd_tensor_view*> views = {&out};
  for (int i = 0; i < num_inputs; ++i) views.push_back(&checked_view(ctx->inputs[i], ctx, "input", i));

  bool negative = false;
  numel_ = 1;
  for (int32_t d = 0; d < out.ndim; ++d) {
    numel_ *= out.shape[d];
    if (out.strides[d] == 0 && out.shape[d] > 1) {
      fail(CD_STATUS_INVALID_ARGUMENT, "the output has stride 0 in dim %d (a broadcast view cannot be written)", d);
    }
  }
  for (size_t k = 1; k < views.size(); ++k) {
    const cd_tensor_view& v = *views[k];
    if (v.ndim != out.ndim || !std::equal(v.shape, v.shape + v.ndim, out.shape)) {
      fail(CD_STATUS_INVALID_ARGUMENT, "input %zu does not have the output's shape (the core expands broadcasts)",
           k - 1);
    }
  }
  for (const cd_tensor_view* v : views) {
    for (int32_t d = 0; d < v->ndim; ++d) negative = negative || v->strides[d] < 0;
  }
  if (numel_ == 0) return;

  if (negative) {
    // As they are: TensorDesc flips a negative-strided input into workspace.
    if (static_cast<size_t>(out.ndim) > kMaxAclnnDims) {
      fail(CD_STATUS_UNIMPLEMENTED, "%d dims with negative strides (aclnn takes at most %zu)", out.ndim,
           kMaxAclnnDims);
    }
    shape_.assign(out.shape, out.shape + out.ndim);
    out_ = TensorDesc(ctx, out);
    for (int i = 0; i < num_inputs; ++i) in_.emplace_back(ctx, *ctx->inputs[i]);
    return;
  }

  // Merge dims: per operand, the strides of the kept dims.
  std::vector<std::vector<int64_t>> strides(views.size());
  for (int32_t d = 0; d < out.ndim; ++d) {
    const int64_t len = out.shape[d];
    if (len == 1) continue;
    bool merge = !shape_.empty();
    for (size_t k = 0; k < views.size() && merge; ++k) merge = strides[k].back() == views[k]->strides[d] * len;
    if (merge) {
      shape_.back() *= len;
      for (size_t k = 0; k < views.size(); ++k) strides[k].back() = views[k]->strides[d];
      continue;
    }
    shape_.push_back(len);
    for (size_t k = 0; k < views.size(); ++k) strides[k].push_back(views[k]->strides[d]);
  }
  if (shape_.size() > kMaxAclnnDims) {
    fail(CD_STATUS_UNIMPLEMENTED, "%zu dims that cannot be merged (aclnn takes at most %zu)", shape_.size(),
         kMaxAclnnDims);
  }
  out_ = TensorDesc(ctx, out, shape_, strides[0]);
  for (int i = 0; i < num_inputs; ++i) in_.emplace_back(ctx, *ctx->inputs[i], shape_, strides[i + 1]);
}

TensorDesc Operands::scratch(cd_dtype_t dtype, const char* what) const {
  const uint64_t bytes = static_cast<uint64_t>(numel_) * dtype_size(dtype);
  return TensorDesc::contiguous(workspace(ctx_, bytes, what), dtype, shape_);
}

void launch_steps(const cd_kernel_context* ctx, std::initializer_list<Step> steps) {
  std::vector<void*> scratch;
  for (const Step& s : steps) scratch.push_back(workspace(ctx, s.workspace_size, s.run_symbol));
  aclrtStream stream = native_stream(ctx->stream);
  size_t i = 0;
  for (const Step& s : steps) {
    check_aclnn(s.run(scratch[i++], s.workspace_size, s.executor, stream), s.run_symbol);
  }
}

void add_same(Registrar& r, const char* op, const DtypeList& types, int num_inputs, cd_kernel_fn fn) {
  for (cd_dtype_t t : types) r.add(op, DtypeList(static_cast<size_t>(num_inputs) + 1, t), fn);
}

void add_predicate(Registrar& r, const char* op, const DtypeList& types, int num_inputs, cd_kernel_fn fn) {
  for (cd_dtype_t t : types) {
    DtypeList signature(static_cast<size_t>(num_inputs), t);
    signature.push_back(CD_DTYPE_BOOL);
    r.add(op, signature, fn);
  }
}

}  // namespace ew

void register_elementwise(Registrar& r) {
  ew::register_binary(r);
  ew::register_unary(r);
  ew::register_compare(r);
  ew::register_cast(r);
}

}  // namespace chipdock_npu
