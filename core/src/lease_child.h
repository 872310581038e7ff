// A child engine's side of a lease tree (docs/leases.md, "A child engine"):
// the LeaseHolder, and what ties it to the engine's calls. The scheduler
// calls it at a few points and never reaches into the holder otherwise.
//
// Contract:
// - admit(): a call starts only when the holder serves its costs (per
//   window, in window order) and a slot, both at once or neither. Its slot
//   is kept by ticket until the attempt ends (attempt_ended: report, throw,
//   gone caller) or times out (attempt_timed_out: then the holder frees it
//   by its own clock, at stretch(A) + S after the start, not at the engine's
//   A, so a new call never overlaps it in real time).
// - A take made with a release number (the engine's start number, when it
//   dates takes at their release) is read by the holder only at released():
//   the use is when the callback left, not when the start was decided. It
//   is taken only from a lease with the release margin left (the larger of
//   the setup's and the engine's allowance, its largest recent lag), so the
//   release lands before the lease's end unless the host lags beyond it.
// - step(): after every engine step, the queued demand (per priority) goes
//   to the holder, and an exchange that is due comes back as JSON text
//   (lease_wire.h); next_wake() is the holder's.
// - Replies and notices arrive as JSON text; a malformed one is refused
//   with an error naming the field and changes nothing.
//
// Example:
//   drl::internal::HolderConfig config;
//   config.child = 4;
//   config.incarnation = 1;
//   config.windows = 1;
//   config.attempt_timeout_ms = 1000;
//   drl::internal::LeaseChild child(config);
//   assert(!child.admit(/*ticket=*/1, {1}, /*release=*/0, /*margin_ms=*/0, /*now=*/0));  // no lease yet
//   auto ask = child.step({{/*priority=*/0, {1}, /*slots=*/1}}, 0);
//   assert(ask.has_value());
//   assert(ask->find("\"seq\":1") != std::string::npos);
//   std::string error;
//   assert(child.on_reply(R"({"child":4,"incarnation":1,"seq":1,"leaseId":9,"units":[1],"slots":1,)"
//                         R"("durationMs":500,"refusal":"none"})", 10, error));
//   assert(child.admit(1, {1}, 0, 0, 10));
//   child.attempt_ended(1, 20);
//   assert(child.holder().free_slots(20) == 1);
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lease_holder.h"

namespace drl::internal {

class LeaseChild {
 public:
  explicit LeaseChild(HolderConfig config) : least_margin_ms_(config.release_margin_ms), holder_(std::move(config)) {}

  LeaseHolder& holder() { return holder_; }
  const LeaseHolder& holder() const { return holder_; }

  bool admit(uint64_t ticket, const std::vector<int64_t>& amounts, uint64_t release, int64_t margin_ms, int64_t now);
  void attempt_ended(uint64_t ticket, int64_t now);
  void attempt_timed_out(uint64_t ticket) { slots_.erase(ticket); }
  void released(uint64_t through, int64_t now) { holder_.release(through, now); }
  void penalty(int64_t delay_ms, int64_t now) { holder_.on_penalty(delay_ms, now); }

  std::optional<std::string> step(std::vector<DemandLevel> queued, int64_t now);
  std::optional<int64_t> next_wake(int64_t now) { return holder_.next_wake(now); }

  bool on_reply(std::string_view text, int64_t now, std::string& error);
  bool on_notice(std::string_view text, int64_t now, std::string& error);

 private:
  // The setup's release margin: with release dating, a take needs at least
  // this (or the engine's allowance, when larger) of its lease left.
  int64_t least_margin_ms_ = 0;
  LeaseHolder holder_;
  std::map<uint64_t, LeaseHolder::CallId> slots_;  // running attempts' slots, by ticket
};

}  // namespace drl::internal
