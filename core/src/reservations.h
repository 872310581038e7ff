// Covering reservations: a stored record of units per window that a
// restore counts as taken in full, so that takes it covers may be admitted
// without writing their rows first (a sequential caller meets one commit
// every few dozen calls instead of one per call). The bounds it keeps are
// stated at kReserveSpanMs in drl/engine.h.
//
// Contract:
// - covers() admits a take only while the record in force is unexpired and
//   has room for it in every window it takes in; the logs still decide the
//   admission itself: the record only defers rows.
// - A take it covered is owed: its row (owed_rows()) is written with the
//   record that replaces this one, in the same step, never under another
//   record (a restore would count it twice).
// - step() says, at the end of a step, whether to write a new record and
//   whether to keep one: a step that stores anyway carries it; it is renewed
//   ahead of need (half its units or half its span used) in the step after
//   the take that found it due; it is cleared once no take came for
//   idle_ms().
// - The scheduler writes the rows, then calls replace(), which sizes the
//   next record from the rate seen since the last one.
//
// Example:
//   std::vector<drl::internal::Window> windows(1);
//   windows[0].limit = 100;
//   windows[0].ms = 60000;
//   drl::internal::Reservations r;
//   r.set_on(true);
//   for (drl::Millis t : {0, 100}) {  // two takes 100 ms apart: a run
//     r.noted_take(0, 1);
//     r.noted_start(t);
//   }
//   assert(r.step(100, /*stores=*/true) == std::optional<bool>(true));  // written, kept
//   r.replace(true, windows, 100);
//   assert(r.record()->units_in(0) == 25);  // a quarter of the limit at most
//   drl::internal::Call c;
//   c.set_cost(0, 1);
//   assert(r.covers(c, windows, 101));
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "call.h"
#include "drl/engine.h"
#include "json.h"
#include "windows.h"

namespace drl::internal {

// The shortest window a record is written for: a bucket with a shorter one
// expires each take before most callers' next call (a round trip away), so
// its rows are mostly never written anyway; it writes every take, as with
// reservations off.
constexpr Millis kMinReserveWindowMs = 10;

// A record: until when it covers takes, and how many units per window.
struct Reservation {
  Millis until = 0;
  Millis span = kReserveSpanMs;                // how long it covers takes from when it was written
  std::vector<std::pair<int, int64_t>> units;  // by window number; only windows with units > 0
  int64_t units_in(int window) const {
    for (const auto& [k, n] : units) {
      if (k == window) return n;
    }
    return 0;
  }
};

class Reservations {
 public:
  bool on() const { return on_; }
  void set_on(bool on) { on_ = on; }
  const std::optional<Reservation>& record() const { return record_; }

  // Whether every take of `c` fits in the record in force (see the contract).
  bool covers(const Call& c, const std::vector<Window>& windows, Millis now) const;
  // A take the record covered: its row at `at` in window `window` is owed.
  void took_unwritten(int window, Millis at, int64_t amount);
  // Every take, covered or not (for sizing): after noted_take for each of a
  // call's windows, noted_start once.
  void noted_take(int window, int64_t amount);
  void noted_start(Millis now);
  // How long without a take before the record is cleared: twice the run's
  // pace, at least kIdleSlotsWriteMs.
  Millis idle_ms() const;

  // At the end of a step: nullopt, nothing to write; else write a record,
  // kept (true) or cleared (false). `stores`: the step stores anyway.
  std::optional<bool> step(Millis now, bool stores);
  // After step() (and any write): drops timers a cleared record left.
  void settle(Millis now);
  // The rows owed, (window number, date): rewrite them before replace().
  const std::set<std::pair<int, Millis>>& owed_rows() const { return owed_; }
  // The new record (`keep`: sized to the recent rate; else none). True if
  // a record must be stored (PutReservation): one was or now is in force.
  bool replace(bool keep, const std::vector<Window>& windows, Millis now);
  // When to wake for it: a renewal at once, or the clearing.
  std::optional<Millis> wake(Millis now) const;

  // The record as stored ("" when none), and for stats (null when none).
  std::string text(const std::vector<Window>& windows) const;
  void write_stats(json::Writer& out, const std::vector<Window>& windows) const;
  // A stored record, read for a restore (see reservations.cpp).
  static Reservation read(std::string_view text, const std::vector<Window>& windows, Millis now);
  // A restore kept `r` in force; its units in window `window` are owed at `at`.
  void owe_restored(int window, Millis at, int64_t units);
  void restored(Reservation r, Millis now);

  // Units taken under the record in force whose rows are not yet written.
  int64_t unwritten_in(int window) const;
  // A lift rewrites every log whole: nothing is owed any more.
  void lifted();
  // Reservations were switched off (after the last record was cleared).
  void switched_off() { due_.reset(); }
  // The bucket was erased (with the record): everything goes.
  void erase();

  // The most a record holds in a window of `limit`: ceil(limit / kReserveFractionDenominator).
  static int64_t cap(int64_t limit);

 private:
  bool renewal_due(Millis now) const;
  Millis span() const;
  std::optional<Reservation> sized(const std::vector<Window>& windows, Millis now);

  bool on_ = false;
  std::optional<Reservation> record_;      // as last written (or restored)
  std::map<int, int64_t> unwritten_;       // what takes made under it hold, by window number
  std::set<std::pair<int, Millis>> owed_;  // rows whose stored amount is behind the log
  // For sizing the next record: units taken per window since the record was
  // last written, the last take's amount, and when.
  std::map<int, int64_t> taken_since_;
  std::map<int, int64_t> last_take_;
  std::optional<Millis> last_take_at_;
  bool in_run_ = false;  // the last take came within kReserveRunGapMs of the one before it
  Millis last_gap_ = 0;  // the time between the last two takes of a run
  Millis written_at_ = 0;
  // When the record in force is cleared if no take comes first: the last
  // take (or the restore that kept a record) + idle_ms().
  std::optional<Millis> due_;
  // A take the record covered found a renewal due: it is written in the
  // next step (woken for at once), not in the take's own, so the callback
  // the take starts is not held behind the commit.
  bool renewal_pending_ = false;
};

}  // namespace drl::internal
