// CDI's golden-image kinds, labels and annotations as this node stores and shows them
// (CDI: pkg/common/common.go, pkg/controller/dataimportcron-controller.go).
#ifndef KVNODE_AGENT_MODEL_CDI_NAMES_H_
#define KVNODE_AGENT_MODEL_CDI_NAMES_H_

namespace kvnode {

inline constexpr char kDataSourceKind[] = "DataSource";
inline constexpr char kDataImportCronKind[] = "DataImportCron";
inline constexpr char kDataImportCronLabel[] = "cdi.kubevirt.io/dataImportCron";
inline constexpr char kDataImportCronCleanupLabel[] = "cdi.kubevirt.io/dataImportCron.cleanup";
inline constexpr char kAnnSourceDesiredDigest[] =
    "cdi.kubevirt.io/storage.import.sourceDesiredDigest";
inline constexpr char kAnnNextCronTime[] = "cdi.kubevirt.io/storage.import.nextCronTime";
inline constexpr char kAnnLastCronTime[] = "cdi.kubevirt.io/storage.import.lastCronTime";
inline constexpr char kAnnLastUseTime[] = "cdi.kubevirt.io/storage.import.lastUseTime";

}  // namespace kvnode

#endif  // KVNODE_AGENT_MODEL_CDI_NAMES_H_
