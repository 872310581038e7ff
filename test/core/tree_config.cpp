// A bucket's `tree` (core/src/tree_config.h): checked with the config, each
// problem naming its field; the ledger and each child made from it; an
// engine made a tree child keeps its tree.
#include <catch2/catch.hpp>

#include <set>
#include <string>
#include <utility>

#include "drl/config.h"
#include "drl/engine.h"
#include "lease_wire.h"
#include "tree_config.h"

using drl::Engine;
using drl::internal::child_region;
using drl::internal::read_child_setup;
using drl::internal::region_child_id;
using drl::internal::tree_child_setup;
using drl::internal::tree_ledger_config;

namespace {

std::string with_tree(const std::string& tree) {
  return R"({"bucket":{"limitPerWindow":10,"windowInMs":1000},"windows":{"tpm":{"limitPerWindow":500,)"
         R"("windowInMs":60000,"unit":"tokens"}},"concurrency":3,"tree":)" +
         tree + "}";
}

// The first problem's path and message.
std::pair<std::string, std::string> first_problem(const std::string& tree) {
  const auto problems = drl::validate_config(with_tree(tree));
  REQUIRE(!problems.empty());
  return {problems[0].path, problems[0].message};
}

}  // namespace

TEST_CASE("an empty tree turns it on with every default", "[tree]") {
  auto parsed = drl::parse_config(with_tree("{}"));
  REQUIRE(parsed.ok());
  const drl::TreeConfig& t = parsed->config.tree;
  CHECK(t.enabled);
  CHECK(t.lease_ms == 2000);
  CHECK(t.when_short == "failClosed");
  CHECK(t.clock_slack_ms == 20);
  CHECK(!drl::parse_config(R"({"bucket":{"limitPerWindow":1,"windowInMs":1},"concurrency":1,"tree":null})")
             ->config.tree.enabled);
  // The effective config names every default.
  CHECK(drl::effective_config_json(parsed->config).find(R"("tree":{"leaseMs":2000,"maxLeaseMs":30000,)") !=
        std::string::npos);
}

TEST_CASE("every broken tree rule names its field", "[tree]") {
  CHECK(first_problem(R"({"leaseMs":0})").first == "tree.leaseMs");
  CHECK(first_problem(R"({"driftPpm":1000000})").second ==
        "tree.driftPpm must be an integer between 0 and 100000 (received 1000000)");
  CHECK(first_problem(R"({"whenShort":"wait"})").second ==
        R"(tree.whenShort must be "failClosed", "floor" or "failOpen" (received "wait"))");
  CHECK(first_problem(R"("on")").first == "tree");
  CHECK(first_problem(R"({"lease":1})").second.find("unknown key \"lease\" in tree") == 0);
  CHECK(first_problem(R"({"floors":{"Weur":{}}})").first == "tree.floors.Weur");
  CHECK(first_problem(R"({"floors":{"weur":{"units":{"rpm":1}}}})").second ==
        R"(tree.floors.weur.units names window "rpm", which this config does not have (windows: bucket, tpm))");
  CHECK(first_problem(R"({"floors":{"weur":{"units":{"bucket":6}},"apac":{"units":{"bucket":5}}}})").second ==
        "tree.floors reserve 11 units of window bucket, above its limit 10");
  CHECK(first_problem(R"({"floors":{"weur":{"slots":2},"root":{"slots":2}}})").second ==
        "tree.floors reserve 4 slots, above the concurrency 3");
  CHECK(first_problem(R"({"whenShort":"floor"})").first == "tree.whenShort");
}

TEST_CASE("a quota too small to split passes through, unless passThrough says", "[tree]") {
  const auto passes = [](const std::string& doc) {
    auto parsed = drl::parse_config(doc);
    REQUIRE(parsed.ok());
    return drl::internal::tree_passes_through(parsed->config);
  };
  // "auto": 10 units in the smallest window and 3 slots are enough to lend.
  CHECK(!passes(with_tree("{}")));
  CHECK(passes(with_tree(R"({"passThrough":true})")));
  CHECK(!passes(with_tree(R"({"passThrough":"auto"})")));
  // Below 10 units in any window, or a single slot, the children pass through.
  const std::string tiny = R"({"bucket":{"limitPerWindow":3,"windowInMs":1000},"concurrency":2,"tree":)";
  CHECK(passes(tiny + "{}}"));
  CHECK(!passes(tiny + R"({"passThrough":false}})"));
  CHECK(passes(R"({"bucket":{"limitPerWindow":100,"windowInMs":1000},"windows":{"day":{"limitPerWindow":9,)"
               R"("windowInMs":86400000}},"concurrency":5,"tree":{}})"));
  CHECK(passes(R"({"bucket":{"limitPerWindow":100,"windowInMs":1000},"concurrency":1,"tree":{}})"));
  CHECK(!passes(R"({"bucket":{"limitPerWindow":3,"windowInMs":1000},"concurrency":1})"));
  // The effective config says which was asked for.
  auto parsed = drl::parse_config(with_tree(R"({"passThrough":false})"));
  REQUIRE(parsed.ok());
  CHECK(drl::effective_config_json(parsed->config).find(R"("passThrough":false)") != std::string::npos);
  CHECK(drl::effective_config_json(drl::parse_config(with_tree("{}"))->config).find(R"("passThrough":"auto")") !=
        std::string::npos);
  CHECK(first_problem(R"({"passThrough":"yes"})").second ==
        R"(tree.passThrough must be "auto", true or false (received "yes"))");
  CHECK(first_problem(R"({"passThrough":1})").first == "tree.passThrough");
}

