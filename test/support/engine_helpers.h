// Shared helpers for the engine's unit tests: config documents, action and
// write builders, report builders and a model storage fed by the engine's writes.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "drl/engine.h"
#include "engine_inspector.h"
#include "model_storage.h"

namespace Catch {

template <>
struct StringMaker<drl::Action> {
  static std::string convert(const drl::Action& a) {
    std::ostringstream out;
    switch (a.kind) {
      case drl::ActionKind::Start:
        out << "Start{" << a.ticket << ", attempt " << a.attempt << "}";
        break;
      case drl::ActionKind::Resolve:
        out << "Resolve{" << a.ticket << ", attempt " << a.attempt << "}";
        break;
      case drl::ActionKind::Reject:
        out << "Reject{" << a.ticket << ", " << drl::error_code_id(a.code) << ", status " << a.status << "}";
        break;
      case drl::ActionKind::Exchange:
        out << "Exchange{}";
        break;
    }
    return out.str();
  }
};

template <>
struct StringMaker<drl::Write> {
  static std::string convert(const drl::Write& w) {
    static const char* const names[] = {"?",           "PutGrant",       "DeleteGrantsThrough", "DeleteGrant",
                                        "ClearGrants", "PutPenalty",     "PutConfig",           "EraseAll",
                                        "PutSlots",    "PutReservation", "PutReleased"};
    const int k = static_cast<int>(w.kind);
    std::ostringstream out;
    out << (k >= 1 && k <= 10 ? names[k] : "?") << "{" << w.at << ", ";
    if (w.kind == drl::WriteKind::PutPenalty) {
      out << (w.lift_pending ? "lift pending" : "lifted");
    } else {
      out << w.amount;
    }
    if (w.window != 0) out << ", window " << w.window;
    out << "}";
    return out.str();
  }
};

template <>
struct StringMaker<drl::ErrorCode> {
  static std::string convert(drl::ErrorCode c) { return std::string(drl::error_code_id(c)); }
};

}  // namespace Catch

