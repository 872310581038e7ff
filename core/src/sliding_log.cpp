#include "sliding_log.h"

#include <algorithm>

#include "drl/config.h"
#include "drl/engine.h"
#include "sort.h"

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
    index_pop_front();
    grants_.pop_front();
  }
  return dropped;
}

// ---- the block index ---------------------------------------------------------

void SlidingLog::indexed(size_t i, int64_t delta) {
  if (index_stale_) return;
  const uint64_t block = (base_ + i) / kBlock - base_ / kBlock;
  const size_t blocks = sums_.size();
  if (block + 1 == blocks) {  // the newest block (a take): no later sum to carry it
    sums_.back() += delta;
    return;
  }
  while (sums_.size() <= block) sums_.push_back(sums_.empty() ? gone_ : sums_.back());
  for (size_t b = static_cast<size_t>(block); b < sums_.size(); ++b) sums_[b] += delta;
}

// Before grants_.pop_front(): the front grant expires (or was merged forward).
void SlidingLog::index_pop_front() {
  if (index_stale_) return;
  gone_ += grants_.front().amount;
  ++base_;
  if (base_ % kBlock == 0) sums_.pop_front();  // its last grant is gone
}

void SlidingLog::rebuild_index() const {
  sums_.clear();
  sums_.reserve(grants_.size() / kBlock + 1);
  gone_ = 0;
  base_ = 0;
  int64_t running = 0;
  for (size_t i = 0; i < grants_.size(); ++i) {
    running += grants_[i].amount;
    if (i % kBlock == 0) sums_.push_back(0);
    sums_.back() = running;
  }
  index_stale_ = false;
}

int64_t SlidingLog::prefix(size_t count) const {
  if (index_stale_) rebuild_index();
  // Whole blocks by their running sum, then the grants of the block `count` ends in.
  const uint64_t first = base_ / kBlock;
  const uint64_t end_block = (base_ + count) / kBlock - first;  // the block holding grant `count`
  if (end_block == 0) {
    int64_t total = 0;
    for (size_t i = 0; i < count; ++i) total += grants_[i].amount;
    return total;
  }
  int64_t total = through(static_cast<size_t>(end_block - 1));
  for (size_t i = static_cast<size_t>((first + end_block) * kBlock - base_); i < count; ++i) total += grants_[i].amount;
  return total;
}

size_t SlidingLog::reaching(int64_t units) const {
  if (index_stale_) rebuild_index();
  // The first block whose running sum reaches `units`, then a walk inside it.
  size_t lo = 0;
  size_t hi = sums_.size();
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    if (through(mid) >= units) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  size_t i = 0;
  if (lo > 0) {
    units -= through(lo - 1);
    i = static_cast<size_t>((base_ / kBlock + lo) * kBlock - base_);
  }
  for (; i < grants_.size(); ++i) {
    units -= grants_[i].amount;
    if (units <= 0) return i;
  }
  return grants_.size();
}

Grant SlidingLog::take(int64_t amount, int64_t window, int64_t now, int64_t max_entries) {
  // A window no longer than its cap dates at `now` itself: skip the
  // divisions, which on x86 cost more than the rest of the take.
  int64_t at = now;
  if (window > max_entries) {
    const int64_t q = grid_step_ms(window, max_entries);
    at = (now + q - 1) / q * q;
  }
  // After a reconfigure to a finer grid, or a lift floor dated in the future,
  // the newest grant can be later than `at`: join it rather than go back.
  if (!grants_.empty() && grants_.back().at >= at) {
    grants_.back().amount += amount;
  } else {
    grants_.push_back(Grant{at, amount});
  }
  sum_ += amount;
  indexed(grants_.size() - 1, amount);
  return grants_.back();
}

Grant SlidingLog::take_at(int64_t amount, int64_t at) {
  sum_ += amount;
  if (grants_.empty() || grants_.back().at < at) {
    grants_.push_back(Grant{at, amount});
    indexed(grants_.size() - 1, amount);
    return grants_.back();
  }
  const size_t i = lower_bound(at);
  if (grants_[i].at == at) {
    grants_[i].amount += amount;
    indexed(i, amount);
    return grants_[i];
  }
  grants_.insert(i, Grant{at, amount});
  index_stale_ = true;  // every later grant moved up one
  return grants_[i];
}

