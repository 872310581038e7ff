// A child's leases in a lease tree (docs/leases.md): the units of each window
// and the concurrency slots it holds from the root, what it spent of them and
// when, and the one exchange it has out to the root.
//
// Contract:
// - A lease is usable while `now < end`, end = the child's reading when it
//   first sent the exchange the lease answers + the grant's duration (a
//   retry keeps the first reading). take() consumes from the leases that end
//   first; a take that does not fit takes nothing.
// - A used unit comes back to its lease once this clock shows outlast(T)
//   after the use was read (its use has then left every real window), and
//   is spent, returned or left out of the close like an unused one. A lease
//   whose used units come back before its end is not spent. Needs
//   windows_ms; without it no unit comes back.
// - A slot runs one call at a time and is reusable within its lease. A call
//   is released by slot_release(), or by the holder once its clock shows
//   stretch(attempt timeout) + S since the start (the call then has stopped
//   counting in real time); a later slot_release() of it changes nothing.
// - A lease closes once: when it ended (or its grant arrived after its
//   end), and, when next_exchange() composes an exchange, when it is spent
//   (nothing left in any window and none coming back before its end, no
//   call running on it) or the holder has
//   been idle (no take, queue or call) for idle_ms. Idle slots beyond its
//   queue (keeping one) go back in the exchange's returns, from the leases
//   that end last. The close
//   states its uses per window folded into at most max_groups groups, each
//   dated at its latest use, and the starts of calls still running (also
//   folded, dated later). Closes ride on the next exchange and are kept
//   until a reply to it arrives.
// - Sizing (docs/leases.md, "Sizing"): it refreshes when what it holds
//   beyond the lead time (its round trip, with headroom) will not cover its
//   queue and its recent use rate over the lead, or the head of its queue
//   cannot start; it then asks for its queue and its rate over the lead +
//   its stock span (stock_ms, at least a thirtieth of the window; while
//   the root grants all it asks and no other child waits for units,
//   enough for kStockCalls calls, at most a quarter of the window). So a
//   steady child exchanges about once per stock span. In every
//   exchange it gives back (cumulative returns) the units its rate says it
//   cannot spend before their lease ends, or beyond what it would ask for
//   (with nothing queued, at the rate of the last quarter of rate_ms when
//   that is lower) less the used units that come back within the lead, and
//   the idle slots
//   beyond its queue and its recent peak of calls (over rate_ms, or a
//   stock span when longer; twice that while the
//   root grants all it asks; none once it holds no units). While the root's
//   last reply said other children wait for slots
//   (LeaseGrant::slots_wanted), it keeps only the slots that start within
//   the lead the calls its units can start, for its queue and then its
//   rate, at the pace its recent calls held a slot. While the root is
//   short (it granted less than asked,
//   or said other children wait for units: LeaseGrant::units_wanted),
//   holding more than twice the units it keeps is a reason to exchange of
//   its own. A spent lease's
//   close waits for another
//   reason to exchange, at most close_wait() (close_within_ms, up to two
//   stock spans for long windows); one that gives unused units back does
//   not wait, nor one that gives idle slots back unless the root's last
//   reply granted all that was asked and no other child waited for a slot.
// - After a refusal, or a lease of slots alone, it asks for units again
//   retry_in_ms less its round trip after the reply.
// - At most one new exchange per refresh_ms, or per refresh_ms / 4 while
//   the head of its queue cannot start from what it holds; no pacing while
//   the root's last reply granted all that was asked.
// - One exchange at a time, resent unchanged every retry_ms until the
//   reply with this incarnation and seq arrives; any other reply is
//   ignored. Leases live in memory only: a restarted child is a new
//   incarnation with none.
// - A penalty (on_penalty: an upstream 429 here; on_notice or a reply: one
//   the root relays) stops every take and slot at once, until this clock
//   shows outlast(what was left of it) after it learned it. One seen here is
//   a reason to exchange now: the next exchange leaves at once (a resend of
//   the one out, if any, early), and every exchange carries what is left.
// - When its leases cannot serve a call: kFailClosed waits; kFloor spends
//   its floor as a sliding window of its own (a use frees when this clock
//   shows outlast(T) after it, a slot on release or at outlast(A)), so the
//   floor's uses in any real window stay within the floor (a new
//   incarnation waits outlast(longest window) first); kFailOpen admits
//   everything while an exchange has been out unanswered for unreachable_ms.
// - `now` is this child's own clock; an older `now` counts as the newest
//   seen.
//
// Example:
//   drl::internal::HolderConfig config;
//   config.child = 2;
//   config.incarnation = 1;
//   config.windows = 1;
//   config.attempt_timeout_ms = 500;
//   config.windows_ms = {50};  // exact clocks here: a used unit comes back 50 ms after its use
//   drl::internal::LeaseHolder holder(config);
//   holder.set_queued({{/*priority=*/0, /*units=*/{3}, /*slots=*/1}}, /*now=*/100);
//   auto ask = holder.next_exchange(100);
//   assert(ask.has_value());
//   assert(ask->seq == 1);
//   assert(ask->demand[0].units[0] == 3);  // all it has queued
//   drl::internal::LeaseGrant grant;
//   grant.child = 2;
//   grant.incarnation = 1;
//   grant.seq = 1;
//   grant.lease_id = 7;
//   grant.units = {3};
//   grant.slots = 1;
//   grant.duration_ms = 200;
//   holder.on_grant(grant, /*now=*/130);  // the lease ends at 100 + 200
//   assert(holder.take({2}, 200));
//   assert(!holder.take({2}, 249));  // 1 left
//   assert(holder.take({2}, 250));   // the first 2 came back: their use left the window
//   assert(!holder.can_take({1}, 300));  // ended
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "lease_messages.h"
#include "ring.h"

