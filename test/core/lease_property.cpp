// Verifies the lease tree (docs/leases.md) over seeded simulations
// (test/support/lease_sim.h): one root, 2-8 children with their own clocks,
// lossy, duplicating, delaying networks, partitions, child crashes, root
// restarts from durable rows, limit cuts. Ground truth is every use and call
// at its real time: no rolling window over its limit, never more than the
// cap at once. Then each of three faults, reintroduced by rewriting
// messages, must be found by the same schedules.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <sstream>

#include "lease_sim.h"

using drl::testing::LeaseFault;
using drl::testing::LeaseSimResult;
using drl::testing::run_lease_sim;

namespace {

// DRL_LEASE_SCHEDULES runs more (or fewer); else a fifth of the engine's
// property count when CI sets one (10,000 in the release stage, 3,000 under
// the sanitizers), else 2,000. DRL_LEASE_SEED replays one.
uint64_t schedule_count() { return drl::testing::lease_schedule_count(); }

}  // namespace

TEST_CASE("lease property: no window over its limit, no moment over the cap", "[lease-property]") {
  const uint64_t one = drl::testing::env_count("DRL_LEASE_SEED", 0);
  const uint64_t count = one ? 1 : schedule_count();
  LeaseSimResult total;
  size_t failures = 0, calm = 0, light = 0, light_calls = 0, light_exchanges = 0, floors = 0, floor_calls = 0;
  double light_util = 0;  // calls started / calls offered
  // Utilisation of calm schedules (no faults) at >= 1.3x load, by family.
  struct Family {
    const char* name;
    size_t n = 0;
    double sum = 0, least = 2;
    void add(double u) { ++n, sum += u, least = std::min(least, u); }
  };
  Family near_long{"all children near, window >= 1 s"}, near_short{"all children near, window <= 250 ms"},
      far_long{"some children far, window >= 1 s"}, far_short{"some children far, window <= 250 ms"},
      faulty{"with faults, any window"};
  int64_t worst_window = -1'000'000, worst_calls = -1'000'000;
  // The shared penalty, without faults (checked against the bound) and with.
  size_t calm_stops = 0, faulty_stops = 0, penalties = 0;
  int64_t calm_stop_sum = 0, calm_stop_max = 0, faulty_stop_sum = 0, faulty_stop_max = 0, bound_max = 0;
  std::string first_failure;
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t seed = one ? one : i + 1;
    const LeaseSimResult r = run_lease_sim({seed, LeaseFault::kNone});
    if (!r.ok && failures++ == 0) first_failure = r.failure;
    worst_window = std::max(worst_window, r.worst_window_over);
    worst_calls = std::max(worst_calls, r.worst_calls_over);
    total.uses += r.uses;
    total.calls += r.calls;
    total.exchanges += r.exchanges;
    total.grants += r.grants;
    total.lost += r.lost;
    total.duplicated += r.duplicated;
    total.child_crashes += r.child_crashes;
    total.root_restarts += r.root_restarts;
    total.undelivered += r.undelivered;
    total.cuts += r.cuts;
    calm += r.calm;
    floors += r.floors;
    floor_calls += r.floor_calls;
    penalties += r.penalties;
    (r.calm ? calm_stops : faulty_stops) += r.penalty_stops;
    (r.calm ? calm_stop_sum : faulty_stop_sum) += r.penalty_stop_sum;
    int64_t& stop_max = r.calm ? calm_stop_max : faulty_stop_max;
    stop_max = std::max(stop_max, r.penalty_stop_max);
    if (r.calm) bound_max = std::max(bound_max, r.penalty_bound);
    if (r.calm && r.load <= 0.8 && r.penalties == 0)
      light_calls += r.calls, light_exchanges += r.exchanges, light_util += r.utilisation / r.load, ++light;
    if (r.load < 1.3 || r.penalties > 0) continue;  // a 429's wait idles the bucket
    if (!r.calm) {
      faulty.add(r.utilisation);
    } else if (r.window_ms >= 1000) {
      (r.all_near ? near_long : far_long).add(r.utilisation);
    } else if (r.window_ms <= 250) {
      (r.all_near ? near_short : far_short).add(r.utilisation);
    }
  }
  std::ostringstream util;
  util << "utilisation at >= 1.3x load (calls started / the most the tightest window or the cap admits):";
  for (const Family* f : {&near_long, &far_long, &near_short, &far_short, &faulty}) {
    util << "\n  " << f->name << ": mean " << (f->n ? f->sum / static_cast<double>(f->n) : 0) << ", least "
         << (f->n ? f->least : 0) << " over " << f->n << " schedules";
  }
  util << "\nwithout faults at <= 0.8x load: " << light << " schedules, "
       << static_cast<double>(light_exchanges) / static_cast<double>(std::max<size_t>(1, light_calls))
       << " exchanges per call, calls started / offered " << (light ? light_util / static_cast<double>(light) : 0);
  util << "\nthe shared penalty: " << penalties
       << " 429s; the other children's last start after one, without faults: mean "
       << (calm_stops ? calm_stop_sum / static_cast<int64_t>(calm_stops) : 0) << " ms, most " << calm_stop_max
       << " ms (bound up to " << bound_max << " ms) over " << calm_stops << "; with faults: mean "
       << (faulty_stops ? faulty_stop_sum / static_cast<int64_t>(faulty_stops) : 0) << " ms, most " << faulty_stop_max
       << " ms over " << faulty_stops;
  WARN(util.str());
  std::ostringstream figures;
  figures << count << " lease schedules (" << calm << " without faults): " << total.calls << " calls, " << total.uses
          << " uses of window 0, " << total.grants << " leases, " << total.exchanges << " exchanges received ("
          << static_cast<double>(total.exchanges) / static_cast<double>(std::max<size_t>(1, total.uses))
          << " per use); " << total.lost << " messages lost, " << total.duplicated << " duplicated, "
          << total.child_crashes << " child crashes, " << total.root_restarts << " root restarts (" << total.undelivered
          << " replies never delivered, their rows not durable), " << total.cuts << " limit cuts; " << floors
          << " schedules with static floors (" << floor_calls
          << " calls started on a floor); most uses in a window - limit " << worst_window
          << " (must be <= 0), most calls - cap " << worst_calls << " (must be <= 0); " << failures << " violations";
  WARN(figures.str());
  if (failures > 0) FAIL(first_failure << "\nreplay: DRL_LEASE_SEED=<seed> build/drl_tests '[lease-property]'");
  CHECK(worst_window <= 0);
  CHECK(worst_calls <= 0);
  if (!one) {
    // The schedules must reach the faults they claim to, and saturate.
    CHECK(total.lost > 0);
    CHECK(total.duplicated > 0);
    CHECK(total.child_crashes > 0);
    CHECK(total.root_restarts > 0);
    CHECK(total.undelivered > 0);
    CHECK(total.cuts > 0);
    CHECK(worst_window == 0);
    CHECK(calm_stops > 0);
    CHECK(floor_calls > 0);
  }
}

