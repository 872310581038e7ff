// The wait queue on its own (core/src/wait_queue.h): order, stale entries,
// the demand ahead of a call, and the deadline heap, at its boundaries.
#include "wait_queue.h"

#include <catch2/catch.hpp>

using namespace drl;
using namespace drl::internal;

namespace {

struct Queue {
  Calls calls;
  WaitQueue queue{calls};
  std::vector<int> units{0, 1};

  Ticket add(Ticket t, int32_t priority, int64_t cost, int64_t other = 0, Millis wait_until = -1) {
    Call c;
    c.priority = priority;
    c.wait_until = wait_until;
    c.set_cost(0, cost);
    if (other > 0) c.set_cost(1, other);
    queue.note_before(c, units);
    queue.push(t, calls.emplace(t, c).first->second);
    return t;
  }
  void leave(Ticket t) {
    queue.pop(t, calls.at(t));
    calls.erase(t);
  }
  void start(Ticket t) {
    queue.pop(t, calls.at(t));
    calls.at(t).phase = Phase::Running;
  }
  int64_t demand(Ticket t, int unit = 0) const { return queue.demand_through(calls.at(t), unit); }
};

}  // namespace

TEST_CASE("wait queue: highest priority first, arrival order within a level", "[wait_queue]") {
  Queue q;
  q.add(1, 0, 1);
  q.add(2, 1, 1);
  q.add(3, 0, 1);
  q.add(4, -1, 1);
  q.add(5, 1, 1);
  std::vector<Ticket> order;
  while (Ticket t = q.queue.head()) {
    order.push_back(t);
    q.start(t);
  }
  CHECK(order == std::vector<Ticket>{2, 5, 1, 3, 4});
  CHECK(q.queue.empty());
  CHECK(q.queue.by_priority().empty());  // emptied levels are dropped
}

TEST_CASE("wait queue: a call leaving from the middle is skipped, the ends stay exact", "[wait_queue]") {
  Queue q;
  q.add(1, 0, 2);
  q.add(2, 0, 3);
  q.add(3, 0, 4);
  q.add(4, 0, 5);
  CHECK(q.demand(4) == 14);
  q.leave(2);  // a hole: the demand behind it is then a lower bound, never more than the truth
  CHECK(q.demand(4) == 11);
  CHECK(q.queue.size() == 3);
  q.leave(4);  // from the back: its cost leaves the level's pushed total
  CHECK(q.queue.tail() == 3);
  q.start(1);  // from the front
  CHECK(q.queue.head() == 3);
  CHECK(q.demand(3) == 4);
  CHECK(q.queue.by_priority() == std::vector<std::pair<int32_t, size_t>>{{0, 1}});
}

TEST_CASE("wait queue: demand counts every higher level and only the calls ahead in its own", "[wait_queue]") {
  Queue q;
  q.add(1, 2, 10, 1);
  q.add(2, 1, 20, 2);
  q.add(3, 1, 30, 3);
  q.add(4, 0, 40, 4);
  CHECK(q.demand(1) == 10);
  CHECK(q.demand(3) == 60);  // 10 above, 20 ahead, 30 its own
  CHECK(q.demand(3, 1) == 6);
  CHECK(q.demand(4) == 100);
  CHECK(q.demand(2, 1) == 3);  // the lower level behind it counts nothing
}

TEST_CASE("wait queue: deadlines at -1, at and +1 ms", "[wait_queue]") {
  Queue q;
  q.add(1, 0, 1, 0, 100);
  q.add(2, 0, 1);  // no deadline
  CHECK_FALSE(q.queue.deadline_may_be_due(99, false));
  CHECK(q.queue.deadline_may_be_due(100, false));
  CHECK_FALSE(q.queue.deadline_may_be_due(100, /*overdue_only=*/true));
  CHECK(q.queue.deadline_may_be_due(101, true));
  auto next = q.queue.next_deadline();
  REQUIRE(next);
  CHECK(*next == std::pair<Millis, Ticket>{100, 1});
  q.start(1);  // a call that started no longer waits: its entry is stale
  CHECK_FALSE(q.queue.next_deadline());
}

TEST_CASE("wait queue: the deadline heap sheds stale entries and keeps the live ones in order", "[wait_queue]") {
  Queue q;
  for (Ticket t = 1; t <= 200; ++t) q.add(t, 0, 1, 0, static_cast<Millis>(1000 - t));
  for (Ticket t = 1; t <= 190; ++t) q.leave(t);  // rebuilt without them along the way
  std::vector<Millis> due;
  while (auto next = q.queue.next_deadline()) {
    due.push_back(next->first);
    q.leave(next->second);
  }
  CHECK(due == std::vector<Millis>{800, 801, 802, 803, 804, 805, 806, 807, 808, 809});
}
