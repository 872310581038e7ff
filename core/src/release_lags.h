// How long callbacks take to leave the object after the engine starts
// them (the commit before them, the host's turn), and the allowance a take
// is dated ahead by so that a window counts it from when the work left.
//
// Contract:
// - It keeps the last kReleaseLagSamples lags, a ring; a negative lag (a
//   clock that stood still) counts as 0.
// - The allowance is the largest lag sampled, at most
//   kMaxReleaseAllowanceMs: most releases then land before their take's
//   date, and nothing is rewritten for them.
//
// Example:
//   drl::internal::ReleaseLags lags;
//   assert(lags.allowance() == 0);
//   lags.sample(12);
//   lags.sample(40);
//   lags.sample(-3);
//   assert(lags.allowance() == 40);
//   lags.sample(5000);
//   assert(lags.allowance() == drl::kMaxReleaseAllowanceMs);
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include "drl/engine.h"
#include "json.h"

namespace drl::internal {

class ReleaseLags {
 public:
  void sample(int64_t lag);
  Millis allowance() const { return allowance_; }
  // Takes are dated at their start again (release dating switched off);
  // the samples stay for when it is switched back on.
  void drop_allowance() { allowance_ = 0; }
  // For stats: {samples, p50, p99, max, allowance}.
  void write_stats(json::Writer& out) const;

 private:
  std::array<int64_t, kReleaseLagSamples> lags_{};
  size_t count_ = 0;  // filled
  size_t next_ = 0;
  int64_t largest_ = 0;  // the largest sample in the ring
  Millis allowance_ = 0;
};

}  // namespace drl::internal
