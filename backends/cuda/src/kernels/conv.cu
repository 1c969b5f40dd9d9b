// conv2d and conv_transpose2d as implicit GEMM: im2col / col2im kernels
// around batched cuBLASLt products (no cuDNN). Shapes and edge cases as the
// CPU reference (backends/cpu/src/kernels/conv.cpp):
//
// conv2d: x (N, C, H, W), weight (K, C/G, R, S), bias (K) optional; per
// image and group, out_g (K/G x OH*OW) = W_g (K/G x C/G*R*S) @ col_g, where
// im2col writes col (C*R*S x OH*OW, zeros where the window reads padding)
// in x's dtype, so the product sees the inputs unrounded; the output starts
// as the bias and the GEMM adds to it (beta = 1), rounding once.
// conv_transpose2d (the gradient of conv2d with respect to its input):
// x (N, C, H, W), weight (C, K/G, R, S); col_g (K/G*R*S x H*W) = W_g^T @
// x_g in float32 (float64 for float64), and col2im gathers, per output
// element, the taps that land on it plus the bias, rounding once (no
// atomics: deterministic).
//
// conv2d_fused: conv2d into an (N, K, OH, OW) buffer (the output itself for
// layout nchw), then one epilogue kernel writes act(conv + residual) into the
// output in its layout ((N, OH, OW, K) for nhwc). With a residual, 16-bit
// dtypes keep the convolution in float32 until the epilogue, so the result is
// rounded once: rounding the convolution first costs half an ulp of the
// convolution, which is many ulps of a result the residual nearly cancels.
// (relu alone commutes with rounding, so it needs no float32 buffer.)
//
// Images are processed in chunks whose col buffer stays near 256 MiB; within
// a chunk one cuBLASLt call batches over the images (or over the groups,
// when there are more groups than images).
#include <memory>
#include <utility>

#include "blas.cuh"
#include "elementwise.cuh"
#include "kernels.h"

