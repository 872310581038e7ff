// Seeded random schedules driven through the engine, with a model host
// (storage applied from the engine's writes, evictions restored from it) and
// the invariants every step must keep. Used by the property test and by the
// replay tool that feeds the wasm differential test.
#pragma once

#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

namespace drl::testing {

struct ScheduleOptions {
  uint64_t seed = 1;
  int steps = 60;
  // The exact family (issue 15): one window of at most kMaxLogEntries ms,
  // unit costs, every callback reporting success at its start time, no 429,
  // pause, reconfigure, withdraw, cancel, retry or restart, priority 0, and
  // a host that ticks at every wake: every queued call must start exactly at
  // the time predicted for it at arrival (which the test also computes on its
  // own), and a call is refused for its maxWaitMs only at arrival.
  bool exact = false;
};

struct ScheduleResult {
  bool ok = true;
  std::string failure;  // the first broken invariant, with the step and seed
  size_t starts = 0;
  size_t settled = 0;
  size_t tickets = 0;
  // Faults exercised, so the property test can show the schedules reach them.
  size_t timeouts = 0;              // attempts the engine timed out
  size_t gone = 0;                  // attempts settled by gone()
  size_t late_news = 0;             // report/threw/gone/cancel after a timeout or gone: UnknownTicket
  size_t crashes = 0;               // restarts from storage
  size_t crashes_with_running = 0;  // ... while at least one callback ran
  size_t carried_callbacks = 0;     // callbacks left running at the upstream by those crashes
  // In flight: attempts running in the current engine plus callbacks from
  // before a crash still running at the upstream. `cap` is concurrency.
  size_t max_in_flight = 0;
  size_t max_old_in_flight = 0;       // the most such old callbacks at once
  size_t full_with_old = 0;           // steps with in-flight == cap, old callbacks among them
  size_t held_back_by_old = 0;        // steps where a caller queued only because of old callbacks
  int64_t max_over_cap = -1'000'000;  // max (held slots - cap) at a first start, before it: must stay < 0
  // max (in flight - cap) after any step with no cap lowered below the slots
  // it found held: must stay <= 0 (0: the cap reached exactly).
  int64_t max_in_flight_over_cap = -1'000'000;

  // Several windows, costs per unit and usage (issue 14). Half the seeds (the
  // even ones) configure extra windows; the odd ones run as before.
  size_t window_schedules = 0;  // schedules with extra windows
  size_t honest_schedules = 0;  // ... whose usage never exceeds the reservation
  size_t unit_arrivals = 0;     // arrivals with a cost per unit (admitted to the queue)
  size_t usage_reports = 0;     // reports whose usage settled an attempt
  size_t refunds = 0;           // usage below the reservation, refunded where it was dated
  size_t stale_refunds = 0;     // ... not refunded: the grant expired or the log was replaced
  size_t charges = 0;           // usage above the reservation, charged at the report
  size_t debt_steps = 0;        // steps after which some window held more than its limit
  size_t window_changes = 0;    // reconfigures that added, removed or re-unit a window
  size_t overused_windows = 0;  // rolling windows of real usage above the limit (each a start)
  int64_t max_overuse = 0;      // the most real usage above a limit in a rolling window
  // max (real usage - limit - the under-estimates of the calls started in that
  // rolling window) over every window at every start: must stay <= 0.
  int64_t max_overuse_beyond_underestimate = -1'000'000'000;

