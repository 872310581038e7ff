#include "schedule.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <vector>

#include "drl/engine.h"
#include "engine_inspector.h"
#include "model_storage.h"
#include "records.h"

namespace drl::testing {
namespace {

using internal::inspect;

using nlohmann::json;

// splitmix64: tiny, seedable, the same on every platform.
struct Rng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  int64_t range(int64_t lo, int64_t hi) {  // inclusive
    return lo + static_cast<int64_t>(next() % static_cast<uint64_t>(hi - lo + 1));
  }
  bool chance(int percent) { return range(1, 100) <= percent; }
};

// "Sun, 06 Nov 1994 08:49:37 GMT" for an epoch time in ms (seconds rounded up).
std::string imf_fixdate(int64_t ms) {
  static const char* days[] = {"Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"};
  static const char* months[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  int64_t secs = (ms + 999) / 1000;
  int64_t z = secs / 86400;
  const int64_t sod = secs % 86400;
  const char* wd = days[z % 7];
  z += 719468;  // civil_from_days (H. Hinnant)
  const int64_t era = z / 146097;
  const int64_t doe = z - era * 146097;
  const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  int64_t y = yoe + era * 400;
  const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const int64_t mp = (5 * doy + 2) / 153;
  const int64_t d = doy - (153 * mp + 2) / 5 + 1;
  const int64_t m = mp < 10 ? mp + 3 : mp - 9;
  if (m <= 2) ++y;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s, %02lld %s %04lld %02lld:%02lld:%02lld GMT", wd, static_cast<long long>(d),
                months[m - 1], static_cast<long long>(y), static_cast<long long>(sod / 3600),
                static_cast<long long>(sod / 60 % 60), static_cast<long long>(sod % 60));
  return buf;
}

enum class HostState { Waiting, Running, Between, Settled };

// What one attempt reserved in one window, as the test computed it: where
// the grant is dated in that window's log (by window incarnation and log
// epoch), so a report's usage can be settled independently of the engine.
struct ModelTake {
  std::string window;  // "" for the primary
  uint64_t incarnation = 0;
  uint64_t epoch = 0;
  Millis at = 0;
  int64_t reserved = 0;
};

struct HostCall {
  HostState state = HostState::Waiting;
  std::map<std::string, int64_t> cost;  // per unit, as admitted (the default unit included)
  int64_t cost_in(const std::string& unit) const {
    auto it = cost.find(unit);
    return it == cost.end() ? 0 : it->second;
  }
  uint32_t attempts = 0;
  int64_t allowed = 0;           // attempts allowed when the last retry was decided
  Millis started = 0;            // Running: when the attempt started (the engine's time)
  Millis timeout = 0;            // Running: the attemptTimeoutMs it started under
  std::vector<ModelTake> takes;  // Running or just ended: the attempt's reservations
  size_t attempt_record = 0;     // its index in Runner::attempts_

  // Waiting with intent (issue 15).
  int64_t priority = 0;
  std::optional<int64_t> max_wait;        // maxWaitMs as admitted
  std::optional<int64_t> max_retries;     // its own maxRetries as admitted; none: the bucket's
  std::optional<Millis> deadline;         // the engine's time at arrival + maxWaitMs
  bool arriving = false;                  // in its arrival step
  bool withdrawn = false;                 // withdrawn while running: never retried
  std::optional<ErrorCode> settled_code;  // how a rejection settled it
  std::optional<Millis> predicted;        // its prediction after the step before
  std::optional<Millis> first_predicted;  // its prediction after its arrival step
  uint64_t first_epoch = 0;               // Runner::freeing_epoch_ when first_predicted was taken
  std::optional<Millis> model_predicted;  // exact family: the test's own prediction at arrival
};

// Queue order: higher priority first, then arrival (tickets grow).
inline bool ahead(const HostCall& a, Ticket ta, const HostCall& b, Ticket tb) {
  return a.priority != b.priority ? a.priority > b.priority : ta < tb;
}

// One window as the test believes it stands: its grants (reservations at
// take time, corrected by usage as the test settles it, refilled at a lift),
// computed from the events alone, never read from the engine.
struct ModelWindow {
  std::string name;  // "" for the primary
  std::string unit;
  int64_t limit = 0;
  int64_t ms = 0;
  uint64_t incarnation = 0;  // a new one when the window is (re)created or changes unit
  uint64_t epoch = 0;        // a new one when its log is replaced (a lift)
  std::map<Millis, int64_t> log;
  int64_t live() const {
    int64_t sum = 0;
    for (const auto& [at, amount] : log) sum += amount;
    return sum;
  }
};

// Every attempt that started, for the rolling windows of real usage: what it
// reserved per unit and, when a report said, what it really used.
struct AttemptRecord {
  Millis start = 0;
  std::map<std::string, int64_t> reserved;
  std::map<std::string, int64_t> usage;  // units the report named
  int64_t real(const std::string& unit) const {
    auto u = usage.find(unit);
    if (u != usage.end()) return u->second;
    auto r = reserved.find(unit);
    return r == reserved.end() ? 0 : r->second;
  }
  int64_t under(const std::string& unit) const {
    auto r = reserved.find(unit);
    return std::max<int64_t>(0, real(unit) - (r == reserved.end() ? 0 : r->second));
  }
};

// A rolling window of real usage to check, taken at a start: the attempts
// started in (from, t] with an index in [first, last] used at most `limit` of
// `unit`, plus what those attempts under-estimated.
struct Checkpoint {
  std::string window;
  std::string unit;
  int64_t limit = 0;
  Millis from = 0;
  Millis t = 0;
  size_t first = 0;
  size_t last = 0;
};

// A callback that was running when the object crashed: its caller's RPC
// broke, but the work goes on at the upstream until it finishes, and at the
// latest until its start + timeout (the engine's own bound on an attempt).
struct OldCallback {
  Millis started = 0;
  Millis ends = 0;  // when it finishes, at most started + its timeout
};

class Runner {
 public:
  Runner(const ScheduleOptions& o, json* trace)
      : rng_{o.seed * 0x2545F4914F6CDD1DULL + 1},
        seed_(o.seed),
        steps_(o.steps),
        trace_(trace),
        exact_(o.exact),
        multi_(!o.exact && o.seed % 2 == 0) {}

  ScheduleResult run() {
    if (exact_) {
      configure_exact();
      for (step_ = 0; step_ < steps_ && result_.ok; ++step_) exact_step();
      if (result_.ok) finish();
      return result_;
    }
    if (multi_) {
      ++result_.window_schedules;
      honest_ = rng_.chance(40);
      result_.honest_schedules += honest_;
      units_ = {kDefaultUnit, "tokens"};
      if (rng_.chance(50)) units_.push_back("bytes");
    }
    configure_random(/*complete=*/true);
    for (step_ = 0; step_ < steps_ && result_.ok; ++step_) random_step();
    if (result_.ok) finish();
    return result_;
  }

 private:
  Rng rng_;
  uint64_t seed_;
  int steps_;
  json* trace_;
  bool exact_ = false;
  int step_ = 0;
  ScheduleResult result_;

  // Waiting with intent (issue 15). A step that may let a queued call start
  // earlier than predicted before it (a queued call removed, a withdraw or
  // cancel, a reconfigure, a refund by usage, a restart) is "freeing": a
  // prediction taken before it no longer binds.
  uint64_t freeing_epoch_ = 0;
  bool step_freeing_ = false;
  bool penalty_extended_ = false;
  Ticket arriving_ticket_ = 0;  // the ticket the arrival being run got
  int64_t arriving_priority_ = 0;
  std::optional<int64_t> arriving_max_wait_;
  std::optional<int64_t> arriving_max_retries_;
  std::optional<Millis> arriving_model_;                    // exact family: the test's prediction for it
  size_t extra_held_ = std::numeric_limits<size_t>::max();  // engine's slots beyond the host's calls (restored ones)

  Engine engine_;
  Millis clock_ = 1'700'000'000'000;  // the host's clock: may step backwards

  // The model host's storage, fed only by the engine's writes.
  Storage storage_;

  // What the checker knows.
  std::map<Ticket, HostCall> calls_;
  std::vector<std::pair<Millis, int64_t>> takes_;  // every real take, all generations
  Millis horizon_ = std::numeric_limits<Millis>::min();
  Millis last_fu_ = 0;
  std::vector<OldCallback> old_;  // callbacks from before a crash, still running upstream
  std::vector<Ticket> ended_;     // timed out or gone: any news of them is late
  std::optional<Ticket> gone_;    // the ticket of the gone event being run
  size_t held_allowance_ = 0;     // slots held above a cap a reconfigure lowered
  bool step_wrote_slots_ = false;
  bool slots_alone_ = false;  // this step wrote the slots record and nothing else, while attempts run

  // Several windows (even seeds): the test's own account of every window.
  bool multi_ = false;
  bool honest_ = false;             // no usage above the reservation in this schedule
  std::vector<std::string> units_;  // the units this schedule draws from
  std::vector<ModelWindow> model_;  // [0] the primary; empty until configured
  double model_fraction_ = 0.5;     // penaltyRefillFraction of the config the model holds
  uint64_t next_id_ = 1;
  std::vector<AttemptRecord> attempts_;  // every attempt that started, all generations
  std::vector<Checkpoint> checkpoints_;
  std::map<std::string, Millis> horizon_at_;      // per window: takes at or before are forgotten
  std::map<std::string, size_t> horizon_from_;    // per window: attempts before this index are not its own
  std::map<std::string, int64_t> arriving_cost_;  // the cost of the arrival being run
  std::optional<std::pair<Ticket, std::map<std::string, int64_t>>> settling_;  // the report's usage being run

  void fail(const std::string& what) {
    if (!result_.ok) return;
    result_.ok = false;
    std::ostringstream out;
    out << "seed " << seed_ << ", step " << step_ << ", engine now " << inspect(engine_).now() << ": " << what;
    result_.failure = out.str();
  }

  const Config& cfg() const { return *engine_.config(); }

  // ---- events -------------------------------------------------------------

