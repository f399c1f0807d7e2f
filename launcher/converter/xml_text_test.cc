#include "launcher/converter/xml_text.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvnode {
namespace converter {
namespace {

using ::testing::HasSubstr;

TEST(IsXmlTextTest, AcceptsXmlCharsInUtf8) {
  EXPECT_TRUE(IsXmlText(""));
  EXPECT_TRUE(IsXmlText("plain <&> \"quotes\"\t\n\r"));
  EXPECT_TRUE(IsXmlText("Gr\xc3\xbc\xc3\x9f" "e \xe2\x82\xac \xf0\x9f\x98\x80"));
}

TEST(IsXmlTextTest, RefusesControlCharactersAndBadUtf8) {
  EXPECT_FALSE(IsXmlText(std::string("a\0b", 3)));
  EXPECT_FALSE(IsXmlText("a\x01"));
  EXPECT_FALSE(IsXmlText("\x1b[0m"));
  EXPECT_FALSE(IsXmlText("\xff"));
  EXPECT_FALSE(IsXmlText("\xc3"));              // truncated
  EXPECT_FALSE(IsXmlText("\xc0\xaf"));          // overlong "/"
  EXPECT_FALSE(IsXmlText("\xed\xa0\x80"));      // a surrogate, U+D800
  EXPECT_FALSE(IsXmlText("\xef\xbf\xbe"));      // U+FFFE
}

TEST(CheckXmlTextTest, NamesTheElementOfTheBadText) {
  pugi::xml_document doc;
  pugi::xml_node devices = doc.append_child("domain").append_child("devices");
  devices.append_child("disk");
  devices.append_child("disk").append_child("serial").append_child(pugi::node_pcdata).set_value(
      "x\x02");
  absl::Status s = CheckXmlText(doc);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("domain XML /domain/devices/disk[2]/serial text"));
  devices.child("disk").append_attribute("a").set_value("\x7f\x01");
  EXPECT_THAT(std::string(CheckXmlText(doc).message()),
              HasSubstr("/domain/devices/disk[1] attribute a"));
}

}  // namespace
}  // namespace converter
}  // namespace kvnode
