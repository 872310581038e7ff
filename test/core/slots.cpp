// Verifies the slots record: it covers, rather than mirrors, the attempts
// that may be running. A start the record does not cover writes it
// (PutSlots) in the same step as its grant, each live attempt dated a cover
// span (1 s, at most a quarter of attemptTimeoutMs) after its start, so
// later starts within that span, while no more run than it lists, write
// only their grant. Releases write nothing of their own: the record rides
// on a step that writes anyway when it lists more slots than are held, or,
// once no attempt runs, is written alone kIdleSlotsWrite after the bucket
// went quiet. A restart restores it as slots held until entry +
// attemptTimeoutMs, so the cap holds across a crash with callbacks still
// running. Damaged records are read on the safe side and rewritten; an
// intact one is not.
#include <catch2/catch.hpp>

#include <string>

#include "drl/engine.h"
#include "engine_helpers.h"

using namespace drl;
using namespace drl::test;

namespace {

constexpr Millis kTimeout = 1000;
constexpr Millis kWindow = 10'000;
// The cover span under kTimeout: a quarter of it.
constexpr Millis kSpan = kTimeout / 4;
static_assert(kSpan < kSlotsCover);

// A bucket that never binds, so only slots decide who starts.
std::string bucket(int64_t concurrency, Millis timeout = kTimeout,
                   const json& retry = {{"maxRetries", 2}, {"minDelayInMs", 100}, {"maxDelayInMs", 100}}) {
  return with_timeout(config(1000, kWindow, concurrency, retry), timeout);
}

Engine restored(const std::string& text, const std::string& slots_text, Millis now) {
  Snapshot snap;
  snap.config_text = text;
  snap.slots_text = slots_text;
  Engine e;
  e.restore(snap, now);
  return e;
}

int64_t restored_slots(Engine& e, Millis now) { return stats(e, now)["restoredSlots"].get<int64_t>(); }

}  // namespace

// ---- writing the record ------------------------------------------------------

TEST_CASE("a start writes the record with its grant, dating the attempt a cover span after its start", "[slots]") {
  SECTION("the default 120 s timeout: a span of 1 s") {
    Engine e = configured(config(1000, kWindow, 3));
    CHECK(e.slots_text().empty());
    arrive(e, T0);
    CHECK(e.writes() == std::vector<Write>{put_grant(T0, 1), put_slots()});
    CHECK(e.slots_text() == slot(T0 + 1000));
    CHECK(wake(e) == T0 + kDefaultAttemptTimeout);  // the deadline counts from the start itself
  }
  SECTION("a timeout of 4 s or more: still 1 s") {
    Engine e = configured(bucket(3, 8000));
    arrive(e, T0);
    CHECK(e.writes() == std::vector<Write>{put_grant(T0, 1), put_slots()});
    CHECK(e.slots_text() == slot(T0 + 1000));
  }
  SECTION("a 1 s timeout: a quarter of it") {
    Engine e = configured(bucket(3));
    arrive(e, T0);
    CHECK(e.writes() == std::vector<Write>{put_grant(T0, 1), put_slots()});
    CHECK(e.slots_text() == slot(T0 + 250));
    CHECK(wake(e) == T0 + kTimeout);
  }
}

TEST_CASE("a start while more attempts run than the record lists writes it", "[slots]") {
  Engine e = configured(bucket(4));
  const Ticket a = arrive(e, T0);
  e.clear_output();
  CHECK(e.slots_text() == slot(T0 + kSpan));

  arrive(e, T0);  // the same ms: one grant row, one record entry
  CHECK(e.writes() == std::vector<Write>{put_grant(T0, 2), put_slots()});
  CHECK(e.slots_text() == slot(T0 + kSpan, 2));
  e.clear_output();

  // Within the span, but a third attempt runs beside the two the record lists.
  arrive(e, T0 + 7);
  CHECK(e.writes() == std::vector<Write>{put_grant(T0 + 7, 1), put_slots()});
  CHECK(e.slots_text() == slot(T0 + kSpan, 2) + "," + slot(T0 + 7 + kSpan));
  e.clear_output();

  // A retry's start is a start like any other; this one, within the span and
  // with no more running than the record lists (a's first attempt ended),
  // is covered: its grant alone.
  report(e, a, failed(Failure::Retryable, 503), T0 + 10);  // due at T0 + 110
  CHECK(e.writes().empty());
  e.tick(T0 + 110);
  CHECK(e.actions() == std::vector<Action>{start(a, 2)});
  CHECK(e.writes() == std::vector<Write>{put_grant(T0 + 110, 1)});
  CHECK(e.slots_text() == slot(T0 + kSpan, 2) + "," + slot(T0 + 7 + kSpan));
  e.clear_output();

  // A fourth running attempt is one more than it lists: written again.
  arrive(e, T0 + 120);
  CHECK(e.writes() == std::vector<Write>{put_grant(T0 + 120, 1), put_slots()});
  CHECK(e.slots_text() ==
        slot(T0 + kSpan) + "," + slot(T0 + 7 + kSpan) + "," + slot(T0 + 110 + kSpan) + "," + slot(T0 + 120 + kSpan));
}

