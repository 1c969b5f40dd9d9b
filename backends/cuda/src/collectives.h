// Collectives on NCCL (the nvidia-nccl-cu13 wheel's libnccl.so.2, opened at
// the first comm_* call that has a device: nccl_api.h): the ABI's comm_*
// slots. A cd_comm wraps one ncclComm_t for one rank on one device.
//
// Every function checks its arguments before NCCL sees them (live handles,
// rank/root/peer in range, the stream on the communicator's device, buffers
// inside live allocations of that device, dtype and op known to NCCL) and
// throws Error; plugin.cpp runs each under guard("comm_...").
//
// dtypes: float32, float16, bfloat16, float64, int8, int32, int64 and uint8
// map to NCCL's types. int16 and bool have none: the data-movement calls
// (broadcast, all_gather, send, recv) move them as bytes, the reductions
// refuse them.
#ifndef CHIPDOCK_CUDA_COLLECTIVES_H_
#define CHIPDOCK_CUDA_COLLECTIVES_H_

#include <nccl.h>

#include <cstddef>
#include <cstdint>

#include "chipdock/device_api.h"

struct cd_comm {
  int32_t device;
  int32_t rank;
  int32_t nranks;
  ncclComm_t nccl;
};

namespace chipdock_cuda {

void comm_get_unique_id(cd_comm_unique_id* id);
// Blocks until all nranks ranks joined (NCCL's rule: one thread or process
// per rank, or all inits inside one group).
cd_comm* comm_init_rank(int32_t device, int32_t nranks, const cd_comm_unique_id* id, int32_t rank);
// ncclCommFinalize (waits until the enqueued work is done, and, as NCCL
// asks, until the other ranks finalize too) then ncclCommDestroy.
void comm_destroy(cd_comm* comm);

void comm_all_reduce(const void* send, void* recv, size_t count, cd_dtype_t dtype, cd_reduce_op_t op,
                     cd_comm* comm, cd_stream* stream);
void comm_broadcast(const void* send, void* recv, size_t count, cd_dtype_t dtype, int32_t root, cd_comm* comm,
                    cd_stream* stream);
void comm_reduce(const void* send, void* recv, size_t count, cd_dtype_t dtype, cd_reduce_op_t op, int32_t root,
                 cd_comm* comm, cd_stream* stream);
void comm_all_gather(const void* send, void* recv, size_t send_count, cd_dtype_t dtype, cd_comm* comm,
                     cd_stream* stream);
void comm_reduce_scatter(const void* send, void* recv, size_t recv_count, cd_dtype_t dtype, cd_reduce_op_t op,
                         cd_comm* comm, cd_stream* stream);
void comm_send(const void* send, size_t count, cd_dtype_t dtype, int32_t peer, cd_comm* comm, cd_stream* stream);
void comm_recv(void* recv, size_t count, cd_dtype_t dtype, int32_t peer, cd_comm* comm, cd_stream* stream);
void comm_group_start();
void comm_group_end();

}  // namespace chipdock_cuda

#endif  // CHIPDOCK_CUDA_COLLECTIVES_H_
