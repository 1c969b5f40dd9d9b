// Normalizations (float dtypes): layer_norm and rms_norm (over the trailing
// len(scale.shape) dims; bias optional for layer_norm), group_norm (x (N, C,
// ...), C / num_groups channels per group), batch_norm (inference, over
// dim 1) and local_response_norm (ONNX LRN across channels). Inputs any
// strided view, the output contiguous.
//
// layer_norm, rms_norm and group_norm are row statistics: one block per row
// (a group's channels x spatial for group_norm), the row held in registers
// (vector loads where it is dense and aligned) while a block reduction
// gives the mean and then the sum of squared deviations (two passes over
// registers, float32 compute for the 16-bit floats), then one write. Rows
// too long for the registers stream through memory three times instead.
// batch_norm and local_response_norm are elementwise: one thread per output.
// The formulas and the float64 1/sqrt(var + epsilon) are the CPU
// reference's (norm_ops.h).
#include <type_traits>

#include "reduce.cuh"

namespace chipdock_cuda {
namespace red {
namespace {

enum class Mode { layer, rms, group };

struct RowPlan {
  Dims rows{}, row{};   // input offset of a row / of an element in its row
  Dims scale{}, bias{};  // parameter offsets (layer, rms: per row element; group: per channel)
  int64_t row_count = 0, n = 0;
  int64_t groups = 1, group_channels = 1, spatial = 1;  // group_norm
  double epsilon = 0;
  bool row_dense = true, params_dense = true, has_bias = false;
  bool params_vec = false;  // layer, rms: scale and bias dense and aligned for the row kernel's vectors
};

template <class T, int V> struct alignas(sizeof(T) * V) Vec {
  T v[V];
};

constexpr int kMaxThreads = kRowThreads;

template <class C> __device__ __forceinline__ C rsqrt_eps(C var, double eps) {
  return static_cast<C>(1.0 / sqrt(static_cast<double>(var) + eps));
}

__device__ __forceinline__ int64_t param_offset(int64_t i, const Dims& d, bool dense) {
  return dense ? i : offset_of(i, d);
}

// The normalized value of element j (x its value) of row `row`.
template <Mode M, class T, class C>
__device__ __forceinline__ C normalize(const T* g, const T* b, const RowPlan& p, int64_t row, int64_t j, C x,
                                       C mean, C r) {
  if constexpr (M == Mode::group) {
    const int64_t c = (row % p.groups) * p.group_channels + j / p.spatial;
    const C a = r * load(g[param_offset(c, p.scale, p.params_dense)]);
    return (x - mean) * a + load(b[param_offset(c, p.bias, p.params_dense)]);
  } else {
    const C gj = load(g[param_offset(j, p.scale, p.params_dense)]);
    if constexpr (M == Mode::rms) {
      return (x * r) * gj;
    } else {
      const C y = ((x - mean) * r) * gj;
      return p.has_bias ? y + load(b[param_offset(j, p.bias, p.params_dense)]) : y;
    }
  }
}

// Row r: thread t holds vectors t, t + blockDim, ... (`items` of them, V
// elements each).
template <class T, int V, Mode M>
__global__ __launch_bounds__(kMaxThreads) void norm_rows(const T* x, const T* g, const T* b, T* y, RowPlan p,
                                                         int items) {
  using C = compute_t<T>;
  constexpr int kItems = kRowItems<C, V>;
  __shared__ C scratch[kWarp];
  const int64_t n = p.n;
  for (int64_t row = blockIdx.x; row < p.row_count; row += gridDim.x) {
    const T* xr = x + offset_of(row, p.rows);
    T* yr = y + row * n;
    C v[kItems][V];
    C sum = 0;
#pragma unroll
    for (int it = 0; it < kItems; ++it) {
      const int64_t j = (static_cast<int64_t>(it) * blockDim.x + threadIdx.x) * V;
      if (it < items && j < n) {
        if constexpr (V > 1) {
          const Vec<T, V> w = *reinterpret_cast<const Vec<T, V>*>(xr + j);
#pragma unroll
          for (int k = 0; k < V; ++k) v[it][k] = load(w.v[k]);
        } else {
          v[it][0] = load(xr[p.row_dense ? j : offset_of(j, p.row)]);
        }
#pragma unroll
        for (int k = 0; k < V; ++k) sum += v[it][k];
      }
    }
    C mean = 0;
    if constexpr (M != Mode::rms) mean = block_reduce(sum, Plus(), scratch) / static_cast<C>(n);
    C sq = 0;
#pragma unroll
    for (int it = 0; it < kItems; ++it) {
      const int64_t j = (static_cast<int64_t>(it) * blockDim.x + threadIdx.x) * V;
      if (it < items && j < n) {
#pragma unroll
        for (int k = 0; k < V; ++k) sq += (v[it][k] - mean) * (v[it][k] - mean);
      }
    }
    const C r = rsqrt_eps(block_reduce(sq, Plus(), scratch) / static_cast<C>(n), p.epsilon);
#pragma unroll
    for (int it = 0; it < kItems; ++it) {
      const int64_t j = (static_cast<int64_t>(it) * blockDim.x + threadIdx.x) * V;
      if (it < items && j < n) {
        Vec<T, V> w;
        if (M != Mode::group && V > 1 && p.params_vec) {  // scale and bias as vectors too
          const Vec<T, V> gv = *reinterpret_cast<const Vec<T, V>*>(g + j);
          Vec<T, V> bv;
          if (M == Mode::layer && p.has_bias) bv = *reinterpret_cast<const Vec<T, V>*>(b + j);
#pragma unroll
          for (int k = 0; k < V; ++k) {
            C y = M == Mode::rms ? (v[it][k] * r) * load(gv.v[k]) : ((v[it][k] - mean) * r) * load(gv.v[k]);
            if (M == Mode::layer && p.has_bias) y += load(bv.v[k]);
            w.v[k] = store<T>(y);
          }
        } else {
#pragma unroll
          for (int k = 0; k < V; ++k) w.v[k] = store<T>(normalize<M>(g, b, p, row, j + k, v[it][k], mean, r));
        }
        *reinterpret_cast<Vec<T, V>*>(yr + j) = w;
      }
    }
  }
}

// Rows too long for the registers: mean, squared deviations and the write
// as three passes over memory.
template <class T, Mode M>
__global__ __launch_bounds__(kMaxThreads) void norm_rows_long(const T* x, const T* g, const T* b, T* y, RowPlan p) {
  using C = compute_t<T>;
  __shared__ C scratch[kWarp];
  const int64_t n = p.n;
  for (int64_t row = blockIdx.x; row < p.row_count; row += gridDim.x) {
    const T* xr = x + offset_of(row, p.rows);
    T* yr = y + row * n;
    auto at = [&](int64_t j) { return load(xr[p.row_dense ? j : offset_of(j, p.row)]); };
    C mean = 0;
    if constexpr (M != Mode::rms) {
      C sum = 0;
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x) sum += at(j);
      mean = block_reduce(sum, Plus(), scratch) / static_cast<C>(n);
    }
    C sq = 0;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) sq += (at(j) - mean) * (at(j) - mean);
    const C r = rsqrt_eps(block_reduce(sq, Plus(), scratch) / static_cast<C>(n), p.epsilon);
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      yr[j] = store<T>(normalize<M>(g, b, p, row, j, at(j), mean, r));
    }
  }
}

