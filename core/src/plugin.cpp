#include "plugin.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <deque>

#include "launch.hpp"
#include "version.hpp"

namespace chipdock {

// ---------------------------------------------------------------- kernels --

void KernelTable::add(const std::string& op, std::vector<cd_dtype_t> dtypes, Kernel kernel) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<Entry>& entries = kernels_[op];
  for (Entry& e : entries) {
    if (e.dtypes == dtypes) {  // re-registration replaces
      e.kernel = kernel;
      return;
    }
  }
  entries.push_back(Entry{std::move(dtypes), kernel});
}

Kernel KernelTable::find(const std::string& op, const DtypeList& dtypes) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = kernels_.find(op);
  if (it == kernels_.end()) return Kernel{};
  for (const Entry& e : it->second) {
    if (e.dtypes.size() == dtypes.size() && std::equal(e.dtypes.begin(), e.dtypes.end(), dtypes.begin())) {
      return e.kernel;
    }
  }
  return Kernel{};
}

std::vector<std::pair<std::string, std::vector<cd_dtype_t>>> KernelTable::list() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::pair<std::string, std::vector<cd_dtype_t>>> out;
  for (const auto& [op, entries] : kernels_) {
    for (const Entry& e : entries) out.emplace_back(op, e.dtypes);
  }
  std::sort(out.begin(), out.end());
  return out;
}

size_t KernelTable::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t n = 0;
  for (const auto& entry : kernels_) n += entry.second.size();
  return n;
}

// ------------------------------------------------------------ core services --

namespace {

std::mutex g_log_mutex;
std::deque<std::pair<int32_t, std::string>> g_log;
constexpr size_t kMaxLogEntries = 1000;
uint64_t g_log_total = 0;  // messages ever logged (g_log keeps the last kMaxLogEntries)

cd_status_t core_kernel_register(cd_kernel_registry* registry, const cd_kernel_def* def) noexcept {
  if (registry == nullptr || def == nullptr || def->op == nullptr || def->fn == nullptr ||
      def->num_dtypes < 0 || (def->num_dtypes > 0 && def->dtypes == nullptr)) {
    return CD_STATUS_INVALID_ARGUMENT;
  }
  std::vector<cd_dtype_t> dtypes(def->dtypes, def->dtypes + def->num_dtypes);
  for (cd_dtype_t dt : dtypes) {
    if (dt <= CD_DTYPE_INVALID || dt >= CD_DTYPE_COUNT) return CD_STATUS_INVALID_ARGUMENT;
  }
  try {
    // `flags` exists in every 1.x def; bits this core does not know are ignored.
    reinterpret_cast<KernelTable*>(registry)->add(def->op, std::move(dtypes),
                                                  Kernel{def->fn, def->flags & CD_KERNEL_CONTIGUOUS_INPUTS});
  } catch (...) {
    return CD_STATUS_OUT_OF_MEMORY;
  }
  return CD_STATUS_OK;
}

cd_status_t core_workspace_allocate(const cd_kernel_context* ctx, size_t bytes, void** out) noexcept {
  if (ctx == nullptr || out == nullptr || ctx->core_private == nullptr) return CD_STATUS_INVALID_ARGUMENT;
  return workspace_allocate(ctx, bytes, out);
}

void core_log(cd_log_level_t level, const char* message) noexcept {
  try {
    std::lock_guard<std::mutex> lock(g_log_mutex);
    g_log.emplace_back(level, message ? message : "");
    ++g_log_total;
    if (g_log.size() > kMaxLogEntries) g_log.pop_front();
  } catch (...) {
  }
}

const cd_core_api kCoreApi = {
    sizeof(cd_core_api), nullptr, CD_ABI_VERSION_MAJOR, CD_ABI_VERSION_MINOR, kCoreVersion,
    core_kernel_register, core_workspace_allocate, core_log,
};

// Slots a plugin must fill; any NULL here refuses it.
struct RequiredSlot {
  const char* name;
  size_t offset;
};
#define CD_REQUIRED(slot) RequiredSlot{#slot, offsetof(cd_plugin_api, slot)}
const RequiredSlot kRequiredSlots[] = {
    CD_REQUIRED(error_get_code),        CD_REQUIRED(error_get_message),
    CD_REQUIRED(error_destroy),         CD_REQUIRED(device_get_count),
    CD_REQUIRED(device_get_properties), CD_REQUIRED(memory_allocate),
    CD_REQUIRED(memory_free),           CD_REQUIRED(memcpy_host_to_device),
    CD_REQUIRED(memcpy_device_to_host), CD_REQUIRED(memcpy_device_to_device),
    CD_REQUIRED(stream_create),         CD_REQUIRED(stream_destroy),
    CD_REQUIRED(stream_synchronize),    CD_REQUIRED(event_create),
    CD_REQUIRED(event_destroy),         CD_REQUIRED(event_record),
    CD_REQUIRED(event_synchronize),     CD_REQUIRED(event_query),
};
#undef CD_REQUIRED

[[noreturn]] void refuse(const Manifest& m, const std::string& reason) {
  throw Error(kStatusPluginRefused, m.name, "load", reason);
}

std::string describe_string(const char* s) { return s ? "'" + std::string(s) + "'" : "NULL"; }

uint64_t log_total() {
  std::lock_guard<std::mutex> lock(g_log_mutex);
  return g_log_total;
}

// The last message logged since log_total() was `since`, as ": <message>", or "".
std::string last_log_since(uint64_t since) {
  std::lock_guard<std::mutex> lock(g_log_mutex);
  if (g_log_total == since || g_log.empty()) return "";
  return ": " + g_log.back().second;
}

}  // namespace

