// Backend support library, part of the chipdock backend kit (C++17, header only).
//
// Walking N strided operands of a kernel call together, element by element,
// in row-major order of the iteration shape (normally the output's), with
// NumPy broadcasting: an operand with fewer dims is aligned to the right, and
// a dim of size 1 (or of stride 0) is repeated along the iteration dim.
// Strides may be zero or negative; an empty shape visits nothing; a 0-d
// shape visits one element.
//
//   using chipdock::support::StridedIter;
//   StridedIter<3> it({ctx->outputs[0], ctx->inputs[0], ctx->inputs[1]});
//   if (it.error() != nullptr) fail(CD_STATUS_INVALID_ARGUMENT, "add: %s", it.error());
//   it.for_each([](char* const* p) {
//     *reinterpret_cast<float*>(p[0]) = *reinterpret_cast<const float*>(p[1]) +
//                                       *reinterpret_cast<const float*>(p[2]);
//   });
//
// Construction checks the operands once (strided format, a known dtype,
// dims that broadcast, byte strides that fit int64) and folds away size-1
// dims and dims that are contiguous in every operand, so a dense operand set
// becomes one flat run. Nothing allocates, throws or checks per element: the
// state is fixed-size arrays (at most kMaxDims dims), and for_each walks the
// innermost dim as a plain loop. The views' pointers are not kept; the
// iterator is valid as long as the memory behind the views is (copy it into
// work enqueued on a stream: it is trivially copyable).
#ifndef CHIPDOCK_SUPPORT_STRIDED_ITER_H_
#define CHIPDOCK_SUPPORT_STRIDED_ITER_H_

#include <array>
#include <cstddef>
#include <cstdint>

#include "chipdock/cd_kernel.h"
#include "chipdock/support/checked_math.h"
#include "chipdock/support/dtype_info.h"

namespace chipdock::support {

template <size_t N>
class StridedIter {
  static_assert(N >= 1, "StridedIter needs at least one operand");

 public:
  static constexpr int32_t kMaxDims = 64;

  // Iterates over the shape of views[0] (the output, by convention).
  explicit StridedIter(const std::array<const cd_tensor_view*, N>& views) noexcept {
    if (views[0] == nullptr) {
      error_ = "operand 0 is NULL";
      return;
    }
    init(views[0]->shape, views[0]->ndim, views);
  }

  // Iterates over `shape` (`ndim` dims); every view broadcasts to it.
  StridedIter(const int64_t* shape, int32_t ndim, const std::array<const cd_tensor_view*, N>& views) noexcept {
    init(shape, ndim, views);
  }

  // NULL when the operands can be walked; else why not (static storage).
  const char* error() const noexcept { return error_; }
  // The operand an error() is about (-1: the shape itself).
  int32_t error_operand() const noexcept { return error_operand_; }

  // Elements the walk visits (0 for an empty shape or after an error).
  int64_t size() const noexcept { return size_; }
  // Dims left after folding (0 for one element or none).
  int32_t folded_ndim() const noexcept { return ndim_; }
  // True once every element was visited (at once for an empty walk).
  bool done() const noexcept { return done_; }

  // The current element of operand `i`.
  char* ptr(size_t i) const noexcept { return ptr_[i]; }
  template <class T>
  T& get(size_t i) const noexcept {
    return *reinterpret_cast<T*>(ptr_[i]);
  }

  // Moves to the next element in row-major order; false (and done()) after
  // the last one.
  bool next() noexcept {
    if (done_) return false;
    for (int32_t d = ndim_ - 1; d >= 0; --d) {
      for (size_t i = 0; i < N; ++i) ptr_[i] += stride_[i][d];
      if (++index_[d] < shape_[d]) return true;
      for (size_t i = 0; i < N; ++i) ptr_[i] -= stride_[i][d] * shape_[d];
      index_[d] = 0;
    }
    done_ = true;
    return false;
  }

  // Calls fn(char* const* ptrs) (ptrs[i]: operand i's element) for every
  // element from the current one on, in row-major order; then done().
  template <class Fn>
  void for_each(Fn&& fn) noexcept(noexcept(fn(static_cast<char* const*>(nullptr)))) {
    for_each_run([&fn](char* const* base, const int64_t* step, int64_t count) {
      std::array<char*, N> p;
      for (size_t i = 0; i < N; ++i) p[i] = base[i];
      for (int64_t k = 0; k < count; ++k) {
        fn(static_cast<char* const*>(p.data()));
        for (size_t i = 0; i < N; ++i) p[i] += step[i];
      }
    });
  }

