// chipdock._C.abi: the raw device ABI of a loaded plugin, for the
// conformance suite's runtime/ABI cases.
//
// Unlike the rest of the binding, nothing here raises for a plugin error:
// every slot call returns a tuple whose first two items are the status code
// and the message (0 and "" on success), so a negative case can assert the
// exact code. Handles and device pointers travel as Python ints and are
// passed to the plugin unchanged; host pointers are ints too (for example
// `array.ctypes.data`), and the caller keeps that memory alive until any
// asynchronous work that uses it has completed. This is a driver for
// conformance tests, not an API: it checks nothing the plugin must check.
//
// Host callbacks are C functions (a Gate that blocks its stream until
// opened, a Recorder that appends tokens), so no plugin thread ever needs
// the GIL. Every slot call releases the GIL.
#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include "bindings.hpp"

namespace chipdock::python {

namespace {

// Written into out-pointers before a call, so a caller can tell whether a
// failing call wrote them ("written only on success").
constexpr uintptr_t kSentinelPtr = 0x5eed5eed5eed5000ull;
constexpr int32_t kSentinelI32 = -559038737;  // 0xdeadbeef
constexpr size_t kSentinelSize = 0x5eed5eedull;
constexpr float kSentinelF32 = -12345.5f;
// The status reported for a non-NULL cd_error whose code is CD_STATUS_OK.
constexpr int32_t kStatusErrorWithOkCode = -1;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// True while this thread is inside a slot call made from here: a host
// callback that sees it runs inline on the enqueuing thread and must not block.
thread_local bool t_in_slot_call = false;

// Every slot of cd_plugin_api, in table order, with its offset.
struct SlotInfo {
  const char* name;
  size_t offset;
};
#define CD_SLOT(slot) SlotInfo{#slot, offsetof(cd_plugin_api, slot)}
const SlotInfo kSlots[] = {
    CD_SLOT(error_get_code), CD_SLOT(error_get_message), CD_SLOT(error_destroy),
    CD_SLOT(plugin_shutdown), CD_SLOT(device_get_count), CD_SLOT(device_get_properties),
    CD_SLOT(device_set_current), CD_SLOT(device_get_current), CD_SLOT(device_synchronize),
    CD_SLOT(memory_allocate), CD_SLOT(memory_free), CD_SLOT(host_memory_allocate),
    CD_SLOT(host_memory_free), CD_SLOT(memory_get_info), CD_SLOT(memory_set),
    CD_SLOT(memory_set_async), CD_SLOT(memcpy_host_to_device), CD_SLOT(memcpy_device_to_host),
    CD_SLOT(memcpy_device_to_device), CD_SLOT(memcpy_host_to_device_async),
    CD_SLOT(memcpy_device_to_host_async), CD_SLOT(memcpy_device_to_device_async),
    CD_SLOT(stream_create), CD_SLOT(stream_destroy), CD_SLOT(stream_synchronize),
    CD_SLOT(stream_query), CD_SLOT(stream_wait_event), CD_SLOT(stream_add_host_callback),
    CD_SLOT(event_create), CD_SLOT(event_destroy), CD_SLOT(event_record),
    CD_SLOT(event_synchronize), CD_SLOT(event_query), CD_SLOT(event_elapsed_time),
    CD_SLOT(kernels_register), CD_SLOT(comm_get_unique_id), CD_SLOT(comm_init_rank),
    CD_SLOT(comm_destroy), CD_SLOT(comm_all_reduce), CD_SLOT(comm_broadcast),
    CD_SLOT(comm_reduce), CD_SLOT(comm_all_gather), CD_SLOT(comm_reduce_scatter),
    CD_SLOT(comm_send), CD_SLOT(comm_recv), CD_SLOT(comm_group_start), CD_SLOT(comm_group_end),
};
#undef CD_SLOT

// The slots `table` fills within its first `size` bytes ({name: non-NULL}).
py::dict slot_presence(const cd_plugin_api& table, size_t size) {
  py::dict out;
  const auto* bytes = reinterpret_cast<const unsigned char*>(&table);
  for (const SlotInfo& slot : kSlots) {
    void* fn = nullptr;
    if (slot.offset + sizeof(fn) <= size) std::memcpy(&fn, bytes + slot.offset, sizeof(fn));
    out[slot.name] = fn != nullptr;
  }
  return out;
}

py::object str_or_none(const char* s) { return s ? py::object(py::str(s)) : py::object(py::none()); }

// The fixed header of a table and which slots it fills.
py::dict table_dict(const cd_plugin_api& table, size_t struct_size) {
  py::dict d;
  d["struct_size"] = struct_size;
  d["abi_major"] = table.abi_major;
  d["abi_minor"] = table.abi_minor;
  d["name"] = str_or_none(table.name);
  d["device_type"] = str_or_none(table.device_type);
  d["version"] = str_or_none(table.version);
  d["next_is_null"] = table.next == nullptr;
  d["slots"] = slot_presence(table, struct_size);
  return d;
}

// Reads and destroys a plugin error: (status, message).
std::pair<int32_t, std::string> take_error(const cd_plugin_api& api, cd_error* err) {
  if (err == nullptr) return {CD_STATUS_OK, ""};
  const int32_t code = api.error_get_code(err);
  const char* message = api.error_get_message(err);
  std::string text = message ? message : "";
  api.error_destroy(err);
  if (code == CD_STATUS_OK) return {kStatusErrorWithOkCode, "error object carries CD_STATUS_OK: " + text};
  return {code, text};
}

// ------------------------------------------------------------ host callbacks --

// Blocks the stream that runs it until open() (or its timeout), recording
// when it entered and left. Runs inline (without blocking) if the plugin
// calls it on the enqueuing thread during stream_add_host_callback.
class Gate {
 public:
  explicit Gate(double timeout_s) : timeout_(std::chrono::duration<double>(timeout_s)) {}

