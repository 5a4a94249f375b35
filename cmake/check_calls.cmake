# cmake/check_calls.cmake -- calls go only downward, and names tell their
# scope.  Run with cmake -P:
#   -DNM=<nm> -DORDER=<src/a.c,src/b.c,...> -DOBJECTS=<a.c.o,b.c.o,...>
#   [-DLAYERS=<os,core,swap,reclaim,api>]
# (Lists are comma-separated: a semicolon would split the test's command.)
# ORDER lists a library's sources from the bottom up (PINPOOL_SOURCES,
# PINPOOL_MPI_SOURCES).  OBJECTS are their compiled objects.  Fails, and
# names each call at fault, if a file refers to a function or variable
# defined in a file listed after it: a call upward, or sideways within a
# layer, which is what makes a cycle.  With LAYERS, the files of each
# folder must also come as one run, in the order LAYERS names the folders,
# so that no folder calls a folder above it.
#
# The references are the objects' own (nm): inline functions of a header
# count in the file that calls them, static functions do not leave their
# file.  Calls through a function pointer are not references; the two the
# library makes upward are listed in docs/design.md ("Where the code is").
foreach(v NM ORDER OBJECTS)
    if(NOT DEFINED ${v})
        message(FATAL_ERROR "check_calls: ${v} not given")
    endif()
endforeach()

foreach(v ORDER OBJECTS LAYERS)
    if(DEFINED ${v})             # LAYERS is optional
        string(REPLACE "," ";" ${v} "${${v}}")
    endif()
endforeach()

# Each object's source, as ORDER names it.
set(_rank 0)
foreach(src IN LISTS ORDER)
    set(_rank_${src} ${_rank})
    math(EXPR _rank "${_rank} + 1")
endforeach()

set(_objs "")
foreach(obj IN LISTS OBJECTS)
    if(NOT obj MATCHES "(src/.*[.]c)[.]o(bj)?$")
        message(FATAL_ERROR "check_calls: ${obj}: not an object of src/")
    endif()
    set(src "${CMAKE_MATCH_1}")
    if(NOT DEFINED _rank_${src})
        message(FATAL_ERROR "check_calls: ${src} is not in ORDER")
    endif()
    set(_src_${obj} "${src}")
    list(APPEND _objs "${obj}")
endforeach()

include(${CMAKE_CURRENT_LIST_DIR}/nm_symbols.cmake)

# The "type:name" symbols of an object (pp_nm_symbols).
function(_pp_nm out obj)
    pp_nm_symbols(symbols check_calls ${ARGN} "${obj}")
    set(${out} "${symbols}" PARENT_SCOPE)
endfunction()

# Where each global name is defined; and the name tells its scope: a
# function or variable another file uses is pp__<file>_... (or pp__<file>).
# That a static one has no pp__ prefix is checked on the sources
# (check_layout.cmake): in an object, a header's static inline function
# that was not inlined (sanitizer builds, -O1) is a local pp__ symbol too.
set(_bad "")
foreach(obj IN LISTS _objs)
    get_filename_component(base "${_src_${obj}}" NAME_WE)
    _pp_nm(syms "${obj}" --defined-only)
    foreach(s IN LISTS syms)
        string(REGEX MATCH "^[A-Za-z]" type "${s}")
        string(REGEX REPLACE "^[A-Za-z]:" "" name "${s}")
        if(type MATCHES "^[TDBRV]$")
            set(_def_${name} "${_src_${obj}}")
            if(name MATCHES "^pp__" AND NOT name MATCHES "^pp__${base}(_|$)")
                list(APPEND _bad "${_src_${obj}}: ${name} is used by other files: name it pp__${base}_...")
            endif()
        endif()
    endforeach()
endforeach()

set(_edges 0)
foreach(obj IN LISTS _objs)
    set(from "${_src_${obj}}")
    _pp_nm(syms "${obj}" --undefined-only)
    foreach(s IN LISTS syms)
        string(REGEX REPLACE "^[A-Za-z]:" "" name "${s}")
        if(NOT DEFINED _def_${name})
            continue()               # a library's, or the system's
        endif()
        set(to "${_def_${name}}")
        math(EXPR _edges "${_edges} + 1")
        if(NOT _rank_${to} LESS _rank_${from})
            list(APPEND _bad "${from} -> ${to} (${name}): a reference up or sideways")
        endif()
    endforeach()
endforeach()

if(DEFINED LAYERS)
    # The folders of ORDER, run by run.
    set(runs "")
    set(last "")
    foreach(src IN LISTS ORDER)
        get_filename_component(dir "${src}" DIRECTORY)
        get_filename_component(dir "${dir}" NAME)
        if(NOT dir STREQUAL last)
            list(APPEND runs "${dir}")
            set(last "${dir}")
        endif()
    endforeach()
    if(NOT runs STREQUAL LAYERS)
        list(APPEND _bad "folders in ORDER: ${runs}; the layers are: ${LAYERS}")
    endif()
endif()

if(_bad)
    list(LENGTH _bad n)
    string(REPLACE ";" "\n  " text "${_bad}")
    message(FATAL_ERROR "check_calls: ${n} problem(s); a reference may go only "
        "downward (each file may call only the files listed before it), a "
        "name must tell its scope:\n  ${text}")
endif()
list(LENGTH _objs nobj)
message(STATUS "check_calls: ${nobj} files, ${_edges} references between them, all downward; names tell their scope")
