# One way to declare a library, a binary and a test (after Abseil's absl_cc_library).
#
#   kvnode_library(NAME foo SRCS a.cc b.cc DEPS bar absl::status)
#   kvnode_binary(NAME kvctl SRCS main.cc DEPS foo)
#   kvnode_test(NAME foo_test SRCS foo_test.cc DEPS foo [LABELS integration])
include(CMakeParseArguments)

# The common headers, precompiled once (KVNODE_PCH, kvnode_pch in the top CMakeLists.txt).
function(kvnode_use_pch target)
  if(KVNODE_PCH)
    target_precompile_headers(${target} REUSE_FROM kvnode_pch)
    # The header was compiled with its dependencies' macros; a target must have the same.
    target_link_libraries(${target} PRIVATE ${KVNODE_PCH_DEPS})
  endif()
endfunction()

function(kvnode_library)
  cmake_parse_arguments(KV "" "NAME" "SRCS;DEPS" ${ARGN})
  add_library(${KV_NAME} STATIC ${KV_SRCS})
  target_include_directories(${KV_NAME} PUBLIC ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR}/proto)
  target_link_libraries(${KV_NAME} PUBLIC ${KV_DEPS})
  kvnode_use_pch(${KV_NAME})
endfunction()

function(kvnode_binary)
  cmake_parse_arguments(KV "" "NAME" "SRCS;DEPS" ${ARGN})
  add_executable(${KV_NAME} ${KV_SRCS})
  target_include_directories(${KV_NAME} PRIVATE ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR}/proto)
  target_link_libraries(${KV_NAME} PRIVATE ${KV_DEPS})
  kvnode_use_pch(${KV_NAME})
endfunction()

function(kvnode_test)
  if(NOT KVNODE_BUILD_TESTS)
    return()
  endif()
  cmake_parse_arguments(KV "" "NAME" "SRCS;DEPS;LABELS" ${ARGN})
  add_executable(${KV_NAME} ${KV_SRCS})
  target_include_directories(${KV_NAME} PRIVATE ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR}/proto)
  target_link_libraries(${KV_NAME} PRIVATE ${KV_DEPS} GTest::gmock kvnode_gtest_main)
  kvnode_use_pch(${KV_NAME})
  set_target_properties(${KV_NAME} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  add_test(NAME ${KV_NAME} COMMAND ${KV_NAME})
  if(NOT KV_LABELS)
    set(KV_LABELS unit)
  endif()
  # A binary that skipped tests (and failed none) exits 77: skipped, never passed.
  set_tests_properties(${KV_NAME} PROPERTIES LABELS "${KV_LABELS}" SKIP_RETURN_CODE 77
    ENVIRONMENT "KVNODE_SOURCE_DIR=${PROJECT_SOURCE_DIR};KVNODE_BINARY_DIR=${PROJECT_BINARY_DIR}")
endfunction()
