// The running attempts' deadlines on their own (core/src/attempt_deadlines.h):
// order, attempts that end below the top, retries of one call, and the
// heap's bound.
#include "attempt_deadlines.h"

#include <catch2/catch.hpp>

using namespace drl;
using namespace drl::internal;

namespace {

struct Running {
  Calls calls;
  AttemptDeadlines deadlines{calls};

  void start(Ticket t, Millis deadline) {
    Call& c = calls[t];
    c.phase = Phase::Running;
    ++c.attempt;
    c.deadline = deadline;
    deadlines.started(t, c);
  }
  void end(Ticket t) { deadlines.ended(t, calls.at(t)); }
  // Times out every attempt due by `now`, as the scheduler does: the tickets, in order.
  std::vector<Ticket> due(Millis now) {
    std::vector<Ticket> out;
    for (auto d = deadlines.next(); d && d->first <= now; d = deadlines.next()) {
      out.push_back(d->second);
      end(d->second);
    }
    return out;
  }
};

}  // namespace

TEST_CASE("attempt deadlines: due at the deadline, not 1 ms before, in start order", "[attempt_deadlines]") {
  Running r;
  r.start(3, 1000);
  r.start(1, 1000);
  r.start(2, 999);
  CHECK(r.due(998).empty());
  CHECK(r.due(999) == std::vector<Ticket>{2});
  CHECK(r.due(999).empty());
  CHECK(r.due(1000) == std::vector<Ticket>{3, 1});  // equal deadlines: the first started first
  CHECK(r.due(1001).empty());
  CHECK(r.deadlines.size() == 0);
}

TEST_CASE("attempt deadlines: an attempt that ends below the top is skipped", "[attempt_deadlines]") {
  Running r;
  r.start(1, 100);
  r.start(2, 200);
  r.start(3, 300);
  r.end(2);
  CHECK(r.deadlines.size() == 2);
  CHECK(r.due(300) == std::vector<Ticket>{1, 3});
}

TEST_CASE("attempt deadlines: a retry's deadline is in force, its earlier attempt's is not", "[attempt_deadlines]") {
  Running r;
  r.start(2, 50);
  r.start(1, 100);
  r.end(1);         // below the top: its entry stays, stale
  r.start(1, 100);  // its retry, due at the same moment
  CHECK(r.due(99) == std::vector<Ticket>{2});
  CHECK(r.due(100) == std::vector<Ticket>{1});  // once, not once per entry
  CHECK(r.due(1000).empty());
}

TEST_CASE("attempt deadlines: stale entries never outnumber live ones for long", "[attempt_deadlines]") {
  Running r;
  // A long-running attempt holds the top while thousands start and end below it.
  r.start(1, 1'000'000);
  for (Ticket t = 2; t < 5000; ++t) {
    r.start(t, 2'000'000 + static_cast<Millis>(t));
    r.end(t);
    REQUIRE(r.deadlines.entries() <= std::max<size_t>(64, 2 * r.deadlines.size()) + 1);
  }
  CHECK(r.deadlines.size() == 1);
  CHECK(r.due(2'000'000) == std::vector<Ticket>{1});
}
