// Shared pieces of the linear-algebra / NN kernel family (see linalg_common.h).
#include "linalg_common.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <utility>

#include <immintrin.h>

#include "../error.h"
#include "numeric.h"

namespace chipdock_cpu {
namespace linalg {

const cd_dtype_t kFloatTypes[4] = {CD_DTYPE_FLOAT32, CD_DTYPE_FLOAT16, CD_DTYPE_BFLOAT16,
                                   CD_DTYPE_FLOAT64};

// ---------------------------------------------------------------- context --

void check_context(const cd_kernel_context* ctx, int32_t min_inputs, int32_t max_inputs) {
  ::chipdock_cpu::check_context(ctx, min_inputs, max_inputs, 1, 1);
}

HostTensor input(const cd_kernel_context* ctx, int32_t i) {
  static const char* const names[] = {"input 0", "input 1", "input 2", "input 3", "input 4"};
  return resolve_view(*ctx->inputs[i], ctx->device, i < 5 ? names[i] : "input");
}

HostTensor output(const cd_kernel_context* ctx) {
  HostTensor out = resolve_view(*ctx->outputs[0], ctx->device, "output 0");
  // Outputs are allocated C-contiguous by the core; the kernels rely on it.
  int64_t expect = 1;
  for (size_t i = out.shape.size(); i-- > 0;) {
    if (out.shape[i] != 1 && out.strides[i] != expect) {
      fail(CD_STATUS_INVALID_ARGUMENT, "output 0 is not C-contiguous (dim %zu has stride %lld)",
           i, static_cast<long long>(out.strides[i]));
    }
    expect *= out.shape[i];
  }
  return out;
}

void check_same_dtype(const std::vector<HostTensor>& inputs, const HostTensor& out) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].dtype != out.dtype) {
      fail(CD_STATUS_INVALID_ARGUMENT, "input %zu is %s but the output is %s", i,
           dtype_name(inputs[i].dtype), dtype_name(out.dtype));
    }
  }
}

void require_ndim(const HostTensor& t, size_t ndim, const char* what) {
  if (t.shape.size() != ndim) {
    fail(CD_STATUS_INVALID_ARGUMENT, "%s must be %zu-d, got %zu dims", what, ndim, t.shape.size());
  }
}

// ------------------------------------------------------------------ views --

int64_t View::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

View to_view(const HostTensor& t) {
  View v;
  v.dtype = t.dtype;
  v.shape = t.shape;
  v.strides = t.strides;
  v.data = t.origin;
  return v;
}

bool has_negative_stride(const View& v) {
  for (size_t i = 0; i < v.ndim(); ++i) {
    if (v.shape[i] > 1 && v.strides[i] < 0) return true;
  }
  return false;
}

int max_threads() { return kernel_threads(); }

// --------------------------------------------------------------- buffers --

namespace {

// Per-thread cache of freed blocks: a few, bounded in bytes.
struct BlockPool {
  static constexpr size_t kMaxBlocks = 8;
  static constexpr size_t kMaxBytes = size_t{512} << 20;
  std::vector<std::pair<size_t, void*>> free_blocks;
  size_t cached = 0;

  ~BlockPool() {
    for (auto& b : free_blocks) std::free(b.second);
  }

  void* take(size_t& bytes) {
    size_t best = free_blocks.size();
    for (size_t i = 0; i < free_blocks.size(); ++i) {
      const size_t s = free_blocks[i].first;
      // Reuse a block that fits and is not more than 4x too large.
      if (s >= bytes && s / 4 <= bytes && (best == free_blocks.size() || s < free_blocks[best].first)) {
        best = i;
      }
    }
    if (best == free_blocks.size()) return nullptr;
    void* p = free_blocks[best].second;
    bytes = free_blocks[best].first;
    cached -= bytes;
    free_blocks.erase(free_blocks.begin() + static_cast<std::ptrdiff_t>(best));
    return p;
  }

  void give(void* p, size_t bytes) {
    if (bytes > kMaxBytes) {
      std::free(p);
      return;
    }
    while (!free_blocks.empty() &&
           (free_blocks.size() >= kMaxBlocks || cached + bytes > kMaxBytes)) {
      // Drop the oldest.
      cached -= free_blocks.front().first;
      std::free(free_blocks.front().second);
      free_blocks.erase(free_blocks.begin());
    }
    free_blocks.emplace_back(bytes, p);
    cached += bytes;
  }
};

BlockPool& pool() {
  thread_local BlockPool p;
  return p;
}

}  // namespace

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    release();
    p_ = o.p_;
    size_ = o.size_;
    o.p_ = nullptr;
    o.size_ = 0;
  }
  return *this;
}

void Buffer::allocate(size_t bytes) {
  release();
  if (bytes == 0) return;
  size_t size = (bytes + 63) / 64 * 64;
  void* p = pool().take(size);
  if (p == nullptr) {
    p = std::aligned_alloc(64, size);
    if (p == nullptr) {
      fail(CD_STATUS_OUT_OF_MEMORY, "cannot allocate %zu bytes of kernel scratch memory", size);
    }
  }
  p_ = p;
  size_ = size;
}

