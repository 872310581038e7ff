// A call as the engine holds it from arrival to its outcome: its costs,
// its place in the queue, and what its current attempt took in each window.
// Plain data; the scheduler (scheduler.h) moves it through its phases:
//
//   Queued -> Running -> (Backoff | Ready) -> Running -> ... -> erased
//
// A call is erased when its caller has its outcome (or is gone); its
// ticket then names nothing, which is how the wait queue (wait_queue.h)
// knows an entry is stale.
#pragma once

#include <array>
#include <cstdint>
#include <unordered_map>
#include <utility>

#include "drl/config.h"
#include "drl/engine.h"

namespace drl::internal {

enum class Phase { Queued, Running, Backoff, Ready };

// Whether anyone still awaits a call's outcome. Only a running call can lose
// its caller and live on (its work is in flight); any other call is dropped
// at once.
enum class Caller {
  Waiting,    // the caller awaits the outcome
  Cancelled,  // went away while the callback ran: settle as Cancelled when it ends
  Settled,    // already rejected (erase) while the callback ran: nothing left to say
};

// What one attempt reserved in one window, so its report's usage can
// correct it: the grant's time in the log of that window (by its key), as the
// log was then (epoch). Reserved 0: the window counted none of this call's cost.
struct Take {
  int key = -1;
  uint64_t epoch = 0;
  Millis at = 0;
  int64_t reserved = 0;
  uint64_t incarnation = 0;  // the window's (Window::incarnation) when taken
};

struct Call {
  // The cost per unit (by index in Scheduler::units), fixed at arrival.
  std::array<std::pair<int, int64_t>, kMaxWindows> costs{};
  uint8_t n_costs = 0;
  std::array<Take, kMaxWindows> takes{};  // the current (or last) attempt's reservations
  uint8_t n_takes = 0;
  uint32_t attempt = 0;  // attempts started so far
  Phase phase = Phase::Queued;
  Millis due = 0;         // Backoff: when the next attempt may take
  Millis started_at = 0;  // Running: the attempt's grant time, its key in the slots record
  Millis deadline = 0;    // Running: when the attempt times out
  Millis timeout = 0;     // Running: the attemptTimeoutMs it runs under (a reconfigure keeps it)
  Caller caller = Caller::Waiting;
  int32_t priority = 0;    // its queue level (Waiting::priority)
  Millis wait_until = -1;  // Queued: when it gives up waiting for its first start; -1: never
  Millis arrived_at = 0;   // for its wait in the history
  bool withdrawn = false;  // the caller gave up while its callback ran: not retried
  // Waiting::max_retries, fixed at arrival; -1: the bucket's retry.maxRetries
  // when each retry is decided. (Beside `withdrawn`, in its padding: a queued
  // call costs no more memory for it.)
  int32_t max_retries = -1;
  // Queued: each counted unit's total pushed onto its level before it (Level::pushed),
  // so the demand ahead of it is known in O(1) (see WaitQueue::demand_through).
  std::array<std::pair<int, int64_t>, kMaxWindows> before{};
  uint8_t n_before = 0;

  int64_t cost_in(int unit) const {
    for (uint8_t i = 0; i < n_costs; ++i) {
      if (costs[i].first == unit) return costs[i].second;
    }
    return 0;
  }
  const Take* take_in(int key) const {
    for (uint8_t i = 0; i < n_takes; ++i) {
      if (takes[i].key == key) return &takes[i];
    }
    return nullptr;
  }
};

// Every call the engine knows, by ticket.
using Calls = std::unordered_map<Ticket, Call>;

}  // namespace drl::internal
