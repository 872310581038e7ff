#include "attempt_deadlines.h"

#include <algorithm>
#include <functional>

namespace drl::internal {

void AttemptDeadlines::started(Ticket t, Call& c) {
  c.timed = true;
  ++live_;
  heap_.push_back(Entry{c.deadline, next_seq_++, t, c.attempt});
  std::push_heap(heap_.begin(), heap_.end(), std::greater<>());
}

void AttemptDeadlines::ended(Ticket t, Call& c) {
  if (!c.timed) return;
  c.timed = false;
  --live_;
  const Entry& top = heap_.front();
  if (top.ticket == t && top.attempt == c.attempt && top.deadline == c.deadline) {
    std::pop_heap(heap_.begin(), heap_.end(), std::greater<>());
    heap_.pop_back();
    return;
  }
  ++stale_;
  if (heap_.size() < 64 || heap_.size() <= 2 * live_) return;
  std::vector<Entry> kept;
  kept.reserve(2 * live_);
  for (const Entry& e : heap_) {
    if (in_force(e)) kept.push_back(e);
  }
  heap_ = std::move(kept);
  std::make_heap(heap_.begin(), heap_.end(), std::greater<>());
  stale_ = 0;
}

void AttemptDeadlines::drop_stale() {
  while (stale_ > 0 && !heap_.empty() && !in_force(heap_.front())) {
    std::pop_heap(heap_.begin(), heap_.end(), std::greater<>());
    heap_.pop_back();
    --stale_;
  }
}

bool AttemptDeadlines::in_force(const Entry& e) const {
  auto it = calls_.find(e.ticket);
  return it != calls_.end() && it->second.timed && it->second.attempt == e.attempt && it->second.deadline == e.deadline;
}

}  // namespace drl::internal
