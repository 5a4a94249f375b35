# cmake/nm_symbols.cmake -- the symbols nm lists, for the check scripts
# (check_exports.cmake, check_calls.cmake), which include it.
#
# pp_nm_symbols(<out> <who> <nm arguments...>) runs "${NM} -P <arguments>"
# and sets <out> to a list of "<type>:<name>" (the type is nm's letter: U
# undefined; T, D, B, R, V defined and global; lowercase local).  A member
# header of an archive ("lib.a[member.o]:") is skipped.  <who> names the
# caller in the error if nm fails.
function(pp_nm_symbols out who)
    execute_process(COMMAND "${NM}" -P ${ARGN}
        OUTPUT_VARIABLE text RESULT_VARIABLE rc ERROR_VARIABLE err)
    if(NOT rc EQUAL 0)
        message(FATAL_ERROR "${who}: ${NM} ${ARGN}: ${err}")
    endif()
    # (Square brackets would hide the list's separators from CMake.)
    string(REPLACE "[" "<" text "${text}")
    string(REPLACE "]" ">" text "${text}")
    string(REPLACE ";" "," text "${text}")
    string(REPLACE "\n" ";" text "${text}")
    set(symbols "")
    foreach(line IN LISTS text)
        if(line MATCHES "^([^ ]+) ([A-Za-z]) ")
            list(APPEND symbols "${CMAKE_MATCH_2}:${CMAKE_MATCH_1}")
        endif()
    endforeach()
    set(${out} "${symbols}" PARENT_SCOPE)
endfunction()
