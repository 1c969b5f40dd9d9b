// Generators and resampling: arange, full and resize. Semantics:
// backends/cpu/src/kernels/movement_fill.cpp and movement_resize.cpp.
//   arange: out[i] = start + i * delta in float64 (multiply, then add: no
//           fused multiply-add, as the CPU reference), converted once.
//   full:   every element = value converted to the dtype (on the host).
//   resize: nearest src = min(floor(dst / scale), in - 1); linear with
//           half-pixel centres, (1-l)*a + l*b per axis, in float64 for
//           float32/float64 and float32 for the 16-bit floats, rounded once;
//           the arithmetic is unfused so that it is the CPU reference's.
#include <cmath>

#include "movement.cuh"

namespace chipdock_cuda {
namespace mv {
namespace {

void check_dtype_attr(const Call& call, const Tensor& out) {
  const int64_t dtype = int_attribute(call.ctx, "dtype");
  if (dtype != out.dtype) {
    fail(CD_STATUS_INVALID_ARGUMENT, "attribute dtype = %lld (%s) but the output is %s", static_cast<long long>(dtype),
         dtype_name(static_cast<cd_dtype_t>(dtype)), dtype_name(out.dtype));
  }
}

// ---------------------------------------------------------------------------------
// arange

template <class T> __global__ void arange_kernel(T* out, int64_t n, double start, double delta) {
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += step) {
    out[i] = from_double<T>(__dadd_rn(start, __dmul_rn(static_cast<double>(i), delta)));
  }
}

void enqueue_arange(const cd_kernel_context* ctx) {
  const Call call = begin_call(ctx, 0, 0, 1, 1);
  const Tensor out = output(call, 0);
  check_dtype_attr(call, out);
  if (out.dtype == CD_DTYPE_BOOL) fail(CD_STATUS_INVALID_ARGUMENT, "arange of bool");
  const double start = float_attribute(call.ctx, "start"), delta = float_attribute(call.ctx, "delta");
  const double limit = float_attribute(call.ctx, "limit");
  if (!std::isfinite(start) || !std::isfinite(delta) || !std::isfinite(limit) || delta == 0.0) {
    fail(CD_STATUS_INVALID_ARGUMENT, "arange needs finite start, limit, delta and delta != 0 (got %g, %g, %g)", start,
         limit, delta);
  }
  const double count = std::ceil((limit - start) / delta);
  if (!(count < 9.0e18)) fail(CD_STATUS_INVALID_ARGUMENT, "arange of %g elements", count);
  const int64_t n = count > 0.0 ? static_cast<int64_t>(count) : 0;
  require_shape(out, std::vector<int64_t>{n}, "output 0");
  if (n == 0) return;
  const double last = start + static_cast<double>(n - 1) * delta;
  if (!fits_dtype(start, out.dtype) || !fits_dtype(last, out.dtype)) {
    fail(CD_STATUS_INVALID_ARGUMENT, "arange values from %g to %g do not fit %s", start, last, dtype_name(out.dtype));
  }
  ew::dispatch<ew::kNumericMask>(out.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    arange_kernel<T><<<grid_for(n), kThreads, 0, call.stream>>>(reinterpret_cast<T*>(out.origin), n, start, delta);
  });
  check_launch("launching arange");
}

// ---------------------------------------------------------------------------------
// full

template <class Word> __global__ void fill_kernel(Word* out, int64_t n, Word value) {
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += step) out[i] = value;
}

void enqueue_full(const cd_kernel_context* ctx) {
  const Call call = begin_call(ctx, 0, 0, 1, 1);
  const Tensor out = output(call, 0);
  check_dtype_attr(call, out);
  require_shape(out, ints_attribute(call.ctx, "shape"), "output 0");
  const double value = float_attribute(call.ctx, "value");
  if (!fits_dtype(value, out.dtype)) {
    fail(CD_STATUS_INVALID_ARGUMENT, "value %g does not fit %s", value, dtype_name(out.dtype));
  }
  const uint64_t bits = value_bits(value, out.dtype);
  if (out.numel == 0) return;
  dispatch_word(out.item, [&](auto word) {
    using W = decltype(word);
    fill_kernel<W><<<grid_for(out.numel), kThreads, 0, call.stream>>>(reinterpret_cast<W*>(out.origin), out.numel,
                                                                      static_cast<W>(bits));
  });
  check_launch("launching full");
}

