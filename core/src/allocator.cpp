#include "allocator.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdint>
#include <utility>

#include "blocking.hpp"
#include "runtime.hpp"

namespace chipdock {

namespace {
constexpr size_t kGranule = 512;           // every block is a multiple of this
constexpr size_t kSmallLimit = 1 << 20;    // small blocks may be reused up to 2x
}  // namespace

std::string format_bytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 4) {
    value /= 1024.0;
    ++unit;
  }
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), unit == 0 ? "%.0f %s" : "%.1f %s", value, units[unit]);
  return buffer;
}

CachingAllocator::CachingAllocator(Device* device) : device_(device) {}

CachingAllocator::~CachingAllocator() = default;  // devices live as long as the process

size_t CachingAllocator::round_size(size_t bytes) {
  return (bytes + kGranule - 1) / kGranule * kGranule;
}

CachingAllocator::BlockPtr CachingAllocator::take_cached(size_t size, uint64_t stream_id) {
  if (BlockPtr block = take_cached_from(size, stream_id)) return block;
  return take_cached_from(size, kSharedPool);  // blocks of retired streams need no ordering
}

CachingAllocator::BlockPtr CachingAllocator::take_cached_from(size_t size, uint64_t pool_id) {
  auto pool_it = pools_.find(pool_id);
  if (pool_it == pools_.end()) return nullptr;
  auto& pool = pool_it->second;
  auto it = pool.lower_bound(size);
  if (it == pool.end()) return nullptr;
  // Do not hand a huge block to a small request: it would strand memory.
  size_t limit = size <= kSmallLimit ? 2 * size : size + size / 4;
  if (it->first > limit) return nullptr;
  BlockPtr block = std::move(it->second);
  pool.erase(it);
  stats_.cached -= block->size;
  return block;
}

void CachingAllocator::add_to_pool(BlockPtr block) {
  const bool home_gone = !block->home || block->home->retired.load();
  stats_.cached += block->size;
  const size_t size = block->size;
  pools_[home_gone ? kSharedPool : block->stream_id].emplace(size, std::move(block));
}

void CachingAllocator::collect_completed_pending() {
  for (auto it = pending_.begin(); it != pending_.end();) {
    Block* block = it->get();
    bool done = true;
    for (auto& life : block->pending_teardowns) done = done && life->retired.load();
    for (auto& ev : block->pending) {
      if (!done) break;
      try {
        done = ev->query();
      } catch (...) {
        done = false;  // the plugin could not tell: keep waiting (or until empty_cache)
      }
    }
    if (!done) {
      ++it;
      continue;
    }
    block->pending.clear();  // event_destroy only: no wait, no GIL
    block->pending_teardowns.clear();
    add_to_pool(std::move(*it));
    it = pending_.erase(it);
  }
}

void* CachingAllocator::device_allocate(size_t size) {
  void* ptr = nullptr;
  device_->bind_thread();
  CD_CALL(device_->plugin(), memory_allocate, device_->ordinal(), size, &ptr);
  ++stats_.device_allocations;
  return ptr;
}

namespace {

std::atomic<bool> g_guard{false};
std::mutex g_guard_mutex;
std::vector<std::string> g_guard_violations;

}  // namespace

void set_allocation_guard(bool enabled) { g_guard = enabled; }
bool allocation_guard() { return g_guard.load(std::memory_order_relaxed); }

std::vector<std::string> take_allocation_guard_violations() {
  std::lock_guard<std::mutex> lock(g_guard_mutex);
  return std::exchange(g_guard_violations, {});
}

bool CachingAllocator::write_guard(Block* block, Stream& stream) {
  // In stream order: earlier work on this stream may still use a reused block.
  Plugin& p = device_->plugin();
  if (p.api().memory_set_async == nullptr) return false;  // optional slot: no guard on this backend
  void* guard = static_cast<char*>(block->ptr) + block->requested;
  p.call(p.api().memory_set_async, "memory_set_async", device_->ordinal(), guard, int32_t{kGuardByte}, kGuardBytes,
         stream.handle("memory_set_async"));
  return true;
}

