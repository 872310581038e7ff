// The calls by ticket on their own (CallTable in core/src/call.h): the
// lookups the engine makes, erasure in the middle of a probe run, growth
// and shrinking, and the same answers as std::map over random operations.
#include <catch2/catch.hpp>
#include <map>
#include <random>
#include <vector>

#include "call.h"

using namespace drl;
using namespace drl::internal;

namespace {

Call with_priority(int32_t p) {
  Call c;
  c.priority = p;
  return c;
}

// Every ticket the table holds, each with its priority, checked against `model`.
void check_same(const CallTable& table, const std::map<Ticket, int32_t>& model) {
  REQUIRE(table.size() == model.size());
  REQUIRE(table.empty() == model.empty());
  std::map<Ticket, int32_t> seen;
  for (const auto& [t, c] : table) seen.emplace(t, c.priority);
  REQUIRE(seen == model);
  for (const auto& [t, p] : model) {
    REQUIRE(table.count(t) == 1);
    REQUIRE(table.find(t) != table.end());
    REQUIRE(table.at(t).priority == p);
  }
}

}  // namespace

TEST_CASE("call table: find, emplace, [] and erase by ticket", "[call_table]") {
  CallTable calls;
  CHECK(calls.empty());
  CHECK(calls.find(1) == calls.end());
  CHECK(calls.count(1) == 0);
  CHECK(calls.erase(1) == 0);
  CHECK_FALSE(calls.extract(1));

  auto [it, added] = calls.emplace(7, with_priority(3));
  CHECK(added);
  CHECK(it->first == 7);
  CHECK(it->second.priority == 3);
  // A second emplace of the same ticket leaves the first call in place.
  auto again = calls.emplace(7, with_priority(9));
  CHECK_FALSE(again.second);
  CHECK(again.first->second.priority == 3);
  CHECK(calls.size() == 1);

  // [] adds a default call for a ticket it does not hold.
  calls[8].priority = 4;
  CHECK(calls.at(8).priority == 4);
  CHECK(calls.size() == 2);

  calls.erase(calls.find(7));
  CHECK(calls.count(7) == 0);
  CHECK(calls.size() == 1);
  CHECK(calls.erase(8) == 1);
  CHECK(calls.empty());
  CHECK(calls.begin() == calls.end());
}

TEST_CASE("call table: a call's reference and node outlive growth, and extract keeps it", "[call_table]") {
  CallTable calls;
  Call& first = calls.emplace(1, with_priority(11)).first->second;
  // 16 slots at first; 1,000 calls make it grow six times.
  for (Ticket t = 2; t <= 1000; ++t) calls.emplace(t, with_priority(1));
  CHECK(&calls.at(1) == &first);
  CHECK(first.priority == 11);

  CallTable::Node node = calls.extract(1);
  REQUIRE(node);
  CHECK(&node->second == &first);  // the same memory, out of the table
  CHECK(calls.count(1) == 0);
  // Reused under another ticket, as the scheduler reuses spare nodes.
  node->first = 5000;
  node->second.priority = 12;
  Call& back = calls.insert(std::move(node));
  CHECK(&back == &first);
  CHECK(calls.at(5000).priority == 12);
}

TEST_CASE("call table: erasing from a probe run keeps every later entry reachable", "[call_table]") {
  // Eight calls in 16 slots: 1, 17, 33 and 49 share slot 1, 2 and 18 slot
  // 2, 15 and 31 slot 15, so they make one run that wraps from slot 15 to
  // 0: 15 31 | 1 17 33 49 2 18.
  for (const std::vector<Ticket>& gone :
       {std::vector<Ticket>{1}, {17}, {49}, {2}, {1, 33}, {15}, {31}, {15, 31}, {31, 15}, {18, 15}}) {
    CallTable calls;
    std::map<Ticket, int32_t> model;
    for (Ticket t : {1, 17, 33, 49, 2, 18, 15, 31}) {
      calls.emplace(t, with_priority(static_cast<int32_t>(t)));
      model.emplace(t, static_cast<int32_t>(t));
    }
    REQUIRE(calls.capacity() == 16);
    for (Ticket t : gone) {
      CHECK(calls.erase(t) == 1);
      model.erase(t);
    }
    check_same(calls, model);
  }
}

TEST_CASE("call table: a burst shrinks back when it drains", "[call_table]") {
  CallTable calls;
  std::map<Ticket, int32_t> model;
  for (Ticket t = 1; t <= 100'000; ++t) calls.emplace(t, with_priority(0));
  CHECK(calls.capacity() == 262'144);  // at most half full
  // Drained out of order: every other ticket first, then the rest.
  for (Ticket t = 2; t <= 100'000; t += 2) calls.erase(t);
  for (Ticket t = 1; t <= 99'990; t += 2) calls.erase(t);
  for (Ticket t = 99'991; t <= 100'000; t += 2) model.emplace(t, 0);
  check_same(calls, model);
  // Five calls left: 32 slots (halved while under 1/8 full), and it still serves.
  CHECK(calls.capacity() == 32);
  for (Ticket t = 100'001; t <= 100'020; ++t) {
    calls.emplace(t, with_priority(1));
    model.emplace(t, 1);
  }
  check_same(calls, model);
}

TEST_CASE("call table: the same answers as std::map over random operations", "[call_table]") {
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    std::mt19937 rng(seed);
    CallTable calls;
    std::map<Ticket, int32_t> model;
    std::vector<CallTable::Node> spare;
    Ticket next = 1 + rng() % 1000;
    for (int step = 0; step < 3000; ++step) {
      const uint32_t op = rng() % 10;
      if (op < 5 || model.empty()) {
        // A new ticket, now and then after a gap (as after a restart).
        next += rng() % 20 == 0 ? 1 + rng() % 5000 : 1;
        const auto p = static_cast<int32_t>(rng() % 100);
        if (!spare.empty() && rng() % 2) {
          CallTable::Node node = std::move(spare.back());
          spare.pop_back();
          node->first = next;
          node->second.priority = p;
          calls.insert(std::move(node));
        } else {
          calls.emplace(next, with_priority(p));
        }
        model.emplace(next, p);
      } else {
        // Any live ticket, old ones included.
        auto victim = model.begin();
        std::advance(victim, static_cast<long>(rng() % model.size()));
        const Ticket t = victim->first;
        if (op < 8) {
          REQUIRE(calls.erase(t) == 1);
        } else {
          CallTable::Node node = calls.extract(t);
          REQUIRE(node);
          REQUIRE(node->first == t);
          if (spare.size() < 8) spare.push_back(std::move(node));
        }
        model.erase(victim);
      }
      if (step % 100 == 0) check_same(calls, model);
    }
    check_same(calls, model);
  }
}
