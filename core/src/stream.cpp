#include "stream.hpp"

#include <thread>

#include "blocking.hpp"
#include "runtime.hpp"

namespace chipdock {

namespace {

std::atomic<uint64_t> g_next_stream_id{1};

// The stream whose host callback runs on this thread (0: none). A wait for
// that stream from inside its own callback would wait for itself: such a wait
// goes straight to the plugin, which refuses it with an error.
thread_local uint64_t t_callback_stream = 0;

// Heap-held state for one host callback; the trampoline owns and frees it.
struct CallbackState {
  std::function<void()> fn;
  uint64_t stream_id = 0;
};

void run_callback(void* user_data) {
  std::unique_ptr<CallbackState> state(static_cast<CallbackState*>(user_data));
  const uint64_t previous = t_callback_stream;
  t_callback_stream = state->stream_id;
  try {
    state->fn();
  } catch (...) {
    // A host callback has nowhere to report to; the binding logs Python errors.
  }
  t_callback_stream = previous;
}

}  // namespace

// ------------------------------------------------------------------ streams --

Stream::Stream(Device* device)
    : device_(device), handle_(nullptr), id_(g_next_stream_id++), life_(std::make_shared<StreamLife>(id_)) {
  cd_stream* handle = nullptr;
  CD_CALL(device_->plugin(), stream_create, device_->ordinal(), CD_STREAM_FLAGS_DEFAULT, &handle);
  handle_ = handle;
}

Stream::~Stream() {
  // Never run under a core lock (see blocking.hpp): teardown drains the
  // stream, whose host callbacks may need the GIL and the allocator.
  UninterruptibleScope must_finish;
  BlockingSection unlocked;
  if (t_callback_stream == id_ && !destroyed()) {
    // The last reference died in one of the stream's own host callbacks (a
    // closure that held it): the plugin cannot destroy a stream from its own
    // thread, so another thread does it once the callback has returned.
    cd_stream* h = handle_.exchange(nullptr);
    std::thread([device = device_, h, life = life_] {
      if (device->plugin().is_shut_down()) return;
      cd_error* err = device->plugin().api().stream_destroy(h);
      if (err != nullptr) {
        device->plugin().api().error_destroy(err);
        return;
      }
      life->retired = true;
      device->allocator().retire_stream(life->id);
    }).detach();
    return;
  }
  try {
    teardown();
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

void Stream::wait_idle(cd_stream* h, const char* call) {
  // From one of this stream's own callbacks the plugin refuses the blocking
  // call with an error: polling would wait for itself.
  if (t_callback_stream == id_) return;
  Plugin& p = device_->plugin();
  if (p.api().stream_query != nullptr) {
    wait_interruptibly(
        [&] {
          int32_t complete = 0;
          CD_CALL(p, stream_query, h, &complete);
          return complete != 0;
        },
        call);
    return;
  }
  Event marker(device_, false);
  marker.record(*this);
  marker.synchronize();
}

void Stream::synchronize() {
  BlockingSection unlocked;  // the work may be a host callback that needs the caller's lock (the GIL)
  device_->bind_thread();
  cd_stream* h = handle("stream_synchronize");
  // Poll, so that Ctrl-C can stop the wait; the blocking call then returns
  // at once and reports the stream's asynchronous errors.
  wait_idle(h, "stream_synchronize");
  CD_CALL(device_->plugin(), stream_synchronize, h);
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
    auto* state = new CallbackState{std::move(fn), id_};
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
  std::thread([event, fn = std::move(fn), id = id_]() {
    try {
      UninterruptibleScope must_finish;
      event->synchronize();
    } catch (...) {
    }
    CallbackState* state = new CallbackState{fn, id};
    run_callback(state);
  }).detach();
}

void Stream::destroy() {
  if (is_default()) {
    throw Error(CD_STATUS_INVALID_ARGUMENT, "core", "stream_destroy",
                "the default stream of " + device_->label() +
                    " cannot be destroyed (every thread that has not chosen a stream uses it); "
                    "destroy streams you created, or synchronize() to wait for its work");
  }
  // Wait interruptibly first (Ctrl-C), then tear down, which also waits.
  if (cd_stream* h = handle_.load()) {
    BlockingSection unlocked;
    device_->bind_thread();
    wait_idle(h, "stream_destroy");
  }
  teardown();
}

void Stream::teardown() {
  cd_stream* h = handle_.exchange(nullptr);
  if (h == nullptr || device_->plugin().is_shut_down()) return;
  try {
    CD_CALL(device_->plugin(), stream_destroy, h);
  } catch (...) {
    handle_ = h;  // refused (a callback of this very stream): still usable
    throw;
  }
  // Everything the stream ran is done: its cached blocks may serve any stream.
  life_->retired = true;
  device_->allocator().retire_stream(id_);
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
  last_stream_id_ = stream.id();
}

void Event::synchronize() {
  BlockingSection unlocked;
  Plugin& p = device_->plugin();
  cd_event* h = handle("event_synchronize");
  if (t_callback_stream == 0 || t_callback_stream != last_stream_id_.load()) {
    wait_interruptibly(
        [&] {
          int32_t complete = 0;
          CD_CALL(p, event_query, h, &complete);
          return complete != 0;
        },
        "event_synchronize");
  }
  CD_CALL(p, event_synchronize, h);
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
