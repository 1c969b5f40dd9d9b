// matmul and gemm.
//
// matmul takes a and b as the caller has them: any strides (zero and
// negative included), batch dims NOT expanded (they are broadcast here,
// NumPy rules; already-expanded stride-0 views work as well), and 1-d
// operands as numpy.matmul promotes them (a: (K,) -> (1, K), b: (K,) ->
// (K, 1)). The output is C-contiguous with either numpy.matmul's shape
// (batch..., [M], [N], the promoted dims dropped) or the promoted shape
// (batch..., M, N); both have the same memory layout.
//
// gemm: a and b are 2-d (a is (K, M) when trans_a, b is (N, K) when
// trans_b), c is optional and broadcasts (NumPy rules) to (M, N), given
// expanded or not. out = alpha * op(a) @ op(b) + beta * c; with beta == 0
// (or no c) c is not read, as in BLAS.
//
// float32 and bfloat16 run through oneDNN (bf16 on AMX where available,
// accumulating in float32 and rounding once); float16, and bfloat16 where
// oneDNN has no bfloat16 matmul (below AVX-512: onednn::routes()), are
// computed in float32 and rounded once; float64 uses the blocked loop of
// linalg_f64.cpp. The oneDNN primitive is made when the kernel is called,
// so a problem oneDNN refuses fails the call, before anything is enqueued.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include "../error.h"
#include "../stream.h"
#include "blas.h"
#include "kernels.h"
#include "linalg_common.h"
#include "numeric.h"
#include "onednn.h"