int pow2_ceil(int64_t n) {
  int p = 1;
  while (p < n && p < (1 << 30)) p *= 2;
  return p;
}

bool aligned(const void* ptr, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(ptr) % bytes == 0; }

template <class T, Mode M>
void launch_rows(const Tensor& x, const T* g, const T* b, const Tensor& out, const RowPlan& p,
                 const std::vector<Dim>& rows, cudaStream_t stream) {
  const T* xp = x.as<const T>();
  T* yp = out.as<T>();
  constexpr int kV = 16 / sizeof(T) < 8 ? 16 / sizeof(T) : 8;
  // Vector loads: dense rows whose starts (input and output) are aligned.
  bool vec = p.row_dense && p.n % kV == 0 && aligned(x.origin, sizeof(T) * kV) && aligned(out.origin, sizeof(T) * kV);
  for (const Dim& d : rows) vec = vec && d.stride % kV == 0;
  const int V = vec ? kV : 1;
  const int64_t vectors = (p.n + V - 1) / V;
  const unsigned grid = grid_for(p.row_count, 1);
  RowPlan q = p;
  q.params_vec = vec && p.params_dense && aligned(g, sizeof(T) * kV) && (!p.has_bias || aligned(b, sizeof(T) * kV));
  using C = compute_t<T>;
  if (vectors > static_cast<int64_t>(kMaxThreads) * (vec ? kRowItems<C, kV> : kRowItems<C, 1>)) {
    norm_rows_long<T, M><<<grid, kMaxThreads, 0, stream>>>(xp, g, b, yp, p);
    check_launch("launching norm_rows_long");
    return;
  }
  int items = 1;
  while (vectors > static_cast<int64_t>(kMaxThreads) * items) items *= 2;
  if (items == 1 && vectors > 512) items = 2;
  const int threads = std::max(kWarp, std::min(kMaxThreads, pow2_ceil((vectors + items - 1) / items)));
  if (vec) {
    norm_rows<T, kV, M><<<grid, threads, 0, stream>>>(xp, g, b, yp, q, items);
  } else {
    norm_rows<T, 1, M><<<grid, threads, 0, stream>>>(xp, g, b, yp, p, items);
  }
  check_launch("launching norm_rows");
}

