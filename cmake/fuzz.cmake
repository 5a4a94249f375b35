# cmake/fuzz.cmake -- the libFuzzer target of the public API (issue 4).
#
# tests/fuzz/fuzz_api.c turns bytes into sequences of API calls on small
# pools and checks every return code against a model of what pinpool.h
# documents.  Built only with clang and AddressSanitizer (the `asan` preset:
# address,undefined, -O1, PINPOOL_DEBUG=ON): the sanitizer flags are already
# on every target of that build; here the library is compiled once more
# with coverage instrumentation (-fsanitize=fuzzer-no-link) and the target
# is linked with libFuzzer (-fsanitize=fuzzer; Debian: libclang-rt-14-dev).
#
# Tests:
#   fuzz.api.corpus  every file of tests/fuzz/corpus once (regression run)
#   fuzz.api         45 s of fuzzing from that corpus; new units go to a
#                    fresh directory of the build tree, never to the repo
if(NOT CMAKE_C_COMPILER_ID STREQUAL "Clang" OR NOT PINPOOL_SANITIZE MATCHES "address")
    return()
endif()

include(CheckCSourceCompiles)
set(CMAKE_REQUIRED_FLAGS "-fsanitize=fuzzer")
check_c_source_compiles([[
#include <stddef.h>
#include <stdint.h>
int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }
]] PINPOOL_HAVE_LIBFUZZER)
unset(CMAKE_REQUIRED_FLAGS)
if(NOT PINPOOL_HAVE_LIBFUZZER)
    message(WARNING "clang cannot link -fsanitize=fuzzer (install libclang-rt-14-dev): "
                    "no fuzz targets")
    return()
endif()

# The library again, with coverage for the fuzzer.  Static, so the target
# can use the test hooks (pp__debug_set_*, pp__alloc_fault_hook,
# pp__pool_is_valid), as the unit tests do.
add_library(pinpool_fuzz STATIC ${PINPOOL_SOURCES})
pinpool_library_settings(pinpool_fuzz)
target_compile_options(pinpool_fuzz PRIVATE -fsanitize=fuzzer-no-link)
target_link_libraries(pinpool_fuzz INTERFACE
    PkgConfig::CK PkgConfig::HWLOC PkgConfig::XXHASH PkgConfig::LZ4 Threads::Threads)

add_executable(fuzz_api tests/fuzz/fuzz_api.c)
set_target_properties(fuzz_api PROPERTIES
    C_STANDARD 11
    C_EXTENSIONS ON
    RUNTIME_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/tests)
target_compile_options(fuzz_api PRIVATE -Wall -Wextra -fsanitize=fuzzer)
target_link_libraries(fuzz_api PRIVATE pinpool_fuzz pinpool_internal Threads::Threads)
target_link_options(fuzz_api PRIVATE -fsanitize=fuzzer)

set(_pp_fuzz_corpus ${CMAKE_CURRENT_SOURCE_DIR}/tests/fuzz/corpus)
set(_pp_fuzz_work ${CMAKE_CURRENT_BINARY_DIR}/fuzz)
# A crash, a sanitizer report, a leak, a timeout or an out-of-memory: each
# makes libFuzzer print one of these (and exit nonzero, which fails too).
set(_pp_fuzz_fail
    "${PINPOOL_SANITIZER_REGEX}|ERROR: libFuzzer|deadly signal|fuzz_api: FAIL")
# ASAN_OPTIONS has detect_leaks=1; libFuzzer also checks for leaks after
# every input that allocated more than it freed (-detect_leaks=1).
set(_pp_fuzz_env ${PINPOOL_TEST_ENV})

# Regression: each corpus file once.
add_test(NAME fuzz.api.corpus
    COMMAND ${CMAKE_COMMAND}
        -DFUZZER=$<TARGET_FILE:fuzz_api>
        -DCORPUS=${_pp_fuzz_corpus}
        -DWORK=${_pp_fuzz_work}/corpus-run
        -DMODE=corpus
        -P ${CMAKE_CURRENT_SOURCE_DIR}/tests/fuzz/run_fuzz.cmake)
# Bounded fuzzing: about a minute in all (45 s of fuzzing, the corpus load
# and the pools' teardown).
add_test(NAME fuzz.api
    COMMAND ${CMAKE_COMMAND}
        -DFUZZER=$<TARGET_FILE:fuzz_api>
        -DCORPUS=${_pp_fuzz_corpus}
        -DWORK=${_pp_fuzz_work}/api-run
        -DMODE=fuzz
        -DSECONDS=45
        -P ${CMAKE_CURRENT_SOURCE_DIR}/tests/fuzz/run_fuzz.cmake)
set_tests_properties(fuzz.api.corpus PROPERTIES
    TIMEOUT 120
    FAIL_REGULAR_EXPRESSION "${_pp_fuzz_fail}"
    ENVIRONMENT "${_pp_fuzz_env}")
set_tests_properties(fuzz.api PROPERTIES
    TIMEOUT 180
    FAIL_REGULAR_EXPRESSION "${_pp_fuzz_fail}"
    ENVIRONMENT "${_pp_fuzz_env}")
