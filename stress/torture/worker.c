/*
 * stress/torture/worker.c -- the torture's threads while a run lasts: the
 * workers (random operations, then they drop what they hold) and the main
 * thread's watch, which reads pp_pool_stats and drains the pool
 * concurrently with them, stops them when --duration is up, prints the
 * progress and fails the run after --timeout.
 */
#include "torture.h"

#include <string.h>

static _Atomic unsigned g_registered;   /* workers registered with the pool */
/* The start gate: the workers register, then wait while main measures the
 * resident set they start from (bounds.c). */
static pthread_mutex_t g_gate_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_gate_cond = PTHREAD_COND_INITIALIZER;
static int g_gate_open;
static pthread_mutex_t g_done_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_done_cond = PTHREAD_COND_INITIALIZER;
static unsigned g_done;

static void thread_cleanup(thr_t *t)
{
    while (t->nheld > 0)
        held_drop_at(t, t->nheld - 1);
    while (t->nowned > 0)
        release_owned_at(t, t->nowned - 1);
    if (g_qsbr)
        quiesce(t);
}

static void *worker(void *arg)
{
    thr_t *t = arg;
    tl_user = 1;
    /* Registers this thread before allocation faults are armed: a first
     * call's registration failing is documented, but not what the torture
     * is after. */
    (void)pp_pool_drain(g_pool, 0);
    pthread_mutex_lock(&g_gate_lock);
    if (atomic_fetch_add(&g_registered, 1) + 1 == g_threads && g_faults)
        atomic_store(&g_faults_armed, 1);   /* the last one to register arms */
    pthread_cond_broadcast(&g_gate_cond);
    while (!g_gate_open)
        pthread_cond_wait(&g_gate_cond, &g_gate_lock);
    pthread_mutex_unlock(&g_gate_lock);
    if (g_qsbr)
        quiesce(t);
    for (uint64_t i = 0; i < g_ops && !atomic_load_explicit(&g_stop, memory_order_relaxed); i++) {
        t->op = i;
        unsigned r = rndn(t, 1000);
        int op;
        if (r < 120)      op = OP_PUT;
        else if (r < 220) op = OP_PUBLISH;
        else if (r < 300) op = OP_TAKE;
        else if (r < 640) op = OP_BORROW;
        else if (r < 770) op = OP_OWNED;
        else if (r < 870) op = OP_RELEASE;
        else if (r < 960) op = OP_HELD;
        else              op = OP_STALE;
        t->opcount[op]++;
        switch (op) {
        case OP_PUT:     op_put(t); break;
        case OP_PUBLISH: op_publish(t); break;
        case OP_TAKE:    op_take(t); break;
        case OP_BORROW:  op_borrow(t); break;
        case OP_OWNED:   op_owned(t); break;
        case OP_RELEASE: op_release(t); break;
        case OP_HELD:    op_held(t); break;
        default:         op_stale(t); break;
        }
        t->insec = g_qsbr;   /* any operation may have called the pool */
        /* With swap, dead entries still in their grace period hold
         * resident bytes that nothing can evict (puts and loads then get
         * PP_ENOMEM): QSBR threads quiesce more often, as a user would
         * before calls that may wait for room. */
        if (g_qsbr && rndn(t, g_swap ? 4 : 16) == 0)
            quiesce(t);
        atomic_store_explicit(&t->progress, i + 1, memory_order_relaxed);
    }
    t->op = g_ops;
    thread_cleanup(t);
    if (t->explicit_exit) {
        /* acquire: pairs with the release after other threads' unpins */
        int64_t left = atomic_load_explicit(&g_outstanding[t->idx], memory_order_acquire);
        int rc = pp_thread_exit(g_pool);
        if (!(rc == 0 || (g_track && left > 0 && rc == PP_EBUSY)))
            failf(t, "pp_thread_exit with %" PRId64 " of its pins still held elsewhere (track %d): %s",
                  left, g_track, pp_err_name(rc));
    }
    pthread_mutex_lock(&g_done_lock);
    g_done++;
    pthread_cond_signal(&g_done_cond);
    pthread_mutex_unlock(&g_done_lock);
    return NULL;
}

/* Starts the workers and waits until every one has registered with the
 * pool (they then wait at the gate); 0, or the exit status if one cannot
 * start. */