void CachingAllocator::check_guard(Block* block) noexcept {
  uint8_t seen[kGuardBytes];
  std::string problem;
  try {
    UninterruptibleScope must_finish;
    device_->synchronize();  // the block's last writer may still be running
    Plugin& p = device_->plugin();
    p.call(p.api().memcpy_device_to_host, "memcpy_device_to_host", device_->ordinal(), seen,
           static_cast<const char*>(block->ptr) + block->requested, kGuardBytes);
    size_t changed = 0, first = kGuardBytes;
    for (size_t i = 0; i < kGuardBytes; ++i) {
      if (seen[i] == kGuardByte) continue;
      ++changed;
      first = std::min(first, i);
    }
    if (changed == 0) return;
    problem = device_->label() + ": " + std::to_string(changed) + " of the " + std::to_string(kGuardBytes) +
              " guard bytes after a " + std::to_string(block->requested) + "-byte allocation were overwritten (from byte " +
              std::to_string(block->requested + first) + " on): something wrote past the end of its buffer";
  } catch (const std::exception& e) {
    problem = device_->label() + ": could not check the guard bytes of a " + std::to_string(block->requested) +
              "-byte allocation: " + e.what();
  }
  try {
    std::lock_guard<std::mutex> lock(g_guard_mutex);
    g_guard_violations.push_back(std::move(problem));
  } catch (...) {  // out of memory while reporting: nothing better to do
  }
}

Block* CachingAllocator::allocate(size_t bytes, Stream& stream) {
  if (&stream.device() != device_) {
    throw_invalid("allocate", "the stream belongs to " + stream.device().label() + ", not " + device_->label());
  }
  const bool guard = allocation_guard();
  // Rounding up and the guard bytes must not wrap a huge request into a small block.
  if (bytes > static_cast<size_t>(INT64_MAX) - kGranule - kGuardBytes) {
    throw Error(CD_STATUS_OUT_OF_MEMORY, "core", "allocate",
                "a request of " + std::to_string(bytes) + " bytes exceeds the addressable size");
  }
  const size_t size = round_size(guard ? bytes + kGuardBytes : bytes);
  std::unique_lock<std::mutex> lock(mutex_);
  collect_completed_pending();
  BlockPtr block = take_cached(size, stream.id());
  if (block != nullptr) {
    ++stats_.cache_hits;
  } else {
    void* ptr = nullptr;
    bool out_of_memory = false;
    try {
      ptr = device_allocate(size);
    } catch (const Error& first) {
      if (first.code() != CD_STATUS_OUT_OF_MEMORY) throw;
      out_of_memory = true;
    }
    if (out_of_memory) {
      // Wait for every stream, reclaim the blocks held back for other
      // streams, release the whole cache, and retry once. The wait drops
      // the lock (and the GIL): other threads keep allocating meanwhile.
      ++stats_.oom_retries;
      lock.unlock();
      empty_cache();
      lock.lock();
      try {
        ptr = device_allocate(size);
      } catch (const Error& second) {
        if (second.code() != CD_STATUS_OUT_OF_MEMORY) throw;
        ++stats_.ooms;
        lock.unlock();
        throw Error(CD_STATUS_OUT_OF_MEMORY, device_->plugin().name(), "memory_allocate",
                    "out of memory allocating " + format_bytes(size) + " on " + device_->label() +
                        " after waiting for every stream and releasing the cache (" + second.reason() + "); " +
                        describe_stats());
      }
    }
    block = std::make_unique<Block>();
    block->ptr = ptr;
    block->size = size;
  }
  block->requested = bytes;
  block->stream_id = stream.id();
  block->home = stream.life();
  try {
    block->guarded = guard && write_guard(block.get(), stream);
  } catch (...) {
    add_to_pool(std::move(block));  // unused: back to the cache, not lost
    throw;
  }
  stats_.current += block->size;
  if (stats_.current > stats_.peak) stats_.peak = stats_.current;
  ++stats_.allocations;
  ++stats_.total_allocations;
  return block.release();  // the caller's until release()
}

void CachingAllocator::record_stream(Block* block, const StreamPtr& stream) {
  if (!stream || stream->id() == block->stream_id) return;
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& use : block->used_on) {
    if (use.life->id == stream->id()) return;
  }
  block->used_on.push_back(Block::Use{stream, stream->life()});
}