TEST_CASE("a start within the cover span of the last record writes only its grant, one after it writes the record",
          "[slots]") {
  Engine e = configured(bucket(1));
  const Ticket a = arrive(e, T0);
  const Ticket b = arrive(e, T0);
  const Ticket c = arrive(e, T0);
  const Ticket d = arrive(e, T0);
  e.clear_output();
  CHECK(e.slots_text() == slot(T0 + kSpan));

  report(e, a, ok(), T0 + 100);  // b starts in the same step
  CHECK(e.actions() == std::vector<Action>{resolve(a), start(b)});
  CHECK(e.writes() == std::vector<Write>{put_grant(T0 + 100, 1)});
  e.clear_output();

  report(e, b, ok(), T0 + kSpan);  // c starts at the span's last ms: still covered
  CHECK(e.actions() == std::vector<Action>{resolve(b), start(c)});
  CHECK(e.writes() == std::vector<Write>{put_grant(T0 + kSpan, 1)});
  CHECK(e.slots_text() == slot(T0 + kSpan));
  e.clear_output();

  report(e, c, ok(), T0 + kSpan + 1);  // d starts 1 ms past it: the record is written again
  CHECK(e.actions() == std::vector<Action>{resolve(c), start(d)});
  CHECK(e.writes() == std::vector<Write>{put_grant(T0 + kSpan + 1, 1), put_slots()});
  CHECK(e.slots_text() == slot(T0 + kSpan + 1 + kSpan));
}

TEST_CASE("a short attemptTimeoutMs covers a quarter of it", "[slots]") {
  SECTION("400 ms: a span of 100 ms") {
    Engine e = configured(bucket(1, 400));
    const Ticket a = arrive(e, T0);
    const Ticket b = arrive(e, T0);
    const Ticket c = arrive(e, T0);
    e.clear_output();
    CHECK(e.slots_text() == slot(T0 + 100));
    report(e, a, ok(), T0 + 100);
    CHECK(e.writes() == std::vector<Write>{put_grant(T0 + 100, 1)});  // b: covered
    e.clear_output();
    report(e, b, ok(), T0 + 101);
    CHECK(e.writes() == std::vector<Write>{put_grant(T0 + 101, 1), put_slots()});  // c: not
    CHECK(e.slots_text() == slot(T0 + 201));
    CHECK(wake(e) == T0 + 101 + 400);
    CHECK(started(e.actions()) == std::vector<Ticket>{c});
  }
  SECTION("under 4 ms: no span, each attempt dated at its start") {
    Engine e = configured(bucket(1, 3));
    const Ticket a = arrive(e, T0);
    arrive(e, T0);
    e.clear_output();
    CHECK(e.slots_text() == slot(T0));
    report(e, a, ok(), T0 + 1);
    CHECK(e.writes() == std::vector<Write>{put_grant(T0 + 1, 1), put_slots()});
    CHECK(e.slots_text() == slot(T0 + 1));
  }
}

TEST_CASE("starts in one step share one record, written after their grants", "[slots]") {
  Engine e = configured(bucket(1));
  arrive(e, T0);
  arrive(e, T0);
  arrive(e, T0);
  e.clear_output();
  REQUIRE(e.reconfigure(R"({"concurrency":3})", T0 + 5).ok());
  CHECK(started(e.actions()).size() == 2);
  CHECK(e.writes() == std::vector<Write>{put_config(), put_grant(T0 + 5, 1), put_grant(T0 + 5, 2), put_slots()});
  CHECK(e.slots_text() == slot(T0 + kSpan) + "," + slot(T0 + 5 + kSpan, 2));
}

