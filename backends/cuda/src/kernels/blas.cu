// The linear-algebra family's shared machinery (see blas.cuh).
#include "blas.cuh"

#include <array>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "../cublaslt_api.h"
#include "../cuda_check.h"
#include "../resources.h"
#include "elementwise.cuh"
#include "chipdock/support/dtype_info.h"

namespace chipdock_cuda {
namespace blas {

int64_t itemsize(cd_dtype_t dtype) {
  switch (dtype) {
    case CD_DTYPE_FLOAT64: case CD_DTYPE_INT64: return 8;
    case CD_DTYPE_FLOAT32: case CD_DTYPE_INT32: return 4;
    case CD_DTYPE_FLOAT16: case CD_DTYPE_BFLOAT16: case CD_DTYPE_INT16: return 2;
    default: return 1;
  }
}

bool is_float(cd_dtype_t dtype) {
  return dtype == CD_DTYPE_FLOAT32 || dtype == CD_DTYPE_FLOAT16 || dtype == CD_DTYPE_BFLOAT16 ||
         dtype == CD_DTYPE_FLOAT64;
}

const char* dtype_name(cd_dtype_t dtype) {
  const char* name = chipdock::support::dtype_name(dtype);  // the kit's table (chipdock/support/dtype_info.h)
  return name != nullptr ? name : "unknown";
}

int64_t product(const Dims& v) {
  int64_t p = 1;
  for (int64_t x : v) p *= x;
  return p;
}

cd_dtype_t compute_dtype(cd_dtype_t dtype) { return dtype == CD_DTYPE_FLOAT64 ? dtype : CD_DTYPE_FLOAT32; }

// ---------------------------------------------------------------- operands --

cudaStream_t begin(const cd_kernel_context* ctx, int32_t min_in, int32_t max_in) {
  require_non_null(ctx, "ctx");
  if (ctx->num_inputs < min_in || ctx->num_inputs > max_in || ctx->num_outputs != 1) {
    fail(CD_STATUS_INVALID_ARGUMENT, "takes %d to %d inputs and 1 output, got %d and %d", min_in, max_in,
         ctx->num_inputs, ctx->num_outputs);
  }
  if (ctx->inputs == nullptr || ctx->outputs == nullptr) fail(CD_STATUS_INVALID_ARGUMENT, "no operand array");
  for (int32_t i = 0; i < ctx->num_inputs; ++i) {
    if (ctx->inputs[i] == nullptr) fail(CD_STATUS_INVALID_ARGUMENT, "input %d is NULL", i);
  }
  require_non_null(ctx->outputs[0], "output 0");
  cd_stream* stream = live_stream(ctx->stream);
  if (stream->device != ctx->device) {
    fail(CD_STATUS_INVALID_ARGUMENT, "the stream is on device %d, the call on %d", stream->device, ctx->device);
  }
  use_device(ctx->device);
  return stream->stream;
}

namespace {

Tensor resolve(const cd_tensor_view* v, int32_t device, cd_dtype_t dtype, const char* what, int index) {
  if (v->format != CD_FORMAT_STRIDED) {
    fail(CD_STATUS_INVALID_ARGUMENT, "%s %d has unknown format %d", what, index, v->format);
  }
  if (v->ndim < 0 || v->ndim > kMaxDims || (v->ndim > 0 && (v->shape == nullptr || v->strides == nullptr))) {
    fail(CD_STATUS_INVALID_ARGUMENT, "%s %d has a bad shape (ndim %d)", what, index, v->ndim);
  }
  if (v->device != device) {
    fail(CD_STATUS_INVALID_ARGUMENT, "%s %d is on device %d, the call on %d", what, index, v->device, device);
  }
  if (!is_float(v->dtype)) {
    fail(CD_STATUS_INVALID_ARGUMENT, "%s %d has dtype %d; a float dtype is required", what, index, v->dtype);
  }
  if (v->dtype != dtype) {
    fail(CD_STATUS_INVALID_ARGUMENT, "%s %d is %s but the output is %s", what, index, dtype_name(v->dtype),
         dtype_name(dtype));
  }
  Tensor t;
  t.dtype = v->dtype;
  t.shape.assign(v->shape, v->shape + v->ndim);
  t.strides.assign(v->strides, v->strides + v->ndim);
  for (int64_t n : t.shape) {
    if (n < 0) fail(CD_STATUS_INVALID_ARGUMENT, "%s %d has a negative extent", what, index);
  }
  const int64_t item = itemsize(t.dtype);
  t.origin = static_cast<char*>(v->data) + v->byte_offset;
  if (reinterpret_cast<uintptr_t>(t.origin) % item != 0) {
    fail(CD_STATUS_INVALID_ARGUMENT, "%s %d is not aligned to its element size", what, index);
  }
  if (t.numel() > 0) {  // the bytes it touches lie in one live allocation of the device
    int64_t lo = 0, hi = 0;
    for (size_t d = 0; d < t.ndim(); ++d) {
      const int64_t span = t.strides[d] * (t.shape[d] - 1) * item;
      (span < 0 ? lo : hi) += span;
    }
    check_range(device, t.origin + lo, static_cast<size_t>(hi - lo + item), what);
  }
  return t;
}

}  // namespace

Tensor output(const cd_kernel_context* ctx) {
  const cd_tensor_view* v = ctx->outputs[0];
  Tensor t = resolve(v, ctx->device, v->dtype, "output", 0);
  int64_t expect = 1;
  for (size_t i = t.ndim(); i-- > 0;) {
    if (t.shape[i] != 1 && t.strides[i] != expect) {
      fail(CD_STATUS_INVALID_ARGUMENT, "output 0 is not C-contiguous (dim %zu has stride %lld)", i,
           static_cast<long long>(t.strides[i]));
    }
    expect *= t.shape[i];
  }
  return t;
}

Tensor input(const cd_kernel_context* ctx, int32_t i) {
  return resolve(ctx->inputs[i], ctx->device, ctx->outputs[0]->dtype, "input", i);
}

void require_ndim(const Tensor& t, size_t ndim, const char* what) {
  if (t.ndim() != ndim) fail(CD_STATUS_INVALID_ARGUMENT, "%s must be %zu-d, got %zu dims", what, ndim, t.ndim());
}

Dims broadcast_shapes(const Dims& a, const Dims& b, const char* what) {
  const size_t n = a.size() > b.size() ? a.size() : b.size();
  Dims out(n, 1);
  for (size_t i = 0; i < n; ++i) {
    const int64_t x = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t y = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (x != y && x != 1 && y != 1) {
      fail(CD_STATUS_INVALID_ARGUMENT, "%s do not broadcast (%lld vs %lld in dim %zu)", what,
           static_cast<long long>(x), static_cast<long long>(y), i);
    }
    out[i] = x == 1 ? y : x;
  }
  return out;
}

Dims align_batch(const Tensor& t, size_t lead, const Dims& target, const char* what) {
  if (lead > target.size()) fail(CD_STATUS_INVALID_ARGUMENT, "%s has more batch dims than the result", what);
  Dims strides(target.size(), 0);
  const size_t skip = target.size() - lead;
  for (size_t i = 0; i < lead; ++i) {
    const int64_t n = t.shape[i];
    if (n == target[skip + i]) {
      strides[skip + i] = n == 1 ? 0 : t.strides[i];
    } else if (n != 1) {
      fail(CD_STATUS_INVALID_ARGUMENT, "%s: dim %zu (%lld) does not broadcast to %lld", what, i,
           static_cast<long long>(n), static_cast<long long>(target[skip + i]));
    }
  }
  return strides;
}

// ----------------------------------------------------------------- scratch --

Scratch::Scratch(size_t bytes, cudaStream_t stream) : stream_(stream) {
  if (bytes > 0) check(cudaMallocAsync(&p_, bytes, stream), "cudaMallocAsync (kernel scratch)");
}

Scratch::~Scratch() {
  if (p_ != nullptr) (void)cudaFreeAsync(p_, stream_);
}

// ------------------------------------------------------------------ copies --

namespace {

constexpr int kThreads = 256;

struct Walk {
  int32_t ndim;
  int64_t numel;
  int64_t shape[kMaxDims];
  int64_t src[kMaxDims], dst[kMaxDims];  // elements
};

unsigned grid_for(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 65535 * 16 ? blocks : 65535 * 16);
}

template <class In, class Out, bool Scaled>
__global__ void copy_convert_kernel(const In* src, Out* dst, Walk w, double scale) {
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < w.numel; i += step) {
    int64_t rest = i, s = 0, d = 0;
    for (int k = w.ndim - 1; k >= 0; --k) {
      const int64_t c = rest % w.shape[k];
      rest /= w.shape[k];
      s += c * w.src[k];
      d += c * w.dst[k];
    }
    if constexpr (Scaled) {
      dst[d] = ew::store<Out>(static_cast<double>(ew::load(src[s])) * scale);
    } else {
      dst[d] = ew::store<Out>(ew::load(src[s]));
    }
  }
}

template <class T> __global__ void fill_kernel(T* dst, int64_t n, double value) {
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  const T v = ew::store<T>(value);
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += step) dst[i] = v;
}

}  // namespace

