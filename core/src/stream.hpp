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

// What outlives a stream: its id, and whether its teardown has finished (then
// all its work is done). Blocks and tensors keep this, not the stream, so a
// long-lived tensor does not keep a dropped stream and its thread alive.
struct StreamLife {
  explicit StreamLife(uint64_t stream_id) : id(stream_id) {}
  const uint64_t id;
  std::atomic<bool> retired{false};
};
using StreamLifePtr = std::shared_ptr<StreamLife>;

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
  const StreamLifePtr& life() const noexcept { return life_; }
  // The device's default stream refuses destroy(): every thread that has not
  // chosen a stream uses it.
  bool is_default() const noexcept { return is_default_.load(); }
  void mark_default() noexcept { is_default_ = true; }

  // Interruptible (see blocking.hpp): throws Interrupted on Ctrl-C.
  void synchronize();
  bool query();
  void wait_event(Event& event);
  // Runs `fn` on a host thread after all work enqueued so far.
  void add_host_callback(std::function<void()> fn);
  // Waits for enqueued work, then releases the plugin stream. Idempotent.
  // Throws INVALID_ARGUMENT for the default stream, which stays usable.
  void destroy();
  // destroy() for any stream, default included (destructor, shutdown); then
  // hands the stream's cached blocks back to the allocator's shared pool.
  void teardown();

 private:
  // Polls until the stream is idle (interruptibly), without collecting errors.
  void wait_idle(cd_stream* h, const char* call);

  Device* device_;
  std::atomic<cd_stream*> handle_;
  uint64_t id_;
  StreamLifePtr life_;
  std::atomic<bool> is_default_{false};
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
  std::atomic<uint64_t> last_stream_id_{0};  // the stream of the latest record
};

using StreamPtr = std::shared_ptr<Stream>;
using EventPtr = std::shared_ptr<Event>;

// Blocks until the work enqueued on `stream` so far has completed, without
// waiting for work other threads enqueue later (records a private event).
void wait_for_stream_point(Stream& stream);

}  // namespace chipdock