  void open() {
    std::lock_guard<std::mutex> lock(mu_);
    opened_ = true;
    cv_.notify_all();
  }

  // Waits up to `timeout_s` until the callback has started; true if it has.
  bool wait_entered(double timeout_s) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::duration<double>(timeout_s), [this] { return entered_; });
  }

  // Waits up to `timeout_s` until the callback has returned; true if it has.
  bool wait_finished(double timeout_s) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::duration<double>(timeout_s), [this] { return finished_; });
  }

  py::dict state() {
    std::lock_guard<std::mutex> lock(mu_);
    py::dict d;
    d["entered"] = entered_;
    d["finished"] = finished_;
    d["opened"] = opened_;
    d["timed_out"] = timed_out_;
    d["ran_inline"] = ran_inline_;
    d["enter_ns"] = enter_ns_;
    d["leave_ns"] = leave_ns_;
    d["runs"] = runs_;
    return d;
  }

  static void callback(void* user_data) {
    auto* holder = static_cast<std::shared_ptr<Gate>*>(user_data);
    (*holder)->run();
    delete holder;
  }

 private:
  void run() {
    std::unique_lock<std::mutex> lock(mu_);
    ++runs_;
    entered_ = true;
    enter_ns_ = now_ns();
    cv_.notify_all();
    if (t_in_slot_call) {
      ran_inline_ = true;
    } else if (!cv_.wait_for(lock, timeout_, [this] { return opened_; })) {
      timed_out_ = true;
    }
    finished_ = true;
    leave_ns_ = now_ns();
    cv_.notify_all();
  }

  const std::chrono::duration<double> timeout_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool opened_ = false, entered_ = false, finished_ = false, timed_out_ = false, ran_inline_ = false;
  int64_t enter_ns_ = 0, leave_ns_ = 0;
  int runs_ = 0;
};

// Collects the tokens of the callbacks that ran, in the order they ran.
class Recorder {
 public:
  struct Entry {
    int64_t token;
    int64_t time_ns;
    bool ran_inline;
  };

  void append(int64_t token, bool ran_inline) {
    std::lock_guard<std::mutex> lock(mu_);
    entries_.push_back({token, now_ns(), ran_inline});
    cv_.notify_all();
  }

  std::vector<int64_t> tokens() {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<int64_t> out;
    for (const Entry& e : entries_) out.push_back(e.token);
    return out;
  }

  py::list entries() {
    std::lock_guard<std::mutex> lock(mu_);
    py::list out;
    for (const Entry& e : entries_) out.append(py::make_tuple(e.token, e.time_ns, e.ran_inline));
    return out;
  }

  bool wait_count(size_t count, double timeout_s) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::duration<double>(timeout_s),
                        [&] { return entries_.size() >= count; });
  }

  void clear() {
    std::lock_guard<std::mutex> lock(mu_);
    entries_.clear();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Entry> entries_;
};

struct RecordCall {
  std::shared_ptr<Recorder> recorder;
  int64_t token;
  int64_t sleep_us;

  static void callback(void* user_data) {
    auto* call = static_cast<RecordCall*>(user_data);
    const bool ran_inline = t_in_slot_call;
    if (call->sleep_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(call->sleep_us));
    call->recorder->append(call->token, ran_inline);
    delete call;
  }
};

// ------------------------------------------------------------ the raw table --