// --- elementwise normalizations ------------------------------------------------------------

struct NcPlan {
  Dims x{};        // all of x's dims (coalesced): output index -> input offset
  Dims spatial{};  // x's dims 2.. (lrn)
  int64_t numel = 0, channels = 1, spatial_count = 1, batch_stride = 0, channel_stride = 0;
  int64_t param_stride[4] = {0, 0, 0, 0};  // scale, bias, mean, var (1-d, C elements)
  double epsilon = 0, alpha = 0, beta = 0, bias = 0;
  int64_t size = 1;
  bool relu = false;  // batch_norm's activation
};

template <class T>
__global__ void batch_norm_kernel(const T* x, const T* scale, const T* bias, const T* mean, const T* var, T* y,
                                  NcPlan p) {
  using C = compute_t<T>;
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < p.numel; i += step) {
    const int64_t c = (i / p.spatial_count) % p.channels;
    const double s = static_cast<double>(load(scale[c * p.param_stride[0]]));
    const double v = static_cast<double>(load(var[c * p.param_stride[3]]));
    const C a = static_cast<C>(s / sqrt(v + p.epsilon));
    const C m = load(mean[c * p.param_stride[2]]), b = load(bias[c * p.param_stride[1]]);
    const C out = (load(x[offset_of(i, p.x)]) - m) * a + b;
    y[i] = store<T>(p.relu && out < C(0) ? C(0) : out);  // NaN stays NaN
  }
}

template <class C> __device__ __forceinline__ C pow_c(C a, C b) {
  if constexpr (sizeof(C) == 8) return pow(a, b);
  else return powf(a, b);
}

// x / (bias + alpha / size * sum of x^2 over the window) ^ beta; the window
// of channel c is [c - floor((size - 1) / 2), c + ceil((size - 1) / 2)]
// clipped to the channels.
template <class T> __global__ void lrn_kernel(const T* x, T* y, NcPlan p) {
  using C = compute_t<T>;
  const int64_t before = (p.size - 1) / 2, after = p.size / 2;
  const C k = static_cast<C>(p.bias), scale = static_cast<C>(p.alpha / static_cast<double>(p.size));
  const C nbeta = static_cast<C>(-p.beta);
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < p.numel; i += step) {
    const int64_t j = i % p.spatial_count, c = (i / p.spatial_count) % p.channels;
    const int64_t nb = i / (p.spatial_count * p.channels);
    const T* base = x + nb * p.batch_stride + offset_of(j, p.spatial);
    const int64_t lo = c - before > 0 ? c - before : 0, hi = c + after < p.channels - 1 ? c + after : p.channels - 1;
    C sum = 0;
    for (int64_t cc = lo; cc <= hi; ++cc) {
      const C v = load(base[cc * p.channel_stride]);
      sum += v * v;
    }
    y[i] = store<T>(load(base[c * p.channel_stride]) * pow_c(k + scale * sum, nbeta));
  }
}

// --- planning --------------------------------------------------------------------------------

double non_negative(const cd_kernel_context* ctx, const char* name) {
  const double v = float_attribute(ctx, name);
  if (!(v >= 0)) fail(CD_STATUS_INVALID_ARGUMENT, "attribute '%s' = %g must be >= 0", name, v);
  return v;
}

int64_t product(const std::vector<int64_t>& shape, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t i = begin; i < end; ++i) n *= shape[i];
  return n;
}

// x and the parameters: one float dtype; the output like x.
std::vector<Tensor> operands(const cd_kernel_context* ctx, const Tensor& out) {
  std::vector<Tensor> t;
  for (int32_t i = 0; i < ctx->num_inputs; ++i) {
    t.push_back(input(ctx, i));
    if (i == 0 && (ew::kFloatMask & ew::bit(t[0].dtype)) == 0) {
      fail(CD_STATUS_INVALID_ARGUMENT, "input 0: dtype %d is not supported", t[0].dtype);
    }
    if (i > 0) require_dtype(t[i], t[0].dtype, ("input " + std::to_string(i)).c_str());
  }
  require_dtype(out, t[0].dtype, "output 0");
  require_shape(out, t[0].shape, "output 0");
  require_contiguous(out, "output 0");
  return t;
}

