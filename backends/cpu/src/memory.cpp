// Device memory (see memory.h).
#include "memory.h"

#include <cstdlib>
#include <map>
#include <mutex>

#include "config.h"
#include "device.h"
#include "error.h"

namespace chipdock_cpu {
namespace {

struct Table {
  std::mutex mu;
  std::map<uintptr_t, std::shared_ptr<Block>> blocks;  // by device address
  uint64_t used[kMaxDevices] = {};                     // bytes, per device
};

Table& table() {
  static Table t;
  return t;
}

using BlockIt = std::map<uintptr_t, std::shared_ptr<Block>>::iterator;

// The block whose [address, address + size) contains `address`, or end().
BlockIt find_containing_locked(Table& t, uintptr_t address) {
  auto it = t.blocks.upper_bound(address);
  if (it == t.blocks.begin()) return t.blocks.end();
  --it;
  return address - it->first < it->second->size ? it : t.blocks.end();
}

void* as_ptr(uintptr_t address) { return reinterpret_cast<void*>(address); }

// The address the core sees for host memory `host`.
uintptr_t device_address(char* host) {
  const uintptr_t real = reinterpret_cast<uintptr_t>(host);
  if (!config().strict) return real;
  if ((real & kStrictTagMask) != 0) {
    fail(CD_STATUS_INTERNAL, "strict mode needs host addresses below 2^48, got %p",
         static_cast<void*>(host));
  }
  return real ^ kStrictTag;
}

// Reserves `bytes` of the device's budget or throws OUT_OF_MEMORY.
void reserve(int32_t device, size_t bytes) {
  Table& t = table();
  const Config& c = config();
  std::lock_guard<std::mutex> lock(t.mu);
  const uint64_t used = t.used[device];
  if (bytes > c.memory_limit - used) {
    fail(CD_STATUS_OUT_OF_MEMORY,
         "cannot allocate %zu bytes on cpu:%d: %llu bytes in use of a %llu-byte limit (%s)",
         bytes, device, static_cast<unsigned long long>(used),
         static_cast<unsigned long long>(c.memory_limit), c.memory_limit_source);
  }
  t.used[device] = used + bytes;
}

void unreserve(int32_t device, size_t bytes) {
  std::lock_guard<std::mutex> lock(table().mu);
  table().used[device] -= bytes;
}

// The message for a free of something that is not an allocation's start.
[[noreturn]] void fail_unknown_free(Table& t, int32_t device, uintptr_t address) {
  auto it = find_containing_locked(t, address);
  if (it != t.blocks.end()) {
    fail(CD_STATUS_INVALID_ARGUMENT, "%p points %zu bytes into the allocation %p of cpu:%d, "
         "not to its start", as_ptr(address), static_cast<size_t>(address - it->first),
         as_ptr(it->first), it->second->device);
  }
  fail(CD_STATUS_INVALID_ARGUMENT, "%p is not an allocation of cpu:%d (never allocated by "
       "memory_allocate, or already freed)", as_ptr(address), device);
}

}  // namespace

Block::~Block() { std::free(host); }

void DeviceRange::check_live(const char* what) const {
  if (block && block->freed.load()) {
    fail(CD_STATUS_INVALID_ARGUMENT, "%s: the allocation %p of cpu:%d was freed while work "
         "using it was still enqueued", what, as_ptr(block->address), block->device);
  }
}

DeviceRange resolve_device_range(int32_t device, const void* ptr, size_t bytes,
                                 const char* what) {
  check_device(device);
  if (bytes == 0) return DeviceRange{};
  if (ptr == nullptr) fail(CD_STATUS_INVALID_ARGUMENT, "%s is NULL", what);
  const uintptr_t address = reinterpret_cast<uintptr_t>(ptr);
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mu);
  auto it = find_containing_locked(t, address);
  if (it == t.blocks.end()) {
    fail(CD_STATUS_INVALID_ARGUMENT, "%s %p is not inside any allocation of cpu:%d", what,
         ptr, device);
  }
  const std::shared_ptr<Block>& block = it->second;
  if (block->device != device) {
    fail(CD_STATUS_INVALID_ARGUMENT, "%s %p lies in an allocation of cpu:%d, not cpu:%d",
         what, ptr, block->device, device);
  }
  const size_t offset = address - block->address;
  if (bytes > block->size - offset) {
    fail(CD_STATUS_OUT_OF_RANGE, "%s range [alloc+%zu, +%zu) overruns the %zu-byte "
         "allocation %p on cpu:%d", what, offset, bytes, block->size,
         as_ptr(block->address), device);
  }
  return DeviceRange{block, block->host + offset, bytes};
}

void check_host_pointer(const void* ptr, const char* what) {
  if (ptr == nullptr) fail(CD_STATUS_INVALID_ARGUMENT, "%s is NULL", what);
  const uint64_t bits = reinterpret_cast<uintptr_t>(ptr);
  if (config().strict && (bits & kStrictTagMask) == kStrictTag) {
    fail(CD_STATUS_INVALID_ARGUMENT, "%s %p is a device pointer (strict mode), but a host "
         "pointer is expected here", what, ptr);
  }
}

void* memory_allocate(int32_t device, size_t bytes) {
  check_device(device);
  if (bytes == 0) return nullptr;
  reserve(device, bytes);
  void* host = nullptr;
  if (posix_memalign(&host, kDeviceAlignment, bytes) != 0) {
    unreserve(device, bytes);
    fail(CD_STATUS_OUT_OF_MEMORY, "the host could not provide %zu bytes for cpu:%d", bytes,
         device);
  }
  try {
    char* h = static_cast<char*>(host);
    auto block = std::make_shared<Block>(device, h, bytes, device_address(h));
    host = nullptr;  // owned by the block from here on
    std::lock_guard<std::mutex> lock(table().mu);
    table().blocks.emplace(block->address, block);
    return as_ptr(block->address);
  } catch (...) {
    std::free(host);
    unreserve(device, bytes);
    throw;
  }
}

void memory_free(int32_t device, void* ptr) {
  check_device(device);
  if (ptr == nullptr) return;
  const uintptr_t address = reinterpret_cast<uintptr_t>(ptr);
  std::shared_ptr<Block> block;  // released after the lock
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mu);
  auto it = t.blocks.find(address);
  if (it == t.blocks.end()) fail_unknown_free(t, device, address);
  if (it->second->device != device) {
    fail(CD_STATUS_INVALID_ARGUMENT, "%p was allocated on cpu:%d, not cpu:%d", ptr,
         it->second->device, device);
  }
  block = std::move(it->second);
  t.blocks.erase(it);
  t.used[device] -= block->size;
  block->freed.store(true);
}

void memory_get_info(int32_t device, size_t* free_bytes, size_t* total_bytes) {
  check_device(device);
  const uint64_t limit = config().memory_limit;
  std::lock_guard<std::mutex> lock(table().mu);
  *free_bytes = static_cast<size_t>(limit - table().used[device]);
  *total_bytes = static_cast<size_t>(limit);
}

}  // namespace chipdock_cpu
