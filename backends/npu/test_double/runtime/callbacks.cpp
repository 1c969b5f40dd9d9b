// Host callbacks in stream order, both of CANN's mechanisms:
// - aclrtLaunchHostFunc: the stream's own thread calls fn when it gets there
//   (the stream waits for it to return);
// - aclrtSubscribeReport + aclrtLaunchCallback + aclrtProcessReport: when the
//   stream gets there it hands the callback to the subscribed thread, which
//   runs it inside its next aclrtProcessReport; ACL_CALLBACK_BLOCK makes the
//   stream wait until it ran.
// Both run after an earlier task failed too: they are host work, and a
// skipped callback would leave whoever waits on it hanging.
#include <pthread.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>

#include "runtime_internal.h"

namespace cdsim {
namespace {

struct Done {
  bool ran = false;
};

struct Report {
  aclrtCallback fn = nullptr;
  void* data = nullptr;
  std::shared_ptr<Done> done;
};

struct Subscriber {
  std::deque<Report> queue;
  int streams = 0;  // streams subscribed to this thread
  int32_t device = 0;
};

struct Callbacks {
  std::mutex mutex;
  std::condition_variable changed;  // a report arrived or ran
  std::map<uintptr_t, uint64_t> thread_of_stream;
  std::map<uint64_t, std::shared_ptr<Subscriber>> subscribers;  // by thread id
};

Callbacks& callbacks() {
  static Callbacks* instance = new Callbacks;  // never destroyed: stream tasks may run during static teardown
  return *instance;
}

uintptr_t key(aclrtStream stream) { return reinterpret_cast<uintptr_t>(stream); }

// Drops a subscriber that has no stream and nothing left to run (lock held).
void prune(Callbacks& c, uint64_t thread) {
  auto it = c.subscribers.find(thread);
  if (it != c.subscribers.end() && it->second->streams == 0 && it->second->queue.empty()) c.subscribers.erase(it);
}

// The stream task of aclrtLaunchCallback: hand the report over, maybe wait.
void deliver(aclrtStream stream, aclrtCallback fn, void* data, bool block) {
  Callbacks& c = callbacks();
  std::unique_lock<std::mutex> lock(c.mutex);
  auto thread = c.thread_of_stream.find(key(stream));
  if (thread == c.thread_of_stream.end())
    raise(ACL_ERROR_STREAM_NOT_SUBSCRIBE, "aclrtLaunchCallback: the stream was unsubscribed before its callback ran");
  auto done = std::make_shared<Done>();
  c.subscribers[thread->second]->queue.push_back(Report{fn, data, done});
  c.changed.notify_all();
  if (block) c.changed.wait(lock, [&] { return done->ran; });
}

}  // namespace

void forget_subscription(aclrtStream stream) noexcept {
  Callbacks& c = callbacks();
  std::lock_guard<std::mutex> lock(c.mutex);
  auto it = c.thread_of_stream.find(key(stream));
  if (it == c.thread_of_stream.end()) return;
  uint64_t thread = it->second;
  c.thread_of_stream.erase(it);
  auto subscriber = c.subscribers.find(thread);
  if (subscriber != c.subscribers.end()) --subscriber->second->streams;
  prune(c, thread);
}

}  // namespace cdsim

using cdsim::guarded;
using cdsim::raise;

