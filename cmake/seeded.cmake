# cmake/seeded.cmake -- seeded bugs: deliberately broken builds of the
# library that the reliability suite must catch (issue 4).  Included from
# CMakeLists.txt when the tests and the stress programs are built.
#
# Each seed is one #if PINPOOL_SEED_BUG_<NAME> in src/ (listed in
# src/internal.h; each #if says what it breaks and what must catch it).
# Two ways to use them:
#
#  - Configure with -DPINPOOL_SEED_BUG=<name>: the whole library of that
#    build (shared, static, everything linked to them) has the bug, so any
#    test or program can be run against it.  Never install such a build.
#    (Only where this file is included: with the tests and the stress
#    programs on, as in every preset.)
#
#  - The test suite (PINPOOL_SEED_BUG empty) builds, for each seed that
#    this build's sanitizer setting can catch, a broken copy of the library
#    (pinpool_seeded_<name>) and a torture linked to it
#    (torture_seeded_<name>), and registers
#      seeded.<name>.caught    the torture against the broken library; it
#                              passes only if the run shows the evidence
#                              named below (PASS_REGULAR_EXPRESSION);
#      seeded.<name>.control   the same invocation against the real library,
#                              which must pass (registered where the normal
#                              suite, torture.*, does not already run it).
#    Removing the seed makes the torture pass: that is what the controls
#    and the torture.* tests show.
#
# A caught run stops at its first failure (the torture stops its workers
# at the first failed check; the sanitizers halt on their first report),
# so even a long invocation ends in about a second.

set(PINPOOL_SEED_BUGS no_grace relaxed_unpin evict_ignores_pin stale_gen no_dirty)
set(PINPOOL_SEED_BUG "" CACHE STRING
    "Build the whole library with this seeded bug (tests only, never install): \"\", ${PINPOOL_SEED_BUGS}")
set_property(CACHE PINPOOL_SEED_BUG PROPERTY STRINGS "" ${PINPOOL_SEED_BUGS})
if(NOT PINPOOL_SEED_BUG STREQUAL "" AND NOT PINPOOL_SEED_BUG IN_LIST PINPOOL_SEED_BUGS)
    string(REPLACE ";" ", " _pp_seed_list "${PINPOOL_SEED_BUGS}")
    message(FATAL_ERROR
        "PINPOOL_SEED_BUG='${PINPOOL_SEED_BUG}' is not a seeded bug: use one of "
        "${_pp_seed_list} (or \"\" for the real library)")
endif()

# PINPOOL_SEED_BUG_<NAME>=1 for seed name.
function(pinpool_seed_definition name out)
    string(TOUPPER "${name}" upper)
    set(${out} "PINPOOL_SEED_BUG_${upper}=1" PARENT_SCOPE)
endfunction()

if(PINPOOL_SEED_BUG)
    # The whole build is broken on purpose: its tests are expected to fail,
    # and the per-seed copies below would only repeat it.
    pinpool_seed_definition(${PINPOOL_SEED_BUG} _pp_def)
    # On the interface every translation unit that includes internal.h gets
    # (the library's objects, the tests, the torture), so all agree.
    target_compile_definitions(pinpool_internal INTERFACE ${_pp_def})
    message(WARNING
        "PINPOOL_SEED_BUG=${PINPOOL_SEED_BUG}: this build's library has a deliberate bug "
        "(${_pp_def}); its tests are expected to fail.  Never install it.")
    return()
endif()

# Which of "default", "address", "thread" this build is, for the table below
# (undefined alone checks nothing a seed breaks: it counts as default).
if(PINPOOL_SANITIZE MATCHES "thread")
    set(_pp_seed_kind thread)
elseif(PINPOOL_SANITIZE MATCHES "address")
    set(_pp_seed_kind address)
else()
    set(_pp_seed_kind default)
endif()

set(_pp_seed_env "${PINPOOL_TEST_ENV}")
set(_pp_swaprun ${CMAKE_CURRENT_SOURCE_DIR}/tests/seeded/in_swapdir.sh)

# The broken copy of the library and its torture, once per seed.
function(pinpool_seeded_library name)
    if(TARGET pinpool_seeded_${name})
        return()
    endif()
    pinpool_seed_definition(${name} def)
    add_library(pinpool_seeded_${name} STATIC ${PINPOOL_SOURCES})
    pinpool_library_settings(pinpool_seeded_${name})
    target_compile_definitions(pinpool_seeded_${name} PRIVATE ${def})
    target_include_directories(pinpool_seeded_${name} PUBLIC
        ${CMAKE_CURRENT_SOURCE_DIR}/include)
    target_link_libraries(pinpool_seeded_${name} INTERFACE
        PkgConfig::CK PkgConfig::HWLOC PkgConfig::XXHASH PkgConfig::LZ4 Threads::Threads)
