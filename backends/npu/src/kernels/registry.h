// Kernel registration. Each family's file defines register_<family>(), which
// resolves the aclnn ops it needs and registers one kernel per (op, dtypes).
// An op whose aclnn symbols the op libraries lack is not registered; the
// reason (op, symbol, libraries searched) goes to the core's log and into
// Registrar::skipped() (chipdock doctor shows both).
#ifndef CHIPDOCK_NPU_KERNELS_REGISTRY_H_
#define CHIPDOCK_NPU_KERNELS_REGISTRY_H_

#include <initializer_list>
#include <string>
#include <vector>

#include "aclnn_call.h"
#include "chipdock/cd_kernel.h"

namespace chipdock_npu {

class Registrar {
 public:
  explicit Registrar(cd_kernel_registry* registry) : registry_(registry) {}

  // Resolves both entry points of `op` for chipdock op `cd_op`. False (and a
  // logged reason) when either symbol is missing.
  template <typename Fn>
  bool resolve(AclnnOp<Fn>& op, const char* cd_op) {
    void* workspace_fn = nullptr;
    void* run_fn = nullptr;
    if (!resolve_symbols(op.workspace_symbol, op.run_symbol, cd_op, &workspace_fn, &run_fn)) return false;
    op.get_workspace_size = reinterpret_cast<Fn>(workspace_fn);
    op.run = reinterpret_cast<AclnnRunFn>(run_fn);
    return true;
  }

  // Registers `fn` for `cd_op` with one dtype per declared input, then per
  // declared output (cd_kernel_def's rule). `flags`: CD_KERNEL_* flags.
  void add(const char* cd_op, std::initializer_list<cd_dtype_t> dtypes, cd_kernel_fn fn, uint32_t flags = 0);
  void add(const char* cd_op, const std::vector<cd_dtype_t>& dtypes, cd_kernel_fn fn, uint32_t flags = 0);

  int registered() const noexcept { return registered_; }
  const std::vector<std::string>& skipped() const noexcept { return skipped_; }

 private:
  bool resolve_symbols(const char* workspace_symbol, const char* run_symbol, const char* cd_op,
                       void** workspace_fn, void** run_fn);

  cd_kernel_registry* registry_;
  int registered_ = 0;
  std::vector<std::string> skipped_;
};

// One per family (kernels/<family>*.cpp).
void register_copy(Registrar& r);         // the core's "copy" (movement owner)
void register_elementwise(Registrar& r);
void register_reduce(Registrar& r);
void register_nn(Registrar& r);
void register_movement(Registrar& r);

// All of the above; called by the kernels_register slot.
void register_all_kernels(cd_kernel_registry* registry);

}  // namespace chipdock_npu

#endif  // CHIPDOCK_NPU_KERNELS_REGISTRY_H_
