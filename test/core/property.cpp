// Verifies the engine's invariants over seeded random schedules (see
// test/support/schedule.cpp): no rolling window above the limit across
// crashes, never more than `concurrency` attempts in flight (those running in
// the engine plus callbacks a crash left running at the upstream), FIFO first
// starts, no take under a penalty, penalties never shortened, attempts timed
// out exactly at their deadline and never outliving it, late news of an ended
// attempt refused, the slots record written with every start and never
// alone, storage mirroring memory after every step, restore from storage
// without a burst, and every ticket settling. Half the schedules (even seeds)
// have extra windows, costs per unit and usage: every admission fits every
// window by the test's own account (reservations corrected by usage, lift
// refills), storage holds exactly that account for every window after every
// step, and no rolling window of real usage exceeds its limit by more than
// the under-estimates of the calls started in it (by nothing in schedules
// whose usage never exceeds the reservation). Arrivals also wait with
// intent (issue 15): priorities, maxWaitMs (0 included) and withdraws at
// random moments (queued, between attempts, running). Every first start is
// the head of the queue by priority, then arrival (FIFO within a priority,
// head-of-line blocking within that order), and no earlier than the
// predictions taken for it while queued that still stand (a step that frees
// capacity, such as a withdraw, a deadline, a reconfigure or a refund,
// retires them); a call refused or withdrawn while queued never started and
// took no grant and no slot; DeadlineExceeded comes only at arrival (with a
// predicted wait beyond maxWaitMs) or at or after the deadline, never for a
// call that started; a withdrawn call is never retried. Some arrivals set
// their own maxRetries: no call makes more attempts than its own (else the
// bucket's, when the retry was decided) allows, and a throw is rejected only
// once they are spent. A second family checks the predictions are exact
// where the header says they are.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <sstream>

#include "schedule.h"

namespace {

// DRL_PROPERTY_SCHEDULES overrides the count (the sanitizer run uses fewer).
uint64_t schedule_count() {
  const char* env = std::getenv("DRL_PROPERTY_SCHEDULES");
  return env ? std::strtoull(env, nullptr, 10) : 100'000;
}

// Seeds first .. first + count - 1: every invariant holds, and the
// generator reached every path it should at that count.
void check_schedules(uint64_t first, uint64_t count) {
  if (count == 0) return;  // DRL_PROPERTY_SCHEDULES below 2: the other half has them
  drl::testing::ScheduleResult total;
  for (uint64_t seed = first; seed < first + count; ++seed) {
    const auto r = drl::testing::run_schedule({seed, 60});
    if (!r.ok) FAIL(r.failure);
    total.add(r);
  }
  std::ostringstream figures;
  figures << count << " schedules: " << total.tickets << " tickets, " << total.starts << " starts, " << total.timeouts
          << " timeouts, " << total.gone << " gone, " << total.late_news << " late reports refused; " << total.crashes
          << " crashes, " << total.crashes_with_running << " with callbacks running (" << total.carried_callbacks
          << " callbacks carried over); in flight at most " << total.max_in_flight
          << " (cap <= 5), old callbacks at most " << total.max_old_in_flight << " at once; " << total.full_with_old
          << " steps at the cap with old callbacks in flight, " << total.held_back_by_old
          << " with a caller queued behind them; in flight - cap at most " << total.max_in_flight_over_cap
          << " after any step (no lowered cap), held - cap at most " << total.max_over_cap << " before any first start";
  WARN(figures.str());
  std::ostringstream windows;
  windows << total.window_schedules << " schedules with extra windows (" << total.honest_schedules
          << " whose usage never exceeds the reservation): " << total.unit_arrivals
          << " arrivals with a cost per unit, " << total.usage_reports << " reports with usage settling "
          << total.refunds << " refunds (" << total.stale_refunds
          << " not refunded: grant expired or log replaced) and " << total.charges << " charges; " << total.debt_steps
          << " steps with a window holding more than its limit (a charge, a lowered limit, a damaged row); "
          << total.window_changes << " reconfigures adding, removing or re-uniting a window; " << total.overused_windows
          << " rolling windows of real usage above the limit (at most " << total.max_overuse
          << " above), real usage - limit - under-estimates at most " << total.max_overuse_beyond_underestimate
          << " (must be <= 0)";
  WARN(windows.str());
  // The generator must actually exercise the engine, not idle.
  REQUIRE(total.tickets > count * 5);
  // (Crashes are frequent here, and after one the slots record may hold
  // released slots for a while: about half the tickets start, not more.)
  // (Calls refused at arrival for their maxWaitMs never were to start.)
  REQUIRE(total.starts > (total.tickets - total.refused_at_arrival) * 2 / 5);
  // ... and the faults too.
  if (count >= 1000) {
    CHECK(total.timeouts > count / 2);
    CHECK(total.gone > count / 10);
    CHECK(total.late_news > count / 50);
    CHECK(total.crashes_with_running > count / 5);
    CHECK(total.held_back_by_old > 0);
    // ... and the paths of several windows, costs per unit and usage.
    CHECK(total.window_schedules == count / 2);
    CHECK(total.honest_schedules > count / 10);
    CHECK(total.unit_arrivals > count);
    CHECK(total.usage_reports > count / 2);
    CHECK(total.refunds > count / 4);
    CHECK(total.stale_refunds > 0);
    CHECK(total.charges > count / 4);
    CHECK(total.debt_steps > count / 10);
    CHECK(total.window_changes > count / 10);
    CHECK(total.overused_windows > 0);
  }
  CHECK(total.max_overuse_beyond_underestimate <= 0);
  std::ostringstream waiting;
  waiting << total.priority_arrivals << " arrivals with a priority, " << total.overtakes
          << " first starts ahead of an earlier arrival; " << total.deadline_arrivals << " with a maxWaitMs ("
          << total.try_now_arrivals << " with 0): " << total.refused_at_arrival << " refused at arrival, "
          << total.expired_in_queue << " rejected at their deadline in the queue; withdrawn: " << total.withdrawn_queued
          << " queued, " << total.withdrawn_between << " between attempts, " << total.withdrawn_running << " running ("
          << total.cancelled_retries << " retries turned Cancelled); " << total.predictions_checked
          << " first starts checked against a prediction; " << total.late_starts
          << " first starts after the call's deadline (the host's next event came after it); "
          << total.own_retries_arrivals << " arrivals with their own maxRetries, " << total.own_retries_binding
          << " exhausted throws where it differed from the bucket's";
  WARN(waiting.str());
  CHECK(total.late_starts == 0);
  if (count >= 1000) {
    CHECK(total.priority_arrivals > count / 2);
    CHECK(total.overtakes > count / 20);
    CHECK(total.try_now_arrivals > count / 5);
    CHECK(total.refused_at_arrival > count / 10);
    CHECK(total.expired_in_queue > count / 40);
    CHECK(total.withdrawn_queued > count / 10);
    CHECK(total.withdrawn_between > count / 50);
    CHECK(total.withdrawn_running > count / 10);
    CHECK(total.cancelled_retries > count / 100);
    CHECK(total.predictions_checked > count);
    CHECK(total.own_retries_arrivals > count / 2);
    CHECK(total.own_retries_binding > count / 200);
  }
}

// Two halves of the seeds, so ctest runs them on two cores at once (the
// longest test of the suite, about 45 s alone). The first half is even in
// size, so each half holds as many even seeds (the schedules with extra
// windows) as its checks expect.
uint64_t first_half() { return schedule_count() / 4 * 2; }

}  // namespace

