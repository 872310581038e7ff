// A child engine of a lease tree (drl::Engine::make_lease_child): its calls
// start only when its leases serve them, it asks the root through Exchange
// actions, and it reads a use when its callback leaves.
#include <catch2/catch.hpp>

#include "drl/engine.h"
#include "lease_wire.h"

using drl::ActionKind;
using drl::Engine;
using drl::Ticket;
using drl::internal::Exchange;
using drl::internal::LeaseGrant;
using drl::internal::read_exchange;
using drl::internal::Refusal;
using drl::internal::write_grant;

namespace {

constexpr const char* kConfig = R"({"bucket":{"limitPerWindow":100,"windowInMs":1000},"concurrency":10,)"
                                R"("attemptTimeoutMs":1000})";

Engine child(int64_t now = 0, const char* setup = R"({"child":2,"incarnation":1,"retryMs":300,"stockMs":0})") {
  Engine e;
  REQUIRE(e.configure(kConfig, now).ok());
  REQUIRE(e.make_lease_child(setup, now).ok());
  e.clear_output();
  return e;
}

std::vector<Ticket> starts(const Engine& e) {
  std::vector<Ticket> out;
  for (const drl::Action& a : e.actions()) {
    if (a.kind == ActionKind::Start) out.push_back(a.ticket);
  }
  return out;
}

// The exchange the step asked to send, if any.
std::optional<Exchange> sent(const Engine& e) {
  for (const drl::Action& a : e.actions()) {
    if (a.kind != ActionKind::Exchange) continue;
    std::string error;
    auto ex = read_exchange(e.lease_exchange(), error);
    INFO(error);
    REQUIRE(ex);
    return ex;
  }
  return std::nullopt;
}

std::string grant(const Exchange& ex, uint64_t lease_id, int64_t units, int64_t slots, int64_t duration) {
  LeaseGrant g;
  g.child = ex.child;
  g.incarnation = ex.incarnation;
  g.seq = ex.seq;
  g.lease_id = lease_id;
  g.units = {units};
  g.slots = slots;
  g.duration_ms = duration;
  return write_grant(g);
}

// The next exchange that closes a lease: this step's, or a later wake's;
// with the reading it was sent at. An exchange that only asks is refused
// (nothing free), as a root with nothing to lend would.
std::pair<Exchange, drl::Millis> next_close(Engine& e, drl::Millis now) {
  for (int i = 0; i < 20; ++i) {
    const auto ex = sent(e);
    if (ex && !ex->closes.empty()) return {*ex, now};
    e.clear_output();
    if (ex) {
      LeaseGrant refusal;
      refusal.child = ex->child;
      refusal.incarnation = ex->incarnation;
      refusal.seq = ex->seq;
      refusal.refusal = Refusal::kNothingFree;
      refusal.retry_in_ms = 10'000;
      REQUIRE(e.lease_reply(write_grant(refusal), now).ok());
      continue;
    }
    const auto wake = e.next_wake();
    REQUIRE(wake);
    now = *wake;
    e.tick(now);
  }
  FAIL("no close within 20 wakes");
  return {};
}

}  // namespace

TEST_CASE("lease child: with no lease a call queues and the child asks the root") {
  Engine e = child();
  *e.arrive(2, 10);
  CHECK(starts(e).empty());
  const auto ex = sent(e);
  REQUIRE(ex);
  CHECK(ex->child == 2);
  CHECK(ex->incarnation == 1);
  CHECK(ex->seq == 1);
  REQUIRE(ex->demand.size() == 1);
  CHECK(ex->demand[0].units == std::vector<int64_t>{2});
  CHECK(ex->demand[0].slots == 1);
  e.clear_output();
  // One exchange at a time: a second caller waits for the reply, and an
  // unanswered exchange goes again unchanged after retryMs (300).
  *e.arrive(3, 20);
  CHECK(!sent(e));
  e.tick(309);
  CHECK(!sent(e));
  e.tick(310);
  const auto again = sent(e);
  REQUIRE(again);
  CHECK(again->seq == 1);
  CHECK(again->demand[0].units == std::vector<int64_t>{2});
}

