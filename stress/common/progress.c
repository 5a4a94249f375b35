/*
 * stress/common/progress.c -- time and progress of a stress run
 * (progress.h).
 */
#include "common/progress.h"
#include "common/cli.h"

#include <inttypes.h>
#include <stdio.h>
#include <unistd.h>

struct timespec deadline_in_ms(long ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += ms * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

uint64_t progress_sum(unsigned n, progress_fn *progress)
{
    uint64_t s = 0;
    for (unsigned i = 0; i < n; i++)
        s += progress(i);
    return s;
}

void fail_still_running(const char *what, unsigned timeout_s, unsigned n, progress_fn *progress)
{
    printf("%s: FAIL: %s still running after %u s [seed=%" PRIu64 "]; progress:", stress_prog,
           what, timeout_s, g_seed);
    for (unsigned i = 0; i < n; i++)
        printf(" %u:%" PRIu64, i, progress(i));
    printf("\n");
    fflush(stdout);
    _exit(1);
}
