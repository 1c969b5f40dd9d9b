// Streams (see stream.h).
#include "stream.h"

#include <utility>

#include "core_link.h"
#include "device.h"
#include "error.h"
#include "handles.h"

namespace chipdock_cpu {
namespace {

thread_local const Stream* tl_worker_stream = nullptr;

HandleRegistry<Stream, cd_stream>& registry() {
  static HandleRegistry<Stream, cd_stream> r("stream");
  return r;
}

// The error for work that failed on the worker thread: "<label>
// (asynchronous): <detail>". Call only inside a catch block.
cd_error* async_error(const char* label) noexcept {
  try {
    const std::string where = std::string(label) + " (asynchronous)";
    return error_from_current_exception(where.c_str());
  } catch (...) {  // no memory even for the label: report that instead
    return error_from_current_exception(label);
  }
}

// Logs an asynchronous error nobody will collect, then frees it.
void log_dropped(cd_error* e, const char* why) noexcept {
  try {
    log_message(CD_LOG_WARNING, std::string(why) + ": " + e->message);
  } catch (...) {  // out of memory for the message: drop it silently
  }
  if (!e->is_static) delete e;
}

}  // namespace

Stream::Stream(int32_t device) : device_(device) {
  worker_ = std::thread([this] { run(); });
  // Kept apart from worker_ so on_worker_thread never reads the std::thread
  // object while shutdown() joins or detaches it. Set before the handle is
  // published, hence before any task (the only code that asks) can run.
  worker_id_ = worker_.get_id();
}

Stream::~Stream() {
  shutdown();
  if (error_ != nullptr) log_dropped(error_, "stream destroyed with an unreported error");
}

void Stream::push(const char* label, std::function<void()> work) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) fail(CD_STATUS_INVALID_HANDLE, "the stream is being destroyed");
  queue_.push_back(Task{label, std::move(work)});
  work_cv_.notify_one();
}

bool Stream::run_inline_if_idle(const char* label, void (*fn)(void*), void* work) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || busy_ || !queue_.empty() || on_worker_thread()) return false;
    busy_ = inline_ = true;
  }
  cd_error* error = nullptr;
  try {
    fn(work);
  } catch (...) {
    error = async_error(label);
  }
  if (error != nullptr) record_error(error);
  std::lock_guard<std::mutex> lock(mu_);
  busy_ = inline_ = false;
  // Work enqueued meanwhile waited for this task; drainers may be waiting.
  if (queue_.empty()) {
    idle_cv_.notify_all();
  } else {
    work_cv_.notify_one();
  }
  return true;
}

void Stream::drain() {
  // A host callback waiting for its own stream would wait for itself.
  if (on_worker_thread()) {
    fail(CD_STATUS_INVALID_ARGUMENT,
         "called from a host callback of the same stream (it would deadlock)");
  }
  std::unique_lock<std::mutex> lock(mu_);
  idle_cv_.wait(lock, [this] { return queue_.empty() && !busy_; });
}

bool Stream::idle() {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.empty() && !busy_;
}

cd_error* Stream::take_error() noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  return std::exchange(error_, nullptr);
}

void Stream::shutdown() noexcept {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    work_cv_.notify_all();
  }
  if (!worker_.joinable()) return;
  // The worker finishes the queue before it exits, so joining drains. A
  // thread cannot join itself; the slots refuse every path that would get
  // here from the worker (stream_destroy / plugin_shutdown inside a host
  // callback), so the detach is only a guard against std::terminate.
  if (on_worker_thread()) {
    worker_.detach();
  } else {
    worker_.join();
  }
}

bool Stream::on_worker_thread() const noexcept {
  return std::this_thread::get_id() == worker_id_;
}

void Stream::record_error(cd_error* error) noexcept {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (error_ == nullptr) {
      error_ = error;
      return;
    }
  }
  log_dropped(error, "a later asynchronous error on the same stream");
}

void Stream::run() noexcept {
  tl_worker_stream = this;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    // An inline task holds the stream: queued work runs after it.
    work_cv_.wait(lock, [this] { return (stopping_ || !queue_.empty()) && !inline_; });
    if (queue_.empty()) return;  // stopping, and everything has run
    Task task = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    run_task(task);
    lock.lock();
    busy_ = false;
    if (queue_.empty()) idle_cv_.notify_all();
  }
}

void Stream::run_task(Task& task) noexcept {
  cd_error* error = nullptr;
  try {
    task.work();
  } catch (...) {
    error = async_error(task.label);
  }
  task.work = nullptr;  // release captured buffers before reporting idle
  if (error != nullptr) record_error(error);
}

const Stream* current_worker_stream() noexcept { return tl_worker_stream; }

// --- ABI slots ----------------------------------------------------------------

cd_stream* stream_create(int32_t device, uint32_t flags) {
  check_device(device);
  if (flags != CD_STREAM_FLAGS_DEFAULT) {
    fail(CD_STATUS_INVALID_ARGUMENT, "flags 0x%x are not valid (v1 knows only 0)", flags);
  }
  return registry().add(std::make_shared<Stream>(device));
}

void stream_destroy(cd_stream* handle) {
  // Refuse before unregistering, so the handle stays usable on refusal.
  if (registry().get(handle)->on_worker_thread()) {
    fail(CD_STATUS_INVALID_ARGUMENT, "called from a host callback of the same stream");
  }
  std::shared_ptr<Stream> stream = registry().remove(handle);
  stream->shutdown();
}

cd_error* stream_synchronize(cd_stream* handle) {
  std::shared_ptr<Stream> stream = registry().get(handle);
  stream->drain();
  return stream->take_error();
}

bool stream_query(cd_stream* handle) { return registry().get(handle)->idle(); }

void stream_add_host_callback(cd_stream* handle, cd_host_callback_fn fn, void* user_data) {
  if (fn == nullptr) fail(CD_STATUS_INVALID_ARGUMENT, "fn is NULL");
  registry().get(handle)->enqueue("host callback", [fn, user_data] { fn(user_data); });
}

std::shared_ptr<Stream> stream_from_handle(cd_stream* handle, int32_t device) {
  std::shared_ptr<Stream> stream = registry().get(handle);
  if (device >= 0 && stream->device() != device) {
    fail(CD_STATUS_INVALID_ARGUMENT, "stream %p belongs to cpu:%d, not cpu:%d",
         static_cast<void*>(handle), stream->device(), device);
  }
  return stream;
}

std::vector<std::shared_ptr<Stream>> live_streams() { return registry().all(); }

void destroy_all_streams() {
  if (current_worker_stream() != nullptr) {
    fail(CD_STATUS_INVALID_ARGUMENT, "called from a host callback (a stream worker thread)");
  }
  try {
    for (auto& stream : registry().remove_all()) stream->shutdown();
  } catch (...) {
    // remove_all only throws bad_alloc; nothing useful to do at shutdown.
  }
}

}  // namespace chipdock_cpu
