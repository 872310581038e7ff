// Config parsing, validation, patching and the effective (defaults-filled) view.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "drl/config.h"
#include "drl/engine.h"

namespace {

using drl::ErrorCode;
using drl::ErrorKind;
using nlohmann::json;

const char* const kMinimal = R"({"bucket":{"limitPerWindow":60,"windowInMs":60000},"concurrency":5})";
const std::string kPrefix = "[drl:invalid-config] ";

// kMinimal with one field replaced (or added) at a JSON pointer.
std::string with(const json& base, const std::string& pointer, const json& value) {
  json doc = base;
  doc[json::json_pointer(pointer)] = value;
  return doc.dump();
}

std::string with(const std::string& pointer, const json& value) { return with(json::parse(kMinimal), pointer, value); }

std::string without(const std::string& pointer) {
  json doc = json::parse(kMinimal);
  const json::json_pointer ptr(pointer);
  doc[ptr.parent_pointer()].erase(ptr.back());
  return doc.dump();
}

drl::Error failure(const std::string& text) {
  auto parsed = drl::parse_config(text);
  INFO("document: " << text);
  REQUIRE_FALSE(parsed.ok());
  CHECK(parsed.error().code == ErrorCode::InvalidConfig);
  // validate_config and parse_config must always agree.
  CHECK_FALSE(drl::validate_config(text).empty());
  return parsed.error();
}

drl::Config success(const std::string& text) {
  auto parsed = drl::parse_config(text);
  INFO("document: " << text);
  if (!parsed.ok()) FAIL(parsed.error().message);
  CHECK(drl::validate_config(text).empty());
  return parsed->config;
}

void require_same(const drl::Config& a, const drl::Config& b) {
  CHECK(a.bucket.limit_per_window == b.bucket.limit_per_window);
  CHECK(a.bucket.window_ms == b.bucket.window_ms);
  CHECK(a.bucket.penalty_refill_fraction == b.bucket.penalty_refill_fraction);
  CHECK(a.concurrency == b.concurrency);
  CHECK(a.attempt_timeout_ms == b.attempt_timeout_ms);
  CHECK(a.retry.max_retries == b.retry.max_retries);
  CHECK(a.retry.min_delay_ms == b.retry.min_delay_ms);
  CHECK(a.retry.max_delay_ms == b.retry.max_delay_ms);
  CHECK(a.retry.factor == b.retry.factor);
  CHECK(a.retry.respect_retry_after == b.retry.respect_retry_after);
}

struct IntField {
  std::string pointer;
  std::string path;
  int64_t lo;
  int64_t hi;
  bool required;
};

}  // namespace

TEST_CASE("a minimal config gets every default", "[config]") {
  auto parsed = drl::parse_config(kMinimal);
  REQUIRE(parsed.ok());
  const drl::Config& c = parsed->config;
  CHECK(c.bucket.limit_per_window == 60);
  CHECK(c.bucket.window_ms == 60000);
  CHECK(c.bucket.penalty_refill_fraction == 0.5);
  CHECK(c.concurrency == 5);
  CHECK(c.attempt_timeout_ms == 120000);
  CHECK(c.retry.max_retries == 3);
  CHECK(c.retry.min_delay_ms == 500);
  CHECK(c.retry.max_delay_ms == 30000);
  CHECK(c.retry.factor == 2.0);
  CHECK(c.retry.respect_retry_after == true);
  CHECK(drl::validate_config(kMinimal).empty());
}

TEST_CASE("every field can be set", "[config]") {
  const drl::Config c = success(R"({
    "bucket": {"limitPerWindow": 1000000000, "windowInMs": 31622400000, "penaltyRefillFraction": 0},
    "concurrency": 1000000,
    "attemptTimeoutMs": 86400000,
    "retry": {"maxRetries": 0, "minDelayInMs": 0, "maxDelayInMs": 0, "factor": 1000,
              "respectRetryAfter": false}})");
  CHECK(c.bucket.limit_per_window == drl::kMaxLimitPerWindow);
  CHECK(c.bucket.window_ms == drl::kMaxWindowMs);
  CHECK(c.bucket.penalty_refill_fraction == 0.0);
  CHECK(c.concurrency == drl::kMaxConcurrency);
  CHECK(c.attempt_timeout_ms == drl::kMaxAttemptTimeoutMs);
  CHECK(c.retry.max_retries == 0);
  CHECK(c.retry.min_delay_ms == 0);
  CHECK(c.retry.max_delay_ms == 0);
  CHECK(c.retry.factor == 1000.0);
  CHECK(c.retry.respect_retry_after == false);
}

