// libvirt is the judge: every golden manifest, converted as the launcher would (domain type kvm
// where this daemon offers it, else qemu/TCG), is defined in a real session libvirtd run as
// the unprivileged kvnode user, read back, and undefined (with its NVRAM). Define does not open
// disk images, so the images need not exist; the OVMF firmware files must.
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "launcher/converter/domain_options.h"
#include "libvirt/libvirt.h"
#include "libvirt/virterror.h"
#include "pugixml.hpp"
#include "tests/golden/golden_corpus.h"
#include "tests/golden/session_libvirtd.h"
#include "tests/testing/prerequisite.h"

namespace kvnode {
namespace {

const std::string kDir = KVNODE_GOLDEN_DIR;

std::string LastLibvirtError() {
  const char* m = virGetLastErrorMessage();
  return m != nullptr ? m : "unknown libvirt error";
}

// A libvirt connection, closed on scope exit.
struct Connection {
  virConnectPtr ptr = nullptr;
  ~Connection() {
    if (ptr != nullptr) virConnectClose(ptr);
  }
};

struct Domain {
  virDomainPtr ptr = nullptr;
  ~Domain() {
    if (ptr != nullptr) virDomainFree(ptr);
  }
};

// kvm when the daemon can run KVM guests (it can open /dev/kvm), else qemu (TCG).
std::string VirtType(virConnectPtr conn) {
  char* caps = virConnectGetCapabilities(conn);
  if (caps == nullptr) return "qemu";
  pugi::xml_document doc;
  doc.load_string(caps);
  free(caps);
  return doc.select_node("//guest[arch/@name='x86_64']/arch/domain[@type='kvm']") ? "kvm" : "qemu";
}

class LibvirtDefineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (access("/usr/sbin/libvirtd", X_OK) != 0) return;
    auto d = SessionLibvirtd::Start({});
    if (!d.ok()) {
      start_error_ = new std::string(d.status().ToString());
      return;
    }
    daemon_ = d->release();
  }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
    delete start_error_;
    start_error_ = nullptr;
  }

  void SetUp() override {
    if (access("/usr/sbin/libvirtd", X_OK) != 0) KVNODE_SKIP_UNLESS_CI("no /usr/sbin/libvirtd");
    ASSERT_EQ(start_error_, nullptr) << *start_error_;
    ASSERT_NE(daemon_, nullptr);
    conn_.ptr = virConnectOpen(daemon_->uri().c_str());
    ASSERT_NE(conn_.ptr, nullptr) << daemon_->uri() << ": " << LastLibvirtError() << "\n"
                                  << daemon_->log();
  }

  static SessionLibvirtd* daemon_;
  static std::string* start_error_;
  Connection conn_;
};

SessionLibvirtd* LibvirtDefineTest::daemon_ = nullptr;
std::string* LibvirtDefineTest::start_error_ = nullptr;

TEST_F(LibvirtDefineTest, FirmwareFilesExist) {
  for (const char* f : {kOvmfCode, kOvmfCodeSecboot, kOvmfVars, kOvmfVarsSecboot}) {
    EXPECT_EQ(access(f, R_OK), 0) << f;
  }
}

TEST_F(LibvirtDefineTest, DaemonRunsUnprivileged) {
  if (geteuid() != 0) KVNODE_SKIP_UNLESS_CI("not root: the daemon runs as the current user");
  std::ifstream status(absl::StrCat("/proc/", daemon_->pid(), "/status"));
  std::string line, uid_line;
  while (std::getline(status, line)) {
    if (absl::StartsWith(line, "Uid:")) uid_line = line;
  }
  EXPECT_THAT(uid_line, ::testing::Not(::testing::HasSubstr("\t0\t")));
}

TEST_F(LibvirtDefineTest, LibvirtAcceptsEveryGolden) {
  const std::string virt_type = VirtType(conn_.ptr);
  std::vector<std::string> names = GoldenNames(kDir);
  ASSERT_FALSE(names.empty());
  for (const std::string& name : names) {
    SCOPED_TRACE(name + " (domain type " + virt_type + ")");
    auto yaml = ReadTextFile(kDir + "/" + name + ".yaml");
    ASSERT_TRUE(yaml.ok()) << yaml.status();
    auto xml = ConvertGolden(*yaml, name + ".yaml", virt_type);
    ASSERT_TRUE(xml.ok()) << xml.status();
    Domain dom;
    dom.ptr = virDomainDefineXML(conn_.ptr, xml->c_str());
    EXPECT_NE(dom.ptr, nullptr) << "define refused: " << LastLibvirtError() << "\n" << *xml;
    if (dom.ptr == nullptr) continue;
    char* back = virDomainGetXMLDesc(dom.ptr, VIR_DOMAIN_XML_INACTIVE);
    EXPECT_NE(back, nullptr) << LastLibvirtError();
    if (back != nullptr && std::getenv("KVNODE_GOLDEN_DUMP") != nullptr) {
      std::cout << "---- " << name << " as libvirt keeps it ----\n" << back << "\n";
    }
    free(back);
    EXPECT_EQ(virDomainUndefineFlags(dom.ptr, VIR_DOMAIN_UNDEFINE_NVRAM), 0)
        << "undefine: " << LastLibvirtError();
  }
}

}  // namespace
}  // namespace kvnode
