// The shared elementwise machinery (see elementwise.h) and register_elementwise.
#include "elementwise.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include "../error.h"
#include "../stream.h"

namespace chipdock_cpu {
namespace elementwise {
namespace {

const char* const kInputNames[] = {"input 0", "input 1", "input 2"};

// What the stream's worker runs: the loop, and the allocations it touches
// (held so that a free while the work is queued is reported, not written).
struct Task {
  Loop loop;
  Plan plan;
  DeviceRange ranges[kMaxOperands];

  void operator()() const {
    for (int32_t k = 0; k < loop.operands; ++k) {
      ranges[k].check_live(k == 0 ? "output 0" : kInputNames[k - 1]);
    }
    run(loop, plan.row, plan.params, plan.grain);
  }
};

// Elements [begin, end) of the loop in C order: a partial first row, whole
// rows, a partial last row.
void run_range(const Loop& loop, RowFn row, const Params& params, int64_t begin, int64_t end) {
  const Dim* dims = loop.dims();
  const int32_t k_end = loop.operands;
  const int32_t last = loop.ndim - 1;
  const int64_t* inner = dims[last].stride;
  char* ptrs[kMaxOperands];
  int64_t index[kMaxDims];
  int64_t rest = begin;
  for (int32_t d = last; d >= 0; --d) {
    index[d] = rest % dims[d].size;
    rest /= dims[d].size;
  }
  for (int32_t k = 0; k < k_end; ++k) {
    ptrs[k] = loop.base[k];
    for (int32_t d = 0; d <= last; ++d) ptrs[k] += index[d] * dims[d].stride[k];
  }
  int64_t left = end - begin;
  for (;;) {
    const int64_t in_row = dims[last].size - index[last];
    const int64_t n = in_row < left ? in_row : left;
    row(ptrs, inner, n, params);
    left -= n;
    if (left == 0) return;
    // The row was finished: back to its start, then one step in the outer dims.
    for (int32_t k = 0; k < k_end; ++k) ptrs[k] -= index[last] * inner[k];
    index[last] = 0;
    for (int32_t d = last - 1; d >= 0; --d) {
      for (int32_t k = 0; k < k_end; ++k) ptrs[k] += dims[d].stride[k];
      if (++index[d] < dims[d].size) break;
      for (int32_t k = 0; k < k_end; ++k) ptrs[k] -= dims[d].stride[k] * dims[d].size;
      index[d] = 0;
    }
  }
}

std::string describe(const cd_dtype_t* dtypes, int32_t num_inputs) {
  std::string text = "(";
  for (int32_t i = 0; i < num_inputs; ++i) text += (i ? ", " : "") + std::string(dtype_name(dtypes[i]));
  return text + ") -> " + dtype_name(dtypes[num_inputs]);
}

}  // namespace

Loop make_loop(const ViewRef* const* ops, int32_t count) {
  const ViewRef& out = *ops[0];
  for (int32_t k = 1; k < count; ++k) {
    if (ops[k]->ndim != out.ndim || !std::equal(out.shape, out.shape + out.ndim, ops[k]->shape)) {
      fail(CD_STATUS_INVALID_ARGUMENT, "%s does not have the output's shape (broadcast "
           "operands must arrive expanded)", kInputNames[k - 1]);
    }
  }
  Loop loop;
  loop.operands = count;
  loop.numel = out.numel;
  for (int32_t k = 0; k < kMaxOperands; ++k) loop.base[k] = k < count ? ops[k]->origin : nullptr;
  loop.reserve(static_cast<size_t>(out.ndim));
  Dim* dims = loop.dims();
  int32_t m = 0;
  for (int32_t d = 0; d < out.ndim; ++d) {
    const int64_t n = out.shape[d];
    if (n == 1) continue;
    if (out.strides[d] == 0) {
      fail(CD_STATUS_INVALID_ARGUMENT, "output has stride 0 in dim %d (a broadcast view "
           "cannot be written)", d);
    }
    Dim dim{n, {0, 0, 0, 0}};
    bool merges = m > 0;
    for (int32_t k = 0; k < count; ++k) {
      dim.stride[k] = ops[k]->strides[d] * static_cast<int64_t>(ops[k]->itemsize);
      merges = merges && dims[m - 1].stride[k] == dim.stride[k] * n;
    }
    if (merges) {  // the outer dim steps exactly over this one in every operand
      dim.size *= dims[m - 1].size;
    } else {
      ++m;
    }
    dims[m - 1] = dim;
  }
  loop.ndim = m;
  return loop;
}

void run(const Loop& loop, RowFn row, const Params& params, int64_t grain) {
  if (loop.ndim == 0) {  // one element
    static const int64_t kNoStrides[kMaxOperands] = {0, 0, 0, 0};
    row(loop.base, kNoStrides, 1, params);
    return;
  }
  parallel_for(loop.numel, grain, [&](int64_t begin, int64_t end) {
    run_range(loop, row, params, begin, end);
  });
}

void enqueue(const cd_kernel_context* ctx, const char* label, int32_t num_inputs, PickFn pick) {
  check_context(ctx, num_inputs, num_inputs, 1, 1);
  std::shared_ptr<Stream> stream = stream_from_handle(ctx->stream, ctx->device);
  ViewRef ops[kMaxOperands];  // borrowed shapes: make_loop copies what the work needs
  ops[0] = resolve_view_ref(*ctx->outputs[0], ctx->device, "output 0");
  for (int32_t i = 0; i < num_inputs; ++i) {
    ops[i + 1] = resolve_view_ref(*ctx->inputs[i], ctx->device, kInputNames[i]);
  }
  cd_dtype_t dtypes[kMaxOperands];
  for (int32_t i = 0; i < num_inputs; ++i) dtypes[i] = ops[i + 1].dtype;
  dtypes[num_inputs] = ops[0].dtype;
  Task task;
  task.plan = pick(ctx, dtypes);
  if (task.plan.row == nullptr) {
    fail(CD_STATUS_INVALID_ARGUMENT, "no kernel for dtypes %s",
         describe(dtypes, num_inputs).c_str());
  }
  if (ops[0].numel == 0) return;  // nothing to write (the core does not launch these)
  const ViewRef* operands[kMaxOperands] = {&ops[0], &ops[1], &ops[2], &ops[3]};
  task.loop = make_loop(operands, num_inputs + 1);
  for (int32_t k = 0; k <= num_inputs; ++k) task.ranges[k] = std::move(ops[k].range);
  // Below one thread's grain the loop takes microseconds: it may run inline.
  const bool small = task.loop.numel <= task.plan.grain;
  stream->enqueue(label, std::move(task), small);
}

}  // namespace elementwise

void register_elementwise(cd_kernel_registry* registry) {
  register_elementwise_unary(registry);
  register_elementwise_binary(registry);
  register_elementwise_compare(registry);
  register_elementwise_cast(registry);
}

}  // namespace chipdock_cpu
