// Simulated devices and contexts. aclrtSetDevice creates the device's
// default context (with its default stream) once per process and makes it
// current on the calling thread; aclrtSetCurrentContext makes any live
// context current on the calling thread. Contexts are never freed: a stale
// handle is refused, never dereferenced.
#include <map>
#include <mutex>
#include <set>

#include "runtime_internal.h"

namespace cdsim {
namespace {

constexpr uintptr_t kContextTag = uintptr_t{0x7c} << 56;

struct Context {
  int32_t device = 0;
  aclrtStream default_stream = nullptr;
  bool alive = true;
};

struct Devices {
  std::mutex mutex;
  std::map<uint64_t, Context> contexts;        // by id
  std::map<int32_t, uint64_t> default_context;  // device -> live default context id
  std::map<int32_t, int64_t> set_count;         // aclrtSetDevice minus aclrtResetDevice
  uint64_t next_id = 1;
};

Devices& devices() {
  static Devices* instance = new Devices;  // never destroyed: stream threads may outlive static teardown
  return *instance;
}

thread_local uint64_t t_current_context = 0;

aclrtContext handle_of(uint64_t id) { return reinterpret_cast<aclrtContext>(kContextTag | id); }

// The id behind `handle`, 0 if it is not one of ours.
uint64_t id_of(aclrtContext handle) {
  uintptr_t bits = reinterpret_cast<uintptr_t>(handle);
  if ((bits & (uintptr_t{0xff} << 56)) != kContextTag) return 0;
  return bits & ~(uintptr_t{0xff} << 56);
}

// The calling thread's live current context (lock held); nullptr if none.
Context* current_context_locked(Devices& d) {
  auto it = d.contexts.find(t_current_context);
  if (it == d.contexts.end() || !it->second.alive) return nullptr;
  return &it->second;
}

}  // namespace

void check_device(int32_t device, const char* call) {
  int32_t count = device_count_setting();
  if (device < 0 || device >= count)
    raise(ACL_ERROR_RT_INVALID_DEVICEID, "%s: device %d does not exist (%d simulated devices, CHIPDOCK_NPU_SIM_DEVICES)",
          call, device, count);
}

int32_t current_device() {
  Devices& d = devices();
  std::lock_guard<std::mutex> lock(d.mutex);
  Context* context = current_context_locked(d);
  if (!context)
    raise(ACL_ERROR_RT_CONTEXT_NULL,
          "no current context on this thread: call aclrtSetDevice or aclrtSetCurrentContext first");
  return context->device;
}

aclrtStream default_stream() {
  Devices& d = devices();
  std::lock_guard<std::mutex> lock(d.mutex);
  Context* context = current_context_locked(d);
  if (!context)
    raise(ACL_ERROR_RT_CONTEXT_NULL,
          "the default stream (NULL) needs a current context: call aclrtSetDevice or aclrtSetCurrentContext first");
  return context->default_stream;
}

}  // namespace cdsim

using cdsim::guarded;
using cdsim::raise;

