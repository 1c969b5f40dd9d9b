// Device and pinned host memory, memset and copies on AscendCL (the memory
// slots of runtime_slots.h).
//
// Every allocation is kept in a table (start -> size, device), so the slots
// check what the runtime cannot: a pointer of another device or of none
// (INVALID_ARGUMENT), a range that overruns its allocation (OUT_OF_RANGE, as
// device_api.h asks of plugins that can), and they pass the destination's
// real capacity as aclrtMemcpy's / aclrtMemset's destMax.
//
// Async copies with pageable host memory (device_api.h lets a plugin copy
// synchronously there) stay asynchronous, staged through a pinned buffer
// that is freed once an event recorded after the copy completed: an upload
// copies the caller's bytes into it at once (the caller's buffer is free
// again), a download lands in it on the stream and a host callback of the
// plug-in's own moves the bytes into the caller's buffer in stream order.
#include <acl/acl.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "acl_api.h"
#include "acl_error.h"
#include "chipdock/support/core_link.h"
#include "chipdock/support/error.h"
#include "runtime.h"
#include "runtime_internal.h"
#include "runtime_slots.h"

namespace chipdock_npu {
namespace {

using chipdock::support::fail;
using chipdock::support::format;
using chipdock::support::guard;
using chipdock::support::require_non_null;

// device_api.h: device allocations are aligned to at least 256 bytes.
constexpr uintptr_t kAlignment = 256;
// acl_rt.h: an asynchronous on-chip device-to-device copy needs 64-byte
// aligned source and destination addresses.
constexpr uintptr_t kAsyncDeviceCopyAlignment = 64;

struct Allocation {
  size_t bytes;
  int32_t device;
  void* base;  // what aclrtMalloc returned (below the start when padded for alignment)
};

// A pinned bounce buffer in use by enqueued copies, freed once `done` completed.
struct Staging {
  int32_t device;
  void* host;
  aclrtEvent done;
};

std::mutex g_mutex;                               // guards the three tables
std::map<uintptr_t, Allocation> g_allocations;    // device memory by start address
std::map<uintptr_t, size_t> g_pinned;             // aclrtMallocHost blocks by start
std::vector<Staging> g_staging;

uintptr_t address(const void* p) { return reinterpret_cast<uintptr_t>(p); }

// The allocation containing `p`, or end().
std::map<uintptr_t, Allocation>::const_iterator containing(const void* p) {
  auto it = g_allocations.upper_bound(address(p));
  if (it == g_allocations.begin()) return g_allocations.end();
  --it;
  return address(p) < it->first + it->second.bytes ? it : g_allocations.end();
}

// Checks that [ptr, ptr + bytes) lies in one allocation of `device`; returns
// the bytes from `ptr` to the allocation's end (the destMax of a write).
size_t check_device_range(int32_t device, const void* ptr, size_t bytes, const char* what) {
  require_non_null(ptr, what);
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = containing(ptr);
  if (it == g_allocations.end()) {
    fail(CD_STATUS_INVALID_ARGUMENT, "%s %p is not inside any allocation of npu:%d", what, ptr, device);
  }
  const Allocation& a = it->second;
  if (a.device != device) {
    fail(CD_STATUS_INVALID_ARGUMENT, "%s %p lies in an allocation of npu:%d, not npu:%d", what, ptr, a.device,
         device);
  }
  const size_t offset = address(ptr) - it->first, room = a.bytes - offset;
  if (bytes > room) {
    fail(CD_STATUS_OUT_OF_RANGE, "%s range [alloc+%zu, +%zu) overruns the %zu-byte allocation %p of npu:%d", what,
         offset, bytes, a.bytes, reinterpret_cast<void*>(it->first), device);
  }
  return room;
}

// A host pointer must not be device memory (the double's are not even host
// addresses). Returns the bytes of pinned memory from `ptr` on when
// [ptr, ptr + bytes) lies in one pinned block, else 0 (pageable).
size_t check_host_range(const void* ptr, size_t bytes, const char* what) {
  require_non_null(ptr, what);
  std::lock_guard<std::mutex> lock(g_mutex);
  if (containing(ptr) != g_allocations.end()) {
    fail(CD_STATUS_INVALID_ARGUMENT, "%s %p is device memory, but a host pointer is required", what, ptr);
  }
  auto it = g_pinned.upper_bound(address(ptr));
  if (it == g_pinned.begin()) return 0;
  --it;
  const uintptr_t end = it->first + it->second;
  return address(ptr) < end && bytes <= end - address(ptr) ? end - address(ptr) : 0;
}

void check_no_overlap(const void* dst, const void* src, size_t bytes) {
  const uintptr_t d = address(dst), s = address(src);
  if (d < s + bytes && s < d + bytes) {
    fail(CD_STATUS_INVALID_ARGUMENT, "dst %p and src %p overlap (%zu bytes)", dst, src, bytes);
  }
}

// --- allocation ----------------------------------------------------------------------

void* raw_allocate(int32_t device, size_t bytes) {
  void* p = nullptr;
  // HUGE_FIRST: huge pages where the device has them, normal ones otherwise.
  // An out-of-memory code maps to CD_STATUS_OUT_OF_MEMORY (acl_error.h), so
  // the core's allocator empties its cache and retries.
  const std::string call = format("aclrtMalloc(%zu bytes) on npu:%d", bytes, device);
  check_acl(acl().aclrtMalloc(&p, bytes, ACL_MEM_MALLOC_HUGE_FIRST), call.c_str());
  return p;
}

void* memory_allocate(int32_t device, size_t bytes) {
  bind_device(device);
  if (bytes == 0) return nullptr;
  void* base = raw_allocate(device, bytes);
  void* start = base;
  if (address(base) % kAlignment != 0) {
    // acl_rt.h promises 32-byte sizes, not 256-byte addresses: pad and align.
    (void)acl().aclrtFree(base);
    if (bytes > SIZE_MAX - kAlignment) fail(CD_STATUS_OUT_OF_MEMORY, "%zu bytes is too large", bytes);
    base = raw_allocate(device, bytes + kAlignment - 1);
    start = reinterpret_cast<void*>((address(base) + kAlignment - 1) & ~(kAlignment - 1));
  }
  std::lock_guard<std::mutex> lock(g_mutex);
  g_allocations[address(start)] = Allocation{bytes, device, base};
  return start;
}

void memory_free(int32_t device, void* ptr) {
  bind_device(device);
  if (ptr == nullptr) return;
  void* base = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    auto it = g_allocations.find(address(ptr));
    if (it == g_allocations.end()) {
      auto inner = containing(ptr);
      if (inner != g_allocations.end()) {
        fail(CD_STATUS_INVALID_ARGUMENT, "%p points %zu bytes into the allocation %p of npu:%d, not at its start",
             ptr, static_cast<size_t>(address(ptr) - inner->first), reinterpret_cast<void*>(inner->first),
             inner->second.device);
      }
      fail(CD_STATUS_INVALID_ARGUMENT, "%p is not an allocation of npu:%d (never allocated, or freed already)", ptr,
           device);
    }
    if (it->second.device != device) {
      fail(CD_STATUS_INVALID_ARGUMENT, "%p was allocated on npu:%d, not npu:%d", ptr, it->second.device, device);
    }
    base = it->second.base;
    g_allocations.erase(it);
  }
  check_acl(acl().aclrtFree(base), "aclrtFree");
}

// Pinned memory needs a context (aclrtMallocHost works on the current one):
// device 0's, which every slot rebinds as it needs.
void bind_for_host_memory() {
  if (device_count() == 0) {
    (void)acl();  // throws UNAVAILABLE with the reason when CANN is absent
    fail(CD_STATUS_UNAVAILABLE, "pinned host memory needs an NPU device, and there is none");
  }
  bind_device(0);
}

void* host_memory_allocate(size_t bytes) {
  if (bytes == 0) return nullptr;
  bind_for_host_memory();
  void* p = nullptr;
  const std::string call = format("aclrtMallocHost(%zu bytes)", bytes);
  check_acl(acl().aclrtMallocHost(&p, bytes), call.c_str());
  std::lock_guard<std::mutex> lock(g_mutex);
  g_pinned[address(p)] = bytes;
  return p;
}

void host_memory_free(void* ptr) {
  if (ptr == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (g_pinned.erase(address(ptr)) == 0) {
      fail(CD_STATUS_INVALID_ARGUMENT, "%p is not pinned memory from host_memory_allocate (or freed already)", ptr);
    }
  }
  bind_for_host_memory();
  check_acl(acl().aclrtFreeHost(ptr), "aclrtFreeHost");
}

// --- staging buffers -------------------------------------------------------------------

// Frees `device`'s staging buffers whose copies have completed, with its
// context bound (never rebinding: the caller's next call needs it). Never
// throws: a failure keeps the buffer for the next pass.
void reclaim_staging(int32_t device) noexcept {
  std::lock_guard<std::mutex> lock(g_mutex);
  for (auto it = g_staging.begin(); it != g_staging.end();) {
    aclrtEventRecordedStatus status = ACL_EVENT_RECORDED_STATUS_NOT_READY;
    try {
      if (it->device == device && acl().aclrtQueryEventStatus(it->done, &status) != ACL_SUCCESS) {
        status = ACL_EVENT_RECORDED_STATUS_NOT_READY;
      }
    } catch (...) {
      status = ACL_EVENT_RECORDED_STATUS_NOT_READY;
    }
    if (status != ACL_EVENT_RECORDED_STATUS_COMPLETE) {
      ++it;
      continue;
    }
    (void)acl().aclrtDestroyEvent(it->done);
    (void)acl().aclrtFreeHost(it->host);
    it = g_staging.erase(it);
  }
}

// A pinned buffer of `bytes` for copies about to be enqueued on a stream of
// `device` (whose context is bound).
void* staging_buffer(int32_t device, size_t bytes) {
  reclaim_staging(device);
  void* host = nullptr;
  const std::string call = format("aclrtMallocHost(%zu bytes) for a staging buffer", bytes);
  check_acl(acl().aclrtMallocHost(&host, bytes), call.c_str());
  return host;
}

// Hands `host` over to be freed once the work enqueued on `stream` so far
// has completed. On failure it waits for the stream and frees it at once.
void release_after(int32_t device, void* host, aclrtStream stream) {
  aclrtEvent done = nullptr;
  aclError rc = acl().aclrtCreateEventWithFlag(&done, ACL_EVENT_SYNC);
  if (rc == ACL_SUCCESS) {
    rc = acl().aclrtRecordEvent(done, stream);
    if (rc != ACL_SUCCESS) (void)acl().aclrtDestroyEvent(done);
  }
  if (rc == ACL_SUCCESS) {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_staging.push_back(Staging{device, host, done});
    return;
  }
  const aclError waited = acl().aclrtSynchronizeStream(stream);
  (void)acl().aclrtFreeHost(host);
  check_acl(rc, "aclrtRecordEvent (after a staged copy)");
  check_acl(waited, "aclrtSynchronizeStream");
}

// --- copies ---------------------------------------------------------------------------

void copy_sync(int32_t device, void* dst, const void* src, size_t bytes, aclrtMemcpyKind kind) {
  bind_device(device);
  if (bytes == 0) return;
  size_t dest_max = bytes;
  if (kind == ACL_MEMCPY_HOST_TO_DEVICE) {
    check_host_range(src, bytes, "src");
    dest_max = check_device_range(device, dst, bytes, "dst");
  } else if (kind == ACL_MEMCPY_DEVICE_TO_HOST) {
    check_device_range(device, src, bytes, "src");
    const size_t pinned = check_host_range(dst, bytes, "dst");
    if (pinned != 0) dest_max = pinned;
  } else {
    check_device_range(device, src, bytes, "src");
    dest_max = check_device_range(device, dst, bytes, "dst");
    check_no_overlap(dst, src, bytes);
  }
  check_acl(acl().aclrtMemcpy(dst, dest_max, src, bytes, kind), "aclrtMemcpy");
}

void upload_async(int32_t device, void* dst, const void* src, size_t bytes, cd_stream* stream) {
  aclrtStream s = bound_stream(stream, device, "memcpy_host_to_device_async");
  if (bytes == 0) return;
  const bool pinned = check_host_range(src, bytes, "src") != 0;
  const size_t dest_max = check_device_range(device, dst, bytes, "dst");
  if (pinned) {
    check_acl(acl().aclrtMemcpyAsync(dst, dest_max, src, bytes, ACL_MEMCPY_HOST_TO_DEVICE, s), "aclrtMemcpyAsync");
    return;
  }
  void* staged = staging_buffer(device, bytes);
  std::memcpy(staged, src, bytes);
  const aclError rc = acl().aclrtMemcpyAsync(dst, dest_max, staged, bytes, ACL_MEMCPY_HOST_TO_DEVICE, s);
  if (rc != ACL_SUCCESS) {
    (void)acl().aclrtFreeHost(staged);
    check_acl(rc, "aclrtMemcpyAsync");
  }
  release_after(device, staged, s);
}

void download_async(int32_t device, void* dst, const void* src, size_t bytes, cd_stream* stream) {
  aclrtStream s = bound_stream(stream, device, "memcpy_device_to_host_async");
  if (bytes == 0) return;
  check_device_range(device, src, bytes, "src");
  const size_t pinned = check_host_range(dst, bytes, "dst");
  if (pinned != 0) {
    check_acl(acl().aclrtMemcpyAsync(dst, pinned, src, bytes, ACL_MEMCPY_DEVICE_TO_HOST, s), "aclrtMemcpyAsync");
    return;
  }
  // Pageable: the bytes are the stream's; copy them into a pinned buffer
  // on the stream, and from there into `dst` on the host once the stream
  // gets there (the caller leaves `dst` unread until the copy completed).
  void* staged = staging_buffer(device, bytes);
  const aclError rc = acl().aclrtMemcpyAsync(staged, bytes, src, bytes, ACL_MEMCPY_DEVICE_TO_HOST, s);
  if (rc != ACL_SUCCESS) {
    (void)acl().aclrtFreeHost(staged);
    check_acl(rc, "aclrtMemcpyAsync");
  }
  try {
    enqueue_host_work(stream, [dst, staged, bytes] { std::memcpy(dst, staged, bytes); });
  } catch (...) {
    release_after(device, staged, s);
    throw;
  }
  release_after(device, staged, s);
}

void device_copy_async(int32_t device, void* dst, const void* src, size_t bytes, cd_stream* stream) {
  aclrtStream s = bound_stream(stream, device, "memcpy_device_to_device_async");
  if (bytes == 0) return;
  check_device_range(device, src, bytes, "src");
  const size_t dest_max = check_device_range(device, dst, bytes, "dst");
  check_no_overlap(dst, src, bytes);
  if (address(dst) % kAsyncDeviceCopyAlignment == 0 && address(src) % kAsyncDeviceCopyAlignment == 0) {
    check_acl(acl().aclrtMemcpyAsync(dst, dest_max, src, bytes, ACL_MEMCPY_DEVICE_TO_DEVICE, s),
              "aclrtMemcpyAsync");
    return;
  }
  // Unaligned views (an offset into a tensor): bounce through a pinned
  // buffer, both legs on the stream, so the copy stays in stream order.
  void* staged = staging_buffer(device, bytes);
  aclError rc = acl().aclrtMemcpyAsync(staged, bytes, src, bytes, ACL_MEMCPY_DEVICE_TO_HOST, s);
  if (rc == ACL_SUCCESS) rc = acl().aclrtMemcpyAsync(dst, dest_max, staged, bytes, ACL_MEMCPY_HOST_TO_DEVICE, s);
  if (rc != ACL_SUCCESS) {
    // The first leg may be enqueued: free the buffer only after it ran.
    release_after(device, staged, s);
    check_acl(rc, "aclrtMemcpyAsync (unaligned device-to-device, through a pinned buffer)");
  }
  release_after(device, staged, s);
}

// --- memset ---------------------------------------------------------------------------

void memory_set(int32_t device, void* ptr, int32_t value, size_t bytes) {
  bind_device(device);
  if (bytes == 0) return;
  const size_t max_count = check_device_range(device, ptr, bytes, "ptr");
  check_acl(acl().aclrtMemset(ptr, max_count, value & 0xff, bytes), "aclrtMemset");
}

void memory_set_async(int32_t device, void* ptr, int32_t value, size_t bytes, cd_stream* stream) {
  aclrtStream s = bound_stream(stream, device, "memory_set_async");
  if (bytes == 0) return;
  const size_t max_count = check_device_range(device, ptr, bytes, "ptr");
  check_acl(acl().aclrtMemsetAsync(ptr, max_count, value & 0xff, bytes, s), "aclrtMemsetAsync");
}

}  // namespace

