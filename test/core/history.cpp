// Verifies the history (history_json, history_unsaved, restore_history): counts against a ground truth the test keeps
// from its own inputs and the engine's actions, levels at interval ends, units, wait percentiles within the stated
// precision, bounded size over a simulated day, lazy closing over gaps, and what a restore brings back.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <tuple>
#include <vector>

#include "drl/engine.h"
#include "engine_helpers.h"
#include "history.h"

using namespace drl;
using namespace drl::test;

namespace {

constexpr Millis kFine = 10'000;
constexpr Millis kCoarse = 60'000;

json history(Engine& e, Millis resolution, Millis now) {
  auto h = e.history_json(resolution, now);
  if (!h.ok()) FAIL("history_json failed: " << h.error().message);
  return json::parse(*h);
}

void remove(std::vector<Ticket>& tickets, Ticket t) {
  tickets.erase(std::remove(tickets.begin(), tickets.end(), t), tickets.end());
}

Millis start_of(Millis t, Millis resolution) { return t - t % resolution; }

// The nearest-rank percentile of exact samples.
Millis exact_percentile(std::vector<Millis> waits, double p) {
  std::sort(waits.begin(), waits.end());
  const size_t rank =
      std::max<size_t>(1, static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(waits.size()))));
  return waits[rank - 1];
}

// The stated precision: exact below 64 ms, else at most 1/32 below the truth, never above.
void check_percentile(Millis reported, Millis truth) {
  INFO("reported " << reported << ", true " << truth);
  if (truth < 64) {
    CHECK(reported == truth);
  } else {
    CHECK(reported <= truth);
    CHECK(static_cast<double>(truth - reported) <= static_cast<double>(truth) / 32.0);
  }
}

// What the test counts for one interval.
struct Truth {
  int64_t arrived = 0, started = 0, completed = 0, failed = 0, rate_limited = 0, dropped = 0, deadline = 0;
  std::map<std::string, int64_t> units;
  std::vector<Millis> waits;
  bool any() const {
    return arrived || started || completed || failed || rate_limited || dropped || deadline || !units.empty();
  }
};

// Drives an engine and counts, per interval of both resolutions, what
// happened: from its own inputs (arrivals, 429 reports) and the engine's
// actions, never from the history.
struct Recorder {
  Engine& e;
  std::map<Ticket, Millis> arrived_at;
  std::vector<Ticket> running;  // tickets with a running attempt
  std::vector<Ticket> live;     // tickets not yet settled
  std::map<Millis, Truth> fine, coarse;
  std::vector<std::tuple<Millis, size_t, size_t>> levels;  // after each event: (time, queued, running)

  template <typename F>
  void count(Millis now, F&& f) {
    f(fine[start_of(now, kFine)]);
    f(coarse[start_of(now, kCoarse)]);
  }

  void after(Millis now) {
    for (const Action& a : e.actions()) {
      if (a.kind == ActionKind::Start) {
        running.push_back(a.ticket);
        count(now, [&](Truth& t) { t.units["bucket"] += 1; });
        if (a.attempt == 1)
          count(now, [&](Truth& t) {
            ++t.started;
            t.waits.push_back(now - arrived_at.at(a.ticket));
          });
      } else {
        remove(running, a.ticket);
        remove(live, a.ticket);
        if (a.kind == ActionKind::Resolve) {
          count(now, [](Truth& t) { ++t.completed; });
        } else if (a.code == ErrorCode::Cancelled || a.code == ErrorCode::CallerGone) {
          count(now, [](Truth& t) { ++t.dropped; });
        } else if (a.code == ErrorCode::DeadlineExceeded) {
          count(now, [](Truth& t) { ++t.deadline; });
        } else {
          count(now, [](Truth& t) { ++t.failed; });
        }
      }
    }
    e.clear_output();
    levels.emplace_back(now, internal::inspect(e).queued(), internal::inspect(e).running());
  }

  // Fires the engine's timer for every wake due by `now`.
  void ticks_until(Millis now) {
    while (e.next_wake() && *e.next_wake() <= now) {
      const Millis at = *e.next_wake();
      e.tick(at);
      after(at);
    }
  }
};

