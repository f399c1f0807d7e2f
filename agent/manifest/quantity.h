// Kubernetes resource.Quantity, parsed exactly: "4Gi", "1024M", "1.5Gi", "512Mi", "1e3",
// "100m". The grammar is Kubernetes' (apimachinery/pkg/api/resource/quantity.go):
//
//   <quantity> ::= <signedNumber><suffix>
//   <suffix>   ::= Ki | Mi | Gi | Ti | Pi | Ei | m | "" | k | M | G | T | P | E | (e|E)<signedNumber>
//
// Values are kept exact until they are read; Value() and MilliValue() round up to the next
// integer as Kubernetes does. A quantity whose integer value does not fit in int64 is an error.
#ifndef KVNODE_AGENT_MANIFEST_QUANTITY_H_
#define KVNODE_AGENT_MANIFEST_QUANTITY_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kvnode {

class Quantity {
 public:
  // Parses `text`. Errors are InvalidArgument with a message that fits after a field path:
  // "quantities must match the regular expression ..." or "quantity is too large".
  static absl::StatusOr<Quantity> Parse(absl::string_view text);

  // The value in base units (bytes, cores), rounded up (away from zero for negatives, as
  // Kubernetes' Value()).
  int64_t Value() const { return value_; }
  // The value in thousandths of the base unit, rounded up; saturates at INT64_MAX.
  int64_t MilliValue() const { return milli_value_; }
  bool IsNegative() const { return negative_; }
  bool IsZero() const { return value_ == 0 && milli_value_ == 0; }

 private:
  Quantity(int64_t value, int64_t milli, bool negative)
      : value_(value), milli_value_(milli), negative_(negative) {}

  int64_t value_;
  int64_t milli_value_;
  bool negative_;
};

// The value of `text` in base units, or `fallback` when it is empty or no quantity.
int64_t QuantityValueOr(absl::string_view text, int64_t fallback);

// "4Gi" for 4294967296, "1536Mi", "1000" — the shortest exact binary-SI form, for messages.
std::string FormatBinaryQuantity(int64_t bytes);

}  // namespace kvnode

#endif  // KVNODE_AGENT_MANIFEST_QUANTITY_H_
