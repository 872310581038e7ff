// Verifies concurrency slots: at most `concurrency` held, each from first start to final outcome (through backoff and
// cancel).
#include <catch2/catch.hpp>

#include "drl/engine.h"
#include "engine_helpers.h"

using namespace drl;
using namespace drl::test;

namespace {

// A bucket that never binds, so only slots decide who starts.
std::string slots(int64_t concurrency, const json& retry = {{"maxRetries", 2}, {"minDelayInMs", 100}}) {
  return config(1000, 1000, concurrency, retry);
}

}  // namespace

TEST_CASE("never more than `concurrency` calls hold a slot", "[concurrency]") {
  Engine e = configured(slots(3));
  std::vector<Ticket> t;
  for (int i = 0; i < 5; ++i) t.push_back(arrive(e, T0));
  CHECK(started(actions(e)) == std::vector<Ticket>{t[0], t[1], t[2]});
  CHECK(inspect(e).active() == 3);
  CHECK(inspect(e).running() == 3);
  CHECK(inspect(e).queued() == 2);
  CHECK(wake(e) == T0 + kDefaultAttemptTimeout);  // only the running attempts' timeouts

  report(e, t[1], ok(), T0 + 1);
  CHECK(actions(e) == std::vector<Action>{resolve(t[1]), start(t[3])});
  CHECK(inspect(e).active() == 3);
  report(e, t[0], ok(), T0 + 2);
  CHECK(actions(e) == std::vector<Action>{resolve(t[0]), start(t[4])});
  CHECK(inspect(e).queued() == 0);
  for (Ticket x : {t[2], t[3], t[4]}) report(e, x, ok(), T0 + 3);
  CHECK(inspect(e).active() == 0);
  CHECK(inspect(e).running() == 0);
}

TEST_CASE("a call keeps its slot through the backoff between attempts", "[concurrency]") {
  Engine e = configured(slots(1));
  const Ticket a = arrive(e, T0);
  report(e, a, failed(Failure::Retryable, 503), T0 + 10);  // next attempt at T0 + 110
  const Ticket b = arrive(e, T0 + 20);
  e.clear_output();
  CHECK(inspect(e).active() == 1);
  CHECK(inspect(e).running() == 0);
  CHECK(inspect(e).queued() == 1);
  CHECK(wake(e) == T0 + 110);

  e.tick(T0 + 109);
  CHECK(actions(e).empty());
  e.tick(T0 + 110);
  CHECK(actions(e) == std::vector<Action>{start(a, 2)});
  report(e, a, ok(), T0 + 120);
  CHECK(actions(e) == std::vector<Action>{resolve(a, 2), start(b)});
}

TEST_CASE("a call keeps its slot while its callback threw and it backs off", "[concurrency]") {
  Engine e = configured(slots(1));
  const Ticket a = arrive(e, T0);
  threw(e, a, T0 + 10);
  const Ticket b = arrive(e, T0 + 20);
  e.clear_output();
  CHECK(inspect(e).active() == 1);
  e.tick(T0 + 110);
  CHECK(actions(e) == std::vector<Action>{start(a, 2)});
  report(e, a, ok(), T0 + 120);
  CHECK(actions(e) == std::vector<Action>{resolve(a, 2), start(b)});
}

TEST_CASE("a call keeps its slot while waiting out the penalty its 429 caused", "[concurrency]") {
  Engine e = configured(slots(1, {{"maxRetries", 1}}));
  const Ticket a = arrive(e, T0);
  report(e, a, too_many(1000), T0 + 10);
  const Ticket b = arrive(e, T0 + 20);
  e.clear_output();
  CHECK(inspect(e).active() == 1);
  CHECK(inspect(e).running() == 0);
  e.tick(T0 + 1010);
  CHECK(actions(e) == std::vector<Action>{start(a, 2)});
  report(e, a, ok(), T0 + 1020);
  CHECK(actions(e) == std::vector<Action>{resolve(a, 2), start(b)});
}

TEST_CASE("a cancelled running call keeps its slot until its callback reports", "[concurrency]") {
  Engine e = configured(slots(1));
  const Ticket a = arrive(e, T0);
  const Ticket b = arrive(e, T0);
  e.clear_output();
  cancel(e, a, T0 + 1);
  CHECK(e.actions().empty());  // the work is still in flight
  CHECK(inspect(e).active() == 1);

  SECTION("a success settles as Cancelled") { report(e, a, ok(), T0 + 2); }
  SECTION("a retryable failure settles as Cancelled, with no retry") {
    report(e, a, failed(Failure::Retryable, 503), T0 + 2);
  }
  SECTION("a throw settles as Cancelled") { threw(e, a, T0 + 2); }
  CHECK(actions(e) == std::vector<Action>{reject(a, ErrorCode::Cancelled), start(b)});
  CHECK(inspect(e).active() == 1);
}

TEST_CASE("cancelling a call between attempts frees its slot at once", "[concurrency]") {
  Engine e = configured(slots(1));
  const Ticket a = arrive(e, T0);
  report(e, a, failed(Failure::Retryable, 503), T0 + 10);
  const Ticket b = arrive(e, T0 + 20);
  e.clear_output();
  cancel(e, a, T0 + 30);
  CHECK(actions(e) == std::vector<Action>{reject(a, ErrorCode::Cancelled), start(b)});
  // Its retry is gone: nothing happens when it would have been due.
  e.tick(T0 + 110);
  CHECK(actions(e).empty());
  CHECK(inspect(e).active() == 1);
}

TEST_CASE("raising concurrency by reconfigure starts queued callers at once", "[concurrency][configure]") {
  Engine e = configured(slots(1));
  arrive(e, T0);
  const Ticket b = arrive(e, T0);
  const Ticket c = arrive(e, T0);
  e.clear_output();
  REQUIRE(e.reconfigure(R"({"concurrency":3})", T0 + 1).ok());
  CHECK(actions(e) == std::vector<Action>{start(b), start(c)});
  CHECK(inspect(e).active() == 3);
}

TEST_CASE("lowering concurrency keeps running calls, nobody starts until below the new cap",
          "[concurrency][configure]") {
  Engine e = configured(slots(3));
  std::vector<Ticket> t;
  for (int i = 0; i < 4; ++i) t.push_back(arrive(e, T0));
  e.clear_output();
  REQUIRE(e.reconfigure(R"({"concurrency":1})", T0 + 1).ok());
  CHECK(e.actions().empty());
  CHECK(inspect(e).active() == 3);

  report(e, t[0], ok(), T0 + 2);
  CHECK(actions(e) == std::vector<Action>{resolve(t[0])});
  report(e, t[1], ok(), T0 + 3);
  CHECK(actions(e) == std::vector<Action>{resolve(t[1])});
  report(e, t[2], ok(), T0 + 4);
  CHECK(actions(e) == std::vector<Action>{resolve(t[2]), start(t[3])});
}