  // Calls fn(char* const* base, const int64_t* step_bytes, int64_t count)
  // once per run of the innermost folded dim: operand i's k-th element of
  // the run is at base[i] + k * step_bytes[i]. For vectorized inner loops
  // (step_bytes[i] == itemsize: contiguous; 0: a broadcast scalar).
  template <class Fn>
  void for_each_run(Fn&& fn) {
    if (done_) return;
    std::array<int64_t, N> step{};
    if (ndim_ == 0) {  // one element
      fn(static_cast<char* const*>(ptr_.data()), static_cast<const int64_t*>(step.data()), int64_t{1});
      done_ = true;
      return;
    }
    const int32_t inner = ndim_ - 1;
    for (size_t i = 0; i < N; ++i) step[i] = stride_[i][inner];
    for (;;) {
      const int64_t count = shape_[inner] - index_[inner];
      fn(static_cast<char* const*>(ptr_.data()), static_cast<const int64_t*>(step.data()), count);
      // Jump to the last element of the run, then step past it.
      for (size_t i = 0; i < N; ++i) ptr_[i] += stride_[i][inner] * (count - 1);
      index_[inner] = shape_[inner] - 1;
      if (!next()) return;
    }
  }

 private:
  void fail(const char* why, int32_t operand) noexcept {
    error_ = why;
    error_operand_ = operand;
    size_ = 0;
    ndim_ = 0;
    done_ = true;
  }

  void init(const int64_t* shape, int32_t ndim, const std::array<const cd_tensor_view*, N>& views) noexcept {
    done_ = true;
    if (ndim < 0 || ndim > kMaxDims) return fail("the iteration shape has more dims than StridedIter::kMaxDims", -1);
    if (ndim > 0 && shape == nullptr) return fail("the iteration shape is NULL", -1);
    int64_t full_stride[N][kMaxDims];
    int64_t total = 1;
    for (int32_t d = 0; d < ndim; ++d) {
      if (shape[d] < 0) return fail("the iteration shape has a negative dim", -1);
      if (!checked_mul(total, shape[d])) return fail("the iteration shape's element count overflows int64", -1);
      total *= shape[d];
    }
    for (size_t i = 0; i < N; ++i) {
      const cd_tensor_view* v = views[i];
      const auto op = static_cast<int32_t>(i);
      if (v == nullptr) return fail("an operand is NULL", op);
      if (v->format != CD_FORMAT_STRIDED) return fail("an operand is not in CD_FORMAT_STRIDED", op);
      const size_t item = dtype_size(v->dtype);
      if (item == 0) return fail("an operand has an unknown dtype", op);
      if (v->ndim < 0 || v->ndim > ndim) return fail("an operand has more dims than the iteration shape", op);
      if (v->ndim > 0 && (v->shape == nullptr || v->strides == nullptr)) {
        return fail("an operand has NULL shape or strides", op);
      }
      const int32_t lead = ndim - v->ndim;  // missing leading dims repeat
      for (int32_t d = 0; d < ndim; ++d) {
        int64_t stride = 0;
        if (d >= lead) {
          const int64_t dim = v->shape[d - lead];
          if (dim == shape[d]) {
            stride = dim == 1 ? 0 : v->strides[d - lead];
          } else if (dim != 1) {
            return fail("an operand's shape does not broadcast to the iteration shape", op);
          }
        }
        const std::optional<int64_t> bytes = checked_mul(stride, static_cast<int64_t>(item));
        if (!bytes) return fail("an operand's byte stride overflows int64", op);
        full_stride[i][d] = *bytes;
      }
      if (total > 0 && v->data == nullptr) return fail("an operand's data is NULL", op);
      ptr_[i] = total > 0 ? static_cast<char*>(v->data) + v->byte_offset : nullptr;
    }
    size_ = total;
    if (total == 0) return;  // nothing to visit
    // Fold: drop size-1 dims, merge a dim into the one inside it where every
    // operand steps over the inner dim exactly once (outer = inner * extent).
    ndim_ = 0;
    for (int32_t d = 0; d < ndim; ++d) {
      if (shape[d] == 1) continue;
      if (ndim_ > 0) {
        const int32_t prev = ndim_ - 1;
        bool mergeable = true;
        for (size_t i = 0; i < N && mergeable; ++i) {
          mergeable = stride_[i][prev] == full_stride[i][d] * shape[d];
        }
        if (mergeable) {
          shape_[prev] *= shape[d];
          for (size_t i = 0; i < N; ++i) stride_[i][prev] = full_stride[i][d];
          continue;
        }
      }
      shape_[ndim_] = shape[d];
      index_[ndim_] = 0;
      for (size_t i = 0; i < N; ++i) stride_[i][ndim_] = full_stride[i][d];
      ++ndim_;
    }
    done_ = false;
  }

  const char* error_ = nullptr;
  int32_t error_operand_ = -1;
  int32_t ndim_ = 0;
  bool done_ = true;
  int64_t size_ = 0;
  std::array<char*, N> ptr_{};
  int64_t shape_[kMaxDims] = {};
  int64_t index_[kMaxDims] = {};
  int64_t stride_[N][kMaxDims] = {};
};

}  // namespace chipdock::support

#endif  // CHIPDOCK_SUPPORT_STRIDED_ITER_H_
