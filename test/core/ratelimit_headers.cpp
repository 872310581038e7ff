#include "drl/ratelimit_headers.h"

#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

using drl::HeaderConvention;
using drl::HeaderField;
using drl::is_rate_limit_header;
using drl::Observation;
using drl::parse_rate_limit_headers;

namespace {

// 2024-06-01T12:00:00Z, a fixed "now".
constexpr int64_t kNow = 1717243200000;
constexpr std::optional<int64_t> kAbsent = std::nullopt;

using Headers = std::vector<HeaderField>;

struct Expected {
  std::string dimension;
  std::optional<int64_t> limit;
  std::optional<int64_t> remaining;
  std::optional<int64_t> reset_at_ms;
  std::optional<int64_t> window_ms;
  HeaderConvention convention;
};

std::string show(const std::optional<int64_t>& v) { return v ? std::to_string(*v) : "-"; }

std::string show(const std::string& dimension, const std::optional<int64_t>& limit,
                 const std::optional<int64_t>& remaining, const std::optional<int64_t>& reset,
                 const std::optional<int64_t>& window, HeaderConvention c) {
  std::ostringstream out;
  out << "{" << drl::header_convention_name(c) << " " << dimension << " limit=" << show(limit)
      << " remaining=" << show(remaining) << " reset=" << show(reset) << " window=" << show(window) << "}";
  return out.str();
}

std::string show(const std::vector<Observation>& all) {
  std::string out;
  for (const Observation& o : all) {
    out += show(o.dimension, o.limit, o.remaining, o.reset_at_ms, o.window_ms, o.convention);
  }
  return out.empty() ? "(none)" : out;
}

std::string show(const std::vector<Expected>& all) {
  std::string out;
  for (const Expected& e : all) {
    out += show(e.dimension, e.limit, e.remaining, e.reset_at_ms, e.window_ms, e.convention);
  }
  return out.empty() ? "(none)" : out;
}

// Exactly these observations, in this order, every field compared.
void check_parse(const Headers& headers, HeaderConvention convention, const std::vector<Expected>& expected,
                 int64_t now = kNow) {
  const std::vector<Observation> got = parse_rate_limit_headers(headers, convention, now);
  CHECK(show(got) == show(expected));
}

Expected github(std::optional<int64_t> limit, std::optional<int64_t> remaining, std::optional<int64_t> reset) {
  return {"default", limit, remaining, reset, kAbsent, HeaderConvention::GitHub};
}

}  // namespace

// ---------------------------------------------------------------- names

TEST_CASE("convention names round-trip and nothing else is one", "[ratelimit_headers]") {
  for (HeaderConvention c : {HeaderConvention::Auto, HeaderConvention::GitHub, HeaderConvention::OpenAI,
                             HeaderConvention::Anthropic, HeaderConvention::Ietf, HeaderConvention::IetfDraft}) {
    CHECK(drl::header_convention(drl::header_convention_name(c)) == c);
  }
  CHECK(drl::header_convention_name(HeaderConvention::IetfDraft) == "ietf-draft");
  for (const char* name : {"", "Auto", "GitHub", "OPENAI", "ietf_draft", "ietf-draft ", "x"}) {
    INFO(name);
    CHECK(drl::header_convention(name) == std::nullopt);
  }
}

TEST_CASE("is_rate_limit_header: each prefix and name, and near misses", "[ratelimit_headers]") {
  for (const char* name :
       {"x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset", "x-ratelimit-used", "x-ratelimit-resource",
        "x-ratelimit-limit-requests", "x-ratelimit-reset-tokens", "anthropic-ratelimit-requests-limit",
        "anthropic-ratelimit-output-tokens-reset", "ratelimit", "ratelimit-policy", "ratelimit-limit",
        "ratelimit-remaining", "ratelimit-reset", "X-RateLimit-Remaining", "RateLimit-Policy"}) {
    INFO(name);
    CHECK(is_rate_limit_header(name));
  }
  for (const char* name : {"",
                           "x-ratelimit",
                           "x-ratelimit-",
                           "x-ratelimitx",
                           "x-ratelimitx-limit",
                           "x-rate-limit-limit",
                           "anthropic-ratelimit",
                           "anthropic-ratelimit-",
                           "anthropic-ratelimitx",
                           "ratelimiter",
                           "ratelimit-",
                           "ratelimit-used",
                           "ratelimit-policies",
                           "ratelimit-limits",
                           "ratelimitx",
                           "retry-after",
                           "content-type",
                           " ratelimit",
                           "ratelimit ",
                           "xx-ratelimit-limit"}) {
    INFO(name);
    CHECK_FALSE(is_rate_limit_header(name));
  }
}

// ---------------------------------------------------------------- github

TEST_CASE("github: GitHub's own response", "[ratelimit_headers]") {
  check_parse({{"x-ratelimit-limit", "5000"},
               {"x-ratelimit-remaining", "4999"},
               {"x-ratelimit-used", "1"},
               {"x-ratelimit-reset", "1372700873"},
               {"x-ratelimit-resource", "core"}},
              HeaderConvention::GitHub, {github(5000, 4999, 1372700873000)});
}

