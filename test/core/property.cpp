// Verifies the engine's invariants over seeded random schedules (see
// test/support/schedule.cpp): no rolling window above the limit, never more
// than `concurrency` first starts in flight, FIFO first starts, no take under
// a penalty, penalties never shortened, storage mirroring memory after every
// step, restore from storage without a burst, and every ticket settling.
#include <catch2/catch.hpp>
#include <cstdlib>

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
  size_t starts = 0;
  size_t tickets = 0;
  for (uint64_t seed = 1; seed <= count; ++seed) {
    const auto result = drl::testing::run_schedule({seed, 60});
    if (!result.ok) FAIL(result.failure);
    starts += result.starts;
    tickets += result.tickets;
  }
  // The generator must actually exercise the engine, not idle.
  REQUIRE(tickets > count * 5);
  REQUIRE(starts > tickets / 2);
}
