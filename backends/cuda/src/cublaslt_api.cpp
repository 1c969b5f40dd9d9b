// Loading cuBLASLt (see cublaslt_api.h).
#include "cublaslt_api.h"

namespace chipdock_cuda {
namespace {

// The soname below is this major's; a header of another release would need
// another library.
static_assert(CUBLAS_VER_MAJOR == 13, "the plug-in opens libcublasLt.so.13: update kCublasLt with the headers");

constexpr LibraryInfo kCublasLt{"cuBLASLt", CHIPDOCK_CUDA_CUBLASLT_DIR, "libcublasLt.so.13", "nvidia-cublas==13.0.*"};

std::string load(CublasLtApi& table) {
  SymbolLoader loader(kCublasLt);
  CHIPDOCK_CUDA_CUBLASLT_FUNCTIONS(CHIPDOCK_CUDA_RESOLVE_ENTRY)
  return loader.finish();
}

}  // namespace

const CublasLtApi& cublaslt_api() { return table_loaded_once<CublasLtApi, load>(); }

}  // namespace chipdock_cuda
