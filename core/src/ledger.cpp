// The root's ledger: see ledger.h for the contract, docs/leases.md for why
// each end below over-counts.
#include "ledger.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "sort.h"

namespace drl::internal {

bool LeaseRow::operator==(const LeaseRow& o) const {
  return lease_id == o.lease_id && child == o.child && incarnation == o.incarnation && end_at == o.end_at &&
         units == o.units && slots == o.slots && returned == o.returned && slots_returned == o.slots_returned &&
         closed == o.closed && uses == o.uses && running_at == o.running_at;
}

namespace {

bool same_demand(const std::vector<DemandLevel>& a, const std::vector<DemandLevel>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].priority != b[i].priority || a[i].units != b[i].units || a[i].slots != b[i].slots) return false;
  }
  return true;
}

bool same_grant(const LeaseGrant& a, const LeaseGrant& b) {
  return a.child == b.child && a.incarnation == b.incarnation && a.seq == b.seq && a.lease_id == b.lease_id &&
         a.units == b.units && a.slots == b.slots && a.duration_ms == b.duration_ms && a.refusal == b.refusal &&
         a.retry_in_ms == b.retry_in_ms;
}

// What a level wants in dimension k (k == windows: slots).
int64_t want(const DemandLevel& level, size_t k, size_t windows) {
  if (k == windows) return level.slots;
  return k < level.units.size() ? level.units[k] : 0;
}

// The reply to `ex` before anything is decided: addressed, granting nothing.
LeaseGrant reply_to(const Exchange& ex) {
  LeaseGrant g;
  g.child = ex.child;
  g.incarnation = ex.incarnation;
  g.seq = ex.seq;
  return g;
}

}  // namespace

bool ChildRow::operator==(const ChildRow& o) const {
  return child == o.child && incarnation == o.incarnation && last_seq == o.last_seq &&
         same_grant(last_reply, o.last_reply) && same_demand(demand, o.demand) && demand_at == o.demand_at;
}

void LedgerRows::apply(const LedgerWrite& w) {
  switch (w.kind) {
    case LedgerWrite::Kind::kPutLease:
      leases[w.lease.lease_id] = w.lease;
      break;
    case LedgerWrite::Kind::kDeleteLease:
      leases.erase(w.id);
      break;
    case LedgerWrite::Kind::kPutChild:
      children[w.child.child] = w.child;
      break;
    case LedgerWrite::Kind::kPutNextLeaseId:
      next_lease_id = w.id;
      break;
  }
}

bool LedgerRows::operator==(const LedgerRows& o) const {
  return leases == o.leases && children == o.children && next_lease_id == o.next_lease_id;
}

Ledger::Ledger(LedgerConfig config) : config_(std::move(config)) {}

void Ledger::set_limits(std::vector<int64_t> limits, int64_t concurrency) {
  config_.limits = std::move(limits);
  config_.concurrency = concurrency;
}

void Ledger::restore(const LedgerRows& rows, LeaseMillis now) {
  rows_ = rows;
  now_ = std::max(now_, now);
}

LeaseMillis Ledger::hold(size_t k) const {
  return config_.clocks.stretch(k == windows() ? config_.attempt_timeout_ms : config_.windows_ms[k]);
}

LeaseMillis Ledger::penalty_left(LeaseMillis now) const {
  return config_.clocks.left_after(penalty_ms_, std::max(now, now_) - penalty_at_);
}

// What the children other than `child` want of dimension k (k ==
// windows(): slots) beyond what is free at `now`, from their demand not yet
// forgotten.
int64_t Ledger::others_short(uint64_t child, size_t k, LeaseMillis now) const {
  now = std::max(now, now_);
  int64_t wanted = 0;
  for (const auto& [id, row] : rows_.children) {
    if (id == child || row.demand_at + config_.demand_ttl_ms <= now) continue;
    for (const DemandLevel& d : row.demand) wanted += k == windows() ? d.slots : k < d.units.size() ? d.units[k] : 0;
  }
  if (wanted == 0) return 0;
  return std::max<int64_t>(0, wanted - std::max<int64_t>(0, limit(k) - occupancy(k, now)));
}

int64_t Ledger::slots_wanted(uint64_t child, LeaseMillis now) const { return others_short(child, windows(), now); }

int64_t Ledger::units_wanted(uint64_t child, LeaseMillis now) const {
  int64_t most = 0;
  for (size_t k = 0; k < windows(); ++k) most = std::max(most, others_short(child, k, now));
  return most;
}

