#include "drl/retry_after.h"

#include <cstddef>

#include "text_time.h"

namespace drl {

namespace {

using internal::days_from_civil;
using internal::days_in_month;
using internal::is_digit;
using internal::is_leap_year;
using internal::is_ows;
using internal::kMsPerDay;
using internal::trim_ows;

constexpr int64_t kMsPerSecond = 1000;

// delay-seconds, extended with an optional decimal fraction. Scans the whole
// value even once saturated, so "9999...9x" is still rejected.
std::optional<int64_t> parse_delay_seconds(std::string_view text) {
  // Beyond this many whole seconds the result is capped anyway.
  constexpr int64_t kMaxWholeSeconds = kRetryAfterCapMs / kMsPerSecond;

  std::size_t pos = 0;
  int64_t seconds = 0;
  bool saturated = false;
  const std::size_t int_start = pos;
  while (pos < text.size() && is_digit(text[pos])) {
    if (!saturated) {
      seconds = seconds * 10 + (text[pos] - '0');
      if (seconds > kMaxWholeSeconds) saturated = true;
    }
    ++pos;
  }
  if (pos == int_start) return std::nullopt;

  // Round up: waiting a hair longer than asked is the safe side.
  int64_t fraction_ms = 0;
  if (!internal::read_ms_fraction(text, pos, fraction_ms)) return std::nullopt;
  if (pos != text.size()) return std::nullopt;

  if (saturated) return kRetryAfterCapMs;
  const int64_t ms = seconds * kMsPerSecond + fraction_ms;
  return ms > kRetryAfterCapMs ? kRetryAfterCapMs : ms;
}

// Inverse of days_from_civil, year only (all the RFC 850 pivot needs).
int64_t year_from_days(int64_t days) {
  days += 719468;
  const int64_t era = (days >= 0 ? days : days - 146096) / 146097;
  const int64_t doe = days - era * 146097;
  const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const int64_t mp = (5 * doy + 2) / 153;
  const int64_t month = mp < 10 ? mp + 3 : mp - 9;
  return yoe + era * 400 + (month <= 2 ? 1 : 0);
}

int64_t year_of_epoch_ms(int64_t ms) {
  int64_t days = ms / kMsPerDay;
  if (ms % kMsPerDay < 0) --days;  // floor, not truncation, before 1970
  return year_from_days(days);
}

// RFC 9110 §5.6.7: a two-digit year more than 50 years in the future is the
// most recent past year with those digits, i.e. the year lands in
// (now - 50, now + 50]. Compared by year, not by full timestamp.
int64_t expand_two_digit_year(int two_digits, int64_t now_ms) {
  // An absurd clock must not push the result out of the 4-digit-year range
  // the other forms use (and keeps the ms arithmetic far from overflow).
  constexpr int64_t kMinPivotYear = 0;
  constexpr int64_t kMaxPivotYear = 9999;
  int64_t now_year = year_of_epoch_ms(now_ms);
  if (now_year < kMinPivotYear) now_year = kMinPivotYear;
  if (now_year > kMaxPivotYear) now_year = kMaxPivotYear;

  const int64_t century = now_year - now_year % 100;
  int64_t year = century + two_digits;
  if (year > now_year + 50) {
    year -= 100;
  } else if (year <= now_year - 50) {
    year += 100;
  }
  return year;
}

constexpr std::string_view kMonths[12] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                          "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
constexpr std::string_view kShortWeekdays[7] = {"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"};
constexpr std::string_view kLongWeekdays[7] = {"Monday", "Tuesday",  "Wednesday", "Thursday",
                                               "Friday", "Saturday", "Sunday"};

// Strict left-to-right matcher; every step checks bounds before reading.
class Cursor {
 public:
  explicit Cursor(std::string_view text) : text_(text) {}

  bool literal(std::string_view expected) {
    if (text_.substr(pos_, expected.size()) != expected) return false;
    pos_ += expected.size();
    return true;
  }

  bool digits(std::size_t count, int& out) {
    if (text_.size() - pos_ < count) return false;
    int value = 0;
    for (std::size_t i = 0; i < count; ++i) {
      const char c = text_[pos_ + i];
      if (!is_digit(c)) return false;
      value = value * 10 + (c - '0');
    }
    pos_ += count;
    out = value;
    return true;
  }

  // Case-sensitive, as RFC 9110 §5.6.7 requires; returns the 1-based index.
  template <std::size_t N>
  bool one_of(const std::string_view (&names)[N], int& index) {
    for (std::size_t i = 0; i < N; ++i) {
      if (literal(names[i])) {
        index = static_cast<int>(i) + 1;
        return true;
      }
    }
    return false;
  }

