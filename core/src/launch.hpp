// Launching a registered kernel: tensor views, the kernel context, and the
// workspace the core lends kernels through cd_core_api.
#pragma once

#include <string>
#include <vector>

#include "chipdock/device_api.h"
#include "tensor.hpp"

namespace chipdock {

// An attribute owned by the caller for the duration of a launch.
struct Attribute {
  std::string name;
  cd_attr_type_t type = CD_ATTR_INT;
  int64_t i = 0;
  double f = 0.0;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<double> floats;
};

// The operands of a launch (inline storage: no allocation for small calls).
using TensorRefs = SmallVector<const Tensor*, 8>;

// The dtypes of `inputs` then `outputs`: the signature of fixed-arity ops.
DtypeList signature_of(const TensorRefs& inputs, const TensorRefs& outputs);

// The kernel for (op, dtypes of inputs then outputs) on `device` (fn NULL if none).
Kernel find_kernel(Device& device, const std::string& op, const TensorRefs& inputs, const TensorRefs& outputs);

// Runs `op` on `stream` with the kernel registered for `signature` (default:
// signature_of(inputs, outputs)). Inputs are made contiguous first when the
// kernel asks for it. Throws UNIMPLEMENTED when no kernel is registered and
// the plugin's error when the kernel refuses its arguments.
void launch_kernel(Stream& stream, const std::string& op, const TensorRefs& inputs, const TensorRefs& outputs,
                   const std::vector<Attribute>& attributes = {}, const DtypeList* signature = nullptr,
                   const Kernel* resolved = nullptr);

// cd_core_api.workspace_allocate, for the launch behind `ctx`.
cd_status_t workspace_allocate(const cd_kernel_context* ctx, size_t bytes, void** out) noexcept;

}  // namespace chipdock
