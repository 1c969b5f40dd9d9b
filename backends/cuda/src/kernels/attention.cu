// scaled_dot_product_attention: out = softmax(q @ k^T * scale + mask) @ v.
//
// Semantics as the CPU reference (backends/cpu/src/kernels/attention.cpp):
// q (..., L, E), k (..., S, E), v (..., S, Ev), mask (optional, additive,
// broadcast to (..., L, S)); batch dims broadcast whether or not the
// caller expanded them; `causal` masks key j for query i when j > i
// (top-left aligned); a row whose scores are all -inf gives NaN; S == 0
// gives NaN (a softmax over nothing).
//
// Per block of query rows: scores = q @ k^T through a cuBLASLt batched
// GEMM (16-bit inputs on tensor cores, scores in float32; float64 in
// float64), then one thread block per row scales, masks, applies the causal
// limit and normalizes in float32 (float64), then P @ v through a second
// batched GEMM with P kept in float32 (v converted to float32 for the 16-bit
// dtypes: P rounded to 16 bits would cost more than the tolerance allows),
// the result rounded once. With `causal`, keys past a block's last row are
// skipped. Blocks are sized so the score matrix stays near 128 MiB.
#include <cmath>
#include <limits>
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

constexpr int kRowThreads = 256;
constexpr int64_t kScoreBudget = int64_t{128} << 20;  // bytes of scores per block

__device__ __forceinline__ float exp_(float x) { return expf(x); }
__device__ __forceinline__ double exp_(double x) { return exp(x); }

// Reduces v over the block (max when `is_max`, else sum); every thread gets the result.
template <class Acc> __device__ Acc block_reduce(Acc v, bool is_max, Acc* shared) {
  for (int o = 16; o > 0; o /= 2) {
    const Acc w = __shfl_xor_sync(0xffffffffu, v, o);
    v = is_max ? (w > v ? w : v) : v + w;
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  __syncthreads();  // `shared` may still be read by a previous reduction
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = shared[0];
  for (int i = 1; i < warps; ++i) v = is_max ? (shared[i] > v ? shared[i] : v) : v + shared[i];
  return v;
}

// Rows of raw scores q.k (row r: batch entry r / rows, query i0 + r % rows,
// `cols` keys) -> probabilities in place: times scale, plus the mask row,
// the first `valid` keys kept (causal), the rest 0.
template <class T, class Acc>
__global__ void softmax_rows(Acc* scores, int64_t rows, int64_t cols, int64_t i0, int causal, Acc scale,
                             const T* mask, int64_t m_bs, int64_t m_rs, int64_t m_cs) {
  __shared__ Acc shared[kRowThreads / 32];
  const int64_t r = blockIdx.x, b = r / rows, i = i0 + r % rows;
  const int64_t valid = causal && i + 1 < cols ? i + 1 : cols;
  Acc* row = scores + r * cols;
  const T* mrow = mask != nullptr ? mask + b * m_bs + i * m_rs : nullptr;
  Acc m = -static_cast<Acc>(INFINITY);
  for (int64_t j = threadIdx.x; j < valid; j += blockDim.x) {
    Acc x = row[j] * scale;
    if (mrow != nullptr) x += static_cast<Acc>(ew::load(mrow[j * m_cs]));
    row[j] = x;
    m = x > m ? x : m;
  }
  m = block_reduce(m, true, shared);
  Acc sum = 0;
  for (int64_t j = threadIdx.x; j < valid; j += blockDim.x) {
    const Acc e = exp_(row[j] - m);
    row[j] = e;
    sum += e;
  }
  sum = block_reduce(sum, false, shared);
  const Acc inv = Acc(1) / sum;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) row[j] = j < valid ? row[j] * inv : Acc(0);
}

struct Problem {
  Dims batch;                      // broadcast batch extents
  Dims sq, sk, sv, sm, so;         // strides over them (elements; 0 = broadcast)
  int64_t L = 0, S = 0, E = 0, Ev = 0;
  bool causal = false;
  double scale = 1.0;
  Mat q, kt, v;                    // q (L x E), k^T (E x S), v (S x Ev)
  const char* mask = nullptr;      // element (0, ..., 0) of the mask, or NULL
  int64_t m_rs = 0, m_cs = 0;
};