  bool at_end() const { return pos_ == text_.size(); }

 private:
  std::string_view text_;
  std::size_t pos_ = 0;
};

struct DateTime {
  int64_t year = 0;
  int month = 0;
  int day = 0;
  int hour = 0;
  int minute = 0;
  int second = 0;
};

bool parse_time_of_day(Cursor& in, DateTime& dt) {
  return in.digits(2, dt.hour) && in.literal(":") && in.digits(2, dt.minute) && in.literal(":") &&
         in.digits(2, dt.second);
}

// Sun, 06 Nov 1994 08:49:37 GMT
bool parse_imf_fixdate(std::string_view text, DateTime& dt) {
  Cursor in(text);
  int weekday = 0;
  int year = 0;
  if (!(in.one_of(kShortWeekdays, weekday) && in.literal(", ") && in.digits(2, dt.day) && in.literal(" ") &&
        in.one_of(kMonths, dt.month) && in.literal(" ") && in.digits(4, year) && in.literal(" ") &&
        parse_time_of_day(in, dt) && in.literal(" GMT") && in.at_end())) {
    return false;
  }
  dt.year = year;
  return true;
}

// Sunday, 06-Nov-94 08:49:37 GMT
bool parse_rfc850_date(std::string_view text, int64_t now_ms, DateTime& dt) {
  Cursor in(text);
  int weekday = 0;
  int year = 0;
  if (!(in.one_of(kLongWeekdays, weekday) && in.literal(", ") && in.digits(2, dt.day) && in.literal("-") &&
        in.one_of(kMonths, dt.month) && in.literal("-") && in.digits(2, year) && in.literal(" ") &&
        parse_time_of_day(in, dt) && in.literal(" GMT") && in.at_end())) {
    return false;
  }
  dt.year = expand_two_digit_year(year, now_ms);
  return true;
}

// Sun Nov  6 08:49:37 1994   (day space-padded; "Nov 06" tolerated)
bool parse_asctime_date(std::string_view text, DateTime& dt) {
  Cursor in(text);
  int weekday = 0;
  int year = 0;
  if (!(in.one_of(kShortWeekdays, weekday) && in.literal(" ") && in.one_of(kMonths, dt.month) && in.literal(" "))) {
    return false;
  }
  if (!(in.digits(2, dt.day) || (in.literal(" ") && in.digits(1, dt.day)))) return false;
  if (!(in.literal(" ") && parse_time_of_day(in, dt) && in.literal(" ") && in.digits(4, year) && in.at_end())) {
    return false;
  }
  dt.year = year;
  return true;
}

bool in_range(const DateTime& dt) {
  // 60 admits a leap second; it simply lands on the next minute's :00.
  constexpr int kMaxSecond = 60;
  return dt.month >= 1 && dt.month <= 12 && dt.day >= 1 && dt.day <= days_in_month(dt.year, dt.month) &&
         dt.hour <= 23 && dt.minute <= 59 && dt.second <= kMaxSecond;
}

}  // namespace

std::optional<int64_t> parse_http_date(std::string_view text, int64_t now_ms) {
  text = trim_ows(text);
  DateTime dt;
  if (!parse_imf_fixdate(text, dt) && !parse_rfc850_date(text, now_ms, dt) && !parse_asctime_date(text, dt)) {
    return std::nullopt;
  }
  if (!in_range(dt)) return std::nullopt;
  // Years are bounded to about -50..10049 here, so none of this can overflow.
  const int64_t seconds_of_day = dt.hour * 3600 + dt.minute * 60 + dt.second;
  return days_from_civil(dt.year, dt.month, dt.day) * kMsPerDay + seconds_of_day * kMsPerSecond;
}

std::optional<int64_t> parse_retry_after(std::string_view header, int64_t now_ms) {
  const std::string_view value = trim_ows(header);
  if (value.empty()) return std::nullopt;
  if (is_digit(value.front())) return parse_delay_seconds(value);

  const std::optional<int64_t> date_ms = parse_http_date(value, now_ms);
  if (!date_ms) return std::nullopt;
  if (*date_ms <= now_ms) return int64_t{0};
  // now_ms is caller-supplied and may be extreme; the true gap is positive and
  // below 2^64, so unsigned wrap-around yields it exactly without signed overflow.
  const uint64_t delay = static_cast<uint64_t>(*date_ms) - static_cast<uint64_t>(now_ms);
  return delay > static_cast<uint64_t>(kRetryAfterCapMs) ? kRetryAfterCapMs : static_cast<int64_t>(delay);
}

}  // namespace drl
