#include "tensor.hpp"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <optional>

#include "chipdock/support/checked_math.h"
#include "dtype.hpp"
#include "launch.hpp"
#include "pinned.hpp"

namespace chipdock {

namespace {

// Byte range [lo, hi) of storage that a strided view touches; throws
// OUT_OF_RANGE naming `call` when it does not fit int64 (a wrapped span
// would pass the bounds check and reach outside the storage).
struct Span {
  int64_t lo;
  int64_t hi;
};

Span view_span(const Shape& shape, const Shape& strides, int64_t offset, size_t itemsize, const char* call) {
  std::optional<support::ByteSpan> span;
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) {
    const std::optional<int64_t> at = support::checked_mul(offset, static_cast<int64_t>(itemsize));
    if (at) span = support::ByteSpan{*at, *at};  // an empty view touches nothing
  } else {
    span = support::checked_view_span(shape.data(), strides.data(), shape.size(), offset, itemsize);
  }
  if (!span) {
    throw Error(CD_STATUS_OUT_OF_RANGE, "core", call,
                "shape " + describe_shape(shape) + ", strides " + describe_shape(strides) + " and offset " +
                    std::to_string(offset) + " reach bytes beyond the int64 range");
  }
  return {span->lo, span->hi};
}

// dst[i...] = src[i...] for host buffers laid out by the given element strides.
void host_strided_copy(char* dst, const Shape& dst_strides, const char* src, const Shape& src_strides,
                       const Shape& shape, size_t itemsize) {
  const size_t ndim = shape.size();
  for (int64_t n : shape) {
    if (n == 0) return;
  }
  std::vector<int64_t> index(ndim, 0);
  const auto isz = static_cast<int64_t>(itemsize);
  while (true) {
    int64_t d_off = 0, s_off = 0;
    for (size_t d = 0; d < ndim; ++d) {
      d_off += index[d] * dst_strides[d];
      s_off += index[d] * src_strides[d];
    }
    std::memcpy(dst + d_off * isz, src + s_off * isz, itemsize);
    size_t d = ndim;
    while (d > 0) {
      --d;
      if (++index[d] < shape[d]) break;
      index[d] = 0;
      if (d == 0) return;
    }
    if (ndim == 0) return;
  }
}

// The current stream of `device`, recorded on `storage` if it differs from
// the stream the storage was allocated for.
StreamPtr stream_for(const Tensor& t) {
  StreamPtr stream = t.device().current_stream();
  t.storage()->record_stream(stream);
  return stream;
}

// One copy direction: its asynchronous and synchronous slots.
using AsyncCopySlot = decltype(&cd_plugin_api::memcpy_host_to_device_async);
using SyncCopySlot = decltype(&cd_plugin_api::memcpy_host_to_device);
struct CopyDirection {
  AsyncCopySlot async_slot;
  const char* async_name;
  SyncCopySlot sync_slot;
  const char* sync_name;
};
const CopyDirection kHostToDevice{&cd_plugin_api::memcpy_host_to_device_async, "memcpy_host_to_device_async",
                                  &cd_plugin_api::memcpy_host_to_device, "memcpy_host_to_device"};
const CopyDirection kDeviceToHost{&cd_plugin_api::memcpy_device_to_host_async, "memcpy_device_to_host_async",
                                  &cd_plugin_api::memcpy_device_to_host, "memcpy_device_to_host"};
const CopyDirection kDeviceToDevice{&cd_plugin_api::memcpy_device_to_device_async, "memcpy_device_to_device_async",
                                    &cd_plugin_api::memcpy_device_to_device, "memcpy_device_to_device"};

// Copies in the order of `stream`. `host` is the host side of the copy (NULL
// for device to device). Host memory belongs to the caller, so such a copy
// is finished before returning, unless `non_blocking` and `host` lies in a
// live pinned buffer: then it is only enqueued, and the buffer waits for it.
void copy_ordered(Stream& stream, const CopyDirection& dir, void* dst, const void* src, size_t nbytes,
                  const void* host, bool non_blocking = false) {
  Device& dev = stream.device();
  Plugin& p = dev.plugin();
  auto async = p.api().*dir.async_slot;
  dev.bind_thread();
  if (host != nullptr && non_blocking && async != nullptr) {
    if (PinnedBufferPtr buffer = PinnedBuffer::find(host, nbytes)) {
      p.call(async, dir.async_name, dev.ordinal(), dst, src, nbytes, stream.handle(dir.async_name));
      buffer->record_use(stream);
      return;
    }
  }
  // Device-to-device work always goes on the queue.
  if (async != nullptr && host == nullptr) {
    p.call(async, dir.async_name, dev.ordinal(), dst, src, nbytes, stream.handle(dir.async_name));
    return;
  }
  // A host copy waits for the stream's earlier work first (interruptibly, and
  // reporting that work's asynchronous errors), then runs on this thread:
  // when Ctrl-C cuts the wait short, no copy into the caller's memory is
  // left behind on the queue.
  stream.synchronize();
  p.call(p.api().*dir.sync_slot, dir.sync_name, dev.ordinal(), dst, src, nbytes);
}

char* offset_ptr(void* base, int64_t bytes) { return static_cast<char*>(base) + bytes; }

}  // namespace

