// scaled_dot_product_attention: out = softmax(q @ k^T * scale + mask) @ v.
//
// q (..., L, E), k (..., S, E), v (..., S, Ev), mask (optional, broadcast to
// (..., L, S), additive), out (..., L, Ev) contiguous. Batch dims broadcast
// (NumPy rules) whether or not the caller expanded them. `causal` masks
// key j for query i when j > i (top-left aligned, like PyTorch's is_causal
// with L != S). A row whose scores are all -inf gives NaN (as the math does).
//
// float32 / float16 / bfloat16: both products through oneDNN in float32
// (16-bit inputs are converted), the softmax fused in between in float32
// (max-subtracted, vectorized exp), rows processed in blocks so the score
// matrix never exceeds a few MiB; with `causal` the keys past a block's
// last row are skipped. float64: the same in float64 with plain loops.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <limits>
#include <memory>
#include <utility>

#include "../error.h"
#include "../stream.h"
#include "kernels.h"
#include "linalg_common.h"
#include "isa.h"
#include "numeric.h"

namespace chipdock_cpu {
namespace linalg {
namespace {

// exp for x <= ~88 (softmax arguments are <= 0): Cephes-style range
// reduction and a degree-6 polynomial (~1 ulp); -inf and x < -87.3 give 0,
// NaN stays NaN. Branch-free so that loops over it vectorize.
__attribute__((always_inline)) inline float exp_f32(float x) {
  const float lo = -87.33654f, hi = 88.3762626647949f;
  float xc = x < lo ? lo : x;
  xc = xc > hi ? hi : xc;
  const float round_magic = 12582912.0f;  // 1.5 * 2^23: adds then subtracts to round
  const float n = (xc * 1.44269504088896341f + round_magic) - round_magic;
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t e = static_cast<int32_t>(n) + 127;
  const uint32_t bits = static_cast<uint32_t>(e) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  float y = p * scale;
  y = x < lo ? 0.0f : y;
  return x != x ? x : y;
}

// s[0:n] (raw q.k) -> probabilities in place: scale, add the mask row
// (stride ms; NULL for none), keep the first `valid` keys (causal), zero the rest.
CD_ALWAYS_INLINE void softmax_row_impl(float* __restrict s, int64_t n, int64_t valid, float scale,
                 const float* __restrict mask, int64_t ms) {
  float m = -std::numeric_limits<float>::infinity();
  if (mask != nullptr) {
    if (ms == 1) {
#pragma omp simd reduction(max : m)
      for (int64_t j = 0; j < valid; ++j) {
        const float x = s[j] * scale + mask[j];
        s[j] = x;
        m = x > m ? x : m;
      }
    } else {
      for (int64_t j = 0; j < valid; ++j) {
        const float x = s[j] * scale + mask[j * ms];
        s[j] = x;
        m = x > m ? x : m;
      }
    }
  } else {
#pragma omp simd reduction(max : m)
    for (int64_t j = 0; j < valid; ++j) {
      const float x = s[j] * scale;
      s[j] = x;
      m = x > m ? x : m;
    }
  }
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < valid; ++j) {
    const float e = exp_f32(s[j] - m);
    s[j] = e;
    sum += e;
  }
  const float inv = 1.0f / sum;
#pragma omp simd
  for (int64_t j = 0; j < valid; ++j) s[j] *= inv;
  for (int64_t j = valid; j < n; ++j) s[j] = 0.0f;
}
CD_ISA_BUILDS(void, softmax_row,
              (float* __restrict s, int64_t n, int64_t valid, float scale, const float* __restrict mask, int64_t ms),
              (s, n, valid, scale, mask, ms))

struct Operand {
  View view;                      // matrix dims last
  std::vector<int64_t> bstrides;  // aligned to the output batch
};

struct Problem {
  std::vector<int64_t> batch;
  int64_t B = 1, L = 0, S = 0, E = 0, Ev = 0;
  bool causal = false;
  double scale = 1.0;
  Operand q, k, v;
  bool has_mask = false;
  View mask;                       // aligned to (batch..., L, S): shape = that, broadcast strides
};

// Offset (elements) of batch `index` for batch strides `bs`.
int64_t batch_offset(const std::vector<int64_t>& batch, const std::vector<int64_t>& bs, int64_t index) {
  int64_t off = 0;
  for (size_t i = batch.size(); i-- > 0;) {
    off += (index % batch[i]) * bs[i];
    index /= batch[i];
  }
  return off;
}

bool plain(int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  if (rows > 1 && rs <= 0) return false;
  if (cols > 1 && cs <= 0) return false;
  return cs == 1 || rs == 1 || cols == 1 || rows == 1;
}

// ------------------------------------------------------------ float32 path --

void attention_f32(const Problem& pr, char* out, cd_dtype_t out_dtype) {
  // float32 operands with a unit stride in their matrix dims.
  Buffer qb, kb, vb, mb;
  auto prepare = [](const Operand& o, Buffer& buf) {
    Operand r = o;
    const View& v = o.view;
    if (v.dtype != CD_DTYPE_FLOAT32 || has_negative_stride(v) ||
        !plain(v.dim(-2), v.dim(-1), v.stride(-2), v.stride(-1))) {
      r.view = pack(v, CD_DTYPE_FLOAT32, buf);
      // Batch strides follow the packed layout (broadcast dims stay 0).
      const size_t lead = r.bstrides.size() - (v.ndim() - 2);
      for (size_t i = 0; i + 2 < v.ndim(); ++i) {
        if (r.bstrides[lead + i] != 0) r.bstrides[lead + i] = r.view.strides[i];
      }
    }
    return r;
  };
  const Operand q = prepare(pr.q, qb), k = prepare(pr.k, kb), v = prepare(pr.v, vb);
  View mask = pr.mask;
  if (pr.has_mask && mask.dtype != CD_DTYPE_FLOAT32) mask = pack(mask, CD_DTYPE_FLOAT32, mb);
  const int64_t L = pr.L, S = pr.S, E = pr.E, Ev = pr.Ev;
  // Rows per block: the block's scores stay within ~4 MiB.
  const int64_t lb = std::max<int64_t>(1, std::min<int64_t>(64, (1 << 20) / std::max<int64_t>(S, 1)));
  const int64_t blocks = (L + lb - 1) / lb;
  const int64_t tasks = pr.B * blocks;
  const size_t nb = pr.batch.size();
  std::vector<int64_t> mask_bs(mask.strides.begin(), mask.strides.begin() + (pr.has_mask ? nb : 0));
  const float scale = static_cast<float>(pr.scale);

  auto task = [&](int64_t t, bool nested) {
    const int64_t b = t / blocks, i0 = (t % blocks) * lb, rows = std::min(lb, L - i0);
    // With causal, keys past the block's last row are all masked.
    int64_t s_eff = S;
    if (pr.causal) s_eff = std::min<int64_t>(S, (i0 + rows + 63) / 64 * 64);
    const float* qp = reinterpret_cast<const float*>(q.view.data) +
                      batch_offset(pr.batch, q.bstrides, b) + i0 * q.view.stride(-2);
    const float* kp = reinterpret_cast<const float*>(k.view.data) + batch_offset(pr.batch, k.bstrides, b);
    const float* vp = reinterpret_cast<const float*>(v.view.data) + batch_offset(pr.batch, v.bstrides, b);
    Buffer scores(static_cast<size_t>(rows * s_eff) * sizeof(float));
    float* sc = scores.as<float>();
    // scores = q_blk @ k^T  (k^T element (e, j) = k[j, e])
    matmul_f32(rows, s_eff, E, qp, q.view.stride(-2), q.view.stride(-1), kp, k.view.stride(-1),
               k.view.stride(-2), sc, s_eff);
    const float* mp = nullptr;
    int64_t m_rs = 0, m_cs = 0;
    if (pr.has_mask) {
      m_rs = mask.stride(-2);
      m_cs = mask.stride(-1);
      mp = reinterpret_cast<const float*>(mask.data) + batch_offset(pr.batch, mask_bs, b) + i0 * m_rs;
    }
    auto soft = [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t valid = pr.causal ? std::min<int64_t>(s_eff, i0 + r + 1) : s_eff;
        softmax_row(sc + r * s_eff, s_eff, valid, scale, mp ? mp + r * m_rs : nullptr, m_cs);
      }
    };
    if (nested) {
      soft(0, rows);
    } else {
      parallel_for(rows, 1, soft);
    }
    // out_blk = P @ v
    if (out_dtype == CD_DTYPE_FLOAT32) {
      float* op = reinterpret_cast<float*>(out) + (b * L + i0) * Ev;
      matmul_f32(rows, Ev, s_eff, sc, s_eff, 1, vp, v.view.stride(-2), v.view.stride(-1), op, Ev);
    } else {
      Buffer ob(static_cast<size_t>(rows * Ev) * sizeof(float));
      matmul_f32(rows, Ev, s_eff, sc, s_eff, 1, vp, v.view.stride(-2), v.view.stride(-1),
                 ob.as<float>(), Ev);
      store_from_f32(ob.as<float>(), out_dtype,
                     out + static_cast<size_t>((b * L + i0) * Ev) * dtype_size(out_dtype), rows * Ev);
    }
  };