extern "C" {

aclError aclrtLaunchHostFunc(aclrtStream stream, aclrtHostFunc fn, void* args) {
  return guarded([&] {
    if (!fn) raise(ACL_ERROR_INVALID_PARAM, "aclrtLaunchHostFunc: fn is NULL");
    aclrtStream on = cdsim::resolve_stream(stream, "aclrtLaunchHostFunc");
    cdsim::enqueue_control(on, [fn, args](int32_t, const std::string&) { fn(args); });
  });
}

aclError aclrtSubscribeReport(uint64_t threadId, aclrtStream stream) {
  return guarded([&] {
    aclrtStream on = cdsim::resolve_stream(stream, "aclrtSubscribeReport");
    int32_t device = cdsim::stream_device(on);
    cdsim::Callbacks& c = cdsim::callbacks();
    std::lock_guard<std::mutex> lock(c.mutex);
    if (c.thread_of_stream.count(cdsim::key(on)))
      raise(ACL_ERROR_REPEAT_SUBSCRIBE, "aclrtSubscribeReport: the stream already has a callback thread");
    auto& subscriber = c.subscribers[threadId];
    if (!subscriber) {
      subscriber = std::make_shared<cdsim::Subscriber>();
      subscriber->device = device;
    } else if (subscriber->device != device) {
      raise(ACL_ERROR_INVALID_PARAM,
            "aclrtSubscribeReport: thread %llu already serves device %d; one thread serves one device's streams",
            static_cast<unsigned long long>(threadId), subscriber->device);
    }
    ++subscriber->streams;
    c.thread_of_stream[cdsim::key(on)] = threadId;
  });
}

aclError aclrtUnSubscribeReport(uint64_t threadId, aclrtStream stream) {
  return guarded([&] {
    aclrtStream on = cdsim::resolve_stream(stream, "aclrtUnSubscribeReport");
    cdsim::Callbacks& c = cdsim::callbacks();
    std::lock_guard<std::mutex> lock(c.mutex);
    auto it = c.thread_of_stream.find(cdsim::key(on));
    if (it == c.thread_of_stream.end() || it->second != threadId)
      raise(ACL_ERROR_STREAM_NOT_SUBSCRIBE, "aclrtUnSubscribeReport: the stream is not subscribed to thread %llu",
            static_cast<unsigned long long>(threadId));
    c.thread_of_stream.erase(it);
    --c.subscribers[threadId]->streams;
    cdsim::prune(c, threadId);  // reports still queued stay until the thread processed them
  });
}

aclError aclrtLaunchCallback(aclrtCallback fn, void* userData, aclrtCallbackBlockType blockType, aclrtStream stream) {
  return guarded([&] {
    if (!fn) raise(ACL_ERROR_INVALID_PARAM, "aclrtLaunchCallback: fn is NULL");
    if (blockType != ACL_CALLBACK_NO_BLOCK && blockType != ACL_CALLBACK_BLOCK)
      raise(ACL_ERROR_INVALID_PARAM, "aclrtLaunchCallback: blockType %d is not an aclrtCallbackBlockType",
            static_cast<int>(blockType));
    aclrtStream on = cdsim::resolve_stream(stream, "aclrtLaunchCallback");
    {
      cdsim::Callbacks& c = cdsim::callbacks();
      std::lock_guard<std::mutex> lock(c.mutex);
      if (!c.thread_of_stream.count(cdsim::key(on)))
        raise(ACL_ERROR_STREAM_NOT_SUBSCRIBE,
              "aclrtLaunchCallback: no thread is subscribed to the stream (aclrtSubscribeReport)");
    }
    bool block = blockType == ACL_CALLBACK_BLOCK;
    cdsim::enqueue_control(on, [on, fn, userData, block](int32_t, const std::string&) {
      cdsim::deliver(on, fn, userData, block);
    });
  });
}

aclError aclrtProcessReport(int32_t timeout) {
  if (timeout != -1 && timeout <= 0) {
    cdsim::set_recent_error("aclrtProcessReport: timeout must be -1 (wait forever) or a positive number of ms");
    return ACL_ERROR_INVALID_PARAM;
  }
  uint64_t self = static_cast<uint64_t>(pthread_self());
  cdsim::Callbacks& c = cdsim::callbacks();
  std::unique_lock<std::mutex> lock(c.mutex);
  auto found = c.subscribers.find(self);
  if (found == c.subscribers.end()) {
    cdsim::set_recent_error("aclrtProcessReport: this thread is not subscribed to any stream (aclrtSubscribeReport)");
    return ACL_ERROR_THREAD_NOT_SUBSCRIBE;
  }
  std::shared_ptr<cdsim::Subscriber> subscriber = found->second;
  auto ready = [&] { return !subscriber->queue.empty(); };
  if (timeout == -1) {
    c.changed.wait(lock, ready);
  } else if (!c.changed.wait_for(lock, std::chrono::milliseconds(timeout), ready)) {
    // A timeout is the loop's normal idle return: no recent-error text for it.
    return ACL_ERROR_WAIT_CALLBACK_TIMEOUT;
  }
  cdsim::Report report = std::move(subscriber->queue.front());
  subscriber->queue.pop_front();
  lock.unlock();
  report.fn(report.data);
  lock.lock();
  report.done->ran = true;
  cdsim::prune(c, self);
  c.changed.notify_all();
  return ACL_SUCCESS;
}

}  // extern "C"
