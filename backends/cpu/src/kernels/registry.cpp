// Kernel registration (see kernels.h).
#include "kernels.h"

#include "../core_link.h"
#include "../error.h"
#include "onednn.h"
#include "tensor.h"
#include "threads.h"

namespace chipdock_cpu {

void register_kernel(cd_kernel_registry* registry, const char* op, const cd_dtype_t* dtypes,
                     int32_t num_dtypes, cd_kernel_fn fn) {
  cd_kernel_def def{};
  def.struct_size = sizeof(def);
  def.next = nullptr;
  def.op = op;
  def.dtypes = dtypes;
  def.fn = fn;
  def.num_dtypes = num_dtypes;
  def.flags = 0;
  const cd_status_t status = core()->kernel_register(registry, &def);
  if (status != CD_STATUS_OK) {
    fail(CD_STATUS_INTERNAL, "the core refused kernel '%s' for %s (status %d)", op,
         num_dtypes > 0 ? dtype_name(dtypes[0]) : "no dtypes", status);
  }
}

void register_all_kernels(cd_kernel_registry* registry) {
  require_non_null(registry, "registry");
  const cd_core_api* c = core();
  if (c == nullptr || !core_has(CD_STRUCT_SIZE(cd_core_api, kernel_register)) ||
      c->kernel_register == nullptr) {
    fail(CD_STATUS_UNAVAILABLE, "the core offers no kernel_register service");
  }
  // The ISA choice and oneDNN's routes, before any kernel is registered or
  // run (oneDNN fixes its ISA at first use).
  onednn::configure();
  log_thread_choice();
  register_copy(registry);
  register_elementwise(registry);
  register_movement(registry);
  register_reductions(registry);
  register_linalg(registry);
}

}  // namespace chipdock_cpu
