// Verifies attempt outcomes: resolve, retry with exponential backoff, final and exhausted rejections, throws,
// unknown tickets, and a call's own maxRetries in place of the bucket's (reconfigures included).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "drl/engine.h"
#include "engine_helpers.h"

using namespace drl;
using namespace drl::test;

namespace {

// A bucket that never binds and one slot, so only retry policy shows.
std::string retry_config(const json& retry) { return config(1000, 1'000'000, 1, retry); }

// Starts one call wanting `cost` (1 unless given) and returns its ticket, output cleared.
Ticket running_call(Engine& e, double cost, Millis now) {
  const Ticket t = arrive(e, cost, now);
  REQUIRE(actions(e) == std::vector<Action>{start(t)});
  return t;
}
Ticket running_call(Engine& e, Millis now) { return running_call(e, 1, now); }

// A call's own maxRetries (Waiting::max_retries; nullopt: the bucket's).
Waiting retrying(std::optional<double> max_retries) {
  Waiting w;
  w.max_retries = max_retries;
  return w;
}

// Starts one call with its own maxRetries and returns its ticket, output cleared.
Ticket running_retrying(Engine& e, std::optional<double> max_retries, Millis now) {
  auto t = e.arrive(1, retrying(max_retries), now);
  if (!t.ok()) FAIL("arrive failed: " << t.error().message);
  REQUIRE(actions(e) == std::vector<Action>{start(*t)});
  return *t;
}

// How a call that failed every attempt went: its attempts and, for each
// retry, the delay from the failure before it to its start.
struct Exhausted {
  uint32_t attempts = 0;
  std::vector<Millis> delays;
};

// Fails the running attempt of `t` (retryable, 503) 1 ms after `now`, then
// each retry as soon as it starts (ticking at every wake), until the call is
// rejected; `now` ends at that rejection.
Exhausted fail_until_settled(Engine& e, Ticket t, Millis& now) {
  Exhausted out;
  for (uint32_t attempt = 1; attempt <= 200; ++attempt) {
    now += 1;
    report(e, t, failed(Failure::Retryable, 503), now);
    const auto settled = actions(e);
    if (!settled.empty()) {
      CHECK(settled == std::vector<Action>{reject(t, ErrorCode::CallFailed, 503)});
      out.attempts = attempt;
      return out;
    }
    const Millis failed_at = now;
    std::vector<Action> started;
    while (started.empty() && wake(e) != kNoWake) {
      now = wake(e);
      e.tick(now);
      started = actions(e);
    }
    REQUIRE(started == std::vector<Action>{start(t, attempt + 1)});
    out.delays.push_back(now - failed_at);
  }
  FAIL("ticket " << t << " was still retrying after 200 attempts");
  return out;
}

}  // namespace

TEST_CASE("a plain report resolves with that attempt's value, whatever the status", "[retry]") {
  Engine e = configured(retry_config({{"maxRetries", 3}}));
  const Ticket a = running_call(e, T0);
  const int32_t status = GENERATE(200, 0, 404, 500, 503);
  CAPTURE(status);
  report(e, a, ok(status), T0 + 1);
  const Step s = drain(e);
  CHECK(s.actions == std::vector<Action>{resolve(a, 1)});
  CHECK(s.writes.empty());
  CHECK(inspect(e).active() == 0);
  CHECK(inspect(e).forced_until() == 0);
}

