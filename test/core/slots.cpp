// Verifies the slots record: every start writes it (PutSlots) in the same
// step as its grant; releases only mark it, riding on the next write, or,
// once no attempt runs, written alone kIdleSlotsWrite after the bucket went
// quiet; and a restart restores it as slots held until start +
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

// A bucket that never binds, so only slots decide who starts.
std::string bucket(int64_t concurrency, Millis timeout = kTimeout,
                   const json& retry = {{"maxRetries", 2}, {"minDelayInMs", 100}, {"maxDelayInMs", 100}}) {
  return with_timeout(config(1000, kWindow, concurrency, retry), timeout);
}

// "at:count" for a time relative to T0.
std::string slot(Millis at, int64_t count = 1) { return std::to_string(at) + ":" + std::to_string(count); }

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

TEST_CASE("every start writes the slots record in the same step as its grant", "[slots]") {
  Engine e = configured(bucket(3));
  CHECK(e.slots_text().empty());
  const Ticket a = arrive(e, T0);
  CHECK(e.writes() == std::vector<Write>{put_grant(T0, 1), put_slots()});
  CHECK(e.slots_text() == slot(T0));
  e.clear_output();

  arrive(e, T0);  // the same ms: one grant row, one record entry
  CHECK(e.writes() == std::vector<Write>{put_grant(T0, 2), put_slots()});
  CHECK(e.slots_text() == slot(T0, 2));
  e.clear_output();

  arrive(e, T0 + 7);
  CHECK(e.writes() == std::vector<Write>{put_grant(T0 + 7, 1), put_slots()});
  CHECK(e.slots_text() == slot(T0, 2) + "," + slot(T0 + 7));
  e.clear_output();

  // A retry's start is a start like any other.
  report(e, a, failed(Failure::Retryable, 503), T0 + 10);  // due at T0 + 110
  e.clear_output();
  e.tick(T0 + 110);
  CHECK(e.actions() == std::vector<Action>{start(a, 2)});
  CHECK(e.writes() == std::vector<Write>{put_grant(T0 + 110, 1), put_slots()});
  CHECK(e.slots_text() == slot(T0) + "," + slot(T0 + 7) + "," + slot(T0 + 110));
}

TEST_CASE("starts in one step share one record, written after their grants", "[slots]") {
  Engine e = configured(bucket(1));
  arrive(e, T0);
  arrive(e, T0);
  arrive(e, T0);
  e.clear_output();
  REQUIRE(e.reconfigure(R"({"concurrency":3})", T0 + 5).ok());
  CHECK(started(e.actions()).size() == 2);
  CHECK(e.writes() ==
        std::vector<Write>{put_config(), put_grant(T0 + 5, 1), put_grant(T0 + 5, 2), put_slots()});
  CHECK(e.slots_text() == slot(T0) + "," + slot(T0 + 5, 2));
}

TEST_CASE("a release writes nothing of its own, the record rides on the next write", "[slots]") {
  // A window shorter than the timeout, so an expiry can be the next write.
  Engine e = configured(with_timeout(config(1000, 500, 3, {{"maxRetries", 0}}), 5000));
  const Ticket a = arrive(e, T0);
  arrive(e, T0 + 100);
  e.clear_output();
  CHECK(e.slots_text() == slot(T0) + "," + slot(T0 + 100));

  report(e, a, ok(), T0 + 200);
  Step s = drain(e);
  CHECK(s.writes.empty());
  CHECK(s.slot_records == 0);
  CHECK(e.slots_text() == slot(T0 + 100));  // what the next record will say

  SECTION("a start") {
    arrive(e, T0 + 300);
    CHECK(e.writes() == std::vector<Write>{put_grant(T0 + 300, 1), put_slots()});
  }
  SECTION("a pause") {
    pause(e, 50, T0 + 300);
    CHECK(e.writes() == std::vector<Write>{put_penalty(T0 + 350, true), put_slots()});
  }
  SECTION("a reconfigure") {
    REQUIRE(e.reconfigure(R"({"concurrency":4})", T0 + 300).ok());
    CHECK(e.writes() == std::vector<Write>{put_config(), put_slots()});
  }
  SECTION("an expiry") {
    e.tick(T0 + 500);
    CHECK(e.writes() == std::vector<Write>{delete_through(T0), put_slots()});
  }
  e.clear_output();
  // Recorded now: a write with no slot change since carries no record.
  pause(e, 0, T0 + 400);
  s = drain(e);
  CHECK(s.slot_records == 0);
  CHECK_FALSE(s.writes.empty());
}

