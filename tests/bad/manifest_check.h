// The lines a manifest check prints: what `kvctl apply --dry-run`, `kvnode-launcher convert` and
// the bad-manifest corpus (tests/bad) show for a manifest file. Loading errors come first, as
// LoadManifests reports them; then, for every VirtualMachine and VirtualMachineInstance that
// loaded, the defaulter runs (as KubeVirt's mutating webhook runs before its validating one) and
// admission's errors and warnings follow, in document order:
//
//   app01.yaml: yaml: line 3, column 1: ...
//   app01.yaml: document 1: spec.template.spec.domain.devices.disks[0].disk.bus: unknown value ...
//   app01.yaml: document 2: spec.running: running and runStrategy are mutually exclusive
//   app01.yaml: document 2: warning: spec.volumes[1].cloudInitNoCloud.userData: contains a ...
//
// PersistentVolumeClaim and DataVolume objects are defaulted and admitted against the embedded
// storage classes (agent/storage: AdmitPvc, AdmitDataVolume).
//
// Pure apart from `resolver`. Thread-compatible.
#ifndef KVNODE_TESTS_BAD_MANIFEST_CHECK_H_
#define KVNODE_TESTS_BAD_MANIFEST_CHECK_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "agent/manifest/admission.h"

namespace kvnode {

// Every error and warning line for the manifest `text`, named `source` in the lines. Empty when
// every object loads and is admitted without warnings.
std::vector<std::string> CheckManifestText(absl::string_view text, absl::string_view source,
                                           const NodeLimits& limits, const PathResolver& resolver);

// True when `line` (one of CheckManifestText's) is a warning rather than an error.
bool IsWarningLine(absl::string_view line);

}  // namespace kvnode

#endif  // KVNODE_TESTS_BAD_MANIFEST_CHECK_H_
