#include "agent/storage/storage_service.h"

#include "agent/base/grpc_status.h"

namespace kvnode {
namespace {

std::string Namespace(const std::string& ns) { return ns.empty() ? "default" : ns; }

}  // namespace

grpc::Status StorageService::ApplyPVC(grpc::ServerContext*, const kvnode::v1::ApplyPVCRequest* req,
                                      kvnode::v1::ApplyPVCResponse* resp) {
  auto r = volumes_->ApplyPvc(req->pvc(), req->dry_run());
  if (!r.ok()) return ToGrpcStatus(r.status());
  *resp->mutable_pvc() = r->pvc;
  resp->set_result(r->result);
  for (const auto& w : r->warnings) resp->add_warnings(w);
  return grpc::Status::OK;
}

grpc::Status StorageService::GetPVC(grpc::ServerContext*, const kvnode::v1::ObjectRef* req,
                                    kvnode::v1::PVCView* resp) {
  auto r = volumes_->GetPvc(Namespace(req->namespace_()), req->name());
  if (!r.ok()) return ToGrpcStatus(r.status());
  *resp = std::move(*r);
  return grpc::Status::OK;
}

grpc::Status StorageService::ListPVCs(grpc::ServerContext*, const kvnode::v1::ListRequest* req,
                                      kvnode::v1::ListPVCsResponse* resp) {
  for (auto& v : volumes_->ListPvcs(req->namespace_())) *resp->add_items() = std::move(v);
  return grpc::Status::OK;
}

grpc::Status StorageService::DeletePVC(grpc::ServerContext*, const kvnode::v1::DeletePVCRequest* req,
                                       kvnode::v1::PVCView* resp) {
  auto r = volumes_->DeletePvc(Namespace(req->ref().namespace_()), req->ref().name(),
                               req->dry_run());
  if (!r.ok()) return ToGrpcStatus(r.status());
  *resp = std::move(*r);
  return grpc::Status::OK;
}

grpc::Status StorageService::ListStorageClasses(grpc::ServerContext*, const kvnode::v1::Empty*,
                                                kvnode::v1::ListStorageClassesResponse* resp) {
  for (const StorageClass& c : volumes_->classes().all()) {
    auto* item = resp->add_items();
    item->set_name(c.name);
    item->set_reclaim_policy(c.reclaim_policy);
    item->set_volume_binding_mode("Immediate");
    item->set_is_default(c.is_default);
    item->set_volume_mode(c.volume_mode);
    item->set_allow_volume_expansion(c.allow_volume_expansion);
    item->set_shared(c.shared);
    item->set_path(c.path);
    for (const std::string& d : c.devices) item->add_devices(d);
  }
  return grpc::Status::OK;
}

grpc::Status StorageService::ListPVs(grpc::ServerContext*, const kvnode::v1::Empty*,
                                     kvnode::v1::ListPVsResponse* resp) {
  for (auto& pv : volumes_->ListPvs()) *resp->add_items() = std::move(pv);
  return grpc::Status::OK;
}

grpc::Status StorageService::DeletePV(grpc::ServerContext*, const kvnode::v1::ObjectRef* req,
                                      kvnode::v1::PersistentVolume* resp) {
  auto pv = volumes_->DeletePv(req->name());
  if (!pv.ok()) return ToGrpcStatus(pv.status());
  *resp = *pv;
  return grpc::Status::OK;
}

grpc::Status StorageService::Upload(grpc::ServerContext* ctx,
                                    grpc::ServerReader<kvnode::v1::UploadChunk>* reader,
                                    kvnode::v1::UploadResult* resp) {
  kvnode::v1::UploadChunk chunk;
  if (!reader->Read(&chunk) || !chunk.has_target()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "upload: the first message must name a target");
  }
  auto upload = volumes_->BeginUpload(chunk.target());
  if (!upload.ok()) return ToGrpcStatus(upload.status());
  const int64_t total = chunk.target().total_bytes();
  int64_t received = 0;
  do {
    if (chunk.data().empty()) continue;
    received += static_cast<int64_t>(chunk.data().size());
    if (absl::Status s = (*upload)->Append(chunk.data()); !s.ok()) return ToGrpcStatus(s);
  } while (reader->Read(&chunk));
  // A client that went away mid-stream also ends the reads: never convert a partial file.
  if (ctx->IsCancelled() || (total > 0 && received != total)) {
    return grpc::Status(grpc::StatusCode::ABORTED,
                        "upload incomplete: received " + std::to_string(received) + " of " +
                            std::to_string(total) + " bytes; nothing was kept");
  }
  auto result = (*upload)->Finish();
  if (!result.ok()) return ToGrpcStatus(result.status());
  *resp = std::move(*result);
  return grpc::Status::OK;
}