TEST_CASE("a retryable failure backs off min(minDelay * factor^(k-1), maxDelay) and takes again", "[retry]") {
  constexpr int64_t kMaxRetries = 5;
  constexpr Millis kMinDelay = 100;
  constexpr Millis kMaxDelay = 1000;
  constexpr double kFactor = 2;
  constexpr int64_t kCost = 3;
  Engine e = configured(retry_config(
      {{"maxRetries", kMaxRetries}, {"minDelayInMs", kMinDelay}, {"maxDelayInMs", kMaxDelay}, {"factor", kFactor}}));
  const Ticket a = running_call(e, kCost, T0);
  Millis now = T0;
  for (uint32_t k = 1; k <= kMaxRetries; ++k) {
    CAPTURE(k);
    now += 7;
    report(e, a, failed(Failure::Retryable, 503), now);
    CHECK(drain(e).actions.empty());
    const Millis delay = std::min(static_cast<Millis>(kMinDelay * std::pow(kFactor, k - 1)), kMaxDelay);
    // Nothing runs during the backoff: the slots record is written on its own
    // after kIdleSlotsWrite, if the retry is not due first.
    CHECK(wake(e) == now + std::min(delay, kIdleSlotsWrite));
    e.tick(now + delay - 1);
    CHECK(actions(e).empty());
    now += delay;
    e.tick(now);
    const Step s = drain(e);
    CHECK(s.actions == std::vector<Action>{start(a, k + 1)});
    // Every attempt takes its cost from the bucket before it runs.
    CHECK(inspect(e).used() == kCost * (k + 1));
    CHECK(count(s.writes, WriteKind::PutGrant) == 1);
  }

  SECTION("the last attempt's success resolves with that attempt") {
    report(e, a, ok(), now + 1);
    CHECK(actions(e) == std::vector<Action>{resolve(a, kMaxRetries + 1)});
  }
  SECTION("the last attempt's failure rejects with its status") {
    report(e, a, failed(Failure::Retryable, 502), now + 1);
    CHECK(actions(e) == std::vector<Action>{reject(a, ErrorCode::CallFailed, 502)});
    CHECK(wake(e) == now + 1 + kIdleSlotsWrite);  // only the quiet bucket's slots record: no retry
  }
  CHECK(inspect(e).active() == 0);
}

TEST_CASE("a non-integer factor backs off by the product", "[retry]") {
  Engine e = configured(retry_config({{"maxRetries", 3}, {"minDelayInMs", 100}, {"factor", 1.5}}));
  const Ticket a = running_call(e, T0);
  report(e, a, failed(Failure::Retryable, 503), T0);
  e.tick(T0 + 100);
  REQUIRE(actions(e) == std::vector<Action>{start(a, 2)});
  report(e, a, failed(Failure::Retryable, 503), T0 + 100);
  CHECK(wake(e) == T0 + 100 + 150);
  e.tick(T0 + 250);
  REQUIRE(actions(e) == std::vector<Action>{start(a, 3)});
  report(e, a, failed(Failure::Retryable, 503), T0 + 250);
  CHECK(wake(e) == T0 + 250 + 225);
}

TEST_CASE("a final failure rejects at once with its status, attempts left or not", "[retry]") {
  Engine e = configured(retry_config({{"maxRetries", 3}}));
  const Ticket a = running_call(e, T0);
  const Ticket b = arrive(e, T0);
  e.clear_output();
  report(e, a, failed(Failure::Final, 400), T0 + 1);
  CHECK(actions(e) == std::vector<Action>{reject(a, ErrorCode::CallFailed, 400), start(b)});
}

TEST_CASE("a 429 outranks a failure: it pauses and retries instead of rejecting", "[retry]") {
  Engine e = configured(retry_config({{"maxRetries", 3}}));
  const Ticket a = running_call(e, T0);
  Report r = too_many(1000);
  r.failure = Failure::Final;
  report(e, a, r, T0 + 1);
  CHECK(drain(e).actions.empty());
  CHECK(inspect(e).forced_until() == T0 + 1001);
  e.tick(T0 + 1001);
  CHECK(actions(e) == std::vector<Action>{start(a, 2)});
}

