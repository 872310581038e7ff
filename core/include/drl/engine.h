// The limiter engine: a sans-IO state machine the host drives.
//
// The host reports what happened, always with the current time in ms as the
// last argument (`now`, in every call that takes one); the engine answers
// with storage writes to make, actions to take and the one time it next
// needs to be woken. It has no clock, no timers and no I/O.
//
// Example:
//   drl::Engine engine;
//   drl::Status configured =
//       engine.configure(R"({"bucket":{"limitPerWindow":2,"windowInMs":1000},"concurrency":1})", /*now=*/0);
//   assert(configured.ok());
//   drl::Ticket a = *engine.arrive(/*cost=*/1, /*now=*/10);  // the bucket and the slot are free
//   drl::Ticket b = *engine.arrive(/*cost=*/1, /*now=*/11);  // the only slot is a's: b queues
//
//   // One step's output: first store every write, then act.
//   assert(engine.writes().size() == 3);  // PutConfig (the configure), a's grant, the slots record
//   assert((engine.writes()[1] == drl::Write{drl::WriteKind::PutGrant, /*at=*/10, /*amount=*/1}));
//   assert(engine.writes()[2].kind == drl::WriteKind::PutSlots);  // a runs: a restart keeps its slot
//   assert(engine.slots_text() == "1010:1");  // a's start, dated 1 s later so it covers later starts
//   assert(engine.actions().size() == 1);  // invoke a's callback
//   assert((engine.actions()[0] == drl::Action{drl::ActionKind::Start, a, /*attempt=*/1}));
//   engine.clear_output();
//
//   drl::Status reported = engine.report(a, drl::Report{/*status=*/200}, /*now=*/20);
//   assert(reported.ok());
//   assert((engine.actions()[0] == drl::Action{drl::ActionKind::Resolve, a, 1}));  // settle a with its value
//   assert((engine.actions()[1] == drl::Action{drl::ActionKind::Start, b, 1}));    // a's slot goes to b
//   assert(engine.writes().size() == 1);  // b's grant alone: the record written for a still covers b
//   assert(*engine.next_wake() == 20 + 120'000);  // only b's attempt timeout (default 120 s after its start)
//   engine.clear_output();
//
// Host contract: apply every write of a step before acting on that step's
// actions (a grant must be stored before the callback it admits is invoked),
// and keep at most one timer, set to next_wake() after each step.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "drl/config.h"
#include "drl/error.h"

