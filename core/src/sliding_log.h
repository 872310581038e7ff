// The sliding log: one window's grants, ordered by time, with a running sum.
// Internal to the engine; the rules it implements are in docs/architecture.md,
// "The engine's rules". As in the engine's API, the time a call is about comes
// last.
//
// Contract:
// - A grant dated `at` counts in the window until `at + window`: prune()
//   drops the grants whose time has come, live_at() sums those still
//   counting at a time. used() is the sum of the grants held.
// - take() dates a grant on the window's grid (drl::grid_step_ms), rounded
//   up, and never before the newest grant (it then joins it), so the log
//   stays ordered; take_at() inserts at an exact, possibly older, time.
// - fits_at() is exact for a pruned log: the earliest time at or after
//   `now` at which `amount` more fits under `limit`, if nothing else is
//   taken meanwhile.
// - shrink() and merge_oldest() only lower a window's count or date a grant
//   later: the safe side for a limit.
//
// Example:
//   drl::internal::SlidingLog log;
//   log.take(3, /*window=*/1000, /*now=*/100);
//   log.take(2, 1000, 400);
//   assert(log.used() == 5);
//   assert(log.fits_at(/*amount=*/1, /*limit=*/5, 1000, /*now=*/500) == 1100);  // when the first 3 leave
//   assert(log.live_at(1000, 1100) == 2);
//   assert(log.prune(1000, 1100) == std::optional<int64_t>(100));  // the newest row to delete
//   assert(log.used() == 2);
//   assert(log.shrink(/*at=*/400, 1)->amount == 1);  // a refund of the grant dated 400
#pragma once

#include <cstdint>
#include <optional>
#include <utility>

#include "drl/engine.h"
#include "ring.h"

namespace drl::internal {

struct Grant {
  int64_t at;
  int64_t amount;
};

class SlidingLog {
 public:
  // Drops grants no longer live at `now` (at + window <= now). Returns the
  // newest dropped `at`, so storage can delete every row up to it at once.
  std::optional<int64_t> prune(int64_t window, int64_t now);

  // Records a take at `now`, on the window's grid (drl::grid_step_ms), never
  // dated before the newest grant. Returns the row to upsert.
  // `max_entries` is the log's cap (kMaxLogEntries, or kMaxExtraLogEntries).
  Grant take(int64_t amount, int64_t window, int64_t now, int64_t max_entries = kMaxLogEntries);

  // The earliest time >= now at which a take of `amount` fits under `limit`,
  // assuming the log was pruned at `now`. Exact: walks the oldest grants
  // until enough of them expire; past a few dozen it binary-searches the
  // running sums of blocks of grants, so a take that needs most of a full
  // log to expire (a prediction deep in the queue) costs
  // O(log(size / kBlock) + kBlock).
  int64_t fits_at(int64_t amount, int64_t limit, int64_t window, int64_t now) const;

  // Sum of grants still live at `t` (at + window > t): binary searches by
  // time and by the block sums.
  int64_t live_at(int64_t window, int64_t t) const;

  // Records `amount` dated exactly `at`, which may be older than the newest
  // grant (an observed grant dated to leave the window at the upstream's
  // reset): added to the grant of that time, or inserted in order. Returns
  // the row to upsert.
  Grant take_at(int64_t amount, int64_t at);

  // Takes up to `amount` back from the grant dated exactly `at` (never below
  // zero; a grant that reaches zero is removed). Returns the grant as it now
  // stands, or nullopt when no grant is dated `at`.
  std::optional<Grant> shrink(int64_t at, int64_t amount);

  // Merges the oldest grant into the next one (dating it later, the safe
  // side). Returns {deleted at, updated grant}.
  std::pair<int64_t, Grant> merge_oldest();

  // Sorts by time and folds same-time grants together (restore only).
  // Returns whether rows were folded (sorting alone changes no stored row).
  bool normalise();
  // Whether grants are strictly increasing in time (cheap: checks the tail).
  bool ordered() const;

  // Sizes the log's arrays for at most `max_entries` grants (its cap), so a
  // full log does not hold half as much again in spare room.
  void size_for(int64_t max_entries);

  void replace(Grant grant);
  void clear();
  void push_back(Grant grant);  // restore only: caller keeps order

  // The grant dated exactly `at`, or nullptr.
  const Grant* find(int64_t at) const;

  int64_t used() const { return sum_; }
  size_t size() const { return grants_.size(); }
  bool empty() const { return grants_.empty(); }
  const Grant& newest() const { return grants_.back(); }
  const Ring<Grant>& grants() const { return grants_; }

  // Grants per block of the index below.
  static constexpr uint64_t kBlock = 64;

 private:
  // The index of the first grant dated `at` or later (size() if none).
  size_t first_at_or_after(int64_t at) const;
  // The same by binary search alone.
  size_t lower_bound(int64_t at) const;
  // The sum of the first `count` grants.
  int64_t prefix(size_t count) const;
  // The index of the first grant at which the oldest grants' running sum
  // reaches `units` (> 0), or size() if the whole log holds less.
  size_t reaching(int64_t units) const;
  // Block index upkeep: grant `i` (an index into grants_) changed by `delta`.
  void indexed(size_t i, int64_t delta);
  void index_pop_front();
  void rebuild_index() const;
  // The running sum through the end of block `b` (an index into sums_), less
  // what has left from the front: the live units in blocks 0..b.
  int64_t through(size_t b) const { return sums_[b] - gone_; }

  Ring<Grant> grants_;
  int64_t sum_ = 0;
  bool unordered_ = false;  // set by push_back when a grant is not later than the last
  // The block index. Grants are numbered from when the index was last
  // built (grant i of grants_ is number base_ + i, in block
  // (base_ + i) / kBlock; sums_[0] is block base_ / kBlock). sums_[b] is the
  // running sum of every grant numbered up to the end of block b, those
  // already expired included, and gone_ is the sum of the expired ones, so
  // the live units up to a block end are sums_[b] - gone_: nondecreasing in
  // b, so searchable. 16 KiB for a full log. Appends, expiries and merges at
  // the front cost O(1); a partial refund O(blocks after it); an erase from
  // the middle (a refund to zero) or a sort marks it stale, and the next
  // search that needs it rebuilds it.
  mutable Ring<int64_t> sums_;
  mutable int64_t gone_ = 0;
  mutable uint64_t base_ = 0;
  mutable bool index_stale_ = false;
};

}  // namespace drl::internal
