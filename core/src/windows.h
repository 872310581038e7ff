// A bucket's windows: each one's limit, span and sliding log, and the two
// append-only name tables they are numbered by (window names, whose numbers
// key their stored rows; unit names, the units costs and usages count in).
//
// Contract:
// - windows()[0] is the primary (the config's bucket, number 0); the rest
//   are the config's `windows`, in its order. Empty when unconfigured.
// - Window and unit numbers are handed out once and never reused or
//   renumbered: a stored row, a call's take and a history interval name a
//   window by number, a call's cost a unit by number, across any reconfigure.
// - configure() keeps a window's log across a reconfigure when the new
//   config has a window of the same name counting the same unit (the primary
//   always keeps its own); any other window starts empty with a new
//   incarnation, and the numbers of the windows that went are returned, for
//   their rows to be deleted.
// - counted() lists each unit some window counts once, in window order, so
//   an arrival resolves a unit name without allocating.
//
// Example:
//   drl::Config config;
//   config.bucket.limit_per_window = 10;
//   config.bucket.window_ms = 1000;
//   config.windows.push_back(drl::WindowConfig{"tpm", "tokens", 500, 60000});
//   drl::internal::Windows windows;
//   assert(windows.configure(config).empty());
//   assert(windows.size() == 2);
//   assert(windows[1].number == 1);
//   assert(windows.unit_list() == "requests, tokens");
//   const int tokens = windows.counted_unit("tokens");
//   drl::internal::Call c;
//   c.set_cost(tokens, 501);
//   assert(windows.too_large(c) == &windows[1]);
//   windows[1].log.take(5, 60000, 100);
//   config.windows[0].limit_per_window = 600;
//   assert(windows.configure(config).empty());
//   assert(windows[1].log.used() == 5);  // same name, same unit: the log stays
//   config.windows.clear();
//   assert(windows.configure(config) == std::vector<int>{1});  // its rows go
//   assert(windows.counted_unit("tokens") == -1);
//   assert(windows.number_of("tpm") == 1);  // a name keeps its number
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "call.h"
#include "drl/config.h"
#include "drl/engine.h"
#include "sliding_log.h"

namespace drl::internal {

// One window of a bucket: at most `limit` of `unit` granted in any `ms`.
struct Window {
  std::string name;
  int number = 0;  // its number in writes (Windows::names); 0 for the primary
  int unit = 0;    // its unit's number (Windows::units)
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

class Windows {
 public:
  // The windows of `config` (see the contract); returns the numbers of the
  // windows it no longer has.
  std::vector<int> configure(const Config& config);
  // Unconfigured (erased): no windows. Names keep their numbers.
  void clear();

  size_t size() const { return windows_.size(); }
  bool empty() const { return windows_.empty(); }
  Window& operator[](size_t i) { return windows_[i]; }
  const Window& operator[](size_t i) const { return windows_[i]; }
  Window& primary() { return windows_[0]; }
  const Window& primary() const { return windows_[0]; }
  std::vector<Window>::iterator begin() { return windows_.begin(); }
  std::vector<Window>::iterator end() { return windows_.end(); }
  std::vector<Window>::const_iterator begin() const { return windows_.begin(); }
  std::vector<Window>::const_iterator end() const { return windows_.end(); }
  const std::vector<Window>& list() const { return windows_; }

  // The window numbered `number`; nullptr when none has it now.
  Window* by_number(int number);
  const Window* by_number(int number) const;
  // The first window whose limit the call's cost exceeds, if any.
  const Window* too_large(const Call& c) const;
  // A new log epoch (Window::epoch), for a log replaced whole.
  uint64_t new_epoch() { return next_epoch_++; }

  // ---- names ---------------------------------------------------------------

  // The number of window `name`, handed out if new (0 is the primary).
  int number_of(const std::string& name);
  // Window names by number.
  const std::vector<std::string>& names() const { return names_; }
  // The number of unit `name`, handed out if new.
  int unit_index(const std::string& name);
  const std::vector<std::string>& units() const { return units_; }
  const std::string& unit_name(int unit) const { return units_[static_cast<size_t>(unit)]; }
  // The unit's number if some window counts it, else -1.
  int counted_unit(std::string_view name) const;
  // Whether some window counts unit number `unit`.
  bool counts(int unit) const {
    for (const int u : counted_) {
      if (u == unit) return true;
    }
    return false;
  }
  // The numbers of the units the windows count, each once.
  const std::vector<int>& counted() const { return counted_; }
  // Their names, the primary's unit first (stats' `units`).
  std::vector<std::string> counted_units() const;
  // "requests, tokens": the same, for messages.
  std::string unit_list() const;

 private:
  std::vector<Window> windows_;
  std::vector<std::string> names_{""};
  std::vector<std::string> units_;
  std::vector<int> counted_;
  uint64_t next_epoch_ = 1;
};

}  // namespace drl::internal