// One loaded plugin's table as the core negotiated it (slots beyond the
// plugin's struct_size are NULL). Holds the plugin alive.
class RawApi {
 public:
  explicit RawApi(const std::string& device_type) {
    for (auto& p : Runtime::instance().plugins()) {
      if (p->device_type() == device_type) plugin_ = p;
    }
    if (!plugin_) {
      throw py::value_error("abi.Api: no loaded backend provides device type '" + device_type +
                            "' (import chipdock and list chipdock.devices() first)");
    }
  }

  const cd_plugin_api& api() const { return plugin_->api(); }
  const Plugin& plugin() const { return *plugin_; }

  bool has_slot(const std::string& name) const {
    for (const SlotInfo& slot : kSlots) {
      if (name != slot.name) continue;
      void* fn = nullptr;
      std::memcpy(&fn, reinterpret_cast<const unsigned char*>(&api()) + slot.offset, sizeof(fn));
      return fn != nullptr;
    }
    throw py::value_error("abi.Api.has_slot: no slot named '" + name + "' in cd_plugin_api");
  }

  py::dict table_info() const {
    py::dict d = table_dict(api(), plugin_->table_size());
    d["library_path"] = plugin_->manifest().library_path;
    d["manifest_path"] = plugin_->manifest().manifest_path;
    return d;
  }

  // Calls `fn(args...)` without the GIL: (status, message). A NULL slot is
  // UNIMPLEMENTED with a message saying the table leaves it out.
  template <class Fn, class... Args>
  std::pair<int32_t, std::string> call(Fn fn, const char* slot, Args... args) const {
    if (plugin_->is_shut_down()) return {CD_STATUS_UNAVAILABLE, std::string(slot) + ": the plugin is shut down"};
    if (fn == nullptr) {
      return {CD_STATUS_UNIMPLEMENTED, std::string(slot) + ": the backend's table leaves this slot NULL"};
    }
    cd_error* err = nullptr;
    {
      py::gil_scoped_release nogil;
      t_in_slot_call = true;
      err = fn(args...);
      t_in_slot_call = false;
    }
    return take_error(api(), err);
  }

 private:
  std::shared_ptr<Plugin> plugin_;
};

template <class T>
T* ptr(uintptr_t value) {
  return reinterpret_cast<T*>(value);
}

py::tuple status(const std::pair<int32_t, std::string>& r) { return py::make_tuple(r.first, r.second); }

template <class T>
py::tuple status_with(const std::pair<int32_t, std::string>& r, T out) {
  return py::make_tuple(r.first, r.second, out);
}

#define RAW_CALL(self, slot, ...) (self).call((self).api().slot, #slot, __VA_ARGS__)

// Field offsets of cd_device_properties, for checks of the struct_size rule.
py::dict properties_layout() {
  py::dict d;
#define CD_FIELD(f) d[#f] = py::make_tuple(offsetof(cd_device_properties, f), sizeof(cd_device_properties::f))
  CD_FIELD(struct_size);
  CD_FIELD(next);
  CD_FIELD(name);
  CD_FIELD(vendor);
  CD_FIELD(architecture);
  CD_FIELD(driver_version);
  CD_FIELD(runtime_version);
  CD_FIELD(total_memory);
  CD_FIELD(supported_dtypes);
  CD_FIELD(compute_units);
  CD_FIELD(dlpack_device_type);
  CD_FIELD(host_addressable);
  CD_FIELD(reserved);
#undef CD_FIELD
  return d;
}

// Reads a char field that may lack its NUL: None if unterminated.
py::object fixed_string(const char* field, size_t size) {
  const void* end = std::memchr(field, '\0', size);
  if (end == nullptr) return py::none();
  return py::str(field);
}

py::dict properties_dict(const cd_device_properties& p) {
  py::dict d;
  d["name"] = fixed_string(p.name, sizeof(p.name));
  d["vendor"] = fixed_string(p.vendor, sizeof(p.vendor));
  d["architecture"] = fixed_string(p.architecture, sizeof(p.architecture));
  d["driver_version"] = fixed_string(p.driver_version, sizeof(p.driver_version));
  d["runtime_version"] = fixed_string(p.runtime_version, sizeof(p.runtime_version));
  d["total_memory"] = p.total_memory;
  d["supported_dtypes"] = p.supported_dtypes;
  d["compute_units"] = p.compute_units;
  d["dlpack_device_type"] = p.dlpack_device_type;
  d["host_addressable"] = p.host_addressable;
  d["reserved"] = p.reserved;
  return d;
}

