// The scheduler: the engine's state and the steps that drive its
// components. Every public event of drl::Engine (engine.cpp) moves time
// forward (advance), changes calls, then ends with serve(), which starts
// what may start, decides what the step stores, and when to wake next.
//
// Its parts own their state and say so at the top of their headers:
//   wait_queue.h    the queue of first starts, by priority, with deadlines
//   slots_record.h  which attempts may still run after a restart
//   reservations.h  covering reservations (rows a step may defer)
//   penalty.h       the shared pause and its lift; retry delays
//   release_lags.h  how far ahead of its start a take is dated
//   history.h       what happened, per interval
//   arguments.h     the rules for a caller's arguments
//   attempt_deadlines.h  when running attempts time out
//   windows.h       the windows, their logs, and the unit and window names
//   start_predictor.h  when a queued call can start
//   row_writer.h    what a step stores, and the rows owed to a later one
// What is left here is what ties them together: the calls and their
// phases. The step functions live in four files:
//   scheduler.cpp          admission, starts, the queue, timeouts, config
//   scheduler_writes.cpp   the records a step stores
//   scheduler_release.cpp  takes dated when their callbacks leave
//   scheduler_usage.cpp    costs, usage reports and learned headers
//
// What drl::Engine does for a configure and two arrivals:
//
// Example:
//   drl::internal::Scheduler s;
//   auto parsed = drl::parse_config(R"({"bucket":{"limitPerWindow":1,"windowInMs":1000},"concurrency":5})");
//   s.advance(1000);
//   s.apply_config(std::move(*parsed));
//   drl::internal::Call first, second;
//   first.set_cost(s.windows[0].unit, 1);
//   second.set_cost(s.windows[0].unit, 1);
//   const drl::Ticket a = s.enqueue(std::move(first), drl::Waiting{}, 1000);
//   const drl::Ticket b = s.enqueue(std::move(second), drl::Waiting{}, 1000);
//   assert(s.calls.at(a).phase == drl::internal::Phase::Running);  // it fit: started at once
//   assert(s.calls.at(b).phase == drl::internal::Phase::Queued);   // the window is full until 2000
//   assert(s.queue.head() == b);
//   assert(s.actions.size() == 1);  // one action for the host: start a
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "arguments.h"
#include "attempt_deadlines.h"
#include "call.h"
#include "drl/config.h"
#include "drl/engine.h"
#include "history.h"
#include "lease_child.h"
#include "penalty.h"
#include "release_lags.h"
#include "reservations.h"
#include "ring.h"
#include "row_writer.h"
#include "sliding_log.h"
#include "slots_record.h"
#include "start_predictor.h"
#include "wait_queue.h"
#include "windows.h"

namespace drl::internal {

// The release mark when every start has been released: beyond any row's
// date (the largest integer a JS number holds exactly).
constexpr Millis kEveryRowReleased = 9'007'199'254'740'991;

// A restart after a crash moves the few rows past the release mark: those
// are written alone, up to this many a window.
constexpr uint8_t kMovedRowsWrittenAlone = 64;

struct Restoring {
  Millis latest_base = 0;                       // max(now, forced_until): a grant may be dated up to a grid step later
  std::optional<std::string> reservation_text;  // the reservation record as stored (restore_reservation)
  std::array<bool, kMaxWindows> changed{};      // damage or a merge: every row of that window is rewritten
  // Rows restored at another date or amount than stored (re-dated by the
  // release mark, pulled back from the future, capped): up to
  // kMovedRowsWrittenAlone of a window are written again alone; beyond that
  // (a mark lost to damage) the window is rewritten (restore_end).
  struct Moved {
    size_t window;
    Millis from;  // the stored row's key
    Millis to;    // its date now
  };
  std::vector<Moved> moved;
  std::array<uint8_t, kMaxWindows> moved_in{};  // entries of `moved` per window
  std::vector<int> stale_keys;                  // windows with stored rows the config no longer has
  std::optional<Millis> released_before;        // the release mark as stored (restore_released)
};

// A started attempt whose callback the host has not yet reported as gone
// out (Engine::released): what it took, so the release can move its takes
// to when the callback really left.
struct Unreleased {
  uint64_t seq = 0;  // its number among the starts (Scheduler::starts_emitted)
  Ticket ticket = 0;
  uint32_t attempt = 0;
  Millis decided = 0;   // when the engine started it
  Millis first_at = 0;  // the earliest date among its takes (now, when it took nothing)
  std::array<Take, kMaxWindows> takes{};
  uint8_t n_takes = 0;
  uint8_t shadowed = 0;  // bit i: takes[i] is a charge of its own, not the attempt's take
};

// A report's usage by unit number (Scheduler::usage_of): at most one entry
// per unit a window counts.
// Left uninitialised past `size`: it is filled in place on a report's path,
// where zeroing it and copying it through an Expected cost a refund a fifth
// of its time.
struct Usage {
  std::array<std::pair<int, int64_t>, kMaxWindows> units;
  size_t size = 0;
  // The amount used of `unit`, or nullptr when the report did not name it.
  const int64_t* of(int unit) const {
    for (size_t i = 0; i < size; ++i) {
      if (units[i].first == unit) return &units[i].second;
    }
    return nullptr;
  }
};

struct Scheduler {
  std::optional<ParsedConfig> cfg;
  std::string empty_text;
  Millis now = 0;  // the latest time seen; time never goes backwards

