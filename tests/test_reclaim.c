/* test_reclaim.c -- reclaim queues, reclaimer threads, free
 * (src/core/retire.c, src/reclaim/reclaim.c). */
#include "helpers.h"

#include "testing/testhooks.h" /* PP__LAG_SAMPLE */

/* ---- free runs once, never on the finalizing thread ---------------------- */

typedef struct fin {
    pp_pool_t *pool;
    ct_t *ct;
    pp_ref_t *refs;
    size_t from, to;     /* this thread's share of refs */
    bool by_unpin;       /* final action is an unpin (else a release) */
    int tid;
} fin_t;

static void *finalize(void *arg)
{
    fin_t *f = arg;
    f->tid = (int)gettid();
    for (size_t i = f->from; i < f->to; i++) {
        int rc = f->by_unpin ? pp_unpin(f->pool, f->refs[i])
                             : pp_release(f->pool, f->refs[i]);
        TCHECK(rc == 0, "final %s of %zu: %s", f->by_unpin ? "unpin" : "release",
               i, pp_err_name(rc));
        /* The final call returned: this thread never ran the free. */
        TCHECK(ct_tid(f->ct, i) != f->tid, "entry %zu freed on its finalizer", i);
    }
    return NULL;
}

#define FIN_N 400

Test(reclaim, free_once_never_on_finalizing_thread, .timeout = 60)
{
    pp_pool_t *pool = test_pool(NULL);
    unsigned nodes = test_nodes(pool);
    ct_t *ct = ct_new(FIN_N);
    pp_ref_t refs[FIN_N];
    for (size_t i = 0; i < FIN_N; i++)
        refs[i] = ct_put(pool, ct, i, 64, PP_ON_NODE(i % nodes));
    /* Second half: pinned, so their final action is the unpin. */
    for (size_t i = FIN_N / 2; i < FIN_N; i++) {
        assert_rc(pp_pin(pool, refs[i], 0, NULL), 0);
        assert_rc(pp_release(pool, refs[i]), 0);
    }
    int rtid[PP_MAX_NODES];
    test_reclaimer_tids(pool, rtid);

    /* The main thread finalizes a quarter by release, a thread another
     * quarter by release, and two threads the pinned half by unpin. */
    int me = (int)gettid();
    for (size_t i = 0; i < FIN_N / 4; i++) {
        assert_rc(pp_release(pool, refs[i]), 0);
        cr_assert_neq(ct_tid(ct, i), me);
    }
    fin_t f[3] = {
        {pool, ct, refs, FIN_N / 4, FIN_N / 2, false, 0},
        {pool, ct, refs, FIN_N / 2, 3 * FIN_N / 4, true, 0},
        {pool, ct, refs, 3 * FIN_N / 4, FIN_N, true, 0},
    };
    pthread_t th[3];
    for (int k = 0; k < 3; k++)
        test_thread_start(&th[k], finalize, &f[k]);
    for (int k = 0; k < 3; k++)
        test_thread_join(th[k]);
    TCHECK_NONE();
    test_drain(pool);
    for (size_t i = 0; i < FIN_N; i++) {
        cr_assert_eq(ct_frees(ct, i), 1, "entry %zu freed %u times", i,
                     ct_frees(ct, i));
        int tid = ct_tid(ct, i);
        cr_assert_neq(tid, me, "entry %zu freed on the main thread", i);
        for (int k = 0; k < 3; k++)
            cr_assert_neq(tid, f[k].tid, "entry %zu freed on a finalizer", i);
        cr_assert_eq(tid, rtid[pp_ref_node(refs[i])],
                     "entry %zu not freed by its home reclaimer", i);
    }
    test_destroy(pool);
    cr_assert_eq(atomic_load(&ct->total), FIN_N);
    cr_assert_eq(atomic_load(&ct->bad), 0);
    ct_delete(ct);
}

/* ---- on 4 nodes, every free on the home node's reclaimer ---------------- */

#define HOME_PER_NODE 100
#define HOME_THREADS 4

typedef struct home_arg {
    pp_pool_t *pool;
    pp_ref_t *refs;
    size_t n;
    int k;
} home_arg_t;

static void *home_releaser(void *arg)
{
    home_arg_t *a = arg;
    for (size_t i = (size_t)a->k; i < a->n; i += HOME_THREADS) {
        int rc = pp_release(a->pool, a->refs[i]);
        TCHECK(rc == 0, "release %zu: %s", i, pp_err_name(rc));
    }
    return NULL;
}

