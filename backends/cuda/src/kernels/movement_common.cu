// Shared helpers of the data-movement kernels (see movement.cuh), and
// register_movement, which registers the family.
#include <cstring>

#include "chipdock/support/dtype_info.h"
#include "chipdock/support/dtype_range.h"

#include "../core_link.h"
#include "../resources.h"
#include "movement.cuh"

namespace chipdock_cuda {

void register_movement(cd_kernel_registry* registry) {
  mv::register_layout(registry);
  mv::register_index(registry);
  mv::register_fill(registry);
  mv::register_sort(registry);
}

namespace mv {

const cd_dtype_t kAllDtypes[10] = {CD_DTYPE_FLOAT32, CD_DTYPE_FLOAT16, CD_DTYPE_BFLOAT16, CD_DTYPE_FLOAT64,
                                   CD_DTYPE_INT8,    CD_DTYPE_INT16,   CD_DTYPE_INT32,    CD_DTYPE_INT64,
                                   CD_DTYPE_UINT8,   CD_DTYPE_BOOL};
const cd_dtype_t kNumericDtypes[9] = {CD_DTYPE_FLOAT32, CD_DTYPE_FLOAT16, CD_DTYPE_BFLOAT16,
                                      CD_DTYPE_FLOAT64, CD_DTYPE_INT8,    CD_DTYPE_INT16,
                                      CD_DTYPE_INT32,   CD_DTYPE_INT64,   CD_DTYPE_UINT8};
const cd_dtype_t kFloatDtypes[4] = {CD_DTYPE_FLOAT32, CD_DTYPE_FLOAT16, CD_DTYPE_BFLOAT16, CD_DTYPE_FLOAT64};
const cd_dtype_t kIndexDtypes[2] = {CD_DTYPE_INT32, CD_DTYPE_INT64};

const char* dtype_name(cd_dtype_t dtype) {
  const char* name = chipdock::support::dtype_name(dtype);  // the kit's table (chipdock/support/dtype_info.h)
  return name != nullptr ? name : "unknown";
}

int64_t itemsize(cd_dtype_t dtype) {
  switch (dtype) {
    case CD_DTYPE_FLOAT64: case CD_DTYPE_INT64: return 8;
    case CD_DTYPE_FLOAT32: case CD_DTYPE_INT32: return 4;
    case CD_DTYPE_FLOAT16: case CD_DTYPE_BFLOAT16: case CD_DTYPE_INT16: return 2;
    case CD_DTYPE_INT8: case CD_DTYPE_UINT8: case CD_DTYPE_BOOL: return 1;
    default: fail(CD_STATUS_INVALID_ARGUMENT, "unknown dtype %d", dtype);
  }
}

bool Tensor::contiguous() const {
  if (numel == 0) return true;
  int64_t expected = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    if (shape[i] == 1) continue;
    if (strides[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

std::vector<int64_t> Tensor::byte_strides() const {
  std::vector<int64_t> s(strides.size());
  for (size_t i = 0; i < s.size(); ++i) s[i] = strides[i] * item;
  return s;
}

std::vector<int64_t> contiguous_byte_strides(const std::vector<int64_t>& shape, int64_t item) {
  std::vector<int64_t> s(shape.size());
  int64_t stride = item;
  for (size_t i = shape.size(); i-- > 0;) {
    s[i] = stride;
    stride *= shape[i];
  }
  return s;
}

Call begin_call(const cd_kernel_context* ctx, int min_in, int max_in, int min_out, int max_out) {
  require_non_null(ctx, "ctx");
  const bool inputs_ok = ctx->num_inputs >= min_in && (max_in < 0 || ctx->num_inputs <= max_in);
  const bool outputs_ok = ctx->num_outputs >= min_out && (max_out < 0 || ctx->num_outputs <= max_out);
  if (!inputs_ok || !outputs_ok) {
    fail(CD_STATUS_INVALID_ARGUMENT, "expects %d%s input(s) and %d%s output(s), got %d and %d", min_in,
         max_in < 0 ? " or more" : max_in == min_in ? "" : " or more", min_out,
         max_out < 0 ? " or more" : max_out == min_out ? "" : " or more", ctx->num_inputs, ctx->num_outputs);
  }
  if (ctx->num_inputs > 0) require_non_null(ctx->inputs, "ctx->inputs");
  require_non_null(ctx->outputs, "ctx->outputs");
  if (ctx->num_attributes > 0) require_non_null(ctx->attributes, "ctx->attributes");
  cd_stream* stream = live_stream(ctx->stream);
  if (stream->device != ctx->device) {
    fail(CD_STATUS_INVALID_ARGUMENT, "the stream is on device %d, the call on %d", stream->device, ctx->device);
  }
  use_device(ctx->device);
  return Call{ctx, stream->stream, ctx->device};
}

namespace {

Tensor resolve(const Call& call, const cd_tensor_view* v, const char* what) {
  if (v == nullptr) fail(CD_STATUS_INVALID_ARGUMENT, "%s is NULL", what);
  if (v->format != CD_FORMAT_STRIDED) fail(CD_STATUS_INVALID_ARGUMENT, "%s has unknown format %d", what, v->format);
  if (v->ndim < 0 || (v->ndim > 0 && (v->shape == nullptr || v->strides == nullptr))) {
    fail(CD_STATUS_INVALID_ARGUMENT, "%s has a bad shape", what);
  }
  if (v->device != call.device) {
    fail(CD_STATUS_INVALID_ARGUMENT, "%s is on device %d, the call on %d", what, v->device, call.device);
  }
  Tensor t;
  t.dtype = v->dtype;
  t.item = itemsize(v->dtype);
  t.shape.assign(v->shape, v->shape + v->ndim);
  t.strides.assign(v->strides, v->strides + v->ndim);
  t.numel = 1;
  for (int32_t d = 0; d < v->ndim; ++d) {
    if (t.shape[d] < 0) fail(CD_STATUS_INVALID_ARGUMENT, "%s: shape[%d] is negative", what, d);
    t.numel *= t.shape[d];
  }
  t.origin = static_cast<char*>(v->data) + v->byte_offset;
  if (t.numel == 0) return t;
  if (reinterpret_cast<uintptr_t>(t.origin) % static_cast<uintptr_t>(t.item) != 0) {
    fail(CD_STATUS_INVALID_ARGUMENT, "%s is not aligned to its element size", what);
  }
  int64_t lo = 0, hi = 0;
  for (int32_t d = 0; d < v->ndim; ++d) {
    const int64_t span = t.strides[d] * (t.shape[d] - 1) * t.item;
    (span < 0 ? lo : hi) += span;
  }
  check_range(call.device, t.origin + lo, static_cast<size_t>(hi - lo + t.item), what);
  return t;
}

}  // namespace

Tensor input(const Call& call, int32_t i) {
  const std::string what = format("input %d", i);
  return resolve(call, call.ctx->inputs[i], what.c_str());
}

Tensor output(const Call& call, int32_t i) {
  const std::string what = format("output %d", i);
  Tensor t = resolve(call, call.ctx->outputs[i], what.c_str());
  if (!t.contiguous()) fail(CD_STATUS_INVALID_ARGUMENT, "%s is not C-contiguous (outputs must be)", what.c_str());
  return t;
}

// --- attributes ----------------------------------------------------------------------

int64_t axis_attr(const Call& call, const char* name, int32_t ndim) {
  const int64_t axis = int_attribute(call.ctx, name);
  if (axis < 0 || axis >= ndim) {
    fail(CD_STATUS_INVALID_ARGUMENT, "attribute '%s' = %lld is not in [0, %d) (the dispatcher normalizes axes)",
         name, static_cast<long long>(axis), ndim);
  }
  return axis;
}

// --- shapes --------------------------------------------------------------------------

int64_t product(const std::vector<int64_t>& v, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end && i < v.size(); ++i) p *= v[i];
  return p;
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += format("%s%lld", i ? ", " : "", static_cast<long long>(shape[i]));
  if (shape.size() == 1) s += ",";
  return s + ")";
}

void require_dtype(const Tensor& t, cd_dtype_t dtype, const char* what) {
  if (t.dtype != dtype) {
    fail(CD_STATUS_INVALID_ARGUMENT, "%s is %s, expected %s", what, dtype_name(t.dtype), dtype_name(dtype));
  }
}

void require_shape(const Tensor& t, const std::vector<int64_t>& shape, const char* what) {
  if (t.shape != shape) {
    fail(CD_STATUS_INVALID_ARGUMENT, "%s has shape %s, expected %s", what, shape_string(t.shape).c_str(),
         shape_string(shape).c_str());
  }
}

void require_dims(int32_t ndim, const char* what) {
  if (ndim > kMaxDims) fail(CD_STATUS_UNIMPLEMENTED, "%s has %d dims; at most %d are supported", what, ndim, kMaxDims);
}

void* workspace(const Call& call, size_t bytes) {
  if (bytes == 0) return nullptr;
  const cd_core_api* c = core();
  if (c == nullptr || !core_has(CD_STRUCT_SIZE(cd_core_api, workspace_allocate)) || c->workspace_allocate == nullptr) {
    fail(CD_STATUS_UNAVAILABLE, "the core offers no workspace_allocate service");
  }
  void* p = nullptr;
  const cd_status_t status = c->workspace_allocate(call.ctx, bytes, &p);
  if (status != CD_STATUS_OK || p == nullptr) {
    fail(status == CD_STATUS_OK ? CD_STATUS_OUT_OF_MEMORY : status, "no workspace of %zu bytes (status %d)", bytes,
         status);
  }
  return p;
}

unsigned grid_for(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 65535 * 16 ? (blocks < 1 ? 1 : blocks) : 65535 * 16);
}

void check_launch(const char* what) { check(cudaGetLastError(), what); }

// --- index errors --------------------------------------------------------------------

IndexCheck::IndexCheck(const Call& call)
    : call_(call), fault_(static_cast<IndexFault*>(workspace(call, sizeof(IndexFault)))) {
  chipdock_cuda::check(cudaMemsetAsync(fault_, 0, sizeof(IndexFault), call.stream), "clearing the index-fault record");
}

void IndexCheck::check() const {
  IndexFault host{};
  chipdock_cuda::check(cudaMemcpyAsync(&host, fault_, sizeof(host), cudaMemcpyDeviceToHost, call_.stream),
                       "reading the index-fault record");
  chipdock_cuda::check(cudaStreamSynchronize(call_.stream), "waiting for the index check");
  if (host.flag != 0) {
    fail(CD_STATUS_OUT_OF_RANGE, "index %lld is out of range for axis %lld of size %lld",
         static_cast<long long>(host.index), static_cast<long long>(host.axis), static_cast<long long>(host.size));
  }
}

// --- values --------------------------------------------------------------------------

bool fits_dtype(double v, cd_dtype_t dtype) { return chipdock::support::dtype_holds(dtype, v); }

uint64_t value_bits(double v, cd_dtype_t dtype) {
  uint64_t bits = 0;
  ew::dispatch<ew::kAllMask>(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T x = from_double<T>(v);
    std::memcpy(&bits, &x, sizeof(T));
  });
  return bits;
}

}  // namespace mv
}  // namespace chipdock_cuda
