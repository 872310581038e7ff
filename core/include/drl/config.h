// A bucket's configuration: parsing, validation and deep-merge patching.
//
// Example:
//   drl::Expected<drl::ParsedConfig> parsed = drl::parse_config(R"({
//     "bucket": { "limitPerWindow": 60, "windowInMs": 60000 },
//     "concurrency": 5,
//     "retry": { "maxRetries": 2 }
//   })");
//   assert(parsed.ok());
//   assert(parsed->config.bucket.penalty_refill_fraction == 0.5);  // the default
//   assert(parsed->config.retry.min_delay_ms == 500);  // a partial retry merges onto the defaults
//   // The document as given, compact, without defaults: what to store and echo in stats.
//   const std::string stored = parsed->text;
//   assert(stored ==
//   R"({"bucket":{"limitPerWindow":60,"windowInMs":60000},"concurrency":5,"retry":{"maxRetries":2}})");
//
//   drl::Expected<drl::ParsedConfig> patched = drl::apply_config_patch(stored, R"({"concurrency": 8})");
//   assert(patched->config.concurrency == 8);
//   assert(patched->config.retry.max_retries == 2);  // untouched keys are kept
//
//   drl::Expected<drl::ParsedConfig> broken = drl::parse_config(R"({"concurrency": 0})");
//   assert(drl::validate_config(R"({"concurrency": 0})").size() == 2);  // every problem at once
//   assert(broken.error().message ==
//          "[drl:invalid-config] bucket is required; "
//          "concurrency must be an integer between 1 and 1000000 (received 0)");
//
// Every problem in a document is reported at once (the CLI shows them all
// together), each naming the field, the rule and the value received.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "drl/error.h"

namespace drl {

// Upper bounds that keep arithmetic exact in a double and catch unit mistakes.
inline constexpr int64_t kMaxLimitPerWindow = 1'000'000'000;
inline constexpr int64_t kMaxWindowMs = 366LL * 24 * 60 * 60 * 1000;  // 366 days
inline constexpr int64_t kMaxConcurrency = 1'000'000;
inline constexpr int64_t kMaxRetries = 100;
// An attempt longer than a day is a hung one; the bound also keeps the
// timeout within the int32 an action carries it in.
inline constexpr int64_t kMaxAttemptTimeoutMs = 24LL * 60 * 60 * 1000;
inline constexpr int64_t kMaxDelayMs = kMaxWindowMs;
inline constexpr double kMaxFactor = 1000.0;

// Bounds on the windows a bucket has and on the names of windows and units.
inline constexpr size_t kMaxExtraWindows = 7;  // beside the primary window
inline constexpr size_t kMaxWindows = kMaxExtraWindows + 1;
inline constexpr size_t kMaxNameBytes = 32;  // window and unit names: a letter, then letters, digits, '_' or '-'
// The unit a call's plain numeric cost is counted in, unless bucket.unit names another.
inline constexpr const char* kDefaultUnit = "requests";
// The primary window's name in stats (and so a name no extra window may take).
inline constexpr const char* kPrimaryWindow = "bucket";

struct BucketConfig {
  int64_t limit_per_window = 0;
  int64_t window_ms = 0;
  double penalty_refill_fraction = 0.5;
  std::string unit = kDefaultUnit;  // the default unit: what a numeric cost counts
};

// A window beside the primary one: at most limit_per_window of `unit` in any
// window_ms. The penalty (and its refill fraction) applies to it too.
struct WindowConfig {
  std::string name;
  std::string unit;  // the default unit when the document names none
  int64_t limit_per_window = 0;
  int64_t window_ms = 0;
};

// Learning from the upstream's rate-limit headers (off unless `learn` is
// given). `headers` names the convention read ("auto": every one the engine
// knows); `map` says which window a dimension the headers report (requests,
// tokens, input-tokens, output-tokens, default, or an IETF policy's name)
// corrects, beside the defaults (default: the primary window; any other:
// the first window, the primary first, counting a unit of that name).
struct LearnConfig {
  bool enabled = false;
  std::string headers = "auto";
  std::vector<std::pair<std::string, std::string>> map;  // dimension -> window name, by dimension
};
// The conventions `learn.headers` accepts.
inline constexpr const char* kHeaderConventions[] = {"auto", "github", "openai", "anthropic", "ietf", "ietf-draft"};

struct RetryConfig {
  int64_t max_retries = 3;
  int64_t min_delay_ms = 500;
  int64_t max_delay_ms = 30'000;
  double factor = 2.0;
  bool respect_retry_after = true;
};

struct Config {
  BucketConfig bucket;
  int64_t concurrency = 0;
  // An attempt that has not reported by then is settled without a retry and
  // its slot released. Longer than Cloudflare's own 100 s origin timeout, so
  // an HTTP call through Cloudflare has given up before the limiter does.
  int64_t attempt_timeout_ms = 120'000;
  RetryConfig retry;
  std::vector<WindowConfig> windows;  // extra windows, by name
  LearnConfig learn;
};

// One broken rule. `path` is dotted ("bucket.windowInMs"); `message` is the
// full human sentence naming path, rule and received value.
struct ConfigProblem {
  ErrorKind kind;
  std::string path;
  std::string message;
};

// A validated config plus the document it came from, as given (no defaults
// mixed in), serialised compactly.
struct ParsedConfig {
  Config config;
  std::string text;
};

// Whether `name` is a valid window or unit name (see kMaxNameBytes).
bool valid_name(std::string_view name);

// Every problem found in `json_text`; empty means valid.
std::vector<ConfigProblem> validate_config(std::string_view json_text);

// Parses and validates a complete config. On failure the error is
// [drl:invalid-config] and its message lists every problem, "; "-separated.
Expected<ParsedConfig> parse_config(std::string_view json_text);

// Merges `patch_text` deeply onto `stored_text` (RFC 7396 merge patch: objects
// merge key by key, `null` removes a key, anything else replaces), then
// validates the result as a complete config.
Expected<ParsedConfig> apply_config_patch(std::string_view stored_text, std::string_view patch_text);

// The same config with every default filled in, as compact JSON.
std::string effective_config_json(const Config& config);

}  // namespace drl
