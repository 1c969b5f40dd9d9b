// CUDA runtime calls -> chipdock errors, and the device checks every slot
// shares.
#ifndef CHIPDOCK_CUDA_CUDA_CHECK_H_
#define CHIPDOCK_CUDA_CUDA_CHECK_H_

#include <cuda_runtime_api.h>

#include <string>

#include "error.h"

namespace chipdock_cuda {

// The CD_STATUS_* a CUDA runtime error maps to.
cd_status_t status_of(cudaError_t err) noexcept;

// Throws Error(status_of(err), "<what>: <cuda name>: <cuda message>") unless
// err is cudaSuccess. Clears the runtime's sticky "last error" for
// non-sticky errors so that one failure is reported once.
void check(cudaError_t err, const char* what);

// Why the runtime has no usable device ("no NVIDIA driver: ...", "driver
// too old: ...", "no CUDA device"), or "" when it has some.
std::string unavailable_reason(cudaError_t count_error);

// Number of devices; throws CD_STATUS_UNAVAILABLE with the reason above.
int device_count();

// Throws INVALID_ARGUMENT unless `device` is in [0, device_count()), then
// makes it current on the calling thread (the runtime is thread-bound).
void use_device(int device);

}  // namespace chipdock_cuda

#endif  // CHIPDOCK_CUDA_CUDA_CHECK_H_
