// LibvirtHypervisor as a DomainMigrator: peer-to-peer (live) migration as KubeVirt's
// virt-launcher starts it (pkg/virt-launcher/virtwrap/live-migration-source.go), to a libvirtd
// reached through a unix socket the handler tunnels to the target node: tunnelled through that
// connection for shared disks, with QEMU's own streams on the pod's loopback for block
// migration.
#include <libvirt/libvirt.h>

#include <memory>

#include "absl/strings/str_cat.h"
#include "agent/base/migration_ports.h"
#include "agent/base/status_macros.h"
#include "launcher/libvirt/libvirt_hypervisor.h"

namespace kvnode {
namespace {

struct DomainRef {
  virDomainPtr dom;
  ~DomainRef() { virDomainFree(dom); }
};

struct TypedParams {
  virTypedParameterPtr params = nullptr;
  int count = 0;
  int max = 0;
  ~TypedParams() { virTypedParamsFree(params, count); }
};

}  // namespace

absl::StatusOr<std::string> LibvirtHypervisor::MigratableXml() {
  ASSIGN_OR_RETURN(virDomainPtr dom, Lookup());
  DomainRef ref{dom};
  char* xml = virDomainGetXMLDesc(dom, VIR_DOMAIN_XML_MIGRATABLE | VIR_DOMAIN_XML_SECURE);
  if (xml == nullptr) return LibvirtError("migratable XML of " + domain_name_);
  std::string out(xml);
  free(xml);
  return out;
}

absl::Status LibvirtHypervisor::Migrate(const MigrationCall& call) {
  ASSIGN_OR_RETURN(virDomainPtr dom, Lookup());
  DomainRef ref{dom};
  TypedParams p;
  if (virTypedParamsAddString(&p.params, &p.count, &p.max, VIR_MIGRATE_PARAM_DEST_XML,
                              call.destination_xml.c_str()) < 0 ||
      virTypedParamsAddString(&p.params, &p.count, &p.max, VIR_MIGRATE_PARAM_PERSIST_XML,
                              call.destination_xml.c_str()) < 0) {
    return LibvirtError("migration parameters");
  }
  if (call.bandwidth_mib > 0 &&
      virTypedParamsAddULLong(&p.params, &p.count, &p.max, VIR_MIGRATE_PARAM_BANDWIDTH,
                              call.bandwidth_mib) < 0) {
    return LibvirtError("migration bandwidth");
  }
  // KubeVirt's flags for a shared-storage migration, tunnelled through the one connection.
  // UNSAFE: the handler only migrates VMIs whose disks are shared (LiveMigratable), but
  // libvirt recognises only network filesystems as shared and would refuse a disk whose cache
  // mode is not "none" on storage shared by other means (KubeVirt sets it for the same cases).
  unsigned int flags = VIR_MIGRATE_PEER2PEER | VIR_MIGRATE_PERSIST_DEST |
                       VIR_MIGRATE_UNDEFINE_SOURCE | VIR_MIGRATE_UNSAFE;
  // Without LIVE libvirt pauses the guest before QEMU starts, resumes it on the target when
  // done, and on the source again if the migration fails.
  if (call.live) flags |= VIR_MIGRATE_LIVE;
  if (!call.direct) {
    flags |= VIR_MIGRATE_TUNNELLED;
  } else {
    // QEMU's streams go to the pod's loopback ports, where the handler carries them to the
    // target pod's (the target's QEMU and NBD server listen on its own loopback:
    // LISTEN_ADDRESS). libvirt's tunnel could not carry NBD anyway.
    const std::string uri = absl::StrCat("tcp://127.0.0.1:", kDirectMigrationPort);
    if (virTypedParamsAddString(&p.params, &p.count, &p.max, VIR_MIGRATE_PARAM_URI,
                                uri.c_str()) < 0 ||
        virTypedParamsAddString(&p.params, &p.count, &p.max, VIR_MIGRATE_PARAM_LISTEN_ADDRESS,
                                "127.0.0.1") < 0) {
      return LibvirtError("direct migration parameters");
    }
  }
  if (!call.copy_disks.empty()) {
    // Block migration: only the listed disks are copied; shared ones stay where they are.
    // Incremental: each listed disk's top image only (QEMU's mirror with sync=top). A
    // containerDisk's overlay goes over the target's own copy of its image (the same digest);
    // a claim or an emptyDisk has no backing image, so its top image is all of it.
    flags |= VIR_MIGRATE_NON_SHARED_INC;
    const std::string disks_uri = absl::StrCat("tcp://127.0.0.1:", kBlockMigrationPort);
    if (virTypedParamsAddString(&p.params, &p.count, &p.max, VIR_MIGRATE_PARAM_DISKS_URI,
                                disks_uri.c_str()) < 0) {
      return LibvirtError("block migration parameters");
    }
    for (const std::string& dev : call.copy_disks) {
      if (virTypedParamsAddString(&p.params, &p.count, &p.max, VIR_MIGRATE_PARAM_MIGRATE_DISKS,
                                  dev.c_str()) < 0) {
        return LibvirtError("block migration disk " + dev);
      }
    }
  }
  if (call.live && call.auto_converge) flags |= VIR_MIGRATE_AUTO_CONVERGE;
  if (call.live && call.post_copy) flags |= VIR_MIGRATE_POSTCOPY;
  if (virDomainMigrateToURI3(dom, call.destination_uri.c_str(), p.params, p.count, flags) < 0) {
    return LibvirtError("migrate " + domain_name_);
  }
  return absl::OkStatus();
}

absl::StatusOr<MigrationProgress> LibvirtHypervisor::JobProgress() {
  ASSIGN_OR_RETURN(virDomainPtr dom, Lookup());
  DomainRef ref{dom};
  int type = 0;
  TypedParams p;
  if (virDomainGetJobStats(dom, &type, &p.params, &p.count, 0) < 0) {
    return LibvirtError("job stats of " + domain_name_);
  }
  MigrationProgress out;
  out.active = type == VIR_DOMAIN_JOB_BOUNDED || type == VIR_DOMAIN_JOB_UNBOUNDED;
  unsigned long long v = 0;
  if (virTypedParamsGetULLong(p.params, p.count, VIR_DOMAIN_JOB_DATA_PROCESSED, &v) == 1) {
    out.data_processed = v;
  }
  if (virTypedParamsGetULLong(p.params, p.count, VIR_DOMAIN_JOB_DATA_REMAINING, &v) == 1) {
    out.data_remaining = v;
  }
  if (virTypedParamsGetULLong(p.params, p.count, VIR_DOMAIN_JOB_DATA_TOTAL, &v) == 1) {
    out.data_total = v;
  }
  if (virTypedParamsGetULLong(p.params, p.count, VIR_DOMAIN_JOB_MEMORY_BPS, &v) == 1) {
    out.memory_bps = v;
  }
  if (virTypedParamsGetULLong(p.params, p.count, VIR_DOMAIN_JOB_TIME_ELAPSED, &v) == 1) {
    out.elapsed_ms = static_cast<int64_t>(v);
  }
  return out;
}

absl::Status LibvirtHypervisor::AbortJob() {
  return WithDomain("abort the migration of", [](virDomainPtr d) { return virDomainAbortJob(d); });
}

absl::Status LibvirtHypervisor::StartPostCopy() {
  return WithDomain("switch to post-copy",
                    [](virDomainPtr d) { return virDomainMigrateStartPostCopy(d, 0); });
}

absl::Status LibvirtHypervisor::WaitConnected(absl::Duration timeout) {
  absl::Time deadline = absl::Now() + timeout;
  while (true) {
    virConnectPtr conn = Conn();
    bool alive = virConnectIsAlive(conn) == 1;
    virConnectClose(conn);
    if (alive) return absl::OkStatus();
    if (absl::Now() >= deadline) {
      return absl::UnavailableError(absl::StrCat(
          "the VMI's libvirtd is not connected (it is being started again after it exited); "
          "waited ", absl::FormatDuration(timeout)));
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
}

absl::StatusOr<uint64_t> LibvirtHypervisor::HypervisorVersion() {
  unsigned long version = 0;  // NOLINT(runtime/int): libvirt's type
  virConnectPtr conn = Conn();
  absl::Status error = virConnectGetVersion(conn, &version) < 0
                           ? LibvirtError("hypervisor version")
                           : absl::OkStatus();
  virConnectClose(conn);
  if (!error.ok()) return error;
  return static_cast<uint64_t>(version);
}

}  // namespace kvnode