namespace drl::internal {

// What a child does once its leases cannot serve a call (docs/leases.md,
// "When the root cannot be reached").
enum class WhenShort : uint8_t {
  kFailClosed,  // wait for a lease (the default)
  kFloor,       // spend its floor (reserved for it by the ledger): still exact
  kFailOpen,    // once the root has not answered for unreachable_ms, admit: NOT exact
};

// The calls a slow child stocks for while its root has room (stock_span):
// at steady load it exchanges at most about once per this many calls.
constexpr int64_t kStockCalls = 64;

// While other children wait for slots, a child keeps this many times the
// slots its calls need on average to start within the lead (slots_to_start):
// calls arrive, and used units come back, in bunches (twice gave 0.85 and
// 0.848 where four gave 0.856 and 0.851, build/lease_bench's far hotspot).
constexpr int64_t kSlotHeadroom = 4;

// An amount at a reading of the child's clock: a peak of running calls, a
// released call's hold time, a floor use.
struct DatedAmount {
  LeaseMillis at = 0;
  int64_t amount = 0;
};

struct HolderConfig {
  uint64_t child = 0;
  uint64_t incarnation = 0;
  size_t windows = 1;
  LeaseMillis attempt_timeout_ms = 0;   // A
  LeaseMillis retry_ms = 500;           // resend an unanswered exchange after this
  LeaseMillis idle_ms = 2'000;          // give everything back after this long with no take and no queue
  LeaseMillis stock_ms = 100;           // H: a refresh asks for the recent use rate over the lead + this (stock_span)
  LeaseMillis refresh_ms = 0;           // between exchanges, unless it holds nothing its queue can use
  LeaseMillis rate_ms = 1'000;          // the recent use rate is measured over this
  LeaseMillis close_within_ms = 1'000;  // a spent lease's close waits at most this for another exchange
  size_t max_groups = 8;                // K: use groups per window in a close
  ClockBounds clocks;
  WhenShort when_short = WhenShort::kFailClosed;
  std::vector<LeaseMillis> windows_ms;  // the windows' lengths: a used unit comes back after outlast(T); kFloor
  std::vector<int64_t> floor_units;     // kFloor: per window, as the ledger's LeaseFloor
  int64_t floor_slots = 0;
  LeaseMillis unreachable_ms = 2'000;  // kFailOpen: an exchange unanswered this long
  // A take from a lease needs this much of the lease left (a child engine
  // sets it to its release allowance: a use must be released before its
  // lease ends, see release()).
  LeaseMillis release_margin_ms = 0;
};

// Why a holder sends a new exchange (resends aside): the first of these
// that applies, in this order; kNone, no exchange is due.
enum class ExchangeCause : uint8_t {
  kNone,
  kPenalty,      // a penalty to report
  kUnitsBack,    // a close giving unused units back
  kSlotsBack,    // a close giving idle slots back while the root was short
  kCloses,       // a spent or ended lease's close, after close_wait()
  kStarved,      // the head of its queue has no slot, or a window no units
  kUnits,        // what it holds will not cover its queue and rate over the lead
  kQueuedSlots,  // fewer idle slots than its queue needs
  kKeptSlots,    // its idle slots all sit on leases its rate empties within the lead
};

// The new exchanges a holder sent, by cause. For benchmarks and tuning
// (lease_bench).
struct ExchangeCauses {
  uint64_t penalty = 0;
  uint64_t units_back = 0;
  uint64_t slots_back = 0;
  uint64_t closes = 0;
  uint64_t starved = 0;
  uint64_t units = 0;
  uint64_t queued_slots = 0;
  uint64_t kept_slots = 0;

