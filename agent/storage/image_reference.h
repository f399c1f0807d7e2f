// Container image references as the container runtimes read them ("docker's grammar"):
// [registry[:port]/]repository[:tag][@digest], where a first component with a dot or a colon,
// or "localhost", names the registry, Docker Hub ("docker.io") is the default registry, and
// a one-component Docker Hub name lives under "library/". Admission has already checked the
// grammar (ImageReferenceProblem in agent/manifest/admission.cc); this splits what it admitted.
//
// Pure: no I/O. Thread-safe.
#ifndef KVNODE_AGENT_STORAGE_IMAGE_REFERENCE_H_
#define KVNODE_AGENT_STORAGE_IMAGE_REFERENCE_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kvnode {

struct ImageReference {
  std::string registry;    // "docker.io", "quay.io", "10.0.0.5:5000"
  std::string repository;  // "library/busybox", "containerdisks/fedora"
  std::string tag;         // "latest" when neither a tag nor a digest was written
  std::string digest;      // "sha256:<64 hex>", or "" when none was written

  // registry/repository
  std::string Name() const;
  // The full reference: Name():tag, Name()@digest, or Name():tag@digest.
  std::string String() const;
  // Name()@`digest`: the image pinned to one manifest.
  std::string Pinned(absl::string_view digest) const;
};

// InvalidArgument when `ref` has no repository or a digest that is not sha256:<64 hex>.
absl::StatusOr<ImageReference> ParseImageReference(absl::string_view ref);

// Whether `registry` ("host" or "host:port") is `host` (the same spelling; a host written
// without a port also matches that host on any port).
bool RegistryMatches(absl::string_view registry, absl::string_view host);

}  // namespace kvnode

#endif  // KVNODE_AGENT_STORAGE_IMAGE_REFERENCE_H_
