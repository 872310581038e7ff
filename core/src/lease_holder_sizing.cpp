// A child's leases, how much it asks for and gives back, and when: the
// sizing of docs/leases.md ("Sizing"). The rest of LeaseHolder is in
// lease_holder.cpp; the contract in lease_holder.h.
#include <algorithm>
#include <limits>
#include <utility>

#include "lease_holder.h"
#include "sort.h"

namespace drl::internal {

// How long before a refresh can land: the last round trip with a quarter
// of headroom and the lag of both readings that measured it.
LeaseMillis LeaseHolder::lead() const {
  return rtt_ > 0 ? rtt_ + rtt_ / 4 + 2 * config_.clocks.slack_ms : config_.retry_ms / 2;
}

// The stock of window k: stock_ms, and at least a thirtieth of the window.
// A steady child exchanges about once per stock span; a long window's
// stock is then a small share of its limit (the children's stocks together
// are at most their rate over window / 30, so at most about 3% of the limit
// idles in them), and a 60 s window's children exchange every 2 s or so
// instead of every 100 ms. While the root grants all it is asked (ample_),
// a slow child stocks for kStockCalls calls, so it exchanges at most about
// once per kStockCalls calls whatever its rate; never beyond a quarter of
// the window or a third of its lease (returns() would give the rest back
// at once). A short grant or a refusal ends that: stocks stay small while
// the children compete for the limit.
LeaseMillis LeaseHolder::stock_span(size_t k) const {
  const LeaseMillis window = k < config_.windows_ms.size() ? config_.windows_ms[k] : 0;
  const LeaseMillis base = std::max(config_.stock_ms, window / 30);
  if (!ample_ || recent_.empty() || config_.rate_ms <= 0) return base;
  const LeaseMillis for_calls = kStockCalls * config_.rate_ms / static_cast<LeaseMillis>(recent_.size());
  return std::max(base, std::min({for_calls, window / 4, lent_ms_ / 3}));
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
// least one), twice that while the root grants all it asks and no sibling
// waits for a slot (ample_ and not contended_: a burst above the peak then
// finds a slot instead of costing an exchange, and an idle slot costs
// nobody); a child with no rate keeps none.
int64_t LeaseHolder::peak_slots() const {
  int64_t running = 0;
  for (const Held& h : leases_) running += static_cast<int64_t>(h.running.size());
  const bool active = std::any_of(recent_sum_.begin(), recent_sum_.end(), [](int64_t v) { return v > 0; });
  const int64_t peak = peaks_.empty() ? 0 : peaks_.front().amount;
  const int64_t wanted = ample_ && !contended_ ? 2 * peak : peak;
  return active ? std::max<int64_t>(1, wanted - running) : 0;
}

int64_t LeaseHolder::slots_to_keep() const { return queued_slots() + peak_slots(); }

// Of the queued calls, how many the units it holds could start by `by`,
// highest priority first (a level's calls taken as equal in cost); with
// rate_span, then the calls its rate makes over it (at its recent cost per
// call) that the units left could start. Slots
// beyond these and its rate's are useless to it until units come: while
// other children wait for slots (contended_), it gives them back.
int64_t LeaseHolder::startable_calls(LeaseMillis by, LeaseMillis rate_span) const {
  const size_t n = config_.windows;
  std::vector<int64_t> usable(n, 0);
  for (const Held& h : leases_) {
    if (h.end <= by) continue;
    for (size_t k = 0; k < n; ++k) usable[k] += usable_by(h, k, by);
  }
  std::vector<DemandLevel> levels = queued_;
  sort_stable(levels, [](const DemandLevel& a, const DemandLevel& b) { return a.priority > b.priority; });
  int64_t calls = 0;
  for (const DemandLevel& d : levels) {
    int64_t fit = d.slots;
    for (size_t k = 0; k < n && k < d.units.size(); ++k) {
      if (d.units[k] > 0) fit = std::min(fit, usable[k] * d.slots / d.units[k]);
    }
    for (size_t k = 0; k < n && k < d.units.size(); ++k) {
      if (d.slots > 0) usable[k] -= std::min(usable[k], (d.units[k] * fit + d.slots - 1) / d.slots);
    }
    calls += fit;
    if (fit < d.slots) return calls;  // a higher priority's call waits first
  }
  if (rate_span > 0 && config_.rate_ms > 0 && !recent_.empty()) {
    const int64_t taken = static_cast<int64_t>(recent_.size());
    int64_t fit = (taken * rate_span + config_.rate_ms - 1) / config_.rate_ms;
    for (size_t k = 0; k < n && k < recent_sum_.size(); ++k) {
      if (recent_sum_[k] > 0) fit = std::min(fit, usable[k] * taken / recent_sum_[k]);
    }
    calls += fit;
  }
  return calls;
}

// The slots that start `calls` calls within `span`, one after another: a
// slot serves span / d of them, d the mean time its recent calls held one,
// and kSlotHeadroom times that many, for calls that arrive and units that
// come back in bunches. Without a call measured yet, one slot per call.
int64_t LeaseHolder::slots_to_start(int64_t calls, LeaseMillis span) const {
  if (calls <= 0 || slot_times_.empty() || span <= 0) return std::max<int64_t>(0, calls);
  const int64_t n = static_cast<int64_t>(slot_times_.size());
  const int64_t concurrent = (calls * slot_time_sum_ + n * span - 1) / (n * span);
  return std::min(calls, kSlotHeadroom * concurrent + 1);
}

// The idle slots it keeps while other children wait for slots (returns):
// those that start within the lead the queued calls its units can start,
// and then its rate's calls, as far as its units go, at the pace its
// recent calls held a slot (slots_to_start), and never fewer than the
// queued calls its units can start. With the queue's alone, a child the
// hotspot had left gave back every slot whenever its queue was empty, and
// its next calls waited a round trip with units in hand; counting the
// queued calls as one slot each, a child with a backlog kept hundreds of
// idle slots for units that come back over the lead (build/lease_bench,
// 1 s window 150 ms from the root, 1.5x hotspot: 0.033 of the limit held
// with calls queued and no slot, 60% of the cap idle at the children).
int64_t LeaseHolder::slots_for_lead(LeaseMillis now) const {
  const LeaseMillis span = lead();
  return std::max(startable_calls(now + span), slots_to_start(startable_calls(now + span, span), span));
}

// Units of window k lease h can serve at `by`: what is left, and the used
// units that come back by then (recycle).
int64_t LeaseHolder::usable_by(const Held& h, size_t k, LeaseMillis by) const {
  int64_t n = h.left[k];
  if (k < h.uses.size() && k < config_.windows_ms.size()) {
    const LeaseMillis cycle = config_.clocks.outlast(config_.windows_ms[k]);
    for (const Use& u : h.uses[k]) {
      if (u.at + cycle > by) break;  // by time (folding keeps the order)
      n += u.amount;
    }
  }
  return n;
}

// Idle slots in the leases that will still hold units `span` from now. A
// lease's slots go back with its close once its units are spent
// (give_back), so a lease the queue and the rate will empty by then cannot
// count for the slots the child keeps: counted, the child asked for no
// slots while an old lease ran out, then stood without a slot for a round
// trip when that lease closed (npm run bench:regions: four calls waited
// 70-260 ms at one hand-over, 150 ms from the root). Calls still running
// on such a lease do not keep it: it closes once they end, which for
// short calls is within the lead too. Only while the root is short
// (!ample_) do its idle slots count until then, so children competing for
// the cap do not all ask for a second set (counted always, a child asked
// for a third of what it kept, and its calls waited for a slot for a
// round trip at every hand-over: build/lease_bench, 60 s windows 150 ms
// from the root, p99 wait 95-147 ms). The rate is taken from the leases
// that end first, as take() does.
int64_t LeaseHolder::lasting_free_slots(LeaseMillis now, LeaseMillis span) const {
  const size_t n = config_.windows;
  const LeaseMillis by = now + span;
  std::vector<int64_t> to_spend(n, 0);
  for (size_t k = 0; k < n; ++k) to_spend[k] = queued_units(k) + expected(k, span);
  int64_t free = 0;
  for (const Held& h : leases_) {
    if (h.end <= now + lead()) continue;
    bool had_units = false;
    bool keeps_units = false;
    for (size_t k = 0; k < n; ++k) {
      const int64_t usable = usable_by(h, k, by);
      const int64_t spent = std::min(usable, to_spend[k]);
      to_spend[k] -= spent;
      had_units |= usable > 0 || (k < h.uses.size() && !h.uses[k].empty());
      keeps_units |= usable > spent;
    }
    if (keeps_units || !had_units || (!ample_ && !h.running.empty())) free += usable_slots(h);
  }
  return free;
}

// The low mark: what it holds beyond the lead will not cover its queue and
// its rate over the lead, so a refresh sent now lands just in time. For
// slots: its queue's, or none idle left once the leases the rate empties
// within the lead have taken theirs back (not merely fewer than it keeps:
// that asked for a slot at a time, an exchange each; and never while it
// has none idle now: at a full cap that would ask on every reply).
ExchangeCause LeaseHolder::refresh_cause(LeaseMillis now) const {
  const size_t n = config_.windows;
  std::vector<int64_t> usable(n, 0);
  int64_t free = 0;
  for (const Held& h : leases_) {
    if (h.end <= now + lead()) continue;
    for (size_t k = 0; k < n; ++k) usable[k] += usable_by(h, k, now + lead());
    free += usable_slots(h);
  }
  for (size_t k = 0; k < n; ++k) {
    const int64_t need = queued_units(k) + expected(k, lead());
    if (need > 0 && usable[k] < need) return ExchangeCause::kUnits;
  }
  if (free < queued_slots()) return ExchangeCause::kQueuedSlots;
  if (free > 0 && slots_to_keep() > 0 && lasting_free_slots(now, lead()) == 0) return ExchangeCause::kKeptSlots;
  return ExchangeCause::kNone;
}

// How long a spent lease's close may wait for another reason to exchange:
// close_within_ms, and for long windows up to two stock spans (a steady
// child refreshes about once per span, so the close rides on the refresh
// instead of costing an exchange of its own; waiting one span, it raced
// the refresh and went alone about every other lease: 0.0065 exchanges per
// call for a 60 s window's slow children, 0.0002 with two), at most a
// quarter of the shortest window (it must land within a window of its
// uses, or they count until the lease's end instead).
LeaseMillis LeaseHolder::close_wait() const {
  if (config_.windows_ms.empty()) return config_.close_within_ms;
  LeaseMillis span = std::numeric_limits<LeaseMillis>::max();
  LeaseMillis shortest = std::numeric_limits<LeaseMillis>::max();
  for (size_t k = 0; k < config_.windows_ms.size(); ++k) {
    span = std::min(span, stock_span(k));
    shortest = std::min(shortest, config_.windows_ms[k]);
  }
  return std::max(config_.close_within_ms, std::min(2 * span, shortest / 4));
}

void ExchangeCauses::count(ExchangeCause cause) {
  switch (cause) {
    case ExchangeCause::kNone:
      return;
    case ExchangeCause::kPenalty:
      ++penalty;
      return;
    case ExchangeCause::kUnitsBack:
      ++units_back;
      return;
    case ExchangeCause::kSlotsBack:
      ++slots_back;
      return;
    case ExchangeCause::kCloses:
      ++closes;
      return;
    case ExchangeCause::kStarved:
      ++starved;
      return;
    case ExchangeCause::kUnits:
      ++units;
      return;
    case ExchangeCause::kQueuedSlots:
      ++queued_slots;
      return;
    case ExchangeCause::kKeptSlots:
      ++kept_slots;
      return;
  }
}

// Closes that give something back go at once (paced); a spent lease's close
// frees nothing the root does not already date, so it waits for another
// reason to exchange, at most close_wait(). Then asks: after a refusal
// not before the root said something may free, and only when starved or
// at the low mark. One decision, so what lease_bench counts is what sent.
ExchangeCause LeaseHolder::exchange_cause(LeaseMillis now) const {
  if (penalty_report_) return ExchangeCause::kPenalty;
  const auto any = [&](auto pred) { return std::any_of(pending_.begin(), pending_.end(), pred); };
  if (any([](const Pending& p) { return p.gives_units; })) return ExchangeCause::kUnitsBack;
  if (any([&](const Pending& p) { return urgent(p); })) return ExchangeCause::kSlotsBack;
  const LeaseMillis wait = close_wait();
  if (any([&](const Pending& p) { return p.closed_at + wait <= now; })) return ExchangeCause::kCloses;
  if (holds_spare_units(now)) return ExchangeCause::kUnitsBack;
  if (now < not_before_) return ExchangeCause::kNone;
  if (starved(now)) return ExchangeCause::kStarved;
  return refresh_cause(now);
}

std::vector<DemandLevel> LeaseHolder::demand(LeaseMillis now) const {
  const size_t n = config_.windows;
  // What will still be usable once a reply could be here.
  std::vector<int64_t> usable(n, 0);
  for (const Held& h : leases_) {
    if (h.end <= now + lead()) continue;
    for (size_t k = 0; k < n; ++k) usable[k] += usable_by(h, k, now + lead());
  }
  // Slots only from the leases that outlast the lead: the others' go back
  // with their close once they are spent.
  int64_t free_slots = lasting_free_slots(now, lead());
  std::vector<DemandLevel> levels = queued_;
  sort_stable(levels, [](const DemandLevel& a, const DemandLevel& b) { return a.priority > b.priority; });
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
  // The stock: the recent rate over the lead and the stock span, beyond the
  // queue, and the slots it keeps for it (slots_to_keep less the queue's).
  DemandLevel stock;
  stock.priority = levels.empty() ? 0 : levels.back().priority;
  stock.units.assign(n, 0);
  for (size_t k = 0; k < n; ++k) {
    stock.units[k] = std::max<int64_t>(0, expected(k, stock_span(k) + lead()) - usable[k]);
  }
  stock.slots = std::max<int64_t>(0, peak_slots() - free_slots);
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
//
// None while the root's last reply granted all the child asked (ample_):
// the root has room, and a child that asked too little (a ramp, a burst)
// asks again at once. Paced then too, 25 of 2,400 calls at 80 calls a
// second waited 214-324 ms early in `npm run bench:regions` (a 60 s
// window: 1 s of pacing, 250 ms while starved).
LeaseMillis LeaseHolder::spacing(LeaseMillis now) const {
  if (ample_) return 0;
  return starved(now) ? config_.refresh_ms / 4 : config_.refresh_ms;
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
    // A lease whose units come back before its end (recycle) is not spent.
    const bool spent = had_units && h.running.empty() &&
                       std::all_of(h.left.begin(), h.left.end(), [](int64_t v) { return v == 0; }) &&
                       !recycles_in_time(h);
    if ((spent || idle) && h.unreleased.empty()) {
      close(i);
    } else {
      ++i;
    }
  }
}

// The most unused units of window k worth keeping: what a refresh would
// bring it to (its queue and its rate over the lead and the stock span),
// less the used units that come back within the lead (recycle), which
// serve that rate too. With twice what a refresh asks (the rule before)
// and long leases, the children held a tenth of the limit idle while
// others waited for it (build/lease_bench, leaseMs 8000, 1 s window 150 ms
// from the root, 1.5x 80/20, three seeds: use 0.775 with the
// contended-slots rule alone, 0.844 with this rule too, 0.806 and 0.814
// with only its recycled units or only its single measure).
int64_t LeaseHolder::units_to_keep(size_t k, LeaseMillis now) const {
  int64_t recycling = 0;
  for (const Held& h : leases_) {
    if (h.end > now + lead()) recycling += usable_by(h, k, now + lead()) - h.left[k];
  }
  int64_t need = expected(k, lead() + stock_span(k));
  // With nothing queued, the rate of the last quarter of rate_ms when it
  // is lower: a child whose backlog just emptied (the hotspot moved on)
  // otherwise keeps what its backlog took over the last rate_ms, while the
  // units that come back to it sit idle until that rate has decayed.
  const LeaseMillis recent_ms = config_.rate_ms / 4;
  if (queued_units(k) == 0 && recent_ms > 0 && !recent_.empty() && recent_.front() <= now - config_.rate_ms / 2) {
    const int64_t taken = k < lull_sum_.size() ? lull_sum_[k] : 0;
    need = std::min(need, (taken * (lead() + stock_span(k)) + recent_ms - 1) / recent_ms);
  }
  return std::max<int64_t>(0, queued_units(k) + need + 1 - recycling);
}

// While the root is short (its last reply granted less than asked), unused
// units beyond twice units_to_keep are worth an exchange of their own: a
// child whose rate fell (a hotspot moved on) otherwise sits on them until
// it next needs something, which with long leases and recycled units may
// be the lease's end. Not before its rate has half of rate_ms of history:
// a child just granted units for a burst would read a rate near zero and
// give them straight back.
bool LeaseHolder::holds_spare_units(LeaseMillis now) const {
  if (ample_ || (!recent_.empty() && recent_.front() > now - config_.rate_ms / 2)) return false;
  for (size_t k = 0; k < config_.windows; ++k) {
    int64_t left = 0;
    for (const Held& h : leases_) left += h.end > now ? h.left[k] : 0;
    if (left > 2 * units_to_keep(k, now) + 1) return true;
  }
  return false;
}

std::vector<LeaseReturn> LeaseHolder::returns(LeaseMillis now) {
  const size_t n = config_.windows;
  // Units: walking the leases by end, keep what the rate (with half again of
  // headroom) and the queue can spend before each ends, and never more than
  // units_to_keep; the rest lapses unused otherwise, or sits idle while
  // another child could have it.
  for (size_t k = 0; k < n; ++k) {
    const int64_t queued = queued_units(k);
    const int64_t most = units_to_keep(k, now);
    int64_t kept = 0;
    // A used unit comes back after outlast(T) (recycle), so no lease needs
    // stock for longer than that: its units serve the rate again after it.
    const LeaseMillis cycle = k < config_.windows_ms.size() ? config_.clocks.outlast(config_.windows_ms[k])
                                                            : std::numeric_limits<LeaseMillis>::max();
    for (Held& h : leases_) {
      if (h.end <= now) continue;
      const int64_t spendable = queued + expected(k, std::min(h.end - now, cycle) * 3 / 2) + 1;
      const int64_t keep =
          std::min({h.left[k], std::max<int64_t>(0, spendable - kept), std::max<int64_t>(0, most - kept)});
      h.returned[k] += h.left[k] - keep;
      h.left[k] = keep;
      kept += keep;
    }
  }
  // Slots: idle ones beyond what it keeps, from the leases that end last;
  // what it keeps counts only the leases that outlast the lead, as demand()
  // does (a spent lease's slots go back with its close).
  int64_t excess = lasting_free_slots(now, lead()) - slots_to_keep();
  if (contended_) {
    // Every idle slot counts then, also those of a lease whose units are
    // out until they come back: kept, they serve no call, and the child
    // short of them has the units. It keeps those slots_for_lead says, and
    // no peak: with leases longer than the window the
    // children kept 56% of the cap idle for peaks while a sibling's units
    // waited for a slot (build/lease_bench, leaseMs 8000, 1 s window 150 ms
    // from the root, 1.5x uniform: use 0.775 -> 0.896).
    int64_t free = 0;
    for (const Held& h : leases_) free += h.end > now ? usable_slots(h) : 0;
    const int64_t keep = slots_for_lead(now);
    excess = std::max(excess, free - keep);
  }
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

}  // namespace drl::internal
