#include "release_lags.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "sort.h"

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
  // The ring's samples in order, read through their indices: no copy.
  const auto count = static_cast<uint32_t>(count_);
  std::vector<uint32_t> order(count);
  stable_order(
      order.data(), count,
      [](const void* lags, uint32_t a, uint32_t b) {
        const int64_t* lag = static_cast<const int64_t*>(lags);
        return lag[a] < lag[b] ? -1 : lag[b] < lag[a] ? 1 : 0;
      },
      lags_.data());
  auto pick = [&](double q) -> json::Writer& {
    if (count == 0) return out.null();
    const size_t i = std::min<size_t>(count - 1, static_cast<size_t>(q * static_cast<double>(count)));
    return out.num(lags_[order[i]]);
  };
  out.begin_object().key("samples").num(count_);
  out.key("p50");
  pick(0.5);
  out.key("p99");
  pick(0.99);
  out.key("max");
  if (count == 0) {
    out.null();
  } else {
    out.num(lags_[order[count - 1]]);
  }
  out.key("allowance").num(allowance_).end_object();
}

}  // namespace drl::internal
