// arange (aclnnArange), full (aclnnInplaceFillScalar) and resize (nearest:
// two aclnnGatherV2 with host-computed source tables; linear:
// aclnnUpsampleBilinear2d).
//
// arange: chipdock computes start + i * delta in double and converts once
// (integers truncate toward zero). aclnnArange's out takes FLOAT16, FLOAT,
// DOUBLE, INT32, INT64 and BFLOAT16 (hicann ops-math math/range/docs/
// aclnnArange.md), so those are generated directly where that is exact;
// int8, int16, uint8 and integer outputs of a fractional start or delta are
// generated as DOUBLE in workspace and converted by aclnnInplaceCopy (torch's
// copy_, which truncates toward zero).
//
// resize nearest reads src = min(floor(dst / scale), in - 1) (asymmetric
// coordinates); a gather by exactly that table matches chipdock bit for bit,
// where aclnnUpsampleNearest2d's own float coordinate arithmetic might not.
// resize linear is aclnnUpsampleBilinear2d with alignCorners = false and
// the scales passed through: CANN maps dst to (dst + 0.5) / scale - 0.5,
// clamped at 0 (hicann ops-cv image/upsample_bilinear2d), which is
// chipdock's half-pixel rule. That op takes FLOAT, FLOAT16 and BFLOAT16
// only, so float64 resize is not registered (unsupported/movement.json).
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "chipdock/support/attributes.h"
#include "chipdock/support/dtype_range.h"
#include "movement_common.h"

