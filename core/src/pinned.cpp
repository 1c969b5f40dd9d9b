#include "pinned.hpp"

#include <cstdlib>
#include <map>

#include "blocking.hpp"
#include "runtime.hpp"

namespace chipdock {

namespace {

std::mutex g_registry_mutex;
// Start address -> buffer; weak so the registry never keeps memory alive.
std::map<const char*, std::weak_ptr<PinnedBuffer>> g_registry;

constexpr size_t kHostAlignment = 4096;

}  // namespace

PinnedBuffer::PinnedBuffer(Device& device, size_t bytes) : device_(&device), size_(bytes) {
  if (bytes == 0) return;
  Plugin& p = device.plugin();
  if (p.api().host_memory_allocate != nullptr && p.api().host_memory_free != nullptr) {
    CD_CALL(p, host_memory_allocate, bytes, &data_);
    pinned_ = true;
    return;
  }
  size_t rounded = (bytes + kHostAlignment - 1) / kHostAlignment * kHostAlignment;
  data_ = std::aligned_alloc(kHostAlignment, rounded);
  if (data_ == nullptr) {
    throw Error(CD_STATUS_OUT_OF_MEMORY, "core", "pinned_empty", "host allocation of " + format_bytes(bytes) + " failed");
  }
}

PinnedBuffer::~PinnedBuffer() {
  {
    std::lock_guard<std::mutex> lock(g_registry_mutex);
    auto it = g_registry.find(static_cast<const char*>(data_));
    if (it != g_registry.end() && it->second.expired()) g_registry.erase(it);
  }
  if (!uses_.empty()) {
    UninterruptibleScope must_finish;  // the copies must end before the memory is freed
    BlockingSection unlocked;
    for (auto& ev : uses_) {
      try {
        if (!ev->destroyed()) ev->synchronize();
      } catch (...) {
      }
    }
  }
  if (data_ == nullptr) return;
  if (!pinned_) {
    std::free(data_);
    return;
  }
  Plugin& p = device_->plugin();
  if (p.is_shut_down()) return;  // the process is exiting
  cd_error* err = p.api().host_memory_free(data_);
  if (err != nullptr) p.api().error_destroy(err);
}

PinnedBufferPtr make_pinned_buffer(Device& device, size_t bytes) {
  auto buffer = std::make_shared<PinnedBuffer>(device, bytes);
  if (buffer->pinned() && buffer->data() != nullptr) {
    std::lock_guard<std::mutex> lock(g_registry_mutex);
    g_registry[static_cast<const char*>(buffer->data())] = buffer;
  }
  return buffer;
}

std::shared_ptr<PinnedBuffer> PinnedBuffer::find(const void* ptr, size_t bytes) {
  const char* p = static_cast<const char*>(ptr);
  std::lock_guard<std::mutex> lock(g_registry_mutex);
  auto it = g_registry.upper_bound(p);
  if (it == g_registry.begin()) return nullptr;
  --it;
  auto buffer = it->second.lock();
  if (!buffer || p + bytes > it->first + buffer->size()) return nullptr;
  return buffer;
}

void PinnedBuffer::record_use(Stream& stream) {
  auto ev = std::make_shared<Event>(&stream.device(), false);
  ev->record(stream);
  std::lock_guard<std::mutex> lock(mutex_);
  // Drop uses that have completed so the list stays short.
  std::vector<EventPtr> live;
  for (auto& e : uses_) {
    if (!e->query()) live.push_back(e);
  }
  live.push_back(std::move(ev));
  uses_ = std::move(live);
}

}  // namespace chipdock
