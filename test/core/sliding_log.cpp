// Verifies the sliding log: liveness, admission, exact waits, coalescing, expiry writes, backward time and the
// long-window grid.
#include <catch2/catch.hpp>

#include <algorithm>

#include "drl/engine.h"
#include "engine_helpers.h"

using namespace drl;
using namespace drl::test;

namespace {

// Plenty of slots and no retries, so only the bucket decides who starts.
std::string bucket_only(int64_t limit, int64_t window) { return config(limit, window, 1000, {{"maxRetries", 0}}); }

}  // namespace

TEST_CASE("a rested caller spends the whole limit at once, the next waits exactly one window", "[sliding_log]") {
  constexpr int64_t kLimit = 5;
  constexpr Millis kWindow = 1000;
  Engine e = configured(bucket_only(kLimit, kWindow));

  for (int i = 0; i < kLimit; ++i) {
    const Ticket t = arrive(e, T0);
    CHECK(actions(e) == std::vector<Action>{start(t)});
  }
  CHECK(inspect(e).used() == kLimit);
  CHECK(inspect(e).grants() == Grants{{T0, kLimit}});

  const Ticket late = arrive(e, T0);
  CHECK(e.actions().empty());
  CHECK(inspect(e).queued() == 1);
  CHECK(wake(e) == T0 + kWindow);

  e.tick(T0 + kWindow - 1);
  CHECK(drain(e).actions.empty());
  CHECK(inspect(e).used() == kLimit);
  CHECK(wake(e) == T0 + kWindow);

  e.tick(T0 + kWindow);
  const Step s = drain(e);
  CHECK(s.actions == std::vector<Action>{start(late)});
  // The old grant expired and the new take is dated now.
  CHECK(s.writes == std::vector<Write>{delete_through(T0), put_grant(T0 + kWindow, 1)});
  CHECK(inspect(e).grants() == Grants{{T0 + kWindow, 1}});
  // Nobody waits on the bucket: only the running attempts' timeouts remain.
  CHECK(wake(e) == T0 + kDefaultAttemptTimeout);
}

TEST_CASE("a grant is live for window - 1 ms after its take and gone at window", "[sliding_log]") {
  constexpr Millis kWindow = 1000;
  Engine e = configured(bucket_only(1, kWindow));
  arrive(e, T0);
  e.clear_output();

  SECTION("window - 1: still live, the newcomer waits") {
    arrive(e, T0 + kWindow - 1);
    CHECK(e.actions().empty());
    CHECK(inspect(e).used() == 1);
    CHECK(wake(e) == T0 + kWindow);
  }
  SECTION("window: expired, the newcomer starts") {
    const Ticket t = arrive(e, T0 + kWindow);
    CHECK(e.actions() == std::vector<Action>{start(t)});
    CHECK(inspect(e).grants() == Grants{{T0 + kWindow, 1}});
  }
  SECTION("window + 1: expired, the newcomer starts") {
    const Ticket t = arrive(e, T0 + kWindow + 1);
    CHECK(e.actions() == std::vector<Action>{start(t)});
    CHECK(inspect(e).grants() == Grants{{T0 + kWindow + 1, 1}});
  }
}

TEST_CASE("a one-ms window frees its grant on the next ms", "[sliding_log]") {
  Engine e = configured(bucket_only(1, 1));
  arrive(e, T0);
  const Ticket second = arrive(e, T0);
  CHECK(count(actions(e), ActionKind::Start) == 1);
  CHECK(wake(e) == T0 + 1);
  e.tick(T0 + 1);
  CHECK(actions(e) == std::vector<Action>{start(second)});
}

