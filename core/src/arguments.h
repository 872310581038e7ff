// The rules for a caller's arguments that need no bucket: numbers as a
// person wrote them, one amount of a cost, and the Waiting options. The
// client words the same rules in shim/rules.ts (test/node/contracts.test.ts
// checks the words agree). Rules that need the bucket's windows (a cost's
// units, a usage) are Scheduler::costed and Scheduler::usage_of.
//
// Example:
//   assert(drl::internal::number_text(2.0) == "2");
//   assert(drl::internal::number_text(0.5) == "0.5");
//   assert(!drl::internal::amount_problem(0, "cost"));
//   assert(drl::internal::amount_problem(1.5, "cost.tokens")->message ==
//          "[drl:invalid-argument] cost.tokens must be an integer >= 0 (received 1.5)");
//   drl::Waiting w;
//   w.priority = 1001;
//   assert(drl::internal::waiting_problem(w)->code == drl::ErrorCode::InvalidArgument);
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "drl/engine.h"
#include "drl/error.h"

namespace drl::internal {

// The largest integer a JS number holds exactly (Number.MAX_SAFE_INTEGER):
// a cost beyond it may not be the number the caller wrote.
constexpr double kMaxSafeInteger = 9007199254740991.0;

// A number as a person wrote it, and as JS's String() writes it: 2, not
// 2.0 (JS numbers arrive as doubles). Integers print in full up to 2^63
// (9007199254740992, not 9.007199254740992e+15), so a message the client
// words from the same rule (shim/rules.ts) reads the same.
std::string number_text(double v);

// The rule for one amount of a cost (named `path`, "cost", with ".<unit>"
// when `unit` is given): an integer >= 0 that a JS number holds exactly. 0
// takes nothing of that unit. Above a window's limit is CostTooLarge,
// decided against the windows. The name is only built for a message.
std::optional<Error> amount_problem(double v, std::string_view path, std::string_view unit = {});
// The common case of that rule, decided inline: an integer in
// [0, kMaxSafeInteger] (the cast is exact there, and cheaper than floor).
inline bool plain_amount(double v) {
  return v >= 0 && v <= kMaxSafeInteger && v == static_cast<double>(static_cast<int64_t>(v));
}

// Checks a caller's Waiting; nullopt when it is usable.
std::optional<Error> waiting_problem(const Waiting& w);
// The defaults, which need no check (decided inline).
inline bool default_waiting(const Waiting& w) { return w.priority == 0 && !w.max_wait_ms && !w.max_retries; }

}  // namespace drl::internal
