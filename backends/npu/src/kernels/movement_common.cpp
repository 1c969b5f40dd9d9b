// Shared pieces of the data-movement kernels (see movement_common.h).
#include "movement_common.h"

#include <cmath>
#include <cstring>

#include "chipdock/support/attributes.h"
#include "chipdock/support/dtype_info.h"
#include "chipdock/support/dtype_range.h"
#include "chipdock/support/error.h"

namespace chipdock_npu::movement {

using chipdock::support::fail;

CD_NPU_ACLNN(InplaceCopy);
CD_NPU_ACLNN(Flip);
CD_NPU_ACLNN(Cat);
CD_NPU_ACLNN(SplitWithSize);
CD_NPU_ACLNN(GatherV2);
CD_NPU_ACLNN(Gather);
CD_NPU_ACLNN(Scatter);
CD_NPU_ACLNN(ScatterReduce);
CD_NPU_ACLNN(ConstantPadNd);
CD_NPU_ACLNN(Repeat);
CD_NPU_ACLNN(UpsampleBilinear2d);
CD_NPU_ACLNN(Arange);
CD_NPU_ACLNN(InplaceFillScalar);

const std::vector<cd_dtype_t> kAllDtypes = {
    CD_DTYPE_FLOAT32, CD_DTYPE_FLOAT16, CD_DTYPE_BFLOAT16, CD_DTYPE_FLOAT64, CD_DTYPE_INT8,
    CD_DTYPE_INT16,   CD_DTYPE_INT32,   CD_DTYPE_INT64,    CD_DTYPE_UINT8,   CD_DTYPE_BOOL};
const std::vector<cd_dtype_t> kNumericDtypes(kAllDtypes.begin(), kAllDtypes.end() - 1);
const std::vector<cd_dtype_t> kFloatDtypes = {CD_DTYPE_FLOAT32, CD_DTYPE_FLOAT16, CD_DTYPE_BFLOAT16,
                                              CD_DTYPE_FLOAT64};
const std::vector<cd_dtype_t> kIndexDtypes = {CD_DTYPE_INT32, CD_DTYPE_INT64};

const char* dtype_name(cd_dtype_t dtype) noexcept {
  const char* name = chipdock::support::dtype_name(dtype);
  return name != nullptr ? name : "unknown dtype";
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i != 0) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + (shape.size() == 1 ? ",)" : ")");
}

std::vector<int64_t> shape_of(const cd_tensor_view& view) {
  return std::vector<int64_t>(view.shape, view.shape + view.ndim);
}

std::vector<int64_t> strides_of(const cd_tensor_view& view) {
  return std::vector<int64_t>(view.strides, view.strides + view.ndim);
}

int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) strides[d - 1] = strides[d] * shape[d];
  return strides;
}

void check_arity(const cd_kernel_context* ctx, int32_t inputs, int32_t outputs) {
  chipdock::support::require_non_null(ctx, "ctx");
  if (ctx->num_inputs != inputs || ctx->num_outputs != outputs) {
    fail(CD_STATUS_INVALID_ARGUMENT, "%d inputs and %d outputs, expected %d and %d", ctx->num_inputs,
         ctx->num_outputs, inputs, outputs);
  }
  for (int32_t i = 0; i < inputs; ++i) {
    if (ctx->inputs[i] == nullptr) fail(CD_STATUS_INVALID_ARGUMENT, "input %d is absent", i);
  }
  for (int32_t i = 0; i < outputs; ++i) {
    if (ctx->outputs[i] == nullptr) fail(CD_STATUS_INVALID_ARGUMENT, "output %d is absent", i);
  }
}

void require_dtype(const cd_tensor_view& view, cd_dtype_t dtype, const char* what) {
  if (view.dtype != dtype) {
    fail(CD_STATUS_INVALID_ARGUMENT, "%s is %s, expected %s", what, dtype_name(view.dtype), dtype_name(dtype));
  }
}

void require_shape(const cd_tensor_view& view, const std::vector<int64_t>& shape, const char* what) {
  if (shape_of(view) != shape) {
    fail(CD_STATUS_INVALID_ARGUMENT, "%s has shape %s, expected %s", what, shape_string(shape_of(view)).c_str(),
         shape_string(shape).c_str());
  }
}

void require_writable(const cd_tensor_view& view, const char* what) {
  for (int32_t d = 0; d < view.ndim; ++d) {
    if (view.strides[d] < 0 || (view.strides[d] == 0 && view.shape[d] > 1)) {
      fail(CD_STATUS_INVALID_ARGUMENT, "%s has stride %lld in dim %d (an output needs positive strides)", what,
           static_cast<long long>(view.strides[d]), d);
    }
  }
}

int64_t axis_attribute(const cd_kernel_context* ctx, const char* name, size_t ndim) {
  const int64_t axis = chipdock::support::int_attribute(ctx, name);
  if (axis < 0 || axis >= static_cast<int64_t>(ndim)) {
    fail(CD_STATUS_INVALID_ARGUMENT, "attribute '%s' = %lld is not in [0, %zu) (the dispatcher normalizes it)",
         name, static_cast<long long>(axis), ndim);
  }
  return axis;
}

