#include "drl/config.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "json.h"
#include "tree_config.h"
#include "utf8_text.h"

namespace drl {
namespace {

using internal::shorten;

namespace json = internal::json;
using json::Value;

// A valid config is two levels deep. kMaxConfigDepth (limits.def) caps it
// because the checks, the writer and merge_patch() recurse, and
// the wasm build runs on a 64 KiB stack: a hostile `[[[[...` must be refused
// while it is read, before anything walks it.

// Received values and parser complaints are echoed into messages; a megabyte
// array in the wrong field should not become a megabyte error message.
constexpr std::size_t kMaxShownBytes = 80;
constexpr std::size_t kMaxReasonBytes = 200;

// The value as JSON, for "(received ...)". Parsed text is valid UTF-8, and
// shorten() cuts at a code-point boundary, so the message stays well-formed.
std::string show(const Value& value) { return shorten(json::dump(value), kMaxShownBytes); }

std::string show_key(const std::string& key) { return shorten(json::quote(key), kMaxShownBytes); }

// A name that breaks the rule, in the words the engine's cost check and the
// client use too: `<where> has the key "9lives", which is not a window name (<rule>)`.
std::string not_a_name(const std::string& where, const std::string& key, const char* kind) {
  return where + " has the key " + show_key(key) + ", which is not a " + kind + " name (" + name_rule() + ")";
}

// Gathers problems in schema order so the first one (whose kind becomes the
// error's kind) is stable whatever order the keys were written in.
class Checker {
 public:
  std::vector<ConfigProblem> problems;
  Config config;

  void check_document(const Value& doc) {
    if (!doc.IsObject()) {
      add(ErrorKind::TypeError, "", std::string("config must be an object (received ") + json::type_name(doc) + ")");
      return;
    }
    reject_unknown(doc, "config", "",
                   {"bucket", "concurrency", "attemptTimeoutMs", "retry", "windows", "learn", "tree"});

    const Value* bucket = find(doc, "bucket");
    if (bucket == nullptr || bucket->IsNull()) {
      add_required("bucket", bucket);
    } else if (!bucket->IsObject()) {
      add(ErrorKind::TypeError, "bucket", "bucket must be an object (received " + show(*bucket) + ")");
    } else {
      check_bucket(*bucket);
    }

    check_int(doc, "concurrency", "concurrency", 1, kMaxConcurrency, /*required=*/true, config.concurrency);
    check_int(doc, "attemptTimeoutMs", "attemptTimeoutMs", 1, kMaxAttemptTimeoutMs, /*required=*/false,
              config.attempt_timeout_ms);

    // JSON null on an optional field means "absent, use the default". Patches
    // are RFC 7396 merge patches, where null deletes a key; reading null the
    // same way in a full document makes `{"retry": null}` mean one thing
    // whether it is sent to configure or to reconfigure.
    const Value* retry = find(doc, "retry");
    if (retry != nullptr && !retry->IsNull()) {
      if (!retry->IsObject()) {
        add(ErrorKind::TypeError, "retry", "retry must be an object (received " + show(*retry) + ")");
      } else {
        check_retry(*retry);
      }
    }

    const Value* windows = find(doc, "windows");
    if (windows != nullptr && !windows->IsNull()) {
      if (!windows->IsObject()) {
        add(ErrorKind::TypeError, "windows",
            "windows must be an object of named windows (received " + show(*windows) + ")");
      } else {
        check_windows(*windows);
      }
    }

    // After the windows: the map names them.
    const Value* learn = find(doc, "learn");
    if (learn != nullptr && !learn->IsNull()) {
      if (!learn->IsObject()) {
        add(ErrorKind::TypeError, "learn",
            "learn must be an object such as {\"headers\":\"auto\"} (received " + show(*learn) + ")");
      } else {
        check_learn(*learn);
      }
    }

    // After the windows and the concurrency: floors name the one and fit both.
    const Value* tree = find(doc, "tree");
    if (tree != nullptr && !tree->IsNull()) internal::check_tree(*tree, config, problems);
  }

  void add(ErrorKind kind, std::string path, std::string message) {
    problems.push_back(ConfigProblem{kind, std::move(path), std::move(message)});
  }

 private:
  static const Value* find(const Value& obj, const char* key) { return json::find(obj, key); }