Test(reclaim, free_on_home_node_reclaimer, .timeout = 60)
{
    pp_pool_t *pool = test_pool_synth4();
    int rtid[PP_MAX_NODES];
    cr_assert_eq(test_reclaimer_tids(pool, rtid), 4);
    size_t n = 4 * HOME_PER_NODE;
    ct_t *ct = ct_new(n);
    pp_ref_t refs[4 * HOME_PER_NODE];
    for (size_t i = 0; i < n; i++) {
        refs[i] = ct_put(pool, ct, i, 64, PP_ON_NODE(i % 4));
        cr_assert_eq(pp_ref_node(refs[i]), i % 4);
    }
    /* Thread k releases refs k, k+4, ...: with i % 4 == node, each thread
     * would release one node only, so stride by HOME_THREADS over a
     * shuffled order instead. */
    uint64_t st = 99;
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = (size_t)(splitmix64(&st) % (i + 1));
        pp_ref_t tr = refs[i];
        refs[i] = refs[j];
        refs[j] = tr;
    }
    home_arg_t a[HOME_THREADS];
    pthread_t th[HOME_THREADS];
    for (int k = 0; k < HOME_THREADS; k++) {
        a[k] = (home_arg_t){pool, refs, n, k};
        test_thread_start(&th[k], home_releaser, &a[k]);
    }
    for (int k = 0; k < HOME_THREADS; k++)
        test_thread_join(th[k]);
    TCHECK_NONE();
    test_drain(pool);
    for (size_t i = 0; i < n; i++) {
        pp_entry_info_t info;
        cr_assert_eq(pp_stat(pool, refs[i], &info), PP_ESTALE);
    }
    /* Map back from entry id (ct id) to its node: id % 4. */
    for (size_t id = 0; id < n; id++) {
        cr_assert_eq(ct_frees(ct, id), 1, "entry %zu", id);
        cr_assert_eq(ct_tid(ct, id), rtid[id % 4],
                     "entry %zu (node %zu) freed on tid %d", id, id % 4,
                     ct_tid(ct, id));
    }
    for (unsigned k = 0; k < 4; k++) {
        pp_node_stats_t s2;
        test_node_stats(pool, k, &s2);
        cr_assert_eq(s2.frees, HOME_PER_NODE, "node %u", k);
        cr_assert_eq(s2.queued, HOME_PER_NODE, "node %u", k);
        cr_assert_eq(s2.reclaimer_tid, rtid[k]);
    }
    test_destroy(pool);
    ct_delete(ct);
}

/* ---- a storm of final unpins and releases -------------------------------- */

#define STORM_THREADS 8
#define STORM_N 1000
#define STORM_ROUNDS 4

typedef struct storm {
    pp_pool_t *pool;
    pp_ref_t *refs;
    pthread_barrier_t *bar;
    int k;
} storm_t;

static void *storm_worker(void *arg)
{
    storm_t *w = arg;
    /* Every thread pins every entry... */
    for (size_t i = 0; i < STORM_N; i++) {
        int rc = pp_pin(w->pool, w->refs[i], 0, NULL);
        TCHECK(rc == 0, "pin %zu: %s", i, pp_err_name(rc));
    }
    pthread_barrier_wait(w->bar);
    /* ...then, all at once and each in its own order, drops its pin and its
     * owner: the final action on an entry is whichever call comes last. */
    uint64_t st = (uint64_t)w->k * 7919 + 1;
    size_t start = (size_t)(splitmix64(&st) % STORM_N);
    for (size_t j = 0; j < STORM_N; j++) {
        size_t i = (w->k % 2) ? (start + j) % STORM_N
                              : (start + STORM_N - j) % STORM_N;
        int rc = pp_unpin(w->pool, w->refs[i]);
        TCHECK(rc == 0, "unpin %zu: %s", i, pp_err_name(rc));
        rc = pp_release(w->pool, w->refs[i]);
        TCHECK(rc == 0, "release %zu: %s", i, pp_err_name(rc));
        if (j % 64 == 0)
            sched_yield();
    }
    return NULL;
}

