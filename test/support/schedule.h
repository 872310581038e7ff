// Seeded random schedules driven through the engine, with a model host
// (storage applied from the engine's writes, evictions restored from it) and
// the invariants every step must keep. Used by the property test and by the
// replay tool that feeds the wasm differential test.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace drl::testing {

struct ScheduleOptions {
  uint64_t seed = 1;
  int steps = 60;
};

struct ScheduleResult {
  bool ok = true;
  std::string failure;  // the first broken invariant, with the step and seed
  size_t starts = 0;
  size_t settled = 0;
  size_t tickets = 0;
};

// Runs one schedule. When `trace` is given, every event is appended to it as
// {"e": ..., args..., "rc": ..., "records": [...], "wake": ..., "out"?: ...},
// which a replay of the same events through core.wasm must reproduce.
ScheduleResult run_schedule(const ScheduleOptions& options, nlohmann::json* trace = nullptr);

}  // namespace drl::testing
