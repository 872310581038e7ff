// A deterministic simulation of a lease tree (docs/leases.md): one root
// (core/src/ledger.h) and 2-8 children (core/src/lease_holder.h) in real
// time, each with its own clock (a large offset, a drift within the bound,
// and a reading that lags by up to the slack), messages over a latency
// matrix with loss, duplication, delay and partitions, child crashes, root
// restarts from the rows that were durable, and limit cuts. Children start
// calls for random callers (bursty, skewed, a moving hotspot). Ground truth
// is every use and every call at its real time: no rolling window of any
// window holds more than its limit, never more than the cap run at once.
#pragma once

#include <cstdint>
#include <string>

#include "lease_holder.h"

namespace drl::testing {

// A test-only fault, injected by rewriting messages in the simulated network
// (never in the components): the schedules must find a violation with each.
enum class LeaseFault {
  kNone,
  kFreeUsedAtReceipt,     // closes reach the root with their uses stripped: used units freed at receipt
  kDateWithoutMargin,     // ages grow by the dating margin: uses dated at receipt - age
  kChildEndsFromReceipt,  // grants stretched so the child's lease ends at its receipt + the duration
  // Bare holders only: each told its windows are shorter by the margin, so a
  // used unit comes back once its clock shows T after the use (no allowance
  // for a lagging reading or a fast clock).
  kReuseWithoutMargin,
  // Engines only: the host tells each child engine its callbacks left when
  // it decided them, though they leave later: uses read at the decision.
  kReleasedAtDecision,
};

// A fixed scenario instead of a random schedule (the sizing benchmark,
// bench/lease_bench.cpp): no faults, one window, callers at a steady rate.
struct LeaseScenario {
  enum class Shape { kUniform, kSkewed, kHotspot };  // skewed: 80% of the calls at one child of five
  int64_t window_ms = 1000;
  int64_t limit = 2000;
  int64_t concurrency = 400;
  double load = 0.5;  // offered calls / what the window admits
  Shape shape = Shape::kUniform;
  bool far = false;  // the root 150 ms from every child, else 1-3 ms
  size_t children = 5;
  int64_t run_ms = 20'000;
  int64_t hot_period_ms = 5'000;  // kHotspot: how long one child stays hot
  int64_t penalty_at_ms = 0;      // a 429 at child 0 then, asking for a second's wait (0: none)
  int64_t lease_ms = 0;           // the ledger's lease_ms (0: a tree's default, drl::TreeConfig{}.lease_ms)
};

struct LeaseSimOptions {
  uint64_t seed = 1;
  LeaseFault fault = LeaseFault::kNone;
  const LeaseScenario* scenario = nullptr;  // a random schedule when null
  bool fail_open = false;                   // every child fails open (not exact: the schedules find it over)
  // Every child a real drl::Engine made a lease child (lease_engine_child.h),
  // driven through its public API: arrive, report, released, tick,
  // lease_reply, lease_notice; its callbacks leave a release lag after their
  // start (up to lag_ms, the host's output gate), and run from there.
  bool engines = false;
  // Scenarios with bare holders: sample, every 10 ms of steady load, where
  // window 0's limit is (LeaseSimResult::account). Sampling reads the
  // holders, so a run with it differs a little from one without.
  bool account = false;
};

// Where a window's limit was at steady load, as shares of it (means over
// samples every 10 ms): what the sum of them is, the limit.
struct LeaseAccount {
  size_t samples = 0;
  double used = 0;           // real uses in the rolling window (ground truth)
  double root_free = 0;      // not counted at the root: free to grant
  double in_flight = 0;      // granted, the reply not yet at its child
  double held_no_call = 0;   // usable at a child whose queue is empty
  double held_no_slot = 0;   // usable at a child whose head waits for a slot
  double held_other = 0;     // usable at a child that could start its head
  double counted_after = 0;  // counted at the root beyond all of the above:
                             // uses that left the window, dated late or not
                             // yet reported, and units waiting to be reused
  // Slots, as shares of the cap.
  double slots_running = 0, slots_idle = 0, slots_root_free = 0;
};

struct LeaseSimResult {
  bool ok = true;
  std::string failure;  // the first violation, with the seed
  std::string setup;    // the schedule's parameters, for a replay
  // What the schedule exercised.
  size_t children = 0;
  size_t uses = 0;                  // takes of window 0
  size_t calls = 0;                 // calls started
  size_t exchanges = 0;             // exchanges the root received (copies included)
  internal::ExchangeCauses causes;  // why the children's new exchanges went
  // The same two from the end of the first window to the callers' end:
  // steady load, without the children's ramp from no history.
  size_t steady_calls = 0;
  size_t steady_exchanges = 0;
  // How long each call of those started waited after it arrived, ms (in
  // start order): what a caller sees of the sizing below the limit.
  std::vector<int64_t> steady_waits;
  size_t grants = 0;  // leases granted
  size_t lost = 0;    // messages lost (loss, partition, a node down)
  size_t duplicated = 0;
  size_t child_crashes = 0;
  size_t root_restarts = 0;
  size_t undelivered = 0;  // replies dropped because the root restarted before their rows were durable
  size_t cuts = 0;         // limit cuts
  // Ground truth: most (uses in a window - its limit), most (calls - cap).
  int64_t worst_window_over = -1'000'000;
  int64_t worst_calls_over = -1'000'000;
  // Utilisation: calls started / what the bucket could admit at best over the
  // run (its tightest window at the mean cost, or its cap over the mean time a
  // call held a slot), the offered load against the same, and whether
  // faults were off.
  double utilisation = 0;
  double load = 0;
  bool calm = false;           // no loss, crash, restart, partition, cut
  int64_t window_ms = 0;       // window 0's length
  bool all_near = false;       // every child 1-3 ms from the root (else some 40-150 ms)
  bool floors = false;         // every child had a static floor (WhenShort::kFloor)
  size_t floor_calls = 0;      // calls that started on a floor (no lease covered them)
  int64_t release_lag_ms = 0;  // engines: the most a callback's release lagged its start
  uint64_t late_releases = 0;  // engines: releases after their lease's end (Engine::lease_late_releases)
  // The shared penalty: 429s seen at one child, and for each other child
  // the last real time it started a call while one was in force, after
  // the 429 (0 when it started none). Without faults each must be within
  // the bound (docs/leases.md): the reporter's one-way latency to the root
  // plus the root's to that child.
  size_t penalties = 0;
  size_t penalty_stops = 0;  // (penalty, other child) pairs
  int64_t penalty_stop_sum = 0, penalty_stop_max = 0;
  int64_t penalty_bound = 0;  // the largest bound of any pair
  LeaseAccount account;       // with LeaseSimOptions::account
};

LeaseSimResult run_lease_sim(const LeaseSimOptions& options);

// A count from the environment (DRL_LEASE_SCHEDULES, DRL_LEASE_SEED, ...),
// else `fallback`.
uint64_t env_count(const char* name, uint64_t fallback);

// The lease schedules a run makes: DRL_LEASE_SCHEDULES, else a fifth of the
// engine's property count when CI sets one (DRL_PROPERTY_SCHEDULES), at
// least 100, else 2,000.
uint64_t lease_schedule_count();

}  // namespace drl::testing
