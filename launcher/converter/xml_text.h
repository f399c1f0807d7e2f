// What XML 1.0 can carry. pugixml escapes markup characters, but it writes a control character
// as a character reference (&#01;) that no conforming parser accepts, and it passes invalid
// UTF-8 through, so libvirt (libxml2) would refuse the whole domain. The converter checks the
// finished document instead and names the element that holds the bad text.
//
// Pure. Thread-safe.
#ifndef KVNODE_LAUNCHER_CONVERTER_XML_TEXT_H_
#define KVNODE_LAUNCHER_CONVERTER_XML_TEXT_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "pugixml.hpp"

namespace kvnode {
namespace converter {

// True when `s` is valid UTF-8 of XML 1.0 Chars only (tab, newline, carriage return, and
// U+0020..U+D7FF, U+E000..U+FFFD, U+10000..U+10FFFF).
bool IsXmlText(absl::string_view s);

// InvalidArgument naming the element path ("/domain/devices/disk[2]/serial") of the first
// attribute value or text under `root` (an element or a document) that is not IsXmlText, or OK.
absl::Status CheckXmlText(const pugi::xml_node& root);

}  // namespace converter
}  // namespace kvnode

#endif  // KVNODE_LAUNCHER_CONVERTER_XML_TEXT_H_
