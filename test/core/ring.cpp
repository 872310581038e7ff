// The ring buffer under the sliding log and the slots record: it keeps order
// through wraps, growth and shrinking (checked against a std::deque driven
// the same way), stops growing at the length it was told to expect, and
// gives memory back as it empties.
#include <catch2/catch.hpp>

#include <cstdint>
#include <deque>
#include <random>

#include "ring.h"

using drl::internal::Ring;

namespace {

void require_same(const Ring<int64_t>& ring, const std::deque<int64_t>& model) {
  REQUIRE(ring.size() == model.size());
  for (size_t i = 0; i < model.size(); ++i) REQUIRE(ring[i] == model[i]);
}

}  // namespace

TEST_CASE("a ring holds what a deque holds through any mix of pushes, pops, inserts and erases", "[ring]") {
  std::mt19937_64 rng(20261203);
  for (int round = 0; round < 50; ++round) {
    Ring<int64_t> ring;
    std::deque<int64_t> model;
    if (round % 2 == 1) ring.grow_to(40 + round);
    for (int step = 0; step < 2000; ++step) {
      const auto v = static_cast<int64_t>(rng() % 1000);
      switch (rng() % 7) {
        case 0:
        case 1:
        case 2:
          ring.push_back(v);
          model.push_back(v);
          break;
        case 3:
          if (!model.empty()) {
            ring.pop_front();
            model.pop_front();
          }
          break;
        case 4:
          if (!model.empty()) {
            ring.pop_back();
            model.pop_back();
          }
          break;
        case 5: {
          const size_t at = rng() % (model.size() + 1);
          ring.insert(at, v);
          model.insert(model.begin() + static_cast<std::ptrdiff_t>(at), v);
          break;
        }
        default:
          if (!model.empty()) {
            const size_t at = rng() % model.size();
            ring.erase(at);
            model.erase(model.begin() + static_cast<std::ptrdiff_t>(at));
          }
      }
    }
    require_same(ring, model);
    const Ring<int64_t> copy = ring;
    require_same(copy, model);
    ring.linearise();
    for (size_t i = 0; i < model.size(); ++i) REQUIRE(ring.data()[i] == model[i]);
  }
}

TEST_CASE("a ring told its expected length holds exactly that many when full", "[ring]") {
  Ring<int64_t> ring;
  ring.grow_to(1000);
  for (int64_t i = 0; i < 1000; ++i) ring.push_back(i);
  REQUIRE(ring.capacity() == 1000);  // not the 1.5x a growth by half would reach
  ring.push_back(1000);              // past it, it still grows
  REQUIRE(ring.capacity() == 1500);
  REQUIRE(ring.back() == 1000);
  REQUIRE(ring.front() == 0);
}

TEST_CASE("a ring that wrapped keeps its order when it grows", "[ring]") {
  Ring<int64_t> ring;
  for (int64_t i = 0; i < 16; ++i) ring.push_back(i);
  for (int i = 0; i < 10; ++i) ring.pop_front();
  for (int64_t i = 16; i < 26; ++i) ring.push_back(i);  // wraps: 6 at the back of the array, 10 at its front
  REQUIRE(ring.capacity() == 16);
  ring.push_back(26);  // a growth from the wrapped state
  REQUIRE(ring.capacity() > 16);
  REQUIRE(ring.size() == 17);
  for (size_t i = 0; i < ring.size(); ++i) REQUIRE(ring[i] == static_cast<int64_t>(10 + i));
}

TEST_CASE("a ring that empties from the front gives its array back", "[ring]") {
  Ring<int64_t> ring;
  for (int64_t i = 0; i < 100000; ++i) ring.push_back(i);
  const size_t full = ring.capacity();
  REQUIRE(full >= 100000);
  while (ring.size() > 10) ring.pop_front();
  REQUIRE(ring.capacity() <= 4 * Ring<int64_t>::kMinCapacity);
  for (size_t i = 0; i < ring.size(); ++i) REQUIRE(ring[i] == static_cast<int64_t>(99990 + i));
  ring.clear();
  REQUIRE(ring.capacity() == 0);
  REQUIRE(ring.empty());
}
