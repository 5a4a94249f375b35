/*
 * stress/common/fail.h -- failure reporting of the stress programs.
 *
 * Every failed check prints one line
 *     <prog>: FAIL: <what> [seed=<seed> thread=<who>]
 * (the first MAX_FAIL_MSGS of them; the others are counted), marks the run
 * failed and, unless the program keeps going, raises its stop flag so that
 * the workers finish soon.  <who> is the program's name for the thread
 * ("3 op=17", "main"), or for a pool thread (who NULL) the pool-thread
 * prefix and its tid.  Each program wraps fail_at() in its own failf(),
 * which names its threads.
 */
#ifndef PP_STRESS_FAIL_H
#define PP_STRESS_FAIL_H

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define MAX_FAIL_MSGS 20

extern atomic_int g_failed;             /* some check failed */
extern atomic_int g_fail_msgs;          /* failures reported (printed or not) */
extern pthread_mutex_t g_print_lock;    /* lines of several threads */

/* stop: the flag a failure raises (NULL: none, the run keeps going);
 * msg_size: the longest message, with its NUL; pool_who: how a pool
 * thread is named, before its tid ("pool thread tid"). */
void fail_setup(atomic_int *stop, size_t msg_size, const char *pool_who);

void fail_vat(const char *who, const char *fmt, va_list ap);
void fail_at(const char *who, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Exits 2: "<prog>: out of memory". */
void oom(void) __attribute__((noreturn));

/* rc must be want; otherwise a failure of the program's failf(t, ...). */
#define CHECK_RC(t, rc, want, what, k)                                        \
    do {                                                                       \
        int rc__ = (rc);                                                       \
        if (rc__ != (want))                                                    \
            failf((t), "%s: got %s (%d), expected %s, entry %" PRIu64,         \
                  (what), pp_err_name(rc__), rc__, pp_err_name(want),          \
                  (uint64_t)(k));                                              \
    } while (0)

#endif /* PP_STRESS_FAIL_H */
