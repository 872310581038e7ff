// The root's ledger of a lease tree (core/src/ledger.h): when each leased
// unit and slot stops counting, to the millisecond; duplicate, stale and
// reordered exchanges; restore; lowered limits; fair shares.
#include <catch2/catch.hpp>

#include "ledger.h"

using drl::internal::Exchange;
using drl::internal::Ledger;
using drl::internal::LedgerConfig;
using drl::internal::LedgerRows;
using drl::internal::Refusal;

namespace {

LedgerConfig one_window(int64_t slack = 0, int64_t ppm = 0) {
  LedgerConfig c;
  c.windows_ms = {1000};
  c.limits = {10};
  c.concurrency = 3;
  c.attempt_timeout_ms = 400;
  c.lease_ms = 200;
  c.clocks = {slack, ppm};
  return c;
}

Exchange ask(uint64_t child, uint64_t seq, int64_t units, int64_t slots = 0, int32_t priority = 0) {
  Exchange ex;
  ex.child = child;
  ex.incarnation = 1;
  ex.seq = seq;
  if (units > 0 || slots > 0) ex.demand = {{priority, {units}, slots}};
  return ex;
}

Exchange close(uint64_t child, uint64_t seq, uint64_t lease, std::vector<drl::internal::UseGroup> uses,
               std::vector<int64_t> running = {}) {
  Exchange ex = ask(child, seq, 0);
  ex.closes = {{lease, {uses}, running}};
  return ex;
}

}  // namespace

TEST_CASE("ledger: a unit returned unused is free at once, a used one at its dated use + T") {
  // S = 5: a use is dated 2S after receipt - age.
  Ledger ledger(one_window(5));
  const auto g = ledger.on_exchange(ask(1, 1, 6), 1000).reply;
  REQUIRE(g->units[0] == 6);
  REQUIRE(ledger.on_exchange(close(1, 2, g->lease_id, {{100, 4}}), 1150).reply);
  // Dated 1150 - 100 + 10 = 1060; the window is 1000 ms, drift 0.
  CHECK(ledger.occupancy(0, 1150) == 4);
  CHECK(ledger.occupancy(0, 2059) == 4);
  CHECK(ledger.occupancy(0, 2060) == 0);
  CHECK(ledger.occupancy(0, 2061) == 0);
}

TEST_CASE("ledger: a report is dated no later than the lease's end at the root") {
  Ledger ledger(one_window(5));
  const auto g = ledger.on_exchange(ask(1, 1, 6), 1000).reply;
  // E = 1000 + (200 + 5) + 5 = 1210; the close comes late, dated at E.
  const auto r = ledger.on_exchange(close(1, 2, g->lease_id, {{10, 6}}), 5000);
  // The row written for the close (the lease is then deleted: long over).
  REQUIRE(r.writes.size() >= 2);
  CHECK(r.writes[0].kind == drl::internal::LedgerWrite::Kind::kPutLease);
  REQUIRE(r.writes[0].lease.uses[0].size() == 1);
  CHECK(r.writes[0].lease.uses[0][0].at == 1210);
  CHECK(r.writes[1].kind == drl::internal::LedgerWrite::Kind::kDeleteLease);
}

TEST_CASE("ledger: an unreported lease counts until its end at the root + T, a late report changes nothing") {
  Ledger ledger(one_window(5, 100));  // drift: T counts as 1001, the lease end as 205 stretched both ways
  const auto g = ledger.on_exchange(ask(1, 1, 6), 1000).reply;
  const int64_t end = 1000 + 206 + 5;  // ceil(205 x 1.0001 / 0.9999) + S
  CHECK(ledger.rows().leases.at(g->lease_id).end_at == end);
  CHECK(ledger.occupancy(0, end + 1001 - 1) == 6);
  CHECK(ledger.occupancy(0, end + 1001) == 0);
  // A report after the units were freed dates them at E at the latest: still free.
  ledger.on_exchange(close(1, 2, g->lease_id, {{0, 6}}), end + 1002);
  CHECK(ledger.occupancy(0, end + 1002) == 0);
}

