// JSON reading and writing over RapidJSON: see json.h.
#include "json.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <rapidjson/error/en.h>
#include <rapidjson/internal/dtoa.h>
#include <rapidjson/reader.h>

#include "sort.h"

namespace drl::internal::json {
namespace {

// A bounded input stream: the text need not end in NUL (Parsed refuses a
// NUL inside it, so the parser's end-of-input NUL cannot be confused with one).
struct ViewStream {
  using Ch = char;
  const char* begin;
  const char* at;
  const char* end;
  Ch Peek() const { return at == end ? '\0' : *at; }
  Ch Take() { return at == end ? '\0' : *at++; }
  size_t Tell() const { return static_cast<size_t>(at - begin); }
  Ch* PutBegin() { return nullptr; }
  void Put(Ch) {}
  void Flush() {}
  size_t PutEnd(Ch*) { return 0; }
};

// Forwards the parser's events to the document, counting the nesting so a
// hostile `[[[[...` is stopped at max_depth before anything is built.
struct DepthLimit {
  Document& doc;
  int max_depth;
  int depth = 0;
  bool too_deep = false;

  bool open() {
    if (++depth <= max_depth) return true;
    too_deep = true;
    return false;
  }
  bool Null() { return doc.Null(); }
  bool Bool(bool b) { return doc.Bool(b); }
  bool Int(int i) { return doc.Int(i); }
  bool Uint(unsigned u) { return doc.Uint(u); }
  bool Int64(int64_t i) { return doc.Int64(i); }
  bool Uint64(uint64_t u) { return doc.Uint64(u); }
  bool Double(double d) { return doc.Double(d); }
  bool RawNumber(const char* s, rapidjson::SizeType n, bool copy) { return doc.RawNumber(s, n, copy); }
  bool String(const char* s, rapidjson::SizeType n, bool copy) { return doc.String(s, n, copy); }
  bool StartObject() { return open() && doc.StartObject(); }
  bool Key(const char* s, rapidjson::SizeType n, bool copy) { return doc.Key(s, n, copy); }
  bool EndObject(rapidjson::SizeType n) { return --depth, doc.EndObject(n); }
  bool StartArray() { return open() && doc.StartArray(); }
  bool EndArray(rapidjson::SizeType n) { return --depth, doc.EndArray(n); }
};

// Not kParseFullPrecisionFlag: in RapidJSON 1.1.0 its digit-by-digit path
// reads outside a table of powers of ten for a number with a few hundred
// zeros after the point (the exponent it computes leaves the table's range),
// which the fuzz target found. Without it a number is within a few units in
// the last place of the nearest double; integers stay exact.
constexpr unsigned kParseFlags = rapidjson::kParseIterativeFlag | rapidjson::kParseValidateEncodingFlag;

// The most digits a number's exponent may have. RapidJSON adds the exponent
// to the count of digits after the point in an int, and a ten-digit
// exponent overflows it (then it indexes its powers of ten with the
// result); five digits reach far past any double (1e-99999 is 0) and leave
// room for any document's digits.
constexpr size_t kMaxExponentDigits = 5;

// Where, if anywhere, a number outside strings has a longer exponent.
std::optional<size_t> long_exponent(std::string_view text) {
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // whatever is escaped, it cannot end the string
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
      continue;
    }
    // Outside strings an e follows a digit only in a number's exponent
    // (true and false have it after a letter).
    if ((c != 'e' && c != 'E') || i == 0 || text[i - 1] < '0' || text[i - 1] > '9') continue;
    size_t j = i + 1;
    if (j < text.size() && (text[j] == '+' || text[j] == '-')) ++j;
    const size_t digits_from = j;
    while (j < text.size() && text[j] >= '0' && text[j] <= '9') ++j;
    if (j - digits_from > kMaxExponentDigits) return i;
    i = j - 1;
  }
  return std::nullopt;
}

