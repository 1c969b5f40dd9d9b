// The elementwise family's host side: argument checks, dim coalescing,
// attributes and registration (kernels: elementwise_{binary,unary,compare,
// cast}.cu, machinery: elementwise.cuh).
#include "elementwise.cuh"

#include <array>
#include <cstring>
#include <deque>

#include "../resources.h"
#include "kernels.h"

namespace chipdock_cuda {
namespace ew {
namespace {

int64_t itemsize(cd_dtype_t d) {
  switch (d) {
    case CD_DTYPE_FLOAT64: case CD_DTYPE_INT64: return 8;
    case CD_DTYPE_FLOAT32: case CD_DTYPE_INT32: return 4;
    case CD_DTYPE_FLOAT16: case CD_DTYPE_BFLOAT16: case CD_DTYPE_INT16: return 2;
    default: return 1;
  }
}

void check_view(const cd_tensor_view* v, const cd_tensor_view& out, int32_t device, cd_dtype_t dtype,
                const char* what, int index) {
  if (v == nullptr) fail(CD_STATUS_INVALID_ARGUMENT, "%s %d is NULL", what, index);
  if (v->format != CD_FORMAT_STRIDED) fail(CD_STATUS_INVALID_ARGUMENT, "%s %d has unknown format %d", what, index, v->format);
  if (v->ndim < 0 || (v->ndim > 0 && (v->shape == nullptr || v->strides == nullptr))) {
    fail(CD_STATUS_INVALID_ARGUMENT, "%s %d has a bad shape", what, index);
  }
  if (v->device != device) {
    fail(CD_STATUS_INVALID_ARGUMENT, "%s %d is on device %d, the call on %d", what, index, v->device, device);
  }
  if (v->dtype != dtype) {
    fail(CD_STATUS_INVALID_ARGUMENT, "%s %d has dtype %d, the kernel expects %d", what, index, v->dtype, dtype);
  }
  if (v->ndim != out.ndim) fail(CD_STATUS_INVALID_ARGUMENT, "%s %d has ndim %d, the output %d", what, index, v->ndim, out.ndim);
  for (int32_t d = 0; d < v->ndim; ++d) {
    if (v->shape[d] != out.shape[d] || v->shape[d] < 0) {
      fail(CD_STATUS_INVALID_ARGUMENT, "%s %d differs from the output's shape in dim %d (%lld vs %lld)", what, index,
           d, static_cast<long long>(v->shape[d]), static_cast<long long>(out.shape[d]));
    }
  }
}

void check_view_range(const cd_tensor_view& v, int32_t device, int64_t item, const char* what) {
  int64_t lo = 0, hi = 0;
  for (int32_t d = 0; d < v.ndim; ++d) {
    const int64_t span = v.strides[d] * (v.shape[d] - 1) * item;
    (span < 0 ? lo : hi) += span;
  }
  const char* origin = static_cast<const char*>(v.data) + v.byte_offset;
  check_range(device, origin + lo, static_cast<size_t>(hi - lo + item), what);
}

}  // namespace

bool prepare(const cd_kernel_context* ctx, int num_in, const cd_dtype_t* dtypes, Loop* loop, Operands* ops,
             cudaStream_t* stream_out) {
  require_non_null(ctx, "ctx");
  if (ctx->num_inputs != num_in || ctx->num_outputs != 1) {
    fail(CD_STATUS_INVALID_ARGUMENT, "%s takes %d inputs and 1 output, got %d and %d", ctx->op ? ctx->op : "?",
         num_in, ctx->num_inputs, ctx->num_outputs);
  }
  if (ctx->inputs == nullptr || ctx->outputs == nullptr) fail(CD_STATUS_INVALID_ARGUMENT, "no operand array");
  cd_stream* stream = live_stream(ctx->stream);
  if (stream->device != ctx->device) {
    fail(CD_STATUS_INVALID_ARGUMENT, "the stream is on device %d, the call on %d", stream->device, ctx->device);
  }
  const cd_tensor_view* out = ctx->outputs[0];
  require_non_null(out, "output 0");
  const cd_tensor_view* views[kMaxOperands] = {out, nullptr, nullptr, nullptr};
  check_view(out, *out, ctx->device, dtypes[0], "output", 0);
  for (int k = 0; k < num_in; ++k) {
    views[k + 1] = ctx->inputs[k];
    check_view(views[k + 1], *out, ctx->device, dtypes[k + 1], "input", k);
  }
  int64_t numel = 1;
  for (int32_t d = 0; d < out->ndim; ++d) {
    numel *= out->shape[d];
    if (out->strides[d] == 0 && out->shape[d] > 1) {
      fail(CD_STATUS_INVALID_ARGUMENT, "output has stride 0 in dim %d (a broadcast view cannot be written)", d);
    }
  }
  if (numel == 0) return false;
  const int n = num_in + 1;
  int64_t item[kMaxOperands];
  const char* base[kMaxOperands];
  for (int o = 0; o < n; ++o) {
    item[o] = itemsize(dtypes[o]);
    base[o] = static_cast<const char*>(views[o]->data) + views[o]->byte_offset;
    if (reinterpret_cast<uintptr_t>(base[o]) % item[o] != 0) {
      fail(CD_STATUS_INVALID_ARGUMENT, "%s %d is not aligned to its element size", o == 0 ? "output" : "input",
           o == 0 ? 0 : o - 1);
    }
  }
  use_device(ctx->device);
  check_view_range(*out, ctx->device, item[0], "output 0");
  for (int k = 0; k < num_in; ++k) check_view_range(*views[k + 1], ctx->device, item[k + 1], "an input");

  // Coalesce: drop size-1 dims, merge a dim into its outer neighbour when
  // every operand steps over the pair as one.
  *loop = Loop{};
  loop->numel = numel;
  for (int32_t d = 0; d < out->ndim; ++d) {
    const int64_t len = out->shape[d];
    if (len == 1) continue;
    const int32_t last = loop->ndim - 1;
    bool merge = last >= 0;
    for (int o = 0; o < n && merge; ++o) {
      merge = loop->stride[o][last] == views[o]->strides[d] * item[o] * len;
    }
    if (merge) {
      loop->shape[last] *= len;
      for (int o = 0; o < n; ++o) loop->stride[o][last] = views[o]->strides[d] * item[o];
      continue;
    }
    if (loop->ndim == kMaxDims) fail(CD_STATUS_UNIMPLEMENTED, "more than %d non-mergeable dimensions", kMaxDims);
    loop->shape[loop->ndim] = len;
    for (int o = 0; o < n; ++o) loop->stride[o][loop->ndim] = views[o]->strides[d] * item[o];
    ++loop->ndim;
  }
  loop->contiguous = 1;
  if (loop->ndim == 1) {
    for (int o = 0; o < n; ++o) loop->contiguous &= loop->stride[o][0] == item[o] ? 1 : 0;
  } else if (loop->ndim > 1) {
    loop->contiguous = 0;
  }
  *ops = Operands{};
  ops->out = const_cast<char*>(base[0]);
  for (int k = 0; k < num_in; ++k) ops->in[k] = base[k + 1];
  for (int k = num_in; k < kMaxOperands - 1; ++k) ops->in[k] = base[1];  // never read
  *stream_out = stream->stream;
  return true;
}

void register_one(cd_kernel_registry* registry, const char* op, cd_kernel_fn fn, const cd_dtype_t* dtypes,
                  int num_dtypes) {
  // The signatures outlive registration (as copy.cu's static tables do).
  static std::deque<std::array<cd_dtype_t, kMaxOperands>> signatures;
  std::array<cd_dtype_t, kMaxOperands> sig{};
  for (int i = 0; i < num_dtypes; ++i) sig[i] = dtypes[i];
  signatures.push_back(sig);
  register_kernel(registry, op, signatures.back().data(), num_dtypes, fn);
}

void register_group(cd_kernel_registry* registry, const char* op, cd_kernel_fn fn, uint32_t mask, int num_in,
                    bool bool_out, bool cond_first) {
  for (cd_dtype_t d = CD_DTYPE_FLOAT32; d <= CD_DTYPE_BOOL; ++d) {
    if ((mask & bit(d)) == 0) continue;
    cd_dtype_t sig[kMaxOperands];
    for (int i = 0; i < num_in; ++i) sig[i] = d;
    if (cond_first) sig[0] = CD_DTYPE_BOOL;
    sig[num_in] = bool_out ? CD_DTYPE_BOOL : d;
    register_one(registry, op, fn, sig, num_in + 1);
  }
}

}  // namespace ew

void register_elementwise(cd_kernel_registry* registry) {
  ew::register_binary(registry);
  ew::register_unary(registry);
  ew::register_compare(registry);
  ew::register_cast(registry);
}

}  // namespace chipdock_cuda
