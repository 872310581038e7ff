#include "windows.h"

#include <algorithm>

namespace drl::internal {

std::vector<int> Windows::configure(const Config& config) {
  std::vector<Window> old = std::move(windows_);
  windows_.clear();
  auto carried = [&](const std::string& name, const std::string& unit) -> Window {
    for (auto it = old.begin(); it != old.end(); ++it) {
      if (it->name == name && unit_name(it->unit) == unit) {
        Window w = std::move(*it);
        old.erase(it);
        return w;
      }
    }
    Window w;
    w.epoch = new_epoch();
    w.incarnation = w.epoch;
    return w;
  };
  Window primary = old.empty() || old[0].number != 0 ? Window{} : std::move(old[0]);
  if (!old.empty() && old[0].number == 0) old.erase(old.begin());
  if (primary.epoch == 0) primary.incarnation = primary.epoch = new_epoch();
  primary.name = kPrimaryWindow;
  primary.number = 0;
  primary.unit = unit_index(config.bucket.unit);
  primary.limit = config.bucket.limit_per_window;
  primary.ms = config.bucket.window_ms;
  primary.log.size_for(primary.cap);
  windows_.push_back(std::move(primary));
  for (const WindowConfig& wc : config.windows) {
    Window w = carried(wc.name, wc.unit);
    w.name = wc.name;
    w.cap = kMaxExtraLogEntries;
    w.number = number_of(wc.name);
    w.unit = unit_index(wc.unit);
    w.limit = wc.limit_per_window;
    w.ms = wc.window_ms;
    w.log.size_for(w.cap);
    windows_.push_back(std::move(w));
  }
  counted_.clear();
  for (const Window& w : windows_) {
    if (std::find(counted_.begin(), counted_.end(), w.unit) == counted_.end()) counted_.push_back(w.unit);
  }
  std::vector<int> gone;
  for (const Window& w : old) gone.push_back(w.number);
  return gone;
}

void Windows::clear() {
  windows_.clear();
  counted_.clear();
}

Window* Windows::by_number(int number) {
  for (Window& w : windows_) {
    if (w.number == number) return &w;
  }
  return nullptr;
}

const Window* Windows::by_number(int number) const { return const_cast<Windows*>(this)->by_number(number); }

const Window* Windows::too_large(const Call& c) const {
  for (const Window& w : windows_) {
    if (c.cost_in(w.unit) > w.limit) return &w;
  }
  return nullptr;
}

int Windows::number_of(const std::string& name) {
  for (size_t i = 1; i < names_.size(); ++i) {
    if (names_[i] == name) return static_cast<int>(i);
  }
  names_.push_back(name);
  return static_cast<int>(names_.size() - 1);
}

int Windows::unit_index(const std::string& name) {
  for (size_t i = 0; i < units_.size(); ++i) {
    if (units_[i] == name) return static_cast<int>(i);
  }
  units_.push_back(name);
  return static_cast<int>(units_.size() - 1);
}

int Windows::counted_unit(std::string_view name) const {
  for (const int unit : counted_) {
    if (unit_name(unit) == name) return unit;
  }
  return -1;
}

std::vector<std::string> Windows::counted_units() const {
  std::vector<std::string> names;
  for (const int unit : counted_) names.push_back(unit_name(unit));
  return names;
}

std::string Windows::unit_list() const {
  std::string out;
  for (const int unit : counted_) out += (out.empty() ? "" : ", ") + unit_name(unit);
  return out;
}

}  // namespace drl::internal
