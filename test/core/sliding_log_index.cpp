// Verifies the sliding log's block index against a plain walk: after any mix
// of takes, expiries, refunds (some to zero, which erase from the middle),
// grants inserted among the others (take_at),
// merges at the front and clears, fits_at and live_at answer exactly what
// walking every grant answers, for amounts deep into the log.
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <vector>

#include "sliding_log.h"

using drl::internal::Grant;
using drl::internal::SlidingLog;

namespace {

int64_t walk_fits_at(const SlidingLog& log, int64_t amount, int64_t limit, int64_t window, int64_t now) {
  int64_t excess = log.used() + amount - limit;
  if (excess <= 0) return now;
  for (const Grant& g : log.grants()) {
    excess -= g.amount;
    if (excess <= 0) return g.at + window;
  }
  return log.grants().back().at + window;
}

int64_t walk_live_at(const SlidingLog& log, int64_t window, int64_t t) {
  int64_t live = 0;
  for (const Grant& g : log.grants()) {
    if (g.at + window > t) live += g.amount;
  }
  return live;
}

}  // namespace

TEST_CASE("the block index answers as a walk over every grant does, whatever changed the log", "[sliding_log]") {
  std::mt19937_64 rng(20261201);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  for (int round = 0; round < 40; ++round) {
    SlidingLog log;
    const int64_t window = pick(1, 5) * 1000;
    const int64_t limit = 1'000'000;  // never binding: the log is shaped by the ops alone
    int64_t now = 1'000'000;
    const int ops = static_cast<int>(pick(200, 3000));
    for (int op = 0; op < ops; ++op) {
      const int64_t kind = pick(0, 99);
      if (kind < 70) {
        now += pick(0, 3);
        log.take(pick(1, 9), window, now);
      } else if (kind < 80) {
        now += pick(0, window / 4);
        log.prune(window, now);
      } else if (kind < 90 && !log.empty()) {
        const Grant g = log.grants()[static_cast<size_t>(pick(0, static_cast<int64_t>(log.size()) - 1))];
        // Now and then to zero (an erase from the middle: the index is rebuilt), mostly partly.
        log.shrink(g.at, pick(1, 8) == 1 ? g.amount : pick(1, std::max<int64_t>(1, g.amount - 1)));
      } else if (kind < 97 && log.size() >= 2) {
        log.merge_oldest();
      } else if (kind == 97 && !log.empty()) {
        // An observed grant dated among the others (learning from headers).
        log.take_at(pick(1, 9), pick(log.grants().front().at, log.grants().back().at + 2));
      } else if (kind == 99) {
        log.clear();
      }
      if (op % 7 != 0 || log.empty()) continue;
      const int64_t used = log.used();
      for (int64_t amount : {int64_t{1}, used / 3 + 1, used / 2 + 1, used}) {
        const int64_t tight = used + amount - amount / 2;  // so that roughly amount/2 units must expire
        REQUIRE(log.fits_at(amount, tight, window, now) == walk_fits_at(log, amount, tight, window, now));
      }
      REQUIRE(log.fits_at(1, limit, window, now) == now);
      for (int64_t dt : {int64_t{0}, window / 3, window / 2, window - 1, window}) {
        REQUIRE(log.live_at(window, now + dt) == walk_live_at(log, window, now + dt));
      }
    }
  }
}