namespace chipdock_cuda {
namespace {

using blas::Dims;
using blas::Mat;
using blas::Scratch;
using blas::Tensor;

struct ConvShape : chipdock::support::Window2d {  // stride, dilation, padding
  bool transposed = false;
  int64_t N = 0, C = 0, H = 0, W = 0;  // input
  int64_t K = 0, OH = 0, OW = 0;       // output channels and size
  int64_t R = 0, S = 0, G = 1;         // kernel, groups
  int64_t oph = 0, opw = 0;            // output_padding (transposed)
};

ConvShape read_shape(const cd_kernel_context* ctx, const Tensor& x, const Tensor& w, const Tensor* bias,
                     const Tensor& out, bool transposed) {
  blas::require_ndim(x, 4, "x");
  blas::require_ndim(w, 4, "weight");
  blas::require_ndim(out, 4, "the output");
  ConvShape s;
  s.transposed = transposed;
  static_cast<chipdock::support::Window2d&>(s) = chipdock::support::window2d_attributes(ctx, {1, 1}, true);
  s.G = int_attribute(ctx, "groups", 1);
  if (s.G < 1) fail(CD_STATUS_INVALID_ARGUMENT, "groups must be >= 1");
  s.N = x.shape[0];
  s.C = x.shape[1];
  s.H = x.shape[2];
  s.W = x.shape[3];
  s.R = w.shape[2];
  s.S = w.shape[3];
  if (s.C % s.G != 0) {
    fail(CD_STATUS_INVALID_ARGUMENT, "groups %lld does not divide %lld input channels", static_cast<long long>(s.G),
         static_cast<long long>(s.C));
  }
  int64_t oh = 0, ow = 0;
  if (!transposed) {
    s.K = w.shape[0];
    if (w.shape[1] * s.G != s.C || s.K % s.G != 0) {
      fail(CD_STATUS_INVALID_ARGUMENT, "weight (%lld, %lld, ...) does not fit %lld input channels in %lld groups",
           static_cast<long long>(w.shape[0]), static_cast<long long>(w.shape[1]), static_cast<long long>(s.C),
           static_cast<long long>(s.G));
    }
    oh = s.H + s.pt + s.pb - s.dh * (s.R - 1) - 1;
    ow = s.W + s.pl + s.pr - s.dw * (s.S - 1) - 1;
    oh = oh < 0 ? 0 : oh / s.sh + 1;
    ow = ow < 0 ? 0 : ow / s.sw + 1;
  } else {
    const Dims op = ints_attribute(ctx, "output_padding", {0, 0}, 2);
    s.oph = op[0];
    s.opw = op[1];
    if (s.oph < 0 || s.opw < 0) fail(CD_STATUS_INVALID_ARGUMENT, "output_padding must be >= 0");
    if (w.shape[0] != s.C) {
      fail(CD_STATUS_INVALID_ARGUMENT, "weight dim 0 (%lld) must equal the %lld input channels",
           static_cast<long long>(w.shape[0]), static_cast<long long>(s.C));
    }
    s.K = w.shape[1] * s.G;
    oh = (s.H - 1) * s.sh - s.pt - s.pb + s.dh * (s.R - 1) + s.oph + 1;
    ow = (s.W - 1) * s.sw - s.pl - s.pr + s.dw * (s.S - 1) + s.opw + 1;
  }
  s.OH = out.shape[2];
  s.OW = out.shape[3];
  if (out.shape[0] != s.N || out.shape[1] != s.K || s.OH != oh || s.OW != ow) {
    fail(CD_STATUS_INVALID_ARGUMENT, "output is (%lld, %lld, %lld, %lld); expected (%lld, %lld, %lld, %lld)",
         static_cast<long long>(out.shape[0]), static_cast<long long>(out.shape[1]),
         static_cast<long long>(out.shape[2]), static_cast<long long>(out.shape[3]), static_cast<long long>(s.N),
         static_cast<long long>(s.K), static_cast<long long>(oh), static_cast<long long>(ow));
  }
  if (bias != nullptr && (bias->ndim() != 1 || bias->shape[0] != s.K)) {
    fail(CD_STATUS_INVALID_ARGUMENT, "bias must have shape (%lld,)", static_cast<long long>(s.K));
  }
  return s;
}

// ----------------------------------------------------------------- kernels --

constexpr int kThreads = 256;

unsigned grid_for(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 65535 * 16 ? blocks : 65535 * 16);
}

// The geometry a kernel needs (x strides in elements).
struct Geom {
  int64_t C, H, W, K, R, S, OH, OW, sh, sw, dh, dw, pt, pl;
  int64_t xs[4];
};

Geom geom_of(const ConvShape& s, const Dims& x_strides) {
  return Geom{s.C, s.H, s.W, s.K, s.R, s.S, s.OH, s.OW, s.sh, s.sw, s.dh, s.dw, s.pt, s.pl,
              {x_strides[0], x_strides[1], x_strides[2], x_strides[3]}};
}

// col[n][c][r][s][oh][ow] = x[n0 + n, c, ih, iw] (0 outside x), for nb images.
template <class T> __global__ void im2col_kernel(const T* x, T* col, Geom g, int64_t n0, int64_t total) {
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total; i += step) {
    int64_t t = i;
    const int64_t ow = t % g.OW; t /= g.OW;
    const int64_t oh = t % g.OH; t /= g.OH;
    const int64_t s = t % g.S; t /= g.S;
    const int64_t r = t % g.R; t /= g.R;
    const int64_t c = t % g.C;
    const int64_t n = t / g.C + n0;
    const int64_t ih = oh * g.sh - g.pt + r * g.dh, iw = ow * g.sw - g.pl + s * g.dw;
    T v = ew::store<T>(0.0f);
    if (ih >= 0 && ih < g.H && iw >= 0 && iw < g.W) v = x[n * g.xs[0] + c * g.xs[1] + ih * g.xs[2] + iw * g.xs[3]];
    col[i] = v;
  }
}