// ------------------------------------------------------------------ storage --

struct Storage::Maker : Storage {};

uint64_t Storage::next_id() noexcept {
  static std::atomic<uint64_t> counter{0};
  return counter.fetch_add(1, std::memory_order_relaxed) + 1;
}

std::shared_ptr<Storage> Storage::allocate(Device& device, size_t nbytes, Stream& stream) {
  std::shared_ptr<Storage> s = std::make_shared<Maker>();  // one allocation with its control block
  s->device_ = &device;
  s->nbytes_ = nbytes;
  if (nbytes > 0) {
    s->block_ = device.allocator().allocate(nbytes, stream);
    s->data_ = s->block_->ptr;
  }
  return s;
}

std::shared_ptr<Storage> Storage::external(Device& device, void* data, size_t nbytes,
                                           std::function<void()> deleter) {
  std::shared_ptr<Storage> s(new Storage());
  s->device_ = &device;
  s->data_ = data;
  s->nbytes_ = nbytes;
  s->deleter_ = std::move(deleter);
  s->mark_shared();  // the owner writes it without telling the core
  return s;
}

Storage::~Storage() {
  if (block_ != nullptr) device_->allocator().release(block_);
  if (deleter_) {
    try {
      deleter_();
    } catch (...) {
    }
  }
}

void Storage::record_stream(const StreamPtr& stream) {
  if (block_ != nullptr) device_->allocator().record_stream(block_, stream);
}

// ------------------------------------------------------------------- tensor --

std::string describe_shape(const Shape& shape) {
  std::string text = "(";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + (shape.size() == 1 ? ",)" : ")");
}

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size(), 1);
  int64_t running = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = running;
    const std::optional<int64_t> next = support::checked_mul(running, std::max<int64_t>(shape[i], 1));
    if (!next && i > 0) throw_invalid("strides", "shape " + describe_shape(shape) + " has more than 2^63 elements");
    running = next.value_or(running);  // the product past dim 0 is never used
  }
  return strides;
}

int64_t shape_numel(const Shape& shape, const char* call) {
  for (int64_t d : shape) {
    if (d < 0) throw_invalid(call, "negative dimension " + std::to_string(d) + " in shape");
  }
  const std::optional<int64_t> n = support::checked_numel(shape.data(), shape.size());
  if (!n) throw_invalid(call, "shape " + describe_shape(shape) + " has more than 2^63 elements");
  return *n;
}

size_t shape_nbytes(const Shape& shape, cd_dtype_t dtype, const char* call) {
  const std::optional<size_t> nbytes = support::checked_nbytes(shape_numel(shape, call), dtype_size(dtype));
  // The largest contiguous stride in bytes (zero dims counted as 1) must fit too,
  // as in NumPy: (0, 2^62) float32 is refused although it holds nothing.
  int64_t span = 1;
  for (int64_t d : shape) span *= std::max<int64_t>(d, 1);  // fits: shape_numel checked it
  if (!nbytes || !support::checked_nbytes(span, dtype_size(dtype))) {
    throw_invalid(call, "shape " + describe_shape(shape) + " of " + dtype_name(dtype) +
                            " takes more than 2^63 bytes");
  }
  return *nbytes;
}

Tensor::Tensor(std::shared_ptr<Storage> storage, Shape shape, Shape strides, int64_t offset, cd_dtype_t dtype)
    : storage_(std::move(storage)), shape_(std::move(shape)), strides_(std::move(strides)), offset_(offset), dtype_(dtype) {}

Tensor Tensor::empty(Device& device, const Shape& shape, cd_dtype_t dtype) {
  return empty(device, shape, dtype, *device.current_stream());
}

Tensor Tensor::empty(Device& device, const Shape& shape, cd_dtype_t dtype, Stream& stream) {
  if (!dtype_valid(dtype)) throw_invalid("empty", "unknown dtype code " + std::to_string(dtype));
  const size_t nbytes = shape_nbytes(shape, dtype, "empty");
  return Tensor(Storage::allocate(device, nbytes, stream), shape, contiguous_strides(shape), 0, dtype);
}

