// Devices other than disks: interfaces (tap attachments), controllers, the serial console and
// guest agent channel, inputs, graphics, watchdog, memory balloon, RNG and the panic device,
// after KubeVirt's converter (pkg/virt-launcher/virtwrap/converter/
// network/configurator.go, compute/*.go).
//
// Internal to launcher/converter. Pure; thread-compatible.
#ifndef KVNODE_LAUNCHER_CONVERTER_DEVICE_XML_H_
#define KVNODE_LAUNCHER_CONVERTER_DEVICE_XML_H_

#include "absl/status/status.h"
#include "launcher/converter/disk_xml.h"
#include "launcher/converter/xml_builder.h"
#include "pugixml.hpp"

namespace kvnode {
namespace converter {

// <controller>s: usb (none, or qemu-xhci when a usb disk or input needs one), virtio-serial
// (the guest agent channel) and virtio-scsi when a disk is on the scsi bus.
void AppendControllers(const ConvertContext& ctx, const DiskSummary& disks,
                       pugi::xml_node devices);

// One <interface type="ethernet"> per spec interface, on the tap its InterfaceAttachment names.
absl::Status AppendInterfaces(const ConvertContext& ctx, pugi::xml_node devices);

// Serial console (unless autoattachSerialConsole is false) and the guest agent channel, their
// sockets in the runtime dir: serial0 (with serial0.log) and guest-agent.
void AppendConsoleAndChannels(const ConvertContext& ctx, pugi::xml_node devices);

// Inputs, graphics and video, watchdog, memballoon, rng and panic.
absl::Status AppendOtherDevices(const ConvertContext& ctx, pugi::xml_node devices);

// True when an input device sits on the usb bus (so the usb controller must exist).
bool InputsNeedUsb(const ConvertContext& ctx);

}  // namespace converter
}  // namespace kvnode

#endif  // KVNODE_LAUNCHER_CONVERTER_DEVICE_XML_H_
