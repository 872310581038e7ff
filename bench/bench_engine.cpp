// drl_bench: the native engine's per-take cost at full rate.
//
// For each limit L the window is 10*L ms and a caller takes 1 unit every
// 10 ms, so the log stays full (L live grants, or the grid cap) and every take
// both records a grant and expires one: the steady state of a saturated
// bucket. The log is pre-filled through restore(), as a cold start would.
// "3 windows" runs the same takes through a bucket with three windows in two
// units: the primary (L requests per 10*L ms), `long` (2*L requests per
// 20*L ms, so it is full too) and `tpm` (100*L tokens per 10*L ms), each take
// reserving 100 tokens; "3 windows, refund" reports a usage of 90 as well,
// so each take also rewrites its tokens (a refund per take).
// Prints one JSON line per limit and shape; bench/run.mjs turns them into the table.
//
// Then the queue (issue 15), at a bucket whose log is full so nobody starts:
// "queued" lines, the cost of an arrival with 10,000 queued, plain vs with a
// deadline and a priority; "predict" lines, the cost of predicted_start for
// the tail call with 100 and with 100,000 queued. See queued_round and
// predict_round below. Both at three limits (kQueueLimits): a prediction
// walks the window's log (SlidingLog::fits_at) as far as the queued demand
// ahead, modulo the limit, reaches into it, so a small limit alone would
// hide how its cost grows with the queue at a large one.
#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
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

// The bucket's shape: one window; three windows in two units, the cost as
// reserved; the same with a usage below the cost reported (a refund).
enum class Shape { One, Three, ThreeRefund };

