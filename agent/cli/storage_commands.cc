// kvctl's storage commands: PersistentVolumeClaims (apply, get, describe, delete), storage
// classes, the PersistentVolumes of Block classes' devices (get, delete), `image-upload pvc` (virtctl's) and the containerDisk image cache (`image import`,
// `image list`). They talk to the handler's kvnode.v1.Storage service on the same socket.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "agent/cli/cli.h"
#include "agent/cli/get_objects.h"
#include "agent/cli/output.h"
#include "agent/manifest/quantity.h"
#include "agent/model/registry_auth.h"
#include "grpcpp/grpcpp.h"
#include "kvnode/v1/storage_service.grpc.pb.h"

namespace kvnode {

std::unique_ptr<kvnode::v1::Storage::Stub> StorageStub(const Cli& cli) {
  return kvnode::v1::Storage::NewStub(
      grpc::CreateChannel("unix:" + cli.socket, grpc::InsecureChannelCredentials()));
}

namespace {

using kvnode::v1::PersistentVolumeClaim;
using kvnode::v1::PVCView;

constexpr size_t kChunkBytes = 1 << 20;

std::string Capacity(const PersistentVolumeClaim& pvc) {
  auto it = pvc.status().capacity().find("storage");
  return it == pvc.status().capacity().end() ? "" : it->second;
}

std::string AccessModes(const google::protobuf::RepeatedPtrField<std::string>& access_modes) {
  static const std::map<std::string, std::string> kShort = {
      {"ReadWriteOnce", "RWO"}, {"ReadOnlyMany", "ROX"}, {"ReadWriteMany", "RWX"},
      {"ReadWriteOncePod", "RWOP"}};
  std::vector<std::string> modes;
  for (const auto& m : access_modes) {
    auto it = kShort.find(m);
    modes.push_back(it == kShort.end() ? m : it->second);
  }
  return absl::StrJoin(modes, ",");
}

std::string UsedBy(const PVCView& v) {
  return v.used_by().empty() ? "<none>" : absl::StrJoin(v.used_by(), ",");
}

// A progress bar on a terminal, plain lines (every 10%) otherwise.
class Progress {
 public:
  Progress(std::ostream& out, int64_t total) : out_(out), total_(total), tty_(isatty(1) == 1) {}
  void Update(int64_t done) {
    double pct = total_ > 0 ? 100.0 * static_cast<double>(done) / static_cast<double>(total_) : 100;
    if (tty_) {
      int filled = static_cast<int>(pct / 100 * 40);
      out_ << "\r[" << std::string(filled, '=') << (filled < 40 ? ">" : "")
           << std::string(filled < 40 ? 39 - filled : 0, ' ') << "] "
           << absl::StrFormat("%5.1f%%", pct) << "  " << HumanBytes(done) << " / "
           << HumanBytes(total_) << std::flush;
      return;
    }
    int decile = static_cast<int>(pct / 10);
    if (decile > last_decile_) {
      last_decile_ = decile;
      out_ << absl::StrFormat("uploaded %.1f%% (%d of %d bytes)\n", pct, done, total_);
    }
  }
  void Done() {
    if (tty_) out_ << "\n";
  }

