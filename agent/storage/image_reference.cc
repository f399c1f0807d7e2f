#include "agent/storage/image_reference.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace kvnode {

std::string ImageReference::Name() const { return absl::StrCat(registry, "/", repository); }

std::string ImageReference::String() const {
  std::string out = Name();
  if (!tag.empty() && (digest.empty() || tag != "latest")) absl::StrAppend(&out, ":", tag);
  if (!digest.empty()) absl::StrAppend(&out, "@", digest);
  return out;
}

std::string ImageReference::Pinned(absl::string_view pinned) const {
  return absl::StrCat(Name(), "@", pinned);
}

absl::StatusOr<ImageReference> ParseImageReference(absl::string_view ref) {
  ImageReference out;
  absl::string_view rest = ref;
  if (size_t at = rest.find('@'); at != absl::string_view::npos) {
    absl::string_view digest = rest.substr(at + 1);
    if (!absl::StartsWith(digest, "sha256:") || digest.size() != 7 + 64 ||
        !std::all_of(digest.begin() + 7, digest.end(), [](char c) {
          return absl::ascii_isdigit(static_cast<unsigned char>(c)) || (c >= 'a' && c <= 'f');
        })) {
      return absl::InvalidArgumentError(absl::StrCat(
          "image \"", ref, "\": only sha256 digests of 64 lower-case hex digits can be pulled"));
    }
    out.digest = std::string(digest);
    rest = rest.substr(0, at);
  }
  size_t slash = rest.rfind('/');
  size_t colon = rest.rfind(':');
  if (colon != absl::string_view::npos && (slash == absl::string_view::npos || colon > slash)) {
    out.tag = std::string(rest.substr(colon + 1));
    rest = rest.substr(0, colon);
  }
  if (out.tag.empty() && out.digest.empty()) out.tag = "latest";
  size_t first = rest.find('/');
  absl::string_view head = first == absl::string_view::npos ? "" : rest.substr(0, first);
  if (!head.empty() &&
      (head.find_first_of(".:") != absl::string_view::npos || head == "localhost")) {
    out.registry = std::string(head);
    rest = rest.substr(first + 1);
  } else {
    out.registry = "docker.io";
  }
  if (out.registry == "index.docker.io") out.registry = "docker.io";
  if (rest.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("image \"", ref, "\" names no repository"));
  }
  out.repository = std::string(rest);
  if (out.registry == "docker.io" && out.repository.find('/') == std::string::npos) {
    out.repository = "library/" + out.repository;
  }
  return out;
}

bool RegistryMatches(absl::string_view registry, absl::string_view host) {
  if (registry == host) return true;
  return host.find(':') == absl::string_view::npos && absl::StartsWith(registry, host) &&
         registry.size() > host.size() && registry[host.size()] == ':';
}

}  // namespace kvnode
