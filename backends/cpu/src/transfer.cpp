// Memset and copies (see transfer.h).
#include "transfer.h"

#include <cstring>

#include "device.h"
#include "error.h"
#include "memory.h"
#include "stream.h"

namespace chipdock_cpu {
namespace {

// A validated copy: host addresses plus the device ranges that keep their
// allocations alive while the copy waits on a stream.
struct CopyPlan {
  DeviceRange dst_range, src_range;  // empty for the host side
  char* dst = nullptr;
  const char* src = nullptr;
  size_t bytes = 0;

  void run() const {
    dst_range.check_live("dst");
    src_range.check_live("src");
    if (bytes != 0) std::memcpy(dst, src, bytes);
  }
};

bool overlap(const char* a, const char* b, size_t bytes) {
  return a < b + bytes && b < a + bytes;
}

CopyPlan plan_copy(Direction direction, int32_t device, void* dst, const void* src,
                   size_t bytes) {
  check_device(device);
  CopyPlan plan;
  plan.bytes = bytes;
  if (bytes == 0) return plan;
  if (direction == Direction::kDeviceToHost) {
    check_host_pointer(dst, "dst");
    plan.dst = static_cast<char*>(dst);
  } else {
    plan.dst_range = resolve_device_range(device, dst, bytes, "dst");
    plan.dst = plan.dst_range.host;
  }
  if (direction == Direction::kHostToDevice) {
    check_host_pointer(src, "src");
    plan.src = static_cast<const char*>(src);
  } else {
    plan.src_range = resolve_device_range(device, src, bytes, "src");
    plan.src = plan.src_range.host;
  }
  if (direction == Direction::kDeviceToDevice && overlap(plan.dst, plan.src, bytes)) {
    fail(CD_STATUS_INVALID_ARGUMENT, "dst %p and src %p overlap (%zu bytes)", dst, src,
         bytes);
  }
  return plan;
}

const char* async_name(Direction direction) {
  switch (direction) {
    case Direction::kHostToDevice: return "memcpy_host_to_device_async";
    case Direction::kDeviceToHost: return "memcpy_device_to_host_async";
    case Direction::kDeviceToDevice: break;
  }
  return "memcpy_device_to_device_async";
}

}  // namespace

void memory_set(int32_t device, void* ptr, int32_t value, size_t bytes) {
  DeviceRange range = resolve_device_range(device, ptr, bytes, "ptr");
  if (bytes != 0) std::memset(range.host, value & 0xff, bytes);
}

void memory_set_async(int32_t device, void* ptr, int32_t value, size_t bytes,
                      cd_stream* stream) {
  check_device(device);
  std::shared_ptr<Stream> s = stream_from_handle(stream, device);
  DeviceRange range = resolve_device_range(device, ptr, bytes, "ptr");
  if (bytes == 0) return;
  s->enqueue("memory_set_async", [range, value] {
    range.check_live("ptr");
    std::memset(range.host, value & 0xff, range.bytes);
  });
}

void copy(Direction direction, int32_t device, void* dst, const void* src, size_t bytes) {
  plan_copy(direction, device, dst, src, bytes).run();
}

void copy_async(Direction direction, int32_t device, void* dst, const void* src,
                size_t bytes, cd_stream* stream) {
  check_device(device);
  std::shared_ptr<Stream> s = stream_from_handle(stream, device);
  CopyPlan plan = plan_copy(direction, device, dst, src, bytes);
  if (bytes == 0) return;
  s->enqueue(async_name(direction), [plan] { plan.run(); });
}

}  // namespace chipdock_cpu
