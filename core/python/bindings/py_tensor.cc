// The Tensor class. NumPy-facing conveniences (dtype objects, numpy(),
// __array__, repr) are added in chipdock/_tensor.py.
#include "bindings.hpp"
#include "dtype.hpp"

namespace chipdock::python {

namespace {

void require_c_contiguous(const py::array& arr, const char* call) {
  if (!(arr.flags() & py::array::c_style)) throw_invalid(call, "the array must be C-contiguous");
}

Tensor from_array(const py::array& arr, cd_dtype_t dtype, py::object device) {
  require_c_contiguous(arr, "tensor");
  if (!dtype_valid(dtype)) throw_invalid("tensor", "unknown dtype code " + std::to_string(dtype));
  if (static_cast<size_t>(arr.itemsize()) != dtype_size(dtype)) {
    throw_invalid("tensor", "array itemsize " + std::to_string(arr.itemsize()) + " does not match " + dtype_name(dtype));
  }
  Shape shape(arr.shape(), arr.shape() + arr.ndim());
  Device& dev = to_device(device);
  const void* src = arr.data();
  const size_t nbytes = static_cast<size_t>(arr.nbytes());
  py::gil_scoped_release release;
  Tensor t = Tensor::empty(dev, shape, dtype);
  t.copy_from_host(src, nbytes);
  return t;
}

void copy_from_array(Tensor& t, const py::array& src, bool non_blocking) {
  require_c_contiguous(src, "Tensor.copy_");
  const void* data = src.data();
  const size_t nbytes = static_cast<size_t>(src.nbytes());
  py::gil_scoped_release release;
  t.copy_from_host(data, nbytes, non_blocking);
}

void copy_to_array(const Tensor& t, py::array& out, bool non_blocking) {
  require_c_contiguous(out, "Tensor.numpy");
  if (!out.writeable()) throw_invalid("Tensor.numpy", "the destination array is read-only");
  void* dst = out.mutable_data();
  const size_t nbytes = static_cast<size_t>(out.nbytes());
  py::gil_scoped_release release;
  t.copy_to_host(dst, nbytes, non_blocking);
}

}  // namespace

void register_tensor(py::module_& m) {
  py::class_<Tensor>(m, "Tensor", "An n-dimensional strided array in device memory.")
      .def_static("_from_array", &from_array, py::arg("array"), py::arg("dtype_code"), py::arg("device"))
      .def_static(
          "_empty",
          [](py::handle shape, cd_dtype_t dtype, py::object device) {
            Device& dev = to_device(device);
            Shape dims = to_int64s(shape, "empty", "shape");
            py::gil_scoped_release release;  // an OOM retry synchronizes the device
            return Tensor::empty(dev, dims, dtype);
          },
          py::arg("shape"), py::arg("dtype_code"), py::arg("device"))
      .def_property_readonly("shape", [](const Tensor& t) { return to_tuple(t.shape()); })
      .def_property_readonly("_dtype_code", &Tensor::dtype)
      .def_property_readonly("device", &Tensor::device, py::return_value_policy::reference)
      .def_property_readonly("ndim", &Tensor::ndim)
      .def_property_readonly("nbytes", &Tensor::nbytes)
      .def_property_readonly("itemsize", &Tensor::itemsize)
      .def("stride", [](const Tensor& t) { return to_tuple(t.strides()); }, "Strides in elements.")
      .def("numel", &Tensor::numel)
      .def("storage_offset", &Tensor::offset, "Offset of element 0 in the storage, in elements.")
      .def("is_contiguous", &Tensor::is_contiguous)
      .def("data_ptr", [](const Tensor& t) { return reinterpret_cast<uintptr_t>(t.data_ptr()); },
           "The device address of element 0 (not host-addressable on every backend).")
      .def("contiguous", &Tensor::contiguous, py::call_guard<py::gil_scoped_release>())
      .def("clone", &Tensor::clone, py::call_guard<py::gil_scoped_release>())
      .def(
          "to",
          [](const Tensor& t, py::object device) {
            Device& dev = to_device(device);
            py::gil_scoped_release release;
            return t.to(dev);
          },
          py::arg("device"), "A copy on `device`; when already there, a tensor sharing this one's memory.")
      .def(
          "copy_",
          [](Tensor& self, const Tensor& src) -> Tensor& {
            py::gil_scoped_release release;
            self.copy_from(src);
            return self;
          },
          py::arg("src"), py::return_value_policy::reference_internal)
      .def(
          "zero_",
          [](Tensor& self) -> Tensor& {
            py::gil_scoped_release release;
            self.zero();
            return self;
          },
          py::return_value_policy::reference_internal)
      .def("permute", [](const Tensor& t, const py::args& dims) {
        if (dims.size() == 1 && !PyIndex_Check(dims[0].ptr())) return t.permute(to_int64s(dims[0], "permute", "dims"));
        return t.permute(to_int64s(dims, "permute", "dims"));
      })
      .def(
          "transpose",
          [](const Tensor& t, py::handle dim0, py::handle dim1) {
            return t.transpose(to_int64(dim0, "transpose", "dim0"), to_int64(dim1, "transpose", "dim1"));
          },
          py::arg("dim0"), py::arg("dim1"))
      .def(
          "as_strided",
          [](const Tensor& t, py::handle shape, py::handle strides, py::handle offset) {
            return t.as_strided(to_int64s(shape, "as_strided", "size"), to_int64s(strides, "as_strided", "stride"),
                                offset.is_none() ? t.offset() : to_int64(offset, "as_strided", "storage_offset"));
          },
          py::arg("size"), py::arg("stride"), py::arg("storage_offset") = py::none(),
          "A view of the same storage with the given shape and strides (in elements).")
      .def(
          "record_stream", [](const Tensor& t, const StreamPtr& s) { t.storage()->record_stream(s); },
          py::arg("stream"), "Marks the memory as used by work on `stream` (kept until that work is done).")
      .def("_copy_to_array", &copy_to_array, py::arg("out"), py::arg("non_blocking") = false)
      .def("_copy_from_array", &copy_from_array, py::arg("src"), py::arg("non_blocking") = false)
      .def("__len__", [](const Tensor& t) {
        if (t.ndim() == 0) throw py::type_error("len() of a 0-d tensor");
        return t.shape()[0];
      });
}

}  // namespace chipdock::python