  void count(ExchangeCause cause);  // adds one to the cause's count (none for kNone)
  uint64_t total() const {
    return penalty + units_back + slots_back + closes + starved + units + queued_slots + kept_slots;
  }
  ExchangeCauses& operator+=(const ExchangeCauses& o) {
    penalty += o.penalty, units_back += o.units_back, slots_back += o.slots_back, closes += o.closes;
    starved += o.starved, units += o.units, queued_slots += o.queued_slots, kept_slots += o.kept_slots;
    return *this;
  }
};

class LeaseHolder {
 public:
  using CallId = uint64_t;

  explicit LeaseHolder(HolderConfig config);

  bool can_take(const std::vector<int64_t>& amounts, LeaseMillis now);
  // `release`: 0, the use is read now; else the use is not read until
  // release(through >= release, ...) says its work left (a child engine's
  // start number), and its lease stays open until then.
  bool take(const std::vector<int64_t>& amounts, LeaseMillis now, uint64_t release = 0);
  // Every take made with a `release` <= through has left by `now`: its uses
  // are read now. A release at or after its lease's end breaks the lease-end
  // margin (docs/leases.md, "Uses read at their release"): counted in
  // late_releases().
  void release(uint64_t through, LeaseMillis now);
  void set_release_margin(LeaseMillis margin_ms) { config_.release_margin_ms = std::max<LeaseMillis>(0, margin_ms); }
  uint64_t late_releases() const { return late_releases_; }
  std::optional<CallId> slot_acquire(LeaseMillis now);
  void slot_release(CallId call, LeaseMillis now);
  // An upstream 429 seen here, with the wait it asked for (Retry-After).
  void on_penalty(LeaseMillis duration_ms, LeaseMillis now);
  void on_notice(const PenaltyNotice& notice, LeaseMillis now);
  bool penalized(LeaseMillis now);
  // What the host's queued calls need, per priority (replaces the last).
  void set_queued(std::vector<DemandLevel> queued, LeaseMillis now);

  // The exchange to send now, if one is due (a new one or a resend).
  std::optional<Exchange> next_exchange(LeaseMillis now);
  void on_grant(const LeaseGrant& grant, LeaseMillis now);
  // When next_exchange() or the expiry of a call or a lease next has work.
  std::optional<LeaseMillis> next_wake(LeaseMillis now);

  // An exchange has been out unanswered for unreachable_ms.
  bool unreachable(LeaseMillis now) const;
  // Views: units of window k usable now, slots free now, leases open.
  int64_t held(size_t k, LeaseMillis now);
  int64_t free_slots(LeaseMillis now);
  size_t open_leases() const { return leases_.size(); }
  size_t windows() const { return config_.windows; }
  // Leases granted to it, and how many of them had ended by its own clock
  // when they arrived (a lease shorter than the round trip to the root is
  // never spent: stats say so).
  uint64_t leases_received() const { return leases_received_; }
  uint64_t leases_arrived_ended() const { return leases_arrived_ended_; }
  LeaseMillis round_trip_ms() const { return rtt_; }  // the last one measured (0: none yet)
  // The duration of the last lease granted to it (0: none yet): longer
  // than the bucket's leaseMs when it is far from the root (Ledger::duration).
  LeaseMillis last_lease_ms() const { return last_lease_ms_; }
  const ExchangeCauses& causes() const { return causes_; }

