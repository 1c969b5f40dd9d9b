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

/* Reductions, softmax, cumsum, arg-reductions, sort and top-k (hicann/ops-math
 * math/<op>/docs/aclnn<Op>.md, ops-nn for Softmax and LogSoftmax). `dim` arrays
 * take [-self.dim(), self.dim()-1]; ReduceSum, Mean, Amax, Amin read an empty
 * array as every dimension. ProdDim, ArgMax, ArgMin, Softmax, LogSoftmax,
 * CumsumV2 and Sort take one dimension; Sort's `stable` asks for equal keys to
 * keep their order (the only op here whose docs promise a tie order). */
#define CD_ACLNN_REDUCE_OPS(X)                                                                             \
  X(ReduceSum, const aclTensor* self, const aclIntArray* dims, bool keepDims, aclDataType dtype,           \
    aclTensor* out)                                                                                        \
  X(Mean, const aclTensor* self, const aclIntArray* dim, bool keepDim, aclDataType dtype, aclTensor* out)  \
  X(Amax, const aclTensor* self, const aclIntArray* dim, bool keepDim, aclTensor* out)                     \
  X(Amin, const aclTensor* self, const aclIntArray* dim, bool keepDim, aclTensor* out)                     \
  X(ProdDim, const aclTensor* self, int64_t dim, bool keepDim, aclDataType dtype, aclTensor* out)          \
  X(ArgMax, const aclTensor* self, int64_t dim, bool keepdim, aclTensor* out)                              \
  X(ArgMin, const aclTensor* self, int64_t dim, bool keepdim, aclTensor* out)                              \
  X(Softmax, const aclTensor* self, int64_t dim, aclTensor* out)                                           \
  X(LogSoftmax, const aclTensor* self, int64_t dim, aclTensor* out)                                        \
  X(CumsumV2, const aclTensor* self, int64_t dim, bool exclusive, bool reverse, aclTensor* out)            \
  X(Sort, const aclTensor* self, bool stable, int64_t dim, bool descending, aclTensor* valuesOut,          \
    aclTensor* indicesOut)

/* end of reduce ops */

/* Matmul, gemm, convolution, pools, normalizations, attention (hicann/ops-nn
 * docs: matmul/, conv/, pooling/, norm/). cubeMathType: 0 KEEP_DTYPE,
 * 1 ALLOW_FP32_DOWN_PRECISION (float32 may run as HFLOAT32), 2 USE_FP16,
 * 3 USE_HF32. Convolution's padding has 2 values (symmetric: rows,
 * columns) or, for a non-transposed conv2d, 4 (top, bottom, left, right).
 * The pools' paddings are symmetric (2 values). BatchNorm with
 * training=false reads runningMean/runningVar and leaves them unchanged.
 * The nn compositions also call ops that the other families' blocks declare
 * (Add, Relu, Cast, Div; Softmax; ConstantPadNd, InplaceCopy,
 * InplaceFillScalar) and Muls, which only nn uses, declared last. */
#define CD_ACLNN_NN_OPS(X) \
  X(Matmul, const aclTensor* self, const aclTensor* mat2, aclTensor* out, int8_t cubeMathType) \
  X(Addmm, const aclTensor* self, const aclTensor* mat1, const aclTensor* mat2, const aclScalar* beta, \
    const aclScalar* alpha, aclTensor* out, int8_t cubeMathType) \
  X(Convolution, const aclTensor* input, const aclTensor* weight, const aclTensor* bias, \
    const aclIntArray* stride, const aclIntArray* padding, const aclIntArray* dilation, bool transposed, \
    const aclIntArray* outputPadding, int64_t groups, aclTensor* output, int8_t cubeMathType) \
  X(MaxPool2dWithIndices, const aclTensor* self, const aclIntArray* kernelSize, const aclIntArray* stride, \
    const aclIntArray* padding, const aclIntArray* dilation, bool ceilMode, aclTensor* out, aclTensor* indices) \
  X(AvgPool2d, const aclTensor* self, const aclIntArray* kernelSize, const aclIntArray* strides, \
    const aclIntArray* paddings, bool ceilMode, bool countIncludePad, int64_t divisorOverride, \
    int8_t cubeMathType, aclTensor* out) \
  X(AdaptiveAvgPool2d, const aclTensor* self, const aclIntArray* outputSize, aclTensor* out) \
  X(BatchNorm, const aclTensor* input, const aclTensor* weight, const aclTensor* bias, aclTensor* runningMean, \
    aclTensor* runningVar, bool training, double momentum, double eps, aclTensor* output, aclTensor* saveMean, \
    aclTensor* saveInvstd) \
  X(LayerNorm, const aclTensor* input, const aclIntArray* normalizedShape, const aclTensor* weightOptional, \
    const aclTensor* biasOptional, double eps, aclTensor* out, aclTensor* meanOutOptional, \
    aclTensor* rstdOutOptional) \
  X(RmsNorm, const aclTensor* x, const aclTensor* gamma, double epsilon, const aclTensor* yOut, \
    const aclTensor* rstdOut) \
  X(GroupNorm, const aclTensor* self, const aclTensor* gamma, const aclTensor* beta, int64_t N, int64_t C, \
    int64_t HxW, int64_t group, double eps, aclTensor* out, aclTensor* meanOut, aclTensor* rstdOut) \
  X(Muls, const aclTensor* self, const aclScalar* other, aclTensor* out)

/* end of nn ops */

/* Data movement (hicann ops-math / ops-nn per-op docs): copy (also converts
 * dtypes, as torch's copy_), flip, concat, split, gather (GatherV2: index_select
 * along dim; Gather: torch.gather), scatter (reduce 0 none, 1 add, 2 mul;
 * ScatterReduce adds 3 max, 4 min, 5 mean), pad (pad is torch order: last dim
 * first, begin then end), repeat (torch.repeat = tile), bilinear upsampling
 * (torch semantics: the scales, when > 0, give the coordinate ratio 1/scale),
 * arange and fill. Indices must lie in [0, size): the backend normalizes them. */
#define CD_ACLNN_MOVEMENT_OPS(X) \
  X(InplaceCopy, aclTensor* selfRef, const aclTensor* src) \
  X(Flip, const aclTensor* self, const aclIntArray* dims, aclTensor* out) \
  X(Cat, const aclTensorList* tensors, int64_t dim, aclTensor* out) \
  X(SplitWithSize, const aclTensor* self, const aclIntArray* splitSize, int64_t dim, aclTensorList* out) \
  X(GatherV2, const aclTensor* self, int64_t dim, const aclTensor* index, aclTensor* out) \
  X(Gather, const aclTensor* self, int64_t dim, const aclTensor* index, aclTensor* out) \
  X(Scatter, const aclTensor* self, int64_t dim, const aclTensor* index, const aclTensor* src, int64_t reduce, \
    aclTensor* out) \
  X(ScatterReduce, const aclTensor* self, int64_t dim, const aclTensor* index, const aclTensor* src, \
    int64_t reduce, bool includeSelf, aclTensor* out) \
  X(ConstantPadNd, const aclTensor* self, const aclIntArray* pad, const aclScalar* value, aclTensor* out) \
  X(Repeat, const aclTensor* self, const aclIntArray* repeats, aclTensor* out) \
  X(UpsampleBilinear2d, const aclTensor* self, const aclIntArray* outputSize, bool alignCorners, double scalesH, \
    double scalesW, aclTensor* out) \
  X(Arange, const aclScalar* start, const aclScalar* end, const aclScalar* step, aclTensor* out) \
  X(InplaceFillScalar, aclTensor* selfRef, const aclScalar* value)

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
