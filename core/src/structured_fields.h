// RFC 8941 structured-field lists: the subset the RateLimit headers need
// (ratelimit_headers.cpp), parsed strictly. A list of items, each a bare
// item (integer, decimal, string, token, boolean, byte sequence, inner
// list) with parameters; only the count parameters (kCountKeys) are kept,
// the rest validated and dropped. Anything malformed fails the whole list.
//
// Example:
//   drl::internal::sf::SfParser parser("\"day\";q=1000;w=86400, burst;q=10");
//   const auto items = parser.list();
//   assert(items.has_value());
//   assert(items->size() == 2);
//   assert(*(*items)[0].name() == "day");
//   assert((*items)[0].counts[drl::internal::sf::kQuota] == 1000);
//   assert(!drl::internal::sf::SfParser("a;q=1, ,").list());
#pragma once

#include <array>
#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "text_time.h"

namespace drl::internal::sf {

struct SfBare {
  enum class Kind { Integer, Decimal, String, Token, Boolean, Bytes, InnerList };
  Kind kind = Kind::Integer;
  int64_t integer = 0;  // Integer; Boolean as 0/1
  std::string text;     // String (unescaped) or Token
};

// The parameters RateLimit, RateLimit-Policy and the older drafts give a count; all
// others are validated and dropped.
constexpr std::string_view kCountKeys[] = {"q", "w", "r", "t", "window"};
enum CountKey { kQuota, kWindow, kRemaining, kResetSeconds, kDraftWindow };

struct SfItem {
  SfBare bare;
  // Each count key's value when it is a non-negative Integer (RFC 8941 integers are
  // below 1e15 already). A repeated key overwrites (§4.2.3.2): the last one counts.
  std::array<std::optional<int64_t>, std::size(kCountKeys)> counts;

  // The item's name when it is a String or a Token (older servers send tokens).
  const std::string* name() const {
    return bare.kind == SfBare::Kind::String || bare.kind == SfBare::Kind::Token ? &bare.text : nullptr;
  }
};

inline bool is_tchar(char c) {
  if (is_alpha(c) || is_digit(c)) return true;
  switch (c) {
    case '!':
    case '#':
    case '$':
    case '%':
    case '&':
    case '\'':
    case '*':
    case '+':
    case '-':
    case '.':
    case '^':
    case '_':
    case '`':
    case '|':
    case '~':
      return true;
    default:
      return false;
  }
}

class SfParser {
 public:
  explicit SfParser(std::string_view text) : text_(text) {}

  // RFC 8941 §4.2 with §4.2.1: the whole value is one list, or nothing.
  std::optional<std::vector<SfItem>> list() {
    skip_sp();
    std::vector<SfItem> items;
    while (pos_ < text_.size()) {
      SfItem item;
      if (peek() == '(') {
        if (!inner_list()) return std::nullopt;
        item.bare.kind = SfBare::Kind::InnerList;
      } else if (!bare_item(item.bare)) {
        return std::nullopt;
      }
      if (!parameters(&item)) return std::nullopt;
      items.push_back(std::move(item));
      skip_ows();
      if (pos_ >= text_.size()) return items;
      if (peek() != ',') return std::nullopt;
      ++pos_;
      skip_ows();
      if (pos_ >= text_.size()) return std::nullopt;  // trailing comma
    }
    return items;
  }

 private:
  char peek() const { return text_[pos_]; }
  void skip_sp() {
    while (pos_ < text_.size() && text_[pos_] == ' ') ++pos_;
  }
  void skip_ows() {
    while (pos_ < text_.size() && is_ows(text_[pos_])) ++pos_;
  }

  // Members of an inner list are parsed for validity and dropped: RateLimit has none.
  bool inner_list() {
    ++pos_;  // '('
    while (pos_ < text_.size()) {
      skip_sp();
      if (pos_ < text_.size() && peek() == ')') {
        ++pos_;
        return true;
      }
      SfBare member;
      if (!bare_item(member) || !parameters(nullptr)) return false;
      if (pos_ >= text_.size() || (peek() != ' ' && peek() != ')')) return false;
    }
    return false;
  }