TEST_CASE("every kind of release marks the record, none writes it alone", "[slots]") {
  Engine e = configured(bucket(2, kTimeout, {{"maxRetries", 1}, {"minDelayInMs", 100}, {"maxDelayInMs", 100}}));
  const Ticket a = arrive(e, T0);
  e.clear_output();
  SECTION("a report") { report(e, a, ok(), T0 + 10); }
  SECTION("a report whose retry waits between attempts (the call keeps its slot, but runs nothing)") {
    report(e, a, failed(Failure::Retryable, 503), T0 + 10);
    CHECK(inspect(e).active() == 1);
  }
  SECTION("a throw") { threw(e, a, T0 + 10); }
  SECTION("gone") { gone(e, a, T0 + 10); }
  SECTION("a timeout") { e.tick(T0 + kTimeout); }
  SECTION("a cancelled call's report") {
    cancel(e, a, T0 + 5);
    report(e, a, ok(), T0 + 10);
  }
  Step s = drain(e);
  CHECK(s.writes.empty());
  CHECK(s.slot_records == 0);
  CHECK(e.slots_text().empty());

  pause(e, 0, T0 + kTimeout + 1);
  s = drain(e);
  CHECK(s.slot_records == 1);
  CHECK_FALSE(s.writes.empty());
}

TEST_CASE("a cancelled running call stays in the record: its work is in flight", "[slots]") {
  Engine e = configured(bucket(1));
  const Ticket a = arrive(e, T0);
  e.clear_output();
  cancel(e, a, T0 + 1);
  pause(e, 0, T0 + 2);
  const Step s = drain(e);
  CHECK(s.slot_records == 0);  // nothing changed
  CHECK(e.slots_text() == slot(T0));
}

TEST_CASE("slots_text lists what may be running by start time, ascending, counts merged", "[slots]") {
  Engine e = configured(bucket(6));
  const Ticket a = arrive(e, T0 + 30);
  const Ticket b = arrive(e, T0 + 30);
  const Ticket c = arrive(e, T0 + 40);
  arrive(e, T0 + 20);  // a clock behind the engine's: started at the latest time seen
  e.clear_output();
  CHECK(e.slots_text() == slot(T0 + 30, 2) + "," + slot(T0 + 40, 2));
  report(e, b, ok(), T0 + 50);
  CHECK(e.slots_text() == slot(T0 + 30) + "," + slot(T0 + 40, 2));
  threw(e, c, T0 + 50);  // between attempts: holds a slot, runs nothing
  CHECK(e.slots_text() == slot(T0 + 30) + "," + slot(T0 + 40));
  gone(e, a, T0 + 60);
  CHECK(e.slots_text() == slot(T0 + 40));
  e.tick(T0 + 150);  // c's retry
  CHECK(e.slots_text() == slot(T0 + 40) + "," + slot(T0 + 150));
  e.tick(T0 + 40 + kTimeout);  // the fourth caller's attempt times out
  CHECK(e.slots_text() == slot(T0 + 150));
}

TEST_CASE("a long window's grid dates the record entry with the grant, never earlier than the start",
          "[slots]") {
  // Windows over kMaxLogEntries ms record takes at the end of their grid cell.
  const int64_t window = 3 * kMaxLogEntries;
  Engine e = configured(with_timeout(config(10, window, 2), kTimeout));
  arrive(e, T0 + 1);
  const Write grant = writes_of(e).front();
  e.clear_output();
  CHECK(grant.at >= T0 + 1);
  CHECK(e.slots_text() == slot(grant.at));
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
  REQUIRE(before.storage.slots_text == slot(T0) + "," + slot(T0 + 10) + "," + slot(T0 + 20));

  // The object restarts while all three callbacks still run at the upstream.
  Engine after;
  after.restore(before.storage.snapshot(), T0 + 100);
  CHECK(after.writes().empty());  // nothing to repair
  CHECK(after.slots_text() == *before.storage.slots_text);
  json s = stats(after, T0 + 100);
  CHECK(s["restoredSlots"] == 3);
  CHECK(s["active"] == 3);
  CHECK(s["running"] == 0);

  const Ticket x = arrive(after, T0 + 100);
  const Ticket y = arrive(after, T0 + 100);
  const Ticket z = arrive(after, T0 + 100);
  CHECK(after.actions().empty());
  CHECK(wake(after) == T0 + kTimeout);  // the first restored slot's release

  after.tick(T0 + kTimeout - 1);
  CHECK(drain(after).actions.empty());
  after.tick(T0 + kTimeout);
  Step st = drain(after);
  CHECK(st.actions == std::vector<Action>{start(x)});
  CHECK(st.writes == std::vector<Write>{put_grant(T0 + kTimeout, 1)});
  CHECK(st.slot_records == 1);
  CHECK(after.slots_text() == slot(T0 + 10) + "," + slot(T0 + 20) + "," + slot(T0 + kTimeout));
  CHECK(wake(after) == T0 + 10 + kTimeout);

  after.tick(T0 + 10 + kTimeout - 1);
  CHECK(drain(after).actions.empty());
  after.tick(T0 + 10 + kTimeout);
  CHECK(drain(after).actions == std::vector<Action>{start(y)});
  after.tick(T0 + 20 + kTimeout);
  CHECK(drain(after).actions == std::vector<Action>{start(z)});
  s = stats(after, T0 + 20 + kTimeout);
  CHECK(s["restoredSlots"] == 0);
  CHECK(s["active"] == kCap);
  CHECK(s["running"] == kCap);
  // Now only running attempts block the queue: their deadlines are the wake.
  arrive(after, T0 + 20 + kTimeout);
  CHECK(after.actions().empty());
  CHECK(wake(after) == T0 + 2 * kTimeout);
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
  Engine e = restored(bucket(5), slot(T0) + "," + slot(T0 + 10), T0 + 100);
  CHECK(e.writes().empty());
  CHECK(wake(e) == kNoWake);
  pause(e, 0, T0 + 200);  // the restored record is intact: the next write does not rewrite it
  Step s = drain(e);
  CHECK_FALSE(s.writes.empty());
  CHECK(s.slot_records == 0);
  CHECK(e.slots_text() == slot(T0) + "," + slot(T0 + 10));
  e.tick(T0 + kTimeout);
  s = drain(e);
  CHECK(s.writes.empty());
  CHECK(s.slot_records == 0);
  CHECK(e.slots_text() == slot(T0 + 10));
  CHECK(wake(e) == T0 + kTimeout + kIdleSlotsWrite);  // unless a write carries it first
  pause(e, 0, T0 + kTimeout + 1);
  s = drain(e);
  CHECK_FALSE(s.writes.empty());
  CHECK(s.slot_records == 1);
  CHECK(wake(e) == kNoWake);  // carried: no idle write left to make
}