 private:
  struct Use {
    LeaseMillis at;
    int64_t amount;
  };
  struct Held {
    uint64_t id = 0;
    LeaseMillis end = 0;
    std::vector<int64_t> left;
    std::vector<int64_t> returned;  // units given back (cumulative)
    int64_t slots = 0;
    int64_t slots_returned = 0;          // idle slots given back (cumulative)
    std::vector<std::vector<Use>> uses;  // per window, folded
    std::map<CallId, LeaseMillis> running;
    // Takes whose work has not left yet: (release number, units per window).
    std::vector<std::pair<uint64_t, std::vector<int64_t>>> unreleased;
  };
  struct Pending {  // a close waiting to be sent, with readings, not ages
    uint64_t lease_id;
    std::vector<std::vector<Use>> uses;
    std::vector<Use> running;  // starts, amount 1 each until folded
    LeaseMillis closed_at = 0;
    // Unused units, idle slots: the root can lend them once it knows.
    bool gives_units = false;
    bool gives_slots = false;
  };
  // Whether a close goes at once (paced) rather than waiting close_wait():
  // its unused units; its idle slots, unless the root last had room to
  // spare and no other child waited for a slot.
  bool urgent(const Pending& p) const { return p.gives_units || (p.gives_slots && (!ample_ || contended_)); }

  void advance(LeaseMillis now);
  void give_back(LeaseMillis now);
  std::vector<LeaseReturn> returns(LeaseMillis now);
  int64_t queued_units(size_t k) const;
  int64_t queued_slots() const;
  int64_t expected(size_t k, LeaseMillis span) const;
  int64_t peak_slots() const;
  int64_t units_to_keep(size_t k, LeaseMillis now) const;  // unused units of window k worth keeping
  bool holds_spare_units(LeaseMillis now) const;           // twice those while the root is short
  int64_t slots_to_keep() const;
  // With rate_span, also the calls its rate makes over it, as far as its units go.
  int64_t startable_calls(LeaseMillis by, LeaseMillis rate_span = 0) const;
  int64_t slots_to_start(int64_t calls, LeaseMillis span) const;
  int64_t slots_for_lead(LeaseMillis now) const;
  int64_t lasting_free_slots(LeaseMillis now, LeaseMillis span) const;
  // The low mark's cause: kNone, kUnits, kQueuedSlots or kKeptSlots.
  ExchangeCause refresh_cause(LeaseMillis now) const;
  bool needs_refresh(LeaseMillis now) const { return refresh_cause(now) != ExchangeCause::kNone; }
  // Why a new exchange is due now, before its pacing (kNone: it is not).
  ExchangeCause exchange_cause(LeaseMillis now) const;
  LeaseMillis close_wait() const;
  static int64_t usable_slots(const Held& h) {
    return h.slots - h.slots_returned - static_cast<int64_t>(h.running.size());
  }
  void recycle(Held& h, LeaseMillis now) const;
  bool recycles_in_time(const Held& h) const;
  int64_t usable_by(const Held& h, size_t k, LeaseMillis by) const;
  void close(size_t index);
  void fold(std::vector<Use>& uses) const;
  static void note_use(std::vector<Use>& uses, LeaseMillis at, int64_t amount);
  bool fits(const std::vector<int64_t>& amounts, LeaseMillis now) const;
  bool fits_floor(const std::vector<int64_t>& amounts) const;
  bool open_gate(LeaseMillis now) const { return config_.when_short == WhenShort::kFailOpen && unreachable(now); }
  std::vector<DemandLevel> demand(LeaseMillis now) const;
  bool starved(LeaseMillis now) const;
  LeaseMillis spacing(LeaseMillis now) const;
  LeaseMillis lead() const;
  // How much of its rate a child stocks for window k beyond the lead.
  LeaseMillis stock_span(size_t k) const;
  void learn_penalty(LeaseMillis left, LeaseMillis now);
  LeaseMillis penalty_end() const;

