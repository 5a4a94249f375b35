/*
 * stress/common/progress.h -- time and progress of a stress run: a
 * monotonic clock, the deadlines of the main thread's timed waits, the
 * sum of the threads' progress counters, and the failure that ends a run
 * whose threads outlive --timeout.
 */
#ifndef PP_STRESS_PROGRESS_H
#define PP_STRESS_PROGRESS_H

#include <stdint.h>
#include <time.h>

/* Seconds on the monotonic clock. */
static inline double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* CLOCK_REALTIME ms milliseconds from now (for pthread_cond_timedwait). */
struct timespec deadline_in_ms(long ms);

/* Thread i's operations so far (each program reads its own counters). */
typedef uint64_t progress_fn(unsigned i);

/* The sum over threads 0..n-1. */
uint64_t progress_sum(unsigned n, progress_fn *progress);

/* Prints "<prog>: FAIL: <what> still running after <s> s [seed=...];
 * progress: i:ops..." and exits 1 at once (the pool is left as it is). */
void fail_still_running(const char *what, unsigned timeout_s, unsigned n,
                        progress_fn *progress) __attribute__((noreturn));

#endif /* PP_STRESS_PROGRESS_H */
