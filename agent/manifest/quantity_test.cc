#include "agent/manifest/quantity.h"

#include "gtest/gtest.h"

namespace kvnode {
namespace {

int64_t ValueOf(const char* s) {
  auto q = Quantity::Parse(s);
  EXPECT_TRUE(q.ok()) << s << ": " << q.status();
  return q.ok() ? q->Value() : -12345;
}

int64_t MilliOf(const char* s) {
  auto q = Quantity::Parse(s);
  EXPECT_TRUE(q.ok()) << s << ": " << q.status();
  return q.ok() ? q->MilliValue() : -12345;
}

TEST(QuantityTest, ParsesBinarySuffixes) {
  EXPECT_EQ(ValueOf("4Gi"), int64_t{4} << 30);
  EXPECT_EQ(ValueOf("512Mi"), int64_t{512} << 20);
  EXPECT_EQ(ValueOf("1.5Gi"), int64_t{3} << 29);
  EXPECT_EQ(ValueOf("1Ki"), 1024);
  EXPECT_EQ(ValueOf("1Ei"), int64_t{1} << 60);
  EXPECT_EQ(ValueOf("7Ei"), int64_t{7} << 60);
}

TEST(QuantityTest, ParsesDecimalSuffixesAndExponents) {
  EXPECT_EQ(ValueOf("1024M"), 1024000000);
  EXPECT_EQ(ValueOf("1e3"), 1000);
  EXPECT_EQ(ValueOf("1E3"), 1000);
  EXPECT_EQ(ValueOf("2k"), 2000);
  EXPECT_EQ(ValueOf("1G"), 1000000000);
  EXPECT_EQ(ValueOf("3"), 3);
  EXPECT_EQ(ValueOf("+3"), 3);
  EXPECT_EQ(ValueOf("0.5"), 1);  // rounds up, as Kubernetes' Value()
  EXPECT_EQ(ValueOf(".5k"), 500);
  EXPECT_EQ(ValueOf("5."), 5);
  EXPECT_EQ(ValueOf("1e-3"), 1);
}

TEST(QuantityTest, MilliValues) {
  EXPECT_EQ(MilliOf("100m"), 100);
  EXPECT_EQ(MilliOf("1"), 1000);
  EXPECT_EQ(MilliOf("1.5"), 1500);
  EXPECT_EQ(MilliOf("2"), 2000);
  EXPECT_EQ(MilliOf("0.0001"), 1);
  EXPECT_EQ(ValueOf("100m"), 1);
  EXPECT_EQ(MilliOf("7Ei"), INT64_MAX);  // saturates, value itself still fits
}

TEST(QuantityTest, NegativeAndZero) {
  auto q = Quantity::Parse("-1Gi");
  ASSERT_TRUE(q.ok());
  EXPECT_TRUE(q->IsNegative());
  EXPECT_EQ(q->Value(), -(int64_t{1} << 30));
  auto z = Quantity::Parse("0");
  ASSERT_TRUE(z.ok());
  EXPECT_TRUE(z->IsZero());
  EXPECT_FALSE(Quantity::Parse("-0")->IsNegative());
}

TEST(QuantityTest, OverflowIsAnError) {
  EXPECT_EQ(Quantity::Parse("8Ei").status().message(), "quantity is too large");
  EXPECT_EQ(Quantity::Parse("9223372036854775808").status().message(), "quantity is too large");
  EXPECT_TRUE(Quantity::Parse("9223372036854775807").ok());
  EXPECT_EQ(Quantity::Parse("1e19").status().message(), "quantity is too large");
  EXPECT_EQ(Quantity::Parse("1e9999").status().message(), "quantity is too large");
  EXPECT_EQ(Quantity::Parse("1234567890123456789012345678901").status().message(),
            "quantity has too many digits");
}

TEST(QuantityTest, RejectsMalformedInput) {
  for (const char* bad : {"", "Gi", "4gi", "4GB", "4 Gi", "1..5", "--1", "1e", "1e+", "4Gii",
                          "0x10", "e3", ".", "1Ki1", "1.5.Gi", "4Gi ", " 4Gi", "1e12345"}) {
    EXPECT_FALSE(Quantity::Parse(bad).ok()) << "accepted " << bad;
  }
}

TEST(QuantityTest, FormatsBinaryForm) {
  EXPECT_EQ(FormatBinaryQuantity(int64_t{4} << 30), "4Gi");
  EXPECT_EQ(FormatBinaryQuantity(int64_t{1536} << 20), "1536Mi");
  EXPECT_EQ(FormatBinaryQuantity(1000), "1000");
  EXPECT_EQ(FormatBinaryQuantity(0), "0");
}

}  // namespace
}  // namespace kvnode