// ---------------------------------------------------------------------------------
// resize: one thread per output element of (planes, H', W').

struct ResizeArgs {
  Walk<1> lead;  // the dims before the two resized ones; stride: input (elements)
  int64_t numel, in_h, in_w, out_h, out_w, stride_h, stride_w;
  double scale_h, scale_w;
  int32_t linear;
};

__device__ __forceinline__ int64_t nearest_source(int64_t j, int64_t in, double scale) {
  const double s = floor(static_cast<double>(j) / scale);
  int64_t i = s >= static_cast<double>(in) ? in - 1 : static_cast<int64_t>(s);
  return i < 0 ? 0 : i;
}

struct Tap {
  int64_t i0, i1;
  double w1;  // weight of i1; i0 gets 1 - w1
};

__device__ __forceinline__ Tap linear_source(int64_t j, int64_t in, double scale) {
  double s = __dadd_rn(__ddiv_rn(static_cast<double>(j) + 0.5, scale), -0.5);
  if (s < 0.0) s = 0.0;
  int64_t i0 = static_cast<int64_t>(s);
  if (i0 > in - 1) i0 = in - 1;
  return {i0, i0 < in - 1 ? i0 + 1 : i0, __dadd_rn(s, -static_cast<double>(i0))};
}

__device__ __forceinline__ double mul_(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ float mul_(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double add_(double a, double b) { return __dadd_rn(a, b); }
__device__ __forceinline__ float add_(float a, float b) { return __fadd_rn(a, b); }

// (1 - l) * a + l * b, unfused.
template <class C> __device__ __forceinline__ C blend(C a, C b, C l) {
  return add_(mul_(add_(C{1}, -l), a), mul_(l, b));
}

template <class T> __global__ void resize_kernel(T* out, const T* in, ResizeArgs a) {
  using C = std::conditional_t<std::is_same_v<T, float> || std::is_same_v<T, double>, double, float>;
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < a.numel; i += step) {
    const int64_t w = i % a.out_w, h = (i / a.out_w) % a.out_h, plane = i / (a.out_w * a.out_h);
    int64_t base;
    walk_offsets(a.lead, plane, &base);
    const T* src = in + base;
    if (!a.linear) {
      out[i] = src[nearest_source(h, a.in_h, a.scale_h) * a.stride_h + nearest_source(w, a.in_w, a.scale_w) * a.stride_w];
      continue;
    }
    const Tap th = linear_source(h, a.in_h, a.scale_h), tw = linear_source(w, a.in_w, a.scale_w);
    const C lw = static_cast<C>(tw.w1), lh = static_cast<C>(th.w1);
    const T* r0 = src + th.i0 * a.stride_h;
    const T* r1 = src + th.i1 * a.stride_h;
    const int64_t c0 = tw.i0 * a.stride_w, c1 = tw.i1 * a.stride_w;
    const C top = blend<C>(static_cast<C>(ew::load(r0[c0])), static_cast<C>(ew::load(r0[c1])), lw);
    const C bottom = blend<C>(static_cast<C>(ew::load(r1[c0])), static_cast<C>(ew::load(r1[c1])), lw);
    out[i] = ew::store<T>(static_cast<ew::compute_t<T>>(blend<C>(top, bottom, lh)));
  }
}

void enqueue_resize(const cd_kernel_context* ctx) {
  const Call call = begin_call(ctx, 1, 1, 1, 1);
  const Tensor in = input(call, 0);
  const Tensor out = output(call, 0);
  require_dtype(out, in.dtype, "output 0");
  if (!(in.dtype == CD_DTYPE_FLOAT32 || in.dtype == CD_DTYPE_FLOAT16 || in.dtype == CD_DTYPE_BFLOAT16 ||
        in.dtype == CD_DTYPE_FLOAT64)) {
    fail(CD_STATUS_INVALID_ARGUMENT, "resize takes float dtypes, got %s", dtype_name(in.dtype));
  }
  const int32_t nd = in.ndim();
  if (nd < 2) fail(CD_STATUS_INVALID_ARGUMENT, "resize needs at least 2 dims, got %d", nd);
  require_dims(nd, "input 0");
  ResizeArgs a{};
  const std::string mode = string_attribute(call.ctx, "mode");
  if (mode == "linear") {
    a.linear = 1;
  } else if (mode != "nearest") {
    fail(CD_STATUS_INVALID_ARGUMENT, "mode '%s' is not one of nearest, linear", mode.c_str());
  }
  const std::vector<int64_t> sizes = ints_attribute(call.ctx, "sizes");
  const std::vector<double> scales = floats_attribute(call.ctx, "scales");
  if (sizes.size() != 2 || scales.size() != 2) {
    fail(CD_STATUS_INVALID_ARGUMENT, "sizes and scales must both have 2 entries (the dispatcher fills both), got %zu "
         "and %zu", sizes.size(), scales.size());
  }
  for (double s : scales) {
    if (!(s > 0.0) || !std::isfinite(s)) fail(CD_STATUS_INVALID_ARGUMENT, "scales must be positive and finite, got %g", s);
  }
  std::vector<int64_t> expected = in.shape;
  expected[nd - 2] = sizes[0];
  expected[nd - 1] = sizes[1];
  require_shape(out, expected, "output 0");
  if (out.numel == 0) return;
  if (in.numel == 0) {
    fail(CD_STATUS_INVALID_ARGUMENT, "cannot resize an empty input %s to a non-empty output",
         shape_string(in.shape).c_str());
  }
  a.lead.ndim = nd - 2;
  for (int32_t d = 0; d < nd - 2; ++d) {
    a.lead.shape[d] = in.shape[d];
    a.lead.stride[0][d] = in.strides[d];
  }
  a.numel = out.numel;
  a.in_h = in.shape[nd - 2];
  a.in_w = in.shape[nd - 1];
  a.out_h = sizes[0];
  a.out_w = sizes[1];
  a.stride_h = in.strides[nd - 2];
  a.stride_w = in.strides[nd - 1];
  a.scale_h = scales[0];
  a.scale_w = scales[1];
  ew::dispatch<ew::kFloatMask>(in.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    resize_kernel<T><<<grid_for(a.numel), kThreads, 0, call.stream>>>(reinterpret_cast<T*>(out.origin),
                                                                      reinterpret_cast<const T*>(in.origin), a);
  });
  check_launch("launching resize");
}

cd_error* arange_fn(const cd_kernel_context* ctx) noexcept {
  return guard("arange", [ctx] { enqueue_arange(ctx); });
}
cd_error* full_fn(const cd_kernel_context* ctx) noexcept {
  return guard("full", [ctx] { enqueue_full(ctx); });
}
cd_error* resize_fn(const cd_kernel_context* ctx) noexcept {
  return guard("resize", [ctx] { enqueue_resize(ctx); });
}

}  // namespace

void register_fill(cd_kernel_registry* registry) {
  for (cd_dtype_t t : kNumericDtypes) {
    const cd_dtype_t sig[1] = {t};
    register_kernel(registry, "arange", sig, 1, arange_fn);
  }
  for (cd_dtype_t t : kAllDtypes) {
    const cd_dtype_t sig[1] = {t};
    register_kernel(registry, "full", sig, 1, full_fn);
  }
  for (cd_dtype_t t : kFloatDtypes) {
    const cd_dtype_t sig[2] = {t, t};
    register_kernel(registry, "resize", sig, 2, resize_fn);
  }
}

}  // namespace mv
}  // namespace chipdock_cuda
