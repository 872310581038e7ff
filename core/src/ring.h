// A ring buffer: a double-ended sequence in one contiguous array, for the
// sliding log's grants and block sums (sliding_log.h), which are appended at
// the back, expire from the front, and are indexed and searched in between;
// also the engine's other queues (the wait queue's levels, the starts not
// yet released, the lease holder's readings), so core.wasm holds no
// std::deque.
//
// Contract:
// - Indexing, push_back, pop_front and pop_back are O(1) and allocate only
//   when the array is full (it then grows by half, so a full log of n
//   entries holds at most about 1.5 n); insert and erase in the middle shift
//   the elements after them, as a deque's would.
// - grow_to(n) names the length the ring is expected to reach (a log's entry
//   cap): growth by half stops there, so a full log holds n, not up to 1.5 n.
//   Past it the ring still grows by half.
// - The array is resized with realloc, in place where the allocator can:
//   wasm memory never shrinks, so a log that grew by copying into fresh
//   arrays would leave the old ones behind as holes it cannot reuse (a full
//   1,000,000-per-window log then peaked at about three times its size).
//   T must therefore be trivially copyable.
// - An array four times larger than what it holds (and larger than
//   kMinCapacity) shrinks by half as the front expires, so a log that
//   emptied gives its memory back.
// - linearise() puts the elements at the start of the array, in order, so
//   they can be sorted in place (data() .. data() + size()).
//
// Example:
//   drl::internal::Ring<int> ring;
//   for (int i = 1; i <= 20; ++i) ring.push_back(i);
//   ring.pop_front();
//   assert(ring.front() == 2);
//   assert(ring.back() == 20);
//   assert(ring.size() == 19);
//   ring.insert(1, 99);  // before the second element
//   assert(ring[1] == 99);
//   assert(ring[2] == 3);
//   ring.erase(1);
//   for (int i = 0; i < 40; ++i) ring.push_back(ring.back());  // an element of its own, across a growth
//   assert(ring.back() == 20);
//   for (int i = 0; i < 40; ++i) ring.pop_back();
//   int sum = 0;
//   for (int v : ring) sum += v;
//   assert(sum == 209);
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <type_traits>
#include <utility>

namespace drl::internal {

template <typename T>
class Ring {
  static_assert(std::is_trivially_copyable_v<T>, "Ring moves its array with realloc");

 public:
  // Below this the array neither starts smaller nor shrinks.
  static constexpr size_t kMinCapacity = 16;

  Ring() = default;
  ~Ring() { std::free(buf_); }
  Ring(const Ring& o) { *this = o; }
  Ring(Ring&& o) noexcept { swap(o); }
  Ring& operator=(const Ring& o) {
    if (this == &o) return *this;
    Ring copy;
    copy.reserve(o.size_);
    for (size_t i = 0; i < o.size_; ++i) copy.buf_[i] = o[i];
    copy.size_ = o.size_;
    swap(copy);
    return *this;
  }
  Ring& operator=(Ring&& o) noexcept {
    Ring gone;
    swap(gone);
    swap(o);
    return *this;
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  size_t capacity() const { return cap_; }

  T& operator[](size_t i) { return buf_[slot(i)]; }
  const T& operator[](size_t i) const { return buf_[slot(i)]; }
  T& front() { return buf_[head_]; }
  const T& front() const { return buf_[head_]; }
  T& back() { return buf_[slot(size_ - 1)]; }
  const T& back() const { return buf_[slot(size_ - 1)]; }

  // By value: `v` may be an element of this ring, which a reallocation frees.
  void push_back(T v) {
    if (size_ == cap_) grow();
    buf_[slot(size_)] = v;
    ++size_;
  }
  void pop_front() {
    head_ = head_ + 1 == cap_ ? 0 : head_ + 1;
    --size_;
    if (size_ * 4 < cap_ && cap_ > kMinCapacity) reallocate(cap_ / 2);
  }
  void pop_back() { --size_; }
  // Keeps the first `n` (<= size()).
  void truncate(size_t n) { size_ = n; }
  void clear() {
    std::free(buf_);
    buf_ = nullptr;
    cap_ = head_ = size_ = 0;
  }
  // Room for at least `n` elements without another allocation.
  void reserve(size_t n) {
    if (n > cap_) reallocate(n);
  }
  // Growth by half stops at `n` elements (see the contract).
  void grow_to(size_t n) { expected_ = n; }

  // Puts `v` before element `i` (i <= size()).
  void insert(size_t i, T v) {
    push_back(v);
    for (size_t k = size_ - 1; k > i; --k) (*this)[k] = (*this)[k - 1];
    (*this)[i] = v;
  }
  void erase(size_t i) {
    for (size_t k = i; k + 1 < size_; ++k) (*this)[k] = (*this)[k + 1];
    --size_;
  }

  // The index of the first element for which `before` is false, given that
  // it is true of a prefix and false of the rest (std::partition_point by
  // index): a binary search in O(log n).
  template <typename Before>
  size_t partition_point(Before before) const {
    size_t lo = 0;
    size_t hi = size_;
    while (lo < hi) {
      const size_t mid = lo + (hi - lo) / 2;
      if (before((*this)[mid])) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    return lo;
  }

  // Moves the elements to the start of the array, in place.
  void linearise() {
    if (head_ == 0) return;
    std::rotate(buf_, buf_ + head_, buf_ + cap_);
    head_ = 0;
  }
  // The elements, contiguous once linearised.
  T* data() { return buf_ + head_; }

  template <typename R, typename V>
  class Iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = T;
    using difference_type = std::ptrdiff_t;
    using pointer = V*;
    using reference = V&;
    Iterator(R* ring, size_t i) : ring_(ring), i_(i) {}
    V& operator*() const { return (*ring_)[i_]; }
    V* operator->() const { return &(*ring_)[i_]; }
    Iterator& operator++() {
      ++i_;
      return *this;
    }
    bool operator==(const Iterator& o) const { return i_ == o.i_; }
    bool operator!=(const Iterator& o) const { return i_ != o.i_; }

   private:
    R* ring_;
    size_t i_;
  };
  Iterator<Ring, T> begin() { return {this, 0}; }
  Iterator<Ring, T> end() { return {this, size_}; }
  Iterator<const Ring, const T> begin() const { return {this, 0}; }
  Iterator<const Ring, const T> end() const { return {this, size_}; }

 private:
  size_t slot(size_t i) const {
    const size_t at = head_ + i;
    return at >= cap_ ? at - cap_ : at;
  }
  void grow() {
    size_t next = cap_ < kMinCapacity ? kMinCapacity : cap_ + cap_ / 2;
    if (cap_ < expected_ && next > expected_) next = expected_;
    reallocate(next);
  }
  // To `capacity` (>= size_) elements, linearised.
  void reallocate(size_t capacity) {
    linearise();
    void* moved = std::realloc(buf_, capacity * sizeof(T));
    if (moved == nullptr) std::abort();  // as a failed new would (the engine builds without exceptions)
    buf_ = static_cast<T*>(moved);
    cap_ = capacity;
  }
  void swap(Ring& o) noexcept {
    std::swap(buf_, o.buf_);
    std::swap(cap_, o.cap_);
    std::swap(head_, o.head_);
    std::swap(size_, o.size_);
    std::swap(expected_, o.expected_);
  }

  T* buf_ = nullptr;
  size_t cap_ = 0;
  size_t head_ = 0;
  size_t size_ = 0;
  size_t expected_ = 0;  // grow_to
};

}  // namespace drl::internal