namespace chipdock_npu::movement {
namespace {

using chipdock::support::fail;

void check_dtype_attribute(const cd_kernel_context* ctx, const cd_tensor_view& out) {
  const int64_t dtype = chipdock::support::int_attribute(ctx, "dtype");
  if (dtype != out.dtype) {
    fail(CD_STATUS_INVALID_ARGUMENT, "attribute dtype = %lld (%s) but the output is %s",
         static_cast<long long>(dtype), dtype_name(static_cast<cd_dtype_t>(dtype)), dtype_name(out.dtype));
  }
}

// ---------------------------------------------------------------------------------
// arange

bool is_integral(double v) { return std::trunc(v) == v && std::fabs(v) < 9.0e15; }

void enqueue_arange(const cd_kernel_context* ctx) {
  check_arity(ctx, 0, 1);
  const cd_tensor_view& out = *ctx->outputs[0];
  check_dtype_attribute(ctx, out);
  require_writable(out, "output 0");
  if (out.dtype == CD_DTYPE_BOOL) fail(CD_STATUS_INVALID_ARGUMENT, "arange of bool");
  const double start = chipdock::support::float_attribute(ctx, "start");
  const double delta = chipdock::support::float_attribute(ctx, "delta");
  const double limit = chipdock::support::float_attribute(ctx, "limit");
  if (!std::isfinite(start) || !std::isfinite(delta) || !std::isfinite(limit) || delta == 0.0) {
    fail(CD_STATUS_INVALID_ARGUMENT, "arange needs finite start, limit, delta and delta != 0 (got %g, %g, %g)",
         start, limit, delta);
  }
  const double count = std::ceil((limit - start) / delta);
  if (!(count < 9.0e18)) fail(CD_STATUS_INVALID_ARGUMENT, "arange of %g elements", count);
  const int64_t n = count > 0.0 ? static_cast<int64_t>(count) : 0;
  require_shape(out, {n}, "output 0");
  if (n == 0) return;
  const double last = start + static_cast<double>(n - 1) * delta;
  if (!chipdock::support::dtype_holds(out.dtype, start) || !chipdock::support::dtype_holds(out.dtype, last)) {
    fail(CD_STATUS_INVALID_ARGUMENT, "arange values from %g to %g do not fit %s", start, last,
         dtype_name(out.dtype));
  }
  TensorDesc dst(ctx, out);
  const bool floating = out.dtype == CD_DTYPE_FLOAT32 || out.dtype == CD_DTYPE_FLOAT16 ||
                        out.dtype == CD_DTYPE_BFLOAT16 || out.dtype == CD_DTYPE_FLOAT64;
  const bool wide_int = out.dtype == CD_DTYPE_INT32 || out.dtype == CD_DTYPE_INT64;
  if (wide_int && is_integral(start) && is_integral(delta)) {
    // Exact in integers; the end passed is the one that yields n elements.
    ScalarDesc s(static_cast<int64_t>(start), ACL_INT64), d(static_cast<int64_t>(delta), ACL_INT64);
    ScalarDesc e(static_cast<int64_t>(start) + n * static_cast<int64_t>(delta), ACL_INT64);
    run_aclnn(ctx, Arange, s.get(), e.get(), d.get(), dst.get());
    return;
  }
  ScalarDesc s(start, ACL_DOUBLE), e(limit, ACL_DOUBLE), d(delta, ACL_DOUBLE);
  if (floating) {
    run_aclnn(ctx, Arange, s.get(), e.get(), d.get(), dst.get());
    return;
  }
  TensorDesc values = scratch_tensor(ctx, CD_DTYPE_FLOAT64, {n}, "arange");
  run_aclnn(ctx, Arange, s.get(), e.get(), d.get(), values.get());
  run_aclnn(ctx, InplaceCopy, dst.get(), values.get());
}

cd_error* arange_kernel(const cd_kernel_context* ctx) noexcept {
  return chipdock::support::guard("arange", [ctx] { enqueue_arange(ctx); });
}

// ---------------------------------------------------------------------------------
// full

void enqueue_full(const cd_kernel_context* ctx) {
  check_arity(ctx, 0, 1);
  const cd_tensor_view& out = *ctx->outputs[0];
  check_dtype_attribute(ctx, out);
  require_writable(out, "output 0");
  require_shape(out, chipdock::support::ints_attribute(ctx, "shape"), "output 0");
  ScalarDesc value = fill_scalar(chipdock::support::float_attribute(ctx, "value"), out.dtype);
  if (numel(shape_of(out)) == 0) return;
  TensorDesc dst(ctx, out);
  run_aclnn(ctx, InplaceFillScalar, dst.get(), value.get());
}

cd_error* full_kernel(const cd_kernel_context* ctx) noexcept {
  return chipdock::support::guard("full", [ctx] { enqueue_full(ctx); });
}

// ---------------------------------------------------------------------------------
// resize

std::vector<int64_t> nearest_table(int64_t out_size, int64_t in_size, double scale) {
  std::vector<int64_t> t(static_cast<size_t>(out_size));
  for (int64_t j = 0; j < out_size; ++j) {
    const double s = std::floor(static_cast<double>(j) / scale);
    int64_t i = s >= static_cast<double>(in_size) ? in_size - 1 : static_cast<int64_t>(s);
    t[static_cast<size_t>(j)] = i < 0 ? 0 : i;
  }
  return t;
}

bool is_identity(const std::vector<int64_t>& table, int64_t in_size) {
  if (static_cast<int64_t>(table.size()) != in_size) return false;
  for (size_t j = 0; j < table.size(); ++j) {
    if (table[j] != static_cast<int64_t>(j)) return false;
  }
  return true;
}

void resize_nearest(const cd_kernel_context* ctx, const cd_tensor_view& x, const cd_tensor_view& out,
                    const std::vector<int64_t>& sizes, double scale_h, double scale_w) {
  const size_t nd = static_cast<size_t>(x.ndim);
  std::vector<int64_t> shape = shape_of(x);
  const std::vector<int64_t> th = nearest_table(sizes[0], shape[nd - 2], scale_h);
  const std::vector<int64_t> tw = nearest_table(sizes[1], shape[nd - 1], scale_w);
  std::vector<size_t> dims;
  std::vector<int64_t> tables;
  if (!is_identity(th, shape[nd - 2])) {
    dims.push_back(nd - 2);
    tables.insert(tables.end(), th.begin(), th.end());
  }
  if (!is_identity(tw, shape[nd - 1])) {
    dims.push_back(nd - 1);
    tables.insert(tables.end(), tw.begin(), tw.end());
  }
  TensorDesc src(ctx, x);
  TensorDesc dst(ctx, out);
  if (dims.empty()) {
    run_aclnn(ctx, InplaceCopy, dst.get(), src.get());
    return;
  }
  void* device_tables = upload_int64(ctx, tables);
  const int64_t total = static_cast<int64_t>(tables.size());
  int64_t offset = 0;
  TensorDesc current = std::move(src);
  for (size_t k = 0; k < dims.size(); ++k) {
    const size_t d = dims[k];
    const int64_t len = d == nd - 2 ? sizes[0] : sizes[1];
    TensorDesc table = TensorDesc::make(device_tables, CD_DTYPE_INT64, {len}, {1}, offset, {total});
    offset += len;
    shape[d] = len;
    TensorDesc next = k + 1 == dims.size() ? std::move(dst) : scratch_tensor(ctx, x.dtype, shape, "resize");
    run_aclnn(ctx, GatherV2, current.get(), static_cast<int64_t>(d), table.get(), next.get());
    current = std::move(next);
  }
}

// An (N, C, H, W) view for aclnnUpsampleBilinear2d; negative strides are
// read through materialize_positive_strides (TensorDesc does that itself).
TensorDesc as_nchw(const cd_kernel_context* ctx, const cd_tensor_view& view) {
  if (view.ndim != 4) {
    fail(CD_STATUS_INVALID_ARGUMENT, "resize linear takes (N, C, H, W), got %s", shape_string(shape_of(view)).c_str());
  }
  return TensorDesc(ctx, view);
}

void enqueue_resize(const cd_kernel_context* ctx) {
  check_arity(ctx, 1, 1);
  const cd_tensor_view& x = *ctx->inputs[0];
  const cd_tensor_view& out = *ctx->outputs[0];
  require_dtype(out, x.dtype, "output 0");
  require_writable(out, "output 0");
  const size_t nd = static_cast<size_t>(x.ndim);
  if (nd < 2) fail(CD_STATUS_INVALID_ARGUMENT, "resize needs at least 2 dims, got %zu", nd);  // the core gives 4
  const std::string mode = chipdock::support::string_attribute(ctx, "mode");
  if (mode != "nearest" && mode != "linear") {
    fail(CD_STATUS_INVALID_ARGUMENT, "mode '%s' is not one of nearest, linear", mode.c_str());
  }
  const std::vector<int64_t> sizes = chipdock::support::ints_attribute(ctx, "sizes");
  const std::vector<double> scales = chipdock::support::floats_attribute(ctx, "scales");
  if (sizes.size() != 2 || scales.size() != 2) {
    fail(CD_STATUS_INVALID_ARGUMENT, "sizes and scales must both have 2 entries (the dispatcher fills both), got "
         "%zu and %zu", sizes.size(), scales.size());
  }
  for (double s : scales) {
    if (!(s > 0.0) || !std::isfinite(s)) fail(CD_STATUS_INVALID_ARGUMENT, "scales must be positive and finite, got %g", s);
  }
  std::vector<int64_t> expected = shape_of(x);
  expected[nd - 2] = sizes[0];
  expected[nd - 1] = sizes[1];
  require_shape(out, expected, "output 0");
  if (numel(expected) == 0) return;
  if (numel(shape_of(x)) == 0) {
    fail(CD_STATUS_INVALID_ARGUMENT, "cannot resize an empty input %s to a non-empty output",
         shape_string(shape_of(x)).c_str());
  }
  if (mode == "nearest") {
    resize_nearest(ctx, x, out, sizes, scales[0], scales[1]);
    return;
  }
  TensorDesc src = as_nchw(ctx, x);
  TensorDesc dst = as_nchw(ctx, out);
  IntArrayDesc output_size(sizes);
  run_aclnn(ctx, UpsampleBilinear2d, src.get(), output_size.get(), false, scales[0], scales[1], dst.get());
}

cd_error* resize_kernel(const cd_kernel_context* ctx) noexcept {
  return chipdock::support::guard("resize", [ctx] { enqueue_resize(ctx); });
}

}  // namespace

void register_fill(Registrar& r) {
  if (r.resolve(Arange, "arange")) {
    for (cd_dtype_t t : kNumericDtypes) r.add("arange", {t}, arange_kernel);
  }
  if (r.resolve(InplaceFillScalar, "full")) {
    for (cd_dtype_t t : kAllDtypes) r.add("full", {t}, full_kernel);
  }
  if (r.resolve(UpsampleBilinear2d, "resize") && r.resolve(GatherV2, "resize")) {
    // float64: aclnnUpsampleBilinear2d takes FLOAT, FLOAT16, BFLOAT16 only (unsupported/movement.json).
    for (cd_dtype_t t : {CD_DTYPE_FLOAT32, CD_DTYPE_FLOAT16, CD_DTYPE_BFLOAT16}) r.add("resize", {t, t}, resize_kernel);
  }
}

}  // namespace chipdock_npu::movement

namespace chipdock_npu {

void register_movement(Registrar& r) {
  movement::register_layout(r);
  movement::register_index(r);
  movement::register_fill(r);
}

}  // namespace chipdock_npu
