// Covering reservations on their own (core/src/reservations.h): when a
// record is written, kept, renewed and cleared, how it is sized and read,
// at -1, at and +1 ms.
#include <catch2/catch.hpp>

#include "reservations.h"
#include "slots_record.h"  // kIdleSlotsWriteMs

using namespace drl;
using namespace drl::internal;

namespace {

std::vector<Window> one_window(int64_t limit = 100, Millis ms = 60'000) {
  std::vector<Window> windows(1);
  windows[0].name = kPrimaryWindow;
  windows[0].limit = limit;
  windows[0].ms = ms;
  return windows;
}

Call costing(int64_t n) {
  Call c;
  c.set_cost(0, n);
  return c;
}

// Two takes `gap` apart, then the step after the second, which stores.
Reservations run(const std::vector<Window>& windows, Millis gap, int64_t amount = 1) {
  Reservations r;
  r.set_on(true);
  for (Millis t : {Millis{0}, gap}) {
    r.noted_take(0, amount);
    r.noted_start(t);
  }
  if (auto keep = r.step(gap, true)) r.replace(*keep, windows, gap);
  r.settle(gap);
  return r;
}

}  // namespace

TEST_CASE("reservations: only a run writes a record", "[reservations_component]") {
  const auto windows = one_window();
  CHECK(run(windows, kReserveRunGapMs - 1).record());
  CHECK_FALSE(run(windows, kReserveRunGapMs).record());  // a lone call leaves nothing for a crash to count
  CHECK_FALSE(run(one_window(100, kMinReserveWindowMs - 1), 10).record());
  CHECK(run(one_window(100, kMinReserveWindowMs), 10).record());
}

TEST_CASE("reservations: sized at twice the rate, at most a quarter of the limit and what is free",
          "[reservations_component]") {
  CHECK(run(one_window(1000), 100).record()->units_in(0) == 80);  // 2 takes in 100 ms, x2, over a 2 s span
  CHECK(run(one_window(100), 100).record()->units_in(0) == 25);
  CHECK(Reservations::cap(101) == 26);
  CHECK(Reservations::cap(4) == 1);
  auto full = one_window(100);
  full[0].log.take(90, full[0].ms, 0);
  CHECK(run(full, 100).record()->units_in(0) == 10);
}

TEST_CASE("reservations: a take is covered while the record has room, until its end", "[reservations_component]") {
  const auto windows = one_window(100);
  Reservations r = run(windows, 100);
  const Reservation record = *r.record();
  REQUIRE(record.units_in(0) == 25);
  CHECK(r.covers(costing(25), windows, 101));
  CHECK_FALSE(r.covers(costing(26), windows, 101));
  r.took_unwritten(0, 101, 24);
  CHECK(r.unwritten_in(0) == 24);
  CHECK(r.covers(costing(1), windows, 102));
  CHECK_FALSE(r.covers(costing(2), windows, 102));
  CHECK(r.covers(costing(1), windows, record.until - 1));
  CHECK_FALSE(r.covers(costing(1), windows, record.until));
  CHECK(r.owed_rows().count({0, 101}) == 1);
}

TEST_CASE("reservations: renewed in the step after a take finds half its units used", "[reservations_component]") {
  const auto windows = one_window(100);
  Reservations r = run(windows, 100);
  const int64_t units = r.record()->units_in(0);
  REQUIRE(units == 25);
  r.took_unwritten(0, 200, 12);  // 2 x 12 < 25
  r.noted_take(0, 12);
  r.noted_start(200);
  CHECK_FALSE(r.step(200, false));  // under half: nothing
  r.took_unwritten(0, 201, 1);
  r.noted_take(0, 1);
  r.noted_start(201);
  CHECK_FALSE(r.step(201, false));  // 13 of 25, half: due, but not in the take's own step
  CHECK(r.wake(201) == 201);
  CHECK(r.step(201, false) == std::optional<bool>(true));  // the next step writes it
}

TEST_CASE("reservations: cleared once no take came for idle_ms", "[reservations_component]") {
  const auto windows = one_window(100);
  Reservations r = run(windows, 100);
  REQUIRE(r.record());
  const Millis clears = 100 + r.idle_ms();
  CHECK(r.idle_ms() == kIdleSlotsWriteMs);  // twice a 100 ms pace is less
  CHECK(r.wake(clears - 1) == clears);
  CHECK_FALSE(r.step(clears - 1, false));
  CHECK(r.step(clears, false) == std::optional<bool>(false));
  CHECK(r.replace(false, windows, clears));  // the cleared record is stored (as none)
  r.settle(clears);
  CHECK_FALSE(r.record());
  CHECK_FALSE(r.wake(clears));
}

TEST_CASE("reservations: a stored record is read at the restore, damage as the most it could hold",
          "[reservations_component]") {
  auto windows = one_window(100);
  Reservation r = Reservations::read(R"({"until":5000,"units":{"bucket":30}})", windows, 9000);
  CHECK(r.until == 9000);  // dated at the restore, whatever its end
  CHECK(r.units_in(0) == 30);
  CHECK(Reservations::read(R"({"until":5000,"units":{"bucket":1e9}})", windows, 9000).units_in(0) == 100);
  CHECK(Reservations::read(R"({"until":5000,"units":{"other":3}})", windows, 9000).units.empty());
  CHECK(Reservations::read("not json", windows, 9000).units_in(0) == 25);
  CHECK(Reservations::read(R"({"until":-1,"units":{}})", windows, 9000).units_in(0) == 25);
}
