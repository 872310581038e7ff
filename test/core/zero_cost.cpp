// Verifies calls that take nothing: a cost of 0 (numeric, or 0 of every unit
// named) is admitted and takes no unit, so it writes no log row and leaves
// `used` alone, yet it is still a call: it waits its turn in the queue, for
// a concurrency slot and out a penalty (never for room in a window), holds
// its slot until it reports, and a usage hook may still settle what it
// really took.
#include <catch2/catch.hpp>

#include <string>

#include "drl/engine.h"
#include "engine_helpers.h"

using namespace drl;
using namespace drl::test;
using drl::internal::inspect;

namespace {

const std::string kTokens = R"({"bucket":{"limitPerWindow":10,"windowInMs":1000},"concurrency":10,)"
                            R"("windows":{"tpm":{"unit":"tokens","limitPerWindow":1000,"windowInMs":1000}}})";

Amounts amounts(std::initializer_list<std::pair<const char*, double>> list) {
  Amounts out;
  for (const auto& [unit, n] : list) out.push_back(Amount{unit, n});
  return out;
}

Ticket arrive_units(Engine& e, const Amounts& cost, Millis now) {
  auto t = e.arrive(cost, now);
  if (!t.ok()) FAIL("arrive failed: " << t.error().message);
  return *t;
}

int64_t window_used(Engine& e, const std::string& name, Millis now) {
  const json doc = stats(e, now);
  for (const json& w : doc["windows"]) {
    if (w["name"] == name) return w["used"].get<int64_t>();
  }
  FAIL("no window " << name);
  return -1;
}

}  // namespace

TEST_CASE("a cost of 0 takes nothing and writes no row, but holds its concurrency slot until it reports",
          "[zero-cost]") {
  Engine e = configured(config(2, 1000, 1));
  e.clear_output();
  const Ticket z = arrive(e, 0, T0);
  const Step first = drain(e);
  CHECK(first.actions == std::vector<Action>{start(z)});
  CHECK(count(first.writes, WriteKind::PutGrant) == 0);
  CHECK(inspect(e).used() == 0);
  CHECK(inspect(e).log_entries() == 0);
  json s = stats(e, T0);
  CHECK(s["used"] == 0);
  CHECK(s["running"] == 1);

  // The slot is its: the next call waits for its report, then takes its unit.
  const Ticket next = arrive(e, 1, T0 + 1);
  CHECK(actions(e).empty());
  CHECK(stats(e, T0 + 1)["queued"] == 1);
  report(e, z, ok(), T0 + 2);
  const Step after = drain(e);
  CHECK(after.actions == std::vector<Action>{resolve(z), start(next)});
  CHECK(after.writes == std::vector<Write>{put_grant(T0 + 2, 1)});
  CHECK(inspect(e).used() == 1);
}

TEST_CASE("a cost of 0 waits its turn behind a queued call and out a penalty, never for room in the window",
          "[zero-cost]") {
  Engine e = configured(config(1, 1000, 10));
  const Ticket a = arrive(e, 1, T0);
  const Ticket b = arrive(e, 1, T0 + 1);  // the window is full until T0 + 1000
  CHECK(actions(e) == std::vector<Action>{start(a)});
  // Strict order: behind b, it starts with b and not before.
  const Ticket z = arrive(e, 0, T0 + 2);
  CHECK(actions(e).empty());
  CHECK(e.predicted_start(z) == T0 + 1000);
  e.tick(T0 + 999);
  CHECK(actions(e).empty());
  e.tick(T0 + 1000);
  CHECK(actions(e) == std::vector<Action>{start(b), start(z)});

  // The window is full again (b), the queue empty: a cost of 0 starts at once.
  const Ticket now = arrive(e, 0, T0 + 1001);
  CHECK(actions(e) == std::vector<Action>{start(now)});
  CHECK(inspect(e).used() == 1);

  // A penalty holds everyone, a call that takes nothing included.
  pause(e, 500, T0 + 1002);
  drain(e);
  const Ticket held = arrive(e, 0, T0 + 1003);
  CHECK(actions(e).empty());
  e.tick(T0 + 1501);
  CHECK(actions(e).empty());
  e.tick(T0 + 1502);
  CHECK(started(actions(e)) == std::vector<Ticket>{held});
}

TEST_CASE("0 of every unit named: no row in any window, and usage settles what it really took", "[zero-cost]") {
  Engine e = configured(kTokens);
  e.clear_output();
  // Naming the default unit with 0 takes none of it.
  const Ticket z = arrive_units(e, amounts({{"requests", 0}, {"tokens", 0}}), T0);
  Step s = drain(e);
  CHECK(s.actions == std::vector<Action>{start(z)});
  CHECK(count(s.writes, WriteKind::PutGrant) == 0);
  // Its reservation was 0: a usage of 30 tokens takes them, at the report.
  Report used = ok();
  used.usage = amounts({{"tokens", 30}});
  report(e, z, used, T0 + 5);
  s = drain(e);
  CHECK(count(s.writes, WriteKind::PutGrant) == 1);
  CHECK(window_used(e, "tpm", T0 + 5) == 30);
  CHECK(window_used(e, "bucket", T0 + 5) == 0);

  // A usage of 0 on a reservation of 0 changes nothing and writes nothing.
  const Ticket y = arrive_units(e, amounts({{"requests", 0}}), T0 + 6);
  drain(e);
  Report none = ok();
  none.usage = amounts({{"requests", 0}, {"tokens", 0}});
  report(e, y, none, T0 + 7);
  s = drain(e);
  CHECK(count(s.writes, WriteKind::PutGrant) == 0);
  CHECK(count(s.writes, WriteKind::DeleteGrant) == 0);
  CHECK(window_used(e, "tpm", T0 + 7) == 30);
  CHECK(window_used(e, "bucket", T0 + 7) == 0);
  json st = stats(e, T0 + 7);
  CHECK(st["running"] == 0);
  CHECK(st["active"] == 0);

  // Only the units named with 0 take nothing: the default unit is 1 otherwise.
  arrive_units(e, amounts({{"tokens", 0}}), T0 + 8);
  CHECK(window_used(e, "bucket", T0 + 8) == 1);
  CHECK(window_used(e, "tpm", T0 + 8) == 30);
}

TEST_CASE("under covering reservations a run of zero-cost calls writes no row and no record", "[zero-cost]") {
  Engine e;
  e.set_reservations(true);
  REQUIRE(e.configure(config(100, 1000, 10), T0).ok());
  e.clear_output();
  for (Millis i = 0; i < 20; ++i) {
    const Ticket t = arrive(e, 0, T0 + 2 * i);
    Step s = drain(e);
    CHECK(s.actions == std::vector<Action>{start(t)});
    CHECK(count(s.writes, WriteKind::PutGrant) == 0);
    CHECK(count(s.writes, WriteKind::PutReservation) == 0);
    report(e, t, ok(), T0 + 2 * i + 1);
    s = drain(e);
    CHECK(count(s.writes, WriteKind::PutGrant) == 0);
    CHECK(count(s.writes, WriteKind::PutReservation) == 0);
  }
  CHECK(e.reservation_text().empty());
  CHECK(inspect(e).used() == 0);
  CHECK(inspect(e).unwritten("bucket") == 0);
}
