// Verifies fixed bugs stay fixed: one test per issue, tagged [issues.N].
#include <catch2/catch.hpp>

#include <algorithm>

#include "drl/engine.h"
#include "engine_helpers.h"

using namespace drl;
using namespace drl::test;

// Issue 1: a call whose cost exceeded a limit lowered while its callback ran
// was retried, and its retry took more than the whole (new) limit.
TEST_CASE("a retry whose cost no longer fits a lowered limit is rejected CostTooLarge", "[issues.1]") {
  constexpr Millis kWindow = 1000;
  Engine e = configured(config(5, kWindow, 1, {{"maxRetries", 2}, {"minDelayInMs", 100}, {"maxDelayInMs", 1000}}));
  const Ticket a = arrive(e, 5, T0);
  const Ticket b = arrive(e, 1, T0);
  e.clear_output();

  std::vector<Action> seen;
  auto collect = [&] {
    const auto& got = e.actions();
    seen.insert(seen.end(), got.begin(), got.end());
    e.clear_output();
  };
  SECTION("lowered while running, then a retryable failure") {
    REQUIRE(e.reconfigure(R"({"bucket":{"limitPerWindow":3}})", T0 + 1).ok());
    collect();
    report(e, a, failed(Failure::Retryable, 503), T0 + 10);
  }
  SECTION("lowered while running, then a throw") {
    REQUIRE(e.reconfigure(R"({"bucket":{"limitPerWindow":3}})", T0 + 1).ok());
    collect();
    threw(e, a, T0 + 10);
  }
  SECTION("lowered while running, then a 429") {
    REQUIRE(e.reconfigure(R"({"bucket":{"limitPerWindow":3}})", T0 + 1).ok());
    collect();
    report(e, a, too_many(200), T0 + 10);
  }
  SECTION("lowered while it backs off between attempts") {
    report(e, a, failed(Failure::Retryable, 503), T0 + 10);
    collect();
    REQUIRE(e.reconfigure(R"({"bucket":{"limitPerWindow":3}})", T0 + 20).ok());
  }
  collect();
  // Let every retry and penalty come due, with the first take long expired.
  for (Millis t = T0 + 100; t <= T0 + 3 * kWindow; t += 100) {
    e.tick(t);
    collect();
  }

  CHECK(std::count(seen.begin(), seen.end(), reject(a, ErrorCode::CostTooLarge)) == 1);
  CHECK(std::count(seen.begin(), seen.end(), start(a, 2)) == 0);
  // Its slot is free again and the caller behind it ran.
  CHECK(std::count(seen.begin(), seen.end(), start(b)) == 1);
  CHECK(inspect(e).used() <= 3);
}

// Issue 2: restore clamped stored amounts to the current (lowered) limit, so
// raising the limit again admitted more than it in one window.
TEST_CASE("restore keeps stored amounts above a lowered limit, so raising it again does not over-admit", "[issues.2]") {
  constexpr Millis kWindow = 1000;
  // 50 units were taken at T0 under a limit of 100, which was then lowered to 10.
  Snapshot snap;
  snap.config_text = config(10, kWindow, 10);
  snap.grants = {{static_cast<double>(T0), 50}};
  Engine e;
  e.restore(snap, T0 + 100);
  CHECK(inspect(e).grants() == Grants{{T0, 50}});
  CHECK(writes_of(e).empty());  // nothing to repair: the row is as stored

  REQUIRE(e.reconfigure(R"({"bucket":{"limitPerWindow":100}})", T0 + 200).ok());
  e.clear_output();
  const Ticket fits = arrive(e, 50, T0 + 300);  // 50 + 50 == 100
  CHECK(actions(e) == std::vector<Action>{start(fits)});
  const Ticket over = arrive(e, 1, T0 + 300);  // would make 101 in one window
  CHECK(e.actions().empty());
  CHECK(wake(e) == T0 + kWindow);
  e.tick(T0 + kWindow);
  CHECK(actions(e) == std::vector<Action>{start(over)});
}

TEST_CASE("restore keeps a stored amount up to kMaxLimitPerWindow exactly", "[issues.2]") {
  Snapshot snap;
  snap.config_text = config(1, 1000, 1);
  snap.grants = {{static_cast<double>(T0), static_cast<double>(kMaxLimitPerWindow)}};
  Engine e;
  e.restore(snap, T0 + 1);
  CHECK(inspect(e).grants() == Grants{{T0, kMaxLimitPerWindow}});
  CHECK(writes_of(e).empty());
}

