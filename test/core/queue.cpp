// Verifies the FIFO queue: arrival validation, strict order, head-of-line blocking, cancel, configure/reconfigure and
// erase.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>

#include "drl/engine.h"
#include "engine_helpers.h"

using namespace drl;
using namespace drl::test;

TEST_CASE("first starts follow arrival order as slots free", "[queue]") {
  Engine e = configured(config(100, 1000, 1));
  const Ticket a = arrive(e, T0);
  const Ticket b = arrive(e, T0 + 1);
  const Ticket c = arrive(e, T0 + 2);
  const Ticket d = arrive(e, T0 + 3);
  CHECK(actions(e) == std::vector<Action>{start(a)});
  CHECK(inspect(e).queued() == 3);

  report(e, a, ok(), T0 + 10);
  CHECK(actions(e) == std::vector<Action>{resolve(a), start(b)});
  report(e, b, ok(), T0 + 11);
  CHECK(actions(e) == std::vector<Action>{resolve(b), start(c)});
  report(e, c, ok(), T0 + 12);
  CHECK(actions(e) == std::vector<Action>{resolve(c), start(d)});
  CHECK(inspect(e).queued() == 0);
}

TEST_CASE("a head that cannot fit blocks cheaper callers behind it: no overtaking", "[queue]") {
  constexpr Millis kWindow = 1000;
  Engine e = configured(config(5, kWindow, 10));
  arrive(e, 3, T0);
  const Ticket big = arrive(e, 5, T0 + 1);    // 3 + 5 > 5: waits for T0's grant
  const Ticket small = arrive(e, 1, T0 + 2);  // 3 + 1 <= 5 would fit, but is behind
  CHECK(actions(e) == std::vector<Action>{start(1)});
  CHECK(inspect(e).queued() == 2);
  CHECK(inspect(e).used() == 3);
  CHECK(wake(e) == T0 + kWindow);

  e.tick(T0 + kWindow - 1);
  CHECK(actions(e).empty());
  e.tick(T0 + kWindow);
  CHECK(actions(e) == std::vector<Action>{start(big)});
  // Now the window is full with the head's 5: the small caller waits a window.
  CHECK(wake(e) == T0 + 2 * kWindow);
  e.tick(T0 + 2 * kWindow);
  CHECK(actions(e) == std::vector<Action>{start(small)});
}

TEST_CASE("a newcomer joins behind the queue even when it would fit", "[queue]") {
  Engine e = configured(config(3, 1000, 10));
  arrive(e, 2, T0);
  const Ticket head = arrive(e, 2, T0 + 1);  // waits: 2 + 2 > 3
  e.clear_output();
  const Ticket late = arrive(e, 1, T0 + 2);  // 2 + 1 <= 3, but someone is waiting
  CHECK(e.actions().empty());
  CHECK(inspect(e).queued() == 2);
  CHECK(inspect(e).used() == 2);
  e.tick(T0 + 1000);
  CHECK(actions(e) == std::vector<Action>{start(head), start(late)});
}

TEST_CASE("a head blocked only by slots wakes for nothing but attempt timeouts: a report frees it", "[queue]") {
  Engine e = configured(config(100, 1000, 1));
  const Ticket a = arrive(e, T0);
  const Ticket b = arrive(e, T0);
  e.clear_output();
  CHECK(inspect(e).queued() == 1);
  CHECK(wake(e) == T0 + kDefaultAttemptTimeout);  // a's timeout, not a poll for the slot
  report(e, a, ok(), T0 + 50);
  CHECK(actions(e) == std::vector<Action>{resolve(a), start(b)});
  CHECK(wake(e) == T0 + 50 + kDefaultAttemptTimeout);  // b's
}

TEST_CASE("due retries are served before queued first starts", "[queue]") {
  // One unit per 100 ms: a retry and a queued caller want the same unit.
  Engine e = configured(config(1, 100, 2, {{"maxRetries", 2}, {"minDelayInMs", 90}, {"maxDelayInMs", 90}}));
  const Ticket a = arrive(e, T0);
  report(e, a, failed(Failure::Retryable, 503), T0 + 10);  // due at T0 + 100
  const Ticket b = arrive(e, T0 + 50);                     // a free slot, but no unit until T0 + 100
  e.clear_output();
  CHECK(wake(e) == T0 + 100);

  e.tick(T0 + 100);
  CHECK(actions(e) == std::vector<Action>{start(a, 2)});
  CHECK(inspect(e).queued() == 1);
  CHECK(wake(e) == T0 + 200);
  e.tick(T0 + 200);
  CHECK(actions(e) == std::vector<Action>{start(b)});
}

