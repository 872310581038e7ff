// Verifies Engine::finished: a caller whose attempt finished while the
// object was down tells the restarted engine, which frees one slot of the
// restored slots record, never a slot an attempt still running needs. The
// identity the callback was handed (attempt_slot) names the attempt and is
// signed with the key of the engine that started it; the record carries
// that key (its writer's entry), so only the writer's attempts free a
// restored slot, each once, and only when the writer could not have handed
// the slot to a later start before it died.
#include <catch2/catch.hpp>

#include <string>

#include "drl/engine.h"
#include "engine_helpers.h"

using namespace drl;
using namespace drl::test;

namespace {

constexpr Millis kTimeout = 60'000;  // long: only finished() frees a slot early
constexpr Millis kSpan = kSlotsCover;
constexpr uint64_t kK0 = 0x0123456789abcdefULL;
constexpr uint64_t kK1 = 0xfedcba9876543210ULL;
const std::string kKeyText = "0123456789abcdeffedcba9876543210";

std::string bucket(int64_t concurrency) {
  return with_timeout(config(1000, 10'000, concurrency, json{{"maxRetries", 0}}), kTimeout);
}

// An object's host: its engine signs identities with `k0`.
struct Object : Host {
  explicit Object(int64_t concurrency, uint64_t k0 = kK0) : Host(bucket(concurrency)) { engine.set_slot_key(k0, kK1); }
  std::string slot_of(Ticket t) {
    auto slot = engine.attempt_slot(t);
    REQUIRE(slot);
    return slot->slot;
  }
};

// The object restarted at `now` on `storage`, with a fresh key of its own.
Engine restarted(const Storage& storage, Millis now, uint64_t k0 = 0x5555) {
  Engine e;
  e.set_slot_key(k0, kK1);
  e.restore(storage.snapshot(), now);
  e.clear_output();
  return e;
}

bool finished(Engine& e, const std::string& slot, double ran_ms, Millis now) {
  auto released = e.finished(slot, ran_ms, now);
  if (!released.ok()) FAIL("finished failed: " << released.error().message);
  return *released;
}

int64_t restored_slots(Engine& e, Millis now) { return stats(e, now)["restoredSlots"].get<int64_t>(); }

}  // namespace

TEST_CASE("a running attempt's slot identity: the attempt, its key, its start and a tag", "[finished]") {
  Object o(2);
  const Ticket a = arrive(o.engine, T0);
  auto mine = o.engine.attempt_slot(a);
  REQUIRE(mine);
  CHECK(mine->timeout_ms == kTimeout);
  CHECK(o.engine.attempt_timeout(a) == kTimeout);
  CHECK(mine->slot.rfind(std::to_string(a) + ".1." + std::to_string(T0) + "." + std::to_string(T0) + ".", 0) == 0);
  CHECK(mine->slot.size() == mine->slot.rfind('.') + 1 + 16);
  // The record is led by its writer's entry: the key, and when it was written.
  o.step();
  CHECK(*o.storage.slots_text == "~" + kKeyText + "@" + std::to_string(T0) + "," + slot(T0 + kSpan));

  SECTION("not running, or no key: none") {
    CHECK(o.engine.attempt_slot(arrive(o.engine, T0)));
    const Ticket queued = arrive(o.engine, T0);
    CHECK_FALSE(o.engine.attempt_slot(queued));
    CHECK_FALSE(o.engine.attempt_timeout(queued));
    Engine plain = configured(bucket(1));
    const Ticket keyless = arrive(plain, T0);
    CHECK_FALSE(plain.attempt_slot(keyless));
    CHECK_FALSE(plain.attempt_timeout(keyless));
  }
  SECTION("a retry is another attempt: another identity") {
    Object r(1);
    Engine& e = r.engine;
    REQUIRE(e.reconfigure(R"({"retry":{"maxRetries":1,"minDelayInMs":100,"maxDelayInMs":100}})", T0).ok());
    const Ticket t = arrive(e, T0);
    const std::string first = r.slot_of(t);
    report(e, t, Report{500, false, std::nullopt, std::nullopt, Failure::Retryable}, T0 + 10);
    e.tick(T0 + 110);
    CHECK(r.slot_of(t) != first);
    CHECK(r.slot_of(t).rfind(std::to_string(t) + ".2.", 0) == 0);
  }
}

TEST_CASE("a restarted engine frees the slot of an attempt that finished during the outage", "[finished][snapshot]") {
  Object o(2);
  const Ticket a = arrive(o.engine, T0);
  const Ticket b = arrive(o.engine, T0);
  const std::string slot_a = o.slot_of(a);
  const std::string slot_b = o.slot_of(b);
  o.step();
  REQUIRE(o.storage.slots_text->find(slot(T0 + kSpan, 2)) != std::string::npos);

  constexpr Millis restart = T0 + 3000;
  Engine e = restarted(o.storage, restart);
  CHECK(restored_slots(e, restart) == 2);
  const Ticket x = arrive(e, restart);
  const Ticket y = arrive(e, restart);
  CHECK(actions(e).empty());

  // a ran 4 s: it ended after the record's every entry.
  CHECK(finished(e, slot_a, 4000, restart + 1000));
  Step st = drain(e);
  CHECK(st.actions == std::vector<Action>{start(x)});
  CHECK(st.slot_records == 1);  // rewritten at once: a second restart does not hold it again
  CHECK(restored_slots(e, restart + 1000) == 1);
  // Said twice (a duplicate, or a replay): nothing more is freed.
  CHECK_FALSE(finished(e, slot_a, 4000, restart + 1000));
  CHECK(actions(e).empty());
  CHECK(restored_slots(e, restart + 1000) == 1);

  // b started in the same millisecond: its own identity frees the other slot.
  CHECK(finished(e, slot_b, 5000, restart + 2000));
  CHECK(actions(e) == std::vector<Action>{start(y)});
  CHECK(restored_slots(e, restart + 2000) == 0);
}

TEST_CASE("the rewritten record holds the freed slot no more after a second restart", "[finished][snapshot]") {
  Object o(2);
  const Ticket a = arrive(o.engine, T0);
  arrive(o.engine, T0);
  const std::string slot_a = o.slot_of(a);
  o.step();
  Host after(bucket(2));  // its storage takes the restarted engine's writes
  after.engine = restarted(o.storage, T0 + 3000);
  after.storage = o.storage;
  CHECK(finished(after.engine, slot_a, 4000, T0 + 3000));
  after.step();
  Engine again = restarted(after.storage, T0 + 3500, 0x7777);
  CHECK(restored_slots(again, T0 + 3500) == 1);
  // The record's writer is now the engine that freed it: the old identity is stale.
  CHECK_FALSE(finished(again, slot_a, 4000, T0 + 3500));
}

TEST_CASE("an attempt ends after the record's latest entry to free a slot: -1, at and +1 ms", "[finished][snapshot]") {
  Object o(1);
  const Ticket a = arrive(o.engine, T0);
  const std::string slot_a = o.slot_of(a);
  o.step();
  // Its entry is dated a cover span after its start: the latest entry.
  Engine e = restarted(o.storage, T0 + 500);
  CHECK_FALSE(finished(e, slot_a, kSpan - 1, T0 + 2000));
  CHECK_FALSE(finished(e, slot_a, kSpan, T0 + 2000));
  CHECK(restored_slots(e, T0 + 2000) == 1);
  CHECK(finished(e, slot_a, kSpan + 1, T0 + 2000));
  CHECK(restored_slots(e, T0 + 2000) == 0);
}

TEST_CASE("an attempt ends after the record was written to free a slot: -1, at and +1 ms", "[finished][snapshot]") {
  // A record written later than its latest entry (a rewrite that rode on
  // another write, long after the attempt it lists started).
  Object o(1);
  const Ticket a = arrive(o.engine, T0);
  const std::string slot_a = o.slot_of(a);
  constexpr Millis written = T0 + 5000;
  Storage storage = o.storage;
  storage.apply(o.engine);
  storage.slots_text = "~" + kKeyText + "@" + std::to_string(written) + "," + slot(T0 + kSpan);
  Engine e = restarted(storage, T0 + 6000);
  REQUIRE(restored_slots(e, T0 + 6000) == 1);
  CHECK_FALSE(finished(e, slot_a, 4999, T0 + 6000));
  CHECK_FALSE(finished(e, slot_a, 5000, T0 + 6000));
  CHECK(finished(e, slot_a, 5001, T0 + 6000));
}

TEST_CASE("an attempt that timed out frees nothing: -1, at and +1 ms", "[finished][snapshot]") {
  for (const Millis offset : {Millis{-1}, Millis{0}, Millis{1}}) {
    Object o(1);
    const Ticket a = arrive(o.engine, T0);
    const std::string slot_a = o.slot_of(a);
    o.step();
    Engine e = restarted(o.storage, T0 + 3000);
    const Millis now = T0 + kTimeout + offset;  // its deadline, by its key
    // Its entry, a span later, is still held until then.
    CHECK(restored_slots(e, now) == 1);
    CHECK(finished(e, slot_a, 4000, now) == (offset < 0));
  }
}

TEST_CASE("a report the writer saw before it died: the slot a later start took stays held", "[finished][snapshot]") {
  // a reports, the object starts b in its place, covered by a's entry (no
  // write), and dies before a's answer leaves: a's caller sees a transport
  // error after its callback finished, and says so. b still runs.
  Object o(1);
  const Ticket a = arrive(o.engine, T0);
  const std::string slot_a = o.slot_of(a);
  o.step();
  const Ticket b = arrive(o.engine, T0 + 10);
  report(o.engine, a, ok(), T0 + 200);
  const Step st = o.step();
  REQUIRE(st.actions == std::vector<Action>{resolve(a), start(b)});
  REQUIRE(st.slot_records == 0);
  Engine e = restarted(o.storage, T0 + 400);
  CHECK_FALSE(finished(e, slot_a, 200, T0 + 400));
  const Ticket x = arrive(e, T0 + 400);
  CHECK(actions(e).empty());
  CHECK(restored_slots(e, T0 + 400) == 1);
  // The slot goes by time, as before: the entry (pulled back to the
  // restart) + timeout.
  e.tick(T0 + 400 + kTimeout - 1);
  CHECK(actions(e).empty());
  e.tick(T0 + 400 + kTimeout);
  CHECK(actions(e) == std::vector<Action>{start(x)});
}

TEST_CASE("the earliest slot at or after the attempt's key goes: a start it covered keeps the later one",
          "[finished][snapshot]") {
  // f's own entry is the later one; c, covered by it alone, starts after
  // the earlier entry's date.
  Object o(2);
  const Ticket a = arrive(o.engine, T0);
  o.step();
  const Ticket f = arrive(o.engine, T0 + 200);
  const std::string slot_f = o.slot_of(f);
  o.step();
  REQUIRE(*o.storage.slots_text ==
          "~" + kKeyText + "@" + std::to_string(T0 + 200) + "," + slot(T0 + kSpan) + "," + slot(T0 + 200 + kSpan));
  report(o.engine, a, ok(), T0 + 300);
  o.step();
  const Ticket c = arrive(o.engine, T0 + 1100);
  const Step st = o.step();
  REQUIRE(st.actions == std::vector<Action>{start(c)});
  REQUIRE(st.slot_records == 0);  // covered by f's entry
  Engine e = restarted(o.storage, T0 + 1300);
  CHECK(finished(e, slot_f, 1500, T0 + 1800));
  CHECK(e.slots_text().find(slot(T0 + kSpan)) == std::string::npos);
  CHECK(e.slots_text().find(slot(T0 + 200 + kSpan)) != std::string::npos);
  CHECK(restored_slots(e, T0 + 1800) == 1);
}

TEST_CASE("an engine that did not restart frees nothing: a live slot goes with its report", "[finished]") {
  Object o(1);
  const Ticket a = arrive(o.engine, T0);
  const std::string slot_a = o.slot_of(a);
  o.step();
  const Ticket x = arrive(o.engine, T0 + 10);
  CHECK_FALSE(finished(o.engine, slot_a, 5000, T0 + 5000));
  CHECK(actions(o.engine).empty());
  CHECK(inspect(o.engine).running() == 1);
  report(o.engine, a, ok(), T0 + 5001);
  CHECK(actions(o.engine) == std::vector<Action>{resolve(a), start(x)});
}

TEST_CASE("stale, altered and made-up identities free nothing, and malformed ones are refused",
          "[finished][snapshot]") {
  Object o(2);
  const Ticket a = arrive(o.engine, T0);
  arrive(o.engine, T0);
  const std::string slot_a = o.slot_of(a);
  o.step();

  SECTION("an older engine's: restored through a record another engine wrote") {
    // The first restart rewrites the record under its own key (a new start).
    Host mid(bucket(3));
    mid.engine = restarted(o.storage, T0 + 2000, 0x9999);
    mid.storage = o.storage;
    REQUIRE(mid.engine.reconfigure(R"({"concurrency":3})", T0 + 2000).ok());
    arrive(mid.engine, T0 + 2000);
    REQUIRE(mid.step().slot_records == 1);
    Engine e = restarted(mid.storage, T0 + 2500);
    CHECK(restored_slots(e, T0 + 2500) == 3);
    CHECK_FALSE(finished(e, slot_a, 4000, T0 + 2500));
    CHECK(restored_slots(e, T0 + 2500) == 3);
  }
  SECTION("altered or made up") {
    Engine e = restarted(o.storage, T0 + 2000);
    std::string later = slot_a;  // the key moved later: the tag no longer matches
    const std::string key = std::to_string(T0);
    later.replace(later.find(key), key.size(), std::to_string(T0 + 1));
    CHECK_FALSE(finished(e, later, 4000, T0 + 2000));
    CHECK_FALSE(finished(e, std::to_string(a) + ".1." + key + "." + key + ".0000000000000000", 4000, T0 + 2000));
    CHECK(restored_slots(e, T0 + 2000) == 2);
  }
  SECTION("a record of an older release names no writer: nothing is freed early") {
    Storage storage = o.storage;
    storage.slots_text = slot(T0 + kSpan, 2);
    Engine e = restarted(storage, T0 + 2000);
    CHECK_FALSE(finished(e, slot_a, 4000, T0 + 2000));
    CHECK(restored_slots(e, T0 + 2000) == 2);
  }
  SECTION("malformed: an InvalidArgument naming what was wrong") {
    Engine e = restarted(o.storage, T0 + 2000);
    for (const std::string bad :
         {"", "x", "1.1.1.1", "1.1.1.1.abc", "1.1.1.1.0123456789abcdef.1", "0.1.1.1.0123456789abcdef"}) {
      auto r = e.finished(bad, 10, T0 + 2000);
      REQUIRE_FALSE(r.ok());
      CHECK(r.error().code == ErrorCode::InvalidArgument);
      CHECK(r.error().message.find("finished(slot)") != std::string::npos);
    }
    for (const double ran : {-1.0, std::nan(""), 1.0 / 0.0}) {
      auto r = e.finished(slot_a, ran, T0 + 2000);
      REQUIRE_FALSE(r.ok());
      CHECK(r.error().code == ErrorCode::InvalidArgument);
      CHECK(r.error().message.find("ranMs") != std::string::npos);
    }
    CHECK(restored_slots(e, T0 + 2000) == 2);
  }
}

TEST_CASE("time going backwards changes nothing: a claim is judged at the latest time seen", "[finished][snapshot]") {
  Object o(1);
  const Ticket a = arrive(o.engine, T0);
  const std::string slot_a = o.slot_of(a);
  o.step();
  Engine e = restarted(o.storage, T0 + 3000);
  e.tick(T0 + kTimeout);  // a's deadline has passed
  CHECK_FALSE(finished(e, slot_a, 4000, T0 + 3000));
}