void Buffer::release() noexcept {
  if (p_ != nullptr) pool().give(p_, size_);
  p_ = nullptr;
  size_ = 0;
}

// ---------------------------------------------------------------- packing --

namespace {

template <class F> bool dispatch_float(cd_dtype_t dtype, F&& fn) {
  switch (dtype) {
    case CD_DTYPE_FLOAT32: fn(float{}); return true;
    case CD_DTYPE_FLOAT16: fn(float16_t{}); return true;
    case CD_DTYPE_BFLOAT16: fn(bfloat16_t{}); return true;
    case CD_DTYPE_FLOAT64: fn(double{}); return true;
    default: return false;
  }
}

// float16 <-> float32 for contiguous runs: F16C when the CPU has it (GCC
// otherwise converts _Float16 through a libgcc call per element).
__attribute__((target("avx,f16c"))) void f16_to_f32_f16c(const float16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) dst[i] = static_cast<float>(src[i]);
}

__attribute__((target("avx,f16c"))) void f32_to_f16_f16c(const float* src, float16_t* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
  }
  for (; i < n; ++i) dst[i] = static_cast<float16_t>(src[i]);
}

bool have_f16c() {
  static const bool yes = __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx");
  return yes;
}

// One row: n elements from src (element stride `is`) to contiguous dst.
template <class S, class D>
void convert_row(const S* src, int64_t is, D* dst, int64_t n) {
  if constexpr (std::is_same_v<S, float16_t> && std::is_same_v<D, float>) {
    if (is == 1 && have_f16c()) return f16_to_f32_f16c(src, dst, n);
  }
  if constexpr (std::is_same_v<S, float> && std::is_same_v<D, float16_t>) {
    if (is == 1 && have_f16c()) return f32_to_f16_f16c(src, dst, n);
  }
  if constexpr (std::is_same_v<D, double>) {
    for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<double>(load(src[i * is]));
  } else if constexpr (std::is_same_v<S, double>) {
    for (int64_t i = 0; i < n; ++i) dst[i] = store<D>(src[i * is]);
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = store<D>(load(src[i * is]));
  }
}

template <size_t N>
void copy_row_bytes(const char* src, int64_t is, char* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) std::memcpy(dst + i * N, src + i * is * N, N);
}

// Shape and source strides after dropping size-1 dims and merging dims that
// are contiguous with their inner neighbour (the destination is contiguous).
void simplify(const View& v, std::vector<int64_t>& shape, std::vector<int64_t>& strides) {
  for (size_t i = 0; i < v.ndim(); ++i) {
    if (v.shape[i] == 1) continue;
    if (!shape.empty() && strides.back() == v.strides[i] * v.shape[i]) {
      shape.back() *= v.shape[i];
      strides.back() = v.strides[i];
      continue;
    }
    shape.push_back(v.shape[i]);
    strides.push_back(v.strides[i]);
  }
  if (shape.empty()) {
    shape.push_back(1);
    strides.push_back(1);
  }
}

}  // namespace

void copy_convert(const View& src, cd_dtype_t to, void* dst) {
  const int64_t numel = src.numel();
  if (numel == 0) return;
  std::vector<int64_t> shape, strides;
  simplify(src, shape, strides);
  const size_t d = shape.size();
  const int64_t inner = shape[d - 1], inner_stride = strides[d - 1];
  const int64_t rows = numel / inner;
  const size_t in_item = src.itemsize(), out_item = dtype_size(to);

  auto run_rows = [&](auto row_fn) {
    parallel_guarded(rows, std::max<int64_t>(1, 32768 / inner), [&](int64_t begin, int64_t end) {
      // Unravel `begin` over the outer dims, then step an odometer.
      std::vector<int64_t> index(d, 0);
      int64_t offset = 0, r = begin;
      for (size_t k = d - 1; k-- > 0;) {
        index[k] = r % shape[k];
        r /= shape[k];
        offset += index[k] * strides[k];
      }
      for (int64_t row = begin; row < end; ++row) {
        row_fn(src.data + offset * static_cast<int64_t>(in_item),
               static_cast<char*>(dst) + row * inner * static_cast<int64_t>(out_item));
        for (size_t k = d - 1; k-- > 0;) {
          offset += strides[k];
          if (++index[k] < shape[k]) break;
          offset -= strides[k] * shape[k];
          index[k] = 0;
        }
      }
    });
  };

  if (to == src.dtype) {
    if (inner_stride == 1) {
      run_rows([&](const char* s, char* o) { std::memcpy(o, s, static_cast<size_t>(inner) * in_item); });
      return;
    }
    switch (in_item) {
      case 1: run_rows([&](const char* s, char* o) { copy_row_bytes<1>(s, inner_stride, o, inner); }); return;
      case 2: run_rows([&](const char* s, char* o) { copy_row_bytes<2>(s, inner_stride, o, inner); }); return;
      case 4: run_rows([&](const char* s, char* o) { copy_row_bytes<4>(s, inner_stride, o, inner); }); return;
      default: run_rows([&](const char* s, char* o) { copy_row_bytes<8>(s, inner_stride, o, inner); }); return;
    }
  }
  bool ok = false;
  dispatch_float(src.dtype, [&](auto s_tag) {
    using S = decltype(s_tag);
    ok = dispatch_float(to, [&](auto d_tag) {
      using D = decltype(d_tag);
      run_rows([&](const char* s, char* o) {
        convert_row(reinterpret_cast<const S*>(s), inner_stride, reinterpret_cast<D*>(o), inner);
      });
    });
  });
  if (!ok) {
    fail(CD_STATUS_INTERNAL, "no conversion from %s to %s", dtype_name(src.dtype), dtype_name(to));
  }
}