// out[n0 + n, k, oh, ow] = bias[k] + the col[n][k][r][s][ih][iw] whose tap
// lands there (oh = ih*sh - pt + r*dh, likewise ow), rounded once.
template <class T, class Acc>
__global__ void col2im_kernel(const Acc* col, const T* bias, int64_t bias_stride, T* out, Geom g, int64_t n0,
                              int64_t total) {
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total; i += step) {
    int64_t t = i;
    const int64_t ow = t % g.OW; t /= g.OW;
    const int64_t oh = t % g.OH; t /= g.OH;
    const int64_t k = t % g.K;
    const int64_t n = t / g.K;
    Acc acc = bias != nullptr ? static_cast<Acc>(ew::load(bias[k * bias_stride])) : Acc(0);
    const Acc* base = col + (n * g.K + k) * g.R * g.S * g.H * g.W;
    for (int64_t r = 0; r < g.R; ++r) {
      const int64_t th = oh + g.pt - r * g.dh;
      if (th < 0 || th % g.sh != 0 || th / g.sh >= g.H) continue;
      const int64_t ih = th / g.sh;
      for (int64_t s = 0; s < g.S; ++s) {
        const int64_t tw = ow + g.pl - s * g.dw;
        if (tw < 0 || tw % g.sw != 0 || tw / g.sw >= g.W) continue;
        acc += base[((r * g.S + s) * g.H + ih) * g.W + tw / g.sw];
      }
    }
    out[(n0 * g.K) * g.OH * g.OW + i] = ew::store<T>(acc);
  }
}

// conv2d_fused's epilogue: what it adds and applies, and the layouts.
struct Epilogue {
  int64_t N, K, OH, OW;
  int64_t rs[4];  // the residual's strides over (n, k, oh, ow)
  bool residual, relu, nhwc;
};

// out[i] (i in the output's memory order) = act(conv[n, k, oh, ow] + residual[n, k, oh, ow]);
// C is T, or float for a 16-bit T whose convolution stayed in float32.
template <class T, class C>
__global__ void epilogue_kernel(const C* conv, const T* residual, T* out, Epilogue e, int64_t total) {
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total; i += step) {
    int64_t t = i, n, k, oh, ow;
    if (e.nhwc) {
      k = t % e.K; t /= e.K;
      ow = t % e.OW; t /= e.OW;
      oh = t % e.OH; n = t / e.OH;
    } else {
      ow = t % e.OW; t /= e.OW;
      oh = t % e.OH; t /= e.OH;
      k = t % e.K; n = t / e.K;
    }
    auto v = ew::load(conv[((n * e.K + k) * e.OH + oh) * e.OW + ow]);
    if (e.residual) v += ew::load(residual[n * e.rs[0] + k * e.rs[1] + oh * e.rs[2] + ow * e.rs[3]]);
    if (e.relu && v < 0) v = 0;  // NaN stays NaN
    out[i] = ew::store<T>(v);
  }
}

// ------------------------------------------------------------------ driver --

constexpr int64_t kColBudget = int64_t{256} << 20;  // bytes of col per chunk

// t as a dense copy unless it is C-contiguous in dims 1.. and its dim-0
// stride is a non-negative step past them (what the products index).
std::unique_ptr<Scratch> dense(Tensor& t, cudaStream_t stream) {
  const Dims want = blas::contiguous_strides(t.shape);
  bool ok = t.shape[0] == 1 || t.strides[0] >= want[0];
  for (size_t d = 1; d < t.ndim(); ++d) ok = ok && (t.shape[d] == 1 || t.strides[d] == want[d]);
  if (ok) {
    for (size_t d = 1; d < t.ndim(); ++d) t.strides[d] = want[d];  // size-1 dims: any stride reads the same
    if (t.shape[0] == 1) t.strides[0] = want[0];
    return nullptr;
  }
  auto buf = std::make_unique<Scratch>(static_cast<size_t>(t.numel() * blas::itemsize(t.dtype)), stream);
  blas::copy_convert(t.origin, t.dtype, t.strides, buf->data(), t.dtype, want, t.shape, stream);
  t.origin = buf->data();
  t.strides = want;
  return buf;
}

// Batched over images or groups, whichever is larger: one call per the other.
// a_g / b_g / d_g: the per-group steps, a_n / b_n / d_n: the per-image steps
// (elements of the respective operand).
struct GroupedGemm {
  blas::Gemm g;  // M, N, K, dtypes, ldd, alpha, beta; a/b at group 0 image 0
  char* d0 = nullptr;
  int64_t a_g = 0, b_g = 0, d_g = 0, a_n = 0, b_n = 0, d_n = 0;
};

