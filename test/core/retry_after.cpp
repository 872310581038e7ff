#include "drl/retry_after.h"

#include <catch2/catch.hpp>

#include <optional>
#include <string>
#include <string_view>

using drl::kRetryAfterCapMs;
using drl::parse_http_date;
using drl::parse_retry_after;

namespace {

// 1994-11-06T08:49:37Z, the RFC 9110 example instant.
constexpr int64_t kRfcExampleMs = 784111777000;
// 2024-06-01T00:00:00Z: a fixed "now" so the RFC 850 pivot is deterministic.
constexpr int64_t kNow2024 = 1717200000000;

constexpr std::string_view kImf = "Sun, 06 Nov 1994 08:49:37 GMT";
constexpr std::string_view kRfc850 = "Sunday, 06-Nov-94 08:49:37 GMT";
constexpr std::string_view kAsctime = "Sun Nov  6 08:49:37 1994";

}  // namespace

TEST_CASE("delay-seconds are converted to milliseconds", "[retry_after]") {
  CHECK(parse_retry_after("0", kNow2024) == 0);
  CHECK(parse_retry_after("120", kNow2024) == 120000);
  CHECK(parse_retry_after(" 120 ", kNow2024) == 120000);
  CHECK(parse_retry_after("\t5\t", kNow2024) == 5000);
  CHECK(parse_retry_after(" \t 5 \t ", kNow2024) == 5000);
  CHECK(parse_retry_after("007", kNow2024) == 7000);
  CHECK(parse_retry_after("1.5", kNow2024) == 1500);
  CHECK(parse_retry_after("0.000", kNow2024) == 0);
}

TEST_CASE("delay-seconds fractions below a millisecond round up", "[retry_after]") {
  CHECK(parse_retry_after("0.0001", kNow2024) == 1);
  CHECK(parse_retry_after("1.2345", kNow2024) == 1235);
  CHECK(parse_retry_after("1.2340000", kNow2024) == 1234);
  CHECK(parse_retry_after("1.9999", kNow2024) == 2000);
  CHECK(parse_retry_after("0.00000000000000000000000000001", kNow2024) == 1);
}

TEST_CASE("huge delay-seconds saturate at the cap", "[retry_after]") {
  CHECK(parse_retry_after("1234567890123456789012345678901234567890", kNow2024) == kRetryAfterCapMs);
  CHECK(parse_retry_after("99999999999999999999.5", kNow2024) == kRetryAfterCapMs);
  // The cap is 2^50 ms; the whole-second boundary lands exactly on either side.
  const int64_t whole = kRetryAfterCapMs / 1000;  // 1125899906842 s
  CHECK(parse_retry_after(std::to_string(whole), kNow2024) == whole * 1000);
  CHECK(parse_retry_after(std::to_string(whole) + ".624", kNow2024) == kRetryAfterCapMs);
  CHECK(parse_retry_after(std::to_string(whole) + ".625", kNow2024) == kRetryAfterCapMs);
  CHECK(parse_retry_after(std::to_string(whole + 1), kNow2024) == kRetryAfterCapMs);
  // Saturation must not skip validation of the rest of the value.
  CHECK(parse_retry_after("99999999999999999999x", kNow2024) == std::nullopt);
}

TEST_CASE("malformed delay-seconds are absent", "[retry_after]") {
  for (const char* text : {"",    "   ", "\t",  "-1",   "+1",    "1e3", "0x10", "Infinity", "NaN",   ".5", "5.",
                           "1 2", "1,5", "abc", "1..5", "1.5.2", "5s",  " 5 x", "\r\n5",    "5\r\n", "١٢"}) {
    INFO("header: \"" << text << "\"");
    CHECK(parse_retry_after(text, kNow2024) == std::nullopt);
  }
  // Embedded NUL after a valid number.
  CHECK(parse_retry_after(std::string_view("5\0", 2), kNow2024) == std::nullopt);
}

