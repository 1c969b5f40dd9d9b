// The "copy" kernel: out = in, same dtype and shape, any strides (zero and
// negative input strides included) and byte offsets. The core uses it to
// make tensors contiguous, so every dtype is registered.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "../cuda_check.h"
#include "../error.h"
#include "../resources.h"
#include "kernels.h"

namespace chipdock_cuda {
namespace {

// Dimensions left after merging; more than this is refused (a view with
// more non-mergeable dimensions than this is vanishingly rare).
constexpr int kMaxDims = 12;

// Passed to the kernel by value: shape and BYTE strides of both sides.
struct Loop {
  int32_t ndim;
  int64_t numel;
  int64_t shape[kMaxDims];
  int64_t in_stride[kMaxDims];
  int64_t out_stride[kMaxDims];
};

// One thread per element (grid-stride): decompose the linear index over
// the shape, innermost last, and move one ITEM-byte word.
template <typename Word>
__global__ void strided_copy(char* out, const char* in, Loop loop) {
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < loop.numel; i += step) {
    int64_t rest = i, in_off = 0, out_off = 0;
    for (int d = loop.ndim - 1; d >= 0; --d) {
      const int64_t k = rest % loop.shape[d];
      rest /= loop.shape[d];
      in_off += k * loop.in_stride[d];
      out_off += k * loop.out_stride[d];
    }
    *reinterpret_cast<Word*>(out + out_off) = *reinterpret_cast<const Word*>(in + in_off);
  }
}

// The same for elements that are not aligned to their size (a byte offset
// that is not a multiple of the itemsize): `item` single-byte moves each.
__global__ void strided_copy_bytes(char* out, const char* in, Loop loop, int item) {
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < loop.numel; i += step) {
    int64_t rest = i, in_off = 0, out_off = 0;
    for (int d = loop.ndim - 1; d >= 0; --d) {
      const int64_t k = rest % loop.shape[d];
      rest /= loop.shape[d];
      in_off += k * loop.in_stride[d];
      out_off += k * loop.out_stride[d];
    }
    for (int b = 0; b < item; ++b) out[out_off + b] = in[in_off + b];
  }
}

int64_t itemsize(cd_dtype_t dtype) {
  switch (dtype) {
    case CD_DTYPE_FLOAT64: case CD_DTYPE_INT64: return 8;
    case CD_DTYPE_FLOAT32: case CD_DTYPE_INT32: return 4;
    case CD_DTYPE_FLOAT16: case CD_DTYPE_BFLOAT16: case CD_DTYPE_INT16: return 2;
    case CD_DTYPE_INT8: case CD_DTYPE_UINT8: case CD_DTYPE_BOOL: return 1;
    default: fail(CD_STATUS_INVALID_ARGUMENT, "unknown dtype %d", dtype);
  }
}

// Checks that the bytes a view touches lie in one allocation of `device`.
void check_view_range(const cd_tensor_view& v, int32_t device, int64_t item, const char* what) {
  int64_t lo = 0, hi = 0;
  for (int32_t d = 0; d < v.ndim; ++d) {
    const int64_t span = v.strides[d] * (v.shape[d] - 1) * item;
    (span < 0 ? lo : hi) += span;
  }
  const char* origin = static_cast<const char*>(v.data) + v.byte_offset;
  check_range(device, origin + lo, static_cast<size_t>(hi - lo + item), what);
}

void check_view(const cd_tensor_view* v, int32_t device, const char* what) {
  require_non_null(v, what);
  if (v->format != CD_FORMAT_STRIDED) fail(CD_STATUS_INVALID_ARGUMENT, "%s has unknown format %d", what, v->format);
  if (v->ndim < 0 || (v->ndim > 0 && (v->shape == nullptr || v->strides == nullptr))) {
    fail(CD_STATUS_INVALID_ARGUMENT, "%s has a bad shape", what);
  }
  if (v->device != device) fail(CD_STATUS_INVALID_ARGUMENT, "%s is on device %d, the call on %d", what, v->device, device);
}

// Drops size-1 dims and merges a dim into its outer neighbour when both
// sides step over it contiguously (a contiguous copy becomes 1-d). Strides
// are in bytes.
Loop make_loop(const int64_t* shape, const int64_t* in_strides, const int64_t* out_strides, int32_t nd) {
  Loop loop{};
  loop.numel = 1;
  for (int32_t i = 0; i < nd; ++i) {
    const int64_t n = shape[i], is = in_strides[i], os = out_strides[i];
    loop.numel *= n;
    if (n == 1) continue;
    const int32_t last = loop.ndim - 1;
    if (last >= 0 && loop.in_stride[last] == is * n && loop.out_stride[last] == os * n) {
      loop.shape[last] *= n;
      loop.in_stride[last] = is;
      loop.out_stride[last] = os;
      continue;
    }
    if (loop.ndim == kMaxDims) fail(CD_STATUS_UNIMPLEMENTED, "more than %d non-mergeable dimensions", kMaxDims);
    loop.shape[loop.ndim] = n;
    loop.in_stride[loop.ndim] = is;
    loop.out_stride[loop.ndim] = os;
    ++loop.ndim;
  }
  return loop;
}

Loop make_loop(const cd_tensor_view& in, const cd_tensor_view& out, int64_t item) {
  // Byte strides; on the stack for the usual ranks (copy is on every
  // launch's path).
  constexpr int32_t kStack = 32;
  int64_t stack[2 * kStack];
  std::vector<int64_t> heap;
  int64_t* is = stack;
  if (in.ndim > kStack) {
    heap.resize(2 * static_cast<size_t>(in.ndim));
    is = heap.data();
  }
  int64_t* os = is + (in.ndim > kStack ? in.ndim : kStack);
  for (int32_t i = 0; i < in.ndim; ++i) {
    is[i] = in.strides[i] * item;
    os[i] = out.strides[i] * item;
  }
  return make_loop(in.shape, is, os, in.ndim);
}

