// Simulated streams: one worker thread per stream runs its tasks one at a
// time in enqueue order. A device task that fails (throws SimError) puts the
// stream in error: later device tasks are skipped (control tasks still run)
// and the next synchronize reports the code and message, then clears them.
#include <pthread.h>

#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime_internal.h"

namespace cdsim {
namespace {

constexpr uintptr_t kStreamTag = uintptr_t{0x78} << 56;
constexpr uintptr_t kTagMask = uintptr_t{0xff} << 56;

struct Task {
  std::function<void(int32_t, const std::string&)> run;
  bool control = false;  // runs even when the stream is in error
};

struct Stream {
  int32_t device = 0;
  std::mutex mutex;
  std::condition_variable changed;  // a task was added or finished, or stop
  std::deque<Task> queue;
  uint64_t enqueued = 0;
  uint64_t completed = 0;
  int32_t error = 0;  // pending asynchronous error
  std::string error_message;
  bool stop = false;
  std::thread worker;
};

struct Streams {
  std::mutex mutex;
  std::map<uint64_t, std::shared_ptr<Stream>> live;  // by id
  uint64_t next_id = 1;
};

Streams& streams() {
  static Streams* instance = new Streams;  // never destroyed: workers may run during static teardown
  return *instance;
}

thread_local Stream* t_worker_of = nullptr;  // the stream whose worker this thread is

uint64_t id_of(aclrtStream handle) {
  uintptr_t bits = reinterpret_cast<uintptr_t>(handle);
  if ((bits & kTagMask) != kStreamTag) return 0;
  return bits & ~kTagMask;
}

std::shared_ptr<Stream> find(aclrtStream stream, const char* call) {
  aclrtStream resolved = stream ? stream : default_stream();
  Streams& s = streams();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto it = s.live.find(id_of(resolved));
  if (it == s.live.end()) raise(ACL_ERROR_INVALID_PARAM, "%s: %p is not a live stream", call, stream);
  return it->second;
}

void run_worker(Stream* stream) {
  t_worker_of = stream;
  std::unique_lock<std::mutex> lock(stream->mutex);
  for (;;) {
    stream->changed.wait(lock, [&] { return stream->stop || !stream->queue.empty(); });
    if (stream->queue.empty()) return;  // stop, drained
    Task task = std::move(stream->queue.front());
    stream->queue.pop_front();
    int32_t error = stream->error;
    std::string message = stream->error_message;
    if (error == 0 || task.control) {
      lock.unlock();
      int32_t failed = 0;
      std::string why;
      try {
        task.run(error, message);
      } catch (const SimError& e) {
        failed = e.code;
        why = e.message;
      } catch (const std::exception& e) {
        failed = ACL_ERROR_RT_INTERNAL_ERROR;
        why = std::string("simulated Ascend runtime: a stream task failed: ") + e.what();
      } catch (...) {
        failed = ACL_ERROR_RT_INTERNAL_ERROR;
        why = "simulated Ascend runtime: a stream task failed";
      }
      task = Task();  // release what the task captured before waking waiters
      lock.lock();
      if (failed && stream->error == 0) {
        stream->error = failed;
        stream->error_message = why;
      }
    }
    ++stream->completed;
    stream->changed.notify_all();
  }
}

void push(aclrtStream handle, Task task, const char* call) {
  std::shared_ptr<Stream> stream = find(handle, call);
  std::lock_guard<std::mutex> lock(stream->mutex);
  stream->queue.push_back(std::move(task));
  ++stream->enqueued;
  stream->changed.notify_all();
}

// Waits for every task enqueued so far; returns the pending error and clears it.
SimError drain(Stream& stream) {
  std::unique_lock<std::mutex> lock(stream.mutex);
  uint64_t target = stream.enqueued;
  stream.changed.wait(lock, [&] { return stream.completed >= target; });
  SimError pending(stream.error, stream.error_message);
  stream.error = 0;
  stream.error_message.clear();
  return pending;
}

void destroy(std::shared_ptr<Stream> stream) {
  {
    std::lock_guard<std::mutex> lock(stream->mutex);
    stream->stop = true;
    stream->changed.notify_all();
  }
  // Destroying from the stream's own thread (inside a callback) cannot join it.
  if (t_worker_of == stream.get()) {
    stream->worker.detach();
    new std::shared_ptr<Stream>(std::move(stream));  // kept alive: the detached worker still uses it
  } else {
    stream->worker.join();
  }
}

}  // namespace

aclrtStream create_stream(int32_t device) {
  auto stream = std::make_shared<Stream>();
  stream->device = device;
  stream->worker = std::thread(run_worker, stream.get());
  Streams& s = streams();
  std::lock_guard<std::mutex> lock(s.mutex);
  uint64_t id = s.next_id++;
  s.live[id] = stream;
  return reinterpret_cast<aclrtStream>(kStreamTag | id);
}

aclrtStream resolve_stream(aclrtStream stream, const char* call) {
  aclrtStream resolved = stream ? stream : default_stream();
  find(resolved, call);
  return resolved;
}

int32_t stream_device(aclrtStream stream) { return find(stream, "stream_device")->device; }

void enqueue(aclrtStream stream, std::function<void()> task) {
  Task t;
  t.run = [body = std::move(task)](int32_t, const std::string&) { body(); };
  push(stream, std::move(t), "enqueue");
}

void enqueue_control(aclrtStream stream, std::function<void(int32_t, const std::string&)> task) {
  Task t;
  t.run = std::move(task);
  t.control = true;
  push(stream, std::move(t), "enqueue");
}

void synchronize_stream(aclrtStream stream) {
  std::shared_ptr<Stream> s = find(stream, "aclrtSynchronizeStream");
  if (t_worker_of == s.get())
    raise(ACL_ERROR_INVALID_PARAM, "aclrtSynchronizeStream: called from a callback running on that stream (deadlock)");
  SimError pending = drain(*s);
  if (pending.code) throw pending;
}

void synchronize_device_streams(int32_t device) {
  std::vector<std::shared_ptr<Stream>> of_device;
  {
    Streams& s = streams();
    std::lock_guard<std::mutex> lock(s.mutex);
    for (auto& entry : s.live)
      if (entry.second->device == device) of_device.push_back(entry.second);
  }
  SimError first(0, "");
  for (auto& stream : of_device) {
    if (t_worker_of == stream.get()) continue;  // a callback synchronizing its own device
    SimError pending = drain(*stream);
    if (pending.code && !first.code) first = pending;
  }
  if (first.code) throw first;
}

bool stream_idle(aclrtStream stream) {
  std::shared_ptr<Stream> s = find(stream, "aclrtStreamQuery");
  std::lock_guard<std::mutex> lock(s->mutex);
  return s->completed >= s->enqueued;
}

bool on_stream_thread(aclrtStream stream) { return t_worker_of == find(stream, "stream").get(); }

}  // namespace cdsim