TEST_CASE("the three HTTP-date forms give the same instant", "[retry_after]") {
  CHECK(parse_http_date(kImf, kNow2024) == kRfcExampleMs);
  CHECK(parse_http_date(kRfc850, kNow2024) == kRfcExampleMs);
  CHECK(parse_http_date(kAsctime, kNow2024) == kRfcExampleMs);
  // asctime with a zero-padded day, accepted leniently.
  CHECK(parse_http_date("Sun Nov 06 08:49:37 1994", kNow2024) == kRfcExampleMs);
  // Surrounding whitespace is allowed like for delay-seconds.
  CHECK(parse_http_date(" \tSun, 06 Nov 1994 08:49:37 GMT\t ", kNow2024) == kRfcExampleMs);
  CHECK(parse_http_date("Wed, 21 Oct 2015 07:28:00 GMT", kNow2024) == 1445412480000);
}

TEST_CASE("the weekday must be a real name but need not match the date", "[retry_after]") {
  CHECK(parse_http_date("Mon, 06 Nov 1994 08:49:37 GMT", kNow2024) == kRfcExampleMs);
  CHECK(parse_http_date("Wednesday, 06-Nov-94 08:49:37 GMT", kNow2024) == kRfcExampleMs);
  CHECK(parse_http_date("Fri Nov  6 08:49:37 1994", kNow2024) == kRfcExampleMs);
  // Wrong length for the form, or not a weekday at all.
  CHECK(parse_http_date("Sunday, 06 Nov 1994 08:49:37 GMT", kNow2024) == std::nullopt);
  CHECK(parse_http_date("Sun, 06-Nov-94 08:49:37 GMT", kNow2024) == std::nullopt);
  CHECK(parse_http_date("Sunday Nov  6 08:49:37 1994", kNow2024) == std::nullopt);
  CHECK(parse_http_date("Foo, 06 Nov 1994 08:49:37 GMT", kNow2024) == std::nullopt);
  CHECK(parse_http_date("sun, 06 Nov 1994 08:49:37 GMT", kNow2024) == std::nullopt);
}

TEST_CASE("an HTTP-date in the future gives the exact delay", "[retry_after]") {
  const int64_t now = kRfcExampleMs - 23000;  // 23 s before the date
  CHECK(parse_retry_after(kImf, now) == 23000);
  CHECK(parse_retry_after(kRfc850, now) == 23000);
  CHECK(parse_retry_after(kAsctime, now) == 23000);
  CHECK(parse_retry_after(kImf, kRfcExampleMs - 1) == 1);
  CHECK(parse_retry_after("  Sun, 06 Nov 1994 08:49:37 GMT  ", now) == 23000);
}

TEST_CASE("an HTTP-date now or in the past gives zero", "[retry_after]") {
  CHECK(parse_retry_after(kImf, kRfcExampleMs) == 0);
  CHECK(parse_retry_after(kImf, kRfcExampleMs + 1) == 0);
  CHECK(parse_retry_after(kImf, kNow2024) == 0);
  CHECK(parse_retry_after(kAsctime, kNow2024) == 0);
}

TEST_CASE("years before 1970 are valid dates in the past", "[retry_after]") {
  CHECK(parse_http_date("Thu, 01 Jan 1970 00:00:00 GMT", kNow2024) == 0);
  CHECK(parse_http_date("Wed, 31 Dec 1969 23:59:59 GMT", kNow2024) == -1000);
  CHECK(parse_http_date("Mon, 01 Jan 0001 00:00:00 GMT", kNow2024) == -62135596800000);
  CHECK(parse_retry_after("Wed, 31 Dec 1969 23:59:59 GMT", kNow2024) == 0);
  CHECK(parse_retry_after("Wed, 31 Dec 1969 23:59:59 GMT", 0) == 0);
}

