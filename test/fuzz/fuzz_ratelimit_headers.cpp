// Arbitrary bytes into the rate-limit header parser, under every convention.
//
// Input: 8 bytes of `now` (when there are at least 8), then header lines split on
// '\n'. A line "name:value" is split at its first ':'. A line whose first byte is
// >= 0x80 names a known header by that byte instead (the rest of the line is the
// value), so the fuzzer reaches every convention without guessing its names.
// ASan + UBSan catch bad reads and overflow; the checks below catch wrong answers.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "drl/ratelimit_headers.h"

namespace {

using drl::HeaderConvention;
using drl::HeaderField;
using drl::Observation;

constexpr int64_t kMaxCount = 1'000'000'000'000'000;  // 1e15

constexpr std::string_view kKnownNames[] = {
    "x-ratelimit-limit",
    "x-ratelimit-remaining",
    "x-ratelimit-reset",
    "x-ratelimit-used",
    "x-ratelimit-limit-requests",
    "x-ratelimit-remaining-requests",
    "x-ratelimit-reset-requests",
    "x-ratelimit-limit-tokens",
    "x-ratelimit-remaining-tokens",
    "x-ratelimit-reset-tokens",
    "anthropic-ratelimit-requests-limit",
    "anthropic-ratelimit-requests-remaining",
    "anthropic-ratelimit-requests-reset",
    "anthropic-ratelimit-tokens-limit",
    "anthropic-ratelimit-tokens-remaining",
    "anthropic-ratelimit-tokens-reset",
    "anthropic-ratelimit-input-tokens-limit",
    "anthropic-ratelimit-input-tokens-remaining",
    "anthropic-ratelimit-input-tokens-reset",
    "anthropic-ratelimit-output-tokens-limit",
    "anthropic-ratelimit-output-tokens-remaining",
    "anthropic-ratelimit-output-tokens-reset",
    "RateLimit",
    "RateLimit-Policy",
    "RateLimit-Limit",
    "RateLimit-Remaining",
    "RateLimit-Reset",
    "X-RateLimit-Remaining-Tokens",
};

constexpr HeaderConvention kConventions[] = {HeaderConvention::Auto,   HeaderConvention::GitHub,
                                             HeaderConvention::OpenAI, HeaderConvention::Anthropic,
                                             HeaderConvention::Ietf,   HeaderConvention::IetfDraft};

void check(bool ok) {
  if (!ok) __builtin_trap();
}

bool same(const Observation& a, const Observation& b) {
  return a.dimension == b.dimension && a.limit == b.limit && a.remaining == b.remaining &&
         a.reset_at_ms == b.reset_at_ms && a.window_ms == b.window_ms && a.convention == b.convention;
}

bool same(const std::vector<Observation>& a, const std::vector<Observation>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!same(a[i], b[i])) return false;
  }
  return true;
}

bool vendor_dimension(std::string_view d) {
  return d == "requests" || d == "tokens" || d == "input-tokens" || d == "output-tokens";
}

