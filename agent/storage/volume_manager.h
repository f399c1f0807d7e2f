// Node-local volumes: the PersistentVolumeClaim objects (in the Store, kind
// PersistentVolumeClaim) and their disks under <state>/volumes/<ns>/<claim>/disk.img (a file,
// or for a claim of a Block class a device node of the device it is bound to, recorded by a
// PersistentVolume) — or, for a claim of a shared class, under <class path>/<ns>/<claim>/, a
// directory every node sees (ClaimDirOf in storage_class.h) —, uploads
// into new claims and into the containerDisk image cache (<state>/images/<key>/disk.img), and
// the per-VMI disks a VMI needs before its launcher starts (overlays, emptyDisks).
//
// Ownership on disk: the volume dirs are root's (0711), so no unprivileged user can plant a
// link in them (a shared class's own path is the admin's: CheckSharedPath at startup wants it
// a root-owned directory no one else may write); each disk.img is root's (0600) while no VMI
// uses it, and belongs to the identity of the VMI that runs on it (0660) from that VMI's start
// (PrepareVmi) until its end (ReturnToRoot): one VMI never reaches another's disks. Whatever
// is made inside a VMI's dir is made by qemu-img running as that VMI's identity; images from
// outside are inspected and converted by qemu-img as the importer's identity. Nothing here
// follows a symlink found in a claim's dir.
//
// Thread-safe: one mutex serializes decisions about claims (apply, delete, upload start,
// binding); slow work (qemu-img) runs outside it on the caller's thread.
#ifndef KVNODE_AGENT_STORAGE_VOLUME_MANAGER_H_
#define KVNODE_AGENT_STORAGE_VOLUME_MANAGER_H_

#include <functional>
#include <map>
#include <set>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "agent/base/clock.h"
#include "agent/base/state_layout.h"
#include "agent/base/user_fs.h"
#include "agent/storage/vm_volumes.h"
#include "agent/storage/block_device_pool.h"
#include "agent/storage/config_maps.h"
#include "agent/storage/data_volume_importer.h"
#include "agent/storage/data_source_rules.h"
#include "agent/storage/image_puller.h"
#include "agent/storage/secret_store.h"
#include "agent/storage/storage_class.h"
#include "agent/storage/vmi_disks.h"
#include "agent/storage/volume_collector.h"
#include "agent/store/store.h"
#include "kvnode/v1/kubevirt.pb.h"
#include "launcher/converter/domain_options.h"
#include "kvnode/v1/storage.pb.h"
#include "kvnode/v1/storage_service.pb.h"

