// One loaded backend library: its manifest, its negotiated function table,
// the kernels it registered, and how to call it safely.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "chipdock/device_api.h"
#include "error.hpp"
#include "small_vector.hpp"

namespace chipdock {

// What the manifest beside the library says. Python reads and checks the
// JSON before the library is touched; the core re-checks what the library
// itself claims against it after negotiation.
struct Manifest {
  std::string manifest_path;
  std::string name;
  std::string device_type;
  std::string version;
  std::string library_path;  // absolute
  int32_t abi_major = 0;
  int32_t abi_minor = 0;
  // The opset version the backend was built against (manifest `opset_version`;
  // 1 when the manifest predates the field). The dispatcher never hands a
  // kernel of this backend an attribute introduced in a later opset version.
  int32_t opset_version = 1;
};

// A dtype signature: the dtypes of a call's inputs, then its outputs.
using DtypeList = SmallVector<cd_dtype_t, 8>;

// The kernels one plugin registered, keyed by op and dtype signature.
struct Kernel {
  cd_kernel_fn fn = nullptr;
  uint32_t flags = 0;  // CD_KERNEL_* (0 from a 1.0 plugin)
};

class KernelTable {
 public:
  void add(const std::string& op, std::vector<cd_dtype_t> dtypes, Kernel kernel);
  // fn == NULL when the plugin has no kernel for exactly this signature.
  // Allocation-free: it runs on every op call.
  Kernel find(const std::string& op, const DtypeList& dtypes) const;
  // (op, dtype signature) pairs, sorted; for coverage reports.
  std::vector<std::pair<std::string, std::vector<cd_dtype_t>>> list() const;
  size_t size() const;

 private:
  mutable std::mutex mutex_;
  struct Entry {
    std::vector<cd_dtype_t> dtypes;
    Kernel kernel;
  };
  std::map<std::string, std::vector<Entry>, std::less<>> kernels_;  // by op; few signatures each
};

class Plugin {
 public:
  // dlopens the library, negotiates, validates and registers kernels.
  // Throws Error(kStatusPluginRefused, <name>, "load", <reason>) on refusal;
  // a refused library is unloaded again.
  static std::shared_ptr<Plugin> load(const Manifest& manifest);
  ~Plugin();
  Plugin(const Plugin&) = delete;
  Plugin& operator=(const Plugin&) = delete;

  const std::string& name() const noexcept { return manifest_.name; }
  const std::string& device_type() const noexcept { return manifest_.device_type; }
  const Manifest& manifest() const noexcept { return manifest_; }
  int32_t opset_version() const noexcept { return manifest_.opset_version; }
  // The table as negotiated: slots beyond the plugin's struct_size are NULL.
  const cd_plugin_api& api() const noexcept { return api_; }
  int32_t plugin_abi_major() const noexcept { return abi_major_; }
  int32_t plugin_abi_minor() const noexcept { return abi_minor_; }
  size_t table_size() const noexcept { return table_size_; }
  std::string plugin_version() const { return api_.version ? api_.version : ""; }

  int32_t device_count() const noexcept { return device_count_; }
  // Why the plugin reports no devices ("" when it has some).
  const std::string& device_error() const noexcept { return device_error_; }

  KernelTable& kernels() noexcept { return kernels_; }

  // Turns a plugin error into an Error (destroying the cd_error); no-op on NULL.
  void check(cd_error* err, const char* call) const;

  // Calls a slot, raising UNIMPLEMENTED when the plugin left it NULL.
  template <class Fn, class... Args>
  void call(Fn fn, const char* slot, Args... args) const {
    if (fn == nullptr) {
      throw Error(CD_STATUS_UNIMPLEMENTED, name(), slot, "not implemented by this backend");
    }
    check(fn(args...), slot);
  }

  // Calls plugin_shutdown once (idempotent). After it no slot may be called.
  void shutdown() noexcept;
  bool is_shut_down() const noexcept { return shut_down_; }

 private:
  Plugin() = default;
  void negotiate(const cd_plugin_api* table);
  void probe_devices();

  Manifest manifest_;
  void* library_ = nullptr;
  cd_plugin_api api_{};
  size_t table_size_ = 0;
  int32_t abi_major_ = 0;
  int32_t abi_minor_ = 0;
  int32_t device_count_ = 0;
  std::string device_error_;
  KernelTable kernels_;
  bool shut_down_ = false;
  bool accepted_ = false;
};

// Calls `slot` of `plugin` with the arguments that follow.
#define CD_CALL(plugin, slot, ...) (plugin).call((plugin).api().slot, #slot, __VA_ARGS__)

// The services table every plugin receives (static storage).
const cd_core_api* core_api();

// Messages plugins sent through cd_core_api.log, oldest first (bounded).
std::vector<std::pair<int32_t, std::string>> plugin_log();

}  // namespace chipdock
