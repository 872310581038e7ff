// The wire form of the lease messages and rows: see lease_wire.h.
#include "lease_wire.h"

#include "drl/limits.h"
#include "json.h"
#include "utf8_text.h"

namespace drl::internal {

using json::Value;

namespace {

constexpr int64_t kMaxWireInt = 9'007'199'254'740'991;  // 2^53 - 1: a JS number holds it
// Deep enough for a close's uses (message, closes, a close, uses, a window,
// a group), shallow enough that a hostile nesting is refused at once.
constexpr int kMaxWireDepth = 8;

// Reads one document, naming every field that breaks its shape by its path.
class Reader {
 public:
  explicit Reader(std::string& error) : error_(error) {}

  bool failed() const { return !error_.empty(); }

  // The document's object, or nullptr with the reason in the error.
  // Whether the text is small enough to read at all.
  bool fits(std::string_view text, const std::string& what) {
    error_.clear();
    if (text.size() <= kMaxWireBytes) return true;
    fail(what + " is too large (" + std::to_string(text.size()) + " bytes, at most " + std::to_string(kMaxWireBytes) +
         ")");
    return false;
  }

  // The document's object, or nullptr with the reason in the error.
  const Value* object_of(const json::Parsed& doc, const std::string& what) {
    if (doc.too_deep) {
      // Refused while reading, never built: a deep nesting costs no stack.
      fail(what + " is " + doc.error);
      return nullptr;
    }
    if (!doc.error.empty()) {
      fail(what + " is not valid JSON: " + doc.error);
      return nullptr;
    }
    if (!doc.doc.IsObject()) {
      fail(what + " must be a JSON object (received " + shown(doc.doc) + ")");
      return nullptr;
    }
    return &doc.doc;
  }

  // An integer field in [lo, hi]; absent: `fallback` when given, else an error.
  int64_t integer(const Value& obj, const std::string& path, const char* key, int64_t lo, int64_t hi,
                  std::optional<int64_t> fallback = std::nullopt) {
    if (failed()) return 0;
    const Value* it = json::find(obj, key);
    if (it == nullptr) {
      if (fallback) return *fallback;
      fail(path + "." + key + " is missing");
      return 0;
    }
    return number(*it, path + "." + key, lo, hi);
  }

  int64_t number(const Value& v, const std::string& path, int64_t lo, int64_t hi) {
    if (failed()) return 0;
    int64_t n = 0;
    bool ok = false;
    if (v.IsUint64()) {
      const uint64_t u = v.GetUint64();
      ok = u <= static_cast<uint64_t>(hi);
      n = ok ? static_cast<int64_t>(u) : 0;
    } else if (v.IsInt64()) {
      n = v.GetInt64();
      ok = true;
    } else if (v.IsDouble()) {
      // 5.0 is an integer; 5.5 and 1e300 are not.
      const double d = v.GetDouble();
      ok = d >= -9.007199254740991e15 && d <= 9.007199254740991e15 && d == static_cast<double>(static_cast<int64_t>(d));
      n = ok ? static_cast<int64_t>(d) : 0;
    }
    if (!ok || n < lo || n > hi) {
      fail(path + " must be an integer between " + std::to_string(lo) + " and " + std::to_string(hi) + " (received " +
           shown(v) + ")");
      return 0;
    }
    return n;
  }

  const Value* array(const Value& obj, const std::string& path, const char* key, size_t most, bool required = false) {
    if (failed()) return nullptr;
    const Value* it = json::find(obj, key);
    if (it == nullptr) {
      if (required) fail(path + "." + key + " is missing");
      return nullptr;
    }
    return list(*it, path + "." + key, most);
  }

  const Value* list(const Value& v, const std::string& path, size_t most) {
    if (failed()) return nullptr;
    if (!v.IsArray()) {
      fail(path + " must be an array (received " + shown(v) + ")");
      return nullptr;
    }
    if (v.Size() > most) {
      fail(path + " has " + std::to_string(v.Size()) + " entries, at most " + std::to_string(most));
      return nullptr;
    }
    return &v;
  }

