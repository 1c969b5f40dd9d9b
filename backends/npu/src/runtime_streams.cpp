// Streams, events, stream waits and host callbacks on AscendCL (the slots
// of runtime_slots.h, and native_stream / stream_device of runtime.h).
//
// Handles are tokens (never reused) for StreamState / EventState objects
// kept in registries of live ones, so a destroyed, unknown or foreign handle
// (an event passed as a stream) is found missing and reported as
// INVALID_HANDLE instead of reaching the runtime. The registries hold shared_ptrs: a slot
// running on one thread keeps its object alive while another destroys it.
//
// Host callbacks run in stream order, each after the work enqueued before
// it, on one of two mechanisms:
//   - aclrtLaunchHostFunc (ACL >= 1.x in CANN 8): the runtime runs them;
//   - otherwise, or with CHIPDOCK_NPU_CALLBACKS=report: aclrtSubscribeReport
//     + aclrtLaunchCallback(ACL_CALLBACK_BLOCK) + a thread looping
//     aclrtProcessReport. That thread is per stream (started with the
//     stream's first callback, joined when the stream is destroyed): a
//     callback that blocks (a gate) then holds only its own stream, never
//     the callbacks of another stream.
// ACL_CALLBACK_BLOCK makes the stream wait for the callback, so later work
// of the stream starts only after it returned.
#include <acl/acl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
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

// How long one aclrtProcessReport call waits for a callback report before
// the report thread looks at its stop flag again; also the longest a stream
// destroy waits for the thread to notice.
constexpr int32_t kReportTimeoutMs = 20;

struct CallbackTask;

struct StreamState {
  int32_t device = 0;
  aclrtStream native = nullptr;
  std::mutex mutex;                           // guards everything below
  cd_error* async_error = nullptr;            // first failure of the report thread
  std::thread reporter;                       // report mode, started lazily
  std::atomic<bool> stop_reporter{false};
  bool subscribed = false;
  bool destroyed = false;                     // no report thread may start any more
  std::unordered_set<CallbackTask*> pending;  // launched callbacks that have not run

  ~StreamState() {
    // Only reached after stop_reporter; a guard against std::terminate.
    stop_reporter = true;
    if (reporter.joinable()) reporter.join();
  }
};

struct EventState {
  int32_t device = 0;
  uint32_t flags = 0;
  aclrtEvent native = nullptr;
  std::atomic<bool> recorded{false};
  std::mutex mutex;                                // guards the two below
  std::weak_ptr<StreamState> last_stream;          // where it was last recorded
  std::vector<std::weak_ptr<StreamState>> waiters; // streams that waited on it
};

// One launched host callback: the trampoline's argument.
struct CallbackTask {
  cd_host_callback_fn fn;       // the caller's callback, or
  void* user_data;
  std::function<void()> work;   // the plug-in's own host work (enqueue_host_work)
  StreamState* stream;          // compared and locked only before it runs
};

// The stream whose host callback runs on this thread (nullptr: none).
thread_local const StreamState* t_callback_stream = nullptr;

// Handles are never reused: an object's address would be (the next
// make_shared lands where a destroyed one lived), turning a destroyed handle
// into a live one. One counter for streams and events, so an event passed as
// a stream is unknown. 16-aligned values in a range no host allocation of
// ours hands out; the core never dereferences them.
void* next_handle() {
  static std::atomic<uintptr_t> counter{0};
  constexpr uintptr_t kBase = 0x5D0000000000u;
  return reinterpret_cast<void*>(kBase + 16 * (counter.fetch_add(1) + 1));
}

template <typename T>
class Registry {
 public:
  explicit Registry(const char* kind) : kind_(kind) {}

  void* add(std::shared_ptr<T> object) {
    void* handle = next_handle();
    std::lock_guard<std::mutex> lock(mutex_);
    live_.emplace(handle, std::move(object));
    return handle;
  }

  std::shared_ptr<T> get(const void* handle) const {
    if (handle == nullptr) fail(CD_STATUS_INVALID_ARGUMENT, "%s is NULL", kind_);
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = live_.find(handle);
    if (it == live_.end()) fail(CD_STATUS_INVALID_HANDLE, "unknown or destroyed %s %p", kind_, handle);
    return it->second;
  }