size_t Tensor::itemsize() const noexcept { return dtype_size(dtype_); }

size_t Tensor::nbytes() const {
  const std::optional<size_t> n = support::checked_nbytes(numel(), itemsize());
  if (!n) throw_invalid("Tensor.nbytes", describe_shape(shape_) + " " + dtype_name(dtype_) + " elements take more than 2^63 bytes");
  return *n;
}

int64_t Tensor::numel() const noexcept {
  int64_t n = 1;
  for (int64_t d : shape_) n *= d;
  return n;
}

bool Tensor::is_contiguous() const noexcept {
  int64_t expected = 1;
  for (size_t i = shape_.size(); i-- > 0;) {
    if (shape_[i] == 1) continue;
    if (shape_[i] == 0) return true;
    if (strides_[i] != expected) return false;
    expected *= shape_[i];
  }
  return true;
}

void* Tensor::data_ptr() const noexcept {
  return storage_->data() == nullptr ? nullptr : offset_ptr(storage_->data(), offset_ * static_cast<int64_t>(itemsize()));
}

Tensor Tensor::as_strided(const Shape& shape, const Shape& strides, int64_t offset) const {
  if (shape.size() != strides.size()) {
    throw_invalid("as_strided", "shape has " + std::to_string(shape.size()) + " dims, strides " +
                                    std::to_string(strides.size()));
  }
  const bool empty = shape_numel(shape, "as_strided") == 0;
  Span span = view_span(shape, strides, offset, itemsize(), "as_strided");
  // An empty view touches no byte (NumPy's x[2:] of a 2-row x): only its offset must be sane.
  if (span.lo < 0 || (!empty && span.hi > static_cast<int64_t>(storage_->nbytes()))) {
    throw Error(CD_STATUS_OUT_OF_RANGE, "core", "as_strided",
                "the view touches bytes [" + std::to_string(span.lo) + ", " + std::to_string(span.hi) +
                    ") of a " + std::to_string(storage_->nbytes()) + "-byte storage");
  }
  // Its logical bytes must fit int64 too, even when strides of 0 make it hold none (as NumPy's): readers and
  // host copies see all of them.
  shape_nbytes(shape, dtype_, "as_strided");
  return Tensor(storage_, shape, strides, offset, dtype_);
}

Tensor Tensor::permute(const Shape& dims) const {
  const int64_t n = ndim();
  if (static_cast<int64_t>(dims.size()) != n) {
    throw_invalid("permute", "got " + std::to_string(dims.size()) + " dims for a " + std::to_string(n) + "-d tensor");
  }
  Shape shape(n), strides(n);
  std::vector<bool> seen(n, false);
  for (int64_t i = 0; i < n; ++i) {
    int64_t d = dims[i] < 0 ? dims[i] + n : dims[i];
    if (d < 0 || d >= n || seen[d]) throw_invalid("permute", "dims must be a permutation of 0.." + std::to_string(n - 1));
    seen[d] = true;
    shape[i] = shape_[d];
    strides[i] = strides_[d];
  }
  return Tensor(storage_, shape, strides, offset_, dtype_);
}

Tensor Tensor::transpose(int64_t dim0, int64_t dim1) const {
  const int64_t n = ndim();
  std::vector<int64_t> dims(n);
  std::iota(dims.begin(), dims.end(), 0);
  int64_t a = dim0 < 0 ? dim0 + n : dim0, b = dim1 < 0 ? dim1 + n : dim1;
  if (a < 0 || a >= n || b < 0 || b >= n) throw_invalid("transpose", "dimension out of range for a " + std::to_string(n) + "-d tensor");
  std::swap(dims[a], dims[b]);
  return permute(dims);
}

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  Tensor out = Tensor::empty(device(), shape_, dtype_);
  out.copy_from(*this);
  return out;
}

Tensor Tensor::clone() const {
  Tensor out = Tensor::empty(device(), shape_, dtype_);
  out.copy_from(*this);
  return out;
}

Tensor Tensor::to(Device& target) const {
  if (&target == &device()) return *this;
  Tensor src = contiguous();
  std::vector<char> staging(src.nbytes());
  src.copy_to_host(staging.data(), staging.size());
  Tensor out = Tensor::empty(target, shape_, dtype_);
  out.copy_from_host(staging.data(), staging.size());
  return out;
}

