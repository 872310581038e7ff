// The engine's JSON reader and writer on their own (core/src/json.h).
#include "json.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <string>

using drl::internal::json::dump;
using drl::internal::json::find;
using drl::internal::json::Parsed;
using drl::internal::json::read_number;
using drl::internal::json::Writer;

namespace {
std::string written(double d) {
  std::string out;
  Writer(out).num(d);
  return out;
}
}  // namespace

TEST_CASE("json: objects in key order, a repeated key keeps its last value", "[json]") {
  const Parsed p(R"({"b":1,"a":{"y":2,"x":3},"b":4})", 4);
  REQUIRE(p.error.empty());
  CHECK(dump(p.doc) == R"({"a":{"x":3,"y":2},"b":4})");
  CHECK(find(p.doc, "b")->GetInt64() == 4);
  CHECK(find(p.doc, "c") == nullptr);
}

TEST_CASE("json: nesting at, and one past, the cap", "[json]") {
  CHECK(Parsed("[[1]]", 2).error.empty());
  const Parsed deep("[[[1]]]", 2);
  CHECK(deep.too_deep);
  CHECK(deep.error == "nested too deeply (more than 2 levels)");
  // Refused while reading: a megabyte of brackets costs no stack.
  CHECK(Parsed(std::string(1'000'000, '['), 32).too_deep);
}

TEST_CASE("json: what is not one JSON value says why and where", "[json]") {
  CHECK(Parsed("", 4).error == "the document is empty at byte 0");
  CHECK(Parsed("{\"a\":}", 4).error == "invalid value at byte 5");
  CHECK(Parsed("{} {}", 4).error == "the document root must not be followed by other values at byte 3");
  CHECK(Parsed(std::string("{}\0x", 4), 4).error == "a NUL byte at byte 2");
  CHECK(!Parsed("\"\xff\"", 4).error.empty());  // not UTF-8
  CHECK(!Parsed("NaN", 4).error.empty());
}

TEST_CASE("json: numbers that once read outside RapidJSON's tables", "[json]") {
  // A few hundred zeros after the point: under 1.1.0's full-precision path
  // the fuzz target read far outside its table of powers of ten here.
  const std::string tiny = "0." + std::string(400, '0') + "1e-10";
  const Parsed p(tiny, 1);
  REQUIRE(p.error.empty());
  CHECK(p.doc.GetDouble() == 0.0);
  CHECK(read_number(tiny) == 0.0);
  // An exponent RapidJSON would add to the digits' count in an int.
  const std::string huge_exponent = "0." + std::string(20, '0') + "1e-2147483639";
  CHECK(Parsed(huge_exponent, 1).error == "a number's exponent has more than 5 digits at byte 23");
  CHECK(!read_number(huge_exponent));
  // At the limit, and one past it.
  CHECK(read_number("1e-99999") == 0.0);
  CHECK(!read_number("1e-100000"));
  CHECK(!read_number("1e99999"));  // too big for a double
  // "e" in strings and literals is not an exponent.
  CHECK(Parsed(R"(["1e123456", true, false])", 2).error.empty());
}

TEST_CASE("json: read_number takes one JSON number and nothing else", "[json]") {
  CHECK(read_number("12") == 12.0);
  CHECK(read_number("-1.5") == -1.5);
  CHECK(read_number("1.5e3") == 1500.0);
  CHECK(read_number("9007199254740993") == 9007199254740992.0);  // the nearest double
  CHECK(read_number(" 7\n") == 7.0);                             // JSON's whitespace around it
  CHECK(read_number("18446744073709551615") == 18446744073709551615.0);
  CHECK(!read_number(std::string(100000, '[')));
  for (const char* bad :
       {"", "x", "+5", "0x10", "5.", ".5", "1 2", "[1]", "nan", "inf", "\"1\"", "{\"a\":1}", "true", "null", "1 x"}) {
    INFO(bad);
    CHECK(!read_number(bad));
  }
}

TEST_CASE("json: numbers are written as JavaScript writes them", "[json]") {
  CHECK(written(60.0) == "60");
  CHECK(written(-0.0) == "0");
  CHECK(written(0.1) == "0.1");
  CHECK(written(1.5) == "1.5");
  CHECK(written(1e300) == "1e+300");
  CHECK(written(1e21) == "1e+21");
  CHECK(written(1e20) == "100000000000000000000");
  CHECK(written(5e-7) == "5e-7");
  CHECK(written(0.000001) == "0.000001");
  CHECK(written(std::nan("")) == "null");
  CHECK(written(INFINITY) == "null");
  std::string out;
  Writer(out).begin_array().num(int64_t{-3}).num(uint64_t{18'446'744'073'709'551'615u}).str("a\"\n").end_array();
  CHECK(out == R"([-3,18446744073709551615,"a\"\n"])");
  // Every integer type through the same digits: the extremes, and 0.
  out.clear();
  Writer(out)
      .begin_array()
      .num(INT64_MIN)
      .num(INT64_MAX)
      .num(0)
      .num(uint8_t{255})
      .num(int32_t{-2147483647 - 1})
      .num(-0.0)
      .end_array();
  CHECK(out == "[-9223372036854775808,9223372036854775807,0,255,-2147483648,0]");
}

TEST_CASE("json: a merge patch deletes on null and keeps keys in order", "[json]") {
  Parsed target(R"({"b":{"x":1,"y":2},"c":3})", 4);
  const Parsed patch(R"({"b":{"y":null,"z":4},"a":0,"c":null})", 4);
  drl::internal::json::merge_patch(target.doc, patch.doc, target.doc.GetAllocator());
  CHECK(dump(target.doc) == R"({"a":0,"b":{"x":1,"z":4}})");
}

TEST_CASE("json: a large object out of order, keys repeated, reads in key order", "[json]") {
  // 20,000 keys written backwards, each twice: sorted in n log n, the
  // second of each kept.
  std::string text = "{";
  for (int i = 19'999; i >= 0; --i) {
    const std::string key = "\"k" + std::to_string(100'000 + i) + "\"";
    text += key + ":1," + key + ":" + std::to_string(i) + (i > 0 ? "," : "}");
  }
  const Parsed p(text, 1);
  REQUIRE(p.error.empty());
  REQUIRE(p.doc.MemberCount() == 20'000);
  CHECK(drl::internal::json::view(p.doc.MemberBegin()->name) == "k100000");
  CHECK(p.doc.MemberBegin()->value.GetInt64() == 0);
  CHECK((p.doc.MemberEnd() - 1)->value.GetInt64() == 19'999);
}
