// Device memory: the allocation table, per-device accounting and strict-mode
// address translation.
//
// Every allocation is recorded (device address -> Block) so that frees of
// unknown pointers and accesses beyond an allocation are caught. Work that
// is enqueued on a stream holds a reference to the Blocks it touches: memory
// freed while such work is pending (a bug in the caller) is then reported by
// the stream as an asynchronous error instead of being written after reuse.
//
// Strict mode (CHIPDOCK_CPU_STRICT=1): the device address handed out is the
// host address XOR kStrictTag, a tag in bits 48..55. That is non-canonical on
// x86-64 and beyond the 48-bit user address space of aarch64 (the top byte
// would not do: aarch64 ignores it), so any host dereference by the core
// faults. Offsets keep working because (p ^ T) + off == (p + off) ^ T while
// p + off stays below 2^48. Every function that touches device memory goes
// through resolve_device_range, which validates and translates back.
#ifndef CHIPDOCK_CPU_MEMORY_H_
#define CHIPDOCK_CPU_MEMORY_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace chipdock_cpu {

constexpr uint64_t kStrictTag = 0x00A5000000000000ull;
constexpr uint64_t kStrictTagMask = 0x00FF000000000000ull;
constexpr size_t kDeviceAlignment = 256;

// One live or recently freed device allocation; owns its host memory.
struct Block {
  Block(int32_t device, char* host, size_t size, uintptr_t address)
      : device(device), host(host), size(size), address(address) {}
  ~Block();
  Block(const Block&) = delete;
  Block& operator=(const Block&) = delete;

  const int32_t device;
  char* const host;           // real memory
  const size_t size;          // bytes requested
  const uintptr_t address;    // what the core sees (tagged in strict mode)
  std::atomic<bool> freed{false};
};

// A validated range of device memory, as captured by enqueued work.
struct DeviceRange {
  std::shared_ptr<Block> block;  // NULL for an empty range
  char* host = nullptr;          // host address of the range's first byte
  size_t bytes = 0;

  // Throws INVALID_ARGUMENT if the allocation was freed since the range was
  // resolved (called by enqueued work just before it touches the memory).
  void check_live(const char* what) const;
};

// Validates [ptr, ptr + bytes) on `device` and returns it translated to host
// memory. `what` names the argument in messages ("dst", "src", ...).
// bytes == 0 yields an empty range (ptr may then be anything, NULL too).
// Throws INVALID_ARGUMENT if ptr is not inside an allocation of `device`,
// OUT_OF_RANGE if the range runs past the end of its allocation.
DeviceRange resolve_device_range(int32_t device, const void* ptr, size_t bytes,
                                 const char* what);

// Throws INVALID_ARGUMENT if `ptr` cannot be a host pointer: NULL, or in
// strict mode a (tagged) device pointer.
void check_host_pointer(const void* ptr, const char* what);

// --- ABI slots -----------------------------------------------------------------
void* memory_allocate(int32_t device, size_t bytes);
void memory_free(int32_t device, void* ptr);
void memory_get_info(int32_t device, size_t* free_bytes, size_t* total_bytes);

}  // namespace chipdock_cpu

#endif  // CHIPDOCK_CPU_MEMORY_H_
