#include "agent/storage/disk_image.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "agent/base/state_layout.h"
#include "agent/base/status_macros.h"
#include "agent/base/subprocess.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"

namespace kvnode {
namespace {

absl::Status RunQemuImg(SpawnOptions o, const std::string& what, absl::Duration timeout) {
  auto r = RunCommand(std::move(o), timeout);
  if (!r.ok()) return Annotate(r.status(), what);
  if (!r->success()) {
    std::string out = r->output;
    while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
    return absl::InternalError(absl::StrCat(what, ": qemu-img ",
                                            r->timed_out ? "timed out" : DescribeWaitStatus(r->wait_status),
                                            out.empty() ? "" : ": " + out));
  }
  return absl::OkStatus();
}

SpawnOptions AsUser(const FsIdentity& user, std::vector<std::string> argv) {
  SpawnOptions o;
  o.argv = std::move(argv);
  o.env = {"PATH=/usr/bin:/bin", "LC_ALL=C"};
  o.uid = static_cast<int>(user.uid);
  o.gid = static_cast<int>(user.gid);
  o.groups = user.groups;
  o.cwd = "/";
  return o;
}

// qemu-img on an image from outside: CDI's limits (pkg/image/qemu.go: 1 GiB of address space,
// 30 s of CPU for `info`).
constexpr uint64_t kUntrustedAddressSpace = uint64_t{1} << 30;
constexpr uint64_t kUntrustedInfoCpuSeconds = 30;

SpawnOptions Untrusted(const FsIdentity& importer, std::vector<std::string> argv,
                       uint64_t cpu_seconds) {
  SpawnOptions o = AsUser(importer, std::move(argv));
  o.limits.push_back({RLIMIT_AS, kUntrustedAddressSpace});
  // glibc reserves 64 MiB of address space for each thread's malloc arena: under the 1 GiB
  // limit a convert's worker threads then failed to start now and then ("qemu_thread_create:
  // Resource temporarily unavailable", qemu-img aborted). Two arenas serve them all.
  o.env.push_back("MALLOC_ARENA_MAX=2");
  if (cpu_seconds > 0) o.limits.push_back({RLIMIT_CPU, cpu_seconds});
  return o;
}

}  // namespace

absl::StatusOr<int> OpenDirChain(const std::string& base, const std::vector<std::string>& names,
                                 mode_t mode, bool create) {
  int fd = open(base.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return absl::ErrnoToStatus(errno, "open " + base);
  std::string path = base;
  for (const std::string& name : names) {
    path += "/" + name;
    if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos) {
      close(fd);
      return absl::InvalidArgumentError("invalid path component in " + path);
    }
    if (create && mkdirat(fd, name.c_str(), mode) < 0 && errno != EEXIST) {
      int e = errno;
      close(fd);
      return absl::ErrnoToStatus(e, "mkdir " + path);
    }
    int next = openat(fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int e = errno;
    close(fd);
    if (next < 0) {
      return absl::ErrnoToStatus(e, absl::StrCat("open ", path,
                                                 e == ELOOP || e == ENOTDIR
                                                     ? " (not a directory; links are not followed)"
                                                     : ""));
    }
    fd = next;
  }
  return fd;
}

absl::Status CreateSparseFile(int dir_fd, const std::string& name, int64_t size, uid_t uid,
                              gid_t gid, mode_t mode) {
  int fd = openat(dir_fd, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) return absl::ErrnoToStatus(errno, "create " + name);
  absl::Status s;
  if (ftruncate(fd, size) < 0) {
    s = absl::ErrnoToStatus(errno, "truncate " + name);
  } else if (fchown(fd, uid, gid) < 0 || fchmod(fd, mode) < 0) {
    s = absl::ErrnoToStatus(errno, "chown " + name);
  } else if (fsync(fd) < 0) {
    s = absl::ErrnoToStatus(errno, "fsync " + name);
  }
  close(fd);
  if (!s.ok()) unlinkat(dir_fd, name.c_str(), 0);
  return s;
}

absl::StatusOr<ImageInfo> InspectImage(const std::string& path, const FsIdentity& importer) {
  auto r = RunCommand(Untrusted(importer, {kQemuImg, "info", "--output=json", path},
                                kUntrustedInfoCpuSeconds),
                      absl::Seconds(60));
  if (!r.ok()) return r.status();
  if (!r->success()) {
    return absl::InvalidArgumentError(absl::StrCat("not a disk image qemu-img can read: ",
                                                   r->output));
  }
  google::protobuf::Struct json;
  if (!google::protobuf::util::JsonStringToMessage(r->output, &json).ok()) {
    return absl::InternalError("qemu-img info: unexpected output: " + r->output);
  }
  const auto& f = json.fields();
  ImageInfo info;
  auto str = [&](const char* key) {
    auto it = f.find(key);
    return it == f.end() ? std::string() : it->second.string_value();
  };
  info.format = str("format");
  info.backing_file = str("backing-filename");
  if (auto it = f.find("virtual-size"); it != f.end()) {
    info.virtual_size = static_cast<int64_t>(it->second.number_value());
  }
  if (auto it = f.find("format-specific"); it != f.end()) {
    const auto& data = it->second.struct_value().fields();
    if (auto d = data.find("data"); d != data.end()) {
      const auto& df = d->second.struct_value().fields();
      if (auto x = df.find("data-file"); x != df.end()) info.data_file = x->second.string_value();
    }
  }
  return info;
}

absl::Status CheckUploadedImage(const ImageInfo& info) {
  if (info.format != "raw" && info.format != "qcow2") {
    return absl::InvalidArgumentError(absl::StrCat("image format \"", info.format,
                                                   "\" is not supported (raw or qcow2)"));
  }
  if (!info.backing_file.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the image has a backing file (\"", info.backing_file,
        "\"); upload a self-contained image (qemu-img convert -O qcow2 IN OUT)"));
  }
  if (!info.data_file.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("the image has an external data file (\"",
                                                   info.data_file, "\"); upload a self-contained image"));
  }
  return absl::OkStatus();
}

