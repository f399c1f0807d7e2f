#include "agent/cli/guest_commands.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "agent/base/fd_write.h"
#include "agent/cli/output.h"
#include "google/protobuf/struct.pb.h"
#include "grpcpp/grpcpp.h"

namespace kvnode {
namespace {

using google::protobuf::Struct;
using google::protobuf::Value;

// --- parsing --------------------------------------------------------------------------------

std::string TargetKind(const std::string& kind) {
  std::string k = absl::AsciiStrToLower(kind);
  if (k == "vmi" || k == "vmis" || k == "virtualmachineinstance" ||
      k == "virtualmachineinstances") {
    return "vmi";
  }
  if (k == "vm" || k == "vms" || k == "virtualmachine" || k == "virtualmachines") return "vm";
  return "";
}

// The VMI a target names: a VM's VMI has the VM's name.
kvnode::v1::ObjectRef TargetRef(const Cli& cli, const GuestTarget& t) {
  kvnode::v1::ObjectRef ref = cli.Ref(t.name);
  if (!t.ns.empty()) ref.set_namespace_(t.ns);
  return ref;
}

// --- a stream carried to and from file descriptors --------------------------------------------

// Carries bytes read from `in_fd` to the stream and the stream's bytes to `out_fd` until the
// far side ends the stream; an end of `in_fd` closes the stream's sending half only (the
// answer may still come). Returns the stream's final status.
template <typename W, typename R>
grpc::Status Pump(grpc::ClientContext* ctx, grpc::ClientReaderWriter<W, R>* stream, int in_fd,
                  int out_fd) {
  std::atomic<bool> done{false};
  std::thread up([&] {
    char buf[16384];
    while (!done) {
      pollfd p = {in_fd, POLLIN, 0};
      int r = poll(&p, 1, 200);
      if (r == 0 || (r < 0 && errno == EINTR)) continue;
      ssize_t n = r > 0 ? read(in_fd, buf, sizeof(buf)) : -1;
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      W w;
      w.set_data(std::string(buf, n));
      if (!stream->Write(w)) break;
    }
    stream->WritesDone();
  });
  R r;
  while (stream->Read(&r)) {
    if (!r.data().empty() && !WriteAll(out_fd, r.data())) {
      ctx->TryCancel();
      break;
    }
  }
  done = true;
  up.join();
  return stream->Finish();
}

// A listening TCP socket on address:port (0: any free port); the port it got in `bound`.
absl::StatusOr<int> Listen(const std::string& address, int port, int* bound) {
  sockaddr_in sa = {};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, address.c_str(), &sa.sin_addr) != 1) {
    return absl::InvalidArgumentError("--address: \"" + address + "\" is not an IPv4 address");
  }
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::ErrnoToStatus(errno, "socket");
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) < 0 || listen(fd, 16) < 0) {
    int e = errno;
    close(fd);
    return absl::ErrnoToStatus(e, absl::StrCat("listen tcp ", address, ":", port));
  }
  socklen_t len = sizeof(sa);
  getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  *bound = ntohs(sa.sin_port);
  return fd;
}

// One forwarded connection: a PortForward stream to `remote` of the guest, carried to `fd`.
// Returns the error to print, or "" when it ended well.
std::string ForwardConnection(const Cli& cli, const kvnode::v1::ObjectRef& ref, int remote,
                              int in_fd, int out_fd) {
  grpc::ClientContext ctx;
  auto stream = cli.stub->PortForward(&ctx);
  kvnode::v1::PortForwardData first;
  *first.mutable_ref() = ref;
  first.set_port(remote);
  kvnode::v1::PortForwardData hello;
  if (!stream->Write(first) || !stream->Read(&hello)) {
    stream->WritesDone();
    return DescribeRpcError(stream->Finish());
  }
  grpc::Status s = Pump(&ctx, stream.get(), in_fd, out_fd);
  if (!s.ok() && s.error_code() != grpc::StatusCode::CANCELLED) return DescribeRpcError(s);
  return "";
}

