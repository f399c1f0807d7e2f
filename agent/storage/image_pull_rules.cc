// The pure rules of registry pulls: skopeo's registries.conf, its error messages, docker
// config JSON, cache entry names (image_puller.h).
#include <algorithm>
#include <cstdio>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "agent/base/sha1.h"
#include "agent/storage/image_puller.h"
#include "agent/storage/image_reference.h"

namespace kvnode {
namespace {

// A TOML basic string.
std::string Toml(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  return out + "\"";
}

}  // namespace

std::string RegistriesConf(const RegistryOptions& options) {
  std::string out =
      "# Written by kvnode-handler from its --insecure-registry and --registry-mirror flags.\n"
      "unqualified-search-registries = []\n";
  std::set<std::string> done;
  auto insecure = [&](const std::string& host) {
    return std::any_of(options.insecure.begin(), options.insecure.end(),
                       [&](const std::string& i) { return RegistryMatches(host, i); });
  };
  for (const auto& [registry, mirror] : options.mirrors) {
    if (!done.insert(registry).second) continue;
    absl::StrAppend(&out, "\n[[registry]]\nprefix = ", Toml(registry), "\nlocation = ",
                    Toml(registry), "\ninsecure = ", insecure(registry) ? "true" : "false", "\n");
    for (const auto& [r, m] : options.mirrors) {
      if (r != registry) continue;
      std::string host = m.substr(0, m.find('/'));
      absl::StrAppend(&out, "[[registry.mirror]]\nlocation = ", Toml(m),
                      "\ninsecure = ", insecure(host) ? "true" : "false", "\n");
    }
  }
  for (const std::string& host : options.insecure) {
    if (!done.insert(host).second) continue;
    absl::StrAppend(&out, "\n[[registry]]\nlocation = ", Toml(host), "\ninsecure = true\n");
  }
  return out;
}

std::string SkopeoErrorMessage(const std::string& stderr_text) {
  std::string message;
  size_t at = stderr_text.rfind("msg=\"");
  if (at == std::string::npos) {
    message = stderr_text;
  } else {
    for (size_t i = at + 5; i < stderr_text.size(); ++i) {
      char c = stderr_text[i];
      if (c == '\\' && i + 1 < stderr_text.size()) {
        message.push_back(stderr_text[++i]);
      } else if (c == '"') {
        break;
      } else {
        message.push_back(c);
      }
    }
  }
  // "Error parsing image name "docker://x": ..." and "initializing source docker://x: ..."
  // repeat the reference the caller names already.
  for (absl::string_view prefix : {"Error parsing image name \"", "initializing source "}) {
    if (!absl::StartsWith(message, prefix)) continue;
    size_t colon = message.find(": ", prefix.size());
    if (colon != std::string::npos) message = message.substr(colon + 2);
  }
  while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) {
    message.pop_back();
  }
  return message;
}

std::string PulledImageEntry(const std::string& digest, const std::string& path) {
  std::string entry = absl::StrCat("sha256-", absl::StripPrefix(digest, "sha256:"));
  if (path.empty()) return entry;
  return absl::StrCat(entry, "-", Sha1ShortHex(path));
}

}  // namespace kvnode