// Verifies that an arrival which would fit on its own (queue empty, slot
// free, window room) still goes behind a retry that falls due at that very
// event: the retry was waiting first.
TEST_CASE("a newcomer arriving as a retry falls due does not overtake it", "[queue]") {
  Engine e = configured(config(1, 100, 2, {{"maxRetries", 2}, {"minDelayInMs", 90}, {"maxDelayInMs", 90}}));
  const Ticket a = arrive(e, T0);
  report(e, a, failed(Failure::Retryable, 503), T0 + 10);  // due at T0 + 100, when a's grant expires
  e.clear_output();
  const Ticket b = arrive(e, T0 + 100);  // no tick first: the retry falls due in b's own step
  CHECK(actions(e) == std::vector<Action>{start(a, 2)});
  CHECK(inspect(e).queued() == 1);
  e.tick(T0 + 200);
  CHECK(actions(e) == std::vector<Action>{start(b)});
}

TEST_CASE("cancelling a queued caller rejects it at once, the next moves up", "[queue]") {
  Engine e = configured(config(100, 1000, 1));
  const Ticket a = arrive(e, T0);
  const Ticket b = arrive(e, T0);
  const Ticket c = arrive(e, T0);
  e.clear_output();
  cancel(e, b, T0 + 1);
  CHECK(drain(e).actions == std::vector<Action>{reject(b, ErrorCode::Cancelled)});
  CHECK(inspect(e).queued() == 1);
  report(e, a, ok(), T0 + 2);
  CHECK(actions(e) == std::vector<Action>{resolve(a), start(c)});
  // The cancelled ticket is gone.
  const Status again = e.cancel(b, T0 + 3);
  REQUIRE_FALSE(again.ok());
  CHECK(again.error().code == ErrorCode::UnknownTicket);
}

TEST_CASE("cancelling a blocked head unblocks the callers behind it", "[queue]") {
  Engine e = configured(config(5, 1000, 10));
  arrive(e, 3, T0);
  const Ticket big = arrive(e, 5, T0 + 1);
  const Ticket small = arrive(e, 1, T0 + 2);
  e.clear_output();
  cancel(e, big, T0 + 3);
  CHECK(actions(e) == std::vector<Action>{reject(big, ErrorCode::Cancelled), start(small)});
  CHECK(inspect(e).used() == 4);
}

TEST_CASE("arrive validates the cost", "[queue]") {
  Engine e = configured(config(10, 1000, 1));
  SECTION("not an integer >= 0 a JS number holds exactly: InvalidArgument, RangeError") {
    const double bad = GENERATE(-1.0, 1.5, std::nan(""), std::numeric_limits<double>::infinity(), 9007199254740992.0);
    CAPTURE(bad);
    auto t = e.arrive(bad, T0);
    REQUIRE_FALSE(t.ok());
    CHECK(t.error().code == ErrorCode::InvalidArgument);
    CHECK(t.error().kind == ErrorKind::RangeError);
    CHECK(t.error().message.rfind("[drl:invalid-argument] cost must be an integer >= 0", 0) == 0);
  }
  SECTION("the words, as the client words them (shim/rules.ts)") {
    CHECK(e.arrive(-1, T0).error().message == "[drl:invalid-argument] cost must be an integer >= 0 (received -1)");
    CHECK(e.arrive(std::nan(""), T0).error().message ==
          "[drl:invalid-argument] cost must be an integer >= 0 (received NaN)");
    CHECK(e.arrive(9007199254740992.0, T0).error().message ==
          "[drl:invalid-argument] cost must be an integer >= 0 and at most 9007199254740991 (received "
          "9007199254740992)");
  }
  SECTION("above the largest limit a window may have, yet exact: CostTooLarge") {
    auto t = e.arrive(9007199254740991.0, T0);
    REQUIRE_FALSE(t.ok());
    CHECK(t.error().code == ErrorCode::CostTooLarge);
  }
  SECTION("above the limit: CostTooLarge naming both numbers") {
    auto t = e.arrive(11, T0);
    REQUIRE_FALSE(t.ok());
    CHECK(t.error().code == ErrorCode::CostTooLarge);
    CHECK(t.error().message.rfind("[drl:cost-too-large] ", 0) == 0);
    CHECK(t.error().message.find("11") != std::string::npos);
    CHECK(t.error().message.find("10") != std::string::npos);
  }
  CHECK(writes_of(e).empty());
  CHECK(e.actions().empty());
  CHECK(inspect(e).queued() == 0);
  CHECK(inspect(e).active() == 0);
  // The whole limit is a valid cost (and so is 0: see zero_cost.cpp).
  const Ticket t = arrive(e, 10, T0);
  CHECK(actions(e) == std::vector<Action>{start(t)});
}