void Ledger::stamp(LeaseGrant& reply, LeaseMillis now) const {
  reply.penalty_ms = penalty_left(now);
  reply.slots_wanted = slots_wanted(reply.child, now);
  reply.units_wanted = units_wanted(reply.child, now);
}

LeaseMillis Ledger::duration(const Exchange& ex) const {
  if (config_.max_lease_ms <= config_.lease_ms || config_.windows_ms.empty()) return config_.lease_ms;
  const LeaseMillis shortest = *std::min_element(config_.windows_ms.begin(), config_.windows_ms.end());
  // A far child's exchanges are on the way for a round trip each: a lease
  // of kRoundTripsPerLease of them spends at most a 32nd of its time there.
  const LeaseMillis far = std::min(ex.round_trip_ms, config_.max_lease_ms) * kRoundTripsPerLease;
  return std::clamp(std::max(shortest / 2, far), config_.lease_ms, config_.max_lease_ms);
}

// What the ledger may lend: the limit less every child's floor.
int64_t Ledger::limit(size_t k) const {
  int64_t l = k == windows() ? config_.concurrency : k < config_.limits.size() ? config_.limits[k] : 0;
  for (const auto& [child, floor] : config_.floors) {
    l -= k == windows() ? floor.slots : k < floor.units.size() ? floor.units[k] : 0;
  }
  return std::max<int64_t>(0, l);
}

std::string Ledger::check_config(const LedgerConfig& config) {
  std::string why;
  const size_t n = config.windows_ms.size();
  for (const auto& [child, floor] : config.floors) {
    if (floor.units.size() > n)
      why += "the floor of child " + std::to_string(child) + " names more windows than the bucket; ";
    if (floor.slots < 0 || std::any_of(floor.units.begin(), floor.units.end(), [](int64_t u) { return u < 0; })) {
      why += "the floor of child " + std::to_string(child) + " is negative; ";
    }
  }
  for (size_t k = 0; k <= n; ++k) {
    int64_t reserved = 0;
    for (const auto& [child, floor] : config.floors) {
      reserved += k == n ? floor.slots : k < floor.units.size() ? floor.units[k] : 0;
    }
    const int64_t l = k == n ? config.concurrency : k < config.limits.size() ? config.limits[k] : 0;
    if (reserved <= l) continue;
    why += "floors reserve " + std::to_string(reserved);
    why += k == n ? " slots, above the concurrency "
                  : " units of window " + std::to_string(k) + " (" + std::to_string(config.windows_ms[k]) +
                        " ms), above its limit ";
    why += std::to_string(l) + "; ";
  }
  if (!why.empty()) why = "lease config refused: " + why.substr(0, why.size() - 2);
  return why;
}

template <typename Fn>
void Ledger::for_each_interval(const LeaseRow& lease, Fn fn) const {
  const size_t n = windows();
  if (!lease.closed) {
    // Nothing reported yet: every unit not returned counts until the end
    // of the lease at the root plus the window (docs/leases.md).
    for (size_t k = 0; k < n; ++k) fn(k, lease.end_at + hold(k), lease.units[k] - lease.returned[k]);
    fn(n, lease.end_at + hold(n), lease.slots - lease.slots_returned);
    return;
  }
  for (size_t k = 0; k < n; ++k) {
    for (const DatedUse& u : lease.uses[k]) fn(k, u.at + hold(k), u.amount);
  }
  for (LeaseMillis at : lease.running_at) fn(n, at + hold(n), 1);
}

int64_t Ledger::occupancy(size_t k, LeaseMillis now) const {
  now = std::max(now, now_);
  int64_t total = 0;
  for (const auto& [id, lease] : rows_.leases) {
    for_each_interval(lease, [&](size_t dim, LeaseMillis end, int64_t amount) {
      if (dim == k && end > now) total += amount;
    });
  }
  return total;
}

