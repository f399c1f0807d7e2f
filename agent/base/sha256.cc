#include "agent/base/sha256.h"

#include <openssl/evp.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

namespace kvnode {
namespace {

struct DigestContext {
  DigestContext() : ctx(EVP_MD_CTX_new()) { EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr); }
  ~DigestContext() { EVP_MD_CTX_free(ctx); }
  void Update(const void* data, size_t n) { EVP_DigestUpdate(ctx, data, n); }
  std::string FinalHex() {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    EVP_DigestFinal_ex(ctx, md, &len);
    static constexpr char kHex[] = "0123456789abcdef";
    std::string hex;
    hex.reserve(2 * len);
    for (unsigned int i = 0; i < len; ++i) {
      hex.push_back(kHex[md[i] >> 4]);
      hex.push_back(kHex[md[i] & 0xf]);
    }
    return hex;
  }
  EVP_MD_CTX* ctx;
};

}  // namespace

std::string Sha256Hex(absl::string_view data) {
  DigestContext d;
  d.Update(data.data(), data.size());
  return d.FinalHex();
}

absl::StatusOr<std::string> Sha256HexOfFd(int fd) {
  DigestContext d;
  std::vector<char> buf(1 << 20);
  while (true) {
    ssize_t n = read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::ErrnoToStatus(errno, "read");
    if (n == 0) break;
    d.Update(buf.data(), static_cast<size_t>(n));
  }
  return d.FinalHex();
}

}  // namespace kvnode
