// The core's services (see core_link.h).
#include "chipdock/support/core_link.h"

#include <atomic>

namespace chipdock::support {
namespace {
std::atomic<const cd_core_api*> g_core{nullptr};
}  // namespace

void set_core(const cd_core_api* core) noexcept { g_core.store(core); }

const cd_core_api* core() noexcept { return g_core.load(); }

bool core_has(size_t slot_end) noexcept {
  const cd_core_api* c = core();
  return c != nullptr && c->struct_size >= slot_end;
}

void log_message(cd_log_level_t level, const std::string& message) noexcept {
  if (!core_has(CD_STRUCT_SIZE(cd_core_api, log))) return;
  const cd_core_api* c = core();
  if (c->log != nullptr) c->log(level, message.c_str());
}

}  // namespace chipdock::support
