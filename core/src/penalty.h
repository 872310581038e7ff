// The shared penalty: one caller's 429 pauses the whole bucket until a
// deadline, and at the deadline every window is refilled only partly.
// Also the retry delays that a failed attempt waits (backoff and hints).
//
// Contract:
// - impose() never shortens a penalty in force: concurrent penalties take
//   the later deadline. It answers whether the stored penalty changed.
// - Nothing starts while a lift is pending; at the deadline (due()) each
//   window's log becomes one grant (lifted()): dated at the deadline, or at
//   the newest grant when that is later, carrying the larger of the refill
//   floor (penaltyRefillFraction's complement of the limit) and what was
//   still live then, so real takes keep counting.
// - restore() repairs a stored deadline: unreadable is none, beyond the
//   longest delay from now is pulled back to it.
//
// Example:
//   drl::internal::Penalty p;
//   assert(p.impose(/*now=*/1000, /*delay=*/500));
//   assert(!p.impose(1000, 100));  // never shortened
//   assert(!p.due(1499));
//   assert(p.due(1500));
//   drl::internal::SlidingLog log;  // empty
//   const drl::internal::Grant g = p.lifted(log, /*limit=*/10, /*window_ms=*/1000, /*refill_fraction=*/0.3);
//   assert(g.at == 1500);
//   assert(g.amount == 7);  // 30% of the limit is free at the lift
#pragma once

#include <cstdint>
#include <optional>

#include "drl/config.h"
#include "drl/engine.h"
#include "sliding_log.h"

namespace drl::internal {

class Penalty {
 public:
  // Pauses until now + delay unless a penalty in force ends later; true if
  // the deadline changed (the caller stores it).
  bool impose(Millis now, Millis delay);
  bool pending() const { return pending_; }
  Millis until() const { return until_; }  // the deadline (0: none ever set)
  bool due(Millis now) const { return pending_ && now >= until_; }

  // What a window's log becomes at the lift (see the contract).
  Grant lifted(const SlidingLog& log, int64_t limit, Millis window_ms, double refill_fraction) const;
  // When the (i+1)-th unit of a window is free once the pending lift has
  // happened: at the deadline if the lifted grant leaves room, else when it
  // leaves the window.
  Millis unit_free_after_lift(const SlidingLog& log, int64_t limit, Millis window_ms, double refill_fraction,
                              int64_t i) const;
  // When the lifted grant of a window leaves it.
  Millis lifted_expiry(const SlidingLog& log, Millis window_ms) const;
  void lift() { pending_ = false; }

  // A stored penalty; true if it had to be repaired (the caller stores it).
  bool restore(double until, bool pending, Millis now);
  void clear() {
    until_ = 0;
    pending_ = false;
  }

  // The refill floor: ceil(limit * (1 - refill_fraction)), in [0, limit].
  static int64_t refill_floor(int64_t limit, double refill_fraction);

 private:
  Millis dated(const SlidingLog& log) const;
  Millis until_ = 0;
  bool pending_ = false;
};

// The delay before retry `attempt` (1 for the first retry): exponential
// from minDelayInMs by factor, at most maxDelayInMs.
Millis backoff_delay(const RetryConfig& retry, uint32_t attempt);
// The delay a rate-limited attempt imposes: the caller's explicit delay,
// else the upstream's Retry-After (when respectRetryAfter), else the
// backoff; at most maxDelayInMs.
Millis penalty_delay(const RetryConfig& retry, const Report& r, uint32_t attempt, Millis now);

}  // namespace drl::internal
