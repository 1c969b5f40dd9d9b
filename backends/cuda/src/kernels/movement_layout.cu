// Data-movement kernels that rearrange whole blocks: concat, split, tile
// (strided copies through copy.cu's kernel) and pad (constant | reflect |
// edge, its own kernel). Elements move as words of their size: exact for
// every dtype. Semantics: backends/cpu/src/kernels/movement_layout.cpp.
#include <utility>

#include "movement.cuh"

namespace chipdock_cuda {
namespace mv {
namespace {

// ---------------------------------------------------------------------------------
// concat: each input is an n-d block of the output, offset along the axis.

void enqueue_concat(const cd_kernel_context* ctx) {
  const Call call = begin_call(ctx, 1, -1, 1, 1);
  const Tensor out = output(call, 0);
  const int32_t nd = out.ndim();
  if (nd == 0) fail(CD_STATUS_INVALID_ARGUMENT, "cannot concatenate 0-d tensors");
  const size_t axis = static_cast<size_t>(axis_attr(call, "axis", nd));
  std::vector<Tensor> inputs;
  int64_t total = 0;
  for (int32_t i = 0; i < ctx->num_inputs; ++i) {
    Tensor t = input(call, i);
    const std::string what = format("input %d", i);
    require_dtype(t, out.dtype, what.c_str());
    bool match = t.ndim() == nd;
    for (size_t d = 0; match && d < static_cast<size_t>(nd); ++d) match = d == axis || t.shape[d] == out.shape[d];
    if (!match) {
      fail(CD_STATUS_INVALID_ARGUMENT, "input %d has shape %s, which does not fit output %s along axis %zu", i,
           shape_string(t.shape).c_str(), shape_string(out.shape).c_str(), axis);
    }
    total += t.shape[axis];
    inputs.push_back(std::move(t));
  }
  if (total != out.shape[axis]) {
    fail(CD_STATUS_INVALID_ARGUMENT, "the inputs add up to %lld along axis %zu, the output has %lld",
         static_cast<long long>(total), axis, static_cast<long long>(out.shape[axis]));
  }
  if (out.numel == 0) return;
  const std::vector<int64_t> out_bs = contiguous_byte_strides(out.shape, out.item);
  int64_t offset = 0;
  for (const Tensor& t : inputs) {
    if (t.numel != 0) {
      const std::vector<int64_t> in_bs = t.byte_strides();
      enqueue_strided_copy(out.origin + offset * out_bs[axis], out_bs.data(), t.origin, in_bs.data(), t.shape.data(),
                           nd, t.item, call.stream);
    }
    offset += t.shape[axis];
  }
}

// ---------------------------------------------------------------------------------
// split: output i is the block of x at the sizes' running offset.

void enqueue_split(const cd_kernel_context* ctx) {
  const Call call = begin_call(ctx, 1, 1, 1, -1);
  const Tensor in = input(call, 0);
  const int32_t nd = in.ndim();
  if (nd == 0) fail(CD_STATUS_INVALID_ARGUMENT, "cannot split a 0-d tensor");
  const size_t axis = static_cast<size_t>(axis_attr(call, "axis", nd));
  const std::vector<int64_t> sizes = ints_attribute(call.ctx, "sizes");
  const int64_t num = int_attribute(call.ctx, "num");
  if (sizes.size() != static_cast<size_t>(ctx->num_outputs) || (num != 0 && num != static_cast<int64_t>(sizes.size()))) {
    fail(CD_STATUS_INVALID_ARGUMENT, "%d outputs for %zu sizes (num = %lld); the dispatcher fills sizes and sets "
         "num = len(sizes)", ctx->num_outputs, sizes.size(), static_cast<long long>(num));
  }
  std::vector<Tensor> outputs;
  int64_t total = 0;
  for (int32_t i = 0; i < ctx->num_outputs; ++i) {
    Tensor t = output(call, i);
    const std::string what = format("output %d", i);
    require_dtype(t, in.dtype, what.c_str());
    if (sizes[static_cast<size_t>(i)] < 0) fail(CD_STATUS_INVALID_ARGUMENT, "sizes[%d] is negative", i);
    std::vector<int64_t> expected = in.shape;
    expected[axis] = sizes[static_cast<size_t>(i)];
    require_shape(t, expected, what.c_str());
    total += sizes[static_cast<size_t>(i)];
    outputs.push_back(std::move(t));
  }
  if (total != in.shape[axis]) {
    fail(CD_STATUS_INVALID_ARGUMENT, "sizes add up to %lld but axis %zu has %lld", static_cast<long long>(total),
         axis, static_cast<long long>(in.shape[axis]));
  }
  if (in.numel == 0) return;
  const std::vector<int64_t> in_bs = in.byte_strides();
  int64_t offset = 0;
  for (const Tensor& t : outputs) {
    if (t.numel != 0) {
      const std::vector<int64_t> out_bs = contiguous_byte_strides(t.shape, t.item);
      enqueue_strided_copy(t.origin, out_bs.data(), in.origin + offset * in_bs[axis], in_bs.data(), t.shape.data(),
                           nd, t.item, call.stream);
    }
    offset += t.shape[axis];
  }
}

// ---------------------------------------------------------------------------------
// tile: the output seen as (repeats[0], n[0], repeats[1], n[1], ...) is the
// input broadcast over the repeat dims (source stride 0): one strided copy.

void enqueue_tile(const cd_kernel_context* ctx) {
  const Call call = begin_call(ctx, 1, 1, 1, 1);
  const Tensor in = input(call, 0);
  const Tensor out = output(call, 0);
  require_dtype(out, in.dtype, "output 0");
  const std::vector<int64_t> repeats = ints_attribute(call.ctx, "repeats");
  const size_t nd = in.shape.size();
  if (repeats.size() != nd) fail(CD_STATUS_INVALID_ARGUMENT, "repeats has %zu entries for %zu dims", repeats.size(), nd);
  std::vector<int64_t> expected(nd);
  for (size_t d = 0; d < nd; ++d) {
    if (repeats[d] < 0) fail(CD_STATUS_INVALID_ARGUMENT, "repeats[%zu] is negative", d);
    expected[d] = in.shape[d] * repeats[d];
  }
  require_shape(out, expected, "output 0");
  if (out.numel == 0) return;
  const std::vector<int64_t> out_bs = contiguous_byte_strides(out.shape, out.item);
  const std::vector<int64_t> in_bs = in.byte_strides();
  std::vector<int64_t> shape, src, dst;
  for (size_t d = 0; d < nd; ++d) {
    shape.insert(shape.end(), {repeats[d], in.shape[d]});
    src.insert(src.end(), {0, in_bs[d]});
    dst.insert(dst.end(), {in.shape[d] * out_bs[d], out_bs[d]});
  }
  enqueue_strided_copy(out.origin, dst.data(), in.origin, src.data(), shape.data(), static_cast<int32_t>(shape.size()),
                       out.item, call.stream);
}

// ---------------------------------------------------------------------------------
// pad: output element j reads, per dim, input index pad_source(j) or, in a
// constant pad, the value.

enum PadMode : int32_t { kConstant = 0, kReflect = 1, kEdge = 2 };

struct PadArgs {
  int32_t ndim;
  int32_t mode;
  uint64_t value;  // the constant, as bytes of the dtype
  int64_t numel;
  int64_t out_shape[kMaxDims];
  int64_t in_shape[kMaxDims];
  int64_t in_stride[kMaxDims];  // elements
  int64_t begin[kMaxDims];
};

// The input index output index j of a dim reads, or -1 (constant pad).
__device__ __forceinline__ int64_t pad_source(int64_t j, int64_t begin, int64_t n, int32_t mode) {
  const int64_t i = j - begin;
  if (i >= 0 && i < n) return i;
  if (mode == kConstant) return -1;
  if (mode == kEdge) return i < 0 ? 0 : n - 1;
  if (n == 1) return 0;
  const int64_t period = 2 * (n - 1);
  int64_t r = i % period;
  if (r < 0) r += period;
  return r >= n ? period - r : r;
}

template <class Word> __global__ void pad_kernel(Word* out, const Word* in, PadArgs a) {
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < a.numel; i += step) {
    int64_t rest = i, off = 0;
    bool constant = false;
    for (int d = a.ndim - 1; d >= 0; --d) {
      const int64_t q = rest / a.out_shape[d], j = rest - q * a.out_shape[d];
      rest = q;
      const int64_t s = pad_source(j, a.begin[d], a.in_shape[d], a.mode);
      if (s < 0) {
        constant = true;
        break;
      }
      off += s * a.in_stride[d];
    }
    out[i] = constant ? static_cast<Word>(a.value) : in[off];
  }
}

void enqueue_pad(const cd_kernel_context* ctx) {
  const Call call = begin_call(ctx, 1, 1, 1, 1);
  const Tensor in = input(call, 0);
  const Tensor out = output(call, 0);
  require_dtype(out, in.dtype, "output 0");
  const size_t nd = in.shape.size();
  require_dims(static_cast<int32_t>(nd), "input 0");
  const std::vector<int64_t> pads = ints_attribute(call.ctx, "pads");
  if (pads.size() != 2 * nd) {
    fail(CD_STATUS_INVALID_ARGUMENT, "pads has %zu entries for %zu dims (expected begins then ends: %zu)",
         pads.size(), nd, 2 * nd);
  }
  std::vector<int64_t> expected(nd);
  for (size_t d = 0; d < nd; ++d) {
    if (pads[d] < 0 || pads[nd + d] < 0) fail(CD_STATUS_INVALID_ARGUMENT, "pads of dim %zu are negative", d);
    expected[d] = in.shape[d] + pads[d] + pads[nd + d];
  }
  require_shape(out, expected, "output 0");
  PadArgs a{};
  const std::string mode = string_attribute(call.ctx, "mode");
  if (mode == "constant") {
    a.mode = kConstant;
  } else if (mode == "reflect") {
    a.mode = kReflect;
  } else if (mode == "edge") {
    a.mode = kEdge;
  } else {
    fail(CD_STATUS_INVALID_ARGUMENT, "mode '%s' is not one of constant, reflect, edge", mode.c_str());
  }
  const double value = float_attribute(call.ctx, "value");
  if (a.mode == kConstant) {
    if (!fits_dtype(value, out.dtype)) {
      fail(CD_STATUS_INVALID_ARGUMENT, "value %g does not fit %s", value, dtype_name(out.dtype));
    }
    a.value = value_bits(value, out.dtype);
  } else if (in.numel == 0 && out.numel != 0) {
    fail(CD_STATUS_INVALID_ARGUMENT, "mode %s cannot pad an empty input", mode.c_str());
  }
  if (out.numel == 0) return;
  a.ndim = static_cast<int32_t>(nd);
  a.numel = out.numel;
  for (size_t d = 0; d < nd; ++d) {
    a.out_shape[d] = out.shape[d];
    a.in_shape[d] = in.shape[d];
    a.in_stride[d] = in.strides[d];
    a.begin[d] = pads[d];
  }
  dispatch_word(out.item, [&](auto word) {
    using W = decltype(word);
    pad_kernel<W><<<grid_for(a.numel), kThreads, 0, call.stream>>>(reinterpret_cast<W*>(out.origin),
                                                                 reinterpret_cast<const W*>(in.origin), a);
  });
  check_launch("launching pad");
}

cd_error* concat_kernel(const cd_kernel_context* ctx) noexcept {
  return guard("concat", [ctx] { enqueue_concat(ctx); });
}
cd_error* split_kernel(const cd_kernel_context* ctx) noexcept {
  return guard("split", [ctx] { enqueue_split(ctx); });
}
cd_error* tile_kernel(const cd_kernel_context* ctx) noexcept {
  return guard("tile", [ctx] { enqueue_tile(ctx); });
}
cd_error* pad_kernel_fn(const cd_kernel_context* ctx) noexcept {
  return guard("pad", [ctx] { enqueue_pad(ctx); });
}

}  // namespace

void register_layout(cd_kernel_registry* registry) {
  for (cd_dtype_t t : kAllDtypes) {
    const cd_dtype_t sig[2] = {t, t};
    register_kernel(registry, "concat", sig, 2, concat_kernel);
    register_kernel(registry, "split", sig, 2, split_kernel);
    register_kernel(registry, "pad", sig, 2, pad_kernel_fn);
    register_kernel(registry, "tile", sig, 2, tile_kernel);
  }
}

}  // namespace mv
}  // namespace chipdock_cuda
