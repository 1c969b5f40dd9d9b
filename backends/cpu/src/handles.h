// Registries of live handles (streams, events).
//
// A handle given to the core is NOT the address of the object behind it but a
// value that is never reused in the process. So a destroyed handle can never
// alias a newer object (as a recycled heap address could), and every call
// with a stale or foreign handle is answered with CD_STATUS_INVALID_HANDLE
// instead of touching freed memory. Objects are held by shared_ptr: a call
// that looked one up keeps it alive even if another thread destroys the
// handle meanwhile.
#ifndef CHIPDOCK_CPU_HANDLES_H_
#define CHIPDOCK_CPU_HANDLES_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "chipdock/cd_base.h"
#include "error.h"

namespace chipdock_cpu {

// A fresh handle value, unique across all registries for the process life.
// It is not a dereferenceable address (non-canonical on x86-64).
uintptr_t next_handle_value() noexcept;

template <typename Object, typename Handle>
class HandleRegistry {
 public:
  explicit HandleRegistry(const char* kind) : kind_(kind) {}

  // Registers `object` and returns its new handle.
  Handle* add(std::shared_ptr<Object> object) {
    Handle* h = reinterpret_cast<Handle*>(next_handle_value());
    std::lock_guard<std::mutex> lock(mu_);
    live_.emplace(h, std::move(object));
    return h;
  }

  // The object behind `h`. Throws INVALID_ARGUMENT for NULL and
  // INVALID_HANDLE for an unknown or destroyed handle.
  std::shared_ptr<Object> get(Handle* h) const {
    std::lock_guard<std::mutex> lock(mu_);
    return find_locked(h)->second;
  }

  // Unregisters `h` and returns its object (same errors as get).
  std::shared_ptr<Object> remove(Handle* h) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = find_locked(h);
    std::shared_ptr<Object> object = std::move(it->second);
    live_.erase(it);
    return object;
  }

  // A snapshot of every live object.
  std::vector<std::shared_ptr<Object>> all() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::shared_ptr<Object>> out;
    out.reserve(live_.size());
    for (const auto& kv : live_) out.push_back(kv.second);
    return out;
  }

  // Unregisters and returns every live object.
  std::vector<std::shared_ptr<Object>> remove_all() {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::shared_ptr<Object>> out;
    for (auto& kv : live_) out.push_back(std::move(kv.second));
    live_.clear();
    return out;
  }

 private:
  using Map = std::unordered_map<Handle*, std::shared_ptr<Object>>;

  typename Map::iterator find_locked(Handle* h) const {
    if (h == nullptr) fail(CD_STATUS_INVALID_ARGUMENT, "%s is NULL", kind_);
    auto it = live_.find(h);
    if (it == live_.end()) {
      fail(CD_STATUS_INVALID_HANDLE, "%s %p is not live (destroyed, never created, "
           "or not a %s of this plugin)", kind_, static_cast<void*>(h), kind_);
    }
    return it;
  }

  const char* kind_;
  mutable std::mutex mu_;
  mutable Map live_;  // mutable: find_locked hands out iterators from const calls
};

}  // namespace chipdock_cpu

#endif  // CHIPDOCK_CPU_HANDLES_H_
