// The wire form of the lease messages and the root's rows
// (core/src/lease_wire.h): what is written reads back the same, and a
// malformed message is refused with an error naming the field.
#include <catch2/catch.hpp>

#include "lease_wire.h"

using namespace drl::internal;

namespace {

Exchange full_exchange() {
  Exchange ex;
  ex.child = 3;
  ex.incarnation = 2;
  ex.seq = 9;
  ex.closes = {{7, {{{120, 2}, {40, 1}}, {{40, 300}}}, {15, 9}}};
  ex.returns = {{8, {1, 0}, 1}};
  ex.demand = {{5, {4, 900}, 2}, {-3, {1, 0}, 0}};
  ex.penalty_ms = 1500;
  ex.round_trip_ms = 310;
  return ex;
}

}  // namespace

TEST_CASE("lease wire: an exchange reads back as written") {
  const Exchange ex = full_exchange();
  std::string error;
  const auto back = read_exchange(write_exchange(ex), error);
  REQUIRE(back);
  CHECK(write_exchange(*back) == write_exchange(ex));
  CHECK(back->closes[0].uses[1][0].amount == 300);
  CHECK(back->closes[0].running_ages == std::vector<LeaseMillis>{15, 9});
  CHECK(back->demand[1].priority == -3);
  CHECK(back->penalty_ms == 1500);
  CHECK(back->round_trip_ms == 310);
}

TEST_CASE("lease wire: an exchange from a child that predates roundTripMs reads as no round trip") {
  std::string older = write_exchange(full_exchange());
  const std::string field = R"(,"roundTripMs":310)";
  REQUIRE(older.find(field) != std::string::npos);
  older.erase(older.find(field), field.size());
  std::string error;
  const auto back = read_exchange(older, error);
  REQUIRE(back);
  CHECK(back->round_trip_ms == 0);
  CHECK(back->penalty_ms == 1500);
  // A root that predates it reads the new field as any field it does not
  // know: ignored (the reader looks fields up by name).
  const auto with_unknown = read_exchange(R"({"child":1,"incarnation":1,"seq":1,"laterField":[1,2]})", error);
  REQUIRE(with_unknown);
  CHECK(with_unknown->seq == 1);
}

TEST_CASE("lease wire: a grant, a notice and the rows read back as written") {
  LeaseGrant g;
  g.child = 3;
  g.incarnation = 2;
  g.seq = 9;
  g.refusal = Refusal::kNothingFree;
  g.retry_in_ms = 250;
  g.penalty_ms = 40;
  g.slots_wanted = 6;
  g.units_wanted = 40;
  std::string error;
  const auto grant = read_grant(write_grant(g), error);
  REQUIRE(grant);
  CHECK(write_grant(*grant) == write_grant(g));
  CHECK(grant->refusal == Refusal::kNothingFree);
  CHECK(grant->slots_wanted == 6);
  CHECK(grant->units_wanted == 40);
  // A root that predates slotsWanted and unitsWanted leaves them out: they read as 0.
  std::string older = write_grant(g);
  for (const std::string field : {R"(,"slotsWanted":6)", R"(,"unitsWanted":40)"}) {
    REQUIRE(older.find(field) != std::string::npos);
    older.erase(older.find(field), field.size());
  }
  const auto old_grant = read_grant(older, error);
  REQUIRE(old_grant);
  CHECK(old_grant->slots_wanted == 0);
  CHECK(old_grant->units_wanted == 0);
  CHECK(old_grant->retry_in_ms == 250);

  const auto notice = read_notice(write_notice({700}), error);
  REQUIRE(notice);
  CHECK(notice->penalty_ms == 700);

  LeaseRow lease;
  lease.lease_id = 7;
  lease.child = 3;
  lease.incarnation = 2;
  lease.end_at = -5;  // a reading of the root's clock may be anything
  lease.units = {4, 10};
  lease.returned = {1, 0};
  lease.slots = 2;
  lease.closed = true;
  lease.uses = {{{100, 2}}, {}};
  lease.running_at = {90};
  const auto row = read_lease_row(write_lease_row(lease), error);
  REQUIRE(row);
  CHECK(*row == lease);

  ChildRow child;
  child.child = 3;
  child.incarnation = 2;
  child.last_seq = 9;
  child.last_reply = g;
  child.demand = {{0, {1, 2}, 1}};
  child.demand_at = 1234;
  const auto back = read_child_row(write_child_row(child), error);
  REQUIRE(back);
  CHECK(*back == child);
}

