// The wire form of a lease tree's messages and of the root's rows
// (docs/leases.md, "The wire form"): JSON text, written and read here only,
// so a child engine, the root's ledger and their hosts agree on one shape.
//
// Contract:
// - write_*() gives compact JSON; read_*() takes it back, field for field
//   (read(write(m)) == m).
// - A reader refuses what breaks the shape with an error naming the field
//   by its path ("exchange.closes[0].uses[1][2]: ...") and what it must be:
//   ids, seqs and amounts are integers in [0, 2^53 - 1] (JS numbers hold
//   them), ages and durations too; priorities within +-kMaxPriority. Lists
//   are bounded (kMaxWireList entries, kMaxWindows per window list), and so
//   is the nesting, so a hostile message costs little to refuse.
// - Protocol rules (a seq of 0, more windows than the bucket) are the
//   ledger's to check (Ledger::on_exchange); a reader checks the shape.
//
// Example:
//   drl::internal::Exchange ex;
//   ex.child = 2;
//   ex.incarnation = 1;
//   ex.seq = 3;
//   ex.demand.push_back({/*priority=*/0, /*units=*/{5}, /*slots=*/1});
//   ex.round_trip_ms = 300;
//   const std::string text = drl::internal::write_exchange(ex);
//   assert(text == R"({"child":2,"incarnation":1,"seq":3,"closes":[],"returns":[],)"
//                  R"("demand":[{"priority":0,"slots":1,"units":[5]}],"penaltyMs":0,"roundTripMs":300})");
//   std::string error;
//   auto back = drl::internal::read_exchange(text, error);
//   assert(back.has_value());
//   assert(back->demand[0].units[0] == 5);
//   assert(!drl::internal::read_exchange(R"({"child":2,"incarnation":1,"seq":-1})", error));
//   assert(error == "exchange.seq must be an integer between 0 and 9007199254740991 (received -1)");
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "lease_holder.h"
#include "lease_messages.h"
#include "ledger.h"

namespace drl::internal {

// The most entries of any list in a message or row (closes, returns,
// demand levels, use groups, running calls): far above what a holder
// sends (it folds to max_groups), low enough to bound a hostile one.
inline constexpr size_t kMaxWireList = 4096;
// The most bytes of a message or row a reader accepts.
inline constexpr size_t kMaxWireBytes = 1 << 20;

// The writers (lease_wire_write.cpp); the readers below (lease_wire.cpp).
std::string write_exchange(const Exchange& ex);
std::string write_grant(const LeaseGrant& grant);
std::string write_notice(const PenaltyNotice& notice);
std::string write_lease_row(const LeaseRow& row);
std::string write_child_row(const ChildRow& row);

// A grant's refusal as the wire names it ("nothingFree", ...).
const char* refusal_name(Refusal r);

// nullopt, with `error` naming the field, when the text breaks the shape.
std::optional<Exchange> read_exchange(std::string_view text, std::string& error);
std::optional<LeaseGrant> read_grant(std::string_view text, std::string& error);
std::optional<PenaltyNotice> read_notice(std::string_view text, std::string& error);
std::optional<LeaseRow> read_lease_row(std::string_view text, std::string& error);
std::optional<ChildRow> read_child_row(std::string_view text, std::string& error);

// The root's config: {"windowsMs":[..],"limits":[..],"concurrency":n,
// "attemptTimeoutMs":n,"leaseMs":n,"maxLeaseMs":n,"demandTtlMs":n,
// "clock":{"slackMs":n,"driftPpm":n},"floors":{"<child>":{"units":[..],"slots":n}}};
// also checked by Ledger::check_config.
std::optional<LedgerConfig> read_ledger_config(std::string_view text, std::string& error);

// A child's setup (Engine::make_lease_child): {"child":n,"incarnation":n,
// "clock":{...},"whenShort":"failClosed"|"floor"|"failOpen","floor":{"units":[..],"slots":n},
// and the sizing knobs retryMs, idleMs, stockMs, refreshMs, rateMs,
// closeWithinMs, maxGroups, unreachableMs, releaseMarginMs (each optional:
// HolderConfig's default)}. The windows, their lengths and the attempt timeout come from
// the bucket's config.
std::optional<HolderConfig> read_child_setup(std::string_view text, std::string& error);

}  // namespace drl::internal