// device_get_properties with a caller-chosen struct_size in a buffer of
// `buffer_size` bytes (at least sizeof) prefilled with 0xCD:
// (status, message, fields, raw buffer bytes).
py::tuple get_properties(const RawApi& self, int32_t device, size_t struct_size, size_t buffer_size,
                         bool null_props) {
  buffer_size = std::max(buffer_size, sizeof(cd_device_properties));
  // Aligned storage for the struct and whatever a "newer" caller appends.
  std::vector<uint64_t> storage((buffer_size + 7) / 8);
  auto* bytes = reinterpret_cast<unsigned char*>(storage.data());
  std::memset(bytes, 0xCD, buffer_size);
  auto* props = reinterpret_cast<cd_device_properties*>(bytes);
  props->struct_size = struct_size;
  props->next = nullptr;
  auto r = RAW_CALL(self, device_get_properties, device, null_props ? nullptr : props);
  py::object fields = py::none();
  if (r.first == CD_STATUS_OK) fields = properties_dict(*props);
  return py::make_tuple(r.first, r.second, fields,
                        py::bytes(reinterpret_cast<const char*>(bytes), buffer_size));
}

// One copy slot, sync or async, chosen by name.
py::tuple memcpy_slot(const RawApi& self, const std::string& direction, int32_t device, uintptr_t dst,
                      uintptr_t src, size_t bytes, py::object stream) {
  const cd_plugin_api& a = self.api();
  void* d = ptr<void>(dst);
  const void* s = ptr<const void>(src);
  if (stream.is_none()) {
    if (direction == "h2d") return status(self.call(a.memcpy_host_to_device, "memcpy_host_to_device", device, d, s, bytes));
    if (direction == "d2h") return status(self.call(a.memcpy_device_to_host, "memcpy_device_to_host", device, d, s, bytes));
    if (direction == "d2d") {
      return status(self.call(a.memcpy_device_to_device, "memcpy_device_to_device", device, d, s, bytes));
    }
  } else {
    auto* st = ptr<cd_stream>(stream.cast<uintptr_t>());
    if (direction == "h2d") {
      return status(self.call(a.memcpy_host_to_device_async, "memcpy_host_to_device_async", device, d, s, bytes, st));
    }
    if (direction == "d2h") {
      return status(self.call(a.memcpy_device_to_host_async, "memcpy_device_to_host_async", device, d, s, bytes, st));
    }
    if (direction == "d2d") {
      return status(
          self.call(a.memcpy_device_to_device_async, "memcpy_device_to_device_async", device, d, s, bytes, st));
    }
  }
  throw py::value_error("abi.Api.memcpy: direction must be 'h2d', 'd2h' or 'd2d', not '" + direction + "'");
}

