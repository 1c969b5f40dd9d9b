// Indexed data movement: gather (numpy.take), embedding, gather_elements
// (numpy.take_along_axis) and scatter (reduction none | add | mul | max |
// min). Indices are int32 or int64 views with any strides; negative indices
// count from the end; a bad one is an OUT_OF_RANGE error of the call (see
// movement.cuh). Semantics: backends/cpu/src/kernels/movement_index.cpp.
#include <cub/device/device_radix_sort.cuh>

#include <climits>
#include <utility>

#include "movement.cuh"

namespace chipdock_cuda {
namespace mv {
namespace {

void check_index_dtype(const Tensor& idx, const char* what) {
  if (idx.dtype != CD_DTYPE_INT32 && idx.dtype != CD_DTYPE_INT64) {
    fail(CD_STATUS_INVALID_ARGUMENT, "%s must be int32 or int64, got %s", what, dtype_name(idx.dtype));
  }
}

template <class I> __device__ __forceinline__ int64_t read_index(const I* idx, int64_t off) {
  return static_cast<int64_t>(idx[off]);
}

// ---------------------------------------------------------------------------------
// gather, embedding, gather_elements: one thread per output element. Every
// output dim steps the data (stride 0 where the index decides) and the
// indices (stride 0 where it does not); the index read picks the position
// along the data's axis.

struct GatherArgs {
  Walk<2> walk;  // output shape; strides: data, indices (elements)
  int64_t numel;
  int64_t axis_stride, size, axis;
};

template <class Word, class I>
__global__ void gather_kernel(Word* out, const Word* data, const I* idx, GatherArgs a, IndexFault* fault) {
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < a.numel; i += step) {
    int64_t off[2];
    walk_offsets(a.walk, i, off);
    const int64_t k = wrap_index(read_index(idx, off[1]), a.size, a.axis, fault);
    if (k >= 0) out[i] = data[off[0] + k * a.axis_stride];
  }
}

void launch_gather(const Call& call, const Tensor& data, const Tensor& idx, const Tensor& out, GatherArgs& a,
                   const char* what) {
  a.numel = out.numel;
  IndexCheck fault(call);
  dispatch_word(data.item, [&](auto word) {
    using W = decltype(word);
    auto* o = reinterpret_cast<W*>(out.origin);
    const auto* d = reinterpret_cast<const W*>(data.origin);
    if (idx.dtype == CD_DTYPE_INT64) {
      gather_kernel<W, int64_t><<<grid_for(a.numel), kThreads, 0, call.stream>>>(
          o, d, reinterpret_cast<const int64_t*>(idx.origin), a, fault.device());
    } else {
      gather_kernel<W, int32_t><<<grid_for(a.numel), kThreads, 0, call.stream>>>(
          o, d, reinterpret_cast<const int32_t*>(idx.origin), a, fault.device());
    }
  });
  check_launch(what);
  fault.check();
}

// out[o..., m..., i...] = data[o..., idx[m...], i...]
void run_take(const Call& call, const Tensor& data, const Tensor& idx, const Tensor& out, size_t axis) {
  const int32_t nd = out.ndim();
  require_dims(nd, "output 0");
  GatherArgs a{};
  a.walk.ndim = nd;
  int32_t d = 0;
  for (size_t k = 0; k < axis; ++k, ++d) {
    a.walk.shape[d] = data.shape[k];
    a.walk.stride[0][d] = data.strides[k];
    a.walk.stride[1][d] = 0;
  }
  for (size_t k = 0; k < idx.shape.size(); ++k, ++d) {
    a.walk.shape[d] = idx.shape[k];
    a.walk.stride[0][d] = 0;
    a.walk.stride[1][d] = idx.strides[k];
  }
  for (size_t k = axis + 1; k < data.shape.size(); ++k, ++d) {
    a.walk.shape[d] = data.shape[k];
    a.walk.stride[0][d] = data.strides[k];
    a.walk.stride[1][d] = 0;
  }
  a.axis_stride = data.strides[axis];
  a.size = data.shape[axis];
  a.axis = static_cast<int64_t>(axis);
  launch_gather(call, data, idx, out, a, "launching gather");
}

void enqueue_gather(const cd_kernel_context* ctx) {
  const Call call = begin_call(ctx, 2, 2, 1, 1);
  const Tensor data = input(call, 0), idx = input(call, 1), out = output(call, 0);
  require_dtype(out, data.dtype, "output 0");
  check_index_dtype(idx, "input 1 (indices)");
  const int32_t nd = data.ndim();
  if (nd == 0) fail(CD_STATUS_INVALID_ARGUMENT, "cannot gather from a 0-d tensor");
  const size_t axis = static_cast<size_t>(axis_attr(call, "axis", nd));
  std::vector<int64_t> expected(data.shape.begin(), data.shape.begin() + static_cast<long>(axis));
  expected.insert(expected.end(), idx.shape.begin(), idx.shape.end());
  expected.insert(expected.end(), data.shape.begin() + static_cast<long>(axis) + 1, data.shape.end());
  require_shape(out, expected, "output 0");
  if (out.numel == 0) return;
  if (data.shape[axis] == 0) fail(CD_STATUS_OUT_OF_RANGE, "cannot gather along axis %zu of size 0", axis);
  run_take(call, data, idx, out, axis);
}

void enqueue_embedding(const cd_kernel_context* ctx) {
  const Call call = begin_call(ctx, 2, 2, 1, 1);
  const Tensor data = input(call, 0), idx = input(call, 1), out = output(call, 0);
  require_dtype(out, data.dtype, "output 0");
  check_index_dtype(idx, "input 1 (indices)");
  if (data.ndim() != 2) {
    fail(CD_STATUS_INVALID_ARGUMENT, "weight must be 2-d (V, D), got %s", shape_string(data.shape).c_str());
  }
  std::vector<int64_t> expected = idx.shape;
  expected.push_back(data.shape[1]);
  require_shape(out, expected, "output 0");
  if (out.numel == 0) return;
  if (data.shape[0] == 0) fail(CD_STATUS_OUT_OF_RANGE, "the weight has no rows");
  run_take(call, data, idx, out, 0);
}

// Same ndim; no larger than data off the axis.
void check_elementwise_shapes(const Tensor& data, const Tensor& idx, int64_t axis, const char* what) {
  bool ok = idx.shape.size() == data.shape.size();
  for (size_t d = 0; ok && d < idx.shape.size(); ++d) {
    ok = static_cast<int64_t>(d) == axis || idx.shape[d] <= data.shape[d];
  }
  if (!ok) {
    fail(CD_STATUS_INVALID_ARGUMENT, "%s shape %s does not fit data %s along axis %lld (same ndim; no larger off "
         "the axis)", what, shape_string(idx.shape).c_str(), shape_string(data.shape).c_str(),
         static_cast<long long>(axis));
  }
}

void enqueue_gather_elements(const cd_kernel_context* ctx) {
  const Call call = begin_call(ctx, 2, 2, 1, 1);
  const Tensor data = input(call, 0), idx = input(call, 1), out = output(call, 0);
  require_dtype(out, data.dtype, "output 0");
  check_index_dtype(idx, "input 1 (indices)");
  const int32_t nd = data.ndim();
  if (nd == 0) fail(CD_STATUS_INVALID_ARGUMENT, "cannot gather from a 0-d tensor");
  const int64_t axis = axis_attr(call, "axis", nd);
  check_elementwise_shapes(data, idx, axis, "indices");
  require_shape(out, idx.shape, "output 0");
  if (out.numel == 0) return;
  require_dims(nd, "input 0");
  GatherArgs a{};
  a.walk.ndim = nd;
  for (int32_t d = 0; d < nd; ++d) {
    a.walk.shape[d] = idx.shape[d];
    a.walk.stride[0][d] = d == axis ? 0 : data.strides[d];
    a.walk.stride[1][d] = idx.strides[d];
  }
  a.axis_stride = data.strides[axis];
  a.size = data.shape[axis];
  a.axis = axis;
  launch_gather(call, data, idx, out, a, "launching gather_elements");
}

// ---------------------------------------------------------------------------------
// scatter: out = data, then out[..., idx[..., j, ...], ...] (op)= updates[..., j, ...].
// One thread per position off the axis applies that line's updates in j
// order (so the last duplicate wins for none, and combinations happen in
// the CPU reference's order); different positions never touch the same
// output element. add and mul on float32 and the 16-bit floats accumulate
// in float64 (a scratch copy of the output) and round once per element.
// Long lines (few positions, many updates each) run in parallel over the
// targets instead: the updates are stably radix-sorted by target (CUB), so
// each target's updates stay in j order, and one thread applies each run
// (runs_kernel): the same operations in the same order, so the same bits.

enum Reduction : int32_t { kNone = 0, kAdd, kMul, kMax, kMin };

struct ScatterArgs {
  Walk<3> walk;  // the indices' shape with the axis at 1; strides: out, indices, updates (elements)
  int64_t positions, J, size, axis;
  int64_t out_axis, idx_axis, upd_axis;
  int32_t reduction;
};

// The combination in the arithmetic type A: bool is or/and, integers wrap,
// floats let NaN win max/min.
template <class A> __device__ __forceinline__ A combine(int32_t r, A cur, A u) {
  if constexpr (std::is_same_v<A, bool>) {
    return (r == kAdd || r == kMax) ? (cur || u) : (r == kMul || r == kMin) ? (cur && u) : u;
  } else if constexpr (std::is_integral_v<A>) {
    switch (r) {
      case kAdd: return static_cast<A>(static_cast<uint64_t>(cur) + static_cast<uint64_t>(u));
      case kMul: return static_cast<A>(static_cast<uint64_t>(cur) * static_cast<uint64_t>(u));
      case kMax: return u > cur ? u : cur;
      case kMin: return u < cur ? u : cur;
      default: return u;
    }
  } else {
    switch (r) {
      case kAdd: return cur + u;
      case kMul: return cur * u;
      case kMax:
        if (cur != cur) return cur;
        return (u != u || u > cur) ? u : cur;
      case kMin:
        if (cur != cur) return cur;
        return (u != u || u < cur) ? u : cur;
      default: return u;
    }
  }
}

// cell (op)= u for a cell of type C (T, or double when accumulating a
// float32/16-bit float in float64) and an update of type T.
template <class C, class T> __device__ __forceinline__ void apply_update(C& cell, T u, int32_t r) {
  if constexpr (std::is_same_v<C, double> && !std::is_same_v<T, double>) {
    cell = combine<double>(r, cell, static_cast<double>(ew::load(u)));
  } else if constexpr (std::is_same_v<T, half> || std::is_same_v<T, bf16>) {
    // none, max, min: the result is one of the operands, kept as bits.
    const float c = ew::load(cell), v = ew::load(u);
    if (r == kNone || (c == c && (v != v || (r == kMax ? v > c : v < c)))) cell = u;
  } else {
    cell = combine<T>(r, cell, u);
  }
}

// One thread per line: its updates in j order.
template <class C, class T, class I>
__global__ void scatter_kernel(C* out, const I* idx, const T* upd, ScatterArgs a, IndexFault* fault) {
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t p = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; p < a.positions; p += step) {
    int64_t off[3];
    walk_offsets(a.walk, p, off);
    for (int64_t j = 0; j < a.J; ++j) {
      const int64_t k = wrap_index(static_cast<int64_t>(idx[off[1] + j * a.idx_axis]), a.size, a.axis, fault);
      if (k < 0) return;
      apply_update<C, T>(out[off[0] + k * a.out_axis], upd[off[2] + j * a.upd_axis], a.reduction);
    }
  }
}

template <class T> __global__ void widen_kernel(double* acc, const T* out, int64_t n) {
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += step) {
    acc[i] = static_cast<double>(ew::load(out[i]));
  }
}