endfunction()

function(pinpool_seeded_torture_target name)
    if(TARGET torture_seeded_${name})
        return()
    endif()
    pinpool_seeded_library(${name})
    pinpool_stress_program(torture_seeded_${name} stress/torture.c pinpool_seeded_${name})
endfunction()

# pinpool_seeded_torture(NAME <seed> [TEST <suffix>] [SWAP] [CONTROL]
#                        KINDS <kind>... ARGS <torture args>... EXPECT <regex>)
# Registers seeded.<seed>[.<suffix>].caught if this build's kind is listed
# in KINDS: it passes if the output matches the evidence regex EXPECT.
# CONTROL also registers seeded.<seed>[.<suffix>].control.  SWAP runs the
# torture in a fresh swap directory (--swap DIR), removed afterwards.
function(pinpool_seeded_torture)
    cmake_parse_arguments(S "SWAP;CONTROL" "NAME;TEST;EXPECT" "KINDS;ARGS" ${ARGN})
    if(NOT _pp_seed_kind IN_LIST S_KINDS)
        return()
    endif()
    set(test seeded.${S_NAME})
    if(S_TEST)
        set(test ${test}.${S_TEST})
    endif()
    pinpool_seeded_torture_target(${S_NAME})
    set(pre "")
    if(S_SWAP)
        set(pre ${_pp_swaprun} ${CMAKE_CURRENT_BINARY_DIR})
    endif()
    add_test(NAME ${test}.caught
        COMMAND ${pre} $<TARGET_FILE:torture_seeded_${S_NAME}> ${S_ARGS})
    set_tests_properties(${test}.caught PROPERTIES
        TIMEOUT 120
        PASS_REGULAR_EXPRESSION "${S_EXPECT}"
        ENVIRONMENT "${_pp_seed_env}"
        LABELS seeded)
    if(S_CONTROL)
        add_test(NAME ${test}.control
            COMMAND ${pre} $<TARGET_FILE:torture> ${S_ARGS})
        set_tests_properties(${test}.control PROPERTIES
            TIMEOUT 300
            PASS_REGULAR_EXPRESSION "torture: PASS"
            FAIL_REGULAR_EXPRESSION "torture: FAIL|${PINPOOL_SANITIZER_REGEX}"
            ENVIRONMENT "${_pp_seed_env}"
            LABELS seeded)
    endif()
endfunction()

# --- no_grace ---------------------------------------------------------------
# tests/seeded/no_grace.c: a QSBR reader uses pp_get data while the last
# owner is released.  Against the real library the program exits 0 (the
# grace period holds the free back); against the no_grace library ASan or
# TSan must report the use of freed memory: the proof that the sanitizer
# builds catch a reclamation bug.
add_executable(seeded_no_grace tests/seeded/no_grace.c)
set_target_properties(seeded_no_grace PROPERTIES
    C_STANDARD 11
    C_EXTENSIONS ON
    RUNTIME_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/tests)
target_link_libraries(seeded_no_grace PRIVATE pinpool_static Threads::Threads)
add_test(NAME seeded.no_grace COMMAND seeded_no_grace)
set_tests_properties(seeded.no_grace PROPERTIES
    TIMEOUT 120
    FAIL_REGULAR_EXPRESSION "${PINPOOL_SANITIZER_REGEX}"
    ENVIRONMENT "${PINPOOL_TEST_ENV}"
    LABELS seeded)

if(_pp_seed_kind MATCHES "address|thread")
    pinpool_seeded_library(no_grace)
    add_executable(seeded_no_grace_bug tests/seeded/no_grace.c)
    set_target_properties(seeded_no_grace_bug PROPERTIES
        C_STANDARD 11
        C_EXTENSIONS ON
        RUNTIME_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/tests)
    target_link_libraries(seeded_no_grace_bug PRIVATE
        pinpool_seeded_no_grace Threads::Threads)
    add_test(NAME seeded.no_grace.caught COMMAND seeded_no_grace_bug)
    set_tests_properties(seeded.no_grace.caught PROPERTIES
        TIMEOUT 120
        PASS_REGULAR_EXPRESSION
            "AddressSanitizer: heap-use-after-free|ThreadSanitizer: (data race|heap-use-after-free)"
        ENVIRONMENT "${PINPOOL_TEST_ENV}"
        LABELS seeded)