void check_pair(const cd_tensor_view& in, const cd_tensor_view& out) {
  if (in.dtype != out.dtype) fail(CD_STATUS_INVALID_ARGUMENT, "input dtype %d, output dtype %d", in.dtype, out.dtype);
  if (in.ndim != out.ndim) fail(CD_STATUS_INVALID_ARGUMENT, "input ndim %d, output ndim %d", in.ndim, out.ndim);
  for (int32_t i = 0; i < in.ndim; ++i) {
    if (in.shape[i] != out.shape[i] || in.shape[i] < 0) fail(CD_STATUS_INVALID_ARGUMENT, "shapes differ in dim %d", i);
    if (out.strides[i] == 0 && out.shape[i] > 1) {
      fail(CD_STATUS_INVALID_ARGUMENT, "output has stride 0 in dim %d (a broadcast view cannot be written)", i);
    }
  }
}

constexpr int kThreads = 256;

// Enough blocks for one element per thread, capped (the kernels stride).
unsigned grid_for(const Loop& loop) {
  const int64_t blocks = (loop.numel + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 65535 * 16 ? blocks : 65535 * 16);
}

template <typename Word>
void launch(char* out, const char* in, const Loop& loop, cudaStream_t stream) {
  strided_copy<Word><<<grid_for(loop), kThreads, 0, stream>>>(out, in, loop);
}

// True if every element either side starts on a multiple of `item` bytes.
bool aligned(const char* out, const char* in, const Loop& loop, int64_t item) {
  if (reinterpret_cast<uintptr_t>(out) % item != 0 || reinterpret_cast<uintptr_t>(in) % item != 0) return false;
  for (int32_t d = 0; d < loop.ndim; ++d) {
    if (loop.in_stride[d] % item != 0 || loop.out_stride[d] % item != 0) return false;
  }
  return true;
}

// Enqueues the loop: word moves when every element is aligned, else bytes.
void launch_loop(char* dst, const char* src, const Loop& loop, int64_t item, cudaStream_t stream) {
  if (!aligned(dst, src, loop, item)) {
    strided_copy_bytes<<<grid_for(loop), kThreads, 0, stream>>>(dst, src, loop, static_cast<int>(item));
  } else switch (item) {
    case 1: launch<uint8_t>(dst, src, loop, stream); break;
    case 2: launch<uint16_t>(dst, src, loop, stream); break;
    case 4: launch<uint32_t>(dst, src, loop, stream); break;
    default: launch<uint64_t>(dst, src, loop, stream); break;
  }
  check(cudaGetLastError(), "launching strided_copy");
}

void enqueue_copy(const cd_kernel_context* ctx) {
  require_non_null(ctx, "ctx");
  if (ctx->num_inputs != 1 || ctx->num_outputs != 1) {
    fail(CD_STATUS_INVALID_ARGUMENT, "copy takes 1 input and 1 output, got %d and %d", ctx->num_inputs, ctx->num_outputs);
  }
  cd_stream* stream = live_stream(ctx->stream);
  if (stream->device != ctx->device) {
    fail(CD_STATUS_INVALID_ARGUMENT, "the stream is on device %d, the call on %d", stream->device, ctx->device);
  }
  const cd_tensor_view* in = ctx->inputs[0];
  const cd_tensor_view* out = ctx->outputs[0];
  check_view(in, ctx->device, "input 0");
  check_view(out, ctx->device, "output 0");
  check_pair(*in, *out);
  const int64_t item = itemsize(in->dtype);
  Loop loop = make_loop(*in, *out, item);
  if (loop.numel == 0) return;
  use_device(ctx->device);
  check_view_range(*in, ctx->device, item, "input 0");
  check_view_range(*out, ctx->device, item, "output 0");
  const char* src = static_cast<const char*>(in->data) + in->byte_offset;
  char* dst = static_cast<char*>(out->data) + out->byte_offset;
  launch_loop(dst, src, loop, item, stream->stream);
}

cd_error* copy_kernel(const cd_kernel_context* ctx) noexcept {
  return guard("copy", [ctx] { enqueue_copy(ctx); });
}

}  // namespace

void enqueue_strided_copy(char* dst, const int64_t* dst_strides, const char* src, const int64_t* src_strides,
                          const int64_t* shape, int32_t nd, int64_t item, cudaStream_t stream) {
  const Loop loop = make_loop(shape, src_strides, dst_strides, nd);
  if (loop.numel == 0) return;
  launch_loop(dst, src, loop, item, stream);
}

void register_copy(cd_kernel_registry* registry) {
  static const cd_dtype_t kSignatures[][2] = {
      {CD_DTYPE_FLOAT32, CD_DTYPE_FLOAT32}, {CD_DTYPE_FLOAT16, CD_DTYPE_FLOAT16},
      {CD_DTYPE_BFLOAT16, CD_DTYPE_BFLOAT16}, {CD_DTYPE_FLOAT64, CD_DTYPE_FLOAT64},
      {CD_DTYPE_INT8, CD_DTYPE_INT8}, {CD_DTYPE_INT16, CD_DTYPE_INT16},
      {CD_DTYPE_INT32, CD_DTYPE_INT32}, {CD_DTYPE_INT64, CD_DTYPE_INT64},
      {CD_DTYPE_UINT8, CD_DTYPE_UINT8}, {CD_DTYPE_BOOL, CD_DTYPE_BOOL}};
  for (const auto& dtypes : kSignatures) register_kernel(registry, "copy", dtypes, 2, copy_kernel);
}

}  // namespace chipdock_cuda