std::string Ledger::check(const Exchange& ex) const {
  // Built with std::string alone: <sstream> would pull the locale, and with
  // it environment imports, into core.wasm.
  std::string why;
  const size_t n = windows();
  if (ex.child == 0) why += "child is 0; ";
  if (ex.incarnation == 0) why += "incarnation is 0; ";
  if (ex.seq == 0) why += "seq is 0; ";
  if (ex.penalty_ms < 0) why += "penalty_ms is negative; ";
  for (size_t i = 0; i < ex.closes.size(); ++i) {
    const LeaseClose& c = ex.closes[i];
    if (c.uses.size() > n)
      why += "closes[" + std::to_string(i) + "].uses has " + std::to_string(c.uses.size()) + " windows, the bucket " +
             std::to_string(n) + "; ";
    for (const auto& window : c.uses) {
      for (const UseGroup& g : window) {
        if (g.age_ms < 0 || g.amount < 0) why += "closes[" + std::to_string(i) + "] has a negative age or amount; ";
      }
    }
    for (LeaseMillis age : c.running_ages) {
      if (age < 0) why += "closes[" + std::to_string(i) + "].running_ages has a negative age; ";
    }
  }
  for (size_t i = 0; i < ex.returns.size(); ++i) {
    const LeaseReturn& r = ex.returns[i];
    if (r.units.size() > n)
      why += "returns[" + std::to_string(i) + "].units has " + std::to_string(r.units.size()) +
             " windows, the bucket " + std::to_string(n) + "; ";
    if (r.slots < 0 || std::any_of(r.units.begin(), r.units.end(), [](int64_t u) { return u < 0; })) {
      why += "returns[" + std::to_string(i) + "] has a negative amount; ";
    }
  }
  for (size_t i = 0; i < ex.demand.size(); ++i) {
    const DemandLevel& d = ex.demand[i];
    if (d.units.size() > n)
      why += "demand[" + std::to_string(i) + "].units has " + std::to_string(d.units.size()) + " windows, the bucket " +
             std::to_string(n) + "; ";
    if (d.slots < 0 || std::any_of(d.units.begin(), d.units.end(), [](int64_t u) { return u < 0; })) {
      why += "demand[" + std::to_string(i) + "] has a negative amount; ";
    }
  }
  if (!why.empty()) why = "lease exchange refused: " + why.substr(0, why.size() - 2);
  return why;
}

bool Ledger::apply_close(const LeaseClose& close, const Exchange& ex, LeaseMillis now,
                         std::vector<LedgerWrite>& writes) {
  auto it = rows_.leases.find(close.lease_id);
  // Unknown (lapsed and forgotten, or never durable: then never delivered),
  // another child's, or closed already: a close is stated once.
  if (it == rows_.leases.end()) return false;
  LeaseRow& lease = it->second;
  if (lease.child != ex.child || lease.incarnation != ex.incarnation || lease.closed) return false;
  const size_t n = windows();
  // A date no earlier than the use (the lag of the use's reading and of the
  // receipt's), and never later than the lease's own end, which already
  // bounds every use of it: so a report can only move an end earlier.
  const auto dated = [&](LeaseMillis age) {
    return std::min(now - age + config_.clocks.dating_margin(), lease.end_at);
  };
  ChildTally& t = tally(ex.child, now);
  lease.closed = true;
  lease.uses.assign(n, {});
  for (size_t k = 0; k < n && k < close.uses.size(); ++k) {
    for (const UseGroup& g : close.uses[k]) {
      if (g.amount > 0) lease.uses[k].push_back({dated(g.age_ms), g.amount});
      t.used[k] += std::max<int64_t>(0, g.amount);
    }
  }
  // What was leased and neither returned before nor used comes back now.
  for (size_t k = 0; k < n; ++k) {
    int64_t used = 0;
    for (const DatedUse& u : lease.uses[k]) used += u.amount;
    t.returned[k] += std::max<int64_t>(0, lease.units[k] - lease.returned[k] - used);
  }
  t.returned[n] +=
      std::max<int64_t>(0, lease.slots - lease.slots_returned - static_cast<int64_t>(close.running_ages.size()));
  lease.running_at.clear();
  for (LeaseMillis age : close.running_ages) lease.running_at.push_back(dated(age));
  lease.returned.assign(n, 0);
  lease.slots_returned = 0;
  LedgerWrite w;
  w.kind = LedgerWrite::Kind::kPutLease;
  w.lease = lease;
  writes.push_back(std::move(w));
  return true;
}