// Writes the accumulators back rounded once; a NaN that was already there
// keeps its bits (an untouched element is unchanged).
template <class T> __global__ void narrow_kernel(T* out, const double* acc, int64_t n) {
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += step) {
    const double v = acc[i];
    const float old = static_cast<float>(ew::load(out[i]));
    if (v != v && old != old) continue;
    out[i] = from_double<T>(v);
  }
}

// The sorted path: lines of at least kLongLine updates.
constexpr int64_t kLongLine = 256;

// keys[t] = the output element update t (= p * J + j) targets, or `bad` for
// a bad index (sorted last, skipped); ids[t] = t.
template <class I>
__global__ void targets_kernel(uint64_t* keys, int64_t* ids, const I* idx, ScatterArgs a, uint64_t bad,
                               IndexFault* fault) {
  const int64_t total = a.positions * a.J;
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < total; t += step) {
    const int64_t p = t / a.J, j = t - p * a.J;
    int64_t off[3];
    walk_offsets(a.walk, p, off);
    const int64_t k = wrap_index(static_cast<int64_t>(idx[off[1] + j * a.idx_axis]), a.size, a.axis, fault);
    keys[t] = k < 0 ? bad : static_cast<uint64_t>(off[0] + k * a.out_axis);
    ids[t] = t;
  }
}

