// Errors as values, each carrying a stable `[drl:...]` code.
//
// Example:
//   drl::Expected<drl::ParsedConfig> parsed = drl::parse_config(R"({"concurrency": 0})");
//   if (!parsed.ok()) {
//     const drl::Error& error = parsed.error();
//     assert(error.code == drl::ErrorCode::InvalidConfig);
//     assert(error.kind == drl::ErrorKind::TypeError);  // the JS class to raise
//     assert(error.message.rfind("[drl:invalid-config] bucket is required; ", 0) == 0);
//   }
//
//   drl::Engine engine;  // not configured yet
//   drl::Expected<drl::Ticket> ticket = engine.arrive(/*cost=*/1, /*now=*/0);
//   assert(!ticket.ok());
//   assert(ticket.error().code == drl::ErrorCode::NoSuchLimiter);
//   assert(drl::error_code_id(ticket.error().code) == "no-such-limiter");
//
//   drl::Status paused = engine.pause(/*ms=*/1000, /*now=*/0);  // a Status carries no value
//   assert(!paused.ok());
//   assert(paused.error().message.rfind("[drl:no-such-limiter] ", 0) == 0);
//
// The engine never throws across its API: Workers RPC keeps only an error's
// message, so the `[drl:...]` token at the start of every message is the one
// thing the JS side can rely on to rebuild a typed error.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace drl {

// Every id, its number and what it means: see error_ids.def, the one table
// the C++ enum, the JS hosts and docs/errors.md are built from.
enum class ErrorCode : int {
#define DRL_ERROR(name, code, id, kind, raised_by, client, restores, meaning) name = code,
#include "drl/error_ids.def"
#undef DRL_ERROR
};

// Which JS error class the host should raise.
enum class ErrorKind : int { Error = 0, TypeError = 1, RangeError = 2 };

// The stable token, e.g. "no-such-limiter" (without brackets).
std::string_view error_code_id(ErrorCode code);

struct Error {
  ErrorCode code;
  ErrorKind kind = ErrorKind::Error;
  std::string message;  // always starts with "[drl:<id>] "

  // Builds an error whose message is "[drl:<id>] " + detail.
  static Error make(ErrorCode code, ErrorKind kind, std::string_view detail);
};

// A value, or an error. Ask ok() first (value() and error() assume the
// answer): neither Expected nor Status converts to bool, so no reader has to
// remember which way round truthiness goes. Both are [[nodiscard]]: an
// ignored error is a bug.
template <class T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : v_(std::move(value)) {}      // NOLINT: implicit by design
  Expected(Error error) : v_(std::move(error)) {}  // NOLINT: implicit by design
  bool ok() const { return v_.index() == 0; }
  T& value() { return std::get<0>(v_); }
  const T& value() const { return std::get<0>(v_); }
  T& operator*() { return value(); }
  const T& operator*() const { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

// Success, or an error: an Expected with no value.
class [[nodiscard]] Status {
 public:
  Status() = default;                                // success
  Status(Error error) : error_(std::move(error)) {}  // NOLINT: implicit by design, as in Expected
  static Status success() { return Status(); }
  bool ok() const { return !error_.has_value(); }
  const Error& error() const { return *error_; }

 private:
  std::optional<Error> error_;
};

}  // namespace drl
