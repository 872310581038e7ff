// The numeric ABI core.wasm exports, and nothing else.
//
// Hot-path calls (arrive, report, threw, cancel, tick, output) take and
// return only numbers. Strings (config documents, a Retry-After header,
// stats, error messages) travel through one byte scratch buffer: the host
// writes input at drl_buffer(n) and passes its length; output lands in the
// same scratch (drl_out_ptr / drl_out_len). Every engine call's output is
// fetched with drl_output(h), which copies it into records of four doubles:
//   actions: [1 Start | 2 Resolve, ticket, attempt, 0]  [3 Reject, ticket, code, status]
//   writes:  [10 + WriteKind, at, amount, window]        (writes come first;
//            PutPenalty: [15, forced_until, lift_pending 1 or 0, 0])
//   [4 Exchange, 0, 0, 0]: a lease child's exchange, its text from drl_lease_exchange
// Times are ms as doubles; tickets stay below 2^53, so JS numbers hold them.
// A lease tree's messages and rows cross as JSON text (core/src/lease_wire.h).
// As in drl::Engine, a call that takes the time takes it last (`now`).
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "drl/engine.h"
#include "drl/ratelimit_headers.h"
#include "json.h"
#include "lease_wire.h"
#include "ledger.h"
#include "records.h"
#include "tree_config.h"

#define DRL_EXPORT(name) extern "C" __attribute__((export_name(#name), used))

namespace {

std::vector<std::unique_ptr<drl::Engine>> g_engines;
std::string g_scratch;
std::string g_out;
std::vector<double> g_f64;
std::vector<double> g_records;
// Amounts by unit number (see numbered) and by name (see named), kept
// between calls.
std::vector<drl::NumberedAmount> g_numbered;
drl::Amounts g_amounts;
int g_error_kind = 0;

drl::Engine* engine(int h) {
  return h >= 1 && static_cast<size_t>(h) <= g_engines.size() ? g_engines[h - 1].get() : nullptr;
}

drl::Millis to_ms(double now) { return std::isfinite(now) && now > 0 ? static_cast<drl::Millis>(now) : 0; }

std::string_view scratch(int len) {
  if (len <= 0) return {};
  return std::string_view(g_scratch.data(), std::min<size_t>(static_cast<size_t>(len), g_scratch.size()));
}

// Errors come back as -code, with the message in the out buffer.
int fail(const drl::Error& e) {
  g_out = e.message;
  g_error_kind = static_cast<int>(e.kind);
  return -static_cast<int>(e.code);
}

int status(const drl::Status& s) { return s.ok() ? 0 : fail(s.error()); }

constexpr int kBadHandle = -static_cast<int>(drl::ErrorCode::InvalidArgument);

}  // namespace

DRL_EXPORT(drl_buffer) char* drl_buffer(int size) {
  if (size < 0) size = 0;
  if (g_scratch.size() < static_cast<size_t>(size)) g_scratch.resize(static_cast<size_t>(size));
  return g_scratch.data();
}

DRL_EXPORT(drl_f64_buffer) double* drl_f64_buffer(int count) {
  if (count < 0) count = 0;
  if (g_f64.size() < static_cast<size_t>(count)) g_f64.resize(static_cast<size_t>(count));
  return g_f64.data();
}

DRL_EXPORT(drl_out_ptr) const char* drl_out_ptr() { return g_out.data(); }
DRL_EXPORT(drl_out_len) int drl_out_len() { return static_cast<int>(g_out.size()); }
DRL_EXPORT(drl_error_kind) int drl_error_kind() { return g_error_kind; }
DRL_EXPORT(drl_records) const double* drl_records() { return g_records.data(); }

DRL_EXPORT(drl_new) int drl_new() {
  g_engines.push_back(std::make_unique<drl::Engine>());
  return static_cast<int>(g_engines.size());
}

DRL_EXPORT(drl_free) void drl_free(int h) {
  if (engine(h)) g_engines[h - 1].reset();
}

DRL_EXPORT(drl_configure) int drl_configure(int h, int len, double now) {
  auto* e = engine(h);
  return e ? status(e->configure(scratch(len), to_ms(now))) : kBadHandle;
}

// Checks a complete config by the engine's rules without any engine: 0, or
// -code with every problem in the out buffer.
DRL_EXPORT(drl_validate_config) int drl_validate_config(int len) {
  auto parsed = drl::parse_config(scratch(len));
  return parsed.ok() ? 0 : fail(parsed.error());
}

// Whether a tree's children pass calls through to the root with this config
// (internal::tree_passes_through): 1 or 0, or -code when it is invalid.
DRL_EXPORT(drl_tree_passes_through) int drl_tree_passes_through(int len) {
  auto parsed = drl::parse_config(scratch(len));
  if (!parsed.ok()) return fail(parsed.error());
  return drl::internal::tree_passes_through(parsed->config) ? 1 : 0;
}