Dims contiguous_strides(const Dims& shape) {
  Dims s(shape.size());
  int64_t step = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    s[i] = step;
    step *= shape[i];
  }
  return s;
}

void copy_convert(const void* src, cd_dtype_t from, const Dims& src_strides, void* dst, cd_dtype_t to,
                  const Dims& dst_strides, const Dims& shape, cudaStream_t stream, bool scaled, double scale) {
  Walk w{};
  w.numel = product(shape);
  if (w.numel == 0) return;
  // Drop size-1 dims; merge a dim into its outer neighbour where both sides step over the pair as one.
  for (size_t i = 0; i < shape.size(); ++i) {
    const int64_t n = shape[i];
    if (n == 1) continue;
    const int32_t last = w.ndim - 1;
    if (last >= 0 && w.src[last] == src_strides[i] * n && w.dst[last] == dst_strides[i] * n) {
      w.shape[last] *= n;
      w.src[last] = src_strides[i];
      w.dst[last] = dst_strides[i];
      continue;
    }
    if (w.ndim == kMaxDims) fail(CD_STATUS_UNIMPLEMENTED, "more than %d non-mergeable dimensions", kMaxDims);
    w.shape[w.ndim] = n;
    w.src[w.ndim] = src_strides[i];
    w.dst[w.ndim] = dst_strides[i];
    ++w.ndim;
  }
  ew::dispatch<ew::kFloatMask>(from, [&](auto in_tag) {
    using In = typename decltype(in_tag)::type;
    ew::dispatch<ew::kFloatMask>(to, [&](auto out_tag) {
      using Out = typename decltype(out_tag)::type;
      const auto* s = static_cast<const In*>(src);
      auto* d = static_cast<Out*>(dst);
      if (scaled) {
        copy_convert_kernel<In, Out, true><<<grid_for(w.numel), kThreads, 0, stream>>>(s, d, w, scale);
      } else {
        copy_convert_kernel<In, Out, false><<<grid_for(w.numel), kThreads, 0, stream>>>(s, d, w, scale);
      }
    });
  });
  check(cudaGetLastError(), "launching copy_convert");
}

