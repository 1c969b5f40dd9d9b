// Loading NCCL (see nccl_api.h).
#include "nccl_api.h"

namespace chipdock_cuda {
namespace {

// libnccl.so.2 is NCCL 2's soname; the header must be of the same major.
static_assert(NCCL_MAJOR == 2, "the plug-in opens libnccl.so.2: update kNccl with the headers");

constexpr LibraryInfo kNccl{"NCCL", CHIPDOCK_CUDA_NCCL_DIR, "libnccl.so.2", "nvidia-nccl-cu13>=2.27.7,<2.29"};

std::string load(NcclApi& table) {
  SymbolLoader loader(kNccl);
  CHIPDOCK_CUDA_NCCL_FUNCTIONS(CHIPDOCK_CUDA_RESOLVE_ENTRY)
  return loader.finish();
}

}  // namespace

const NcclApi& nccl_api() { return table_loaded_once<NcclApi, load>(); }

}  // namespace chipdock_cuda
