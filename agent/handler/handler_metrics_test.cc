#include "agent/handler/handler_metrics.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvnode {
namespace {

using ::testing::HasSubstr;

TEST(HandlerMetricsTest, DomainStatisticsBecomeKubevirtFamiliesWithVmiLabels) {
  kvnode::v1::VirtualMachineInstance vmi;
  vmi.mutable_metadata()->set_namespace_("apps");
  vmi.mutable_metadata()->set_name("app01");
  kvnode::v1::DomainStats s;
  s.set_cpu_time_ns(2500000000);
  s.set_memory_rss_bytes(1 << 20);
  auto* v = s.add_vcpus();
  v->set_id(0);
  v->set_state("running");
  v->set_time_ns(1500000000);
  auto* n = s.add_interfaces();
  n->set_name("tap0");
  n->set_rx_bytes(1234);
  auto* b = s.add_blocks();
  b->set_name("vda");
  b->set_rd_reqs(7);
  MetricsRegistry registry;
  registry.AddCollector([&] { return VmiStatsFamilies(vmi, s, "node01"); });
  std::string text = registry.Render();
  const std::string l = "node=\"node01\",namespace=\"apps\",name=\"app01\"";
  EXPECT_THAT(text, HasSubstr("# TYPE kubevirt_vmi_cpu_usage_seconds_total counter\n"
                              "kubevirt_vmi_cpu_usage_seconds_total{" + l + "} 2.5\n"));
  EXPECT_THAT(text, HasSubstr("kubevirt_vmi_vcpu_seconds_total{" + l +
                              ",id=\"0\",state=\"running\"} 1.5\n"));
  EXPECT_THAT(text, HasSubstr("kubevirt_vmi_memory_resident_bytes{" + l + "} 1048576\n"));
  EXPECT_THAT(text, HasSubstr("kubevirt_vmi_network_receive_bytes_total{" + l +
                              ",interface=\"tap0\"} 1234\n"));
  EXPECT_THAT(text, HasSubstr("kubevirt_vmi_storage_iops_read_total{" + l +
                              ",drive=\"vda\"} 7\n"));
}

TEST(HandlerMetricsTest, TheHandlersOwnFamiliesAreDeclared) {
  MetricsRegistry registry;
  DeclareHandlerMetrics(&registry);
  registry.Observe(kVmiStartSeconds, {}, 0.6);
  registry.Increment(kLauncherStarts, {});
  std::string text = registry.Render();
  EXPECT_THAT(text, HasSubstr("# TYPE kvnode_vmi_start_seconds histogram\n"));
  EXPECT_THAT(text, HasSubstr("kvnode_vmi_start_seconds_bucket{le=\"0.5\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("kvnode_vmi_start_seconds_bucket{le=\"0.75\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("kvnode_launcher_starts_total 1\n"));
}

}  // namespace
}  // namespace kvnode