  static std::string join_path(const std::string& prefix, const std::string& key) {
    return prefix.empty() ? key : prefix + "." + key;
  }

  void add_required(const std::string& path, const Value* value) {
    // A required field set to null reads as missing, but saying what was
    // received tells the user it was present rather than misspelt.
    std::string message = path + " is required";
    if (value != nullptr) message += " (received null)";
    add(ErrorKind::TypeError, path, std::move(message));
  }

  void reject_unknown(const Value& obj, const std::string& where, const std::string& prefix,
                      std::initializer_list<const char*> allowed) {
    for (const auto& member : obj.GetObject()) {
      const std::string key = json::text(member.name);
      bool known = false;
      for (const char* name : allowed) known = known || key == name;
      if (known) continue;
      std::string list;
      for (const char* name : allowed) {
        if (!list.empty()) list += ", ";
        list += name;
      }
      add(ErrorKind::TypeError, join_path(prefix, key),
          "unknown key " + show_key(key) + " in " + where + " (allowed: " + list + ")");
    }
  }

  void check_bucket(const Value& bucket) {
    reject_unknown(bucket, "bucket", "bucket", {"limitPerWindow", "windowInMs", "penaltyRefillFraction", "unit"});
    check_name(bucket, "unit", "bucket.unit", "a unit name", config.bucket.unit);
    check_int(bucket, "limitPerWindow", "bucket.limitPerWindow", 1, kMaxLimitPerWindow,
              /*required=*/true, config.bucket.limit_per_window);
    check_int(bucket, "windowInMs", "bucket.windowInMs", 1, kMaxWindowMs, /*required=*/true, config.bucket.window_ms);
    check_double(bucket, "penaltyRefillFraction", "bucket.penaltyRefillFraction", 0.0, 1.0, "a number between 0 and 1",
                 config.bucket.penalty_refill_fraction);
  }

  // Extra windows: each counts one unit (the default one unless it names
  // another) under its own limit and window length.
  void check_windows(const Value& windows) {
    if (windows.MemberCount() > kMaxExtraWindows) {
      add(ErrorKind::RangeError, "windows",
          "windows may name at most " + std::to_string(kMaxExtraWindows) + " windows beside bucket (received " +
              std::to_string(windows.MemberCount()) + ")");
    }
    for (const auto& member : windows.GetObject()) {
      const std::string key = json::text(member.name);
      const std::string path = "windows." + key;
      if (!valid_name(key)) {
        add(ErrorKind::RangeError, path, not_a_name("windows", key, "window"));
        continue;
      }
      if (key == kPrimaryWindow) {
        add(ErrorKind::RangeError, path,
            std::string("window name \"") + kPrimaryWindow +
                "\" is the primary window's: give this window another name");
        continue;
      }
      const Value& w = member.value;
      if (!w.IsObject()) {
        add(ErrorKind::TypeError, path, path + " must be an object (received " + show(w) + ")");
        continue;
      }
      reject_unknown(w, path, path, {"unit", "limitPerWindow", "windowInMs"});
      WindowConfig window;
      window.name = key;
      check_int(w, "limitPerWindow", path + ".limitPerWindow", 1, kMaxLimitPerWindow, /*required=*/true,
                window.limit_per_window);
      check_int(w, "windowInMs", path + ".windowInMs", 1, kMaxWindowMs, /*required=*/true, window.window_ms);
      check_name(w, "unit", path + ".unit", "a unit name", window.unit);  // empty: the default unit, below
      config.windows.push_back(std::move(window));
    }
    // The default unit is known once bucket is read (it comes first in schema order).
    for (WindowConfig& w : config.windows) {
      if (w.unit.empty()) w.unit = config.bucket.unit;
    }
  }