  void event(json ev, const std::function<double(std::string&)>& call) {
    std::string message;
    const std::optional<Millis> timeout_before =
        engine_.configured() ? std::optional<Millis>(cfg().attempt_timeout_ms) : std::nullopt;
    const bool pending_before = storage_.lift_pending;
    const Millis fu_before = storage_.forced_until;
    const double rc = call(message);
    step_wrote_slots_ = false;
    for (const Write& w : engine_.writes()) step_wrote_slots_ = step_wrote_slots_ || w.kind == WriteKind::PutSlots;
    std::vector<double> records;
    if (trace_) internal::encode_output(engine_, records);
    // A penalty moved later while its lift was pending: the lift will keep
    // only what is live at the new deadline, which can be less (a longer
    // pause can let a queued call start sooner than predicted before it).
    penalty_extended_ = false;
    for (const Write& w : engine_.writes()) {
      penalty_extended_ = penalty_extended_ || (pending_before && w.kind == WriteKind::PutPenalty && w.at > fu_before);
    }
    check_writes();
    const std::string kind = ev["e"].get<std::string>();
    if (kind != "restore") model_step(kind, rc, pending_before, fu_before);
    apply_writes();
    if (kind == "restore") model_from_storage();
    expire_old(timeout_before);
    check_actions(ev);
    engine_.clear_output();
    check_state();
    check_model();
    check_waiting();
    if (trace_) {
      ev["rc"] = rc;
      if (!message.empty()) ev["msg"] = message;
      ev["records"] = records;
      const auto wake = engine_.next_wake();
      ev["wake"] = wake ? static_cast<double>(*wake) : -1.0;
      ev["slotsText"] = engine_.slots_text();
      trace_->push_back(std::move(ev));
    }
  }

  static double code_of(const Error& e, std::string& message) {
    message = e.message;
    return -static_cast<double>(e.code);
  }
  static double status_of(const Status& s, std::string& message) { return s.ok() ? 0 : code_of(s.error(), message); }

