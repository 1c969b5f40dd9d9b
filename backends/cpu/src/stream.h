// Streams: each stream owns one worker thread and a FIFO of tasks. Work runs
// in enqueue order, off the caller's thread. A task that throws records an
// asynchronous error on its stream; the next synchronization returns the
// first such error (once).
//
// Small work may run inline: when the stream is idle (nothing queued or
// running), a task its kernel marked small runs on the caller's thread
// before enqueue returns. Handing a few-microsecond task to the worker costs
// more than running it (a futex wake, a context switch and a cross-thread
// free): this is what lets a 1-element `a + b` cost what it costs in PyTorch
// eager. Order is kept: the worker starts nothing while an inline task runs,
// and an inline task only starts on an idle stream. Errors are recorded on
// the stream exactly as the worker records them.
#ifndef CHIPDOCK_CPU_STREAM_H_
#define CHIPDOCK_CPU_STREAM_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "chipdock/device_api.h"

namespace chipdock_cpu {

class Stream {
 public:
  explicit Stream(int32_t device);  // starts the worker thread
  ~Stream();                        // shutdown(), then frees a pending error
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  int32_t device() const noexcept { return device_; }

  // Appends `work`. `label` (static storage) names the work in an
  // asynchronous error. Throws INVALID_HANDLE once the stream is shut down.
  // `small`: the work is short (microseconds) and may run inline on the
  // calling thread when the stream is idle (see above).
  template <class F>
  void enqueue(const char* label, F&& work, bool small = false) {
    // Inline runs call `work` where it is: no std::function, no allocation.
    using Work = std::remove_reference_t<F>;
    if (small && run_inline_if_idle(label, [](void* w) { (*static_cast<Work*>(w))(); }, &work)) return;
    push(label, std::function<void()>(std::forward<F>(work)));
  }

  // Blocks until every task enqueued so far has finished.
  void drain();

  // True if no task is queued or running. Never blocks on work.
  bool idle();

  // The first asynchronous error since the last call (caller owns), or NULL.
  cd_error* take_error() noexcept;

  // Refuses new work, drains, stops and joins the worker. Idempotent.
  void shutdown() noexcept;

  // True if the calling thread is this stream's worker (a host callback).
  bool on_worker_thread() const noexcept;

 private:
  struct Task {
    const char* label;
    std::function<void()> work;
  };

  void push(const char* label, std::function<void()> work);
  // Runs fn(work) on this thread if the stream is idle; false if it is not.
  bool run_inline_if_idle(const char* label, void (*fn)(void*), void* work);
  void run() noexcept;
  void run_task(Task& task) noexcept;  // runs it and records its error
  void record_error(cd_error* error) noexcept;

  const int32_t device_;
  std::mutex mu_;
  std::condition_variable work_cv_;  // worker waits for tasks / stop
  std::condition_variable idle_cv_;  // drainers wait for an idle worker
  std::deque<Task> queue_;
  bool busy_ = false;      // a task is running (on the worker or inline)
  bool inline_ = false;    // ... and it runs inline on a caller's thread
  bool stopping_ = false;  // no new work accepted
  cd_error* error_ = nullptr;
  std::thread::id worker_id_;
  std::thread worker_;     // last member: starts after the rest is built
};

// --- the ABI's stream slots (throw Error on bad arguments) ------------------
cd_stream* stream_create(int32_t device, uint32_t flags);
void stream_destroy(cd_stream* handle);
cd_error* stream_synchronize(cd_stream* handle);  // returns the async error
bool stream_query(cd_stream* handle);
void stream_add_host_callback(cd_stream* handle, cd_host_callback_fn fn, void* user_data);

// The stream whose worker is the calling thread (inside a host callback or
// any other task), or NULL. For identity comparisons only.
const Stream* current_worker_stream() noexcept;

// The live stream behind `handle`, checked to belong to `device` (pass -1 to
// accept any device). Throws INVALID_ARGUMENT / INVALID_HANDLE.
std::shared_ptr<Stream> stream_from_handle(cd_stream* handle, int32_t device);

// Every live stream (a snapshot).
std::vector<std::shared_ptr<Stream>> live_streams();

// Destroys every remaining stream, joining its worker (plugin_shutdown).
// Throws INVALID_ARGUMENT when called on a stream's worker thread.
void destroy_all_streams();

}  // namespace chipdock_cpu

#endif  // CHIPDOCK_CPU_STREAM_H_
