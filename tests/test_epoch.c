/* test_epoch.c -- thread registry, epoch sections, QSBR (src/core/epoch.c). */
#include "helpers.h"

static unsigned threads_now(pp_pool_t *pool)
{
    pp_stats_t s;
    test_stats(pool, &s);
    return s.threads;
}

/* ---- a QSBR reader holds the free back until its next pp_quiescent ------ */

typedef struct qsbr {
    pp_pool_t *pool;
    pp_ref_t ref;
    test_sig_t got;      /* 1: R is inside its section with the pointer */
    test_sig_t go_read;  /* 1: main has seen the free held back */
    test_sig_t done;     /* 1: R has read and called pp_quiescent */
    test_sig_t go_exit;  /* 1: R may return */
    int get_rc;
    bool data_ok;
    int tid;
} qsbr_t;

static void *qsbr_reader(void *arg)
{
    qsbr_t *q = arg;
    q->tid = (int)gettid();
    pp_quiescent(q->pool);               /* QSBR mode, outside any section */
    void *p = NULL;
    q->get_rc = pp_get(q->pool, q->ref, &p); /* now inside, until quiescent */
    sig_set(&q->got, 1);
    if (q->get_rc == 0 && sig_wait(&q->go_read, 1))
        q->data_ok = ct_check(p, 0, 1024);
    pp_quiescent(q->pool);
    sig_set(&q->done, 1);
    TCHECK(sig_wait(&q->go_exit, 1), "reader: no exit signal");
    return NULL;
}

Test(epoch, qsbr_reader_holds_free_back, .timeout = 60)
{
    qsbr_t q;
    memset(&q, 0, sizeof q);
    q.pool = test_pool(NULL);
    ct_t *ct = ct_new(1);
    q.ref = ct_put(q.pool, ct, 0, 1024, 0);
    sig_init(&q.got);
    sig_init(&q.go_read);
    sig_init(&q.done);
    sig_init(&q.go_exit);
    unsigned home = pp_ref_node(q.ref);

    pthread_t r;
    test_thread_start(&r, qsbr_reader, &q);
    cr_assert(sig_wait(&q.got, 1), "reader did not get the entry");
    assert_rc(q.get_rc, 0);

    uint64_t polls0 = STAT_NODE(q.pool, home, grace_polls);
    assert_rc(pp_release(q.pool, q.ref), 0); /* the last owner */
    /* The reclaimer polls the epoch again and again but cannot free. */
    cr_assert(WAIT_UNTIL(STAT_NODE(q.pool, home, grace_polls) >= polls0 + 3,
                         TEST_WAIT_MS),
              "the reclaimer of node %u did not poll (%" PRIu64 " -> %" PRIu64 ")",
              home, polls0, STAT_NODE(q.pool, home, grace_polls));
    cr_assert_eq(ct_frees(ct, 0), 0, "freed while a QSBR reader held it");
    cr_assert_eq(STAT_NODE(q.pool, home, frees), 0);
    cr_assert_eq(STAT_NODE(q.pool, home, reclaim_queue_depth), 1);
    /* Queued (dead, unpinned): no longer described. */
    pp_entry_info_t info;
    assert_rc(pp_stat(q.pool, q.ref, &info), PP_ESTALE);
    /* A drain cannot finish while the reader stays in its section. */
    assert_rc(pp_pool_drain(q.pool, 50), PP_EBUSY);
    cr_assert_eq(ct_frees(ct, 0), 0);

    sig_set(&q.go_read, 1);
    cr_assert(sig_wait(&q.done, 1), "reader did not finish");
    cr_assert(q.data_ok, "the reader saw freed or changed data");
    /* After its pp_quiescent the free happens, on the home reclaimer. */
    CT_WAIT_TOTAL(ct, 1);
    cr_assert_eq(ct_frees(ct, 0), 1);
    int rtid = (int)STAT_NODE(q.pool, home, reclaimer_tid);
    cr_assert_eq(ct_tid(ct, 0), rtid);
    cr_assert_neq(ct_tid(ct, 0), q.tid);
    cr_assert_neq(ct_tid(ct, 0), (int)gettid());
    test_drain(q.pool);

    sig_set(&q.go_exit, 1);
    test_thread_join(r);
    TCHECK_NONE();
    test_destroy(q.pool);
    cr_assert_eq(ct_frees(ct, 0), 1);
    ct_delete(ct);
    sig_destroy(&q.got);
    sig_destroy(&q.go_read);
    sig_destroy(&q.done);
    sig_destroy(&q.go_exit);
}

