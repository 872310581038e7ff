#include "scheduler.h"

namespace drl::internal {

void Scheduler::note_unreleased(Ticket t, const Call& c) {
  if (!dating) return;
  last_start_at = now;
  Unreleased u;
  u.seq = ++starts_emitted;
  u.ticket = t;
  u.attempt = c.attempt;
  u.decided = now;
  u.first_at = now + lags.allowance();
  for (size_t i = 0; i < c.takes.size(); ++i) {
    if (c.takes[i].amount <= 0) continue;
    u.takes[u.n_takes++] = c.takes[i];
    u.first_at = std::min(u.first_at, c.takes[i].at);
  }
  unreleased.push_back(u);
}

Millis Scheduler::release_mark() const {
  Millis mark = kEveryRowReleased;
  for (const Unreleased& u : unreleased) mark = std::min(mark, u.first_at);
  return mark;
}

void Scheduler::release_reported(Ticket t, Millis at) {
  if (unreleased.empty()) return;
  const Call* c = running_call(t);
  if (c == nullptr) return;
  for (const Unreleased& u : unreleased) {
    if (u.ticket != t || u.attempt != c->attempt) continue;
    advance(at);
    release_through(u.seq);
    return;
  }
}

void Scheduler::release_through(uint64_t through) {
  while (!unreleased.empty() && unreleased.front().seq <= through) {
    Unreleased u = unreleased.front();
    unreleased.pop_front();
    lags.sample(now - u.decided);
    move_takes(u, now, /*defer=*/true);
  }
  if (lease) lease->released(through, now);
}

void Scheduler::move_takes(Unreleased& u, Millis to, bool defer) {
  if (!cfg) return;
  auto it = calls.find(u.ticket);
  Call* c = it != calls.end() && it->second.attempt == u.attempt && it->second.phase == Phase::Running ? &it->second
                                                                                                       : nullptr;
  Millis first = to;
  for (uint8_t i = 0; i < u.n_takes; ++i) {
    Take& was = u.takes[i];
    Window* w = windows.by_number(was.window);
    if (w == nullptr || w->incarnation != was.incarnation) continue;
    if (was.at >= to) {
      first = std::min(first, was.at);
      continue;
    }
    Take* take = nullptr;
    const bool shadow = (u.shadowed >> i) & 1U;
    if (c != nullptr && !shadow && w->epoch == was.epoch) {
      for (size_t k = 0; k < c->takes.size(); ++k) {
        if (c->takes[k].window == was.window && c->takes[k].at == was.at) take = &c->takes[k];
      }
    }
    if ((take != nullptr || (shadow && w->epoch == was.epoch)) && w->log.shrink(was.at, was.amount)) {
      rows.owe(w->number, was.at);  // lowered with the next step that stores
    } else {
      take = nullptr;  // charged again; the attempt keeps its own take
    }
    const internal::Grant g = defer ? take_deferred(*w, was.amount, to) : grant(*w, was.amount, std::nullopt, to);
    if (take != nullptr) {
      take->at = g.at;
      u.shadowed &= static_cast<uint8_t>(~(1U << i));
    } else {
      u.shadowed |= static_cast<uint8_t>(1U << i);
    }
    was.at = g.at;
    was.epoch = w->epoch;
    first = std::min(first, g.at);
    newest_take = std::max(newest_take, g.at);
  }
  u.first_at = first;
}

internal::Grant Scheduler::take_deferred(Window& w, int64_t amount, Millis dated) {
  const internal::Grant g = w.log.take(amount, w.ms, std::max(now, dated), w.cap);
  rows.owe(w.number, g.at, /*moved=*/true);
  while (static_cast<int64_t>(w.log.size()) > w.cap) {
    auto [deleted, merged] = w.log.merge_oldest();
    rows.put(WriteKind::DeleteGrant, deleted, 0, w.number);
    rows.put(WriteKind::PutGrant, merged.at, merged.amount, w.number);
  }
  return g;
}

void Scheduler::hold_unreleased() {
  if (unreleased.empty() || !cfg) return;
  Millis shortest = windows[0].ms;
  for (const Window& w : windows) shortest = std::min(shortest, w.ms);
  for (Unreleased& u : unreleased) {
    if (u.first_at + shortest > now) continue;
    bool due = false;
    for (uint8_t i = 0; i < u.n_takes && !due; ++i) {
      const Window* w = windows.by_number(u.takes[i].window);
      due = w != nullptr && u.takes[i].at + w->ms <= now;
    }
    if (due) move_takes(u, now, /*defer=*/false);
  }
}

void Scheduler::store_release_mark() {
  if (!cfg || !dating) {
    released_due.reset();
    return;
  }
  const Millis mark = release_mark();
  if (released_stored == mark) {
    released_due.reset();
    return;
  }
  const bool behind = !released_stored || rows.newest_row() >= *released_stored;
  // Quiet: no start for as long as a reservation would stay in force (a
  // sequential caller's pace keeps putting it off; its renewals carry it).
  const Millis quiet = last_start_at + std::max(kIdleSlotsWriteMs, reservations.idle_ms());
  if (rows.writes_beyond_expiries() || (behind && now >= quiet)) {
    if (rows.owes()) rows.flush(windows, now);  // the moved rows the mark now vouches for
    rows.put(WriteKind::PutReleased, mark);
    released_stored = mark;
    released_due.reset();
  } else if (!behind) {
    released_due.reset();
  } else {
    released_due = quiet;
  }
}

}  // namespace drl::internal