TEST_CASE("a release writes nothing of its own, the record rides on a later write while it lists more than is held",
          "[slots]") {
  // A window shorter than the timeout, so an expiry can be the next write.
  // A 5 s timeout: a span of 1 s. The record is last written at b's start
  // (T0 + 100), so it rides again from T0 + 1100 on.
  Engine e = configured(with_timeout(config(1000, 2000, 3, {{"maxRetries", 0}}), 5000));
  const Ticket a = arrive(e, T0);
  arrive(e, T0 + 100);
  e.clear_output();
  const std::string both = slot(T0 + 1000) + "," + slot(T0 + 1100);
  CHECK(e.slots_text() == both);

  report(e, a, ok(), T0 + 200);
  Step s = drain(e);
  CHECK(s.writes.empty());
  CHECK(s.slot_records == 0);
  CHECK(e.slots_text() == both);      // still lists a's slot
  CHECK(wake(e) == T0 + 100 + 5000);  // b runs: no idle write is due

  SECTION("a start that keeps the count: its grant alone, the record lists as many as are held") {
    arrive(e, T0 + 300);
    CHECK(e.writes() == std::vector<Write>{put_grant(T0 + 300, 1)});
    CHECK(e.slots_text() == both);
  }
  SECTION(
      "not within a cover span of its last write: a rise and fall of the running count would rewrite it at every dip") {
    pause(e, 50, T0 + 1099);
    CHECK(e.writes() == std::vector<Write>{put_penalty(T0 + 1149, true)});
    CHECK(e.slots_text() == both);
    e.clear_output();
    pause(e, 50, T0 + 1100);
    CHECK(e.writes() == std::vector<Write>{put_penalty(T0 + 1150, true), put_slots()});
    CHECK(e.slots_text() == slot(T0 + 1100));
  }
  SECTION("a pause") {
    pause(e, 50, T0 + 1100);
    CHECK(e.writes() == std::vector<Write>{put_penalty(T0 + 1150, true), put_slots()});
    CHECK(e.slots_text() == slot(T0 + 1100));
  }
  SECTION("a reconfigure") {
    REQUIRE(e.reconfigure(R"({"concurrency":4})", T0 + 1100).ok());
    CHECK(e.writes() == std::vector<Write>{put_config(), put_slots()});
    CHECK(e.slots_text() == slot(T0 + 1100));
  }
  SECTION("not an expiry alone (the host batches those), but the next write after it") {
    e.tick(T0 + 2000);
    CHECK(e.writes() == std::vector<Write>{delete_through(T0)});
    CHECK(e.slots_text() == both);
    e.clear_output();
    pause(e, 50, T0 + 2050);
    CHECK(e.writes() == std::vector<Write>{put_penalty(T0 + 2100, true), put_slots()});
    CHECK(e.slots_text() == slot(T0 + 1100));
  }
  e.clear_output();
  // A write with no slot released since carries no record.
  pause(e, 0, T0 + 2200);
  s = drain(e);
  CHECK(s.slot_records == 0);
  CHECK_FALSE(s.writes.empty());
}

TEST_CASE("every kind of release leaves the record as written, none writes it alone", "[slots]") {
  Engine e = configured(bucket(2, kTimeout, {{"maxRetries", 1}, {"minDelayInMs", 100}, {"maxDelayInMs", 100}}));
  const Ticket a = arrive(e, T0);
  e.clear_output();
  // What the record says once the next write carries it.
  std::string after;
  SECTION("a report") { report(e, a, ok(), T0 + 10); }
  SECTION("a report whose retry waits between attempts (the call keeps its slot, but runs nothing)") {
    report(e, a, failed(Failure::Retryable, 503), T0 + 10);
    CHECK(inspect(e).active() == 1);
    after = slot(T0 + kTimeout + 1 + kSpan);  // the retry starts with that write, after the span
  }
  SECTION("a throw (retried, as the retryable failure)") {
    threw(e, a, T0 + 10);
    CHECK(inspect(e).active() == 1);
    after = slot(T0 + kTimeout + 1 + kSpan);
  }
  SECTION("gone") { gone(e, a, T0 + 10); }
  SECTION("a timeout") { e.tick(T0 + kTimeout); }
  SECTION("a cancelled call's report") {
    cancel(e, a, T0 + 5);
    report(e, a, ok(), T0 + 10);
  }
  Step s = drain(e);
  CHECK(s.writes.empty());
  CHECK(s.slot_records == 0);
  CHECK(e.slots_text() == slot(T0 + kSpan));

  pause(e, 0, T0 + kTimeout + 1);
  s = drain(e);
  CHECK(s.slot_records == 1);
  CHECK_FALSE(s.writes.empty());
  CHECK(e.slots_text() == after);
}

