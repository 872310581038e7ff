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
TEST_CASE("restore keeps stored amounts above a lowered limit, so raising it again does not over-admit",
          "[issues.2]") {
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
