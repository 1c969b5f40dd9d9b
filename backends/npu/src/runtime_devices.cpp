// Devices on AscendCL: the count, one context per device shared by every
// thread, properties, the current device, device-wide synchronization and
// memory info (runtime.h, runtime_devices.h).
#include "runtime_devices.h"

#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "acl_api.h"
#include "acl_error.h"
#include "chipdock/support/error.h"
#include "runtime.h"
#include "runtime_slots.h"

namespace chipdock_npu {

using chipdock::support::fail;
using chipdock::support::format;
using chipdock::support::require_non_null;

namespace {

struct Devices {
  std::mutex mutex;
  bool initialized = false;  // aclInit done (by us or, before us, by another library)
  bool we_initialized = false;
  int32_t count = -1;
  std::vector<aclrtContext> contexts;  // per device, created on first use
};

Devices& devices() {
  static Devices d;
  return d;
}

// aclInit once per process. Another library in the process (torch-npu) may
// have called it already: ACL_ERROR_REPEAT_INITIALIZE is then success, and
// aclFinalize stays theirs.
void ensure_initialized(Devices& d, const AclApi& api) {
  if (d.initialized) return;
  const aclError status = api.aclInit(nullptr);
  if (status != ACL_SUCCESS && status != ACL_ERROR_REPEAT_INITIALIZE) check_acl(status, "aclInit");
  d.initialized = true;
  d.we_initialized = status == ACL_SUCCESS;
}

int32_t count_locked(Devices& d) {
  if (d.count >= 0) return d.count;
  const AclApi& api = acl();
  ensure_initialized(d, api);
  uint32_t n = 0;
  check_acl(api.aclrtGetDeviceCount(&n), "aclrtGetDeviceCount");
  d.count = static_cast<int32_t>(n);
  d.contexts.assign(n, nullptr);
  return d.count;
}

void copy_string(char* dst, size_t size, const std::string& src) {
  std::strncpy(dst, src.c_str(), size - 1);
  dst[size - 1] = '\0';
}

// " (simulated Ascend runtime (test double))" with the double, else "".
std::string double_suffix(const AclApi& api) {
  return api.describe.empty() ? std::string() : " (" + api.describe + ")";
}

// The driver's version (aclsysGetVersionStr("driver")), or "" where the
// runtime cannot tell.
std::string driver_version() {
  const AclApi& api = acl();
  if (api.aclsysGetVersionStr == nullptr) return "";
  char package[] = "driver";
  char version[ACL_PKG_VERSION_MAX_SIZE] = {};
  if (api.aclsysGetVersionStr(package, version) != ACL_SUCCESS) return "";
  version[sizeof(version) - 1] = '\0';
  return version[0] != '\0' ? std::string("Ascend HDK ") + version : "";
}

// The AI Core count, or 0 where the runtime cannot tell.
int32_t compute_units(int32_t device) {
  const AclApi& api = acl();
  if (api.aclrtGetDeviceInfo == nullptr) return 0;
  int64_t cores = 0;
  if (api.aclrtGetDeviceInfo(static_cast<uint32_t>(device), ACL_DEV_ATTR_AICORE_CORE_NUM, &cores) != ACL_SUCCESS) {
    return 0;
  }
  return cores > 0 && cores < (1 << 30) ? static_cast<int32_t>(cores) : 0;
}

}  // namespace

int32_t checked_device_count() {
  Devices& d = devices();
  std::lock_guard<std::mutex> lock(d.mutex);
  return count_locked(d);
}

int32_t device_count() noexcept {
  try {
    return checked_device_count();
  } catch (...) {
    return 0;
  }
}

void bind_device(int32_t device) {
  Devices& d = devices();
  aclrtContext context = nullptr;
  {
    std::lock_guard<std::mutex> lock(d.mutex);
    const int32_t n = count_locked(d);
    if (device < 0 || device >= n) {
      fail(CD_STATUS_INVALID_ARGUMENT, "device %d does not exist (npu has %d device%s)", device, n,
           n == 1 ? "" : "s");
    }
    context = d.contexts[device];
    if (context == nullptr) {
      // aclrtSetDevice creates the device's default context and makes it
      // current here; every later thread shares that one context.
      const AclApi& api = acl();
      check_acl(api.aclrtSetDevice(device), "aclrtSetDevice");
      check_acl(api.aclrtGetCurrentContext(&context), "aclrtGetCurrentContext");
      if (context == nullptr) fail(CD_STATUS_DEVICE_ERROR, "aclrtGetCurrentContext returned no context");
      d.contexts[device] = context;
      return;
    }
  }
  // Outside the lock: contexts are never destroyed before plugin_shutdown.
  check_acl(acl().aclrtSetCurrentContext(context), "aclrtSetCurrentContext");
}

void fill_properties(int32_t device, cd_device_properties* props) {
  require_non_null(props, "props");
  if (props->struct_size < CD_STRUCT_SIZE(cd_device_properties, next)) {
    fail(CD_STATUS_INVALID_ARGUMENT, "struct_size %zu is too small", props->struct_size);
  }
  bind_device(device);
  const AclApi& api = acl();
  const char* soc_name = api.aclrtGetSocName();
  const std::string soc = soc_name != nullptr && soc_name[0] != '\0' ? soc_name : "Ascend (unknown SoC)";
  size_t free_bytes = 0, total_bytes = 0;
  check_acl(api.aclrtGetMemInfo(ACL_HBM_MEM, &free_bytes, &total_bytes), "aclrtGetMemInfo");

  // Fill a full-size copy, then hand over only what the caller's size holds.
  cd_device_properties full{};
  copy_string(full.name, sizeof(full.name), soc + double_suffix(api));
  copy_string(full.vendor, sizeof(full.vendor), "Huawei");
  copy_string(full.architecture, sizeof(full.architecture), soc);
  copy_string(full.driver_version, sizeof(full.driver_version), driver_version());
  copy_string(full.runtime_version, sizeof(full.runtime_version), "CANN " + api.cann_version + double_suffix(api));
  full.total_memory = total_bytes;
  // The dtypes aclnn's descriptors carry (kernels/aclnn_call.cpp's acl_dtype).
  for (cd_dtype_t d = CD_DTYPE_FLOAT32; d <= CD_DTYPE_BOOL; ++d) full.supported_dtypes |= CD_DTYPE_BIT(d);
  full.compute_units = compute_units(device);
  full.dlpack_device_type = CD_DLPACK_EXT_DEV;
  full.host_addressable = 0;
  const size_t head = CD_STRUCT_SIZE(cd_device_properties, next);
  const size_t n = props->struct_size < sizeof(full) ? props->struct_size : sizeof(full);
  std::memcpy(reinterpret_cast<char*>(props) + head, reinterpret_cast<char*>(&full) + head, n - head);
}

namespace {
thread_local int32_t t_current_device = 0;
}  // namespace

void set_current_device(int32_t device) {
  bind_device(device);
  t_current_device = device;
}

int32_t current_device() noexcept { return t_current_device; }

cd_error* synchronize_device(int32_t device) {
  bind_device(device);
  check_acl(acl().aclrtSynchronizeDevice(), "aclrtSynchronizeDevice");
  return take_device_async_error(device);
}

void memory_info(int32_t device, size_t* free_bytes, size_t* total_bytes) {
  require_non_null(free_bytes, "free_bytes");
  require_non_null(total_bytes, "total_bytes");
  bind_device(device);
  size_t f = 0, t = 0;
  check_acl(acl().aclrtGetMemInfo(ACL_HBM_MEM, &f, &t), "aclrtGetMemInfo");
  *free_bytes = f;
  *total_bytes = t;
}

void shutdown_devices() noexcept {
  Devices& d = devices();
  std::lock_guard<std::mutex> lock(d.mutex);
  if (!d.initialized) return;  // CANN was never touched (or never found)
  try {
    const AclApi& api = acl();
    for (size_t i = 0; i < d.contexts.size(); ++i) {
      if (d.contexts[i] != nullptr) api.aclrtResetDevice(static_cast<int32_t>(i));
      d.contexts[i] = nullptr;
    }
    if (d.we_initialized) api.aclFinalize();
  } catch (...) {
    // Unreachable: d.initialized means acl() succeeded.
  }
  d.initialized = d.we_initialized = false;
  d.count = -1;
  d.contexts.clear();
}

}  // namespace chipdock_npu
