// A bucket's recent history: per-interval counts of what happened, at two
// resolutions (10 s intervals kept an hour, 60 s intervals kept a day), in
// fixed rings, so a bucket's history costs the same memory after a minute as
// after a month and an event costs a few increments, never an allocation.
//
// The engine calls the hooks at its events and advance(now) first in every
// step; an interval closes lazily, at the first event after it ends. Closed
// intervals keep their counts and the p50, p95 and max of their waits; only
// the two open intervals keep a histogram of waits.
//
// Contract:
// - Every hook counts in both open intervals (10 s and 60 s). advance(now)
//   closes every interval that ended by `now`; the intervals in a gap
//   without events keep the queued and running levels the last event left.
// - Memory is fixed: each resolution keeps its ring (an hour of 10 s, a day
//   of 60 s), the oldest overwritten.
// - unsaved() hands out each closed, non-empty interval once, oldest first,
//   until mark_unsaved() says storage may have lost them; closed_fine()
//   does the same for the 10 s intervals, for an export.
// - A wait percentile is at most 1/32 below the true value, never above.
//
// Example:
//   drl::internal::History history;
//   history.advance(/*now=*/1'000);
//   history.arrived();
//   history.started(/*wait=*/40);
//   history.completed();
//   history.advance(12'000);  // the 10 s interval [0, 10 s) closes
//   const std::vector<drl::HistoryRow> rows = history.unsaved({""});
//   assert(rows.size() == 1);
//   assert(rows[0].resolution_ms == 10'000);
//   assert(rows[0].at == 0);
//   assert(history.unsaved({""}).empty());  // handed out once
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "drl/config.h"
#include "drl/engine.h"
#include "drl/error.h"

namespace drl::internal {

using HistoryMillis = int64_t;

// Waits, in ms, on a log-linear grid: exact below 64 ms, then 32 cells per
// power of two, so a percentile read from it is at most 1/32 (about 3%)
// below the true value, never above. Waits beyond 2^47 ms (4,000 years)
// share the last cell.
class WaitHistogram {
 public:
  static constexpr int kExact = 64;
  static constexpr int kCellsPerOctave = 32;
  static constexpr int kTopOctave = 47;
  static constexpr int kCells = kExact + (kTopOctave - 6 + 1) * kCellsPerOctave;

  void add(HistoryMillis wait);
  void clear();
  uint64_t count() const { return count_; }
  HistoryMillis max() const { return max_; }
  // The nearest-rank percentile (the smallest recorded value with at least
  // p percent of the waits at or below it), as its cell's lower bound.
  HistoryMillis percentile(double p) const;

  static int cell(HistoryMillis wait);
  static HistoryMillis lower_bound(int cell);

 private:
  std::array<uint32_t, kCells> cells_{};
  uint64_t count_ = 0;
  HistoryMillis max_ = 0;
};

// One interval's aggregates, as kept in the ring (fixed size).
struct HistoryInterval {
  // A window's net units, by its number (Engine::window_name names it): one
  // slot per window a config can have. (A reconfigure that swaps windows
  // within an interval can name more; those go uncounted there.)
  static constexpr size_t kUnitSlots = kMaxWindows;

  HistoryMillis at = -1;  // the interval's start; -1: the slot holds nothing
  uint32_t arrived = 0, started = 0, completed = 0, failed = 0, rate_limited = 0, dropped = 0, deadline = 0;
  uint32_t queued = 0, running = 0;                         // at the end of the interval
  HistoryMillis wait_p50 = 0, wait_p95 = 0, wait_max = -1;  // wait_max -1: nothing started
  std::array<int64_t, kUnitSlots> units{};
  std::array<int16_t, kUnitSlots> unit_windows{};  // the window number of units[i]
  uint8_t n_units = 0;

  bool empty() const;
  void charge(int window, int64_t amount);
};

using HistoryRecord = drl::HistoryRow;

class History {
 public:
  static constexpr HistoryMillis kFineMs = 10'000;
  static constexpr size_t kFineKept = 360;  // an hour
  static constexpr HistoryMillis kCoarseMs = 60'000;
  static constexpr size_t kCoarseKept = 1440;  // a day

  // Whether unsaved() (closed_fine()) has anything to look at: some
  // interval closed since its last call. O(1).
  bool any_unsaved() const;
  bool any_closed_fine() const;

  // Closes every interval that ended by `now` (at most a ring's worth).
  void advance(HistoryMillis now);
  // Queued and running as the event that just ended left them: what an
  // interval that closes before the next event ends with.
  void hold(size_t queued, size_t running);

  // ---- the hooks, at the events --------------------------------------------
  void arrived();
  void started(HistoryMillis wait);
  void completed();
  void rejected(ErrorCode code);  // classed as failed, dropped or deadline
  void rate_limited();
  void charge(int window, int64_t amount);

  // {"resolutionMs":..,"intervals":[..],"current":{..}}; names[key] is a
  // window's name. `resolution_ms` is kFineMs or kCoarseMs.
  std::string json(HistoryMillis resolution_ms, const std::vector<std::string>& names) const;
  // Closed, non-empty intervals not yet handed out by this call, oldest
  // first; they count as stored from now on.
  std::vector<HistoryRecord> unsaved(const std::vector<std::string>& names);
  // The oldest interval start a resolution keeps: rows dated before it are
  // past retention.
  HistoryMillis keep_from(HistoryMillis resolution_ms) const;
  // Closed 10 s intervals not yet handed out by this call (for an export).
  std::vector<HistoryRecord> closed_fine(const std::vector<std::string>& names);
  // Puts stored rows back (a cold start): unreadable rows, rows past
  // retention and rows not before the open interval are skipped. Restored
  // rows count as stored and as exported. number_of maps a window name to its
  // write number.
  void restore(const std::vector<HistoryRecord>& rows, const std::function<int(const std::string&)>& number_of);
  // Everything closed counts as not stored (storage may have lost it).
  void mark_unsaved();
  void clear();

 private:
  struct Ring {
    Ring(HistoryMillis resolution, size_t count) : resolution_ms(resolution), kept(count) {}
    HistoryMillis resolution_ms;
    size_t kept;
    std::vector<HistoryInterval> slots;  // allocated on the first close
    HistoryInterval open;                // open.at -1: no event seen yet
    WaitHistogram waits;
    HistoryMillis saved_through = -1;     // the newest start handed to unsaved()
    HistoryMillis exported_through = -1;  // the newest start handed to closed_fine()

    HistoryInterval* slot(HistoryMillis at);
    const HistoryInterval* find(HistoryMillis at) const;
    void close(uint32_t queued, uint32_t running);
    void advance(HistoryMillis now, uint32_t queued, uint32_t running);
    std::vector<HistoryRecord> since(HistoryMillis& through, const std::vector<std::string>& names) const;
  };
  Ring& ring(HistoryMillis resolution_ms);
  const Ring* find_ring(HistoryMillis resolution_ms) const;

  Ring fine_{kFineMs, kFineKept};
  Ring coarse_{kCoarseMs, kCoarseKept};
  uint32_t queued_ = 0, running_ = 0;
};

// An interval as JSON (the "intervals" entries of History::json).
std::string history_interval_json(const HistoryInterval& interval, const std::vector<std::string>& names);

}  // namespace drl::internal
