// cloudInitNoCloud: the files of a NoCloud data source (meta-data, user-data, network-config)
// for a VMI, as KubeVirt's pkg/cloud-init builds them, and the ISO (volume label "cidata") made
// from them with genisoimage.
//
// The instance-id belongs to the VM, not to one VMI: "<name>.<namespace>" as KubeVirt, so a
// restart (a new VMI, a new UID) does not make cloud-init provision again.
//
// Secrets (secretRef, networkDataSecretRef) are node-local files under
// <state>/secrets/<namespace>/<name>/<key>; their content goes into the ISO and nowhere else
// (never into the VMI object or the store).
//
// BuildNoCloudFiles is pure; MakeNoCloudIso runs genisoimage. Thread-safe (no state).
#ifndef KVNODE_AGENT_STORAGE_NOCLOUD_H_
#define KVNODE_AGENT_STORAGE_NOCLOUD_H_

#include <functional>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "agent/base/user_fs.h"
#include "kvnode/v1/kubevirt.pb.h"

namespace kvnode {

inline constexpr char kGenisoimage[] = "/usr/bin/genisoimage";

// The value of `key` of secret `name` in the VMI's namespace, or an error naming the secret.
using SecretReader =
    std::function<absl::StatusOr<std::string>(const std::string& name, const std::string& key)>;

// File name → content: "meta-data", "user-data" (always, maybe empty), "network-config" (when
// network data is given). KubeVirt reads a secret's "userdata" (or "userData") key for user
// data and "networkdata" (or "networkData") for network data.
absl::StatusOr<std::map<std::string, std::string>> BuildNoCloudFiles(
    const kvnode::v1::VirtualMachineInstance& vmi,
    const kvnode::v1::CloudInitNoCloudSource& source, const SecretReader& secrets);

// "<name>.<namespace>".
std::string NoCloudInstanceId(const kvnode::v1::VirtualMachineInstance& vmi);

// Writes `files` into `dir` (which `user` owns) and makes `dir`/noCloud.iso with genisoimage,
// all as `user`; the files are removed again, the ISO stays.
absl::Status MakeNoCloudIso(const FsIdentity& user, const std::string& dir,
                            const std::map<std::string, std::string>& files);

}  // namespace kvnode

#endif  // KVNODE_AGENT_STORAGE_NOCLOUD_H_
