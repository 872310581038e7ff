// Verifies stats(): config as given vs effective, remaining, resetAt, penalty fields, slot counts and the grant list.
#include <catch2/catch.hpp>

#include "drl/engine.h"
#include "engine_helpers.h"

using namespace drl;
using namespace drl::test;

namespace {

constexpr int64_t kLimit = 10;
constexpr Millis kWindow = 1000;

json pair(Millis at, int64_t amount) { return json::array({at, amount}); }

}  // namespace

TEST_CASE("stats before configure is the not-configured error", "[stats]") {
  Engine e;
  auto s = e.stats(T0);
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().code == ErrorCode::NoSuchLimiter);
  CHECK(s.error().message.find("[drl:no-such-limiter]") != std::string::npos);
}

TEST_CASE("stats echoes the config as given and the effective config separately", "[stats]") {
  const json given = {{"bucket", {{"limitPerWindow", kLimit}, {"windowInMs", kWindow}}},
                      {"concurrency", 2},
                      {"retry", {{"maxRetries", 1}}}};
  Engine e = configured(given.dump());
  json s = stats(e, T0);
  CHECK(s["config"] == given);  // no defaults mixed in
  CHECK(s["effective"] == json({{"bucket",
                                 {{"limitPerWindow", kLimit},
                                  {"windowInMs", kWindow},
                                  {"penaltyRefillFraction", 0.5},
                                  {"unit", "requests"}}},
                                {"concurrency", 2},
                                {"attemptTimeoutMs", 120'000},
                                {"retry",
                                 {{"maxRetries", 1},
                                  {"minDelayInMs", 500},
                                  {"maxDelayInMs", 30'000},
                                  {"factor", 2.0},
                                  {"respectRetryAfter", true}}},
                                {"windows", json::object()},
                                {"learn", nullptr}}));

  REQUIRE(e.reconfigure(R"({"retry":{"factor":3}})", T0).ok());
  s = stats(e, T0);
  CHECK(s["config"]["retry"] == json({{"maxRetries", 1}, {"factor", 3}}));
  CHECK(s["config"]["bucket"] == given["bucket"]);
  CHECK(s["effective"]["retry"]["factor"] == 3.0);
  CHECK(s["effective"]["retry"]["maxRetries"] == 1);
}

TEST_CASE("remaining, resetAt and the grants follow the live log", "[stats]") {
  Engine e = configured(config(kLimit, kWindow, 10));
  SECTION("an empty log") {
    const json s = stats(e, T0 + 5);
    CHECK(s["remaining"] == kLimit);
    CHECK(s["resetAt"] == T0 + 5);  // now, when nothing is live
    CHECK(s["liveGrants"] == 0);
    CHECK(s["grants"] == json::array());
    CHECK(s["grantsTruncated"] == false);
    CHECK(s["penalised"] == false);
    CHECK(s["forcedUntil"].is_null());  // never penalised
  }
  SECTION("as grants are taken and expire") {
    arrive(e, 3, T0);
    arrive(e, 2, T0 + 100);
    json s = stats(e, T0 + 200);
    CHECK(s["remaining"] == kLimit - 5);
    CHECK(s["resetAt"] == T0 + 100 + kWindow);  // the newest live grant's expiry
    CHECK(s["liveGrants"] == 2);
    CHECK(s["grants"] == json::array({pair(T0, 3), pair(T0 + 100, 2)}));

    s = stats(e, T0 + kWindow);  // T0's grant is gone
    CHECK(s["remaining"] == kLimit - 2);
    CHECK(s["resetAt"] == T0 + 100 + kWindow);
    CHECK(s["grants"] == json::array({pair(T0 + 100, 2)}));

    s = stats(e, T0 + 100 + kWindow);
    CHECK(s["remaining"] == kLimit);
    CHECK(s["resetAt"] == T0 + 100 + kWindow);
    CHECK(s["liveGrants"] == 0);
  }
}

TEST_CASE("during a penalty nothing remains and the reset is a window after the deadline", "[stats]") {
  Engine e = configured(config(kLimit, kWindow, 10));
  arrive(e, 2, T0);
  pause(e, 5000, T0 + 100);
  const Millis fu = T0 + 5100;

  json s = stats(e, T0 + 200);
  CHECK(s["penalised"] == true);
  CHECK(s["forcedUntil"] == fu);
  CHECK(s["remaining"] == 0);
  CHECK(s["resetAt"] == fu + kWindow);

  s = stats(e, fu);  // lifted: the floor of half the limit is spent
  CHECK(s["penalised"] == false);
  CHECK(s["forcedUntil"] == fu);  // remembered after the lift
  CHECK(s["remaining"] == kLimit / 2);
  CHECK(s["resetAt"] == fu + kWindow);
  CHECK(s["grants"] == json::array({pair(fu, kLimit / 2)}));
}

TEST_CASE("during a penalty resetAt is the later of the newest grant's expiry and deadline + window", "[stats]") {
  // On a long window's grid a grant is dated at the end of its cell, which
  // can be later than a short penalty's deadline.
  constexpr Millis kDay = 86'400'000;
  const Millis q = grid_step_ms(kDay);
  const Millis cell_start = (T0 / q + 1) * q;
  Engine e = configured(config(kLimit, kDay, 10), cell_start);
  arrive(e, cell_start + 1);
  pause(e, 10, cell_start + 2);
  const json s = stats(e, cell_start + 3);
  CHECK(s["penalised"] == true);
  CHECK(s["forcedUntil"] == cell_start + 12);
  CHECK(s["resetAt"] == cell_start + q + kDay);
}

TEST_CASE("stats counts slots held, callbacks running and callers queued", "[stats]") {
  Engine e = configured(config(100, kWindow, 2, {{"maxRetries", 2}, {"minDelayInMs", 100}}));
  const Ticket a = arrive(e, T0);
  arrive(e, T0);
  arrive(e, T0);
  arrive(e, T0);
  report(e, a, failed(Failure::Retryable, 503), T0 + 1);
  const json s = stats(e, T0 + 2);
  CHECK(s["active"] == 2);
  CHECK(s["running"] == 1);
  CHECK(s["queued"] == 2);
}

TEST_CASE("stats lists the newest 1000 grants and says when it truncated", "[stats]") {
  Engine e = configured(config(100'000, 100'000, 1));
  int64_t takes = 0;
  SECTION("exactly 1000") { takes = 1000; }
  SECTION("1005") { takes = 1005; }
  for (int64_t i = 0; i < takes; ++i) {
    const Ticket t = arrive(e, T0 + i);
    report(e, t, ok(), T0 + i);
  }
  const json s = stats(e, T0 + takes);
  CHECK(s["liveGrants"] == takes);
  CHECK(s["remaining"] == 100'000 - takes);
  REQUIRE(s["grants"].size() == 1000);
  CHECK(s["grants"].front() == pair(T0 + takes - 1000, 1));
  CHECK(s["grants"].back() == pair(T0 + takes - 1, 1));
  CHECK(s["grantsTruncated"] == (takes > 1000));
}
