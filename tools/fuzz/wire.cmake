# Included by tools/fuzz/run.sh (as CMAKE_PROJECT_INCLUDE) only while the top-level
# CMakeLists.txt does not add tools/fuzz itself: defers an include() of tools/fuzz/CMakeLists.txt
# to the end of the top-level file, after every src/ room (and so loom_io) exists. (CMake does
# not allow a deferred add_subdirectory; the fuzz CMakeLists uses list-dir-relative paths so it
# works either way.)
cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}"
               CALL include "${CMAKE_SOURCE_DIR}/tools/fuzz/CMakeLists.txt")
