// Learning from the upstream's rate-limit headers (config `learn`): the
// config's rules, tightening a window when the upstream allows less than the
// bucket thinks it has left (never loosening), calls admitted after the
// attempt started counted as not yet seen by the upstream, a remaining of 0
// with a reset pausing everyone, what stats says the upstream said, and
// headers changing nothing without `learn` or when unparsable.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "drl/engine.h"
#include "engine_helpers.h"

using namespace drl;
using namespace drl::test;
using json = nlohmann::json;

namespace {

// 100 requests per minute and 10,000 tokens per minute, learning from the headers.
const std::string kLearning = R"({"bucket":{"limitPerWindow":100,"windowInMs":60000},)"
                              R"("windows":{"tpm":{"unit":"tokens","limitPerWindow":10000,"windowInMs":60000}},)"
                              R"("concurrency":10,"learn":{"headers":"auto"}})";

Ticket arrive_tokens(Engine& e, double tokens, Millis now) {
  auto t = e.arrive(Amounts{{"tokens", tokens}}, now);
  if (!t.ok()) FAIL("arrive failed: " << t.error().message);
  return *t;
}

Report with_headers(std::string_view lines) {
  Report r;
  r.status = 200;
  r.rate_limit_headers = lines;
  return r;
}

json window_stats(Engine& e, const std::string& name, Millis now) {
  auto text = e.stats(now);
  REQUIRE(text.ok());
  const json doc = json::parse(*text);
  for (const json& w : doc["windows"]) {
    if (w["name"] == name) return w;
  }
  FAIL("no window " << name);
  return {};
}

}  // namespace

TEST_CASE("learn: the config names the convention and maps dimensions to windows that exist", "[learn]") {
  CHECK(parse_config(kLearning).ok());
  const auto problems =
      validate_config(R"({"bucket":{"limitPerWindow":1,"windowInMs":1000},"concurrency":1,)"
                      R"("learn":{"headers":"stripe","map":{"tokens":"tpm","2bad":"bucket"},"extra":1}})");
  std::vector<std::string> messages;
  for (const auto& p : problems) messages.push_back(p.message);
  CHECK(
      messages ==
      std::vector<std::string>{
          R"(unknown key "extra" in learn (allowed: headers, map))",
          R"(learn.headers must be one of auto, github, openai, anthropic, ietf, ietf-draft (received "stripe"))",
          R"(learn.map has the key "2bad", which is not a dimension name (a letter, then at most 31 letters, digits, _ or -))",
          R"(learn.map.tokens names window "tpm", which this config does not have (windows: bucket))",
      });
  CHECK(validate_config(R"({"bucket":{"limitPerWindow":1,"windowInMs":1000},"concurrency":1,"learn":"auto"})").size() ==
        1);
  // The effective config says what is read; without learn, null.
  auto parsed = parse_config(kLearning);
  REQUIRE(parsed.ok());
  const json effective = json::parse(effective_config_json(parsed->config));
  CHECK(effective["learn"] == json::parse(R"({"headers":"auto","map":{}})"));
  auto plain = parse_config(config(10, 1000, 1));
  REQUIRE(plain.ok());
  CHECK(json::parse(effective_config_json(plain->config))["learn"].is_null());
}