// The thread at the start of each run of equal keys applies the run in
// order; float32/16-bit float add and mul accumulate in float64 and round
// once (Wide).
template <class T, bool Wide>
__global__ void runs_kernel(T* out, const uint64_t* keys, const int64_t* ids, const T* upd, ScatterArgs a,
                            uint64_t bad) {
  const int64_t total = a.positions * a.J;
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total; i += step) {
    const uint64_t key = keys[i];
    if (key == bad || (i > 0 && keys[i - 1] == key)) continue;
    std::conditional_t<Wide, double, T> cell;
    if constexpr (Wide) {
      cell = static_cast<double>(ew::load(out[key]));
    } else {
      cell = out[key];
    }
    for (int64_t r = i; r < total && keys[r] == key; ++r) {
      const int64_t t = ids[r];
      const int64_t p = t / a.J, j = t - p * a.J;
      int64_t off[3];
      walk_offsets(a.walk, p, off);
      apply_update(cell, upd[off[2] + j * a.upd_axis], a.reduction);
    }
    if constexpr (Wide) {
      out[key] = from_double<T>(cell);
    } else {
      out[key] = cell;
    }
  }
}

// Sorts the updates by target and applies the runs.
template <class T, class I, bool Wide>
void launch_runs(const Call& call, const I* ip, const T* up, T* op, int64_t numel, const ScatterArgs& a,
                 IndexFault* fault) {
  const int64_t total = a.positions * a.J;
  const uint64_t bad = static_cast<uint64_t>(numel);  // one past the last element
  int bits = 1;
  while (bits < 64 && (bad >> bits) != 0) ++bits;
  auto* keys = static_cast<uint64_t*>(workspace(call, 2 * static_cast<size_t>(total) * sizeof(uint64_t)));
  auto* ids = static_cast<int64_t*>(workspace(call, 2 * static_cast<size_t>(total) * sizeof(int64_t)));
  const unsigned grid = grid_for(total);
  targets_kernel<I><<<grid, kThreads, 0, call.stream>>>(keys, ids, ip, a, bad, fault);
  check_launch("launching scatter (targets)");
  size_t temp_bytes = 0;
  check(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, keys, keys + total, ids, ids + total,
                                        static_cast<int>(total), 0, bits, call.stream),
        "sizing scatter's radix sort");
  void* temp = workspace(call, temp_bytes);
  check(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, keys, keys + total, ids, ids + total,
                                        static_cast<int>(total), 0, bits, call.stream),
        "cub::DeviceRadixSort::SortPairs (scatter)");
  runs_kernel<T, Wide><<<grid, kThreads, 0, call.stream>>>(op, keys + total, ids + total, up, a, bad);
  check_launch("launching scatter (runs)");
}

