// Collectives on HCCL (see collectives.h).
//
// --- The unique id -------------------------------------------------------------
// HCCL's clique id is HcclRootInfo, 4108 bytes (HCCL_ROOT_INFO_BYTES); the
// ABI's cd_comm_unique_id has 128 (CD_COMM_UNIQUE_ID_BYTES, NCCL's size), and
// the ABI cannot grow it within v1 (its size is pinned). What a root info
// holds is small: CANN's HcclRootHandle is the root's IP (char[64]), port,
// NIC deployment, an identifier string ("ip_port_device_timestamp", char[128])
// and a rank id; the rest of the 4108 bytes is zero padding. So an id takes
// one of two forms (IdHeader::form):
//   inline  the root info's non-zero byte runs (offset, length, bytes), when
//           they fit: lossless, works across hosts like an NCCL id.
//   keyed   a random key, the root info's digest and the host name; the root
//           info itself is in a file named by the key in
//           CHIPDOCK_NPU_HCCL_ROOT_INFO_DIR (default /dev/shm), which ranks on
//           one host share, and ranks on several hosts share only if that
//           folder is on a filesystem they all mount. A rank that cannot find
//           the file is told which host made the id and what to set.
// The keyed file is removed by rank 0 once HcclCommInitRootInfo returned
// (every rank has read it by then), or at plugin shutdown if no rank used
// it. The durable fix is an ABI minor with a larger (or variable-size) id;
// until then the inline form is the common case on real CANN.
//
// --- AVG ------------------------------------------------------------------------
// HcclReduceOp has SUM, PROD, MAX and MIN only. CD_REDUCE_AVG is refused
// (INVALID_ARGUMENT, saying so) rather than emulated: a SUM followed by a
// division would need an aclnn kernel on the stream with a workspace outside
// any kernel context, and integer AVG has no exact result.
//
// --- Groups ---------------------------------------------------------------------
// HCCL enqueues every collective asynchronously (the host never blocks on a
// peer), so what a group must prevent is the stream-level deadlock of
// point-to-point pairs (a ring of sends). Where the library has
// HcclGroupStart/HcclGroupEnd (CANN 8.x), the outermost group_start/end call
// them (nesting is counted here, so HCCL sees one level). Without them, or
// with CHIPDOCK_NPU_HCCL_GROUPS=batch, sends and receives inside a group are
// collected per (communicator, stream) and issued at the outermost group_end
// as one HcclBatchSendRecv each; collectives inside such a group are issued
// at once. Without either function, groups are UNIMPLEMENTED with the reason.
#include "collectives.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "acl_api.h"
#include "acl_error.h"
#include "chipdock/support/dtype_info.h"
#include "chipdock/support/error.h"
#include "runtime.h"

struct cd_comm {
  int32_t device;
  int32_t rank;
  int32_t nranks;
  HcclComm hccl;
  std::mutex streams_mutex;
  std::vector<cd_stream*> streams;  // every stream an operation went to (comm_destroy synchronizes them)
};

