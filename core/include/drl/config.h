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
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "drl/error.h"
#include "drl/limits.h"

namespace drl {

// The bounds a config must keep (kMaxLimitPerWindow, kMaxWindowMs, kMaxDelayMs,
// kMaxConcurrency, kMaxRetries, kMaxAttemptTimeoutMs, kMaxFactor,
// kMaxExtraWindows, kMaxNameBytes, kMaxConfigDepth), the default unit and the
// primary window's name are rows of limits.def, shared with the JS side:
// see drl/limits.h.

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
// The conventions `learn.headers` accepts: kHeaderConventions (limits.def).

struct RetryConfig {
  int64_t max_retries = 3;
  int64_t min_delay_ms = 500;
  int64_t max_delay_ms = 30'000;
  double factor = 2.0;
  bool respect_retry_after = true;
};

// A lease tree (docs/leases.md; opt-in with `tree`): the object named
// after the bucket is its root and keeps the ledger, objects named
// `<bucket>@<region>` are its children. Every field but `enabled` has a
// default; core/src/tree_config.h turns it into the ledger's config and each
// child's setup.
struct TreeFloor {
  std::string region;                                  // the child it is reserved for
  std::vector<std::pair<std::string, int64_t>> units;  // window name -> units, as given
  int64_t slots = 0;
};

struct TreeConfig {
  bool enabled = false;
  int64_t lease_ms = 2'000;               // D: how long a child may use a lease, from its send
  int64_t max_lease_ms = 30'000;          // above lease_ms, a long window lends up to half its length, up to this
  std::string when_short = "failClosed";  // or "floor", "failOpen": when its leases cannot serve a call
  std::vector<TreeFloor> floors;          // by region
  int64_t clock_slack_ms = 20;            // S: a reading may lag its clock by this (Date.now() stands still in a turn)
  int64_t drift_ppm = 100;                // rho: every clock runs within 1 +- this / 10^6 of real time
  int64_t stock_ms = 100;                 // a child stocks its rate over the round trip + this (>= window/30)
  int64_t retry_ms = 500;                 // an unanswered exchange is resent after this
  int64_t unreachable_ms = 2'000;         // failOpen: admits once an exchange went unanswered this long
  // Children pass every call through to the root instead of taking leases:
  // true, false, or unset for "auto" (internal::tree_passes_through).
  std::optional<bool> pass_through;
};

struct Config {
  BucketConfig bucket;
  int64_t concurrency = 0;
  // An attempt that has not reported by then is settled without a retry and
  // its slot released (the default's reason is in limits.def).
  int64_t attempt_timeout_ms = kDefaultAttemptTimeoutMs;
  RetryConfig retry;
  std::vector<WindowConfig> windows;  // extra windows, by name
  LearnConfig learn;
  TreeConfig tree;
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

// Whether `name` is a valid window, unit or dimension name: a letter, then
// letters, digits, '_' or '-', at most kMaxNameBytes in all.
bool valid_name(std::string_view name);

// That rule in words, as every message refusing a name quotes it, the
// client's included (shim/rules.ts NAME_RULE builds the same words):
// "a letter, then at most 31 letters, digits, _ or -".
std::string name_rule();

// Whether `region` names a tree child (`<bucket>@<region>`): a lowercase
// letter, then lowercase letters or digits, at most kMaxRegionBytes in all,
// and not kRootRegion (the root's own).
bool valid_region(std::string_view region);

// That rule in words: "a lowercase letter, then at most 9 lowercase letters or digits, not \"root\"".
std::string region_rule();

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