using cdsim::guarded;
using cdsim::raise;

extern "C" {

aclError aclrtCreateStreamWithConfig(aclrtStream* stream, uint32_t priority, uint32_t flag) {
  return guarded([&] {
    if (!stream) raise(ACL_ERROR_INVALID_PARAM, "aclrtCreateStreamWithConfig: stream is NULL");
    // CANN's priorities are 0 (highest) .. 7; the flags are a bitmap of ACL_STREAM_*.
    if (priority > 7) raise(ACL_ERROR_INVALID_PARAM, "aclrtCreateStreamWithConfig: priority %u is not 0..7", priority);
    constexpr uint32_t kKnownFlags = ACL_STREAM_FAST_LAUNCH | ACL_STREAM_FAST_SYNC | ACL_STREAM_PERSISTENT |
                                     ACL_STREAM_HUGE | ACL_STREAM_CPU_SCHEDULE | ACL_STREAM_DEVICE_USE_ONLY;
    if (flag & ~kKnownFlags) raise(ACL_ERROR_INVALID_PARAM, "aclrtCreateStreamWithConfig: unknown flag bits 0x%x", flag);
    *stream = cdsim::create_stream(cdsim::current_device());
  });
}

aclError aclrtCreateStream(aclrtStream* stream) {
  return guarded([&] {
    if (!stream) raise(ACL_ERROR_INVALID_PARAM, "aclrtCreateStream: stream is NULL");
    *stream = cdsim::create_stream(cdsim::current_device());
  });
}

aclError aclrtDestroyStream(aclrtStream stream) {
  return guarded([&] {
    if (!stream) raise(ACL_ERROR_INVALID_PARAM, "aclrtDestroyStream: the default stream (NULL) cannot be destroyed");
    std::shared_ptr<cdsim::Stream> found;
    {
      cdsim::Streams& s = cdsim::streams();
      std::lock_guard<std::mutex> lock(s.mutex);
      auto it = s.live.find(cdsim::id_of(stream));
      if (it == s.live.end()) raise(ACL_ERROR_INVALID_PARAM, "aclrtDestroyStream: %p is not a live stream", stream);
      found = it->second;
      s.live.erase(it);
    }
    cdsim::forget_subscription(stream);
    cdsim::destroy(std::move(found));  // runs what is still queued first
  });
}

aclError aclrtSynchronizeStream(aclrtStream stream) {
  return guarded([&] { cdsim::synchronize_stream(stream); });
}

aclError aclrtStreamQuery(aclrtStream stream, aclrtStreamStatus* status) {
  return guarded([&] {
    if (!status) raise(ACL_ERROR_INVALID_PARAM, "aclrtStreamQuery: status is NULL");
    *status = cdsim::stream_idle(stream) ? ACL_STREAM_STATUS_COMPLETE : ACL_STREAM_STATUS_NOT_READY;
  });
}

}  // extern "C"
