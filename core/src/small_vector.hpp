// A vector of trivially copyable values that keeps its first N elements
// inline. Shapes, strides and dtype signatures are short (rank <= 6 covers
// nearly every model), and a Tensor is copied many times per op call; with
// std::vector each copy cost two heap allocations, which dominated the cost
// of dispatching a small op. Only the std::vector surface the core uses is
// provided.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <new>
#include <type_traits>
#include <vector>

namespace chipdock {

template <class T, size_t N>
class SmallVector {
  static_assert(std::is_trivially_copyable_v<T>, "SmallVector holds plain values only");

 public:
  using value_type = T;
  using size_type = size_t;
  using iterator = T*;
  using const_iterator = const T*;
  using reference = T&;
  using const_reference = const T&;

  SmallVector() noexcept = default;
  explicit SmallVector(size_t n, const T& value = T()) { assign(n, value); }
  SmallVector(std::initializer_list<T> values) { assign(values.begin(), values.end()); }
  template <class It, class = typename std::iterator_traits<It>::iterator_category>
  SmallVector(It first, It last) {
    assign(first, last);
  }
  // Implicit, like the std::vector it replaces (attribute lists are vectors).
  SmallVector(const std::vector<T>& values) { assign(values.begin(), values.end()); }  // NOLINT
  SmallVector(const SmallVector& other) { assign(other.begin(), other.end()); }
  SmallVector(SmallVector&& other) noexcept { steal(other); }
  SmallVector& operator=(const SmallVector& other) {
    if (this != &other) assign(other.begin(), other.end());
    return *this;
  }
  SmallVector& operator=(SmallVector&& other) noexcept {
    if (this != &other) {
      release();
      steal(other);
    }
    return *this;
  }
  ~SmallVector() { release(); }

  T* data() noexcept { return data_; }
  const T* data() const noexcept { return data_; }
  size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  T* begin() noexcept { return data_; }
  T* end() noexcept { return data_ + size_; }
  const T* begin() const noexcept { return data_; }
  const T* end() const noexcept { return data_ + size_; }
  std::reverse_iterator<T*> rbegin() noexcept { return std::reverse_iterator<T*>(end()); }
  std::reverse_iterator<T*> rend() noexcept { return std::reverse_iterator<T*>(begin()); }
  std::reverse_iterator<const T*> rbegin() const noexcept { return std::reverse_iterator<const T*>(end()); }
  std::reverse_iterator<const T*> rend() const noexcept { return std::reverse_iterator<const T*>(begin()); }
  T& operator[](size_t i) noexcept { return data_[i]; }
  const T& operator[](size_t i) const noexcept { return data_[i]; }
  T& front() noexcept { return data_[0]; }
  const T& front() const noexcept { return data_[0]; }
  T& back() noexcept { return data_[size_ - 1]; }
  const T& back() const noexcept { return data_[size_ - 1]; }

  void reserve(size_t n) {
    if (n <= capacity_) return;
    T* fresh = static_cast<T*>(::operator new(n * sizeof(T)));
    if (size_) std::memcpy(fresh, data_, size_ * sizeof(T));
    release();
    data_ = fresh;
    capacity_ = n;
  }
  void resize(size_t n, const T& value = T()) {
    reserve(n);
    for (size_t i = size_; i < n; ++i) data_[i] = value;
    size_ = n;
  }
  void clear() noexcept { size_ = 0; }
  void push_back(const T& value) {
    if (size_ == capacity_) {
      const T copy = value;  // value may live in this vector
      reserve(capacity_ * 2);
      data_[size_++] = copy;
      return;
    }
    data_[size_++] = value;
  }
  template <class... Args>
  T& emplace_back(Args&&... args) {
    push_back(T{std::forward<Args>(args)...});
    return back();
  }
  void pop_back() noexcept { --size_; }
  void assign(size_t n, const T& value) {
    clear();
    resize(n, value);
  }
  template <class It>
  void assign(It first, It last) {
    const auto n = static_cast<size_t>(std::distance(first, last));
    size_ = 0;
    reserve(n);
    std::copy(first, last, data_);
    size_ = n;
  }
  T* insert(T* pos, const T& value) { return insert(pos, &value, &value + 1); }
  T* insert(T* pos, std::initializer_list<T> values) { return insert(pos, values.begin(), values.end()); }
  template <class It>
  T* insert(T* pos, It first, It last) {
    const size_t at = static_cast<size_t>(pos - data_);
    const auto n = static_cast<size_t>(std::distance(first, last));
    SmallVector tail(data_ + at, data_ + size_);  // first..last may alias this vector
    SmallVector added(first, last);
    reserve(std::max(size_ + n, capacity_ * 2));
    std::copy(added.begin(), added.end(), data_ + at);
    std::copy(tail.begin(), tail.end(), data_ + at + n);
    size_ += n;
    return data_ + at;
  }
  T* erase(T* pos) { return erase(pos, pos + 1); }
  T* erase(T* first, T* last) {
    std::copy(last, end(), first);
    size_ -= static_cast<size_t>(last - first);
    return first;
  }

  friend bool operator==(const SmallVector& a, const SmallVector& b) {
    return a.size_ == b.size_ && std::equal(a.begin(), a.end(), b.begin());
  }
  friend bool operator!=(const SmallVector& a, const SmallVector& b) { return !(a == b); }
  friend bool operator<(const SmallVector& a, const SmallVector& b) {
    return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  bool on_heap() const noexcept { return data_ != inline_; }
  void release() noexcept {
    if (on_heap()) ::operator delete(data_);
    data_ = inline_;
    capacity_ = N;
  }
  void steal(SmallVector& other) noexcept {
    if (other.on_heap()) {
      data_ = other.data_;
      capacity_ = other.capacity_;
      other.data_ = other.inline_;
      other.capacity_ = N;
    } else {
      std::memcpy(inline_, other.inline_, other.size_ * sizeof(T));
    }
    size_ = other.size_;
    other.size_ = 0;
  }

  T inline_[N];
  T* data_ = inline_;
  size_t size_ = 0;
  size_t capacity_ = N;
};

}  // namespace chipdock