  // attemptTimeoutMs small enough to fire within a schedule, or the default.
  json random_timeout() {
    if (rng_.chance(20)) return rng_.range(1, 50);
    if (rng_.chance(85)) return rng_.range(50, 3000);
    return rng_.range(3000, 200'000);
  }

  json random_config(bool complete) {
    json c = json::object();
    const bool long_window = rng_.chance(5);
    json bucket = {
        {"limitPerWindow", rng_.chance(10) ? rng_.range(20, 200) : rng_.range(1, 12)},
        {"windowInMs", long_window ? rng_.range(kMaxLogEntries + 1, 3 * kMaxLogEntries) : rng_.range(1, 3000)}};
    if (rng_.chance(60))
      bucket["penaltyRefillFraction"] =
          rng_.chance(20) ? static_cast<double>(rng_.range(0, 1)) : static_cast<double>(rng_.range(0, 100)) / 100.0;
    if (complete || rng_.chance(50)) c["bucket"] = bucket;
    if (complete || rng_.chance(50)) c["concurrency"] = rng_.range(1, 5);
    if (complete ? rng_.chance(60) : rng_.chance(20)) {
      c["attemptTimeoutMs"] = !complete && rng_.chance(25) ? json(nullptr) : random_timeout();
    }
    if (rng_.chance(70)) {
      const int64_t min_delay = rng_.range(0, 300);
      json retry = {{"maxRetries", rng_.range(0, 3)},
                    {"minDelayInMs", min_delay},
                    {"maxDelayInMs", min_delay + rng_.range(0, 2000)}};
      if (rng_.chance(50)) retry["factor"] = 1.0 + static_cast<double>(rng_.range(0, 20)) / 10.0;
      if (rng_.chance(30)) retry["respectRetryAfter"] = rng_.chance(50);
      c["retry"] = retry;
    }
    if (multi_) random_windows(c, complete);
    return c;
  }

  json random_window() {
    const std::string unit = pick(units_);
    const bool requests = unit == kDefaultUnit;
    json w = {
        {"limitPerWindow", requests ? rng_.range(1, 12) : rng_.range(5, 200)},
        {"windowInMs", rng_.chance(5) ? rng_.range(kMaxLogEntries + 1, 3 * kMaxLogEntries) : rng_.range(1, 4000)}};
    if (!requests || rng_.chance(50)) w["unit"] = unit;  // no unit: the default unit
    return w;
  }

  // Extra windows: a complete config names 1-3; a patch sometimes adds one,
  // removes one, changes one's limit, span or unit, or changes bucket.unit.
  void random_windows(json& c, bool complete) {
    static const char* names[] = {"tpm", "rpd", "burst", "daily"};
    const auto name = [&] { return std::string(names[rng_.range(0, 3)]); };
    if (complete) {
      json windows = json::object();
      const int64_t n = rng_.range(1, 3);
      for (int64_t i = 0; i < n; ++i) windows[name()] = random_window();
      c["windows"] = windows;
    } else if (rng_.chance(50)) {
      json windows = json::object();
      const int64_t roll = rng_.range(1, 100);
      if (roll <= 30)
        windows[name()] = random_window();
      else if (roll <= 55)
        windows[name()] = nullptr;
      else if (roll <= 75)
        windows[name()] = {{"limitPerWindow", rng_.range(1, 200)}};
      else if (roll <= 85)
        windows[name()] = {{"windowInMs", rng_.range(1, 4000)}};
      else if (roll <= 95)
        windows[name()] = {{"unit", pick(units_)}};
      else
        windows[rng_.chance(50) ? "bucket" : "9lives"] = random_window();  // refused: the config is invalid
      c["windows"] = windows;
    }
    if (!complete && rng_.chance(4)) {
      if (!c.contains("bucket")) c["bucket"] = json::object();
      c["bucket"]["unit"] = rng_.chance(30) ? json(nullptr) : json(pick(units_));
    }
  }

  void configure_random(bool complete) {
    const Millis old_window = engine_.configured() ? cfg().bucket.window_ms : 0;
    json doc = random_config(complete);
    if (!complete && rng_.chance(10)) doc = {{"concurrency", 0}};  // rejected, changes nothing
    const std::string text = doc.dump();
    const Millis at = clock_;
    const bool first = !engine_.configured();
    // The engine forgets takes its old window had already expired.
    if (old_window > 0) horizon_ = std::max(horizon_, std::max(inspect(engine_).now(), at) - old_window);
    // A lowered cap keeps the slots already held: none more until below it.
    held_allowance_ = std::max(held_allowance_, held());
    event({{"e", first ? "configure" : "reconfigure"}, {"now", at}, {"json", text}}, [&](std::string& m) {
      return status_of(first ? engine_.configure(text, at) : engine_.reconfigure(text, at), m);
    });
  }

  std::vector<Ticket> tickets_in(std::initializer_list<HostState> states) const {
    std::vector<Ticket> out;
    for (const auto& [t, c] : calls_) {
      if (std::find(states.begin(), states.end(), c.state) != states.end()) out.push_back(t);
    }
    return out;
  }

  template <class V>
  typename V::value_type pick(const V& v) {
    return v[static_cast<size_t>(rng_.range(0, static_cast<int64_t>(v.size()) - 1))];
  }

  void random_step() {
    if (rng_.chance(5)) {
      withdraw_random();
      return;
    }
    const int64_t roll = rng_.range(1, 100);
    auto running = tickets_in({HostState::Running});
    if (roll <= 28) {
      arrive();
    } else if (roll <= 54 && !running.empty()) {
      report(pick(running));
    } else if (roll <= 58 && !running.empty()) {
      const Ticket t = pick(running);
      const Millis at = clock_;
      calls_[t].state = HostState::Between;
      calls_[t].allowed = allowed_now(calls_[t]);
      event({{"e", "threw"}, {"t", t}, {"now", at}},
            [&](std::string& m) { return status_of(engine_.threw(t, at), m); });
      check_not_retrying(t);
    } else if (roll <= 61 && !running.empty()) {
      gone(pick(running));
    } else if (roll <= 64) {
      auto live = tickets_in({HostState::Waiting, HostState::Running, HostState::Between});
      if (live.empty()) return;
      const Ticket t = pick(live);
      const Millis at = clock_;
      event({{"e", "cancel"}, {"t", t}, {"now", at}},
            [&](std::string& m) { return status_of(engine_.cancel(t, at), m); });
    } else if (roll <= 83) {
      advance_clock();
    } else if (roll <= 86) {
      configure_random(/*complete=*/rng_.chance(30));
    } else if (roll <= 88) {
      const double ms = rng_.chance(10) ? -5.0 : static_cast<double>(rng_.range(0, 2000));
      const Millis at = clock_;
      event({{"e", "pause"}, {"now", at}, {"ms", ms}},
            [&](std::string& m) { return status_of(engine_.pause(ms, at), m); });
    } else if (roll <= 91) {
      run_stats();
    } else if (roll <= 94) {
      evict();
    } else if (roll <= 96 && !ended_.empty()) {
      late_news(pick(ended_));
    } else {
      const Millis at = clock_;
      event({{"e", "tick"}, {"now", at}}, [&](std::string&) {
        engine_.tick(at);
        return 0.0;
      });
    }
  }

  void advance_clock() {
    const auto wake = engine_.next_wake();
    const int64_t roll = rng_.range(1, 10);
    if (roll <= 4 && wake) {
      clock_ = std::max(clock_, *wake + rng_.range(-1, 1));
    } else if (roll == 5) {
      clock_ -= rng_.range(1, 500);  // clocks step back; the engine must not
    } else {
      clock_ += rng_.range(0, engine_.configured() ? cfg().bucket.window_ms / 3 + 1 : 100);
    }
    // Sometimes the timer has not fired yet: the next event (a report, a
    // cancel, gone, an arrival...) is the first to bring the new time, and
    // may be news of an attempt whose deadline has just passed.
    if (rng_.chance(30)) return;
    const Millis at = clock_;
    event({{"e", "tick"}, {"now", at}}, [&](std::string&) {
      engine_.tick(at);
      return 0.0;
    });
  }

  // The units the config's windows count, each with the smallest limit of a
  // window counting it (the largest cost that can ever be admitted).
  std::map<std::string, int64_t> counted_units() const {
    std::map<std::string, int64_t> out;
    if (!engine_.configured()) return out;
    auto add = [&](const std::string& unit, int64_t limit) {
      auto it = out.find(unit);
      if (it == out.end())
        out.emplace(unit, limit);
      else
        it->second = std::min(it->second, limit);
    };
    add(cfg().bucket.unit, cfg().bucket.limit_per_window);
    for (const WindowConfig& w : cfg().windows) add(w.unit, w.limit_per_window);
    return out;
  }

  // ---- waiting with intent (issue 15) --------------------------------------

  // How an arrival waits: a priority (mostly 0), a maxWaitMs (mostly none,
  // 0 now and then) and its own maxRetries (mostly none, 0 included), rarely
  // a value the engine must refuse. The exact family keeps priority 0 and the
  // bucket's maxRetries.
  struct Intent {
    double priority = 0;
    std::optional<double> max_wait;
    std::optional<double> max_retries;
    bool valid = true;
    Waiting waiting() const {
      Waiting w;
      w.priority = priority;
      w.max_wait_ms = max_wait;
      w.max_retries = max_retries;
      return w;
    }
    // The trace carries them on every arrival: "maxWait" and "maxRetries" null for none.
    void trace(json& ev) const {
      ev["priority"] = priority;
      ev["maxWait"] = max_wait ? json(*max_wait) : json(nullptr);
      ev["maxRetries"] = max_retries ? json(*max_retries) : json(nullptr);
    }
  };

  // The attempts a call may make as a retry is decided now: its own
  // maxRetries, else the bucket's as configured now, plus the first.
  int64_t allowed_now(const HostCall& c) const {
    return (c.max_retries ? *c.max_retries : cfg().retry.max_retries) + 1;
  }

  Intent random_intent() {
    Intent w;
    const int64_t window = engine_.configured() ? cfg().bucket.window_ms : 1000;
    if (!exact_) {
      const int64_t roll = rng_.range(1, 100);
      if (roll <= 25)
        w.priority = static_cast<double>(rng_.range(-2, 2));
      else if (roll <= 28)
        w.priority = rng_.chance(50) ? 1000.0 : -1000.0;
    }
    // In the exact family a deadline binds only where concurrency never does:
    // a call that could start at its deadline once the callbacks ahead of it
    // reported (at their start, but in later steps) is rightly rejected.
    if (exact_ && cfg().concurrency < cfg().bucket.limit_per_window) return w;
    const int64_t roll = rng_.range(1, 100);
    if (roll <= 10)
      w.max_wait = 0.0;
    else if (roll <= 30)
      w.max_wait = static_cast<double>(rng_.range(0, std::min<int64_t>(2 * window, 10'000)));
    if (!exact_ && rng_.chance(15)) w.max_retries = static_cast<double>(rng_.range(0, 4));
    if (!exact_ && rng_.chance(2)) {
      w.valid = false;
      const int64_t bad = rng_.range(1, 6);
      if (bad == 1)
        w.priority = 1.5;
      else if (bad == 2)
        w.priority = -1001;
      else if (bad == 3)
        w.max_wait = -1.0;
      else if (bad == 4)
        w.max_wait = 0.5;
      else if (bad == 5)
        w.max_retries = rng_.chance(50) ? -1.0 : 1.5;
      else
        w.max_retries = static_cast<double>(kMaxRetries + 1);
    }
    return w;
  }

  void begin_arrival(const Intent& intent, Millis at) {
    arriving_ticket_ = 0;
    arriving_priority_ = static_cast<int64_t>(intent.priority);
    arriving_max_wait_.reset();
    if (intent.max_wait) arriving_max_wait_ = static_cast<int64_t>(*intent.max_wait);
    arriving_max_retries_.reset();
    if (intent.max_retries) arriving_max_retries_ = static_cast<int64_t>(*intent.max_retries);
    arriving_model_.reset();
    if (exact_ && engine_.configured()) arriving_model_ = exact_model_prediction(std::max(at, inspect(engine_).now()));
  }

  void end_arrival(const Intent& intent, Ticket got) {
    arriving_ticket_ = 0;
    if (!intent.valid && got != 0)
      fail("an arrival with priority " + std::to_string(intent.priority) + ", maxWaitMs " +
           (intent.max_wait ? std::to_string(*intent.max_wait) : std::string("none")) + " and maxRetries " +
           (intent.max_retries ? std::to_string(*intent.max_retries) : std::string("none")) + " was admitted");
    if (got == 0) return;
    result_.priority_arrivals += intent.priority != 0;
    result_.own_retries_arrivals += intent.max_retries.has_value();
    result_.deadline_arrivals += intent.max_wait.has_value();
    result_.try_now_arrivals += intent.max_wait && *intent.max_wait == 0;
  }

  // The exact family's own prediction for a newcomer at `now`: one window,
  // costs of 1 or 0, every queued call (all priority 0) ahead of it in
  // ticket order taking its cost as early as the live takes allow, greedily,
  // and never before the call ahead of it (a cost of 0 starts with the call
  // ahead, or at once). Independent of the engine.
  Millis exact_model_prediction(Millis now) const {
    const int64_t limit = cfg().bucket.limit_per_window;
    const Millis window = cfg().bucket.window_ms;
    const std::string& unit = cfg().bucket.unit;
    std::vector<Millis> times;
    for (const auto& [at, amount] : takes_) {
      if (at > now - window) times.insert(times.end(), static_cast<size_t>(amount), at);
    }
    std::sort(times.begin(), times.end());
    std::vector<int64_t> costs;  // the queue ahead in order, then the newcomer
    for (const auto& [t, c] : calls_) {
      if (c.state == HostState::Waiting) costs.push_back(c.cost_in(unit));
    }
    auto own = arriving_cost_.find(unit);
    costs.push_back(own == arriving_cost_.end() ? 0 : own->second);
    Millis at = now;
    for (const int64_t cost : costs) {
      if (cost == 0) continue;  // starts with the call ahead: `at` as it is
      const size_t n = times.size();
      at = std::max(at, n >= static_cast<size_t>(limit) ? times[n - static_cast<size_t>(limit)] + window : now);
      times.push_back(at);
    }
    return at;
  }

  // A caller gives up: a queued call (most often), one between attempts, a
  // running one, now and then a settled or never issued ticket.
  void withdraw_random() {
    auto live = tickets_in({HostState::Waiting, HostState::Running, HostState::Between});
    Ticket t = 0;
    if (live.empty() || rng_.chance(8)) {
      auto settled = tickets_in({HostState::Settled});
      t = !settled.empty() && rng_.chance(60) ? pick(settled) : static_cast<Ticket>(1'000'000 + rng_.range(0, 1000));
    } else {
      auto queued = tickets_in({HostState::Waiting});
      t = !queued.empty() && rng_.chance(60) ? pick(queued) : pick(live);
    }
    auto it = calls_.find(t);
    const HostState before = it == calls_.end() ? HostState::Settled : it->second.state;
    const Millis at = clock_;
    double rc = 0;
    event({{"e", "withdraw"}, {"t", t}, {"now", at}},
          [&](std::string& m) { return rc = status_of(engine_.withdraw(t, at), m); });
    if (!result_.ok) return;
    const std::string what = "withdraw of ticket " + std::to_string(t);
    if (before == HostState::Settled) {
      if (rc != -static_cast<double>(ErrorCode::UnknownTicket))
        fail(what + " (settled or unknown) returned " + std::to_string(rc));
      return;
    }
    if (rc != 0) {
      fail(what + " returned " + std::to_string(rc));
      return;
    }
    HostCall& c = calls_[t];
    if (before == HostState::Running) {
      // Left to run; only its own deadline may end it in this step.
      if (c.state == HostState::Running) {
        c.withdrawn = true;
      } else if (c.settled_code != ErrorCode::AttemptTimeout) {
        fail(what + ", running, settled it at once");
      }
      ++result_.withdrawn_running;
      return;
    }
    if (c.state != HostState::Settled || c.settled_code != ErrorCode::Cancelled) {
      fail(what + (before == HostState::Waiting ? ", queued," : ", between attempts,") +
           " did not reject it Cancelled");
    }
    // (Its grants: the test's log of every window is storage's after every step.)
    if (before == HostState::Waiting && c.attempts > 0) fail(what + ", queued, started it");
    if (before == HostState::Waiting)
      ++result_.withdrawn_queued;
    else
      ++result_.withdrawn_between;
  }

  // A withdrawn call's attempt ended: never a retry (Cancelled instead).
  void check_not_retrying(Ticket t) {
    auto it = calls_.find(t);
    if (it != calls_.end() && it->second.withdrawn && it->second.state == HostState::Between) {
      fail("withdrawn ticket " + std::to_string(t) + " waits for a retry");
    }
  }

  // A first start of `t`: it is the head of the queue (no call still
  // queued is ahead of it by priority, then arrival), and no earlier than a
  // prediction still standing (unless this step freed capacity).
  void check_first_start(Ticket t, const HostCall& c, Millis now) {
    if (c.state != HostState::Waiting) {
      fail("first start of ticket " + std::to_string(t) + ", which was not queued");
      return;
    }
    bool overtook = false;
    for (const auto& [u, d] : calls_) {
      if (u == t || d.state != HostState::Waiting) continue;
      if (ahead(d, u, c, t)) {
        fail("ticket " + std::to_string(t) + " (priority " + std::to_string(c.priority) + ") started while ticket " +
             std::to_string(u) + " (priority " + std::to_string(d.priority) + "), ahead of it, was still queued");
        return;
      }
      overtook = overtook || u < t;
    }
    result_.overtakes += overtook;
    if (c.deadline && now > *c.deadline) ++result_.late_starts;
    if (!step_freeing_) {
      bool checked = false;
      if (c.predicted) {
        checked = true;
        if (now < *c.predicted) {
          fail("ticket " + std::to_string(t) + " started at " + std::to_string(now) + ", before its prediction " +
               std::to_string(*c.predicted) + " of the step before");
        }
      }
      if (c.first_predicted && c.first_epoch == freeing_epoch_) {
        checked = true;
        if (now < *c.first_predicted) {
          fail("ticket " + std::to_string(t) + " started at " + std::to_string(now) +
               ", before its prediction at arrival " + std::to_string(*c.first_predicted));
        }
      }
      result_.predictions_checked += checked;
    }
    if (exact_ && !c.arriving) {
      if (!c.first_predicted || now != *c.first_predicted) {
        fail("exact family: ticket " + std::to_string(t) + " started at " + std::to_string(now) +
             ", predicted at arrival " +
             (c.first_predicted ? std::to_string(*c.first_predicted) : std::string("never")));
      } else {
        ++result_.exact_starts;
      }
    }
  }

  // A DeadlineExceeded rejection: of a call that never started, that had a
  // maxWaitMs, at its arrival with a wait beyond it, or later at or after its
  // deadline.
  void check_deadline_reject(const Action& a, const HostCall& c, Millis now) {
    const std::string who = "ticket " + std::to_string(a.ticket);
    if (c.state != HostState::Waiting || c.attempts > 0) fail("DeadlineExceeded for " + who + ", which had started");
    if (!c.max_wait) {
      fail("DeadlineExceeded for " + who + ", which has no maxWaitMs");
      return;
    }
    if (a.status < 0) fail("DeadlineExceeded for " + who + " with a negative wait");
    if (c.arriving) {
      // Refused for its prediction (later than now + maxWaitMs), or, with
      // maxWaitMs 0, at its deadline in the same step (a slot in the way).
      if (a.status <= *c.max_wait && (*c.max_wait != 0 || a.status != 0)) {
        fail(who + " refused at arrival with a wait of " + std::to_string(a.status) + " ms, within its maxWaitMs " +
             std::to_string(*c.max_wait));
      }
      if (exact_ && c.model_predicted && a.status != *c.model_predicted - now) {
        fail("exact family: " + who + " refused with a wait of " + std::to_string(a.status) +
             " ms, the test predicts " + std::to_string(*c.model_predicted - now));
      }
      ++result_.refused_at_arrival;
    } else {
      if (!c.deadline || now < *c.deadline) {
        fail(who + " rejected at " + std::to_string(now) + ", before its deadline " +
             std::to_string(c.deadline.value_or(-1)));
      }
      if (exact_) fail("exact family: queued " + who + " missed its deadline");
      ++result_.expired_in_queue;
    }
  }

  // After every step: each queued call has a prediction (no earlier than
  // now), none is still queued at or after its deadline, the timer is set no
  // later than the first deadline, the engine's queue is the host's, and no
  // slot is held for a call that is neither running nor between attempts.
  void check_waiting() {
    for (auto& [t, c] : calls_) c.arriving = false;
    if (!result_.ok || !engine_.configured()) return;
    const Millis now = inspect(engine_).now();
    std::optional<Millis> first_deadline;
    size_t waiting = 0;
    size_t mine = 0;
    for (auto& [t, c] : calls_) {
      mine += c.state == HostState::Running || c.state == HostState::Between;
      if (c.state != HostState::Waiting) continue;
      ++waiting;
      const std::string who = "queued ticket " + std::to_string(t);
      const auto p = engine_.predicted_start(t);
      if (!p) {
        fail(who + " has no predicted start");
        return;
      }
      if (*p < now) fail(who + " is predicted at " + std::to_string(*p) + ", before now");
      if (c.deadline) {
        if (*c.deadline <= now) fail(who + " is still queued at or after its deadline " + std::to_string(*c.deadline));
        if (!first_deadline || *c.deadline < *first_deadline) first_deadline = c.deadline;
      }
      if (exact_ && c.first_predicted && *p != *c.first_predicted) {
        fail("exact family: " + who + "'s prediction moved from " + std::to_string(*c.first_predicted) + " to " +
             std::to_string(*p));
      }
      c.predicted = *p;
      if (!c.first_predicted) {
        c.first_predicted = *p;
        c.first_epoch = freeing_epoch_;
        if (exact_ && c.model_predicted && *c.model_predicted != *p) {
          fail("exact family: " + who + " predicted at " + std::to_string(*p) + ", the test predicts " +
               std::to_string(*c.model_predicted));
        }
      }
    }
    if (waiting != inspect(engine_).queued()) {
      fail("the engine queues " + std::to_string(inspect(engine_).queued()) + " calls, the host " +
           std::to_string(waiting));
    }
    if (first_deadline && engine_.next_wake().value_or(std::numeric_limits<Millis>::max()) > *first_deadline) {
      fail("next_wake is later than a queued call's deadline");
    }
    // Slots beyond the host's running and between calls are restored ones,
    // which only ever go: more would be a slot a withdrawn or refused call kept.
    const size_t active = inspect(engine_).active();
    if (active < mine) {
      fail("the engine holds " + std::to_string(active) + " slots, fewer than the host's " + std::to_string(mine) +
           " running or between attempts");
    } else {
      if (active - mine > extra_held_) {
        fail("a slot leaked: the engine holds " + std::to_string(active) + " slots for " + std::to_string(mine) +
             " calls running or between attempts, " + std::to_string(extra_held_) + " restored before");
      }
      extra_held_ = active - mine;
    }
  }

  // stats' predictedStart (head, tail) and queuedByPriority are the host's queue's.
  void check_stats_waiting(const std::string& out) {
    const json doc = json::parse(out);
    std::vector<std::pair<Ticket, const HostCall*>> queue;
    for (const auto& [t, c] : calls_) {
      if (c.state == HostState::Waiting) queue.emplace_back(t, &c);
    }
    std::sort(queue.begin(), queue.end(),
              [](const auto& a, const auto& b) { return ahead(*a.second, a.first, *b.second, b.first); });
    json by_priority = json::array();
    for (const auto& [t, c] : queue) {
      if (!by_priority.empty() && by_priority.back()["priority"] == c->priority) {
        by_priority.back()["queued"] = by_priority.back()["queued"].get<int64_t>() + 1;
      } else {
        by_priority.push_back({{"priority", c->priority}, {"queued", 1}});
      }
    }
    json predicted = {{"head", nullptr}, {"tail", nullptr}};
    if (!queue.empty()) {
      predicted["head"] = engine_.predicted_start(queue.front().first).value_or(-1);
      predicted["tail"] = engine_.predicted_start(queue.back().first).value_or(-1);
    }
    if (doc.at("queuedByPriority") != by_priority) {
      fail("stats' queuedByPriority " + doc.at("queuedByPriority").dump() + ", the host's queue " + by_priority.dump());
    }
    if (doc.at("predictedStart") != predicted) {
      fail("stats' predictedStart " + doc.at("predictedStart").dump() + ", the queue's head and tail " +
           predicted.dump());
    }
  }

  // ---- the exact family -------------------------------------------------------

  void configure_exact() {
    json bucket = {{"limitPerWindow", rng_.chance(10) ? rng_.range(20, 200) : rng_.range(1, 12)},
                   {"windowInMs", rng_.chance(5) ? rng_.range(3000, kMaxLogEntries) : rng_.range(1, 3000)}};
    // Half the time concurrency never binds (at least the limit): then maxWaitMs too.
    const json doc = {{"bucket", bucket},
                      {"concurrency", rng_.chance(50) ? rng_.range(200, 1000) : rng_.range(1, 5)},
                      {"retry", {{"maxRetries", 0}}}};
    const std::string text = doc.dump();
    const Millis at = clock_;
    event({{"e", "configure"}, {"now", at}, {"json", text}},
          [&](std::string& m) { return status_of(engine_.configure(text, at), m); });
  }

  void exact_step() {
    const int64_t roll = rng_.range(1, 100);
    if (roll <= 55) {
      catch_up();
      arrive();
    } else if (roll <= 88) {
      exact_advance();
    } else if (roll <= 94) {
      catch_up();
      run_stats();
    } else {
      catch_up();
      exact_tick(clock_);
    }
    report_running();
  }

  // Every callback reports success at its start time.
  void report_running() {
    for (int i = 0; i < 10'000 && result_.ok; ++i) {
      auto running = tickets_in({HostState::Running});
      if (running.empty()) return;
      const Ticket t = running.front();
      calls_[t].state = HostState::Between;
      const Millis at = inspect(engine_).now();
      event(
          {{"e", "report"}, {"t", t}, {"now", at}, {"status", 200}, {"flags", 0}, {"ms", nullptr}, {"header", nullptr}},
          [&](std::string& m) { return status_of(engine_.report(t, Report{200}, at), m); });
    }
  }

  void exact_tick(Millis at) {
    event({{"e", "tick"}, {"now", at}}, [&](std::string&) {
      engine_.tick(at);
      return 0.0;
    });
    report_running();
  }

  // The host's timer fires at every wake up to `until`, on time.
  void wakes_until(Millis until) {
    for (int i = 0; i < 10'000 && result_.ok; ++i) {
      const auto wake = engine_.next_wake();
      if (!wake || *wake > until) return;
      clock_ = std::max(clock_, *wake);
      exact_tick(std::max(*wake, inspect(engine_).now()));
    }
  }
  void catch_up() { wakes_until(clock_); }

  void exact_advance() {
    const Millis window = cfg().bucket.window_ms;
    const Millis target = clock_ + (rng_.chance(15) ? rng_.range(0, 2 * window) : rng_.range(0, window / 3 + 1));
    wakes_until(target);
    clock_ = std::max(clock_, target);
    if (rng_.chance(50)) exact_tick(clock_);
  }

  void run_stats() {
    const Millis at = clock_;
    json ev = {{"e", "stats"}, {"now", at}};
    std::string out;
    event(ev, [&](std::string& m) {
      auto s = engine_.stats(at);
      if (!s.ok()) return code_of(s.error(), m);
      out = *s;
      return 0.0;
    });
    if (multi_ && !out.empty() && result_.ok) check_stats_windows(out);
    if (!out.empty() && result_.ok) check_stats_waiting(out);
    if (trace_ && !out.empty()) trace_->back()["out"] = out;
    // The history at both resolutions, for the differential test (it reads only the history).
    if (trace_ && !out.empty())
      trace_->back()["history"] = {*engine_.history_json(10'000, at), *engine_.history_json(60'000, at)};
  }

  // A cost per unit ({"tokens": 120}), now and then a wrong one: a unit no
  // window counts, a bad amount, more than a window's limit.
  void arrive_units() {
    const auto counted = counted_units();
    const std::string default_unit = engine_.configured() ? cfg().bucket.unit : std::string(kDefaultUnit);
    json cost = json::object();
    for (const std::string& unit : units_) {
      if (!rng_.chance(unit == default_unit ? 40 : 75)) continue;
      auto it = counted.find(unit);
      const int64_t limit = it == counted.end() ? 10 : it->second;
      // 0 of the default unit now and then: a call that takes none of it.
      cost[unit] = unit == default_unit ? rng_.range(0, std::min<int64_t>(limit, 4))
                                        : rng_.range(0, std::max<int64_t>(0, limit / 3));
    }
    const int64_t roll = rng_.range(1, 100);
    if (roll <= 3)
      cost["bogus"] = 1;
    else if (roll <= 5)
      cost[pick(units_)] = rng_.chance(50) ? -1.0 : 2.5;
    else if (roll <= 8 && !counted.empty()) {
      auto it = counted.begin();
      std::advance(it, rng_.range(0, static_cast<int64_t>(counted.size()) - 1));
      cost[it->first] = it->second + 1;
    }
    const std::string text = cost.dump();
    std::map<std::string, int64_t> admitted{{default_unit, 1}};
    for (auto it = cost.begin(); it != cost.end(); ++it) {
      admitted[it.key()] = static_cast<int64_t>(it.value().get<double>());
    }
    arriving_cost_ = admitted;
    const Millis at = clock_;
    Ticket got = 0;
    const Intent intent = random_intent();
    json ev = {{"e", "arrive"}, {"now", at}, {"units", text}};
    intent.trace(ev);
    begin_arrival(intent, at);
    event(ev, [&](std::string& m) {
      auto amounts = parse_amounts(text, "cost");
      if (!amounts.ok()) return code_of(amounts.error(), m);
      auto t = engine_.arrive(*amounts, intent.waiting(), at);
      if (!t.ok()) return code_of(t.error(), m);
      got = arriving_ticket_ = *t;
      return static_cast<double>(got);
    });
    end_arrival(intent, got);
    if (got != 0) ++result_.unit_arrivals;
    if (got != 0 && calls_.count(got) == 0) {
      HostCall c;
      c.cost = admitted;
      c.max_retries = arriving_max_retries_;
      calls_.emplace(got, c);
      ++result_.tickets;
    }
  }

  void arrive() {
    if (multi_ && rng_.chance(60)) {
      arrive_units();
      return;
    }
    double cost = 1;
    const int64_t roll = rng_.range(1, 100);
    const int64_t limit = engine_.configured() ? cfg().bucket.limit_per_window : 1;
    if (exact_) {
      if (roll <= 4)
        cost = 0;  // takes nothing: starts with the call ahead of it
      else if (roll <= 6)
        cost = 1.5;  // refused: changes nothing
    } else if (roll <= 5)
      cost = 0;
    else if (roll <= 7)
      cost = 1.5;
    else if (roll <= 8)
      cost = static_cast<double>(limit + 1);
    else if (roll <= 30)
      cost = static_cast<double>(rng_.range(1, std::min<int64_t>(limit, 4)));
    const Millis at = clock_;
    Ticket got = 0;
    arriving_cost_ = {
        {engine_.configured() ? cfg().bucket.unit : std::string(kDefaultUnit), static_cast<int64_t>(cost)}};
    const Intent intent = random_intent();
    json ev = {{"e", "arrive"}, {"now", at}, {"cost", cost}};
    intent.trace(ev);
    begin_arrival(intent, at);
    event(ev, [&](std::string& m) {
      auto t = engine_.arrive(cost, intent.waiting(), at);
      if (!t.ok()) return code_of(t.error(), m);
      got = arriving_ticket_ = *t;
      return static_cast<double>(got);
    });
    end_arrival(intent, got);
    // A caller that could not start at once waits in the queue.
    if (got != 0 && calls_.count(got) == 0) {
      HostCall c;
      c.cost = arriving_cost_;
      c.max_retries = arriving_max_retries_;
      calls_.emplace(got, c);
      ++result_.tickets;
    }
  }

  void report(Ticket t) {
    Report r;
    json ev = {{"e", "report"}, {"t", t}, {"now", clock_}};
    std::string header;
    int flags = 0;
    const int64_t roll = rng_.range(1, 100);
    if (roll <= 45) {
      r.status = 200;
    } else if (roll <= 50) {
      r.status = 500;  // a plain 5xx with no error hook is the caller's value
    } else if (roll <= 58) {
      r.status = 429;
    } else if (roll <= 62) {
      r.status = 429;
      header = std::to_string(rng_.range(0, 3)) + (rng_.chance(50) ? ".5" : "");
    } else if (roll <= 65) {
      r.status = 429;
      header = imf_fixdate(inspect(engine_).now() + rng_.range(-2000, 4000));
    } else if (roll <= 67) {
      r.status = 429;
      header = "soon";
    } else if (roll <= 72) {
      r.status = 200;
      r.rate_limited = true;
      flags |= 1;
      const int64_t pickms = rng_.range(1, 4);
      r.retry_after_ms = pickms == 1 ? -10.0 : static_cast<double>(rng_.range(0, 2500));
    } else if (roll <= 85) {
      r.status = 503;
      r.failure = Failure::Retryable;
      flags |= 2;
    } else {
      r.status = 400;
      r.failure = Failure::Final;
      flags |= 4;
      if (rng_.chance(20)) {  // 429 outranks a failure
        r.status = 429;
      }
    }
    if (!header.empty()) r.retry_after = header;
    ev["status"] = r.status;
    ev["flags"] = flags;
    ev["ms"] = r.retry_after_ms ? json(*r.retry_after_ms) : json(nullptr);
    ev["header"] = header.empty() ? json(nullptr) : json(header);
    std::string usage_text;
    if (multi_) {
      ev["usage"] = nullptr;
      if (rng_.chance(70)) {
        usage_text = random_usage(calls_[t]).dump();
        ev["usage"] = usage_text;
      }
    }
    // A usage naming a unit no window counts, or an amount that is not an
    // integer >= 0, is refused and changes nothing: the attempt still runs.
    bool refused = false;
    settling_.reset();
    if (!usage_text.empty()) {
      std::map<std::string, int64_t> usage;
      const auto counted = counted_units();
      const json parsed = json::parse(usage_text);
      for (auto it = parsed.begin(); it != parsed.end(); ++it) {
        const double v = it.value().get<double>();
        refused = refused || !counted.count(it.key()) || v < 0 || v != std::floor(v);
        usage[it.key()] = static_cast<int64_t>(v);
      }
      settling_ = std::make_pair(t, usage);
    }
    if (!refused) {
      calls_[t].state = HostState::Between;
      calls_[t].allowed = allowed_now(calls_[t]);
    }
    const Millis at = clock_;
    double rc = 0;
    event(ev, [&](std::string& m) {
      if (!usage_text.empty()) {
        auto usage = parse_amounts(usage_text, "usage");
        if (!usage.ok()) return rc = code_of(usage.error(), m);
        r.usage = std::move(*usage);
      }
      return rc = status_of(engine_.report(t, r, at), m);
    });
    settling_.reset();
    if (!refused) check_not_retrying(t);
    if (refused != (rc != 0) || (refused && rc != -static_cast<double>(ErrorCode::InvalidArgument))) {
      fail("report of ticket " + std::to_string(t) + " returned " + std::to_string(rc) +
           (refused ? ", its usage refused" : ""));
    }
  }

  // What an attempt really cost, per unit the windows count: below the
  // reservation or (unless the schedule is honest) above it; now and then a
  // unit no window counts or a bad amount, which the engine refuses.
  json random_usage(const HostCall& c) {
    json usage = json::object();
    for (const auto& [unit, limit] : counted_units()) {
      if (!rng_.chance(65)) continue;
      const int64_t reserved = c.cost_in(unit);
      usage[unit] = honest_ || rng_.chance(50) ? rng_.range(0, reserved)
                                               : reserved + rng_.range(1, std::max<int64_t>(2, limit / 2));
    }
    const int64_t roll = rng_.range(1, 100);
    if (roll <= 2)
      usage["bogus"] = 3;
    else if (roll <= 4)
      usage[pick(units_)] = rng_.chance(50) ? -2.0 : 0.5;
    return usage;
  }

  // Invoking the callback failed in transport: the caller is gone.
  void gone(Ticket t) {
    const Millis at = clock_;
    gone_ = t;
    event({{"e", "gone"}, {"t", t}, {"now", at}}, [&](std::string& m) { return status_of(engine_.gone(t, at), m); });
    gone_.reset();
    if (calls_[t].state != HostState::Settled) fail("gone did not settle ticket " + std::to_string(t));
  }

  // News of an attempt the engine already ended (timed out, or gone): a host
  // that hears it late must be told UnknownTicket, with nothing changed.
  void late_news(Ticket t) {
    const Millis at = clock_;
    const int64_t roll = rng_.range(1, 5);
    json ev = {{"t", t}, {"now", at}};
    std::function<double(std::string&)> call;
    if (roll == 1) {
      ev["e"] = "report";
      ev["status"] = 429;  // a late 429 would pause everyone if it were heard
      ev["flags"] = 0;
      ev["ms"] = 5000.0;
      ev["header"] = nullptr;
      Report r;
      r.status = 429;
      r.retry_after_ms = 5000.0;
      call = [&, r](std::string& m) { return status_of(engine_.report(t, r, at), m); };
    } else if (roll == 2) {
      ev["e"] = "threw";
      call = [&](std::string& m) { return status_of(engine_.threw(t, at), m); };
    } else if (roll == 3) {
      ev["e"] = "gone";
      call = [&](std::string& m) { return status_of(engine_.gone(t, at), m); };
    } else if (roll == 4) {
      ev["e"] = "cancel";
      call = [&](std::string& m) { return status_of(engine_.cancel(t, at), m); };
    } else {
      ev["e"] = "withdraw";
      call = [&](std::string& m) { return status_of(engine_.withdraw(t, at), m); };
    }
    const Millis fu = inspect(engine_).forced_until();
    const size_t active = inspect(engine_).active();
    double rc = 0;
    event(ev, [&](std::string& m) {
      rc = call(m);
      if (!engine_.writes().empty() || !engine_.actions().empty())
        fail("late news of ticket " + std::to_string(t) + " produced output");
      return rc;
    });
    if (rc != -static_cast<double>(ErrorCode::UnknownTicket))
      fail("late news of ticket " + std::to_string(t) + " was not UnknownTicket");
    if (inspect(engine_).forced_until() != fu || inspect(engine_).active() != active)
      fail("late news changed the engine");
    ++result_.late_news;
  }

  // The object is evicted (a crash, a deploy): waiting callers are dropped
  // (their RPC breaks), callbacks already running go on at the upstream
  // until they finish, and a new engine is rebuilt from storage alone.
  void evict() {
    const Millis crash_at = inspect(engine_).now();
    size_t carried = 0;
    for (auto& [t, c] : calls_) {
      if (c.state == HostState::Running) {
        // It finishes at a random time, or runs all the way to its deadline.
        const Millis deadline = c.started + c.timeout;
        const Millis ends = rng_.chance(40) ? deadline : std::min(deadline, crash_at + rng_.range(0, c.timeout));
        old_.push_back(OldCallback{c.started, ends});
        ++carried;
      }
      c.state = HostState::Settled;
    }
    calls_.clear();
    ended_.clear();
    extra_held_ = std::numeric_limits<size_t>::max();  // the restore decides what it holds
    ++result_.crashes;
    if (carried > 0) ++result_.crashes_with_running;
    result_.carried_callbacks += carried;
    Snapshot snap = storage_.snapshot();
    if (rng_.chance(30) && storage_.config_text) {
      // Damage that adds rows only: restore must shrug it off without
      // forgetting a real take.
      const double nan = std::numeric_limits<double>::quiet_NaN();
      snap.grants.emplace_back(nan, 1);
      snap.grants.emplace_back(static_cast<double>(inspect(engine_).now()), -3);
      snap.grants.emplace_back(static_cast<double>(inspect(engine_).now() + 10'000'000'000LL), 2);
      if (!snap.grants.empty()) snap.grants.emplace_back(snap.grants.front().first, 1e12);
      std::swap(snap.grants.front(), snap.grants.back());
      // And a slots record with unreadable entries beside the real ones.
      snap.slots_text = snap.slots_text.value_or("") + ",junk,5:x,:,-1:2,nan:1";
      if (multi_) {
        // The same damage in an extra window, and rows of a window the
        // config does not have (restore deletes them).
        for (auto& [name, rows] : snap.windows) {
          if (!rng_.chance(50)) continue;
          rows.emplace_back(nan, 1);
          rows.emplace_back(static_cast<double>(inspect(engine_).now() + 10'000'000'000LL), 2);
          rows.emplace_back(static_cast<double>(inspect(engine_).now()), 0);
          std::swap(rows.front(), rows.back());
        }
        if (rng_.chance(30))
          snap.windows.emplace_back(
              "ghost", std::vector<std::pair<double, double>>{{static_cast<double>(inspect(engine_).now()), 3}});
      }
    }
    const Millis at = std::max(clock_, inspect(engine_).now());  // wall clocks move on across restarts
    clock_ = at;
    engine_ = Engine{};
    json ev = {{"e", "restore"}, {"now", at}, {"pending", snap.lift_pending}, {"fu", snap.forced_until}};
    ev["config"] = snap.config_text ? json(*snap.config_text) : json(nullptr);
    json rows = json::array();
    for (const auto& [a, b] : snap.grants) {
      rows.push_back({std::isfinite(a) ? json(a) : json(nullptr), std::isfinite(b) ? json(b) : json(nullptr)});
    }
    ev["grants"] = rows;
    if (multi_) {
      json windows = json::array();  // [name, rows] in the order restore is given them
      for (const auto& [name, wrows] : snap.windows) {
        json out = json::array();
        for (const auto& [a, b] : wrows) {
          out.push_back({std::isfinite(a) ? json(a) : json(nullptr), std::isfinite(b) ? json(b) : json(nullptr)});
        }
        windows.push_back({name, out});
      }
      ev["windows"] = windows;
    }
    ev["slots"] = snap.slots_text ? json(*snap.slots_text) : json(nullptr);
    event(ev, [&](std::string&) {
      engine_.restore(snap, at);
      return 0.0;
    });
  }

  void finish() {
    for (int i = 0; i < 20'000 && result_.ok; ++i) {
      auto running = tickets_in({HostState::Running});
      if (!running.empty()) {
        const Ticket t = running.front();
        calls_[t].state = HostState::Between;
        const Millis at = clock_;
        event({{"e", "report"},
               {"t", t},
               {"now", at},
               {"status", 200},
               {"flags", 0},
               {"ms", nullptr},
               {"header", nullptr}},
              [&](std::string& m) { return status_of(engine_.report(t, Report{200}, at), m); });
        continue;
      }
      const auto wake = engine_.next_wake();
      if (!wake) break;
      clock_ = std::max(clock_, *wake);
      const Millis at = clock_;
      event({{"e", "tick"}, {"now", at}}, [&](std::string&) {
        engine_.tick(at);
        return 0.0;
      });
    }
    for (const auto& [t, c] : calls_) {
      if (c.state != HostState::Settled) {
        fail("ticket " + std::to_string(t) + " never settled (nobody will wake it)");
        return;
      }
    }
    check_real_usage();
  }

  // ---- the model of what runs ---------------------------------------------

  // Old callbacks end when they finish, and at the latest at start + the
  // attemptTimeoutMs configured now: the engine holds a restored slot until
  // then, and a configuration that shortens the timeout declares the longer
  // ones hung (the engine's own running attempts keep the deadline they
  // started with). Ended ones never come back. A step that changes the
  // timeout first moves time under the one before it, so whichever is
  // shorter ends them.
  void expire_old(std::optional<Millis> timeout_before) {
    if (!engine_.configured()) return;
    const Millis now = inspect(engine_).now();
    const Millis timeout = std::min(cfg().attempt_timeout_ms, timeout_before.value_or(cfg().attempt_timeout_ms));
    old_.erase(std::remove_if(old_.begin(), old_.end(),
                              [&](const OldCallback& o) { return o.ends <= now || o.started + timeout <= now; }),
               old_.end());
  }

  // Slots held in the current engine as the model sees them: running
  // attempts and calls between attempts, plus old callbacks still running.
  size_t held() const {
    size_t n = old_.size();
    for (const auto& [t, c] : calls_) n += c.state == HostState::Running || c.state == HostState::Between;
    return n;
  }

  // ---- the model of every window (issue 14) --------------------------------
  //
  // The test keeps its own log per window from the events alone: takes at
  // each start (dated on the window's grid, joining a newer grant), usage
  // settled by the rule (a lower real cost refunded from the attempt's grant
  // if it is still live and its log was not replaced since; a higher one
  // charged at the report), refills at a lift, windows carried, created and
  // dropped by reconfigures. Only the penalty's timing is read from the
  // engine's writes (when a lift happened), and after a restart the model is
  // what storage holds (the documented source of truth then).

  static int64_t refill_floor(int64_t limit, double fraction) {
    const double spent = static_cast<double>(limit) * (1.0 - fraction);
    const double nearest = std::round(spent);
    const int64_t floor = std::fabs(spent - nearest) < 1e-9 * std::max(1.0, spent)
                              ? static_cast<int64_t>(nearest)
                              : static_cast<int64_t>(std::ceil(spent));
    return std::clamp<int64_t>(floor, 0, limit);
  }

  ModelWindow* model_window(const std::string& name) {
    for (ModelWindow& w : model_) {
      if (w.name == name) return &w;
    }
    return nullptr;
  }

  void model_prune(Millis now) {
    for (ModelWindow& w : model_) {
      w.log.erase(w.log.begin(), w.log.lower_bound(now - w.ms + 1));
    }
  }

  void model_lift(Millis fu) {
    for (ModelWindow& w : model_) {
      const Millis at = w.log.empty() ? fu : std::max(fu, w.log.rbegin()->first);
      int64_t live = 0;
      for (const auto& [g, amount] : w.log) live += g + w.ms > fu ? amount : 0;
      const int64_t amount = std::max(refill_floor(w.limit, model_fraction_), live);
      w.log.clear();
      if (amount > 0) w.log[at] = amount;
      w.epoch = next_id_++;
    }
  }

  // A grant of `amount` now: on the window's grid, joining a newer grant.
  static Millis model_take(ModelWindow& w, int64_t amount, Millis now) {
    const int64_t q = grid_step_ms(w.ms, w.name.empty() ? kMaxLogEntries : kMaxExtraLogEntries);
    Millis at = (now + q - 1) / q * q;
    if (!w.log.empty() && w.log.rbegin()->first >= at) at = w.log.rbegin()->first;
    w.log[at] += amount;
    return at;
  }

  // The windows of the config the engine now has: the primary keeps its log;
  // an extra window keeps its log when one of that name counted the same unit.
  void model_configure(Millis now) {
    std::vector<ModelWindow> old = std::move(model_);
    model_.clear();
    auto carry = [&](const std::string& name, const std::string& unit, bool primary) {
      for (auto it = old.begin(); it != old.end(); ++it) {
        if (it->name == name && (primary || it->unit == unit)) {
          ModelWindow w = std::move(*it);
          old.erase(it);
          // The primary keeps its log when bucket.unit changes, but the
          // grants in it count the old unit: the rolling windows of real
          // usage in the new unit start here.
          if (w.unit != unit) horizon_from_[name] = attempts_.size();
          // Takes the old window had expired are gone (a longer window does not bring them back).
          horizon_at_[name] =
              std::max(horizon_at_.count(name) ? horizon_at_[name] : std::numeric_limits<Millis>::min(), now - w.ms);
          return w;
        }
      }
      ModelWindow w;
      w.name = name;
      w.incarnation = next_id_++;
      w.epoch = next_id_++;
      horizon_from_[name] = attempts_.size();  // a new log: earlier attempts are not in it
      return w;
    };
    const Config& c = cfg();
    ModelWindow primary = carry("", c.bucket.unit, true);
    primary.unit = c.bucket.unit;
    primary.limit = c.bucket.limit_per_window;
    primary.ms = c.bucket.window_ms;
    model_.push_back(std::move(primary));
    for (const WindowConfig& wc : c.windows) {
      ModelWindow w = carry(wc.name, wc.unit, false);
      w.unit = wc.unit;
      w.limit = wc.limit_per_window;
      w.ms = wc.window_ms;
      model_.push_back(std::move(w));
    }
    model_fraction_ = c.bucket.penalty_refill_fraction;
  }

  // After a restart the engine knows what storage held, and so does the model.
  void model_from_storage() {
    model_.clear();
    if (!engine_.configured()) return;
    // Storage keeps every take: nothing is forgotten across the restart.
    const auto at = horizon_at_;
    const auto from = horizon_from_;
    model_configure(inspect(engine_).now());
    horizon_at_ = at;
    horizon_from_ = from;
    for (ModelWindow& w : model_) {
      w.log.clear();
      for (const auto& [at, amount] : w.name.empty() ? storage_.rows() : storage_.rows(w.name)) w.log[at] = amount;
    }
  }

  // A report's usage, settled as the rule says (see the class comment).
  void model_settle(HostCall& c, const std::map<std::string, int64_t>& usage, Millis now) {
    for (ModelWindow& w : model_) {
      auto used = usage.find(w.unit);
      if (used == usage.end()) continue;
      const int64_t real = used->second;
      const ModelTake* take = nullptr;
      for (const ModelTake& t : c.takes) {
        if (t.window == w.name && t.incarnation == w.incarnation) take = &t;
      }
      const int64_t reserved = take ? take->reserved : 0;
      if (real < reserved) {
        auto g = w.log.find(take->at);
        if (take->epoch != w.epoch || take->at + w.ms <= now || g == w.log.end()) {
          ++result_.stale_refunds;
          continue;
        }
        g->second -= std::min(g->second, reserved - real);
        if (g->second == 0) w.log.erase(g);
        ++result_.refunds;
      } else if (real > reserved) {
        model_take(w, real - reserved, now);
        ++result_.charges;
      }
    }
  }

  // One step's changes, in the engine's order: a due lift and expiry as time
  // moves, then the event (a reconfigure's windows, a report's usage, a
  // penalty that lifts at once), then the starts (check_actions).
  void model_step(const std::string& kind, double rc, bool pending_before, Millis fu_before) {
    const Millis now = inspect(engine_).now();
    if (!model_.empty()) {
      if (pending_before && now >= fu_before) model_lift(fu_before);
      model_prune(now);
    }
    if ((kind == "configure" || kind == "reconfigure") && rc == 0) {
      std::vector<std::pair<std::string, uint64_t>> before;
      for (const ModelWindow& w : model_) before.emplace_back(w.name, w.incarnation);
      model_configure(now);
      model_prune(now);
      std::vector<std::pair<std::string, uint64_t>> after;
      for (const ModelWindow& w : model_) after.emplace_back(w.name, w.incarnation);
      if (kind == "reconfigure" && before != after) ++result_.window_changes;
    }
    if (kind == "report" && rc == 0 && settling_) {
      auto it = calls_.find(settling_->first);
      if (it != calls_.end()) {
        model_settle(it->second, settling_->second, now);
        for (const auto& [unit, amount] : settling_->second) attempts_[it->second.attempt_record].usage[unit] = amount;
        ++result_.usage_reports;
      }
    }
    // A penalty set and lifted within this step (a zero delay).
    bool set = false;
    for (const Write& w : engine_.writes()) {
      if (w.kind != WriteKind::PutPenalty) continue;
      if (w.lift_pending) {
        set = true;
      } else if (set) {
        model_lift(w.at);
        model_prune(now);
        set = false;
      }
    }
  }

  // At a start: every window has room for the attempt's cost (the test's own
  // live total, reservations corrected by usage, plus the cost fits the
  // limit), then the attempt takes it.
  void model_start(Ticket t, HostCall& c, Millis now) {
    c.takes.clear();
    c.attempt_record = attempts_.size();
    AttemptRecord rec;
    rec.start = now;
    rec.reserved = c.cost;
    attempts_.push_back(rec);
    for (ModelWindow& w : model_) {
      const int64_t reserved = c.cost_in(w.unit);
      const int64_t live = w.live();
      if (live + reserved > w.limit) {
        fail("ticket " + std::to_string(t) + " started with " + std::to_string(live) + " live + " +
             std::to_string(reserved) + " " + w.unit + " > limit " + std::to_string(w.limit) + " in window \"" +
             (w.name.empty() ? std::string(kPrimaryWindow) : w.name) + "\"");
      }
      if (reserved > 0)
        c.takes.push_back(ModelTake{w.name, w.incarnation, w.epoch, model_take(w, reserved, now), reserved});
      Checkpoint cp;
      cp.window = w.name;
      cp.unit = w.unit;
      cp.limit = w.limit;
      cp.t = now;
      cp.from = now - w.ms;
      if (horizon_at_.count(w.name)) cp.from = std::max(cp.from, horizon_at_[w.name]);
      cp.first = horizon_from_.count(w.name) ? horizon_from_[w.name] : 0;
      cp.last = c.attempt_record;
      checkpoints_.push_back(cp);
    }
  }

  // The test's windows are the engine's, as storage holds them; a window in
  // debt is counted.
  void check_model() {
    if (!result_.ok) return;
    bool debt = false;
    static const std::map<Millis, int64_t> none;
    for (const ModelWindow& w : model_) {
      auto it = storage_.windows.find(w.name);
      const std::map<Millis, int64_t>& stored = w.name.empty()                 ? storage_.grants
                                                : it == storage_.windows.end() ? none
                                                                               : it->second;
      const std::map<Millis, int64_t>& mine = w.log;
      // Refunds waiting for their rows (see the engine's flush_refunds) leave
      // storage above the test's log, never below it.
      const bool waiting = inspect(engine_).pending_refunds() > 0;
      bool covered = true;
      for (const auto& [at, amount] : mine) {
        auto row = stored.find(at);
        covered = covered && row != stored.end() && row->second >= amount;
      }
      if (waiting ? !covered : stored != mine) {
        std::ostringstream out;
        out << "window \"" << (w.name.empty() ? std::string(kPrimaryWindow) : w.name) << "\": the test holds";
        for (const auto& [at, amount] : mine) out << " " << at << ":" << amount;
        out << "; storage holds";
        for (const auto& [at, amount] : stored) out << " " << at << ":" << amount;
        fail(out.str());
        return;
      }
      debt = debt || w.live() > w.limit;
    }
    for (const auto& [name, rows] : storage_.windows) {
      if (!model_window(name)) fail("storage holds rows of window \"" + name + "\", which the config does not have");
    }
    result_.debt_steps += debt;
  }

  // The stats document's windows are the test's (the engine's memory, read
  // where the engine shows it).
  void check_stats_windows(const std::string& out) {
    const json doc = json::parse(out);
    const json& windows = doc.at("windows");
    if (windows.size() != model_.size()) {
      fail("stats lists " + std::to_string(windows.size()) + " windows, the config has " +
           std::to_string(model_.size()));
      return;
    }
    for (size_t i = 0; i < model_.size(); ++i) {
      const ModelWindow& w = model_[i];
      const json& s = windows[i];
      const std::string name = w.name.empty() ? std::string(kPrimaryWindow) : w.name;
      if (s.at("name") != name || s.at("unit") != w.unit || s.at("limit") != w.limit || s.at("used") != w.live() ||
          s.at("debt") != std::max<int64_t>(0, w.live() - w.limit)) {
        fail("stats window " + s.dump() + " differs from the test's: " + name + " " + w.unit + " limit " +
             std::to_string(w.limit) + " used " + std::to_string(w.live()));
      }
    }
  }

  // Rolling windows of real usage (each attempt's real cost dated at its
  // start; unknown = its reservation): at each start, in each window, the
  // attempts started in the last windowInMs (that window's own: not before
  // it was created, nor forgotten by a shorter window) used at most the
  // limit, plus what those attempts under-estimated. With no under-estimate
  // (honest schedules, and every unit never used above its reservation) it
  // is the limit itself.
  void check_real_usage() {
    for (const Checkpoint& cp : checkpoints_) {
      int64_t real = 0;
      int64_t under = 0;
      for (size_t i = cp.first; i <= cp.last && i < attempts_.size(); ++i) {
        const AttemptRecord& a = attempts_[i];
        if (a.start <= cp.from || a.start > cp.t) continue;
        real += a.real(cp.unit);
        under += a.under(cp.unit);
      }
      if (honest_ && under > 0) fail("an honest schedule under-estimated");
      const int64_t over = real - cp.limit;
      if (over > 0) ++result_.overused_windows;
      result_.max_overuse = std::max(result_.max_overuse, over);
      result_.max_overuse_beyond_underestimate = std::max(result_.max_overuse_beyond_underestimate, over - under);
      if (over > under) {
        std::ostringstream out;
        out << "window \"" << (cp.window.empty() ? std::string(kPrimaryWindow) : cp.window) << "\" used " << real << " "
            << cp.unit << " really in (" << cp.from << ", " << cp.t << "], limit " << cp.limit
            << ", more than the limit plus the under-estimates (" << under << ") of the calls started in it";
        fail(out.str());
        return;
      }
    }
  }

  // ---- checks -------------------------------------------------------------

  void apply_writes() { storage_.apply(engine_); }

  // The slots record is written at most once a step, and on its own (with
  // no grant) only as the idle write, when no attempt runs, or after an
  // erase left running callbacks out of it. That it covers what runs is
  // checked after every step (check_record_covers).
  void check_writes() {
    size_t slots = 0;
    for (const Write& w : engine_.writes()) slots += w.kind == WriteKind::PutSlots;
    if (slots > 1) fail("more than one slots record in a step");
    bool started = false;
    for (const Action& a : engine_.actions()) started = started || a.kind == ActionKind::Start;
    // (Checked in check_actions, which knows whether a start took a grant:
    // one that reserves nothing in any window, after bucket.unit changed
    // while it waited, has none to ride on.)
    slots_alone_ = slots > 0 && engine_.writes().size() == slots && inspect(engine_).running() > 0 && started;
  }

  // What a restart now would hold, from the stored record alone (restore
  // clamps a future entry to now and drops expired ones), must cover every
  // attempt that may still be in flight: at each moment from now on, at
  // least as many held entries as attempts (live here, or callbacks from
  // before a restart) not yet ended. Ends are bounded by start + the
  // timeout configured now, as the restart would bound them.
  void check_record_covers() {
    if (!engine_.configured()) return;
    const Millis now = inspect(engine_).now();
    const Millis timeout = cfg().attempt_timeout_ms;
    std::vector<Millis> holds;
    const std::string text = storage_.slots_text.value_or("");
    for (size_t i = 0; i < text.size();) {
      size_t end = text.find(',', i);
      if (end == std::string::npos) end = text.size();
      const std::string entry = text.substr(i, end - i);
      i = end + 1;
      const size_t colon = entry.find(':');
      if (colon == std::string::npos) continue;
      char* stop = nullptr;
      const double at = std::strtod(entry.substr(0, colon).c_str(), &stop);
      const double n = std::strtod(entry.substr(colon + 1).c_str(), &stop);
      if (!std::isfinite(at) || !std::isfinite(n) || at < 0 || n < 1) continue;
      const Millis until = std::min(static_cast<Millis>(std::ceil(at)), now) + timeout;
      for (int64_t k = 0; k < static_cast<int64_t>(n) && k < 1'000'000; ++k) holds.push_back(until);
    }
    std::vector<Millis> ends;
    for (const auto& [t, c] : calls_) {
      if (c.state == HostState::Running) ends.push_back(std::min(c.started + c.timeout, c.started + timeout));
    }
    for (const OldCallback& o : old_) ends.push_back(std::min(o.ends, o.started + timeout));
    std::sort(holds.rbegin(), holds.rend());
    std::sort(ends.rbegin(), ends.rend());
    for (size_t k = 0; k < ends.size(); ++k) {
      if (ends[k] <= now) break;
      if (k >= holds.size() || holds[k] < ends[k]) {
        fail("the stored slots record \"" + text + "\" does not cover the attempts in flight: the " +
             std::to_string(k + 1) + "th latest ends at " + std::to_string(ends[k]) + ", held only until " +
             (k < holds.size() ? std::to_string(holds[k]) : std::string("never")));
        return;
      }
    }
  }

  void check_actions(const json& ev) {
    const Millis now = inspect(engine_).now();
    bool started = false;
    bool took = false;  // some start took a grant
    size_t active = 0;
    for (const auto& [t, c] : calls_) active += c.state == HostState::Running || c.state == HostState::Between;
    // The newcomer of an arrival joins the host's calls before its step's
    // actions are read (it is in the queue while the engine serves it).
    if (ev["e"] == "arrive" && arriving_ticket_ != 0 && calls_.count(arriving_ticket_) == 0) {
      HostCall c;
      c.cost = arriving_cost_;
      c.priority = arriving_priority_;
      c.max_wait = arriving_max_wait_;
      if (c.max_wait) c.deadline = now + *c.max_wait;
      c.max_retries = arriving_max_retries_;
      c.arriving = true;
      c.model_predicted = arriving_model_;
      calls_.emplace(arriving_ticket_, c);
      ++result_.tickets;
    }
    // Does this step free capacity a prediction before it did not count on?
    const std::string kind = ev["e"].get<std::string>();
    step_freeing_ = kind == "withdraw" || kind == "cancel" || kind == "configure" || kind == "reconfigure" ||
                    kind == "restore" || (kind == "report" && ev.contains("usage") && !ev["usage"].is_null()) ||
                    penalty_extended_;
    for (const Action& a : engine_.actions()) {
      auto q = calls_.find(a.ticket);
      if (a.kind == ActionKind::Reject && q != calls_.end() && q->second.state == HostState::Waiting &&
          !q->second.arriving) {
        step_freeing_ = true;
      }
    }
    if (step_freeing_) ++freeing_epoch_;
    for (const Action& a : engine_.actions()) {
      auto it = calls_.find(a.ticket);
      if (it == calls_.end()) {
        fail("action for unknown ticket " + std::to_string(a.ticket));
        return;
      }
      HostCall& c = it->second;
      if (c.state == HostState::Settled) {
        fail("ticket " + std::to_string(a.ticket) + " acted on after it settled");
        return;
      }
      switch (a.kind) {
        case ActionKind::Start: {
          started = true;
          ++result_.starts;
          if (a.attempt != c.attempts + 1) fail("attempt numbers skipped");
          if (c.attempts > 0 && c.state != HostState::Between) fail("retry started while not between attempts");
          // A retry decided under one config keeps its word after a reconfigure.
          if (a.attempt > 1 && static_cast<int64_t>(a.attempt) > c.allowed)
            fail("more attempts than maxRetries allows");
          if (a.attempt > 1 && c.withdrawn) fail("withdrawn ticket " + std::to_string(a.ticket) + " retried");
          if (a.attempt == 1) {
            check_first_start(a.ticket, c, now);
            // Callbacks from before a crash still hold their slots.
            const int64_t over = static_cast<int64_t>(active + old_.size()) - cfg().concurrency;
            result_.max_over_cap = std::max(result_.max_over_cap, over);
            if (over >= 0) {
              fail("started beyond the concurrency cap: " + std::to_string(active) + " held here and " +
                   std::to_string(old_.size()) + " from before a restart, cap " + std::to_string(cfg().concurrency));
            }
            ++active;
          }
          c.attempts = a.attempt;
          c.state = HostState::Running;
          c.started = now;
          c.timeout = cfg().attempt_timeout_ms;
          model_start(a.ticket, c, now);
          took = took || !c.takes.empty();
          if (!multi_) {
            takes_.emplace_back(now, c.cost_in(cfg().bucket.unit));
            int64_t in_window = 0;
            const Millis from = std::max(now - cfg().bucket.window_ms, horizon_);
            for (const auto& [at, amount] : takes_) in_window += at > from ? amount : 0;
            if (in_window > cfg().bucket.limit_per_window) {
              fail("rolling window holds " + std::to_string(in_window) + " > limit " +
                   std::to_string(cfg().bucket.limit_per_window));
            }
          }
          break;
        }
        case ActionKind::Resolve:
          if (a.attempt != c.attempts) fail("resolved with a value from the wrong attempt");
          c.state = HostState::Settled;
          --active;
          ++result_.settled;
          break;
        case ActionKind::Reject:
          if (a.code == ErrorCode::AttemptTimeout) {
            // Timed out exactly when due: not before (the deadline), and
            // never after (check_state), saying the timeout it ran under.
            if (c.state != HostState::Running) fail("a call timed out that was not running");
            if (now < c.started + c.timeout) fail("an attempt timed out before its deadline");
            if (a.status != c.timeout) fail("a timeout rejection names another timeout");
            ++result_.timeouts;
            ended_.push_back(a.ticket);
          } else if (a.code == ErrorCode::CallerGone) {
            if (gone_ != a.ticket) fail("CallerGone for a ticket nobody said was gone");
            ++result_.gone;
            ended_.push_back(a.ticket);
          } else if (a.code == ErrorCode::DeadlineExceeded) {
            check_deadline_reject(a, c, now);
          } else if (a.code == ErrorCode::CallbackThrew) {
            // Only an exhausted throw: its own maxRetries, else the bucket's, spent.
            if (static_cast<int64_t>(c.attempts) < c.allowed) {
              fail("ticket " + std::to_string(a.ticket) + " rejected for a throw at attempt " +
                   std::to_string(c.attempts) + " of the " + std::to_string(c.allowed) + " allowed");
            }
            if (c.max_retries && *c.max_retries != cfg().retry.max_retries) ++result_.own_retries_binding;
          }
          if (c.arriving && a.code != ErrorCode::DeadlineExceeded) {
            fail("a newcomer rejected with " + std::string(error_code_id(a.code)));
          }
          if (a.code == ErrorCode::Cancelled && c.state == HostState::Waiting && kind != "withdraw" &&
              kind != "cancel") {
            fail("queued ticket " + std::to_string(a.ticket) + " Cancelled by a " + kind);
          }
          if (a.code == ErrorCode::Cancelled && c.withdrawn && (kind == "report" || kind == "threw"))
            ++result_.cancelled_retries;
          c.settled_code = a.code;
          if (c.state == HostState::Running || c.state == HostState::Between) --active;
          c.state = HostState::Settled;
          ++result_.settled;
          break;
        case ActionKind::Exchange:
          // Only a lease tree's child asks its root for leases.
          fail("an Exchange action from an engine outside a lease tree");
          break;
      }
    }
    if (started && inspect(engine_).forced_until() > now) fail("a take started while a penalty was active");
    if (slots_alone_ && took) fail("a start's slots record written without its grant");
  }

  void check_state() {
    if (inspect(engine_).forced_until() < last_fu_) fail("penalty deadline moved earlier");
    last_fu_ = inspect(engine_).forced_until();
    if (inspect(engine_).pending_refunds() == 0) {
      if (storage_.rows() != inspect(engine_).grants())
        fail("storage does not mirror the engine's log after applying its writes");
    } else {
      // Refunded rows not yet rewritten may only over-count.
      std::map<Millis, int64_t> held(storage_.grants.begin(), storage_.grants.end());
      for (const auto& [at, amount] : inspect(engine_).grants()) {
        if (held[at] < amount) fail("storage holds less than the engine's log while refunds wait to be written");
      }
    }
    if (storage_.forced_until != inspect(engine_).forced_until())
      fail("stored penalty deadline differs from the engine's");
    if (inspect(engine_).log_entries() > static_cast<size_t>(kMaxLogEntries)) fail("log exceeds its entry cap");
    if (!engine_.configured()) return;
    const Millis now = inspect(engine_).now();

    // No attempt outlives its deadline, and the host's one timer is set no
    // later than the first.
    std::optional<Millis> first_deadline;
    size_t running = 0;
    for (const auto& [t, c] : calls_) {
      if (c.state != HostState::Running) continue;
      ++running;
      const Millis deadline = c.started + c.timeout;
      if (deadline <= now) fail("ticket " + std::to_string(t) + " still running past its deadline");
      if (!first_deadline || deadline < *first_deadline) first_deadline = deadline;
    }
    if (first_deadline && engine_.next_wake().value_or(std::numeric_limits<Millis>::max()) > *first_deadline) {
      fail("next_wake is later than a running attempt's deadline");
    }
    if (running != inspect(engine_).running()) fail("the engine's running count differs from the model's");

    // In flight across crashes (attempts running here plus callbacks from
    // before a restart still running at the upstream) never exceeds the cap.
    // Slots held bound it (calls between attempts hold one too), and may
    // exceed the cap only where a reconfigure lowered it below the slots it
    // found held, until enough of those end (none more start meanwhile).
    const size_t cap = static_cast<size_t>(cfg().concurrency);
    const size_t in_flight = running + old_.size();
    const size_t slots_held = held();
    const bool lowered = held_allowance_ > cap;
    if (slots_held > std::max(cap, held_allowance_)) {
      fail(std::to_string(slots_held) + " slots held (" + std::to_string(old_.size()) +
           " by callbacks from before a restart) beyond the cap " + std::to_string(cap));
    }
    if (!lowered && in_flight > cap) {
      fail(std::to_string(in_flight) + " attempts in flight (" + std::to_string(old_.size()) +
           " from before a restart) beyond the cap " + std::to_string(cap));
    }
    held_allowance_ = std::min(held_allowance_, slots_held);
    if (!lowered) {
      result_.max_in_flight_over_cap =
          std::max(result_.max_in_flight_over_cap, static_cast<int64_t>(in_flight) - static_cast<int64_t>(cap));
    }
    result_.max_in_flight = std::max(result_.max_in_flight, in_flight);
    result_.max_old_in_flight = std::max(result_.max_old_in_flight, old_.size());
    if (in_flight == cap && !old_.empty()) ++result_.full_with_old;
    if (inspect(engine_).queued() > 0 && !old_.empty() && slots_held - old_.size() < cap && slots_held >= cap &&
        inspect(engine_).forced_until() <= now) {
      ++result_.held_back_by_old;
    }

    // After a step that wrote the record, the stored record is the engine's.
    if (storage_.slots_text.value_or("") != engine_.slots_text() && step_wrote_slots_) {
      fail("stored slots record \"" + storage_.slots_text.value_or("") + "\" differs from the engine's \"" +
           engine_.slots_text() + "\" after a step that wrote it");
    }
    check_record_covers();
  }
};

}  // namespace

ScheduleResult run_schedule(const ScheduleOptions& options, nlohmann::json* trace) {
  return Runner(options, trace).run();
}

}  // namespace drl::testing
