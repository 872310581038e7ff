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

#include <nlohmann/json.hpp>

#include "tree_config.h"
#include "utf8_text.h"

namespace drl {
namespace {

using internal::sanitize_utf8;
using internal::shorten;

using nlohmann::json;

// A valid config is two levels deep. kMaxConfigDepth (limits.def) caps it
// because nlohmann's dump() and merge_patch() recurse, and the wasm build
// runs on a 64 KiB stack: a hostile `[[[[...` must be refused before anything
// walks it recursively.

// Received values and parser complaints are echoed into messages; a megabyte
// array in the wrong field should not become a megabyte error message.
constexpr std::size_t kMaxShownBytes = 80;
constexpr std::size_t kMaxReasonBytes = 200;

// The value as JSON, for "(received ...)". The replace handler means dump()
// cannot throw on odd strings; parsed input is valid UTF-8 anyway.
std::string show(const json& value) {
  return shorten(value.dump(-1, ' ', false, json::error_handler_t::replace), kMaxShownBytes);
}

std::string show_key(const std::string& key) { return show(json(key)); }

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

  void check_document(const json& doc) {
    if (!doc.is_object()) {
      add(ErrorKind::TypeError, "", std::string("config must be an object (received ") + doc.type_name() + ")");
      return;
    }
    reject_unknown(doc, "config", "",
                   {"bucket", "concurrency", "attemptTimeoutMs", "retry", "windows", "learn", "tree"});

    const json* bucket = find(doc, "bucket");
    if (bucket == nullptr || bucket->is_null()) {
      add_required("bucket", bucket);
    } else if (!bucket->is_object()) {
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
    const json* retry = find(doc, "retry");
    if (retry != nullptr && !retry->is_null()) {
      if (!retry->is_object()) {
        add(ErrorKind::TypeError, "retry", "retry must be an object (received " + show(*retry) + ")");
      } else {
        check_retry(*retry);
      }
    }

    const json* windows = find(doc, "windows");
    if (windows != nullptr && !windows->is_null()) {
      if (!windows->is_object()) {
        add(ErrorKind::TypeError, "windows",
            "windows must be an object of named windows (received " + show(*windows) + ")");
      } else {
        check_windows(*windows);
      }
    }

    // After the windows: the map names them.
    const json* learn = find(doc, "learn");
    if (learn != nullptr && !learn->is_null()) {
      if (!learn->is_object()) {
        add(ErrorKind::TypeError, "learn",
            "learn must be an object such as {\"headers\":\"auto\"} (received " + show(*learn) + ")");
      } else {
        check_learn(*learn);
      }
    }

    // After the windows and the concurrency: floors name the one and fit both.
    const json* tree = find(doc, "tree");
    if (tree != nullptr && !tree->is_null()) internal::check_tree(*tree, config, problems);
  }

  void add(ErrorKind kind, std::string path, std::string message) {
    problems.push_back(ConfigProblem{kind, std::move(path), std::move(message)});
  }

 private:
  static const json* find(const json& obj, const char* key) {
    auto it = obj.find(key);
    return it == obj.end() ? nullptr : &*it;
  }

  static std::string join_path(const std::string& prefix, const std::string& key) {
    return prefix.empty() ? key : prefix + "." + key;
  }

  void add_required(const std::string& path, const json* value) {
    // A required field set to null reads as missing, but saying what was
    // received tells the user it was present rather than misspelt.
    std::string message = path + " is required";
    if (value != nullptr) message += " (received null)";
    add(ErrorKind::TypeError, path, std::move(message));
  }

  void reject_unknown(const json& obj, const std::string& where, const std::string& prefix,
                      std::initializer_list<const char*> allowed) {
    for (auto it = obj.begin(); it != obj.end(); ++it) {
      bool known = false;
      for (const char* name : allowed) known = known || it.key() == name;
      if (known) continue;
      std::string list;
      for (const char* name : allowed) {
        if (!list.empty()) list += ", ";
        list += name;
      }
      add(ErrorKind::TypeError, join_path(prefix, it.key()),
          "unknown key " + show_key(it.key()) + " in " + where + " (allowed: " + list + ")");
    }
  }

  void check_bucket(const json& bucket) {
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
  void check_windows(const json& windows) {
    if (windows.size() > kMaxExtraWindows) {
      add(ErrorKind::RangeError, "windows",
          "windows may name at most " + std::to_string(kMaxExtraWindows) + " windows beside bucket (received " +
              std::to_string(windows.size()) + ")");
    }
    for (auto it = windows.begin(); it != windows.end(); ++it) {
      const std::string path = "windows." + it.key();
      if (!valid_name(it.key())) {
        add(ErrorKind::RangeError, path, not_a_name("windows", it.key(), "window"));
        continue;
      }
      if (it.key() == kPrimaryWindow) {
        add(ErrorKind::RangeError, path,
            std::string("window name \"") + kPrimaryWindow +
                "\" is the primary window's: give this window another name");
        continue;
      }
      const json& w = it.value();
      if (!w.is_object()) {
        add(ErrorKind::TypeError, path, path + " must be an object (received " + show(w) + ")");
        continue;
      }
      reject_unknown(w, path, path, {"unit", "limitPerWindow", "windowInMs"});
      WindowConfig window;
      window.name = it.key();
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
  void check_learn(const json& learn) {
    reject_unknown(learn, "learn", "learn", {"headers", "map"});
    config.learn.enabled = true;
    const json* headers = find(learn, "headers");
    std::string conventions;
    for (const char* c : kHeaderConventions) conventions += std::string(conventions.empty() ? "" : ", ") + c;
    if (headers != nullptr && !headers->is_null()) {
      bool known = false;
      if (headers->is_string()) {
        for (const char* c : kHeaderConventions) known = known || headers->get<std::string>() == c;
      }
      if (!known) {
        add(headers->is_string() ? ErrorKind::RangeError : ErrorKind::TypeError, "learn.headers",
            "learn.headers must be one of " + conventions + " (received " + show(*headers) + ")");
      } else {
        config.learn.headers = headers->get<std::string>();
      }
    }
    const json* map = find(learn, "map");
    if (map == nullptr || map->is_null()) return;
    if (!map->is_object()) {
      add(ErrorKind::TypeError, "learn.map",
          "learn.map must be an object of dimensions to window names, such as {\"tokens\":\"tpm\"} (received " +
              show(*map) + ")");
      return;
    }
    std::string names = kPrimaryWindow;
    for (const WindowConfig& w : config.windows) names += ", " + w.name;
    for (auto it = map->begin(); it != map->end(); ++it) {
      const std::string path = "learn.map." + it.key();
      if (!valid_name(it.key())) {
        add(ErrorKind::RangeError, path, not_a_name("learn.map", it.key(), "dimension"));
        continue;
      }
      if (!it.value().is_string()) {
        add(ErrorKind::TypeError, path, path + " must be a window name, a string (received " + show(it.value()) + ")");
        continue;
      }
      const std::string window = it.value().get<std::string>();
      bool exists = window == kPrimaryWindow;
      for (const WindowConfig& w : config.windows) exists = exists || w.name == window;
      if (!exists) {
        add(ErrorKind::RangeError, path,
            path + " names window " + show(it.value()) + ", which this config does not have (windows: " + names + ")");
        continue;
      }
      config.learn.map.emplace_back(it.key(), window);
    }
  }

  // An optional name field: a string obeying the name rule. Returns whether it is usable.
  bool check_name(const json& obj, const char* key, const std::string& path, const char* what, std::string& out) {
    const json* value = find(obj, key);
    if (value == nullptr || value->is_null()) return true;
    if (!value->is_string()) {
      add(ErrorKind::TypeError, path, path + " must be " + what + ", a string (received " + show(*value) + ")");
      return false;
    }
    const std::string name = value->get<std::string>();
    if (!valid_name(name)) {
      add(ErrorKind::RangeError, path,
          path + " is " + show(*value) + ", which is not " + what + " (" + name_rule() + ")");
      return false;
    }
    out = name;
    return true;
  }

  void check_retry(const json& retry) {
    reject_unknown(retry, "retry", "retry",
                   {"maxRetries", "minDelayInMs", "maxDelayInMs", "factor", "respectRetryAfter"});
    RetryConfig& r = config.retry;
    check_int(retry, "maxRetries", "retry.maxRetries", 0, kMaxRetries, false, r.max_retries);
    const bool min_ok = check_int(retry, "minDelayInMs", "retry.minDelayInMs", 0, kMaxDelayMs, false, r.min_delay_ms);
    const bool max_ok = check_int(retry, "maxDelayInMs", "retry.maxDelayInMs", 0, kMaxDelayMs, false, r.max_delay_ms);
    check_double(retry, "factor", "retry.factor", 1.0, kMaxFactor,
                 "a finite number between 1 and " + std::to_string(static_cast<int64_t>(kMaxFactor)), r.factor);

    const json* flag = find(retry, "respectRetryAfter");
    if (flag != nullptr && !flag->is_null()) {
      if (flag->is_boolean()) {
        r.respect_retry_after = flag->get<bool>();
      } else {
        add(ErrorKind::TypeError, "retry.respectRetryAfter",
            "retry.respectRetryAfter must be a boolean (received " + show(*flag) + ")");
      }
    }

    // Checked after defaults so a lone {"maxDelayInMs": 100} is caught: the
    // default minimum (500) would otherwise silently exceed it.
    if (min_ok && max_ok && r.min_delay_ms > r.max_delay_ms) {
      auto describe = [&](const char* key, int64_t value) {
        const json* given = find(retry, key);
        std::string s = std::to_string(value);
        if (given == nullptr || given->is_null()) s += ", the default";
        return s;
      };
      add(ErrorKind::RangeError, "retry.minDelayInMs",
          "retry.minDelayInMs (" + describe("minDelayInMs", r.min_delay_ms) + ") must be at most retry.maxDelayInMs (" +
              describe("maxDelayInMs", r.max_delay_ms) + ")");
    }
  }

  // Returns whether the field ended up usable (valid or defaulted), so
  // cross-field rules only run on values that passed their own rule.
  bool check_int(const json& obj, const char* key, const std::string& path, int64_t lo, int64_t hi, bool required,
                 int64_t& out) {
    const json* value = find(obj, key);
    if (value == nullptr || value->is_null()) {
      if (required) {
        add_required(path, value);
        return false;
      }
      return true;
    }
    const std::string rule = "an integer between " + std::to_string(lo) + " and " + std::to_string(hi);
    if (!value->is_number()) {
      add(ErrorKind::TypeError, path, path + " must be a number, " + rule + " (received " + show(*value) + ")");
      return false;
    }
    std::optional<int64_t> result;
    // is_number_integer() is also true for unsigned, so test unsigned first.
    if (value->is_number_unsigned()) {
      const auto u = value->get<json::number_unsigned_t>();
      if (u <= static_cast<uint64_t>(hi) && static_cast<int64_t>(u) >= lo) {
        result = static_cast<int64_t>(u);
      }
    } else if (value->is_number_integer()) {
      const auto i = value->get<json::number_integer_t>();
      if (i >= lo && i <= hi) result = i;
    } else {
      // 60.0 and 6e1 are the integer 60: JSON has no integer type, and some
      // serialisers write every number as a double. Bounds are compared as
      // doubles (all exactly representable) before the cast, which would be
      // undefined behaviour out of range.
      const auto d = value->get<json::number_float_t>();
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

  void check_double(const json& obj, const char* key, const std::string& path, double lo, double hi,
                    const std::string& rule, double& out) {
    const json* value = find(obj, key);
    if (value == nullptr || value->is_null()) return;
    if (!value->is_number()) {
      add(ErrorKind::TypeError, path, path + " must be " + rule + " (received " + show(*value) + ")");
      return;
    }
    const auto d = value->get<double>();
    if (!std::isfinite(d) || d < lo || d > hi) {
      add(ErrorKind::RangeError, path, path + " must be " + rule + " (received " + show(*value) + ")");
      return;
    }
    out = d;
  }
};

struct Document {
  json value;
  std::optional<ConfigProblem> problem;
};

// Why the text is not JSON, in nlohmann's words. Only reached on failure, so
// the second pass costs nothing on the happy path.
std::string syntax_error_reason(std::string_view text) {
  struct Sax {
    std::string reason;
    bool null() { return true; }
    bool boolean(bool) { return true; }
    bool number_integer(json::number_integer_t) { return true; }
    bool number_unsigned(json::number_unsigned_t) { return true; }
    bool number_float(json::number_float_t, const json::string_t&) { return true; }
    bool string(json::string_t&) { return true; }
    bool binary(json::binary_t&) { return true; }
    bool start_object(std::size_t) { return true; }
    bool key(json::string_t&) { return true; }
    bool end_object() { return true; }
    bool start_array(std::size_t) { return true; }
    bool end_array() { return true; }
    bool parse_error(std::size_t, const std::string&, const json::exception& e) {
      reason = e.what();
      return false;
    }
  } sax;
  json::sax_parse(text.data(), text.data() + text.size(), &sax);
  std::string reason = sax.reason;
  // Drop nlohmann's "[json.exception.parse_error.101] " id: it means nothing
  // to a user and would look like a second [drl:...] token.
  if (!reason.empty() && reason.front() == '[') {
    const auto end = reason.find("] ");
    if (end != std::string::npos) reason.erase(0, end + 2);
  }
  if (reason.empty()) reason = "syntax error";
  return shorten(sanitize_utf8(reason), kMaxReasonBytes);
}

// `what` names the document in messages ("config", "config patch").
Document read_json(std::string_view text, const std::string& what) {
  Document doc;
  // JSON never allows a raw NUL, but nlohmann's lexer reads one as end of
  // input, so `{...}\0junk` would parse and the junk silently vanish.
  if (const auto nul = text.find('\0'); nul != std::string_view::npos) {
    doc.problem =
        ConfigProblem{ErrorKind::TypeError, "", what + " is not valid JSON: NUL byte at offset " + std::to_string(nul)};
    return doc;
  }
  int depth = 0;
  json::parser_callback_t track_depth = [&depth](int level, json::parse_event_t event, json&) {
    if (event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) {
      depth = std::max(depth, level + 1);
    }
    return true;
  };
  doc.value = json::parse(text.data(), text.data() + text.size(), track_depth,
                          /*allow_exceptions=*/false);
  if (doc.value.is_discarded()) {
    doc.problem = ConfigProblem{ErrorKind::TypeError, "", what + " is not valid JSON: " + syntax_error_reason(text)};
  } else if (depth > kMaxConfigDepth) {
    doc.problem =
        ConfigProblem{ErrorKind::TypeError, "",
                      what + " is nested too deeply (more than " + std::to_string(kMaxConfigDepth) + " levels)"};
  }
  return doc;
}

Checker check(const json& doc) {
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
Expected<ParsedConfig> finish(const json& doc) {
  Checker checker = check(doc);
  if (!checker.problems.empty()) return invalid(checker.problems);
  return ParsedConfig{checker.config, doc.dump()};
}

// The engine must never throw across its API (see error.h). Type checks keep
// nlohmann from throwing in practice; this catches what is left (bad_alloc).
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
    Document doc = read_json(json_text, "config");
    if (doc.problem) return {*doc.problem};
    return check(doc.value).problems;
  }
  DRL_CATCH(return {ConfigProblem{ErrorKind::Error, "", internal_failure(e.what())}};)
}

Expected<ParsedConfig> parse_config(std::string_view json_text) {
  DRL_TRY {
    Document doc = read_json(json_text, "config");
    if (doc.problem) return invalid({*doc.problem});
    return finish(doc.value);
  }
  DRL_CATCH(return invalid(ErrorKind::Error, internal_failure(e.what()));)
}

Expected<ParsedConfig> apply_config_patch(std::string_view stored_text, std::string_view patch_text) {
  DRL_TRY {
    Document stored = read_json(stored_text, "stored config");
    if (stored.problem) return invalid({*stored.problem});
    Document patch = read_json(patch_text, "config patch");
    if (patch.problem) return invalid({*patch.problem});
    if (!patch.value.is_object()) {
      return invalid(ErrorKind::TypeError,
                     std::string("config patch must be an object (received ") + patch.value.type_name() + ")");
    }
    // Both sides are depth-capped, so merge_patch's recursion is bounded and
    // the merged document is no deeper than the cap either.
    stored.value.merge_patch(patch.value);
    return finish(stored.value);
  }
  DRL_CATCH(return invalid(ErrorKind::Error, internal_failure(e.what()));)
}

std::string effective_config_json(const Config& config) {
  // ordered_json keeps the documented field order, which reads better in the
  // CLI than std::map's alphabetical one.
  nlohmann::ordered_json out;
  out["bucket"]["limitPerWindow"] = config.bucket.limit_per_window;
  out["bucket"]["windowInMs"] = config.bucket.window_ms;
  out["bucket"]["penaltyRefillFraction"] = config.bucket.penalty_refill_fraction;
  out["bucket"]["unit"] = config.bucket.unit;
  out["concurrency"] = config.concurrency;
  out["attemptTimeoutMs"] = config.attempt_timeout_ms;
  out["retry"]["maxRetries"] = config.retry.max_retries;
  out["retry"]["minDelayInMs"] = config.retry.min_delay_ms;
  out["retry"]["maxDelayInMs"] = config.retry.max_delay_ms;
  out["retry"]["factor"] = config.retry.factor;
  out["retry"]["respectRetryAfter"] = config.retry.respect_retry_after;
  out["windows"] = nlohmann::ordered_json::object();
  for (const WindowConfig& w : config.windows) {
    out["windows"][w.name] = {{"unit", w.unit}, {"limitPerWindow", w.limit_per_window}, {"windowInMs", w.window_ms}};
  }
  if (config.learn.enabled) {
    out["learn"]["headers"] = config.learn.headers;
    out["learn"]["map"] = nlohmann::ordered_json::object();
    for (const auto& [dimension, window] : config.learn.map) out["learn"]["map"][dimension] = window;
  } else {
    out["learn"] = nullptr;
  }
  if (config.tree.enabled) out["tree"] = internal::tree_json(config.tree);
  // A caller-built Config could hold NaN; dump() writes it as null rather
  // than throwing, which parse_config would then reject (the desired outcome).
  return out.dump();
}

}  // namespace drl