 private:
  std::ostream& out_;
  const int64_t total_;
  const bool tty_;
  int last_decile_ = -1;
};

// Streams `file` to the handler after `target`; the handler's answer in *result.
int Upload(Cli& cli, const std::string& file, kvnode::v1::UploadTarget target,
           kvnode::v1::UploadResult* result) {
  int fd = open(file.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
    *cli.err << "error: --image-path/--from-file: cannot read \"" << file << "\"\n";
    if (fd >= 0) close(fd);
    return 1;
  }
  target.set_total_bytes(st.st_size);
  auto stub = StorageStub(cli);
  grpc::ClientContext ctx;
  Deadline(&ctx, absl::Hours(2));
  auto writer = stub->Upload(&ctx, result);
  kvnode::v1::UploadChunk chunk;
  *chunk.mutable_target() = std::move(target);
  bool ok = writer->Write(chunk);
  chunk.clear_target();
  Progress progress(*cli.out, st.st_size);
  std::string buf(kChunkBytes, '\0');
  int64_t sent = 0;
  while (ok) {
    ssize_t n = read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    chunk.set_data(buf.data(), static_cast<size_t>(n));
    ok = writer->Write(chunk);
    sent += n;
    progress.Update(sent);
  }
  close(fd);
  progress.Done();
  writer->WritesDone();
  if (ok) *cli.out << "Uploaded " << HumanBytes(sent) << "; converting with qemu-img...\n";
  grpc::Status s = writer->Finish();
  if (!s.ok()) return cli.RpcError(s);
  return 0;
}

void PrintPvcs(const Cli& cli, const std::vector<PVCView>& views, bool wide, bool prefix) {
  absl::Time now = absl::Now();
  std::vector<std::string> header = {"NAME", "STATUS", "VOLUME", "CAPACITY", "ACCESS MODES",
                                     "STORAGECLASS", "AGE"};
  if (wide) header.insert(header.end(), {"VOLUMEMODE", "DEVICE", "RECLAIM", "USED BY"});
  std::vector<std::vector<std::string>> rows;
  for (const auto& v : views) {
    const auto& p = v.pvc();
    std::vector<std::string> row = {
        (prefix ? "persistentvolumeclaim/" : "") + p.metadata().name(), p.status().phase(),
        p.spec().volume_name(), Capacity(p), AccessModes(p.status().access_modes()), p.spec().storage_class_name(),
        Age(p.metadata().creation_timestamp(), now)};
    if (wide) {
      row.insert(row.end(), {p.spec().volume_mode(), v.device().empty() ? "-" : v.device(),
                             v.reclaim_policy(), UsedBy(v)});
    }
    rows.push_back(row);
  }
  if (rows.empty()) {
    *cli.err << "No resources found in " << cli.ns << " namespace.\n";
    return;
  }
  PrintTable(*cli.out, header, rows);
}

}  // namespace

int ApplyPvc(Cli& cli, const PersistentVolumeClaim& pvc, bool dry_run) {
  kvnode::v1::ApplyPVCRequest req;
  *req.mutable_pvc() = pvc;
  req.set_dry_run(dry_run);
  kvnode::v1::ApplyPVCResponse resp;
  grpc::ClientContext ctx;
  grpc::Status s = StorageStub(cli)->ApplyPVC(Deadline(&ctx), req, &resp);
  if (!s.ok()) return cli.RpcError(s);
  for (const auto& w : resp.warnings()) *cli.err << "Warning: " << w << "\n";
  std::string verb = ApplyVerb(resp.result());
  *cli.out << "persistentvolumeclaim/" << resp.pvc().metadata().name() << " " << verb
           << (dry_run ? " (server dry run)" : "") << "\n";
  return 0;
}

int GetPvcs(Cli& cli, const std::string& name, const std::string& output, bool prefix) {
  auto stub = StorageStub(cli);
  std::vector<PVCView> views;
  if (!name.empty()) {
    PVCView v;
    grpc::ClientContext ctx;
    grpc::Status s = stub->GetPVC(Deadline(&ctx), cli.Ref(name), &v);
    if (!s.ok()) return cli.RpcError(s);
    views.push_back(v);
  } else {
    kvnode::v1::ListRequest req;
    req.set_namespace_(cli.ns);
    kvnode::v1::ListPVCsResponse resp;
    grpc::ClientContext ctx;
    grpc::Status s = stub->ListPVCs(Deadline(&ctx), req, &resp);
    if (!s.ok()) return cli.RpcError(s);
    views.assign(resp.items().begin(), resp.items().end());
  }
  if (output == "json" || output == "yaml") {
    if (views.size() == 1 && !name.empty()) {
      *cli.out << (output == "json" ? MessageToJson(views[0].pvc()) : MessageToYaml(views[0].pvc()));
      return 0;
    }
    std::vector<std::string> items;
    for (const auto& v : views) items.push_back(MessageToJson(v.pvc()));
    std::string list = "{\"apiVersion\": \"v1\", \"kind\": \"List\", \"items\": [" +
                       absl::StrJoin(items, ",") + "]}";
    *cli.out << (output == "json" ? list + "\n" : JsonToYaml(list));
    return 0;
  }
  PrintPvcs(cli, views, output == "wide", prefix);
  return 0;
}

int GetStorageClasses(Cli& cli) {
  kvnode::v1::ListStorageClassesResponse resp;
  grpc::ClientContext ctx;
  grpc::Status s = StorageStub(cli)->ListStorageClasses(Deadline(&ctx), kvnode::v1::Empty(), &resp);
  if (!s.ok()) return cli.RpcError(s);
  std::vector<std::vector<std::string>> rows;
  for (const auto& c : resp.items()) {
    rows.push_back({c.name() + (c.is_default() ? " (default)" : ""), "kvnode.io/local",
                    c.reclaim_policy(), c.volume_binding_mode(),
                    c.allow_volume_expansion() ? "true" : "false", c.volume_mode(),
                    c.devices().empty() ? "-" : absl::StrJoin(c.devices(), ","),
                    c.shared() ? c.path() : "-"});
  }
  PrintTable(*cli.out,
             {"NAME", "PROVISIONER", "RECLAIMPOLICY", "VOLUMEBINDINGMODE", "ALLOWVOLUMEEXPANSION",
              "VOLUMEMODE", "DEVICES", "SHARED"},
             rows);
  return 0;
}

int GetPvs(Cli& cli, const std::string& output) {
  kvnode::v1::ListPVsResponse resp;
  grpc::ClientContext ctx;
  grpc::Status s = StorageStub(cli)->ListPVs(Deadline(&ctx), kvnode::v1::Empty(), &resp);
  if (!s.ok()) return cli.RpcError(s);
  if (output == "json" || output == "yaml") {
    *cli.out << (output == "json" ? MessageToJson(resp) : MessageToYaml(resp));
    return 0;
  }
  absl::Time now = absl::Now();
  std::vector<std::vector<std::string>> rows;
  for (const auto& pv : resp.items()) {
    const auto& spec = pv.spec();
    auto capacity = spec.capacity().find("storage");
    rows.push_back({pv.metadata().name(), capacity == spec.capacity().end() ? "" : capacity->second,
                    AccessModes(spec.access_modes()), spec.persistent_volume_reclaim_policy(),
                    pv.status().phase(),
                    spec.claim_ref().namespace_() + "/" + spec.claim_ref().name(),
                    spec.storage_class_name(), spec.local().path(),
                    Age(pv.metadata().creation_timestamp(), now)});
  }
  if (rows.empty()) {
    *cli.err << "No resources found\n";
    return 0;
  }
  PrintTable(*cli.out,
             {"NAME", "CAPACITY", "ACCESS MODES", "RECLAIM POLICY", "STATUS", "CLAIM",
              "STORAGECLASS", "DEVICE", "AGE"},
             rows);
  return 0;
}

int DeletePv(Cli& cli, const std::string& name) {
  kvnode::v1::PersistentVolume pv;
  grpc::ClientContext ctx;
  grpc::Status s = StorageStub(cli)->DeletePV(Deadline(&ctx), cli.Ref(name), &pv);
  if (!s.ok()) return cli.RpcError(s);
  *cli.out << "persistentvolume \"" << name << "\" deleted (device " << pv.spec().local().path()
           << " is free again; its data was not touched)\n";
  return 0;
}

int DescribePvc(Cli& cli, const std::string& name) {
  PVCView v;
  grpc::ClientContext ctx;
  grpc::Status s = StorageStub(cli)->GetPVC(Deadline(&ctx), cli.Ref(name), &v);
  if (!s.ok()) return cli.RpcError(s);
  const auto& p = v.pvc();
  std::vector<std::string> owners;
  for (const auto& o : p.metadata().owner_references()) owners.push_back(o.kind() + "/" + o.name());
  std::ostream& o = *cli.out;
  o << "Name:          " << p.metadata().name() << "\n"
    << "Namespace:     " << p.metadata().namespace_() << "\n"
    << "StorageClass:  " << p.spec().storage_class_name() << "\n"
    << "Status:        " << p.status().phase() << "\n"
    << "Volume:        " << p.spec().volume_name() << "\n"
    << "Capacity:      " << Capacity(p) << "\n"
    << (p.spec().volume_mode() == "Block"
            ? "Device:        " + (v.device().empty() ? "<none>" : v.device()) + "\n"
            : "Allocated:     " + HumanBytes(v.allocated_bytes()) + " on the node\n")
    << (v.pending_reason().empty() ? "" : "Reason:        " + v.pending_reason() + "\n")
    << "Access Modes:  " << AccessModes(p.status().access_modes()) << "\n"
    << "VolumeMode:    " << p.spec().volume_mode() << "\n"
    << "Reclaim:       " << v.reclaim_policy() << "\n"
    << "Owners:        " << (owners.empty() ? "<none>" : absl::StrJoin(owners, ",")) << "\n"
    << "Used By:       " << UsedBy(v) << "\n";
  return 0;
}

int DeletePvc(Cli& cli, const std::string& name) {
  kvnode::v1::DeletePVCRequest req;
  *req.mutable_ref() = cli.Ref(name);
  req.set_dry_run(cli.flags.GetBool("dry-run"));
  PVCView v;
  grpc::ClientContext ctx;
  grpc::Status s = StorageStub(cli)->DeletePVC(Deadline(&ctx), req, &v);
  if (!s.ok()) return cli.RpcError(s);
  *cli.out << "persistentvolumeclaim \"" << name << "\" deleted"
           << (req.dry_run() ? " (server dry run)" : "")
           << (v.reclaim_policy() == "Retain" ? " (reclaimPolicy Retain: its disk is kept on the node)"
                                              : "")
           << "\n";
  return 0;
}

namespace {

// `image-upload dv NAME`: the DataVolume must exist with an upload source (UploadReady), or is
// made here with --size as virtctl does; then the image goes into its claim.
int UploadDataVolume(Cli& cli, const std::string& file, const std::string& size) {
  const std::string& name = cli.args[1];
  kvnode::v1::DataVolume existing;
  grpc::ClientContext ctx;
  grpc::Status got = StorageStub(cli)->GetDV(Deadline(&ctx), cli.Ref(name), &existing);
  if (got.error_code() == grpc::StatusCode::NOT_FOUND) {
    if (size.empty()) {
      return cli.Usage("--size: required to create DataVolume \"" + name +
                       "\" (it does not exist; for example --size 2Gi)");
    }
    kvnode::v1::DataVolume dv;
    dv.mutable_metadata()->set_name(name);
    dv.mutable_metadata()->set_namespace_(cli.ns);
    dv.mutable_spec()->mutable_source()->mutable_upload();
    auto* storage = dv.mutable_spec()->mutable_storage();
    (*storage->mutable_resources()->mutable_requests())["storage"] = size;
    storage->set_storage_class_name(cli.flags.GetOr("storage-class", ""));
    if (int rc = ApplyDv(cli, dv, false); rc != 0) return rc;
  } else if (!got.ok()) {
    return cli.RpcError(got);
  }
  kvnode::v1::UploadTarget target;
  *target.mutable_data_volume() = cli.Ref(name);
  kvnode::v1::UploadResult result;
  if (int rc = Upload(cli, file, std::move(target), &result); rc != 0) return rc;
  *cli.out << "DataVolume " << cli.ns << "/" << name << " is "
           << result.data_volume().status().phase() << " (" << result.source_format()
           << " image, " << Capacity(result.pvc()) << ")\n";
  return 0;
}

}  // namespace

int CmdImageUpload(Cli& cli) {
  // kvctl image-upload pvc NAME --image-path FILE --size 2Gi [--storage-class X]
  // kvctl image-upload dv NAME --image-path FILE [--size 2Gi] [--storage-class X]
  if (cli.args.size() != 2 || (cli.args[0] != "pvc" && cli.args[0] != "dv")) {
    return cli.Usage("usage: kvctl image-upload pvc|dv NAME --image-path FILE --size SIZE "
                     "[--storage-class CLASS]");
  }
  std::string file = cli.flags.GetOr("image-path", "");
  std::string size = cli.flags.GetOr("size", "");
  if (file.empty()) return cli.Usage("--image-path: required");
  if (!size.empty()) {
    if (auto q = Quantity::Parse(size); !q.ok()) {
      return cli.Usage("--size: " + std::string(q.status().message()));
    }
  }
  if (cli.args[0] == "dv") return UploadDataVolume(cli, file, size);
  if (size.empty()) return cli.Usage("--size: required (for example 2Gi)");
  kvnode::v1::UploadTarget target;
  PersistentVolumeClaim* pvc = target.mutable_pvc();
  pvc->set_api_version("v1");
  pvc->set_kind("PersistentVolumeClaim");
  pvc->mutable_metadata()->set_name(cli.args[1]);
  pvc->mutable_metadata()->set_namespace_(cli.ns);
  pvc->mutable_spec()->add_access_modes("ReadWriteOnce");
  (*pvc->mutable_spec()->mutable_resources()->mutable_requests())["storage"] = size;
  pvc->mutable_spec()->set_storage_class_name(cli.flags.GetOr("storage-class", ""));
  kvnode::v1::UploadResult result;
  if (int rc = Upload(cli, file, std::move(target), &result); rc != 0) return rc;
  *cli.out << "PersistentVolumeClaim " << cli.ns << "/" << cli.args[1] << " is "
           << result.pvc().status().phase() << " (" << result.source_format() << " image, "
           << Capacity(result.pvc()) << ")\n";
  return 0;
}

namespace {

// One row per cached image: what it is known as (the references that pulled it, or the one it
// was imported as), its digest (short, as crictl shows image IDs), its disk, who runs on it.
void PrintImages(Cli& cli, const kvnode::v1::ListImagesResponse& resp) {
  absl::Time now = absl::Now();
  std::vector<std::vector<std::string>> rows;
  for (const auto& i : resp.items()) {
    std::string refs = i.refs().empty() ? i.ref() : absl::StrJoin(i.refs(), ",");
    if (refs.empty()) refs = "<none>";  // a tag that moved on to another image
    std::string digest = i.digest().empty() ? "<imported>" : i.digest().substr(7, 12);
    std::string users = i.users().empty() ? "<none>" : absl::StrJoin(i.users(), ",");
    rows.push_back({refs, digest, i.source_format(), HumanBytes(i.virtual_size()),
                    i.disk_bytes() > 0 ? HumanBytes(i.disk_bytes()) : "-", users,
                    Age(i.last_used().empty() ? i.imported() : i.last_used(), now),
                    i.metadata().name()});
  }
  PrintTable(*cli.out,
             {"REFERENCE", "DIGEST", "SOURCE FORMAT", "VIRTUAL SIZE", "ON DISK", "USED BY",
              "LAST USED", "CACHE ENTRY"},
             rows);
}

}  // namespace

int CmdImage(Cli& cli) {
  if (cli.args.size() == 1 && cli.args[0] == "list") {
    kvnode::v1::ListImagesResponse resp;
    grpc::ClientContext ctx;
    grpc::Status s = StorageStub(cli)->ListImages(Deadline(&ctx), kvnode::v1::Empty(), &resp);
    if (!s.ok()) return cli.RpcError(s);
    PrintImages(cli, resp);
    return 0;
  }
  if (cli.args.size() == 1 && cli.args[0] == "prune") {
    kvnode::v1::PruneImagesRequest req;
    req.set_dry_run(cli.flags.GetBool("dry-run"));
    kvnode::v1::ListImagesResponse resp;
    grpc::ClientContext ctx;
    grpc::Status s = StorageStub(cli)->PruneImages(Deadline(&ctx), req, &resp);
    if (!s.ok()) return cli.RpcError(s);
    int64_t freed = 0;
    for (const auto& i : resp.items()) freed += i.disk_bytes();
    *cli.out << (req.dry_run() ? "would remove " : "removed ") << resp.items_size()
             << " image(s) no VMI runs on, " << HumanBytes(freed) << "\n";
    if (resp.items_size() > 0) PrintImages(cli, resp);
    return 0;
  }
  if (cli.args.size() != 2 || cli.args[0] != "import") {
    return cli.Usage(
        "usage: kvctl image import REF --from-file DISK | kvctl image list | kvctl image prune "
        "[--dry-run]");
  }
  std::string file = cli.flags.GetOr("from-file", "");
  if (file.empty()) return cli.Usage("--from-file: required (a raw or qcow2 disk image)");
  kvnode::v1::UploadTarget target;
  target.set_image_ref(cli.args[1]);
  kvnode::v1::UploadResult result;
  if (int rc = Upload(cli, file, std::move(target), &result); rc != 0) return rc;
  *cli.out << "image " << result.image().ref() << " imported (" << result.source_format() << ", "
           << HumanBytes(result.image().virtual_size()) << ")\n";
  return 0;
}

int ApplyDv(Cli& cli, const kvnode::v1::DataVolume& dv, bool dry_run) {
  kvnode::v1::ApplyDVRequest req;
  *req.mutable_dv() = dv;
  req.set_dry_run(dry_run);
  kvnode::v1::ApplyDVResponse resp;
  grpc::ClientContext ctx;
  grpc::Status s = StorageStub(cli)->ApplyDV(Deadline(&ctx), req, &resp);
  if (!s.ok()) return cli.RpcError(s);
  *cli.out << "datavolume.cdi.kubevirt.io/" << resp.dv().metadata().name() << " "
           << ApplyVerb(resp.result()) << (dry_run ? " (server dry run)" : "") << "\n";
  return 0;
}

int GetDvs(Cli& cli, const std::string& name, const std::string& output, bool prefix) {
  auto stub = StorageStub(cli);
  kvnode::v1::ListDVsResponse list;
  if (std::optional<int> done = FetchObjects<kvnode::v1::DataVolume, kvnode::v1::ListDVsResponse>(
          cli, name, output,
          [&](grpc::ClientContext* ctx, kvnode::v1::DataVolume* dv) {
            return stub->GetDV(ctx, cli.Ref(name), dv);
          },
          [&](grpc::ClientContext* ctx, kvnode::v1::ListDVsResponse* resp) {
            kvnode::v1::ListRequest req;
            req.set_namespace_(cli.ns);
            return stub->ListDVs(ctx, req, resp);
          },
          &list)) {
    return *done;
  }
  const auto& dvs = list.items();
  absl::Time now = absl::Now();
  std::vector<std::vector<std::string>> rows;
  for (const auto& dv : dvs) {
    std::vector<std::string> row = {(prefix ? "datavolume.cdi.kubevirt.io/" : "") + dv.metadata().name(),
                                    dv.status().phase(), dv.status().progress(),
                                    std::to_string(dv.status().restart_count()),
                                    Age(dv.metadata().creation_timestamp(), now)};
    if (output == "wide") {
      std::string message;
      for (const auto& c : dv.status().conditions()) {
        if (c.type() == "Running" && !c.message().empty()) message = c.message();
      }
      row.push_back(message);
    }
    rows.push_back(row);
  }
  if (rows.empty()) {
    *cli.err << "No resources found in " << cli.ns << " namespace.\n";
    return 0;
  }
  std::vector<std::string> header = {"NAME", "PHASE", "PROGRESS", "RESTARTS", "AGE"};
  if (output == "wide") header.push_back("MESSAGE");
  PrintTable(*cli.out, header, rows);
  return 0;
}

int DeleteDv(Cli& cli, const std::string& name) {
  kvnode::v1::DataVolume dv;
  grpc::ClientContext ctx;
  grpc::Status s = StorageStub(cli)->DeleteDV(Deadline(&ctx), cli.Ref(name), &dv);
  if (!s.ok()) return cli.RpcError(s);
  *cli.out << "datavolume.cdi.kubevirt.io \"" << name << "\" deleted\n";
  return 0;
}

int PrintVolumeReview(Cli& cli, const std::string& vm, const std::string& propagation,
                      const std::string& title) {
  kvnode::v1::ReviewVMDeletionRequest req;
  *req.mutable_ref() = cli.Ref(vm);
  req.set_propagation_policy(propagation);
  kvnode::v1::ReviewVMDeletionResponse resp;
  grpc::ClientContext ctx;
  grpc::Status s = StorageStub(cli)->ReviewVMDeletion(Deadline(&ctx), req, &resp);
  if (!s.ok()) return cli.RpcError(s);
  *cli.out << title << "\n";
  if (resp.items().empty()) {
    *cli.out << "  <none>\n";
    return PrintVmSnapshotsReview(cli, vm);
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& i : resp.items()) {
    rows.push_back({"  " + i.claim(), i.owner(), i.reclaim_policy().empty() ? "-" : i.reclaim_policy(),
                    i.capacity().empty() ? "-" : i.capacity(),
                    i.used_by().empty() ? "<none>" : absl::StrJoin(i.used_by(), ","), i.verdict()});
  }
  PrintTable(*cli.out, {"  CLAIM", "OWNER", "RECLAIM", "SIZE", "USED BY", "ON DELETE"}, rows);
  return PrintVmSnapshotsReview(cli, vm);
}

namespace {

// kubectl's --from-file=[KEY=]FILE and --from-literal=KEY=VALUE into `data`; false (with the
// exit code in `rc`) on a bad flag or an unreadable file.
template <typename Map>
bool DataFromFlags(Cli& cli, Map* data, int* rc) {
  for (const std::string& spec : cli.flags.GetAll("from-file")) {
    size_t eq = spec.find('=');
    std::string file = eq == std::string::npos ? spec : spec.substr(eq + 1);
    std::string key = eq == std::string::npos ? file.substr(file.rfind('/') + 1) : spec.substr(0, eq);
    std::ifstream in(file, std::ios::binary);
    if (!in) {
      *cli.err << "error: --from-file: cannot read \"" << file << "\"\n";
      *rc = 1;
      return false;
    }
    (*data)[key].assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  for (const std::string& spec : cli.flags.GetAll("from-literal")) {
    size_t eq = spec.find('=');
    if (eq == std::string::npos) {
      *rc = cli.Usage("--from-literal: expected KEY=VALUE");
      return false;
    }
    (*data)[spec.substr(0, eq)] = spec.substr(eq + 1);
  }
  return true;
}

// kvctl create configmap NAME --from-file=[KEY=]FILE --from-literal=KEY=VALUE
int CreateConfigMap(Cli& cli) {
  kvnode::v1::ApplyConfigMapRequest req;
  auto* cm = req.mutable_config_map();
  cm->mutable_metadata()->set_name(cli.args[1]);
  cm->mutable_metadata()->set_namespace_(cli.ns);
  int rc = 0;
  if (!DataFromFlags(cli, cm->mutable_data(), &rc)) return rc;
  kvnode::v1::ConfigMap existing;
  {
    grpc::ClientContext ctx;
    if (StorageStub(cli)->GetConfigMap(Deadline(&ctx), cli.Ref(cli.args[1]), &existing).ok()) {
      *cli.err << "error: configmaps \"" << cli.args[1] << "\" already exists\n";
      return 1;
    }
  }
  kvnode::v1::ApplyConfigMapResponse resp;
  grpc::ClientContext ctx;
  grpc::Status s = StorageStub(cli)->ApplyConfigMap(Deadline(&ctx), req, &resp);
  if (!s.ok()) return cli.RpcError(s);
  *cli.out << "configmap/" << resp.config_map().metadata().name() << " created\n";
  return 0;
}

}  // namespace

int CmdCreate(Cli& cli) {
  // kvctl create secret generic NAME --from-file=[KEY=]FILE --from-literal=KEY=VALUE
  // kvctl create secret docker-registry NAME --docker-server=S --docker-username=U
  //   --docker-password=P (kubectl's: a .dockerconfigjson key)
  // kvctl create configmap NAME --from-file=[KEY=]FILE --from-literal=KEY=VALUE
  if (cli.args.size() == 2 && (cli.args[0] == "configmap" || cli.args[0] == "cm")) {
    return CreateConfigMap(cli);
  }
  const bool registry = cli.args.size() == 3 && cli.args[1] == "docker-registry";
  if (cli.args.size() != 3 || cli.args[0] != "secret" ||
      (cli.args[1] != "generic" && !registry)) {
    return cli.Usage("usage: kvctl create secret generic NAME --from-file=[KEY=]FILE "
                     "[--from-literal=KEY=VALUE] | kvctl create secret docker-registry NAME "
                     "--docker-server=REGISTRY --docker-username=USER --docker-password=PASSWORD "
                     "| kvctl create configmap NAME --from-file=[KEY=]FILE "
                     "[--from-literal=KEY=VALUE]");
  }
  kvnode::v1::CreateSecretRequest req;
  *req.mutable_ref() = cli.Ref(cli.args[2]);
  auto& data = *req.mutable_data();
  if (registry) {
    for (const char* flag : {"docker-server", "docker-username", "docker-password"}) {
      if (cli.flags.GetOr(flag, "").empty()) {
        return cli.Usage(absl::StrCat("--", flag, ": required for a docker-registry secret"));
      }
    }
    data[".dockerconfigjson"] = DockerConfigJson(cli.flags.GetOr("docker-server", ""),
                                                 cli.flags.GetOr("docker-username", ""),
                                                 cli.flags.GetOr("docker-password", ""));
  }
  int rc = 0;
  if (!DataFromFlags(cli, &data, &rc)) return rc;
  if (data.empty()) return cli.Usage("give --from-file=[KEY=]FILE or --from-literal=KEY=VALUE");
  if (registry && data.size() > 1) {
    return cli.Usage("a docker-registry secret takes no --from-file or --from-literal");
  }
  kvnode::v1::SecretInfo info;
  grpc::ClientContext ctx;
  grpc::Status s = StorageStub(cli)->CreateSecret(Deadline(&ctx), req, &info);
  if (!s.ok()) return cli.RpcError(s);
  *cli.out << "secret/" << info.name() << " created\n";
  return 0;
}

int GetSecrets(Cli& cli) {
  kvnode::v1::ListRequest req;
  req.set_namespace_(cli.ns);
  kvnode::v1::ListSecretsResponse resp;
  grpc::ClientContext ctx;
  grpc::Status s = StorageStub(cli)->ListSecrets(Deadline(&ctx), req, &resp);
  if (!s.ok()) return cli.RpcError(s);
  std::vector<std::vector<std::string>> rows;
  for (const auto& i : resp.items()) {
    rows.push_back({i.name(), "Opaque", std::to_string(i.keys_size()), absl::StrJoin(i.keys(), ",")});
  }
  if (rows.empty()) {
    *cli.err << "No resources found in " << cli.ns << " namespace.\n";
    return 0;
  }
  PrintTable(*cli.out, {"NAME", "TYPE", "DATA", "KEYS"}, rows);
  return 0;
}

int DeleteSecret(Cli& cli, const std::string& name) {
  kvnode::v1::SecretInfo info;
  grpc::ClientContext ctx;
  grpc::Status s = StorageStub(cli)->DeleteSecret(Deadline(&ctx), cli.Ref(name), &info);
  if (!s.ok()) return cli.RpcError(s);
  *cli.out << "secret \"" << name << "\" deleted\n";
  return 0;
}

}  // namespace kvnode

namespace kvnode {

int ApplyConfigMap(Cli& cli, const kvnode::v1::ConfigMap& cm, bool dry_run) {
  kvnode::v1::ApplyConfigMapRequest req;
  *req.mutable_config_map() = cm;
  req.set_dry_run(dry_run);
  kvnode::v1::ApplyConfigMapResponse resp;
  grpc::ClientContext ctx;
  grpc::Status s = StorageStub(cli)->ApplyConfigMap(Deadline(&ctx), req, &resp);
  if (!s.ok()) return cli.RpcError(s);
  *cli.out << "configmap/" << resp.config_map().metadata().name() << " "
           << ApplyVerb(resp.result()) << (dry_run ? " (server dry run)" : "") << "\n";
  return 0;
}

int GetConfigMaps(Cli& cli, const std::string& name, const std::string& output) {
  auto stub = StorageStub(cli);
  kvnode::v1::ListRequest req;
  req.set_namespace_(cli.ns);
  absl::Time now = absl::Now();
  return GetObjects<kvnode::v1::ConfigMap, kvnode::v1::ListConfigMapsResponse>(
      cli, name, output,
      [&](grpc::ClientContext* ctx, kvnode::v1::ConfigMap* out) {
        return stub->GetConfigMap(ctx, cli.Ref(name), out);
      },
      [&](grpc::ClientContext* ctx, kvnode::v1::ListConfigMapsResponse* out) {
        return stub->ListConfigMaps(ctx, req, out);
      },
      {"NAME", "DATA", "AGE"},
      [&](const kvnode::v1::ConfigMap& cm) -> std::vector<std::string> {
        return {cm.metadata().name(), std::to_string(cm.data_size()),
                Age(cm.metadata().creation_timestamp(), now)};
      });
}

int DeleteConfigMap(Cli& cli, const std::string& name) {
  kvnode::v1::ConfigMap cm;
  grpc::ClientContext ctx;
  grpc::Status s = StorageStub(cli)->DeleteConfigMap(Deadline(&ctx), cli.Ref(name), &cm);
  if (!s.ok()) return cli.RpcError(s);
  *cli.out << "configmap \"" << name << "\" deleted\n";
  return 0;
}

}  // namespace kvnode