std::string SelfPath() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, n) : "kvctl";
}

// The ProxyCommand through which ssh and scp reach port `port` of the target.
std::string ProxyCommand(const Cli& cli, const GuestTarget& t, int port) {
  const std::string ns = t.ns.empty() ? cli.ns : t.ns;
  return absl::StrCat("ProxyCommand=", SelfPath(), " --socket ", cli.socket,
                      " port-forward --stdio=true ", t.kind, "/", t.name, "/", ns, " ", port);
}

// Runs `argv` in place of kvctl (ssh and scp own the terminal from here).
int Exec(const Cli& cli, const std::vector<std::string>& argv) {
  std::vector<char*> c;
  for (const auto& a : argv) c.push_back(const_cast<char*>(a.c_str()));
  c.push_back(nullptr);
  std::cout.flush();
  execvp(c[0], c.data());
  *cli.err << "error: cannot run " << argv[0] << ": " << strerror(errno)
           << " (kvctl ssh and scp need the OpenSSH client)\n";
  return 1;
}

// The ssh options both ssh and scp take: the proxy, -t options, -i KEY (which must exist).
absl::StatusOr<std::vector<std::string>> SshOptions(const Cli& cli, const GuestTarget& t,
                                                    int port) {
  std::vector<std::string> opts = {"-o", ProxyCommand(cli, t, port)};
  for (const auto& o : cli.flags.GetAll("local-ssh-opts")) opts.push_back(o);
  if (auto key = cli.flags.Get("identity-file"); key.has_value()) {
    struct stat st;
    if (stat(key->c_str(), &st) != 0) {
      return absl::InvalidArgumentError(absl::StrCat("--identity-file: ", *key, ": ",
                                                     strerror(errno)));
    }
    opts.insert(opts.end(), {"-i", *key});
  }
  return opts;
}

absl::StatusOr<int> SshPort(const Cli& cli) {
  auto port = cli.flags.GetInt("port", 22);
  if (!port.ok()) return port.status();
  if (*port < 1 || *port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("--port: ", *port, " is outside 1-65535"));
  }
  return static_cast<int>(*port);
}

// ssh's host name for a target (only for known_hosts): vmi.NAME.NAMESPACE, as virtctl.
std::string SshHost(const Cli& cli, const GuestTarget& t) {
  return absl::StrCat(t.user.empty() ? "" : t.user + "@", t.kind, ".", t.name, ".",
                      t.ns.empty() ? cli.ns : t.ns);
}

}  // namespace

absl::StatusOr<GuestTarget> ParseGuestTarget(const std::string& target) {
  GuestTarget t;
  std::string arg = target;
  if (size_t at = arg.find('@'); at != std::string::npos) {
    t.user = arg.substr(0, at);
    if (t.user.empty()) return absl::InvalidArgumentError("expected username before '@'");
    arg = arg.substr(at + 1);
  }
  if (arg.empty()) return absl::InvalidArgumentError("expected target after '@'");
  std::vector<std::string> parts = absl::StrSplit(arg, '/');
  if (parts.size() < 2 || parts.size() > 3) {
    return absl::InvalidArgumentError(absl::StrCat(
        "target \"", arg, "\" is not KIND/NAME[/NAMESPACE] (for example vmi/testvmi)"));
  }
  t.kind = TargetKind(parts[0]);
  if (t.kind.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unsupported resource type \"", parts[0], "\" (vmi or vm)"));
  }
  t.name = parts[1];
  if (parts.size() == 3) {
    t.ns = parts[2];
  } else if (size_t dot = t.name.find('.'); dot != std::string::npos) {
    // The legacy form KIND/NAME.NAMESPACE (names of VMIs have no dots).
    t.ns = t.name.substr(dot + 1);
    t.name.resize(dot);
  }
  if (t.name.empty()) return absl::InvalidArgumentError("target has no name");
  return t;
}

