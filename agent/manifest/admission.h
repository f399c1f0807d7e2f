// Admission: kvnode's validating webhook. Runs in the handler (and in `kvctl apply --dry-run`
// and `kvnode-launcher convert`) on a defaulted object, before anything is stored. Every
// rejection names the field path, as KubeVirt's validating webhooks do
// (pkg/virt-api/webhooks/validating-webhook/admitters/vmi-create-admitter.go).
//
// Pure apart from PathResolver, which resolves hostDisk paths (symlinks, "..") so that a path
// outside the configured roots is refused for what it really names.
#ifndef KVNODE_AGENT_MANIFEST_ADMISSION_H_
#define KVNODE_AGENT_MANIFEST_ADMISSION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/manifest/field_errors.h"
#include "agent/manifest/node_resources.h"
#include "google/protobuf/message.h"
#include "kvnode/v1/kubevirt.pb.h"

namespace kvnode {

// Resolves a path to what it names, as realpath(3): symlinks followed, "." and ".." removed.
// For a path that does not exist yet (hostDisk DiskOrCreate) it resolves the longest existing
// prefix and appends the rest.
class PathResolver {
 public:
  virtual ~PathResolver() = default;
  virtual absl::StatusOr<std::string> Resolve(const std::string& path) const = 0;

  // The real filesystem. Thread-safe.
  static const PathResolver* Real();
};

struct AdmissionReview {
  FieldErrors errors;
  // Not fatal; returned to the client, like kubectl's "Warning:" lines.
  std::vector<std::string> warnings;

  bool allowed() const { return errors.empty(); }
};

// A hotpluggable volume's disk, as KubeVirt's ValidateHotplugDiskConfiguration: a disk on bus
// scsi or virtio, a lun on scsi, no cdrom, IOThreads only on virtio.
void AdmitHotplugDisk(const kvnode::v1::Disk& disk, const FieldPath& path,
                      AdmissionReview* review);

// Validates a defaulted VMI.
AdmissionReview AdmitVmi(const kvnode::v1::VirtualMachineInstance& vmi, const NodeLimits& node,
                         const PathResolver& paths);

// Validates a defaulted VM, its template under spec.template.spec.
AdmissionReview AdmitVm(const kvnode::v1::VirtualMachine& vm, const NodeLimits& node,
                        const PathResolver& paths);

// A disk size (emptyDisk, hostDisk DiskOrCreate, a claim's request): required, a quantity
// greater than zero and at most 64Ti, the largest disk this node creates.
void CheckDiskSize(const std::string& text, const FieldPath& path, AdmissionReview* review);

// Validates a VMI spec; errors are under `path` ("spec" or "spec.template.spec").
void AdmitVmiSpec(const kvnode::v1::VirtualMachineInstanceSpec& spec, const FieldPath& path,
                  const NodeLimits& node, const PathResolver& paths, AdmissionReview* review);

// The schema's value rules (allowed values, quantities) over a whole object, as the loader
// checks them: for objects that reach the handler without the loader (the API).
void CheckObjectSchemaValues(const google::protobuf::Message& object, AdmissionReview* review);

// Metadata: name (required unless generateName), namespace, label keys.
// Names are DNS-1123 labels (VMs, VMIs) or subdomains (instancetypes and preferences, as
// Kubernetes' default for a custom resource: "u1.medium").
enum class NameRule { kLabel, kSubdomain };
void AdmitObjectMeta(const kvnode::v1::ObjectMeta& meta, const FieldPath& path,
                     AdmissionReview* review, NameRule rule = NameRule::kLabel);

// A registry host as an image reference names it: DNS labels joined by '.', with an optional
// :port.
bool IsRegistryHost(absl::string_view host);

// Why `ref` is not an image reference in docker's grammar ([host[:port]/]name[:tag][@digest]),
// or "".
std::string ImageReferenceProblem(absl::string_view ref);

// True when `s` is a DNS-1123 label: at most 63 of [a-z0-9-], starting and ending alphanumeric.
bool IsDns1123Label(absl::string_view s);
// CDI's sourceRef of a DataVolume spec at `spec_path` (a DataVolume's "spec", a VM's
// "spec.dataVolumeTemplates[i].spec"): a DataSource (the only kind CDI takes) with a name,
// never beside a source. Nothing when there is no sourceRef. One rule for both, so a VM's
// template and a DataVolume say the same.
void AdmitDataVolumeSourceRef(const kvnode::v1::DataVolumeSpec& spec, const FieldPath& spec_path,
                              AdmissionReview* review);
// DNS-1123 subdomain: dot-separated labels, at most 253 characters.
bool IsDns1123Subdomain(absl::string_view s);

}  // namespace kvnode

#endif  // KVNODE_AGENT_MANIFEST_ADMISSION_H_
