// libFuzzer target over everything a manifest goes through before it runs: loading (YAML into
// the schema), defaulting, admission, the volume layout and the converter. Invariants, each a
// crash when broken: nothing crashes or trips ASan/UBSan; defaulting is idempotent; whatever
// admission allows and the converter accepts is well-formed XML 1.0 (no control characters,
// valid UTF-8) with one <domain> whose name is the VMI's.
//
// Pure: admission gets a PathResolver that never touches the filesystem.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/string_view.h"
#include "agent/base/state_layout.h"
#include "agent/manifest/admission.h"
#include "agent/manifest/defaults.h"
#include "agent/manifest/loader.h"
#include "google/protobuf/util/message_differencer.h"
#include "launcher/converter/domain_options.h"
#include "launcher/converter/domain_xml.h"
#include "launcher/converter/vm_template.h"
#include "launcher/converter/xml_text.h"
#include "pugixml.hpp"

namespace kvnode {
namespace {

// Paths resolve to themselves: no symlinks, no I/O.
class IdentityResolver : public PathResolver {
 public:
  absl::StatusOr<std::string> Resolve(const std::string& path) const override { return path; }
};

[[noreturn]] void Fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "invariant broken: %s\n%s\n", what, detail.c_str());
  std::abort();
}

template <typename T>
void CheckIdempotent(const T& once, void (*apply)(T*)) {
  T twice = once;
  apply(&twice);
  // MessageDifferencer, not serialized bytes: map order in the wire format is unspecified.
  std::string diff;
  google::protobuf::util::MessageDifferencer differ;
  differ.ReportDifferencesToString(&diff);
  if (!differ.Compare(once, twice)) {
    Fail("defaulting twice changes the object", diff + "\n" + once.DebugString());
  }
}

void ConvertAndCheck(kvnode::v1::VirtualMachineInstance vmi) {
  if (vmi.metadata().uid().empty()) vmi.mutable_metadata()->set_uid(kPlaceholderVmiUid);
  for (const char* virt_type : {"kvm", "qemu"}) {
    auto options = BuildDomainOptions(vmi, NodePaths("/var/lib/kvnode"), virt_type);
    auto xml = ConvertToDomainXml(vmi, options);
    if (!xml.ok()) continue;
    pugi::xml_document doc;
    if (!doc.load_string(xml->c_str())) Fail("converter output does not parse", *xml);
    // Also what libxml2 would refuse: control characters (pugixml writes them as &#NN;) and
    // invalid UTF-8.
    if (!converter::CheckXmlText(doc).ok()) Fail("converter output is not XML 1.0 text", *xml);
    if (doc.child("domain").child("name").text().get() != DomainName(vmi.metadata())) {
      Fail("domain name is not the VMI's", *xml);
    }
  }
}

void FuzzOne(absl::string_view text) {
  static const IdentityResolver* resolver = new IdentityResolver;
  NodeLimits limits;
  limits.memory_bytes = int64_t{64} << 30;
  limits.cpus = 16;
  limits.host_disk_roots = {"/srv"};
  LoadResult loaded = LoadManifests(text, "fuzz.yaml");
  for (const LoadedObject& obj : loaded.objects) {
    if (obj.kind == "VirtualMachineInstance") {
      auto vmi = static_cast<const kvnode::v1::VirtualMachineInstance&>(*obj.object);
      ApplyVmiDefaults(&vmi);
      CheckIdempotent(vmi, &ApplyVmiDefaults);
      if (AdmitVmi(vmi, limits, *resolver).allowed()) ConvertAndCheck(vmi);
    } else if (obj.kind == "VirtualMachine") {
      auto vm = static_cast<const kvnode::v1::VirtualMachine&>(*obj.object);
      ApplyVmDefaults(&vm);
      CheckIdempotent(vm, &ApplyVmDefaults);
      if (AdmitVm(vm, limits, *resolver).allowed()) ConvertAndCheck(VmiFromVmTemplate(vm));
    }
  }
}

}  // namespace
}  // namespace kvnode

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kvnode::FuzzOne(absl::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
