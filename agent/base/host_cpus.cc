#include "agent/base/host_cpus.h"

#include <dirent.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace kvnode {

absl::StatusOr<std::vector<int>> ParseCpuList(absl::string_view text) {
  std::set<int> cpus;
  text = absl::StripAsciiWhitespace(text);
  if (text.empty()) return std::vector<int>();
  // The kernel allows no more CPUs than this (NR_CPUS); a larger id is a typo.
  constexpr int kMaxCpu = 8191;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    std::pair<absl::string_view, absl::string_view> range = absl::StrSplit(part, '-');
    int first = 0, last = 0;
    const size_t dashes = std::count(part.begin(), part.end(), '-');
    const bool is_range = dashes == 1;
    if (!absl::SimpleAtoi(range.first, &first) ||
        (is_range ? !absl::SimpleAtoi(range.second, &last) : (last = first, false)) ||
        first < 0 || last < first || last > kMaxCpu ||
        dashes > 1 || absl::StripAsciiWhitespace(part) != part || part.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("\"", part, "\" is not a CPU or a range of CPUs (as in \"0-3,8\")"));
    }
    for (int c = first; c <= last; ++c) cpus.insert(c);
  }
  return std::vector<int>(cpus.begin(), cpus.end());
}

std::string FormatCpuList(std::vector<int> cpus) {
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += j == i ? absl::StrCat(cpus[i]) : absl::StrCat(cpus[i], "-", cpus[j]);
    i = j + 1;
  }
  return out;
}