/* ---- a default-mode pp_get does not hold reclamation back --------------- */

typedef struct dflt {
    pp_pool_t *pool;
    pp_ref_t ref;
    test_sig_t got, go_exit;
    int rc;
    bool ok;
} dflt_t;

static void *dflt_getter(void *arg)
{
    dflt_t *d = arg;
    void *p = NULL;
    d->rc = pp_get(d->pool, d->ref, &p);
    d->ok = d->rc == 0 && ct_check(p, 0, 64);
    sig_set(&d->got, 1);
    /* Stays registered (alive, no pp_thread_exit) while main reclaims. */
    TCHECK(sig_wait(&d->go_exit, 1), "getter: no exit signal");
    return NULL;
}

Test(epoch, default_mode_get_does_not_hold_reclamation, .timeout = 30)
{
    dflt_t d;
    memset(&d, 0, sizeof d);
    d.pool = test_pool(NULL);
    ct_t *ct = ct_new(1);
    d.ref = ct_put(d.pool, ct, 0, 64, 0);
    sig_init(&d.got);
    sig_init(&d.go_exit);
    pthread_t t;
    test_thread_start(&t, dflt_getter, &d);
    cr_assert(sig_wait(&d.got, 1));
    assert_rc(d.rc, 0);
    cr_assert(d.ok);
    cr_assert_geq(threads_now(d.pool), 1);

    assert_rc(pp_release(d.pool, d.ref), 0);
    test_drain(d.pool); /* would time out if the getter's section were open */
    cr_assert_eq(ct_frees(ct, 0), 1);

    sig_set(&d.go_exit, 1);
    test_thread_join(t);
    TCHECK_NONE();
    test_destroy(d.pool);
    ct_delete(ct);
    sig_destroy(&d.got);
    sig_destroy(&d.go_exit);
}

/* A QSBR thread that quiesces lets the reclaimer go, and so does the main
 * thread calling pp_pool_drain while in QSBR mode itself. */
Test(epoch, qsbr_drain_does_not_wait_on_itself, .timeout = 30)
{
    pp_pool_t *pool = test_pool(NULL);
    ct_t *ct = ct_new(2);
    pp_ref_t a = ct_put(pool, ct, 0, 64, 0);
    pp_ref_t b = ct_put(pool, ct, 1, 64, 0);
    pp_quiescent(pool);
    void *p = NULL;
    assert_rc(pp_get(pool, a, &p), 0); /* section open until quiescent */
    cr_assert(ct_check(p, 0, 64));
    assert_rc(pp_release(pool, a), 0);
    assert_rc(pp_release(pool, b), 0);
    test_drain(pool); /* ends this thread's section first */
    cr_assert_eq(ct_frees(ct, 0), 1);
    cr_assert_eq(ct_frees(ct, 1), 1);
    pp_quiescent(pool);
    test_destroy(pool);
    ct_delete(ct);
}

/* ---- thread records are released at exit and by pp_thread_exit ---------- */

typedef struct reg {
    pp_pool_t *pool;
    ct_t *ct;
    test_sig_t step;  /* set by the thread */
    test_sig_t go;    /* set by main */
    int rc_exit;
} reg_t;

static bool touch(pp_pool_t *pool, ct_t *ct, size_t id)
{
    void *buf = ct_buf(ct, id, 64);
    pp_ref_t r;
    if (pp_put(pool, buf, 64, &ct->type, 0, &r) != 0) {
        free(buf);
        return false;
    }
    bool ok = pp_pin(pool, r, 0, NULL) == 0 && pp_unpin(pool, r) == 0 &&
              pp_release(pool, r) == 0;
    return ok;
}

static void *reg_thread(void *arg)
{
    reg_t *g = arg;
    TCHECK(touch(g->pool, g->ct, 0), "touch 0");
    sig_set(&g->step, 1);                     /* registered */
    TCHECK(sig_wait(&g->go, 1), "go 1");
    g->rc_exit = pp_thread_exit(g->pool);
    sig_set(&g->step, 2);                     /* unregistered */
    TCHECK(sig_wait(&g->go, 2), "go 2");
    TCHECK(touch(g->pool, g->ct, 1), "touch 1"); /* registers again */
    sig_set(&g->step, 3);
    TCHECK(sig_wait(&g->go, 3), "go 3");
    return NULL;                              /* released by the TLS exit */
}

