#include "agent/base/png_image.h"

#include <zlib.h>

#include "gtest/gtest.h"

namespace kvnode {
namespace {

uint32_t U32(const std::string& s, size_t at) {
  auto b = [&](size_t i) { return static_cast<uint32_t>(static_cast<unsigned char>(s[at + i])); };
  return b(0) << 24 | b(1) << 16 | b(2) << 8 | b(3);
}

TEST(PngImageTest, DecodesQemusPpmWithAComment) {
  std::string ppm = "P6\n# CREATOR: QEMU\n2 1\n255\n";
  ppm += std::string("\xff\x00\x00\x00\x00\xff", 6);
  auto image = DecodePpm(ppm);
  ASSERT_TRUE(image.ok()) << image.status();
  EXPECT_EQ(image->width, 2u);
  EXPECT_EQ(image->height, 1u);
  EXPECT_EQ(image->rgb, std::string("\xff\x00\x00\x00\x00\xff", 6));
}

TEST(PngImageTest, RefusesWhatIsNotABinaryPpm) {
  EXPECT_FALSE(DecodePpm("P3\n1 1\n255\n0 0 0\n").ok());
  EXPECT_FALSE(DecodePpm("P6\n1 1\n65535\n").ok());
  auto truncated = DecodePpm("P6\n4 4\n255\n\x01\x02");
  ASSERT_FALSE(truncated.ok());
  EXPECT_NE(truncated.status().message().find("4x4 is truncated"), std::string::npos);
  EXPECT_FALSE(DecodePpm("P6\n0 3\n255\n").ok());
}

TEST(PngImageTest, EncodesAPngWhoseChunksCheckAndWhosePixelsInflateBack) {
  RgbImage image;
  image.width = 3;
  image.height = 2;
  for (int i = 0; i < 18; ++i) image.rgb.push_back(static_cast<char>(i * 13));
  std::string png = EncodePng(image);
  auto size = PngSize(png);
  ASSERT_TRUE(size.ok()) << size.status();
  EXPECT_EQ(size->width, 3u);
  EXPECT_EQ(size->height, 2u);
  // Walk the chunks: every CRC is right, and IDAT inflates to filter byte + row.
  size_t at = 8;
  std::string idat;
  std::vector<std::string> types;
  while (at < png.size()) {
    uint32_t len = U32(png, at);
    std::string type = png.substr(at + 4, 4);
    types.push_back(type);
    uLong crc = crc32(0L, Z_NULL, 0);
    crc = crc32(crc, reinterpret_cast<const Bytef*>(png.data() + at + 4), len + 4);
    EXPECT_EQ(U32(png, at + 8 + len), static_cast<uint32_t>(crc)) << type;
    if (type == "IDAT") idat = png.substr(at + 8, len);
    at += 12 + len;
  }
  EXPECT_EQ(types, (std::vector<std::string>{"IHDR", "IDAT", "IEND"}));
  std::string raw(2 * (1 + 9), '\0');
  uLongf raw_size = raw.size();
  ASSERT_EQ(uncompress(reinterpret_cast<Bytef*>(raw.data()), &raw_size,
                       reinterpret_cast<const Bytef*>(idat.data()), idat.size()),
            Z_OK);
  EXPECT_EQ(raw_size, raw.size());
  EXPECT_EQ(raw[0], '\0');
  EXPECT_EQ(raw.substr(1, 9), image.rgb.substr(0, 9));
  EXPECT_EQ(raw.substr(11, 9), image.rgb.substr(9, 9));
}

TEST(PngImageTest, PngSizeRefusesOtherData) { EXPECT_FALSE(PngSize("GIF89a....").ok()); }

}  // namespace
}  // namespace kvnode
