#include "tests/golden/xml_diff.h"

#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "pugixml.hpp"

namespace kvnode {
namespace {

std::vector<pugi::xml_node> Elements(const pugi::xml_node& node) {
  std::vector<pugi::xml_node> out;
  for (pugi::xml_node c = node.first_child(); c; c = c.next_sibling()) {
    if (c.type() == pugi::node_element) out.push_back(c);
  }
  return out;
}

// The element's own text: its pcdata and cdata children, concatenated and trimmed.
std::string Text(const pugi::xml_node& node) {
  std::string text;
  for (pugi::xml_node c = node.first_child(); c; c = c.next_sibling()) {
    if (c.type() == pugi::node_pcdata || c.type() == pugi::node_cdata) text += c.value();
  }
  return std::string(absl::StripAsciiWhitespace(text));
}

std::map<std::string, std::string> Attributes(const pugi::xml_node& node) {
  std::map<std::string, std::string> out;
  for (pugi::xml_attribute a = node.first_attribute(); a; a = a.next_attribute()) {
    out[a.name()] = a.value();
  }
  return out;
}

// "/domain/devices/disk[2]": the position among same-named siblings, 1-based, when there are
// several.
std::string ChildPath(const std::string& parent, const std::vector<pugi::xml_node>& siblings,
                      size_t i) {
  int index = 0, total = 0;
  for (size_t k = 0; k < siblings.size(); ++k) {
    if (std::string(siblings[k].name()) != siblings[i].name()) continue;
    ++total;
    if (k <= i) ++index;
  }
  std::string path = absl::StrCat(parent, "/", siblings[i].name());
  if (total > 1) absl::StrAppend(&path, "[", index, "]");
  return path;
}

void DiffAttributes(const pugi::xml_node& e, const pugi::xml_node& a, const std::string& path,
                    std::vector<std::string>* out) {
  auto ea = Attributes(e), aa = Attributes(a);
  for (const auto& [name, value] : ea) {
    auto it = aa.find(name);
    if (it == aa.end()) {
      out->push_back(absl::StrCat(path, ": attribute ", name, "=\"", value, "\" missing"));
    } else if (it->second != value) {
      out->push_back(absl::StrCat(path, ": attribute ", name, ": expected \"", value,
                                  "\", got \"", it->second, "\""));
    }
  }
  for (const auto& [name, value] : aa) {
    if (!ea.count(name)) {
      out->push_back(absl::StrCat(path, ": unexpected attribute ", name, "=\"", value, "\""));
    }
  }
}

void DiffElement(const pugi::xml_node& e, const pugi::xml_node& a, const std::string& path,
                 std::vector<std::string>* out) {
  if (std::string(e.name()) != a.name()) {
    out->push_back(absl::StrCat(path, ": expected element <", e.name(), ">, got <", a.name(), ">"));
    return;
  }
  DiffAttributes(e, a, path, out);
  std::string et = Text(e), at = Text(a);
  if (et != at) {
    out->push_back(absl::StrCat(path, ": text: expected \"", et, "\", got \"", at, "\""));
  }
  auto ec = Elements(e), ac = Elements(a);
  size_t common = std::min(ec.size(), ac.size());
  for (size_t i = 0; i < common; ++i) DiffElement(ec[i], ac[i], ChildPath(path, ec, i), out);
  for (size_t i = common; i < ec.size(); ++i) {
    out->push_back(absl::StrCat(ChildPath(path, ec, i), ": missing"));
  }
  for (size_t i = common; i < ac.size(); ++i) {
    out->push_back(absl::StrCat(ChildPath(path, ac, i), ": unexpected element"));
  }
}

}  // namespace

std::vector<std::string> DiffXml(absl::string_view expected, absl::string_view actual) {
  pugi::xml_document e, a;
  std::vector<std::string> out;
  auto er = e.load_buffer(expected.data(), expected.size());
  if (!er) out.push_back(absl::StrCat("expected XML does not parse: ", er.description()));
  auto ar = a.load_buffer(actual.data(), actual.size());
  if (!ar) out.push_back(absl::StrCat("actual XML does not parse: ", ar.description()));
  if (!out.empty()) return out;
  DiffElement(e.document_element(), a.document_element(),
              absl::StrCat("/", e.document_element().name()), &out);
  return out;
}

}  // namespace kvnode