Test(reclaim, storm_of_final_unpins, .timeout = 120)
{
    pp_pool_t *pool = test_pool(NULL);
    unsigned nodes = test_nodes(pool);
    ct_t *ct = ct_new(STORM_N * STORM_ROUNDS);
    pp_ref_t *refs = calloc(STORM_N, sizeof *refs);
    pthread_barrier_t bar;
    for (int round = 0; round < STORM_ROUNDS; round++) {
        for (size_t i = 0; i < STORM_N; i++) {
            size_t id = (size_t)round * STORM_N + i;
            refs[i] = ct_put(pool, ct, id, 48, PP_ON_NODE(i % nodes));
            /* STORM_THREADS owners in all, one per thread. */
            for (int k = 1; k < STORM_THREADS; k++)
                assert_rc(pp_retain(pool, refs[i]), 0);
        }
        pthread_barrier_init(&bar, NULL, STORM_THREADS);
        storm_t w[STORM_THREADS];
        pthread_t th[STORM_THREADS];
        for (int k = 0; k < STORM_THREADS; k++) {
            w[k] = (storm_t){pool, refs, &bar, k};
            test_thread_start(&th[k], storm_worker, &w[k]);
        }
        for (int k = 0; k < STORM_THREADS; k++)
            test_thread_join(th[k]);
        pthread_barrier_destroy(&bar);
        TCHECK_NONE();
        test_drain(pool);
        for (size_t i = 0; i < STORM_N; i++) {
            size_t id = (size_t)round * STORM_N + i;
            cr_assert_eq(ct_frees(ct, id), 1, "round %d entry %zu: %u frees",
                         round, i, ct_frees(ct, id));
        }
    }
    pp_stats_t s;
    test_stats(pool, &s);
    uint64_t total = (uint64_t)STORM_N * STORM_ROUNDS;
    cr_assert_eq(s.total.frees, total);
    cr_assert_eq(s.total.queued, total);
    cr_assert_eq(s.total.reclaim_queue_depth, 0);
    cr_assert_eq(s.total.entries, 0);
    cr_assert_eq(s.total.resident_bytes, 0);
    cr_assert_eq(s.total.pins, total * STORM_THREADS);
    cr_assert_eq(s.total.unpins, total * STORM_THREADS);
    cr_assert_eq(s.total.releases, total * STORM_THREADS);
    for (unsigned n = 0; n < nodes; n++) {
        pp_node_stats_t ns;
        test_node_stats(pool, n, &ns);
        cr_assert_eq(ns.frees, ns.queued, "node %u", n);
        cr_assert_eq(ns.reclaim_queue_depth, 0, "node %u", n);
    }
    test_destroy(pool);
    cr_assert_eq(atomic_load(&ct->total), total);
    cr_assert_eq(atomic_load(&ct->bad), 0);
    free(refs);
    ct_delete(ct);
}

/* ---- queue depth, lag statistics --------------------------------------- */

Test(reclaim, queue_and_lag_stats, .timeout = 60)
{
    pp_pool_t *pool = test_pool(NULL);
    unsigned nodes = test_nodes(pool);
    size_t n = 500;
    ct_t *ct = ct_new(n);
    pp_stats_t s;
    test_stats(pool, &s);
    cr_assert_eq(s.total.lag_count, 0);
    cr_assert_eq(s.total.lag_p50_ns, 0);
    cr_assert_eq(s.total.lag_p99_ns, 0);
    cr_assert_eq(s.total.lag_max_ns, 0);
    for (size_t i = 0; i < n; i++) {
        pp_ref_t r = ct_put(pool, ct, i, 64, PP_ON_NODE(i % nodes));
        assert_rc(pp_release(pool, r), 0);
    }
    test_drain(pool);
    test_stats(pool, &s);
    cr_assert_eq(s.total.frees, n);
    cr_assert_eq(s.total.queued, n);
    cr_assert_eq(s.total.reclaim_queue_depth, 0);
    /* One thread queued them all: the first of every PP__LAG_SAMPLE per node
     * is timed. */
    pp_node_stats_t node[PP_MAX_NODES];
    uint64_t sampled = 0;
    for (unsigned k = 0; k < nodes; k++) {
        test_node_stats(pool, k, &node[k]);
        sampled += (node[k].frees + PP__LAG_SAMPLE - 1) / PP__LAG_SAMPLE;
    }
    cr_assert_eq(s.total.lag_count, sampled);
    cr_assert_leq(s.total.lag_p50_ns, s.total.lag_p99_ns);
    /* Quantiles are bucket upper bounds capped at the maximum. */
    cr_assert_leq(s.total.lag_p99_ns, s.total.lag_max_ns,
                  "p99 %" PRIu64 " max %" PRIu64, s.total.lag_p99_ns,
                  s.total.lag_max_ns);
    cr_assert_leq(s.total.lag_p50_ns, s.total.lag_max_ns);
    cr_assert_geq(s.total.lag_total_ns, s.total.lag_max_ns);
    cr_assert_leq(s.total.lag_max_ns, s.total.lag_total_ns);
    uint64_t sum_count = 0, sum_total = 0, max = 0;
    for (unsigned k = 0; k < nodes; k++) {
        pp_node_stats_t *ns = &node[k];
        cr_assert_eq(ns->lag_count, (ns->frees + PP__LAG_SAMPLE - 1) / PP__LAG_SAMPLE,
                     "node %u", k);
        cr_assert_leq(ns->lag_p50_ns, ns->lag_p99_ns, "node %u", k);
        cr_assert_leq(ns->lag_p99_ns, ns->lag_max_ns, "node %u", k);
        cr_assert_leq(ns->lag_max_ns, ns->lag_total_ns, "node %u", k);
        sum_count += ns->lag_count;
        sum_total += ns->lag_total_ns;
        if (ns->lag_max_ns > max)
            max = ns->lag_max_ns;
    }
    cr_assert_eq(sum_count, s.total.lag_count);
    cr_assert_eq(sum_total, s.total.lag_total_ns);
    cr_assert_eq(max, s.total.lag_max_ns);
    test_destroy(pool);
    ct_delete(ct);
}

