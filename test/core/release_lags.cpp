// The release lags on their own (core/src/release_lags.h): the allowance
// follows the largest of the last kReleaseLagSamples lags, capped.
#include "release_lags.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>

using namespace drl;
using namespace drl::internal;

namespace {
// What stats show of the lags ("releaseLag").
nlohmann::json stats_of(const ReleaseLags& lags) {
  std::string text;
  json::Writer out(text);
  lags.write_stats(out);
  return nlohmann::json::parse(text);
}
}  // namespace

TEST_CASE("release lags: the largest sample leaves the ring after kReleaseLagSamples more", "[release_lags]") {
  ReleaseLags lags;
  lags.sample(300);
  for (size_t i = 1; i < kReleaseLagSamples; ++i) lags.sample(static_cast<int64_t>(i % 7));
  CHECK(lags.allowance() == 300);  // still among the last 256
  lags.sample(2);                  // overwrites it
  CHECK(lags.allowance() == 6);
  CHECK(stats_of(lags)["samples"] == kReleaseLagSamples);
  CHECK(stats_of(lags)["max"] == 6);
}

TEST_CASE("release lags: the cap at -1, at and +1", "[release_lags]") {
  ReleaseLags a, b, c;
  a.sample(kMaxReleaseAllowanceMs - 1);
  b.sample(kMaxReleaseAllowanceMs);
  c.sample(kMaxReleaseAllowanceMs + 1);
  CHECK(a.allowance() == kMaxReleaseAllowanceMs - 1);
  CHECK(b.allowance() == kMaxReleaseAllowanceMs);
  CHECK(c.allowance() == kMaxReleaseAllowanceMs);
  CHECK(stats_of(c)["max"] == kMaxReleaseAllowanceMs + 1);  // stats show the real lag
  c.drop_allowance();
  CHECK(c.allowance() == 0);
  c.sample(1);  // switched back on: the samples it kept count again
  CHECK(c.allowance() == kMaxReleaseAllowanceMs);
}

TEST_CASE("release lags: no samples, no percentiles", "[release_lags]") {
  const nlohmann::json j = stats_of(ReleaseLags());
  CHECK(j["samples"] == 0);
  CHECK(j["p50"].is_null());
  CHECK(j["allowance"] == 0);
}
