// The double's normalizations (hicann ops-nn norm docs), in double, each
// output rounded once; variances are the biased ones (divided by n), as
// PyTorch's and CANN's implementations compute them. FLOAT, FLOAT16,
// BFLOAT16 (A2).
//   aclnnBatchNorm: training = false only (inference: runningMean/runningVar
//     are read, not updated; the double refuses training = true, which
//     chipdock never asks for); channel axis 1; saveMean/saveInvstd, when
//     given, receive the running mean and 1/sqrt(var + eps).
//   aclnnLayerNorm: over the trailing normalizedShape; weight and bias
//     optional; meanOut/rstdOut optional (leading dims, then 1s).
//   aclnnRmsNorm: x * rstd * gamma, rstd = 1/sqrt(mean(x^2) + eps) over
//     gamma's (trailing) dims; rstdOut FLOAT of shape (leading..., 1, ...).
//   aclnnGroupNorm: self (N, C, ...) with N*C*HxW elements, `group` groups
//     of C/group channels; meanOut/rstdOut (N, group) of self's dtype.
#include <cmath>

#include "nn_sim.h"

namespace cdsim {
namespace {

using nn::invalid;

bool present(const aclTensor* t) { return t != nullptr; }

// Trailing-dims check shared by layer and rms norm; returns (rows, row length).
std::pair<int64_t, int64_t> rows_of(const char* op, const TensorInfo& x, const std::vector<int64_t>& trailing,
                                    const char* what) {
  const size_t k = trailing.size();
  bool ok = k >= 1 && k <= x.shape.size();
  for (size_t d = 0; ok && d < k; ++d) ok = x.shape[x.shape.size() - k + d] == trailing[d];
  if (!ok) {
    invalid(op, "%s %s must be the trailing dims of the input %s", what, nn::shape_string(trailing).c_str(),
            nn::shape_string(x.shape).c_str());
  }
  const int64_t inner = nn::product(trailing);
  return {inner == 0 ? 0 : x.numel() / inner, inner};
}

std::vector<int64_t> stat_shape(const TensorInfo& x, size_t trailing) {
  std::vector<int64_t> s(x.shape.begin(), x.shape.end() - static_cast<std::ptrdiff_t>(trailing));
  s.resize(x.shape.size(), 1);
  return s;
}

aclnnStatus plan_batch_norm(const aclTensor* input, const aclTensor* weight, const aclTensor* bias, aclTensor* mean,
                            aclTensor* var, bool training, double eps, aclTensor* output, aclTensor* save_mean,
                            aclTensor* save_invstd, uint64_t* workspace_size, aclOpExecutor** executor) {
  const char* op = "aclnnBatchNorm";
  const TensorInfo x = info(input, "input"), o = info(output, "output");
  nn::require_ndim(op, x, 2, 8, "input");
  nn::require_a2_float(op, x, "input");
  nn::require_same_dtype(op, x, "input", o, "output");
  nn::require_shape(op, o, x.shape, "output");
  if (training) invalid(op, "the simulated runtime implements training = false (inference) only");
  if (!present(mean) || !present(var)) invalid(op, "runningMean and runningVar are required when training = false");
  const int64_t C = x.shape[1];
  const std::vector<int64_t> channels{C};
  const TensorInfo m = info(mean, "runningMean"), v = info(var, "runningVar");
  TensorInfo w, b, sm, si;
  const bool has_w = present(weight), has_b = present(bias), has_sm = present(save_mean), has_si = present(save_invstd);
  for (const auto& [t, what] : {std::pair<const TensorInfo*, const char*>{&m, "runningMean"}, {&v, "runningVar"}}) {
    nn::require_a2_float(op, *t, what);
    nn::require_shape(op, *t, channels, what);
  }
  if (has_w) {
    w = info(weight, "weight");
    nn::require_same_dtype(op, w, "weight", x, "input");
    nn::require_shape(op, w, channels, "weight");
  }
  if (has_b) {
    b = info(bias, "bias");
    nn::require_same_dtype(op, b, "bias", x, "input");
    nn::require_shape(op, b, channels, "bias");
  }
  if (has_sm) nn::require_shape(op, sm = info(save_mean, "saveMean"), channels, "saveMean");
  if (has_si) nn::require_shape(op, si = info(save_invstd, "saveInvstd"), channels, "saveInvstd");
  if (eps < 0) invalid(op, "eps %g is negative", eps);
  Plan p{op, 0, [=](char*) {
           const std::vector<double> mv = nn::load(HostTensor(m)), vv = nn::load(HostTensor(v));
           std::vector<double> invstd(static_cast<size_t>(C));
           for (int64_t c = 0; c < C; ++c) invstd[c] = 1.0 / std::sqrt(vv[c] + eps);
           if (has_sm) nn::store(HostTensor(sm), mv);
           if (has_si) nn::store(HostTensor(si), invstd);
           if (x.numel() == 0) return;
           const std::vector<double> wv = has_w ? nn::load(HostTensor(w)) : std::vector<double>(C, 1.0);
           const std::vector<double> bv = has_b ? nn::load(HostTensor(b)) : std::vector<double>(C, 0.0);
           std::vector<double> xv = nn::load(HostTensor(x));
           const int64_t inner = x.numel() / (x.shape[0] * C);
           for (int64_t i = 0; i < x.numel(); ++i) {
             const int64_t c = (i / inner) % C;
             xv[i] = (xv[i] - mv[c]) * invstd[c] * wv[c] + bv[c];
           }
           nn::store(HostTensor(o), xv);
         }};
  return plan(std::move(p), workspace_size, executor);
}

aclnnStatus plan_layer_norm(const aclTensor* input, const aclIntArray* normalized_shape, const aclTensor* weight,
                            const aclTensor* bias, double eps, aclTensor* out, aclTensor* mean_out,
                            aclTensor* rstd_out, uint64_t* workspace_size, aclOpExecutor** executor) {
  const char* op = "aclnnLayerNorm";
  const TensorInfo x = info(input, "input"), o = info(out, "out");
  nn::require_a2_float(op, x, "input");
  nn::require_same_dtype(op, x, "input", o, "out");
  nn::require_shape(op, o, x.shape, "out");
  const std::vector<int64_t> norm = int_array(normalized_shape, "normalizedShape");
  const auto [rows, inner] = rows_of(op, x, norm, "normalizedShape");
  const bool has_w = present(weight), has_b = present(bias), has_m = present(mean_out), has_r = present(rstd_out);
  TensorInfo w, b, m, r;
  if (has_w) {
    nn::require_shape(op, w = info(weight, "weight"), norm, "weight");
    nn::require_a2_float(op, w, "weight");
  }
  if (has_b) {
    nn::require_shape(op, b = info(bias, "bias"), norm, "bias");
    nn::require_a2_float(op, b, "bias");
  }
  if (has_m) nn::require_shape(op, m = info(mean_out, "meanOut"), stat_shape(x, norm.size()), "meanOut");
  if (has_r) nn::require_shape(op, r = info(rstd_out, "rstdOut"), stat_shape(x, norm.size()), "rstdOut");
  if (eps < 0) invalid(op, "eps %g is negative", eps);
  Plan p{op, 0, [=, rows = rows, inner = inner](char*) {
           if (x.numel() == 0) return;
           std::vector<double> xv = nn::load(HostTensor(x));
           const std::vector<double> wv = has_w ? nn::load(HostTensor(w)) : std::vector<double>(inner, 1.0);
           const std::vector<double> bv = has_b ? nn::load(HostTensor(b)) : std::vector<double>(inner, 0.0);
           std::vector<double> means(rows), rstds(rows);
           for (int64_t i = 0; i < rows; ++i) {
             double* row = xv.data() + i * inner;
             double sum = 0.0;
             for (int64_t j = 0; j < inner; ++j) sum += row[j];
             const double mean = sum / static_cast<double>(inner);
             double sq = 0.0;
             for (int64_t j = 0; j < inner; ++j) sq += (row[j] - mean) * (row[j] - mean);
             const double rstd = 1.0 / std::sqrt(sq / static_cast<double>(inner) + eps);
             for (int64_t j = 0; j < inner; ++j) row[j] = (row[j] - mean) * rstd * wv[j] + bv[j];
             means[i] = mean;
             rstds[i] = rstd;
           }
           nn::store(HostTensor(o), xv);
           if (has_m) nn::store(HostTensor(m), means);
           if (has_r) nn::store(HostTensor(r), rstds);
         }};
  return plan(std::move(p), workspace_size, executor);
}

aclnnStatus plan_rms_norm(const aclTensor* x_t, const aclTensor* gamma, double eps, const aclTensor* y_out,
                          const aclTensor* rstd_out, uint64_t* workspace_size, aclOpExecutor** executor) {
  const char* op = "aclnnRmsNorm";
  const TensorInfo x = info(x_t, "x"), g = info(gamma, "gamma"), y = info(y_out, "yOut"), r = info(rstd_out, "rstdOut");
  nn::require_ndim(op, x, 1, 8, "x");
  nn::require_a2_float(op, x, "x");
  nn::require_a2_float(op, g, "gamma");
  nn::require_same_dtype(op, x, "x", y, "yOut");
  nn::require_shape(op, y, x.shape, "yOut");
  const auto [rows, inner] = rows_of(op, x, g.shape, "gamma");
  if (r.dtype != ACL_FLOAT) invalid(op, "rstdOut has dtype %s; FLOAT", dtype_name(r.dtype));
  nn::require_shape(op, r, stat_shape(x, g.shape.size()), "rstdOut");
  if (eps < 0) invalid(op, "epsilon %g is negative", eps);
  Plan p{op, 0, [=, rows = rows, inner = inner](char*) {
           if (x.numel() == 0) return;
           std::vector<double> xv = nn::load(HostTensor(x));
           const std::vector<double> gv = nn::load(HostTensor(g));
           std::vector<double> rstds(rows);
           for (int64_t i = 0; i < rows; ++i) {
             double* row = xv.data() + i * inner;
             double sq = 0.0;
             for (int64_t j = 0; j < inner; ++j) sq += row[j] * row[j];
             const double rstd = 1.0 / std::sqrt(sq / static_cast<double>(inner) + eps);
             for (int64_t j = 0; j < inner; ++j) row[j] = row[j] * rstd * gv[j];
             rstds[i] = rstd;
           }
           nn::store(HostTensor(y), xv);
           nn::store(HostTensor(r), rstds);
         }};
  return plan(std::move(p), workspace_size, executor);
}

aclnnStatus plan_group_norm(const aclTensor* self, const aclTensor* gamma, const aclTensor* beta, int64_t N,
                            int64_t C, int64_t HxW, int64_t group, double eps, aclTensor* out, aclTensor* mean_out,
                            aclTensor* rstd_out, uint64_t* workspace_size, aclOpExecutor** executor) {
  const char* op = "aclnnGroupNorm";
  const TensorInfo x = info(self, "self"), o = info(out, "out");
  const TensorInfo m = info(mean_out, "meanOut"), r = info(rstd_out, "rstdOut");
  nn::require_ndim(op, x, 2, 8, "self");
  nn::require_a2_float(op, x, "self");
  nn::require_same_dtype(op, x, "self", o, "out");
  nn::require_shape(op, o, x.shape, "out");
  if (x.shape[0] != N || x.shape[1] != C || N * C * HxW != x.numel()) {
    invalid(op, "N %lld, C %lld, HxW %lld do not describe self %s", static_cast<long long>(N),
            static_cast<long long>(C), static_cast<long long>(HxW), nn::shape_string(x.shape).c_str());
  }
  if (group < 1 || C % group != 0) invalid(op, "group %lld must divide C %lld", static_cast<long long>(group), static_cast<long long>(C));
  const std::vector<int64_t> channels{C}, stats{N, group};
  const bool has_g = present(gamma), has_b = present(beta);
  TensorInfo g, b;
  if (has_g) {
    nn::require_shape(op, g = info(gamma, "gamma"), channels, "gamma");
    nn::require_same_dtype(op, g, "gamma", x, "self");
  }
  if (has_b) {
    nn::require_shape(op, b = info(beta, "beta"), channels, "beta");
    nn::require_same_dtype(op, b, "beta", x, "self");
  }
  for (const TensorInfo* t : {&m, &r}) {
    nn::require_same_dtype(op, *t, t == &m ? "meanOut" : "rstdOut", x, "self");
    nn::require_shape(op, *t, stats, t == &m ? "meanOut" : "rstdOut");
  }
  if (eps < 0) invalid(op, "eps %g is negative", eps);
  Plan p{op, 0, [=](char*) {
           if (x.numel() == 0) return;
           std::vector<double> xv = nn::load(HostTensor(x));
           const std::vector<double> gv = has_g ? nn::load(HostTensor(g)) : std::vector<double>(C, 1.0);
           const std::vector<double> bv = has_b ? nn::load(HostTensor(b)) : std::vector<double>(C, 0.0);
           std::vector<double> means(N * group), rstds(N * group);
           const int64_t per_group = C / group * HxW;
           for (int64_t n = 0; n < N; ++n) {
             for (int64_t gi = 0; gi < group; ++gi) {
               double* chunk = xv.data() + (n * group + gi) * per_group;
               double sum = 0.0;
               for (int64_t j = 0; j < per_group; ++j) sum += chunk[j];
               const double mean = sum / static_cast<double>(per_group);
               double sq = 0.0;
               for (int64_t j = 0; j < per_group; ++j) sq += (chunk[j] - mean) * (chunk[j] - mean);
               const double rstd = 1.0 / std::sqrt(sq / static_cast<double>(per_group) + eps);
               for (int64_t j = 0; j < per_group; ++j) {
                 const int64_t c = gi * (C / group) + j / HxW;
                 chunk[j] = (chunk[j] - mean) * rstd * gv[c] + bv[c];
               }
               means[n * group + gi] = mean;
               rstds[n * group + gi] = rstd;
             }
           }
           nn::store(HostTensor(o), xv);
           nn::store(HostTensor(m), means);
           nn::store(HostTensor(r), rstds);
         }};
  return plan(std::move(p), workspace_size, executor);
}

}  // namespace
}  // namespace cdsim

