#include "tests/integration/network_fixture.h"

#include <algorithm>

#include "spdlog/spdlog.h"

namespace kvnode {
namespace nettest {
namespace {

class NodeEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    ASSERT_EQ(geteuid(), 0u) << "the network integration tests need root";
    // KVNODE_NETWORK_DEBUG=1 logs the time of every setup step.
    if (getenv("KVNODE_NETWORK_DEBUG") != nullptr) spdlog::set_level(spdlog::level::debug);
    auto node = nettest::NodeNamespace::Enter();
    ASSERT_TRUE(node.ok()) << node.status();
    node_ = std::move(*node);
  }
  void TearDown() override { node_.reset(); }

 private:
  std::unique_ptr<nettest::NodeNamespace> node_;
};

::testing::Environment* const kNodeEnvironment =
    ::testing::AddGlobalTestEnvironment(new NodeEnvironment);

}  // namespace

std::string WithoutCounters(const std::string& ruleset) {
  std::string out;
  for (absl::string_view line : absl::StrSplit(ruleset, '\n')) {
    std::string l(line.substr(0, line.find(" # handle")));
    size_t at;
    while ((at = l.find("packets ")) != std::string::npos) {
      size_t end = l.find(" bytes ", at);
      if (end == std::string::npos) break;
      end = l.find(' ', end + 7);
      l.erase(at, end == std::string::npos ? std::string::npos : end - at + 1);
    }
    absl::StrAppend(&out, absl::StripAsciiWhitespace(l), "\n");
  }
  return out;
}

std::string Summary(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  return absl::StrFormat("min %.1f ms, median %.1f ms, max %.1f ms (n=%d)", ms.front(),
                         ms[ms.size() / 2], ms.back(), ms.size());
}

}  // namespace nettest
}  // namespace kvnode
