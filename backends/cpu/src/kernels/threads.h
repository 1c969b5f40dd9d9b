// How many OpenMP threads a kernel may use.
//
// OpenMP already honours OMP_NUM_THREADS and the affinity mask (taskset,
// docker --cpuset-cpus). It does not know a CPU quota (docker --cpus=2 or a
// Kubernetes limit on a 64-core host: the cgroup's cpu.max), and running
// more threads than the quota allows makes every barrier wait out a
// throttled period. kernel_threads() is the smaller of the two; every
// parallel region of the kernels (numeric.h's parallel_for, oneDNN and
// OpenBLAS through onednn::ThreadScope) uses it.
#ifndef CHIPDOCK_CPU_KERNELS_THREADS_H_
#define CHIPDOCK_CPU_KERNELS_THREADS_H_

#include <cstdint>
#include <string>

namespace chipdock_cpu {

// CPUs the process's cgroup quota allows (rounded up; at least 1), or 0 when
// there is no quota. Read once.
int cpu_quota();

// The cgroup quota in the words of the log ("cgroup cpu.max 150000/100000:
// 2 CPUs"), or "" when there is none.
const std::string& cpu_quota_text();

// min(omp_get_max_threads() on the calling thread, cpu_quota()).
int kernel_threads();

// How many times more work a loop needs before it wakes other threads:
// 1 while idle OpenMP threads spin, kPassiveGrainScale when they sleep
// (OMP_WAIT_POLICY=PASSIVE, GOMP_SPINCOUNT=0). A sleeping thread takes tens
// of microseconds to wake (45 us on a 2-core VM, against 1 us spinning),
// so only longer work gains from it. Read once.
constexpr int64_t kPassiveGrainScale = 4;
int64_t grain_scale();

// Logs (INFO) how many threads the kernels use and what limits them.
void log_thread_choice();

}  // namespace chipdock_cpu

#endif  // CHIPDOCK_CPU_KERNELS_THREADS_H_
