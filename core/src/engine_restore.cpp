// drl::Engine's restore: rebuilding the scheduler from what storage holds
// (the contract is at Engine::restore_begin in drl/engine.h).
#include "drl/engine.h"

#include <algorithm>
#include <cmath>

#include "engine_inspector.h"
#include "scheduler.h"

namespace drl {

void Engine::restore(const Snapshot& snap, Millis now) {
  restore_begin(snap.config_text ? std::optional<std::string_view>(*snap.config_text) : std::nullopt, snap.forced_until,
                snap.lift_pending, now);
  if (snap.released_before) restore_released(*snap.released_before);
  for (const auto& [at, amount] : snap.grants) scheduler_->restore_row(0, at, amount);
  for (const auto& [name, rows] : snap.windows) {
    for (const auto& [at, amount] : rows) {
      const double pair[2] = {at, amount};
      restore_window_rows(name, pair, 1);
    }
  }
  if (snap.slots_text) restore_slots(*snap.slots_text);
  if (snap.reservation_text) restore_reservation(*snap.reservation_text);
  restore_end();
}

void Engine::restore_begin(std::optional<std::string_view> config_text, double forced_until, bool lift_pending,
                           Millis now) {
  const Millis latest = std::max(scheduler_->now, now);
  internal::History history = std::move(scheduler_->history);  // a rebuild keeps it; storage may lack some
  const bool reserving = scheduler_->reservations.on();
  // A rebuild keeps counting starts (the host's marks stay valid) and the lags seen.
  const bool dating = scheduler_->dating;
  const uint64_t starts_emitted = scheduler_->starts_emitted;
  const internal::ReleaseLags lags = scheduler_->lags;
  const std::optional<internal::SlotKey> slot_key = scheduler_->slots.key();
  scheduler_ = std::make_unique<internal::Scheduler>();
  if (slot_key) scheduler_->slots.set_key(*slot_key);  // this engine's identities stay its own
  scheduler_->history = std::move(history);
  scheduler_->history.mark_unsaved();
  scheduler_->now = latest;
  scheduler_->reservations.set_on(reserving);
  scheduler_->dating = dating;
  scheduler_->starts_emitted = starts_emitted;
  scheduler_->lags = lags;
  scheduler_->restoring.emplace();
  if (!config_text) return;
  auto parsed = parse_config(*config_text);
  // A stored config that no longer validates cannot be run safely; the rows
  // stay untouched for a person to inspect, and the bucket reads as absent.
  if (!parsed.ok()) return;
  scheduler_->cfg = std::move(*parsed);
  scheduler_->build_windows(scheduler_->cfg->config);

  if (scheduler_->penalty.restore(forced_until, lift_pending, latest)) scheduler_->put_penalty();
  scheduler_->restoring->latest_base = std::max(latest, scheduler_->penalty.until());
}

void Engine::restore_rows(const double* rows, size_t count) {
  for (size_t i = 0; i < count; ++i) scheduler_->restore_row(0, rows[2 * i], rows[2 * i + 1]);
}

void Engine::restore_window_rows(std::string_view name, const double* rows, size_t count) {
  internal::Scheduler& s = *scheduler_;
  if (!s.restoring || !s.cfg || count == 0) return;
  for (size_t w = 1; w < s.windows.size(); ++w) {
    if (s.windows[w].name == name) {
      for (size_t i = 0; i < count; ++i) s.restore_row(w, rows[2 * i], rows[2 * i + 1]);
      return;
    }
  }
  // A window the config no longer has (or never had): its rows go.
  const int key = s.windows.number_of(std::string(name));
  auto& stale = s.restoring->stale_keys;
  if (std::find(stale.begin(), stale.end(), key) == stale.end()) stale.push_back(key);
}

void Engine::restore_slots(std::string_view slots_text) {
  if (scheduler_->restoring && scheduler_->cfg)
    scheduler_->active +=
        static_cast<size_t>(scheduler_->slots.restore(slots_text, scheduler_->now, scheduler_->timeout()));
}

void Engine::restore_reservation(std::string_view text) {
  if (scheduler_->restoring) scheduler_->restoring->reservation_text = std::string(text);
}

void Engine::restore_released(double released_before) {
  if (!scheduler_->restoring) return;
  // Damage (not a number) reads as a mark before every row: all dated at the restore.
  const double mark = std::isfinite(released_before) ? std::ceil(released_before) : 0.0;
  scheduler_->restoring->released_before =
      static_cast<Millis>(std::clamp(mark, 0.0, static_cast<double>(internal::kEveryRowReleased)));
  scheduler_->released_stored = scheduler_->restoring->released_before;
}

namespace {

// The rows of window `w` that restore moved (Restoring::moved), written
// alone: each moved row's stored key is deleted, then each date a row moved
// to is written with what the log holds there now (a key just deleted, when
// only the amount changed: the write puts it back).
void write_moved(internal::Scheduler& s, const internal::Restoring& restoring, size_t w) {
  const internal::Window& window = s.windows[w];
  const auto& moved = restoring.moved;
  for (const internal::Restoring::Moved& m : moved) {
    if (m.window == w) s.rows.put(WriteKind::DeleteGrant, m.from, 0, window.number);
  }
  // Rows moved to one date upsert it once each: the host keeps the last of
  // a batch's upserts of a row (storage.ts), so it is one row written.
  for (const internal::Restoring::Moved& m : moved) {
    const internal::Grant* g = m.window == w ? window.log.find(m.to) : nullptr;
    if (g) s.rows.put(WriteKind::PutGrant, g->at, g->amount, window.number);
  }
}

}  // namespace

void Engine::restore_end() {
  if (!scheduler_->restoring) return;
  const internal::Restoring restoring = std::move(*scheduler_->restoring);
  scheduler_->restoring.reset();
  if (!scheduler_->cfg) return;
  // A stored reservation counts as taken in full, one grant per window dated
  // at its end or now, whichever is earlier (every take made under it came
  // no later). With reservations on it stays the record in force, wholly
  // taken, its grants rows owed: they are written with the next step that
  // stores (and a new record), or when it is cleared kIdleSlotsWriteMs from
  // now, so a restore writes nothing for it (a host that drops a restore's
  // repairs, after a failed write, loses nothing). Off, they are written
  // now and the record cleared.
  std::optional<internal::Reservation> reserved;
  if (restoring.reservation_text && !restoring.reservation_text->empty()) {
    reserved = internal::Reservations::read(*restoring.reservation_text, scheduler_->windows.list(), scheduler_->now);
  }
  for (int key : restoring.stale_keys) scheduler_->rows.put(WriteKind::ClearGrants, 0, 0, key);
  for (size_t w = 0; w < scheduler_->windows.size(); ++w) {
    internal::Window& window = scheduler_->windows[w];
    // Storage keys rows by time, so rows fold together only where restore
    // moved some to one date; those dates are written below.
    const bool folded = window.log.normalise();
    bool changed = restoring.changed[w] || (folded && restoring.moved_in[w] == 0);
    std::optional<internal::Grant> reserved_row;
    if (const int64_t units = reserved ? reserved->units_in(window.number) : 0;
        units > 0 && reserved->until + window.ms > scheduler_->now) {
      reserved_row = window.log.take_at(units, reserved->until);
    }
    while (static_cast<int64_t>(window.log.size()) > window.cap) {
      window.log.merge_oldest();
      changed = true;
    }
    if (changed) {
      scheduler_->rows.put(WriteKind::ClearGrants, 0, 0, window.number);
      for (const internal::Grant& g : window.log.grants())
        scheduler_->rows.put(WriteKind::PutGrant, g.at, g.amount, window.number);
    } else {
      write_moved(*scheduler_, restoring, w);
      if (reserved_row && !scheduler_->reservations.on())
        scheduler_->rows.put(WriteKind::PutGrant, reserved_row->at, reserved_row->amount, window.number);
    }
    if (reserved_row && scheduler_->reservations.on()) {
      scheduler_->reservations.owe_restored(window.number, reserved_row->at, reserved->units_in(window.number));
    }
  }
  if (reserved && scheduler_->reservations.on()) {
    scheduler_->reservations.restored(std::move(*reserved), scheduler_->now);
  } else if (reserved) {
    scheduler_->rows.put(WriteKind::PutReservation);  // none now: the rows above hold it
  }
  // Every restored row is dated no earlier than its callback left (the mark
  // re-dated those it did not cover): the next mark covers them all.
  for (const internal::Window& window : scheduler_->windows) {
    if (!window.log.empty()) scheduler_->newest_take = std::max(scheduler_->newest_take, window.log.newest().at);
  }
  scheduler_->advance(scheduler_->now);
  scheduler_->serve();
}

void Engine::restore_history(const std::vector<HistoryRow>& rows, Millis now) {
  if (!scheduler_->cfg) return;
  scheduler_->history.advance(std::max(scheduler_->now, now));
  scheduler_->history.restore(rows, [this](const std::string& name) {
    return name == kPrimaryWindow ? 0 : scheduler_->windows.number_of(name);
  });
}

}  // namespace drl