TEST_CASE("a partial retry block merges onto the defaults", "[config]") {
  const drl::Config c = success(with("/retry", {{"maxRetries", 2}, {"factor", 1.5}}));
  CHECK(c.retry.max_retries == 2);
  CHECK(c.retry.factor == 1.5);
  CHECK(c.retry.min_delay_ms == 500);
  CHECK(c.retry.max_delay_ms == 30000);
  CHECK(c.retry.respect_retry_after == true);
}

TEST_CASE("integral numbers written as floats are accepted", "[config]") {
  CHECK(success(R"({"bucket":{"limitPerWindow":60.0,"windowInMs":6e4},"concurrency":5e0})").bucket.limit_per_window ==
        60);
  CHECK(success(R"({"bucket":{"limitPerWindow":60,"windowInMs":6e4},"concurrency":5})").bucket.window_ms == 60000);
  CHECK(success(with("/concurrency", 1e6)).concurrency == 1000000);
  CHECK(success(with("/retry/minDelayInMs", -0.0)).retry.min_delay_ms == 0);
}

TEST_CASE("null on an optional field means the default", "[config]") {
  const drl::Config c = success(R"({"bucket":{"limitPerWindow":60,"windowInMs":60000,
    "penaltyRefillFraction":null},"concurrency":5,"attemptTimeoutMs":null,"retry":{"maxRetries":null,"factor":null,
    "respectRetryAfter":null,"minDelayInMs":null,"maxDelayInMs":null}})");
  require_same(c, success(kMinimal));
  require_same(success(with("/retry", nullptr)), success(kMinimal));
}

TEST_CASE("integer fields: every violation names path, rule and value", "[config]") {
  const json base = json::parse(
      R"({"bucket":{"limitPerWindow":60,"windowInMs":60000},"concurrency":5,
          "retry":{"minDelayInMs":0,"maxDelayInMs":31622400000}})");
  const std::vector<IntField> fields = {
      {"/bucket/limitPerWindow", "bucket.limitPerWindow", 1, 1000000000, true},
      {"/bucket/windowInMs", "bucket.windowInMs", 1, 31622400000, true},
      {"/concurrency", "concurrency", 1, 1000000, true},
      {"/attemptTimeoutMs", "attemptTimeoutMs", 1, 86400000, false},
      {"/retry/maxRetries", "retry.maxRetries", 0, 100, false},
      {"/retry/minDelayInMs", "retry.minDelayInMs", 0, 31622400000, false},
      {"/retry/maxDelayInMs", "retry.maxDelayInMs", 0, 31622400000, false},
  };
  for (const IntField& f : fields) {
    INFO("field: " << f.path);
    const std::string rule = "an integer between " + std::to_string(f.lo) + " and " + std::to_string(f.hi);

    success(with(base, f.pointer, f.lo));
    success(with(base, f.pointer, f.hi));
    success(with(base, f.pointer, static_cast<double>(f.hi)));

    auto range = [&](const json& value, const std::string& shown) {
      const drl::Error e = failure(with(base, f.pointer, value));
      CHECK(e.kind == ErrorKind::RangeError);
      CHECK(e.message == kPrefix + f.path + " must be " + rule + " (received " + shown + ")");
    };
    range(f.lo - 1, std::to_string(f.lo - 1));
    range(f.hi + 1, std::to_string(f.hi + 1));
    range(1.5, "1.5");
    range(static_cast<double>(f.lo) - 0.5, json(static_cast<double>(f.lo) - 0.5).dump());
    range(1e300, "1e+300");
    range(-1e300, "-1e+300");
    range(json::parse("18446744073709551615"), "18446744073709551615");
    range(json::parse("-9223372036854775808"), "-9223372036854775808");

    auto type = [&](const json& value, const std::string& shown) {
      const drl::Error e = failure(with(base, f.pointer, value));
      CHECK(e.kind == ErrorKind::TypeError);
      CHECK(e.message == kPrefix + f.path + " must be a number, " + rule + " (received " + shown + ")");
    };
    type("60", R"("60")");
    type(true, "true");
    type(json::array({1}), "[1]");
    type(json::object({{"a", 1}}), R"({"a":1})");

    if (f.required) {
      const drl::Error null_value = failure(with(base, f.pointer, nullptr));
      CHECK(null_value.kind == ErrorKind::TypeError);
      CHECK(null_value.message == kPrefix + f.path + " is required (received null)");
      const drl::Error missing = failure(without(f.pointer));
      CHECK(missing.kind == ErrorKind::TypeError);
      CHECK(missing.message == kPrefix + f.path + " is required");
    } else {
      success(with(base, f.pointer, nullptr));
    }
  }
}

