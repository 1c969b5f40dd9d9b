/*
 * aclnn, CANN's two-phase single-op API: the declarations chipdock calls.
 *
 * CANN's own aclnn headers (aclnn/acl_meta.h, aclnnop/aclnn_*.h) ship with
 * the CANN toolkit only, under its licence; no registry package carries them.
 * This header is the project's own, written from CANN's public operator
 * documentation (hiascend.com "aclnn API" pages and the hicann/ops-math,
 * ops-nn repositories' per-op docs). It declares exactly what chipdock uses.
 * The plug-in never links these symbols: it resolves each pair with dlsym
 * from libopapi.so (or CANN >= 8.5's libopapi_math.so, libopapi_nn.so, ...)
 * and the descriptor functions from libnnopbase.so; the test double
 * (backends/npu/test_double) defines them with these same prototypes.
 *
 * Every op Xxx is two calls:
 *   aclnnStatus aclnnXxxGetWorkspaceSize(<op arguments>, uint64_t* workspaceSize,
 *                                        aclOpExecutor** executor);
 *   aclnnStatus aclnnXxx(void* workspace, uint64_t workspaceSize,
 *                        aclOpExecutor* executor, aclrtStream stream);
 * The first validates and plans (no device work); the second enqueues on the
 * stream and consumes the executor. Tensors passed to the first may be
 * destroyed once the second has returned.
 *
 * The op lists below are X-macros, one per family: X(Name, <op arguments>).
 * Compiles as C99 and C++.
 */
#ifndef CHIPDOCK_NPU_ACLNN_API_H_
#define CHIPDOCK_NPU_ACLNN_API_H_

#include <stdbool.h>
#include <stdint.h>

#include <acl/acl_base.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef int32_t aclnnStatus; /* 0 is success (ACLNN_SUCCESS) */
#define CD_ACLNN_SUCCESS 0
/* aclnn's documented error codes (aclnn_base.h in CANN). */
#define CD_ACLNN_ERR_PARAM_NULLPTR 161001
#define CD_ACLNN_ERR_PARAM_INVALID 161002
#define CD_ACLNN_ERR_RUNTIME_ERROR 361001
#define CD_ACLNN_ERR_INNER 561000

typedef struct aclTensor aclTensor;
typedef struct aclScalar aclScalar;
typedef struct aclIntArray aclIntArray;
typedef struct aclFloatArray aclFloatArray;
typedef struct aclBoolArray aclBoolArray;
typedef struct aclTensorList aclTensorList;
typedef struct aclOpExecutor aclOpExecutor;

/* libnnopbase.so. A tensor is a view (viewDims, stride in elements, offset
 * in elements) of a storage of storageDims starting at tensorData. */
aclTensor* aclCreateTensor(const int64_t* viewDims, uint64_t viewDimsNum, aclDataType dataType,
                           const int64_t* stride, int64_t offset, aclFormat format,
                           const int64_t* storageDims, uint64_t storageDimsNum, void* tensorData);
aclScalar* aclCreateScalar(void* value, aclDataType dataType);
aclIntArray* aclCreateIntArray(const int64_t* value, uint64_t size);
aclFloatArray* aclCreateFloatArray(const float* value, uint64_t size);
aclBoolArray* aclCreateBoolArray(const bool* value, uint64_t size);
aclTensorList* aclCreateTensorList(const aclTensor* const* value, uint64_t size);
aclnnStatus aclDestroyTensor(const aclTensor* tensor);
aclnnStatus aclDestroyScalar(const aclScalar* scalar);
aclnnStatus aclDestroyIntArray(const aclIntArray* array);
aclnnStatus aclDestroyFloatArray(const aclFloatArray* array);
aclnnStatus aclDestroyBoolArray(const aclBoolArray* array);
aclnnStatus aclDestroyTensorList(const aclTensorList* array);

/* ---- op lists, one per family (each family's owner edits only its own) ---- */

/* Elementwise math, activations, comparisons, logic, cast, where. */
/* Prototypes as hicann/ops-math (math/<op>/docs/aclnn<Op>.md, conversion/
 * clip_by_value_v2/docs/aclnnClamp.md) and hicann/ops-nn (activation/<op>/docs)
 * document them. `approximate` of GeluV2: 0 none (erf), 1 tanh. `mode` of
 * DivMod: 0 true division, 1 trunc, 2 floor. Clamp takes NULL for an absent
 * bound (not both). */
