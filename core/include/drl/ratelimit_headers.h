// Rate-limit response headers: what the upstream says is left of its quota.
//
// Example:
//   const int64_t now = 1717243200000;  // 2024-06-01T12:00:00Z, in ms since the epoch
//   const std::vector<drl::HeaderField> headers = {
//       {"x-ratelimit-limit-tokens", "150000"},
//       {"X-RateLimit-Remaining-Tokens", "149984"},  // names compare case-insensitively
//       {"x-ratelimit-reset-tokens", "6m0s"},
//       {"RateLimit-Policy", "\"default\";q=100;w=60"},
//       {"RateLimit", "\"default\";r=0;t=30"},
//   };
//   const auto seen = drl::parse_rate_limit_headers(headers, drl::HeaderConvention::Auto, now);
//   assert(seen.size() == 2);
//   assert(seen[0].convention == drl::HeaderConvention::OpenAI);
//   assert(seen[0].dimension == "tokens");
//   assert(seen[0].limit == 150000);
//   assert(seen[0].remaining == 149984);
//   assert(seen[0].reset_at_ms == now + 360000);  // six minutes from now
//   assert(seen[1].convention == drl::HeaderConvention::Ietf);
//   assert(seen[1].dimension == "default");
//   assert(seen[1].limit == 100);
//   assert(seen[1].remaining == 0);  // paused until the reset
//   assert(seen[1].reset_at_ms == now + 30000);
//   assert(seen[1].window_ms == 60000);
//   assert(drl::is_rate_limit_header("anthropic-ratelimit-tokens-reset"));
//   assert(!drl::is_rate_limit_header("x-ratelimitx"));
//
// Conventions and the headers each reads (values are trimmed of SP/HTAB):
//   github      x-ratelimit-{limit,remaining,reset}; dimension "default". The reset is a
//               number: >= 1e12 is epoch ms, >= 1e9 epoch seconds, else seconds from now.
//   openai      x-ratelimit-{limit,remaining,reset}-{requests,tokens}; the reset is a Go
//               duration ("6m0s", "20ms", "0.5s", "1h30m"; units d h m s ms us µs ns).
//   anthropic   anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-
//               {limit,remaining,reset}; the reset is an RFC 3339 date-time.
//   ietf        RateLimit-Policy (q = limit, w = window seconds) and RateLimit (r =
//               remaining, t = seconds to reset), structured-field lists keyed by policy
//               name. The policy named "default", else the first one named, is dimension
//               "default"; every other policy's dimension is its own name.
//   ietf-draft  RateLimit-Limit ("100" or "100, 100;w=60"), RateLimit-Remaining,
//               RateLimit-Reset (a number, read like github's reset); dimension "default".
//   auto        all of them; per dimension the first of anthropic, openai, ietf,
//               ietf-draft, github that reports it wins.
// Limits and remainings are plain ASCII digit strings up to 1e15; anything else (a
// sign, hex, exponent, NaN, a list where one number belongs, control characters) leaves
// that field absent. When a name repeats, its first occurrence is the one read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "drl/limits.h"

namespace drl {

enum class HeaderConvention { Auto, GitHub, OpenAI, Anthropic, Ietf, IetfDraft };

// "auto", "github", "openai", "anthropic", "ietf", "ietf-draft" (exact, lower case).
std::optional<HeaderConvention> header_convention(std::string_view name);
std::string_view header_convention_name(HeaderConvention c);

struct HeaderField {
  std::string_view name;  // compared case-insensitively
  std::string_view value;
};

struct Observation {
  std::string dimension;                                 // "requests", "tokens", "input-tokens", "output-tokens",
                                                         // "default", or a further IETF policy's name
  std::optional<int64_t> limit;                          // the upstream's limit for that dimension, 0..1e15
  std::optional<int64_t> remaining;                      // what it still allows until reset, 0..1e15
  std::optional<int64_t> reset_at_ms;                    // absolute ms since the epoch (may be in the past)
  std::optional<int64_t> window_ms;                      // the policy's window when stated (IETF w=)
  HeaderConvention convention = HeaderConvention::Auto;  // which convention it came from
};

// At most one Observation per (convention, dimension), and under Auto at most one per
// dimension; fields it cannot parse are absent; an observation with neither limit nor
// remaining is dropped. Never throws; bounded work: reads only the first
// kMaxRateLimitHeaders entries, and a value longer than kMaxRateLimitHeaderBytes counts
// as unparsable. Order: by convention (Auto's precedence), then as listed above.
std::vector<Observation> parse_rate_limit_headers(const std::vector<HeaderField>& headers, HeaderConvention convention,
                                                  int64_t now_ms);

// Whether the client should forward a header: x-ratelimit-*, anthropic-ratelimit-*,
// ratelimit, ratelimit-policy, ratelimit-limit, ratelimit-remaining, ratelimit-reset.
// Expects the lower-case name, but compares case-insensitively anyway.
bool is_rate_limit_header(std::string_view lower_name);

// kMaxRateLimitHeaders and kMaxRateLimitHeaderBytes, the bounds above, are
// rows of limits.def: the client forwards no more than they allow.

}  // namespace drl