  std::shared_ptr<T> remove(const void* handle) {
    std::shared_ptr<T> object = get(handle);
    std::lock_guard<std::mutex> lock(mutex_);
    if (live_.erase(handle) == 0) fail(CD_STATUS_INVALID_HANDLE, "%s %p destroyed concurrently", kind_, handle);
    return object;
  }

  std::vector<std::shared_ptr<T>> all() const {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<std::shared_ptr<T>> out;
    for (const auto& entry : live_) out.push_back(entry.second);
    return out;
  }

  std::vector<std::shared_ptr<T>> remove_all() {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<std::shared_ptr<T>> out;
    for (auto& entry : live_) out.push_back(std::move(entry.second));
    live_.clear();
    return out;
  }

 private:
  const char* kind_;
  mutable std::mutex mutex_;
  std::unordered_map<const void*, std::shared_ptr<T>> live_;
};

Registry<StreamState>& streams() {
  static auto* r = new Registry<StreamState>("stream");  // never destroyed: slots may run at exit
  return *r;
}

Registry<EventState>& events() {
  static auto* r = new Registry<EventState>("event");
  return *r;
}

// --- destroyed events whose native event is still in use -------------------------
// aclrtDestroyEvent must not run while a record of the event is pending or a
// stream still has to pass a wait on it (acl_rt.h); the ABI's event_destroy
// must not wait. Such events are parked here and destroyed once complete and
// every stream that waited on them is idle (checked on later event slots and
// at shutdown).
struct ParkedEvent {
  int32_t device;
  aclrtEvent native;
  std::vector<std::weak_ptr<StreamState>> waiters;
};
std::mutex g_parked_mutex;
std::vector<ParkedEvent> g_parked;

bool event_complete(aclrtEvent native) {
  aclrtEventRecordedStatus status = ACL_EVENT_RECORDED_STATUS_NOT_READY;
  // aclrtQueryEventStatus, never the deprecated aclrtQueryEvent, whose
  // aclrtEventStatus encodes COMPLETE as 0 (this enum: NOT_READY 0, COMPLETE 1).
  check_acl(acl().aclrtQueryEventStatus(native, &status), "aclrtQueryEventStatus");
  return status == ACL_EVENT_RECORDED_STATUS_COMPLETE;
}

bool stream_idle(aclrtStream native) {
  aclrtStreamStatus status = ACL_STREAM_STATUS_NOT_READY;
  check_acl(acl().aclrtStreamQuery(native, &status), "aclrtStreamQuery");
  return status == ACL_STREAM_STATUS_COMPLETE;
}

bool waiters_idle(const std::vector<std::weak_ptr<StreamState>>& waiters) {
  for (const auto& weak : waiters) {
    std::shared_ptr<StreamState> s = weak.lock();
    if (s != nullptr && !stream_idle(s->native)) return false;  // a destroyed stream was synchronized
  }
  return true;
}

// Destroys the parked events of `device` that nothing uses any more, with
// `device`'s context already bound on this thread (reclaiming never rebinds:
// the caller's next runtime call needs its own device's context). Never
// throws.
void reclaim_parked_events(int32_t device) noexcept {
  std::lock_guard<std::mutex> lock(g_parked_mutex);
  auto done = std::remove_if(g_parked.begin(), g_parked.end(), [device](ParkedEvent& p) {
    try {
      if (p.device != device || !event_complete(p.native) || !waiters_idle(p.waiters)) return false;
      (void)acl().aclrtDestroyEvent(p.native);
    } catch (...) {
      return false;  // unsure: keep it for the next pass (shutdown destroys it)
    }
    return true;
  });
  g_parked.erase(done, g_parked.end());
}

// Shutdown: destroys every parked event. Every stream has been synchronized
// or destroyed by then, so nothing waits for them any more (and a record
// skipped by a stream in error would never complete).
void destroy_parked_events() noexcept {
  std::lock_guard<std::mutex> lock(g_parked_mutex);
  for (const ParkedEvent& p : g_parked) {
    try {
      bind_device(p.device);
      (void)acl().aclrtDestroyEvent(p.native);
    } catch (...) {
      // The runtime is gone: nothing left to release through it.
    }
  }
  g_parked.clear();
}

