// kvnode.v1.Storage over gRPC: each call parses, asks the VolumeManager, and maps the status
// once (agent/base/grpc_status.h).
#ifndef KVNODE_AGENT_STORAGE_STORAGE_SERVICE_H_
#define KVNODE_AGENT_STORAGE_STORAGE_SERVICE_H_

#include "agent/storage/golden_images.h"
#include "agent/storage/volume_manager.h"
#include "kvnode/v1/storage_service.grpc.pb.h"

namespace kvnode {

class StorageService final : public kvnode::v1::Storage::Service {
 public:
  StorageService(VolumeManager* volumes, GoldenImages* golden)
      : volumes_(volumes), golden_(golden) {}

  grpc::Status ApplyPVC(grpc::ServerContext*, const kvnode::v1::ApplyPVCRequest* req,
                        kvnode::v1::ApplyPVCResponse* resp) override;
  grpc::Status GetPVC(grpc::ServerContext*, const kvnode::v1::ObjectRef* req,
                      kvnode::v1::PVCView* resp) override;
  grpc::Status ListPVCs(grpc::ServerContext*, const kvnode::v1::ListRequest* req,
                        kvnode::v1::ListPVCsResponse* resp) override;
  grpc::Status DeletePVC(grpc::ServerContext*, const kvnode::v1::DeletePVCRequest* req,
                         kvnode::v1::PVCView* resp) override;
  grpc::Status ListStorageClasses(grpc::ServerContext*, const kvnode::v1::Empty*,
                                  kvnode::v1::ListStorageClassesResponse* resp) override;
  grpc::Status ListPVs(grpc::ServerContext*, const kvnode::v1::Empty*,
                       kvnode::v1::ListPVsResponse* resp) override;
  grpc::Status DeletePV(grpc::ServerContext*, const kvnode::v1::ObjectRef* req,
                        kvnode::v1::PersistentVolume* resp) override;
  grpc::Status Upload(grpc::ServerContext*, grpc::ServerReader<kvnode::v1::UploadChunk>* reader,
                      kvnode::v1::UploadResult* resp) override;
  grpc::Status ListImages(grpc::ServerContext*, const kvnode::v1::Empty*,
                          kvnode::v1::ListImagesResponse* resp) override;
  grpc::Status PruneImages(grpc::ServerContext*, const kvnode::v1::PruneImagesRequest* req,
                           kvnode::v1::ListImagesResponse* resp) override;
  grpc::Status CreateSecret(grpc::ServerContext*, const kvnode::v1::CreateSecretRequest* req,
                            kvnode::v1::SecretInfo* resp) override;
  grpc::Status ListSecrets(grpc::ServerContext*, const kvnode::v1::ListRequest* req,
                           kvnode::v1::ListSecretsResponse* resp) override;
  grpc::Status ApplyDV(grpc::ServerContext*, const kvnode::v1::ApplyDVRequest* req,
                       kvnode::v1::ApplyDVResponse* resp) override;
  grpc::Status GetDV(grpc::ServerContext*, const kvnode::v1::ObjectRef* req,
                     kvnode::v1::DataVolume* resp) override;
  grpc::Status ListDVs(grpc::ServerContext*, const kvnode::v1::ListRequest* req,
                       kvnode::v1::ListDVsResponse* resp) override;
  grpc::Status DeleteDV(grpc::ServerContext*, const kvnode::v1::ObjectRef* req,
                        kvnode::v1::DataVolume* resp) override;
  grpc::Status ReviewVMDeletion(grpc::ServerContext*, const kvnode::v1::ReviewVMDeletionRequest* req,
                                kvnode::v1::ReviewVMDeletionResponse* resp) override;
  grpc::Status DeleteSecret(grpc::ServerContext*, const kvnode::v1::ObjectRef* req,
                            kvnode::v1::SecretInfo* resp) override;
  grpc::Status ApplyDataSource(grpc::ServerContext*, const kvnode::v1::ApplyDataSourceRequest* req,
                               kvnode::v1::ApplyDataSourceResponse* resp) override;
  grpc::Status GetDataSource(grpc::ServerContext*, const kvnode::v1::ObjectRef* req,
                             kvnode::v1::DataSource* resp) override;
  grpc::Status ListDataSources(grpc::ServerContext*, const kvnode::v1::ListRequest* req,
                               kvnode::v1::ListDataSourcesResponse* resp) override;
  grpc::Status DeleteDataSource(grpc::ServerContext*, const kvnode::v1::ObjectRef* req,
                                kvnode::v1::DataSource* resp) override;
  grpc::Status ApplyDataImportCron(grpc::ServerContext*,
                                   const kvnode::v1::ApplyDataImportCronRequest* req,
                                   kvnode::v1::ApplyDataImportCronResponse* resp) override;
  grpc::Status GetDataImportCron(grpc::ServerContext*, const kvnode::v1::ObjectRef* req,
                                 kvnode::v1::DataImportCron* resp) override;
  grpc::Status ListDataImportCrons(grpc::ServerContext*, const kvnode::v1::ListRequest* req,
                                   kvnode::v1::ListDataImportCronsResponse* resp) override;
  grpc::Status DeleteDataImportCron(grpc::ServerContext*, const kvnode::v1::ObjectRef* req,
                                    kvnode::v1::DataImportCron* resp) override;
  grpc::Status ApplyConfigMap(grpc::ServerContext*, const kvnode::v1::ApplyConfigMapRequest* req,
                              kvnode::v1::ApplyConfigMapResponse* resp) override;
  grpc::Status GetConfigMap(grpc::ServerContext*, const kvnode::v1::ObjectRef* req,
                            kvnode::v1::ConfigMap* resp) override;
  grpc::Status ListConfigMaps(grpc::ServerContext*, const kvnode::v1::ListRequest* req,
                              kvnode::v1::ListConfigMapsResponse* resp) override;
  grpc::Status DeleteConfigMap(grpc::ServerContext*, const kvnode::v1::ObjectRef* req,
                               kvnode::v1::ConfigMap* resp) override;

 private:
  VolumeManager* const volumes_;
  GoldenImages* const golden_;
};

}  // namespace kvnode

#endif  // KVNODE_AGENT_STORAGE_STORAGE_SERVICE_H_
