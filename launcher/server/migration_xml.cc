#include "launcher/server/migration_xml.h"

#include <map>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "agent/base/status_macros.h"
#include "launcher/converter/live_domain.h"
#include "pugixml.hpp"

namespace kvnode {
namespace {

bool Rewrite(const PathRewrites& rewrites, std::string* value) {
  for (const auto& [from, to] : rewrites) {
    if (from.empty()) continue;
    if (*value == from || absl::StartsWith(*value, from + "/")) {
      *value = to + value->substr(from.size());
      return true;
    }
  }
  return false;
}

void Walk(pugi::xml_node node, const PathRewrites& rewrites) {
  for (pugi::xml_attribute a : node.attributes()) {
    std::string v = a.value();
    if (Rewrite(rewrites, &v)) a.set_value(v.c_str());
  }
  for (pugi::xml_node child : node.children()) {
    if (child.type() == pugi::node_pcdata) {
      std::string v = child.value();
      if (Rewrite(rewrites, &v)) child.set_value(v.c_str());
    } else if (child.type() == pugi::node_element) {
      Walk(child, rewrites);
    }
  }
}

absl::Status Parse(const std::string& xml, pugi::xml_document* doc) {
  pugi::xml_parse_result parsed = doc->load_string(xml.c_str());
  if (!parsed) {
    return absl::InvalidArgumentError(std::string("domain XML: ") + parsed.description());
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> RewriteDomainPaths(const std::string& xml,
                                               const PathRewrites& rewrites) {
  pugi::xml_document doc;
  RETURN_IF_ERROR(Parse(xml, &doc));
  Walk(doc.document_element(), rewrites);
  std::ostringstream out;
  doc.save(out, "  ", pugi::format_default | pugi::format_no_declaration);
  return out.str();
}

absl::StatusOr<std::vector<std::string>> DiskTargetsOf(const std::string& xml,
                                                       const std::vector<std::string>& paths) {
  pugi::xml_document doc;
  RETURN_IF_ERROR(Parse(xml, &doc));
  std::vector<std::string> targets;
  for (const std::string& path : paths) {
    std::string dev;
    for (pugi::xml_node disk : doc.document_element().child("devices").children("disk")) {
      if (path == disk.child("source").attribute("file").value()) {
        dev = disk.child("target").attribute("dev").value();
      }
    }
    if (dev.empty()) {
      return absl::InvalidArgumentError("copy_disks: \"" + path + "\" is not a disk of the domain");
    }
    targets.push_back(dev);
  }
  return targets;
}

absl::StatusOr<PullBackupPlan> PlanPullBackup(
    const std::string& domain_xml, const std::vector<std::pair<std::string, std::string>>& targets,
    const std::string& socket, const std::string& scratch_dir) {
  pugi::xml_document doc;
  RETURN_IF_ERROR(Parse(domain_xml, &doc));
  std::map<std::string, std::string> wanted(targets.begin(), targets.end());
  PullBackupPlan plan;
  pugi::xml_document out;
  pugi::xml_node backup = out.append_child("domainbackup");
  backup.append_attribute("mode") = "pull";
  pugi::xml_node server = backup.append_child("server");
  server.append_attribute("transport") = "unix";
  server.append_attribute("socket") = socket.c_str();
  pugi::xml_node disks = backup.append_child("disks");
  for (pugi::xml_node disk : doc.document_element().child("devices").children("disk")) {
    std::string dev = disk.child("target").attribute("dev").value();
    if (dev.empty()) continue;
    pugi::xml_node source = disk.child("source");
    std::string path = source.attribute("file").value();
    if (path.empty()) path = source.attribute("dev").value();
    pugi::xml_node entry = disks.append_child("disk");
    entry.append_attribute("name") = dev.c_str();
    auto it = wanted.find(path);
    if (path.empty() || it == wanted.end()) {
      entry.append_attribute("backup") = "no";
      continue;
    }
    entry.append_attribute("backup") = "yes";
    entry.append_attribute("type") = "file";
    entry.append_attribute("exportname") = dev.c_str();
    const std::string scratch = scratch_dir + "/backup-" + dev + ".qcow2";
    entry.append_child("scratch").append_attribute("file") = scratch.c_str();
    plan.exports.emplace_back(dev, it->second);
    wanted.erase(it);
  }
  if (!wanted.empty()) {
    return absl::InvalidArgumentError("disks: \"" + wanted.begin()->first +
                                      "\" is not a disk of the domain");
  }
  std::ostringstream text;
  out.save(text, "  ", pugi::format_default | pugi::format_no_declaration);
  plan.xml = text.str();
  return plan;
}

namespace {

// "sda".."sdz", "sdaa".. as libvirt and KubeVirt name the disks of a bus.
std::string TargetName(const std::string& prefix, int index) {
  std::string letters;
  for (int i = index; i >= 0; i = i / 26 - 1) letters.insert(letters.begin(), 'a' + i % 26);
  return prefix + letters;
}

std::string VolumeOfAlias(pugi::xml_node disk) {
  std::string alias = disk.child("alias").attribute("name").value();
  return absl::StartsWith(alias, "ua-") ? alias.substr(3) : "";
}

std::string Print(pugi::xml_node node) {
  std::ostringstream out;
  node.print(out, "", pugi::format_raw);
  return out.str();
}

}  // namespace

absl::StatusOr<DiskChanges> HotplugDiskChanges(const std::string& desired_xml,
                                               const std::string& live_xml,
                                               const std::set<std::string>& hotplug,
                                               const std::set<std::string>& volumes) {
  pugi::xml_document desired, live;
  RETURN_IF_ERROR(Parse(desired_xml, &desired));
  RETURN_IF_ERROR(Parse(live_xml, &live));
  std::set<std::string> live_volumes, live_targets;
  DiskChanges changes;
  for (pugi::xml_node disk : live.document_element().child("devices").children("disk")) {
    live_targets.insert(disk.child("target").attribute("dev").value());
    const std::string volume = VolumeOfAlias(disk);
    if (volume.empty()) continue;
    live_volumes.insert(volume);
    if (!volumes.count(volume)) {
      changes.detach.push_back(Print(disk));
      changes.detach_names.push_back(volume);
    }
  }
  for (pugi::xml_node disk : desired.document_element().child("devices").children("disk")) {
    const std::string volume = VolumeOfAlias(disk);
    if (volume.empty() || !hotplug.count(volume) || live_volumes.count(volume)) continue;
    pugi::xml_node target = disk.child("target");
    std::string dev = target.attribute("dev").value();
    if (live_targets.count(dev)) {
      const std::string prefix = dev.substr(0, 2);
      int index = 0;
      while (live_targets.count(TargetName(prefix, index))) ++index;
      dev = TargetName(prefix, index);
      target.attribute("dev").set_value(dev.c_str());
      pugi::xml_node address = disk.child("address");
      if (address && std::string(address.attribute("type").value()) == "drive") {
        address.attribute("unit").set_value(index);
      }
    }
    live_targets.insert(dev);
    changes.attach.push_back(Print(disk));
    changes.attach_names.push_back(volume);
  }
  return changes;
}


absl::StatusOr<std::optional<uint32_t>> VcpuChange(const std::string& desired_xml,
                                                   const std::string& live_xml) {
  pugi::xml_document desired, live;
  RETURN_IF_ERROR(Parse(desired_xml, &desired));
  RETURN_IF_ERROR(Parse(live_xml, &live));
  const DomainVcpus want = VcpusOf(desired.document_element());
  const DomainVcpus have = VcpusOf(live.document_element());
  if (want.online == 0 || have.online == 0 || want.online == have.online) return std::nullopt;
  if (want.online > have.max) {
    return absl::FailedPreconditionError(
        absl::StrCat(want.online, " vCPUs asked for, but the running domain was defined with at "
                                   "most ",
                     have.max, " (spec.domain.cpu.maxSockets): only a restart gives it more"));
  }
  return want.online;
}


absl::StatusOr<std::optional<MemoryPlug>> VirtioMemChange(const std::string& live_xml,
                                                          int64_t pluggable_bytes,
                                                          int64_t requested_bytes,
                                                          int64_t block_bytes) {
  pugi::xml_document live;
  RETURN_IF_ERROR(Parse(live_xml, &live));
  if (requested_bytes < 0 || requested_bytes > pluggable_bytes) {
    return absl::FailedPreconditionError(absl::StrCat(
        "memory hotplug of ", requested_bytes, " bytes asked for, but the domain was defined "
        "with room for ", pluggable_bytes, " (spec.domain.memory.maxGuest): only a restart "
        "gives it more"));
  }
  pugi::xml_node device = VirtioMemOf(live.document_element());
  MemoryPlug plug;
  if (device) {
    pugi::xml_node requested = device.child("target").child("requested");
    if (MemorySizeBytes(requested) == requested_bytes) return std::nullopt;
    pugi::xml_document out;
    pugi::xml_node copy = out.append_copy(device);
    pugi::xml_node r = copy.child("target").child("requested");
    r.attribute("unit") ? r.attribute("unit").set_value("b")
                        : r.append_attribute("unit").set_value("b");
    r.text().set(static_cast<long long>(requested_bytes));
    plug.device_xml = Print(copy);
    return plug;
  }
  if (requested_bytes == 0) return std::nullopt;
  pugi::xml_document out;
  pugi::xml_node memory = out.append_child("memory");
  memory.append_attribute("model").set_value("virtio-mem");
  pugi::xml_node target = memory.append_child("target");
  auto bytes = [&](const char* name, int64_t value) {
    pugi::xml_node n = target.append_child(name);
    n.append_attribute("unit").set_value("b");
    n.text().set(static_cast<long long>(value));
  };
  bytes("size", pluggable_bytes);
  target.append_child("node").text().set(0);
  bytes("block", block_bytes);
  bytes("requested", requested_bytes);
  plug.attach = true;
  plug.device_xml = Print(memory);
  return plug;
}

absl::StatusOr<std::string> DomainTypeOf(const std::string& xml) {
  pugi::xml_document doc;
  RETURN_IF_ERROR(Parse(xml, &doc));
  return std::string(doc.document_element().attribute("type").value());
}

}  // namespace kvnode
