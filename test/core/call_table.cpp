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
  // Tickets by the slot their probe starts at in a table of 16 slots.
  CallTable sizing;
  sizing.emplace(1, Call{});
  REQUIRE(sizing.capacity() == 16);
  std::map<size_t, std::vector<Ticket>> by_home;
  for (Ticket t = 1; t <= 2000; ++t) by_home[sizing.home(t)].push_back(t);
  const std::vector<Ticket>& at1 = by_home[1];
  const std::vector<Ticket>& at2 = by_home[2];
  const std::vector<Ticket>& at15 = by_home[15];
  REQUIRE(at1.size() >= 4);
  REQUIRE(at2.size() >= 2);
  REQUIRE(at15.size() >= 2);
  // Eight calls in 16 slots, one run that wraps from slot 15 to 0 and on
  // to 6: c0 c1 | a0 a1 a2 a3 b0 b1 (a* start at slot 1, b* at 2, c* at 15).
  const Ticket a0 = at1[0], a1 = at1[1], a2 = at1[2], a3 = at1[3];
  const Ticket b0 = at2[0], b1 = at2[1], c0 = at15[0], c1 = at15[1];
  for (const std::vector<Ticket>& gone :
       {std::vector<Ticket>{a0}, {a1}, {a3}, {b0}, {a0, a2}, {c0}, {c1}, {c0, c1}, {c1, c0}, {b1, c0}}) {
    CallTable calls;
    std::map<Ticket, int32_t> model;
    for (Ticket t : {c0, c1, a0, a1, a2, a3, b0, b1}) {
      calls.emplace(t, with_priority(static_cast<int32_t>(t)));
      model.emplace(t, static_cast<int32_t>(t));
    }
    REQUIRE(calls.capacity() == 16);
    REQUIRE(calls.longest_probe() == 4);  // b1 sits in slot 6, four from its home: the run is as laid out
    for (Ticket t : gone) {
      CHECK(calls.erase(t) == 1);
      model.erase(t);
    }
    check_same(calls, model);
  }
}

TEST_CASE("call table: probes stay short behind a long queue of old calls", "[call_table]") {
  // 10,000 calls that stay (a long queue), then 200,000 that arrive and
  // leave after it, ten at a time: the new tickets pass the old ones'
  // slots many times over. Laid out by ticket mod capacity, the old calls
  // would be one block of 10,000 slots that every new ticket landing in
  // it walks to the end.
  CallTable calls;
  for (Ticket t = 1; t <= 10'000; ++t) calls.emplace(t, Call{});
  size_t longest = calls.longest_probe();
  Ticket next = 10'001;
  for (int batch = 0; batch < 20'000; ++batch) {
    for (int i = 0; i < 10; ++i) calls.emplace(next + static_cast<Ticket>(i), Call{});
    if (batch % 1000 == 0) longest = std::max(longest, calls.longest_probe());
    for (int i = 0; i < 10; ++i) calls.erase(next + static_cast<Ticket>(i));
    next += 10;
  }
  longest = std::max(longest, calls.longest_probe());
  CHECK(calls.size() == 10'000);
  CHECK(longest < 64);
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
