// Generators without inputs: arange and full.
//   arange: out[i] = start + i * delta, computed in double, converted once.
//   full:   every element = value converted to the dtype.
// Conversion (from_double): floats round to nearest even, once; integers
// truncate toward zero, and a value outside the integer dtype's range (NaN,
// inf) is refused before anything is enqueued; bool is value != 0.
#include <cmath>
#include <utility>
#include <vector>

#include "movement_common.h"

namespace chipdock_cpu {
namespace movement {
namespace {

void check_dtype_attr(const cd_kernel_context* ctx, const HostTensor& out) {
  const int64_t dtype = int_attr(ctx, "dtype");
  if (dtype != out.dtype) {
    fail(CD_STATUS_INVALID_ARGUMENT, "attribute dtype = %lld (%s) but the output is %s",
         static_cast<long long>(dtype), dtype_name(static_cast<cd_dtype_t>(dtype)),
         dtype_name(out.dtype));
  }
}

// ---------------------------------------------------------------------------------
// arange

struct ArangePlan {
  HostTensor out;
  double start = 0.0, delta = 1.0;
};

void run_arange(const ArangePlan& p) {
  check_live(p.out, "output 0");
  dispatch_dtype(p.out.dtype, [&](auto tag) {
    using T = decltype(tag);
    T* out = reinterpret_cast<T*>(p.out.origin);
    const double start = p.start, delta = p.delta;
    parallel_for(p.out.numel, 32768, [&](int64_t b, int64_t e) {
#pragma omp simd
      for (int64_t i = b; i < e; ++i) {
        out[i] = from_double<T>(start + static_cast<double>(i) * delta);
      }
    });
  });
}

void enqueue_arange(const cd_kernel_context* ctx) {
  check_context(ctx, 0, 0, 1, 1);
  std::shared_ptr<Stream> stream = kernel_stream(ctx);
  ArangePlan p;
  p.out = output_tensor(ctx, 0);
  check_dtype_attr(ctx, p.out);
  if (p.out.dtype == CD_DTYPE_BOOL) fail(CD_STATUS_INVALID_ARGUMENT, "arange of bool");
  p.start = float_attr(ctx, "start");
  p.delta = float_attr(ctx, "delta");
  const double limit = float_attr(ctx, "limit");
  if (!std::isfinite(p.start) || !std::isfinite(p.delta) || !std::isfinite(limit) ||
      p.delta == 0.0) {
    fail(CD_STATUS_INVALID_ARGUMENT, "arange needs finite start, limit, delta and delta != 0 "
         "(got %g, %g, %g)", p.start, limit, p.delta);
  }
  const double count = std::ceil((limit - p.start) / p.delta);
  if (!(count < 9.0e18)) fail(CD_STATUS_INVALID_ARGUMENT, "arange of %g elements", count);
  const int64_t n = count > 0.0 ? static_cast<int64_t>(count) : 0;
  require_shape(p.out, std::vector<int64_t>{n}, "output 0");
  if (n == 0) return;
  const double last = p.start + static_cast<double>(n - 1) * p.delta;
  if (!fits_dtype(p.start, p.out.dtype) || !fits_dtype(last, p.out.dtype)) {
    fail(CD_STATUS_INVALID_ARGUMENT, "arange values from %g to %g do not fit %s", p.start,
         last, dtype_name(p.out.dtype));
  }
  stream->enqueue("arange", [p = std::move(p)] { run_arange(p); });
}

cd_error* arange_kernel(const cd_kernel_context* ctx) noexcept {
  return guard("arange", [ctx] { enqueue_arange(ctx); });
}

// ---------------------------------------------------------------------------------
// full

struct FullPlan {
  HostTensor out;
  uint64_t value = 0;  // bytes of the dtype
};

void run_full(const FullPlan& p) {
  check_live(p.out, "output 0");
  const int64_t item = static_cast<int64_t>(p.out.itemsize);
  parallel_for(p.out.numel, kParallelBytes / item, [&](int64_t b, int64_t e) {
    fill_bytes(p.out.origin + b * item, &p.value, e - b, p.out.itemsize);
  });
}

void enqueue_full(const cd_kernel_context* ctx) {
  check_context(ctx, 0, 0, 1, 1);
  std::shared_ptr<Stream> stream = kernel_stream(ctx);
  FullPlan p;
  p.out = output_tensor(ctx, 0);
  check_dtype_attr(ctx, p.out);
  require_shape(p.out, ints_attr(ctx, "shape"), "output 0");
  const double value = float_attr(ctx, "value");
  if (!fits_dtype(value, p.out.dtype)) {
    fail(CD_STATUS_INVALID_ARGUMENT, "value %g does not fit %s", value, dtype_name(p.out.dtype));
  }
  dispatch_dtype(p.out.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T v = from_double<T>(value);
    std::memcpy(&p.value, &v, sizeof(T));
  });
  if (p.out.numel == 0) return;
  stream->enqueue("full", [p = std::move(p)] { run_full(p); });
}

cd_error* full_kernel(const cd_kernel_context* ctx) noexcept {
  return guard("full", [ctx] { enqueue_full(ctx); });
}

}  // namespace

void register_fill(cd_kernel_registry* registry) {
  for (cd_dtype_t t : kNumericDtypes) {
    const cd_dtype_t sig[1] = {t};
    register_kernel(registry, "arange", sig, 1, arange_kernel);
  }
  for (cd_dtype_t t : kAllDtypes) {
    const cd_dtype_t sig[1] = {t};
    register_kernel(registry, "full", sig, 1, full_kernel);
  }
}

}  // namespace movement
}  // namespace chipdock_cpu
