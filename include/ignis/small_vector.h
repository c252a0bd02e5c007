// SmallVector (inline storage, heap fallback) and IntArrayRef (a non-owning view of int64s).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <ostream>
#include <type_traits>
#include <vector>

namespace ignis {

/// A vector of trivially copyable T with N elements stored inline: shapes and strides of tensors
/// live here so that creating a tensor does not allocate for its metadata.
template <class T, size_t N>
class SmallVector {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  SmallVector() = default;
  explicit SmallVector(size_t n, T v = T()) { assign(n, v); }
  SmallVector(std::initializer_list<T> il) { assign(il.begin(), il.end()); }
  template <class It>
  SmallVector(It b, It e) {
    assign(b, e);
  }
  SmallVector(const SmallVector& o) { assign(o.begin(), o.end()); }
  SmallVector(SmallVector&& o) noexcept { move_from(o); }
  SmallVector& operator=(const SmallVector& o) {
    if (this != &o) assign(o.begin(), o.end());
    return *this;
  }
  SmallVector& operator=(SmallVector&& o) noexcept {
    if (this != &o) {
      release();
      move_from(o);
    }
    return *this;
  }
  ~SmallVector() { release(); }

  template <class It>
  void assign(It b, It e) {
    size_t n = static_cast<size_t>(std::distance(b, e));
    reserve(n);
    if constexpr (std::is_pointer_v<It>) {
      copy_short(b, n, data_);
    } else {
      std::copy(b, e, data_);
    }
    size_ = n;
  }
  void assign(size_t n, T v) {
    reserve(n);
    std::fill(data_, data_ + n, v);
    size_ = n;
  }
  void reserve(size_t n) {
    if (n <= cap_) return;
    size_t cap = std::max(n, cap_ * 2);
    T* p = new T[cap];
    copy_short(data_, size_, p);
    release();
    data_ = p;
    cap_ = cap;
  }
  void resize(size_t n, T v = T()) {
    reserve(n);
    if (n > size_) std::fill(data_ + size_, data_ + n, v);
    size_ = n;
  }
  void push_back(T v) {
    if (size_ == cap_) reserve(size_ + 1);
    data_[size_++] = v;
  }
  void insert(const T* pos, T v) {
    size_t i = static_cast<size_t>(pos - data_);
    push_back(v);
    std::rotate(data_ + i, data_ + size_ - 1, data_ + size_);
  }
  void erase(const T* pos) {
    size_t i = static_cast<size_t>(pos - data_);
    std::copy(data_ + i + 1, data_ + size_, data_ + i);
    --size_;
  }
  void pop_back() { --size_; }
  void clear() { size_ = 0; }

  T* data() { return data_; }
  const T* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }
  T& back() { return data_[size_ - 1]; }
  const T& back() const { return data_[size_ - 1]; }
  T* begin() { return data_; }
  T* end() { return data_ + size_; }
  const T* begin() const { return data_; }
  const T* end() const { return data_ + size_; }
  bool operator==(const SmallVector& o) const {
    return size_ == o.size_ && std::equal(begin(), end(), o.begin());
  }
  std::vector<T> vec() const { return std::vector<T>(begin(), end()); }

 private:
  void release() {
    if (data_ != inline_) delete[] data_;
    data_ = inline_;
    cap_ = N;
  }
  // Shapes are a few elements: copied in a plain loop, as a memmove call would cost more than
  // the copy itself (the empty asm keeps the compiler from turning the loop into that call).
  static void copy_short(const T* src, size_t n, T* dst) {
    if (n > N) {
      std::copy(src, src + n, dst);
      return;
    }
    for (size_t i = 0; i < n; ++i) {
      asm("" : "+r"(i));
      dst[i] = src[i];
    }
  }
  void move_from(SmallVector& o) {
    if (o.data_ == o.inline_) {
      copy_short(o.data_, o.size_, inline_);
      data_ = inline_;
      cap_ = N;
    } else {
      data_ = o.data_;
      cap_ = o.cap_;
      o.data_ = o.inline_;
      o.cap_ = N;
    }
    size_ = o.size_;
    o.size_ = 0;
  }
  T inline_[N];
  T* data_ = inline_;
  size_t size_ = 0;
  size_t cap_ = N;
};

/// The container for a tensor's sizes and strides.
using Shape = SmallVector<int64_t, 6>;

/// A non-owning view of int64 values, constructible from `{2, 3}`, a vector, a Shape or a single
/// integer, as LibTorch's IntArrayRef. Valid only while what it views lives.
class IntArrayRef {
 public:
  IntArrayRef() = default;
  IntArrayRef(const int64_t& one) : data_(&one), size_(1) {}  // NOLINT: implicit by design
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winit-list-lifetime"
  // Views the list for the full expression it appears in (as c10::IntArrayRef does).
  IntArrayRef(std::initializer_list<int64_t> il) : data_(il.begin()), size_(il.size()) {}
#pragma GCC diagnostic pop
  IntArrayRef(const std::vector<int64_t>& v) : data_(v.data()), size_(v.size()) {}
  template <size_t N>
  IntArrayRef(const SmallVector<int64_t, N>& v) : data_(v.data()), size_(v.size()) {}
  IntArrayRef(const int64_t* d, size_t n) : data_(d), size_(n) {}

  const int64_t* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  int64_t operator[](size_t i) const { return data_[i]; }
  const int64_t* begin() const { return data_; }
  const int64_t* end() const { return data_ + size_; }
  int64_t back() const { return data_[size_ - 1]; }
  std::vector<int64_t> vec() const { return std::vector<int64_t>(begin(), end()); }
  Shape shape() const { return Shape(begin(), end()); }
  bool equals(IntArrayRef o) const {
    if (size_ != o.size_) return false;
    for (size_t i = 0; i < size_; ++i) {  // a loop: a memcmp call costs more for a few dims
      if (data_[i] != o.data_[i]) return false;
    }
    return true;
  }

 private:
  const int64_t* data_ = nullptr;
  size_t size_ = 0;
};

/// Element-wise comparison, as c10::ArrayRef's: `t.sizes() == other.sizes()`,
/// `t.sizes() == std::vector<int64_t>{2, 3}`.
inline bool operator==(IntArrayRef a, IntArrayRef b) { return a.equals(b); }
inline bool operator==(IntArrayRef a, const std::vector<int64_t>& b) {
  return a.equals(IntArrayRef(b));
}

/// Prints `[2, 3]`.
inline std::ostream& operator<<(std::ostream& os, IntArrayRef s) {
  os << '[';
  for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  return os << ']';
}
template <size_t N>
inline std::ostream& operator<<(std::ostream& os, const SmallVector<int64_t, N>& s) {
  return os << IntArrayRef(s);
}

}  // namespace ignis