TEST_CASE("penaltyRefillFraction is a number in [0, 1]", "[config]") {
  CHECK(success(with("/bucket/penaltyRefillFraction", 0.25)).bucket.penalty_refill_fraction == 0.25);
  CHECK(success(with("/bucket/penaltyRefillFraction", 1)).bucket.penalty_refill_fraction == 1.0);
  CHECK(success(with("/bucket/penaltyRefillFraction", 0)).bucket.penalty_refill_fraction == 0.0);

  const std::string rule = "bucket.penaltyRefillFraction must be a number between 0 and 1";
  drl::Error e = failure(with("/bucket/penaltyRefillFraction", -0.1));
  CHECK(e.kind == ErrorKind::RangeError);
  CHECK(e.message == kPrefix + rule + " (received -0.1)");
  e = failure(with("/bucket/penaltyRefillFraction", 1.01));
  CHECK(e.kind == ErrorKind::RangeError);
  CHECK(e.message == kPrefix + rule + " (received 1.01)");
  e = failure(with("/bucket/penaltyRefillFraction", 2));
  CHECK(e.kind == ErrorKind::RangeError);
  CHECK(e.message == kPrefix + rule + " (received 2)");
  e = failure(with("/bucket/penaltyRefillFraction", "0.5"));
  CHECK(e.kind == ErrorKind::TypeError);
  CHECK(e.message == kPrefix + rule + R"( (received "0.5"))");
  e = failure(with("/bucket/penaltyRefillFraction", false));
  CHECK(e.kind == ErrorKind::TypeError);
  CHECK(e.message == kPrefix + rule + " (received false)");
}

TEST_CASE("factor is a finite number in [1, 1000]", "[config]") {
  CHECK(success(with("/retry/factor", 1)).retry.factor == 1.0);
  CHECK(success(with("/retry/factor", 1.5)).retry.factor == 1.5);
  CHECK(success(with("/retry/factor", 1000.0)).retry.factor == 1000.0);

  const std::string rule = "retry.factor must be a finite number between 1 and 1000";
  drl::Error e = failure(with("/retry/factor", 0.99));
  CHECK(e.kind == ErrorKind::RangeError);
  CHECK(e.message == kPrefix + rule + " (received 0.99)");
  e = failure(with("/retry/factor", 1000.5));
  CHECK(e.kind == ErrorKind::RangeError);
  CHECK(e.message == kPrefix + rule + " (received 1000.5)");
  e = failure(with("/retry/factor", 0));
  CHECK(e.kind == ErrorKind::RangeError);
  CHECK(e.message == kPrefix + rule + " (received 0)");
  e = failure(with("/retry/factor", "2"));
  CHECK(e.kind == ErrorKind::TypeError);
  CHECK(e.message == kPrefix + rule + R"( (received "2"))");
  e = failure(with("/retry/factor", json::array()));
  CHECK(e.kind == ErrorKind::TypeError);
  CHECK(e.message == kPrefix + rule + " (received [])");

  // JSON cannot spell Infinity; a literal too big for a double is a syntax error.
  e = failure(R"({"bucket":{"limitPerWindow":60,"windowInMs":60000},"concurrency":5,
                  "retry":{"factor":1e400}})");
  CHECK(e.kind == ErrorKind::TypeError);
  CHECK(e.message.rfind(kPrefix + "config is not valid JSON: ", 0) == 0);
}

TEST_CASE("respectRetryAfter is a boolean", "[config]") {
  CHECK(success(with("/retry/respectRetryAfter", false)).retry.respect_retry_after == false);
  CHECK(success(with("/retry/respectRetryAfter", true)).retry.respect_retry_after == true);
  const std::string rule = "retry.respectRetryAfter must be a boolean";
  drl::Error e = failure(with("/retry/respectRetryAfter", "true"));
  CHECK(e.kind == ErrorKind::TypeError);
  CHECK(e.message == kPrefix + rule + R"( (received "true"))");
  e = failure(with("/retry/respectRetryAfter", 1));
  CHECK(e.kind == ErrorKind::TypeError);
  CHECK(e.message == kPrefix + rule + " (received 1)");
}

TEST_CASE("bucket and retry must be objects", "[config]") {
  drl::Error e = failure(with("/bucket", json::array()));
  CHECK(e.kind == ErrorKind::TypeError);
  CHECK(e.message == kPrefix + "bucket must be an object (received [])");

  e = failure(with("/bucket", 60));
  CHECK(e.message == kPrefix + "bucket must be an object (received 60)");

  e = failure(with("/bucket", nullptr));
  CHECK(e.kind == ErrorKind::TypeError);
  CHECK(e.message == kPrefix + "bucket is required (received null)");

  e = failure(with("/retry", 5));
  CHECK(e.kind == ErrorKind::TypeError);
  CHECK(e.message == kPrefix + "retry must be an object (received 5)");

  e = failure(with("/retry", "fast"));
  CHECK(e.message == kPrefix + R"(retry must be an object (received "fast"))");
}

