#include "row_writer.h"

namespace drl::internal {

void RowWriter::forget_owed() {
  owed_.clear();
  moved_ = false;
  due_.reset();
}

void RowWriter::step(const Windows& windows, Millis now, Millis quiet_ms) {
  if (owed_.empty()) return;
  // (A row moved to its release must be written before its old row can be
  // deleted as expired.)
  if (writes_beyond_expiries() || (moved_ && expiring()) || (due_ && now >= *due_)) {
    flush(windows, now);
  } else if (!due_) {
    due_ = now + quiet_ms;
  }
}

void RowWriter::flush(const Windows& windows, Millis now) {
  rewrite(owed_, windows, now, /*expired_stay=*/false);
  forget_owed();
}

void RowWriter::rewrite_row(int window, Millis at, const Windows& windows, Millis now, bool expired_stay) {
  const Window* w = windows.by_number(window);
  if (w == nullptr) return;  // the window went: its rows were cleared with it
  if (const Grant* g = w->log.find(at)) {
    put(WriteKind::PutGrant, at, g->amount, window);
  } else if (!expired_stay || at + w->ms > now) {
    put(WriteKind::DeleteGrant, at, 0, window);
  }
}

}  // namespace drl::internal