grpc::Status StorageService::ListImages(grpc::ServerContext*, const kvnode::v1::Empty*,
                                        kvnode::v1::ListImagesResponse* resp) {
  for (auto& i : volumes_->ListImages()) *resp->add_items() = std::move(i);
  return grpc::Status::OK;
}

grpc::Status StorageService::PruneImages(grpc::ServerContext*,
                                         const kvnode::v1::PruneImagesRequest* req,
                                         kvnode::v1::ListImagesResponse* resp) {
  for (auto& i : volumes_->PruneImages(req->dry_run())) *resp->add_items() = std::move(i);
  return grpc::Status::OK;
}

grpc::Status StorageService::CreateSecret(grpc::ServerContext*,
                                          const kvnode::v1::CreateSecretRequest* req,
                                          kvnode::v1::SecretInfo* resp) {
  std::map<std::string, std::string> data(req->data().begin(), req->data().end());
  auto r = volumes_->secrets().Put(Namespace(req->ref().namespace_()), req->ref().name(), data);
  if (!r.ok()) return ToGrpcStatus(r.status());
  *resp = std::move(*r);
  return grpc::Status::OK;
}

grpc::Status StorageService::ListSecrets(grpc::ServerContext*, const kvnode::v1::ListRequest* req,
                                         kvnode::v1::ListSecretsResponse* resp) {
  for (auto& s : volumes_->secrets().List(Namespace(req->namespace_()))) {
    *resp->add_items() = std::move(s);
  }
  return grpc::Status::OK;
}

grpc::Status StorageService::ApplyDV(grpc::ServerContext*, const kvnode::v1::ApplyDVRequest* req,
                                     kvnode::v1::ApplyDVResponse* resp) {
  auto r = volumes_->ApplyDataVolume(req->dv(), req->dry_run());
  if (!r.ok()) return ToGrpcStatus(r.status());
  *resp->mutable_dv() = r->dv;
  resp->set_result(r->result);
  return grpc::Status::OK;
}

grpc::Status StorageService::GetDV(grpc::ServerContext*, const kvnode::v1::ObjectRef* req,
                                   kvnode::v1::DataVolume* resp) {
  auto r = volumes_->GetDataVolume(Namespace(req->namespace_()), req->name());
  if (!r.ok()) return ToGrpcStatus(r.status());
  *resp = std::move(*r);
  return grpc::Status::OK;
}

grpc::Status StorageService::ListDVs(grpc::ServerContext*, const kvnode::v1::ListRequest* req,
                                     kvnode::v1::ListDVsResponse* resp) {
  for (auto& dv : volumes_->ListDataVolumes(req->namespace_())) *resp->add_items() = std::move(dv);
  return grpc::Status::OK;
}

grpc::Status StorageService::DeleteDV(grpc::ServerContext*, const kvnode::v1::ObjectRef* req,
                                      kvnode::v1::DataVolume* resp) {
  auto r = volumes_->DeleteDataVolume(Namespace(req->namespace_()), req->name());
  if (!r.ok()) return ToGrpcStatus(r.status());
  *resp = std::move(*r);
  return grpc::Status::OK;
}

grpc::Status StorageService::ReviewVMDeletion(grpc::ServerContext*,
                                              const kvnode::v1::ReviewVMDeletionRequest* req,
                                              kvnode::v1::ReviewVMDeletionResponse* resp) {
  auto r = volumes_->ReviewVmDeletion(Namespace(req->ref().namespace_()), req->ref().name(),
                                      req->propagation_policy());
  if (!r.ok()) return ToGrpcStatus(r.status());
  for (auto& i : *r) *resp->add_items() = std::move(i);
  return grpc::Status::OK;
}

grpc::Status StorageService::DeleteSecret(grpc::ServerContext*, const kvnode::v1::ObjectRef* req,
                                          kvnode::v1::SecretInfo* resp) {
  auto r = volumes_->secrets().Delete(Namespace(req->namespace_()), req->name());
  if (!r.ok()) return ToGrpcStatus(r.status());
  *resp = std::move(*r);
  return grpc::Status::OK;
}

