// drl_replay SEED_FROM COUNT [STEPS]
// Prints one JSON line per seeded schedule: {"seed": n, "events": [...]}, each
// event with the native engine's return code, output records and wake time.
// test/node/differential.test.ts replays the events through core.wasm and
// requires the very same numbers.
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "schedule.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: drl_replay SEED_FROM COUNT [STEPS]\n");
    return 2;
  }
  const uint64_t from = std::strtoull(argv[1], nullptr, 10);
  const uint64_t count = std::strtoull(argv[2], nullptr, 10);
  const int steps = argc > 3 ? std::atoi(argv[3]) : 60;
  for (uint64_t seed = from; seed < from + count; ++seed) {
    nlohmann::json events = nlohmann::json::array();
    const auto result = drl::testing::run_schedule({seed, steps}, &events);
    std::cout << nlohmann::json{{"seed", seed}, {"events", std::move(events)}}.dump() << '\n';
    if (!result.ok) {
      std::fprintf(stderr, "%s\n", result.failure.c_str());
      return 1;
    }
  }
  return 0;
}
