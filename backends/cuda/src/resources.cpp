// Handle and allocation registries (see resources.h).
#include "resources.h"

#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <unordered_set>

#include "cublaslt_api.h"
#include "cuda_check.h"

namespace chipdock_cuda {
namespace {

std::mutex g_mutex;  // guards everything below
std::unordered_set<cd_stream*> g_streams;
std::unordered_set<cd_event*> g_events;
std::map<uintptr_t, std::pair<size_t, int32_t>> g_allocations;  // start -> (bytes, device)
std::set<void*> g_pinned;
std::map<int32_t, cudaStream_t> g_sync_streams;
std::map<int32_t, std::unique_ptr<BlasDevice>> g_blas;

// 32 MiB: what cuBLAS recommends for Hopper (and more than enough before).
constexpr size_t kBlasWorkspaceBytes = size_t{32} << 20;

void release_blas(int32_t device, BlasDevice& b) {
  if (cudaSetDevice(device) != cudaSuccess) return;  // the driver is gone: nothing to free
  if (b.last_use != nullptr) (void)cudaEventDestroy(b.last_use);
  if (b.workspace != nullptr) (void)cudaFree(b.workspace);
  if (b.handle != nullptr) (void)cublaslt_api().cublasLtDestroy(b.handle);  // a handle: the table is loaded
}

uintptr_t address(const void* p) { return reinterpret_cast<uintptr_t>(p); }

}  // namespace

cd_stream* stream_create(int32_t device, uint32_t flags) {
  if (flags != CD_STREAM_FLAGS_DEFAULT) fail(CD_STATUS_INVALID_ARGUMENT, "unknown flags 0x%x", flags);
  use_device(device);
  cudaStream_t s = nullptr;
  // Non-blocking: chipdock streams are unordered with the legacy default
  // stream, as the ABI's ordering model says they are with each other.
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  auto* handle = new cd_stream{device, s};
  std::lock_guard<std::mutex> lock(g_mutex);
  g_streams.insert(handle);
  return handle;
}

cd_stream* live_stream(cd_stream* stream) {
  require_non_null(stream, "stream");
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_streams.count(stream) == 0) fail(CD_STATUS_INVALID_HANDLE, "unknown or destroyed stream");
  return stream;
}

void stream_destroy(cd_stream* stream) {
  live_stream(stream);
  check(cudaSetDevice(stream->device), "cudaSetDevice");
  const cudaError_t err = cudaStreamSynchronize(stream->stream);
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (g_streams.erase(stream) == 0) fail(CD_STATUS_INVALID_HANDLE, "stream destroyed twice");
  }
  (void)cudaStreamDestroy(stream->stream);
  delete stream;
  check(err, "cudaStreamSynchronize");  // the stream is gone either way
}

cd_event* event_create(int32_t device, uint32_t flags) {
  if ((flags & ~CD_EVENT_DISABLE_TIMING) != 0) fail(CD_STATUS_INVALID_ARGUMENT, "unknown flags 0x%x", flags);
  use_device(device);
  cudaEvent_t e = nullptr;
  const unsigned cuda_flags = (flags & CD_EVENT_DISABLE_TIMING) ? cudaEventDisableTiming : cudaEventDefault;
  check(cudaEventCreateWithFlags(&e, cuda_flags), "cudaEventCreateWithFlags");
  auto* handle = new cd_event{device, flags, e, false};
  std::lock_guard<std::mutex> lock(g_mutex);
  g_events.insert(handle);
  return handle;
}

cd_event* live_event(cd_event* event) {
  require_non_null(event, "event");
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_events.count(event) == 0) fail(CD_STATUS_INVALID_HANDLE, "unknown or destroyed event");
  return event;
}

void event_destroy(cd_event* event) {
  require_non_null(event, "event");
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (g_events.erase(event) == 0) fail(CD_STATUS_INVALID_HANDLE, "unknown or destroyed event");
  }
  // cudaEventDestroy does not wait for a pending record, as the ABI asks.
  (void)cudaEventDestroy(event->event);
  delete event;
}