void register_raw_api(py::module_& abi) {
  py::class_<RawApi>(abi, "Api",
                     "The raw cd_plugin_api of the loaded backend for a device type. Every method "
                     "returns (status, message, *outputs) and never raises for a plugin error.")
      .def(py::init<const std::string&>(), py::arg("device_type"))
      .def("has_slot", &RawApi::has_slot, py::arg("name"), "True if the negotiated table fills the slot.")
      .def("table_info", &RawApi::table_info,
           "The table's header (struct_size as the plugin gave it), slot presence, library and manifest paths.")
      .def(
          "device_get_count",
          [](const RawApi& s, bool null_out) {
            int32_t count = kSentinelI32;
            auto r = RAW_CALL(s, device_get_count, null_out ? nullptr : &count);
            return status_with(r, count);
          },
          py::arg("null_out") = false)
      .def("device_get_properties", &get_properties, py::arg("device"),
           py::arg("struct_size") = sizeof(cd_device_properties), py::arg("buffer_size") = 0,
           py::arg("null_props") = false)
      .def("device_set_current", [](const RawApi& s, int32_t device) { return status(RAW_CALL(s, device_set_current, device)); })
      .def(
          "device_get_current",
          [](const RawApi& s, bool null_out) {
            int32_t device = kSentinelI32;
            auto r = RAW_CALL(s, device_get_current, null_out ? nullptr : &device);
            return status_with(r, device);
          },
          py::arg("null_out") = false)
      .def("device_synchronize", [](const RawApi& s, int32_t device) { return status(RAW_CALL(s, device_synchronize, device)); })
      .def(
          "memory_allocate",
          [](const RawApi& s, int32_t device, size_t bytes, bool null_out) {
            void* p = ptr<void>(kSentinelPtr);
            auto r = RAW_CALL(s, memory_allocate, device, bytes, null_out ? nullptr : &p);
            return status_with(r, reinterpret_cast<uintptr_t>(p));
          },
          py::arg("device"), py::arg("bytes"), py::arg("null_out") = false)
      .def("memory_free", [](const RawApi& s, int32_t device, uintptr_t p) {
        return status(RAW_CALL(s, memory_free, device, ptr<void>(p)));
      })
      .def(
          "host_memory_allocate",
          [](const RawApi& s, size_t bytes) {
            void* p = ptr<void>(kSentinelPtr);
            auto r = RAW_CALL(s, host_memory_allocate, bytes, &p);
            return status_with(r, reinterpret_cast<uintptr_t>(p));
          },
          py::arg("bytes"))
      .def("host_memory_free", [](const RawApi& s, uintptr_t p) { return status(RAW_CALL(s, host_memory_free, ptr<void>(p))); })
      .def(
          "memory_get_info",
          [](const RawApi& s, int32_t device, bool null_free, bool null_total) {
            size_t free_bytes = kSentinelSize, total_bytes = kSentinelSize;
            auto r = RAW_CALL(s, memory_get_info, device, null_free ? nullptr : &free_bytes,
                              null_total ? nullptr : &total_bytes);
            return py::make_tuple(r.first, r.second, free_bytes, total_bytes);
          },
          py::arg("device"), py::arg("null_free") = false, py::arg("null_total") = false)
      .def(
          "memory_set",
          [](const RawApi& s, int32_t device, uintptr_t p, int32_t value, size_t bytes, py::object stream) {
            if (stream.is_none()) return status(RAW_CALL(s, memory_set, device, ptr<void>(p), value, bytes));
            return status(RAW_CALL(s, memory_set_async, device, ptr<void>(p), value, bytes,
                                   ptr<cd_stream>(stream.cast<uintptr_t>())));
          },
          py::arg("device"), py::arg("ptr"), py::arg("value"), py::arg("bytes"), py::arg("stream") = py::none(),
          "memory_set, or memory_set_async when a stream handle is given.")
      .def("memcpy", &memcpy_slot, py::arg("direction"), py::arg("device"), py::arg("dst"), py::arg("src"),
           py::arg("bytes"), py::arg("stream") = py::none(),
           "memcpy_<direction> ('h2d', 'd2h', 'd2d'); the _async slot when a stream handle is given.")
      .def(
          "stream_create",
          [](const RawApi& s, int32_t device, uint32_t flags, bool null_out) {
            cd_stream* h = ptr<cd_stream>(kSentinelPtr);
            auto r = RAW_CALL(s, stream_create, device, flags, null_out ? nullptr : &h);
            return status_with(r, reinterpret_cast<uintptr_t>(h));
          },
          py::arg("device"), py::arg("flags") = 0, py::arg("null_out") = false)
      .def("stream_destroy", [](const RawApi& s, uintptr_t h) { return status(RAW_CALL(s, stream_destroy, ptr<cd_stream>(h))); })
      .def("stream_synchronize",
           [](const RawApi& s, uintptr_t h) { return status(RAW_CALL(s, stream_synchronize, ptr<cd_stream>(h))); })
      .def(
          "stream_query",
          [](const RawApi& s, uintptr_t h, bool null_out) {
            int32_t done = kSentinelI32;
            auto r = RAW_CALL(s, stream_query, ptr<cd_stream>(h), null_out ? nullptr : &done);
            return status_with(r, done);
          },
          py::arg("stream"), py::arg("null_out") = false)
      .def("stream_wait_event", [](const RawApi& s, uintptr_t st, uintptr_t ev) {
        return status(RAW_CALL(s, stream_wait_event, ptr<cd_stream>(st), ptr<cd_event>(ev)));
      })
      .def(
          "stream_add_gate",
          [](const RawApi& s, uintptr_t st, std::shared_ptr<Gate> gate) {
            // On failure the holder is leaked, not freed: a plugin that both
            // failed and enqueued must not make the callback read freed memory.
            auto* holder = new std::shared_ptr<Gate>(std::move(gate));
            return status(RAW_CALL(s, stream_add_host_callback, ptr<cd_stream>(st), &Gate::callback,
                                   static_cast<void*>(holder)));
          },
          py::arg("stream"), py::arg("gate"), "Enqueues a host callback that blocks the stream until gate.open().")
      .def(
          "stream_add_record",
          [](const RawApi& s, uintptr_t st, std::shared_ptr<Recorder> recorder, int64_t token, int64_t sleep_us) {
            auto* call = new RecordCall{std::move(recorder), token, sleep_us};
            return status(RAW_CALL(s, stream_add_host_callback, ptr<cd_stream>(st), &RecordCall::callback,
                                   static_cast<void*>(call)));
          },
          py::arg("stream"), py::arg("recorder"), py::arg("token"), py::arg("sleep_us") = 0,
          "Enqueues a host callback that sleeps sleep_us, then appends token to the recorder.")
      .def(
          "stream_add_null_callback",
          [](const RawApi& s, uintptr_t st) {
            return status(RAW_CALL(s, stream_add_host_callback, ptr<cd_stream>(st), nullptr, nullptr));
          },
          py::arg("stream"), "stream_add_host_callback with fn == NULL (an error by the ABI).")
      .def(
          "event_create",
          [](const RawApi& s, int32_t device, uint32_t flags, bool null_out) {
            cd_event* h = ptr<cd_event>(kSentinelPtr);
            auto r = RAW_CALL(s, event_create, device, flags, null_out ? nullptr : &h);
            return status_with(r, reinterpret_cast<uintptr_t>(h));
          },
          py::arg("device"), py::arg("flags") = 0, py::arg("null_out") = false)
      .def("event_destroy", [](const RawApi& s, uintptr_t h) { return status(RAW_CALL(s, event_destroy, ptr<cd_event>(h))); })
      .def("event_record", [](const RawApi& s, uintptr_t ev, uintptr_t st) {
        return status(RAW_CALL(s, event_record, ptr<cd_event>(ev), ptr<cd_stream>(st)));
      })
      .def("event_synchronize",
           [](const RawApi& s, uintptr_t h) { return status(RAW_CALL(s, event_synchronize, ptr<cd_event>(h))); })
      .def(
          "event_query",
          [](const RawApi& s, uintptr_t h, bool null_out) {
            int32_t done = kSentinelI32;
            auto r = RAW_CALL(s, event_query, ptr<cd_event>(h), null_out ? nullptr : &done);
            return status_with(r, done);
          },
          py::arg("event"), py::arg("null_out") = false)
      .def(
          "event_elapsed_time",
          [](const RawApi& s, uintptr_t start, uintptr_t end, bool null_out) {
            float ms = kSentinelF32;
            auto r = RAW_CALL(s, event_elapsed_time, ptr<cd_event>(start), ptr<cd_event>(end),
                              null_out ? nullptr : &ms);
            return status_with(r, ms);
          },
          py::arg("start"), py::arg("end"), py::arg("null_out") = false);
}

