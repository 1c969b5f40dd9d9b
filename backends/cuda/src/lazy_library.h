// Vendor libraries opened with dlopen at first use instead of being linked.
//
// cuBLASLt alone is about 145 MiB resident once mapped; a DT_NEEDED entry
// for it or NCCL would make every `import chipdock` pay, GPU or not. So the plug-in
// links only the CUDA runtime (small, and what counts the devices) and opens
// the others the first time a call that has a device needs them. Each
// library has one function table (cublaslt_api.h, nccl_api.h) whose entries
// are typed from the header the build compiles against, listed once in an
// X-macro and filled here by name.
#ifndef CHIPDOCK_CUDA_LAZY_LIBRARY_H_
#define CHIPDOCK_CUDA_LAZY_LIBRARY_H_

#include <mutex>
#include <string>

#include "error.h"

namespace chipdock_cuda {

// What is needed to find one library and to say what to install when it is
// missing.
struct LibraryInfo {
  const char* name;       // for messages: "cuBLASLt"
  const char* wheel_dir;  // relative to this plug-in's folder, as its RUNPATH entry $ORIGIN/<wheel_dir>
  const char* soname;     // "libcublasLt.so.13"
  const char* wheel;      // the requirement that installs it: "nvidia-cublas==13.0.*"
};

// Opens one library and resolves its symbols, keeping the first failure.
// The library is never closed once every symbol resolved: CUDA libraries
// keep driver state and threads that do not survive an unload.
class SymbolLoader {
 public:
  // Tries <this plug-in's folder>/<wheel_dir>/<soname> (where the installed
  // wheels put it), then the plain soname (the loader's own search: a copy
  // already loaded, this plug-in's RUNPATH, LD_LIBRARY_PATH, the system's).
  explicit SymbolLoader(const LibraryInfo& info);

  // Sets *fn to `name`'s address, or to nullptr once anything has failed.
  template <class Fn>
  void resolve(const char* name, Fn* fn) {
    *fn = reinterpret_cast<Fn>(symbol(name));
  }

  // "" when the library opened and had every symbol; otherwise why not,
  // naming the paths tried and dlerror(), and the library is closed again.
  std::string finish();

 private:
  void* symbol(const char* name);

  LibraryInfo info_;
  void* handle_ = nullptr;
  std::string path_;   // the path that opened
  std::string error_;  // the first failure
};

// The table filled by `load` (which returns SymbolLoader::finish()) on the
// first call, under std::call_once; the outcome is kept, so a missing
// library costs one dlopen attempt, not one per call. Throws
// CD_STATUS_UNAVAILABLE with load's message on this and every later call
// when it failed.
template <class Table, std::string (*load)(Table&)>
const Table& table_loaded_once() {
  static std::once_flag once;
  static Table table;
  static std::string error;
  std::call_once(once, [] { error = load(table); });
  if (!error.empty()) throw Error(CD_STATUS_UNAVAILABLE, error);
  return table;
}

}  // namespace chipdock_cuda

// X-macro helpers for the tables: one member per function, typed from the
// header's own declaration (no hand-copied prototypes) ...
#define CHIPDOCK_CUDA_TABLE_ENTRY(fn) decltype(&::fn) fn = nullptr;
// ... and, inside a load function with a SymbolLoader `loader` and the
// table `table`, its resolution by name.
#define CHIPDOCK_CUDA_RESOLVE_ENTRY(fn) loader.resolve(#fn, &table.fn);

#endif  // CHIPDOCK_CUDA_LAZY_LIBRARY_H_
