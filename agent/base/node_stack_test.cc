#include "agent/base/node_stack.h"

#include "gtest/gtest.h"

namespace kvnode {
namespace {

TEST(NodeStack, RoundTrips) {
  NodeStack s{11'003'000, 10'000'002, std::nullopt};
  EXPECT_EQ(SerializeNodeStack(s), "libvirt 11.3.0\nqemu 10.0.2\n");
  auto back = ParseNodeStack(SerializeNodeStack(s));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->libvirt, 11'003'000u);
  EXPECT_EQ(back->qemu, 10'000'002u);
  EXPECT_EQ(DescribeNodeStack(*back), "libvirt 11.3.0, QEMU 10.0.2");
  EXPECT_EQ(FormatVersion(9'000'000), "9.0.0");
  EXPECT_EQ(FormatVersion(7'002'022), "7.2.22");
}

TEST(NodeStack, CarriesTheHypervFeaturesLibvirtOffers) {
  NodeStack s{11'003'000, 10'000'002, std::set<std::string>{"vendor_id", "spinlocks"}};
  EXPECT_EQ(SerializeNodeStack(s), "libvirt 11.3.0\nqemu 10.0.2\nhyperv spinlocks vendor_id\n");
  auto back = ParseNodeStack(SerializeNodeStack(s));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->hyperv, s.hyperv);
  // None offered is not the same as not known.
  s.hyperv.emplace();
  back = ParseNodeStack(SerializeNodeStack(s));
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_TRUE(back->hyperv.has_value());
  EXPECT_TRUE(back->hyperv->empty());
  back = ParseNodeStack("libvirt 9.0.0\nqemu 7.2.22\n");
  ASSERT_TRUE(back.ok());
  EXPECT_FALSE(back->hyperv.has_value());
}

TEST(NodeStack, RefusesWhatItCannotRead) {
  EXPECT_EQ(ParseNodeStack("libvirt 9.0.0\n").status().message(), "no qemu version");
  EXPECT_EQ(ParseNodeStack("qemu 7.2.22\n").status().message(), "no libvirt version");
  EXPECT_EQ(ParseNodeStack("libvirt 9.0\nqemu 7.2.22\n").status().message(),
            "line 1: \"libvirt 9.0\" is not \"libvirt|qemu X.Y.Z\" or \"hyperv FEATURE...\"");
  EXPECT_EQ(ParseNodeStack("libvirt 9.0.0\nxen 4.17.0\n").status().message(),
            "line 2: \"xen 4.17.0\" is not \"libvirt|qemu X.Y.Z\" or \"hyperv FEATURE...\"");
  EXPECT_FALSE(ParseNodeStack("libvirt 9.1000.0\nqemu 7.2.22\n").ok());
  EXPECT_FALSE(ParseNodeStack("libvirt -9.0.0\nqemu 7.2.22\n").ok());
  EXPECT_FALSE(ParseNodeStack("").ok());
}

}  // namespace
}  // namespace kvnode
