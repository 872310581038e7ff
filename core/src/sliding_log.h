// The sliding log: grants ordered by time with a running sum.
// Internal to the engine; the rules it implements are in DESIGN §2. As in the
// engine's API, the time a call is about comes last.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>

#include "drl/engine.h"

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
  // until enough of them expire, so its cost is bounded by `amount`, not by
  // the size of the log.
  int64_t fits_at(int64_t amount, int64_t limit, int64_t window, int64_t now) const;

  // Sum of grants still live at `t` (at + window > t).
  int64_t live_at(int64_t window, int64_t t) const;

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

  void replace(Grant grant);
  void clear();
  void push_back(Grant grant);  // restore only: caller keeps order

  int64_t used() const { return sum_; }
  size_t size() const { return grants_.size(); }
  bool empty() const { return grants_.empty(); }
  const Grant& newest() const { return grants_.back(); }
  const std::deque<Grant>& grants() const { return grants_; }

 private:
  std::deque<Grant> grants_;
  int64_t sum_ = 0;
  bool unordered_ = false;  // set by push_back when a grant is not later than the last
};

}  // namespace drl::internal
