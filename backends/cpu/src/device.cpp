// Devices (see device.h).
#include "device.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#if defined(__GLIBC__)
#include <gnu/libc-version.h>
#endif

#include "config.h"
#include "error.h"
#include "kernels/isa.h"
#include "stream.h"

namespace chipdock_cpu {
namespace {

thread_local int32_t tl_current_device = 0;

std::string machine() {
  struct utsname u;
  if (uname(&u) != 0) return "unknown";
  return u.machine;
}

// "model name" from /proc/cpuinfo (x86 and some others), else uname -m.
std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, 10, "model name") != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) break;
    const size_t start = line.find_first_not_of(" \t", colon + 1);
    if (start != std::string::npos) return line.substr(start);
  }
  return machine();
}

// uname -m plus the instruction-set level the kernels run at
// (kernels/isa.h: what the CPU offers, capped by CHIPDOCK_CPU_ISA).
std::string architecture() {
  std::string arch = machine();
  const Isa level = isa_choice().kernel_level;
  if (level != Isa::baseline) arch += std::string("-") + isa_name(level);
  return arch;
}

std::string runtime_version() {
  std::string v;
#if defined(__GLIBC__)
  v = std::string("glibc ") + gnu_get_libc_version();
#endif
#if defined(__GLIBCXX__)
  v += std::string(v.empty() ? "" : ", ") + "libstdc++ " + std::to_string(__GLIBCXX__);
#endif
  return v.empty() ? "host" : v;
}

int32_t hardware_threads() {
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  if (n > 0) return static_cast<int32_t>(n);
  return static_cast<int32_t>(std::max(1u, std::thread::hardware_concurrency()));
}

// The properties every device shares, computed once.
struct HostFacts {
  std::string name = "chipdock CPU (" + cpu_model() + ")";
  std::string architecture = chipdock_cpu::architecture();
  std::string runtime = runtime_version();
  int32_t threads = hardware_threads();
};

const HostFacts& host_facts() {
  static const HostFacts facts;
  return facts;
}

void copy_string(char* dst, size_t capacity, const std::string& src) {
  std::snprintf(dst, capacity, "%s", src.c_str());
}

}  // namespace

int32_t device_count() {
  const Config& c = config();
  if (!c.problem.empty()) fail(CD_STATUS_UNAVAILABLE, "%s", c.problem.c_str());
  return c.device_count;
}

void check_device(int32_t device) {
  const Config& c = config();
  if (device >= 0 && device < c.device_count) return;
  if (!c.problem.empty()) {
    fail(CD_STATUS_INVALID_ARGUMENT, "device %d does not exist: %s", device,
         c.problem.c_str());
  }
  fail(CD_STATUS_INVALID_ARGUMENT, "device %d is not in [0, %d) (CHIPDOCK_CPU_DEVICES)",
       device, c.device_count);
}

// Writes a field only if it lies within both sizes (see cd_device_properties).
#define CD_PROP_FITS(field) (CD_STRUCT_SIZE(cd_device_properties, field) <= limit)

void get_properties(int32_t device, cd_device_properties* props) {
  check_device(device);
  require_non_null(props, "props");
  if (props->struct_size < CD_STRUCT_SIZE(cd_device_properties, next)) {
    fail(CD_STATUS_INVALID_ARGUMENT, "props->struct_size %zu cannot even hold `next` (the ABI's minimum)",
         props->struct_size);
  }
  const size_t limit = std::min(props->struct_size, sizeof(cd_device_properties));
  const HostFacts& f = host_facts();
  const bool strict = config().strict;
  if (CD_PROP_FITS(name)) copy_string(props->name, sizeof(props->name), f.name);
  if (CD_PROP_FITS(vendor)) copy_string(props->vendor, sizeof(props->vendor), "chipdock");
  if (CD_PROP_FITS(architecture)) {
    copy_string(props->architecture, sizeof(props->architecture), f.architecture);
  }
  if (CD_PROP_FITS(driver_version)) props->driver_version[0] = '\0';
  if (CD_PROP_FITS(runtime_version)) {
    copy_string(props->runtime_version, sizeof(props->runtime_version), f.runtime);
  }
  if (CD_PROP_FITS(total_memory)) props->total_memory = config().memory_limit;
  if (CD_PROP_FITS(supported_dtypes)) {
    uint64_t mask = 0;
    for (cd_dtype_t dt = CD_DTYPE_FLOAT32; dt <= CD_DTYPE_BOOL; ++dt) mask |= CD_DTYPE_BIT(dt);
    props->supported_dtypes = mask;
  }
  if (CD_PROP_FITS(compute_units)) props->compute_units = f.threads;
  if (CD_PROP_FITS(dlpack_device_type)) {
    props->dlpack_device_type = strict ? CD_DLPACK_EXT_DEV : CD_DLPACK_CPU;
  }
  if (CD_PROP_FITS(host_addressable)) props->host_addressable = strict ? 0 : 1;
  if (CD_PROP_FITS(reserved)) props->reserved = 0;
}

#undef CD_PROP_FITS

void set_current_device(int32_t device) {
  check_device(device);
  tl_current_device = device;
}

int32_t current_device() { return tl_current_device; }

cd_error* synchronize_device(int32_t device) {
  check_device(device);
  std::vector<std::shared_ptr<Stream>> streams;
  for (auto& s : live_streams()) {
    if (s->device() == device) streams.push_back(std::move(s));
  }
  for (auto& s : streams) s->drain();
  // Hand over one error; any others stay on their streams for the next check.
  for (auto& s : streams) {
    if (cd_error* e = s->take_error()) return e;
  }
  return nullptr;
}

}  // namespace chipdock_cpu