TEST_CASE("missing required fields", "[config]") {
  drl::Error e = failure(R"({"concurrency":5})");
  CHECK(e.kind == ErrorKind::TypeError);
  // No cascade: a missing bucket does not also report its fields.
  CHECK(e.message == kPrefix + "bucket is required");

  e = failure("{}");
  CHECK(e.message == kPrefix + "bucket is required; concurrency is required");

  e = failure(R"({"bucket":{},"concurrency":5})");
  CHECK(e.message == kPrefix + "bucket.limitPerWindow is required; bucket.windowInMs is required");
}

TEST_CASE("unknown keys are rejected at every level", "[config]") {
  drl::Error e = failure(with("/foo", 1));
  CHECK(e.kind == ErrorKind::TypeError);
  CHECK(
      e.message ==
      kPrefix +
          R"(unknown key "foo" in config (allowed: bucket, concurrency, attemptTimeoutMs, retry, windows, learn, tree))");

  e = failure(with("/bucket/limit", 1));
  CHECK(e.kind == ErrorKind::TypeError);
  CHECK(e.message == kPrefix + R"(unknown key "limit" in bucket (allowed: limitPerWindow, )"
                               R"(windowInMs, penaltyRefillFraction, unit))");

  e = failure(with("/retry/maxDelay", 1));
  CHECK(e.kind == ErrorKind::TypeError);
  CHECK(e.message == kPrefix + R"(unknown key "maxDelay" in retry (allowed: maxRetries, )"
                               R"(minDelayInMs, maxDelayInMs, factor, respectRetryAfter))");

  // Keys are case-sensitive, and odd keys are quoted as JSON.
  e = failure(with("/Concurrency", 5));
  CHECK(e.message.find(R"(unknown key "Concurrency" in config)") != std::string::npos);
  e = failure(R"({"bucket":{"limitPerWindow":60,"windowInMs":60000},"concurrency":5,"a\"b\n":1})");
  CHECK(e.message.find(R"(unknown key "a\"b\n" in config)") != std::string::npos);

  const auto problems = drl::validate_config(with("/retry/maxDelay", 1));
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].path == "retry.maxDelay");
}

TEST_CASE("every problem is reported together", "[config]") {
  const std::string doc = R"({"bucket":{"limitPerWindow":0,"windowInMs":"60000"},"concurrency":1.5,"extra":true})";
  const auto problems = drl::validate_config(doc);
  REQUIRE(problems.size() == 4);
  // Schema order: unknown keys of a level first, then its fields.
  CHECK(problems[0].path == "extra");
  CHECK(problems[1].path == "bucket.limitPerWindow");
  CHECK(problems[1].kind == ErrorKind::RangeError);
  CHECK(problems[2].path == "bucket.windowInMs");
  CHECK(problems[2].kind == ErrorKind::TypeError);
  CHECK(problems[3].path == "concurrency");
  CHECK(problems[3].kind == ErrorKind::RangeError);

  const drl::Error e = failure(doc);
  CHECK(e.kind == ErrorKind::TypeError);  // the kind of the first problem
  CHECK(
      e.message ==
      kPrefix +
          R"(unknown key "extra" in config (allowed: bucket, concurrency, attemptTimeoutMs, retry, windows, learn, tree); )"
          R"(bucket.limitPerWindow must be an integer between 1 and 1000000000 (received 0); )"
          R"(bucket.windowInMs must be a number, an integer between 1 and 31622400000 )"
          R"((received "60000"); )"
          R"(concurrency must be an integer between 1 and 1000000 (received 1.5))");

  const drl::Error three = failure(
      R"({"bucket":{"limitPerWindow":-1,"windowInMs":60000},"concurrency":0,
          "retry":{"factor":0.5}})");
  CHECK(three.kind == ErrorKind::RangeError);
  CHECK(three.message.find("bucket.limitPerWindow") != std::string::npos);
  CHECK(three.message.find("concurrency") != std::string::npos);
  CHECK(three.message.find("retry.factor") != std::string::npos);
  CHECK(drl::validate_config(
            R"({"bucket":{"limitPerWindow":-1,"windowInMs":60000},"concurrency":0,
                "retry":{"factor":0.5}})")
            .size() == 3);
}