  // What the bucket learns from response headers: which convention, and
  // which window each reported dimension corrects.
  void check_learn(const Value& learn) {
    reject_unknown(learn, "learn", "learn", {"headers", "map"});
    config.learn.enabled = true;
    const Value* headers = find(learn, "headers");
    std::string conventions;
    for (const char* c : kHeaderConventions) conventions += std::string(conventions.empty() ? "" : ", ") + c;
    if (headers != nullptr && !headers->IsNull()) {
      bool known = false;
      if (headers->IsString()) {
        for (const char* c : kHeaderConventions) known = known || json::view(*headers) == c;
      }
      if (!known) {
        add(headers->IsString() ? ErrorKind::RangeError : ErrorKind::TypeError, "learn.headers",
            "learn.headers must be one of " + conventions + " (received " + show(*headers) + ")");
      } else {
        config.learn.headers = json::text(*headers);
      }
    }
    const Value* map = find(learn, "map");
    if (map == nullptr || map->IsNull()) return;
    if (!map->IsObject()) {
      add(ErrorKind::TypeError, "learn.map",
          "learn.map must be an object of dimensions to window names, such as {\"tokens\":\"tpm\"} (received " +
              show(*map) + ")");
      return;
    }
    std::string names = kPrimaryWindow;
    for (const WindowConfig& w : config.windows) names += ", " + w.name;
    for (const auto& member : map->GetObject()) {
      const std::string key = json::text(member.name);
      const std::string path = "learn.map." + key;
      if (!valid_name(key)) {
        add(ErrorKind::RangeError, path, not_a_name("learn.map", key, "dimension"));
        continue;
      }
      if (!member.value.IsString()) {
        add(ErrorKind::TypeError, path,
            path + " must be a window name, a string (received " + show(member.value) + ")");
        continue;
      }
      const std::string window = json::text(member.value);
      bool exists = window == kPrimaryWindow;
      for (const WindowConfig& w : config.windows) exists = exists || w.name == window;
      if (!exists) {
        add(ErrorKind::RangeError, path,
            path + " names window " + show(member.value) + ", which this config does not have (windows: " + names +
                ")");
        continue;
      }
      config.learn.map.emplace_back(key, window);
    }
  }

  // An optional name field: a string obeying the name rule. Returns whether it is usable.
  bool check_name(const Value& obj, const char* key, const std::string& path, const char* what, std::string& out) {
    const Value* value = find(obj, key);
    if (value == nullptr || value->IsNull()) return true;
    if (!value->IsString()) {
      add(ErrorKind::TypeError, path, path + " must be " + what + ", a string (received " + show(*value) + ")");
      return false;
    }
    const std::string name = json::text(*value);
    if (!valid_name(name)) {
      add(ErrorKind::RangeError, path,
          path + " is " + show(*value) + ", which is not " + what + " (" + name_rule() + ")");
      return false;
    }
    out = name;
    return true;
  }

  void check_retry(const Value& retry) {
    reject_unknown(retry, "retry", "retry",
                   {"maxRetries", "minDelayInMs", "maxDelayInMs", "factor", "respectRetryAfter"});
    RetryConfig& r = config.retry;
    check_int(retry, "maxRetries", "retry.maxRetries", 0, kMaxRetries, false, r.max_retries);
    const bool min_ok = check_int(retry, "minDelayInMs", "retry.minDelayInMs", 0, kMaxDelayMs, false, r.min_delay_ms);
    const bool max_ok = check_int(retry, "maxDelayInMs", "retry.maxDelayInMs", 0, kMaxDelayMs, false, r.max_delay_ms);
    check_double(retry, "factor", "retry.factor", 1.0, kMaxFactor,
                 "a finite number between 1 and " + std::to_string(static_cast<int64_t>(kMaxFactor)), r.factor);

    const Value* flag = find(retry, "respectRetryAfter");
    if (flag != nullptr && !flag->IsNull()) {
      if (flag->IsBool()) {
        r.respect_retry_after = flag->GetBool();
      } else {
        add(ErrorKind::TypeError, "retry.respectRetryAfter",
            "retry.respectRetryAfter must be a boolean (received " + show(*flag) + ")");
      }
    }

    // Checked after defaults so a lone {"maxDelayInMs": 100} is caught: the
    // default minimum (500) would otherwise silently exceed it.
    if (min_ok && max_ok && r.min_delay_ms > r.max_delay_ms) {
      auto describe = [&](const char* key, int64_t value) {
        const Value* given = find(retry, key);
        std::string s = std::to_string(value);
        if (given == nullptr || given->IsNull()) s += ", the default";
        return s;
      };
      add(ErrorKind::RangeError, "retry.minDelayInMs",
          "retry.minDelayInMs (" + describe("minDelayInMs", r.min_delay_ms) + ") must be at most retry.maxDelayInMs (" +
              describe("maxDelayInMs", r.max_delay_ms) + ")");
    }
  }

