// DLPack export (__dlpack__, __dlpack_device__) and zero-copy import.
// The struct layout below is DLPack's stable, unversioned ABI (v0.8).
#include "bindings.hpp"
#include "chipdock/support/checked_math.h"
#include "dtype.hpp"

namespace chipdock::python {

namespace {

struct DLDevice {
  int32_t device_type;
  int32_t device_id;
};
struct DLDataType {
  uint8_t code;  // 0 int, 1 uint, 2 float, 4 bfloat, 6 bool
  uint8_t bits;
  uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor* self);
};

constexpr const char* kCapsuleName = "dltensor";
constexpr const char* kUsedCapsuleName = "used_dltensor";

// Keeps the storage alive for as long as the consumer holds the tensor.
struct ExportContext {
  Tensor tensor;
  Shape shape;
  Shape strides;
  DLManagedTensor managed;
};

DLDataType to_dl_dtype(cd_dtype_t dtype) {
  switch (dtype) {
    case CD_DTYPE_FLOAT32: return {2, 32, 1};
    case CD_DTYPE_FLOAT16: return {2, 16, 1};
    case CD_DTYPE_BFLOAT16: return {4, 16, 1};
    case CD_DTYPE_FLOAT64: return {2, 64, 1};
    case CD_DTYPE_INT8: return {0, 8, 1};
    case CD_DTYPE_INT16: return {0, 16, 1};
    case CD_DTYPE_INT32: return {0, 32, 1};
    case CD_DTYPE_INT64: return {0, 64, 1};
    case CD_DTYPE_UINT8: return {1, 8, 1};
    case CD_DTYPE_BOOL: return {6, 8, 1};
    default: throw_invalid("__dlpack__", "dtype has no DLPack code");
  }
}

cd_dtype_t from_dl_dtype(DLDataType t) {
  if (t.lanes != 1) throw_invalid("from_dlpack", "vector dtypes (lanes != 1) have no representation");
  switch (t.code * 1000 + t.bits) {
    case 2032: return CD_DTYPE_FLOAT32;
    case 2016: return CD_DTYPE_FLOAT16;
    case 4016: return CD_DTYPE_BFLOAT16;
    case 2064: return CD_DTYPE_FLOAT64;
    case 8: return CD_DTYPE_INT8;
    case 16: return CD_DTYPE_INT16;
    case 32: return CD_DTYPE_INT32;
    case 64: return CD_DTYPE_INT64;
    case 1008: return CD_DTYPE_UINT8;
    case 6008: return CD_DTYPE_BOOL;
    default:
      throw_invalid("from_dlpack", "DLPack dtype (code " + std::to_string(t.code) + ", " +
                                       std::to_string(t.bits) + " bits) has no chipdock representation");
  }
}

void delete_export(DLManagedTensor* self) {
  py::gil_scoped_acquire gil;  // the storage's release may reach Python-visible state
  delete static_cast<ExportContext*>(self->manager_ctx);
}

void capsule_destructor(PyObject* capsule) {
  // Only an unconsumed capsule still owns its tensor.
  if (!PyCapsule_IsValid(capsule, kCapsuleName)) return;
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, kCapsuleName));
  if (managed != nullptr && managed->deleter != nullptr) managed->deleter(managed);
}

int32_t dlpack_device_type(const Device& d) {
  int32_t type = d.properties().dlpack_device_type;
  if (type == 0) {
    throw Error(CD_STATUS_UNIMPLEMENTED, d.plugin().name(), "__dlpack__",
                "the backend declares no DLPack device type for " + d.label());
  }
  return type;
}

py::object export_tensor(const Tensor& t, py::object stream) {
  int32_t type = dlpack_device_type(t.device());
  (void)stream;
  {
    // The consumer may read as soon as it holds the capsule: finish the
    // producer's pending work on the current stream first.
    py::gil_scoped_release release;
    wait_for_stream_point(*t.device().current_stream());
  }
  // The consumer may write the memory without the core knowing: kernels
  // must no longer cache data derived from it.
  t.storage()->mark_shared();
  auto* ctx = new ExportContext{t, t.shape(), t.strides(), {}};
  DLTensor& dl = ctx->managed.dl_tensor;
  dl.data = t.storage()->data();
  dl.device = {type, t.device().ordinal()};
  dl.ndim = static_cast<int32_t>(t.ndim());
  dl.dtype = to_dl_dtype(t.dtype());
  dl.shape = ctx->shape.data();
  dl.strides = ctx->strides.data();
  dl.byte_offset = static_cast<uint64_t>(t.offset()) * t.itemsize();
  ctx->managed.manager_ctx = ctx;
  ctx->managed.deleter = &delete_export;
  PyObject* capsule = PyCapsule_New(&ctx->managed, kCapsuleName, &capsule_destructor);
  if (capsule == nullptr) {
    delete ctx;
    throw py::error_already_set();
  }
  return py::reinterpret_steal<py::object>(capsule);
}