void CachingAllocator::fence_uses(Block* block, std::vector<Block::Use> uses) {
  for (auto& use : uses) {
    if (use.life->retired) continue;  // torn down: its work is done
    // Locking the weak reference may make this the stream's last owner: it
    // is then torn down here, with no lock held.
    StreamPtr s = use.stream.lock();
    if (s && !s->destroyed()) {
      try {
        auto ev = std::make_shared<Event>(device_, false);
        ev->record(*s);
        block->pending.push_back(std::move(ev));
        continue;
      } catch (...) {
      }
      try {  // could not record: wait for the stream before the block is reused
        UninterruptibleScope must_finish;
        s->synchronize();
        continue;
      } catch (...) {
      }
    }
    // Being torn down (its teardown drains it), or unreachable: reusable
    // once the teardown has finished.
    block->pending_teardowns.push_back(use.life);
  }
}

void CachingAllocator::release(Block* handed_out) noexcept {
  BlockPtr block(handed_out);  // every early return deletes the Block (not its device memory)
  if (block == nullptr) return;
  // The process is exiting: the device memory went with the plugin.
  if (device_->plugin().is_shut_down()) return;
  if (block->guarded) check_guard(block.get());
  std::vector<Block::Use> uses;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    uses = std::exchange(block->used_on, {});
  }
  // Work on other streams may still read the block: wait for it via events,
  // recorded without the lock (see the header).
  try {
    fence_uses(block.get(), std::move(uses));
  } catch (...) {  // out of memory for the fences: its device memory is leaked, not reused too early
    return;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.current -= block->size;
  --stats_.allocations;
  if (!block->pending.empty() || !block->pending_teardowns.empty()) {
    pending_.push_back(std::move(block));
    return;
  }
  add_to_pool(std::move(block));
}

void CachingAllocator::retire_stream(uint64_t stream_id) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = pools_.find(stream_id);
  if (it == pools_.end() || stream_id == kSharedPool) return;
  auto& shared = pools_[kSharedPool];
  for (auto& [size, block] : it->second) shared.emplace(size, std::move(block));
  pools_.erase(it);
}

std::vector<CachingAllocator::BlockPtr> CachingAllocator::detach_cached() {
  std::vector<BlockPtr> out;
  for (auto& [stream_id, pool] : pools_) {
    for (auto& [size, block] : pool) out.push_back(std::move(block));
    pool.clear();
  }
  pools_.clear();
  stats_.cached = 0;
  return out;
}

void CachingAllocator::free_blocks(std::vector<BlockPtr> blocks) noexcept {
  for (const BlockPtr& block : blocks) {
    try {
      CD_CALL(device_->plugin(), memory_free, device_->ordinal(), block->ptr);
      std::lock_guard<std::mutex> lock(mutex_);
      ++stats_.device_frees;
    } catch (...) {
      // Leaking the device memory is the only safe answer to a failed free.
    }
  }
}

void CachingAllocator::empty_cache() {
  device_->synchronize();
  std::vector<BlockPtr> cached;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    collect_completed_pending();
    cached = detach_cached();
  }
  free_blocks(std::move(cached));
}

void CachingAllocator::release_cached_noexcept() noexcept {
  std::vector<BlockPtr> cached;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    cached = detach_cached();
  }
  free_blocks(std::move(cached));
}

MemoryStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  MemoryStats out = stats_;
  out.reserved = out.current + out.cached;
  for (const BlockPtr& block : pending_) out.reserved += block->size;
  return out;
}

void CachingAllocator::reset_peak() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.peak = stats_.current;
}

std::string CachingAllocator::describe_stats() const {
  MemoryStats s = stats();
  std::string text = "allocator: current " + format_bytes(s.current) + ", peak " + format_bytes(s.peak) +
                     ", cached " + format_bytes(s.cached) + ", " + std::to_string(s.allocations) +
                     " live allocations";
  size_t free_bytes = 0, total_bytes = 0;
  const cd_plugin_api& api = device_->plugin().api();
  if (api.memory_get_info != nullptr) {
    cd_error* err = api.memory_get_info(device_->ordinal(), &free_bytes, &total_bytes);
    if (err == nullptr) {
      text += "; device: " + format_bytes(free_bytes) + " free of " + format_bytes(total_bytes);
    } else {
      api.error_destroy(err);
    }
  }
  return text;
}

}  // namespace chipdock