namespace drl {

using Millis = int64_t;
using Ticket = uint64_t;  // 0 is never a valid ticket; below 2^53 so JS numbers hold it

// What the host should do (see output_kinds.def for each kind's meaning).
enum class ActionKind : int {
#define DRL_ACTION(name, number, js, meaning) name = number,
#define DRL_WRITE(name, number, js, meaning)
#include "drl/output_kinds.def"
#undef DRL_ACTION
#undef DRL_WRITE
};

struct Action {
  ActionKind kind;
  Ticket ticket;
  uint32_t attempt = 0;
  ErrorCode code = ErrorCode::CallFailed;  // Reject only
  // Reject with CallFailed: the last status; AttemptTimeout: the timeout;
  // DeadlineExceeded: the predicted wait in ms (retryAfterMs), 0 when the
  // only known obstacle is the concurrency cap.
  int64_t status = 0;
  bool operator==(const Action& o) const {
    return kind == o.kind && ticket == o.ticket && attempt == o.attempt &&
           (kind != ActionKind::Reject || (code == o.code && status == o.status));
  }
};

// What the host should store (see output_kinds.def). Grants are rows keyed by `at`.
enum class WriteKind : int {
#define DRL_ACTION(name, number, js, meaning)
#define DRL_WRITE(name, number, js, meaning) name = number,
#include "drl/output_kinds.def"
#undef DRL_ACTION
#undef DRL_WRITE
};

struct Write {
  WriteKind kind;
  Millis at = 0;              // a grant's time; PutPenalty: the deadline (forcedUntil)
  int64_t amount = 0;         // PutGrant: the grant's amount
  bool lift_pending = false;  // PutPenalty: the penalty is still to be lifted at `at`
  // Grant writes: which window's rows (Engine::window_name names it). 0 is the
  // primary window, whose rows are keyed by time alone, as before windows.
  int window = 0;
  bool operator==(const Write& o) const {
    return kind == o.kind && at == o.at && amount == o.amount && lift_pending == o.lift_pending && window == o.window;
  }
};

// An amount in a named unit: a cost (what a call reserves) or a usage (what
// it really cost). Values arrive from JS as doubles and are checked by the
// engine (integers, within bounds, units some window counts).
struct Amount {
  std::string unit;
  double amount = 0;
};
using Amounts = std::vector<Amount>;
// An amount of a unit given by its number (Engine::unit_number), for a host
// that has cached the numbers and passes no names.
struct NumberedAmount {
  int unit = -1;
  double amount = 0;
};

// Reads a JSON object of units to numbers ({"tokens":1200}); `what` names it
// in errors ("cost", "usage"). Values are checked later, against the config.
Expected<Amounts> parse_amounts(std::string_view json_text, std::string_view what);

// How a caller is willing to wait, and how often it may be retried (arrive's
// options). Values arrive from JS as doubles and are checked by arrive().
struct Waiting {
  // Higher starts first; FIFO within a priority. An integer in
  // [-kMaxPriority, kMaxPriority]. A newcomer goes ahead of lower-priority
  // waiters, never ahead of a call that has started (retries included).
  double priority = 0;
  // The longest the caller will wait for its first start, in ms (an integer
  // 0..kMaxDelayMs); nullopt: as long as the bucket needs. If the predicted
  // start is later than now + max_wait_ms the call is rejected at once
  // (DeadlineExceeded, nothing taken); otherwise, if it has not started by
  // then, it is rejected at that moment. 0 means "start now or fail".
  std::optional<double> max_wait_ms = std::nullopt;
  // Retries after the first attempt for this call, replacing the bucket's
  // retry.maxRetries (an integer 0..kMaxRetries, the same bound config uses);
  // nullopt: the bucket's value, read when the decision is made. Fixed at
  // arrival: a later reconfigure changes only calls that did not set it. It
  // bounds every retry of the call (after a retryable failure, a 429 or a
  // throw); the backoff between attempts is still the bucket's. 0 means "one
  // attempt, never retried", for work that must not run twice (a POST).
  std::optional<double> max_retries = std::nullopt;
};
// kMaxPriority, like every bound above, is a row of limits.def (drl/limits.h).

// How a callback's attempt ended, as built by the client from the response.
enum class Failure : int {
  None = 0,       // no failure reported
  Retryable = 1,  // back off (this call only) and try again while attempts remain
  Final = 2,      // reject now
};

struct Report {
  int32_t status = 0;         // HTTP status; 0 when the work was not HTTP
  bool rate_limited = false;  // a rateLimit hook fired; status 429 implies it
  // An explicit delay, which beats the header. Negative, NaN or infinite is
  // dropped as if absent.
  std::optional<double> retry_after_ms = std::nullopt;
  std::optional<std::string_view> retry_after = std::nullopt;  // the raw Retry-After header
  Failure failure = Failure::None;
  // What the attempt really cost, per unit. For each window counting one of
  // these units the attempt's reservation is corrected: a lower cost is
  // refunded from the grant it took, a higher one charged now. Absent: the
  // reservation stands.
  std::optional<Amounts> usage = std::nullopt;
  // The response's rate-limit headers, as "name: value" lines separated by
  // '\n' (the client forwards only the ones drl::is_rate_limit_header
  // names). Read only when the config has `learn`: the upstream's remaining
  // then tightens the window it maps to until the upstream's reset (never
  // loosens it); a remaining of 0 so holds every caller needing that window
  // until the reset.
  std::optional<std::string_view> rate_limit_headers = std::nullopt;
};

// What storage held, for a cold start. Values may be damaged (NaN, negative,
// duplicated, out of order, over the limit): restore() normalises them.
struct Snapshot {
  std::optional<std::string> config_text;
  double forced_until = 0;
  bool lift_pending = false;
  std::vector<std::pair<double, double>> grants;  // (at, amount)
  // The slots record (slots_text() as last stored): attempts that may still
  // be running, each held until its start + the attempt timeout.
  std::optional<std::string> slots_text;
  // The extra windows' grants, by window name (the primary's are `grants`).
  std::vector<std::pair<std::string, std::vector<std::pair<double, double>>>> windows;
  // The reservation record (reservation_text() as last stored), if any.
  std::optional<std::string> reservation_text;
  // The release mark as last stored (PutReleased), if any: rows dated at or
  // after it are dated at the restore. Absent (storage written before the
  // mark existed): every row is taken as dated.
  std::optional<double> released_before;
};

// One closed interval of a bucket's history, as stored: its resolution
// (10,000 or 60,000 ms), its start (a multiple of the resolution) and its
// aggregates as compact JSON (an entry of history_json's "intervals").
struct HistoryRow {
  int64_t resolution_ms = 0;
  int64_t at = 0;
  std::string data;
};

// Covering reservations (Engine::set_reservations). When a step stores
// anything during a run of takes (a take within kReserveRunGapMs of the one
// before it), it also stores a record of up to R_w more units per window for
// takes in the next D ms; until then a take that fits it is admitted with
// no write of its own (its row goes with the next step that stores), and a
// restore counts the record as taken in full, dated at the restore. The record is renewed ahead of need (half
// its units or half its span used), in the step after the take that found
// it due (next_wake() is then that take's time: the host runs it at once,
// after starting the take's callback), and cleared after twice the run's pace
// (at least 500 ms) without a take. The bounds:
//   D = 16 x the gap between the run's last two takes, within
//       [kReserveSpanMs, kMaxReserveSpanMs] (no record for a bucket with a
//       window under 10 ms);
//   R_w = min(2 x the units taken in w per D at the rate seen since the last
//             record (at least 2 x the last take), what w has free,
//             ceil(limit_w / kReserveFractionDenominator)).
// So a restart may count up to R_w units of w that were never taken, for at
// most window_w ms after it (under-admission; never more admitted than the
// limit).
inline constexpr int64_t kReserveSpanMs = 2000;
inline constexpr int64_t kMaxReserveSpanMs = 30'000;
// Takes closer than this are a run (a sequential caller): only a run writes a
// record, so a lone call leaves nothing for a crash to count.
inline constexpr int64_t kReserveRunGapMs = 2000;
inline constexpr int64_t kReserveFractionDenominator = 4;  // a record holds at most a quarter of a limit

// Grants counted from when their callbacks leave (Engine::released). The
// output gate holds a callback's invocation until the commit storing its
// grant is durable, so the work leaves some time after the engine decided
// it: the release lag. A take is dated ahead of its decision by the
// allowance (the largest lag of the last kReleaseLagSamples releases, at
// most kMaxReleaseAllowanceMs); a release that comes later than a take's
// date moves the take to the release. So a window counts each take from no
// earlier than the moment its callback left. For a restart the host stores
// a mark (PutReleased): rows dated before it are dated no earlier than their
// callbacks left; a restore dates every later row at the restore, since its
// callback may have left at any moment before the crash.
inline constexpr int64_t kMaxReleaseAllowanceMs = 1000;
inline constexpr size_t kReleaseLagSamples = 256;

// At most kMaxLogEntries log entries are kept (kMaxExtraLogEntries for each
// extra window: both in limits.def). For windows up to that many ms every
// distinct take time is its own entry (exact); longer windows record takes
// on a grid of ceil(window / (cap - 1)) ms, dated at the end of their cell
// (later is the safe side: a grant dated later expires later). The extra
// windows' grids are 4x coarser (a per-day window dates takes on a 2,637 ms
// grid instead of 660 ms).

// The grid step for a window: 1 ms (exact) up to max_entries ms.
int64_t grid_step_ms(int64_t window_ms, int64_t max_entries = kMaxLogEntries);

namespace internal {
struct Scheduler;
class EngineInspector;  // the test peer: core/src/engine_inspector.h
}  // namespace internal

class Engine {
 public:
  Engine();
  ~Engine();
  Engine(Engine&&) noexcept;
  Engine& operator=(Engine&&) noexcept;
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Applies a complete config (creating the bucket if it did not exist).
  // Queued callers stay queued and are re-evaluated under the new limits,
  // except those whose cost can never fit the new limit: they are rejected
  // (CostTooLarge) rather than wedging the queue forever.
  Status configure(std::string_view config_json, Millis now);
  // Deep-merges a patch onto the stored config; NoSuchLimiter if none.
  Status reconfigure(std::string_view patch_json, Millis now);
  // Rebuilds state from storage. An absent config leaves the engine
  // unconfigured. Emits writes only to repair rows it had to normalise.
  void restore(const Snapshot& snapshot, Millis now);
  // The same in three steps, so a host can stream a large log in chunks
  // without holding a second copy: begin, rows (interleaved at, amount
  // pairs, any number of calls), end.
  void restore_begin(std::optional<std::string_view> config_text, double forced_until, bool lift_pending, Millis now);
  void restore_rows(const double* rows, size_t count);
  // The same for the extra window `name`; rows of a window the config no
  // longer has are deleted (a ClearGrants write at restore_end).
  void restore_window_rows(std::string_view name, const double* rows, size_t count);
  // The slots record, if one was stored: between begin and end.
  void restore_slots(std::string_view slots_text);
  // The reservation record, if one was stored: between begin and end. Its
  // units count as one grant per window dated now (a take it covered may
  // have left at any moment before the restart: see kMaxReleaseAllowanceMs); restore_end
  // writes those rows and clears the record (PutReservation with none). An
  // unreadable record counts every window as the most a record can hold (a
  // quarter of its limit), dated now.
  void restore_reservation(std::string_view reservation_text);
  // The release mark as stored (Snapshot::released_before), before any row.
  void restore_released(double released_before);
  void restore_end();
  // Forgets the bucket: everyone waiting is rejected with NoSuchLimiter and
  // an EraseAll write is emitted. Running callbacks settle as NoSuchLimiter.
  void erase(Millis now);

