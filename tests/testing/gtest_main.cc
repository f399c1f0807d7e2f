// The main of every kvnode test binary (instead of gtest_main): like gtest_main, but a binary
// that skipped tests and failed none exits 77, which ctest reports as skipped
// (SKIP_RETURN_CODE in cmake/KvnodeHelpers.cmake), so that a suite that skipped is never
// counted as passed.
#include "gtest/gtest.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  int result = RUN_ALL_TESTS();
  const ::testing::UnitTest* unit = ::testing::UnitTest::GetInstance();
  if (result == 0 && unit->skipped_test_count() > 0 && unit->failed_test_count() == 0) {
    return 77;
  }
  return result;
}
