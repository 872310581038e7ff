// Read-only views of an engine's state, for tests and benchmarks: the test
// peer of drl::Engine. Not part of the host contract (drl/engine.h): a host
// acts on writes(), actions() and next_wake(), never on these.
//
//   using drl::internal::inspect;
//   drl::Engine engine;
//   engine.configure(R"({"bucket":{"limitPerWindow":5,"windowInMs":1000},"concurrency":2})", 0);
//   engine.arrive(/*cost=*/3, /*now=*/10);
//   inspect(engine).used();     // 3
//   inspect(engine).running();  // 1
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "drl/engine.h"

namespace drl::internal {

class EngineInspector {
 public:
  explicit EngineInspector(const Engine& engine) : scheduler_(*engine.scheduler_) {}

  Millis now() const;  // the latest time seen
  Millis forced_until() const;
  int64_t used() const;  // sum of live grants as of the last event
  size_t log_entries() const;
  size_t active() const;                                   // slots held (running or between attempts)
  size_t running() const;                                  // callbacks currently executing
  size_t queued() const;                                   // waiting for a first start
  size_t pending_refunds() const;                          // refunded grants whose rows are not yet rewritten
  std::vector<std::pair<Millis, int64_t>> grants() const;  // (at, amount), oldest first
  // The same for the window named `window` (kPrimaryWindow: the primary); empty if none.
  std::vector<std::pair<Millis, int64_t>> grants(const std::string& window) const;
  // Units taken under the reservation in force whose rows are not yet written.
  int64_t unwritten(const std::string& window) const;

 private:
  const Scheduler& scheduler_;
};

inline EngineInspector inspect(const Engine& engine) { return EngineInspector(engine); }

}  // namespace drl::internal