// --- host callbacks ----------------------------------------------------------------

enum class CallbackMechanism { kHostFunc, kReport };

CallbackMechanism callback_mechanism() {
  static const CallbackMechanism mechanism = [] {
    const char* knob = std::getenv("CHIPDOCK_NPU_CALLBACKS");
    const std::string value = knob == nullptr ? "" : knob;
    if (!value.empty() && value != "report" && value != "host-func" && value != "auto") {
      chipdock::support::log_message(CD_LOG_WARNING, "npu: CHIPDOCK_NPU_CALLBACKS=" + value +
                                                         " is not one of auto, host-func, report; using auto");
    }
    const bool has_host_func = acl().aclrtLaunchHostFunc != nullptr;
    if (value == "host-func" && !has_host_func) {
      chipdock::support::log_message(CD_LOG_WARNING,
                                     "npu: CHIPDOCK_NPU_CALLBACKS=host-func, but the runtime lacks aclrtLaunchHostFunc");
    }
    // Older runtimes lack aclrtLaunchHostFunc: the report mechanism then.
    const CallbackMechanism chosen =
        value == "report" || !has_host_func ? CallbackMechanism::kReport : CallbackMechanism::kHostFunc;
    chipdock::support::log_message(
        CD_LOG_INFO, chosen == CallbackMechanism::kHostFunc
                         ? "npu: host callbacks run through aclrtLaunchHostFunc"
                         : std::string("npu: host callbacks run through aclrtSubscribeReport + aclrtLaunchCallback "
                                       "+ a report thread per stream (") +
                               (has_host_func ? "CHIPDOCK_NPU_CALLBACKS=report" : "the runtime lacks aclrtLaunchHostFunc") +
                               ")");
    return chosen;
  }();
  return mechanism;
}

void run_host_callback(void* arg) {
  std::unique_ptr<CallbackTask> task(static_cast<CallbackTask*>(arg));
  StreamState* stream = task->stream;
  {
    std::lock_guard<std::mutex> lock(stream->mutex);
    stream->pending.erase(task.get());
  }
  // From here on the stream may be destroyed (by another thread, once this
  // returns): it is only compared, never touched.
  const StreamState* previous = t_callback_stream;
  t_callback_stream = stream;
  if (task->fn != nullptr) {
    task->fn(task->user_data);  // a C function: it cannot throw
  } else {
    try {
      task->work();
    } catch (const std::exception& e) {
      chipdock::support::log_message(CD_LOG_ERROR, std::string("npu: host work on a stream failed: ") + e.what());
    }
  }
  t_callback_stream = previous;
}

void record_async_error(StreamState& s, cd_status_t code, const std::string& message) noexcept {
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.async_error == nullptr) {
    s.async_error = chipdock::support::make_error(code, message);
  }
}

bool is_report_timeout(aclError rc) {
  return rc == ACL_ERROR_WAIT_CALLBACK_TIMEOUT || rc == ACL_ERROR_RT_REPORT_TIMEOUT;
}

// The report thread of one stream: runs the stream's callbacks (on this
// thread) until told to stop.
void report_loop(StreamState* s) noexcept {
  try {
    bind_device(s->device);
  } catch (const std::exception& e) {
    record_async_error(*s, CD_STATUS_DEVICE_ERROR,
                       format("the host-callback report thread could not bind npu:%d: %s", s->device, e.what()));
    return;
  }
  while (!s->stop_reporter.load()) {
    const aclError rc = acl().aclrtProcessReport(kReportTimeoutMs);
    if (rc == ACL_SUCCESS || is_report_timeout(rc)) continue;
    if (rc == ACL_ERROR_THREAD_NOT_SUBSCRIBE) {
      // Not subscribed yet (the subscription follows the thread's start) or
      // any more (the stream is being destroyed): look again shortly.
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      continue;
    }
    record_async_error(*s, acl_error_status(rc),
                       format("aclrtProcessReport failed: %d %s (%s)", rc, acl_error_name(rc),
                              recent_error_message().c_str()));
    std::this_thread::sleep_for(std::chrono::milliseconds(kReportTimeoutMs));
  }
}