  Windows windows;  // [0] the primary window; empty when unconfigured (windows.h)
  Penalty penalty;  // the shared pause and its lift (penalty.h)

  Calls calls;
  // Nodes of calls that ended, reused by the next arrivals (admit): a
  // steady caller's take then allocates neither a call nor its takes. A
  // few, so the memory they hold stays small.
  static constexpr size_t kSpareCalls = 8;
  std::vector<Calls::Node> spare_calls;
  WaitQueue queue{calls};                             // first starts: by priority (highest first), then arrival
  StartPredictor predictor{windows, queue, penalty};  // when a queued call can start (start_predictor.h)
  std::multimap<Millis, Ticket> backoff;              // retries waiting out their delay
  std::set<Ticket> ready;                             // retries due, served oldest ticket first
  size_t active = 0;
  size_t running = 0;
  Ticket next_ticket = 1;
  std::optional<Millis> wake;

  AttemptDeadlines deadlines{calls};  // running attempts by when they time out
  SlotsRecord slots;                  // what may still run after a restart (slots_record.h)

  // What the step stores, and the grant rows owed to a later step: a
  // refund only lowers a count, so its row waits for a step that stores
  // something anyway (usually the very next take) instead of a commit of
  // its own per call (row_writer.h).
  RowWriter rows;
  std::vector<Action> actions;
  // Ends the output of the events so far (Engine::clear_output).
  void clear_output();

  Reservations reservations;  // covering reservations (reservations.h)

  std::optional<Restoring> restoring;  // between restore_begin and restore_end

  // ---- grants dated when their callbacks leave (Engine::released) ----------
  // Starts not yet released, oldest first (the host invokes callbacks in
  // the order they started, so they are released in that order too).
  bool dating = false;  // Engine::set_release_dating
  Ring<Unreleased> unreleased;
  uint64_t starts_emitted = 0;  // kept across restores: the host's marks stay valid
  ReleaseLags lags;             // how far ahead of its decision a take is dated (release_lags.h)
  Millis newest_take = 0;       // the latest date a callback's take was given
  // The release mark as last written (PutReleased), and the latest date of
  // any grant row written: a mark that moved past a row written at or after
  // the stored one is worth writing (once quiet, kIdleSlotsWriteMs later).
  std::optional<Millis> released_stored;
  Millis last_start_at = 0;
  std::optional<Millis> released_due;

  History history;  // what happened, per interval (history.h)

  // ---- a child of a lease tree (lease_child.h; scheduler_lease.cpp) -------
  std::unique_ptr<LeaseChild> lease;  // none: not a child
  bool tree_child = false;            // made from the config's tree: it must stay on
  std::string lease_exchange;         // the text of the last Exchange action
  // Whether the holder serves call `t` now (units and a slot, taken if so).
  bool lease_admits(Ticket t, const Call& c);
  // At the end of a step: the queued demand to the holder, an exchange due
  // out as an action, and the holder's wake folded into `wake`.
  void lease_step();

  // Grants: drop unreadable rows, round toward the safe side, cap amounts at
  // the largest limit any config allows (a smaller current limit is no sign
  // of damage: the limit may have been lowered after the take, and may be
  // raised again), pull grants dated beyond any legitimate future back to it.
  void restore_row(size_t w, double at_raw, double amount_raw);

  const Config& config() const { return cfg->config; }
  int64_t limit() const { return windows[0].limit; }
  int64_t window() const { return windows[0].ms; }
  SlidingLog& log() { return windows[0].log; }
  const SlidingLog& log() const { return windows[0].log; }

  // Stores the penalty as it stands.
  void put_penalty();
  void act(ActionKind kind, Ticket t, uint32_t attempt);
  void reject(Ticket t, ErrorCode code, int64_t status = 0);

  // Moves time forward to `t` (never back), times out attempts, frees
  // restored slots that can no longer be running, lifts a due penalty,
  // expires grants.
  void advance(Millis t);