void fill(void* dst, cd_dtype_t dtype, int64_t count, double value, cudaStream_t stream) {
  if (count <= 0) return;
  ew::dispatch<ew::kFloatMask>(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    fill_kernel<T><<<grid_for(count), kThreads, 0, stream>>>(static_cast<T*>(dst), count, value);
  });
  check(cudaGetLastError(), "launching fill");
}

// -------------------------------------------------------------------- GEMM --

void normalize(Mat& m) {
  if (m.cols == 1) m.cs = (m.rs == 1 && m.rows > 1) ? m.rows : 1;
  if (m.rows == 1) m.rs = (m.cs == 1) ? m.cols : 1;
  if (m.rows == 1 && m.cols == 1) m.rs = m.cs = 1;
}

bool direct(Mat m) {
  normalize(m);
  if (m.batch_stride < 0) return false;
  const int64_t rows = m.rows > 1 ? m.rows : 1, cols = m.cols > 1 ? m.cols : 1;
  return (m.cs == 1 && m.rs >= cols) || (m.rs == 1 && m.cs >= rows);
}

std::unique_ptr<Scratch> pack(Mat& m, Dims& bstrides, const Dims& batch, cd_dtype_t to, cudaStream_t stream) {
  Dims shape, src;
  for (size_t i = 0; i < batch.size(); ++i) {
    if (bstrides[i] == 0) continue;
    shape.push_back(batch[i]);
    src.push_back(bstrides[i]);
  }
  shape.push_back(m.rows);
  shape.push_back(m.cols);
  src.push_back(m.rs);
  src.push_back(m.cs);
  const Dims dst = contiguous_strides(shape);
  auto buf = std::make_unique<Scratch>(static_cast<size_t>(product(shape) * itemsize(to)), stream);
  copy_convert(m.data, m.dtype, src, buf->data(), to, dst, shape, stream);
  size_t k = 0;
  for (int64_t& s : bstrides) {
    if (s != 0) s = dst[k++];
  }
  m.data = buf->data();
  m.dtype = to;
  m.rs = m.cols;
  m.cs = 1;
  normalize(m);
  return buf;
}

