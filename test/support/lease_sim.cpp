// The lease tree simulation: see lease_sim.h.
#include "lease_sim.h"

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <queue>
#include <random>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "drl/config.h"
#include "lease_engine_child.h"
#include "lease_holder.h"
#include "lease_wire.h"
#include "ledger.h"
#include "tree_config.h"

namespace drl::testing {

namespace {

using internal::Exchange;
using internal::LeaseGrant;
using internal::LeaseHolder;
using internal::LeaseMillis;
using internal::Ledger;
using internal::LedgerRows;
using internal::LedgerWrite;

// A node's clock: offset + real time at its own rate, read with a lag.
struct Clock {
  int64_t offset = 0;
  int64_t drift_ppm = 0;  // within the bound the components are told
  int64_t max_lag = 0;    // < the slack: the integer reading adds up to 1 ms
  LeaseMillis read(int64_t t, std::mt19937_64& rng) const {
    const int64_t base = offset + t + (t * drift_ppm) / 1'000'000 - (t * drift_ppm % 1'000'000 < 0 ? 1 : 0);
    const int64_t lag = max_lag > 0 ? static_cast<int64_t>(rng() % static_cast<uint64_t>(max_lag + 1)) : 0;
    return base - lag;
  }
};

struct Call {
  int64_t arrived = 0;
  int32_t priority = 0;
  std::vector<int64_t> cost;
  int64_t duration = 0;
};

// A child's callers waiting, by priority (highest first), each level in
// arrival order, with the sums the holder is told kept as they change (a
// queue of thousands is walked only when callers give up).
struct CallQueue {
  std::map<int32_t, std::deque<Call>, std::greater<int32_t>> levels;
  std::map<int32_t, internal::DemandLevel> sums;
  void push(const Call& call) {
    levels[call.priority].push_back(call);
    add(call, 1);
  }
  const Call* head() const {
    for (const auto& [p, q] : levels) {
      if (!q.empty()) return &q.front();
    }
    return nullptr;
  }
  void pop_head() {
    for (auto& [p, q] : levels) {
      if (q.empty()) continue;
      add(q.front(), -1);
      q.pop_front();
      return;
    }
  }
  void give_up_before(int64_t t) {  // callers who arrived before t leave
    for (auto& [p, q] : levels) {
      while (!q.empty() && q.front().arrived < t) add(q.front(), -1), q.pop_front();
    }
  }
  void clear() { levels.clear(), sums.clear(); }
  std::vector<internal::DemandLevel> demand() const {
    std::vector<internal::DemandLevel> out;
    for (const auto& [p, d] : sums) {
      if (d.slots > 0) out.push_back(d);
    }
    return out;
  }

 private:
  void add(const Call& call, int64_t sign) {
    auto& d = sums[call.priority];
    d.priority = call.priority;
    d.units.resize(call.cost.size(), 0);
    for (size_t k = 0; k < call.cost.size(); ++k) d.units[k] += sign * call.cost[k];
    d.slots += sign;
  }
};

struct Child {
  Clock clock;
  bool up = true;
  uint64_t incarnation = 1;
  std::unique_ptr<LeaseHolder> holder;
  CallQueue queue;
  int64_t wake_at = -1;  // the real time of the step scheduled for next_wake
  int64_t near = true;
  std::vector<std::pair<int64_t, int64_t>> partitions;  // real [from, to)
  std::map<uint64_t, LeaseMillis> first_sent;           // seq -> reading (the third fault's rewrite)
  // Engines: the child engine, its callers by ticket until they start, and
  // the wait of a 429 its next report brings.
  std::unique_ptr<EngineChild> engine;
  std::map<Ticket, Call> waiting;
  int64_t next_429 = 0;
  // When its last started callbacks left: a host's commits are durable in
  // order, so a step's callbacks never leave before an earlier step's (the
  // contract of LeaseHolder::release: a release covers starts that left).
  int64_t last_left = 0;
  uint64_t late_seen = 0;  // its engine's late releases already counted
};

class Sim {
 public:
  explicit Sim(const LeaseSimOptions& o) : options_(o), rng_(o.seed * 0x9E3779B97F4A7C15ULL + 17) { setup(); }
  LeaseSimResult run();

 private:
  int64_t uniform(int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(rng_() % static_cast<uint64_t>(hi - lo + 1));
  }
  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  void at(int64_t t, std::function<void()> fn) { events_.push({t, order_++, std::move(fn)}); }
  void setup();
  void setup_scenario(const LeaseScenario& s);
  void arrive(size_t i, const Call& call);
  internal::HolderConfig holder_config(size_t i) const;
  bool partitioned(const Child& c, int64_t t) const;
  int64_t latency(const Child& c) {
    if (far_ms_ > 0) return uniform(far_ms_ - 5, far_ms_ + 5);
    return c.near ? uniform(1, 3) : uniform(40, 150);
  }
  void send_to_root(size_t i, const Exchange& ex, int64_t t);
  void deliver(size_t i, LeaseGrant g, int64_t t, uint64_t incarnation);
  void notify(size_t from, internal::PenaltyNotice notice, int64_t t);
  void penalty(size_t i, int64_t t, int64_t duration);
  int64_t max_latency(const Child& c) const { return far_ms_ > 0 ? far_ms_ + 5 : c.near ? 3 : 150; }
  void root_receive(size_t i, Exchange ex, int64_t t);
  void step_child(size_t i, int64_t t);
  // Engines: the child's engine at real time t, and what a host does with a step.
  void make_engine(size_t i, int64_t t);
  void handle(size_t i, int64_t t, EngineChild::Step step);
  void schedule_wake(size_t i, int64_t t, LeaseMillis now, std::optional<LeaseMillis> wake);
  void crash_root(int64_t t);
  void check();

