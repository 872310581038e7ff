// The root's ledger of a lease tree (docs/leases.md): which units of each
// window and which concurrency slots are leased to which child, until when
// each one counts, and what each child last asked for.
//
// Contract:
// - Every leased unit counts over a superset of its real occupancy: from
//   its grant until it is returned unused (at once), until its reported use
//   dated `min(receipt - age + 2S, E)` plus the window stretched by the
//   drift, or until the lease's end at the root `E` plus that when nothing
//   is reported. Slots likewise, with the attempt timeout for the window,
//   and freed at receipt when a close reports them idle.
// - A grant of x units of a window at `now` is made only if
//   occupancy(now) + x <= limit, in every window and in slots; an end only
//   ever moves earlier, never past `now`, so lowering a limit grants nothing
//   until occupancy falls under it.
// - Per child it keeps the incarnation, the last seq and its reply: a new
//   seq is answered, the same seq gets the stored reply, an older seq gets
//   nothing, an older incarnation a refusal. Closes and returns apply from
//   every message of the lease's own child and incarnation.
// - Its whole state is its rows. on_exchange() answers with the rows it
//   changed; the host delivers the reply only once they are durable, and
//   restore() from them decides exactly as before.
// - A penalty an exchange reports (from any copy, whatever its seq) that
//   ends later than the one the root knew of comes back as a notice for
//   every other child; every reply carries what is left of it.
// - When a window the child asked for has no unit free, it lends the
//   child's slots alone, with retry_in_ms; it refuses (kNothingFree) only
//   when it can lend neither.
// - Every reply also carries how many slots the other children asked for
//   beyond what is free (slots_wanted), and how many units, in the window
//   where that is most (units_wanted): a child with idle slots or spare
//   units then gives them back (docs/leases.md, "Sizing").
// - `now` is the root's reading at (or after) the receipt; an older `now`
//   counts as the newest seen.
//
// Example:
//   drl::internal::LedgerConfig config;
//   config.windows_ms = {1000};
//   config.limits = {10};
//   config.concurrency = 2;
//   config.attempt_timeout_ms = 500;
//   config.lease_ms = 200;
//   drl::internal::Ledger ledger(config);
//   drl::internal::Exchange ask;
//   ask.child = 1;
//   ask.incarnation = 1;
//   ask.seq = 1;
//   ask.demand = {{/*priority=*/0, /*units=*/{6}, /*slots=*/1}};
//   auto first = ledger.on_exchange(ask, /*now=*/1000);
//   assert(first.reply->units[0] == 6);  // all it asked, the limit allows it
//   assert(first.writes.size() == 3);    // the lease, the child, the next lease id
//   assert(ledger.occupancy(0, 1000) == 6);
//   // The child used 4 units 150 ms before it sent its close.
//   drl::internal::Exchange done = ask;
//   done.seq = 2;
//   done.demand.clear();
//   done.closes = {{first.reply->lease_id, {{{/*age_ms=*/150, /*amount=*/4}}}, {}}};
//   auto second = ledger.on_exchange(done, 1100);
//   assert(second.reply->refusal == drl::internal::Refusal::kNothingAsked);
//   assert(ledger.occupancy(0, 1100) == 4);  // 2 came back unused
//   assert(ledger.occupancy(0, 1949) == 4);  // the uses, dated at 1100 - 150
//   assert(ledger.occupancy(0, 1950) == 0);
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "lease_messages.h"

