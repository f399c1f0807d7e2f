#include "agent/manifest/yaml_document.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvnode {
namespace {

using ::testing::HasSubstr;

const YamlNode& OnlyDocument(const absl::StatusOr<YamlStream>& s) {
  if (!s.ok() || s->documents().size() != 1) {
    ADD_FAILURE() << "not one document: " << s.status();
    static const YamlNode* const kNull = new YamlNode();
    return *kNull;
  }
  return *s->documents().front();
}

TEST(YamlDocumentTest, MappingsKeepKeysInOrderWithPositions) {
  auto s = YamlStream::Parse("b: 1\na:\n  - x\n  - {y: z}\n");
  const YamlNode& root = OnlyDocument(s);
  ASSERT_TRUE(root.IsMapping());
  ASSERT_EQ(root.size(), 2u);
  EXPECT_EQ(root.key(0).scalar(), "b");
  EXPECT_EQ(root.value(0).scalar(), "1");
  EXPECT_EQ(root.key(1).scalar(), "a");
  const YamlNode& seq = root.value(1);
  ASSERT_TRUE(seq.IsSequence());
  ASSERT_EQ(seq.size(), 2u);
  EXPECT_EQ(seq.item(0).scalar(), "x");
  EXPECT_EQ(seq.item(0).line(), 3u);
  EXPECT_EQ(seq.item(0).column(), 5u);
  ASSERT_TRUE(seq.item(1).IsMapping());
  EXPECT_EQ(seq.item(1).value(0).scalar(), "z");
}

TEST(YamlDocumentTest, NullIsAnUntaggedPlainNullWord) {
  auto s =
      YamlStream::Parse("- ~\n- null\n- Null\n- NULL\n-\n- 'null'\n- !!str null\n- nil\n- \"\"\n");
  const YamlNode& root = OnlyDocument(s);
  ASSERT_EQ(root.size(), 9u);
  for (size_t i = 0; i < 5; ++i) EXPECT_TRUE(root.item(i).IsNull()) << i;
  for (size_t i = 5; i < 9; ++i) EXPECT_TRUE(root.item(i).IsScalar()) << i;
}

TEST(YamlDocumentTest, ScalarTagsSayWhetherTheScalarIsAString) {
  auto s =
      YamlStream::Parse("- a\n- 'a'\n- \"a\"\n- ! a\n- !!str a\n- !!int 1\n- !foo a\n- |\n  a\n");
  const YamlNode& root = OnlyDocument(s);
  ASSERT_EQ(root.size(), 8u);
  using Tag = YamlNode::Tag;
  EXPECT_EQ(root.item(0).tag(), Tag::kNone);
  EXPECT_EQ(root.item(1).tag(), Tag::kNonSpecific);
  EXPECT_EQ(root.item(2).tag(), Tag::kNonSpecific);
  EXPECT_EQ(root.item(3).tag(), Tag::kNonSpecific);
  EXPECT_EQ(root.item(4).tag(), Tag::kString);
  EXPECT_EQ(root.item(5).tag(), Tag::kOther);
  EXPECT_EQ(root.item(6).tag(), Tag::kOther);
  EXPECT_EQ(root.item(7).tag(), Tag::kNonSpecific);
  EXPECT_EQ(root.item(7).scalar(), "a\n");
}

TEST(YamlDocumentTest, AnAliasIsTheAnchoredNode) {
  auto s = YamlStream::Parse("a: &x {k: v}\nb: *x\nc: &y [*y]\n");
  const YamlNode& root = OnlyDocument(s);
  EXPECT_EQ(&root.value(0), &root.value(1));
  // As in yaml-cpp, an anchor names its node from its start: this sequence contains itself.
  EXPECT_EQ(&root.value(2).item(0), &root.value(2));
}

TEST(YamlDocumentTest, AnchorsBelongToTheirDocument) {
  auto s = YamlStream::Parse("a: &x 1\n---\nb: *x\n");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(), "yaml: line 3, column 4: the referenced anchor is not defined");
}

TEST(YamlDocumentTest, DuplicateKeysAreKept) {
  auto s = YamlStream::Parse("a: 1\na: 2\n");
  const YamlNode& root = OnlyDocument(s);
  ASSERT_EQ(root.size(), 2u);
  EXPECT_EQ(root.value(1).scalar(), "2");
}

TEST(YamlDocumentTest, EveryDocumentIsKeptAndAnEmptyOneIsNull) {
  auto s = YamlStream::Parse("a: 1\n---\n---\n# only a comment\n--- x\n");
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->documents().size(), 4u);
  EXPECT_TRUE(s->documents()[1]->IsNull());
  EXPECT_TRUE(s->documents()[2]->IsNull());
  EXPECT_EQ(s->documents()[3]->scalar(), "x");
  auto empty = YamlStream::Parse("");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->documents().empty());
}

TEST(YamlDocumentTest, SurvivesAMove) {
  auto s = YamlStream::Parse("k: v\n");
  ASSERT_TRUE(s.ok());
  YamlStream moved = std::move(*s);
  EXPECT_EQ(moved.documents().front()->value(0).scalar(), "v");
}

TEST(YamlDocumentTest, SyntaxErrorsNameLineAndColumn) {
  auto s = YamlStream::Parse("a:\n  b: [1\n  c: 2\n");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(),
            "yaml: line 3, column 4: did not find expected ',' or ']' (while parsing a flow "
            "sequence started at line 2, column 6)");
}

TEST(YamlDocumentTest, InvalidUtf8AndControlCharactersAreSyntaxErrors) {
  auto bad_utf8 = YamlStream::Parse("a: 1\nb: caf\xe9\n");
  ASSERT_FALSE(bad_utf8.ok());
  EXPECT_THAT(bad_utf8.status().message(), HasSubstr("yaml: line 2, column 7: "));
  auto control = YamlStream::Parse("a: x\x07y\n");
  ASSERT_FALSE(control.ok());
  EXPECT_EQ(control.status().message(),
            "yaml: line 1, column 5: control characters are not allowed (0x07)");
}

}  // namespace
}  // namespace kvnode