void destroy_all() {
  std::lock_guard<std::mutex> lock(g_mutex);
  for (cd_stream* s : g_streams) {
    (void)cudaStreamDestroy(s->stream);
    delete s;
  }
  for (cd_event* e : g_events) {
    (void)cudaEventDestroy(e->event);
    delete e;
  }
  for (auto& [device, s] : g_sync_streams) (void)cudaStreamDestroy(s);
  for (auto& [device, b] : g_blas) release_blas(device, *b);
  g_blas.clear();
  g_streams.clear();
  g_events.clear();
  g_sync_streams.clear();
}

void* memory_allocate(int32_t device, size_t bytes) {
  use_device(device);
  if (bytes == 0) return nullptr;
  void* p = nullptr;
  check(cudaMalloc(&p, bytes), "cudaMalloc");  // 256-byte aligned, as the ABI asks
  std::lock_guard<std::mutex> lock(g_mutex);
  g_allocations[address(p)] = {bytes, device};
  return p;
}

void memory_free(int32_t device, void* ptr) {
  use_device(device);
  if (ptr == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    auto it = g_allocations.find(address(ptr));
    if (it == g_allocations.end() || it->second.second != device) {
      fail(CD_STATUS_INVALID_ARGUMENT, "%p is not an allocation of device %d", ptr, device);
    }
    g_allocations.erase(it);
  }
  check(cudaFree(ptr), "cudaFree");
}

void check_range(int32_t device, const void* ptr, size_t bytes, const char* what) {
  if (bytes == 0) return;
  require_non_null(ptr, what);
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = g_allocations.upper_bound(address(ptr));
  if (it == g_allocations.begin()) fail(CD_STATUS_OUT_OF_RANGE, "%s %p is not device memory", what, ptr);
  --it;
  const uintptr_t start = it->first, end = start + it->second.first, p = address(ptr);
  if (it->second.second != device || p >= end) {
    fail(CD_STATUS_OUT_OF_RANGE, "%s %p is not in an allocation of device %d", what, ptr, device);
  }
  if (bytes > end - p) {
    fail(CD_STATUS_OUT_OF_RANGE, "%s: %zu bytes at offset %zu overrun an allocation of %zu bytes", what,
         bytes, static_cast<size_t>(p - start), it->second.first);
  }
}

void* host_memory_allocate(size_t bytes) {
  if (bytes == 0) return nullptr;
  device_count();  // pinning needs a driver: say so with the reason
  void* p = nullptr;
  check(cudaMallocHost(&p, bytes), "cudaMallocHost");
  std::lock_guard<std::mutex> lock(g_mutex);
  g_pinned.insert(p);
  return p;
}

void host_memory_free(void* ptr) {
  if (ptr == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (g_pinned.erase(ptr) == 0) fail(CD_STATUS_INVALID_ARGUMENT, "%p is not pinned host memory", ptr);
  }
  check(cudaFreeHost(ptr), "cudaFreeHost");
}

cudaStream_t sync_stream(int32_t device) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = g_sync_streams.find(device);
  if (it != g_sync_streams.end()) return it->second;
  cudaStream_t s = nullptr;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  g_sync_streams[device] = s;
  return s;
}

BlasDevice& blas_device(int32_t device) {
  // The matmul path's first step: cuBLASLt is opened here, on the first
  // call (UNAVAILABLE if it cannot be), never at import; and before the
  // lock, so that the registries are not held during a dlopen.
  const CublasLtApi& lt = cublaslt_api();
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = g_blas.find(device);
  if (it != g_blas.end()) return *it->second;
  auto b = std::make_unique<BlasDevice>();
  const cublasStatus_t st = lt.cublasLtCreate(&b->handle);
  if (st != CUBLAS_STATUS_SUCCESS) {
    fail(st == CUBLAS_STATUS_ALLOC_FAILED ? CD_STATUS_OUT_OF_MEMORY : CD_STATUS_INTERNAL,
         "cublasLtCreate: %s", lt.cublasLtGetStatusString(st));
  }
  cudaError_t err = cudaMalloc(&b->workspace, kBlasWorkspaceBytes);
  if (err == cudaSuccess) err = cudaEventCreateWithFlags(&b->last_use, cudaEventDisableTiming);
  if (err != cudaSuccess) {
    release_blas(device, *b);
    check(err, "allocating the cuBLASLt workspace");
  }
  b->workspace_bytes = kBlasWorkspaceBytes;
  return *g_blas.emplace(device, std::move(b)).first->second;
}

}  // namespace chipdock_cuda
