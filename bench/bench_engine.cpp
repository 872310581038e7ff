// drl_bench: the native engine's per-take cost at full rate.
//
// For each limit L the window is 10*L ms and a caller takes 1 unit every
// 10 ms, so the log stays full (L live grants, or the grid cap) and every take
// both records a grant and expires one: the steady state of a saturated
// bucket. The log is pre-filled through restore(), as a cold start would.
// Prints one JSON line per limit; bench/run.mjs turns them into the table.
#include <malloc.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "drl/engine.h"
#include "engine_inspector.h"

namespace {

using drl::internal::inspect;

struct Figures {
  double ns_per_take;
  size_t heap_bytes;
  size_t entries;
};

Figures run(int64_t limit, int takes) {
  const int64_t step = 10;
  const int64_t window = limit * step;
  const size_t heap_before = mallinfo2().uordblks;
  drl::Engine engine;
  drl::Snapshot snap;
  snap.config_text = "{\"bucket\":{\"limitPerWindow\":" + std::to_string(limit) + ",\"windowInMs\":" +
                     std::to_string(window) + "},\"concurrency\":1000}";
  // Full log: one grant per step over the last window (the grid folds them
  // for windows longer than kMaxLogEntries ms).
  const int64_t start = 1'700'000'000'000;
  const int64_t cells = drl::kMaxLogEntries - 1;
  const int64_t q = window <= drl::kMaxLogEntries ? 1 : (window + cells - 1) / cells;
  for (int64_t i = 1; i < limit; ++i) {
    const int64_t at = start - window + i * step;
    const int64_t cell = (at + q - 1) / q * q;
    if (!snap.grants.empty() && snap.grants.back().first == static_cast<double>(cell)) {
      snap.grants.back().second += 1;
    } else {
      snap.grants.emplace_back(static_cast<double>(cell), 1.0);
    }
  }
  engine.restore(snap, start);
  snap.grants.clear();
  snap.grants.shrink_to_fit();
  engine.clear_output();

  drl::Millis now = start;
  size_t sink = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < takes; ++i) {
    now += step;
    auto ticket = engine.arrive(1, now);
    if (!ticket.ok()) std::abort();
    while (engine.actions().empty()) {
      now = *engine.next_wake();
      engine.tick(now);
    }
    sink += engine.writes().size();
    engine.clear_output();
    if (!engine.report(*ticket, drl::Report{200}, now).ok()) std::abort();
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
  for (int64_t limit : {100LL, 10'000LL, 1'000'000LL}) {
    run(limit, takes / 10);  // warm-up
    const Figures f = run(limit, takes);
    std::printf("{\"engine\":\"native\",\"limit\":%lld,\"nsPerTake\":%.1f,\"heapBytes\":%zu,\"logEntries\":%zu}\n",
                static_cast<long long>(limit), f.ns_per_take, f.heap_bytes, f.entries);
  }
  return 0;
}
