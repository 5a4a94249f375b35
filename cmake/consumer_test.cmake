# consumer_test.cmake -- ctest "consumer.find_package".
#
# 1. installs this build tree into a fresh prefix;
# 2. configures and builds tests/consumer against it (find_package(pinpool),
#    a C program and a C++ one, through pinpool.hpp, on pinpool::pinpool,
#    the same two on pinpool::pinpool_static) and runs all four;
# 3. compiles tests/consumer/main.c with
#    `cc $(pkg-config --cflags --libs pinpool)`, and main.cpp the same way
#    with the C++ compiler, and runs both.
# Any failing step fails the test; nothing is skipped.
#
# Variables: PP_BINARY_DIR, PP_SOURCE_DIR, PP_WORK_DIR, PP_GENERATOR,
# PP_CONFIG, PP_C_COMPILER, PP_CXX_COMPILER, PP_PKG_CONFIG.
cmake_minimum_required(VERSION 3.21)

foreach(v PP_BINARY_DIR PP_SOURCE_DIR PP_WORK_DIR PP_GENERATOR PP_C_COMPILER PP_CXX_COMPILER
        PP_PKG_CONFIG)
    if(NOT DEFINED ${v} OR "${${v}}" STREQUAL "")
        message(FATAL_ERROR "consumer_test: ${v} is not set")
    endif()
endforeach()
if(NOT PP_CONFIG)
    set(PP_CONFIG Release)
endif()

set(PP_SCRIPT consumer_test)
include(${CMAKE_CURRENT_LIST_DIR}/script_run.cmake)

set(prefix "${PP_WORK_DIR}/prefix")
set(build "${PP_WORK_DIR}/build")
file(REMOVE_RECURSE "${PP_WORK_DIR}")
file(MAKE_DIRECTORY "${PP_WORK_DIR}")

# 1. Install.
pp_run("install" "${CMAKE_COMMAND}" --install "${PP_BINARY_DIR}"
    --prefix "${prefix}" --config "${PP_CONFIG}")

# The headers: pinpool.hpp beside pinpool.h, so that one -I serves both.
file(GLOB_RECURSE installed_h "${prefix}/*/pinpool.h")
if(NOT installed_h)
    message(FATAL_ERROR "consumer_test: pinpool.h was not installed under ${prefix}")
endif()
list(GET installed_h 0 installed_h)
get_filename_component(incdir "${installed_h}" DIRECTORY)
if(NOT EXISTS "${incdir}/pinpool.hpp")
    message(FATAL_ERROR "consumer_test: pinpool.hpp is not installed beside ${installed_h}")
endif()
foreach(h pinpool_stats.h pinpool_inline.h)
    if(NOT EXISTS "${incdir}/${h}")
        message(FATAL_ERROR "consumer_test: ${h} is not installed beside ${installed_h}")
    endif()
endforeach()

# 2. find_package(pinpool) in a separate project.
pp_run("configure consumer" "${CMAKE_COMMAND}"
    -S "${PP_SOURCE_DIR}/tests/consumer" -B "${build}"
    -G "${PP_GENERATOR}"
    "-DCMAKE_BUILD_TYPE=${PP_CONFIG}"
    "-DCMAKE_C_COMPILER=${PP_C_COMPILER}"
    "-DCMAKE_CXX_COMPILER=${PP_CXX_COMPILER}"
    "-DCMAKE_PREFIX_PATH=${prefix}"
    "-DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON")
pp_run("build consumer" "${CMAKE_COMMAND}" --build "${build}" --config "${PP_CONFIG}")

foreach(exe consumer_shared consumer_static consumer_cxx_shared consumer_cxx_static
        consumer_inline_shared consumer_inline_static consumer_cxx_inline)
    file(GLOB_RECURSE found LIST_DIRECTORIES false "${build}/${exe}")
    if(NOT found)
        message(FATAL_ERROR "consumer_test: ${exe} was not built")
    endif()
    list(GET found 0 found)
    pp_run("run ${exe}" "${found}")
endforeach()

# 3. pkg-config.
file(GLOB_RECURSE pcs "${prefix}/*/pinpool.pc")
if(NOT pcs)
    message(FATAL_ERROR "consumer_test: pinpool.pc was not installed under ${prefix}")
endif()
list(GET pcs 0 pc)
get_filename_component(pcdir "${pc}" DIRECTORY)
get_filename_component(libdir "${pcdir}" DIRECTORY)
set(ENV{PKG_CONFIG_PATH} "${pcdir}")
execute_process(COMMAND "${PP_PKG_CONFIG}" --cflags --libs pinpool
    OUTPUT_VARIABLE pc_flags OUTPUT_STRIP_TRAILING_WHITESPACE
    RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
    message(FATAL_ERROR "consumer_test: pkg-config --cflags --libs pinpool failed (${rc})")
endif()
string(FIND "${pc_flags}" "-I${prefix}/" at)
if(at EQUAL -1)
    message(FATAL_ERROR "consumer_test: pkg-config gave '${pc_flags}', without -I${prefix}/...")
endif()
separate_arguments(pc_flags UNIX_COMMAND "${pc_flags}")
pp_run("compile with pkg-config" "${PP_C_COMPILER}" -std=c11 -Wall -Wextra -Werror
    "${PP_SOURCE_DIR}/tests/consumer/main.c" -o "${PP_WORK_DIR}/consumer_pkgconfig"
    ${pc_flags})
pp_run("compile C++ with pkg-config" "${PP_CXX_COMPILER}" -std=c++17 -Wall -Wextra -Werror
    -pedantic "${PP_SOURCE_DIR}/tests/consumer/main.cpp"
    -o "${PP_WORK_DIR}/consumer_cxx_pkgconfig" ${pc_flags})
set(ENV{LD_LIBRARY_PATH} "${libdir}")
pp_run("run consumer_pkgconfig" "${PP_WORK_DIR}/consumer_pkgconfig")
pp_run("run consumer_cxx_pkgconfig" "${PP_WORK_DIR}/consumer_cxx_pkgconfig")

message(STATUS "consumer_test: ok")