// (N, C, ...): the channel parameters have shape (C,).
void require_nc(const std::vector<Tensor>& t, const char* op) {
  if (t[0].shape.size() < 2) {
    fail(CD_STATUS_INVALID_ARGUMENT, "%s expects x of shape (N, C, ...), got %zu dims", op, t[0].shape.size());
  }
  for (size_t i = 1; i < t.size(); ++i) {
    require_shape(t[i], {t[0].shape[1]}, ("input " + std::to_string(i)).c_str());
  }
}

Dims param_dims(const Tensor& t, bool* dense) {
  const std::vector<Dim> d = coalesce(t.dims(0, t.shape.size()));
  *dense = *dense && is_dense(d);
  return to_dims(d);
}

template <Mode M> void run_rows(const std::vector<Tensor>& t, const Tensor& out, RowPlan& p,
                                const std::vector<Dim>& rows, cudaStream_t stream) {
  ew::dispatch<ew::kFloatMask>(t[0].dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* g = t[1].as<const T>();
    const T* b = t.size() > 2 ? t[2].as<const T>() : g;  // never read without a bias
    launch_rows<T, M>(t[0], g, b, out, p, rows, stream);
  });
}

void enqueue_layer_norm(const cd_kernel_context* ctx, bool rms) {
  cudaStream_t stream = begin(ctx, 2, rms ? 2 : 3);
  const Tensor out = output(ctx);
  const std::vector<Tensor> t = operands(ctx, out);
  RowPlan p;
  p.epsilon = non_negative(ctx, "epsilon");
  const size_t ndim = t[0].shape.size(), k = t[1].shape.size();
  if (k > ndim) fail(CD_STATUS_INVALID_ARGUMENT, "scale has %zu dims but x only %zu", k, ndim);
  const std::vector<int64_t> trailing(t[0].shape.end() - static_cast<std::ptrdiff_t>(k), t[0].shape.end());
  require_shape(t[1], trailing, "input 1 (scale)");
  p.has_bias = t.size() > 2;
  if (p.has_bias) require_shape(t[2], trailing, "input 2 (bias)");
  if (out.numel == 0) return;
  const std::vector<Dim> rows = coalesce(t[0].dims(0, ndim - k)), row = coalesce(t[0].dims(ndim - k, ndim));
  p.rows = to_dims(rows);
  p.row = to_dims(row);
  p.row_dense = is_dense(row);
  p.row_count = product(t[0].shape, 0, ndim - k);
  p.n = product(t[0].shape, ndim - k, ndim);
  p.scale = param_dims(t[1], &p.params_dense);
  if (p.has_bias) p.bias = param_dims(t[2], &p.params_dense);
  if (rms) {
    run_rows<Mode::rms>(t, out, p, rows, stream);
  } else {
    run_rows<Mode::layer>(t, out, p, rows, stream);
  }
}

void enqueue_group_norm(const cd_kernel_context* ctx) {
  cudaStream_t stream = begin(ctx, 3, 3);
  const Tensor out = output(ctx);
  const std::vector<Tensor> t = operands(ctx, out);
  require_nc(t, "group_norm");
  RowPlan p;
  p.epsilon = non_negative(ctx, "epsilon");
  const int64_t channels = t[0].shape[1];
  p.groups = int_attribute(ctx, "num_groups");
  if (p.groups < 1 || channels % p.groups != 0) {
    fail(CD_STATUS_INVALID_ARGUMENT, "num_groups = %lld must be >= 1 and divide C = %lld",
         static_cast<long long>(p.groups), static_cast<long long>(channels));
  }
  if (out.numel == 0) return;
  const size_t ndim = t[0].shape.size();
  p.group_channels = channels / p.groups;
  p.spatial = product(t[0].shape, 2, ndim);
  const std::vector<Dim> rows =
      coalesce({{t[0].shape[0], t[0].strides[0]}, {p.groups, p.group_channels * t[0].strides[1]}});
  std::vector<Dim> row{{p.group_channels, t[0].strides[1]}};
  for (const Dim& d : t[0].dims(2, ndim)) row.push_back(d);
  row = coalesce(row);
  p.rows = to_dims(rows);
  p.row = to_dims(row);
  p.row_dense = is_dense(row);
  p.row_count = t[0].shape[0] * p.groups;
  p.n = p.group_channels * p.spatial;
  p.has_bias = true;
  p.scale = param_dims(t[1], &p.params_dense);
  p.bias = param_dims(t[2], &p.params_dense);
  run_rows<Mode::group>(t, out, p, rows, stream);
}