TEST_CASE("learn: an OpenAI answer with fewer tokens left than the bucket has tightens the tokens window", "[learn]") {
  Engine e = configured(kLearning);
  const Ticket a = arrive_tokens(e, 100, T0);
  drain(e);
  CHECK(window_stats(e, "tpm", T0)["remaining"] == 9900);
  // Someone else spent the same key: the upstream has 5,000 tokens left, for 30 s.
  report(e, a,
         with_headers(
             "x-ratelimit-limit-tokens: 10000\nx-ratelimit-remaining-tokens: 5000\nx-ratelimit-reset-tokens: 30s"),
         T0 + 10);
  drain(e);
  const json tpm = window_stats(e, "tpm", T0 + 10);
  CHECK(tpm["used"] == 5000);
  CHECK(tpm["remaining"] == 5000);
  CHECK(tpm["learned"] == json::parse(R"({"limit":10000,"remaining":5000,"reset":)" + std::to_string(T0 + 10 + 30'000) +
                                      R"(,"seenAt":)" + std::to_string(T0 + 10) + "}"));
  // The requests window heard nothing and is as it was.
  CHECK(window_stats(e, "bucket", T0 + 10)["used"] == 1);
  CHECK(window_stats(e, "bucket", T0 + 10)["learned"].is_null());
  // A call wanting 6,000 tokens now waits (it would have fitted before).
  arrive_tokens(e, 6000, T0 + 20);
  CHECK(drain(e).actions.empty());
}

TEST_CASE("learn: it never loosens: an upstream with more left than the bucket changes nothing", "[learn]") {
  Engine e = configured(kLearning);
  const Ticket a = arrive_tokens(e, 100, T0);
  drain(e);
  report(e, a, with_headers("x-ratelimit-remaining-tokens: 9999999\nx-ratelimit-remaining-requests: 1000"), T0 + 10);
  drain(e);
  CHECK(window_stats(e, "tpm", T0 + 10)["used"] == 100);
  CHECK(window_stats(e, "bucket", T0 + 10)["used"] == 1);
  CHECK(window_stats(e, "bucket", T0 + 10)["learned"]["remaining"] == 1000);
}

TEST_CASE("learn: calls admitted after the attempt started count as not yet seen by the upstream", "[learn]") {
  Engine e = configured(kLearning);
  const Ticket a = arrive(e, T0);
  arrive(e, T0 + 5);
  arrive(e, T0 + 6);
  drain(e);
  // The upstream answered a with 90 left: it had not seen the two calls after a.
  report(e, a, with_headers("x-ratelimit-remaining-requests: 90"), T0 + 10);
  drain(e);
  // It allows 90 - 2 = 88 more; the bucket had 97 left: 9 are recorded as used.
  CHECK(window_stats(e, "bucket", T0 + 10)["used"] == 3 + 9);
}

TEST_CASE("learn: a remaining of 0 with a reset holds every caller until the reset, and no longer", "[learn]") {
  Engine e = configured(kLearning);
  const Ticket a = arrive(e, T0);
  drain(e);
  report(e, a, with_headers("x-ratelimit-remaining-requests: 0\nx-ratelimit-reset-requests: 2s"), T0 + 10);
  drain(e);
  CHECK(window_stats(e, "bucket", T0 + 10)["remaining"] == 0);
  CHECK(inspect(e).forced_until() == 0);  // no penalty: its lift would keep half the limit for a window more
  const Ticket b = arrive(e, T0 + 20);
  CHECK(drain(e).actions.empty());
  e.tick(T0 + 10 + 1999);
  CHECK(drain(e).actions.empty());
  e.tick(T0 + 10 + 2000);
  CHECK(actions(e) == std::vector<Action>{start(b)});
}

TEST_CASE("learn: headers change nothing without learn, and nothing when they cannot be read", "[learn]") {
  SECTION("no learn in the config") {
    Engine e = configured(config(100, 60'000, 10));
    const Ticket a = arrive(e, T0);
    drain(e);
    report(e, a, with_headers("x-ratelimit-remaining: 0\nx-ratelimit-reset: 30"), T0 + 10);
    drain(e);
    const Ticket b = arrive(e, T0 + 20);
    CHECK(actions(e) == std::vector<Action>{start(b)});
    CHECK(inspect(e).used() == 2);
  }
  SECTION("unparsable values") {
    Engine e = configured(kLearning);
    const Ticket a = arrive(e, T0);
    drain(e);
    report(e, a,
           with_headers(
               "x-ratelimit-remaining-requests: NaN\nx-ratelimit-remaining: -5\nratelimit-remaining: 1e3\ngarbage"),
           T0 + 10);
    drain(e);
    CHECK(window_stats(e, "bucket", T0 + 10)["used"] == 1);
    CHECK(window_stats(e, "bucket", T0 + 10)["learned"].is_null());
    const Ticket b = arrive(e, T0 + 20);
    CHECK(actions(e) == std::vector<Action>{start(b)});
  }
}

TEST_CASE("learn: the map sends a dimension to the window it names", "[learn]") {
  Engine e = configured(R"({"bucket":{"limitPerWindow":100,"windowInMs":60000},)"
                        R"("windows":{"daily":{"limitPerWindow":1000,"windowInMs":86400000}},)"
                        R"("concurrency":10,"learn":{"headers":"github","map":{"default":"daily"}}})");
  const Ticket a = arrive(e, T0);
  drain(e);
  report(e, a, with_headers("x-ratelimit-limit: 5000\nx-ratelimit-remaining: 400\nx-ratelimit-reset: 1700003600"),
         T0 + 10);
  drain(e);
  CHECK(window_stats(e, "daily", T0 + 10)["used"] == 600);
  CHECK(window_stats(e, "daily", T0 + 10)["learned"]["limit"] == 5000);
  CHECK(window_stats(e, "bucket", T0 + 10)["used"] == 1);
}

TEST_CASE("learn: a quota goes to the window counting its unit, whichever is the primary", "[learn]") {
  // The primary counts tokens; requests are an extra window.
  Engine e = configured(R"({"bucket":{"unit":"tokens","limitPerWindow":10000,"windowInMs":60000},)"
                        R"("windows":{"rpm":{"unit":"requests","limitPerWindow":100,"windowInMs":60000}},)"
                        R"("concurrency":10,"learn":{"headers":"openai"}})");
  const Ticket a = arrive(e, 100, T0);  // 100 tokens, 1 request
  drain(e);
  report(e, a, with_headers("x-ratelimit-remaining-requests: 50\nx-ratelimit-remaining-tokens: 4000"), T0 + 10);
  drain(e);
  CHECK(window_stats(e, "rpm", T0 + 10)["remaining"] == 50);
  CHECK(window_stats(e, "bucket", T0 + 10)["remaining"] == 4000);
}
