// A child engine's lease holder and its calls: see lease_child.h.
#include "lease_child.h"

#include <algorithm>

#include "lease_wire.h"

namespace drl::internal {

bool LeaseChild::admit(uint64_t ticket, const std::vector<int64_t>& amounts, uint64_t release, int64_t margin_ms,
                       int64_t now) {
  holder_.set_release_margin(release != 0 ? std::max(least_margin_ms_, margin_ms) : 0);
  // Units first, as a question: a slot acquired for a call whose units
  // are short would sit idle, and the holder counts it running.
  if (!holder_.can_take(amounts, now)) return false;
  const auto slot = holder_.slot_acquire(now);
  if (!slot) return false;
  // Cannot fail: nothing between can_take and here spent units.
  holder_.take(amounts, now, release);
  slots_[ticket] = *slot;
  return true;
}

void LeaseChild::attempt_ended(uint64_t ticket, int64_t now) {
  const auto it = slots_.find(ticket);
  if (it == slots_.end()) return;
  holder_.slot_release(it->second, now);
  slots_.erase(it);
}

std::optional<std::string> LeaseChild::step(std::vector<DemandLevel> queued, int64_t now) {
  holder_.set_queued(std::move(queued), now);
  auto ex = holder_.next_exchange(now);
  if (!ex) return std::nullopt;
  return write_exchange(*ex);
}

bool LeaseChild::on_reply(std::string_view text, int64_t now, std::string& error) {
  const auto grant = read_grant(text, error);
  if (!grant) return false;
  holder_.on_grant(*grant, now);
  return true;
}

bool LeaseChild::on_notice(std::string_view text, int64_t now, std::string& error) {
  const auto notice = read_notice(text, error);
  if (!notice) return false;
  holder_.on_notice(*notice, now);
  return true;
}

}  // namespace drl::internal