  // Waiting with intent (issue 15).
  size_t priority_arrivals = 0;    // arrivals admitted with a priority other than 0
  size_t deadline_arrivals = 0;    // arrivals admitted with a maxWaitMs (0 included)
  size_t try_now_arrivals = 0;     // ... with maxWaitMs 0
  size_t refused_at_arrival = 0;   // DeadlineExceeded in the arrival step
  size_t expired_in_queue = 0;     // DeadlineExceeded later, at or after the deadline
  size_t withdrawn_queued = 0;     // withdraw of a queued call
  size_t withdrawn_between = 0;    // withdraw of a call between attempts
  size_t withdrawn_running = 0;    // withdraw of a running call (left to run)
  size_t cancelled_retries = 0;    // ... whose retry became Cancelled
  size_t overtakes = 0;            // first starts ahead of a call that arrived earlier (a higher priority)
  size_t predictions_checked = 0;  // first starts checked against a prediction still standing
  size_t exact_starts = 0;         // exact family: queued calls that started exactly when predicted
  size_t late_starts = 0;          // first starts after the call's deadline (see property.cpp)

  // A call's own maxRetries (Waiting::max_retries).
  size_t own_retries_arrivals = 0;  // arrivals admitted with their own maxRetries
  size_t own_retries_binding = 0;   // exhausted throws of calls whose own maxRetries differs from the bucket's

  // Adds another schedule's figures: counts summed, maxima kept (ok and
  // failure are the caller's: the property test stops at the first failure).
  void add(const ScheduleResult& r) {
    for (auto [total, part] : {std::pair{&starts, r.starts},
                               {&settled, r.settled},
                               {&tickets, r.tickets},
                               {&timeouts, r.timeouts},
                               {&gone, r.gone},
                               {&late_news, r.late_news},
                               {&crashes, r.crashes},
                               {&crashes_with_running, r.crashes_with_running},
                               {&carried_callbacks, r.carried_callbacks},
                               {&full_with_old, r.full_with_old},
                               {&held_back_by_old, r.held_back_by_old},
                               {&window_schedules, r.window_schedules},
                               {&honest_schedules, r.honest_schedules},
                               {&unit_arrivals, r.unit_arrivals},
                               {&usage_reports, r.usage_reports},
                               {&refunds, r.refunds},
                               {&stale_refunds, r.stale_refunds},
                               {&charges, r.charges},
                               {&debt_steps, r.debt_steps},
                               {&window_changes, r.window_changes},
                               {&overused_windows, r.overused_windows},
                               {&priority_arrivals, r.priority_arrivals},
                               {&deadline_arrivals, r.deadline_arrivals},
                               {&try_now_arrivals, r.try_now_arrivals},
                               {&refused_at_arrival, r.refused_at_arrival},
                               {&expired_in_queue, r.expired_in_queue},
                               {&withdrawn_queued, r.withdrawn_queued},
                               {&withdrawn_between, r.withdrawn_between},
                               {&withdrawn_running, r.withdrawn_running},
                               {&cancelled_retries, r.cancelled_retries},
                               {&overtakes, r.overtakes},
                               {&predictions_checked, r.predictions_checked},
                               {&exact_starts, r.exact_starts},
                               {&late_starts, r.late_starts},
                               {&own_retries_arrivals, r.own_retries_arrivals},
                               {&own_retries_binding, r.own_retries_binding}}) {
      *total += part;
    }
    max_in_flight = std::max(max_in_flight, r.max_in_flight);
    max_old_in_flight = std::max(max_old_in_flight, r.max_old_in_flight);
    for (auto [most, part] : {std::pair{&max_over_cap, r.max_over_cap},
                              {&max_in_flight_over_cap, r.max_in_flight_over_cap},
                              {&max_overuse, r.max_overuse},
                              {&max_overuse_beyond_underestimate, r.max_overuse_beyond_underestimate}}) {
      *most = std::max(*most, part);
    }
  }
};

// Runs one schedule. When `trace` is given, every event is appended to it as
// {"e": ..., args..., "rc": ..., "records": [...], "wake": ..., "slotsText": ...,
// "out"?: ...} (a restore also carries the stored slots record as "slots"),
// which a replay of the same events through core.wasm must reproduce.
ScheduleResult run_schedule(const ScheduleOptions& options, nlohmann::json* trace = nullptr);

}  // namespace drl::testing
