// A model of a host's storage, fed only by the engine's writes: what the
// Durable Object's SQLite tables would hold. Shared by the Catch2 tests and
// the seeded schedules (property test, replay tool).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "drl/engine.h"

namespace drl::testing {

// What a host's storage holds, fed only by the engine's writes (applied in
// order, as the host contract says).
struct Storage {
  std::optional<std::string> config_text;
  std::map<Millis, int64_t> grants;
  Millis forced_until = 0;
  bool lift_pending = false;
  // The slots record (PutSlots stores the engine's slots_text() as it stands
  // when the step's writes are applied); absent until the first one.
  std::optional<std::string> slots_text;

  void apply(const Engine& e) { apply(e.writes(), e.config_text(), e.slots_text()); }

  void apply(const std::vector<Write>& writes, const std::string& current_config,
             const std::string& current_slots = std::string()) {
    for (const Write& w : writes) {
      switch (w.kind) {
        case WriteKind::PutGrant: grants[w.at] = w.amount; break;
        case WriteKind::DeleteGrantsThrough: grants.erase(grants.begin(), grants.upper_bound(w.at)); break;
        case WriteKind::DeleteGrant: grants.erase(w.at); break;
        case WriteKind::ClearGrants: grants.clear(); break;
        case WriteKind::PutPenalty:
          forced_until = w.at;
          lift_pending = w.lift_pending;
          break;
        case WriteKind::PutConfig: config_text = current_config; break;
        case WriteKind::PutSlots: slots_text = current_slots; break;
        case WriteKind::EraseAll:
          config_text.reset();
          slots_text.reset();
          grants.clear();
          forced_until = 0;
          lift_pending = false;
          break;
      }
    }
  }

  std::vector<std::pair<Millis, int64_t>> rows() const { return {grants.begin(), grants.end()}; }

  Snapshot snapshot() const {
    Snapshot s;
    s.config_text = config_text;
    s.forced_until = static_cast<double>(forced_until);
    s.lift_pending = lift_pending;
    s.slots_text = slots_text;
    for (const auto& [at, amount] : grants) s.grants.emplace_back(static_cast<double>(at), static_cast<double>(amount));
    return s;
  }
};

}  // namespace drl::testing