const cd_core_api* core_api() { return &kCoreApi; }

std::vector<std::pair<int32_t, std::string>> plugin_log() {
  std::lock_guard<std::mutex> lock(g_log_mutex);
  return {g_log.begin(), g_log.end()};
}

// ----------------------------------------------------------------- loading --

namespace {

// Discovery (chipdock/_discovery.py) resolves the library to a real path inside the manifest's real folder;
// re-checked here so that no caller of load() can make dlopen search the library path or leave the folder.
bool library_inside_manifest_folder(const Manifest& m) {
  const size_t slash = m.manifest_path.rfind('/');
  if (m.library_path.empty() || m.library_path.front() != '/' || slash == std::string::npos) return false;
  const std::string folder = m.manifest_path.substr(0, slash + 1);
  return m.library_path.compare(0, folder.size(), folder) == 0 && m.library_path.find("/../") == std::string::npos;
}

}  // namespace

std::shared_ptr<Plugin> Plugin::load(const Manifest& manifest) {
  if (!library_inside_manifest_folder(manifest)) {
    refuse(manifest, "the library '" + manifest.library_path + "' is not an absolute path inside the folder of " +
                         "the manifest '" + manifest.manifest_path + "'");
  }
  std::shared_ptr<Plugin> plugin(new Plugin());
  plugin->manifest_ = manifest;
  dlerror();
  plugin->library_ = dlopen(manifest.library_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (plugin->library_ == nullptr) {
    const char* why = dlerror();
    refuse(manifest, std::string("the library failed to load: ") + (why ? why : "unknown dlopen error"));
  }
  auto entry = reinterpret_cast<cd_plugin_entry_fn>(dlsym(plugin->library_, CD_PLUGIN_ENTRY_SYMBOL));
  if (entry == nullptr) {
    refuse(manifest, "the library exports no entry symbol '" CD_PLUGIN_ENTRY_SYMBOL "'");
  }
  const uint64_t logged_before_entry = log_total();
  const cd_plugin_api* table = entry(&kCoreApi);
  if (table == nullptr) {
    // A plugin that refuses says why in the log; the refusal quotes its last word.
    refuse(manifest, "the plugin refused this core (core ABI " + std::to_string(CD_ABI_VERSION_MAJOR) +
                         "." + std::to_string(CD_ABI_VERSION_MINOR) + ", core " + kCoreVersion + ")" +
                         last_log_since(logged_before_entry));
  }
  plugin->negotiate(table);
  plugin->probe_devices();
  if (plugin->api_.kernels_register != nullptr) {
    try {
      plugin->check(plugin->api_.kernels_register(reinterpret_cast<cd_kernel_registry*>(&plugin->kernels_)),
                    "kernels_register");
    } catch (const Error& e) {
      refuse(manifest, "kernels_register failed: " + e.reason());
    }
  }
  plugin->accepted_ = true;
  return plugin;
}

void Plugin::negotiate(const cd_plugin_api* table) {
  const Manifest& m = manifest_;
  // Read the fixed header first: every 1.x table has it.
  table_size_ = table->struct_size;
  abi_major_ = table->abi_major;
  abi_minor_ = table->abi_minor;
  if (abi_major_ != CD_ABI_VERSION_MAJOR) {
    refuse(m, "the library was built for ABI major " + std::to_string(abi_major_) +
                  ", this core speaks ABI " + std::to_string(CD_ABI_VERSION_MAJOR) + ".x");
  }
  if (table_size_ < CD_PLUGIN_API_SIZE_V1_0) {
    refuse(m, "the function table is " + std::to_string(table_size_) + " bytes; an ABI 1.0 table is " +
                  std::to_string(CD_PLUGIN_API_SIZE_V1_0) + " bytes (undersized struct)");
  }
  // Copy what both sides know; anything newer than this core is ignored,
  // anything older than this core stays NULL (= unimplemented).
  std::memcpy(&api_, table, std::min(table_size_, sizeof(cd_plugin_api)));
  api_.struct_size = sizeof(cd_plugin_api);

  if (api_.name == nullptr || m.name != api_.name) {
    refuse(m, "the manifest names the backend '" + m.name + "' but the library calls itself " +
                  describe_string(api_.name));
  }
  if (api_.device_type == nullptr || m.device_type != api_.device_type) {
    refuse(m, "the manifest says device type '" + m.device_type + "' but the library says " +
                  describe_string(api_.device_type));
  }
  if (m.abi_major != abi_major_ || m.abi_minor != abi_minor_) {
    refuse(m, "the manifest says ABI " + std::to_string(m.abi_major) + "." + std::to_string(m.abi_minor) +
                  " but the library was built for ABI " + std::to_string(abi_major_) + "." +
                  std::to_string(abi_minor_));
  }
  const auto* bytes = reinterpret_cast<const unsigned char*>(&api_);
  for (const RequiredSlot& slot : kRequiredSlots) {
    void* fn = nullptr;
    std::memcpy(&fn, bytes + slot.offset, sizeof(fn));
    if (fn == nullptr) refuse(m, std::string("the required slot '") + slot.name + "' is NULL");
  }
}

void Plugin::probe_devices() {
  int32_t count = 0;
  cd_error* err = api_.device_get_count(&count);
  if (err != nullptr) {
    try {
      check(err, "device_get_count");
    } catch (const Error& e) {
      device_error_ = e.reason();
    }
    count = 0;
  } else if (count < 0) {
    device_error_ = "device_get_count returned a negative count";
    count = 0;
  } else if (count == 0) {
    device_error_ = "the backend reports no devices";
  }
  device_count_ = count;
}

Plugin::~Plugin() {
  // Refused plugins are unloaded; accepted ones stay mapped for the life of
  // the process, since their threads and callbacks may still reference code.
  if (library_ != nullptr && !accepted_) dlclose(library_);
}

void Plugin::shutdown() noexcept {
  if (shut_down_) return;
  shut_down_ = true;
  if (api_.plugin_shutdown != nullptr) {
    cd_error* err = api_.plugin_shutdown();
    if (err != nullptr) api_.error_destroy(err);
  }
}

void Plugin::check(cd_error* err, const char* call) const {
  if (err == nullptr) return;
  cd_status_t code = api_.error_get_code(err);
  const char* message = api_.error_get_message(err);
  std::string reason = message ? message : "(no message)";
  api_.error_destroy(err);
  // Plugins often prefix their messages with the function name; the core
  // already names the call, so do not say it twice.
  const std::string prefix = std::string(call) + ": ";
  if (reason.compare(0, prefix.size(), prefix) == 0) reason.erase(0, prefix.size());
  if (code == CD_STATUS_OK) code = CD_STATUS_INTERNAL;  // an error object must carry a failure
  throw Error(code, name(), call, reason);
}

}  // namespace chipdock
