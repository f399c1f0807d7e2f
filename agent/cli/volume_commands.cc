// kvctl addvolume / removevolume, as virtctl's (pkg/virtctl/vm/add_volume.go,
// remove_volume.go): the volume goes into the VM's template (its running VMI follows), or into
// a VMI of its own when no VM has that name.
#include "absl/strings/str_cat.h"
#include "agent/cli/cli.h"
#include "agent/cli/guest_commands.h"
#include "grpcpp/grpcpp.h"

namespace kvnode {
namespace {

// The VM's endpoint, then the VMI's when there is no VM of that name (virtctl's order).
template <typename Request>
grpc::Status CallVolumeEndpoint(
    Cli& cli, Request req,
    grpc::Status (kvnode::v1::Node::Stub::*method)(grpc::ClientContext*, const Request&,
                                                   kvnode::v1::Empty*)) {
  kvnode::v1::Empty resp;
  req.set_vm(true);
  grpc::ClientContext ctx;
  grpc::Status s = (cli.stub.get()->*method)(Deadline(&ctx), req, &resp);
  if (s.error_code() != grpc::StatusCode::NOT_FOUND) return s;
  req.set_vm(false);
  grpc::ClientContext vmi_ctx;
  return (cli.stub.get()->*method)(Deadline(&vmi_ctx), req, &resp);
}

}  // namespace

int CmdAddVolume(Cli& cli) {
  if (cli.args.size() != 1) return cli.Usage("addvolume: expected one VM or VMI name");
  const std::string volume = cli.flags.GetOr("volume-name", "");
  if (volume.empty()) return cli.Usage("addvolume: --volume-name is required");
  const std::string disk_type = cli.flags.GetOr("disk-type", "disk");
  const std::string bus = cli.flags.GetOr("bus", "scsi");
  const std::string cache = cli.flags.GetOr("cache", "");
  if (disk_type != "disk" && disk_type != "lun") {
    return cli.Usage("Invalid disk type '" + disk_type + "'. Only LUN and Disk are supported.");
  }
  if (disk_type == "disk" && bus != "scsi" && bus != "virtio") {
    return cli.Usage("Invalid bus type '" + bus +
                     "' for disk. Only 'scsi' and 'virtio' are supported.");
  }
  if (disk_type == "lun" && bus != "scsi") {
    return cli.Usage("Invalid bus type '" + bus + "' for LUN disk. Only 'scsi' bus is supported.");
  }
  if (!cache.empty() && cache != "none" && cache != "writethrough" && cache != "writeback") {
    return cli.Usage("error adding volume, invalid cache value " + cache);
  }
  kvnode::v1::AddVolumeRequest req;
  *req.mutable_ref() = cli.Ref(cli.args[0]);
  auto* o = req.mutable_options();
  o->set_name(cli.flags.GetOr("disk-name", volume));
  auto* disk = o->mutable_disk();
  disk->set_name(o->name());
  if (disk_type == "lun") {
    disk->mutable_lun()->set_bus(bus);
  } else {
    disk->mutable_disk()->set_bus(bus);
  }
  disk->set_serial(cli.flags.GetOr("serial", o->name()));
  if (!cache.empty()) disk->set_cache(cache);
  if (cli.flags.GetBool("dry-run")) o->add_dry_run("All");
  // A DataVolume of that name, else a claim (virtctl's order).
  kvnode::v1::DataVolume dv;
  grpc::ClientContext dv_ctx;
  if (StorageStub(cli)->GetDV(Deadline(&dv_ctx), cli.Ref(volume), &dv).ok()) {
    o->mutable_volume_source()->mutable_data_volume()->set_name(volume);
  } else {
    kvnode::v1::PVCView pvc;
    grpc::ClientContext pvc_ctx;
    if (!StorageStub(cli)->GetPVC(Deadline(&pvc_ctx), cli.Ref(volume), &pvc).ok()) {
      *cli.err << "error adding volume, Volume " << volume
               << " is not a DataVolume or PersistentVolumeClaim\n";
      return 1;
    }
    o->mutable_volume_source()->mutable_persistent_volume_claim()->set_claim_name(volume);
  }
  if (cli.flags.GetBool("dry-run")) *cli.out << "Dry Run execution\n";
  grpc::Status s = CallVolumeEndpoint(cli, req, &kvnode::v1::Node::Stub::AddVolume);
  if (!s.ok()) {
    *cli.err << "error adding volume, " << s.error_message() << "\n";
    return 1;
  }
  *cli.out << "Successfully submitted add volume request to VM " << cli.args[0] << " for volume "
           << volume << "\n";
  return 0;
}

int CmdRemoveVolume(Cli& cli) {
  if (cli.args.size() != 1) return cli.Usage("removevolume: expected one VM or VMI name");
  const std::string volume = cli.flags.GetOr("volume-name", "");
  if (volume.empty()) return cli.Usage("removevolume: --volume-name is required");
  kvnode::v1::RemoveVolumeRequest req;
  *req.mutable_ref() = cli.Ref(cli.args[0]);
  req.mutable_options()->set_name(volume);
  if (cli.flags.GetBool("dry-run")) {
    req.mutable_options()->add_dry_run("All");
    *cli.out << "Dry Run execution\n";
  }
  grpc::Status s = CallVolumeEndpoint(cli, req, &kvnode::v1::Node::Stub::RemoveVolume);
  if (!s.ok()) {
    *cli.err << "error removing volume, " << s.error_message() << "\n";
    return 1;
  }
  *cli.out << "Successfully submitted remove volume request to VM " << cli.args[0]
           << " for volume " << volume << "\n";
  return 0;
}

}  // namespace kvnode
