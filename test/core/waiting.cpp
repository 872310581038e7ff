// Verifies waiting with intent (issue 15): arrive's priority and maxWaitMs
// (validation, queue order by priority then arrival with head-of-line
// blocking within that order, rejection at arrival or at the deadline),
// withdraw (queued, between attempts, running) and predicted_start, with
// stats' predictedStart and queuedByPriority. Times are explicit; T0 is a
// realistic epoch.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <optional>

#include "drl/engine.h"
#include "engine_helpers.h"

using namespace drl;
using namespace drl::test;

namespace {

// (Not constexpr: the sanitizer build once read -kInf as 0 inside GENERATE.)
const double kNaN = std::nan("");
const double kInf = std::numeric_limits<double>::infinity();
const double kMinusInf = -std::numeric_limits<double>::infinity();

Waiting waiting(double priority, std::optional<double> max_wait_ms = std::nullopt) {
  Waiting w;
  w.priority = priority;
  w.max_wait_ms = max_wait_ms;
  return w;
}

// Arrives with a priority (and a maximum wait), requiring success.
Ticket arrive_w(Engine& e, Millis now, double priority, std::optional<double> max_wait_ms = std::nullopt,
                double cost = 1) {
  auto t = e.arrive(cost, waiting(priority, max_wait_ms), now);
  if (!t.ok()) FAIL("arrive failed: " << t.error().message);
  return *t;
}

void withdraw(Engine& e, Ticket t, Millis now) {
  const Status st = e.withdraw(t, now);
  if (!st.ok()) FAIL("withdraw failed: " << st.error().message);
}

// predicted_start as a plain number (kNoWake when there is none), so a
// failed check prints the times.
Millis predicted(const Engine& e, Ticket t) { return e.predicted_start(t).value_or(kNoWake); }

Action deadline_exceeded(Ticket t, int64_t status) {
  return Action{ActionKind::Reject, t, 0, ErrorCode::DeadlineExceeded, status};
}

// One entry of stats' queuedByPriority (highest priority first).
json by_priority(int64_t priority, int64_t queued) { return {{"priority", priority}, {"queued", queued}}; }

bool contains(const std::vector<Action>& actions, const Action& a) {
  return std::find(actions.begin(), actions.end(), a) != actions.end();
}

}  // namespace

// ---- validation -------------------------------------------------------------

TEST_CASE("waiting: priority must be an integer in [-1000, 1000]", "[waiting][validation]") {
  Engine e = configured(config(10, 1000, 1));
  SECTION("accepted at both ends and in between") {
    for (double p : {-1000.0, -1.0, 0.0, 7.0, 1000.0}) {
      CAPTURE(p);
      auto t = e.arrive(1, waiting(p), T0);
      CHECK(t.ok());
    }
  }
  SECTION("a finite non-integer or out of range: InvalidArgument, RangeError, naming the value") {
    const double bad = GENERATE(1.5, -0.25, 1001.0, -1001.0, 1e300);
    CAPTURE(bad);
    auto t = e.arrive(1, waiting(bad), T0);
    REQUIRE_FALSE(t.ok());
    CHECK(t.error().code == ErrorCode::InvalidArgument);
    CHECK(t.error().kind == ErrorKind::RangeError);
    CHECK(t.error().message.rfind("[drl:invalid-argument] ", 0) == 0);
    CHECK(t.error().message.find("priority") != std::string::npos);
    CHECK(t.error().message.find("(received ") != std::string::npos);
  }
  SECTION("not finite: InvalidArgument, TypeError") {
    const double bad = GENERATE(kNaN, kInf, kMinusInf);
    CAPTURE(bad);
    auto t = e.arrive(1, waiting(bad), T0);
    REQUIRE_FALSE(t.ok());
    CHECK(t.error().code == ErrorCode::InvalidArgument);
    CHECK(t.error().kind == ErrorKind::TypeError);
    CHECK(t.error().message.rfind("[drl:invalid-argument] ", 0) == 0);
    CHECK(t.error().message.find("priority") != std::string::npos);
    CHECK(inspect(e).queued() == 0);
    CHECK(inspect(e).active() == 0);
  }
}

TEST_CASE("waiting: the messages name the field, the rule and the value", "[waiting][validation]") {
  Engine e = configured(config(10, 1000, 1));
  auto message = [&](const Waiting& w) {
    auto t = e.arrive(1, w, T0);
    REQUIRE_FALSE(t.ok());
    return t.error().message;
  };
  CHECK(message(waiting(1.5)) ==
        "[drl:invalid-argument] priority must be an integer between -1000 and 1000 (received 1.5)");
  CHECK(message(waiting(-1001)) ==
        "[drl:invalid-argument] priority must be an integer between -1000 and 1000 (received -1001)");
  CHECK(message(waiting(kNaN))
            .rfind("[drl:invalid-argument] priority must be a finite number, an integer between "
                   "-1000 and 1000 (received ",
                   0) == 0);
  CHECK(message(waiting(0, 2.5)) == "[drl:invalid-argument] maxWaitMs must be an integer between 0 and " +
                                        std::to_string(kMaxDelayMs) + " (received 2.5)");
  CHECK(message(waiting(0, -1.0)) == "[drl:invalid-argument] maxWaitMs must be an integer between 0 and " +
                                         std::to_string(kMaxDelayMs) + " (received -1)");
  CHECK(message(waiting(0, kInf))
            .rfind("[drl:invalid-argument] maxWaitMs must be a finite number, an integer between 0 and " +
                       std::to_string(kMaxDelayMs) + ", or left out to wait as long as needed (received ",
                   0) == 0);
  // The priority is checked first, and a bad cost before either.
  CHECK(message(waiting(kNaN, -1.0)).find("priority") != std::string::npos);
  auto bad_cost = e.arrive(-1, waiting(kNaN, -1.0), T0);
  REQUIRE_FALSE(bad_cost.ok());
  CHECK(bad_cost.error().message.find("cost") != std::string::npos);
}

