// Prometheus metrics for the handler: counters and histograms that code updates as things
// happen, and collectors that produce gauges at scrape time (phase counts, per-VMI stats from
// the launchers). Text exposition format 0.0.4, checked by `promtool check metrics`.
//
// Thread-safe.
#ifndef KVNODE_AGENT_METRICS_METRICS_H_
#define KVNODE_AGENT_METRICS_METRICS_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace kvnode {

using Labels = std::vector<std::pair<std::string, std::string>>;

// One sample a collector produces at scrape time.
struct Sample {
  Labels labels;
  double value = 0;
};

struct CollectedFamily {
  std::string name, help, type;  // type: gauge or counter
  std::vector<Sample> samples;
};

class MetricsRegistry {
 public:
  // Counters: name must end in _total.
  void DeclareCounter(const std::string& name, const std::string& help);
  void Increment(const std::string& name, const Labels& labels, double by = 1);
  // Histograms with fixed upper bounds (seconds).
  void DeclareHistogram(const std::string& name, const std::string& help,
                        std::vector<double> bounds);
  void Observe(const std::string& name, const Labels& labels, double value);
  // Collectors run at every scrape, outside the registry lock.
  void AddCollector(std::function<std::vector<CollectedFamily>()> collector);

  std::string Render();

  // The handler's process-wide registry.
  static MetricsRegistry* Default();

 private:
  struct Histogram {
    std::vector<uint64_t> buckets;  // cumulative at render time
    double sum = 0;
    uint64_t count = 0;
  };
  struct Family {
    std::string help, type;
    std::vector<double> bounds;
    std::map<Labels, double> counters;
    std::map<Labels, Histogram> histograms;
  };
  absl::Mutex mu_;
  std::map<std::string, Family> families_ ABSL_GUARDED_BY(mu_);
  std::vector<std::function<std::vector<CollectedFamily>()>> collectors_ ABSL_GUARDED_BY(mu_);
};

// `name{a="x",b="y"}` with Prometheus escaping.
std::string FormatSeries(const std::string& name, const Labels& labels);

}  // namespace kvnode

#endif  // KVNODE_AGENT_METRICS_METRICS_H_