Device* find_dlpack_device(int32_t type, int32_t id) {
  for (Device* d : Runtime::instance().devices()) {
    if (d->properties().dlpack_device_type == type && d->ordinal() == id) return d;
  }
  return nullptr;
}

// Wraps a producer's memory without copying; the capsule is consumed.
Tensor import_capsule(py::capsule capsule, Device& device) {
  if (!PyCapsule_IsValid(capsule.ptr(), kCapsuleName)) {
    throw_invalid("from_dlpack", "expected an unconsumed 'dltensor' capsule");
  }
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), kCapsuleName));
  const DLTensor& dl = managed->dl_tensor;
  cd_dtype_t dtype = from_dl_dtype(dl.dtype);
  if (dl.ndim < 0 || (dl.ndim > 0 && dl.shape == nullptr)) {
    throw_invalid("from_dlpack", "ndim " + std::to_string(dl.ndim) + " without a shape");
  }
  Shape shape(dl.shape, dl.shape + dl.ndim);
  const int64_t numel = shape_numel(shape, "from_dlpack");  // negative dims, more than 2^63 elements
  Shape strides = dl.strides ? Shape(dl.strides, dl.strides + dl.ndim) : contiguous_strides(shape);
  const size_t isz = dtype_size(dtype);
  // Element span relative to element 0, so that negative strides work too;
  // a shape or strides whose span wraps int64 is refused, not imported.
  support::ViewExtent extent;
  size_t nbytes = 0;
  if (numel > 0) {
    const std::optional<support::ViewExtent> e = support::checked_view_extent(shape.data(), strides.data(), shape.size());
    const std::optional<int64_t> reach = e ? support::checked_sub(e->hi, e->lo) : std::nullopt;
    const std::optional<int64_t> count = reach ? support::checked_add(*reach, 1) : std::nullopt;
    const std::optional<size_t> bytes = count ? support::checked_nbytes(*count, isz) : std::nullopt;
    if (!bytes) {  // then lo * itemsize fits too: |lo| < count
      throw_invalid("from_dlpack", "shape " + describe_shape(shape) + " with strides " + describe_shape(strides) +
                                       " spans more than 2^63 bytes");
    }
    extent = *e;
    nbytes = *bytes;
  }
  const int64_t lo = extent.lo;
  char* first = static_cast<char*>(dl.data) + dl.byte_offset;
  PyCapsule_SetName(capsule.ptr(), kUsedCapsuleName);
  auto storage = Storage::external(device, first + lo * static_cast<int64_t>(isz), nbytes, [managed]() {
    if (managed->deleter != nullptr) {
      py::gil_scoped_acquire gil;
      managed->deleter(managed);
    }
  });
  return Tensor(storage, shape, strides, -lo, dtype);
}

}  // namespace

void register_dlpack(py::module_& m) {
  auto tensor = py::reinterpret_borrow<py::object>(m.attr("Tensor"));
  tensor.attr("__dlpack__") = py::cpp_function(
      [](const Tensor& t, py::object stream, py::object max_version, py::object dl_device, py::object copy) {
        (void)max_version;
        (void)dl_device;
        if (!copy.is_none() && copy.cast<bool>()) return export_tensor(t.clone(), stream);
        return export_tensor(t, stream);
      },
      py::is_method(tensor), py::kw_only(), py::arg("stream") = py::none(), py::arg("max_version") = py::none(),
      py::arg("dl_device") = py::none(), py::arg("copy") = py::none());
  tensor.attr("__dlpack_device__") = py::cpp_function(
      [](const Tensor& t) { return py::make_tuple(dlpack_device_type(t.device()), t.device().ordinal()); },
      py::is_method(tensor));
  m.def("find_dlpack_device", &find_dlpack_device, py::return_value_policy::reference);
  m.def("import_dlpack", &import_capsule, py::arg("capsule"), py::arg("device"));
}

}  // namespace chipdock::python
