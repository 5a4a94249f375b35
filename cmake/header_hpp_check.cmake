# header_hpp_check.cmake -- ctest "header.hpp".
#
# Builds tests/cxx/header_hpp.cpp with both C++ compilers (the project's and
# the other of g++ and clang++), as C++17 and C++20, with pinpool.hpp alone
# and after pinpool.h, with and without exceptions, each time with
#   -Wall -Wextra -Werror -pedantic -Wshadow
# and runs every program it links.  The project's compiler links with this
# build's flags, sanitizers included; the other one links and runs too when
# the build has no sanitizer (its runtime is not the other compiler's), and
# only compiles otherwise.  Any failing step fails the test; a missing
# compiler too.
#
#   cmake -DCONFIG=<build>/tests/cxx/header_hpp_config.cmake -P header_hpp_check.cmake
#
# CONFIG (written by tests/cxx/CMakeLists.txt) sets PP_SOURCE, PP_WORK_DIR,
# PP_INCLUDE_DIR, PP_STATIC_LIB, PP_LIBS, PP_PROJECT_CXX, PP_PROJECT_FLAGS,
# PP_OTHER_CXX, PP_SANITIZE and PP_NAMES (the two compilers' names, the
# project's first).
cmake_minimum_required(VERSION 3.21)

if(NOT DEFINED CONFIG OR NOT EXISTS "${CONFIG}")
    message(FATAL_ERROR "header_hpp_check: CONFIG not given or missing: '${CONFIG}'")
endif()
include("${CONFIG}")
foreach(v PP_SOURCE PP_WORK_DIR PP_INCLUDE_DIR PP_STATIC_LIB PP_PROJECT_CXX PP_OTHER_CXX PP_NAMES)
    if(NOT DEFINED ${v} OR "${${v}}" STREQUAL "" OR "${${v}}" MATCHES "-NOTFOUND$")
        message(FATAL_ERROR "header_hpp_check: ${v} is not set or not found ('${${v}}')")
    endif()
endforeach()
list(REMOVE_ITEM PP_LIBS "")

set(PP_SCRIPT header_hpp_check)
include(${CMAKE_CURRENT_LIST_DIR}/script_run.cmake)

file(REMOVE_RECURSE "${PP_WORK_DIR}")
file(MAKE_DIRECTORY "${PP_WORK_DIR}")

set(built 0)
set(ran 0)
foreach(which project other)
    if(which STREQUAL "project")
        set(cxx "${PP_PROJECT_CXX}")
        set(extra ${PP_PROJECT_FLAGS})
        set(link ON)
    else()
        set(cxx "${PP_OTHER_CXX}")
        set(extra "")
        if(PP_SANITIZE)
            set(link OFF)
        else()
            set(link ON)
        endif()
    endif()
    # g++ or clang++, whatever the path says (the project's may be c++).
    if(which STREQUAL "project")
        list(GET PP_NAMES 0 cxx_name)
    else()
        list(GET PP_NAMES 1 cxx_name)
    endif()
    foreach(std 17 20)
        foreach(order alone c_first)
            foreach(exc on off)
                set(name "${cxx_name}-c++${std}-${order}-exceptions_${exc}")
                set(flags -std=c++${std} -Wall -Wextra -Werror -pedantic -Wshadow
                    "-I${PP_INCLUDE_DIR}")
                if(order STREQUAL "c_first")
                    list(APPEND flags -DPP_TEST_C_FIRST)
                endif()
                if(exc STREQUAL "off")
                    list(APPEND flags -fno-exceptions)
                endif()
                set(out "${PP_WORK_DIR}/${name}")
                if(link)
                    pp_run("build ${name}" "${cxx}" ${extra} ${flags} "${PP_SOURCE}" -o "${out}"
                        "${PP_STATIC_LIB}" ${PP_LIBS})
                    pp_run("run ${name}" "${out}")
                    math(EXPR ran "${ran} + 1")
                else()
                    pp_run("compile ${name}" "${cxx}" ${flags} -c "${PP_SOURCE}" -o "${out}.o")
                endif()
                math(EXPR built "${built} + 1")
            endforeach()
        endforeach()
    endforeach()
endforeach()
message(STATUS "header_hpp_check: ok: ${built} builds, ${ran} of them run")