TEST_CASE("takes in the same ms coalesce into one grant and one upsert", "[sliding_log]") {
  Engine e = configured(bucket_only(10, 1000));
  arrive(e, 2, T0);
  CHECK(drain(e).writes == std::vector<Write>{put_grant(T0, 2)});
  arrive(e, 3, T0);
  // One row per distinct ms: the second take rewrites the row with the sum.
  CHECK(drain(e).writes == std::vector<Write>{put_grant(T0, 5)});
  CHECK(inspect(e).grants() == Grants{{T0, 5}});
  CHECK(inspect(e).log_entries() == 1);

  arrive(e, 1, T0 + 1);
  CHECK(drain(e).writes == std::vector<Write>{put_grant(T0 + 1, 1)});
  CHECK(inspect(e).grants() == Grants{{T0, 5}, {T0 + 1, 1}});
  CHECK(inspect(e).used() == 6);
}

TEST_CASE("admission is used + cost <= limit, so an exact fit is admitted", "[sliding_log]") {
  Engine e = configured(bucket_only(10, 1000));
  arrive(e, 6, T0);
  e.clear_output();
  const Ticket fits = arrive(e, 4, T0 + 1);  // 6 + 4 == 10
  CHECK(actions(e) == std::vector<Action>{start(fits)});
  CHECK(inspect(e).used() == 10);
  arrive(e, 1, T0 + 2);  // 10 + 1 > 10
  CHECK(e.actions().empty());
}

TEST_CASE("the wait for a take is exact: the oldest grants expire until it fits", "[sliding_log]") {
  constexpr Millis kWindow = 1000;
  Engine e = configured(bucket_only(5, kWindow));
  arrive(e, 1, T0);
  arrive(e, 1, T0 + 100);
  arrive(e, 3, T0 + 200);
  e.clear_output();
  REQUIRE(inspect(e).used() == 5);

  // Each cost needs the oldest grants whose amounts sum to at least the cost
  // (the log is full) to expire; the last of them decides the time.
  Millis expected = 0;
  double cost = 0;
  SECTION("cost 1 waits for the oldest grant") {
    cost = 1;
    expected = T0 + kWindow;
  }
  SECTION("cost 2 waits for the two oldest grants") {
    cost = 2;
    expected = T0 + 100 + kWindow;
  }
  SECTION("cost 3 needs the third grant too (1 + 1 < 3)") {
    cost = 3;
    expected = T0 + 200 + kWindow;
  }
  SECTION("cost 5 needs everything gone") {
    cost = 5;
    expected = T0 + 200 + kWindow;
  }
  const Ticket t = arrive(e, cost, T0 + 300);
  CHECK(e.actions().empty());
  CHECK(wake(e) == expected);

  e.tick(expected - 1);
  CHECK(actions(e).empty());
  // A wake that is early (an intermediate expiry) re-arms for the same time.
  CHECK(wake(e) == expected);

  e.tick(expected);
  CHECK(actions(e) == std::vector<Action>{start(t)});
}

TEST_CASE("the wait accounts for partial usage, not just a full log", "[sliding_log]") {
  constexpr Millis kWindow = 1000;
  Engine e = configured(bucket_only(10, kWindow));
  arrive(e, 3, T0);
  arrive(e, 4, T0 + 50);
  e.clear_output();
  // used 7 of 10: cost 3 fits at once.
  const Ticket a = arrive(e, 3, T0 + 60);
  CHECK(actions(e) == std::vector<Action>{start(a)});
  // used 10 now; cost 4 needs 4 units gone: 3 (T0) is not enough, 3 + 4 is.
  const Ticket b = arrive(e, 4, T0 + 70);
  CHECK(e.actions().empty());
  CHECK(wake(e) == T0 + 50 + kWindow);
  e.tick(T0 + kWindow);  // only 3 units gone: 7 + 4 > 10
  CHECK(actions(e).empty());
  e.tick(T0 + 50 + kWindow);
  CHECK(actions(e) == std::vector<Action>{start(b)});
}