  // A caller arrives wanting `cost` of the default unit: an integer >= 0 no
  // larger than 2^53 - 1, else InvalidArgument; above a window's limit,
  // CostTooLarge. A cost of 0 takes nothing: the call still waits its turn
  // in the queue, for a concurrency slot and out any penalty. A Waiting that
  // breaks one of its rules (priority, maxWaitMs, maxRetries) is an
  // InvalidArgument error naming the field, the rule and the value received:
  // nothing is queued or taken.
  Expected<Ticket> arrive(double cost, Millis now);
  Expected<Ticket> arrive(double cost, const Waiting& waiting, Millis now);
  // The same with a cost per unit: 1 to 8 units, each a unit name a window
  // counts and an integer >= 0 (InvalidArgument otherwise, `{}` included);
  // the default unit is 1 unless given (0 takes none of it). An amount above
  // its window's limit is CostTooLarge.
  Expected<Ticket> arrive(const Amounts& cost, Millis now);
  Expected<Ticket> arrive(const Amounts& cost, const Waiting& waiting, Millis now);
  // The same with the units by number: the same checks and, for a number
  // no config named, the error of the name "". Faster than the names when
  // a host already holds the numbers (core.wasm's JS side does).
  Expected<Ticket> arrive_numbered(const NumberedAmount* cost, size_t count, const Waiting& waiting, Millis now);
  // The caller gave up (its AbortSignal fired, or its connection broke while
  // it waited). A call that has not started, or waits between attempts, is
  // rejected at once (Cancelled) and takes nothing; a slot it held between
  // attempts is released. A running attempt is left alone: its outcome
  // stands if final, but the call is not retried (Cancelled instead).
  Status withdraw(Ticket ticket, Millis now);
  // The earliest time the queued call `ticket` could start if every call
  // ahead of it (by priority, then arrival) started as early as the windows
  // and the penalty allow: a lower bound (callbacks holding slots, retries
  // and later higher-priority arrivals can only delay it). Exact for a
  // bucket whose only constraint is one window with unit costs, when nothing
  // ahead of it was withdrawn from mid-queue. nullopt if `ticket` is not
  // queued. O(priorities + log entries), independent of the queue length.
  std::optional<Millis> predicted_start(Ticket ticket) const;
  // The running attempt of `ticket` finished with `report`. A usage that
  // names a unit no window counts, or an amount that is not an integer >= 0,
  // is an InvalidArgument error and changes nothing: the attempt still runs.
  Status report(Ticket ticket, const Report& report, Millis now);
  // The running attempt of `ticket` threw (RPC keeps nothing else).
  Status threw(Ticket ticket, Millis now);
  // The caller went away. A running callback keeps its slot until it reports.
  Status cancel(Ticket ticket, Millis now);
  // Invoking the running attempt's callback failed in transport: its caller
  // is gone (the host knows only the transport can throw, because the
  // callback reports its own exceptions). Settles it as CallerGone, never
  // retried, and its slot is free at once; the grant it took stays.
  Status gone(Ticket ticket, Millis now);
  // ---- slots of callbacks that finished during an outage -------------------
  // The host's secret for this engine's slot identities: 128 random bits,
  // drawn once per engine (crypto.getRandomValues in the object), kept by
  // restore. Without one the engine hands out no identities, its record
  // names no writer, and finished() frees nothing this engine covered.
  void set_slot_key(uint64_t k0, uint64_t k1);
  // What the running attempt of `ticket` hands its callback: the identity of
  // its slot ("ticket.attempt.number.start.tag": the attempt, the start the
  // slots record covers it from, when it started, and a keyed hash of the
  // four) and the attemptTimeoutMs it runs under. nullopt if it is not
  // running or no slot key was set.
  struct AttemptSlot {
    std::string slot;
    Millis timeout_ms = 0;
  };
  std::optional<AttemptSlot> attempt_slot(Ticket ticket) const;
  // attempt_slot(ticket)'s timeout_ms alone, without building the identity.
  std::optional<Millis> attempt_timeout(Ticket ticket) const;
  // A caller says its attempt finished while the object was down: `slot` is
  // the identity its callback was handed, `ran_ms` how long the callback ran
  // by the caller's clock (from its invocation until it returned its
  // report). Frees one slot of the restored record, and answers true, only
  // when all of these hold (else false, and nothing changes):
  // - the identity was handed out by the engine that wrote the restored
  //   record (its tag checks under that record's slot key): never one of
  //   this engine's, whose live slot goes only with the attempt's report,
  //   nor an older engine's, nor an altered or made-up one;
  // - it was not said before: an attempt frees at most one slot;
  // - the attempt has not timed out (its key + attemptTimeoutMs > now):
  //   then its slot already went by time;
  // - it ended (start + ran_ms) after the record was written and after the
  //   record's latest entry, as stored. The writer may have seen the report
  //   and died before its answer left, and a start the record covered may
  //   have taken the slot after it; a start after every entry's date is
  //   covered by none, so it would have rewritten the record;
  // - the restored record holds a slot dated at or after the attempt's key:
  //   the earliest such slot goes (an attempt still running that it covered
  //   is covered by the one the finished attempt held).
  // So every attempt still running keeps a slot. The record is rewritten in
  // the same step (PutSlots), so a second restart does not hold the slot
  // again. A malformed identity or ran_ms is an InvalidArgument error.
  Expected<bool> finished(std::string_view slot, double ran_ms, Millis now);
  // The host's timer fired.
  void tick(Millis now);
  // How many Start actions this engine has emitted, restores included: the
  // host notes it after invoking a step's callbacks, and hands it back to
  // released() once the commit before them is durable.
  uint64_t starts_emitted() const;
  // Every Start emitted up to `through` (a starts_emitted() value) has left
  // the object by `now`: their lags are sampled, and a take dated earlier
  // than `now` is moved to `now` (see kMaxReleaseAllowanceMs). A `through`
  // already released changes nothing.
  void released(uint64_t through, Millis now);
  // Pauses the bucket for `ms` (an integer 0..kMaxDelayMs): a penalty.
  Status pause(double ms, Millis now);
  // Live state as JSON: config (as given), effective config, remaining,
  // resetAt, penalised, forcedUntil, active, running, queued, used, grants.
  // Like tick(), it first moves time to `now`, which may lift a penalty,
  // expire grants and start waiting calls: a host drains writes() and
  // actions() after stats() as after any other step.
  Expected<std::string> stats(Millis now);