// Compares one interval of history_json with the truth and the levels.
void check_interval(const json& got, const Truth& truth, size_t queued, size_t running) {
  INFO("interval at " << got["at"]);
  CHECK(got["arrived"] == truth.arrived);
  CHECK(got["started"] == truth.started);
  CHECK(got["completed"] == truth.completed);
  CHECK(got["failed"] == truth.failed);
  CHECK(got["rateLimited"] == truth.rate_limited);
  CHECK(got["dropped"] == truth.dropped);
  CHECK(got["deadline"] == truth.deadline);
  CHECK(got["units"] == json(truth.units));
  CHECK(got["queued"] == queued);
  CHECK(got["running"] == running);
  if (truth.waits.empty()) {
    CHECK(got["wait"].is_null());
  } else {
    REQUIRE(got["wait"].is_object());
    check_percentile(got["wait"]["p50"], exact_percentile(truth.waits, 50));
    check_percentile(got["wait"]["p95"], exact_percentile(truth.waits, 95));
    CHECK(got["wait"]["max"] == *std::max_element(truth.waits.begin(), truth.waits.end()));
  }
}

// The levels the last event before `end` left (0, 0 before any event).
std::pair<size_t, size_t> levels_before(const std::vector<std::tuple<Millis, size_t, size_t>>& levels, Millis end) {
  std::pair<size_t, size_t> out{0, 0};
  for (const auto& [at, queued, running] : levels) {
    if (at >= end) break;
    out = {queued, running};
  }
  return out;
}

// Checks history_json at `now` against the recorder for one resolution.
void check_history(Recorder& r, Millis resolution, Millis now, Millis first_event) {
  const std::map<Millis, Truth>& truth = resolution == kFine ? r.fine : r.coarse;
  const json h = history(r.e, resolution, now);
  CHECK(h["resolutionMs"] == resolution);
  const Millis open = start_of(now, resolution);
  std::map<Millis, json> got;
  for (const json& i : h["intervals"]) got[i["at"].get<Millis>()] = i;
  size_t expected = 0;
  for (Millis at = start_of(first_event, resolution); at < open; at += resolution) {
    const auto [queued, running] = levels_before(r.levels, at + resolution);
    auto t = truth.find(at);
    const Truth none;
    const Truth& counted = t == truth.end() ? none : t->second;
    if (!counted.any() && queued == 0 && running == 0) {
      CHECK(got.count(at) == 0);  // empty intervals are not listed
      continue;
    }
    ++expected;
    REQUIRE(got.count(at) == 1);
    check_interval(got[at], counted, queued, running);
  }
  CHECK(got.size() == expected);
  CHECK(h["current"]["at"] == open);
  auto t = truth.find(open);
  const Truth none;
  check_interval(h["current"], t == truth.end() ? none : t->second, internal::inspect(r.e).queued(),
                 internal::inspect(r.e).running());
}

}  // namespace

TEST_CASE("history before configure is the not-configured error, and only two resolutions exist", "[history]") {
  Engine e;
  auto h = e.history_json(kFine, T0);
  REQUIRE_FALSE(h.ok());
  CHECK(h.error().code == ErrorCode::NoSuchLimiter);

  Engine c = configured(config(5, 1000, 1));
  for (Millis bad : {0LL, 1000LL, 30'000LL, -10'000LL}) {
    auto wrong = c.history_json(bad, T0);
    REQUIRE_FALSE(wrong.ok());
    CHECK(wrong.error().code == ErrorCode::InvalidArgument);
    CHECK(wrong.error().message.find("10000") != std::string::npos);
  }
}

