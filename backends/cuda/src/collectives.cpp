// Collectives on NCCL (see collectives.h).
#include "collectives.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_set>

#include "chipdock/support/dtype_info.h"
#include "cuda_check.h"
#include "error.h"
#include "nccl_api.h"
#include "resources.h"

namespace chipdock_cuda {
namespace {

static_assert(sizeof(ncclUniqueId) == sizeof(cd_comm_unique_id), "cd_comm_unique_id must carry an ncclUniqueId");

std::mutex g_comms_mutex;
std::unordered_set<cd_comm*> g_comms;

// --- NCCL results -------------------------------------------------------------------

cd_status_t status_of(ncclResult_t r) noexcept {
  switch (r) {
    case ncclSuccess: return CD_STATUS_OK;
    case ncclInvalidArgument:
    case ncclInvalidUsage: return CD_STATUS_INVALID_ARGUMENT;
    case ncclInProgress: return CD_STATUS_NOT_READY;
    case ncclInternalError: return CD_STATUS_INTERNAL;
    default: return CD_STATUS_DEVICE_ERROR;  // CUDA, system (sockets, shm) and remote-rank failures
  }
}

// "<what>: <NCCL's text for r>", with NCCL's last error message when it has
// one (the detail ncclGetErrorString lacks: which argument, which peer).
// Only for a result NCCL returned, so its table is loaded.
std::string nccl_message(ncclResult_t r, const char* what, ncclComm_t comm) {
  const char* last = nccl_api().ncclGetLastError(comm);
  const std::string detail = last != nullptr && *last != '\0' ? format(" (NCCL: %s)", last) : std::string();
  return format("%s: %s%s", what, nccl_api().ncclGetErrorString(r), detail.c_str());
}

void nccl_check(ncclResult_t r, const char* what, ncclComm_t comm = nullptr) {
  if (r != ncclSuccess) fail(status_of(r), "%s", nccl_message(r, what, comm).c_str());
}

// --- dtypes and ops -----------------------------------------------------------------

using chipdock::support::dtype_name;

size_t dtype_size(cd_dtype_t dtype) {
  const size_t bytes = chipdock::support::dtype_size(dtype);
  if (bytes == 0) fail(CD_STATUS_INVALID_ARGUMENT, "unknown dtype %d", static_cast<int>(dtype));
  return bytes;
}

// NCCL's type for `dtype`; false where NCCL has none (int16, bool).
bool nccl_type(cd_dtype_t dtype, ncclDataType_t* out) noexcept {
  switch (dtype) {
    case CD_DTYPE_FLOAT32: *out = ncclFloat32; return true;
    case CD_DTYPE_FLOAT16: *out = ncclFloat16; return true;
    case CD_DTYPE_BFLOAT16: *out = ncclBfloat16; return true;
    case CD_DTYPE_FLOAT64: *out = ncclFloat64; return true;
    case CD_DTYPE_INT8: *out = ncclInt8; return true;
    case CD_DTYPE_INT32: *out = ncclInt32; return true;
    case CD_DTYPE_INT64: *out = ncclInt64; return true;
    case CD_DTYPE_UINT8: *out = ncclUint8; return true;
    default: return false;
  }
}

// What NCCL is asked to move: a type, a count in that type, and the bytes
// one rank's buffer of `count` chipdock elements spans.
struct Wire {
  ncclDataType_t type;
  size_t count;
  size_t bytes;
};

size_t checked_bytes(size_t count, size_t size, size_t ranks = 1) {
  const size_t max = std::numeric_limits<size_t>::max();
  if (count > max / size / ranks) fail(CD_STATUS_INVALID_ARGUMENT, "count %zu overflows the address space", count);
  return count * size * ranks;
}

// For reductions: the dtype must be one NCCL computes in.
Wire reduce_wire(cd_dtype_t dtype, size_t count) {
  Wire w{ncclFloat32, count, checked_bytes(count, dtype_size(dtype))};
  if (!nccl_type(dtype, &w.type)) {
    fail(CD_STATUS_INVALID_ARGUMENT,
         "dtype %s has no NCCL reduction (NCCL reduces float32, float16, bfloat16, float64, int8, int32, int64, "
         "uint8)",
         dtype_name(dtype));
  }
  return w;
}

// For data movement, which never looks at values: a dtype NCCL lacks moves
// as its bytes (uint8, count * itemsize), bit for bit.
Wire move_wire(cd_dtype_t dtype, size_t count) {
  const size_t bytes = checked_bytes(count, dtype_size(dtype));
  Wire w{ncclUint8, bytes, bytes};
  if (nccl_type(dtype, &w.type)) w.count = count;
  return w;
}

ncclRedOp_t nccl_op(cd_reduce_op_t op) {
  switch (op) {
    case CD_REDUCE_SUM: return ncclSum;
    case CD_REDUCE_PROD: return ncclProd;
    case CD_REDUCE_MAX: return ncclMax;
    case CD_REDUCE_MIN: return ncclMin;
    case CD_REDUCE_AVG: return ncclAvg;
    default:
      fail(CD_STATUS_INVALID_ARGUMENT, "unknown reduce op %d (SUM=0, PROD=1, MAX=2, MIN=3, AVG=4)",
           static_cast<int>(op));
  }
}

// --- handles, ranks, streams ----------------------------------------------------------

cd_comm* live_comm(cd_comm* comm) {
  require_non_null(comm, "comm");
  std::lock_guard<std::mutex> lock(g_comms_mutex);
  if (g_comms.count(comm) == 0) fail(CD_STATUS_INVALID_HANDLE, "unknown or destroyed communicator");
  return comm;
}

void check_rank(const cd_comm* comm, int32_t rank, const char* what) {
  if (rank < 0 || rank >= comm->nranks) {
    fail(CD_STATUS_INVALID_ARGUMENT, "%s %d is not a rank of this communicator (%d ranks)", what, rank,
         comm->nranks);
  }
}

// The live communicator and the CUDA stream to enqueue on, with the
// communicator's device made current.
struct Call {
  cd_comm* comm;
  cudaStream_t stream;
};

Call prepare(cd_comm* comm, cd_stream* stream) {
  cd_comm* c = live_comm(comm);
  cd_stream* s = live_stream(stream);
  if (s->device != c->device) {
    fail(CD_STATUS_INVALID_ARGUMENT, "stream of device %d, communicator of device %d", s->device, c->device);
  }
  check(cudaSetDevice(c->device), "cudaSetDevice");
  return {c, s->stream};
}

}  // namespace

// --- communicators ------------------------------------------------------------------------

void comm_get_unique_id(cd_comm_unique_id* id) {
  require_non_null(id, "id");
  device_count();  // a host without a usable GPU gets the reason, and NCCL stays unopened
  ncclUniqueId nccl_id;
  nccl_check(nccl_api().ncclGetUniqueId(&nccl_id), "ncclGetUniqueId");
  std::memcpy(id->internal, &nccl_id, sizeof(nccl_id));
}

cd_comm* comm_init_rank(int32_t device, int32_t nranks, const cd_comm_unique_id* id, int32_t rank) {
  require_non_null(id, "id");
  if (nranks < 1) fail(CD_STATUS_INVALID_ARGUMENT, "nranks %d must be at least 1", nranks);
  if (rank < 0 || rank >= nranks) fail(CD_STATUS_INVALID_ARGUMENT, "rank %d is not in [0, %d)", rank, nranks);
  use_device(device);  // NCCL binds the rank to the current device
  ncclUniqueId nccl_id;
  std::memcpy(&nccl_id, id->internal, sizeof(nccl_id));
  ncclComm_t nccl = nullptr;
  nccl_check(nccl_api().ncclCommInitRank(&nccl, nranks, nccl_id, rank), "ncclCommInitRank");
  auto* comm = new (std::nothrow) cd_comm{device, rank, nranks, nccl};
  if (comm == nullptr) {
    (void)nccl_api().ncclCommAbort(nccl);
    fail(CD_STATUS_OUT_OF_MEMORY, "out of host memory for the communicator");
  }
  std::lock_guard<std::mutex> lock(g_comms_mutex);
  g_comms.insert(comm);
  return comm;
}

void comm_destroy(cd_comm* comm) {
  live_comm(comm);
  {
    std::lock_guard<std::mutex> lock(g_comms_mutex);
    if (g_comms.erase(comm) == 0) fail(CD_STATUS_INVALID_HANDLE, "communicator destroyed twice");
  }
  const ncclComm_t nccl = comm->nccl;
  const int32_t device = comm->device;
  delete comm;
  check(cudaSetDevice(device), "cudaSetDevice");
  // Finalize flushes the enqueued operations; a blocking communicator
  // returns once it is quiescent, a non-blocking one reports ncclInProgress
  // until then.
  ncclResult_t r = nccl_api().ncclCommFinalize(nccl);
  ncclResult_t state = r;
  while (state == ncclInProgress) {
    std::this_thread::yield();
    r = nccl_api().ncclCommGetAsyncError(nccl, &state);
    if (r != ncclSuccess) state = r;
  }
  if (state != ncclSuccess) {
    // The handle is gone either way: free what NCCL holds, then report.
    const std::string message = nccl_message(state, "ncclCommFinalize", nccl);
    (void)nccl_api().ncclCommAbort(nccl);
    fail(status_of(state), "%s", message.c_str());
  }
  nccl_check(nccl_api().ncclCommDestroy(nccl), "ncclCommDestroy");
}

// --- operations -----------------------------------------------------------------------------

void comm_all_reduce(const void* send, void* recv, size_t count, cd_dtype_t dtype, cd_reduce_op_t op,
                     cd_comm* comm, cd_stream* stream) {
  const Call call = prepare(comm, stream);
  const Wire w = reduce_wire(dtype, count);
  const ncclRedOp_t nop = nccl_op(op);
  check_range(call.comm->device, send, w.bytes, "send");
  check_range(call.comm->device, recv, w.bytes, "recv");
  nccl_check(nccl_api().ncclAllReduce(send, recv, w.count, w.type, nop, call.comm->nccl, call.stream),
             "ncclAllReduce", call.comm->nccl);
}

void comm_broadcast(const void* send, void* recv, size_t count, cd_dtype_t dtype, int32_t root, cd_comm* comm,
                    cd_stream* stream) {
  const Call call = prepare(comm, stream);
  check_rank(call.comm, root, "root");
  const Wire w = move_wire(dtype, count);
  // send is read on the root only (the ABI lets other ranks pass anything).
  if (call.comm->rank == root) check_range(call.comm->device, send, w.bytes, "send");
  check_range(call.comm->device, recv, w.bytes, "recv");
  nccl_check(nccl_api().ncclBroadcast(send, recv, w.count, w.type, root, call.comm->nccl, call.stream),
             "ncclBroadcast", call.comm->nccl);
}

void comm_reduce(const void* send, void* recv, size_t count, cd_dtype_t dtype, cd_reduce_op_t op, int32_t root,
                 cd_comm* comm, cd_stream* stream) {
  const Call call = prepare(comm, stream);
  check_rank(call.comm, root, "root");
  const Wire w = reduce_wire(dtype, count);
  const ncclRedOp_t nop = nccl_op(op);
  check_range(call.comm->device, send, w.bytes, "send");
  // recv is written on the root only.
  if (call.comm->rank == root) check_range(call.comm->device, recv, w.bytes, "recv");
  nccl_check(nccl_api().ncclReduce(send, recv, w.count, w.type, nop, root, call.comm->nccl, call.stream),
             "ncclReduce", call.comm->nccl);
}

void comm_all_gather(const void* send, void* recv, size_t send_count, cd_dtype_t dtype, cd_comm* comm,
                     cd_stream* stream) {
  const Call call = prepare(comm, stream);
  const Wire w = move_wire(dtype, send_count);
  const size_t recv_bytes = checked_bytes(w.bytes, 1, static_cast<size_t>(call.comm->nranks));
  check_range(call.comm->device, send, w.bytes, "send");
  check_range(call.comm->device, recv, recv_bytes, "recv");
  nccl_check(nccl_api().ncclAllGather(send, recv, w.count, w.type, call.comm->nccl, call.stream),
             "ncclAllGather", call.comm->nccl);
}

void comm_reduce_scatter(const void* send, void* recv, size_t recv_count, cd_dtype_t dtype, cd_reduce_op_t op,
                         cd_comm* comm, cd_stream* stream) {
  const Call call = prepare(comm, stream);
  const Wire w = reduce_wire(dtype, recv_count);
  const ncclRedOp_t nop = nccl_op(op);
  const size_t send_bytes = checked_bytes(w.bytes, 1, static_cast<size_t>(call.comm->nranks));
  check_range(call.comm->device, send, send_bytes, "send");
  check_range(call.comm->device, recv, w.bytes, "recv");
  nccl_check(nccl_api().ncclReduceScatter(send, recv, w.count, w.type, nop, call.comm->nccl, call.stream),
             "ncclReduceScatter", call.comm->nccl);
}

void comm_send(const void* send, size_t count, cd_dtype_t dtype, int32_t peer, cd_comm* comm, cd_stream* stream) {
  const Call call = prepare(comm, stream);
  check_rank(call.comm, peer, "peer");
  const Wire w = move_wire(dtype, count);
  check_range(call.comm->device, send, w.bytes, "send");
  nccl_check(nccl_api().ncclSend(send, w.count, w.type, peer, call.comm->nccl, call.stream), "ncclSend",
             call.comm->nccl);
}

void comm_recv(void* recv, size_t count, cd_dtype_t dtype, int32_t peer, cd_comm* comm, cd_stream* stream) {
  const Call call = prepare(comm, stream);
  check_rank(call.comm, peer, "peer");
  const Wire w = move_wire(dtype, count);
  check_range(call.comm->device, recv, w.bytes, "recv");
  nccl_check(nccl_api().ncclRecv(recv, w.count, w.type, peer, call.comm->nccl, call.stream), "ncclRecv",
             call.comm->nccl);
}

// NCCL's groups are per thread and nest, as the ABI's do. Like every comm
// slot they need a device first: that, not NCCL's load error, is the reason
// a host without a usable GPU gets, and it never opens NCCL.
void comm_group_start() {
  device_count();
  nccl_check(nccl_api().ncclGroupStart(), "ncclGroupStart");
}
void comm_group_end() {
  device_count();
  nccl_check(nccl_api().ncclGroupEnd(), "ncclGroupEnd");
}

}  // namespace chipdock_cuda
