// Finding and opening CANN at run time (acl_api.h): the search order, the
// required symbols, the CANN version range and the test double's detection.
//
// Where the libraries come from, first match wins:
//   CHIPDOCK_NPU_RUNTIME=test-double  the wheel's _test_double/ folder (beside
//                                     this library, found with dladdr); only
//                                     this setting ever looks there
//   CHIPDOCK_NPU_RUNTIME=<folder>     that folder alone
//   otherwise                         $ASCEND_HOME_PATH/lib64,
//                                     /usr/local/Ascend/ascend-toolkit/latest/lib64,
//                                     then ld.so's own search (LD_LIBRARY_PATH ...)
// libnnopbase.so, the op libraries and libhccl.so are looked for in
// libascendcl.so's folder first. CHIPDOCK_NPU_OPAPI_LIBRARY=<file> replaces
// the op libraries with that one file.
#include <dlfcn.h>
#include <link.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "acl_api.h"
#include "chipdock/support/core_link.h"
#include "chipdock/support/error.h"

namespace chipdock_npu {

using chipdock::support::fail;
using chipdock::support::format;

namespace {

constexpr const char* kRuntimeEnv = "CHIPDOCK_NPU_RUNTIME";
constexpr const char* kOpapiEnv = "CHIPDOCK_NPU_OPAPI_LIBRARY";
constexpr const char* kDefaultToolkit = "/usr/local/Ascend/ascend-toolkit/latest/lib64";
// CANN < 8.5 ships every aclnn op in libopapi.so; 8.5 splits them by
// package (ops-math, ops-nn, ops-cv, ops-transformer). Every one present is
// searched, in this order.
const char* const kOpLibraries[] = {"libopapi.so", "libopapi_math.so", "libopapi_nn.so", "libopapi_cv.so",
                                    "libopapi_transformer.so"};

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

// Where to look, and how that was decided (quoted in every reason).
struct Search {
  std::string origin;
  std::vector<std::string> folders;
  bool ld_so = false;
};

// The folder this plug-in library was loaded from.
std::string plugin_folder() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&plugin_folder), &info) == 0 || info.dli_fname == nullptr) return ".";
  std::string path = info.dli_fname;
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

Search make_search() {
  Search s;
  const std::string runtime = env(kRuntimeEnv);
  if (runtime == "test-double") {
    s.origin = std::string(kRuntimeEnv) + "=test-double";
    s.folders.push_back(plugin_folder() + "/_test_double");
  } else if (!runtime.empty()) {
    s.origin = std::string(kRuntimeEnv) + "=" + runtime;
    s.folders.push_back(runtime);
  } else {
    const std::string home = env("ASCEND_HOME_PATH");
    if (!home.empty()) s.folders.push_back(home + "/lib64");
    s.folders.push_back(kDefaultToolkit);
    s.ld_so = true;
  }
  return s;
}

// The file a handle was loaded from (ld.so may have found it anywhere).
std::string handle_path(void* handle, const std::string& fallback) {
  link_map* map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr &&
      map->l_name[0] != '\0') {
    return map->l_name;
  }
  return fallback;
}

std::string folder_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

struct Opened {
  void* handle = nullptr;
  std::string path;
};

// Opens `name` from the first folder that has it, else through ld.so (when
// the search allows). `tried` collects one entry per place looked at.
// RTLD_LAZY as torch-npu opens CANN: CANN's libraries carry references to
// components a given install may lack and never call.
Opened open_library(const Search& search, const std::vector<std::string>& folders, const char* name,
                    std::vector<std::string>* tried) {
  for (const std::string& folder : folders) {
    const std::string path = folder + "/" + name;
    if (access(path.c_str(), F_OK) != 0) {
      tried->push_back(path + " (absent)");
      continue;
    }
    void* handle = dlopen(path.c_str(), RTLD_LAZY | RTLD_LOCAL);
    if (handle != nullptr) return {handle, path};
    const char* why = dlerror();
    tried->push_back(path + " (" + (why != nullptr ? why : "dlopen failed") + ")");
  }
  if (search.ld_so) {
    void* handle = dlopen(name, RTLD_LAZY | RTLD_LOCAL);
    if (handle != nullptr) return {handle, handle_path(handle, name)};
    const std::string ld_path = env("LD_LIBRARY_PATH");
    tried->push_back(ld_path.empty() ? std::string("ld.so's search (LD_LIBRARY_PATH unset)")
                                     : "ld.so's search (LD_LIBRARY_PATH=" + ld_path + ")");
  }
  return {};
}