// Report mode: the stream's report thread, started and subscribed on first use.
void ensure_reporter(StreamState& s) {
  std::thread failed;
  aclError rc = ACL_SUCCESS;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.destroyed) fail(CD_STATUS_INVALID_HANDLE, "the stream is being destroyed");
    if (s.subscribed) return;
    s.stop_reporter = false;
    s.reporter = std::thread(report_loop, &s);
    rc = acl().aclrtSubscribeReport(static_cast<uint64_t>(s.reporter.native_handle()), s.native);
    if (rc == ACL_SUCCESS) {
      s.subscribed = true;
      return;
    }
    s.stop_reporter = true;
    failed = std::move(s.reporter);
  }
  failed.join();  // outside the lock: the thread may be recording an error under it
  check_acl(rc, "aclrtSubscribeReport");
}

// Stops and joins the stream's report thread (after its work completed).
void stop_reporter(StreamState& s) noexcept {
  std::thread reporter;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    s.destroyed = true;
    if (!s.subscribed) return;
    s.subscribed = false;
    s.stop_reporter = true;
    (void)acl().aclrtUnSubscribeReport(static_cast<uint64_t>(s.reporter.native_handle()), s.native);
    reporter = std::move(s.reporter);
  }
  if (reporter.get_id() == std::this_thread::get_id()) {
    reporter.detach();  // refused earlier on this path; a guard against std::terminate
  } else {
    reporter.join();
  }
}

// Frees the tasks of callbacks the runtime will never run (a stream in error
// skips its remaining work). Call after the stream's work completed.
void drop_pending_callbacks(StreamState& s) noexcept {
  std::lock_guard<std::mutex> lock(s.mutex);
  for (CallbackTask* task : s.pending) delete task;
  s.pending.clear();
}

// --- streams -------------------------------------------------------------------------

std::shared_ptr<StreamState> live_stream(cd_stream* stream) {
  return streams().get(stream);
}

std::shared_ptr<EventState> live_event(cd_event* event) { return events().get(event); }

void check_same_device(int32_t event_device, int32_t stream_device) {
  if (event_device != stream_device) {
    fail(CD_STATUS_INVALID_ARGUMENT, "the event belongs to npu:%d, the stream to npu:%d", event_device,
         stream_device);
  }
}

cd_stream* stream_create(int32_t device, uint32_t flags) {
  if (flags != CD_STREAM_FLAGS_DEFAULT) {
    fail(CD_STATUS_INVALID_ARGUMENT, "flags 0x%x are not valid (v1 knows only 0)", flags);
  }
  bind_device(device);
  auto s = std::make_shared<StreamState>();
  s->device = device;
  // Priority 0 (the default); FAST_LAUNCH preallocates the stream's task
  // resources, as torch-npu and PaddleCustomDevice create theirs.
  check_acl(acl().aclrtCreateStreamWithConfig(&s->native, 0, ACL_STREAM_FAST_LAUNCH),
            "aclrtCreateStreamWithConfig");
  return static_cast<cd_stream*>(streams().add(std::move(s)));
}

// Frees an error nobody will see (the static out-of-memory one is kept).
void discard(cd_error* error) noexcept {
  if (error != nullptr && !error->is_static) delete error;
}

cd_error* take_async_error(StreamState& s) noexcept {
  std::lock_guard<std::mutex> lock(s.mutex);
  return std::exchange(s.async_error, nullptr);
}

// aclrtSynchronizeStream's failure as an error, or the stream's own
// asynchronous error; each is handed over once.
cd_error* synchronize(StreamState& s) {
  const aclError rc = acl().aclrtSynchronizeStream(s.native);
  cd_error* own = take_async_error(s);
  if (rc != ACL_SUCCESS) {
    discard(own);
    check_acl(rc, "aclrtSynchronizeStream");
  }
  return own;
}

void check_not_in_own_callback(const StreamState& s, const char* call) {
  if (t_callback_stream == &s) {
    fail(CD_STATUS_INVALID_ARGUMENT, "%s called from a host callback of the same stream (it would deadlock)", call);
  }
}

