// Tensor views as kernels use them: validated against the allocation table,
// translated to host memory (strict mode included), and with shape and
// strides copied, because the core's view is only valid during the kernel
// call while the work runs later on the stream's thread.
#ifndef CHIPDOCK_CPU_KERNELS_TENSOR_H_
#define CHIPDOCK_CPU_KERNELS_TENSOR_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "chipdock/cd_kernel.h"
#include "../memory.h"

namespace chipdock_cpu {

constexpr int32_t kMaxDims = 64;

// Bytes per element of `dtype`, or 0 for an unknown dtype.
size_t dtype_size(cd_dtype_t dtype);

// "float32", "bool", ... or "unknown dtype".
const char* dtype_name(cd_dtype_t dtype);

struct HostTensor {
  cd_dtype_t dtype = CD_DTYPE_INVALID;
  size_t itemsize = 0;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;  // in elements
  int64_t numel = 0;
  DeviceRange range;             // every byte the view can touch; empty if numel == 0
  char* origin = nullptr;        // host address of element (0, ..., 0); NULL if empty
};

// A validated view that still borrows its shape and strides from the core's
// cd_tensor_view: valid only during the kernel call. For kernels that copy
// what they need before enqueueing (elementwise: the coalesced loop), it
// saves HostTensor's two vector allocations per operand.
struct ViewRef {
  cd_dtype_t dtype = CD_DTYPE_INVALID;
  size_t itemsize = 0;
  int32_t ndim = 0;
  const int64_t* shape = nullptr;    // borrowed
  const int64_t* strides = nullptr;  // borrowed, in elements
  int64_t numel = 0;
  DeviceRange range;
  char* origin = nullptr;
};

// Validates `view` (struct size, format, dtype, shape, device == `device`,
// every addressable byte inside one allocation) and returns its host form.
// `what` names it in messages ("input 0", "output 0").
ViewRef resolve_view_ref(const cd_tensor_view& view, int32_t device, const char* what);
// The same, owning copies of shape and strides (for work that runs later).
HostTensor resolve_view(const cd_tensor_view& view, int32_t device, const char* what);

// Validates a kernel context before anything is read from it: its struct
// size, min..max inputs and outputs (max < 0: no upper bound), and non-NULL
// input, output and attribute arrays and entries. Throws INVALID_ARGUMENT.
void check_context(const cd_kernel_context* ctx, int32_t min_inputs, int32_t max_inputs,
                   int32_t min_outputs, int32_t max_outputs);

}  // namespace chipdock_cpu

#endif  // CHIPDOCK_CPU_KERNELS_TENSOR_H_
