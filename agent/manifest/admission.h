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

// What this node can give, and its policy.
struct NodeLimits {
  int64_t memory_bytes = 0;  // physical memory; 0 disables the check
  int cpus = 0;              // online CPUs; 0 disables the check
  // KubeVirt's cpuAllocationRatio (developerConfiguration): vCPUs overcommit, and a VMI without
  // a CPU request requests vCPUs / ratio of a CPU, as its launcher pod would. Only that request
  // is held against `cpus` (dedicated vCPUs request one CPU each).
  int cpu_allocation_ratio = 10;
  // Directories under which hostDisk paths may live (after resolution). Empty refuses every
  // hostDisk.
  std::vector<std::string> host_disk_roots;
  // Networking (masquerade on the pod network) is available on this node.
  bool pod_network_supported = true;
  // KubeVirt's memoryOvercommit: a VMI without a memory request requests its guest memory ×
  // 100 / this percentage (100: none; 150: a 3Gi guest requests 2Gi).
  int memory_overcommit_percent = 100;
  // What each running VMI costs the node besides its guest's memory (its launcher, libvirtd
  // and QEMU's own memory), added to its memory request as KubeVirt adds its overhead.
  int64_t vmi_memory_overhead_bytes = 0;
  // swtpm (Debian's swtpm and swtpm-tools) is installed, so libvirt can run a virtual TPM.
  bool tpm_emulator = true;
  // KubeVirt's vmRolloutStrategy: LiveUpdate (true; KubeVirt's default since v1.6) changes a
  // running VM's CPU sockets in place (CPU hotplug); Stage (false) leaves every template change
  // to a restart (RestartRequired).
  bool live_update = true;
  // liveUpdateConfiguration.maxHotplugRatio: with LiveUpdate a VMI's maxSockets defaults to
  // its sockets × this (DefaultMaxSockets).
  int max_hotplug_ratio = 4;
  // The kubelet's static CPU manager: the CPUs that dedicatedCpuPlacement may take, one per
  // vCPU (the online CPUs less --reserved-cpus; the rest of them, and every CPU no VMI holds,
  // is the shared pool). Empty: the node has no CPU manager, and a VMI with dedicated CPUs
  // waits for a node that has one (Pending), as on a node without kubevirt.io/cpumanager.
  std::vector<int> dedicated_cpus;
  // The node's hugepages of each size (nr_hugepages × size): what VMIs backed by them may hold.
  int64_t hugepages_2mi_bytes = 0;
  int64_t hugepages_1gi_bytes = 0;
};

// What a VMI holds of its node while it runs, as KubeVirt's launcher pod requests it
// (virt-controller's rendercontainer): CPU from requests.cpu, else limits.cpu (Kubernetes
// defaults a request to its limit), else vCPUs / cpu_allocation_ratio, one CPU per vCPU when
// dedicated; memory from requests.memory, else limits.memory, else the guest's memory less the
// overcommit, plus the per-VMI overhead. Unparsable values count as zero (admission names them).
// What a VMI with a TPM costs more: KubeVirt's 53Mi for its swtpm.
inline constexpr int64_t kTpmMemoryOverheadBytes = int64_t{53} << 20;
// The host CPUs a VMI with dedicatedCpuPlacement holds: one per vCPU present at start, and one
// more for QEMU's emulator threads with isolateEmulatorThread (KubeVirt's rendercontainer).
int64_t DedicatedCpuCount(const kvnode::v1::CPU& cpu);

// With memory.hugepages the guest's memory is requested as the node's hugepages of that size
// (KubeVirt's hugepages-2Mi / hugepages-1Gi request) and only the overhead as memory.
struct ResourceRequest {
  int64_t cpu_milli = 0;
  int64_t memory_bytes = 0;
  int64_t hugepages_2mi_bytes = 0;
  int64_t hugepages_1gi_bytes = 0;
};
ResourceRequest RequestOf(const kvnode::v1::VirtualMachineInstanceSpec& spec,
                          const NodeLimits& node);

// Kubernetes' scheduler message when `want` does not fit the node beside what `held` already
// takes: "0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient memory."; empty when it
// fits (or the node's size is unknown).
std::string InsufficientResources(const ResourceRequest& held, const ResourceRequest& want,
                                  const NodeLimits& node);

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