namespace chipdock_npu {
namespace {

using chipdock::support::Error;
using chipdock::support::fail;
using chipdock::support::format;
using chipdock::support::guard;
using chipdock::support::require_non_null;

std::mutex g_comms_mutex;
std::unordered_set<cd_comm*> g_comms;

// ---- the unique id ----------------------------------------------------------------

static_assert(sizeof(HcclRootInfo) == 4108, "HcclRootInfo is HCCL_ROOT_INFO_BYTES");
constexpr char kIdMagic[4] = {'C', 'D', 'H', 'R'};
constexpr uint8_t kIdVersion = 1;
constexpr uint8_t kFormInline = 1;
constexpr uint8_t kFormKeyed = 2;

struct IdHeader {
  char magic[4];
  uint8_t version;
  uint8_t form;
  uint16_t length;  // payload bytes after the header
};
constexpr size_t kPayloadBytes = CD_COMM_UNIQUE_ID_BYTES - sizeof(IdHeader);
static_assert(sizeof(IdHeader) == 8, "IdHeader is packed");

// The keyed form's payload.
struct KeyedPayload {
  unsigned char key[16];
  uint64_t digest;  // FNV-1a of the root info: a stale or foreign file is refused
  char host[kPayloadBytes - 24];
};
static_assert(sizeof(KeyedPayload) == kPayloadBytes, "KeyedPayload fills the id");

uint64_t fnv1a(const void* data, size_t bytes) {
  uint64_t h = 1469598103934665603ull;
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

// The root info's non-zero runs as (uint16 offset, uint8 length, bytes);
// runs closer than a run header are merged. False if they do not fit.
bool encode_inline(const HcclRootInfo& root, unsigned char* out, size_t capacity, size_t* used) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(root.internal);
  const size_t n = sizeof(root.internal);
  size_t at = 0;
  size_t i = 0;
  while (i < n) {
    if (bytes[i] == 0) {
      ++i;
      continue;
    }
    size_t end = i + 1;  // one past the run; absorb short zero gaps
    for (size_t j = end; j < n && j - i < 255; ++j) {
      if (bytes[j] != 0) {
        end = j + 1;
      } else if (j - end >= 3) {
        break;
      }
    }
    const size_t length = end - i;
    if (at + 3 + length > capacity) return false;
    out[at] = static_cast<unsigned char>(i & 0xFF);
    out[at + 1] = static_cast<unsigned char>(i >> 8);
    out[at + 2] = static_cast<unsigned char>(length);
    std::memcpy(out + at + 3, bytes + i, length);
    at += 3 + length;
    i = end;
  }
  *used = at;
  return true;
}

void decode_inline(const unsigned char* in, size_t length, HcclRootInfo* root) {
  std::memset(root->internal, 0, sizeof(root->internal));
  size_t at = 0;
  while (at < length) {
    if (at + 3 > length) fail(CD_STATUS_INVALID_ARGUMENT, "id is corrupt (a truncated run)");
    const size_t offset = in[at] | (static_cast<size_t>(in[at + 1]) << 8);
    const size_t run = in[at + 2];
    if (run == 0 || at + 3 + run > length || offset + run > sizeof(root->internal)) {
      fail(CD_STATUS_INVALID_ARGUMENT, "id is corrupt (a run beyond the root info)");
    }
    std::memcpy(root->internal + offset, in + at + 3, run);
    at += 3 + run;
  }
}

std::string root_info_dir() {
  const char* dir = std::getenv("CHIPDOCK_NPU_HCCL_ROOT_INFO_DIR");
  if (dir != nullptr && *dir != '\0') return dir;
  struct stat info {};
  return stat("/dev/shm", &info) == 0 && S_ISDIR(info.st_mode) ? "/dev/shm" : "/tmp";
}

std::string key_hex(const unsigned char* key) {
  std::string hex;
  char two[3];
  for (int i = 0; i < 16; ++i) {
    std::snprintf(two, sizeof two, "%02x", key[i]);
    hex += two;
  }
  return hex;
}

std::string root_info_path(const unsigned char* key) {
  return root_info_dir() + "/chipdock-npu-hccl-" + key_hex(key) + ".rootinfo";
}

std::string host_name() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) return "unknown host";
  return host;
}

// Files this process published and no rank 0 of this process removed yet.
std::mutex g_published_mutex;
std::unordered_set<std::string> g_published;

void publish_root_info(const HcclRootInfo& root, const std::string& path) {
  const std::string temporary = path + ".tmp";
  const int fd = open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
  if (fd < 0) {
    fail(CD_STATUS_DEVICE_ERROR, "cannot create %s for the root info (%s); set CHIPDOCK_NPU_HCCL_ROOT_INFO_DIR",
         temporary.c_str(), std::strerror(errno));
  }
  const ssize_t written = write(fd, root.internal, sizeof(root.internal));
  const int err = errno;
  close(fd);
  if (written != static_cast<ssize_t>(sizeof(root.internal)) || rename(temporary.c_str(), path.c_str()) != 0) {
    unlink(temporary.c_str());
    fail(CD_STATUS_DEVICE_ERROR, "cannot write the root info to %s: %s", path.c_str(), std::strerror(err));
  }
  std::lock_guard<std::mutex> lock(g_published_mutex);
  g_published.insert(path);
}

void remove_root_info(const std::string& path) noexcept {
  unlink(path.c_str());
  std::lock_guard<std::mutex> lock(g_published_mutex);
  g_published.erase(path);
}

