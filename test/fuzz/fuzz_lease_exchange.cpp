// Arbitrary bytes as a lease exchange (core/src/lease_wire.h), as a root
// receives it from a child it cannot trust to be well-formed: the reader
// either refuses it naming a field, or reads it; what it reads writes back
// to text that reads the same; and the ledger fed it keeps its rule (never
// more counted than the limit in any window or the cap).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "lease_wire.h"
#include "ledger.h"

namespace {

void check(bool ok) {
  if (!ok) __builtin_trap();
}

bool same(const drl::internal::Exchange& a, const drl::internal::Exchange& b) {
  return drl::internal::write_exchange(a) == drl::internal::write_exchange(b);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::string error;
  const auto ex = drl::internal::read_exchange(text, error);
  if (!ex) {
    // Refused: always with a reason that names the message.
    check(!error.empty());
    check(error.rfind("exchange", 0) == 0);
    return 0;
  }
  check(error.empty());
  const std::string written = drl::internal::write_exchange(*ex);
  std::string again_error;
  const auto again = drl::internal::read_exchange(written, again_error);
  check(again.has_value());
  check(same(*ex, *again));

  drl::internal::LedgerConfig config;
  config.windows_ms = {1000, 60'000};
  config.limits = {10, 50};
  config.concurrency = 3;
  config.attempt_timeout_ms = 500;
  config.lease_ms = 200;
  config.clocks = {5, 100};
  drl::internal::Ledger ledger(config);
  // Twice, as a resend: the second copy must not lend again.
  const auto first = ledger.on_exchange(*ex, 1000);
  const auto second = ledger.on_exchange(*ex, 1001);
  for (size_t k = 0; k <= config.windows_ms.size(); ++k) {
    const int64_t limit = k < config.limits.size() ? config.limits[k] : config.concurrency;
    check(ledger.occupancy(k, 1001) <= limit);
  }
  if (first.reply && second.reply) check(first.reply->lease_id == second.reply->lease_id);
  return 0;
}
