// drl::Engine's read-only views: stats, history, the stored texts, names,
// the output of a step, and the test peer (engine_inspector.h).
#include "drl/engine.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "engine_inspector.h"
#include "scheduler.h"

namespace drl {

namespace {
// What the upstream's headers last said about a window (null: nothing yet).
// A document this engine wrote or already validated, parsed through the
// same (pointer range) instantiation of the parser as every other parse:
// each distinct input type would link a whole second parser into core.wasm.
nlohmann::json parse_checked(const std::string& text) {
  return nlohmann::json::parse(text.data(), text.data() + text.size());
}

nlohmann::json learned_json(const internal::Window& w) {
  if (!w.learned) return nullptr;
  auto field = [](const std::optional<int64_t>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
  return {{"limit", field(w.learned->limit)},
          {"remaining", field(w.learned->remaining)},
          {"reset", field(w.learned->reset_at)},
          {"seenAt", w.learned->seen_at}};
}
}  // namespace

Expected<std::string> Engine::stats(Millis now) {
  if (!scheduler_->cfg) return scheduler_->not_configured();
  scheduler_->advance(now);
  scheduler_->serve();
  const internal::Scheduler& s = *scheduler_;
  const bool penalised = s.penalty.pending();
  // When a window's newest grant leaves it (a penalty's lift refills it then).
  auto reset_of = [&](const internal::Window& w) {
    Millis at = w.log.empty() ? s.now : w.log.newest().at + w.ms;
    return penalised ? std::max(at, s.penalty.until() + w.ms) : at;
  };
  const int64_t used = s.log().used();
  const Millis reset_at = reset_of(s.windows[0]);
  nlohmann::json windows = nlohmann::json::array();
  for (const internal::Window& w : s.windows) {
    const int64_t in_window = w.log.used();
    windows.push_back({
        {"name", w.name},
        {"unit", s.windows.unit_name(w.unit)},
        {"limit", w.limit},
        {"windowInMs", w.ms},
        {"used", in_window},
        {"remaining", penalised ? 0 : std::max<int64_t>(0, w.limit - in_window)},
        {"resetAt", reset_of(w)},
        {"debt", std::max<int64_t>(0, in_window - w.limit)},
        {"learned", learned_json(w)},
    });
  }
  nlohmann::json units = s.windows.counted_units();
  // The queue's first and last calls' predicted starts, and its levels.
  nlohmann::json predicted = {{"head", nullptr}, {"tail", nullptr}};
  nlohmann::json by_priority = nlohmann::json::array();
  if (!s.queue.empty()) {
    const Ticket head = scheduler_->queue.head();
    const Ticket tail = scheduler_->queue.tail();
    if (head != 0) predicted["head"] = s.predict(s.calls.at(head));
    if (tail != 0) predicted["tail"] = s.predict(s.calls.at(tail));
    for (const auto& [priority, live] : s.queue.by_priority())
      by_priority.push_back({{"priority", priority}, {"queued", live}});
  }

  // The newest grants are the interesting ones; a huge log is summarised.
  constexpr size_t kStatsGrants = 1000;
  nlohmann::json grants = nlohmann::json::array();
  const auto& log = s.log().grants();
  const size_t skip = log.size() > kStatsGrants ? log.size() - kStatsGrants : 0;
  for (size_t i = skip; i < log.size(); ++i) grants.push_back({log[i].at, log[i].amount});

  nlohmann::json out = {
      {"config", parse_checked(s.cfg->text)},
      {"effective", parse_checked(effective_config_json(s.config()))},
      {"now", s.now},
      {"limit", s.limit()},
      {"windowInMs", s.window()},
      {"used", used},
      {"remaining", penalised ? 0 : std::max<int64_t>(0, s.limit() - used)},
      {"resetAt", reset_at},
      {"penalised", penalised},
      {"forcedUntil", s.penalty.until() > 0 ? nlohmann::json(s.penalty.until()) : nlohmann::json(nullptr)},
      {"active", s.active},
      {"running", s.running},
      {"restoredSlots", s.slots.restored_held()},
      {"queued", s.queue.size()},
      {"liveGrants", log.size()},
      {"grants", std::move(grants)},
      {"grantsTruncated", skip > 0},
      {"windows", std::move(windows)},
      {"units", std::move(units)},
      {"predictedStart", std::move(predicted)},
      {"queuedByPriority", std::move(by_priority)},
      {"reservation", s.reservations.json(s.windows.list())},
      {"releaseLag", s.lags.json()},
  };
  if (s.lease) {
    // A tree child's holder (docs/leases.md, "Watching a tree").
    internal::LeaseHolder& holder = scheduler_->lease->holder();
    nlohmann::json held = nlohmann::json::array();
    for (size_t k = 0; k < holder.windows(); ++k) held.push_back(holder.held(k, s.now));
    const internal::LeaseMillis rtt = holder.round_trip_ms();
    out["lease"] = {
        {"held", std::move(held)},
        {"freeSlots", holder.free_slots(s.now)},
        {"openLeases", holder.open_leases()},
        {"leasesReceived", holder.leases_received()},
        {"leasesArrivedEnded", holder.leases_arrived_ended()},
        {"roundTripMs", rtt > 0 ? nlohmann::json(rtt) : nlohmann::json(nullptr)},
        {"leaseMs", holder.last_lease_ms() > 0 ? nlohmann::json(holder.last_lease_ms()) : nlohmann::json(nullptr)},
        {"unreachable", holder.unreachable(s.now)}};
  }
  return out.dump();
}

namespace {
// Window names by write number, for the history: the primary is "bucket".
std::vector<std::string> window_names(const std::vector<std::string>& keys) {
  std::vector<std::string> names = keys;
  names[0] = kPrimaryWindow;
  return names;
}
}  // namespace

Expected<std::string> Engine::history_json(int64_t resolution_ms, Millis now) {
  if (!scheduler_->cfg) return scheduler_->not_configured();
  if (resolution_ms != internal::History::kFineMs && resolution_ms != internal::History::kCoarseMs) {
    return Error::make(
        ErrorCode::InvalidArgument, ErrorKind::RangeError,
        "history resolution must be 10000 (10 s) or 60000 (1 min) ms (received " + std::to_string(resolution_ms) + ")");
  }
  scheduler_->history.advance(std::max(scheduler_->now, now));
  return scheduler_->history.json(resolution_ms, window_names(scheduler_->windows.names()));
}

std::vector<HistoryRow> Engine::history_unsaved() {
  if (!scheduler_->history.any_unsaved()) return {};
  return scheduler_->history.unsaved(window_names(scheduler_->windows.names()));
}

Millis Engine::history_keep_from(int64_t resolution_ms) const { return scheduler_->history.keep_from(resolution_ms); }

std::vector<HistoryRow> Engine::history_closed() {
  if (!scheduler_->history.any_closed_fine()) return {};
  return scheduler_->history.closed_fine(window_names(scheduler_->windows.names()));
}

std::optional<Millis> Engine::next_wake() const { return scheduler_->wake; }
bool Engine::configured() const { return scheduler_->cfg.has_value(); }
const std::string& Engine::config_text() const {
  return scheduler_->cfg ? scheduler_->cfg->text : scheduler_->empty_text;
}
std::string Engine::slots_text() const { return scheduler_->slots.text(); }
std::string Engine::reservation_text() const { return scheduler_->reservations.text(scheduler_->windows.list()); }
bool Engine::release_dating() const { return scheduler_->dating; }
std::string Engine::running_slots_text() const { return scheduler_->slots.running_text(); }

const Config* Engine::config() const { return scheduler_->cfg ? &scheduler_->cfg->config : nullptr; }
const std::string& Engine::window_name(int window) const {
  return window >= 0 && static_cast<size_t>(window) < scheduler_->windows.names().size()
             ? scheduler_->windows.names()[static_cast<size_t>(window)]
             : scheduler_->empty_text;
}

int Engine::unit_number(std::string_view unit) const {
  for (size_t i = 0; i < scheduler_->windows.units().size(); ++i) {
    if (scheduler_->windows.units()[i] == unit) return static_cast<int>(i);
  }
  return -1;
}
const std::string& Engine::unit_name(int unit) const {
  return unit >= 0 && static_cast<size_t>(unit) < scheduler_->windows.units().size()
             ? scheduler_->windows.units()[static_cast<size_t>(unit)]
             : scheduler_->empty_text;
}

const std::vector<Write>& Engine::writes() const { return scheduler_->rows.writes(); }
const std::vector<Action>& Engine::actions() const { return scheduler_->actions; }
void Engine::clear_output() { scheduler_->clear_output(); }

namespace internal {

Millis EngineInspector::now() const { return scheduler_.now; }
Millis EngineInspector::forced_until() const { return scheduler_.penalty.until(); }
int64_t EngineInspector::used() const { return scheduler_.log().used(); }
size_t EngineInspector::log_entries() const { return scheduler_.log().size(); }
size_t EngineInspector::active() const { return scheduler_.active; }
size_t EngineInspector::running() const { return scheduler_.running; }
size_t EngineInspector::queued() const { return scheduler_.queue.size(); }
size_t EngineInspector::pending_refunds() const { return scheduler_.rows.owed(); }
int64_t EngineInspector::unwritten(const std::string& window) const {
  for (const Window& w : scheduler_.windows) {
    if (w.name == window) {
      return scheduler_.reservations.unwritten_in(w.number);
    }
  }
  return 0;
}
std::vector<std::pair<Millis, int64_t>> EngineInspector::grants(const std::string& window) const {
  std::vector<std::pair<Millis, int64_t>> out;
  for (const Window& w : scheduler_.windows) {
    if (w.name != window) continue;
    for (const auto& g : w.log.grants()) out.emplace_back(g.at, g.amount);
  }
  return out;
}
std::vector<std::pair<Millis, int64_t>> EngineInspector::grants() const {
  std::vector<std::pair<Millis, int64_t>> out;
  out.reserve(scheduler_.log().size());
  for (const auto& g : scheduler_.log().grants()) out.emplace_back(g.at, g.amount);
  return out;
}

}  // namespace internal

}  // namespace drl