TEST_CASE("with nothing running, a record that lists released slots is written alone after kIdleSlotsWrite",
          "[slots]") {
  Engine e = configured(bucket(2));
  const Ticket a = arrive(e, T0);
  const Ticket b = arrive(e, T0);
  e.clear_output();
  report(e, a, ok(), T0 + 10);
  CHECK(drain(e).slot_records == 0);
  CHECK(wake(e) == T0 + kTimeout);  // b still runs: only its deadline
  e.tick(T0 + 10 + kIdleSlotsWrite);
  CHECK(drain(e).slot_records == 0);

  report(e, b, ok(), T0 + 600);
  CHECK(drain(e).slot_records == 0);
  CHECK(e.slots_text() == slot(T0 + kSpan, 2));
  SECTION("quiet: written alone, empty, and nothing waits") {
    CHECK(wake(e) == T0 + 600 + kIdleSlotsWrite);
    e.tick(T0 + 600 + kIdleSlotsWrite - 1);
    CHECK(drain(e).slot_records == 0);
    expect_idle_slots_write(e, T0 + 600 + kIdleSlotsWrite);
    CHECK(e.slots_text().empty());
    CHECK(wake(e) == kNoWake);
  }
  SECTION("a start before it: the idle write is off while it runs") {
    const Ticket c = arrive(e, T0 + 700);
    const Step st = drain(e);
    CHECK(st.writes == std::vector<Write>{put_grant(T0 + 700, 1)});
    CHECK(st.slot_records == 1);  // past the span: written, listing c alone
    CHECK(e.slots_text() == slot(T0 + 700 + kSpan));
    CHECK(wake(e) == T0 + 700 + kTimeout);
    report(e, c, ok(), T0 + 800);
    CHECK(drain(e).slot_records == 0);
    expect_idle_slots_write(e, T0 + 800 + kIdleSlotsWrite);
    CHECK(e.slots_text().empty());
  }
}

TEST_CASE("a cancelled running call stays in the record: its work is in flight", "[slots]") {
  Engine e = configured(bucket(1));
  const Ticket a = arrive(e, T0);
  e.clear_output();
  cancel(e, a, T0 + 1);
  pause(e, 0, T0 + 2);
  const Step s = drain(e);
  CHECK(s.slot_records == 0);  // nothing changed
  CHECK(e.slots_text() == slot(T0 + kSpan));
  CHECK(wake(e) == T0 + kTimeout);  // still running: no idle write
}

TEST_CASE("slots_text is the record as last written: by date, ascending, counts merged", "[slots]") {
  Engine e = configured(bucket(6));
  const Ticket a = arrive(e, T0 + 30);
  const Ticket b = arrive(e, T0 + 30);
  const Ticket c = arrive(e, T0 + 40);
  arrive(e, T0 + 20);  // a clock behind the engine's: started at the latest time seen
  e.clear_output();
  const std::string four = slot(T0 + 30 + kSpan, 2) + "," + slot(T0 + 40 + kSpan, 2);
  CHECK(e.slots_text() == four);
  // Releases leave it as written.
  report(e, b, ok(), T0 + 50);
  CHECK(e.slots_text() == four);
  threw(e, c, T0 + 50);  // between attempts: holds a slot, runs nothing
  CHECK(e.slots_text() == four);
  gone(e, a, T0 + 60);
  CHECK(e.slots_text() == four);
  CHECK(e.writes().empty());
  // c's retry is covered, and its grant is written while the record lists
  // four where two are held, but the record was written a moment ago: it
  // rides only once a cover span has passed since.
  e.tick(T0 + 150);
  CHECK(e.writes() == std::vector<Write>{put_grant(T0 + 150, 1)});
  CHECK(e.slots_text() == four);
  e.clear_output();
  e.tick(T0 + 40 + kTimeout);  // the fourth caller's attempt times out: c still runs
  CHECK(drain(e).slot_records == 0);
  CHECK(e.slots_text() == four);
  e.tick(T0 + 150 + kTimeout);  // and c's
  CHECK(drain(e).slot_records == 0);
  expect_idle_slots_write(e, T0 + 150 + kTimeout + kIdleSlotsWrite);
  CHECK(e.slots_text().empty());
}

TEST_CASE("a long window's grid dates the record entry from the grant, never earlier than the start", "[slots]") {
  // Windows over kMaxLogEntries ms record takes at the end of their grid cell.
  const int64_t window = 3 * kMaxLogEntries;
  Engine e = configured(with_timeout(config(10, window, 2), kTimeout));
  arrive(e, T0 + 1);
  const Write grant = writes_of(e).front();
  e.clear_output();
  CHECK(grant.at >= T0 + 1);
  CHECK(e.slots_text() == slot(grant.at + kSpan));
  // The deadline still counts from the start itself.
  CHECK(wake(e) == T0 + 1 + kTimeout);
}

// ---- restoring it ------------------------------------------------------------

