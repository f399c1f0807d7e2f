// The fields in which two messages of one type differ, named by their KubeVirt JSON paths
// ("spec.template.spec.domain.memory.guest"), with the values before and after. Used for the
// RestartRequired message (which fields changed since the running VMI was made) and for what
// `kvctl apply --dry-run` would change.
//
// Pure. Thread-compatible.
#ifndef KVNODE_AGENT_CONTROLLER_FIELD_DIFF_H_
#define KVNODE_AGENT_CONTROLLER_FIELD_DIFF_H_

#include <string>
#include <vector>

#include "google/protobuf/message.h"

namespace kvnode {

struct FieldChange {
  std::string path;
  std::string before;  // "<unset>" when absent; scalars as text, messages as compact JSON
  std::string after;

  std::string ToString() const { return path + ": " + before + " -> " + after; }
};

// Leaf-most differences: a field set on one side only is reported whole; list elements are
// compared by index, map entries by key. `a` and `b` must have the same type.
std::vector<FieldChange> DiffMessages(const google::protobuf::Message& a,
                                      const google::protobuf::Message& b,
                                      const std::string& path);

}  // namespace kvnode

#endif  // KVNODE_AGENT_CONTROLLER_FIELD_DIFF_H_
