#include "launcher/converter/pci_address.h"

#include <cstdint>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "launcher/converter/xml_builder.h"

namespace kvnode {
namespace converter {
namespace {

// `digits` hexadecimal digits, at most `max`.
bool ParseHex(absl::string_view s, size_t digits, uint32_t max, uint32_t* out) {
  if (s.size() != digits) return false;
  for (char c : s) {
    if (!absl::ascii_isxdigit(static_cast<unsigned char>(c))) return false;
  }
  return absl::SimpleHexAtoi(s, out) && *out <= max;
}

}  // namespace

absl::Status AppendPciAddress(absl::string_view text, const std::string& path,
                              pugi::xml_node device) {
  // DDDD:BB:SS.F — slot 0x00-0x1f, function 0-7 (PCI's own limits).
  uint32_t domain, bus, slot, function;
  bool ok = text.size() == 12 && text[4] == ':' && text[7] == ':' && text[10] == '.' &&
            ParseHex(text.substr(0, 4), 4, 0xffff, &domain) &&
            ParseHex(text.substr(5, 2), 2, 0xff, &bus) &&
            ParseHex(text.substr(8, 2), 2, 0x1f, &slot) &&
            ParseHex(text.substr(11, 1), 1, 7, &function);
  if (!ok) {
    return Invalid(path, absl::StrCat("\"", text, "\" is not a PCI address (DDDD:BB:SS.F)"));
  }
  pugi::xml_node addr = Attr(Child(device, "address"), "type", "pci");
  Attr(addr, "domain", absl::StrCat("0x", absl::Hex(domain, absl::kZeroPad4)));
  Attr(addr, "bus", absl::StrCat("0x", absl::Hex(bus, absl::kZeroPad2)));
  Attr(addr, "slot", absl::StrCat("0x", absl::Hex(slot, absl::kZeroPad2)));
  Attr(addr, "function", absl::StrCat("0x", absl::Hex(function)));
  return absl::OkStatus();
}

}  // namespace converter
}  // namespace kvnode
