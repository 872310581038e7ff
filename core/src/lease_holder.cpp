// A child's leases: see lease_holder.h for the contract, docs/leases.md for
// why each reading and margin is safe.
#include "lease_holder.h"

#include <algorithm>
#include <limits>
#include <utility>

namespace drl::internal {

LeaseHolder::LeaseHolder(HolderConfig config)
    : config_(std::move(config)),
      recent_sum_(config_.windows, 0),
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
  p.gives_back = usable_slots(h) > 0 || std::any_of(h.left.begin(), h.left.end(), [](int64_t v) { return v > 0; });
  p.uses = std::move(h.uses);
  for (const auto& [call, start] : h.running) p.running.push_back({start, 1});
  std::sort(p.running.begin(), p.running.end(), [](const Use& a, const Use& b) { return a.at < b.at; });
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
  while (!recent_.empty() && recent_.front().first + config_.rate_ms <= now) {
    for (size_t k = 0; k < recent_sum_.size() && k < recent_.front().second.size(); ++k) {
      recent_sum_[k] -= recent_.front().second[k];
    }
    recent_.pop_front();
  }
  while (!peaks_.empty() && peaks_.front().first + config_.rate_ms <= now) peaks_.pop_front();
  for (size_t i = 0; i < leases_.size();) {
    // A lease with a use not yet read stays open: its close must state it.
    if (leases_[i].end <= now && leases_[i].unreleased.empty()) {
      close(i);
    } else {
      ++i;
    }
  }
}