TEST_CASE("a document that is not JSON", "[config]") {
  for (const char* text : {"", "{", "{'bucket': 1}", "{} {}", "nope", "{\"a\":1,}", "\xff"}) {
    INFO("text: " << text);
    const drl::Error e = failure(text);
    CHECK(e.kind == ErrorKind::TypeError);
    CHECK(e.message.rfind(kPrefix + "config is not valid JSON: ", 0) == 0);
    // The reader's reason and where it stopped reading.
    CHECK(e.message.find(" at byte ") != std::string::npos);
  }
  // Invalid UTF-8 in the input is not echoed raw: the message must stay valid.
  const drl::Error e = failure("{\"a\xff\":1}");
  CHECK(e.message.find('\xff') == std::string::npos);

  const auto problems = drl::validate_config("{");
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].kind == ErrorKind::TypeError);
  CHECK(problems[0].path.empty());
}

TEST_CASE("a document that is not an object", "[config]") {
  CHECK(failure("[]").message == kPrefix + "config must be an object (received array)");
  CHECK(failure("5").message == kPrefix + "config must be an object (received number)");
  CHECK(failure("null").message == kPrefix + "config must be an object (received null)");
  CHECK(failure(R"("x")").message == kPrefix + "config must be an object (received string)");
  CHECK(failure("true").kind == ErrorKind::TypeError);
}

TEST_CASE("minDelayInMs may not exceed maxDelayInMs once defaults apply", "[config]") {
  drl::Error e = failure(with("/retry", {{"maxDelayInMs", 100}}));
  CHECK(e.kind == ErrorKind::RangeError);
  CHECK(e.message == kPrefix +
                         "retry.minDelayInMs (500, the default) must be at most "
                         "retry.maxDelayInMs (100)");

  e = failure(with("/retry", {{"minDelayInMs", 40000}}));
  CHECK(e.message == kPrefix +
                         "retry.minDelayInMs (40000) must be at most "
                         "retry.maxDelayInMs (30000, the default)");

  e = failure(with("/retry", {{"minDelayInMs", 2000}, {"maxDelayInMs", 1000}}));
  CHECK(e.message == kPrefix + "retry.minDelayInMs (2000) must be at most retry.maxDelayInMs (1000)");

  // Equal is fine; and a broken bound reports only its own rule.
  success(with("/retry", {{"minDelayInMs", 1000}, {"maxDelayInMs", 1000}}));
  e = failure(with("/retry", {{"minDelayInMs", 2000}, {"maxDelayInMs", -1}}));
  CHECK(e.message == kPrefix +
                         "retry.maxDelayInMs must be an integer between 0 and 31622400000 "
                         "(received -1)");
}

TEST_CASE("text echoes the document as given, without defaults", "[config]") {
  for (const std::string& doc :
       {std::string(kMinimal),
        std::string(R"({ "concurrency": 5, "bucket": { "windowInMs": 6e4, "limitPerWindow": 60.0 },
                        "retry": { "factor": 1.5 } })"),
        with("/retry", nullptr), with("/bucket/penaltyRefillFraction", 0.1)}) {
    INFO("document: " << doc);
    auto parsed = drl::parse_config(doc);
    REQUIRE(parsed.ok());
    // The same document (60.0 is the number 60), keys in byte order.
    CHECK(json::parse(parsed->text) == json::parse(doc));
    CHECK(parsed->text == json::parse(parsed->text).dump());
    // The text is itself a valid config meaning the same thing.
    require_same(success(parsed->text), parsed->config);
  }
  CHECK(drl::parse_config(kMinimal)->text.find("retry") == std::string::npos);
}

TEST_CASE("duplicate keys: the last one wins, as in JSON.parse", "[config]") {
  const std::string doc = R"({"bucket":{"limitPerWindow":60,"windowInMs":60000},"concurrency":0,"concurrency":7})";
  CHECK(success(doc).concurrency == 7);
}

