// Every call the engine knows, by ticket: see CallTable in call.h.
#include "call.h"

#include <algorithm>

namespace drl::internal {

namespace {
constexpr size_t kFewestSlots = 16;
}

CallTable::~CallTable() {
  for (Entry* e : slots_) delete e;
}

Call& CallTable::operator[](Ticket t) {
  const size_t at = slot_of(t);
  if (at != slots_.size()) return slots_[at]->second;
  return slots_[add(new Entry{t, Call{}})]->second;
}

std::pair<CallTable::iterator, bool> CallTable::emplace(Ticket t, Call c) {
  const size_t end = slots_.size();
  if (const size_t at = slot_of(t); at != end) return {iterator(slots_.data() + at, slots_.data() + end), false};
  const size_t at = add(new Entry{t, std::move(c)});
  return {iterator(slots_.data() + at, slots_.data() + slots_.size()), true};
}

Call& CallTable::insert(Node node) { return slots_[add(node.release())]->second; }

size_t CallTable::add(Entry* e) {
  // At most half full: probes stay short even when old tickets linger.
  if (2 * (size_ + 1) > slots_.size()) resize(slots_.empty() ? kFewestSlots : 2 * slots_.size());
  ++size_;
  return place(e);
}

CallTable::Node CallTable::extract(Ticket t) {
  size_t hole = slot_of(t);
  if (hole == slots_.size()) return nullptr;
  Node out(slots_[hole]);
  --size_;
  // Backward-shift deletion: each entry after the hole, up to the next
  // empty slot, moves into it unless its home slot lies cyclically in
  // (hole, its slot], so every entry stays reachable from its home.
  const size_t mask = slots_.size() - 1;
  for (size_t i = (hole + 1) & mask; slots_[i] != nullptr; i = (i + 1) & mask) {
    const size_t from = home(slots_[i]->first);
    const bool stays = hole < i ? (hole < from && from <= i) : (hole < from || from <= i);
    if (stays) continue;
    slots_[hole] = slots_[i];
    hole = i;
  }
  slots_[hole] = nullptr;
  if (slots_.size() > kFewestSlots && 8 * size_ < slots_.size()) resize(slots_.size() / 2);
  return out;
}

size_t CallTable::place(Entry* e) {
  const size_t mask = slots_.size() - 1;
  size_t i = home(e->first);
  while (slots_[i] != nullptr) i = (i + 1) & mask;
  slots_[i] = e;
  return i;
}

void CallTable::resize(size_t capacity) {
  std::vector<Entry*> old(capacity, nullptr);
  old.swap(slots_);
  shift_ = 64;
  for (size_t c = capacity; c > 1; c >>= 1) --shift_;
  for (Entry* e : old) {
    if (e != nullptr) place(e);
  }
}

size_t CallTable::longest_probe() const {
  size_t longest = 0;
  const size_t mask = slots_.size() - 1;
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i] != nullptr) longest = std::max(longest, (i - home(slots_[i]->first)) & mask);
  }
  return longest;
}

}  // namespace drl::internal
