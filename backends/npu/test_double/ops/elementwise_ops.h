// The simulated elementwise aclnn ops' shared machinery: argument checks as
// aclnn documents them (a NULL tensor -> ACLNN_ERR_PARAM_NULLPTR, a dtype
// outside the op's Atlas A2 list, shapes that do not broadcast, an output of
// the wrong shape or more than 8 dims -> ACLNN_ERR_PARAM_INVALID, each with a
// recent-error message), torch's type promotion (CANN's "互推导关系"), and
// loops over the output that read every input at its broadcast index.
//
// Values are computed in double (integers in int64) and rounded once into
// the output's dtype: the double is not a second reference.
#ifndef CDSIM_OPS_ELEMENTWISE_OPS_H_
#define CDSIM_OPS_ELEMENTWISE_OPS_H_

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "sim.h"

namespace cdsim {
namespace ew {

using Dtypes = std::initializer_list<aclDataType>;

// Every chipdock dtype that aclnn lists for most ops on Atlas A2.
#define CDSIM_EW_NUMERIC ACL_FLOAT, ACL_FLOAT16, ACL_BF16, ACL_DOUBLE, ACL_INT8, ACL_INT16, ACL_INT32, ACL_INT64, ACL_UINT8
#define CDSIM_EW_ALL CDSIM_EW_NUMERIC, ACL_BOOL
#define CDSIM_EW_FLOAT ACL_FLOAT, ACL_FLOAT16, ACL_BF16, ACL_DOUBLE

// ACLNN_ERR_PARAM_INVALID with "<op>: <message>".
[[noreturn]] void invalid(const char* op, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

// The descriptor behind `tensor` (ACLNN_ERR_PARAM_NULLPTR naming it when NULL),
// with its dtype in `allowed` and at most 8 dims.
const TensorInfo& tensor(const aclTensor* tensor, const char* op, const char* name, Dtypes allowed);

bool is_integral(aclDataType dtype) noexcept;  // the integer types (not bool)
// torch's promotion of two operand types (bool < integers < floats).
aclDataType promote(aclDataType a, aclDataType b);
// Whether a result of type `from` may be written to an output of type `to`
// (torch's canCast: no float into an integer or bool, no integer into bool).
bool can_cast(aclDataType from, aclDataType to) noexcept;

// The broadcast of `a` and `b` (NumPy rules, right-aligned), or invalid().
std::vector<int64_t> broadcast(const char* op, const std::vector<int64_t>& a, const std::vector<int64_t>& b);
// `out` must have shape `shape` exactly.
void require_shape(const char* op, const char* name, const TensorInfo& out, const std::vector<int64_t>& shape);
// A tensor without stride-1 row-major layout (aclnnCast refuses some).
bool is_contiguous(const TensorInfo& t) noexcept;

// An element value: a double for float types, an exact int64 for the others.
struct Value {
  bool floating;
  double f;
  int64_t i;
  double as_double() const { return floating ? f : static_cast<double>(i); }
  bool truthy() const { return floating ? f != 0.0 : i != 0; }  // NaN is true
};
Value load(const char* p, aclDataType dtype);
// Writes `v` into `dtype`: floats rounded once (RNE), integers wrapped, bool
// as v != 0.
void store(char* p, aclDataType dtype, const Value& v);
Value of_double(double v);
Value of_int(int64_t v);
// `v` wrapped to the width of the integer type `dtype` (bool: 0 or 1).
int64_t wrap(int64_t v, aclDataType dtype);

// Plans op `name` (e.g. "aclnnAdd"): `body(inputs, output)` runs on the stream
// for every output element, with pointers to the inputs' elements at that
// element's broadcast index.
using ElementFn = std::function<void(const std::vector<const char*>& in, char* out)>;
aclnnStatus plan_elementwise(const char* name, std::vector<TensorInfo> inputs, TensorInfo output, ElementFn body,
                             uint64_t* workspace_size, aclOpExecutor** executor);

// A scalar's value rounded to `dtype` as aclnn converts it to a tensor's type.
Value scalar_as(const aclScalar* scalar, const char* what, aclDataType dtype);

}  // namespace ew
}  // namespace cdsim

#endif  // CDSIM_OPS_ELEMENTWISE_OPS_H_
