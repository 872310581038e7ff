// Verifies gone(ticket): invoking a running attempt's callback failed in
// transport, so its caller is gone. The call settles CallerGone at once (or
// says nothing more if erase already settled it), is never retried, frees its
// slot in the same step, and keeps its grant.
#include <catch2/catch.hpp>

#include "drl/engine.h"
#include "engine_helpers.h"

using namespace drl;
using namespace drl::test;

namespace {

constexpr Millis kTimeout = 1000;

std::string bucket(int64_t concurrency, const json& retry = {{"maxRetries", 3}, {"minDelayInMs", 100}}) {
  return with_timeout(config(10, 10'000, concurrency, retry), kTimeout);
}

Action caller_gone(Ticket t) { return reject(t, ErrorCode::CallerGone); }

void require_unknown(Engine& e, const Status& st) {
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().code == ErrorCode::UnknownTicket);
  CHECK(st.error().message.find(" for ticket ") != std::string::npos);
  CHECK(e.writes().empty());
  CHECK(e.actions().empty());
}

}  // namespace

TEST_CASE("gone settles the running call CallerGone and starts the head of the queue in the same step", "[gone]") {
  Engine e = configured(bucket(1));
  const Ticket a = arrive(e, T0);
  const Ticket b = arrive(e, T0 + 5);
  e.clear_output();
  CHECK(inspect(e).queued() == 1);

  gone(e, a, T0 + 10);
  const Step s = drain(e);
  CHECK(s.actions == std::vector<Action>{caller_gone(a), start(b)});
  CHECK(s.writes == std::vector<Write>{put_grant(T0 + 10, 1)});
  // b starts within the cover span of the record a's start wrote, and no
  // more run than it lists: that record still covers b, so none is written.
  CHECK(s.slot_records == 0);
  CHECK(e.slots_text() == slot(T0 + cover_span(kTimeout)));
  CHECK(inspect(e).active() == 1);
  CHECK(inspect(e).running() == 1);
  CHECK(inspect(e).queued() == 0);
  CHECK(wake(e) == T0 + 10 + kTimeout);  // b's deadline; a's is gone with it
}

TEST_CASE("gone with nobody queued frees the slot and writes nothing of its own", "[gone]") {
  Engine e = configured(bucket(2));
  const Ticket a = arrive(e, T0);
  e.clear_output();
  gone(e, a, T0 + 10);
  const Step s = drain(e);
  CHECK(s.actions == std::vector<Action>{caller_gone(a)});
  CHECK(s.writes.empty());
  CHECK(s.slot_records == 0);  // the release rides on the next write
  CHECK(inspect(e).active() == 0);
  CHECK(e.slots_text() == slot(T0 + cover_span(kTimeout)));  // as written at a's start
  // No deadline is left to wake for: only the quiet bucket's slots record,
  // written alone once no other write carried it.
  CHECK(wake(e) == T0 + 10 + kIdleSlotsWrite);
  e.tick(T0 + 10 + kIdleSlotsWrite - 1);
  CHECK(drain(e).slot_records == 0);
  e.tick(T0 + 10 + kIdleSlotsWrite);
  const Step idle = drain(e);
  CHECK(idle.actions.empty());
  CHECK(idle.writes.empty());
  CHECK(idle.slot_records == 1);
  CHECK(e.slots_text().empty());
  CHECK(wake(e) == kNoWake);
}

TEST_CASE("a gone call is never retried and its grant stays counted", "[gone]") {
  // The transport failed after the grant was stored: the work may have left.
  Engine e = configured(bucket(2, {{"maxRetries", 3}, {"minDelayInMs", 0}}));
  const Ticket a = arrive(e, 4, T0);
  e.clear_output();
  gone(e, a, T0 + 1);
  CHECK(actions(e) == std::vector<Action>{caller_gone(a)});
  CHECK(inspect(e).used() == 4);
  for (Millis t = T0 + 100; t < T0 + 10'000; t += 1000) {
    e.tick(t);
    CHECK(actions(e).empty());
  }
  const Ticket b = arrive(e, 7, T0 + 9'999);  // 4 + 7 > 10: waits for a's grant to expire
  CHECK(e.actions().empty());
  CHECK(wake(e) == T0 + 10'000);
  e.tick(T0 + 10'000);
  CHECK(actions(e) == std::vector<Action>{start(b)});
}

TEST_CASE("gone on a retry attempt settles the call and frees the slot it held through the backoff", "[gone]") {
  Engine e = configured(bucket(1));
  const Ticket a = arrive(e, T0);
  report(e, a, failed(Failure::Retryable, 503), T0 + 10);  // due at T0 + 110
  const Ticket b = arrive(e, T0 + 20);
  e.clear_output();
  e.tick(T0 + 110);
  CHECK(actions(e) == std::vector<Action>{start(a, 2)});
  gone(e, a, T0 + 120);
  CHECK(actions(e) == std::vector<Action>{caller_gone(a), start(b)});
}

TEST_CASE("gone for a ticket without a running attempt is UnknownTicket and changes nothing", "[gone]") {
  Engine e = configured(bucket(1, {{"maxRetries", 2}, {"minDelayInMs", 100}}));
  const Ticket done = arrive(e, T0);
  report(e, done, ok(), T0);
  const Ticket backing_off = arrive(e, T0);
  report(e, backing_off, failed(Failure::Retryable, 503), T0);  // holds the only slot
  const Ticket queued = arrive(e, T0);
  e.clear_output();
  const size_t active = inspect(e).active();

  SECTION("a ticket never issued") { require_unknown(e, e.gone(999, T0 + 1)); }
  SECTION("a ticket that already settled") { require_unknown(e, e.gone(done, T0 + 1)); }
  SECTION("a call between attempts") { require_unknown(e, e.gone(backing_off, T0 + 1)); }
  SECTION("a retry that is due but not started") {
    pause(e, 1000, T0 + 1);  // the retry comes due but cannot start
    e.tick(T0 + 200);
    e.clear_output();
    require_unknown(e, e.gone(backing_off, T0 + 201));
  }
  SECTION("a queued caller") { require_unknown(e, e.gone(queued, T0 + 1)); }
  SECTION("a ticket already gone") {
    e.tick(T0 + 100);
    CHECK(actions(e) == std::vector<Action>{start(backing_off, 2)});
    gone(e, backing_off, T0 + 101);
    CHECK(actions(e) == std::vector<Action>{caller_gone(backing_off), start(queued)});
    require_unknown(e, e.gone(backing_off, T0 + 102));
    require_unknown(e, e.report(backing_off, ok(), T0 + 102));
    require_unknown(e, e.threw(backing_off, T0 + 102));
  }
  CHECK(inspect(e).active() == active);
}

TEST_CASE("gone with a clock behind the engine's acts at the latest time seen", "[gone]") {
  Engine e = configured(bucket(1));
  const Ticket a = arrive(e, T0);
  const Ticket b = arrive(e, T0);
  e.tick(T0 + 500);
  e.clear_output();
  gone(e, a, T0 + 100);
  const Step s = drain(e);
  CHECK(s.actions == std::vector<Action>{caller_gone(a), start(b)});
  CHECK(s.writes == std::vector<Write>{put_grant(T0 + 500, 1)});
  CHECK(wake(e) == T0 + 500 + kTimeout);
}

TEST_CASE("gone for a cancelled running call settles it CallerGone at once", "[gone]") {
  Engine e = configured(bucket(1));
  const Ticket a = arrive(e, T0);
  const Ticket b = arrive(e, T0);
  e.clear_output();
  cancel(e, a, T0 + 1);
  CHECK(actions(e).empty());  // a cancelled running call keeps its slot...
  gone(e, a, T0 + 2);
  // ... until its transport fails: then nothing is running for it.
  CHECK(actions(e) == std::vector<Action>{caller_gone(a), start(b)});
}

TEST_CASE("gone after erase says nothing more and frees the slot", "[gone][erase]") {
  Engine e = configured(bucket(1));
  const Ticket a = arrive(e, T0);
  e.clear_output();
  e.erase(T0 + 1);
  CHECK(actions(e) == std::vector<Action>{reject(a, ErrorCode::NoSuchLimiter)});
  gone(e, a, T0 + 2);
  const Step s = drain(e);
  CHECK(s.actions.empty());
  CHECK(s.writes.empty());
  CHECK(s.slot_records == 0);
  CHECK(inspect(e).running() == 0);
  CHECK(inspect(e).active() == 0);
  CHECK(wake(e) == kNoWake);
}

TEST_CASE("gone past the deadline, before the timer fired, settles CallerGone", "[gone][timeout]") {
  Engine e = configured(bucket(1));
  const Ticket a = arrive(e, T0);
  const Ticket b = arrive(e, T0);
  e.clear_output();
  gone(e, a, T0 + kTimeout + 5);
  CHECK(actions(e) == std::vector<Action>{caller_gone(a), start(b)});
  CHECK(wake(e) == T0 + kTimeout + 5 + kTimeout);
}

TEST_CASE("gone during a penalty frees the slot but the queue waits for the lift", "[gone][penalty]") {
  Engine e = configured(bucket(1));
  const Ticket a = arrive(e, T0);
  const Ticket b = arrive(e, T0);
  pause(e, 3000, T0 + 10);
  e.clear_output();
  gone(e, a, T0 + 20);
  CHECK(actions(e) == std::vector<Action>{caller_gone(a)});
  CHECK(inspect(e).active() == 0);
  // Nothing runs: the slots record is written alone first, and starts nobody.
  expect_idle_slots_write(e, T0 + 20 + kIdleSlotsWrite);
  CHECK(wake(e) == T0 + 3010);
  e.tick(T0 + 3009);
  CHECK(actions(e).empty());
  e.tick(T0 + 3010);
  CHECK(actions(e) == std::vector<Action>{start(b)});
}