template <class T, class I>
void launch_scatter(const Call& call, const Tensor& idx, const Tensor& upd, const Tensor& out, const ScatterArgs& a,
                    IndexFault* fault) {
  const auto* ip = reinterpret_cast<const I*>(idx.origin);
  const auto* up = reinterpret_cast<const T*>(upd.origin);
  T* op = reinterpret_cast<T*>(out.origin);
  constexpr bool kNarrowFloat = std::is_same_v<T, float> || std::is_same_v<T, half> || std::is_same_v<T, bf16>;
  const bool wide = kNarrowFloat && (a.reduction == kAdd || a.reduction == kMul);
  if (a.J >= kLongLine && a.positions * a.J <= INT_MAX) {
    if (wide) {
      launch_runs<T, I, kNarrowFloat>(call, ip, up, op, out.numel, a, fault);
    } else {
      launch_runs<T, I, false>(call, ip, up, op, out.numel, a, fault);
    }
    return;
  }
  const unsigned grid = grid_for(a.positions);
  if constexpr (kNarrowFloat) {
    if (wide) {
      auto* acc = static_cast<double*>(workspace(call, static_cast<size_t>(out.numel) * sizeof(double)));
      widen_kernel<T><<<grid_for(out.numel), kThreads, 0, call.stream>>>(acc, op, out.numel);
      check_launch("launching scatter (widen)");
      scatter_kernel<double, T, I><<<grid, kThreads, 0, call.stream>>>(acc, ip, up, a, fault);
      check_launch("launching scatter");
      narrow_kernel<T><<<grid_for(out.numel), kThreads, 0, call.stream>>>(op, acc, out.numel);
      check_launch("launching scatter (narrow)");
      return;
    }
  }
  scatter_kernel<T, T, I><<<grid, kThreads, 0, call.stream>>>(op, ip, up, a, fault);
  check_launch("launching scatter");
}

