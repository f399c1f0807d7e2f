// The VMI's "pod": what the handler makes for one execution before the launcher starts (state
// dir, cgroup, pod network) and takes down after it ends. KubeVirt gets these from Kubernetes
// (the launcher pod, its CNI network); here the handler is the kubelet and the CNI plugin.
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "agent/base/file_tree.h"
#include "agent/base/hugepages.h"
#include "agent/base/status_macros.h"
#include "agent/handler/vmi_controller.h"
#include "launcher/converter/domain_xml.h"
#include "spdlog/spdlog.h"

namespace kvnode {

using kvnode::v1::VirtualMachineInstance;

absl::StatusOr<VmiController::PodLaunch> VmiController::LaunchPod(const VirtualMachineInstance& vmi,
                                                                  const LauncherIdentity& id,
                                                                  bool* retry) {
  const std::string& uid = vmi.metadata().uid();
  *retry = false;
  RETURN_IF_ERROR(PrepareVmiDir(vmi, id));
  // Hugepages: a hugetlbfs of the page size for the VMI's identity, mounted before anything of
  // that identity runs (so nothing of it can have replaced the mount point).
  const std::string& page_size = vmi.spec().domain().memory().hugepages().page_size();
  if (!page_size.empty()) {
    RETURN_IF_ERROR(MountHugepages(paths_.vmi(uid).hugepages_dir(), page_size, id.uid, id.gid));
  }
  LauncherSpec spec = LauncherSpecFor(vmi);
  PodLaunch launch;
  if (config_.pod_network != nullptr) {
    absl::StatusOr<PodNetworkAttachment> attachment = SetUpPodNetwork(vmi, id);
    if (!attachment.ok()) {
      EndPod(uid);
      *retry = true;
      return attachment.status();
    }
    spec.netns_path = attachment->netns_path;
    launch.attachment = std::move(*attachment);
  }
  absl::StatusOr<LauncherHandle> handle = pods_->StartLauncher(spec, id);
  if (!handle.ok()) {
    EndPod(uid);
    TearDownPodNetwork(uid);
    return handle.status();
  }
  launch.handle = *handle;
  return launch;
}

absl::StatusOr<PodNetworkAttachment> VmiController::SetUpPodNetwork(
    const VirtualMachineInstance& vmi, const LauncherIdentity& id) {
  // dnsmasq joins the VMI's cgroup, so that it ends with the VMI's other processes.
  ASSIGN_OR_RETURN(int procs, pods_->CreateCgroup(vmi.metadata().uid()));
  PodSetupOptions options;
  options.launcher_uid = id.uid;  // the tap's owner
  options.launcher_gid = id.gid;
  options.run_dir = paths_.pod_network_dir(vmi.metadata().uid());
  options.cgroup_procs_fd = procs;
  absl::StatusOr<PodNetworkAttachment> attachment = config_.pod_network->Setup(vmi, options);
  close(procs);
  return attachment;
}

void VmiController::AbandonLaunch(const std::string& uid) {
  spdlog::info("VMI {} went away while its launcher started; ending its pod", uid);
  EndPod(uid);
  TearDownPodNetwork(uid);
  CleanupVmiDir(uid);
}

void VmiController::TearDownPodNetwork(const std::string& uid) {
  if (config_.pod_network == nullptr) return;
  absl::Status s = config_.pod_network->Teardown(uid);
  RemoveTreeUnder(paths_.network_dir(), VmiPaths::DirKey(uid));
  if (s.ok()) return;
  spdlog::error("{}", s.ToString());
  absl::MutexLock lock(&mu_);
  auto it = by_uid_.find(uid);
  if (it != by_uid_.end()) {
    EventLocked(it->second->vmi, "Warning", "NetworkCleanupFailed", std::string(s.message()));
  }
}

void VmiController::ApplyPodInterfaces(const std::string& uid, kvnode::v1::DomainOptions* options) {
  if (config_.pod_network == nullptr) return;
  std::optional<PodNetworkAttachment> a = config_.pod_network->Attachment(uid);
  if (!a.has_value()) return;
  for (const kvnode::v1::InterfaceAttachment& made : a->InterfaceAttachments()) {
    for (auto& iface : *options->mutable_interfaces()) {
      if (iface.name() == made.name()) iface = made;
    }
  }
  options->clear_dhcp_offers();
  for (auto& offer : a->DhcpOffers()) *options->add_dhcp_offers() = std::move(offer);
}

}  // namespace kvnode