  if (tasks >= 2 * max_threads()) {
    std::exception_ptr error;
#pragma omp parallel for schedule(dynamic, 1) num_threads(kernel_threads())
    for (int64_t t = 0; t < tasks; ++t) {
      try {
        task(t, true);
      } catch (...) {
#pragma omp critical(chipdock_attention_error)
        if (!error) error = std::current_exception();
      }
    }
    if (error) std::rethrow_exception(error);
  } else {
    for (int64_t t = 0; t < tasks; ++t) task(t, false);
  }
}

// ------------------------------------------------------------ float64 path --

void attention_f64(const Problem& pr, double* out) {
  const int64_t L = pr.L, S = pr.S, E = pr.E, Ev = pr.Ev;
  const View &q = pr.q.view, &k = pr.k.view, &v = pr.v.view;
  const size_t nb = pr.batch.size();
  std::vector<int64_t> mask_bs(pr.mask.strides.begin(), pr.mask.strides.begin() + (pr.has_mask ? nb : 0));
  const int64_t q_rs = q.stride(-2), q_cs = q.stride(-1), k_rs = k.stride(-2), k_cs = k.stride(-1);
  const int64_t v_rs = v.stride(-2), v_cs = v.stride(-1);
  parallel_guarded(pr.B * L, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, S * (E + Ev))),
                   [&](int64_t begin, int64_t end) {
    std::vector<double> p(static_cast<size_t>(S)), acc(static_cast<size_t>(Ev));
    for (int64_t row = begin; row < end; ++row) {
      const int64_t b = row / L, i = row % L;
      const double* qp = reinterpret_cast<const double*>(q.data) + batch_offset(pr.batch, pr.q.bstrides, b) + i * q_rs;
      const double* kp = reinterpret_cast<const double*>(k.data) + batch_offset(pr.batch, pr.k.bstrides, b);
      const double* vp = reinterpret_cast<const double*>(v.data) + batch_offset(pr.batch, pr.v.bstrides, b);
      const double* mp = nullptr;
      if (pr.has_mask) {
        mp = reinterpret_cast<const double*>(pr.mask.data) + batch_offset(pr.batch, mask_bs, b) +
             i * pr.mask.stride(-2);
      }
      const int64_t valid = pr.causal ? std::min<int64_t>(S, i + 1) : S;
      double m = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < valid; ++j) {
        const double* kr = kp + j * k_rs;
        double dot = 0.0;
        for (int64_t e = 0; e < E; ++e) dot += qp[e * q_cs] * kr[e * k_cs];
        double x = dot * pr.scale;
        if (mp) x += mp[j * pr.mask.stride(-1)];
        p[static_cast<size_t>(j)] = x;
        m = x > m ? x : m;
      }
      double sum = 0.0;
      for (int64_t j = 0; j < valid; ++j) {
        const double e = std::exp(p[static_cast<size_t>(j)] - m);
        p[static_cast<size_t>(j)] = e;
        sum += e;
      }
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t j = 0; j < valid; ++j) {
        const double w = p[static_cast<size_t>(j)] / sum;
        const double* vr = vp + j * v_rs;
        for (int64_t e = 0; e < Ev; ++e) acc[static_cast<size_t>(e)] += w * vr[e * v_cs];
      }
      double* o = out + row * Ev;
      for (int64_t e = 0; e < Ev; ++e) o[e] = acc[static_cast<size_t>(e)];
    }
  });
}

