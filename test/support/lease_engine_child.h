// A lease child as its host drives it (test/support/lease_sim.h, engines
// mode): a real drl::Engine made a child (Engine::make_lease_child), fed
// only through its public API, its output read back as the host would: the
// calls it starts, the exchange it asks to send (as wire text, read with
// lease_wire.h), and when to wake it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "drl/engine.h"
#include "lease_messages.h"

namespace drl::testing {

class EngineChild {
 public:
  struct Step {
    Ticket ticket = 0;  // arrive: the new call's
    std::vector<Ticket> starts;
    std::optional<internal::Exchange> exchange;
    uint64_t through = 0;  // starts_emitted() after the step: released() with it once they left
    std::optional<Millis> wake;
    std::string error;      // the engine refused an event it should have taken
    bool reported = false;  // report: the attempt was still running (else timed out: ignored)
  };

  // `config_json`: the bucket's config (the root's windows); `setup_json`:
  // the child's (make_lease_child).
  EngineChild(const std::string& config_json, const std::string& setup_json, Millis now);

  Step arrive(const std::vector<int64_t>& cost, int32_t priority, int64_t max_wait_ms, Millis now);
  Step tick(Millis now);
  Step reply(const internal::LeaseGrant& grant, Millis now);
  Step notice(const internal::PenaltyNotice& notice, Millis now);
  Step released(uint64_t through, Millis now);
  // A report of `ticket`'s attempt: 200, or a 429 asking for `retry_after_ms`.
  Step report(Ticket ticket, bool rate_limited, int64_t retry_after_ms, Millis now);

  Engine& engine() { return *engine_; }

 private:
  Step drain() { return drain(Step()); }
  Step drain(Step step);
  std::unique_ptr<Engine> engine_;
  size_t windows_ = 1;
};

}  // namespace drl::testing
