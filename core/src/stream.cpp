#include "stream.hpp"

#include <thread>

#include "blocking.hpp"
#include "runtime.hpp"

namespace chipdock {

namespace {

std::atomic<uint64_t> g_next_stream_id{1};

// Heap-held state for one host callback; the trampoline owns and frees it.
struct CallbackState {
  std::function<void()> fn;
};

void run_callback(void* user_data) {
  std::unique_ptr<CallbackState> state(static_cast<CallbackState*>(user_data));
  try {
    state->fn();
  } catch (...) {
    // A host callback has nowhere to report to; the binding logs Python errors.
  }
}

}  // namespace

// ------------------------------------------------------------------ streams --

Stream::Stream(Device* device) : device_(device), handle_(nullptr), id_(g_next_stream_id++) {
  cd_stream* handle = nullptr;
  CD_CALL(device_->plugin(), stream_create, device_->ordinal(), CD_STREAM_FLAGS_DEFAULT, &handle);
  handle_ = handle;
}

Stream::~Stream() {
  BlockingSection unlocked;  // destroy() drains the stream, whose callbacks may need the GIL
  try {
    destroy();
  } catch (...) {
  }
}

cd_stream* Stream::handle(const char* call) const {
  cd_stream* h = handle_.load();
  if (h == nullptr) {
    throw Error(CD_STATUS_INVALID_HANDLE, device_->plugin().name(), call, "the stream was destroyed");
  }
  return h;
}

void Stream::synchronize() {
  BlockingSection unlocked;  // the work may be a host callback that needs the caller's lock (the GIL)
  device_->bind_thread();
  CD_CALL(device_->plugin(), stream_synchronize, handle("stream_synchronize"));
}

bool Stream::query() {
  Plugin& p = device_->plugin();
  if (p.api().stream_query == nullptr) {
    Event probe(device_, false);
    probe.record(*this);
    return probe.query();
  }
  int32_t complete = 0;
  CD_CALL(p, stream_query, handle("stream_query"), &complete);
  return complete != 0;
}

void Stream::wait_event(Event& event) {
  if (&event.device() != device_) {
    throw Error(CD_STATUS_INVALID_ARGUMENT, device_->plugin().name(), "stream_wait_event",
                "the event belongs to " + event.device().label() + ", the stream to " + device_->label());
  }
  Plugin& p = device_->plugin();
  if (p.api().stream_wait_event == nullptr) {
    event.synchronize();  // fallback: the host waits instead of the device
    return;
  }
  CD_CALL(p, stream_wait_event, handle("stream_wait_event"), event.handle("stream_wait_event"));
}

void Stream::add_host_callback(std::function<void()> fn) {
  Plugin& p = device_->plugin();
  cd_stream* h = handle("stream_add_host_callback");
  if (p.api().stream_add_host_callback != nullptr) {
    auto* state = new CallbackState{std::move(fn)};
    try {
      CD_CALL(p, stream_add_host_callback, h, &run_callback, static_cast<void*>(state));
    } catch (...) {
      delete state;
      throw;
    }
    return;
  }
  // Fallback the ABI promises is always possible: an event and a host thread.
  auto event = std::make_shared<Event>(device_, false);
  event->record(*this);
  std::thread([event, fn = std::move(fn)]() {
    try {
      event->synchronize();
    } catch (...) {
    }
    CallbackState* state = new CallbackState{fn};
    run_callback(state);
  }).detach();
}

void Stream::destroy() {
  cd_stream* h = handle_.exchange(nullptr);
  if (h == nullptr || device_->plugin().is_shut_down()) return;
  CD_CALL(device_->plugin(), stream_destroy, h);
}

// ------------------------------------------------------------------- events --

Event::Event(Device* device, bool enable_timing) : device_(device), handle_(nullptr), timing_(enable_timing) {
  cd_event* handle = nullptr;
  uint32_t flags = enable_timing ? CD_EVENT_FLAGS_DEFAULT : CD_EVENT_DISABLE_TIMING;
  CD_CALL(device_->plugin(), event_create, device_->ordinal(), flags, &handle);
  handle_ = handle;
}

Event::~Event() {
  try {
    destroy();
  } catch (...) {
  }
}

cd_event* Event::handle(const char* call) const {
  cd_event* h = handle_.load();
  if (h == nullptr) {
    throw Error(CD_STATUS_INVALID_HANDLE, device_->plugin().name(), call, "the event was destroyed");
  }
  return h;
}

void Event::record(Stream& stream) {
  if (&stream.device() != device_) {
    throw Error(CD_STATUS_INVALID_ARGUMENT, device_->plugin().name(), "event_record",
                "the event belongs to " + device_->label() + ", the stream to " + stream.device().label());
  }
  CD_CALL(device_->plugin(), event_record, handle("event_record"), stream.handle("event_record"));
}

void Event::synchronize() {
  BlockingSection unlocked;
  CD_CALL(device_->plugin(), event_synchronize, handle("event_synchronize"));
}

bool Event::query() {
  int32_t complete = 0;
  CD_CALL(device_->plugin(), event_query, handle("event_query"), &complete);
  return complete != 0;
}

float Event::elapsed_ms(Event& end) {
  if (&end.device() != device_) {
    throw Error(CD_STATUS_INVALID_ARGUMENT, device_->plugin().name(), "event_elapsed_time",
                "the events belong to different devices (" + device_->label() + ", " +
                    end.device().label() + ")");
  }
  float ms = 0.0f;
  CD_CALL(device_->plugin(), event_elapsed_time, handle("event_elapsed_time"),
          end.handle("event_elapsed_time"), &ms);
  return ms;
}

void Event::destroy() {
  cd_event* h = handle_.exchange(nullptr);
  if (h == nullptr || device_->plugin().is_shut_down()) return;
  CD_CALL(device_->plugin(), event_destroy, h);
}

void wait_for_stream_point(Stream& stream) {
  Event marker(&stream.device(), false);
  marker.record(stream);
  marker.synchronize();
}

}  // namespace chipdock