std::string join(const std::vector<std::string>& items, const char* separator) {
  std::string out;
  for (const std::string& item : items) {
    if (!out.empty()) out += separator;
    out += item;
  }
  return out;
}

std::string where_clause(const Search& search) {
  return search.origin.empty() ? std::string() : " (" + search.origin + ")";
}

// --- CANN versions --------------------------------------------------------------------
//
// "8.0.0", "8.3.RC1", "8.0.T113", "8.5.0.alpha001": major.minor, then a
// patch number, or a pre-release tag (RCn, Tn, alpha...) that comes before
// major.minor.0 — the order CANN's releases ship in (and torch-npu's
// IsGteCANNVersion computes).
struct Version {
  long major = 0, minor = 0, patch = 0;
  bool prerelease = false;
  long pre_rank = 0;    // T < alpha < beta < RC
  long pre_number = 0;  // RC1 < RC2
};

bool parse_number(const std::string& s, long* out) {
  if (s.empty() || s.size() > 9) return false;
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  *out = std::strtol(s.c_str(), nullptr, 10);
  return true;
}

bool parse_version(const std::string& text, Version* v) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t dot = text.find('.', start);
    parts.push_back(text.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  if (parts.size() < 2 || !parse_number(parts[0], &v->major) || !parse_number(parts[1], &v->minor)) return false;
  if (parts.size() == 2) return true;
  const std::string& third = parts[2];
  if (parse_number(third, &v->patch)) return true;
  struct Tag {
    const char* prefix;
    long rank;
  };
  static const Tag kTags[] = {{"T", 0}, {"alpha", 1}, {"beta", 2}, {"RC", 3}};
  for (const Tag& tag : kTags) {
    const std::string prefix = tag.prefix;
    if (third.compare(0, prefix.size(), prefix) == 0 && parse_number(third.substr(prefix.size()), &v->pre_number)) {
      v->prerelease = true;
      v->pre_rank = tag.rank;
      return true;
    }
  }
  return false;
}

// <0, 0, >0 as a precedes, equals, follows b.
int compare(const Version& a, const Version& b) {
  auto key = [](const Version& v) {
    // A pre-release sorts before the release of the same major.minor.0.
    return std::vector<long>{v.major, v.minor, v.prerelease ? -1 : v.patch, v.prerelease ? v.pre_rank : 0,
                             v.pre_number};
  };
  const std::vector<long> ka = key(a), kb = key(b);
  return ka < kb ? -1 : (ka > kb ? 1 : 0);
}