void release_memory() noexcept {
  std::lock_guard<std::mutex> lock(g_mutex);
  try {
    // Every stream has been synchronized or destroyed: no copy still reads these.
    for (const Staging& st : g_staging) {
      bind_device(st.device);
      (void)acl().aclrtDestroyEvent(st.done);
      (void)acl().aclrtFreeHost(st.host);
    }
    for (const auto& [start, a] : g_allocations) {
      bind_device(a.device);
      (void)acl().aclrtFree(a.base);
    }
    if (!g_pinned.empty() && device_count() > 0) bind_device(0);
    for (const auto& [start, bytes] : g_pinned) (void)acl().aclrtFreeHost(reinterpret_cast<void*>(start));
  } catch (...) {
    // The runtime cannot be reached any more: nothing left to release through it.
  }
  g_staging.clear();
  g_allocations.clear();
  g_pinned.clear();
}

// --- the slots --------------------------------------------------------------------------

cd_error* api_memory_allocate(int32_t device, size_t bytes, void** ptr) noexcept {
  return guard("memory_allocate", [&] {
    require_non_null(ptr, "ptr");
    *ptr = memory_allocate(device, bytes);
  });
}

cd_error* api_memory_free(int32_t device, void* ptr) noexcept {
  return guard("memory_free", [&] { memory_free(device, ptr); });
}