/* p50 and p99 are capped at the maximum even when every lag falls in one
 * histogram bucket (one entry: p50 == p99 == max). */
Test(reclaim, lag_quantiles_capped_at_max, .timeout = 60)
{
    pp_pool_t *pool = test_pool(NULL);
    ct_t *ct = ct_new(1);
    pp_ref_t r = ct_put(pool, ct, 0, 64, 0);
    assert_rc(pp_release(pool, r), 0);
    test_drain(pool);
    pp_stats_t s;
    test_stats(pool, &s);
    cr_assert_eq(s.total.lag_count, 1);
    cr_assert_eq(s.total.lag_total_ns, s.total.lag_max_ns);
    cr_assert_leq(s.total.lag_p50_ns, s.total.lag_max_ns,
                  "lag_p50_ns %" PRIu64 " > lag_max_ns %" PRIu64,
                  s.total.lag_p50_ns, s.total.lag_max_ns);
    cr_assert_leq(s.total.lag_p99_ns, s.total.lag_max_ns);
    pp_node_stats_t home;
    test_node_stats(pool, pp_ref_node(r), &home);
    cr_assert_leq(home.lag_p50_ns, home.lag_max_ns);
    cr_assert_leq(home.lag_p99_ns, home.lag_max_ns);
    test_destroy(pool);
    ct_delete(ct);
}

/* ---- type ctx and size passed to free; NULL type ------------------------- */

typedef struct ctx_probe {
    _Atomic(void *) ctx_seen;
    atomic_size_t size_seen;
    _Atomic(void *) data_seen;
    atomic_int calls;
} ctx_probe_t;

static ctx_probe_t g_probe;

static void probe_free(void *data, size_t size, void *ctx)
{
    atomic_store(&g_probe.ctx_seen, ctx);
    atomic_store(&g_probe.size_seen, size);
    atomic_store(&g_probe.data_seen, data);
    atomic_fetch_add(&g_probe.calls, 1);
    free(data);
}

Test(reclaim, type_ctx_and_size_passed_to_free, .timeout = 30)
{
    pp_pool_t *pool = test_pool(NULL);
    static int my_ctx;
    static const pp_type_t type = {"probe", probe_free, NULL, NULL, &my_ctx, 0};
    void *buf = malloc(777);
    pp_ref_t r;
    assert_rc(pp_put(pool, buf, 777, &type, 0, &r), 0);
    cr_assert_eq(test_stat(pool, r).type, &type);
    assert_rc(pp_release(pool, r), 0);
    test_drain(pool);
    cr_assert_eq(atomic_load(&g_probe.calls), 1);
    cr_assert_eq(atomic_load(&g_probe.ctx_seen), (void *)&my_ctx);
    cr_assert_eq(atomic_load(&g_probe.size_seen), 777);
    cr_assert_eq(atomic_load(&g_probe.data_seen), buf);
    test_destroy(pool);
    cr_assert_eq(atomic_load(&g_probe.calls), 1);
}

Test(reclaim, null_type_uses_free, .timeout = 30)
{
    pp_pool_t *pool = test_pool(NULL);
    pp_ref_t r[3];
    for (int i = 0; i < 3; i++)
        assert_rc(pp_put(pool, malloc(100 + i), 100 + i, NULL, 0, &r[i]), 0);
    /* A type without a free function also means free(). */
    static const pp_type_t nofree = {"nofree", NULL, NULL, NULL, NULL, 0};
    pp_ref_t r4;
    assert_rc(pp_put(pool, malloc(10), 10, &nofree, 0, &r4), 0);
    assert_rc(pp_release(pool, r[0]), 0);
    assert_rc(pp_release(pool, r4), 0);
    test_drain(pool);
    pp_stats_t s;
    test_stats(pool, &s);
    cr_assert_eq(s.total.frees, 2);
    cr_assert_eq(s.total.entries, 2);
    cr_assert_eq(s.total.resident_bytes, 101 + 102);
    assert_rc(pp_release(pool, r[1]), 0);
    test_drain(pool);
    test_stats(pool, &s);
    cr_assert_eq(s.total.frees, 3);
    /* r[2] is freed (with free()) at destroy: ASan/LSan check the rest. */
    test_destroy(pool);
}

