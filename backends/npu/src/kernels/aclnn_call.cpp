// Descriptors and the two-phase call (see aclnn_call.h).
#include "aclnn_call.h"

#include <cstring>

#include "chipdock/support/core_link.h"
#include "chipdock/support/dtype_info.h"
#include "chipdock/support/error.h"

namespace chipdock_npu {

using chipdock::support::fail;

aclDataType acl_dtype(cd_dtype_t dtype) {
  switch (dtype) {
    case CD_DTYPE_FLOAT32: return ACL_FLOAT;
    case CD_DTYPE_FLOAT16: return ACL_FLOAT16;
    case CD_DTYPE_BFLOAT16: return ACL_BF16;
    case CD_DTYPE_FLOAT64: return ACL_DOUBLE;
    case CD_DTYPE_INT8: return ACL_INT8;
    case CD_DTYPE_INT16: return ACL_INT16;
    case CD_DTYPE_INT32: return ACL_INT32;
    case CD_DTYPE_INT64: return ACL_INT64;
    case CD_DTYPE_UINT8: return ACL_UINT8;
    case CD_DTYPE_BOOL: return ACL_BOOL;
    default: fail(CD_STATUS_INVALID_ARGUMENT, "dtype %d has no aclDataType", dtype);
  }
}

size_t dtype_size(cd_dtype_t dtype) {
  const size_t bytes = chipdock::support::dtype_size(dtype);
  if (bytes == 0) fail(CD_STATUS_INVALID_ARGUMENT, "unknown dtype %d", dtype);
  return bytes;
}

namespace {

// The smallest 1-D storage holding every element of a view with
// non-negative strides that starts `offset` elements in.
int64_t storage_extent(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides, int64_t offset) {
  int64_t last = offset;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 0) return 0;
    last += (shape[d] - 1) * strides[d];
  }
  return last + 1;
}

int64_t element_offset(const cd_tensor_view& view) {
  const int64_t item = static_cast<int64_t>(dtype_size(view.dtype));
  if (view.byte_offset % item != 0) {
    fail(CD_STATUS_INVALID_ARGUMENT, "byte_offset %lld is not a multiple of the %lld-byte element",
         static_cast<long long>(view.byte_offset), static_cast<long long>(item));
  }
  return view.byte_offset / item;
}

void require_strided(const cd_tensor_view& view) {
  if (view.format != CD_FORMAT_STRIDED) {
    fail(CD_STATUS_INVALID_ARGUMENT, "tensor format %d is not CD_FORMAT_STRIDED", view.format);
  }
}

}  // namespace

TensorDesc TensorDesc::make(void* data, cd_dtype_t dtype, const std::vector<int64_t>& shape,
                            const std::vector<int64_t>& strides, int64_t offset,
                            const std::vector<int64_t>& storage_shape) {
  TensorDesc desc;
  desc.tensor_ = acl().aclCreateTensor(shape.data(), shape.size(), acl_dtype(dtype), strides.data(), offset,
                                       ACL_FORMAT_ND, storage_shape.data(), storage_shape.size(), data);
  if (desc.tensor_ == nullptr) {
    fail(CD_STATUS_OUT_OF_MEMORY, "aclCreateTensor returned NULL (%s)", recent_error_message().c_str());
  }
  return desc;
}

TensorDesc TensorDesc::contiguous(void* data, cd_dtype_t dtype, const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) strides[d - 1] = strides[d] * shape[d];
  int64_t numel = 1;
  for (int64_t s : shape) numel *= s;
  return make(data, dtype, shape, strides, 0, {numel});
}

TensorDesc::TensorDesc(const cd_kernel_context* ctx, const cd_tensor_view& view) {
  require_strided(view);
  std::vector<int64_t> shape(view.shape, view.shape + view.ndim);
  std::vector<int64_t> strides(view.strides, view.strides + view.ndim);
  bool negative = false;
  for (int64_t s : strides) negative = negative || s < 0;
  if (negative) {
    // aclnn tensors take non-negative strides only: a flipped copy.
    void* data = materialize_positive_strides(ctx, view, &strides);
    *this = make(data, view.dtype, shape, strides, 0, {storage_extent(shape, strides, 0)});
    return;
  }
  const int64_t offset = element_offset(view);
  *this = make(view.data, view.dtype, shape, strides, offset, {storage_extent(shape, strides, offset)});
}

TensorDesc::TensorDesc(const cd_kernel_context* ctx, const cd_tensor_view& view, const std::vector<int64_t>& shape,
                       const std::vector<int64_t>& strides, int64_t extra_offset) {
  (void)ctx;
  require_strided(view);
  for (int64_t s : strides) {
    if (s < 0) fail(CD_STATUS_INTERNAL, "a reshaped descriptor with a negative stride");
  }
  const int64_t offset = element_offset(view) + extra_offset;
  *this = make(view.data, view.dtype, shape, strides, offset, {storage_extent(shape, strides, offset)});
}

TensorDesc& TensorDesc::operator=(TensorDesc&& other) noexcept {
  if (this != &other) {
    if (tensor_ != nullptr) acl().aclDestroyTensor(tensor_);
    tensor_ = std::exchange(other.tensor_, nullptr);
  }
  return *this;
}

