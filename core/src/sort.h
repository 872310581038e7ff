// Sorting in the engine: one sort, not a template per call site, and the
// same order natively and in core.wasm.
//
// Why it exists: every std::sort or std::stable_sort is a copy of the sort
// (its partition, insertion sort and sorting networks) for the element type
// and comparison at hand; the engine's eight of them were 14 KB of
// core.wasm. And std::sort leaves the order of equal elements to the
// library: libstdc++ (the native tests) and libc++ (core.wasm) put them
// differently, so the same input could come out in two orders.
//
// Contract:
// - stable_order() fills `order` with the permutation that sorts n
//   elements: order[k] is the index of the element that goes k-th. The
//   comparison is three-way on indices (negative: a's element goes first,
//   0: equal, positive: b's goes first); equal elements keep their index
//   order, so the result is stable and the same on every platform. It is
//   a heapsort: O(n log n) comparisons, whatever the input, and no memory
//   beyond `order`.
// - sort_stable() sorts elements in place with a strict weak order `less`,
//   as std::stable_sort would: it computes the order above and then moves
//   the elements into place along the permutation's cycles, one element
//   held aside at a time, so no second copy of the elements is made (only
//   the 4-byte index of each, which a large sliding log can afford). The
//   elements need only be movable.
// - Not for the per-take path: every comparison is a call through a
//   pointer. It serves restores, lease sizing and stats.
//
// Example:
//   std::vector<std::pair<int, char>> v{{2, 'a'}, {1, 'b'}, {2, 'c'}, {1, 'd'}};
//   drl::internal::sort_stable(v, [](const auto& x, const auto& y) { return x.first < y.first; });
//   assert((v == std::vector<std::pair<int, char>>{{1, 'b'}, {1, 'd'}, {2, 'a'}, {2, 'c'}}));
//   const int64_t keys[] = {30, 10, 20};
//   uint32_t order[3];
//   drl::internal::stable_order(order, 3, [](const void* ctx, uint32_t a, uint32_t b) {
//     const int64_t* k = static_cast<const int64_t*>(ctx);
//     return k[a] < k[b] ? -1 : k[b] < k[a] ? 1 : 0;
//   }, keys);
//   assert((order[0] == 1 && order[1] == 2 && order[2] == 0));  // 10, 20, 30
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <utility>
#include <vector>

namespace drl::internal {

// Three-way: < 0 when element a goes before element b, > 0 when after, 0
// when they are equal (then the lower index goes first).
using OrderCompare = int (*)(const void* ctx, uint32_t a, uint32_t b);

// See the contract above. `order` holds n entries; n < 2^32.
void stable_order(uint32_t* order, uint32_t n, OrderCompare compare, const void* ctx);

template <typename T, typename Less>
void sort_stable(T* first, T* last, Less less) {
  const size_t size = static_cast<size_t>(last - first);
  if (size < 2) return;
  // Indices are 4 bytes, a quarter of a 16-byte grant: an array this long
  // could not be in memory (core.wasm's is at most 4 GiB).
  if (size > UINT32_MAX) std::abort();
  const auto n = static_cast<uint32_t>(size);
  struct Context {
    const T* first;
    Less* less;
  } context{first, &less};
  std::vector<uint32_t> order(n);
  stable_order(
      order.data(), n,
      [](const void* ctx, uint32_t a, uint32_t b) {
        const auto& c = *static_cast<const Context*>(ctx);
        if ((*c.less)(c.first[a], c.first[b])) return -1;
        return (*c.less)(c.first[b], c.first[a]) ? 1 : 0;
      },
      &context);
  // Position k takes the element at order[k]. Along each cycle, the first
  // element is held aside and the others move up one by one; a placed
  // position is marked by order[k] == k.
  for (uint32_t start = 0; start < n; ++start) {
    if (order[start] == start) continue;
    T held = std::move(first[start]);
    uint32_t k = start;
    for (;;) {
      const uint32_t from = order[k];
      order[k] = k;
      if (from == start) {
        first[k] = std::move(held);
        break;
      }
      first[k] = std::move(first[from]);
      k = from;
    }
  }
}

template <typename T, typename Less>
void sort_stable(std::vector<T>& v, Less less) {
  sort_stable(v.data(), v.data() + v.size(), less);
}

}  // namespace drl::internal
