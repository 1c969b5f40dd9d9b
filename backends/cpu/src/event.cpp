// Events (see event.h).
#include "event.h"

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>

#include "device.h"
#include "error.h"
#include "handles.h"
#include "stream.h"

namespace chipdock_cpu {
namespace {

using Clock = std::chrono::steady_clock;

// One record of an event: completed by a task on `stream`.
class Marker {
 public:
  explicit Marker(const Stream* stream) : stream_(stream) {}

  void complete(bool timing) {
    std::lock_guard<std::mutex> lock(mu_);
    if (timing) when_ = Clock::now();
    done_ = true;
    cv_.notify_all();
  }
  void wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return done_; });
  }
  bool done() {
    std::lock_guard<std::mutex> lock(mu_);
    return done_;
  }
  Clock::time_point when() {
    std::lock_guard<std::mutex> lock(mu_);
    return when_;
  }
  // Identity only (never dereferenced): the stream that completes it.
  const Stream* stream() const { return stream_; }

 private:
  const Stream* const stream_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  Clock::time_point when_{};
};

struct Event {
  Event(int32_t d, uint32_t f) : device(d), flags(f) {}
  bool timing() const { return (flags & CD_EVENT_DISABLE_TIMING) == 0; }

  // The most recent record, or NULL if never recorded.
  std::shared_ptr<Marker> latest() {
    std::lock_guard<std::mutex> lock(mu);
    return marker;
  }

  const int32_t device;
  const uint32_t flags;
  std::mutex mu;  // guards marker; held across the enqueue in event_record
  std::shared_ptr<Marker> marker;
};

HandleRegistry<Event, cd_event>& registry() {
  static HandleRegistry<Event, cd_event> r("event");
  return r;
}

// Throws instead of letting a task wait for a marker that only its own
// stream, blocked by that very wait, could complete.
void refuse_self_wait(Marker& marker) {
  if (marker.stream() == current_worker_stream() && !marker.done()) {
    fail(CD_STATUS_INVALID_ARGUMENT,
         "called from a host callback of the stream that would complete the event "
         "(it would deadlock)");
  }
}

// The completed, timed marker of `event` for event_elapsed_time.
std::shared_ptr<Marker> timed_marker(cd_event* handle, const char* name) {
  std::shared_ptr<Event> event = registry().get(handle);
  if (!event->timing()) {
    fail(CD_STATUS_INVALID_ARGUMENT, "%s was created with CD_EVENT_DISABLE_TIMING", name);
  }
  std::shared_ptr<Marker> marker = event->latest();
  if (!marker) fail(CD_STATUS_INVALID_ARGUMENT, "%s was never recorded", name);
  if (!marker->done()) fail(CD_STATUS_NOT_READY, "%s has not completed yet", name);
  return marker;
}

}  // namespace

cd_event* event_create(int32_t device, uint32_t flags) {
  check_device(device);
  if ((flags & ~CD_EVENT_DISABLE_TIMING) != 0) {
    fail(CD_STATUS_INVALID_ARGUMENT, "unknown flags 0x%x (known: CD_EVENT_DISABLE_TIMING)",
         flags & ~CD_EVENT_DISABLE_TIMING);
  }
  return registry().add(std::make_shared<Event>(device, flags));
}

void event_destroy(cd_event* handle) {
  // A pending marker stays alive in its stream's task; nobody waits for it.
  registry().remove(handle);
}

void event_record(cd_event* handle, cd_stream* stream_handle) {
  std::shared_ptr<Event> event = registry().get(handle);
  std::shared_ptr<Stream> stream = stream_from_handle(stream_handle, event->device);
  auto marker = std::make_shared<Marker>(stream.get());
  const bool timing = event->timing();
  // Holding the event's lock across the enqueue makes "most recent record"
  // agree with the order of the records on the streams.
  std::lock_guard<std::mutex> lock(event->mu);
  // On an idle stream the event completes now, on this thread (small work).
  stream->enqueue("event_record", [marker, timing] { marker->complete(timing); }, true);
  event->marker = std::move(marker);
}

void event_synchronize(cd_event* handle) {
  std::shared_ptr<Marker> marker = registry().get(handle)->latest();
  if (!marker) return;  // never recorded: complete
  refuse_self_wait(*marker);
  marker->wait();
}

bool event_query(cd_event* handle) {
  std::shared_ptr<Marker> marker = registry().get(handle)->latest();
  return !marker || marker->done();
}

float event_elapsed_ms(cd_event* start, cd_event* end) {
  std::shared_ptr<Marker> a = timed_marker(start, "start");
  std::shared_ptr<Marker> b = timed_marker(end, "end");
  return std::chrono::duration<float, std::milli>(b->when() - a->when()).count();
}

void stream_wait_event(cd_stream* stream_handle, cd_event* handle) {
  std::shared_ptr<Stream> stream = stream_from_handle(stream_handle, -1);
  std::shared_ptr<Event> event = registry().get(handle);
  if (event->device != stream->device()) {
    fail(CD_STATUS_INVALID_ARGUMENT, "the event belongs to cpu:%d, the stream to cpu:%d",
         event->device, stream->device());
  }
  std::shared_ptr<Marker> marker = event->latest();
  if (!marker || marker->done()) return;  // nothing to wait for
  stream->enqueue("stream_wait_event", [marker] { marker->wait(); });
}

}  // namespace chipdock_cpu
