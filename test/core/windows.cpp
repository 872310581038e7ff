// Several windows per bucket: config, costs per unit, admission across
// windows, usage settling a reservation (refund, charge, debt), storage per
// window and restore. Times are explicit; T0 is a realistic epoch.
#include <catch2/catch.hpp>

#include "engine_helpers.h"

using namespace drl;
using namespace drl::test;
using drl::internal::inspect;

namespace {

// 10 requests per 1 s, plus 1000 tokens per 1 s and 20 requests per 10 s.
const std::string kTwoUnits = R"({"bucket":{"limitPerWindow":10,"windowInMs":1000},"concurrency":10,)"
                              R"("windows":{"tpm":{"unit":"tokens","limitPerWindow":1000,"windowInMs":1000},)"
                              R"("long":{"limitPerWindow":20,"windowInMs":10000}}})";

Amounts amounts(std::initializer_list<std::pair<const char*, double>> list) {
  Amounts out;
  for (const auto& [unit, n] : list) out.push_back(Amount{unit, n});
  return out;
}

Ticket arrive_units(Engine& e, const Amounts& cost, Millis now) {
  auto t = e.arrive(cost, now);
  if (!t.ok()) FAIL("arrive failed: " << t.error().message);
  return *t;
}

Report with_usage(const Amounts& usage) {
  Report r{200};
  r.usage = usage;
  return r;
}

json window_stats(Engine& e, const std::string& name, Millis now) {
  auto s = e.stats(now);
  REQUIRE(s.ok());
  const json doc = json::parse(*s);
  for (const json& w : doc["windows"]) {
    if (w["name"] == name) return w;
  }
  FAIL("no window " << name);
  return {};
}

// Storage's rows of one window (by the name its writes carry; "" the primary).
std::map<Millis, int64_t> rows_of(const std::vector<Write>& writes, const Engine& e, const std::string& key,
                                  std::map<Millis, int64_t> rows = {}) {
  for (const Write& w : writes) {
    if (e.window_name(w.window) != key) continue;
    switch (w.kind) {
      case WriteKind::PutGrant:
        rows[w.at] = w.amount;
        break;
      case WriteKind::DeleteGrant:
        rows.erase(w.at);
        break;
      case WriteKind::DeleteGrantsThrough:
        rows.erase(rows.begin(), rows.upper_bound(w.at));
        break;
      case WriteKind::ClearGrants:
        rows.clear();
        break;
      default:
        break;
    }
  }
  return rows;
}

}  // namespace

TEST_CASE("windows: config names window, field, rule and value for every problem", "[windows]") {
  auto problems = [](const std::string& text) {
    std::vector<std::string> out;
    for (const ConfigProblem& p : validate_config(text)) out.push_back(p.message);
    return out;
  };
  const std::string base = R"({"bucket":{"limitPerWindow":10,"windowInMs":1000},"concurrency":1,)";
  CHECK(problems(base + R"("windows":[]})") ==
        std::vector<std::string>{"windows must be an object of named windows (received [])"});
  CHECK(
      problems(base + R"("windows":{"tpm":{"unit":"tokens","limitPerWindow":0,"windowInMs":1000,"burst":1}}})") ==
      std::vector<std::string>{R"(unknown key "burst" in windows.tpm (allowed: unit, limitPerWindow, windowInMs))",
                               "windows.tpm.limitPerWindow must be an integer between 1 and 1000000000 (received 0)"});
  CHECK(
      problems(base + R"("windows":{"tpm":{"unit":"tok ens","limitPerWindow":1}}})") ==
      std::vector<std::string>{
          "windows.tpm.windowInMs is required",
          R"(windows.tpm.unit is "tok ens", which is not a unit name (a letter, then at most 31 letters, digits, _ or -))"});
  CHECK(problems(base + R"("windows":{"bucket":{"limitPerWindow":1,"windowInMs":1}}})") ==
        std::vector<std::string>{R"(window name "bucket" is the primary window's: give this window another name)"});
  CHECK(
      problems(base + R"("windows":{"9lives":{"limitPerWindow":1,"windowInMs":1}}})").at(0) ==
      R"(windows has the key "9lives", which is not a window name (a letter, then at most 31 letters, digits, _ or -))");
  json eight = json::object();
  for (int i = 0; i < 8; ++i) eight["w" + std::to_string(i)] = {{"limitPerWindow", 1}, {"windowInMs", 1}};
  CHECK(problems(base + R"("windows":)" + eight.dump() + "}") ==
        std::vector<std::string>{"windows may name at most 7 windows beside bucket (received 8)"});
  CHECK(problems(R"({"bucket":{"limitPerWindow":10,"windowInMs":1000,"unit":5},"concurrency":1})") ==
        std::vector<std::string>{"bucket.unit must be a unit name, a string (received 5)"});
  // Valid: seven extra windows; a window without a unit counts the default one.
  eight.erase("w7");
  CHECK(problems(base + R"("windows":)" + eight.dump() + "}").empty());
  auto parsed = parse_config(kTwoUnits);
  REQUIRE(parsed.ok());
  REQUIRE(parsed->config.windows.size() == 2);
  CHECK(parsed->config.windows[0].name == "long");  // by name
  CHECK(parsed->config.windows[0].unit == "requests");
  CHECK(parsed->config.windows[1].unit == "tokens");
}