TensorDesc scratch_tensor(const cd_kernel_context* ctx, cd_dtype_t dtype, const std::vector<int64_t>& shape,
                          const char* what) {
  const uint64_t bytes = static_cast<uint64_t>(numel(shape)) * dtype_size(dtype);
  return TensorDesc::contiguous(workspace(ctx, bytes, what), dtype, shape);
}

void synchronize_stream(const cd_kernel_context* ctx) {
  bind_device(ctx->device);
  check_acl(acl().aclrtSynchronizeStream(native_stream(ctx->stream)), "aclrtSynchronizeStream");
}

std::vector<int64_t> read_indices(const cd_kernel_context* ctx, const cd_tensor_view& view, int64_t size,
                                  int64_t axis) {
  if (view.dtype != CD_DTYPE_INT32 && view.dtype != CD_DTYPE_INT64) {
    fail(CD_STATUS_INVALID_ARGUMENT, "indices must be int32 or int64, got %s", dtype_name(view.dtype));
  }
  if (view.format != CD_FORMAT_STRIDED) {
    fail(CD_STATUS_INVALID_ARGUMENT, "indices: tensor format %d is not CD_FORMAT_STRIDED", view.format);
  }
  const std::vector<int64_t> shape = shape_of(view);
  const int64_t n = numel(shape);
  std::vector<int64_t> out;
  if (n == 0) return out;
  // The bytes the view spans, whatever the signs of its strides.
  const int64_t item = static_cast<int64_t>(dtype_size(view.dtype));
  int64_t lo = 0, hi = 0;
  for (int32_t d = 0; d < view.ndim; ++d) {
    const int64_t span = (view.shape[d] - 1) * view.strides[d] * item;
    (span < 0 ? lo : hi) += span;
  }
  const int64_t bytes = hi - lo + item;
  std::vector<unsigned char> host(static_cast<size_t>(bytes));
  synchronize_stream(ctx);
  const char* first = static_cast<const char*>(view.data) + view.byte_offset + lo;
  check_acl(acl().aclrtMemcpy(host.data(), host.size(), first, host.size(), ACL_MEMCPY_DEVICE_TO_HOST),
            "aclrtMemcpy (indices to the host)");
  out.resize(static_cast<size_t>(n));
  std::vector<int64_t> index(shape.size(), 0);
  int64_t offset = -lo;  // bytes from host[0] to the current element
  for (int64_t k = 0; k < n; ++k) {
    int64_t raw;
    if (item == 8) {
      std::memcpy(&raw, host.data() + offset, 8);
    } else {
      int32_t v;
      std::memcpy(&v, host.data() + offset, 4);
      raw = v;
    }
    const int64_t wrapped = raw < 0 ? raw + size : raw;
    if (wrapped < 0 || wrapped >= size) {
      fail(CD_STATUS_OUT_OF_RANGE, "indices: index %lld is out of range for axis %lld of size %lld",
           static_cast<long long>(raw), static_cast<long long>(axis), static_cast<long long>(size));
    }
    out[static_cast<size_t>(k)] = wrapped;
    for (size_t d = shape.size(); d-- > 0;) {  // odometer step in C order
      offset += view.strides[d] * item;
      if (++index[d] < shape[d]) break;
      offset -= view.strides[d] * item * shape[d];
      index[d] = 0;
    }
  }
  return out;
}

void* upload_int64(const cd_kernel_context* ctx, const std::vector<int64_t>& values) {
  const size_t bytes = values.size() * sizeof(int64_t);
  void* device = workspace(ctx, bytes, "the index upload");
  if (bytes != 0) {
    synchronize_stream(ctx);
    check_acl(acl().aclrtMemcpy(device, bytes, values.data(), bytes, ACL_MEMCPY_HOST_TO_DEVICE),
              "aclrtMemcpy (indices to the device)");
  }
  return device;
}

TensorDesc upload_indices(const cd_kernel_context* ctx, const std::vector<int64_t>& values,
                          const std::vector<int64_t>& shape) {
  if (static_cast<int64_t>(values.size()) != numel(shape)) {
    fail(CD_STATUS_INTERNAL, "%zu index values for shape %s", values.size(), shape_string(shape).c_str());
  }
  return TensorDesc::contiguous(upload_int64(ctx, values), CD_DTYPE_INT64, shape);
}

ScalarDesc fill_scalar(double value, cd_dtype_t dtype) {
  if (!chipdock::support::dtype_holds(dtype, value)) {
    fail(CD_STATUS_INVALID_ARGUMENT, "value %g does not fit %s", value, dtype_name(dtype));
  }
  switch (dtype) {
    case CD_DTYPE_FLOAT32: case CD_DTYPE_FLOAT16: case CD_DTYPE_BFLOAT16: case CD_DTYPE_FLOAT64:
      return ScalarDesc(value, ACL_DOUBLE);
    case CD_DTYPE_BOOL: return ScalarDesc(static_cast<int64_t>(value != 0.0), ACL_BOOL);
    default: return ScalarDesc(static_cast<int64_t>(std::trunc(value)), ACL_INT64);
  }
}

}  // namespace chipdock_npu::movement
