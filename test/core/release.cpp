// Verifies that a window counts each take from when its callback left the
// object (Engine::released, kMaxReleaseAllowanceMs): a take is dated ahead
// of its start by the allowance (the largest lag among recent releases), a
// release later than that date moves the take to the release, and a restore
// dates every row the stored release mark does not cover at the restore.
#include <catch2/catch.hpp>

#include <string>

#include "drl/engine.h"
#include "engine_helpers.h"

using namespace drl;
using namespace drl::test;

namespace {

constexpr Millis kWindow = 1000;

// Applies the engine's output to `storage` and clears it.
void store(Engine& e, testing::Storage& storage) {
  storage.apply(e);
  e.clear_output();
}

// An engine as the Durable Object's host runs it: release dating on.
Engine dating(const std::string& text, Millis now = T0) {
  Engine e;
  e.set_release_dating(true);
  const Status st = e.configure(text, now);
  if (!st.ok()) FAIL("configure failed: " << st.error().message);
  return e;
}

json stats_of(Engine& e, Millis now) {
  auto text = e.stats(now);
  if (!text.ok()) FAIL("stats failed: " << text.error().message);
  e.clear_output();
  return json::parse(*text);
}

// The primary window's grants as stats shows them: [[at, amount], ...].
json grants(Engine& e, Millis now) { return stats_of(e, now)["grants"]; }

}  // namespace

TEST_CASE("a take starts counting when its callback leaves, not when it was started") {
  Engine e = dating(config(1, kWindow, 10));
  const Ticket a = arrive(e, T0);
  CHECK(actions(e) == std::vector<Action>{start(a)});
  // The commit before a's callback landed 50 ms later: that is when it left.
  e.released(e.starts_emitted(), T0 + 50);
  CHECK(grants(e, T0 + 50) == json::array({json::array({T0 + 50, 1})}));
  report(e, a, ok(), T0 + 60);
  drain(e);

  // One window after the start is not one window after the work left.
  const Ticket b = arrive(e, T0 + kWindow + 49);
  CHECK(drain(e).actions.empty());
  CHECK(wake(e) == T0 + kWindow + 50);
  e.tick(T0 + kWindow + 50);
  CHECK(actions(e) == std::vector<Action>{start(b)});
}

TEST_CASE("a release no later than the take's date moves nothing") {
  Engine e = dating(config(5, kWindow, 10));
  const Ticket a = arrive(e, T0);
  drain(e);
  e.released(e.starts_emitted(), T0);  // the take is dated T0: on time
  Step s = drain(e);
  CHECK(s.writes.empty());
  CHECK(grants(e, T0) == json::array({json::array({T0, 1})}));
  report(e, a, ok(), T0 + 1);
  drain(e);

  // One ms late: moved, its row rewritten where it now is.
  const Ticket b = arrive(e, T0 + 10);
  drain(e);
  e.released(e.starts_emitted(), T0 + 11);
  s = drain(e);
  // The moved row is written with the next step that stores (or once the
  // bucket is quiet), with the release mark: here nothing else stores yet.
  CHECK(s.writes.empty());
  CHECK(grants(e, T0 + 11) == json::array({json::array({T0, 1}), json::array({T0 + 11, 1})}));
  report(e, b, ok(), T0 + 12);
}

TEST_CASE("the allowance dates later takes ahead by the largest recent lag") {
  Engine e = dating(config(100, kWindow, 10));
  const Ticket a = arrive(e, T0);
  drain(e);
  e.released(e.starts_emitted(), T0 + 30);
  drain(e);
  CHECK(stats_of(e, T0 + 30)["releaseLag"]["allowance"] == 30);

  // b is dated 30 ms ahead of its start; released 20 ms after it, on time:
  // nothing is rewritten.
  const Ticket b = arrive(e, T0 + 100);
  Step s = drain(e);
  CHECK(std::find(s.writes.begin(), s.writes.end(), put_grant(T0 + 130, 1)) != s.writes.end());
  e.released(e.starts_emitted(), T0 + 120);
  s = drain(e);
  CHECK(s.writes.empty());
  const json lag = stats_of(e, T0 + 120)["releaseLag"];
  CHECK(lag["samples"] == 2);
  CHECK(lag["max"] == 30);
  CHECK(lag["p50"] == 30);
  CHECK(lag["allowance"] == 30);
  report(e, a, ok(), T0 + 130);
  report(e, b, ok(), T0 + 130);
}

