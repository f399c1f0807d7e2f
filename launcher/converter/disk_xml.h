// Disks of the domain: spec.domain.devices.disks in spec order, each bound to its volume's
// VolumeSource from DomainOptions, after KubeVirt's converter (storage/disk.go, volume.go) and
// SetDriverCacheMode (pkg/virt-launcher/virtwrap/converter/).
//
// Internal to launcher/converter. Pure; thread-compatible.
#ifndef KVNODE_LAUNCHER_CONVERTER_DISK_XML_H_
#define KVNODE_LAUNCHER_CONVERTER_DISK_XML_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "launcher/converter/xml_builder.h"
#include "pugixml.hpp"

namespace kvnode {
namespace converter {

// KubeVirt's FormatDeviceName: prefix + a..z, aa..az, ba.. for index 0, 1, ... ("vd", 27 →
// "vdab").
std::string DiskTargetName(absl::string_view prefix, int index);

// "vd" for virtio, "sd" for sata, scsi and usb (they share one sequence).
absl::string_view DiskTargetPrefix(absl::string_view bus);

// IOThreads (ioThreadsPolicy, dedicatedIOThread): how many the domain gets and which one each
// disk uses (0: none). Only virtio disks use IOThreads.
struct IoThreadPlan {
  uint32_t count = 0;
  std::vector<uint32_t> disk_thread;
};
absl::StatusOr<IoThreadPlan> PlanIoThreads(const ConvertContext& ctx);

// What the controllers need to know about the disks.
struct DiskSummary {
  bool needs_scsi_controller = false;
  bool needs_usb_controller = false;
};

// Appends one <disk> per spec disk to `devices`.
absl::Status AppendDisks(const ConvertContext& ctx, const IoThreadPlan& iothreads,
                         pugi::xml_node devices, DiskSummary* summary);

}  // namespace converter
}  // namespace kvnode

#endif  // KVNODE_LAUNCHER_CONVERTER_DISK_XML_H_