TEST_CASE("arrive and reconfigure before configure are the not-configured error", "[queue][configure]") {
  Engine e;
  auto t = e.arrive(1, T0);
  REQUIRE_FALSE(t.ok());
  CHECK(t.error().code == ErrorCode::NoSuchLimiter);
  CHECK(t.error().message.find("[drl:no-such-limiter]") != std::string::npos);

  const Status st = e.reconfigure(R"({"concurrency":2})", T0);
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().code == ErrorCode::NoSuchLimiter);
  CHECK(st.error().message.find("[drl:no-such-limiter]") != std::string::npos);
  CHECK_FALSE(e.configured());
  CHECK(writes_of(e).empty());
}

TEST_CASE("an invalid config is refused with no writes and no change", "[queue][configure]") {
  SECTION("on a fresh engine") {
    Engine e;
    const Status st = e.configure(R"({"bucket":{"limitPerWindow":0,"windowInMs":1000},"concurrency":1})", T0);
    REQUIRE_FALSE(st.ok());
    CHECK(st.error().code == ErrorCode::InvalidConfig);
    CHECK_FALSE(e.configured());
    CHECK(writes_of(e).empty());
  }
  SECTION("on a busy engine, by configure and by reconfigure") {
    const std::string good = config(2, 1000, 1);
    Engine e = configured(good);
    arrive(e, T0);
    arrive(e, T0);
    e.clear_output();
    Status st;
    SECTION("configure") { st = e.configure(R"({"bucket":{"limitPerWindow":5},"concurrency":5})", T0 + 1); }
    SECTION("reconfigure") { st = e.reconfigure(R"({"concurrency":0})", T0 + 1); }
    SECTION("reconfigure with an unknown key") { st = e.reconfigure(R"({"concurency":5})", T0 + 1); }
    REQUIRE_FALSE(st.ok());
    CHECK(st.error().code == ErrorCode::InvalidConfig);
    CHECK(writes_of(e).empty());
    CHECK(e.actions().empty());
    CHECK(e.config_text() == json::parse(good).dump());
    CHECK(e.config()->concurrency == 1);
    CHECK(inspect(e).queued() == 1);
    CHECK(inspect(e).active() == 1);
  }
}

TEST_CASE("configure stores the config as given", "[queue][configure]") {
  Engine e;
  const std::string text = config(3, 1000, 2, {{"maxRetries", 1}});
  REQUIRE(e.configure(text, T0).ok());
  CHECK(writes_of(e) == std::vector<Write>{put_config()});
  CHECK(e.config_text() == json::parse(text).dump());
  CHECK(e.actions().empty());
}

TEST_CASE("raising the limit by reconfigure starts queued callers at once", "[queue][configure]") {
  Engine e = configured(config(2, 1000, 10));
  arrive(e, T0);
  arrive(e, T0);
  const Ticket c = arrive(e, T0);
  const Ticket d = arrive(e, T0);
  e.clear_output();
  REQUIRE(inspect(e).queued() == 2);
  REQUIRE(e.reconfigure(R"({"bucket":{"limitPerWindow":4}})", T0 + 1).ok());
  const Step s = drain(e);
  CHECK(s.actions == std::vector<Action>{start(c), start(d)});
  CHECK(s.writes.front() == put_config());
  // The patch merged deeply: the window is still the stored one.
  CHECK(e.config()->bucket.window_ms == 1000);
  CHECK(e.config()->bucket.limit_per_window == 4);
}