void read_root_info(const KeyedPayload& keyed, HcclRootInfo* root, std::string* path) {
  *path = root_info_path(keyed.key);
  const int fd = open(path->c_str(), O_RDONLY);
  if (fd < 0) {
    const std::string here = host_name();
    const std::string made_on(keyed.host, strnlen(keyed.host, sizeof keyed.host));
    fail(CD_STATUS_INVALID_ARGUMENT,
         "the id's root info %s is not there (%s). The id was made on host %s%s; HCCL's 4108-byte root info did "
         "not fit into the 128-byte id, so it travels in that file: ranks on several hosts need "
         "CHIPDOCK_NPU_HCCL_ROOT_INFO_DIR on a filesystem they share, and an id serves one communicator only",
         path->c_str(), std::strerror(errno), made_on.c_str(),
         made_on == here ? "" : format(", this is %s", here.c_str()).c_str());
  }
  const ssize_t got = read(fd, root->internal, sizeof(root->internal));
  close(fd);
  if (got != static_cast<ssize_t>(sizeof(root->internal)) || fnv1a(root->internal, sizeof(root->internal)) != keyed.digest) {
    fail(CD_STATUS_INVALID_ARGUMENT, "the root info in %s does not belong to this id", path->c_str());
  }
}

void random_key(unsigned char* key) {
  std::random_device entropy;
  for (int i = 0; i < 16; i += 4) {
    const uint32_t word = entropy();
    std::memcpy(key + i, &word, 4);
  }
}

// ---- dtypes and ops -------------------------------------------------------------

using chipdock::support::dtype_name;

// HCCL's type for the bytes of `dtype`; bool (no HCCL type) moves as uint8.
HcclDataType wire_type(cd_dtype_t dtype) {
  switch (dtype) {
    case CD_DTYPE_FLOAT32: return HCCL_DATA_TYPE_FP32;
    case CD_DTYPE_FLOAT16: return HCCL_DATA_TYPE_FP16;
    case CD_DTYPE_BFLOAT16: return HCCL_DATA_TYPE_BFP16;
    case CD_DTYPE_FLOAT64: return HCCL_DATA_TYPE_FP64;
    case CD_DTYPE_INT8: return HCCL_DATA_TYPE_INT8;
    case CD_DTYPE_INT16: return HCCL_DATA_TYPE_INT16;
    case CD_DTYPE_INT32: return HCCL_DATA_TYPE_INT32;
    case CD_DTYPE_INT64: return HCCL_DATA_TYPE_INT64;
    case CD_DTYPE_UINT8:
    case CD_DTYPE_BOOL: return HCCL_DATA_TYPE_UINT8;
    default: fail(CD_STATUS_INVALID_ARGUMENT, "unknown dtype %d", static_cast<int>(dtype));
  }
}

size_t element_size(cd_dtype_t dtype) {
  switch (dtype) {
    case CD_DTYPE_INT8:
    case CD_DTYPE_UINT8:
    case CD_DTYPE_BOOL: return 1;
    case CD_DTYPE_FLOAT16:
    case CD_DTYPE_BFLOAT16:
    case CD_DTYPE_INT16: return 2;
    case CD_DTYPE_FLOAT32:
    case CD_DTYPE_INT32: return 4;
    case CD_DTYPE_FLOAT64:
    case CD_DTYPE_INT64: return 8;
    default: fail(CD_STATUS_INVALID_ARGUMENT, "unknown dtype %d", static_cast<int>(dtype));
  }
}

size_t checked_bytes(size_t count, size_t size, size_t ranks = 1) {
  if (count > std::numeric_limits<size_t>::max() / size / ranks) {
    fail(CD_STATUS_INVALID_ARGUMENT, "count %zu overflows the address space", count);
  }
  return count * size * ranks;
}

const char* op_name(cd_reduce_op_t op) noexcept {
  switch (op) {
    case CD_REDUCE_SUM: return "SUM";
    case CD_REDUCE_PROD: return "PROD";
    case CD_REDUCE_MAX: return "MAX";
    case CD_REDUCE_MIN: return "MIN";
    case CD_REDUCE_AVG: return "AVG";
    default: return nullptr;
  }
}

// A reduction HCCL computes: the type and op, or INVALID_ARGUMENT saying why
// not (CANN's HCCL API reference, HcclAllReduce / HcclReduce /
// HcclReduceScatter on Atlas A2: int8, int16, int32, int64, float16,
// float32, bfp16; "prod" not for int16 or bfp16).
struct Reduction {
  HcclDataType type;
  HcclReduceOp op;
};

