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
#include <vector>

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

// What one attempt took in one window, so its report's usage can correct
// it: the amount, and the grant's time in the log of that window (by its
// number), as the log was then (epoch). An amount of 0: the window counted none
// of this call's cost.
struct Take {
  int window = -1;  // its number (Window::number)
  uint64_t epoch = 0;
  Millis at = 0;
  int64_t amount = 0;
  uint64_t incarnation = 0;  // the window's (Window::incarnation) when taken
};

// One unit a call counts in: what it costs there, and, while it is queued,
// what its level had been pushed in that unit before it (Level::pushed), so
// the demand ahead of it is known in O(1) (WaitQueue::demand_through).
struct UnitCost {
  int32_t unit = 0;  // its number (Windows::units)
  int64_t amount = 0;
  int64_t before = 0;
};

// A call's units: two inline (a call counts one or two units almost always,
// and a queued call then allocates nothing for them), more beyond.
class UnitCosts {
 public:
  size_t size() const { return n_ <= kInline ? n_ : kInline + more_.size(); }
  const UnitCost& operator[](size_t i) const { return i < kInline ? inline_[i] : more_[i - kInline]; }
  UnitCost& operator[](size_t i) { return i < kInline ? inline_[i] : more_[i - kInline]; }
  // Inlined: each window asks it on every take (about 2% of a wasm take as a call).
  [[gnu::always_inline]] const UnitCost* find(int unit) const {
    for (size_t i = 0; i < size(); ++i) {
      if ((*this)[i].unit == unit) return &(*this)[i];
    }
    return nullptr;
  }
  // The entry of `unit`, added (costing 0) if missing.
  UnitCost& of(int unit) {
    for (size_t i = 0; i < size(); ++i) {
      if ((*this)[i].unit == unit) return (*this)[i];
    }
    UnitCost& added = n_ < kInline ? inline_[n_] : more_.emplace_back();
    ++n_;
    added = UnitCost{unit, 0, 0};
    return added;
  }

 private:
  static constexpr size_t kInline = 2;
  std::array<UnitCost, kInline> inline_{};
  std::vector<UnitCost> more_;
  uint8_t n_ = 0;
};

struct Call {
  // The cost per unit, fixed at arrival (and, queued, the demand before it).
  UnitCosts units;
  // The current (or last) attempt's reservations, one per window; allocated
  // when the call first starts, so a queued call holds none.
  std::vector<Take> takes;
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
  // Running: the attempt's deadline is still in force (AttemptDeadlines);
  // cleared when the attempt ends, before its phase changes.
  bool timed = false;
  // Waiting::max_retries, fixed at arrival; -1: the bucket's retry.maxRetries
  // when each retry is decided. (Beside `withdrawn` and `timed`, in their
  // padding: a queued call costs no more memory for them.)
  int32_t max_retries = -1;

  void set_cost(int unit, int64_t amount) { units.of(unit).amount = amount; }
  int64_t cost_in(int unit) const {
    const UnitCost* u = units.find(unit);
    return u ? u->amount : 0;
  }
  int64_t before_in(int unit) const {
    const UnitCost* u = units.find(unit);
    return u ? u->before : 0;
  }
  const Take* take_in(int window) const {
    for (const Take& t : takes) {
      if (t.window == window) return &t;
    }
    return nullptr;
  }
};

// Every call the engine knows, by ticket.
using Calls = std::unordered_map<Ticket, Call>;

}  // namespace drl::internal
