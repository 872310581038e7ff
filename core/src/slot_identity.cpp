#include "slot_identity.h"

namespace drl::internal {

namespace {

// Larger numbers do not come from an engine (tickets and times stay below
// 2^53 so JS numbers hold them): a text naming one is not an identity.
constexpr uint64_t kMaxExact = (uint64_t{1} << 53) - 1;

uint64_t rotl(uint64_t x, int b) { return (x << b) | (x >> (64 - b)); }

void sip_round(uint64_t& v0, uint64_t& v1, uint64_t& v2, uint64_t& v3) {
  v0 += v1;
  v1 = rotl(v1, 13);
  v1 ^= v0;
  v0 = rotl(v0, 32);
  v2 += v3;
  v3 = rotl(v3, 16);
  v3 ^= v2;
  v0 += v3;
  v3 = rotl(v3, 21);
  v3 ^= v0;
  v2 += v1;
  v1 = rotl(v1, 17);
  v1 ^= v2;
  v2 = rotl(v2, 32);
}

// Reads an unsigned decimal (no sign, no leading zero but "0") up to kMaxExact.
std::optional<uint64_t> decimal(std::string_view text) {
  if (text.empty() || text.size() > 16 || (text.size() > 1 && text[0] == '0')) return std::nullopt;
  uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  if (v > kMaxExact) return std::nullopt;
  return v;
}

std::optional<uint64_t> hex64(std::string_view text) {
  if (text.size() != 16) return std::nullopt;
  uint64_t v = 0;
  for (char c : text) {
    int d;
    if (c >= '0' && c <= '9') {
      d = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      d = c - 'a' + 10;
    } else {
      return std::nullopt;
    }
    v = (v << 4) | static_cast<uint64_t>(d);
  }
  return v;
}

// The writers below fill a caller's buffer and return its new end: an
// identity is written for every attempt a callback is handed, so it is built
// in one buffer, without a string per number or printf.

char* put_decimal(char* out, uint64_t v) {
  char digits[20];
  int n = 0;
  do {
    digits[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0);
  while (n > 0) *out++ = digits[--n];
  return out;
}

char* put_signed(char* out, int64_t v) {
  if (v >= 0) return put_decimal(out, static_cast<uint64_t>(v));
  *out++ = '-';
  return put_decimal(out, uint64_t{0} - static_cast<uint64_t>(v));
}

// 16 lower-case hex digits, leading zeros kept.
char* put_hex64(char* out, uint64_t v) {
  static constexpr char kDigits[] = "0123456789abcdef";
  for (int shift = 60; shift >= 0; shift -= 4) *out++ = kDigits[(v >> shift) & 0xf];
  return out;
}

std::string hex_text(uint64_t v) {
  char out[16];
  return std::string(out, put_hex64(out, v));
}

}  // namespace

uint64_t slot_tag(const SlotKey& key, const SlotIdentity& id) {
  uint64_t v0 = 0x736f6d6570736575ULL ^ key.k0;
  uint64_t v1 = 0x646f72616e646f6dULL ^ key.k1;
  uint64_t v2 = 0x6c7967656e657261ULL ^ key.k0;
  uint64_t v3 = 0x7465646279746573ULL ^ key.k1;
  const uint64_t words[4] = {id.ticket, id.attempt, static_cast<uint64_t>(id.key_at),
                             static_cast<uint64_t>(id.started)};
  for (uint64_t m : words) {
    v3 ^= m;
    sip_round(v0, v1, v2, v3);
    sip_round(v0, v1, v2, v3);
    v0 ^= m;
  }
  const uint64_t last = uint64_t{32} << 56;  // the message's length in bytes, in the top byte
  v3 ^= last;
  sip_round(v0, v1, v2, v3);
  sip_round(v0, v1, v2, v3);
  v0 ^= last;
  v2 ^= 0xff;
  for (int i = 0; i < 4; ++i) sip_round(v0, v1, v2, v3);
  return v0 ^ v1 ^ v2 ^ v3;
}

std::string slot_identity_text(const SlotIdentity& id) {
  char text[4 * 21 + 4 + 16];  // four numbers (20 digits and a sign at most), four dots, the tag
  char* end = put_decimal(text, id.ticket);
  *end++ = '.';
  end = put_decimal(end, id.attempt);
  *end++ = '.';
  end = put_signed(end, id.key_at);
  *end++ = '.';
  end = put_signed(end, id.started);
  *end++ = '.';
  end = put_hex64(end, id.tag);
  return std::string(text, end);
}

std::optional<SlotIdentity> parse_slot_identity(std::string_view text) {
  std::string_view parts[5];
  size_t n = 0;
  size_t i = 0;
  for (;;) {
    if (n == 5) return std::nullopt;  // a sixth part
    const size_t dot = text.find('.', i);
    if (dot == std::string_view::npos) {
      parts[n++] = text.substr(i);
      break;
    }
    parts[n++] = text.substr(i, dot - i);
    i = dot + 1;
  }
  if (n != 5) return std::nullopt;
  const auto ticket = decimal(parts[0]);
  const auto attempt = decimal(parts[1]);
  const auto key_at = decimal(parts[2]);
  const auto started = decimal(parts[3]);
  const auto tag = hex64(parts[4]);
  if (!ticket || !attempt || !key_at || !started || !tag || *ticket == 0 || *attempt == 0) return std::nullopt;
  return SlotIdentity{*ticket, *attempt, static_cast<int64_t>(*key_at), static_cast<int64_t>(*started), *tag};
}

std::string slot_key_text(const SlotKey& key) { return hex_text(key.k0) + hex_text(key.k1); }

std::optional<SlotKey> parse_slot_key(std::string_view text) {
  if (text.size() != 32) return std::nullopt;
  const auto k0 = hex64(text.substr(0, 16));
  const auto k1 = hex64(text.substr(16));
  if (!k0 || !k1) return std::nullopt;
  return SlotKey{*k0, *k1};
}

}  // namespace drl::internal