  // ---- slots that survive a restart ----------------------------------------

  int64_t timeout() const { return config().attempt_timeout_ms; }

  void slot_started(Ticket t, Call& c, Millis at);

  // The attempt is no longer running: its deadline goes, and the record
  // holds its slot until rewritten (a release recorded late only holds a
  // slot longer after a crash).
  void attempt_ended(Ticket t, Call& c);

  // An attempt that has not reported by its deadline is settled: not
  // retried (its work may have reached the upstream) and its slot freed. A
  // report that arrives later finds no running attempt and changes nothing.
  void time_out_attempts();

  void free_restored_slots() { active -= static_cast<size_t>(slots.free_expired(now, timeout())); }

  // While a reservation record is in force the slots record covers starts as
  // long as it does, so a sequential caller's starts do not rewrite it more
  // often than the record is renewed (held longer after a crash: the safe side).
  Millis cover_span() const;

  // Writes the slots record with this step (see slots_record.h).
  void write_slots_record();

  // At the end of a step: writes the slots record when SlotsRecord::step
  // says so (a start it does not cover; riding on a step that stores).
  // "store_*" are the end-of-step decisions; "record" is only ever a noun.
  void store_slots_record();

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

  void note_unreleased(Ticket t, const Call& c);

  // Rows dated before this are dated no earlier than their callbacks left:
  // every row, when every start has been released (a row written for a
  // later start comes with a new mark, in the same step).
  // (The oldest start's takes are not always the earliest dated: a take held
  // back from expiring moves later while younger ones stay.)
  Millis release_mark() const;

  // A report proves the attempt's callback left, by `at` at the latest: if
  // the host has not said so yet, it is released now (with every start
  // before it, which left before it did), before its usage is settled.
  void release_reported(Ticket t, Millis at);

  void release_through(uint64_t through);

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
  void move_takes(Unreleased& u, Millis to, bool defer);

  // Takes `amount` in `w` dated `dated` (>= now), its row written with the
  // next step that stores, with the rows it was moved from (owed): until
  // then storage holds the take at its earlier date, which the release mark
  // still covers (the mark moves past it only in a step that writes both).
  internal::Grant take_deferred(Window& w, int64_t amount, Millis dated);

  // A start whose callback has not left yet must not leave its windows: a
  // take about to expire (its date + window reached) moves to now, and so
  // stays counted until its release dates it for good. Runs before expiry.
  void hold_unreleased();

  // At the end of a step: the release mark rides on a step that stores
  // anyway; when it has moved past rows stored at or after the mark in
  // storage, it is written alone once the bucket has been quiet a while.
  void store_release_mark();

  // ---- covering reservations (reservations.h) ------------------------------

  // Takes `amount` in `w` now, its row owed to the next record's step.
  internal::Grant take_unwritten(Window& w, int64_t amount, Millis dated);

  // Writes every row takes under the record left behind, as the logs now
  // hold them, and a new record (`keep`: sized to the recent rate; else
  // none), in the same step: rows written under the old record would
  // otherwise be counted twice by a restore (as rows and in the record).
  void write_reservation(bool keep);

  // At the end of a step (see Reservations::step).
  void store_reservation();

  // At the end of a step: the rows owed ride on a step that stores
  // something anyway, or are written alone once the bucket has been quiet
  // a while (RowWriter::step).
  void store_owed_rows();

  // The penalty's deadline has come: every window's log becomes the one
  // grant Penalty::lifted() gives, so at most penaltyRefillFraction of each
  // limit is free and real takes keep counting.
  void lift();

  double refill_fraction() const { return config().bucket.penalty_refill_fraction; }

  void penalise(Millis delay);

  // The call's own maxRetries when it set one, else the bucket's as it is now.
  int64_t max_retries_of(const Call& c) const;
  bool attempts_remain(const Call& c) const { return static_cast<int64_t>(c.attempt) <= max_retries_of(c); }

  // The call is over: it leaves the calls (its node kept as a spare) and
  // its slot frees.
  void release(Ticket t);
  // Adds call `t`, in a spare node when there is one.
  Call& admit(Ticket t, Call&& c);

  // A queued call leaves without starting: rejected with `code`.
  void drop_queued(Ticket t, ErrorCode code, int64_t status = 0);

  // When the queued (or arriving) call `c` could start at the earliest
  // (StartPredictor::earliest).
  Millis predict(const Call& c) const { return predictor.earliest(c, now, refill_fraction()); }

  // Queued calls whose deadline has come (or, overdue_only, passed before
  // now) are rejected with their predicted wait. True if any was.
  bool expire_waits(bool overdue_only = false);