  const Value* object(const Value& v, const std::string& path) {
    if (failed()) return nullptr;
    if (!v.IsObject()) {
      fail(path + " must be an object (received " + shown(v) + ")");
      return nullptr;
    }
    return &v;
  }

  std::vector<int64_t> amounts(const Value& obj, const std::string& path, const char* key, int64_t lo = 0) {
    std::vector<int64_t> out;
    const Value* a = array(obj, path, key, kMaxWindows, /*required=*/true);
    if (!a) return out;
    for (size_t i = 0; i < a->Size() && !failed(); ++i) {
      out.push_back(number((*a)[i], path + "." + key + "[" + std::to_string(i) + "]", lo, kMaxWireInt));
    }
    return out;
  }

  std::vector<DemandLevel> demand(const Value& obj, const std::string& path) {
    std::vector<DemandLevel> out;
    const Value* a = array(obj, path, "demand", kMaxWireList);
    if (!a) return out;
    for (size_t i = 0; i < a->Size() && !failed(); ++i) {
      const std::string p = path + ".demand[" + std::to_string(i) + "]";
      const Value* d = object((*a)[i], p);
      if (!d) break;
      DemandLevel level;
      level.priority = static_cast<int32_t>(integer(*d, p, "priority", -kMaxPriority, kMaxPriority));
      level.units = amounts(*d, p, "units");
      level.slots = integer(*d, p, "slots", 0, kMaxWireInt);
      out.push_back(std::move(level));
    }
    return out;
  }

  std::optional<LeaseGrant> grant(const Value& g, const std::string& p) {
    LeaseGrant out;
    out.child = static_cast<uint64_t>(integer(g, p, "child", 0, kMaxWireInt));
    out.incarnation = static_cast<uint64_t>(integer(g, p, "incarnation", 0, kMaxWireInt));
    out.seq = static_cast<uint64_t>(integer(g, p, "seq", 0, kMaxWireInt));
    out.lease_id = static_cast<uint64_t>(integer(g, p, "leaseId", 0, kMaxWireInt));
    out.units = amounts(g, p, "units");
    out.slots = integer(g, p, "slots", 0, kMaxWireInt);
    out.duration_ms = integer(g, p, "durationMs", 0, kMaxWireInt);
    out.retry_in_ms = integer(g, p, "retryInMs", 0, kMaxWireInt, 0);
    out.penalty_ms = integer(g, p, "penaltyMs", 0, kMaxWireInt, 0);
    out.slots_wanted = integer(g, p, "slotsWanted", 0, kMaxWireInt, 0);
    out.units_wanted = integer(g, p, "unitsWanted", 0, kMaxWireInt, 0);
    if (failed()) return std::nullopt;
    const Value* r = json::find(g, "refusal");
    const std::string name = r != nullptr && r->IsString() ? json::text(*r) : "";
    bool known = false;
    for (Refusal each : {Refusal::kNone, Refusal::kNothingFree, Refusal::kNothingAsked, Refusal::kStaleIncarnation,
                         Refusal::kMalformed}) {
      if (name == refusal_name(each)) out.refusal = each, known = true;
    }
    if (!known) {
      fail(p +
           ".refusal must be one of \"none\", \"nothingFree\", \"nothingAsked\", \"staleIncarnation\", "
           "\"malformed\" (received " +
           (r == nullptr ? std::string("nothing") : shown(*r)) + ")");
      return std::nullopt;
    }
    return out;
  }