// ---------------------------------------------------------------- driver --

void run_attention(const Problem& pr, const std::vector<HostTensor>& in, const HostTensor& out) {
  for (const HostTensor& t : in) t.range.check_live("input");
  out.range.check_live("output 0");
  if (pr.S == 0) {  // a softmax over no keys: 0/0
    dispatch_dtype(out.dtype, [&](auto tag) {
      using T = decltype(tag);
      if constexpr (is_floating_v<T>) {
        T* o = reinterpret_cast<T*>(out.origin);
        std::fill(o, o + out.numel, store<T>(std::numeric_limits<float>::quiet_NaN()));
      }
    });
    return;
  }
  if (out.dtype == CD_DTYPE_FLOAT64) {
    attention_f64(pr, reinterpret_cast<double*>(out.origin));
  } else {
    attention_f32(pr, out.origin, out.dtype);
  }
}

void enqueue_attention(const cd_kernel_context* ctx) {
  check_context(ctx, 3, 4);
  std::shared_ptr<Stream> stream = stream_from_handle(ctx->stream, ctx->device);
  std::vector<HostTensor> in;
  for (int32_t i = 0; i < ctx->num_inputs; ++i) in.push_back(input(ctx, i));
  HostTensor out = output(ctx);
  check_same_dtype(in, out);
  Problem pr;
  pr.causal = attr_int(ctx, "causal", 0) != 0;
  const char* names[3] = {"q", "k", "v"};
  for (int i = 0; i < 3; ++i) {
    if (in[i].shape.size() < 2) {
      fail(CD_STATUS_INVALID_ARGUMENT, "%s must have at least 2 dims, got %zu", names[i],
           in[i].shape.size());
    }
  }
  const View q = to_view(in[0]), k = to_view(in[1]), v = to_view(in[2]);
  pr.L = q.dim(-2);
  pr.E = q.dim(-1);
  pr.S = k.dim(-2);
  pr.Ev = v.dim(-1);
  if (k.dim(-1) != pr.E || v.dim(-2) != pr.S) {
    fail(CD_STATUS_INVALID_ARGUMENT, "k must be (..., S, %lld) and v (..., S, Ev) with k's S",
         static_cast<long long>(pr.E));
  }
  double scale = attr_float(ctx, "scale", 0.0);
  if (scale == 0.0) scale = pr.E > 0 ? 1.0 / std::sqrt(static_cast<double>(pr.E)) : 1.0;
  pr.scale = scale;
  auto batch_of = [](const View& x) { return std::vector<int64_t>(x.shape.begin(), x.shape.end() - 2); };
  pr.batch = broadcast_shapes(broadcast_shapes(batch_of(q), batch_of(k), "k"), batch_of(v), "v");
  std::vector<int64_t> expect = pr.batch;
  expect.push_back(pr.L);
  expect.push_back(pr.Ev);
  if (out.shape != expect) {
    fail(CD_STATUS_INVALID_ARGUMENT, "output has the wrong shape (%zu dims, %lld elements)",
         out.shape.size(), static_cast<long long>(out.numel));
  }
  pr.B = 1;
  for (int64_t d : pr.batch) pr.B *= d;
  pr.q = {q, align_batch(q, q.ndim() - 2, pr.batch, "q")};
  pr.k = {k, align_batch(k, k.ndim() - 2, pr.batch, "k")};
  pr.v = {v, align_batch(v, v.ndim() - 2, pr.batch, "v")};
  if (in.size() == 4) {
    const View m = to_view(in[3]);
    std::vector<int64_t> target = pr.batch;
    target.push_back(pr.L);
    target.push_back(pr.S);
    pr.has_mask = true;
    pr.mask.dtype = m.dtype;
    pr.mask.data = m.data;
    pr.mask.shape = target;
    pr.mask.strides = align_batch(m, m.ndim(), target, "mask");
  }
  if (out.numel == 0) return;
  stream->enqueue("scaled_dot_product_attention",
                  [pr = std::move(pr), in = std::move(in), out = std::move(out)] {
                    run_attention(pr, in, out);
                  });
}

cd_error* attention_kernel(const cd_kernel_context* ctx) noexcept {
  return guard("scaled_dot_product_attention", [ctx] { enqueue_attention(ctx); });
}

}  // namespace

void register_attention(cd_kernel_registry* registry) {
  for (cd_dtype_t t : kFloatTypes) {
    const cd_dtype_t sig[5] = {t, t, t, t, t};
    register_kernel(registry, "scaled_dot_product_attention", sig, 5, attention_kernel);
  }
}

}  // namespace linalg
}  // namespace chipdock_cpu
