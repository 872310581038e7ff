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

enum class ErrorCode : int {
  NoSuchLimiter = 1,    // the bucket was never configured (or was erased)
  InvalidConfig = 2,    // configure/reconfigure got a document that breaks a rule
  InvalidArgument = 3,  // a host-supplied argument (cost, pause ms, ticket) is malformed
  CostTooLarge = 4,     // cost exceeds limitPerWindow: it could never be admitted
  CallFailed = 5,       // a reported failure (or an exhausted 429) became final
  CallbackThrew = 6,    // the callback threw on its last allowed attempt
  Cancelled = 7,        // the caller went away before its call settled
  UnknownTicket = 8,    // a report/throw/cancel named a ticket that is not running
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
  Expected(T value) : v_(std::move(value)) {}          // NOLINT: implicit by design
  Expected(Error error) : v_(std::move(error)) {}      // NOLINT: implicit by design
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