TEST_CASE("expiry deletes storage rows through the newest expired grant, in one write", "[sliding_log]") {
  constexpr Millis kWindow = 1000;
  Engine e = configured(bucket_only(100, kWindow));
  arrive(e, T0);
  arrive(e, T0 + 10);
  arrive(e, T0 + 20);
  e.clear_output();

  e.tick(T0 + 10 + kWindow);  // T0 and T0 + 10 have expired, T0 + 20 has not
  const Step s = drain(e);
  CHECK(s.writes == std::vector<Write>{delete_through(T0 + 10)});
  CHECK(inspect(e).grants() == Grants{{T0 + 20, 1}});
  CHECK(inspect(e).used() == 1);

  e.tick(T0 + 10 + kWindow + 5);  // nothing new expires: no write
  CHECK(drain(e).writes.empty());
}

TEST_CASE("time going backwards is treated as the latest time seen", "[sliding_log]") {
  constexpr Millis kWindow = 1000;
  Engine e = configured(bucket_only(2, kWindow));
  arrive(e, T0 + 500);
  e.clear_output();

  SECTION("a take at an earlier now is dated at the latest time, so it cannot expire early") {
    arrive(e, T0);
    CHECK(drain(e).writes == std::vector<Write>{put_grant(T0 + 500, 2)});
    CHECK(inspect(e).now() == T0 + 500);
    CHECK(inspect(e).grants() == Grants{{T0 + 500, 2}});

    const Ticket waiting = arrive(e, T0);
    CHECK(e.actions().empty());
    CHECK(wake(e) == T0 + 500 + kWindow);
    // Had the second take been dated T0, it would be gone by T0 + kWindow.
    e.tick(T0 + kWindow);
    CHECK(actions(e).empty());
    e.tick(T0 + 500 + kWindow);
    CHECK(actions(e) == std::vector<Action>{start(waiting)});
  }

  SECTION("a tick back in time neither expires nor admits anything") {
    arrive(e, T0 + 600);
    const Ticket waiting = arrive(e, T0 + 700);
    e.clear_output();
    e.tick(T0 + 1499);
    e.tick(T0 + 10);
    const Step s = drain(e);
    CHECK(s.actions.empty());
    CHECK(s.writes.empty());
    CHECK(inspect(e).now() == T0 + 1499);
    CHECK(inspect(e).used() == 2);
    e.tick(T0 + 1500);
    CHECK(actions(e) == std::vector<Action>{start(waiting)});
    CHECK(inspect(e).grants() == Grants{{T0 + 600, 1}, {T0 + 1500, 1}});
  }
}

TEST_CASE("windows longer than kMaxLogEntries ms date takes on a grid", "[sliding_log]") {
  constexpr Millis kDay = 86'400'000;
  // The grid step: the smallest whole ms that fits a window in the entry cap.
  const Millis q = grid_step_ms(kDay);
  REQUIRE(q > 1);  // a day needs a grid
  Engine e = configured(bucket_only(1'000'000, kDay));

  // A take strictly inside a cell is dated at the cell's end.
  const Millis cell_start = (T0 / q + 1) * q;
  const Millis cell_end = cell_start + q;
  arrive(e, cell_start + 1);
  CHECK(drain(e).writes == std::vector<Write>{put_grant(cell_end, 1)});
  arrive(e, cell_end - 1);
  arrive(e, cell_end);  // the end of a cell is its own date
  CHECK(inspect(e).grants() == Grants{{cell_end, 3}});
  arrive(e, cell_end + 1);
  CHECK(inspect(e).grants() == Grants{{cell_end, 3}, {cell_end + q, 1}});
  // Dated later means expiring later: the take at cell_start + 1 lives until cell_end + window.
  e.tick(cell_end + kDay - 1);
  CHECK(inspect(e).used() == 4);
  e.tick(cell_end + kDay);
  CHECK(inspect(e).grants() == Grants{{cell_end + q, 1}});
}

