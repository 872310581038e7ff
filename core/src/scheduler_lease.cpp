// A child engine's hooks into the steps (lease_child.h): kept apart from
// the take's hot path, which a bucket that is no child never enters.
#include "scheduler.h"

namespace drl::internal {

bool Scheduler::lease_admits(Ticket t, const Call& c) {
  std::vector<int64_t> amounts;
  amounts.reserve(windows.size());
  for (const Window& w : windows) amounts.push_back(c.cost_in(w.unit));
  // With release dating the use is read at the release of this start (the
  // number note_unreleased gives it), and the lease must outlast the
  // largest recent release lag; without it the start is the release.
  const uint64_t release = dating ? starts_emitted + 1 : 0;
  return lease->admit(t, amounts, release, dating ? lags.allowance() : 0, now);
}

void Scheduler::lease_step() {
  std::vector<DemandLevel> queued;
  const auto add = [&](int32_t priority, const Call& c, int64_t slots) {
    auto it = std::find_if(queued.begin(), queued.end(), [&](const DemandLevel& d) { return d.priority == priority; });
    if (it == queued.end()) {
      queued.push_back({priority, std::vector<int64_t>(windows.size(), 0), 0});
      it = queued.end() - 1;
    }
    for (size_t k = 0; k < windows.size(); ++k) it->units[k] += c.cost_in(windows[k].unit);
    it->slots += slots;
  };
  for (const auto& [priority, count] : queue.by_priority()) {
    DemandLevel level{priority, std::vector<int64_t>(windows.size(), 0), static_cast<int64_t>(count)};
    for (size_t k = 0; k < windows.size(); ++k) level.units[k] = queue.live_in(priority, windows[k].unit);
    queued.push_back(std::move(level));
  }
  // Retries: due ones wait for the holder like the queue's head; those
  // backing off will want the same soon.
  for (Ticket t : ready) add(calls.at(t).priority, calls.at(t), 1);
  for (const auto& [due, t] : backoff) add(calls.at(t).priority, calls.at(t), 1);
  if (auto text = lease->step(std::move(queued), now)) {
    lease_exchange = std::move(*text);
    act(ActionKind::Exchange, 0, 0);
  }
  if (auto due = lease->next_wake(now); due && (!wake || *due < *wake)) wake = due;
}

}  // namespace drl::internal
