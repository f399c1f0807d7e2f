// Golden converter tests: each tests/golden/NAME.yaml converts (golden_corpus.h) to exactly the
// domain in NAME.xml, compared semantically (xml_diff.h). KVNODE_UPDATE_GOLDEN=1 rewrites the
// .xml files from the converter instead; review every change by eye before committing it, since
// the goldens are the specification.
#include <cstdlib>
#include <string>

#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/golden/golden_corpus.h"
#include "tests/golden/xml_diff.h"

namespace kvnode {
namespace {

const std::string kDir = KVNODE_GOLDEN_DIR;

bool UpdateMode() {
  const char* v = std::getenv("KVNODE_UPDATE_GOLDEN");
  return v != nullptr && std::string(v) == "1";
}

class GoldenTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenTest, ConvertsToTheGoldenDomain) {
  const std::string base = kDir + "/" + GetParam();
  auto yaml = ReadTextFile(base + ".yaml");
  ASSERT_TRUE(yaml.ok()) << yaml.status();
  auto actual = ConvertGolden(*yaml, GetParam() + ".yaml", "kvm");
  ASSERT_TRUE(actual.ok()) << actual.status();
  if (UpdateMode()) {
    ASSERT_TRUE(WriteTextFile(base + ".xml", *actual).ok());
    return;
  }
  auto expected = ReadTextFile(base + ".xml");
  ASSERT_TRUE(expected.ok()) << expected.status() << " (KVNODE_UPDATE_GOLDEN=1 writes it)";
  std::vector<std::string> diff = DiffXml(*expected, *actual);
  EXPECT_TRUE(diff.empty()) << GetParam() << ".xml differs:\n  " << absl::StrJoin(diff, "\n  ")
                            << "\nactual:\n" << *actual;
}

INSTANTIATE_TEST_SUITE_P(Corpus, GoldenTest, ::testing::ValuesIn(GoldenNames(kDir)),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           for (char& c : name) {
                             if (!isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return name;
                         });

TEST(GoldenCorpusTest, HasAtLeastSixteenGoldensEachWithItsDomain) {
  std::vector<std::string> names = GoldenNames(kDir);
  EXPECT_GE(names.size(), 16u);
  for (const auto& name : names) {
    EXPECT_TRUE(ReadTextFile(kDir + "/" + name + ".xml").ok() || UpdateMode()) << name;
  }
}

TEST(XmlDiffTest, IgnoresAttributeOrderCommentsAndWhitespace) {
  EXPECT_THAT(DiffXml("<a x='1' y='2'><!-- c --><b> t </b></a>", "<a y='2' x='1'>\n<b>t</b></a>"),
              ::testing::IsEmpty());
}

TEST(XmlDiffTest, NamesTheElementPathOfEachDifference) {
  EXPECT_THAT(DiffXml("<d><e><disk/><disk c='1'/></e></d>", "<d><e><disk/><disk c='2'/><x/></e></d>"),
              ::testing::ElementsAre("/d/e/disk[2]: attribute c: expected \"1\", got \"2\"",
                                     "/d/e/x: unexpected element"));
  EXPECT_THAT(DiffXml("<d><t>a</t></d>", "<d><t>b</t></d>"),
              ::testing::ElementsAre("/d/t: text: expected \"a\", got \"b\""));
  EXPECT_THAT(DiffXml("<d/>", "<d"), ::testing::ElementsAre(::testing::HasSubstr("actual XML")));
}

}  // namespace
}  // namespace kvnode
