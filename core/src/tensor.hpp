// Storage (a device allocation, caching-allocator or foreign) and Tensor (a
// strided view of a storage). The core never dereferences device memory:
// every byte moves through the plugin's copy slots or kernels.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "allocator.hpp"
#include "small_vector.hpp"
#include "runtime.hpp"

namespace chipdock {

using Shape = SmallVector<int64_t, 6>;

class Storage {
 public:
  // `nbytes` from the device's caching allocator, for work on `stream`.
  static std::shared_ptr<Storage> allocate(Device& device, size_t nbytes, Stream& stream);
  // Memory owned elsewhere (DLPack import); `deleter` runs on destruction.
  static std::shared_ptr<Storage> external(Device& device, void* data, size_t nbytes,
                                           std::function<void()> deleter);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  Device& device() const noexcept { return *device_; }
  void* data() const noexcept { return data_; }
  size_t nbytes() const noexcept { return nbytes_; }
  // Tells the allocator that work on `stream` uses this memory too.
  void record_stream(const StreamPtr& stream);

  // Identity and write version, as kernels see them (cd_tensor_version):
  // `id` is unique for the life of the process, even when the allocator
  // hands the same memory to a later storage; `version` grows each time the
  // core enqueues a write into this storage. A storage that another
  // framework can write (DLPack, either way) is `shared` and has no version.
  uint64_t id() const noexcept { return id_; }
  uint64_t version() const noexcept { return version_.load(std::memory_order_relaxed); }
  void note_write() noexcept { version_.fetch_add(1, std::memory_order_relaxed); }
  bool shared() const noexcept { return shared_.load(std::memory_order_relaxed); }
  void mark_shared() noexcept { shared_.store(true, std::memory_order_relaxed); }

 private:
  Storage() = default;
  struct Maker;  // lets std::make_shared reach the private constructor
  Device* device_ = nullptr;
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  Block* block_ = nullptr;
  std::function<void()> deleter_;
  uint64_t id_ = next_id();
  std::atomic<uint64_t> version_{0};
  std::atomic<bool> shared_{false};
  static uint64_t next_id() noexcept;
};

class Tensor {
 public:
  Tensor(std::shared_ptr<Storage> storage, Shape shape, Shape strides, int64_t offset, cd_dtype_t dtype);

  // A new contiguous tensor on `device`, allocated for its current stream.
  static Tensor empty(Device& device, const Shape& shape, cd_dtype_t dtype);
  // The same, allocated for `stream` (a stream of `device`).
  static Tensor empty(Device& device, const Shape& shape, cd_dtype_t dtype, Stream& stream);

  const std::shared_ptr<Storage>& storage() const noexcept { return storage_; }
  Device& device() const noexcept { return storage_->device(); }
  const Shape& shape() const noexcept { return shape_; }
  const Shape& strides() const noexcept { return strides_; }
  int64_t offset() const noexcept { return offset_; }  // in elements
  cd_dtype_t dtype() const noexcept { return dtype_; }
  size_t itemsize() const noexcept;
  int64_t ndim() const noexcept { return static_cast<int64_t>(shape_.size()); }
  int64_t numel() const noexcept;
  // numel() * itemsize(); throws INVALID_ARGUMENT when a broadcast view's
  // elements would span more than 2^63 bytes (only its storage is real).
  size_t nbytes() const;
  bool is_contiguous() const noexcept;
  // The device address of element (0, ...); meaningful only to the plugin.
  void* data_ptr() const noexcept;

  // Metadata-only views. Bounds are checked against the storage.
  Tensor as_strided(const Shape& shape, const Shape& strides, int64_t offset) const;
  Tensor permute(const Shape& dims) const;
  Tensor transpose(int64_t dim0, int64_t dim1) const;

  // Data movement (all ordered on the current stream of the device).
  Tensor contiguous() const;
  Tensor clone() const;
  Tensor to(Device& device) const;
  void copy_from(const Tensor& src);              // shapes and dtypes must match
  // Host copies (the destination of copy_from_host must be contiguous).
  // They block, unless `non_blocking` and the host memory lies in a live
  // PinnedBuffer: then they are only enqueued on the current stream.
  void copy_from_host(const void* src, size_t nbytes, bool non_blocking = false);
  void copy_to_host(void* dst, size_t nbytes, bool non_blocking = false) const;
  void zero();

 private:
  std::shared_ptr<Storage> storage_;
  Shape shape_;
  Shape strides_;
  int64_t offset_;
  cd_dtype_t dtype_;
};

Shape contiguous_strides(const Shape& shape);
// "(2, 3)", "(4,)", "()": for error messages.
std::string describe_shape(const Shape& shape);
int64_t shape_numel(const Shape& shape, const char* call);
// The bytes of a contiguous `shape` of `dtype`; throws INVALID_ARGUMENT
// naming `call` when that exceeds int64 (numel alone may still fit).
size_t shape_nbytes(const Shape& shape, cd_dtype_t dtype, const char* call);

}  // namespace chipdock