extern "C" aclnnStatus aclnnBatchNormGetWorkspaceSize(const aclTensor* input, const aclTensor* weight,
                                                      const aclTensor* bias, aclTensor* runningMean,
                                                      aclTensor* runningVar, bool training, double momentum,
                                                      double eps, aclTensor* output, aclTensor* saveMean,
                                                      aclTensor* saveInvstd, uint64_t* workspaceSize,
                                                      aclOpExecutor** executor) {
  (void)momentum;  // only training updates the running statistics
  return cdsim::guarded_op([&] {
    return cdsim::plan_batch_norm(input, weight, bias, runningMean, runningVar, training, eps, output, saveMean,
                                  saveInvstd, workspaceSize, executor);
  });
}
CDSIM_ACLNN_RUN(BatchNorm)

extern "C" aclnnStatus aclnnLayerNormGetWorkspaceSize(const aclTensor* input, const aclIntArray* normalizedShape,
                                                      const aclTensor* weightOptional, const aclTensor* biasOptional,
                                                      double eps, aclTensor* out, aclTensor* meanOutOptional,
                                                      aclTensor* rstdOutOptional, uint64_t* workspaceSize,
                                                      aclOpExecutor** executor) {
  return cdsim::guarded_op([&] {
    return cdsim::plan_layer_norm(input, normalizedShape, weightOptional, biasOptional, eps, out, meanOutOptional,
                                  rstdOutOptional, workspaceSize, executor);
  });
}
CDSIM_ACLNN_RUN(LayerNorm)

extern "C" aclnnStatus aclnnRmsNormGetWorkspaceSize(const aclTensor* x, const aclTensor* gamma, double epsilon,
                                                    const aclTensor* yOut, const aclTensor* rstdOut,
                                                    uint64_t* workspaceSize, aclOpExecutor** executor) {
  return cdsim::guarded_op(
      [&] { return cdsim::plan_rms_norm(x, gamma, epsilon, yOut, rstdOut, workspaceSize, executor); });
}
CDSIM_ACLNN_RUN(RmsNorm)

extern "C" aclnnStatus aclnnGroupNormGetWorkspaceSize(const aclTensor* self, const aclTensor* gamma,
                                                      const aclTensor* beta, int64_t N, int64_t C, int64_t HxW,
                                                      int64_t group, double eps, aclTensor* out, aclTensor* meanOut,
                                                      aclTensor* rstdOut, uint64_t* workspaceSize,
                                                      aclOpExecutor** executor) {
  return cdsim::guarded_op([&] {
    return cdsim::plan_group_norm(self, gamma, beta, N, C, HxW, group, eps, out, meanOut, rstdOut, workspaceSize,
                                  executor);
  });
}
CDSIM_ACLNN_RUN(GroupNorm)
