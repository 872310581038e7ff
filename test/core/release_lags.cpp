// The release lags on their own (core/src/release_lags.h): the allowance
// follows the largest of the last kReleaseLagSamples lags, capped.
#include "release_lags.h"

#include <catch2/catch.hpp>

using namespace drl;
using namespace drl::internal;

TEST_CASE("release lags: the largest sample leaves the ring after kReleaseLagSamples more", "[release_lags]") {
  ReleaseLags lags;
  lags.sample(300);
  for (size_t i = 1; i < kReleaseLagSamples; ++i) lags.sample(static_cast<int64_t>(i % 7));
  CHECK(lags.allowance() == 300);  // still among the last 256
  lags.sample(2);                  // overwrites it
  CHECK(lags.allowance() == 6);
  CHECK(lags.json()["samples"] == kReleaseLagSamples);
  CHECK(lags.json()["max"] == 6);
}

TEST_CASE("release lags: the cap at -1, at and +1", "[release_lags]") {
  ReleaseLags a, b, c;
  a.sample(kMaxReleaseAllowanceMs - 1);
  b.sample(kMaxReleaseAllowanceMs);
  c.sample(kMaxReleaseAllowanceMs + 1);
  CHECK(a.allowance() == kMaxReleaseAllowanceMs - 1);
  CHECK(b.allowance() == kMaxReleaseAllowanceMs);
  CHECK(c.allowance() == kMaxReleaseAllowanceMs);
  CHECK(c.json()["max"] == kMaxReleaseAllowanceMs + 1);  // stats show the real lag
  c.drop_allowance();
  CHECK(c.allowance() == 0);
  c.sample(1);  // switched back on: the samples it kept count again
  CHECK(c.allowance() == kMaxReleaseAllowanceMs);
}

TEST_CASE("release lags: no samples, no percentiles", "[release_lags]") {
  const nlohmann::json j = ReleaseLags().json();
  CHECK(j["samples"] == 0);
  CHECK(j["p50"].is_null());
  CHECK(j["allowance"] == 0);
}