#undef RAW_CALL

// ------------------------------------------------------------- negotiation --
//
// The ABI allows one entry call per load, so each negotiation case loads the
// caller's private copy of the library (a separate file, hence a separate
// instance with its own statics) and calls its entry once with a synthetic
// cd_core_api. Refused copies are unloaded; accepted ones stay mapped, as
// the core keeps accepted plugins (their threads may reference code).

struct ServiceCounts {
  std::atomic<int> kernel_register{0};
  std::atomic<int> workspace_allocate{0};
  std::atomic<int> log{0};
  std::atomic<int> beyond_struct_size{0};  // services called that lie past struct_size
  // ... and which: calls of each service the synthetic core's struct_size does not hold
  std::atomic<int> beyond_kernel_register{0};
  std::atomic<int> beyond_workspace_allocate{0};
  std::atomic<int> beyond_log{0};
};
ServiceCounts g_counts;
std::mutex g_negotiate_mutex;  // the counters belong to one negotiation at a time

cd_status_t fake_kernel_register(cd_kernel_registry* registry, const cd_kernel_def* def) noexcept {
  ++g_counts.kernel_register;
  const bool valid = registry != nullptr && def != nullptr && def->op != nullptr && def->fn != nullptr;
  return valid ? CD_STATUS_OK : CD_STATUS_INVALID_ARGUMENT;
}
cd_status_t fake_workspace_allocate(const cd_kernel_context*, size_t, void** out) noexcept {
  ++g_counts.workspace_allocate;
  if (out != nullptr) *out = nullptr;
  return CD_STATUS_UNIMPLEMENTED;
}
void fake_log(cd_log_level_t, const char*) noexcept { ++g_counts.log; }
cd_status_t trap_kernel_register(cd_kernel_registry*, const cd_kernel_def*) noexcept {
  ++g_counts.beyond_struct_size;
  ++g_counts.beyond_kernel_register;
  return CD_STATUS_INTERNAL;
}
cd_status_t trap_workspace_allocate(const cd_kernel_context*, size_t, void**) noexcept {
  ++g_counts.beyond_struct_size;
  ++g_counts.beyond_workspace_allocate;
  return CD_STATUS_INTERNAL;
}
void trap_log(cd_log_level_t, const char*) noexcept {
  ++g_counts.beyond_struct_size;
  ++g_counts.beyond_log;
}