Figures run(int64_t limit, int takes, Shape shape) {
  const bool three = shape != Shape::One;
  const int64_t step = kStep;
  const int64_t window = limit * step;
  const size_t heap_before = mallinfo2().uordblks;
  drl::Engine engine;
  drl::Snapshot snap;
  std::string config = "{\"bucket\":{\"limitPerWindow\":" + std::to_string(limit) +
                       ",\"windowInMs\":" + std::to_string(window) + "},\"concurrency\":1000";
  if (three) {
    config += ",\"windows\":{\"long\":{\"limitPerWindow\":" + std::to_string(2 * limit) +
              ",\"windowInMs\":" + std::to_string(2 * window) +
              "},\"tpm\":{\"unit\":\"tokens\",\"limitPerWindow\":" + std::to_string(100 * limit) +
              ",\"windowInMs\":" + std::to_string(window) + "}}";
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
  if (shape == Shape::ThreeRefund) report.usage = drl::Amounts{{"tokens", 90}};
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

// ---- the queue (issue 15) --------------------------------------------------

// A bucket of `limit` per `window` ms (window <= kMaxLogEntries, so the log
// is exact) whose log is full at kStart: `limit` grants of 1 spread over the
// window, the newest at kStart. Time stays at kStart, so nothing expires and
// no queued call can start; concurrency is large, so only the window binds.
drl::Engine full_bucket(int64_t limit, int64_t window) {
  drl::Engine engine;
  drl::Snapshot snap;
  snap.config_text = "{\"bucket\":{\"limitPerWindow\":" + std::to_string(limit) +
                     ",\"windowInMs\":" + std::to_string(window) + "},\"concurrency\":100000}";
  for (int64_t k = 1; k <= limit; ++k) {
    const double at = static_cast<double>(kStart - window + k * window / limit);
    if (!snap.grants.empty() && snap.grants.back().first == at) {
      snap.grants.back().second += 1;
    } else {
      snap.grants.emplace_back(at, 1);
    }
  }
  engine.restore(snap, kStart);
  engine.clear_output();
  return engine;
}

constexpr int kPriorities = 4;  // priorities 0..3
constexpr int64_t kQueueWindow = 100'000;
constexpr int64_t kQueueLimits[] = {100, 10'000, 100'000};

// Queues `n` calls of cost 1 spread over the priorities, the last one at
// priority 0 (so it is the queue's tail); returns its ticket.
drl::Ticket queue_calls(drl::Engine& engine, int n) {
  drl::Ticket last = 0;
  for (int i = 0; i < n; ++i) {
    // n - 1 - i counts down to 0 at the last call: priorities 3, 2, 1, 0 cyclically, ending at 0.
    const double priority = static_cast<double>((n - 1 - i) % kPriorities);
    auto t = engine.arrive(1, drl::Waiting{priority, std::nullopt}, kStart);
    if (!t.ok()) std::abort();
    last = *t;
  }
  if (!engine.actions().empty()) std::abort();  // nobody started, nobody was refused
  engine.clear_output();
  return last;
}

// One round of arrivals at a queue of 10,000: `batches` batches of kBatch
// arrivals, plain (arrive(1, now)) or with a deadline and a priority. Only
// the arrivals are timed. After each batch its calls are withdrawn outside
// the timed section, newest first: each is then at the back of its level,
// where a withdraw is cheap and keeps the level's totals exact, so the queue
// is back to the same 10,000 calls for the next batch (it varies by at most
// kBatch = 1% while timed). Withdrawing inside the timed section instead
// would add the same withdraw cost to both variants and hide their
// difference. The priorities are drawn before the round, so the random
// numbers cost nothing in it. max_wait_ms is the longest allowed, so every
// call is queued (predicted start + deadline checked), never refused.
constexpr int kBatch = 100;
// A round ends after `batches` batches or once kRoundBudgetNs of arrivals
// were timed, whichever is first (a slow variant must not stretch the run).
constexpr double kRoundBudgetNs = 150e6;
double queued_round(drl::Engine& engine, bool deadline, int batches, const std::vector<double>& priorities) {
  std::vector<drl::Ticket> tickets(kBatch);
  double ns = 0;
  size_t p = 0;
  int b = 0;
  for (; b < batches && ns < kRoundBudgetNs; ++b) {
    const auto t0 = std::chrono::steady_clock::now();
    if (deadline) {
      for (int i = 0; i < kBatch; ++i) {
        const drl::Waiting waiting{priorities[p++ % priorities.size()], static_cast<double>(drl::kMaxDelayMs)};
        auto t = engine.arrive(1, waiting, kStart);
        if (!t.ok()) std::abort();
        tickets[i] = *t;
      }
    } else {
      for (int i = 0; i < kBatch; ++i) {
        auto t = engine.arrive(1, kStart);
        if (!t.ok()) std::abort();
        tickets[i] = *t;
      }
    }
    const auto t1 = std::chrono::steady_clock::now();
    ns += std::chrono::duration<double, std::nano>(t1 - t0).count();
    if (!engine.actions().empty()) std::abort();  // queued: none started or was refused
    for (int i = kBatch - 1; i >= 0; --i) {
      if (!engine.withdraw(tickets[i], kStart).ok()) std::abort();
    }
    engine.clear_output();
  }
  return ns / (static_cast<double>(b) * kBatch);
}

// One round of predictions of the tail call: per-call ns. At most `calls`,
// in chunks of 100, stopping once kRoundBudgetNs have passed.
double predict_round(const drl::Engine& engine, drl::Ticket tail, int calls, int64_t& sink) {
  const auto t0 = std::chrono::steady_clock::now();
  int done = 0;
  double ns = 0;
  while (done < calls && ns < kRoundBudgetNs) {
    for (int i = 0; i < 100; ++i) {
      const auto at = engine.predicted_start(tail);
      if (!at) std::abort();
      sink += *at;
    }
    done += 100;
    ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
  }
  return ns / done;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Both benches at `limit` per `window` ms (the log full).
void bench_queue(int64_t limit, int64_t window, int arrivals, int predictions) {
  constexpr int kRounds = 5;
  constexpr int kQueued = 10'000;
  {
    drl::Engine engine = full_bucket(limit, window);
    queue_calls(engine, kQueued);
    std::mt19937 rng(15);
    std::uniform_int_distribution<int> pick(0, kPriorities - 1);
    std::vector<double> priorities(4096);
    for (double& p : priorities) p = pick(rng);
    const int batches = std::max(1, arrivals / kRounds / kBatch);
    queued_round(engine, false, std::max(1, batches / 10), priorities);  // warm-up
    queued_round(engine, true, std::max(1, batches / 10), priorities);
    std::vector<double> rounds[2];
    for (int r = 0; r < kRounds; ++r) {
      for (const bool deadline : {false, true})
        rounds[deadline].push_back(queued_round(engine, deadline, batches, priorities));
    }
    std::printf(
        "{\"engine\":\"native\",\"kind\":\"queued\",\"limit\":%lld,\"queued\":%d,\"plainNs\":%.1f,\"deadlineNs\":%.1f}"
        "\n",
        static_cast<long long>(limit), kQueued, median(rounds[0]), median(rounds[1]));
  }
  {
    constexpr int kSmall = 100;
    constexpr int kLarge = 100'000;
    drl::Engine small = full_bucket(limit, window);
    drl::Engine large = full_bucket(limit, window);
    const drl::Ticket small_tail = queue_calls(small, kSmall);
    const drl::Ticket large_tail = queue_calls(large, kLarge);
    int64_t sink = 0;
    predict_round(small, small_tail, predictions / 10, sink);  // warm-up
    predict_round(large, large_tail, predictions / 10, sink);
    std::vector<double> rounds[2];
    for (int r = 0; r < kRounds; ++r) {
      rounds[0].push_back(predict_round(small, small_tail, predictions / kRounds, sink));
      rounds[1].push_back(predict_round(large, large_tail, predictions / kRounds, sink));
    }
    if (sink == 0) std::abort();
    std::printf(
        "{\"engine\":\"native\",\"kind\":\"predict\",\"limit\":%lld,\"small\":%d,\"smallNs\":%.1f,\"smallAt\":%lld,"
        "\"large\":%d,\"largeNs\":%.1f,\"largeAt\":%lld}\n",
        static_cast<long long>(limit), kSmall, median(rounds[0]),
        static_cast<long long>(*small.predicted_start(small_tail) - kStart), kLarge, median(rounds[1]),
        static_cast<long long>(*large.predicted_start(large_tail) - kStart));
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int takes = argc > 1 ? std::atoi(argv[1]) : 200'000;
  // The shapes alternate in rounds, so drift on a shared machine lands on
  // all of them; each figure is the median of its rounds.
  constexpr int kRounds = 5;
  constexpr Shape kShapes[] = {Shape::One, Shape::Three, Shape::ThreeRefund};
  for (int64_t limit : {100LL, 10'000LL, 1'000'000LL}) {
    for (const Shape shape : kShapes) run(limit, takes / 10, shape);  // warm-up
    std::vector<Figures> rounds[3];
    for (int r = 0; r < kRounds; ++r) {
      for (const Shape shape : kShapes) rounds[static_cast<int>(shape)].push_back(run(limit, takes / kRounds, shape));
    }
    for (const Shape shape : kShapes) {
      auto& fs = rounds[static_cast<int>(shape)];
      std::sort(fs.begin(), fs.end(), [](const Figures& a, const Figures& b) { return a.ns_per_take < b.ns_per_take; });
      const Figures& f = fs[kRounds / 2];
      std::printf(
          "{\"engine\":\"native\",\"windows\":%d,\"refund\":%s,\"limit\":%lld,\"nsPerTake\":%.1f,\"heapBytes\":%"
          "zu,\"logEntries\":%zu}\n",
          shape == Shape::One ? 1 : 3, shape == Shape::ThreeRefund ? "true" : "false", static_cast<long long>(limit),
          f.ns_per_take, f.heap_bytes, f.entries);
    }
  }
  const int arrivals = argc > 2 ? std::atoi(argv[2]) : 500'000;
  const int predictions = argc > 3 ? std::atoi(argv[3]) : 1'000'000;
  for (int64_t limit : kQueueLimits) bench_queue(limit, kQueueWindow, arrivals, predictions);
  return 0;
}
