#include "release_lags.h"

#include <algorithm>
#include <vector>

namespace drl::internal {

// The largest sample is kept as it changes; the ring is scanned again only
// when the sample it overwrites was the largest.
void ReleaseLags::sample(int64_t lag) {
  lag = std::max<int64_t>(0, lag);
  const int64_t overwritten = count_ == kReleaseLagSamples ? lags_[next_] : 0;
  lags_[next_] = lag;
  next_ = (next_ + 1) % kReleaseLagSamples;
  count_ = std::min(count_ + 1, kReleaseLagSamples);
  if (lag >= largest_) {
    largest_ = lag;
  } else if (overwritten == largest_) {
    largest_ = *std::max_element(lags_.begin(), lags_.begin() + static_cast<std::ptrdiff_t>(count_));
  }
  allowance_ = std::min<int64_t>(largest_, kMaxReleaseAllowanceMs);
}

void ReleaseLags::write_stats(json::Writer& out) const {
  std::vector<int64_t> sorted(lags_.begin(), lags_.begin() + static_cast<std::ptrdiff_t>(count_));
  std::sort(sorted.begin(), sorted.end());
  auto pick = [&](double q) -> json::Writer& {
    if (sorted.empty()) return out.null();
    const size_t i = std::min(sorted.size() - 1, static_cast<size_t>(q * static_cast<double>(sorted.size())));
    return out.num(sorted[i]);
  };
  out.begin_object().key("samples").num(sorted.size());
  out.key("p50");
  pick(0.5);
  out.key("p99");
  pick(0.99);
  out.key("max");
  if (sorted.empty()) {
    out.null();
  } else {
    out.num(sorted.back());
  }
  out.key("allowance").num(allowance_).end_object();
}

}  // namespace drl::internal
