// Verifies covering reservations (Engine::set_reservations): a step that
// stores anything also stores a record of a few more units per window for
// the next span; a take that fits it writes nothing (its row goes with the
// next step that stores), so a sequential caller's steps store only about
// once per dozen calls. The record is renewed ahead of need (half its units
// taken, or half its span gone), cleared once the bucket has been quiet
// kIdleSlotsWrite, and rewritten in every step that writes the rows it
// covered, never apart from them. A restore counts the record as taken in
// full, dated at its end, then stores that as rows; an unreadable record
// counts the most any record could hold. Off (a new engine's default), every
// take writes its grant as before.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

#include "drl/engine.h"
#include "engine_helpers.h"

using namespace drl;
using namespace drl::test;
using drl::internal::inspect;

namespace {

constexpr Millis kWindow = 1000;
constexpr int64_t kLimit = 100;

Engine reserving(const std::string& text, Millis now = T0) {
  Engine e;
  e.set_reservations(true);
  const Status st = e.configure(text, now);
  if (!st.ok()) FAIL("configure failed: " << st.error().message);
  return e;
}

size_t count_kind(const std::vector<Write>& writes, WriteKind kind) {
  size_t n = 0;
  for (const Write& w : writes) n += w.kind == kind ? 1 : 0;
  return n;
}

json record(const Engine& e) {
  const std::string text = e.reservation_text();
  return text.empty() ? json(nullptr) : json::parse(text);
}

// A caller that waits for each call to finish before the next: arrive,
// start, report, `gap` ms apart. Applies every step to `storage` and
// returns how many steps stored anything (a commit each, in a Durable
// Object). Checks every step: a row of a take made under the record is
// written only with a new record.
struct Sequential {
  Engine& e;
  testing::Storage& storage;
  Millis now;
  size_t storing_steps = 0;
  size_t steps = 0;

  void step() {
    ++steps;
    const auto& writes = e.writes();
    bool stores = false;
    for (const Write& w : writes) stores = stores || w.kind != WriteKind::DeleteGrantsThrough;
    if (stores) ++storing_steps;
    storage.apply(e);
    e.clear_output();
  }
  void call(Millis gap) {
    const Ticket t = arrive(e, now);
    REQUIRE(e.actions().size() == 1);
    CHECK(e.actions()[0] == start(t));
    step();
    now += gap / 2;
    report(e, t, Report{200}, now);
    step();
    now += gap - gap / 2;
  }
};

// What the stored rows of the primary window add up to, live at `now`.
int64_t stored_live(const testing::Storage& storage, Millis now) {
  int64_t n = 0;
  for (const auto& [at, amount] : storage.grants) n += at + kWindow > now ? amount : 0;
  return n;
}

}  // namespace

TEST_CASE("reservations are off for a new engine: every take writes its grant", "[reservation]") {
  Engine e = configured(config(kLimit, kWindow, 10));
  CHECK_FALSE(e.reservations());
  for (Millis i = 0; i < 5; ++i) {
    arrive(e, T0 + i);
    CHECK(count_kind(e.writes(), WriteKind::PutGrant) == 1);
    CHECK(count_kind(e.writes(), WriteKind::PutReservation) == 0);
    e.clear_output();
  }
  CHECK(e.reservation_text().empty());
}

