// A bucket's lease tree (docs/leases.md, "Turning a tree on"): the `tree`
// field of its config, checked with the rest of the config, and what the
// root's ledger and each child's holder are made from, so the root, its
// children and every host read one rule.
//
// Contract:
// - check_tree() reads a config's `tree` (an object; null means absent)
//   into config.tree after the windows are read, and adds a problem per
//   broken rule, each naming its field ("tree.floors.weur.units.tpm").
// - A child is named by its region: region_child_id() is the same id at the
//   root (floors, the ledger's rows) and at the child (its setup), one to
//   one over valid regions and kRootRegion, and always in [1, 2^53).
// - tree_ledger_config() and tree_child_setup() read only the config: the
//   windows in the engine's order (the primary, then the extra ones).
//
// Example:
//   auto parsed = drl::parse_config(
//       R"({"bucket":{"limitPerWindow":100,"windowInMs":60000},"concurrency":4,)"
//       R"("tree":{"leaseMs":1000,"floors":{"weur":{"units":{"bucket":10},"slots":1}}}})");
//   assert(parsed.ok());
//   assert(parsed->config.tree.enabled);
//   const drl::internal::LedgerConfig ledger = drl::internal::tree_ledger_config(parsed->config);
//   assert(ledger.limits[0] == 100);
//   assert(ledger.lease_ms == 1000);
//   assert(ledger.floors.at(drl::internal::region_child_id("weur")).units[0] == 10);
//   assert(drl::internal::region_child_id("a") == 1);
//   const std::string setup = drl::internal::tree_child_setup(parsed->config, "weur", /*incarnation=*/3);
//   assert(setup.find(R"("incarnation":3)") != std::string::npos);
//   assert(drl::validate_config(R"({"bucket":{"limitPerWindow":1,"windowInMs":1},"concurrency":1,)"
//                               R"("tree":{"leaseMs":0}})")[0].path == "tree.leaseMs");
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "drl/config.h"
#include "json.h"
#include "ledger.h"

namespace drl::internal {

void check_tree(const json::Value& tree, Config& config, std::vector<ConfigProblem>& problems);

// The effective tree, every default filled in, for effective_config_json.
void write_tree(json::Writer& out, const TreeConfig& tree);

// "auto" passes through below these (docs/leases.md, "Sizing", "Too small
// to split"): a window's limit under kPassThroughBelowUnits, or a single slot.
inline constexpr int64_t kPassThroughBelowUnits = 10;
inline constexpr int64_t kPassThroughBelowSlots = 2;

// Whether the children of a tree with this config pass every call through
// to the root (tree.passThrough, "auto" by the limits above); false without
// a tree.
bool tree_passes_through(const Config& config);

// The child id of a region (valid_region, or kRootRegion): its letters and
// digits as the digits 1-36 of a number in base 37, the first the lowest.
uint64_t region_child_id(std::string_view region);
// Its inverse: the region whose child id is `id` ("" for 0).
std::string child_region(uint64_t id);

// The root's ledger, from a config whose tree is enabled.
LedgerConfig tree_ledger_config(const Config& config);

// The setup JSON of Engine::make_lease_child for the child of `region`.
std::string tree_child_setup(const Config& config, std::string_view region, uint64_t incarnation);

}  // namespace drl::internal
