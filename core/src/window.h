// One window of a bucket and its sliding log. Plain data: the scheduler
// (scheduler.h) builds the windows from a config, and takes, refunds and
// expires grants in their logs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "drl/engine.h"
#include "sliding_log.h"

namespace drl::internal {

// One window of a bucket: at most `limit` of `unit` granted in any `ms`.
// windows[0] is the primary (the config's bucket); the rest are the
// config's `windows`, by name.
struct Window {
  std::string name;
  int key = 0;   // its number in writes (Scheduler::keys); 0 for the primary
  int unit = 0;  // index in Scheduler::units
  int64_t limit = 0;
  int64_t ms = 0;
  // Changes whenever the log is replaced (a penalty's lift): a take from an
  // older log is not refunded there (the safe side).
  uint64_t epoch = 0;
  // Set when the window is created, kept while a reconfigure carries it: a
  // window of the same name created later (removed and added again, or
  // counting another unit) holds none of an older take's reservation.
  uint64_t incarnation = 0;
  int64_t cap = kMaxLogEntries;  // the most log entries: kMaxExtraLogEntries for an extra window
  SlidingLog log;
  // What the upstream's headers last said about this window (learn), for stats.
  struct Learned {
    std::optional<int64_t> limit;
    std::optional<int64_t> remaining;
    std::optional<int64_t> reset_at;
    Millis seen_at = 0;
  };
  std::optional<Learned> learned;
};

}  // namespace drl::internal
