/*
 * wait.c -- how every part of the library sleeps and reads the clock: the
 * operations of Concurrency Kit's event counts (ck_ec) on Linux futexes,
 * and the monotonic clock.  The reclaimers, the swap threads, the putters
 * that wait for room or for the backlog, and the pinners that wait for an
 * I/O all wait through pp__wait_ec_mode.
 */
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "os/os.h"

/* ------------------------------------------------------------------------ */
/* ck_ec operations (Linux futexes)                                          */
/* ------------------------------------------------------------------------ */

static int ec_gettime(const struct ck_ec_ops *ops, struct timespec *out)
{
    (void)ops;
    return clock_gettime(CLOCK_MONOTONIC, out);
}

static void ec_wait32(const struct ck_ec_wait_state *state, const uint32_t *addr,
                          uint32_t expected, const struct timespec *deadline)
{
    (void)state;
    /* FUTEX_WAIT_BITSET takes an absolute CLOCK_MONOTONIC deadline. */
    syscall(SYS_futex, addr, FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG, expected,
            deadline, NULL, FUTEX_BITSET_MATCH_ANY);
}

static void ec_wait64(const struct ck_ec_wait_state *state, const uint64_t *addr,
                          uint64_t expected, const struct timespec *deadline)
{
    /* Low half, as ck_ec documents for 64-bit counters on little endian. */
    ec_wait32(state, (const uint32_t *)(const void *)addr, (uint32_t)expected, deadline);
}

static void ec_wake32(const struct ck_ec_ops *ops, const uint32_t *addr)
{
    (void)ops;
    syscall(SYS_futex, addr, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, INT_MAX, NULL, NULL, 0);
}

static void ec_wake64(const struct ck_ec_ops *ops, const uint64_t *addr)
{
    ec_wake32(ops, (const uint32_t *)(const void *)addr);
}

static const struct ck_ec_ops ec_ops = {
    .gettime = ec_gettime,
    .wait32 = ec_wait32,
    .wait64 = ec_wait64,
    .wake32 = ec_wake32,
    .wake64 = ec_wake64,
    /* ck's default spin before the futex (100 pauses) is kept.  One pause
     * instead saved the 11% of a reclaimer's time that spinning took under
     * overload, but made pinbench's reclaim lag p50 3.3 ms instead of 5 us:
     * without the spin the reclaimer's CPU goes idle between two bursts,
     * and on this VM a futex wake of an idle CPU can take milliseconds. */
};

/* Many producers: any thread may bump an event count. */
const struct ck_ec_mode pp__wait_ec_mode = {
    .ops = &ec_ops,
    .single_producer = false,
};

uint64_t pp__wait_now_ns(void)
{
    struct timespec ts;
    /* vDSO on x86-64 Linux: no system call. */
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
