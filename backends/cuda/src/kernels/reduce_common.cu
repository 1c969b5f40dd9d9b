// Host side shared by the reduction and normalization kernels (reduce.cuh):
// context, operand and attribute checks, dimension coalescing, launch
// checks and registration; and register_reductions, which registers the
// family.
#include <array>
#include <cstring>
#include <deque>

#include "../core_link.h"
#include "../resources.h"
#include "kernels.h"
#include "reduce.cuh"

namespace chipdock_cuda {
namespace red {
namespace {

int64_t itemsize(cd_dtype_t d) {
  switch (d) {
    case CD_DTYPE_FLOAT64: case CD_DTYPE_INT64: return 8;
    case CD_DTYPE_FLOAT32: case CD_DTYPE_INT32: return 4;
    case CD_DTYPE_FLOAT16: case CD_DTYPE_BFLOAT16: case CD_DTYPE_INT16: return 2;
    case CD_DTYPE_INT8: case CD_DTYPE_UINT8: case CD_DTYPE_BOOL: return 1;
    default: fail(CD_STATUS_INVALID_ARGUMENT, "unknown dtype %d", d);
  }
}

Tensor resolve(const cd_tensor_view* v, int32_t device, const char* what) {
  if (v == nullptr) fail(CD_STATUS_INVALID_ARGUMENT, "%s is NULL", what);
  if (v->format != CD_FORMAT_STRIDED) fail(CD_STATUS_INVALID_ARGUMENT, "%s has unknown format %d", what, v->format);
  if (v->ndim < 0 || (v->ndim > 0 && (v->shape == nullptr || v->strides == nullptr))) {
    fail(CD_STATUS_INVALID_ARGUMENT, "%s has a bad shape", what);
  }
  if (v->device != device) {
    fail(CD_STATUS_INVALID_ARGUMENT, "%s is on device %d, the call on %d", what, v->device, device);
  }
  Tensor t;
  t.dtype = v->dtype;
  const int64_t item = itemsize(v->dtype);
  t.shape.assign(v->shape, v->shape + v->ndim);
  t.strides.assign(v->strides, v->strides + v->ndim);
  t.numel = 1;
  int64_t lo = 0, hi = 0;
  for (int32_t d = 0; d < v->ndim; ++d) {
    if (t.shape[d] < 0) fail(CD_STATUS_INVALID_ARGUMENT, "%s has a negative size in dim %d", what, d);
    t.numel *= t.shape[d];
    const int64_t span = t.strides[d] * (t.shape[d] - 1) * item;
    (span < 0 ? lo : hi) += span;
  }
  t.origin = static_cast<char*>(v->data) + v->byte_offset;
  if (reinterpret_cast<uintptr_t>(t.origin) % item != 0) {
    fail(CD_STATUS_INVALID_ARGUMENT, "%s is not aligned to its element size", what);
  }
  if (t.numel > 0) check_range(device, t.origin + lo, static_cast<size_t>(hi - lo + item), what);
  return t;
}

}  // namespace

std::vector<Dim> Tensor::dims(size_t begin, size_t end) const {
  std::vector<Dim> d;
  for (size_t i = begin; i < end; ++i) d.push_back({shape[i], strides[i]});
  return d;
}

cudaStream_t begin(const cd_kernel_context* ctx, int32_t min_inputs, int32_t max_inputs) {
  require_non_null(ctx, "ctx");
  if (ctx->num_inputs < min_inputs || ctx->num_inputs > max_inputs || ctx->num_outputs != 1) {
    fail(CD_STATUS_INVALID_ARGUMENT, "%s takes %d to %d inputs and 1 output, got %d and %d",
         ctx->op ? ctx->op : "?", min_inputs, max_inputs, ctx->num_inputs, ctx->num_outputs);
  }
  if ((ctx->num_inputs > 0 && ctx->inputs == nullptr) || ctx->outputs == nullptr) {
    fail(CD_STATUS_INVALID_ARGUMENT, "no operand array");
  }
  cd_stream* stream = live_stream(ctx->stream);
  if (stream->device != ctx->device) {
    fail(CD_STATUS_INVALID_ARGUMENT, "the stream is on device %d, the call on %d", stream->device, ctx->device);
  }
  use_device(ctx->device);
  return stream->stream;
}

Tensor input(const cd_kernel_context* ctx, int32_t i) {
  const std::string what = "input " + std::to_string(i);
  return resolve(ctx->inputs[i], ctx->device, what.c_str());
}

Tensor output(const cd_kernel_context* ctx) { return resolve(ctx->outputs[0], ctx->device, "output 0"); }

void require_dtype(const Tensor& t, cd_dtype_t dtype, const char* what) {
  if (t.dtype != dtype) fail(CD_STATUS_INVALID_ARGUMENT, "%s has dtype %d, expected %d", what, t.dtype, dtype);
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

void require_shape(const Tensor& t, const std::vector<int64_t>& shape, const char* what) {
  if (t.shape != shape) {
    fail(CD_STATUS_INVALID_ARGUMENT, "%s has shape %s, expected %s", what, shape_string(t.shape).c_str(),
         shape_string(shape).c_str());
  }
}

// Outputs are C-contiguous by the kernel contract; the kernels index them
// linearly.
void require_contiguous(const Tensor& t, const char* what) {
  int64_t expected = 1;
  for (size_t k = t.shape.size(); k-- > 0;) {
    if (t.shape[k] != 1 && t.strides[k] != expected) fail(CD_STATUS_INVALID_ARGUMENT, "%s is not C-contiguous", what);
    expected *= t.shape[k];
  }
}

int64_t check_axis(int64_t axis, size_t ndim, const char* name) {
  if (ndim == 0 && (axis == 0 || axis == -1)) return 0;
  if (axis < 0 || axis >= static_cast<int64_t>(ndim)) {
    fail(CD_STATUS_INVALID_ARGUMENT, "attribute '%s' = %lld is out of range for %zu dims (expected normalized)", name,
         static_cast<long long>(axis), ndim);
  }
  return axis;
}

std::vector<Dim> coalesce(const std::vector<Dim>& dims) {
  std::vector<Dim> r;
  for (const Dim& d : dims) {
    if (d.size == 1) continue;
    if (!r.empty() && r.back().stride == d.stride * d.size) {
      r.back().size *= d.size;
      r.back().stride = d.stride;
      continue;
    }
    r.push_back(d);
  }
  return r;
}

int64_t numel_of(const std::vector<Dim>& dims) {
  int64_t n = 1;
  for (const Dim& d : dims) n *= d.size;
  return n;
}

Dims to_dims(const std::vector<Dim>& dims) {
  if (dims.size() > static_cast<size_t>(kMaxDims)) {
    fail(CD_STATUS_UNIMPLEMENTED, "more than %d non-mergeable dimensions", kMaxDims);
  }
  Dims d{};
  d.n = static_cast<int32_t>(dims.size());
  for (size_t k = 0; k < dims.size(); ++k) {
    d.size[k] = dims[k].size;
    d.stride[k] = dims[k].stride;
  }
  return d;
}

bool is_dense(const std::vector<Dim>& dims) { return dims.empty() || (dims.size() == 1 && dims[0].stride == 1); }

unsigned grid_for(int64_t items, int64_t per_block) {
  const int64_t blocks = (items + per_block - 1) / per_block;
  constexpr int64_t kMaxBlocks = int64_t{1} << 20;  // kernels loop over the rest
  return static_cast<unsigned>(blocks < 1 ? 1 : blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

void check_launch(const char* what) { check(cudaGetLastError(), what); }

void* workspace(const cd_kernel_context* ctx, size_t bytes) {
  const cd_core_api* c = core();
  if (c == nullptr || !core_has(CD_STRUCT_SIZE(cd_core_api, workspace_allocate)) || c->workspace_allocate == nullptr) {
    fail(CD_STATUS_UNAVAILABLE, "the core offers no workspace_allocate service");
  }
  void* p = nullptr;
  const cd_status_t status = c->workspace_allocate(ctx, bytes, &p);
  if (status != CD_STATUS_OK || p == nullptr) {
    fail(status != CD_STATUS_OK ? status : CD_STATUS_OUT_OF_MEMORY, "no workspace of %zu bytes for the partial results",
         bytes);
  }
  return p;
}

void register_same(cd_kernel_registry* registry, const char* op, cd_kernel_fn fn, uint32_t mask, int arity,
                   cd_dtype_t last) {
  for (cd_dtype_t d = CD_DTYPE_FLOAT32; d <= CD_DTYPE_BOOL; ++d) {
    if ((mask & ew::bit(d)) == 0) continue;
    // The signatures outlive registration (the core keeps the pointer).
    static std::deque<std::array<cd_dtype_t, 8>> signatures;
    std::array<cd_dtype_t, 8> sig{};
    for (int i = 0; i < arity; ++i) sig[i] = d;
    if (last != CD_DTYPE_INVALID) sig[arity - 1] = last;
    signatures.push_back(sig);
    register_kernel(registry, op, signatures.back().data(), arity, fn);
  }
}

}  // namespace red

void register_reductions(cd_kernel_registry* registry) {
  red::register_reduce_ops(registry);
  red::register_softmax_ops(registry);
  red::register_norm_ops(registry);
}

}  // namespace chipdock_cuda