TEST_CASE("hostile documents are refused without crashing", "[config]") {
  // Deep nesting would overflow the wasm stack in dump()/merge_patch().
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  drl::Error e = failure(deep);
  CHECK(e.kind == ErrorKind::TypeError);
  CHECK(e.message == kPrefix + "config is nested too deeply (more than 32 levels)");
  e = failure(with("/concurrency", nullptr).insert(1, R"("x":)" + deep + ","));
  CHECK(e.message == kPrefix + "config is nested too deeply (more than 32 levels)");
  success(with("/retry", nullptr));  // shallow nesting is fine

  // A huge received value is abbreviated rather than echoed in full.
  e = failure(with("/concurrency", std::string(100000, 'a')));
  CHECK(e.kind == ErrorKind::TypeError);
  CHECK(e.message.size() < 300);
  CHECK(e.message.find("(received \"aaaa") != std::string::npos);
  CHECK(e.message.find("...)") != std::string::npos);

  // Truncation never splits a UTF-8 sequence.
  std::string accents;
  for (int i = 0; i < 1000; ++i) accents += "\xc3\xa9";  // é
  e = failure(with("/concurrency", accents));
  const std::string& m = e.message;
  const auto dots = m.find("...)");
  REQUIRE(dots != std::string::npos);
  CHECK(static_cast<unsigned char>(m[dots - 2]) == 0xc3);
  CHECK(static_cast<unsigned char>(m[dots - 1]) == 0xa9);

  // Embedded NULs are part of the input, not its end.
  CHECK_FALSE(drl::parse_config(std::string_view(kMinimal).substr(0, 10)).ok());
  // A reader that stopped at a NUL would ignore the rest.
  e = failure(std::string(kMinimal) + std::string(1, '\0') + "junk");
  CHECK(e.kind == ErrorKind::TypeError);
  CHECK(e.message == kPrefix + "config is not valid JSON: a NUL byte at byte 67");
}

TEST_CASE("apply_config_patch merges deeply", "[config]") {
  auto patched = drl::apply_config_patch(kMinimal, R"({"bucket":{"limitPerWindow":10}})");
  REQUIRE(patched.ok());
  CHECK(patched->config.bucket.limit_per_window == 10);
  CHECK(patched->config.bucket.window_ms == 60000);
  CHECK(patched->config.concurrency == 5);
  CHECK(patched->text == R"({"bucket":{"limitPerWindow":10,"windowInMs":60000},"concurrency":5})");

  patched = drl::apply_config_patch(kMinimal, R"({"retry":{"maxRetries":7},"concurrency":8})");
  REQUIRE(patched.ok());
  CHECK(patched->config.retry.max_retries == 7);
  CHECK(patched->config.retry.min_delay_ms == 500);
  CHECK(patched->config.concurrency == 8);

  // An empty patch changes nothing.
  patched = drl::apply_config_patch(kMinimal, "{}");
  REQUIRE(patched.ok());
  CHECK(patched->text == drl::parse_config(kMinimal)->text);
  require_same(patched->config, success(kMinimal));
}

TEST_CASE("apply_config_patch: null removes a key", "[config]") {
  const std::string stored = with("/retry", {{"maxRetries", 9}, {"factor", 3}});
  auto patched = drl::apply_config_patch(stored, R"({"retry":{"maxRetries":null}})");
  REQUIRE(patched.ok());
  CHECK(patched->config.retry.max_retries == 3);  // back to the default
  CHECK(patched->config.retry.factor == 3.0);
  CHECK(patched->text.find("maxRetries") == std::string::npos);

  patched = drl::apply_config_patch(stored, R"({"retry":null})");
  REQUIRE(patched.ok());
  CHECK(patched->text == json::parse(kMinimal).dump());
  require_same(patched->config, success(kMinimal));

  const auto removed = drl::apply_config_patch(kMinimal, R"({"concurrency":null})");
  REQUIRE_FALSE(removed.ok());
  CHECK(removed.error().code == ErrorCode::InvalidConfig);
  CHECK(removed.error().kind == ErrorKind::TypeError);
  CHECK(removed.error().message == kPrefix + "concurrency is required");

  const auto gone = drl::apply_config_patch(kMinimal, R"({"bucket":{"windowInMs":null}})");
  REQUIRE_FALSE(gone.ok());
  CHECK(gone.error().message == kPrefix + "bucket.windowInMs is required");
}

TEST_CASE("apply_config_patch validates the merged document", "[config]") {
  auto patched = drl::apply_config_patch(kMinimal, R"({"bucket":{"windowInMs":0}})");
  REQUIRE_FALSE(patched.ok());
  CHECK(patched.error().code == ErrorCode::InvalidConfig);
  CHECK(patched.error().kind == ErrorKind::RangeError);
  CHECK(patched.error().message ==
        kPrefix + "bucket.windowInMs must be an integer between 1 and 31622400000 (received 0)");

  patched = drl::apply_config_patch(kMinimal, R"({"retry":{"maxDelayInMs":100}})");
  REQUIRE_FALSE(patched.ok());
  CHECK(patched.error().message ==
        kPrefix + "retry.minDelayInMs (500, the default) must be at most retry.maxDelayInMs (100)");

  patched = drl::apply_config_patch(kMinimal, R"({"bucket":{"size":3}})");
  REQUIRE_FALSE(patched.ok());
  CHECK(patched.error().kind == ErrorKind::TypeError);
  CHECK(patched.error().message.find(R"(unknown key "size" in bucket)") != std::string::npos);

  // Non-object values replace wholesale, so a scalar bucket is caught too.
  patched = drl::apply_config_patch(kMinimal, R"({"bucket":5})");
  REQUIRE_FALSE(patched.ok());
  CHECK(patched.error().message == kPrefix + "bucket must be an object (received 5)");
}

