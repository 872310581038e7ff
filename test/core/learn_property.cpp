// Learning from the upstream's rate-limit headers (issue 16), over seeded
// random schedules: a simulated upstream with its own sliding-window quota
// (L per W, counting every request it accepts: the limiter's callbacks and
// an outside consumer's, which spends 10-40% of L per window directly) is the
// ground truth. The engine, configured with the same L and W and learning in
// one convention (github, openai, ietf-draft, auto), is driven like a host:
// calls arrive at random times, a started callback reaches the upstream after
// a latency (0, or 0..5 ms in half the schedules), the upstream answers 200
// with headers giving its true remaining and reset at that moment, or 429
// with Retry-After (the time until a slot frees, rounded up to seconds), the
// report arrives a little later, and the engine is ticked at next_wake().
// Every schedule runs twice, learning off and on, with the same arrivals and
// the same outside spending.
//
// Checked (CHECK/FAIL):
//   - The engine's own invariants: no start during a penalty, never more than
//     `concurrency` running, first starts in arrival order, its own attempts
//     in any window at most L, used never above L, every call settles with
//     its value (none lost).
//   - Learning never starts a call earlier: for every call k that learning on
//     starts before the learning-off run processed its first 429, learning
//     off started k no later (proof sketch: before any 429 learning off is a
//     plain FIFO window-and-slots limiter, and learning only adds grants and
//     pauses). After that 429 learning off pauses (Retry-After, then the
//     penalty's refill floor) and the counts cross: reported, not asserted.
//   - With no outside consumer and no latency nobody is refused, either way.
//   - Learning on is refused less than learning off, over all schedules.
// Measured (WARN): every upstream refusal of a limiter-admitted call with
// learning on, by cause (Refusal): before any header; an outside request
// accepted after the latest observation the engine had read when it started
// the call, still in the window (unavoidable); with latency, an own request
// the engine's window had let go but the upstream still counted, or one that
// reached the upstream after a later call's observation (neither counted
// it); and the rest, unexplained, which the two hidden [learn-gap] cases at
// the end reduce to engine gaps. Also 429s off vs on, outside requests
// refused, and completion times.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <queue>
#include <sstream>
#include <string>
#include <vector>

#include "drl/engine.h"
#include "engine_inspector.h"

using namespace drl;
using drl::internal::inspect;