namespace kvnode {

struct VolumeConfig {
  std::string state_dir;
  // Runs qemu-img and curl on images from outside (DataVolume imports, uploads): the launcher
  // id range's importer, never root, never a VMI's.
  FsIdentity importer;
  StorageClasses classes;
  // --host-disk-root: hostDisks are resolved beneath these when a VMI starts (host_path.h).
  std::vector<std::string> host_disk_roots;
  // Who owns a claim's disk.img while no VMI uses it: root (tests without root: themselves).
  uid_t rest_uid = 0;
  gid_t rest_gid = 0;
  // containerDisk images from registries (image_puller.h): --insecure-registry,
  // --registry-mirror, --registry-ca, --image-cache-size.
  RegistryOptions registries;
  int64_t image_cache_limit_bytes = 0;
};

// The reason carried by `status`, or "" when it carries none.
std::string VolumeFailureReason(const absl::Status& status);

class VolumeUpload;

// The claims a VMI's volumes name (persistentVolumeClaim, dataVolume, ephemeral).
std::vector<std::string> ClaimsOf(const kvnode::v1::VirtualMachineInstance& vmi);

// A VM's backend storage claim (persistent-state-for-<vm>, labelled so): a dir of files
// (nvram/, swtpm/), not a disk.img (agent/manifest/backend_storage.h).
bool IsBackendStorageClaim(const kvnode::v1::PersistentVolumeClaim& pvc);

class VolumeManager : public VmVolumes,
                      public OwnedVolumes,
                      public ImportTargets,
                      public VmiVolumeSources {
 public:
  VolumeManager(VolumeConfig config, Store* store, Clock* clock);
  ~VolumeManager() override;

  // Who uses what: the live VMIs of the node (set once by the handler, before serving).
  using VmiLister = std::function<std::vector<kvnode::v1::VirtualMachineInstance>()>;
  void SetVmiLister(VmiLister lister);

  // Reconciles stored claims with the disks: a Bound claim whose disk.img is gone is Lost; an
  // upload that a crash interrupted is removed (its claim never became Bound).
  absl::Status Recover();

  // --- PersistentVolumeClaims ---
  struct ApplyResult {
    kvnode::v1::PersistentVolumeClaim pvc;
    std::string result;  // ADDED, MODIFIED, UNCHANGED
    std::vector<std::string> warnings;
  };
  absl::StatusOr<ApplyResult> ApplyPvc(kvnode::v1::PersistentVolumeClaim pvc, bool dry_run);
  absl::StatusOr<kvnode::v1::PVCView> GetPvc(const std::string& ns, const std::string& name);
  std::vector<kvnode::v1::PVCView> ListPvcs(const std::string& ns) override;
  // Refused while a live VMI uses the claim. Reclaim policy Delete removes the disk; Retain
  // keeps the claim's dir (renamed to <claim>.retained-<uid>). For a claim bound to a device,
  // Delete wipes the device's first MiB and frees it; Retain leaves its PersistentVolume
  // Released (block_volumes.cc). A claim of a shared class that this node adopted (a disk it
  // found, or a claim a migration brought) only loses its record here: its dir stays where it
  // is, since the node that made it (or another that uses it) still names it.
  absl::StatusOr<kvnode::v1::PVCView> DeletePvc(const std::string& ns, const std::string& name,
                                                bool dry_run) override;
  // OwnedVolumes: the owner reference to `owner_uid` removed from a DataVolume or claim.
  absl::Status Disown(const std::string& kind, const std::string& ns, const std::string& name,
                      const std::string& owner_uid) override;
  const StorageClasses& classes() const { return config_.classes; }

  // --- Devices of Block classes (block_volumes.cc) ---
  std::vector<kvnode::v1::PersistentVolume> ListPvs();
  // Refused while Bound; a Released or Failed volume is removed and its device can be bound
  // again (its data untouched: Retain means an admin decides), which may bind a Pending claim.
  absl::StatusOr<kvnode::v1::PersistentVolume> DeletePv(const std::string& name);
  // What the converter must know of the claims of namespace `ns`: those whose volumeMode is
  // Block (their disk.img is a device node) and the dirs of those of shared classes.
  ClaimLayout ClaimLayoutOf(const std::string& ns);

  // --- Shared classes and live migration ---
  // The storage class of each claim `vmi` names that the node stores, by claim name
  // (LiveMigratable asks whether a VMI's claims are all of shared classes).
  std::map<std::string, StorageClass> ClaimClasses(const kvnode::v1::VirtualMachineInstance& vmi);
  // A claim a migrating VMI names, as the source stores it, with its class's path there.
  struct MigratingClaim {
    kvnode::v1::PersistentVolumeClaim pvc;
    std::string class_path;
    // A claim of a node-local (not shared) Filesystem class is copied by block migration:
    // the size of its disk.img, and (on the source only) that file's path. 0 and "" otherwise.
    int64_t disk_bytes = 0;
    std::string image;
  };
  // Source: the stored claims the VMI names (ClaimsOf).
  std::vector<MigratingClaim> MigratingClaimsOf(const kvnode::v1::VirtualMachineInstance& vmi);
  // Target: records each claim of a shared class this node lacks as a claim of the same
  // class, with reclaimPolicy Retain and adopted "migration": deleting it here never touches
  // the data the source node still names. Fails (FailedPrecondition, naming `node`) unless
  // this node has a shared class of that name with the same path and the claim's disk is
  // there; a claim it already has must be of that class.
  // A claim of a node-local class (disk_bytes > 0) is made here, in this node's class of that
  // name (which must not be shared), with an empty sparse disk.img of that size for QEMU's
  // block migration to fill; annotated adopted "block-migration" and with the VMI's UID
  // (kBlockMigrationVmiAnnotation). A claim of that name already here is refused, unless it
  // is such a copy of this claim (same UID) that no live VMI uses (`in_use`: claim names of
  // namespace `ns` that live VMIs name): then it is made empty again and reused.
  // Returns the claims made for block migration: name → path of their disk.img.
  absl::StatusOr<std::map<std::string, std::string>> AdoptMigratingClaims(
      const std::string& ns, const std::string& vmi_uid,
      const std::vector<MigratingClaim>& claims, const std::string& node,
      const std::set<std::string>& in_use);
  // Target, after a migration that did not take the VMI: removes the claims made for it by
  // block migration (they hold a partial copy) and the backend storage made for it, when no
  // live VMI uses them.
  void DropCopiedClaims(const kvnode::v1::VirtualMachineInstance& vmi);
  // The dir of the backend storage of `vmi`'s VM on this node; "" when it needs none or has
  // none here yet. A migration's source moves its own dir to the target's in the domain XML.
  std::string BackendStorageDirOf(const kvnode::v1::VirtualMachineInstance& vmi);
  // KubeVirt's MigrationHandoff, the source's half: VM `vm` (UID `vm_uid`) left this node
  // with its VMI, whose target keeps the firmware state from now on; this node's store of it
  // (EFI variables, TPM secrets) is removed, its dir before its record, so that a crash
  // between the two leaves a record that the next call removes. OK when there is none; a
  // store of that name owned by another VM is left alone (one owned by nobody is taken as
  // this VM's: the VM's removal orphans its claims).
  absl::Status ReleaseBackendStorage(const std::string& ns, const std::string& vm,
                                     const std::string& vm_uid) override;
  SecretStore& secrets() { return secrets_; }
  ConfigMaps& config_maps() { return config_maps_; }

  // --- Deleting VMs (volume_gc.cc) ---
  // What deleting the VM would do to each of its volumes.
  absl::StatusOr<std::vector<kvnode::v1::VolumeReviewItem>> ReviewVmDeletion(
      const std::string& ns, const std::string& name, const std::string& propagation);
  // Starts the garbage collector (volume_collector.h) on this node's volumes: what a deleted
  // VM or DataVolume owned is deleted, or disowned when it went with propagation Orphan.
  // Stopped by the destructor.
  void StartCollector();

  // --- Snapshots and restores of claims (claim_snapshots.cc) ---
  // A claim as a snapshot needs it: its phase, mode and population, and the path of its
  // disk.img (NotFound when not stored).
  struct SnapshotClaim {
    kvnode::v1::PersistentVolumeClaim pvc;
    std::string image;
    bool block = false;
    bool populated = true;  // false while a DataVolume or an upload still fills it
  };
  absl::StatusOr<SnapshotClaim> ClaimForSnapshot(const std::string& ns, const std::string& name);
  // A restore's new claim (metadata and spec as given; annotated with `restore_key`), filled
  // with a copy of `image`: stored Pending first, Bound once its disk.img is the copy. A claim
  // of that name made by the same restore (same key) is filled again (a crash came between);
  // any other claim of that name is AlreadyExists.
  absl::Status RestoreNewClaim(kvnode::v1::PersistentVolumeClaim pvc, const std::string& image,
                               const std::string& restore_key);
  // InPlace: the claim's disk.img replaced by a copy of `image` in one rename (a crash leaves
  // the old data or the new, never a mix). Refused while a live VMI uses the claim, and for a
  // claim of a Block class.
  absl::Status RestoreClaimInPlace(const std::string& ns, const std::string& name,
                                   const std::string& image);
  // The firmware store (backend storage) of VM `vm`: its claim and its dir; NotFound when the
  // VM has none here.
  struct BackendStore {
    kvnode::v1::PersistentVolumeClaim pvc;
    std::string dir;
  };
  absl::StatusOr<BackendStore> BackendStorageOf(const std::string& ns, const std::string& vm);
  // A restore: the store of VM `vm` becomes a copy of the tree at `copy_dir` (what a snapshot
  // kept), taking the old store's place in one rename exchange (a crash leaves the old
  // contents or the restored ones, never a mix; a second call does it again). Its claim is made
  // (labelled for the VM, owned by nobody until AddClaimOwner) when the VM has none. Refused
  // while a live VMI uses the store.
  absl::Status RestoreBackendStorage(const std::string& ns, const std::string& vm,
                                     const std::string& copy_dir);
  // Adds `owner` to the claim's ownerReferences (a restored claim goes with its VM); nothing
  // when it is there already.
  absl::Status AddClaimOwner(const std::string& ns, const std::string& name,
                             const kvnode::v1::OwnerReference& owner);

  // --- DataVolumes (data_volumes.cc) ---
  struct ApplyDvResult {
    kvnode::v1::DataVolume dv;
    std::string result;  // ADDED, MODIFIED, UNCHANGED
  };
  // Creates the DataVolume and its claim (Pending until populated); the importer populates it.
  absl::StatusOr<ApplyDvResult> ApplyDataVolume(kvnode::v1::DataVolume dv, bool dry_run);
  absl::StatusOr<kvnode::v1::DataVolume> GetDataVolume(const std::string& ns,
                                                       const std::string& name) override;
  std::vector<kvnode::v1::DataVolume> ListDataVolumes(const std::string& ns) override;
  // Removes the DataVolume; the garbage collector then deletes the claim it owns.
  absl::StatusOr<kvnode::v1::DataVolume> DeleteDataVolume(const std::string& ns,
                                                          const std::string& name) override;
  // VmVolumes: the VM's dataVolumeTemplates as DataVolumes owned by it, and their state.
  VolumeFacts EnsureDataVolumes(const kvnode::v1::VirtualMachine& vm) override;
  absl::StatusOr<std::map<std::string, std::string>> ClaimLabels(const std::string& ns,
                                                                 const std::string& name) override;
  absl::StatusOr<kvnode::v1::DataVolume> DataVolumeNamed(const std::string& ns,
                                                         const std::string& name) override;
  // Starts the importer (data_volume_importer.h) on this node's DataVolumes: blank, http,
  // registry and clone sources, one at a time, failures retried with a growing delay. Stopped
  // by the destructor.
  void StartImporter();
  // ImportTargets: what an import does to the node.
  bool UpdateDv(const kvnode::v1::DataVolume& dv, const std::string& phase,
                const std::string& progress, const std::string& message) override;
  absl::Status ImportReady(const kvnode::v1::DataVolume& dv) override;
  absl::Status Populate(const kvnode::v1::DataVolume& dv) override;
  absl::Status BindPopulated(const kvnode::v1::DataVolume& dv) override;

  // --- Clone sources and DataSources (clone_sources.cc) ---
  // A DataSource's readiness now (its claim, the DataVolume filling it, the DataSource it
  // refers to).
  DataSourceVerdict EvaluateDataSource(const kvnode::v1::DataSource& ds);

  // --- Uploads (volume_upload.cc) ---
  // A DataVolume target must have an upload source and be UploadReady, one upload at a time;
  // a failed upload leaves it UploadReady.
  absl::StatusOr<std::unique_ptr<VolumeUpload>> BeginUpload(const kvnode::v1::UploadTarget& target);

  // --- The containerDisk image cache (image_puller.h) ---
  // Every cached image, with the live VMIs that run on it.
  std::vector<kvnode::v1::CachedImage> ListImages();
  // Removes the cached images no live VMI uses (kvctl image prune).
  std::vector<kvnode::v1::CachedImage> PruneImages(bool dry_run);
  // A registry source's image in the cache (pulled when the registry names a digest the cache
  // lacks; CDI pulls a registry source each time), waiting up to `wait`: a DataImportCron's
  // poll. Its image ID names the digest. While it pulls: the reason ContainerCreating.
  absl::StatusOr<CachedDisk> EnsureRegistryImage(
      const kvnode::v1::DataVolumeSourceRegistry& registry, const std::string& ns,
      absl::Duration wait);

  // --- A VMI's disks (vmi_volumes.cc) ---
  // Checks every volume of `vmi`, makes its per-VMI disks in the VMI's dir (which must exist)
  // as `id`, and hands its claims and hostDisks to `id` (the VMI's identity). An error carries
  // the condition reason (VolumeFailureReason): the VMI then waits in Pending and the handler
  // tries again.
  // `share_group`: the claims and hostDisks keep their group (a migration target's QEMU opens
  // them while the source's, whose group they have, may still reopen them: QEMU does when it
  // hands its disks over at the end of a migration).
  // A containerDisk runs on the image its VMI's status.launcher.containerDisks names when it
  // names one (a re-started launcher, a migration target: the same image by digest);
  // otherwise the image cache resolves it by its pull policy, pulling it when needed. Each
  // containerDisk's image is appended to `images` (for the VMI's status) and held for the VMI
  // (never pruned) until ReturnToRoot.
  absl::Status PrepareVmi(const kvnode::v1::VirtualMachineInstance& vmi, const FsIdentity& id,
                          bool share_group = false,
                          std::vector<kvnode::v1::ContainerDiskStatus>* images = nullptr);
  // The claims of `vmi`'s hotpluggable volumes handed to `id` (a volume plugged into the running
  // guest); an error carries the condition reason (VolumeFailureReason).
  absl::Status PrepareHotplugClaims(const kvnode::v1::VirtualMachineInstance& vmi,
                                    const FsIdentity& id);
  // The claims and hostDisks `vmi` names (when known), and every claim of the node, that `uid`
  // (an identity being given back) still owns become root's again (0600). An error when one
  // could not be: the identity must then stay held.
  absl::Status ReturnToRoot(const std::optional<kvnode::v1::VirtualMachineInstance>& vmi,
                            uid_t uid);
  // VmiVolumeSources: what VmiDisks asks of the node.
  absl::Status PrepareClaim(const std::string& ns, const std::string& claim, const FsIdentity& id,
                            bool share_group, std::string* image) override;
  absl::StatusOr<CachedDisk> HoldContainerDisk(const kvnode::v1::VirtualMachineInstance& vmi,
                                               const kvnode::v1::Volume& volume) override;
  absl::StatusOr<std::string> ReadSecret(const std::string& ns, const std::string& name,
                                         const std::string& key) override;
  // The VM's backend storage handed to the VMI's identity (its contents; the claim's dir stays
  // root's); EFI variables of another firmware removed. Nothing for a VMI that needs none.
  // On a migration target the store is made empty (its NVRAM from the firmware's template):
  // the migration stream carries the flash's contents, which QEMU writes into the target's
  // file once loaded, and the TPM's state blobs, which the target's swtpm keeps.
  absl::Status PrepareBackendStorage(const kvnode::v1::VirtualMachineInstance& vmi,
                                     const FsIdentity& id, bool migration_target) override
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  friend class VolumeUpload;

  absl::StatusOr<kvnode::v1::PersistentVolumeClaim> LoadPvcLocked(const std::string& ns,
                                                                  const std::string& name)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  kvnode::v1::PVCView ViewLocked(const kvnode::v1::PersistentVolumeClaim& pvc)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The class of a claim as this node has it configured; a claim whose class is no longer
  // configured is taken to be of a local Filesystem class (its dir under the state dir).
  StorageClass ClassOf(const kvnode::v1::PersistentVolumeClaim& pvc) const;
  // Where a claim's dir and its disk.img are (ClaimDirOf of its class).
  ClaimDirChain ClaimDir(const kvnode::v1::PersistentVolumeClaim& pvc) const;
  std::string ClaimImage(const kvnode::v1::PersistentVolumeClaim& pvc) const;
  // The dir and disk.img of a claim not stored yet: of the class `class_name` names ("" is
  // the default class).
  ClaimDirChain NewClaimDir(const std::string& class_name, const std::string& ns,
                            const std::string& claim) const;
  std::vector<std::string> UsersOf(const std::string& ns, const std::string& claim);
  // A claim record this node makes: apiVersion, kind, name, namespace, a new UID and now as its
  // creation time.
  kvnode::v1::PersistentVolumeClaim NewClaimRecord(const std::string& ns,
                                                   const std::string& name) const;
  // Makes the claim's dir and an empty sparse disk.img of its size, and marks it Bound.
  absl::Status ProvisionLocked(kvnode::v1::PersistentVolumeClaim* pvc)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Tries again to bind every Pending Block claim (a device was freed, or the handler started).
  void BindPendingLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The device of a deleted claim: wiped and freed (Delete; Pending claims are then bound) or
  // Released (Retain).
  absl::Status ReleaseDeviceLocked(const kvnode::v1::PersistentVolumeClaim& pvc)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A Bound PersistentVolume whose claim is gone (a crash between the two writes) is Released;
  // then Pending claims are bound.
  absl::Status RecoverDevicesLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A claim a VMI names but the store lacks, whose disk.img was put there by hand (in the
  // default class's dir): recorded as a Retain claim (kvnode did not make its data). NotFound
  // when there is no such disk.
  absl::StatusOr<kvnode::v1::PersistentVolumeClaim> AdoptLocked(const std::string& ns,
                                                                const std::string& name)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status AdoptMigratingClaimLocked(const std::string& ns, const MigratingClaim& claim,
                                         const std::string& node)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A node-local claim copied by block migration (AdoptMigratingClaims); returns its disk.img.
  absl::StatusOr<std::string> MakeCopiedClaimLocked(const std::string& ns,
                                                    const std::string& vmi_uid,
                                                    const MigratingClaim& claim,
                                                    const std::string& node,
                                                    const std::set<std::string>& in_use)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // --- Backend storage (backend_storage.cc) ---
  // The class a VM's backend storage claim is made in: the default class when it is node-local
  // and of files, else the embedded local class (the store is never shared between nodes: a
  // migration carries it, see PrepareBackendStorage).
  StorageClass BackendStorageClass() const;
  // The record of a new backend storage claim of VM `vm` in class `sc` (no owner yet).
  kvnode::v1::PersistentVolumeClaim BackendStorageRecord(const std::string& ns,
                                                         const std::string& vm,
                                                         const StorageClass& sc) const;
  // The backend storage claim of `vmi`'s VM, made (owned by the VM) when missing; one made for
  // an incoming migration (`migration_target`) carries the VMI's UID in
  // kBlockMigrationVmiAnnotation, so that a migration that fails removes it (DropCopiedClaims).
  absl::StatusOr<kvnode::v1::PersistentVolumeClaim> EnsureBackendStorageLocked(
      const kvnode::v1::VirtualMachineInstance& vmi, bool migration_target)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // What `uid` owns in the backend storage dirs `stores` becomes root's again.
  absl::Status ReturnBackendStorageToRoot(const std::vector<std::string>& stores, uid_t uid);
  // The bytes the claim's files take.
  int64_t BackendStorageBytes(const kvnode::v1::PersistentVolumeClaim& pvc) const;

  // The cached disk of a containerDisk volume of `vmi` (pulled when its policy says so).
  absl::StatusOr<CachedDisk> ContainerDiskImage(const kvnode::v1::VirtualMachineInstance& vmi,
                                                const kvnode::v1::Volume& volume);
  // The pull of a registry source: its reference, policy Always, the secretRef's credentials.
  absl::StatusOr<ImageRequest> RegistryImageRequest(
      const kvnode::v1::DataVolumeSourceRegistry& registry, const std::string& ns);
  // A registry DataVolume's image, pulled into the cache (waiting for the pull): its disk.
  absl::StatusOr<std::string> PullForDataVolume(const kvnode::v1::DataVolume& dv);
  // The registry credentials of imagePullSecret `name` in `ns` (a docker config JSON).
  absl::StatusOr<std::string> PullSecret(const std::string& ns, const std::string& name);
  // Cache entries live VMIs run on, and those held for VMIs being started.
  std::set<std::string> ImagesInUse();
  absl::StatusOr<kvnode::v1::DataVolume> LoadDvLocked(const std::string& ns,
                                                      const std::string& name)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<kvnode::v1::DataVolume> CreateDataVolumeLocked(kvnode::v1::DataVolume dv)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  ClaimState ClaimStateLocked(const std::string& ns, const std::string& name)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  DataSourceVerdict EvaluateDataSourceLocked(const kvnode::v1::DataSource& ds)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The claim a clone copies: spec.source.pvc (its namespace defaulting to the DataVolume's),
  // or the claim of the Ready DataSource its sourceRef names (FailedPrecondition while there is
  // none or it is not Ready).
  absl::StatusOr<kvnode::v1::DataVolumeSourcePVC> CloneSourceLocked(
      const kvnode::v1::DataVolume& dv) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The requested size of that claim ("" when not a clone or not resolvable now).
  std::string CloneSourceSizeLocked(const kvnode::v1::DataVolume& dv)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Fills the claim's `dir` (of `size` bytes) from the DataVolume's source.
  absl::Status Populate(const kvnode::v1::DataVolume& dv, const std::string& dir, int64_t size);
  // curl, as the importer, fetches the http source into `part` (at most what a claim of
  // `claim_bytes` takes).
  absl::Status Download(const kvnode::v1::DataVolume& dv, const std::string& part,
                        int64_t claim_bytes);
  absl::Status BeginDataVolumeUpload(const kvnode::v1::ObjectRef& ref, VolumeUpload* upload);
  // The dir of a claim that was not stored after all (a write the store refused, a migration
  // that failed) removed; a failure is logged, naming `why`: the dir is left for an admin, and
  // a claim of that name made later finds it (a disk there is adopted, not overwritten).
  void DiscardClaimDirLocked(const kvnode::v1::PersistentVolumeClaim& pvc, const char* why)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status RemoveClaimDirLocked(const kvnode::v1::PersistentVolumeClaim& pvc, bool retain)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  const VolumeConfig config_;
  const NodePaths paths_;
  Store* const store_;
  Clock* const clock_;
  SecretStore secrets_;
  ConfigMaps config_maps_;

  absl::Mutex mu_;
  VmiLister lister_ ABSL_GUARDED_BY(mu_);
  bool quit_ ABSL_GUARDED_BY(mu_) = false;
  std::unique_ptr<VolumeCollector> collector_;
  std::unique_ptr<DataVolumeImporter> importer_;
  // DataVolumes (by UID) an upload is filling now.
  std::set<std::string> uploading_ ABSL_GUARDED_BY(mu_);
  // Cache entries held for a VMI (by its UID) from PrepareVmi to ReturnToRoot.
  std::map<std::string, std::set<std::string>> held_images_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<ImagePuller> puller_;
  // The devices of Block classes; used with mu_ held.
  LinuxBlockDevices block_devices_;
  BlockDevicePool pool_ ABSL_GUARDED_BY(mu_);
  VmiDisks vmi_disks_;
};

// One upload in progress: the client's bytes go to a temp file in the target's dir; Finish
// checks and converts them and only then makes the claim Bound (or the image visible). An
// upload destroyed before Finish succeeded leaves nothing: its temp files and the claim it
// made are removed. An upload into a claim takes at most the claim's size (plus what a qcow2
// image's metadata may add, UploadLimit): more fails at once, before any byte past the limit
// is written.
class VolumeUpload {
 public:
  // The most bytes an upload into a claim of `claim_bytes` may send.
  static int64_t UploadLimit(int64_t claim_bytes);
  ~VolumeUpload();
  // OutOfRange, naming the limit, once more than limit() bytes would have been received.
  absl::Status Append(const std::string& data);
  int64_t limit() const { return limit_; }
  absl::StatusOr<kvnode::v1::UploadResult> Finish();

 private:
  friend class VolumeManager;
  VolumeUpload() = default;
  void Abort();
  // The converted disk is in place: the claim is Bound (and a DataVolume Succeeded).
  absl::Status BindUploadedClaim(kvnode::v1::UploadResult* result);

  VolumeManager* manager_ = nullptr;
  kvnode::v1::UploadTarget target_;
  kvnode::v1::PersistentVolumeClaim pvc_;  // for a claim upload, as stored (Pending)
  kvnode::v1::DataVolume dv_;              // for a DataVolume upload, as it was at the start
  std::string dir_;                         // the claim's or image's dir
  int fd_ = -1;                             // the temp file being written
  int64_t received_ = 0;
  int64_t limit_ = 0;                       // the most bytes it may receive
  std::string what_;                        // "claim \"root\" of 10Gi", for errors
  bool done_ = false;
};

}  // namespace kvnode

#endif  // KVNODE_AGENT_STORAGE_VOLUME_MANAGER_H_
