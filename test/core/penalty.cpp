// Verifies penalties (429s and pause): the deadline, its delay sources, no takes before it, and the refill floor at
// lift.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "drl/engine.h"
#include "engine_helpers.h"

using namespace drl;
using namespace drl::test;

namespace {

constexpr int64_t kLimit = 10;
constexpr Millis kWindow = 1000;

// Generous maxDelay so explicit delays are not clamped unless a test wants it.
std::string penalty_config(const json& retry = {{"maxRetries", 0}, {"maxDelayInMs", 120'000}},
                           std::optional<double> fraction = std::nullopt) {
  return config(kLimit, kWindow, 100, retry, fraction);
}

// Starts one call at `now` and returns its ticket, output cleared.
Ticket running_call(Engine& e, Millis now) {
  const Ticket t = arrive(e, now);
  REQUIRE(actions(e) == std::vector<Action>{start(t)});
  return t;
}

}  // namespace

TEST_CASE("a 429 sets the deadline to now + delay, nothing starts before it", "[penalty]") {
  Engine e = configured(penalty_config({{"maxRetries", 1}, {"maxDelayInMs", 120'000}}));
  const Ticket a = running_call(e, T0);

  report(e, a, too_many(5000), T0 + 100);
  Step s = drain(e);
  CHECK(inspect(e).forced_until() == T0 + 5100);
  CHECK(s.writes == std::vector<Write>{put_penalty(T0 + 5100, true)});
  CHECK(s.actions.empty());  // its retry waits out the penalty too
  CHECK(inspect(e).active() == 1);

  // The bucket is nearly empty, but the penalty holds everyone.
  const Ticket b = arrive(e, T0 + 200);
  CHECK(e.actions().empty());
  // First the slots record's idle write: a's slot was released at the 429
  // and nothing has run since (the record is not rewritten within a second
  // of its last write by riding on the penalty).
  CHECK(wake(e) == T0 + 100 + kIdleSlotsWrite);
  e.clear_output();
  e.tick(T0 + 100 + kIdleSlotsWrite);
  CHECK(e.writes() == std::vector<Write>{put_slots()});
  e.clear_output();
  CHECK(e.slots_text().empty());
  CHECK(wake(e) == T0 + 5100);
  e.tick(T0 + 5099);
  CHECK(drain(e).actions.empty());

  e.tick(T0 + 5100);
  s = drain(e);
  // The due retry first (it holds a slot), then the queue.
  CHECK(s.actions == std::vector<Action>{start(a, 2), start(b)});
  // At lift the log becomes one floor grant (half of 10 spent), then the takes join it.
  CHECK(s.writes == std::vector<Write>{clear_grants(), put_grant(T0 + 5100, 5), put_penalty(T0 + 5100, false),
                                       put_grant(T0 + 5100, 6), put_grant(T0 + 5100, 7)});
  CHECK(inspect(e).forced_until() == T0 + 5100);
}

TEST_CASE("the penalty delay: explicit ms, else Retry-After, else backoff, clamped to maxDelayInMs", "[penalty]") {
  const json retry = {{"maxRetries", 3}, {"minDelayInMs", 200}, {"maxDelayInMs", 60'000}, {"factor", 3}};
  Engine e = configured(penalty_config(retry));
  const Ticket a = running_call(e, T0);
  const Millis now = T0 + 10;
  Report r = too_many();
  Millis delay = 0;

  SECTION("an explicit retry_after_ms beats the header") {
    r.retry_after_ms = 2500;
    r.retry_after = "10";
    delay = 2500;
  }
  SECTION("a Retry-After header in seconds") {
    r.retry_after = "3";
    delay = 3000;
  }
  SECTION("fractional ms round up (waiting longer is the safe side)") {
    r.retry_after_ms = 1234.2;
    delay = 1235;
  }
  SECTION("a negative explicit delay is dropped: the header applies") {
    r.retry_after_ms = -10;
    r.retry_after = "2";
    delay = 2000;
  }
  SECTION("a NaN explicit delay is dropped: the header applies") {
    r.retry_after_ms = std::nan("");
    r.retry_after = "2";
    delay = 2000;
  }
  SECTION("an infinite explicit delay is dropped: backoff for attempt 1") {
    r.retry_after_ms = std::numeric_limits<double>::infinity();
    delay = 200;
  }
  SECTION("an unparsable header is absent: backoff for attempt 1") {
    r.retry_after = "soon";
    delay = 200;
  }
  SECTION("no hint at all: backoff for attempt 1") { delay = 200; }
  SECTION("an explicit delay above maxDelayInMs is clamped") {
    r.retry_after_ms = 100'000;
    delay = 60'000;
  }
  SECTION("a header above maxDelayInMs is clamped") {
    r.retry_after = "120";
    delay = 60'000;
  }
  SECTION("the rateLimit hook on a non-429 status is a 429") {
    r = ok(200);
    r.rate_limited = true;
    r.retry_after_ms = 700;
    delay = 700;
  }
  report(e, a, r, now);
  CHECK(inspect(e).forced_until() == now + delay);
  CHECK(drain(e).writes == std::vector<Write>{put_penalty(now + delay, true)});
}

TEST_CASE("without a hint, the penalty is the backoff of the attempt that saw the 429", "[penalty]") {
  const json retry = {{"maxRetries", 3}, {"minDelayInMs", 200}, {"maxDelayInMs", 60'000}, {"factor", 3}};
  Engine e = configured(penalty_config(retry));
  const Ticket a = running_call(e, T0);
  report(e, a, failed(Failure::Retryable, 503), T0 + 10);  // attempt 1 backs off 200 ms
  e.tick(T0 + 210);
  REQUIRE(actions(e) == std::vector<Action>{start(a, 2)});
  report(e, a, too_many(), T0 + 300);
  // Attempt 2: 200 * 3^(2-1).
  CHECK(inspect(e).forced_until() == T0 + 300 + 600);
}

TEST_CASE("respectRetryAfter false ignores the Retry-After header", "[penalty]") {
  const json retry = {{"maxRetries", 3}, {"minDelayInMs", 200}, {"respectRetryAfter", false}};
  Engine e = configured(penalty_config(retry));
  const Ticket a = running_call(e, T0);
  Report r = too_many();
  r.retry_after = "20";
  report(e, a, r, T0 + 10);
  CHECK(inspect(e).forced_until() == T0 + 10 + 200);
}

TEST_CASE("concurrent 5s / 60s / 5s penalties wait 60s: deadlines never shorten", "[penalty]") {
  Engine e = configured(penalty_config());
  const Ticket a = running_call(e, T0);
  const Ticket b = running_call(e, T0);
  const Ticket c = running_call(e, T0);

  report(e, a, too_many(5000), T0 + 10);
  CHECK(drain(e).writes == std::vector<Write>{put_penalty(T0 + 5010, true)});
  report(e, b, too_many(60'000), T0 + 11);
  CHECK(drain(e).writes == std::vector<Write>{put_penalty(T0 + 60'011, true)});
  report(e, c, too_many(5000), T0 + 12);
  CHECK(drain(e).writes.empty());  // nothing to store: the deadline did not move
  CHECK(inspect(e).forced_until() == T0 + 60'011);

  const Ticket d = arrive(e, T0 + 5010);
  e.tick(T0 + 5012);
  CHECK(actions(e).empty());
  CHECK(wake(e) == T0 + 60'011);
  e.tick(T0 + 60'011);
  CHECK(actions(e) == std::vector<Action>{start(d)});
}

TEST_CASE("a shorter pause during a longer penalty changes nothing", "[penalty]") {
  Engine e = configured(penalty_config());
  pause(e, 10'000, T0);
  e.clear_output();
  pause(e, 500, T0 + 1);
  CHECK(drain(e).writes.empty());
  CHECK(inspect(e).forced_until() == T0 + 10'000);
  pause(e, 20'000, T0 + 2);
  CHECK(drain(e).writes == std::vector<Write>{put_penalty(T0 + 20'002, true)});
}

TEST_CASE("at lift the default fraction leaves half the limit available", "[penalty]") {
  Engine e = configured(penalty_config());
  pause(e, 2000, T0);
  const Millis lift = T0 + 2000;
  CHECK(drain(e).writes == std::vector<Write>{put_penalty(lift, true)});

  std::vector<Ticket> waiting;
  for (int i = 0; i < 6; ++i) waiting.push_back(arrive(e, T0 + 100));
  CHECK(e.actions().empty());
  CHECK(wake(e) == lift);

  e.tick(lift);
  const Step s = drain(e);
  // ceil(10 * (1 - 0.5)) = 5 counted as spent at lift: 5 of the 6 start.
  CHECK(started(s.actions) == std::vector<Ticket>(waiting.begin(), waiting.begin() + 5));
  CHECK(inspect(e).grants() == Grants{{lift, kLimit}});
  // Full allowance returns one window after the deadline.
  CHECK(wake(e) == lift + kWindow);
  e.tick(lift + kWindow - 1);
  CHECK(actions(e).empty());
  e.tick(lift + kWindow);
  CHECK(actions(e) == std::vector<Action>{start(waiting.back())});
}

TEST_CASE("the lift floor is a floor, not a reset: grants live at lift keep counting", "[penalty]") {
  constexpr Millis kLongWindow = 10'000;
  Engine e = configured(config(kLimit, kLongWindow, 100, {{"maxRetries", 0}}));
  arrive(e, 7, T0);
  pause(e, 1000, T0 + 100);
  const Millis lift = T0 + 1100;
  e.clear_output();

  std::vector<Ticket> waiting;
  for (int i = 0; i < 4; ++i) waiting.push_back(arrive(e, lift));
  const Step s = drain(e);
  // max(ceil(10 * 0.5), 7 live at lift) = 7: only 3 remain, not 5.
  CHECK(started(s.actions) == std::vector<Ticket>(waiting.begin(), waiting.begin() + 3));
  REQUIRE(s.writes.size() >= 2);
  CHECK(s.writes[0] == clear_grants());
  CHECK(s.writes[1] == put_grant(lift, 7));
  CHECK(inspect(e).used() == kLimit);
  CHECK(inspect(e).grants() == Grants{{lift, kLimit}});
}

TEST_CASE("penaltyRefillFraction 0 opens nothing until one window after the deadline", "[penalty]") {
  Engine e = configured(penalty_config({{"maxRetries", 0}}, 0.0));
  pause(e, 500, T0);
  const Millis lift = T0 + 500;
  const Ticket t = arrive(e, lift);
  CHECK(e.actions().empty());
  CHECK(inspect(e).grants() == Grants{{lift, kLimit}});
  CHECK(wake(e) == lift + kWindow);
  e.tick(lift + kWindow - 1);
  CHECK(actions(e).empty());
  e.tick(lift + kWindow);
  CHECK(actions(e) == std::vector<Action>{start(t)});
}

TEST_CASE("penaltyRefillFraction 1 opens the full limit minus live grants", "[penalty]") {
  constexpr Millis kLongWindow = 10'000;
  Engine e = configured(config(kLimit, kLongWindow, 100, {{"maxRetries", 0}}, 1.0));
  int64_t live = 0;
  SECTION("an empty log reopens completely") { live = 0; }
  SECTION("three live units keep counting") {
    live = 3;
    arrive(e, 3, T0);
  }
  pause(e, 1000, T0 + 10);
  const Millis lift = T0 + 1010;
  e.clear_output();
  e.tick(lift);
  const Step s = drain(e);
  if (live == 0) {
    // No floor and nothing live: no grant row at all.
    CHECK(s.writes == std::vector<Write>{clear_grants(), put_penalty(lift, false)});
  } else {
    CHECK(s.writes == std::vector<Write>{clear_grants(), put_grant(lift, live), put_penalty(lift, false)});
  }
  size_t admitted = 0;
  for (int i = 0; i < kLimit; ++i) {
    arrive(e, lift);
    admitted += count(actions(e), ActionKind::Start);
  }
  CHECK(admitted == static_cast<size_t>(kLimit - live));
}

TEST_CASE("the lift floor rounds up, without float noise", "[penalty]") {
  int64_t limit = 0;
  double fraction = 0;
  int64_t available = 0;
  SECTION("limit 3, fraction 0.5: ceil(1.5) = 2 spent, 1 available") {
    limit = 3;
    fraction = 0.5;
    available = 1;
  }
  SECTION("limit 10, fraction 0.7: 10 * 0.3 is 3 spent (not 4), 7 available") {
    limit = 10;
    fraction = 0.7;
    available = 7;
  }
  SECTION("limit 7, fraction 0.1: ceil(6.3) = 7 spent, 0 available") {
    limit = 7;
    fraction = 0.1;
    available = 0;
  }
  Engine e = configured(config(limit, kWindow, 100, {{"maxRetries", 0}}, fraction));
  pause(e, 100, T0);
  e.tick(T0 + 100);
  size_t admitted = 0;
  for (int64_t i = 0; i < limit; ++i) {
    arrive(e, T0 + 100);
    admitted += count(actions(e), ActionKind::Start);
  }
  CHECK(admitted == static_cast<size_t>(available));
}

TEST_CASE("pause validates its duration", "[penalty]") {
  Engine e = configured(penalty_config());
  SECTION("rejected values change nothing") {
    const double bad = GENERATE(-1.0, 1.5, std::nan(""), std::numeric_limits<double>::infinity(),
                                static_cast<double>(kMaxDelayMs + 1));
    CAPTURE(bad);
    const Status st = e.pause(bad, T0);
    REQUIRE_FALSE(st.ok());
    CHECK(st.error().code == ErrorCode::InvalidArgument);
    CHECK(st.error().message.rfind("[drl:invalid-argument] ", 0) == 0);
    CHECK(writes_of(e).empty());
    CHECK(inspect(e).forced_until() == 0);
    const Ticket t = arrive(e, T0);
    CHECK(e.actions() == std::vector<Action>{start(t)});
  }
  SECTION("the largest pause is accepted") {
    REQUIRE(e.pause(static_cast<double>(kMaxDelayMs), T0).ok());
    CHECK(inspect(e).forced_until() == T0 + kMaxDelayMs);
  }
}

TEST_CASE("pause before configure is the not-configured error", "[penalty]") {
  Engine e;
  const Status st = e.pause(1000, T0);
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().code == ErrorCode::NoSuchLimiter);
  CHECK(st.error().message.find("[drl:no-such-limiter]") != std::string::npos);
  CHECK(writes_of(e).empty());
}

TEST_CASE("pause(0) lifts at once, applying the refill floor", "[penalty]") {
  Engine e = configured(penalty_config());
  pause(e, 0, T0);
  CHECK(inspect(e).forced_until() == T0);
  CHECK(drain(e).writes ==
        std::vector<Write>{put_penalty(T0, true), clear_grants(), put_grant(T0, 5), put_penalty(T0, false)});
  const Ticket t = arrive(e, T0);
  CHECK(e.actions() == std::vector<Action>{start(t)});
}

TEST_CASE("a pause with a clock behind the engine counts from the latest time seen", "[penalty]") {
  Engine e = configured(penalty_config());
  e.tick(T0 + 500);
  pause(e, 1000, T0);
  CHECK(inspect(e).forced_until() == T0 + 1500);
}

TEST_CASE("a penalty holds back due retries as well as the queue", "[penalty]") {
  Engine e = configured(penalty_config({{"maxRetries", 2}, {"minDelayInMs", 100}}));
  const Ticket a = running_call(e, T0);
  report(e, a, failed(Failure::Retryable, 503), T0 + 10);  // due at T0 + 110
  pause(e, 1000, T0 + 20);
  e.clear_output();
  e.tick(T0 + 110);
  CHECK(actions(e).empty());
  // Nothing runs: the slots record's idle write comes first, then the lift.
  CHECK(wake(e) == T0 + 10 + kIdleSlotsWrite);
  e.tick(T0 + 10 + kIdleSlotsWrite);
  CHECK(actions(e).empty());
  CHECK(wake(e) == T0 + 1020);
  e.tick(T0 + 1020);
  CHECK(actions(e) == std::vector<Action>{start(a, 2)});
}

TEST_CASE("a 429 reported by a call whose caller went away still pauses everyone", "[penalty]") {
  // The penalty is the upstream's word about the shared quota, whoever's
  // callback heard it: the caller being gone changes only how it settles.
  Engine e = configured(penalty_config({{"maxRetries", 2}, {"maxDelayInMs", 120'000}}));
  const Ticket a = running_call(e, T0);
  cancel(e, a, T0 + 5);
  report(e, a, too_many(5000), T0 + 10);
  const Step s = drain(e);
  CHECK(s.actions == std::vector<Action>{reject(a, ErrorCode::Cancelled)});
  CHECK(inspect(e).forced_until() == T0 + 5010);
  CHECK(s.writes == std::vector<Write>{put_penalty(T0 + 5010, true)});
}