absl::StatusOr<PortPair> ParsePortPair(const std::string& arg) {
  std::string spec = arg;
  if (size_t slash = spec.find('/'); slash != std::string::npos) {
    std::string proto = absl::AsciiStrToLower(spec.substr(slash + 1));
    if (proto != "tcp") {
      return absl::InvalidArgumentError(absl::StrCat(
          "port \"", arg, "\": protocol ", proto, " is not supported (only tcp)"));
    }
    spec = spec.substr(0, slash);
  }
  std::vector<std::string> parts = absl::StrSplit(spec, ':');
  PortPair pair;
  if (parts.size() > 2 || !absl::SimpleAtoi(parts[0], &pair.local) ||
      !absl::SimpleAtoi(parts.back(), &pair.remote)) {
    return absl::InvalidArgumentError(
        absl::StrCat("port \"", arg, "\" is not PORT or LOCAL:REMOTE"));
  }
  if (parts.size() == 1) pair.local = pair.remote;
  if (pair.local < 0 || pair.local > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("port \"", arg, "\": local port ", pair.local, " is outside 0-65535"));
  }
  if (pair.remote < 1 || pair.remote > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("port \"", arg, "\": remote port ", pair.remote, " is outside 1-65535"));
  }
  return pair;
}

// --- the guest agent's lists and freeze -------------------------------------------------------

int CmdUserList(Cli& cli) {
  if (cli.args.size() != 1) return cli.Usage("usage: kvctl userlist NAME");
  kvnode::v1::VirtualMachineInstanceGuestOSUserList list;
  grpc::ClientContext ctx;
  grpc::Status s = cli.stub->UserList(Deadline(&ctx), cli.Ref(cli.args[0]), &list);
  if (!s.ok()) return cli.RpcError(s);
  // KubeVirt's VirtualMachineInstanceGuestOSUserList as virtctl prints it.
  Struct out;
  (*out.mutable_fields())["metadata"].mutable_struct_value();
  auto* items = (*out.mutable_fields())["items"].mutable_list_value();
  for (const auto& u : list.items()) {
    auto& f = *items->add_values()->mutable_struct_value()->mutable_fields();
    f["userName"].set_string_value(u.user_name());
    if (!u.domain().empty()) f["domain"].set_string_value(u.domain());
    if (u.login_time() != 0) f["loginTime"].set_number_value(u.login_time());
  }
  *cli.out << MessageToJson(out);
  return 0;
}

int CmdFsList(Cli& cli) {
  if (cli.args.size() != 1) return cli.Usage("usage: kvctl fslist NAME");
  kvnode::v1::VirtualMachineInstanceFileSystemList list;
  grpc::ClientContext ctx;
  grpc::Status s = cli.stub->FilesystemList(Deadline(&ctx), cli.Ref(cli.args[0]), &list);
  if (!s.ok()) return cli.RpcError(s);
  // KubeVirt's VirtualMachineInstanceFileSystemList as virtctl prints it.
  Struct out;
  (*out.mutable_fields())["metadata"].mutable_struct_value();
  auto* items = (*out.mutable_fields())["items"].mutable_list_value();
  for (const auto& fs : list.items()) {
    auto& f = *items->add_values()->mutable_struct_value()->mutable_fields();
    f["diskName"].set_string_value(fs.disk_name());
    f["mountPoint"].set_string_value(fs.mount_point());
    f["fileSystemType"].set_string_value(fs.file_system_type());
    f["usedBytes"].set_number_value(static_cast<double>(fs.used_bytes()));
    f["totalBytes"].set_number_value(static_cast<double>(fs.total_bytes()));
    if (fs.disk_size() == 0) continue;
    auto* disks = f["disk"].mutable_list_value();
    for (const auto& d : fs.disk()) {
      auto& df = *disks->add_values()->mutable_struct_value()->mutable_fields();
      if (!d.serial().empty()) df["serial"].set_string_value(d.serial());
      df["busType"].set_string_value(d.bus_type());
    }
  }
  *cli.out << MessageToJson(out);
  return 0;
}

