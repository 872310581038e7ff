// Verifies restore: stored rows round-trip without a burst, damaged rows are normalised, and repairs are written only
// when needed.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "drl/engine.h"
#include "engine_helpers.h"

using namespace drl;
using namespace drl::test;

namespace {

constexpr int64_t kLimit = 10;
constexpr Millis kWindow = 1000;
const double kNaN = std::nan("");
const double kInf = std::numeric_limits<double>::infinity();

Snapshot snapshot_of(const std::string& text, std::vector<std::pair<double, double>> rows, double forced_until = 0,
                     bool lift_pending = false) {
  Snapshot s;
  s.config_text = text;
  s.grants = std::move(rows);
  s.forced_until = forced_until;
  s.lift_pending = lift_pending;
  return s;
}

// Everything stats reports about the bucket itself (callers are memory-only).
json bucket_view(Engine& e, Millis now) {
  json s = stats(e, now);
  for (const char* key : {"active", "running", "queued"}) s.erase(key);
  return s;
}

}  // namespace

TEST_CASE("restoring from the rows an engine wrote reproduces its bucket", "[snapshot]") {
  const std::string text = config(kLimit, kWindow, 5, {{"maxRetries", 1}});
  Host before(text);
  before.take(2, T0);
  before.take(3, T0 + 100);
  before.take(1, T0 + 100);
  before.take(1, T0 + 200);
  // Quiet since: the slots record no longer lists the finished calls (the
  // idle write), so the restored engine holds no slot the first one does not.
  const Millis quiet = T0 + 200 + kIdleSlotsWrite;
  before.engine.tick(quiet);
  before.step();
  Millis now = quiet + 100;
  SECTION("no penalty") {}
  SECTION("a pending penalty") {
    pause(before.engine, 2000, quiet + 50);
    before.step();
  }
  SECTION("a lifted penalty") {
    pause(before.engine, 20, quiet + 50);
    before.engine.tick(quiet + 70);
    before.step();
  }
  SECTION("after some grants expired") {
    now = T0 + 1150;
    before.engine.tick(now);
    before.step();
  }

  Engine after;
  after.restore(before.storage.snapshot(), now);
  // Clean rows need no repair.
  CHECK(after.writes().empty());
  CHECK(after.actions().empty());
  REQUIRE(after.configured());
  CHECK(after.config_text() == before.engine.config_text());
  CHECK(inspect(after).grants() == inspect(before.engine).grants());
  CHECK(inspect(after).used() == inspect(before.engine).used());
  CHECK(inspect(after).forced_until() == inspect(before.engine).forced_until());
  CHECK(bucket_view(after, now) == bucket_view(before.engine, now));

  // And they go on to behave the same.
  for (Engine* e : {&before.engine, &after}) {
    e->clear_output();
    for (int i = 0; i < 12; ++i) arrive(*e, now + 1);
  }
  // (Tickets are numbered afresh: the old engine's callers went with it.)
  CHECK(started(before.engine.actions()).size() == started(after.actions()).size());
  CHECK(wake(before.engine) == wake(after));
}

TEST_CASE("a restored full window admits nothing until its grants expire", "[snapshot]") {
  Host before(config(5, kWindow, 10));
  for (int i = 0; i < 5; ++i) before.take(T0);

  Engine after;
  after.restore(before.storage.snapshot(), T0 + 500);
  const Ticket t = arrive(after, T0 + 500);
  CHECK(after.actions().empty());
  CHECK(wake(after) == T0 + kWindow);
  after.tick(T0 + kWindow - 1);
  CHECK(actions(after).empty());
  after.tick(T0 + kWindow);
  CHECK(actions(after) == std::vector<Action>{start(t)});
}

TEST_CASE("a restored pending penalty holds until its deadline, then lifts with the floor", "[snapshot]") {
  const std::string text = config(kLimit, kWindow, 10);
  SECTION("deadline still ahead") {
    Engine e;
    e.restore(snapshot_of(text, {{double(T0), 2}}, double(T0 + 800), true), T0 + 500);
    CHECK(writes_of(e).empty());
    CHECK(inspect(e).forced_until() == T0 + 800);
    arrive(e, T0 + 500);
    CHECK(e.actions().empty());
    CHECK(wake(e) == T0 + 800);
    e.tick(T0 + 800);
    CHECK(started(actions(e)).size() == 1);
    // max(ceil(10 * 0.5), 2 live at lift) = 5, plus the take.
    CHECK(inspect(e).grants() == Grants{{T0 + 800, 6}});
  }
  SECTION("deadline passed while the object was away: lifts on restore") {
    Engine e;
    e.restore(snapshot_of(text, {{double(T0), 2}}, double(T0 + 100), true), T0 + 500);
    CHECK(drain(e).writes == std::vector<Write>{clear_grants(), put_grant(T0 + 100, 5), put_penalty(T0 + 100, false)});
    CHECK(inspect(e).grants() == Grants{{T0 + 100, 5}});
  }
}