TEST_CASE("apply_config_patch: the patch must be a JSON object", "[config]") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"[1]", "array"}, {"null", "null"}, {"5", "number"}, {R"("x")", "string"}, {"true", "boolean"}};
  for (const auto& [patch, type] : cases) {
    INFO("patch: " << patch);
    const auto patched = drl::apply_config_patch(kMinimal, patch);
    REQUIRE_FALSE(patched.ok());
    CHECK(patched.error().code == ErrorCode::InvalidConfig);
    CHECK(patched.error().kind == ErrorKind::TypeError);
    CHECK(patched.error().message == kPrefix + "config patch must be an object (received " + type + ")");
  }

  auto patched = drl::apply_config_patch(kMinimal, "{");
  REQUIRE_FALSE(patched.ok());
  CHECK(patched.error().kind == ErrorKind::TypeError);
  CHECK(patched.error().message.rfind(kPrefix + "config patch is not valid JSON: ", 0) == 0);

  patched = drl::apply_config_patch("not json", "{}");
  REQUIRE_FALSE(patched.ok());
  CHECK(patched.error().code == ErrorCode::InvalidConfig);
  CHECK(patched.error().message.rfind(kPrefix + "stored config is not valid JSON: ", 0) == 0);
}

TEST_CASE("effective_config_json fills every default", "[config]") {
  const drl::Config c = success(kMinimal);
  const std::string effective = drl::effective_config_json(c);
  CHECK(effective ==
        R"({"bucket":{"limitPerWindow":60,"windowInMs":60000,"penaltyRefillFraction":0.5,"unit":"requests"},)"
        R"("concurrency":5,"attemptTimeoutMs":120000,"retry":{"maxRetries":3,"minDelayInMs":500,"maxDelayInMs":30000,)"
        R"("factor":2,"respectRetryAfter":true},"windows":{},"learn":null})");
  // It is a complete config in its own right, meaning the same thing.
  require_same(success(effective), c);

  const drl::Config custom =
      success(with("/retry", {{"maxRetries", 0}, {"factor", 1.25}, {"respectRetryAfter", false}}));
  const std::string custom_json = drl::effective_config_json(custom);
  CHECK(custom_json.find(R"("maxRetries":0)") != std::string::npos);
  CHECK(custom_json.find(R"("factor":1.25)") != std::string::npos);
  CHECK(custom_json.find(R"("respectRetryAfter":false)") != std::string::npos);
  require_same(success(custom_json), custom);
}