cd_error* stream_destroy(cd_stream* stream) {
  {
    std::shared_ptr<StreamState> s = live_stream(stream);
    // Refuse before unregistering, so the handle stays usable on refusal.
    check_not_in_own_callback(*s, "stream_destroy");
  }
  std::shared_ptr<StreamState> s = streams().remove(stream);
  bind_device(s->device);
  // The ABI's destroy waits; aclrtDestroyStream also requires it (acl_rt.h).
  const aclError rc = acl().aclrtSynchronizeStream(s->native);
  stop_reporter(*s);
  drop_pending_callbacks(*s);
  cd_error* own = take_async_error(*s);
  const aclError destroyed = acl().aclrtDestroyStream(s->native);
  if (rc != ACL_SUCCESS || destroyed != ACL_SUCCESS) {
    discard(own);
    check_acl(rc, "aclrtSynchronizeStream");
    check_acl(destroyed, "aclrtDestroyStream");
  }
  return own;
}

void launch_callback(cd_stream* stream, std::unique_ptr<CallbackTask> task) {
  std::shared_ptr<StreamState> s = live_stream(stream);
  task->stream = s.get();
  bind_device(s->device);
  const CallbackMechanism mechanism = callback_mechanism();
  if (mechanism == CallbackMechanism::kReport) ensure_reporter(*s);
  CallbackTask* raw = task.get();
  {
    std::lock_guard<std::mutex> lock(s->mutex);
    s->pending.insert(raw);
  }
  const aclError rc = mechanism == CallbackMechanism::kHostFunc
                          ? acl().aclrtLaunchHostFunc(s->native, run_host_callback, raw)
                          : acl().aclrtLaunchCallback(run_host_callback, raw, ACL_CALLBACK_BLOCK, s->native);
  if (rc != ACL_SUCCESS) {
    std::lock_guard<std::mutex> lock(s->mutex);
    s->pending.erase(raw);
  } else {
    task.release();  // run_host_callback owns it now (or drop_pending_callbacks)
  }
  check_acl(rc, mechanism == CallbackMechanism::kHostFunc ? "aclrtLaunchHostFunc" : "aclrtLaunchCallback");
}

void add_host_callback(cd_stream* stream, cd_host_callback_fn fn, void* user_data) {
  live_stream(stream);  // a bad handle is named before a bad fn
  if (fn == nullptr) fail(CD_STATUS_INVALID_ARGUMENT, "fn is NULL");
  launch_callback(stream, std::make_unique<CallbackTask>(CallbackTask{fn, user_data, {}, nullptr}));
}

// --- events --------------------------------------------------------------------------

cd_event* event_create(int32_t device, uint32_t flags) {
  if ((flags & ~CD_EVENT_DISABLE_TIMING) != 0) {
    fail(CD_STATUS_INVALID_ARGUMENT, "flags 0x%x are not valid (v1 knows CD_EVENT_DISABLE_TIMING only)", flags);
  }
  bind_device(device);
  reclaim_parked_events(device);
  auto e = std::make_shared<EventState>();
  e->device = device;
  e->flags = flags;
  // ACL_EVENT_SYNC: usable by aclrtSynchronizeEvent and aclrtStreamWaitEvent;
  // ACL_EVENT_TIME_LINE: takes a timestamp (aclrtEventElapsedTime needs it).
  const uint32_t acl_flags = ACL_EVENT_SYNC | ((flags & CD_EVENT_DISABLE_TIMING) ? 0u : ACL_EVENT_TIME_LINE);
  check_acl(acl().aclrtCreateEventWithFlag(&e->native, acl_flags), "aclrtCreateEventWithFlag");
  return static_cast<cd_event*>(events().add(std::move(e)));
}

void event_destroy(cd_event* event) {
  std::shared_ptr<EventState> e = events().remove(event);
  bind_device(e->device);
  std::vector<std::weak_ptr<StreamState>> waiters;
  {
    std::lock_guard<std::mutex> lock(e->mutex);
    waiters = e->waiters;
  }
  bool in_use = false;
  try {
    in_use = e->recorded && (!event_complete(e->native) || !waiters_idle(waiters));
  } catch (...) {
    in_use = true;  // unsure: park it rather than destroy what a stream may still use
  }
  if (in_use) {
    std::lock_guard<std::mutex> lock(g_parked_mutex);
    g_parked.push_back(ParkedEvent{e->device, e->native, std::move(waiters)});
  } else {
    check_acl(acl().aclrtDestroyEvent(e->native), "aclrtDestroyEvent");
  }
  reclaim_parked_events(e->device);
}

