// The p-th percentile (0..1) of a sample, nearest rank; 0 for an empty one. For the benchmark
// commands' tables.
#ifndef KVNODE_TESTS_BENCH_PERCENTILE_H_
#define KVNODE_TESTS_BENCH_PERCENTILE_H_

#include <algorithm>
#include <vector>

namespace kvnode {

inline double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t idx = static_cast<size_t>(p * (v.size() - 1) + 0.5);
  return v[std::min(idx, v.size() - 1)];
}

}  // namespace kvnode

#endif  // KVNODE_TESTS_BENCH_PERCENTILE_H_