bool steps_backwards(const Dims& strides) {
  for (int64_t s : strides) {
    if (s < 0) return true;
  }
  return false;
}

namespace {

cudaDataType_t cuda_type(cd_dtype_t d) {
  switch (d) {
    case CD_DTYPE_FLOAT32: return CUDA_R_32F;
    case CD_DTYPE_FLOAT16: return CUDA_R_16F;
    case CD_DTYPE_BFLOAT16: return CUDA_R_16BF;
    case CD_DTYPE_FLOAT64: return CUDA_R_64F;
    default: fail(CD_STATUS_INTERNAL, "no cuBLASLt type for dtype %d", d);
  }
}

void lt_check(cublasStatus_t st, const char* what) {
  if (st == CUBLAS_STATUS_SUCCESS) return;
  const cd_status_t code = st == CUBLAS_STATUS_ALLOC_FAILED     ? CD_STATUS_OUT_OF_MEMORY
                           : st == CUBLAS_STATUS_NOT_SUPPORTED  ? CD_STATUS_UNIMPLEMENTED
                           : st == CUBLAS_STATUS_EXECUTION_FAILED ? CD_STATUS_DEVICE_ERROR
                                                                  : CD_STATUS_INTERNAL;
  fail(code, "%s: %s", what, cublaslt_api().cublasLtGetStatusString(st));
}

// Owners of the cuBLASLt descriptors of one call. Only the loaded table
// sets h, so a destructor that has one to free never loads (or throws).
struct Layout {
  cublasLtMatrixLayout_t h = nullptr;
  ~Layout() { if (h != nullptr) (void)cublaslt_api().cublasLtMatrixLayoutDestroy(h); }
};
struct Desc {
  cublasLtMatmulDesc_t h = nullptr;
  ~Desc() { if (h != nullptr) (void)cublaslt_api().cublasLtMatmulDescDestroy(h); }
};
struct Pref {
  cublasLtMatmulPreference_t h = nullptr;
  ~Pref() { if (h != nullptr) (void)cublaslt_api().cublasLtMatmulPreferenceDestroy(h); }
};

// A row-major operand in cuBLASLt's column-major terms: the stored matrix
// (lrows x lcols, leading dimension ld) and whether the product transposes it.
struct ColMajor {
  uint64_t lrows, lcols;
  int64_t ld;
  cublasOperation_t op;
};

ColMajor col_major(const Mat& m) {
  if (m.cs == 1) return {static_cast<uint64_t>(m.cols), static_cast<uint64_t>(m.rows), m.rs, CUBLAS_OP_N};
  return {static_cast<uint64_t>(m.rows), static_cast<uint64_t>(m.cols), m.cs, CUBLAS_OP_T};
}

void make_layout(Layout& l, cudaDataType_t type, uint64_t rows, uint64_t cols, int64_t ld, int32_t batch,
                 int64_t stride) {
  const CublasLtApi& lt = cublaslt_api();
  lt_check(lt.cublasLtMatrixLayoutCreate(&l.h, type, rows, cols, ld), "cublasLtMatrixLayoutCreate");
  if (batch > 1) {
    lt_check(lt.cublasLtMatrixLayoutSetAttribute(l.h, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof(batch)),
             "setting the batch count");
    lt_check(lt.cublasLtMatrixLayoutSetAttribute(l.h, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                                 sizeof(stride)),
             "setting the batch stride");
  }
}

// The largest power of two <= 256 dividing the address (and the batch step
// in bytes when batched): cuBLASLt's heuristics assume 256 unless told.
uint32_t alignment(const void* p, int64_t stride_bytes, bool batched) {
  uint32_t a = 256;
  const uintptr_t addr = reinterpret_cast<uintptr_t>(p);
  while (a > 1 && (addr % a != 0 || (batched && stride_bytes % a != 0))) a /= 2;
  return a;
}

void set_pref(const Pref& p, cublasLtMatmulPreferenceAttributes_t attr, uint32_t v) {
  lt_check(cublaslt_api().cublasLtMatmulPreferenceSetAttribute(p.h, attr, &v, sizeof(v)),
           "setting a matmul preference");
}

// The heuristic's answer by problem (asking costs tens of microseconds):
// device, dtypes, transposes, sizes, leading dimensions, batch and strides,
// alignments.
using AlgoKey = std::array<int64_t, 18>;
struct Choice {
  bool found;
  cublasLtMatmulAlgo_t algo;
};
std::mutex g_algo_mutex;
std::map<AlgoKey, Choice> g_algos;
constexpr size_t kMaxCachedAlgos = 4096;

// The algorithm for one call: cached, or what cuBLASLt's heuristic ranks
// first; `found` false when it offers none.
Choice pick_algo(const BlasDevice& bd, const AlgoKey& key, cublasLtMatmulDesc_t desc,
                               const Layout& la, const Layout& lb, const Layout& ld) {
  std::lock_guard<std::mutex> lock(g_algo_mutex);
  auto hit = g_algos.find(key);
  if (hit != g_algos.end()) return hit->second;
  const CublasLtApi& lt = cublaslt_api();
  Pref pref;
  lt_check(lt.cublasLtMatmulPreferenceCreate(&pref.h), "cublasLtMatmulPreferenceCreate");
  const uint64_t ws = bd.workspace_bytes;
  lt_check(lt.cublasLtMatmulPreferenceSetAttribute(pref.h, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)),
           "setting the workspace size");
  // Split-K partial sums in the compute type, never in a 16-bit output type.
  set_pref(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
           CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE);
  set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, static_cast<uint32_t>(key[15]));
  set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, static_cast<uint32_t>(key[16]));
  set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, static_cast<uint32_t>(key[17]));
  set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, static_cast<uint32_t>(key[17]));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t st =
      lt.cublasLtMatmulAlgoGetHeuristic(bd.handle, desc, la.h, lb.h, ld.h, ld.h, pref.h, 1, &result, &found);
  if (st == CUBLAS_STATUS_NOT_SUPPORTED) found = 0;  // how it says it has nothing for the configuration
  else lt_check(st, "cublasLtMatmulAlgoGetHeuristic");
  if (g_algos.size() >= kMaxCachedAlgos) g_algos.clear();
  const Choice choice{found > 0, result.algo};
  g_algos.emplace(key, choice);
  return choice;
}

