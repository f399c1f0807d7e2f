#include "agent/migration/migration_config.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace kvnode {
namespace {

bool IsHostPort(const std::string& v) {
  size_t colon = v.rfind(':');
  int port = 0;
  return colon != std::string::npos && colon > 0 &&
         absl::SimpleAtoi(v.substr(colon + 1), &port) && port > 0 && port <= 65535;
}

absl::Status ParseTimeout(const FlagSet& flags, const char* flag, absl::Duration* out) {
  auto v = flags.Get(flag);
  if (!v) return absl::OkStatus();
  if (!absl::ParseDuration(*v, out) || *out < absl::Seconds(1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", flag, ": expected a duration of at least 1s (for example 150s), got \"", *v, "\""));
  }
  return absl::OkStatus();
}

struct GuestPauseChoice {
  const char* flag_value;
  kvnode::v1::MigrationGuestPause value;
  const char* meaning;
};
constexpr GuestPauseChoice kGuestPauseChoices[] = {
    {"auto", kvnode::v1::MIGRATION_GUEST_PAUSE_AUTO,
     "the guest is paused for the copy under TCG on QEMU before 9.0 (its dirty tracking loses "
     "guest writes), live otherwise"},
    {"never", kvnode::v1::MIGRATION_GUEST_PAUSE_NEVER,
     "always live (under TCG on QEMU before 9.0 a guest can arrive damaged)"},
    {"always", kvnode::v1::MIGRATION_GUEST_PAUSE_ALWAYS,
     "the guest is paused for the whole copy"},
};

}  // namespace

std::string DescribeGuestPause(kvnode::v1::MigrationGuestPause pause) {
  for (const GuestPauseChoice& c : kGuestPauseChoices) {
    if (c.value == pause) return absl::StrCat(c.flag_value, ": ", c.meaning);
  }
  return absl::StrCat("unknown (", pause, ")");
}

void DeclareMigrationFlags(FlagSet* flags) {
  flags->Value("migration-listen").Value("peer").Value("migration-bandwidth")
      .Value("migration-progress-timeout").Value("migration-completion-timeout-per-gib")
      .Value("migration-max-outbound").Value("migration-transport")
      .Value("migration-guest-pause").Bool("migration-allow-post-copy")
      .Bool("migration-allow-auto-converge").Bool("shared-volumes");
}

absl::Status ParseMigrationFlags(const FlagSet& flags, MigrationConfig* c) {
  c->listen = flags.GetOr("migration-listen", "");
  if (!c->listen.empty() && !IsHostPort(c->listen)) {
    return absl::InvalidArgumentError("--migration-listen: expected HOST:PORT, got \"" +
                                      c->listen + "\"");
  }
  for (const std::string& peer : flags.GetAll("peer")) {
    size_t eq = peer.find('=');
    if (eq == std::string::npos || eq == 0 || !IsHostPort(peer.substr(eq + 1))) {
      return absl::InvalidArgumentError("--peer: expected NAME=HOST:PORT, got \"" + peer + "\"");
    }
    c->peers[peer.substr(0, eq)] = peer.substr(eq + 1);
  }
  if (auto bw = flags.Get("migration-bandwidth")) {
    if (!absl::SimpleAtoi(*bw, &c->policy.bandwidth_mib)) {
      return absl::InvalidArgumentError(
          "--migration-bandwidth: expected MiB/s as a whole number (0: unlimited), got \"" + *bw +
          "\"");
    }
  }
  if (absl::Status s = ParseTimeout(flags, "migration-progress-timeout",
                                    &c->policy.progress_timeout);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = ParseTimeout(flags, "migration-completion-timeout-per-gib",
                                    &c->policy.completion_timeout_per_gib);
      !s.ok()) {
    return s;
  }
  if (auto n = flags.Get("migration-max-outbound")) {
    if (!absl::SimpleAtoi(*n, &c->policy.max_outbound) || c->policy.max_outbound < 1) {
      return absl::InvalidArgumentError(
          "--migration-max-outbound: expected a number of at least 1, got \"" + *n + "\"");
    }
  }
  const std::string transport = flags.GetOr("migration-transport", "direct");
  if (transport != "direct" && transport != "tunnelled") {
    return absl::InvalidArgumentError(
        "--migration-transport: expected direct or tunnelled, got \"" + transport + "\"");
  }
  c->policy.tunnelled = transport == "tunnelled";
  const std::string pause = flags.GetOr("migration-guest-pause", "auto");
  const GuestPauseChoice* chosen = nullptr;
  for (const GuestPauseChoice& choice : kGuestPauseChoices) {
    if (pause == choice.flag_value) chosen = &choice;
  }
  if (chosen == nullptr) {
    return absl::InvalidArgumentError(
        "--migration-guest-pause: expected auto, never or always, got \"" + pause + "\"");
  }
  c->policy.guest_pause = chosen->value;
  c->policy.allow_post_copy = flags.GetBool("migration-allow-post-copy");
  c->policy.allow_auto_converge = flags.GetBool("migration-allow-auto-converge");
  if (flags.GetBool("shared-volumes")) {
    return absl::InvalidArgumentError(
        "--shared-volumes: removed; PVCs are shared when their storage class is: mark one "
        "shared and give it the directory every node sees (--storage-class "
        "name=shared,shared=true,path=/mnt/kvnode-shared[,default=true])");
  }
  return absl::OkStatus();
}

}  // namespace kvnode
