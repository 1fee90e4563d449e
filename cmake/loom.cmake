# Shared helpers for every room's CMakeLists.txt.

# -Wno-restrict: GCC 12 reports false positives on std::string concatenation at -O3 (GCC PR105651).
set(LOOM_WARNINGS -Wall -Wextra -Werror -Wno-unused-parameter)
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  list(APPEND LOOM_WARNINGS -Wno-restrict)
endif()

# ASan + UBSan (GCC or Clang). -fno-sanitize-recover: undefined behaviour aborts the test that
# hit it instead of printing a line that nobody reads.
if(LOOM_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined -fno-sanitize-recover=all)
endif()

# loom_library(NAME SOURCES a.cc b.cc DEPS x y)
function(loom_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_compile_options(${name} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${LOOM_WARNINGS}>)
  target_link_libraries(${name} PUBLIC ${ARG_DEPS})
endfunction()

# loom_test(NAME SOURCES a_test.cc DEPS lib [LABELS x])
# Tests get LOOM_SHARED_DIR (../shared, may be absent), LOOM_SOURCE_DIR and
# LOOM_REQUIRE_SHARED_DATA (0/1) as compile definitions and tests/ on the include path, for
# tests/support/test_data.h.
function(loom_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_compile_options(${name} PRIVATE ${LOOM_WARNINGS})
  target_compile_definitions(${name} PRIVATE LOOM_SHARED_DIR="${LOOM_SHARED_DIR}"
                                             LOOM_SOURCE_DIR="${LOOM_SOURCE_DIR}"
                                             LOOM_REQUIRE_SHARED_DATA=$<BOOL:${LOOM_REQUIRE_SHARED_DATA}>)
  target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR}/tests)
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gtest_main)
  add_test(NAME ${name} COMMAND ${name})
  if(ARG_LABELS)
    set_tests_properties(${name} PROPERTIES LABELS "${ARG_LABELS}")
  endif()
endfunction()
