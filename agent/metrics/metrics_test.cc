#include "agent/metrics/metrics.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvnode {
namespace {

using ::testing::HasSubstr;

TEST(MetricsTest, CountersHistogramsAndCollectorsRenderInTextFormat) {
  MetricsRegistry r;
  r.DeclareCounter("kvnode_things_total", "Things.");
  r.Increment("kvnode_things_total", {{"kind", "a\"b"}});
  r.Increment("kvnode_things_total", {{"kind", "a\"b"}}, 2);
  r.DeclareHistogram("kvnode_start_seconds", "Starts.", {0.5, 1});
  r.Observe("kvnode_start_seconds", {}, 0.3);
  r.Observe("kvnode_start_seconds", {}, 0.7);
  r.Observe("kvnode_start_seconds", {}, 3);
  r.AddCollector([] {
    return std::vector<CollectedFamily>{
        {"kubevirt_vmi_phase_count", "VMIs per phase.", "gauge", {{{{"phase", "running"}}, 2}}}};
  });
  std::string text = r.Render();
  EXPECT_THAT(text, HasSubstr("# TYPE kvnode_things_total counter\n"));
  EXPECT_THAT(text, HasSubstr("kvnode_things_total{kind=\"a\\\"b\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("kvnode_start_seconds_bucket{le=\"0.5\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("kvnode_start_seconds_bucket{le=\"1\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("kvnode_start_seconds_bucket{le=\"+Inf\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("kvnode_start_seconds_count 3\n"));
  EXPECT_THAT(text, HasSubstr("kubevirt_vmi_phase_count{phase=\"running\"} 2\n"));
}

}  // namespace
}  // namespace kvnode
