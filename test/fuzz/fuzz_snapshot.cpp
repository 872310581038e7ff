// Fuzzes restore(): arbitrary stored rows (raw doubles, so NaN, infinities,
// negatives, duplicates, disorder and absurd magnitudes all occur) and an
// arbitrary reservation record (any bytes, JSON or not) must
// never crash or wedge the engine, and what it rebuilds must be sane: a log
// within its cap, sorted, positive amounts, a bounded penalty, and storage
// writes that leave the rows equal to the engine's log.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>

#include "drl/engine.h"
#include "engine_inspector.h"

namespace {

using drl::internal::inspect;

double take_double(const uint8_t*& data, size_t& size) {
  double v = 0;
  if (size >= sizeof v) {
    std::memcpy(&v, data, sizeof v);
    data += sizeof v;
    size -= sizeof v;
  }
  return v;
}

void require(bool ok) {
  if (!ok) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const uint8_t selector = data[0];
  ++data;
  --size;
  static const char* kConfigs[] = {
      R"({"bucket":{"limitPerWindow":3,"windowInMs":1000},"concurrency":1})",
      R"({"bucket":{"limitPerWindow":1000000,"windowInMs":86400000,"penaltyRefillFraction":0},"concurrency":4})",
      R"({"bucket":{"limitPerWindow":1,"windowInMs":1},"concurrency":2,"retry":{"maxRetries":0}})",
      R"({"bucket":"broken"})",
  };
  drl::Snapshot snap;
  if ((selector & 7) != 7) snap.config_text = kConfigs[selector & 3];
  snap.lift_pending = (selector & 8) != 0;
  const int64_t now = 1'700'000'000'000 + static_cast<int64_t>(selector) * 997;
  snap.forced_until = take_double(data, size);
  if ((selector & 16) != 0 && size > 0) {
    // A reservation record of the next data[0] bytes (as many as remain).
    const size_t len = std::min<size_t>(data[0], size - 1);
    snap.reservation_text = std::string(reinterpret_cast<const char*>(data + 1), len);
    data += 1 + len;
    size -= 1 + len;
  }
  while (size >= 16) {
    const double at = take_double(data, size);
    const double amount = take_double(data, size);
    snap.grants.emplace_back(at, amount);
  }

  drl::Engine engine;
  engine.restore(snap, now);
  if (!snap.config_text || !engine.configured()) return 0;

  // Apply the repair writes to the rows as a host would.
  std::map<int64_t, int64_t> stored;
  bool cleared = false;
  for (const auto& w : engine.writes()) {
    if (w.kind == drl::WriteKind::ClearGrants) {
      stored.clear();
      cleared = true;
    } else if (w.kind == drl::WriteKind::PutGrant) {
      stored[w.at] = w.amount;
    }
  }
  const auto grants = inspect(engine).grants();
  require(grants.size() <= static_cast<size_t>(drl::kMaxLogEntries));
  int64_t sum = 0;
  for (size_t i = 0; i < grants.size(); ++i) {
    require(grants[i].second > 0);
    if (i > 0) require(grants[i - 1].first < grants[i].first);
    sum += grants[i].second;
  }
  require(sum == inspect(engine).used());
  if (cleared) {
    // After a repair the stored rows are exactly the (unexpired) log.
    for (const auto& [at, amount] : grants) require(stored.count(at) && stored[at] == amount);
  }
  require(inspect(engine).forced_until() >= 0 && inspect(engine).forced_until() <= now + drl::kMaxDelayMs);
  // With reservations off a restored record is stored as rows, never kept.
  require(engine.reservation_text().empty());

  // The engine still works: a caller is either started or given a wake time.
  engine.clear_output();
  auto ticket = engine.arrive(1, now);
  require(ticket.ok());
  require(!engine.actions().empty() || engine.next_wake().has_value());
  require(engine.stats(now).ok());
  return 0;
}