TEST_CASE("attemptTimeoutMs: an optional integer from 1 ms to 24 h, 120 s when absent", "[config][timeout]") {
  CHECK(drl::kMaxAttemptTimeoutMs == 86'400'000);
  CHECK(success(kMinimal).attempt_timeout_ms == 120'000);
  CHECK(success(with("/attemptTimeoutMs", 1)).attempt_timeout_ms == 1);
  CHECK(success(with("/attemptTimeoutMs", 5000)).attempt_timeout_ms == 5000);
  CHECK(success(with("/attemptTimeoutMs", 6e4)).attempt_timeout_ms == 60'000);
  CHECK(success(with("/attemptTimeoutMs", 86'400'000)).attempt_timeout_ms == drl::kMaxAttemptTimeoutMs);
  CHECK(success(with("/attemptTimeoutMs", nullptr)).attempt_timeout_ms == 120'000);

  const std::string rule = "attemptTimeoutMs must be an integer between 1 and 86400000";
  for (const auto& [value, shown] : std::vector<std::pair<json, std::string>>{
           {0, "0"}, {-1, "-1"}, {86'400'001, "86400001"}, {1.5, "1.5"}, {0.5, "0.5"}, {1e300, "1e+300"}}) {
    INFO("value " << shown);
    const drl::Error e = failure(with("/attemptTimeoutMs", value));
    CHECK(e.kind == ErrorKind::RangeError);
    CHECK(e.message == kPrefix + rule + " (received " + shown + ")");
  }
  for (const auto& [value, shown] : std::vector<std::pair<json, std::string>>{
           {"5000", R"("5000")"}, {true, "true"}, {json::array({1000}), "[1000]"}, {json::object(), "{}"}}) {
    INFO("value " << shown);
    const drl::Error e = failure(with("/attemptTimeoutMs", value));
    CHECK(e.kind == ErrorKind::TypeError);
    CHECK(e.message ==
          kPrefix + "attemptTimeoutMs must be a number, an integer between 1 and 86400000 (received " + shown + ")");
  }
  // It is a top-level field: inside bucket or retry it is an unknown key.
  CHECK(failure(with("/bucket/attemptTimeoutMs", 5000)).message.find(R"(unknown key "attemptTimeoutMs" in bucket)") !=
        std::string::npos);
  CHECK(failure(with("/retry", {{"attemptTimeoutMs", 5000}}))
            .message.find(R"(unknown key "attemptTimeoutMs" in retry)") != std::string::npos);
  // Reported together with the other problems, in schema order.
  const auto problems = drl::validate_config(R"({"bucket":{"limitPerWindow":60,"windowInMs":60000},
                                                 "concurrency":0,"attemptTimeoutMs":0,"retry":{"factor":0}})");
  REQUIRE(problems.size() == 3);
  CHECK(problems[0].path == "concurrency");
  CHECK(problems[1].path == "attemptTimeoutMs");
  CHECK(problems[2].path == "retry.factor");
}

TEST_CASE("attemptTimeoutMs is echoed as given, and only the effective view fills it", "[config][timeout]") {
  auto given = drl::parse_config(with("/attemptTimeoutMs", 5000));
  REQUIRE(given.ok());
  CHECK(given->text ==
        R"({"attemptTimeoutMs":5000,"bucket":{"limitPerWindow":60,"windowInMs":60000},"concurrency":5})");
  CHECK(drl::effective_config_json(given->config).find(R"("attemptTimeoutMs":5000)") != std::string::npos);
  CHECK(drl::parse_config(kMinimal)->text.find("attemptTimeoutMs") == std::string::npos);
  CHECK(drl::effective_config_json(success(kMinimal)).find(R"("attemptTimeoutMs":120000)") != std::string::npos);
}

TEST_CASE("attemptTimeoutMs by patch: set, replaced, removed back to the default, validated", "[config][timeout]") {
  auto patched = drl::apply_config_patch(kMinimal, R"({"attemptTimeoutMs":3000})");
  REQUIRE(patched.ok());
  CHECK(patched->config.attempt_timeout_ms == 3000);
  CHECK(patched->config.concurrency == 5);
  patched = drl::apply_config_patch(patched->text, R"({"attemptTimeoutMs":9000})");
  REQUIRE(patched.ok());
  CHECK(patched->config.attempt_timeout_ms == 9000);
  patched = drl::apply_config_patch(patched->text, R"({"attemptTimeoutMs":null})");
  REQUIRE(patched.ok());
  CHECK(patched->config.attempt_timeout_ms == 120'000);
  CHECK(patched->text == json::parse(kMinimal).dump());

  patched = drl::apply_config_patch(kMinimal, R"({"attemptTimeoutMs":86400001})");
  REQUIRE_FALSE(patched.ok());
  CHECK(patched.error().kind == ErrorKind::RangeError);
  CHECK(patched.error().message ==
        kPrefix + "attemptTimeoutMs must be an integer between 1 and 86400000 (received 86400001)");
}

TEST_CASE("stats echoes attemptTimeoutMs as given and shows the effective one", "[config][timeout][stats]") {
  drl::Engine e;
  REQUIRE(e.configure(kMinimal, 1000).ok());
  json s = json::parse(*e.stats(1000));
  CHECK_FALSE(s["config"].contains("attemptTimeoutMs"));
  CHECK(s["effective"]["attemptTimeoutMs"] == 120'000);

  REQUIRE(e.reconfigure(R"({"attemptTimeoutMs":2500})", 1000).ok());
  s = json::parse(*e.stats(1000));
  CHECK(s["config"]["attemptTimeoutMs"] == 2500);
  CHECK(s["effective"]["attemptTimeoutMs"] == 2500);
  REQUIRE(e.config() != nullptr);
  CHECK(e.config()->attempt_timeout_ms == 2500);

  // A rejected value changes nothing: neither stored nor echoed.
  const drl::Status bad = e.reconfigure(R"({"attemptTimeoutMs":0})", 1000);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().code == ErrorCode::InvalidConfig);
  CHECK(json::parse(*e.stats(1000))["config"]["attemptTimeoutMs"] == 2500);
  CHECK(e.config()->attempt_timeout_ms == 2500);
}
