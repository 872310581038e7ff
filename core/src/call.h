// A call as the engine holds it from arrival to its outcome: its costs,
// its place in the queue, and what its current attempt took in each window
// (Call, plain data), and the table of calls by ticket (CallTable). The
// scheduler (scheduler.h) moves a call through its phases:
//
//   Queued -> Running -> (Backoff | Ready) -> Running -> ... -> erased
//
// A call is erased when its caller has its outcome (or is gone); its
// ticket then names nothing, which is how the wait queue (wait_queue.h)
// knows an entry is stale.
//
// Example:
//   drl::internal::Calls calls;
//   drl::internal::Call queued;
//   queued.set_cost(0, 3);  // 3 of unit 0
//   drl::internal::Call& mine = calls.emplace(7, queued).first->second;
//   assert(calls.at(7).cost_in(0) == 3);
//   for (drl::Ticket t = 8; t < 100; ++t) calls.emplace(t, drl::internal::Call{});  // it grows meanwhile
//   assert(&calls.at(7) == &mine);  // a call stays where it is
//   drl::internal::CallTable::Node node = calls.extract(7);
//   assert(calls.count(7) == 0);
//   assert(node->second.cost_in(0) == 3);  // out of the table, intact
//   assert(calls.size() == 92);
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "drl/config.h"
#include "drl/engine.h"

namespace drl::internal {

enum class Phase { Queued, Running, Backoff, Ready };

// Whether anyone still awaits a call's outcome. Only a running call can lose
// its caller and live on (its work is in flight); any other call is dropped
// at once.
enum class Caller {
  Waiting,    // the caller awaits the outcome
  Cancelled,  // went away while the callback ran: settle as Cancelled when it ends
  Settled,    // already rejected (erase) while the callback ran: nothing left to say
};

// What one attempt took in one window, so its report's usage can correct
// it: the amount, and the grant's time in the log of that window (by its
// number), as the log was then (epoch). An amount of 0: the window counted none
// of this call's cost.
struct Take {
  int window = -1;  // its number (Window::number)
  uint64_t epoch = 0;
  Millis at = 0;
  int64_t amount = 0;
  uint64_t incarnation = 0;  // the window's (Window::incarnation) when taken
};

// One unit a call counts in: what it costs there, and, while it is queued,
// what its level had been pushed in that unit before it (Level::pushed), so
// the demand ahead of it is known in O(1) (WaitQueue::demand_through).
struct UnitCost {
  int32_t unit = 0;  // its number (Windows::units)
  int64_t amount = 0;
  int64_t before = 0;
};

// A call's units: two inline (a call counts one or two units almost always,
// and a queued call then allocates nothing for them), more beyond.
class UnitCosts {
 public:
  size_t size() const { return n_ <= kInline ? n_ : kInline + more_.size(); }
  const UnitCost& operator[](size_t i) const { return i < kInline ? inline_[i] : more_[i - kInline]; }
  UnitCost& operator[](size_t i) { return i < kInline ? inline_[i] : more_[i - kInline]; }
  // Inlined: each window asks it on every take (about 2% of a wasm take as a call).
  [[gnu::always_inline]] const UnitCost* find(int unit) const {
    for (size_t i = 0; i < size(); ++i) {
      if ((*this)[i].unit == unit) return &(*this)[i];
    }
    return nullptr;
  }
  // The entry of `unit`, added (costing 0) if missing.
  UnitCost& of(int unit) {
    for (size_t i = 0; i < size(); ++i) {
      if ((*this)[i].unit == unit) return (*this)[i];
    }
    UnitCost& added = n_ < kInline ? inline_[n_] : more_.emplace_back();
    ++n_;
    added = UnitCost{unit, 0, 0};
    return added;
  }

 private:
  static constexpr size_t kInline = 2;
  std::array<UnitCost, kInline> inline_{};
  std::vector<UnitCost> more_;
  uint8_t n_ = 0;
};

struct Call {
  // The cost per unit, fixed at arrival (and, queued, the demand before it).
  UnitCosts units;
  // The current (or last) attempt's reservations, one per window; allocated
  // when the call first starts, so a queued call holds none.
  std::vector<Take> takes;
  uint32_t attempt = 0;  // attempts started so far
  Phase phase = Phase::Queued;
  Millis due = 0;         // Backoff: when the next attempt may take
  Millis started_at = 0;  // Running: the attempt's grant time, its key in the slots record
  Millis deadline = 0;    // Running: when the attempt times out
  Millis timeout = 0;     // Running: the attemptTimeoutMs it runs under (a reconfigure keeps it)
  Caller caller = Caller::Waiting;
  int32_t priority = 0;    // its queue level (Waiting::priority)
  Millis wait_until = -1;  // Queued: when it gives up waiting for its first start; -1: never
  Millis arrived_at = 0;   // for its wait in the history
  bool withdrawn = false;  // the caller gave up while its callback ran: not retried
  // Running: the attempt's deadline is still in force (AttemptDeadlines);
  // cleared when the attempt ends, before its phase changes.
  bool timed = false;
  // Waiting::max_retries, fixed at arrival; -1: the bucket's retry.maxRetries
  // when each retry is decided. (Beside `withdrawn` and `timed`, in their
  // padding: a queued call costs no more memory for them.)
  int32_t max_retries = -1;