namespace drl::test {

using nlohmann::json;
using Grants = std::vector<std::pair<Millis, int64_t>>;

// A realistic epoch time: arithmetic near it is not arithmetic near zero.
inline constexpr Millis T0 = 1'700'000'000'000;

// A config document; `retry` and `fraction` are left out unless given, so
// the engine's defaults apply.
inline std::string config(int64_t limit, int64_t window, int64_t concurrency, const json& retry = nullptr,
                          std::optional<double> fraction = std::nullopt) {
  json doc = {{"bucket", {{"limitPerWindow", limit}, {"windowInMs", window}}}, {"concurrency", concurrency}};
  if (fraction) doc["bucket"]["penaltyRefillFraction"] = *fraction;
  if (!retry.is_null()) doc["retry"] = retry;
  return doc.dump();
}

// `text` with attemptTimeoutMs set.
inline std::string with_timeout(const std::string& text, int64_t attempt_timeout_ms) {
  json doc = json::parse(text);
  doc["attemptTimeoutMs"] = attempt_timeout_ms;
  return doc.dump();
}

// A configured engine with the configure step's output cleared.
inline Engine configured(const std::string& text, Millis now = T0) {
  Engine e;
  const Status st = e.configure(text, now);
  if (!st.ok()) FAIL("configure failed: " << st.error().message);
  e.clear_output();
  return e;
}

inline Action start(Ticket t, uint32_t attempt = 1) { return Action{ActionKind::Start, t, attempt}; }
inline Action resolve(Ticket t, uint32_t attempt = 1) { return Action{ActionKind::Resolve, t, attempt}; }
inline Action reject(Ticket t, ErrorCode code, int32_t status = 0) {
  return Action{ActionKind::Reject, t, 0, code, status};
}

inline Write put_grant(Millis at, int64_t amount) { return Write{WriteKind::PutGrant, at, amount}; }
inline Write delete_through(Millis at) { return Write{WriteKind::DeleteGrantsThrough, at, 0}; }
inline Write delete_grant(Millis at) { return Write{WriteKind::DeleteGrant, at, 0}; }
inline Write clear_grants() { return Write{WriteKind::ClearGrants, 0, 0}; }
inline Write put_penalty(Millis until, bool lift_pending) {
  Write w{WriteKind::PutPenalty, until};
  w.lift_pending = lift_pending;
  return w;
}
inline Write put_config() { return Write{WriteKind::PutConfig, 0, 0}; }
inline Write erase_all() { return Write{WriteKind::EraseAll, 0, 0}; }
inline Write put_slots() { return Write{WriteKind::PutSlots, 0, 0}; }

// next_wake() as a plain number (kNoWake when nobody waits on time), so a
// failed check prints the times.
inline constexpr Millis kNoWake = -1;
// attemptTimeoutMs when a config leaves it out: a running attempt's wake.
inline constexpr Millis kDefaultAttemptTimeout = 120'000;
// How long a bucket where nothing runs waits before writing its slots record
// alone (core/src/engine.cpp, kIdleSlotsWriteMs).
inline constexpr Millis kIdleSlotsWrite = 500;
// How much later than its start the slots record dates a live attempt, so
// the record covers the starts within that span (core/src/engine.cpp,
// kSlotsCoverMs): 1 s, or a quarter of attemptTimeoutMs when that is less.
inline constexpr Millis kSlotsCover = 1000;
inline Millis cover_span(Millis attempt_timeout) { return std::min(kSlotsCover, attempt_timeout / 4); }
// One slots record entry, "at:count": `count` slots held until at + the timeout.
inline std::string slot(Millis at, int64_t count = 1) { return std::to_string(at) + ":" + std::to_string(count); }
inline Millis wake(const Engine& e) { return e.next_wake().value_or(kNoWake); }

// One step's output, taken from the engine (which is then cleared). The
// slots record (PutSlots) and the release mark (PutReleased) are counted
// apart from the other writes: they ride along with them, and
// test/core/slots.cpp and release.cpp check them on their own.
struct Step {
  std::vector<Write> writes;
  std::vector<Action> actions;
  size_t slot_records = 0;
  size_t release_marks = 0;
};

inline Step drain(Engine& e) {
  Step s{{}, e.actions()};
  for (const Write& w : e.writes()) {
    if (w.kind == WriteKind::PutSlots) {
      ++s.slot_records;
    } else if (w.kind == WriteKind::PutReleased) {
      ++s.release_marks;
    } else {
      s.writes.push_back(w);
    }
  }
  e.clear_output();
  return s;
}

// The idle slots write of a quiet bucket: due at `at`, it stores the slots
// record alone and starts nobody. Ticks to it and checks all of that.
inline void expect_idle_slots_write(Engine& e, Millis at) {
  CHECK(wake(e) == at);
  e.tick(at);
  const Step s = drain(e);
  CHECK(s.actions.empty());
  CHECK(s.writes.empty());
  CHECK(s.slot_records == 1);
}

// The engine's pending writes without the slots record and the release mark (see Step).
inline std::vector<Write> writes_of(const Engine& e) {
  std::vector<Write> out;
  for (const Write& w : e.writes()) {
    if (w.kind != WriteKind::PutSlots && w.kind != WriteKind::PutReleased) out.push_back(w);
  }
  return out;
}

inline std::vector<Action> actions(Engine& e) { return drain(e).actions; }

// Arrives wanting `cost` (1 unless given) and requires success.
inline Ticket arrive(Engine& e, double cost, Millis now) {
  auto t = e.arrive(cost, now);
  if (!t.ok()) FAIL("arrive failed: " << t.error().message);
  return *t;
}
inline Ticket arrive(Engine& e, Millis now) { return arrive(e, 1, now); }

inline void report(Engine& e, Ticket t, const Report& r, Millis now) {
  const Status st = e.report(t, r, now);
  if (!st.ok()) FAIL("report failed: " << st.error().message);
}

inline void threw(Engine& e, Ticket t, Millis now) {
  const Status st = e.threw(t, now);
  if (!st.ok()) FAIL("threw failed: " << st.error().message);
}

inline void cancel(Engine& e, Ticket t, Millis now) {
  const Status st = e.cancel(t, now);
  if (!st.ok()) FAIL("cancel failed: " << st.error().message);
}

inline void gone(Engine& e, Ticket t, Millis now) {
  const Status st = e.gone(t, now);
  if (!st.ok()) FAIL("gone failed: " << st.error().message);
}

inline void pause(Engine& e, double ms, Millis now) {
  const Status st = e.pause(ms, now);
  if (!st.ok()) FAIL("pause failed: " << st.error().message);
}

inline Report ok(int32_t status = 200) {
  Report r;
  r.status = status;
  return r;
}

// A 429 with an explicit delay (the rateLimit hook's retryAfterMs).
inline Report too_many(std::optional<double> retry_after_ms = std::nullopt) {
  Report r = ok(429);
  r.retry_after_ms = retry_after_ms;
  return r;
}

inline Report failed(Failure failure, int32_t status) {
  Report r = ok(status);
  r.failure = failure;
  return r;
}

inline json stats(Engine& e, Millis now) {
  auto s = e.stats(now);
  if (!s.ok()) FAIL("stats failed: " << s.error().message);
  return json::parse(*s);
}

inline size_t count(const std::vector<Action>& actions, ActionKind kind) {
  size_t n = 0;
  for (const Action& a : actions) n += a.kind == kind;
  return n;
}

inline size_t count(const std::vector<Write>& writes, WriteKind kind) {
  size_t n = 0;
  for (const Write& w : writes) n += w.kind == kind;
  return n;
}

// Tickets started (first attempt or retry), in order.
inline std::vector<Ticket> started(const std::vector<Action>& actions) {
  std::vector<Ticket> out;
  for (const Action& a : actions) {
    if (a.kind == ActionKind::Start) out.push_back(a.ticket);
  }
  return out;
}

using drl::testing::Storage;

// An engine whose every write lands in `storage`, as a host applies them.
struct Host {
  Engine engine;
  Storage storage;

  explicit Host(const std::string& text, Millis now = T0) {
    REQUIRE(engine.configure(text, now).ok());
    step();
  }
  Step step() {
    storage.apply(engine);
    return drain(engine);
  }
  // One call taking `cost` at `now` and reporting success at once.
  void take(double cost, Millis now) {
    const Ticket t = arrive(engine, cost, now);
    report(engine, t, ok(), now);
    step();
  }
  void take(Millis now) { take(1, now); }
};

// Test-only views of an engine: inspect(e).used(), inspect(e).queued(), ...
using drl::internal::inspect;

}  // namespace drl::test
