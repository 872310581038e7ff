# Turns the worked example at the top of a public header into a Catch2 test
# case, so every header example is real code that compiles and runs with the
# engine's tests and cannot rot.
#
#   cmake -DHEADER=<path to drl/x.h> -DOUT=<generated .cpp> -P extract_example.cmake
#
# The convention, for every header in core/include/drl/:
#   - a line that is exactly "// Example:" opens the example;
#   - the example is the run of lines right after it that start with "//   "
#     (two slashes, three spaces) or are exactly "//" (a blank line); that
#     prefix is stripped, deeper indentation is kept, and the first other line
#     ends the example;
#   - `assert(...)` states what a step returns; in the test it becomes a
#     Catch2 CHECK (reported rather than aborting, and live in Release builds).
# The generated file includes the header first (so it must stand alone), then
# every other public header (an example may use the whole API, as a host
# does), and points diagnostics at the header's own lines.

if(NOT HEADER OR NOT OUT)
  message(FATAL_ERROR "usage: cmake -DHEADER=<header> -DOUT=<file.cpp> -P extract_example.cmake")
endif()

get_filename_component(dir "${HEADER}" DIRECTORY)
get_filename_component(name "${HEADER}" NAME)
get_filename_component(folder "${dir}" NAME)  # "drl"

# Read as one string, never as a CMake list: code is full of ';' and '['.
file(READ "${HEADER}" content)
set(content "\n${content}")
string(FIND "${content}" "\n// Example:\n" at)
if(at EQUAL -1)
  message(FATAL_ERROR "${HEADER}: no '// Example:' line; every public header opens with a worked example")
endif()

# The example's first line number in the header (the content was given a leading newline).
string(SUBSTRING "${content}" 0 ${at} before)
string(REGEX REPLACE "[^\n]" "" newlines "${before}")
string(LENGTH "${newlines}" count)
math(EXPR example_line "${count} + 1")
math(EXPR first_line "${count} + 2")

math(EXPR body_at "${at} + 12")  # past "\n// Example:"
string(SUBSTRING "${content}" ${body_at} -1 rest)
string(REGEX MATCH "^(\n//(   [^\n]*)?)+" block "${rest}")
string(REGEX REPLACE "(\n//)+$" "" block "${block}")  # blank lines after the example
if(block STREQUAL "")
  message(FATAL_ERROR "${HEADER}:${example_line}: the example is empty; its lines start with '//   '")
endif()
string(REPLACE "\n//   " "\n  " code "${block}")
string(REPLACE "\n//" "\n" code "${code}")  # what is left are the blank lines

file(GLOB others "${dir}/*.h")
list(SORT others)
set(includes "")
foreach(other IN LISTS others)
  get_filename_component(other_name "${other}" NAME)
  if(NOT other_name STREQUAL name)
    string(APPEND includes "#include \"${folder}/${other_name}\"\n")
  endif()
endforeach()

set(generated "// Generated from ${folder}/${name} by test/support/extract_example.cmake.
// Edit the example in the header, not this file.
#include \"${folder}/${name}\"  // first: the header must stand on its own

${includes}
#include <catch2/catch.hpp>

// An example's asserts are checks: reported by Catch2, and kept in Release.
#undef assert
#define assert(...) CHECK(__VA_ARGS__)

TEST_CASE(\"the worked example in ${folder}/${name}\", \"[examples]\") {
#line ${first_line} \"${HEADER}\"${code}
}
")

file(WRITE "${OUT}" "${generated}")
