// The double's reduction-family ops (reduce*.cpp): argument checks as CANN's
// docs describe them (each failure is 161002 ACLNN_ERR_PARAM_INVALID with a
// message naming the op, as aclnn's own checks are) and index helpers for the
// host loops. The arithmetic is long double, each result rounded once.
#ifndef CDSIM_OPS_REDUCE_COMMON_H_
#define CDSIM_OPS_REDUCE_COMMON_H_

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "sim.h"

namespace cdsim {
namespace reduce_ops {

// aclnn's tensors have at most 8 dimensions.
constexpr size_t kMaxRank = 8;

std::string shape_string(const std::vector<int64_t>& shape);

// 161002 unless `dtype` is one of `allowed`.
void check_dtype(const char* op, const char* what, aclDataType dtype, std::initializer_list<aclDataType> allowed);
// 161002 unless `t` has between `min_rank` and kMaxRank dimensions.
void check_rank(const char* op, const char* what, const TensorInfo& t, size_t min_rank = 0);
// 161002 unless `t` has `shape`.
void check_shape(const char* op, const char* what, const TensorInfo& t, const std::vector<int64_t>& shape);

// The dimensions `dims` names in a tensor of `rank` dimensions, each in
// [-rank, rank-1] (a 0-d tensor takes [-1, 0]), none twice; an empty list
// names every dimension. 161002 otherwise.
std::vector<bool> dim_mask(const char* op, size_t rank, const std::vector<int64_t>& dims);
// One dimension in [-rank, rank-1] (a 0-d tensor: [-1, 0] when `scalar_ok`),
// normalized. 161002 otherwise.
int64_t one_dim(const char* op, size_t rank, int64_t dim, bool scalar_ok);

// The shape left after reducing the dimensions in `mask`.
std::vector<int64_t> reduced_shape(const std::vector<int64_t>& shape, const std::vector<bool>& mask, bool keep);

// fn(linear, index) for every element of `shape`, row-major (once for 0-d,
// never for an empty shape).
void for_each_index(const std::vector<int64_t>& shape,
                    const std::function<void(int64_t, const std::vector<int64_t>&)>& fn);

// fn(row index with `dim` = 0) for every row along `dim` of `shape`.
void for_each_row(const std::vector<int64_t>& shape, size_t dim,
                  const std::function<void(std::vector<int64_t>&)>& fn);

}  // namespace reduce_ops
}  // namespace cdsim

#endif  // CDSIM_OPS_REDUCE_COMMON_H_
