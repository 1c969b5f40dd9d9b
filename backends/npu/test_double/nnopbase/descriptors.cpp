// aclnn's descriptors (libnnopbase.so's aclCreateTensor family): deep copies
// of what the caller passed, tracked in live sets so that a destroyed or
// foreign handle is refused with a message instead of dereferenced.
#include <cstring>
#include <mutex>
#include <unordered_set>

#include "sim.h"

struct aclTensor {
  cdsim::TensorInfo info;
};
struct aclScalar {
  aclDataType dtype;
  alignas(16) unsigned char value[16];
};
struct aclIntArray {
  std::vector<int64_t> values;
};
struct aclFloatArray {
  std::vector<float> values;
};
struct aclBoolArray {
  std::vector<bool> values;
};
struct aclTensorList {
  std::vector<const aclTensor*> tensors;  // owned: destroying the list destroys them (as CANN's does)
};

namespace cdsim {
namespace {

struct Live {
  std::mutex mutex;
  std::unordered_set<const void*> handles;
};

Live& live() {
  static Live* instance = new Live;  // never destroyed: handles may be released during static teardown
  return *instance;
}

template <typename T>
T* track(T* handle) {
  Live& l = live();
  std::lock_guard<std::mutex> lock(l.mutex);
  l.handles.insert(handle);
  return handle;
}

bool alive(const void* handle) {
  Live& l = live();
  std::lock_guard<std::mutex> lock(l.mutex);
  return l.handles.count(handle) != 0;
}

// Forgets `handle`; false if it was not live.
bool untrack(const void* handle) {
  Live& l = live();
  std::lock_guard<std::mutex> lock(l.mutex);
  return l.handles.erase(handle) != 0;
}

template <typename T>
const T& checked(const T* handle, const char* kind, const char* what) {
  if (!handle) raise(CD_ACLNN_ERR_PARAM_NULLPTR, "%s (%s) is NULL", what, kind);
  if (!alive(handle)) raise(CD_ACLNN_ERR_PARAM_INVALID, "%s: %p is not a live %s (destroyed?)", what,
                            static_cast<const void*>(handle), kind);
  return *handle;
}

template <typename T>
aclnnStatus destroy(const T* handle, const char* call) {
  if (!handle) return CD_ACLNN_SUCCESS;
  if (!untrack(handle)) {
    set_recent_error(std::string(call) + ": not a live handle (destroyed twice?)");
    return CD_ACLNN_ERR_PARAM_INVALID;
  }
  delete handle;
  return CD_ACLNN_SUCCESS;
}

// A create function's failure: NULL and the reason as the recent error.
std::nullptr_t refuse(const std::string& message) {
  set_recent_error(message);
  return nullptr;
}

}  // namespace

const TensorInfo& info(const aclTensor* tensor, const char* what) { return checked(tensor, "aclTensor", what).info; }

double scalar_double(const aclScalar* scalar, const char* what) {
  const aclScalar& s = checked(scalar, "aclScalar", what);
  return load_double(s.value, s.dtype);
}

int64_t scalar_int(const aclScalar* scalar, const char* what) {
  const aclScalar& s = checked(scalar, "aclScalar", what);
  return load_int(s.value, s.dtype);
}

aclDataType scalar_dtype(const aclScalar* scalar, const char* what) {
  return checked(scalar, "aclScalar", what).dtype;
}

std::vector<int64_t> int_array(const aclIntArray* array, const char* what) {
  return checked(array, "aclIntArray", what).values;
}

std::vector<float> float_array(const aclFloatArray* array, const char* what) {
  return checked(array, "aclFloatArray", what).values;
}

std::vector<bool> bool_array(const aclBoolArray* array, const char* what) {
  return checked(array, "aclBoolArray", what).values;
}

std::vector<const aclTensor*> tensor_list(const aclTensorList* list, const char* what) {
  return checked(list, "aclTensorList", what).tensors;
}

}  // namespace cdsim

