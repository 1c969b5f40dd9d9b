// Shared pieces of the double's nn ops (ops/nn*.cpp): argument checks that
// fail like aclnn does (ACLNN_ERR_PARAM_INVALID, 161002, with the recent
// error message), whole-tensor loads into double precision, and the
// row-major index arithmetic the plain loops use. Results are computed in
// double and rounded once (HostTensor::set).
#ifndef CHIPDOCK_NPU_SIM_OPS_NN_SIM_H_
#define CHIPDOCK_NPU_SIM_OPS_NN_SIM_H_

#include <cstdint>
#include <string>
#include <vector>

#include "sim.h"

namespace cdsim {
namespace nn {

// Throws SimError(161002, "<op>: <message>").
[[noreturn]] void invalid(const char* op, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

// "[2, 3]" for messages.
std::string shape_string(const std::vector<int64_t>& shape);

// FLOAT, FLOAT16 or BFLOAT16: what the nn ops list for Atlas A2.
bool is_a2_float(aclDataType dtype);
void require_a2_float(const char* op, const TensorInfo& t, const char* what);
void require_same_dtype(const char* op, const TensorInfo& a, const char* what_a, const TensorInfo& b,
                        const char* what_b);
void require_shape(const char* op, const TensorInfo& t, const std::vector<int64_t>& shape, const char* what);
void require_ndim(const char* op, const TensorInfo& t, int64_t lo, int64_t hi, const char* what);

// The tensor's elements in row-major order of its view, as double.
std::vector<double> load(const HostTensor& t);
// Stores `values` (row-major) into `t`, each rounded once to its dtype.
void store(const HostTensor& t, const std::vector<double>& values);

int64_t product(const std::vector<int64_t>& shape);
std::vector<int64_t> row_major_strides(const std::vector<int64_t>& shape);

// NumPy broadcast of two shapes (right-aligned); false if they do not broadcast.
bool broadcast_shapes(const std::vector<int64_t>& a, const std::vector<int64_t>& b, std::vector<int64_t>* out);
// Row-major strides of `shape` as seen from `target` (right-aligned; 0 where broadcast).
std::vector<int64_t> broadcast_strides(const std::vector<int64_t>& shape, const std::vector<int64_t>& target);

// An int array of 1 or 2 values (or 0 when `allow_empty`) as 2 values; the
// empty one becomes `fallback`.
std::vector<int64_t> pair(const char* op, const std::vector<int64_t>& values, const char* what, bool allow_empty,
                          const std::vector<int64_t>& fallback);

}  // namespace nn
}  // namespace cdsim

#endif  // CHIPDOCK_NPU_SIM_OPS_NN_SIM_H_
