// Tensor views (see tensor.h).
#include "tensor.h"

#include <optional>
#include <utility>

#include "../error.h"
#include "chipdock/support/dtype_info.h"
#include "chipdock/support/checked_math.h"

namespace chipdock_cpu {
namespace {

[[noreturn]] void size_overflow(const char* what) {
  fail(CD_STATUS_INVALID_ARGUMENT, "%s: sizes overflow int64", what);
}

void check_header(const cd_tensor_view& v, int32_t device, const char* what) {
  if (v.struct_size < CD_STRUCT_SIZE(cd_tensor_view, device)) {
    fail(CD_STATUS_INVALID_ARGUMENT, "%s: struct_size %zu is smaller than a v1.0 view (%zu)",
         what, v.struct_size, CD_STRUCT_SIZE(cd_tensor_view, device));
  }
  if (v.format != CD_FORMAT_STRIDED) {
    fail(CD_STATUS_INVALID_ARGUMENT, "%s: memory format %d is not supported (only STRIDED)",
         what, v.format);
  }
  if (dtype_size(v.dtype) == 0) {
    fail(CD_STATUS_INVALID_ARGUMENT, "%s: unknown dtype %d", what, v.dtype);
  }
  if (v.device != device) {
    fail(CD_STATUS_INVALID_ARGUMENT, "%s is on cpu:%d but the kernel runs on cpu:%d", what,
         v.device, device);
  }
  if (v.ndim < 0 || v.ndim > kMaxDims) {
    fail(CD_STATUS_INVALID_ARGUMENT, "%s: ndim %d is not in [0, %d]", what, v.ndim, kMaxDims);
  }
  if (v.ndim > 0 && (v.shape == nullptr || v.strides == nullptr)) {
    fail(CD_STATUS_INVALID_ARGUMENT, "%s: shape or strides is NULL with ndim %d", what,
         v.ndim);
  }
}

// Resolves the bytes the view can reach: element offsets span [lo, hi]
// around the origin (lo <= 0 with negative strides).
void resolve_extent(const cd_tensor_view& v, ViewRef& t, const char* what) {
  using chipdock::support::checked_add;
  using chipdock::support::checked_mul;
  const std::optional<chipdock::support::ViewExtent> extent =
      chipdock::support::checked_view_extent(t.shape, t.strides, static_cast<size_t>(t.ndim));
  if (!extent) size_overflow(what);
  const int64_t lo = extent->lo, hi = extent->hi;
  const int64_t item = static_cast<int64_t>(t.itemsize);
  const std::optional<int64_t> lo_bytes = checked_mul(lo, item);
  const std::optional<int64_t> first = lo_bytes ? checked_add(v.byte_offset, *lo_bytes) : std::nullopt;
  const std::optional<int64_t> reach = chipdock::support::checked_sub(hi, lo);
  const std::optional<int64_t> elements = reach ? checked_add(*reach, 1) : std::nullopt;
  const std::optional<int64_t> count = elements ? checked_mul(*elements, item) : std::nullopt;
  if (!first || !count) size_overflow(what);
  // Integer arithmetic on the device address: it may be a tagged (strict
  // mode) address that must not be turned into a host pointer here.
  const uintptr_t start = reinterpret_cast<uintptr_t>(v.data) + static_cast<uintptr_t>(*first);
  t.range = resolve_device_range(v.device, reinterpret_cast<const void*>(start),
                                 static_cast<size_t>(*count), what);
  t.origin = t.range.host - lo * item;
}

}  // namespace

// The kit's tables (chipdock/support/dtype_info.h), with a printable name for a value cd_base.h does not define.
size_t dtype_size(cd_dtype_t dtype) { return chipdock::support::dtype_size(dtype); }

const char* dtype_name(cd_dtype_t dtype) {
  const char* name = chipdock::support::dtype_name(dtype);
  return name != nullptr ? name : "unknown dtype";
}

ViewRef resolve_view_ref(const cd_tensor_view& v, int32_t device, const char* what) {
  check_header(v, device, what);
  ViewRef t;
  t.dtype = v.dtype;
  t.itemsize = dtype_size(v.dtype);
  t.ndim = v.ndim;
  t.shape = v.shape;
  t.strides = v.strides;
  for (int32_t i = 0; i < v.ndim; ++i) {
    if (t.shape[i] < 0) {
      fail(CD_STATUS_INVALID_ARGUMENT, "%s: shape[%d] = %lld is negative", what, i,
           static_cast<long long>(t.shape[i]));
    }
  }
  const std::optional<int64_t> numel =
      chipdock::support::checked_numel(t.shape, static_cast<size_t>(t.ndim));
  if (!numel) size_overflow(what);
  t.numel = *numel;
  if (t.numel != 0) resolve_extent(v, t, what);
  return t;
}

HostTensor resolve_view(const cd_tensor_view& v, int32_t device, const char* what) {
  ViewRef r = resolve_view_ref(v, device, what);
  HostTensor t;
  t.dtype = r.dtype;
  t.itemsize = r.itemsize;
  t.shape.assign(r.shape, r.shape + r.ndim);
  t.strides.assign(r.strides, r.strides + r.ndim);
  t.numel = r.numel;
  t.range = std::move(r.range);
  t.origin = r.origin;
  return t;
}

void check_context(const cd_kernel_context* ctx, int32_t min_inputs, int32_t max_inputs,
                   int32_t min_outputs, int32_t max_outputs) {
  require_non_null(ctx, "ctx");
  if (ctx->struct_size < CD_STRUCT_SIZE(cd_kernel_context, device)) {
    fail(CD_STATUS_INVALID_ARGUMENT, "ctx->struct_size %zu is smaller than a v1.0 context",
         ctx->struct_size);
  }
  const bool inputs_ok =
      ctx->num_inputs >= min_inputs && (max_inputs < 0 || ctx->num_inputs <= max_inputs);
  const bool outputs_ok =
      ctx->num_outputs >= min_outputs && (max_outputs < 0 || ctx->num_outputs <= max_outputs);
  if (!inputs_ok || !outputs_ok) {
    auto range = [](int32_t lo, int32_t hi) {
      if (hi < 0) return format("at least %d", lo);
      if (lo == hi) return format("%d", lo);
      return format("%d to %d", lo, hi);
    };
    fail(CD_STATUS_INVALID_ARGUMENT, "expects %s input(s) and %s output(s), got %d and %d",
         range(min_inputs, max_inputs).c_str(), range(min_outputs, max_outputs).c_str(),
         ctx->num_inputs, ctx->num_outputs);
  }
  if (ctx->num_inputs > 0) require_non_null(ctx->inputs, "ctx->inputs");
  require_non_null(ctx->outputs, "ctx->outputs");
  for (int32_t i = 0; i < ctx->num_inputs; ++i) {
    if (ctx->inputs[i] == nullptr) fail(CD_STATUS_INVALID_ARGUMENT, "ctx->inputs[%d] is NULL", i);
  }
  for (int32_t i = 0; i < ctx->num_outputs; ++i) {
    if (ctx->outputs[i] == nullptr) {
      fail(CD_STATUS_INVALID_ARGUMENT, "ctx->outputs[%d] is NULL", i);
    }
  }
  if (ctx->num_attributes > 0) require_non_null(ctx->attributes, "ctx->attributes");
}

}  // namespace chipdock_cpu
