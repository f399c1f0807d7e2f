// The cost of accepting one manifest, as the handler (and `kvnode-launcher convert`) pays it:
// load the YAML into the schema, default, admit, lay out the volumes and convert to domain XML,
// for the app01 VirtualMachine (tests/golden/app01.yaml). Target: under 50 µs per manifest.
// The stages are also measured alone, to show where the time goes.
#include <string>

#include "agent/base/state_layout.h"
#include "agent/manifest/admission.h"
#include "agent/manifest/defaults.h"
#include "agent/manifest/loader.h"
#include "agent/manifest/yaml_document.h"
#include "benchmark/benchmark.h"
#include "launcher/converter/domain_options.h"
#include "launcher/converter/domain_xml.h"
#include "launcher/converter/vm_template.h"

namespace kvnode {
namespace {

// tests/golden/app01.yaml without its comments (agent/manifest/loader_test.cc's kApp01).
constexpr char kApp01[] = R"(apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: app01
  namespace: apps
spec:
  runStrategy: Halted
  template:
    metadata:
      labels:
        app: app01
    spec:
      domain:
        cpu:
          cores: 2
        resources:
          requests:
            memory: 4Gi
        devices:
          disks:
            - name: rootdisk
              disk:
                bus: virtio
          interfaces:
            - name: default
              masquerade: {}
      networks:
        - name: default
          pod: {}
      volumes:
        - name: rootdisk
          persistentVolumeClaim:
            claimName: app01-root
)";

NodeLimits Limits() {
  NodeLimits limits;
  limits.memory_bytes = int64_t{64} << 30;
  limits.cpus = 16;
  return limits;
}

kvnode::v1::VirtualMachine LoadApp01() {
  LoadResult r = LoadManifests(kApp01, "app01.yaml");
  return static_cast<const kvnode::v1::VirtualMachine&>(*r.objects.at(0).object);
}

kvnode::v1::VirtualMachineInstance Vmi(const kvnode::v1::VirtualMachine& vm) {
  kvnode::v1::VirtualMachineInstance vmi = VmiFromVmTemplate(vm);
  vmi.mutable_metadata()->set_uid(kPlaceholderVmiUid);
  return vmi;
}

void BM_LoadAdmitConvertApp01(benchmark::State& state) {
  const NodeLimits limits = Limits();
  const NodePaths node("/var/lib/kvnode");
  for (auto _ : state) {
    LoadResult r = LoadManifests(kApp01, "app01.yaml");
    auto vm = static_cast<const kvnode::v1::VirtualMachine&>(*r.objects.at(0).object);
    ApplyVmDefaults(&vm);
    AdmissionReview review = AdmitVm(vm, limits, *PathResolver::Real());
    if (!review.allowed()) state.SkipWithError("app01 refused by admission");
    kvnode::v1::VirtualMachineInstance vmi = Vmi(vm);
    auto xml = ConvertToDomainXml(vmi, BuildDomainOptions(vmi, node, "kvm"));
    if (!xml.ok()) state.SkipWithError("app01 did not convert");
    benchmark::DoNotOptimize(xml);
  }
}
BENCHMARK(BM_LoadAdmitConvertApp01);

void BM_Load(benchmark::State& state) {
  for (auto _ : state) {
    LoadResult r = LoadManifests(kApp01, "app01.yaml");
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(BM_Load);

// The YAML parse alone (libyaml into the document tree), which LoadManifests starts with.
void BM_YamlParseOnly(benchmark::State& state) {
  for (auto _ : state) {
    absl::StatusOr<YamlStream> stream = YamlStream::Parse(kApp01);
    if (!stream.ok()) state.SkipWithError("app01 did not parse");
    benchmark::DoNotOptimize(stream);
  }
}
BENCHMARK(BM_YamlParseOnly);

void BM_DefaultAndAdmit(benchmark::State& state) {
  const kvnode::v1::VirtualMachine loaded = LoadApp01();
  const NodeLimits limits = Limits();
  for (auto _ : state) {
    kvnode::v1::VirtualMachine vm = loaded;
    ApplyVmDefaults(&vm);
    AdmissionReview review = AdmitVm(vm, limits, *PathResolver::Real());
    benchmark::DoNotOptimize(review);
  }
}
BENCHMARK(BM_DefaultAndAdmit);

void BM_BuildOptionsAndConvert(benchmark::State& state) {
  kvnode::v1::VirtualMachine vm = LoadApp01();
  ApplyVmDefaults(&vm);
  const kvnode::v1::VirtualMachineInstance vmi = Vmi(vm);
  const NodePaths node("/var/lib/kvnode");
  for (auto _ : state) {
    auto xml = ConvertToDomainXml(vmi, BuildDomainOptions(vmi, node, "kvm"));
    benchmark::DoNotOptimize(xml);
  }
}
BENCHMARK(BM_BuildOptionsAndConvert);

}  // namespace
}  // namespace kvnode

BENCHMARK_MAIN();