// A cd_core_api claiming `major.minor` and `struct_size`, stored in a block
// of max(struct_size, sizeof) bytes; services past struct_size are traps.
// Leaked on purpose: an accepted plugin may keep the pointer until exit.
const cd_core_api* make_core(int32_t major, int32_t minor, size_t struct_size) {
  const size_t bytes = std::max(struct_size, sizeof(cd_core_api));
  auto* storage = new uint64_t[(bytes + 7) / 8]();
  auto* core = reinterpret_cast<cd_core_api*>(storage);
  core->struct_size = struct_size;
  core->next = nullptr;
  core->abi_major = major;
  core->abi_minor = minor;
  core->core_version = "conformance-synthetic";
  auto within = [&](size_t end) { return end <= struct_size; };
  core->kernel_register = within(CD_STRUCT_SIZE(cd_core_api, kernel_register)) ? fake_kernel_register
                                                                                : trap_kernel_register;
  core->workspace_allocate = within(CD_STRUCT_SIZE(cd_core_api, workspace_allocate)) ? fake_workspace_allocate
                                                                                      : trap_workspace_allocate;
  core->log = within(CD_STRUCT_SIZE(cd_core_api, log)) ? fake_log : trap_log;
  return core;
}

// What an accepted private copy does under the synthetic core: its device
// count and the kernels it registers, then its shutdown.
void exercise(const cd_plugin_api& table, size_t size, py::dict& out) {
  auto in_table = [&](size_t offset) { return offset + sizeof(void*) <= size; };
  if (in_table(offsetof(cd_plugin_api, device_get_count)) && table.device_get_count != nullptr) {
    int32_t count = kSentinelI32;
    auto r = take_error(table, table.device_get_count(&count));
    out["device_count"] = py::make_tuple(r.first, r.second, count);
  }
  if (in_table(offsetof(cd_plugin_api, kernels_register)) && table.kernels_register != nullptr) {
    auto r = take_error(table, table.kernels_register(reinterpret_cast<cd_kernel_registry*>(&g_counts)));
    out["kernels_register"] = py::make_tuple(r.first, r.second);
  }
  if (in_table(offsetof(cd_plugin_api, plugin_shutdown)) && table.plugin_shutdown != nullptr) {
    auto r = take_error(table, table.plugin_shutdown());
    out["plugin_shutdown"] = py::make_tuple(r.first, r.second);
  }
}

// Loads `library_path` (the caller's private copy), calls its entry once
// with a synthetic core, and reports what happened. `null_core` passes NULL.
py::dict negotiate(const std::string& library_path, int32_t major, int32_t minor, size_t struct_size,
                   bool null_core) {
  std::lock_guard<std::mutex> lock(g_negotiate_mutex);
  g_counts.kernel_register = g_counts.workspace_allocate = g_counts.log = g_counts.beyond_struct_size = 0;
  g_counts.beyond_kernel_register = g_counts.beyond_workspace_allocate = g_counts.beyond_log = 0;
  py::dict out;
  out["loaded"] = false;
  out["accepted"] = false;
  dlerror();
  void* library = dlopen(library_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* why = dlerror();
    out["error"] = std::string("dlopen failed: ") + (why ? why : "unknown error");
    return out;
  }
  out["loaded"] = true;
  auto entry = reinterpret_cast<cd_plugin_entry_fn>(dlsym(library, CD_PLUGIN_ENTRY_SYMBOL));
  if (entry == nullptr) {
    dlclose(library);
    out["error"] = "the library exports no " CD_PLUGIN_ENTRY_SYMBOL;
    return out;
  }
  const cd_plugin_api* table = entry(null_core ? nullptr : make_core(major, minor, struct_size));
  if (table == nullptr) {
    dlclose(library);
    return out;
  }
  out["accepted"] = true;
  // Read the header every table has, then only what lies within its size.
  cd_plugin_api copy{};
  const size_t size = table->struct_size;
  std::memcpy(&copy, table, std::min(size, sizeof(cd_plugin_api)));
  out["table"] = table_dict(copy, size);
  if (size >= CD_PLUGIN_API_SIZE_V1_0 && copy.abi_major == CD_ABI_VERSION_MAJOR && copy.error_get_code &&
      copy.error_get_message && copy.error_destroy) {
    exercise(copy, size, out);
  }
  out["services"] = py::dict(py::arg("kernel_register") = g_counts.kernel_register.load(),
                             py::arg("workspace_allocate") = g_counts.workspace_allocate.load(),
                             py::arg("log") = g_counts.log.load(),
                             py::arg("beyond_struct_size") = g_counts.beyond_struct_size.load());
  // Each service the plugin called past the core's struct_size: its calls and the size that would hold it.
  py::dict beyond;
  auto add = [&](const char* service, int calls, size_t end) {
    if (calls > 0) beyond[service] = py::dict(py::arg("calls") = calls, py::arg("size_needed") = end);
  };
  add("kernel_register", g_counts.beyond_kernel_register.load(), CD_STRUCT_SIZE(cd_core_api, kernel_register));
  add("workspace_allocate", g_counts.beyond_workspace_allocate.load(),
      CD_STRUCT_SIZE(cd_core_api, workspace_allocate));
  add("log", g_counts.beyond_log.load(), CD_STRUCT_SIZE(cd_core_api, log));
  out["beyond_struct_size"] = beyond;
  out["core_struct_size"] = struct_size;
  return out;
}

}  // namespace