  // Returns whether the field ended up usable (valid or defaulted), so
  // cross-field rules only run on values that passed their own rule.
  bool check_int(const Value& obj, const char* key, const std::string& path, int64_t lo, int64_t hi, bool required,
                 int64_t& out) {
    const Value* value = find(obj, key);
    if (value == nullptr || value->IsNull()) {
      if (required) {
        add_required(path, value);
        return false;
      }
      return true;
    }
    const std::string rule = "an integer between " + std::to_string(lo) + " and " + std::to_string(hi);
    if (!value->IsNumber()) {
      add(ErrorKind::TypeError, path, path + " must be a number, " + rule + " (received " + show(*value) + ")");
      return false;
    }
    std::optional<int64_t> result;
    // IsInt64() is also true for most unsigned values, so test unsigned first.
    if (value->IsUint64()) {
      const uint64_t u = value->GetUint64();
      if (u <= static_cast<uint64_t>(hi) && static_cast<int64_t>(u) >= lo) {
        result = static_cast<int64_t>(u);
      }
    } else if (value->IsInt64()) {
      const int64_t i = value->GetInt64();
      if (i >= lo && i <= hi) result = i;
    } else {
      // 60.0 and 6e1 are the integer 60: JSON has no integer type, and some
      // serialisers write every number as a double. Bounds are compared as
      // doubles (all exactly representable) before the cast, which would be
      // undefined behaviour out of range.
      const double d = value->GetDouble();
      if (std::isfinite(d) && std::floor(d) == d && d >= static_cast<double>(lo) && d <= static_cast<double>(hi)) {
        result = static_cast<int64_t>(d);
      }
    }
    if (!result) {
      add(ErrorKind::RangeError, path, path + " must be " + rule + " (received " + show(*value) + ")");
      return false;
    }
    out = *result;
    return true;
  }

  void check_double(const Value& obj, const char* key, const std::string& path, double lo, double hi,
                    const std::string& rule, double& out) {
    const Value* value = find(obj, key);
    if (value == nullptr || value->IsNull()) return;
    if (!value->IsNumber()) {
      add(ErrorKind::TypeError, path, path + " must be " + rule + " (received " + show(*value) + ")");
      return;
    }
    const double d = value->GetDouble();
    if (!std::isfinite(d) || d < lo || d > hi) {
      add(ErrorKind::RangeError, path, path + " must be " + rule + " (received " + show(*value) + ")");
      return;
    }
    out = d;
  }
};

// `what` names the document in messages ("config", "config patch"). Returns
// the problem, if any; `parsed` then holds no value.
std::optional<ConfigProblem> read_problem(const json::Parsed& parsed, const std::string& what) {
  if (parsed.error.empty()) return std::nullopt;
  if (parsed.too_deep) return ConfigProblem{ErrorKind::TypeError, "", what + " is " + parsed.error};
  return ConfigProblem{ErrorKind::TypeError, "",
                       what + " is not valid JSON: " + shorten(parsed.error, kMaxReasonBytes)};
}

Checker check(const Value& doc) {
  Checker checker;
  checker.check_document(doc);
  return checker;
}

Error invalid(ErrorKind kind, const std::string& detail) { return Error::make(ErrorCode::InvalidConfig, kind, detail); }

Error invalid(const std::vector<ConfigProblem>& problems) {
  std::string detail;
  for (const auto& p : problems) {
    if (!detail.empty()) detail += "; ";
    detail += p.message;
  }
  return invalid(problems.front().kind, detail);
}

// Shared by parse_config and apply_config_patch so a merged document is
// judged exactly like a fresh one.
Expected<ParsedConfig> finish(const Value& doc) {
  Checker checker = check(doc);
  if (!checker.problems.empty()) return invalid(checker.problems);
  return ParsedConfig{checker.config, json::dump(doc)};
}

// The engine must never throw across its API (see error.h). Type checks keep
// the reader from failing in practice; this catches what is left (bad_alloc).
std::string internal_failure(const char* what) { return std::string("config could not be processed: ") + what; }

}  // namespace

std::string name_rule() {
  return "a letter, then at most " + std::to_string(kMaxNameBytes - 1) + " letters, digits, _ or -";
}

bool valid_name(std::string_view name) {
  if (name.empty() || name.size() > kMaxNameBytes) return false;
  auto letter = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); };
  if (!letter(name[0])) return false;
  return std::all_of(name.begin(), name.end(),
                     [&](char c) { return letter(c) || (c >= '0' && c <= '9') || c == '_' || c == '-'; });
}

