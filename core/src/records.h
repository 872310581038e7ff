// The flat numeric encoding of an engine step's output, shared by the wasm
// ABI (core/wasm/abi.cpp) and the native replay tool, so the differential
// test compares the very same numbers. Four doubles per record:
//   writes first:  [10 + WriteKind, at, amount, window]; PutPenalty carries
//                  lift_pending (1 or 0) where the others carry amount; window
//                  is a grant write's window number (Engine::window_name), 0 for the rest
//   then actions:  [Start=1 | Resolve=2, ticket, attempt, 0] or [Reject=3, ticket, code, status]
#pragma once

#include <vector>

#include "drl/engine.h"

namespace drl::internal {

// A write's record kind is this plus its WriteKind, so no write is taken
// for an action (1..3). The JS loader reads it from drl_contract().
inline constexpr int kWriteRecordBase = 10;

inline void encode_output(const Engine& e, std::vector<double>& out) {
  for (const Write& w : e.writes()) {
    const double third = w.kind == WriteKind::PutPenalty ? (w.lift_pending ? 1 : 0) : static_cast<double>(w.amount);
    out.insert(out.end(), {static_cast<double>(kWriteRecordBase + static_cast<int>(w.kind)), static_cast<double>(w.at),
                           third, static_cast<double>(w.window)});
  }
  for (const Action& a : e.actions()) {
    if (a.kind == ActionKind::Reject) {
      out.insert(out.end(),
                 {3, static_cast<double>(a.ticket), static_cast<double>(a.code), static_cast<double>(a.status)});
    } else {
      out.insert(out.end(),
                 {static_cast<double>(a.kind), static_cast<double>(a.ticket), static_cast<double>(a.attempt), 0});
    }
  }
}

}  // namespace drl::internal
