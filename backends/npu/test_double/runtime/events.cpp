// Simulated events. Each aclrtRecordEvent is a numbered record; the event is
// complete once its latest record has been reached by its stream, which
// also takes the host timestamp (steady clock) that aclrtEventElapsedTime
// subtracts. A stream waiting on an event waits for the record that was
// latest when aclrtStreamWaitEvent was called (none: no wait).
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>

#include "runtime_internal.h"

namespace cdsim {
namespace {

constexpr uintptr_t kEventTag = uintptr_t{0x74} << 56;
constexpr uintptr_t kTagMask = uintptr_t{0xff} << 56;
using Clock = std::chrono::steady_clock;

struct Event {
  uint32_t flags = 0;
  std::mutex mutex;
  std::condition_variable reached;
  uint64_t recorded = 0;   // records issued
  uint64_t completed = 0;  // the latest record its stream has reached
  Clock::time_point timestamp;
  int32_t error = 0;       // the stream's pending error when it reached the record
  std::string error_message;
};

struct Events {
  std::mutex mutex;
  std::map<uint64_t, std::shared_ptr<Event>> live;
  uint64_t next_id = 1;
};

Events& events() {
  static Events* instance = new Events;  // never destroyed: stream tasks may run during static teardown
  return *instance;
}

uint64_t id_of(aclrtEvent handle) {
  uintptr_t bits = reinterpret_cast<uintptr_t>(handle);
  if ((bits & kTagMask) != kEventTag) return 0;
  return bits & ~kTagMask;
}

std::shared_ptr<Event> find(aclrtEvent event, const char* call) {
  Events& e = events();
  std::lock_guard<std::mutex> lock(e.mutex);
  auto it = e.live.find(id_of(event));
  if (it == e.live.end()) raise(ACL_ERROR_INVALID_PARAM, "%s: %p is not a live event", call, event);
  return it->second;
}

aclrtEvent create(uint32_t flags) {
  auto event = std::make_shared<Event>();
  event->flags = flags;
  Events& e = events();
  std::lock_guard<std::mutex> lock(e.mutex);
  uint64_t id = e.next_id++;
  e.live[id] = event;
  return reinterpret_cast<aclrtEvent>(kEventTag | id);
}

bool complete(Event& event) {
  std::lock_guard<std::mutex> lock(event.mutex);
  return event.completed >= event.recorded;
}

}  // namespace
}  // namespace cdsim

using cdsim::guarded;
using cdsim::raise;