Reduction reduction(cd_dtype_t dtype, cd_reduce_op_t op) {
  if (op_name(op) == nullptr) {
    fail(CD_STATUS_INVALID_ARGUMENT, "unknown reduce op %d (SUM=0, PROD=1, MAX=2, MIN=3, AVG=4)", static_cast<int>(op));
  }
  if (op == CD_REDUCE_AVG) {
    fail(CD_STATUS_INVALID_ARGUMENT,
         "reduce op AVG: HCCL has no average (HcclReduceOp is SUM, PROD, MAX, MIN); reduce with SUM and divide");
  }
  const HcclDataType type = wire_type(dtype);
  switch (dtype) {
    case CD_DTYPE_INT8:
    case CD_DTYPE_INT16:
    case CD_DTYPE_INT32:
    case CD_DTYPE_INT64:
    case CD_DTYPE_FLOAT16:
    case CD_DTYPE_FLOAT32:
    case CD_DTYPE_BFLOAT16: break;
    default:
      fail(CD_STATUS_INVALID_ARGUMENT,
           "dtype %s has no HCCL reduction (HCCL reduces int8, int16, int32, int64, float16, float32, bfloat16)",
           dtype_name(dtype));
  }
  if (op == CD_REDUCE_PROD && (dtype == CD_DTYPE_INT16 || dtype == CD_DTYPE_BFLOAT16)) {
    fail(CD_STATUS_INVALID_ARGUMENT, "reduce op PROD: HCCL does not multiply %s", dtype_name(dtype));
  }
  static const HcclReduceOp kOps[] = {HCCL_REDUCE_SUM, HCCL_REDUCE_PROD, HCCL_REDUCE_MAX, HCCL_REDUCE_MIN};
  return {type, kOps[op]};
}

// ---- handles, ranks, streams --------------------------------------------------------

cd_comm* live_comm(cd_comm* comm) {
  require_non_null(comm, "comm");
  std::lock_guard<std::mutex> lock(g_comms_mutex);
  if (g_comms.count(comm) == 0) fail(CD_STATUS_INVALID_HANDLE, "unknown or destroyed communicator");
  return comm;
}

void check_rank(const cd_comm* comm, int32_t rank, const char* what) {
  if (rank < 0 || rank >= comm->nranks) {
    fail(CD_STATUS_INVALID_ARGUMENT, "%s %d is not a rank of this communicator (%d ranks)", what, rank, comm->nranks);
  }
}

// The live communicator and the AscendCL stream to enqueue on, with the
// communicator's device bound.
struct Call {
  cd_comm* comm;
  aclrtStream stream;
  const HcclApi& api;
};

Call prepare(cd_comm* comm, cd_stream* stream) {
  cd_comm* c = live_comm(comm);
  require_non_null(stream, "stream");
  const int32_t device = stream_device(stream);
  if (device != c->device) {
    fail(CD_STATUS_INVALID_ARGUMENT, "stream of device %d, communicator of device %d", device, c->device);
  }
  bind_device(c->device);
  aclrtStream native = native_stream(stream);
  {
    std::lock_guard<std::mutex> lock(c->streams_mutex);
    bool known = false;
    for (cd_stream* s : c->streams) known = known || s == stream;
    if (!known) c->streams.push_back(stream);
  }
  return {c, native, hccl()};
}

// ---- groups ----------------------------------------------------------------------

enum class GroupMode { kNative, kBatch, kNone };

GroupMode group_mode(const HcclApi& api) {
  const char* forced = std::getenv("CHIPDOCK_NPU_HCCL_GROUPS");
  const bool want_batch = forced != nullptr && std::strcmp(forced, "batch") == 0;
  if (!want_batch && api.HcclGroupStart != nullptr && api.HcclGroupEnd != nullptr) return GroupMode::kNative;
  if (api.HcclBatchSendRecv != nullptr) return GroupMode::kBatch;
  return GroupMode::kNone;
}

struct PendingBatch {
  HcclComm comm;
  aclrtStream stream;
  std::vector<HcclSendRecvItem> items;
};

thread_local int t_group_depth = 0;
thread_local std::vector<PendingBatch> t_pending;

