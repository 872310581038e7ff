// A child's lease holder (core/src/lease_holder.h): when a lease ends by the
// child's own clock, what a close states, resends, slots and their timeout.
#include <catch2/catch.hpp>

#include "lease_holder.h"

using drl::internal::Exchange;
using drl::internal::HolderConfig;
using drl::internal::LeaseGrant;
using drl::internal::LeaseHolder;
using drl::internal::Refusal;

namespace {

HolderConfig config(int64_t slack = 0, int64_t ppm = 0) {
  HolderConfig c;
  c.child = 4;
  c.incarnation = 2;
  c.windows = 1;
  c.attempt_timeout_ms = 1000;
  c.retry_ms = 300;
  c.idle_ms = 5000;
  c.stock_ms = 0;
  c.max_groups = 2;
  c.close_within_ms = 200;
  c.clocks = {slack, ppm};
  return c;
}

LeaseGrant lease(const Exchange& ex, uint64_t id, int64_t units, int64_t slots, int64_t duration) {
  LeaseGrant g;
  g.child = ex.child;
  g.incarnation = ex.incarnation;
  g.seq = ex.seq;
  g.lease_id = id;
  g.units = {units};
  g.slots = slots;
  g.duration_ms = duration;
  return g;
}

// Queues a call of `units` and `slots` at `now`: the exchange that asks for it.
Exchange ask(LeaseHolder& h, int64_t units, int64_t slots, int64_t now) {
  h.set_queued({{0, {units}, slots}}, now);
  auto ex = h.next_exchange(now);
  REQUIRE(ex);
  return *ex;
}

// A holder whose use rate is read over `rate_ms` and that refreshes only
// when sizing says so (no refresh_ms timer).
HolderConfig paced(int64_t rate_ms) {
  HolderConfig c = config();
  c.rate_ms = rate_ms;
  c.refresh_ms = 0;
  return c;
}

// Answers `asked` with lease 9 of `units` and `slots` for `duration` at
// `now`, and empties the queue: what it holds is then all there is.
void grant(LeaseHolder& h, const Exchange& asked, int64_t units, int64_t slots, int64_t duration, int64_t now) {
  h.on_grant(lease(asked, 9, units, slots, duration), now);
  h.set_queued({}, now);
}

// Starts a call of one unit every `every` ms from `from` until before
// `until`, each releasing its slot `runs` ms after its start.
void calls_one_at_a_time(LeaseHolder& h, int64_t from, int64_t until, int64_t every, int64_t runs) {
  for (int64_t t = from; t < until; t += every) {
    const auto call = h.slot_acquire(t);
    REQUIRE(call);
    REQUIRE(h.take({1}, t));
    h.slot_release(*call, t + runs);
  }
}

}  // namespace

TEST_CASE("lease holder: a lease ends at the first send + its duration, by the child's clock") {
  LeaseHolder h(config());
  const Exchange ex = ask(h, 5, 1, 1000);
  // Lost reply: the same message again after retry_ms, not before.
  CHECK(!h.next_exchange(1299));
  const auto resent = h.next_exchange(1300);
  REQUIRE(resent);
  CHECK(resent->seq == ex.seq);
  h.on_grant(lease(ex, 9, 5, 1, 500), 1400);
  // From the first send (1000), not the resend, nor the arrival.
  CHECK(h.can_take({1}, 1499));
  CHECK(h.take({1}, 1499));
  CHECK(!h.can_take({1}, 1500));
  CHECK(!h.take({1}, 1501));
  CHECK(h.free_slots(1500) == 0);
}

TEST_CASE("lease holder: unpaced while the root grants all it asks, paced after a short grant") {
  HolderConfig c = config();
  c.refresh_ms = 400;
  {
    LeaseHolder h(c);
    const Exchange ex = ask(h, 2, 1, 1000);
    h.on_grant(lease(ex, 9, 2, 1, 5000), 1010);  // all it asked: the root has room
    REQUIRE(h.take({2}, 1010));
    h.set_queued({{0, {1}, 1}}, 1011);  // one more call, and no unit for it
    CHECK(h.next_exchange(1011));       // it asks again at once
  }
  {
    LeaseHolder h(c);
    const Exchange ex = ask(h, 2, 1, 1000);
    h.on_grant(lease(ex, 9, 1, 1, 5000), 1010);  // one unit of the two: the root is short
    REQUIRE(h.take({1}, 1010));
    h.set_queued({{0, {1}, 1}}, 1011);
    CHECK(!h.next_exchange(1099));  // starved: refresh_ms / 4 after the last exchange (1000)
    CHECK(h.next_exchange(1100));
  }
}

