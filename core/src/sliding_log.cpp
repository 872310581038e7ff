#include "sliding_log.h"

#include <algorithm>

#include "drl/config.h"
#include "drl/engine.h"

namespace drl {

int64_t grid_step_ms(int64_t window_ms, int64_t max_entries) {
  // The live range (now - window, ceil(now/q)*q] spans floor(window/q) + 1
  // cells, so q must keep window/q at most max_entries - 1.
  const int64_t cells = max_entries - 1;
  return window_ms <= max_entries ? 1 : (window_ms + cells - 1) / cells;
}

}  // namespace drl

namespace drl::internal {

std::optional<int64_t> SlidingLog::prune(int64_t window, int64_t now) {
  std::optional<int64_t> dropped;
  while (!grants_.empty() && grants_.front().at + window <= now) {
    dropped = grants_.front().at;
    sum_ -= grants_.front().amount;
    grants_.pop_front();
  }
  return dropped;
}

Grant SlidingLog::take(int64_t amount, int64_t window, int64_t now, int64_t max_entries) {
  const int64_t q = grid_step_ms(window, max_entries);
  int64_t at = (now + q - 1) / q * q;
  // After a reconfigure to a finer grid, or a lift floor dated in the future,
  // the newest grant can be later than `at`: join it rather than go back.
  if (!grants_.empty() && grants_.back().at >= at) {
    grants_.back().amount += amount;
  } else {
    grants_.push_back(Grant{at, amount});
  }
  sum_ += amount;
  return grants_.back();
}

int64_t SlidingLog::fits_at(int64_t amount, int64_t limit, int64_t window, int64_t now) const {
  int64_t excess = sum_ + amount - limit;
  if (excess <= 0) return now;
  for (const Grant& g : grants_) {
    excess -= g.amount;
    if (excess <= 0) return g.at + window;
  }
  // Only reachable when amount > limit, which callers reject up front.
  return grants_.empty() ? now : grants_.back().at + window;
}

int64_t SlidingLog::live_at(int64_t window, int64_t t) const {
  int64_t live = 0;
  for (auto it = grants_.rbegin(); it != grants_.rend() && it->at + window > t; ++it) {
    live += it->amount;
  }
  return live;
}

std::optional<Grant> SlidingLog::shrink(int64_t at, int64_t amount) {
  auto it = std::lower_bound(grants_.begin(), grants_.end(), at, [](const Grant& g, int64_t t) { return g.at < t; });
  if (it == grants_.end() || it->at != at) return std::nullopt;
  const int64_t back = std::min(amount, it->amount);
  it->amount -= back;
  sum_ -= back;
  const Grant now = *it;
  if (now.amount == 0) grants_.erase(it);
  return now;
}

std::pair<int64_t, Grant> SlidingLog::merge_oldest() {
  const Grant oldest = grants_.front();
  grants_.pop_front();
  grants_.front().amount += oldest.amount;
  return {oldest.at, grants_.front()};
}

void SlidingLog::replace(Grant grant) {
  clear();
  if (grant.amount > 0) push_back(grant);
}

void SlidingLog::clear() {
  grants_.clear();
  sum_ = 0;
  unordered_ = false;
}

bool SlidingLog::ordered() const { return !unordered_; }

bool SlidingLog::normalise() {
  if (!unordered_) return false;
  // In place: a second copy of a large log is the memory we must not spend.
  std::sort(grants_.begin(), grants_.end(), [](const Grant& a, const Grant& b) { return a.at < b.at; });
  // Rows are keyed by time, so duplicates are damage: fold them together.
  size_t kept = 0;
  bool merged = false;
  for (size_t i = 0; i < grants_.size(); ++i) {
    if (kept > 0 && grants_[kept - 1].at == grants_[i].at) {
      merged = true;
      grants_[kept - 1].amount = std::min<int64_t>(kMaxLimitPerWindow, grants_[kept - 1].amount + grants_[i].amount);
    } else {
      grants_[kept++] = grants_[i];
    }
  }
  grants_.resize(kept);
  sum_ = 0;
  for (const Grant& g : grants_) sum_ += g.amount;
  unordered_ = false;
  return merged;  // order alone changes no stored row
}

void SlidingLog::push_back(Grant grant) {
  if (!grants_.empty() && grants_.back().at >= grant.at) unordered_ = true;
  grants_.push_back(grant);
  sum_ += grant.amount;
}

}  // namespace drl::internal
