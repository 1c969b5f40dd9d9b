// The "copy" kernel: out = in, same dtype and shape, any strides (zero and
// negative input strides included) and byte offsets. The core uses it to
// make tensors contiguous.
#include <cstring>
#include <utility>
#include <vector>

#include "../error.h"
#include "../stream.h"
#include "kernels.h"
#include "tensor.h"

namespace chipdock_cpu {
namespace {

// Shape and byte strides of both sides after dropping size-1 dimensions and
// merging dimensions that are contiguous with their inner neighbour on both
// sides; a transpose thus becomes a 2-d loop and a contiguous copy a 1-d one.
struct Loop {
  std::vector<int64_t> shape, in_stride, out_stride;  // strides in bytes
};

Loop make_loop(const HostTensor& in, const HostTensor& out) {
  const int64_t item = static_cast<int64_t>(in.itemsize);
  Loop loop;
  for (size_t i = 0; i < in.shape.size(); ++i) {
    if (in.shape[i] == 1) continue;
    const int64_t n = in.shape[i], is = in.strides[i] * item, os = out.strides[i] * item;
    if (!loop.shape.empty() && loop.in_stride.back() == is * n &&
        loop.out_stride.back() == os * n) {
      loop.shape.back() *= n;  // the outer dim steps exactly over this one
      loop.in_stride.back() = is;
      loop.out_stride.back() = os;
      continue;
    }
    loop.shape.push_back(n);
    loop.in_stride.push_back(is);
    loop.out_stride.push_back(os);
  }
  return loop;
}

// The innermost dimension, as a tight loop of fixed-size element copies.
template <size_t N>
void copy_row(char* out, int64_t os, const char* in, int64_t is, int64_t n) {
  for (int64_t i = 0; i < n; ++i, out += os, in += is) std::memcpy(out, in, N);
}

void copy_row_any(char* out, int64_t os, const char* in, int64_t is, int64_t n,
                  size_t item) {
  const int64_t w = static_cast<int64_t>(item);
  if (os == w && is == w) {
    std::memcpy(out, in, static_cast<size_t>(n) * item);
    return;
  }
  switch (item) {
    case 1: return copy_row<1>(out, os, in, is, n);
    case 2: return copy_row<2>(out, os, in, is, n);
    case 4: return copy_row<4>(out, os, in, is, n);
    default: return copy_row<8>(out, os, in, is, n);
  }
}

// Runs on the stream's worker.
void run_copy(const HostTensor& in, const HostTensor& out, const Loop& loop) {
  in.range.check_live("input 0");
  out.range.check_live("output 0");
  const size_t d = loop.shape.size();
  if (d == 0) {  // a single element
    std::memcpy(out.origin, in.origin, in.itemsize);
    return;
  }
  // Odometer over the outer dimensions; the last one is the tight row loop.
  std::vector<int64_t> index(d, 0);
  const char* src = in.origin;
  char* dst = out.origin;
  for (;;) {
    copy_row_any(dst, loop.out_stride[d - 1], src, loop.in_stride[d - 1], loop.shape[d - 1],
                 in.itemsize);
    // Advance the outer index; done when dimension 0 wraps around.
    size_t k = d - 1;
    for (;;) {
      if (k == 0) return;
      --k;
      src += loop.in_stride[k];
      dst += loop.out_stride[k];
      if (++index[k] < loop.shape[k]) break;
      src -= loop.in_stride[k] * loop.shape[k];
      dst -= loop.out_stride[k] * loop.shape[k];
      index[k] = 0;
    }
  }
}

void check_pair(const HostTensor& in, const HostTensor& out) {
  if (in.dtype != out.dtype) {
    fail(CD_STATUS_INVALID_ARGUMENT, "input is %s but output is %s", dtype_name(in.dtype),
         dtype_name(out.dtype));
  }
  if (in.shape != out.shape) {
    fail(CD_STATUS_INVALID_ARGUMENT, "input and output shapes differ (ndim %zu vs %zu)",
         in.shape.size(), out.shape.size());
  }
  for (size_t i = 0; i < out.shape.size(); ++i) {
    if (out.strides[i] == 0 && out.shape[i] > 1) {
      fail(CD_STATUS_INVALID_ARGUMENT, "output has stride 0 in dim %zu (a broadcast view "
           "cannot be written)", i);
    }
  }
}

void enqueue_copy(const cd_kernel_context* ctx) {
  check_context(ctx, 1, 1, 1, 1);
  std::shared_ptr<Stream> stream = stream_from_handle(ctx->stream, ctx->device);
  HostTensor in = resolve_view(*ctx->inputs[0], ctx->device, "input 0");
  HostTensor out = resolve_view(*ctx->outputs[0], ctx->device, "output 0");
  check_pair(in, out);
  if (out.numel == 0) return;
  Loop loop = make_loop(in, out);
  // A few KiB copy in well under a microsecond's work: may run inline.
  const bool small = static_cast<size_t>(out.numel) * out.itemsize <= 64 * 1024;
  stream->enqueue("copy", [in = std::move(in), out = std::move(out), loop = std::move(loop)] {
    run_copy(in, out, loop);
  }, small);
}

cd_error* copy_kernel(const cd_kernel_context* ctx) noexcept {
  return guard("copy", [ctx] { enqueue_copy(ctx); });
}

}  // namespace

void register_copy(cd_kernel_registry* registry) {
  static const cd_dtype_t kSignatures[][2] = {
      {CD_DTYPE_FLOAT32, CD_DTYPE_FLOAT32}, {CD_DTYPE_FLOAT16, CD_DTYPE_FLOAT16},
      {CD_DTYPE_BFLOAT16, CD_DTYPE_BFLOAT16}, {CD_DTYPE_FLOAT64, CD_DTYPE_FLOAT64},
      {CD_DTYPE_INT8, CD_DTYPE_INT8}, {CD_DTYPE_INT16, CD_DTYPE_INT16},
      {CD_DTYPE_INT32, CD_DTYPE_INT32}, {CD_DTYPE_INT64, CD_DTYPE_INT64},
      {CD_DTYPE_UINT8, CD_DTYPE_UINT8}, {CD_DTYPE_BOOL, CD_DTYPE_BOOL}};
  for (const auto& dtypes : kSignatures) {
    register_kernel(registry, "copy", dtypes, 2, copy_kernel);
  }
}

}  // namespace chipdock_cpu
