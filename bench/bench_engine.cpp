// drl_bench: the native engine's per-take cost at full rate.
//
// For each limit L the window is 10*L ms and a caller takes 1 unit every
// 10 ms, so the log stays full (L live grants, or the grid cap) and every take
// both records a grant and expires one: the steady state of a saturated
// bucket. The log is pre-filled through restore(), as a cold start would.
// "3 windows" runs the same takes through a bucket with three windows in two
// units: the primary (L requests per 10*L ms), `long` (2*L requests per
// 20*L ms, so it is full too) and `tpm` (100*L tokens per 10*L ms), each take
// reserving 100 tokens and reporting a usage of 90 (a refund per take).
// Prints one JSON line per limit and shape; bench/run.mjs turns them into the table.
#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "drl/engine.h"
#include "engine_inspector.h"

namespace {

using drl::internal::inspect;

struct Figures {
  double ns_per_take;
  size_t heap_bytes;
  size_t entries;
};

constexpr int64_t kStep = 10;
constexpr int64_t kStart = 1'700'000'000'000;

// A full log for `window`: `amount` per step over the last window, minus the
// newest (the grid folds them for windows longer than `cap` ms).
std::vector<std::pair<double, double>> full_log(int64_t window, double amount, int64_t cap = drl::kMaxLogEntries) {
  std::vector<std::pair<double, double>> rows;
  const int64_t q = drl::grid_step_ms(window, cap);
  for (int64_t at = kStart - window + kStep; at < kStart; at += kStep) {
    const int64_t cell = (at + q - 1) / q * q;
    if (!rows.empty() && rows.back().first == static_cast<double>(cell)) {
      rows.back().second += amount;
    } else {
      rows.emplace_back(static_cast<double>(cell), amount);
    }
  }
  return rows;
}

Figures run(int64_t limit, int takes, bool three) {
  const int64_t step = kStep;
  const int64_t window = limit * step;
  const size_t heap_before = mallinfo2().uordblks;
  drl::Engine engine;
  drl::Snapshot snap;
  std::string config = "{\"bucket\":{\"limitPerWindow\":" + std::to_string(limit) + ",\"windowInMs\":" +
                       std::to_string(window) + "},\"concurrency\":1000";
  if (three) {
    config += ",\"windows\":{\"long\":{\"limitPerWindow\":" + std::to_string(2 * limit) +
                        ",\"windowInMs\":" + std::to_string(2 * window) + "},\"tpm\":{\"unit\":\"tokens\",\"limitPerWindow\":" +
                        std::to_string(100 * limit) + ",\"windowInMs\":" + std::to_string(window) + "}}";
  }
  snap.config_text = config + "}";
  snap.grants = full_log(window, 1);
  if (three) {
    snap.windows.push_back({"long", full_log(2 * window, 1, drl::kMaxExtraLogEntries)});
    snap.windows.push_back({"tpm", full_log(window, 100, drl::kMaxExtraLogEntries)});
  }
  engine.restore(snap, kStart);
  snap = drl::Snapshot{};
  engine.clear_output();

  const drl::Amounts cost{{"tokens", 100}};
  drl::Report report{200};
  if (three) report.usage = drl::Amounts{{"tokens", 90}};
  drl::Millis now = kStart;
  size_t sink = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < takes; ++i) {
    now += step;
    auto ticket = three ? engine.arrive(cost, now) : engine.arrive(1, now);
    if (!ticket.ok()) std::abort();
    while (engine.actions().empty()) {
      now = *engine.next_wake();
      engine.tick(now);
    }
    sink += engine.writes().size();
    engine.clear_output();
    if (!engine.report(*ticket, report, now).ok()) std::abort();
    sink += engine.actions().size();
    engine.clear_output();
  }
  const auto t1 = std::chrono::steady_clock::now();
  if (sink == 0) std::abort();
  const double ns = std::chrono::duration<double, std::nano>(t1 - t0).count() / takes;
  return Figures{ns, mallinfo2().uordblks - heap_before, inspect(engine).log_entries()};
}

}  // namespace

int main(int argc, char** argv) {
  const int takes = argc > 1 ? std::atoi(argv[1]) : 200'000;
  // One and three windows alternate in rounds, so drift on a shared machine
  // lands on both; each figure is the median of its rounds.
  constexpr int kRounds = 5;
  for (int64_t limit : {100LL, 10'000LL, 1'000'000LL}) {
    run(limit, takes / 10, false);  // warm-up
    run(limit, takes / 10, true);
    std::vector<Figures> rounds[2];
    for (int r = 0; r < kRounds; ++r) {
      for (const bool three : {false, true}) rounds[three].push_back(run(limit, takes / kRounds, three));
    }
    for (const bool three : {false, true}) {
      auto& fs = rounds[three];
      std::sort(fs.begin(), fs.end(), [](const Figures& a, const Figures& b) { return a.ns_per_take < b.ns_per_take; });
      const Figures& f = fs[kRounds / 2];
      std::printf(
          "{\"engine\":\"native\",\"windows\":%d,\"limit\":%lld,\"nsPerTake\":%.1f,\"heapBytes\":%zu,\"logEntries\":%zu}\n",
          three ? 3 : 1, static_cast<long long>(limit), f.ns_per_take, f.heap_bytes, f.entries);
    }
  }
  return 0;
}