#define CD_ACLNN_ELEMENTWISE_OPS(X)                                                                 \
  X(Add, const aclTensor* self, const aclTensor* other, const aclScalar* alpha, aclTensor* out)     \
  X(Sub, const aclTensor* self, const aclTensor* other, const aclScalar* alpha, aclTensor* out)     \
  X(Mul, const aclTensor* self, const aclTensor* other, aclTensor* out)                             \
  X(Div, const aclTensor* self, const aclTensor* other, aclTensor* out)                             \
  X(DivMod, const aclTensor* self, const aclTensor* other, int mode, aclTensor* out)                \
  X(PowTensorTensor, const aclTensor* self, const aclTensor* exponent, aclTensor* out)              \
  X(Maximum, const aclTensor* self, const aclTensor* other, aclTensor* out)                         \
  X(Minimum, const aclTensor* self, const aclTensor* other, aclTensor* out)                         \
  X(Neg, const aclTensor* self, aclTensor* out)                                                     \
  X(Abs, const aclTensor* self, aclTensor* out)                                                     \
  X(Exp, const aclTensor* self, aclTensor* out)                                                     \
  X(Log, const aclTensor* self, aclTensor* out)                                                     \
  X(Sqrt, const aclTensor* self, aclTensor* out)                                                    \
  X(Rsqrt, const aclTensor* self, aclTensor* out)                                                   \
  X(Sin, const aclTensor* self, aclTensor* out)                                                     \
  X(Cos, const aclTensor* input, aclTensor* out)                                                    \
  X(Tanh, const aclTensor* self, aclTensor* out)                                                    \
  X(Erf, const aclTensor* self, aclTensor* out)                                                     \
  X(Sigmoid, const aclTensor* self, aclTensor* out)                                                 \
  X(Relu, const aclTensor* self, aclTensor* out)                                                    \
  X(LeakyRelu, const aclTensor* self, const aclScalar* negativeSlope, aclTensor* out)               \
  X(Gelu, const aclTensor* self, aclTensor* out)                                                    \
  X(GeluV2, const aclTensor* x, int64_t approximate, aclTensor* y)                                  \
  X(Silu, const aclTensor* self, aclTensor* out)                                                    \
  X(Clamp, const aclTensor* self, const aclScalar* clipValueMin, const aclScalar* clipValueMax,     \
    aclTensor* out)                                                                                 \
  X(SWhere, const aclTensor* condition, const aclTensor* self, const aclTensor* other, aclTensor* out) \
  X(EqTensor, const aclTensor* self, const aclTensor* other, aclTensor* out)                        \
  X(NeTensor, const aclTensor* self, const aclTensor* other, aclTensor* out)                        \
  X(LtTensor, const aclTensor* self, const aclTensor* other, aclTensor* out)                        \
  X(LeTensor, const aclTensor* self, const aclTensor* other, aclTensor* out)                        \
  X(GtTensor, const aclTensor* self, const aclTensor* other, aclTensor* out)                        \
  X(GeTensor, const aclTensor* self, const aclTensor* other, aclTensor* out)                        \
  X(EqScalar, const aclTensor* self, const aclScalar* other, aclTensor* out)                        \
  X(LogicalAnd, const aclTensor* self, const aclTensor* other, aclTensor* out)                      \
  X(LogicalOr, const aclTensor* self, const aclTensor* other, aclTensor* out)                       \
  X(LogicalNot, const aclTensor* self, aclTensor* out)                                              \
  X(InplaceMaskedFillScalar, aclTensor* selfRef, const aclTensor* mask, const aclScalar* value)     \
  X(BitwiseAndScalar, const aclTensor* self, const aclScalar* other, aclTensor* out)                \
  X(Cast, const aclTensor* self, aclDataType dtype, aclTensor* out)

/* end of elementwise ops */

/* Reductions, softmax, cumsum, arg-reductions, sort and top-k. */
#define CD_ACLNN_REDUCE_OPS(X) \
  X(ReduceSum, const aclTensor* self, const aclIntArray* dim, bool keepDim, aclDataType dtype, aclTensor* out)

/* end of reduce ops */

/* Matmul, gemm, convolution, pools, normalizations, attention. */
#define CD_ACLNN_NN_OPS(X) \
  X(Matmul, const aclTensor* self, const aclTensor* mat2, aclTensor* out, int8_t cubeMathType)

/* end of nn ops */

/* Data movement: copy, flip, permute, concat, split, slice, gather, scatter, pad, ... */
#define CD_ACLNN_MOVEMENT_OPS(X) \
  X(InplaceCopy, aclTensor* selfRef, const aclTensor* src)

/* end of movement ops */

#define CD_ACLNN_ALL_OPS(X) \
  CD_ACLNN_ELEMENTWISE_OPS(X) CD_ACLNN_REDUCE_OPS(X) CD_ACLNN_NN_OPS(X) CD_ACLNN_MOVEMENT_OPS(X)

#define CD_ACLNN_DECLARE_(name, ...)                                                            \
  aclnnStatus aclnn##name##GetWorkspaceSize(__VA_ARGS__, uint64_t* workspaceSize,               \
                                            aclOpExecutor** executor);                          \
  aclnnStatus aclnn##name(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,     \
                          aclrtStream stream);
CD_ACLNN_ALL_OPS(CD_ACLNN_DECLARE_)
#undef CD_ACLNN_DECLARE_

#ifdef __cplusplus
}
#endif

#endif /* CHIPDOCK_NPU_ACLNN_API_H_ */