  // ---- history --------------------------------------------------------------
  // What happened, per interval: every 10 s for the last hour
  // (resolution_ms 10000) and every minute for the last day (60000), as
  // {"resolutionMs", "intervals": [closed, non-empty, oldest first],
  // "current": the open interval so far}. Each interval: at (its start),
  // arrived, started (first starts), completed, failed, rateLimited (reports
  // of a 429 or rateLimited), dropped (the caller went away), deadline
  // (maxWaitMs ran out), units (net units charged per window name), queued
  // and running at its end, and wait (arrival to first start, ms: p50, p95
  // and max, or null when nothing started). p50 and p95 are at most 1/32
  // below the true value (exact below 64 ms); max is exact. Closes the
  // intervals that ended by `now`, and changes nothing else.
  Expected<std::string> history_json(int64_t resolution_ms, Millis now);
  // Closed intervals this call has not returned before, to be stored in the
  // same transaction as a write the host makes anyway; they count as stored
  // from now on (a restore counts everything as unstored again).
  std::vector<HistoryRow> history_unsaved();
  // Rows of `resolution_ms` dated before this are past its retention.
  Millis history_keep_from(int64_t resolution_ms) const;
  // Closed 10 s intervals this call has not returned before (an export).
  std::vector<HistoryRow> history_closed();
  // Puts stored rows back after restore(): rows past retention, not yet
  // closed at `now`, or unreadable are skipped.
  void restore_history(const std::vector<HistoryRow>& rows, Millis now);

