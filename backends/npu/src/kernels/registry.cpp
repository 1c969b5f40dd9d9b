// Kernel registration (see registry.h).
#include "registry.h"

#include "chipdock/support/core_link.h"
#include "chipdock/support/error.h"

namespace chipdock_npu {

using chipdock::support::fail;

bool Registrar::resolve_symbols(const char* workspace_symbol, const char* run_symbol, const char* cd_op,
                                void** workspace_fn, void** run_fn) {
  std::string where;
  *workspace_fn = opapi_symbol(workspace_symbol, &where);
  *run_fn = opapi_symbol(run_symbol, &where);
  if (*workspace_fn != nullptr && *run_fn != nullptr) return true;
  const char* missing = *workspace_fn == nullptr ? workspace_symbol : run_symbol;
  std::string reason = chipdock::support::format("npu: op %s not registered: %s not found in %s", cd_op, missing,
                                                 where.c_str());
  chipdock::support::log_message(CD_LOG_WARNING, reason);
  skipped_.push_back(std::move(reason));
  return false;
}

void Registrar::add(const char* cd_op, std::initializer_list<cd_dtype_t> dtypes, cd_kernel_fn fn, uint32_t flags) {
  add(cd_op, std::vector<cd_dtype_t>(dtypes), fn, flags);
}

void Registrar::add(const char* cd_op, const std::vector<cd_dtype_t>& dtypes, cd_kernel_fn fn, uint32_t flags) {
  cd_kernel_def def{};
  def.struct_size = sizeof(def);
  def.op = cd_op;
  def.dtypes = dtypes.data();
  def.fn = fn;
  def.num_dtypes = static_cast<int32_t>(dtypes.size());
  def.flags = flags;
  const cd_status_t status = chipdock::support::core()->kernel_register(registry_, &def);
  if (status != CD_STATUS_OK) {
    fail(CD_STATUS_INTERNAL, "the core refused kernel '%s' (first dtype %d, status %d)", cd_op,
         dtypes.empty() ? -1 : dtypes[0], status);
  }
  ++registered_;
}

void register_all_kernels(cd_kernel_registry* registry) {
  chipdock::support::require_non_null(registry, "registry");
  const cd_core_api* c = chipdock::support::core();
  if (c == nullptr || !chipdock::support::core_has(CD_STRUCT_SIZE(cd_core_api, kernel_register)) ||
      c->kernel_register == nullptr) {
    fail(CD_STATUS_UNAVAILABLE, "the core offers no kernel_register service");
  }
  Registrar r(registry);
  register_copy(r);
  register_elementwise(r);
  register_reduce(r);
  register_nn(r);
  register_movement(r);
  chipdock::support::log_message(
      CD_LOG_INFO, chipdock::support::format("npu: %d kernels registered, %zu ops skipped", r.registered(),
                                             r.skipped().size()));
}

}  // namespace chipdock_npu
