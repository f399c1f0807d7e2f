#include "agent/manifest/yaml_document.h"

#include <yaml.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"

namespace kvnode {

// Builds a YamlStream from libyaml's events. Nodes are appended to one vector and refer to
// each other by index while the stream grows; Finish() turns indices into pointers. A
// collection's children collect on `pending_` and move to the shared child array, contiguous,
// when the collection ends.
class YamlStreamBuilder {
 public:
  explicit YamlStreamBuilder(absl::string_view input) : input_(input) {
    // About one node per 10 bytes of a typical manifest; a guess, not a limit.
    stream_.nodes_.reserve(input.size() / 10 + 8);
    stream_.text_.reserve(input.size());
    child_index_.reserve(input.size() / 10 + 8);
    pending_.reserve(64);
    open_.reserve(16);
  }

  absl::Status Run();
  YamlStream Finish() &&;

 private:
  struct Open {
    uint32_t node;
    size_t first_pending;
  };

  absl::Status Handle(const yaml_event_t& event);
  uint32_t AddNode(YamlNode::Type type, const yaml_mark_t& mark, const yaml_char_t* anchor);
  void AddScalar(const yaml_event_t& event);
  void Close();
  absl::Status ParserError(const yaml_parser_t& parser) const;
  std::string Position(size_t line, size_t column) const;

  absl::string_view input_;
  YamlStream stream_;
  std::vector<uint32_t> child_index_;  // becomes stream_.children_
  std::vector<uint32_t> document_index_;
  std::vector<uint32_t> pending_;
  std::vector<Open> open_;
  absl::flat_hash_map<std::string, uint32_t> anchors_;  // this document's
};

namespace {

// YAML's null for an untagged plain scalar, as yaml-cpp reads it.
bool IsNullString(absl::string_view s) {
  return s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL";
}

// Owns one libyaml parser for the duration of a parse.
class Parser {
 public:
  explicit Parser(absl::string_view input) {
    ok_ = yaml_parser_initialize(&parser_) != 0;
    if (ok_) {
      yaml_parser_set_input_string(&parser_, reinterpret_cast<const unsigned char*>(input.data()),
                                   input.size());
    }
  }
  ~Parser() { yaml_parser_delete(&parser_); }
  Parser(const Parser&) = delete;
  Parser& operator=(const Parser&) = delete;

  bool ok() const { return ok_; }
  yaml_parser_t* get() { return &parser_; }

