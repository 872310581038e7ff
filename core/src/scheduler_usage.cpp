#include "scheduler.h"

#include "json.h"

#include "drl/ratelimit_headers.h"
#include "drl/retry_after.h"

namespace drl::internal {

Status Scheduler::costed(const Amounts& cost, Call& c) {
  if (cost.empty()) {
    return Error::make(ErrorCode::InvalidArgument, ErrorKind::RangeError,
                       "cost names no unit (received {}): give a number, or at least one unit such as { tokens: "
                       "1200 }");
  }
  if (cost.size() > kMaxWindows) {
    return Error::make(ErrorCode::InvalidArgument, ErrorKind::RangeError,
                       "cost must name at most " + std::to_string(kMaxWindows) + " units, one per window (received " +
                           std::to_string(cost.size()) + ")");
  }
  const int default_unit = windows[0].unit;
  c.set_cost(default_unit, 1);
  for (const Amount& a : cost) {
    const int unit = windows.counted_unit(a.unit);
    if (unit < 0 && !valid_name(a.unit)) {
      return Error::make(
          ErrorCode::InvalidArgument, ErrorKind::RangeError,
          "cost has the key " + json::quote(a.unit) + ", which is not a unit name (" + name_rule() + ")");
    }
    if (unit < 0) {
      return Error::make(
          ErrorCode::InvalidArgument, ErrorKind::RangeError,
          "cost names unit " + json::quote(a.unit) + ", which no window counts (units: " + windows.unit_list() + ")");
    }
    if (auto problem = amount_problem(a.amount, "cost", a.unit)) return *problem;
    c.set_cost(unit, static_cast<int64_t>(a.amount));
  }
  if (const Window* w = windows.too_large(c)) return cost_too_large(*w, c, true);
  return Status::success();
}

bool Scheduler::costed_plainly(const NumberedAmount* cost, size_t count, Call& c) const {
  if (count == 0 || count > kMaxWindows) return false;
  c.set_cost(windows[0].unit, 1);
  for (size_t i = 0; i < count; ++i) {
    if (!windows.counts(cost[i].unit) || !plain_amount(cost[i].amount)) return false;
    c.set_cost(cost[i].unit, static_cast<int64_t>(cost[i].amount));
  }
  return true;
}

// "cost 1001 tokens exceeds window "tpm"'s limitPerWindow 1000, ...": the
// unit named when the caller named units, the window when it is not the
// primary or units were named.
Error Scheduler::cost_too_large(const Window& w, const Call& c, bool named_units) const {
  std::string what = "cost " + std::to_string(c.cost_in(w.unit));
  if (named_units) what += " " + windows.unit_name(w.unit);
  const std::string where =
      w.number == 0 && !named_units ? "limitPerWindow " : "window " + json::quote(w.name) + "'s limitPerWindow ";
  return Error::make(ErrorCode::CostTooLarge, ErrorKind::RangeError,
                     what + " exceeds " + where + std::to_string(w.limit) + ", so it could never be admitted");
}

Status Scheduler::usage_of(const Amounts& usage, Usage& out) const {
  out.size = 0;
  for (const Amount& a : usage) {
    const int unit = windows.counted_unit(a.unit);
    if (unit < 0) {
      return Error::make(
          ErrorCode::InvalidArgument, ErrorKind::RangeError,
          "usage names unit " + json::quote(a.unit) + ", which no window counts (units: " + windows.unit_list() + ")");
    }
    // An integer in [0, kMaxUsage] first, by a cast exact there (floor is a library call).
    const bool usable =
        a.amount >= 0 && a.amount <= kMaxUsage && a.amount == static_cast<double>(static_cast<int64_t>(a.amount));
    if (!usable) {
      return Error::make(
          ErrorCode::InvalidArgument, std::isfinite(a.amount) ? ErrorKind::RangeError : ErrorKind::TypeError,
          "usage." + a.unit + " must be an integer between 0 and " + std::to_string(static_cast<int64_t>(kMaxUsage)) +
              " (received " + number_text(a.amount) + ")");
    }
    size_t i = 0;
    while (i < out.size && out.units[i].first != unit) ++i;
    // Each is a unit some window counts, so at most kMaxWindows distinct.
    if (i == out.size) ++out.size;
    out.units[i] = {unit, static_cast<int64_t>(a.amount)};
  }
  return Status::success();
}

void Scheduler::settle_usage(const Call& c, const Usage& usage) {
  for (Window& w : windows) {
    const int64_t* used = usage.of(w.unit);
    if (!used) continue;
    const int64_t real = *used;
    const Take* take = c.take_in(w.number);
    // A take from an older window of this name reserved nothing in this one.
    if (take && take->incarnation != w.incarnation) take = nullptr;
    const int64_t reserved = take ? take->amount : 0;
    if (real < reserved) {
      if (take->epoch != w.epoch || take->at + w.ms <= now) continue;
      // Stored later (RowWriter::owe): a row that still holds the
      // refunded amount only over-counts until then, the safe side.
      if (w.log.shrink(take->at, reserved - real)) {
        rows.owe(w.number, take->at);
        history.charge(w.number, real - reserved);
      }
    } else if (real > reserved) {
      grant(w, real - reserved);
      history.charge(w.number, real - reserved);
    }
  }
}

Window* Scheduler::window_for(const std::string& dimension) {
  for (const auto& [d, name] : config().learn.map) {
    if (d != dimension) continue;
    for (Window& w : windows) {
      if (w.name == name) return &w;
    }
  }
  if (dimension == "default") return &windows[0];
  // The first window counting a unit of that name, the primary first: a
  // bucket whose default unit is tokens corrects its tokens window from
  // "tokens", and no window from "requests" unless one counts requests.
  for (Window& w : windows) {
    if (windows.unit_name(w.unit) == dimension) return &w;
  }
  return nullptr;
}

void Scheduler::learn_from(const Call& c, std::string_view text) {
  const LearnConfig& learn = config().learn;
  if (!learn.enabled) return;
  std::vector<HeaderField> fields;
  size_t i = 0;
  while (i < text.size() && fields.size() < kMaxRateLimitHeaders) {
    size_t end = text.find('\n', i);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(i, end - i);
    i = end + 1;
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    fields.push_back(HeaderField{line.substr(0, colon), value});
  }
  const HeaderConvention convention = header_convention(learn.headers).value_or(HeaderConvention::Auto);
  for (const Observation& o : parse_rate_limit_headers(fields, convention, now)) {
    Window* w = window_for(o.dimension);
    if (w == nullptr) continue;
    w->learned = Window::Learned{o.limit, o.remaining, o.reset_at_ms, now};
    if (!o.remaining) continue;
    // Admitted here since this attempt started, less its own take (which
    // the upstream did count): the safe side counts the whole grant of
    // that millisecond.
    const Take* take = c.take_in(w->number);
    const int64_t own = take != nullptr && take->epoch == w->epoch ? take->amount : 0;
    const int64_t since = std::max<int64_t>(0, w->log.live_at(1, c.started_at) - own);
    const int64_t allows = *o.remaining - since;
    // Dated so that it leaves the window at the upstream's reset (a reset
    // more than a window away: now, so one window), never in the future.
    const Millis at = o.reset_at_ms ? std::min<Millis>(*o.reset_at_ms - w->ms, now) : now;
    if (at + w->ms <= now) continue;  // the reset has passed: nothing to hold
    // The difference from what the window has left now is held until the
    // reset. (Its own grants that leave before then free room the upstream
    // may not have: holding against those too would treat every reset as
    // "all at once", and a sliding upstream frees its units one by one;
    // the next response corrects it.) A remaining of 0 so fills the window
    // until the reset: every caller that needs it waits, before any 429,
    // and it is free again at the reset (no penalty, whose lift would keep
    // half the limit for another window).
    const int64_t ours = std::max<int64_t>(0, w->limit - w->log.used());
    if (allows < ours) grant(*w, ours - std::max<int64_t>(0, allows), at);
  }
}

}  // namespace drl::internal