  // [[at or age, amount], ...] per window.
  std::vector<std::vector<std::pair<int64_t, int64_t>>> groups(const Value& obj, const std::string& path,
                                                               const char* key, int64_t lo) {
    std::vector<std::vector<std::pair<int64_t, int64_t>>> out;
    const Value* windows = array(obj, path, key, kMaxWindows, /*required=*/true);
    if (!windows) return out;
    for (size_t w = 0; w < windows->Size() && !failed(); ++w) {
      const std::string pw = path + "." + key + "[" + std::to_string(w) + "]";
      const Value* list_w = list((*windows)[w], pw, kMaxWireList);
      if (!list_w) break;
      out.emplace_back();
      for (size_t i = 0; i < list_w->Size() && !failed(); ++i) {
        const std::string pg = pw + "[" + std::to_string(i) + "]";
        const Value& g = (*list_w)[i];
        if (!g.IsArray() || g.Size() != 2) {
          fail(pg + " must be a pair [" + (lo < 0 ? "atMs" : "ageMs") + ", amount] (received " + shown(g) + ")");
          break;
        }
        const int64_t first = number(g[0], pg + "[0]", lo, kMaxWireInt);
        const int64_t amount = number(g[1], pg + "[1]", 0, kMaxWireInt);
        out.back().push_back({first, amount});
      }
    }
    return out;
  }

  std::vector<int64_t> times(const Value& obj, const std::string& path, const char* key, int64_t lo) {
    std::vector<int64_t> out;
    const Value* a = array(obj, path, key, kMaxWireList, /*required=*/true);
    if (!a) return out;
    for (size_t i = 0; i < a->Size() && !failed(); ++i) {
      out.push_back(number((*a)[i], path + "." + key + "[" + std::to_string(i) + "]", lo, kMaxWireInt));
    }
    return out;
  }

  bool boolean(const Value& obj, const std::string& path, const char* key) {
    if (failed()) return false;
    const Value* it = json::find(obj, key);
    if (it == nullptr || !it->IsBool()) {
      fail(path + "." + key + " must be true or false (received " +
           (it == nullptr ? std::string("nothing") : shown(*it)) + ")");
      return false;
    }
    return it->GetBool();
  }

