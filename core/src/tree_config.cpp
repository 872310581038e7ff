#include "tree_config.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "drl/limits.h"
#include "utf8_text.h"

namespace drl {

bool valid_region(std::string_view region) {
  if (region.empty() || region.size() > kMaxRegionBytes || region == kRootRegion) return false;
  if (region[0] < 'a' || region[0] > 'z') return false;
  for (char c : region) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))) return false;
  }
  return true;
}

std::string region_rule() {
  return "a lowercase letter, then at most " + std::to_string(kMaxRegionBytes - 1) +
         " lowercase letters or digits, not \"" + kRootRegion + "\"";
}

namespace internal {
namespace {

namespace json = internal::json;
using json::Value;

// Above 10^6 a clock may stand still, which bounds nothing (the ledger's
// reader refuses it too).
constexpr int64_t kMaxDriftPpm = 100'000;
constexpr std::size_t kMaxShownBytes = 80;

std::string show(const Value& value) { return shorten(json::dump(value), kMaxShownBytes); }
std::string show_key(std::string_view key) { return shorten(json::quote(key), kMaxShownBytes); }

class TreeChecker {
 public:
  TreeChecker(Config& config, std::vector<ConfigProblem>& problems) : config_(config), problems_(problems) {}

  void check(const Value& tree) {
    if (!tree.IsObject()) {
      add(ErrorKind::TypeError, "tree",
          "tree must be an object such as {} (every field has a default) (received " + show(tree) + ")");
      return;
    }
    TreeConfig& t = config_.tree;
    t.enabled = true;
    reject_unknown(tree, "tree",
                   {"leaseMs", "maxLeaseMs", "whenShort", "floors", "clockSlackMs", "driftPpm", "stockMs", "retryMs",
                    "unreachableMs", "passThrough"});
    integer(tree, "tree", "leaseMs", 1, kMaxDelayMs, t.lease_ms);
    integer(tree, "tree", "maxLeaseMs", 0, kMaxDelayMs, t.max_lease_ms);
    integer(tree, "tree", "clockSlackMs", 0, kMaxDelayMs, t.clock_slack_ms);
    integer(tree, "tree", "driftPpm", 0, kMaxDriftPpm, t.drift_ppm);
    integer(tree, "tree", "stockMs", 0, kMaxDelayMs, t.stock_ms);
    integer(tree, "tree", "retryMs", 1, kMaxDelayMs, t.retry_ms);
    integer(tree, "tree", "unreachableMs", 0, kMaxDelayMs, t.unreachable_ms);
    const Value* when = json::find(tree, "whenShort");
    if (when != nullptr && !when->IsNull()) {
      const std::string name = when->IsString() ? json::text(*when) : "";
      if (name == "failClosed" || name == "floor" || name == "failOpen") {
        t.when_short = name;
      } else {
        add(when->IsString() ? ErrorKind::RangeError : ErrorKind::TypeError, "tree.whenShort",
            "tree.whenShort must be \"failClosed\", \"floor\" or \"failOpen\" (received " + show(*when) + ")");
      }
    }
    const Value* pass = json::find(tree, "passThrough");
    if (pass != nullptr && !pass->IsNull()) {
      if (pass->IsBool()) {
        t.pass_through = pass->GetBool();
      } else if (!(pass->IsString() && json::view(*pass) == "auto")) {
        add(pass->IsString() ? ErrorKind::RangeError : ErrorKind::TypeError, "tree.passThrough",
            "tree.passThrough must be \"auto\", true or false (received " + show(*pass) + ")");
      }
    }
    const Value* floors = json::find(tree, "floors");
    if (floors != nullptr && !floors->IsNull()) check_floors(*floors);
    if (t.when_short == "floor" && t.floors.empty()) {
      add(ErrorKind::RangeError, "tree.whenShort",
          "tree.whenShort is \"floor\", but tree.floors reserves nothing for any child: name a floor per region");
    }
  }

 private:
  void add(ErrorKind kind, std::string path, std::string message) {
    problems_.push_back(ConfigProblem{kind, std::move(path), std::move(message)});
  }

  void reject_unknown(const Value& obj, const std::string& path, std::initializer_list<const char*> allowed) {
    for (const auto& member : obj.GetObject()) {
      const std::string key = json::text(member.name);
      bool known = false;
      std::string list;
      for (const char* name : allowed) {
        known = known || key == name;
        list += std::string(list.empty() ? "" : ", ") + name;
      }
      if (!known) {
        add(ErrorKind::TypeError, path + "." + key,
            "unknown key " + show_key(key) + " in " + path + " (allowed: " + list + ")");
      }
    }
  }

