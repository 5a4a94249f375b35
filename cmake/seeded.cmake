# cmake/seeded.cmake -- seeded bugs: deliberately broken builds of the
# library that the reliability suite must catch.  Included from
# CMakeLists.txt when the tests and the stress programs are built.
#
# Each seed is a patch, tests/seeded/<name>.patch, against src/; its header
# says what it breaks and what must catch it.  The production sources hold
# no trace of the seeds.  For each seed that this build's sanitizer setting
# can catch, the build copies src/ into the build tree, applies the patch
# (cmake/seed_apply.cmake: patch -p1, no fuzz), builds the broken copy of
# the library (pinpool_seeded_<name>) and a torture linked to it
# (torture_seeded_<name>), and registers
#   seeded.<name>.applies   the patch still applies to src/ (if a change of
#                           src/ breaks it, this fails, and so does the
#                           build of the seeded copy, naming the patch);
#   seeded.<name>.caught    the torture against the broken library; it
#                           passes only if the run shows the evidence named
#                           below (PASS_REGULAR_EXPRESSION);
#   seeded.<name>.control   the same invocation against the real library,
#                           which must pass (registered where the normal
#                           suite, torture.*, does not already run it).
# The patches break the code that runs: the pin and unpin fast paths (the
# torture runs them: no random yields in these runs, which would route
# pins around the fast path), the eviction hand, the reclaimer.
#
# A caught run stops at its first failure (the torture stops its workers
# at the first failed check; the sanitizers halt on their first report),
# so even a long invocation ends in about a second.

find_program(PINPOOL_PATCH_EXECUTABLE patch REQUIRED)
set(PINPOOL_SEED_BUGS no_grace relaxed_pin relaxed_unpin evict_ignores_pin stale_gen no_dirty)

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
    set(patch ${CMAKE_CURRENT_SOURCE_DIR}/tests/seeded/${name}.patch)
    set(out ${CMAKE_CURRENT_BINARY_DIR}/seeded/${name})
    set(copies "")
    foreach(f ${PINPOOL_SOURCES} ${PINPOOL_INTERNAL_HEADERS})
        list(APPEND copies ${out}/${f})
    endforeach()
    set(inputs "")
    foreach(f ${PINPOOL_SOURCES} ${PINPOOL_INTERNAL_HEADERS})
        list(APPEND inputs ${CMAKE_CURRENT_SOURCE_DIR}/${f})
    endforeach()
    add_custom_command(
        OUTPUT ${out}/applied.stamp ${copies}
        COMMAND ${CMAKE_COMMAND} -DSRC_DIR=${CMAKE_CURRENT_SOURCE_DIR} -DPATCH=${patch}
                -DOUT_DIR=${out} -DPATCH_EXE=${PINPOOL_PATCH_EXECUTABLE}
                -DSTAMP=${out}/applied.stamp
                -P ${CMAKE_CURRENT_SOURCE_DIR}/cmake/seed_apply.cmake
        DEPENDS ${patch} ${inputs} ${CMAKE_CURRENT_SOURCE_DIR}/cmake/seed_apply.cmake
        COMMENT "Seeded bug ${name}: applying tests/seeded/${name}.patch to a copy of src/"
        VERBATIM)
    set(sources "")
    foreach(f ${PINPOOL_SOURCES})
        list(APPEND sources ${out}/${f})
    endforeach()
    add_library(pinpool_seeded_${name} STATIC ${sources})
    pinpool_library_settings(pinpool_seeded_${name})
    # The copy's own headers first (a patch may change one).
    target_include_directories(pinpool_seeded_${name} BEFORE PRIVATE ${out}/src)
    target_include_directories(pinpool_seeded_${name} PUBLIC
        ${CMAKE_CURRENT_SOURCE_DIR}/include)
    target_link_libraries(pinpool_seeded_${name} INTERFACE
        PkgConfig::CK PkgConfig::HWLOC PkgConfig::XXHASH PkgConfig::LZ4 Threads::Threads)
endfunction()

# Every seed's patch must apply, in every build (whether or not this build
# can catch the seed).
foreach(name ${PINPOOL_SEED_BUGS})
    add_test(NAME seeded.${name}.applies
        COMMAND ${CMAKE_COMMAND} -DSRC_DIR=${CMAKE_CURRENT_SOURCE_DIR}
                -DPATCH=${CMAKE_CURRENT_SOURCE_DIR}/tests/seeded/${name}.patch
                -DOUT_DIR=${CMAKE_CURRENT_BINARY_DIR}/seeded/${name}.check
                -DPATCH_EXE=${PINPOOL_PATCH_EXECUTABLE}
                -P ${CMAKE_CURRENT_SOURCE_DIR}/cmake/seed_apply.cmake)
    set_tests_properties(seeded.${name}.applies PROPERTIES
        TIMEOUT 60
        LABELS seeded)
endforeach()

# A program linked to a seeded copy sees that copy's internal headers.
function(pinpool_seeded_program target source name)
    pinpool_seeded_library(${name})
    pinpool_stress_program(${target} ${source} pinpool_seeded_${name})
    target_include_directories(${target} BEFORE PRIVATE
        ${CMAKE_CURRENT_BINARY_DIR}/seeded/${name}/src)
endfunction()

function(pinpool_seeded_torture_target name)
    if(TARGET torture_seeded_${name})
        return()
    endif()
    pinpool_seeded_program(torture_seeded_${name} stress/torture.c ${name})
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

# relaxed_pin: only TSan can see a missing acquire (x86 orders a CAS
# anyway): a pinner reads bytes a writer rewrote, or that the putter or a
# load filled, with no happens-before from their release.
pinpool_seeded_torture(NAME relaxed_pin SWAP
    KINDS thread
    ARGS ${_pp_seed_swap_args}
    EXPECT "ThreadSanitizer: data race")

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
    pinpool_seeded_program(epoch_torture_seeded_no_grace stress/epoch_torture.c no_grace)
    add_test(NAME seeded.no_grace.epoch_torture.caught
        COMMAND epoch_torture_seeded_no_grace --threads 4 --duration 3 --seed 1)
    set_tests_properties(seeded.no_grace.epoch_torture.caught PROPERTIES
        TIMEOUT 120
        PASS_REGULAR_EXPRESSION
            "epoch_torture: FAIL|AddressSanitizer: heap-use-after-free|ThreadSanitizer: (data race|heap-use-after-free)"
        ENVIRONMENT "${_pp_seed_env}"
        LABELS seeded)
endif()