  // Starts every waiting call that may start now, strictly in order: due
  // retries (oldest ticket first; they already hold a slot and arrived before
  // anyone queued), then the queue. A head that cannot go blocks the rest.
  void serve();

  // Starts every waiting call that may start now, strictly in order (see
  // serve); sets `wake` to when the first that cannot could.
  void start_what_can();

  // Starts call `t`, already out of the queue (or the ready retries) and
  // holding its slot: takes its cost in every window now.
  void start(Ticket t, Call& c);

  // Whether arriving call `c` would be the first that start_what_can starts:
  // nothing waits ahead of it (no queued call, no retry ready or due), a
  // slot is free, no penalty is pending, and it fits every window now.
  bool starts_at_once(const Call& c) const;

  // Queued callers whose cost can no longer fit are rejected, not left to
  // wedge the queue forever.
  void reject_oversized();

  // Takes `amount` in window `w` now (on its grid), or dated `at` (<= now),
  // keeping its log bounded.
  // `dated`: when the take counts from, if later than now (a callback's take
  // is dated ahead by the release allowance).
  internal::Grant grant(Window& w, int64_t amount, std::optional<Millis> at = std::nullopt,
                        std::optional<Millis> dated = std::nullopt);

  // The windows of a new config (Windows::configure); the rows of the
  // windows it no longer has are deleted.
  void build_windows(const Config& config);

  void apply_config(ParsedConfig parsed);

  // A new caller joins the queue, unless its predicted start is already
  // later than it will wait: then it is rejected in this step, never queued.
  Ticket enqueue(Call&& c, const Waiting& waiting, Millis at);

  // ---- costs and usage ----------------------------------------------------

  // The error for a cost above window w's limit (see scheduler_usage.cpp).
  Error cost_too_large(const Window& w, const Call& c, bool named_units) const;
  // Fills in the costs of `c`, a new call, as given: 1 to kMaxWindows units
  // a window counts, each an integer >= 0; the default unit is 1 unless
  // given (0 takes none of it). The same rule as the client's
  // (shim/rules.ts unitCostsProblem). Filled in place: a Call returned
  // through an Expected cost an arrival about 15 ns in copies.
  Status costed(const Amounts& cost, Call& c);
  // The same with the units by number, for the common case only: false,
  // with `c` half filled, when the named form would refuse the cost
  // (costed finds and words the problem). Names are not compared.
  bool costed_plainly(const NumberedAmount* cost, size_t count, Call& c) const;

  // A report's usage checked against the windows, each amount's unit by
  // number (a unit given twice counts its last amount), or why it is not
  // usable (`out` is then partly filled). Resolved once: settle_usage takes
  // it as it is.
  Status usage_of(const Amounts& usage, Usage& out) const;

  // Corrects the attempt's reservations by what it really used. A refund
  // shrinks the grant the attempt took, where it is dated, if that grant is
  // still live in the same log (else it is kept: the safe side); an excess is
  // charged as a new grant now, and may put the window in debt.
  void settle_usage(const Call& c, const Usage& usage);

  // ---- learning from the upstream's headers -----------------------------

  // The window a reported dimension corrects: the config's map, else the
  // defaults (see LearnConfig); nullptr when none.
  Window* window_for(const std::string& dimension);

  // Reads the attempt's rate-limit headers (learn): for each window a
  // dimension maps to, the upstream's remaining less what this bucket
  // admitted there since the attempt started (the upstream may not have
  // counted those yet) is what it still allows; if that is less than the
  // window's own remaining, the difference is recorded as used (an observed
  // grant, dated so it leaves the window no earlier than the upstream's
  // reset, else one window from now). A remaining of 0 with a known reset
  // pauses the bucket until then. Never loosens anything.
  void learn_from(const Call& c, std::string_view text);

  Error not_configured() const;

  Error unknown_ticket(Ticket t, const char* what) const;

  // The running attempt of `t` has ended (reported, threw, or its caller is
  // gone): its slot record and deadline go, then time moves on. nullptr if
  // `t` has no running attempt.
  Call* end_attempt(Ticket t, Millis at);

  // Finds a call whose callback is running; nullptr if there is none.
  Call* running_call(Ticket t);

  // Common ending of a running attempt for a caller that is gone.
  bool settle_if_abandoned(Ticket t, Call& c);

  // The call's attempt failed in a way that is retried: it waits `delay`,
  // holding its slot. A caller that gave up while it ran gets Cancelled
  // instead, and its slot goes back.
  void retry_after(Ticket t, Call& c, Millis delay);
};

}  // namespace drl::internal
