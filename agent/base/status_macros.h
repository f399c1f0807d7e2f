// Small error-propagation macros. Debian's Abseil (20220623) ships absl::Status without the
// status macros, so kvnode keeps these two.
#ifndef KVNODE_AGENT_BASE_STATUS_MACROS_H_
#define KVNODE_AGENT_BASE_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

#define KVNODE_CONCAT_INNER_(a, b) a##b
#define KVNODE_CONCAT_(a, b) KVNODE_CONCAT_INNER_(a, b)

// Returns from the current function when `expr` (an absl::Status) is not OK.
#define RETURN_IF_ERROR(expr)                          \
  do {                                                 \
    ::absl::Status kvnode_status_ = (expr);            \
    if (!kvnode_status_.ok()) return kvnode_status_;   \
  } while (0)

// `ASSIGN_OR_RETURN(auto x, MakeX());` assigns the value of an absl::StatusOr or returns its
// error.
#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL_(KVNODE_CONCAT_(kvnode_statusor_, __LINE__), lhs, expr)

#define ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                           \
  if (!statusor.ok()) return statusor.status();     \
  lhs = std::move(statusor).value()

namespace kvnode {

// Prefixes the message of a non-OK status with `context`: "define domain apps_app01: ...".
// `status` with `context` before its message; its payloads are kept.
inline absl::Status Annotate(const absl::Status& status, absl::string_view context) {
  if (status.ok()) return status;
  absl::Status out(status.code(), absl::StrCat(context, ": ", status.message()));
  status.ForEachPayload(
      [&](absl::string_view url, const absl::Cord& payload) { out.SetPayload(url, payload); });
  return out;
}

}  // namespace kvnode

#endif  // KVNODE_AGENT_BASE_STATUS_MACROS_H_
