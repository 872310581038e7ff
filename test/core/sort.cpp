// The engine's one sort (core/src/sort.h): it sorts as std::stable_sort
// does, equal elements kept in their order, for any input and for element
// types that can only be moved.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "sort.h"

using drl::internal::sort_stable;
using drl::internal::stable_order;

namespace {

// A key and the position it started at: two elements with equal keys must
// come out in their starting order.
struct Keyed {
  int key;
  int position;
  bool operator==(const Keyed& o) const { return key == o.key && position == o.position; }
};

bool by_key(const Keyed& a, const Keyed& b) { return a.key < b.key; }

std::vector<Keyed> numbered(const std::vector<int>& keys) {
  std::vector<Keyed> out;
  for (size_t i = 0; i < keys.size(); ++i) out.push_back({keys[i], static_cast<int>(i)});
  return out;
}

std::vector<Keyed> sorted_by_std(std::vector<Keyed> v) {
  std::stable_sort(v.begin(), v.end(), by_key);
  return v;
}

}  // namespace

TEST_CASE("sort: nothing and one element are left as they are", "[sort]") {
  std::vector<Keyed> none;
  sort_stable(none, by_key);
  CHECK(none.empty());
  std::vector<Keyed> one = numbered({7});
  sort_stable(one, by_key);
  CHECK(one == numbered({7}));
  stable_order(
      nullptr, 0, [](const void*, uint32_t, uint32_t) { return 0; }, nullptr);  // touches nothing
}

TEST_CASE("sort: equal elements keep their order", "[sort]") {
  for (size_t n : {2, 3, 16, 17, 100}) {
    INFO(n);
    std::vector<Keyed> v = numbered(std::vector<int>(n, 4));
    const std::vector<Keyed> before = v;
    sort_stable(v, by_key);
    CHECK(v == before);
  }
}

TEST_CASE("sort: a reversed sequence comes out forwards", "[sort]") {
  std::vector<int> keys;
  for (int k = 50; k > 0; --k) keys.push_back(k);
  std::vector<Keyed> v = numbered(keys);
  sort_stable(v, by_key);
  for (size_t i = 0; i < v.size(); ++i) {
    CHECK(v[i].key == static_cast<int>(i) + 1);
    CHECK(v[i].position == 49 - static_cast<int>(i));
  }
}

TEST_CASE("sort: the same order as std::stable_sort, for random inputs", "[sort]") {
  for (uint32_t seed = 1; seed <= 300; ++seed) {
    std::mt19937 rng(seed);
    const size_t n = rng() % 200;
    // Few distinct keys for some seeds (many ties), many for others.
    const int distinct = 1 + static_cast<int>(rng() % (seed % 3 == 0 ? 4 : 1000));
    std::vector<int> keys(n);
    for (int& k : keys) k = static_cast<int>(rng() % static_cast<uint32_t>(distinct));
    INFO("seed " << seed << ", n " << n);
    std::vector<Keyed> v = numbered(keys);
    sort_stable(v, by_key);
    REQUIRE(v == sorted_by_std(numbered(keys)));
    // The order itself, read from the keys where they are.
    std::vector<uint32_t> order(n);
    stable_order(
        order.data(), static_cast<uint32_t>(n),
        [](const void* ctx, uint32_t a, uint32_t b) {
          const int* k = static_cast<const int*>(ctx);
          return k[a] < k[b] ? -1 : k[b] < k[a] ? 1 : 0;
        },
        keys.data());
    for (size_t i = 0; i < n; ++i) REQUIRE(static_cast<int>(order[i]) == v[i].position);
  }
}

TEST_CASE("sort: elements that can only be moved are moved into place", "[sort]") {
  // Not trivially copyable, not copyable at all: a moved-from element is
  // empty, so an element moved twice or lost would show.
  std::vector<std::pair<int, std::unique_ptr<std::string>>> v;
  std::mt19937 rng(2026);
  for (int i = 0; i < 300; ++i) {
    const int key = static_cast<int>(rng() % 20);
    v.emplace_back(key, std::make_unique<std::string>(std::to_string(key) + "/" + std::to_string(i)));
  }
  sort_stable(v, [](const auto& a, const auto& b) { return a.first < b.first; });
  int last_key = -1, last_position = -1;
  for (const auto& [key, text] : v) {
    REQUIRE(text);
    const int position = std::stoi(text->substr(text->find('/') + 1));
    CHECK(*text == std::to_string(key) + "/" + std::to_string(position));
    CHECK(key >= last_key);
    if (key == last_key) CHECK(position > last_position);
    last_key = key, last_position = position;
  }
  // And a vector inside the element, as the lease sizing's demand levels have.
  std::vector<std::vector<int>> levels{{3, 1}, {1}, {2, 2, 2}, {1, 9}};
  sort_stable(levels, [](const std::vector<int>& a, const std::vector<int>& b) { return a[0] < b[0]; });
  CHECK(levels == std::vector<std::vector<int>>{{1}, {1, 9}, {2, 2, 2}, {3, 1}});
}
