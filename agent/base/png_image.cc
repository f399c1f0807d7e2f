#include "agent/base/png_image.h"

#include <zlib.h>

#include <cctype>

#include "absl/strings/str_cat.h"

namespace kvnode {
namespace {

constexpr std::string_view kPngSignature("\x89PNG\r\n\x1a\n", 8);

void PutU32(std::string* out, uint32_t v) {
  out->push_back(static_cast<char>(v >> 24));
  out->push_back(static_cast<char>(v >> 16));
  out->push_back(static_cast<char>(v >> 8));
  out->push_back(static_cast<char>(v));
}

uint32_t GetU32(std::string_view s, size_t at) {
  auto b = [&](size_t i) { return static_cast<uint32_t>(static_cast<unsigned char>(s[at + i])); };
  return b(0) << 24 | b(1) << 16 | b(2) << 8 | b(3);
}

// One chunk: length, type, data, CRC of type and data.
void PutChunk(std::string* out, const char type[5], std::string_view data) {
  PutU32(out, static_cast<uint32_t>(data.size()));
  std::string typed(type, 4);
  typed.append(data);
  out->append(typed);
  uLong crc = crc32(0L, Z_NULL, 0);
  crc = crc32(crc, reinterpret_cast<const Bytef*>(typed.data()), static_cast<uInt>(typed.size()));
  PutU32(out, static_cast<uint32_t>(crc));
}

// The next whitespace-separated header token of a PPM, skipping "#" comments.
bool NextToken(std::string_view data, size_t* pos, std::string_view* token) {
  while (*pos < data.size()) {
    if (data[*pos] == '#') {
      while (*pos < data.size() && data[*pos] != '\n') ++*pos;
    } else if (isspace(static_cast<unsigned char>(data[*pos]))) {
      ++*pos;
    } else {
      break;
    }
  }
  size_t start = *pos;
  while (*pos < data.size() && !isspace(static_cast<unsigned char>(data[*pos])) &&
         data[*pos] != '#') {
    ++*pos;
  }
  *token = data.substr(start, *pos - start);
  return !token->empty();
}

bool ParseDimension(std::string_view token, uint32_t* out) {
  if (token.empty() || token.size() > 6) return false;
  uint32_t v = 0;
  for (char c : token) {
    if (!isdigit(static_cast<unsigned char>(c))) return false;
    v = v * 10 + static_cast<uint32_t>(c - '0');
  }
  *out = v;
  return v > 0;
}

}  // namespace

absl::StatusOr<RgbImage> DecodePpm(std::string_view data) {
  size_t pos = 0;
  std::string_view magic, w, h, maxval;
  if (!NextToken(data, &pos, &magic) || magic != "P6") {
    return absl::InvalidArgumentError("screen image is not a binary PPM (no P6 header)");
  }
  RgbImage image;
  if (!NextToken(data, &pos, &w) || !NextToken(data, &pos, &h) ||
      !ParseDimension(w, &image.width) || !ParseDimension(h, &image.height)) {
    return absl::InvalidArgumentError("PPM header has no valid width and height");
  }
  if (!NextToken(data, &pos, &maxval) || maxval != "255") {
    return absl::InvalidArgumentError(
        absl::StrCat("PPM maxval ", std::string(maxval), " is not supported (only 255)"));
  }
  ++pos;  // the single whitespace byte before the pixels
  const size_t want = static_cast<size_t>(image.width) * image.height * 3;
  if (pos > data.size() || data.size() - pos < want) {
    return absl::InvalidArgumentError(absl::StrCat("PPM of ", image.width, "x", image.height,
                                                   " is truncated"));
  }
  image.rgb.assign(data.substr(pos, want));
  return image;
}

std::string EncodePng(const RgbImage& image) {
  // Each row starts with filter type 0 (None).
  const size_t row = static_cast<size_t>(image.width) * 3;
  std::string raw;
  raw.reserve((row + 1) * image.height);
  for (uint32_t y = 0; y < image.height; ++y) {
    raw.push_back('\0');
    raw.append(image.rgb, y * row, row);
  }
  uLongf packed_size = compressBound(static_cast<uLong>(raw.size()));
  std::string packed(packed_size, '\0');
  compress2(reinterpret_cast<Bytef*>(packed.data()), &packed_size,
            reinterpret_cast<const Bytef*>(raw.data()), static_cast<uLong>(raw.size()), 6);
  packed.resize(packed_size);

  std::string out(kPngSignature);
  std::string header;
  PutU32(&header, image.width);
  PutU32(&header, image.height);
  header.append({'\x08', '\x02', '\0', '\0', '\0'});  // depth 8, RGB, deflate, filter 0, no interlace
  PutChunk(&out, "IHDR", header);
  PutChunk(&out, "IDAT", packed);
  PutChunk(&out, "IEND", "");
  return out;
}

absl::StatusOr<ImageSize> PngSize(std::string_view png) {
  if (png.size() < 8 + 8 + 13 || png.substr(0, 8) != kPngSignature ||
      png.substr(12, 4) != "IHDR") {
    return absl::InvalidArgumentError("not a PNG image");
  }
  return ImageSize{GetU32(png, 16), GetU32(png, 20)};
}

}  // namespace kvnode