TEST_CASE("ledger: slots come back idle at once, running at dated start + A, unreported at E + A") {
  Ledger ledger(one_window());
  const auto a = ledger.on_exchange(ask(1, 1, 1, 2), 1000).reply;
  const auto b = ledger.on_exchange(ask(2, 1, 1, 1), 1000).reply;
  REQUIRE(a->slots == 2);
  REQUIRE(b->slots == 1);
  CHECK(ledger.occupancy(1, 1000) == 3);
  // Child 1 closes: one slot idle, one call started 50 ms before it sent.
  ledger.on_exchange(close(1, 2, a->lease_id, {}, {50}), 1100);
  CHECK(ledger.occupancy(1, 1100) == 2);
  CHECK(ledger.occupancy(1, 1050 + 400 - 1) == 2);
  CHECK(ledger.occupancy(1, 1050 + 400) == 1);
  // Child 2 never reports: E = 1000 + 200 = 1200, + A.
  CHECK(ledger.occupancy(1, 1599) == 1);
  CHECK(ledger.occupancy(1, 1600) == 0);
}

TEST_CASE("ledger: a duplicate seq gets the stored reply, an older one nothing but its closes") {
  Ledger ledger(one_window());
  const auto first = ledger.on_exchange(ask(1, 1, 4), 1000);
  const auto again = ledger.on_exchange(ask(1, 1, 4), 1010);
  REQUIRE(again.reply);
  CHECK(again.reply->lease_id == first.reply->lease_id);
  CHECK(again.writes.empty());
  CHECK(ledger.occupancy(0, 1010) == 4);  // not a second lease
  const auto second = ledger.on_exchange(ask(1, 2, 3), 1020).reply;
  CHECK(ledger.occupancy(0, 1020) == 7);
  // A delayed copy of seq 1 that carries a close: no reply, the close applies.
  Exchange late = close(1, 1, second->lease_id, {});
  const auto stale = ledger.on_exchange(late, 1030);
  CHECK(!stale.reply);
  CHECK(ledger.occupancy(0, 1030) == 4);
}

TEST_CASE("ledger: an older incarnation is refused, a newer one starts afresh while the old leases lapse") {
  Ledger ledger(one_window());
  ledger.on_exchange(ask(1, 5, 4), 1000);
  Exchange restarted = ask(1, 1, 2);
  restarted.incarnation = 2;
  const auto fresh = ledger.on_exchange(restarted, 1010).reply;
  CHECK(fresh->refusal == Refusal::kNone);
  CHECK(ledger.occupancy(0, 1010) == 6);  // the old lease still counts
  const auto old = ledger.on_exchange(ask(1, 6, 2), 1020).reply;
  CHECK(old->refusal == Refusal::kStaleIncarnation);
  CHECK(ledger.occupancy(0, 1020) == 6);
}

TEST_CASE("ledger: returns are cumulative, so duplicates and older ones change nothing") {
  Ledger ledger(one_window());
  const auto g = ledger.on_exchange(ask(1, 1, 8), 1000).reply;
  Exchange ret = ask(1, 2, 0);
  ret.returns = {{g->lease_id, {3}, 0}};
  ledger.on_exchange(ret, 1010);
  ledger.on_exchange(ret, 1011);  // the same message again
  CHECK(ledger.occupancy(0, 1011) == 5);
  Exchange older = ask(1, 3, 0);
  older.returns = {{g->lease_id, {2}, 0}};
  CHECK(ledger.on_exchange(older, 1012).writes.size() == 1);  // only the child row
  CHECK(ledger.occupancy(0, 1012) == 5);
}