int64_t SlidingLog::fits_at(int64_t amount, int64_t limit, int64_t window, int64_t now) const {
  int64_t excess = sum_ + amount - limit;
  if (excess <= 0) return now;
  // The common case (a take at the head of the queue) needs a few of the
  // oldest grants to expire: walk them. Deeper, use the block index.
  constexpr size_t kWalk = 32;
  const size_t walk = std::min(kWalk, grants_.size());
  for (size_t i = 0; i < walk; ++i) {
    excess -= grants_[i].amount;
    if (excess <= 0) return grants_[i].at + window;
  }
  if (walk == grants_.size()) return grants_.empty() ? now : grants_.back().at + window;
  const size_t i = reaching(sum_ + amount - limit);
  // Past the end only when amount > limit, which callers reject up front.
  return i < grants_.size() ? grants_[i].at + window : grants_.back().at + window;
}

int64_t SlidingLog::live_at(int64_t window, int64_t t) const {
  // Grants dated at or before t - window have left the window by t.
  return sum_ - prefix(lower_bound(t - window + 1));
}

size_t SlidingLog::lower_bound(int64_t at) const {
  return grants_.partition_point([at](const auto& grant) { return grant.at < at; });
}

size_t SlidingLog::first_at_or_after(int64_t at) const {
  // The newest few grants first: a refund is nearly always of the take
  // its call just made, and the rewrite of its row comes with the next
  // take (one grant later), so both are found without a search.
  constexpr size_t kNewest = 4;
  const size_t n = grants_.size();
  for (size_t i = n; i > 0 && i + kNewest > n; --i) {
    if (grants_[i - 1].at < at) return i;
  }
  if (n <= kNewest) return 0;
  return lower_bound(at);
}

const Grant* SlidingLog::find(int64_t at) const {
  const size_t i = first_at_or_after(at);
  return i < grants_.size() && grants_[i].at == at ? &grants_[i] : nullptr;
}

std::optional<Grant> SlidingLog::shrink(int64_t at, int64_t amount) {
  const size_t i = first_at_or_after(at);
  if (i == grants_.size() || grants_[i].at != at) return std::nullopt;
  Grant& g = grants_[i];
  const int64_t back = std::min(amount, g.amount);
  g.amount -= back;
  sum_ -= back;
  const Grant now = g;
  if (now.amount == 0) {
    grants_.erase(i);
    index_stale_ = true;  // every later grant moved down one
  } else {
    indexed(i, -back);
  }
  return now;
}

std::pair<int64_t, Grant> SlidingLog::merge_oldest() {
  const Grant oldest = grants_.front();
  // The amount moves to the next grant and the emptied front leaves: every
  // running sum from the next grant's block on counts both grants already,
  // and the front's block, if the next grant starts a new one, leaves with it.
  grants_.front().amount = 0;
  index_pop_front();
  grants_.pop_front();
  grants_.front().amount += oldest.amount;
  return {oldest.at, grants_.front()};
}

void SlidingLog::size_for(int64_t max_entries) {
  // One over the cap: a take may add an entry before the oldest are merged.
  const auto entries = static_cast<size_t>(max_entries) + 1;
  grants_.grow_to(entries);
  sums_.grow_to(entries / kBlock + 2);
}

void SlidingLog::replace(Grant grant) {
  clear();
  if (grant.amount > 0) push_back(grant);
}

void SlidingLog::clear() {
  grants_.clear();
  sum_ = 0;
  unordered_ = false;
  sums_.clear();
  gone_ = 0;
  base_ = 0;
  index_stale_ = false;
}

bool SlidingLog::ordered() const { return !unordered_; }

bool SlidingLog::normalise() {
  if (!unordered_) return false;
  // In place: a second copy of a large log is the memory we must not spend.
  grants_.linearise();
  // Beside it only an index of 4 bytes a grant (sort.h); equal times are
  // folded together below, in whatever order they come.
  sort_stable(grants_.data(), grants_.data() + grants_.size(),
              [](const Grant& a, const Grant& b) { return a.at < b.at; });
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
  grants_.truncate(kept);
  sum_ = 0;
  for (const Grant& g : grants_) sum_ += g.amount;
  unordered_ = false;
  index_stale_ = true;
  return merged;  // order alone changes no stored row
}

void SlidingLog::push_back(Grant grant) {
  if (!grants_.empty() && grants_.back().at >= grant.at) unordered_ = true;
  grants_.push_back(grant);
  sum_ += grant.amount;
  // Built once when first searched: an index growing beside the log would
  // sit above it in memory, and the log could not grow in place.
  index_stale_ = true;
}

}  // namespace drl::internal