int CmdFreeze(Cli& cli) {
  if (cli.args.size() != 1) return cli.Usage("usage: kvctl freeze NAME [--unfreeze-timeout 5m]");
  absl::Duration timeout = absl::Seconds(300);  // KubeVirt's default freeze timeout
  if (cli.flags.IsSet("unfreeze-timeout") &&
      (!absl::ParseDuration(cli.flags.GetOr("unfreeze-timeout", ""), &timeout) ||
       timeout < absl::ZeroDuration())) {
    return cli.Usage("--unfreeze-timeout: \"" + cli.flags.GetOr("unfreeze-timeout", "") +
                     "\" is not a duration of zero or more (for example 5m, 30s; 0 never thaws)");
  }
  kvnode::v1::FreezeVMIRequest req;
  *req.mutable_ref() = cli.Ref(cli.args[0]);
  req.set_unfreeze_timeout_seconds(static_cast<int32_t>(absl::ToInt64Seconds(timeout)));
  kvnode::v1::VirtualMachineInstance vmi;
  grpc::ClientContext ctx;
  grpc::Status s = cli.stub->FreezeVMI(Deadline(&ctx), req, &vmi);
  if (!s.ok()) return cli.RpcError(s);
  *cli.out << "VMI " << cli.args[0] << " was frozen";
  if (timeout > absl::ZeroDuration()) {
    *cli.out << " (thawed after " << absl::FormatDuration(timeout) << " unless unfrozen)";
  }
  *cli.out << "\n";
  return 0;
}

int CmdUnfreeze(Cli& cli) {
  if (cli.args.size() != 1) return cli.Usage("usage: kvctl unfreeze NAME");
  kvnode::v1::VirtualMachineInstance vmi;
  grpc::ClientContext ctx;
  grpc::Status s = cli.stub->UnfreezeVMI(Deadline(&ctx), cli.Ref(cli.args[0]), &vmi);
  if (!s.ok()) return cli.RpcError(s);
  *cli.out << "VMI " << cli.args[0] << " was unfrozen\n";
  return 0;
}

// --- VNC ------------------------------------------------------------------------------------

namespace {

int Screenshot(Cli& cli, const std::string& name) {
  std::string file = cli.flags.GetOr("file", cli.flags.GetOr("filename", ""));
  if (file.empty()) return cli.Usage("--file (-f) is required: where the PNG goes, - for stdout");
  kvnode::v1::ScreenshotResponse shot;
  grpc::ClientContext ctx;
  grpc::Status s = cli.stub->Screenshot(Deadline(&ctx, absl::Seconds(60)), cli.Ref(name), &shot);
  if (!s.ok()) return cli.RpcError(s);
  if (file == "-") {
    if (!WriteAll(STDOUT_FILENO, shot.png())) {
      *cli.err << "error: failed to write image to stdout: " << strerror(errno) << "\n";
      return 1;
    }
    return 0;
  }
  std::ofstream f(file, std::ios::binary | std::ios::trunc);
  f << shot.png();
  f.close();
  if (!f) {
    *cli.err << "error: --file: cannot write " << file << ": " << strerror(errno) << "\n";
    return 1;
  }
  return 0;
}

// The viewer virtctl would start, if one is installed.
std::vector<std::string> VncViewer(int port) {
  for (const char* dir : {"/usr/bin", "/usr/local/bin"}) {
    std::string rv = std::string(dir) + "/remote-viewer";
    if (access(rv.c_str(), X_OK) == 0) return {rv, absl::StrCat("vnc://127.0.0.1:", port)};
    std::string tiger = std::string(dir) + "/vncviewer";
    if (access(tiger.c_str(), X_OK) == 0) return {tiger, absl::StrCat("127.0.0.1::", port)};
  }
  return {};
}

}  // namespace