TEST_CASE("waiting: maxWaitMs must be an integer in [0, kMaxDelayMs]", "[waiting][validation]") {
  Engine e = configured(config(10, 1000, 10));
  SECTION("accepted at both ends") {
    for (double w : {0.0, 1.0, static_cast<double>(kMaxDelayMs)}) {
      CAPTURE(w);
      auto t = e.arrive(1, waiting(0, w), T0);
      CHECK(t.ok());
    }
  }
  SECTION("a finite non-integer or out of range: InvalidArgument, RangeError") {
    const double bad = GENERATE(-1.0, 0.5, 2.5, static_cast<double>(kMaxDelayMs) + 1, 1e300);
    CAPTURE(bad);
    auto t = e.arrive(1, waiting(0, bad), T0);
    REQUIRE_FALSE(t.ok());
    CHECK(t.error().code == ErrorCode::InvalidArgument);
    CHECK(t.error().kind == ErrorKind::RangeError);
    CHECK(t.error().message.rfind("[drl:invalid-argument] ", 0) == 0);
    CHECK(t.error().message.find("(received ") != std::string::npos);
  }
  SECTION("not finite: InvalidArgument, TypeError") {
    const double bad = GENERATE(kNaN, kInf, kMinusInf);
    CAPTURE(bad);
    auto t = e.arrive(1, waiting(0, bad), T0);
    REQUIRE_FALSE(t.ok());
    CHECK(t.error().code == ErrorCode::InvalidArgument);
    CHECK(t.error().kind == ErrorKind::TypeError);
  }
  SECTION("a refused arrival takes nothing and emits nothing") {
    auto t = e.arrive(1, waiting(0, -5.0), T0);
    REQUIRE_FALSE(t.ok());
    CHECK(e.actions().empty());
    CHECK(e.writes().empty());
    CHECK(inspect(e).used() == 0);
    CHECK(inspect(e).active() == 0);
  }
}

TEST_CASE("waiting: maxRetries must be an integer in [0, kMaxRetries]", "[waiting][validation]") {
  Engine e = configured(config(10, 1000, 10));
  auto retrying = [](double max_retries) {
    Waiting w;
    w.max_retries = max_retries;
    return w;
  };
  SECTION("accepted at both ends and in between") {
    for (double r : {0.0, 1.0, 5.0, static_cast<double>(kMaxRetries)}) {
      CAPTURE(r);
      auto t = e.arrive(1, retrying(r), T0);
      CHECK(t.ok());
    }
  }
  SECTION("a finite non-integer or out of range: InvalidArgument, RangeError, naming the rule and the value") {
    const auto [bad, text] = GENERATE(table<double, std::string>({{-1.0, "-1"},
                                                                  {1.5, "1.5"},
                                                                  {-0.5, "-0.5"},
                                                                  {static_cast<double>(kMaxRetries) + 1, "101"},
                                                                  {1e300, "1e+300"}}));
    CAPTURE(bad);
    auto t = e.arrive(1, retrying(bad), T0);
    REQUIRE_FALSE(t.ok());
    CHECK(t.error().code == ErrorCode::InvalidArgument);
    CHECK(t.error().kind == ErrorKind::RangeError);
    CHECK(t.error().message == "[drl:invalid-argument] maxRetries must be an integer between 0 and " +
                                   std::to_string(kMaxRetries) + " (received " + text + ")");
  }
  SECTION("not finite (NaN is a value here: only the ABI reads it as absent): InvalidArgument, TypeError") {
    const auto [bad, text] =
        GENERATE_COPY(table<double, std::string>({{kNaN, "NaN"}, {kInf, "Infinity"}, {kMinusInf, "-Infinity"}}));
    CAPTURE(bad);
    auto t = e.arrive(1, retrying(bad), T0);
    REQUIRE_FALSE(t.ok());
    CHECK(t.error().code == ErrorCode::InvalidArgument);
    CHECK(t.error().kind == ErrorKind::TypeError);
    CHECK(t.error().message ==
          "[drl:invalid-argument] maxRetries must be a finite number, an integer between 0 and 100, or left out "
          "to use the bucket's retry.maxRetries (received " +
              text + ")");
  }
  SECTION("a refused arrival takes nothing and emits nothing, by either arrive") {
    const double bad = GENERATE(-1.0, 1.5, kNaN, static_cast<double>(kMaxRetries) + 1);
    CAPTURE(bad);
    auto plain = e.arrive(1, retrying(bad), T0);
    auto per_unit = e.arrive(Amounts{{"requests", 2}}, retrying(bad), T0);
    REQUIRE_FALSE(plain.ok());
    REQUIRE_FALSE(per_unit.ok());
    CHECK(per_unit.error().code == ErrorCode::InvalidArgument);
    CHECK(per_unit.error().message == plain.error().message);
    CHECK(e.actions().empty());
    CHECK(e.writes().empty());
    CHECK(inspect(e).used() == 0);
    CHECK(inspect(e).active() == 0);
    CHECK(inspect(e).queued() == 0);
  }
  SECTION("checked after the priority and maxWaitMs") {
    Waiting w = retrying(-1);
    w.max_wait_ms = -1.0;
    auto t = e.arrive(1, w, T0);
    REQUIRE_FALSE(t.ok());
    CHECK(t.error().message.find("maxWaitMs") != std::string::npos);
  }
}

