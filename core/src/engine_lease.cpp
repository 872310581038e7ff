// drl::Engine as a child of a lease tree (engine.h; lease_child.h).
#include <algorithm>

#include "drl/engine.h"
#include "lease_wire.h"
#include "scheduler.h"
#include "tree_config.h"

namespace drl {

namespace {

Error lease_error(std::string detail) { return Error::make(ErrorCode::InvalidArgument, ErrorKind::TypeError, detail); }

}  // namespace

Status Engine::make_lease_child(std::string_view setup_json, Millis now) {
  internal::Scheduler& s = *scheduler_;
  if (!s.cfg) return s.not_configured();
  if (s.lease) return lease_error("make_lease_child: this engine is a lease child already (a restart is a new engine)");
  std::string error;
  auto config = internal::read_child_setup(setup_json, error);
  if (!config) return lease_error(error);
  config->windows = s.windows.size();
  config->windows_ms.clear();
  for (const internal::Window& w : s.windows) config->windows_ms.push_back(w.ms);
  config->attempt_timeout_ms = s.timeout();
  if (config->floor_units.size() > config->windows) {
    return lease_error("lease child setup.floor.units has " + std::to_string(config->floor_units.size()) +
                       " windows, the bucket " + std::to_string(config->windows));
  }
  s.lease = std::make_unique<internal::LeaseChild>(std::move(*config));
  s.advance(now);
  s.serve();  // what is queued already asks
  return Status::success();
}

Status Engine::make_tree_child(std::string_view region, uint64_t incarnation, Millis now) {
  internal::Scheduler& s = *scheduler_;
  if (!s.cfg) return s.not_configured();
  if (!s.config().tree.enabled) {
    return Error::make(ErrorCode::InvalidConfig, ErrorKind::RangeError,
                       "tree: this bucket's config has no tree, so it has no children");
  }
  if (!valid_region(region) && region != kRootRegion) {
    return lease_error("make_tree_child: region " + std::string(region.substr(0, 40)) + " is not " + region_rule());
  }
  Status made = make_lease_child(internal::tree_child_setup(s.config(), region, incarnation), now);
  if (made.ok()) s.tree_child = true;
  return made;
}

bool Engine::lease_child() const { return scheduler_->lease != nullptr; }

Status Engine::lease_reply(std::string_view grant_json, Millis now) {
  internal::Scheduler& s = *scheduler_;
  if (!s.lease) return lease_error("lease_reply: this engine is not a lease child (make_lease_child first)");
  std::string error;
  s.advance(now);
  if (!s.lease->on_reply(grant_json, s.now, error)) return lease_error(error);
  s.serve();
  return Status::success();
}

Status Engine::lease_notice(std::string_view notice_json, Millis now) {
  internal::Scheduler& s = *scheduler_;
  if (!s.lease) return lease_error("lease_notice: this engine is not a lease child (make_lease_child first)");
  std::string error;
  s.advance(now);
  if (!s.lease->on_notice(notice_json, s.now, error)) return lease_error(error);
  s.serve();
  return Status::success();
}

const std::string& Engine::lease_exchange() const { return scheduler_->lease_exchange; }

uint64_t Engine::lease_late_releases() const {
  return scheduler_->lease ? scheduler_->lease->holder().late_releases() : 0;
}

}  // namespace drl
