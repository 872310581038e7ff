#include "drl/error.h"

namespace drl {

std::string_view error_code_id(ErrorCode code) {
  switch (code) {
#define DRL_ERROR(name, code, id, kind, raised_by, client, restores, meaning) \
  case ErrorCode::name:                                                       \
    return id;
#include "drl/error_ids.def"
#undef DRL_ERROR
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