  ClockBounds clock(const Value& obj, const std::string& path) {
    ClockBounds c;
    const Value* it = json::find(obj, "clock");
    if (it == nullptr || failed()) return c;
    const Value* o = object(*it, path + ".clock");
    if (!o) return c;
    c.slack_ms = integer(*o, path + ".clock", "slackMs", 0, kMaxDelayMs, 0);
    // Below 10^6: a clock that may stand still gives no bound at all.
    c.drift_ppm = integer(*o, path + ".clock", "driftPpm", 0, 100'000, 0);
    return c;
  }

  void fail(std::string why) {
    if (error_.empty()) error_ = std::move(why);
  }

 private:
  static std::string shown(const Value& v) {
    std::string s = json::dump(v);
    return s.size() > 60 ? shorten(std::move(s), 57) : s;
  }

  std::string& error_;
};

}  // namespace

std::optional<Exchange> read_exchange(std::string_view text, std::string& error) {
  Reader r(error);
  const std::string p = "exchange";
  if (!r.fits(text, p)) return std::nullopt;
  const json::Parsed parsed(text, kMaxWireDepth);
  const Value* doc = r.object_of(parsed, p);
  if (!doc) return std::nullopt;
  Exchange ex;
  ex.child = static_cast<uint64_t>(r.integer(*doc, p, "child", 0, kMaxWireInt));
  ex.incarnation = static_cast<uint64_t>(r.integer(*doc, p, "incarnation", 0, kMaxWireInt));
  ex.seq = static_cast<uint64_t>(r.integer(*doc, p, "seq", 0, kMaxWireInt));
  ex.penalty_ms = r.integer(*doc, p, "penaltyMs", 0, kMaxWireInt, 0);
  ex.round_trip_ms = r.integer(*doc, p, "roundTripMs", 0, kMaxWireInt, 0);
  if (const Value* closes = r.array(*doc, p, "closes", kMaxWireList)) {
    for (size_t i = 0; i < closes->Size() && !r.failed(); ++i) {
      const std::string pc = p + ".closes[" + std::to_string(i) + "]";
      const Value* c = r.object((*closes)[i], pc);
      if (!c) break;
      LeaseClose close;
      close.lease_id = static_cast<uint64_t>(r.integer(*c, pc, "leaseId", 0, kMaxWireInt));
      for (const auto& window : r.groups(*c, pc, "uses", 0)) {
        close.uses.emplace_back();
        for (const auto& [age, amount] : window) close.uses.back().push_back({age, amount});
      }
      close.running_ages = r.times(*c, pc, "runningAges", 0);
      ex.closes.push_back(std::move(close));
    }
  }
  if (const Value* returns = r.array(*doc, p, "returns", kMaxWireList)) {
    for (size_t i = 0; i < returns->Size() && !r.failed(); ++i) {
      const std::string pr = p + ".returns[" + std::to_string(i) + "]";
      const Value* o = r.object((*returns)[i], pr);
      if (!o) break;
      LeaseReturn ret;
      ret.lease_id = static_cast<uint64_t>(r.integer(*o, pr, "leaseId", 0, kMaxWireInt));
      ret.units = r.amounts(*o, pr, "units");
      ret.slots = r.integer(*o, pr, "slots", 0, kMaxWireInt);
      ex.returns.push_back(std::move(ret));
    }
  }
  ex.demand = r.demand(*doc, p);
  if (r.failed()) return std::nullopt;
  return ex;
}

std::optional<LeaseGrant> read_grant(std::string_view text, std::string& error) {
  Reader r(error);
  if (!r.fits(text, "grant")) return std::nullopt;
  const json::Parsed parsed(text, kMaxWireDepth);
  const Value* doc = r.object_of(parsed, "grant");
  if (!doc) return std::nullopt;
  return r.grant(*doc, "grant");
}

std::optional<PenaltyNotice> read_notice(std::string_view text, std::string& error) {
  Reader r(error);
  if (!r.fits(text, "notice")) return std::nullopt;
  const json::Parsed parsed(text, kMaxWireDepth);
  const Value* doc = r.object_of(parsed, "notice");
  if (!doc) return std::nullopt;
  PenaltyNotice n;
  n.penalty_ms = r.integer(*doc, "notice", "penaltyMs", 0, kMaxWireInt);
  if (r.failed()) return std::nullopt;
  return n;
}

std::optional<LeaseRow> read_lease_row(std::string_view text, std::string& error) {
  Reader r(error);
  const std::string p = "lease row";
  if (!r.fits(text, p)) return std::nullopt;
  const json::Parsed parsed(text, kMaxWireDepth);
  const Value* doc = r.object_of(parsed, p);
  if (!doc) return std::nullopt;
  LeaseRow row;
  row.lease_id = static_cast<uint64_t>(r.integer(*doc, p, "leaseId", 0, kMaxWireInt));
  row.child = static_cast<uint64_t>(r.integer(*doc, p, "child", 0, kMaxWireInt));
  row.incarnation = static_cast<uint64_t>(r.integer(*doc, p, "incarnation", 0, kMaxWireInt));
  // Readings of the root's clock: any sign.
  row.end_at = r.integer(*doc, p, "endAt", -kMaxWireInt, kMaxWireInt);
  row.units = r.amounts(*doc, p, "units");
  row.slots = r.integer(*doc, p, "slots", 0, kMaxWireInt);
  row.returned = r.amounts(*doc, p, "returned");
  row.slots_returned = r.integer(*doc, p, "slotsReturned", 0, kMaxWireInt);
  row.closed = r.boolean(*doc, p, "closed");
  for (const auto& window : r.groups(*doc, p, "uses", -kMaxWireInt)) {
    row.uses.emplace_back();
    for (const auto& [at, amount] : window) row.uses.back().push_back({at, amount});
  }
  row.running_at = r.times(*doc, p, "runningAt", -kMaxWireInt);
  if (!r.failed() && row.returned.size() != row.units.size()) {
    r.fail(p + ".returned has " + std::to_string(row.returned.size()) + " windows, its units " +
           std::to_string(row.units.size()));
  }
  if (r.failed()) return std::nullopt;
  return row;
}

std::optional<ChildRow> read_child_row(std::string_view text, std::string& error) {
  Reader r(error);
  const std::string p = "child row";
  if (!r.fits(text, p)) return std::nullopt;
  const json::Parsed parsed(text, kMaxWireDepth);
  const Value* doc = r.object_of(parsed, p);
  if (!doc) return std::nullopt;
  ChildRow row;
  row.child = static_cast<uint64_t>(r.integer(*doc, p, "child", 0, kMaxWireInt));
  row.incarnation = static_cast<uint64_t>(r.integer(*doc, p, "incarnation", 0, kMaxWireInt));
  row.last_seq = static_cast<uint64_t>(r.integer(*doc, p, "lastSeq", 0, kMaxWireInt));
  row.demand_at = r.integer(*doc, p, "demandAt", -kMaxWireInt, kMaxWireInt);
  row.demand = r.demand(*doc, p);
  if (r.failed()) return std::nullopt;
  const Value* reply = json::find(*doc, "lastReply");
  if (reply == nullptr || !reply->IsObject()) {
    r.fail(p + ".lastReply must be an object");
    return std::nullopt;
  }
  auto g = r.grant(*reply, p + ".lastReply");
  if (!g) return std::nullopt;
  row.last_reply = *g;
  return row;
}

std::optional<LedgerConfig> read_ledger_config(std::string_view text, std::string& error) {
  Reader r(error);
  const std::string p = "ledger config";
  if (!r.fits(text, p)) return std::nullopt;
  const json::Parsed parsed(text, kMaxWireDepth);
  const Value* doc = r.object_of(parsed, p);
  if (!doc) return std::nullopt;
  LedgerConfig c;
  c.windows_ms = r.amounts(*doc, p, "windowsMs", 1);
  c.limits = r.amounts(*doc, p, "limits");
  c.concurrency = r.integer(*doc, p, "concurrency", 1, kMaxWireInt);
  c.attempt_timeout_ms = r.integer(*doc, p, "attemptTimeoutMs", 1, kMaxWireInt);
  c.lease_ms = r.integer(*doc, p, "leaseMs", 1, kMaxWireInt);
  c.max_lease_ms = r.integer(*doc, p, "maxLeaseMs", 0, kMaxWireInt, 0);
  c.demand_ttl_ms = r.integer(*doc, p, "demandTtlMs", 0, kMaxWireInt, c.demand_ttl_ms);
  c.clocks = r.clock(*doc, p);
  if (!r.failed() && c.windows_ms.empty()) r.fail(p + ".windowsMs must name at least one window");
  if (!r.failed() && c.limits.size() != c.windows_ms.size()) {
    r.fail(p + ".limits has " + std::to_string(c.limits.size()) + " entries, windowsMs " +
           std::to_string(c.windows_ms.size()) + ": one limit per window");
  }
  const Value* floors = json::find(*doc, "floors");
  if (!r.failed() && floors != nullptr) {
    if (const Value* o = r.object(*floors, p + ".floors")) {
      if (o->MemberCount() > kMaxWireList) {
        r.fail(p + ".floors names more than " + std::to_string(kMaxWireList) + " children");
      }
      for (auto it = o->MemberBegin(); it != o->MemberEnd() && !r.failed(); ++it) {
        const std::string key = json::text(it->name);
        const std::string pf = p + ".floors." + key;
        uint64_t child = 0;
        bool digits = !key.empty() && key.size() <= 15;
        for (char ch : key) digits &= ch >= '0' && ch <= '9';
        if (!digits) {
          r.fail(pf + ": a floor's key must be a child id, a decimal integer");
          break;
        }
        // By hand: std::stoull would bring its exceptions' stdio into core.wasm.
        for (char ch : key) child = child * 10 + static_cast<uint64_t>(ch - '0');
        const Value* f = r.object(it->value, pf);
        if (!f) break;
        LeaseFloor floor;
        floor.units = r.amounts(*f, pf, "units");
        floor.slots = r.integer(*f, pf, "slots", 0, kMaxWireInt, 0);
        c.floors[child] = floor;
      }
    }
  }
  if (r.failed()) return std::nullopt;
  if (std::string why = Ledger::check_config(c); !why.empty()) {
    r.fail(why);
    return std::nullopt;
  }
  return c;
}

std::optional<HolderConfig> read_child_setup(std::string_view text, std::string& error) {
  Reader r(error);
  const std::string p = "lease child setup";
  if (!r.fits(text, p)) return std::nullopt;
  const json::Parsed parsed(text, kMaxWireDepth);
  const Value* doc = r.object_of(parsed, p);
  if (!doc) return std::nullopt;
  HolderConfig c;
  c.child = static_cast<uint64_t>(r.integer(*doc, p, "child", 1, kMaxWireInt));
  c.incarnation = static_cast<uint64_t>(r.integer(*doc, p, "incarnation", 1, kMaxWireInt));
  c.clocks = r.clock(*doc, p);
  c.retry_ms = r.integer(*doc, p, "retryMs", 1, kMaxDelayMs, c.retry_ms);
  c.idle_ms = r.integer(*doc, p, "idleMs", 0, kMaxDelayMs, c.idle_ms);
  c.stock_ms = r.integer(*doc, p, "stockMs", 0, kMaxDelayMs, c.stock_ms);
  c.refresh_ms = r.integer(*doc, p, "refreshMs", 0, kMaxDelayMs, c.refresh_ms);
  c.rate_ms = r.integer(*doc, p, "rateMs", 1, kMaxDelayMs, c.rate_ms);
  c.close_within_ms = r.integer(*doc, p, "closeWithinMs", 0, kMaxDelayMs, c.close_within_ms);
  c.max_groups = static_cast<size_t>(r.integer(*doc, p, "maxGroups", 1, 1024, static_cast<int64_t>(c.max_groups)));
  c.unreachable_ms = r.integer(*doc, p, "unreachableMs", 0, kMaxDelayMs, c.unreachable_ms);
  c.release_margin_ms = r.integer(*doc, p, "releaseMarginMs", 0, kMaxDelayMs, 0);
  if (r.failed()) return std::nullopt;
  const Value* when = json::find(*doc, "whenShort");
  if (when != nullptr) {
    const std::string name = when->IsString() ? json::text(*when) : "";
    if (name == "failClosed") {
      c.when_short = WhenShort::kFailClosed;
    } else if (name == "floor") {
      c.when_short = WhenShort::kFloor;
    } else if (name == "failOpen") {
      c.when_short = WhenShort::kFailOpen;
    } else {
      r.fail(p + ".whenShort must be \"failClosed\", \"floor\" or \"failOpen\" (received " + json::dump(*when) + ")");
      return std::nullopt;
    }
  }
  const Value* floor = json::find(*doc, "floor");
  if (floor != nullptr) {
    if (const Value* f = r.object(*floor, p + ".floor")) {
      c.floor_units = r.amounts(*f, p + ".floor", "units");
      c.floor_slots = r.integer(*f, p + ".floor", "slots", 0, kMaxWireInt, 0);
    }
  }
  if (!r.failed() && c.when_short == WhenShort::kFloor && floor == nullptr) {
    r.fail(p + ".floor is missing: whenShort \"floor\" spends the floor the root's config reserves for this child");
  }
  if (r.failed()) return std::nullopt;
  return c;
}

}  // namespace drl::internal
