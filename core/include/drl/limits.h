// The limits the engine shares with the JS side, as constants in namespace
// drl. Each is one row of limits.def, the table shim/limits.ts and the table
// in docs/known-limits.md are generated from, so the client, the object and
// the engine refuse the same values with the same numbers in their messages.
//
// Example:
//   static_assert(drl::kMaxWindows == drl::kMaxExtraWindows + 1);  // the primary window and the extra ones
//   assert(drl::valid_name(std::string(drl::kMaxNameBytes, 'a')));
//   assert(!drl::valid_name(std::string(drl::kMaxNameBytes + 1, 'a')));
//
//   drl::Engine engine;
//   assert(engine.configure(R"({"bucket":{"limitPerWindow":5,"windowInMs":1000},"concurrency":1})", /*now=*/0).ok());
//   drl::Waiting eager;
//   eager.priority = drl::kMaxPriority;  // the highest priority is allowed
//   assert(engine.arrive(/*cost=*/1, eager, /*now=*/0).ok());
//   eager.priority = drl::kMaxPriority + 1;
//   assert(engine.arrive(/*cost=*/1, eager, /*now=*/0).error().message ==
//          "[drl:invalid-argument] priority must be an integer between -1000 and 1000 (received 1001)");
#pragma once

#include <cstddef>
#include <cstdint>

namespace drl {

#define DRL_LIMIT(type, name, value, meaning) inline constexpr type name = value;
#define DRL_TEXT(name, value, meaning) inline constexpr const char* name = value;
#define DRL_TEXTS(name, meaning, ...) inline constexpr const char* name[] = {__VA_ARGS__};
#include "drl/limits.def"
#undef DRL_LIMIT
#undef DRL_TEXT
#undef DRL_TEXTS

}  // namespace drl
