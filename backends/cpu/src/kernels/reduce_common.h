// Plumbing shared by the reduction and normalization kernels (reduce*.cpp,
// norm*.cpp): kernel-context and attribute access, dimension coalescing, an
// odometer over strided dimensions, the instruction-set level the hot loops
// run at, and the parallel loop they use.
//
// The hot loops themselves live in headers without include guards
// (reduce_simd.h, reduce_ops.h, ...) that each kernel file includes once per
// instruction-set level, inside `#pragma GCC target` regions and namespaces
// isa_avx512 / isa_avx2 / isa_base; active_isa() picks one at run time, so
// the library still runs on plain x86-64 (and builds elsewhere with only the
// baseline). Results are the same bits at every level and for any number of
// threads: sums and products use fixed lane sets and pairwise trees, and
// work split over threads cuts along those trees.
#ifndef CHIPDOCK_CPU_KERNELS_REDUCE_COMMON_H_
#define CHIPDOCK_CPU_KERNELS_REDUCE_COMMON_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <exception>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define CD_RED_X86 1
#else
#define CD_RED_X86 0
#endif

#include "chipdock/support/attributes.h"
#include "../error.h"
#include "../stream.h"
#include "kernels.h"
#include "numeric.h"
#include "tensor.h"

namespace chipdock_cpu {
namespace red {

// --- instruction-set level ------------------------------------------------------

enum : int { kIsaBaseline = 0, kIsaAvx2 = 1, kIsaAvx512 = 2 };

// The level the hot loops run at: the best the CPU (and OS) supports, capped
// by CHIPDOCK_CPU_ISA=baseline|avx2|avx512 (read once; for tests and
// debugging). Defined in reduce.cpp.
int active_isa();

// Brackets for the per-level copies of the hot loops (GCC and Clang).
#define CD_RED_BEGIN_AVX512                  \
  _Pragma("GCC push_options")                \
  _Pragma("GCC target(\"avx,avx2,fma,f16c,bmi,bmi2,avx512f,avx512bw,avx512vl,avx512dq,prefer-vector-width=512\")")
#define CD_RED_BEGIN_AVX2 \
  _Pragma("GCC push_options") _Pragma("GCC target(\"avx,avx2,fma,f16c,bmi,bmi2\")")
#define CD_RED_END _Pragma("GCC pop_options")

// The level a kernel of `dtype` runs at: AVX-512 copies exist only for the
// dtypes that gain from them (float32, float16, bfloat16: wide exp and
// conversions); float64 and the integers, memory-bound, stop at AVX2 (this
// keeps the build smaller).
inline int isa_for(cd_dtype_t dtype) {
  const int isa = active_isa();
  const bool wide = dtype == CD_DTYPE_FLOAT32 || dtype == CD_DTYPE_FLOAT16 ||
                    dtype == CD_DTYPE_BFLOAT16;
  return wide ? isa : std::min(isa, static_cast<int>(kIsaAvx2));
}

// The dtypes the AVX-512 copies are instantiated for (see isa_for).
#define CD_RED_WIDE_DTYPE(T)                                                        \
  (std::is_same_v<T, float> || std::is_same_v<T, ::chipdock_cpu::float16_t> ||      \
   std::is_same_v<T, ::chipdock_cpu::bfloat16_t>)

// Calls `fn` of the namespace for isa_for(dtype), e.g.
//   CD_RED_DISPATCH(p.in.dtype, run_reduce, plan);
#if CD_RED_X86
#define CD_RED_DISPATCH(dtype, fn, ...)                                         \
  do {                                                                          \
    switch (::chipdock_cpu::red::isa_for(dtype)) {                              \
      case ::chipdock_cpu::red::kIsaAvx512: isa_avx512::fn(__VA_ARGS__); break; \
      case ::chipdock_cpu::red::kIsaAvx2: isa_avx2::fn(__VA_ARGS__); break;     \
      default: isa_base::fn(__VA_ARGS__); break;                                \
    }                                                                           \
  } while (0)
#else
#define CD_RED_DISPATCH(dtype, fn, ...) isa_base::fn(__VA_ARGS__)
#endif

// --- dimensions ------------------------------------------------------------------

struct Dim {
  int64_t size;
  int64_t stride;  // in elements
};

// Drops size-1 dimensions and merges each dimension into its outer
// neighbour when the outer one steps exactly over it, keeping the order.
inline std::vector<Dim> coalesce(const std::vector<Dim>& dims) {
  std::vector<Dim> r;
  for (const Dim& d : dims) {
    if (d.size == 1) continue;
    if (!r.empty() && r.back().stride == d.stride * d.size) {
      r.back().size *= d.size;
      r.back().stride = d.stride;
      continue;
    }
    r.push_back(d);
  }
  return r;
}

inline int64_t numel_of(const std::vector<Dim>& dims) {
  int64_t n = 1;
  for (const Dim& d : dims) n *= d.size;
  return n;
}

// Element offset of the `linear`-th element (row-major over `dims`).
inline int64_t offset_of(int64_t linear, const std::vector<Dim>& dims) {
  int64_t off = 0;
  for (size_t k = dims.size(); k-- > 0;) {
    const int64_t q = linear / dims[k].size;
    off += (linear - q * dims[k].size) * dims[k].stride;
    linear = q;
  }
  return off;
}

// Row-major odometer over `dims`, starting at element `start`.
class Walker {
 public:
  Walker(const std::vector<Dim>& dims, int64_t start) : dims_(&dims), index_(dims.size(), 0) {
    int64_t linear = start;
    for (size_t k = dims.size(); k-- > 0;) {
      const int64_t q = linear / dims[k].size;
      index_[k] = linear - q * dims[k].size;
      offset_ += index_[k] * dims[k].stride;
      linear = q;
    }
  }
  int64_t offset() const { return offset_; }
  void next() {
    const std::vector<Dim>& d = *dims_;
    for (size_t k = d.size(); k-- > 0;) {
      offset_ += d[k].stride;
      if (++index_[k] < d[k].size) return;
      offset_ -= d[k].stride * d[k].size;
      index_[k] = 0;
    }
  }

