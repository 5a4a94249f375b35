# cmake/pinpool_targets.cmake -- how the project's programs and tests are
# declared, so that every folder's CMakeLists.txt says only what differs.

# pinpool_program(<target> SOURCES <file>... [LIBS <target>...] [INTERNAL])
#   A C11 program (GNU extensions on, -Wall -Wextra) written to this
#   folder's binary directory, linked to LIBS and the threads library.
#   INTERNAL: it also uses the internal headers and test hooks of src/
#   (target pinpool_internal), as the unit tests and stress programs do.
function(pinpool_program target)
    cmake_parse_arguments(P "INTERNAL" "" "SOURCES;LIBS" ${ARGN})
    add_executable(${target} ${P_SOURCES})
    set_target_properties(${target} PROPERTIES
        C_STANDARD 11
        C_EXTENSIONS ON
        RUNTIME_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
    target_compile_options(${target} PRIVATE -Wall -Wextra)
    target_link_libraries(${target} PRIVATE ${P_LIBS} Threads::Threads)
    if(P_INTERNAL)
        target_link_libraries(${target} PRIVATE pinpool_internal)
    endif()
endfunction()

# pinpool_stress_program(<target> <library> <source>...): a stress program
# linked against library -- the testing variant pinpool_testing, or a
# seeded copy (tests/seeded/) -- and the internal test hooks, written to
# the build tree's stress/; its sources include "common/..." from stress/.
function(pinpool_stress_program target library)
    pinpool_program(${target} SOURCES ${ARGN} LIBS ${library} INTERNAL)
    target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR}/stress)
    set_target_properties(${target} PROPERTIES
        RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/stress)
endfunction()

# pinpool_test(<name> COMMAND <command>... [TIMEOUT <s>] [PASS <regex>]
#              [FAIL <regex>] [ENV <var=value>...] [ENVIRONMENT <var=value>...]
#              [LABELS <label>...] [NO_SANITIZER_CHECK] [RUN_SERIAL])
#   A ctest test with the project's defaults: TIMEOUT 300; it fails on any
#   sanitizer report (PINPOOL_SANITIZER_REGEX, plus FAIL if given) unless
#   NO_SANITIZER_CHECK; its environment is PINPOOL_TEST_ENV plus ENV, or
#   exactly ENVIRONMENT when that is given.  In the asan build the command
#   runs through cmake/lsan_retry.sh.
function(pinpool_test name)
    cmake_parse_arguments(T "NO_SANITIZER_CHECK;RUN_SERIAL" "TIMEOUT;PASS;FAIL"
        "COMMAND;ENV;ENVIRONMENT;LABELS" ${ARGN})
    if(NOT T_COMMAND)
        message(FATAL_ERROR "pinpool_test(${name}): no COMMAND")
    endif()
    if(PINPOOL_SANITIZE MATCHES "address")
        # A crash of the leak checker's own tracer at exit, with no report,
        # runs the command once more (cmake/lsan_retry.sh says why).
        # (add_test turns a target's name into its file only when it comes
        # first: here the script comes first)
        list(GET T_COMMAND 0 first)
        if(TARGET ${first})
            list(REMOVE_AT T_COMMAND 0)
            list(INSERT T_COMMAND 0 "$<TARGET_FILE:${first}>")
        endif()
        add_test(NAME ${name} COMMAND bash ${PROJECT_SOURCE_DIR}/cmake/lsan_retry.sh ${T_COMMAND})
    else()
        add_test(NAME ${name} COMMAND ${T_COMMAND})
    endif()
    if(NOT T_TIMEOUT)
        set(T_TIMEOUT 300)
    endif()
    set(fail "")
    if(NOT T_NO_SANITIZER_CHECK)
        set(fail "${PINPOOL_SANITIZER_REGEX}")
    endif()
    if(T_FAIL)
        if(fail)
            set(fail "${fail}|${T_FAIL}")
        else()
            set(fail "${T_FAIL}")
        endif()
    endif()
    if(DEFINED T_ENVIRONMENT)
        set(env ${T_ENVIRONMENT})
    else()
        set(env ${PINPOOL_TEST_ENV} ${T_ENV})
    endif()
    set_tests_properties(${name} PROPERTIES TIMEOUT ${T_TIMEOUT})
    if(fail)
        set_tests_properties(${name} PROPERTIES FAIL_REGULAR_EXPRESSION "${fail}")
    endif()
    if(T_PASS)
        set_tests_properties(${name} PROPERTIES PASS_REGULAR_EXPRESSION "${T_PASS}")
    endif()
    if(env)
        set_tests_properties(${name} PROPERTIES ENVIRONMENT "${env}")
    endif()
    if(T_LABELS)
        set_tests_properties(${name} PROPERTIES LABELS "${T_LABELS}")
    endif()
    if(T_RUN_SERIAL)
        set_tests_properties(${name} PROPERTIES RUN_SERIAL TRUE)
    endif()
endfunction()