DRL_EXPORT(drl_reconfigure) int drl_reconfigure(int h, int len, double now) {
  auto* e = engine(h);
  return e ? status(e->reconfigure(scratch(len), to_ms(now))) : kBadHandle;
}

// Restore in three steps so a large log streams through a small buffer:
// begin (config text, if config_len >= 0, in the scratch buffer), then any
// number of rows calls ((at, amount) pairs in the f64 buffer), then end.
DRL_EXPORT(drl_restore_begin)
int drl_restore_begin(int h, int config_len, double forced_until, int lift_pending, double now) {
  auto* e = engine(h);
  if (!e) return kBadHandle;
  std::optional<std::string_view> config;
  if (config_len >= 0) config = scratch(config_len);
  e->restore_begin(config, forced_until, lift_pending != 0, to_ms(now));
  return 0;
}

DRL_EXPORT(drl_restore_rows) int drl_restore_rows(int h, int count) {
  auto* e = engine(h);
  if (!e) return kBadHandle;
  const size_t n = std::min<size_t>(count > 0 ? static_cast<size_t>(count) : 0, g_f64.size() / 2);
  e->restore_rows(g_f64.data(), n);
  return 0;
}

// The slots record (its text in the scratch buffer), between begin and end.
// An extra window's rows: its name in the scratch buffer, (at, amount) pairs
// in the f64 buffer. Between begin and end.
DRL_EXPORT(drl_restore_window_rows) int drl_restore_window_rows(int h, int name_len, int count) {
  auto* e = engine(h);
  if (!e) return kBadHandle;
  const size_t n = std::min<size_t>(count > 0 ? static_cast<size_t>(count) : 0, g_f64.size() / 2);
  e->restore_window_rows(scratch(name_len), g_f64.data(), n);
  return 0;
}

// The name of a write's window number into the out buffer ("" for the
// primary); returns its length.
DRL_EXPORT(drl_window_key) int drl_window_key(int h, int window) {
  auto* e = engine(h);
  if (!e) return kBadHandle;
  g_out = e->window_name(window);
  return static_cast<int>(g_out.size());
}

DRL_EXPORT(drl_restore_slots) int drl_restore_slots(int h, int len) {
  auto* e = engine(h);
  if (!e) return kBadHandle;
  e->restore_slots(scratch(len));
  return 0;
}

// The reservation record (its text in the scratch buffer), between begin and end.
DRL_EXPORT(drl_restore_reservation) int drl_restore_reservation(int h, int len) {
  auto* e = engine(h);
  if (!e) return kBadHandle;
  e->restore_reservation(scratch(len));
  return 0;
}

// The release mark as stored, before any row: see Engine::restore_released.
DRL_EXPORT(drl_restore_released) int drl_restore_released(int h, double released_before) {
  auto* e = engine(h);
  if (!e) return kBadHandle;
  e->restore_released(released_before);
  return 0;
}

// Release dating on (1) or off (0): see Engine::set_release_dating.
DRL_EXPORT(drl_set_release_dating) int drl_set_release_dating(int h, int on) {
  auto* e = engine(h);
  if (!e) return kBadHandle;
  e->set_release_dating(on != 0);
  return 0;
}

// Covering reservations on (1) or off (0): see Engine::set_reservations.
DRL_EXPORT(drl_set_reservations) int drl_set_reservations(int h, int on) {
  auto* e = engine(h);
  if (!e) return kBadHandle;
  e->set_reservations(on != 0);
  return 0;
}

DRL_EXPORT(drl_restore_end) int drl_restore_end(int h) {
  auto* e = engine(h);
  if (!e) return kBadHandle;
  e->restore_end();
  return 0;
}

DRL_EXPORT(drl_erase) int drl_erase(int h, double now) {
  auto* e = engine(h);
  if (!e) return kBadHandle;
  e->erase(to_ms(now));
  return 0;
}

// How the caller waits: its priority, its maxWaitMs (NaN: no limit) and its
// maxRetries (NaN: the bucket's retry.maxRetries).
static drl::Waiting waiting(double priority, double max_wait_ms, double max_retries) {
  drl::Waiting w;
  w.priority = priority;
  if (!std::isnan(max_wait_ms)) w.max_wait_ms = max_wait_ms;
  if (!std::isnan(max_retries)) w.max_retries = max_retries;
  return w;
}

// A ticket (> 0), or -code. A ticket may already be settled by the step's
// actions (a maxWaitMs the predicted start exceeds).
DRL_EXPORT(drl_arrive)
double drl_arrive(int h, double cost, double priority, double max_wait_ms, double max_retries, double now) {
  auto* e = engine(h);
  if (!e) return kBadHandle;
  auto t = e->arrive(cost, waiting(priority, max_wait_ms, max_retries), to_ms(now));
  return t.ok() ? static_cast<double>(*t) : fail(t.error());
}

// A unit number sent as a double; -1 for one that is not a small whole number.
static int unit_number(double unit) {
  // Compared as a double first: casting one beyond int's range is undefined.
  return unit >= 0 && unit < 1e6 && unit == std::floor(unit) ? static_cast<int>(unit) : -1;
}

