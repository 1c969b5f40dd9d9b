// The simulated HCCL's communicators: root info, the rendezvous of
// HcclCommInitRootInfo in a POSIX shared-memory control block, destroy, rank
// queries, errors (see hccl_sim.h).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <random>
#include <thread>
#include <unordered_map>
#include <utility>

#include "hccl_sim.h"
#include "sim.h"

namespace cdsim::hccl {
namespace {

std::mutex g_comms_mutex;
std::unordered_map<const Comm*, CommPtr> g_comms;
std::atomic<uint64_t> g_root_infos{0};

// "2, 3": the ranks whose flag is not set.
std::string missing_ranks(const uint8_t* flags, uint32_t nranks) {
  std::string list;
  for (uint32_t r = 0; r < nranks; ++r) {
    if (flags[r]) continue;
    if (!list.empty()) list += ", ";
    list += std::to_string(r);
  }
  return list;
}

// A fresh, unguessable control-block name.
std::string new_name() {
  std::random_device entropy;
  const uint64_t nonce = (static_cast<uint64_t>(entropy()) << 32) ^ entropy();
  char name[64];
  std::snprintf(name, sizeof name, "/cdsim-hccl-%d-%llu-%016llx", static_cast<int>(getpid()),
                static_cast<unsigned long long>(g_root_infos.fetch_add(1)), static_cast<unsigned long long>(nonce));
  return name;
}

void init_shared(Shared* shared, uint32_t nranks) {
  std::memset(static_cast<void*>(shared), 0, sizeof(Shared));
  shared->nranks = nranks;
  shared->failed_rank = -1;
  pthread_mutexattr_t mutex_attr;
  pthread_mutexattr_init(&mutex_attr);
  pthread_mutexattr_setpshared(&mutex_attr, PTHREAD_PROCESS_SHARED);
  pthread_mutexattr_setrobust(&mutex_attr, PTHREAD_MUTEX_ROBUST);
  pthread_mutex_init(&shared->mutex, &mutex_attr);
  pthread_mutexattr_destroy(&mutex_attr);
  pthread_condattr_t cond_attr;
  pthread_condattr_init(&cond_attr);
  pthread_condattr_setpshared(&cond_attr, PTHREAD_PROCESS_SHARED);
  pthread_condattr_setclock(&cond_attr, CLOCK_MONOTONIC);
  pthread_cond_init(&shared->changed, &cond_attr);
  pthread_condattr_destroy(&cond_attr);
  shared->ready.store(1, std::memory_order_release);
}

// Maps the control block `name`, creating it if this rank comes first. The
// creator sizes and initialises it; the others wait (until `deadline_ns`)
// for that to be done.
Shared* attach(const std::string& name, uint32_t nranks, int64_t deadline_ns) {
  for (;;) {
    int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    const bool creator = fd >= 0;
    if (!creator) {
      if (errno != EEXIST) fail(HCCL_E_SYSCALL, "shm_open(%s) failed: %s", name.c_str(), std::strerror(errno));
      fd = shm_open(name.c_str(), O_RDWR, 0);
      if (fd < 0 && errno == ENOENT) continue;  // unlinked in between (a timed-out try): start afresh
      if (fd < 0) fail(HCCL_E_SYSCALL, "shm_open(%s) failed: %s", name.c_str(), std::strerror(errno));
    } else if (ftruncate(fd, sizeof(Shared)) != 0) {
      const int err = errno;
      close(fd);
      shm_unlink(name.c_str());
      fail(HCCL_E_SYSCALL, "ftruncate(%s) failed: %s", name.c_str(), std::strerror(err));
    }
    // A joiner may see the creator's segment before it has its size.
    struct stat info {};
    while (!creator && fstat(fd, &info) == 0 && static_cast<size_t>(info.st_size) < sizeof(Shared)) {
      if (now_ns() > deadline_ns) {
        close(fd);
        fail(HCCL_E_TIMEOUT, "the control block %s was never initialised", name.c_str());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    void* map = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    const int err = errno;
    close(fd);
    if (map == MAP_FAILED) fail(HCCL_E_SYSCALL, "mmap(%s) failed: %s", name.c_str(), std::strerror(err));
    auto* shared = static_cast<Shared*>(map);
    if (creator) init_shared(shared, nranks);
    while (shared->ready.load(std::memory_order_acquire) == 0) {
      if (now_ns() > deadline_ns) {
        munmap(map, sizeof(Shared));
        fail(HCCL_E_TIMEOUT, "the control block %s was never initialised", name.c_str());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return shared;
  }
}

// Registers this rank and waits until every rank has: HCCL_E_TIMEOUT naming
// the ranks that never came once HCCL_CONNECT_TIMEOUT has passed.
void join(Comm& comm, int64_t timeout_s, int64_t deadline_ns) {
  Shared* shared = comm.shared;
  bool last = false;
  {
    Lock lock(shared);
    if (shared->nranks != comm.nranks) {
      fail(HCCL_E_PARA, "rank %u was given nRanks %u but the communicator %s has %u ranks", comm.rank, comm.nranks,
           comm.name.c_str(), shared->nranks);
    }
    if (shared->present[comm.rank]) {
      fail(HCCL_E_PARA, "rank %u joined the communicator %s twice", comm.rank, comm.name.c_str());
    }
    if (shared->failed_rank >= 0) {
      fail(static_cast<HcclResult>(shared->failed_code), "the communicator %s failed before rank %u joined: %s",
           comm.name.c_str(), comm.rank, shared->failed_message);
    }
    shared->present[comm.rank] = 1;
    last = ++shared->joined == shared->nranks;
    notify_all(shared);
    while (shared->joined < shared->nranks && shared->failed_rank < 0) {
      if (!lock.wait_until(deadline_ns)) {
        const std::string message = format_message(
            "rank(s) %s of %u did not join the communicator within %lld s (HCCL_CONNECT_TIMEOUT)",
            missing_ranks(shared->present, shared->nranks).c_str(), shared->nranks,
            static_cast<long long>(timeout_s));
        shared->failed_rank = static_cast<int32_t>(comm.rank);
        shared->failed_code = HCCL_E_TIMEOUT;
        std::snprintf(shared->failed_message, sizeof shared->failed_message, "%s", message.c_str());
        notify_all(shared);
        shm_unlink(comm.name.c_str());  // later arrivals start a new block and time out alone
        fail(HCCL_E_TIMEOUT, "%s", message.c_str());
      }
    }
    if (shared->failed_rank >= 0) {
      shm_unlink(comm.name.c_str());
      fail(static_cast<HcclResult>(shared->failed_code), "%s", shared->failed_message);
    }
  }
  // Every rank has mapped the block: its name is no longer needed.
  if (last) shm_unlink(comm.name.c_str());
}

}  // namespace

std::string format_message(const char* fmt, ...) {
  char buffer[1024];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(buffer, sizeof buffer, fmt, args);
  va_end(args);
  return buffer;
}

void fail(HcclResult code, const char* fmt, ...) {
  char buffer[1024];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(buffer, sizeof buffer, fmt, args);
  va_end(args);
  throw HcclError{code, buffer};
}

HcclResult guarded(const std::function<void()>& body) noexcept {
  try {
    body();
    return HCCL_SUCCESS;
  } catch (const HcclError& e) {
    cdsim::set_recent_error("simulated HCCL: " + e.message);
    return e.code;
  } catch (const cdsim::SimError& e) {
    cdsim::set_recent_error(e.message);
    return HCCL_E_RUNTIME;
  } catch (const std::bad_alloc&) {
    cdsim::set_recent_error("simulated HCCL: host memory exhausted");
    return HCCL_E_MEMORY;
  } catch (const std::exception& e) {
    cdsim::set_recent_error(std::string("simulated HCCL: internal error: ") + e.what());
    return HCCL_E_INTERNAL;
  } catch (...) {
    cdsim::set_recent_error("simulated HCCL: internal error");
    return HCCL_E_INTERNAL;
  }
}

int64_t timeout_seconds(const char* variable, int64_t fallback) {
  const char* text = std::getenv(variable);
  if (text == nullptr || *text == '\0') return fallback;
  char* end = nullptr;
  errno = 0;
  const long long value = std::strtoll(text, &end, 10);
  if (errno != 0 || *end != '\0' || value < 0 || value > 86400 * 365) {
    fail(HCCL_E_PARA, "%s=%s is not a number of seconds", variable, text);
  }
  return value;
}

int64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

Lock::Lock(Shared* shared) : shared_(shared) {
  if (pthread_mutex_lock(&shared_->mutex) == EOWNERDEAD) {
    // A rank died inside an update; the counters are monotonic, so the
    // state is still meaningful: carry on.
    pthread_mutex_consistent(&shared_->mutex);
  }
}

Lock::~Lock() { pthread_mutex_unlock(&shared_->mutex); }

bool Lock::wait_until(int64_t deadline_ns) {
  if (now_ns() >= deadline_ns) return false;
  timespec ts{};
  ts.tv_sec = deadline_ns / 1000000000;
  ts.tv_nsec = deadline_ns % 1000000000;
  const int rc = pthread_cond_timedwait(&shared_->changed, &shared_->mutex, &ts);
  if (rc == EOWNERDEAD) pthread_mutex_consistent(&shared_->mutex);
  return rc != ETIMEDOUT || now_ns() < deadline_ns;
}

void notify_all(Shared* shared) { pthread_cond_broadcast(&shared->changed); }

void mark_failed(Comm& comm, HcclResult code, const std::string& message) {
  int32_t expected = HCCL_SUCCESS;
  comm.async_error.compare_exchange_strong(expected, code);
  Lock lock(comm.shared);
  if (comm.shared->failed_rank < 0) {
    comm.shared->failed_rank = static_cast<int32_t>(comm.rank);
    comm.shared->failed_code = code;
    std::snprintf(comm.shared->failed_message, sizeof comm.shared->failed_message, "%s", message.c_str());
  }
  notify_all(comm.shared);
}

void check_peers(const Comm& comm, const char* call) {
  const Shared* shared = comm.shared;
  if (shared->failed_rank >= 0 && shared->failed_rank != static_cast<int32_t>(comm.rank)) {
    fail(HCCL_E_REMOTE, "%s on rank %u: rank %d failed: %s", call, comm.rank, shared->failed_rank,
         shared->failed_message);
  }
  if (shared->failed_rank >= 0) fail(static_cast<HcclResult>(shared->failed_code), "%s", shared->failed_message);
}

Comm::~Comm() {
  if (shared != nullptr) munmap(shared, sizeof(Shared));
}

CommPtr live(HcclComm handle, const char* call) {
  if (handle == nullptr) fail(HCCL_E_PTR, "%s: comm is NULL", call);
  std::lock_guard<std::mutex> lock(g_comms_mutex);
  auto it = g_comms.find(static_cast<const Comm*>(handle));
  if (it == g_comms.end()) fail(HCCL_E_PARA, "%s: comm %p is not a live communicator", call, handle);
  return it->second;
}

// ---- segments ----

Segment Segment::create(const std::string& name, size_t bytes) {
  Segment s;
  s.name_ = name;
  s.size_ = bytes;
  s.owner_ = true;
  const int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0) fail(HCCL_E_SYSCALL, "shm_open(%s) failed: %s", name.c_str(), std::strerror(errno));
  if (bytes > 0) {
    if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
      const int err = errno;
      close(fd);
      shm_unlink(name.c_str());
      fail(HCCL_E_MEMORY, "ftruncate(%s, %zu) failed: %s", name.c_str(), bytes, std::strerror(err));
    }
    void* map = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    const int err = errno;
    if (map == MAP_FAILED) {
      close(fd);
      shm_unlink(name.c_str());
      fail(HCCL_E_MEMORY, "mmap(%s, %zu) failed: %s", name.c_str(), bytes, std::strerror(err));
    }
    s.data_ = static_cast<char*>(map);
  }
  close(fd);
  return s;
}

Segment Segment::open(const std::string& name, size_t bytes, const char* what) {
  Segment s;
  s.name_ = name;
  const int fd = shm_open(name.c_str(), O_RDONLY, 0);
  if (fd < 0) fail(HCCL_E_INTERNAL, "%s: shm_open(%s) failed: %s", what, name.c_str(), std::strerror(errno));
  struct stat info {};
  fstat(fd, &info);
  if (static_cast<size_t>(info.st_size) != bytes) {
    close(fd);
    fail(HCCL_E_PARA, "%s holds %lld bytes, %zu expected (count or dtype differ between ranks)", what,
         static_cast<long long>(info.st_size), bytes);
  }
  s.size_ = bytes;
  if (bytes > 0) {
    void* map = mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
    const int err = errno;
    if (map == MAP_FAILED) {
      close(fd);
      fail(HCCL_E_MEMORY, "%s: mmap(%s) failed: %s", what, name.c_str(), std::strerror(err));
    }
    s.data_ = static_cast<char*>(map);
  }
  close(fd);
  return s;
}

Segment::Segment(Segment&& other) noexcept { *this = std::move(other); }

Segment& Segment::operator=(Segment&& other) noexcept {
  if (this != &other) {
    release();
    name_ = std::move(other.name_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    owner_ = std::exchange(other.owner_, false);
  }
  return *this;
}

Segment::~Segment() { release(); }

void Segment::release() noexcept {
  if (data_ != nullptr) munmap(data_, size_);
  data_ = nullptr;
  unlink();
}

void Segment::unlink() noexcept {
  if (owner_) shm_unlink(name_.c_str());
  owner_ = false;
}

// ---- names ----

const char* result_name(HcclResult code) {
  switch (code) {
    case HCCL_SUCCESS: return "HCCL_SUCCESS";
    case HCCL_E_PARA: return "HCCL_E_PARA";
    case HCCL_E_PTR: return "HCCL_E_PTR";
    case HCCL_E_MEMORY: return "HCCL_E_MEMORY";
    case HCCL_E_INTERNAL: return "HCCL_E_INTERNAL";
    case HCCL_E_NOT_SUPPORT: return "HCCL_E_NOT_SUPPORT";
    case HCCL_E_NOT_FOUND: return "HCCL_E_NOT_FOUND";
    case HCCL_E_UNAVAIL: return "HCCL_E_UNAVAIL";
    case HCCL_E_SYSCALL: return "HCCL_E_SYSCALL";
    case HCCL_E_TIMEOUT: return "HCCL_E_TIMEOUT";
    case HCCL_E_OPEN_FILE_FAILURE: return "HCCL_E_OPEN_FILE_FAILURE";
    case HCCL_E_TCP_CONNECT: return "HCCL_E_TCP_CONNECT";
    case HCCL_E_ROCE_CONNECT: return "HCCL_E_ROCE_CONNECT";
    case HCCL_E_TCP_TRANSFER: return "HCCL_E_TCP_TRANSFER";
    case HCCL_E_ROCE_TRANSFER: return "HCCL_E_ROCE_TRANSFER";
    case HCCL_E_RUNTIME: return "HCCL_E_RUNTIME";
    case HCCL_E_DRV: return "HCCL_E_DRV";
    case HCCL_E_PROFILING: return "HCCL_E_PROFILING";
    case HCCL_E_CCE: return "HCCL_E_CCE";
    case HCCL_E_NETWORK: return "HCCL_E_NETWORK";
    case HCCL_E_AGAIN: return "HCCL_E_AGAIN";
    case HCCL_E_REMOTE: return "HCCL_E_REMOTE";
    case HCCL_E_SUSPENDING: return "HCCL_E_SUSPENDING";
    case HCCL_E_OPRETRY_FAIL: return "HCCL_E_OPRETRY_FAIL";
    case HCCL_E_OOM: return "HCCL_E_OOM";
    default: return "unknown HcclResult";
  }
}

}  // namespace cdsim::hccl

using cdsim::hccl::Comm;
using cdsim::hccl::CommPtr;
using cdsim::hccl::fail;
using cdsim::hccl::guarded;

extern "C" {

HcclResult HcclGetRootInfo(HcclRootInfo* rootInfo) {
  return guarded([&] {
    if (rootInfo == nullptr) fail(HCCL_E_PTR, "HcclGetRootInfo: rootInfo is NULL");
    std::memset(rootInfo->internal, 0, sizeof rootInfo->internal);
    if (cdsim::setting("HCCL_ROOT_INFO_FILL") == "random") {
      std::random_device entropy;
      for (char& byte : rootInfo->internal) byte = static_cast<char>(entropy());
    }
    cdsim::hccl::RootInfoHead head{};
    std::memcpy(head.magic, cdsim::hccl::kRootInfoMagic, sizeof head.magic);
    std::snprintf(head.name, sizeof head.name, "%s", cdsim::hccl::new_name().c_str());
    std::memcpy(rootInfo->internal, &head, sizeof head);
  });
}

HcclResult HcclCommInitRootInfo(uint32_t nRanks, const HcclRootInfo* rootInfo, uint32_t rank, HcclComm* comm) {
  return guarded([&] {
    if (rootInfo == nullptr) fail(HCCL_E_PTR, "HcclCommInitRootInfo: rootInfo is NULL");
    if (comm == nullptr) fail(HCCL_E_PTR, "HcclCommInitRootInfo: comm is NULL");
    cdsim::hccl::RootInfoHead head{};
    std::memcpy(&head, rootInfo->internal, sizeof head);
    if (std::memcmp(head.magic, cdsim::hccl::kRootInfoMagic, sizeof head.magic) != 0 ||
        std::memchr(head.name, '\0', sizeof head.name) == nullptr) {
      fail(HCCL_E_PARA, "HcclCommInitRootInfo: the root info was not made by HcclGetRootInfo");
    }
    if (nRanks == 0 || nRanks > cdsim::hccl::kMaxRanks) {
      fail(HCCL_E_PARA, "HcclCommInitRootInfo: nRanks %u is not in [1, %u]", nRanks, cdsim::hccl::kMaxRanks);
    }
    if (rank >= nRanks) fail(HCCL_E_PARA, "HcclCommInitRootInfo: rank %u is not in [0, %u)", rank, nRanks);
    const int64_t connect_s = cdsim::hccl::timeout_seconds("HCCL_CONNECT_TIMEOUT", 120);
    auto c = std::make_shared<Comm>();
    c->name = head.name;
    c->rank = rank;
    c->nranks = nRanks;
    c->device = cdsim::current_device();
    c->exec_timeout_s = cdsim::hccl::timeout_seconds("HCCL_EXEC_TIMEOUT", 1836);
    c->sent.assign(nRanks, 0);
    c->received.assign(nRanks, 0);
    const int64_t deadline = cdsim::hccl::now_ns() + connect_s * 1000000000;
    try {
      c->shared = cdsim::hccl::attach(c->name, nRanks, deadline);
      cdsim::hccl::join(*c, connect_s, deadline);
    } catch (cdsim::hccl::HcclError& e) {
      e.message = "HcclCommInitRootInfo: " + e.message;
      throw;
    }
    std::lock_guard<std::mutex> lock(cdsim::hccl::g_comms_mutex);
    cdsim::hccl::g_comms.emplace(c.get(), c);
    *comm = c.get();
  });
}

HcclResult HcclCommDestroy(HcclComm comm) {
  return guarded([&] {
    CommPtr c = cdsim::hccl::live(comm, "HcclCommDestroy");
    {
      std::lock_guard<std::mutex> lock(cdsim::hccl::g_comms_mutex);
      cdsim::hccl::g_comms.erase(c.get());
    }
    cdsim::hccl::Lock lock(c->shared);
    c->shared->left[c->rank] = 1;
    cdsim::hccl::notify_all(c->shared);
    // Tasks still queued keep their CommPtr: the block is unmapped after them.
  });
}

HcclResult HcclGetRankSize(HcclComm comm, uint32_t* rankSize) {
  return guarded([&] {
    CommPtr c = cdsim::hccl::live(comm, "HcclGetRankSize");
    if (rankSize == nullptr) fail(HCCL_E_PTR, "HcclGetRankSize: rankSize is NULL");
    *rankSize = c->nranks;
  });
}

HcclResult HcclGetRankId(HcclComm comm, uint32_t* rank) {
  return guarded([&] {
    CommPtr c = cdsim::hccl::live(comm, "HcclGetRankId");
    if (rank == nullptr) fail(HCCL_E_PTR, "HcclGetRankId: rank is NULL");
    *rank = c->rank;
  });
}

HcclResult HcclGetCommAsyncError(HcclComm comm, HcclResult* asyncError) {
  return guarded([&] {
    CommPtr c = cdsim::hccl::live(comm, "HcclGetCommAsyncError");
    if (asyncError == nullptr) fail(HCCL_E_PTR, "HcclGetCommAsyncError: asyncError is NULL");
    *asyncError = static_cast<HcclResult>(c->async_error.load());
  });
}

const char* HcclGetErrorString(HcclResult code) { return cdsim::hccl::result_name(code); }

}  // extern "C"