// Refuses a CANN outside [CHIPDOCK_NPU_CANN_MIN, CHIPDOCK_NPU_CANN_MAX_EXCLUSIVE).
// The upper bound also excludes its own pre-releases (9.2.RC1 is 9.2, as
// pip reads "<9.2.0").
void check_cann_range(const std::string& found, const std::string& library) {
  Version v, lo, hi;
  if (!parse_version(CHIPDOCK_NPU_CANN_MIN, &lo) || !parse_version(CHIPDOCK_NPU_CANN_MAX_EXCLUSIVE, &hi)) {
    fail(CD_STATUS_INTERNAL, "the built-in CANN range %s..%s does not parse", CHIPDOCK_NPU_CANN_MIN,
         CHIPDOCK_NPU_CANN_MAX_EXCLUSIVE);
  }
  const std::string range = format(">=%s,<%s", CHIPDOCK_NPU_CANN_MIN, CHIPDOCK_NPU_CANN_MAX_EXCLUSIVE);
  if (!parse_version(found, &v)) {
    fail(CD_STATUS_UNAVAILABLE, "%s reports CANN version '%s', which is not a CANN version; chipdock-npu needs CANN %s",
         library.c_str(), found.c_str(), range.c_str());
  }
  if (compare(v, lo) < 0) {
    fail(CD_STATUS_UNAVAILABLE, "CANN %s at %s is too old: chipdock-npu needs CANN %s", found.c_str(),
         library.c_str(), range.c_str());
  }
  const bool at_or_above_max =
      compare(v, hi) >= 0 || (v.prerelease && !hi.prerelease && v.major == hi.major && v.minor == hi.minor &&
                              hi.patch == 0);
  if (at_or_above_max) {
    fail(CD_STATUS_UNAVAILABLE, "CANN %s at %s is too new: chipdock-npu %s supports CANN %s", found.c_str(),
         library.c_str(), CHIPDOCK_NPU_VERSION, range.c_str());
  }
}

// aclsysGetVersionStr("runtime"), else (runtimes before CANN 8.1.RC1 lack
// or leave empty that query) the ACL API version from aclrtGetVersion,
// which is then checked against the API major these headers declare.
std::string cann_version(const AclApi& api) {
  if (api.aclsysGetVersionStr != nullptr) {
    char package[] = "runtime";
    char version[ACL_PKG_VERSION_MAX_SIZE] = {};
    if (api.aclsysGetVersionStr(package, version) == ACL_SUCCESS) {
      version[sizeof(version) - 1] = '\0';
      if (version[0] != '\0') {
        check_cann_range(version, api.library_path);
        return version;
      }
    }
  }
  int32_t major = 0, minor = 0, patch = 0;
  const aclError status = api.aclrtGetVersion(&major, &minor, &patch);
  if (status != ACL_SUCCESS) {
    fail(CD_STATUS_UNAVAILABLE, "%s: neither aclsysGetVersionStr nor aclrtGetVersion (error %d) reports a version",
         api.library_path.c_str(), status);
  }
  if (major != ACL_MAJOR_VERSION) {
    fail(CD_STATUS_UNAVAILABLE, "%s implements ACL API %d.%d.%d; chipdock-npu was built against ACL API %d.%d.%d "
         "and needs CANN >=%s,<%s", api.library_path.c_str(), major, minor, patch, ACL_MAJOR_VERSION,
         ACL_MINOR_VERSION, ACL_PATCH_VERSION, CHIPDOCK_NPU_CANN_MIN, CHIPDOCK_NPU_CANN_MAX_EXCLUSIVE);
  }
  chipdock::support::log_message(
      CD_LOG_WARNING, format("npu: %s does not report its CANN version (aclsysGetVersionStr); ACL API %d.%d.%d "
                             "accepted without checking CANN >=%s,<%s", api.library_path.c_str(), major, minor,
                             patch, CHIPDOCK_NPU_CANN_MIN, CHIPDOCK_NPU_CANN_MAX_EXCLUSIVE));
  return format("unknown (ACL API %d.%d.%d)", major, minor, patch);
}

// --- loading --------------------------------------------------------------------------

template <typename Fn>
void resolve(void* handle, const char* name, Fn* out, std::vector<std::string>* missing) {
  *out = reinterpret_cast<Fn>(dlsym(handle, name));
  if (*out == nullptr && missing != nullptr) missing->push_back(name);
}

void require_all(const std::vector<std::string>& missing, const std::string& library) {
  if (missing.empty()) return;
  fail(CD_STATUS_UNAVAILABLE, "%s lacks %s (required by chipdock-npu; an incomplete or foreign CANN install?)",
       library.c_str(), join(missing, ", ").c_str());
}