 private:
  const std::vector<Dim>* dims_;
  std::vector<int64_t> index_;
  int64_t offset_ = 0;
};

inline std::vector<Dim> dims_of(const HostTensor& t, size_t begin, size_t end) {
  std::vector<Dim> d;
  for (size_t i = begin; i < end; ++i) d.push_back({t.shape[i], t.strides[i]});
  return d;
}

// --- kernel context -----------------------------------------------------------------

inline void check_context(const cd_kernel_context* ctx, int32_t min_inputs, int32_t max_inputs,
                          int32_t num_outputs) {
  ::chipdock_cpu::check_context(ctx, min_inputs, max_inputs, num_outputs, num_outputs);
}

// Attributes, all required (the dispatcher fills defaults): the backend kit's
// typed readers (chipdock/support/attributes.h).
inline const cd_attribute* find_attribute(const cd_kernel_context* ctx, const char* name) {
  return &chipdock::support::required_attribute(ctx, name);
}

inline int64_t attr_int(const cd_kernel_context* ctx, const char* name) {
  return chipdock::support::int_attribute(ctx, name);
}

inline bool attr_bool(const cd_kernel_context* ctx, const char* name) {
  return chipdock::support::bool_attribute(ctx, name);
}

// A float attribute (an int is accepted too).
inline double attr_float(const cd_kernel_context* ctx, const char* name) {
  return chipdock::support::float_attribute(ctx, name);
}

inline std::vector<int64_t> attr_ints(const cd_kernel_context* ctx, const char* name) {
  return chipdock::support::ints_attribute(ctx, name);
}

inline HostTensor input_tensor(const cd_kernel_context* ctx, int32_t i) {
  static const char* const names[] = {"input 0", "input 1", "input 2", "input 3", "input 4"};
  return resolve_view(*ctx->inputs[i], ctx->device, i < 5 ? names[i] : "input");
}

inline HostTensor output_tensor(const cd_kernel_context* ctx, int32_t i) {
  return resolve_view(*ctx->outputs[i], ctx->device, i == 0 ? "output 0" : "output");
}

inline void require_dtype(const HostTensor& t, cd_dtype_t dtype, const char* what) {
  if (t.dtype != dtype) {
    fail(CD_STATUS_INVALID_ARGUMENT, "%s is %s, expected %s", what, dtype_name(t.dtype),
         dtype_name(dtype));
  }
}

inline std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1) s += ",";
  return s + ")";
}

