// Verifies the engine's invariants over seeded random schedules (see
// test/support/schedule.cpp): no rolling window above the limit across
// crashes, never more than `concurrency` attempts in flight (those running in
// the engine plus callbacks a crash left running at the upstream), FIFO first
// starts, no take under a penalty, penalties never shortened, attempts timed
// out exactly at their deadline and never outliving it, late news of an ended
// attempt refused, the slots record written with every start and never
// alone, storage mirroring memory after every step, restore from storage
// without a burst, and every ticket settling.
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
    total.starts += r.starts;
    total.tickets += r.tickets;
    total.timeouts += r.timeouts;
    total.gone += r.gone;
    total.late_news += r.late_news;
    total.crashes += r.crashes;
    total.crashes_with_running += r.crashes_with_running;
    total.carried_callbacks += r.carried_callbacks;
    total.max_in_flight = std::max(total.max_in_flight, r.max_in_flight);
    total.max_old_in_flight = std::max(total.max_old_in_flight, r.max_old_in_flight);
    total.full_with_old += r.full_with_old;
    total.held_back_by_old += r.held_back_by_old;
    total.max_over_cap = std::max(total.max_over_cap, r.max_over_cap);
    total.max_in_flight_over_cap = std::max(total.max_in_flight_over_cap, r.max_in_flight_over_cap);
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
  }
}
