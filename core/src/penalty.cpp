#include "penalty.h"

#include <algorithm>
#include <cmath>

#include "drl/retry_after.h"

namespace drl::internal {

bool Penalty::impose(Millis now, Millis delay) {
  const Millis until = now + std::max<Millis>(0, delay);
  if (until < until_ || (until == until_ && pending_)) return false;
  until_ = until;
  pending_ = true;
  return true;
}

Millis Penalty::dated(const SlidingLog& log) const { return log.empty() ? until_ : std::max(until_, log.newest().at); }

Grant Penalty::lifted(const SlidingLog& log, int64_t limit, Millis window_ms, double refill_fraction) const {
  return Grant{dated(log), std::max(refill_floor(limit, refill_fraction), log.live_at(window_ms, until_))};
}

Millis Penalty::unit_free_after_lift(const SlidingLog& log, int64_t limit, Millis window_ms, double refill_fraction,
                                     int64_t i) const {
  const Grant g = lifted(log, limit, window_ms, refill_fraction);
  return g.amount + i + 1 <= limit ? until_ : g.at + window_ms;
}

Millis Penalty::lifted_expiry(const SlidingLog& log, Millis window_ms) const { return dated(log) + window_ms; }

// A deadline can be at most a max delay (or a pause) ahead of the moment it
// was set; anything further is damage, and an unreadable one is no penalty.
bool Penalty::restore(double until, bool pending, Millis now) {
  bool repaired = false;
  const double horizon = static_cast<double>(now + kMaxDelayMs);
  if (!std::isfinite(until) || until < 0) {
    repaired = until != 0 || pending;
    until = 0;
  } else if (until > horizon) {
    until = horizon;
    repaired = true;
  }
  until_ = static_cast<Millis>(std::ceil(until));
  pending_ = pending && until_ > 0;
  return repaired;
}

int64_t Penalty::refill_floor(int64_t limit, double refill_fraction) {
  const double spent = static_cast<double>(limit) * (1.0 - refill_fraction);
  // ceil, but without letting 10 * 0.30000000000000004 round up to 4.
  const double nearest = std::round(spent);
  const int64_t floor = std::fabs(spent - nearest) < 1e-9 * std::max(1.0, spent)
                            ? static_cast<int64_t>(nearest)
                            : static_cast<int64_t>(std::ceil(spent));
  return std::clamp<int64_t>(floor, 0, limit);
}

Millis backoff_delay(const RetryConfig& retry, uint32_t attempt) {
  // minDelayInMs x factor^(attempt - 1), multiplied out: std::pow is 2 KB
  // of core.wasm. attempt is at most kMaxRetries + 1, and the product stops
  // growing at the cap.
  const double cap = static_cast<double>(retry.max_delay_ms);
  double delay = static_cast<double>(retry.min_delay_ms);
  for (uint32_t k = 1; k < attempt && delay < cap; ++k) delay *= retry.factor;
  return static_cast<Millis>(std::ceil(std::min(delay, cap)));
}

Millis penalty_delay(const RetryConfig& retry, const Report& r, uint32_t attempt, Millis now) {
  std::optional<Millis> hinted;
  // An explicit delay is the caller's own decision (a rateLimit hook read
  // it from the body); respectRetryAfter governs only the server's header.
  if (r.retry_after_ms && std::isfinite(*r.retry_after_ms) && *r.retry_after_ms >= 0) {
    hinted = static_cast<Millis>(std::ceil(std::min(*r.retry_after_ms, 1e15)));
  } else if (r.retry_after && retry.respect_retry_after) {
    hinted = parse_retry_after(*r.retry_after, now);
  }
  return std::min(hinted.value_or(backoff_delay(retry, attempt)), retry.max_delay_ms);
}

}  // namespace drl::internal