int CmdVnc(Cli& cli) {
  if (!cli.args.empty() && cli.args[0] == "screenshot") {
    if (cli.args.size() != 2) return cli.Usage("usage: kvctl vnc screenshot NAME -f FILE");
    return Screenshot(cli, cli.args[1]);
  }
  if (cli.args.size() != 1) return cli.Usage("usage: kvctl vnc NAME --proxy-only [--port N]");
  const std::string name = cli.args[0];
  auto port = cli.flags.GetInt("port", 0);
  if (!port.ok()) return cli.Usage(std::string(port.status().message()));
  if (*port < 0 || *port > 65535) {
    return cli.Usage(absl::StrCat("--port: ", *port, " is outside 0-65535"));
  }
  const bool proxy_only = cli.flags.GetBool("proxy-only");
  int bound = 0;
  auto listener = Listen(cli.flags.GetOr("address", "127.0.0.1"), static_cast<int>(*port), &bound);
  if (!listener.ok()) {
    *cli.err << "error: " << listener.status().message() << "\n";
    return 1;
  }
  pid_t viewer = 0;
  if (proxy_only) {
    *cli.out << "{\"port\":" << bound << "}" << std::endl;
  } else {
    std::vector<std::string> argv = VncViewer(bound);
    if (argv.empty()) {
      close(*listener);
      *cli.err << "error: no VNC viewer found (remote-viewer or vncviewer); run kvctl vnc "
               << name << " --proxy-only and connect a VNC client to the port it prints\n";
      return 1;
    }
    viewer = fork();
    if (viewer == 0) {
      std::vector<char*> c;
      for (auto& a : argv) c.push_back(a.data());
      c.push_back(nullptr);
      execv(c[0], c.data());
      _exit(127);
    }
  }
  // One VNC client, as virtctl: the session ends when it leaves.
  int conn = accept4(*listener, nullptr, nullptr, SOCK_CLOEXEC);
  close(*listener);
  if (conn < 0) {
    *cli.err << "error: accept: " << strerror(errno) << "\n";
    return 1;
  }
  grpc::ClientContext ctx;
  auto stream = cli.stub->VNC(&ctx);
  kvnode::v1::ConsoleInput first;
  *first.mutable_ref() = cli.Ref(name);
  grpc::Status s = stream->Write(first) ? Pump(&ctx, stream.get(), conn, conn) : stream->Finish();
  close(conn);
  if (viewer > 0) waitpid(viewer, nullptr, 0);
  if (!s.ok() && s.error_code() != grpc::StatusCode::CANCELLED) return cli.RpcError(s);
  return 0;
}

// --- port-forward, ssh, scp -----------------------------------------------------------------

int CmdPortForward(Cli& cli) {
  if (cli.args.size() < 2) {
    return cli.Usage("usage: kvctl port-forward vmi/NAME LOCAL:REMOTE... | --stdio vmi/NAME PORT");
  }
  auto target = ParseGuestTarget(cli.args[0]);
  if (!target.ok()) return cli.Usage(std::string(target.status().message()));
  const kvnode::v1::ObjectRef ref = TargetRef(cli, *target);
  std::vector<PortPair> ports;
  for (size_t i = 1; i < cli.args.size(); ++i) {
    auto pair = ParsePortPair(cli.args[i]);
    if (!pair.ok()) return cli.Usage(std::string(pair.status().message()));
    ports.push_back(*pair);
  }
  if (cli.flags.GetBool("stdio")) {
    if (ports.size() != 1) return cli.Usage("--stdio forwards exactly one port");
    std::string error = ForwardConnection(cli, ref, ports[0].remote, STDIN_FILENO, STDOUT_FILENO);
    if (!error.empty()) {
      std::cerr << error << "\n";
      return 1;
    }
    return 0;
  }
  const std::string address = cli.flags.GetOr("address", "127.0.0.1");
  std::vector<std::thread> listeners;
  for (const PortPair& p : ports) {
    int bound = 0;
    auto fd = Listen(address, p.local, &bound);
    if (!fd.ok()) {
      *cli.err << "error: " << fd.status().message() << "\n";
      return 1;
    }
    *cli.out << "Forwarding from " << address << ":" << bound << " -> " << p.remote << std::endl;
    listeners.emplace_back([&cli, ref, remote = p.remote, listener = *fd] {
      while (true) {
        int conn = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
        if (conn < 0) {
          if (errno == EINTR || errno == ECONNABORTED) continue;
          return;
        }
        std::thread([&cli, ref, remote, conn] {
          std::string error = ForwardConnection(cli, ref, remote, conn, conn);
          if (!error.empty()) std::cerr << error << "\n";
          close(conn);
        }).detach();
      }
    });
  }
  for (auto& t : listeners) t.join();  // until interrupted
  return 0;
}