// Every object's members in key byte order, a key written twice keeping
// its last value (as JSON.parse does). Sorted by index, O(n log n): a
// hostile object of thousands of keys costs no more than reading it.
void normalise(Value& v, Document::AllocatorType& allocator) {
  if (v.IsArray()) {
    for (Value& e : v.GetArray()) normalise(e, allocator);
    return;
  }
  if (!v.IsObject()) return;
  const auto m = v.MemberBegin();
  const auto n = static_cast<uint32_t>(v.MemberCount());
  bool ordered = true;  // and no key twice: the usual case, left as it is
  for (uint32_t i = 1; i < n && ordered; ++i) ordered = view(m[i - 1].name) < view(m[i].name);
  if (!ordered) {
    std::vector<uint32_t> order(n);
    // Equal keys by position (the sort is stable), so the last one written
    // is the last of its run.
    stable_order(
        order.data(), n,
        [](const void* members, uint32_t a, uint32_t b) {
          const auto* member = static_cast<const Value::Member*>(members);
          return view(member[a].name).compare(view(member[b].name));
        },
        &*m);
    Value sorted(rapidjson::kObjectType);
    for (uint32_t k = 0; k < n; ++k) {
      const uint32_t i = order[k];
      if (k + 1 < n && view(m[order[k + 1]].name) == view(m[i].name)) continue;  // a later one wins
      sorted.AddMember(m[i].name, m[i].value, allocator);                        // moved, not copied
    }
    v = sorted;  // moved too
  }
  for (auto& member : v.GetObject()) normalise(member.value, allocator);
}

std::string reason(rapidjson::ParseErrorCode code) {
  std::string s = rapidjson::GetParseError_En(code);
  if (!s.empty() && s.back() == '.') s.pop_back();
  if (!s.empty()) s[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(s[0])));
  return s;
}

}  // namespace

Parsed::Parsed(std::string_view text, int max_depth) {
  Parsed& out = *this;
  if (const auto nul = text.find('\0'); nul != std::string_view::npos) {
    out.error = "a NUL byte at byte " + std::to_string(nul);
    return;
  }
  if (const auto at = long_exponent(text)) {
    out.error = "a number's exponent has more than " + std::to_string(kMaxExponentDigits) + " digits at byte " +
                std::to_string(*at);
    return;
  }
  rapidjson::Reader reader;
  ViewStream in{text.data(), text.data(), text.data() + text.size()};
  DepthLimit limit{out.doc, max_depth};
  rapidjson::ParseResult result;
  auto generate = [&](Document& doc) {
    DepthLimit& handler = limit;
    (void)doc;
    result = reader.Parse<kParseFlags>(in, handler);
    return !result.IsError();
  };
  out.doc.Populate(generate);
  if (limit.too_deep) {
    out.too_deep = true;
    out.error = "nested too deeply (more than " + std::to_string(max_depth) + " levels)";
  } else if (result.IsError()) {
    out.error = reason(result.Code()) + " at byte " + std::to_string(result.Offset());
  } else {
    normalise(out.doc, out.doc.GetAllocator());
  }
  if (!out.error.empty()) out.doc.SetNull();
}

const Value* find(const Value& obj, std::string_view key) {
  if (!obj.IsObject()) return nullptr;
  for (const auto& m : obj.GetObject()) {
    if (view(m.name) == key) return &m.value;
  }
  return nullptr;
}

const char* type_name(const Value& v) {
  switch (v.GetType()) {
    case rapidjson::kNullType:
      return "null";
    case rapidjson::kFalseType:
    case rapidjson::kTrueType:
      return "boolean";
    case rapidjson::kObjectType:
      return "object";
    case rapidjson::kArrayType:
      return "array";
    case rapidjson::kStringType:
      return "string";
    case rapidjson::kNumberType:
      return "number";
  }
  return "null";
}