extern "C" {

aclTensor* aclCreateTensor(const int64_t* viewDims, uint64_t viewDimsNum, aclDataType dataType, const int64_t* stride,
                           int64_t offset, aclFormat format, const int64_t* storageDims, uint64_t storageDimsNum,
                           void* tensorData) {
  try {
    if (viewDimsNum > 0 && !viewDims) return cdsim::refuse("aclCreateTensor: viewDims is NULL");
    if (storageDimsNum > 0 && !storageDims) return cdsim::refuse("aclCreateTensor: storageDims is NULL");
    if (offset < 0) return cdsim::refuse("aclCreateTensor: a negative offset");
    cdsim::TensorInfo info;
    info.shape.assign(viewDims, viewDims + viewDimsNum);
    info.storage.assign(storageDims, storageDims + storageDimsNum);
    info.offset = offset;
    info.dtype = dataType;
    info.format = format;
    info.data = tensorData;
    for (int64_t d : info.shape)
      if (d < 0) return cdsim::refuse("aclCreateTensor: a negative view dim");
    if (stride) {
      info.strides.assign(stride, stride + viewDimsNum);
    } else {
      // No strides: the view is contiguous.
      info.strides.assign(viewDimsNum, 1);
      for (size_t d = viewDimsNum; d-- > 1;) info.strides[d - 1] = info.strides[d] * info.shape[d];
    }
    // aclnn takes non-negative strides only (the backend materializes flips first).
    int64_t reach = offset;
    for (size_t d = 0; d < viewDimsNum; ++d) {
      if (info.strides[d] < 0) return cdsim::refuse("aclCreateTensor: negative strides are not supported");
      if (info.shape[d] > 0) reach += (info.shape[d] - 1) * info.strides[d];
    }
    if (info.numel() > 0 && storageDimsNum > 0) {
      int64_t storage = 1;
      for (int64_t d : info.storage) storage *= d;
      if (reach >= storage)
        return cdsim::refuse("aclCreateTensor: the view reaches element " + std::to_string(reach) +
                             " of a storage of " + std::to_string(storage) + " elements");
    }
    return cdsim::track(new aclTensor{std::move(info)});
  } catch (...) {
    return cdsim::refuse("aclCreateTensor: host memory exhausted");
  }
}

aclScalar* aclCreateScalar(void* value, aclDataType dataType) {
  if (!value) return cdsim::refuse("aclCreateScalar: value is NULL");
  size_t bytes = cdsim::dtype_bytes(dataType);
  if (bytes == 0 || bytes > 16)
    return cdsim::refuse(std::string("aclCreateScalar: unsupported dtype ") + cdsim::dtype_name(dataType));
  auto* scalar = new (std::nothrow) aclScalar{dataType, {}};
  if (!scalar) return cdsim::refuse("aclCreateScalar: host memory exhausted");
  std::memcpy(scalar->value, value, bytes);
  return cdsim::track(scalar);
}

aclIntArray* aclCreateIntArray(const int64_t* value, uint64_t size) {
  if (size > 0 && !value) return cdsim::refuse("aclCreateIntArray: value is NULL");
  try {
    return cdsim::track(new aclIntArray{std::vector<int64_t>(value, value + size)});
  } catch (...) {
    return cdsim::refuse("aclCreateIntArray: host memory exhausted");
  }
}

aclFloatArray* aclCreateFloatArray(const float* value, uint64_t size) {
  if (size > 0 && !value) return cdsim::refuse("aclCreateFloatArray: value is NULL");
  try {
    return cdsim::track(new aclFloatArray{std::vector<float>(value, value + size)});
  } catch (...) {
    return cdsim::refuse("aclCreateFloatArray: host memory exhausted");
  }
}

aclBoolArray* aclCreateBoolArray(const bool* value, uint64_t size) {
  if (size > 0 && !value) return cdsim::refuse("aclCreateBoolArray: value is NULL");
  try {
    return cdsim::track(new aclBoolArray{std::vector<bool>(value, value + size)});
  } catch (...) {
    return cdsim::refuse("aclCreateBoolArray: host memory exhausted");
  }
}

aclTensorList* aclCreateTensorList(const aclTensor* const* value, uint64_t size) {
  if (size > 0 && !value) return cdsim::refuse("aclCreateTensorList: value is NULL");
  for (uint64_t i = 0; i < size; ++i)
    if (!value[i] || !cdsim::alive(value[i]))
      return cdsim::refuse("aclCreateTensorList: element " + std::to_string(i) + " is not a live aclTensor");
  try {
    return cdsim::track(new aclTensorList{std::vector<const aclTensor*>(value, value + size)});
  } catch (...) {
    return cdsim::refuse("aclCreateTensorList: host memory exhausted");
  }
}

aclnnStatus aclDestroyTensor(const aclTensor* tensor) { return cdsim::destroy(tensor, "aclDestroyTensor"); }
aclnnStatus aclDestroyScalar(const aclScalar* scalar) { return cdsim::destroy(scalar, "aclDestroyScalar"); }
aclnnStatus aclDestroyIntArray(const aclIntArray* array) { return cdsim::destroy(array, "aclDestroyIntArray"); }
aclnnStatus aclDestroyFloatArray(const aclFloatArray* array) { return cdsim::destroy(array, "aclDestroyFloatArray"); }
aclnnStatus aclDestroyBoolArray(const aclBoolArray* array) { return cdsim::destroy(array, "aclDestroyBoolArray"); }

aclnnStatus aclDestroyTensorList(const aclTensorList* array) {
  if (!array) return CD_ACLNN_SUCCESS;
  if (!cdsim::alive(array)) {
    cdsim::set_recent_error("aclDestroyTensorList: not a live handle (destroyed twice?)");
    return CD_ACLNN_ERR_PARAM_INVALID;
  }
  // The list owns its tensors (CANN's aclDestroyTensorList releases them too).
  aclnnStatus status = CD_ACLNN_SUCCESS;
  for (const aclTensor* tensor : array->tensors) {
    aclnnStatus one = cdsim::destroy(tensor, "aclDestroyTensorList (an element)");
    if (one != CD_ACLNN_SUCCESS) status = one;
  }
  aclnnStatus own = cdsim::destroy(array, "aclDestroyTensorList");
  return own != CD_ACLNN_SUCCESS ? own : status;
}

}  // extern "C"
