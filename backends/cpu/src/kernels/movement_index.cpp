// Indexed data movement: gather (numpy.take), gather_elements
// (numpy.take_along_axis), scatter (with reduction none|add|mul|max|min) and
// embedding. Indices are int32 or int64 views with any strides; negative
// indices count from the end. An index out of range is an error at the call
// when the stream is idle (see check_indices_at_call); otherwise it is found
// while the work runs: it throws Error(OUT_OF_RANGE) on the stream's worker,
// which the next synchronization of the stream reports (the output is then
// unspecified). Either way the message names the op, `indices` and the value.
#include <algorithm>
#include <type_traits>
#include <utility>
#include <vector>

#include "movement_common.h"

namespace chipdock_cpu {
namespace movement {
namespace {

// All indices of `idx` in C order, normalized into [0, size) and multiplied
// by `scale`. Throws OUT_OF_RANGE for the first bad one.
std::vector<int64_t> load_indices(const HostTensor& idx, int64_t size, int64_t axis,
                                  int64_t scale) {
  std::vector<int64_t> out(static_cast<size_t>(idx.numel));
  const bool is64 = idx.itemsize == 8;
  const size_t nd = idx.shape.size();
  const int64_t last = nd == 0 ? 1 : idx.shape[nd - 1];
  const int64_t last_stride =
      nd == 0 ? 0 : idx.strides[nd - 1] * static_cast<int64_t>(idx.itemsize);
  const std::vector<int64_t> bs = byte_strides(idx);
  const int64_t* strides[1] = {bs.data()};
  const int64_t rows = idx.numel / last;
  parallel_guarded(rows, idx.numel > 65536 ? 0 : rows, [&](int64_t r0, int64_t r1) {
    walk_rows<1>(nd == 0 ? 0 : nd - 1, idx.shape.data(), strides, r0, r1,
                 [&](int64_t row, const int64_t* off) {
                   const char* p = idx.origin + off[0];
                   int64_t* dst = out.data() + row * last;
                   for (int64_t j = 0; j < last; ++j, p += last_stride) {
                     dst[j] = wrap_index(read_index(p, is64), size, axis) * scale;
                   }
                 });
  });
  return out;
}

// ---------------------------------------------------------------------------------
// gather / embedding: out[o, m, i] = data[o, idx[m], i].

struct GatherPlan {
  HostTensor data, idx, out;
  int64_t axis = 0;
};

template <class U>
void gather_scalars(const GatherPlan& p, const std::vector<int64_t>& outer_off,
                    const std::vector<int64_t>& idx, int64_t u0, int64_t u1) {
  // inner == 1: one element per (o, m); offsets in bytes.
  const int64_t m_count = static_cast<int64_t>(idx.size());
  U* out = reinterpret_cast<U*>(p.out.origin);
  const char* data = p.data.origin;
  int64_t o = u0 / m_count, m = u0 % m_count;
  for (int64_t u = u0; u < u1;) {
    const char* base = data + outer_off[static_cast<size_t>(o)];
    const int64_t stop = std::min(m_count, m + (u1 - u));
    for (int64_t k = m; k < stop; ++k, ++u) {
      U v;
      std::memcpy(&v, base + idx[static_cast<size_t>(k)], sizeof(U));
      out[u] = v;
    }
    ++o;
    m = 0;
  }
}

void run_gather(const GatherPlan& p) {
  check_live(p.data, "input 0");
  check_live(p.idx, "input 1");
  check_live(p.out, "output 0");
  const HostTensor& data = p.data;
  const size_t axis = static_cast<size_t>(p.axis);
  const int64_t item = static_cast<int64_t>(data.itemsize);
  const std::vector<int64_t> ds = byte_strides(data);
  const std::vector<int64_t> idx = load_indices(p.idx, data.shape[axis], p.axis, ds[axis]);
  const long a = static_cast<long>(axis);
  const std::vector<int64_t> outer_off =
      offset_table(std::vector<int64_t>(data.shape.begin(), data.shape.begin() + a),
                   std::vector<int64_t>(ds.begin(), ds.begin() + a));
  const int64_t outer = static_cast<int64_t>(outer_off.size());
  const int64_t m_count = static_cast<int64_t>(idx.size());
  const std::vector<int64_t> inner_shape(data.shape.begin() + static_cast<long>(axis) + 1,
                                         data.shape.end());
  const std::vector<int64_t> inner_ds(ds.begin() + static_cast<long>(axis) + 1, ds.end());
  const int64_t inner = product(inner_shape, 0, inner_shape.size());
  const int64_t units = outer * m_count;
  const int64_t grain = p.out.numel * item > kParallelBytes ? 0 : units;
  if (inner == 1) {
    parallel_for(units, grain, [&](int64_t u0, int64_t u1) {
      switch (item) {
        case 1: return gather_scalars<uint8_t>(p, outer_off, idx, u0, u1);
        case 2: return gather_scalars<uint16_t>(p, outer_off, idx, u0, u1);
        case 4: return gather_scalars<uint32_t>(p, outer_off, idx, u0, u1);
        default: return gather_scalars<uint64_t>(p, outer_off, idx, u0, u1);
      }
    });
    return;
  }
  bool inner_contiguous = true;
  {
    int64_t expected = item;
    for (size_t d = inner_shape.size(); d-- > 0;) {
      if (inner_shape[d] != 1 && inner_ds[d] != expected) inner_contiguous = false;
      expected *= inner_shape[d];
    }
  }
  const int64_t block = inner * item;
  const std::vector<int64_t> inner_out = contiguous_byte_strides(inner_shape, data.itemsize);
  parallel_for(units, grain, [&](int64_t u0, int64_t u1) {
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t o = u / m_count, m = u % m_count;
      const char* src =
          data.origin + outer_off[static_cast<size_t>(o)] + idx[static_cast<size_t>(m)];
      char* dst = p.out.origin + u * block;
      if (inner_contiguous) {
        std::memcpy(dst, src, static_cast<size_t>(block));
      } else {
        copy_strided(dst, inner_out.data(), src, inner_ds.data(), inner_shape.data(),
                     inner_shape.size(), data.itemsize, false);
      }
    }
  });
}

void check_index_dtype(const HostTensor& idx, const char* what) {
  if (idx.dtype != CD_DTYPE_INT32 && idx.dtype != CD_DTYPE_INT64) {
    fail(CD_STATUS_INVALID_ARGUMENT, "%s must be int32 or int64, got %s", what,
         dtype_name(idx.dtype));
  }
}

// The indices are host memory. When the stream is idle, everything ordered
// before this launch has finished, so no queued work can still write them:
// they are checked now and a bad one is an error at the call (as PyTorch
// raises it on CPU). On a busy stream they may not be written yet; the
// kernel checks them when it runs (and always does: the check here is a
// courtesy, not the bounds check the kernel relies on).
void check_indices_at_call(Stream& stream, const HostTensor& idx, int64_t size, int64_t axis) {
  if (idx.numel == 0 || !stream.idle()) return;
  check_live(idx, "input 1");
  load_indices(idx, size, axis, 1);
}

void enqueue_gather(const cd_kernel_context* ctx) {
  check_context(ctx, 2, 2, 1, 1);
  std::shared_ptr<Stream> stream = kernel_stream(ctx);
  GatherPlan p;
  p.data = input_tensor(ctx, 0);
  p.idx = input_tensor(ctx, 1);
  p.out = output_tensor(ctx, 0);
  require_dtype(p.out, p.data.dtype, "output 0");
  check_index_dtype(p.idx, "input 1 (indices)");
  const size_t nd = p.data.shape.size();
  if (nd == 0) fail(CD_STATUS_INVALID_ARGUMENT, "cannot gather from a 0-d tensor");
  p.axis = axis_attr(ctx, "axis", nd);
  const size_t axis = static_cast<size_t>(p.axis);
  std::vector<int64_t> expected(p.data.shape.begin(),
                                p.data.shape.begin() + static_cast<long>(axis));
  expected.insert(expected.end(), p.idx.shape.begin(), p.idx.shape.end());
  expected.insert(expected.end(), p.data.shape.begin() + static_cast<long>(axis) + 1,
                  p.data.shape.end());
  require_shape(p.out, expected, "output 0");
  if (p.out.numel == 0) return;
  if (p.data.shape[axis] == 0) {
    fail(CD_STATUS_OUT_OF_RANGE, "cannot gather along axis %zu of size 0", axis);
  }
  check_indices_at_call(*stream, p.idx, p.data.shape[axis], p.axis);
  stream->enqueue("gather", [p = std::move(p)] { run_gather(p); });
}

cd_error* gather_kernel(const cd_kernel_context* ctx) noexcept {
  return guard("gather", [ctx] { enqueue_gather(ctx); });
}

void enqueue_embedding(const cd_kernel_context* ctx) {
  check_context(ctx, 2, 2, 1, 1);
  std::shared_ptr<Stream> stream = kernel_stream(ctx);
  GatherPlan p;
  p.data = input_tensor(ctx, 0);
  p.idx = input_tensor(ctx, 1);
  p.out = output_tensor(ctx, 0);
  require_dtype(p.out, p.data.dtype, "output 0");
  check_index_dtype(p.idx, "input 1 (indices)");
  if (p.data.shape.size() != 2) {
    fail(CD_STATUS_INVALID_ARGUMENT, "weight must be 2-d (V, D), got %s",
         shape_string(p.data.shape).c_str());
  }
  std::vector<int64_t> expected = p.idx.shape;
  expected.push_back(p.data.shape[1]);
  require_shape(p.out, expected, "output 0");
  if (p.out.numel == 0) return;
  if (p.data.shape[0] == 0) fail(CD_STATUS_OUT_OF_RANGE, "the weight has no rows");
  p.axis = 0;
  check_indices_at_call(*stream, p.idx, p.data.shape[0], 0);
  stream->enqueue("embedding", [p = std::move(p)] { run_gather(p); });
}

cd_error* embedding_kernel(const cd_kernel_context* ctx) noexcept {
  return guard("embedding", [ctx] { enqueue_embedding(ctx); });
}

// ---------------------------------------------------------------------------------
// gather_elements: out[..., j, ...] = data[..., idx[..., j, ...], ...] along
// `axis`; out has the shape of idx, which may be smaller than data in the
// other dims (PyTorch's gather).

struct GatherElementsPlan {
  HostTensor data, idx, out;
  int64_t axis = 0;
};

template <class U, class I>
void gather_elements_rows(const GatherElementsPlan& p, int64_t r0, int64_t r1) {
  const size_t nd = p.idx.shape.size();
  const size_t axis = static_cast<size_t>(p.axis);
  const int64_t size = p.data.shape[axis];
  const int64_t last = p.idx.shape[nd - 1];
  std::vector<int64_t> dstr = p.data.strides;  // elements
  const int64_t s_axis = dstr[axis];
  dstr[axis] = 0;  // the axis coordinate comes from the index
  const int64_t s_last = dstr[nd - 1];
  const int64_t i_last = p.idx.strides[nd - 1];
  const int64_t* strides[2] = {dstr.data(), p.idx.strides.data()};
  const U* data = reinterpret_cast<const U*>(p.data.origin);
  const I* idx = reinterpret_cast<const I*>(p.idx.origin);
  U* out = reinterpret_cast<U*>(p.out.origin);
  walk_rows<2>(nd - 1, p.idx.shape.data(), strides, r0, r1,
               [&](int64_t row, const int64_t* off) {
                 const U* base = data + off[0];
                 const I* ix = idx + off[1];
                 U* dst = out + row * last;
                 for (int64_t j = 0; j < last; ++j) {
                   const int64_t raw = static_cast<int64_t>(ix[j * i_last]);
                   const int64_t k = raw < 0 ? raw + size : raw;
                   if (k < 0 || k >= size) index_error(raw, size, p.axis);
                   dst[j] = base[j * s_last + k * s_axis];
                 }
               });
}

void run_gather_elements(const GatherElementsPlan& p) {
  check_live(p.data, "input 0");
  check_live(p.idx, "input 1");
  check_live(p.out, "output 0");
  const size_t nd = p.idx.shape.size();
  const int64_t rows = p.idx.numel / p.idx.shape[nd - 1];
  const int64_t grain = p.out.numel > 32768 ? 0 : rows;
  const bool is64 = p.idx.dtype == CD_DTYPE_INT64;
  parallel_guarded(rows, grain, [&](int64_t r0, int64_t r1) {
    auto go = [&](auto utag) {
      using U = decltype(utag);
      if (is64) {
        gather_elements_rows<U, int64_t>(p, r0, r1);
      } else {
        gather_elements_rows<U, int32_t>(p, r0, r1);
      }
    };
    switch (p.data.itemsize) {
      case 1: return go(uint8_t{});
      case 2: return go(uint16_t{});
      case 4: return go(uint32_t{});
      default: return go(uint64_t{});
    }
  });
}

// Checks idx.shape against data.shape: same ndim, idx.shape[d] <= data.shape[d]
// off the axis.
void check_elementwise_shapes(const HostTensor& data, const HostTensor& idx, int64_t axis,
                              const char* what) {
  bool ok = idx.shape.size() == data.shape.size();
  for (size_t d = 0; ok && d < idx.shape.size(); ++d) {
    ok = static_cast<int64_t>(d) == axis || idx.shape[d] <= data.shape[d];
  }
  if (!ok) {
    fail(CD_STATUS_INVALID_ARGUMENT, "%s shape %s does not fit data %s along axis %lld (same "
         "ndim; no larger off the axis)", what, shape_string(idx.shape).c_str(),
         shape_string(data.shape).c_str(), static_cast<long long>(axis));
  }
}

void enqueue_gather_elements(const cd_kernel_context* ctx) {
  check_context(ctx, 2, 2, 1, 1);
  std::shared_ptr<Stream> stream = kernel_stream(ctx);
  GatherElementsPlan p;
  p.data = input_tensor(ctx, 0);
  p.idx = input_tensor(ctx, 1);
  p.out = output_tensor(ctx, 0);
  require_dtype(p.out, p.data.dtype, "output 0");
  check_index_dtype(p.idx, "input 1 (indices)");
  const size_t nd = p.data.shape.size();
  if (nd == 0) fail(CD_STATUS_INVALID_ARGUMENT, "cannot gather from a 0-d tensor");
  p.axis = axis_attr(ctx, "axis", nd);
  check_elementwise_shapes(p.data, p.idx, p.axis, "indices");
  require_shape(p.out, p.idx.shape, "output 0");
  if (p.out.numel == 0) return;
  check_indices_at_call(*stream, p.idx, p.data.shape[static_cast<size_t>(p.axis)], p.axis);
  stream->enqueue("gather_elements", [p = std::move(p)] { run_gather_elements(p); });
}

cd_error* gather_elements_kernel(const cd_kernel_context* ctx) noexcept {
  return guard("gather_elements", [ctx] { enqueue_gather_elements(ctx); });
}

// ---------------------------------------------------------------------------------
// scatter: out = data; out[..., idx[..., j, ...], ...] (op)= updates[..., j, ...].
// Updates are applied in C order of the indices, so with duplicates the last
// one wins (none) and the combinations happen in that order. Work is split
// only across positions off the axis, which never touch the same output.
// add and mul on float32 and the 16-bit floats accumulate in double and round
// once per output element.

enum class Reduction { kNone, kAdd, kMul, kMax, kMin };

struct ScatterPlan {
  HostTensor data, idx, upd, out;
  int64_t axis = 0;
  Reduction reduction = Reduction::kNone;
};

template <class A>
A combine(Reduction r, A cur, A u) {
  if constexpr (std::is_same_v<A, bool>) {
    switch (r) {
      case Reduction::kAdd: case Reduction::kMax: return cur || u;
      case Reduction::kMul: case Reduction::kMin: return cur && u;
      default: return u;
    }
  } else if constexpr (std::is_integral_v<A>) {
    switch (r) {
      case Reduction::kAdd:
        return static_cast<A>(static_cast<uint64_t>(cur) + static_cast<uint64_t>(u));
      case Reduction::kMul:
        return static_cast<A>(static_cast<uint64_t>(cur) * static_cast<uint64_t>(u));
      case Reduction::kMax: return u > cur ? u : cur;
      case Reduction::kMin: return u < cur ? u : cur;
      default: return u;
    }
  } else {
    switch (r) {
      case Reduction::kAdd: return cur + u;
      case Reduction::kMul: return cur * u;
      case Reduction::kMax:  // NaN propagates
        if (std::isnan(cur)) return cur;
        return (std::isnan(u) || u > cur) ? u : cur;
      case Reduction::kMin:
        if (std::isnan(cur)) return cur;
        return (std::isnan(u) || u < cur) ? u : cur;
      default: return u;
    }
  }
}

struct ScatterLayout {
  int64_t outer = 1, J = 1, inner = 1, size = 1;  // size: data.shape[axis]
  std::vector<int64_t> outer_out, outer_idx, outer_upd;  // element offsets
  std::vector<int64_t> inner_out, inner_idx, inner_upd;
  std::vector<int64_t> outer_data, inner_data;           // only when `covers`
  int64_t out_axis = 0, idx_axis = 0, upd_axis = 0, data_axis = 0;  // strides along axis
  bool covers = false;  // idx spans data in every dim off the axis
};

ScatterLayout scatter_layout(const ScatterPlan& p) {
  ScatterLayout L;
  const size_t nd = p.idx.shape.size();
  const size_t axis = static_cast<size_t>(p.axis);
  std::vector<int64_t> out_es(nd);
  int64_t stride = 1;
  for (size_t d = nd; d-- > 0;) {
    out_es[d] = stride;
    stride *= p.out.shape[d];
  }
  auto head = [&](const std::vector<int64_t>& v) {
    return std::vector<int64_t>(v.begin(), v.begin() + static_cast<long>(axis));
  };
  auto tail = [&](const std::vector<int64_t>& v) {
    return std::vector<int64_t>(v.begin() + static_cast<long>(axis) + 1, v.end());
  };
  const std::vector<int64_t>& s = p.idx.shape;
  L.outer_out = offset_table(head(s), head(out_es));
  L.outer_idx = offset_table(head(s), head(p.idx.strides));
  L.outer_upd = offset_table(head(s), head(p.upd.strides));
  L.inner_out = offset_table(tail(s), tail(out_es));
  L.inner_idx = offset_table(tail(s), tail(p.idx.strides));
  L.inner_upd = offset_table(tail(s), tail(p.upd.strides));
  L.outer = static_cast<int64_t>(L.outer_out.size());
  L.inner = static_cast<int64_t>(L.inner_out.size());
  L.J = s[axis];
  L.size = p.data.shape[axis];
  L.out_axis = out_es[axis];
  L.idx_axis = p.idx.strides[axis];
  L.upd_axis = p.upd.strides[axis];
  L.data_axis = p.data.strides[axis];
  L.covers = true;
  for (size_t d = 0; d < nd; ++d) {
    if (d != axis && s[d] != p.data.shape[d]) L.covers = false;
  }
  if (L.covers) {
    L.outer_data = offset_table(head(s), head(p.data.strides));
    L.inner_data = offset_table(tail(s), tail(p.data.strides));
  }
  return L;
}

constexpr int64_t kInnerBlock = 256;

// Applies the updates of one (outer, inner block) unit directly into out.
template <class T, class I>
void scatter_unit_inplace(const ScatterPlan& p, const ScatterLayout& L, int64_t o, int64_t i0,
                          int64_t i1) {
  const T* upd = reinterpret_cast<const T*>(p.upd.origin);
  const I* idx = reinterpret_cast<const I*>(p.idx.origin);
  T* out = reinterpret_cast<T*>(p.out.origin);
  const size_t ou = static_cast<size_t>(o);
  if (L.inner == 1) {  // the axis is innermost: plain lines
    const I* ix = idx + L.outer_idx[ou];
    const T* up = upd + L.outer_upd[ou];
    T* dst = out + L.outer_out[ou];
    for (int64_t j = 0; j < L.J; ++j) {
      const int64_t k = wrap_index(static_cast<int64_t>(ix[j * L.idx_axis]), L.size, p.axis);
      T& cell = dst[k * L.out_axis];
      const T u = up[j * L.upd_axis];
      cell = p.reduction == Reduction::kNone
                 ? u
                 : fast_store<T>(combine(p.reduction, fast_load(cell), fast_load(u)));
    }
    return;
  }
  for (int64_t j = 0; j < L.J; ++j) {
    const I* ix = idx + L.outer_idx[ou] + j * L.idx_axis;
    const T* up = upd + L.outer_upd[ou] + j * L.upd_axis;
    T* dst = out + L.outer_out[ou];
    for (int64_t i = i0; i < i1; ++i) {
      const size_t iu = static_cast<size_t>(i);
      const int64_t raw = static_cast<int64_t>(ix[L.inner_idx[iu]]);
      const int64_t k = wrap_index(raw, L.size, p.axis);
      T& cell = dst[k * L.out_axis + L.inner_out[iu]];
      const T u = up[L.inner_upd[iu]];
      if (p.reduction == Reduction::kNone) {
        cell = u;
      } else {
        cell = fast_store<T>(combine(p.reduction, fast_load(cell), fast_load(u)));
      }
    }
  }
}

// The same, accumulating in double over the unit's output block (add, mul).
// The block starts from data when idx covers it (out was not prefilled),
// else from out (a copy of data).
template <class T, class I>
void scatter_unit_double(const ScatterPlan& p, const ScatterLayout& L, int64_t o, int64_t i0,
                         int64_t i1, std::vector<double>& acc) {
  const T* upd = reinterpret_cast<const T*>(p.upd.origin);
  const I* idx = reinterpret_cast<const I*>(p.idx.origin);
  T* out = reinterpret_cast<T*>(p.out.origin) + L.outer_out[static_cast<size_t>(o)];
  const int64_t w = i1 - i0;
  acc.resize(static_cast<size_t>(L.size * w));
  const bool add = p.reduction == Reduction::kAdd;
  if (L.inner == 1) {  // the axis is innermost: plain lines
    const size_t ou = static_cast<size_t>(o);
    if (L.covers) {
      const T* data = reinterpret_cast<const T*>(p.data.origin) + L.outer_data[ou];
      for (int64_t k = 0; k < L.size; ++k) {
        acc[static_cast<size_t>(k)] = static_cast<double>(fast_load(data[k * L.data_axis]));
      }
    } else {
      for (int64_t k = 0; k < L.size; ++k) {
        acc[static_cast<size_t>(k)] = static_cast<double>(fast_load(out[k * L.out_axis]));
      }
    }
    const I* ix = idx + L.outer_idx[ou];
    const T* up = upd + L.outer_upd[ou];
    for (int64_t j = 0; j < L.J; ++j) {
      const int64_t k = wrap_index(static_cast<int64_t>(ix[j * L.idx_axis]), L.size, p.axis);
      const double u = static_cast<double>(fast_load(up[j * L.upd_axis]));
      double& a = acc[static_cast<size_t>(k)];
      a = add ? a + u : a * u;
    }
    for (int64_t k = 0; k < L.size; ++k) {
      out[k * L.out_axis] = from_double<T>(acc[static_cast<size_t>(k)]);
    }
    return;
  }
  if (L.covers) {
    const T* data =
        reinterpret_cast<const T*>(p.data.origin) + L.outer_data[static_cast<size_t>(o)];
    for (int64_t k = 0; k < L.size; ++k) {
      for (int64_t i = i0; i < i1; ++i) {
        acc[static_cast<size_t>(k * w + i - i0)] = static_cast<double>(
            fast_load(data[k * L.data_axis + L.inner_data[static_cast<size_t>(i)]]));
      }
    }
  } else {
    for (int64_t k = 0; k < L.size; ++k) {
      for (int64_t i = i0; i < i1; ++i) {
        const T v = out[k * L.out_axis + L.inner_out[static_cast<size_t>(i)]];
        acc[static_cast<size_t>(k * w + i - i0)] = static_cast<double>(fast_load(v));
      }
    }
  }
  const size_t ou = static_cast<size_t>(o);
  for (int64_t j = 0; j < L.J; ++j) {
    const I* ix = idx + L.outer_idx[ou] + j * L.idx_axis;
    const T* up = upd + L.outer_upd[ou] + j * L.upd_axis;
    for (int64_t i = i0; i < i1; ++i) {
      const size_t iu = static_cast<size_t>(i);
      const int64_t k = wrap_index(static_cast<int64_t>(ix[L.inner_idx[iu]]), L.size, p.axis);
      double& a = acc[static_cast<size_t>(k * w + i - i0)];
      const double u = static_cast<double>(fast_load(up[L.inner_upd[iu]]));
      a = add ? a + u : a * u;
    }
  }
  for (int64_t k = 0; k < L.size; ++k) {
    for (int64_t i = i0; i < i1; ++i) {
      out[k * L.out_axis + L.inner_out[static_cast<size_t>(i)]] =
          from_double<T>(acc[static_cast<size_t>(k * w + i - i0)]);
    }
  }
}

void run_scatter(const ScatterPlan& p) {
  check_live(p.data, "input 0");
  check_live(p.idx, "input 1");
  check_live(p.upd, "input 2");
  check_live(p.out, "output 0");
  const size_t nd = p.out.shape.size();
  const size_t item = p.out.itemsize;
  const bool wide = (p.out.dtype == CD_DTYPE_FLOAT32 || p.out.dtype == CD_DTYPE_FLOAT16 ||
                     p.out.dtype == CD_DTYPE_BFLOAT16) &&
                    (p.reduction == Reduction::kAdd || p.reduction == Reduction::kMul);
  const ScatterLayout L = scatter_layout(p);
  if (!(wide && L.covers && p.idx.numel != 0)) {  // out = data
    const std::vector<int64_t> out_bs = contiguous_byte_strides(p.out.shape, item);
    const std::vector<int64_t> in_bs = byte_strides(p.data);
    copy_strided(p.out.origin, out_bs.data(), p.data.origin, in_bs.data(), p.data.shape.data(),
                 nd, item);
  }
  if (p.idx.numel == 0) return;
  int64_t block = kInnerBlock;
  if (wide) {  // the double accumulator holds size x block values
    const int64_t fit = 32768 / std::max<int64_t>(L.size, 1);
    block = std::max<int64_t>(1, std::min<int64_t>(kInnerBlock, fit));
  }
  const int64_t blocks = (L.inner + block - 1) / block;
  const int64_t units = L.outer * blocks;
  const int64_t work = p.idx.numel + (wide ? L.outer * L.inner * L.size : 0);
  const bool is64 = p.idx.dtype == CD_DTYPE_INT64;
  dispatch_dtype(p.out.dtype, [&](auto tag) {
    using T = decltype(tag);
    parallel_guarded(units, work > 32768 ? 0 : units, [&](int64_t u0, int64_t u1) {
      std::vector<double> acc;
      for (int64_t u = u0; u < u1; ++u) {
        const int64_t o = u / blocks, b = u % blocks;
        const int64_t i0 = b * block, i1 = std::min(L.inner, i0 + block);
        if constexpr (std::is_same_v<T, float> || std::is_same_v<T, float16_t> ||
                      std::is_same_v<T, bfloat16_t>) {
          if (wide) {
            if (is64) {
              scatter_unit_double<T, int64_t>(p, L, o, i0, i1, acc);
            } else {
              scatter_unit_double<T, int32_t>(p, L, o, i0, i1, acc);
            }
            continue;
          }
        }
        if (is64) {
          scatter_unit_inplace<T, int64_t>(p, L, o, i0, i1);
        } else {
          scatter_unit_inplace<T, int32_t>(p, L, o, i0, i1);
        }
      }
    });
  });
}

void enqueue_scatter(const cd_kernel_context* ctx) {
  check_context(ctx, 3, 3, 1, 1);
  std::shared_ptr<Stream> stream = kernel_stream(ctx);
  ScatterPlan p;
  p.data = input_tensor(ctx, 0);
  p.idx = input_tensor(ctx, 1);
  p.upd = input_tensor(ctx, 2);
  p.out = output_tensor(ctx, 0);
  require_dtype(p.out, p.data.dtype, "output 0");
  require_dtype(p.upd, p.data.dtype, "input 2 (updates)");
  check_index_dtype(p.idx, "input 1 (indices)");
  const size_t nd = p.data.shape.size();
  if (nd == 0) fail(CD_STATUS_INVALID_ARGUMENT, "cannot scatter into a 0-d tensor");
  p.axis = axis_attr(ctx, "axis", nd);
  check_elementwise_shapes(p.data, p.idx, p.axis, "indices");
  require_shape(p.upd, p.idx.shape, "input 2 (updates)");
  require_shape(p.out, p.data.shape, "output 0");
  const std::string reduction = string_attr(ctx, "reduction");
  if (reduction == "none") {
    p.reduction = Reduction::kNone;
  } else if (reduction == "add") {
    p.reduction = Reduction::kAdd;
  } else if (reduction == "mul") {
    p.reduction = Reduction::kMul;
  } else if (reduction == "max") {
    p.reduction = Reduction::kMax;
  } else if (reduction == "min") {
    p.reduction = Reduction::kMin;
  } else {
    fail(CD_STATUS_INVALID_ARGUMENT, "reduction '%s' is not one of none, add, mul, max, min",
         reduction.c_str());
  }
  if (p.out.numel == 0) return;
  check_indices_at_call(*stream, p.idx, p.data.shape[static_cast<size_t>(p.axis)], p.axis);
  stream->enqueue("scatter", [p = std::move(p)] { run_scatter(p); });
}

cd_error* scatter_kernel(const cd_kernel_context* ctx) noexcept {
  return guard("scatter", [ctx] { enqueue_scatter(ctx); });
}

}  // namespace

void register_index(cd_kernel_registry* registry) {
  for (cd_dtype_t t : kAllDtypes) {
    for (cd_dtype_t i : kIndexDtypes) {
      const cd_dtype_t sig3[3] = {t, i, t};
      register_kernel(registry, "gather", sig3, 3, gather_kernel);
      register_kernel(registry, "gather_elements", sig3, 3, gather_elements_kernel);
      register_kernel(registry, "embedding", sig3, 3, embedding_kernel);
      const cd_dtype_t sig4[4] = {t, i, t, t};
      register_kernel(registry, "scatter", sig4, 4, scatter_kernel);
    }
  }
}

}  // namespace movement
}  // namespace chipdock_cpu