// True (and the item queued) when a point-to-point call belongs to an open
// batch-mode group.
bool defer_to_batch(const Call& call, HcclSendRecvType kind, void* buffer, uint64_t count, HcclDataType type,
                    int32_t peer) {
  if (t_group_depth == 0 || group_mode(call.api) != GroupMode::kBatch) return false;
  HcclSendRecvItem item{kind, buffer, count, type, static_cast<uint32_t>(peer)};
  for (PendingBatch& batch : t_pending) {
    if (batch.comm == call.comm->hccl && batch.stream == call.stream) {
      batch.items.push_back(item);
      return true;
    }
  }
  t_pending.push_back(PendingBatch{call.comm->hccl, call.stream, {item}});
  return true;
}

}  // namespace

// ---- communicators ----------------------------------------------------------------

cd_error* api_comm_get_unique_id(cd_comm_unique_id* id) noexcept {
  return guard("comm_get_unique_id", [&] {
    require_non_null(id, "id");
    if (device_count() == 0) {
      (void)acl();  // without CANN, the reason it is missing
      fail(CD_STATUS_UNAVAILABLE, "no Ascend device is visible");
    }
    const HcclApi& api = hccl();
    HcclRootInfo root;
    check_hccl(api.HcclGetRootInfo(&root), "HcclGetRootInfo");
    unsigned char encoded[CD_COMM_UNIQUE_ID_BYTES] = {};
    IdHeader header{{kIdMagic[0], kIdMagic[1], kIdMagic[2], kIdMagic[3]}, kIdVersion, kFormInline, 0};
    size_t used = 0;
    if (encode_inline(root, encoded + sizeof(IdHeader), kPayloadBytes, &used)) {
      header.length = static_cast<uint16_t>(used);
    } else {
      KeyedPayload keyed{};
      random_key(keyed.key);
      keyed.digest = fnv1a(root.internal, sizeof(root.internal));
      std::snprintf(keyed.host, sizeof keyed.host, "%s", host_name().c_str());
      publish_root_info(root, root_info_path(keyed.key));
      header.form = kFormKeyed;
      header.length = sizeof keyed;
      std::memcpy(encoded + sizeof(IdHeader), &keyed, sizeof keyed);
    }
    std::memcpy(encoded, &header, sizeof header);
    std::memcpy(id->internal, encoded, sizeof encoded);
  });
}

cd_error* api_comm_init_rank(int32_t device, int32_t nranks, const cd_comm_unique_id* id, int32_t rank,
                             cd_comm** comm) noexcept {
  return guard("comm_init_rank", [&] {
    if (nranks < 1) fail(CD_STATUS_INVALID_ARGUMENT, "nranks %d must be at least 1", nranks);
    if (rank < 0 || rank >= nranks) fail(CD_STATUS_INVALID_ARGUMENT, "rank %d is not in [0, %d)", rank, nranks);
    require_non_null(id, "id");
    require_non_null(comm, "comm");
    IdHeader header;
    std::memcpy(&header, id->internal, sizeof header);
    if (std::memcmp(header.magic, kIdMagic, sizeof kIdMagic) != 0 || header.version != kIdVersion ||
        header.length > kPayloadBytes || (header.form != kFormInline && header.form != kFormKeyed)) {
      fail(CD_STATUS_INVALID_ARGUMENT, "id was not made by the npu backend's comm_get_unique_id");
    }
    const auto* payload = reinterpret_cast<const unsigned char*>(id->internal) + sizeof header;
    HcclRootInfo root;
    std::string keyed_path;
    if (header.form == kFormInline) {
      decode_inline(payload, header.length, &root);
    } else {
      KeyedPayload keyed;
      std::memcpy(&keyed, payload, sizeof keyed);
      read_root_info(keyed, &root, &keyed_path);
    }
    bind_device(device);  // HCCL binds the rank to the current device
    const HcclApi& api = hccl();
    HcclComm handle = nullptr;
    const HcclResult result =
        api.HcclCommInitRootInfo(static_cast<uint32_t>(nranks), &root, static_cast<uint32_t>(rank), &handle);
    // Once rank 0's init returned, every rank that will ever join has read
    // the file (each reads it before joining).
    if (rank == 0 && !keyed_path.empty()) remove_root_info(keyed_path);
    check_hccl(result, "HcclCommInitRootInfo");
    auto* c = new (std::nothrow) cd_comm{device, rank, nranks, handle, {}, {}};
    if (c == nullptr) {
      (void)api.HcclCommDestroy(handle);
      fail(CD_STATUS_OUT_OF_MEMORY, "out of host memory for the communicator");
    }
    std::lock_guard<std::mutex> lock(g_comms_mutex);
    g_comms.insert(c);
    *comm = c;
  });
}