TEST_CASE("random schedules keep every invariant (the first half of the seeds)", "[property]") {
  check_schedules(1, first_half());
}

TEST_CASE("random schedules keep every invariant (the second half of the seeds)", "[property]") {
  check_schedules(first_half() + 1, schedule_count() - first_half());
}

// The exact family (ScheduleOptions::exact): one window, unit costs, every
// callback reporting at its start, no penalty, reconfigure, withdraw or
// retry, priority 0 and a host that ticks at every wake. Every queued call
// starts exactly when predicted at arrival, that prediction equals the
// test's own (a greedy walk over the live takes), never moves while the call
// waits, and a maxWaitMs refuses a call only at arrival, with the predicted
// wait; never a queued call at its deadline.
TEST_CASE("random schedules: predictions are exact where nothing but the window constrains", "[property]") {
  const uint64_t count = schedule_count() * 3 / 10;
  drl::testing::ScheduleResult total;
  for (uint64_t seed = 1; seed <= count; ++seed) {
    drl::testing::ScheduleOptions options{seed, 40};
    options.exact = true;
    const auto r = drl::testing::run_schedule(options, nullptr);
    if (!r.ok) FAIL(r.failure);
    total.add(r);
  }
  std::ostringstream figures;
  figures << count << " exact schedules: " << total.tickets << " tickets, " << total.starts << " starts, "
          << total.exact_starts << " queued calls started exactly when predicted; " << total.deadline_arrivals
          << " arrivals with a maxWaitMs (" << total.try_now_arrivals << " with 0), " << total.refused_at_arrival
          << " refused at arrival with the predicted wait, " << total.expired_in_queue
          << " expired in the queue (must be 0)";
  WARN(figures.str());
  CHECK(total.expired_in_queue == 0);
  if (count >= 1000) {
    CHECK(total.exact_starts > count * 2);
    CHECK(total.refused_at_arrival > count / 10);
    CHECK(total.try_now_arrivals > count / 5);
  }
}