// As JavaScript writes a number (String(x)): the shortest digits that read
// back as the same double, a whole number without ".0", an exponent with its
// sign ("1e+300"), so a message echoes a value the way the user's code
// would print it.
Writer& Writer::num(double d) {
  if (!std::isfinite(d)) return null();
  if (d == 0) return num(0);  // and -0, which JavaScript writes as 0 too
  char buffer[32];
  const char* end = rapidjson::internal::dtoa(d, buffer);
  std::string text(static_cast<const char*>(buffer), end);
  if (text.size() > 2 && text.compare(text.size() - 2, 2, ".0") == 0) text.resize(text.size() - 2);
  if (const auto e = text.find('e'); e != std::string::npos && text[e + 1] != '-') text.insert(e + 1, "+");
  return done(w_.RawValue(text.data(), text.size(), rapidjson::kNumberType));
}

Writer& Writer::integer(int64_t n) {
  char buffer[24];
  const auto end = std::to_chars(buffer, buffer + sizeof buffer, n).ptr;
  return done(w_.RawValue(buffer, static_cast<size_t>(end - buffer), rapidjson::kNumberType));
}

Writer& Writer::integer(uint64_t n) {
  char buffer[24];
  const auto end = std::to_chars(buffer, buffer + sizeof buffer, n).ptr;
  return done(w_.RawValue(buffer, static_cast<size_t>(end - buffer), rapidjson::kNumberType));
}

Writer& Writer::value(const Value& v) {
  switch (v.GetType()) {
    case rapidjson::kNullType:
      return null();
    case rapidjson::kFalseType:
    case rapidjson::kTrueType:
      return boolean(v.GetBool());
    case rapidjson::kStringType:
      return str(view(v));
    case rapidjson::kNumberType:
      if (v.IsUint64()) return num(v.GetUint64());
      if (v.IsInt64()) return num(v.GetInt64());
      return num(v.GetDouble());
    case rapidjson::kArrayType:
      begin_array();
      for (const Value& e : v.GetArray()) value(e);
      return end_array();
    case rapidjson::kObjectType:
      begin_object();
      for (const auto& m : v.GetObject()) {
        key(view(m.name));
        value(m.value);
      }
      return end_object();
  }
  return null();
}

Writer& Writer::ints(const std::vector<int64_t>& v) {
  begin_array();
  for (int64_t n : v) num(n);
  return end_array();
}

std::string dump(const Value& v) {
  std::string out;
  Writer(out).value(v);
  return out;
}

std::string quote(std::string_view s) {
  std::string out;
  Writer(out).str(s);
  return out;
}

namespace {
// RFC 7396 on its own; merge_patch() puts the keys in order after it.
void merge(Value& target, const Value& patch, Document::AllocatorType& allocator) {
  if (!patch.IsObject()) {
    target.CopyFrom(patch, allocator);
    return;
  }
  if (!target.IsObject()) target.SetObject();
  for (const auto& m : patch.GetObject()) {
    auto at = target.FindMember(m.name);
    if (m.value.IsNull()) {
      if (at != target.MemberEnd()) target.EraseMember(at);
      continue;
    }
    if (at == target.MemberEnd()) {
      target.AddMember(Value(m.name, allocator), Value(), allocator);
      at = target.MemberEnd() - 1;
    }
    merge(at->value, m.value, allocator);
  }
}
}  // namespace

void merge_patch(Value& target, const Value& patch, Document::AllocatorType& allocator) {
  merge(target, patch, allocator);
  normalise(target, allocator);  // keys added at the end go to their place
}

std::optional<double> read_number(std::string_view text) {
  // Through Parsed, so core.wasm holds one copy of RapidJSON's reader, not
  // a second one for a handler of its own (5.5 KB). Depth 0: an array or
  // object is refused at its first bracket, nothing built.
  const Parsed parsed(text, 0);
  if (!parsed.error.empty() || !parsed.doc.IsNumber()) return std::nullopt;
  return parsed.doc.GetDouble();  // an integer too, as the nearest double
}

}  // namespace drl::internal::json
