// JSON in the engine: one reader and one writer, both over RapidJSON, so that
// every document the engine reads (configs, costs, usage, lease messages,
// stored rows) is parsed the same careful way and every answer it writes
// comes out of the same writer.
//
// Contract:
// - Parsed takes untrusted text and reads it without recursion: nesting
//   deeper than `max_depth` is refused while reading (what walks the value
//   afterwards recurses at most that deep), a raw NUL or invalid UTF-8 is an
//   error, and so is anything after the one value or a number whose exponent
//   has more than five digits. Integers are exact; other numbers within a few
//   units in the last place of the nearest double. A key written twice keeps
//   its last value (as JSON.parse does), and every object's members come in
//   key byte order whatever order they were written in: the engine numbers a
//   config's windows in that order, so the same config always means the
//   same windows, and dump() of a parsed value is its canonical text.
// - On failure, `error` says why and where, in words for a user ("invalid
//   value at byte 3"); on success it is empty and `doc` holds the value.
// - Writer writes compact JSON into a std::string: strings are escaped, a
//   number reads as JavaScript writes it (String(x)), a non-finite double is
//   written as null, and a key always precedes its value. It copies string
//   bytes as they are: parsed strings are valid UTF-8.
// - merge_patch() keeps keys in byte order too, so the engine stores a
//   config as dump() writes it and the same config always has one text.
//
// Example:
//   const drl::internal::json::Parsed parsed("{\"a\": 1, \"b\": [true, null], \"a\": 2}", 4);
//   assert(parsed.error.empty());
//   assert(drl::internal::json::find(parsed.doc, "a")->GetInt64() == 2);  // the last "a"
//   assert(drl::internal::json::view(parsed.doc.MemberBegin()->name) == "a");  // in key order
//   assert(drl::internal::json::Parsed("[[[1]]]", 2).error == "nested too deeply (more than 2 levels)");
//   assert(drl::internal::json::Parsed("{\"a\":}", 4).error == "invalid value at byte 5");
//   std::string out;
//   drl::internal::json::Writer w(out);
//   w.begin_object().key("n").num(int64_t{3}).key("s").str("x\"y").key("f").num(0.0 / 0.0).end_object();
//   assert(out == "{\"n\":3,\"s\":\"x\\\"y\",\"f\":null}");
//   assert(drl::internal::json::dump(parsed.doc) == "{\"a\":2,\"b\":[true,null]}");
//   assert(drl::internal::json::read_number("1.5e3") == 1500.0);
//   assert(!drl::internal::json::read_number("0x10"));
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <rapidjson/document.h>
#include <rapidjson/writer.h>

namespace drl::internal::json {

using Value = rapidjson::Value;
using Document = rapidjson::Document;

// One JSON value read from text; see the contract above. Not copyable: the
// document's values live in its own small pool (rapidjson's default pool
// starts at 64 KiB, a lot to allocate for a cost of `{"tokens":5}`).
struct Parsed {
  Parsed(std::string_view text, int max_depth);
  Parsed(const Parsed&) = delete;
  Parsed& operator=(const Parsed&) = delete;

  rapidjson::MemoryPoolAllocator<> pool{1024};
  Document doc{&pool, 256};
  std::string error;  // empty: `doc` holds the value
  bool too_deep = false;
};

// The member named `key` of an object, or nullptr (also when `obj` is not an object).
const Value* find(const Value& obj, std::string_view key);

inline std::string_view view(const Value& s) { return {s.GetString(), s.GetStringLength()}; }
inline std::string text(const Value& s) { return {s.GetString(), s.GetStringLength()}; }

// The kind of a value, in the words messages use: "null", "boolean", "number",
// "string", "array" or "object".
const char* type_name(const Value& v);

// A std::string that rapidjson's writer appends to.
struct StringSink {
  using Ch = char;
  std::string* out;
  void Put(char c) { out->push_back(c); }
  void Flush() {}
};

class Writer {
 public:
  explicit Writer(std::string& out) : sink_{&out}, w_(sink_) {}

  Writer& begin_object() { return done(w_.StartObject()); }
  Writer& end_object() { return done(w_.EndObject()); }
  Writer& begin_array() { return done(w_.StartArray()); }
  Writer& end_array() { return done(w_.EndArray()); }
  Writer& key(std::string_view k) { return done(w_.Key(k.data(), size(k), true)); }
  Writer& str(std::string_view s) { return done(w_.String(s.data(), size(s), true)); }
  Writer& null() { return done(w_.Null()); }
  Writer& boolean(bool b) { return done(w_.Bool(b)); }
  template <typename T, typename = std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>>>
  Writer& num(T n) {
    if constexpr (std::is_signed_v<T>) return integer(static_cast<int64_t>(n));
    return integer(static_cast<uint64_t>(n));
  }
  // As JavaScript's String(d) writes it ("1e+300", "60"); NaN and the
  // infinities as null.
  Writer& num(double d);
  // A number when positive, else null (the stats' "not yet" fields).
  Writer& positive_or_null(int64_t n) { return n > 0 ? num(n) : null(); }
  Writer& ints(const std::vector<int64_t>& v);
  // A parsed value, its numbers written as num() writes them.
  Writer& value(const Value& v);
  // Text that already is one JSON value (another writer's output).
  Writer& raw(std::string_view json) { return done(w_.RawValue(json.data(), json.size(), rapidjson::kObjectType)); }

 private:
  static rapidjson::SizeType size(std::string_view s) { return static_cast<rapidjson::SizeType>(s.size()); }
  // Integers in decimal, as RapidJSON's Int64() and Uint64() write them,
  // but through std::to_chars, which std::to_string already brings into
  // core.wasm, instead of RapidJSON's own unrolled u64toa (1.8 KB).
  Writer& integer(int64_t n);
  Writer& integer(uint64_t n);
  Writer& done(bool) { return *this; }

  StringSink sink_;
  rapidjson::Writer<StringSink> w_;
};

// `v` as compact JSON text (from Parsed or merge_patch(): its keys in byte
// order, the text the engine stores).
std::string dump(const Value& v);
// A string as a JSON string literal ("\"a\\\"b\"").
std::string quote(std::string_view s);

// RFC 7396: merges `patch` into `target` (null deletes a key), keys kept in
// byte order. Recursive: both sides must come from Parsed with a small
// max_depth.
void merge_patch(Value& target, const Value& patch, Document::AllocatorType& allocator);

// The text as one JSON number ("12", "1.5", "1e3", with no sign but "-"),
// or nullopt for anything else, a number too large for a double included.
std::optional<double> read_number(std::string_view text);

}  // namespace drl::internal::json