namespace chipdock_cpu {
namespace linalg {
namespace {

// One matrix operand of a (batched) product.
struct Operand {
  const char* data = nullptr;
  std::vector<int64_t> bstrides;  // one per plan batch dim; 0 = broadcast
  int64_t rs = 0, cs = 0;         // row / column strides
};

// out[batch..., M, N] (contiguous) = alpha * a[batch..., M, K] @ b[batch..., K, N]
// (+ beta * out when `sum`).
struct Plan {
  cd_dtype_t dtype = CD_DTYPE_INVALID;  // of a, b
  std::vector<int64_t> batch;
  int64_t M = 0, N = 0, K = 0;
  Operand a, b;
};

int64_t product(const std::vector<int64_t>& v) {
  int64_t p = 1;
  for (int64_t x : v) p *= x;
  return p;
}

// The element offsets of a and b in batch `index` (row-major over p.batch).
void batch_offsets(const Plan& p, int64_t index, int64_t& ao, int64_t& bo) {
  ao = bo = 0;
  for (size_t i = p.batch.size(); i-- > 0;) {
    const int64_t k = index % p.batch[i];
    index /= p.batch[i];
    ao += k * p.a.bstrides[i];
    bo += k * p.b.bstrides[i];
  }
}

// Strides of a dim of size 1 do not matter; give them values that make the
// matrix look plain (row- or column-major) to oneDNN.
void normalize_unit_dims(int64_t rows, int64_t cols, int64_t& rs, int64_t& cs) {
  if (cols == 1) cs = (rs == 1 && rows > 1) ? rows : 1;
  if (rows == 1) rs = (cs == 1) ? cols : 1;
}

// oneDNN's fast matmuls want one unit stride in the matrix dims.
bool plain_matrix(int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  if (rs < 0 || cs < 0) return false;
  return (cs == 1 && rs >= cols) || (rs == 1 && cs >= rows);
}

// Drops batch dims of size 1, merges adjacent ones that step uniformly in
// both operands, then folds a's batch into M when b is not batched (a
// linear layer over a batch becomes one 2-d product).
void simplify(Plan& p) {
  std::vector<int64_t> batch, sa, sb;
  for (size_t i = 0; i < p.batch.size(); ++i) {
    const int64_t n = p.batch[i];
    if (n == 1) continue;
    if (!batch.empty() && sa.back() == p.a.bstrides[i] * n && sb.back() == p.b.bstrides[i] * n) {
      batch.back() *= n;
      sa.back() = p.a.bstrides[i];
      sb.back() = p.b.bstrides[i];
      continue;
    }
    batch.push_back(n);
    sa.push_back(p.a.bstrides[i]);
    sb.push_back(p.b.bstrides[i]);
  }
  normalize_unit_dims(p.M, p.K, p.a.rs, p.a.cs);
  normalize_unit_dims(p.K, p.N, p.b.rs, p.b.cs);
  while (!batch.empty() && sb.back() == 0 && sa.back() > 0 &&
         (p.M == 1 || sa.back() == p.M * p.a.rs)) {
    if (p.M == 1) p.a.rs = sa.back();
    p.M *= batch.back();
    batch.pop_back();
    sa.pop_back();
    sb.pop_back();
    normalize_unit_dims(p.M, p.K, p.a.rs, p.a.cs);
  }
  p.batch = std::move(batch);
  p.a.bstrides = std::move(sa);
  p.b.bstrides = std::move(sb);
}

// The view of operand `o` (rows x cols) with the plan's batch dims.
View operand_view(const Plan& p, const Operand& o, int64_t rows, int64_t cols, cd_dtype_t dtype) {
  View v;
  v.dtype = dtype;
  v.shape = p.batch;
  v.shape.push_back(rows);
  v.shape.push_back(cols);
  v.strides = o.bstrides;
  v.strides.push_back(o.rs);
  v.strides.push_back(o.cs);
  v.data = const_cast<char*>(o.data);
  return v;
}

void set_operand(Operand& o, const View& v) {
  o.data = v.data;
  o.bstrides.assign(v.strides.begin(), v.strides.end() - 2);
  o.rs = v.strides[v.ndim() - 2];
  o.cs = v.strides[v.ndim() - 1];
}

// The oneDNN descriptor of an operand: broadcast batch dims get size 1.
dnnl::memory::desc operand_desc(const Plan& p, const Operand& o, int64_t rows, int64_t cols,
                                cd_dtype_t dtype) {
  const size_t nb = p.batch.size();
  std::vector<int64_t> dims(nb + 2), strides(nb + 2);
  for (size_t i = 0; i < nb; ++i) {
    dims[i] = o.bstrides[i] == 0 ? 1 : p.batch[i];
    strides[i] = o.bstrides[i];
  }
  dims[nb] = rows;
  dims[nb + 1] = cols;
  strides[nb] = o.rs;
  strides[nb + 1] = o.cs;
  // Size-1 dims: any stride works; use the extent of the inner dims.
  for (size_t i = nb; i-- > 0;) {
    if (dims[i] != 1) continue;
    int64_t extent = 1;
    for (size_t j = i + 1; j < nb + 2; ++j) extent = std::max(extent, strides[j] * dims[j]);
    strides[i] = extent;
  }
  return onednn::strided_desc(dims, strides, dtype);
}

struct MatmulPrimitive {
  dnnl::matmul prim;
  dnnl::memory::desc a_md, b_md, c_md, scratch_md;
  bool reference = false;
};

// How an operand reaches oneDNN: as the caller has it, as a compact copy
// (broadcast dims kept), or as a dense copy (broadcast dims materialized).
enum class Copy { none, compact, dense };

// A product decided when the kernel is called: the copies to make, the
// dtype oneDNN computes in, and the primitive, so that a problem oneDNN
// refuses is reported by the call, before anything is enqueued.
struct MatmulJob {
  Plan source;            // the caller's operands (their dtype: source.dtype)
  Plan plan;              // the operands as oneDNN reads them (copies' layouts)
  cd_dtype_t compute = CD_DTYPE_FLOAT32;  // float32, or bfloat16 where native
  Copy copy_a = Copy::none, copy_b = Copy::none;
  std::shared_ptr<MatmulPrimitive> prim;  // NULL when OpenBLAS runs it
  bool blas = false;      // OpenBLAS (blas.h) runs it, batch by batch
  bool single = false;    // run on the calling thread alone (onednn::ThreadScope)
  float alpha = 1.0f, beta = 0.0f;
  bool sum = false;       // out = alpha * a @ b + beta * out
  int64_t ldc = 0;
};

// The layout a copy of `o` gives, put into the plan's operand.
void plan_copy(const Plan& p, Operand& o, int64_t rows, int64_t cols, cd_dtype_t to, Copy copy) {
  const View v = operand_view(p, o, rows, cols, p.dtype);
  set_operand(o, copy == Copy::dense ? dense_layout(v, to) : packed_layout(v, to));
}

// Chooses the copies. `dense_only`: both operands dense (the layouts
// oneDNN's fast kernels always take).
void choose_copies(MatmulJob& job, bool dense_only) {
  Plan& p = job.plan;
  p = job.source;
  const bool convert = job.compute != job.source.dtype;
  bool dense = dense_only || p.batch.size() + 2 > 12;  // DNNL_MAX_NDIMS
  for (size_t i = 0; i < p.batch.size(); ++i) {
    if (p.a.bstrides[i] == 0 && p.b.bstrides[i] == 0) dense = true;  // a pure repeat
  }
  auto negative = [](const Operand& o) {
    return std::any_of(o.bstrides.begin(), o.bstrides.end(), [](int64_t v) { return v < 0; });
  };
  // A stride-0 matrix dim stays 0 in a compact copy: those are made dense.
  auto pick = [&](const Operand& o, int64_t rows, int64_t cols) {
    if (dense) return Copy::dense;
    if (!convert && plain_matrix(rows, cols, o.rs, o.cs) && !negative(o)) return Copy::none;
    return (rows > 1 && o.rs == 0) || (cols > 1 && o.cs == 0) ? Copy::dense : Copy::compact;
  };
  job.copy_a = pick(p.a, p.M, p.K);
  job.copy_b = pick(p.b, p.K, p.N);
  if (job.copy_a != Copy::none) plan_copy(job.source, p.a, p.M, p.K, job.compute, job.copy_a);
  if (job.copy_b != Copy::none) plan_copy(job.source, p.b, p.K, p.N, job.compute, job.copy_b);
  p.dtype = job.compute;
  if (dense) {  // uniformly strided now: one batch dim
    p.batch = {product(p.batch)};
    p.a.bstrides = {p.M * p.K};
    p.b.bstrides = {p.K * p.N};
  }
}

// The oneDNN primitive for job.plan (cached by problem). `what` names the
// problem for an error.
std::shared_ptr<MatmulPrimitive> matmul_primitive(const MatmulJob& job, const std::string& what) {
  const Plan& p = job.plan;
  const cd_dtype_t dt = p.dtype;
  const size_t nb = p.batch.size();
  std::vector<int64_t> c_dims = p.batch, c_strides(nb + 2);
  c_dims.push_back(p.M);
  c_dims.push_back(p.N);
  c_strides[nb + 1] = 1;
  c_strides[nb] = job.ldc;
  int64_t s = p.M * job.ldc;
  for (size_t i = nb; i-- > 0;) {
    c_strides[i] = s;
    s *= c_dims[i];
  }
  onednn::Key key("matmul");
  key.add(static_cast<int64_t>(dt)).add(c_dims).add(p.K).add(job.ldc);
  for (const Operand* o : {&p.a, &p.b}) key.add(o->bstrides).add(o->rs).add(o->cs);
  key.add(static_cast<double>(job.alpha)).add(static_cast<int64_t>(job.sum)).add(static_cast<double>(job.beta));
  key.add(static_cast<int64_t>(job.single));
  return onednn::cached_as<MatmulPrimitive>(key, [&] {
    auto e = std::make_shared<MatmulPrimitive>();
    try {
      e->a_md = operand_desc(p, p.a, p.M, p.K, dt);
      e->b_md = operand_desc(p, p.b, p.K, p.N, dt);
      e->c_md = onednn::strided_desc(c_dims, c_strides, dt);
      dnnl::primitive_attr attr = onednn::user_scratchpad_attr();
      if (job.alpha != 1.0f) attr.set_output_scales(0, {job.alpha});
      if (job.sum) {
        dnnl::post_ops po;
        po.append_sum(job.beta);
        attr.set_post_ops(po);
      }
      dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(e->a_md, e->b_md, e->c_md), attr, onednn::engine());
      e->reference = onednn::is_reference(pd.impl_info_str());
      e->scratch_md = pd.scratchpad_desc();
      e->prim = dnnl::matmul(pd);
    } catch (const dnnl::error& err) {
      onednn::refuse(what, err);
    }
    return e;
  });
}

// True if OpenBLAS can take the planned float32 product: plain matrices
// (one unit stride each, as choose_copies leaves them), 32-bit sizes, and
// enough work per matrix.
bool blas_can_take(const Plan& p, int64_t ldc) {
  const double work = static_cast<double>(p.M) * static_cast<double>(p.N) * static_cast<double>(p.K);
  if (p.dtype != CD_DTYPE_FLOAT32 || work < blas::kMinWork) return false;
  if (!plain_matrix(p.M, p.K, p.a.rs, p.a.cs) || !plain_matrix(p.K, p.N, p.b.rs, p.b.cs)) return false;
  const int64_t limit = INT32_MAX;
  return p.M <= limit && p.N <= limit && p.K <= limit && ldc <= limit && std::max(p.a.rs, p.a.cs) <= limit &&
         std::max(p.b.rs, p.b.cs) <= limit;
}

MatmulJob prepare_matmul(const Plan& source, float alpha, bool sum, float beta, int64_t ldc,
                         const std::string& what, bool allow_blas);
void run_matmul(const MatmulJob& job, char* out);

// GFLOP/s of a 512^3 float32 product on one engine (blas::engine's timing).
double gemm_rate(bool openblas) {
  constexpr int64_t n = 512;
  Buffer a(n * n * sizeof(float)), b(n * n * sizeof(float)), c(n * n * sizeof(float));
  for (int64_t i = 0; i < n * n; ++i) {
    a.as<float>()[i] = static_cast<float>(i % 7) * 0.25f;
    b.as<float>()[i] = static_cast<float>(i % 5) * 0.5f;
  }
  Plan p;
  p.dtype = CD_DTYPE_FLOAT32;
  p.M = p.N = p.K = n;
  p.a.data = a.as<char>();
  p.b.data = b.as<char>();
  p.a.rs = p.b.rs = n;
  p.a.cs = p.b.cs = 1;
  MatmulJob job = prepare_matmul(p, 1.0f, false, 0.0f, n, "float32 a (512, 512) @ b (512, 512)", false);
  job.blas = openblas;
  double best = 1e30;
  for (int rep = 0; rep < 4; ++rep) {  // the first warms caches and JIT code up
    const auto start = std::chrono::steady_clock::now();
    run_matmul(job, c.as<char>());
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (rep > 0) best = std::min(best, t);
  }
  return 2.0 * static_cast<double>(n * n * n) / best * 1e-9;
}

// Decides a float32 / float16 / bfloat16 product (K > 0) into an output
// with row stride `ldc`: out = alpha * a @ b (+ beta * out when `sum`).
// Throws, naming `what`, if oneDNN has no primitive for it. `allow_blas`:
// a large float32 product may go to OpenBLAS where it is the faster engine.
MatmulJob prepare_matmul(const Plan& source, float alpha, bool sum, float beta, int64_t ldc,
                         const std::string& what, bool allow_blas) {
  MatmulJob job;
  job.source = source;
  job.compute = onednn::compute_dtype(source.dtype, onednn::routes().bf16_matmul);
  job.alpha = alpha;
  job.sum = sum;
  job.beta = beta;
  job.ldc = ldc;
  const double flops = 2.0 * static_cast<double>(product(source.batch)) * static_cast<double>(source.M) *
                       static_cast<double>(source.N) * static_cast<double>(source.K);
  job.single = onednn::small_work(flops);
  onednn::ThreadScope threads(job.single);
  choose_copies(job, false);
  if (allow_blas && blas_can_take(job.plan, ldc) &&
      blas::engine([] { return gemm_rate(false); }, [] { return gemm_rate(true); }) == blas::Engine::openblas) {
    job.blas = true;
    return job;
  }
  job.prim = matmul_primitive(job, what);
  if (job.prim->reference) {
    // Layouts the fast kernels do not take (e.g. a broadcast src batch):
    // dense copies always have one.
    choose_copies(job, true);
    job.prim = matmul_primitive(job, what);
  }
  return job;
}

// The product through OpenBLAS, batch by batch (plain matrices: blas_can_take).
void run_blas(const MatmulJob& job, const Plan& p, char* out) {
  const int64_t count = product(p.batch);
  const bool a_trans = p.a.cs != 1, b_trans = p.b.cs != 1;
  const int64_t lda = a_trans ? p.a.cs : p.a.rs, ldb = b_trans ? p.b.cs : p.b.rs;
  const float beta = job.sum ? job.beta : 0.0f;
  for (int64_t index = 0; index < count; ++index) {
    int64_t ao = 0, bo = 0;
    batch_offsets(p, index, ao, bo);
    blas::sgemm(a_trans, b_trans, p.M, p.N, p.K, job.alpha, reinterpret_cast<const float*>(p.a.data) + ao, lda,
                reinterpret_cast<const float*>(p.b.data) + bo, ldb, beta,
                reinterpret_cast<float*>(out) + index * p.M * job.ldc, job.ldc);
  }
}

// Runs a prepared product into `out` (oneDNN's dtype job.compute, row
// stride job.ldc; with job.sum it holds beta's addend already).
void run_matmul(const MatmulJob& job, char* out) {
  onednn::ThreadScope threads(job.single);
  Plan p = job.plan;
  Buffer abuf, bbuf;
  auto copy = [&](Operand& o, const Operand& from, int64_t rows, int64_t cols, Copy kind, Buffer& buf) {
    if (kind == Copy::none) return;
    const View v = operand_view(job.source, from, rows, cols, job.source.dtype);
    o.data = (kind == Copy::dense ? materialize(v, job.compute, buf) : pack(v, job.compute, buf)).data;
  };
  copy(p.a, job.source.a, p.M, p.K, job.copy_a, abuf);
  copy(p.b, job.source.b, p.K, p.N, job.copy_b, bbuf);
  if (job.blas) {
    run_blas(job, p, out);
    return;
  }
  const MatmulPrimitive& e = *job.prim;
  onednn::execute(e.prim,
                  {{DNNL_ARG_SRC, onednn::wrap(e.a_md, p.a.data)},
                   {DNNL_ARG_WEIGHTS, onednn::wrap(e.b_md, p.b.data)},
                   {DNNL_ARG_DST, onednn::wrap(e.c_md, out)}},
                  e.scratch_md);
}

// The float64 product, batch by batch: out = alpha * a @ b + beta * out.
void f64_matmul(const Plan& p, double* out, double alpha, double beta) {
  const int64_t count = product(p.batch);
  const int64_t per = p.M * p.N;
  auto one = [&](int64_t index, bool parallel) {
    int64_t ao = 0, bo = 0;
    batch_offsets(p, index, ao, bo);
    gemm_f64(p.M, p.N, p.K, alpha, reinterpret_cast<const double*>(p.a.data) + ao, p.a.rs, p.a.cs,
             reinterpret_cast<const double*>(p.b.data) + bo, p.b.rs, p.b.cs, beta,
             out + index * per, p.N, parallel);
  };
  const double work = static_cast<double>(p.M) * static_cast<double>(p.N) * static_cast<double>(p.K);
  if (count >= 2 && work < 1e7) {
    parallel_guarded(count, std::max<int64_t>(1, static_cast<int64_t>(2e5 / (work + 1))),
                 [&](int64_t b, int64_t e) {
                   for (int64_t i = b; i < e; ++i) one(i, false);
                 });
  } else {
    for (int64_t i = 0; i < count; ++i) one(i, true);
  }
}

// Decides, when the kernel is called, how a planned product runs: a
// float32 / float16 / bfloat16 product with K > 0 through oneDNN (the job),
// others (float64, empty sums, empty outputs) by loops (NULL).
std::shared_ptr<const MatmulJob> plan_job(const Plan& p, int64_t out_numel, double alpha, bool use_c,
                                          double beta, const std::string& what) {
  if (p.K == 0 || out_numel == 0 || p.dtype == CD_DTYPE_FLOAT64) return nullptr;
  return std::make_shared<const MatmulJob>(
      prepare_matmul(p, static_cast<float>(alpha), use_c, static_cast<float>(beta), p.N, what, true));
}

// Runs a planned product in any float dtype into the contiguous output
// `out` (dtype p.dtype). With `c` (a view broadcast to the output shape),
// out = alpha * a @ b + beta * c; beta == 0 ignores c. `job`: plan_job's.
void run_plan(const Plan& p, const MatmulJob* job, char* out, double alpha, const View* c, double beta) {
  const int64_t out_numel = product(p.batch) * p.M * p.N;
  const bool use_c = c != nullptr && beta != 0.0;
  const cd_dtype_t dt = p.dtype;
  if (job == nullptr && p.K == 0) {  // an empty sum: beta * c or zeros
    Buffer tmp(static_cast<size_t>(out_numel) * sizeof(double));
    double* t = tmp.as<double>();
    if (use_c) {
      copy_convert(*c, CD_DTYPE_FLOAT64, t);
      for (int64_t i = 0; i < out_numel; ++i) t[i] *= beta;
    } else {
      std::fill(t, t + out_numel, 0.0);
    }
    View tv;
    tv.dtype = CD_DTYPE_FLOAT64;
    tv.shape = {out_numel};
    tv.strides = {1};
    tv.data = reinterpret_cast<char*>(t);
    copy_convert(tv, dt, out);
    return;
  }
  if (job == nullptr) {
    if (dt != CD_DTYPE_FLOAT64) fail(CD_STATUS_INTERNAL, "a %s product was not prepared", dtype_name(dt));
    if (use_c) copy_convert(*c, dt, out);
    f64_matmul(p, reinterpret_cast<double*>(out), alpha, use_c ? beta : 0.0);
    return;
  }
  if (job->compute == dt) {
    if (use_c) copy_convert(*c, dt, out);
    run_matmul(*job, out);
    return;
  }
  // Computed in float32, rounded once.
  Buffer obuf(static_cast<size_t>(out_numel) * sizeof(float));
  if (use_c) copy_convert(*c, CD_DTYPE_FLOAT32, obuf.data());
  run_matmul(*job, static_cast<char*>(obuf.data()));
  store_from_f32(obuf.as<float>(), dt, out, out_numel);
}

// Runs on the stream's worker.
void run_checked(const std::vector<HostTensor>& keep, const HostTensor& out, const Plan& plan,
                 const MatmulJob* job, double alpha, const View* c, double beta) {
  for (const HostTensor& t : keep) t.range.check_live("input");
  out.range.check_live("output 0");
  run_plan(plan, job, out.origin, alpha, c, beta);
}

}  // namespace

void matmul_f32(int64_t M, int64_t N, int64_t K, const float* A, int64_t a_rs, int64_t a_cs,
                const float* B, int64_t b_rs, int64_t b_cs, float* C, int64_t ldc) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {
    for (int64_t i = 0; i < M; ++i) std::fill(C + i * ldc, C + i * ldc + N, 0.0f);
    return;
  }
  Plan p;
  p.dtype = CD_DTYPE_FLOAT32;
  p.M = M;
  p.N = N;
  p.K = K;
  p.a.data = reinterpret_cast<const char*>(A);
  p.a.rs = a_rs;
  p.a.cs = a_cs;
  p.b.data = reinterpret_cast<const char*>(B);
  p.b.rs = b_rs;
  p.b.cs = b_cs;
  normalize_unit_dims(p.M, p.K, p.a.rs, p.a.cs);
  normalize_unit_dims(p.K, p.N, p.b.rs, p.b.cs);
  const std::string what = format("float32 a (%lld, %lld) @ b (%lld, %lld)", static_cast<long long>(M),
                                  static_cast<long long>(K), static_cast<long long>(K), static_cast<long long>(N));
  run_matmul(prepare_matmul(p, 1.0f, false, 0.0f, ldc, what, true), reinterpret_cast<char*>(C));
}

