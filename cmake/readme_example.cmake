# readme_example.cmake -- ctest "readme.example".
#
# Extracts the first ```c block of README.md, compiles and links it against
# the static library built here (with this build's flags), runs it and
# expects exit status 0.
#
#   cmake -DCONFIG=<build>/readme_example_config.cmake -P readme_example.cmake
#
# CONFIG (written by CMakeLists.txt) sets PP_README, PP_WORK_DIR, PP_CC,
# PP_CFLAGS, PP_INCLUDE_DIR, PP_STATIC_LIB and PP_LIBS.
cmake_minimum_required(VERSION 3.21)

if(NOT DEFINED CONFIG OR NOT EXISTS "${CONFIG}")
    message(FATAL_ERROR "readme_example: CONFIG not given or missing: '${CONFIG}'")
endif()
include("${CONFIG}")

file(READ "${PP_README}" readme)
string(FIND "${readme}" "```c\n" start)
if(start EQUAL -1)
    message(FATAL_ERROR "readme_example: no ```c block in ${PP_README}")
endif()
math(EXPR start "${start} + 5")
string(SUBSTRING "${readme}" ${start} -1 rest)
string(FIND "${rest}" "\n```" end)
if(end EQUAL -1)
    message(FATAL_ERROR "readme_example: the first ```c block is not closed")
endif()
math(EXPR end "${end} + 1")
string(SUBSTRING "${rest}" 0 ${end} code)

file(REMOVE_RECURSE "${PP_WORK_DIR}")
file(MAKE_DIRECTORY "${PP_WORK_DIR}")
set(src "${PP_WORK_DIR}/readme_example.c")
set(exe "${PP_WORK_DIR}/readme_example")
file(WRITE "${src}" "${code}")

list(REMOVE_ITEM PP_LIBS "")
set(cmd "${PP_CC}" ${PP_CFLAGS} -std=c11 -Wall -Wextra -Werror -pedantic
        "-I${PP_INCLUDE_DIR}" "${src}" -o "${exe}"
        "${PP_STATIC_LIB}" ${PP_LIBS})
string(REPLACE ";" " " shown "${cmd}")
message(STATUS "compile: ${shown}")
execute_process(COMMAND ${cmd} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
    message(FATAL_ERROR "readme_example: the README's C example does not compile (${rc})")
endif()

message(STATUS "run: ${exe}")
execute_process(COMMAND "${exe}" WORKING_DIRECTORY "${PP_WORK_DIR}" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
    message(FATAL_ERROR "readme_example: the README's C example exited with ${rc}")
endif()
message(STATUS "readme_example: ok")
