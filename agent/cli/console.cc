// `kvctl console NAME`: the guest's serial console over the handler's Console stream. On a
// terminal it switches to raw mode and Ctrl+] detaches; otherwise it forwards stdin and prints
// output until the stream closes (for scripts and tests).
#include <poll.h>
#include <termios.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "agent/cli/cli.h"
#include "grpcpp/grpcpp.h"

namespace kvnode {

int CmdConsole(Cli& cli) {
  if (cli.args.empty()) return cli.Usage("a VMI name is required");
  std::string name = cli.args.back();
  grpc::ClientContext ctx;
  auto stream = cli.stub->Console(&ctx);
  kvnode::v1::ConsoleInput first;
  *first.mutable_ref() = cli.Ref(name);
  if (!stream->Write(first)) return cli.RpcError(stream->Finish());
  bool tty = isatty(STDIN_FILENO);
  struct termios saved;
  if (tty) {
    tcgetattr(STDIN_FILENO, &saved);
    struct termios raw = saved;
    cfmakeraw(&raw);
    tcsetattr(STDIN_FILENO, TCSANOW, &raw);
    std::cerr << "Successfully connected to " << name << " console. The escape sequence is ^]\r\n";
  }
  std::atomic<bool> done{false};
  std::thread input([&] {
    char buf[1024];
    while (!done) {
      struct pollfd p = {STDIN_FILENO, POLLIN, 0};
      int r = poll(&p, 1, 200);
      if (r <= 0) continue;
      ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));
      if (n <= 0) break;  // EOF: keep printing output, stop sending
      std::string data(buf, n);
      size_t esc = data.find('\x1d');
      if (tty && esc != std::string::npos) {
        data.resize(esc);
        if (!data.empty()) {
          kvnode::v1::ConsoleInput in;
          in.set_data(data);
          stream->Write(in);
        }
        done = true;
        ctx.TryCancel();
        break;
      }
      kvnode::v1::ConsoleInput in;
      in.set_data(data);
      if (!stream->Write(in)) break;
    }
  });
  kvnode::v1::ConsoleOutput out;
  while (stream->Read(&out)) {
    (void)!write(STDOUT_FILENO, out.data().data(), out.data().size());
  }
  done = true;
  input.join();
  grpc::Status s = stream->Finish();
  if (tty) {
    tcsetattr(STDIN_FILENO, TCSANOW, &saved);
    std::cerr << "\n";
  }
  if (!s.ok() && s.error_code() != grpc::StatusCode::CANCELLED) return cli.RpcError(s);
  return 0;
}

}  // namespace kvnode