namespace {

// ------------------------------------------------------------------ matmul --

void enqueue_matmul(const cd_kernel_context* ctx) {
  check_context(ctx, 2, 2);
  std::shared_ptr<Stream> stream = stream_from_handle(ctx->stream, ctx->device);
  std::vector<HostTensor> in{input(ctx, 0), input(ctx, 1)};
  HostTensor out = output(ctx);
  check_same_dtype(in, out);
  const View a = to_view(in[0]), b = to_view(in[1]);
  if (a.ndim() == 0 || b.ndim() == 0) {
    fail(CD_STATUS_INVALID_ARGUMENT, "matmul does not take 0-d operands");
  }
  const bool a_vec = a.ndim() == 1, b_vec = b.ndim() == 1;
  Plan p;
  p.dtype = out.dtype;
  p.M = a_vec ? 1 : a.dim(-2);
  p.K = a.dim(-1);
  p.N = b_vec ? 1 : b.dim(-1);
  const int64_t k2 = b_vec ? b.dim(0) : b.dim(-2);
  if (k2 != p.K) {
    fail(CD_STATUS_INVALID_ARGUMENT, "inner dimensions differ: a has %lld columns, b %lld rows",
         static_cast<long long>(p.K), static_cast<long long>(k2));
  }
  const size_t a_batch = a_vec ? 0 : a.ndim() - 2, b_batch = b_vec ? 0 : b.ndim() - 2;
  p.batch = broadcast_shapes(std::vector<int64_t>(a.shape.begin(), a.shape.begin() + a_batch),
                             std::vector<int64_t>(b.shape.begin(), b.shape.begin() + b_batch),
                             "matmul batch dims");
  std::vector<int64_t> full = p.batch, numpy = p.batch;
  full.push_back(p.M);
  full.push_back(p.N);
  if (!a_vec) numpy.push_back(p.M);
  if (!b_vec) numpy.push_back(p.N);
  if (out.shape != full && out.shape != numpy) {
    fail(CD_STATUS_INVALID_ARGUMENT, "output has %zu dims and %lld elements; expected the shape "
         "of numpy.matmul (%zu dims)", out.shape.size(), static_cast<long long>(out.numel),
         numpy.size());
  }
  p.a.data = a.data;
  p.a.bstrides = align_batch(a, a_batch, p.batch, "a");
  p.a.rs = a_vec ? 0 : a.stride(-2);
  p.a.cs = a.stride(-1);
  p.b.data = b.data;
  p.b.bstrides = align_batch(b, b_batch, p.batch, "b");
  p.b.rs = b_vec ? b.stride(0) : b.stride(-2);
  p.b.cs = b_vec ? 0 : b.stride(-1);
  if (out.numel == 0) return;
  simplify(p);
  const std::string what = format("%s a %s @ b %s", dtype_name(out.dtype), onednn::shape_text(a.shape).c_str(),
                                  onednn::shape_text(b.shape).c_str());
  std::shared_ptr<const MatmulJob> job = plan_job(p, out.numel, 1.0, false, 0.0, what);
  stream->enqueue("matmul", [in = std::move(in), out = std::move(out), p = std::move(p), job] {
    run_checked(in, out, p, job.get(), 1.0, nullptr, 0.0);
  });
}

cd_error* matmul_kernel(const cd_kernel_context* ctx) noexcept {
  return guard("matmul", [ctx] { enqueue_matmul(ctx); });
}

// -------------------------------------------------------------------- gemm --

void enqueue_gemm(const cd_kernel_context* ctx) {
  check_context(ctx, 2, 3);
  std::shared_ptr<Stream> stream = stream_from_handle(ctx->stream, ctx->device);
  std::vector<HostTensor> in;
  for (int32_t i = 0; i < ctx->num_inputs; ++i) in.push_back(input(ctx, i));
  HostTensor out = output(ctx);
  check_same_dtype(in, out);
  const double alpha = attr_float(ctx, "alpha", 1.0), beta = attr_float(ctx, "beta", 1.0);
  const bool ta = attr_int(ctx, "trans_a", 0) != 0, tb = attr_int(ctx, "trans_b", 0) != 0;
  require_ndim(in[0], 2, "a");
  require_ndim(in[1], 2, "b");
  require_ndim(out, 2, "the output");
  const View a = to_view(in[0]), b = to_view(in[1]);
  Plan p;
  p.dtype = out.dtype;
  p.M = a.shape[ta ? 1 : 0];
  p.K = a.shape[ta ? 0 : 1];
  p.N = b.shape[tb ? 0 : 1];
  const int64_t k2 = b.shape[tb ? 1 : 0];
  if (k2 != p.K) {
    fail(CD_STATUS_INVALID_ARGUMENT, "inner dimensions differ (%lld vs %lld)",
         static_cast<long long>(p.K), static_cast<long long>(k2));
  }
  if (out.shape[0] != p.M || out.shape[1] != p.N) {
    fail(CD_STATUS_INVALID_ARGUMENT, "output is %lldx%lld, expected %lldx%lld",
         static_cast<long long>(out.shape[0]), static_cast<long long>(out.shape[1]),
         static_cast<long long>(p.M), static_cast<long long>(p.N));
  }
  p.a.data = a.data;
  p.a.rs = a.strides[ta ? 1 : 0];
  p.a.cs = a.strides[ta ? 0 : 1];
  p.b.data = b.data;
  p.b.rs = b.strides[tb ? 1 : 0];
  p.b.cs = b.strides[tb ? 0 : 1];
  std::shared_ptr<View> c;
  if (in.size() == 3) {
    const View cv = to_view(in[2]);
    if (cv.ndim() > 2) fail(CD_STATUS_INVALID_ARGUMENT, "c has %zu dims; at most 2", cv.ndim());
    c = std::make_shared<View>();
    c->dtype = cv.dtype;
    c->data = cv.data;
    c->shape = out.shape;
    c->strides = align_batch(cv, cv.ndim(), out.shape, "c");
  }
  if (out.numel == 0) return;
  simplify(p);
  const std::string what = format("%s a %s%s, b %s%s", dtype_name(out.dtype), onednn::shape_text(a.shape).c_str(),
                                  ta ? " (transposed)" : "", onednn::shape_text(b.shape).c_str(),
                                  tb ? " (transposed)" : "");
  std::shared_ptr<const MatmulJob> job = plan_job(p, out.numel, alpha, c != nullptr && beta != 0.0, beta, what);
  stream->enqueue("gemm", [in = std::move(in), out = std::move(out), p = std::move(p), c, alpha, beta, job] {
    run_checked(in, out, p, job.get(), alpha, c.get(), beta);
  });
}

cd_error* gemm_kernel(const cd_kernel_context* ctx) noexcept {
  return guard("gemm", [ctx] { enqueue_gemm(ctx); });
}

}  // namespace
}  // namespace linalg

void register_linalg(cd_kernel_registry* registry) {
  for (cd_dtype_t t : linalg::kFloatTypes) {
    const cd_dtype_t mm[3] = {t, t, t};
    register_kernel(registry, "matmul", mm, 3, linalg::matmul_kernel);
    const cd_dtype_t gm[4] = {t, t, t, t};
    register_kernel(registry, "gemm", gm, 4, linalg::gemm_kernel);
  }
  linalg::register_conv(registry);
  linalg::register_pool(registry);
  linalg::register_attention(registry);
}

}  // namespace chipdock_cpu
