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
  if (at != at_raw || amount != amount_raw) {
    // A stored key that is not a whole number (or is beyond the exact
    // integers of a double) cannot be deleted on its own.
    uint8_t& moved = restoring->moved_in[w];
    if (at_raw == std::ceil(at_raw) && at_raw <= static_cast<double>(kEveryRowReleased) &&
        moved < kMovedRowsWrittenAlone) {
      restoring->moved.push_back({w, static_cast<Millis>(at_raw), static_cast<Millis>(at)});
      ++moved;
    } else {
      changed = true;
    }
  }
  log.push_back(internal::Grant{static_cast<Millis>(at), static_cast<int64_t>(amount)});
  // Rows arrive in time order from storage: keep memory bounded while
  // streaming (out-of-order rows are sorted and capped at the end).
  if (static_cast<int64_t>(log.size()) > 2 * windows[w].cap && log.ordered()) {
    while (static_cast<int64_t>(log.size()) > windows[w].cap) log.merge_oldest();
    changed = true;
  }
}

void Scheduler::put_penalty() {
  Write w{WriteKind::PutPenalty, penalty.until()};
  w.lift_pending = penalty.pending();
  rows.put(w);
}

Millis Scheduler::cover_span() const {
  const auto& record = reservations.record();
  const Millis span = reservations.on() && record ? std::max(kSlotsCoverMs, record->span) : kSlotsCoverMs;
  return std::min(span, timeout() / 4);
}

void Scheduler::clear_output() {
  rows.clear();
  actions.clear();
}

void Scheduler::write_slots_record() {
  slots.write(now, cover_span());
  rows.put(Write{WriteKind::PutSlots});
}

void Scheduler::store_slots_record() {
  if (!cfg) {
    slots.cancel_due();
  } else if (slots.step(now, cover_span(), running, rows.writes_beyond_expiries()) == SlotsRecord::Write) {
    write_slots_record();
  }
}

internal::Grant Scheduler::take_unwritten(Window& w, int64_t amount, Millis dated) {
  const internal::Grant g = w.log.take(amount, w.ms, dated, w.cap);
  reservations.took_unwritten(w.number, g.at, amount);
  return g;
}

void Scheduler::write_reservation(bool keep) {
  // A row never stored that expired needs nothing.
  rows.rewrite(reservations.owed_rows(), windows, now, /*expired_stay=*/true);
  if (rows.owes()) rows.flush(windows, now);
  if (reservations.replace(keep, windows.list(), now)) rows.put(WriteKind::PutReservation);
  // A new record extends the slots record's cover with it (cover_span), so
  // a sequential caller's starts do not rewrite the slots on their own.
  if (reservations.record() && slots.any_live()) write_slots_record();
}

void Scheduler::store_reservation() {
  if (!cfg) {  // erased: EraseAll took the record along with the rows
    if (reservations.on()) reservations.erase();
    return;
  }
  if (auto keep = reservations.step(now, rows.writes_beyond_expiries())) write_reservation(*keep);
  reservations.settle(now);
}

void Scheduler::store_owed_rows() {
  if (!cfg) {
    rows.forget_owed();
  } else {
    rows.step(windows, now, reservations.on() ? reservations.idle_ms() : kIdleSlotsWriteMs);
  }
}

internal::Grant Scheduler::grant(Window& w, int64_t amount, std::optional<Millis> at, std::optional<Millis> dated) {
  const internal::Grant g =
      at ? w.log.take_at(amount, *at) : w.log.take(amount, w.ms, std::max(now, dated.value_or(now)), w.cap);
  rows.put(WriteKind::PutGrant, g.at, g.amount, w.number);
  while (static_cast<int64_t>(w.log.size()) > w.cap) {
    auto [deleted, merged] = w.log.merge_oldest();
    rows.put(WriteKind::DeleteGrant, deleted, 0, w.number);
    rows.put(WriteKind::PutGrant, merged.at, merged.amount, w.number);
  }
  return g;
}

}  // namespace drl::internal
