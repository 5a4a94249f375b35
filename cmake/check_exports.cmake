# cmake/check_exports.cmake -- the product libraries hold no test code and
# export only public names.  Run with cmake -P:
#   -DNM=<nm> -DSHARED=<lib.so> -DSTATIC=<lib.a>
#   [-DSHARED_MPI=<lib.so>] [-DSTATIC_MPI=<lib.a>] [-DPUBLIC=<regex>]
# Fails (exit code non-zero) and lists the symbols at fault if
#   - a shared library's dynamic symbol table (nm -D) defines a name that
#     PUBLIC does not match (pp_<word>: the API of pinpool.h and
#     pinpool_mpi.h; never pp__, the internal prefix);
#   - any library, shared or static, defines a test symbol at all, global
#     or local: the test hooks (testing/testhooks.c), the test points (os/checks.h,
#     the MPI layer's layer.h), random yields (testing/yield.c), the allocation
#     counter and fault hooks (os/alloc.c), the in-process MPI transport.
# The tests link pinpool_testing, where these live (docs/testing.md).
if(NOT NM)
    message(FATAL_ERROR "check_exports: NM not set")
endif()
list(APPEND SHARED ${SHARED_MPI})
list(APPEND STATIC ${STATIC_MPI})
if(NOT PUBLIC)
    set(PUBLIC "^pp_[a-z0-9]")
endif()
set(_test_names
    "pp__test_point|test_point|_debug_|debug_yield|alloc_fail|alloc_count|alloc_fault"
    "|yield_|_yield|testhook|inproc|_tp_run|pp__table_seg_slots|pp__swap_path"
    "|^test_allocs$|^test_fault_ctx$|fail_countdown")
string(JOIN "" _test_names ${_test_names})

set(_bad "")

include(${CMAKE_CURRENT_LIST_DIR}/nm_symbols.cmake)

# The names nm lists (pp_nm_symbols, without the types).
function(_pp_nm out)
    pp_nm_symbols(symbols check_exports ${ARGN})
    list(TRANSFORM symbols REPLACE "^[A-Za-z]:" "")
    set(${out} "${symbols}" PARENT_SCOPE)
endfunction()

foreach(lib IN LISTS SHARED STATIC)
    if(NOT EXISTS "${lib}")
        message(FATAL_ERROR "check_exports: ${lib} does not exist")
    endif()
endforeach()

set(_n_exported 0)
foreach(lib IN LISTS SHARED)
    _pp_nm(dyn -D --defined-only "${lib}")
    foreach(sym IN LISTS dyn)
        math(EXPR _n_exported "${_n_exported} + 1")
        if(NOT sym MATCHES "${PUBLIC}" OR sym MATCHES "^pp__")
            list(APPEND _bad "${lib}: exports ${sym}, not a public name")
        endif()
    endforeach()
endforeach()

set(_n_defined 0)
foreach(lib IN LISTS SHARED STATIC)
    _pp_nm(all --defined-only "${lib}")
    list(LENGTH all n)
    math(EXPR _n_defined "${_n_defined} + ${n}")
    foreach(sym IN LISTS all)
        if(sym MATCHES "${_test_names}")
            list(APPEND _bad "${lib}: defines ${sym}, a test symbol")
        endif()
    endforeach()
endforeach()

if(_n_exported EQUAL 0 AND SHARED)
    message(FATAL_ERROR "check_exports: no exported symbol found in ${SHARED}")
endif()
if(_bad)
    list(LENGTH _bad n)
    string(REPLACE ";" "\n  " _bad "${_bad}")
    message(FATAL_ERROR "check_exports: ${n} symbol(s) at fault:\n  ${_bad}")
endif()
message(STATUS "check_exports: ${_n_exported} exported names, all public; "
               "${_n_defined} defined symbols, no test symbol")
