# tests/fuzz/run_fuzz.cmake -- runs tests/fuzz/fuzz_api for ctest
# (tests/fuzz/CMakeLists.txt).  cmake -P with:
#   FUZZER  the fuzz_api binary
#   CORPUS  the repository's seed corpus (read only: never written)
#   WORK    a directory of the build tree, emptied first
#   MODE    corpus: run every corpus file once (regression)
#           fuzz:   fuzz for SECONDS seconds; new units go to WORK/new
# libFuzzer's output goes to ctest's; artifacts (crash-*, leak-*, timeout-*,
# oom-*) go to WORK/artifacts, and any of them fails the test.
foreach(v FUZZER CORPUS WORK MODE)
    if(NOT DEFINED ${v})
        message(FATAL_ERROR "run_fuzz.cmake: ${v} not set")
    endif()
endforeach()

file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}/new" "${WORK}/artifacts")
set(common
    -timeout=30
    -rss_limit_mb=2048
    -artifact_prefix=${WORK}/artifacts/
    -print_final_stats=1)
if(EXISTS "${CORPUS}/../fuzz_api.dict")
    list(APPEND common -dict=${CORPUS}/../fuzz_api.dict)
endif()

if(MODE STREQUAL "corpus")
    file(GLOB units LIST_DIRECTORIES false "${CORPUS}/*")
    list(SORT units)
    list(LENGTH units nunits)
    if(nunits EQUAL 0)
        message(FATAL_ERROR "run_fuzz.cmake: no corpus files in ${CORPUS}")
    endif()
    message(STATUS "fuzz_api: ${nunits} corpus files")
    # Files, not a directory: libFuzzer runs each once and writes nothing.
    execute_process(COMMAND "${FUZZER}" ${common} ${units}
        WORKING_DIRECTORY "${WORK}"
        RESULT_VARIABLE rc)
elseif(MODE STREQUAL "fuzz")
    if(NOT DEFINED SECONDS)
        set(SECONDS 45)
    endif()
    # WORK/new first: libFuzzer writes new units only to its first corpus
    # directory; the repository's corpus is only read.
    execute_process(COMMAND "${FUZZER}" ${common}
            -max_total_time=${SECONDS}
            -max_len=512
            "${WORK}/new" "${CORPUS}"
        WORKING_DIRECTORY "${WORK}"
        RESULT_VARIABLE rc)
else()
    message(FATAL_ERROR "run_fuzz.cmake: MODE ${MODE}: corpus or fuzz")
endif()

file(GLOB artifacts "${WORK}/artifacts/*")
if(NOT rc EQUAL 0 OR artifacts)
    message(FATAL_ERROR "fuzz_api: FAIL (exit ${rc}; artifacts: ${artifacts})")
endif()
