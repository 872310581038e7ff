#include "reservations.h"

#include <algorithm>
#include <cmath>

#include "slots_record.h"  // kIdleSlotsWriteMs

namespace drl::internal {

int64_t Reservations::cap(int64_t limit) {
  return (limit / kReserveFractionDenominator) + (limit % kReserveFractionDenominator != 0 ? 1 : 0);
}

bool Reservations::covers(const Call& c, const std::vector<Window>& windows, Millis now) const {
  if (!on_ || !record_ || now >= record_->until) return false;
  for (const Window& w : windows) {
    const int64_t amount = c.cost_in(w.unit);
    if (amount <= 0) continue;
    auto held = unwritten_.find(w.number);
    if ((held == unwritten_.end() ? 0 : held->second) + amount > record_->units_in(w.number)) return false;
    if (static_cast<int64_t>(w.log.size()) >= w.cap) return false;  // its take may merge: rows to write
  }
  return true;
}

void Reservations::took_unwritten(int window, Millis at, int64_t amount) {
  owed_.emplace(window, at);
  unwritten_[window] += amount;
}

void Reservations::noted_take(int window, int64_t amount) {
  if (!on_) return;
  taken_since_[window] += amount;
  last_take_[window] = amount;
}

void Reservations::noted_start(Millis now) {
  if (!on_) return;
  in_run_ = last_take_at_ && now < *last_take_at_ + kReserveRunGapMs;
  last_gap_ = in_run_ ? now - *last_take_at_ : 0;
  last_take_at_ = now;
  due_ = now + idle_ms();
}

// A caller whose calls take 600 ms each keeps its record between them.
Millis Reservations::idle_ms() const { return std::max<Millis>(kIdleSlotsWriteMs, 2 * last_gap_); }

// How long the next record covers takes: kReserveSpanMs, longer for a
// slower pace (sixteen of its gaps, up to kMaxReserveSpanMs), so a caller
// renews about every eight calls at least, whatever its pace. The span does
// not widen the under-admission: that is bounded by the units (a restore
// dates the record no later than the restart).
Millis Reservations::span() const { return std::clamp<Millis>(16 * last_gap_, kReserveSpanMs, kMaxReserveSpanMs); }

// A step that stores anything anyway rewrites the record with it (and the
// rows behind it); one in force is renewed ahead of need, once a take finds
// half of some window's units taken or half its span passed (so a steady
// sequential caller meets one commit every few dozen calls, and a caller
// that has stopped costs no renewal). The renewal is written in the step
// after the take's, which the host runs as soon as the take's actions are
// carried out: the callback the take started is already on its way. Once
// no take came for idle_ms() the record is cleared, so a bucket evicted
// after a quiet spell restores exactly.
std::optional<bool> Reservations::step(Millis now, bool stores) {
  if (!on_) return std::nullopt;
  const bool recent = due_ && now < *due_;
  if (stores) return recent;
  if (record_ && !recent) return false;
  if (record_ && renewal_pending_) return true;
  if (record_ && last_take_at_ == now && renewal_due(now)) renewal_pending_ = true;
  return std::nullopt;
}

void Reservations::settle(Millis now) {
  if (!on_) return;
  const bool recent = due_ && now < *due_;
  if (!record_) renewal_pending_ = false;
  if (!record_ && !recent) due_.reset();
}

bool Reservations::renewal_due(Millis now) const {
  if (now >= record_->until - record_->span / 2) return true;
  for (const auto& [window, units] : record_->units) {
    auto held = unwritten_.find(window);
    if (held != unwritten_.end() && 2 * held->second >= units) return true;
  }
  return false;
}

// The next record: in each window twice the units taken per span at the
// rate seen since the last record, at least twice the last take, no more
// than the window has free now, and at most cap(limit). None when no window
// would hold any, for a take that starts a run (a lone call leaves no
// record for a crash to count), and when a window is under
// kMinReserveWindowMs.
std::optional<Reservation> Reservations::sized(const std::vector<Window>& windows, Millis now) {
  const Millis s = span();
  const bool reservable =
      std::all_of(windows.begin(), windows.end(), [](const Window& w) { return w.ms >= kMinReserveWindowMs; });
  if (!in_run_ || !reservable) return std::nullopt;
  const double elapsed = static_cast<double>(std::max<Millis>(1, now - written_at_));
  Reservation r;
  r.until = now + s;
  r.span = s;
  for (const Window& w : windows) {
    const int64_t taken = taken_since_[w.number];
    const int64_t last = last_take_[w.number];
    if (last == 0 && taken == 0) continue;
    const double at_rate = std::ceil(std::min(2.0 * static_cast<double>(taken) * static_cast<double>(s) / elapsed,
                                              static_cast<double>(kMaxLimitPerWindow)));
    const int64_t wanted = std::max(static_cast<int64_t>(at_rate), 2 * last);
    const int64_t free = std::max<int64_t>(0, w.limit - w.log.used());
    const int64_t units = std::min({wanted, free, cap(w.limit)});
    if (units > 0) r.units.emplace_back(w.number, units);
  }
  if (r.units.empty()) return std::nullopt;
  return r;
}

bool Reservations::replace(bool keep, const std::vector<Window>& windows, Millis now) {
  std::optional<Reservation> next = keep ? sized(windows, now) : std::nullopt;
  const bool stored = record_.has_value() || next.has_value();
  record_ = std::move(next);
  owed_.clear();
  unwritten_.clear();
  taken_since_.clear();
  written_at_ = now;
  renewal_pending_ = false;
  return stored;
}

std::optional<Millis> Reservations::wake(Millis now) const {
  if (renewal_pending_) return now;
  if (record_ && due_) return due_;
  return std::nullopt;
}

void Reservations::write_stats(json::Writer& out, const std::vector<Window>& windows) const {
  if (!record_) {
    out.null();
    return;
  }
  out.begin_object().key("until").num(record_->until).key("units").begin_object();
  for (const auto& [window, n] : record_->units) {
    for (const Window& w : windows) {
      if (w.number == window) out.key(w.name).num(n);
    }
  }
  out.end_object().end_object();
}

std::string Reservations::text(const std::vector<Window>& windows) const {
  std::string out;
  if (record_) {
    json::Writer w(out);
    write_stats(w, windows);
  }
  return out;
}

// Units per window (by number), counted at `now` whatever the record's end: a
// take it covered was decided before its end, but its callback left once
// the commit before it was durable, which may have been as late as the
// crash (the clock a restore trusts for rows too); a grant dated in the
// future would date every take after it as late, holding real takes longer
// than they were taken for. A window the record does not name reserved
// nothing; units are capped at the window's limit. A record that cannot be
// read at all counts every window at cap(limit): it may have covered takes
// we can no longer size.
Reservation Reservations::read(std::string_view text, const std::vector<Window>& windows, Millis now) {
  Reservation r;
  r.until = now;
  // Two levels deep: anything deeper is not a record.
  const json::Parsed doc(text, 2);
  const json::Value* until_field = json::find(doc.doc, "until");
  const json::Value* units = json::find(doc.doc, "units");
  bool readable = until_field != nullptr && until_field->IsNumber() && units != nullptr && units->IsObject();
  const double until = readable ? until_field->GetDouble() : 0;
  readable = readable && std::isfinite(until) && until >= 0;
  if (readable) {
    for (const auto& m : units->GetObject()) {
      const double n = m.value.IsNumber() ? m.value.GetDouble() : -1;
      if (!std::isfinite(n) || n < 0) readable = false;
    }
  }
  if (!readable) {
    for (const Window& w : windows) r.units.emplace_back(w.number, cap(w.limit));
    return r;
  }
  for (const Window& w : windows) {
    const json::Value* it = json::find(*units, w.name);
    if (it == nullptr) continue;
    const int64_t n = static_cast<int64_t>(std::ceil(std::min(it->GetDouble(), static_cast<double>(w.limit))));
    if (n > 0) r.units.emplace_back(w.number, n);
  }
  return r;
}

void Reservations::owe_restored(int window, Millis at, int64_t units) {
  owed_.emplace(window, at);
  unwritten_[window] = units;
}

void Reservations::restored(Reservation r, Millis now) {
  record_ = std::move(r);
  due_ = now + idle_ms();
}

int64_t Reservations::unwritten_in(int window) const {
  auto it = unwritten_.find(window);
  return it == unwritten_.end() ? 0 : it->second;
}

void Reservations::lifted() {
  owed_.clear();
  unwritten_.clear();
}

void Reservations::erase() {
  record_.reset();
  owed_.clear();
  unwritten_.clear();
  taken_since_.clear();
  last_take_.clear();
  last_take_at_.reset();
  in_run_ = false;
  due_.reset();
  renewal_pending_ = false;
}

}  // namespace drl::internal