// Amounts by unit number (Engine::unit_number): the `count` (number, amount)
// pairs in the f64 buffer, read into g_numbered, which keeps its room
// between calls.
static const std::vector<drl::NumberedAmount>& numbered(int count) {
  const size_t n = std::min<size_t>(count > 0 ? static_cast<size_t>(count) : 0, g_f64.size() / 2);
  g_numbered.resize(n);
  for (size_t i = 0; i < n; ++i) g_numbered[i] = drl::NumberedAmount{unit_number(g_f64[2 * i]), g_f64[2 * i + 1]};
  return g_numbered;
}

// The same amounts by unit name, for a report's usage: a number the engine
// does not know reads as "" (no window counts it: the engine's own error).
// Filled into `out` in place, so a usage per take reuses the vector and its
// short unit names, allocating nothing.
static void named(const drl::Engine& e, int count, drl::Amounts& out) {
  const auto& pairs = numbered(count);
  out.resize(pairs.size());
  for (size_t i = 0; i < pairs.size(); ++i) {
    out[i].unit = e.unit_name(pairs[i].unit);
    out[i].amount = pairs[i].amount;
  }
}

// A unit's number, from its name in the scratch buffer: -1 if no config of
// this engine named it.
DRL_EXPORT(drl_unit_number) int drl_unit_number(int h, int len) {
  auto* e = engine(h);
  return e ? e->unit_number(scratch(len)) : kBadHandle;
}

// A cost per unit by number: `count` (number, amount) pairs in the f64 buffer.
DRL_EXPORT(drl_arrive_numbered)
double drl_arrive_numbered(int h, int count, double priority, double max_wait_ms, double max_retries, double now) {
  auto* e = engine(h);
  if (!e) return kBadHandle;
  const auto& cost = numbered(count);
  auto t = e->arrive_numbered(cost.data(), cost.size(), waiting(priority, max_wait_ms, max_retries), to_ms(now));
  return t.ok() ? static_cast<double>(*t) : fail(t.error());
}

// A cost per unit: a JSON object ({"tokens":1200}) in the scratch buffer.
// A ticket (> 0), or -code.
DRL_EXPORT(drl_arrive_units)
double drl_arrive_units(int h, int len, double priority, double max_wait_ms, double max_retries, double now) {
  auto* e = engine(h);
  if (!e) return kBadHandle;
  auto cost = drl::parse_amounts(scratch(len), "cost");
  if (!cost.ok()) return fail(cost.error());
  auto t = e->arrive(*cost, waiting(priority, max_wait_ms, max_retries), to_ms(now));
  return t.ok() ? static_cast<double>(*t) : fail(t.error());
}

// flags: bit 0 rate limited by a hook; bits 1-2 failure (0 none, 1 retryable,
// 2 final). retry_after_ms: NaN when absent. header_len: -1 when no header,
// else the header's length at the start of the scratch buffer. usage_len: -1
// when no usage, else the length of its JSON object, right after the header;
// usage_len <= -2: -(usage_len + 2) (number, amount) pairs in the f64 buffer
// (units by number, as drl_arrive_numbered). limits_len: -1 when no
// rate-limit headers, else the length of their "name: value" lines, after
// the header and the usage's JSON.
DRL_EXPORT(drl_report)
int drl_report(int h, double ticket, int status_code, int flags, double retry_after_ms, int header_len, int usage_len,
               int limits_len, double now) {
  auto* e = engine(h);
  if (!e) return kBadHandle;
  drl::Report r;
  r.status = status_code;
  r.rate_limited = (flags & 1) != 0;
  r.failure = static_cast<drl::Failure>((flags >> 1) & 3);
  if (!std::isnan(retry_after_ms)) r.retry_after_ms = retry_after_ms;
  const int header = std::max(header_len, 0);
  if (header_len >= 0) r.retry_after = scratch(header_len);
  const int usage_json = std::max(usage_len, 0);
  if (usage_len <= -2) {
    // The shared vector lent to the report and taken back after it, so it keeps its room.
    named(*e, -(usage_len + 2), g_amounts);
    r.usage = std::move(g_amounts);
  } else if (usage_len >= 0) {
    const std::string_view all = scratch(header + usage_len);
    auto usage = drl::parse_amounts(all.substr(std::min<size_t>(all.size(), static_cast<size_t>(header))), "usage");
    if (!usage.ok()) return fail(usage.error());
    r.usage = std::move(*usage);
  }
  if (limits_len >= 0) {
    const std::string_view all = scratch(header + usage_json + limits_len);
    r.rate_limit_headers = all.substr(std::min<size_t>(all.size(), static_cast<size_t>(header + usage_json)));
  }
  const int rc = status(e->report(static_cast<drl::Ticket>(ticket), r, to_ms(now)));
  if (usage_len <= -2) g_amounts = std::move(*r.usage);
  return rc;
}