TEST_CASE("waiting: a cost per unit is checked with its waiting too", "[waiting][validation]") {
  Engine e = configured(config(10, 1000, 10));
  auto bad = e.arrive(Amounts{{"requests", 1}}, waiting(2.5), T0);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().code == ErrorCode::InvalidArgument);
  auto good = e.arrive(Amounts{{"requests", 2}}, waiting(3, 0.0), T0);
  REQUIRE(good.ok());
  CHECK(actions(e) == std::vector<Action>{start(*good)});
  CHECK(inspect(e).used() == 2);
}

// ---- ordering -----------------------------------------------------------------

TEST_CASE("waiting: higher priority starts first, FIFO within a priority", "[waiting][order]") {
  Engine e = configured(config(100, 1000, 1));
  const Ticket a = arrive(e, T0);  // runs: the only slot
  const Ticket b0 = arrive_w(e, T0 + 1, 0);
  const Ticket c1 = arrive_w(e, T0 + 2, 1);
  const Ticket d0 = arrive_w(e, T0 + 3, 0);
  const Ticket e1 = arrive_w(e, T0 + 4, 1);
  const Ticket f_low = arrive_w(e, T0 + 5, -1);
  const Ticket g_top = arrive_w(e, T0 + 6, 1000);
  CHECK(actions(e) == std::vector<Action>{start(a)});
  CHECK(inspect(e).queued() == 6);

  Millis now = T0 + 10;
  std::vector<Ticket> order;
  Ticket running = a;
  for (int i = 0; i < 6; ++i) {
    report(e, running, ok(), now);
    const auto acts = actions(e);
    REQUIRE(acts.size() == 2);
    CHECK(acts[0] == resolve(running));
    REQUIRE(acts[1].kind == ActionKind::Start);
    running = acts[1].ticket;
    order.push_back(running);
    now += 10;
  }
  CHECK(order == std::vector<Ticket>{g_top, c1, e1, b0, d0, f_low});
}

TEST_CASE("waiting: a higher-priority newcomer never preempts a running call", "[waiting][order]") {
  Engine e = configured(config(100, 1000, 1));
  const Ticket a = arrive_w(e, T0, -1000);
  const Ticket high = arrive_w(e, T0 + 1, 1000);
  CHECK(actions(e) == std::vector<Action>{start(a)});
  CHECK(inspect(e).running() == 1);
  CHECK(inspect(e).queued() == 1);
  report(e, a, ok(), T0 + 50);
  CHECK(actions(e) == std::vector<Action>{resolve(a), start(high)});
}

TEST_CASE("waiting: a higher-priority newcomer never preempts a retry waiting between attempts", "[waiting][order]") {
  SECTION("the retry holds the only slot") {
    Engine e = configured(config(100, 1000, 1, {{"maxRetries", 2}, {"minDelayInMs", 200}, {"maxDelayInMs", 200}}));
    const Ticket a = arrive(e, T0);
    report(e, a, failed(Failure::Retryable, 503), T0 + 10);  // due at T0 + 210
    const Ticket high = arrive_w(e, T0 + 20, 1000);
    CHECK(actions(e) == std::vector<Action>{start(a)});
    CHECK(inspect(e).queued() == 1);
    e.tick(T0 + 210);
    CHECK(actions(e) == std::vector<Action>{start(a, 2)});
    report(e, a, ok(), T0 + 220);
    CHECK(actions(e) == std::vector<Action>{resolve(a, 2), start(high)});
  }
  SECTION("the retry and the newcomer want the same unit: the retry gets it") {
    // One unit per 100 ms, two slots: the newcomer has a slot, not the unit.
    Engine e = configured(config(1, 100, 2, {{"maxRetries", 2}, {"minDelayInMs", 90}, {"maxDelayInMs", 90}}));
    const Ticket a = arrive(e, T0);
    report(e, a, failed(Failure::Retryable, 503), T0 + 10);  // due at T0 + 100
    const Ticket high = arrive_w(e, T0 + 50, 1000);
    e.clear_output();
    e.tick(T0 + 100);
    CHECK(actions(e) == std::vector<Action>{start(a, 2)});
    CHECK(predicted(e, high) == T0 + 200);
    e.tick(T0 + 200);
    CHECK(actions(e) == std::vector<Action>{start(high)});
  }
}

TEST_CASE("waiting: head-of-line blocking holds within the priority order", "[waiting][order]") {
  constexpr Millis kWindow = 1000;
  Engine e = configured(config(5, kWindow, 10));
  const Ticket first = arrive(e, 3, T0);
  const Ticket big = arrive_w(e, T0 + 1, 1, std::nullopt, 5);     // 3 + 5 > 5: blocked until T0 + 1000
  const Ticket small0 = arrive_w(e, T0 + 2, 0, std::nullopt, 1);  // fits, but behind big (lower priority)
  const Ticket small1 = arrive_w(e, T0 + 3, 1, std::nullopt, 1);  // fits, but behind big (same priority, later)
  CHECK(actions(e) == std::vector<Action>{start(first)});
  CHECK(inspect(e).queued() == 3);
  CHECK(inspect(e).used() == 3);
  // A newcomer above the blocked head goes ahead of it and, fitting, starts at once.
  const Ticket top = arrive_w(e, T0 + 4, 2, std::nullopt, 1);
  CHECK(actions(e) == std::vector<Action>{start(top)});
  CHECK(inspect(e).used() == 4);
  report(e, first, ok(), T0 + 5);
  report(e, top, ok(), T0 + 6);
  CHECK(actions(e) == std::vector<Action>{resolve(first), resolve(top)});

  // first's grant expires at T0 + 1000, top's at T0 + 1004: big fits only then.
  CHECK(predicted(e, big) == T0 + 1004);
  // Behind a cost of 5 the prediction is only a bound (the units ahead are packed).
  CHECK(predicted(e, small1) <= T0 + 2004);
  CHECK(predicted(e, small0) <= T0 + 2004);
  e.tick(T0 + kWindow);
  CHECK(actions(e).empty());
  e.tick(T0 + 1004);
  CHECK(actions(e) == std::vector<Action>{start(big)});
  // big fills the window until T0 + 2004; then the two small ones, priority 1 first.
  CHECK(predicted(e, small1) == T0 + 2004);
  CHECK(predicted(e, small0) == T0 + 2004);
  e.tick(T0 + 2003);
  CHECK(actions(e).empty());
  e.tick(T0 + 2004);
  CHECK(actions(e) == std::vector<Action>{start(small1), start(small0)});
}