// Drops size-1 batch dims and merges neighbours every operand steps over uniformly.
void simplify(Problem& p) {
  Dims batch;
  Dims* all[5] = {&p.sq, &p.sk, &p.sv, &p.sm, &p.so};
  Dims merged[5];
  for (size_t i = 0; i < p.batch.size(); ++i) {
    const int64_t n = p.batch[i];
    if (n == 1) continue;
    bool merge = !batch.empty();
    for (int o = 0; o < 5 && merge; ++o) merge = merged[o].back() == (*all[o])[i] * n;
    if (merge) {
      batch.back() *= n;
      for (int o = 0; o < 5; ++o) merged[o].back() = (*all[o])[i];
      continue;
    }
    batch.push_back(n);
    for (int o = 0; o < 5; ++o) merged[o].push_back((*all[o])[i]);
  }
  p.batch = std::move(batch);
  for (int o = 0; o < 5; ++o) *all[o] = std::move(merged[o]);
}

// One block: batch entries [0, nb) from the given origins, query rows [i0, i0 + rows).
struct Block {
  const char *q, *k, *v, *mask;
  char* out;
  int64_t nb, i0, rows;
};

void run_block(int32_t device, cudaStream_t stream, const Problem& p, const Block& blk, cd_dtype_t dt,
               Scratch& scores, Scratch* tmp) {
  const cd_dtype_t acc = blas::compute_dtype(dt);
  const int64_t item = blas::itemsize(dt), acc_item = blas::itemsize(acc);
  const int64_t s_eff = p.causal && blk.i0 + blk.rows < p.S ? blk.i0 + blk.rows : p.S;
  const int64_t bq = p.sq.empty() ? 0 : p.sq.back(), bk = p.sk.empty() ? 0 : p.sk.back();
  const int64_t bv = p.sv.empty() ? 0 : p.sv.back(), bm = p.sm.empty() ? 0 : p.sm.back();
  const int64_t bo = p.so.empty() ? 0 : p.so.back();
  if (p.E == 0) {  // empty dot products
    check(cudaMemsetAsync(scores.data(), 0, static_cast<size_t>(blk.nb * blk.rows * s_eff * acc_item), stream),
          "cudaMemsetAsync");
  } else {
    blas::Gemm g;
    g.M = blk.rows;
    g.N = s_eff;
    g.K = p.E;
    g.batch = blk.nb;
    g.a = p.q;
    g.a.data = blk.q + blk.i0 * p.q.rs * item;
    g.a.rows = blk.rows;
    g.a.batch_stride = bq;
    g.b = p.kt;
    g.b.data = blk.k;
    g.b.cols = s_eff;
    g.b.batch_stride = bk;
    g.d = scores.data();
    g.d_dtype = acc;
    g.ldd = s_eff;
    g.d_stride = blk.rows * s_eff;
    blas::gemm(device, stream, g);
  }
  ew::dispatch<ew::kFloatMask>(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;
    softmax_rows<T, Acc><<<static_cast<unsigned>(blk.nb * blk.rows), kRowThreads, 0, stream>>>(
        reinterpret_cast<Acc*>(scores.data()), blk.rows, s_eff, blk.i0, p.causal ? 1 : 0,
        static_cast<Acc>(p.scale), reinterpret_cast<const T*>(blk.mask), bm, p.m_rs, p.m_cs);
  });
  check(cudaGetLastError(), "launching the attention softmax");
  blas::Gemm g;
  g.M = blk.rows;
  g.N = p.Ev;
  g.K = s_eff;
  g.batch = blk.nb;
  g.a = Mat{scores.data(), acc, blk.rows, s_eff, s_eff, 1, blk.rows * s_eff};
  g.b = p.v;
  g.b.data = blk.v;
  g.b.rows = s_eff;
  g.b.batch_stride = bv;
  g.d_dtype = acc;
  g.ldd = p.Ev;
  char* out = blk.out + blk.i0 * p.Ev * item;
  if (tmp == nullptr) {  // float32 / float64: straight into the output
    g.d = out;
    g.d_stride = bo;
    blas::gemm(device, stream, g);
    return;
  }
  g.d = tmp->data();
  g.d_stride = blk.rows * p.Ev;
  blas::gemm(device, stream, g);
  const Dims shape{blk.nb, blk.rows, p.Ev};
  blas::copy_convert(tmp->data(), acc, blas::contiguous_strides(shape), out, dt, {bo, p.Ev, 1}, shape, stream);
}

