// The double's aclnnMatmul and aclnnAddmm (hicann ops-nn matmul docs):
// torch.matmul semantics (1-d to 6-d operands, batch dims broadcast, a 1-d
// operand promoted and its dim dropped from the result) and
// out = beta * self + alpha * (mat1 @ mat2) with self broadcast to the
// result and not read when beta is 0. dtypes (Atlas A2): FLOAT, FLOAT16,
// BFLOAT16; BFLOAT16 does not mix with FLOAT16 or FLOAT; the result may be
// any of the three (the inferred dtype is cast to out's). cubeMathType as
// the doc: USE_FP16 refuses BFLOAT16, USE_HF32 anything but FLOAT.
// Products are summed in double in the workspace the op asks for (one
// double per output element), then rounded once into out.
#include <algorithm>

#include "nn_sim.h"

namespace cdsim {
namespace {

using nn::invalid;

void check_matmul_dtypes(const char* op, const TensorInfo& a, const TensorInfo& b, const TensorInfo& out,
                         int8_t cube) {
  nn::require_a2_float(op, a, "self");
  nn::require_a2_float(op, b, "mat2");
  nn::require_a2_float(op, out, "out");
  if ((a.dtype == ACL_BF16) != (b.dtype == ACL_BF16)) {
    invalid(op, "self (%s) and mat2 (%s): BFLOAT16 does not promote with FLOAT16 or FLOAT", dtype_name(a.dtype),
            dtype_name(b.dtype));
  }
  if (cube < 0 || cube > 3) invalid(op, "cubeMathType %d is not 0..3", cube);
  if (cube == 2 && a.dtype == ACL_BF16) invalid(op, "cubeMathType USE_FP16 does not take BFLOAT16");
  if (cube == 3 && (a.dtype != ACL_FLOAT || b.dtype != ACL_FLOAT)) {
    invalid(op, "cubeMathType USE_HF32 takes FLOAT inputs only");
  }
}

// a (batch_a..., M, K) @ b (batch_b..., K, N) into acc (batch..., M, N), row-major.
void batched_product(const std::vector<double>& a, const std::vector<int64_t>& a_shape, const std::vector<double>& b,
                     const std::vector<int64_t>& b_shape, const std::vector<int64_t>& batch, double* acc) {
  const int64_t M = a_shape[a_shape.size() - 2], K = a_shape.back(), N = b_shape.back();
  const std::vector<int64_t> a_batch(a_shape.begin(), a_shape.end() - 2), b_batch(b_shape.begin(), b_shape.end() - 2);
  const std::vector<int64_t> sa = nn::broadcast_strides(a_batch, batch), sb = nn::broadcast_strides(b_batch, batch);
  int64_t slot = 0;
  for (Index it(batch); it.valid(); it.next(), ++slot) {
    int64_t ao = 0, bo = 0;
    for (size_t d = 0; d < batch.size(); ++d) {
      ao += it.index()[d] * sa[d];
      bo += it.index()[d] * sb[d];
    }
    const double* pa = a.data() + ao * M * K;
    const double* pb = b.data() + bo * K * N;
    double* pc = acc + slot * M * N;
    std::fill(pc, pc + M * N, 0.0);
    for (int64_t i = 0; i < M; ++i) {
      for (int64_t k = 0; k < K; ++k) {
        const double x = pa[i * K + k];
        const double* row = pb + k * N;
        double* dst = pc + i * N;
        for (int64_t j = 0; j < N; ++j) dst[j] += x * row[j];
      }
    }
  }
}

aclnnStatus plan_matmul(const aclTensor* self, const aclTensor* mat2, aclTensor* out, int8_t cube,
                        uint64_t* workspace_size, aclOpExecutor** executor) {
  const char* op = "aclnnMatmul";
  const TensorInfo a = info(self, "self"), b = info(mat2, "mat2"), o = info(out, "out");
  check_matmul_dtypes(op, a, b, o, cube);
  nn::require_ndim(op, a, 1, 6, "self");
  nn::require_ndim(op, b, 1, 6, "mat2");
  std::vector<int64_t> as = a.shape, bs = b.shape;
  const bool a_vec = as.size() == 1, b_vec = bs.size() == 1;
  if (a_vec) as.insert(as.begin(), 1);
  if (b_vec) bs.push_back(1);
  if (as.back() != bs[bs.size() - 2]) {
    invalid(op, "self %s and mat2 %s: inner dimensions differ", nn::shape_string(a.shape).c_str(),
            nn::shape_string(b.shape).c_str());
  }
  std::vector<int64_t> batch;
  if (!nn::broadcast_shapes(std::vector<int64_t>(as.begin(), as.end() - 2),
                            std::vector<int64_t>(bs.begin(), bs.end() - 2), &batch)) {
    invalid(op, "the batch dims of self %s and mat2 %s do not broadcast", nn::shape_string(a.shape).c_str(),
            nn::shape_string(b.shape).c_str());
  }
  std::vector<int64_t> expected = batch;
  if (!a_vec) expected.push_back(as[as.size() - 2]);
  if (!b_vec) expected.push_back(bs.back());
  nn::require_shape(op, o, expected, "out");
  const int64_t count = o.numel();
  Plan p{op, static_cast<uint64_t>(count) * sizeof(double), [a, b, o, as, bs, batch, count](char* workspace) {
           if (count == 0) return;
           const HostTensor ta(a), tb(b), tout(o);
           double* acc = reinterpret_cast<double*>(workspace);
           batched_product(nn::load(ta), as, nn::load(tb), bs, batch, acc);
           nn::store(tout, std::vector<double>(acc, acc + count));
         }};
  return plan(std::move(p), workspace_size, executor);
}

aclnnStatus plan_addmm(const aclTensor* self, const aclTensor* mat1, const aclTensor* mat2, const aclScalar* beta,
                       const aclScalar* alpha, aclTensor* out, int8_t cube, uint64_t* workspace_size,
                       aclOpExecutor** executor) {
  const char* op = "aclnnAddmm";
  const TensorInfo c = info(self, "self"), a = info(mat1, "mat1"), b = info(mat2, "mat2"), o = info(out, "out");
  check_matmul_dtypes(op, a, b, o, cube);
  nn::require_a2_float(op, c, "self");
  nn::require_ndim(op, a, 2, 2, "mat1");
  nn::require_ndim(op, b, 2, 2, "mat2");
  if (a.shape[1] != b.shape[0]) {
    invalid(op, "mat1 %s and mat2 %s: inner dimensions differ", nn::shape_string(a.shape).c_str(),
            nn::shape_string(b.shape).c_str());
  }
  const std::vector<int64_t> mn{a.shape[0], b.shape[1]};
  nn::require_shape(op, o, mn, "out");
  std::vector<int64_t> joined;
  if (c.shape.size() > 2 || !nn::broadcast_shapes(c.shape, mn, &joined) || joined != mn) {
    invalid(op, "self %s does not broadcast to %s", nn::shape_string(c.shape).c_str(), nn::shape_string(mn).c_str());
  }
  const double vb = scalar_double(beta, "beta"), va = scalar_double(alpha, "alpha");
  const int64_t count = o.numel();
  Plan p{op, static_cast<uint64_t>(count) * sizeof(double), [c, a, b, o, mn, vb, va, count](char* workspace) {
           if (count == 0) return;
           const HostTensor tc(c), ta(a), tb(b), tout(o);
           double* acc = reinterpret_cast<double*>(workspace);
           batched_product(nn::load(ta), a.shape, nn::load(tb), b.shape, {}, acc);
           std::vector<double> result(acc, acc + count);
           for (double& r : result) r *= va;
           if (vb != 0.0) {  // beta 0: self is not read (its NaNs stay out), as torch.addmm
             const std::vector<double> cv = nn::load(tc);
             const std::vector<int64_t> cs = nn::broadcast_strides(c.shape, mn);
             for (int64_t i = 0; i < mn[0]; ++i) {
               for (int64_t j = 0; j < mn[1]; ++j) result[i * mn[1] + j] += vb * cv[i * cs[0] + j * cs[1]];
             }
           }
           nn::store(tout, result);
         }};
  return plan(std::move(p), workspace_size, executor);
}

}  // namespace
}  // namespace cdsim

extern "C" aclnnStatus aclnnMatmulGetWorkspaceSize(const aclTensor* self, const aclTensor* mat2, aclTensor* out,
                                                   int8_t cubeMathType, uint64_t* workspaceSize,
                                                   aclOpExecutor** executor) {
  return cdsim::guarded_op([&] { return cdsim::plan_matmul(self, mat2, out, cubeMathType, workspaceSize, executor); });
}
CDSIM_ACLNN_RUN(Matmul)

extern "C" aclnnStatus aclnnAddmmGetWorkspaceSize(const aclTensor* self, const aclTensor* mat1, const aclTensor* mat2,
                                                  const aclScalar* beta, const aclScalar* alpha, aclTensor* out,
                                                  int8_t cubeMathType, uint64_t* workspaceSize,
                                                  aclOpExecutor** executor) {
  return cdsim::guarded_op([&] {
    return cdsim::plan_addmm(self, mat1, mat2, beta, alpha, out, cubeMathType, workspaceSize, executor);
  });
}
CDSIM_ACLNN_RUN(Addmm)