TEST_CASE("github: the reset tells epoch ms, epoch seconds and delta seconds apart", "[ratelimit_headers]") {
  struct Row {
    const char* value;
    std::optional<int64_t> reset_at_ms;
  };
  for (const Row& row : std::vector<Row>{
           {"0", kNow},
           {"30", kNow + 30'000},
           {"1.5", kNow + 1'500},
           {"0.0001", kNow + 1},  // below a millisecond rounds up
           {" 30\t", kNow + 30'000},
           {"999999999", kNow + 999'999'999'000},  // the last delta: 31.7 years
           {"1000000000", 1'000'000'000'000},      // the first epoch second (2001-09-09)
           {"1372700873", 1'372'700'873'000},
           {"1372700873.123", 1'372'700'873'123},
           {"1372700873.1231", 1'372'700'873'124},
           {"999999999999", 999'999'999'999'000},  // the last epoch second
           {"1000000000000", 1'000'000'000'000},   // the first epoch ms
           {"1717243230000", 1'717'243'230'000},
           {"1000000000000000", 1'000'000'000'000'000},  // 1e15 exactly
           {"1000000000000001", kAbsent},
           {"99999999999999999999999999999", kAbsent},
           {"-1", kAbsent},
           {"+30", kAbsent},
           {"1e3", kAbsent},
           {"0x10", kAbsent},
           {"NaN", kAbsent},
           {"Infinity", kAbsent},
           {"30s", kAbsent},
           {"30.", kAbsent},
           {".5", kAbsent},
           {"Sat, 01 Jun 2024 12:00:30 GMT", kAbsent},
           {"30, 30", kAbsent},
           {"", kAbsent},
       }) {
    check_parse({{"x-ratelimit-remaining", "1"}, {"x-ratelimit-reset", row.value}}, HeaderConvention::GitHub,
                {github(kAbsent, 1, row.reset_at_ms)});
  }
}

TEST_CASE("github: a delta reset saturates at the ends of the clock", "[ratelimit_headers]") {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  const Headers headers = {{"x-ratelimit-remaining", "1"}, {"x-ratelimit-reset", "30"}};
  check_parse(headers, HeaderConvention::GitHub, {github(kAbsent, 1, kMax)}, kMax);
  check_parse(headers, HeaderConvention::GitHub, {github(kAbsent, 1, kMax)}, kMax - 1);
  check_parse(headers, HeaderConvention::GitHub, {github(kAbsent, 1, kMin + 30'000)}, kMin);
  // An epoch does not depend on now at all.
  check_parse({{"x-ratelimit-remaining", "1"}, {"x-ratelimit-reset", "1372700873"}}, HeaderConvention::GitHub,
              {github(kAbsent, 1, 1372700873000)}, kMin);
}

TEST_CASE("limits and remainings: digits only, 0..1e15", "[ratelimit_headers]") {
  struct Row {
    std::string value;
    std::optional<int64_t> count;
  };
  for (const Row& row : std::vector<Row>{
           {"0", 0},
           {"1", 1},
           {"007", 7},
           {" 5\t", 5},
           {"999999999999999", 999'999'999'999'999},
           {"1000000000000000", 1'000'000'000'000'000},
           {"0000000000000000000000001000000000000000", 1'000'000'000'000'000},
           {"1000000000000001", kAbsent},
           {"9223372036854775807", kAbsent},
           {"9223372036854775808", kAbsent},
           {"18446744073709551616", kAbsent},
           {std::string(400, '9'), kAbsent},
           {"", kAbsent},
           {" ", kAbsent},
           {"-1", kAbsent},
           {"-0", kAbsent},
           {"+5", kAbsent},
           {"NaN", kAbsent},
           {"nan", kAbsent},
           {"Infinity", kAbsent},
           {"inf", kAbsent},
           {"1e5", kAbsent},
           {"0x10", kAbsent},
           {"1.5", kAbsent},
           {"1.0", kAbsent},
           {"5,5", kAbsent},
           {"5, 3", kAbsent},
           {"1 2", kAbsent},
           {"5;w=60", kAbsent},
           {"five", kAbsent},
           {"5\r", kAbsent},
           {"\r\n5", kAbsent},
           {"5\n", kAbsent},
           {std::string("5\0", 2), kAbsent},
           {"\x01"
            "5",
            kAbsent},
           {"5\x7f", kAbsent},
           {"\xd9\xa5", kAbsent},      // ARABIC-INDIC DIGIT FIVE
           {"\xef\xbc\x95", kAbsent},  // FULLWIDTH DIGIT FIVE
       }) {
    INFO("value: \"" << row.value << "\"");
    // Beside a valid limit so the observation survives whatever the remaining does.
    check_parse({{"x-ratelimit-limit", "60"}, {"x-ratelimit-remaining", row.value}}, HeaderConvention::GitHub,
                {github(60, row.count, kAbsent)});
    // Alone it is the observation's only number: absent drops the observation.
    check_parse({{"x-ratelimit-limit", row.value}}, HeaderConvention::GitHub,
                row.count ? std::vector<Expected>{github(row.count, kAbsent, kAbsent)} : std::vector<Expected>{});
  }
}

TEST_CASE("an observation needs a limit or a remaining", "[ratelimit_headers]") {
  check_parse({{"x-ratelimit-reset", "30"}}, HeaderConvention::GitHub, {});
  check_parse({{"x-ratelimit-used", "1"}, {"x-ratelimit-resource", "core"}}, HeaderConvention::GitHub, {});
  check_parse({}, HeaderConvention::Auto, {});
  check_parse({{"x-ratelimit-remaining", "0"}}, HeaderConvention::GitHub, {github(kAbsent, 0, kAbsent)});
}

// ---------------------------------------------------------------- openai

TEST_CASE("openai: requests and tokens with duration resets", "[ratelimit_headers]") {
  check_parse({{"x-ratelimit-limit-requests", "60"},
               {"x-ratelimit-limit-tokens", "150000"},
               {"x-ratelimit-remaining-requests", "59"},
               {"x-ratelimit-remaining-tokens", "149984"},
               {"x-ratelimit-reset-requests", "1s"},
               {"x-ratelimit-reset-tokens", "6m0s"}},
              HeaderConvention::OpenAI,
              {{"requests", 60, 59, kNow + 1'000, kAbsent, HeaderConvention::OpenAI},
               {"tokens", 150000, 149984, kNow + 360'000, kAbsent, HeaderConvention::OpenAI}});
}

TEST_CASE("openai: durations", "[ratelimit_headers]") {
  struct Row {
    const char* value;
    std::optional<int64_t> ms;
  };
  for (const Row& row : std::vector<Row>{
           {"1s", 1'000},
           {"6m0s", 360'000},
           {"20ms", 20},
           {"1h30m", 5'400'000},
           {"0.5s", 500},
           {"1h2m3.5s", 3'723'500},
           {"2m59.56s", 179'560},
           {"7.66s", 7'660},
           {"2d", 172'800'000},
           {"0s", 0},
           {"0", 0},
           {" 1s\t", 1'000},
           {"1.5ms", 2},  // rounds up
           {"500us", 1},
           {"500\xC2\xB5s", 1},  // µ (U+00B5), as Go prints it
           {"500\xCE\xBCs", 1},  // μ (U+03BC)
           {"999ns", 1},
           {"1000000ns", 1},
           {"1000001ns", 2},
           {"59.9999999s", 60'000},
           {"1s1s", 2'000},  // Go accepts repeated units
           {"11574074d", 999'999'993'600'000},
           {"1000000000000000ms", 1'000'000'000'000'000},  // 1e15 ms exactly
           {"1000000000000001ms", kAbsent},
           {"11574075d", kAbsent},
           {"16666666667m", kAbsent},
           {"9999999999999999999h", kAbsent},
           {"", kAbsent},
           {"1", kAbsent},  // a bare number has no unit
           {"30", kAbsent},
           {"s", kAbsent},
           {"-1s", kAbsent},
           {"+1s", kAbsent},
           {"1x", kAbsent},
           {"1S", kAbsent},
           {"1H", kAbsent},
           {"1 s", kAbsent},
           {"1s 2s", kAbsent},
           {"1.s", kAbsent},
           {".5s", kAbsent},
           {"1e3s", kAbsent},
           {"0x10s", kAbsent},
           {"NaN", kAbsent},
           {"NaNs", kAbsent},
           {"Infinity", kAbsent},
           {"infs", kAbsent},
           {"1ss", kAbsent},
           {"1m-1s", kAbsent},
           {"1s,2s", kAbsent},
           {"1s\r", kAbsent},
           {"2024-06-01T12:00:30Z", kAbsent},
       }) {
    const std::optional<int64_t> reset = row.ms ? std::optional<int64_t>(kNow + *row.ms) : std::nullopt;
    INFO("reset: \"" << row.value << "\"");
    check_parse({{"x-ratelimit-remaining-tokens", "10"}, {"x-ratelimit-reset-tokens", row.value}},
                HeaderConvention::OpenAI, {{"tokens", kAbsent, 10, reset, kAbsent, HeaderConvention::OpenAI}});
  }
}

TEST_CASE("openai: a partial set gives what it states", "[ratelimit_headers]") {
  check_parse({{"x-ratelimit-remaining-tokens", "0"}}, HeaderConvention::OpenAI,
              {{"tokens", kAbsent, 0, kAbsent, kAbsent, HeaderConvention::OpenAI}});
  check_parse({{"x-ratelimit-reset-requests", "1s"}, {"x-ratelimit-limit-requests", "x"}}, HeaderConvention::OpenAI,
              {});
  // GitHub's unsuffixed names are not OpenAI's.
  check_parse({{"x-ratelimit-limit", "60"}, {"x-ratelimit-remaining", "1"}}, HeaderConvention::OpenAI, {});
}

// ---------------------------------------------------------------- anthropic

TEST_CASE("anthropic: all four dimensions", "[ratelimit_headers]") {
  check_parse({{"anthropic-ratelimit-requests-limit", "50"},
               {"anthropic-ratelimit-requests-remaining", "49"},
               {"anthropic-ratelimit-requests-reset", "2024-06-01T12:00:01Z"},
               {"anthropic-ratelimit-tokens-limit", "90000"},
               {"anthropic-ratelimit-tokens-remaining", "89000"},
               {"anthropic-ratelimit-tokens-reset", "2024-06-01T12:00:30Z"},
               {"anthropic-ratelimit-input-tokens-limit", "80000"},
               {"anthropic-ratelimit-input-tokens-remaining", "79500"},
               {"anthropic-ratelimit-input-tokens-reset", "2024-06-01T12:00:30Z"},
               {"anthropic-ratelimit-output-tokens-limit", "16000"},
               {"anthropic-ratelimit-output-tokens-remaining", "15500"},
               {"anthropic-ratelimit-output-tokens-reset", "2024-06-01T12:00:30Z"},
               {"retry-after", "30"}},
              HeaderConvention::Anthropic,
              {{"requests", 50, 49, kNow + 1'000, kAbsent, HeaderConvention::Anthropic},
               {"tokens", 90000, 89000, kNow + 30'000, kAbsent, HeaderConvention::Anthropic},
               {"input-tokens", 80000, 79500, kNow + 30'000, kAbsent, HeaderConvention::Anthropic},
               {"output-tokens", 16000, 15500, kNow + 30'000, kAbsent, HeaderConvention::Anthropic}});
}

TEST_CASE("anthropic: RFC 3339 resets", "[ratelimit_headers]") {
  constexpr int64_t k1200_30 = kNow + 30'000;  // 2024-06-01T12:00:30Z
  struct Row {
    const char* value;
    std::optional<int64_t> reset_at_ms;
  };
  for (const Row& row : std::vector<Row>{
           {"2024-06-01T12:00:30Z", k1200_30},
           {"2024-06-01T14:00:30+02:00", k1200_30},
           {"2024-06-01T06:30:30-05:30", k1200_30},
           {"2024-06-01T12:00:30+00:00", k1200_30},
           {"2024-06-01T12:00:30-00:00", k1200_30},
           {"2024-06-02T11:59:30+23:59", k1200_30},
           {"2024-06-01T12:00:30.5Z", k1200_30 + 500},
           {"2024-06-01T14:00:30.123+02:00", k1200_30 + 123},
           {"2024-06-01T12:00:30.123456789Z", k1200_30 + 124},  // rounds up
           {"2024-06-01T12:00:30.000Z", k1200_30},
           {"2024-06-01T12:00:29.9999Z", k1200_30},
           {"2024-06-01t12:00:30z", k1200_30},
           {"2024-06-01 12:00:30Z", k1200_30},
           {" 2024-06-01T12:00:30Z\t", k1200_30},
           {"1970-01-01T00:00:00Z", 0},
           {"1969-12-31T23:59:59Z", -1'000},             // in the past: kept, the caller decides
           {"2016-12-31T23:59:60Z", 1'483'228'800'000},  // leap second
           {"2024-02-29T00:00:00Z", 1'709'164'800'000},
           {"9999-12-31T23:59:59Z", 253'402'300'799'000},
           {"2024-06-01T12:00:30", kAbsent},  // no offset
           {"2024-06-01", kAbsent},
           {"2024-06-01T12:00Z", kAbsent},
           {"2024-6-01T12:00:30Z", kAbsent},
           {"24-06-01T12:00:30Z", kAbsent},
           {"+2024-06-01T12:00:30Z", kAbsent},
           {"2024-13-01T00:00:00Z", kAbsent},
           {"2024-00-01T00:00:00Z", kAbsent},
           {"2023-02-29T00:00:00Z", kAbsent},
           {"2024-06-31T00:00:00Z", kAbsent},
           {"2024-06-00T00:00:00Z", kAbsent},
           {"2024-06-01T24:00:00Z", kAbsent},
           {"2024-06-01T12:60:00Z", kAbsent},
           {"2024-06-01T12:00:61Z", kAbsent},
           {"2024-06-01T12:00:30+24:00", kAbsent},
           {"2024-06-01T12:00:30+02:60", kAbsent},
           {"2024-06-01T12:00:30+0200", kAbsent},
           {"2024-06-01T12:00:30+02", kAbsent},
           {"2024-06-01T12:00:30.Z", kAbsent},
           {"2024-06-01T12:00:30ZZ", kAbsent},
           {"2024-06-01T12:00:30Z ", k1200_30},  // trailing OWS is trimmed
           {"2024-06-01T12:00:30Z\r", kAbsent},
           {"2024-06-01X12:00:30Z", kAbsent},
           {"1717243230", kAbsent},
           {"30s", kAbsent},
           {"Sat, 01 Jun 2024 12:00:30 GMT", kAbsent},
           {"", kAbsent},
       }) {
    INFO("reset: \"" << row.value << "\"");
    check_parse({{"anthropic-ratelimit-tokens-remaining", "5"}, {"anthropic-ratelimit-tokens-reset", row.value}},
                HeaderConvention::Anthropic,
                {{"tokens", kAbsent, 5, row.reset_at_ms, kAbsent, HeaderConvention::Anthropic}});
  }
}

// ---------------------------------------------------------------- ietf

TEST_CASE("ietf: one policy", "[ratelimit_headers]") {
  check_parse({{"RateLimit-Policy", "\"default\";q=100;w=60"}, {"RateLimit", "\"default\";r=50;t=30"}},
              HeaderConvention::Ietf, {{"default", 100, 50, kNow + 30'000, 60'000, HeaderConvention::Ietf}});
}

TEST_CASE("ietf: two policies, the second keeps its name", "[ratelimit_headers]") {
  const Expected kDefault{"default", 100, 50, kNow + 30'000, 60'000, HeaderConvention::Ietf};
  const Expected kDaily{"daily", 1000, 900, kNow + 3'600'000, 86'400'000, HeaderConvention::Ietf};
  check_parse({{"RateLimit-Policy", "\"default\";q=100;w=60, \"daily\";q=1000;w=86400"},
               {"RateLimit", "\"default\";r=50;t=30, \"daily\";r=900;t=3600"}},
              HeaderConvention::Ietf, {kDefault, kDaily});
  // RateLimit's order does not matter; policies keep RateLimit-Policy's order.
  check_parse({{"RateLimit-Policy", "\"default\";q=100;w=60,\"daily\";q=1000;w=86400"},
               {"RateLimit", "\"daily\";r=900;t=3600,\t\"default\";r=50;t=30"}},
              HeaderConvention::Ietf, {kDefault, kDaily});
  // The first policy is "default" unless another one is called that.
  check_parse({{"RateLimit-Policy", "\"minute\";q=100;w=60, \"daily\";q=1000;w=86400"},
               {"RateLimit", "\"minute\";r=50;t=30, \"daily\";r=900;t=3600"}},
              HeaderConvention::Ietf, {kDefault, kDaily});
  check_parse({{"RateLimit-Policy", "\"daily\";q=1000;w=86400, \"default\";q=100;w=60"},
               {"RateLimit", "\"default\";r=50;t=30, \"daily\";r=900;t=3600"}},
              HeaderConvention::Ietf, {kDaily, kDefault});
}

TEST_CASE("ietf: either field alone", "[ratelimit_headers]") {
  check_parse({{"RateLimit", "\"default\";r=0;t=30"}}, HeaderConvention::Ietf,
              {{"default", kAbsent, 0, kNow + 30'000, kAbsent, HeaderConvention::Ietf}});
  check_parse({{"RateLimit-Policy", "\"default\";q=100;w=60"}}, HeaderConvention::Ietf,
              {{"default", 100, kAbsent, kAbsent, 60'000, HeaderConvention::Ietf}});
  // A policy without q, and no RateLimit: nothing to learn.
  check_parse({{"RateLimit-Policy", "\"default\";w=60"}}, HeaderConvention::Ietf, {});
  // A RateLimit item whose policy is not listed is still a policy.
  check_parse({{"RateLimit-Policy", "\"default\";q=100;w=60"}, {"RateLimit", "\"burst\";r=3;t=1"}},
              HeaderConvention::Ietf,
              {{"default", 100, kAbsent, kAbsent, 60'000, HeaderConvention::Ietf},
               {"burst", kAbsent, 3, kNow + 1'000, kAbsent, HeaderConvention::Ietf}});
}

TEST_CASE("ietf: structured-field details", "[ratelimit_headers]") {
  const auto ietf = [](std::optional<int64_t> limit, std::optional<int64_t> remaining, std::optional<int64_t> reset,
                       std::optional<int64_t> window) {
    return Expected{"default", limit, remaining, reset, window, HeaderConvention::Ietf};
  };
  struct Row {
    const char* policy;
    const char* ratelimit;
    std::vector<Expected> expected;
  };
  for (const Row& row : std::vector<Row>{
           // Tokens for names (older servers), parameters in any order, with extras.
           {"default;q=100;w=60", "default;r=50;t=30", {ietf(100, 50, kNow + 30'000, 60'000)}},
           {"\"default\";w=60;qu=\"requests\";q=100;pk=:cHsdsRa894==:",
            "\"default\";t=30;pk=:cHsdsRa894==:;r=50",
            {ietf(100, 50, kNow + 30'000, 60'000)}},
           {"\"default\"; q=100; w=60", "\"default\"; r=50; t=30", {ietf(100, 50, kNow + 30'000, 60'000)}},
           // A repeated parameter: the last one counts (RFC 8941).
           {"\"default\";q=1;q=100", "\"default\";r=9;r=50", {ietf(100, 50, kAbsent, kAbsent)}},
           // A repeated policy: the first item counts.
           {"\"default\";q=100, \"default\";q=5",
            "\"default\";r=50, \"default\";r=0",
            {ietf(100, 50, kAbsent, kAbsent)}},
           // Escapes in a name.
           {"\"a\\\"b\";q=1, \"x\\\\y\";q=2",
            "",
            {ietf(1, kAbsent, kAbsent, kAbsent),
             Expected{"x\\y", 2, kAbsent, kAbsent, kAbsent, HeaderConvention::Ietf}}},
           // Boundaries: 0, and the largest RFC 8941 integer (15 digits).
           {"\"default\";q=0;w=0", "\"default\";r=0;t=0", {ietf(0, 0, kNow, kAbsent)}},
           {"\"default\";q=999999999999999;w=999999999999999",
            "\"default\";r=999999999999999;t=999999999999999",
            {ietf(999'999'999'999'999, 999'999'999'999'999, kNow + 999'999'999'999'999'000, 999'999'999'999'999'000)}},
           // Wrong types and signs leave the field absent, not the rest.
           {"\"default\";q=-1;w=-60", "\"default\";r=-5;t=-30", {}},
           {"\"default\";q=100;w=60", "\"default\";r=5.5;t=\"30\"", {ietf(100, kAbsent, kAbsent, 60'000)}},
           {"\"default\";q=?1;w=60.0", "\"default\";r=?0;t=abc", {}},
           {"\"default\";q=100", "\"default\";r", {ietf(100, kAbsent, kAbsent, kAbsent)}},
           // Items that are not names are skipped; an inner list is valid but ignored.
           {"100;w=60, \"default\";q=100", "(1 2);r=5, \"default\";r=50", {ietf(100, 50, kAbsent, kAbsent)}},
           {"?1;q=3, :AQID:;q=4, 1.5;q=5", "", {}},
           // An empty name can be "default" (first) but a later one is not reported.
           {"\"\";q=1, \"\";q=2", "", {ietf(1, kAbsent, kAbsent, kAbsent)}},
           {"\"default\";q=1, \"\";q=2", "", {ietf(1, kAbsent, kAbsent, kAbsent)}},
       }) {
    INFO("RateLimit-Policy: " << row.policy << "\nRateLimit: " << row.ratelimit);
    check_parse({{"ratelimit-policy", row.policy}, {"ratelimit", row.ratelimit}}, HeaderConvention::Ietf, row.expected);
  }
}

TEST_CASE("ietf: a malformed field is ignored whole", "[ratelimit_headers]") {
  const Expected kPolicyOnly{"default", 100, kAbsent, kAbsent, 60'000, HeaderConvention::Ietf};
  for (const char* ratelimit : {
           "\"default\";r=50;t=30,",          // trailing comma
           ",\"default\";r=50",               // leading comma
           "\"default\";r=50;;t=30",          // empty parameter
           "\"default;r=50;t=30",             // unterminated string
           "\"default\";r=1e5",               // exponent
           "\"default\";r=0x10",              // hex
           "\"default\";r=+5",                // sign
           "\"default\";r=NaN",               // a token, then fine... but see below
           "\"default\";r=1000000000000000",  // 16 digits
           "\"default\";R=50",                // keys are lower case
           "\"default\";r=50 t=30",           // missing separator
           "\"default\"\x01;r=50",            // control character
           "\"def\x01ult\";r=50",
           "\"d\xc3\xa9\";r=50",  // non-ASCII in a string
           "\"default\";r=50;t=30\r",
           "\"default\" \"x\"",
           "\"a\\x\";r=5",  // bad escape
           "(1 2;r=5",      // unterminated inner list
           "?2;r=5",
           ":AQID;r=5",
       }) {
    INFO("RateLimit: " << ratelimit);
    const std::string_view value = ratelimit;
    // "r=NaN" parses (NaN is a token) but is not an Integer: remaining stays absent either way.
    check_parse({{"RateLimit-Policy", "\"default\";q=100;w=60"}, {"RateLimit", value}}, HeaderConvention::Ietf,
                {kPolicyOnly});
  }
}

TEST_CASE("ietf: at most eight policies", "[ratelimit_headers]") {
  std::string policy;
  for (int i = 0; i < 12; ++i) {
    policy += (i ? ", \"p" : "\"p") + std::to_string(i) + "\";q=" + std::to_string(i + 1);
  }
  std::vector<Expected> expected = {{"default", 1, kAbsent, kAbsent, kAbsent, HeaderConvention::Ietf}};
  for (int i = 1; i < 8; ++i) {
    expected.push_back({"p" + std::to_string(i), i + 1, kAbsent, kAbsent, kAbsent, HeaderConvention::Ietf});
  }
  check_parse({{"RateLimit-Policy", policy}}, HeaderConvention::Ietf, expected);
}

// ---------------------------------------------------------------- ietf-draft

TEST_CASE("ietf-draft: limit, remaining, reset", "[ratelimit_headers]") {
  const auto draft = [](std::optional<int64_t> limit, std::optional<int64_t> remaining, std::optional<int64_t> reset,
                        std::optional<int64_t> window) {
    return Expected{"default", limit, remaining, reset, window, HeaderConvention::IetfDraft};
  };
  check_parse({{"RateLimit-Limit", "100"}, {"RateLimit-Remaining", "0"}, {"RateLimit-Reset", "30"}},
              HeaderConvention::IetfDraft, {draft(100, 0, kNow + 30'000, kAbsent)});
  struct Row {
    const char* limit;
    std::optional<int64_t> expected_limit;
    std::optional<int64_t> window_ms;
  };
  for (const Row& row : std::vector<Row>{
           {"100", 100, kAbsent},
           {"100, 100;w=60", 100, 60'000},
           {"100;w=60", 100, 60'000},
           {"10, 10;window=1, 50;window=60;comment=\"sliding window\"", 10, 1'000},
           {"10, 50;w=60, 10;w=1", 10, 1'000},
           {"100, 50;w=60", 100, kAbsent},
           {"100;w=0", 100, kAbsent},
           {"100;w=abc", 100, kAbsent},
           {"0", 0, kAbsent},
           {"999999999999999", 999'999'999'999'999, kAbsent},
           {"1000000000000000", kAbsent, kAbsent},  // 16 digits: not an RFC 8941 integer
           {"-5", kAbsent, kAbsent},
           {"+5", kAbsent, kAbsent},
           {"1e5", kAbsent, kAbsent},
           {"0x10", kAbsent, kAbsent},
           {"1.5", kAbsent, kAbsent},
           {"NaN", kAbsent, kAbsent},
           {"100,", kAbsent, kAbsent},
           {"", kAbsent, kAbsent},
       }) {
    INFO("RateLimit-Limit: " << row.limit);
    check_parse({{"ratelimit-limit", row.limit}, {"ratelimit-remaining", "7"}}, HeaderConvention::IetfDraft,
                {draft(row.expected_limit, 7, kAbsent, row.window_ms)});
  }
  // The reset is read like GitHub's: epoch ms, epoch seconds or seconds from now.
  check_parse({{"ratelimit-remaining", "7"}, {"ratelimit-reset", "1372700873"}}, HeaderConvention::IetfDraft,
              {draft(kAbsent, 7, 1'372'700'873'000, kAbsent)});
  check_parse({{"ratelimit-remaining", "7"}, {"ratelimit-reset", "-1"}}, HeaderConvention::IetfDraft,
              {draft(kAbsent, 7, kAbsent, kAbsent)});
  check_parse({{"ratelimit-remaining", "7, 6"}, {"ratelimit-limit", "10"}}, HeaderConvention::IetfDraft,
              {draft(10, kAbsent, kAbsent, kAbsent)});
}

// ---------------------------------------------------------------- auto

TEST_CASE("auto: the more specific convention wins a dimension", "[ratelimit_headers]") {
  // anthropic over openai for "requests"; openai alone has "tokens".
  check_parse({{"x-ratelimit-limit-requests", "60"},
               {"x-ratelimit-remaining-requests", "59"},
               {"x-ratelimit-remaining-tokens", "1000"},
               {"anthropic-ratelimit-requests-limit", "50"},
               {"anthropic-ratelimit-requests-remaining", "10"}},
              HeaderConvention::Auto,
              {{"requests", 50, 10, kAbsent, kAbsent, HeaderConvention::Anthropic},
               {"tokens", kAbsent, 1000, kAbsent, kAbsent, HeaderConvention::OpenAI}});
  // ietf over ietf-draft over github for "default".
  const Headers all_default = {{"x-ratelimit-limit", "5000"},
                               {"x-ratelimit-remaining", "4999"},
                               {"RateLimit-Limit", "100"},
                               {"RateLimit-Remaining", "99"},
                               {"RateLimit-Policy", "\"default\";q=10;w=1"},
                               {"RateLimit", "\"default\";r=9;t=1"}};
  check_parse(all_default, HeaderConvention::Auto, {{"default", 10, 9, kNow + 1'000, 1'000, HeaderConvention::Ietf}});
  check_parse(Headers(all_default.begin(), all_default.begin() + 4), HeaderConvention::Auto,
              {{"default", 100, 99, kAbsent, kAbsent, HeaderConvention::IetfDraft}});
  check_parse(Headers(all_default.begin(), all_default.begin() + 2), HeaderConvention::Auto,
              {github(5000, 4999, kAbsent)});
  // A named IETF policy competes with the vendor dimension of the same name.
  check_parse({{"RateLimit-Policy", "\"default\";q=10, \"tokens\";q=500"}, {"x-ratelimit-remaining-tokens", "1000"}},
              HeaderConvention::Auto,
              {{"tokens", kAbsent, 1000, kAbsent, kAbsent, HeaderConvention::OpenAI},
               {"default", 10, kAbsent, kAbsent, kAbsent, HeaderConvention::Ietf}});
  // GitHub's "default" and OpenAI's "requests" are different dimensions: both reported.
  check_parse({{"x-ratelimit-remaining", "1"}, {"x-ratelimit-remaining-requests", "2"}}, HeaderConvention::Auto,
              {{"requests", kAbsent, 2, kAbsent, kAbsent, HeaderConvention::OpenAI}, github(kAbsent, 1, kAbsent)});
}

TEST_CASE("auto: an unusable specific observation does not hide a usable one", "[ratelimit_headers]") {
  check_parse({{"anthropic-ratelimit-requests-remaining", "NaN"},
               {"anthropic-ratelimit-requests-reset", "2024-06-01T12:00:30Z"},
               {"x-ratelimit-remaining-requests", "3"}},
              HeaderConvention::Auto, {{"requests", kAbsent, 3, kAbsent, kAbsent, HeaderConvention::OpenAI}});
  check_parse({{"RateLimit", "\"default\";r=-1"}, {"x-ratelimit-remaining", "3"}}, HeaderConvention::Auto,
              {github(kAbsent, 3, kAbsent)});
}

TEST_CASE("a named convention reads only its own headers", "[ratelimit_headers]") {
  const Headers mixed = {{"x-ratelimit-remaining", "1"},
                         {"x-ratelimit-remaining-tokens", "2"},
                         {"anthropic-ratelimit-tokens-remaining", "3"},
                         {"RateLimit", "\"default\";r=4"},
                         {"RateLimit-Remaining", "5"}};
  check_parse(mixed, HeaderConvention::GitHub, {github(kAbsent, 1, kAbsent)});
  check_parse(mixed, HeaderConvention::OpenAI, {{"tokens", kAbsent, 2, kAbsent, kAbsent, HeaderConvention::OpenAI}});
  check_parse(mixed, HeaderConvention::Anthropic,
              {{"tokens", kAbsent, 3, kAbsent, kAbsent, HeaderConvention::Anthropic}});
  check_parse(mixed, HeaderConvention::Ietf, {{"default", kAbsent, 4, kAbsent, kAbsent, HeaderConvention::Ietf}});
  check_parse(mixed, HeaderConvention::IetfDraft,
              {{"default", kAbsent, 5, kAbsent, kAbsent, HeaderConvention::IetfDraft}});
}

// ---------------------------------------------------------------- hostile input

TEST_CASE("header names: any case, but nothing around them", "[ratelimit_headers]") {
  check_parse({{"X-RATELIMIT-LIMIT", "60"}, {"X-RateLimit-Remaining", "1"}}, HeaderConvention::GitHub,
              {github(60, 1, kAbsent)});
  check_parse({{"ratelimit-POLICY", "\"default\";q=100"}}, HeaderConvention::Ietf,
              {{"default", 100, kAbsent, kAbsent, kAbsent, HeaderConvention::Ietf}});
  for (const char* name : {" x-ratelimit-remaining", "x-ratelimit-remaining ", "x-ratelimit-remaining:",
                           "x_ratelimit_remaining", "x-ratelimit-remaining\r", "x-ratelimit-remainingx"}) {
    INFO(name);
    check_parse({{name, "1"}}, HeaderConvention::Auto, {});
  }
}

TEST_CASE("duplicates: the first occurrence wins, even when unusable", "[ratelimit_headers]") {
  check_parse({{"x-ratelimit-remaining", "5"}, {"X-RateLimit-Remaining", "3"}}, HeaderConvention::GitHub,
              {github(kAbsent, 5, kAbsent)});
  check_parse({{"x-ratelimit-remaining", "junk"}, {"x-ratelimit-remaining", "3"}, {"x-ratelimit-limit", "10"}},
              HeaderConvention::GitHub, {github(10, kAbsent, kAbsent)});
  // fetch() joins repeated headers into one list: not a number, so ignored.
  check_parse({{"x-ratelimit-remaining", "5, 3"}}, HeaderConvention::GitHub, {});
}

TEST_CASE("values: length bound, control characters", "[ratelimit_headers]") {
  // Padded to exactly the bound, and one byte past it.
  const std::string at_bound = std::string(drl::kMaxRateLimitHeaderBytes - 1, ' ') + "5";
  const std::string past_bound = " " + at_bound;
  check_parse({{"x-ratelimit-remaining", at_bound}}, HeaderConvention::GitHub, {github(kAbsent, 5, kAbsent)});
  check_parse({{"x-ratelimit-remaining", past_bound}}, HeaderConvention::GitHub, {});
  // A 10 KB value is skipped and does not let a later duplicate through.
  const std::string huge(10 * 1024, '9');
  check_parse({{"x-ratelimit-remaining", huge}, {"x-ratelimit-remaining", "3"}, {"x-ratelimit-limit", "10"}},
              HeaderConvention::GitHub, {github(10, kAbsent, kAbsent)});
  std::string long_policy = "\"default\";q=100";
  while (long_policy.size() <= drl::kMaxRateLimitHeaderBytes) long_policy += ", \"x\";q=1";
  check_parse({{"RateLimit-Policy", long_policy}}, HeaderConvention::Ietf, {});
  // Control characters anywhere in a number.
  for (const char* value : {"\x00"
                            "5",
                            "5\x00",
                            "\x1b"
                            "5",
                            "5\x7f",
                            "\x0b"
                            "5",
                            "5\x0c"}) {
    check_parse({{"x-ratelimit-remaining", std::string_view(value, 2)}}, HeaderConvention::GitHub, {});
  }
  check_parse({{"x-ratelimit-remaining", std::string_view("5\0", 2)}}, HeaderConvention::GitHub, {});
}

TEST_CASE("many comma-separated values", "[ratelimit_headers]") {
  std::string list = "1";
  while (list.size() < 500) list += ",1";
  check_parse({{"x-ratelimit-remaining", list}, {"x-ratelimit-limit", "10"}}, HeaderConvention::GitHub,
              {github(10, kAbsent, kAbsent)});
  check_parse({{"RateLimit-Limit", list}}, HeaderConvention::IetfDraft,
              {{"default", 1, kAbsent, kAbsent, kAbsent, HeaderConvention::IetfDraft}});
  std::string items = "\"default\";r=1";
  while (items.size() < 500) items += ",\"default\";r=2";
  check_parse({{"RateLimit", items}}, HeaderConvention::Ietf,
              {{"default", kAbsent, 1, kAbsent, kAbsent, HeaderConvention::Ietf}});
  check_parse({{"x-ratelimit-reset-tokens", "1s,1s,1s"}, {"x-ratelimit-remaining-tokens", "1"}},
              HeaderConvention::OpenAI, {{"tokens", kAbsent, 1, kAbsent, kAbsent, HeaderConvention::OpenAI}});
}

TEST_CASE("only the first kMaxRateLimitHeaders headers are read", "[ratelimit_headers]") {
  REQUIRE(drl::kMaxRateLimitHeaders == 24);
  const auto with_real_at = [](std::size_t index) {
    Headers headers(100, HeaderField{"x-custom", "1"});
    headers[index] = {"x-ratelimit-remaining", "7"};
    return headers;
  };
  check_parse(with_real_at(0), HeaderConvention::Auto, {github(kAbsent, 7, kAbsent)});
  check_parse(with_real_at(23), HeaderConvention::Auto, {github(kAbsent, 7, kAbsent)});
  check_parse(with_real_at(24), HeaderConvention::Auto, {});
  check_parse(with_real_at(99), HeaderConvention::Auto, {});
  // 100 rate-limit headers, all the same name: the first is read.
  Headers repeated;
  for (int i = 0; i < 100; ++i) {
    repeated.push_back({"x-ratelimit-remaining", i == 0 ? "0" : "9"});
  }
  check_parse(repeated, HeaderConvention::Auto, {github(kAbsent, 0, kAbsent)});
}
