// A child's leases: see lease_holder.h for the contract, docs/leases.md for
// why each reading and margin is safe.
#include "lease_holder.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "sort.h"

namespace drl::internal {

LeaseHolder::LeaseHolder(HolderConfig config)
    : config_(std::move(config)),
      recent_sum_(config_.windows, 0),
      lull_sum_(config_.windows, 0),
      floor_uses_(config_.windows),
      floor_used_(config_.windows, 0) {}

bool LeaseHolder::unreachable(LeaseMillis now) const {
  return out_.has_value() && std::max(now, now_) >= out_first_sent_ + config_.unreachable_ms;
}

bool LeaseHolder::fits_floor(const std::vector<int64_t>& amounts) const {
  if (config_.when_short != WhenShort::kFloor || now_ < *floor_from_) return false;
  for (size_t k = 0; k < amounts.size(); ++k) {
    if (amounts[k] <= 0) continue;
    const int64_t floor = k < config_.floor_units.size() ? config_.floor_units[k] : 0;
    if (k >= config_.windows || k >= config_.windows_ms.size() || floor_used_[k] + amounts[k] > floor) return false;
  }
  return true;
}

void LeaseHolder::fold(std::vector<Use>& uses) const {
  const size_t k = std::max<size_t>(config_.max_groups, 1);
  while (uses.size() > k) {
    // Merge the neighbours whose merge adds the least counting (amount x
    // the time it is dated later): the merged group takes the later date,
    // which can only over-count.
    size_t best = 0;
    int64_t best_cost = std::numeric_limits<int64_t>::max();
    for (size_t i = 0; i + 1 < uses.size(); ++i) {
      const int64_t cost = uses[i].amount * (uses[i + 1].at - uses[i].at);
      if (cost < best_cost) best_cost = cost, best = i;
    }
    uses[best + 1].amount += uses[best].amount;
    uses.erase(uses.begin() + static_cast<std::ptrdiff_t>(best));
  }
}

void LeaseHolder::note_use(std::vector<Use>& uses, LeaseMillis at, int64_t amount) {
  if (!uses.empty() && uses.back().at == at) {
    uses.back().amount += amount;
  } else {
    uses.push_back({at, amount});
  }
}

void LeaseHolder::close(size_t index) {
  Held& h = leases_[index];
  Pending p;
  p.lease_id = h.id;
  p.closed_at = now_;
  p.gives_units = std::any_of(h.left.begin(), h.left.end(), [](int64_t v) { return v > 0; });
  p.gives_slots = usable_slots(h) > 0;
  p.uses = std::move(h.uses);
  for (const auto& [call, start] : h.running) p.running.push_back({start, 1});
  sort_stable(p.running, [](const Use& a, const Use& b) { return a.at < b.at; });
  fold(p.running);
  pending_.push_back(std::move(p));
  leases_.erase(leases_.begin() + static_cast<std::ptrdiff_t>(index));
}

void LeaseHolder::advance(LeaseMillis now) {
  if (!floor_from_) {
    LeaseMillis longest = config_.attempt_timeout_ms;
    for (LeaseMillis t : config_.windows_ms) longest = std::max(longest, t);
    now_ = now;
    floor_from_ = now + config_.clocks.outlast(longest);
  }
  now_ = std::max(now_, now);
  now = now_;
  // A call stops holding its slot once it stopped counting in real time:
  // its start reading may lag by S, and this clock may run fast.
  const LeaseMillis timeout = config_.clocks.stretch(config_.attempt_timeout_ms) + config_.clocks.slack_ms;
  for (Held& h : leases_) {
    for (auto it = h.running.begin(); it != h.running.end();) {
      it = it->second + timeout <= now ? h.running.erase(it) : std::next(it);
    }
  }
  for (auto it = floor_running_.begin(); it != floor_running_.end();) {
    it = it->second + timeout <= now ? floor_running_.erase(it) : std::next(it);
  }
  // A floor use frees once this clock shows outlast(T) after it: two uses
  // less than T apart in real time read less than that apart.
  for (size_t k = 0; k < floor_uses_.size() && k < config_.windows_ms.size(); ++k) {
    auto& uses = floor_uses_[k];
    while (!uses.empty() && uses.front().at + config_.clocks.outlast(config_.windows_ms[k]) <= now) {
      floor_used_[k] -= uses.front().amount;
      uses.pop_front();
    }
  }
  for (Held& h : leases_) recycle(h, now);
  while (!slot_times_.empty() && slot_times_.front().at + config_.rate_ms <= now) {
    slot_time_sum_ -= slot_times_.front().amount;
    slot_times_.pop_front();
  }
  // The last quarter of rate_ms first: an entry leaves it before it leaves recent_.
  while (lull_count_ > 0) {
    const size_t i = recent_.size() - lull_count_;
    if (recent_[i] > now - config_.rate_ms / 4) break;
    for (size_t k = 0; k < config_.windows; ++k) lull_sum_[k] -= recent_amounts_[i * config_.windows + k];
    --lull_count_;
  }
  while (!recent_.empty() && recent_.front() + config_.rate_ms <= now) {
    recent_.pop_front();
    for (size_t k = 0; k < config_.windows; ++k) {
      recent_sum_[k] -= recent_amounts_.front();
      recent_amounts_.pop_front();
    }
  }
  // A peak counts for rate_ms, or a stock span when that is longer: the
  // slots kept for it serve until the next refresh, about a stock span
  // away. Over rate_ms alone a slow child (a 60 s window, 10-16 calls a
  // second, stock for 64 calls) saw a peak of 1 or 2, kept 2-3 slots, and
  // asked for a slot again when three calls overlapped (starved: 0.0071
  // exchanges per call, 0.0051 with this).
  LeaseMillis peak_ms = config_.rate_ms;
  for (size_t k = 0; k < config_.windows_ms.size(); ++k) peak_ms = std::max(peak_ms, stock_span(k));
  while (!peaks_.empty() && peaks_.front().at + peak_ms <= now) peaks_.pop_front();
  for (size_t i = 0; i < leases_.size();) {
    // A lease with a use not yet read stays open: its close must state it.
    if (leases_[i].end <= now && leases_[i].unreleased.empty()) {
      close(i);
    } else {
      ++i;
    }
  }
}

// A used unit is free again once this clock shows outlast(T) after its use
// was read: the use has then left every real window (two readings less than
// T apart in real time read less than outlast(T) apart, as for the floor),
// so spending the unit again never overlaps its last use, and a return or a
// close without it frees it at the root no earlier than that (docs/leases.md,
// "Reuse inside a lease"). Folded groups are dated at their latest use, so
// they come back no earlier than their units' own uses would.
void LeaseHolder::recycle(Held& h, LeaseMillis now) const {
  for (size_t k = 0; k < h.uses.size() && k < config_.windows_ms.size(); ++k) {
    auto& uses = h.uses[k];
    const LeaseMillis out = config_.clocks.outlast(config_.windows_ms[k]);
    size_t freed = 0;
    while (freed < uses.size() && uses[freed].at + out <= now) h.left[k] += uses[freed++].amount;
    uses.erase(uses.begin(), uses.begin() + static_cast<std::ptrdiff_t>(freed));
  }
}

// Whether some unit of h used so far comes back (recycle) while h can still
// serve a take.
bool LeaseHolder::recycles_in_time(const Held& h) const {
  for (size_t k = 0; k < h.uses.size() && k < config_.windows_ms.size(); ++k) {
    if (!h.uses[k].empty() &&
        h.uses[k].front().at + config_.clocks.outlast(config_.windows_ms[k]) < h.end - config_.release_margin_ms) {
      return true;
    }
  }
  return false;
}

bool LeaseHolder::fits(const std::vector<int64_t>& amounts, LeaseMillis now) const {
  for (size_t k = 0; k < amounts.size(); ++k) {
    if (amounts[k] <= 0) continue;
    if (k >= config_.windows) return false;
    int64_t have = 0;
    for (const Held& h : leases_) {
      if (h.end > now + config_.release_margin_ms) have += h.left[k];
    }
    if (have < amounts[k]) return false;
  }
  return true;
}

bool LeaseHolder::can_take(const std::vector<int64_t>& amounts, LeaseMillis now) {
  advance(now);
  return now_ >= penalty_end() && (fits(amounts, now_) || fits_floor(amounts) || open_gate(now_));
}

bool LeaseHolder::take(const std::vector<int64_t>& amounts, LeaseMillis now, uint64_t release) {
  advance(now);
  now = now_;
  if (now < penalty_end()) return false;
  if (!fits(amounts, now)) {
    if (fits_floor(amounts)) {
      for (size_t k = 0; k < amounts.size(); ++k) {
        if (amounts[k] <= 0) continue;
        if (release == 0) floor_uses_[k].push_back({now, amounts[k]});
        floor_used_[k] += amounts[k];
      }
      if (release != 0) floor_unreleased_.push_back({release, amounts});
    } else if (!open_gate(now)) {
      return false;
    }
    last_active_ = now;
    return true;
  }
  for (size_t k = 0; k < amounts.size(); ++k) {
    int64_t need = amounts[k];
    // The leases that end first, so what is left lasts longest.
    for (Held& h : leases_) {
      if (need <= 0) break;
      if (h.end <= now + config_.release_margin_ms || h.left[k] == 0) continue;
      const int64_t t = std::min(need, h.left[k]);
      h.left[k] -= t;
      need -= t;
      if (release != 0) {
        if (h.unreleased.empty() || h.unreleased.back().first != release) {
          h.unreleased.push_back({release, std::vector<int64_t>(config_.windows, 0)});
        }
        h.unreleased.back().second[k] += t;
        continue;
      }
      note_use(h.uses[k], now, t);
      fold(h.uses[k]);
    }
  }
  recent_.push_back(now);
  for (size_t k = 0; k < config_.windows; ++k) {
    const int64_t amount = k < amounts.size() ? amounts[k] : 0;
    recent_amounts_.push_back(amount);
    recent_sum_[k] += amount;
    lull_sum_[k] += amount;
  }
  ++lull_count_;
  last_active_ = now;
  return true;
}

// A use is read when its work leaves, which is no earlier than its take:
// the reading the lease-end and dating margins start from (docs/leases.md,
// "Uses read at their release").
void LeaseHolder::release(uint64_t through, LeaseMillis now) {
  advance(now);
  now = now_;
  for (Held& h : leases_) {
    auto& pending = h.unreleased;
    for (auto it = pending.begin(); it != pending.end();) {
      if (it->first > through) {
        ++it;
        continue;
      }
      if (h.end <= now) ++late_releases_;
      for (size_t k = 0; k < it->second.size() && k < h.uses.size(); ++k) {
        if (it->second[k] <= 0) continue;
        note_use(h.uses[k], now, it->second[k]);
        fold(h.uses[k]);
      }
      it = pending.erase(it);
    }
  }
  for (auto it = floor_unreleased_.begin(); it != floor_unreleased_.end();) {
    if (it->first > through) {
      ++it;
      continue;
    }
    for (size_t k = 0; k < it->second.size() && k < floor_uses_.size(); ++k) {
      if (it->second[k] > 0) floor_uses_[k].push_back({now, it->second[k]});
    }
    it = floor_unreleased_.erase(it);
  }
  advance(now);  // a lease that ended while it waited closes now
}

std::optional<LeaseHolder::CallId> LeaseHolder::slot_acquire(LeaseMillis now) {
  advance(now);
  now = now_;
  if (now < penalty_end()) return std::nullopt;
  for (Held& h : leases_) {
    if (h.end > now + config_.release_margin_ms && usable_slots(h) > 0) {
      const CallId id = next_call_++;
      h.running.emplace(id, now);
      last_active_ = now;
      int64_t running = 0;
      for (const Held& other : leases_) running += static_cast<int64_t>(other.running.size());
      // A falling sequence: its front is the peak of the span advance() keeps.
      while (!peaks_.empty() && peaks_.back().amount <= running) peaks_.pop_back();
      peaks_.push_back({now, running});
      return id;
    }
  }
  if (config_.when_short == WhenShort::kFloor && now >= *floor_from_ &&
      static_cast<int64_t>(floor_running_.size()) < config_.floor_slots) {
    const CallId id = next_call_++;
    floor_running_.emplace(id, now);
    return id;
  }
  if (open_gate(now)) return next_call_++;  // counted nowhere
  return std::nullopt;
}

void LeaseHolder::slot_release(CallId call, LeaseMillis now) {
  const LeaseMillis at = std::max(now, now_);
  for (Held& h : leases_) {
    const auto it = h.running.find(call);
    if (it == h.running.end()) continue;
    // How long it held its slot, for slots_to_start.
    const LeaseMillis held_for = std::max<LeaseMillis>(1, at - it->second);
    slot_times_.push_back({at, held_for});
    slot_time_sum_ += held_for;
    h.running.erase(it);
    break;
  }
  floor_running_.erase(call);
  // Not found: timed out already, or its lease closed reporting it running.
  last_active_ = std::max(last_active_, now);
  advance(now);
}

LeaseMillis LeaseHolder::penalty_end() const {
  return penalty_ms_ > 0 ? penalty_at_ + config_.clocks.outlast(penalty_ms_) : 0;
}

void LeaseHolder::learn_penalty(LeaseMillis left, LeaseMillis now) {
  if (left <= 0 || now + config_.clocks.outlast(left) <= penalty_end()) return;
  penalty_at_ = now;
  penalty_ms_ = left;
}

// The 429's reading may lag its arrival by S: outlast() allows for it.
void LeaseHolder::on_penalty(LeaseMillis duration_ms, LeaseMillis now) {
  advance(now);
  const LeaseMillis before = penalty_end();
  learn_penalty(duration_ms, now_);
  penalty_report_ |= penalty_end() > before;
}

void LeaseHolder::on_notice(const PenaltyNotice& notice, LeaseMillis now) {
  advance(now);
  learn_penalty(notice.penalty_ms, now_);
}

bool LeaseHolder::penalized(LeaseMillis now) {
  advance(now);
  return now_ < penalty_end();
}

void LeaseHolder::set_queued(std::vector<DemandLevel> queued, LeaseMillis now) {
  queued_ = std::move(queued);
  for (const DemandLevel& d : queued_) {
    if (d.slots > 0 || std::any_of(d.units.begin(), d.units.end(), [](int64_t u) { return u > 0; })) {
      last_active_ = std::max(last_active_, now);
    }
  }
  advance(now);
}

std::optional<Exchange> LeaseHolder::next_exchange(LeaseMillis now) {
  advance(now);
  now = now_;
  give_back(now);
  const LeaseMillis penalty = config_.clocks.left_after(penalty_ms_, now - penalty_at_);
  if (out_) {
    // Unchanged, so the root's stored reply answers it and the ages stay
    // measured to the first send (a later receipt only dates them later);
    // only the penalty is the newest, and a new one goes at once.
    if (now < out_last_sent_ + config_.retry_ms && !penalty_report_) return std::nullopt;
    out_last_sent_ = now;
    out_->penalty_ms = penalty;
    penalty_report_ = false;
    return out_;
  }
  const ExchangeCause cause = exchange_cause(now);
  if (cause == ExchangeCause::kNone) return std::nullopt;
  // A penalty goes at once; anything else is paced.
  if (cause != ExchangeCause::kPenalty && exchanged_ && now < last_exchange_ + spacing(now)) return std::nullopt;
  causes_.count(cause);
  penalty_report_ = false;
  Exchange ex;
  ex.child = config_.child;
  ex.incarnation = config_.incarnation;
  ex.seq = ++seq_;
  for (const Pending& p : pending_) {
    LeaseClose c;
    c.lease_id = p.lease_id;
    for (const auto& window : p.uses) {
      c.uses.emplace_back();
      for (const Use& u : window) c.uses.back().push_back({now - u.at, u.amount});
    }
    for (const Use& r : p.running) {
      for (int64_t i = 0; i < r.amount; ++i) c.running_ages.push_back(now - r.at);
    }
    ex.closes.push_back(std::move(c));
  }
  ex.returns = returns(now);
  ex.penalty_ms = penalty;
  ex.round_trip_ms = rtt_;
  if (now >= not_before_) ex.demand = demand(now);
  out_closes_ = std::move(pending_);
  pending_.clear();
  out_first_sent_ = out_last_sent_ = now;
  last_exchange_ = now;
  exchanged_ = true;
  out_ = ex;
  return ex;
}

void LeaseHolder::on_grant(const LeaseGrant& g, LeaseMillis now) {
  advance(now);
  now = now_;
  // What is left of a penalty is true whatever the reply answers.
  if (g.child == config_.child) learn_penalty(g.penalty_ms, now);
  if (!out_ || g.child != config_.child || g.incarnation != config_.incarnation || g.seq != out_->seq) return;
  rtt_ = std::max<LeaseMillis>(1, now - out_last_sent_);
  contended_ = g.slots_wanted > 0;
  // An exchange that asked for nothing says nothing about the root's room.
  if (g.refusal == Refusal::kNone && !out_->demand.empty()) {
    ample_ = true;
    for (size_t k = 0; k < config_.windows; ++k) {
      int64_t asked = 0;
      for (const DemandLevel& d : out_->demand) asked += k < d.units.size() ? d.units[k] : 0;
      ample_ &= (k < g.units.size() ? g.units[k] : 0) >= asked;
    }
    int64_t slots = 0;
    for (const DemandLevel& d : out_->demand) slots += d.slots;
    ample_ &= g.slots >= slots && g.units_wanted == 0;
    lent_ms_ = g.duration_ms;
  } else if (g.refusal != Refusal::kNothingAsked) {
    ample_ = false;
  }
  out_.reset();
  out_closes_.clear();
  // A refusal, or a lease of slots alone (the root short of units): ask
  // again less the round trip, so the ask reaches the root about when its
  // first unit frees, not a round trip after.
  if (g.refusal == Refusal::kNothingFree || (g.refusal == Refusal::kNone && g.retry_in_ms > 0)) {
    not_before_ = now + std::max<LeaseMillis>(1, g.retry_in_ms - rtt_);
  }
  switch (g.refusal) {
    case Refusal::kNone:
      break;
    case Refusal::kNothingFree:
    case Refusal::kNothingAsked:
      return;
    case Refusal::kStaleIncarnation:
    case Refusal::kMalformed:
      not_before_ = now + config_.retry_ms;
      return;
  }
  Held h;
  h.id = g.lease_id;
  // From the first send: the root started counting no earlier than that.
  h.end = out_first_sent_ + g.duration_ms;
  h.left = g.units;
  h.left.resize(config_.windows, 0);
  h.returned.assign(config_.windows, 0);
  h.slots = g.slots;
  h.uses.assign(config_.windows, {});
  ++leases_received_;
  last_lease_ms_ = g.duration_ms;
  if (h.end <= now) ++leases_arrived_ended_;
  const auto at = std::upper_bound(leases_.begin(), leases_.end(), h.end,
                                   [](LeaseMillis end, const Held& other) { return end < other.end; });
  leases_.insert(at, std::move(h));
  advance(now);  // one that arrives ended closes at once, unspent
}

std::optional<LeaseMillis> LeaseHolder::next_wake(LeaseMillis now) {
  advance(now);
  now = now_;
  std::optional<LeaseMillis> wake;
  const auto at = [&](LeaseMillis t) { wake = wake ? std::min(*wake, t) : t; };
  if (penalty_report_) at(now);
  if (out_) {
    at(out_last_sent_ + config_.retry_ms);
  } else {
    const LeaseMillis paced = exchanged_ ? std::max(now, last_exchange_ + spacing(now)) : now;
    for (const Pending& p : pending_) at(urgent(p) ? paced : std::max(paced, p.closed_at + close_wait()));
    if (starved(now) || needs_refresh(now)) at(std::max(paced, not_before_));
  }
  // Only what lies ahead: a time already passed was dealt with by advance().
  const auto ahead = [&](LeaseMillis t) {
    if (t > now) at(t);
  };
  ahead(penalty_end());  // the host may start calls again
  const LeaseMillis timeout = config_.clocks.stretch(config_.attempt_timeout_ms) + config_.clocks.slack_ms;
  for (const Held& h : leases_) {
    ahead(h.end);
    ahead(h.end - lead());  // refresh ahead of the end
    for (size_t k = 0; k < h.uses.size() && k < config_.windows_ms.size(); ++k) {
      if (!h.uses[k].empty()) ahead(h.uses[k].front().at + config_.clocks.outlast(config_.windows_ms[k]));  // recycle
    }
    for (const auto& [call, start] : h.running) ahead(start + timeout);
  }
  if (!leases_.empty()) ahead(last_active_ + config_.idle_ms);
  if (!recent_.empty()) ahead(recent_.front() + config_.rate_ms);
  if (wake) wake = std::max(*wake, now);
  return wake;
}

int64_t LeaseHolder::held(size_t k, LeaseMillis now) {
  advance(now);
  int64_t total = 0;
  for (const Held& h : leases_) total += h.end > now_ && k < h.left.size() ? h.left[k] : 0;
  return total;
}

int64_t LeaseHolder::free_slots(LeaseMillis now) {
  advance(now);
  int64_t total = 0;
  for (const Held& h : leases_) {
    if (h.end > now_) total += usable_slots(h);
  }
  if (config_.when_short == WhenShort::kFloor && now_ >= *floor_from_) {
    total += config_.floor_slots - static_cast<int64_t>(floor_running_.size());
  }
  if (open_gate(now_)) total = std::max<int64_t>(total, 1);  // every call gets one
  return total;
}

}  // namespace drl::internal
