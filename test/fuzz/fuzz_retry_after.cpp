// Arbitrary bytes into the Retry-After parser. The first 8 bytes (when there
// are at least 8) pick `now`, so extreme clocks are exercised too; the rest is
// the header. ASan catches any read outside the header's bytes.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

#include "drl/retry_after.h"

namespace {

bool is_ows(char c) { return c == ' ' || c == '\t'; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  int64_t now_ms = 0;
  if (size >= sizeof(now_ms)) {
    std::memcpy(&now_ms, data, sizeof(now_ms));
    data += sizeof(now_ms);
    size -= sizeof(now_ms);
  }
  const std::string_view header(reinterpret_cast<const char*>(data), size);

  const std::optional<int64_t> delay = drl::parse_retry_after(header, now_ms);
  if (delay && (*delay < 0 || *delay > drl::kRetryAfterCapMs)) __builtin_trap();

  // A date, when recognised, must drive the delay exactly: max(0, date - now),
  // capped. Computed in __int128 here so the oracle cannot overflow itself.
  const std::optional<int64_t> date = drl::parse_http_date(header, now_ms);
  if (date) {
    if (!delay) __builtin_trap();
    __int128 expected = static_cast<__int128>(*date) - now_ms;
    if (expected < 0) expected = 0;
    if (expected > drl::kRetryAfterCapMs) expected = drl::kRetryAfterCapMs;
    if (*delay != static_cast<int64_t>(expected)) __builtin_trap();
  }

  // Determinism: same input, same answer.
  if (drl::parse_retry_after(header, now_ms) != delay) __builtin_trap();

  // Padding with OWS never changes the result.
  if (size <= 256) {
    char padded[256 + 2];
    padded[0] = ' ';
    if (size > 0) std::memcpy(padded + 1, data, size);
    padded[size + 1] = '\t';
    const std::string_view wrapped(padded, size + 2);
    if (drl::parse_retry_after(wrapped, now_ms) != delay) __builtin_trap();
  }

  // Empty or whitespace-only is absent, never a zero delay.
  bool all_ows = true;
  for (char c : header) all_ows = all_ows && is_ows(c);
  if (all_ows && delay) __builtin_trap();

  return 0;
}
