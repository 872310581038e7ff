// Fuzzes parse_config, validate_config and apply_config_patch.
//
// Input: "<document>\0<patch>". The document goes to parse_config and
// validate_config; when a NUL is present the patch is applied to it. The
// document is also applied as a patch onto a known-valid config, which lets
// the fuzzer reach field validation without first inventing a whole config,
// and onto one with extra windows and units, so that a short patch
// ({"windows":{"tpm":null}}, {"bucket":{"unit":"x"}}, ...) reaches the
// windows' rules (names, units, limits, the reserved name, the count).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "drl/config.h"

namespace {

constexpr std::string_view kPrefix = "[drl:invalid-config] ";
constexpr std::string_view kBase = R"({"bucket":{"limitPerWindow":60,"windowInMs":60000},"concurrency":5,)"
                                   R"("retry":{"maxRetries":2}})";
constexpr std::string_view kBaseWindows =
    R"({"bucket":{"limitPerWindow":500,"windowInMs":60000,"unit":"requests"},"concurrency":5,)"
    R"("windows":{"tpm":{"unit":"tokens","limitPerWindow":200000,"windowInMs":60000},)"
    R"("rpd":{"limitPerWindow":10000,"windowInMs":86400000}}})";

void check(bool ok) {
  if (!ok) __builtin_trap();
}

// Messages cross into JS as strings; invalid UTF-8 would be mangled there.
bool valid_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t len = 0;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c < 0x80) {
      ++i;
      continue;
    } else if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    } else {
      return false;
    }
    if (i + len > s.size()) return false;
    for (std::size_t k = 1; k < len; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      if (k == 1 ? (b < lo || b > hi) : ((b & 0xC0) != 0x80)) return false;
    }
    i += len;
  }
  return true;
}

bool same_windows(const std::vector<drl::WindowConfig>& a, const std::vector<drl::WindowConfig>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].name != b[i].name || a[i].unit != b[i].unit || a[i].limit_per_window != b[i].limit_per_window ||
        a[i].window_ms != b[i].window_ms) {
      return false;
    }
  }
  return true;
}

bool same(const drl::Config& a, const drl::Config& b) {
  return a.bucket.limit_per_window == b.bucket.limit_per_window && a.bucket.window_ms == b.bucket.window_ms &&
         a.bucket.penalty_refill_fraction == b.bucket.penalty_refill_fraction && a.concurrency == b.concurrency &&
         a.retry.max_retries == b.retry.max_retries && a.retry.min_delay_ms == b.retry.min_delay_ms &&
         a.retry.max_delay_ms == b.retry.max_delay_ms && a.retry.factor == b.retry.factor &&
         a.retry.respect_retry_after == b.retry.respect_retry_after && a.bucket.unit == b.bucket.unit &&
         same_windows(a.windows, b.windows);
}

void check_rules(const drl::Config& c) {
  check(c.bucket.limit_per_window >= 1 && c.bucket.limit_per_window <= drl::kMaxLimitPerWindow);
  check(c.bucket.window_ms >= 1 && c.bucket.window_ms <= drl::kMaxWindowMs);
  check(std::isfinite(c.bucket.penalty_refill_fraction));
  check(c.bucket.penalty_refill_fraction >= 0.0 && c.bucket.penalty_refill_fraction <= 1.0);
  check(c.concurrency >= 1 && c.concurrency <= drl::kMaxConcurrency);
  check(c.retry.max_retries >= 0 && c.retry.max_retries <= drl::kMaxRetries);
  check(c.retry.min_delay_ms >= 0 && c.retry.min_delay_ms <= drl::kMaxDelayMs);
  check(c.retry.max_delay_ms >= 0 && c.retry.max_delay_ms <= drl::kMaxDelayMs);
  check(c.retry.min_delay_ms <= c.retry.max_delay_ms);
  check(std::isfinite(c.retry.factor));
  check(c.retry.factor >= 1.0 && c.retry.factor <= drl::kMaxFactor);
  check(drl::valid_name(c.bucket.unit));
  check(c.windows.size() <= drl::kMaxExtraWindows);
  for (std::size_t i = 0; i < c.windows.size(); ++i) {
    const drl::WindowConfig& w = c.windows[i];
    check(drl::valid_name(w.name) && w.name != drl::kPrimaryWindow);
    check(drl::valid_name(w.unit));  // the default unit when the document names none
    check(w.limit_per_window >= 1 && w.limit_per_window <= drl::kMaxLimitPerWindow);
    check(w.window_ms >= 1 && w.window_ms <= drl::kMaxWindowMs);
    for (std::size_t k = 0; k < i; ++k) check(c.windows[k].name != w.name);
  }
}

void check_failure(const drl::Error& e) {
  check(e.code == drl::ErrorCode::InvalidConfig);
  check(e.kind == drl::ErrorKind::TypeError || e.kind == drl::ErrorKind::RangeError);
  check(e.message.size() > kPrefix.size());
  check(std::string_view(e.message).substr(0, kPrefix.size()) == kPrefix);
  check(valid_utf8(e.message));
}

void check_result(const drl::Expected<drl::ParsedConfig>& result) {
  if (!result.ok()) {
    check_failure(result.error());
    return;
  }
  const drl::ParsedConfig& parsed = result.value();
  check_rules(parsed.config);

  // The stored text means exactly the config it was parsed into.
  const auto again = drl::parse_config(parsed.text);
  check(again.ok());
  check(same(again->config, parsed.config));
  check(again->text == parsed.text);

  // So does the defaults-filled view.
  const auto effective = drl::parse_config(drl::effective_config_json(parsed.config));
  check(effective.ok());
  check(same(effective->config, parsed.config));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::size_t nul = input.find('\0');
  const std::string_view document = input.substr(0, nul);

  const auto parsed = drl::parse_config(document);
  check_result(parsed);

  // validate_config is parse_config's problem list, verbatim.
  const std::vector<drl::ConfigProblem> problems = drl::validate_config(document);
  check(problems.empty() == parsed.ok());
  if (!parsed.ok()) {
    std::string joined(kPrefix);
    for (std::size_t i = 0; i < problems.size(); ++i) {
      if (i > 0) joined += "; ";
      joined += problems[i].message;
      check(valid_utf8(problems[i].path));
    }
    check(parsed.error().message == joined);
    check(parsed.error().kind == problems.front().kind);
  }

  // A raw NUL is never valid JSON, wherever it sits.
  if (nul != std::string_view::npos) check(!drl::parse_config(input).ok());

  check_result(drl::apply_config_patch(kBase, document));
  check_result(drl::apply_config_patch(kBaseWindows, document));

  if (parsed.ok()) {
    // An empty patch is the identity.
    const auto same_again = drl::apply_config_patch(document, "{}");
    check(same_again.ok());
    check(same_again->text == parsed->text);
    check(same(same_again->config, parsed->config));
  }

  if (nul != std::string_view::npos) {
    const std::string_view patch = input.substr(nul + 1);
    const auto patched = drl::apply_config_patch(document, patch);
    check_result(patched);
    if (parsed.ok()) {
      // The stored text stands for the document it came from.
      const auto via_text = drl::apply_config_patch(parsed->text, patch);
      check(via_text.ok() == patched.ok());
      if (patched.ok()) {
        check(via_text->text == patched->text);
      } else {
        check(via_text.error().message == patched.error().message);
      }
    }
  }
  return 0;
}
