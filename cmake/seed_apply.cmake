# cmake/seed_apply.cmake -- makes a seeded copy of the library's sources:
# copies SRC_DIR/src and SRC_DIR/include (the inline fast path is in
# include/pinpool_inline.h) to OUT_DIR and applies PATCH to them (patch -p1,
# no fuzz).  Run as cmake -DSRC_DIR=... -DPATCH=... -DOUT_DIR=...
# -DPATCH_EXE=... [-DSTAMP=file] -P seed_apply.cmake; fails, naming the
# patch, if it no longer applies.
foreach(v SRC_DIR PATCH OUT_DIR PATCH_EXE)
    if(NOT DEFINED ${v})
        message(FATAL_ERROR "seed_apply.cmake: ${v} not given")
    endif()
endforeach()
file(REMOVE_RECURSE "${OUT_DIR}/src" "${OUT_DIR}/include")
file(MAKE_DIRECTORY "${OUT_DIR}")
file(COPY "${SRC_DIR}/src" "${SRC_DIR}/include" DESTINATION "${OUT_DIR}")
execute_process(
    COMMAND "${PATCH_EXE}" -p1 --fuzz=0 --batch --forward --no-backup-if-mismatch
            -d "${OUT_DIR}" -i "${PATCH}"
    RESULT_VARIABLE rc
    OUTPUT_VARIABLE out
    ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
    message(FATAL_ERROR
        "seeded bug: ${PATCH} no longer applies to src/ (patch exit ${rc}):\n${out}${err}"
        "Rewrite the patch against the current sources: its header says what it "
        "must break.")
endif()
if(DEFINED STAMP)
    file(TOUCH "${STAMP}")
endif()
message(STATUS "seeded bug: ${PATCH} applies")
