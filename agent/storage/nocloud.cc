#include "agent/storage/nocloud.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "agent/base/state_layout.h"
#include "agent/base/status_macros.h"
#include "agent/base/subprocess.h"

namespace kvnode {
namespace {

// Plain text, else base64, else a secret's key (the first of `keys` it has).
absl::StatusOr<std::string> DataOf(const std::string& plain, const std::string& base64,
                                   const std::string& secret, const std::vector<std::string>& keys,
                                   const std::string& field, const SecretReader& secrets) {
  if (!plain.empty()) return plain;
  if (!base64.empty()) {
    std::string decoded;
    if (!absl::Base64Unescape(base64, &decoded)) {
      return absl::InvalidArgumentError(field + "Base64: is not valid base64");
    }
    return decoded;
  }
  if (secret.empty()) return std::string();
  absl::Status last;
  for (const std::string& key : keys) {
    auto value = secrets(secret, key);
    if (value.ok()) return value;
    last = value.status();
    if (!absl::IsNotFound(last)) return last;
  }
  return Annotate(last, "secret \"" + secret + "\"");
}

}  // namespace

std::string NoCloudInstanceId(const kvnode::v1::VirtualMachineInstance& vmi) {
  return absl::StrCat(vmi.metadata().name(), ".", vmi.metadata().namespace_());
}

absl::StatusOr<std::map<std::string, std::string>> BuildNoCloudFiles(
    const kvnode::v1::VirtualMachineInstance& vmi, const kvnode::v1::CloudInitNoCloudSource& src,
    const SecretReader& secrets) {
  std::map<std::string, std::string> files;
  std::string hostname = vmi.spec().hostname().empty() ? vmi.metadata().name() : vmi.spec().hostname();
  files["meta-data"] = absl::StrCat("instance-id: ", NoCloudInstanceId(vmi),
                                    "\nlocal-hostname: ", hostname, "\n");
  ASSIGN_OR_RETURN(files["user-data"],
                   DataOf(src.user_data(), src.user_data_base64(), src.secret_ref().name(),
                          {"userdata", "userData"}, "userData", secrets));
  ASSIGN_OR_RETURN(std::string network,
                   DataOf(src.network_data(), src.network_data_base64(),
                          src.network_data_secret_ref().name(), {"networkdata", "networkData"},
                          "networkData", secrets));
  if (!network.empty()) files["network-config"] = network;
  return files;
}

absl::Status MakeNoCloudIso(const FsIdentity& user, const std::string& dir,
                            const std::map<std::string, std::string>& files) {
  std::string src = dir + "/src";
  RETURN_IF_ERROR(RunWithFsIdentity(user, [&]() -> absl::Status {
    if (mkdir(src.c_str(), 0700) < 0 && errno != EEXIST) {
      return absl::ErrnoToStatus(errno, "mkdir " + src);
    }
    for (const auto& [name, content] : files) {
      std::string path = src + "/" + name;
      unlink(path.c_str());
      int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
      if (fd < 0) return absl::ErrnoToStatus(errno, "create " + path);
      bool ok = write(fd, content.data(), content.size()) == static_cast<ssize_t>(content.size());
      close(fd);
      if (!ok) return absl::InternalError("write " + path);
    }
    return absl::OkStatus();
  }));
  const std::string iso = absl::StrCat(dir, "/", kNoCloudIsoFile);
  SpawnOptions o;
  o.argv = {kGenisoimage, "-quiet", "-output", iso + ".tmp", "-volid", "cidata",
            "-joliet", "-rock"};
  for (const auto& [name, content] : files) o.argv.push_back(src + "/" + name);
  o.env = {"PATH=/usr/bin:/bin", "LC_ALL=C"};
  o.uid = static_cast<int>(user.uid);
  o.gid = static_cast<int>(user.gid);
  o.groups = user.groups;
  o.cwd = "/";
  auto r = RunCommand(std::move(o), absl::Seconds(60));
  absl::Status s = RunWithFsIdentity(user, [&]() -> absl::Status {
    for (const auto& [name, content] : files) unlink((src + "/" + name).c_str());
    rmdir(src.c_str());
    return absl::OkStatus();
  });
  if (!r.ok()) return Annotate(r.status(), "genisoimage");
  if (!r->success()) return absl::InternalError("genisoimage: " + r->output);
  return RunWithFsIdentity(user, [&]() -> absl::Status {
    if (rename((iso + ".tmp").c_str(), iso.c_str()) < 0) return absl::ErrnoToStatus(errno, "rename " + iso);
    return absl::OkStatus();
  });
}

}  // namespace kvnode
