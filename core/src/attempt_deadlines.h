// When running attempts time out: a min-heap of (deadline, ticket) over
// the calls (call.h), read by the scheduler to time attempts out and to
// know when to wake.
//
// Contract:
// - started() adds the attempt's deadline (Call::deadline, set by the
//   caller) and marks it in force (Call::timed); ended() clears the mark,
//   and must come before the call is erased. Nothing is removed from the
//   middle: an entry whose attempt ended is stale and skipped when it
//   reaches the top, so an attempt costs no allocation once the heap has
//   grown and no tree walk.
// - next() is the earliest deadline in force, with its ticket; attempts
//   with equal deadlines come out in the order they started.
// - Once stale entries outnumber live ones (and there are at least 64)
//   the heap is rebuilt without them, so it holds at most about twice the
//   running attempts.
//
// Example:
//   drl::internal::Calls calls;
//   drl::internal::AttemptDeadlines deadlines(calls);
//   for (drl::Ticket t : {1, 2}) {
//     drl::internal::Call& c = calls[t];
//     c.phase = drl::internal::Phase::Running;
//     c.attempt = 1;
//     c.deadline = 1000;
//     deadlines.started(t, c);
//   }
//   assert(deadlines.next()->second == 1);  // equal deadlines: the first started first
//   deadlines.ended(1, calls.at(1));
//   assert(deadlines.next()->second == 2);
//   deadlines.ended(2, calls.at(2));
//   assert(!deadlines.next());
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "call.h"
#include "drl/engine.h"

namespace drl::internal {

class AttemptDeadlines {
 public:
  explicit AttemptDeadlines(const Calls& calls) : calls_(calls) {}
  AttemptDeadlines(const AttemptDeadlines&) = delete;
  AttemptDeadlines& operator=(const AttemptDeadlines&) = delete;

  // Call `t`'s attempt (c.attempt) started and times out at c.deadline.
  void started(Ticket t, Call& c);
  // Call `t`'s attempt ended (reported, threw, timed out, its caller gone).
  // Before its call is erased.
  void ended(Ticket t, Call& c);

  // The earliest deadline of an attempt still in force, and its ticket,
  // dropping stale entries on the way; nullopt when none.
  std::optional<std::pair<Millis, Ticket>> next() {
    if (stale_ > 0) drop_stale();
    if (heap_.empty()) return std::nullopt;
    return std::pair<Millis, Ticket>{heap_.front().deadline, heap_.front().ticket};
  }
  // Attempts in force.
  size_t size() const { return live_; }
  // Entries held, stale ones included (for tests: at most about 2 size()).
  size_t entries() const { return heap_.size(); }

 private:
  struct Entry {
    Millis deadline;
    uint64_t seq;  // start order, among equal deadlines
    Ticket ticket;
    uint32_t attempt;
    bool operator>(const Entry& o) const { return deadline != o.deadline ? deadline > o.deadline : seq > o.seq; }
  };
  bool in_force(const Entry& e) const;
  // Pops stale entries off the top.
  void drop_stale();

  const Calls& calls_;
  std::vector<Entry> heap_;
  uint64_t next_seq_ = 0;
  size_t live_ = 0;
  // Entries below the top whose attempt ended: while there are none, the
  // top is in force without a look at its call (a caller with one attempt
  // at a time always ends the top one, which leaves at once).
  size_t stale_ = 0;
};

}  // namespace drl::internal