void run_grouped(int32_t device, cudaStream_t stream, GroupedGemm gg, int64_t groups, int64_t images) {
  const int64_t ai = blas::itemsize(gg.g.a.dtype), di = blas::itemsize(gg.g.d_dtype);
  const bool over_images = images >= groups;
  const int64_t calls = over_images ? groups : images;
  blas::Gemm g = gg.g;
  g.batch = over_images ? images : groups;
  g.a.batch_stride = over_images ? gg.a_n : gg.a_g;
  g.b.batch_stride = over_images ? gg.b_n : gg.b_g;
  g.d_stride = over_images ? gg.d_n : gg.d_g;
  for (int64_t c = 0; c < calls; ++c) {
    const int64_t ao = over_images ? c * gg.a_g : c * gg.a_n, bo = over_images ? c * gg.b_g : c * gg.b_n;
    const int64_t dof = over_images ? c * gg.d_g : c * gg.d_n;
    g.a.data = static_cast<const char*>(gg.g.a.data) + ao * ai;
    g.b.data = static_cast<const char*>(gg.g.b.data) + bo * ai;
    g.d = gg.d0 + dof * di;
    blas::gemm(device, stream, g);
  }
}

// out's dtype is x's, or float32 for a 16-bit x (conv2d_fused with a residual).
void conv_forward(int32_t device, cudaStream_t stream, const ConvShape& s, const Tensor& x, Tensor w,
                  const Tensor& out, bool with_bias) {
  const cd_dtype_t dt = x.dtype;
  const int64_t item = blas::itemsize(dt), out_item = blas::itemsize(out.dtype);
  const auto wbuf = dense(w, stream);  // rows of W_g: C/G*R*S contiguous values
  const int64_t cg = s.C / s.G, kg = s.K / s.G, rs = s.R * s.S, ohw = s.OH * s.OW;
  const int64_t per_image = s.C * rs * ohw;
  int64_t nb = kColBudget / (per_image * item);
  nb = nb < 1 ? 1 : (nb > s.N ? s.N : nb);
  Scratch col(static_cast<size_t>(nb * per_image * item), stream);
  const Geom geom = geom_of(s, x.strides);
  for (int64_t n0 = 0; n0 < s.N; n0 += nb) {
    const int64_t n = s.N - n0 < nb ? s.N - n0 : nb;
    ew::dispatch<ew::kFloatMask>(dt, [&](auto tag) {
      using T = typename decltype(tag)::type;
      im2col_kernel<T><<<grid_for(n * per_image), kThreads, 0, stream>>>(
          reinterpret_cast<const T*>(x.origin), reinterpret_cast<T*>(col.data()), geom, n0, n * per_image);
    });
    check(cudaGetLastError(), "launching im2col");
    GroupedGemm gg;
    gg.g.M = kg;
    gg.g.N = ohw;
    gg.g.K = cg * rs;
    gg.g.a = Mat{w.origin, dt, kg, cg * rs, w.strides[0], 1, 0};
    gg.g.b = Mat{col.data(), dt, cg * rs, ohw, ohw, 1, 0};
    gg.g.d_dtype = out.dtype;
    gg.g.ldd = ohw;
    gg.g.beta = with_bias ? 1.0 : 0.0;
    gg.d0 = out.origin + n0 * s.K * ohw * out_item;
    gg.a_g = kg * w.strides[0];
    gg.b_g = cg * rs * ohw;
    gg.d_g = kg * ohw;
    gg.a_n = 0;
    gg.b_n = per_image;
    gg.d_n = s.K * ohw;
    run_grouped(device, stream, gg, s.G, n);
  }
}