TEST_CASE("the allowance is at most kMaxReleaseAllowanceMs") {
  Engine e = dating(config(100, 60'000, 10));
  arrive(e, T0);
  drain(e);
  e.released(e.starts_emitted(), T0 + 5000);  // a commit that took 5 s
  drain(e);
  const json lag = stats_of(e, T0 + 5000)["releaseLag"];
  CHECK(lag["max"] == 5000);
  CHECK(lag["allowance"] == kMaxReleaseAllowanceMs);
  // The take itself moved to its release, whatever the allowance.
  CHECK(grants(e, T0 + 5000) == json::array({json::array({T0 + 5000, 1})}));
}

TEST_CASE("a report that comes before the host's release releases the attempt at the report") {
  Engine e = dating(config(3, kWindow, 10));
  const Ticket a = arrive(e, T0);
  const Ticket b = arrive(e, T0 + 1);
  drain(e);
  // b's report came before the host saw the commit land: b left by then, and a before it.
  report(e, b, ok(), T0 + 5);
  drain(e);
  CHECK(grants(e, T0 + 5) == json::array({json::array({T0 + 5, 2})}));
  // The host's release, later, finds nothing left to move.
  e.released(e.starts_emitted(), T0 + 40);
  CHECK(grants(e, T0 + 40) == json::array({json::array({T0 + 5, 2})}));
  const json lag = stats_of(e, T0 + 40)["releaseLag"];
  CHECK(lag["samples"] == 2);
  CHECK(lag["max"] == 5);
  report(e, a, ok(), T0 + 41);
}

TEST_CASE("a restore dates rows the release mark does not cover at the restore") {
  testing::Storage storage;
  Engine e = dating(config(1, kWindow, 10));
  store(e, storage);
  const Ticket a = arrive(e, T0);
  store(e, storage);  // a's row, and a mark at its date: a has not left yet
  REQUIRE(storage.released_before == T0);
  (void)a;

  // A crash: a's callback may have left at any moment before it.
  Engine restored;
  restored.set_release_dating(true);
  restored.restore(storage.snapshot(), T0 + 300);
  CHECK(grants(restored, T0 + 300) == json::array({json::array({T0 + 300, 1})}));
  const Ticket b = arrive(restored, T0 + kWindow + 299);
  CHECK(drain(restored).actions.empty());
  restored.tick(T0 + kWindow + 300);
  CHECK(actions(restored) == std::vector<Action>{start(b)});

  SECTION("a row one ms before the mark is restored as dated") {
    testing::Storage covered = storage;
    covered.released_before = T0 + 1;
    Engine again;
    again.set_release_dating(true);
    again.restore(covered.snapshot(), T0 + 300);
    CHECK(grants(again, T0 + 300) == json::array({json::array({T0, 1})}));
  }
  SECTION("storage from before the mark existed is restored as dated") {
    testing::Storage legacy = storage;
    legacy.released_before.reset();
    Engine again;
    again.set_release_dating(true);
    again.restore(legacy.snapshot(), T0 + 300);
    CHECK(grants(again, T0 + 300) == json::array({json::array({T0, 1})}));
  }
}

TEST_CASE("a restore writes only the rows the release mark moved, not the whole log") {
  testing::Storage storage;
  Engine e = dating(config(1'000'000, 600'000, 10));
  store(e, storage);
  // A long log the mark covers, as a busy bucket's is...
  for (Millis i = 0; i < 1000; ++i) storage.grants[T0 - 100'000 + 5 * i] = 1;
  storage.released_before = T0;
  // ...and two rows past it: takes whose callbacks had not left at the crash.
  storage.grants[T0 + 1] = 2;
  storage.grants[T0 + 7] = 1;

  Engine restored;
  restored.set_release_dating(true);
  restored.restore(storage.snapshot(), T0 + 300);
  const std::vector<Write> written = restored.writes();
  // The two rows leave their keys for the restart's date, which each
  // upserts (the host writes a batch's upserts of one row once); nothing
  // else is written.
  std::vector<Write> grant_writes;
  for (const Write& w : written)
    if (w.kind == WriteKind::PutGrant || w.kind == WriteKind::DeleteGrant || w.kind == WriteKind::ClearGrants)
      grant_writes.push_back(w);
  CHECK(grant_writes ==
        std::vector<Write>{delete_grant(T0 + 1), delete_grant(T0 + 7), put_grant(T0 + 300, 3), put_grant(T0 + 300, 3)});

  // What storage holds afterwards is what the engine counts: a second
  // restart restores the same log.
  store(restored, storage);
  CHECK(storage.grants.size() == 1001);
  CHECK(storage.grants.at(T0 + 300) == 3);
  Engine again;
  again.set_release_dating(true);
  again.restore(storage.snapshot(), T0 + 400);
  CHECK(grants(again, T0 + 400) == grants(restored, T0 + 400));
}

TEST_CASE("a quiet bucket writes the mark once, so an eviction restores rows as dated") {
  testing::Storage storage;
  Engine e = dating(config(1, kWindow, 10));
  store(e, storage);
  const Ticket a = arrive(e, T0);
  store(e, storage);
  e.released(e.starts_emitted(), T0);
  store(e, storage);
  report(e, a, ok(), T0 + 10);
  store(e, storage);
  CHECK(storage.released_before == T0);  // not yet moved past a's row

  // 500 ms after the release, the mark is written alone.
  CHECK(wake(e) == T0 + kIdleSlotsWrite);
  e.tick(T0 + kIdleSlotsWrite - 1);
  CHECK(writes_of(e).empty());
  CHECK(storage.released_before == T0);
  e.tick(T0 + kIdleSlotsWrite);
  const std::vector<Write> written = e.writes();
  // Every start released: the mark vouches for every row.
  CHECK(written == std::vector<Write>{Write{WriteKind::PutReleased, 9'007'199'254'740'991, 0}});
  store(e, storage);
  // Once written, the mark waits for the next start: the next wake (the
  // slots record's own idle write) writes no mark.
  e.tick(wake(e));
  CHECK(std::none_of(e.writes().begin(), e.writes().end(),
                     [](const Write& w) { return w.kind == WriteKind::PutReleased; }));
  store(e, storage);

  Engine restored;
  restored.set_release_dating(true);
  restored.restore(storage.snapshot(), T0 + 900);
  CHECK(grants(restored, T0 + 900) == json::array({json::array({T0, 1})}));
  const Ticket b = arrive(restored, T0 + kWindow);
  CHECK(actions(restored) == std::vector<Action>{start(b)});
}

TEST_CASE("a rebuilt engine keeps counting starts, so the host's marks stay valid") {
  testing::Storage storage;
  Engine e = dating(config(10, kWindow, 10));
  store(e, storage);
  arrive(e, T0);
  store(e, storage);
  const uint64_t before = e.starts_emitted();
  CHECK(before == 1);
  e.restore(storage.snapshot(), T0 + 10);
  store(e, storage);
  CHECK(e.starts_emitted() == before);
  arrive(e, T0 + 20);
  store(e, storage);
  CHECK(e.starts_emitted() == before + 1);
  // A mark from before the rebuild releases nothing new.
  e.released(before, T0 + 500);
  CHECK(writes_of(e).empty());
}