// ---- maxWaitMs ------------------------------------------------------------------

TEST_CASE("waiting: rejected at arrival when the predicted start is later than now + maxWaitMs",
          "[waiting][deadline]") {
  // 2 per second: two takes fill the window until T0 + 1000 and T0 + 1100.
  Engine e = configured(config(2, 1000, 10));
  arrive(e, T0);
  arrive(e, T0 + 100);
  e.clear_output();
  const auto used = inspect(e).used();
  const auto grants = inspect(e).grants();

  auto t = e.arrive(1, waiting(0, 500.0), T0 + 200);
  REQUIRE(t.ok());  // the host settles it from the action
  const Step s = drain(e);
  CHECK(s.actions == std::vector<Action>{deadline_exceeded(*t, 800)});  // predicted T0 + 1000
  CHECK(s.writes.empty());
  CHECK(count(s.writes, WriteKind::PutGrant) == 0);
  CHECK(s.slot_records == 0);
  CHECK(inspect(e).used() == used);
  CHECK(inspect(e).grants() == grants);
  CHECK(inspect(e).queued() == 0);
  CHECK(inspect(e).active() == 2);
  CHECK_FALSE(e.predicted_start(*t).has_value());
  // It is settled: nothing more about it is known.
  const Status again = e.withdraw(*t, T0 + 201);
  REQUIRE_FALSE(again.ok());
  CHECK(again.error().code == ErrorCode::UnknownTicket);

  SECTION("status is the predicted start - now, also behind a queue") {
    const Ticket c = arrive(e, T0 + 200);  // no maximum: waits for T0 + 1000
    CHECK(predicted(e, c) == T0 + 1000);
    auto d = e.arrive(1, waiting(0, 100.0), T0 + 200);
    REQUIRE(d.ok());
    CHECK(actions(e) == std::vector<Action>{deadline_exceeded(*d, 900)});  // would start at T0 + 1100
  }
  SECTION("a maximum that reaches the predicted start queues the call; it starts exactly at its deadline") {
    const Ticket c = arrive_w(e, T0 + 200, 0, 800.0);
    CHECK(actions(e).empty());
    CHECK(predicted(e, c) == T0 + 1000);
    CHECK(wake(e) == T0 + 1000);
    e.tick(T0 + 999);
    CHECK(actions(e).empty());
    e.tick(T0 + 1000);
    CHECK(actions(e) == std::vector<Action>{start(c)});
  }
  SECTION("a cost that needs both units waits for the second") {
    auto d = e.arrive(2, waiting(0, 899.0), T0 + 200);
    REQUIRE(d.ok());
    CHECK(actions(e) == std::vector<Action>{deadline_exceeded(*d, 900)});
  }
}

TEST_CASE("waiting: queued with a deadline, rejected at it when a slow callback holds the only slot",
          "[waiting][deadline]") {
  Engine e = configured(config(100, 1000, 1));
  const Ticket slow = arrive(e, T0);
  const Ticket b = arrive_w(e, T0 + 10, 0, 500.0);  // the window is free: predicted now, so it queues
  CHECK(actions(e) == std::vector<Action>{start(slow)});
  CHECK(predicted(e, b) == T0 + 10);
  CHECK(inspect(e).queued() == 1);
  CHECK(wake(e) == T0 + 510);  // the deadline, before slow's attempt timeout

  SECTION("the timer fires at the deadline") {
    e.tick(T0 + 509);
    CHECK(actions(e).empty());
    e.tick(T0 + 510);
    const Step s = drain(e);
    CHECK(s.actions == std::vector<Action>{deadline_exceeded(b, 0)});  // only the slot was in the way
    CHECK(count(s.writes, WriteKind::PutGrant) == 0);
    report(e, slow, ok(), T0 + 600);
    CHECK(actions(e) == std::vector<Action>{resolve(slow)});
  }
  CHECK(inspect(e).queued() == 0);
  CHECK(inspect(e).used() == 1);  // slow's take only
  CHECK_FALSE(e.predicted_start(b).has_value());
}