TEST_CASE("restore drops unreadable grant rows", "[snapshot]") {
  const std::string text = config(kLimit, kWindow, 10);
  Engine e;
  e.restore(snapshot_of(text, {{double(T0), kNaN},
                               {double(T0), kInf},
                               {double(T0), -1},
                               {double(T0), 0},
                               {kNaN, 1},
                               {kInf, 1},
                               {-5, 1},
                               {double(T0 + 10), 2}}),
            T0 + 500);
  CHECK(inspect(e).grants() == Grants{{T0 + 10, 2}});
  CHECK(inspect(e).used() == 2);
  CHECK(drain(e).writes == std::vector<Write>{clear_grants(), put_grant(T0 + 10, 2)});
}

TEST_CASE("restore rounds fractional rows up and merges duplicates", "[snapshot]") {
  const std::string text = config(kLimit, kWindow, 10);
  Engine e;
  SECTION("fractions: later and larger are the safe side") {
    e.restore(snapshot_of(text, {{T0 + 10.2, 1.5}}), T0 + 500);
    CHECK(inspect(e).grants() == Grants{{T0 + 11, 2}});
    CHECK(drain(e).writes == std::vector<Write>{clear_grants(), put_grant(T0 + 11, 2)});
  }
  SECTION("duplicate times: amounts add up") {
    e.restore(snapshot_of(text, {{double(T0 + 10), 1}, {double(T0 + 10), 2}, {double(T0 + 20), 1}}), T0 + 500);
    CHECK(inspect(e).grants() == Grants{{T0 + 10, 3}, {T0 + 20, 1}});
    CHECK(drain(e).writes == std::vector<Write>{clear_grants(), put_grant(T0 + 10, 3), put_grant(T0 + 20, 1)});
  }
  SECTION("unsorted rows are sorted; duplicates found after sorting merge too") {
    e.restore(snapshot_of(text, {{double(T0 + 30), 1}, {double(T0 + 10), 2}, {double(T0 + 30), 4}}), T0 + 500);
    CHECK(inspect(e).grants() == Grants{{T0 + 10, 2}, {T0 + 30, 5}});
    CHECK(inspect(e).used() == 7);
  }
  SECTION("amounts beyond any possible limit are capped at kMaxLimitPerWindow") {
    e.restore(snapshot_of(text, {{double(T0 + 10), 5e12}}), T0 + 500);
    CHECK(inspect(e).grants() == Grants{{T0 + 10, kMaxLimitPerWindow}});
    // The row alone is written again (its key deleted and put back); the
    // rest of the log is untouched.
    CHECK(drain(e).writes == std::vector<Write>{delete_grant(T0 + 10), put_grant(T0 + 10, kMaxLimitPerWindow)});
  }
}

TEST_CASE("sorting alone changes no stored row, so it writes nothing", "[snapshot]") {
  Engine e;
  e.restore(snapshot_of(config(kLimit, kWindow, 10), {{double(T0 + 30), 1}, {double(T0 + 10), 2}}), T0 + 500);
  CHECK(inspect(e).grants() == Grants{{T0 + 10, 2}, {T0 + 30, 1}});
  CHECK(writes_of(e).empty());
}