void event_record(cd_event* event, cd_stream* stream) {
  std::shared_ptr<EventState> e = live_event(event);
  std::shared_ptr<StreamState> s = live_stream(stream);
  check_same_device(e->device, s->device);
  bind_device(s->device);
  check_acl(acl().aclrtRecordEvent(e->native, s->native), "aclrtRecordEvent");
  std::lock_guard<std::mutex> lock(e->mutex);
  e->last_stream = s;
  e->recorded = true;
}

int32_t event_query(cd_event* event) {
  std::shared_ptr<EventState> e = live_event(event);
  if (!e->recorded) return 1;  // a new event counts as complete (device_api.h)
  bind_device(e->device);
  return event_complete(e->native) ? 1 : 0;
}

void event_synchronize(cd_event* event) {
  std::shared_ptr<EventState> e = live_event(event);
  if (!e->recorded) return;
  bind_device(e->device);
  std::shared_ptr<StreamState> recorded_on;
  {
    std::lock_guard<std::mutex> lock(e->mutex);
    recorded_on = e->last_stream.lock();
  }
  if (recorded_on != nullptr && t_callback_stream == recorded_on.get() && !event_complete(e->native)) {
    fail(CD_STATUS_INVALID_ARGUMENT,
         "called from a host callback of the stream that would complete the event (it would deadlock)");
  }
  check_acl(acl().aclrtSynchronizeEvent(e->native), "aclrtSynchronizeEvent");
}

float event_elapsed_time(cd_event* start, cd_event* end) {
  std::shared_ptr<EventState> first = live_event(start);
  std::shared_ptr<EventState> last = live_event(end);
  for (const EventState* e : {first.get(), last.get()}) {
    const char* which = e == first.get() ? "start" : "end";
    if (e->flags & CD_EVENT_DISABLE_TIMING) {
      fail(CD_STATUS_INVALID_ARGUMENT, "the %s event was created with CD_EVENT_DISABLE_TIMING", which);
    }
    if (!e->recorded) fail(CD_STATUS_INVALID_ARGUMENT, "the %s event was never recorded", which);
  }
  if (first->device != last->device) {
    fail(CD_STATUS_INVALID_ARGUMENT, "the events belong to npu:%d and npu:%d", first->device, last->device);
  }
  bind_device(first->device);
  for (const EventState* e : {first.get(), last.get()}) {
    if (!event_complete(e->native)) {
      fail(CD_STATUS_NOT_READY, "the %s event has not completed", e == first.get() ? "start" : "end");
    }
  }
  float ms = 0.0f;
  check_acl(acl().aclrtEventElapsedTime(&ms, first->native, last->native), "aclrtEventElapsedTime");
  return ms;
}

void stream_wait_event(cd_stream* stream, cd_event* event) {
  std::shared_ptr<StreamState> s = live_stream(stream);
  std::shared_ptr<EventState> e = live_event(event);
  check_same_device(e->device, s->device);
  if (!e->recorded) return;  // an event never recorded imposes no wait (device_api.h)
  bind_device(s->device);
  check_acl(acl().aclrtStreamWaitEvent(s->native, e->native), "aclrtStreamWaitEvent");
  std::lock_guard<std::mutex> lock(e->mutex);
  auto& waiters = e->waiters;
  waiters.erase(std::remove_if(waiters.begin(), waiters.end(), [](const auto& w) { return w.expired(); }),
                waiters.end());
  const bool known = std::any_of(waiters.begin(), waiters.end(),
                                 [&](const std::weak_ptr<StreamState>& w) { return w.lock() == s; });
  if (!known) waiters.push_back(s);
}

}  // namespace

// --- runtime.h / runtime_internal.h ------------------------------------------------

aclrtStream native_stream(cd_stream* stream) { return live_stream(stream)->native; }

int32_t stream_device(cd_stream* stream) { return live_stream(stream)->device; }

aclrtStream bound_stream(cd_stream* stream, int32_t device, const char* what) {
  std::shared_ptr<StreamState> s = live_stream(stream);
  if (s->device != device) {
    fail(CD_STATUS_INVALID_ARGUMENT, "%s: the stream belongs to npu:%d, not npu:%d", what, s->device, device);
  }
  bind_device(device);
  return s->native;
}

