// Retry-After header parsing (RFC 9110 §10.2.3).
//
// Example:
//   const int64_t now = 1445412000000;  // Wed, 21 Oct 2015 07:20:00 GMT, in ms since the epoch
//   assert(drl::parse_retry_after("120", now) == 120000);
//   assert(drl::parse_retry_after(" 1.5 ", now) == 1500);
//   assert(drl::parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now) == 480000);  // ms until then
//   assert(drl::parse_retry_after("Wed, 21 Oct 2015 07:19:00 GMT", now) == 0);       // in the past
//   assert(drl::parse_retry_after("soon", now) == std::nullopt);                     // absent
//
// Accepts delay-seconds (ASCII digits, optionally a decimal fraction,
// surrounding whitespace allowed; no sign, hex, exponent or Infinity) and an
// HTTP-date in any of the three forms: IMF-fixdate, obsolete RFC 850 and
// asctime. Anything else, including an empty value, is absent.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace drl {

// Milliseconds to wait, never negative; std::nullopt when absent or
// unparsable. Fractions of a millisecond round up (waiting slightly longer is
// the safe side). Huge values saturate at kRetryAfterCapMs.
std::optional<int64_t> parse_retry_after(std::string_view header, int64_t now_ms);

// Far beyond any configurable delay; callers clamp to maxDelayInMs anyway.
inline constexpr int64_t kRetryAfterCapMs = 1LL << 50;

// Parses an HTTP-date to milliseconds since the Unix epoch (exposed for tests).
std::optional<int64_t> parse_http_date(std::string_view text, int64_t now_ms);

}  // namespace drl
