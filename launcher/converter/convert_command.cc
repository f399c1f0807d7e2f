#include "launcher/converter/convert_command.h"

#include <fstream>
#include <iostream>
#include <iterator>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "agent/base/state_layout.h"
#include "agent/manifest/admission.h"
#include "agent/manifest/defaults.h"
#include "agent/manifest/instancetype.h"
#include "agent/manifest/loader.h"
#include "launcher/converter/domain_options.h"
#include "launcher/converter/domain_xml.h"
#include "launcher/converter/unsupported.h"
#include "launcher/converter/vm_template.h"

namespace kvnode {
namespace {

constexpr char kUsage[] =
    "usage: kvnode-launcher convert [--virt-type kvm|qemu] [--state-dir DIR] [--uid UID]\n"
    "                               [--host-disk-root DIR]... FILE|-\n";

struct ConvertFlags {
  std::string file;
  std::string virt_type = "kvm";
  std::string state_dir = "/var/lib/kvnode";
  std::string uid;
  std::vector<std::string> host_disk_roots;
};

// Parses argv[1..]; "--flag value" and "--flag=value" both work. Returns false (with a message
// in `error`) on a usage error.
bool ParseFlags(int argc, char** argv, ConvertFlags* flags, std::string* error) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-" || !absl::StartsWith(arg, "-")) {
      if (!flags->file.empty()) {
        *error = "more than one FILE";
        return false;
      }
      flags->file = arg;
      continue;
    }
    std::string name = arg, value;
    bool inline_value = false;
    if (size_t eq = arg.find('='); eq != std::string::npos) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
      inline_value = true;
    }
    std::string* target = name == "--virt-type"  ? &flags->virt_type
                          : name == "--state-dir" ? &flags->state_dir
                          : name == "--uid"       ? &flags->uid
                                                  : nullptr;
    bool is_root = name == "--host-disk-root";
    if (target == nullptr && !is_root) {
      *error = "unknown flag " + name;
      return false;
    }
    if (!inline_value) {
      if (i + 1 >= argc) {
        *error = name + " needs a value";
        return false;
      }
      value = argv[++i];
    }
    if (is_root) {
      flags->host_disk_roots.push_back(value);
    } else {
      *target = value;
    }
  }
  if (flags->file.empty()) {
    *error = "FILE is required";
    return false;
  }
  if (flags->virt_type != "kvm" && flags->virt_type != "qemu") {
    *error = "--virt-type must be kvm or qemu";
    return false;
  }
  if (flags->state_dir.empty()) {
    *error = "--state-dir must not be empty";
    return false;
  }
  return true;
}

bool ReadInput(const std::string& file, std::string* text, std::string* error) {
  if (file == "-") {
    text->assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    return true;
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    *error = "cannot open";
    return false;
  }
  text->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  if (in.bad()) {
    *error = "read error";
    return false;
  }
  return true;
}

// Converter errors name VMI fields ("spec.domain..."); for a VM they are under its template.
std::string ForVm(absl::string_view message) {
  if (absl::StartsWith(message, "spec.")) {
    return absl::StrCat("spec.template.spec.", message.substr(5));
  }
  return std::string(message);
}

// One VMI to convert, with how to name its problems.
struct Conversion {
  kvnode::v1::VirtualMachineInstance vmi;
  bool from_vm = false;
  std::string prefix;  // "FILE: document N: "
};

void PrintReview(const AdmissionReview& review, const std::string& prefix, std::ostream& err) {
  for (const auto& w : review.warnings) err << prefix << "Warning: " << w << "\n";
  for (const auto& e : review.errors.errors()) err << prefix << e.ToString() << "\n";
}

// Defaults and admits one loaded object; returns false (after printing why) when refused.
bool Prepare(LoadedObject& obj, const std::vector<LoadedObject>& file, const NodeLimits& limits,
             const std::string& prefix, std::vector<Conversion>* out, std::ostream& err) {
  Conversion c;
  c.prefix = prefix;
  AdmissionReview review;
  if (obj.kind == "VirtualMachineInstance") {
    c.vmi = static_cast<const kvnode::v1::VirtualMachineInstance&>(*obj.object);
    ApplyVmiDefaults(&c.vmi);
    review = AdmitVmi(c.vmi, limits, *PathResolver::Real());
  } else if (obj.kind == "VirtualMachine") {
    auto vm = static_cast<const kvnode::v1::VirtualMachine&>(*obj.object);
    review = AdmitVmOffline(&vm, file, limits, *PathResolver::Real());
    c.vmi = VmiFromVmTemplate(vm);
    c.from_vm = true;
  } else if (AdmitInstancetypeObject(&obj, &review)) {
    PrintReview(review, prefix, err);  // what VMs in the file name: nothing to run itself
    return review.allowed();
  } else {
    return true;  // PVCs, DataVolumes: nothing to run
  }
  PrintReview(review, prefix, err);
  if (!review.allowed()) return false;
  out->push_back(std::move(c));
  return true;
}

}  // namespace