void run(int32_t device, cudaStream_t stream, Problem p, char* out, cd_dtype_t dt) {
  simplify(p);
  const cd_dtype_t acc = blas::compute_dtype(dt);
  std::unique_ptr<Scratch> qbuf, kbuf, vbuf;
  // cuBLASLt takes an operand with a unit stride in its matrix dims; others are copied.
  auto usable = [](Mat m, const Dims& bs) {
    m.batch_stride = bs.empty() ? 0 : bs.back();
    return blas::direct(m) && !blas::steps_backwards(bs);
  };
  if (!usable(p.q, p.sq)) qbuf = blas::pack(p.q, p.sq, p.batch, dt, stream);
  if (!usable(p.kt, p.sk)) kbuf = blas::pack(p.kt, p.sk, p.batch, dt, stream);
  if (acc != dt || !usable(p.v, p.sv)) vbuf = blas::pack(p.v, p.sv, p.batch, acc, stream);
  const int64_t inner = p.batch.empty() ? 1 : p.batch.back();
  const int64_t outer = blas::product(p.batch) / inner;
  const int64_t acc_item = blas::itemsize(acc), item = blas::itemsize(dt);
  const int64_t budget = kScoreBudget / acc_item;
  const int64_t lb = p.L < budget / p.S ? p.L : (budget / p.S > 1 ? budget / p.S : 1);
  const int64_t per = lb * p.S, nbc = inner < budget / per ? inner : (budget / per > 1 ? budget / per : 1);
  Scratch scores(static_cast<size_t>(nbc * per * acc_item), stream);
  std::unique_ptr<Scratch> tmp;
  if (acc != dt) tmp = std::make_unique<Scratch>(static_cast<size_t>(nbc * lb * p.Ev * acc_item), stream);
  const size_t nd = p.batch.size();
  for (int64_t idx = 0; idx < outer; ++idx) {  // batch dims that do not merge: one pass each
    int64_t oq = 0, ok = 0, ov = 0, om = 0, oo = 0, rest = idx;
    for (size_t i = nd - (nd == 0 ? 0 : 1); i-- > 0;) {
      const int64_t c = rest % p.batch[i];
      rest /= p.batch[i];
      oq += c * p.sq[i];
      ok += c * p.sk[i];
      ov += c * p.sv[i];
      om += c * p.sm[i];
      oo += c * p.so[i];
    }
    const int64_t bq = nd ? p.sq.back() : 0, bk = nd ? p.sk.back() : 0, bv = nd ? p.sv.back() : 0;
    const int64_t bm = nd ? p.sm.back() : 0, bo = nd ? p.so.back() : 0;
    const int64_t v_item = blas::itemsize(p.v.dtype);
    for (int64_t b0 = 0; b0 < inner; b0 += nbc) {
      for (int64_t i0 = 0; i0 < p.L; i0 += lb) {
        Block blk;
        blk.nb = inner - b0 < nbc ? inner - b0 : nbc;
        blk.i0 = i0;
        blk.rows = p.L - i0 < lb ? p.L - i0 : lb;
        blk.q = static_cast<const char*>(p.q.data) + (oq + b0 * bq) * item;
        blk.k = static_cast<const char*>(p.kt.data) + (ok + b0 * bk) * item;
        blk.v = static_cast<const char*>(p.v.data) + (ov + b0 * bv) * v_item;
        blk.mask = p.mask != nullptr ? p.mask + (om + b0 * bm) * item : nullptr;
        blk.out = out + (oo + b0 * bo) * item;
        run_block(device, stream, p, blk, dt, scores, tmp.get());
      }
    }
  }
}

