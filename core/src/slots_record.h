// The slots record: which attempts may still be running at the upstream,
// stored so that a restarted object does not start more than `concurrency`
// callbacks while its predecessor's may still run.
//
// Contract:
// - It tracks live attempts by their start (grant) time, and slots restored
//   from a stored record, whose callers are gone but whose work may be in
//   flight: each is held until its start + the attempt timeout.
// - The stored record, restored at any moment from now on, holds at least as
//   many slots as may be running then (covers()). A start it does not cover
//   makes the step write it (with the start's grant, so it is durable before
//   the callback runs). Live attempts are listed as if started `span` later
//   (the cover span), so later starts ride on it without a rewrite.
// - Releases write nothing of their own: a record listing more slots than
//   are held rides on a step that stores anyway, at most once a span, or is
//   written alone once nothing has run for kIdleSlotsWriteMs.
// - With a key, the record is led by "~<key>@<written at>", and a callback
//   that finished during an outage may free its restored slot with the
//   identity the key signed (release_finished), once.
//
// Example:
//   drl::internal::SlotsRecord slots;
//   slots.started(1000);
//   assert(slots.step(1000, /*span=*/500, /*running=*/1, /*stores=*/true) == drl::internal::SlotsRecord::Write);
//   slots.write(1000, 500);
//   assert(slots.text() == "1500:1");  // the live start, dated a span later
//   drl::internal::SlotsRecord restored;
//   assert(restored.restore(slots.text(), /*now=*/2000, /*timeout=*/60000) == 1);  // one slot held
//   assert(restored.free_expired(61499, 60000) == 0);
//   assert(restored.free_expired(61500, 60000) == 1);  // its start + the timeout
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>

#include "drl/engine.h"
#include "ring.h"
#include "slot_identity.h"

namespace drl::internal {

// How long a bucket with no attempt running waits for some other write to
// carry a record (one row, once per quiet spell): short beside the seconds
// an idle object lives before eviction.
constexpr Millis kIdleSlotsWriteMs = 500;

// How much longer than its start + timeout the record may hold a live
// attempt's slot after a restart: the cover span (at most a quarter of the
// attempt timeout, so a short timeout is stretched by at most that).
constexpr Millis kSlotsCoverMs = 1000;

class SlotsRecord {
 public:
  enum Decision { Keep, Write };

  // A live attempt started at `at` (its grant time).
  void started(Millis at);
  // It ended; the stored record still lists it until rewritten.
  void ended(Millis at);

  // Frees the restored slots that can no longer be running at `now`;
  // returns how many.
  int64_t free_expired(Millis now, Millis timeout);
  int64_t restored_held() const { return restored_held_; }
  // When the earliest restored slot frees; nullopt when none is held.
  std::optional<Millis> first_restored_free(Millis timeout) const;
  bool any_live() const { return live_entries_ > 0; }

  // At the end of a step: whether the record must be written in it.
  // `span`: the cover span now; `running`: live attempts; `stores`: the
  // step stores something anyway.
  Decision step(Millis now, Millis span, size_t running, bool stores);
  // When a record waiting for a quiet spell is written alone (wake then).
  std::optional<Millis> write_due() const { return write_due_; }
  // No bucket (erased): nothing is written alone.
  void cancel_due() { write_due_.reset(); }
  // Records the new stored record (the host writes text() with the step).
  void write(Millis now, Millis span);

  // The record as stored: "[~key@at,]at:count,...".
  std::string text() const;
  // What runs now (live and restored), "at:count,..."; for stats and tests.
  std::string running_text() const;
  // Restores a stored record; returns the slots it holds (which the caller
  // counts as active). Unreadable entries are skipped, counts capped at the
  // largest concurrency, starts in the future pulled back to now.
  int64_t restore(std::string_view text, Millis now, Millis timeout);
  // Frees the restored slot of an attempt that finished during an outage
  // when that is safe (Engine::finished says when); true if it did.
  bool release_finished(const SlotIdentity& id, double ran_ms, Millis now, Millis timeout);

  void set_key(const SlotKey& key) { key_ = key; }
  const std::optional<SlotKey>& key() const { return key_; }

  // The bucket was erased: restored slots and the stored record go (the
  // erase deleted it); live attempts are recorded again at their next step.
  // Returns the restored slots it held.
  int64_t erase();

 private:
  bool covers(size_t running) const;
  bool restore_writer(std::string_view entry);
  static std::string entries_text(const std::map<Millis, int64_t>& slots);

  // Running attempts that started at one moment.
  struct Started {
    Millis at;
    int64_t count;
  };
  // Live running attempts by start time, oldest first.
  // Starts come nearly in order, so a start is an append and an end mostly
  // at the front. An entry whose attempts all ended keeps a count of 0 until
  // it reaches either end (or zeros outnumber the rest, and the ring is
  // compacted): an end never shifts the middle. A caller that runs one
  // attempt at a time allocates nothing here.
  Ring<Started> live_;
  size_t live_entries_ = 0;  // entries of live_ with a count > 0
  // The index of the entry of start `at` in live_, or live_.size().
  size_t live_index(Millis at) const;
  std::map<Millis, int64_t> restored_;  // slots from before a restart, by start time
  int64_t restored_held_ = 0;           // their sum
  std::map<Millis, int64_t> recorded_;  // the record as last written or restored, by start
  int64_t recorded_total_ = 0;          // its entries' counts, summed
  Millis recorded_at_ = 0;              // when it was last written
  bool grew_ = false;                   // a start (or an erase) since the record was last checked
  bool stale_ = false;                  // the record lists slots that have since been released
  bool forced_ = false;                 // release_finished freed a slot: rewritten in this step
  std::optional<Millis> write_due_;     // idle: when a stale record is written on its own

  // Who wrote the restored record: only identities its key signed free a
  // restored slot, each at most once.
  struct Writer {
    SlotKey key;
    Millis written_at = 0;     // when it wrote the record
    Millis latest_entry = -1;  // the record's latest entry, as stored (before any clamp)
  };
  std::optional<SlotKey> key_;  // signs this engine's identities and leads its records
  std::optional<Writer> writer_;
  std::set<std::pair<Ticket, uint32_t>> finished_;
};

}  // namespace drl::internal
