// The serial console's log, with a hard cap. QEMU writes everything the guest prints on its
// serial port to the chardev's log file; that file is a FIFO this launcher reads, and the
// launcher writes what it reads to serial0.log, which it rotates at `max_bytes` to
// serial0.log.1 (replacing the one before): the log never holds more than 2 × max_bytes
// however long and fast the guest prints (kvnode: 1 MiB each, the 2 MiB of virtlogd's default,
// which KubeVirt's launcher uses for the same log).
//
// The launcher keeps a write end of the FIFO open too, so QEMU's reopening it (a new QEMU after
// a migration) never makes the reader see an end. If the launcher is gone, QEMU's writes fail
// (no reader) and are lost; they never block the guest.
//
// Thread-safe: Start spawns one reader thread; the destructor stops it.
#ifndef KVNODE_LAUNCHER_SERVER_CONSOLE_LOG_H_
#define KVNODE_LAUNCHER_SERVER_CONSOLE_LOG_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace kvnode {

class ConsoleLog {
 public:
  static constexpr int64_t kDefaultMaxBytes = 1 << 20;

  // Makes the FIFO at `fifo` (keeping one that is there: a running QEMU may hold it) and starts
  // copying from it to `log`.
  static absl::StatusOr<std::unique_ptr<ConsoleLog>> Start(const std::string& fifo,
                                                           const std::string& log,
                                                           int64_t max_bytes = kDefaultMaxBytes);
  ~ConsoleLog();

  // Bytes copied so far (for tests).
  int64_t copied() const { return copied_.load(); }

 private:
  ConsoleLog(std::string log, int64_t max_bytes) : log_(std::move(log)), max_bytes_(max_bytes) {}
  void Loop();
  void Append(const char* data, size_t size);
  bool OpenLog();
  void Rotate();

  const std::string log_;
  const int64_t max_bytes_;
  int read_fd_ = -1;
  int keep_fd_ = -1;  // our own write end: no EOF between writers
  int wake_fd_ = -1;
  int log_fd_ = -1;   // only the reader thread touches these two after Start
  int64_t log_size_ = 0;
  std::atomic<int64_t> copied_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace kvnode

#endif  // KVNODE_LAUNCHER_SERVER_CONSOLE_LOG_H_