TEST_CASE("a run of takes writes a record, and takes that fit it write nothing", "[reservation]") {
  Engine e = reserving(config(kLimit, kWindow, 10));
  e.clear_output();
  // A lone take (the first after a quiet spell) writes its grant and no
  // record: a crash after it counts exactly what was taken.
  const Ticket a = arrive(e, T0);
  CHECK(writes_of(e) == std::vector<Write>{put_grant(T0, 1)});
  CHECK(e.reservation_text().empty());
  e.clear_output();
  report(e, a, Report{200}, T0 + 1);
  CHECK(e.writes().empty());
  e.clear_output();

  // The second starts a run: its grant and a record, sized to the rate seen
  // (1 unit in 2 ms: far more than a quarter of the limit per span, so the
  // quarter), for kReserveSpanMs, longer than the window: a restore counts
  // it no later than the restart.
  const Ticket b = arrive(e, T0 + 2);
  CHECK(e.actions() == std::vector<Action>{start(b)});
  CHECK(writes_of(e) == std::vector<Write>{put_grant(T0 + 2, 1), Write{WriteKind::PutReservation}});
  CHECK(record(e) == json{{"until", T0 + 2 + kReserveSpanMs}, {"units", {{"bucket", kLimit / 4}}}});
  e.clear_output();
  report(e, b, Report{200}, T0 + 3);
  e.clear_output();

  // Now 12 takes fit without a write; the 13th reaches half of 25, still
  // fits and starts without a write, and the renewal follows in the next
  // step, woken for at once (its callback is not held behind the commit).
  for (Millis i = 0; i < 12; ++i) {
    const Ticket t = arrive(e, T0 + 10 + i);
    CHECK(e.actions() == std::vector<Action>{start(t)});
    CHECK(writes_of(e).empty());
    CHECK(inspect(e).used() == 3 + i);  // admitted as ever: the log holds it
    CHECK(inspect(e).unwritten("bucket") == i + 1);
    e.clear_output();
    report(e, t, Report{200}, T0 + 10 + i);
    CHECK(writes_of(e).empty());
    e.clear_output();
  }
  const Ticket last = arrive(e, T0 + 30);
  CHECK(e.actions() == std::vector<Action>{start(last)});
  CHECK(writes_of(e).empty());
  CHECK(wake(e) == T0 + 30);
  e.clear_output();
  e.tick(T0 + 30);
  const auto writes = writes_of(e);
  REQUIRE(!writes.empty());
  CHECK(count_kind(writes, WriteKind::PutGrant) == 13);  // every row owed, exactly
  CHECK(writes.back() == Write{WriteKind::PutReservation});
  CHECK(inspect(e).unwritten("bucket") == 0);
}

TEST_CASE("a bucket with a window under 10 ms never gets a record", "[reservation]") {
  Engine e = reserving(config(kLimit, 9, 10));
  e.clear_output();
  for (Millis i = 0; i < 10; ++i) {
    arrive(e, T0 + i);
    CHECK(count_kind(e.writes(), WriteKind::PutGrant) == 1);
    CHECK(count_kind(e.writes(), WriteKind::PutReservation) == 0);
    e.clear_output();
  }
}