cd_error* api_comm_destroy(cd_comm* comm) noexcept {
  return guard("comm_destroy", [&] {
    live_comm(comm);
    {
      std::lock_guard<std::mutex> lock(g_comms_mutex);
      if (g_comms.erase(comm) == 0) fail(CD_STATUS_INVALID_HANDLE, "communicator destroyed twice");
    }
    const HcclApi& api = hccl();
    bind_device(comm->device);
    // HcclCommDestroy must not pull the resources from under queued work:
    // wait for every stream this communicator used (one the core already
    // destroyed has nothing queued). The first failure is reported after
    // the communicator is gone, as NCCL's finalize reports async errors.
    std::string failure;
    for (cd_stream* stream : comm->streams) {
      try {
        aclrtStream native = native_stream(stream);
        check_acl(acl().aclrtSynchronizeStream(native), "aclrtSynchronizeStream");
      } catch (const Error& e) {
        if (e.code() != CD_STATUS_INVALID_HANDLE && failure.empty()) failure = e.what();
      }
    }
    HcclResult async = HCCL_SUCCESS;
    if (failure.empty() && api.HcclGetCommAsyncError(comm->hccl, &async) == HCCL_SUCCESS && async != HCCL_SUCCESS) {
      failure = format("an operation failed: %d %s", static_cast<int>(async), api.HcclGetErrorString(async));
    }
    const HcclComm handle = comm->hccl;
    delete comm;
    check_hccl(api.HcclCommDestroy(handle), "HcclCommDestroy");
    if (!failure.empty()) fail(CD_STATUS_DEVICE_ERROR, "the communicator is destroyed, but %s", failure.c_str());
  });
}

// ---- operations -----------------------------------------------------------------------

cd_error* api_comm_all_reduce(const void* send, void* recv, size_t count, cd_dtype_t dtype, cd_reduce_op_t op,
                              cd_comm* comm, cd_stream* stream) noexcept {
  return guard("comm_all_reduce", [&] {
    const Call call = prepare(comm, stream);
    const Reduction r = reduction(dtype, op);
    checked_bytes(count, element_size(dtype));
    check_hccl(call.api.HcclAllReduce(const_cast<void*>(send), recv, count, r.type, r.op, call.comm->hccl, call.stream),
               "HcclAllReduce");
  });
}

cd_error* api_comm_broadcast(const void* send, void* recv, size_t count, cd_dtype_t dtype, int32_t root,
                             cd_comm* comm, cd_stream* stream) noexcept {
  return guard("comm_broadcast", [&] {
    const Call call = prepare(comm, stream);
    check_rank(call.comm, root, "root");
    const HcclDataType type = wire_type(dtype);
    const size_t bytes = checked_bytes(count, element_size(dtype));
    // HcclBroadcast is in place (one buffer): the root first copies its
    // send into recv, on the same stream, so the order holds.
    if (call.comm->rank == root && send != recv && bytes > 0) {
      check_acl(acl().aclrtMemcpyAsync(recv, bytes, send, bytes, ACL_MEMCPY_DEVICE_TO_DEVICE, call.stream),
                "aclrtMemcpyAsync");
    }
    check_hccl(call.api.HcclBroadcast(recv, count, type, static_cast<uint32_t>(root), call.comm->hccl, call.stream),
               "HcclBroadcast");
  });
}

cd_error* api_comm_reduce(const void* send, void* recv, size_t count, cd_dtype_t dtype, cd_reduce_op_t op,
                          int32_t root, cd_comm* comm, cd_stream* stream) noexcept {
  return guard("comm_reduce", [&] {
    const Call call = prepare(comm, stream);
    check_rank(call.comm, root, "root");
    const Reduction r = reduction(dtype, op);
    checked_bytes(count, element_size(dtype));
    check_hccl(call.api.HcclReduce(const_cast<void*>(send), recv, count, r.type, r.op, static_cast<uint32_t>(root),
                                   call.comm->hccl, call.stream),
               "HcclReduce");
  });
}

cd_error* api_comm_all_gather(const void* send, void* recv, size_t send_count, cd_dtype_t dtype, cd_comm* comm,
                              cd_stream* stream) noexcept {
  return guard("comm_all_gather", [&] {
    const Call call = prepare(comm, stream);
    const HcclDataType type = wire_type(dtype);
    checked_bytes(send_count, element_size(dtype), static_cast<size_t>(call.comm->nranks));
    check_hccl(call.api.HcclAllGather(const_cast<void*>(send), recv, send_count, type, call.comm->hccl, call.stream),
               "HcclAllGather");
  });
}

