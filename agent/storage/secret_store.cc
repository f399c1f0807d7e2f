#include "agent/storage/secret_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "agent/base/file_tree.h"
#include "agent/base/status_macros.h"
#include "agent/manifest/admission.h"
#include "agent/storage/disk_image.h"

namespace kvnode {
namespace {

std::vector<std::string> KeysIn(int dir_fd) {
  std::vector<std::string> keys;
  int fd = dup(dir_fd);
  DIR* d = fdopendir(fd);
  if (d == nullptr) {
    close(fd);
    return keys;
  }
  while (struct dirent* e = readdir(d)) {
    if (e->d_type == DT_REG) keys.push_back(e->d_name);
  }
  closedir(d);
  std::sort(keys.begin(), keys.end());
  return keys;
}

absl::Status WriteAt(int dir_fd, const std::string& name, const std::string& value) {
  int fd = openat(dir_fd, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return absl::ErrnoToStatus(errno, "create key " + name);
  bool ok = write(fd, value.data(), value.size()) == static_cast<ssize_t>(value.size()) &&
            fsync(fd) == 0;
  close(fd);
  return ok ? absl::OkStatus() : absl::InternalError("write key " + name);
}

}  // namespace

bool IsValidSecretKey(const std::string& key) {
  if (key.empty() || key.size() > 253 || key == "." || key == "..") return false;
  return std::all_of(key.begin(), key.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
  });
}

absl::StatusOr<kvnode::v1::SecretInfo> SecretStore::Put(
    const std::string& ns, const std::string& name, const std::map<std::string, std::string>& data) {
  if (!IsDns1123Subdomain(name)) {
    return absl::InvalidArgumentError("metadata.name: \"" + name + "\" is not a DNS-1123 subdomain");
  }
  if (data.empty()) return absl::InvalidArgumentError("data: a secret needs at least one key");
  for (const auto& [key, value] : data) {
    if (!IsValidSecretKey(key)) {
      return absl::InvalidArgumentError("data[" + key + "]: a valid key must consist of "
                                        "alphanumeric characters, '-', '_' or '.'");
    }
  }
  ASSIGN_OR_RETURN(int ns_fd, OpenDirChain(state_dir_, {"secrets", ns}, 0700, true));
  std::string tmp = absl::StrCat(".", name, ".new");
  RemoveTreeAt(ns_fd, tmp.c_str());
  absl::Status s;
  if (mkdirat(ns_fd, tmp.c_str(), 0700) < 0) s = absl::ErrnoToStatus(errno, "mkdir secret");
  int fd = s.ok() ? openat(ns_fd, tmp.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
  if (s.ok() && fd < 0) s = absl::ErrnoToStatus(errno, "open secret");
  for (auto it = data.begin(); s.ok() && it != data.end(); ++it) s = WriteAt(fd, it->first, it->second);
  if (fd >= 0) close(fd);
  if (s.ok()) {
    RemoveTreeAt(ns_fd, name.c_str());
    if (renameat(ns_fd, tmp.c_str(), ns_fd, name.c_str()) < 0) s = absl::ErrnoToStatus(errno, "rename secret");
  }
  if (!s.ok()) RemoveTreeAt(ns_fd, tmp.c_str());
  close(ns_fd);
  RETURN_IF_ERROR(s);
  kvnode::v1::SecretInfo info;
  info.set_namespace_(ns);
  info.set_name(name);
  for (const auto& [key, value] : data) info.add_keys(key);
  return info;
}

absl::StatusOr<std::string> SecretStore::Read(const std::string& ns, const std::string& name,
                                              const std::string& key) const {
  auto dir = OpenDirChain(state_dir_, {"secrets", ns, name}, 0700, false);
  if (!dir.ok()) {
    return absl::NotFoundError(absl::StrCat("secret \"", name, "\" not found in namespace \"", ns,
                                            "\" (kvctl create secret generic ", name,
                                            " --from-file=KEY=FILE)"));
  }
  int fd = IsValidSecretKey(key) ? openat(*dir, key.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC) : -1;
  close(*dir);
  if (fd < 0) return absl::NotFoundError(absl::StrCat("secret \"", name, "\" has no key \"", key, "\""));
  std::string value;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) value.append(buf, static_cast<size_t>(n));
  close(fd);
  return value;
}

std::vector<kvnode::v1::SecretInfo> SecretStore::List(const std::string& ns) const {
  std::vector<kvnode::v1::SecretInfo> items;
  auto dir = OpenDirChain(state_dir_, {"secrets", ns}, 0700, false);
  if (!dir.ok()) return items;
  DIR* d = fdopendir(*dir);
  if (d == nullptr) {
    close(*dir);
    return items;
  }
  while (struct dirent* e = readdir(d)) {
    if (e->d_type != DT_DIR || e->d_name[0] == '.') continue;
    int fd = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) continue;
    kvnode::v1::SecretInfo info;
    info.set_namespace_(ns);
    info.set_name(e->d_name);
    for (auto& k : KeysIn(fd)) info.add_keys(k);
    close(fd);
    items.push_back(info);
  }
  closedir(d);
  std::sort(items.begin(), items.end(), [](const auto& a, const auto& b) { return a.name() < b.name(); });
  return items;
}

absl::StatusOr<kvnode::v1::SecretInfo> SecretStore::Delete(const std::string& ns,
                                                           const std::string& name) {
  for (const auto& info : List(ns)) {
    if (info.name() != name) continue;
    RemoveTreeUnder(absl::StrCat(state_dir_, "/secrets/", ns), name);
    return info;
  }
  return absl::NotFoundError(absl::StrCat("secrets \"", name, "\" not found"));
}

}  // namespace kvnode