TEST_CASE("an engine restored while callbacks ran admits no new start until their slots expire", "[slots][snapshot]") {
  constexpr int64_t kCap = 3;
  Host before(bucket(kCap));
  arrive(before.engine, T0);
  arrive(before.engine, T0 + 10);
  arrive(before.engine, T0 + 20);
  before.step();
  // Each start ran beside more attempts than the record listed: each wrote it.
  REQUIRE(before.storage.slots_text == slot(T0 + kSpan) + "," + slot(T0 + 10 + kSpan) + "," + slot(T0 + 20 + kSpan));

  // The object restarts, past the span, while all three callbacks still run
  // at the upstream.
  constexpr Millis at = T0 + 20 + kSpan + 10;
  Engine after;
  after.restore(before.storage.snapshot(), at);
  CHECK(after.writes().empty());  // nothing to repair
  CHECK(wake(after) == kNoWake);
  CHECK(after.slots_text() == *before.storage.slots_text);
  json s = stats(after, at);
  CHECK(s["restoredSlots"] == 3);
  CHECK(s["active"] == 3);
  CHECK(s["running"] == 0);

  const Ticket x = arrive(after, at);
  const Ticket y = arrive(after, at);
  const Ticket z = arrive(after, at);
  CHECK(after.actions().empty());
  // The first restored slot's release: its entry + timeout, no earlier than
  // its attempt's own deadline (T0 + kTimeout), at most a span later.
  CHECK(wake(after) == T0 + kSpan + kTimeout);

  after.tick(T0 + kSpan + kTimeout - 1);
  CHECK(drain(after).actions.empty());
  after.tick(T0 + kSpan + kTimeout);
  Step st = drain(after);
  CHECK(st.actions == std::vector<Action>{start(x)});
  CHECK(st.writes == std::vector<Write>{put_grant(T0 + kSpan + kTimeout, 1)});
  CHECK(st.slot_records == 1);  // x is dated after every entry: not covered
  CHECK(after.slots_text() ==
        slot(T0 + 10 + kSpan) + "," + slot(T0 + 20 + kSpan) + "," + slot(T0 + kSpan + kTimeout + kSpan));
  CHECK(wake(after) == T0 + 10 + kSpan + kTimeout);

  after.tick(T0 + 10 + kSpan + kTimeout - 1);
  CHECK(drain(after).actions.empty());
  after.tick(T0 + 10 + kSpan + kTimeout);
  CHECK(drain(after).actions == std::vector<Action>{start(y)});
  after.tick(T0 + 20 + kSpan + kTimeout);
  CHECK(drain(after).actions == std::vector<Action>{start(z)});
  s = stats(after, T0 + 20 + kSpan + kTimeout);
  CHECK(s["restoredSlots"] == 0);
  CHECK(s["active"] == kCap);
  CHECK(s["running"] == kCap);
  // Now only running attempts block the queue: their deadlines are the wake.
  arrive(after, T0 + 20 + kSpan + kTimeout);
  CHECK(after.actions().empty());
  CHECK(wake(after) == T0 + kSpan + 2 * kTimeout);
}

TEST_CASE("restored from the record written at a start, a slot is held from start + timeout to start + span + timeout",
          "[slots][snapshot]") {
  Host before(bucket(1));
  const Ticket a = arrive(before.engine, T0);
  before.step();
  REQUIRE(before.storage.slots_text == slot(T0 + kSpan));
  Millis restart = 0;
  Millis freed = 0;  // when a caller queued after the restart starts
  SECTION("restarted after the span: held until the entry + timeout") {
    restart = T0 + kSpan + 1;
    freed = T0 + kSpan + kTimeout;
  }
  SECTION("restarted within the span: the entry is pulled back to the restart, held until it + timeout") {
    restart = T0 + 100;
    freed = T0 + 100 + kTimeout;
  }
  SECTION("a later start the record covered: its slot is held past its own deadline") {
    // a ends and b starts within the span: b's grant alone is written.
    arrive(before.engine, T0 + 10);
    report(before.engine, a, ok(), T0 + 200);
    const Step st = before.step();
    CHECK(st.writes == std::vector<Write>{put_grant(T0 + 200, 1)});
    CHECK(st.slot_records == 0);
    REQUIRE(before.storage.slots_text == slot(T0 + kSpan));
    restart = T0 + 300;
    freed = T0 + kSpan + kTimeout;
    CHECK(freed >= T0 + 200 + kTimeout);  // b's own deadline
  }
  CHECK(freed >= T0 + kTimeout);
  CHECK(freed <= T0 + kSpan + kTimeout);

  Engine after;
  after.restore(before.storage.snapshot(), restart);
  CHECK(after.writes().empty());
  CHECK(restored_slots(after, restart) == 1);
  const Ticket x = arrive(after, restart);
  CHECK(after.actions().empty());
  if (restart < T0 + kSpan) {
    // The pulled-back entry reads as a changed record: with nothing running,
    // it is written alone once quiet, and frees nothing.
    expect_idle_slots_write(after, restart + kIdleSlotsWrite);
    CHECK(after.slots_text() == slot(restart));
  }
  CHECK(wake(after) == freed);
  after.tick(freed - 1);
  CHECK(actions(after).empty());
  after.tick(freed);
  CHECK(actions(after) == std::vector<Action>{start(x)});
}