TEST_CASE("ledger: a lowered limit grants nothing until occupancy falls under it") {
  Ledger ledger(one_window());
  ledger.on_exchange(ask(1, 1, 8), 1000);  // E = 1200, counts until 2200
  ledger.set_limits({5}, 3);
  const auto refused = ledger.on_exchange(ask(2, 1, 1), 1100).reply;
  CHECK(refused->refusal == Refusal::kNothingFree);
  // Ask again in a quarter window at most: closes may free units before 2200.
  CHECK(refused->retry_in_ms == 250);
  const auto later = ledger.on_exchange(ask(2, 2, 1), 2199).reply;
  CHECK(later->refusal == Refusal::kNothingFree);
  CHECK(later->retry_in_ms == 1);
  const auto granted = ledger.on_exchange(ask(2, 3, 7), 2200).reply;
  CHECK(granted->refusal == Refusal::kNone);
  CHECK(granted->units[0] == 5);  // the new limit, not the old
}

TEST_CASE("ledger: short of units it lends the slots alone, and refuses only when it has no slot either") {
  // A child may hold units (a lease of four windows reuses them) and wait
  // for a slot: a refusal for units would leave it none to start them with.
  Ledger ledger(one_window());
  const auto first = ledger.on_exchange(ask(1, 1, 10, 1), 1000).reply;
  REQUIRE(first->units[0] == 10);
  const auto slots = ledger.on_exchange(ask(2, 1, 3, 1), 1010).reply;
  CHECK(slots->refusal == Refusal::kNone);
  CHECK(slots->units[0] == 0);
  CHECK(slots->slots == 1);
  // When to ask for units again: a quarter window at most, as a refusal.
  CHECK(slots->retry_in_ms == 250);
  // What it still wants of units counts for the others' shares.
  const auto views = ledger.children(1010);
  REQUIRE(views.size() == 2);
  CHECK(views[1].wanted == std::vector<int64_t>{3, 0});
  CHECK(ledger.on_exchange(ask(3, 1, 1, 1), 1020).reply->slots == 1);
  // No unit and no slot free: a refusal, as before.
  const auto refused = ledger.on_exchange(ask(4, 1, 1, 1), 1030).reply;
  CHECK(refused->refusal == Refusal::kNothingFree);
  CHECK(refused->slots == 0);
}