bool Ledger::apply_return(const LeaseReturn& ret, const Exchange& ex, std::vector<LedgerWrite>& writes) {
  auto it = rows_.leases.find(ret.lease_id);
  if (it == rows_.leases.end()) return false;
  LeaseRow& lease = it->second;
  if (lease.child != ex.child || lease.incarnation != ex.incarnation || lease.closed) return false;
  bool changed = false;
  ChildTally& t = tally(ex.child, now_);
  // Cumulative: the largest seen wins, so a duplicate or an older return
  // changes nothing; never more than was leased.
  for (size_t k = 0; k < ret.units.size(); ++k) {
    const int64_t v = std::min(ret.units[k], lease.units[k]);
    if (v > lease.returned[k]) t.returned[k] += v - lease.returned[k], lease.returned[k] = v, changed = true;
  }
  const int64_t s = std::min(ret.slots, lease.slots);
  if (s > lease.slots_returned)
    t.returned[windows()] += s - lease.slots_returned, lease.slots_returned = s, changed = true;
  if (changed) {
    LedgerWrite w;
    w.kind = LedgerWrite::Kind::kPutLease;
    w.lease = lease;
    writes.push_back(std::move(w));
  }
  return changed;
}

void Ledger::prune(LeaseMillis now, std::vector<LedgerWrite>& writes) {
  for (auto it = rows_.leases.begin(); it != rows_.leases.end();) {
    bool live = false;
    for_each_interval(it->second, [&](size_t, LeaseMillis end, int64_t amount) { live |= amount > 0 && end > now; });
    if (live) {
      ++it;
      continue;
    }
    LedgerWrite w;
    w.kind = LedgerWrite::Kind::kDeleteLease;
    w.id = it->first;
    writes.push_back(std::move(w));
    it = rows_.leases.erase(it);
  }
}

// The asking child's max-min fair share in dimension k, by what each child
// holds (counts at the root now) plus what it wants: level by level from
// the highest priority, a water level rises until what is free is shared
// out; a child at or above it gets nothing more, one below it is topped up
// to it or to its want. So what is free goes to the children furthest
// below their share, and the asker takes all it is owed now: nothing is
// held back for a sibling that already holds its share (held back, it would
// sit idle until that sibling's next exchange).
int64_t Ledger::fair_share(size_t k, uint64_t child, int64_t free, LeaseMillis now) const {
  const size_t n = windows();
  std::map<uint64_t, int64_t> held;
  for (const auto& entry : rows_.leases) {
    const uint64_t owner = entry.second.child;
    for_each_interval(entry.second, [&](size_t dim, LeaseMillis end, int64_t amount) {
      if (dim == k && end > now && amount > 0) held[owner] += amount;
    });
  }
  std::map<int32_t, std::vector<std::pair<uint64_t, int64_t>>, std::greater<int32_t>> levels;  // (child, want)
  for (const auto& [id, row] : rows_.children) {
    if (id != child && row.demand_at + config_.demand_ttl_ms <= now) continue;
    for (const DemandLevel& d : row.demand) {
      const int64_t w = want(d, k, n);
      if (w <= 0) continue;
      // One want per child and priority: a child's queue and its stock go
      // at one priority, and two entries of one child would each be capped
      // at the water level the other's share already raised it to.
      auto& wants = levels[d.priority];
      const uint64_t owner = id;  // named: a lambda cannot capture a structured binding in C++17
      const auto same = std::find_if(wants.begin(), wants.end(), [&](const auto& e) { return e.first == owner; });
      if (same == wants.end()) {
        wants.push_back({id, w});
      } else {
        same->second += w;
      }
    }
  }
  int64_t share = 0;
  for (const auto& level : levels) {
    if (free <= 0) break;
    const auto& wants = level.second;  // named: a lambda cannot capture a structured binding in C++17
    // What the level would hand out at water level x.
    const auto handed = [&](int64_t x) {
      int64_t total = 0;
      for (const auto& [id, w] : wants) total += std::max<int64_t>(0, std::min(held[id] + w, x) - held[id]);
      return total;
    };
    int64_t lo = 0, hi = 0;
    for (const auto& [id, w] : wants) hi = std::max(hi, held[id] + w);
    if (handed(hi) > free) {
      // The least level that hands out all that is free (rounded up: a
      // split of 1 among 3 still gives someone the unit).
      while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (handed(mid) >= free) {
          hi = mid;
        } else {
          lo = mid + 1;
        }
      }
    }
    for (const auto& [id, w] : wants) {
      const int64_t got = std::min(free, std::max<int64_t>(0, std::min(held[id] + w, hi) - held[id]));
      if (id == child) share += got;
      held[id] += got;
      free -= got;
    }
  }
  return share;
}