TEST_CASE("a far-future date or extreme clock saturates without overflow", "[retry_after]") {
  CHECK(parse_retry_after("Fri, 31 Dec 9999 23:59:59 GMT", kNow2024) == 253402300799000 - kNow2024);
  CHECK(parse_retry_after("Fri, 31 Dec 9999 23:59:59 GMT", INT64_MIN) == kRetryAfterCapMs);
  CHECK(parse_retry_after("Fri, 31 Dec 9999 23:59:59 GMT", INT64_MAX) == 0);
  CHECK(parse_retry_after("Friday, 31-Dec-99 23:59:59 GMT", INT64_MIN) == kRetryAfterCapMs);
  CHECK(parse_retry_after("Friday, 31-Dec-99 23:59:59 GMT", INT64_MAX) == 0);
}

TEST_CASE("RFC 850 two-digit years pivot 50 years ahead of now", "[retry_after]") {
  // now = 2024: up to 2074 stays in this century, 2075 and later fold back.
  CHECK(parse_http_date("Tuesday, 01-Jan-74 00:00:00 GMT", kNow2024) == 3281990400000);
  CHECK(parse_http_date("Wednesday, 01-Jan-75 00:00:00 GMT", kNow2024) == 157766400000);
  CHECK(parse_http_date("Sunday, 06-Nov-94 08:49:37 GMT", kNow2024) == kRfcExampleMs);
  // now = 2099: "00" is 2100, one year ahead, not 2000.
  constexpr int64_t kNow2099 = 4083955200000;
  CHECK(parse_http_date("Friday, 01-Jan-00 00:00:00 GMT", kNow2099) == 4102444800000);
  // now = 1994 itself: "94" is this year.
  CHECK(parse_http_date(kRfc850, kRfcExampleMs) == kRfcExampleMs);
  // A clock before 1970 still resolves by the same window: now = 1969.
  CHECK(parse_http_date("Thursday, 01-Jan-70 00:00:00 GMT", -1000) == 0);
}

TEST_CASE("calendar ranges are validated", "[retry_after]") {
  CHECK(parse_http_date("Thu, 30 Feb 1995 00:00:00 GMT", kNow2024) == std::nullopt);
  CHECK(parse_http_date("Wed, 29 Feb 1995 00:00:00 GMT", kNow2024) == std::nullopt);
  CHECK(parse_http_date("Thu, 29 Feb 1996 00:00:00 GMT", kNow2024) == 825552000000);
  CHECK(parse_http_date("Thu, 31 Apr 1996 00:00:00 GMT", kNow2024) == std::nullopt);
  CHECK(parse_http_date("Sun, 00 Nov 1994 08:49:37 GMT", kNow2024) == std::nullopt);
  CHECK(parse_http_date("Sun, 32 Dec 1994 08:49:37 GMT", kNow2024) == std::nullopt);
  CHECK(parse_http_date("Sun, 06 Nov 1994 24:00:00 GMT", kNow2024) == std::nullopt);
  CHECK(parse_http_date("Sun, 06 Nov 1994 23:60:00 GMT", kNow2024) == std::nullopt);
  CHECK(parse_http_date("Sun, 06 Nov 1994 23:59:61 GMT", kNow2024) == std::nullopt);
  CHECK(parse_http_date("Sunday, 30-Feb-95 00:00:00 GMT", kNow2024) == std::nullopt);
  CHECK(parse_http_date("Thu Feb 30 00:00:00 1995", kNow2024) == std::nullopt);
  CHECK(parse_http_date("Sun Nov  0 08:49:37 1994", kNow2024) == std::nullopt);
}

TEST_CASE("a leap second counts as the next minute's first second", "[retry_after]") {
  CHECK(parse_http_date("Sun, 06 Nov 1994 08:49:60 GMT", kNow2024) == 784111800000);
  CHECK(parse_http_date("Sun, 06 Nov 1994 08:50:00 GMT", kNow2024) == 784111800000);
}