// One cuBLASLt call for `batch` entries starting at the given pointers;
// false if cuBLASLt has no algorithm for it or refuses it.
bool gemm_chunk(int32_t device, BlasDevice& bd, cudaStream_t stream, const Gemm& g, const void* a, const void* b,
                void* d, int32_t batch) {
  const cd_dtype_t in = g.a.dtype;
  const bool f64 = in == CD_DTYPE_FLOAT64;
  // Row-major D = A @ B is column-major D^T = B^T @ A^T: cuBLASLt's A is our b, its B our a.
  const ColMajor ca = col_major(g.b), cb = col_major(g.a);
  const CublasLtApi& lt = cublaslt_api();
  Desc desc;
  lt_check(lt.cublasLtMatmulDescCreate(&desc.h, f64 ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F,
                                       f64 ? CUDA_R_64F : CUDA_R_32F),
           "cublasLtMatmulDescCreate");
  const int32_t ta = ca.op, tb = cb.op;
  lt_check(lt.cublasLtMatmulDescSetAttribute(desc.h, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)), "setting TRANSA");
  lt_check(lt.cublasLtMatmulDescSetAttribute(desc.h, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)), "setting TRANSB");
  const int64_t in_item = itemsize(in), d_item = itemsize(g.d_dtype);
  Layout la, lb, ld;
  make_layout(la, cuda_type(in), ca.lrows, ca.lcols, ca.ld, batch, g.b.batch_stride);
  make_layout(lb, cuda_type(in), cb.lrows, cb.lcols, cb.ld, batch, g.a.batch_stride);
  make_layout(ld, cuda_type(g.d_dtype), static_cast<uint64_t>(g.N), static_cast<uint64_t>(g.M), g.ldd, batch,
              g.d_stride);
  const bool batched = batch > 1;
  const AlgoKey key{device, in, g.d_dtype, ta, tb, g.M, g.N, g.K, ca.ld, cb.ld, g.ldd, batch,
                    batched ? g.b.batch_stride : 0, batched ? g.a.batch_stride : 0, batched ? g.d_stride : 0,
                    alignment(b, g.b.batch_stride * in_item, batched),
                    alignment(a, g.a.batch_stride * in_item, batched),
                    alignment(d, g.d_stride * d_item, batched)};
  const Choice choice = pick_algo(bd, key, desc.h, la, lb, ld);
  if (!choice.found) return false;
  const float alpha32 = static_cast<float>(g.alpha), beta32 = static_cast<float>(g.beta);
  const void* alpha = f64 ? static_cast<const void*>(&g.alpha) : &alpha32;
  const void* beta = f64 ? static_cast<const void*>(&g.beta) : &beta32;
  const cublasStatus_t st = lt.cublasLtMatmul(bd.handle, desc.h, alpha, b, la.h, a, lb.h, beta, d, ld.h, d, ld.h,
                                              &choice.algo, bd.workspace, bd.workspace_bytes, stream);
  if (st == CUBLAS_STATUS_NOT_SUPPORTED) return false;  // checked before anything is enqueued
  lt_check(st, "cublasLtMatmul");
  check(cudaGetLastError(), "cublasLtMatmul");
  return true;
}