LeaseGrant Ledger::decide(const Exchange& ex, ChildRow& row, LeaseMillis now, std::vector<LedgerWrite>& writes) {
  LeaseGrant g = reply_to(ex);
  const size_t n = windows();
  row.demand = ex.demand;
  row.demand_at = now;
  std::vector<int64_t> asked(n + 1, 0), got(n + 1, 0);
  for (const DemandLevel& d : ex.demand) {
    for (size_t k = 0; k <= n; ++k) asked[k] += want(d, k, n);
  }
  if (std::all_of(asked.begin(), asked.end(), [](int64_t a) { return a == 0; })) {
    g.refusal = Refusal::kNothingAsked;
    return g;
  }
  LeaseMillis next_free = std::numeric_limits<LeaseMillis>::max();
  bool short_of_units = false, got_any = false;
  for (size_t k = 0; k <= n; ++k) {
    if (asked[k] == 0) continue;
    const int64_t free = std::max<int64_t>(0, limit(k) - occupancy(k, now));
    got[k] = fair_share(k, ex.child, free, now);
    got_any |= got[k] > 0;
    if (got[k] > 0) continue;
    // Units of one window are useless without the others a call needs:
    // then nothing, until the first interval of that window ends. Slots
    // alone may be short (the child may hold some).
    short_of_units |= k < n;
    for (const auto& [id, lease] : rows_.leases) {
      for_each_interval(lease, [&](size_t dim, LeaseMillis end, int64_t amount) {
        if (dim == k && amount > 0 && end > now) next_free = std::min(next_free, end);
      });
    }
  }
  // Short of units, it lends the slots alone: the child may hold units
  // that wait for a slot (a lease longer than the window reuses its units,
  // and a child refused for units would otherwise get no slot to start
  // them with).
  if (short_of_units) std::fill(got.begin(), got.begin() + static_cast<std::ptrdiff_t>(n), 0);
  if (short_of_units || !got_any) {
    // The first end the ledger knows of; a close from another child may free
    // units sooner, so never more than a quarter of the shortest window
    // (also when nothing counts at all: a limit cut below the ask).
    LeaseMillis shortest = config_.windows_ms.empty() ? config_.lease_ms : config_.windows_ms[0];
    for (LeaseMillis t : config_.windows_ms) shortest = std::min(shortest, t);
    const LeaseMillis cap = std::max<LeaseMillis>(1, shortest / 4);
    g.retry_in_ms = next_free == std::numeric_limits<LeaseMillis>::max() ? cap : std::min(cap, next_free - now);
    if (got[n] == 0) {
      g.refusal = Refusal::kNothingFree;
      return g;
    }
  }
  LeaseRow lease;
  lease.lease_id = rows_.next_lease_id++;
  lease.child = ex.child;
  lease.incarnation = ex.incarnation;
  lease.end_at = now + config_.clocks.lease_end_extra(duration(ex));
  lease.units.assign(got.begin(), got.begin() + static_cast<std::ptrdiff_t>(n));
  lease.slots = got[n];
  lease.returned.assign(n, 0);
  ChildTally& t = tally(ex.child, now);
  for (size_t k = 0; k <= n; ++k) t.granted[k] += got[k];
  t.lease_ms = duration(ex);
  g.lease_id = lease.lease_id;
  g.units = lease.units;
  g.slots = lease.slots;
  g.duration_ms = duration(ex);
  // What it still wants, for the shares of the others: less what it got,
  // taken from its highest levels first.
  sort_stable(row.demand, [](const DemandLevel& a, const DemandLevel& b) { return a.priority > b.priority; });
  for (size_t k = 0; k <= n; ++k) {
    int64_t left = got[k];
    for (DemandLevel& d : row.demand) {
      if (k < n) {
        if (k >= d.units.size()) continue;
        const int64_t t = std::min(left, d.units[k]);
        d.units[k] -= t, left -= t;
      } else {
        const int64_t t = std::min(left, d.slots);
        d.slots -= t, left -= t;
      }
    }
  }
  LedgerWrite lw;
  lw.kind = LedgerWrite::Kind::kPutLease;
  lw.lease = lease;
  writes.push_back(std::move(lw));
  LedgerWrite nw;
  nw.kind = LedgerWrite::Kind::kPutNextLeaseId;
  nw.id = rows_.next_lease_id;
  writes.push_back(std::move(nw));
  rows_.leases.emplace(lease.lease_id, std::move(lease));
  return g;
}

ChildTally& Ledger::tally(uint64_t child, LeaseMillis now) {
  ChildTally& t = tallies_[child];
  if (t.exchanges == 0 && t.first_at == 0) t.first_at = now;
  t.last_at = std::max(t.last_at, now);
  const size_t dims = windows() + 1;
  if (t.granted.size() != dims) t.granted.resize(dims), t.returned.resize(dims), t.used.resize(dims);
  return t;
}