int start_workers(run_t *run)
{
    (void)run;
    uint64_t xs = g_seed;
    for (unsigned i = 0; i < g_threads; i++) {
        thr_t *t = &g_thr[i];
        t->idx = i;
        t->rng = mix3(g_seed, i + 1, 0x7EAD);
        t->explicit_exit = (int)(splitmix64(&xs) & 1);
    }
    for (unsigned i = 0; i < g_threads; i++) {
        int rc = pthread_create(&g_thr[i].th, NULL, worker, &g_thr[i]);
        if (rc != 0) {
            fprintf(stderr, "torture: pthread_create: %s\n", strerror(rc));
            return 2;
        }
    }
    pthread_mutex_lock(&g_gate_lock);
    while (atomic_load(&g_registered) < g_threads)
        pthread_cond_wait(&g_gate_cond, &g_gate_lock);
    pthread_mutex_unlock(&g_gate_lock);
    return 0;
}

void go_workers(run_t *run)
{
    run->t0 = now_s();
    pthread_mutex_lock(&g_gate_lock);
    g_gate_open = 1;
    pthread_cond_broadcast(&g_gate_cond);
    pthread_mutex_unlock(&g_gate_lock);
}

static uint64_t worker_progress(unsigned i)
{
    return atomic_load_explicit(&g_thr[i].progress, memory_order_relaxed);
}

static uint64_t worker_progress_now(unsigned i)
{
    return atomic_load(&g_thr[i].progress);
}

/* The progress line of --verbose. */
static void print_progress(const run_t *run, double now)
{
    const pp_stats_t *st = run->st;
    uint64_t done = progress_sum(g_threads, worker_progress);
    printf("torture: %.1fs ops %" PRIu64 " entries %" PRIu64 " puts %" PRIu64
           " frees %" PRIu64 " queue %" PRIu64, now - run->t0, done, st->total.entries,
           st->total.puts, st->total.frees, st->total.reclaim_queue_depth);
    if (g_swap)
        printf(" resident %" PRIu64 " swapped %" PRIu64 " evicted %" PRIu64 "+%" PRIu64
               " loads %" PRIu64, st->total.resident_bytes, st->total.swapped_bytes,
               st->total.evictions_written, st->total.evictions_clean, st->total.loads);
    printf("\n");
    fflush(stdout);
}

/* Watch: pool stats and drains concurrently with the workers, until every
 * worker is done; then joins them and turns the faults off for the end
 * (dropping everything and the exact checks). */
void watch_workers(run_t *run)
{
    thr_t *m = run->m;
    pp_stats_t *st = run->st;
    double t0 = run->t0;
    double last_print = t0, last_drain = t0, last_progress = t0;
    int rc;
    pthread_mutex_lock(&g_done_lock);
    while (g_done < g_threads) {
        struct timespec ts = deadline_in_ms(20);
        pthread_cond_timedwait(&g_done_cond, &g_done_lock, &ts);
        if (g_done >= g_threads)
            break;
        pthread_mutex_unlock(&g_done_lock);
        double now = now_s();
        if (g_duration_s > 0 && now - t0 >= g_duration_s)
            atomic_store(&g_stop, 1);    /* time is up: workers finish their op */
        if (g_duration_s > 0 && now - last_progress >= 60) {
            uint64_t done = progress_sum(g_threads, worker_progress);
            fprintf(stderr, "torture: %.0f of %.0f s, %" PRIu64 " ops, %" PRIu64
                    " allocation faults, %lu device faults\n", now - t0, g_duration_s, done,
                    atomic_load(&g_alloc_faults), faults_injected());
            last_progress = now;
        }
        rc = stat_read(g_pool, st, run->node);
        run->polls++;
        if (rc != 0 || st->nodes != g_nnodes)
            failf(m, "pp_pool_stats during the run: %s, nodes %u", pp_err_name(rc), st->nodes);
        if (g_swap) {
            if (st->resident_reserved > g_mem_limit || st->resident_peak > g_mem_limit)
                failf(m, "during the run: resident_reserved %" PRIu64 ", resident_peak %" PRIu64
                      ", mem_limit %zu", st->resident_reserved, st->resident_peak, g_mem_limit);
            uint64_t live = st->total.resident_bytes + st->total.swapped_bytes;
            if (live > run->live_peak)
                run->live_peak = live;
        }
        if (now - last_drain > 0.5) {
            rc = pp_pool_drain(g_pool, 200);
            run->mid_drains++;
            if (rc == PP_EBUSY)
                run->mid_drain_busy++;
            else if (rc != 0)
                failf(m, "pp_pool_drain during the run: %s", pp_err_name(rc));
            last_drain = now_s();
        }
        if (g_verbose && now - last_print >= 1.0) {
            print_progress(run, now);
            last_print = now;
        }
        if (now - t0 > g_timeout_s)
            fail_still_running("workers", g_timeout_s, g_threads, worker_progress_now);
        pthread_mutex_lock(&g_done_lock);
    }
    pthread_mutex_unlock(&g_done_lock);
    for (unsigned i = 0; i < g_threads; i++)
        pthread_join(g_thr[i].th, NULL);
    run->t1 = now_s();
    faults_off();
}
