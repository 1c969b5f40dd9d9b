// Data-movement kernels that rearrange whole blocks: concat, split, pad, tile.
// Each byte is moved as-is (the ops are exact for every dtype), so the loops
// work on element sizes, not types; contiguous runs are memcpy'd.
#include <algorithm>
#include <limits>
#include <utility>
#include <vector>

#include "movement_common.h"

namespace chipdock_cpu {
namespace movement {
namespace {

// ---------------------------------------------------------------------------------
// concat: inputs joined along `axis`.

struct ConcatPlan {
  std::vector<HostTensor> inputs;
  HostTensor out;
  int64_t axis = 0;
};

void run_concat(const ConcatPlan& p) {
  for (const HostTensor& t : p.inputs) check_live(t, "concat input");
  check_live(p.out, "output 0");
  const HostTensor& out = p.out;
  const size_t nd = out.shape.size();
  const size_t axis = static_cast<size_t>(p.axis);
  const size_t item = out.itemsize;
  const int64_t outer = product(out.shape, 0, axis);
  const int64_t inner = product(out.shape, axis + 1, nd);
  const int64_t out_row = out.shape[axis] * inner;  // elements per outer index

  bool all_contiguous = true;
  for (const HostTensor& t : p.inputs) all_contiguous = all_contiguous && is_contiguous(t);
  if (all_contiguous && outer >= 64) {
    // Row-major: each output row is the inputs' rows side by side.
    std::vector<std::pair<const char*, int64_t>> rows;  // (origin, elements per row)
    for (const HostTensor& t : p.inputs) {
      if (t.numel != 0) rows.emplace_back(t.origin, t.shape[axis] * inner);
    }
    const int64_t grain =
        out.numel * static_cast<int64_t>(item) > kParallelBytes ? 0 : outer;
    parallel_for(outer, grain, [&](int64_t o0, int64_t o1) {
      for (int64_t o = o0; o < o1; ++o) {
        char* dst = out.origin + o * out_row * static_cast<int64_t>(item);
        for (const auto& [src, n] : rows) {
          const size_t bytes = static_cast<size_t>(n) * item;
          std::memcpy(dst, src + o * static_cast<int64_t>(bytes), bytes);
          dst += bytes;
        }
      }
    });
    return;
  }
  // General: each input is an n-d block of the output.
  const std::vector<int64_t> out_strides = contiguous_byte_strides(out.shape, item);
  int64_t offset = 0;  // along the axis
  for (const HostTensor& t : p.inputs) {
    if (t.numel != 0) {
      const std::vector<int64_t> in_strides = byte_strides(t);
      copy_strided(out.origin + offset * out_strides[axis], out_strides.data(), t.origin,
                   in_strides.data(), t.shape.data(), nd, item);
    }
    offset += t.shape[axis];
  }
}

void enqueue_concat(const cd_kernel_context* ctx) {
  check_context(ctx, 1, -1, 1, 1);
  std::shared_ptr<Stream> stream = kernel_stream(ctx);
  ConcatPlan p;
  p.out = output_tensor(ctx, 0);
  const size_t nd = p.out.shape.size();
  if (nd == 0) fail(CD_STATUS_INVALID_ARGUMENT, "cannot concatenate 0-d tensors");
  p.axis = axis_attr(ctx, "axis", nd);
  int64_t total = 0;
  for (int32_t i = 0; i < ctx->num_inputs; ++i) {
    HostTensor t = input_tensor(ctx, i);
    const std::string what = format("input %d", i);
    require_dtype(t, p.out.dtype, what.c_str());
    bool match = t.shape.size() == nd;
    for (size_t d = 0; match && d < nd; ++d) {
      match = static_cast<int64_t>(d) == p.axis || t.shape[d] == p.out.shape[d];
    }
    if (!match) {
      fail(CD_STATUS_INVALID_ARGUMENT, "input %d has shape %s, which does not fit output %s "
           "along axis %lld", i, shape_string(t.shape).c_str(),
           shape_string(p.out.shape).c_str(), static_cast<long long>(p.axis));
    }
    total += t.shape[static_cast<size_t>(p.axis)];
    p.inputs.push_back(std::move(t));
  }
  if (total != p.out.shape[static_cast<size_t>(p.axis)]) {
    fail(CD_STATUS_INVALID_ARGUMENT, "the inputs add up to %lld along axis %lld, the output "
         "has %lld", static_cast<long long>(total), static_cast<long long>(p.axis),
         static_cast<long long>(p.out.shape[static_cast<size_t>(p.axis)]));
  }
  if (p.out.numel == 0) return;
  stream->enqueue("concat", [p = std::move(p)] { run_concat(p); });
}

cd_error* concat_kernel(const cd_kernel_context* ctx) noexcept {
  return guard("concat", [ctx] { enqueue_concat(ctx); });
}

// ---------------------------------------------------------------------------------
// split: x cut along `axis` into pieces of `sizes`.

struct SplitPlan {
  HostTensor in;
  std::vector<HostTensor> outputs;
  int64_t axis = 0;
};

void run_split(const SplitPlan& p) {
  check_live(p.in, "input 0");
  for (const HostTensor& t : p.outputs) check_live(t, "split output");
  const HostTensor& in = p.in;
  const size_t nd = in.shape.size();
  const size_t axis = static_cast<size_t>(p.axis);
  const size_t item = in.itemsize;
  const int64_t outer = product(in.shape, 0, axis);
  const int64_t inner = product(in.shape, axis + 1, nd);
  const int64_t in_row = in.shape[axis] * inner;

  if (is_contiguous(in) && outer >= 64) {
    std::vector<std::pair<char*, int64_t>> rows;  // (origin, elements per row)
    for (const HostTensor& t : p.outputs) rows.emplace_back(t.origin, t.shape[axis] * inner);
    const int64_t grain = in.numel * static_cast<int64_t>(item) > kParallelBytes ? 0 : outer;
    parallel_for(outer, grain, [&](int64_t o0, int64_t o1) {
      for (int64_t o = o0; o < o1; ++o) {
        const char* src = in.origin + o * in_row * static_cast<int64_t>(item);
        for (const auto& [dst, n] : rows) {
          const size_t bytes = static_cast<size_t>(n) * item;
          if (bytes != 0) std::memcpy(dst + o * static_cast<int64_t>(bytes), src, bytes);
          src += bytes;
        }
      }
    });
    return;
  }
  const std::vector<int64_t> in_strides = byte_strides(in);
  int64_t offset = 0;
  for (const HostTensor& t : p.outputs) {
    if (t.numel != 0) {
      const std::vector<int64_t> out_strides = contiguous_byte_strides(t.shape, item);
      copy_strided(t.origin, out_strides.data(), in.origin + offset * in_strides[axis],
                   in_strides.data(), t.shape.data(), nd, item);
    }
    offset += t.shape[axis];
  }
}

void enqueue_split(const cd_kernel_context* ctx) {
  check_context(ctx, 1, 1, 1, -1);
  std::shared_ptr<Stream> stream = kernel_stream(ctx);
  SplitPlan p;
  p.in = input_tensor(ctx, 0);
  const size_t nd = p.in.shape.size();
  if (nd == 0) fail(CD_STATUS_INVALID_ARGUMENT, "cannot split a 0-d tensor");
  p.axis = axis_attr(ctx, "axis", nd);
  const size_t axis = static_cast<size_t>(p.axis);
  const std::vector<int64_t> sizes = ints_attr(ctx, "sizes");
  const int64_t num = int_attr(ctx, "num");
  if (sizes.size() != static_cast<size_t>(ctx->num_outputs) ||
      (num != 0 && num != static_cast<int64_t>(sizes.size()))) {
    fail(CD_STATUS_INVALID_ARGUMENT, "%d outputs for %zu sizes (num = %lld); the dispatcher "
         "fills sizes and sets num = len(sizes)", ctx->num_outputs, sizes.size(),
         static_cast<long long>(num));
  }
  int64_t total = 0;
  for (int32_t i = 0; i < ctx->num_outputs; ++i) {
    HostTensor t = output_tensor(ctx, i);
    const std::string what = format("output %d", i);
    require_dtype(t, p.in.dtype, what.c_str());
    if (sizes[static_cast<size_t>(i)] < 0) {
      fail(CD_STATUS_INVALID_ARGUMENT, "sizes[%d] is negative", i);
    }
    std::vector<int64_t> expected = p.in.shape;
    expected[axis] = sizes[static_cast<size_t>(i)];
    require_shape(t, expected, what.c_str());
    total += sizes[static_cast<size_t>(i)];
    p.outputs.push_back(std::move(t));
  }
  if (total != p.in.shape[axis]) {
    fail(CD_STATUS_INVALID_ARGUMENT, "sizes add up to %lld but axis %zu has %lld",
         static_cast<long long>(total), axis, static_cast<long long>(p.in.shape[axis]));
  }
  if (p.in.numel == 0) return;
  stream->enqueue("split", [p = std::move(p)] { run_split(p); });
}

cd_error* split_kernel(const cd_kernel_context* ctx) noexcept {
  return guard("split", [ctx] { enqueue_split(ctx); });
}

// ---------------------------------------------------------------------------------
// pad: constant | reflect | edge; pads = begins of every dim, then ends.

enum class PadMode { kConstant, kReflect, kEdge };

struct PadPlan {
  HostTensor in, out;
  std::vector<int64_t> begins;
  PadMode mode = PadMode::kConstant;
  uint64_t value = 0;  // the constant, as bytes of the dtype
};

// The input index that output index `j` of a dim reads, or -1 (constant).
int64_t pad_source(int64_t j, int64_t begin, int64_t n, PadMode mode) {
  const int64_t i = j - begin;
  if (i >= 0 && i < n) return i;
  switch (mode) {
    case PadMode::kConstant: return -1;
    case PadMode::kEdge: return i < 0 ? 0 : n - 1;
    case PadMode::kReflect: {
      if (n == 1) return 0;
      const int64_t period = 2 * (n - 1);
      int64_t r = i % period;
      if (r < 0) r += period;
      return r >= n ? period - r : r;
    }
  }
  return -1;
}

// One unit (an inner block) copied: typed for the common element sizes.
inline void copy_unit(char* dst, const char* src, size_t bytes) {
  switch (bytes) {
    case 1: *dst = *src; return;
    case 2: std::memcpy(dst, src, 2); return;
    case 4: std::memcpy(dst, src, 4); return;
    case 8: std::memcpy(dst, src, 8); return;
    default: std::memcpy(dst, src, bytes); return;
  }
}

void run_pad(const PadPlan& p) {
  check_live(p.in, "input 0");
  check_live(p.out, "output 0");
  const HostTensor& in = p.in;
  const HostTensor& out = p.out;
  const size_t nd = out.shape.size();
  const size_t item = out.itemsize;
  if (in.numel == 0) {  // constant mode only (checked): all padding
    parallel_for(out.numel, out.numel * static_cast<int64_t>(item) > kParallelBytes
                                ? 0 : out.numel,
                 [&](int64_t b, int64_t e) {
                   fill_bytes(out.origin + b * static_cast<int64_t>(item), &p.value, e - b,
                              item);
                 });
    return;
  }
  // k: the innermost padded dim; dims after it form contiguous units.
  size_t k = nd;
  for (size_t d = nd; d-- > 0;) {
    if (out.shape[d] != in.shape[d]) {
      k = d;
      break;
    }
  }
  const std::vector<int64_t> in_bs = byte_strides(in);
  if (k == nd) {  // nothing padded: a copy
    const std::vector<int64_t> out_bs = contiguous_byte_strides(out.shape, item);
    copy_strided(out.origin, out_bs.data(), in.origin, in_bs.data(), in.shape.data(), nd, item);
    return;
  }
  const int64_t inner = product(out.shape, k + 1, nd);
  const int64_t unit_bytes = inner * static_cast<int64_t>(item);
  // Are the inner dims of the input one contiguous block?
  bool inner_contiguous = true;
  {
    int64_t expected = static_cast<int64_t>(item);
    for (size_t d = nd; d-- > k + 1;) {
      if (in.shape[d] != 1 && in_bs[d] != expected) inner_contiguous = false;
      expected *= in.shape[d];
    }
  }
  const std::vector<int64_t> inner_shape(in.shape.begin() + static_cast<long>(k) + 1,
                                         in.shape.end());
  const std::vector<int64_t> inner_in_bs(in_bs.begin() + static_cast<long>(k) + 1, in_bs.end());
  const std::vector<int64_t> inner_out_bs = contiguous_byte_strides(inner_shape, item);
  auto unit = [&](char* dst, const char* src) {
    if (inner_contiguous) {
      copy_unit(dst, src, static_cast<size_t>(unit_bytes));
    } else {
      copy_strided(dst, inner_out_bs.data(), src, inner_in_bs.data(), inner_shape.data(),
                   inner_shape.size(), item, false);
    }
  };
  // Per dim d <= k: byte offset into the input of each output index (any
  // sign: strides may be negative), or kNone in a constant pad.
  constexpr int64_t kNone = std::numeric_limits<int64_t>::min();
  std::vector<std::vector<int64_t>> source(k + 1);
  for (size_t d = 0; d <= k; ++d) {
    source[d].resize(static_cast<size_t>(out.shape[d]));
    for (int64_t j = 0; j < out.shape[d]; ++j) {
      const int64_t i = pad_source(j, p.begins[d], in.shape[d], p.mode);
      source[d][static_cast<size_t>(j)] = i < 0 ? kNone : i * in_bs[d];
    }
  }
  const int64_t units = out.shape[k];
  const int64_t rows = product(out.shape, 0, k);
  const int64_t begin = p.begins[k], n = in.shape[k];
  const bool run_contiguous = inner_contiguous && (n == 1 || in_bs[k] == unit_bytes);
  const std::vector<int64_t>& src_k = source[k];

  auto do_range = [&](int64_t u0, int64_t u1) {
    int64_t row = u0 / units;
    int64_t a = u0 % units;
    while (u0 < u1) {
      const int64_t b = std::min(units, a + (u1 - u0));
      char* dst_row = out.origin + row * units * unit_bytes;
      // The input offset of this row, unless it lies in a constant pad.
      int64_t base = 0;
      bool padding = false;
      int64_t r = row;
      for (size_t d = k; d-- > 0;) {
        const int64_t j = r % out.shape[d];
        r /= out.shape[d];
        const int64_t s = source[d][static_cast<size_t>(j)];
        if (s == kNone) {
          padding = true;
          break;
        }
        base += s;
      }
      if (padding) {
        fill_bytes(dst_row + a * unit_bytes, &p.value, (b - a) * inner, item);
      } else {
        const char* src_row = in.origin + base;
        const int64_t lo = std::max(a, begin), hi = std::min(b, begin + n);
        auto border = [&](int64_t x0, int64_t x1) {
          if (x0 >= x1) return;
          if (p.mode == PadMode::kConstant) {
            fill_bytes(dst_row + x0 * unit_bytes, &p.value, (x1 - x0) * inner, item);
            return;
          }
          for (int64_t u = x0; u < x1; ++u) {
            unit(dst_row + u * unit_bytes, src_row + src_k[static_cast<size_t>(u)]);
          }
        };
        border(a, std::min(b, begin));
        if (lo < hi) {
          if (run_contiguous) {
            std::memcpy(dst_row + lo * unit_bytes, src_row + (lo - begin) * unit_bytes,
                        static_cast<size_t>((hi - lo) * unit_bytes));
          } else if (inner == 1) {
            gather_row(dst_row + lo * unit_bytes, src_row + (lo - begin) * in_bs[k], in_bs[k],
                       hi - lo, item);
          } else {
            for (int64_t u = lo; u < hi; ++u) {
              unit(dst_row + u * unit_bytes, src_row + (u - begin) * in_bs[k]);
            }
          }
        }
        border(std::max(a, begin + n), b);
      }
      u0 += b - a;
      ++row;
      a = 0;
    }
  };
  const int64_t total = rows * units;
  if (out.numel * static_cast<int64_t>(item) <= kParallelBytes) {
    do_range(0, total);
  } else {
    parallel_for(total, 0, do_range);
  }
}

void enqueue_pad(const cd_kernel_context* ctx) {
  check_context(ctx, 1, 1, 1, 1);
  std::shared_ptr<Stream> stream = kernel_stream(ctx);
  PadPlan p;
  p.in = input_tensor(ctx, 0);
  p.out = output_tensor(ctx, 0);
  require_dtype(p.out, p.in.dtype, "output 0");
  const size_t nd = p.in.shape.size();
  const std::vector<int64_t> pads = ints_attr(ctx, "pads");
  if (pads.size() != 2 * nd) {
    fail(CD_STATUS_INVALID_ARGUMENT, "pads has %zu entries for %zu dims (expected begins then "
         "ends: %zu)", pads.size(), nd, 2 * nd);
  }
  std::vector<int64_t> expected(nd);
  for (size_t d = 0; d < nd; ++d) {
    if (pads[d] < 0 || pads[nd + d] < 0) {
      fail(CD_STATUS_INVALID_ARGUMENT, "pads of dim %zu are negative", d);
    }
    expected[d] = p.in.shape[d] + pads[d] + pads[nd + d];
  }
  require_shape(p.out, expected, "output 0");
  p.begins.assign(pads.begin(), pads.begin() + static_cast<long>(nd));
  const std::string mode = string_attr(ctx, "mode");
  if (mode == "constant") {
    p.mode = PadMode::kConstant;
  } else if (mode == "reflect") {
    p.mode = PadMode::kReflect;
  } else if (mode == "edge") {
    p.mode = PadMode::kEdge;
  } else {
    fail(CD_STATUS_INVALID_ARGUMENT, "mode '%s' is not one of constant, reflect, edge",
         mode.c_str());
  }
  const double value = float_attr(ctx, "value");
  if (p.mode == PadMode::kConstant) {
    if (!fits_dtype(value, p.out.dtype)) {
      fail(CD_STATUS_INVALID_ARGUMENT, "value %g does not fit %s", value,
           dtype_name(p.out.dtype));
    }
    dispatch_dtype(p.out.dtype, [&](auto tag) {
      using T = decltype(tag);
      const T v = from_double<T>(value);
      std::memcpy(&p.value, &v, sizeof(T));
    });
  } else if (p.in.numel == 0 && p.out.numel != 0) {
    fail(CD_STATUS_INVALID_ARGUMENT, "mode %s cannot pad an empty input", mode.c_str());
  }
  if (p.out.numel == 0) return;
  stream->enqueue("pad", [p = std::move(p)] { run_pad(p); });
}

cd_error* pad_kernel(const cd_kernel_context* ctx) noexcept {
  return guard("pad", [ctx] { enqueue_pad(ctx); });
}

// ---------------------------------------------------------------------------------
// tile: x repeated repeats[d] times along each dim d.

struct TilePlan {
  HostTensor in, out;
  std::vector<int64_t> repeats;
};

// Fills copies [from, to) of the block at base[0, block) by doubling memcpys.
void replicate(char* base, int64_t block, int64_t from, int64_t to) {
  if (from >= to) return;
  char* first = base + from * block;
  std::memcpy(first, base, static_cast<size_t>(block));
  int64_t filled = 1;
  while (from + filled < to) {
    const int64_t count = std::min(filled, to - from - filled);
    std::memcpy(first + filled * block, first, static_cast<size_t>(count * block));
    filled += count;
  }
}

void run_tile(const TilePlan& p) {
  check_live(p.in, "input 0");
  check_live(p.out, "output 0");
  const HostTensor& in = p.in;
  const HostTensor& out = p.out;
  const size_t nd = out.shape.size();
  const int64_t item = static_cast<int64_t>(out.itemsize);
  if (nd == 0) {
    std::memcpy(out.origin, in.origin, out.itemsize);
    return;
  }
  const bool big = out.numel * item > kParallelBytes;
  const std::vector<int64_t> out_es = [&] {  // contiguous element strides of out
    std::vector<int64_t> s(nd);
    int64_t stride = 1;
    for (size_t d = nd; d-- > 0;) {
      s[d] = stride;
      stride *= out.shape[d];
    }
    return s;
  }();
  // 1. Every input row goes to the first tile of its output row, then is
  //    repeated along the last dim.
  const int64_t n = in.shape[nd - 1];
  const int64_t reps_last = p.repeats[nd - 1];
  const int64_t in_rows = product(in.shape, 0, nd - 1);
  const int64_t in_last_stride = in.strides[nd - 1] * item;
  {
    const int64_t* strides[2] = {in.strides.data(), out_es.data()};
    auto rows = [&](int64_t r0, int64_t r1) {
      walk_rows<2>(nd - 1, in.shape.data(), strides, r0, r1,
                   [&](int64_t, const int64_t* off) {
                     char* dst = out.origin + off[1] * item;
                     gather_row(dst, in.origin + off[0] * item, in_last_stride, n,
                                out.itemsize);
                     replicate(dst, n * item, 1, reps_last);
                   });
    };
    if (big && in_rows >= 16) {
      parallel_for(in_rows, 0, rows);
    } else {
      rows(0, in_rows);
    }
  }
  // 2. Outward, dim by dim: the first tile's block along d is repeated.
  for (size_t d = nd - 1; d-- > 0;) {
    const int64_t reps = p.repeats[d];
    if (reps == 1) continue;
    const int64_t block = in.shape[d] * out_es[d] * item;  // bytes
    const int64_t prefixes = product(in.shape, 0, d);
    const int64_t* strides[1] = {out_es.data()};
    if (!big) {
      walk_rows<1>(d, in.shape.data(), strides, 0, prefixes, [&](int64_t, const int64_t* off) {
        replicate(out.origin + off[0] * item, block, 1, reps);
      });
    } else if (prefixes >= 16) {
      parallel_for(prefixes, 0, [&](int64_t r0, int64_t r1) {
        walk_rows<1>(d, in.shape.data(), strides, r0, r1, [&](int64_t, const int64_t* off) {
          replicate(out.origin + off[0] * item, block, 1, reps);
        });
      });
    } else {
      walk_rows<1>(d, in.shape.data(), strides, 0, prefixes, [&](int64_t, const int64_t* off) {
        char* base = out.origin + off[0] * item;
        parallel_for(reps - 1, 0,
                     [&](int64_t a, int64_t b) { replicate(base, block, a + 1, b + 1); });
      });
    }
  }
}

void enqueue_tile(const cd_kernel_context* ctx) {
  check_context(ctx, 1, 1, 1, 1);
  std::shared_ptr<Stream> stream = kernel_stream(ctx);
  TilePlan p;
  p.in = input_tensor(ctx, 0);
  p.out = output_tensor(ctx, 0);
  require_dtype(p.out, p.in.dtype, "output 0");
  p.repeats = ints_attr(ctx, "repeats");
  const size_t nd = p.in.shape.size();
  if (p.repeats.size() != nd) {
    fail(CD_STATUS_INVALID_ARGUMENT, "repeats has %zu entries for %zu dims", p.repeats.size(),
         nd);
  }
  std::vector<int64_t> expected(nd);
  for (size_t d = 0; d < nd; ++d) {
    if (p.repeats[d] < 0) fail(CD_STATUS_INVALID_ARGUMENT, "repeats[%zu] is negative", d);
    expected[d] = p.in.shape[d] * p.repeats[d];
  }
  require_shape(p.out, expected, "output 0");
  if (p.out.numel == 0) return;
  stream->enqueue("tile", [p = std::move(p)] { run_tile(p); });
}

cd_error* tile_kernel(const cd_kernel_context* ctx) noexcept {
  return guard("tile", [ctx] { enqueue_tile(ctx); });
}

}  // namespace

void register_layout(cd_kernel_registry* registry) {
  for (cd_dtype_t t : kAllDtypes) {
    const cd_dtype_t sig[2] = {t, t};
    register_kernel(registry, "concat", sig, 2, concat_kernel);
    register_kernel(registry, "split", sig, 2, split_kernel);
    register_kernel(registry, "pad", sig, 2, pad_kernel);
    register_kernel(registry, "tile", sig, 2, tile_kernel);
  }
}

}  // namespace movement
}  // namespace chipdock_cpu
