// The row writer: what a step stores (the writes the host commits, in
// order) and the grant rows owed to a later step.
//
// Contract:
// - put() appends a write. writes_beyond_expiries() is true once the step writes
//   something other than an expiry (DeleteGrantsThrough): rows owed may
//   then ride on its commit for free. expiring() is true once it expires
//   rows. clear() starts the next step's output.
// - owe(window, at) notes that the row of window `window` at time `at` no longer
//   holds what the log holds (a refund lowered it; `moved`: a take was dated
//   later, and its new row is not yet stored). A lowered row only
//   over-counts until it is rewritten, the safe side; a moved take's row
//   must be stored before its old row expires, so expiring() forces it.
// - step() writes the rows owed when the step stores anyway, when a moved
//   take's row meets an expiry, or once `quiet_ms` have passed since the
//   first step that left them unwritten (owed_due()): a steady caller's
//   refunds ride on its next take instead of a commit of their own.
// - rewrite() writes each row as the logs hold it now: its amount, or a
//   delete when the grant is gone (refunded to zero, merged away, expired;
//   `expired_stay`: an expired row is left for the batched expiry).
//
// Example:
//   drl::internal::Windows windows;  // one window: 10 per 1000 ms
//   drl::Config config;
//   config.bucket.limit_per_window = 10;
//   config.bucket.window_ms = 1000;
//   windows.configure(config);
//   windows[0].log.take(3, 1000, /*now=*/100);
//   windows[0].log.shrink(100, 1);  // a usage report refunded 1
//   drl::internal::RowWriter rows;
//   rows.owe(0, 100);
//   rows.step(windows, /*now=*/100, /*quiet_ms=*/50);  // nothing else to store: it waits
//   assert(rows.writes().empty());
//   assert(rows.owed_due() == 150);
//   rows.step(windows, 150, 50);  // quiet long enough: written alone
//   assert(rows.writes().size() == 1);
//   assert(rows.writes()[0].kind == drl::WriteKind::PutGrant);
//   assert(rows.writes()[0].amount == 2);
//   assert(!rows.owes());
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "drl/engine.h"
#include "windows.h"

namespace drl::internal {

class RowWriter {
 public:
  // ---- this step's writes ---------------------------------------------------
  void put(WriteKind kind, Millis at = 0, int64_t amount = 0, int window = 0) {
    if (kind == WriteKind::PutGrant && at > newest_row_) newest_row_ = at;
    if (kind == WriteKind::DeleteGrantsThrough) ++expiries_;
    // Filled in place: a Write built on the stack and copied in costs two
    // store-forwarding stalls per row (GCC reloads it 16 bytes at a time),
    // about a third of a take's cost per window.
    Write& w = writes_.emplace_back();
    w.kind = kind;
    w.at = at;
    w.amount = amount;
    w.window = window;
  }
  // A record that is not a grant row (the penalty, its lift).
  void put(const Write& w) { writes_.push_back(w); }
  const std::vector<Write>& writes() const { return writes_; }
  bool writes_beyond_expiries() const { return writes_.size() > expiries_; }
  bool expiring() const { return expiries_ > 0; }
  void clear() {
    writes_.clear();
    expiries_ = 0;
  }
  // The latest date of any grant row written so far (the release mark's
  // question: has a row been stored past the mark in storage?).
  Millis newest_row() const { return newest_row_; }

  // ---- rows owed -------------------------------------------------------------
  void owe(int window, Millis at, bool moved = false) {
    owed_.emplace_back(window, at);
    moved_ = moved_ || moved;
  }
  bool owes() const { return !owed_.empty(); }
  size_t owed() const { return owed_.size(); }
  // When the rows owed are written alone if nothing stores before.
  std::optional<Millis> owed_due() const { return due_; }
  // Puts that off to `t` at the earliest (a reservation in force: its
  // caller's pace keeps the rows riding on its starts).
  void defer_to(Millis t) {
    if (due_ && *due_ < t) due_ = t;
  }
  // Every row will be rewritten anyway (a lift, an erase): nothing is owed.
  void forget_owed();
  // At the end of a step (see the contract).
  void step(const Windows& windows, Millis now, Millis quiet_ms);
  // Writes every row owed now.
  void flush(const Windows& windows, Millis now);

  template <typename Rows>
  void rewrite(const Rows& rows, const Windows& windows, Millis now, bool expired_stay) {
    for (const auto& [window, at] : rows) rewrite_row(window, at, windows, now, expired_stay);
  }

 private:
  void rewrite_row(int window, Millis at, const Windows& windows, Millis now, bool expired_stay);

  std::vector<Write> writes_;
  size_t expiries_ = 0;  // writes_ that are DeleteGrantsThrough
  Millis newest_row_ = 0;
  std::vector<std::pair<int, Millis>> owed_;  // (window number, time)
  std::optional<Millis> due_;
  bool moved_ = false;  // owed_ holds a take moved to a later date
};

}  // namespace drl::internal