Test(epoch, thread_records_released, .timeout = 30)
{
    reg_t g;
    memset(&g, 0, sizeof g);
    g.pool = test_pool(NULL);
    g.ct = ct_new(3);
    sig_init(&g.step);
    sig_init(&g.go);
    /* Main registers itself first, so the baseline is stable. */
    pp_ref_t mine = ct_put(g.pool, g.ct, 2, 64, 0);
    assert_rc(pp_release(g.pool, mine), 0);
    test_drain(g.pool);
    cr_assert_eq(ct_frees(g.ct, 2), 1);
    unsigned base = threads_now(g.pool);
    cr_assert_geq(base, 1);

    pthread_t t;
    test_thread_start(&t, reg_thread, &g);
    cr_assert(sig_wait(&g.step, 1));
    cr_assert_eq(threads_now(g.pool), base + 1);
    sig_set(&g.go, 1);
    cr_assert(sig_wait(&g.step, 2));
    assert_rc(g.rc_exit, 0);
    cr_assert_eq(threads_now(g.pool), base, "pp_thread_exit kept the record");
    sig_set(&g.go, 2);
    cr_assert(sig_wait(&g.step, 3));
    cr_assert_eq(threads_now(g.pool), base + 1, "no re-registration");
    sig_set(&g.go, 3);
    test_thread_join(t);
    cr_assert(WAIT_UNTIL(threads_now(g.pool) == base, TEST_WAIT_MS),
              "thread exit kept the record: %u threads, %u expected",
              threads_now(g.pool), base);
    TCHECK_NONE();
    test_drain(g.pool);
    cr_assert_eq(ct_frees(g.ct, 0), 1);
    cr_assert_eq(ct_frees(g.ct, 1), 1);

    /* The main thread's own pp_thread_exit, and a later call re-registers. */
    assert_rc(pp_thread_exit(g.pool), 0);
    cr_assert_eq(threads_now(g.pool), base - 1);
    assert_rc(pp_thread_exit(g.pool), 0); /* not registered: nothing to do */
    cr_assert_eq(threads_now(g.pool), base - 1);
    test_drain(g.pool);
    cr_assert_eq(threads_now(g.pool), base);
    test_destroy(g.pool);
    ct_delete(g.ct);
    sig_destroy(&g.step);
    sig_destroy(&g.go);
}

/* A QSBR thread that exits without a last pp_quiescent does not hold the
 * reclaimer back forever: its exit ends its section. */
static void *qsbr_then_exit(void *arg)
{
    reg_t *g = arg;
    pp_quiescent(g->pool);
    pp_ref_t r;
    void *buf = ct_buf(g->ct, 1, 64);
    int rc = pp_put(g->pool, buf, 64, &g->ct->type, 0, &r);
    TCHECK(rc == 0, "put: %s", pp_err_name(rc));
    if (rc != 0) {
        free(buf);
        return NULL;
    }
    void *p = NULL;
    rc = pp_get(g->pool, r, &p); /* opens a section that lasts (QSBR) */
    TCHECK(rc == 0, "get: %s", pp_err_name(rc));
    return NULL; /* exits inside that section, without pp_quiescent */
}

Test(epoch, exiting_qsbr_thread_releases_its_section, .timeout = 30)
{
    reg_t g;
    memset(&g, 0, sizeof g);
    g.pool = test_pool(NULL);
    g.ct = ct_new(2);
    pp_ref_t r = ct_put(g.pool, g.ct, 0, 64, 0);
    pthread_t t;
    test_thread_start(&t, qsbr_then_exit, &g);
    test_thread_join(t);
    TCHECK_NONE();
    assert_rc(pp_release(g.pool, r), 0);
    test_drain(g.pool);
    cr_assert_eq(ct_frees(g.ct, 0), 1);
    test_destroy(g.pool);
    cr_assert_eq(ct_frees(g.ct, 1), 1); /* the thread's entry, at destroy */
    ct_delete(g.ct);
}

/* ---- one thread, two pools ------------------------------------------------ */

typedef struct two {
    pp_pool_t *a, *b;
    ct_t *ca, *cb;
    test_sig_t step, go;
    int exit_a;
} two_t;

