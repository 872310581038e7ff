#include "start_predictor.h"

#include <algorithm>

namespace drl::internal {

Millis StartPredictor::unit_free_at(const Window& w, int64_t r, Millis now, double refill_fraction) const {
  const int64_t i = r % w.limit;
  const int64_t rounds = r / w.limit;
  Millis first;
  if (penalty_.pending()) {
    first = penalty_.unit_free_after_lift(w.log, w.limit, w.ms, refill_fraction, i);
  } else {
    first = w.log.fits_at(i + 1, w.limit, w.ms, now);
  }
  if (rounds > 0 && rounds > (kFar - first) / w.ms) return kFar;
  return first + rounds * w.ms;
}

Millis StartPredictor::at_most(const Call& c, Millis now) const {
  Millis at = now;
  if (penalty_.pending()) at = std::max(at, penalty_.until());
  for (const Window& w : windows_) {
    const int64_t demand = queue_.demand_through(c, w.unit);
    if (demand <= 0) continue;
    Millis last = w.log.empty() ? now : w.log.newest().at + w.ms;
    if (penalty_.pending()) last = std::max(last, penalty_.lifted_expiry(w.log, w.ms));
    const int64_t rounds = (demand - 1) / w.limit;
    if (rounds > 0 && rounds > (kFar - last) / w.ms) return kFar;
    at = std::max(at, std::max(last, now) + rounds * w.ms);
  }
  return at;
}

Millis StartPredictor::earliest(const Call& c, Millis now, double refill_fraction) const {
  Millis at = now;
  if (penalty_.pending()) at = std::max(at, penalty_.until());
  for (const Window& w : windows_) {
    const int64_t demand = queue_.demand_through(c, w.unit);
    if (demand > 0) at = std::max(at, unit_free_at(w, demand - 1, now, refill_fraction));
  }
  return at;
}

}  // namespace drl::internal
