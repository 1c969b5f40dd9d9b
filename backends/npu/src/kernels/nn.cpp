// The nn family: its aclnn ops, Operand (nn_common.h) and register_nn.
#include <algorithm>
#include <numeric>

#include "nn_common.h"

namespace chipdock_npu {

using chipdock::support::fail;

namespace nn {

#define CD_NPU_NN_DEFINE_OP_(Name) CD_NPU_ACLNN(Name);
CD_NPU_NN_ACLNN_OPS(CD_NPU_NN_DEFINE_OP_)
#undef CD_NPU_NN_DEFINE_OP_

int64_t Operand::numel() const {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

TensorDesc Operand::desc() const {
  int64_t last = offset;
  bool empty = false;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 0) empty = true;
    else last += (shape[d] - 1) * strides[d];
  }
  return TensorDesc::make(data, dtype, shape, strides, offset, {empty ? 0 : last + 1});
}

Operand Operand::permuted(const std::vector<int64_t>& perm) const {
  Operand out = *this;
  for (size_t d = 0; d < perm.size(); ++d) {
    out.shape[d] = shape[static_cast<size_t>(perm[d])];
    out.strides[d] = strides[static_cast<size_t>(perm[d])];
  }
  return out;
}

Operand Operand::narrowed(int64_t d, int64_t start, int64_t length) const {
  Operand out = *this;
  const size_t k = static_cast<size_t>(d < 0 ? d + ndim() : d);
  out.offset += start * strides[k];
  out.shape[k] = length;
  return out;
}

Operand Operand::transposed() const {
  std::vector<int64_t> perm(shape.size());
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
  return permuted(perm);
}

Operand Operand::unsqueezed(int64_t d) const {
  Operand out = *this;
  out.shape.insert(out.shape.begin() + d, 1);
  out.strides.insert(out.strides.begin() + d, 0);
  return out;
}

Operand Operand::reshaped(const std::vector<int64_t>& new_shape, bool* ok) const {
  // PyTorch's view-stride rule: old dims merge into chunks that step
  // uniformly, and each chunk is split into new dims of the same product.
  Operand out = *this;
  out.shape = new_shape;
  out.strides.assign(new_shape.size(), 0);
  *ok = true;
  if (numel() == 0 || shape.empty()) {
    out.strides = contiguous_strides(new_shape);
    return out;
  }
  int64_t view_d = static_cast<int64_t>(new_shape.size()) - 1;
  int64_t chunk_base_stride = strides.back(), tensor_numel = 1, view_numel = 1;
  for (int64_t d = ndim() - 1; d >= 0; --d) {
    const size_t k = static_cast<size_t>(d);
    tensor_numel *= shape[k];
    if (d == 0 || (shape[k - 1] != 1 && strides[k - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || new_shape[static_cast<size_t>(view_d)] == 1)) {
        out.strides[static_cast<size_t>(view_d)] = view_numel * chunk_base_stride;
        view_numel *= new_shape[static_cast<size_t>(view_d)];
        --view_d;
      }
      if (view_numel != tensor_numel) {
        *ok = false;
        return *this;
      }
      if (d > 0) {
        chunk_base_stride = strides[k - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) *ok = false;
  return *ok ? out : *this;
}

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) strides[d - 1] = strides[d] * std::max<int64_t>(shape[d], 1);
  return strides;
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t d = 0; d < shape.size(); ++d) {
    if (d > 0) s += ", ";
    s += std::to_string(shape[d]);
  }
  return s + "]";
}

bool is_16bit(cd_dtype_t dtype) { return dtype == CD_DTYPE_FLOAT16 || dtype == CD_DTYPE_BFLOAT16; }

Operand input(const cd_kernel_context* ctx, int i) {
  const cd_tensor_view& v = *ctx->inputs[i];
  if (v.format != CD_FORMAT_STRIDED) {
    fail(CD_STATUS_INVALID_ARGUMENT, "input %d has tensor format %d, not CD_FORMAT_STRIDED", i, v.format);
  }
  Operand t;
  t.dtype = v.dtype;
  t.shape.assign(v.shape, v.shape + v.ndim);
  t.strides.assign(v.strides, v.strides + v.ndim);
  const bool negative = std::any_of(t.strides.begin(), t.strides.end(), [](int64_t s) { return s < 0; });
  if (negative) {
    t.data = materialize_positive_strides(ctx, v, &t.strides);  // aclTensor strides are non-negative
    return t;
  }
  const int64_t item = static_cast<int64_t>(dtype_size(v.dtype));
  if (v.byte_offset % item != 0) {
    fail(CD_STATUS_INVALID_ARGUMENT, "input %d: byte_offset %lld is not a multiple of the element size", i,
         static_cast<long long>(v.byte_offset));
  }
  t.data = v.data;
  t.offset = v.byte_offset / item;
  return t;
}

Operand output(const cd_kernel_context* ctx, int i) {
  const cd_tensor_view& v = *ctx->outputs[i];
  if (v.format != CD_FORMAT_STRIDED) {
    fail(CD_STATUS_INVALID_ARGUMENT, "output %d has tensor format %d, not CD_FORMAT_STRIDED", i, v.format);
  }
  Operand t;
  t.dtype = v.dtype;
  t.shape.assign(v.shape, v.shape + v.ndim);
  t.strides.assign(v.strides, v.strides + v.ndim);
  for (int64_t s : t.strides) {
    if (s < 0) fail(CD_STATUS_INVALID_ARGUMENT, "output %d has a negative stride", i);
  }
  const int64_t item = static_cast<int64_t>(dtype_size(v.dtype));
  if (v.byte_offset % item != 0) {
    fail(CD_STATUS_INVALID_ARGUMENT, "output %d: byte_offset %lld is not a multiple of the element size", i,
         static_cast<long long>(v.byte_offset));
  }
  t.data = v.data;
  t.offset = v.byte_offset / item;
  return t;
}

Operand scratch(const cd_kernel_context* ctx, cd_dtype_t dtype, const std::vector<int64_t>& shape,
                const char* what) {
  Operand t;
  t.dtype = dtype;
  t.shape = shape;
  t.strides = contiguous_strides(shape);
  const uint64_t bytes = static_cast<uint64_t>(std::max<int64_t>(t.numel(), 1)) * dtype_size(dtype);
  t.data = workspace(ctx, bytes, what);
  return t;
}

Operand contiguous_copy(const cd_kernel_context* ctx, const Operand& t, const char* what) {
  Operand out = scratch(ctx, t.dtype, t.shape, what);
  if (t.numel() == 0) return out;
  const TensorDesc dst = out.desc(), src = t.desc();
  run_aclnn(ctx, InplaceCopy, dst.get(), src.get());
  return out;
}

void zero_fill(const cd_kernel_context* ctx, const Operand& t) {
  const size_t bytes = static_cast<size_t>(t.numel()) * dtype_size(t.dtype);
  if (bytes == 0) return;
  bind_device(ctx->device);
  char* base = static_cast<char*>(t.data) + t.offset * static_cast<int64_t>(dtype_size(t.dtype));
  check_acl(acl().aclrtMemsetAsync(base, bytes, 0, bytes, native_stream(ctx->stream)), "aclrtMemsetAsync");
}

Operand cast_copy(const cd_kernel_context* ctx, const Operand& src, cd_dtype_t dtype, const char* what) {
  Operand out = scratch(ctx, dtype, src.shape, what);
  if (src.numel() == 0) return out;
  const TensorDesc s = src.desc(), d = out.desc();
  run_aclnn(ctx, Cast, s.get(), acl_dtype(dtype), d.get());
  return out;
}

void require_arity(const cd_kernel_context* ctx, int min_inputs, int max_inputs) {
  if (ctx->num_inputs < min_inputs || ctx->num_inputs > max_inputs || ctx->num_outputs != 1) {
    fail(CD_STATUS_INVALID_ARGUMENT, "takes %d to %d inputs and 1 output, got %d and %d", min_inputs, max_inputs,
         ctx->num_inputs, ctx->num_outputs);
  }
  for (int i = 0; i < ctx->num_inputs; ++i) chipdock::support::require_non_null(ctx->inputs[i], "an input view");
  chipdock::support::require_non_null(ctx->outputs[0], "the output view");
}

}  // namespace nn

void register_nn(Registrar& r) {
  register_nn_matmul(r);
  register_nn_conv(r);
  register_nn_pool(r);
  register_nn_norm(r);
  register_nn_attention(r);
}

}  // namespace chipdock_npu
