// Derived-data cache for constant inputs (see packed_cache.h).
#include "packed_cache.h"

#include <cstdlib>
#include <list>
#include <mutex>
#include <unordered_map>
#include <utility>

#include "chipdock/support/extensions.h"
#include "../config.h"
#include "../error.h"

namespace chipdock_cpu {
namespace packed_cache {
namespace {

struct Entry {
  uint64_t version = 0;
  std::shared_ptr<const Packed> data;
  std::list<std::string>::iterator lru;
};

class Cache {
 public:
  std::shared_ptr<const Packed> find(const std::string& key, uint64_t version) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(key);
    if (it == map_.end() || it->second.version != version) return nullptr;
    order_.splice(order_.begin(), order_, it->second.lru);
    return it->second.data;
  }

  // Replaces any entry for `key` (an older version of the same storage).
  void insert(const std::string& key, uint64_t version, std::shared_ptr<const Packed> data,
              size_t budget) {
    std::lock_guard<std::mutex> lock(mu_);
    erase_locked(key);
    order_.push_front(key);
    held_ += data->size();
    map_.emplace(key, Entry{version, std::move(data), order_.begin()});
    while (held_ > budget && !order_.empty()) erase_locked(order_.back());
  }

  size_t held() {
    std::lock_guard<std::mutex> lock(mu_);
    return held_;
  }

 private:
  void erase_locked(const std::string& key) {
    auto it = map_.find(key);
    if (it == map_.end()) return;
    held_ -= it->second.data->size();
    order_.erase(it->second.lru);
    map_.erase(it);
  }

  std::mutex mu_;
  size_t held_ = 0;
  std::list<std::string> order_;  // most recently used first
  std::unordered_map<std::string, Entry> map_;
};

Cache& cache() {
  static Cache* c = new Cache();  // never destroyed: kernels may run during static destruction
  return *c;
}

}  // namespace

std::optional<Source> source_of(const cd_tensor_view& view) {
  const cd_tensor_version* v = chipdock::support::tensor_version(view);
  if (v == nullptr) return std::nullopt;
  Source s;
  s.storage_id = v->storage_id;
  s.version = v->version;
  s.address = reinterpret_cast<uintptr_t>(view.data) + static_cast<uintptr_t>(view.byte_offset);
  return s;
}

Packed::Packed(size_t bytes) : size_((bytes + 63) / 64 * 64) {
  if (size_ == 0) size_ = 64;
  p_ = std::aligned_alloc(64, size_);
  if (p_ == nullptr) {
    fail(CD_STATUS_OUT_OF_MEMORY, "cannot allocate %zu bytes for reordered weights", size_);
  }
}

Packed::~Packed() { std::free(p_); }

std::shared_ptr<const Packed> get(const Source& source, const std::string& layout, size_t bytes,
                                  const std::function<void(void*)>& fill) {
  const size_t budget = static_cast<size_t>(config().packed_cache_bytes);
  const std::string key = std::to_string(source.storage_id) + '@' + std::to_string(source.address) +
                          '/' + layout;
  if (bytes <= budget) {
    if (auto hit = cache().find(key, source.version)) return hit;
  }
  auto made = std::make_shared<Packed>(bytes);
  fill(made->data());
  if (bytes <= budget) cache().insert(key, source.version, made, budget);
  return made;
}

size_t held_bytes() { return cache().held(); }

}  // namespace packed_cache
}  // namespace chipdock_cpu
