// Simulated device memory: host memory handed out under tagged addresses
// (bit 56 set: non-canonical on x86-64, so whoever dereferences one faults),
// counted against CHIPDOCK_NPU_SIM_MEMORY per device; pinned host memory;
// synchronous and stream-ordered copies and memsets that check destMax, the
// copy kind and that every device-side range lies in one live allocation.
// An asynchronous copy is truly asynchronous only with pinned host memory
// (or device to device); with pageable host memory it returns once done, as
// CANN documents.
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>

#include "runtime_internal.h"

namespace cdsim {
namespace {

constexpr uintptr_t kDeviceTag = uintptr_t{1} << 56;
// Fresh device memory reads as NaN (floats) or -1 (ints): CANN's aclrtMalloc
// does not initialize it, and a kernel that reads before writing shows.
// Large blocks are poisoned at both ends only, so that a big reservation
// does not commit host memory it may never use.
constexpr int kPoison = 0xff;
constexpr size_t kPoisonAll = size_t{16} << 20;
constexpr size_t kPoisonEnds = size_t{1} << 20;

void poison(char* host, size_t size) {
  if (size <= kPoisonAll) {
    std::memset(host, kPoison, size);
    return;
  }
  std::memset(host, kPoison, kPoisonEnds);
  std::memset(host + size - kPoisonEnds, kPoison, kPoisonEnds);
}

struct Allocation {
  size_t size = 0;     // what was asked: the bounds every check uses
  size_t charged = 0;  // what counts against the device's memory (CANN's rounding)
  int32_t device = 0;
  char* host = nullptr;
};

struct Memory {
  std::mutex mutex;
  std::map<uintptr_t, Allocation> device;   // by tagged start address
  std::map<int32_t, uint64_t> used;         // charged bytes per device
  std::map<uintptr_t, size_t> pinned_host;  // aclrtMallocHost blocks
};

Memory& memory() {
  static Memory* instance = new Memory;  // never destroyed: stream tasks may run during static teardown
  return *instance;
}

bool tagged(const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & kDeviceTag) != 0; }

// The allocation containing `address` (lock held), or nullptr.
const std::pair<const uintptr_t, Allocation>* containing(Memory& m, uintptr_t address) {
  auto it = m.device.upper_bound(address);
  if (it == m.device.begin()) return nullptr;
  --it;
  if (address - it->first >= it->second.size) return nullptr;
  return &*it;
}

// aclrtMalloc's accounting (CANN's docs): the size rounded up to 32 bytes, plus 32.
size_t charged_size(size_t size) { return ((size + 31) / 32) * 32 + 32; }

const char* kind_name(aclrtMemcpyKind kind) {
  switch (kind) {
    case ACL_MEMCPY_HOST_TO_HOST: return "ACL_MEMCPY_HOST_TO_HOST";
    case ACL_MEMCPY_HOST_TO_DEVICE: return "ACL_MEMCPY_HOST_TO_DEVICE";
    case ACL_MEMCPY_DEVICE_TO_HOST: return "ACL_MEMCPY_DEVICE_TO_HOST";
    case ACL_MEMCPY_DEVICE_TO_DEVICE: return "ACL_MEMCPY_DEVICE_TO_DEVICE";
    case ACL_MEMCPY_DEFAULT: return "ACL_MEMCPY_DEFAULT";
    case ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE: return "ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE";
    case ACL_MEMCPY_INNER_DEVICE_TO_DEVICE: return "ACL_MEMCPY_INNER_DEVICE_TO_DEVICE";
    case ACL_MEMCPY_INTER_DEVICE_TO_DEVICE: return "ACL_MEMCPY_INTER_DEVICE_TO_DEVICE";
  }
  return "an unknown aclrtMemcpyKind";
}

// Which sides of a copy of `kind` are device memory.
struct Sides {
  bool dst_device;
  bool src_device;
};

Sides sides_of(aclrtMemcpyKind kind, void* dst, const void* src, const char* call) {
  switch (kind) {
    case ACL_MEMCPY_HOST_TO_HOST: return {false, false};
    case ACL_MEMCPY_HOST_TO_DEVICE:
    case ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE: return {true, false};
    case ACL_MEMCPY_DEVICE_TO_HOST: return {false, true};
    case ACL_MEMCPY_DEVICE_TO_DEVICE:
    case ACL_MEMCPY_INNER_DEVICE_TO_DEVICE:
    case ACL_MEMCPY_INTER_DEVICE_TO_DEVICE: return {true, true};
    case ACL_MEMCPY_DEFAULT: return {tagged(dst), tagged(src)};  // unified addressing decides
  }
  raise(ACL_ERROR_INVALID_PARAM, "%s: kind %d is not an aclrtMemcpyKind", call, static_cast<int>(kind));
}

// A host-side pointer of a copy: non-NULL and not a device address.
void check_host_side(const void* ptr, size_t count, aclrtMemcpyKind kind, const char* call, const char* which) {
  if (count == 0) return;
  if (!ptr) raise(ACL_ERROR_INVALID_PARAM, "%s: %s is NULL", call, which);
  if (tagged(ptr))
    raise(ACL_ERROR_INVALID_PARAM, "%s: %s %p is a device address but the kind %s says host memory", call, which, ptr,
          kind_name(kind));
}

// Checks a copy and returns the host addresses to copy between (device
// sides resolved); called at enqueue time and again when the task runs.
std::pair<char*, const char*> resolve_copy(void* dst, size_t destMax, const void* src, size_t count,
                                           aclrtMemcpyKind kind, const char* call) {
  if (count > destMax) raise(ACL_ERROR_INVALID_PARAM, "%s: count %zu exceeds destMax %zu", call, count, destMax);
  Sides sides = sides_of(kind, dst, src, call);
  char* to = static_cast<char*>(dst);
  const char* from = static_cast<const char*>(src);
  std::string what_dst = std::string(call) + " dst (" + kind_name(kind) + ")";
  std::string what_src = std::string(call) + " src (" + kind_name(kind) + ")";
  if (sides.dst_device) {
    to = host_pointer(dst, count, what_dst.c_str());
  } else {
    check_host_side(dst, count, kind, call, "dst");
  }
  if (sides.src_device) {
    from = host_pointer(src, count, what_src.c_str());
  } else {
    check_host_side(src, count, kind, call, "src");
  }
  return {to, from};
}

// True if [ptr, ptr + count) lies in one aclrtMallocHost block.
bool pinned_range(const void* ptr, size_t count) {
  Memory& m = memory();
  std::lock_guard<std::mutex> lock(m.mutex);
  auto it = m.pinned_host.upper_bound(reinterpret_cast<uintptr_t>(ptr));
  if (it == m.pinned_host.begin()) return false;
  --it;
  uintptr_t offset = reinterpret_cast<uintptr_t>(ptr) - it->first;
  return offset <= it->second && count <= it->second - offset;
}

// aclrtMemset's target: device memory or an aclrtMallocHost block.
char* resolve_memset(void* ptr, size_t maxCount, size_t count, const char* call) {
  if (count > maxCount) raise(ACL_ERROR_INVALID_PARAM, "%s: count %zu exceeds maxCount %zu", call, count, maxCount);
  if (tagged(ptr) || !ptr) return host_pointer(ptr, count, call);
  if (pinned_range(ptr, count)) return static_cast<char*>(ptr);
  raise(ACL_ERROR_INVALID_PARAM, "%s: %p is neither device memory nor an aclrtMallocHost block of %zu bytes", call, ptr,
        count);
}

// An aclrtMemcpyAsync from or to pageable host memory: CANN's docs say the
// call returns once the copy is done, so the caller may reuse the memory at
// once. Enqueued in stream order, then waited for; its own failure (or the
// stream's earlier one) is this call's.
void copy_in_order_and_wait(aclrtStream stream, void* dst, size_t destMax, const void* src, size_t count,
                            aclrtMemcpyKind kind) {
  if (on_stream_thread(stream))
    raise(ACL_ERROR_INVALID_PARAM,
          "aclrtMemcpyAsync: a pageable-memory copy waits for its stream; called from that stream's callback");
  struct Outcome {
    std::mutex mutex;
    std::condition_variable done_changed;
    bool done = false;
    SimError error{0, ""};
  };
  auto outcome = std::make_shared<Outcome>();
  enqueue_control(stream, [=](int32_t earlier, const std::string& why) {
    SimError error(0, "");
    if (earlier) {
      error = SimError(earlier, "aclrtMemcpyAsync: not done, the stream failed before it: " + why);
    } else {
      try {
        auto ends = resolve_copy(dst, destMax, src, count, kind, "aclrtMemcpyAsync (on the stream)");
        std::memmove(ends.first, ends.second, count);
      } catch (const SimError& e) {
        error = e;
      }
    }
    std::lock_guard<std::mutex> lock(outcome->mutex);
    outcome->error = error;
    outcome->done = true;
    outcome->done_changed.notify_all();
  });
  std::unique_lock<std::mutex> lock(outcome->mutex);
  outcome->done_changed.wait(lock, [&] { return outcome->done; });
  if (outcome->error.code) throw outcome->error;
}

}  // namespace

