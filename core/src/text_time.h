// Small pieces shared by the engine's header parsers (retry_after.cpp,
// ratelimit_headers.cpp): ASCII digits, a fraction of a second read to whole
// milliseconds (rounded up), and calendar arithmetic that needs no timegm/TZ,
// so native and wasm agree. Internal to the engine.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace drl::internal {

inline bool is_digit(char c) { return c >= '0' && c <= '9'; }
inline bool is_lcalpha(char c) { return c >= 'a' && c <= 'z'; }
inline bool is_alpha(char c) { return is_lcalpha(c) || (c >= 'A' && c <= 'Z'); }

// RFC 9110 §5.6.3 OWS: only SP and HTAB count; CR/LF would mean a broken header.
inline bool is_ows(char c) { return c == ' ' || c == '\t'; }

inline std::string_view trim_ows(std::string_view text) {
  while (!text.empty() && is_ows(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_ows(text.back())) text.remove_suffix(1);
  return text;
}

// At `pos`, an optional '.' and its digits, as whole ms in `fraction_ms`:
// the first three digits are ms, any non-zero digit beyond them rounds up
// (later is the safe side). No '.': 0. A '.' with no digit after it: false.
inline bool read_ms_fraction(std::string_view text, std::size_t& pos, int64_t& fraction_ms) {
  fraction_ms = 0;
  if (pos >= text.size() || text[pos] != '.') return true;
  ++pos;
  const std::size_t start = pos;
  int64_t place = 100;
  bool below_ms = false;
  while (pos < text.size() && is_digit(text[pos])) {
    const int digit = text[pos] - '0';
    if (place > 0) {
      fraction_ms += digit * place;
      place /= 10;
    } else if (digit != 0) {
      below_ms = true;
    }
    ++pos;
  }
  if (pos == start) return false;
  if (below_ms) ++fraction_ms;  // 1000 at most: it carries into the next second
  return true;
}

inline bool is_leap_year(int64_t year) { return year % 4 == 0 && (year % 100 != 0 || year % 400 == 0); }

inline int days_in_month(int64_t year, int month) {
  constexpr int kDays[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return month == 2 && is_leap_year(year) ? 29 : kDays[month - 1];
}

constexpr int64_t kMsPerDay = 86'400'000;

// Howard Hinnant's days_from_civil: days since 1970-01-01 in the proleptic
// Gregorian calendar, exact for negative years too.
inline int64_t days_from_civil(int64_t year, int month, int day) {
  year -= month <= 2 ? 1 : 0;
  const int64_t era = (year >= 0 ? year : year - 399) / 400;
  const int64_t yoe = year - era * 400;
  const int64_t doy = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

}  // namespace drl::internal
