// Streams and events: owned wrappers over plugin handles that refuse to be
// used after destroy() instead of handing a dangling handle to the plugin.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>

#include "chipdock/device_api.h"

namespace chipdock {

class Device;
class Event;

class Stream {
 public:
  // Creates a new stream on `device`.
  explicit Stream(Device* device);
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  Device& device() const noexcept { return *device_; }
  // The plugin handle; throws INVALID_HANDLE naming `call` once destroyed.
  cd_stream* handle(const char* call) const;
  bool destroyed() const noexcept { return handle_.load() == nullptr; }
  uint64_t id() const noexcept { return id_; }

  void synchronize();
  bool query();
  void wait_event(Event& event);
  // Runs `fn` on a host thread after all work enqueued so far.
  void add_host_callback(std::function<void()> fn);
  // Waits for enqueued work, then releases the plugin stream. Idempotent.
  void destroy();

 private:
  Device* device_;
  std::atomic<cd_stream*> handle_;
  uint64_t id_;
};

class Event {
 public:
  Event(Device* device, bool enable_timing);
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  Device& device() const noexcept { return *device_; }
  cd_event* handle(const char* call) const;
  bool destroyed() const noexcept { return handle_.load() == nullptr; }
  bool timing() const noexcept { return timing_; }

  void record(Stream& stream);
  void synchronize();
  bool query();
  // Milliseconds from this event to `end`.
  float elapsed_ms(Event& end);
  void destroy();

 private:
  Device* device_;
  std::atomic<cd_event*> handle_;
  bool timing_;
};

using StreamPtr = std::shared_ptr<Stream>;
using EventPtr = std::shared_ptr<Event>;

// Blocks until the work enqueued on `stream` so far has completed, without
// waiting for work other threads enqueue later (records a private event).
void wait_for_stream_point(Stream& stream);

}  // namespace chipdock