namespace {

constexpr Millis kT0 = 1'700'000'000'000;  // a whole second: epoch seconds round exactly here
constexpr Millis kNever = std::numeric_limits<Millis>::max();

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

struct Rng {
  uint64_t s;
  uint64_t next() { return s = mix(s); }
  int64_t range(int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(next() % static_cast<uint64_t>(hi - lo + 1));
  }
  bool chance(double p) { return static_cast<double>(next() % 1'000'000) < p * 1'000'000; }
};

enum class Format { GitHub, OpenAI, IetfDraft, Ietf };
const char* const kConventions[] = {"github", "openai", "ietf-draft", "auto"};

struct Schedule {
  uint64_t seed = 0;
  int64_t limit = 1, window = 1000, concurrency = 1;
  int convention = 0;              // index into kConventions
  Format format = Format::GitHub;  // what the upstream sends (auto: any of the four)
  // The upstream's reset: when the oldest counted request leaves its window
  // (the issue's ground truth), or when the newest does (the quota is whole
  // again: OpenAI documents its reset this way).
  bool reset_full = false;
  bool latency = false;          // 0..5 ms from start to the upstream; else 0
  bool headers_on_429 = false;   // a 429 also carries the convention's headers (remaining 0)
  bool no_outside = false;       // one schedule in ten: nobody else spends the quota
  std::vector<Millis> arrivals;  // sorted, absolute
  std::vector<Millis> outside;   // the outside consumer's requests, sorted, absolute
};

Schedule make_schedule(uint64_t seed) {
  Rng r{mix(seed * 0x51ed270b27ULL + 16)};
  Schedule s;
  s.seed = seed;
  s.limit = r.chance(0.2) ? r.range(1, 3) : r.range(2, 20);
  s.window = r.chance(0.3) ? r.range(10, 100) * 100 : r.range(1000, 10'000);
  s.concurrency = r.range(1, s.limit);
  s.convention = static_cast<int>(r.range(0, 3));
  s.format = s.convention == 3 ? static_cast<Format>(r.range(0, 3)) : static_cast<Format>(s.convention);
  s.reset_full = r.chance(0.5);
  s.latency = r.chance(0.5);
  s.headers_on_429 = r.chance(0.5);
  const Millis horizon = s.window * r.range(1, 4);
  const int64_t calls = r.range(std::max<int64_t>(1, s.limit / 2), 4 * s.limit + 2);
  std::vector<Millis> bursts;
  for (int i = 0, n = static_cast<int>(r.range(1, 4)); i < n; ++i) bursts.push_back(r.range(0, horizon));
  const double burstiness = static_cast<double>(r.range(0, 100)) / 100.0;
  for (int64_t i = 0; i < calls; ++i) {
    const Millis at = r.chance(burstiness) ? bursts[r.next() % bursts.size()] + r.range(0, 20) : r.range(0, horizon);
    s.arrivals.push_back(kT0 + at);
  }
  // 10-40% of L per window, at random moments (some in bursts).
  s.no_outside = r.chance(0.1);
  const double share = s.no_outside ? 0.0 : static_cast<double>(r.range(10, 40)) / 100.0;
  const auto spends = static_cast<int64_t>(
      std::llround(share * static_cast<double>(s.limit * horizon) / static_cast<double>(s.window)));
  for (int64_t i = 0; i < spends; ++i) {
    const Millis at =
        r.chance(burstiness / 2) ? bursts[r.next() % bursts.size()] + r.range(0, 50) : r.range(0, horizon);
    s.outside.push_back(kT0 + at);
  }
  std::sort(s.arrivals.begin(), s.arrivals.end());
  std::sort(s.outside.begin(), s.outside.end());
  return s;
}

std::string config_text(const Schedule& s, bool learn) {
  nlohmann::json doc = {{"bucket", {{"limitPerWindow", s.limit}, {"windowInMs", s.window}}},
                        {"concurrency", s.concurrency},
                        {"retry", {{"maxRetries", 100}}}};
  if (learn) doc["learn"] = {{"headers", kConventions[s.convention]}};
  return doc.dump();
}

// A Go-style duration the OpenAI way, exact to the ms (never shorter).
std::string duration_text(Millis ms, uint64_t pick) {
  if (pick % 3 == 0 || ms < 1000) return std::to_string(ms) + "ms";
  std::string out;
  if (pick % 3 == 2 && ms >= 60'000) {
    out = std::to_string(ms / 60'000) + "m";
    ms %= 60'000;
  }
  out += std::to_string(ms / 1000);
  if (ms % 1000 != 0) {
    std::string frac = std::to_string(1000 + ms % 1000).substr(1);
    while (frac.back() == '0') frac.pop_back();
    out += "." + frac;
  }
  return out + "s";
}

Millis ceil_div(Millis a, Millis b) { return a <= 0 ? 0 : (a + b - 1) / b; }

// The upstream's headers at `u`: `remaining` and `reset` (absolute ms).
std::string headers_text(const Schedule& s, Format f, int64_t remaining, Millis reset, Millis u, uint64_t pick) {
  const std::string L = std::to_string(s.limit), R = std::to_string(remaining);
  switch (f) {
    case Format::GitHub:
      return "x-ratelimit-limit: " + L + "\nx-ratelimit-remaining: " + R +
             "\nx-ratelimit-reset: " + std::to_string(ceil_div(reset, 1000)) +
             "\nx-ratelimit-used: " + std::to_string(s.limit - remaining) + "\nx-ratelimit-resource: core";
    case Format::OpenAI:
      return "x-ratelimit-limit-requests: " + L + "\nx-ratelimit-remaining-requests: " + R +
             "\nx-ratelimit-reset-requests: " + duration_text(reset - u, pick) +
             "\nx-ratelimit-limit-tokens: 150000\nx-ratelimit-remaining-tokens: 149000\nx-ratelimit-reset-tokens: 6m0s";
    case Format::IetfDraft:
      return "RateLimit-Limit: " + (pick % 2 ? L : L + ", " + L + ";w=" + std::to_string(ceil_div(s.window, 1000))) +
             "\nRateLimit-Remaining: " + R + "\nRateLimit-Reset: " + std::to_string(ceil_div(reset - u, 1000));
    case Format::Ietf:
      return "RateLimit-Policy: \"default\";q=" + L + ";w=" + std::to_string(ceil_div(s.window, 1000)) +
             "\nRateLimit: \"default\";r=" + R + ";t=" + std::to_string(ceil_div(reset - u, 1000));
  }
  return "";
}

// Why the upstream refused a limiter-admitted call (learning on).
enum Refusal {
  kBeforeHeaders,     // the engine had read no header when it started the call
  kOutsideAfter,      // an outside request accepted after the latest observation read, still in the window
  kLatencyExpired,    // (latency) an own request the engine's window had let go, still counted upstream
  kLatencyReordered,  // (latency) an own request that reached the upstream after a later call's observation
  kUnexplained,       // none of these
  kRefusalKinds
};
const char* const kRefusalNames[] = {"before any header", "outside request after the latest observation",
                                     "latency: own request expired in the engine, not upstream",
                                     "latency: own request overtaken by a later call's observation", "unexplained"};

struct Request {
  size_t call;
  uint32_t attempt;
  Ticket ticket;
  Millis start, reach, report;
  bool processed = false, refused = false, reordered = false;
  // The engine's knowledge when it started the call: had it read a header,
  // and the upstream time of the latest observation it had read.
  bool informed = false;
  Millis seen_upto = -1;
  std::string headers, retry_after;
};

struct RunResult {
  std::string failure;
  std::vector<Millis> first_start;   // per call
  std::vector<Millis> all_starts;    // every attempt, in order
  Millis first_429_report = kNever;  // when the engine processed the first 429
  size_t refused = 0, refused_informed = 0;
  size_t reasons[kRefusalKinds] = {};
  size_t outside_refused = 0;
  size_t blind_starts = 0;  // starts when the upstream's true remaining less in-flight was 0 (after a header)
  size_t lost = 0;
  size_t observations = 0;
  Millis completion = 0;    // last settle - first arrival
  std::string unexplained;  // the first unexplained refusal, for a minimal case
};

struct Event {
  Millis at;
  uint64_t seq;
  int kind;  // 0 arrival, 1 outside, 2 reach, 3 report
  size_t index;
  bool operator>(const Event& o) const { return at != o.at ? at > o.at : seq > o.seq; }
};

RunResult run(const Schedule& s, bool learn, std::ostream* trace = nullptr) {
  RunResult out;
  const size_t n = s.arrivals.size();
  out.first_start.assign(n, kNever);
  Engine e;
  if (auto st = e.configure(config_text(s, learn), kT0); !st.ok()) {
    out.failure = "configure: " + st.error().message;
    return out;
  }
  e.clear_output();

  std::priority_queue<Event, std::vector<Event>, std::greater<>> events;
  uint64_t seq = 0;
  for (size_t i = 0; i < n; ++i) events.push({s.arrivals[i], seq++, 0, i});
  for (size_t j = 0; j < s.outside.size(); ++j) events.push({s.outside[j], seq++, 1, j});

  struct Counted {
    Millis at;
    bool outside;
    size_t request;
  };
  std::deque<Counted> upstream;  // accepted requests in the window, oldest first
  std::vector<Request> requests;
  std::map<Ticket, size_t> call_of;
  std::vector<bool> settled(n, false);
  size_t settled_count = 0, next_first = 0, running = 0;
  std::deque<Millis> own_window;  // the engine's own attempts, for the window check
  bool informed = false;
  Millis seen_upto = -1;
  Millis now = kT0;
  std::ostringstream why;

  auto prune = [&](Millis t) {
    while (!upstream.empty() && upstream.front().at + s.window <= t) upstream.pop_front();
  };
  auto fail = [&](const std::string& what) {
    if (out.failure.empty()) {
      std::ostringstream m;
      m << "seed " << s.seed << (learn ? " (learning on)" : " (learning off)") << " at +" << now - kT0
        << " ms: " << what;
      out.failure = m.str();
    }
  };

  // The upstream processes request `q` at `u`.
  auto reach = [&](size_t q, Millis u) {
    Request& r = requests[q];
    prune(u);
    r.processed = true;
    // Own requests started before this one and still on their way: the
    // upstream does not count them here, and the engine will not discount them.
    for (Request& o : requests) {
      if (!o.processed && o.start < r.start) o.reordered = true;
    }
    const uint64_t pick = mix(s.seed ^ (q * 0x9e37ULL));
    if (static_cast<int64_t>(upstream.size()) < s.limit) {
      upstream.push_back({u, false, q});
      const int64_t remaining = s.limit - static_cast<int64_t>(upstream.size());
      const Millis reset = (s.reset_full ? upstream.back().at : upstream.front().at) + s.window;
      r.headers = headers_text(s, s.format, remaining, reset, u, pick);
      return;
    }
    if (trace) *trace << "+" << u - kT0 << " upstream REFUSES call " << r.call << "\n";
    r.refused = true;
    const Millis frees = upstream.front().at + s.window;
    r.retry_after = std::to_string(ceil_div(frees - u, 1000));
    if (s.headers_on_429) {
      const Millis reset = s.reset_full ? upstream.back().at + s.window : frees;
      r.headers = headers_text(s, s.format, 0, reset, u, pick);
    }
    ++out.refused;
    if (!learn) return;
    if (!r.informed) {
      ++out.reasons[kBeforeHeaders];
      return;
    }
    ++out.refused_informed;
    Refusal reason = kUnexplained;
    for (const Counted& c : upstream) {
      if (c.outside && c.at > r.seen_upto) reason = std::min(reason, kOutsideAfter);
      if (!c.outside && requests[c.request].start + s.window <= r.start) reason = std::min(reason, kLatencyExpired);
      if (!c.outside && requests[c.request].reordered) reason = std::min(reason, kLatencyReordered);
    }
    ++out.reasons[reason];
    if (reason == kUnexplained && out.unexplained.empty()) {
      std::ostringstream m;
      m << "seed " << s.seed << ": L=" << s.limit << " W=" << s.window << " concurrency=" << s.concurrency << " "
        << kConventions[s.convention] << (s.reset_full ? " reset=full" : " reset=oldest")
        << (s.latency ? " latency" : "") << "; call " << r.call << " attempt " << r.attempt << " started +"
        << r.start - kT0 << " refused at +" << u - kT0 << ", latest observation read: upstream +" << r.seen_upto - kT0
        << "; window holds:";
      for (const Counted& c : upstream) {
        m << " " << (c.outside ? "outside" : "own") << "@+" << c.at - kT0;
      }
      out.unexplained = m.str();
    }
  };

  auto handle_output = [&]() {
    const Millis forced = inspect(e).forced_until();
    for (const Action& a : e.actions()) {
      auto it = call_of.find(a.ticket);
      if (it == call_of.end()) {
        fail("action for an unknown ticket");
        continue;
      }
      const size_t k = it->second;
      if (a.kind == ActionKind::Start) {
        if (now < forced) fail("a start during a penalty (forced until +" + std::to_string(forced - kT0) + ")");
        if (++running > static_cast<size_t>(s.concurrency)) fail("more than concurrency running");
        while (!own_window.empty() && own_window.front() + s.window <= now) own_window.pop_front();
        own_window.push_back(now);
        if (static_cast<int64_t>(own_window.size()) > s.limit) fail("own attempts in a window above the limit");
        if (a.attempt == 1) {
          if (k != next_first) fail("first starts out of arrival order");
          next_first = k + 1;
          out.first_start[k] = now;
        }
        out.all_starts.push_back(now);
        if (trace) *trace << "+" << now - kT0 << " start call " << k << " attempt " << a.attempt << "\n";
        if (learn && informed) {
          prune(now);
          int64_t in_flight = 0;
          for (const Request& o : requests) in_flight += !o.processed;
          if (s.limit - static_cast<int64_t>(upstream.size()) - in_flight <= 0) ++out.blind_starts;
        }
        const uint64_t h = mix(s.seed * 0x2545f4914f6cdd1dULL + k * 131 + a.attempt);
        Request r{k, a.attempt, a.ticket, now, now + (s.latency ? static_cast<Millis>(h % 6) : 0), 0};
        r.report = r.reach + static_cast<Millis>((h >> 8) % 41);
        r.informed = informed;
        r.seen_upto = seen_upto;
        requests.push_back(r);
        const size_t q = requests.size() - 1;
        if (r.reach == now) {
          reach(q, now);
        } else {
          events.push({r.reach, seq++, 2, q});
        }
        events.push({requests[q].report, seq++, 3, q});
      } else {
        if (settled[k]) fail("settled twice");
        settled[k] = true;
        ++settled_count;
        out.completion = std::max(out.completion, now - s.arrivals.front());
        if (a.kind == ActionKind::Reject) ++out.lost;
      }
    }
    e.clear_output();
    // Without learning the log never holds more than the limit. With it, an
    // observed grant may hold more than the room left now: it must cover
    // the whole span until the upstream's reset, while the bucket's own
    // grants leave during it (no start is admitted meanwhile: checked above).
    if (!learn && inspect(e).used() > s.limit) fail("used " + std::to_string(inspect(e).used()) + " above the limit");
  };

  for (int steps = 0; out.failure.empty(); ++steps) {
    if (steps > 200'000) {
      fail("no end");
      break;
    }
    const Millis next_event = events.empty() ? kNever : events.top().at;
    const std::optional<Millis> wake = e.next_wake();
    if (wake && *wake <= next_event && (settled_count < n || !events.empty())) {
      now = std::max(now, *wake);
      e.tick(now);
      handle_output();
      continue;
    }
    if (events.empty()) break;
    const Event ev = events.top();
    events.pop();
    now = ev.at;
    switch (ev.kind) {
      case 0: {
        auto t = e.arrive(1, now);
        if (!t.ok()) {
          fail("arrive: " + t.error().message);
          break;
        }
        call_of[*t] = ev.index;
        handle_output();
        break;
      }
      case 1:
        prune(now);
        if (trace)
          *trace << "+" << now - kT0 << " outside "
                 << (static_cast<int64_t>(upstream.size()) < s.limit ? "accepted" : "refused") << "\n";
        if (static_cast<int64_t>(upstream.size()) < s.limit) {
          upstream.push_back({now, true, 0});
        } else {
          ++out.outside_refused;
        }
        break;
      case 2:
        reach(ev.index, now);
        break;
      case 3: {
        Request& r = requests[ev.index];
        Report rep;
        rep.status = r.refused ? 429 : 200;
        if (r.refused) rep.retry_after = std::string_view(r.retry_after);
        if (!r.headers.empty()) {
          rep.rate_limit_headers = std::string_view(r.headers);
          informed = true;
          seen_upto = std::max(seen_upto, r.reach);
          ++out.observations;
        }
        if (r.refused && out.first_429_report == kNever) out.first_429_report = now;
        --running;
        if (trace) {
          *trace << "+" << now - kT0 << " report call " << r.call << " (started +" << r.start - kT0 << ", upstream +"
                 << r.reach - kT0 << ") " << rep.status << " [" << r.headers << "] used before " << inspect(e).used();
        }
        if (auto st = e.report(r.ticket, rep, now); !st.ok()) fail("report: " + st.error().message);
        if (trace) {
          *trace << " after " << inspect(e).used() << " forced +" << inspect(e).forced_until() - kT0 << " grants";
          for (auto [at, amount] : inspect(e).grants()) *trace << " " << amount << "@+" << at - kT0;
          *trace << "\n";
        }
        handle_output();
        break;
      }
    }
  }
  if (out.failure.empty() && settled_count != n) {
    std::ostringstream m;
    m << settled_count << " of " << n << " calls settled";
    fail(m.str());
  }
  return out;
}

uint64_t schedule_count() {
  const char* env = std::getenv("DRL_LEARN_PROPERTY_SCHEDULES");
  return env ? std::strtoull(env, nullptr, 10) : 20'000;
}

}  // namespace

// DRL_LEARN_TRACE=<seed>: prints that schedule's run with learning on.
TEST_CASE("learning from headers: trace one schedule", "[.learn-trace]") {
  const char* env = std::getenv("DRL_LEARN_TRACE");
  if (!env) return;
  const Schedule s = make_schedule(std::strtoull(env, nullptr, 10));
  std::ostringstream trace;
  trace << config_text(s, true) << (s.reset_full ? " reset=full" : " reset=oldest") << " format "
        << static_cast<int>(s.format) << (s.latency ? " latency" : "") << "\n";
  const RunResult r = run(s, true, &trace);
  WARN(trace.str() << r.failure);
}

TEST_CASE("learning from headers: an upstream that also serves an outside consumer", "[learn-property]") {
  const uint64_t count = schedule_count();
  size_t calls = 0, outside = 0, observations = 0;
  size_t refused_off = 0, refused_on = 0, refused_informed = 0, reasons[kRefusalKinds] = {};
  size_t refused_on_by_reset[2] = {}, unexplained_by_reset[2] = {}, unexplained_with_latency = 0;
  size_t outside_refused_off = 0, outside_refused_on = 0, blind_starts = 0, lost = 0;
  size_t compared = 0, later_on = 0, earlier_on_after_429 = 0, prefix_crossings_first = 0, prefix_crossings_all = 0;
  size_t on_faster = 0, on_slower = 0;
  double completion_off = 0, completion_on = 0;
  size_t quiet = 0, quiet_refused = 0;  // schedules with no outside consumer and no latency
  double quiet_off = 0, quiet_on = 0;
  Millis quiet_worst = 0;
  uint64_t quiet_worst_seed = 0;
  std::string first_unexplained[2];
  for (uint64_t seed = 1; seed <= count; ++seed) {
    const Schedule s = make_schedule(seed);
    const RunResult off = run(s, false);
    if (!off.failure.empty()) FAIL(off.failure);
    const RunResult on = run(s, true);
    if (!on.failure.empty()) FAIL(on.failure);
    calls += s.arrivals.size();
    outside += s.outside.size();
    observations += on.observations;
    // Learning off: refusals counted at the upstream, every one of them.
    refused_off += off.refused;
    refused_on += on.refused;
    refused_on_by_reset[s.reset_full] += on.refused;
    refused_informed += on.refused_informed;
    for (int k = 0; k < kRefusalKinds; ++k) reasons[k] += on.reasons[k];
    unexplained_by_reset[s.reset_full] += on.reasons[kUnexplained];
    if (s.latency) unexplained_with_latency += on.reasons[kUnexplained];
    if (!on.unexplained.empty() && first_unexplained[s.reset_full].empty())
      first_unexplained[s.reset_full] = on.unexplained;
    outside_refused_off += off.outside_refused;
    outside_refused_on += on.outside_refused;
    blind_starts += on.blind_starts;
    lost += off.lost + on.lost;
    completion_off += static_cast<double>(off.completion);
    completion_on += static_cast<double>(on.completion);
    if (s.no_outside && !s.latency) {
      // The engine's own account is exact here: nobody is ever refused.
      ++quiet;
      quiet_refused += off.refused + on.refused;
      quiet_off += static_cast<double>(off.completion);
      quiet_on += static_cast<double>(on.completion);
      if (on.completion - off.completion > quiet_worst && s.arrivals.size() < 12) {
        quiet_worst = on.completion - off.completion;
        quiet_worst_seed = seed;
      }
    }
    on_faster += on.completion < off.completion;
    on_slower += on.completion > off.completion;
    // (2) Before the learning-off run's first 429, learning starts no call earlier.
    for (size_t k = 0; k < s.arrivals.size(); ++k) {
      if (on.first_start[k] < off.first_429_report) {
        ++compared;
        if (off.first_start[k] > on.first_start[k]) {
          FAIL("seed " << seed << ": call " << k << " started at +" << on.first_start[k] - kT0 << " with learning on, +"
                       << off.first_start[k] - kT0 << " with learning off, before the learning-off run's first 429 (+"
                       << (off.first_429_report == kNever ? -1 : off.first_429_report - kT0) << ")");
        }
        later_on += off.first_start[k] < on.first_start[k];
      } else if (on.first_start[k] < off.first_start[k]) {
        ++earlier_on_after_429;
      }
    }
    // Over the whole run: some prefix of time in which learning on started more.
    bool crossed = false;
    for (size_t k = 0; k < s.arrivals.size() && !crossed; ++k) crossed = on.first_start[k] < off.first_start[k];
    prefix_crossings_first += crossed;
    std::vector<Millis> a = on.all_starts, b = off.all_starts;
    crossed = false;
    for (size_t k = 0; k < a.size() && !crossed; ++k) crossed = k >= b.size() || a[k] < b[k];
    prefix_crossings_all += crossed;
  }
  std::ostringstream figures;
  figures << count << " schedules (" << calls << " calls, " << outside << " outside requests, " << observations
          << " header observations read): upstream 429s to limiter-admitted calls: learning off " << refused_off
          << ", learning on " << refused_on << " ("
          << (refused_off ? 100.0 * (1.0 - static_cast<double>(refused_on) / static_cast<double>(refused_off)) : 0.0)
          << "% fewer); with learning on " << reasons[kBeforeHeaders] << " before any header and " << refused_informed
          << " after one: ";
  for (int k = kOutsideAfter; k < kRefusalKinds; ++k) figures << reasons[k] << " " << kRefusalNames[k] << "; ";
  figures << "unexplained by reset meaning: oldest " << unexplained_by_reset[0] << " (of " << refused_on_by_reset[0]
          << " refusals), full " << unexplained_by_reset[1] << " (of " << refused_on_by_reset[1] << "), "
          << unexplained_with_latency
          << " of them with latency; starts while the upstream had no room left (true remaining"
          << " less in flight <= 0, after a header): " << blind_starts << "; outside requests refused: learning off "
          << outside_refused_off << ", on " << outside_refused_on << "; calls lost: " << lost;
  WARN(figures.str());
  std::ostringstream times;
  times << "completion (last settle - first arrival), mean: learning off "
        << completion_off / static_cast<double>(count) << " ms, on " << completion_on / static_cast<double>(count)
        << " ms (on faster in " << on_faster << " schedules, slower in " << on_slower << "); " << compared
        << " first starts compared before the learning-off run's first 429: " << later_on
        << " later with learning on, none earlier; after it " << earlier_on_after_429
        << " started earlier with learning on; schedules where learning on led in some prefix of time: first starts "
        << prefix_crossings_first << ", all starts (retries included) " << prefix_crossings_all;
  times << "; " << quiet << " schedules with no outside consumer and no latency: " << quiet_refused
        << " refusals (must be 0), completion mean: learning off "
        << quiet_off / static_cast<double>(std::max<size_t>(1, quiet)) << " ms, on "
        << quiet_on / static_cast<double>(std::max<size_t>(1, quiet)) << " ms (seed " << quiet_worst_seed
        << " with under 12 calls: on slower by " << quiet_worst << " ms)";
  WARN(times.str());
  if (!first_unexplained[0].empty()) WARN("first unexplained refusal, reset = oldest: " << first_unexplained[0]);
  if (!first_unexplained[1].empty()) WARN("first unexplained refusal, reset = full: " << first_unexplained[1]);
  CHECK(lost == 0);
  CHECK(quiet_refused == 0);
  CHECK(refused_on < refused_off);
}

// Gaps the schedules above found, as minimal cases (hidden: they fail on the
// engine as built; run with "[learn-gap]").

// A remaining of 0 pauses the bucket until the reset through the 429
// penalty, whose lift keeps only penaltyRefillFraction of the limit free for
// another window: an upstream saying "0 left until the reset" is then paid
// for twice. With L = 1 every call waits two windows instead of one, with
// nothing outside spending (the schedules: learning on completes 38% later
// than off when no one else spends and there is no latency).
TEST_CASE("learn: a remaining of 0 at full use costs one window, not a second through a penalty's lift", "[learn]") {
  Engine e;
  REQUIRE(e.configure(
               R"({"bucket":{"limitPerWindow":1,"windowInMs":1000},"concurrency":1,"learn":{"headers":"openai"}})", kT0)
              .ok());
  const Ticket a = *e.arrive(1, kT0);
  e.clear_output();
  Report r;
  r.status = 200;
  r.rate_limit_headers = std::string_view("x-ratelimit-remaining-requests: 0\nx-ratelimit-reset-requests: 990ms");
  REQUIRE(e.report(a, r, kT0 + 10).ok());
  (void)e.arrive(1, kT0 + 20);
  e.clear_output();
  Millis started = kNever;
  for (int i = 0; i < 10 && started == kNever; ++i) {
    const std::optional<Millis> wake = e.next_wake();
    if (!wake) break;
    e.tick(*wake);
    for (const Action& x : e.actions()) {
      if (x.kind == ActionKind::Start) started = *wake;
    }
    e.clear_output();
  }
  CHECK(started == kT0 + 1000);  // fails: kT0 + 2000 (learning off: kT0 + 1000)
}
