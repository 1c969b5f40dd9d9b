// resize: x (N, C, H, W) -> (N, C, H', W'), the two last dims resampled.
//   nearest: src = min(floor(dst / scale), in - 1)      (asymmetric coordinates)
//   linear:  src = max((dst + 0.5) / scale - 0.5, 0)   (half-pixel centres, like
//            PyTorch's align_corners=False), the two neighbours floor(src) and
//            min(floor(src) + 1, in - 1) weighted by the fraction.
// scale = scales[i] (H'/H as the dispatcher filled it). Any number of leading
// dims is accepted (at least the two resized ones). Linear interpolation is
// computed as PyTorch writes it, (1-l)*a + l*b per axis, in double for
// float32/float64 and in float32 for the 16-bit floats, each output rounded
// once.
#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "movement_common.h"

namespace chipdock_cpu {
namespace movement {
namespace {

struct ResizePlan {
  HostTensor in, out;
  bool linear = false;
  double scale_h = 1.0, scale_w = 1.0;
};

// Source index of every output index, nearest mode.
std::vector<int64_t> nearest_table(int64_t out_size, int64_t in_size, double scale) {
  std::vector<int64_t> t(static_cast<size_t>(out_size));
  for (int64_t j = 0; j < out_size; ++j) {
    const double s = std::floor(static_cast<double>(j) / scale);
    int64_t i = s >= static_cast<double>(in_size) ? in_size - 1 : static_cast<int64_t>(s);
    if (i < 0) i = 0;
    t[static_cast<size_t>(j)] = i;
  }
  return t;
}

struct LinearTap {
  int64_t i0, i1;
  double w1;  // weight of i1; i0 gets 1 - w1
};

std::vector<LinearTap> linear_table(int64_t out_size, int64_t in_size, double scale) {
  std::vector<LinearTap> t(static_cast<size_t>(out_size));
  for (int64_t j = 0; j < out_size; ++j) {
    double s = (static_cast<double>(j) + 0.5) / scale - 0.5;
    if (s < 0.0) s = 0.0;
    int64_t i0 = static_cast<int64_t>(s);
    if (i0 > in_size - 1) i0 = in_size - 1;
    const int64_t i1 = i0 < in_size - 1 ? i0 + 1 : i0;
    t[static_cast<size_t>(j)] = {i0, i1, s - static_cast<double>(i0)};
  }
  return t;
}

template <class U>
void nearest_rows(const ResizePlan& p, const std::vector<int64_t>& plane_off, int64_t r0,
                  int64_t r1, const std::vector<int64_t>& hoff, const std::vector<int64_t>& woff) {
  const int64_t out_h = static_cast<int64_t>(hoff.size());
  const int64_t out_w = static_cast<int64_t>(woff.size());
  const U* in = reinterpret_cast<const U*>(p.in.origin);
  U* out = reinterpret_cast<U*>(p.out.origin);
  const int64_t* wo = woff.data();
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t plane = r / out_h, h = r % out_h;
    const U* src = in + plane_off[static_cast<size_t>(plane)] + hoff[static_cast<size_t>(h)];
    U* dst = out + r * out_w;
    for (int64_t w = 0; w < out_w; ++w) dst[w] = src[wo[w]];
  }
}

// Separable: each source row needed is interpolated along W once into a
// cache of two rows (consecutive output rows share source rows), then the
// output row blends two cached rows. The arithmetic is exactly the direct
// formula's: top = (1-lw)*a + lw*b per source row, out = (1-lh)*top + lh*bottom.
template <class T>
void linear_rows(const ResizePlan& p, const std::vector<int64_t>& plane_off, int64_t r0,
                 int64_t r1, const std::vector<LinearTap>& htaps,
                 const std::vector<LinearTap>& wtaps) {
  using C = std::conditional_t<std::is_same_v<T, float> || std::is_same_v<T, double>, double,
                               float>;
  const int64_t out_h = static_cast<int64_t>(htaps.size());
  const int64_t out_w = static_cast<int64_t>(wtaps.size());
  const size_t nd = p.in.shape.size();
  const int64_t sh = p.in.strides[nd - 2], sw = p.in.strides[nd - 1];
  const T* in = reinterpret_cast<const T*>(p.in.origin);
  T* out = reinterpret_cast<T*>(p.out.origin);
  const size_t w_count = static_cast<size_t>(out_w);
  std::vector<int64_t> w0(w_count), w1(w_count);
  std::vector<C> lw(w_count);
  for (size_t w = 0; w < w_count; ++w) {
    w0[w] = wtaps[w].i0 * sw;
    w1[w] = wtaps[w].i1 * sw;
    lw[w] = static_cast<C>(wtaps[w].w1);
  }
  // Two cached horizontally interpolated rows, keyed by (plane, source row).
  std::vector<C> cache[2] = {std::vector<C>(w_count), std::vector<C>(w_count)};
  int64_t key[2] = {-1, -1};
  int next = 0;
  auto row = [&](int64_t plane, int64_t i, int avoid) -> const C* {
    const int64_t k = plane * p.in.shape[nd - 2] + i;
    for (int s = 0; s < 2; ++s) {
      if (key[s] == k) return cache[s].data();
    }
    int slot = next;
    if (slot == avoid) slot = 1 - slot;
    next = 1 - slot;
    key[slot] = k;
    const T* src = in + plane_off[static_cast<size_t>(plane)] + i * sh;
    C* dst = cache[slot].data();
    for (size_t w = 0; w < w_count; ++w) {
      const C a = fast_load(src[w0[w]]), b = fast_load(src[w1[w]]);
      dst[w] = (C{1} - lw[w]) * a + lw[w] * b;
    }
    return dst;
  };
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t plane = r / out_h, h = r % out_h;
    const LinearTap& ht = htaps[static_cast<size_t>(h)];
    const C* top = row(plane, ht.i0, -1);
    const int top_slot = top == cache[0].data() ? 0 : 1;
    const C* bottom = ht.i1 == ht.i0 ? top : row(plane, ht.i1, top_slot);
    const C lh = static_cast<C>(ht.w1), kh = C{1} - lh;
    T* dst = out + r * out_w;
    for (size_t w = 0; w < w_count; ++w) {
      dst[w] = fast_store<T>(static_cast<compute_t<T>>(kh * top[w] + lh * bottom[w]));
    }
  }
}

void run_resize(const ResizePlan& p) {
  check_live(p.in, "input 0");
  check_live(p.out, "output 0");
  const size_t nd = p.in.shape.size();
  const int64_t in_h = p.in.shape[nd - 2], in_w = p.in.shape[nd - 1];
  const int64_t out_h = p.out.shape[nd - 2], out_w = p.out.shape[nd - 1];
  const std::vector<int64_t> lead(p.in.shape.begin(), p.in.shape.end() - 2);
  const std::vector<int64_t> lead_strides(p.in.strides.begin(), p.in.strides.end() - 2);
  const std::vector<int64_t> plane_off = offset_table(lead, lead_strides);
  const int64_t rows = static_cast<int64_t>(plane_off.size()) * out_h;
  const int64_t grain = p.out.numel * static_cast<int64_t>(p.out.itemsize) > kParallelBytes / 4
                            ? 0 : rows;
  if (!p.linear) {
    std::vector<int64_t> hoff = nearest_table(out_h, in_h, p.scale_h);
    std::vector<int64_t> woff = nearest_table(out_w, in_w, p.scale_w);
    for (auto& v : hoff) v *= p.in.strides[nd - 2];
    for (auto& v : woff) v *= p.in.strides[nd - 1];
    parallel_for(rows, grain, [&](int64_t r0, int64_t r1) {
      switch (p.in.itemsize) {
        case 2: return nearest_rows<uint16_t>(p, plane_off, r0, r1, hoff, woff);
        case 4: return nearest_rows<uint32_t>(p, plane_off, r0, r1, hoff, woff);
        default: return nearest_rows<uint64_t>(p, plane_off, r0, r1, hoff, woff);
      }
    });
    return;
  }
  const std::vector<LinearTap> htaps = linear_table(out_h, in_h, p.scale_h);
  const std::vector<LinearTap> wtaps = linear_table(out_w, in_w, p.scale_w);
  dispatch_dtype(p.in.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (is_floating_v<T>) {
      parallel_guarded(rows, grain, [&](int64_t r0, int64_t r1) {
        linear_rows<T>(p, plane_off, r0, r1, htaps, wtaps);
      });
    }
  });
}