TEST_CASE("a shorter window by reconfigure expires grants at once", "[queue][configure]") {
  Engine e = configured(config(1, 10'000, 10));
  arrive(e, T0);
  const Ticket b = arrive(e, T0 + 1);
  e.clear_output();
  REQUIRE(e.reconfigure(R"({"bucket":{"windowInMs":100}})", T0 + 200).ok());
  const Step s = drain(e);
  CHECK(s.actions == std::vector<Action>{start(b)});
  CHECK(s.writes == std::vector<Write>{put_config(), delete_through(T0), put_grant(T0 + 200, 1)});
}

TEST_CASE("lowering the limit below a queued caller's cost rejects only that caller", "[queue][configure]") {
  Engine e = configured(config(10, 1000, 1));
  const Ticket a = arrive(e, T0);
  const Ticket big = arrive(e, 8, T0);
  const Ticket small = arrive(e, 2, T0);
  e.clear_output();
  REQUIRE(e.reconfigure(R"({"bucket":{"limitPerWindow":5}})", T0 + 1).ok());
  CHECK(actions(e) == std::vector<Action>{reject(big, ErrorCode::CostTooLarge)});
  CHECK(inspect(e).queued() == 1);
  report(e, a, ok(), T0 + 2);
  CHECK(actions(e) == std::vector<Action>{resolve(a), start(small)});
}

TEST_CASE("reconfigure carries the log and the penalty over", "[queue][configure]") {
  Engine e = configured(config(10, 1000, 10));
  arrive(e, 4, T0);
  pause(e, 5000, T0 + 1);
  e.clear_output();
  const auto grants_before = inspect(e).grants();
  REQUIRE(e.reconfigure(R"({"concurrency":20})", T0 + 2).ok());
  CHECK(inspect(e).forced_until() == T0 + 5001);
  CHECK(inspect(e).grants() == grants_before);
  const Ticket t = arrive(e, T0 + 3);
  CHECK(actions(e).empty());
  e.tick(T0 + 5001);
  CHECK(actions(e) == std::vector<Action>{start(t)});
}

TEST_CASE("erase rejects everyone waiting and forgets the bucket", "[queue][erase]") {
  Engine e = configured(config(100, 1000, 2, {{"maxRetries", 3}, {"minDelayInMs", 100}}));
  const Ticket running = arrive(e, T0);
  const Ticket backing_off = arrive(e, T0);
  const Ticket queued = arrive(e, T0);
  report(e, backing_off, failed(Failure::Retryable, 503), T0 + 1);
  e.clear_output();
  REQUIRE(inspect(e).queued() == 1);

  e.erase(T0 + 2);
  const Step s = drain(e);
  CHECK(s.writes == std::vector<Write>{erase_all()});
  CHECK(s.actions.size() == 3);
  for (Ticket t : {running, backing_off, queued}) {
    CAPTURE(t);
    CHECK(std::find(s.actions.begin(), s.actions.end(), reject(t, ErrorCode::NoSuchLimiter)) != s.actions.end());
  }
  CHECK_FALSE(e.configured());
  CHECK(inspect(e).queued() == 0);
  CHECK(wake(e) == T0 + kDefaultAttemptTimeout);  // the running callback still times out

  auto t = e.arrive(1, T0 + 3);
  REQUIRE_FALSE(t.ok());
  CHECK(t.error().code == ErrorCode::NoSuchLimiter);

  // The running callback's late report settles nothing twice.
  REQUIRE(e.report(running, ok(), T0 + 4).ok());
  CHECK(e.actions().empty());
  CHECK(inspect(e).active() == 0);
}

// Verifies that a running call whose caller is gone settles exactly once,
// whichever of cancel and erase comes first, and that its late report adds nothing.
TEST_CASE("a running call settles once whatever order cancel and erase come in", "[queue][erase]") {
  Engine e = configured(config(100, 1000, 1));
  const Ticket running = arrive(e, T0);
  e.clear_output();
  SECTION("cancel, then erase") {
    cancel(e, running, T0 + 1);
    CHECK(actions(e).empty());  // it keeps its slot: the work is in flight
    e.erase(T0 + 2);
    CHECK(actions(e) == std::vector<Action>{reject(running, ErrorCode::NoSuchLimiter)});
  }
  SECTION("erase, then cancel") {
    e.erase(T0 + 1);
    CHECK(actions(e) == std::vector<Action>{reject(running, ErrorCode::NoSuchLimiter)});
    cancel(e, running, T0 + 2);
    CHECK(actions(e).empty());
  }
  report(e, running, ok(), T0 + 3);
  CHECK(actions(e).empty());
  CHECK(inspect(e).active() == 0);
  CHECK(inspect(e).running() == 0);
}
