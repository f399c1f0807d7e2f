#include "tests/golden/golden_corpus.h"

#include <dirent.h>
#include <stdio.h>

#include <algorithm>
#include <fstream>
#include <iterator>

#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_cat.h"
#include "agent/base/state_layout.h"
#include "agent/manifest/defaults.h"
#include "agent/manifest/instancetype.h"
#include "agent/manifest/loader.h"
#include "launcher/converter/domain_options.h"
#include "launcher/converter/domain_xml.h"
#include "launcher/converter/vm_template.h"

namespace kvnode {

std::vector<std::string> GoldenNames(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return names;
  while (struct dirent* e = readdir(d)) {
    absl::string_view name = e->d_name;
    if (absl::ConsumeSuffix(&name, ".yaml")) names.emplace_back(name);
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

absl::StatusOr<std::string> ReadTextFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError("cannot open " + path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

absl::Status WriteTextFile(const std::string& path, const std::string& content) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << content;
    if (!out) return absl::InternalError("cannot write " + tmp);
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) return absl::InternalError("cannot rename " + tmp);
  return absl::OkStatus();
}

absl::StatusOr<std::string> ConvertGolden(absl::string_view yaml, absl::string_view source,
                                          absl::string_view virt_type) {
  LoadResult loaded = LoadManifests(yaml, source);
  if (!loaded.ok()) return loaded.status();
  std::vector<const kvnode::v1::PersistentVolumeClaim*> claims;
  const LoadedObject* vm_or_vmi = nullptr;
  for (const LoadedObject& obj : loaded.objects) {
    if (obj.kind == "PersistentVolumeClaim") {
      claims.push_back(static_cast<const kvnode::v1::PersistentVolumeClaim*>(obj.object.get()));
    } else if (obj.kind != "VirtualMachine" && obj.kind != "VirtualMachineInstance") {
      continue;  // instancetypes and preferences that the VM names
    } else if (vm_or_vmi == nullptr) {
      vm_or_vmi = &obj;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(source, ": more than one VM or VMI"));
    }
  }
  if (vm_or_vmi == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": no VM or VMI"));
  }
  const LoadedObject& obj = *vm_or_vmi;
  kvnode::v1::VirtualMachineInstance vmi;
  if (obj.kind == "VirtualMachine") {
    auto vm = static_cast<const kvnode::v1::VirtualMachine&>(*obj.object);
    ApplyVmDefaults(&vm);
    FieldErrors expansion;
    if (NamesInstancetype(vm.spec()) && !ExpandVmFromFile(&vm, loaded.objects, &expansion)) {
      return expansion.ToStatus(absl::StrCat(source, ": "));
    }
    vmi = VmiFromVmTemplate(vm);
    vmi.mutable_metadata()->set_uid(vm.metadata().uid());
  } else if (obj.kind == "VirtualMachineInstance") {
    vmi = static_cast<const kvnode::v1::VirtualMachineInstance&>(*obj.object);
    ApplyVmiDefaults(&vmi);
  } else {
    return absl::InvalidArgumentError(absl::StrCat(source, ": not a VM or VMI: ", obj.kind));
  }
  if (vmi.metadata().uid().empty()) vmi.mutable_metadata()->set_uid(kPlaceholderVmiUid);
  kvnode::v1::DomainOptions options = BuildDomainOptions(
      vmi, NodePaths(kGoldenStateDir), virt_type,
      ClaimLayout{BlockClaimNames(claims, vmi.metadata().namespace_()), {}, {}});
  *options.mutable_cpu_pinning() = PreviewCpuPinning(vmi.spec().domain().cpu());
  return ConvertToDomainXml(vmi, options);
}

}  // namespace kvnode