  // An optional integer field: `out` keeps its default when absent or null.
  bool integer(const Value& obj, const std::string& where, const char* key, int64_t lo, int64_t hi, int64_t& out) {
    const Value* it = json::find(obj, key);
    if (it == nullptr || it->IsNull()) return true;
    const std::string path = where + "." + key;
    const std::string rule = "an integer between " + std::to_string(lo) + " and " + std::to_string(hi);
    if (!it->IsNumber()) {
      add(ErrorKind::TypeError, path, path + " must be a number, " + rule + " (received " + show(*it) + ")");
      return false;
    }
    const double d = it->GetDouble();
    if (!std::isfinite(d) || std::floor(d) != d || d < static_cast<double>(lo) || d > static_cast<double>(hi)) {
      add(ErrorKind::RangeError, path, path + " must be " + rule + " (received " + show(*it) + ")");
      return false;
    }
    out = static_cast<int64_t>(d);
    return true;
  }

  // {"<region>": {"units": {"<window>": n}, "slots": n}}; then the sums.
  void check_floors(const Value& floors) {
    if (!floors.IsObject()) {
      add(ErrorKind::TypeError, "tree.floors",
          "tree.floors must be an object of regions, such as {\"weur\":{\"units\":{\"bucket\":10},\"slots\":1}} "
          "(received " +
              show(floors) + ")");
      return;
    }
    for (const auto& member : floors.GetObject()) {
      const std::string key = json::text(member.name);
      const Value& value = member.value;
      const std::string path = "tree.floors." + key;
      if (!valid_region(key) && key != kRootRegion) {
        add(ErrorKind::RangeError, path,
            "tree.floors has the key " + show_key(key) + ", which is not a region (" + region_rule() + ", or \"" +
                kRootRegion + "\" for the root's own)");
        continue;
      }
      if (!value.IsObject()) {
        add(ErrorKind::TypeError, path, path + " must be an object such as {\"units\":{\"bucket\":10},\"slots\":1}");
        continue;
      }
      reject_unknown(value, path, {"units", "slots"});
      TreeFloor floor;
      floor.region = key;
      integer(value, path, "slots", 0, config_.concurrency, floor.slots);
      const Value* units = json::find(value, "units");
      if (units != nullptr && !units->IsNull()) read_units(*units, path + ".units", floor);
      config_.tree.floors.push_back(std::move(floor));
    }
    check_sums();
  }

  void read_units(const Value& units, const std::string& path, TreeFloor& floor) {
    if (!units.IsObject()) {
      add(ErrorKind::TypeError, path, path + " must be an object of window names, such as {\"bucket\":10}");
      return;
    }
    for (const auto& member : units.GetObject()) {
      const std::string key = json::text(member.name);
      const std::optional<int64_t> limit = limit_of(key);
      if (!limit) {
        add(ErrorKind::RangeError, path + "." + key,
            path + " names window " + show_key(key) + ", which this config does not have (windows: " + window_names() +
                ")");
        continue;
      }
      int64_t amount = 0;
      if (integer(units, path, key.c_str(), 0, *limit, amount)) floor.units.emplace_back(key, amount);
    }
  }

  // Every floor is lent to no one, so together they must fit each limit.
  void check_sums() {
    std::vector<std::pair<std::string, int64_t>> limits = {{kPrimaryWindow, config_.bucket.limit_per_window}};
    for (const WindowConfig& w : config_.windows) limits.emplace_back(w.name, w.limit_per_window);
    for (const auto& [name, limit] : limits) {
      int64_t reserved = 0;
      for (const TreeFloor& f : config_.tree.floors) {
        for (const auto& [window, amount] : f.units) reserved += window == name ? amount : 0;
      }
      if (reserved > limit) {
        add(ErrorKind::RangeError, "tree.floors",
            "tree.floors reserve " + std::to_string(reserved) + " units of window " + name + ", above its limit " +
                std::to_string(limit));
      }
    }
    int64_t slots = 0;
    for (const TreeFloor& f : config_.tree.floors) slots += f.slots;
    if (slots > config_.concurrency) {
      add(ErrorKind::RangeError, "tree.floors",
          "tree.floors reserve " + std::to_string(slots) + " slots, above the concurrency " +
              std::to_string(config_.concurrency));
    }
  }

  std::optional<int64_t> limit_of(const std::string& window) const {
    if (window == kPrimaryWindow) return config_.bucket.limit_per_window;
    for (const WindowConfig& w : config_.windows) {
      if (w.name == window) return w.limit_per_window;
    }
    return std::nullopt;
  }

  std::string window_names() const {
    std::string names = kPrimaryWindow;
    for (const WindowConfig& w : config_.windows) names += ", " + w.name;
    return names;
  }

