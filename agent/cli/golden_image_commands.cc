// kvctl for CDI's golden images: DataSources (das) and DataImportCrons (dic): apply, get,
// describe, delete.
#include "absl/strings/str_cat.h"
#include "agent/cli/cli.h"
#include "agent/cli/get_objects.h"
#include "agent/cli/output.h"
#include "agent/manifest/conditions.h"
#include "agent/model/cdi_names.h"
#include "grpcpp/grpcpp.h"
#include "kvnode/v1/storage_service.grpc.pb.h"

namespace kvnode {
namespace {

using kvnode::v1::DataImportCron;
using kvnode::v1::DataSource;

std::string ConditionStatus(const Conditions& cs, const std::string& type) {
  const kvnode::v1::Condition* c = FindCondition(cs, type);
  return c == nullptr ? "Unknown" : c->status();
}

std::string PvcRef(const kvnode::v1::DataVolumeSourcePVC& pvc) {
  return pvc.name().empty() ? "<none>" : pvc.namespace_() + "/" + pvc.name();
}

}  // namespace

int ApplyDataSource(Cli& cli, const DataSource& ds, bool dry_run) {
  kvnode::v1::ApplyDataSourceRequest req;
  *req.mutable_data_source() = ds;
  req.set_dry_run(dry_run);
  kvnode::v1::ApplyDataSourceResponse resp;
  grpc::ClientContext ctx;
  grpc::Status s = StorageStub(cli)->ApplyDataSource(Deadline(&ctx), req, &resp);
  if (!s.ok()) return cli.RpcError(s);
  *cli.out << "datasource.cdi.kubevirt.io/" << resp.data_source().metadata().name() << " "
           << ApplyVerb(resp.result()) << (dry_run ? " (server dry run)" : "") << "\n";
  return 0;
}

int ApplyDataImportCron(Cli& cli, const DataImportCron& cron, bool dry_run) {
  kvnode::v1::ApplyDataImportCronRequest req;
  *req.mutable_cron() = cron;
  req.set_dry_run(dry_run);
  kvnode::v1::ApplyDataImportCronResponse resp;
  grpc::ClientContext ctx;
  grpc::Status s = StorageStub(cli)->ApplyDataImportCron(Deadline(&ctx), req, &resp);
  if (!s.ok()) return cli.RpcError(s);
  *cli.out << "dataimportcron.cdi.kubevirt.io/" << resp.cron().metadata().name() << " "
           << ApplyVerb(resp.result()) << (dry_run ? " (server dry run)" : "") << "\n";
  return 0;
}

int GetDataSources(Cli& cli, const std::string& name, const std::string& output) {
  auto stub = StorageStub(cli);
  kvnode::v1::ListRequest req;
  req.set_namespace_(cli.ns);
  absl::Time now = absl::Now();
  return GetObjects<DataSource, kvnode::v1::ListDataSourcesResponse>(
      cli, name, output,
      [&](grpc::ClientContext* ctx, DataSource* out) {
        return stub->GetDataSource(ctx, cli.Ref(name), out);
      },
      [&](grpc::ClientContext* ctx, kvnode::v1::ListDataSourcesResponse* out) {
        return stub->ListDataSources(ctx, req, out);
      },
      {"NAME", "READY", "SOURCE", "AGE"},
      [&](const DataSource& ds) -> std::vector<std::string> {
        return {ds.metadata().name(), ConditionStatus(ds.status().conditions(), "Ready"),
                PvcRef(ds.status().source().pvc()), Age(ds.metadata().creation_timestamp(), now)};
      });
}

int GetDataImportCrons(Cli& cli, const std::string& name, const std::string& output) {
  auto stub = StorageStub(cli);
  kvnode::v1::ListRequest req;
  req.set_namespace_(cli.ns);
  absl::Time now = absl::Now();
  return GetObjects<DataImportCron, kvnode::v1::ListDataImportCronsResponse>(
      cli, name, output,
      [&](grpc::ClientContext* ctx, DataImportCron* out) {
        return stub->GetDataImportCron(ctx, cli.Ref(name), out);
      },
      [&](grpc::ClientContext* ctx, kvnode::v1::ListDataImportCronsResponse* out) {
        return stub->ListDataImportCrons(ctx, req, out);
      },
      {"NAME", "FORMAT", "SCHEDULE", "UP-TO-DATE", "LAST IMPORT", "AGE"},
      [&](const DataImportCron& c) -> std::vector<std::string> {
        return {c.metadata().name(),
                c.status().source_format().empty() ? "<none>" : c.status().source_format(),
                c.spec().schedule().empty() ? "<none>" : c.spec().schedule(),
                ConditionStatus(c.status().conditions(), "UpToDate"),
                PvcRef(c.status().last_imported_pvc()), Age(c.metadata().creation_timestamp(), now)};
      });
}

int DescribeDataSource(Cli& cli, const std::string& name) {
  DataSource ds;
  grpc::ClientContext ctx;
  grpc::Status s = StorageStub(cli)->GetDataSource(Deadline(&ctx), cli.Ref(name), &ds);
  if (!s.ok()) return cli.RpcError(s);
  const auto& src = ds.spec().source();
  std::ostream& o = *cli.out;
  o << "Name:         " << ds.metadata().name() << "\n"
    << "Namespace:    " << ds.metadata().namespace_() << "\n"
    << "Source:       "
    << (src.has_pvc()           ? "pvc " + PvcRef(src.pvc())
        : src.has_data_source() ? "dataSource " + src.data_source().name()
                                : "<none>")
    << "\n"
    << "Resolves to:  " << PvcRef(ds.status().source().pvc()) << "\n";
  auto managed = ds.metadata().labels().find(kDataImportCronLabel);
  o << "Managed by:   "
    << (managed == ds.metadata().labels().end() ? "<none>" : "DataImportCron/" + managed->second)
    << "\n";
  PrintConditions(o, ds.status().conditions());
  return 0;
}

int DescribeDataImportCron(Cli& cli, const std::string& name) {
  DataImportCron c;
  grpc::ClientContext ctx;
  grpc::Status s = StorageStub(cli)->GetDataImportCron(Deadline(&ctx), cli.Ref(name), &c);
  if (!s.ok()) return cli.RpcError(s);
  auto ann = [&c](const char* key) {
    auto it = c.metadata().annotations().find(key);
    return it == c.metadata().annotations().end() ? std::string("<none>") : it->second;
  };
  std::ostream& o = *cli.out;
  o << "Name:                " << c.metadata().name() << "\n"
    << "Namespace:           " << c.metadata().namespace_() << "\n"
    << "Source:              " << c.spec().template_().spec().source().registry().url() << "\n"
    << "Schedule:            " << (c.spec().schedule().empty() ? "<none>" : c.spec().schedule())
    << "\n"
    << "Managed DataSource:  " << c.spec().managed_data_source() << "\n"
    << "Desired digest:      " << ann(kAnnSourceDesiredDigest) << "\n"
    << "Last poll:           " << ann(kAnnLastCronTime) << "\n"
    << "Next poll:           " << ann(kAnnNextCronTime) << "\n";
  for (const auto& i : c.status().current_imports()) {
    o << "Current import:      " << i.data_volume_name() << " (" << i.digest() << ")\n";
  }
  o << "Last imported:       " << PvcRef(c.status().last_imported_pvc())
    << (c.status().last_import_timestamp().empty() ? ""
                                                   : " at " + c.status().last_import_timestamp())
    << "\n";
  PrintConditions(o, c.status().conditions());
  return 0;
}

int DeleteDataSource(Cli& cli, const std::string& name) {
  DataSource ds;
  grpc::ClientContext ctx;
  grpc::Status s = StorageStub(cli)->DeleteDataSource(Deadline(&ctx), cli.Ref(name), &ds);
  if (!s.ok()) return cli.RpcError(s);
  *cli.out << "datasource.cdi.kubevirt.io \"" << name << "\" deleted\n";
  return 0;
}

int DeleteDataImportCron(Cli& cli, const std::string& name) {
  DataImportCron c;
  grpc::ClientContext ctx;
  grpc::Status s = StorageStub(cli)->DeleteDataImportCron(Deadline(&ctx), cli.Ref(name), &c);
  if (!s.ok()) return cli.RpcError(s);
  *cli.out << "dataimportcron.cdi.kubevirt.io \"" << name << "\" deleted\n";
  return 0;
}

}  // namespace kvnode
