# cmake/epoch_torture.cmake -- epoch-reclamation torture test (issue 4).
#
# stress/epoch_torture.c: QSBR readers, pinners and a lagging reader on one
# pool while other threads release the last owners; poisoned frees, exact
# grace-period checks, exact pp_pool_stats at the end (stress/README.md,
# "epoch-torture").  Included from CMakeLists.txt inside
# if(PINPOOL_BUILD_STRESS), after PINPOOL_SANITIZER_REGEX, PINPOOL_TEST_ENV
# and PINPOOL_NUMA4_TOPOLOGY are set.

pinpool_stress_program(epoch_torture stress/epoch_torture.c pinpool_static)

# The real topology with 4 threads (the lagger, 2 QSBR readers, 1 default
# mode thread), and the 4-node synthetic topology with 8 threads
# (oversubscribed on a two-core machine).  Time-bounded (--duration), so each
# takes about 3-5 s in every preset on an idle machine (TSan does fewer
# operations in that time, still several full lags).  The program's own
# waits fail when reclamation stops making progress for 30 s; TIMEOUT only
# guards against a hang outside them.  A failure prints the seed to replay.
add_test(NAME epoch_torture.real
    COMMAND epoch_torture --threads 4 --duration 3 --seed 1)
add_test(NAME epoch_torture.numa4
    COMMAND epoch_torture --threads 8 --duration 3 --seed 2
            --topology "${PINPOOL_NUMA4_TOPOLOGY}")
set_tests_properties(epoch_torture.real epoch_torture.numa4 PROPERTIES
    TIMEOUT 180
    FAIL_REGULAR_EXPRESSION "${PINPOOL_SANITIZER_REGEX}"
    ENVIRONMENT "${PINPOOL_TEST_ENV}")
