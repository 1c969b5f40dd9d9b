// aclnn's two phases in the double: GetWorkspaceSize ends in plan() (an
// executor holding the work), aclnnXxx is launch() (checks, then enqueues the
// work on the stream and consumes the executor).
#include <memory>
#include <mutex>
#include <new>
#include <unordered_set>

#include "sim.h"

struct aclOpExecutor {
  cdsim::Plan plan;
};

namespace cdsim {
namespace {

struct Executors {
  std::mutex mutex;
  std::unordered_set<const aclOpExecutor*> live;
};

Executors& executors() {
  static Executors* instance = new Executors;  // never destroyed
  return *instance;
}

// Takes `executor` out of the live set; nullptr if it was not there.
std::unique_ptr<aclOpExecutor> take(aclOpExecutor* executor) {
  Executors& e = executors();
  std::lock_guard<std::mutex> lock(e.mutex);
  if (!e.live.erase(executor)) return nullptr;
  return std::unique_ptr<aclOpExecutor>(executor);
}

}  // namespace

aclnnStatus guarded_op(const std::function<aclnnStatus()>& body) noexcept {
  try {
    return body();
  } catch (const SimError& e) {
    set_recent_error(e.message);
    return e.code;
  } catch (const std::bad_alloc&) {
    set_recent_error("simulated aclnn: host memory exhausted");
    return CD_ACLNN_ERR_INNER;
  } catch (const std::exception& e) {
    set_recent_error(std::string("simulated aclnn: internal error: ") + e.what());
    return CD_ACLNN_ERR_INNER;
  } catch (...) {
    set_recent_error("simulated aclnn: internal error");
    return CD_ACLNN_ERR_INNER;
  }
}

aclnnStatus plan(Plan plan, uint64_t* workspace_size, aclOpExecutor** executor) noexcept {
  return guarded_op([&]() -> aclnnStatus {
    if (!workspace_size || !executor)
      raise(CD_ACLNN_ERR_PARAM_NULLPTR, "%sGetWorkspaceSize: workspaceSize or executor is NULL", plan.op);
    // Fault injection: CHIPDOCK_NPU_SIM_FAIL_OP names an op ("aclnnAdd", or "Add").
    std::string fail = setting("CHIPDOCK_NPU_SIM_FAIL_OP");
    if (!fail.empty() && (fail == plan.op || "aclnn" + fail == plan.op))
      raise(CD_ACLNN_ERR_INNER, "%sGetWorkspaceSize failed: fault injected by CHIPDOCK_NPU_SIM_FAIL_OP=%s", plan.op,
            fail.c_str());
    const uint64_t bytes = plan.workspace_bytes;
    auto* made = new aclOpExecutor{std::move(plan)};
    {
      Executors& e = executors();
      std::lock_guard<std::mutex> lock(e.mutex);
      e.live.insert(made);
    }
    *workspace_size = bytes;
    *executor = made;
    return CD_ACLNN_SUCCESS;
  });
}

aclnnStatus launch(const char* op, void* workspace, uint64_t workspace_size, aclOpExecutor* executor,
                   aclrtStream stream) noexcept {
  return guarded_op([&]() -> aclnnStatus {
    if (!executor) raise(CD_ACLNN_ERR_PARAM_NULLPTR, "%s: executor is NULL", op);
    std::unique_ptr<aclOpExecutor> owned = take(executor);  // consumed, whatever happens next
    if (!owned) raise(CD_ACLNN_ERR_PARAM_INVALID, "%s: %p is not a live executor (already run?)", op,
                      static_cast<void*>(executor));
    Plan& planned = owned->plan;
    if (std::string(planned.op) != op)
      raise(CD_ACLNN_ERR_PARAM_INVALID, "%s: the executor was planned by %sGetWorkspaceSize", op, planned.op);
    const uint64_t needed = planned.workspace_bytes;
    if (workspace_size < needed)
      raise(CD_ACLNN_ERR_PARAM_INVALID, "%s: workspaceSize %llu is less than the %llu bytes planned", op,
            static_cast<unsigned long long>(workspace_size), static_cast<unsigned long long>(needed));
    int32_t device = 0;
    try {
      device = stream_device(stream);  // NULL: the current default stream
    } catch (const SimError& e) {
      raise(CD_ACLNN_ERR_PARAM_INVALID, "%s: %s", op, e.message.c_str());
    }
    if (needed > 0) {
      try {
        host_pointer(workspace, needed, "workspace");
      } catch (const SimError& e) {
        raise(CD_ACLNN_ERR_PARAM_INVALID, "%s: the workspace is not device memory of the planned size: %s", op,
              e.message.c_str());
      }
      if (device_of(workspace) != device)
        raise(CD_ACLNN_ERR_PARAM_INVALID, "%s: the workspace is on device %d, the stream on device %d", op,
              device_of(workspace), device);
    }
    auto body = std::make_shared<Plan>(std::move(planned));
    enqueue(stream, [body, workspace, needed] {
      // Resolved on the stream: the workspace must still be live when the op runs.
      char* host = needed > 0 ? host_pointer(workspace, needed, body->op) : nullptr;
      body->body(host);
    });
    return CD_ACLNN_SUCCESS;
  });
}

}  // namespace cdsim