// Verifies every count of a mixed workload (admissions, queueing, deadlines, 429s, retries, failures, throws,
// cancels, callers gone) against what the test counted, at both resolutions.
TEST_CASE("a scripted workload's history matches the test's own count", "[history]") {
  Engine e = configured(config(5, 1000, 2, json{{"maxRetries", 1}, {"minDelayInMs", 100}, {"maxDelayInMs", 800}}));
  Recorder r{e};
  std::mt19937 rng(17);
  auto roll = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  Millis now = T0 + 3;  // not on a boundary of either resolution
  const Millis first = now;
  for (int step = 0; step < 3000; ++step) {
    now += roll(400);
    r.ticks_until(now);
    const int what = roll(100);
    if (what < 40 || r.live.empty()) {
      Waiting waiting;
      if (roll(3) == 0) waiting.max_wait_ms = roll(3000);
      auto t = e.arrive(1.0, waiting, now);
      REQUIRE(t.ok());
      r.arrived_at[*t] = now;
      r.live.push_back(*t);
      r.count(now, [](Truth& x) { ++x.arrived; });
    } else if (what < 80 && !r.running.empty()) {
      const Ticket t = r.running[static_cast<size_t>(roll(static_cast<int>(r.running.size())))];
      remove(r.running, t);  // this attempt ends; a retry starts it again
      const int outcome = roll(20);
      if (outcome < 12) {
        report(e, t, ok(), now);
      } else if (outcome < 14) {
        report(e, t, too_many(200), now);
        r.count(now, [](Truth& x) { ++x.rate_limited; });
      } else if (outcome < 16) {
        report(e, t, failed(Failure::Retryable, 503), now);
      } else if (outcome < 18) {
        report(e, t, failed(Failure::Final, 404), now);
      } else if (outcome < 19) {
        threw(e, t, now);
      } else {
        gone(e, t, now);
      }
    } else if (what < 90) {
      const Ticket t = r.live[static_cast<size_t>(roll(static_cast<int>(r.live.size())))];
      cancel(e, t, now);
    } else {
      const Ticket t = r.live[static_cast<size_t>(roll(static_cast<int>(r.live.size())))];
      REQUIRE(e.withdraw(t, now).ok());
    }
    r.after(now);
  }
  r.ticks_until(now);
  REQUIRE(now - first > 5 * kCoarse);  // many intervals of both resolutions
  // Every kind of event happened, so each counter is checked against something.
  int64_t totals[7] = {};
  for (const auto& [at, t] : r.fine) {
    const int64_t each[7] = {t.arrived, t.started, t.completed, t.failed, t.rate_limited, t.dropped, t.deadline};
    for (int i = 0; i < 7; ++i) totals[i] += each[i];
  }
  for (int64_t total : totals) CHECK(total > 0);

  SECTION("10 s intervals") { check_history(r, kFine, now, first); }
  SECTION("1 min intervals") { check_history(r, kCoarse, now, first); }
  SECTION("a later look, across boundaries with nothing happening") {
    check_history(r, kFine, now + 35'000, first);
    check_history(r, kCoarse, now + 125'000, first);
  }
}

TEST_CASE("units are net per window: takes, usage above the estimate, refunds", "[history]") {
  Engine e = configured(
      R"({"bucket":{"limitPerWindow":100,"windowInMs":600000},"concurrency":10,"windows":{"tokens":{"limitPerWindow":100000,"windowInMs":600000,"unit":"tokens"}}})");
  const Millis at = start_of(T0, kFine) + kFine;  // a fresh 10 s interval
  auto a = e.arrive(Amounts{{"tokens", 1000}}, at);
  auto b = e.arrive(Amounts{{"tokens", 500}}, at + 1);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  Report used_less = ok();
  used_less.usage = Amounts{{"tokens", 300}};  // 700 refunded
  report(e, *a, used_less, at + 2);
  Report used_more = ok();
  used_more.usage = Amounts{{"tokens", 800}};  // 300 charged on top
  report(e, *b, used_more, at + 3);
  const json h = history(e, kFine, at + 4);
  CHECK(h["current"]["units"] == json({{"bucket", 2}, {"tokens", 1000 - 700 + 500 + 300}}));
  CHECK(h["current"]["started"] == 2);
  CHECK(h["current"]["completed"] == 2);
}

TEST_CASE("waits: p50 and p95 within 1/32 below the truth and exact below 64 ms, max exact", "[history]") {
  using internal::WaitHistogram;
  std::mt19937_64 rng(7);
  for (int round = 0; round < 50; ++round) {
    WaitHistogram h;
    std::vector<Millis> waits;
    const int n = 1 + static_cast<int>(rng() % 500);
    for (int i = 0; i < n; ++i) {
      // Spread over many octaves: 0 ms to about 10 days.
      const Millis w = static_cast<Millis>(std::exp2(static_cast<double>(rng() % 3000) / 100.0)) - 1;
      waits.push_back(w);
      h.add(w);
    }
    CHECK(h.count() == waits.size());
    CHECK(h.max() == *std::max_element(waits.begin(), waits.end()));
    for (double p : {50.0, 95.0, 100.0}) check_percentile(h.percentile(p), exact_percentile(waits, p));
  }
  // Each cell's bounds: exact below 64, then 32 cells per power of two.
  CHECK(WaitHistogram::cell(63) == 63);
  CHECK(WaitHistogram::lower_bound(WaitHistogram::cell(64)) == 64);
  CHECK(WaitHistogram::lower_bound(WaitHistogram::cell(65)) == 64);  // cells of 2 ms from 64 to 128
  CHECK(WaitHistogram::lower_bound(WaitHistogram::cell(66)) == 66);
  CHECK(WaitHistogram::lower_bound(WaitHistogram::cell(1'000'000)) == 61 * 16'384);  // cells of 2^14 ms from 2^19
}

// Verifies the bound: after a day of traffic the history holds at most an hour of 10 s intervals and a day of
// 1 min intervals, and what history_unsaved hands out over the day is each closed interval once.
TEST_CASE("a day of traffic keeps the history bounded", "[history]") {
  Engine e = configured(config(100, 1000, 4));
  Millis now = T0;
  const Millis end = T0 + 25 * 3'600'000;
  std::map<std::pair<int64_t, Millis>, int> saved;
  while (now < end) {
    now += 1'500;
    auto t = e.arrive(1, now);
    REQUIRE(t.ok());
    e.clear_output();
    report(e, *t, ok(), now + 5);
    e.clear_output();
    if (now % 60'000 < 1'500) {
      for (const HistoryRow& row : e.history_unsaved()) ++saved[{row.resolution_ms, row.at}];
    }
  }
  const json fine = history(e, kFine, now);
  const json coarse = history(e, kCoarse, now);
  CHECK(fine["intervals"].size() == 360);
  CHECK(coarse["intervals"].size() == 1440);
  CHECK(fine["intervals"][0]["at"] == start_of(now, kFine) - 360 * kFine);
  CHECK(coarse["intervals"][0]["at"] == start_of(now, kCoarse) - 1440 * kCoarse);
  for (const auto& [key, times] : saved) CHECK(times == 1);  // each closed interval handed out once
  // Every closed interval of the day, at each resolution (the calls never stop for a whole interval).
  size_t fine_rows = 0;
  size_t coarse_rows = 0;
  for (const auto& [key, times] : saved) (key.first == kFine ? fine_rows : coarse_rows) += 1;
  CHECK(coarse_rows > 24 * 60);
  CHECK(fine_rows > 24 * 360);
  CHECK(e.history_keep_from(kFine) == start_of(now, kFine) - 360 * kFine);
  CHECK(e.history_keep_from(kCoarse) == start_of(now, kCoarse) - 1440 * kCoarse);
}

TEST_CASE("intervals close lazily, and a gap is filled with the held levels, at most a ring of them", "[history]") {
  // The second call waits a day for the window: queued 1 across the gap.
  Engine e = configured(R"({"bucket":{"limitPerWindow":1,"windowInMs":86400000},"concurrency":1})");
  const Millis at = start_of(T0, kCoarse) + kCoarse + 5;  // after configure's T0
  const Ticket a = arrive(e, at);
  report(e, a, ok(), at + 1);
  arrive(e, at + 2);
  e.clear_output();

  SECTION("two hours later") {
    const Millis later = at + 2 * 3'600'000;
    const json fine = history(e, kFine, later);
    REQUIRE(fine["intervals"].size() == 360);  // the last hour only
    for (const json& i : fine["intervals"]) {
      CHECK(i["queued"] == 1);
      CHECK(i["arrived"] == 0);
    }
    const json coarse = history(e, kCoarse, later);
    REQUIRE(coarse["intervals"].size() == 120);
    CHECK(coarse["intervals"][0]["at"] == start_of(at, kCoarse));
    CHECK(coarse["intervals"][0]["arrived"] == 2);
    CHECK(coarse["intervals"][0]["completed"] == 1);
    CHECK(coarse["intervals"][0]["queued"] == 1);
    CHECK(coarse["current"]["queued"] == 1);
  }
  SECTION("ten thousand years later: the same work as a day") {
    const Millis later = at + 10'000LL * 366 * 86'400'000;
    const json coarse = history(e, kCoarse, later);
    CHECK(coarse["intervals"].size() == 1440);
    CHECK(coarse["intervals"][0]["queued"] == 1);
  }
  SECTION("a bucket with nothing waiting lists nothing for a gap") {
    Engine quiet = configured(config(5, 1000, 1));
    const Ticket t = arrive(quiet, at);
    report(quiet, t, ok(), at + 1);
    const json fine = history(quiet, kFine, at + 3'600'000 + kFine);
    REQUIRE(fine["intervals"].size() == 0);  // the busy interval is more than an hour old
    CHECK(history(quiet, kCoarse, at + 3'600'000 + kFine)["intervals"].size() == 1);
  }
}

TEST_CASE("time going backwards changes nothing in the history", "[history]") {
  Engine e = configured(config(5, 1000, 1));
  const Millis at = start_of(T0, kFine) + kFine;
  const Ticket a = arrive(e, at + 5'000);
  report(e, a, ok(), at + 5'001);
  const json before = history(e, kFine, at + 5'002);
  CHECK(history(e, kFine, at) == before);  // an earlier time reads the same
  arrive(e, at - 20'000);                  // counted at the engine's time, in the open interval
  const json after = history(e, kFine, at + 5'002);
  CHECK(after["current"]["at"] == at);
  CHECK(after["current"]["arrived"] == 2);
}

// Verifies persistence: unsaved rows are handed out once; a new engine restored from them lists the same closed
// intervals; damaged rows, rows past retention and rows not yet closed are skipped.
TEST_CASE("history rows survive a restore", "[history]") {
  const std::string text = config(5, 1000, 1);
  Engine e = configured(text);
  Millis now = start_of(T0, kCoarse) + kCoarse;
  for (int i = 0; i < 30; ++i) {
    now += 7'000;
    const Ticket t = arrive(e, now);
    report(e, t, i % 3 == 0 ? failed(Failure::Final, 404) : ok(), now + 10);
    e.clear_output();
  }
  std::vector<HistoryRow> rows = e.history_unsaved();
  CHECK(e.history_unsaved().empty());  // handed out once
  REQUIRE(!rows.empty());
  const json fine = history(e, kFine, now + 20);
  const json coarse = history(e, kCoarse, now + 20);

  std::vector<HistoryRow> stored = rows;
  stored.push_back(HistoryRow{kFine, start_of(now, kFine) - 400 * kFine, R"({"arrived":3})"});    // past retention
  stored.push_back(HistoryRow{kFine, start_of(now, kFine) + 5 * kFine, R"({"arrived":3})"});      // not yet closed
  stored.push_back(HistoryRow{kFine, start_of(now, kFine) - 2 * kFine + 1, R"({"arrived":3})"});  // off the grid
  stored.push_back(HistoryRow{30'000, start_of(now, kCoarse), R"({"arrived":3})"});               // no such resolution
  stored.push_back(HistoryRow{kCoarse, start_of(now, kCoarse) - 200 * kCoarse, R"({"arrived":-1})"});  // damaged
  stored.push_back(HistoryRow{kCoarse, start_of(now, kCoarse) - 201 * kCoarse, "not json"});           // damaged

  Engine fresh;
  Snapshot snap;
  snap.config_text = text;
  fresh.restore(snap, now + 20);
  fresh.restore_history(stored, now + 20);
  fresh.clear_output();
  const json fine_after = history(fresh, kFine, now + 20);
  const json coarse_after = history(fresh, kCoarse, now + 20);
  CHECK(fine_after["intervals"] == fine["intervals"]);
  CHECK(coarse_after["intervals"] == coarse["intervals"]);
  CHECK(fine_after["current"]["arrived"] == 0);  // the open interval was never stored
  CHECK(fresh.history_unsaved().empty());        // restored rows count as stored

  SECTION("a rebuild of a live engine keeps its history and stores it again") {
    Snapshot again;
    again.config_text = text;
    e.restore(again, now + 30);
    e.clear_output();
    CHECK(history(e, kFine, now + 30)["intervals"] == fine["intervals"]);
    CHECK(e.history_unsaved().size() == rows.size());
  }
  SECTION("erase forgets the history with the bucket") {
    e.erase(now + 30);
    REQUIRE(e.configure(text, now + 31).ok());
    CHECK(history(e, kCoarse, now + 31)["intervals"].empty());
  }
}
