// CUDA error mapping and device probing (see cuda_check.h).
#include "cuda_check.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstring>

namespace chipdock_cuda {
namespace {

std::string version_string(int v) { return format("%d.%d", v / 1000, (v % 1000) / 10); }

// The kernel module's version ("580.65.06"), or "" where it cannot be read.
std::string kernel_driver_version() {
  FILE* f = std::fopen("/proc/driver/nvidia/version", "r");
  if (f == nullptr) return std::string();
  char line[512] = {0};
  const bool ok = std::fgets(line, sizeof(line), f) != nullptr;
  std::fclose(f);
  // "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.14  <date>"
  const char* tag = ok ? std::strstr(line, "Kernel Module") : nullptr;
  char version[64] = {0};
  if (tag == nullptr || std::sscanf(tag + 13, " %63s", version) != 1) return std::string();
  return version;
}

}  // namespace

cd_status_t status_of(cudaError_t err) noexcept {
  switch (err) {
    case cudaSuccess: return CD_STATUS_OK;
    case cudaErrorMemoryAllocation: return CD_STATUS_OUT_OF_MEMORY;
    case cudaErrorInvalidValue:
    case cudaErrorInvalidDevice:
    case cudaErrorInvalidDevicePointer:
    case cudaErrorInvalidMemcpyDirection: return CD_STATUS_INVALID_ARGUMENT;
    case cudaErrorInvalidResourceHandle: return CD_STATUS_INVALID_HANDLE;
    case cudaErrorNotReady: return CD_STATUS_NOT_READY;
    case cudaErrorInsufficientDriver:
    case cudaErrorNoDevice:
    case cudaErrorNotSupported:
    case cudaErrorUnsupportedPtxVersion:
    case cudaErrorNoKernelImageForDevice: return CD_STATUS_UNAVAILABLE;
    default: return CD_STATUS_DEVICE_ERROR;
  }
}

void check(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return;
  // Non-sticky errors stay in cudaGetLastError until read; read it so the
  // next, unrelated call does not report this one again.
  (void)cudaGetLastError();
  fail(status_of(err), "%s: %s: %s", what, cudaGetErrorName(err), cudaGetErrorString(err));
}

std::string unavailable_reason(cudaError_t count_error) {
  if (count_error == cudaSuccess) return std::string();
  if (count_error == cudaErrorNoDevice) return "no CUDA device";
  if (count_error == cudaErrorInsufficientDriver) {
    // The runtime says the same for "no driver" and "old driver"; tell them
    // apart so that `chipdock check` can say what to install.
    void* libcuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD);
    if (libcuda == nullptr) libcuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (libcuda == nullptr) return "no NVIDIA driver: libcuda.so.1 not found";
    dlclose(libcuda);
    int driver = 0;
    (void)cudaDriverGetVersion(&driver);
    const std::string found = kernel_driver_version();
    return format("driver too old: needs >= %s (CUDA %s), found %s (CUDA %s)", CHIPDOCK_CUDA_MIN_DRIVER,
                  version_string(CUDART_VERSION).c_str(), found.empty() ? "an unknown version" : found.c_str(),
                  driver > 0 ? version_string(driver).c_str() : "unknown");
  }
  return format("the CUDA runtime cannot list devices: %s: %s", cudaGetErrorName(count_error),
                cudaGetErrorString(count_error));
}

int device_count() {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    throw Error(CD_STATUS_UNAVAILABLE, unavailable_reason(err));
  }
  return n;
}

void use_device(int device) {
  const int n = device_count();
  if (device < 0 || device >= n) {
    fail(CD_STATUS_INVALID_ARGUMENT, "device %d does not exist (%d CUDA devices)", device, n);
  }
  check(cudaSetDevice(device), "cudaSetDevice");
}

}  // namespace chipdock_cuda
