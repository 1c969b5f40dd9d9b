// Page-locked host buffers from a backend (host_memory_allocate), so that
// host<->device copies can run asynchronously on a stream. The core keeps a
// registry of live buffers to tell pinned from pageable memory, and a buffer
// waits for the copies that still read or write it before it is freed.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

#include "stream.hpp"

namespace chipdock {

class Device;

class PinnedBuffer {
 public:
  // `bytes` of pinned memory from `device`'s backend (ordinary host memory
  // when the backend leaves host_memory_allocate NULL: then `pinned()` is false).
  PinnedBuffer(Device& device, size_t bytes);
  ~PinnedBuffer();
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  void* data() const noexcept { return data_; }
  size_t size() const noexcept { return size_; }
  bool pinned() const noexcept { return pinned_; }
  Device& device() const noexcept { return *device_; }

  // The live pinned buffer containing [ptr, ptr + bytes), or nullptr.
  static std::shared_ptr<PinnedBuffer> find(const void* ptr, size_t bytes);
  // Keeps the memory until the work enqueued on `stream` so far completes.
  void record_use(Stream& stream);

 private:
  Device* device_;
  void* data_ = nullptr;
  size_t size_ = 0;
  bool pinned_ = false;
  std::mutex mutex_;
  std::vector<EventPtr> uses_;
};

using PinnedBufferPtr = std::shared_ptr<PinnedBuffer>;

// Allocates a buffer and registers it (the only way to make one).
PinnedBufferPtr make_pinned_buffer(Device& device, size_t bytes);

}  // namespace chipdock