void conv_transposed(int32_t device, cudaStream_t stream, const ConvShape& s, Tensor x, Tensor w,
                     const Tensor* bias, const Tensor& out) {
  const cd_dtype_t dt = out.dtype, acc = blas::compute_dtype(dt);
  const int64_t acc_item = blas::itemsize(acc);
  const auto xbuf = dense(x, stream);  // rows of x_g: H*W contiguous values
  const auto wbuf = dense(w, stream);  // rows of W_g: K/G*R*S contiguous values
  const int64_t cg = s.C / s.G, kg = s.K / s.G, rs = s.R * s.S, hw = s.H * s.W;
  const int64_t per_image = s.K * rs * hw;
  int64_t nb = kColBudget / (per_image * acc_item);
  nb = nb < 1 ? 1 : (nb > s.N ? s.N : nb);
  Scratch col(static_cast<size_t>(nb * per_image * acc_item), stream);
  const Geom geom = geom_of(s, x.strides);
  for (int64_t n0 = 0; n0 < s.N; n0 += nb) {
    const int64_t n = s.N - n0 < nb ? s.N - n0 : nb;
    GroupedGemm gg;
    gg.g.M = kg * rs;
    gg.g.N = hw;
    gg.g.K = cg;
    gg.g.a = Mat{w.origin, dt, kg * rs, cg, 1, w.strides[0], 0};  // W_g^T, column-major
    gg.g.b = Mat{x.origin + n0 * x.strides[0] * blas::itemsize(dt), dt, cg, hw, x.strides[1], 1, 0};
    gg.g.d_dtype = acc;
    gg.g.ldd = hw;
    gg.d0 = col.data();
    gg.a_g = cg * w.strides[0];
    gg.b_g = cg * x.strides[1];
    gg.d_g = kg * rs * hw;
    gg.a_n = 0;
    gg.b_n = x.strides[0];
    gg.d_n = per_image;
    run_grouped(device, stream, gg, s.G, n);
    const int64_t total = n * s.K * s.OH * s.OW;
    ew::dispatch<ew::kFloatMask>(dt, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;
      col2im_kernel<T, Acc><<<grid_for(total), kThreads, 0, stream>>>(
          reinterpret_cast<const Acc*>(col.data()), bias ? reinterpret_cast<const T*>(bias->origin) : nullptr,
          bias ? bias->strides[0] : 0, reinterpret_cast<T*>(out.origin), geom, n0, total);
    });
    check(cudaGetLastError(), "launching col2im");
  }
}

enum class ConvKind { plain, fused, transposed };

