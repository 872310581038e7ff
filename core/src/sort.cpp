// The engine's one sort: see sort.h.
#include "sort.h"

#include <cstdint>

namespace drl::internal {
namespace {

// Indices ordered by their elements, then by the index itself: a strict
// total order, so the heapsort below, which is not stable on its own,
// has only one sorted result, the stable one.
struct After {
  OrderCompare compare;
  const void* ctx;
  // Whether index a goes after index b.
  bool operator()(uint32_t a, uint32_t b) const {
    const int c = compare(ctx, a, b);
    return c > 0 || (c == 0 && a > b);
  }
};

// Restores the max-heap below `root` (its subtrees are heaps) among the
// first n entries. Bottom-up: the hole at the root goes down to a leaf
// along the larger children, then the held entry climbs back to its place,
// about half the comparisons of checking it against both children at every
// level, since a sifted entry usually belongs near the bottom.
void sift_down(uint32_t* heap, uint32_t n, uint32_t root, const After& after) {
  const uint32_t held = heap[root];
  uint32_t hole = root;
  for (;;) {
    const uint64_t first_child = 2 * uint64_t{hole} + 1;  // past 2^32 for n near it
    if (first_child >= n) break;
    auto child = static_cast<uint32_t>(first_child);
    if (child + 1 < n && after(heap[child + 1], heap[child])) ++child;
    heap[hole] = heap[child];
    hole = child;
  }
  while (hole > root) {
    const uint32_t parent = (hole - 1) / 2;
    if (!after(held, heap[parent])) break;
    heap[hole] = heap[parent];
    hole = parent;
  }
  heap[hole] = held;
}

}  // namespace

void stable_order(uint32_t* order, uint32_t n, OrderCompare compare, const void* ctx) {
  for (uint32_t i = 0; i < n; ++i) order[i] = i;
  if (n < 2) return;
  const After after{compare, ctx};
  for (uint32_t i = n / 2; i-- > 0;) sift_down(order, n, i, after);
  // The largest left goes to the end of what is still a heap.
  for (uint32_t end = n - 1; end > 0; --end) {
    const uint32_t largest = order[0];
    order[0] = order[end];
    order[end] = largest;
    sift_down(order, end, 0, after);
  }
}

}  // namespace drl::internal