std::vector<ChildView> Ledger::children(LeaseMillis now) const {
  now = std::max(now, now_);
  const size_t n = windows();
  std::map<uint64_t, ChildView> views;
  const auto view = [&](uint64_t child) -> ChildView& {
    ChildView& v = views[child];
    if (v.held.empty()) {
      v.child = child;
      v.held.assign(n + 1, 0), v.used.assign(n + 1, 0), v.lapsed.assign(n + 1, 0), v.wanted.assign(n + 1, 0);
    }
    return v;
  };
  for (const auto& [id, row] : rows_.children) {
    ChildView& v = view(id);
    v.incarnation = row.incarnation;
    if (row.demand_at + config_.demand_ttl_ms <= now) continue;  // forgotten, as fair_share forgets it
    for (const DemandLevel& d : row.demand) {
      for (size_t k = 0; k <= n; ++k) v.wanted[k] += want(d, k, n);
    }
  }
  for (const auto& entry : rows_.leases) {
    const LeaseRow& lease = entry.second;  // named: a lambda cannot capture a structured binding in C++17
    ChildView& v = view(lease.child);
    const bool superseded = lease.incarnation < v.incarnation;
    for_each_interval(lease, [&](size_t k, LeaseMillis end, int64_t amount) {
      if (end <= now || amount <= 0) return;
      if (lease.closed) {
        v.used[k] += amount;
      } else if (superseded || lease.end_at <= now) {
        v.lapsed[k] += amount;
      } else {
        v.held[k] += amount;
      }
    });
  }
  for (const auto& [id, t] : tallies_) view(id).tally = t;
  std::vector<ChildView> out;
  out.reserve(views.size());
  for (auto& [id, v] : views) out.push_back(std::move(v));
  return out;
}

ExchangeResult Ledger::on_exchange(const Exchange& ex, LeaseMillis now) {
  now = now_ = std::max(now, now_);
  ExchangeResult result;
  result.error = check(ex);
  if (!result.error.empty()) {
    result.reply = reply_to(ex);
    result.reply->refusal = Refusal::kMalformed;
    return result;
  }
  // Closes and returns are true whenever they were sent, so every copy of
  // every message applies them (idempotent: a lease closes once, a return
  // only grows).
  if (ex.penalty_ms > 0 &&
      now + config_.clocks.outlast(ex.penalty_ms) > penalty_at_ + config_.clocks.outlast(penalty_ms_)) {
    penalty_at_ = now;
    penalty_ms_ = ex.penalty_ms;
    result.notice = PenaltyNotice{ex.penalty_ms};
  }
  for (const LeaseClose& c : ex.closes) apply_close(c, ex, now, result.writes);
  for (const LeaseReturn& r : ex.returns) apply_return(r, ex, result.writes);
  prune(now, result.writes);

  auto it = rows_.children.find(ex.child);
  if (it != rows_.children.end() && ex.incarnation < it->second.incarnation) {
    result.reply = reply_to(ex);
    result.reply->refusal = Refusal::kStaleIncarnation;
    stamp(*result.reply, now);
    return result;
  }
  if (it == rows_.children.end() || ex.incarnation > it->second.incarnation) {
    // A child new to the ledger, or restarted: its old leases lapse.
    ChildRow fresh;
    fresh.child = ex.child;
    fresh.incarnation = ex.incarnation;
    it = rows_.children.insert_or_assign(ex.child, fresh).first;
  }
  ChildRow& row = it->second;
  if (ex.seq < row.last_seq) return result;  // its reply was answered and superseded
  if (ex.seq == row.last_seq) {
    result.reply = row.last_reply;  // a retry: the same answer, not a second lease
    stamp(*result.reply, now);
    return result;
  }
  row.last_seq = ex.seq;
  ChildTally& t = tally(ex.child, now);
  ++t.exchanges;
  t.round_trip_ms = ex.round_trip_ms;
  row.last_reply = decide(ex, row, now, result.writes);
  result.reply = row.last_reply;
  // Not stored: a resent reply carries what is left when it is resent.
  stamp(*result.reply, now);
  LedgerWrite cw;
  cw.kind = LedgerWrite::Kind::kPutChild;
  cw.child = row;
  result.writes.push_back(std::move(cw));
  return result;
}

}  // namespace drl::internal