TEST_CASE("restored slots beside a free one: the free one is used at once", "[slots][snapshot]") {
  Engine e = restored(bucket(3), slot(T0) + "," + slot(T0 + 10), T0 + 100);
  const Ticket x = arrive(e, T0 + 100);
  CHECK(actions(e) == std::vector<Action>{start(x)});
  const Ticket y = arrive(e, T0 + 100);
  CHECK(e.actions().empty());
  CHECK(wake(e) == T0 + kTimeout);
  e.tick(T0 + kTimeout);
  CHECK(actions(e) == std::vector<Action>{start(y)});
}

TEST_CASE("a slot whose timeout has passed by the restore is not restored", "[slots][snapshot]") {
  const std::string record = slot(T0) + "," + slot(T0 + 10, 2);
  SECTION("1 ms before the first expires") {
    Engine e = restored(bucket(3), record, T0 + kTimeout - 1);
    CHECK(restored_slots(e, T0 + kTimeout - 1) == 3);
  }
  SECTION("as the first expires") {
    Engine e = restored(bucket(3), record, T0 + kTimeout);
    CHECK(e.slots_text() == slot(T0 + 10, 2));
    CHECK(restored_slots(e, T0 + kTimeout) == 2);
  }
  SECTION("1 ms after the last expires") {
    Engine e = restored(bucket(3), record, T0 + 10 + kTimeout + 1);
    CHECK(e.slots_text().empty());
    CHECK(restored_slots(e, T0 + 10 + kTimeout + 1) == 0);
    // The stored record still names them: it is rewritten (empty) alone once
    // the bucket has been quiet, and then nothing waits.
    CHECK(e.writes().empty());
    expect_idle_slots_write(e, T0 + 10 + kTimeout + 1 + kIdleSlotsWrite);
    CHECK(wake(e) == kNoWake);
  }
}

TEST_CASE("each restored slot is freed when now reaches its start + timeout", "[slots][snapshot]") {
  Engine e = restored(bucket(5), slot(T0, 2) + "," + slot(T0 + 10), T0 + 100);
  CHECK(restored_slots(e, T0 + kTimeout - 1) == 3);
  CHECK(restored_slots(e, T0 + kTimeout) == 1);
  CHECK(restored_slots(e, T0 + 10 + kTimeout - 1) == 1);
  CHECK(restored_slots(e, T0 + 10 + kTimeout) == 0);
  CHECK(inspect(e).active() == 0);
  // Nobody waited on them, so no wake was needed for their release; but the
  // record, stale since the first freed, is written alone once quiet.
  const Step quiet = drain(e);
  CHECK(quiet.writes.empty());
  CHECK(quiet.slot_records == 0);
  expect_idle_slots_write(e, T0 + kTimeout + kIdleSlotsWrite);
  CHECK(wake(e) == kNoWake);
}

TEST_CASE("restored slots are dropped from the record with the next write after they free", "[slots][snapshot]") {
  const std::string record = slot(T0) + "," + slot(T0 + 10);
  Engine e = restored(bucket(5), record, T0 + 100);
  CHECK(e.writes().empty());
  CHECK(wake(e) == kNoWake);
  pause(e, 0, T0 + 200);  // the restored record is intact: the next write does not rewrite it
  Step s = drain(e);
  CHECK_FALSE(s.writes.empty());
  CHECK(s.slot_records == 0);
  CHECK(e.slots_text() == record);
  e.tick(T0 + kTimeout);
  s = drain(e);
  CHECK(s.writes.empty());
  CHECK(s.slot_records == 0);
  CHECK(e.slots_text() == record);                    // as stored: it still lists the freed slot
  CHECK(wake(e) == T0 + kTimeout + kIdleSlotsWrite);  // unless a write carries it first
  pause(e, 0, T0 + kTimeout + 1);
  s = drain(e);
  CHECK_FALSE(s.writes.empty());
  CHECK(s.slot_records == 1);
  CHECK(e.slots_text() == slot(T0 + 10));
  CHECK(wake(e) == kNoWake);  // carried: no idle write left to make
}

TEST_CASE(
    "a restored slot and a live one started in the same ms: the restored entry as it was, the live one a span later",
    "[slots][snapshot]") {
  Engine e = restored(bucket(3), slot(T0 + 100), T0 + 100);
  arrive(e, T0 + 100);
  CHECK(e.writes() == std::vector<Write>{put_grant(T0 + 100, 1), put_slots()});
  CHECK(e.slots_text() == slot(T0 + 100) + "," + slot(T0 + 100 + kSpan));
  json s = stats(e, T0 + 100);
  CHECK(s["restoredSlots"] == 1);
  CHECK(s["active"] == 2);
  CHECK(s["running"] == 1);
}

