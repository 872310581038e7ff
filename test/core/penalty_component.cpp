// The penalty on its own (core/src/penalty.h): deadlines never shortened,
// the lift at -1, at and +1 ms, the refill floor, and the retry delays.
#include <catch2/catch.hpp>

#include "penalty.h"

using namespace drl;
using namespace drl::internal;

TEST_CASE("penalty: the later deadline wins, an equal one changes nothing", "[penalty_component]") {
  Penalty p;
  CHECK_FALSE(p.pending());
  CHECK(p.impose(1000, 500));
  CHECK_FALSE(p.impose(1000, 499));
  CHECK_FALSE(p.impose(1000, 500));
  CHECK(p.impose(1000, 501));
  CHECK(p.until() == 1501);
  CHECK_FALSE(p.due(1500));
  CHECK(p.due(1501));
  p.lift();
  CHECK_FALSE(p.due(1502));
  CHECK(p.impose(1502, -5));  // a negative delay is a pause of 0: due at once
  CHECK(p.due(1502));
}

TEST_CASE("penalty: the lifted grant keeps what was still live at the deadline", "[penalty_component]") {
  Penalty p;
  REQUIRE(p.impose(0, 1000));
  SlidingLog log;
  log.take(9, 2000, 500);  // live until 2500, past the deadline
  Grant g = p.lifted(log, 10, 2000, 0.5);
  CHECK(g.at == 1000);
  CHECK(g.amount == 9);  // more than the floor of 5
  // The 2nd unit is free at the deadline (9 + 1 <= 10), the 2nd beyond it one window after.
  CHECK(p.unit_free_after_lift(log, 10, 2000, 0.5, 0) == 1000);
  CHECK(p.unit_free_after_lift(log, 10, 2000, 0.5, 1) == 3000);
  CHECK(p.lifted_expiry(log, 2000) == 3000);
  SlidingLog later;
  later.take(1, 2000, 1500);  // newer than the deadline: the lifted grant is dated there
  CHECK(p.lifted(later, 10, 2000, 0.5).at == 1500);
}

TEST_CASE("penalty: the refill floor is exact at fractions that round badly", "[penalty_component]") {
  CHECK(Penalty::refill_floor(10, 0.7) == 3);   // 10 * 0.30000000000000004 is 3, not 4
  CHECK(Penalty::refill_floor(10, 0.75) == 3);  // 2.5 rounds up: the safe side
  CHECK(Penalty::refill_floor(10, 1.0) == 0);
  CHECK(Penalty::refill_floor(10, 0.0) == 10);
  CHECK(Penalty::refill_floor(1'000'000'000, 0.5) == 500'000'000);
}

TEST_CASE("penalty: a stored deadline is repaired, never trusted beyond the longest delay", "[penalty_component]") {
  Penalty p;
  CHECK_FALSE(p.restore(2000, true, 1000));
  CHECK(p.until() == 2000);
  CHECK(p.pending());
  CHECK(p.restore(1000 + kMaxDelayMs + 1, true, 1000));
  CHECK(p.until() == 1000 + kMaxDelayMs);
  CHECK_FALSE(p.restore(1000 + kMaxDelayMs, true, 1000));
  CHECK(p.restore(-1, true, 1000));
  CHECK_FALSE(p.pending());
  CHECK(p.restore(std::nan(""), false, 1000));
  CHECK_FALSE(p.restore(0, false, 1000));
  CHECK_FALSE(p.restore(0, true, 1000));  // a lift pending at 0 is no penalty (nothing to rewrite)
  CHECK_FALSE(p.pending());
}

TEST_CASE("retry delays: backoff grows by the factor up to the cap, hints win", "[penalty_component]") {
  RetryConfig r;
  r.min_delay_ms = 100;
  r.factor = 2;
  r.max_delay_ms = 1000;
  r.respect_retry_after = true;
  CHECK(backoff_delay(r, 1) == 100);
  CHECK(backoff_delay(r, 4) == 800);
  CHECK(backoff_delay(r, 5) == 1000);
  Report plain;
  CHECK(penalty_delay(r, plain, 2, 0) == 200);
  Report header;
  header.retry_after = "0.5";
  CHECK(penalty_delay(r, header, 1, 0) == 500);
  header.retry_after = "60";
  CHECK(penalty_delay(r, header, 1, 0) == 1000);  // capped
  Report told;
  told.retry_after_ms = 0.2;
  told.retry_after = "60";
  CHECK(penalty_delay(r, told, 1, 0) == 1);  // the caller's own delay, rounded up
  r.respect_retry_after = false;
  CHECK(penalty_delay(r, header, 3, 0) == 400);  // the header ignored
}
