# Run after a Catch test program is built (cmake -P): writes OUTPUT, a file ctest
# includes, with one test per source file of the cases SPEC selects, named PREFIX<file>,
# each running that file's selected cases in one process (Catch's --filenames-as-tags
# tags each case with its file).
#
# Why batches: a process that loads LibTorch takes most of a second before its first case
# (seconds under a sanitizer), and a case in a process of its own paid it three times (the
# test program, its warm template, mpify-worker's template). In one process per file the
# sanitizer passes take about half the time and the plain pass a fifth less
# (benchmarks/README.md, "The build and the tests"). A case that needs a process of its
# own carries [own_process] and is left to catch_discover_tests.
#
# Inputs: TEST_EXECUTABLE, SPEC, PREFIX, OUTPUT, TIMEOUT, ENVIRONMENT (one NAME=value, or empty).
# (Catch 2 exits with the number of tags it listed: the listing is what says it worked.)
execute_process(COMMAND "${TEST_EXECUTABLE}" --filenames-as-tags --list-tags "${SPEC}"
                OUTPUT_VARIABLE listing ERROR_VARIABLE errors)
string(REGEX MATCHALL "\\[#[A-Za-z0-9_]+\\]" file_tags "${listing}")
if(NOT file_tags)
  message(FATAL_ERROR "no case of ${TEST_EXECUTABLE} matches '${SPEC}':\n${listing}${errors}")
endif()
list(REMOVE_DUPLICATES file_tags)

set(script "")
foreach(file_tag IN LISTS file_tags)
  string(REGEX REPLACE "^\\[#(.*)\\]$" "\\1" file "${file_tag}")
  # --warn NoTests: a batch whose spec selects nothing fails instead of passing empty.
  string(APPEND script
    "add_test([==[${PREFIX}${file}]==] [==[${TEST_EXECUTABLE}]==] --filenames-as-tags --warn NoTests --durations yes "
    "[==[${file_tag}${SPEC}]==])\n"
    "set_tests_properties([==[${PREFIX}${file}]==] PROPERTIES TIMEOUT ${TIMEOUT})\n")
  if(ENVIRONMENT)
    string(APPEND script
      "set_tests_properties([==[${PREFIX}${file}]==] PROPERTIES ENVIRONMENT [==[${ENVIRONMENT}]==])\n")
  endif()
endforeach()
file(WRITE "${OUTPUT}" "${script}")