char* host_pointer(const void* device_ptr, size_t bytes, const char* what) {
  if (!device_ptr) {
    if (bytes == 0) return nullptr;
    raise(ACL_ERROR_INVALID_PARAM, "%s: the device address is NULL (%zu bytes)", what, bytes);
  }
  uintptr_t address = reinterpret_cast<uintptr_t>(device_ptr);
  Memory& m = memory();
  std::lock_guard<std::mutex> lock(m.mutex);
  // bytes 0 may point one past the end of an allocation.
  auto entry = containing(m, bytes == 0 && address > 0 ? address - 1 : address);
  if (entry) {
    uintptr_t offset = address - entry->first;
    if (offset <= entry->second.size && bytes <= entry->second.size - offset) return entry->second.host + offset;
    raise(ACL_ERROR_INVALID_PARAM,
          "%s: device range %p + %zu bytes runs past the end of its allocation (%p, %zu bytes) by %zu bytes", what,
          device_ptr, bytes, reinterpret_cast<void*>(entry->first), entry->second.size,
          static_cast<size_t>(offset + bytes - entry->second.size));
  }
  if (!tagged(device_ptr))
    raise(ACL_ERROR_INVALID_PARAM, "%s: %p is a host address, not device memory", what, device_ptr);
  raise(ACL_ERROR_INVALID_PARAM, "%s: %p (%zu bytes) is not inside a live device allocation (freed?)", what, device_ptr,
        bytes);
}