void enqueue_host_work(cd_stream* stream, std::function<void()> work) {
  launch_callback(stream, std::make_unique<CallbackTask>(CallbackTask{nullptr, nullptr, std::move(work), nullptr}));
}

void refuse_inside_own_callback(cd_stream* stream, const char* call) {
  check_not_in_own_callback(*live_stream(stream), call);
}

cd_error* take_device_async_error(int32_t device) noexcept {
  for (const auto& s : streams().all()) {
    if (s->device != device) continue;
    if (cd_error* e = take_async_error(*s)) return e;
  }
  return nullptr;
}

void shutdown_runtime() noexcept {
  // The core released everything it made; whatever is left was leaked by a
  // caller of the raw table. Wait for it and release it.
  try {
    for (const auto& s : streams().remove_all()) {
      try {
        bind_device(s->device);
        (void)acl().aclrtSynchronizeStream(s->native);
      } catch (...) {
      }
      stop_reporter(*s);
      drop_pending_callbacks(*s);
      discard(take_async_error(*s));
      (void)acl().aclrtDestroyStream(s->native);
    }
    for (const auto& e : events().remove_all()) {
      std::lock_guard<std::mutex> lock(g_parked_mutex);
      g_parked.push_back(ParkedEvent{e->device, e->native, {}});
    }
  } catch (...) {
    // acl() itself failed: nothing was ever created.
  }
  destroy_parked_events();
  release_memory();
}

// --- the slots -----------------------------------------------------------------------

cd_error* api_stream_create(int32_t device, uint32_t flags, cd_stream** stream) noexcept {
  return guard("stream_create", [&] {
    require_non_null(stream, "stream");
    *stream = stream_create(device, flags);
  });
}

cd_error* api_stream_destroy(cd_stream* stream) noexcept {
  return guard("stream_destroy", [&] { return stream_destroy(stream); });
}

cd_error* api_stream_synchronize(cd_stream* stream) noexcept {
  return guard("stream_synchronize", [&] {
    std::shared_ptr<StreamState> s = live_stream(stream);
    check_not_in_own_callback(*s, "stream_synchronize");
    bind_device(s->device);
    return synchronize(*s);
  });
}

cd_error* api_stream_query(cd_stream* stream, int32_t* is_complete) noexcept {
  return guard("stream_query", [&] {
    require_non_null(is_complete, "is_complete");
    std::shared_ptr<StreamState> s = live_stream(stream);
    bind_device(s->device);
    *is_complete = stream_idle(s->native) ? 1 : 0;
  });
}

cd_error* api_stream_wait_event(cd_stream* stream, cd_event* event) noexcept {
  return guard("stream_wait_event", [&] { stream_wait_event(stream, event); });
}

cd_error* api_stream_add_host_callback(cd_stream* stream, cd_host_callback_fn fn, void* user_data) noexcept {
  return guard("stream_add_host_callback", [&] { add_host_callback(stream, fn, user_data); });
}

cd_error* api_event_create(int32_t device, uint32_t flags, cd_event** event) noexcept {
  return guard("event_create", [&] {
    require_non_null(event, "event");
    *event = event_create(device, flags);
  });
}

cd_error* api_event_destroy(cd_event* event) noexcept {
  return guard("event_destroy", [&] { event_destroy(event); });
}

cd_error* api_event_record(cd_event* event, cd_stream* stream) noexcept {
  return guard("event_record", [&] { event_record(event, stream); });
}

cd_error* api_event_synchronize(cd_event* event) noexcept {
  return guard("event_synchronize", [&] { event_synchronize(event); });
}

cd_error* api_event_query(cd_event* event, int32_t* is_complete) noexcept {
  return guard("event_query", [&] {
    require_non_null(is_complete, "is_complete");
    *is_complete = event_query(event);
  });
}

cd_error* api_event_elapsed_time(cd_event* start, cd_event* end, float* milliseconds) noexcept {
  return guard("event_elapsed_time", [&] {
    require_non_null(milliseconds, "milliseconds");
    *milliseconds = event_elapsed_time(start, end);
  });
}

}  // namespace chipdock_npu
