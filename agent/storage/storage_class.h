// The node's storage classes: what a PersistentVolumeClaim's storageClassName may name, and the
// reclaim policy its volume gets. Every node has the embedded class "local" (file volumes under
// the state dir, reclaimPolicy Delete, the default); `--storage-class SPEC` (repeatable) and
// `--storage-class-file FILE` (one SPEC a line, # comments) add more:
//
//   name=local-retain,reclaimPolicy=Retain[,default=true][,allowVolumeExpansion=true]
//   name=local-block,volumeMode=Block,devices=/dev/loop7|/dev/loop8[,reclaimPolicy=Retain]
//   name=shared,shared=true,path=/mnt/kvnode-shared[,default=true]
//
// A Filesystem class (the default volumeMode) is like Kubernetes' local-path provisioner: it
// makes a sparse raw disk.img in the claim's dir. A Block class is like the local static
// provisioner: it owns the block devices listed in `devices` (absolute paths separated by
// `|`, each in at most one class), and a claim with volumeMode Block binds one free device of
// at least its size. volumeBindingMode is Immediate for both. Whether each device really is a
// block device (symlinks resolved) is checked by the handler at startup and again on binding
// (block_device.h): parsing here does no I/O.
//
// A shared class (shared=true, Filesystem only) keeps its claims' dirs under `path`
// (<path>/<ns>/<claim>/disk.img) instead of <state>/volumes: a directory every node of the
// cluster sees (NFS or the like), so a VMI whose claims are all of shared classes is
// live-migratable. `path` is required for a shared class and refused for any other; a Block
// class cannot be shared (its devices are node-local).
//
// allowVolumeExpansion (false by default, as in Kubernetes) lets a re-applied claim of a
// Filesystem class ask for more storage: its disk.img grows. A Block class cannot have it (a
// device's size is fixed).
//
// Pure: parsing only (the file is read by the caller). Thread-compatible.
#ifndef KVNODE_AGENT_STORAGE_STORAGE_CLASS_H_
#define KVNODE_AGENT_STORAGE_STORAGE_CLASS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "agent/base/state_layout.h"

namespace kvnode {

inline constexpr char kReclaimDelete[] = "Delete";
inline constexpr char kReclaimRetain[] = "Retain";
inline constexpr char kDefaultStorageClass[] = "local";

inline constexpr char kVolumeModeFilesystem[] = "Filesystem";
inline constexpr char kVolumeModeBlock[] = "Block";

struct StorageClass {
  std::string name;
  std::string reclaim_policy = kReclaimDelete;
  bool is_default = false;
  std::string volume_mode = kVolumeModeFilesystem;
  std::vector<std::string> devices;  // a Block class's devices, as configured
  bool allow_volume_expansion = false;
  bool shared = false;
  std::string path;  // a shared class's dir, which every node sees; "" for any other
};

// Where the dir of claim `ns`/`claim` of class `sc` lives: the dir `base` and the components
// below it (for OpenDirChain, which follows no link below `base`).
struct ClaimDirChain {
  std::string base;
  std::vector<std::string> names;
  std::string path() const;  // base/names[0]/names[1]/...
};
// <path>/<ns>/<claim> for a shared class, <state>/volumes/<ns>/<claim> for any other.
ClaimDirChain ClaimDirOf(const StorageClass& sc, const NodePaths& node, absl::string_view ns,
                         absl::string_view claim);

class StorageClasses {
 public:
  // Only the embedded "local" class.
  StorageClasses();

  // Adds a class from SPEC; `where` names the origin in errors ("--storage-class",
  // "classes.conf:3"). A class of an existing name replaces it (so "local" can be Retain).
  absl::Status Add(absl::string_view spec, absl::string_view where);
  // Adds every non-empty, non-comment line of a config file's text.
  absl::Status AddFile(absl::string_view text, absl::string_view file_name);

  // The class `name` names, or the default class for "".
  absl::StatusOr<StorageClass> Find(absl::string_view name) const;
  const std::vector<StorageClass>& all() const { return classes_; }

 private:
  std::vector<StorageClass> classes_;
};

}  // namespace kvnode

#endif  // KVNODE_AGENT_STORAGE_STORAGE_CLASS_H_