TEST_CASE("a restored slot and a live one started in the same ms share one record entry", "[slots][snapshot]") {
  Engine e = restored(bucket(3), slot(T0 + 100), T0 + 100);
  arrive(e, T0 + 100);
  CHECK(e.slots_text() == slot(T0 + 100, 2));
  json s = stats(e, T0 + 100);
  CHECK(s["restoredSlots"] == 1);
  CHECK(s["active"] == 2);
  CHECK(s["running"] == 1);
}

TEST_CASE("restored slots survive a second restart before anything was written", "[slots][snapshot]") {
  Host before(bucket(2));
  arrive(before.engine, T0);
  arrive(before.engine, T0 + 10);
  before.step();
  Storage storage = before.storage;

  Engine second;
  second.restore(storage.snapshot(), T0 + 100);
  storage.apply(second);
  second.clear_output();
  CHECK(storage.slots_text == before.storage.slots_text);  // nothing written yet

  // Had it crashed now, the record would still hold both.
  Engine third;
  third.restore(storage.snapshot(), T0 + 200);
  CHECK(restored_slots(third, T0 + 200) == 2);
  arrive(third, T0 + 200);
  CHECK(third.actions().empty());

  // Once rewritten, the record still holds them: restored slots are in it.
  pause(second, 0, T0 + 300);
  storage.apply(second);
  second.clear_output();
  CHECK(storage.slots_text == slot(T0) + "," + slot(T0 + 10));
  Engine fourth;
  fourth.restore(storage.snapshot(), T0 + 400);
  CHECK(restored_slots(fourth, T0 + 400) == 2);
}

TEST_CASE("a damaged slots record is read on the safe side", "[slots][snapshot]") {
  constexpr Millis now = T0 + 100;
  struct Case {
    std::string text;
    std::string restored;  // slots_text() after the restore
    bool rewritten = true;  // normalising changed it, so it is written again
  };
  const std::string t0 = std::to_string(T0);
  const std::vector<Case> cases = {
      {"", "", false},  // no slots at all: intact, nothing to rewrite
      {"garbage", ""},
      {",,,", ""},
      {":1", ""},
      {t0, ""},                                   // no count
      {t0 + ":", ""},                             // empty count
      {t0 + ":0", ""},                            // nothing running
      {t0 + ":-1", ""},
      {t0 + ":x", ""},
      {t0 + ":nan", ""},
      {t0 + ":inf", ""},
      {t0 + ":1e400", ""},                        // overflows to infinity
      {t0 + ":1:2", ""},
      {"-5:1", ""},
      {"nan:1", ""},
      {"inf:1", ""},
      {"x" + t0 + ":1", ""},
      {t0 + "x:1", ""},
      {t0 + ":1.9", slot(T0, 1)},                 // a count rounds down
      {t0 + ".4:1", slot(T0 + 1, 1)},             // a time rounds up (later is safe)
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
    // A cleaned record is written alone once the bucket has been quiet...
    CHECK(wake(e) == (c.rewritten ? now + kIdleSlotsWrite : kNoWake));
    // ... unless the next write carries it first.
    pause(e, 0, now);
    CHECK(drain(e).slot_records == (c.rewritten ? 1u : 0u));
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
    CHECK(e.slots_text() == slot(T0 + 200));
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
  e.tick(T0 + kTimeout);  // the slot frees; the penalty still holds
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
