#include "history.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include "json.h"

namespace drl::internal {

// ---- waits -------------------------------------------------------------------

int WaitHistogram::cell(HistoryMillis wait) {
  if (wait < kExact) return static_cast<int>(std::max<HistoryMillis>(0, wait));
  int octave = 63 - __builtin_clzll(static_cast<unsigned long long>(wait));  // 2^octave <= wait
  if (octave > kTopOctave) return kCells - 1;
  // The five bits below the leading one pick one of 32 equal cells.
  const int sub = static_cast<int>((wait >> (octave - 5)) & (kCellsPerOctave - 1));
  return kExact + (octave - 6) * kCellsPerOctave + sub;
}

HistoryMillis WaitHistogram::lower_bound(int cell) {
  if (cell < kExact) return cell;
  const int octave = 6 + (cell - kExact) / kCellsPerOctave;
  const int sub = (cell - kExact) % kCellsPerOctave;
  return static_cast<HistoryMillis>(kCellsPerOctave + sub) << (octave - 5);
}

void WaitHistogram::add(HistoryMillis wait) {
  wait = std::max<HistoryMillis>(0, wait);
  ++cells_[static_cast<size_t>(cell(wait))];
  max_ = count_ == 0 ? wait : std::max(max_, wait);
  ++count_;
}

void WaitHistogram::clear() {
  if (count_ == 0) return;
  cells_.fill(0);
  count_ = 0;
  max_ = 0;
}

HistoryMillis WaitHistogram::percentile(double p) const {
  if (count_ == 0) return 0;
  const uint64_t rank =
      std::max<uint64_t>(1, static_cast<uint64_t>(std::ceil(p / 100.0 * static_cast<double>(count_))));
  uint64_t seen = 0;
  for (int i = 0; i < kCells; ++i) {
    seen += cells_[static_cast<size_t>(i)];
    if (seen >= rank) return std::min(lower_bound(i), max_);
  }
  return max_;
}

// ---- one interval --------------------------------------------------------------

bool HistoryInterval::empty() const {
  if (arrived || started || completed || failed || rate_limited || dropped || deadline || queued || running)
    return false;
  for (uint8_t i = 0; i < n_units; ++i) {
    if (units[i] != 0) return false;
  }
  return true;
}

void HistoryInterval::charge(int window, int64_t amount) {
  for (uint8_t i = 0; i < n_units; ++i) {
    if (unit_windows[i] == window) {
      units[i] += amount;
      return;
    }
  }
  // More windows than slots in one interval (reconfigured many times over):
  // the rest go uncounted rather than allocate.
  if (n_units == kUnitSlots) return;
  unit_windows[n_units] = static_cast<int16_t>(window);
  units[n_units++] = amount;
}

namespace {

const std::string& name_of(const std::vector<std::string>& names, int window) {
  static const std::string unknown;
  return window >= 0 && static_cast<size_t>(window) < names.size() ? names[static_cast<size_t>(window)] : unknown;
}

}  // namespace

std::string history_interval_json(const HistoryInterval& iv, const std::vector<std::string>& names) {
  std::string out = "{\"at\":" + std::to_string(iv.at);
  auto field = [&](const char* name, int64_t value) {
    out += ",\"";
    out += name;
    out += "\":";
    out += std::to_string(value);
  };
  field("arrived", iv.arrived);
  field("started", iv.started);
  field("completed", iv.completed);
  field("failed", iv.failed);
  field("rateLimited", iv.rate_limited);
  field("dropped", iv.dropped);
  field("deadline", iv.deadline);
  out += ",\"units\":{";
  for (uint8_t i = 0; i < iv.n_units; ++i) {
    if (i > 0) out += ',';
    out += json::quote(name_of(names, iv.unit_windows[i]));
    out += ':' + std::to_string(iv.units[i]);
  }
  out += '}';
  field("queued", iv.queued);
  field("running", iv.running);
  if (iv.wait_max < 0) {
    out += ",\"wait\":null}";
  } else {
    out += ",\"wait\":{\"p50\":" + std::to_string(iv.wait_p50) + ",\"p95\":" + std::to_string(iv.wait_p95) +
           ",\"max\":" + std::to_string(iv.wait_max) + "}}";
  }
  return out;
}

// ---- a ring ----------------------------------------------------------------------

HistoryInterval* History::Ring::slot(HistoryMillis at) {
  if (slots.empty()) slots.resize(kept);
  return &slots[static_cast<size_t>(at / resolution_ms) % kept];
}

const HistoryInterval* History::Ring::find(HistoryMillis at) const {
  if (slots.empty() || at < 0) return nullptr;
  const HistoryInterval& s = slots[static_cast<size_t>(at / resolution_ms) % kept];
  return s.at == at ? &s : nullptr;
}

// The open interval ends: it is kept (with its waits summarised) unless empty.
void History::Ring::close(uint32_t queued, uint32_t running) {
  open.queued = queued;
  open.running = running;
  if (waits.count() > 0) {
    open.wait_p50 = waits.percentile(50);
    open.wait_p95 = waits.percentile(95);
    open.wait_max = waits.max();
    waits.clear();
  }
  if (!open.empty()) *slot(open.at) = open;
}

void History::Ring::advance(HistoryMillis now, uint32_t queued, uint32_t running) {
  const HistoryMillis target = now - now % resolution_ms;
  if (open.at < 0) {
    open = HistoryInterval{};
    open.at = target;
    return;
  }
  if (target <= open.at) return;
  close(queued, running);
  // The intervals in between saw no event: each ends with the levels the
  // last event left. Only the newest ring's worth can still be kept, so a
  // gap of any length costs at most one pass over the ring.
  if (queued > 0 || running > 0) {
    const HistoryMillis span = static_cast<HistoryMillis>(kept) * resolution_ms;
    for (HistoryMillis at = std::max(open.at + resolution_ms, target - span); at < target; at += resolution_ms) {
      HistoryInterval held;
      held.at = at;
      held.queued = queued;
      held.running = running;
      *slot(at) = held;
    }
  }
  open = HistoryInterval{};
  open.at = target;
}

std::vector<HistoryRecord> History::Ring::since(HistoryMillis& through, const std::vector<std::string>& names) const {
  std::vector<HistoryRecord> out;
  if (open.at < 0) return out;
  const HistoryMillis newest = open.at - resolution_ms;
  const HistoryMillis oldest = open.at - static_cast<HistoryMillis>(kept) * resolution_ms;
  // through -1: nothing handed out yet, so from the oldest kept (on the grid;
  // through + resolution_ms would be off it).
  const HistoryMillis first =
      through < 0 ? std::max<HistoryMillis>(0, oldest) : std::max(through + resolution_ms, oldest);
  for (HistoryMillis at = first; at <= newest; at += resolution_ms) {
    const HistoryInterval* iv = find(at);
    if (iv && !iv->empty()) out.push_back(HistoryRecord{resolution_ms, at, history_interval_json(*iv, names)});
  }
  through = std::max(through, newest);
  return out;
}

// ---- the history ---------------------------------------------------------------

History::Ring& History::ring(HistoryMillis resolution_ms) { return resolution_ms == kCoarseMs ? coarse_ : fine_; }

const History::Ring* History::find_ring(HistoryMillis resolution_ms) const {
  if (resolution_ms == kFineMs) return &fine_;
  if (resolution_ms == kCoarseMs) return &coarse_;
  return nullptr;
}

void History::advance(HistoryMillis now) {
  now = std::max<HistoryMillis>(0, now);
  // Within both open intervals (nearly every event): nothing closes, and
  // the rings' own check (a division each) is skipped. An open interval
  // starts on its resolution's grid, so this is that check.
  if (fine_.open.at >= 0 && now < fine_.open.at + kFineMs && coarse_.open.at >= 0 &&
      now < coarse_.open.at + kCoarseMs) {
    return;
  }
  fine_.advance(now, queued_, running_);
  coarse_.advance(now, queued_, running_);
}

void History::hold(size_t queued, size_t running) {
  constexpr size_t kMax = std::numeric_limits<uint32_t>::max();
  queued_ = static_cast<uint32_t>(std::min(queued, kMax));
  running_ = static_cast<uint32_t>(std::min(running, kMax));
}

void History::arrived() {
  ++fine_.open.arrived;
  ++coarse_.open.arrived;
}

void History::started(HistoryMillis wait) {
  ++fine_.open.started;
  ++coarse_.open.started;
  fine_.waits.add(wait);
  coarse_.waits.add(wait);
}

void History::completed() {
  ++fine_.open.completed;
  ++coarse_.open.completed;
}

void History::rejected(ErrorCode code) {
  // The caller went away, or its wait ran out; anything else is a failure.
  uint32_t HistoryInterval::*counter = &HistoryInterval::failed;
  if (code == ErrorCode::Cancelled || code == ErrorCode::CallerGone) counter = &HistoryInterval::dropped;
  if (code == ErrorCode::DeadlineExceeded) counter = &HistoryInterval::deadline;
  ++(fine_.open.*counter);
  ++(coarse_.open.*counter);
}

void History::rate_limited() {
  ++fine_.open.rate_limited;
  ++coarse_.open.rate_limited;
}

void History::charge(int window, int64_t amount) {
  fine_.open.charge(window, amount);
  coarse_.open.charge(window, amount);
}

std::string History::json(HistoryMillis resolution_ms, const std::vector<std::string>& names) const {
  const Ring* r = find_ring(resolution_ms);
  if (r == nullptr) return "null";
  std::string out = "{\"resolutionMs\":" + std::to_string(resolution_ms) + ",\"intervals\":[";
  bool first = true;
  if (r->open.at >= 0) {
    for (HistoryMillis at = r->open.at - static_cast<HistoryMillis>(r->kept) * resolution_ms; at < r->open.at;
         at += resolution_ms) {
      const HistoryInterval* iv = r->find(at);
      if (iv == nullptr || iv->empty()) continue;
      if (!first) out += ',';
      first = false;
      out += history_interval_json(*iv, names);
    }
  }
  out += "],\"current\":";
  // The open interval so far: its levels as they stand, its waits unsummarised yet.
  HistoryInterval current = r->open;
  current.at = std::max<HistoryMillis>(0, current.at);
  current.queued = queued_;
  current.running = running_;
  if (r->waits.count() > 0) {
    current.wait_p50 = r->waits.percentile(50);
    current.wait_p95 = r->waits.percentile(95);
    current.wait_max = r->waits.max();
  }
  out += history_interval_json(current, names);
  out += '}';
  return out;
}

std::vector<HistoryRecord> History::unsaved(const std::vector<std::string>& names) {
  std::vector<HistoryRecord> out = fine_.since(fine_.saved_through, names);
  std::vector<HistoryRecord> coarse = coarse_.since(coarse_.saved_through, names);
  out.insert(out.end(), std::make_move_iterator(coarse.begin()), std::make_move_iterator(coarse.end()));
  return out;
}

HistoryMillis History::keep_from(HistoryMillis resolution_ms) const {
  const Ring* r = find_ring(resolution_ms);
  if (r == nullptr || r->open.at < 0) return 0;
  return r->open.at - static_cast<HistoryMillis>(r->kept) * resolution_ms;
}

std::vector<HistoryRecord> History::closed_fine(const std::vector<std::string>& names) {
  return fine_.since(fine_.exported_through, names);
}

namespace {

// A stored count: a non-negative integer, else nullopt (the row is damaged).
std::optional<uint32_t> count_field(const json::Value& doc, const char* name) {
  const json::Value* it = json::find(doc, name);
  if (it == nullptr) return 0u;
  if (!it->IsInt64()) return std::nullopt;
  const int64_t v = it->GetInt64();
  if (v < 0 || v > static_cast<int64_t>(std::numeric_limits<uint32_t>::max())) return std::nullopt;
  return static_cast<uint32_t>(v);
}

std::optional<HistoryMillis> ms_field(const json::Value& doc, const char* name) {
  const json::Value* it = json::find(doc, name);
  if (it == nullptr || !it->IsInt64()) return std::nullopt;
  const int64_t v = it->GetInt64();
  if (v < 0) return std::nullopt;
  return v;
}

}  // namespace

void History::restore(const std::vector<HistoryRecord>& rows, const std::function<int(const std::string&)>& number_of) {
  for (const HistoryRecord& row : rows) {
    if (row.resolution_ms != kFineMs && row.resolution_ms != kCoarseMs) continue;
    Ring& r = ring(row.resolution_ms);
    const HistoryMillis at = row.at;
    if (r.open.at < 0 || at < 0 || at % r.resolution_ms != 0) continue;
    if (at >= r.open.at || at < r.open.at - static_cast<HistoryMillis>(r.kept) * r.resolution_ms) continue;
    // Two levels deep (units, wait): anything deeper is not a row.
    const json::Parsed parsed(row.data, 2);
    const json::Value& doc = parsed.doc;
    if (!doc.IsObject()) continue;
    HistoryInterval iv;
    iv.at = at;
    bool readable = true;
    auto read = [&](const char* name, uint32_t& into) {
      if (auto v = count_field(doc, name))
        into = *v;
      else
        readable = false;
    };
    read("arrived", iv.arrived);
    read("started", iv.started);
    read("completed", iv.completed);
    read("failed", iv.failed);
    read("rateLimited", iv.rate_limited);
    read("dropped", iv.dropped);
    read("deadline", iv.deadline);
    read("queued", iv.queued);
    read("running", iv.running);
    if (const json::Value* units = json::find(doc, "units")) {
      if (!units->IsObject()) readable = false;
      for (auto u = units->MemberBegin(); readable && u != units->MemberEnd(); ++u) {
        if (!u->value.IsInt64()) {
          readable = false;
          break;
        }
        iv.charge(number_of(json::text(u->name)), u->value.GetInt64());
      }
    }
    if (const json::Value* wait = json::find(doc, "wait"); wait != nullptr && !wait->IsNull()) {
      auto p50 = wait->IsObject() ? ms_field(*wait, "p50") : std::nullopt;
      auto p95 = wait->IsObject() ? ms_field(*wait, "p95") : std::nullopt;
      auto max = wait->IsObject() ? ms_field(*wait, "max") : std::nullopt;
      if (p50 && p95 && max) {
        iv.wait_p50 = *p50;
        iv.wait_p95 = *p95;
        iv.wait_max = *max;
      } else {
        readable = false;
      }
    }
    if (!readable || iv.empty()) continue;
    *r.slot(at) = iv;
    r.saved_through = std::max(r.saved_through, at);
    r.exported_through = std::max(r.exported_through, at);
  }
}

namespace {
bool closed_since(HistoryMillis open_at, HistoryMillis resolution_ms, HistoryMillis through) {
  return open_at >= 0 && open_at - resolution_ms > through;
}
}  // namespace

bool History::any_unsaved() const {
  return closed_since(fine_.open.at, kFineMs, fine_.saved_through) ||
         closed_since(coarse_.open.at, kCoarseMs, coarse_.saved_through);
}

bool History::any_closed_fine() const { return closed_since(fine_.open.at, kFineMs, fine_.exported_through); }

void History::mark_unsaved() {
  fine_.saved_through = -1;
  coarse_.saved_through = -1;
}

void History::clear() { *this = History{}; }

}  // namespace drl::internal