TEST_CASE("ledger: every reply says how many slots the other children want beyond those free") {
  Ledger ledger(one_window());
  const auto holder = ledger.on_exchange(ask(1, 1, 1, 3), 1000).reply;
  REQUIRE(holder->slots == 3);
  CHECK(holder->slots_wanted == 0);
  // Child 2 wants 2 slots and none is free (it gets its unit); its own
  // want does not count in its reply.
  const auto unit = ledger.on_exchange(ask(2, 1, 1, 2), 1001).reply;
  REQUIRE(unit->slots == 0);
  CHECK(unit->slots_wanted == 0);
  // Child 1's next reply says so; child 1's own granted ask wants nothing more.
  CHECK(ledger.on_exchange(ask(1, 2, 0), 1002).reply->slots_wanted == 2);
  // Its resent reply too, as it leaves.
  CHECK(ledger.on_exchange(ask(1, 2, 0), 1003).reply->slots_wanted == 2);
  // A demand is forgotten after demand_ttl_ms, and with it the want.
  CHECK(ledger.on_exchange(ask(1, 3, 0), 1001 + 10'000).reply->slots_wanted == 0);
}

TEST_CASE("ledger: max-min fair shares, higher priorities first, never more than asked") {
  Ledger ledger(one_window());
  // Two children ask while nothing is free: their demand is recorded.
  ledger.set_limits({0}, 3);
  CHECK(ledger.on_exchange(ask(2, 1, 10, 0, /*priority=*/1), 1000).reply->refusal == Refusal::kNothingFree);
  CHECK(ledger.on_exchange(ask(3, 1, 3), 1000).reply->refusal == Refusal::kNothingFree);
  ledger.set_limits({12}, 3);
  // 12 free: child 2's 10 at priority 1 first; the 2 left are split between
  // child 3 and child 1 at priority 0.
  CHECK(ledger.on_exchange(ask(1, 1, 10), 1001).reply->units[0] == 1);
}

TEST_CASE("ledger: equal priorities split what is free, and no one gets more than it asked") {
  Ledger ledger(one_window());
  ledger.set_limits({0}, 3);
  ledger.on_exchange(ask(2, 1, 10), 1000);
  ledger.set_limits({12}, 3);
  CHECK(ledger.on_exchange(ask(1, 1, 10), 1001).reply->units[0] == 6);
  CHECK(ledger.on_exchange(ask(3, 1, 2), 1002).reply->units[0] == 2);
}

TEST_CASE("ledger: two levels of one child at one priority are one want, granted in full while there is room") {
  // A child's queue and its stock go at the same priority: 1 unit and 1
  // slot for a queued call, 6 units and 1 slot of stock. With room for all
  // of it, it gets all of it (each level capped at the other's water level,
  // it got 6 units and 1 slot).
  Ledger ledger(one_window());
  Exchange ex = ask(1, 1, 1, 1);
  ex.demand.push_back({0, {6}, 1});
  const auto g = ledger.on_exchange(ex, 1000).reply;
  REQUIRE(g->refusal == Refusal::kNone);
  CHECK(g->units[0] == 7);
  CHECK(g->slots == 2);
  // Short of room, the same want is split with a sibling at that priority.
  Ledger split(one_window());
  split.set_limits({0}, 3);
  CHECK(split.on_exchange(ask(2, 1, 10), 1000).reply->refusal == Refusal::kNothingFree);
  split.set_limits({8}, 3);
  CHECK(split.on_exchange(ex, 1001).reply->units[0] == 4);
}

TEST_CASE("ledger: what is free goes to the child furthest below its share, none held back for one at it") {
  Ledger ledger(one_window());
  // Child 1 holds 6 and still wants 10; child 2 holds none.
  ledger.set_limits({6}, 3);
  CHECK(ledger.on_exchange(ask(1, 1, 6), 1000).reply->units[0] == 6);
  CHECK(ledger.on_exchange(ask(1, 2, 10), 1001).reply->refusal == Refusal::kNothingFree);
  ledger.set_limits({10}, 3);
  // The 4 free all go to child 2: it is 6 below child 1, which holds its
  // share already (split evenly, 2 would sit idle until child 1 asks).
  CHECK(ledger.on_exchange(ask(2, 1, 10), 1002).reply->units[0] == 4);
}

TEST_CASE("ledger: every reply says how many units the other children want beyond those free") {
  LedgerConfig c = one_window();
  c.windows_ms = {1000, 60'000};
  c.limits = {10, 100};
  Ledger ledger(c);
  const auto two = [](uint64_t child, uint64_t seq, int64_t first, int64_t second) {
    Exchange ex = ask(child, seq, 0);
    if (first > 0 || second > 0) ex.demand = {{0, {first, second}, 0}};
    return ex;
  };
  const auto holder = ledger.on_exchange(two(1, 1, 8, 8), 1000).reply;
  REQUIRE(holder->units == std::vector<int64_t>{8, 8});
  CHECK(holder->units_wanted == 0);
  // Child 2 wants 5 and 50: it gets 2 and 50, and still wants 3 of the
  // first window; its own want does not count in its reply.
  const auto short_grant = ledger.on_exchange(two(2, 1, 5, 50), 1001).reply;
  REQUIRE(short_grant->units == std::vector<int64_t>{2, 50});
  CHECK(short_grant->units_wanted == 0);
  // Child 3 wants 50 of the second: it gets the 42 left and wants 8 more.
  CHECK(ledger.on_exchange(two(3, 1, 0, 50), 1002).reply->units_wanted == 3);
  // Child 1's next reply: 3 beyond the none free of the first window, 8 of
  // the second; the window where that is most says it.
  CHECK(ledger.on_exchange(two(1, 2, 0, 0), 1003).reply->units_wanted == 8);
  CHECK(ledger.on_exchange(two(2, 2, 0, 0), 1004).reply->units_wanted == 8);  // child 3's alone
  // Forgotten after demand_ttl_ms, and with it the want.
  CHECK(ledger.on_exchange(two(1, 3, 0, 0), 1002 + 10'000).reply->units_wanted == 0);
}

TEST_CASE("ledger: a long window lends for longer, never below lease_ms nor above max_lease_ms") {
  LedgerConfig c = one_window();
  c.windows_ms = {60'000};
  c.lease_ms = 2000;
  c.max_lease_ms = 20'000;
  Ledger ledger(c);
  CHECK(ledger.on_exchange(ask(1, 1, 1), 1000).reply->duration_ms == 20'000);  // half the window, capped
  c.windows_ms = {1000};
  Ledger short_window(c);
  CHECK(short_window.on_exchange(ask(1, 1, 1), 1000).reply->duration_ms == 2000);  // never below lease_ms
}

TEST_CASE("ledger: a far child is lent for 32 of its round trips, within lease_ms and max_lease_ms") {
  LedgerConfig c = one_window();
  c.windows_ms = {1000};
  c.lease_ms = 2000;
  c.max_lease_ms = 30'000;
  c.limits = {100};
  Ledger ledger(c);
  const auto lent = [&](uint64_t child, int64_t round_trip) {
    Exchange ex = ask(child, 1, 1);
    ex.round_trip_ms = round_trip;
    return ledger.on_exchange(ex, 1000).reply->duration_ms;
  };
  CHECK(lent(1, 0) == 2000);    // none measured yet: lease_ms
  CHECK(lent(2, 62) == 2000);   // 1984: below lease_ms
  CHECK(lent(3, 63) == 2016);   // 32 round trips
  CHECK(lent(4, 300) == 9600);  // 150 ms away
  CHECK(lent(5, 937) == 29'984);
  CHECK(lent(6, 938) == 30'000);  // capped at max_lease_ms
  CHECK(lent(7, 9'007'199'254'740'991) == 30'000);
  // Stats show each child's round trip and lease length (by child id).
  const auto views = ledger.children(1000);
  REQUIRE(views.size() == 7);
  CHECK(views[0].tally.round_trip_ms == 0);
  CHECK(views[0].tally.lease_ms == 2000);
  CHECK(views[3].tally.round_trip_ms == 300);
  CHECK(views[3].tally.lease_ms == 9600);
  // The root counts the lease that long: unreported, its units stay
  // counted a window past its end, not past a lease_ms lease's.
  Ledger one(c);
  Exchange far = ask(1, 1, 4);
  far.round_trip_ms = 300;
  REQUIRE(one.on_exchange(far, 1000).reply->units[0] == 4);
  CHECK(one.occupancy(0, 1000 + c.clocks.lease_end_extra(2000) + 1000) == 4);
  CHECK(one.occupancy(0, 1000 + c.clocks.lease_end_extra(9600) + 999) == 4);
  // maxLeaseMs 0 (or at most leaseMs): every lease lasts leaseMs.
  c.max_lease_ms = 0;
  Ledger fixed(c);
  Exchange ex = ask(1, 1, 1);
  ex.round_trip_ms = 300;
  CHECK(fixed.on_exchange(ex, 1000).reply->duration_ms == 2000);
}

TEST_CASE("ledger: a malformed exchange is refused naming what was wrong, and nothing is stored") {
  Ledger ledger(one_window());
  Exchange bad = ask(1, 1, 2);
  bad.demand[0].units = {2, 3};
  const auto r = ledger.on_exchange(bad, 1000);
  CHECK(r.reply->refusal == Refusal::kMalformed);
  CHECK(r.error.find("demand[0].units has 2 windows") != std::string::npos);
  CHECK(r.writes.empty());
  CHECK(ledger.rows().children.empty());
}

TEST_CASE("ledger: time going backwards counts as the newest reading") {
  Ledger ledger(one_window());
  const auto g = ledger.on_exchange(ask(1, 1, 6), 5000).reply;
  ledger.on_exchange(close(1, 2, g->lease_id, {{0, 6}}), 100);  // dated at 5000, not 100
  CHECK(ledger.occupancy(0, 5999) == 6);
  CHECK(ledger.occupancy(0, 6000) == 0);
}

TEST_CASE("ledger: the rows it writes restore the same decisions") {
  Ledger ledger(one_window(3, 50));
  LedgerRows stored;
  const auto step = [&](const Exchange& ex, int64_t now) {
    auto r = ledger.on_exchange(ex, now);
    for (const auto& w : r.writes) stored.apply(w);
    CHECK(stored == ledger.rows());
    return r;
  };
  const auto a = step(ask(1, 1, 4, 1), 1000).reply;
  const auto b = step(ask(2, 1, 3, 1, 2), 1005).reply;
  step(close(1, 2, a->lease_id, {{20, 2}}, {5}), 1100);
  Exchange ret = ask(2, 2, 1);
  ret.returns = {{b->lease_id, {1}, 1}};
  step(ret, 1110);
  step(ask(3, 1, 9, 2), 1120);  // pruning and demand at work

  Ledger restored(one_window(3, 50));
  restored.restore(stored, 1120);
  CHECK(restored.rows() == ledger.rows());
  // The same exchanges now get the same answers and the same rows.
  for (const auto& ex : {ask(1, 3, 5, 1), ask(2, 2, 1), ask(3, 2, 2)}) {
    const auto x = ledger.on_exchange(ex, 1500);
    const auto y = restored.on_exchange(ex, 1500);
    REQUIRE(x.reply.has_value() == y.reply.has_value());
    if (x.reply) {
      CHECK(x.reply->lease_id == y.reply->lease_id);
      CHECK(x.reply->units == y.reply->units);
      CHECK(x.reply->slots == y.reply->slots);
      CHECK(x.reply->refusal == y.reply->refusal);
    }
    CHECK(x.writes.size() == y.writes.size());
  }
  CHECK(restored.rows() == ledger.rows());
  // After the leases lapse, every row of them is deleted.
  Ledger later(one_window(3, 50));
  later.restore(ledger.rows(), 1500);
  LedgerRows after = ledger.rows();
  for (const auto& w : later.on_exchange(ask(4, 1, 0), 100'000).writes) after.apply(w);
  CHECK(after.leases.empty());
}

TEST_CASE("ledger: a reported 429 comes back as a notice once, and every reply carries what is left") {
  Ledger ledger(one_window(/*slack=*/10, /*ppm=*/0));
  Exchange report = ask(1, 1, 2);
  report.penalty_ms = 1000;
  const auto first = ledger.on_exchange(report, 5000);
  REQUIRE(first.notice);
  CHECK(first.notice->penalty_ms == 1000);
  CHECK(first.reply->penalty_ms == 1000 + 10);  // its receipt reading may lag by S
  // A duplicate that ends no later is no news.
  CHECK(!ledger.on_exchange(report, 5000).notice);
  // A sibling's reply 400 ms later: at most 1000 + S - 400 left.
  const auto sibling = ledger.on_exchange(ask(2, 1, 1), 5400);
  CHECK(!sibling.notice);
  CHECK(sibling.reply->penalty_ms == 1000 + 10 - 400);
  CHECK(ledger.penalty_left(5000 + 1010) == 0);
  Exchange bad = ask(3, 1, 1);
  bad.penalty_ms = -1;
  CHECK(ledger.on_exchange(bad, 6000).error == "lease exchange refused: penalty_ms is negative");
}

TEST_CASE("ledger: floors are lent to no one, and a config whose floors pass a limit is refused") {
  LedgerConfig c = one_window();
  c.floors[1] = {{3}, 1};
  c.floors[2] = {{3}, 1};
  CHECK(Ledger::check_config(c).empty());
  Ledger ledger(c);
  const auto g = ledger.on_exchange(ask(3, 1, 10, 3), 1000).reply;
  CHECK(g->units[0] == 10 - 6);
  CHECK(g->slots == 3 - 2);
  c.floors[3] = {{5}, 0};
  CHECK(Ledger::check_config(c) ==
        "lease config refused: floors reserve 11 units of window 0 (1000 ms), above its limit 10");
}

TEST_CASE("ledger: children() splits what counts for each child into held, used and lapsed") {
  // S = 0, drift 0: a use reported with age a at receipt r is dated r - a.
  Ledger ledger(one_window());
  const auto a = ledger.on_exchange(ask(1, 1, 6, 1), 1000).reply;  // E = 1200
  const auto b = ledger.on_exchange(ask(2, 1, 3), 1000).reply;     // E = 1200, never reported
  REQUIRE(a->units[0] == 6);
  REQUIRE(b->units[0] == 3);
  // Child 1 returns 2 unused, then closes having used 3 (1 more left over), its slot idle.
  Exchange ret = ask(1, 2, 0);
  ret.returns = {{a->lease_id, {2}, 0}};
  ledger.on_exchange(ret, 1050);
  auto views = ledger.children(1050);
  REQUIRE(views.size() == 2);
  CHECK(views[0].child == 1);
  CHECK(views[0].held == std::vector<int64_t>{4, 1});
  CHECK(views[0].tally.returned == std::vector<int64_t>{2, 0});
  ledger.on_exchange(close(1, 3, a->lease_id, {{20, 3}}), 1100);

  views = ledger.children(1100);
  const auto& one = views[0];
  const auto& two = views[1];
  CHECK(one.held == std::vector<int64_t>{0, 0});
  CHECK(one.used == std::vector<int64_t>{3, 0});
  CHECK(one.lapsed == std::vector<int64_t>{0, 0});
  CHECK(one.tally.granted == std::vector<int64_t>{6, 1});
  CHECK(one.tally.returned == std::vector<int64_t>{3, 1});  // 2 returned, then 1 unit and the slot at the close
  CHECK(one.tally.used == std::vector<int64_t>{3, 0});
  CHECK(one.tally.exchanges == 3);
  CHECK(two.held == std::vector<int64_t>{3, 0});
  // Every unit the ledger counts is someone's.
  CHECK(one.held[0] + one.used[0] + one.lapsed[0] + two.held[0] + two.used[0] + two.lapsed[0] ==
        ledger.occupancy(0, 1100));

  // Past E = 1200 child 2's lease lapsed: still counted until E + T.
  views = ledger.children(1200);
  CHECK(views[1].held == std::vector<int64_t>{0, 0});
  CHECK(views[1].lapsed == std::vector<int64_t>{3, 0});
  CHECK(ledger.children(2199)[1].lapsed[0] == 3);
  CHECK(ledger.children(2200)[1].lapsed[0] == 0);
  // Child 1's uses, dated 1080, leave the window at 2080.
  CHECK(ledger.children(2079)[0].used[0] == 3);
  CHECK(ledger.children(2080)[0].used[0] == 0);
}

TEST_CASE("ledger: children() counts a restarted child's old leases as lapsed, and what it still wants") {
  Ledger ledger(one_window());
  ledger.on_exchange(ask(1, 1, 4), 1000);
  Exchange restarted = ask(1, 1, 8);  // wants 8, 6 are free
  restarted.incarnation = 2;
  const auto fresh = ledger.on_exchange(restarted, 1010).reply;
  REQUIRE(fresh->units[0] == 6);
  const auto views = ledger.children(1010);
  REQUIRE(views.size() == 1);
  CHECK(views[0].incarnation == 2);
  CHECK(views[0].held[0] == 6);
  CHECK(views[0].lapsed[0] == 4);  // the first incarnation's lease never closes
  CHECK(views[0].wanted[0] == 2);  // asked 8, granted 6
  // A demand the ledger has forgotten (demand_ttl_ms) is no longer wanted.
  CHECK(ledger.children(1010 + 10'000)[0].wanted[0] == 0);
}