TEST_CASE("restored slots survive a second restart before anything was written", "[slots][snapshot]") {
  Host before(bucket(3));
  arrive(before.engine, T0);
  arrive(before.engine, T0 + 10);
  before.step();
  Storage storage = before.storage;
  const std::string both = slot(T0 + kSpan) + "," + slot(T0 + 10 + kSpan);
  REQUIRE(storage.slots_text == both);

  Engine second;
  second.restore(storage.snapshot(), T0 + 300);
  storage.apply(second);
  second.clear_output();
  pause(second, 0, T0 + 310);  // the record is intact: the write carries none
  storage.apply(second);
  second.clear_output();
  CHECK(storage.slots_text == both);  // nothing written yet

  // Had it crashed now, the record would still hold both.
  Engine third;
  third.restore(storage.snapshot(), T0 + 400);
  CHECK(restored_slots(third, T0 + 400) == 2);
  const Ticket x = arrive(third, T0 + 400);
  CHECK(actions(third) == std::vector<Action>{start(x)});
  arrive(third, T0 + 400);
  CHECK(third.actions().empty());

  // Once rewritten (a start it does not cover), the record still holds them:
  // restored slots are in it as they were.
  const Ticket y = arrive(second, T0 + 500);
  CHECK(second.actions() == std::vector<Action>{start(y)});
  storage.apply(second);
  second.clear_output();
  CHECK(storage.slots_text == both + "," + slot(T0 + 500 + kSpan));
  Engine fourth;
  fourth.restore(storage.snapshot(), T0 + 800);
  CHECK(restored_slots(fourth, T0 + 800) == 3);
  arrive(fourth, T0 + 800);
  CHECK(fourth.actions().empty());
}

