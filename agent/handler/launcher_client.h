// The handler's side of the kvnode.v1.Launcher service: one gRPC connection per VMI to the
// launcher that serves it, made with the VMI identity's rights (its socket lives in a dir that
// identity controls: LauncherPods::ConnectLauncher) and kept while it works, and the calls the
// VMI controller makes on it (the domain, Sync, Shutdown, Ping) with their deadlines.
//
// A connection belongs to one launcher process: a VMI whose launcher was replaced gets a new
// one at its next call, and a call on a connection that went away (UNAVAILABLE) drops it, so
// the next call connects again. A launcher that is still starting is waited for (up to what the
// call allows); one that died meanwhile is not.
//
// Thread-safe. Connect and the calls must not be made with the VMI controller's lock held: they
// ask the controller which launcher a VMI has (CurrentLauncher) and block on the network.
// Forget takes only this class's own lock (the controller calls it with its lock held).
#ifndef KVNODE_AGENT_HANDLER_LAUNCHER_CLIENT_H_
#define KVNODE_AGENT_HANDLER_LAUNCHER_CLIENT_H_

#include <sys/types.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "agent/base/state_layout.h"
#include "agent/handler/launcher_pods.h"
#include "agent/supervisor/launcher_ids.h"
#include "grpcpp/grpcpp.h"
#include "kvnode/v1/launcher.grpc.pb.h"

namespace kvnode {

class LauncherClient {
 public:
  // The launcher process a VMI has now.
  struct Launcher {
    pid_t pid = 0;
    uint64_t start_time = 0;
    bool operator==(const Launcher& o) const {
      return pid == o.pid && start_time == o.start_time;
    }
  };
  // The launcher of VMI `uid`; nullopt when there is no such VMI.
  using CurrentLauncher = std::function<std::optional<Launcher>(const std::string& uid)>;
  using Stub = kvnode::v1::Launcher::Stub;
  using Call = std::function<grpc::Status(Stub*, grpc::ClientContext*)>;

  // `pods` and `ids` are not owned; `ids` may be null (then no VMI holds an identity, and
  // nothing can be connected).
  LauncherClient(NodePaths paths, LauncherPods* pods, LauncherIds* ids, CurrentLauncher current);

  LauncherClient(const LauncherClient&) = delete;
  LauncherClient& operator=(const LauncherClient&) = delete;

  // A stub on the connection to VMI `uid`'s launcher: the kept one while it is that launcher's,
  // else a new connection, tried again until `wait` has passed while that launcher process
  // lives (a launcher still starting). NotFound when no VMI has `uid` or it holds no identity.
  absl::StatusOr<std::shared_ptr<Stub>> Connect(const std::string& uid,
                                                absl::Duration wait = absl::ZeroDuration());
  // Returns `status`, the result of a call on Connect(uid)'s stub; UNAVAILABLE (the connection
  // is gone) drops the kept connection.
  grpc::Status Check(const std::string& uid, grpc::Status status);
  // Drops the kept connection of `uid` (its VMI is gone).
  void Forget(const std::string& uid);

  // One call on the launcher of `uid`: connected (waiting up to `wait`), within `deadline`,
  // checked. A failure to connect is the call's status.
  grpc::Status Invoke(const std::string& uid, absl::Duration wait, absl::Duration deadline,
                      const Call& call);

  // The calls the controller makes, with their waits and deadlines.
  // The launcher's domain (with its live XML if asked): 10 s to connect, 10 s to answer.
  grpc::Status GetDomain(const std::string& uid, bool include_xml,
                         kvnode::v1::DomainStatus* domain);
  // The VMI as the domain is to be: up to 10 s for a launcher still starting, then 120 s (a
  // domain's definition, start or migration preparation).
  grpc::Status Sync(const std::string& uid, const kvnode::v1::LauncherSyncRequest& request);
  // Shut the domain down within `grace` seconds (0: destroy): 10 s to connect and to answer.
  grpc::Status Shutdown(const std::string& uid, int64_t grace_seconds);
  // A liveness ping: no wait to connect, `deadline` to answer.
  grpc::Status Ping(const std::string& uid, absl::Duration deadline);

  // Connections kept now (for tests).
  int connections();

 private:
  struct Kept {
    Launcher launcher;
    std::shared_ptr<grpc::Channel> channel;
    std::shared_ptr<Stub> stub;
  };

  const NodePaths paths_;
  LauncherPods* const pods_;
  LauncherIds* const ids_;
  const CurrentLauncher current_;

  absl::Mutex mu_;
  std::map<std::string, Kept> kept_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kvnode

#endif  // KVNODE_AGENT_HANDLER_LAUNCHER_CLIENT_H_
