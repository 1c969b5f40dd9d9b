// The simulated HCCL's internal interface (libhccl.so, test_double/hccl/).
//
// A communicator's ranks may be threads of one process or separate
// processes: both meet in one POSIX shared-memory segment, the "control
// block", whose name HcclGetRootInfo writes into the HcclRootInfo (a real
// root info names the root's IP and port instead). Each rank maps it; its
// process-shared mutex and condition variable carry the rendezvous, the
// barriers of the collectives and the point-to-point hand-offs. Data moves
// through short-lived segments, one per rank and operation, that the
// operation's task (on the rank's stream thread) fills from device memory
// (cdsim::host_pointer) and the peers read.
//
// Timeouts are HCCL's environment variables: HCCL_CONNECT_TIMEOUT (seconds,
// the rendezvous in HcclCommInitRootInfo; default 120 as in CANN) and
// HCCL_EXEC_TIMEOUT (seconds, how long an operation on the stream waits for
// its peers; default 1836 as in CANN). Unlike CANN, the double also takes
// values below CANN's minimum (120 s), so tests can time out quickly.
#ifndef CHIPDOCK_NPU_SIM_HCCL_SIM_H_
#define CHIPDOCK_NPU_SIM_HCCL_SIM_H_

#include <hccl/hccl.h>
#include <pthread.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace cdsim::hccl {

constexpr uint32_t kMaxRanks = 64;
constexpr char kRootInfoMagic[8] = {'C', 'D', 'S', 'I', 'M', 'H', 'C', '1'};

// What HcclGetRootInfo writes at the start of HcclRootInfo::internal; the
// rest stays zero (or, with CHIPDOCK_NPU_SIM_HCCL_ROOT_INFO_FILL=random,
// random bytes: a root info whose padding is not zeroed, which the backend
// must carry through its fallback).
struct RootInfoHead {
  char magic[8];
  char name[64];  // the control block's shm name, "/cdsim-hccl-<pid>-<seq>-<hex>"
};

// A failure inside the double: an HcclResult and the message that becomes
// aclGetRecentErrMsg()'s.
struct HcclError {
  HcclResult code;
  std::string message;
};
std::string format_message(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
[[noreturn]] void fail(HcclResult code, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

// Runs `body` for an exported function: HcclError -> its code (and the
// recent error message), anything else HCCL_E_INTERNAL.
HcclResult guarded(const std::function<void()>& body) noexcept;

// The control block every rank maps. Counters only grow, so no state needs
// resetting between operations.
struct Shared {
  std::atomic<uint32_t> ready;  // 1 once the creator initialised the rest
  uint32_t nranks;
  pthread_mutex_t mutex;        // process-shared, robust
  pthread_cond_t changed;       // process-shared, CLOCK_MONOTONIC; broadcast on every change
  uint32_t joined;
  uint8_t present[kMaxRanks];   // ranks that called HcclCommInitRootInfo
  uint8_t left[kMaxRanks];      // ranks that called HcclCommDestroy
  uint64_t barrier[kMaxRanks];  // barriers each rank has reached
  uint64_t posted[kMaxRanks][kMaxRanks];    // point-to-point messages src -> dst published
  uint64_t consumed[kMaxRanks][kMaxRanks];  // ... and taken by dst
  int32_t failed_rank;          // -1, or the first rank whose operation failed
  int32_t failed_code;
  char failed_message[512];
};

// One rank's communicator (the HcclComm handle points at one).
struct Comm {
  std::string name;        // the control block's shm name
  Shared* shared = nullptr;
  uint32_t rank = 0;
  uint32_t nranks = 0;
  int32_t device = 0;          // the current device at HcclCommInitRootInfo
  int64_t exec_timeout_s = 0;  // HCCL_EXEC_TIMEOUT, read at init
  // Enqueue-time counters (the caller's thread): the ids of the operations'
  // data segments, so that every rank names them alike.
  uint64_t collectives = 0;
  std::vector<uint64_t> sent, received;  // per peer
  // Task-time state (the stream threads).
  std::atomic<uint64_t> barriers{0};
  std::atomic<int32_t> async_error{HCCL_SUCCESS};  // the first failure of a task
  ~Comm();  // unmaps the control block (tasks hold a CommPtr, so never under one)
};
using CommPtr = std::shared_ptr<Comm>;

// The live communicator behind `handle` (HCCL_E_PTR for NULL, HCCL_E_PARA
// for an unknown or destroyed one).
CommPtr live(HcclComm handle, const char* call);

// Seconds from an HCCL_* environment variable, or `fallback` when unset;
// HCCL_E_PARA naming the variable for anything but a non-negative integer.
int64_t timeout_seconds(const char* variable, int64_t fallback);

// ---- waiting on the control block ----
// Locks the control block's mutex (robust: a rank that died holding it does
// not wedge the others).
class Lock {
 public:
  explicit Lock(Shared* shared);
  ~Lock();
  Lock(const Lock&) = delete;
  Lock& operator=(const Lock&) = delete;
  // Waits for a change until `deadline_ns` (CLOCK_MONOTONIC); false on timeout.
  bool wait_until(int64_t deadline_ns);

 private:
  Shared* shared_;
};
void notify_all(Shared* shared);
int64_t now_ns();

// Marks the communicator failed (the first failure wins) so that every rank
// waiting on it gives up at once instead of at its timeout.
void mark_failed(Comm& comm, HcclResult code, const std::string& message);

// Throws the first recorded failure of another rank (HCCL_E_REMOTE) if any.
// Call with the lock held.
void check_peers(const Comm& comm, const char* call);

// ---- data segments ----
// A shared-memory segment holding one operation's bytes.
class Segment {
 public:
  // Creates `name` of `bytes` and maps it for writing (bytes may be 0).
  static Segment create(const std::string& name, size_t bytes);
  // Maps an existing `name` for reading; its size must be `bytes`.
  static Segment open(const std::string& name, size_t bytes, const char* what);
  Segment() = default;
  Segment(Segment&& other) noexcept;
  Segment& operator=(Segment&& other) noexcept;
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;
  ~Segment();
  char* data() const noexcept { return data_; }
  size_t size() const noexcept { return size_; }
  // Removes the name (the mapping stays valid until destruction).
  void unlink() noexcept;

 private:
  void release() noexcept;  // unmaps, and unlinks if still owned

  std::string name_;
  char* data_ = nullptr;
  size_t size_ = 0;
  bool owner_ = false;
};

// ---- the operations (collectives.cpp) ----
// One point-to-point transfer of a batch (a group or HcclBatchSendRecv).
struct Transfer {
  bool send;
  void* buffer;
  uint64_t bytes;
  uint32_t peer;
  uint64_t sequence;  // this pair's message number, fixed at enqueue
};

// Sizes and names.
size_t dtype_size(HcclDataType type);
const char* dtype_name(HcclDataType type);
const char* result_name(HcclResult code);

}  // namespace cdsim::hccl

#endif  // CHIPDOCK_NPU_SIM_HCCL_SIM_H_
