#include "wait_queue.h"

#include <algorithm>

namespace drl::internal {

void WaitQueue::note_before(Call& c, const std::vector<int>& units) const {
  auto level = levels_.find(c.priority);
  for (size_t i = 0; i < c.units.size(); ++i) c.units[i].before = 0;
  for (int unit : units) c.units.of(unit).before = level == levels_.end() ? 0 : Level::at(level->second.pushed, unit);
}

void WaitQueue::push(Ticket t, const Call& c) {
  Level& level = levels_[c.priority];
  level.q.push_back(t);
  ++level.live;
  add(level.pushed, c, 1);
  ++queued_;
  if (c.wait_until >= 0) {
    wait_heap_.emplace_back(c.wait_until, t);
    std::push_heap(wait_heap_.begin(), wait_heap_.end(), std::greater<>());
    ++waits_live_;
  }
}

// Leaving from the front or the back keeps the level's totals exact; from
// the middle it is a hole, which only loosens the predictions behind it.
void WaitQueue::pop(Ticket t, const Call& c) {
  auto it = levels_.find(c.priority);
  Level& level = it->second;
  if (front_of(level) == t) {
    level.q.pop_front();
    add(level.popped, c, 1);
  } else if (back_of(level) == t) {
    level.q.pop_back();
    add(level.pushed, c, -1);
  } else {
    add(level.holes, c, 1);
  }
  --queued_;
  if (--level.live == 0) levels_.erase(it);
  if (c.wait_until >= 0) left_wait_heap();
}

// Adds (sign 1) or takes away (-1) each of c's costs to a level's totals.
void WaitQueue::add(std::vector<int64_t>& totals, const Call& c, int64_t sign) {
  for (size_t i = 0; i < c.units.size(); ++i) {
    if (c.units[i].amount != 0) Level::add(totals, c.units[i].unit, sign * c.units[i].amount);
  }
}

// The first (last) live entry of a level; dead entries there are dropped.
Ticket WaitQueue::front_of(Level& level) {
  while (!level.q.empty() && calls_.count(level.q.front()) == 0) level.q.pop_front();
  return level.q.empty() ? 0 : level.q.front();
}

Ticket WaitQueue::back_of(Level& level) {
  while (!level.q.empty() && calls_.count(level.q.back()) == 0) level.q.pop_back();
  return level.q.empty() ? 0 : level.q.back();
}

Ticket WaitQueue::head() {
  for (auto& [priority, level] : levels_) {
    if (const Ticket t = front_of(level)) return t;
  }
  return 0;
}

Ticket WaitQueue::tail() {
  for (auto level = levels_.rbegin(); level != levels_.rend(); ++level) {
    if (const Ticket t = back_of(level->second)) return t;
  }
  return 0;
}

int64_t WaitQueue::demand_through(const Call& c, int unit) const {
  int64_t total = c.cost_in(unit);
  for (const auto& [priority, level] : levels_) {
    if (priority > c.priority) {
      total += level.live_in(unit);
      continue;
    }
    if (priority == c.priority) {
      total += std::max<int64_t>(0, c.before_in(unit) - Level::at(level.popped, unit) - Level::at(level.holes, unit));
    }
    break;
  }
  return total;
}

bool WaitQueue::deadline_may_be_due(Millis now, bool overdue_only) const {
  if (wait_heap_.empty()) return false;
  const Millis first = wait_heap_.front().first;
  return overdue_only ? first < now : first <= now;
}

std::optional<std::pair<Millis, Ticket>> WaitQueue::next_deadline_kept() {
  while (!wait_heap_.empty() && !waits(wait_heap_.front())) {
    std::pop_heap(wait_heap_.begin(), wait_heap_.end(), std::greater<>());
    wait_heap_.pop_back();
  }
  if (wait_heap_.empty()) return std::nullopt;
  return wait_heap_.front();
}

// Whether a heap entry is a queued call's current deadline.
bool WaitQueue::waits(const std::pair<Millis, Ticket>& entry) const {
  auto it = calls_.find(entry.second);
  return it != calls_.end() && it->second.phase == Phase::Queued && it->second.wait_until == entry.first;
}

// A queued call with a deadline started or left: its heap entry is stale.
// Once stale entries outnumber live ones the heap is rebuilt without them.
void WaitQueue::left_wait_heap() {
  --waits_live_;
  if (wait_heap_.size() < 64 || wait_heap_.size() <= 2 * waits_live_) return;
  std::vector<std::pair<Millis, Ticket>> live;
  live.reserve(waits_live_);
  for (const auto& entry : wait_heap_) {
    if (waits(entry)) live.push_back(entry);
  }
  wait_heap_ = std::move(live);
  std::make_heap(wait_heap_.begin(), wait_heap_.end(), std::greater<>());
}

std::vector<std::pair<int32_t, size_t>> WaitQueue::by_priority() const {
  std::vector<std::pair<int32_t, size_t>> out;
  for (const auto& [priority, level] : levels_) out.emplace_back(priority, level.live);
  return out;
}

void WaitQueue::clear() {
  levels_.clear();
  wait_heap_.clear();
  waits_live_ = 0;
  queued_ = 0;
}

}  // namespace drl::internal
