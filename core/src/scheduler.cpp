#include "scheduler.h"

namespace drl::internal {

void Scheduler::act(ActionKind kind, Ticket t, uint32_t attempt) {
  actions.push_back(Action{kind, t, attempt});
  if (kind == ActionKind::Resolve) history.completed();
}

void Scheduler::reject(Ticket t, ErrorCode code, int64_t status) {
  actions.push_back(Action{ActionKind::Reject, t, 0, code, status});
  history.rejected(code);
}

void Scheduler::advance(Millis t) {
  now = std::max(now, t);
  history.advance(now);
  time_out_attempts();
  if (!cfg) return;
  free_restored_slots();
  if (penalty.due(now)) lift();
  hold_unreleased();
  for (Window& w : windows) {
    if (auto through = w.log.prune(w.ms, now)) rows.put(WriteKind::DeleteGrantsThrough, *through, 0, w.number);
  }
  // A deadline already past when the host's event arrives (its timer came
  // late, or another event came first) is met now, before anything this
  // event frees could start the call, and before a newcomer is predicted
  // behind it. One that is due exactly now still gets its chance (serve).
  expire_waits(/*overdue_only=*/true);
}

void Scheduler::slot_started(Ticket t, Call& c, Millis at) {
  c.started_at = at;
  c.timeout = cfg ? timeout() : kMaxAttemptTimeoutMs;
  c.deadline = now + c.timeout;
  deadlines.started(t, c);
  slots.started(at);
}

void Scheduler::attempt_ended(Ticket t, Call& c) {
  --running;
  deadlines.ended(t, c);
  slots.ended(c.started_at);
}

void Scheduler::time_out_attempts() {
  for (auto due = deadlines.next(); due && due->first <= now; due = deadlines.next()) {
    const Ticket t = due->second;
    Call& c = calls[t];
    attempt_ended(t, c);                     // its deadline goes
    if (lease) lease->attempt_timed_out(t);  // its slot there frees by the holder's own clock
    // The timeout it ran under, which a reconfigure since did not change.
    if (c.caller != Caller::Settled) reject(t, ErrorCode::AttemptTimeout, static_cast<int32_t>(c.timeout));
    release(t);
  }
}

void Scheduler::lift() {
  rows.forget_owed();     // every log is rewritten whole below
  reservations.lifted();  // (the record is rewritten in this step: the lift stores anyway)
  for (Window& w : windows) {
    const Grant g = penalty.lifted(w.log, w.limit, w.ms, refill_fraction());
    w.log.replace(g);
    w.epoch = windows.new_epoch();
    rows.put(WriteKind::ClearGrants, 0, 0, w.number);
    if (g.amount > 0) rows.put(WriteKind::PutGrant, g.at, g.amount, w.number);
  }
  penalty.lift();
  put_penalty();
}

void Scheduler::penalise(Millis delay) {
  if (penalty.impose(now, delay)) put_penalty();
}

int64_t Scheduler::max_retries_of(const Call& c) const {
  return c.max_retries >= 0 ? static_cast<int64_t>(c.max_retries) : config().retry.max_retries;
}

void Scheduler::release(Ticket t) {
  Calls::Node node = calls.extract(t);
  --active;
  if (!node) return;
  deadlines.ended(t, node->second);  // (already ended, unless its attempt ran on regardless)
  if (spare_calls.size() < kSpareCalls) spare_calls.push_back(std::move(node));
}

Call& Scheduler::admit(Ticket t, Call&& c) {
  if (spare_calls.empty()) return calls.emplace(t, std::move(c)).first->second;
  Calls::Node node = std::move(spare_calls.back());
  spare_calls.pop_back();
  std::vector<Take> takes = std::move(node->second.takes);  // its capacity, for this call's start
  takes.clear();
  node->first = t;
  node->second = std::move(c);
  node->second.takes = std::move(takes);
  return calls.insert(std::move(node));
}

void Scheduler::drop_queued(Ticket t, ErrorCode code, int64_t status) {
  auto it = calls.find(t);
  queue.pop(t, it->second);
  calls.erase(it);
  reject(t, code, status);
}

bool Scheduler::expire_waits(bool overdue_only) {
  // The common case in O(1): the earliest entry, stale or not, is not due.
  if (!queue.deadline_may_be_due(now, overdue_only)) return false;
  bool any = false;
  for (auto due = queue.next_deadline(); due && (overdue_only ? due->first < now : due->first <= now);
       due = queue.next_deadline()) {
    const Ticket t = due->second;
    const Millis at = predict(calls.at(t));
    drop_queued(t, ErrorCode::DeadlineExceeded, std::max<Millis>(0, at - now));
    any = true;
  }
  return any;
}

void Scheduler::serve() {
  wake.reset();
  if (!cfg) {
    // Running calls of an erased bucket still time out.
    if (auto due = deadlines.next()) wake = due->first;
    return;
  }
  // A call that can start at its deadline starts; one still queued after
  // that is rejected, and whoever was behind it may now go.
  do {
    wake.reset();
    start_what_can();
  } while (expire_waits());
  if (!backoff.empty() && (!wake || backoff.begin()->first < *wake)) wake = backoff.begin()->first;
  // Nothing can start before the penalty lifts: no point waking earlier.
  if (wake && penalty.pending()) wake = std::max(*wake, penalty.until());
  // A caller queued behind restored slots waits for the first to free.
  if (auto freed = slots.first_restored_free(timeout());
      freed && !queue.empty() && active >= static_cast<size_t>(config().concurrency)) {
    if (!wake || *freed < *wake) wake = freed;
  }
  // Timeouts and deadlines fire whatever else waits, a penalty included.
  if (auto due = deadlines.next(); due && (!wake || due->first < *wake)) wake = due->first;
  if (auto due = queue.next_deadline(); due && (!wake || due->first < *wake)) wake = due->first;
  store_slots_record();
  store_owed_rows();
  store_reservation();
  store_release_mark();
  if (released_due && (!wake || *released_due < *wake)) wake = released_due;
  if (auto due = slots.write_due(); due && (!wake || *due < *wake)) wake = due;
  if (auto due = rows.owed_due(); due && (!wake || *due < *wake)) wake = due;
  if (auto due = reservations.wake(now); due && (!wake || *due < *wake)) wake = due;
  if (lease) lease_step();
  history.hold(queue.size(), running);
}

void Scheduler::start_what_can() {
  while (true) {
    Ticket t = 0;
    bool from_queue = false;
    if (!backoff.empty() && backoff.begin()->first <= now) {
      // Keep due retries in ticket order however their delays interleave.
      while (!backoff.empty() && backoff.begin()->first <= now) {
        ready.insert(backoff.begin()->second);
        calls[backoff.begin()->second].phase = Phase::Ready;
        backoff.erase(backoff.begin());
      }
    }
    if (!ready.empty()) {
      t = *ready.begin();
      if (windows.too_large(calls[t])) {
        // The limit was lowered while its callback ran (reject_oversized
        // spares running calls), and now it can never fit. No queued
        // caller gets here: arrive checks the cost against the limit, and
        // every config change rejects the queued callers that no longer fit.
        reject(t, ErrorCode::CostTooLarge);
        ready.erase(ready.begin());
        release(t);
        continue;
      }
    } else {
      t = queue.head();
      if (t == 0 || active >= static_cast<size_t>(config().concurrency)) break;
      from_queue = true;
    }
    Call& c = calls[t];
    if (penalty.pending()) {
      wake = penalty.until();
      break;
    }
    // All or nothing: it starts when it fits in every window, and waits
    // for the latest of them (exact: each log knows when enough expires).
    Millis fits = now;
    for (const Window& w : windows) fits = std::max(fits, w.log.fits_at(c.cost_in(w.unit), w.limit, w.ms, now));
    if (fits > now) {
      wake = fits;
      break;
    }
    if (lease && !lease_admits(t, c)) break;  // lease_step wakes when the holder may serve it
    if (from_queue) {
      queue.pop(t, c);
      ++active;
    } else {
      ready.erase(ready.begin());
    }
    start(t, c);
  }
}

void Scheduler::start(Ticket t, Call& c) {
  const bool covered = reservations.covers(c, windows.list(), now);
  // Dated when its callback will have left, as far as the recent lags tell.
  const Millis dated = dating ? now + lags.allowance() : now;
  c.takes.clear();
  c.takes.reserve(windows.size());
  for (Window& w : windows) {
    Take& take = c.takes.emplace_back(Take{w.number, w.epoch, 0, c.cost_in(w.unit), w.incarnation});
    if (take.amount > 0) {
      take.at = (covered ? take_unwritten(w, take.amount, dated) : grant(w, take.amount, std::nullopt, dated)).at;
      newest_take = std::max(newest_take, take.at);
      reservations.noted_take(w.number, take.amount);
      history.charge(w.number, take.amount);
    }
  }
  reservations.noted_start(now);
  // Rows owed (refunds, takes moved to their release) wait for the next
  // step that stores while the caller keeps its pace, as the record does.
  if (reservations.on()) rows.defer_to(now + reservations.idle_ms());
  c.phase = Phase::Running;
  ++c.attempt;
  ++running;
  // Keyed by the primary's grant time, where every call takes (unless a
  // reconfigure changed the default unit under a queued call: then now).
  slot_started(t, c, c.takes[0].amount > 0 ? c.takes[0].at : now);
  act(ActionKind::Start, t, c.attempt);
  note_unreleased(t, c);
  if (c.attempt == 1) history.started(now - c.arrived_at);
}

bool Scheduler::starts_at_once(const Call& c) const {
  if (lease) return false;  // serve() asks the holder
  if (!queue.empty() || !ready.empty() || (!backoff.empty() && backoff.begin()->first <= now)) return false;
  if (active >= static_cast<size_t>(config().concurrency) || penalty.pending()) return false;
  for (const Window& w : windows) {
    if (w.log.fits_at(c.cost_in(w.unit), w.limit, w.ms, now) > now) return false;
  }
  return true;
}

void Scheduler::reject_oversized() {
  std::vector<Ticket> oversized;
  queue.for_each([&](Ticket t) {
    auto it = calls.find(t);
    if (it != calls.end() && windows.too_large(it->second)) oversized.push_back(t);
  });
  for (Ticket t : oversized) drop_queued(t, ErrorCode::CostTooLarge);
  for (auto it = ready.begin(); it != ready.end();) {
    if (windows.too_large(calls[*it])) {
      reject(*it, ErrorCode::CostTooLarge);
      release(*it);
      it = ready.erase(it);
    } else {
      ++it;
    }
  }
  for (auto it = backoff.begin(); it != backoff.end();) {
    if (windows.too_large(calls[it->second])) {
      reject(it->second, ErrorCode::CostTooLarge);
      release(it->second);
      it = backoff.erase(it);
    } else {
      ++it;
    }
  }
}

void Scheduler::build_windows(const Config& config) {
  for (const int gone : windows.configure(config)) rows.put(WriteKind::ClearGrants, 0, 0, gone);
}

void Scheduler::apply_config(ParsedConfig parsed) {
  cfg = std::move(parsed);
  build_windows(cfg->config);
  rows.put(WriteKind::PutConfig);
  reject_oversized();
}

Ticket Scheduler::enqueue(Call&& c, const Waiting& waiting, Millis at) {
  advance(at);
  const Ticket t = next_ticket++;
  c.arrived_at = now;
  history.arrived();
  c.priority = static_cast<int32_t>(waiting.priority);
  if (waiting.max_retries) c.max_retries = static_cast<int32_t>(*waiting.max_retries);
  if (waiting.max_wait_ms) c.wait_until = now + static_cast<Millis>(*waiting.max_wait_ms);
  if (starts_at_once(c)) {
    // The common case, a call that nobody waits ahead of and that fits:
    // pushed, it would be the head that serve() starts first, with a
    // predicted start of now (within any deadline). It starts here instead,
    // and skips the queue's level it would create and drop again.
    Call& added = admit(t, std::move(c));
    ++active;
    start(t, added);
    serve();
    return t;
  }
  queue.note_before(c, windows.counted());
  if (waiting.max_wait_ms) {
    // Accepted on the cheap bound when even it is within the deadline.
    const Millis start = predictor.at_most(c, now) <= c.wait_until ? now : predict(c);
    if (start > c.wait_until) {
      reject(t, ErrorCode::DeadlineExceeded, start - now);
      serve();
      return t;
    }
  }
  queue.push(t, admit(t, std::move(c)));
  serve();
  return t;
}

Error Scheduler::not_configured() const {
  return Error::make(ErrorCode::NoSuchLimiter, ErrorKind::Error,
                     "this limiter has not been configured: call configure(name, config) first");
}

Error Scheduler::unknown_ticket(Ticket t, const char* what) const {
  return Error::make(ErrorCode::UnknownTicket, ErrorKind::RangeError,
                     std::string(what) + " for ticket " + std::to_string(t) + ", which has no running attempt");
}

Call* Scheduler::end_attempt(Ticket t, Millis at) {
  Call* c = running_call(t);
  if (!c) return nullptr;
  attempt_ended(t, *c);
  if (lease) lease->attempt_ended(t, std::max(now, at));
  advance(at);
  return c;
}

Call* Scheduler::running_call(Ticket t) {
  auto it = calls.find(t);
  return it != calls.end() && it->second.phase == Phase::Running ? &it->second : nullptr;
}

bool Scheduler::settle_if_abandoned(Ticket t, Call& c) {
  if (c.caller == Caller::Waiting) return false;
  if (c.caller == Caller::Cancelled) reject(t, ErrorCode::Cancelled);
  release(t);
  return true;
}

void Scheduler::retry_after(Ticket t, Call& c, Millis delay) {
  if (c.withdrawn) {
    reject(t, ErrorCode::Cancelled);
    release(t);
  } else if (delay <= 0) {
    c.phase = Phase::Ready;
    ready.insert(t);
  } else {
    c.phase = Phase::Backoff;
    c.due = now + delay;
    backoff.emplace(c.due, t);
  }
}

}  // namespace drl::internal