TEST_CASE("regions are one to one with child ids below 2^53", "[tree]") {
  CHECK(drl::valid_region("weur"));
  CHECK(drl::valid_region("a1"));
  CHECK(!drl::valid_region("root"));
  CHECK(!drl::valid_region("1a"));
  CHECK(!drl::valid_region("West"));
  CHECK(!drl::valid_region("abcdefghijk"));
  CHECK(region_child_id("a") == 1);
  CHECK(region_child_id("zz") != region_child_id("z"));
  CHECK(region_child_id("9999999999") < (uint64_t{1} << 53));
  std::set<uint64_t> ids;
  for (const char* r : {"wnam", "enam", "sam", "weur", "eeur", "apac", "oc", "afr", "me", "root", "a", "aa", "ba"}) {
    ids.insert(region_child_id(r));
    CHECK(child_region(region_child_id(r)) == r);  // stats name a child by its region
  }
  CHECK(ids.size() == 13);
  CHECK(child_region(region_child_id("9999999999")) == "9999999999");
}

TEST_CASE("the ledger and each child are made from the config", "[tree]") {
  auto parsed = drl::parse_config(
      with_tree(R"({"leaseMs":700,"whenShort":"floor","floors":{"weur":{"units":{"tpm":50,"bucket":2},"slots":1}}})"));
  REQUIRE(parsed.ok());
  const auto ledger = tree_ledger_config(parsed->config);
  CHECK(ledger.windows_ms == std::vector<int64_t>{1000, 60000});
  CHECK(ledger.limits == std::vector<int64_t>{10, 500});
  CHECK(ledger.concurrency == 3);
  CHECK(ledger.lease_ms == 700);
  CHECK(ledger.floors.at(region_child_id("weur")).units == std::vector<int64_t>{2, 50});
  std::string error;
  auto weur = read_child_setup(tree_child_setup(parsed->config, "weur", 4), error);
  REQUIRE(weur.has_value());
  CHECK(weur->child == region_child_id("weur"));
  CHECK(weur->incarnation == 4);
  CHECK(weur->floor_units == std::vector<int64_t>{2, 50});
  CHECK(weur->floor_slots == 1);
  // Paced by the shortest window (1 s here), as lease_bench measures: a new
  // exchange at most every eighth of it, the rate over all of it.
  CHECK(weur->refresh_ms == 125);
  CHECK(weur->rate_ms == 1000);
  // A region with no floor of its own spends none.
  auto apac = read_child_setup(tree_child_setup(parsed->config, "apac", 1), error);
  REQUIRE(apac.has_value());
  CHECK(apac->floor_units == std::vector<int64_t>{0, 0});
}

TEST_CASE("a child's pacing follows the shortest window, up to 1 s", "[tree]") {
  const auto setup = [](const char* windows) {
    auto parsed = drl::parse_config(std::string(R"({"bucket":{"limitPerWindow":100,"windowInMs":)") + windows +
                                    R"(,"concurrency":2,"tree":{}})");
    REQUIRE(parsed.ok());
    std::string error;
    auto child = read_child_setup(tree_child_setup(parsed->config, "weur", 1), error);
    REQUIRE(child.has_value());
    return std::make_pair(child->refresh_ms, child->rate_ms);
  };
  CHECK(setup("60000}") == std::make_pair<int64_t, int64_t>(1000, 1000));
  CHECK(setup("8000}") == std::make_pair<int64_t, int64_t>(1000, 1000));
  CHECK(setup("7992}") == std::make_pair<int64_t, int64_t>(999, 1000));
  CHECK(setup("1999}") == std::make_pair<int64_t, int64_t>(249, 1000));
  CHECK(setup("999}") == std::make_pair<int64_t, int64_t>(124, 999));
  CHECK(setup("7}") == std::make_pair<int64_t, int64_t>(0, 7));
  // An extra window shorter than the bucket's sets it.
  CHECK(setup(R"(60000},"windows":{"burst":{"limitPerWindow":5,"windowInMs":400}})") ==
        std::make_pair<int64_t, int64_t>(50, 400));
}

TEST_CASE("an engine made a tree child keeps its tree", "[tree]") {
  Engine plain;
  REQUIRE(plain.configure(R"({"bucket":{"limitPerWindow":10,"windowInMs":1000},"concurrency":1})", 0).ok());
  CHECK(plain.make_tree_child("weur", 1, 0).error().message.find("[drl:invalid-config] tree:") == 0);

  Engine e;
  REQUIRE(e.configure(with_tree(R"({"leaseMs":500})"), 0).ok());
  CHECK(e.make_tree_child("Weur", 1, 0).error().code == drl::ErrorCode::InvalidArgument);
  REQUIRE(e.make_tree_child("root", 1, 0).ok());
  CHECK(e.lease_child());
  // Limits may change; the tree may not go.
  CHECK(e.reconfigure(R"({"bucket":{"limitPerWindow":20}})", 1).ok());
  const auto dropped = e.reconfigure(R"({"tree":null})", 2);
  REQUIRE(!dropped.ok());
  CHECK(dropped.error().message.find("[drl:invalid-config] tree:") == 0);
  // Nor a window's length: the root counted what it lent under the old one.
  const auto longer = e.reconfigure(R"({"bucket":{"windowInMs":2000}})", 3);
  REQUIRE(!longer.ok());
  CHECK(longer.error().message.find("bucket.windowInMs is 1000, the config gives 2000") != std::string::npos);
}
