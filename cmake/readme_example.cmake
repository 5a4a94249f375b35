# readme_example.cmake -- ctests "readme.example" and "readme.example.cpp".
#
# Extracts the first ```c block of README.md (with -DLANG=cpp: the first
# ```cpp block, compiled as C++17 against pinpool.hpp), compiles and links
# it against the static library built here (with this build's flags), runs
# it and expects exit status 0.
#
#   cmake -DCONFIG=<build>/readme_example_config.cmake [-DLANG=cpp] -P readme_example.cmake
#
# CONFIG (written by tests/CMakeLists.txt) sets PP_README, PP_WORK_DIR,
# PP_CC, PP_CFLAGS, PP_CXX, PP_CXXFLAGS, PP_INCLUDE_DIR, PP_STATIC_LIB and
# PP_LIBS.
cmake_minimum_required(VERSION 3.21)

if(NOT DEFINED CONFIG OR NOT EXISTS "${CONFIG}")
    message(FATAL_ERROR "readme_example: CONFIG not given or missing: '${CONFIG}'")
endif()
include("${CONFIG}")
if(NOT DEFINED LANG OR LANG STREQUAL "c")
    set(LANG c)
    set(compiler "${PP_CC}" ${PP_CFLAGS} -std=c11)
    set(what "C")
elseif(LANG STREQUAL "cpp")
    set(compiler "${PP_CXX}" ${PP_CXXFLAGS} -std=c++17)
    set(what "C++")
    set(PP_WORK_DIR "${PP_WORK_DIR}_cpp")
else()
    message(FATAL_ERROR "readme_example: LANG='${LANG}': use c or cpp")
endif()

file(READ "${PP_README}" readme)
string(FIND "${readme}" "```${LANG}\n" start)
if(start EQUAL -1)
    message(FATAL_ERROR "readme_example: no ```${LANG} block in ${PP_README}")
endif()
string(LENGTH "```${LANG}\n" fence)
math(EXPR start "${start} + ${fence}")
string(SUBSTRING "${readme}" ${start} -1 rest)
string(FIND "${rest}" "\n```" end)
if(end EQUAL -1)
    message(FATAL_ERROR "readme_example: the first ```${LANG} block is not closed")
endif()
math(EXPR end "${end} + 1")
string(SUBSTRING "${rest}" 0 ${end} code)

file(REMOVE_RECURSE "${PP_WORK_DIR}")
file(MAKE_DIRECTORY "${PP_WORK_DIR}")
set(src "${PP_WORK_DIR}/readme_example.${LANG}")
set(exe "${PP_WORK_DIR}/readme_example")
file(WRITE "${src}" "${code}")

list(REMOVE_ITEM PP_LIBS "")
set(cmd ${compiler} -Wall -Wextra -Werror -pedantic
        "-I${PP_INCLUDE_DIR}" "${src}" -o "${exe}"
        "${PP_STATIC_LIB}" ${PP_LIBS})
string(REPLACE ";" " " shown "${cmd}")
message(STATUS "compile: ${shown}")
execute_process(COMMAND ${cmd} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
    message(FATAL_ERROR "readme_example: the README's ${what} example does not compile (${rc})")
endif()

message(STATUS "run: ${exe}")
execute_process(COMMAND "${exe}" WORKING_DIRECTORY "${PP_WORK_DIR}" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
    message(FATAL_ERROR "readme_example: the README's ${what} example exited with ${rc}")
endif()
message(STATUS "readme_example: ok")
