#include "agent/metrics/metrics.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace kvnode {
namespace {

std::string Escape(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string Number(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return absl::StrFormat("%.0f", v);
  return absl::StrFormat("%.9g", v);
}

}  // namespace

std::string FormatSeries(const std::string& name, const Labels& labels) {
  if (labels.empty()) return name;
  std::string out = name + "{";
  for (size_t i = 0; i < labels.size(); ++i) {
    if (i > 0) out += ",";
    absl::StrAppend(&out, labels[i].first, "=\"", Escape(labels[i].second), "\"");
  }
  return out + "}";
}

MetricsRegistry* MetricsRegistry::Default() {
  static auto* r = new MetricsRegistry;
  return r;
}

void MetricsRegistry::DeclareCounter(const std::string& name, const std::string& help) {
  absl::MutexLock lock(&mu_);
  auto& f = families_[name];
  f.help = help;
  f.type = "counter";
}

void MetricsRegistry::Increment(const std::string& name, const Labels& labels, double by) {
  absl::MutexLock lock(&mu_);
  auto it = families_.find(name);
  if (it == families_.end() || it->second.type != "counter") return;
  it->second.counters[labels] += by;
}

void MetricsRegistry::DeclareHistogram(const std::string& name, const std::string& help,
                                       std::vector<double> bounds) {
  absl::MutexLock lock(&mu_);
  auto& f = families_[name];
  f.help = help;
  f.type = "histogram";
  f.bounds = std::move(bounds);
}

void MetricsRegistry::Observe(const std::string& name, const Labels& labels, double value) {
  absl::MutexLock lock(&mu_);
  auto it = families_.find(name);
  if (it == families_.end() || it->second.type != "histogram") return;
  Family& f = it->second;
  Histogram& h = f.histograms[labels];
  if (h.buckets.empty()) h.buckets.assign(f.bounds.size(), 0);
  for (size_t i = 0; i < f.bounds.size(); ++i) {
    if (value <= f.bounds[i]) ++h.buckets[i];
  }
  h.sum += value;
  ++h.count;
}

void MetricsRegistry::AddCollector(std::function<std::vector<CollectedFamily>()> collector) {
  absl::MutexLock lock(&mu_);
  collectors_.push_back(std::move(collector));
}

std::string MetricsRegistry::Render() {
  std::vector<std::function<std::vector<CollectedFamily>()>> collectors;
  std::string out;
  {
    absl::MutexLock lock(&mu_);
    collectors = collectors_;
    for (const auto& [name, f] : families_) {
      absl::StrAppend(&out, "# HELP ", name, " ", f.help, "\n# TYPE ", name, " ", f.type, "\n");
      if (f.type == "counter") {
        for (const auto& [labels, v] : f.counters) {
          absl::StrAppend(&out, FormatSeries(name, labels), " ", Number(v), "\n");
        }
        continue;
      }
      for (const auto& [labels, h] : f.histograms) {
        for (size_t i = 0; i < f.bounds.size(); ++i) {
          Labels l = labels;
          l.push_back({"le", Number(f.bounds[i])});
          absl::StrAppend(&out, FormatSeries(name + "_bucket", l), " ", h.buckets[i], "\n");
        }
        Labels inf = labels;
        inf.push_back({"le", "+Inf"});
        absl::StrAppend(&out, FormatSeries(name + "_bucket", inf), " ", h.count, "\n");
        absl::StrAppend(&out, FormatSeries(name + "_sum", labels), " ", Number(h.sum), "\n");
        absl::StrAppend(&out, FormatSeries(name + "_count", labels), " ", h.count, "\n");
      }
    }
  }
  // Collected families, merged by name so each HELP/TYPE appears once.
  std::map<std::string, CollectedFamily> merged;
  for (const auto& c : collectors) {
    for (auto& f : c()) {
      auto& m = merged[f.name];
      m.name = f.name;
      m.help = f.help;
      m.type = f.type;
      m.samples.insert(m.samples.end(), f.samples.begin(), f.samples.end());
    }
  }
  for (const auto& [name, f] : merged) {
    absl::StrAppend(&out, "# HELP ", name, " ", f.help, "\n# TYPE ", name, " ", f.type, "\n");
    for (const auto& s : f.samples) {
      absl::StrAppend(&out, FormatSeries(name, s.labels), " ", Number(s.value), "\n");
    }
  }
  return out;
}

}  // namespace kvnode