extern "C" {

aclError aclrtCreateEvent(aclrtEvent* event) {
  return guarded([&] {
    if (!event) raise(ACL_ERROR_INVALID_PARAM, "aclrtCreateEvent: event is NULL");
    cdsim::current_device();  // events belong to the current context
    // CANN's docs: these events serve both timing and cross-stream synchronization.
    *event = cdsim::create(ACL_EVENT_SYNC | ACL_EVENT_TIME_LINE);
  });
}

aclError aclrtCreateEventWithFlag(aclrtEvent* event, uint32_t flag) {
  return guarded([&] {
    if (!event) raise(ACL_ERROR_INVALID_PARAM, "aclrtCreateEventWithFlag: event is NULL");
    constexpr uint32_t kKnown = ACL_EVENT_SYNC | ACL_EVENT_CAPTURE_STREAM_PROGRESS | ACL_EVENT_TIME_LINE |
                                ACL_EVENT_DEVICE_USE_ONLY | ACL_EVENT_EXTERNAL | ACL_EVENT_IPC;
    if (flag & ~kKnown) raise(ACL_ERROR_INVALID_PARAM, "aclrtCreateEventWithFlag: unknown flag bits 0x%x", flag);
    if ((flag & ACL_EVENT_EXTERNAL) && flag != ACL_EVENT_EXTERNAL)
      raise(ACL_ERROR_INVALID_PARAM, "aclrtCreateEventWithFlag: ACL_EVENT_EXTERNAL cannot be combined with other flags");
    cdsim::current_device();
    *event = cdsim::create(flag);
  });
}

aclError aclrtDestroyEvent(aclrtEvent event) {
  return guarded([&] {
    cdsim::Events& e = cdsim::events();
    std::lock_guard<std::mutex> lock(e.mutex);
    // Pending records and waits keep the Event object alive; the handle dies now.
    if (!e.live.erase(cdsim::id_of(event)))
      raise(ACL_ERROR_INVALID_PARAM, "aclrtDestroyEvent: %p is not a live event", event);
  });
}

aclError aclrtRecordEvent(aclrtEvent event, aclrtStream stream) {
  return guarded([&] {
    std::shared_ptr<cdsim::Event> target = cdsim::find(event, "aclrtRecordEvent");
    aclrtStream on = cdsim::resolve_stream(stream, "aclrtRecordEvent");
    uint64_t record = 0;
    {
      std::lock_guard<std::mutex> lock(target->mutex);
      record = ++target->recorded;
    }
    cdsim::enqueue_control(on, [target, record](int32_t error, const std::string& message) {
      std::lock_guard<std::mutex> lock(target->mutex);
      if (record > target->completed) {
        target->completed = record;
        target->timestamp = cdsim::Clock::now();
        target->error = error;
        target->error_message = message;
      }
      target->reached.notify_all();
    });
  });
}

aclError aclrtQueryEventStatus(aclrtEvent event, aclrtEventRecordedStatus* status) {
  return guarded([&] {
    if (!status) raise(ACL_ERROR_INVALID_PARAM, "aclrtQueryEventStatus: status is NULL");
    bool done = cdsim::complete(*cdsim::find(event, "aclrtQueryEventStatus"));
    *status = done ? ACL_EVENT_RECORDED_STATUS_COMPLETE : ACL_EVENT_RECORDED_STATUS_NOT_READY;
  });
}

// The deprecated query: same question, the opposite encoding (COMPLETE is 0).
aclError aclrtQueryEvent(aclrtEvent event, aclrtEventStatus* status) {
  return guarded([&] {
    if (!status) raise(ACL_ERROR_INVALID_PARAM, "aclrtQueryEvent: status is NULL");
    bool done = cdsim::complete(*cdsim::find(event, "aclrtQueryEvent"));
    *status = done ? ACL_EVENT_STATUS_COMPLETE : ACL_EVENT_STATUS_NOT_READY;
  });
}

aclError aclrtSynchronizeEvent(aclrtEvent event) {
  return guarded([&] {
    std::shared_ptr<cdsim::Event> target = cdsim::find(event, "aclrtSynchronizeEvent");
    std::unique_lock<std::mutex> lock(target->mutex);
    uint64_t record = target->recorded;
    target->reached.wait(lock, [&] { return target->completed >= record; });
    if (record && target->error)
      throw cdsim::SimError(target->error, "aclrtSynchronizeEvent: the event's stream failed before it: " +
                                               target->error_message);
  });
}

aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent event) {
  return guarded([&] {
    std::shared_ptr<cdsim::Event> target = cdsim::find(event, "aclrtStreamWaitEvent");
    if (!(target->flags & ACL_EVENT_SYNC))
      raise(ACL_ERROR_INVALID_PARAM, "aclrtStreamWaitEvent: event %p was created without ACL_EVENT_SYNC", event);
    aclrtStream on = cdsim::resolve_stream(stream, "aclrtStreamWaitEvent");
    uint64_t record = 0;
    {
      std::lock_guard<std::mutex> lock(target->mutex);
      record = target->recorded;
    }
    if (record == 0) return;  // never recorded: nothing to wait for
    cdsim::enqueue_control(on, [target, record](int32_t, const std::string&) {
      std::unique_lock<std::mutex> lock(target->mutex);
      target->reached.wait(lock, [&] { return target->completed >= record; });
    });
  });
}

aclError aclrtEventElapsedTime(float* ms, aclrtEvent startEvent, aclrtEvent endEvent) {
  return guarded([&] {
    if (!ms) raise(ACL_ERROR_INVALID_PARAM, "aclrtEventElapsedTime: ms is NULL");
    std::shared_ptr<cdsim::Event> ends[2] = {cdsim::find(startEvent, "aclrtEventElapsedTime"),
                                             cdsim::find(endEvent, "aclrtEventElapsedTime")};
    cdsim::Clock::time_point at[2];
    for (int i = 0; i < 2; ++i) {
      const char* which = i == 0 ? "startEvent" : "endEvent";
      std::lock_guard<std::mutex> lock(ends[i]->mutex);
      if (!(ends[i]->flags & ACL_EVENT_TIME_LINE))
        raise(ACL_ERROR_INVALID_PARAM, "aclrtEventElapsedTime: %s was created without ACL_EVENT_TIME_LINE", which);
      if (ends[i]->recorded == 0)
        raise(ACL_ERROR_INVALID_PARAM, "aclrtEventElapsedTime: %s was never recorded", which);
      if (ends[i]->completed < ends[i]->recorded)
        raise(ACL_ERROR_RT_EVENT_NOT_COMPLETE, "aclrtEventElapsedTime: %s has not completed yet", which);
      at[i] = ends[i]->timestamp;
    }
    *ms = std::chrono::duration<float, std::milli>(at[1] - at[0]).count();
  });
}

}  // extern "C"
