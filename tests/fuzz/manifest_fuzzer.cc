// libFuzzer target over everything a manifest goes through before it runs: loading (YAML into
// the schema), defaulting, admission, the volume layout and the converter. Invariants, each a
// crash when broken: nothing crashes or trips ASan/UBSan; defaulting is idempotent; whatever
// admission allows and the converter accepts is well-formed XML 1.0 (no control characters,
// valid UTF-8) with one <domain> whose name is the VMI's.
//
// Pure: admission gets a PathResolver that never touches the filesystem.
//
// Known and skipped: Debian 12's yaml-cpp 0.7.0 never returns from YAML::LoadAll on some
// malformed streams (a lone ",", "\"a\",", "! ,"), producing empty documents until memory
// runs out (jbeder/yaml-cpp#1040, fixed upstream by #1319 after 0.8.0). LoadManifests calls
// LoadAll, so until the loader guards against it such an input would hang here and stop the
// fuzzer from finding anything else; YamlCppLoadAllTerminates detects it and the input is
// skipped. The loader needs the same guard (or another YAML parser).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>
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
#include "yaml-cpp/eventhandler.h"
#include "yaml-cpp/exceptions.h"
#include "yaml-cpp/parser.h"

namespace kvnode {
namespace {

// Paths resolve to themselves: no symlinks, no I/O.
class IdentityResolver : public PathResolver {
 public:
  absl::StatusOr<std::string> Resolve(const std::string& path) const override { return path; }
};

class DiscardEvents : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

// False when yaml-cpp's document loop would not end: a real stream has fewer documents than
// bytes, the runaway one an endless supply of empty ones.
bool YamlCppLoadAllTerminates(absl::string_view text) {
  std::istringstream in{std::string(text)};
  YAML::Parser parser(in);
  DiscardEvents events;
  size_t documents = 0;
  try {
    while (parser.HandleNextDocument(events)) {
      if (++documents > text.size() + 1) return false;
    }
  } catch (const YAML::Exception&) {
    // A syntax error: LoadAll throws too, and LoadManifests reports it.
  }
  return true;
}

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
  if (!YamlCppLoadAllTerminates(text)) return;
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