TEST_CASE("leap years follow the Gregorian century rule", "[retry_after]") {
  CHECK(parse_http_date("Tue, 29 Feb 2000 00:00:00 GMT", kNow2024) == 951782400000);
  CHECK(parse_http_date("Mon, 29 Feb 2100 00:00:00 GMT", kNow2024) == std::nullopt);
  CHECK(parse_http_date("Mon, 01 Mar 2100 00:00:00 GMT", kNow2024) == 4107542400000);
  CHECK(parse_http_date("Tue Feb 29 00:00:00 2000", kNow2024) == 951782400000);
}

TEST_CASE("month names and GMT are exact and case-sensitive", "[retry_after]") {
  CHECK(parse_http_date("Sun, 06 nov 1994 08:49:37 GMT", kNow2024) == std::nullopt);
  CHECK(parse_http_date("Sun, 06 NOV 1994 08:49:37 GMT", kNow2024) == std::nullopt);
  CHECK(parse_http_date("Sun, 06 November 1994 08:49:37 GMT", kNow2024) == std::nullopt);
  CHECK(parse_http_date("Sun Nov  6 08:49:37 1994 GMT", kNow2024) == std::nullopt);
  CHECK(parse_http_date("Sun, 06 Nov 1994 08:49:37", kNow2024) == std::nullopt);
  CHECK(parse_http_date("Sun, 06 Nov 1994 08:49:37 UTC", kNow2024) == std::nullopt);
  CHECK(parse_http_date("Sun, 06 Nov 1994 08:49:37 gmt", kNow2024) == std::nullopt);
  CHECK(parse_http_date("Sunday, 06-Nov-94 08:49:37 UTC", kNow2024) == std::nullopt);
  CHECK(parse_retry_after("Sun, 06 Nov 1994 08:49:37 UTC", kNow2024) == std::nullopt);
}

TEST_CASE("the date layout is strict", "[retry_after]") {
  for (const char* text : {
           "Sun,  06 Nov 1994 08:49:37 GMT",    // double space
           "Sun, 6 Nov 1994 08:49:37 GMT",      // one-digit day
           "Sun, 06 Nov 94 08:49:37 GMT",       // two-digit year in IMF
           "Sun, 06 Nov 1994 8:49:37 GMT",      // one-digit hour
           "Sun, 06 Nov 1994 08:49 GMT",        // no seconds
           "Sun, 06 Nov 1994 08:49:37 GMTX",    // trailing junk
           "Sun,06 Nov 1994 08:49:37 GMT",      // no space after comma
           "Sunday, 06-Nov-1994 08:49:37 GMT",  // four-digit year in RFC 850
           "Sun Nov 6 08:49:37 1994",           // asctime day not padded
           "Sun Nov   6 08:49:37 1994",         // asctime day over-padded
           "Sun Nov  6 08:49:37 94",            // two-digit year in asctime
           "Sun, 06 Nov 1994 08:49:37 GMT, Mon, 07 Nov 1994 08:49:37 GMT",
       }) {
    INFO("date: \"" << text << "\"");
    CHECK(parse_http_date(text, kNow2024) == std::nullopt);
    CHECK(parse_retry_after(text, kNow2024) == std::nullopt);
  }
}

TEST_CASE("every strict prefix of a valid date is absent", "[retry_after]") {
  for (std::string_view full : {kImf, kRfc850, kAsctime}) {
    REQUIRE(parse_http_date(full, kNow2024).has_value());
    for (std::size_t len = 0; len < full.size(); ++len) {
      const std::string_view prefix = full.substr(0, len);
      INFO("prefix: \"" << prefix << "\"");
      CHECK(parse_http_date(prefix, kNow2024) == std::nullopt);
      CHECK(parse_retry_after(prefix, kNow2024) == std::nullopt);
    }
  }
}

TEST_CASE("embedded NULs and non-ASCII bytes are rejected", "[retry_after]") {
  const std::string with_nul("Sun, 06 Nov 1994 08:49:37 GMT\0", 30);
  CHECK(parse_http_date(with_nul, kNow2024) == std::nullopt);
  CHECK(parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT\xc2\xa0", kNow2024) == std::nullopt);
  CHECK(parse_retry_after("\xff\xfe", kNow2024) == std::nullopt);
}