TEST_CASE("restore pulls grants dated beyond any legitimate future back", "[snapshot]") {
  const Millis now = T0 + 500;
  SECTION("without a penalty the future ends one grid step after now") {
    Engine e;
    // A 1 ms grid: now + 1 could be a legitimate date, now + 2 cannot.
    e.restore(snapshot_of(config(kLimit, kWindow, 10),
                          {{double(now + 1), 1}, {double(now + 2), 1}, {double(now + 1'000'000'000), 3}}),
              now);
    CHECK(inspect(e).grants() == Grants{{now, 4}, {now + 1, 1}});
    // Only the moved rows are written: their stored keys deleted, the date
    // they moved to upserted (once per row moved there: the host writes the
    // row once); the row at now + 1 stays as stored.
    CHECK(drain(e).writes == std::vector<Write>{delete_grant(now + 2), delete_grant(now + 1'000'000'000),
                                                put_grant(now, 4), put_grant(now, 4)});
  }
  SECTION("a key beyond a double's exact integers cannot be deleted alone: the window is rewritten") {
    Engine e;
    e.restore(snapshot_of(config(kLimit, kWindow, 10), {{double(now - 5), 1}, {1e300, 2}}), now);
    CHECK(inspect(e).grants() == Grants{{now - 5, 1}, {now, 2}});
    CHECK(drain(e).writes == std::vector<Write>{clear_grants(), put_grant(now - 5, 1), put_grant(now, 2)});
  }
  SECTION("a pending penalty moves the future to its deadline") {
    Engine e;
    const Millis fu = now + 5000;
    e.restore(snapshot_of(config(kLimit, kWindow, 10), {{double(fu + 1), 1}, {double(fu + 2), 2}}, double(fu), true),
              now);
    CHECK(inspect(e).grants() == Grants{{fu, 2}, {fu + 1, 1}});
  }
  SECTION("a long window's grid step widens the future") {
    constexpr Millis kDay = 86'400'000;
    const Millis q = grid_step_ms(kDay);
    Engine e;
    e.restore(snapshot_of(config(kLimit, kDay, 10), {{double(now + q), 1}, {double(now + q + 1), 1}}), now);
    CHECK(inspect(e).grants() == Grants{{now, 1}, {now + q, 1}});
  }
}

TEST_CASE("restore repairs an unreadable or absurd penalty deadline", "[snapshot]") {
  const std::string text = config(kLimit, kWindow, 10);
  const Millis now = T0 + 500;
  Engine e;
  SECTION("NaN means no penalty") {
    e.restore(snapshot_of(text, {}, kNaN, true), now);
    CHECK(inspect(e).forced_until() == 0);
    CHECK(drain(e).writes == std::vector<Write>{put_penalty(0, false)});
    const Ticket t = arrive(e, now);
    CHECK(e.actions() == std::vector<Action>{start(t)});
  }
  SECTION("a negative deadline means no penalty") {
    e.restore(snapshot_of(text, {}, -100, true), now);
    CHECK(inspect(e).forced_until() == 0);
    CHECK(drain(e).writes == std::vector<Write>{put_penalty(0, false)});
  }
  SECTION("a deadline beyond the longest possible delay is clamped to now + kMaxDelayMs") {
    e.restore(snapshot_of(text, {}, 1e300, true), now);
    CHECK(inspect(e).forced_until() == now + kMaxDelayMs);
    CHECK(drain(e).writes == std::vector<Write>{put_penalty(now + kMaxDelayMs, true)});
    arrive(e, now);
    CHECK(e.actions().empty());
  }
  SECTION("the longest possible delay itself is kept") {
    e.restore(snapshot_of(text, {}, double(now + kMaxDelayMs), true), now);
    CHECK(inspect(e).forced_until() == now + kMaxDelayMs);
    CHECK(writes_of(e).empty());
  }
}

TEST_CASE("clean live rows restore with no writes at all", "[snapshot]") {
  Engine e;
  e.restore(snapshot_of(config(kLimit, kWindow, 10), {{double(T0 + 10), 2}, {double(T0 + 20), 3}}, double(T0 - 50'000),
                        false),
            T0 + 500);
  CHECK(writes_of(e).empty());
  CHECK(inspect(e).grants() == Grants{{T0 + 10, 2}, {T0 + 20, 3}});
  CHECK(inspect(e).forced_until() == T0 - 50'000);
}

TEST_CASE("expired rows are deleted on restore, not repaired", "[snapshot]") {
  Engine e;
  e.restore(snapshot_of(config(kLimit, kWindow, 10), {{double(T0), 2}, {double(T0 + 600), 3}}), T0 + 1000);
  CHECK(inspect(e).grants() == Grants{{T0 + 600, 3}});
  CHECK(writes_of(e) == std::vector<Write>{delete_through(T0)});
}

TEST_CASE("a stored config that no longer validates leaves the bucket unconfigured", "[snapshot]") {
  Engine e;
  std::optional<std::string> stored;
  SECTION("invalid") { stored = R"({"bucket":{"limitPerWindow":0,"windowInMs":1000},"concurrency":1})"; }
  SECTION("not JSON") { stored = "{"; }
  SECTION("absent") {}
  Snapshot s = snapshot_of("", {{double(T0), 2}}, double(T0 + 1000), true);
  s.config_text = stored;
  e.restore(s, T0 + 500);
  CHECK_FALSE(e.configured());
  CHECK(writes_of(e).empty());  // rows stay as they are for a person to inspect
  auto t = e.arrive(1, T0 + 500);
  REQUIRE_FALSE(t.ok());
  CHECK(t.error().code == ErrorCode::NoSuchLimiter);
  CHECK_FALSE(e.stats(T0 + 500).ok());
}

TEST_CASE("more than kMaxLogEntries rows merge the oldest forward down to the cap", "[snapshot]") {
  constexpr Millis kDay = 86'400'000;
  const Millis now = T0 + 500'000;
  constexpr int64_t kExtra = 3;
  std::vector<std::pair<double, double>> rows;
  for (int64_t i = 0; i < kMaxLogEntries + kExtra; ++i) rows.emplace_back(double(now - 200'000 + i), 1);
  Engine e;
  e.restore(snapshot_of(config(1'000'000, kDay, 10), rows), now);

  CHECK(inspect(e).log_entries() == static_cast<size_t>(kMaxLogEntries));
  // Nothing is lost: the sum is preserved.
  CHECK(inspect(e).used() == kMaxLogEntries + kExtra);
  const Grants g = inspect(e).grants();
  // Rows 0..2 merged forward into row 3 (dated later: the safe side).
  CHECK(g.front() == std::make_pair(now - 200'000 + kExtra, kExtra + 1));
  CHECK(g[1] == std::make_pair(now - 200'000 + kExtra + 1, int64_t{1}));
  CHECK(g.back() == std::make_pair(now - 200'000 + kMaxLogEntries + kExtra - 1, int64_t{1}));

  // Storage is rewritten to match.
  Storage storage;
  storage.apply(e);
  CHECK(writes_of(e).front() == clear_grants());
  CHECK(storage.rows() == g);
}