TEST_CASE("a damaged slots record is read on the safe side", "[slots][snapshot]") {
  constexpr Millis now = T0 + 100;
  struct Case {
    std::string text;
    std::string restored;   // slots_text() after the restore
    bool rewritten = true;  // normalising changed it, so it is written again
  };
  const std::string t0 = std::to_string(T0);
  const std::vector<Case> cases = {
      {"", "", false},  // no slots at all: intact, nothing to rewrite
      {"garbage", ""},
      {",,,", ""},
      {":1", ""},
      {t0, ""},         // no count
      {t0 + ":", ""},   // empty count
      {t0 + ":0", ""},  // nothing running
      {t0 + ":-1", ""},
      {t0 + ":x", ""},
      {t0 + ":nan", ""},
      {t0 + ":inf", ""},
      {t0 + ":1e400", ""},  // overflows to infinity
      {t0 + ":1:2", ""},
      {"-5:1", ""},
      {"nan:1", ""},
      {"inf:1", ""},
      {"x" + t0 + ":1", ""},
      {t0 + "x:1", ""},
      {t0 + ":1.9", slot(T0, 1)},      // a count rounds down
      {t0 + ".4:1", slot(T0 + 1, 1)},  // a time rounds up (later is safe)
      {t0 + ":5000000", slot(T0, kMaxConcurrency)},
      {",," + t0 + ":1,,", slot(T0, 1)},
      {t0 + ":1," + t0 + ":2", slot(T0, 3)},
      {"junk," + t0 + ":2," + std::to_string(T0 + 10) + ":x", slot(T0, 2)},
      {std::to_string(T0 + 10) + ":1," + t0 + ":1", slot(T0) + "," + slot(T0 + 10)},  // out of order
      {std::to_string(T0 + 50'000) + ":2", slot(now, 2)},  // a future start is pulled back to now
      {"1e300:1", slot(now, 1)},                           // far beyond any time: still now
      {"0:1", ""},                                         // long over
  };
  for (const Case& c : cases) {
    INFO("record: \"" << c.text << "\"");
    Engine e = restored(bucket(3), c.text, now);
    CHECK(e.slots_text() == c.restored);
    CHECK(e.writes().empty());  // restore makes no write of its own for it
    // A cleaned record is written alone once the bucket has been quiet.
    CHECK(wake(e) == (c.rewritten ? now + kIdleSlotsWrite : kNoWake));
    // Another write does not carry it: it lists no more slots than are held.
    pause(e, 0, now);
    CHECK(drain(e).slot_records == 0);
    CHECK(wake(e) == (c.rewritten ? now + kIdleSlotsWrite : kNoWake));
    if (c.rewritten) {
      expect_idle_slots_write(e, now + kIdleSlotsWrite);
      CHECK(e.slots_text() == c.restored);  // stored as read
    }
    CHECK(wake(e) == kNoWake);
  }
}

TEST_CASE("a future-dated restored slot is held a full timeout from the restore", "[slots][snapshot]") {
  Engine e = restored(bucket(1), std::to_string(T0 + 50'000) + ":1", T0 + 100);
  CHECK(e.slots_text() == slot(T0 + 100));
  const Ticket x = arrive(e, T0 + 100);
  CHECK(e.actions().empty());
  // The pulled-back entry changed the record: it is written alone first, and
  // frees nothing.
  expect_idle_slots_write(e, T0 + 100 + kIdleSlotsWrite);
  CHECK(wake(e) == T0 + 100 + kTimeout);
  e.tick(T0 + 100 + kTimeout - 1);
  CHECK(actions(e).empty());
  e.tick(T0 + 100 + kTimeout);
  CHECK(actions(e) == std::vector<Action>{start(x)});
}

TEST_CASE("restored slots count toward the cap, so a lower concurrency admits even later", "[slots][snapshot]") {
  Engine e = restored(bucket(2), slot(T0, 3), T0 + 100);  // more than the cap: it was lowered
  CHECK(restored_slots(e, T0 + 100) == 3);
  const Ticket x = arrive(e, T0 + 100);
  CHECK(e.actions().empty());
  e.tick(T0 + kTimeout);
  CHECK(actions(e) == std::vector<Action>{start(x)});
}

TEST_CASE("reconfiguring attemptTimeoutMs moves the restored slots' release", "[slots][snapshot][configure]") {
  Engine e = restored(bucket(1), slot(T0), T0 + 100);
  const Ticket x = arrive(e, T0 + 100);
  CHECK(wake(e) == T0 + kTimeout);
  SECTION("raised: held longer") {
    REQUIRE(e.reconfigure(R"({"attemptTimeoutMs":5000})", T0 + 200).ok());
    e.clear_output();
    CHECK(wake(e) == T0 + 5000);
    e.tick(T0 + 4999);
    CHECK(actions(e).empty());
    e.tick(T0 + 5000);
    CHECK(actions(e) == std::vector<Action>{start(x)});
  }
  SECTION("lowered below the time already passed: freed in the reconfigure's step") {
    REQUIRE(e.reconfigure(R"({"attemptTimeoutMs":50})", T0 + 200).ok());
    CHECK(e.actions() == std::vector<Action>{start(x)});
    CHECK(e.writes() == std::vector<Write>{put_config(), put_grant(T0 + 200, 1), put_slots()});
    // The freed restored entry is gone; x is dated a span of the new timeout later (50 / 4).
    CHECK(e.slots_text() == slot(T0 + 200 + 12));
  }
}

TEST_CASE("a queue blocked by restored slots during a penalty starts at the later of both", "[slots][penalty]") {
  Snapshot snap;
  snap.config_text = bucket(1);
  snap.slots_text = slot(T0);
  snap.forced_until = static_cast<double>(T0 + 3000);
  snap.lift_pending = true;
  Engine e;
  e.restore(snap, T0 + 100);
  const Ticket x = arrive(e, T0 + 100);
  CHECK(e.actions().empty());
  CHECK(wake(e) == T0 + kTimeout);  // the restored slot's release
  e.tick(T0 + kTimeout);            // the slot frees; the penalty still holds
  CHECK(actions(e).empty());
  // Nothing runs: the record without that slot is written alone before the lift.
  expect_idle_slots_write(e, T0 + kTimeout + kIdleSlotsWrite);
  CHECK(wake(e) == T0 + 3000);
  e.tick(T0 + 3000);
  CHECK(actions(e) == std::vector<Action>{start(x)});
}

TEST_CASE("restore_slots streams like restore(snapshot)", "[slots][snapshot]") {
  const std::string record = slot(T0, 2) + ",junk," + slot(T0 + 10);
  Engine whole = restored(bucket(4), record, T0 + 100);
  Engine streamed;
  const std::string text = bucket(4);
  streamed.restore_begin(text, 0, false, T0 + 100);
  streamed.restore_slots(slot(T0, 2));  // any number of calls, between begin and end
  streamed.restore_slots(",junk," + slot(T0 + 10));
  streamed.restore_end();
  CHECK(streamed.slots_text() == whole.slots_text());
  CHECK(stats(streamed, T0 + 100) == stats(whole, T0 + 100));
}

TEST_CASE("a slots record with no config, or outside a restore, is ignored", "[slots][snapshot]") {
  Snapshot snap;
  snap.slots_text = slot(T0);
  Engine none;
  none.restore(snap, T0 + 100);
  CHECK_FALSE(none.configured());
  CHECK(none.slots_text().empty());
  CHECK(wake(none) == kNoWake);

  Engine e = configured(bucket(1));
  e.restore_slots(slot(T0));
  CHECK(e.slots_text().empty());
  CHECK(restored_slots(e, T0 + 1) == 0);
}

TEST_CASE("erase forgets restored slots along with the bucket", "[slots][erase]") {
  Engine e = restored(bucket(2), slot(T0, 2), T0 + 100);
  e.erase(T0 + 200);
  CHECK(e.slots_text().empty());
  CHECK(inspect(e).active() == 0);
  CHECK(wake(e) == kNoWake);
}