bool is_device_pointer(const void* ptr) noexcept {
  Memory& m = memory();
  std::lock_guard<std::mutex> lock(m.mutex);
  return containing(m, reinterpret_cast<uintptr_t>(ptr)) != nullptr;
}

int32_t device_of(const void* device_ptr) noexcept {
  Memory& m = memory();
  std::lock_guard<std::mutex> lock(m.mutex);
  auto entry = containing(m, reinterpret_cast<uintptr_t>(device_ptr));
  return entry ? entry->second.device : -1;
}

}  // namespace cdsim

using cdsim::guarded;
using cdsim::raise;

extern "C" {

aclError aclrtMalloc(void** devPtr, size_t size, aclrtMemMallocPolicy policy) {
  (void)policy;  // every policy gets the same host memory; out-of-range ones are allowed by CANN too
  return guarded([&] {
    if (!devPtr) raise(ACL_ERROR_INVALID_PARAM, "aclrtMalloc: devPtr is NULL");
    if (size == 0) raise(ACL_ERROR_INVALID_PARAM, "aclrtMalloc: size must not be 0");
    int32_t device = cdsim::current_device();
    uint64_t limit = cdsim::memory_limit_setting();
    size_t charged = cdsim::charged_size(size);
    cdsim::Memory& m = cdsim::memory();
    {
      std::lock_guard<std::mutex> lock(m.mutex);
      uint64_t used = m.used[device];
      if (size > limit || charged > limit - used)
        raise(ACL_ERROR_RT_MEMORY_ALLOCATION,
              "aclrtMalloc: out of memory on device %d: %zu bytes asked, %llu of %llu bytes in use "
              "(CHIPDOCK_NPU_SIM_MEMORY)",
              device, size, static_cast<unsigned long long>(used), static_cast<unsigned long long>(limit));
      m.used[device] = used + charged;  // reserved before the host allocation, released on failure
    }
    // 64-byte aligned start, as CANN documents.
    char* host = static_cast<char*>(std::aligned_alloc(64, ((size + 63) / 64) * 64));
    if (!host) {
      std::lock_guard<std::mutex> lock(m.mutex);
      m.used[device] -= charged;
      raise(ACL_ERROR_RT_MEMORY_ALLOCATION, "aclrtMalloc: the host could not back %zu bytes of device %d", size, device);
    }
    cdsim::poison(host, size);
    uintptr_t address = reinterpret_cast<uintptr_t>(host) | cdsim::kDeviceTag;
    std::lock_guard<std::mutex> lock(m.mutex);
    m.device[address] = cdsim::Allocation{size, charged, device, host};
    *devPtr = reinterpret_cast<void*>(address);
  });
}

aclError aclrtFree(void* devPtr) {
  return guarded([&] {
    cdsim::Memory& m = cdsim::memory();
    char* host = nullptr;
    {
      std::lock_guard<std::mutex> lock(m.mutex);
      auto it = m.device.find(reinterpret_cast<uintptr_t>(devPtr));
      if (it == m.device.end())
        raise(ACL_ERROR_INVALID_PARAM, "aclrtFree: %p is not the start of a live device allocation", devPtr);
      m.used[it->second.device] -= it->second.charged;
      host = it->second.host;
      m.device.erase(it);
    }
    std::free(host);
  });
}

aclError aclrtMallocHost(void** hostPtr, size_t size) {
  return guarded([&] {
    if (!hostPtr) raise(ACL_ERROR_INVALID_PARAM, "aclrtMallocHost: hostPtr is NULL");
    if (size == 0) raise(ACL_ERROR_INVALID_PARAM, "aclrtMallocHost: size must not be 0");
    void* host = std::aligned_alloc(64, ((size + 63) / 64) * 64);
    if (!host) raise(ACL_ERROR_BAD_ALLOC, "aclrtMallocHost: %zu bytes of host memory are not available", size);
    cdsim::Memory& m = cdsim::memory();
    std::lock_guard<std::mutex> lock(m.mutex);
    m.pinned_host[reinterpret_cast<uintptr_t>(host)] = size;
    *hostPtr = host;
  });
}

aclError aclrtFreeHost(void* hostPtr) {
  return guarded([&] {
    cdsim::Memory& m = cdsim::memory();
    {
      std::lock_guard<std::mutex> lock(m.mutex);
      auto it = m.pinned_host.find(reinterpret_cast<uintptr_t>(hostPtr));
      if (it == m.pinned_host.end())
        raise(ACL_ERROR_INVALID_PARAM, "aclrtFreeHost: %p was not returned by aclrtMallocHost", hostPtr);
      m.pinned_host.erase(it);
    }
    std::free(hostPtr);
  });
}

aclError aclrtGetMemInfo(aclrtMemAttr attr, size_t* free, size_t* total) {
  return guarded([&] {
    if (!free || !total) raise(ACL_ERROR_INVALID_PARAM, "aclrtGetMemInfo: a NULL output pointer");
    int32_t device = cdsim::current_device();
    switch (attr) {
      case ACL_HBM_MEM: case ACL_HBM_MEM_HUGE: case ACL_HBM_MEM_NORMAL: case ACL_HBM_MEM_P2P_HUGE:
      case ACL_HBM_MEM_P2P_NORMAL: case ACL_HBM_MEM_HUGE1G: case ACL_HBM_MEM_P2P_HUGE1G: {
        uint64_t limit = cdsim::memory_limit_setting();
        cdsim::Memory& m = cdsim::memory();
        std::lock_guard<std::mutex> lock(m.mutex);
        uint64_t used = m.used[device];
        *total = static_cast<size_t>(limit);
        *free = static_cast<size_t>(used < limit ? limit - used : 0);
        return;
      }
      case ACL_DDR_MEM: case ACL_DDR_MEM_HUGE: case ACL_DDR_MEM_NORMAL: case ACL_DDR_MEM_P2P_HUGE:
      case ACL_DDR_MEM_P2P_NORMAL:
        // The simulated Atlas A2 device has HBM only.
        *free = 0;
        *total = 0;
        return;
      default:
        raise(ACL_ERROR_INVALID_PARAM, "aclrtGetMemInfo: attr %d is not an aclrtMemAttr", static_cast<int>(attr));
    }
  });
}

aclError aclrtMemcpy(void* dst, size_t destMax, const void* src, size_t count, aclrtMemcpyKind kind) {
  return guarded([&] {
    auto ends = cdsim::resolve_copy(dst, destMax, src, count, kind, "aclrtMemcpy");
    if (count) std::memmove(ends.first, ends.second, count);
  });
}

aclError aclrtMemcpyAsync(void* dst, size_t destMax, const void* src, size_t count, aclrtMemcpyKind kind,
                          aclrtStream stream) {
  return guarded([&] {
    cdsim::resolve_copy(dst, destMax, src, count, kind, "aclrtMemcpyAsync");
    aclrtStream target = cdsim::resolve_stream(stream, "aclrtMemcpyAsync");
    cdsim::Sides sides = cdsim::sides_of(kind, dst, src, "aclrtMemcpyAsync");
    // CANN's docs: an Atlas server (EP) has no asynchronous host-to-host copy.
    if (!sides.dst_device && !sides.src_device)
      raise(ACL_ERROR_RT_FEATURE_NOT_SUPPORT, "aclrtMemcpyAsync: no asynchronous host-to-host copy (use aclrtMemcpy)");
    if (count == 0) return;
    const void* host_side = !sides.dst_device ? dst : !sides.src_device ? src : nullptr;
    if (host_side && !cdsim::pinned_range(host_side, count)) {
      cdsim::copy_in_order_and_wait(target, dst, destMax, src, count, kind);
      return;
    }
    // Resolved again when the stream gets there: the memory may have been freed meanwhile.
    cdsim::enqueue(target, [=] {
      auto ends = cdsim::resolve_copy(dst, destMax, src, count, kind, "aclrtMemcpyAsync (on the stream)");
      std::memmove(ends.first, ends.second, count);
    });
  });
}

aclError aclrtMemset(void* devPtr, size_t maxCount, int32_t value, size_t count) {
  return guarded([&] {
    char* target = cdsim::resolve_memset(devPtr, maxCount, count, "aclrtMemset");
    if (count) std::memset(target, value & 0xff, count);
  });
}

aclError aclrtMemsetAsync(void* devPtr, size_t maxCount, int32_t value, size_t count, aclrtStream stream) {
  return guarded([&] {
    cdsim::resolve_memset(devPtr, maxCount, count, "aclrtMemsetAsync");
    aclrtStream target = cdsim::resolve_stream(stream, "aclrtMemsetAsync");
    if (count == 0) return;
    cdsim::enqueue(target, [=] {
      char* host = cdsim::resolve_memset(devPtr, maxCount, count, "aclrtMemsetAsync (on the stream)");
      std::memset(host, value & 0xff, count);
    });
  });
}

}  // extern "C"
