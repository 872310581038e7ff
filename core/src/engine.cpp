#include "drl/engine.h"

#include <algorithm>
#include <cmath>

#include "engine_inspector.h"
#include "scheduler.h"

namespace drl {

using internal::Call;
using internal::Caller;
using internal::Phase;

Engine::Engine() : scheduler_(std::make_unique<internal::Scheduler>()) {}
Engine::~Engine() = default;
Engine::Engine(Engine&&) noexcept = default;
Engine& Engine::operator=(Engine&&) noexcept = default;

namespace {

// A child's holder counts the root's windows, fixed for its life.
Status lease_windows_kept(const internal::Scheduler& s, const ParsedConfig& parsed) {
  if (!s.lease) return Status::success();
  if (s.tree_child && !parsed.config.tree.enabled) {
    return Error::make(ErrorCode::InvalidConfig, ErrorKind::RangeError,
                       "tree: this bucket runs as a lease tree, which a config without tree cannot end "
                       "while it runs: serve a new bucket without one");
  }
  const size_t held = s.lease->holder().windows();
  const size_t given = parsed.config.windows.size() + 1;
  if (held == given) {
    // Nor their lengths: the root counts every unit it lent for the window
    // it lent it under, and a longer window would outlast those counts.
    for (const internal::Window& w : s.windows) {
      const bool primary = w.name == kPrimaryWindow;
      const auto named = std::find_if(parsed.config.windows.begin(), parsed.config.windows.end(),
                                      [&](const WindowConfig& wc) { return wc.name == w.name; });
      if (!primary && named == parsed.config.windows.end()) {
        return Error::make(ErrorCode::InvalidConfig, ErrorKind::RangeError,
                           "this bucket runs as a lease tree, whose windows cannot change while it runs (the config "
                           "has no window " +
                               w.name + "): serve a new bucket");
      }
      const int64_t ms = primary ? parsed.config.bucket.window_ms : named->window_ms;
      if (ms == w.ms) continue;
      return Error::make(ErrorCode::InvalidConfig, ErrorKind::RangeError,
                         "this bucket runs as a lease tree, whose window lengths cannot change while it runs (" +
                             (primary ? std::string("bucket.windowInMs") : "windows." + w.name + ".windowInMs") +
                             " is " + std::to_string(w.ms) + ", the config gives " + std::to_string(ms) +
                             "): serve a new bucket");
    }
    return Status::success();
  }
  return Error::make(ErrorCode::InvalidConfig, ErrorKind::RangeError,
                     "this engine is a lease child counting " + std::to_string(held) +
                         " windows, the root's; the config has " + std::to_string(given) +
                         ": a child's windows cannot change (make a new child, a new incarnation)");
}

// Every arrive's last step, once its cost is filled in: the Waiting checked
// (the common default skips the rules), then the call queued or started.
Expected<Ticket> enqueue_waiting(internal::Scheduler& s, Call&& c, const Waiting& waiting, Millis now) {
  if (!internal::default_waiting(waiting)) {
    if (auto problem = internal::waiting_problem(waiting)) return *problem;
  }
  return s.enqueue(std::move(c), waiting, now);
}

}  // namespace

Status Engine::configure(std::string_view config_json, Millis now) {
  auto parsed = parse_config(config_json);
  if (!parsed.ok()) return parsed.error();
  if (Status kept = lease_windows_kept(*scheduler_, *parsed); !kept.ok()) return kept;
  scheduler_->advance(now);
  scheduler_->apply_config(std::move(*parsed));
  scheduler_->advance(now);  // a shorter window may have expired grants
  scheduler_->serve();
  return Status::success();
}

Status Engine::reconfigure(std::string_view patch_json, Millis now) {
  if (!scheduler_->cfg) return scheduler_->not_configured();
  auto merged = apply_config_patch(scheduler_->cfg->text, patch_json);
  if (!merged.ok()) return merged.error();
  if (Status kept = lease_windows_kept(*scheduler_, *merged); !kept.ok()) return kept;
  scheduler_->advance(now);
  scheduler_->apply_config(std::move(*merged));
  scheduler_->advance(now);
  scheduler_->serve();
  return Status::success();
}

void Engine::erase(Millis now) {
  scheduler_->advance(now);
  scheduler_->history.clear();  // EraseAll deletes its rows too
  for (auto& [t, c] : scheduler_->calls) {
    if (c.phase == Phase::Running) {
      if (c.caller != Caller::Settled) scheduler_->reject(t, ErrorCode::NoSuchLimiter);
      c.caller = Caller::Settled;
    }
  }
  scheduler_->queue.for_each([&](Ticket t) {
    if (scheduler_->calls.count(t)) {
      scheduler_->reject(t, ErrorCode::NoSuchLimiter);
      scheduler_->calls.erase(t);
    }
  });
  for (Ticket t : scheduler_->ready) {
    scheduler_->reject(t, ErrorCode::NoSuchLimiter);
    scheduler_->release(t);
  }
  for (const auto& [due, t] : scheduler_->backoff) {
    scheduler_->reject(t, ErrorCode::NoSuchLimiter);
    scheduler_->release(t);
  }
  scheduler_->queue.clear();
  scheduler_->ready.clear();
  scheduler_->backoff.clear();
  scheduler_->active -= static_cast<size_t>(scheduler_->slots.erase());
  scheduler_->cfg.reset();
  scheduler_->windows.clear();
  scheduler_->rows.forget_owed();
  scheduler_->penalty.clear();
  scheduler_->rows.put(WriteKind::EraseAll);
  scheduler_->released_stored.reset();  // EraseAll takes the mark along
  scheduler_->released_due.reset();
  // EraseAll deletes the slots record, but callbacks still running keep their
  // slots (in a bucket configured again too): the next step with a config
  // finds them uncovered and writes them.
  scheduler_->serve();  // no bucket: the wake is only the running attempts' deadlines
}

Expected<Ticket> Engine::arrive(double cost, Millis now) { return arrive(cost, Waiting{}, now); }

Expected<Ticket> Engine::arrive(const Amounts& cost, Millis now) { return arrive(cost, Waiting{}, now); }

Expected<Ticket> Engine::arrive(double cost, const Waiting& waiting, Millis now) {
  if (!scheduler_->cfg) return scheduler_->not_configured();
  if (!internal::plain_amount(cost)) return *internal::amount_problem(cost, "cost");
  Call c;
  c.set_cost(scheduler_->windows[0].unit, static_cast<int64_t>(cost));
  if (const internal::Window* w = scheduler_->windows.too_large(c)) return scheduler_->cost_too_large(*w, c, false);
  return enqueue_waiting(*scheduler_, std::move(c), waiting, now);
}

Expected<Ticket> Engine::arrive(const Amounts& cost, const Waiting& waiting, Millis now) {
  if (!scheduler_->cfg) return scheduler_->not_configured();
  Call c;
  Status costed = scheduler_->costed(cost, c);
  if (!costed.ok()) return costed.error();
  return enqueue_waiting(*scheduler_, std::move(c), waiting, now);
}

Expected<Ticket> Engine::arrive_numbered(const NumberedAmount* cost, size_t count, const Waiting& waiting, Millis now) {
  if (!scheduler_->cfg) return scheduler_->not_configured();
  Call c;
  if (!scheduler_->costed_plainly(cost, count, c)) {
    // Something to refuse: the named form finds it and words it.
    Amounts named(count);
    for (size_t i = 0; i < count; ++i) named[i] = Amount{unit_name(cost[i].unit), cost[i].amount};
    return arrive(named, waiting, now);
  }
  if (const internal::Window* w = scheduler_->windows.too_large(c)) return scheduler_->cost_too_large(*w, c, true);
  return enqueue_waiting(*scheduler_, std::move(c), waiting, now);
}

Status Engine::report(Ticket t, const Report& r, Millis now) {
  // A usage is checked before anything changes; only a running call's is
  // (a report for any other ticket is refused below whatever it carries).
  internal::Usage usage;
  const bool settles = r.usage && scheduler_->cfg && scheduler_->running_call(t);
  if (settles) {
    Status checked = scheduler_->usage_of(*r.usage, usage);
    if (!checked.ok()) return checked;
  }
  scheduler_->release_reported(t, now);
  Call* c = scheduler_->end_attempt(t, now);
  if (!c) return scheduler_->unknown_ticket(t, "report");
  // Settled first, at the report's time, so a refund frees room for the calls served below.
  if (settles) scheduler_->settle_usage(*c, usage);
  if (r.rate_limit_headers && scheduler_->cfg) {
    scheduler_->learn_from(*c, *r.rate_limit_headers);
    scheduler_->advance(now);  // a reset already past lifts at once
  }
  const bool rate_limited = r.status == 429 || r.rate_limited;
  if (rate_limited && scheduler_->cfg) {
    scheduler_->history.rate_limited();
    // A 429 pauses everyone, even when the caller that saw it has gone.
    const Millis delay = internal::penalty_delay(scheduler_->config().retry, r, c->attempt, scheduler_->now);
    scheduler_->penalise(delay);
    // A child stops at once and tells the root, which tells its siblings.
    if (scheduler_->lease) scheduler_->lease->penalty(delay, scheduler_->now);
    scheduler_->advance(now);  // a zero delay lifts at once
  }
  // Past this point the bucket exists: erase() settles every running call,
  // and only erase() removes the config from an engine that has calls.
  if (scheduler_->settle_if_abandoned(t, *c)) {
    scheduler_->serve();
    return Status::success();
  }
  if (rate_limited) {
    // A 429 outranks any failure: everyone is paused (above); retry this call.
    if (scheduler_->attempts_remain(*c)) {
      scheduler_->retry_after(t, *c, 0);
    } else {
      scheduler_->reject(t, ErrorCode::CallFailed, r.status != 0 ? r.status : 429);
      scheduler_->release(t);
    }
  } else if (r.failure != Failure::None) {
    if (r.failure == Failure::Retryable && scheduler_->attempts_remain(*c)) {
      scheduler_->retry_after(t, *c, internal::backoff_delay(scheduler_->config().retry, c->attempt));
    } else {
      scheduler_->reject(t, ErrorCode::CallFailed, r.status);
      scheduler_->release(t);
    }
  } else {
    scheduler_->act(ActionKind::Resolve, t, c->attempt);
    scheduler_->release(t);
  }
  scheduler_->serve();
  return Status::success();
}

Status Engine::threw(Ticket t, Millis now) {
  scheduler_->release_reported(t, now);
  Call* c = scheduler_->end_attempt(t, now);
  if (!c) return scheduler_->unknown_ticket(t, "throw");
  if (!scheduler_->settle_if_abandoned(t, *c)) {  // the bucket exists (see report)
    if (scheduler_->attempts_remain(*c)) {
      scheduler_->retry_after(t, *c, internal::backoff_delay(scheduler_->config().retry, c->attempt));
    } else {
      scheduler_->reject(t, ErrorCode::CallbackThrew);
      scheduler_->release(t);
    }
  }
  scheduler_->serve();
  return Status::success();
}

Status Engine::cancel(Ticket t, Millis now) {
  auto it = scheduler_->calls.find(t);
  if (it == scheduler_->calls.end()) return scheduler_->unknown_ticket(t, "cancel");
  // Acted on before time moves, as report() does: the advance may time out
  // this very call (its deadline passed, the timer not yet fired) and erase it.
  scheduler_->history.advance(std::max(scheduler_->now, now));  // its drop counts in the interval it happens in
  Call& c = it->second;
  switch (c.phase) {
    case Phase::Queued:
      scheduler_->drop_queued(t, ErrorCode::Cancelled);
      break;
    case Phase::Running:
      // Keeps its slot: the work is still in flight. A call erase() already
      // settled stays settled.
      if (c.caller == Caller::Waiting) c.caller = Caller::Cancelled;
      break;
    case Phase::Ready:
      scheduler_->ready.erase(t);
      scheduler_->reject(t, ErrorCode::Cancelled);
      scheduler_->release(t);
      break;
    case Phase::Backoff: {
      auto range = scheduler_->backoff.equal_range(c.due);
      for (auto b = range.first; b != range.second; ++b) {
        if (b->second == t) {
          scheduler_->backoff.erase(b);
          break;
        }
      }
      scheduler_->reject(t, ErrorCode::Cancelled);
      scheduler_->release(t);
      break;
    }
  }
  scheduler_->advance(now);
  scheduler_->serve();
  return Status::success();
}

Status Engine::withdraw(Ticket t, Millis now) {
  auto it = scheduler_->calls.find(t);
  if (it == scheduler_->calls.end()) return scheduler_->unknown_ticket(t, "withdraw");
  // Waiting (queued, or between attempts): the same as a cancel.
  if (it->second.phase != Phase::Running) return cancel(t, now);
  it->second.withdrawn = true;  // its outcome stands unless it would be retried
  scheduler_->advance(now);
  scheduler_->serve();
  return Status::success();
}

std::optional<Millis> Engine::predicted_start(Ticket t) const {
  auto it = scheduler_->calls.find(t);
  if (it == scheduler_->calls.end() || it->second.phase != Phase::Queued || !scheduler_->cfg) return std::nullopt;
  return scheduler_->predict(it->second);
}

Status Engine::gone(Ticket t, Millis now) {
  Call* c = scheduler_->end_attempt(t, now);
  if (!c) return scheduler_->unknown_ticket(t, "gone");
  if (c->caller != Caller::Settled) scheduler_->reject(t, ErrorCode::CallerGone);
  scheduler_->release(t);
  scheduler_->serve();
  return Status::success();
}

void Engine::tick(Millis now) {
  scheduler_->advance(now);
  scheduler_->serve();
}

uint64_t Engine::starts_emitted() const { return scheduler_->starts_emitted; }

void Engine::released(uint64_t through, Millis now) {
  scheduler_->advance(now);
  scheduler_->release_through(through);
  scheduler_->serve();
}

Status Engine::pause(double ms, Millis now) {
  if (!scheduler_->cfg) return scheduler_->not_configured();
  if (!std::isfinite(ms)) {
    return Error::make(ErrorCode::InvalidArgument, ErrorKind::TypeError,
                       "pause ms must be a finite number, an integer between 0 and " + std::to_string(kMaxDelayMs) +
                           " (received " + internal::number_text(ms) + ")");
  }
  if (ms < 0 || ms != std::floor(ms) || ms > static_cast<double>(kMaxDelayMs)) {
    return Error::make(ErrorCode::InvalidArgument, ErrorKind::RangeError,
                       "pause ms must be an integer between 0 and " + std::to_string(kMaxDelayMs) + " (received " +
                           internal::number_text(ms) + ")");
  }
  scheduler_->advance(now);
  scheduler_->penalise(static_cast<Millis>(ms));
  scheduler_->advance(now);  // a zero pause lifts at once
  scheduler_->serve();
  return Status::success();
}

void Engine::set_reservations(bool on) {
  if (!on && scheduler_->reservations.record()) {
    scheduler_->write_reservation(false);  // rows written, record cleared
    scheduler_->reservations.switched_off();
  }
  scheduler_->reservations.set_on(on);
}
bool Engine::reservations() const { return scheduler_->reservations.on(); }
void Engine::set_release_dating(bool on) {
  scheduler_->dating = on;
  if (!on) {
    // Takes no release will come for: read now, the latest they may be.
    if (scheduler_->lease) scheduler_->lease->released(~uint64_t{0}, scheduler_->now);
    scheduler_->unreleased.clear();
    scheduler_->lags.drop_allowance();
    scheduler_->released_due.reset();
  }
}
void Engine::set_slot_key(uint64_t k0, uint64_t k1) { scheduler_->slots.set_key(internal::SlotKey{k0, k1}); }

std::optional<Engine::AttemptSlot> Engine::attempt_slot(Ticket t) const {
  auto it = scheduler_->calls.find(t);
  const auto& key = scheduler_->slots.key();
  if (!key || it == scheduler_->calls.end() || it->second.phase != Phase::Running) return std::nullopt;
  const internal::Call& c = it->second;
  internal::SlotIdentity id{t, c.attempt, c.started_at, c.deadline - c.timeout, 0};
  id.tag = internal::slot_tag(*key, id);
  return AttemptSlot{internal::slot_identity_text(id), c.timeout};
}

std::optional<Millis> Engine::attempt_timeout(Ticket t) const {
  auto it = scheduler_->calls.find(t);
  if (!scheduler_->slots.key() || it == scheduler_->calls.end() || it->second.phase != Phase::Running)
    return std::nullopt;
  return it->second.timeout;
}

Expected<bool> Engine::finished(std::string_view slot, double ran_ms, Millis now) {
  const auto id = internal::parse_slot_identity(slot);
  if (!id) {
    const std::string shown(slot.substr(0, 80));
    return Error::make(ErrorCode::InvalidArgument, ErrorKind::TypeError,
                       "finished(slot): slot must be the identity the object handed the callback when it started it, "
                       "\"ticket.attempt.number.start.tag\" (received \"" +
                           shown + (slot.size() > 80 ? "...\")" : "\")"));
  }
  if (!std::isfinite(ran_ms) || ran_ms < 0) {
    return Error::make(
        ErrorCode::InvalidArgument, ErrorKind::RangeError,
        "finished(slot, ranMs): ranMs must be a finite number >= 0, how long the callback ran (received " +
            internal::number_text(ran_ms) + ")");
  }
  scheduler_->advance(now);
  const bool released =
      scheduler_->cfg && scheduler_->slots.release_finished(*id, ran_ms, scheduler_->now, scheduler_->timeout());
  if (released) --scheduler_->active;
  scheduler_->serve();
  return released;
}
}  // namespace drl
