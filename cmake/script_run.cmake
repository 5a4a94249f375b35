# cmake/script_run.cmake -- for the test scripts run with cmake -P
# (consumer_test.cmake, header_hpp_check.cmake): set PP_SCRIPT to the
# script's name, include this file, then
#   pp_run(<what> <command>...)
# echoes the command, runs it, and ends the script with
# "<PP_SCRIPT>: <what> failed (<exit status>)" if it does not exit 0.
function(pp_run what)
    string(REPLACE ";" " " shown "${ARGN}")
    message(STATUS "${what}: ${shown}")
    execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0)
        message(FATAL_ERROR "${PP_SCRIPT}: ${what} failed (${rc})")
    endif()
endfunction()