TEST_CASE("a sequential caller stores about once per dozen calls, and every owed row goes with a new record",
          "[reservation]") {
  Engine e = reserving(config(1000, 10'000, 1));
  testing::Storage storage;
  storage.apply(e);
  e.clear_output();
  Sequential caller{e, storage, T0};
  for (int i = 0; i < 200; ++i) caller.call(2);
  // 200 calls, 400 steps: at most one step in 20 stores (k = 10 calls).
  CHECK(caller.storing_steps <= 20);
  // Storage plus the record counts at least what the log holds, and the
  // rows alone never more.
  const int64_t reserved = record(e).is_null() ? 0 : record(e)["units"]["bucket"].get<int64_t>();
  int64_t rows = 0;
  for (const auto& [at, amount] : storage.grants) rows += amount;
  CHECK(rows <= inspect(e).used());
  CHECK(rows + reserved >= inspect(e).used());
}

TEST_CASE("a step that writes a row owed under the record writes a new record in the same step", "[reservation]") {
  // Every way a step comes to store: a take that does not fit, a pause, a
  // reconfigure, a usage charge, the idle clear. Scanned step by step.
  Engine e = reserving(config(40, kWindow, 4));
  testing::Storage storage;
  storage.apply(e);
  e.clear_output();
  Millis now = T0;
  std::vector<Ticket> running;
  int64_t owed = 0;  // units taken under the record before the step, rows not written
  size_t steps_with_owed_rows = 0;
  auto check_step = [&]() {
    for (const Action& a : e.actions()) {
      if (a.kind == ActionKind::Start) running.push_back(a.ticket);
      if (a.kind != ActionKind::Start)
        running.erase(std::remove(running.begin(), running.end(), a.ticket), running.end());
    }
    // A step that stores anything while rows are owed writes them all and a
    // new record with them.
    bool stores = false;
    bool put_record = false;
    for (const Write& w : e.writes()) {
      stores = stores || w.kind != WriteKind::DeleteGrantsThrough;
      put_record = put_record || w.kind == WriteKind::PutReservation;
    }
    if (owed > 0 && stores) {
      ++steps_with_owed_rows;
      CHECK(put_record);
      CHECK(inspect(e).unwritten("bucket") == 0);
    }
    owed = inspect(e).unwritten("bucket");
    storage.apply(e);
    e.clear_output();
    // Rows plus the record cover the log at every later moment.
    const json r = record(e);
    const int64_t reserved = r.is_null() ? 0 : r["units"].value("bucket", int64_t{0});
    for (Millis t = now; t <= now + 2 * kWindow; t += 50) {
      int64_t log = 0;
      for (const auto& [at, amount] : inspect(e).grants()) log += at + kWindow > t ? amount : 0;
      int64_t held = 0;
      for (const auto& [at, amount] : storage.grants) held += at + kWindow > t ? amount : 0;
      const bool record_live = !r.is_null() && r["until"].get<Millis>() + kWindow > t;
      CHECK(held + (record_live ? reserved : 0) >= log);
    }
  };
  for (int i = 0; i < 60; ++i) {
    now += 7;
    e.tick(now);
    check_step();
    if (i == 20) {
      REQUIRE(e.pause(30, now).ok());
    } else if (i == 40) {
      REQUIRE(e.reconfigure(R"({"bucket":{"limitPerWindow":30}})", now).ok());
    } else if (running.size() < 3) {
      REQUIRE(e.arrive(1, now).ok());
    } else {
      Report r{200};
      if (i % 3 == 0) r.usage = Amounts{{"requests", 2}};  // a charge: a grant written now
      report(e, running.front(), r, now);
    }
    check_step();
  }
  CHECK(steps_with_owed_rows >= 3);
}

TEST_CASE("renewal ahead of need: half the span gone with takes since the record renews it", "[reservation]") {
  Engine e = reserving(config(kLimit, kWindow, 10));
  e.clear_output();
  // One take every 100 ms: the record (span 2000 ms) is renewed once half of
  // it has passed or half its units are taken, not when it runs out (when a
  // take would wait for it).
  // A renewal is written in the step after the take that found it due (the
  // host runs it at once), never in the take's own: only the lone first take
  // and the one starting the run store in a take's step.
  size_t storing_takes = 0;
  size_t renewals = 0;
  const auto stores = [&e] { return e.writes().size() > count_kind(e.writes(), WriteKind::DeleteGrantsThrough); };
  for (Millis i = 0; i < 30; ++i) {
    const Millis at = T0 + 100 * i;
    const Ticket t = arrive(e, at);
    if (stores()) ++storing_takes;
    e.clear_output();
    if (e.next_wake() == at) {
      e.tick(at);
      if (stores()) ++renewals;
      CHECK(count_kind(e.writes(), WriteKind::PutReservation) == 1);
      e.clear_output();
    }
    if (!record(e).is_null()) CHECK(record(e)["until"].get<Millis>() > at);
    report(e, t, Report{200}, at + 1);
    e.clear_output();
  }
  CHECK(storing_takes == 2);
  CHECK(renewals >= 2);
  CHECK(storing_takes + renewals <= 8);
}

TEST_CASE("a quiet bucket writes its owed rows and clears the record after kIdleSlotsWrite", "[reservation]") {
  Engine e = reserving(config(kLimit, kWindow, 10));
  testing::Storage storage;
  storage.apply(e);
  e.clear_output();
  Sequential caller{e, storage, T0};
  for (int i = 0; i < 5; ++i) caller.call(2);
  REQUIRE(inspect(e).unwritten("bucket") > 0);
  const Millis last = caller.now - 2;  // the last take
  CHECK(wake(e) == last + kIdleSlotsWrite);
  e.tick(last + kIdleSlotsWrite - 1);
  CHECK(count_kind(e.writes(), WriteKind::PutReservation) == 0);
  storage.apply(e);
  e.clear_output();
  e.tick(last + kIdleSlotsWrite);
  CHECK(count_kind(e.writes(), WriteKind::PutReservation) == 1);
  storage.apply(e);
  e.clear_output();
  CHECK(e.reservation_text().empty());
  CHECK(storage.reservation_text == std::string());
  CHECK(storage.rows() == inspect(e).grants());  // exact again: a restore now counts nothing extra
  CHECK(wake(e) != last + kIdleSlotsWrite);
}

TEST_CASE("a restore counts the record as taken in full, dated at its end or now", "[reservation]") {
  Engine e = reserving(config(kLimit, kWindow, 10));
  testing::Storage storage;
  storage.apply(e);
  e.clear_output();
  Sequential caller{e, storage, T0};
  for (int i = 0; i < 8; ++i) caller.call(2);
  const int64_t taken = inspect(e).used();
  const json r = json::parse(*storage.reservation_text);
  const int64_t reserved = r["units"]["bucket"].get<int64_t>();
  const Millis until = r["until"].get<Millis>();
  REQUIRE(inspect(e).unwritten("bucket") > 0);
  int64_t rows = 0;
  for (const auto& [at, amount] : storage.grants) rows += amount;
  REQUIRE(rows < taken);  // the crash loses rows...

  SECTION("reservations on: the record stays in force, wholly taken, its rows owed") {
    Engine back;
    back.set_reservations(true);
    back.restore(storage.snapshot(), caller.now);
    // ... but the record covers them: at least every take, dated no earlier.
    CHECK(inspect(back).used() == rows + reserved);
    CHECK(inspect(back).used() >= taken);
    // The record ends later than the restart: dated now, so takes after it
    // are dated as they come, not at the record's end.
    REQUIRE(until > caller.now);
    CHECK(inspect(back).grants().back() == std::pair<Millis, int64_t>{caller.now, reserved});
    // Nothing written: the stored record still holds them (a host that drops
    // a restore's repairs loses nothing), and no take fits it.
    CHECK(back.writes().empty());
    CHECK(inspect(back).unwritten("bucket") == reserved);
    // Quiet: cleared kIdleSlotsWrite later, its rows written with it.
    CHECK(wake(back) == caller.now + kIdleSlotsWrite);
    back.tick(caller.now + kIdleSlotsWrite);
    CHECK(back.writes().back() == Write{WriteKind::PutReservation});
    storage.apply(back);
    back.clear_output();
    CHECK(storage.reservation_text == std::string());
    CHECK(storage.rows() == inspect(back).grants());
    // The under-admission: at most the record's units, for a window.
    CHECK(inspect(back).used() - taken <= reserved);
    back.tick(caller.now + kWindow);
    CHECK(inspect(back).used() == 0);
  }
  SECTION("reservations off: its rows are written at once and the record cleared") {
    Engine back;
    back.restore(storage.snapshot(), caller.now);
    CHECK(inspect(back).used() == rows + reserved);
    CHECK(writes_of(back) == std::vector<Write>{put_grant(caller.now, reserved), Write{WriteKind::PutReservation}});
    storage.apply(back);
    CHECK(storage.reservation_text == std::string());
    CHECK(storage.rows() == inspect(back).grants());
  }
}

TEST_CASE("an unreadable record counts a quarter of each limit, dated now", "[reservation]") {
  const std::string text = json{{"bucket", {{"limitPerWindow", kLimit}, {"windowInMs", 5000}}},
                                {"concurrency", 1},
                                {"windows", {{"minute", {{"limitPerWindow", 10}, {"windowInMs", 60'000}}}}}}
                               .dump();
  for (const char* damaged :
       {"junk", "{\"until\":\"x\",\"units\":{}}", "{\"until\":5,\"units\":{\"bucket\":-1}}", "{}"}) {
    Snapshot snap;
    snap.config_text = text;
    snap.reservation_text = damaged;
    Engine e;
    e.restore(snap, T0);
    CAPTURE(damaged);
    CHECK(inspect(e).grants() == Grants{{T0, kLimit / 4}});
    CHECK(inspect(e).grants("minute") == Grants{{T0, 3}});  // ceil(10 / 4)
  }
  // A readable record ending later is dated now (every take it covered came
  // before), units beyond the limit are capped there, and a window it does
  // not name had none.
  Snapshot snap;
  snap.config_text = text;
  snap.reservation_text = json{{"until", T0 + 10'000'000}, {"units", {{"bucket", 1e9}, {"ghost", 3}}}}.dump();
  Engine e;
  e.restore(snap, T0);
  CHECK(inspect(e).grants() == Grants{{T0, kLimit}});
  CHECK(inspect(e).grants("minute").empty());
  // An empty record is none.
  snap.reservation_text = "";
  Engine none;
  none.restore(snap, T0);
  CHECK(inspect(none).grants().empty());
  CHECK(none.writes().empty());
}

TEST_CASE("a penalty's lift rewrites the logs whole and the record with them", "[reservation]") {
  Engine e = reserving(config(kLimit, kWindow, 10));
  testing::Storage storage;
  storage.apply(e);
  e.clear_output();
  Sequential caller{e, storage, T0};
  for (int i = 0; i < 6; ++i) caller.call(2);
  REQUIRE(inspect(e).unwritten("bucket") > 0);
  REQUIRE(e.pause(100, caller.now).ok());
  // The pause stores (PutPenalty): the owed rows and a new record go with it.
  CHECK(count_kind(e.writes(), WriteKind::PutReservation) == 1);
  CHECK(inspect(e).unwritten("bucket") == 0);
  storage.apply(e);
  e.clear_output();
  e.tick(caller.now + 100);
  const auto writes = e.writes();
  REQUIRE(count_kind(writes, WriteKind::ClearGrants) == 1);
  CHECK(writes.back() == Write{WriteKind::PutReservation});
  storage.apply(e);
  e.clear_output();
  CHECK(storage.rows() == inspect(e).grants());
}

TEST_CASE("a reconfigure that removes a window removes it from the record", "[reservation]") {
  const json two = {{"bucket", {{"limitPerWindow", kLimit}, {"windowInMs", 5000}}},
                    {"concurrency", 4},
                    {"windows", {{"minute", {{"limitPerWindow", 40}, {"windowInMs", 60'000}}}}}};
  Engine e = reserving(two.dump());
  arrive(e, T0);
  arrive(e, T0 + 100);  // a run: 1 unit per 100 ms is 40 per span, beyond a quarter of either limit
  CHECK(record(e)["units"] == json{{"bucket", 25}, {"minute", 10}});
  e.clear_output();
  REQUIRE(e.reconfigure(R"({"windows":{"minute":null}})", T0 + 200).ok());
  CHECK(count_kind(e.writes(), WriteKind::PutReservation) == 1);
  // Sized to the takes since the last record (none): twice the last take.
  CHECK(record(e)["units"] == json{{"bucket", 2}});
}

TEST_CASE("record sizes: a quarter of the limit at most, no more than is free, for kReserveSpanMs", "[reservation]") {
  const json doc = {{"bucket", {{"limitPerWindow", 10}, {"windowInMs", 300}}}, {"concurrency", 100}};
  Engine e = reserving(doc.dump());
  e.clear_output();
  for (Millis i = 0; i < 20; ++i) {
    auto t = e.arrive(1, T0 + i);
    REQUIRE(t.ok());
    const json r = record(e);
    if (!r.is_null()) {
      CHECK(r["until"].get<Millis>() <= T0 + i + kReserveSpanMs);
      CHECK(r["units"]["bucket"].get<int64_t>() <= 3);  // ceil(10 / 4)
      CHECK(r["units"]["bucket"].get<int64_t>() <= 10 - inspect(e).used() + inspect(e).unwritten("bucket"));
    }
    e.clear_output();
  }
  // Stats name the record in force: the bound a crash now could under-admit.
  const json stats = json::parse(*e.stats(T0 + 20));
  CHECK(stats.contains("reservation"));
  if (!record(e).is_null()) CHECK(stats["reservation"] == record(e));
  e.clear_output();
}

TEST_CASE("turning reservations off writes the owed rows and clears the record", "[reservation]") {
  Engine e = reserving(config(kLimit, kWindow, 10));
  testing::Storage storage;
  storage.apply(e);
  e.clear_output();
  Sequential caller{e, storage, T0};
  for (int i = 0; i < 6; ++i) caller.call(2);
  REQUIRE(inspect(e).unwritten("bucket") > 0);
  e.set_reservations(false);
  storage.apply(e);
  e.clear_output();
  CHECK(storage.rows() == inspect(e).grants());
  CHECK(storage.reservation_text == std::string());
  arrive(e, caller.now);
  CHECK(count_kind(e.writes(), WriteKind::PutGrant) == 1);
}

TEST_CASE("a sequential caller whose calls take seconds still stores about once per eight calls", "[reservation]") {
  // The callback runs `pace` ms (an upstream call), the caller comes back at
  // once. The engine's timer fires whenever it asks (next_wake) before the
  // next event, as a host's would: an idle clear between calls would show
  // up as extra storing steps.
  for (const Millis pace : {600, 1500}) {
    CAPTURE(pace);
    Engine e = reserving(config(1000, 60'000, 1));
    testing::Storage storage;
    storage.apply(e);
    e.clear_output();
    Sequential caller{e, storage, T0};
    auto until = [&](Millis t) {
      while (auto wake = e.next_wake()) {
        if (*wake > t) break;
        e.tick(*wake);
        caller.step();
      }
    };
    for (int i = 0; i < 100; ++i) {
      const Ticket t = arrive(e, caller.now);
      REQUIRE(e.actions().size() == 1);
      CHECK(e.actions()[0] == start(t));
      caller.step();
      until(caller.now + pace);
      caller.now += pace;
      report(e, t, Report{200}, caller.now);
      caller.step();
    }
    // A record spans sixteen of the caller's gaps and is renewed at half of
    // it: one storing step per eight calls (the slots record rides along).
    CHECK(caller.storing_steps <= 100 / 6);
    // Nothing was lost on the way: storage plus the record covers the log.
    const int64_t reserved = record(e).is_null() ? 0 : record(e)["units"]["bucket"].get<int64_t>();
    int64_t rows = 0;
    for (const auto& [at, amount] : storage.grants) rows += amount;
    CHECK(rows + reserved >= inspect(e).used());
  }
}