// Whether the engine reads a header (its lower-case name in the scratch
// buffer) when a bucket learns: the client's forwarding filter must agree.
DRL_EXPORT(drl_is_rate_limit_header) int drl_is_rate_limit_header(int len) {
  return drl::is_rate_limit_header(scratch(len)) ? 1 : 0;
}

DRL_EXPORT(drl_threw) int drl_threw(int h, double ticket, double now) {
  auto* e = engine(h);
  return e ? status(e->threw(static_cast<drl::Ticket>(ticket), to_ms(now))) : kBadHandle;
}

DRL_EXPORT(drl_cancel) int drl_cancel(int h, double ticket, double now) {
  auto* e = engine(h);
  return e ? status(e->cancel(static_cast<drl::Ticket>(ticket), to_ms(now))) : kBadHandle;
}

DRL_EXPORT(drl_withdraw) int drl_withdraw(int h, double ticket, double now) {
  auto* e = engine(h);
  return e ? status(e->withdraw(static_cast<drl::Ticket>(ticket), to_ms(now))) : kBadHandle;
}

// The queued call's predicted start (Engine::predicted_start), NaN if it is not queued.
DRL_EXPORT(drl_predicted) double drl_predicted(int h, double ticket) {
  auto* e = engine(h);
  if (!e) return std::nan("");
  auto at = e->predicted_start(static_cast<drl::Ticket>(ticket));
  return at ? static_cast<double>(*at) : std::nan("");
}

DRL_EXPORT(drl_gone) int drl_gone(int h, double ticket, double now) {
  auto* e = engine(h);
  return e ? status(e->gone(static_cast<drl::Ticket>(ticket), to_ms(now))) : kBadHandle;
}

// The engine's slot key from four 32-bit words of the host's randomness
// (Engine::set_slot_key), high word first.
DRL_EXPORT(drl_set_slot_key) int drl_set_slot_key(int h, double w0, double w1, double w2, double w3) {
  auto* e = engine(h);
  if (!e) return kBadHandle;
  // w mod 2^32, without std::fmod's code: the division by a power of two,
  // the floor and the product are exact below 2^53.
  auto word = [](double w) {
    if (!(std::isfinite(w) && w > 0 && w < 9007199254740992.0)) return uint64_t{0};
    return static_cast<uint64_t>(w - std::floor(w / 4294967296.0) * 4294967296.0);
  };
  e->set_slot_key((word(w0) << 32) | word(w1), (word(w2) << 32) | word(w3));
  return 0;
}

// The running attempt's slot identity into the out buffer (Engine::attempt_slot);
// returns its length, 0 when there is none.
DRL_EXPORT(drl_attempt_slot) int drl_attempt_slot(int h, double ticket) {
  auto* e = engine(h);
  if (!e) return kBadHandle;
  auto slot = e->attempt_slot(static_cast<drl::Ticket>(ticket));
  g_out = slot ? slot->slot : std::string();
  return static_cast<int>(g_out.size());
}

// The attemptTimeoutMs the running attempt runs under, NaN when it is not running.
DRL_EXPORT(drl_attempt_timeout) double drl_attempt_timeout(int h, double ticket) {
  auto* e = engine(h);
  auto timeout = e ? e->attempt_timeout(static_cast<drl::Ticket>(ticket)) : std::nullopt;
  return timeout ? static_cast<double>(*timeout) : std::nan("");
}

// 1 when the bucket learns its limits from the upstream's rate-limit headers
// (its config has `learn`), else 0: a callback need not read them otherwise.
DRL_EXPORT(drl_learns) int drl_learns(int h) {
  auto* e = engine(h);
  const drl::Config* config = e ? e->config() : nullptr;
  return config != nullptr && config->learn.enabled ? 1 : 0;
}

// A caller's attempt finished during an outage (Engine::finished): the slot
// identity in the scratch buffer. Returns 1 when a slot was freed, 0 when
// not, or -code.
DRL_EXPORT(drl_finished) int drl_finished(int h, int len, double ran_ms, double now) {
  auto* e = engine(h);
  if (!e) return kBadHandle;
  auto released = e->finished(scratch(len), ran_ms, to_ms(now));
  if (!released.ok()) return fail(released.error());
  return *released ? 1 : 0;
}

DRL_EXPORT(drl_tick) int drl_tick(int h, double now) {
  auto* e = engine(h);
  if (!e) return kBadHandle;
  e->tick(to_ms(now));
  return 0;
}

// Every start emitted up to `through` has left by `now`: see Engine::released.
DRL_EXPORT(drl_released) int drl_released(int h, double through, double now) {
  auto* e = engine(h);
  if (!e) return kBadHandle;
  if (!(through >= 0)) return 0;
  e->released(static_cast<uint64_t>(std::min(through, 9e15)), to_ms(now));
  return 0;
}

// How many starts the engine has emitted (a mark for drl_released); -1 for a bad handle.
DRL_EXPORT(drl_starts_emitted) double drl_starts_emitted(int h) {
  auto* e = engine(h);
  if (!e) return -1;
  return static_cast<double>(e->starts_emitted());
}