// Only when composing an exchange (never between a take and the
// slot_acquire that goes with it): spent leases, and all of them when idle.
void LeaseHolder::give_back(LeaseMillis now) {
  bool queued = false;
  for (const DemandLevel& d : queued_) {
    queued |= d.slots > 0 || std::any_of(d.units.begin(), d.units.end(), [](int64_t u) { return u > 0; });
  }
  bool running = false;
  for (const Held& h : leases_) running |= !h.running.empty();
  const bool idle = !queued && !running && last_active_ + config_.idle_ms <= now;
  for (size_t i = 0; i < leases_.size();) {
    const Held& h = leases_[i];
    const bool had_units = std::any_of(h.uses.begin(), h.uses.end(), [](const auto& u) { return !u.empty(); }) ||
                           std::any_of(h.left.begin(), h.left.end(), [](int64_t v) { return v > 0; });
    // Spent: no unit left, no call running. Its idle slots go back with the
    // close and the exchange asks again for those the child keeps: kept open
    // for its slots, its uses would reach the root only at its end.
    const bool spent =
        had_units && h.running.empty() && std::all_of(h.left.begin(), h.left.end(), [](int64_t v) { return v == 0; });
    if ((spent || idle) && h.unreleased.empty()) {
      close(i);
    } else {
      ++i;
    }
  }
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
  recent_.push_back({now, amounts});
  for (size_t k = 0; k < recent_sum_.size() && k < amounts.size(); ++k) recent_sum_[k] += amounts[k];
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
      // A falling sequence: its front is the peak of the last rate_ms.
      while (!peaks_.empty() && peaks_.back().second <= running) peaks_.pop_back();
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
  for (Held& h : leases_) {
    if (h.running.erase(call) > 0) break;
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

// How long before a refresh can land: the last round trip with a quarter
// of headroom and the lag of both readings that measured it.
LeaseMillis LeaseHolder::lead() const {
  return rtt_ > 0 ? rtt_ + rtt_ / 4 + 2 * config_.clocks.slack_ms : config_.retry_ms / 2;
}

int64_t LeaseHolder::queued_units(size_t k) const {
  int64_t total = 0;
  for (const DemandLevel& d : queued_) total += k < d.units.size() ? d.units[k] : 0;
  return total;
}

int64_t LeaseHolder::queued_slots() const {
  int64_t total = 0;
  for (const DemandLevel& d : queued_) total += d.slots;
  return total;
}

// Units of window k its recent rate spends over `span`, rounded up.
int64_t LeaseHolder::expected(size_t k, LeaseMillis span) const {
  if (config_.rate_ms <= 0 || k >= recent_sum_.size() || recent_sum_[k] <= 0 || span <= 0) return 0;
  return (recent_sum_[k] * span + config_.rate_ms - 1) / config_.rate_ms;
}

// Idle slots worth keeping beyond the queue's: units without a slot are
// useless, so while it uses units it keeps its recent peak of calls (at
// least one); a child with no rate keeps none.
int64_t LeaseHolder::slots_to_keep() const {
  int64_t running = 0;
  for (const Held& h : leases_) running += static_cast<int64_t>(h.running.size());
  const bool active = std::any_of(recent_sum_.begin(), recent_sum_.end(), [](int64_t v) { return v > 0; });
  const int64_t peak = peaks_.empty() ? 0 : peaks_.front().second;
  return queued_slots() + (active ? std::max<int64_t>(1, peak - running) : 0);
}

// The low mark: what it holds beyond the lead will not cover its queue and
// its rate over the lead, so a refresh sent now lands just in time.
bool LeaseHolder::needs_refresh(LeaseMillis now) const {
  const size_t n = config_.windows;
  std::vector<int64_t> usable(n, 0);
  int64_t free = 0;
  for (const Held& h : leases_) {
    if (h.end <= now + lead()) continue;
    for (size_t k = 0; k < n; ++k) usable[k] += h.left[k];
    free += usable_slots(h);
  }
  for (size_t k = 0; k < n; ++k) {
    const int64_t need = queued_units(k) + expected(k, lead());
    if (need > 0 && usable[k] < need) return true;
  }
  return free < queued_slots();
}

// Closes that give something back go at once (paced); a spent lease's close
// frees nothing the root does not already date, so it waits for another
// reason to exchange, at most close_within_ms (it must land within a window
// of its uses, or they count until the lease's end instead).
bool LeaseHolder::closes_due(LeaseMillis now) const {
  return std::any_of(pending_.begin(), pending_.end(),
                     [&](const Pending& p) { return p.gives_back || p.closed_at + config_.close_within_ms <= now; });
}

std::vector<DemandLevel> LeaseHolder::demand(LeaseMillis now) const {
  const size_t n = config_.windows;
  // What will still be usable once a reply could be here.
  std::vector<int64_t> usable(n, 0);
  int64_t free_slots = 0;
  for (const Held& h : leases_) {
    if (h.end <= now + lead()) continue;
    for (size_t k = 0; k < n; ++k) usable[k] += h.left[k];
    free_slots += usable_slots(h);
  }
  std::vector<DemandLevel> levels = queued_;
  std::sort(levels.begin(), levels.end(),
            [](const DemandLevel& a, const DemandLevel& b) { return a.priority > b.priority; });
  for (DemandLevel& d : levels) {
    d.units.resize(n, 0);
    for (size_t k = 0; k < n; ++k) {
      const int64_t covered = std::min(d.units[k], usable[k]);
      d.units[k] -= covered;
      usable[k] -= covered;
    }
    const int64_t covered = std::min(d.slots, free_slots);
    d.slots -= covered;
    free_slots -= covered;
  }
  // The stock: the recent rate over the lead and stock_ms, beyond the
  // queue, and the slots it keeps for it (slots_to_keep less the queue's).
  DemandLevel stock;
  stock.priority = levels.empty() ? 0 : levels.back().priority;
  stock.units.assign(n, 0);
  for (size_t k = 0; k < n; ++k) {
    stock.units[k] = std::max<int64_t>(0, expected(k, config_.stock_ms + lead()) - usable[k]);
  }
  stock.slots = std::max<int64_t>(0, slots_to_keep() - queued_slots() - free_slots);
  levels.push_back(stock);
  levels.erase(std::remove_if(levels.begin(), levels.end(),
                              [](const DemandLevel& d) {
                                return d.slots == 0 &&
                                       std::all_of(d.units.begin(), d.units.end(), [](int64_t u) { return u == 0; });
                              }),
               levels.end());
  return levels;
}

// Nothing usable for what is queued: an exchange cannot wait for refresh_ms.
bool LeaseHolder::starved(LeaseMillis now) const {
  int64_t slots = 0;
  for (const DemandLevel& d : queued_) slots += d.slots;
  if (slots == 0) return false;
  int64_t free = 0;
  std::vector<int64_t> held(config_.windows, 0);
  for (const Held& h : leases_) {
    if (h.end <= now) continue;
    free += usable_slots(h);
    for (size_t k = 0; k < config_.windows; ++k) held[k] += h.left[k];
  }
  return free == 0 || std::any_of(held.begin(), held.end(), [](int64_t v) { return v == 0; });
}

// Between two exchanges: refresh_ms, a quarter of it while the head of the
// queue cannot start. Not zero: at overload a starved child asking on every
// reply would get a trickle each time and fill the ledger with leases; with
// several children asking, a freed unit waits about refresh_ms / 4 / the
// children at the root.
LeaseMillis LeaseHolder::spacing(LeaseMillis now) const {
  return starved(now) ? config_.refresh_ms / 4 : config_.refresh_ms;
}

bool LeaseHolder::wants_more(LeaseMillis now) const {
  return now >= not_before_ && (starved(now) || needs_refresh(now));
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
  if (!penalty_report_) {
    if (!closes_due(now) && !wants_more(now)) return std::nullopt;
    if (exchanged_ && now < last_exchange_ + spacing(now)) return std::nullopt;
  }
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
  if (now >= not_before_) ex.demand = demand(now);
  out_closes_ = std::move(pending_);
  pending_.clear();
  out_first_sent_ = out_last_sent_ = now;
  last_exchange_ = now;
  exchanged_ = true;
  out_ = ex;
  return ex;
}

std::vector<LeaseReturn> LeaseHolder::returns(LeaseMillis now) {
  const size_t n = config_.windows;
  // Units: walking the leases by end, keep what the rate (with half again of
  // headroom) and the queue can spend before each ends, and never more than
  // twice what a refresh would ask for; the rest lapses unused otherwise, or
  // sits idle while another child could have it.
  for (size_t k = 0; k < n; ++k) {
    const int64_t queued = queued_units(k);
    const int64_t most = 2 * (queued + expected(k, lead() + config_.stock_ms)) + 1;
    int64_t kept = 0;
    for (Held& h : leases_) {
      if (h.end <= now) continue;
      const int64_t spendable = queued + expected(k, (h.end - now) * 3 / 2) + 1;
      const int64_t keep =
          std::min({h.left[k], std::max<int64_t>(0, spendable - kept), std::max<int64_t>(0, most - kept)});
      h.returned[k] += h.left[k] - keep;
      h.left[k] = keep;
      kept += keep;
    }
  }
  // Slots: idle ones beyond what it keeps, from the leases that end last.
  int64_t free = 0;
  for (const Held& h : leases_) free += usable_slots(h);
  int64_t excess = free - slots_to_keep();
  std::vector<LeaseReturn> out;
  for (auto it = leases_.rbegin(); it != leases_.rend(); ++it) {
    Held& h = *it;
    const int64_t back = std::min(std::max<int64_t>(excess, 0), usable_slots(h));
    h.slots_returned += back;
    excess -= back;
    // Cumulative: every open lease that ever gave some back says so again.
    const bool units_back = std::any_of(h.returned.begin(), h.returned.end(), [](int64_t v) { return v > 0; });
    if (h.slots_returned > 0 || units_back) out.push_back({h.id, h.returned, h.slots_returned});
  }
  return out;
}

void LeaseHolder::on_grant(const LeaseGrant& g, LeaseMillis now) {
  advance(now);
  now = now_;
  // What is left of a penalty is true whatever the reply answers.
  if (g.child == config_.child) learn_penalty(g.penalty_ms, now);
  if (!out_ || g.child != config_.child || g.incarnation != config_.incarnation || g.seq != out_->seq) return;
  rtt_ = std::max<LeaseMillis>(1, now - out_last_sent_);
  out_.reset();
  out_closes_.clear();
  switch (g.refusal) {
    case Refusal::kNone:
      break;
    case Refusal::kNothingFree:
      // Less the round trip: the next ask then reaches the root about when
      // its first unit frees, not a round trip after.
      not_before_ = now + std::max<LeaseMillis>(1, g.retry_in_ms - rtt_);
      return;
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
    for (const Pending& p : pending_) at(p.gives_back ? paced : std::max(paced, p.closed_at + config_.close_within_ms));
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
    for (const auto& [call, start] : h.running) ahead(start + timeout);
  }
  if (!leases_.empty()) ahead(last_active_ + config_.idle_ms);
  if (!recent_.empty()) ahead(recent_.front().first + config_.rate_ms);
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