void enqueue_conv(const cd_kernel_context* ctx, ConvKind kind) {
  const bool fused = kind == ConvKind::fused, transposed = kind == ConvKind::transposed;
  cudaStream_t stream = blas::begin(ctx, fused ? 3 : 2, fused ? 4 : 3);
  Tensor out = blas::output(ctx);
  const Tensor x = blas::input(ctx, 0), w = blas::input(ctx, 1);
  Tensor bias, residual;
  const bool with_bias = ctx->num_inputs >= 3;
  if (with_bias) bias = blas::input(ctx, 2);
  Epilogue epi{};
  if (fused) {
    epi.relu = chipdock::support::choice_attribute(ctx, "activation", {"none", "relu"}) == 1;
    epi.nhwc = chipdock::support::choice_attribute(ctx, "layout", {"nchw", "nhwc"}) == 1;
    epi.residual = ctx->num_inputs == 4;
    blas::require_ndim(out, 4, "the output");
    if (epi.residual) {
      residual = blas::input(ctx, 3);
      if (residual.shape != out.shape) fail(CD_STATUS_INVALID_ARGUMENT, "residual must have the output's shape");
    }
  }
  // The (N, K, OH, OW) tensor the convolution writes: the output, or a
  // scratch buffer the epilogue reads from, for layout nhwc (it transposes)
  // and for a 16-bit residual sum (float32, so the result rounds once).
  Tensor conv_out = out;
  std::unique_ptr<Scratch> staging;
  const bool widen = epi.residual && (out.dtype == CD_DTYPE_FLOAT16 || out.dtype == CD_DTYPE_BFLOAT16);
  if (widen) conv_out.dtype = CD_DTYPE_FLOAT32;
  if (epi.nhwc) conv_out.shape = {out.shape[0], out.shape[3], out.shape[1], out.shape[2]};
  if (epi.nhwc || widen) {
    staging = std::make_unique<Scratch>(static_cast<size_t>(out.numel() * blas::itemsize(conv_out.dtype)), stream);
    conv_out.origin = staging->data();
  }
  conv_out.strides = blas::contiguous_strides(conv_out.shape);
  const ConvShape s = read_shape(ctx, x, w, with_bias ? &bias : nullptr, conv_out, transposed);
  if (out.numel() == 0) return;
  if (x.numel() == 0 || w.numel() == 0 || !transposed) {
    // The bias alone (no input channels or taps), or conv2d's starting value.
    if (with_bias) {
      blas::copy_convert(bias.origin, bias.dtype, {0, bias.strides[0], 0, 0}, conv_out.origin, conv_out.dtype,
                         conv_out.strides, conv_out.shape, stream);
    } else if (x.numel() == 0 || w.numel() == 0) {
      const size_t bytes = static_cast<size_t>(out.numel() * blas::itemsize(conv_out.dtype));
      check(cudaMemsetAsync(conv_out.origin, 0, bytes, stream), "cudaMemsetAsync");
    }
  }
  if (x.numel() != 0 && w.numel() != 0) {
    if (transposed) {
      conv_transposed(ctx->device, stream, s, x, w, with_bias ? &bias : nullptr, conv_out);
    } else {
      conv_forward(ctx->device, stream, s, x, w, conv_out, with_bias);
    }
  }
  if (!fused || (!epi.residual && !epi.relu && !epi.nhwc)) return;
  epi.N = s.N;
  epi.K = s.K;
  epi.OH = s.OH;
  epi.OW = s.OW;
  if (epi.residual) {  // strides over (n, k, oh, ow) of the residual, laid out like the output
    const Dims& r = residual.strides;
    const int64_t rs[4] = {r[0], epi.nhwc ? r[3] : r[1], epi.nhwc ? r[1] : r[2], epi.nhwc ? r[2] : r[3]};
    for (int i = 0; i < 4; ++i) epi.rs[i] = rs[i];
  }
  const int64_t total = out.numel();
  ew::dispatch<ew::kFloatMask>(out.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* res = epi.residual ? reinterpret_cast<const T*>(residual.origin) : nullptr;
    if (widen) {
      epilogue_kernel<T, float><<<grid_for(total), kThreads, 0, stream>>>(
          reinterpret_cast<const float*>(conv_out.origin), res, reinterpret_cast<T*>(out.origin), epi, total);
    } else {
      epilogue_kernel<T, T><<<grid_for(total), kThreads, 0, stream>>>(
          reinterpret_cast<const T*>(conv_out.origin), res, reinterpret_cast<T*>(out.origin), epi, total);
    }
  });
  check(cudaGetLastError(), "launching the conv2d_fused epilogue");
}

cd_error* conv2d_kernel(const cd_kernel_context* ctx) noexcept {
  return guard("conv2d", [ctx] { enqueue_conv(ctx, ConvKind::plain); });
}

cd_error* conv2d_fused_kernel(const cd_kernel_context* ctx) noexcept {
  return guard("conv2d_fused", [ctx] { enqueue_conv(ctx, ConvKind::fused); });
}

cd_error* conv_transpose2d_kernel(const cd_kernel_context* ctx) noexcept {
  return guard("conv_transpose2d", [ctx] { enqueue_conv(ctx, ConvKind::transposed); });
}

}  // namespace

void register_conv(cd_kernel_registry* registry) {
  static const cd_dtype_t kTypes[4] = {CD_DTYPE_FLOAT32, CD_DTYPE_FLOAT16, CD_DTYPE_BFLOAT16, CD_DTYPE_FLOAT64};
  static cd_dtype_t sig[4][5];  // outlive registration, as copy.cu's tables
  for (int i = 0; i < 4; ++i) {
    for (cd_dtype_t& d : sig[i]) d = kTypes[i];
    register_kernel(registry, "conv2d", sig[i], 4, conv2d_kernel);
    register_kernel(registry, "conv_transpose2d", sig[i], 4, conv_transpose2d_kernel);
    register_kernel(registry, "conv2d_fused", sig[i], 5, conv2d_fused_kernel);  // x, weight, bias, residual, out
  }
}

}  // namespace chipdock_cuda
