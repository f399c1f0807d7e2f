#include "launcher/converter/convert_command.h"

#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvnode {
namespace {
TEST(ConvertCommandTest, Placeholder) {}
}  // namespace
}  // namespace kvnode
