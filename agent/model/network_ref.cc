#include "agent/model/network_ref.h"

namespace kvnode {

NetworkRef ParseNetworkName(absl::string_view network_name, absl::string_view vmi_namespace) {
  size_t slash = network_name.find('/');
  if (slash == absl::string_view::npos) {
    return {std::string(vmi_namespace), std::string(network_name)};
  }
  return {std::string(network_name.substr(0, slash)), std::string(network_name.substr(slash + 1))};
}

}  // namespace kvnode
