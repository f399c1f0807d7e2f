// One identity per VMI: the uid and gid its launcher, libvirtd and QEMU run as, taken from a
// range the operator gives the node (--launcher-id-range FIRST:COUNT, no passwd entries
// needed). No two live VMIs ever share an id, so one guest that escaped into its QEMU cannot
// read another's disks, connect to its sockets, or signal or ptrace its processes; and no id
// of the range holds the handler's API group.
//
//   FIRST       the capabilities primer (the QEMU capabilities cache every launcher reads)
//   FIRST + 1   the importer (curl and qemu-img on images from outside: DataVolume imports)
//   FIRST + 2 … FIRST + COUNT - 1   VMIs, one each, handed out round robin
//
// uid and gid are the same number; the supplementary groups are the node's (kvm). An id is
// held from the VMI's start until its processes, its dir and the claims it owned were given
// back (VmiController releases it), and every change is written to the Store before it is
// returned, so a restarted handler never hands one out twice.
//
// Thread-safe.
#ifndef KVNODE_AGENT_SUPERVISOR_LAUNCHER_IDS_H_
#define KVNODE_AGENT_SUPERVISOR_LAUNCHER_IDS_H_

#include <sys/types.h>

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "agent/store/store.h"
#include "agent/supervisor/launcher_process.h"

namespace kvnode {

struct LauncherIdRange {
  uint32_t first = 200000;
  uint32_t count = 65536;

  // "FIRST:COUNT"; errors name `flag`. FIRST at least 1000 (below are system accounts), COUNT
  // at least 3 (the primer, the importer and one VMI), and the range within 32-bit ids.
  static absl::StatusOr<LauncherIdRange> Parse(absl::string_view text, absl::string_view flag);
  uint32_t primer() const { return first; }
  uint32_t importer() const { return first + 1; }
  uint32_t first_vmi() const { return first + 2; }
  uint32_t last() const { return first + count - 1; }
  bool Contains(uint32_t id) const { return id >= first && id <= last(); }
  std::string ToString() const;
};

// The identity of `id` (uid = gid = id) with `groups` as its supplementary groups.
LauncherIdentity IdentityOf(uint32_t id, const std::vector<gid_t>& groups);

class LauncherIds {
 public:
  static constexpr char kSettingKey[] = "launcher.ids";

  // Loads earlier allocations from `store` (which must outlive this). Ids held outside the
  // range (after a configuration change) stay held until released and are never reissued.
  static absl::StatusOr<std::unique_ptr<LauncherIds>> Create(Store* store, LauncherIdRange range,
                                                             std::vector<gid_t> groups);

  // The identity of `vmi_uid`: the one it holds, or a new one. ResourceExhausted when every id
  // of the range is held.
  absl::StatusOr<LauncherIdentity> Allocate(const std::string& vmi_uid);
  // The identity `vmi_uid` holds, if any.
  std::optional<LauncherIdentity> Find(const std::string& vmi_uid) const;
  // The VMI that holds `uid`, or "".
  std::string HolderOf(uid_t uid) const;
  // Gives the id back. Releasing a VMI that holds none is OK.
  absl::Status Release(const std::string& vmi_uid);
  // vmi uid -> id.
  std::map<std::string, uint32_t> Allocations() const;

  LauncherIdentity Primer() const { return IdentityOf(range_.primer(), groups_); }
  LauncherIdentity Importer() const { return IdentityOf(range_.importer(), groups_); }
  const LauncherIdRange& range() const { return range_; }
  const std::vector<gid_t>& groups() const { return groups_; }

 private:
  LauncherIds(Store* store, LauncherIdRange range, std::vector<gid_t> groups)
      : store_(store), range_(range), groups_(std::move(groups)) {}
  absl::Status Load();
  absl::Status Save() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  Store* const store_;
  const LauncherIdRange range_;
  const std::vector<gid_t> groups_;

  mutable absl::Mutex mu_;
  std::map<std::string, uint32_t> by_vmi_ ABSL_GUARDED_BY(mu_);
  std::map<uint32_t, std::string> by_id_ ABSL_GUARDED_BY(mu_);
  uint32_t last_ ABSL_GUARDED_BY(mu_) = 0;  // the latest id handed out
};

// The files' identity VMI `vmi_uid` holds in `ids` (which may be null: none holds one);
// NotFound, saying the VMI is not running, when it holds none.
absl::StatusOr<FsIdentity> FsIdentityOfVmi(const LauncherIds* ids, const std::string& vmi_uid);

}  // namespace kvnode

#endif  // KVNODE_AGENT_SUPERVISOR_LAUNCHER_IDS_H_
