// The core's "copy" kernel: out = in, same dtype and shape, any input
// strides (zero and negative included) and byte offsets; the core uses it to
// make tensors contiguous, so every dtype is registered. One aclnn call:
// aclnnInplaceCopy(selfRef = out, src = in) takes the input view as it is;
// an input with negative strides is read through aclnnFlip instead (aclnn
// tensors take non-negative strides only), which writes the flipped view
// straight into the output.
//
// Also here: materialize_positive_strides, through which every kernel's
// TensorDesc reads an input with negative strides.
#include <utility>
#include <vector>

#include "chipdock/support/error.h"
#include "movement_common.h"

namespace chipdock_npu {

using chipdock::support::fail;

namespace {

// A view with negative strides seen from its lowest element: the same memory
// with every negative stride made positive, and the dims that were flipped.
struct PositiveView {
  void* data = nullptr;  // the lowest element's address
  std::vector<int64_t> shape, strides;
  std::vector<int64_t> flipped;
};

PositiveView positive_view(const cd_tensor_view& view) {
  const int64_t item = static_cast<int64_t>(dtype_size(view.dtype));
  if (view.byte_offset % item != 0) {
    fail(CD_STATUS_INVALID_ARGUMENT, "byte_offset %lld is not a multiple of the %lld-byte element",
         static_cast<long long>(view.byte_offset), static_cast<long long>(item));
  }
  PositiveView p;
  p.shape = movement::shape_of(view);
  p.strides = movement::strides_of(view);
  int64_t lowest = view.byte_offset;
  for (size_t d = 0; d < p.shape.size(); ++d) {
    if (p.strides[d] >= 0) continue;
    if (p.shape[d] > 1) {
      lowest += (p.shape[d] - 1) * p.strides[d] * item;
      p.flipped.push_back(static_cast<int64_t>(d));
    }
    p.strides[d] = -p.strides[d];
  }
  p.data = static_cast<char*>(view.data) + lowest;
  return p;
}

int64_t extent(const PositiveView& p) {
  int64_t last = 0;
  for (size_t d = 0; d < p.shape.size(); ++d) {
    if (p.shape[d] == 0) return 0;
    last += (p.shape[d] - 1) * p.strides[d];
  }
  return last + 1;
}

// out = the view flipped back along p.flipped: the view's elements in order.
void flip_into(const cd_kernel_context* ctx, const cd_tensor_view& view, const PositiveView& p, aclTensor* out) {
  if (movement::Flip.run == nullptr) {
    fail(CD_STATUS_UNIMPLEMENTED, "reading a view with negative strides needs aclnnFlip, which the op library lacks");
  }
  TensorDesc in = TensorDesc::make(p.data, view.dtype, p.shape, p.strides, 0, {extent(p)});
  IntArrayDesc dims(p.flipped);
  run_aclnn(ctx, movement::Flip, in.get(), dims.get(), out);
}

void check_copy_pair(const cd_tensor_view& in, const cd_tensor_view& out) {
  movement::require_dtype(out, in.dtype, "output 0");
  movement::require_shape(out, movement::shape_of(in), "output 0");
  movement::require_writable(out, "output 0");
  if (in.format != CD_FORMAT_STRIDED || out.format != CD_FORMAT_STRIDED) {
    fail(CD_STATUS_INVALID_ARGUMENT, "tensor formats %d and %d: only CD_FORMAT_STRIDED is known", in.format,
         out.format);
  }
}

void enqueue_copy(const cd_kernel_context* ctx) {
  movement::check_arity(ctx, 1, 1);
  const cd_tensor_view& in = *ctx->inputs[0];
  const cd_tensor_view& out = *ctx->outputs[0];
  check_copy_pair(in, out);
  if (movement::numel(movement::shape_of(out)) == 0) return;
  TensorDesc dst(ctx, out);
  PositiveView p = positive_view(in);
  if (!p.flipped.empty()) {
    flip_into(ctx, in, p, dst.get());
    return;
  }
  TensorDesc src(ctx, in);
  run_aclnn(ctx, movement::InplaceCopy, dst.get(), src.get());
}

cd_error* copy_kernel(const cd_kernel_context* ctx) noexcept {
  return chipdock::support::guard("copy", [ctx] { enqueue_copy(ctx); });
}

}  // namespace

void* materialize_positive_strides(const cd_kernel_context* ctx, const cd_tensor_view& view,
                                   std::vector<int64_t>* strides) {
  PositiveView p = positive_view(view);
  *strides = movement::contiguous_strides(p.shape);
  const int64_t n = movement::numel(p.shape);
  void* data = workspace(ctx, static_cast<uint64_t>(n) * dtype_size(view.dtype), "a view with negative strides");
  if (n == 0) return data;
  TensorDesc out = TensorDesc::contiguous(data, view.dtype, p.shape);
  if (p.flipped.empty()) {  // negative strides only on dims of size 1: nothing to reverse
    if (movement::InplaceCopy.run == nullptr) fail(CD_STATUS_UNIMPLEMENTED, "aclnnInplaceCopy is missing");
    TensorDesc in = TensorDesc::make(p.data, view.dtype, p.shape, p.strides, 0, {extent(p)});
    run_aclnn(ctx, movement::InplaceCopy, out.get(), in.get());
  } else {
    flip_into(ctx, view, p, out.get());
  }
  return data;
}

void register_copy(Registrar& r) {
  // Flip is optional here: without it only inputs with negative strides fail.
  r.resolve(movement::Flip, "copy");
  if (!r.resolve(movement::InplaceCopy, "copy")) return;
  for (cd_dtype_t t : movement::kAllDtypes) r.add("copy", {t, t}, copy_kernel);
}

}  // namespace chipdock_npu
