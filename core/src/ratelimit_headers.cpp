#include "drl/ratelimit_headers.h"

#include <algorithm>
#include <array>
#include <iterator>
#include <limits>
#include <utility>

#include "structured_fields.h"
#include "text_time.h"

namespace drl {

namespace {

using internal::days_from_civil;
using internal::days_in_month;
using internal::is_digit;
using internal::kMsPerDay;

// Past any real quota or count; also keeps every ms/us product below 2^63.
constexpr int64_t kMaxValue = 1'000'000'000'000'000;  // 1e15
constexpr int64_t kMaxDurationUs = kMaxValue * 1000;  // durations up to 1e15 ms
// A reset number at least this large is an epoch in ms (1e12 ms is 2001-09-09).
constexpr int64_t kEpochMsThreshold = 1'000'000'000'000;
// ... else at least this large is an epoch in seconds (1e9 s is 2001-09-09); a delay
// that long (31 years) is never meant.
constexpr int64_t kEpochSecondsThreshold = 1'000'000'000;
// A response states a handful of IETF policies; more is noise, and bounds the output.
constexpr std::size_t kMaxIetfPolicies = 8;

constexpr std::string_view kDefault = "default";

using internal::is_alpha;
using internal::is_lcalpha;
using internal::is_ows;
using internal::trim_ows;
using namespace internal::sf;
char to_lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool iequals(std::string_view a, std::string_view lower) {
  if (a.size() != lower.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (to_lower(a[i]) != lower[i]) return false;
  }
  return true;
}

bool istarts_with(std::string_view a, std::string_view lower) {
  return a.size() >= lower.size() && iequals(a.substr(0, lower.size()), lower);
}

// now_ms is the caller's and may be extreme; a reset past the int64 range is "never".
int64_t saturating_add(int64_t a, int64_t b) {
  int64_t sum = 0;
  if (__builtin_add_overflow(a, b, &sum)) {
    return b > 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
  }
  return sum;
}

// ASCII digits with an optional fraction, read from `pos`. `whole` saturates past
// kMaxValue (flagged `huge`) but scanning goes on, so the caller still sees the end.
struct Decimal {
  int64_t whole = 0;
  int64_t micros = 0;  // the fraction in millionths, rounded up
  bool huge = false;
};

std::optional<Decimal> read_decimal(std::string_view text, std::size_t& pos, bool allow_fraction) {
  // Six fraction digits are exact to the microsecond; rounding the rest up is the safe side.
  constexpr int kFractionDigits = 6;
  Decimal d;
  const std::size_t start = pos;
  while (pos < text.size() && is_digit(text[pos])) {
    if (!d.huge) {
      d.whole = d.whole * 10 + (text[pos] - '0');
      if (d.whole > kMaxValue) d.huge = true;
    }
    ++pos;
  }
  if (pos == start) return std::nullopt;
  if (!allow_fraction || pos >= text.size() || text[pos] != '.') return d;
  ++pos;
  const std::size_t frac_start = pos;
  int64_t place = 100'000;
  bool residue = false;
  for (int i = 0; pos < text.size() && is_digit(text[pos]); ++pos, ++i) {
    const int digit = text[pos] - '0';
    if (i < kFractionDigits) {
      d.micros += digit * place;
      place /= 10;
    } else if (digit != 0) {
      residue = true;
    }
  }
  if (pos == frac_start) return std::nullopt;  // "5." is not a number
  if (residue) ++d.micros;
  if (d.micros == 1'000'000) {  // 0.9999999 rounded up
    d.micros = 0;
    ++d.whole;
    if (d.whole > kMaxValue) d.huge = true;
  }
  return d;
}

int64_t micros_to_ms_up(int64_t micros) { return (micros + 999) / 1000; }

// A limit or remaining: ASCII digits only, 0..1e15.
std::optional<int64_t> parse_count(std::string_view value) {
  value = trim_ows(value);
  std::size_t pos = 0;
  const std::optional<Decimal> d = read_decimal(value, pos, false);
  if (!d || d->huge || pos != value.size()) return std::nullopt;
  return d->whole;
}

// A reset stated as one number: epoch ms, epoch seconds or seconds from now (see the
// thresholds). Fractions round up: believing the reset a little later is the safe side.
std::optional<int64_t> parse_reset_number(std::string_view value, int64_t now_ms) {
  value = trim_ows(value);
  std::size_t pos = 0;
  const std::optional<Decimal> d = read_decimal(value, pos, true);
  if (!d || d->huge || pos != value.size()) return std::nullopt;
  if (d->whole >= kEpochMsThreshold) return d->whole + (d->micros > 0 ? 1 : 0);
  const int64_t ms = d->whole * 1000 + micros_to_ms_up(d->micros);
  if (d->whole >= kEpochSecondsThreshold) return ms;
  return saturating_add(now_ms, ms);
}

// A Go duration as OpenAI sends it ("6m0s", "20ms", "1h2m3.5s"): one or more
// <decimal><unit>, no sign; "0" alone is zero, as in Go. Milliseconds, rounded up.
std::optional<int64_t> parse_duration_ms(std::string_view value) {
  struct Unit {
    std::string_view suffix;
    int64_t micros;  // 0: nanoseconds
  };
  // Longer suffixes first, so "ms" is not read as "m" followed by junk.
  constexpr std::array<Unit, 9> kUnits = {{{"ms", 1'000},
                                           {"us", 1},
                                           {"\xC2\xB5s", 1},  // U+00B5, what Go prints
                                           {"\xCE\xBCs", 1},  // U+03BC, which Go also reads
                                           {"ns", 0},
                                           {"d", 86'400'000'000},
                                           {"h", 3'600'000'000},
                                           {"m", 60'000'000},
                                           {"s", 1'000'000}}};
  value = trim_ows(value);
  if (value == "0") return int64_t{0};
  if (value.empty()) return std::nullopt;
  int64_t total_us = 0;
  std::size_t pos = 0;
  while (pos < value.size()) {
    const std::optional<Decimal> d = read_decimal(value, pos, true);
    if (!d || d->huge) return std::nullopt;
    const Unit* unit = nullptr;
    for (const Unit& u : kUnits) {
      if (value.substr(pos, u.suffix.size()) == u.suffix) {
        unit = &u;
        break;
      }
    }
    if (unit == nullptr) return std::nullopt;
    pos += unit->suffix.size();
    int64_t part_us = 0;
    if (unit->micros == 0) {
      part_us = (d->whole + (d->micros > 0 ? 1 : 0) + 999) / 1000;
    } else {
      if (d->whole > kMaxDurationUs / unit->micros) return std::nullopt;
      // micros < 1e6 and a unit <= 8.64e10 us: the product stays below 2^63.
      part_us = d->whole * unit->micros + (d->micros * unit->micros + 999'999) / 1'000'000;
    }
    total_us += part_us;  // both <= 1e18: no overflow
    if (total_us > kMaxDurationUs) return std::nullopt;
  }
  return micros_to_ms_up(total_us);
}

// Fixed-width digits at `pos`; false (and `pos` unspecified) on anything else.
bool read_fixed(std::string_view text, std::size_t& pos, std::size_t count, int& out) {
  if (text.size() - pos < count) return false;
  int value = 0;
  for (std::size_t i = 0; i < count; ++i) {
    if (!is_digit(text[pos + i])) return false;
    value = value * 10 + (text[pos + i] - '0');
  }
  pos += count;
  out = value;
  return true;
}

bool read_char(std::string_view text, std::size_t& pos, char expected) {
  if (pos >= text.size() || text[pos] != expected) return false;
  ++pos;
  return true;
}

// RFC 3339 date-time: 2024-06-01T12:00:30Z, 2024-06-01T14:00:30.25+02:00. 't', 'z' and
// a space for 'T' are accepted (RFC 3339 §5.6 and its note). Fractions round up.
std::optional<int64_t> parse_rfc3339_ms(std::string_view value) {
  value = trim_ows(value);
  std::size_t pos = 0;
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
  if (!(read_fixed(value, pos, 4, year) && read_char(value, pos, '-') && read_fixed(value, pos, 2, month) &&
        read_char(value, pos, '-') && read_fixed(value, pos, 2, day))) {
    return std::nullopt;
  }
  if (pos >= value.size() || (value[pos] != 'T' && value[pos] != 't' && value[pos] != ' ')) {
    return std::nullopt;
  }
  ++pos;
  if (!(read_fixed(value, pos, 2, hour) && read_char(value, pos, ':') && read_fixed(value, pos, 2, minute) &&
        read_char(value, pos, ':') && read_fixed(value, pos, 2, second))) {
    return std::nullopt;
  }
  int64_t fraction_ms = 0;  // rounded up; 1000 at most, which carries into the next second
  if (!internal::read_ms_fraction(value, pos, fraction_ms)) return std::nullopt;
  int offset_minutes = 0;
  if (pos < value.size() && (value[pos] == 'Z' || value[pos] == 'z')) {
    ++pos;
  } else if (pos < value.size() && (value[pos] == '+' || value[pos] == '-')) {
    const int sign = value[pos] == '-' ? -1 : 1;
    ++pos;
    int off_hour = 0, off_minute = 0;
    if (!(read_fixed(value, pos, 2, off_hour) && read_char(value, pos, ':') && read_fixed(value, pos, 2, off_minute))) {
      return std::nullopt;
    }
    if (off_hour > 23 || off_minute > 59) return std::nullopt;
    offset_minutes = sign * (off_hour * 60 + off_minute);
  } else {
    return std::nullopt;  // RFC 3339 requires the offset
  }
  if (pos != value.size()) return std::nullopt;
  // 60 admits a leap second; it lands on the next minute's :00.
  if (month < 1 || month > 12 || day < 1 || day > days_in_month(year, month) || hour > 23 || minute > 59 ||
      second > 60) {
    return std::nullopt;
  }
  // Years 0000..9999: every term is far from overflow.
  const int64_t seconds_of_day = hour * 3600 + minute * 60 + second;
  return days_from_civil(year, month, day) * kMsPerDay + seconds_of_day * 1000 + fraction_ms -
         int64_t{offset_minutes} * 60'000;
}

// ---- Header lookup and the conventions ----

// The first occurrence of `lower_name` among the headers read; a too-long value reads
// as "" (unparsable everywhere) rather than letting a later duplicate through.
std::optional<std::string_view> find_header(const std::vector<HeaderField>& headers, std::string_view lower_name) {
  const std::size_t count = std::min(headers.size(), kMaxRateLimitHeaders);
  for (std::size_t i = 0; i < count; ++i) {
    if (!iequals(headers[i].name, lower_name)) continue;
    if (headers[i].value.size() > kMaxRateLimitHeaderBytes) return std::string_view{};
    return headers[i].value;
  }
  return std::nullopt;
}

enum class Field { Limit, Remaining, ResetNumber, ResetDuration, ResetDate, DraftLimitList };

struct FieldRule {
  std::string_view header;
  std::string_view dimension;
  Field field;
};

constexpr FieldRule kGitHubRules[] = {
    {"x-ratelimit-limit", kDefault, Field::Limit},
    {"x-ratelimit-remaining", kDefault, Field::Remaining},
    {"x-ratelimit-reset", kDefault, Field::ResetNumber},
};

constexpr FieldRule kOpenAIRules[] = {
    {"x-ratelimit-limit-requests", "requests", Field::Limit},
    {"x-ratelimit-remaining-requests", "requests", Field::Remaining},
    {"x-ratelimit-reset-requests", "requests", Field::ResetDuration},
    {"x-ratelimit-limit-tokens", "tokens", Field::Limit},
    {"x-ratelimit-remaining-tokens", "tokens", Field::Remaining},
    {"x-ratelimit-reset-tokens", "tokens", Field::ResetDuration},
};

constexpr FieldRule kAnthropicRules[] = {
    {"anthropic-ratelimit-requests-limit", "requests", Field::Limit},
    {"anthropic-ratelimit-requests-remaining", "requests", Field::Remaining},
    {"anthropic-ratelimit-requests-reset", "requests", Field::ResetDate},
    {"anthropic-ratelimit-tokens-limit", "tokens", Field::Limit},
    {"anthropic-ratelimit-tokens-remaining", "tokens", Field::Remaining},
    {"anthropic-ratelimit-tokens-reset", "tokens", Field::ResetDate},
    {"anthropic-ratelimit-input-tokens-limit", "input-tokens", Field::Limit},
    {"anthropic-ratelimit-input-tokens-remaining", "input-tokens", Field::Remaining},
    {"anthropic-ratelimit-input-tokens-reset", "input-tokens", Field::ResetDate},
    {"anthropic-ratelimit-output-tokens-limit", "output-tokens", Field::Limit},
    {"anthropic-ratelimit-output-tokens-remaining", "output-tokens", Field::Remaining},
    {"anthropic-ratelimit-output-tokens-reset", "output-tokens", Field::ResetDate},
};

constexpr FieldRule kIetfDraftRules[] = {
    {"ratelimit-limit", kDefault, Field::DraftLimitList},
    {"ratelimit-remaining", kDefault, Field::Remaining},
    {"ratelimit-reset", kDefault, Field::ResetNumber},
};

Observation& observation_for(std::vector<Observation>& out, std::size_t first, std::string_view dimension,
                             HeaderConvention convention) {
  for (std::size_t i = first; i < out.size(); ++i) {
    if (out[i].dimension == dimension) return out[i];
  }
  Observation& added = out.emplace_back();
  added.dimension.assign(dimension);
  added.convention = convention;
  return added;
}

// "100" or "100, 100;w=60" (draft 03+; drafts 00-02 say window=): the first member is
// the limit; its window is the first member's w, else that of a policy with that quota.
void apply_draft_limit_list(std::string_view value, Observation& obs) {
  const std::optional<std::vector<SfItem>> items = SfParser(trim_ows(value)).list();
  if (!items || items->empty()) return;
  const SfItem& first = items->front();
  if (first.bare.kind != SfBare::Kind::Integer || first.bare.integer < 0) return;
  obs.limit = first.bare.integer;
  for (const SfItem& item : *items) {
    if (item.bare.kind != SfBare::Kind::Integer || item.bare.integer != first.bare.integer) {
      continue;
    }
    std::optional<int64_t> window = item.counts[kWindow];
    if (!window) window = item.counts[kDraftWindow];
    if (window && *window > 0) {
      obs.window_ms = *window * 1000;
      return;
    }
  }
}

void parse_by_rules(const std::vector<HeaderField>& headers, const FieldRule* rules, std::size_t rule_count,
                    HeaderConvention convention, int64_t now_ms, std::vector<Observation>& out) {
  const std::size_t first = out.size();
  for (std::size_t r = 0; r < rule_count; ++r) {
    const FieldRule& rule = rules[r];
    const std::optional<std::string_view> value = find_header(headers, rule.header);
    if (!value) continue;
    Observation& obs = observation_for(out, first, rule.dimension, convention);
    switch (rule.field) {
      case Field::Limit:
        obs.limit = parse_count(*value);
        break;
      case Field::Remaining:
        obs.remaining = parse_count(*value);
        break;
      case Field::ResetNumber:
        obs.reset_at_ms = parse_reset_number(*value, now_ms);
        break;
      case Field::ResetDuration:
        if (const std::optional<int64_t> ms = parse_duration_ms(*value)) {
          obs.reset_at_ms = saturating_add(now_ms, *ms);
        }
        break;
      case Field::ResetDate:
        obs.reset_at_ms = parse_rfc3339_ms(*value);
        break;
      case Field::DraftLimitList:
        apply_draft_limit_list(*value, obs);
        break;
    }
  }
}

void parse_ietf(const std::vector<HeaderField>& headers, int64_t now_ms, std::vector<Observation>& out) {
  struct Policy {
    std::string name;
    Observation obs;
    bool stated = false;  // its RateLimit item has been read
  };
  std::vector<Policy> policies;
  // The first item naming a policy is the one read; later repeats are ignored.
  auto policy_for = [&](const std::string& name, bool& fresh) -> Policy* {
    fresh = false;
    for (Policy& p : policies) {
      if (p.name == name) return &p;
    }
    if (policies.size() >= kMaxIetfPolicies) return nullptr;
    fresh = true;
    return &policies.emplace_back(Policy{name, Observation{}, false});
  };
  auto items_of = [&](std::string_view header) {
    const std::optional<std::string_view> value = find_header(headers, header);
    if (!value) return std::vector<SfItem>{};
    std::optional<std::vector<SfItem>> items = SfParser(trim_ows(*value)).list();
    return items ? std::move(*items) : std::vector<SfItem>{};
  };

  for (const SfItem& item : items_of("ratelimit-policy")) {
    const std::string* name = item.name();
    bool fresh = false;
    Policy* policy = name ? policy_for(*name, fresh) : nullptr;
    if (policy == nullptr || !fresh) continue;
    policy->obs.limit = item.counts[kQuota];
    const std::optional<int64_t> window = item.counts[kWindow];
    if (window && *window > 0) policy->obs.window_ms = *window * 1000;
  }
  for (const SfItem& item : items_of("ratelimit")) {
    const std::string* name = item.name();
    bool fresh = false;
    Policy* policy = name ? policy_for(*name, fresh) : nullptr;
    if (policy == nullptr) continue;
    if (policy->stated) continue;
    policy->stated = true;
    policy->obs.remaining = item.counts[kRemaining];
    if (const std::optional<int64_t> seconds = item.counts[kResetSeconds]) {
      policy->obs.reset_at_ms = saturating_add(now_ms, *seconds * 1000);
    }
  }

  // The quota a config means by "the" limit: the policy called default, else the first.
  std::size_t primary = 0;
  for (std::size_t i = 0; i < policies.size(); ++i) {
    if (policies[i].name == kDefault) {
      primary = i;
      break;
    }
  }
  for (std::size_t i = 0; i < policies.size(); ++i) {
    Policy& policy = policies[i];
    if (i != primary && policy.name.empty()) continue;  // nothing a map could name
    policy.obs.dimension = i == primary ? std::string(kDefault) : std::move(policy.name);
    policy.obs.convention = HeaderConvention::Ietf;
    out.push_back(std::move(policy.obs));
  }
}

void parse_one(const std::vector<HeaderField>& headers, HeaderConvention convention, int64_t now_ms,
               std::vector<Observation>& out) {
  switch (convention) {
    case HeaderConvention::GitHub:
      parse_by_rules(headers, kGitHubRules, std::size(kGitHubRules), convention, now_ms, out);
      break;
    case HeaderConvention::OpenAI:
      parse_by_rules(headers, kOpenAIRules, std::size(kOpenAIRules), convention, now_ms, out);
      break;
    case HeaderConvention::Anthropic:
      parse_by_rules(headers, kAnthropicRules, std::size(kAnthropicRules), convention, now_ms, out);
      break;
    case HeaderConvention::Ietf:
      parse_ietf(headers, now_ms, out);
      break;
    case HeaderConvention::IetfDraft:
      parse_by_rules(headers, kIetfDraftRules, std::size(kIetfDraftRules), convention, now_ms, out);
      break;
    case HeaderConvention::Auto:
      break;
  }
}

}  // namespace

std::optional<HeaderConvention> header_convention(std::string_view name) {
  for (HeaderConvention c : {HeaderConvention::Auto, HeaderConvention::GitHub, HeaderConvention::OpenAI,
                             HeaderConvention::Anthropic, HeaderConvention::Ietf, HeaderConvention::IetfDraft}) {
    if (header_convention_name(c) == name) return c;
  }
  return std::nullopt;
}

std::string_view header_convention_name(HeaderConvention c) {
  switch (c) {
    case HeaderConvention::Auto:
      return "auto";
    case HeaderConvention::GitHub:
      return "github";
    case HeaderConvention::OpenAI:
      return "openai";
    case HeaderConvention::Anthropic:
      return "anthropic";
    case HeaderConvention::Ietf:
      return "ietf";
    case HeaderConvention::IetfDraft:
      return "ietf-draft";
  }
  return "auto";
}

std::vector<Observation> parse_rate_limit_headers(const std::vector<HeaderField>& headers, HeaderConvention convention,
                                                  int64_t now_ms) {
  std::vector<Observation> parsed;
  if (convention != HeaderConvention::Auto) {
    parse_one(headers, convention, now_ms, parsed);
  } else {
    // Most specific first: a vendor's own names say more than a generic field.
    for (HeaderConvention c : {HeaderConvention::Anthropic, HeaderConvention::OpenAI, HeaderConvention::Ietf,
                               HeaderConvention::IetfDraft, HeaderConvention::GitHub}) {
      parse_one(headers, c, now_ms, parsed);
    }
  }
  std::vector<Observation> kept;
  for (Observation& obs : parsed) {
    if (!obs.limit && !obs.remaining) continue;
    bool taken = false;
    for (const Observation& k : kept) taken = taken || k.dimension == obs.dimension;
    if (!taken) kept.push_back(std::move(obs));
  }
  return kept;
}

bool is_rate_limit_header(std::string_view lower_name) {
  constexpr std::string_view kPrefixes[] = {"x-ratelimit-", "anthropic-ratelimit-"};
  constexpr std::string_view kNames[] = {"ratelimit", "ratelimit-policy", "ratelimit-limit", "ratelimit-remaining",
                                         "ratelimit-reset"};
  for (std::string_view prefix : kPrefixes) {
    if (lower_name.size() > prefix.size() && istarts_with(lower_name, prefix)) return true;
  }
  for (std::string_view name : kNames) {
    if (iequals(lower_name, name)) return true;
  }
  return false;
}

}  // namespace drl