TEST_CASE("lease child: a grant starts exactly what it covers, in queue order") {
  Engine e = child();
  std::vector<Ticket> t;
  for (int i = 0; i < 4; ++i) t.push_back(*e.arrive(1, 10));
  const auto ex = sent(e);
  REQUIRE(ex);
  e.clear_output();
  REQUIRE(e.lease_reply(grant(*ex, 7, 3, 3, 500), 20).ok());
  CHECK(starts(e) == std::vector<Ticket>{t[0], t[1], t[2]});
  e.clear_output();
  // The fourth waits for units, not for a slot: a report frees a slot only.
  REQUIRE(e.report(t[0], drl::Report{200}, 30).ok());
  CHECK(starts(e).empty());
}

TEST_CASE("lease child: the slot limits starts too, and goes back when the attempt ends") {
  Engine e = child();
  std::vector<Ticket> t;
  for (int i = 0; i < 3; ++i) t.push_back(*e.arrive(1, 10));
  const auto ex = sent(e);
  REQUIRE(ex);
  e.clear_output();
  REQUIRE(e.lease_reply(grant(*ex, 7, 10, 1, 5000), 20).ok());
  CHECK(starts(e) == std::vector<Ticket>{t[0]});
  e.clear_output();
  REQUIRE(e.report(t[0], drl::Report{200}, 30).ok());
  CHECK(starts(e) == std::vector<Ticket>{t[1]});
  e.clear_output();
  REQUIRE(e.threw(t[1], 40).ok());  // retried later: its slot goes back now
  CHECK(starts(e) == std::vector<Ticket>{t[2]});
  e.clear_output();
  REQUIRE(e.gone(t[2], 50).ok());
  // t[1]'s retry takes the slot t[2] gave back, once its backoff is over.
  for (int i = 0; i < 20 && starts(e).empty(); ++i) {
    e.clear_output();
    const auto wake = e.next_wake();
    REQUIRE(wake);
    e.tick(*wake);
  }
  CHECK(starts(e) == std::vector<Ticket>{t[1]});
}

