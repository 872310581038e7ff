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

nlohmann::json ReleaseLags::json() const {
  std::vector<int64_t> sorted(lags_.begin(), lags_.begin() + static_cast<std::ptrdiff_t>(count_));
  std::sort(sorted.begin(), sorted.end());
  auto pick = [&](double q) -> nlohmann::json {
    if (sorted.empty()) return nullptr;
    const size_t i = std::min(sorted.size() - 1, static_cast<size_t>(q * static_cast<double>(sorted.size())));
    return sorted[i];
  };
  return {{"samples", sorted.size()},
          {"p50", pick(0.5)},
          {"p99", pick(0.99)},
          {"max", sorted.empty() ? nlohmann::json(nullptr) : nlohmann::json(sorted.back())},
          {"allowance", allowance_}};
}

}  // namespace drl::internal