TEST_CASE("lease holder: a close states the uses folded into K groups dated at their latest use") {
  LeaseHolder h(config());
  const Exchange ex = ask(h, 10, 0, 1000);
  grant(h, ex, 10, 0, 500, 1010);
  h.take({2}, 1100);
  h.take({1}, 1101);  // merged with 1100: the cheapest pair to date later
  h.take({3}, 1300);
  // The lease ends at 1500; the close rides on the next exchange.
  const auto next = h.next_exchange(1500);
  REQUIRE(next);
  REQUIRE(next->closes.size() == 1);
  const auto& uses = next->closes[0].uses[0];
  REQUIRE(uses.size() == 2);
  CHECK(uses[0].age_ms == 1500 - 1101);
  CHECK(uses[0].amount == 3);
  CHECK(uses[1].age_ms == 1500 - 1300);
  CHECK(uses[1].amount == 3);
}

TEST_CASE("lease holder: a grant that arrives after its lease ended is closed unspent") {
  LeaseHolder h(config());
  const Exchange ex = ask(h, 5, 0, 1000);
  h.on_grant(lease(ex, 9, 5, 0, 200), 1200);  // 1000 + 200: ended on arrival
  CHECK(h.open_leases() == 0);
  CHECK(!h.can_take({1}, 1200));
  const auto next = h.next_exchange(1200);
  REQUIRE(next);
  REQUIRE(next->closes.size() == 1);
  CHECK(next->closes[0].lease_id == 9);
  CHECK(next->closes[0].uses[0].empty());
}

TEST_CASE("lease holder: takes draw from the lease that ends first") {
  LeaseHolder h(config());
  const Exchange a = ask(h, 3, 0, 1000);
  h.on_grant(lease(a, 1, 3, 0, 900), 1010);  // ends 1900
  const Exchange b = ask(h, 6, 0, 1020);     // 3 of them covered by lease 1
  h.on_grant(lease(b, 2, 3, 0, 400), 1030);  // ends 1420
  CHECK(h.take({4}, 1100));                  // 3 from lease 2, 1 from lease 1
  CHECK(h.held(0, 1100) == 2);
  // Lease 2 is spent: it closes now, but its close gives nothing back (its
  // uses are dated by their age whenever it lands), so it waits for another
  // reason to exchange, at most close_within_ms.
  h.set_queued({}, 1100);
  CHECK(!h.next_exchange(1100));
  CHECK(h.next_wake(1100) == 1300);
  const auto next = h.next_exchange(1300);
  REQUIRE(next);
  REQUIRE(next->closes.size() == 1);
  CHECK(next->closes[0].lease_id == 2);
  CHECK(next->closes[0].uses[0][0].amount == 3);
}

