#include "slots_record.h"

#include <algorithm>
#include <cmath>

#include "drl/config.h"
#include "json.h"

namespace drl::internal {

void SlotsRecord::started(Millis at) {
  grew_ = true;
  if (live_.empty() || live_.back().at < at) {
    live_.push_back({at, 1});
    ++live_entries_;
    return;
  }
  size_t i = live_.size();
  while (i > 0 && live_[i - 1].at >= at) --i;  // from the back: a start is rarely much out of order
  if (i < live_.size() && live_[i].at == at) {
    if (live_[i].count++ == 0) ++live_entries_;
  } else {
    live_.insert(i, {at, 1});
    ++live_entries_;
  }
}

size_t SlotsRecord::live_index(Millis at) const {
  if (!live_.empty() && live_.front().at == at) return 0;
  const size_t lo = live_.partition_point([at](const Started& entry) { return entry.at < at; });
  return lo < live_.size() && live_[lo].at == at ? lo : live_.size();
}

void SlotsRecord::ended(Millis at) {
  stale_ = true;
  const size_t i = live_index(at);
  if (i == live_.size() || live_[i].count <= 0) return;
  if (--live_[i].count > 0) return;
  --live_entries_;
  while (!live_.empty() && live_.front().count == 0) live_.pop_front();
  while (!live_.empty() && live_.back().count == 0) live_.pop_back();
  if (live_.size() < 64 || live_.size() <= 2 * live_entries_) return;
  Ring<Started> kept;
  for (const auto& entry : live_) {
    if (entry.count > 0) kept.push_back(entry);
  }
  live_ = std::move(kept);
}

int64_t SlotsRecord::free_expired(Millis now, Millis timeout) {
  int64_t freed = 0;
  while (!restored_.empty() && restored_.begin()->first + timeout <= now) {
    freed += restored_.begin()->second;
    restored_.erase(restored_.begin());
    stale_ = true;
  }
  restored_held_ -= freed;
  return freed;
}

std::optional<Millis> SlotsRecord::first_restored_free(Millis timeout) const {
  if (restored_.empty()) return std::nullopt;
  return restored_.begin()->first + timeout;
}

// Whether the record, restored now, would hold at least as many slots as
// may be running at every moment from now on. Each entry is held until its
// start + timeout, so that holds when, for every start s of a running
// attempt (live or restored), the record has at least as many entries dated
// s or later as there are running attempts started s or later.
bool SlotsRecord::covers(size_t running) const {
  const int64_t in_flight = static_cast<int64_t>(running) + restored_held_;
  if (in_flight == 0) return true;
  // The common case, in O(1): the record lists at least as many, and its
  // earliest entry is dated no earlier than the newest running start.
  if (in_flight <= recorded_total_) {
    Millis newest = live_.empty() ? 0 : live_.back().at;  // (never a 0 count: see ended)
    if (!restored_.empty()) newest = std::max(newest, restored_.rbegin()->first);
    if (newest <= recorded_.begin()->first) return true;
  }
  size_t live = live_.size();  // walked from the newest: live_[live - 1] is next
  auto old = restored_.rbegin();
  auto held = recorded_.rbegin();
  int64_t need = 0;
  int64_t have = 0;
  while (live > 0 || old != restored_.rend()) {
    Millis at;
    if (old == restored_.rend() || (live > 0 && live_[live - 1].at >= old->first)) {
      at = live_[live - 1].at;
      need += live_[--live].count;  // (a 0 count adds nothing, and its check is one already passed)
    } else {
      at = old->first;
      need += (old++)->second;
    }
    while (held != recorded_.rend() && held->first >= at) have += (held++)->second;
    if (have < need) return false;
  }
  return true;
}

// A record that lists more slots than are held rides on a step that stores
// something anyway, but at most once a cover span: under a load whose
// running count rises and falls, riding at every dip would be undone by the
// next rise (a start the smaller record does not cover). Once no attempt
// has run for kIdleSlotsWriteMs it is written alone: a bucket that goes
// quiet records that nothing runs before it can be evicted, and a cold
// start does not hold finished callbacks' slots.
SlotsRecord::Decision SlotsRecord::step(Millis now, Millis span, size_t running, bool stores) {
  if (grew_) {
    grew_ = false;
    if (!covers(running)) return Write;
  }
  const bool rides = stale_ && now >= recorded_at_ + span &&
                     recorded_total_ > static_cast<int64_t>(running) + restored_held_ && stores;
  if (forced_ || rides) return Write;
  if (!stale_ || running > 0) {
    write_due_.reset();
  } else if (write_due_ && now >= *write_due_) {
    return Write;
  } else if (!write_due_) {
    write_due_ = now + kIdleSlotsWriteMs;
  }
  return Keep;
}

// Restored slots as they are, live attempts as if started a span later.
void SlotsRecord::write(Millis now, Millis span) {
  recorded_ = restored_;
  recorded_total_ = restored_held_;
  for (const auto& [at, n] : live_) {
    if (n == 0) continue;
    recorded_[at + span] += n;
    recorded_total_ += n;
  }
  recorded_at_ = now;
  stale_ = false;
  forced_ = false;
  write_due_.reset();
}

std::string SlotsRecord::entries_text(const std::map<Millis, int64_t>& slots) {
  std::string out;
  for (const auto& [at, n] : slots) {
    if (!out.empty()) out += ',';
    out += std::to_string(at) + ':' + std::to_string(n);
  }
  return out;
}

// With a key, the record is led by its writer's entry, "~<key>@<written
// at>": the key that signs the identities of the attempts it covers, and
// when. (A record of an older release has none; a release that does not
// know the entry skips it, as any entry without a colon.)
std::string SlotsRecord::text() const {
  std::string body = entries_text(recorded_);
  if (!key_) return body;
  std::string head = "~" + slot_key_text(*key_) + "@" + std::to_string(recorded_at_);
  return body.empty() ? head : head + "," + body;
}

std::string SlotsRecord::running_text() const {
  std::map<Millis, int64_t> held = restored_;
  for (const auto& [at, n] : live_) {
    if (n > 0) held[at] += n;
  }
  return entries_text(held);
}

// The writer's entry of a restored record, if it is one: "~<key>@<at>".
bool SlotsRecord::restore_writer(std::string_view entry) {
  if (entry.empty() || entry[0] != '~') return false;
  const size_t sep = entry.find('@');
  if (sep == std::string_view::npos) return true;  // damaged: no writer, nothing freed early
  const auto key = parse_slot_key(entry.substr(1, sep - 1));
  const std::optional<double> at = json::read_number(entry.substr(sep + 1));
  if (!key || !at || *at < 0) return true;
  writer_ = Writer{*key, static_cast<Millis>(*at), -1};
  return true;
}

int64_t SlotsRecord::restore(std::string_view text, Millis now, Millis timeout) {
  writer_.reset();
  int64_t added = 0;
  double latest_stored = -1;  // the latest entry as stored, before a clamp to now
  bool changed = false;       // the stored record says anything but what is now held
  size_t i = 0;
  while (i < text.size()) {
    size_t end = text.find(',', i);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view entry = text.substr(i, end - i);
    i = end + 1;
    if (restore_writer(entry)) continue;
    const size_t colon = entry.find(':');
    const bool was_changed = changed;
    changed = true;  // until this entry is restored exactly as written (below)
    if (colon == std::string_view::npos) continue;
    // Numbers as JSON writes them: one too large for a double is damage.
    const std::optional<double> at_number = json::read_number(entry.substr(0, colon));
    if (!at_number || *at_number < 0) continue;
    const std::optional<double> n_number = json::read_number(entry.substr(colon + 1));
    if (!n_number || *n_number < 1) continue;
    const double at_raw = *at_number;
    const double n_raw = *n_number;
    // Clamped before the conversion: a time beyond int64 is damage, not a cast to overflow.
    const Millis at = static_cast<Millis>(std::min(std::ceil(at_raw), static_cast<double>(now)));
    const int64_t n = static_cast<int64_t>(std::min(std::floor(n_raw), static_cast<double>(kMaxConcurrency)));
    latest_stored = std::max(latest_stored, std::ceil(at_raw));
    if (at + timeout <= now) continue;  // can no longer be running
    // Out of order, or a second entry for a start already held: rewritten in order.
    const bool merged = !restored_.empty() && restored_.rbegin()->first >= at;
    restored_[at] += n;
    recorded_[at] += n;
    recorded_total_ += n;
    restored_held_ += n;
    added += n;
    if (!merged && entry == std::to_string(at) + ':' + std::to_string(n)) changed = was_changed;
  }
  // Rewritten only if normalising changed something (an entry dropped,
  // clamped, rounded or merged); a record restored exactly is left alone.
  if (changed) stale_ = true;
  // A writer's entry counts only with the entries it led.
  if (writer_) writer_->latest_entry = static_cast<Millis>(std::min(latest_stored, 9e15));
  return added;
}

bool SlotsRecord::release_finished(const SlotIdentity& id, double ran_ms, Millis now, Millis timeout) {
  if (!writer_ || restored_.empty()) return false;
  if (slot_tag(writer_->key, id) != id.tag) return false;
  const std::pair<Ticket, uint32_t> attempt{id.ticket, static_cast<uint32_t>(id.attempt)};
  if (finished_.count(attempt)) return false;
  if (id.key_at + timeout <= now) return false;  // timed out: its slot went by time
  const double ended = static_cast<double>(id.started) + ran_ms;
  if (ended <= static_cast<double>(writer_->written_at) || ended <= static_cast<double>(writer_->latest_entry)) {
    return false;
  }
  auto entry = restored_.lower_bound(id.key_at);
  if (entry == restored_.end()) return false;
  finished_.insert(attempt);
  if (--entry->second == 0) restored_.erase(entry);
  --restored_held_;
  forced_ = true;  // a second restart must not hold it again
  return true;
}

int64_t SlotsRecord::erase() {
  const int64_t held = restored_held_;
  restored_.clear();
  restored_held_ = 0;
  recorded_.clear();
  recorded_total_ = 0;
  grew_ = live_entries_ > 0;
  return held;
}

}  // namespace drl::internal
