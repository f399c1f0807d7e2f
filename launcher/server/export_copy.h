// The copy half of a pull-mode backup: one NBD export of the running domain (served by its
// QEMU on a unix socket) into an existing raw file, by qemu-img as the launcher's user.
//
// Thread-compatible.
#ifndef KVNODE_LAUNCHER_SERVER_EXPORT_COPY_H_
#define KVNODE_LAUNCHER_SERVER_EXPORT_COPY_H_

#include <functional>
#include <string>

#include "absl/status/status.h"

namespace kvnode {

// qemu-img convert -n --target-is-zero -f raw -O raw nbd+unix:///<export>?socket=<socket>
// <target>: `target` must exist, zero-filled (sparse) and at least the disk's size; holes stay
// holes. `cancelled` is asked every 20 ms; once it is true qemu-img is killed (Cancelled).
absl::Status CopyNbdExport(const std::string& socket, const std::string& export_name,
                           const std::string& target, const std::function<bool()>& cancelled);

// How the launcher copies an export (CopyNbdExport; tests substitute a fake).
using ExportCopier = std::function<absl::Status(const std::string& socket,
                                                const std::string& export_name,
                                                const std::string& target,
                                                const std::function<bool()>& cancelled)>;

}  // namespace kvnode

#endif  // KVNODE_LAUNCHER_SERVER_EXPORT_COPY_H_
