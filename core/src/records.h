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

// Appends the step's records to `out`. Sized once, then written in place:
// an insert of four values per record was about 6% of a wasm take.
inline void encode_output(const Engine& e, std::vector<double>& out) {
  const size_t from = out.size();
  out.resize(from + 4 * (e.writes().size() + e.actions().size()));
  double* r = out.data() + from;
  for (const Write& w : e.writes()) {
    r[0] = static_cast<double>(kWriteRecordBase + static_cast<int>(w.kind));
    r[1] = static_cast<double>(w.at);
    r[2] = w.kind == WriteKind::PutPenalty ? (w.lift_pending ? 1 : 0) : static_cast<double>(w.amount);
    r[3] = static_cast<double>(w.window);
    r += 4;
  }
  for (const Action& a : e.actions()) {
    const bool reject = a.kind == ActionKind::Reject;
    r[0] = reject ? 3 : static_cast<double>(a.kind);
    r[1] = static_cast<double>(a.ticket);
    r[2] = reject ? static_cast<double>(a.code) : static_cast<double>(a.attempt);
    r[3] = reject ? static_cast<double>(a.status) : 0;
    r += 4;
  }
}

}  // namespace drl::internal