endif()

# --- the torture against each seed ------------------------------------------
# The invocations are the normal suite's where they catch the seed (so
# torture.real and torture.swap, in CMakeLists.txt, are their controls).
# Evidence: the torture's own failure line for the check that the seed
# breaks, or the sanitizer's report where the sanitizer sees it first.

# Swap mode, exactly torture.swap (the swap directory is made and removed
# by tests/seeded/in_swapdir.sh, since a failed run leaves its files).
set(_pp_seed_swap_args --threads 4 --ops 10000 --seed 3 --compress --mem-limit 1M)
# Without swap, exactly torture.real.
set(_pp_seed_real_args --threads 4 --ops 200000 --seed 1)

# no_grace: the torture in QSBR mode keeps pp_get pointers until its next
# pp_quiescent; the free function finds a QSBR holder still using one
# (ASan may see the use of the freed block first).  The normal suite has
# no --qsbr run, so a control is registered.
pinpool_seeded_torture(NAME no_grace TEST torture CONTROL
    KINDS default address thread
    ARGS --threads 4 --ops 20000 --seed 1 --qsbr
    EXPECT "torture: FAIL: .*freed while [0-9]+ QSBR thread|AddressSanitizer: heap-use-after-free|ThreadSanitizer: (data race|heap-use-after-free)")

# relaxed_unpin: only TSan can see a missing release (x86 orders the stores
# anyway).  Caught in swap mode: the swap thread saves a block a writer
# just rewrote, or frees a flat block a pinner just read, with no
# happens-before from the unpin.  Without swap the program's own hand-offs
# hide most of it: see tests/seeded/README.md.
pinpool_seeded_torture(NAME relaxed_unpin SWAP
    KINDS thread
    ARGS ${_pp_seed_swap_args}
    EXPECT "ThreadSanitizer: data race")

# evict_ignores_pin: pinned blocks are evicted; the free function finds the
# program's pins on the block, the pinner finds freed bytes, or a writer
# finds its write-pinned entry no longer resident.
pinpool_seeded_torture(NAME evict_ignores_pin SWAP
    KINDS default address thread
    ARGS ${_pp_seed_swap_args}
    EXPECT "torture: FAIL: .*(freed while the program holds [0-9]+ pin|not a live block|corrupted|pinned for write: .*expected DIRTY and RESIDENT)|AddressSanitizer: heap-use-after-free|ThreadSanitizer: (data race|heap-use-after-free)")

# stale_gen: pins with the refs of reclaimed entries succeed on recycled
# slots (pp_pin, pp_pin_many) instead of failing with PP_ESTALE.
pinpool_seeded_torture(NAME stale_gen
    KINDS default address thread
    ARGS ${_pp_seed_real_args}
    EXPECT "torture: FAIL: pp_pin.*expected PP_ESTALE")

# no_dirty: a write pin leaves the entry clean: pp_stat shows no DIRTY under
# the write pin, and in swap mode a rewrite is lost on a clean eviction
# (load or pin finds the old version).
pinpool_seeded_torture(NAME no_dirty SWAP
    KINDS default address thread
    ARGS ${_pp_seed_swap_args}
    EXPECT "torture: FAIL: .*(expected DIRTY|is not DIRTY|copy of version|corrupted)")

# no_grace against epoch-torture (stress/epoch_torture.c): poisoned frees,
# QSBR readers and a lagging reader.  Caught by its own checks (a free
# during an open lag, a QSBR holder still using the block, poison read by a
# reader) or by the sanitizers.  epoch_torture.real is the control.
if(TARGET epoch_torture AND _pp_seed_kind MATCHES "^(default|address|thread)$")
    pinpool_seeded_library(no_grace)
    pinpool_stress_program(epoch_torture_seeded_no_grace stress/epoch_torture.c
        pinpool_seeded_no_grace)
    add_test(NAME seeded.no_grace.epoch_torture.caught
        COMMAND epoch_torture_seeded_no_grace --threads 4 --duration 3 --seed 1)
    set_tests_properties(seeded.no_grace.epoch_torture.caught PROPERTIES
        TIMEOUT 120
        PASS_REGULAR_EXPRESSION
            "epoch_torture: FAIL|AddressSanitizer: heap-use-after-free|ThreadSanitizer: (data race|heap-use-after-free)"
        ENVIRONMENT "${_pp_seed_env}"
        LABELS seeded)
endif()
