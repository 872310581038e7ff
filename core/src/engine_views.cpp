// drl::Engine's read-only views: stats, history, the stored texts, names,
// the output of a step, and the test peer (engine_inspector.h).
#include "drl/engine.h"

#include <algorithm>
#include <cmath>

#include "engine_inspector.h"
#include "json.h"
#include "scheduler.h"

namespace drl {

namespace {
// What the upstream's headers last said about a window (null: nothing yet).
void write_learned(internal::json::Writer& out, const internal::Window& w) {
  if (!w.learned) {
    out.null();
    return;
  }
  auto field = [&](const char* name, const std::optional<int64_t>& v) {
    out.key(name);
    if (v) {
      out.num(*v);
    } else {
      out.null();
    }
  };
  out.begin_object();
  field("limit", w.learned->limit);
  field("remaining", w.learned->remaining);
  field("reset", w.learned->reset_at);
  out.key("seenAt").num(w.learned->seen_at).end_object();
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
  // The newest grants are the interesting ones; a huge log is summarised.
  constexpr size_t kStatsGrants = 1000;
  const auto& log = s.log().grants();
  const size_t skip = log.size() > kStatsGrants ? log.size() - kStatsGrants : 0;

  std::string text;
  internal::json::Writer out(text);
  out.begin_object();
  // The stored config is this engine's own canonical text: valid JSON.
  out.key("config").raw(s.cfg->text);
  out.key("effective").raw(effective_config_json(s.config()));
  out.key("now").num(s.now);
  out.key("limit").num(s.limit());
  out.key("windowInMs").num(s.window());
  out.key("used").num(used);
  out.key("remaining").num(penalised ? 0 : std::max<int64_t>(0, s.limit() - used));
  out.key("resetAt").num(reset_at);
  out.key("penalised").boolean(penalised);
  out.key("forcedUntil").positive_or_null(s.penalty.until());
  out.key("active").num(s.active);
  out.key("running").num(s.running);
  out.key("restoredSlots").num(s.slots.restored_held());
  out.key("queued").num(s.queue.size());
  out.key("liveGrants").num(log.size());
  out.key("grants").begin_array();
  for (size_t i = skip; i < log.size(); ++i) out.begin_array().num(log[i].at).num(log[i].amount).end_array();
  out.end_array();
  out.key("grantsTruncated").boolean(skip > 0);
  out.key("windows").begin_array();
  for (const internal::Window& w : s.windows) {
    const int64_t in_window = w.log.used();
    out.begin_object();
    out.key("name").str(w.name);
    out.key("unit").str(s.windows.unit_name(w.unit));
    out.key("limit").num(w.limit);
    out.key("windowInMs").num(w.ms);
    out.key("used").num(in_window);
    out.key("remaining").num(penalised ? 0 : std::max<int64_t>(0, w.limit - in_window));
    out.key("resetAt").num(reset_of(w));
    out.key("debt").num(std::max<int64_t>(0, in_window - w.limit));
    write_learned(out.key("learned"), w);
    out.end_object();
  }
  out.end_array();
  out.key("units").begin_array();
  for (const std::string& unit : s.windows.counted_units()) out.str(unit);
  out.end_array();
  // The queue's first and last calls' predicted starts, and its levels.
  const Ticket head = s.queue.empty() ? 0 : scheduler_->queue.head();
  const Ticket tail = s.queue.empty() ? 0 : scheduler_->queue.tail();
  out.key("predictedStart").begin_object().key("head");
  if (head != 0) {
    out.num(s.predict(s.calls.at(head)));
  } else {
    out.null();
  }
  out.key("tail");
  if (tail != 0) {
    out.num(s.predict(s.calls.at(tail)));
  } else {
    out.null();
  }
  out.end_object();
  out.key("queuedByPriority").begin_array();
  if (!s.queue.empty()) {
    for (const auto& [priority, live] : s.queue.by_priority()) {
      out.begin_object().key("priority").num(priority).key("queued").num(live).end_object();
    }
  }
  out.end_array();
  s.reservations.write_stats(out.key("reservation"), s.windows.list());
  s.lags.write_stats(out.key("releaseLag"));
  if (s.lease) {
    // A tree child's holder (docs/leases.md, "Watching a tree").
    internal::LeaseHolder& holder = scheduler_->lease->holder();
    out.key("lease").begin_object();
    out.key("held").begin_array();
    for (size_t k = 0; k < holder.windows(); ++k) out.num(holder.held(k, s.now));
    out.end_array();
    out.key("freeSlots").num(holder.free_slots(s.now));
    out.key("openLeases").num(holder.open_leases());
    out.key("leasesReceived").num(holder.leases_received());
    out.key("leasesArrivedEnded").num(holder.leases_arrived_ended());
    out.key("roundTripMs").positive_or_null(holder.round_trip_ms());
    out.key("leaseMs").positive_or_null(holder.last_lease_ms());
    out.key("unreachable").boolean(holder.unreachable(s.now));
    out.end_object();
  }
  out.end_object();
  return text;
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