void enqueue_attention(const cd_kernel_context* ctx) {
  cudaStream_t stream = blas::begin(ctx, 3, 4);
  const Tensor out = blas::output(ctx), q = blas::input(ctx, 0), k = blas::input(ctx, 1), v = blas::input(ctx, 2);
  const char* names[3] = {"q", "k", "v"};
  const Tensor* qkv[3] = {&q, &k, &v};
  for (int i = 0; i < 3; ++i) {
    if (qkv[i]->ndim() < 2) {
      fail(CD_STATUS_INVALID_ARGUMENT, "%s must have at least 2 dims, got %zu", names[i], qkv[i]->ndim());
    }
  }
  Problem p;
  p.causal = int_attribute(ctx, "causal", 0) != 0;
  p.L = q.dim(-2);
  p.E = q.dim(-1);
  p.S = k.dim(-2);
  p.Ev = v.dim(-1);
  if (k.dim(-1) != p.E || v.dim(-2) != p.S) {
    fail(CD_STATUS_INVALID_ARGUMENT, "k must be (..., S, %lld) and v (..., S, Ev) with k's S",
         static_cast<long long>(p.E));
  }
  p.scale = float_attribute(ctx, "scale", 0.0);
  if (p.scale == 0.0) p.scale = p.E > 0 ? 1.0 / std::sqrt(static_cast<double>(p.E)) : 1.0;
  auto batch_of = [](const Tensor& t) { return Dims(t.shape.begin(), t.shape.end() - 2); };
  p.batch = blas::broadcast_shapes(blas::broadcast_shapes(batch_of(q), batch_of(k), "q and k batch dims"),
                                   batch_of(v), "v batch dims");
  Dims expect = p.batch;
  expect.push_back(p.L);
  expect.push_back(p.Ev);
  if (out.shape != expect) {
    fail(CD_STATUS_INVALID_ARGUMENT, "output has the wrong shape (%zu dims, %lld elements)", out.ndim(),
         static_cast<long long>(out.numel()));
  }
  p.sq = blas::align_batch(q, q.ndim() - 2, p.batch, "q");
  p.sk = blas::align_batch(k, k.ndim() - 2, p.batch, "k");
  p.sv = blas::align_batch(v, v.ndim() - 2, p.batch, "v");
  p.so = Dims(out.strides.begin(), out.strides.end() - 2);
  for (size_t i = 0; i < p.so.size(); ++i) {
    if (p.batch[i] == 1) p.so[i] = 0;
  }
  p.sm.assign(p.batch.size(), 0);
  if (ctx->num_inputs == 4) {
    const Tensor m = blas::input(ctx, 3);
    Dims target = p.batch;
    target.push_back(p.L);
    target.push_back(p.S);
    const Dims ms = blas::align_batch(m, m.ndim(), target, "mask");
    p.sm.assign(ms.begin(), ms.end() - 2);
    p.m_rs = ms[ms.size() - 2];
    p.m_cs = ms[ms.size() - 1];
    p.mask = m.origin;
  }
  p.q = Mat{q.origin, q.dtype, p.L, p.E, q.stride(-2), q.stride(-1), 0};
  p.kt = Mat{k.origin, k.dtype, p.E, p.S, k.stride(-1), k.stride(-2), 0};
  p.v = Mat{v.origin, v.dtype, p.S, p.Ev, v.stride(-2), v.stride(-1), 0};
  if (out.numel() == 0) return;
  if (p.S == 0) {  // a softmax over no keys: 0 / 0
    blas::fill(out.origin, out.dtype, out.numel(), std::numeric_limits<double>::quiet_NaN(), stream);
    return;
  }
  run(ctx->device, stream, std::move(p), out.origin, out.dtype);
}

cd_error* attention_kernel(const cd_kernel_context* ctx) noexcept {
  return guard("scaled_dot_product_attention", [ctx] { enqueue_attention(ctx); });
}

}  // namespace

void register_attention(cd_kernel_registry* registry) {
  static const cd_dtype_t kTypes[4] = {CD_DTYPE_FLOAT32, CD_DTYPE_FLOAT16, CD_DTYPE_BFLOAT16, CD_DTYPE_FLOAT64};
  static cd_dtype_t sig[4][5];  // outlive registration, as copy.cu's tables
  for (int i = 0; i < 4; ++i) {
    for (cd_dtype_t& d : sig[i]) d = kTypes[i];
    register_kernel(registry, "scaled_dot_product_attention", sig[i], 5, attention_kernel);
  }
}

}  // namespace chipdock_cuda