struct State {
  Search search;
  std::vector<std::string> preferred;  // libascendcl.so's folder first, then the search's
  AclApi acl;
  bool acl_ok = false;
  cd_status_t acl_code = CD_STATUS_UNAVAILABLE;
  std::string acl_reason;

  HcclApi hccl;
  std::once_flag hccl_once;
  bool hccl_ok = false;
  std::string hccl_reason;

  std::once_flag opapi_once;
  std::vector<void*> opapi;
  std::string opapi_where;
};

State& state() {
  static State s;
  return s;
}

void load_acl(State& s) {
  s.search = make_search();
  std::vector<std::string> tried;
  const Opened ascendcl = open_library(s.search, s.search.folders, "libascendcl.so", &tried);
  if (ascendcl.handle == nullptr) {
    fail(CD_STATUS_UNAVAILABLE, "CANN not found%s: libascendcl.so is in none of: %s. Install CANN and source "
         "its set_env.sh, or set ASCEND_HOME_PATH", where_clause(s.search).c_str(), join(tried, "; ").c_str());
  }
  AclApi& api = s.acl;
  api.library_path = ascendcl.path;
  s.preferred.push_back(folder_of(ascendcl.path));
  for (const std::string& f : s.search.folders) {
    if (f != s.preferred.front()) s.preferred.push_back(f);
  }

  std::vector<std::string> missing;
#define CD_NPU_RESOLVE_REQUIRED_(name) resolve(ascendcl.handle, #name, &api.name, &missing);
#define CD_NPU_RESOLVE_OPTIONAL_(name) resolve(ascendcl.handle, #name, &api.name, nullptr);
  CD_NPU_ACL_REQUIRED(CD_NPU_RESOLVE_REQUIRED_)
  CD_NPU_ACL_OPTIONAL(CD_NPU_RESOLVE_OPTIONAL_)
  require_all(missing, api.library_path);

  // The simulated runtime says what it is; a real CANN has no such symbol.
  using DescribeFn = const char* (*)();
  DescribeFn describe = nullptr;
  resolve(ascendcl.handle, "cdsim_describe", &describe, nullptr);
  if (describe != nullptr && describe() != nullptr) api.describe = describe();

  api.cann_version = cann_version(api);

  tried.clear();
  const Opened nnopbase = open_library(s.search, s.preferred, "libnnopbase.so", &tried);
  if (nnopbase.handle == nullptr) {
    fail(CD_STATUS_UNAVAILABLE, "CANN %s at %s has no libnnopbase.so (aclnn's tensor descriptors)%s: looked in %s",
         api.cann_version.c_str(), api.library_path.c_str(), where_clause(s.search).c_str(),
         join(tried, "; ").c_str());
  }
#undef CD_NPU_RESOLVE_REQUIRED_
#undef CD_NPU_RESOLVE_OPTIONAL_
  missing.clear();
#define CD_NPU_RESOLVE_NNOPBASE_(name) resolve(nnopbase.handle, #name, &api.name, &missing);
  CD_NPU_NNOPBASE(CD_NPU_RESOLVE_NNOPBASE_)
#undef CD_NPU_RESOLVE_NNOPBASE_
  require_all(missing, nnopbase.path);

  const std::string what = api.describe.empty() ? std::string("CANN") : api.describe + ", CANN";
  chipdock::support::log_message(api.describe.empty() ? CD_LOG_INFO : CD_LOG_WARNING,
                                 format("npu: %s %s from %s%s", what.c_str(), api.cann_version.c_str(),
                                        api.library_path.c_str(), where_clause(s.search).c_str()));
}