  // ---- a child of a lease tree (docs/leases.md, "A child engine") ----------
  // Makes this configured engine a child: its calls start only when the
  // leases it holds from the root serve them too (units of every window,
  // and a slot), and it asks the root for leases through Exchange actions.
  // `setup_json`: {"child": id >= 1, "incarnation": >= 1, a new one after
  // every restart, "clock": {"slackMs", "driftPpm"}, "whenShort":
  // "failClosed" (default) | "floor" | "failOpen", "floor": {"units": [per
  // window], "slots"}, and optional sizing knobs: retryMs, idleMs, stockMs,
  // refreshMs, rateMs, closeWithinMs, maxGroups, unreachableMs; and
  // releaseMarginMs, with release dating the least a lease must have left
  // for a take, default 0: the engine's release allowance}. The windows
  // (in order: the primary, then the extra ones as configured) and the
  // attempt timeout are the bucket's config, which must be the root's; a
  // reconfigure may change limits but not the number of windows.
  // InvalidArgument naming the field when the setup is malformed; once made,
  // a child stays one (a restarted host makes a new engine, a new incarnation).
  Status make_lease_child(std::string_view setup_json, Millis now);
  // The same from the bucket's own config, whose `tree` must be on
  // (docs/leases.md, "Turning a tree on"): the child of `region` (a valid
  // region, or kRootRegion for the root's own engine) with the tree's
  // clock bounds, policy, floor and sizing. Its configs must then keep the
  // tree on: InvalidConfig naming `tree` otherwise.
  Status make_tree_child(std::string_view region, uint64_t incarnation, Millis now);
  bool lease_child() const;
  // The root's reply to the exchange out (a LeaseGrant as JSON text), or a
  // PenaltyNotice it fanned out. A reply for another child, incarnation or
  // seq changes nothing; a malformed one is InvalidArgument naming the field.
  Status lease_reply(std::string_view grant_json, Millis now);
  Status lease_notice(std::string_view notice_json, Millis now);
  // The exchange the latest Exchange action asks the host to send to the
  // root (JSON text, see core/src/lease_wire.h); "" before the first.
  const std::string& lease_exchange() const;
  // Uses released after their lease ended (docs/leases.md, "Uses read at
  // their release"): 0 unless the host's release lag outran the margin.
  uint64_t lease_late_releases() const;