// The wasm build has no exceptions at all (out of memory traps there), so
// the last-resort catch exists only where exceptions do.
#if defined(__cpp_exceptions)
#define DRL_TRY try
#define DRL_CATCH(...)              \
  catch (const std::exception& e) { \
    __VA_ARGS__                     \
  }
#else
#define DRL_TRY
#define DRL_CATCH(...)
#endif

std::vector<ConfigProblem> validate_config(std::string_view json_text) {
  DRL_TRY {
    const json::Parsed doc(json_text, kMaxConfigDepth);
    if (auto problem = read_problem(doc, "config")) return {*problem};
    return check(doc.doc).problems;
  }
  DRL_CATCH(return {ConfigProblem{ErrorKind::Error, "", internal_failure(e.what())}};)
}

Expected<ParsedConfig> parse_config(std::string_view json_text) {
  DRL_TRY {
    const json::Parsed doc(json_text, kMaxConfigDepth);
    if (auto problem = read_problem(doc, "config")) return invalid({*problem});
    return finish(doc.doc);
  }
  DRL_CATCH(return invalid(ErrorKind::Error, internal_failure(e.what()));)
}

Expected<ParsedConfig> apply_config_patch(std::string_view stored_text, std::string_view patch_text) {
  DRL_TRY {
    json::Parsed stored(stored_text, kMaxConfigDepth);
    if (auto problem = read_problem(stored, "stored config")) return invalid({*problem});
    const json::Parsed patch(patch_text, kMaxConfigDepth);
    if (auto problem = read_problem(patch, "config patch")) return invalid({*problem});
    if (!patch.doc.IsObject()) {
      return invalid(ErrorKind::TypeError,
                     std::string("config patch must be an object (received ") + json::type_name(patch.doc) + ")");
    }
    // Both sides are depth-capped, so merge_patch's recursion is bounded and
    // the merged document is no deeper than the cap either.
    json::merge_patch(stored.doc, patch.doc, stored.doc.GetAllocator());
    return finish(stored.doc);
  }
  DRL_CATCH(return invalid(ErrorKind::Error, internal_failure(e.what()));)
}

std::string effective_config_json(const Config& config) {
  // In the documented field order, which reads better in the CLI than an
  // alphabetical one.
  std::string text;
  json::Writer out(text);
  out.begin_object();
  out.key("bucket").begin_object();
  out.key("limitPerWindow").num(config.bucket.limit_per_window);
  out.key("windowInMs").num(config.bucket.window_ms);
  out.key("penaltyRefillFraction").num(config.bucket.penalty_refill_fraction);
  out.key("unit").str(config.bucket.unit);
  out.end_object();
  out.key("concurrency").num(config.concurrency);
  out.key("attemptTimeoutMs").num(config.attempt_timeout_ms);
  out.key("retry").begin_object();
  out.key("maxRetries").num(config.retry.max_retries);
  out.key("minDelayInMs").num(config.retry.min_delay_ms);
  out.key("maxDelayInMs").num(config.retry.max_delay_ms);
  out.key("factor").num(config.retry.factor);
  out.key("respectRetryAfter").boolean(config.retry.respect_retry_after);
  out.end_object();
  out.key("windows").begin_object();
  for (const WindowConfig& w : config.windows) {
    out.key(w.name).begin_object();
    out.key("unit").str(w.unit).key("limitPerWindow").num(w.limit_per_window).key("windowInMs").num(w.window_ms);
    out.end_object();
  }
  out.end_object();
  out.key("learn");
  if (config.learn.enabled) {
    out.begin_object().key("headers").str(config.learn.headers).key("map").begin_object();
    for (const auto& [dimension, window] : config.learn.map) out.key(dimension).str(window);
    out.end_object().end_object();
  } else {
    out.null();
  }
  if (config.tree.enabled) internal::write_tree(out.key("tree"), config.tree);
  // A caller-built Config could hold NaN; the writer writes it as null,
  // which parse_config would then reject (the desired outcome).
  out.end_object();
  return text;
}

}  // namespace drl
