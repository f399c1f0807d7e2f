// Shared pieces of the converter (domain_xml.cc, disk_xml.cc, device_xml.cc): the inputs of one
// conversion and small pugixml helpers, so that every element is written the same way.
//
// Internal to launcher/converter. Pure; thread-compatible (one ConvertContext per conversion).
#ifndef KVNODE_LAUNCHER_CONVERTER_XML_BUILDER_H_
#define KVNODE_LAUNCHER_CONVERTER_XML_BUILDER_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "kvnode/v1/kubevirt.pb.h"
#include "kvnode/v1/launcher.pb.h"
#include "pugixml.hpp"

namespace kvnode {
namespace converter {

// Appends <name/> to `parent`.
inline pugi::xml_node Child(pugi::xml_node parent, const char* name) {
  return parent.append_child(name);
}

// Appends `text` as the content of `node`; returns `node`.
inline pugi::xml_node SetText(pugi::xml_node node, absl::string_view text) {
  node.append_child(pugi::node_pcdata).set_value(std::string(text).c_str());
  return node;
}

// Appends <name>text</name> to `parent`.
inline pugi::xml_node TextChild(pugi::xml_node parent, const char* name, absl::string_view text) {
  return SetText(parent.append_child(name), text);
}

// Adds name="value" to `node` and returns `node` (a handle), so calls chain:
// Attr(Attr(Child(devices, "target"), "dev", "tap0"), "managed", "no").
inline pugi::xml_node Attr(pugi::xml_node node, const char* name, absl::string_view value) {
  node.append_attribute(name).set_value(std::string(value).c_str());
  return node;
}
inline pugi::xml_node Attr(pugi::xml_node node, const char* name, const char* value) {
  node.append_attribute(name).set_value(value);
  return node;
}
inline pugi::xml_node Attr(pugi::xml_node node, const char* name, const std::string& value) {
  node.append_attribute(name).set_value(value.c_str());
  return node;
}
inline pugi::xml_node Attr(pugi::xml_node node, const char* name, int64_t value) {
  return Attr(node, name, absl::StrCat(value));
}
inline pugi::xml_node Attr(pugi::xml_node node, const char* name, uint64_t value) {
  return Attr(node, name, absl::StrCat(value));
}
inline pugi::xml_node Attr(pugi::xml_node node, const char* name, int32_t value) {
  return Attr(node, name, absl::StrCat(value));
}
inline pugi::xml_node Attr(pugi::xml_node node, const char* name, uint32_t value) {
  return Attr(node, name, absl::StrCat(value));
}

inline const char* OnOff(bool on) { return on ? "on" : "off"; }
inline const char* YesNo(bool yes) { return yes ? "yes" : "no"; }

// The inputs of one conversion and what is derived from them once.
struct ConvertContext {
  ConvertContext(const kvnode::v1::VirtualMachineInstance& vmi_in,
                 const kvnode::v1::DomainOptions& options_in)
      : vmi(vmi_in), options(options_in) {}

  const kvnode::v1::VirtualMachineInstance& vmi;
  const kvnode::v1::DomainOptions& options;

  const kvnode::v1::DomainSpec& domain() const { return vmi.spec().domain(); }
  const kvnode::v1::Devices& devices() const { return vmi.spec().domain().devices(); }

  // virtio-non-transitional, or virtio-transitional with useVirtioTransitional.
  const char* virtio_model() const {
    return devices().use_virtio_transitional() ? "virtio-transitional" : "virtio-non-transitional";
  }
  bool tcg() const { return options.virt_type() == "qemu"; }
  uint32_t vcpus() const {
    const auto& cpu = domain().cpu();
    return cpu.sockets() * cpu.cores() * cpu.threads();
  }
};

// Field paths of the VMI spec, for errors ("spec.domain.devices.disks[0].lun.bus").
inline std::string DiskPath(int i) { return absl::StrCat("spec.domain.devices.disks[", i, "]"); }
inline std::string InterfacePath(int i) {
  return absl::StrCat("spec.domain.devices.interfaces[", i, "]");
}

inline absl::Status FieldError(absl::StatusCode code, absl::string_view path,
                               absl::string_view message) {
  return absl::Status(code, absl::StrCat(path, ": ", message));
}
inline absl::Status Invalid(absl::string_view path, absl::string_view message) {
  return FieldError(absl::StatusCode::kInvalidArgument, path, message);
}
inline absl::Status Unsupported(absl::string_view path, absl::string_view message) {
  return FieldError(absl::StatusCode::kUnimplemented, path, message);
}

}  // namespace converter
}  // namespace kvnode

#endif  // KVNODE_LAUNCHER_CONVERTER_XML_BUILDER_H_
