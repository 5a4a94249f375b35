/*
 * stress/epoch_torture/worker.c -- epoch_torture's threads: the workers
 * (rounds of random operations, the lagger's lags, parking between
 * rounds), and the main thread's wait for them, which keeps the time
 * limits and prints the progress.
 */
#include "epoch_torture.h"

#include <errno.h>
#include <sched.h>
#include <unistd.h>

/* Parking between rounds. */
static pthread_mutex_t g_gate_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_gate_cond = PTHREAD_COND_INITIALIZER;   /* workers wait */
static pthread_cond_t g_park_cond = PTHREAD_COND_INITIALIZER;   /* main waits */
_Atomic unsigned g_parked;              /* written under g_gate_lock */
static unsigned g_round;                /* under g_gate_lock */
static int g_exit;                      /* under g_gate_lock */

/* Drops everything the thread holds at the end of a round. */
static void round_cleanup(thr_t *t)
{
    while (t->nheld > 0) {
        uint64_t k = t->held[--t->nheld];
        check_full(t, k, rec_data(rec_get(k)), "held pin");
        pin_drop(t, k);
    }
    while (t->nowned > 0)
        release_owner(t, owned_take(t, t->nowned - 1));
    if (t->qsbr)
        quiesce(t);
}

/* Parks until the next round; 0 when the run is over. */
static int park(thr_t *t)
{
    pthread_mutex_lock(&g_gate_lock);
    atomic_store(&g_parked, atomic_load(&g_parked) + 1);
    pthread_cond_broadcast(&g_park_cond);
    unsigned r = g_round;
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += g_timeout_s;
    while (g_round == r && !g_exit) {
        int rc = pthread_cond_timedwait(&g_gate_cond, &g_gate_lock, &dl);
        if (rc == ETIMEDOUT && g_round == r && !g_exit) {
            printf("epoch_torture: FAIL: thread %u parked for %u s without a next round "
                   "[seed=%" PRIu64 "]\n", t->idx, g_timeout_s, g_seed);
            fflush(stdout);
            _exit(1);
        }
    }
    int go = !g_exit;
    pthread_mutex_unlock(&g_gate_lock);
    return go;
}

void *worker(void *arg)
{
    thr_t *t = arg;
    tl_user = 1;
    /* A thread is in QSBR mode only from its first pp_quiescent on; before
     * that a pp_get pointer is valid only under an owner. */
    if (t->qsbr)
        pp_quiescent(g_pool);
    if (!park(t))   /* the start gate: every thread begins together */
        return NULL;
    for (;;) {
        while (!atomic_load_explicit(&g_round_stop, memory_order_relaxed) && t->op < g_ops) {
            /* A lag needs other threads at work. */
            if (t->lagger && !t->lagging && t->op >= t->next_lag_at &&
                atomic_load(&g_parked) < g_threads - 1)
                lag_begin(t);
            do_op(t);
            if (t->qsbr)
                t->insec = 1;   /* conservatively: any operation may have called the pool */
            t->op++;
            atomic_store_explicit(&t->progress, t->op, memory_order_relaxed);
            if (t->qsbr && !t->lagging && rndn(t, 16) == 0)
                quiesce(t);
            if (t->qsbr)
                esc_recheck(t, t->esc, t->nesc, &t->esc_rr, "QSBR pointer");
            if (t->lagging) {
                lag_recheck(t);
                if (lag_over(t))
                    lag_end(t);
            }
        }
        if (t->lagging) {
            /* Out of operations (or the round ends): keep the section open
             * until the others have done their part, re-checking. */
            double dl = now_s() + g_timeout_s;
            while (!lag_over(t)) {
                lag_recheck(t);
                esc_recheck(t, t->esc, t->nesc, &t->esc_rr, "(a) lagging reader's pointer");
                if (now_s() > dl) {
                    failf(t, "the other threads did %" PRIu64 " of the %" PRIu64 " operations "
                          "of lag %u in %u s", others_progress(t) - t->lag_start_others,
                          g_lag_ops, t->lag_id, g_timeout_s);
                    break;
                }
                sched_yield();
            }
            lag_end(t);
        }
        round_cleanup(t);
        if (!park(t))
            break;
        /* A new round: the next lag comes soon. */
        t->next_lag_at = t->op + 32;
    }
    return NULL;
}

static uint64_t thread_progress(unsigned i)
{
    return atomic_load_explicit(&g_thr[i].progress, memory_order_relaxed);
}

static uint64_t thread_progress_now(unsigned i)
{
    return atomic_load(&g_thr[i].progress);
}

/* Operations of all the workers so far. */
uint64_t total_progress(void)
{
    return progress_sum(g_threads, thread_progress);
}

/* The main thread waits until every worker is parked; it wakes every
 * 100 ms for the time limits and the progress line. */
int g_tty, g_printed_progress;
double g_last_print;

void wait_parked(pp_stats_t *st, unsigned round)
{
    pthread_mutex_lock(&g_gate_lock);
    while (atomic_load(&g_parked) < g_threads) {
        struct timespec ts = deadline_in_ms(100);
        pthread_cond_timedwait(&g_park_cond, &g_gate_lock, &ts);
        if (atomic_load(&g_parked) >= g_threads)
            break;
        pthread_mutex_unlock(&g_gate_lock);
        double now = now_s();
        if (g_duration_s > 0 && now - g_t0 >= g_duration_s)
            atomic_store(&g_round_stop, 1);
        if (now - g_t0 > g_timeout_s)
            fail_still_running("threads", g_timeout_s, g_threads, thread_progress_now);
        if (now - g_last_print >= (g_tty ? 1.0 : 5.0)) {
            *st = (pp_stats_t)PP_STATS_INIT;
            if (pp_pool_stats(g_pool, st) == 0)
                fprintf(stderr, "%sepoch_torture: %.0fs round %u ops %" PRIu64 " puts %" PRIu64
                        " frees %" PRIu64 " queue %" PRIu64 " lag %s%s", g_tty ? "\r" : "",
                        now - g_t0, round, total_progress(), st->total.puts, st->total.frees,
                        st->total.reclaim_queue_depth,
                        atomic_load(&g_lag_cur) ? "open  " : "closed", g_tty ? "" : "\n");
            g_printed_progress = 1;
            g_last_print = now;
        }
        pthread_mutex_lock(&g_gate_lock);
    }
    pthread_mutex_unlock(&g_gate_lock);
}

/* Starts the next round (more) or ends the run. */
void open_gate(int more)
{
    pthread_mutex_lock(&g_gate_lock);
    atomic_store(&g_parked, 0);
    if (more)
        g_round++;
    else
        g_exit = 1;
    pthread_cond_broadcast(&g_gate_cond);
    pthread_mutex_unlock(&g_gate_lock);
}