DRL_EXPORT(drl_pause) int drl_pause(int h, double ms, double now) {
  auto* e = engine(h);
  return e ? status(e->pause(ms, to_ms(now))) : kBadHandle;
}

// Stats JSON into the out buffer; returns its length, or -code.
DRL_EXPORT(drl_stats) int drl_stats(int h, double now) {
  auto* e = engine(h);
  if (!e) return kBadHandle;
  auto s = e->stats(to_ms(now));
  if (!s.ok()) return fail(s.error());
  g_out = std::move(*s);
  return static_cast<int>(g_out.size());
}

// The stored config document into the out buffer; returns its length (0 when
// unconfigured).
DRL_EXPORT(drl_config_text) int drl_config_text(int h) {
  auto* e = engine(h);
  if (!e) return kBadHandle;
  g_out = e->config_text();
  return static_cast<int>(g_out.size());
}

DRL_EXPORT(drl_next_wake) double drl_next_wake(int h) {
  auto* e = engine(h);
  auto w = e ? e->next_wake() : std::nullopt;
  return w ? static_cast<double>(*w) : -1;
}

// The slots record into the out buffer; returns its length.
DRL_EXPORT(drl_slots_text) int drl_slots_text(int h) {
  auto* e = engine(h);
  if (!e) return kBadHandle;
  g_out = e->slots_text();
  return static_cast<int>(g_out.size());
}

// The reservation record into the out buffer ("" when none); returns its length.
DRL_EXPORT(drl_reservation_text) int drl_reservation_text(int h) {
  auto* e = engine(h);
  if (!e) return kBadHandle;
  g_out = e->reservation_text();
  return static_cast<int>(g_out.size());
}

// The slots held now, exactly (running_slots_text), into the out buffer; returns its length.
DRL_EXPORT(drl_running_slots_text) int drl_running_slots_text(int h) {
  auto* e = engine(h);
  if (!e) return kBadHandle;
  g_out = e->running_slots_text();
  return static_cast<int>(g_out.size());
}

// Copies and clears the engine's output; returns the number of records.
DRL_EXPORT(drl_output) int drl_output(int h) {
  auto* e = engine(h);
  g_records.clear();
  if (!e) return 0;
  drl::internal::encode_output(*e, g_records);
  e->clear_output();
  return static_cast<int>(g_records.size() / 4);
}

