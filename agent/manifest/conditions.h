// Kubernetes-style status conditions (type, status, reason, message, lastProbeTime,
// lastTransitionTime) as every kind here keeps them: VMIs, DataVolumes, DataSources,
// DataImportCrons. lastTransitionTime moves only when status changes.
//
// Pure: the clock is an argument. Thread-compatible.
#ifndef KVNODE_AGENT_MANIFEST_CONDITIONS_H_
#define KVNODE_AGENT_MANIFEST_CONDITIONS_H_

#include <string>

#include "absl/time/time.h"
#include "google/protobuf/repeated_field.h"
#include "kvnode/v1/meta.pb.h"

namespace kvnode {

using Conditions = google::protobuf::RepeatedPtrField<kvnode::v1::Condition>;

// Sets a condition; lastTransitionTime changes only when status changes, lastProbeTime when
// anything does. Returns true when anything changed.
bool SetCondition(Conditions* conditions, const std::string& type, const std::string& status,
                  const std::string& reason, const std::string& message, absl::Time now);
bool RemoveCondition(Conditions* conditions, const std::string& type);
const kvnode::v1::Condition* FindCondition(const Conditions& conditions, const std::string& type);

}  // namespace kvnode

#endif  // KVNODE_AGENT_MANIFEST_CONDITIONS_H_
