// Semantic comparison of two XML documents for the golden tests: element names, attribute sets
// (order ignored), trimmed text, and children in order. Comments, processing instructions and
// whitespace between elements do not count. Each difference names the element path
// ("/domain/devices/disk[2]/driver") so a failing golden says what changed where.
//
// Thread-safe (pure).
#ifndef KVNODE_TESTS_GOLDEN_XML_DIFF_H_
#define KVNODE_TESTS_GOLDEN_XML_DIFF_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace kvnode {

// The differences between `expected` and `actual` (XML text), one line each; empty when they
// are the same. A document that does not parse is one difference.
std::vector<std::string> DiffXml(absl::string_view expected, absl::string_view actual);

}  // namespace kvnode

#endif  // KVNODE_TESTS_GOLDEN_XML_DIFF_H_
