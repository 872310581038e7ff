// UTF-8 for messages: received values and parser complaints are echoed
// into error messages, which the JS side decodes, so they are cut at a
// code-point boundary and kept well-formed.
//
// Example:
//   assert(drl::internal::shorten("abcdef", 3) == "abc...");
//   assert(drl::internal::shorten("\xC3\xA9\xC3\xA9", 3) == "\xC3\xA9...");  // not inside the second
#pragma once

#include <cstddef>
#include <string>

namespace drl::internal {

inline bool is_continuation(unsigned char c) { return (c & 0xC0) == 0x80; }

// Cuts at a code-point boundary so the message stays valid UTF-8 (the JS side
// decodes it, and a split sequence would turn into U+FFFD garbage).
inline std::string shorten(std::string s, std::size_t max_bytes) {
  if (s.size() <= max_bytes) return s;
  std::size_t cut = max_bytes;
  while (cut > 0 && is_continuation(static_cast<unsigned char>(s[cut]))) --cut;
  s.resize(cut);
  s += "...";
  return s;
}

}  // namespace drl::internal