constexpr int kTile = 16;

// The fallback where cuBLASLt offers no algorithm or refuses the call (it
// has one for every layout we give it on the GPUs we build for; this keeps
// an exotic alignment or a future GPU correct, if slower): D = alpha * A @ B (+ beta * D), one
// 16x16 output tile per block through shared memory, batch entry
// blockIdx.z, accumulating in Acc and rounding once. Strides in elements.
template <class In, class Out, class Acc>
__global__ void tiled_gemm(const In* A, const In* B, Out* D, int64_t M, int64_t N, int64_t K, int64_t a_rs,
                           int64_t a_cs, int64_t a_bs, int64_t b_rs, int64_t b_cs, int64_t b_bs, int64_t ldd,
                           int64_t d_bs, Acc alpha, Acc beta) {
  __shared__ Acc ta[kTile][kTile + 1], tb[kTile][kTile + 1];
  const int tx = threadIdx.x, ty = threadIdx.y;
  A += blockIdx.z * a_bs;
  B += blockIdx.z * b_bs;
  D += blockIdx.z * d_bs;
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kTile + tx;
  // Row tiles beyond gridDim.y (<= 65535) are taken in turns; every thread runs the same iterations.
  const int64_t row_step = static_cast<int64_t>(gridDim.y) * kTile;
  for (int64_t row0 = static_cast<int64_t>(blockIdx.y) * kTile; row0 < M; row0 += row_step) {
    const int64_t row = row0 + ty;
    Acc acc = 0;
    for (int64_t k0 = 0; k0 < K; k0 += kTile) {
      const int64_t ka = k0 + tx, kb = k0 + ty;
      ta[ty][tx] = row < M && ka < K ? static_cast<Acc>(ew::load(A[row * a_rs + ka * a_cs])) : Acc(0);
      tb[ty][tx] = kb < K && col < N ? static_cast<Acc>(ew::load(B[kb * b_rs + col * b_cs])) : Acc(0);
      __syncthreads();
#pragma unroll
      for (int k = 0; k < kTile; ++k) acc += ta[ty][k] * tb[k][tx];
      __syncthreads();
    }
    if (row < M && col < N) {
      Out* d = D + row * ldd + col;
      Acc v = alpha * acc;
      if (beta != Acc(0)) v += beta * static_cast<Acc>(ew::load(*d));
      *d = ew::store<Out>(v);
    }
  }
}

