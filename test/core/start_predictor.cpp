// The start predictor on its own: the exact prediction against the window's
// rounds (demand at, one under and one over the limit), the bound never
// below it, the queue ahead counted by priority, a pending penalty, and
// demand large enough to overflow arithmetic that is not careful.
#include <catch2/catch.hpp>

#include <random>

#include "start_predictor.h"

using drl::Millis;
using drl::internal::Call;
using drl::internal::Calls;
using drl::internal::kFar;
using drl::internal::Penalty;
using drl::internal::StartPredictor;
using drl::internal::WaitQueue;
using drl::internal::Windows;

namespace {

constexpr Millis kWindow = 1000;
constexpr double kRefill = 0.5;

struct Bucket {
  Windows windows;
  Calls calls;
  WaitQueue queue{calls};
  Penalty penalty;
  StartPredictor predictor{windows, queue, penalty};
  drl::Ticket next = 1;

  explicit Bucket(int64_t limit) {
    drl::Config config;
    config.bucket.limit_per_window = limit;
    config.bucket.window_ms = kWindow;
    windows.configure(config);
  }
  // A call of `cost` at `priority`, its demand ahead noted as an arrival's.
  Call call(int64_t cost, int32_t priority = 0) {
    Call c;
    c.set_cost(windows[0].unit, cost);
    c.priority = priority;
    queue.note_before(c, windows.counted());
    return c;
  }
  void enqueue(int64_t cost, int32_t priority = 0) {
    Call c = call(cost, priority);
    const auto t = next++;
    queue.push(t, calls.emplace(t, c).first->second);
  }
};

}  // namespace

TEST_CASE("start predictor: demand at the limit starts now, one more waits a window", "[start_predictor]") {
  Bucket b(10);  // an empty log
  CHECK(b.predictor.earliest(b.call(10), 500, kRefill) == 500);
  CHECK(b.predictor.earliest(b.call(9), 500, kRefill) == 500);
  // The 11th unit is the first of round 2: free a window after the 1st.
  CHECK(b.predictor.earliest(b.call(11), 500, kRefill) == 500 + kWindow);
  CHECK(b.predictor.earliest(b.call(20), 500, kRefill) == 500 + kWindow);
  CHECK(b.predictor.earliest(b.call(21), 500, kRefill) == 500 + 2 * kWindow);
}

TEST_CASE("start predictor: a full log frees each unit as its grant leaves, to the millisecond", "[start_predictor]") {
  Bucket b(3);
  b.windows[0].log.take(1, kWindow, 100);
  b.windows[0].log.take(1, kWindow, 200);
  b.windows[0].log.take(1, kWindow, 300);
  CHECK(b.predictor.earliest(b.call(1), 1099, kRefill) == 1100);
  CHECK(b.predictor.earliest(b.call(2), 1099, kRefill) == 1200);
  CHECK(b.predictor.earliest(b.call(3), 1099, kRefill) == 1300);
  CHECK(b.predictor.earliest(b.call(4), 1099, kRefill) == 1100 + kWindow);
  // As the pruned log stands at 1100 (the host prunes before it predicts).
  b.windows[0].log.prune(kWindow, 1100);
  CHECK(b.predictor.earliest(b.call(1), 1100, kRefill) == 1100);
  CHECK(b.predictor.earliest(b.call(2), 1100, kRefill) == 1200);
}

TEST_CASE("start predictor: the demand ahead counts higher priorities, and its own level up to it",
          "[start_predictor]") {
  Bucket b(2);
  b.enqueue(2, /*priority=*/1);  // ahead of every priority-0 call
  b.enqueue(1);
  const Call low = b.call(1);  // behind 2 + 1 + its own 1: the 4th unit
  CHECK(b.queue.demand_through(low, b.windows[0].unit) == 4);
  CHECK(b.predictor.earliest(low, 0, kRefill) == kWindow);
  const Call high = b.call(1, /*priority=*/2);  // ahead of everyone
  CHECK(b.predictor.earliest(high, 0, kRefill) == 0);
}

TEST_CASE("start predictor: nothing starts before a pending lift", "[start_predictor]") {
  Bucket b(10);
  REQUIRE(b.penalty.impose(/*now=*/0, /*delay=*/5000));
  // At the lift half the limit is free (refill 0.5): 5 units at 5000, the
  // 6th when the lifted grant leaves its window.
  CHECK(b.predictor.earliest(b.call(1), 100, kRefill) == 5000);
  CHECK(b.predictor.earliest(b.call(5), 100, kRefill) == 5000);
  CHECK(b.predictor.earliest(b.call(6), 100, kRefill) == 5000 + kWindow);
  CHECK(b.predictor.at_most(b.call(6), 100) >= 5000 + kWindow);
}

TEST_CASE("start predictor: the bound is never earlier than the exact prediction", "[start_predictor]") {
  std::mt19937_64 rng(20261203);
  for (int round = 0; round < 500; ++round) {
    const int64_t limit = 1 + static_cast<int64_t>(rng() % 20);
    Bucket b(limit);
    Millis at = 0;
    for (int64_t used = 0; used < limit && rng() % 4 != 0; ++used) {
      at += static_cast<Millis>(rng() % 200);
      b.windows[0].log.take(1, kWindow, at);
    }
    for (int queued = static_cast<int>(rng() % 5); queued > 0; --queued) {
      b.enqueue(1 + static_cast<int64_t>(rng() % limit), static_cast<int32_t>(rng() % 3));
    }
    if (rng() % 4 == 0) b.penalty.impose(at, static_cast<Millis>(rng() % 3000));
    const Call c = b.call(1 + static_cast<int64_t>(rng() % limit), static_cast<int32_t>(rng() % 3));
    const Millis now = at + static_cast<Millis>(rng() % 100);
    const Millis exact = b.predictor.earliest(c, now, kRefill);
    CHECK(exact >= now);
    CHECK(b.predictor.at_most(c, now) >= exact);
  }
}

TEST_CASE("start predictor: a demand of many windows' rounds is kFar, not an overflow", "[start_predictor]") {
  // A limit of 1 and a window longer than any config allows (set on the
  // component directly): 10^6 rounds of it are past kFar.
  Bucket one(1);
  one.windows[0].ms = 4'000'000'000'000;
  const Call huge = one.call(1'000'000);
  CHECK(one.predictor.earliest(huge, 0, kRefill) == kFar);
  CHECK(one.predictor.at_most(huge, 0) == kFar);
}