TEST_CASE("lease property: the schedules catch each fault reintroduced", "[lease-property]") {
  // Up to half as many per fault, never so few that the rarest (the dating
  // margin, found in 11 schedules of 5,000, the first at seed 1,270; a
  // change to sizing moves which ones) could go unseen. The search for
  // a fault stops at its first violation (under the sanitizers the whole
  // scan took 90 s); DRL_LEASE_FAULT_TALLY=1 scans every seed and prints how
  // many find one, the figures docs/leases.md gives.
  const uint64_t count = std::max<uint64_t>(2000, schedule_count() / 2);
  const bool tally = drl::testing::env_count("DRL_LEASE_FAULT_TALLY", 0) != 0;
  const std::pair<LeaseFault, const char*> faults[] = {
      {LeaseFault::kFreeUsedAtReceipt, "a used unit freed at receipt"},
      {LeaseFault::kDateWithoutMargin, "a use dated at receipt - age, without the margin"},
      {LeaseFault::kChildEndsFromReceipt, "the child's lease ending at its receipt + the duration"},
      {LeaseFault::kReuseWithoutMargin, "a used unit reused once its child's clock shows T after the use"},
  };
  for (const auto& [fault, name] : faults) {
    size_t found = 0;
    uint64_t first = 0, scanned = 0;
    for (uint64_t seed = 1; seed <= count && (tally || !found); ++seed, ++scanned) {
      const LeaseSimResult r = run_lease_sim({seed, fault});
      if (!r.ok) {
        ++found;
        if (!first) first = seed;
      }
    }
    std::ostringstream figures;
    figures << name << ": " << found << " of " << scanned << " schedules find a violation (first: seed " << first
            << ")";
    WARN(figures.str());
    CHECK(found > 0);
  }
}

TEST_CASE("lease property: failing open is not exact, the schedules find windows over the limit", "[lease-property]") {
  // The same schedules with every child failing open once its exchange has
  // gone unanswered for retry_ms: partitions, loss and root restarts open
  // the gate, and windows go over. Like the faults above, it stops at the
  // first unless DRL_LEASE_FAULT_TALLY is set.
  const uint64_t count = std::max<uint64_t>(100, schedule_count() / 10);  // about 60% of them go over
  const bool tally = drl::testing::env_count("DRL_LEASE_FAULT_TALLY", 0) != 0;
  size_t over = 0, scanned = 0;
  for (uint64_t seed = 1; seed <= count && (tally || !over); ++seed, ++scanned) {
    drl::testing::LeaseSimOptions o;
    o.seed = seed;
    o.fail_open = true;
    over += !run_lease_sim(o).ok;
  }
  std::ostringstream figures;
  figures << "failing open: " << over << " of " << scanned << " schedules go over a limit or the cap";
  WARN(figures.str());
  CHECK(over > 0);
}
