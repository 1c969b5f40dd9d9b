// Thread counts under CPU quotas (see threads.h).
#include "threads.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "../core_link.h"
#include "../error.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace chipdock_cpu {
namespace {

// The cgroup (v2 "0::/path", or v1's "cpu" controller) of this process.
std::string own_cgroup(bool v2) {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    if (v2 ? line.compare(0, a, "0") == 0 && controllers.empty()
           : (controllers == "cpu" || controllers.find("cpu,") == 0 || controllers.find(",cpu") != std::string::npos)) {
      return line.substr(b + 1);
    }
  }
  return "";
}

// The quota in CPUs of one cgroup folder (0 for none): v2 cpu.max
// ("max 100000" or "150000 100000"), else v1 cpu.cfs_quota_us/period_us.
double folder_quota(const std::string& folder, std::string* text) {
  std::ifstream v2(folder + "/cpu.max");
  std::string quota, period;
  if (v2 >> quota >> period) {
    if (quota == "max") return 0.0;
    const double q = std::atof(quota.c_str()), p = std::atof(period.c_str());
    if (q <= 0 || p <= 0) return 0.0;
    *text = format("%s/cpu.max %s/%s", folder.c_str(), quota.c_str(), period.c_str());
    return q / p;
  }
  std::ifstream q1(folder + "/cpu.cfs_quota_us"), p1(folder + "/cpu.cfs_period_us");
  double q = 0, p = 0;
  if ((q1 >> q) && (p1 >> p) && q > 0 && p > 0) {
    *text = format("%s/cpu.cfs_quota_us %.0f/%.0f", folder.c_str(), q, p);
    return q / p;
  }
  return 0.0;
}

// The smallest quota on the way from this process's cgroup to the root
// (a parent's limit binds its children).
double find_quota(std::string* text) {
  double best = 0.0;
  for (const bool v2 : {true, false}) {
    std::string path = own_cgroup(v2);
    // CHIPDOCK_CPU_CGROUP_ROOT (tests): where the cgroup file system lies.
    const char* env = std::getenv("CHIPDOCK_CPU_CGROUP_ROOT");
    const std::string base = env != nullptr && *env != '\0' ? env : "/sys/fs/cgroup";
    const std::string root = v2 ? base : base + "/cpu";
    if (path.empty() && !v2) continue;
    while (true) {
      std::string t;
      const double q = folder_quota(root + (path == "/" ? "" : path), &t);
      if (q > 0 && (best == 0.0 || q < best)) {
        best = q;
        *text = t;
      }
      if (path.empty() || path == "/") break;
      const size_t slash = path.find_last_of('/');
      path = slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
    }
    if (best > 0) break;
  }
  return best;
}

struct Quota {
  int cpus = 0;
  std::string text;
};

const Quota& quota() {
  static const Quota q = [] {
    Quota out;
    std::string where;
    const double cpus = find_quota(&where);
    if (cpus > 0) {
      out.cpus = std::max(1, static_cast<int>(std::ceil(cpus - 1e-9)));
      out.text = format("cgroup %s: %d CPU%s", where.c_str(), out.cpus, out.cpus == 1 ? "" : "s");
    }
    return out;
  }();
  return q;
}

}  // namespace

int cpu_quota() { return quota().cpus; }

const std::string& cpu_quota_text() { return quota().text; }

int kernel_threads() {
#ifdef _OPENMP
  const int omp = omp_get_max_threads();
#else
  const int omp = 1;
#endif
  const int limit = cpu_quota();
  return limit > 0 && limit < omp ? limit : omp;
}

int64_t grain_scale() {
  static const int64_t scale = [] {
    auto lower = [](const char* v) {
      std::string s = v != nullptr ? v : "";
      for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      return s;
    };
    const std::string policy = lower(std::getenv("OMP_WAIT_POLICY"));
    const std::string spin = lower(std::getenv("GOMP_SPINCOUNT"));
    return policy == "passive" || spin == "0" ? kPassiveGrainScale : int64_t{1};
  }();
  return scale;
}

void log_thread_choice() {
  const char* omp_env = std::getenv("OMP_NUM_THREADS");
  const char* wait_env = std::getenv("OMP_WAIT_POLICY");
  std::string why = omp_env != nullptr && *omp_env != '\0' ? format("OMP_NUM_THREADS=%s", omp_env)
                                                           : std::string("the CPUs this process may run on");
  if (!cpu_quota_text().empty()) why += ", " + cpu_quota_text();
  log_message(CD_LOG_INFO, format("cpu: kernels use up to %d OpenMP threads (%s; OMP_WAIT_POLICY=%s)", kernel_threads(),
                                  why.c_str(), wait_env != nullptr ? wait_env : "unset"));
}

}  // namespace chipdock_cpu
