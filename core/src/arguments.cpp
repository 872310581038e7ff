#include "arguments.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "json.h"

namespace drl::internal {

std::string number_text(double v) {
  if (!std::isfinite(v)) return std::isnan(v) ? "NaN" : (v > 0 ? "Infinity" : "-Infinity");
  if (v == std::floor(v) && std::fabs(v) < 9.2e18) return std::to_string(static_cast<long long>(v));
  std::string out;
  json::Writer(out).num(v);
  return out;
}

std::optional<Error> amount_problem(double v, std::string_view path, std::string_view unit) {
  if (plain_amount(v)) return std::nullopt;
  const bool integer = std::isfinite(v) && v >= 0 && v == std::floor(v);
  std::string name(path);
  if (!unit.empty()) name.append(".").append(unit);
  if (!integer) {
    return Error::make(ErrorCode::InvalidArgument, ErrorKind::RangeError,
                       name + " must be an integer >= 0 (received " + number_text(v) + ")");
  }
  return Error::make(ErrorCode::InvalidArgument, ErrorKind::RangeError,
                     name + " must be an integer >= 0 and at most 9007199254740991 (received " + number_text(v) + ")");
}

std::optional<Error> waiting_problem(const Waiting& w) {
  if (default_waiting(w)) return std::nullopt;  // nothing to check
  if (!std::isfinite(w.priority)) {
    return Error::make(ErrorCode::InvalidArgument, ErrorKind::TypeError,
                       "priority must be a finite number, an integer between -" + std::to_string(kMaxPriority) +
                           " and " + std::to_string(kMaxPriority) + " (received " + number_text(w.priority) + ")");
  }
  if (w.priority != std::floor(w.priority) || std::fabs(w.priority) > static_cast<double>(kMaxPriority)) {
    return Error::make(ErrorCode::InvalidArgument, ErrorKind::RangeError,
                       "priority must be an integer between -" + std::to_string(kMaxPriority) + " and " +
                           std::to_string(kMaxPriority) + " (received " + number_text(w.priority) + ")");
  }
  if (w.max_wait_ms) {
    const double m = *w.max_wait_ms;
    if (!std::isfinite(m)) {
      return Error::make(ErrorCode::InvalidArgument, ErrorKind::TypeError,
                         "maxWaitMs must be a finite number, an integer between 0 and " + std::to_string(kMaxDelayMs) +
                             ", or left out to wait as long as needed (received " + number_text(m) + ")");
    }
    if (m < 0 || m != std::floor(m) || m > static_cast<double>(kMaxDelayMs)) {
      return Error::make(ErrorCode::InvalidArgument, ErrorKind::RangeError,
                         "maxWaitMs must be an integer between 0 and " + std::to_string(kMaxDelayMs) + " (received " +
                             number_text(m) + ")");
    }
  }
  if (w.max_retries) {
    const double r = *w.max_retries;
    if (!std::isfinite(r)) {
      return Error::make(ErrorCode::InvalidArgument, ErrorKind::TypeError,
                         "maxRetries must be a finite number, an integer between 0 and " + std::to_string(kMaxRetries) +
                             ", or left out to use the bucket's retry.maxRetries (received " + number_text(r) + ")");
    }
    if (r < 0 || r != std::floor(r) || r > static_cast<double>(kMaxRetries)) {
      return Error::make(ErrorCode::InvalidArgument, ErrorKind::RangeError,
                         "maxRetries must be an integer between 0 and " + std::to_string(kMaxRetries) + " (received " +
                             number_text(r) + ")");
    }
  }
  return std::nullopt;
}

}  // namespace drl::internal

namespace drl {

Expected<Amounts> parse_amounts(std::string_view json_text, std::string_view what) {
  const std::string name(what);
  auto invalid = [&](ErrorKind kind, const std::string& detail) {
    return Error::make(ErrorCode::InvalidArgument, kind, detail);
  };
  // Flat by contract: refuse nesting before anything walks it recursively.
  if (json_text.size() > 4096) return invalid(ErrorKind::RangeError, name + " is too large (over 4096 bytes of JSON)");
  if (json_text.find_first_of("[") != std::string_view::npos ||
      std::count(json_text.begin(), json_text.end(), '{') > 1) {
    return invalid(ErrorKind::TypeError, name + " must be a flat object of units to integers");
  }
  const internal::json::Parsed parsed(json_text, 1);
  const internal::json::Value& doc = parsed.doc;
  if (!doc.IsObject()) return invalid(ErrorKind::TypeError, name + " must be an object of units to integers");
  if (doc.MemberCount() > kMaxWindows) {
    return invalid(ErrorKind::RangeError, name + " must name at most " + std::to_string(kMaxWindows) +
                                              " units, one per window (received " + std::to_string(doc.MemberCount()) +
                                              ")");
  }
  // In unit-name order, whatever order the keys were written in, so the
  // first problem named is the same for the same object: Parsed gives an
  // object's members in key byte order (json.h).
  Amounts out;
  for (const auto& m : doc.GetObject()) {
    const std::string unit = internal::json::text(m.name);
    if (!m.value.IsNumber()) {
      return invalid(ErrorKind::TypeError,
                     name + "." + unit + " must be a number (received " + internal::json::dump(m.value) + ")");
    }
    out.push_back(Amount{unit, m.value.GetDouble()});
  }
  return out;
}

}  // namespace drl