TEST_CASE("windows: a config with only bucket behaves and stores exactly as before", "[windows]") {
  Engine e = configured(config(2, 1000, 5));
  const Ticket a = arrive(e, T0);
  CHECK(writes_of(e) == std::vector<Write>{put_grant(T0, 1)});
  CHECK(e.writes().front().window == 0);
  drain(e);
  report(e, a, Report{200}, T0 + 5);
  auto s = json::parse(*e.stats(T0 + 5));
  CHECK(s["windows"] == json::array({{{"name", "bucket"},
                                      {"unit", "requests"},
                                      {"limit", 2},
                                      {"windowInMs", 1000},
                                      {"used", 1},
                                      {"remaining", 1},
                                      {"resetAt", T0 + 1000},
                                      {"debt", 0},
                                      {"learned", nullptr}}}));
  CHECK(s["units"] == json::array({"requests"}));
}

TEST_CASE("units: a cost per unit, checked against the windows", "[units]") {
  Engine e = configured(kTwoUnits);
  auto refused = [&](const Amounts& cost) { return e.arrive(cost, T0).error().message; };
  CHECK(refused(amounts({{"tokns", 5}})) ==
        R"([drl:invalid-argument] cost names unit "tokns", which no window counts (units: requests, tokens))");
  CHECK(refused(amounts({{"tokens", 1.5}})) ==
        "[drl:invalid-argument] cost.tokens must be an integer >= 0 (received 1.5)");
  CHECK(refused(amounts({{"tokens", -1}})) ==
        "[drl:invalid-argument] cost.tokens must be an integer >= 0 (received -1)");
  CHECK(refused(amounts({{"tokens", 9007199254740992.0}})) ==
        "[drl:invalid-argument] cost.tokens must be an integer >= 0 and at most 9007199254740991 (received "
        "9007199254740992)");
  CHECK(refused({}) ==
        "[drl:invalid-argument] cost names no unit (received {}): give a number, or at least one unit such as { "
        "tokens: 1200 }");
  CHECK(refused(amounts({{"a", 1}, {"b", 1}, {"c", 1}, {"d", 1}, {"e", 1}, {"f", 1}, {"g", 1}, {"h", 1}, {"i", 1}})) ==
        "[drl:invalid-argument] cost must name at most 8 units, one per window (received 9)");
  CHECK(
      refused(amounts({{"total tokens", 1}})) ==
      R"([drl:invalid-argument] cost has the key "total tokens", which is not a unit name (a letter, then at most 31 letters, digits, _ or -))");
  CHECK(
      refused(amounts({{"tokens", 1001}})) ==
      R"([drl:cost-too-large] cost 1001 tokens exceeds window "tpm"'s limitPerWindow 1000, so it could never be admitted)");
  // Above the largest limit any window may have: too large, not malformed.
  CHECK(
      refused(amounts({{"tokens", 2e9}})) ==
      R"([drl:cost-too-large] cost 2000000000 tokens exceeds window "tpm"'s limitPerWindow 1000, so it could never be admitted)");
  CHECK(
      refused(amounts({{"requests", 2e9}})) ==
      R"([drl:cost-too-large] cost 2000000000 requests exceeds window "bucket"'s limitPerWindow 10, so it could never be admitted)");
  // A plain cost above a smaller window of the default unit.
  Engine small = configured(
      R"({"bucket":{"limitPerWindow":10,"windowInMs":1000},"concurrency":1,"windows":{"day":{"limitPerWindow":4,"windowInMs":86400000}}})");
  CHECK(small.arrive(5, T0).error().message ==
        R"([drl:cost-too-large] cost 5 exceeds window "day"'s limitPerWindow 4, so it could never be admitted)");
  CHECK(e.writes().empty());  // nothing taken by a refusal

  // The default unit is 1 unless given (0 takes none); other units 0 unless given.
  arrive_units(e, amounts({{"tokens", 300}}), T0);
  arrive_units(e, amounts({{"tokens", 100}, {"requests", 3}}), T0);
  arrive_units(e, amounts({{"tokens", 5}, {"requests", 0}}), T0);
  arrive(e, 2, T0);
  CHECK(rows_of(e.writes(), e, "") == std::map<Millis, int64_t>{{T0, 6}});
  CHECK(rows_of(e.writes(), e, "tpm") == std::map<Millis, int64_t>{{T0, 405}});
  CHECK(rows_of(e.writes(), e, "long") == std::map<Millis, int64_t>{{T0, 6}});
  CHECK(parse_amounts(R"({"tokens":5,"requests":2})", "cost")->size() == 2);
  CHECK(parse_amounts("[1]", "cost").error().message ==
        "[drl:invalid-argument] cost must be a flat object of units to integers");
  CHECK(parse_amounts(R"({"tokens":"5"})", "usage").error().message ==
        R"([drl:invalid-argument] usage.tokens must be a number (received "5"))");
}

