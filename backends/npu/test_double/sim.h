// The simulated Ascend runtime's internal interface, shared by its four
// libraries (libascendcl.so, libnnopbase.so, libopapi.so, libhccl.so; all
// built together, so a C++ interface is fine here). Nothing in this folder
// is CANN's code: it implements CANN's public C API from its documentation,
// on the host, so that the npu backend's own code runs for real in CI.
//
// Device memory is host memory whose addresses are tagged (bit 56 set, as the
// CPU backend's strict mode), so the core, or a backend bug, dereferencing a
// device pointer faults instead of silently working.
#ifndef CHIPDOCK_NPU_SIM_H_
#define CHIPDOCK_NPU_SIM_H_

#include <acl/acl.h>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "../src/aclnn_api.h"

namespace cdsim {

// What every check, doctor and report line quotes.
constexpr const char* kDescription = "simulated Ascend runtime (test double)";

// A failure inside the double: an ACL/aclnn/HCCL code and a message that
// becomes aclGetRecentErrMsg()'s.
struct SimError : std::exception {
  SimError(int32_t c, std::string m) : code(c), message(std::move(m)) {}
  const char* what() const noexcept override { return message.c_str(); }
  int32_t code;
  std::string message;
};
[[noreturn]] void raise(int32_t code, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

// ---- libascendcl.so (runtime/) ----

// Sets this thread's aclGetRecentErrMsg() text.
void set_recent_error(const std::string& message);

// Runs `body`; a SimError becomes its code (and the recent error message),
// anything else ACL_ERROR_INTERNAL_ERROR. For every exported C function.
int32_t guarded(const std::function<void()>& body) noexcept;

// The host address behind device address `device_ptr`, checking that
// [device_ptr, device_ptr + bytes) lies in one live device allocation
// (ACL_ERROR_INVALID_PARAM naming `what` otherwise). bytes 0 is allowed.
char* host_pointer(const void* device_ptr, size_t bytes, const char* what);

// True if `ptr` lies in a live device allocation.
bool is_device_pointer(const void* ptr) noexcept;

// The device (0-based) that owns `device_ptr`; -1 if none.
int32_t device_of(const void* device_ptr) noexcept;

// The device `stream` belongs to (ACL_ERROR_INVALID_PARAM for an unknown stream).
int32_t stream_device(aclrtStream stream);

// Appends `task` to `stream`'s queue: the stream's own thread runs its tasks
// one at a time, in enqueue order. A task that throws SimError puts the
// stream in error: later tasks are skipped and the next synchronize returns
// that code (and message). Throws for an unknown stream.
void enqueue(aclrtStream stream, std::function<void()> task);

// The calling thread's current device (set by aclrtSetDevice/SetCurrentContext).
int32_t current_device();

// Reads an environment knob of the double (CHIPDOCK_NPU_SIM_*), or "".
std::string setting(const char* name);

// ---- libnnopbase.so (nnopbase/) ----

// An op planned by aclnnXxxGetWorkspaceSize: the work the run call enqueues.
// `body` receives the workspace's host address (NULL when none was asked).
struct Plan {
  const char* op;              // "aclnnAdd"
  uint64_t workspace_bytes;    // what GetWorkspaceSize reported
  std::function<void(char* workspace)> body;
};

// GetWorkspaceSize's tail: checks the fault knob CHIPDOCK_NPU_SIM_FAIL_OP,
// stores the plan in a new executor and writes both out-parameters.
aclnnStatus plan(Plan plan, uint64_t* workspace_size, aclOpExecutor** executor) noexcept;

// aclnnXxx's body: validates executor, workspace (size and device address)
// and stream, then enqueues the plan on the stream; consumes the executor.
aclnnStatus launch(const char* op, void* workspace, uint64_t workspace_size, aclOpExecutor* executor,
                   aclrtStream stream) noexcept;

// Runs a GetWorkspaceSize body: SimError -> its code + recent error message.
aclnnStatus guarded_op(const std::function<aclnnStatus()>& body) noexcept;

// A tensor descriptor as aclCreateTensor received it (deep copy).
struct TensorInfo {
  std::vector<int64_t> shape;    // view dims
  std::vector<int64_t> strides;  // elements
  std::vector<int64_t> storage;  // storage dims
  int64_t offset = 0;            // elements
  aclDataType dtype = ACL_DT_UNDEFINED;
  aclFormat format = ACL_FORMAT_ND;
  void* data = nullptr;          // device address of the storage
  int64_t numel() const;
};
// The descriptor behind a handle (ACLNN_ERR_PARAM_NULLPTR naming `what` for NULL).
const TensorInfo& info(const aclTensor* tensor, const char* what);
// A scalar's value converted, and its dtype.
double scalar_double(const aclScalar* scalar, const char* what);
int64_t scalar_int(const aclScalar* scalar, const char* what);
aclDataType scalar_dtype(const aclScalar* scalar, const char* what);
std::vector<int64_t> int_array(const aclIntArray* array, const char* what);
std::vector<float> float_array(const aclFloatArray* array, const char* what);
std::vector<bool> bool_array(const aclBoolArray* array, const char* what);
std::vector<const aclTensor*> tensor_list(const aclTensorList* list, const char* what);

// A tensor's elements on the host, for an op body on the stream thread.
// Construct it inside the body (host_pointer checks the allocation is still
// live); element `linear` is in row-major order of `shape`.
class HostTensor {
 public:
  explicit HostTensor(const TensorInfo& info);
  int64_t numel() const { return numel_; }
  const std::vector<int64_t>& shape() const { return info_.shape; }
  aclDataType dtype() const { return info_.dtype; }
  char* element(int64_t linear) const;                 // address of element `linear`
  char* element_at(const std::vector<int64_t>& index) const;
  double get(int64_t linear) const;                    // float types and ints as double
  int64_t get_int(int64_t linear) const;               // ints exactly; floats truncated
  void set(int64_t linear, double value) const;        // rounds to the dtype (RNE)
  void set_int(int64_t linear, int64_t value) const;   // wraps to the dtype's width

 private:
  TensorInfo info_;
  char* base_ = nullptr;   // host address of storage element 0
  int64_t numel_ = 0;
};

// Size in bytes of an aclDataType (0 for unsupported ones).
size_t dtype_bytes(aclDataType dtype) noexcept;
bool is_floating(aclDataType dtype) noexcept;
const char* dtype_name(aclDataType dtype) noexcept;
// Raw element conversions (the dtype's bit pattern at `p`).
double load_double(const void* p, aclDataType dtype);
int64_t load_int(const void* p, aclDataType dtype);
void store_double(void* p, aclDataType dtype, double value);  // correctly rounded, RNE
void store_int(void* p, aclDataType dtype, int64_t value);

// Row-major multi-index stepping: for (Index it(shape); it.valid(); it.next()) it.index()
class Index {
 public:
  explicit Index(std::vector<int64_t> shape);
  bool valid() const { return valid_; }
  void next();
  const std::vector<int64_t>& index() const { return index_; }
  int64_t linear() const { return linear_; }

 private:
  std::vector<int64_t> shape_, index_;
  int64_t linear_ = 0;
  bool valid_ = true;
};

}  // namespace cdsim

// Defines aclnn<Name>(workspace, size, executor, stream) for an op whose
// GetWorkspaceSize ends in cdsim::plan().
#define CDSIM_ACLNN_RUN(Name)                                                                   \
  extern "C" aclnnStatus aclnn##Name(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, \
                                     aclrtStream stream) {                                     \
    return cdsim::launch("aclnn" #Name, workspace, workspaceSize, executor, stream);            \
  }

#endif  // CHIPDOCK_NPU_SIM_H_
