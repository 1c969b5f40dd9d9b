// What the simulated runtime's own files (runtime/*.cpp) share beyond sim.h:
// the stream queues (streams.cpp), the contexts (devices.cpp) and the knobs.
#ifndef CHIPDOCK_NPU_SIM_RUNTIME_INTERNAL_H_
#define CHIPDOCK_NPU_SIM_RUNTIME_INTERNAL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "sim.h"

namespace cdsim {

// ---- knobs (errors.cpp) ----
// CHIPDOCK_NPU_SIM_DEVICES (default 2), validated; SimError naming the knob otherwise.
int32_t device_count_setting();
// CHIPDOCK_NPU_SIM_MEMORY in bytes per device (default 8 GiB; K/M/G suffixes are binary).
uint64_t memory_limit_setting();

// True between aclInit and aclFinalize.
bool initialized() noexcept;

// ---- devices and contexts (devices.cpp) ----
// The default stream of the calling thread's current context (what a NULL
// aclrtStream means); SimError ACL_ERROR_RT_CONTEXT_NULL without one.
aclrtStream default_stream();
// ACL_ERROR_RT_INVALID_DEVICEID unless 0 <= device < device count.
void check_device(int32_t device, const char* call);

// ---- streams (streams.cpp) ----
// A stream created for `device`; default streams are created by devices.cpp.
aclrtStream create_stream(int32_t device);
// `stream`, or the current default stream for NULL; SimError for an unknown one.
aclrtStream resolve_stream(aclrtStream stream, const char* call);
// Like enqueue(), but the task also runs after an earlier task failed (the
// stream's error stays pending): events, waits and host callbacks are host
// bookkeeping, skipping them would leave waiters hanging. `task` receives the
// stream's pending error code (0 when none) and message.
void enqueue_control(aclrtStream stream, std::function<void(int32_t error, const std::string& message)> task);
// Waits until every task enqueued so far on `stream` ran; throws the stream's
// pending asynchronous error (and clears it).
void synchronize_stream(aclrtStream stream);
// Synchronizes every stream of `device`; throws the first pending error
// (every stream's pending error is cleared).
void synchronize_device_streams(int32_t device);
// True when every task enqueued so far on `stream` ran.
bool stream_idle(aclrtStream stream);
// True when the calling thread is `stream`'s own worker thread.
bool on_stream_thread(aclrtStream stream);
// Forgets `stream`'s callback subscription (callbacks.cpp; called on destroy).
void forget_subscription(aclrtStream stream) noexcept;

}  // namespace cdsim

#endif  // CHIPDOCK_NPU_SIM_RUNTIME_INTERNAL_H_