  Config& config_;
  std::vector<ConfigProblem>& problems_;
};

// A floor's units in the engine's window order.
std::vector<int64_t> floor_units(const Config& config, const TreeFloor& floor) {
  std::vector<int64_t> units(config.windows.size() + 1, 0);
  for (const auto& [window, amount] : floor.units) {
    if (window == kPrimaryWindow) units[0] = amount;
    for (size_t k = 0; k < config.windows.size(); ++k) {
      if (config.windows[k].name == window) units[k + 1] = amount;
    }
  }
  return units;
}

}  // namespace

void check_tree(const Value& tree, Config& config, std::vector<ConfigProblem>& problems) {
  TreeChecker(config, problems).check(tree);
}

void write_tree(json::Writer& out, const TreeConfig& tree) {
  out.begin_object();
  out.key("leaseMs").num(tree.lease_ms);
  out.key("maxLeaseMs").num(tree.max_lease_ms);
  out.key("whenShort").str(tree.when_short);
  out.key("floors").begin_object();
  for (const TreeFloor& f : tree.floors) {
    out.key(f.region).begin_object().key("units").begin_object();
    for (const auto& [window, amount] : f.units) out.key(window).num(amount);
    out.end_object().key("slots").num(f.slots).end_object();
  }
  out.end_object();
  out.key("clockSlackMs").num(tree.clock_slack_ms);
  out.key("driftPpm").num(tree.drift_ppm);
  out.key("stockMs").num(tree.stock_ms);
  out.key("retryMs").num(tree.retry_ms);
  out.key("unreachableMs").num(tree.unreachable_ms);
  out.key("passThrough");
  if (tree.pass_through) {
    out.boolean(*tree.pass_through);
  } else {
    out.str("auto");
  }
  out.end_object();
}

bool tree_passes_through(const Config& config) {
  if (!config.tree.enabled) return false;
  if (config.tree.pass_through) return *config.tree.pass_through;
  if (config.concurrency < kPassThroughBelowSlots) return true;
  if (config.bucket.limit_per_window < kPassThroughBelowUnits) return true;
  for (const WindowConfig& w : config.windows) {
    if (w.limit_per_window < kPassThroughBelowUnits) return true;
  }
  return false;
}

uint64_t region_child_id(std::string_view region) {
  uint64_t id = 0;
  uint64_t place = 1;
  for (char c : region) {
    const uint64_t digit =
        c >= 'a' && c <= 'z' ? static_cast<uint64_t>(c - 'a') + 1 : static_cast<uint64_t>(c - '0') + 27;
    id += digit * place;
    place *= 37;
  }
  return id;
}

std::string child_region(uint64_t id) {
  std::string region;
  for (; id > 0; id /= 37) {
    const uint64_t digit = id % 37;
    region += digit == 0 ? '?' : digit <= 26 ? static_cast<char>('a' + digit - 1) : static_cast<char>('0' + digit - 27);
  }
  return region;
}

LedgerConfig tree_ledger_config(const Config& config) {
  LedgerConfig c;
  c.windows_ms.push_back(config.bucket.window_ms);
  c.limits.push_back(config.bucket.limit_per_window);
  for (const WindowConfig& w : config.windows) {
    c.windows_ms.push_back(w.window_ms);
    c.limits.push_back(w.limit_per_window);
  }
  c.concurrency = config.concurrency;
  c.attempt_timeout_ms = config.attempt_timeout_ms;
  c.lease_ms = config.tree.lease_ms;
  c.max_lease_ms = config.tree.max_lease_ms;
  c.clocks.slack_ms = config.tree.clock_slack_ms;
  c.clocks.drift_ppm = config.tree.drift_ppm;
  for (const TreeFloor& f : config.tree.floors) {
    c.floors[region_child_id(f.region)] = LeaseFloor{floor_units(config, f), f.slots};
  }
  return c;
}

std::string tree_child_setup(const Config& config, std::string_view region, uint64_t incarnation) {
  const TreeConfig& t = config.tree;
  int64_t shortest = config.bucket.window_ms;
  for (const WindowConfig& w : config.windows) shortest = std::min(shortest, w.window_ms);
  std::string text;
  json::Writer setup(text);
  setup.begin_object();
  setup.key("child").num(region_child_id(region));
  setup.key("incarnation").num(incarnation);
  setup.key("clock").begin_object().key("slackMs").num(t.clock_slack_ms).key("driftPpm").num(t.drift_ppm).end_object();
  setup.key("whenShort").str(t.when_short);
  setup.key("stockMs").num(t.stock_ms);
  setup.key("retryMs").num(t.retry_ms);
  setup.key("unreachableMs").num(t.unreachable_ms);
  // The pacing the sizing is measured with (docs/leases.md, "The children
  // the product runs"): while the root is short, new exchanges at most every
  // eighth of the shortest window, up to 1 s (a quarter of that while the
  // head of its queue cannot start); the recent rate over that window, up to
  // 1 s. Unpaced, a 60 s window's slow children near the root made 0.84
  // exchanges per call at 1.5x in the simulation.
  setup.key("refreshMs").num(std::min<int64_t>(shortest / 8, 1'000));
  setup.key("rateMs").num(std::max<int64_t>(1, std::min<int64_t>(shortest, 1'000)));
  if (t.when_short == "floor") {
    // A region the config reserves nothing for has a floor of zero: it waits.
    TreeFloor none;
    const TreeFloor* floor = &none;
    for (const TreeFloor& f : t.floors) floor = f.region == region ? &f : floor;
    setup.key("floor").begin_object().key("units").ints(floor_units(config, *floor));
    setup.key("slots").num(floor->slots).end_object();
  }
  setup.end_object();
  return text;
}

}  // namespace internal
}  // namespace drl