grpc::Status StorageService::ApplyDataSource(grpc::ServerContext*,
                                             const kvnode::v1::ApplyDataSourceRequest* req,
                                             kvnode::v1::ApplyDataSourceResponse* resp) {
  auto r = golden_->ApplyDataSource(req->data_source(), req->dry_run());
  if (!r.ok()) return ToGrpcStatus(r.status());
  *resp->mutable_data_source() = std::move(r->object);
  resp->set_result(r->result);
  return grpc::Status::OK;
}

grpc::Status StorageService::GetDataSource(grpc::ServerContext*, const kvnode::v1::ObjectRef* req,
                                           kvnode::v1::DataSource* resp) {
  return ReplyWith(golden_->GetDataSource(Namespace(req->namespace_()), req->name()), resp);
}

grpc::Status StorageService::ListDataSources(grpc::ServerContext*,
                                             const kvnode::v1::ListRequest* req,
                                             kvnode::v1::ListDataSourcesResponse* resp) {
  for (auto& ds : golden_->ListDataSources(req->namespace_())) *resp->add_items() = std::move(ds);
  return grpc::Status::OK;
}

grpc::Status StorageService::DeleteDataSource(grpc::ServerContext*,
                                              const kvnode::v1::ObjectRef* req,
                                              kvnode::v1::DataSource* resp) {
  return ReplyWith(golden_->DeleteDataSource(Namespace(req->namespace_()), req->name()), resp);
}

grpc::Status StorageService::ApplyDataImportCron(
    grpc::ServerContext*, const kvnode::v1::ApplyDataImportCronRequest* req,
    kvnode::v1::ApplyDataImportCronResponse* resp) {
  auto r = golden_->ApplyDataImportCron(req->cron(), req->dry_run());
  if (!r.ok()) return ToGrpcStatus(r.status());
  *resp->mutable_cron() = std::move(r->object);
  resp->set_result(r->result);
  return grpc::Status::OK;
}

grpc::Status StorageService::GetDataImportCron(grpc::ServerContext*,
                                               const kvnode::v1::ObjectRef* req,
                                               kvnode::v1::DataImportCron* resp) {
  return ReplyWith(golden_->GetDataImportCron(Namespace(req->namespace_()), req->name()), resp);
}

grpc::Status StorageService::ListDataImportCrons(grpc::ServerContext*,
                                                 const kvnode::v1::ListRequest* req,
                                                 kvnode::v1::ListDataImportCronsResponse* resp) {
  for (auto& c : golden_->ListDataImportCrons(req->namespace_())) *resp->add_items() = std::move(c);
  return grpc::Status::OK;
}

grpc::Status StorageService::DeleteDataImportCron(grpc::ServerContext*,
                                                  const kvnode::v1::ObjectRef* req,
                                                  kvnode::v1::DataImportCron* resp) {
  return ReplyWith(golden_->DeleteDataImportCron(Namespace(req->namespace_()), req->name()), resp);
}

grpc::Status StorageService::ApplyConfigMap(grpc::ServerContext*,
                                            const kvnode::v1::ApplyConfigMapRequest* req,
                                            kvnode::v1::ApplyConfigMapResponse* resp) {
  auto r = volumes_->config_maps().Apply(req->config_map(), req->dry_run());
  if (!r.ok()) return ToGrpcStatus(r.status());
  *resp->mutable_config_map() = std::move(r->object);
  resp->set_result(r->result);
  return grpc::Status::OK;
}

grpc::Status StorageService::GetConfigMap(grpc::ServerContext*, const kvnode::v1::ObjectRef* req,
                                          kvnode::v1::ConfigMap* resp) {
  return ReplyWith(volumes_->config_maps().Get(Namespace(req->namespace_()), req->name()), resp);
}

grpc::Status StorageService::ListConfigMaps(grpc::ServerContext*,
                                            const kvnode::v1::ListRequest* req,
                                            kvnode::v1::ListConfigMapsResponse* resp) {
  for (auto& cm : volumes_->config_maps().List(req->namespace_())) {
    *resp->add_items() = std::move(cm);
  }
  return grpc::Status::OK;
}

grpc::Status StorageService::DeleteConfigMap(grpc::ServerContext*,
                                             const kvnode::v1::ObjectRef* req,
                                             kvnode::v1::ConfigMap* resp) {
  return ReplyWith(volumes_->config_maps().Delete(Namespace(req->namespace_()), req->name()), resp);
}

}  // namespace kvnode
