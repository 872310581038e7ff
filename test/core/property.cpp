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
// whose usage never exceeds the reservation).
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

}  // namespace

TEST_CASE("random schedules keep every invariant", "[property]") {
  const uint64_t count = schedule_count();
  drl::testing::ScheduleResult total;
  for (uint64_t seed = 1; seed <= count; ++seed) {
    const auto r = drl::testing::run_schedule({seed, 60});
    if (!r.ok) FAIL(r.failure);
    total.add(r);
  }
  std::ostringstream figures;
  figures << count << " schedules: " << total.tickets << " tickets, " << total.starts << " starts, " << total.timeouts
          << " timeouts, " << total.gone << " gone, " << total.late_news << " late reports refused; " << total.crashes
          << " crashes, " << total.crashes_with_running << " with callbacks running (" << total.carried_callbacks
          << " callbacks carried over); in flight at most " << total.max_in_flight << " (cap <= 5), old callbacks at most "
          << total.max_old_in_flight << " at once; " << total.full_with_old
          << " steps at the cap with old callbacks in flight, " << total.held_back_by_old
          << " with a caller queued behind them; in flight - cap at most " << total.max_in_flight_over_cap
          << " after any step (no lowered cap), held - cap at most " << total.max_over_cap << " before any first start";
  WARN(figures.str());
  std::ostringstream windows;
  windows << total.window_schedules << " schedules with extra windows (" << total.honest_schedules
          << " whose usage never exceeds the reservation): " << total.unit_arrivals << " arrivals with a cost per unit, "
          << total.usage_reports << " reports with usage settling " << total.refunds << " refunds (" << total.stale_refunds
          << " not refunded: grant expired or log replaced) and " << total.charges << " charges; " << total.debt_steps
          << " steps with a window holding more than its limit (a charge, a lowered limit, a damaged row); " << total.window_changes << " reconfigures adding, removing or re-uniting a window; "
          << total.overused_windows << " rolling windows of real usage above the limit (at most " << total.max_overuse
          << " above), real usage - limit - under-estimates at most " << total.max_overuse_beyond_underestimate
          << " (must be <= 0)";
  WARN(windows.str());
  // The generator must actually exercise the engine, not idle.
  REQUIRE(total.tickets > count * 5);
  // (Crashes are frequent here, and after one the slots record may hold
  // released slots for a while: about half the tickets start, not more.)
  REQUIRE(total.starts > total.tickets * 2 / 5);
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
}