// The tables this module was built from (error_ids.def, output_kinds.def, limits.def) as
// JSON in the out buffer: the JS tests compare them with the generated
// tables the hosts use, so a stale core.wasm or a stale generated file fails.
DRL_EXPORT(drl_contract) int drl_contract() {
  g_out.clear();
  drl::internal::json::Writer out(g_out);
  out.begin_object().key("errors").begin_array();
#define DRL_ERROR(name, code, id, kind, raised_by, client, restores, meaning) \
  out.begin_array().num(code).str(id).str(kind).end_array();
#include "drl/error_ids.def"
#undef DRL_ERROR
  out.end_array().key("actions").begin_array();
#define DRL_ACTION(name, number, js, meaning) out.begin_array().num(number).str(js).end_array();
#define DRL_WRITE(name, number, js, meaning)
#include "drl/output_kinds.def"
#undef DRL_ACTION
#undef DRL_WRITE
  out.end_array().key("writes").begin_array();
#define DRL_ACTION(name, number, js, meaning)
#define DRL_WRITE(name, number, js, meaning) out.begin_array().num(number).str(js).end_array();
#include "drl/output_kinds.def"
#undef DRL_ACTION
#undef DRL_WRITE
  out.end_array();
  out.key("writeRecordBase").num(drl::internal::kWriteRecordBase);
  out.key("limits").begin_object();
#define DRL_LIMIT(type, name, value, meaning) out.key(#name).num(drl::name);
#define DRL_TEXT(name, value, meaning) out.key(#name).str(drl::name);
#define DRL_TEXTS(name, meaning, ...)                   \
  out.key(#name).begin_array();                         \
  for (const char* text : {__VA_ARGS__}) out.str(text); \
  out.end_array();
#include "drl/limits.def"
#undef DRL_LIMIT
#undef DRL_TEXT
#undef DRL_TEXTS
  out.end_object().end_object();
  return static_cast<int>(g_out.size());
}

// ---- history -----------------------------------------------------------------
// Rows cross as lines "<resolution ms> <at> <compact JSON>\n" (the JSON holds
// no raw newline), so nothing is escaped twice.

namespace {
void append_rows(const std::vector<drl::HistoryRow>& rows, std::string& out) {
  for (const drl::HistoryRow& row : rows) {
    out += std::to_string(row.resolution_ms);
    out += ' ';
    out += std::to_string(row.at);
    out += ' ';
    out += row.data;
    out += '\n';
  }
}
}  // namespace

// The history JSON (Engine::history_json) into the out buffer; returns its length, or -code.
DRL_EXPORT(drl_history_json) int drl_history_json(int h, double resolution_ms, double now) {
  auto* e = engine(h);
  if (!e) return kBadHandle;
  const int64_t resolution = std::isfinite(resolution_ms) ? static_cast<int64_t>(resolution_ms) : 0;
  auto json = e->history_json(resolution, to_ms(now));
  if (!json.ok()) return fail(json.error());
  g_out = std::move(*json);
  return static_cast<int>(g_out.size());
}

// Intervals to store (Engine::history_unsaved): 0 when none; else the out
// buffer holds "keep <10 s keep_from> <1 min keep_from>\n" and then the rows.
DRL_EXPORT(drl_history_unsaved) int drl_history_unsaved(int h) {
  auto* e = engine(h);
  if (!e) return kBadHandle;
  const std::vector<drl::HistoryRow> rows = e->history_unsaved();
  if (rows.empty()) return 0;
  g_out = "keep " + std::to_string(e->history_keep_from(10'000)) + ' ' + std::to_string(e->history_keep_from(60'000)) +
          '\n';
  append_rows(rows, g_out);
  return static_cast<int>(g_out.size());
}

// Closed 10 s intervals not yet exported (Engine::history_closed) as rows: 0 when none.
DRL_EXPORT(drl_history_closed) int drl_history_closed(int h) {
  auto* e = engine(h);
  if (!e) return kBadHandle;
  const std::vector<drl::HistoryRow> rows = e->history_closed();
  if (rows.empty()) return 0;
  g_out.clear();
  append_rows(rows, g_out);
  return static_cast<int>(g_out.size());
}

// Stored rows (lines as above, in the scratch buffer) back into the history.
DRL_EXPORT(drl_restore_history) int drl_restore_history(int h, int len, double now) {
  auto* e = engine(h);
  if (!e) return kBadHandle;
  const std::string_view text = scratch(len);
  std::vector<drl::HistoryRow> rows;
  size_t i = 0;
  while (i < text.size()) {
    size_t end = text.find('\n', i);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(i, end - i);
    i = end + 1;
    const size_t a = line.find(' ');
    const size_t b = a == std::string_view::npos ? a : line.find(' ', a + 1);
    if (b == std::string_view::npos) continue;
    // Two decimal integers, as the engine wrote them; a line that is not is skipped.
    auto integer = [](std::string_view text, long long& out) {
      const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), out);
      return error == std::errc() && end == text.data() + text.size();
    };
    long long r = 0;
    long long t = 0;
    if (!integer(line.substr(0, a), r) || !integer(line.substr(a + 1, b - a - 1), t)) continue;
    rows.push_back(drl::HistoryRow{r, t, std::string(line.substr(b + 1))});
  }
  e->restore_history(rows, to_ms(now));
  return 0;
}

// ---- a child of a lease tree (engine.h: make_lease_child) --------------------

// The setup JSON in the scratch buffer.
DRL_EXPORT(drl_make_lease_child) int drl_make_lease_child(int h, int len, double now) {
  auto* e = engine(h);
  return e ? status(e->make_lease_child(scratch(len), to_ms(now))) : kBadHandle;
}

// The region in the scratch buffer: a child made from the bucket's tree (Engine::make_tree_child).
DRL_EXPORT(drl_make_tree_child) int drl_make_tree_child(int h, int len, double incarnation, double now) {
  auto* e = engine(h);
  if (!e) return kBadHandle;
  if (!(incarnation >= 1 && incarnation <= 9e15)) {
    return fail(drl::Error::make(drl::ErrorCode::InvalidArgument, drl::ErrorKind::RangeError,
                                 "make_tree_child: incarnation must be an integer >= 1"));
  }
  return status(e->make_tree_child(scratch(len), static_cast<uint64_t>(incarnation), to_ms(now)));
}

// A LeaseGrant (the root's reply) in the scratch buffer.
DRL_EXPORT(drl_lease_reply) int drl_lease_reply(int h, int len, double now) {
  auto* e = engine(h);
  return e ? status(e->lease_reply(scratch(len), to_ms(now))) : kBadHandle;
}

// A PenaltyNotice in the scratch buffer.
DRL_EXPORT(drl_lease_notice) int drl_lease_notice(int h, int len, double now) {
  auto* e = engine(h);
  return e ? status(e->lease_notice(scratch(len), to_ms(now))) : kBadHandle;
}

// The exchange the latest Exchange action asks to send, into the out buffer; returns its length.
DRL_EXPORT(drl_lease_exchange) int drl_lease_exchange(int h) {
  auto* e = engine(h);
  if (!e) return kBadHandle;
  g_out = e->lease_exchange();
  return static_cast<int>(g_out.size());
}

// ---- the root's ledger (core/src/ledger.h) -----------------------------------
//
// A handle of its own, apart from the engines: made from its config (JSON,
// lease_wire.h read_ledger_config), restored from its stored rows, fed
// exchanges. Rows are JSON objects keyed "lease:<id>", "child:<id>" and
// "next"; an exchange's result in the out buffer:
//   {"reply": <LeaseGrant text> | null, "notice": <PenaltyNotice text> | null,
//    "error": "" or why the ledger refused it as malformed,
//    "writes": [{"op": "put", "key": ..., "row": {...}} | {"op": "delete", "key": ...}]}
// The host makes the writes durable before it delivers the reply; the
// notice goes to every other child at once.