  void set_cost(int unit, int64_t amount) { units.of(unit).amount = amount; }
  int64_t cost_in(int unit) const {
    const UnitCost* u = units.find(unit);
    return u ? u->amount : 0;
  }
  int64_t before_in(int unit) const {
    const UnitCost* u = units.find(unit);
    return u ? u->before : 0;
  }
  const Take* take_in(int window) const {
    for (const Take& t : takes) {
      if (t.window == window) return &t;
    }
    return nullptr;
  }
};

// Every call the engine knows, by ticket: a map with the part of
// std::unordered_map's interface the engine uses, built for its keys.
//
// An open-addressed array of pointers (linear probing, at most half full);
// each call lives in its own node, so a Call& stays valid while other
// calls come and go, as it did in std::unordered_map. It replaced that map
// to take its code out of core.wasm (4.7 KB: prime-sized buckets, their
// rehash, node handles); a take and a queued arrival cost no more than
// before (`npm run bench`).
//
// Tickets are issued in sequence, and the live ones form runs (a long
// queue of old calls, new ones arriving after it). `ticket mod capacity`
// would lay each run out as one block of slots, which new tickets reach
// once they wrap around the array: every insertion and every stale
// lookup then walks the block (5 us an arrival with 10,000 queued, in
// core.wasm). Fibonacci hashing (ticket x 2^64/phi, top bits) scatters
// consecutive tickets, so probes stay short whatever the pattern.
//
// - Iterators are invalidated by every insertion and erasure; references
//   to calls only by their own erasure (extract() keeps the node alive).
// - Iteration order is the table's, as unspecified as unordered_map's.
// - An erasure that leaves it under 1/8 full halves it (down to 16 slots),
//   so a burst of 100,000 queued calls does not hold its array forever.
class CallTable {
 public:
  struct Entry {
    Ticket first;  // as a map's value_type: it->first, it->second
    Call second;
  };
  // A call's node out of the table: the scheduler keeps a few to reuse.
  using Node = std::unique_ptr<Entry>;

  template <class E>
  class Iter {
   public:
    Iter(Entry* const* at, Entry* const* end) : at_(at), end_(end) { skip(); }
    E& operator*() const { return **at_; }
    E* operator->() const { return *at_; }
    Iter& operator++() {
      ++at_;
      skip();
      return *this;
    }
    bool operator==(const Iter& o) const { return at_ == o.at_; }
    bool operator!=(const Iter& o) const { return at_ != o.at_; }

   private:
    friend class CallTable;
    void skip() {
      while (at_ != end_ && *at_ == nullptr) ++at_;
    }
    Entry* const* at_;
    Entry* const* end_;
  };
  using iterator = Iter<Entry>;
  using const_iterator = Iter<const Entry>;

  CallTable() = default;
  CallTable(const CallTable&) = delete;
  CallTable& operator=(const CallTable&) = delete;
  ~CallTable();

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // Its slots: a power of two from 16, at least twice size() (0 before the first call).
  size_t capacity() const { return slots_.size(); }
  // The slot where `t`'s probe starts: the top bits of t x 2^64/phi (0
  // while the table has no slots).
  size_t home(Ticket t) const {
    return slots_.empty() ? 0 : static_cast<size_t>((t * 0x9E3779B97F4A7C15ULL) >> shift_);
  }
  // The farthest any call sits from its home, in slots: what a lookup may
  // walk (for the tests).
  size_t longest_probe() const;
  iterator begin() { return {slots_.data(), slots_.data() + slots_.size()}; }
  iterator end() { return {slots_.data() + slots_.size(), slots_.data() + slots_.size()}; }
  const_iterator begin() const { return {slots_.data(), slots_.data() + slots_.size()}; }
  const_iterator end() const { return {slots_.data() + slots_.size(), slots_.data() + slots_.size()}; }

  iterator find(Ticket t) { return {slots_.data() + slot_of(t), slots_.data() + slots_.size()}; }
  const_iterator find(Ticket t) const { return {slots_.data() + slot_of(t), slots_.data() + slots_.size()}; }
  size_t count(Ticket t) const { return slot_of(t) != slots_.size() ? 1 : 0; }
  // The call of `t`, which must be in the table (else a trap, as the
  // exception-free std::unordered_map::at).
  Call& at(Ticket t) { return const_cast<Call&>(std::as_const(*this).at(t)); }
  const Call& at(Ticket t) const {
    const size_t i = slot_of(t);
    if (i == slots_.size()) __builtin_trap();
    return slots_[i]->second;
  }
  // The call of `t`, a default one added if it is not in the table.
  Call& operator[](Ticket t);

  // Adds `c` as `t`'s call unless `t` has one: (where it is, whether added).
  std::pair<iterator, bool> emplace(Ticket t, Call c);
  // Adds a node (from extract(), its ticket set); `t` must have no call.
  Call& insert(Node node);
  // Takes `t`'s node out (empty if it has none), its Call intact.
  Node extract(Ticket t);
  void erase(iterator it) { extract(it->first); }
  size_t erase(Ticket t) { return extract(t) ? 1 : 0; }

 private:
  // The slot holding `t`, or slots_.size() when none does.
  size_t slot_of(Ticket t) const {
    if (slots_.empty()) return 0;
    const size_t mask = slots_.size() - 1;
    for (size_t i = home(t);; i = (i + 1) & mask) {
      if (slots_[i] == nullptr) return slots_.size();
      if (slots_[i]->first == t) return i;
    }
  }
  // Adds `e` (its ticket not in the table), growing first if need be: its slot.
  size_t add(Entry* e);
  size_t place(Entry* e);
  void resize(size_t capacity);

  std::vector<Entry*> slots_;  // a power of two, or empty
  unsigned shift_ = 64;        // 64 - log2(slots_.size())
  size_t size_ = 0;
};

using Calls = CallTable;

}  // namespace drl::internal