TEST_CASE("lease wire: a malformed exchange is refused naming the field") {
  const auto refused = [](const std::string& text) {
    std::string error;
    CHECK(!read_exchange(text, error));
    return error;
  };
  CHECK(refused("") == "exchange is not valid JSON: the document is empty at byte 0");
  CHECK(refused("[1]") == "exchange must be a JSON object (received [1])");
  CHECK(refused(R"({"incarnation":1,"seq":1})") == "exchange.child is missing");
  CHECK(refused(R"({"child":1.5,"incarnation":1,"seq":1})") ==
        "exchange.child must be an integer between 0 and 9007199254740991 (received 1.5)");
  CHECK(refused(R"({"child":1,"incarnation":1,"seq":1,"closes":{}})") ==
        "exchange.closes must be an array (received {})");
  CHECK(refused(R"({"child":1,"incarnation":1,"seq":1,"closes":[{"leaseId":1,"uses":[[[1]]],"runningAges":[]}]})") ==
        "exchange.closes[0].uses[0][0] must be a pair [ageMs, amount] (received [1])");
  CHECK(refused(R"({"child":1,"incarnation":1,"seq":1,"returns":[{"leaseId":1,"units":[-2],"slots":0}]})") ==
        "exchange.returns[0].units[0] must be an integer between 0 and 9007199254740991 (received -2)");
  CHECK(refused(R"({"child":1,"incarnation":1,"seq":1,"demand":[{"priority":2000000,"units":[],"slots":0}]})")
            .rfind("exchange.demand[0].priority must be an integer between", 0) == 0);
  CHECK(refused(R"({"child":1,"incarnation":1,"seq":1,"penaltyMs":"soon"})") ==
        R"(exchange.penaltyMs must be an integer between 0 and 9007199254740991 (received "soon"))");
  CHECK(refused(R"({"child":1,"incarnation":1,"seq":1,"roundTripMs":-1})") ==
        "exchange.roundTripMs must be an integer between 0 and 9007199254740991 (received -1)");
  CHECK(refused(std::string("{\"child\":1}\0", 12)) == "exchange is not valid JSON: a NUL byte at byte 11");
}

TEST_CASE("lease wire: a hostile message costs little to refuse") {
  std::string error;
  CHECK(!read_exchange(std::string(100'000, '[') + std::string(100'000, ']'), error));
  CHECK(error == "exchange is nested too deeply (more than 8 levels)");
  std::string many = R"({"child":1,"incarnation":1,"seq":1,"demand":[)";
  for (size_t i = 0; i <= kMaxWireList; ++i)
    many += (i ? "," : "") + std::string(R"({"priority":0,"units":[],"slots":0})");
  many += "]}";
  CHECK(!read_exchange(many, error));
  CHECK(error == "exchange.demand has 4097 entries, at most 4096");
  CHECK(!read_exchange(std::string(kMaxWireBytes + 1, ' '), error));
  CHECK(error.rfind("exchange is too large", 0) == 0);
}

TEST_CASE("lease wire: the root's config and a child's setup are checked field by field") {
  std::string error;
  auto config = read_ledger_config(R"({"windowsMs":[1000,60000],"limits":[10,100],"concurrency":3,)"
                                   R"("attemptTimeoutMs":500,"leaseMs":200,"clock":{"slackMs":5,"driftPpm":100},)"
                                   R"("floors":{"4":{"units":[1,5],"slots":1}}})",
                                   error);
  REQUIRE(config);
  CHECK(config->floors.at(4).units == std::vector<int64_t>{1, 5});
  CHECK(config->clocks.slack_ms == 5);
  CHECK(!read_ledger_config(R"({"windowsMs":[1000],"limits":[10,100],"concurrency":3,"attemptTimeoutMs":500,)"
                            R"("leaseMs":200})",
                            error));
  CHECK(error == "ledger config.limits has 2 entries, windowsMs 1: one limit per window");
  CHECK(!read_ledger_config(R"({"windowsMs":[1000],"limits":[10],"concurrency":3,"attemptTimeoutMs":500,)"
                            R"("leaseMs":200,"floors":{"4":{"units":[11]}}})",
                            error));
  CHECK(error.rfind("lease config refused: floors reserve 11 units of window 0", 0) == 0);

  auto setup =
      read_child_setup(R"({"child":2,"incarnation":5,"whenShort":"floor","floor":{"units":[1]},"stockMs":50})", error);
  REQUIRE(setup);
  CHECK(setup->when_short == WhenShort::kFloor);
  CHECK(setup->stock_ms == 50);
  CHECK(setup->retry_ms == HolderConfig{}.retry_ms);  // left out: the default
  CHECK(!read_child_setup(R"({"child":2,"incarnation":5,"whenShort":"open"})", error));
  CHECK(error == R"(lease child setup.whenShort must be "failClosed", "floor" or "failOpen" (received "open"))");
  CHECK(!read_child_setup(R"({"child":2,"incarnation":5,"whenShort":"floor"})", error));
  CHECK(error.rfind("lease child setup.floor is missing", 0) == 0);
}