TEST_CASE("units: by number, a cost is checked, refused and taken as by name", "[units]") {
  Engine by_name = configured(kTwoUnits);
  Engine by_number = configured(kTwoUnits);
  auto numbered = [&](const Amounts& cost) {
    std::vector<NumberedAmount> out;
    for (const Amount& a : cost) out.push_back(NumberedAmount{by_number.unit_number(a.unit), a.amount});
    return out;
  };
  const std::vector<Amounts> costs = {
      amounts({{"tokens", 1.5}}),
      amounts({{"tokens", -1}}),
      amounts({{"tokens", 9007199254740992.0}}),
      {},
      amounts({{"tokens", 1},
               {"requests", 1},
               {"tokens", 1},
               {"requests", 1},
               {"tokens", 1},
               {"requests", 1},
               {"tokens", 1},
               {"requests", 1},
               {"tokens", 1}}),
      amounts({{"tokens", 1001}}),
      amounts({{"requests", 2e9}}),
      amounts({{"tokens", 300}}),
      amounts({{"tokens", 100}, {"requests", 3}}),
      amounts({{"tokens", 5}, {"requests", 0}}),
      amounts({{"requests", 2}, {"tokens", 7}, {"tokens", 9}}),  // the last amount of a unit counts
  };
  Millis now = T0;
  for (const Amounts& cost : costs) {
    const std::vector<NumberedAmount> n = numbered(cost);
    auto a = by_name.arrive(cost, now);
    auto b = by_number.arrive_numbered(n.data(), n.size(), Waiting{}, now);
    REQUIRE(a.ok() == b.ok());
    if (a.ok()) {
      CHECK(*a == *b);
    } else {
      CHECK(a.error().message == b.error().message);
    }
    now += 10;
  }
  CHECK(rows_of(by_number.writes(), by_number, "tpm") == rows_of(by_name.writes(), by_name, "tpm"));
  CHECK(rows_of(by_number.writes(), by_number, "tpm") ==
        std::map<Millis, int64_t>{{T0 + 70, 300}, {T0 + 80, 100}, {T0 + 90, 5}, {T0 + 100, 9}});
  CHECK(rows_of(by_number.writes(), by_number, "") == rows_of(by_name.writes(), by_name, ""));
  // A number no config named reads as the name "", which is not a unit name.
  const NumberedAmount unknown{7, 1};
  CHECK(
      by_number.arrive_numbered(&unknown, 1, Waiting{}, now).error().message ==
      R"([drl:invalid-argument] cost has the key "", which is not a unit name (a letter, then at most 31 letters, digits, _ or -))");
  // Waiting is checked after the cost, as by name.
  Waiting bad;
  bad.priority = 1.5;
  const std::vector<NumberedAmount> fine = numbered(amounts({{"tokens", 1}}));
  CHECK(by_number.arrive_numbered(fine.data(), fine.size(), bad, now).error().message ==
        by_name.arrive(amounts({{"tokens", 1}}), bad, now).error().message);
}

