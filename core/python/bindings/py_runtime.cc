// Plugins, devices and memory statistics.
#include <chrono>

#include "bindings.hpp"
#include "pinned.hpp"

namespace chipdock::python {

namespace {

Manifest manifest_from_dict(const py::dict& d) {
  Manifest m;
  m.manifest_path = py::str(d["manifest_path"]);
  m.name = py::str(d["name"]);
  m.device_type = py::str(d["device_type"]);
  m.version = py::str(d["version"]);
  m.library_path = py::str(d["library_path"]);
  m.abi_major = d["abi_major"].cast<int32_t>();
  m.abi_minor = d["abi_minor"].cast<int32_t>();
  if (d.contains("opset_version") && !d["opset_version"].is_none()) {
    m.opset_version = d["opset_version"].cast<int32_t>();
  }
  return m;
}

py::dict plugin_info(Plugin& p) {
  py::dict d;
  d["name"] = p.name();
  d["device_type"] = p.device_type();
  d["version"] = backend_text(p.plugin_version());
  d["abi_version"] = py::make_tuple(p.plugin_abi_major(), p.plugin_abi_minor());
  d["table_size"] = p.table_size();
  d["device_count"] = p.device_count();
  d["device_error"] = backend_text(p.device_error());
  d["kernel_count"] = p.kernels().size();
  d["opset_version"] = p.opset_version();
  d["library_path"] = p.manifest().library_path;
  d["manifest_path"] = p.manifest().manifest_path;
  return d;
}

py::dict properties_dict(const Device& dev) {
  const cd_device_properties& p = dev.properties();
  py::dict d;
  d["name"] = backend_text(p.name);
  d["vendor"] = backend_text(p.vendor);
  d["architecture"] = backend_text(p.architecture);
  d["driver_version"] = backend_text(p.driver_version);
  d["runtime_version"] = backend_text(p.runtime_version);
  d["total_memory"] = p.total_memory;
  d["supported_dtypes_mask"] = p.supported_dtypes;
  d["compute_units"] = p.compute_units;
  d["dlpack_device_type"] = p.dlpack_device_type;
  d["host_addressable"] = p.host_addressable != 0;
  return d;
}

py::dict stats_dict(const MemoryStats& s) {
  py::dict d;
  d["current"] = s.current;
  d["peak"] = s.peak;
  d["cached"] = s.cached;
  d["reserved"] = s.reserved;
  d["allocations"] = s.allocations;
  d["total_allocations"] = s.total_allocations;
  d["device_allocations"] = s.device_allocations;
  d["device_frees"] = s.device_frees;
  d["cache_hits"] = s.cache_hits;
  d["oom_retries"] = s.oom_retries;
  d["ooms"] = s.ooms;
  return d;
}

// Nanoseconds per call of a core operation, timed inside C++ (no Python in
// the loop): what a C++ caller of the core pays per ABI call.
double native_call_cost(Device& device, const std::string& what, int64_t iterations) {
  StreamPtr stream = device.current_stream();
  using clock = std::chrono::steady_clock;
  auto start = clock::now();
  if (what == "event_record_query") {
    Event event(&device, false);
    start = clock::now();
    for (int64_t i = 0; i < iterations; ++i) {
      event.record(*stream);
      event.query();
    }
  } else if (what == "host_callback") {
    for (int64_t i = 0; i < iterations; ++i) stream->add_host_callback([] {});
    stream->synchronize();
  } else if (what == "stream_query") {
    for (int64_t i = 0; i < iterations; ++i) stream->query();
  } else {
    throw_invalid("native_call_cost", "unknown measurement '" + what + "'");
  }
  auto elapsed = std::chrono::duration<double, std::nano>(clock::now() - start).count();
  stream->synchronize();
  return elapsed / static_cast<double>(iterations);
}

}  // namespace

void register_runtime(py::module_& m) {
  m.def("set_allocation_guard", &set_allocation_guard, py::arg("enabled"),
        "Debugging aid: canary bytes after every new allocation, checked when it is released (synchronizes).");
  m.def("allocation_guard", &allocation_guard);
  m.def("take_allocation_guard_violations", &take_allocation_guard_violations,
        "Guard violations found since the last call (and clears them).");
  m.def(
      "load_plugin", [](const py::dict& manifest) { return plugin_info(*Runtime::instance().add_plugin(manifest_from_dict(manifest))); },
      py::arg("manifest"), "Loads a plugin described by a checked manifest dict; raises PluginRefusedError.");
  m.def("plugins", [] {
    py::list out;
    for (auto& p : Runtime::instance().plugins()) out.append(plugin_info(*p));
    return out;
  });
  m.def("kernels", [](const std::string& device_type) {
    py::list out;
    for (auto& p : Runtime::instance().plugins()) {
      if (p->device_type() != device_type) continue;
      for (auto& [op, dtypes] : p->kernels().list()) out.append(py::make_tuple(op, dtypes));
    }
    return out;
  });
  m.def("shutdown", [] { Runtime::instance().shutdown(); }, py::call_guard<py::gil_scoped_release>());
  m.def("plugin_log", [] {
    py::list out;
    for (const auto& [level, message] : plugin_log()) out.append(py::make_tuple(level, backend_text(message)));
    return out;
  });
  m.attr("PLUGIN_ENTRY_SYMBOL") = CD_PLUGIN_ENTRY_SYMBOL;

  py::class_<Device, std::unique_ptr<Device, py::nodelete>>(m, "Device")
      .def_property_readonly("type", &Device::type)
      .def_property_readonly("index", &Device::ordinal)
      .def_property_readonly("backend", [](const Device& d) { return d.plugin().name(); })
      .def_property_readonly("name", [](const Device& d) { return backend_text(d.properties().name); })
      .def("properties", &properties_dict, "The device's properties as a dict.")
      .def("synchronize", &Device::synchronize, py::call_guard<py::gil_scoped_release>(),
           "Blocks until all work on every stream of the device has completed.")
      .def(
          "memory_info",
          [](Device& d) {
            size_t free_bytes = 0, total_bytes = 0;
            CD_CALL(d.plugin(), memory_get_info, d.ordinal(), &free_bytes, &total_bytes);
            return py::make_tuple(free_bytes, total_bytes);
          },
          "(free, total) bytes of device memory as the device reports them.")
      .def("memory_stats", [](Device& d) { return stats_dict(d.allocator().stats()); })
      .def("reset_peak_memory_stats", [](Device& d) { d.allocator().reset_peak(); })
      .def("empty_cache", [](Device& d) { d.allocator().empty_cache(); }, py::call_guard<py::gil_scoped_release>())
      .def("_native_call_cost", &native_call_cost, py::arg("what"), py::arg("iterations"),
           py::call_guard<py::gil_scoped_release>())
      .def("__repr__", [](const Device& d) { return "device('" + d.label() + "')"; })
      .def("__str__", &Device::label)
      .def("__eq__", [](const Device& a, py::object b) { return py::isinstance<Device>(b) && &a == &b.cast<const Device&>(); })
      .def("__hash__", [](const Device& d) { return std::hash<const void*>()(&d); });

  py::class_<PinnedBuffer, PinnedBufferPtr>(m, "PinnedBuffer", py::buffer_protocol(),
                                            "Page-locked host memory from a backend (see chipdock.pinned_empty).")
      .def(py::init([](py::object device, size_t nbytes) { return make_pinned_buffer(to_device(device), nbytes); }),
           py::arg("device"), py::arg("nbytes"))
      .def_property_readonly("pinned", &PinnedBuffer::pinned)
      .def_property_readonly("nbytes", &PinnedBuffer::size)
      .def_buffer([](PinnedBuffer& b) {
        return py::buffer_info(b.data(), 1, py::format_descriptor<uint8_t>::format(), 1,
                               {static_cast<py::ssize_t>(b.size())}, {1});
      });
  m.def(
      "is_pinned", [](uintptr_t address, size_t nbytes) {
        return PinnedBuffer::find(reinterpret_cast<const void*>(address), nbytes) != nullptr;
      },
      py::arg("address"), py::arg("nbytes"));

  m.def("devices", [] {
    std::vector<Device*> out = Runtime::instance().devices();
    return py::cast(out, py::return_value_policy::reference);
  });
  m.def(
      "device", [](const std::string& type, int32_t ordinal) -> Device& { return Runtime::instance().device(type, ordinal); },
      py::return_value_policy::reference);
}

Device& to_device(py::handle obj) {
  if (py::isinstance<Device>(obj)) return obj.cast<Device&>();
  py::object resolved = py::module_::import("chipdock").attr("_resolve_device")(obj);
  return resolved.cast<Device&>();
}

py::tuple to_tuple(const Shape& values) {
  py::tuple t(values.size());
  for (size_t i = 0; i < values.size(); ++i) t[i] = py::int_(values[i]);
  return t;
}

}  // namespace chipdock::python
