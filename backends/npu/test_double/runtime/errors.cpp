// The simulated runtime's error plumbing (SimError -> aclError + the
// per-thread aclGetRecentErrMsg text), its knobs, aclInit/aclFinalize and
// the version queries.
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>

#include "runtime_internal.h"

namespace cdsim {
namespace {

// aclGetRecentErrMsg "obtains and clears" (CANN's docs): `pending` is what
// the last failure left, `handed_out` keeps the returned text alive until
// this thread's next call.
thread_local std::string t_pending_error;
thread_local std::string t_handed_out_error;

std::mutex g_init_mutex;
bool g_initialized = false;

constexpr const char* kKnobPrefix = "CHIPDOCK_NPU_SIM_";

// A non-negative integer with an optional binary suffix (K, M, G, T, with or
// without "iB"/"B"); false if `text` is not one or overflows.
bool parse_size(const std::string& text, uint64_t* out) {
  if (text.empty() || text[0] < '0' || text[0] > '9') return false;
  errno = 0;
  char* end = nullptr;
  unsigned long long value = std::strtoull(text.c_str(), &end, 10);
  if (errno == ERANGE) return false;
  std::string suffix(end);
  int shift = 0;
  if (!suffix.empty()) {
    switch (suffix[0]) {
      case 'K': case 'k': shift = 10; break;
      case 'M': case 'm': shift = 20; break;
      case 'G': case 'g': shift = 30; break;
      case 'T': case 't': shift = 40; break;
      default: return false;
    }
    std::string rest = suffix.substr(1);
    if (!rest.empty() && rest != "B" && rest != "iB") return false;
  }
  if (shift && value > (UINT64_MAX >> shift)) return false;
  *out = static_cast<uint64_t>(value) << shift;
  return true;
}

}  // namespace

void raise(int32_t code, const char* fmt, ...) {
  char buffer[1024];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(buffer, sizeof buffer, fmt, args);
  va_end(args);
  throw SimError(code, buffer);
}

void set_recent_error(const std::string& message) {
  t_pending_error = message;
}

int32_t guarded(const std::function<void()>& body) noexcept {
  try {
    body();
    return ACL_SUCCESS;
  } catch (const SimError& e) {
    set_recent_error(e.message);
    return e.code;
  } catch (const std::bad_alloc&) {
    set_recent_error("simulated Ascend runtime: host memory exhausted");
    return ACL_ERROR_BAD_ALLOC;
  } catch (const std::exception& e) {
    set_recent_error(std::string("simulated Ascend runtime: internal error: ") + e.what());
    return ACL_ERROR_INTERNAL_ERROR;
  } catch (...) {
    set_recent_error("simulated Ascend runtime: internal error");
    return ACL_ERROR_INTERNAL_ERROR;
  }
}

std::string setting(const char* name) {
  std::string key = name;
  if (key.compare(0, std::strlen(kKnobPrefix), kKnobPrefix) != 0) key = kKnobPrefix + key;
  const char* value = std::getenv(key.c_str());
  return value ? std::string(value) : std::string();
}

int32_t device_count_setting() {
  std::string text = setting("CHIPDOCK_NPU_SIM_DEVICES");
  if (text.empty()) return 2;
  uint64_t value = 0;
  // More than 64 simulated devices is certainly a typo.
  if (!parse_size(text, &value) || text.find_first_not_of("0123456789") != std::string::npos || value > 64)
    raise(ACL_ERROR_INVALID_PARAM, "CHIPDOCK_NPU_SIM_DEVICES=%s is not a device count (an integer 0..64)",
          text.c_str());
  return static_cast<int32_t>(value);
}

uint64_t memory_limit_setting() {
  std::string text = setting("CHIPDOCK_NPU_SIM_MEMORY");
  if (text.empty()) return uint64_t{8} << 30;
  uint64_t value = 0;
  if (!parse_size(text, &value))
    raise(ACL_ERROR_INVALID_PARAM,
          "CHIPDOCK_NPU_SIM_MEMORY=%s is not a size in bytes (an integer, optionally with K, M, G or T)",
          text.c_str());
  return value;
}

bool initialized() noexcept {
  std::lock_guard<std::mutex> lock(g_init_mutex);
  return g_initialized;
}

}  // namespace cdsim

extern "C" {

const char* cdsim_describe(void) { return cdsim::kDescription; }

const char* aclGetRecentErrMsg() {
  if (cdsim::t_pending_error.empty()) return nullptr;
  cdsim::t_handed_out_error.swap(cdsim::t_pending_error);
  cdsim::t_pending_error.clear();
  return cdsim::t_handed_out_error.c_str();
}

aclError aclInit(const char* configPath) {
  return cdsim::guarded([&] {
    if (configPath && *configPath) {
      std::FILE* file = std::fopen(configPath, "r");
      if (!file) cdsim::raise(ACL_ERROR_INVALID_FILE, "aclInit: cannot read the config file %s", configPath);
      std::fclose(file);
    }
    std::lock_guard<std::mutex> lock(cdsim::g_init_mutex);
    if (cdsim::g_initialized)
      cdsim::raise(ACL_ERROR_REPEAT_INITIALIZE, "aclInit: already initialized in this process");
    cdsim::g_initialized = true;
  });
}

aclError aclFinalize() {
  return cdsim::guarded([] {
    std::lock_guard<std::mutex> lock(cdsim::g_init_mutex);
    if (!cdsim::g_initialized) cdsim::raise(ACL_ERROR_REPEAT_FINALIZE, "aclFinalize: not initialized");
    cdsim::g_initialized = false;
  });
}

aclError aclrtGetVersion(int32_t* majorVersion, int32_t* minorVersion, int32_t* patchVersion) {
  return cdsim::guarded([&] {
    if (!majorVersion || !minorVersion || !patchVersion)
      cdsim::raise(ACL_ERROR_INVALID_PARAM, "aclrtGetVersion: a NULL output pointer");
    // The ACL API of the headers the double is built against (torch-npu 2.14.0).
    *majorVersion = 1;
    *minorVersion = 17;
    *patchVersion = 0;
  });
}

aclError aclsysGetVersionStr(char* pkgName, char* versionStr) {
  return cdsim::guarded([&] {
    if (!pkgName || !versionStr) cdsim::raise(ACL_ERROR_INVALID_PARAM, "aclsysGetVersionStr: a NULL argument");
    // The package folders of a CANN install's share/info that carry CANN's own version.
    static const char* const kPackages[] = {"cann", "runtime", "compiler", "hccl", "toolkit", "opp",
                                            "opp_kernel", "aoe", "ncs"};
    bool known = false;
    for (const char* name : kPackages) known = known || std::strcmp(name, pkgName) == 0;
    if (!known) cdsim::raise(ACL_ERROR_INVALID_FILE, "aclsysGetVersionStr: no package named '%s'", pkgName);
    std::string version = cdsim::setting("CHIPDOCK_NPU_SIM_CANN_VERSION");
    if (version.empty()) version = "8.3.RC1";
    std::snprintf(versionStr, ACL_PKG_VERSION_MAX_SIZE, "%s", version.c_str());
  });
}

}  // extern "C"
