#include "launcher/converter/xml_text.h"

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"

namespace kvnode {
namespace converter {
namespace {

bool IsXmlChar(uint32_t c) {
  return c == 0x9 || c == 0xA || c == 0xD || (c >= 0x20 && c <= 0xD7FF) ||
         (c >= 0xE000 && c <= 0xFFFD) || (c >= 0x10000 && c <= 0x10FFFF);
}

// Decodes one UTF-8 sequence at s[*i]; false on a malformed or overlong one.
bool NextCodePoint(absl::string_view s, size_t* i, uint32_t* out) {
  auto byte = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  uint8_t b0 = byte(*i);
  size_t n = b0 < 0x80 ? 1 : (b0 >> 5) == 0x6 ? 2 : (b0 >> 4) == 0xE ? 3 : (b0 >> 3) == 0x1E ? 4 : 0;
  if (n == 0 || *i + n > s.size()) return false;
  uint32_t c = n == 1 ? b0 : b0 & (0x7F >> n);
  for (size_t k = 1; k < n; ++k) {
    if ((byte(*i + k) & 0xC0) != 0x80) return false;
    c = (c << 6) | (byte(*i + k) & 0x3F);
  }
  static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (c < kMin[n]) return false;
  *i += n;
  *out = c;
  return true;
}

// The element's path, 1-based among same-named siblings where there are several.
std::string PathOf(pugi::xml_node node) {
  std::string path;
  for (; node && node.type() == pugi::node_element; node = node.parent()) {
    int index = 0, total = 0;
    for (pugi::xml_node s = node.parent().child(node.name()); s; s = s.next_sibling(node.name())) {
      ++total;
      if (s == node) index = total;
    }
    std::string step = absl::StrCat("/", node.name());
    if (total > 1) absl::StrAppend(&step, "[", index, "]");
    path = step + path;
  }
  return path;
}

absl::Status Bad(const pugi::xml_node& element, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(
      "domain XML ", PathOf(element), what,
      ": a manifest string holds a control character or invalid UTF-8, which XML cannot carry"));
}

// IsXmlText for pugixml's NUL-terminated values: the printable ASCII that nearly all of them
// are is skipped without a strlen first.
bool IsXmlCString(const char* s) {
  while (*s >= 0x20 && *s < 0x7f) ++s;
  return *s == '\0' || IsXmlText(s);
}

absl::Status CheckElement(const pugi::xml_node& element) {
  for (pugi::xml_attribute a = element.first_attribute(); a; a = a.next_attribute()) {
    if (!IsXmlCString(a.value())) return Bad(element, absl::StrCat(" attribute ", a.name()));
  }
  for (pugi::xml_node c = element.first_child(); c; c = c.next_sibling()) {
    if (c.type() == pugi::node_element) {
      absl::Status s = CheckElement(c);
      if (!s.ok()) return s;
    } else if (!IsXmlCString(c.value())) {
      return Bad(element, " text");
    }
  }
  return absl::OkStatus();
}

}  // namespace

bool IsXmlText(absl::string_view s) {
  for (size_t i = 0; i < s.size();) {
    uint8_t b = static_cast<uint8_t>(s[i]);
    if (b >= 0x20 && b < 0x80) {  // printable ASCII, nearly everything a domain holds
      ++i;
      continue;
    }
    uint32_t c;
    if (!NextCodePoint(s, &i, &c) || !IsXmlChar(c)) return false;
  }
  return true;
}

absl::Status CheckXmlText(const pugi::xml_node& root) {
  if (root.type() == pugi::node_element) return CheckElement(root);
  for (pugi::xml_node c = root.first_child(); c; c = c.next_sibling()) {
    if (c.type() != pugi::node_element) continue;
    absl::Status s = CheckElement(c);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace converter
}  // namespace kvnode