namespace {

struct LedgerHandle {
  drl::internal::Ledger ledger;
  drl::internal::LedgerRows restoring;
};

std::vector<std::unique_ptr<LedgerHandle>> g_ledgers;

LedgerHandle* ledger(int h) {
  return h >= 1 && static_cast<size_t>(h) <= g_ledgers.size() ? g_ledgers[h - 1].get() : nullptr;
}

int lease_fail(const std::string& message) {
  return fail(drl::Error::make(drl::ErrorCode::InvalidArgument, drl::ErrorKind::TypeError, message));
}

void write_ledger_write(drl::internal::json::Writer& out, const drl::internal::LedgerWrite& w) {
  using Kind = drl::internal::LedgerWrite::Kind;
  out.begin_object();
  switch (w.kind) {
    case Kind::kPutLease:
      out.key("op").str("put").key("key").str("lease:" + std::to_string(w.lease.lease_id));
      out.key("row").raw(drl::internal::write_lease_row(w.lease));
      break;
    case Kind::kDeleteLease:
      out.key("op").str("delete").key("key").str("lease:" + std::to_string(w.id));
      break;
    case Kind::kPutChild:
      out.key("op").str("put").key("key").str("child:" + std::to_string(w.child.child));
      out.key("row").raw(drl::internal::write_child_row(w.child));
      break;
    case Kind::kPutNextLeaseId:
      out.key("op").str("put").key("key").str("next");
      out.key("row").begin_object().key("nextLeaseId").num(w.id).end_object();
      break;
  }
  out.end_object();
}

}  // namespace

// The config JSON in the scratch buffer: a handle (>= 1), or -code with
// the field that was wrong in the out buffer.
DRL_EXPORT(drl_ledger_new) int drl_ledger_new(int len) {
  std::string error;
  auto config = drl::internal::read_ledger_config(scratch(len), error);
  if (!config) return lease_fail(error);
  g_ledgers.push_back(std::make_unique<LedgerHandle>(LedgerHandle{drl::internal::Ledger(*config), {}}));
  return static_cast<int>(g_ledgers.size());
}

// A bucket's config JSON in the scratch buffer, its tree on: the root's
// ledger made from it (tree_config.h), or -code naming what was wrong.
DRL_EXPORT(drl_ledger_for_bucket) int drl_ledger_for_bucket(int len) {
  auto parsed = drl::parse_config(scratch(len));
  if (!parsed.ok()) return fail(parsed.error());
  if (!parsed->config.tree.enabled) {
    return fail(drl::Error::make(drl::ErrorCode::InvalidConfig, drl::ErrorKind::RangeError,
                                 "tree: this bucket's config has no tree, so it has no ledger"));
  }
  g_ledgers.push_back(std::make_unique<LedgerHandle>(
      LedgerHandle{drl::internal::Ledger(drl::internal::tree_ledger_config(parsed->config)), {}}));
  return static_cast<int>(g_ledgers.size());
}

DRL_EXPORT(drl_ledger_free) void drl_ledger_free(int h) {
  if (ledger(h)) g_ledgers[h - 1].reset();
}

// One stored row, {"key": ..., "row": {...}} in the scratch buffer, kept
// until drl_ledger_restore_end. An unreadable row is an error: a lease the
// root forgot would be lent twice, so the host must not serve on it.
DRL_EXPORT(drl_ledger_restore_row) int drl_ledger_restore_row(int h, int len) {
  auto* l = ledger(h);
  if (!l) return kBadHandle;
  const std::string_view input = scratch(len);
  // The wrapper, then a row as deep as lease_wire.cpp's reader allows.
  const drl::internal::json::Parsed doc(input, 16);
  const auto* key_field = drl::internal::json::find(doc.doc, "key");
  const auto* row_field = drl::internal::json::find(doc.doc, "row");
  if (key_field == nullptr || !key_field->IsString() || row_field == nullptr) {
    return lease_fail("ledger row must be {\"key\": \"lease:<id>\" | \"child:<id>\" | \"next\", \"row\": {...}}");
  }
  const std::string key = drl::internal::json::text(*key_field);
  const std::string text = drl::internal::json::dump(*row_field);
  std::string error;
  if (key.rfind("lease:", 0) == 0) {
    auto row = drl::internal::read_lease_row(text, error);
    if (!row) return lease_fail(error);
    l->restoring.leases[row->lease_id] = std::move(*row);
  } else if (key.rfind("child:", 0) == 0) {
    auto row = drl::internal::read_child_row(text, error);
    if (!row) return lease_fail(error);
    l->restoring.children[row->child] = std::move(*row);
  } else if (key == "next") {
    const auto* next = drl::internal::json::find(*row_field, "nextLeaseId");
    if (next == nullptr || !next->IsUint64()) {
      return lease_fail("ledger row \"next\" must be {\"nextLeaseId\": an integer >= 0}");
    }
    l->restoring.next_lease_id = next->GetUint64();
  } else {
    return lease_fail("ledger row key must be \"lease:<id>\", \"child:<id>\" or \"next\" (received \"" +
                      key.substr(0, 40) + "\")");
  }
  return 0;
}