NcPlan plan_nc(const Tensor& x) {
  NcPlan p;
  p.x = to_dims(coalesce(x.dims(0, x.shape.size())));
  p.spatial = to_dims(coalesce(x.dims(2, x.shape.size())));
  p.numel = x.numel;
  p.channels = x.shape[1];
  p.spatial_count = product(x.shape, 2, x.shape.size());
  p.batch_stride = x.strides[0];
  p.channel_stride = x.strides[1];
  return p;
}

void enqueue_batch_norm(const cd_kernel_context* ctx) {
  cudaStream_t stream = begin(ctx, 5, 5);
  const Tensor out = output(ctx);
  const std::vector<Tensor> t = operands(ctx, out);
  require_nc(t, "batch_norm");
  const double eps = non_negative(ctx, "epsilon");
  const bool relu = chipdock::support::choice_attribute(ctx, "activation", {"none", "relu"}) == 1;
  if (out.numel == 0) return;
  NcPlan p = plan_nc(t[0]);
  p.epsilon = eps;
  p.relu = relu;
  for (int i = 0; i < 4; ++i) p.param_stride[i] = t[i + 1].strides[0];
  constexpr int kThreads = 256;
  ew::dispatch<ew::kFloatMask>(t[0].dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    batch_norm_kernel<T><<<grid_for(p.numel, kThreads), kThreads, 0, stream>>>(
        t[0].as<const T>(), t[1].as<const T>(), t[2].as<const T>(), t[3].as<const T>(), t[4].as<const T>(),
        out.as<T>(), p);
  });
  check_launch("launching batch_norm_kernel");
}

void enqueue_lrn(const cd_kernel_context* ctx) {
  cudaStream_t stream = begin(ctx, 1, 1);
  const Tensor out = output(ctx);
  const std::vector<Tensor> t = operands(ctx, out);
  require_nc(t, "local_response_norm");
  const int64_t size = int_attribute(ctx, "size");
  if (size < 1) fail(CD_STATUS_INVALID_ARGUMENT, "attribute 'size' = %lld must be >= 1", static_cast<long long>(size));
  const double alpha = float_attribute(ctx, "alpha"), beta = float_attribute(ctx, "beta"), bias = float_attribute(ctx, "bias");
  if (out.numel == 0) return;
  NcPlan p = plan_nc(t[0]);
  p.size = size;
  p.alpha = alpha;
  p.beta = beta;
  p.bias = bias;
  constexpr int kThreads = 256;
  ew::dispatch<ew::kFloatMask>(t[0].dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    lrn_kernel<T><<<grid_for(p.numel, kThreads), kThreads, 0, stream>>>(t[0].as<const T>(), out.as<T>(), p);
  });
  check_launch("launching lrn_kernel");
}

cd_error* layer_norm_kernel(const cd_kernel_context* ctx) noexcept {
  return guard("layer_norm", [ctx] { enqueue_layer_norm(ctx, false); });
}
cd_error* rms_norm_kernel(const cd_kernel_context* ctx) noexcept {
  return guard("rms_norm", [ctx] { enqueue_layer_norm(ctx, true); });
}
cd_error* group_norm_kernel(const cd_kernel_context* ctx) noexcept {
  return guard("group_norm", [ctx] { enqueue_group_norm(ctx); });
}
cd_error* batch_norm_kernel_fn(const cd_kernel_context* ctx) noexcept {
  return guard("batch_norm", [ctx] { enqueue_batch_norm(ctx); });
}
cd_error* lrn_kernel_fn(const cd_kernel_context* ctx) noexcept {
  return guard("local_response_norm", [ctx] { enqueue_lrn(ctx); });
}

}  // namespace

void register_norm_ops(cd_kernel_registry* registry) {
  register_same(registry, "layer_norm", layer_norm_kernel, ew::kFloatMask, 4);
  register_same(registry, "rms_norm", rms_norm_kernel, ew::kFloatMask, 3);
  register_same(registry, "group_norm", group_norm_kernel, ew::kFloatMask, 4);
  register_same(registry, "batch_norm", batch_norm_kernel_fn, ew::kFloatMask, 6);
  register_same(registry, "local_response_norm", lrn_kernel_fn, ew::kFloatMask, 2);
}

}  // namespace red
}  // namespace chipdock_cuda
