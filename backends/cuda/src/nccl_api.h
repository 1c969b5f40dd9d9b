// NCCL (the nvidia-nccl-cu13 wheel's libnccl.so.2), opened at the first
// collectives call instead of linked (see lazy_library.h): the functions
// collectives.cpp calls, as one table.
#ifndef CHIPDOCK_CUDA_NCCL_API_H_
#define CHIPDOCK_CUDA_NCCL_API_H_

#include <nccl.h>

#include "lazy_library.h"

// Every nccl* function the plug-in calls; add one here before using it.
#define CHIPDOCK_CUDA_NCCL_FUNCTIONS(X) \
  X(ncclAllGather)                      \
  X(ncclAllReduce)                      \
  X(ncclBroadcast)                      \
  X(ncclCommAbort)                      \
  X(ncclCommDestroy)                    \
  X(ncclCommFinalize)                   \
  X(ncclCommGetAsyncError)              \
  X(ncclCommInitRank)                   \
  X(ncclGetErrorString)                 \
  X(ncclGetLastError)                   \
  X(ncclGetUniqueId)                    \
  X(ncclGroupEnd)                       \
  X(ncclGroupStart)                     \
  X(ncclRecv)                           \
  X(ncclReduce)                         \
  X(ncclReduceScatter)                  \
  X(ncclSend)

namespace chipdock_cuda {

struct NcclApi {
  CHIPDOCK_CUDA_NCCL_FUNCTIONS(CHIPDOCK_CUDA_TABLE_ENTRY)
};

// The table, NCCL opened on the first call. Throws CD_STATUS_UNAVAILABLE
// (the paths tried, dlerror()) when the library or a function is missing.
// Call it only with a device: that is what keeps GPU-less imports free of it.
const NcclApi& nccl_api();

}  // namespace chipdock_cuda

#endif  // CHIPDOCK_CUDA_NCCL_API_H_