// Every stored row has been given: the ledger decides as it did before.
DRL_EXPORT(drl_ledger_restore_end) int drl_ledger_restore_end(int h, double now) {
  auto* l = ledger(h);
  if (!l) return kBadHandle;
  l->ledger.restore(l->restoring, to_ms(now));
  l->restoring = {};
  return 0;
}

// An exchange (JSON text in the scratch buffer) received at `now`: its
// result (above) in the out buffer, or -code when the text is not an
// exchange at all (then no reply: the ledger cannot say to whom).
DRL_EXPORT(drl_ledger_exchange) int drl_ledger_exchange(int h, int len, double now) {
  auto* l = ledger(h);
  if (!l) return kBadHandle;
  std::string error;
  auto ex = drl::internal::read_exchange(scratch(len), error);
  if (!ex) return lease_fail(error);
  const drl::internal::ExchangeResult r = l->ledger.on_exchange(*ex, to_ms(now));
  // The reply and the notice cross as strings (JSON text the host passes
  // on to the child as it is).
  g_out.clear();
  drl::internal::json::Writer out(g_out);
  out.begin_object().key("reply");
  if (r.reply) {
    out.str(drl::internal::write_grant(*r.reply));
  } else {
    out.null();
  }
  out.key("notice");
  if (r.notice) {
    out.str(drl::internal::write_notice(*r.notice));
  } else {
    out.null();
  }
  out.key("error").str(r.error).key("writes").begin_array();
  for (const auto& w : r.writes) write_ledger_write(out, w);
  out.end_array().end_object();
  return static_cast<int>(g_out.size());
}

// Every child the ledger knows, as the root counts it at `now` (ledger.h,
// ChildView), in the out buffer: a JSON array of
//   {"region", "incarnation", "windows": [per window], "slots": {...},
//    "exchanges", "exchangesPerMinute", "roundTripMs", "leaseMs", "lastExchangeAt"}
// where a window and the slots are {"held", "used", "lapsed", "wanted",
// "granted", "returned"} (granted and returned: since the ledger started)
// and a window also has "reportedUsed" (the same).
DRL_EXPORT(drl_ledger_children) int drl_ledger_children(int h, double now) {
  auto* l = ledger(h);
  if (!l) return kBadHandle;
  const drl::internal::LeaseMillis at = to_ms(now);
  g_out.clear();
  drl::internal::json::Writer out(g_out);
  out.begin_array();
  for (const drl::internal::ChildView& v : l->ledger.children(at)) {
    const drl::internal::ChildTally& t = v.tally;
    const auto dim = [&](size_t k) {
      const auto of = [&](const std::vector<int64_t>& xs) { return k < xs.size() ? xs[k] : 0; };
      out.begin_object().key("held").num(of(v.held)).key("used").num(of(v.used)).key("lapsed").num(of(v.lapsed));
      out.key("wanted").num(of(v.wanted)).key("granted").num(of(t.granted)).key("returned").num(of(t.returned));
    };
    out.begin_object().key("region").str(drl::internal::child_region(v.child));
    out.key("incarnation").num(v.incarnation).key("windows").begin_array();
    const size_t n = v.held.size() - 1;
    for (size_t k = 0; k < n; ++k) {
      dim(k);
      out.key("reportedUsed").num(k < t.used.size() ? t.used[k] : 0).end_object();
    }
    out.end_array().key("slots");
    dim(n);
    out.end_object();
    // Exchanges a minute over what the ledger saw of it (none: 0).
    const double span = static_cast<double>(t.last_at - t.first_at);
    const double rate = t.exchanges < 2 || span <= 0 ? 0 : static_cast<double>(t.exchanges - 1) * 60000.0 / span;
    out.key("exchanges").num(t.exchanges).key("exchangesPerMinute").num(std::round(rate * 10) / 10);
    out.key("roundTripMs").positive_or_null(t.round_trip_ms).key("leaseMs").positive_or_null(t.lease_ms);
    out.key("lastExchangeAt");
    if (t.exchanges > 0) {
      out.num(t.last_at);
    } else {
      out.null();
    }
    out.end_object();
  }
  out.end_array();
  return static_cast<int>(g_out.size());
}

// Units of window k (k == the number of windows: slots) the ledger counts at `now`.
DRL_EXPORT(drl_ledger_occupancy) double drl_ledger_occupancy(int h, int k, double now) {
  auto* l = ledger(h);
  if (!l || k < 0) return -1;
  return static_cast<double>(l->ledger.occupancy(static_cast<size_t>(k), to_ms(now)));
}
