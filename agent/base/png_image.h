// Screen images as libvirt hands them over (virDomainScreenshot: QEMU's screendump, binary PPM
// "P6", or PNG where QEMU writes it) turned into the PNG a user opens: a decoder for the one PPM
// form QEMU writes and a small PNG encoder (8-bit RGB, no interlace, zlib from the system).
//
// Pure functions; thread-safe.
#ifndef KVNODE_AGENT_BASE_PNG_IMAGE_H_
#define KVNODE_AGENT_BASE_PNG_IMAGE_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace kvnode {

// Pixels row by row, three bytes (R, G, B) each.
struct RgbImage {
  uint32_t width = 0;
  uint32_t height = 0;
  std::string rgb;
};

// A binary PPM ("P6", maxval 255, comments allowed in the header). InvalidArgument naming
// what is wrong for anything else.
absl::StatusOr<RgbImage> DecodePpm(std::string_view data);

// The image as a PNG file (colour type 2, bit depth 8).
std::string EncodePng(const RgbImage& image);

struct ImageSize {
  uint32_t width = 0;
  uint32_t height = 0;
};

// The width and height in a PNG's header; InvalidArgument when `png` is not a PNG.
absl::StatusOr<ImageSize> PngSize(std::string_view png);

}  // namespace kvnode

#endif  // KVNODE_AGENT_BASE_PNG_IMAGE_H_