cd_error* api_comm_reduce_scatter(const void* send, void* recv, size_t recv_count, cd_dtype_t dtype,
                                  cd_reduce_op_t op, cd_comm* comm, cd_stream* stream) noexcept {
  return guard("comm_reduce_scatter", [&] {
    const Call call = prepare(comm, stream);
    const Reduction r = reduction(dtype, op);
    checked_bytes(recv_count, element_size(dtype), static_cast<size_t>(call.comm->nranks));
    check_hccl(call.api.HcclReduceScatter(const_cast<void*>(send), recv, recv_count, r.type, r.op, call.comm->hccl,
                                          call.stream),
               "HcclReduceScatter");
  });
}

cd_error* api_comm_send(const void* send, size_t count, cd_dtype_t dtype, int32_t peer, cd_comm* comm,
                        cd_stream* stream) noexcept {
  return guard("comm_send", [&] {
    const Call call = prepare(comm, stream);
    check_rank(call.comm, peer, "peer");
    const HcclDataType type = wire_type(dtype);
    checked_bytes(count, element_size(dtype));
    if (defer_to_batch(call, HCCL_SEND, const_cast<void*>(send), count, type, peer)) return;
    check_hccl(call.api.HcclSend(const_cast<void*>(send), count, type, static_cast<uint32_t>(peer), call.comm->hccl,
                                 call.stream),
               "HcclSend");
  });
}

cd_error* api_comm_recv(void* recv, size_t count, cd_dtype_t dtype, int32_t peer, cd_comm* comm,
                        cd_stream* stream) noexcept {
  return guard("comm_recv", [&] {
    const Call call = prepare(comm, stream);
    check_rank(call.comm, peer, "peer");
    const HcclDataType type = wire_type(dtype);
    checked_bytes(count, element_size(dtype));
    if (defer_to_batch(call, HCCL_RECV, recv, count, type, peer)) return;
    check_hccl(call.api.HcclRecv(recv, count, type, static_cast<uint32_t>(peer), call.comm->hccl, call.stream),
               "HcclRecv");
  });
}

cd_error* api_comm_group_start() noexcept {
  return guard("comm_group_start", [&] {
    const HcclApi& api = hccl();
    const GroupMode mode = group_mode(api);
    if (mode == GroupMode::kNone) {
      fail(CD_STATUS_UNIMPLEMENTED,
           "%s has neither HcclGroupStart/HcclGroupEnd nor HcclBatchSendRecv: groups need a newer CANN",
           api.library_path.c_str());
    }
    if (t_group_depth == 0 && mode == GroupMode::kNative) check_hccl(api.HcclGroupStart(), "HcclGroupStart");
    ++t_group_depth;
  });
}

cd_error* api_comm_group_end() noexcept {
  return guard("comm_group_end", [&] {
    const HcclApi& api = hccl();
    if (t_group_depth == 0) fail(CD_STATUS_INVALID_ARGUMENT, "no group was started on this thread");
    if (--t_group_depth > 0) return;
    if (group_mode(api) == GroupMode::kNative) {
      check_hccl(api.HcclGroupEnd(), "HcclGroupEnd");
      return;
    }
    // Every batch is issued, even after one failed; the first failure is reported.
    std::vector<PendingBatch> batches = std::move(t_pending);
    t_pending.clear();
    std::string failure;
    cd_status_t status = CD_STATUS_OK;
    for (PendingBatch& batch : batches) {
      try {
        check_hccl(api.HcclBatchSendRecv(batch.items.data(), static_cast<uint32_t>(batch.items.size()), batch.comm,
                                         batch.stream),
                   "HcclBatchSendRecv");
      } catch (const Error& e) {
        if (failure.empty()) {
          failure = e.what();
          status = e.code();
        }
      }
    }
    if (!failure.empty()) fail(status, "%s", failure.c_str());
  });
}

void shutdown_collectives() noexcept {
  std::lock_guard<std::mutex> lock(g_published_mutex);
  for (const std::string& path : g_published) unlink(path.c_str());
  g_published.clear();
}

}  // namespace chipdock_npu