TEST_CASE("waiting: rejected at the deadline with the prediction when a penalty came meanwhile",
          "[waiting][deadline]") {
  // One per second, a refill fraction of 1 (the lift keeps only live grants).
  Engine e = configured(config(1, 1000, 10, {{"maxRetries", 0}, {"maxDelayInMs", 120'000}}, 1.0));
  const Ticket a = arrive(e, T0);
  const Ticket b = arrive_w(e, T0 + 100, 0, 900.0);  // predicted T0 + 1000 = its deadline
  CHECK(actions(e) == std::vector<Action>{start(a)});
  CHECK(predicted(e, b) == T0 + 1000);
  report(e, a, too_many(5000), T0 + 200);  // paused until T0 + 5200
  REQUIRE(inspect(e).forced_until() == T0 + 5200);
  CHECK(predicted(e, b) == T0 + 5200);
  e.clear_output();
  CHECK(wake(e) <= T0 + 1000);
  e.tick(T0 + 1000);
  CHECK(contains(actions(e), deadline_exceeded(b, 4200)));
  CHECK(inspect(e).queued() == 0);
}

TEST_CASE("waiting: maxWaitMs 0 starts in the arrival step or is rejected in it", "[waiting][deadline]") {
  SECTION("an empty bucket: starts") {
    Engine e = configured(config(2, 1000, 1));
    const Ticket t = arrive_w(e, T0, 0, 0.0);
    const Step s = drain(e);
    CHECK(s.actions == std::vector<Action>{start(t)});
    CHECK(s.writes == std::vector<Write>{put_grant(T0, 1)});
  }
  SECTION("a full window: rejected with the wait") {
    Engine e = configured(config(2, 1000, 10));
    arrive(e, 2, T0);
    e.clear_output();
    const Ticket t = arrive_w(e, T0 + 300, 0, 0.0);
    const Step s = drain(e);
    CHECK(s.actions == std::vector<Action>{deadline_exceeded(t, 700)});
    CHECK(s.writes.empty());
    CHECK(inspect(e).used() == 2);
  }
  SECTION("only the slot is busy: rejected with 0") {
    Engine e = configured(config(2, 1000, 1));
    arrive(e, T0);
    e.clear_output();
    const Ticket t = arrive_w(e, T0 + 300, 0, 0.0);
    const Step s = drain(e);
    CHECK(s.actions == std::vector<Action>{deadline_exceeded(t, 0)});
    CHECK(s.writes.empty());
    CHECK(inspect(e).queued() == 0);
    CHECK(inspect(e).used() == 1);
  }
  SECTION("behind a queue of equal priority: rejected; above it, fitting: starts") {
    Engine e = configured(config(10, 1000, 10));
    arrive(e, 8, T0);
    const Ticket big = arrive(e, 5, T0 + 1);  // blocked until T0 + 1000
    e.clear_output();
    const Ticket same = arrive_w(e, T0 + 2, 0, 0.0);
    CHECK(actions(e) == std::vector<Action>{deadline_exceeded(same, 998)});
    const Ticket above = arrive_w(e, T0 + 3, 1, 0.0);
    CHECK(actions(e) == std::vector<Action>{start(above)});
    CHECK(predicted(e, big) == T0 + 1000);
  }
  SECTION("during a penalty: rejected with the wait until the lift") {
    Engine e = configured(config(10, 1000, 10));
    pause(e, 3000, T0);
    e.clear_output();
    const Ticket t = arrive_w(e, T0 + 1000, 0, 0.0);
    CHECK(actions(e) == std::vector<Action>{deadline_exceeded(t, 2000)});
  }
}

TEST_CASE("waiting: the deadline covers only the first start, not the waits between retries", "[waiting][deadline]") {
  Engine e = configured(config(100, 1000, 1, {{"maxRetries", 2}, {"minDelayInMs", 1000}, {"maxDelayInMs", 1000}}));
  const Ticket a = arrive_w(e, T0, 0, 100.0);
  CHECK(actions(e) == std::vector<Action>{start(a)});
  report(e, a, failed(Failure::Retryable, 503), T0 + 10);  // due at T0 + 1010, long after T0 + 100
  CHECK(actions(e).empty());
  e.tick(T0 + 100);
  e.tick(T0 + 500);
  CHECK(actions(e).empty());
  e.tick(T0 + 1010);
  CHECK(actions(e) == std::vector<Action>{start(a, 2)});
  report(e, a, ok(), T0 + 1020);
  CHECK(actions(e) == std::vector<Action>{resolve(a, 2)});
}

TEST_CASE("waiting: a running call is not rejected when its deadline passes", "[waiting][deadline]") {
  Engine e = configured(config(100, 1000, 1));
  const Ticket a = arrive_w(e, T0, 0, 50.0);
  CHECK(actions(e) == std::vector<Action>{start(a)});
  e.tick(T0 + 50);
  e.tick(T0 + 60);
  CHECK(actions(e).empty());
  report(e, a, ok(), T0 + 70);
  CHECK(actions(e) == std::vector<Action>{resolve(a)});
}

// ---- withdraw ---------------------------------------------------------------------

TEST_CASE("waiting: withdrawing a queued call rejects it Cancelled, takes nothing", "[waiting][withdraw]") {
  Engine e = configured(config(100, 1000, 1));
  const Ticket a = arrive(e, T0);
  const Ticket b = arrive(e, T0 + 1);
  const Ticket c = arrive(e, T0 + 2);
  e.clear_output();
  withdraw(e, b, T0 + 3);
  const Step s = drain(e);
  CHECK(s.actions == std::vector<Action>{reject(b, ErrorCode::Cancelled)});
  CHECK(s.writes.empty());
  CHECK(inspect(e).queued() == 1);
  CHECK_FALSE(e.predicted_start(b).has_value());
  report(e, a, ok(), T0 + 4);
  CHECK(actions(e) == std::vector<Action>{resolve(a), start(c)});
  CHECK(inspect(e).used() == 2);  // a and c
  const Status again = e.withdraw(b, T0 + 5);
  REQUIRE_FALSE(again.ok());
  CHECK(again.error().code == ErrorCode::UnknownTicket);
}

TEST_CASE("waiting: after a withdraw the next caller starts no later than it would have", "[waiting][withdraw]") {
  constexpr Millis kWindow = 1000;
  Engine e = configured(config(1, kWindow, 10));
  arrive(e, T0);
  const Ticket b = arrive(e, T0 + 10);
  const Ticket c = arrive(e, T0 + 20);
  e.clear_output();
  CHECK(predicted(e, b) == T0 + kWindow);
  CHECK(predicted(e, c) == T0 + 2 * kWindow);
  withdraw(e, b, T0 + 30);
  CHECK(actions(e) == std::vector<Action>{reject(b, ErrorCode::Cancelled)});
  CHECK(predicted(e, c) == T0 + kWindow);
  CHECK(wake(e) == T0 + kWindow);
  e.tick(T0 + kWindow);
  CHECK(actions(e) == std::vector<Action>{start(c)});
}

TEST_CASE("waiting: withdrawing a blocked head unblocks the callers behind it", "[waiting][withdraw]") {
  Engine e = configured(config(5, 1000, 10));
  arrive(e, 3, T0);
  const Ticket big = arrive(e, 5, T0 + 1);
  const Ticket small = arrive(e, 1, T0 + 2);
  e.clear_output();
  withdraw(e, big, T0 + 3);
  const Step s = drain(e);
  CHECK(s.actions == std::vector<Action>{reject(big, ErrorCode::Cancelled), start(small)});
  CHECK(s.writes == std::vector<Write>{put_grant(T0 + 3, 1)});
  CHECK(inspect(e).used() == 4);
}

TEST_CASE("waiting: withdrawing a call between attempts releases its slot", "[waiting][withdraw]") {
  Engine e = configured(config(100, 1000, 1, {{"maxRetries", 2}, {"minDelayInMs", 500}, {"maxDelayInMs", 500}}));
  const Ticket a = arrive(e, T0);
  report(e, a, failed(Failure::Retryable, 503), T0 + 10);  // holds the slot, due at T0 + 510
  const Ticket b = arrive(e, T0 + 15);
  e.clear_output();
  CHECK(inspect(e).active() == 1);
  withdraw(e, a, T0 + 20);
  const Step s = drain(e);
  CHECK(s.actions == std::vector<Action>{reject(a, ErrorCode::Cancelled), start(b)});
  CHECK(s.writes == std::vector<Write>{put_grant(T0 + 20, 1)});  // b's; a's retry took nothing
  CHECK(inspect(e).active() == 1);
  CHECK(inspect(e).used() == 2);
  e.tick(T0 + 510);
  CHECK(actions(e).empty());
}

TEST_CASE("waiting: withdrawing a running call keeps its outcome but stops its retries", "[waiting][withdraw]") {
  Engine e = configured(config(10, 1000, 1, {{"maxRetries", 3}, {"minDelayInMs", 100}, {"maxDelayInMs", 100}}));
  const Ticket a = arrive(e, T0);
  const Ticket b = arrive(e, T0 + 1);
  e.clear_output();
  withdraw(e, a, T0 + 5);
  CHECK(drain(e).actions.empty());  // the work is in flight: left alone
  CHECK(inspect(e).running() == 1);

  SECTION("a success resolves") {
    report(e, a, ok(), T0 + 10);
    CHECK(actions(e) == std::vector<Action>{resolve(a), start(b)});
    CHECK(inspect(e).used() == 2);
  }
  SECTION("a final failure rejects with its status") {
    report(e, a, failed(Failure::Final, 400), T0 + 10);
    CHECK(actions(e) == std::vector<Action>{reject(a, ErrorCode::CallFailed, 400), start(b)});
    CHECK(inspect(e).used() == 2);
  }
  SECTION("a retryable failure rejects Cancelled instead of retrying") {
    report(e, a, failed(Failure::Retryable, 503), T0 + 10);
    CHECK(actions(e) == std::vector<Action>{reject(a, ErrorCode::Cancelled), start(b)});
    e.tick(T0 + 110);
    e.tick(T0 + 200);
    CHECK(actions(e).empty());
    CHECK(inspect(e).used() == 2);  // a's first attempt and b: no retry of a took anything
  }
  SECTION("a throw with attempts left rejects Cancelled instead of retrying") {
    threw(e, a, T0 + 10);
    CHECK(actions(e) == std::vector<Action>{reject(a, ErrorCode::Cancelled), start(b)});
    e.tick(T0 + 200);
    CHECK(actions(e).empty());
    CHECK(inspect(e).used() == 2);
  }
  SECTION("a 429 rejects Cancelled and still pauses the bucket") {
    report(e, a, too_many(2000), T0 + 10);  // clamped to maxDelayInMs: 100
    const Step s = drain(e);
    CHECK(s.actions == std::vector<Action>{reject(a, ErrorCode::Cancelled)});
    CHECK(inspect(e).forced_until() == T0 + 110);
    CHECK(count(s.writes, WriteKind::PutPenalty) == 1);
    CHECK(predicted(e, b) == T0 + 110);
    e.tick(T0 + 109);
    CHECK(actions(e).empty());
    e.tick(T0 + 110);
    CHECK(actions(e) == std::vector<Action>{start(b)});
    CHECK(inspect(e).used() == 6);  // the lift's floor (half of 10) and b: no retry of a
  }
  const Status again = e.withdraw(a, T0 + 3000);
  REQUIRE_FALSE(again.ok());
  CHECK(again.error().code == ErrorCode::UnknownTicket);
}

TEST_CASE("waiting: withdrawing a call on its last attempt keeps the callback's own throw", "[waiting][withdraw]") {
  Engine e = configured(config(10, 1000, 1, {{"maxRetries", 0}}));
  const Ticket a = arrive(e, T0);
  e.clear_output();
  withdraw(e, a, T0 + 5);
  threw(e, a, T0 + 10);
  CHECK(actions(e) == std::vector<Action>{reject(a, ErrorCode::CallbackThrew)});
}

TEST_CASE("waiting: withdraw of an unknown or settled ticket is UnknownTicket", "[waiting][withdraw]") {
  Engine e = configured(config(10, 1000, 1));
  Status st = e.withdraw(12345, T0);
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().code == ErrorCode::UnknownTicket);
  CHECK(st.error().kind == ErrorKind::RangeError);
  CHECK(st.error().message.rfind("[drl:unknown-ticket] ", 0) == 0);
  const Ticket a = arrive(e, T0);
  report(e, a, ok(), T0 + 1);
  e.clear_output();
  st = e.withdraw(a, T0 + 2);
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().code == ErrorCode::UnknownTicket);
  CHECK(e.actions().empty());
  CHECK(e.writes().empty());
}

TEST_CASE("waiting: withdrawing a queued call with a deadline ends its deadline too", "[waiting][withdraw]") {
  Engine e = configured(config(100, 1000, 1));
  const Ticket a = arrive(e, T0);
  const Ticket b = arrive_w(e, T0 + 1, 0, 300.0);
  e.clear_output();
  withdraw(e, b, T0 + 2);
  CHECK(actions(e) == std::vector<Action>{reject(b, ErrorCode::Cancelled)});
  e.tick(T0 + 301);
  CHECK(actions(e).empty());  // no second settlement at its old deadline
  report(e, a, ok(), T0 + 400);
  CHECK(actions(e) == std::vector<Action>{resolve(a)});
}

// ---- predicted_start ------------------------------------------------------------------

TEST_CASE("predicted start: one window, unit costs: exact", "[waiting][predicted]") {
  constexpr Millis kWindow = 1000;
  Engine e = configured(config(2, kWindow, 10));
  const Ticket a = arrive(e, T0);
  arrive(e, T0 + 100);
  const Ticket c = arrive(e, T0 + 200);
  const Ticket d = arrive(e, T0 + 200);
  const Ticket f = arrive(e, T0 + 250);
  const Ticket g = arrive(e, T0 + 300);
  e.clear_output();
  CHECK_FALSE(e.predicted_start(a).has_value());  // running, not queued
  CHECK_FALSE(e.predicted_start(9999).has_value());
  // S[0] = T0 + 1000, S[1] = T0 + 1100; then a window later each.
  CHECK(predicted(e, c) == T0 + 1000);
  CHECK(predicted(e, d) == T0 + 1100);
  CHECK(predicted(e, f) == T0 + 2000);
  CHECK(predicted(e, g) == T0 + 2100);
  // Predictions do not move as time passes towards them.
  e.tick(T0 + 900);
  CHECK(predicted(e, f) == T0 + 2000);
  for (auto [t, at] : {std::pair{c, T0 + 1000}, {d, T0 + 1100}, {f, T0 + 2000}, {g, T0 + 2100}}) {
    CAPTURE(t, at);
    CHECK(wake(e) == at);
    e.tick(at - 1);
    CHECK(actions(e).empty());
    e.tick(at);
    CHECK(actions(e) == std::vector<Action>{start(t)});
  }
}

TEST_CASE("predicted start: now when the bucket is free but a slot is not", "[waiting][predicted]") {
  Engine e = configured(config(10, 1000, 1));
  arrive(e, T0);
  const Ticket b = arrive(e, T0 + 5);
  const Ticket c = arrive(e, T0 + 6);
  CHECK(predicted(e, b) == T0 + 6);  // the engine's now: a lower bound, the slot is ignored
  CHECK(predicted(e, c) == T0 + 6);
  e.tick(T0 + 50);
  CHECK(predicted(e, b) == T0 + 50);
}

TEST_CASE("predicted start: with a penalty pending, computed after the lift", "[waiting][predicted]") {
  constexpr Millis kWindow = 1000;
  // 2 per second, the default fraction 0.5: the lift leaves a floor of 1.
  Engine e = configured(config(2, kWindow, 10));
  arrive(e, T0);
  pause(e, 3000, T0 + 100);  // until T0 + 3100
  REQUIRE(inspect(e).forced_until() == T0 + 3100);
  const Ticket b = arrive(e, T0 + 200);
  const Ticket c = arrive(e, T0 + 200);
  const Ticket d = arrive(e, T0 + 200);
  e.clear_output();
  // At the lift: one grant of max(1, 0 live) dated T0 + 3100, so one unit is
  // free then and the second when that grant expires.
  // b joins the lift's grant at T0 + 3100, so both units free at T0 + 4100.
  CHECK(predicted(e, b) == T0 + 3100);
  CHECK(predicted(e, c) == T0 + 4100);
  CHECK(predicted(e, d) == T0 + 4100);
  e.tick(T0 + 3099);
  CHECK(actions(e).empty());
  e.tick(T0 + 3100);
  CHECK(actions(e) == std::vector<Action>{start(b)});
  e.tick(T0 + 4099);
  CHECK(actions(e).empty());
  e.tick(T0 + 4100);
  CHECK(actions(e) == std::vector<Action>{start(c), start(d)});
}

TEST_CASE("predicted start: live grants at the lift are kept above the floor", "[waiting][predicted]") {
  constexpr Millis kWindow = 1000;
  // 4 per second, fraction 1 (floor 0): the lift keeps what is live at it.
  Engine e = configured(config(4, kWindow, 10, nullptr, 1.0));
  arrive(e, 3, T0);
  pause(e, 500, T0 + 100);  // until T0 + 600: T0's 3 still live then
  const Ticket b = arrive(e, 2, T0 + 200);
  e.clear_output();
  // The lift dates those 3 at T0 + 600: 2 more fit when they expire at T0 + 1600.
  CHECK(predicted(e, b) == T0 + 1600);
  e.tick(T0 + 600);
  CHECK(actions(e).empty());
  e.tick(T0 + 1600);
  CHECK(actions(e) == std::vector<Action>{start(b)});
}

TEST_CASE("predicted start: several windows and costs: a lower bound", "[waiting][predicted]") {
  constexpr Millis kWindow = 1000;
  const std::string text = R"({"bucket":{"limitPerWindow":10,"windowInMs":1000},"concurrency":10,)"
                           R"("windows":{"tpm":{"unit":"tokens","limitPerWindow":100,"windowInMs":1000}}})";
  Engine e = configured(text);
  auto cost = [](double tokens) { return Amounts{{"tokens", tokens}}; };
  auto first = e.arrive(cost(100), T0);
  REQUIRE(first.ok());
  std::vector<Ticket> queued;
  for (Millis at : {T0 + 10, T0 + 20, T0 + 30}) {
    auto t = e.arrive(cost(60), at);
    REQUIRE(t.ok());
    queued.push_back(*t);
  }
  CHECK(actions(e) == std::vector<Action>{start(*first)});
  // Tokens ahead + own: 60, 120, 180 => r = 59, 119, 179 against 100 a window.
  CHECK(predicted(e, queued[0]) == T0 + kWindow);
  CHECK(predicted(e, queued[1]) == T0 + 2 * kWindow);
  CHECK(predicted(e, queued[2]) == T0 + 2 * kWindow);  // packs 180 into two windows: too optimistic
  std::vector<Millis> starts;
  for (Millis at = T0 + 1; at <= T0 + 4 * kWindow && starts.size() < 3; ++at) {
    if (wake(e) != at) continue;
    e.tick(at);
    for (const Action& a : actions(e)) {
      if (a.kind == ActionKind::Start) starts.push_back(at);
    }
  }
  CHECK(starts == std::vector<Millis>{T0 + kWindow, T0 + 2 * kWindow, T0 + 3 * kWindow});
}

TEST_CASE("predicted start: priorities change predictions", "[waiting][predicted]") {
  constexpr Millis kWindow = 1000;
  Engine e = configured(config(1, kWindow, 10));
  arrive(e, T0);
  const Ticket low = arrive_w(e, T0 + 10, 0);
  CHECK(predicted(e, low) == T0 + kWindow);
  const Ticket high = arrive_w(e, T0 + 20, 5);
  CHECK(predicted(e, high) == T0 + kWindow);
  CHECK(predicted(e, low) == T0 + 2 * kWindow);
  const Ticket lower = arrive_w(e, T0 + 30, -5);
  CHECK(predicted(e, lower) == T0 + 3 * kWindow);
  const Ticket mid = arrive_w(e, T0 + 40, 0);  // behind low, ahead of lower
  CHECK(predicted(e, mid) == T0 + 3 * kWindow);
  CHECK(predicted(e, lower) == T0 + 4 * kWindow);
  e.clear_output();
  e.tick(T0 + kWindow);
  CHECK(actions(e) == std::vector<Action>{start(high)});
  e.tick(T0 + 2 * kWindow);
  CHECK(actions(e) == std::vector<Action>{start(low)});
  e.tick(T0 + 3 * kWindow);
  CHECK(actions(e) == std::vector<Action>{start(mid)});
  e.tick(T0 + 4 * kWindow);
  CHECK(actions(e) == std::vector<Action>{start(lower)});
}

TEST_CASE("predicted start: stats' predictedStart head and tail, and queuedByPriority", "[waiting][predicted][stats]") {
  constexpr Millis kWindow = 1000;
  Engine e = configured(config(1, kWindow, 10));
  json s = stats(e, T0);
  CHECK(s["predictedStart"] == json({{"head", nullptr}, {"tail", nullptr}}));
  CHECK(s["queuedByPriority"] == json::array());

  arrive(e, T0);
  const Ticket b = arrive_w(e, T0 + 1, 0);
  const Ticket c = arrive_w(e, T0 + 2, 0);
  const Ticket h = arrive_w(e, T0 + 3, 3);
  const Ticket l = arrive_w(e, T0 + 4, -2);
  e.clear_output();
  s = stats(e, T0 + 5);
  e.clear_output();
  CHECK(s["queued"] == 4);
  CHECK(s["queuedByPriority"] == json::array({by_priority(3, 1), by_priority(0, 2), by_priority(-2, 1)}));
  CHECK(s["predictedStart"]["head"] == predicted(e, h));
  CHECK(s["predictedStart"]["tail"] == predicted(e, l));
  CHECK(s["predictedStart"]["head"] == T0 + kWindow);
  CHECK(s["predictedStart"]["tail"] == T0 + 4 * kWindow);
  CHECK(predicted(e, b) == T0 + 2 * kWindow);
  CHECK(predicted(e, c) == T0 + 3 * kWindow);

  withdraw(e, l, T0 + 6);
  e.clear_output();
  s = stats(e, T0 + 7);
  CHECK(s["queuedByPriority"] == json::array({by_priority(3, 1), by_priority(0, 2)}));
  CHECK(s["predictedStart"]["tail"] == T0 + 3 * kWindow);
}