NodeLimits NodeLimitsOfThisMachine(std::vector<std::string> host_disk_roots) {
  NodeLimits limits;
  std::ifstream meminfo("/proc/meminfo");
  std::string line;
  while (std::getline(meminfo, line)) {
    absl::string_view rest = line;
    if (!absl::ConsumePrefix(&rest, "MemTotal:")) continue;
    rest = absl::StripAsciiWhitespace(rest);
    absl::ConsumeSuffix(&rest, "kB");
    int64_t kib = 0;
    if (absl::SimpleAtoi(absl::StripAsciiWhitespace(rest), &kib)) limits.memory_bytes = kib * 1024;
    break;
  }
  limits.cpus = static_cast<int>(std::thread::hardware_concurrency());
  limits.host_disk_roots = std::move(host_disk_roots);
  return limits;
}

int RunConvertCommand(int argc, char** argv, std::ostream& out, std::ostream& err) {
  ConvertFlags flags;
  std::string error;
  if (!ParseFlags(argc, argv, &flags, &error)) {
    err << "convert: " << error << "\n" << kUsage;
    return 2;
  }
  std::string text;
  if (!ReadInput(flags.file, &text, &error)) {
    err << flags.file << ": " << error << "\n";
    return 1;
  }
  LoadResult loaded = LoadManifests(text, flags.file);
  for (const auto& e : loaded.errors) err << e << "\n";
  if (!loaded.ok()) return 1;

  // An offline conversion judges the manifest, not the machine it runs on: no CPU or memory
  // check (the handler holds a VMI's requests against its node).
  NodeLimits limits;
  limits.host_disk_roots = flags.host_disk_roots;
  std::vector<Conversion> conversions;
  bool refused = false;
  for (LoadedObject& obj : loaded.objects) {
    std::string prefix = absl::StrCat(flags.file, ": document ", obj.document, ": ");
    refused |= !Prepare(obj, loaded.objects, limits, prefix, &conversions, err);
  }
  if (refused) return 1;
  if (conversions.empty()) {
    err << flags.file << ": no VirtualMachine or VirtualMachineInstance\n";
    return 1;
  }
  // PersistentVolumeClaims in the input stand for the node's claims: Block ones are devices.
  std::vector<const kvnode::v1::PersistentVolumeClaim*> claims;
  for (const LoadedObject& obj : loaded.objects) {
    if (obj.kind == "PersistentVolumeClaim") {
      claims.push_back(static_cast<const kvnode::v1::PersistentVolumeClaim*>(obj.object.get()));
    }
  }
  const NodePaths node(flags.state_dir);
  std::string xml_out;
  for (Conversion& c : conversions) {
    auto* meta = c.vmi.mutable_metadata();
    if (!flags.uid.empty()) {
      meta->set_uid(flags.uid);
    } else if (meta->uid().empty()) {
      meta->set_uid(kPlaceholderVmiUid);
    }
    auto options = BuildDomainOptions(c.vmi, node, flags.virt_type,
                                      ClaimLayout{BlockClaimNames(claims, meta->namespace_()), {}, {}});
    // Dedicated CPUs are the node's CPU manager's to give at the start: the preview's.
    *options.mutable_cpu_pinning() = PreviewCpuPinning(c.vmi.spec().domain().cpu());
    auto xml = ConvertToDomainXml(c.vmi, options);
    if (!xml.ok()) {
      std::string message(xml.status().message());
      err << c.prefix << (c.from_vm ? ForVm(message) : message) << "\n";
      refused = true;
      continue;
    }
    xml_out += *xml;
  }
  if (refused) return 1;
  out << xml_out;
  return 0;
}

}  // namespace kvnode
