// The golden corpus: tests/golden/NAME.yaml (a manifest, VirtualMachine or
// VirtualMachineInstance) and NAME.xml (the domain kvnode makes of it). The goldens are the
// converter's specification, reviewed against KubeVirt's converter
// (pkg/virt-launcher/virtwrap/converter/) and its defaults
// (pkg/virt-launcher/virtwrap/api/defaults.go).
//
// A golden holds one VM or VMI, and optionally PersistentVolumeClaims that stand for the node's
// claims (a claim with volumeMode Block is a block device). Every golden is converted the same
// way: load, default (a VM's template becomes the VMI it would start), a fixed UID
// (metadata.uid, else kPlaceholderVmiUid), the volume layout of a node whose state dir is
// /var/lib/kvnode, and the converter.
//
// Thread-compatible.
#ifndef KVNODE_TESTS_GOLDEN_GOLDEN_CORPUS_H_
#define KVNODE_TESTS_GOLDEN_GOLDEN_CORPUS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kvnode {

inline constexpr char kGoldenStateDir[] = "/var/lib/kvnode";

// The names (without .yaml) of the goldens in `dir`, sorted.
std::vector<std::string> GoldenNames(const std::string& dir);

absl::StatusOr<std::string> ReadTextFile(const std::string& path);
// Replaces `path` atomically (write-temp + rename).
absl::Status WriteTextFile(const std::string& path, const std::string& content);

// The domain XML of the one VM or VMI in `yaml`, with its claims. `source` names it in errors.
absl::StatusOr<std::string> ConvertGolden(absl::string_view yaml, absl::string_view source,
                                          absl::string_view virt_type);

}  // namespace kvnode

#endif  // KVNODE_TESTS_GOLDEN_GOLDEN_CORPUS_H_