/* A free function may call into another pool, and a slow free function does
 * not stop the finalizing threads (they never wait for it). */
typedef struct slow {
    atomic_int entered;
    atomic_int release;
    atomic_int done;
} slow_t;

static slow_t g_slow;

static void slow_free(void *data, size_t size, void *ctx)
{
    (void)size;
    (void)ctx;
    atomic_fetch_add(&g_slow.entered, 1);
    /* Blocks the reclaimer until the test lets it go (bounded). */
    uint64_t dl = now_ns() + 20ull * 1000000000ull;
    while (!atomic_load(&g_slow.release) && now_ns() < dl)
        sched_yield();
    free(data);
    atomic_fetch_add(&g_slow.done, 1);
}

Test(reclaim, finalizer_never_waits_for_free, .timeout = 60)
{
    pp_pool_t *pool = test_pool(NULL);
    static const pp_type_t slow = {"slow", slow_free, NULL, NULL, NULL, 0};
    pp_ref_t a, b;
    assert_rc(pp_put(pool, malloc(8), 8, &slow, PP_ON_NODE(0), &a), 0);
    assert_rc(pp_put(pool, malloc(8), 8, &slow, PP_ON_NODE(0), &b), 0);
    assert_rc(pp_release(pool, a), 0);
    /* The reclaimer of node 0 is now stuck in a's free function. */
    cr_assert(WAIT_UNTIL(atomic_load(&g_slow.entered) == 1, TEST_WAIT_MS));
    /* Final pins and releases still return: they never wait for it. */
    assert_rc(pp_pin(pool, b, 0, NULL), 0);
    assert_rc(pp_release(pool, b), 0);
    assert_rc(pp_unpin(pool, b), 0);
    cr_assert_eq(atomic_load(&g_slow.done), 0);
    pp_node_stats_t s;
    test_node_stats(pool, 0, &s);
    cr_assert_eq(s.queued, 2);
    cr_assert_geq(s.reclaim_queue_depth, 1);
    atomic_store(&g_slow.release, 1);
    test_drain(pool);
    cr_assert_eq(atomic_load(&g_slow.done), 2);
    test_destroy(pool);
}

/* ---- a free that would wait on its own reclaimer ----------------------------- */

/* pp_pool_drain waits for every queued entry to be freed, the one whose
 * free calls it included; pp_pool_destroy joins the reclaimer it runs on.
 * Inside a callback both refuse at once: PP_EDEADLK. */
typedef struct waiter {
    pp_pool_t *pool;
    atomic_int drain_rc, destroy_rc;
    atomic_uint calls;
} waiter_t;

static waiter_t g_waiter;

static void waiter_free(void *data, size_t size, void *ctx)
{
    waiter_t *w = ctx;
    (void)size;
    atomic_store(&w->drain_rc, pp_pool_drain(w->pool, 200));
    atomic_store(&w->destroy_rc, pp_pool_destroy(w->pool));
    free(data);
    atomic_fetch_add(&w->calls, 1);
}

static const pp_type_t waiter_type = {.name = "waiter", .free = waiter_free, .ctx = &g_waiter};

Test(reclaim, a_free_that_drains_or_destroys_gets_edeadlk, .timeout = 60)
{
    pp_pool_t *pool = test_pool(NULL);
    g_waiter.pool = pool;
    atomic_store(&g_waiter.drain_rc, 1);
    atomic_store(&g_waiter.destroy_rc, 1);
    atomic_store(&g_waiter.calls, 0);
    void *p = malloc(64);
    cr_assert_not_null(p);
    pp_ref_t r;
    assert_rc(pp_put(pool, p, 64, &waiter_type, PP_ON_NODE(0), &r), 0);
    assert_rc(pp_release(pool, r), 0);
    cr_assert(WAIT_UNTIL(atomic_load(&g_waiter.calls) == 1, TEST_WAIT_MS));
    assert_rc(atomic_load(&g_waiter.drain_rc), PP_EDEADLK, "pp_pool_drain in a free");
    assert_rc(atomic_load(&g_waiter.destroy_rc), PP_EDEADLK, "pp_pool_destroy in a free");
    test_drain(pool);
    test_destroy(pool);
}
