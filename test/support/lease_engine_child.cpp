// A lease child driven as its host would: see lease_engine_child.h.
#include "lease_engine_child.h"

#include <stdexcept>

#include "lease_wire.h"

namespace drl::testing {

EngineChild::EngineChild(const std::string& config_json, const std::string& setup_json, Millis now)
    : engine_(std::make_unique<Engine>()) {
  const Status configured = engine_->configure(config_json, now);
  const Status made = configured.ok() ? engine_->make_lease_child(setup_json, now) : configured;
  if (!made.ok()) throw std::runtime_error(made.error().message);
  windows_ = engine_->config()->windows.size() + 1;
  // Its callbacks leave when a commit is durable, as in the object: a use
  // is read at its release.
  engine_->set_release_dating(true);
  engine_->clear_output();
}

EngineChild::Step EngineChild::drain(Step step) {
  for (const Action& a : engine_->actions()) {
    if (a.kind == ActionKind::Start) step.starts.push_back(a.ticket);
    if (a.kind == ActionKind::Exchange) {
      std::string error;
      step.exchange = internal::read_exchange(engine_->lease_exchange(), error);
      if (!step.exchange) step.error = "the child's own exchange does not read back: " + error;
    }
  }
  engine_->clear_output();
  step.through = engine_->starts_emitted();
  step.wake = engine_->next_wake();
  return step;
}

EngineChild::Step EngineChild::arrive(const std::vector<int64_t>& cost, int32_t priority, int64_t max_wait_ms,
                                      Millis now) {
  Amounts amounts{{"requests", static_cast<double>(cost[0])}};
  if (windows_ > 1 && cost.size() > 1) amounts.push_back({"tokens", static_cast<double>(cost[1])});
  Waiting waiting;
  waiting.priority = priority;
  waiting.max_wait_ms = static_cast<double>(max_wait_ms);
  const auto ticket = engine_->arrive(amounts, waiting, now);
  Step step;
  if (ticket.ok()) {
    step.ticket = *ticket;
  } else {
    step.error = ticket.error().message;
  }
  return drain(std::move(step));
}

EngineChild::Step EngineChild::tick(Millis now) {
  engine_->tick(now);
  return drain();
}

EngineChild::Step EngineChild::reply(const internal::LeaseGrant& grant, Millis now) {
  const Status s = engine_->lease_reply(internal::write_grant(grant), now);
  Step step;
  if (!s.ok()) step.error = s.error().message;
  return drain(std::move(step));
}

EngineChild::Step EngineChild::notice(const internal::PenaltyNotice& notice, Millis now) {
  const Status s = engine_->lease_notice(internal::write_notice(notice), now);
  Step step;
  if (!s.ok()) step.error = s.error().message;
  return drain(std::move(step));
}

EngineChild::Step EngineChild::released(uint64_t through, Millis now) {
  engine_->released(through, now);
  return drain();
}

EngineChild::Step EngineChild::report(Ticket ticket, bool rate_limited, int64_t retry_after_ms, Millis now) {
  Report r{rate_limited ? 429 : 200};
  if (rate_limited) r.retry_after_ms = static_cast<double>(retry_after_ms);
  // An attempt the engine timed out already answers UnknownTicket: a late
  // report, which changes nothing.
  Step step;
  step.reported = engine_->report(ticket, r, now).ok();
  return drain(std::move(step));
}

}  // namespace drl::testing
