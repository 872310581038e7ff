#include "drl/engine.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <deque>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_map>

#include "call.h"
#include "drl/ratelimit_headers.h"
#include "drl/retry_after.h"
#include "engine_inspector.h"
#include "history.h"
#include "penalty.h"
#include "release_lags.h"
#include "reservations.h"
#include "sliding_log.h"
#include "slot_identity.h"
#include "slots_record.h"
#include "wait_queue.h"
#include "window.h"

namespace drl {
namespace internal {

// The release mark when every start has been released: beyond any row's
// date (the largest integer a JS number holds exactly).
constexpr Millis kEveryRowReleased = 9'007'199'254'740'991;

// The largest usage a report may give for one unit: far beyond any limit
// (a usage may exceed it: a debt), still exact in a double.
constexpr double kMaxUsage = 1e15;

// A number as a person wrote it, and as JS's String() writes it: 2, not
// 2.0 (JS numbers arrive as doubles). Integers print in full up to 2^63
// (9007199254740992, not 9.007199254740992e+15), so a message the client
// words from the same rule (shim/rules.ts) reads the same.
std::string number_text(double v) {
  if (!std::isfinite(v)) return std::isnan(v) ? "NaN" : (v > 0 ? "Infinity" : "-Infinity");
  if (v == std::floor(v) && std::fabs(v) < 9.2e18) return std::to_string(static_cast<long long>(v));
  return nlohmann::json(v).dump();
}

// The largest integer a JS number holds exactly (Number.MAX_SAFE_INTEGER):
// a cost beyond it may not be the number the caller wrote.
constexpr double kMaxSafeInteger = 9007199254740991.0;

// The rule for one amount of a cost (`path` is "cost" or "cost.<unit>"),
// the client's too (shim/rules.ts costProblem; test/node/contracts.test.ts
// checks the words agree): an integer >= 0 that a JS number holds exactly.
// 0 takes nothing of that unit. Above a window's limit is CostTooLarge,
// decided against the windows.
std::optional<Error> amount_problem(double v, const std::string& path) {
  if (!std::isfinite(v) || v < 0 || v != std::floor(v)) {
    return Error::make(ErrorCode::InvalidArgument, ErrorKind::RangeError,
                       path + " must be an integer >= 0 (received " + number_text(v) + ")");
  }
  if (v > kMaxSafeInteger) {
    return Error::make(
        ErrorCode::InvalidArgument, ErrorKind::RangeError,
        path + " must be an integer >= 0 and at most 9007199254740991 (received " + number_text(v) + ")");
  }
  return std::nullopt;
}

struct Restoring {
  Millis latest_base = 0;                       // max(now, forced_until): a grant may be dated up to a grid step later
  std::optional<std::string> reservation_text;  // the reservation record as stored (restore_reservation)
  std::array<bool, kMaxWindows> changed{};      // some row of that window had to be dropped or adjusted
  std::vector<int> stale_keys;                  // windows with stored rows the config no longer has
  std::optional<Millis> released_before;        // the release mark as stored (restore_released)
};

// A started attempt whose callback the host has not yet reported as gone
// out (Engine::released): what it took, so the release can move its takes
// to when the callback really left.
struct Unreleased {
  uint64_t seq = 0;  // its number among the starts (State::starts_emitted)
  Ticket ticket = 0;
  uint32_t attempt = 0;
  Millis decided = 0;   // when the engine started it
  Millis first_at = 0;  // the earliest date among its takes (now, when it took nothing)
  std::array<Take, kMaxWindows> takes{};
  uint8_t n_takes = 0;
  uint8_t shadowed = 0;  // bit i: takes[i] is a charge of its own, not the attempt's take
};

struct State {
  std::optional<ParsedConfig> cfg;
  std::string empty_text;
  Millis now = 0;  // the latest time seen; time never goes backwards

  std::vector<Window> windows;        // [0] the primary window; empty when unconfigured
  std::vector<std::string> keys{""};  // window names by write number, append-only (0: the primary)
  std::vector<std::string> units;     // unit names by index, append-only
  uint64_t next_epoch = 1;
  Penalty penalty;  // the shared pause and its lift (penalty.h)

  Calls calls;
  WaitQueue queue{calls};                 // first starts: by priority (highest first), then arrival
  std::multimap<Millis, Ticket> backoff;  // retries waiting out their delay
  std::set<Ticket> ready;                 // retries due, served oldest ticket first
  size_t active = 0;
  size_t running = 0;
  Ticket next_ticket = 1;
  std::optional<Millis> wake;

  std::multimap<Millis, Ticket> deadlines;  // running attempts by when they time out
  SlotsRecord slots;                        // what may still run after a restart (slots_record.h)

  std::vector<Write> writes;
  std::vector<Action> actions;

  // Grants a usage refunded, by (window key, time), not yet rewritten in
  // storage. A refund only lowers a count, so its row can wait for a step
  // that stores something anyway (a take's grant, usually the very next
  // call), instead of a commit of its own per call; a bucket that goes
  // quiet writes them kIdleSlotsWriteMs later.
  std::vector<std::pair<int, Millis>> refunds;
  std::optional<Millis> refunds_due;
  bool moved_unwritten = false;  // refunds hold a take moved to its release (see take_deferred)

  Reservations reservations;  // covering reservations (reservations.h)

  std::optional<Restoring> restoring;  // between restore_begin and restore_end

  // ---- grants dated when their callbacks leave (Engine::released) ----------
  // Starts not yet released, oldest first (the host invokes callbacks in
  // the order they started, so they are released in that order too).
  bool dating = false;  // Engine::set_release_dating
  std::deque<Unreleased> unreleased;
  uint64_t starts_emitted = 0;  // kept across restores: the host's marks stay valid
  ReleaseLags lags;             // how far ahead of its decision a take is dated (release_lags.h)
  Millis newest_take = 0;       // the latest date a callback's take was given
  // The release mark as last written (PutReleased), and the latest date of
  // any grant row written: a mark that moved past a row written at or after
  // the stored one is worth writing (once quiet, kIdleSlotsWriteMs later).
  std::optional<Millis> released_stored;
  Millis newest_row = 0;
  Millis last_start_at = 0;
  std::optional<Millis> released_due;

  History history;  // what happened, per interval (history.h)

