// Streams, events and the per-thread current stream.
#include "bindings.hpp"

namespace chipdock::python {

namespace {

// Runs a Python callable from a plugin thread. The callable is held as a raw
// reference so that nothing touches Python refcounts without the GIL.
std::function<void()> python_callback(py::function fn) {
  PyObject* callable = fn.release().ptr();
  return [callable]() {
    if (!Py_IsInitialized()) return;
    py::gil_scoped_acquire gil;
    PyObject* result = PyObject_CallNoArgs(callable);
    if (result == nullptr) {
      PyErr_WriteUnraisable(callable);
    } else {
      Py_DECREF(result);
    }
    Py_DECREF(callable);
  };
}

}  // namespace

void register_streams(py::module_& m) {
  py::class_<Stream, StreamPtr>(m, "Stream", "An in-order queue of work on one device.")
      .def(py::init([](py::object device) { return to_device(device).create_stream(); }), py::arg("device") = py::none())
      .def_property_readonly("device", [](const Stream& s) -> Device& { return s.device(); },
                             py::return_value_policy::reference)
      .def_property_readonly("destroyed", &Stream::destroyed)
      .def_property_readonly("id", &Stream::id)
      .def("synchronize", &Stream::synchronize, py::call_guard<py::gil_scoped_release>(),
           "Blocks until all work enqueued on the stream has completed.")
      .def("query", &Stream::query, "True if all enqueued work has completed. Never blocks.")
      .def("wait_event", &Stream::wait_event, py::arg("event"), py::call_guard<py::gil_scoped_release>(),
           "Makes later work on this stream wait for the event's latest record.")
      .def(
          "record_event",
          [](StreamPtr self, EventPtr event) {
            if (!event) event = std::make_shared<Event>(&self->device(), true);
            event->record(*self);
            return event;
          },
          py::arg("event") = nullptr, "Records (a new) event on this stream and returns it.")
      .def(
          "add_callback", [](Stream& s, py::function fn) { s.add_host_callback(python_callback(std::move(fn))); },
          py::arg("fn"), "Runs fn() on a host thread after all work enqueued so far.")
      .def("destroy", &Stream::destroy, py::call_guard<py::gil_scoped_release>(),
           "Waits for enqueued work and releases the stream; later use raises InvalidHandleError.")
      .def("__repr__", [](const Stream& s) {
        return "<chipdock.Stream " + std::to_string(s.id()) + " on " + s.device().label() +
               (s.destroyed() ? " (destroyed)>" : ">");
      });

  py::class_<Event, EventPtr>(m, "Event", "A marker in a stream; optionally timed.")
      .def(py::init([](py::object device, bool enable_timing) {
             return std::make_shared<Event>(&to_device(device), enable_timing);
           }),
           py::arg("device") = py::none(), py::arg("enable_timing") = true)
      .def_property_readonly("device", [](const Event& e) -> Device& { return e.device(); },
                             py::return_value_policy::reference)
      .def_property_readonly("destroyed", &Event::destroyed)
      .def_property_readonly("enable_timing", &Event::timing)
      .def(
          "record",
          [](Event& e, StreamPtr stream) {
            if (!stream) stream = e.device().current_stream();
            e.record(*stream);
          },
          py::arg("stream") = nullptr, "Captures the work enqueued on the stream (default: current) so far.")
      .def("synchronize", &Event::synchronize, py::call_guard<py::gil_scoped_release>())
      .def("query", &Event::query)
      .def("elapsed_time", &Event::elapsed_ms, py::arg("end"), "Milliseconds from this event to `end`.")
      .def("destroy", &Event::destroy)
      .def("__repr__", [](const Event& e) {
        return "<chipdock.Event on " + e.device().label() + (e.destroyed() ? " (destroyed)>" : ">");
      });

  m.def(
      "current_stream", [](py::object device) { return to_device(device).current_stream(); },
      py::arg("device") = py::none());
  m.def(
      "default_stream", [](py::object device) { return to_device(device).default_stream(); },
      py::arg("device") = py::none());
  m.def(
      "set_current_stream", [](Device& device, StreamPtr stream) { device.set_current_stream(std::move(stream)); },
      py::arg("device"), py::arg("stream").none(true));
}

}  // namespace chipdock::python