void Tensor::copy_from(const Tensor& src) {
  if (src.shape_ != shape_ || src.dtype_ != dtype_) {
    throw_invalid("Tensor.copy_", "source is " + std::string(dtype_name(src.dtype_)) + describe_shape(src.shape_) +
                                      ", destination " + dtype_name(dtype_) + describe_shape(shape_) +
                                      "; shapes and dtypes must match");
  }
  if (numel() == 0) return;
  if (&src.device() != &device()) {
    copy_from(src.to(device()));
    return;
  }
  StreamPtr stream = stream_for(*this);
  src.storage()->record_stream(stream);
  storage_->note_write();
  if (is_contiguous() && src.is_contiguous()) {
    copy_ordered(*stream, kDeviceToDevice, data_ptr(), src.data_ptr(), nbytes(), nullptr);
    return;
  }
  if (find_kernel(device(), "copy", {&src}, {this}).fn != nullptr) {
    launch_kernel(*stream, "copy", {&src}, {this});
    return;
  }
  // No strided-copy kernel: go through host memory (slow, but any backend can).
  std::vector<char> host(nbytes());
  src.copy_to_host(host.data(), host.size());
  if (is_contiguous()) {
    copy_from_host(host.data(), host.size());
    return;
  }
  Span span = view_span(shape_, strides_, offset_, itemsize(), "Tensor.copy_");
  std::vector<char> window(static_cast<size_t>(span.hi - span.lo));
  copy_ordered(*stream, kDeviceToHost, window.data(), offset_ptr(storage_->data(), span.lo), window.size(),
               window.data());
  host_strided_copy(window.data() + (offset_ * static_cast<int64_t>(itemsize()) - span.lo), strides_, host.data(),
                    contiguous_strides(shape_), shape_, itemsize());
  copy_ordered(*stream, kHostToDevice, offset_ptr(storage_->data(), span.lo), window.data(), window.size(),
               window.data());
}

void Tensor::copy_from_host(const void* src, size_t nbytes, bool non_blocking) {
  if (!is_contiguous()) throw_invalid("Tensor.copy_from_host", "the destination is not contiguous");
  if (nbytes != this->nbytes()) {
    throw Error(CD_STATUS_OUT_OF_RANGE, "core", "Tensor.copy_from_host",
                "got " + std::to_string(nbytes) + " bytes for a tensor of " + std::to_string(this->nbytes()));
  }
  if (nbytes == 0) return;
  StreamPtr stream = stream_for(*this);
  storage_->note_write();
  copy_ordered(*stream, kHostToDevice, data_ptr(), src, nbytes, src, non_blocking);
}

void Tensor::copy_to_host(void* dst, size_t nbytes, bool non_blocking) const {
  if (nbytes != this->nbytes()) {
    throw Error(CD_STATUS_OUT_OF_RANGE, "core", "Tensor.copy_to_host",
                "got a " + std::to_string(nbytes) + "-byte buffer for a tensor of " + std::to_string(this->nbytes()));
  }
  if (nbytes == 0) return;
  StreamPtr stream = stream_for(*this);
  if (is_contiguous()) {
    copy_ordered(*stream, kDeviceToHost, dst, data_ptr(), nbytes, dst, non_blocking);
    return;
  }
  if (find_kernel(device(), "copy", {this}, {this}).fn != nullptr) {
    contiguous().copy_to_host(dst, nbytes);
    return;
  }
  // Copy the window the view spans, then gather on the host.
  Span span = view_span(shape_, strides_, offset_, itemsize(), "Tensor.copy_to_host");
  std::vector<char> window(static_cast<size_t>(span.hi - span.lo));
  copy_ordered(*stream, kDeviceToHost, window.data(), offset_ptr(storage_->data(), span.lo), window.size(),
               window.data());
  host_strided_copy(static_cast<char*>(dst), contiguous_strides(shape_),
                    window.data() + (offset_ * static_cast<int64_t>(itemsize()) - span.lo), strides_, shape_,
                    itemsize());
}

void Tensor::zero() {
  if (numel() == 0) return;
  if (!is_contiguous()) {
    Tensor zeros = Tensor::empty(device(), shape_, dtype_);
    zeros.zero();
    copy_from(zeros);
    return;
  }
  StreamPtr stream = stream_for(*this);
  storage_->note_write();
  Device& dev = device();
  Plugin& p = dev.plugin();
  dev.bind_thread();
  if (p.api().memory_set_async != nullptr) {
    CD_CALL(p, memory_set_async, dev.ordinal(), data_ptr(), 0, nbytes(), stream->handle("memory_set_async"));
  } else if (p.api().memory_set != nullptr) {
    stream->synchronize();
    CD_CALL(p, memory_set, dev.ordinal(), data_ptr(), 0, nbytes());
  } else {
    std::vector<char> zeros(nbytes(), 0);
    copy_from_host(zeros.data(), zeros.size());
  }
}

}  // namespace chipdock
