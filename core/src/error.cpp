#include "drl/error.h"

namespace drl {

std::string_view error_code_id(ErrorCode code) {
  switch (code) {
    case ErrorCode::NoSuchLimiter: return "no-such-limiter";
    case ErrorCode::InvalidConfig: return "invalid-config";
    case ErrorCode::InvalidArgument: return "invalid-argument";
    case ErrorCode::CostTooLarge: return "cost-too-large";
    case ErrorCode::CallFailed: return "call-failed";
    case ErrorCode::CallbackThrew: return "callback-threw";
    case ErrorCode::Cancelled: return "cancelled";
    case ErrorCode::UnknownTicket: return "unknown-ticket";
  }
  return "error";
}

Error Error::make(ErrorCode code, ErrorKind kind, std::string_view detail) {
  std::string message = "[drl:";
  message += error_code_id(code);
  message += "] ";
  message += detail;
  return Error{code, kind, std::move(message)};
}

}  // namespace drl