void register_abi(py::module_& m) {
  py::module_ abi = m.def_submodule("abi", "Raw access to a plugin's device ABI for the conformance suite.");
  abi.attr("SENTINEL_PTR") = kSentinelPtr;
  abi.attr("SENTINEL_I32") = kSentinelI32;
  abi.attr("SENTINEL_SIZE") = kSentinelSize;
  abi.attr("SENTINEL_F32") = kSentinelF32;
  abi.attr("STATUS_ERROR_WITH_OK_CODE") = kStatusErrorWithOkCode;
  abi.attr("DEVICE_ALIGNMENT") = 256;
  abi.attr("PLUGIN_API_SIZE") = sizeof(cd_plugin_api);
  abi.attr("PLUGIN_API_SIZE_V1_0") = CD_PLUGIN_API_SIZE_V1_0;
  abi.attr("CORE_API_SIZE") = sizeof(cd_core_api);
  abi.attr("CORE_API_SIZE_V1_0_MIN") = CD_STRUCT_SIZE(cd_core_api, log);
  abi.attr("CORE_API_SIZE_BEFORE_LOG") = CD_STRUCT_SIZE(cd_core_api, workspace_allocate);
  abi.attr("CORE_API_SIZE_HEADER") = CD_STRUCT_SIZE(cd_core_api, core_version);
  abi.attr("CORE_API_SIZE_WITH_REGISTER") = CD_STRUCT_SIZE(cd_core_api, kernel_register);
  abi.attr("PROPERTIES_SIZE") = sizeof(cd_device_properties);
  abi.attr("PROPERTIES_SIZE_HEADER") = CD_STRUCT_SIZE(cd_device_properties, next);
  abi.attr("PROPERTIES_LAYOUT") = properties_layout();
  py::dict statuses;
  statuses["OK"] = CD_STATUS_OK;
  statuses["INVALID_ARGUMENT"] = CD_STATUS_INVALID_ARGUMENT;
  statuses["INVALID_HANDLE"] = CD_STATUS_INVALID_HANDLE;
  statuses["OUT_OF_MEMORY"] = CD_STATUS_OUT_OF_MEMORY;
  statuses["UNIMPLEMENTED"] = CD_STATUS_UNIMPLEMENTED;
  statuses["NOT_READY"] = CD_STATUS_NOT_READY;
  statuses["DEVICE_ERROR"] = CD_STATUS_DEVICE_ERROR;
  statuses["UNAVAILABLE"] = CD_STATUS_UNAVAILABLE;
  statuses["OUT_OF_RANGE"] = CD_STATUS_OUT_OF_RANGE;
  statuses["INTERNAL"] = CD_STATUS_INTERNAL;
  abi.attr("STATUS") = statuses;
  py::list slots;
  for (const SlotInfo& slot : kSlots) slots.append(slot.name);
  abi.attr("SLOTS") = slots;
  abi.attr("EVENT_DISABLE_TIMING") = CD_EVENT_DISABLE_TIMING;
  abi.def("now_ns", &now_ns, "The host's steady clock in ns (the clock Gate and Recorder stamp with).");

  py::class_<Gate, std::shared_ptr<Gate>>(abi, "Gate", "A host callback that blocks its stream until opened.")
      .def(py::init<double>(), py::arg("timeout_s") = 10.0)
      .def("open", &Gate::open)
      .def("wait_entered", &Gate::wait_entered, py::arg("timeout_s"), py::call_guard<py::gil_scoped_release>())
      .def("wait_finished", &Gate::wait_finished, py::arg("timeout_s"), py::call_guard<py::gil_scoped_release>())
      .def("state", &Gate::state);
  py::class_<Recorder, std::shared_ptr<Recorder>>(abi, "Recorder", "Collects host-callback tokens in run order.")
      .def(py::init<>())
      .def("tokens", &Recorder::tokens)
      .def("entries", &Recorder::entries, "[(token, time_ns, ran_inline)] in run order.")
      .def("wait_count", &Recorder::wait_count, py::arg("count"), py::arg("timeout_s"),
           py::call_guard<py::gil_scoped_release>())
      .def("clear", &Recorder::clear);

  register_raw_api(abi);
  abi.def("negotiate", &negotiate, py::arg("library_path"), py::arg("abi_major"), py::arg("abi_minor"),
          py::arg("struct_size"), py::arg("null_core") = false,
          "Loads a private copy of a backend library and calls its entry once with a synthetic cd_core_api. "
          "Returns {loaded, accepted, table, device_count, kernels_register, plugin_shutdown, services, error}.");
}

}  // namespace chipdock::python
