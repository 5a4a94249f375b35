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

/* A wait bounded by progress, not by a fixed time: it has stalled when
 * the count it watches (frees, say) has not moved for stall_s seconds, or
 * when timeout_s have passed since it began. */
typedef struct stall {
    double start, moved;                 /* when the wait began, last moved */
    uint64_t seen;                       /* the count then */
} stall_t;

static inline stall_t stall_begin(uint64_t count)
{
    double now = now_s();
    return (stall_t){now, now, count};
}

/* Notes count at now; true if the wait has stalled. */
static inline int stall_check(stall_t *s, uint64_t count, double now, double stall_s,
                              double timeout_s)
{
    if (count != s->seen) {
        s->seen = count;
        s->moved = now;
        return 0;
    }
    return now - s->moved > stall_s || now - s->start > timeout_s;
}

/* Prints "<prog>: FAIL: <what> still running after <s> s [seed=...];
 * progress: i:ops..." and exits 1 at once (the pool is left as it is). */
void fail_still_running(const char *what, unsigned timeout_s, unsigned n,
                        progress_fn *progress) __attribute__((noreturn));

#endif /* PP_STRESS_PROGRESS_H */
