#include "agent/base/logging.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "spdlog/details/log_msg.h"

namespace kvnode {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;

std::string Format(spdlog::formatter& f, const std::string& payload,
                   spdlog::level::level_enum level = spdlog::level::info) {
  spdlog::details::log_msg msg("x", level, payload);
  spdlog::memory_buf_t buf;
  f.format(msg, buf);
  return std::string(buf.data(), buf.size());
}

TEST(LoggingTest, TextLinesNameTheComponentAndTheObject) {
  auto f = MakeLogFormatter("kvnode-handler", false, std::nullopt);
  EXPECT_THAT(Format(*f, "plain"),
              MatchesRegex("[0-9-]+T[0-9:.]+Z I kvnode-handler: plain\n"));
  EXPECT_THAT(Format(*f, EncodeObjectMessage({"apps", "app01", "u-1"}, "Started")),
              HasSubstr(" I kvnode-handler: apps/app01 uid=u-1: Started\n"));
}

TEST(LoggingTest, JsonLinesCarryTheObjectAsFieldsAndEscapeTheMessage) {
  auto f = MakeLogFormatter("kvnode-handler", true, std::nullopt);
  std::string line =
      Format(*f, EncodeObjectMessage({"apps", "app01", "u-1"}, "say \"hi\"\n\x01"),
             spdlog::level::warn);
  EXPECT_THAT(line, MatchesRegex("\\{\"timestamp\":\"[0-9-]+T[0-9:.]+Z\",\"level\":\"warning\","
                                 "\"component\":\"kvnode-handler\",\"namespace\":\"apps\","
                                 "\"name\":\"app01\",\"uid\":\"u-1\","
                                 "\"msg\":\"say \\\\\"hi\\\\\"\\\\n\\\\u0001\"\\}\n"));
  EXPECT_THAT(Format(*f, "no object"), HasSubstr("\"component\":\"kvnode-handler\",\"msg\":\"no object\"}"));
}

TEST(LoggingTest, AProcessAboutOneObjectNamesItOnEveryLine) {
  auto f = MakeLogFormatter("kvnode-launcher", true, LogObject{"default", "vm1", "u-2"});
  EXPECT_THAT(Format(*f, "domain started"),
              HasSubstr("\"namespace\":\"default\",\"name\":\"vm1\",\"uid\":\"u-2\","
                        "\"msg\":\"domain started\""));
}

TEST(LoggingTest, OnlyTextAndJsonAreFormats) {
  bool json = true;
  EXPECT_TRUE(ParseLogFormat("text", &json));
  EXPECT_FALSE(json);
  EXPECT_TRUE(ParseLogFormat("json", &json));
  EXPECT_TRUE(json);
  EXPECT_FALSE(ParseLogFormat("xml", &json));
}

}  // namespace
}  // namespace kvnode