int CmdSsh(Cli& cli) {
  if (cli.args.empty() || cli.args.size() > 2) {
    return cli.Usage("usage: kvctl ssh [USER@]vmi/NAME[/NAMESPACE] [-i KEY] [-c COMMAND]");
  }
  auto target = ParseGuestTarget(cli.args[0]);
  if (!target.ok()) return cli.Usage(std::string(target.status().message()));
  if (auto user = cli.flags.Get("username"); user.has_value()) target->user = *user;
  auto port = SshPort(cli);
  if (!port.ok()) return cli.Usage(std::string(port.status().message()));
  auto opts = SshOptions(cli, *target, *port);
  if (!opts.ok()) {
    *cli.err << "error: " << opts.status().message() << "\n";
    return 1;
  }
  std::vector<std::string> argv = {"ssh"};
  argv.insert(argv.end(), opts->begin(), opts->end());
  argv.push_back(SshHost(cli, *target));
  if (auto command = cli.flags.Get("command"); command.has_value()) argv.push_back(*command);
  if (cli.args.size() == 2) argv.push_back(cli.args[1]);
  return Exec(cli, argv);
}

int CmdScp(Cli& cli) {
  if (cli.args.size() != 2) {
    return cli.Usage("usage: kvctl scp [-r] SRC DST (one of them [USER@]vmi/NAME[/NS]:PATH)");
  }
  // The remote operand is the one whose part before ':' is a target.
  std::optional<GuestTarget> target;
  std::vector<std::string> operands;
  for (const std::string& a : cli.args) {
    size_t colon = a.find(':');
    auto t = colon == std::string::npos ? absl::StatusOr<GuestTarget>(absl::NotFoundError(""))
                                        : ParseGuestTarget(a.substr(0, colon));
    if (!t.ok()) {
      operands.push_back(a);
      continue;
    }
    if (target.has_value()) return cli.Usage("scp copies between this machine and one guest");
    if (auto user = cli.flags.Get("username"); user.has_value()) t->user = *user;
    operands.push_back(SshHost(cli, *t) + ":" + a.substr(colon + 1));
    target = *t;
  }
  if (!target.has_value()) {
    return cli.Usage("neither SRC nor DST is [USER@]vmi/NAME[/NAMESPACE]:PATH");
  }
  auto port = SshPort(cli);
  if (!port.ok()) return cli.Usage(std::string(port.status().message()));
  auto opts = SshOptions(cli, *target, *port);
  if (!opts.ok()) {
    *cli.err << "error: " << opts.status().message() << "\n";
    return 1;
  }
  std::vector<std::string> argv = {"scp"};
  argv.insert(argv.end(), opts->begin(), opts->end());
  if (cli.flags.GetBool("recursive")) argv.push_back("-r");
  argv.insert(argv.end(), operands.begin(), operands.end());
  return Exec(cli, argv);
}

}  // namespace kvnode