template <size_t N>
void require_dtype_in(const HostTensor& t, const cd_dtype_t (&dtypes)[N], const char* what) {
  for (cd_dtype_t d : dtypes) {
    if (t.dtype == d) return;
  }
  fail(CD_STATUS_INVALID_ARGUMENT, "%s: dtype %s is not supported by this op", what,
       dtype_name(t.dtype));
}

inline void require_shape(const HostTensor& t, const std::vector<int64_t>& shape,
                          const char* what) {
  if (t.shape != shape) {
    fail(CD_STATUS_INVALID_ARGUMENT, "%s has shape %s, expected %s", what,
         shape_string(t.shape).c_str(), shape_string(shape).c_str());
  }
}

// Outputs are C-contiguous by contract; checked because the kernels index
// them linearly.
inline void require_contiguous(const HostTensor& t, const char* what) {
  int64_t expected = 1;
  for (size_t k = t.shape.size(); k-- > 0;) {
    if (t.shape[k] != 1 && t.strides[k] != expected) {
      fail(CD_STATUS_INVALID_ARGUMENT, "%s is not C-contiguous", what);
    }
    expected *= t.shape[k];
  }
}

// Normalized axis of a same-shape op: in [0, ndim), or the only element of a
// 0-d tensor (axis 0 or -1).
inline int64_t check_axis(int64_t axis, size_t ndim, const char* name) {
  if (ndim == 0 && (axis == 0 || axis == -1)) return 0;
  if (axis < 0 || axis >= static_cast<int64_t>(ndim)) {
    fail(CD_STATUS_INVALID_ARGUMENT, "attribute '%s' = %lld is out of range for %zu dims "
         "(expected normalized, in [0, %zu))", name, static_cast<long long>(axis), ndim, ndim);
  }
  return axis;
}

// --- parallel loop --------------------------------------------------------------------

inline int num_threads() { return kernel_threads(); }

// Work below this many elements runs on the calling thread.
constexpr int64_t kParallelGrain = 32768;

// fn(begin, end) over [0, items), split across the OpenMP threads when the
// whole job touches at least kParallelGrain elements. An exception thrown on
// a worker (std::bad_alloc, say) must not leave the parallel region: the
// first one is kept and rethrown on the calling thread.
template <class F> void parallel_items(int64_t items, int64_t work, F&& fn) {
  if (items <= 0) return;
  if (work < kParallelGrain * grain_scale() || items == 1) {
    fn(int64_t{0}, items);
    return;
  }
  parallel_guarded(items, 0, fn);
}

// --- registration ---------------------------------------------------------------------

constexpr cd_dtype_t kFloatDtypes[] = {CD_DTYPE_FLOAT32, CD_DTYPE_FLOAT16, CD_DTYPE_BFLOAT16,
                                       CD_DTYPE_FLOAT64};
constexpr cd_dtype_t kNumericDtypes[] = {CD_DTYPE_FLOAT32, CD_DTYPE_FLOAT16, CD_DTYPE_BFLOAT16,
                                         CD_DTYPE_FLOAT64, CD_DTYPE_INT8,    CD_DTYPE_INT16,
                                         CD_DTYPE_INT32,   CD_DTYPE_INT64,   CD_DTYPE_UINT8};

// Registers `fn` for `op` with `arity` copies of each dtype in `dtypes`
// (all operands of one type variable), or with `last` as the final dtype.
template <size_t N>
void register_same(cd_kernel_registry* registry, const char* op, const cd_dtype_t (&dtypes)[N],
                   int32_t arity, cd_kernel_fn fn, cd_dtype_t last = CD_DTYPE_INVALID) {
  for (cd_dtype_t dt : dtypes) {
    cd_dtype_t sig[8];
    for (int32_t i = 0; i < arity; ++i) sig[i] = dt;
    if (last != CD_DTYPE_INVALID) sig[arity - 1] = last;
    register_kernel(registry, op, sig, arity, fn);
  }
}

// Registered from reduce.cpp's register_reductions.
void register_softmax_family(cd_kernel_registry* registry);  // reduce_softmax.cpp
void register_norms(cd_kernel_registry* registry);           // norm.cpp

}  // namespace red
}  // namespace chipdock_cpu

#endif  // CHIPDOCK_CPU_KERNELS_REDUCE_COMMON_H_