  HolderConfig config_;
  LeaseMillis now_ = 0;
  std::vector<Held> leases_;  // by end, earliest first
  std::vector<Pending> pending_;
  std::map<CallId, LeaseMillis> calls_;  // running calls on open leases: their start
  CallId next_call_ = 1;
  std::vector<DemandLevel> queued_;
  // Takes within rate_ms: when each was made, and its amounts, one per
  // window (config_.windows per take, in the order of recent_).
  Ring<LeaseMillis> recent_;
  Ring<int64_t> recent_amounts_;
  std::vector<int64_t> recent_sum_;  // their amounts, per window
  // The same over the last quarter of rate_ms (units_to_keep, after a
  // lull): the amounts, and how many of recent_'s last entries they sum.
  std::vector<int64_t> lull_sum_;
  size_t lull_count_ = 0;
  Ring<DatedAmount> peaks_;  // calls running after each start within rate_ms, falling
  // Calls released within rate_ms: (release, how long it held its slot),
  // and the sum of those times (slots_to_start).
  Ring<DatedAmount> slot_times_;
  LeaseMillis slot_time_sum_ = 0;
  LeaseMillis last_active_ = 0;
  uint64_t seq_ = 0;
  // The exchange out, frozen: resent unchanged until answered.
  std::optional<Exchange> out_;
  LeaseMillis out_first_sent_ = 0, out_last_sent_ = 0;
  std::vector<Pending> out_closes_;
  LeaseMillis not_before_ = 0;  // after a refusal: when asking again may help
  LeaseMillis last_exchange_ = 0;
  ExchangeCauses causes_;
  bool exchanged_ = false;
  LeaseMillis rtt_ = 0;  // the last round trip measured (0: none yet)
  // Whether the last reply granted all the exchange asked for, every
  // window's units and the slots, and said no other child waits for units
  // (LeaseGrant::units_wanted): the root had room to spare, so a spent
  // lease's idle slots need not hurry back (urgent), a slow child may
  // stock for more calls (stock_span), and units beyond what it keeps are
  // no reason to exchange (holds_spare_units). lent_ms_: that lease's
  // duration.
  bool ample_ = false;
  LeaseMillis lent_ms_ = 0;
  // Whether the last reply said other children want slots the root does
  // not have free (LeaseGrant::slots_wanted): then idle slots beyond the
  // recent peak go back, and promptly, even while this child's own asks
  // are granted in full.
  bool contended_ = false;
  // The latest-ending penalty known: at the reading penalty_at_, at most
  // penalty_ms_ real ms remained; penalty_report_: seen here, not yet sent.
  LeaseMillis penalty_at_ = 0, penalty_ms_ = 0;
  bool penalty_report_ = false;
  // kFloor: the floor's uses still in their window (per window, by
  // reading), and its running calls. DatedAmount, not Use: the ring type of
  // peaks_ and slot_times_, so core.wasm holds one ring's code, not two.
  std::vector<Ring<DatedAmount>> floor_uses_;
  std::vector<int64_t> floor_used_;
  std::map<CallId, LeaseMillis> floor_running_;
  // Floor takes whose work has not left yet (counted in floor_used_, read
  // into floor_uses_ at their release).
  std::vector<std::pair<uint64_t, std::vector<int64_t>>> floor_unreleased_;
  uint64_t late_releases_ = 0;
  uint64_t leases_received_ = 0, leases_arrived_ended_ = 0;
  LeaseMillis last_lease_ms_ = 0;
  // Its first reading + outlast(longest window, attempt timeout): a
  // restarted child's earlier incarnation may have spent the floor just
  // before, so a new one waits until those uses and calls surely stopped.
  std::optional<LeaseMillis> floor_from_;
};

}  // namespace drl::internal
