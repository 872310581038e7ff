// The messages between a lease tree's children and its root (docs/leases.md)
// and the clock bounds both sides derive their margins from. Plain data:
// only durations cross, never a clock reading.
//
// Contract:
// - A child sends one Exchange at a time and resends it unchanged (same seq,
//   same ages) until a LeaseGrant with its incarnation and seq arrives.
// - Closes are final and idempotent per lease id; returns are cumulative
//   (the root keeps the largest it has seen); demand is what the child wants
//   beyond what it holds.
// - ClockBounds turns a duration one clock measured into the margin that can
//   only over-count: `stretch` for a duration the root waits out,
//   `lease_end_extra` for the root's end of a lease, `dating_margin` for a
//   reported age.
//
// Example:
//   drl::internal::ClockBounds clocks{/*slack_ms=*/10, /*drift_ppm=*/100};
//   assert(clocks.stretch(1000) == 1001);        // 1000 ms at +100 ppm, rounded up
//   assert(clocks.lease_end_extra(5000) == 5022); // (5000 + 10) stretched both ways, + 10
//   assert(clocks.dating_margin() == 20);         // the use's lag and the receipt's
//   drl::internal::Exchange ex;
//   ex.child = 3;
//   ex.seq = 1;
//   ex.demand.push_back({/*priority=*/0, /*units=*/{5}, /*slots=*/1});
//   assert(ex.closes.empty());
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace drl::internal {

using LeaseMillis = int64_t;

// The bounds on every clock in the tree (docs/leases.md, "Clocks").
struct ClockBounds {
  LeaseMillis slack_ms = 0;  // a reading may lag its clock by up to this
  int64_t drift_ppm = 0;     // every clock runs at 1 +- drift_ppm / 1e6 of real time

  // d real ms at most, as the fastest clock may count them: ceil(d (1 + rho)).
  LeaseMillis stretch(LeaseMillis d) const { return ceil_div(d * (kMillion + drift_ppm), kMillion); }
  // How long after its receipt the root counts a lease of d ms as open:
  // the child's d plus its use reading's lag, in real time at the slowest
  // rate, in root time at the fastest, plus the receipt reading's lag.
  LeaseMillis lease_end_extra(LeaseMillis d) const {
    return ceil_div((d + slack_ms) * (kMillion + drift_ppm), kMillion - drift_ppm) + slack_ms;
  }
  // Added to receipt - age when the root dates a reported use.
  LeaseMillis dating_margin() const { return 2 * slack_ms; }
  // How long after a reading to wait, by the same clock, to be sure d real
  // ms have passed since the event it read.
  LeaseMillis outlast(LeaseMillis d) const { return stretch(d) + slack_ms; }
  // At most `left` real ms remained at one reading; at most this many
  // remain `elapsed` ms later by the same clock (the real time elapsed is at
  // least (elapsed - S) / (1 + rho) >= elapsed - S - elapsed rho).
  LeaseMillis left_after(LeaseMillis left, LeaseMillis elapsed) const {
    if (left <= 0) return 0;
    return std::max<LeaseMillis>(0, left + slack_ms - elapsed + ceil_div(elapsed * drift_ppm, kMillion));
  }

 private:
  static constexpr int64_t kMillion = 1'000'000;
  static LeaseMillis ceil_div(int64_t a, int64_t b) { return a <= 0 ? a / b : (a + b - 1) / b; }
};

// Uses of one window, folded: `amount` units used at most `age_ms` before
// the message was first sent (the group's latest use).
struct UseGroup {
  LeaseMillis age_ms = 0;
  int64_t amount = 0;
};

// Everything a lease did, stated once when the child is done with it.
struct LeaseClose {
  uint64_t lease_id = 0;
  std::vector<std::vector<UseGroup>> uses;  // per window; units not listed were never used
  std::vector<LeaseMillis> running_ages;    // calls still running: the age of each start (folded later)
};

// What the child has given back of a still-open lease so far (cumulative).
struct LeaseReturn {
  uint64_t lease_id = 0;
  std::vector<int64_t> units;  // per window
  int64_t slots = 0;
};

// What a child wants beyond what it holds, at one priority.
struct DemandLevel {
  int32_t priority = 0;
  std::vector<int64_t> units;  // per window
  int64_t slots = 0;
};

// child -> root.
struct Exchange {
  uint64_t child = 0;
  uint64_t incarnation = 0;  // grows with every restart of the child
  uint64_t seq = 0;          // grows with every new exchange of an incarnation (from 1)
  std::vector<LeaseClose> closes;
  std::vector<LeaseReturn> returns;
  std::vector<DemandLevel> demand;
  // A penalty (an upstream 429) this child knows of: at most this many real
  // ms of it remain as this copy leaves (0: none). Not part of the frozen
  // exchange: a resend carries the newest, and the root takes it from every
  // copy, whatever its seq (docs/leases.md, "The shared penalty").
  LeaseMillis penalty_ms = 0;
  // The child's last measured round trip to the root (0: none yet; absent
  // on the wire, from a child that predates it, reads as 0). A root that
  // knows it lends a far child a longer lease (Ledger::duration), so its
  // exchanges spend a smaller part of each lease on the way.
  LeaseMillis round_trip_ms = 0;
};

enum class Refusal : uint8_t {
  kNone = 0,          // a lease
  kNothingFree,       // asked, but nothing it asked for is free: wait retry_in_ms
  kNothingAsked,      // no demand: closes and returns applied, nothing leased
  kStaleIncarnation,  // a newer incarnation of this child has spoken
  kMalformed,         // the exchange breaks the protocol (see the ledger's error)
};

// root -> child: the answer to (child, incarnation, seq).
struct LeaseGrant {
  uint64_t child = 0;
  uint64_t incarnation = 0;
  uint64_t seq = 0;
  uint64_t lease_id = 0;       // 0 with a refusal
  std::vector<int64_t> units;  // per window
  int64_t slots = 0;
  LeaseMillis duration_ms = 0;  // from the child's first send of the exchange, by its own clock
  Refusal refusal = Refusal::kNone;
  // With kNothingFree, or a lease of slots alone (the root short of
  // units): until the root's next unit (or slot) frees.
  LeaseMillis retry_in_ms = 0;
  LeaseMillis penalty_ms = 0;  // the penalty the root knows of, as Exchange::penalty_ms, as the reply leaves
  // Slots the other children asked for beyond what the root has free, as
  // the reply leaves (0: none short; absent on the wire, from a root that
  // predates it, reads as 0). Not part of the frozen reply, as penalty_ms.
  int64_t slots_wanted = 0;
  // Units the other children asked for beyond what the root has free, in
  // the window where that is most, as the reply leaves (as slots_wanted).
  int64_t units_wanted = 0;
};

// root -> every child, sent at once when an exchange reports a penalty that
// ends later than the one the root knew of (lost: the next reply carries it).
struct PenaltyNotice {
  LeaseMillis penalty_ms = 0;  // as Exchange::penalty_ms, as the notice leaves
};

}  // namespace drl::internal