TEST_CASE("an exhausted 429 rejects as a failed call with status 429, and still pauses", "[retry]") {
  Engine e = configured(retry_config({{"maxRetries", 1}, {"maxDelayInMs", 60'000}}));
  const Ticket a = running_call(e, T0);
  report(e, a, too_many(1000), T0 + 1);
  e.tick(T0 + 1001);
  REQUIRE(actions(e) == std::vector<Action>{start(a, 2)});
  report(e, a, too_many(5000), T0 + 1100);
  const Step s = drain(e);
  CHECK(s.actions == std::vector<Action>{reject(a, ErrorCode::CallFailed, 429)});
  CHECK(inspect(e).forced_until() == T0 + 6100);
  CHECK(s.writes == std::vector<Write>{put_penalty(T0 + 6100, true)});
  CHECK(inspect(e).active() == 0);
}

TEST_CASE("a throw retries with backoff, an exhausted throw rejects CallbackThrew", "[retry]") {
  Engine e = configured(retry_config({{"maxRetries", 2}, {"minDelayInMs", 100}, {"factor", 2}}));
  const Ticket a = running_call(e, T0);
  threw(e, a, T0 + 1);
  CHECK(drain(e).actions.empty());
  CHECK(wake(e) == T0 + 101);
  e.tick(T0 + 101);
  CHECK(actions(e) == std::vector<Action>{start(a, 2)});
  threw(e, a, T0 + 102);
  CHECK(wake(e) == T0 + 102 + 200);
  e.tick(T0 + 302);
  CHECK(actions(e) == std::vector<Action>{start(a, 3)});
  threw(e, a, T0 + 303);
  CHECK(actions(e) == std::vector<Action>{reject(a, ErrorCode::CallbackThrew)});
  CHECK(inspect(e).active() == 0);
}

TEST_CASE("maxRetries 0 allows a single attempt", "[retry]") {
  Engine e = configured(retry_config({{"maxRetries", 0}, {"maxDelayInMs", 60'000}}));
  const Ticket a = running_call(e, T0);
  SECTION("a retryable failure is final") {
    report(e, a, failed(Failure::Retryable, 503), T0 + 1);
    CHECK(actions(e) == std::vector<Action>{reject(a, ErrorCode::CallFailed, 503)});
  }
  SECTION("a throw is final") {
    threw(e, a, T0 + 1);
    CHECK(actions(e) == std::vector<Action>{reject(a, ErrorCode::CallbackThrew)});
  }
  SECTION("a 429 is final for the call but still pauses the bucket") {
    report(e, a, too_many(2000), T0 + 1);
    CHECK(actions(e) == std::vector<Action>{reject(a, ErrorCode::CallFailed, 429)});
    CHECK(inspect(e).forced_until() == T0 + 2001);
  }
  CHECK(inspect(e).active() == 0);
  // A quiet bucket writes its slots record once (unless the step's own write,
  // the 429's penalty, carried it), then needs no timer.
  if (wake(e) != kNoWake) {
    CHECK(wake(e) == T0 + 1 + kIdleSlotsWrite);
    e.tick(wake(e));
    CHECK(drain(e).slot_records == 1);
  }
  CHECK(wake(e) == kNoWake);
}

TEST_CASE("a retry waits for the bucket like any take", "[retry]") {
  Engine e = configured(config(2, 1000, 1, {{"maxRetries", 1}, {"minDelayInMs", 100}}));
  const Ticket a = running_call(e, 2, T0);
  report(e, a, failed(Failure::Retryable, 503), T0 + 10);  // due at T0 + 110, bucket full until T0 + 1000
  CHECK(wake(e) == T0 + 110);                              // the retry is due before the quiet bucket's slots record
  e.tick(T0 + 110);
  CHECK(actions(e).empty());
  e.tick(T0 + 10 + kIdleSlotsWrite);
  CHECK(drain(e).slot_records == 1);
  CHECK(wake(e) == T0 + 1000);
  e.tick(T0 + 1000);
  CHECK(actions(e) == std::vector<Action>{start(a, 2)});
}

TEST_CASE("cancel: queued rejects now, running when it reports, between attempts now", "[retry]") {
  Engine e = configured(config(100, 1000, 2, {{"maxRetries", 2}, {"minDelayInMs", 100}}));
  const Ticket running = arrive(e, T0);
  const Ticket backing_off = arrive(e, T0);
  const Ticket queued = arrive(e, T0);
  report(e, backing_off, failed(Failure::Retryable, 503), T0 + 1);
  e.clear_output();

  cancel(e, queued, T0 + 2);
  CHECK(actions(e) == std::vector<Action>{reject(queued, ErrorCode::Cancelled)});
  cancel(e, backing_off, T0 + 3);
  CHECK(actions(e) == std::vector<Action>{reject(backing_off, ErrorCode::Cancelled)});
  cancel(e, running, T0 + 4);
  CHECK(actions(e).empty());
  report(e, running, ok(), T0 + 5);
  CHECK(actions(e) == std::vector<Action>{reject(running, ErrorCode::Cancelled)});
  CHECK(inspect(e).active() == 0);
  CHECK(wake(e) == T0 + 5 + kIdleSlotsWrite);  // the quiet bucket's slots record, then nothing
  e.tick(T0 + 5 + kIdleSlotsWrite);
  CHECK(drain(e).slot_records == 1);
  CHECK(wake(e) == kNoWake);
}

TEST_CASE("reports, throws and cancels for tickets without a running attempt are UnknownTicket", "[retry]") {
  Engine e = configured(config(100, 1000, 1, {{"maxRetries", 2}, {"minDelayInMs", 100}}));
  const Ticket done = arrive(e, T0);
  report(e, done, ok(), T0);
  const Ticket backing_off = arrive(e, T0);
  report(e, backing_off, failed(Failure::Retryable, 503), T0);
  const Ticket queued = arrive(e, T0);
  e.clear_output();
  REQUIRE(inspect(e).queued() == 1);
  REQUIRE(inspect(e).active() == 1);

  auto require_unknown = [&](const Status& st) {
    REQUIRE_FALSE(st.ok());
    CHECK(st.error().code == ErrorCode::UnknownTicket);
    CHECK(st.error().message.rfind("[drl:unknown-ticket] ", 0) == 0);
    CHECK(writes_of(e).empty());
    CHECK(e.actions().empty());
  };
  SECTION("a ticket never issued") {
    require_unknown(e.report(999, ok(), T0 + 1));
    require_unknown(e.threw(999, T0 + 1));
    require_unknown(e.cancel(999, T0 + 1));
    require_unknown(e.report(0, ok(), T0 + 1));
  }
  SECTION("a settled ticket") {
    require_unknown(e.report(done, ok(), T0 + 1));
    require_unknown(e.threw(done, T0 + 1));
    require_unknown(e.cancel(done, T0 + 1));
  }
  SECTION("a ticket between attempts") {
    require_unknown(e.report(backing_off, ok(), T0 + 1));
    require_unknown(e.threw(backing_off, T0 + 1));
  }
  SECTION("a queued ticket") {
    require_unknown(e.report(queued, ok(), T0 + 1));
    require_unknown(e.threw(queued, T0 + 1));
  }
  CHECK(inspect(e).queued() == 1);
  CHECK(inspect(e).active() == 1);
  CHECK(inspect(e).running() == 0);
}

// ---- a call's own maxRetries (Waiting::max_retries) ---------------------------

TEST_CASE("a call's maxRetries 0 settles it after one failed attempt, whatever the bucket allows", "[retry][waiting]") {
  Engine e = configured(retry_config({{"maxRetries", 3}, {"maxDelayInMs", 60'000}}));
  const Ticket a = running_retrying(e, 0.0, T0);
  SECTION("a retryable failure rejects with its status") {
    report(e, a, failed(Failure::Retryable, 503), T0 + 1);
    CHECK(actions(e) == std::vector<Action>{reject(a, ErrorCode::CallFailed, 503)});
  }
  SECTION("a throw rejects CallbackThrew") {
    threw(e, a, T0 + 1);
    CHECK(actions(e) == std::vector<Action>{reject(a, ErrorCode::CallbackThrew)});
  }
  SECTION("a 429 rejects the call with status 429, and still pauses the bucket") {
    report(e, a, too_many(2000), T0 + 1);
    CHECK(actions(e) == std::vector<Action>{reject(a, ErrorCode::CallFailed, 429)});
    CHECK(inspect(e).forced_until() == T0 + 2001);
  }
  CHECK(inspect(e).active() == 0);
  // The next call, which sets none, still has the bucket's three retries.
  Millis now = T0 + 3000;
  const Ticket b = running_retrying(e, std::nullopt, now);
  CHECK(fail_until_settled(e, b, now).attempts == 4);
}

TEST_CASE("a call's maxRetries 5 on a bucket allowing 1 gets 5 retries, backing off as the bucket says",
          "[retry][waiting]") {
  Engine e =
      configured(retry_config({{"maxRetries", 1}, {"minDelayInMs", 100}, {"maxDelayInMs", 1000}, {"factor", 2}}));
  Millis now = T0;
  const Ticket a = running_retrying(e, 5.0, now);
  const Exhausted run = fail_until_settled(e, a, now);
  CHECK(run.attempts == 6);
  // min(minDelay * factor^(k-1), maxDelay) for retry k: the bucket's backoff.
  CHECK(run.delays == std::vector<Millis>{100, 200, 400, 800, 1000});
  CHECK(inspect(e).active() == 0);
}

TEST_CASE("a call that sets no maxRetries gets the bucket's", "[retry][waiting]") {
  Engine e = configured(retry_config({{"maxRetries", 2}, {"minDelayInMs", 100}}));
  Millis now = T0;
  SECTION("Waiting left as it is") {
    const Ticket a = running_retrying(e, std::nullopt, now);
    CHECK(fail_until_settled(e, a, now).attempts == 3);
  }
  SECTION("with a priority and a maxWaitMs") {
    Waiting w;
    w.priority = 5;
    w.max_wait_ms = 1000;
    auto a = e.arrive(1, w, now);
    REQUIRE(a.ok());
    REQUIRE(actions(e) == std::vector<Action>{start(*a)});
    CHECK(fail_until_settled(e, *a, now).attempts == 3);
  }
  SECTION("the plain arrive") {
    const Ticket a = running_call(e, now);
    CHECK(fail_until_settled(e, a, now).attempts == 3);
  }
}

TEST_CASE("reconfiguring the bucket's maxRetries changes only the calls that set none", "[retry][waiting]") {
  Engine e = configured(config(1000, 1'000'000, 2, {{"maxRetries", 1}, {"minDelayInMs", 100}}));
  Millis now = T0;
  const Ticket own = running_retrying(e, 1.0, now);              // sets the bucket's value as its own
  const Ticket bucket = running_retrying(e, std::nullopt, now);  // reads the bucket's at each decision
  SECTION("lowered to 0") {
    REQUIRE(e.reconfigure(R"({"retry":{"maxRetries":0}})", now + 1).ok());
    e.clear_output();
    Millis t = now + 1;
    CHECK(fail_until_settled(e, bucket, t).attempts == 1);
    CHECK(fail_until_settled(e, own, t).attempts == 2);
  }
  SECTION("raised to 4") {
    REQUIRE(e.reconfigure(R"({"retry":{"maxRetries":4}})", now + 1).ok());
    e.clear_output();
    Millis t = now + 1;
    CHECK(fail_until_settled(e, own, t).attempts == 2);
    CHECK(fail_until_settled(e, bucket, t).attempts == 5);
  }
  SECTION("lowered while both are backing off") {
    report(e, own, failed(Failure::Retryable, 503), now + 1);
    report(e, bucket, failed(Failure::Retryable, 503), now + 1);
    REQUIRE(e.reconfigure(R"({"retry":{"maxRetries":0}})", now + 2).ok());
    e.clear_output();
    // The retries decided before it keep their word: both start again ...
    e.tick(now + 101);
    CHECK(actions(e) == std::vector<Action>{start(own, 2), start(bucket, 2)});
    // ... and neither has another: own's 1 is spent, the bucket's is now 0.
    report(e, own, failed(Failure::Retryable, 503), now + 102);
    report(e, bucket, failed(Failure::Retryable, 503), now + 102);
    CHECK(actions(e) ==
          std::vector<Action>{reject(own, ErrorCode::CallFailed, 503), reject(bucket, ErrorCode::CallFailed, 503)});
  }
  CHECK(inspect(e).active() == 0);
}
