// The preference half of instancetype.h (KubeVirt's pkg/instancetype/preference): its preferred
// values applied into what a VMI spec leaves unset, and the topology it prefers, which the
// instancetype's vCPUs are laid out in. Used by instancetype.cc's expansion; callers outside
// agent/manifest use instancetype.h.
//
// Pure. Thread-safe.
#ifndef KVNODE_AGENT_MANIFEST_PREFERENCE_H_
#define KVNODE_AGENT_MANIFEST_PREFERENCE_H_

#include <cstdint>
#include <string>

#include "kvnode/v1/instancetype.pb.h"
#include "kvnode/v1/kubevirt.pb.h"

namespace kvnode {

// "sockets" (the default), "cores", "threads", "spread" or "any"; the deprecated spellings
// ("preferCores") read as the new ones (GetPreferredTopology). `p` may be null.
std::string PreferredTopology(const kvnode::v1::VirtualMachinePreferenceSpec* p);

// Spread's ratio (2 by default) and what it spreads across (SocketsCores by default).
void SpreadOptions(const kvnode::v1::VirtualMachinePreferenceSpec& p, uint32_t* ratio,
                   std::string* across);

// ApplyAutoAttachPreferences: before the default pod interface is added.
void ApplyAutoAttachPreferences(const kvnode::v1::DevicePreferences& p,
                                kvnode::v1::Devices* devices);

// Every preferred value into what `spec` (and `meta`'s annotations) leaves unset.
void ApplyPreferenceSpec(const kvnode::v1::VirtualMachinePreferenceSpec& p,
                         kvnode::v1::VirtualMachineInstanceSpec* spec,
                         kvnode::v1::ObjectMeta* meta);

}  // namespace kvnode

#endif  // KVNODE_AGENT_MANIFEST_PREFERENCE_H_
