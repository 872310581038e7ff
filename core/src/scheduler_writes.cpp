#include "scheduler.h"

namespace drl::internal {

void Scheduler::restore_row(size_t w, double at_raw, double amount_raw) {
  if (!restoring || !cfg) return;
  bool& changed = restoring->changed[w];
  if (!std::isfinite(at_raw) || !std::isfinite(amount_raw) || amount_raw <= 0 || at_raw < 0) {
    changed = true;
    return;
  }
  SlidingLog& log = windows[w].log;
  double at = std::ceil(at_raw);
  double amount = std::min(std::ceil(amount_raw), static_cast<double>(kMaxLimitPerWindow));
  // With release dating, a take may be dated up to the allowance ahead of its start.
  const Millis latest_legit = restoring->latest_base + grid_step_ms(windows[w].ms, windows[w].cap) +
                              (dating || restoring->released_before ? kMaxReleaseAllowanceMs : 0);
  if (at > static_cast<double>(latest_legit)) at = static_cast<double>(std::max(now, penalty.until()));
  // A row the release mark does not cover may hold a take whose callback
  // left at any moment before the restart: dated at the restart.
  if (restoring->released_before && at >= static_cast<double>(*restoring->released_before))
    at = std::max(at, static_cast<double>(now));
  changed = changed || at != at_raw || amount != amount_raw;
  log.push_back(internal::Grant{static_cast<Millis>(at), static_cast<int64_t>(amount)});
  // Rows arrive in time order from storage: keep memory bounded while
  // streaming (out-of-order rows are sorted and capped at the end).
  if (static_cast<int64_t>(log.size()) > 2 * windows[w].cap && log.ordered()) {
    while (static_cast<int64_t>(log.size()) > windows[w].cap) log.merge_oldest();
    changed = true;
  }
}

void Scheduler::write(WriteKind kind, Millis at, int64_t amount, int window_key) {
  if (kind == WriteKind::PutGrant) newest_row = std::max(newest_row, at);
  if (kind == WriteKind::DeleteGrantsThrough) ++expiry_writes;
  Write w{kind, at, amount};
  w.window = window_key;
  writes.push_back(w);
}

void Scheduler::put_penalty() {
  Write w{WriteKind::PutPenalty, penalty.until()};
  w.lift_pending = penalty.pending();
  writes.push_back(w);
}

Millis Scheduler::cover_span() const {
  const auto& record = reservations.record();
  const Millis span = reservations.on() && record ? std::max(kSlotsCoverMs, record->span) : kSlotsCoverMs;
  return std::min(span, timeout() / 4);
}

bool Scheduler::expiring() const { return expiry_writes > 0; }

bool Scheduler::stores_anyway() const { return writes.size() > expiry_writes; }

void Scheduler::clear_output() {
  writes.clear();
  actions.clear();
  expiry_writes = 0;
}

void Scheduler::write_record() {
  slots.write(now, cover_span());
  writes.push_back(Write{WriteKind::PutSlots});
}

void Scheduler::record_slots() {
  if (!cfg) {
    slots.cancel_due();
  } else if (slots.step(now, cover_span(), running, stores_anyway()) == SlotsRecord::Write) {
    write_record();
  }
}

internal::Grant Scheduler::take_unwritten(Window& w, int64_t amount, Millis dated) {
  const internal::Grant g = w.log.take(amount, w.ms, dated, w.cap);
  reservations.took_unwritten(w.key, g.at, amount);
  return g;
}

void Scheduler::write_reservation(bool keep) {
  rewrite_rows(reservations.owed_rows(), /*expired_stay=*/true);  // a row never stored that expired needs nothing
  if (!refunds.empty()) flush_refunds();
  if (reservations.replace(keep, windows.list(), now)) write(WriteKind::PutReservation);
  // A new record extends the slots record's cover with it (cover_span), so
  // a sequential caller's starts do not rewrite the slots on their own.
  if (reservations.record() && slots.any_live()) write_record();
}

void Scheduler::record_reservation() {
  if (!cfg) {  // erased: EraseAll took the record along with the rows
    if (reservations.on()) reservations.erase();
    return;
  }
  if (auto keep = reservations.step(now, stores_anyway())) write_reservation(*keep);
  reservations.settle(now);
}

void Scheduler::flush_refunds() {
  rewrite_rows(refunds, /*expired_stay=*/false);
  refunds.clear();
  moved_unwritten = false;
  refunds_due.reset();
}

void Scheduler::record_refunds() {
  if (refunds.empty()) return;
  if (!cfg) {
    refunds.clear();
    refunds_due.reset();
  } else if (stores_anyway() || (moved_unwritten && expiring()) || (refunds_due && now >= *refunds_due)) {
    // (A row moved to its release must be written before its old row can
    // be deleted as expired.)
    flush_refunds();
  } else if (!refunds_due) {
    refunds_due = now + (reservations.on() ? reservations.idle_ms() : kIdleSlotsWriteMs);
  }
}

internal::Grant Scheduler::grant(Window& w, int64_t amount, std::optional<Millis> at, std::optional<Millis> dated) {
  const internal::Grant g =
      at ? w.log.take_at(amount, *at) : w.log.take(amount, w.ms, std::max(now, dated.value_or(now)), w.cap);
  write(WriteKind::PutGrant, g.at, g.amount, w.key);
  while (static_cast<int64_t>(w.log.size()) > w.cap) {
    auto [deleted, merged] = w.log.merge_oldest();
    write(WriteKind::DeleteGrant, deleted, 0, w.key);
    write(WriteKind::PutGrant, merged.at, merged.amount, w.key);
  }
  return g;
}

}  // namespace drl::internal
