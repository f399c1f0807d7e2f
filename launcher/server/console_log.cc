#include "launcher/server/console_log.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "spdlog/spdlog.h"

namespace kvnode {

absl::StatusOr<std::unique_ptr<ConsoleLog>> ConsoleLog::Start(const std::string& fifo,
                                                              const std::string& log,
                                                              int64_t max_bytes) {
  std::unique_ptr<ConsoleLog> c(new ConsoleLog(log, max_bytes));
  // A FIFO already there is kept: a running QEMU holds it open (this launcher replaced one that
  // died), and a new one in its place would never be written.
  struct stat st;
  if (lstat(fifo.c_str(), &st) < 0 || !S_ISFIFO(st.st_mode)) {
    unlink(fifo.c_str());
    if (mkfifo(fifo.c_str(), 0600) < 0) return absl::ErrnoToStatus(errno, "mkfifo " + fifo);
  }
  // The read end first (non-blocking: no writer yet), then our own write end.
  c->read_fd_ = open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);
  if (c->read_fd_ < 0) return absl::ErrnoToStatus(errno, "open " + fifo);
  c->keep_fd_ = open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);
  if (c->keep_fd_ < 0) return absl::ErrnoToStatus(errno, "open " + fifo + " for writing");
  c->wake_fd_ = eventfd(0, EFD_CLOEXEC);
  if (c->wake_fd_ < 0) return absl::ErrnoToStatus(errno, "eventfd");
  if (!c->OpenLog()) return absl::ErrnoToStatus(errno, "open " + log);
  c->thread_ = std::thread([p = c.get()] { p->Loop(); });
  return c;
}

ConsoleLog::~ConsoleLog() {
  stop_ = true;
  if (wake_fd_ >= 0) {
    uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof(one));
  }
  if (thread_.joinable()) thread_.join();
  for (int fd : {read_fd_, keep_fd_, wake_fd_, log_fd_}) {
    if (fd >= 0) close(fd);
  }
}

bool ConsoleLog::OpenLog() {
  if (log_fd_ >= 0) close(log_fd_);
  log_fd_ = open(log_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
  struct stat st;
  log_size_ = log_fd_ >= 0 && fstat(log_fd_, &st) == 0 ? st.st_size : 0;
  return log_fd_ >= 0;
}

void ConsoleLog::Rotate() {
  if (rename(log_.c_str(), (log_ + ".1").c_str()) < 0) {
    spdlog::warn("rotate {}: {}", log_, strerror(errno));
    // Start over in place rather than grow past the cap.
    if (log_fd_ >= 0 && ftruncate(log_fd_, 0) == 0) log_size_ = 0;
    return;
  }
  OpenLog();
}

void ConsoleLog::Append(const char* data, size_t size) {
  while (size > 0 && log_fd_ >= 0) {
    if (log_size_ >= max_bytes_) Rotate();
    size_t room = static_cast<size_t>(std::max<int64_t>(max_bytes_ - log_size_, 0));
    size_t n = std::min(size, room);
    ssize_t w = write(log_fd_, data, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;  // a full disk: the console goes unlogged, the guest goes on
    log_size_ += w;
    data += w;
    size -= static_cast<size_t>(w);
  }
}

void ConsoleLog::Loop() {
  char buf[65536];
  while (!stop_) {
    struct pollfd p[2] = {{read_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    if (poll(p, 2, -1) < 0 && errno != EINTR) return;
    if (p[1].revents & POLLIN) break;
    if (!(p[0].revents & POLLIN)) continue;
    ssize_t n = read(read_fd_, buf, sizeof(buf));
    if (n <= 0) continue;  // EAGAIN: another poll
    Append(buf, static_cast<size_t>(n));
    copied_ += n;
  }
  // What is already in the FIFO when asked to stop is kept.
  ssize_t n;
  while ((n = read(read_fd_, buf, sizeof(buf))) > 0) Append(buf, static_cast<size_t>(n));
}

}  // namespace kvnode
