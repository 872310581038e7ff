// A model of a host's storage, fed only by the engine's writes: what the
// Durable Object's SQLite tables would hold. Shared by the Catch2 tests and
// the seeded schedules (property test, replay tool).
#pragma once

#include <cstdint>
#include <functional>
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
  std::map<Millis, int64_t> grants;  // the primary window's rows
  // The extra windows' rows, by window name (a grant write's Write::window,
  // named by Engine::window_name). A window with no rows has no entry.
  std::map<std::string, std::map<Millis, int64_t>> windows;
  Millis forced_until = 0;
  bool lift_pending = false;
  // The slots record (PutSlots stores the engine's slots_text() as it stands
  // when the step's writes are applied); absent until the first one.
  std::optional<std::string> slots_text;
  // The reservation record (PutReservation stores reservation_text() as it
  // stands when the step's writes are applied; "" is none).
  std::optional<std::string> reservation_text;
  // The release mark (PutReleased), absent until the first one.
  std::optional<Millis> released_before;

  void apply(const Engine& e) {
    apply(
        e.writes(), e.config_text(), e.slots_text(), [&e](int window) { return e.window_name(window); },
        e.reservation_text());
  }

  // `window_name` names a grant write's window (Engine::window_name); without
  // it extra windows are keyed "#<number>".
  void apply(const std::vector<Write>& writes, const std::string& current_config,
             const std::string& current_slots = std::string(),
             const std::function<std::string(int)>& window_name = nullptr,
             const std::string& current_reservation = std::string()) {
    for (const Write& w : writes) {
      auto rows = [&]() -> std::map<Millis, int64_t>& {
        if (w.window == 0) return grants;
        return windows[window_name ? window_name(w.window) : "#" + std::to_string(w.window)];
      };
      switch (w.kind) {
        case WriteKind::PutGrant:
          rows()[w.at] = w.amount;
          break;
        case WriteKind::DeleteGrantsThrough: {
          auto& r = rows();
          r.erase(r.begin(), r.upper_bound(w.at));
          break;
        }
        case WriteKind::DeleteGrant:
          rows().erase(w.at);
          break;
        case WriteKind::ClearGrants:
          rows().clear();
          break;
        case WriteKind::PutPenalty:
          forced_until = w.at;
          lift_pending = w.lift_pending;
          break;
        case WriteKind::PutConfig:
          config_text = current_config;
          break;
        case WriteKind::PutSlots:
          slots_text = current_slots;
          break;
        case WriteKind::PutReservation:
          reservation_text = current_reservation;
          break;
        case WriteKind::PutReleased:
          released_before = w.at;
          break;
        case WriteKind::EraseAll:
          config_text.reset();
          released_before.reset();
          slots_text.reset();
          reservation_text.reset();
          grants.clear();
          windows.clear();
          forced_until = 0;
          lift_pending = false;
          break;
      }
      if (w.window != 0) {
        for (auto it = windows.begin(); it != windows.end();)
          it = it->second.empty() ? windows.erase(it) : std::next(it);
      }
    }
  }

  // The primary window's rows.
  std::vector<std::pair<Millis, int64_t>> rows() const { return {grants.begin(), grants.end()}; }
  // An extra window's rows (empty when it has none).
  std::vector<std::pair<Millis, int64_t>> rows(const std::string& window) const {
    auto it = windows.find(window);
    if (it == windows.end()) return {};
    return {it->second.begin(), it->second.end()};
  }

  Snapshot snapshot() const {
    Snapshot s;
    s.config_text = config_text;
    s.forced_until = static_cast<double>(forced_until);
    s.lift_pending = lift_pending;
    s.slots_text = slots_text;
    s.reservation_text = reservation_text;
    if (released_before) s.released_before = static_cast<double>(*released_before);
    for (const auto& [at, amount] : grants) s.grants.emplace_back(static_cast<double>(at), static_cast<double>(amount));
    for (const auto& [name, rows] : windows) {
      std::vector<std::pair<double, double>> out;
      for (const auto& [at, amount] : rows) out.emplace_back(static_cast<double>(at), static_cast<double>(amount));
      s.windows.emplace_back(name, std::move(out));
    }
    return s;
  }
};

}  // namespace drl::testing