State& loaded() {
  State& s = state();
  static std::once_flag once;
  std::call_once(once, [&s] {
    try {
      load_acl(s);
      s.acl_ok = true;
    } catch (const chipdock::support::Error& e) {
      s.acl_code = e.code();
      s.acl_reason = e.what();
    } catch (const std::exception& e) {
      s.acl_code = CD_STATUS_INTERNAL;
      s.acl_reason = std::string("loading CANN failed: ") + e.what();
    }
  });
  return s;
}

void load_hccl(State& s) {
  std::vector<std::string> tried;
  const Opened lib = open_library(s.search, s.preferred, "libhccl.so", &tried);
  if (lib.handle == nullptr) {
    fail(CD_STATUS_UNAVAILABLE, "HCCL not found%s: no libhccl.so in %s", where_clause(s.search).c_str(),
         join(tried, "; ").c_str());
  }
  HcclApi& api = s.hccl;
  api.library_path = lib.path;
  std::vector<std::string> missing;
#define CD_NPU_RESOLVE_REQUIRED_(name) resolve(lib.handle, #name, &api.name, &missing);
#define CD_NPU_RESOLVE_OPTIONAL_(name) resolve(lib.handle, #name, &api.name, nullptr);
  CD_NPU_HCCL(CD_NPU_RESOLVE_REQUIRED_)
  CD_NPU_HCCL_OPTIONAL(CD_NPU_RESOLVE_OPTIONAL_)
#undef CD_NPU_RESOLVE_REQUIRED_
#undef CD_NPU_RESOLVE_OPTIONAL_
  require_all(missing, api.library_path);
}

void load_opapi(State& s) {
  std::vector<std::string> tried;
  const std::string override_path = env(kOpapiEnv);
  if (!override_path.empty()) {
    void* handle = dlopen(override_path.c_str(), RTLD_LAZY | RTLD_LOCAL);
    if (handle != nullptr) {
      s.opapi.push_back(handle);
      s.opapi_where = override_path + " (" + kOpapiEnv + ")";
    } else {
      const char* why = dlerror();
      s.opapi_where = format("%s=%s, which could not be opened (%s)", kOpapiEnv, override_path.c_str(),
                             why != nullptr ? why : "dlopen failed");
    }
    return;
  }
  std::vector<std::string> found;
  for (const char* name : kOpLibraries) {
    const Opened lib = open_library(s.search, s.preferred, name, &tried);
    if (lib.handle == nullptr) continue;
    s.opapi.push_back(lib.handle);
    found.push_back(lib.path);
  }
  s.opapi_where = found.empty() ? "no op library (" + join(tried, "; ") + ")" : join(found, ", ");
}

}  // namespace

const AclApi& acl() {
  State& s = loaded();
  if (!s.acl_ok) throw chipdock::support::Error(s.acl_code, s.acl_reason);
  return s.acl;
}

const HcclApi& hccl() {
  acl();  // HCCL is looked for where CANN was found
  State& s = state();
  std::call_once(s.hccl_once, [&s] {
    try {
      load_hccl(s);
      s.hccl_ok = true;
    } catch (const std::exception& e) {
      s.hccl_reason = e.what();
    }
  });
  if (!s.hccl_ok) throw chipdock::support::Error(CD_STATUS_UNAVAILABLE, s.hccl_reason);
  return s.hccl;
}

void* opapi_symbol(const char* name, std::string* where) {
  State& s = loaded();
  if (!s.acl_ok) {
    if (where != nullptr) *where = s.acl_reason;
    return nullptr;
  }
  std::call_once(s.opapi_once, [&s] { load_opapi(s); });
  if (where != nullptr) *where = s.opapi_where;
  for (void* handle : s.opapi) {
    if (void* symbol = dlsym(handle, name)) return symbol;
  }
  return nullptr;
}

std::string recent_error_message() {
  State& s = loaded();
  if (!s.acl_ok || s.acl.aclGetRecentErrMsg == nullptr) return "";
  const char* message = s.acl.aclGetRecentErrMsg();
  return message != nullptr ? message : "";
}

}  // namespace chipdock_npu