  // When the host must next call tick(); nullopt when no one waits on time.
  std::optional<Millis> next_wake() const;
  bool configured() const;
  // The stored config document (as given), for PutConfig.
  const std::string& config_text() const;
  // The slots record, for PutSlots, as last written or restored:
  // "at:count,...", each entry a slot a restart holds until at + the attempt
  // timeout, led by "~<slot key>@<written at>" once set_slot_key was called. It covers every attempt that may be
  // running (restored ones as they were, live ones dated up to a second after their start), so it is rewritten only
  // when a start is not covered, or when nothing has run for a while and it still lists released slots. Empty when
  // none.
  std::string slots_text() const;
  // Turns covering reservations on or off (off for a new engine: every take
  // then writes its grant in the step that starts it). A host whose storage
  // holds every outgoing message until the writes before it are durable
  // (a Durable Object's output gate) turns them on: a lone caller then waits
  // for a commit every few dozen calls instead of every call. Turning them
  // off writes the rows still owed and clears the record. Kept by restore.
  void set_reservations(bool on);
  bool reservations() const;
  // Turns release dating on or off (off for a new engine: a take counts from
  // its start, which is when its callback leaves for a host that invokes it
  // at once). A host whose storage holds outgoing messages until the writes
  // before them are durable (a Durable Object's output gate) turns it on and
  // reports each release (released()): takes are then dated ahead by the
  // allowance and moved to their release when later, and the release mark is
  // stored (see kMaxReleaseAllowanceMs). A stored mark is honoured by a
  // restore either way. Kept by restore.
  void set_release_dating(bool on);
  bool release_dating() const;
  // The reservation record, for PutReservation, as last written:
  // {"until":ms,"units":{"<window name>":n,...}}, or "" when none.
  std::string reservation_text() const;
  // The slots held now, exactly, in the record's format: running attempts by
  // start time and restored slots as restored. For rebuilding an engine after
  // a failed write: the stored record still covers these (it covered them
  // after the last write that landed), so restoring them as the record is
  // on the safe side.
  std::string running_slots_text() const;
  const Config* config() const;
  // The name of a grant write's window (Write::window): "" for the primary,
  // else the extra window's name. Stable for this engine's life (a window
  // removed by a reconfigure keeps its number).
  const std::string& window_name(int window) const;
  // Units by number, for a host that passes amounts as numbers: the number
  // of a unit some config of this engine named (stable for the engine's
  // life, like window_name), or -1; and the name of a number ("" if none).
  int unit_number(std::string_view unit) const;
  const std::string& unit_name(int unit) const;

  // Output of the events since the last clear_output().
  const std::vector<Write>& writes() const;
  const std::vector<Action>& actions() const;
  void clear_output();

 private:
  friend class internal::EngineInspector;
  std::unique_ptr<internal::Scheduler> scheduler_;
};

}  // namespace drl
