// Helpers shared by the network unit tests: a temporary directory with a Store in it, and
// VMIs shaped like the defaulted manifests the handler passes in.
#ifndef KVNODE_AGENT_NETWORK_NETWORK_TEST_UTIL_H_
#define KVNODE_AGENT_NETWORK_NETWORK_TEST_UTIL_H_

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "agent/store/store.h"
#include "gtest/gtest.h"
#include "kvnode/v1/kubevirt.pb.h"

namespace kvnode {
namespace testing_network {

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/kvnode-network-test-XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string Write(const std::string& name, const std::string& content) const {
    std::string file = path_ + "/" + name;
    std::ofstream(file) << content;
    return file;
  }

 private:
  std::string path_;
};

inline std::unique_ptr<Store> OpenStore(const TempDir& dir) {
  auto store = Store::Open(dir.path() + "/kvnode.db");
  EXPECT_TRUE(store.ok()) << store.status();
  return store.ok() ? std::move(*store) : nullptr;
}

// A VMI with one masquerade interface "default" on the pod network "default".
inline kvnode::v1::VirtualMachineInstance MasqueradeVmi(const std::string& name,
                                                        const std::string& uid) {
  kvnode::v1::VirtualMachineInstance vmi;
  vmi.mutable_metadata()->set_name(name);
  vmi.mutable_metadata()->set_namespace_("default");
  vmi.mutable_metadata()->set_uid(uid);
  auto* iface = vmi.mutable_spec()->mutable_domain()->mutable_devices()->add_interfaces();
  iface->set_name("default");
  iface->set_model("virtio");
  iface->mutable_masquerade();
  auto* net = vmi.mutable_spec()->add_networks();
  net->set_name("default");
  net->mutable_pod();
  return vmi;
}

// Adds interface `name` with the bridge binding on a Multus network of the same name that
// names the definition `nad` ("name" or "namespace/name").
inline void AddMultusInterface(kvnode::v1::VirtualMachineInstance* vmi, const std::string& name,
                               const std::string& nad) {
  auto* iface = vmi->mutable_spec()->mutable_domain()->mutable_devices()->add_interfaces();
  iface->set_name(name);
  iface->mutable_bridge();
  auto* net = vmi->mutable_spec()->add_networks();
  net->set_name(name);
  net->mutable_multus()->set_network_name(nad);
}

inline void AddPort(kvnode::v1::VirtualMachineInstance* vmi, const std::string& protocol,
                    int port) {
  auto* p = vmi->mutable_spec()->mutable_domain()->mutable_devices()->mutable_interfaces(0)
                ->add_ports();
  p->set_protocol(protocol);
  p->set_port(port);
}

}  // namespace testing_network
}  // namespace kvnode

#endif  // KVNODE_AGENT_NETWORK_NETWORK_TEST_UTIL_H_
