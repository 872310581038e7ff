// UTF-8 for messages: received values and parser complaints are echoed
// into error messages, which the JS side decodes, so they are cut at a
// code-point boundary and kept well-formed.
//
// Example:
//   assert(drl::internal::shorten("abcdef", 3) == "abc...");
//   assert(drl::internal::shorten("\xC3\xA9\xC3\xA9", 3) == "\xC3\xA9...");  // not inside the second
//   assert(drl::internal::sanitize_utf8("a\xFF!") == "a\xEF\xBF\xBD!");  // U+FFFD
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

// nlohmann's parse errors quote the offending bytes verbatim ("last read:
// '...'"), which may be invalid UTF-8 when the input is. Keep well-formed
// sequences, replace anything else (and raw control bytes) with U+FFFD.
inline std::string sanitize_utf8(const std::string& in) {
  static const char kReplacement[] = "\xEF\xBF\xBD";
  std::string out;
  out.reserve(in.size());
  std::size_t i = 0;
  while (i < in.size()) {
    const auto c = static_cast<unsigned char>(in[i]);
    if (c < 0x80) {
      if (c < 0x20 || c == 0x7F) {
        out += kReplacement;
      } else {
        out += static_cast<char>(c);
      }
      ++i;
      continue;
    }
    std::size_t len = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the 2nd byte
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;  // no UTF-16 surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;  // nothing past U+10FFFF
    }
    bool ok = len != 0 && i + len <= in.size();
    for (std::size_t k = 1; ok && k < len; ++k) {
      const auto b = static_cast<unsigned char>(in[i + k]);
      ok = k == 1 ? (b >= lo && b <= hi) : is_continuation(b);
    }
    if (ok) {
      out.append(in, i, len);
      i += len;
    } else {
      out += kReplacement;
      ++i;
    }
  }
  return out;
}

}  // namespace drl::internal
