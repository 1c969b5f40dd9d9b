// A caching, stream-aware device allocator (one per device).
//
// Freed blocks go back to a pool of the stream they were allocated on and
// are reused by later allocations on that same stream without any
// synchronization: stream order already guarantees the old work is done
// before the new work runs. A block that was also used on other streams
// (record_stream) is held back until events recorded on those streams have
// completed. When a stream is torn down (all its work done), its pool joins
// a shared pool that serves every stream. On out-of-memory the device is
// synchronized, the blocks held back for other streams are reclaimed, the
// whole cache is released and the allocation retried once before an
// OutOfMemory error reports the statistics.
//
// Lock discipline (see blocking.hpp): the allocator's mutex is never held
// while a stream is torn down, an event is recorded, a wait blocks or the
// GIL is taken. A block remembers the streams it was used on weakly (with
// their StreamLife), so freeing a tensor never destroys a stream under the
// lock and a long-lived tensor keeps no stream alive.
//
// Ownership: the allocator owns every Block in its pools and its pending
// list (unique_ptr); a Block handed out by allocate() is owned by the caller
// until it gives it back to release(), which takes it over on every path,
// shutdown included (the Block is deleted, its device memory having gone
// with the plugin).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "stream.hpp"

namespace chipdock {

class Device;

struct Block {
  void* ptr = nullptr;
  size_t size = 0;         // bytes reserved on the device
  size_t requested = 0;    // bytes the caller asked for
  bool guarded = false;    // guard bytes follow `requested` (allocation guard on)
  uint64_t stream_id = 0;  // the pool it returns to
  StreamLifePtr home;      // that stream's life: once retired, the shared pool
  struct Use {
    std::weak_ptr<Stream> stream;
    StreamLifePtr life;
  };
  std::vector<Use> used_on;        // other streams that touched it
  std::vector<EventPtr> pending;   // events to wait for before reuse
  std::vector<StreamLifePtr> pending_teardowns;  // streams being torn down that used it
};

struct MemoryStats {
  uint64_t current = 0;   // bytes in blocks handed out
  uint64_t peak = 0;      // highest `current` since the last reset
  uint64_t cached = 0;    // bytes in free blocks kept for reuse
  uint64_t reserved = 0;  // current + cached (+ blocks awaiting events)
  uint64_t allocations = 0;         // blocks handed out now
  uint64_t total_allocations = 0;   // blocks handed out since start
  uint64_t device_allocations = 0;  // memory_allocate calls that succeeded
  uint64_t device_frees = 0;        // memory_free calls
  uint64_t cache_hits = 0;          // allocations served from the cache
  uint64_t oom_retries = 0;         // times the cache was flushed to retry
  uint64_t ooms = 0;                // OutOfMemory errors raised
};

class CachingAllocator {
 public:
  explicit CachingAllocator(Device* device);
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // A block of at least `bytes` (> 0), usable by work on `stream`; the
  // caller owns it until it passes it to release().
  Block* allocate(size_t bytes, Stream& stream);
  // Takes `block` back: to its stream's pool or the pending list, or deletes
  // it when the plugin is shut down or the block cannot be fenced.
  void release(Block* block) noexcept;
  // Marks `block` as used by work on `stream` as well.
  void record_stream(Block* block, const StreamPtr& stream);
  // Synchronizes the device (interruptibly), reclaims the blocks held back
  // for other streams and frees every cached block.
  void empty_cache();
  // The stream `stream_id` was torn down: its cached blocks serve any stream.
  void retire_stream(uint64_t stream_id) noexcept;
  // Frees cached blocks without synchronizing (shutdown path only).
  void release_cached_noexcept() noexcept;

  MemoryStats stats() const;
  void reset_peak();
  std::string describe_stats() const;

 private:
  using BlockPtr = std::unique_ptr<Block>;
  static size_t round_size(size_t bytes);
  BlockPtr take_cached(size_t size, uint64_t stream_id);
  BlockPtr take_cached_from(size_t size, uint64_t pool_id);
  void collect_completed_pending();
  void add_to_pool(BlockPtr block);
  // Events on the other streams that used `block` (recorded without the lock).
  void fence_uses(Block* block, std::vector<Block::Use> uses);
  std::vector<BlockPtr> detach_cached();
  void free_blocks(std::vector<BlockPtr> blocks) noexcept;
  void* device_allocate(size_t size);  // may throw OUT_OF_MEMORY
  bool write_guard(Block* block, Stream& stream);  // true if the canary was written
  void check_guard(Block* block) noexcept;        // records a violation

  Device* device_;
  mutable std::mutex mutex_;
  // Free blocks by stream, then by size (best fit). Pool kSharedPool holds
  // the blocks of streams that were torn down.
  static constexpr uint64_t kSharedPool = 0;
  std::map<uint64_t, std::multimap<size_t, BlockPtr>> pools_;
  std::vector<BlockPtr> pending_;  // released, waiting for other streams' events or teardowns
  MemoryStats stats_;
};

std::string format_bytes(uint64_t bytes);

// The allocation guard (a debugging aid the conformance suite turns on):
// every block handed out while it is on carries kGuardBytes canary bytes
// right after the requested size, written in stream order when it is handed
// out and checked when it comes back. A kernel that writes past the end of
// its output overwrites them; the check records a violation instead of
// corrupting a neighbour silently. Checking synchronizes the device: slow,
// and meant for conformance runs only.
constexpr size_t kGuardBytes = 64;
constexpr uint8_t kGuardByte = 0xA5;
void set_allocation_guard(bool enabled);
bool allocation_guard();
// Violations found since the last call ("cpu:0: a 40-byte allocation: ..."), cleared.
std::vector<std::string> take_allocation_guard_violations();

}  // namespace chipdock
