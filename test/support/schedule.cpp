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
  static const char* months[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                 "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
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
  std::snprintf(buf, sizeof buf, "%s, %02lld %s %04lld %02lld:%02lld:%02lld GMT", wd,
                static_cast<long long>(d), months[m - 1], static_cast<long long>(y),
                static_cast<long long>(sod / 3600), static_cast<long long>(sod / 60 % 60),
                static_cast<long long>(sod % 60));
  return buf;
}

enum class HostState { Waiting, Running, Between, Settled };

struct HostCall {
  HostState state = HostState::Waiting;
  int64_t cost = 1;
  uint32_t attempts = 0;
  int64_t allowed = 0;     // attempts allowed when the last retry was decided
  Millis started = 0;      // Running: when the attempt started (the engine's time)
  Millis timeout = 0;      // Running: the attemptTimeoutMs it started under
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
  Runner(const ScheduleOptions& o, json* trace) : rng_{o.seed * 0x2545F4914F6CDD1DULL + 1}, seed_(o.seed), steps_(o.steps), trace_(trace) {}

  ScheduleResult run() {
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
  int step_ = 0;
  ScheduleResult result_;

  Engine engine_;
  Millis clock_ = 1'700'000'000'000;  // the host's clock: may step backwards

  // The model host's storage, fed only by the engine's writes.
  Storage storage_;

  // What the checker knows.
  std::map<Ticket, HostCall> calls_;
  std::vector<std::pair<Millis, int64_t>> takes_;  // every real take, all generations
  Millis horizon_ = std::numeric_limits<Millis>::min();
  Ticket last_first_start_ = 0;
  Millis last_fu_ = 0;
  std::vector<OldCallback> old_;     // callbacks from before a crash, still running upstream
  std::vector<Ticket> ended_;        // timed out or gone: any news of them is late
  std::optional<Ticket> gone_;       // the ticket of the gone event being run
  size_t held_allowance_ = 0;        // slots held above a cap a reconfigure lowered
  bool step_wrote_slots_ = false;

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
    const double rc = call(message);
    step_wrote_slots_ = false;
    for (const Write& w : engine_.writes()) step_wrote_slots_ = step_wrote_slots_ || w.kind == WriteKind::PutSlots;
    std::vector<double> records;
    internal::encode_output(engine_, records);
    check_writes();
    apply_writes();
    expire_old(timeout_before);
    check_actions(ev);
    engine_.clear_output();
    check_state();
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
    json bucket = {{"limitPerWindow", rng_.chance(10) ? rng_.range(20, 200) : rng_.range(1, 12)},
                   {"windowInMs", long_window ? rng_.range(kMaxLogEntries + 1, 3 * kMaxLogEntries) : rng_.range(1, 3000)}};
    if (rng_.chance(60)) bucket["penaltyRefillFraction"] = rng_.chance(20) ? static_cast<double>(rng_.range(0, 1)) : static_cast<double>(rng_.range(0, 100)) / 100.0;
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
    return c;
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
  Ticket pick(const V& v) {
    return v[static_cast<size_t>(rng_.range(0, static_cast<int64_t>(v.size()) - 1))];
  }

  void random_step() {
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
      calls_[t].allowed = cfg().retry.max_retries + 1;
      event({{"e", "threw"}, {"t", t}, {"now", at}}, [&](std::string& m) { return status_of(engine_.threw(t, at), m); });
    } else if (roll <= 61 && !running.empty()) {
      gone(pick(running));
    } else if (roll <= 64) {
      auto live = tickets_in({HostState::Waiting, HostState::Running, HostState::Between});
      if (live.empty()) return;
      const Ticket t = pick(live);
      const Millis at = clock_;
      event({{"e", "cancel"}, {"t", t}, {"now", at}}, [&](std::string& m) { return status_of(engine_.cancel(t, at), m); });
    } else if (roll <= 83) {
      advance_clock();
    } else if (roll <= 86) {
      configure_random(/*complete=*/rng_.chance(30));
    } else if (roll <= 88) {
      const double ms = rng_.chance(10) ? -5.0 : static_cast<double>(rng_.range(0, 2000));
      const Millis at = clock_;
      event({{"e", "pause"}, {"now", at}, {"ms", ms}}, [&](std::string& m) { return status_of(engine_.pause(ms, at), m); });
    } else if (roll <= 91) {
      const Millis at = clock_;
      json ev = {{"e", "stats"}, {"now", at}};
      std::string out;
      event(ev, [&](std::string& m) {
        auto s = engine_.stats(at);
        if (!s.ok()) return code_of(s.error(), m);
        out = *s;
        return 0.0;
      });
      if (trace_ && !out.empty()) trace_->back()["out"] = out;
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

  void arrive() {
    double cost = 1;
    const int64_t roll = rng_.range(1, 100);
    const int64_t limit = engine_.configured() ? cfg().bucket.limit_per_window : 1;
    if (roll <= 3) cost = 0;
    else if (roll <= 5) cost = 1.5;
    else if (roll <= 8) cost = static_cast<double>(limit + 1);
    else if (roll <= 30) cost = static_cast<double>(rng_.range(1, std::min<int64_t>(limit, 4)));
    const Millis at = clock_;
    Ticket got = 0;
    event({{"e", "arrive"}, {"now", at}, {"cost", cost}}, [&](std::string& m) {
      auto t = engine_.arrive(cost, at);
      if (!t.ok()) return code_of(t.error(), m);
      got = *t;
      return static_cast<double>(got);
    });
    // A caller that could not start at once waits in the queue.
    if (got != 0 && calls_.count(got) == 0) {
      calls_.emplace(got, HostCall{HostState::Waiting, static_cast<int64_t>(cost), 0});
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
    calls_[t].state = HostState::Between;
    calls_[t].allowed = cfg().retry.max_retries + 1;
    const Millis at = clock_;
    event(ev, [&](std::string& m) { return status_of(engine_.report(t, r, at), m); });
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
    const int64_t roll = rng_.range(1, 4);
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
    } else {
      ev["e"] = "cancel";
      call = [&](std::string& m) { return status_of(engine_.cancel(t, at), m); };
    }
    const Millis fu = inspect(engine_).forced_until();
    const size_t active = inspect(engine_).active();
    double rc = 0;
    event(ev, [&](std::string& m) {
      rc = call(m);
      if (!engine_.writes().empty() || !engine_.actions().empty()) fail("late news of ticket " + std::to_string(t) + " produced output");
      return rc;
    });
    if (rc != -static_cast<double>(ErrorCode::UnknownTicket)) fail("late news of ticket " + std::to_string(t) + " was not UnknownTicket");
    if (inspect(engine_).forced_until() != fu || inspect(engine_).active() != active) fail("late news changed the engine");
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
    last_first_start_ = 0;
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
        event({{"e", "report"}, {"t", t}, {"now", at}, {"status", 200}, {"flags", 0}, {"ms", nullptr}, {"header", nullptr}},
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
    if (slots > 0 && engine_.writes().size() == slots && inspect(engine_).running() > 0 && started) {
      fail("a start's slots record written without its grant");
    }
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
    size_t active = 0;
    for (const auto& [t, c] : calls_) active += c.state == HostState::Running || c.state == HostState::Between;
    for (const Action& a : engine_.actions()) {
      auto it = calls_.find(a.ticket);
      if (it == calls_.end() && a.kind == ActionKind::Start && a.attempt == 1 && ev["e"] == "arrive") {
        it = calls_.emplace(a.ticket, HostCall{HostState::Waiting, static_cast<int64_t>(ev["cost"].get<double>()), 0}).first;
        ++result_.tickets;
      }
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
          if (a.attempt > 1 && static_cast<int64_t>(a.attempt) > c.allowed) fail("more attempts than maxRetries allows");
          if (a.attempt == 1) {
            if (a.ticket <= last_first_start_) fail("first starts out of FIFO order");
            last_first_start_ = a.ticket;
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
          takes_.emplace_back(now, c.cost);
          int64_t in_window = 0;
          const Millis from = std::max(now - cfg().bucket.window_ms, horizon_);
          for (const auto& [at, amount] : takes_) in_window += at > from ? amount : 0;
          if (in_window > cfg().bucket.limit_per_window) {
            fail("rolling window holds " + std::to_string(in_window) + " > limit " + std::to_string(cfg().bucket.limit_per_window));
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
          }
          if (c.state == HostState::Running || c.state == HostState::Between) --active;
          c.state = HostState::Settled;
          ++result_.settled;
          break;
      }
    }
    if (started && inspect(engine_).forced_until() > now) fail("a take started while a penalty was active");
  }

  void check_state() {
    if (inspect(engine_).forced_until() < last_fu_) fail("penalty deadline moved earlier");
    last_fu_ = inspect(engine_).forced_until();
    if (storage_.rows() != inspect(engine_).grants()) fail("storage does not mirror the engine's log after applying its writes");
    if (storage_.forced_until != inspect(engine_).forced_until()) fail("stored penalty deadline differs from the engine's");
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