void fallback_chunk(cudaStream_t stream, const Gemm& g, const void* a, const void* b, void* d, int32_t batch) {
  const int64_t n_tiles = (g.N + kTile - 1) / kTile, m_tiles = (g.M + kTile - 1) / kTile;
  const dim3 grid(static_cast<unsigned>(n_tiles), static_cast<unsigned>(m_tiles < 65535 ? m_tiles : 65535),
                  static_cast<unsigned>(batch));
  const dim3 block(kTile, kTile);
  ew::dispatch<ew::kFloatMask>(g.a.dtype, [&](auto tag) {
    using In = typename decltype(tag)::type;
    using Acc = std::conditional_t<std::is_same_v<In, double>, double, float>;
    auto launch = [&](auto* out) {
      using Out = std::remove_pointer_t<decltype(out)>;
      tiled_gemm<In, Out, Acc><<<grid, block, 0, stream>>>(
          static_cast<const In*>(a), static_cast<const In*>(b), static_cast<Out*>(d), g.M, g.N, g.K, g.a.rs,
          g.a.cs, g.a.batch_stride, g.b.rs, g.b.cs, g.b.batch_stride, g.ldd, g.d_stride, static_cast<Acc>(g.alpha),
          static_cast<Acc>(g.beta));
    };
    if (g.d_dtype == g.a.dtype) {
      launch(static_cast<In*>(nullptr));
    } else if (g.d_dtype == compute_dtype(g.a.dtype)) {
      launch(static_cast<Acc*>(nullptr));
    } else {
      fail(CD_STATUS_INTERNAL, "gemm: output dtype %d for %s inputs", g.d_dtype, dtype_name(g.a.dtype));
    }
  });
  check(cudaGetLastError(), "launching the fallback GEMM");
}

}  // namespace

void gemm(int32_t device, cudaStream_t stream, const Gemm& g_in) {
  Gemm g = g_in;
  normalize(g.a);
  normalize(g.b);
  if (!direct(g.a) || !direct(g.b) || g.a.dtype != g.b.dtype || g.K <= 0 || g.M <= 0 || g.N <= 0 ||
      g.ldd < g.N) {
    fail(CD_STATUS_INTERNAL, "gemm: operands cuBLASLt cannot take (a bug in the caller)");
  }
  BlasDevice& bd = blas_device(device);
  std::lock_guard<std::mutex> lock(bd.mutex);
  if (bd.last_stream != nullptr && bd.last_stream != stream) {
    check(cudaStreamWaitEvent(stream, bd.last_use, 0), "cudaStreamWaitEvent (cuBLASLt workspace)");
  }
  const int64_t a_item = itemsize(g.a.dtype), d_item = itemsize(g.d_dtype);
  // CHIPDOCK_CUDA_TILED_GEMM=1 runs every product on the fallback kernel (its tests use it).
  static const bool force_tiled = std::getenv("CHIPDOCK_CUDA_TILED_GEMM") != nullptr &&
                                  std::strcmp(std::getenv("CHIPDOCK_CUDA_TILED_GEMM"), "1") == 0;
  constexpr int64_t kMaxBatch = 65535;  // per call: keeps every kernel's batch grid dim in range
  for (int64_t b0 = 0; b0 < g.batch; b0 += kMaxBatch) {
    const int64_t n = g.batch - b0 < kMaxBatch ? g.batch - b0 : kMaxBatch;
    const char* a = static_cast<const char*>(g.a.data) + b0 * g.a.batch_stride * a_item;
    const char* b = static_cast<const char*>(g.b.data) + b0 * g.b.batch_stride * a_item;
    char* d = static_cast<char*>(g.d) + b0 * g.d_stride * d_item;
    if (force_tiled || !gemm_chunk(device, bd, stream, g, a, b, d, static_cast<int32_t>(n))) {
      fallback_chunk(stream, g, a, b, d, static_cast<int32_t>(n));
    }
  }
  check(cudaEventRecord(bd.last_use, stream), "cudaEventRecord (cuBLASLt workspace)");
  bd.last_stream = stream;
}

}  // namespace blas
}  // namespace chipdock_cuda
