// Opening vendor libraries at first use (see lazy_library.h).
#include "lazy_library.h"

#include <dlfcn.h>

#include <vector>

namespace chipdock_cuda {
namespace {

// The folder this plug-in was loaded from (what $ORIGIN means in its
// RUNPATH), or "" if the loader cannot say.
std::string plugin_folder() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&plugin_folder), &info) == 0 || info.dli_fname == nullptr ||
      *info.dli_fname == '\0') {
    return "";
  }
  const std::string path = info.dli_fname;
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? std::string(".") : path.substr(0, slash);
}

// Where the library is looked for, in order: beside this plug-in as the
// wheels install it, then by soname.
std::vector<std::string> candidate_paths(const LibraryInfo& info) {
  std::vector<std::string> paths;
  const std::string folder = plugin_folder();
  if (!folder.empty()) paths.push_back(folder + "/" + info.wheel_dir + "/" + info.soname);
  paths.push_back(info.soname);
  return paths;
}

// dlopen's error text; dlerror() may be NULL if it has nothing to say.
std::string last_dl_error() {
  const char* e = dlerror();
  return e != nullptr ? e : "unknown error";
}

}  // namespace

SymbolLoader::SymbolLoader(const LibraryInfo& info) : info_(info) {
  std::string tried;
  for (const std::string& path : candidate_paths(info)) {
    // RTLD_NOW: a missing dependency fails here, not at some later call.
    // RTLD_LOCAL: its symbols stay out of the process's global scope.
    handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle_ != nullptr) {
      path_ = path;
      return;
    }
    tried += format("%stried %s: %s", tried.empty() ? "" : "; ", path.c_str(), last_dl_error().c_str());
  }
  error_ = format("%s is not available: %s (pip install '%s')", info.name, tried.c_str(), info.wheel);
}

void* SymbolLoader::symbol(const char* name) {
  if (!error_.empty()) return nullptr;
  (void)dlerror();  // drop a stale message, so that the one reported is this dlsym's
  void* p = dlsym(handle_, name);
  if (p == nullptr) {
    error_ = format("%s at %s lacks %s: %s (pip install '%s')", info_.name, path_.c_str(), name,
                    last_dl_error().c_str(), info_.wheel);
  }
  return p;
}

std::string SymbolLoader::finish() {
  if (!error_.empty() && handle_ != nullptr) {
    // Nothing of it was called yet: give its mappings back.
    dlclose(handle_);
    handle_ = nullptr;
  }
  return error_;
}

}  // namespace chipdock_cuda
