// cuBLASLt (the nvidia-cublas wheel's libcublasLt.so.13), opened at the
// first matmul-path use instead of linked (see lazy_library.h): the
// functions the linear-algebra kernels call, as one table.
#ifndef CHIPDOCK_CUDA_CUBLASLT_API_H_
#define CHIPDOCK_CUDA_CUBLASLT_API_H_

#include <cublasLt.h>

#include "lazy_library.h"

// Every cublasLt* function the plug-in calls; add one here before using it.
#define CHIPDOCK_CUDA_CUBLASLT_FUNCTIONS(X) \
  X(cublasLtCreate)                         \
  X(cublasLtDestroy)                        \
  X(cublasLtGetStatusString)                \
  X(cublasLtMatmul)                         \
  X(cublasLtMatmulAlgoGetHeuristic)         \
  X(cublasLtMatmulDescCreate)               \
  X(cublasLtMatmulDescDestroy)              \
  X(cublasLtMatmulDescSetAttribute)         \
  X(cublasLtMatmulPreferenceCreate)         \
  X(cublasLtMatmulPreferenceDestroy)        \
  X(cublasLtMatmulPreferenceSetAttribute)   \
  X(cublasLtMatrixLayoutCreate)             \
  X(cublasLtMatrixLayoutDestroy)            \
  X(cublasLtMatrixLayoutSetAttribute)

namespace chipdock_cuda {

struct CublasLtApi {
  CHIPDOCK_CUDA_CUBLASLT_FUNCTIONS(CHIPDOCK_CUDA_TABLE_ENTRY)
};

// The table, cuBLASLt opened on the first call. Throws CD_STATUS_UNAVAILABLE
// (the paths tried, dlerror()) when the library or a function is missing.
// Call it only with a device: that is what keeps GPU-less imports free of it.
const CublasLtApi& cublaslt_api();

}  // namespace chipdock_cuda

#endif  // CHIPDOCK_CUDA_CUBLASLT_API_H_
