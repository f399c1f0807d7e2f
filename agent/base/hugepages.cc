#include "agent/base/hugepages.h"

#include <errno.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>

#include <fstream>

#include "absl/strings/str_cat.h"

namespace kvnode {
namespace {

constexpr long kHugetlbfsMagic = 0x958458f6;  // HUGETLBFS_MAGIC, linux/magic.h

int64_t ReadCount(const std::string& path) {
  std::ifstream f(path);
  int64_t n = 0;
  return (f >> n) ? n : 0;
}

}  // namespace

std::optional<int64_t> HugepageBytes(absl::string_view page_size) {
  if (page_size == "2Mi") return int64_t{2} << 20;
  if (page_size == "1Gi") return int64_t{1} << 30;
  return std::nullopt;
}

HugepagePool ReadHugepages(absl::string_view page_size, const std::string& sysfs) {
  std::optional<int64_t> bytes = HugepageBytes(page_size);
  if (!bytes.has_value()) return {};
  const std::string dir =
      absl::StrCat(sysfs, "/kernel/mm/hugepages/hugepages-", *bytes / 1024, "kB/");
  return {ReadCount(dir + "nr_hugepages") * *bytes, ReadCount(dir + "free_hugepages") * *bytes};
}

absl::Status MountHugepages(const std::string& dir, absl::string_view page_size, uid_t uid,
                            gid_t gid) {
  std::optional<int64_t> bytes = HugepageBytes(page_size);
  if (!bytes.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat("hugepages page size \"", page_size,
                                                   "\": expected 2Mi or 1Gi"));
  }
  if (mkdir(dir.c_str(), 0700) < 0 && errno != EEXIST) {
    return absl::ErrnoToStatus(errno, "mkdir " + dir);
  }
  if (IsHugetlbfs(dir)) return absl::OkStatus();  // mounted before a restart
  const std::string options = absl::StrCat("pagesize=", *bytes >> 10, "K,uid=", uid, ",gid=", gid,
                                           ",mode=0700");
  if (mount("kvnode-hugepages", dir.c_str(), "hugetlbfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
            options.c_str()) < 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("mount hugetlbfs (", options, ") on ", dir));
  }
  return absl::OkStatus();
}

bool IsHugetlbfs(const std::string& dir) {
  struct statfs st;
  return statfs(dir.c_str(), &st) == 0 && static_cast<long>(st.f_type) == kHugetlbfsMagic;
}

void UnmountHugepages(const std::string& dir) {
  while (IsHugetlbfs(dir) && umount2(dir.c_str(), MNT_DETACH | UMOUNT_NOFOLLOW) == 0) {
  }
}

}  // namespace kvnode