// Issue 11: faults of the attempt-timeout and slots-record features.
namespace {

constexpr Millis kTimeout = 1000;

std::string timed(int64_t concurrency) { return with_timeout(config(100, 10'000, concurrency), kTimeout); }

}  // namespace

// cancel() moved time forward before acting on the ticket it had looked up:
// when that ticket's own deadline had passed (the timer not yet fired), the
// advance timed it out and erased its call, and cancel then read the freed
// call (a use-after-free, caught by ASan).
TEST_CASE("a cancel at or after a running attempt's deadline, before the timer fired, is heard first", "[issues.11]") {
  Engine e = configured(timed(1));
  const Ticket a = arrive(e, T0);
  const Ticket b = arrive(e, T0);
  e.clear_output();
  Millis at = T0 + kTimeout;
  SECTION("at the deadline") {}
  SECTION("after it") { at += 250; }
  cancel(e, a, at);
  // The cancel marks the running call; the advance then times it out.
  CHECK(actions(e) == std::vector<Action>{reject(a, ErrorCode::AttemptTimeout, kTimeout), start(b)});
  CHECK(inspect(e).active() == 1);
  CHECK(inspect(e).running() == 1);
  const Status late = e.report(a, ok(), at + 1);
  REQUIRE_FALSE(late.ok());
  CHECK(late.error().code == ErrorCode::UnknownTicket);
}

// erase() cleared the wake, though the callbacks it settled still run and
// time out: the host, keeping its one timer at next_wake(), had none, so
// their slots were held until some unrelated event came along.
TEST_CASE("after erase, next_wake is still the earliest running deadline", "[issues.11]") {
  Engine e = configured(timed(2));
  arrive(e, T0);
  arrive(e, T0 + 10);
  e.clear_output();
  e.erase(T0 + 20);
  CHECK(wake(e) == T0 + kTimeout);
  e.tick(T0 + kTimeout);
  CHECK(wake(e) == T0 + 10 + kTimeout);
  e.tick(T0 + 10 + kTimeout);
  CHECK(wake(e) == kNoWake);
  CHECK(inspect(e).active() == 0);
}

// The AttemptTimeout rejection carried the attemptTimeoutMs configured when
// it fired, not the one the attempt ran under (its deadline was right).
TEST_CASE("a timeout rejection states the timeout its attempt ran under, whatever a reconfigure set since",
          "[issues.11]") {
  Engine e = configured(timed(2));
  const Ticket a = arrive(e, T0);
  REQUIRE(e.reconfigure(R"({"attemptTimeoutMs":60000})", T0 + 1).ok());
  e.clear_output();
  e.tick(T0 + kTimeout);
  CHECK(actions(e) == std::vector<Action>{reject(a, ErrorCode::AttemptTimeout, kTimeout)});
}

// restore_slots converted a start time to an integer before clamping it to
// now: a time beyond int64 (damage, such as "1e300") was undefined behaviour
// and in practice became the most negative time, so the slot was dropped as
// long expired instead of being held a full timeout from the restore.
TEST_CASE("a slots record entry dated beyond any time is held a full timeout from the restore", "[issues.11]") {
  for (const char* at : {"1e300", "9223372036854775808", "1e19"}) {
    INFO("at " << at);
    Snapshot snap;
    snap.config_text = timed(1);
    snap.slots_text = std::string(at) + ":1";
    Engine e;
    e.restore(snap, T0);
    CHECK(e.slots_text() == std::to_string(T0) + ":1");
    const Ticket x = arrive(e, T0);
    CHECK(e.actions().empty());
    // The restore changed the record (the entry was pulled back to now): it is
    // written alone once the bucket has been quiet, and frees nothing.
    expect_idle_slots_write(e, T0 + kIdleSlotsWrite);
    CHECK(wake(e) == T0 + kTimeout);
    e.tick(T0 + kTimeout - 1);
    CHECK(actions(e).empty());
    e.tick(T0 + kTimeout);
    CHECK(actions(e) == std::vector<Action>{start(x)});
  }
}

// erase() emits EraseAll, which deletes the slots record, but the callbacks
// still running keep their slots in the live engine (they hold the cap of a
// bucket configured again). The record was not marked for rewriting, so the
// configure after the erase stored none: a restart then forgot those
// callbacks and admitted `concurrency` more beside them.
TEST_CASE("a bucket configured again after erase stores the slots of callbacks still running", "[issues.11]") {
  Engine e = configured(timed(1));
  Storage storage;
  storage.config_text = e.config_text();
  arrive(e, T0);
  storage.apply(e);
  e.clear_output();
  e.erase(T0 + 10);
  storage.apply(e);
  e.clear_output();
  CHECK_FALSE(storage.slots_text.has_value());

  REQUIRE(e.configure(timed(1), T0 + 20).ok());
  storage.apply(e);
  CHECK(e.writes() == std::vector<Write>{put_config(), put_slots()});
  e.clear_output();
  // The running callback, dated a cover span after its start, as any record does.
  const Millis entry = T0 + cover_span(kTimeout);
  CHECK(storage.slots_text == slot(entry));
  arrive(e, T0 + 20);
  CHECK(e.actions().empty());  // the live engine holds the cap...

  // Restarted past the span, so the entry is restored as stored.
  Engine restarted;
  restarted.restore(storage.snapshot(), entry + 10);
  const Ticket x = arrive(restarted, entry + 10);
  CHECK(restarted.actions().empty());  // ... and so does one restored from storage
  CHECK(wake(restarted) == entry + kTimeout);
  restarted.tick(entry + kTimeout - 1);
  CHECK(actions(restarted).empty());
  restarted.tick(entry + kTimeout);
  CHECK(actions(restarted) == std::vector<Action>{start(x)});
}

TEST_CASE("a queued call whose default unit a reconfigure changed still keys its slot at its start, not at 0",
          "[issues.14]") {
  // The call's plain cost was in "requests"; the primary now counts
  // "tokens", so it takes nothing there. Its slot must still be recorded
  // at a time a restore holds (its start), not at 0 (long expired).
  Engine e = configured(config(10, 1000, 1));
  const Ticket a = arrive(e, T0);
  const Ticket b = arrive(e, T0 + 1);  // queued behind a (concurrency 1)
  drain(e);
  REQUIRE(
      e.reconfigure(
           R"({"bucket":{"unit":"tokens"},"windows":{"rpm":{"unit":"requests","limitPerWindow":10,"windowInMs":1000}}})",
           T0 + 2)
          .ok());
  drain(e);
  report(e, a, Report{200}, T0 + 3);
  CHECK(actions(e) == std::vector<Action>{resolve(a), start(b)});
  // Restored from the stored record at once, b's slot is still held.
  Snapshot snap;
  snap.config_text = e.config_text();
  snap.slots_text = e.slots_text();
  Engine fresh;
  fresh.restore(snap, T0 + 10);
  CHECK(inspect(fresh).active() == 1);
}

TEST_CASE(
    "a deadline that passed before the host's next event is met first: the call never starts after it, and no newcomer "
    "is refused for it",
    "[issues.15]") {
  auto waiting = [](double priority, std::optional<double> max_wait) {
    Waiting w;
    w.priority = priority;
    w.max_wait_ms = max_wait;
    return w;
  };
  SECTION("a report frees the slot after the deadline of the call behind it") {
    Engine e = configured(config(100, 1000, 1));
    const Ticket a = arrive(e, T0);
    const Ticket b = *e.arrive(1, waiting(0, 500), T0 + 10);
    drain(e);
    CHECK(wake(e) == T0 + 510);
    // The host's timer is late: the report comes first, at T0 + 600.
    report(e, a, Report{200}, T0 + 600);
    CHECK(actions(e) == std::vector<Action>{reject(b, ErrorCode::DeadlineExceeded, 0), resolve(a)});
  }
  SECTION("an arrival after an overdue deadline is predicted without the call that has left") {
    Engine e = configured(config(1, 1000, 10));
    arrive(e, T0);
    const Ticket b = *e.arrive(1, waiting(0, 999), T0 + 1);
    const Ticket h = *e.arrive(1, waiting(1, std::nullopt), T0 + 2);
    drain(e);
    // No tick at b's deadline (T0 + 1000). At T0 + 1500 the window has room
    // for h; c is behind h only: predicted at T0 + 2500, within its 1200 ms.
    const Ticket c = *e.arrive(1, waiting(0, 1200), T0 + 1500);
    const auto out = actions(e);
    CHECK(out == std::vector<Action>{reject(b, ErrorCode::DeadlineExceeded, 1000), start(h)});
    REQUIRE(e.predicted_start(c).has_value());
    CHECK(*e.predicted_start(c) == T0 + 2500);
  }
}