void enqueue_scatter(const cd_kernel_context* ctx) {
  const Call call = begin_call(ctx, 3, 3, 1, 1);
  const Tensor data = input(call, 0), idx = input(call, 1), upd = input(call, 2), out = output(call, 0);
  require_dtype(out, data.dtype, "output 0");
  require_dtype(upd, data.dtype, "input 2 (updates)");
  check_index_dtype(idx, "input 1 (indices)");
  const int32_t nd = data.ndim();
  if (nd == 0) fail(CD_STATUS_INVALID_ARGUMENT, "cannot scatter into a 0-d tensor");
  const int64_t axis = axis_attr(call, "axis", nd);
  check_elementwise_shapes(data, idx, axis, "indices");
  require_shape(upd, idx.shape, "input 2 (updates)");
  require_shape(out, data.shape, "output 0");
  ScatterArgs a{};
  const std::string reduction = string_attribute(call.ctx, "reduction");
  if (reduction == "none") {
    a.reduction = kNone;
  } else if (reduction == "add") {
    a.reduction = kAdd;
  } else if (reduction == "mul") {
    a.reduction = kMul;
  } else if (reduction == "max") {
    a.reduction = kMax;
  } else if (reduction == "min") {
    a.reduction = kMin;
  } else {
    fail(CD_STATUS_INVALID_ARGUMENT, "reduction '%s' is not one of none, add, mul, max, min", reduction.c_str());
  }
  if (out.numel == 0) return;
  require_dims(nd, "input 0");
  const std::vector<int64_t> out_bs = contiguous_byte_strides(out.shape, out.item);
  const std::vector<int64_t> data_bs = data.byte_strides();
  enqueue_strided_copy(out.origin, out_bs.data(), data.origin, data_bs.data(), data.shape.data(), nd, out.item,
                       call.stream);
  if (idx.numel == 0) return;
  a.walk.ndim = nd;
  for (int32_t d = 0; d < nd; ++d) {
    a.walk.shape[d] = d == axis ? 1 : idx.shape[d];
    a.walk.stride[0][d] = out_bs[d] / out.item;
    a.walk.stride[1][d] = idx.strides[d];
    a.walk.stride[2][d] = upd.strides[d];
  }
  a.J = idx.shape[axis];
  a.positions = idx.numel / a.J;
  a.size = data.shape[axis];
  a.axis = axis;
  a.out_axis = out_bs[axis] / out.item;
  a.idx_axis = idx.strides[axis];
  a.upd_axis = upd.strides[axis];
  IndexCheck fault(call);
  ew::dispatch<ew::kAllMask>(out.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (idx.dtype == CD_DTYPE_INT64) {
      launch_scatter<T, int64_t>(call, idx, upd, out, a, fault.device());
    } else {
      launch_scatter<T, int32_t>(call, idx, upd, out, a, fault.device());
    }
  });
  fault.check();
}

cd_error* gather_fn(const cd_kernel_context* ctx) noexcept {
  return guard("gather", [ctx] { enqueue_gather(ctx); });
}
cd_error* embedding_fn(const cd_kernel_context* ctx) noexcept {
  return guard("embedding", [ctx] { enqueue_embedding(ctx); });
}
cd_error* gather_elements_fn(const cd_kernel_context* ctx) noexcept {
  return guard("gather_elements", [ctx] { enqueue_gather_elements(ctx); });
}
cd_error* scatter_fn(const cd_kernel_context* ctx) noexcept {
  return guard("scatter", [ctx] { enqueue_scatter(ctx); });
}

}  // namespace

void register_index(cd_kernel_registry* registry) {
  for (cd_dtype_t t : kAllDtypes) {
    for (cd_dtype_t i : kIndexDtypes) {
      const cd_dtype_t sig3[3] = {t, i, t};
      register_kernel(registry, "gather", sig3, 3, gather_fn);
      register_kernel(registry, "gather_elements", sig3, 3, gather_elements_fn);
      register_kernel(registry, "embedding", sig3, 3, embedding_fn);
      const cd_dtype_t sig4[4] = {t, i, t, t};
      register_kernel(registry, "scatter", sig4, 4, scatter_fn);
    }
  }
}

}  // namespace mv
}  // namespace chipdock_cuda
