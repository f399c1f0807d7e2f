// A YAML stream parsed by libyaml into a small read-only tree: scalars (with whether they were
// written as strings), mappings and sequences, each node with its line and column. It is what
// the manifest loader walks; it keeps exactly what the loader needs to decide types the way
// yaml-cpp did before it:
//   - null: an untagged plain scalar "", "~", "null", "Null" or "NULL" (an empty value too);
//   - a scalar's tag: none (plain), non-specific (quoted, block, or the "!" tag), !!str, other;
//   - an alias is the anchored node itself, shared, as in yaml-cpp (an alias inside the node
//     it names refers back to it, so the tree can be a graph; the loader's schema, which has no
//     recursive messages, bounds any walk over it);
//   - duplicate mapping keys are kept, in order, for the loader to report;
//   - merge keys ("<<") are ordinary keys.
//
// Syntax errors, invalid UTF-8 and control characters in the text, and an alias to an unknown
// anchor are InvalidArgument "yaml: line L, column C: <problem>".
//
// Immutable after Parse; thread-compatible. Nodes live as long as their YamlStream.
#ifndef KVNODE_AGENT_MANIFEST_YAML_DOCUMENT_H_
#define KVNODE_AGENT_MANIFEST_YAML_DOCUMENT_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kvnode {

class YamlNode {
 public:
  enum class Type : uint8_t { kNull, kScalar, kMapping, kSequence };
  // How a scalar was tagged. kNonSpecific is a quoted or block scalar without a tag, or the
  // explicit "!" tag: YAML reads it as a string whatever it spells.
  enum class Tag : uint8_t { kNone, kNonSpecific, kString, kOther };

  Type type() const { return type_; }
  bool IsNull() const { return type_ == Type::kNull; }
  bool IsScalar() const { return type_ == Type::kScalar; }
  bool IsMapping() const { return type_ == Type::kMapping; }
  bool IsSequence() const { return type_ == Type::kSequence; }

  // Scalars only.
  absl::string_view scalar() const { return absl::string_view(text_, size_); }
  Tag tag() const { return tag_; }

  // Mappings: pairs, in document order. Sequences: items.
  size_t size() const { return type_ == Type::kMapping || type_ == Type::kSequence ? size_ : 0; }
  const YamlNode& key(size_t i) const { return *children_[2 * i]; }
  const YamlNode& value(size_t i) const { return *children_[2 * i + 1]; }
  const YamlNode& item(size_t i) const { return *children_[i]; }

  // 1-based position of the node's first character.
  uint32_t line() const { return line_; }
  uint32_t column() const { return column_; }

 private:
  friend class YamlStreamBuilder;

  Type type_ = Type::kNull;
  Tag tag_ = Tag::kNone;
  uint32_t line_ = 0;
  uint32_t column_ = 0;
  uint32_t size_ = 0;    // scalar bytes, or number of pairs / items
  uint32_t offset_ = 0;  // while building: into the text or child arrays
  const char* text_ = nullptr;
  const YamlNode* const* children_ = nullptr;
};

class YamlStream {
 public:
  // Parses every document of `text` (YAML 1.1 as libyaml reads it; JSON is YAML).
  static absl::StatusOr<YamlStream> Parse(absl::string_view text);

  // Each document's root, in order; an empty document is a null node.
  const std::vector<const YamlNode*>& documents() const { return documents_; }

 private:
  friend class YamlStreamBuilder;

  // Vectors, not strings: their buffers (which the nodes point into) survive a move.
  std::vector<char> text_;
  std::vector<YamlNode> nodes_;
  std::vector<const YamlNode*> children_;
  std::vector<const YamlNode*> documents_;
};

}  // namespace kvnode

#endif  // KVNODE_AGENT_MANIFEST_YAML_DOCUMENT_H_