  struct Event {
    int64_t t;
    uint64_t order;
    std::function<void()> fn;
    bool operator<(const Event& o) const { return t != o.t ? t > o.t : order > o.order; }
  };

  LeaseSimOptions options_;
  std::mt19937_64 rng_;
  std::priority_queue<Event> events_;
  uint64_t order_ = 0;
  LeaseSimResult result_;
  std::ostringstream setup_;

  // The bucket.
  internal::LedgerConfig config_;
  std::vector<int64_t> limits_;
  int64_t run_ms_ = 0;
  // Whether `t` is at steady load: after the first window (the children's
  // ramp from no history), before the callers stop.
  bool steady(int64_t t) const { return t >= config_.windows_ms[0] && t < run_ms_; }
  double loss_ = 0, dup_ = 0, delay_ = 0;
  internal::ClockBounds bounds_;
  LeaseMillis retry_ms_ = 0, idle_ms_ = 0, stock_ms_ = 0, patience_ms_ = 0;
  int64_t far_ms_ = 0;  // a scenario's far root: every link this long, +-5 ms
  // A scenario's children: the holder a tree's child runs with
  // (tree_child_setup of the scenario's bucket), not the random schedules'
  // draws.
  std::optional<internal::HolderConfig> scenario_holder_;
  // LeaseSimOptions::account: units granted whose reply is on its way, and
  // an RNG of its own for the samples' clock readings.
  int64_t in_flight_units_ = 0;
  std::mt19937_64 sample_rng_{7};
  void sample(int64_t t);
  internal::WhenShort when_short_ = internal::WhenShort::kFailClosed;
  std::vector<int64_t> floor_units_;
  int64_t floor_slots_ = 0;
  size_t groups_ = 1;
  // The root.
  Clock root_clock_;
  std::unique_ptr<Ledger> ledger_;
  bool root_up_ = true;
  uint64_t root_epoch_ = 0;  // a restart drops every batch not yet durable
  LedgerRows durable_;
  int64_t durable_at_ = 0;  // batches become durable in order
  std::vector<Child> children_;
  // Ground truth.
  std::vector<std::vector<std::pair<int64_t, int64_t>>> uses_;  // per window: (real time, amount)
  std::vector<std::pair<int64_t, int64_t>> calls_;              // real [start, min(end, start + A))
  std::vector<std::pair<int64_t, size_t>> starts_;              // (real start, child)
  struct Penalty {
    int64_t at, duration;
    size_t child;
  };
  std::vector<Penalty> penalties_;
  std::vector<std::vector<std::pair<int64_t, int64_t>>> granted_limits_;  // per dimension: (real time, limit)
  int64_t arrivals_ = 0;
  int64_t lag_ms_ = 0;  // engines: a callback leaves up to this long after its start
};

void Sim::arrive(size_t i, const Call& call) {
  ++arrivals_;
  at(call.arrived, [this, i, call]() {
    Child& c = children_[i];
    if (!c.up) return;  // its callers are turned away while it restarts
    if (c.engine) {
      const LeaseMillis now = c.clock.read(call.arrived, rng_);
      auto step = c.engine->arrive(call.cost, call.priority, patience_ms_, now);
      c.waiting[step.ticket] = call;
      handle(i, call.arrived, std::move(step));
      return;
    }
    c.queue.push(call);
    step_child(i, call.arrived);
  });
}

void Sim::setup_scenario(const LeaseScenario& s) {
  const int64_t t0 = s.window_ms;
  if (options_.account && !options_.engines) {
    for (int64_t t = t0; t < s.run_ms; t += 10) at(t, [this, t]() { sample(t); });
  }
  config_.windows_ms = {t0};
  limits_ = {s.limit};
  config_.limits = limits_;
  config_.concurrency = s.concurrency;
  config_.attempt_timeout_ms = 500;
  config_.lease_ms = s.lease_ms > 0 ? s.lease_ms : TreeConfig{}.lease_ms;
  // What a tree runs with its config's defaults: the ledger's, the clock
  // bounds, and each child's holder as the engine makes it
  // (tree_child_setup, read back as Engine::make_tree_child does).
  Config bucket;
  bucket.bucket.limit_per_window = s.limit;
  bucket.bucket.window_ms = t0;
  bucket.concurrency = s.concurrency;
  bucket.attempt_timeout_ms = config_.attempt_timeout_ms;
  bucket.tree.enabled = true;
  bucket.tree.lease_ms = config_.lease_ms;
  const TreeConfig& tree = bucket.tree;
  config_.demand_ttl_ms = internal::LedgerConfig{}.demand_ttl_ms;
  config_.max_lease_ms = tree.max_lease_ms;
  bounds_.slack_ms = tree.clock_slack_ms;
  bounds_.drift_ppm = tree.drift_ppm;
  config_.clocks = bounds_;
  std::string error;
  scenario_holder_ = internal::read_child_setup(internal::tree_child_setup(bucket, "a", 1), error);
  if (!scenario_holder_) throw std::logic_error("tree_child_setup: " + error);
  run_ms_ = s.run_ms;
  patience_ms_ = 2000;
  far_ms_ = s.far ? 150 : 0;
  const auto make_clock = [&]() {
    Clock c;
    c.offset = uniform(1'000'000'000, 1'000'000'000'000);
    c.drift_ppm = uniform(-bounds_.drift_ppm, bounds_.drift_ppm);
    c.max_lag = bounds_.slack_ms - 1;
    return c;
  };
  root_clock_ = make_clock();
  ledger_ = std::make_unique<Ledger>(config_);
  uses_.assign(1, {});
  granted_limits_.assign(2, {});
  const size_t n = s.children;
  children_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    children_[i].clock = make_clock();
    children_[i].near = !s.far;
    children_[i].holder = std::make_unique<LeaseHolder>(holder_config(i));
  }
  setup_ << "scenario seed " << options_.seed << ": " << n << " children, " << s.limit << "/" << t0 << "ms, load "
         << s.load << (s.far ? ", root 150 ms away" : ", root 1-3 ms away");
  const double per_ms = s.load * static_cast<double>(s.limit) / static_cast<double>(t0);
  for (int64_t chunk = 0; chunk < run_ms_; chunk += 10) {
    const size_t hot = s.shape == LeaseScenario::Shape::kHotspot ? static_cast<size_t>(chunk / s.hot_period_ms) % n : 0;
    for (size_t i = 0; i < n; ++i) {
      double share = 1.0 / static_cast<double>(n);
      if (s.shape != LeaseScenario::Shape::kUniform) share = i == hot ? 0.8 : 0.2 / static_cast<double>(n - 1);
      std::poisson_distribution<int> arrivals(per_ms * share * 10);
      for (int a = arrivals(rng_); a > 0; --a) {
        Call call;
        call.arrived = chunk + uniform(0, 9);
        call.priority = 0;
        call.cost = {1};
        call.duration = uniform(1, 60);
        arrive(i, call);
      }
    }
  }
  if (s.penalty_at_ms > 0) at(s.penalty_at_ms, [this, t = s.penalty_at_ms]() { penalty(0, t, 1000); });
  result_.calm = true;
  result_.window_ms = t0;
  result_.all_near = !s.far;
  result_.children = n;
}

void Sim::setup() {
  if (options_.scenario) return setup_scenario(*options_.scenario);
  const size_t n = static_cast<size_t>(uniform(2, 8));
  const size_t windows = chance(0.5) ? 2 : 1;
  const int64_t windows_ms[] = {100, 250, 500, 1000, 2000};
  const int64_t t0 = windows_ms[uniform(0, 4)];
  config_.windows_ms = {t0};
  limits_ = {uniform(5, 60)};
  if (windows == 2) {
    config_.windows_ms.push_back(t0 * uniform(2, 4));
    limits_.push_back(limits_[0] * uniform(2, 6));  // tokens: 1-3 per call, so it binds at times
  }
  config_.limits = limits_;
  config_.concurrency = uniform(2, 12);
  config_.attempt_timeout_ms = uniform(50, 500);
  // Well beyond the farthest round trip (300 ms): a lease shorter than its
  // round trip arrives ended (docs/leases.md, sizing).
  config_.lease_ms = uniform(400, 2000);
  config_.demand_ttl_ms = uniform(200, 3000);
  config_.max_lease_ms = 30'000;
  bounds_.slack_ms = uniform(0, 20);
  bounds_.drift_ppm = uniform(0, 2000);
  config_.clocks = bounds_;
  retry_ms_ = uniform(320, 600);  // beyond the farthest round trip
  idle_ms_ = uniform(100, 2000);
  stock_ms_ = uniform(t0 / 16, t0 / 4);
  groups_ = static_cast<size_t>(uniform(1, 8));
  run_ms_ = std::max<int64_t>(3000, 6 * t0);
  patience_ms_ = 3 * t0;
  const bool faulty = chance(0.7);
  loss_ = faulty ? uniform(0, 10) / 100.0 : 0;
  dup_ = faulty ? uniform(0, 5) / 100.0 : 0;
  delay_ = faulty ? uniform(0, 5) / 100.0 : 0;
  const auto make_clock = [&]() {
    Clock c;
    c.offset = uniform(1'000'000'000, 1'000'000'000'000);
    c.drift_ppm = uniform(-bounds_.drift_ppm, bounds_.drift_ppm);
    c.max_lag = std::max<int64_t>(0, bounds_.slack_ms - 1);
    return c;
  };
  root_clock_ = make_clock();
  ledger_ = std::make_unique<Ledger>(config_);
  uses_.assign(windows, {});
  granted_limits_.assign(windows + 1, {});
  children_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    Child& c = children_[i];
    c.clock = make_clock();
    c.near = chance(0.5);
    c.holder = std::make_unique<LeaseHolder>(holder_config(i));
    if (faulty && chance(0.3)) {
      const int64_t from = uniform(0, run_ms_);
      c.partitions.push_back({from, from + uniform(50, 1500)});
    }
  }
  setup_ << "seed " << options_.seed << ": " << n << " children, windows";
  for (size_t k = 0; k < windows; ++k) setup_ << " " << limits_[k] << "/" << config_.windows_ms[k] << "ms";
  setup_ << ", cap " << config_.concurrency << ", A " << config_.attempt_timeout_ms << ", D " << config_.lease_ms
         << ", S " << bounds_.slack_ms << ", drift " << bounds_.drift_ppm << "ppm, K " << groups_ << ", loss " << loss_
         << ", dup " << dup_ << ", delay " << delay_;

  // Callers: a total offered load of 0.3x-2x window 0's limit, spread
  // uniformly, skewed to one child, or to a hotspot that moves.
  const double load = uniform(30, 200) / 100.0;
  const int shape = static_cast<int>(uniform(0, 2));
  const double per_ms = load * static_cast<double>(limits_[0]) / static_cast<double>(t0);
  const int64_t hot_period = uniform(200, 2000);
  for (int64_t chunk = 0; chunk < run_ms_; chunk += 10) {
    const size_t hot = shape == 2 ? static_cast<size_t>(chunk / hot_period) % n : 0;
    for (size_t i = 0; i < n; ++i) {
      double share = 1.0 / static_cast<double>(n);
      if (shape > 0) share = i == hot ? 0.7 : 0.3 / static_cast<double>(n - 1);
      // Bursts: each child's callers come in waves.
      const double wave = (chunk / 500 + static_cast<int64_t>(i)) % 3 == 0 ? 1.8 : 0.6;
      std::poisson_distribution<int> arrivals(per_ms * share * wave * 10);
      for (int a = arrivals(rng_); a > 0; --a) {
        Call call;
        call.arrived = chunk + uniform(0, 9);
        call.priority = static_cast<int32_t>(uniform(0, 2));
        call.cost.assign(windows, 1);
        if (windows == 2) call.cost[1] = uniform(1, 3);
        // One in twenty outlives the attempt timeout; the rest are short
        // enough that the windows, not the cap, bind in most schedules.
        call.duration = chance(0.05) ? uniform(config_.attempt_timeout_ms, 3 * config_.attempt_timeout_ms)
                                     : uniform(1, std::min<int64_t>(config_.attempt_timeout_ms, 60));
        arrive(i, call);
      }
    }
  }
  if (faulty) {
    for (int64_t k = uniform(0, 3); k > 0; --k) {
      const size_t i = static_cast<size_t>(uniform(0, static_cast<int64_t>(n) - 1));
      const int64_t t = uniform(0, run_ms_);
      at(t, [this, i, t]() {
        Child& c = children_[i];
        if (!c.up) return;
        ++result_.child_crashes;
        c.up = false;
        result_.causes += c.holder->causes();
        c.holder.reset();
        c.engine.reset();
        c.waiting.clear();
        c.queue.clear();  // its callers see the drop
        const int64_t back = t + uniform(0, 500);
        at(back, [this, i, back]() {
          Child& c = children_[i];
          c.up = true;
          ++c.incarnation;
          c.holder = std::make_unique<LeaseHolder>(holder_config(i));
          c.first_sent.clear();
          if (options_.engines) make_engine(i, back);
        });
      });
    }
    for (int64_t k = uniform(0, 2); k > 0; --k) {
      const int64_t t = uniform(0, run_ms_);
      at(t, [this, t]() { crash_root(t); });
    }
    if (chance(0.3)) {
      const int64_t t = uniform(0, run_ms_ / 2);
      at(t, [this]() {
        ++result_.cuts;
        limits_[0] = std::max<int64_t>(1, limits_[0] / 2);
        ledger_->set_limits(limits_, config_.concurrency);
      });
      at(t + uniform(t0, 3 * t0), [this]() {
        limits_[0] = config_.limits[0];
        ledger_->set_limits(limits_, config_.concurrency);
      });
    }
  }
  // Upstream 429s at random children, each asking for a wait.
  if (chance(0.5)) {
    for (int64_t k = uniform(1, 3); k > 0; --k) {
      const size_t i = static_cast<size_t>(uniform(0, static_cast<int64_t>(n) - 1));
      const int64_t t = uniform(0, run_ms_), wait = uniform(100, 2000);
      at(t, [this, i, t, wait]() { penalty(i, t, wait); });
    }
  }
  // What a child does once its leases run short: fail closed, or a static
  // floor per child (an eighth of each limit over the children, when that
  // is at least a unit, and one slot when the cap allows two per child).
  if (options_.fail_open) {
    when_short_ = internal::WhenShort::kFailOpen;
  } else if (chance(0.3) && limits_[0] >= static_cast<int64_t>(8 * n) &&
             (windows == 1 || limits_[1] >= static_cast<int64_t>(8 * n))) {
    when_short_ = internal::WhenShort::kFloor;
    for (size_t k = 0; k < windows; ++k) floor_units_.push_back(limits_[k] / static_cast<int64_t>(8 * n));
    floor_slots_ = config_.concurrency >= static_cast<int64_t>(2 * n) ? 1 : 0;
    for (size_t i = 0; i < n; ++i) config_.floors[i + 1] = {floor_units_, floor_slots_};
    ledger_ = std::make_unique<Ledger>(config_);
    setup_ << ", floors " << floor_units_[0] << " units, " << floor_slots_ << " slots each";
  }
  for (size_t i = 0; i < n; ++i) children_[i].holder = std::make_unique<LeaseHolder>(holder_config(i));
  if (options_.engines) {
    // The host's release lag: a few ms in the object; up to 100 ms here so
    // that reading a use at its decision instead is found.
    lag_ms_ = options_.fault == LeaseFault::kReleasedAtDecision ? uniform(60, 150) : uniform(0, 100);
    result_.release_lag_ms = lag_ms_;
    setup_ << ", engines, release lag up to " << lag_ms_ << " ms";
    for (size_t i = 0; i < n; ++i) make_engine(i, 0);
  }
  result_.floors = when_short_ == internal::WhenShort::kFloor;
  result_.calm = !faulty;
  result_.window_ms = t0;
  result_.all_near = std::all_of(children_.begin(), children_.end(), [](const Child& c) { return c.near; });
  result_.children = n;
}

internal::HolderConfig Sim::holder_config(size_t i) const {
  // A scenario's child is the one a tree makes (tree_child_setup); a random
  // schedule's pacing is drawn in setup().
  internal::HolderConfig h;
  if (scenario_holder_) {
    h = *scenario_holder_;
  } else {
    h.retry_ms = retry_ms_;
    h.idle_ms = idle_ms_;
    h.stock_ms = stock_ms_;
    h.refresh_ms = std::min<int64_t>(config_.windows_ms[0] / 8, 1000);
    h.rate_ms = std::min<int64_t>(config_.windows_ms[0], 2000);
    h.close_within_ms = config_.windows_ms[0] / 4;
    h.unreachable_ms = retry_ms_;
    h.max_groups = groups_;
  }
  h.child = i + 1;
  h.incarnation = children_.size() > i ? children_[i].incarnation : 1;
  h.windows = config_.windows_ms.size();
  h.attempt_timeout_ms = config_.attempt_timeout_ms;
  h.when_short = when_short_;
  h.windows_ms = config_.windows_ms;
  if (options_.fault == LeaseFault::kReuseWithoutMargin) {
    // outlast(T') = stretch(T') + S <= T - 1: the use's own window, no margin.
    for (LeaseMillis& t : h.windows_ms)
      t = std::max<LeaseMillis>(1, t - bounds_.slack_ms - 2 * (bounds_.stretch(t) - t) - 1);
  }
  h.floor_units = floor_units_;
  h.floor_slots = floor_slots_;
  h.clocks = bounds_;
  return h;
}

bool Sim::partitioned(const Child& c, int64_t t) const {
  for (const auto& [from, to] : c.partitions) {
    if (t >= from && t < to) return true;
  }
  return false;
}

void Sim::send_to_root(size_t i, const Exchange& ex, int64_t t) {
  const Child& c = children_[i];
  int copies = 1;
  if (chance(dup_)) ++copies, ++result_.duplicated;
  for (int k = 0; k < copies; ++k) {
    if (partitioned(c, t) || chance(loss_)) {
      ++result_.lost;
      continue;
    }
    int64_t arrive = t + latency(c);
    if (chance(delay_)) arrive += uniform(0, 500);
    at(arrive, [this, i, ex, arrive]() { root_receive(i, ex, arrive); });
  }
}

void Sim::root_receive(size_t i, Exchange ex, int64_t t) {
  if (!root_up_) {
    ++result_.lost;
    return;
  }
  ++result_.exchanges;
  result_.steady_exchanges += steady(t);
  const LeaseMillis margin = bounds_.dating_margin();
  for (auto& close : ex.closes) {
    if (options_.fault == LeaseFault::kFreeUsedAtReceipt) close.uses.clear();
    if (options_.fault == LeaseFault::kDateWithoutMargin) {
      for (auto& window : close.uses) {
        for (auto& g : window) g.age_ms += margin;
      }
      for (auto& age : close.running_ages) age += margin;
    }
  }
  const LeaseMillis now = root_clock_.read(t, rng_);
  const uint64_t next_id = ledger_->rows().next_lease_id;
  auto result = ledger_->on_exchange(ex, now);
  if (result.notice) notify(i, *result.notice, t);
  if (ledger_->rows().next_lease_id != next_id) {
    // A lease decided now (not a stored reply resent): the limits it was checked against.
    const LeaseGrant& g = *result.reply;
    ++result_.grants;
    for (size_t k = 0; k < g.units.size(); ++k) {
      if (g.units[k] > 0) granted_limits_[k].push_back({t, limits_[k]});
    }
    if (g.slots > 0) granted_limits_.back().push_back({t, config_.concurrency});
  }
  // The output gate: the reply leaves once its rows (and all before) are durable.
  durable_at_ = std::max(durable_at_, t + uniform(0, 10));
  const uint64_t epoch = root_epoch_;
  const uint64_t incarnation = ex.incarnation;
  const int64_t durable = durable_at_;
  at(durable, [this, i, epoch, incarnation, result, durable]() {
    if (epoch != root_epoch_) {
      if (result.reply) ++result_.undelivered;
      return;
    }
    for (const LedgerWrite& w : result.writes) durable_.apply(w);
    if (!result.reply) return;
    const int64_t now = durable;
    Child& c = children_[i];
    int copies = 1;
    if (chance(dup_)) ++copies, ++result_.duplicated;
    for (int k = 0; k < copies; ++k) {
      if (partitioned(c, now) || chance(loss_)) {
        ++result_.lost;
        continue;
      }
      int64_t arrive = now + latency(c);
      if (chance(delay_)) arrive += uniform(0, 500);
      const LeaseGrant g = *result.reply;
      if (options_.account && !g.units.empty()) in_flight_units_ += g.units[0];
      at(arrive, [this, i, g, arrive, incarnation]() { deliver(i, g, arrive, incarnation); });
    }
  });
}

void Sim::penalty(size_t i, int64_t t, int64_t duration) {
  Child& c = children_[i];
  if (!c.up) return;
  if (c.engine) {
    c.next_429 = duration;  // its next report is the 429 (counted then)
    return;
  }
  penalties_.push_back({t, duration, i});
  c.holder->on_penalty(duration, c.clock.read(t, rng_));
  step_child(i, t);
}

// The root's notice goes at once, over the same links as its replies.
void Sim::notify(size_t from, internal::PenaltyNotice notice, int64_t t) {
  for (size_t j = 0; j < children_.size(); ++j) {
    if (j == from) continue;
    const Child& c = children_[j];
    if (partitioned(c, t) || chance(loss_)) {
      ++result_.lost;
      continue;
    }
    int64_t arrive = t + latency(c);
    if (chance(delay_)) arrive += uniform(0, 500);
    at(arrive, [this, j, notice, arrive]() {
      Child& c = children_[j];
      if (!c.up || !c.holder) return;
      if (c.engine) return handle(j, arrive, c.engine->notice(notice, c.clock.read(arrive, rng_)));
      c.holder->on_notice(notice, c.clock.read(arrive, rng_));
      step_child(j, arrive);
    });
  }
}

void Sim::crash_root(int64_t t) {
  if (!root_up_) return;
  ++result_.root_restarts;
  root_up_ = false;
  ++root_epoch_;  // what was not durable is gone, with its replies
  durable_at_ = t;
  const int64_t back = t + uniform(10, 300);
  at(back, [this, back]() {
    root_up_ = true;
    ledger_ = std::make_unique<Ledger>(config_);
    ledger_->set_limits(limits_, config_.concurrency);
    ledger_->restore(durable_, root_clock_.read(back, rng_));
  });
}

void Sim::deliver(size_t i, LeaseGrant g, int64_t t, uint64_t incarnation) {
  Child& c = children_[i];
  if (!c.up || !c.holder) {
    ++result_.lost;
    return;
  }
  if (options_.account && !g.units.empty()) in_flight_units_ -= g.units[0];
  const LeaseMillis now = c.clock.read(t, rng_);
  if (options_.fault == LeaseFault::kChildEndsFromReceipt && incarnation == c.incarnation &&
      g.refusal == internal::Refusal::kNone) {
    const auto sent = c.first_sent.find(g.seq);
    if (sent != c.first_sent.end()) g.duration_ms += std::max<LeaseMillis>(0, now - sent->second);
  }
  if (c.engine) return handle(i, t, c.engine->reply(g, now));
  c.holder->on_grant(g, now);
  step_child(i, t);
}

void Sim::step_child(size_t i, int64_t t) {
  Child& c = children_[i];
  if (!c.up) return;
  const LeaseMillis now = c.clock.read(t, rng_);
  if (c.engine) return handle(i, t, c.engine->tick(now));
  LeaseHolder& h = *c.holder;
  c.queue.give_up_before(t - patience_ms_);
  // The head blocks those behind it, as in the engine.
  while (const Call* next = c.queue.head()) {
    const Call head = *next;
    if (!h.can_take(head.cost, now) || h.free_slots(now) == 0) break;
    bool leased = true;
    for (size_t k = 0; k < head.cost.size(); ++k) leased &= h.held(k, now) >= head.cost[k];
    result_.floor_calls += !leased;
    const auto id = h.slot_acquire(now);
    if (!id || !h.take(head.cost, now)) {
      result_.ok = false;
      result_.failure = "the holder refused what can_take and free_slots offered (" + setup_.str() + ")";
      return;
    }
    for (size_t k = 0; k < head.cost.size(); ++k) uses_[k].push_back({t, head.cost[k]});
    calls_.push_back({t, t + std::min(head.duration, config_.attempt_timeout_ms)});
    starts_.push_back({t, i});
    ++result_.calls;
    result_.steady_calls += steady(t);
    if (steady(t)) result_.steady_waits.push_back(t - head.arrived);
    const uint64_t incarnation = c.incarnation;
    const int64_t end = t + head.duration;
    at(end, [this, i, id, end, incarnation]() {
      Child& c = children_[i];
      if (!c.up || c.incarnation != incarnation) return;
      c.holder->slot_release(*id, c.clock.read(end, rng_));
      step_child(i, end);
    });
    c.queue.pop_head();
  }
  h.set_queued(c.queue.demand(), now);
  if (auto ex = h.next_exchange(now)) {
    c.first_sent.emplace(ex->seq, now);
    send_to_root(i, *ex, t);
  }
  schedule_wake(i, t, now, h.next_wake(now));
}

void Sim::schedule_wake(size_t i, int64_t t, LeaseMillis now, std::optional<LeaseMillis> wake) {
  Child& c = children_[i];
  if (wake) {
    const int64_t real = t + std::max<int64_t>(1, *wake - now);
    if (c.wake_at <= t || real < c.wake_at) {
      c.wake_at = real;
      const uint64_t incarnation = c.incarnation;
      at(real, [this, i, real, incarnation]() {
        Child& c = children_[i];
        if (c.wake_at != real || c.incarnation != incarnation) return;
        step_child(i, real);
      });
    }
  }
}

void Sim::make_engine(size_t i, int64_t t) {
  Child& c = children_[i];
  // The bucket's config, the root's windows: its own windows count only its
  // takes, so they never bind before its leases do.
  std::ostringstream config;
  config << R"({"bucket":{"limitPerWindow":)" << config_.limits[0] << R"(,"windowInMs":)" << config_.windows_ms[0]
         << R"(,"unit":"requests"},"concurrency":)" << config_.concurrency << R"(,"attemptTimeoutMs":)"
         << config_.attempt_timeout_ms << R"(,"retry":{"maxRetries":0,"maxDelayInMs":60000})";
  if (config_.windows_ms.size() > 1) {
    config << R"(,"windows":{"tokens":{"unit":"tokens","limitPerWindow":)" << config_.limits[1] << R"(,"windowInMs":)"
           << config_.windows_ms[1] << "}}";
  }
  config << "}";
  const internal::HolderConfig h = holder_config(i);
  std::ostringstream setup;
  setup << R"({"child":)" << h.child << R"(,"incarnation":)" << h.incarnation << R"(,"clock":{"slackMs":)"
        << h.clocks.slack_ms << R"(,"driftPpm":)" << h.clocks.drift_ppm << R"(},"retryMs":)" << h.retry_ms
        << R"(,"idleMs":)" << h.idle_ms << R"(,"stockMs":)" << h.stock_ms << R"(,"refreshMs":)" << h.refresh_ms
        << R"(,"rateMs":)" << h.rate_ms << R"(,"closeWithinMs":)" << h.close_within_ms << R"(,"maxGroups":)"
        << h.max_groups << R"(,"unreachableMs":)"
        << h.unreachable_ms
        // A release read after its lease ended would break the lease-end
        // margin: the host's largest lag, on the child's clock, plus the
        // lag of the two readings.
        << R"(,"releaseMarginMs":)" << h.clocks.outlast(lag_ms_) + h.clocks.slack_ms;
  if (h.when_short == internal::WhenShort::kFloor) {
    setup << R"(,"whenShort":"floor","floor":{"units":[)";
    for (size_t k = 0; k < h.floor_units.size(); ++k) setup << (k ? "," : "") << h.floor_units[k];
    setup << R"(],"slots":)" << h.floor_slots << "}";
  } else if (h.when_short == internal::WhenShort::kFailOpen) {
    setup << R"(,"whenShort":"failOpen")";
  }
  setup << "}";
  c.engine = std::make_unique<EngineChild>(config.str(), setup.str(), c.clock.read(t, rng_));
  c.waiting.clear();
  c.late_seen = 0;
}

// What a host does with an engine's step: starts its callbacks, which leave
// when the step's commit is durable (the release lag) and report when done;
// sends its exchange; sets its timer.
void Sim::handle(size_t i, int64_t t, EngineChild::Step step) {
  Child& c = children_[i];
  if (!step.error.empty() && result_.ok) {
    result_.ok = false;
    result_.failure = "child " + std::to_string(i) + " refused an event: " + step.error + " (" + setup_.str() + ")";
  }
  if (!c.up || !c.engine) return;
  const LeaseMillis now = c.clock.read(t, rng_);
  if (!step.starts.empty()) {
    const uint64_t incarnation = c.incarnation;
    std::vector<std::pair<Ticket, Call>> started;
    for (Ticket ticket : step.starts) {
      const auto it = c.waiting.find(ticket);
      if (it == c.waiting.end()) continue;  // a retry: none here (maxRetries 0)
      started.push_back(*it);
      c.waiting.erase(it);
      starts_.push_back({t, i});
      ++result_.calls;
      result_.steady_calls += steady(t);
      if (steady(t)) result_.steady_waits.push_back(t - started.back().second.arrived);
    }
    const int64_t left = std::max(t + uniform(0, lag_ms_), c.last_left);
    c.last_left = left;
    if (options_.fault == LeaseFault::kReleasedAtDecision) {
      // The fault: told they left now, though they leave at `left`.
      handle(i, t, c.engine->released(step.through, now));
    }
    at(left, [this, i, t, left, incarnation, started, through = step.through]() {
      Child& c = children_[i];
      // A child that crashed before its commit was durable never let them go.
      if (!c.up || c.incarnation != incarnation) return;
      for (const auto& [ticket, call] : started) {
        for (size_t k = 0; k < call.cost.size(); ++k) uses_[k].push_back({left, call.cost[k]});
        // It counts until it ends, or until its attempt timed out (from its start).
        calls_.push_back({left, std::max(left, std::min(left + call.duration, t + config_.attempt_timeout_ms))});
        const int64_t end = left + call.duration;
        at(end, [this, i, end, incarnation, ticket = ticket]() {
          Child& c = children_[i];
          if (!c.up || c.incarnation != incarnation) return;
          const int64_t wait = c.next_429;
          auto step = c.engine->report(ticket, wait > 0, wait, c.clock.read(end, rng_));
          // A report after its attempt timed out is ignored: the 429 waits for the next.
          if (wait > 0 && step.reported) penalties_.push_back({end, wait, i}), c.next_429 = 0;
          handle(i, end, std::move(step));
        });
      }
      if (options_.fault != LeaseFault::kReleasedAtDecision) {
        handle(i, left, c.engine->released(through, c.clock.read(left, rng_)));
      }
    });
  }
  if (step.exchange) {
    c.first_sent.emplace(step.exchange->seq, now);
    send_to_root(i, *step.exchange, t);
  }
  const uint64_t late = c.engine->engine().lease_late_releases();
  result_.late_releases += late - c.late_seen;
  c.late_seen = late;
  schedule_wake(i, t, now, step.wake);
}

void Sim::check() {
  std::ostringstream why;
  // The limit a use at real time t answers to: the one checked by the last
  // grant of that dimension at or before t (docs/leases.md, lowering).
  const auto limit_at = [&](size_t k, int64_t t) {
    const auto& g = granted_limits_[k];
    auto it = std::upper_bound(g.begin(), g.end(), std::make_pair(t, INT64_MAX));
    // Before any grant only floors were spent: they answer to the first limit.
    return it == g.begin() ? (k < config_.limits.size() ? config_.limits[k] : config_.concurrency)
                           : std::prev(it)->second;
  };
  for (size_t k = 0; k < uses_.size(); ++k) {
    auto& u = uses_[k];
    std::stable_sort(u.begin(), u.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    int64_t in_window = 0;
    size_t tail = 0;
    for (size_t head = 0; head < u.size();) {
      const int64_t t = u[head].first;
      while (head < u.size() && u[head].first == t) in_window += u[head++].second;
      while (u[tail].first <= t - config_.windows_ms[k]) in_window -= u[tail++].second;
      const int64_t over = in_window - limit_at(k, t);
      if (over > result_.worst_window_over) result_.worst_window_over = over;
      if (over > 0 && result_.ok) {
        why << "window " << k << " (" << config_.windows_ms[k] << " ms) holds " << in_window << " > limit "
            << limit_at(k, t) << " at real " << t;
        result_.ok = false;
      }
    }
  }
  std::vector<std::pair<int64_t, int>> edges;
  for (const auto& [from, to] : calls_) edges.push_back({from, 1}), edges.push_back({to, -1});
  std::sort(edges.begin(), edges.end());  // an end before a start at the same time
  int64_t running = 0;
  for (const auto& [t, d] : edges) {
    running += d;
    const int64_t over = running - config_.concurrency;
    if (over > result_.worst_calls_over) result_.worst_calls_over = over;
    if (over > 0 && result_.ok) {
      why << running << " calls running > cap " << config_.concurrency << " at real " << t;
      result_.ok = false;
    }
  }
  // The shared penalty: the last call each other child started while a
  // penalty was in force, after its 429.
  for (const Penalty& p : penalties_) {
    ++result_.penalties;
    for (size_t j = 0; j < children_.size(); ++j) {
      if (j == p.child) continue;
      int64_t last = 0;
      for (const auto& [t, child] : starts_) {
        if (child == j && t >= p.at && t < p.at + p.duration) last = std::max(last, t - p.at);
      }
      const int64_t bound = max_latency(children_[p.child]) + max_latency(children_[j]);
      ++result_.penalty_stops;
      result_.penalty_stop_sum += last;
      result_.penalty_stop_max = std::max(result_.penalty_stop_max, last);
      result_.penalty_bound = std::max(result_.penalty_bound, bound);
      if (result_.calm && last > bound && result_.ok) {
        why << "child " << j << " started a call " << last << " ms after a 429 at child " << p.child << " (bound "
            << bound << " ms, the penalty " << p.duration << " ms)";
        result_.ok = false;
      }
    }
    // The reporter itself stops at once.
    for (const auto& [t, child] : starts_) {
      // After it: a start in the same ms may have come before the 429.
      if (result_.calm && child == p.child && t > p.at && t < p.at + p.duration && result_.ok) {
        why << "child " << p.child << " started a call " << t - p.at << " ms after its own 429";
        result_.ok = false;
      }
    }
  }
  if (!result_.ok) result_.failure = why.str() + " (" + setup_.str() + ")";
}

void Sim::sample(int64_t t) {
  LeaseAccount& a = result_.account;
  const double limit = static_cast<double>(limits_[0]);
  const double cap = static_cast<double>(config_.concurrency);
  int64_t used = 0;
  for (auto it = uses_[0].rbegin(); it != uses_[0].rend() && it->first > t - config_.windows_ms[0]; ++it) {
    used += it->second;
  }
  int64_t running = 0;
  // calls_ is in start order; none holds its slot past the attempt timeout.
  for (auto it = calls_.rbegin(); it != calls_.rend() && it->first > t - config_.attempt_timeout_ms; ++it) {
    running += it->first <= t && it->second > t;
  }
  const LeaseMillis root_now = root_clock_.read(t, sample_rng_);
  const int64_t occupied = ledger_->occupancy(0, root_now);
  int64_t held = 0, idle_slots = 0;
  double no_call = 0, no_slot = 0, other = 0;
  for (Child& c : children_) {
    if (!c.up || !c.holder) continue;
    const LeaseMillis now = c.clock.read(t, sample_rng_);
    // Read from a copy: held() and free_slots() advance a holder to `now`,
    // and advancing the child's own between its steps changed the runs
    // (the far hotspot read 0.841-0.859 sampled, 0.851-0.863 not).
    LeaseHolder probe = *c.holder;
    const int64_t h = probe.held(0, now);
    const int64_t free = probe.free_slots(now);
    held += h, idle_slots += free;
    (c.queue.head() == nullptr ? no_call : free == 0 ? no_slot : other) += static_cast<double>(h);
  }
  ++a.samples;
  a.used += static_cast<double>(used) / limit;
  a.root_free += static_cast<double>(limits_[0] - occupied) / limit;
  a.in_flight += static_cast<double>(in_flight_units_) / limit;
  a.held_no_call += no_call / limit, a.held_no_slot += no_slot / limit, a.held_other += other / limit;
  a.counted_after += static_cast<double>(occupied - used - held - in_flight_units_) / limit;
  a.slots_running += static_cast<double>(running) / cap;
  a.slots_idle += static_cast<double>(idle_slots) / cap;
  a.slots_root_free += static_cast<double>(config_.concurrency - ledger_->occupancy(limits_.size(), root_now)) / cap;
}

LeaseSimResult Sim::run() {
  while (!events_.empty()) {
    Event e = events_.top();
    events_.pop();
    if (e.t > run_ms_ + 10'000) break;  // after the callers: let the leases wind down
    e.fn();
  }
  result_.uses = uses_[0].size();
  for (const Child& c : children_) {
    if (c.holder) result_.causes += c.holder->causes();  // one down at the end was counted when it went
  }
  // The most calls the bucket could start over the run: its tightest window
  // (a rested bucket spends a whole limit at once, so ceil(run / window)
  // limits, at the mean cost per call), or its cap over the mean time a call
  // held a slot. Utilisation is the calls started during the run against it.
  const auto windows_in_run = [&](size_t k) {
    return static_cast<double>((run_ms_ + config_.windows_ms[k] - 1) / config_.windows_ms[k]);
  };
  double best = static_cast<double>(config_.limits[0]) * windows_in_run(0);
  if (uses_.size() > 1 && !uses_[1].empty()) {
    double cost = 0;
    for (const auto& [t, amount] : uses_[1]) cost += static_cast<double>(amount);
    cost /= static_cast<double>(uses_[1].size());
    best = std::min(best, static_cast<double>(config_.limits[1]) * windows_in_run(1) / cost);
  }
  size_t started = 0;
  if (!calls_.empty()) {
    double held = 0;
    for (const auto& [from, to] : calls_) held += static_cast<double>(to - from), started += from < run_ms_;
    held /= static_cast<double>(calls_.size());
    best =
        std::min(best, static_cast<double>(config_.concurrency) * static_cast<double>(run_ms_) / std::max(1.0, held));
  }
  result_.utilisation = static_cast<double>(started) / best;
  result_.load = static_cast<double>(arrivals_) / best;
  result_.setup = setup_.str();
  if (LeaseAccount& a = result_.account; a.samples > 0) {
    const double n = static_cast<double>(a.samples);
    for (double* v : {&a.used, &a.root_free, &a.in_flight, &a.held_no_call, &a.held_no_slot, &a.held_other,
                      &a.counted_after, &a.slots_running, &a.slots_idle, &a.slots_root_free}) {
      *v /= n;
    }
  }
  check();
  return result_;
}

}  // namespace

LeaseSimResult run_lease_sim(const LeaseSimOptions& options) {
  Sim sim(options);
  return sim.run();
}

uint64_t env_count(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  return v ? std::strtoull(v, nullptr, 10) : fallback;
}

uint64_t lease_schedule_count() {
  return env_count("DRL_LEASE_SCHEDULES", std::max<uint64_t>(100, env_count("DRL_PROPERTY_SCHEDULES", 10'000) / 5));
}

}  // namespace drl::testing