void enqueue_resize(const cd_kernel_context* ctx) {
  check_context(ctx, 1, 1, 1, 1);
  std::shared_ptr<Stream> stream = kernel_stream(ctx);
  ResizePlan p;
  p.in = input_tensor(ctx, 0);
  p.out = output_tensor(ctx, 0);
  require_dtype(p.out, p.in.dtype, "output 0");
  if (!(p.in.dtype == CD_DTYPE_FLOAT32 || p.in.dtype == CD_DTYPE_FLOAT16 ||
        p.in.dtype == CD_DTYPE_BFLOAT16 || p.in.dtype == CD_DTYPE_FLOAT64)) {
    fail(CD_STATUS_INVALID_ARGUMENT, "resize takes float dtypes, got %s",
         dtype_name(p.in.dtype));
  }
  const size_t nd = p.in.shape.size();
  if (nd < 2) fail(CD_STATUS_INVALID_ARGUMENT, "resize needs at least 2 dims, got %zu", nd);
  const std::string mode = string_attr(ctx, "mode");
  if (mode == "linear") {
    p.linear = true;
  } else if (mode != "nearest") {
    fail(CD_STATUS_INVALID_ARGUMENT, "mode '%s' is not one of nearest, linear", mode.c_str());
  }
  const std::vector<int64_t> sizes = ints_attr(ctx, "sizes");
  const std::vector<double> scales = floats_attr(ctx, "scales");
  if (sizes.size() != 2 || scales.size() != 2) {
    fail(CD_STATUS_INVALID_ARGUMENT, "sizes and scales must both have 2 entries (the "
         "dispatcher fills both), got %zu and %zu", sizes.size(), scales.size());
  }
  for (double s : scales) {
    if (!(s > 0.0) || !std::isfinite(s)) {
      fail(CD_STATUS_INVALID_ARGUMENT, "scales must be positive and finite, got %g", s);
    }
  }
  p.scale_h = scales[0];
  p.scale_w = scales[1];
  std::vector<int64_t> expected = p.in.shape;
  expected[nd - 2] = sizes[0];
  expected[nd - 1] = sizes[1];
  require_shape(p.out, expected, "output 0");
  if (p.out.numel == 0) return;
  if (p.in.numel == 0) {
    fail(CD_STATUS_INVALID_ARGUMENT, "cannot resize an empty input %s to a non-empty output",
         shape_string(p.in.shape).c_str());
  }
  stream->enqueue("resize", [p = std::move(p)] { run_resize(p); });
}

cd_error* resize_kernel(const cd_kernel_context* ctx) noexcept {
  return guard("resize", [ctx] { enqueue_resize(ctx); });
}

}  // namespace

void register_resize(cd_kernel_registry* registry) {
  for (cd_dtype_t t : kFloatDtypes) {
    const cd_dtype_t sig[2] = {t, t};
    register_kernel(registry, "resize", sig, 2, resize_kernel);
  }
}

}  // namespace movement
}  // namespace chipdock_cpu