TEST_CASE("lease holder: a slot is reused within its lease, and freed at stretch(A) + S when its call hangs") {
  LeaseHolder h(config(/*slack=*/10, /*ppm=*/100));
  const Exchange ex = ask(h, 5, 1, 1000);
  h.on_grant(lease(ex, 9, 5, 1, 10'000), 1010);
  const auto first = h.slot_acquire(1100);
  REQUIRE(first);
  CHECK(!h.slot_acquire(1100));
  h.slot_release(*first, 1200);
  const auto second = h.slot_acquire(1200);
  REQUIRE(second);
  // A: 1000 ms, as 1001 by a fast clock, + S = 10.
  CHECK(h.free_slots(1200 + 1011 - 1) == 0);
  CHECK(h.free_slots(1200 + 1011) == 1);
  h.slot_release(*second, 2300);  // its late release changes nothing
  CHECK(h.free_slots(2300) == 1);
}

TEST_CASE("lease holder: a call still running when its lease ends is reported with the age of its start") {
  LeaseHolder h(config());
  const Exchange ex = ask(h, 5, 1, 1000);
  h.on_grant(lease(ex, 9, 5, 1, 500), 1010);
  h.take({1}, 1100);
  REQUIRE(h.slot_acquire(1100));
  h.set_queued({}, 1100);
  const auto next = h.next_exchange(1500);
  REQUIRE(next);
  REQUIRE(next->closes.size() == 1);
  CHECK(next->closes[0].running_ages == std::vector<int64_t>{400});
}

TEST_CASE("lease holder: a resend is the same message, and replies to other seqs or incarnations are ignored") {
  LeaseHolder h(config());
  const Exchange ex = ask(h, 5, 0, 1000);
  LeaseGrant other = lease(ex, 9, 5, 0, 500);
  other.seq = ex.seq + 1;
  h.on_grant(other, 1010);
  LeaseGrant old = lease(ex, 10, 5, 0, 500);
  old.incarnation = 1;
  h.on_grant(old, 1010);
  CHECK(h.open_leases() == 0);
  const auto resent = h.next_exchange(1300);
  REQUIRE(resent);
  CHECK(resent->seq == ex.seq);
  CHECK(resent->demand[0].units == ex.demand[0].units);
}

TEST_CASE("lease holder: after a refusal it waits the time the root gave, less its round trip") {
  LeaseHolder h(config());
  const Exchange ex = ask(h, 5, 0, 1000);
  LeaseGrant no;
  no.child = ex.child;
  no.incarnation = ex.incarnation;
  no.seq = ex.seq;
  no.refusal = Refusal::kNothingFree;
  no.retry_in_ms = 250;
  h.on_grant(no, 1010);
  // Its round trip was 10 ms: asking at 1010 + 250 - 10, the ask lands
  // about when the root said a unit frees.
  CHECK(!h.next_exchange(1249));
  CHECK(h.next_wake(1100) == 1250);
  const auto again = h.next_exchange(1250);
  REQUIRE(again);
  CHECK(again->seq == ex.seq + 1);
}

TEST_CASE("lease holder: a lease of slots alone asks for units again when the root said they free") {
  // The root was short of units and lent the slot alone, saying a unit
  // frees in 250 ms: the queued call waits for that, less the round trip,
  // rather than asking again at once.
  LeaseHolder h(config());
  const Exchange ex = ask(h, 5, 1, 1000);
  LeaseGrant slot = lease(ex, 9, 0, 1, 100'000);
  slot.retry_in_ms = 250;
  h.on_grant(slot, 1010);
  CHECK(h.free_slots(1010) == 1);
  CHECK(!h.next_exchange(1249));
  const auto again = h.next_exchange(1250);
  REQUIRE(again);
  REQUIRE(again->demand.size() == 1);
  CHECK(again->demand[0].units == std::vector<int64_t>{5});
  CHECK(again->demand[0].slots == 0);  // the slot it holds serves the call
}

TEST_CASE("lease holder: an idle child gives everything back") {
  LeaseHolder h(config());
  const Exchange ex = ask(h, 5, 1, 1000);
  h.on_grant(lease(ex, 9, 5, 1, 60'000), 1010);
  h.take({1}, 1100);
  h.set_queued({}, 1100);
  CHECK(!h.next_exchange(1100 + 5000 - 1));
  const auto back = h.next_exchange(1100 + 5000);
  REQUIRE(back);
  REQUIRE(back->closes.size() == 1);
  CHECK(back->closes[0].uses[0].size() == 1);
  CHECK(h.open_leases() == 0);
}

TEST_CASE("lease holder: it refreshes once its stock will not last the lead, and asks for its rate over lead + stock") {
  HolderConfig c = paced(1000);
  c.stock_ms = 500;
  LeaseHolder h(c);
  const Exchange first = ask(h, 10, 0, 1000);
  grant(h, first, 100, 0, 100'000, 1010);  // a round trip of 10 ms: the lead is 10 + 10/4
  // One unit every 10 ms: no exchange while what it holds covers its rate
  // over the lead (ceil(99 x 12 / 1000) = 2 units), one once it does not.
  std::vector<int64_t> asked_at;
  std::optional<Exchange> refresh;
  for (int64_t t = 1010; t < 2000; t += 10) {
    REQUIRE(h.take({1}, t));
    if (auto ex = h.next_exchange(t)) asked_at.push_back(t), refresh = ex;
  }
  REQUIRE(asked_at == std::vector<int64_t>{1990});  // 1 left after 99 takes
  REQUIRE(refresh->demand.size() == 1);
  // 99 units a second over 12 + 500 ms, less the 1 it holds.
  CHECK(refresh->demand[0].units[0] == (99 * 512 + 999) / 1000 - 1);
}

TEST_CASE("lease holder: it counts what caused each new exchange, and no resend") {
  // 99 takes a second from a lease of 100 units (as in the case above),
  // until the holder asks again.
  const auto run_low = [](LeaseHolder& h, const Exchange& first, int64_t slots) {
    grant(h, first, 100, slots, 100'000, 1310);
    for (int64_t t = 1310; t < 2300; t += 10) {
      REQUIRE(h.take({1}, t));
      if (h.next_exchange(t)) return;
    }
    FAIL("no refresh");
  };
  LeaseHolder with_slot(paced(1000));
  const Exchange first = ask(with_slot, 10, 1, 1000);
  CHECK(with_slot.causes().starved == 1);  // a queued call and nothing held
  REQUIRE(with_slot.next_exchange(1300));  // the same exchange, resent: no new cause
  CHECK(with_slot.causes().total() == 1);
  run_low(with_slot, first, 1);
  // Its only slot sits on the lease its rate empties within the lead: that
  // asks first, one take before the units fall short.
  CHECK(with_slot.causes().kept_slots == 1);
  CHECK(with_slot.causes().total() == 2);

  LeaseHolder no_slots(paced(1000));
  run_low(no_slots, ask(no_slots, 10, 0, 1000), 0);
  CHECK(no_slots.causes().units == 2);  // its queue, then its rate over the lead
  CHECK(no_slots.causes().total() == 2);
}

namespace {

// The run above (99 takes a second, a lead of 12 ms) with a window: what
// the refresh asks for. The first lease holds 100 units: all the first
// exchange asked for (10) when `in_full`, half of it (200) otherwise.
int64_t stock_asked(int64_t window_ms, bool in_full) {
  HolderConfig c = paced(1000);
  c.windows_ms = {window_ms};
  c.stock_ms = 500;
  LeaseHolder h(c);
  const Exchange first = ask(h, in_full ? 10 : 200, 0, 1000);
  grant(h, first, 100, 0, 100'000, 1010);
  std::optional<Exchange> refresh;
  for (int64_t t = 1010; t < 2000; t += 10) {
    REQUIRE(h.take({1}, t));
    if (auto ex = h.next_exchange(t)) refresh = ex;
  }
  REQUIRE(refresh);
  REQUIRE(refresh->demand.size() == 1);
  return refresh->demand[0].units[0];
}

// 99 units a second over the lead (12 ms) + `stock`, less the 1 it holds.
int64_t over(int64_t stock) { return (99 * (12 + stock) + 999) / 1000 - 1; }

}  // namespace

TEST_CASE("lease holder: a window's stock is stock_ms, and at least a thirtieth of the window") {
  // After a grant short of the ask: the refresh asks for the rate over the
  // lead + max(stock_ms, window / 30).
  CHECK(stock_asked(3'000, false) == over(500));   // a thirtieth is 100: stock_ms rules
  CHECK(stock_asked(14'999, false) == over(500));  // 499
  CHECK(stock_asked(18'000, false) == over(600));  // 600: the window rules
  CHECK(stock_asked(60'000, false) == over(2'000));
  CHECK(over(600) > over(500));  // the figures tell the spans apart
}

TEST_CASE("lease holder: while the root grants all it asks, a slow child stocks for kStockCalls calls") {
  // 99 calls over the last second: kStockCalls (64) of them take 646 ms,
  // more than stock_ms (500). After a grant of all it asked the stock
  // stretches to that, at most a quarter of the window; a thirtieth of a
  // long window still rules when it is longer.
  static_assert(drl::internal::kStockCalls == 64);
  CHECK(stock_asked(3'000, true) == over(646));     // the calls rule
  CHECK(stock_asked(2'400, true) == over(600));     // a quarter of the window
  CHECK(stock_asked(60'000, true) == over(2'000));  // a thirtieth is longer
  CHECK(stock_asked(3'000, false) == over(500));    // a short grant: no stretch
  CHECK(over(646) > over(600));
  CHECK(over(600) > over(500));
}

TEST_CASE("lease holder: it asks for slots before the lease that holds them is spent, not after") {
  // Lease 9 holds both slots and 20 units; lease 10 holds 100 units and no
  // slot. A spent lease's idle slots go back with its close, so once lease 9
  // is spent the child would stand without a slot for a round trip (100 ms
  // here): the refresh must leave while lease 9 still serves.
  LeaseHolder h(paced(1000));
  const Exchange first = ask(h, 20, 2, 1000);
  h.on_grant(lease(first, 9, 20, 2, 100'000), 1100);  // a round trip of 100 ms: the lead is 125
  const Exchange second = ask(h, 120, 0, 1100);
  h.on_grant(lease(second, 10, 100, 0, 100'000), 1200);
  h.set_queued({}, 1200);
  std::optional<Exchange> refresh;
  int64_t takes = 0;
  for (int64_t t = 1210; t < 1500 && !refresh; t += 10) {
    const auto call = h.slot_acquire(t);
    REQUIRE(call);
    REQUIRE(h.take({1}, t));
    ++takes;
    h.slot_release(*call, t + 2);
    refresh = h.next_exchange(t + 2);
  }
  REQUIRE(refresh);
  CHECK(takes < 20);  // lease 9 still had units when it asked
  int64_t slots = 0;
  for (const auto& level : refresh->demand) slots += level.slots;
  CHECK(slots >= 1);
  // Every slot busy: nothing to lose to a close, so no exchange on that account.
  LeaseHolder busy(paced(1000));
  grant(busy, ask(busy, 50, 1, 1000), 50, 1, 100'000, 1100);
  for (int64_t t = 1110; t < 1500; t += 10) {
    const auto call = busy.slot_acquire(t);
    REQUIRE(call);
    REQUIRE(busy.take({1}, t));
    CHECK(!busy.next_exchange(t));
    busy.slot_release(*call, t + 5);
  }
}

TEST_CASE("lease holder: a spent lease's close waits up to two stock spans for a long window, to ride a refresh") {
  // close_within_ms (200 here), or for long windows twice the shortest
  // stock span (2 s for 60 s), at most a quarter of the shortest window: a
  // steady child refreshes about once per stock span, so the close costs
  // no exchange of its own (waiting one span, it raced the refresh).
  const auto close_sent_after = [](std::vector<int64_t> windows_ms) {
    HolderConfig c = paced(100);
    c.windows_ms = std::move(windows_ms);
    LeaseHolder h(c);
    // Shorter than the windows, so no used unit comes back inside it.
    int64_t duration = 100'000;
    for (int64_t w : c.windows_ms) duration = std::min(duration, w * 9 / 10);
    const Exchange first = ask(h, 5, 0, 1000);
    grant(h, first, 5, 0, duration, 1100);
    for (int64_t t = 1101; t <= 1105; ++t) REQUIRE(h.take({1}, t));
    // Past the rate's span: the spent lease closes here and asks for nothing.
    CHECK(!h.next_exchange(1300));
    for (int64_t t = 1301; t < 10'000; ++t) {
      if (auto ex = h.next_exchange(t)) {
        CHECK(ex->closes.size() == 1);
        return t - 1300;
      }
    }
    return int64_t{-1};
  };
  CHECK(close_sent_after({}) == 200);
  CHECK(close_sent_after({1'000}) == 200);                 // a 1 s window: close_within_ms
  CHECK(close_sent_after({60'000}) == 2 * 2'000);          // a thirtieth of 60 s
  CHECK(close_sent_after({60'000, 30'000}) == 2 * 1'000);  // the shorter stock span
}

TEST_CASE("lease holder: a spent lease's idle slots ride a refresh after a full grant, go at once after a short one") {
  // A close that gives idle slots back goes at once while the root is
  // short (a sibling may be waiting for them), and waits close_wait() like
  // any spent lease's close after a reply that granted all it asked for:
  // the root had room, so the slots need not cost an exchange of their own.
  const auto close_sent_after = [](int64_t slots_granted) {
    LeaseHolder h(paced(100));
    const Exchange first = ask(h, 5, 2, 1000);
    grant(h, first, 5, slots_granted, 100'000, 1100);
    for (int64_t t = 1101; t <= 1105; ++t) REQUIRE(h.take({1}, t));
    for (int64_t t = 1300; t < 5000; ++t) {
      if (auto ex = h.next_exchange(t)) {
        CHECK(ex->closes.size() == 1);
        CHECK(ex->demand.empty());
        return t - 1300;
      }
    }
    return int64_t{-1};
  };
  CHECK(close_sent_after(2) == 200);  // all it asked: close_within_ms
  CHECK(close_sent_after(1) == 0);    // one slot short: at once
}

TEST_CASE("lease holder: it keeps twice its recent peak of calls in slots while the root grants all it asks") {
  // Two calls run at once (a peak of 2, both slots busy) and a third waits
  // for a slot: the exchange asks for the queued call's slot and for the
  // idle ones it keeps beyond it, max(1, peak - running) after a short
  // grant, 2 x peak - running after a grant of all it asked, unless the
  // reply said siblings want slots the root does not have (slots_wanted):
  // idle slots kept for a peak that may come would keep theirs from calls
  // that wait now.
  const auto slots_asked = [](int64_t units_granted, int64_t slots_wanted) {
    LeaseHolder h(paced(1000));
    const Exchange first = ask(h, 10, 2, 1000);
    LeaseGrant g = lease(first, 9, units_granted, 2, 100'000);
    g.slots_wanted = slots_wanted;
    h.on_grant(g, 1010);
    h.set_queued({}, 1010);
    const auto a = h.slot_acquire(1020);
    const auto b = h.slot_acquire(1020);
    REQUIRE(a);
    REQUIRE(b);
    REQUIRE(h.take({1}, 1020));
    REQUIRE(h.take({1}, 1020));
    h.set_queued({{0, {1}, 1}}, 1030);
    const auto ex = h.next_exchange(1030);
    REQUIRE(ex);
    int64_t slots = 0;
    for (const auto& level : ex->demand) slots += level.slots;
    return slots;
  };
  CHECK(slots_asked(10, 0) == 1 + 2);  // all it asked: 2 x 2 - 2 idle slots kept beyond the queue's
  CHECK(slots_asked(9, 0) == 1 + 1);   // one unit short: max(1, 2 - 2)
  CHECK(slots_asked(10, 3) == 1 + 1);  // all it asked, but siblings wait for 3 slots
}

TEST_CASE("lease holder: a peak of calls counts for a stock span when that is longer than rate_ms") {
  // A 60 s window: three calls overlap at 1020 (a peak of 3), then one
  // call at a time every 200 ms. At 2600 the peak of the last rate_ms (1 s)
  // is 1, but the slots it keeps serve until its next refresh, a stock
  // span away (here 64 calls at its rate, about 13 s): the peak of 3 still
  // counts. A queued call needing 4 slots (3 idle) makes it ask: 1 for the
  // queue, and 2 x 3 kept beyond it (the root granted all it asked).
  const auto slots_asked = [](std::vector<int64_t> windows_ms) {
    HolderConfig c = paced(1000);
    c.windows_ms = std::move(windows_ms);
    LeaseHolder h(c);
    const Exchange first = ask(h, 100, 3, 1000);
    grant(h, first, 100, 3, 100'000, 1010);
    std::vector<LeaseHolder::CallId> calls;
    for (int i = 0; i < 3; ++i) {
      const auto call = h.slot_acquire(1020);
      REQUIRE(call);
      REQUIRE(h.take({1}, 1020));
      calls.push_back(*call);
    }
    for (const auto call : calls) h.slot_release(call, 1030);
    calls_one_at_a_time(h, 1100, 2501, 200, 10);
    h.set_queued({{0, {1}, 4}}, 2600);
    const auto ex = h.next_exchange(2600);
    REQUIRE(ex);
    int64_t slots = 0;
    for (const auto& level : ex->demand) slots += level.slots;
    return slots;
  };
  CHECK(slots_asked({60'000}) == 1 + 2 * 3);
  CHECK(slots_asked({}) == 1 + 2 * 1);  // no window, no stock span: the last rate_ms only
}

TEST_CASE("lease holder: while other children wait for slots, it gives back those its units cannot start") {
  // Lease 9: 4 units and 6 slots for 100 s of a 1 s window. Its 4 units
  // are spent one call at a time (a peak of 1) and come back at 2020; 2
  // calls wait for them. Until then its idle slots serve no call: with no
  // sibling short of slots it keeps them all (it will need them at 2020),
  // while siblings wait for slots it keeps none: its units cannot start a
  // call within the lead (the queued calls ask for their slots again when
  // their units come, and a peak kept idle would serve no call until then).
  const auto slots_returned = [](int64_t slots_wanted) {
    HolderConfig c = paced(1000);
    c.windows_ms = {1000};  // its used units come back at 2020 on
    LeaseHolder h(c);
    const Exchange first = ask(h, 4, 6, 1000);
    LeaseGrant g = lease(first, 9, 4, 6, 100'000);
    g.slots_wanted = slots_wanted;
    h.on_grant(g, 1010);
    h.set_queued({}, 1010);
    calls_one_at_a_time(h, 1020, 1060, 10, 5);
    h.set_queued({{0, {1}, 2}}, 1070);
    const auto ex = h.next_exchange(1070);
    REQUIRE(ex);
    int64_t slots = 0;
    for (const auto& r : ex->returns) slots += r.slots;
    return slots;
  };
  CHECK(slots_returned(0) == 0);
  CHECK(slots_returned(2) == 6);
}

TEST_CASE("lease holder: calls still running on a lease about to be spent do not keep its idle slots") {
  // Lease 9: 20 units and 6 slots; a call every 10 ms, each running 30 ms
  // (3 at a time). Its units run out within the lead, and its last call
  // ends 30 ms after that: the lease then closes and its idle slots go
  // with it. So while the root has room (it granted all that was asked),
  // the refresh asks for every slot the child keeps, 2 x its peak less
  // those running, counting none of lease 9's; after a short grant they
  // count until the lease closes (children competing for the cap would
  // otherwise each ask for a second set).
  const auto refresh_slots = [](int64_t units_granted) {
    LeaseHolder h(paced(1000));
    const Exchange first = ask(h, 20, 6, 1000);
    grant(h, first, units_granted, 6, 100'000, 1100);              // a round trip of 100 ms: the lead is 125
    std::vector<std::pair<int64_t, LeaseHolder::CallId>> running;  // (end, call)
    for (int64_t t = 1110; t < 1400; t += 10) {
      while (!running.empty() && running.front().first <= t) {
        h.slot_release(running.front().second, running.front().first);
        running.erase(running.begin());
      }
      const auto call = h.slot_acquire(t);
      REQUIRE(call);
      REQUIRE(h.take({1}, t));
      running.push_back({t + 30, *call});
      if (auto ex = h.next_exchange(t)) {
        CHECK(h.held(0, t) > 0);  // sent before the units ran out
        CHECK(running.size() == 3);
        int64_t slots = 0;
        for (const auto& level : ex->demand) slots += level.slots;
        return slots;
      }
    }
    return int64_t{-1};
  };
  CHECK(refresh_slots(20) == 2 * 3 - 3);  // the 3 idle slots on lease 9 not counted
  CHECK(refresh_slots(19) == 0);          // one unit short: they count, its peak of 3 is covered
}

TEST_CASE("lease holder: it gives back the units its rate cannot spend before their lease ends") {
  HolderConfig c = paced(1000);
  c.stock_ms = 1000;  // what a refresh would bring it to (7) does not bind
  LeaseHolder h(c);
  const Exchange first = ask(h, 100, 0, 1000);
  grant(h, first, 100, 0, 1000, 1010);                                  // ends at 2000
  for (int64_t t = 1100; t <= 1500; t += 100) REQUIRE(h.take({1}, t));  // 5 a second
  // A queued call needs a slot: an exchange, which carries the returns.
  h.set_queued({{0, {0}, 1}}, 1800);
  const auto ex = h.next_exchange(1800);
  REQUIRE(ex);
  REQUIRE(ex->returns.size() == 1);
  // 200 ms left: ceil(5 x 300 / 1000) = 2 with half again of headroom, + 1;
  // but nothing queued and no take over the last quarter of rate_ms, so
  // what it keeps (units_to_keep) is that quarter's rate (none), + 1.
  CHECK(ex->returns[0].units == std::vector<int64_t>{95 - 1});
  CHECK(h.held(0, 1800) == 1);
}

TEST_CASE("lease holder: with takes in the last quarter of rate_ms it keeps what its rate spends before the end") {
  HolderConfig c = paced(1000);
  c.stock_ms = 1000;  // what a refresh would bring it to (7) does not bind
  LeaseHolder h(c);
  const Exchange first = ask(h, 100, 0, 1000);
  grant(h, first, 100, 0, 1000, 1010);                                  // ends at 2000
  for (int64_t t = 1000; t <= 1800; t += 200) REQUIRE(h.take({1}, t));  // 5 a second
  h.set_queued({{0, {0}, 1}}, 1800);
  const auto ex = h.next_exchange(1800);
  REQUIRE(ex);
  REQUIRE(ex->returns.size() == 1);
  // 200 ms left: ceil(5 x 300 / 1000) = 2 with half again of headroom, + 1.
  CHECK(ex->returns[0].units == std::vector<int64_t>{95 - 3});
  CHECK(h.held(0, 1800) == 3);
}

TEST_CASE(
    "lease holder: while the root is short, units beyond twice what it keeps go back in an exchange of their own") {
  // It asked for 100 and got 60 (the root is short), took 10 at 1010 and
  // then nothing: a rate of 10 a second, and none over the last quarter of
  // rate_ms. What it keeps of its 50 unused units is what a refresh would
  // bring it to, with nothing queued at the lower of those rates over the
  // lead (12 ms) and the stock span (a thirtieth of the 1 s window), 0,
  // + 1, less the used units that come back within the lead: the 10 taken
  // at 1010 come back at 2010. Holding more than twice that is a reason to
  // exchange, once its rate has half of rate_ms of history to be read from.
  struct Outcome {
    bool sent = false;
    int64_t returned = 0;
  };
  const auto at = [](int64_t now, int64_t granted, int64_t units_wanted = 0) {
    HolderConfig c = paced(1000);
    c.windows_ms = {1000};
    LeaseHolder h(c);
    const Exchange first = ask(h, 100, 0, 1000);
    LeaseGrant g = lease(first, 9, granted, 0, 100'000);
    g.units_wanted = units_wanted;
    h.on_grant(g, 1010);
    h.set_queued({}, 1010);
    REQUIRE(h.take({10}, 1010));
    Outcome o;
    const auto ex = h.next_exchange(now);
    if (!ex) return o;
    o.sent = true;
    CHECK(h.causes().units_back == 1);
    for (const auto& level : ex->demand) CHECK(level.units == std::vector<int64_t>{0});
    for (const auto& r : ex->returns) o.returned += r.units[0];
    return o;
  };
  CHECK(!at(1509, 60).sent);  // history from 1010: less than half of rate_ms
  const Outcome short_grant = at(1510, 60);
  CHECK(short_grant.sent);
  CHECK(short_grant.returned == 50 - 1);  // keeps 0 + 1
  CHECK(at(1997, 60).returned == 50 - 1);
  CHECK(at(1998, 60).returned == 50);  // by 2010 its 10 used units are back: it keeps none
  CHECK(!at(1510, 100).sent);          // all it asked: the root has room
  // All it asked, but other children want units the root does not have:
  // short all the same (a child a hotspot left is granted in full, being
  // below its share, and sat on its stock while the hotspot's child waited).
  CHECK(at(1510, 100, 1).returned == 90 - 1);
  CHECK(!at(1509, 100, 1).sent);
}

TEST_CASE("lease holder: a 429 stops it at once and goes to the root at once, a resend if one is out") {
  LeaseHolder h(config(/*slack=*/10, /*ppm=*/0));
  const Exchange first = ask(h, 5, 1, 1000);
  h.on_grant(lease(first, 9, 5, 1, 10'000), 1010);
  const Exchange second = ask(h, 20, 1, 1020);  // out, unanswered
  h.on_penalty(/*duration_ms=*/500, 1100);
  CHECK(!h.can_take({1}, 1100));
  CHECK(!h.slot_acquire(1100));
  // Not after retry_ms: now, the same seq, with what is left of the wait.
  const auto resent = h.next_exchange(1100);
  REQUIRE(resent);
  CHECK(resent->seq == second.seq);
  CHECK(resent->penalty_ms == 500 + 10);  // its reading of the 429 may lag by S
  // Stopped until 500 real ms have surely passed: 500 + S by this clock.
  CHECK(!h.can_take({1}, 1100 + 510 - 1));
  CHECK(h.can_take({1}, 1100 + 510));
}

TEST_CASE("lease holder: a notice or a reply from the root stops it for what is left of a sibling's 429") {
  LeaseHolder h(config(/*slack=*/10, /*ppm=*/0));
  const Exchange first = ask(h, 5, 1, 1000);
  LeaseGrant g = lease(first, 9, 5, 1, 10'000);
  g.penalty_ms = 300;
  h.on_grant(g, 1010);
  CHECK(!h.can_take({1}, 1010 + 310 - 1));
  CHECK(h.can_take({1}, 1010 + 310));
  h.on_notice({200}, 2000);
  CHECK(h.penalized(2000 + 210 - 1));
  CHECK(!h.penalized(2000 + 210));
  // A relayed penalty is not reported back: no exchange is due for it.
  h.set_queued({}, 2000);
  CHECK(!h.next_exchange(2000));
}

TEST_CASE("lease holder: a static floor serves when the leases cannot, never more than the floor in a window") {
  HolderConfig c = config(/*slack=*/10, /*ppm=*/0);
  c.when_short = drl::internal::WhenShort::kFloor;
  c.windows_ms = {1000};
  c.floor_units = {2};
  c.floor_slots = 1;
  LeaseHolder h(c);
  // A new incarnation first waits out the longest window (and A): its
  // predecessor may have spent the floor just before it crashed.
  CHECK(!h.can_take({1}, 5000));
  CHECK(h.free_slots(5000) == 0);
  const int64_t ready = 5000 + 1000 + 10;
  CHECK(h.can_take({1}, ready));
  CHECK(h.take({2}, ready));
  CHECK(!h.take({1}, ready + 1));
  const auto call = h.slot_acquire(ready);
  REQUIRE(call);
  CHECK(!h.slot_acquire(ready));
  h.slot_release(*call, ready + 5);
  CHECK(h.slot_acquire(ready + 5));
  // A use frees once this clock shows outlast(T) = T + S after it.
  CHECK(!h.can_take({1}, ready + 1010 - 1));
  CHECK(h.take({1}, ready + 1010));
}

TEST_CASE("lease holder: fail open admits only once an exchange has gone unanswered for unreachable_ms") {
  HolderConfig c = config();
  c.when_short = drl::internal::WhenShort::kFailOpen;
  c.unreachable_ms = 800;
  LeaseHolder h(c);
  ask(h, 5, 1, 1000);  // out, never answered
  CHECK(!h.unreachable(1799));
  CHECK(!h.can_take({1}, 1799));
  CHECK(h.unreachable(1800));
  CHECK(h.take({100}, 1800));
  CHECK(h.slot_acquire(1800));
  CHECK(h.slot_acquire(1800));
}

TEST_CASE("lease holder: counts the leases it received and those that arrived already ended") {
  LeaseHolder h(config());
  CHECK(h.round_trip_ms() == 0);
  // Sent at 1000, a 300 ms lease answered at 1250: it arrives with 50 ms left.
  const Exchange first = ask(h, 5, 0, 1000);
  CHECK(first.round_trip_ms == 0);  // none measured yet
  CHECK(h.last_lease_ms() == 0);
  h.on_grant(lease(first, 1, 5, 0, 300), 1250);
  CHECK(h.last_lease_ms() == 300);
  CHECK(h.leases_received() == 1);
  CHECK(h.leases_arrived_ended() == 0);
  CHECK(h.round_trip_ms() == 250);
  CHECK(h.held(0, 1250) == 5);
  // Its lease ended: the next ask, answered after 400 ms with a 300 ms
  // lease, arrives ended and is never spent. It tells the root the round
  // trip it measured (the root may lend longer: Ledger::duration).
  const Exchange second = ask(h, 5, 0, 1400);
  CHECK(second.round_trip_ms == 250);
  h.on_grant(lease(second, 2, 5, 0, 300), 1800);
  CHECK(h.leases_received() == 2);
  CHECK(h.leases_arrived_ended() == 1);
  CHECK(h.round_trip_ms() == 400);
  CHECK(h.held(0, 1800) == 0);
}