extern "C" {

aclError aclrtGetDeviceCount(uint32_t* count) {
  return guarded([&] {
    if (!count) raise(ACL_ERROR_INVALID_PARAM, "aclrtGetDeviceCount: count is NULL");
    *count = static_cast<uint32_t>(cdsim::device_count_setting());
  });
}

aclError aclrtSetDevice(int32_t deviceId) {
  return guarded([&] {
    if (!cdsim::initialized()) raise(ACL_ERROR_UNINITIALIZE, "aclrtSetDevice: aclInit has not been called");
    cdsim::check_device(deviceId, "aclrtSetDevice");
    cdsim::Devices& d = cdsim::devices();
    std::lock_guard<std::mutex> lock(d.mutex);
    auto found = d.default_context.find(deviceId);
    uint64_t id = 0;
    if (found != d.default_context.end()) {
      id = found->second;
    } else {
      id = d.next_id++;
      cdsim::Context context;
      context.device = deviceId;
      context.default_stream = cdsim::create_stream(deviceId);
      d.contexts[id] = context;
      d.default_context[deviceId] = id;
    }
    ++d.set_count[deviceId];
    cdsim::t_current_context = id;
  });
}

aclError aclrtResetDevice(int32_t deviceId) {
  return guarded([&] {
    cdsim::check_device(deviceId, "aclrtResetDevice");
    cdsim::Devices& d = cdsim::devices();
    std::lock_guard<std::mutex> lock(d.mutex);
    auto found = d.default_context.find(deviceId);
    if (found == d.default_context.end()) return;  // nothing set: CANN returns success too
    if (--d.set_count[deviceId] > 0) return;
    // The last reset releases the default context; its streams stay usable
    // until destroyed (the double never frees what a stale handle could reach).
    d.contexts[found->second].alive = false;
    if (cdsim::t_current_context == found->second) cdsim::t_current_context = 0;
    d.default_context.erase(found);
  });
}

aclError aclrtGetDevice(int32_t* deviceId) {
  return guarded([&] {
    if (!deviceId) raise(ACL_ERROR_INVALID_PARAM, "aclrtGetDevice: deviceId is NULL");
    *deviceId = cdsim::current_device();
  });
}

aclError aclrtGetCurrentContext(aclrtContext* context) {
  return guarded([&] {
    if (!context) raise(ACL_ERROR_INVALID_PARAM, "aclrtGetCurrentContext: context is NULL");
    cdsim::Devices& d = cdsim::devices();
    std::lock_guard<std::mutex> lock(d.mutex);
    if (!cdsim::current_context_locked(d))
      raise(ACL_ERROR_RT_CONTEXT_NULL, "aclrtGetCurrentContext: no current context on this thread");
    *context = cdsim::handle_of(cdsim::t_current_context);
  });
}

aclError aclrtSetCurrentContext(aclrtContext context) {
  return guarded([&] {
    cdsim::Devices& d = cdsim::devices();
    std::lock_guard<std::mutex> lock(d.mutex);
    uint64_t id = cdsim::id_of(context);
    auto it = d.contexts.find(id);
    if (it == d.contexts.end() || !it->second.alive)
      raise(ACL_ERROR_INVALID_PARAM, "aclrtSetCurrentContext: %p is not a live context", context);
    cdsim::t_current_context = id;
  });
}

const char* aclrtGetSocName() {
  static std::mutex mutex;
  // Every name handed out stays valid (the knob may change between calls).
  static std::set<std::string>* names = new std::set<std::string>;
  std::string soc = cdsim::setting("CHIPDOCK_NPU_SIM_SOC");
  if (soc.empty()) soc = "Ascend910B3";
  std::lock_guard<std::mutex> lock(mutex);
  return names->insert(soc).first->c_str();
}

aclError aclrtGetDeviceInfo(uint32_t deviceId, aclrtDevAttr attr, int64_t* value) {
  return guarded([&] {
    if (!value) raise(ACL_ERROR_INVALID_PARAM, "aclrtGetDeviceInfo: value is NULL");
    cdsim::check_device(static_cast<int32_t>(deviceId), "aclrtGetDeviceInfo");
    // Atlas A2 (910B) figures: B1/B2 have 24 AI Cores, B3/B4 20; two vector cores per cube core.
    std::string soc = aclrtGetSocName();
    int64_t ai_cores = soc == "Ascend910B1" || soc == "Ascend910B2" ? 24 : 20;
    switch (attr) {
      case ACL_DEV_ATTR_AICPU_CORE_NUM: *value = 6; return;
      case ACL_DEV_ATTR_AICORE_CORE_NUM: case ACL_DEV_ATTR_CUBE_CORE_NUM: *value = ai_cores; return;
      case ACL_DEV_ATTR_VECTOR_CORE_NUM: *value = 2 * ai_cores; return;
      case ACL_DEV_ATTR_TOTAL_GLOBAL_MEM_SIZE: *value = static_cast<int64_t>(cdsim::memory_limit_setting()); return;
      case ACL_DEV_ATTR_L2_CACHE_SIZE: *value = int64_t{192} << 20; return;
      default:
        raise(ACL_ERROR_FEATURE_UNSUPPORTED, "aclrtGetDeviceInfo: attribute %d is not simulated",
              static_cast<int>(attr));
    }
  });
}

aclError aclrtSynchronizeDevice(void) {
  return guarded([] { cdsim::synchronize_device_streams(cdsim::current_device()); });
}

}  // extern "C"
