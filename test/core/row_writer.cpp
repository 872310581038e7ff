// The row writer on its own: which steps count as storing anyway, when the
// rows owed ride on a step and when they are written alone (-1, at and +1 ms
// of the quiet time), and what a rewrite writes for a row the logs still
// hold, changed, or no longer hold.
#include <catch2/catch.hpp>

#include <vector>

#include "row_writer.h"

using drl::Write;
using drl::WriteKind;
using drl::internal::RowWriter;
using drl::internal::Windows;

namespace {

constexpr drl::Millis kQuiet = 50;

// One window of 10 per 1000 ms, holding 3 taken at 100 and 2 at 200.
Windows one_window() {
  drl::Config config;
  config.bucket.limit_per_window = 10;
  config.bucket.window_ms = 1000;
  Windows windows;
  windows.configure(config);
  windows[0].log.take(3, 1000, 100);
  windows[0].log.take(2, 1000, 200);
  return windows;
}

Write put_grant(drl::Millis at, int64_t amount) { return Write{WriteKind::PutGrant, at, amount}; }
Write delete_grant(drl::Millis at) { return Write{WriteKind::DeleteGrant, at, 0}; }

}  // namespace

TEST_CASE("row writer: only a write other than an expiry stores anyway", "[row_writer]") {
  RowWriter rows;
  CHECK_FALSE(rows.writes_beyond_expiries());
  rows.put(WriteKind::DeleteGrantsThrough, 100);
  CHECK(rows.expiring());
  CHECK_FALSE(rows.writes_beyond_expiries());
  rows.put(WriteKind::PutGrant, 300, 1);
  CHECK(rows.writes_beyond_expiries());
  CHECK(rows.newest_row() == 300);
  rows.clear();
  CHECK(rows.writes().empty());
  CHECK_FALSE(rows.expiring());
  CHECK_FALSE(rows.writes_beyond_expiries());
  CHECK(rows.newest_row() == 300);  // across steps: the release mark's question
}

TEST_CASE("row writer: rows owed are written alone once quiet, not a millisecond before", "[row_writer]") {
  Windows windows = one_window();
  windows[0].log.shrink(100, 1);
  RowWriter rows;
  rows.owe(0, 100);
  rows.step(windows, 1000, kQuiet);
  CHECK(rows.writes().empty());
  REQUIRE(rows.owed_due() == 1000 + kQuiet);
  rows.step(windows, 1000 + kQuiet - 1, kQuiet);
  CHECK(rows.writes().empty());
  CHECK(rows.owes());
  rows.step(windows, 1000 + kQuiet, kQuiet);
  CHECK(rows.writes() == std::vector<Write>{put_grant(100, 2)});
  CHECK_FALSE(rows.owes());
  CHECK_FALSE(rows.owed_due().has_value());
  rows.clear();
  rows.step(windows, 1000 + kQuiet + 1, kQuiet);  // nothing owed: nothing written
  CHECK(rows.writes().empty());
}

TEST_CASE("row writer: rows owed ride on a step that stores anyway", "[row_writer]") {
  Windows windows = one_window();
  windows[0].log.shrink(200, 2);  // refunded to zero: the grant is gone
  RowWriter rows;
  rows.owe(0, 200);
  rows.put(WriteKind::PutGrant, 300, 1);
  rows.step(windows, 300, kQuiet);
  CHECK(rows.writes() == std::vector<Write>{put_grant(300, 1), delete_grant(200)});
  CHECK_FALSE(rows.owes());
}

TEST_CASE("row writer: an expiry forces a moved take's row, and only a moved one's", "[row_writer]") {
  Windows windows = one_window();
  SECTION("a refund waits through an expiry") {
    RowWriter rows;
    rows.owe(0, 100);
    rows.put(WriteKind::DeleteGrantsThrough, 50);
    rows.step(windows, 300, kQuiet);
    CHECK(rows.owes());
  }
  SECTION("a take moved to a later date is written before its old row expires") {
    RowWriter rows;
    rows.owe(0, 200, /*moved=*/true);
    rows.put(WriteKind::DeleteGrantsThrough, 50);
    rows.step(windows, 300, kQuiet);
    CHECK_FALSE(rows.owes());
    CHECK(rows.writes().back() == put_grant(200, 2));
  }
}

TEST_CASE("row writer: a reservation defers the quiet write, never brings it forward", "[row_writer]") {
  Windows windows = one_window();
  RowWriter rows;
  rows.owe(0, 100);
  rows.step(windows, 1000, kQuiet);
  rows.defer_to(1000 + 10);  // earlier than due: no change
  CHECK(rows.owed_due() == 1000 + kQuiet);
  rows.defer_to(2000);
  CHECK(rows.owed_due() == 2000);
  rows.step(windows, 1999, kQuiet);
  CHECK(rows.owes());
  rows.step(windows, 2000, kQuiet);
  CHECK_FALSE(rows.owes());
}

TEST_CASE("row writer: a rewrite leaves an expired row to the batched expiry only when asked", "[row_writer]") {
  Windows windows = one_window();
  const std::vector<std::pair<int, drl::Millis>> gone{{0, 50}};  // no grant at 50; it left its window at 1050
  SECTION("expired_stay: the batched expiry deletes it") {
    RowWriter rows;
    rows.rewrite(gone, windows, 1050, /*expired_stay=*/true);
    CHECK(rows.writes().empty());
    rows.rewrite(gone, windows, 1049, /*expired_stay=*/true);  // still in its window: deleted
    CHECK(rows.writes() == std::vector<Write>{delete_grant(50)});
  }
  SECTION("otherwise it is deleted whatever its age") {
    RowWriter rows;
    rows.rewrite(gone, windows, 1050, /*expired_stay=*/false);
    CHECK(rows.writes() == std::vector<Write>{delete_grant(50)});
  }
  SECTION("a row of a window that went writes nothing") {
    RowWriter rows;
    rows.rewrite(std::vector<std::pair<int, drl::Millis>>{{7, 100}}, windows, 300, false);
    CHECK(rows.writes().empty());
  }
}
