// The collective slots of the plug-in's table (device_api.h's cd_plugin_api,
// semantics as NCCL's) on HCCL, implemented in collectives.cpp. plugin.cpp
// puts them into the table; each runs under guard("<slot>", ...) itself, so
// every message starts with the slot's name and no exception crosses the ABI.
//
// A cd_comm wraps one HcclComm for one rank on one device. Every slot checks
// what HCCL would only report as a bare code (live handle, ranks, the stream
// on the communicator's device, dtype and reduction op supported by HCCL on
// Atlas A2) before HCCL sees it; an HCCL failure names the call, the code,
// its name and the runtime's recent error message (check_hccl).
//
// The unique id: HCCL's HcclRootInfo is 4108 bytes and the ABI's
// cd_comm_unique_id 128, so the id carries the root info inline when its
// non-zero bytes fit (a real root info is mostly zero padding), else a key
// naming a file that holds it (same host, or CHIPDOCK_NPU_HCCL_ROOT_INFO_DIR
// on a filesystem every host shares). See collectives.cpp.
#ifndef CHIPDOCK_NPU_COLLECTIVES_H_
#define CHIPDOCK_NPU_COLLECTIVES_H_

#include <cstddef>
#include <cstdint>

#include "chipdock/device_api.h"

namespace chipdock_npu {

cd_error* api_comm_get_unique_id(cd_comm_unique_id* id) noexcept;
// Blocks until all nranks ranks joined (HcclCommInitRootInfo), or until
// HCCL_CONNECT_TIMEOUT: then the error names the ranks that never came.
cd_error* api_comm_init_rank(int32_t device, int32_t nranks, const cd_comm_unique_id* id, int32_t rank,
                             cd_comm** comm) noexcept;
cd_error* api_comm_destroy(cd_comm* comm) noexcept;
cd_error* api_comm_all_reduce(const void* send, void* recv, size_t count, cd_dtype_t dtype, cd_reduce_op_t op,
                              cd_comm* comm, cd_stream* stream) noexcept;
cd_error* api_comm_broadcast(const void* send, void* recv, size_t count, cd_dtype_t dtype, int32_t root,
                             cd_comm* comm, cd_stream* stream) noexcept;
cd_error* api_comm_reduce(const void* send, void* recv, size_t count, cd_dtype_t dtype, cd_reduce_op_t op,
                          int32_t root, cd_comm* comm, cd_stream* stream) noexcept;
cd_error* api_comm_all_gather(const void* send, void* recv, size_t send_count, cd_dtype_t dtype, cd_comm* comm,
                              cd_stream* stream) noexcept;
cd_error* api_comm_reduce_scatter(const void* send, void* recv, size_t recv_count, cd_dtype_t dtype,
                                  cd_reduce_op_t op, cd_comm* comm, cd_stream* stream) noexcept;
cd_error* api_comm_send(const void* send, size_t count, cd_dtype_t dtype, int32_t peer, cd_comm* comm,
                        cd_stream* stream) noexcept;
cd_error* api_comm_recv(void* recv, size_t count, cd_dtype_t dtype, int32_t peer, cd_comm* comm,
                        cd_stream* stream) noexcept;
// HcclGroupStart/HcclGroupEnd where the library has them (CANN 8.x); else
// point-to-point calls inside a group are batched into one
// HcclBatchSendRecv per communicator at the outermost group_end; without
// either, groups are UNIMPLEMENTED with the reason.
cd_error* api_comm_group_start() noexcept;
cd_error* api_comm_group_end() noexcept;

// Called by plugin_shutdown (after the core destroyed its communicators):
// removes root-info files this process published that no rank consumed.
void shutdown_collectives() noexcept;

}  // namespace chipdock_npu

#endif  // CHIPDOCK_NPU_COLLECTIVES_H_
