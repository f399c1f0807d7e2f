// kvnode.v1.NodeMigration on the handler's API socket: MigrateVMI, CancelMigration,
// ListMigrations, and the MigrationPolicy calls. Parses, calls the MigrationController, maps the status.
#ifndef KVNODE_AGENT_MIGRATION_NODE_MIGRATION_SERVICE_H_
#define KVNODE_AGENT_MIGRATION_NODE_MIGRATION_SERVICE_H_

#include "agent/base/grpc_status.h"
#include "agent/migration/migration_controller.h"
#include "kvnode/v1/migration.grpc.pb.h"

namespace kvnode {

class NodeMigrationService final : public kvnode::v1::NodeMigration::Service {
 public:
  explicit NodeMigrationService(MigrationController* migrations) : migrations_(migrations) {}

  grpc::Status MigrateVMI(grpc::ServerContext*, const kvnode::v1::MigrateVMIRequest* req,
                          kvnode::v1::VirtualMachineInstanceMigration* resp) override {
    auto r = migrations_->Migrate(req->vmi(), req->target_node(), req->bandwidth_mib());
    if (!r.ok()) return ToGrpcStatus(r.status());
    *resp = *r;
    return grpc::Status::OK;
  }
  grpc::Status CancelMigration(grpc::ServerContext*, const kvnode::v1::CancelMigrationRequest* req,
                               kvnode::v1::VirtualMachineInstanceMigration* resp) override {
    auto r = migrations_->Cancel(req->vmi());
    if (!r.ok()) return ToGrpcStatus(r.status());
    *resp = *r;
    return grpc::Status::OK;
  }
  grpc::Status ListMigrations(grpc::ServerContext*, const kvnode::v1::ListRequest* req,
                              kvnode::v1::ListMigrationsResponse* resp) override {
    for (auto& m : migrations_->List(req->namespace_())) *resp->add_items() = std::move(m);
    return grpc::Status::OK;
  }
  grpc::Status ApplyMigrationPolicy(grpc::ServerContext*,
                                    const kvnode::v1::ApplyMigrationPolicyRequest* req,
                                    kvnode::v1::ApplyMigrationPolicyResponse* resp) override {
    auto r = migrations_->ApplyPolicy(req->policy(), req->dry_run());
    if (!r.ok()) return ToGrpcStatus(r.status());
    *resp->mutable_policy() = std::move(r->policy);
    resp->set_result(r->result);
    return grpc::Status::OK;
  }
  grpc::Status ListMigrationPolicies(grpc::ServerContext*, const kvnode::v1::Empty*,
                                     kvnode::v1::ListMigrationPoliciesResponse* resp) override {
    for (auto& p : migrations_->ListPolicies()) *resp->add_items() = std::move(p);
    return grpc::Status::OK;
  }
  grpc::Status DeleteMigrationPolicy(grpc::ServerContext*, const kvnode::v1::ObjectRef* req,
                                     kvnode::v1::MigrationPolicy* resp) override {
    auto r = migrations_->DeletePolicy(req->name());
    if (!r.ok()) return ToGrpcStatus(r.status());
    *resp = std::move(*r);
    return grpc::Status::OK;
  }

 private:
  MigrationController* const migrations_;
};

}  // namespace kvnode

#endif  // KVNODE_AGENT_MIGRATION_NODE_MIGRATION_SERVICE_H_