cd_error* api_host_memory_allocate(size_t bytes, void** ptr) noexcept {
  return guard("host_memory_allocate", [&] {
    require_non_null(ptr, "ptr");
    *ptr = host_memory_allocate(bytes);
  });
}

cd_error* api_host_memory_free(void* ptr) noexcept {
  return guard("host_memory_free", [&] { host_memory_free(ptr); });
}

cd_error* api_memory_set(int32_t device, void* ptr, int32_t value, size_t bytes) noexcept {
  return guard("memory_set", [&] { memory_set(device, ptr, value, bytes); });
}

cd_error* api_memory_set_async(int32_t device, void* ptr, int32_t value, size_t bytes, cd_stream* stream) noexcept {
  return guard("memory_set_async", [&] { memory_set_async(device, ptr, value, bytes, stream); });
}

cd_error* api_memcpy_host_to_device(int32_t device, void* dst, const void* src, size_t bytes) noexcept {
  return guard("memcpy_host_to_device", [&] { copy_sync(device, dst, src, bytes, ACL_MEMCPY_HOST_TO_DEVICE); });
}

cd_error* api_memcpy_device_to_host(int32_t device, void* dst, const void* src, size_t bytes) noexcept {
  return guard("memcpy_device_to_host", [&] { copy_sync(device, dst, src, bytes, ACL_MEMCPY_DEVICE_TO_HOST); });
}

cd_error* api_memcpy_device_to_device(int32_t device, void* dst, const void* src, size_t bytes) noexcept {
  return guard("memcpy_device_to_device",
               [&] { copy_sync(device, dst, src, bytes, ACL_MEMCPY_DEVICE_TO_DEVICE); });
}

cd_error* api_memcpy_host_to_device_async(int32_t device, void* dst, const void* src, size_t bytes,
                                          cd_stream* stream) noexcept {
  return guard("memcpy_host_to_device_async", [&] { upload_async(device, dst, src, bytes, stream); });
}

cd_error* api_memcpy_device_to_host_async(int32_t device, void* dst, const void* src, size_t bytes,
                                          cd_stream* stream) noexcept {
  return guard("memcpy_device_to_host_async", [&] { download_async(device, dst, src, bytes, stream); });
}

cd_error* api_memcpy_device_to_device_async(int32_t device, void* dst, const void* src, size_t bytes,
                                            cd_stream* stream) noexcept {
  return guard("memcpy_device_to_device_async", [&] { device_copy_async(device, dst, src, bytes, stream); });
}

}  // namespace chipdock_npu