TensorDesc::~TensorDesc() {
  if (tensor_ != nullptr) acl().aclDestroyTensor(tensor_);
}

ScalarDesc::ScalarDesc(double value, aclDataType dtype) {
  switch (dtype) {
    case ACL_DOUBLE: std::memcpy(value_, &value, sizeof value); break;
    case ACL_FLOAT: case ACL_FLOAT16: case ACL_BF16: {
      // aclnn reads a float16/bfloat16 scalar's value as float (its scalar
      // keeps the host value and converts on use), so store it as float.
      const float f = static_cast<float>(value);
      std::memcpy(value_, &f, sizeof f);
      dtype = ACL_FLOAT;
      break;
    }
    default: fail(CD_STATUS_INTERNAL, "ScalarDesc(double) with aclDataType %d", static_cast<int>(dtype));
  }
  scalar_ = acl().aclCreateScalar(value_, dtype);
  if (scalar_ == nullptr) fail(CD_STATUS_OUT_OF_MEMORY, "aclCreateScalar returned NULL");
}

ScalarDesc::ScalarDesc(int64_t value, aclDataType dtype) {
  switch (dtype) {
    case ACL_INT64: std::memcpy(value_, &value, 8); break;
    case ACL_INT32: { const int32_t v = static_cast<int32_t>(value); std::memcpy(value_, &v, 4); break; }
    case ACL_INT16: { const int16_t v = static_cast<int16_t>(value); std::memcpy(value_, &v, 2); break; }
    case ACL_INT8: { const int8_t v = static_cast<int8_t>(value); std::memcpy(value_, &v, 1); break; }
    case ACL_UINT8: { const uint8_t v = static_cast<uint8_t>(value); std::memcpy(value_, &v, 1); break; }
    case ACL_BOOL: { const bool v = value != 0; std::memcpy(value_, &v, 1); break; }
    default: fail(CD_STATUS_INTERNAL, "ScalarDesc(int64_t) with aclDataType %d", static_cast<int>(dtype));
  }
  scalar_ = acl().aclCreateScalar(value_, dtype);
  if (scalar_ == nullptr) fail(CD_STATUS_OUT_OF_MEMORY, "aclCreateScalar returned NULL");
}

ScalarDesc::~ScalarDesc() {
  if (scalar_ != nullptr) acl().aclDestroyScalar(scalar_);
}

IntArrayDesc::IntArrayDesc(const std::vector<int64_t>& values) {
  array_ = acl().aclCreateIntArray(values.data(), values.size());
  if (array_ == nullptr) fail(CD_STATUS_OUT_OF_MEMORY, "aclCreateIntArray returned NULL");
}
IntArrayDesc::~IntArrayDesc() {
  if (array_ != nullptr) acl().aclDestroyIntArray(array_);
}

FloatArrayDesc::FloatArrayDesc(const std::vector<float>& values) {
  array_ = acl().aclCreateFloatArray(values.data(), values.size());
  if (array_ == nullptr) fail(CD_STATUS_OUT_OF_MEMORY, "aclCreateFloatArray returned NULL");
}
FloatArrayDesc::~FloatArrayDesc() {
  if (array_ != nullptr) acl().aclDestroyFloatArray(array_);
}

BoolArrayDesc::BoolArrayDesc(const std::vector<bool>& values) {
  const std::vector<char> bytes(values.begin(), values.end());  // vector<bool> has no data()
  array_ = acl().aclCreateBoolArray(reinterpret_cast<const bool*>(bytes.data()), bytes.size());
  if (array_ == nullptr) fail(CD_STATUS_OUT_OF_MEMORY, "aclCreateBoolArray returned NULL");
}
BoolArrayDesc::~BoolArrayDesc() {
  if (array_ != nullptr) acl().aclDestroyBoolArray(array_);
}

TensorListDesc::TensorListDesc(std::vector<TensorDesc>&& tensors) {
  std::vector<const aclTensor*> raw;
  raw.reserve(tensors.size());
  for (const TensorDesc& t : tensors) raw.push_back(t.get());
  list_ = acl().aclCreateTensorList(raw.data(), raw.size());
  if (list_ == nullptr) fail(CD_STATUS_OUT_OF_MEMORY, "aclCreateTensorList returned NULL");
  for (TensorDesc& t : tensors) t.release();  // now the list's
}
TensorListDesc::~TensorListDesc() {
  if (list_ != nullptr) acl().aclDestroyTensorList(list_);
}

void* workspace(const cd_kernel_context* ctx, uint64_t bytes, const char* what) {
  if (bytes == 0) return nullptr;
  const cd_core_api* core = chipdock::support::core();
  if (core == nullptr || core->workspace_allocate == nullptr) {
    fail(CD_STATUS_UNAVAILABLE, "the core offers no workspace service (needed by %s)", what);
  }
  void* out = nullptr;
  const cd_status_t status = core->workspace_allocate(ctx, static_cast<size_t>(bytes), &out);
  if (status != CD_STATUS_OK) {
    fail(status, "%s needs %llu bytes of workspace on npu:%d, which the core could not provide (status %d)", what,
         static_cast<unsigned long long>(bytes), ctx->device, status);
  }
  return out;
}

}  // namespace chipdock_npu
