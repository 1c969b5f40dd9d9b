// Kernel registration (see kernels.h).
#include "kernels.h"

#include "../core_link.h"
#include "../error.h"

namespace chipdock_cuda {

void register_kernel(cd_kernel_registry* registry, const char* op, const cd_dtype_t* dtypes,
                     int32_t num_dtypes, cd_kernel_fn fn) {
  cd_kernel_def def{};
  def.struct_size = sizeof(def);
  def.op = op;
  def.dtypes = dtypes;
  def.fn = fn;
  def.num_dtypes = num_dtypes;
  const cd_status_t status = core()->kernel_register(registry, &def);
  if (status != CD_STATUS_OK) {
    fail(CD_STATUS_INTERNAL, "the core refused kernel '%s' for dtype %d (status %d)", op,
         num_dtypes > 0 ? dtypes[0] : -1, status);
  }
}

void register_all_kernels(cd_kernel_registry* registry) {
  require_non_null(registry, "registry");
  const cd_core_api* c = core();
  if (c == nullptr || !core_has(CD_STRUCT_SIZE(cd_core_api, kernel_register)) || c->kernel_register == nullptr) {
    fail(CD_STATUS_UNAVAILABLE, "the core offers no kernel_register service");
  }
  register_copy(registry);
  register_elementwise(registry);
  register_reductions(registry);
  register_movement(registry);
  register_pool(registry);
  register_matmul(registry);
  register_conv(registry);
  register_attention(registry);
}

}  // namespace chipdock_cuda