 private:
  yaml_parser_t parser_;
  bool ok_ = false;
};

class Event {
 public:
  Event() { std::memset(&event_, 0, sizeof(event_)); }
  ~Event() { yaml_event_delete(&event_); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  yaml_event_t* get() { return &event_; }

 private:
  yaml_event_t event_;
};

}  // namespace

absl::Status YamlStreamBuilder::Run() {
  Parser parser(input_);
  if (!parser.ok()) return absl::ResourceExhaustedError("yaml: out of memory");
  while (true) {
    Event event;
    if (!yaml_parser_parse(parser.get(), event.get())) return ParserError(*parser.get());
    if (event.get()->type == YAML_STREAM_END_EVENT) return absl::OkStatus();
    if (absl::Status s = Handle(*event.get()); !s.ok()) return s;
  }
}

absl::Status YamlStreamBuilder::Handle(const yaml_event_t& event) {
  switch (event.type) {
    case YAML_DOCUMENT_START_EVENT:
      anchors_.clear();
      return absl::OkStatus();
    case YAML_DOCUMENT_END_EVENT:
      // libyaml gives every document exactly one node (an empty one is an empty scalar).
      document_index_.push_back(pending_.back());
      pending_.pop_back();
      return absl::OkStatus();
    case YAML_SCALAR_EVENT:
      AddScalar(event);
      return absl::OkStatus();
    case YAML_SEQUENCE_START_EVENT:
      open_.push_back(
          {AddNode(YamlNode::Type::kSequence, event.start_mark, event.data.sequence_start.anchor),
           pending_.size()});
      return absl::OkStatus();
    case YAML_MAPPING_START_EVENT:
      open_.push_back(
          {AddNode(YamlNode::Type::kMapping, event.start_mark, event.data.mapping_start.anchor),
           pending_.size()});
      return absl::OkStatus();
    case YAML_SEQUENCE_END_EVENT:
    case YAML_MAPPING_END_EVENT:
      Close();
      return absl::OkStatus();
    case YAML_ALIAS_EVENT: {
      auto it = anchors_.find(reinterpret_cast<const char*>(event.data.alias.anchor));
      if (it == anchors_.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat("yaml: ", Position(event.start_mark.line, event.start_mark.column),
                         ": the referenced anchor is not defined"));
      }
      pending_.push_back(it->second);
      return absl::OkStatus();
    }
    default:
      return absl::OkStatus();
  }
}

// Anchors are registered when their node starts, as yaml-cpp does, so an alias inside the
// node refers back to it.
uint32_t YamlStreamBuilder::AddNode(YamlNode::Type type, const yaml_mark_t& mark,
                                    const yaml_char_t* anchor) {
  uint32_t index = static_cast<uint32_t>(stream_.nodes_.size());
  YamlNode& node = stream_.nodes_.emplace_back();
  node.type_ = type;
  node.line_ = static_cast<uint32_t>(mark.line + 1);
  node.column_ = static_cast<uint32_t>(mark.column + 1);
  if (anchor != nullptr) anchors_[reinterpret_cast<const char*>(anchor)] = index;
  return index;
}

void YamlStreamBuilder::AddScalar(const yaml_event_t& event) {
  const auto& scalar = event.data.scalar;
  uint32_t index = AddNode(YamlNode::Type::kScalar, event.start_mark, scalar.anchor);
  YamlNode& node = stream_.nodes_[index];
  const char* tag = reinterpret_cast<const char*>(scalar.tag);
  if (tag == nullptr) {
    node.tag_ = scalar.style == YAML_PLAIN_SCALAR_STYLE ? YamlNode::Tag::kNone
                                                        : YamlNode::Tag::kNonSpecific;
  } else if (std::strcmp(tag, "!") == 0) {
    node.tag_ = YamlNode::Tag::kNonSpecific;
  } else if (std::strcmp(tag, YAML_STR_TAG) == 0) {
    node.tag_ = YamlNode::Tag::kString;
  } else {
    node.tag_ = YamlNode::Tag::kOther;
  }
  absl::string_view value(reinterpret_cast<const char*>(scalar.value), scalar.length);
  if (node.tag_ == YamlNode::Tag::kNone && IsNullString(value)) node.type_ = YamlNode::Type::kNull;
  node.offset_ = static_cast<uint32_t>(stream_.text_.size());
  node.size_ = static_cast<uint32_t>(value.size());
  stream_.text_.insert(stream_.text_.end(), value.begin(), value.end());
  pending_.push_back(index);
}

void YamlStreamBuilder::Close() {
  Open open = open_.back();
  open_.pop_back();
  YamlNode& node = stream_.nodes_[open.node];
  size_t count = pending_.size() - open.first_pending;
  node.offset_ = static_cast<uint32_t>(child_index_.size());
  // libyaml's events always pair a mapping's keys with values.
  node.size_ = static_cast<uint32_t>(node.type_ == YamlNode::Type::kMapping ? count / 2 : count);
  child_index_.insert(child_index_.end(), pending_.begin() + open.first_pending, pending_.end());
  pending_.resize(open.first_pending);
  pending_.push_back(open.node);
}

YamlStream YamlStreamBuilder::Finish() && {
  YamlStream& s = stream_;
  s.children_.reserve(child_index_.size());
  for (uint32_t i : child_index_) s.children_.push_back(&s.nodes_[i]);
  for (uint32_t i : document_index_) s.documents_.push_back(&s.nodes_[i]);
  for (YamlNode& node : s.nodes_) {
    if (node.type_ == YamlNode::Type::kMapping || node.type_ == YamlNode::Type::kSequence) {
      node.children_ = s.children_.data() + node.offset_;
    } else {
      node.text_ = s.text_.data() + node.offset_;
    }
  }
  return std::move(stream_);
}

std::string YamlStreamBuilder::Position(size_t line, size_t column) const {
  return absl::StrCat("line ", line + 1, ", column ", column + 1);
}

absl::Status YamlStreamBuilder::ParserError(const yaml_parser_t& parser) const {
  const char* problem = parser.problem != nullptr ? parser.problem : "unknown error";
  switch (parser.error) {
    case YAML_MEMORY_ERROR:
      return absl::ResourceExhaustedError("yaml: out of memory");
    case YAML_READER_ERROR: {
      // Invalid UTF-8 or a control character: libyaml gives the byte offset, not a mark.
      size_t offset = std::min(parser.problem_offset, input_.size());
      size_t line = 0, column = 0;
      for (size_t i = 0; i < offset; ++i) {
        if (input_[i] == '\n') {
          ++line;
          column = 0;
        } else if ((static_cast<unsigned char>(input_[i]) & 0xC0) != 0x80) {
          ++column;  // characters, as libyaml counts its columns
        }
      }
      std::string value =
          parser.problem_value >= 0
              ? absl::StrCat(" (0x", absl::Hex(parser.problem_value, absl::kZeroPad2), ")")
              : "";
      return absl::InvalidArgumentError(
          absl::StrCat("yaml: ", Position(line, column), ": ", problem, value));
    }
    default: {
      std::string context;
      if (parser.context != nullptr) {
        context = absl::StrCat(" (", parser.context, " started at ",
                               Position(parser.context_mark.line, parser.context_mark.column), ")");
      }
      return absl::InvalidArgumentError(
          absl::StrCat("yaml: ", Position(parser.problem_mark.line, parser.problem_mark.column),
                       ": ", problem, context));
    }
  }
}

absl::StatusOr<YamlStream> YamlStream::Parse(absl::string_view text) {
  YamlStreamBuilder builder(text);
  if (absl::Status s = builder.Run(); !s.ok()) return s;
  return std::move(builder).Finish();
}

}  // namespace kvnode