  // Grants: drop unreadable rows, round toward the safe side, cap amounts at
  // the largest limit any config allows (a smaller current limit is no sign
  // of damage: the limit may have been lowered after the take, and may be
  // raised again), pull grants dated beyond any legitimate future back to it.
  void restore_row(size_t w, double at_raw, double amount_raw) {
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

  const Config& config() const { return cfg->config; }
  int64_t limit() const { return windows[0].limit; }
  int64_t window() const { return windows[0].ms; }
  SlidingLog& log() { return windows[0].log; }
  const SlidingLog& log() const { return windows[0].log; }

  void write(WriteKind kind, Millis at = 0, int64_t amount = 0, int window_key = 0) {
    if (kind == WriteKind::PutGrant) newest_row = std::max(newest_row, at);
    Write w{kind, at, amount};
    w.window = window_key;
    writes.push_back(w);
  }

  int unit_index(const std::string& name) {
    for (size_t i = 0; i < units.size(); ++i) {
      if (units[i] == name) return static_cast<int>(i);
    }
    units.push_back(name);
    return static_cast<int>(units.size() - 1);
  }
  // The unit's index if some window counts it, else -1.
  int counted_unit(std::string_view name) const {
    for (const Window& w : windows) {
      if (units[static_cast<size_t>(w.unit)] == name) return w.unit;
    }
    return -1;
  }
  int key_of(const std::string& name) {
    for (size_t i = 1; i < keys.size(); ++i) {
      if (keys[i] == name) return static_cast<int>(i);
    }
    keys.push_back(name);
    return static_cast<int>(keys.size() - 1);
  }
  // The indices of the units the windows count, each once.
  std::vector<int> counted_unit_indices() const {
    std::vector<int> out;
    for (const Window& w : windows) {
      if (std::find(out.begin(), out.end(), w.unit) == out.end()) out.push_back(w.unit);
    }
    return out;
  }
  // The units the windows count, the default unit first (stats' `units`).
  std::vector<std::string> counted_units() const {
    std::vector<std::string> names;
    for (const Window& w : windows) {
      const std::string& u = units[static_cast<size_t>(w.unit)];
      if (std::find(names.begin(), names.end(), u) == names.end()) names.push_back(u);
    }
    return names;
  }
  // "requests, tokens": the same, for messages.
  std::string unit_list() const {
    std::string out;
    for (const std::string& n : counted_units()) out += (out.empty() ? "" : ", ") + n;
    return out;
  }
  // The first window whose limit the call's cost exceeds, if any.
  const Window* too_large(const Call& c) const {
    for (const Window& w : windows) {
      if (c.cost_in(w.unit) > w.limit) return &w;
    }
    return nullptr;
  }
  // Stores the penalty as it stands.
  void put_penalty() {
    Write w{WriteKind::PutPenalty, penalty.until()};
    w.lift_pending = penalty.pending();
    writes.push_back(w);
  }
  void act(ActionKind kind, Ticket t, uint32_t attempt) {
    actions.push_back(Action{kind, t, attempt});
    if (kind == ActionKind::Resolve) history.completed();
  }
  void reject(Ticket t, ErrorCode code, int64_t status = 0) {
    actions.push_back(Action{ActionKind::Reject, t, 0, code, status});
    history.rejected(code);
  }

  // Moves time forward to `t` (never back), times out attempts, frees
  // restored slots that can no longer be running, lifts a due penalty,
  // expires grants.
  void advance(Millis t) {
    now = std::max(now, t);
    history.advance(now);
    time_out_attempts();
    if (!cfg) return;
    free_restored_slots();
    if (penalty.due(now)) lift();
    hold_unreleased();
    for (Window& w : windows) {
      if (auto through = w.log.prune(w.ms, now)) write(WriteKind::DeleteGrantsThrough, *through, 0, w.key);
    }
    // A deadline already past when the host's event arrives (its timer came
    // late, or another event came first) is met now, before anything this
    // event frees could start the call, and before a newcomer is predicted
    // behind it. One that is due exactly now still gets its chance (serve).
    expire_waits(/*overdue_only=*/true);
  }

  // ---- slots that survive a restart ----------------------------------------

  int64_t timeout() const { return config().attempt_timeout_ms; }

  void slot_started(Ticket t, Call& c, Millis at) {
    c.started_at = at;
    c.timeout = cfg ? timeout() : kMaxAttemptTimeoutMs;
    c.deadline = now + c.timeout;
    deadlines.emplace(c.deadline, t);
    slots.started(at);
  }

  // The attempt is no longer running: its deadline goes, and the record
  // holds its slot until rewritten (a release recorded late only holds a
  // slot longer after a crash).
  void attempt_ended(Ticket t, Call& c) {
    --running;
    auto range = deadlines.equal_range(c.deadline);
    for (auto d = range.first; d != range.second; ++d) {
      if (d->second == t) {
        deadlines.erase(d);
        break;
      }
    }
    slots.ended(c.started_at);
  }

  // An attempt that has not reported by its deadline is settled: not
  // retried (its work may have reached the upstream) and its slot freed. A
  // report that arrives later finds no running attempt and changes nothing.
  void time_out_attempts() {
    while (!deadlines.empty() && deadlines.begin()->first <= now) {
      const Ticket t = deadlines.begin()->second;
      Call& c = calls[t];
      attempt_ended(t, c);  // erases the deadline
      // The timeout it ran under, which a reconfigure since did not change.
      if (c.caller != Caller::Settled) reject(t, ErrorCode::AttemptTimeout, static_cast<int32_t>(c.timeout));
      release(t);
    }
  }

  void free_restored_slots() { active -= static_cast<size_t>(slots.free_expired(now, timeout())); }

  // While a reservation record is in force the slots record covers starts as
  // long as it does, so a sequential caller's starts do not rewrite it more
  // often than the record is renewed (held longer after a crash: the safe side).
  Millis cover_span() const {
    const auto& record = reservations.record();
    const Millis span = reservations.on() && record ? std::max(kSlotsCoverMs, record->span) : kSlotsCoverMs;
    return std::min(span, timeout() / 4);
  }

  // Whether this step deletes expired rows.
  bool expiring() const {
    return std::any_of(writes.begin(), writes.end(),
                       [](const Write& w) { return w.kind == WriteKind::DeleteGrantsThrough; });
  }

  bool stores_anyway() const {
    return std::any_of(writes.begin(), writes.end(),
                       [](const Write& w) { return w.kind != WriteKind::DeleteGrantsThrough; });
  }

  // Writes the slots record with this step (see slots_record.h).
  void write_record() {
    slots.write(now, cover_span());
    writes.push_back(Write{WriteKind::PutSlots});
  }

  void record_slots() {
    if (!cfg) {
      slots.cancel_due();
    } else if (slots.step(now, cover_span(), running, stores_anyway()) == SlotsRecord::Write) {
      write_record();
    }
  }

  // ---- grants dated when their callbacks leave (Engine::released) ----------
  //
  // The engine decides a start at `now`, but its callback leaves the object
  // only when the commit before it is durable. A window must count the take
  // from when the work left, so each take is dated `allowance` ahead (the
  // largest recent lag: most releases land before it, and nothing is
  // rewritten for them), and a release that comes later still moves its
  // takes to the release (grant rows written now; the old rows shrink with
  // the next step that stores). A later date only holds units longer: the
  // safe side.
  //
  // For a restart, the release mark: every row dated before it is dated no
  // earlier than its callback left. It rides on steps that store anyway; a
  // bucket gone quiet with rows past the stored mark writes it alone once,
  // kIdleSlotsWriteMs later, so an eviction after a quiet spell restores
  // every row as dated.

  void note_unreleased(Ticket t, const Call& c) {
    if (!dating) return;
    last_start_at = now;
    Unreleased u;
    u.seq = ++starts_emitted;
    u.ticket = t;
    u.attempt = c.attempt;
    u.decided = now;
    u.first_at = now + lags.allowance();
    for (uint8_t i = 0; i < c.n_takes; ++i) {
      if (c.takes[i].reserved <= 0) continue;
      u.takes[u.n_takes++] = c.takes[i];
      u.first_at = std::min(u.first_at, c.takes[i].at);
    }
    unreleased.push_back(u);
  }

  // Rows dated before this are dated no earlier than their callbacks left:
  // every row, when every start has been released (a row written for a
  // later start comes with a new mark, in the same step).
  // (The oldest start's takes are not always the earliest dated: a take held
  // back from expiring moves later while younger ones stay.)
  Millis release_mark() const {
    Millis mark = kEveryRowReleased;
    for (const Unreleased& u : unreleased) mark = std::min(mark, u.first_at);
    return mark;
  }

  // A report proves the attempt's callback left, by `at` at the latest: if
  // the host has not said so yet, it is released now (with every start
  // before it, which left before it did), before its usage is settled.
  void release_reported(Ticket t, Millis at) {
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

  void release_through(uint64_t through) {
    while (!unreleased.empty() && unreleased.front().seq <= through) {
      Unreleased u = unreleased.front();
      unreleased.pop_front();
      lags.sample(now - u.decided);
      move_takes(u, now, /*defer=*/true);
    }
  }

  // Moves the takes of unreleased start `u` dated before `to` to `to`
  // (`to` >= now): at its release, or while it still waits for one, before
  // a take would leave its window (see hold_unreleased). While its attempt
  // runs, the attempt's own take moves (its grant shrinks where it was
  // dated, and its usage will refund it where it now is); otherwise (an
  // attempt already over, a log replaced since) the whole take is charged
  // again at `to`, and this record owns that charge from then on: more
  // counted, never less.
  // `defer`: the moved rows are written with the next step that stores (a
  // release, whose old rows are still live); else now (a take held back from
  // expiring, whose old row is being deleted as expired in this very step).
  void move_takes(Unreleased& u, Millis to, bool defer) {
    if (!cfg) return;
    auto it = calls.find(u.ticket);
    Call* c = it != calls.end() && it->second.attempt == u.attempt && it->second.phase == Phase::Running ? &it->second
                                                                                                         : nullptr;
    Millis first = to;
    for (uint8_t i = 0; i < u.n_takes; ++i) {
      Take& was = u.takes[i];
      Window* w = window_by_key(was.key);
      if (w == nullptr || w->incarnation != was.incarnation) continue;
      if (was.at >= to) {
        first = std::min(first, was.at);
        continue;
      }
      Take* take = nullptr;
      const bool shadow = (u.shadowed >> i) & 1U;
      if (c != nullptr && !shadow && w->epoch == was.epoch) {
        for (uint8_t k = 0; k < c->n_takes; ++k) {
          if (c->takes[k].key == was.key && c->takes[k].at == was.at) take = &c->takes[k];
        }
      }
      if ((take != nullptr || (shadow && w->epoch == was.epoch)) && w->log.shrink(was.at, was.reserved)) {
        refunds.emplace_back(w->key, was.at);  // lowered with the next step that stores
      } else {
        take = nullptr;  // charged again; the attempt keeps its own take
      }
      const internal::Grant g = defer ? take_deferred(*w, was.reserved, to) : grant(*w, was.reserved, std::nullopt, to);
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

  // Takes `amount` in `w` dated `dated` (>= now), its row written with the
  // next step that stores, with the rows it was moved from (refunds): until
  // then storage holds the take at its earlier date, which the release mark
  // still covers (the mark moves past it only in a step that writes both).
  internal::Grant take_deferred(Window& w, int64_t amount, Millis dated) {
    const internal::Grant g = w.log.take(amount, w.ms, std::max(now, dated), w.cap);
    refunds.emplace_back(w.key, g.at);
    moved_unwritten = true;
    while (static_cast<int64_t>(w.log.size()) > w.cap) {
      auto [deleted, merged] = w.log.merge_oldest();
      write(WriteKind::DeleteGrant, deleted, 0, w.key);
      write(WriteKind::PutGrant, merged.at, merged.amount, w.key);
    }
    return g;
  }

  // A start whose callback has not left yet must not leave its windows: a
  // take about to expire (its date + window reached) moves to now, and so
  // stays counted until its release dates it for good. Runs before expiry.
  void hold_unreleased() {
    if (unreleased.empty() || !cfg) return;
    Millis shortest = windows[0].ms;
    for (const Window& w : windows) shortest = std::min(shortest, w.ms);
    for (Unreleased& u : unreleased) {
      if (u.first_at + shortest > now) continue;
      bool due = false;
      for (uint8_t i = 0; i < u.n_takes && !due; ++i) {
        const Window* w = window_by_key(u.takes[i].key);
        due = w != nullptr && u.takes[i].at + w->ms <= now;
      }
      if (due) move_takes(u, now, /*defer=*/false);
    }
  }

  Window* window_by_key(int key) {
    for (Window& w : windows) {
      if (w.key == key) return &w;
    }
    return nullptr;
  }

  // At the end of a step: the release mark rides on a step that stores
  // anyway; when it has moved past rows stored at or after the mark in
  // storage, it is written alone once the bucket has been quiet a while.
  void record_released() {
    if (!cfg || !dating) {
      released_due.reset();
      return;
    }
    const Millis mark = release_mark();
    if (released_stored == mark) {
      released_due.reset();
      return;
    }
    const bool behind = !released_stored || newest_row >= *released_stored;
    // Quiet: no start for as long as a reservation would stay in force (a
    // sequential caller's pace keeps putting it off; its renewals carry it).
    const Millis quiet = last_start_at + std::max(kIdleSlotsWriteMs, reservations.idle_ms());
    if (stores_anyway() || (behind && now >= quiet)) {
      if (!refunds.empty()) flush_refunds();  // the moved rows the mark now vouches for
      write(WriteKind::PutReleased, mark);
      released_stored = mark;
      released_due.reset();
    } else if (!behind) {
      released_due.reset();
    } else {
      released_due = quiet;
    }
  }

  // ---- covering reservations (reservations.h) ------------------------------

  // Takes `amount` in `w` now, its row owed to the next record's step.
  internal::Grant take_unwritten(Window& w, int64_t amount, Millis dated) {
    const internal::Grant g = w.log.take(amount, w.ms, dated, w.cap);
    reservations.took_unwritten(w.key, g.at, amount);
    return g;
  }

  // Writes every row takes under the record left behind, as the logs now
  // hold them, and a new record (`keep`: sized to the recent rate; else
  // none), in the same step: rows written under the old record would
  // otherwise be counted twice by a restore (as rows and in the record).
  void write_reservation(bool keep) {
    rewrite_rows(reservations.owed_rows(), /*expired_stay=*/true);  // a row never stored that expired needs nothing
    if (!refunds.empty()) flush_refunds();
    if (reservations.replace(keep, windows, now)) write(WriteKind::PutReservation);
    // A new record extends the slots record's cover with it (cover_span), so
    // a sequential caller's starts do not rewrite the slots on their own.
    if (reservations.record() && slots.any_live()) write_record();
  }

  // At the end of a step (see Reservations::step).
  void record_reservation() {
    if (!cfg) {  // erased: EraseAll took the record along with the rows
      if (reservations.on()) reservations.erase();
      return;
    }
    if (auto keep = reservations.step(now, stores_anyway())) write_reservation(*keep);
    reservations.settle(now);
  }

  // At lift at most penaltyRefillFraction of the limit is available: the log
  // becomes one grant dated at the deadline carrying the larger of the floor
  // and what was still live then, so real takes keep counting.
  // Rewrites the rows of the grants refunds shrank, as the logs now hold
  // them (a grant refunded to zero, merged away or expired is deleted).
  void flush_refunds() {
    rewrite_rows(refunds, /*expired_stay=*/false);
    refunds.clear();
    moved_unwritten = false;
    refunds_due.reset();
  }

  // At the end of a step: refunds ride on a step that stores something
  // anyway, or are written alone once the bucket has been quiet a while.
  void record_refunds() {
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

  // Writes the row of each (window key, time) as the logs now hold it: its
  // amount, or a delete when the grant is gone (refunded to zero, merged
  // away, expired). `expired_stay`: an expired row is left alone (the batched
  // expiry deletes it, or it was never stored).
  template <typename Rows>
  void rewrite_rows(const Rows& rows, bool expired_stay) {
    for (const auto& [key, at] : rows) {
      for (const Window& w : windows) {
        if (w.key != key) continue;
        const auto& grants = w.log.grants();
        auto g = std::lower_bound(grants.begin(), grants.end(), at, [](const Grant& x, Millis t) { return x.at < t; });
        if (g != grants.end() && g->at == at) {
          write(WriteKind::PutGrant, at, g->amount, key);
        } else if (!expired_stay || at + w.ms > now) {
          write(WriteKind::DeleteGrant, at, 0, key);
        }
      }
    }
  }

  // Every window is refilled this way.
  void lift() {
    refunds.clear();        // every log is rewritten whole below
    reservations.lifted();  // (the record is rewritten in this step: the lift stores anyway)
    refunds_due.reset();
    for (Window& w : windows) {
      const Grant g = penalty.lifted(w.log, w.limit, w.ms, refill_fraction());
      w.log.replace(g);
      w.epoch = next_epoch++;
      write(WriteKind::ClearGrants, 0, 0, w.key);
      if (g.amount > 0) write(WriteKind::PutGrant, g.at, g.amount, w.key);
    }
    penalty.lift();
    put_penalty();
  }

  double refill_fraction() const { return config().bucket.penalty_refill_fraction; }

  void penalise(Millis delay) {
    if (penalty.impose(now, delay)) put_penalty();
  }

  // The call's own maxRetries when it set one, else the bucket's as it is now.
  int64_t max_retries_of(const Call& c) const {
    return c.max_retries >= 0 ? static_cast<int64_t>(c.max_retries) : config().retry.max_retries;
  }
  bool attempts_remain(const Call& c) const { return static_cast<int64_t>(c.attempt) <= max_retries_of(c); }

  void release(Ticket t) {
    calls.erase(t);
    --active;
  }

  // A queued call leaves without starting: rejected with `code`.
  void drop_queued(Ticket t, ErrorCode code, int64_t status = 0) {
    auto it = calls.find(t);
    queue.pop(t, it->second);
    calls.erase(it);
    reject(t, code, status);
  }

  // ---- predictions ---------------------------------------------------------

  // The earliest time the r-th unit (from 0) of the queued demand in window
  // `w` can be taken if every unit is taken as early as possible: the
  // window frees its i-th unit at S[i] (now if free, else when enough of
  // the log expires: fits_at), and a unit taken at t frees again at t + W,
  // so unit r comes no earlier than S[r mod L] + floor(r / L) * W. During a
  // penalty the log is the one the lift will leave.
  Millis unit_free_at(const Window& w, int64_t r) const {
    const int64_t i = r % w.limit;
    const int64_t rounds = r / w.limit;
    Millis first;
    if (penalty.pending()) {
      first = penalty.unit_free_after_lift(w.log, w.limit, w.ms, refill_fraction(), i);
    } else {
      first = w.log.fits_at(i + 1, w.limit, w.ms, now);
    }
    // Far beyond any real wait, and no overflow: a queue of 10^5 calls of
    // 10^9 units each is 10^14 rounds.
    constexpr Millis kFar = 1'000'000'000'000'000;  // ~31,700 years
    if (rounds > 0 && rounds > (kFar - first) / w.ms) return kFar;
    return first + rounds * w.ms;
  }

  // An upper bound on predict(c), in O(levels) per window: unit r frees no
  // later than the last grant's expiry (or the lifted grant's) plus its rounds.
  Millis predict_at_most(const Call& c) const {
    Millis at = now;
    if (penalty.pending()) at = std::max(at, penalty.until());
    for (const Window& w : windows) {
      const int64_t demand = queue.demand_through(c, w.unit);
      if (demand <= 0) continue;
      Millis last = w.log.empty() ? now : w.log.newest().at + w.ms;
      if (penalty.pending()) last = std::max(last, penalty.lifted_expiry(w.log, w.ms));
      const int64_t rounds = (demand - 1) / w.limit;
      constexpr Millis kFar = 1'000'000'000'000'000;
      if (rounds > 0 && rounds > (kFar - last) / w.ms) return kFar;
      at = std::max(at, std::max(last, now) + rounds * w.ms);
    }
    return at;
  }

  // When the queued (or arriving) call `c` could start at the earliest: the
  // latest over its windows, no earlier than now or a pending lift.
  Millis predict(const Call& c) const {
    Millis at = now;
    if (penalty.pending()) at = std::max(at, penalty.until());
    for (const Window& w : windows) {
      const int64_t demand = queue.demand_through(c, w.unit);
      if (demand > 0) at = std::max(at, unit_free_at(w, demand - 1));
    }
    return at;
  }

  // Queued calls whose deadline has come (or, overdue_only, passed before
  // now) are rejected with their predicted wait. True if any was.
  bool expire_waits(bool overdue_only = false) {
    // The common case in O(1): the earliest entry, stale or not, is not due.
    if (!queue.deadline_may_be_due(now, overdue_only)) return false;
    bool any = false;
    for (auto due = queue.next_deadline(); due && (overdue_only ? due->first < now : due->first <= now);
         due = queue.next_deadline()) {
      const Ticket t = due->second;
      const Millis at = predict(calls.at(t));
      drop_queued(t, ErrorCode::DeadlineExceeded, std::max<Millis>(0, at - now));
      any = true;
    }
    return any;
  }

  // Starts every waiting call that may start now, strictly in order: due
  // retries (oldest ticket first; they already hold a slot and arrived before
  // anyone queued), then the queue. A head that cannot go blocks the rest.
  void serve() {
    wake.reset();
    if (!cfg) {
      // Running calls of an erased bucket still time out.
      if (!deadlines.empty()) wake = deadlines.begin()->first;
      return;
    }
    // A call that can start at its deadline starts; one still queued after
    // that is rejected, and whoever was behind it may now go.
    do {
      wake.reset();
      start_what_can();
    } while (expire_waits());
    if (!backoff.empty() && (!wake || backoff.begin()->first < *wake)) wake = backoff.begin()->first;
    // Nothing can start before the penalty lifts: no point waking earlier.
    if (wake && penalty.pending()) wake = std::max(*wake, penalty.until());
    // A caller queued behind restored slots waits for the first to free.
    if (auto freed = slots.first_restored_free(timeout());
        freed && !queue.empty() && active >= static_cast<size_t>(config().concurrency)) {
      if (!wake || *freed < *wake) wake = freed;
    }
    // Timeouts and deadlines fire whatever else waits, a penalty included.
    if (!deadlines.empty() && (!wake || deadlines.begin()->first < *wake)) wake = deadlines.begin()->first;
    if (auto due = queue.next_deadline(); due && (!wake || due->first < *wake)) wake = due->first;
    record_slots();
    record_refunds();
    record_reservation();
    record_released();
    if (released_due && (!wake || *released_due < *wake)) wake = released_due;
    if (auto due = slots.write_due(); due && (!wake || *due < *wake)) wake = due;
    if (refunds_due && (!wake || *refunds_due < *wake)) wake = refunds_due;
    if (auto due = reservations.wake(now); due && (!wake || *due < *wake)) wake = due;
    history.hold(queue.size(), running);
  }

  // Starts every waiting call that may start now, strictly in order (see
  // serve); sets `wake` to when the first that cannot could.
  void start_what_can() {
    while (true) {
      Ticket t = 0;
      bool from_queue = false;
      if (!backoff.empty() && backoff.begin()->first <= now) {
        // Keep due retries in ticket order however their delays interleave.
        while (!backoff.empty() && backoff.begin()->first <= now) {
          ready.insert(backoff.begin()->second);
          calls[backoff.begin()->second].phase = Phase::Ready;
          backoff.erase(backoff.begin());
        }
      }
      if (!ready.empty()) {
        t = *ready.begin();
        if (too_large(calls[t])) {
          // The limit was lowered while its callback ran (reject_oversized
          // spares running calls), and now it can never fit. No queued
          // caller gets here: arrive checks the cost against the limit, and
          // every config change rejects the queued callers that no longer fit.
          reject(t, ErrorCode::CostTooLarge);
          ready.erase(ready.begin());
          release(t);
          continue;
        }
      } else {
        t = queue.head();
        if (t == 0 || active >= static_cast<size_t>(config().concurrency)) break;
        from_queue = true;
      }
      Call& c = calls[t];
      if (penalty.pending()) {
        wake = penalty.until();
        break;
      }
      // All or nothing: it starts when it fits in every window, and waits
      // for the latest of them (exact: each log knows when enough expires).
      Millis fits = now;
      for (const Window& w : windows) fits = std::max(fits, w.log.fits_at(c.cost_in(w.unit), w.limit, w.ms, now));
      if (fits > now) {
        wake = fits;
        break;
      }
      const bool covered = reservations.covers(c, windows, now);
      // Dated when its callback will have left, as far as the recent lags tell.
      const Millis dated = dating ? now + lags.allowance() : now;
      c.n_takes = 0;
      for (Window& w : windows) {
        Take& take = c.takes[c.n_takes++];
        take = Take{w.key, w.epoch, 0, c.cost_in(w.unit), w.incarnation};
        if (take.reserved > 0) {
          take.at =
              (covered ? take_unwritten(w, take.reserved, dated) : grant(w, take.reserved, std::nullopt, dated)).at;
          newest_take = std::max(newest_take, take.at);
          reservations.noted_take(w.key, take.reserved);
          history.charge(w.key, take.reserved);
        }
      }
      reservations.noted_start(now);
      // Rows owed (refunds, takes moved to their release) wait for the next
      // step that stores while the caller keeps its pace, as the record does.
      if (reservations.on() && refunds_due) refunds_due = std::max(*refunds_due, now + reservations.idle_ms());
      if (from_queue) {
        queue.pop(t, c);
        ++active;
      } else {
        ready.erase(ready.begin());
      }
      c.phase = Phase::Running;
      ++c.attempt;
      ++running;
      // Keyed by the primary's grant time, where every call takes (unless a
      // reconfigure changed the default unit under a queued call: then now).
      slot_started(t, c, c.takes[0].reserved > 0 ? c.takes[0].at : now);
      act(ActionKind::Start, t, c.attempt);
      note_unreleased(t, c);
      if (c.attempt == 1) history.started(now - c.arrived_at);
    }
  }

  // Queued callers whose cost can no longer fit are rejected, not left to
  // wedge the queue forever.
  void reject_oversized() {
    std::vector<Ticket> oversized;
    queue.for_each([&](Ticket t) {
      auto it = calls.find(t);
      if (it != calls.end() && too_large(it->second)) oversized.push_back(t);
    });
    for (Ticket t : oversized) drop_queued(t, ErrorCode::CostTooLarge);
    for (auto it = ready.begin(); it != ready.end();) {
      if (too_large(calls[*it])) {
        reject(*it, ErrorCode::CostTooLarge);
        release(*it);
        it = ready.erase(it);
      } else {
        ++it;
      }
    }
    for (auto it = backoff.begin(); it != backoff.end();) {
      if (too_large(calls[it->second])) {
        reject(it->second, ErrorCode::CostTooLarge);
        release(it->second);
        it = backoff.erase(it);
      } else {
        ++it;
      }
    }
  }

  // Takes `amount` in window `w` now (on its grid), or dated `at` (<= now),
  // keeping its log bounded.
  // `dated`: when the take counts from, if later than now (a callback's take
  // is dated ahead by the release allowance).
  internal::Grant grant(Window& w, int64_t amount, std::optional<Millis> at = std::nullopt,
                        std::optional<Millis> dated = std::nullopt) {
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

  // The windows of a new config. The primary keeps its log; an extra window
  // keeps its log when the new config has a window of that name counting the
  // same unit; any other extra window's rows are deleted.
  void build_windows(const Config& config) {
    std::vector<Window> old = std::move(windows);
    windows.clear();
    auto carried = [&](const std::string& name, const std::string& unit) -> Window {
      for (auto it = old.begin(); it != old.end(); ++it) {
        if (it->name == name && units[static_cast<size_t>(it->unit)] == unit) {
          Window w = std::move(*it);
          old.erase(it);
          return w;
        }
      }
      Window w;
      w.epoch = next_epoch++;
      w.incarnation = w.epoch;
      return w;
    };
    Window primary = old.empty() || old[0].key != 0 ? Window{} : std::move(old[0]);
    if (!old.empty() && old[0].key == 0) old.erase(old.begin());
    if (primary.epoch == 0) primary.incarnation = primary.epoch = next_epoch++;
    primary.name = kPrimaryWindow;
    primary.key = 0;
    primary.unit = unit_index(config.bucket.unit);
    primary.limit = config.bucket.limit_per_window;
    primary.ms = config.bucket.window_ms;
    windows.push_back(std::move(primary));
    for (const WindowConfig& wc : config.windows) {
      Window w = carried(wc.name, wc.unit);
      w.name = wc.name;
      w.cap = kMaxExtraLogEntries;
      w.key = key_of(wc.name);
      w.unit = unit_index(wc.unit);
      w.limit = wc.limit_per_window;
      w.ms = wc.window_ms;
      windows.push_back(std::move(w));
    }
    for (const Window& gone : old) write(WriteKind::ClearGrants, 0, 0, gone.key);
  }

  void apply_config(ParsedConfig parsed) {
    cfg = std::move(parsed);
    build_windows(cfg->config);
    write(WriteKind::PutConfig);
    reject_oversized();
  }

  // Checks a caller's Waiting; nullopt when it is usable.
  static std::optional<Error> waiting_problem(const Waiting& w) {
    if (!std::isfinite(w.priority)) {
      return Error::make(ErrorCode::InvalidArgument, ErrorKind::TypeError,
                         "priority must be a finite number (received " + number_text(w.priority) + ")");
    }
    if (w.priority != std::floor(w.priority) || std::fabs(w.priority) > static_cast<double>(kMaxPriority)) {
      return Error::make(ErrorCode::InvalidArgument, ErrorKind::RangeError,
                         "priority must be an integer between -" + std::to_string(kMaxPriority) + " and " +
                             std::to_string(kMaxPriority) + " (received " + number_text(w.priority) + ")");
    }
    if (w.max_wait_ms) {
      const double m = *w.max_wait_ms;
      if (!std::isfinite(m)) {
        return Error::make(ErrorCode::InvalidArgument, ErrorKind::TypeError,
                           "maxWaitMs must be a finite number, or left out to wait as long as needed (received " +
                               number_text(m) + ")");
      }
      if (m < 0 || m != std::floor(m) || m > static_cast<double>(kMaxDelayMs)) {
        return Error::make(ErrorCode::InvalidArgument, ErrorKind::RangeError,
                           "maxWaitMs must be an integer between 0 and " + std::to_string(kMaxDelayMs) + " (received " +
                               number_text(m) + ")");
      }
    }
    if (w.max_retries) {
      const double r = *w.max_retries;
      if (!std::isfinite(r)) {
        return Error::make(ErrorCode::InvalidArgument, ErrorKind::TypeError,
                           "maxRetries must be a finite number, or left out to use the bucket's retry.maxRetries "
                           "(received " +
                               number_text(r) + ")");
      }
      if (r < 0 || r != std::floor(r) || r > static_cast<double>(kMaxRetries)) {
        return Error::make(ErrorCode::InvalidArgument, ErrorKind::RangeError,
                           "maxRetries must be an integer between 0 and " + std::to_string(kMaxRetries) +
                               " (received " + number_text(r) + ")");
      }
    }
    return std::nullopt;
  }

  // A new caller joins the queue, unless its predicted start is already
  // later than it will wait: then it is rejected in this step, never queued.
  Ticket enqueue(Call c, const Waiting& waiting, Millis at) {
    advance(at);
    const Ticket t = next_ticket++;
    c.arrived_at = now;
    history.arrived();
    c.priority = static_cast<int32_t>(waiting.priority);
    if (waiting.max_retries) c.max_retries = static_cast<int32_t>(*waiting.max_retries);
    queue.note_before(c, counted_unit_indices());
    if (waiting.max_wait_ms) {
      c.wait_until = now + static_cast<Millis>(*waiting.max_wait_ms);
      // Accepted on the cheap bound when even it is within the deadline.
      const Millis start = predict_at_most(c) <= c.wait_until ? now : predict(c);
      if (start > c.wait_until) {
        reject(t, ErrorCode::DeadlineExceeded, start - now);
        serve();
        return t;
      }
    }
    auto [it, inserted] = calls.emplace(t, c);
    queue.push(t, it->second);
    serve();
    return t;
  }

  // ---- costs and usage ----------------------------------------------------

  static std::string unit_text(int64_t n, const std::string& unit) { return std::to_string(n) + " " + unit; }

  // A call's costs as given: 1 to kMaxWindows units a window counts, each
  // an integer >= 0; the default unit is 1 unless given (0 takes none of
  // it). The same rule as the client's (shim/rules.ts unitCostsProblem).
  Expected<Call> costed(const Amounts& cost) {
    if (cost.empty()) {
      return Error::make(ErrorCode::InvalidArgument, ErrorKind::RangeError,
                         "cost names no unit (received {}): give a number, or at least one unit such as { tokens: "
                         "1200 }");
    }
    if (cost.size() > kMaxWindows) {
      return Error::make(ErrorCode::InvalidArgument, ErrorKind::RangeError,
                         "cost must name at most " + std::to_string(kMaxWindows) + " units, one per window (received " +
                             std::to_string(cost.size()) + ")");
    }
    Call c;
    const int default_unit = windows[0].unit;
    c.costs[c.n_costs++] = {default_unit, 1};
    for (const Amount& a : cost) {
      const int unit = counted_unit(a.unit);
      if (unit < 0 && !valid_name(a.unit)) {
        return Error::make(ErrorCode::InvalidArgument, ErrorKind::RangeError,
                           "cost has the key " + nlohmann::json(a.unit).dump() +
                               ", which is not a unit name (a letter, then at most 31 letters, digits, _ or -)");
      }
      if (unit < 0) {
        return Error::make(ErrorCode::InvalidArgument, ErrorKind::RangeError,
                           "cost names unit " + nlohmann::json(a.unit).dump() +
                               ", which no window counts (units: " + unit_list() + ")");
      }
      if (auto problem = amount_problem(a.amount, "cost." + a.unit)) return *problem;
      bool found = false;
      for (uint8_t i = 0; i < c.n_costs; ++i) {
        if (c.costs[i].first == unit) {
          c.costs[i].second = static_cast<int64_t>(a.amount);
          found = true;
        }
      }
      if (!found && c.n_costs < kMaxWindows) c.costs[c.n_costs++] = {unit, static_cast<int64_t>(a.amount)};
    }
    if (const Window* w = too_large(c)) {
      const std::string& unit = units[static_cast<size_t>(w->unit)];
      return Error::make(ErrorCode::CostTooLarge, ErrorKind::RangeError,
                         "cost " + unit_text(c.cost_in(w->unit), unit) + " exceeds window " +
                             nlohmann::json(w->name).dump() + "'s limitPerWindow " + std::to_string(w->limit) +
                             ", so it could never be admitted");
    }
    return c;
  }

  // Checks a report's usage against the windows; nullopt when it is usable.
  std::optional<Error> usage_problem(const Amounts& usage) const {
    for (const Amount& a : usage) {
      if (counted_unit(a.unit) < 0) {
        return Error::make(ErrorCode::InvalidArgument, ErrorKind::RangeError,
                           "usage names unit " + nlohmann::json(a.unit).dump() +
                               ", which no window counts (units: " + unit_list() + ")");
      }
      if (!std::isfinite(a.amount) || a.amount < 0 || a.amount != std::floor(a.amount) || a.amount > kMaxUsage) {
        return Error::make(
            ErrorCode::InvalidArgument, std::isfinite(a.amount) ? ErrorKind::RangeError : ErrorKind::TypeError,
            "usage." + a.unit + " must be an integer between 0 and " + std::to_string(static_cast<int64_t>(kMaxUsage)) +
                " (received " + number_text(a.amount) + ")");
      }
    }
    return std::nullopt;
  }

  // Corrects the attempt's reservations by what it really used. A refund
  // shrinks the grant the attempt took, where it is dated, if that grant is
  // still live in the same log (else it is kept: the safe side); an excess is
  // charged as a new grant now, and may put the window in debt.
  void settle_usage(const Call& c, const Amounts& usage) {
    for (Window& w : windows) {
      const std::string& unit = units[static_cast<size_t>(w.unit)];
      const Amount* used = nullptr;
      for (const Amount& a : usage) {
        if (a.unit == unit) used = &a;
      }
      if (!used) continue;
      const int64_t real = static_cast<int64_t>(used->amount);
      const Take* take = c.take_in(w.key);
      // A take from an older window of this name reserved nothing in this one.
      if (take && take->incarnation != w.incarnation) take = nullptr;
      const int64_t reserved = take ? take->reserved : 0;
      if (real < reserved) {
        if (take->epoch != w.epoch || take->at + w.ms <= now) continue;
        // Stored later (see flush_refunds): a row that still holds the
        // refunded amount only over-counts until then, the safe side.
        if (w.log.shrink(take->at, reserved - real)) {
          refunds.emplace_back(w.key, take->at);
          history.charge(w.key, real - reserved);
        }
      } else if (real > reserved) {
        grant(w, real - reserved);
        history.charge(w.key, real - reserved);
      }
    }
  }

  // ---- learning from the upstream's headers -----------------------------

  // The window a reported dimension corrects: the config's map, else the
  // defaults (see LearnConfig); nullptr when none.
  Window* window_for(const std::string& dimension) {
    for (const auto& [d, name] : config().learn.map) {
      if (d != dimension) continue;
      for (Window& w : windows) {
        if (w.name == name) return &w;
      }
    }
    if (dimension == "default") return &windows[0];
    // The first window counting a unit of that name, the primary first: a
    // bucket whose default unit is tokens corrects its tokens window from
    // "tokens", and no window from "requests" unless one counts requests.
    for (Window& w : windows) {
      if (units[static_cast<size_t>(w.unit)] == dimension) return &w;
    }
    return nullptr;
  }

  // Reads the attempt's rate-limit headers (learn): for each window a
  // dimension maps to, the upstream's remaining less what this bucket
  // admitted there since the attempt started (the upstream may not have
  // counted those yet) is what it still allows; if that is less than the
  // window's own remaining, the difference is recorded as used (an observed
  // grant, dated so it leaves the window no earlier than the upstream's
  // reset, else one window from now). A remaining of 0 with a known reset
  // pauses the bucket until then. Never loosens anything.
  void learn_from(const Call& c, std::string_view text) {
    const LearnConfig& learn = config().learn;
    if (!learn.enabled) return;
    std::vector<HeaderField> fields;
    size_t i = 0;
    while (i < text.size() && fields.size() < kMaxRateLimitHeaders) {
      size_t end = text.find('\n', i);
      if (end == std::string_view::npos) end = text.size();
      const std::string_view line = text.substr(i, end - i);
      i = end + 1;
      const size_t colon = line.find(':');
      if (colon == std::string_view::npos) continue;
      std::string_view value = line.substr(colon + 1);
      while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
      fields.push_back(HeaderField{line.substr(0, colon), value});
    }
    const HeaderConvention convention = header_convention(learn.headers).value_or(HeaderConvention::Auto);
    for (const Observation& o : parse_rate_limit_headers(fields, convention, now)) {
      Window* w = window_for(o.dimension);
      if (w == nullptr) continue;
      w->learned = Window::Learned{o.limit, o.remaining, o.reset_at_ms, now};
      if (!o.remaining) continue;
      // Admitted here since this attempt started, less its own take (which
      // the upstream did count): the safe side counts the whole grant of
      // that millisecond.
      const Take* take = c.take_in(w->key);
      const int64_t own = take != nullptr && take->epoch == w->epoch ? take->reserved : 0;
      const int64_t since = std::max<int64_t>(0, w->log.live_at(1, c.started_at) - own);
      const int64_t allows = *o.remaining - since;
      // Dated so that it leaves the window at the upstream's reset (a reset
      // more than a window away: now, so one window), never in the future.
      const Millis at = o.reset_at_ms ? std::min<Millis>(*o.reset_at_ms - w->ms, now) : now;
      if (at + w->ms <= now) continue;  // the reset has passed: nothing to hold
      // The difference from what the window has left now is held until the
      // reset. (Its own grants that leave before then free room the upstream
      // may not have: holding against those too would treat every reset as
      // "all at once", and a sliding upstream frees its units one by one;
      // the next response corrects it.) A remaining of 0 so fills the window
      // until the reset: every caller that needs it waits, before any 429,
      // and it is free again at the reset (no penalty, whose lift would keep
      // half the limit for another window).
      const int64_t ours = std::max<int64_t>(0, w->limit - w->log.used());
      if (allows < ours) grant(*w, ours - std::max<int64_t>(0, allows), at);
    }
  }

  Error not_configured() const {
    return Error::make(ErrorCode::NoSuchLimiter, ErrorKind::Error,
                       "this limiter has not been configured: call configure(name, config) first");
  }

  Error unknown_ticket(Ticket t, const char* what) const {
    return Error::make(ErrorCode::UnknownTicket, ErrorKind::RangeError,
                       std::string(what) + " for ticket " + std::to_string(t) + ", which has no running attempt");
  }

  // The running attempt of `t` has ended (reported, threw, or its caller is
  // gone): its slot record and deadline go, then time moves on. nullptr if
  // `t` has no running attempt.
  Call* end_attempt(Ticket t, Millis at) {
    Call* c = running_call(t);
    if (!c) return nullptr;
    attempt_ended(t, *c);
    advance(at);
    return c;
  }

  // Finds a call whose callback is running; nullptr if there is none.
  Call* running_call(Ticket t) {
    auto it = calls.find(t);
    return it != calls.end() && it->second.phase == Phase::Running ? &it->second : nullptr;
  }

  // Common ending of a running attempt for a caller that is gone.
  bool settle_if_abandoned(Ticket t, Call& c) {
    if (c.caller == Caller::Waiting) return false;
    if (c.caller == Caller::Cancelled) reject(t, ErrorCode::Cancelled);
    release(t);
    return true;
  }

  // The call's attempt failed in a way that is retried: it waits `delay`,
  // holding its slot. A caller that gave up while it ran gets Cancelled
  // instead, and its slot goes back.
  void retry_after(Ticket t, Call& c, Millis delay) {
    if (c.withdrawn) {
      reject(t, ErrorCode::Cancelled);
      release(t);
    } else if (delay <= 0) {
      c.phase = Phase::Ready;
      ready.insert(t);
    } else {
      c.phase = Phase::Backoff;
      c.due = now + delay;
      backoff.emplace(c.due, t);
    }
  }
};

}  // namespace internal

using internal::Call;
using internal::Caller;
using internal::Phase;

Engine::Engine() : s_(std::make_unique<internal::State>()) {}
Engine::~Engine() = default;
Engine::Engine(Engine&&) noexcept = default;
Engine& Engine::operator=(Engine&&) noexcept = default;

Status Engine::configure(std::string_view config_json, Millis now) {
  auto parsed = parse_config(config_json);
  if (!parsed.ok()) return parsed.error();
  s_->advance(now);
  s_->apply_config(std::move(*parsed));
  s_->advance(now);  // a shorter window may have expired grants
  s_->serve();
  return Status::success();
}

Status Engine::reconfigure(std::string_view patch_json, Millis now) {
  if (!s_->cfg) return s_->not_configured();
  auto merged = apply_config_patch(s_->cfg->text, patch_json);
  if (!merged.ok()) return merged.error();
  s_->advance(now);
  s_->apply_config(std::move(*merged));
  s_->advance(now);
  s_->serve();
  return Status::success();
}

void Engine::restore(const Snapshot& snap, Millis now) {
  restore_begin(snap.config_text ? std::optional<std::string_view>(*snap.config_text) : std::nullopt, snap.forced_until,
                snap.lift_pending, now);
  if (snap.released_before) restore_released(*snap.released_before);
  for (const auto& [at, amount] : snap.grants) s_->restore_row(0, at, amount);
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
  const Millis latest = std::max(s_->now, now);
  internal::History history = std::move(s_->history);  // a rebuild keeps it; storage may lack some
  const bool reserving = s_->reservations.on();
  // A rebuild keeps counting starts (the host's marks stay valid) and the lags seen.
  const bool dating = s_->dating;
  const uint64_t starts_emitted = s_->starts_emitted;
  const internal::ReleaseLags lags = s_->lags;
  const std::optional<internal::SlotKey> slot_key = s_->slots.key();
  s_ = std::make_unique<internal::State>();
  if (slot_key) s_->slots.set_key(*slot_key);  // this engine's identities stay its own
  s_->history = std::move(history);
  s_->history.mark_unsaved();
  s_->now = latest;
  s_->reservations.set_on(reserving);
  s_->dating = dating;
  s_->starts_emitted = starts_emitted;
  s_->lags = lags;
  s_->restoring.emplace();
  if (!config_text) return;
  auto parsed = parse_config(*config_text);
  // A stored config that no longer validates cannot be run safely; the rows
  // stay untouched for a person to inspect, and the bucket reads as absent.
  if (!parsed.ok()) return;
  s_->cfg = std::move(*parsed);
  s_->build_windows(s_->cfg->config);

  if (s_->penalty.restore(forced_until, lift_pending, latest)) s_->put_penalty();
  s_->restoring->latest_base = std::max(latest, s_->penalty.until());
}

void Engine::restore_rows(const double* rows, size_t count) {
  for (size_t i = 0; i < count; ++i) s_->restore_row(0, rows[2 * i], rows[2 * i + 1]);
}

void Engine::restore_window_rows(std::string_view name, const double* rows, size_t count) {
  internal::State& s = *s_;
  if (!s.restoring || !s.cfg || count == 0) return;
  for (size_t w = 1; w < s.windows.size(); ++w) {
    if (s.windows[w].name == name) {
      for (size_t i = 0; i < count; ++i) s.restore_row(w, rows[2 * i], rows[2 * i + 1]);
      return;
    }
  }
  // A window the config no longer has (or never had): its rows go.
  const int key = s.key_of(std::string(name));
  auto& stale = s.restoring->stale_keys;
  if (std::find(stale.begin(), stale.end(), key) == stale.end()) stale.push_back(key);
}

void Engine::restore_slots(std::string_view slots_text) {
  if (s_->restoring && s_->cfg)
    s_->active += static_cast<size_t>(s_->slots.restore(slots_text, s_->now, s_->timeout()));
}

void Engine::restore_reservation(std::string_view text) {
  if (s_->restoring) s_->restoring->reservation_text = std::string(text);
}

void Engine::restore_released(double released_before) {
  if (!s_->restoring) return;
  // Damage (not a number) reads as a mark before every row: all dated at the restore.
  const double mark = std::isfinite(released_before) ? std::ceil(released_before) : 0.0;
  s_->restoring->released_before =
      static_cast<Millis>(std::clamp(mark, 0.0, static_cast<double>(internal::kEveryRowReleased)));
  s_->released_stored = s_->restoring->released_before;
}

void Engine::restore_end() {
  if (!s_->restoring) return;
  const internal::Restoring restoring = std::move(*s_->restoring);
  s_->restoring.reset();
  if (!s_->cfg) return;
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
    reserved = internal::Reservations::read(*restoring.reservation_text, s_->windows, s_->now);
  }
  for (int key : restoring.stale_keys) s_->write(WriteKind::ClearGrants, 0, 0, key);
  for (size_t w = 0; w < s_->windows.size(); ++w) {
    internal::Window& window = s_->windows[w];
    bool changed = window.log.normalise() || restoring.changed[w];
    std::optional<internal::Grant> reserved_row;
    if (const int64_t units = reserved ? reserved->units_in(window.key) : 0;
        units > 0 && reserved->until + window.ms > s_->now) {
      reserved_row = window.log.take_at(units, reserved->until);
    }
    while (static_cast<int64_t>(window.log.size()) > window.cap) {
      window.log.merge_oldest();
      changed = true;
    }
    if (changed) {
      s_->write(WriteKind::ClearGrants, 0, 0, window.key);
      for (const internal::Grant& g : window.log.grants()) s_->write(WriteKind::PutGrant, g.at, g.amount, window.key);
    } else if (reserved_row && !s_->reservations.on()) {
      s_->write(WriteKind::PutGrant, reserved_row->at, reserved_row->amount, window.key);
    }
    if (reserved_row && s_->reservations.on()) {
      s_->reservations.owe_restored(window.key, reserved_row->at, reserved->units_in(window.key));
    }
  }
  if (reserved && s_->reservations.on()) {
    s_->reservations.restored(std::move(*reserved), s_->now);
  } else if (reserved) {
    s_->write(WriteKind::PutReservation);  // none now: the rows above hold it
  }
  // Every restored row is dated no earlier than its callback left (the mark
  // re-dated those it did not cover): the next mark covers them all.
  for (const internal::Window& window : s_->windows) {
    if (!window.log.empty()) s_->newest_take = std::max(s_->newest_take, window.log.newest().at);
  }
  s_->advance(s_->now);
  s_->serve();
}

void Engine::erase(Millis now) {
  s_->advance(now);
  s_->history.clear();  // EraseAll deletes its rows too
  for (auto& [t, c] : s_->calls) {
    if (c.phase == Phase::Running) {
      if (c.caller != Caller::Settled) s_->reject(t, ErrorCode::NoSuchLimiter);
      c.caller = Caller::Settled;
    }
  }
  s_->queue.for_each([&](Ticket t) {
    if (s_->calls.count(t)) {
      s_->reject(t, ErrorCode::NoSuchLimiter);
      s_->calls.erase(t);
    }
  });
  for (Ticket t : s_->ready) {
    s_->reject(t, ErrorCode::NoSuchLimiter);
    s_->release(t);
  }
  for (const auto& [due, t] : s_->backoff) {
    s_->reject(t, ErrorCode::NoSuchLimiter);
    s_->release(t);
  }
  s_->queue.clear();
  s_->ready.clear();
  s_->backoff.clear();
  s_->active -= static_cast<size_t>(s_->slots.erase());
  s_->cfg.reset();
  s_->windows.clear();
  s_->refunds.clear();
  s_->refunds_due.reset();
  s_->penalty.clear();
  s_->write(WriteKind::EraseAll);
  s_->released_stored.reset();  // EraseAll takes the mark along
  s_->released_due.reset();
  // EraseAll deletes the slots record, but callbacks still running keep their
  // slots (in a bucket configured again too): the next step with a config
  // finds them uncovered and writes them.
  s_->serve();  // no bucket: the wake is only the running attempts' deadlines
}

Expected<Ticket> Engine::arrive(double cost, Millis now) { return arrive(cost, Waiting{}, now); }

Expected<Ticket> Engine::arrive(const Amounts& cost, Millis now) { return arrive(cost, Waiting{}, now); }

Expected<Ticket> Engine::arrive(double cost, const Waiting& waiting, Millis now) {
  if (!s_->cfg) return s_->not_configured();
  if (auto problem = internal::amount_problem(cost, "cost")) return *problem;
  if (cost > static_cast<double>(s_->limit())) {
    return Error::make(ErrorCode::CostTooLarge, ErrorKind::RangeError,
                       "cost " + internal::number_text(cost) + " exceeds limitPerWindow " +
                           std::to_string(s_->limit()) + ", so it could never be admitted");
  }
  Call c;
  c.costs[c.n_costs++] = {s_->windows[0].unit, static_cast<int64_t>(cost)};
  if (const internal::Window* w = s_->too_large(c)) {  // another window counting the default unit
    return Error::make(ErrorCode::CostTooLarge, ErrorKind::RangeError,
                       "cost " + internal::number_text(cost) + " exceeds window " + nlohmann::json(w->name).dump() +
                           "'s limitPerWindow " + std::to_string(w->limit) + ", so it could never be admitted");
  }
  if (auto problem = internal::State::waiting_problem(waiting)) return *problem;
  return s_->enqueue(c, waiting, now);
}

Expected<Ticket> Engine::arrive(const Amounts& cost, const Waiting& waiting, Millis now) {
  if (!s_->cfg) return s_->not_configured();
  auto c = s_->costed(cost);
  if (!c.ok()) return c.error();
  if (auto problem = internal::State::waiting_problem(waiting)) return *problem;
  return s_->enqueue(*c, waiting, now);
}

Status Engine::report(Ticket t, const Report& r, Millis now) {
  if (r.usage && s_->cfg && s_->running_call(t)) {
    if (auto problem = s_->usage_problem(*r.usage)) return *problem;
  }
  s_->release_reported(t, now);
  Call* c = s_->end_attempt(t, now);
  if (!c) return s_->unknown_ticket(t, "report");
  // Settled first, at the report's time, so a refund frees room for the calls served below.
  if (r.usage && s_->cfg) s_->settle_usage(*c, *r.usage);
  if (r.rate_limit_headers && s_->cfg) {
    s_->learn_from(*c, *r.rate_limit_headers);
    s_->advance(now);  // a reset already past lifts at once
  }
  const bool rate_limited = r.status == 429 || r.rate_limited;
  if (rate_limited && s_->cfg) {
    s_->history.rate_limited();
    // A 429 pauses everyone, even when the caller that saw it has gone.
    s_->penalise(internal::penalty_delay(s_->config().retry, r, c->attempt, s_->now));
    s_->advance(now);  // a zero delay lifts at once
  }
  // Past this point the bucket exists: erase() settles every running call,
  // and only erase() removes the config from an engine that has calls.
  if (s_->settle_if_abandoned(t, *c)) {
    s_->serve();
    return Status::success();
  }
  if (rate_limited) {
    // A 429 outranks any failure: everyone is paused (above); retry this call.
    if (s_->attempts_remain(*c)) {
      s_->retry_after(t, *c, 0);
    } else {
      s_->reject(t, ErrorCode::CallFailed, r.status != 0 ? r.status : 429);
      s_->release(t);
    }
  } else if (r.failure != Failure::None) {
    if (r.failure == Failure::Retryable && s_->attempts_remain(*c)) {
      s_->retry_after(t, *c, internal::backoff_delay(s_->config().retry, c->attempt));
    } else {
      s_->reject(t, ErrorCode::CallFailed, r.status);
      s_->release(t);
    }
  } else {
    s_->act(ActionKind::Resolve, t, c->attempt);
    s_->release(t);
  }
  s_->serve();
  return Status::success();
}

Status Engine::threw(Ticket t, Millis now) {
  s_->release_reported(t, now);
  Call* c = s_->end_attempt(t, now);
  if (!c) return s_->unknown_ticket(t, "throw");
  if (!s_->settle_if_abandoned(t, *c)) {  // the bucket exists (see report)
    if (s_->attempts_remain(*c)) {
      s_->retry_after(t, *c, internal::backoff_delay(s_->config().retry, c->attempt));
    } else {
      s_->reject(t, ErrorCode::CallbackThrew);
      s_->release(t);
    }
  }
  s_->serve();
  return Status::success();
}

Status Engine::cancel(Ticket t, Millis now) {
  auto it = s_->calls.find(t);
  if (it == s_->calls.end()) return s_->unknown_ticket(t, "cancel");
  // Acted on before time moves, as report() does: the advance may time out
  // this very call (its deadline passed, the timer not yet fired) and erase it.
  s_->history.advance(std::max(s_->now, now));  // its drop counts in the interval it happens in
  Call& c = it->second;
  switch (c.phase) {
    case Phase::Queued:
      s_->drop_queued(t, ErrorCode::Cancelled);
      break;
    case Phase::Running:
      // Keeps its slot: the work is still in flight. A call erase() already
      // settled stays settled.
      if (c.caller == Caller::Waiting) c.caller = Caller::Cancelled;
      break;
    case Phase::Ready:
      s_->ready.erase(t);
      s_->reject(t, ErrorCode::Cancelled);
      s_->release(t);
      break;
    case Phase::Backoff: {
      auto range = s_->backoff.equal_range(c.due);
      for (auto b = range.first; b != range.second; ++b) {
        if (b->second == t) {
          s_->backoff.erase(b);
          break;
        }
      }
      s_->reject(t, ErrorCode::Cancelled);
      s_->release(t);
      break;
    }
  }
  s_->advance(now);
  s_->serve();
  return Status::success();
}

Status Engine::withdraw(Ticket t, Millis now) {
  auto it = s_->calls.find(t);
  if (it == s_->calls.end()) return s_->unknown_ticket(t, "withdraw");
  // Waiting (queued, or between attempts): the same as a cancel.
  if (it->second.phase != Phase::Running) return cancel(t, now);
  it->second.withdrawn = true;  // its outcome stands unless it would be retried
  s_->advance(now);
  s_->serve();
  return Status::success();
}

std::optional<Millis> Engine::predicted_start(Ticket t) const {
  auto it = s_->calls.find(t);
  if (it == s_->calls.end() || it->second.phase != Phase::Queued || !s_->cfg) return std::nullopt;
  return s_->predict(it->second);
}

Status Engine::gone(Ticket t, Millis now) {
  Call* c = s_->end_attempt(t, now);
  if (!c) return s_->unknown_ticket(t, "gone");
  if (c->caller != Caller::Settled) s_->reject(t, ErrorCode::CallerGone);
  s_->release(t);
  s_->serve();
  return Status::success();
}

void Engine::tick(Millis now) {
  s_->advance(now);
  s_->serve();
}

uint64_t Engine::starts_emitted() const { return s_->starts_emitted; }

void Engine::released(uint64_t through, Millis now) {
  s_->advance(now);
  s_->release_through(through);
  s_->serve();
}

Status Engine::pause(double ms, Millis now) {
  if (!s_->cfg) return s_->not_configured();
  if (!std::isfinite(ms)) {
    return Error::make(ErrorCode::InvalidArgument, ErrorKind::TypeError,
                       "pause ms must be a finite number (received " + internal::number_text(ms) + ")");
  }
  if (ms < 0 || ms != std::floor(ms) || ms > static_cast<double>(kMaxDelayMs)) {
    return Error::make(ErrorCode::InvalidArgument, ErrorKind::RangeError,
                       "pause ms must be an integer between 0 and " + std::to_string(kMaxDelayMs) + " (received " +
                           internal::number_text(ms) + ")");
  }
  s_->advance(now);
  s_->penalise(static_cast<Millis>(ms));
  s_->advance(now);  // a zero pause lifts at once
  s_->serve();
  return Status::success();
}

namespace {
// What the upstream's headers last said about a window (null: nothing yet).
// A document this engine wrote or already validated, parsed through the
// same (pointer range) instantiation of the parser as every other parse:
// each distinct input type would link a whole second parser into core.wasm.
nlohmann::json parse_checked(const std::string& text) {
  return nlohmann::json::parse(text.data(), text.data() + text.size());
}

nlohmann::json learned_json(const internal::Window& w) {
  if (!w.learned) return nullptr;
  auto field = [](const std::optional<int64_t>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
  return {{"limit", field(w.learned->limit)},
          {"remaining", field(w.learned->remaining)},
          {"reset", field(w.learned->reset_at)},
          {"seenAt", w.learned->seen_at}};
}
}  // namespace

Expected<std::string> Engine::stats(Millis now) {
  if (!s_->cfg) return s_->not_configured();
  s_->advance(now);
  s_->serve();
  const internal::State& s = *s_;
  const bool penalised = s.penalty.pending();
  // When a window's newest grant leaves it (a penalty's lift refills it then).
  auto reset_of = [&](const internal::Window& w) {
    Millis at = w.log.empty() ? s.now : w.log.newest().at + w.ms;
    return penalised ? std::max(at, s.penalty.until() + w.ms) : at;
  };
  const int64_t used = s.log().used();
  const Millis reset_at = reset_of(s.windows[0]);
  nlohmann::json windows = nlohmann::json::array();
  for (const internal::Window& w : s.windows) {
    const int64_t in_window = w.log.used();
    windows.push_back({
        {"name", w.name},
        {"unit", s.units[static_cast<size_t>(w.unit)]},
        {"limit", w.limit},
        {"windowInMs", w.ms},
        {"used", in_window},
        {"remaining", penalised ? 0 : std::max<int64_t>(0, w.limit - in_window)},
        {"resetAt", reset_of(w)},
        {"debt", std::max<int64_t>(0, in_window - w.limit)},
        {"learned", learned_json(w)},
    });
  }
  nlohmann::json units = s.counted_units();
  // The queue's first and last calls' predicted starts, and its levels.
  nlohmann::json predicted = {{"head", nullptr}, {"tail", nullptr}};
  nlohmann::json by_priority = nlohmann::json::array();
  if (!s.queue.empty()) {
    const Ticket head = s_->queue.head();
    const Ticket tail = s_->queue.tail();
    if (head != 0) predicted["head"] = s.predict(s.calls.at(head));
    if (tail != 0) predicted["tail"] = s.predict(s.calls.at(tail));
    for (const auto& [priority, live] : s.queue.by_priority())
      by_priority.push_back({{"priority", priority}, {"queued", live}});
  }

  // The newest grants are the interesting ones; a huge log is summarised.
  constexpr size_t kStatsGrants = 1000;
  nlohmann::json grants = nlohmann::json::array();
  const auto& log = s.log().grants();
  const size_t skip = log.size() > kStatsGrants ? log.size() - kStatsGrants : 0;
  for (size_t i = skip; i < log.size(); ++i) grants.push_back({log[i].at, log[i].amount});

  nlohmann::json out = {
      {"config", parse_checked(s.cfg->text)},
      {"effective", parse_checked(effective_config_json(s.config()))},
      {"now", s.now},
      {"limit", s.limit()},
      {"windowInMs", s.window()},
      {"used", used},
      {"remaining", penalised ? 0 : std::max<int64_t>(0, s.limit() - used)},
      {"resetAt", reset_at},
      {"penalised", penalised},
      {"forcedUntil", s.penalty.until() > 0 ? nlohmann::json(s.penalty.until()) : nlohmann::json(nullptr)},
      {"active", s.active},
      {"running", s.running},
      {"restoredSlots", s.slots.restored_held()},
      {"queued", s.queue.size()},
      {"liveGrants", log.size()},
      {"grants", std::move(grants)},
      {"grantsTruncated", skip > 0},
      {"windows", std::move(windows)},
      {"units", std::move(units)},
      {"predictedStart", std::move(predicted)},
      {"queuedByPriority", std::move(by_priority)},
      {"reservation", s.reservations.json(s.windows)},
      {"releaseLag", s.lags.json()},
  };
  return out.dump();
}

namespace {
// Window names by write number, for the history: the primary is "bucket".
std::vector<std::string> window_names(const std::vector<std::string>& keys) {
  std::vector<std::string> names = keys;
  names[0] = kPrimaryWindow;
  return names;
}
}  // namespace

Expected<std::string> Engine::history_json(int64_t resolution_ms, Millis now) {
  if (!s_->cfg) return s_->not_configured();
  if (resolution_ms != internal::History::kFineMs && resolution_ms != internal::History::kCoarseMs) {
    return Error::make(
        ErrorCode::InvalidArgument, ErrorKind::RangeError,
        "history resolution must be 10000 (10 s) or 60000 (1 min) ms (received " + std::to_string(resolution_ms) + ")");
  }
  s_->history.advance(std::max(s_->now, now));
  return s_->history.json(resolution_ms, window_names(s_->keys));
}

std::vector<HistoryRow> Engine::history_unsaved() {
  if (!s_->history.any_unsaved()) return {};
  return s_->history.unsaved(window_names(s_->keys));
}

Millis Engine::history_keep_from(int64_t resolution_ms) const { return s_->history.keep_from(resolution_ms); }

std::vector<HistoryRow> Engine::history_closed() {
  if (!s_->history.any_closed_fine()) return {};
  return s_->history.closed_fine(window_names(s_->keys));
}

void Engine::restore_history(const std::vector<HistoryRow>& rows, Millis now) {
  if (!s_->cfg) return;
  s_->history.advance(std::max(s_->now, now));
  s_->history.restore(rows, [this](const std::string& name) { return name == kPrimaryWindow ? 0 : s_->key_of(name); });
}

std::optional<Millis> Engine::next_wake() const { return s_->wake; }
bool Engine::configured() const { return s_->cfg.has_value(); }
const std::string& Engine::config_text() const { return s_->cfg ? s_->cfg->text : s_->empty_text; }
std::string Engine::slots_text() const { return s_->slots.text(); }
std::string Engine::reservation_text() const { return s_->reservations.text(s_->windows); }
void Engine::set_reservations(bool on) {
  if (!on && s_->reservations.record()) {
    s_->write_reservation(false);  // rows written, record cleared
    s_->reservations.switched_off();
  }
  s_->reservations.set_on(on);
}
bool Engine::reservations() const { return s_->reservations.on(); }
void Engine::set_release_dating(bool on) {
  s_->dating = on;
  if (!on) {
    s_->unreleased.clear();
    s_->lags.drop_allowance();
    s_->released_due.reset();
  }
}
bool Engine::release_dating() const { return s_->dating; }
std::string Engine::running_slots_text() const { return s_->slots.running_text(); }

void Engine::set_slot_key(uint64_t k0, uint64_t k1) { s_->slots.set_key(internal::SlotKey{k0, k1}); }

std::optional<Engine::AttemptSlot> Engine::attempt_slot(Ticket t) const {
  auto it = s_->calls.find(t);
  const auto& key = s_->slots.key();
  if (!key || it == s_->calls.end() || it->second.phase != Phase::Running) return std::nullopt;
  const internal::Call& c = it->second;
  internal::SlotIdentity id{t, c.attempt, c.started_at, c.deadline - c.timeout, 0};
  id.tag = internal::slot_tag(*key, id);
  return AttemptSlot{internal::slot_identity_text(id), c.timeout};
}

Expected<bool> Engine::finished(std::string_view slot, double ran_ms, Millis now) {
  const auto id = internal::parse_slot_identity(slot);
  if (!id) {
    const std::string shown(slot.substr(0, 80));
    return Error::make(ErrorCode::InvalidArgument, ErrorKind::TypeError,
                       "finished(slot): slot must be the identity the object handed the callback when it started it, "
                       "\"ticket.attempt.key.start.tag\" (received \"" +
                           shown + (slot.size() > 80 ? "...\")" : "\")"));
  }
  if (!std::isfinite(ran_ms) || ran_ms < 0) {
    return Error::make(
        ErrorCode::InvalidArgument, ErrorKind::RangeError,
        "finished(slot, ranMs): ranMs must be a finite number >= 0, how long the callback ran (received " +
            internal::number_text(ran_ms) + ")");
  }
  s_->advance(now);
  const bool released = s_->cfg && s_->slots.release_finished(*id, ran_ms, s_->now, s_->timeout());
  if (released) --s_->active;
  s_->serve();
  return released;
}
const Config* Engine::config() const { return s_->cfg ? &s_->cfg->config : nullptr; }
const std::string& Engine::window_key(int window) const {
  return window >= 0 && static_cast<size_t>(window) < s_->keys.size() ? s_->keys[static_cast<size_t>(window)]
                                                                      : s_->empty_text;
}

int Engine::unit_number(std::string_view unit) const {
  for (size_t i = 0; i < s_->units.size(); ++i) {
    if (s_->units[i] == unit) return static_cast<int>(i);
  }
  return -1;
}
const std::string& Engine::unit_name(int unit) const {
  return unit >= 0 && static_cast<size_t>(unit) < s_->units.size() ? s_->units[static_cast<size_t>(unit)]
                                                                   : s_->empty_text;
}

Expected<Amounts> parse_amounts(std::string_view json_text, std::string_view what) {
  const std::string name(what);
  auto invalid = [&](ErrorKind kind, const std::string& detail) {
    return Error::make(ErrorCode::InvalidArgument, kind, detail);
  };
  // Flat by contract: refuse nesting before anything walks it recursively.
  if (json_text.size() > 4096) return invalid(ErrorKind::RangeError, name + " is too large (over 4096 bytes of JSON)");
  if (json_text.find_first_of("[") != std::string_view::npos ||
      std::count(json_text.begin(), json_text.end(), '{') > 1) {
    return invalid(ErrorKind::TypeError, name + " must be a flat object of units to integers");
  }
  const auto doc = nlohmann::json::parse(json_text.data(), json_text.data() + json_text.size(), nullptr,
                                         /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return invalid(ErrorKind::TypeError, name + " must be an object of units to integers");
  }
  if (doc.size() > kMaxWindows) {
    return invalid(ErrorKind::RangeError, name + " must name at most " + std::to_string(kMaxWindows) +
                                              " units, one per window (received " + std::to_string(doc.size()) + ")");
  }
  Amounts out;
  for (auto it = doc.begin(); it != doc.end(); ++it) {
    if (!it.value().is_number()) {
      return invalid(ErrorKind::TypeError,
                     name + "." + it.key() + " must be a number (received " +
                         it.value().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + ")");
    }
    out.push_back(Amount{it.key(), it.value().get<double>()});
  }
  return out;
}
const std::vector<Write>& Engine::writes() const { return s_->writes; }
const std::vector<Action>& Engine::actions() const { return s_->actions; }
void Engine::clear_output() {
  s_->writes.clear();
  s_->actions.clear();
}

namespace internal {

Millis EngineInspector::now() const { return s_.now; }
Millis EngineInspector::forced_until() const { return s_.penalty.until(); }
int64_t EngineInspector::used() const { return s_.log().used(); }
size_t EngineInspector::log_entries() const { return s_.log().size(); }
size_t EngineInspector::active() const { return s_.active; }
size_t EngineInspector::running() const { return s_.running; }
size_t EngineInspector::queued() const { return s_.queue.size(); }
size_t EngineInspector::pending_refunds() const { return s_.refunds.size(); }
int64_t EngineInspector::unwritten(const std::string& window) const {
  for (const Window& w : s_.windows) {
    if (w.name == window) {
      return s_.reservations.unwritten_in(w.key);
    }
  }
  return 0;
}
std::vector<std::pair<Millis, int64_t>> EngineInspector::grants(const std::string& window) const {
  std::vector<std::pair<Millis, int64_t>> out;
  for (const Window& w : s_.windows) {
    if (w.name != window) continue;
    for (const auto& g : w.log.grants()) out.emplace_back(g.at, g.amount);
  }
  return out;
}
std::vector<std::pair<Millis, int64_t>> EngineInspector::grants() const {
  std::vector<std::pair<Millis, int64_t>> out;
  out.reserve(s_.log().size());
  for (const auto& g : s_.log().grants()) out.emplace_back(g.at, g.amount);
  return out;
}

}  // namespace internal

}  // namespace drl