std::vector<int> CpusWithout(const std::vector<int>& a, const std::vector<int>& b) {
  std::vector<int> out;
  std::set_difference(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

namespace {

std::optional<std::string> ReadSysfs(const std::string& path) {
  std::ifstream f(path);
  if (!f) return std::nullopt;
  std::stringstream s;
  s << f.rdbuf();
  return std::string(absl::StripAsciiWhitespace(s.str()));
}

int ReadSysfsInt(const std::string& path, int fallback) {
  std::optional<std::string> text = ReadSysfs(path);
  int value;
  return text.has_value() && absl::SimpleAtoi(*text, &value) ? value : fallback;
}

}  // namespace

absl::StatusOr<std::vector<HostCpu>> ReadHostCpus(const std::string& sysfs) {
  const std::string cpu_dir = sysfs + "/devices/system/cpu";
  std::optional<std::string> online = ReadSysfs(cpu_dir + "/online");
  if (!online.has_value()) return absl::NotFoundError("cannot read " + cpu_dir + "/online");
  auto ids = ParseCpuList(*online);
  if (!ids.ok()) return absl::InvalidArgumentError(cpu_dir + "/online: " + ids.status().ToString());
  // NUMA nodes: each node's cpulist (a machine without NUMA support has none: all on node 0).
  std::map<int, int> node_of;
  const std::string node_dir = sysfs + "/devices/system/node";
  if (DIR* d = opendir(node_dir.c_str())) {
    while (struct dirent* e = readdir(d)) {
      int node;
      absl::string_view name = e->d_name;
      if (!absl::ConsumePrefix(&name, "node") || !absl::SimpleAtoi(name, &node)) continue;
      std::optional<std::string> list = ReadSysfs(absl::StrCat(node_dir, "/", e->d_name, "/cpulist"));
      auto cpus = list.has_value() ? ParseCpuList(*list) : absl::StatusOr<std::vector<int>>();
      if (!cpus.ok()) continue;
      for (int c : *cpus) node_of[c] = node;
    }
    closedir(d);
  }
  std::vector<HostCpu> out;
  for (int id : *ids) {
    const std::string topology = absl::StrCat(cpu_dir, "/cpu", id, "/topology/");
    int package = ReadSysfsInt(topology + "physical_package_id", 0);
    int core = ReadSysfsInt(topology + "core_id", id);
    out.push_back({id, package * 100000 + core, node_of.count(id) ? node_of[id] : 0});
  }
  return out;
}

absl::StatusOr<std::vector<NumaNode>> ReadNumaNodes(const std::string& sysfs) {
  const std::string node_dir = sysfs + "/devices/system/node";
  std::optional<std::string> online = ReadSysfs(node_dir + "/online");
  if (!online.has_value()) return std::vector<NumaNode>();
  auto ids = ParseCpuList(*online);  // the same list format
  if (!ids.ok()) return absl::InvalidArgumentError(node_dir + "/online: " + ids.status().ToString());
  std::vector<NumaNode> out;
  for (int id : *ids) {
    const std::string dir = absl::StrCat(node_dir, "/node", id);
    NumaNode node;
    node.id = id;
    std::optional<std::string> list = ReadSysfs(dir + "/cpulist");
    auto cpus = list.has_value() ? ParseCpuList(*list)
                                 : absl::NotFoundError("cannot read " + dir + "/cpulist");
    if (!cpus.ok()) return absl::InvalidArgumentError(dir + "/cpulist: " + cpus.status().ToString());
    node.cpus = *cpus;
    // The kernel lists the distance to each online node, in their order.
    std::vector<std::string> values =
        absl::StrSplit(ReadSysfs(dir + "/distance").value_or(""), ' ', absl::SkipEmpty());
    for (size_t i = 0; i < values.size() && i < ids->size(); ++i) {
      int value;
      if (!absl::SimpleAtoi(values[i], &value)) {
        return absl::InvalidArgumentError(
            absl::StrCat(dir, "/distance: \"", values[i], "\" is not a distance"));
      }
      node.distances.emplace_back((*ids)[i], value);
    }
    out.push_back(std::move(node));
  }
  return out;
}

absl::StatusOr<std::vector<int>> VcpusInMask(absl::string_view mask, int vcpus) {
  std::vector<int> out;
  for (int i = 0; i < vcpus; ++i) out.push_back(i);
  if (mask.empty()) return out;
  // A vCPU id: digits alone (no sign, no space).
  auto id = [](absl::string_view text, int* value) {
    return !text.empty() && std::all_of(text.begin(), text.end(), absl::ascii_isdigit) &&
           absl::SimpleAtoi(text, value);
  };
  std::map<int, bool> named;  // vCPU → enabled; an exclusion always wins
  for (absl::string_view raw : absl::StrSplit(mask, ',')) {
    absl::string_view part = absl::StripAsciiWhitespace(raw);
    const bool exclude = absl::ConsumePrefix(&part, "^");
    std::vector<absl::string_view> ends = absl::StrSplit(part, '-');
    int first = 0, last = 0;
    const bool ok = ends.size() == 1   ? id(ends[0], &first) && (last = first, true)
                    : ends.size() == 2 ? !exclude && id(ends[0], &first) && id(ends[1], &last)
                                       : false;
    if (!ok) {
      return absl::InvalidArgumentError(
          absl::StrCat("invalid mask value \"", raw, "\" in \"", mask, "\" (as in \"0-3,^1\")"));
    }
    if (first > last) {
      return absl::InvalidArgumentError(absl::StrCat("invalid mask range \"", part, "\""));
    }
    for (int v = first; v <= std::min(last, vcpus - 1); ++v) {
      if (exclude) {
        named[v] = false;
      } else {
        named.emplace(v, true);
      }
    }
  }
  std::vector<int> enabled;
  for (const auto& [v, on] : named) {
    if (on) enabled.push_back(v);
  }
  return enabled;
}

std::vector<int> CpuIds(const std::vector<HostCpu>& cpus) {
  std::vector<int> ids;
  for (const HostCpu& c : cpus) ids.push_back(c.id);
  return ids;
}

std::optional<std::vector<int>> TakeCpus(const std::vector<HostCpu>& topology,
                                        const std::vector<int>& free, int count) {
  if (count <= 0) return std::vector<int>();
  const std::set<int> free_set(free.begin(), free.end());
  // node → its free CPUs; core → its CPUs (free or not).
  std::map<int, std::vector<const HostCpu*>> free_by_node;
  std::map<int, int> core_size;
  for (const HostCpu& c : topology) {
    ++core_size[c.core];
    if (free_set.count(c.id)) free_by_node[c.node].push_back(&c);
  }
  size_t total = 0;
  for (const auto& [node, cpus] : free_by_node) total += cpus.size();
  if (total < static_cast<size_t>(count)) return std::nullopt;
  // The nodes to take from: the smallest one that fits (the lowest id of equals), else all,
  // the largest first.
  std::vector<int> nodes;
  int best = -1;
  for (const auto& [node, cpus] : free_by_node) {
    nodes.push_back(node);
    if (cpus.size() >= static_cast<size_t>(count) &&
        (best < 0 || cpus.size() < free_by_node[best].size())) {
      best = node;
    }
  }
  if (best >= 0) {
    nodes = {best};
  } else {
    std::stable_sort(nodes.begin(), nodes.end(), [&](int a, int b) {
      return free_by_node[a].size() > free_by_node[b].size();
    });
  }
  std::vector<int> taken;
  for (int node : nodes) {
    const std::vector<const HostCpu*>& cpus = free_by_node[node];
    std::map<int, std::vector<int>> free_by_core;
    for (const HostCpu* c : cpus) free_by_core[c->core].push_back(c->id);
    // Whole free cores first (in the order of their lowest CPU), then what is left.
    std::vector<std::vector<int>> whole, partial;
    for (auto& [core, ids] : free_by_core) {
      (static_cast<int>(ids.size()) == core_size[core] ? whole : partial).push_back(ids);
    }
    auto by_first = [](const std::vector<int>& a, const std::vector<int>& b) { return a[0] < b[0]; };
    std::sort(whole.begin(), whole.end(), by_first);
    std::sort(partial.begin(), partial.end(), by_first);
    const size_t want = static_cast<size_t>(count);
    // Whole cores that fit in what is still wanted, then cores of which some threads are
    // taken, then single threads of what is left.
    for (const auto* group : {&whole, &partial}) {
      for (const std::vector<int>& core : *group) {
        if (taken.size() + core.size() <= want) taken.insert(taken.end(), core.begin(), core.end());
      }
    }
    for (const auto* group : {&partial, &whole}) {
      for (const std::vector<int>& core : *group) {
        for (int id : core) {
          if (taken.size() < want && std::find(taken.begin(), taken.end(), id) == taken.end()) {
            taken.push_back(id);
          }
        }
      }
    }
    if (taken.size() == static_cast<size_t>(count)) break;
  }
  std::sort(taken.begin(), taken.end());
  return taken;
}

}  // namespace kvnode
