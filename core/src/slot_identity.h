// The identity of one attempt's slot, handed to the attempt's callback when
// it starts, and what a restarted engine checks when the caller says the
// attempt finished during the outage (Engine::finished).
//
// An identity names the attempt (its ticket and attempt number, unique
// within the engine that started it), its key for the slots record (the
// start the record covers it from) and the moment it started, and carries a
// tag: a keyed hash of those four numbers under the starting engine's slot
// key, a secret the host draws at random for each engine and that only the
// slots record stores. Another engine's identity (a stale one, or one of the
// live engine itself), an altered one, or one made up fails the tag, except
// with probability 2^-64 per try.
//
// Contract:
// - slot_identity_text() and parse_slot_identity() are inverses; the parser
//   refuses any other shape or a number out of range, and checks no tag.
// - slot_tag() depends on every number of the identity and on the key.
//
// Example:
//   const drl::internal::SlotKey key{0x1234, 0x5678};
//   drl::internal::SlotIdentity id;
//   id.ticket = 7;
//   id.attempt = 1;
//   id.key_at = 1000;
//   id.started = 1005;
//   id.tag = drl::internal::slot_tag(key, id);
//   const auto parsed = drl::internal::parse_slot_identity(drl::internal::slot_identity_text(id));
//   assert(parsed.has_value());
//   assert(drl::internal::slot_tag(key, *parsed) == parsed->tag);  // the engine that started it
//   assert(drl::internal::slot_tag(drl::internal::SlotKey{0x1234, 0x5679}, *parsed) != parsed->tag);  // another
//   assert(!drl::internal::parse_slot_identity("7.1.1000").has_value());
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace drl::internal {

struct SlotKey {
  uint64_t k0 = 0;
  uint64_t k1 = 0;
  bool operator==(const SlotKey& o) const { return k0 == o.k0 && k1 == o.k1; }
};

struct SlotIdentity {
  uint64_t ticket = 0;
  uint64_t attempt = 0;
  int64_t key_at = 0;   // the attempt's start as the slots record covers it (its grant time)
  int64_t started = 0;  // when the engine started it (its clock)
  uint64_t tag = 0;
};

// SipHash-2-4 of the identity's four numbers under `key`.
uint64_t slot_tag(const SlotKey& key, const SlotIdentity& id);

// "ticket.attempt.key_at.started.tag", the tag in 16 hex digits.
std::string slot_identity_text(const SlotIdentity& id);

// The text's identity, or nullopt when it is not one (a wrong shape, a
// number out of range); the tag is not checked here.
std::optional<SlotIdentity> parse_slot_identity(std::string_view text);

// The slot key as the slots record stores it: 32 hex digits.
std::string slot_key_text(const SlotKey& key);
std::optional<SlotKey> parse_slot_key(std::string_view text);

}  // namespace drl::internal
