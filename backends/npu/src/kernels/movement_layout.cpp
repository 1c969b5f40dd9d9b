// concat (aclnnCat), split (aclnnSplitWithSize), pad and tile (aclnnRepeat).
//
// pad: constant mode is aclnnConstantPadNd (its pad list is torch's order,
// last dim first). reflect and edge are gathers: aclnnReflectionPad2d and
// aclnnReplicationPad2d cover only the last two dims of a 3-d/4-d input and
// pads smaller than the dim, while chipdock pads any dim by any amount
// (reflect periodically, as NumPy's 'reflect'). So each padded dim is one
// aclnnGatherV2 with a host-computed index table (see movement_common.h for
// the upload and its stream synchronization).
#include <string>
#include <utility>
#include <vector>

#include "chipdock/support/attributes.h"
#include "movement_common.h"

namespace chipdock_npu::movement {
namespace {

using chipdock::support::fail;

// ---------------------------------------------------------------------------------
// concat

void enqueue_concat(const cd_kernel_context* ctx) {
  chipdock::support::require_non_null(ctx, "ctx");
  if (ctx->num_inputs < 1 || ctx->num_outputs != 1) {
    fail(CD_STATUS_INVALID_ARGUMENT, "%d inputs and %d outputs, expected at least 1 and 1", ctx->num_inputs,
         ctx->num_outputs);
  }
  const cd_tensor_view& out = *ctx->outputs[0];
  const size_t nd = static_cast<size_t>(out.ndim);
  if (nd == 0) fail(CD_STATUS_INVALID_ARGUMENT, "cannot concatenate 0-d tensors");
  const int64_t axis = axis_attribute(ctx, "axis", nd);
  require_writable(out, "output 0");
  const std::vector<int64_t> out_shape = shape_of(out);
  int64_t total = 0;
  for (int32_t i = 0; i < ctx->num_inputs; ++i) {
    const cd_tensor_view& in = *ctx->inputs[i];
    require_dtype(in, out.dtype, "an input");
    std::vector<int64_t> expected = out_shape;
    expected[static_cast<size_t>(axis)] = in.ndim == out.ndim ? in.shape[axis] : -1;
    if (shape_of(in) != expected) {
      fail(CD_STATUS_INVALID_ARGUMENT, "input %d has shape %s, which does not fit output %s along axis %lld", i,
           shape_string(shape_of(in)).c_str(), shape_string(out_shape).c_str(), static_cast<long long>(axis));
    }
    total += in.shape[axis];
  }
  if (total != out_shape[static_cast<size_t>(axis)]) {
    fail(CD_STATUS_INVALID_ARGUMENT, "the inputs add up to %lld along axis %lld, the output has %lld",
         static_cast<long long>(total), static_cast<long long>(axis),
         static_cast<long long>(out_shape[static_cast<size_t>(axis)]));
  }
  if (numel(out_shape) == 0) return;
  std::vector<TensorDesc> parts;
  for (int32_t i = 0; i < ctx->num_inputs; ++i) {
    // An empty input adds nothing (and may have no memory behind it).
    if (numel(shape_of(*ctx->inputs[i])) != 0) parts.emplace_back(ctx, *ctx->inputs[i]);
  }
  TensorListDesc list(std::move(parts));
  TensorDesc dst(ctx, out);
  run_aclnn(ctx, Cat, list.get(), axis, dst.get());
}

cd_error* concat_kernel(const cd_kernel_context* ctx) noexcept {
  return chipdock::support::guard("concat", [ctx] { enqueue_concat(ctx); });
}

// ---------------------------------------------------------------------------------
// split: the pieces' sizes along the axis are the outputs' (the dispatcher
// computed them from `sizes` or `num`).

void enqueue_split(const cd_kernel_context* ctx) {
  chipdock::support::require_non_null(ctx, "ctx");
  if (ctx->num_inputs != 1 || ctx->num_outputs < 1) {
    fail(CD_STATUS_INVALID_ARGUMENT, "%d inputs and %d outputs, expected 1 and at least 1", ctx->num_inputs,
         ctx->num_outputs);
  }
  const cd_tensor_view& x = *ctx->inputs[0];
  const size_t nd = static_cast<size_t>(x.ndim);
  if (nd == 0) fail(CD_STATUS_INVALID_ARGUMENT, "cannot split a 0-d tensor");
  const int64_t axis = axis_attribute(ctx, "axis", nd);
  const std::vector<int64_t> x_shape = shape_of(x);
  std::vector<int64_t> sizes;
  for (int32_t i = 0; i < ctx->num_outputs; ++i) {
    const cd_tensor_view& o = *ctx->outputs[i];
    require_dtype(o, x.dtype, "an output");
    require_writable(o, "an output");
    std::vector<int64_t> expected = x_shape;
    expected[static_cast<size_t>(axis)] = o.ndim == x.ndim ? o.shape[axis] : -1;
    if (shape_of(o) != expected) {
      fail(CD_STATUS_INVALID_ARGUMENT, "output %d has shape %s, which does not fit input %s along axis %lld", i,
           shape_string(shape_of(o)).c_str(), shape_string(x_shape).c_str(), static_cast<long long>(axis));
    }
    sizes.push_back(o.shape[axis]);
  }
  int64_t total = 0;
  for (int64_t s : sizes) total += s;
  if (total != x_shape[static_cast<size_t>(axis)]) {
    fail(CD_STATUS_INVALID_ARGUMENT, "the outputs add up to %lld along axis %lld but the input has %lld",
         static_cast<long long>(total), static_cast<long long>(axis),
         static_cast<long long>(x_shape[static_cast<size_t>(axis)]));
  }
  if (numel(x_shape) == 0) return;
  TensorDesc src(ctx, x);
  std::vector<TensorDesc> pieces;
  for (int32_t i = 0; i < ctx->num_outputs; ++i) pieces.emplace_back(ctx, *ctx->outputs[i]);
  TensorListDesc outs(std::move(pieces));
  IntArrayDesc split_sizes(sizes);
  run_aclnn(ctx, SplitWithSize, src.get(), split_sizes.get(), axis, outs.get());
}

cd_error* split_kernel(const cd_kernel_context* ctx) noexcept {
  return chipdock::support::guard("split", [ctx] { enqueue_split(ctx); });
}

// ---------------------------------------------------------------------------------
// pad

enum class PadMode { kConstant, kReflect, kEdge };

// The input index output index `j` of a dim reads (reflect and edge).
int64_t pad_source(int64_t j, int64_t begin, int64_t n, PadMode mode) {
  const int64_t i = j - begin;
  if (i >= 0 && i < n) return i;
  if (mode == PadMode::kEdge || n == 1) return i < 0 ? 0 : n - 1;
  const int64_t period = 2 * (n - 1);
  int64_t r = i % period;
  if (r < 0) r += period;
  return r >= n ? period - r : r;
}

void pad_by_gathers(const cd_kernel_context* ctx, const cd_tensor_view& x, const cd_tensor_view& out,
                    const std::vector<int64_t>& pads, PadMode mode) {
  const size_t nd = static_cast<size_t>(x.ndim);
  std::vector<int64_t> shape = shape_of(x);
  std::vector<size_t> dims;  // the padded dims
  std::vector<int64_t> tables;
  for (size_t d = 0; d < nd; ++d) {
    if (pads[d] == 0 && pads[nd + d] == 0) continue;
    dims.push_back(d);
    const int64_t len = shape[d] + pads[d] + pads[nd + d];
    for (int64_t j = 0; j < len; ++j) tables.push_back(pad_source(j, pads[d], shape[d], mode));
  }
  TensorDesc dst(ctx, out);
  TensorDesc src(ctx, x);
  if (dims.empty()) {
    run_aclnn(ctx, InplaceCopy, dst.get(), src.get());
    return;
  }
  void* device_tables = upload_int64(ctx, tables);
  const int64_t table_total = static_cast<int64_t>(tables.size());
  int64_t table_offset = 0;
  TensorDesc current = std::move(src);
  for (size_t k = 0; k < dims.size(); ++k) {
    const size_t d = dims[k];
    const int64_t len = shape[d] + pads[d] + pads[nd + d];
    TensorDesc table = TensorDesc::make(device_tables, CD_DTYPE_INT64, {len}, {1}, table_offset, {table_total});
    table_offset += len;
    shape[d] = len;
    const bool last = k + 1 == dims.size();
    TensorDesc next = last ? std::move(dst) : scratch_tensor(ctx, x.dtype, shape, "pad");
    run_aclnn(ctx, GatherV2, current.get(), static_cast<int64_t>(d), table.get(), next.get());
    current = std::move(next);
  }
}

void enqueue_pad(const cd_kernel_context* ctx) {
  check_arity(ctx, 1, 1);
  const cd_tensor_view& x = *ctx->inputs[0];
  const cd_tensor_view& out = *ctx->outputs[0];
  require_dtype(out, x.dtype, "output 0");
  require_writable(out, "output 0");
  const size_t nd = static_cast<size_t>(x.ndim);
  const std::vector<int64_t> pads = chipdock::support::ints_attribute(ctx, "pads");
  if (pads.size() != 2 * nd) {
    fail(CD_STATUS_INVALID_ARGUMENT, "pads has %zu entries for %zu dims (expected begins then ends: %zu)",
         pads.size(), nd, 2 * nd);
  }
  std::vector<int64_t> expected(nd);
  for (size_t d = 0; d < nd; ++d) {
    if (pads[d] < 0 || pads[nd + d] < 0) fail(CD_STATUS_INVALID_ARGUMENT, "pads of dim %zu are negative", d);
    expected[d] = x.shape[d] + pads[d] + pads[nd + d];
  }
  require_shape(out, expected, "output 0");
  const std::string mode = chipdock::support::string_attribute(ctx, "mode");
  const double value = chipdock::support::float_attribute(ctx, "value");
  if (mode == "constant") {
    ScalarDesc fill = fill_scalar(value, out.dtype);  // validates the value even for an empty output
    if (numel(expected) == 0) return;
    TensorDesc dst(ctx, out);
    if (numel(shape_of(x)) == 0) {  // nothing to place: all padding
      run_aclnn(ctx, InplaceFillScalar, dst.get(), fill.get());
      return;
    }
    std::vector<int64_t> torch_pads;  // last dim first, (begin, end) each
    for (size_t d = nd; d-- > 0;) {
      torch_pads.push_back(pads[d]);
      torch_pads.push_back(pads[nd + d]);
    }
    TensorDesc src(ctx, x);
    IntArrayDesc pad_list(torch_pads);
    run_aclnn(ctx, ConstantPadNd, src.get(), pad_list.get(), fill.get(), dst.get());
    return;
  }
  if (mode != "reflect" && mode != "edge") {
    fail(CD_STATUS_INVALID_ARGUMENT, "mode '%s' is not one of constant, reflect, edge", mode.c_str());
  }
  if (numel(expected) == 0) return;
  if (numel(shape_of(x)) == 0) fail(CD_STATUS_INVALID_ARGUMENT, "mode %s cannot pad an empty input", mode.c_str());
  pad_by_gathers(ctx, x, out, pads, mode == "reflect" ? PadMode::kReflect : PadMode::kEdge);
}

cd_error* pad_kernel(const cd_kernel_context* ctx) noexcept {
  return chipdock::support::guard("pad", [ctx] { enqueue_pad(ctx); });
}

// ---------------------------------------------------------------------------------
// tile: aclnnRepeat is torch.Tensor.repeat, which is tile for as many repeats as dims.

void enqueue_tile(const cd_kernel_context* ctx) {
  check_arity(ctx, 1, 1);
  const cd_tensor_view& x = *ctx->inputs[0];
  const cd_tensor_view& out = *ctx->outputs[0];
  require_dtype(out, x.dtype, "output 0");
  require_writable(out, "output 0");
  const size_t nd = static_cast<size_t>(x.ndim);
  const std::vector<int64_t> repeats = chipdock::support::ints_attribute(ctx, "repeats");
  if (repeats.size() != nd) {
    fail(CD_STATUS_INVALID_ARGUMENT, "repeats has %zu entries for %zu dims", repeats.size(), nd);
  }
  std::vector<int64_t> expected(nd);
  for (size_t d = 0; d < nd; ++d) {
    if (repeats[d] < 0) fail(CD_STATUS_INVALID_ARGUMENT, "repeats[%zu] is negative", d);
    expected[d] = x.shape[d] * repeats[d];
  }
  require_shape(out, expected, "output 0");
  if (numel(expected) == 0) return;
  TensorDesc src(ctx, x);
  TensorDesc dst(ctx, out);
  if (nd == 0) {  // a scalar tiled is itself
    run_aclnn(ctx, InplaceCopy, dst.get(), src.get());
    return;
  }
  IntArrayDesc times(repeats);
  run_aclnn(ctx, Repeat, src.get(), times.get(), dst.get());
}

cd_error* tile_kernel(const cd_kernel_context* ctx) noexcept {
  return chipdock::support::guard("tile", [ctx] { enqueue_tile(ctx); });
}

}  // namespace

void register_layout(Registrar& r) {
  if (r.resolve(Cat, "concat")) {
    for (cd_dtype_t t : kAllDtypes) r.add("concat", {t, t}, concat_kernel);
  }
  if (r.resolve(SplitWithSize, "split")) {
    for (cd_dtype_t t : kAllDtypes) r.add("split", {t, t}, split_kernel);
  }
  // pad needs all three: constant, reflect/edge (gathers) and the copy of a pad of zeros.
  if (r.resolve(ConstantPadNd, "pad") && r.resolve(GatherV2, "pad") && r.resolve(InplaceFillScalar, "pad")) {
    for (cd_dtype_t t : kAllDtypes) r.add("pad", {t, t}, pad_kernel);
  }
  if (r.resolve(Repeat, "tile")) {
    for (cd_dtype_t t : kAllDtypes) r.add("tile", {t, t}, tile_kernel);
  }
}

}  // namespace chipdock_npu::movement