namespace drl::internal {

// Units of each window and slots reserved for one child: the ledger never
// lends them, the child spends them on its own when its leases cannot serve
// a call (docs/leases.md, "When the root cannot be reached").
struct LeaseFloor {
  std::vector<int64_t> units;  // per window
  int64_t slots = 0;
};

// A lease lasts at least this many of its child's round trips, within
// [lease_ms, max_lease_ms] (LedgerConfig): 150 ms away (a 300 ms round
// trip), 9.6 s; 1-10 ms away, lease_ms.
constexpr int64_t kRoundTripsPerLease = 32;

struct LedgerConfig {
  std::vector<LeaseMillis> windows_ms;  // T_k
  std::vector<int64_t> limits;          // L_k
  int64_t concurrency = 0;              // C
  LeaseMillis attempt_timeout_ms = 0;   // A
  LeaseMillis lease_ms = 0;             // D: how long a child may use a lease, from its send
  // Above lease_ms: D grows to half the shortest window, or to
  // kRoundTripsPerLease of the child's round trip, up to this. A long window
  // lends for longer (a child refreshes when its stock runs low, not when
  // its lease ends), and so does a far child (fewer of its exchanges on the
  // way); a crashed child's units count D + T.
  LeaseMillis max_lease_ms = 0;
  LeaseMillis demand_ttl_ms = 10'000;     // a child's demand is forgotten this long after it spoke
  std::map<uint64_t, LeaseFloor> floors;  // by child: lent to no one, so every limit is lent less their sum
  ClockBounds clocks;
};

// A reported use (or a running call's start, amount 1) in the root's clock.
struct DatedUse {
  LeaseMillis at = 0;
  int64_t amount = 0;
  bool operator==(const DatedUse& o) const { return at == o.at && amount == o.amount; }
};

// One lease, as stored.
struct LeaseRow {
  uint64_t lease_id = 0;
  uint64_t child = 0;
  uint64_t incarnation = 0;
  LeaseMillis end_at = 0;  // E: receipt + ClockBounds::lease_end_extra(D)
  std::vector<int64_t> units;
  int64_t slots = 0;
  std::vector<int64_t> returned;  // open: the largest cumulative return seen
  int64_t slots_returned = 0;
  bool closed = false;
  std::vector<std::vector<DatedUse>> uses;  // closed: per window
  std::vector<LeaseMillis> running_at;      // closed: dated starts of calls still running
  bool operator==(const LeaseRow& o) const;
};

// One child, as stored.
struct ChildRow {
  uint64_t child = 0;
  uint64_t incarnation = 0;
  uint64_t last_seq = 0;
  LeaseGrant last_reply;
  std::vector<DemandLevel> demand;  // what it still wants, less what it was granted since
  LeaseMillis demand_at = 0;
  bool operator==(const ChildRow& o) const;
};

struct LedgerWrite {
  enum class Kind : uint8_t { kPutLease, kDeleteLease, kPutChild, kPutNextLeaseId };
  Kind kind = Kind::kPutLease;
  LeaseRow lease;   // kPutLease
  ChildRow child;   // kPutChild
  uint64_t id = 0;  // kDeleteLease: the lease id; kPutNextLeaseId: the next id
};

// Everything the ledger stores, as a host would read it back.
struct LedgerRows {
  std::map<uint64_t, LeaseRow> leases;
  std::map<uint64_t, ChildRow> children;
  uint64_t next_lease_id = 1;
  void apply(const LedgerWrite& w);
  bool operator==(const LedgerRows& o) const;
};

struct ExchangeResult {
  std::optional<LeaseGrant> reply;  // none for an older seq
  std::vector<LedgerWrite> writes;
  std::string error;                    // with Refusal::kMalformed: what was wrong
  std::optional<PenaltyNotice> notice;  // send to every other child now (not after the writes)
};

// What the ledger has seen of one child since it started, for stats. In
// memory only: a restarted root counts from zero again.
struct ChildTally {
  LeaseMillis first_at = 0;       // its first exchange this ledger answered
  LeaseMillis last_at = 0;        // its latest
  uint64_t exchanges = 0;         // exchanges with a new seq
  LeaseMillis round_trip_ms = 0;  // the round trip its latest exchange stated (0: none)
  LeaseMillis lease_ms = 0;       // the duration of the latest lease lent to it (0: none)
  // Per window, then slots: granted in leases, returned unused, and (per
  // window) the uses its closes reported.
  std::vector<int64_t> granted, returned, used;
};

// One child as the root counts it at a moment (stats), per window, then
// slots. Everything the ledger counts for it is held + used + lapsed.
struct ChildView {
  uint64_t child = 0;
  uint64_t incarnation = 0;
  std::vector<int64_t> held;    // in leases still running, not returned
  std::vector<int64_t> used;    // reported used (slots: still running), until they leave the window
  std::vector<int64_t> lapsed;  // in leases that ended unreported, or of an incarnation before its restart
  std::vector<int64_t> wanted;  // its latest demand, less what it was granted since (none once forgotten)
  ChildTally tally;
};

class Ledger {
 public:
  explicit Ledger(LedgerConfig config);
  // What is wrong with a config (floors above a limit), or "".
  static std::string check_config(const LedgerConfig& config);

