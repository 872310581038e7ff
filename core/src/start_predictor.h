// When a queued call can start: from the demand queued ahead of it (the
// wait queue), each window's log and the pending penalty. It owns no state:
// it reads the components it is made with, so a prediction is always of the
// bucket as it stands.
//
// Contract:
// - earliest(c) is exact if every queued unit is taken as early as
//   possible: window w frees its i-th unit at S[i] (now when free, else
//   when enough of the log expires), and a unit taken at t frees again at
//   t + W, so the r-th unit of the demand through c comes at
//   S[r mod L] + floor(r / L) * W. The latest over c's windows, and never
//   before now or a pending lift (after which the log is the lifted one).
// - at_most(c) >= earliest(c), in O(windows): every unit is free by the
//   newest grant's expiry, so the r-th comes by then + floor(r / L) * W. An
//   arrival within its deadline on this bound needs no exact prediction.
// - A start that no arithmetic could reach is kFar (about 31,700 years):
//   never an overflow.
//
// Example:
//   drl::Config config;
//   config.bucket.limit_per_window = 2;
//   config.bucket.window_ms = 1000;
//   drl::internal::Windows windows;
//   windows.configure(config);
//   windows[0].log.take(1, 1000, /*now=*/0);
//   windows[0].log.take(1, 1000, 100);  // full until 1000
//   drl::internal::Calls calls;
//   drl::internal::WaitQueue queue(calls);
//   drl::internal::Penalty penalty;
//   drl::internal::Call c;
//   c.set_cost(windows[0].unit, 2);
//   queue.note_before(c, windows.counted());  // nobody ahead: its own 2
//   drl::internal::StartPredictor predictor(windows, queue, penalty);
//   assert(predictor.earliest(c, /*now=*/500, /*refill_fraction=*/0.5) == 1100);  // when both grants left
//   assert(predictor.at_most(c, 500) == 1100);
#pragma once

#include <cstdint>

#include "call.h"
#include "penalty.h"
#include "wait_queue.h"
#include "windows.h"

namespace drl::internal {

// A predicted start beyond any real wait (~31,700 years), which no
// arithmetic on it overflows: a queue of 10^5 calls of 10^9 units each is
// 10^14 rounds of a window.
constexpr Millis kFar = 1'000'000'000'000'000;

class StartPredictor {
 public:
  StartPredictor(const Windows& windows, const WaitQueue& queue, const Penalty& penalty)
      : windows_(windows), queue_(queue), penalty_(penalty) {}

  Millis earliest(const Call& c, Millis now, double refill_fraction) const;
  Millis at_most(const Call& c, Millis now) const;
  // When the r-th unit (from 0) of queued demand in `w` can be taken.
  Millis unit_free_at(const Window& w, int64_t r, Millis now, double refill_fraction) const;

 private:
  const Windows& windows_;
  const WaitQueue& queue_;
  const Penalty& penalty_;
};

}  // namespace drl::internal
