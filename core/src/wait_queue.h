// The queue of calls waiting for their first start: levels by priority
// (highest first), first come first served within a level, and a heap of
// the deadlines (maxWaitMs) of the calls that set one.
//
// Contract:
// - It holds tickets, never calls: a ticket whose call has been erased from
//   the Calls it reads (or that no longer waits) is stale and skipped. So a
//   call can leave from the middle of a level in O(1); its entry is dropped
//   when it reaches either end.
// - Per level and per unit it keeps the totals ever pushed, popped from the
//   front, and left from the middle ("holes"), so the demand queued ahead of
//   any call is known in O(levels) (demand_through): exact, unless a call
//   ahead of it in its own level left from the middle, then a lower bound.
// - push() and pop() are the only ways in and out; size() counts live calls.
//
// Example:
//   drl::internal::Calls calls;
//   drl::internal::WaitQueue queue(calls);
//   drl::internal::Call low, high;
//   low.set_cost(0, 3);  // 3 of unit 0
//   high.set_cost(0, 2);
//   high.priority = 5;
//   queue.note_before(low, {0});
//   queue.push(1, calls.emplace(1, low).first->second);
//   queue.note_before(high, {0});
//   queue.push(2, calls.emplace(2, high).first->second);
//   assert(queue.head() == 2);  // the higher priority first
//   assert(queue.demand_through(calls.at(1), 0) == 5);  // its own 3, after 2 ahead
//   queue.pop(2, calls.at(2));
//   calls.erase(2);
//   assert(queue.head() == 1);
//   assert(queue.size() == 1);
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "call.h"
#include "ring.h"

namespace drl::internal {

// The queued calls of one priority, in arrival order, with totals per unit
// index: `pushed` ever enqueued here, `popped` left from the front, `holes`
// left from elsewhere. A level is dropped when it empties, which resets its
// totals.
struct Level {
  Ring<Ticket> q;
  size_t live = 0;
  std::vector<int64_t> pushed, popped, holes;

  static void add(std::vector<int64_t>& v, int unit, int64_t amount) {
    if (static_cast<size_t>(unit) >= v.size()) v.resize(static_cast<size_t>(unit) + 1, 0);
    v[static_cast<size_t>(unit)] += amount;
  }
  static int64_t at(const std::vector<int64_t>& v, int unit) {
    return static_cast<size_t>(unit) < v.size() ? v[static_cast<size_t>(unit)] : 0;
  }
  // The queued demand of this level in `unit`, exactly.
  int64_t live_in(int unit) const { return at(pushed, unit) - at(popped, unit) - at(holes, unit); }
};

class WaitQueue {
 public:
  explicit WaitQueue(const Calls& calls) : calls_(calls) {}
  WaitQueue(const WaitQueue&) = delete;
  WaitQueue& operator=(const WaitQueue&) = delete;

  // Notes what each of `units` (the units the windows count) had been
  // pushed onto c's level before it (UnitCost::before). Before push().
  void note_before(Call& c, const std::vector<int>& units) const;
  // Puts call `t` (already in the Calls, before noted) at the back of its level.
  void push(Ticket t, const Call& c);
  // Takes queued call `t` (still in the Calls) out of its level: it starts,
  // or leaves (the caller then erases it).
  void pop(Ticket t, const Call& c);

  // The call that starts next (the first of the highest level), the last
  // (of the lowest); 0 when empty.
  Ticket head();
  Ticket tail();
  size_t size() const { return queued_; }
  bool empty() const { return queued_ == 0; }

  // The demand in `unit` of the calls queued ahead of `c` plus its own.
  int64_t demand_through(const Call& c, int unit) const;

  // Whether a deadline may be due: the earliest heap entry (stale or not)
  // is at or before `now` (`overdue_only`: before it). O(1).
  bool deadline_may_be_due(Millis now, bool overdue_only) const;
  // The earliest deadline of a queued call and its ticket, dropping stale
  // entries on the way; nullopt when none.
  std::optional<std::pair<Millis, Ticket>> next_deadline() {
    if (wait_heap_.empty()) return std::nullopt;  // the common case, inline
    return next_deadline_kept();
  }

  // Every queued ticket, highest level first (a stale one included).
  template <typename F>
  void for_each(F&& f) const {
    for (const auto& [priority, level] : levels_) {
      for (Ticket t : level.q) f(t);
    }
  }
  // (priority, live calls) per level, highest first.
  std::vector<std::pair<int32_t, size_t>> by_priority() const;
  // The demand queued at `priority` in `unit` (0 when no such level).
  int64_t live_in(int32_t priority, int unit) const {
    const auto it = levels_.find(priority);
    return it == levels_.end() ? 0 : it->second.live_in(unit);
  }
  void clear();

 private:
  std::optional<std::pair<Millis, Ticket>> next_deadline_kept();
  Ticket front_of(Level& level);
  Ticket back_of(Level& level);
  static void add(std::vector<int64_t>& totals, const Call& c, int64_t sign);
  bool waits(const std::pair<Millis, Ticket>& entry) const;
  void left_wait_heap();

  const Calls& calls_;
  std::map<int32_t, Level, std::greater<int32_t>> levels_;
  size_t queued_ = 0;  // live entries over all levels
  // Queued calls with a maxWaitMs, by deadline: a min-heap of (deadline,
  // ticket). A call that starts or leaves keeps its entry until it reaches
  // the top (or the heap is compacted), so arriving costs no allocation.
  std::vector<std::pair<Millis, Ticket>> wait_heap_;
  size_t waits_live_ = 0;  // entries of calls still queued
};

}  // namespace drl::internal
