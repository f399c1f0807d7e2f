// The node's hugepages (memory.hugepages.pageSize): how many of a size the kernel has reserved
// and how many are free (sysfs), and a hugetlbfs of one size mounted for one VMI's identity, in
// which its libvirtd backs the guest's memory.
#ifndef KVNODE_AGENT_BASE_HUGEPAGES_H_
#define KVNODE_AGENT_BASE_HUGEPAGES_H_

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace kvnode {

// A page size as KubeVirt names it ("2Mi", "1Gi") in bytes; nullopt for any other.
std::optional<int64_t> HugepageBytes(absl::string_view page_size);

struct HugepagePool {
  int64_t total_bytes = 0;  // nr_hugepages × the size
  int64_t free_bytes = 0;   // free_hugepages × the size
};
// The node's pool of `page_size` pages (/sys/kernel/mm/hugepages/hugepages-<kB>kB); empty when
// the kernel has none of that size.
HugepagePool ReadHugepages(absl::string_view page_size, const std::string& sysfs = "/sys");

// Mounts a hugetlbfs of `page_size` pages on `dir` (made if missing), owned by uid:gid, mode
// 0700, nosuid, nodev, noexec. The caller makes sure no one else can replace `dir` meanwhile.
absl::Status MountHugepages(const std::string& dir, absl::string_view page_size, uid_t uid,
                            gid_t gid);
// Whether `dir` is a hugetlbfs mount.
bool IsHugetlbfs(const std::string& dir);
// Detaches the hugetlbfs on `dir`, if there is one (its files go when no process holds them).
void UnmountHugepages(const std::string& dir);

}  // namespace kvnode

#endif  // KVNODE_AGENT_BASE_HUGEPAGES_H_