TEST_CASE("windows: a call starts only when it fits in every window, and waits for the latest", "[windows]") {
  Engine e = configured(kTwoUnits);
  // 900 tokens at T0: the next call of 200 tokens fits the requests windows
  // but not tpm until T0's grant leaves it at T0 + 1000.
  arrive_units(e, amounts({{"tokens", 900}}), T0);
  drain(e);
  const Ticket b = arrive_units(e, amounts({{"tokens", 200}}), T0 + 10);
  CHECK(actions(e).empty());
  CHECK(wake(e) == T0 + 1000);
  e.tick(T0 + 999);
  CHECK(actions(e).empty());
  e.tick(T0 + 1000);
  CHECK(actions(e) == std::vector<Action>{start(b)});

  // Head of line: a call that fits is not let past one that does not.
  Engine f = configured(kTwoUnits);
  arrive_units(f, amounts({{"tokens", 900}}), T0);
  const Ticket big = arrive_units(f, amounts({{"tokens", 500}}), T0 + 1);
  const Ticket small = arrive(f, 1, T0 + 2);
  drain(f);
  f.tick(T0 + 500);
  CHECK(actions(f).empty());
  f.tick(T0 + 1000);
  CHECK(actions(f) == std::vector<Action>{start(big), start(small)});

  // The long window: 20 requests per 10 s binds after two full seconds.
  Engine g = configured(kTwoUnits);
  for (int i = 0; i < 20; ++i) {
    const Millis at = T0 + (i / 10) * 1000;
    const Ticket t = arrive(g, 1, at);
    REQUIRE(drain(g).actions == std::vector<Action>{start(t)});
    report(g, t, Report{200}, at);
    REQUIRE(drain(g).actions == std::vector<Action>{resolve(t)});
  }
  const Ticket late = arrive(g, 1, T0 + 2000);
  CHECK(drain(g).actions.empty());
  CHECK(wake(g) == T0 + 10'000);
  g.tick(T0 + 10'000);
  CHECK(actions(g) == std::vector<Action>{start(late)});
}

TEST_CASE("settle: a usage below the reservation refunds it where it was dated", "[settle]") {
  Engine e = configured(kTwoUnits);
  const Ticket a = arrive_units(e, amounts({{"tokens", 800}}), T0);
  const Ticket b = arrive_units(e, amounts({{"tokens", 100}}), T0);  // same row as a
  drain(e);
  report(e, a, with_usage(amounts({{"tokens", 300}})), T0 + 200);
  // The T0 grant shrinks by 500 in memory at once (900 -> 400); the
  // requests windows are untouched. Its row waits for a step that stores
  // something anyway: until then it over-counts, the safe side.
  CHECK(writes_of(e).empty());
  CHECK(inspect(e).pending_refunds() == 1);
  drain(e);
  CHECK(window_stats(e, "tpm", T0 + 200)["used"] == 400);
  CHECK(window_stats(e, "bucket", T0 + 200)["used"] == 2);
  // Never below zero: b's usage of 0 takes back its 100, leaving 300.
  report(e, b, with_usage(amounts({{"tokens", 0}})), T0 + 300);
  CHECK(window_stats(e, "tpm", T0 + 300)["used"] == 300);
  drain(e);
  // The refund makes room at once: a call of 700 tokens fits now, and the
  // refunded row rides on its grant's commit.
  const Ticket c = arrive_units(e, amounts({{"tokens", 700}}), T0 + 300);
  std::map<Millis, int64_t> tpm = rows_of(e.writes(), e, "tpm", {{T0, 900}});
  CHECK(tpm == std::map<Millis, int64_t>{{T0, 300}, {T0 + 300, 700}});
  CHECK(inspect(e).pending_refunds() == 0);
  CHECK(drain(e).actions == std::vector<Action>{start(c)});
}

TEST_CASE("settle: a refund is written alone once the bucket has been quiet 500 ms", "[settle]") {
  Engine e = configured(kTwoUnits);
  const Ticket a = arrive_units(e, amounts({{"tokens", 800}}), T0);
  drain(e);
  report(e, a, with_usage(amounts({{"tokens", 0}})), T0 + 100);
  drain(e);
  // Nothing else happens: the idle write (500 ms after nothing runs) stores
  // the slots record and the refunded row together.
  CHECK(wake(e) == T0 + 100 + kIdleSlotsWrite);
  e.tick(T0 + 100 + kIdleSlotsWrite);
  bool deleted = false;
  for (const Write& w : e.writes())
    deleted = deleted || (w.kind == WriteKind::DeleteGrant && w.at == T0 && e.window_name(w.window) == "tpm");
  CHECK(deleted);  // refunded to zero: the row goes
  CHECK(inspect(e).pending_refunds() == 0);
}

TEST_CASE("settle: a refund whose grant has left the window, or was replaced by a penalty, is not made", "[settle]") {
  Engine e = configured(kTwoUnits);
  const Ticket a = arrive_units(e, amounts({{"tokens", 800}}), T0);
  const Ticket b = arrive_units(e, amounts({{"tokens", 100}}), T0 + 1);
  drain(e);
  // a reports after its grant expired: no refund touches the later grant of b.
  report(e, a, with_usage(amounts({{"tokens", 0}})), T0 + 1000);
  CHECK(window_stats(e, "tpm", T0 + 1000)["used"] == 100);
  // A penalty's lift replaces every log: b's grant is no longer its own.
  REQUIRE(e.pause(10, T0 + 1000).ok());
  e.tick(T0 + 1010);
  const int64_t after_lift = window_stats(e, "tpm", T0 + 1010)["used"];
  CHECK(after_lift == 500);  // the refill floor: half of 1000
  report(e, b, with_usage(amounts({{"tokens", 0}})), T0 + 1020);
  CHECK(window_stats(e, "tpm", T0 + 1020)["used"] == after_lift);
}

TEST_CASE("debt: a usage above the reservation is charged now, and the window admits nothing until it drains",
          "[debt]") {
  Engine e = configured(kTwoUnits);
  const Ticket a = arrive_units(e, amounts({{"tokens", 100}}), T0);
  drain(e);
  report(e, a, with_usage(amounts({{"tokens", 1300}})), T0 + 400);
  // The excess (1200) is a grant dated at the report.
  CHECK(rows_of(e.writes(), e, "tpm", {{T0, 100}}) == std::map<Millis, int64_t>{{T0, 100}, {T0 + 400, 1200}});
  drain(e);
  const json tpm = window_stats(e, "tpm", T0 + 400);
  CHECK(tpm["used"] == 1300);
  CHECK(tpm["debt"] == 300);
  CHECK(tpm["remaining"] == 0);
  // Even a call with no tokens waits: the window is over its limit. It fits
  // once the excess grant leaves (T0 + 1400); T0's 100 leaving is not enough.
  const Ticket b = arrive(e, 1, T0 + 500);
  CHECK(actions(e).empty());
  e.tick(T0 + 1000);
  CHECK(actions(e).empty());
  CHECK(wake(e) == T0 + 1400);
  e.tick(T0 + 1399);
  CHECK(actions(e).empty());
  e.tick(T0 + 1400);
  CHECK(actions(e) == std::vector<Action>{start(b)});
}

TEST_CASE("settle: each attempt reserves and settles on its own, and no usage keeps the reservation", "[settle]") {
  Engine e = configured(kTwoUnits);
  const Ticket a = arrive_units(e, amounts({{"tokens", 200}}), T0);
  drain(e);
  Report failed = with_usage(amounts({{"tokens", 50}}));
  failed.failure = Failure::Retryable;
  report(e, a, failed, T0 + 10);  // attempt 1 used 50: 150 back
  CHECK(window_stats(e, "tpm", T0 + 10)["used"] == 50);
  e.tick(T0 + 510);  // the retry reserves 200 again
  CHECK(actions(e) == std::vector<Action>{start(a, 2)});
  CHECK(window_stats(e, "tpm", T0 + 510)["used"] == 250);
  report(e, a, Report{200}, T0 + 600);  // no usage: the 200 stand
  CHECK(window_stats(e, "tpm", T0 + 600)["used"] == 250);
  // A usage naming an unknown unit or a bad amount changes nothing: the attempt still runs.
  const Ticket b = arrive_units(e, amounts({{"tokens", 10}}), T0 + 600);
  drain(e);
  CHECK(e.report(b, with_usage(amounts({{"tokns", 1}})), T0 + 610).error().message ==
        R"([drl:invalid-argument] usage names unit "tokns", which no window counts (units: requests, tokens))");
  CHECK(e.report(b, with_usage(amounts({{"tokens", -1}})), T0 + 610).error().message ==
        "[drl:invalid-argument] usage.tokens must be an integer between 0 and 1000000000000000 (received -1)");
  CHECK(inspect(e).running() == 1);
  report(e, b, Report{200}, T0 + 620);
  CHECK(inspect(e).running() == 0);
}

TEST_CASE("windows: restore rebuilds every window from its rows, debt included, and drops rows of removed windows",
          "[windows]") {
  Engine e = configured(kTwoUnits);
  std::vector<Write> all;
  const Ticket a = arrive_units(e, amounts({{"tokens", 100}}), T0);
  all.insert(all.end(), e.writes().begin(), e.writes().end());
  e.clear_output();
  report(e, a, with_usage(amounts({{"tokens", 1100}})), T0 + 100);
  all.insert(all.end(), e.writes().begin(), e.writes().end());
  e.clear_output();

  // What storage holds: the config, the primary's rows, each extra window's rows by name.
  Snapshot snap;
  snap.config_text = e.config_text();
  auto doubles = [](const std::map<Millis, int64_t>& rows) {
    std::vector<std::pair<double, double>> out;
    for (const auto& [at, n] : rows) out.emplace_back(static_cast<double>(at), static_cast<double>(n));
    return out;
  };
  snap.grants = doubles(rows_of(all, e, ""));
  snap.windows.push_back({"tpm", doubles(rows_of(all, e, "tpm"))});
  snap.windows.push_back({"long", doubles(rows_of(all, e, "long"))});
  Engine fresh;
  fresh.restore(snap, T0 + 200);
  CHECK(window_stats(fresh, "tpm", T0 + 200)["debt"] == 100);
  CHECK(window_stats(fresh, "long", T0 + 200)["used"] == 1);
  CHECK(window_stats(fresh, "bucket", T0 + 200)["used"] == 1);

  // Rows of a window the stored config no longer has are deleted.
  snap.windows.push_back({"gone", {{static_cast<double>(T0), 5}}});
  Engine again;
  again.restore(snap, T0 + 200);
  bool cleared = false;
  for (const Write& w : again.writes())
    cleared = cleared || (w.kind == WriteKind::ClearGrants && again.window_name(w.window) == "gone");
  CHECK(cleared);
}

TEST_CASE("windows: a reconfigure keeps a window's log by name and unit, and deletes the rest", "[windows]") {
  Engine e = configured(kTwoUnits);
  arrive_units(e, amounts({{"tokens", 300}}), T0);
  drain(e);
  // Same name and unit, new limit: the log stays.
  REQUIRE(e.reconfigure(R"({"windows":{"tpm":{"limitPerWindow":2000}}})", T0 + 1).ok());
  CHECK(window_stats(e, "tpm", T0 + 1)["used"] == 300);
  drain(e);
  // The unit changes: the log goes, and its rows with it.
  REQUIRE(e.reconfigure(R"({"windows":{"tpm":{"unit":"requests"}}})", T0 + 2).ok());
  CHECK(window_stats(e, "tpm", T0 + 2)["used"] == 0);
  bool cleared = false;
  for (const Write& w : e.writes())
    cleared = cleared || (w.kind == WriteKind::ClearGrants && e.window_name(w.window) == "tpm");
  CHECK(cleared);
  drain(e);
  // Removed: its rows are deleted; a queued call costing its unit is no longer held by it.
  REQUIRE(e.reconfigure(R"({"windows":null})", T0 + 3).ok());
  auto s = json::parse(*e.stats(T0 + 3));
  CHECK(s["windows"].size() == 1);
  CHECK(s["units"] == json::array({"requests"}));
}

TEST_CASE("windows: a penalty pauses every window and its lift refills each to its floor", "[windows]") {
  Engine e = configured(kTwoUnits);
  const Ticket a = arrive_units(e, amounts({{"tokens", 100}}), T0);
  drain(e);
  report(e, a, Report{200}, T0 + 10);
  REQUIRE(e.pause(500, T0 + 10).ok());
  const Ticket b = arrive(e, 1, T0 + 20);
  CHECK(actions(e) == std::vector<Action>{resolve(a)});  // b waits for the lift
  const Millis lift = inspect(e).forced_until();
  e.tick(lift);
  CHECK(actions(e) == std::vector<Action>{start(b)});
  // Each window refilled to its floor (half its limit), then b's take.
  CHECK(window_stats(e, "bucket", lift)["used"] == 5 + 1);
  CHECK(window_stats(e, "tpm", lift)["used"] == 500);
  CHECK(window_stats(e, "long", lift)["used"] == 10 + 1);
}