static void *two_thread(void *arg)
{
    two_t *w = arg;
    pp_ref_t ra[10], rb[10];
    for (int i = 0; i < 10; i++) {
        void *ba = ct_buf(w->ca, i, 64), *bb = ct_buf(w->cb, i, 64);
        TCHECK(pp_put(w->a, ba, 64, &w->ca->type, 0, &ra[i]) == 0, "put a");
        TCHECK(pp_put(w->b, bb, 64, &w->cb->type, 0, &rb[i]) == 0, "put b");
        void *pa = NULL, *pb = NULL;
        TCHECK(pp_pin(w->a, ra[i], 0, &pa) == 0 && ct_check(pa, i, 64), "pin a");
        TCHECK(pp_pin(w->b, rb[i], 0, &pb) == 0 && ct_check(pb, i, 64), "pin b");
        pp_quiescent(w->a);
        TCHECK(pp_unpin(w->a, ra[i]) == 0, "unpin a");
        TCHECK(pp_unpin(w->b, rb[i]) == 0, "unpin b");
        TCHECK(pp_release(w->b, rb[i]) == 0, "release b");
        TCHECK(pp_release(w->a, ra[i]) == 0, "release a");
        pp_quiescent(w->b);
    }
    sig_set(&w->step, 1);
    TCHECK(sig_wait(&w->go, 1), "go 1");
    w->exit_a = pp_thread_exit(w->a);
    /* Still registered with b, and b still works. */
    pp_ref_t r;
    void *bb = ct_buf(w->cb, 10, 64);
    TCHECK(pp_put(w->b, bb, 64, &w->cb->type, 0, &r) == 0, "put b after exit a");
    TCHECK(pp_release(w->b, r) == 0, "release b after exit a");
    sig_set(&w->step, 2);
    TCHECK(sig_wait(&w->go, 2), "go 2");
    return NULL;
}

Test(epoch, one_thread_two_pools, .timeout = 30)
{
    two_t w;
    memset(&w, 0, sizeof w);
    w.a = test_pool(NULL);
    w.b = test_pool(NULL);
    w.ca = ct_new(11);
    w.cb = ct_new(11);
    sig_init(&w.step);
    sig_init(&w.go);
    unsigned base_a = threads_now(w.a), base_b = threads_now(w.b);
    pthread_t t;
    test_thread_start(&t, two_thread, &w);
    cr_assert(sig_wait(&w.step, 1));
    cr_assert_eq(threads_now(w.a), base_a + 1);
    cr_assert_eq(threads_now(w.b), base_b + 1);
    sig_set(&w.go, 1);
    cr_assert(sig_wait(&w.step, 2));
    assert_rc(w.exit_a, 0);
    cr_assert_eq(threads_now(w.a), base_a);
    cr_assert_eq(threads_now(w.b), base_b + 1);
    sig_set(&w.go, 2);
    test_thread_join(t);
    cr_assert(WAIT_UNTIL(threads_now(w.b) == base_b, TEST_WAIT_MS));
    cr_assert_eq(threads_now(w.a), base_a);
    TCHECK_NONE();
    test_drain(w.a);
    test_drain(w.b);
    for (int i = 0; i < 10; i++) {
        cr_assert_eq(ct_frees(w.ca, i), 1);
        cr_assert_eq(ct_frees(w.cb, i), 1);
    }
    cr_assert_eq(ct_frees(w.cb, 10), 1);
    test_destroy(w.a);
    test_destroy(w.b);
    cr_assert_eq(atomic_load(&w.ca->total), 10);
    cr_assert_eq(atomic_load(&w.cb->total), 11);
    ct_delete(w.ca);
    ct_delete(w.cb);
    sig_destroy(&w.step);
    sig_destroy(&w.go);
}

/* A thread registered with a pool that is destroyed before the thread
 * exits: its exit must not touch the destroyed pool. */
static void *outlive_thread(void *arg)
{
    reg_t *g = arg;
    TCHECK(touch(g->pool, g->ct, 0), "touch");
    pp_quiescent(g->pool);
    sig_set(&g->step, 1);
    TCHECK(sig_wait(&g->go, 1), "go");
    return NULL; /* exits after pp_pool_destroy returned */
}