  ExchangeResult on_exchange(const Exchange& ex, LeaseMillis now);
  // New limits and cap (the windows stay). Lowering takes nothing back; a
  // limit below its floors lends nothing (check_config says so first).
  void set_limits(std::vector<int64_t> limits, int64_t concurrency);
  void restore(const LedgerRows& rows, LeaseMillis now);

  // At most how many real ms the penalty the root knows of still lasts.
  LeaseMillis penalty_left(LeaseMillis now) const;
  // Slots the children other than `child` want (their demand not yet
  // forgotten) beyond the slots free at `now`.
  int64_t slots_wanted(uint64_t child, LeaseMillis now) const;
  // The same for units, in the window where it is most.
  int64_t units_wanted(uint64_t child, LeaseMillis now) const;
  // Units of window k (k == windows: slots) counted at `now`.
  int64_t occupancy(size_t k, LeaseMillis now) const;
  // Every child the ledger knows (its rows) or heard from since it started.
  std::vector<ChildView> children(LeaseMillis now) const;
  const LedgerRows& rows() const { return rows_; }
  const LedgerConfig& config() const { return config_; }

 private:
  // The dimensions: the windows, then the slots (index windows()).
  size_t windows() const { return config_.windows_ms.size(); }
  LeaseMillis hold(size_t k) const;
  LeaseMillis duration(const Exchange& ex) const;
  int64_t limit(size_t k) const;
  int64_t others_short(uint64_t child, size_t k, LeaseMillis now) const;
  template <typename Fn>
  void for_each_interval(const LeaseRow& lease, Fn fn) const;  // fn(dimension, end, amount)
  std::string check(const Exchange& ex) const;
  bool apply_close(const LeaseClose& close, const Exchange& ex, LeaseMillis now, std::vector<LedgerWrite>& writes);
  bool apply_return(const LeaseReturn& ret, const Exchange& ex, std::vector<LedgerWrite>& writes);
  LeaseGrant decide(const Exchange& ex, ChildRow& row, LeaseMillis now, std::vector<LedgerWrite>& writes);
  int64_t fair_share(size_t k, uint64_t child, int64_t free, LeaseMillis now) const;
  void prune(LeaseMillis now, std::vector<LedgerWrite>& writes);
  // What every reply carries as it leaves, stored or not: penalty_ms, slots_wanted, units_wanted.
  void stamp(LeaseGrant& reply, LeaseMillis now) const;

  ChildTally& tally(uint64_t child, LeaseMillis now);

  LedgerConfig config_;
  LedgerRows rows_;
  std::map<uint64_t, ChildTally> tallies_;
  LeaseMillis now_ = 0;
  // The latest-ending penalty reported: at penalty_at_ (a reading), at most
  // penalty_ms_ real ms remained. In memory only: a restarted root learns it
  // again from the reporter's next exchanges while it lasts.
  LeaseMillis penalty_at_ = 0, penalty_ms_ = 0;
};

}  // namespace drl::internal