View packed_layout(const View& v, cd_dtype_t to) {
  View out;
  out.dtype = to;
  out.shape = v.shape;
  out.strides.assign(v.ndim(), 0);
  int64_t stride = 1;
  for (size_t i = v.ndim(); i-- > 0;) {
    if (v.strides[i] == 0 || v.shape[i] == 1) {
      // Size 1 or broadcast: stride 0 when broadcast, else a dense value.
      out.strides[i] = v.shape[i] == 1 ? stride : 0;
      continue;
    }
    out.strides[i] = stride;
    stride *= v.shape[i];
  }
  return out;
}

View pack(const View& v, cd_dtype_t to, Buffer& buf) {
  View compact = v;  // broadcast dims become size 1
  for (size_t i = 0; i < v.ndim(); ++i) {
    if (v.strides[i] == 0) compact.shape[i] = 1;
  }
  const int64_t n = compact.numel();
  buf.allocate(static_cast<size_t>(std::max<int64_t>(n, 1)) * dtype_size(to));
  copy_convert(compact, to, buf.data());
  View out = packed_layout(v, to);
  out.data = static_cast<char*>(buf.data());
  return out;
}

View dense_layout(const View& v, cd_dtype_t to) {
  View d = v;
  d.dtype = to;
  d.data = nullptr;
  int64_t s = 1;
  for (size_t i = d.ndim(); i-- > 0;) {
    d.strides[i] = s;
    s *= d.shape[i];
  }
  return d;
}

View materialize(const View& v, cd_dtype_t to, Buffer& buf) {
  buf.allocate(static_cast<size_t>(std::max<int64_t>(v.numel(), 1)) * dtype_size(to));
  copy_convert(v, to, buf.data());
  View d = dense_layout(v, to);
  d.data = static_cast<char*>(buf.data());
  return d;
}

void store_from_f32(const float* src, cd_dtype_t to, void* dst, int64_t n) {
  auto run = [&](auto tag) {
    using D = decltype(tag);
    D* o = static_cast<D*>(dst);
    parallel_for(n, 65536, [&](int64_t b, int64_t e) {
      if constexpr (std::is_same_v<D, float16_t>) {
        if (have_f16c()) return f32_to_f16_f16c(src + b, o + b, e - b);
      }
      for (int64_t i = b; i < e; ++i) o[i] = store<D>(src[i]);
    });
  };
  switch (to) {
    case CD_DTYPE_FLOAT32: run(float{}); return;
    case CD_DTYPE_FLOAT16: run(float16_t{}); return;
    case CD_DTYPE_BFLOAT16: run(bfloat16_t{}); return;
    default: fail(CD_STATUS_INTERNAL, "store_from_f32: unsupported dtype %s", dtype_name(to));
  }
}

std::vector<int64_t> broadcast_shapes(const std::vector<int64_t>& a, const std::vector<int64_t>& b,
                                      const char* what) {
  const size_t n = std::max(a.size(), b.size());
  std::vector<int64_t> out(n, 1);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1) {
      fail(CD_STATUS_INVALID_ARGUMENT, "%s: sizes %lld and %lld do not broadcast", what,
           static_cast<long long>(da), static_cast<long long>(db));
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

std::vector<int64_t> align_batch(const View& v, size_t v_batch, const std::vector<int64_t>& target,
                                 const char* what) {
  if (v_batch > target.size()) {
    fail(CD_STATUS_INVALID_ARGUMENT, "%s has more batch dims (%zu) than the output (%zu)", what,
         v_batch, target.size());
  }
  std::vector<int64_t> strides(target.size(), 0);
  const size_t lead = target.size() - v_batch;
  for (size_t i = 0; i < v_batch; ++i) {
    const int64_t d = v.shape[i];
    if (d == target[lead + i]) {
      strides[lead + i] = d == 1 ? 0 : v.strides[i];
    } else if (d != 1) {
      fail(CD_STATUS_INVALID_ARGUMENT, "%s: batch dim %zu has size %lld, the output has %lld",
           what, i, static_cast<long long>(d), static_cast<long long>(target[lead + i]));
    }
  }
  return strides;
}

}  // namespace linalg
}  // namespace chipdock_cpu
