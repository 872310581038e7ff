// The wire form's writers: see lease_wire.h (the readers are in
// lease_wire.cpp). Fields go in the documented wire order.
#include "lease_wire.h"

#include "json.h"

namespace drl::internal {

namespace {

void write_demand(json::Writer& out, const std::vector<DemandLevel>& demand) {
  out.begin_array();
  for (const DemandLevel& d : demand) {
    out.begin_object()
        .key("priority")
        .num(d.priority)
        .key("slots")
        .num(d.slots)
        .key("units")
        .ints(d.units)
        .end_object();
  }
  out.end_array();
}

void write_grant_value(json::Writer& out, const LeaseGrant& g) {
  out.begin_object();
  out.key("child").num(g.child);
  out.key("incarnation").num(g.incarnation);
  out.key("seq").num(g.seq);
  out.key("leaseId").num(g.lease_id);
  out.key("units").ints(g.units);
  out.key("slots").num(g.slots);
  out.key("durationMs").num(g.duration_ms);
  out.key("refusal").str(refusal_name(g.refusal));
  out.key("retryInMs").num(g.retry_in_ms);
  out.key("penaltyMs").num(g.penalty_ms);
  out.key("slotsWanted").num(g.slots_wanted);
  out.key("unitsWanted").num(g.units_wanted);
  out.end_object();
}

// [[first, amount], ...] per window: ages in a close, dates in a row.
template <typename Group, typename First>
void write_groups(json::Writer& out, const std::vector<std::vector<Group>>& windows, First first) {
  out.begin_array();
  for (const auto& window : windows) {
    out.begin_array();
    for (const Group& g : window) out.begin_array().num(first(g)).num(g.amount).end_array();
    out.end_array();
  }
  out.end_array();
}

}  // namespace

// The name of `r` on the wire (a grant's "refusal").
const char* refusal_name(Refusal r) {
  switch (r) {
    case Refusal::kNone:
      return "none";
    case Refusal::kNothingFree:
      return "nothingFree";
    case Refusal::kNothingAsked:
      return "nothingAsked";
    case Refusal::kStaleIncarnation:
      return "staleIncarnation";
    case Refusal::kMalformed:
      return "malformed";
  }
  return "none";
}

std::string write_exchange(const Exchange& ex) {
  std::string text;
  json::Writer out(text);
  out.begin_object().key("child").num(ex.child).key("incarnation").num(ex.incarnation).key("seq").num(ex.seq);
  out.key("closes").begin_array();
  for (const LeaseClose& c : ex.closes) {
    out.begin_object().key("leaseId").num(c.lease_id).key("uses");
    write_groups(out, c.uses, [](const UseGroup& g) { return g.age_ms; });
    out.key("runningAges").ints(c.running_ages).end_object();
  }
  out.end_array();
  out.key("returns").begin_array();
  for (const LeaseReturn& r : ex.returns) {
    out.begin_object().key("leaseId").num(r.lease_id).key("units").ints(r.units).key("slots").num(r.slots);
    out.end_object();
  }
  out.end_array();
  write_demand(out.key("demand"), ex.demand);
  out.key("penaltyMs").num(ex.penalty_ms).key("roundTripMs").num(ex.round_trip_ms).end_object();
  return text;
}

std::string write_grant(const LeaseGrant& grant) {
  std::string text;
  json::Writer out(text);
  write_grant_value(out, grant);
  return text;
}

std::string write_notice(const PenaltyNotice& notice) {
  std::string text;
  json::Writer(text).begin_object().key("penaltyMs").num(notice.penalty_ms).end_object();
  return text;
}

std::string write_lease_row(const LeaseRow& row) {
  std::string text;
  json::Writer out(text);
  out.begin_object();
  out.key("leaseId").num(row.lease_id);
  out.key("child").num(row.child);
  out.key("incarnation").num(row.incarnation);
  out.key("endAt").num(row.end_at);
  out.key("units").ints(row.units);
  out.key("slots").num(row.slots);
  out.key("returned").ints(row.returned);
  out.key("slotsReturned").num(row.slots_returned);
  out.key("closed").boolean(row.closed);
  out.key("uses");
  write_groups(out, row.uses, [](const DatedUse& u) { return u.at; });
  out.key("runningAt").ints(row.running_at);
  out.end_object();
  return text;
}

std::string write_child_row(const ChildRow& row) {
  std::string text;
  json::Writer out(text);
  out.begin_object();
  out.key("child").num(row.child);
  out.key("incarnation").num(row.incarnation);
  out.key("lastSeq").num(row.last_seq);
  write_grant_value(out.key("lastReply"), row.last_reply);
  write_demand(out.key("demand"), row.demand);
  out.key("demandAt").num(row.demand_at);
  out.end_object();
  return text;
}

}  // namespace drl::internal