void check_observations(const std::vector<Observation>& seen, HeaderConvention convention) {
  // anthropic 4 + openai 2 + ietf 8 + ietf-draft 1 + github 1.
  check(seen.size() <= 16);
  for (std::size_t i = 0; i < seen.size(); ++i) {
    const Observation& o = seen[i];
    check(o.limit || o.remaining);
    check(!o.limit || (*o.limit >= 0 && *o.limit <= kMaxCount));
    check(!o.remaining || (*o.remaining >= 0 && *o.remaining <= kMaxCount));
    check(!o.window_ms || (*o.window_ms > 0 && *o.window_ms <= kMaxCount * 1000));
    check(o.convention != HeaderConvention::Auto);
    check(convention == HeaderConvention::Auto || o.convention == convention);
    switch (o.convention) {
      case HeaderConvention::GitHub:
      case HeaderConvention::IetfDraft:
        check(o.dimension == "default");
        break;
      case HeaderConvention::OpenAI:
        check(o.dimension == "requests" || o.dimension == "tokens");
        break;
      case HeaderConvention::Anthropic:
        check(vendor_dimension(o.dimension));
        break;
      case HeaderConvention::Ietf:
        check(!o.dimension.empty() && o.dimension.size() <= drl::kMaxRateLimitHeaderBytes);
        break;
      case HeaderConvention::Auto:
        break;
    }
    // Only the IETF fields state a window.
    check(!o.window_ms || o.convention == HeaderConvention::Ietf || o.convention == HeaderConvention::IetfDraft);
    // One per dimension (so one per (convention, dimension)), also under Auto.
    for (std::size_t j = 0; j < i; ++j) check(seen[j].dimension != o.dimension);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  int64_t now_ms = 0;
  if (size >= sizeof(now_ms)) {
    std::memcpy(&now_ms, data, sizeof(now_ms));
    data += sizeof(now_ms);
    size -= sizeof(now_ms);
  }
  const std::string_view input(reinterpret_cast<const char*>(data), size);

  std::vector<HeaderField> headers;
  std::size_t start = 0;
  while (start <= input.size() && headers.size() < 64) {
    std::size_t end = input.find('\n', start);
    if (end == std::string_view::npos) end = input.size();
    const std::string_view line = input.substr(start, end - start);
    start = end + 1;
    if (!line.empty() && static_cast<unsigned char>(line[0]) >= 0x80) {
      const std::size_t pick = static_cast<unsigned char>(line[0]) % std::size(kKnownNames);
      headers.push_back({kKnownNames[pick], line.substr(1)});
    } else {
      const std::size_t colon = line.find(':');
      if (colon == std::string_view::npos) {
        headers.push_back({line, {}});
      } else {
        headers.push_back({line.substr(0, colon), line.substr(colon + 1)});
      }
    }
  }

  std::vector<std::vector<Observation>> by_convention;
  for (HeaderConvention c : kConventions) {
    by_convention.push_back(drl::parse_rate_limit_headers(headers, c, now_ms));
    check_observations(by_convention.back(), c);
    // Determinism.
    check(same(drl::parse_rate_limit_headers(headers, c, now_ms), by_convention.back()));
  }

  // Auto reports exactly what the winning convention reports on its own.
  for (const Observation& o : by_convention[0]) {
    bool found = false;
    for (std::size_t c = 1; c < std::size(kConventions); ++c) {
      if (kConventions[c] != o.convention) continue;
      for (const Observation& own : by_convention[c]) found = found || same(own, o);
    }
    check(found);
  }

  // Headers past the bound are never read.
  if (headers.size() > drl::kMaxRateLimitHeaders) {
    const std::vector<HeaderField> head(headers.begin(), headers.begin() + drl::kMaxRateLimitHeaders);
    check(same(drl::parse_rate_limit_headers(head, HeaderConvention::Auto, now_ms), by_convention[0]));
  }

  // Names compare case-insensitively: upper-casing them changes nothing.
  std::vector<std::string> upper_names;
  upper_names.reserve(headers.size());
  std::vector<HeaderField> upper = headers;
  for (HeaderField& h : upper) {
    std::string name(h.name);
    for (char& ch : name) ch = (ch >= 'a' && ch <= 'z') ? static_cast<char>(ch - 32) : ch;
    upper_names.push_back(std::move(name));
    h.name = upper_names.back();
  }
  check(same(drl::parse_rate_limit_headers(upper, HeaderConvention::Auto, now_ms), by_convention[0]));

  // The client forwards only what is_rate_limit_header accepts; that must be
  // everything the parser reads (compared within the bound, where order is kept).
  if (headers.size() <= drl::kMaxRateLimitHeaders) {
    std::vector<HeaderField> forwarded;
    for (const HeaderField& h : headers) {
      if (drl::is_rate_limit_header(h.name)) forwarded.push_back(h);
    }
    check(same(drl::parse_rate_limit_headers(forwarded, HeaderConvention::Auto, now_ms), by_convention[0]));
  }

  return 0;
}
