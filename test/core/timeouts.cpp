// Verifies attempt timeouts: an attempt that has not reported by its start
// plus attemptTimeoutMs is rejected AttemptTimeout at the next advance of
// time, never retried, its slot freed; late news of it is UnknownTicket; the
// deadline is in next_wake() whatever else waits.
#include <catch2/catch.hpp>

#include <algorithm>

#include "drl/engine.h"
#include "engine_helpers.h"

using namespace drl;
using namespace drl::test;

namespace {

constexpr Millis kTimeout = 1000;

// A bucket that never binds, with retries left, so only slots and the
// timeout decide what happens.
std::string timed(int64_t concurrency, Millis timeout = kTimeout,
                  const json& retry = {{"maxRetries", 3}, {"minDelayInMs", 100}, {"maxDelayInMs", 100}}) {
  return with_timeout(config(1000, 10'000, concurrency, retry), timeout);
}

Action timed_out(Ticket t, Millis timeout = kTimeout) {
  return reject(t, ErrorCode::AttemptTimeout, static_cast<int32_t>(timeout));
}

void require_unknown(Engine& e, const Status& st) {
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().code == ErrorCode::UnknownTicket);
  CHECK(e.writes().empty());
  CHECK(e.actions().empty());
}

}  // namespace

TEST_CASE("an attempt is timed out at start + attemptTimeoutMs, not a millisecond before", "[timeout]") {
  Engine e = configured(timed(2));
  const Ticket a = arrive(e, T0);
  e.clear_output();
  CHECK(wake(e) == T0 + kTimeout);

  e.tick(T0 + kTimeout - 1);
  CHECK(drain(e).actions.empty());
  CHECK(inspect(e).running() == 1);
  CHECK(wake(e) == T0 + kTimeout);

  Millis fired = 0;
  SECTION("the timer fires at the deadline") { e.tick(fired = T0 + kTimeout); }
  SECTION("the timer fires late") { e.tick(fired = T0 + kTimeout + 1); }
  SECTION("stats moves time past the deadline") { stats(e, fired = T0 + kTimeout); }
  const Step s = drain(e);
  CHECK(s.actions == std::vector<Action>{timed_out(a)});
  // The release is recorded with the next write; it makes none of its own.
  CHECK(s.writes.empty());
  CHECK(s.slot_records == 0);
  CHECK(inspect(e).active() == 0);
  CHECK(inspect(e).running() == 0);
  // No deadline is left: only the quiet bucket's slots record, then nothing.
  expect_idle_slots_write(e, fired + kIdleSlotsWrite);
  CHECK(wake(e) == kNoWake);
}

TEST_CASE("the status of a timeout rejection is the timeout in ms", "[timeout]") {
  for (Millis timeout : {Millis{1}, Millis{250}, kMaxAttemptTimeoutMs}) {
    INFO("attemptTimeoutMs " << timeout);
    Engine e = configured(timed(1, timeout));
    const Ticket a = arrive(e, T0);
    e.clear_output();
    CHECK(wake(e) == T0 + timeout);
    e.tick(T0 + timeout - 1);
    CHECK(actions(e).empty());
    e.tick(T0 + timeout);
    CHECK(actions(e) == std::vector<Action>{timed_out(a, timeout)});
  }
}

TEST_CASE("without attemptTimeoutMs an attempt times out after the default 120 s", "[timeout]") {
  Engine e = configured(config(1000, 10'000, 1));
  const Ticket a = arrive(e, T0);
  e.clear_output();
  CHECK(wake(e) == T0 + kDefaultAttemptTimeout);
  e.tick(T0 + kDefaultAttemptTimeout - 1);
  CHECK(actions(e).empty());
  e.tick(T0 + kDefaultAttemptTimeout);
  CHECK(actions(e) == std::vector<Action>{reject(a, ErrorCode::AttemptTimeout, 120'000)});
}

TEST_CASE("a timed-out attempt is not retried, and its grant stays counted", "[timeout]") {
  // Its work may have reached the upstream: neither retried nor refunded.
  Engine e = configured(with_timeout(config(3, 10'000, 2, {{"maxRetries", 3}, {"minDelayInMs", 0}}), kTimeout));
  const Ticket a = arrive(e, 2, T0);
  e.clear_output();
  e.tick(T0 + kTimeout);
  CHECK(actions(e) == std::vector<Action>{timed_out(a)});
  CHECK(inspect(e).used() == 2);
  for (Millis t = T0 + kTimeout; t <= T0 + 20 * kTimeout; t += kTimeout) {
    e.tick(t);
    CHECK(actions(e).empty());
  }
  // Only one unit was left in the window the timed-out attempt spent from.
  Engine f = configured(with_timeout(config(3, 10'000, 2), kTimeout));
  arrive(f, 2, T0);
  f.tick(T0 + kTimeout);
  f.clear_output();
  arrive(f, 2, T0 + kTimeout);
  CHECK(f.actions().empty());
  CHECK(wake(f) == T0 + 10'000);
}

TEST_CASE("a timeout frees the slot for the head of the queue in the same step", "[timeout]") {
  Engine e = configured(timed(1));
  const Ticket a = arrive(e, T0);
  const Ticket b = arrive(e, T0 + 10);
  const Ticket c = arrive(e, T0 + 20);
  e.clear_output();
  CHECK(wake(e) == T0 + kTimeout);  // a's deadline; b and c wait only for the slot

  e.tick(T0 + kTimeout);
  const Step s = drain(e);
  CHECK(s.actions == std::vector<Action>{timed_out(a), start(b)});
  CHECK(s.writes == std::vector<Write>{put_grant(T0 + kTimeout, 1)});
  CHECK(s.slot_records == 1);
  CHECK(wake(e) == T0 + 2 * kTimeout);  // b's deadline counts from its own start

  e.tick(T0 + 2 * kTimeout - 1);
  CHECK(actions(e).empty());
  e.tick(T0 + 2 * kTimeout);
  CHECK(actions(e) == std::vector<Action>{timed_out(b), start(c)});
}

TEST_CASE("after a timeout, report, threw, gone and cancel for that ticket are UnknownTicket", "[timeout]") {
  Engine e = configured(timed(1));
  const Ticket a = arrive(e, T0);
  const Ticket b = arrive(e, T0);
  e.clear_output();
  e.tick(T0 + kTimeout);
  CHECK(actions(e) == std::vector<Action>{timed_out(a), start(b)});
  const int64_t used = inspect(e).used();

  require_unknown(e, e.report(a, ok(), T0 + kTimeout + 1));
  require_unknown(e, e.report(a, too_many(5000), T0 + kTimeout + 1));  // a late 429 pauses nobody
  require_unknown(e, e.threw(a, T0 + kTimeout + 1));
  require_unknown(e, e.gone(a, T0 + kTimeout + 1));
  require_unknown(e, e.cancel(a, T0 + kTimeout + 1));
  CHECK(inspect(e).forced_until() == 0);
  CHECK(inspect(e).used() == used);
  CHECK(inspect(e).active() == 1);  // b's
  // Written when b started (the record listed only a, dated before it), and
  // left as written since.
  CHECK(e.slots_text() == slot(T0 + kTimeout + cover_span(kTimeout)));
}

TEST_CASE("news of an attempt that arrives before the timer fired is heard, even past the deadline", "[timeout]") {
  // The event that moves time past the deadline is heard first: a report at
  // the deadline settles the call with its value, as a tick just before it would.
  Engine e = configured(timed(3));
  const Ticket a = arrive(e, T0);
  const Ticket b = arrive(e, T0);
  e.clear_output();
  SECTION("a report 1 ms before the deadline") {
    report(e, a, ok(), T0 + kTimeout - 1);
    CHECK(actions(e) == std::vector<Action>{resolve(a)});
    e.tick(T0 + kTimeout);
    CHECK(actions(e) == std::vector<Action>{timed_out(b)});
  }
  SECTION("a report at the deadline: b, due at the same moment, times out in the same step") {
    report(e, a, ok(), T0 + kTimeout);
    CHECK(actions(e) == std::vector<Action>{timed_out(b), resolve(a)});
  }
  SECTION("a report 1 ms after the deadline") {
    report(e, a, ok(), T0 + kTimeout + 1);
    CHECK(actions(e) == std::vector<Action>{timed_out(b), resolve(a)});
  }
  SECTION("a retryable failure at the deadline is retried") {
    report(e, a, failed(Failure::Retryable, 503), T0 + kTimeout);
    CHECK(actions(e) == std::vector<Action>{timed_out(b)});
    e.tick(T0 + kTimeout + 100);
    CHECK(actions(e) == std::vector<Action>{start(a, 2)});
  }
  SECTION("a throw at the deadline is retried") {
    threw(e, a, T0 + kTimeout);
    CHECK(actions(e) == std::vector<Action>{timed_out(b)});
    e.tick(T0 + kTimeout + 100);
    CHECK(actions(e) == std::vector<Action>{start(a, 2)});
  }
}

TEST_CASE("every attempt gets its own deadline, counted from its start, backoff never times out", "[timeout]") {
  Engine e = configured(timed(1));
  const Ticket a = arrive(e, T0);
  report(e, a, failed(Failure::Retryable, 503), T0 + 500);  // retry due at T0 + 600
  e.clear_output();
  CHECK(wake(e) == T0 + 600);
  e.tick(T0 + 600);
  CHECK(actions(e) == std::vector<Action>{start(a, 2)});
  CHECK(wake(e) == T0 + 600 + kTimeout);
  e.tick(T0 + kTimeout);  // the first attempt's deadline means nothing now
  CHECK(actions(e).empty());
  e.tick(T0 + 600 + kTimeout - 1);
  CHECK(actions(e).empty());
  e.tick(T0 + 600 + kTimeout);
  CHECK(actions(e) == std::vector<Action>{timed_out(a)});
}

TEST_CASE("a long backoff is not cut short by the timeout", "[timeout]") {
  Engine e = configured(timed(1, 100, {{"maxRetries", 1}, {"minDelayInMs", 5000}, {"maxDelayInMs", 5000}}));
  const Ticket a = arrive(e, T0);
  report(e, a, failed(Failure::Retryable, 503), T0 + 50);
  e.clear_output();
  CHECK(wake(e) == T0 + 5050);
  e.tick(T0 + 5049);
  CHECK(actions(e).empty());
  CHECK(inspect(e).active() == 1);
  e.tick(T0 + 5050);
  CHECK(actions(e) == std::vector<Action>{start(a, 2)});
  CHECK(wake(e) == T0 + 5150);
}

TEST_CASE("the timeout of a call whose caller was cancelled settles it and frees its slot", "[timeout]") {
  Engine e = configured(timed(1));
  const Ticket a = arrive(e, T0);
  const Ticket b = arrive(e, T0);
  e.clear_output();
  cancel(e, a, T0 + 10);
  CHECK(actions(e).empty());  // its work is in flight: it keeps its slot
  CHECK(wake(e) == T0 + kTimeout);
  e.tick(T0 + kTimeout - 1);
  CHECK(actions(e).empty());
  e.tick(T0 + kTimeout);
  // The timeout ends the attempt; nobody awaits the rejection.
  CHECK(actions(e) == std::vector<Action>{timed_out(a), start(b)});
  require_unknown(e, e.report(a, ok(), T0 + kTimeout + 1));
}

TEST_CASE("a running attempt still times out after erase, settled once", "[timeout][erase]") {
  Engine e = configured(timed(2));
  const Ticket a = arrive(e, T0);
  const Ticket b = arrive(e, T0 + 10);
  e.clear_output();
  e.erase(T0 + 20);
  const std::vector<Action> erased = drain(e).actions;
  CHECK(erased.size() == 2);
  CHECK(std::count(erased.begin(), erased.end(), reject(a, ErrorCode::NoSuchLimiter)) == 1);
  CHECK(std::count(erased.begin(), erased.end(), reject(b, ErrorCode::NoSuchLimiter)) == 1);
  // The host still needs a timer: the callbacks hold their slots until they end.
  CHECK(wake(e) == T0 + kTimeout);
  CHECK(inspect(e).running() == 2);

  e.tick(T0 + kTimeout - 1);
  CHECK(drain(e).actions.empty());
  e.tick(T0 + kTimeout);
  const Step s = drain(e);
  CHECK(s.actions.empty());  // already rejected by erase: nothing more to say
  CHECK(s.writes.empty());
  CHECK(s.slot_records == 0);  // the bucket does not exist: nothing is written
  CHECK(inspect(e).running() == 1);
  CHECK(wake(e) == T0 + 10 + kTimeout);
  e.tick(T0 + 10 + kTimeout);
  CHECK(drain(e).actions.empty());
  CHECK(inspect(e).running() == 0);
  CHECK(inspect(e).active() == 0);
  CHECK(wake(e) == kNoWake);
  require_unknown(e, e.report(a, ok(), T0 + 2 * kTimeout));
}

TEST_CASE("a deadline during a penalty fires at the deadline, not at the lift", "[timeout][penalty]") {
  Engine e = configured(timed(2, kTimeout, {{"maxRetries", 1}}));
  const Ticket a = arrive(e, T0);
  const Ticket b = arrive(e, T0);
  const Ticket c = arrive(e, T0 + 5);
  report(e, a, too_many(5000), T0 + 10);  // everyone paused until T0 + 5010
  e.clear_output();
  CHECK(inspect(e).forced_until() == T0 + 5010);
  CHECK(wake(e) == T0 + kTimeout);  // b's deadline comes before the lift

  e.tick(T0 + kTimeout - 1);
  CHECK(actions(e).empty());
  e.tick(T0 + kTimeout);
  // b's slot is free, but the penalty holds everyone back.
  CHECK(actions(e) == std::vector<Action>{timed_out(b)});
  CHECK(inspect(e).active() == 1);  // a, waiting out the penalty for its retry
  CHECK(inspect(e).queued() == 1);
  // Nothing runs now: the slots record is written alone before the lift.
  expect_idle_slots_write(e, T0 + kTimeout + kIdleSlotsWrite);
  CHECK(wake(e) == T0 + 5010);

  e.tick(T0 + 5010);
  CHECK(actions(e) == std::vector<Action>{start(a, 2), start(c)});
  CHECK(wake(e) == T0 + 5010 + kTimeout);
}

TEST_CASE("a paused bucket still wakes for deadlines and a pause never extends one", "[timeout][penalty]") {
  Engine e = configured(timed(1));
  const Ticket a = arrive(e, T0);
  e.clear_output();
  pause(e, 60'000, T0 + 10);
  CHECK(wake(e) == T0 + kTimeout);
  e.tick(T0 + kTimeout);
  CHECK(actions(e) == std::vector<Action>{timed_out(a)});
  CHECK(wake(e) == kNoWake);  // nobody waits on the lift
}

TEST_CASE("next_wake is the earliest running deadline whatever else waits", "[timeout]") {
  // One unit per 10 s, so the bucket binds.
  Engine e = configured(with_timeout(config(1, 10'000, 2, {{"maxRetries", 1}, {"minDelayInMs", 3000}}), kTimeout));
  const Ticket a = arrive(e, T0);
  arrive(e, T0 + 100);  // waits for the unit at T0 + 10000
  e.clear_output();
  CHECK(wake(e) == T0 + kTimeout);
  report(e, a, failed(Failure::Retryable, 503), T0 + 200);  // retry due at T0 + 3200
  e.clear_output();
  // No attempt runs: the quiet bucket's slots record comes first, then the retry.
  expect_idle_slots_write(e, T0 + 200 + kIdleSlotsWrite);
  CHECK(wake(e) == T0 + 3200);
}

TEST_CASE("attemptTimeoutMs changed by reconfigure applies to attempts started after it", "[timeout][configure]") {
  Engine e = configured(timed(3));
  const Ticket a = arrive(e, T0);
  e.clear_output();
  SECTION("raised: a keeps its deadline, and its rejection says the timeout it ran under") {
    REQUIRE(e.reconfigure(R"({"attemptTimeoutMs":5000})", T0 + 10).ok());
    const Ticket b = arrive(e, T0 + 20);
    e.clear_output();
    CHECK(wake(e) == T0 + kTimeout);
    e.tick(T0 + kTimeout);
    CHECK(actions(e) == std::vector<Action>{timed_out(a, kTimeout)});
    CHECK(wake(e) == T0 + 20 + 5000);
    e.tick(T0 + 20 + 4999);
    CHECK(actions(e).empty());
    e.tick(T0 + 20 + 5000);
    CHECK(actions(e) == std::vector<Action>{timed_out(b, 5000)});
  }
  SECTION("lowered: a keeps its deadline; b's is shorter") {
    REQUIRE(e.reconfigure(R"({"attemptTimeoutMs":100})", T0 + 10).ok());
    const Ticket b = arrive(e, T0 + 20);
    e.clear_output();
    CHECK(wake(e) == T0 + 120);
    e.tick(T0 + 120);
    CHECK(actions(e) == std::vector<Action>{timed_out(b, 100)});
    e.tick(T0 + kTimeout - 1);
    CHECK(actions(e).empty());
    e.tick(T0 + kTimeout);
    CHECK(actions(e) == std::vector<Action>{timed_out(a, kTimeout)});
  }
  SECTION("removed: back to the default for new attempts") {
    REQUIRE(e.reconfigure(R"({"attemptTimeoutMs":null})", T0 + 10).ok());
    const Ticket b = arrive(e, T0 + 20);
    e.clear_output();
    e.tick(T0 + kTimeout);
    CHECK(actions(e) == std::vector<Action>{timed_out(a, kTimeout)});
    CHECK(wake(e) == T0 + 20 + kDefaultAttemptTimeout);
    e.tick(T0 + 20 + kDefaultAttemptTimeout);
    CHECK(actions(e) == std::vector<Action>{timed_out(b, kDefaultAttemptTimeout)});
  }
}

TEST_CASE("a clock that steps back neither fires nor delays a deadline", "[timeout]") {
  Engine e = configured(timed(1));
  const Ticket a = arrive(e, T0);
  e.tick(T0 + 900);
  e.clear_output();
  e.tick(T0 - 5000);
  CHECK(actions(e).empty());
  CHECK(wake(e) == T0 + kTimeout);
  e.tick(T0 + kTimeout);
  CHECK(actions(e) == std::vector<Action>{timed_out(a)});
  // A report stamped before the deadline, arriving after the timeout, is still late.
  require_unknown(e, e.report(a, ok(), T0 + 500));
}

TEST_CASE("several attempts due together time out in one step, oldest deadline first", "[timeout]") {
  Engine e = configured(timed(3));
  const Ticket a = arrive(e, T0 + 20);
  const Ticket b = arrive(e, T0 + 10);  // the clock stepped back: counted from T0 + 20 too
  const Ticket c = arrive(e, T0 + 30);
  const Ticket d = arrive(e, T0 + 40);  // queued
  e.clear_output();
  CHECK(wake(e) == T0 + 20 + kTimeout);
  e.tick(T0 + 30 + kTimeout);
  const std::vector<Action> got = actions(e);
  REQUIRE(got.size() == 4);
  CHECK(got[0] == timed_out(a));
  CHECK(got[1] == timed_out(b));
  CHECK(got[2] == timed_out(c));
  CHECK(got[3] == start(d));
}