TEST_CASE("takes every few ms against a one-day window keep one entry per grid cell", "[sliding_log]") {
  constexpr Millis kDay = 86'400'000;
  const Millis q = grid_step_ms(kDay);
  constexpr int kTakes = 20'000;
  constexpr Millis kEvery = 3;
  Engine e = configured(config(1'000'000'000, kDay, 1));
  for (int i = 0; i < kTakes; ++i) {
    const Millis now = T0 + i * kEvery;
    const Ticket t = arrive(e, now);
    report(e, t, ok(), now);
    e.clear_output();
  }
  const Millis span = (kTakes - 1) * kEvery;
  CHECK(inspect(e).used() == kTakes);
  // Every take lands in one of the cells covering [T0, T0 + span].
  CHECK(inspect(e).log_entries() <= static_cast<size_t>(span / q + 2));
  CHECK(inspect(e).log_entries() >= static_cast<size_t>(span / q));
}

namespace {

// The longest window whose grid step is kCell. With a take in every cell at a
// moment strictly inside it, the window reaches back into the oldest cell, so
// window / kCell + 1 = kMaxLogEntries cells are live at each take: the cap
// exactly. (Before issue 2's fix the step was window / kMaxLogEntries, which
// let kMaxLogEntries + 1 cells be live and forced a merge on every cell.)
constexpr Millis kCell = 660;
constexpr Millis kCapWindow = kCell * (kMaxLogEntries - 1);

// A cell boundary after T0; takes land 7 ms into each cell, never on a boundary.
constexpr Millis kCellBase = (T0 / kCell + 1) * kCell;
constexpr Millis take_time(int64_t i) { return kCellBase + i * kCell + 7; }

struct FullRateRun {
  size_t most_entries = 0;
  bool merged = false;
  Storage storage;
};

// One take per cell for `takes` cells, each reported at once.
FullRateRun run_full_rate(Engine& e, int64_t takes) {
  FullRateRun run;
  run.storage.config_text = e.config_text();
  for (int64_t i = 0; i < takes; ++i) {
    const Millis now = take_time(i);
    const Ticket t = arrive(e, now);
    run.merged = run.merged || count(writes_of(e), WriteKind::DeleteGrant) > 0;
    report(e, t, ok(), now);
    run.storage.apply(e);
    e.clear_output();
    run.most_entries = std::max(run.most_entries, inspect(e).log_entries());
  }
  return run;
}

}  // namespace

TEST_CASE("a full-rate load on a long window fills the grid to the cap and never merges", "[sliding_log]") {
  REQUIRE(grid_step_ms(kCapWindow) == kCell);
  Engine e = configured(config(1'000'000'000, kCapWindow, 1), kCellBase);
  const int64_t takes = kMaxLogEntries + 10;
  FullRateRun run = run_full_rate(e, takes);
  CHECK(run.most_entries == static_cast<size_t>(kMaxLogEntries));
  CHECK_FALSE(run.merged);  // the grid alone keeps the log within the cap
  // Merging moves amounts forward and never drops them: every take of the
  // last window still counts, and storage mirrors the merged log.
  int64_t in_window = 0;
  for (int64_t i = 0; i < takes; ++i) in_window += take_time(i) + kCapWindow > take_time(takes - 1) ? 1 : 0;
  CHECK(inspect(e).used() >= in_window);
  CHECK(run.storage.rows() == inspect(e).grants());
}

TEST_CASE("merging forward under a full-rate load stops counting a take after window + one cell", "[sliding_log]") {
  // Dating a take at the end of its cell delays its expiry by less than one
  // cell, the grid's safe side. Merging the oldest grant forward must not
  // keep carrying takes that are long out of the window: under a sustained
  // load, a grant that keeps being merged forward would never expire.
  Engine e = configured(config(1'000'000'000, kCapWindow, 1), kCellBase);
  const int64_t takes = kMaxLogEntries + 1000;
  run_full_rate(e, takes);
  const Millis last = take_time(takes - 1);
  int64_t within_window_and_a_cell = 0;
  for (int64_t i = 0; i < takes; ++i) within_window_and_a_cell += take_time(i) + kCapWindow + kCell > last ? 1 : 0;
  CHECK(inspect(e).used() <= within_window_and_a_cell);
}
