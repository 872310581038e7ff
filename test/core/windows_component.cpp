// The windows on their own (core/src/windows.h): which logs a reconfigure
// keeps, the names' numbers, the units counted, and a cost at -1, at and +1
// of a limit.
#include "windows.h"

#include <catch2/catch.hpp>

using namespace drl;
using namespace drl::internal;

namespace {

Config bucket(int64_t limit = 10, std::string unit = "requests") {
  Config config;
  config.bucket.limit_per_window = limit;
  config.bucket.window_ms = 1000;
  config.bucket.unit = std::move(unit);
  return config;
}

Config with(Config config, std::string name, std::string unit, int64_t limit) {
  config.windows.push_back(WindowConfig{std::move(name), std::move(unit), limit, 60'000});
  return config;
}

}  // namespace

TEST_CASE("windows: a cost at -1, at and +1 of a window's limit", "[windows_component]") {
  Windows windows;
  windows.configure(with(bucket(10), "tpm", "tokens", 500));
  const int tokens = windows.counted_unit("tokens");
  for (const int64_t cost : {499, 500, 501}) {
    Call c;
    c.set_cost(windows.primary().unit, 10);  // at the primary's limit: fits
    c.set_cost(tokens, cost);
    CHECK(windows.too_large(c) == (cost > 500 ? &windows[1] : nullptr));
  }
  Call c;
  c.set_cost(windows.primary().unit, 11);
  CHECK(windows.too_large(c) == &windows[0]);
}

TEST_CASE("windows: a reconfigure keeps a log only for the same name counting the same unit", "[windows_component]") {
  Windows windows;
  windows.configure(with(with(bucket(), "tpm", "tokens", 500), "rpm", "requests", 100));
  windows.primary().log.take(1, 1000, 0);
  windows[1].log.take(7, 60'000, 0);
  windows[2].log.take(3, 60'000, 0);
  const uint64_t tpm = windows[1].incarnation;
  const uint64_t rpm = windows[2].incarnation;

  // tpm keeps its log and incarnation under a new limit; rpm now counts
  // tokens: a new window under the same key, whose old rows go.
  CHECK(windows.configure(with(with(bucket(), "rpm", "tokens", 100), "tpm", "tokens", 900)) == std::vector<int>{2});
  CHECK(windows.primary().log.used() == 1);
  CHECK(windows[1].name == "rpm");
  CHECK(windows[1].log.empty());
  CHECK(windows[1].incarnation != rpm);
  CHECK(windows[2].name == "tpm");
  CHECK(windows[2].log.used() == 7);
  CHECK(windows[2].incarnation == tpm);
  CHECK(windows[2].limit == 900);
  CHECK(windows[1].number == 2);  // keys follow the name, not the position
  CHECK(windows[2].number == 1);

  // The primary keeps its log even when its unit changes; a window dropped returns its key.
  CHECK(windows.configure(bucket(10, "tokens")) == std::vector<int>{2, 1});
  CHECK(windows.primary().log.used() == 1);
  CHECK(windows.counted_units() == std::vector<std::string>{"tokens"});
  // Added again, a name gets its old key but a new incarnation.
  windows.configure(with(bucket(10, "tokens"), "tpm", "tokens", 500));
  CHECK(windows[1].number == 1);
  CHECK(windows[1].incarnation != tpm);
  CHECK(windows[1].log.empty());
}

TEST_CASE("windows: units counted once each, names numbered once and for good", "[windows_component]") {
  Windows windows;
  windows.configure(with(with(bucket(10, "tokens"), "a", "requests", 5), "b", "tokens", 500));
  CHECK(windows.counted_units() == std::vector<std::string>{"tokens", "requests"});
  CHECK(windows.unit_list() == "tokens, requests");
  CHECK(windows.counted_unit("requests") == windows[1].unit);
  CHECK(windows.counted_unit("bytes") == -1);
  CHECK(windows.by_number(windows[2].number) == &windows[2]);
  CHECK(windows.by_number(99) == nullptr);
  windows.clear();
  CHECK(windows.empty());
  CHECK(windows.counted_unit("tokens") == -1);  // nothing counts it while unconfigured
  CHECK(windows.number_of("b") == 2);           // but names keep their numbers
  CHECK(windows.unit_index("requests") == 1);
  CHECK(windows.names() == std::vector<std::string>{"", "a", "b"});
}