absl::Status ConvertToRaw(const std::string& in, const ImageInfo& info, const std::string& out,
                          int64_t size_bytes, const FsIdentity& importer) {
  // The target is made here, sparse and at its final size, for the importer to fill: qemu-img
  // then writes into it (-n) and needs no right to create files in the claim's dir.
  size_t slash = out.rfind('/');
  int dir = open(out.substr(0, slash).c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir < 0) return absl::ErrnoToStatus(errno, "open " + out.substr(0, slash));
  absl::Status made = CreateSparseFile(dir, out.substr(slash + 1),
                                       std::max(size_bytes, info.virtual_size), importer.uid,
                                       importer.gid, 0600);
  close(dir);
  RETURN_IF_ERROR(made);
  return RunQemuImg(Untrusted(importer,
                              {kQemuImg, "convert", "-n", "-f", info.format, "-O", "raw", "-S",
                               "4k", in, out},
                              0),
                    "convert", absl::Minutes(30));
}

absl::Status GrowRawFile(const std::string& path, int64_t size_bytes) {
  int fd = open(path.c_str(), O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return absl::ErrnoToStatus(errno, "open " + path);
  struct stat st;
  absl::Status s;
  if (fstat(fd, &st) < 0) {
    s = absl::ErrnoToStatus(errno, "stat " + path);
  } else if (!S_ISREG(st.st_mode)) {
    s = absl::FailedPreconditionError(path + " is not a regular file");
  } else if (st.st_size < size_bytes && (ftruncate(fd, size_bytes) < 0 || fsync(fd) < 0)) {
    s = absl::ErrnoToStatus(errno, "grow " + path);
  }
  close(fd);
  return s;
}

absl::Status CopyRawDisk(const std::string& from, const std::string& to) {
  // No timeout worth having: a disk of terabytes copies for hours.
  ASSIGN_OR_RETURN(CommandResult r,
                   RunCommand({"/bin/cp", "--reflink=auto", "--sparse=always", "--no-preserve=all",
                               "--", from, to},
                              absl::Hours(24)));
  if (!r.success()) {
    unlink(to.c_str());
    return absl::InternalError("copy " + from + " to " + to + ": " + r.output);
  }
  int fd = open(to.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return absl::ErrnoToStatus(errno, "open " + to);
  absl::Status s;
  if (fchmod(fd, 0600) < 0 || fsync(fd) < 0) s = absl::ErrnoToStatus(errno, "sync " + to);
  close(fd);
  return s;
}

absl::Status PublishDisk(const std::string& dir, uid_t uid, gid_t gid, mode_t mode) {
  std::string tmp = dir + "/" + kDiskTempFile;
  int fd = open(tmp.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return absl::ErrnoToStatus(errno, "open " + tmp);
  absl::Status s;
  if (fchown(fd, uid, gid) < 0 || fchmod(fd, mode) < 0) s = absl::ErrnoToStatus(errno, "chown " + tmp);
  if (s.ok() && fsync(fd) < 0) s = absl::ErrnoToStatus(errno, "fsync " + tmp);
  close(fd);
  RETURN_IF_ERROR(s);
  if (rename(tmp.c_str(), DiskImageIn(dir).c_str()) < 0) {
    return absl::ErrnoToStatus(errno, "rename " + tmp);
  }
  for (const char* part : {"/upload.part", "/import.part"}) unlink((dir + part).c_str());
  int d = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (d >= 0) {
    fsync(d);
    close(d);
  }
  return absl::OkStatus();
}

absl::Status CreateOverlayAs(const FsIdentity& user, const std::string& overlay,
                             const std::string& backing, const std::string& backing_format) {
  return RunQemuImg(AsUser(user, {kQemuImg, "create", "-q", "-f", "qcow2", "-F", backing_format,
                                  "-b", backing, overlay}),
                    "create overlay " + overlay, absl::Seconds(60));
}

absl::Status CreateQcow2As(const FsIdentity& user, const std::string& path, int64_t size_bytes) {
  return RunQemuImg(AsUser(user, {kQemuImg, "create", "-q", "-f", "qcow2", path,
                                  std::to_string(size_bytes)}),
                    "create " + path, absl::Seconds(60));
}

}  // namespace kvnode
