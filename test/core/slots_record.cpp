// The slots record on its own (core/src/slots_record.h): when a step must
// write it, what it lists, and what a restore holds, at -1, at and +1 ms.
#include "slots_record.h"

#include <catch2/catch.hpp>

using namespace drl;
using namespace drl::internal;

namespace {
constexpr Millis kTimeout = 60'000;
constexpr Millis kSpan = 1000;
}  // namespace

TEST_CASE("slots record: a start the record does not cover is written in its own step", "[slots_record]") {
  SlotsRecord r;
  r.started(100);
  CHECK(r.step(100, kSpan, 1, false) == SlotsRecord::Write);
  r.write(100, kSpan);
  CHECK(r.text() == "1100:1");
  r.started(1100);                                             // covered: the entry is dated no earlier than it
  CHECK(r.step(1100, kSpan, 2, false) == SlotsRecord::Write);  // but it lists one slot, two run
  r.write(1100, kSpan);
  r.ended(100);
  r.started(1101);  // two run again, one entry at 1101 +: 2100 covers 1101
  CHECK(r.step(1101, kSpan, 2, false) == SlotsRecord::Keep);
  CHECK(r.running_text() == "1100:1,1101:1");
}

TEST_CASE("slots record: a released slot rides on a storing step at most once a span", "[slots_record]") {
  SlotsRecord r;
  r.started(0);
  r.started(0);
  REQUIRE(r.step(0, kSpan, 2, true) == SlotsRecord::Write);
  r.write(0, kSpan);
  r.ended(0);
  CHECK(r.step(kSpan - 1, kSpan, 1, true) == SlotsRecord::Keep);  // within the span
  CHECK(r.step(kSpan, kSpan, 1, false) == SlotsRecord::Keep);     // nothing stored anyway
  CHECK(r.step(kSpan, kSpan, 1, true) == SlotsRecord::Write);
  r.write(kSpan, kSpan);
  CHECK(r.text() == "1000:1");
}

TEST_CASE("slots record: once nothing runs, it is written alone kIdleSlotsWriteMs later", "[slots_record]") {
  SlotsRecord r;
  r.started(0);
  REQUIRE(r.step(0, kSpan, 1, true) == SlotsRecord::Write);
  r.write(0, kSpan);
  r.ended(0);
  CHECK(r.step(10, kSpan, 0, false) == SlotsRecord::Keep);
  REQUIRE(r.write_due());
  CHECK(*r.write_due() == 10 + kIdleSlotsWriteMs);
  CHECK(r.step(10 + kIdleSlotsWriteMs - 1, kSpan, 0, false) == SlotsRecord::Keep);
  CHECK(r.step(10 + kIdleSlotsWriteMs, kSpan, 0, false) == SlotsRecord::Write);
  r.write(10 + kIdleSlotsWriteMs, kSpan);
  CHECK(r.text().empty());
  CHECK_FALSE(r.write_due());
}

TEST_CASE("slots record: a restored slot is held until its start plus the timeout", "[slots_record]") {
  SlotsRecord r;
  CHECK(r.restore("1000:2,3000:1", 5000, kTimeout) == 3);
  CHECK(r.restored_held() == 3);
  CHECK(r.first_restored_free(kTimeout) == 1000 + kTimeout);
  CHECK(r.free_expired(1000 + kTimeout - 1, kTimeout) == 0);
  CHECK(r.free_expired(1000 + kTimeout, kTimeout) == 2);
  CHECK(r.free_expired(3000 + kTimeout + 1, kTimeout) == 1);
  CHECK(r.restored_held() == 0);
}

TEST_CASE("slots record: a restore skips damage, caps counts and pulls the future back", "[slots_record]") {
  SlotsRecord r;
  CHECK(r.restore("x,5:abc,-1:2,9000:1,100:1e12,7:0", 5000, kTimeout) == 1 + static_cast<int64_t>(kMaxConcurrency));
  CHECK(r.running_text() == "100:" + std::to_string(kMaxConcurrency) + ",5000:1");
  // Normalised: the next step rewrites it even with nothing running.
  CHECK(r.step(5000, kSpan, 0, false) == SlotsRecord::Keep);
  CHECK(r.write_due());
  SlotsRecord exact;
  CHECK(exact.restore("100:1", 5000, kTimeout) == 1);
  CHECK(exact.step(5000, kSpan, 0, false) == SlotsRecord::Keep);
  CHECK_FALSE(exact.write_due());  // restored exactly as written: left alone
  SlotsRecord gone;
  CHECK(gone.restore("100:1", 100 + kTimeout, kTimeout) == 0);  // at its timeout: no longer running
}

TEST_CASE("slots record: a finished identity frees its restored slot once, only under its writer's key",
          "[slots_record]") {
  const SlotKey key{1, 2};
  SlotsRecord before;
  before.set_key(key);
  before.started(1000);
  REQUIRE(before.step(1000, kSpan, 1, true) == SlotsRecord::Write);
  before.write(1000, kSpan);
  SlotIdentity id{7, 1, 1000, 1000, 0};
  id.tag = slot_tag(key, id);

  SlotsRecord after;
  REQUIRE(after.restore(before.text(), 3000, kTimeout) == 1);
  SlotIdentity forged = id;
  forged.tag ^= 1;
  CHECK_FALSE(after.release_finished(forged, 2500, 3000, kTimeout));
  CHECK_FALSE(after.release_finished(id, kSpan, 3000, kTimeout));  // ended by the record's own entry: no news
  CHECK(after.release_finished(id, kSpan + 1, 3000, kTimeout));
  CHECK(after.restored_held() == 0);
  CHECK_FALSE(after.release_finished(id, kSpan + 1, 3000, kTimeout));  // once
  CHECK(after.step(3000, kSpan, 0, false) == SlotsRecord::Write);      // rewritten at once
}

// Verifies the identity's text, written in place for every attempt: each
// number in decimal with no padding (0 and the largest exact 2^53 - 1
// included), the tag in 16 hex digits with its leading zeros, and that
// parsing it gives back the same identity.
TEST_CASE("slot identity: the text of an identity, at its smallest and largest numbers, parses back",
          "[slots_record]") {
  const uint64_t max_exact = (uint64_t{1} << 53) - 1;
  const SlotIdentity small{1, 1, 0, 0, 0};
  CHECK(slot_identity_text(small) == "1.1.0.0.0000000000000000");
  const SlotIdentity large{max_exact, max_exact, static_cast<int64_t>(max_exact), static_cast<int64_t>(max_exact),
                           0xfedcba9876543210ULL};
  CHECK(slot_identity_text(large) ==
        "9007199254740991.9007199254740991.9007199254740991.9007199254740991.fedcba9876543210");
  const SlotIdentity typical{7, 2, 1767225600000, 1767225600005, 0x0f2c3a1b4d5e6f70ULL};
  CHECK(slot_identity_text(typical) == "7.2.1767225600000.1767225600005.0f2c3a1b4d5e6f70");
  for (const SlotIdentity& id : {small, large, typical}) {
    const auto parsed = parse_slot_identity(slot_identity_text(id));
    REQUIRE(parsed);
    CHECK(parsed->ticket == id.ticket);
    CHECK(parsed->attempt == id.attempt);
    CHECK(parsed->key_at == id.key_at);
    CHECK(parsed->started == id.started);
    CHECK(parsed->tag == id.tag);
  }
  CHECK(slot_key_text(SlotKey{1, 0xabc}) == "00000000000000010000000000000abc");
}