  // Records the count keys into `item` when there is one.
  bool parameters(SfItem* item) {
    while (pos_ < text_.size() && peek() == ';') {
      ++pos_;
      skip_sp();
      const std::size_t key_start = pos_;
      if (pos_ >= text_.size() || !(is_lcalpha(peek()) || peek() == '*')) return false;
      while (pos_ < text_.size() && (is_lcalpha(peek()) || is_digit(peek()) || peek() == '_' || peek() == '-' ||
                                     peek() == '.' || peek() == '*')) {
        ++pos_;
      }
      const std::string_view key = text_.substr(key_start, pos_ - key_start);
      SfBare value;
      if (pos_ < text_.size() && peek() == '=') {
        ++pos_;
        if (!bare_item(value)) return false;
      } else {
        value.kind = SfBare::Kind::Boolean;
        value.integer = 1;
      }
      for (std::size_t k = 0; item != nullptr && k < std::size(kCountKeys); ++k) {
        if (key != kCountKeys[k]) continue;
        const bool count = value.kind == SfBare::Kind::Integer && value.integer >= 0;
        item->counts[k] = count ? std::optional<int64_t>(value.integer) : std::nullopt;
      }
    }
    return true;
  }

  bool bare_item(SfBare& out) {
    if (pos_ >= text_.size()) return false;
    const char c = peek();
    if (c == '-' || is_digit(c)) return number(out);
    if (c == '"') return string(out);
    if (is_alpha(c) || c == '*') return token(out);
    if (c == ':') return bytes(out);
    if (c == '?') return boolean(out);
    return false;
  }

  // §4.2.4: at most 15 integer digits (so below 1e15), or 12.3 for a decimal.
  bool number(SfBare& out) {
    bool negative = false;
    if (peek() == '-') {
      negative = true;
      ++pos_;
    }
    const std::size_t start = pos_;
    int64_t whole = 0;
    while (pos_ < text_.size() && is_digit(peek())) {
      if (pos_ - start >= 15) return false;
      whole = whole * 10 + (peek() - '0');
      ++pos_;
    }
    if (pos_ == start) return false;
    if (pos_ < text_.size() && peek() == '.') {
      if (pos_ - start > 12) return false;
      ++pos_;
      const std::size_t frac_start = pos_;
      while (pos_ < text_.size() && is_digit(peek())) {
        if (pos_ - frac_start >= 3) return false;
        ++pos_;
      }
      if (pos_ == frac_start) return false;
      out.kind = SfBare::Kind::Decimal;  // no RateLimit parameter is a decimal
      return true;
    }
    out.kind = SfBare::Kind::Integer;
    out.integer = negative ? -whole : whole;
    return true;
  }

  bool string(SfBare& out) {
    ++pos_;  // '"'
    out.kind = SfBare::Kind::String;
    while (pos_ < text_.size()) {
      const char c = text_[pos_++];
      if (c == '\\') {
        if (pos_ >= text_.size()) return false;
        const char next = text_[pos_++];
        if (next != '"' && next != '\\') return false;
        out.text.push_back(next);
      } else if (c == '"') {
        return true;
      } else if (c < 0x20 || c > 0x7E) {  // also rejects bytes >= 0x80 (char may be signed)
        return false;
      } else {
        out.text.push_back(c);
      }
    }
    return false;
  }

  bool token(SfBare& out) {
    out.kind = SfBare::Kind::Token;
    const std::size_t start = pos_++;
    while (pos_ < text_.size() && (is_tchar(peek()) || peek() == ':' || peek() == '/')) ++pos_;
    out.text.assign(text_.substr(start, pos_ - start));
    return true;
  }

  bool bytes(SfBare& out) {
    ++pos_;  // ':'
    out.kind = SfBare::Kind::Bytes;
    while (pos_ < text_.size()) {
      const char c = text_[pos_++];
      if (c == ':') return true;
      if (!(is_alpha(c) || is_digit(c) || c == '+' || c == '/' || c == '=')) return false;
    }
    return false;
  }

  bool boolean(SfBare& out) {
    ++pos_;  // '?'
    if (pos_ >= text_.size() || (peek() != '0' && peek() != '1')) return false;
    out.kind = SfBare::Kind::Boolean;
    out.integer = peek() - '0';
    ++pos_;
    return true;
  }

  std::string_view text_;
  std::size_t pos_ = 0;
};

}  // namespace drl::internal::sf