TEST_CASE("lease child: a timed-out attempt's slot stays taken until the holder's own timeout") {
  // Slack 10 ms: the holder frees it at start + stretch(1000) + 10 by its clock.
  Engine e = child(0, R"({"child":2,"incarnation":1,"clock":{"slackMs":10},"retryMs":300,"stockMs":0})");
  const Ticket a = *e.arrive(1, 10);
  const Ticket b = *e.arrive(1, 10);
  const auto ex = sent(e);
  REQUIRE(ex);
  REQUIRE(e.lease_reply(grant(*ex, 7, 10, 1, 60'000), 20).ok());
  e.clear_output();
  e.tick(1020);  // a's attempt times out at 20 + 1000 by the engine's clock
  bool timed_out = false;
  for (const drl::Action& x : e.actions()) timed_out |= x.kind == ActionKind::Reject && x.ticket == a;
  CHECK(timed_out);
  CHECK(starts(e).empty());  // its slot is still held: the call may run on in real time
  e.clear_output();
  e.tick(1029);
  CHECK(starts(e).empty());
  e.tick(1030);
  CHECK(starts(e) == std::vector<Ticket>{b});
}

TEST_CASE("lease child: units and slots come back in the close") {
  Engine e = child();
  const Ticket a = *e.arrive(2, 10);
  const auto ex = sent(e);
  REQUIRE(ex);
  REQUIRE(e.lease_reply(grant(*ex, 7, 5, 2, 500), 20).ok());
  REQUIRE(starts(e) == std::vector<Ticket>{a});
  e.clear_output();
  REQUIRE(e.report(a, drl::Report{200}, 40).ok());
  // By its end (10 + 500) at the latest it closes: the 2 units used at 20,
  // no call running; what it did not use comes back with it.
  const auto [close, at] = next_close(e, 40);
  CHECK(at <= 510);
  CHECK(close.seq >= 2);  // after any ask for stock it sent first
  REQUIRE(close.closes.size() == 1);
  CHECK(close.closes[0].lease_id == 7);
  REQUIRE(close.closes[0].uses.size() == 1);
  REQUIRE(close.closes[0].uses[0].size() == 1);
  CHECK(close.closes[0].uses[0][0].amount == 2);
  CHECK(close.closes[0].uses[0][0].age_ms == at - 20);
  CHECK(close.closes[0].running_ages.empty());
}

TEST_CASE("lease child: a 429 stops it at once and tells the root") {
  Engine e = child();
  const Ticket a = *e.arrive(1, 10);
  const Ticket b = *e.arrive(1, 10);
  const auto ex = sent(e);
  REQUIRE(ex);
  REQUIRE(e.lease_reply(grant(*ex, 7, 10, 1, 60'000), 20).ok());
  REQUIRE(starts(e) == std::vector<Ticket>{a});
  e.clear_output();
  drl::Report limited{429};
  limited.retry_after_ms = 2000;
  REQUIRE(e.report(a, limited, 30).ok());
  CHECK(starts(e).empty());  // b waits, and so does a's retry
  const auto told = sent(e);
  REQUIRE(told);  // at once, past refresh and retry spacing
  CHECK(told->penalty_ms >= 2000);
  e.clear_output();
  e.tick(2029);
  CHECK(starts(e).empty());
  CHECK(b != a);
}

TEST_CASE("lease child: a notice from the root stops it too") {
  Engine e = child();
  const Ticket a = *e.arrive(1, 10);
  const auto ex = sent(e);
  REQUIRE(ex);
  REQUIRE(e.lease_notice(R"({"penaltyMs":500})", 15).ok());
  REQUIRE(e.lease_reply(grant(*ex, 7, 10, 1, 60'000), 20).ok());
  CHECK(starts(e).empty());
  e.clear_output();
  e.tick(514);
  CHECK(starts(e).empty());
  e.tick(515);  // 15 + outlast(500), no slack or drift
  CHECK(starts(e) == std::vector<Ticket>{a});
}

TEST_CASE("lease child: a reply for another seq, incarnation or child changes nothing") {
  Engine e = child();
  *e.arrive(1, 10);
  const auto ex = sent(e);
  REQUIRE(ex);
  e.clear_output();
  Exchange other = *ex;
  other.seq = ex->seq + 1;
  REQUIRE(e.lease_reply(grant(other, 7, 10, 1, 5000), 20).ok());
  other = *ex;
  other.incarnation = 2;
  REQUIRE(e.lease_reply(grant(other, 8, 10, 1, 5000), 20).ok());
  other = *ex;
  other.child = 3;
  REQUIRE(e.lease_reply(grant(other, 9, 10, 1, 5000), 20).ok());
  CHECK(starts(e).empty());
  REQUIRE(e.lease_reply(grant(*ex, 10, 10, 1, 5000), 20).ok());
  CHECK(starts(e).size() == 1);
}

TEST_CASE("lease child: a malformed reply is refused naming the field, and changes nothing") {
  Engine e = child();
  *e.arrive(1, 10);
  e.clear_output();
  const auto bad = e.lease_reply(R"({"child":2,"incarnation":1,"seq":1,"leaseId":7,"units":[-1],"slots":1,)"
                                 R"("durationMs":500,"refusal":"none"})",
                                 20);
  REQUIRE(!bad.ok());
  CHECK(bad.error().code == drl::ErrorCode::InvalidArgument);
  CHECK_THAT(bad.error().message, Catch::Contains("grant.units[0] must be an integer between 0 and"));
  CHECK(starts(e).empty());
  CHECK(!e.lease_notice("[]", 20).ok());
  Engine plain;
  REQUIRE(plain.configure(kConfig, 0).ok());
  CHECK(!plain.lease_reply("{}", 0).ok());  // not a child
}

TEST_CASE("lease child: a lease serves until 1 ms before its end, by the child's clock") {
  // The lease runs from the first send (10) for 500 ms: the last take at 509.
  for (const int64_t at : {508, 509, 510, 511}) {
    DYNAMIC_SECTION("a call arriving at " << at) {
      Engine e = child();
      const Ticket first = *e.arrive(1, 10);
      const auto ex = sent(e);
      REQUIRE(ex);
      REQUIRE(e.lease_reply(grant(*ex, 7, 10, 5, 500), 20).ok());
      REQUIRE(starts(e) == std::vector<Ticket>{first});
      e.clear_output();
      const Ticket t = *e.arrive(1, at);
      CHECK((starts(e) == std::vector<Ticket>{t}) == (at < 510));
    }
  }
}

TEST_CASE("lease child: a use is read at its callback's release, not at its start") {
  Engine e = child();
  e.set_release_dating(true);
  const Ticket a = *e.arrive(1, 10);
  const auto ex = sent(e);
  REQUIRE(ex);
  REQUIRE(e.lease_reply(grant(*ex, 7, 1, 1, 500), 20).ok());
  REQUIRE(starts(e) == std::vector<Ticket>{a});
  const uint64_t through = e.starts_emitted();
  e.clear_output();
  // The callback leaves 100 ms after the start was decided.
  e.released(through, 120);
  e.clear_output();
  REQUIRE(e.report(a, drl::Report{200}, 130).ok());
  // Spent: it closes with the next exchange.
  const auto [close, sent_at] = next_close(e, 130);
  REQUIRE(close.closes.size() == 1);
  const auto& use = close.closes[0].uses.at(0).at(0);
  CHECK(use.amount == 1);
  // Its age is measured from the release (120), not the start (20), so the
  // root dates it no earlier than when the work left.
  CHECK(use.age_ms == sent_at - 120);
}

TEST_CASE("lease child: a lease with a use not yet released stays open") {
  Engine e = child();
  e.set_release_dating(true);
  const Ticket a = *e.arrive(1, 10);
  const auto ex = sent(e);
  REQUIRE(ex);
  REQUIRE(e.lease_reply(grant(*ex, 7, 1, 1, 200), 20).ok());
  REQUIRE(starts(e) == std::vector<Ticket>{a});
  e.clear_output();
  e.tick(400);  // past the lease's end (210): no close while a's use is unread
  const auto early = sent(e);
  CHECK((!early || early->closes.empty()));
  e.released(e.starts_emitted(), 420);
  CHECK(e.lease_late_releases() == 1);  // the host's lag outran the lease
}

TEST_CASE("lease child: a reconfigure keeps the root's windows") {
  Engine e = child();
  CHECK(e.reconfigure(R"({"bucket":{"limitPerWindow":50}})", 10).ok());
  const auto more =
      e.reconfigure(R"({"windows":{"tpm":{"unit":"tokens","limitPerWindow":10,"windowInMs":60000}}})", 10);
  REQUIRE(!more.ok());
  CHECK_THAT(more.error().message, Catch::Contains("lease child counting 1 windows"));
  CHECK(!e.make_lease_child(R"({"child":2,"incarnation":2})", 10).ok());  // a child already
  Engine bad;
  REQUIRE(bad.configure(kConfig, 0).ok());
  const auto refused = bad.make_lease_child(R"({"child":0,"incarnation":1})", 0);
  REQUIRE(!refused.ok());
  CHECK_THAT(refused.error().message, Catch::Contains("lease child setup.child must be an integer between 1"));
}