Test(epoch, thread_outlives_pool, .timeout = 30)
{
    reg_t g;
    memset(&g, 0, sizeof g);
    g.pool = test_pool(NULL);
    g.ct = ct_new(1);
    sig_init(&g.step);
    sig_init(&g.go);
    pthread_t t;
    test_thread_start(&t, outlive_thread, &g);
    cr_assert(sig_wait(&g.step, 1));
    test_drain(g.pool);
    test_destroy(g.pool);
    /* A new pool (the old memory may be reused) and the thread exits. */
    pp_pool_t *other = test_pool(NULL);
    sig_set(&g.go, 1);
    test_thread_join(t);
    TCHECK_NONE();
    cr_assert_eq(ct_frees(g.ct, 0), 1);
    cr_assert_eq(atomic_load(&g.ct->total), 1);
    test_destroy(other);
    ct_delete(g.ct);
    sig_destroy(&g.step);
    sig_destroy(&g.go);
}

/* ---- many short-lived threads ------------------------------------------- */

#define SHORT_THREADS 200
#define SHORT_BATCH 8

typedef struct shortarg {
    pp_pool_t *pool;
    ct_t *ct;
    size_t id;
    unsigned nodes;
} shortarg_t;

static void *short_thread(void *arg)
{
    shortarg_t *a = arg;
    void *buf = ct_buf(a->ct, a->id, 64 + a->id);
    pp_ref_t r;
    int rc = pp_put(a->pool, buf, 64 + a->id, &a->ct->type,
                    PP_ON_NODE(a->id % a->nodes), &r);
    TCHECK(rc == 0, "put: %s", pp_err_name(rc));
    if (rc != 0) {
        free(buf);
        return NULL;
    }
    void *p = NULL;
    TCHECK(pp_pin(a->pool, r, 0, &p) == 0, "pin");
    TCHECK(ct_check(p, a->id, 64 + a->id), "data");
    TCHECK(pp_retain(a->pool, r) == 0, "retain");
    TCHECK(pp_unpin(a->pool, r) == 0, "unpin");
    TCHECK(pp_release(a->pool, r) == 0, "release");
    if (a->id % 2)
        pp_quiescent(a->pool);
    TCHECK(pp_release(a->pool, r) == 0, "final release");
    return NULL; /* no pp_thread_exit: the TLS exit does it */
}

Test(epoch, many_short_lived_threads, .timeout = 120)
{
    pp_pool_t *pool = test_pool(NULL);
    unsigned nodes = test_nodes(pool);
    ct_t *ct = ct_new(SHORT_THREADS);
    unsigned base = threads_now(pool);
    shortarg_t args[SHORT_THREADS];
    for (size_t i = 0; i < SHORT_THREADS; i += SHORT_BATCH) {
        pthread_t th[SHORT_BATCH];
        for (size_t k = 0; k < SHORT_BATCH; k++) {
            args[i + k] = (shortarg_t){pool, ct, i + k, nodes};
            test_thread_start(&th[k], short_thread, &args[i + k]);
        }
        for (size_t k = 0; k < SHORT_BATCH; k++)
            test_thread_join(th[k]);
    }
    TCHECK_NONE();
    cr_assert(WAIT_UNTIL(threads_now(pool) == base, TEST_WAIT_MS),
              "%u threads still registered, %u expected", threads_now(pool),
              base);
    test_drain(pool);
    pp_stats_t s;
    test_stats(pool, &s);
    cr_assert_eq(s.total.puts, SHORT_THREADS);
    cr_assert_eq(s.total.pins, SHORT_THREADS);
    cr_assert_eq(s.total.unpins, SHORT_THREADS);
    cr_assert_eq(s.total.retains, SHORT_THREADS);
    cr_assert_eq(s.total.releases, 2 * SHORT_THREADS);
    cr_assert_eq(s.total.frees, SHORT_THREADS);
    cr_assert_eq(s.total.queued, SHORT_THREADS);
    cr_assert_eq(s.total.entries, 0);
    cr_assert_eq(s.total.resident_bytes, 0);
    cr_assert_eq(s.total.reclaim_queue_depth, 0);
    for (unsigned n = 0; n < nodes; n++) {
        uint64_t want = 0;
        for (size_t i = 0; i < SHORT_THREADS; i++)
            want += (i % nodes) == n;
        pp_node_stats_t ns;
        test_node_stats(pool, n, &ns);
        cr_assert_eq(ns.puts, want, "node %u", n);
        cr_assert_eq(ns.frees, want, "node %u", n);
    }
    for (size_t i = 0; i < SHORT_THREADS; i++)
        cr_assert_eq(ct_frees(ct, i), 1, "entry %zu", i);
    test_destroy(pool);
    cr_assert_eq(atomic_load(&ct->total), SHORT_THREADS);
    cr_assert_eq(atomic_load(&ct->bad), 0);
    ct_delete(ct);
}
