# cmake/pinpool_testing.cmake -- pinpool_testing, the testing variant of
# the library: the sources of the product compiled a second time with
# PP__TESTING=1 (src/os/checks.h), which turns on the test points, the random
# yields of debug builds and the allocation counter and fault hooks, plus
# src/testing/yield.c and src/testing/testhooks.c.  A static library, never installed.  The
# unit tests, the stress programs, the fuzz target and the seeded copies
# (tests/seeded/) link it; the examples and the benchmarks link the
# product, libpinpool.so and libpinpool.a, which hold none of that (the
# test api.no_test_symbols, cmake/check_exports.cmake).
#
# Linking it also gives a program the internal headers (src/) and
# PP__TESTING=1, so that testhooks.h compiles only there.
if(NOT (PINPOOL_BUILD_TESTS OR PINPOOL_BUILD_STRESS))
    return()
endif()

add_library(pinpool_testing STATIC ${PINPOOL_SOURCES} ${PINPOOL_TESTING_SOURCES}
    ${PINPOOL_INTERNAL_HEADERS})
pinpool_library_settings(pinpool_testing)
target_compile_definitions(pinpool_testing PUBLIC PP__TESTING=1)
target_include_directories(pinpool_testing PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/include)
target_link_libraries(pinpool_testing PUBLIC pinpool_internal)
