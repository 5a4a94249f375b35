/*
 * test_backlog.c -- the bound on the reclaim backlog (docs/api.md, "Overload"):
 * what the backlog counts, where puts wait and wake, PP_PUT_NOWAIT, the
 * refusal of a QSBR thread inside its section (PP_EDEADLK), a thread that
 * holds pins waiting safely, and the bound under a reclaimer stopped at a
 * gate.
 *
 * The gate is the type's free function: it runs on the node's reclaimer
 * and blocks there until the test opens it, so every entry queued behind
 * it stays in the backlog.  All entries live on node 0 (PP_ON_NODE(0)),
 * whose reclaimer the gate stops.
 */
#include "helpers.h"
#include "support/swaptest.h"   /* test_swap_parent */

#define ESIZE 4000u                      /* each entry counts 4000 + 64 */
#define CHARGE (ESIZE + 64u)
#define BOUND (32u * CHARGE)             /* the mark: 8 entries */

typedef struct gate {
    test_sig_t open;                     /* value 1: frees go on */
    atomic_uint frees;
    atomic_uint entered;                 /* frees that reached the gate */
} gate_t;

static gate_t g_gate;

static void gate_free(void *data, size_t size, void *ctx)
{
    gate_t *g = ctx;
    (void)size;
    atomic_fetch_add(&g->entered, 1);
    bool ok = sig_wait(&g->open, 1);
    TCHECK(ok, "the gate stayed closed for %d ms", TEST_WAIT_MS);
    free(data);
    atomic_fetch_add(&g->frees, 1);
}

static const pp_type_t gate_type = {.free = gate_free, .ctx = &g_gate};

static void gate_init(void)
{
    sig_init(&g_gate.open);
    atomic_store(&g_gate.frees, 0);
    atomic_store(&g_gate.entered, 0);
}

static void gate_open(void) { sig_set(&g_gate.open, 1); }

static pp_pool_t *backlog_pool(size_t bound)
{
    gate_init();
    pp_options_t o = PP_OPTIONS_INIT;
    o.reclaim_backlog = bound;
    return test_pool(&o);
}

static int put_flags(pp_pool_t *pool, unsigned flags, pp_ref_t *out)
{
    void *p = malloc(ESIZE);
    cr_assert_not_null(p);
    memset(p, 0x5a, ESIZE);
    int rc = pp_put(pool, p, ESIZE, &gate_type, PP_ON_NODE(0) | flags, out);
    if (rc != 0)
        free(p);                         /* a failed put leaves data with us */
    return rc;
}

static pp_ref_t put_one(pp_pool_t *pool)
{
    pp_ref_t r;
    assert_rc(put_flags(pool, 0, &r), 0);
    return r;
}

/* Puts and releases entries until node 0's backlog is at the mark, the
 * reclaimer held at the gate by the first. */
static void fill_to_mark(pp_pool_t *pool)
{
    pp_stats_t s;
    test_stats(pool, &s);
    uint64_t mark = s.backlog_mark;
    for (int i = 0; i < 1000; i++) {
        if (STAT_NODE(pool, 0, backlog_bytes) >= mark)
            break;
        assert_rc(pp_release(pool, put_one(pool)), 0);
        if (i == 0)
            cr_assert(WAIT_UNTIL(atomic_load(&g_gate.entered) == 1, TEST_WAIT_MS));
    }
    uint64_t bytes = STAT_NODE(pool, 0, backlog_bytes);
    cr_assert_geq(bytes, mark);
    cr_assert_lt(bytes, mark + CHARGE, "one entry past the mark at most");
}

static void open_and_finish(pp_pool_t *pool)
{
    gate_open();
    test_drain(pool);
    cr_assert_eq(STAT_TOTAL(pool, backlog_bytes), 0);
    test_destroy(pool);
    TCHECK_NONE();
    sig_destroy(&g_gate.open);
}

Test(backlog, bound_and_mark_from_options, .timeout = 60)
{
    pp_options_t o = PP_OPTIONS_INIT;
    pp_pool_t *pool = test_pool(&o);
    pp_stats_t s;
    test_stats(pool, &s);
    cr_assert_eq(s.reclaim_backlog, PP_RECLAIM_BACKLOG_DEFAULT);
    cr_assert_eq(s.backlog_mark, PP_RECLAIM_BACKLOG_DEFAULT / 4);
    test_destroy(pool);

    o.reclaim_backlog = PP_RECLAIM_BACKLOG_NONE;
    pool = test_pool(&o);
    test_stats(pool, &s);
    cr_assert_eq(s.reclaim_backlog, UINT64_MAX);
    cr_assert_eq(s.backlog_mark, UINT64_MAX);
    test_destroy(pool);

    o.reclaim_backlog = 1;               /* the mark is at least one byte */
    pool = test_pool(&o);
    test_stats(pool, &s);
    cr_assert_eq(s.reclaim_backlog, 1);
    cr_assert_eq(s.backlog_mark, 1);
    test_destroy(pool);
}

/* A dead entry counts its size and its slot from its final release until
 * its free; a pinned dead entry is not in the backlog. */
Test(backlog, counts_size_and_slot_until_the_free, .timeout = 60)
{
    pp_pool_t *pool = backlog_pool(BOUND);
    pp_ref_t a = put_one(pool), b = put_one(pool);
    cr_assert_eq(STAT_NODE(pool, 0, backlog_bytes), 0, "live entries are not in it");
    assert_rc(pp_release(pool, a), 0);
    cr_assert(WAIT_UNTIL(atomic_load(&g_gate.entered) == 1, TEST_WAIT_MS));
    cr_assert_eq(STAT_NODE(pool, 0, backlog_bytes), CHARGE, "counted while its free runs");

    assert_rc(pp_pin(pool, b, 0, NULL), 0);
    assert_rc(pp_release(pool, b), 0);   /* dead, still pinned */
    cr_assert_eq(STAT_NODE(pool, 0, backlog_bytes), CHARGE);
    assert_rc(pp_unpin(pool, b), 0);     /* the final unpin queues it */
    cr_assert_eq(STAT_NODE(pool, 0, backlog_bytes), 2 * CHARGE);
    cr_assert_eq(STAT_NODE(pool, 0, backlog_peak), 2 * CHARGE);

    gate_open();
    test_drain(pool);
    pp_node_stats_t s;
    test_node_stats(pool, 0, &s);
    cr_assert_eq(s.backlog_bytes, 0);
    cr_assert_eq(s.backlog_peak, 2 * CHARGE, "the peak stays");
    cr_assert_eq(s.backlog_waits + s.backlog_refused, 0);
    cr_assert_eq(atomic_load(&g_gate.frees), 2);
    test_destroy(pool);
    TCHECK_NONE();
    sig_destroy(&g_gate.open);
}

/* PP_PUT_NOWAIT at the mark: PP_EAGAIN at once, the data stays with the
 * caller, nothing is counted but the refusal; below it the put succeeds. */
Test(backlog, nowait_returns_eagain_at_the_mark, .timeout = 60)
{
    pp_pool_t *pool = backlog_pool(BOUND);
    pp_ref_t r;
    assert_rc(put_flags(pool, PP_PUT_NOWAIT, &r), 0);    /* below: a plain put */
    assert_rc(pp_release(pool, r), 0);
    fill_to_mark(pool);
    pp_stats_t s0, s1;
    pp_node_stats_t n0, n1;
    test_stats(pool, &s0);
    test_node_stats(pool, 0, &n0);
    for (int i = 0; i < 3; i++)
        assert_rc(put_flags(pool, PP_PUT_NOWAIT, &r), PP_EAGAIN);
    test_stats(pool, &s1);
    test_node_stats(pool, 0, &n1);
    cr_assert_eq(n1.backlog_refused, n0.backlog_refused + 3);
    cr_assert_eq(s1.total.puts, s0.total.puts, "a refused put is not a put");
    cr_assert_eq(n1.backlog_waits, 0);
    cr_assert_eq(n1.backlog_bytes, n0.backlog_bytes);

    gate_open();
    test_drain(pool);
    assert_rc(put_flags(pool, PP_PUT_NOWAIT, &r), 0);
    assert_rc(pp_release(pool, r), 0);
    open_and_finish(pool);
}

typedef struct putter {
    pp_pool_t *pool;
    unsigned flags;
    bool qsbr_first;                     /* pp_quiescent, then a pool call */
    pp_ref_t held;                       /* a ref to pin first (0: none) */
    atomic_int done;
    int rc;
    pp_ref_t ref;
} putter_t;

static void *putter_main(void *arg)
{
    putter_t *p = arg;
    if (p->held != 0)
        TCHECK(pp_pin(p->pool, p->held, 0, NULL) == 0, "pin of the held entry");
    p->rc = put_flags(p->pool, p->flags, &p->ref);
    atomic_store(&p->done, 1);
    if (p->held != 0)
        TCHECK(pp_unpin(p->pool, p->held) == 0, "unpin of the held entry");
    return NULL;
}

/* A put at the mark waits -- it is counted waiting, and does not return --
 * until the reclaimer brings the backlog below the mark; then it succeeds
 * and its wait is counted with its time. */
Test(backlog, put_waits_until_below_the_mark, .timeout = 60)
{
    pp_pool_t *pool = backlog_pool(BOUND);
    fill_to_mark(pool);
    putter_t p = {.pool = pool};
    pthread_t th;
    test_thread_start(&th, putter_main, &p);
    cr_assert(WAIT_UNTIL(STAT_NODE(pool, 0, backlog_waiting) == 1, TEST_WAIT_MS));
    cr_assert_eq(atomic_load(&p.done), 0, "the put returned at the mark");
    cr_assert_eq(STAT_NODE(pool, 0, backlog_waits), 0);

    gate_open();
    test_thread_join(th);
    assert_rc(p.rc, 0);
    pp_stats_t s;
    pp_node_stats_t n0;
    test_stats(pool, &s);
    test_node_stats(pool, 0, &n0);
    cr_assert_eq(n0.backlog_waiting, 0);
    cr_assert_eq(n0.backlog_waits, 1);
    cr_assert_gt(n0.backlog_wait_ns, 0);
    cr_assert_eq(n0.backlog_wait_max_ns, n0.backlog_wait_ns);
    cr_assert_lt(n0.backlog_bytes, s.backlog_mark, "woken below the mark");
    assert_rc(pp_release(pool, p.ref), 0);
    open_and_finish(pool);
}

/* A QSBR thread inside its section (it made a pool call after its last
 * pp_quiescent) would wait on its own section: PP_EDEADLK, at once.  Right
 * after pp_quiescent the same thread's put waits like any other. */
static void *qsbr_main(void *arg)
{
    putter_t *p = arg;
    pp_quiescent(p->pool);
    pp_entry_info_t info;
    TCHECK(pp_stat(p->pool, p->held, &info) == 0, "pp_stat");   /* enters the section */
    p->rc = put_flags(p->pool, 0, &p->ref);
    TCHECK(p->rc == PP_EDEADLK, "put inside the section: %s", pp_err_name(p->rc));
    pp_quiescent(p->pool);
    p->rc = put_flags(p->pool, 0, &p->ref);      /* waits for the gate */
    atomic_store(&p->done, 1);
    return NULL;
}

Test(backlog, qsbr_thread_in_its_section_gets_edeadlk, .timeout = 60)
{
    pp_pool_t *pool = backlog_pool(BOUND);
    pp_ref_t live = put_one(pool);
    fill_to_mark(pool);
    putter_t p = {.pool = pool, .held = live};
    pthread_t th;
    test_thread_start(&th, qsbr_main, &p);
    cr_assert(WAIT_UNTIL(STAT_NODE(pool, 0, backlog_waiting) == 1, TEST_WAIT_MS));
    cr_assert_eq(atomic_load(&p.done), 0);
    cr_assert_eq(STAT_NODE(pool, 0, backlog_refused), 1, "the refusal is counted");
    gate_open();
    test_thread_join(th);
    TCHECK_NONE();
    assert_rc(p.rc, 0);
    assert_rc(pp_release(pool, p.ref), 0);
    assert_rc(pp_release(pool, live), 0);
    open_and_finish(pool);
}

/* Pins hold nothing back: a thread that holds a pin -- on a live entry, and
 * on a dead one, which is not in the backlog until its last unpin -- waits
 * and is let go by the reclaimer like any other. */
Test(backlog, a_thread_holding_pins_waits_safely, .timeout = 60)
{
    pp_pool_t *pool = backlog_pool(BOUND);
    pp_ref_t live = put_one(pool), dead = put_one(pool);
    assert_rc(pp_pin(pool, dead, 0, NULL), 0);
    assert_rc(pp_release(pool, dead), 0);        /* dead, pinned by us */
    fill_to_mark(pool);
    putter_t p = {.pool = pool, .held = live};
    pthread_t th;
    test_thread_start(&th, putter_main, &p);
    cr_assert(WAIT_UNTIL(STAT_NODE(pool, 0, backlog_waiting) == 1, TEST_WAIT_MS));
    cr_assert_eq(atomic_load(&p.done), 0);
    gate_open();
    test_thread_join(th);
    TCHECK_NONE();
    assert_rc(p.rc, 0);
    test_drain(pool);
    unsigned before = atomic_load(&g_gate.frees);
    pp_entry_info_t info = test_stat(pool, dead);
    cr_assert(info.state & PP_STATE_DEAD, "the pinned dead entry is still there");
    cr_assert_eq(STAT_NODE(pool, 0, backlog_bytes), 0, "and not in the backlog");
    assert_rc(pp_unpin(pool, dead), 0);
    test_drain(pool);
    cr_assert_eq(atomic_load(&g_gate.frees), before + 1);
    assert_rc(pp_release(pool, p.ref), 0);
    assert_rc(pp_release(pool, live), 0);
    open_and_finish(pool);
}

/* The bound under a reclaimer stopped at the gate: a producer that puts
 * and releases far more than the bound stops at the mark, and the backlog
 * never passes the bound (nor, here, the mark by more than one entry). */
typedef struct churn {
    pp_pool_t *pool;
    int n;
    atomic_int made;
} churn_t;

static void *churn_main(void *arg)
{
    churn_t *c = arg;
    for (int i = 0; i < c->n; i++) {
        pp_ref_t r;
        int rc = put_flags(c->pool, 0, &r);
        TCHECK(rc == 0, "put %d: %s", i, pp_err_name(rc));
        if (rc != 0)
            break;
        TCHECK(pp_release(c->pool, r) == 0, "release %d", i);
        atomic_fetch_add(&c->made, 1);
    }
    return NULL;
}

Test(backlog, bound_holds_under_a_gated_reclaimer, .timeout = 60)
{
    pp_pool_t *pool = backlog_pool(BOUND);
    churn_t c = {.pool = pool, .n = 400};        /* 12.5 times the bound */
    pthread_t th;
    test_thread_start(&th, churn_main, &c);
    cr_assert(WAIT_UNTIL(STAT_NODE(pool, 0, backlog_waiting) == 1, TEST_WAIT_MS));
    pp_stats_t s;
    pp_node_stats_t n0;
    test_stats(pool, &s);
    test_node_stats(pool, 0, &n0);
    cr_assert_lt(atomic_load(&c.made), 400, "the producer is held");
    cr_assert_geq(n0.backlog_bytes, s.backlog_mark);
    cr_assert_leq(n0.backlog_peak, s.backlog_mark + CHARGE);
    gate_open();
    test_thread_join(th);
    TCHECK_NONE();
    cr_assert_eq(atomic_load(&c.made), 400);
    test_drain(pool);
    test_node_stats(pool, 0, &n0);
    cr_assert_leq(n0.backlog_peak, BOUND);
    cr_assert_geq(n0.backlog_waits, 1);
    cr_assert_eq(atomic_load(&g_gate.frees), 400);
    open_and_finish(pool);
}

/* Without a bound nothing waits, whatever the backlog. */
Test(backlog, none_never_waits, .timeout = 60)
{
    pp_pool_t *pool = backlog_pool(PP_RECLAIM_BACKLOG_NONE);
    for (int i = 0; i < 100; i++) {
        pp_ref_t r;
        assert_rc(put_flags(pool, PP_PUT_NOWAIT, &r), 0);
        assert_rc(pp_release(pool, r), 0);
    }
    cr_assert(WAIT_UNTIL(atomic_load(&g_gate.entered) == 1, TEST_WAIT_MS));
    pp_node_stats_t s;
    test_node_stats(pool, 0, &s);
    cr_assert_geq(s.backlog_bytes, 99 * CHARGE);
    cr_assert_eq(s.backlog_refused + s.backlog_waits, 0);
    open_and_finish(pool);
}

/* Argument errors come before any wait: a bad put at the mark is PP_EINVAL,
 * not a wait or a refusal. */
Test(backlog, argument_errors_before_the_wait, .timeout = 60)
{
    pp_pool_t *pool = backlog_pool(BOUND);
    fill_to_mark(pool);
    pp_ref_t r;
    char buf[8];
    assert_rc(pp_put(pool, NULL, 8, NULL, 0, &r), PP_EINVAL);
    assert_rc(pp_put(pool, buf, 8, NULL, 0x2u, &r), PP_EINVAL);
    assert_rc(pp_put(pool, buf, 8, NULL, PP_ON_NODE(PP_MAX_NODES - 1), &r), PP_EINVAL);
    cr_assert_eq(STAT_NODE(pool, 0, backlog_refused), 0);
    open_and_finish(pool);
}

/* With swap, PP_PUT_NOWAIT does not wait for room either: PP_EAGAIN where a
 * waiting put would have the swap threads evict (here it would get
 * PP_ENOMEM: every resident byte is pinned), and once pins are dropped the
 * swap threads it asked make room for a retry. */
Test(backlog, nowait_does_not_wait_for_room, .timeout = 60)
{
    gate_init();
    pp_options_t o = PP_OPTIONS_INIT;
    o.mem_limit = 8 * ESIZE;
    o.swap_dir = test_swap_parent();
    pp_pool_t *pool = test_pool(&o);
    static const pp_type_t flat = {0};
    pp_ref_t refs[8];
    size_t n = 0;
    for (; n < 8; n++) {
        void *p = malloc(ESIZE);
        cr_assert_not_null(p);
        memset(p, (int)n, ESIZE);
        int rc = pp_put(pool, p, ESIZE, &flat, PP_PUT_NOWAIT, &refs[n]);
        if (rc != 0) {
            free(p);
            assert_rc(rc, PP_EAGAIN);
            break;
        }
        assert_rc(pp_pin(pool, refs[n], 0, NULL), 0);
    }
    cr_assert_geq(n, 4, "%zu entries fit under 8 of their size", n);
    pp_stats_t s0, s1;
    test_stats(pool, &s0);
    void *p = malloc(ESIZE);
    cr_assert_not_null(p);
    memset(p, 0x77, ESIZE);
    pp_ref_t r;
    assert_rc(pp_put(pool, p, ESIZE, &flat, PP_PUT_NOWAIT, &r), PP_EAGAIN);
    test_stats(pool, &s1);
    cr_assert_eq(s1.room_waits, s0.room_waits, "it did not wait");
    assert_rc(pp_put(pool, p, ESIZE, &flat, 0, &r), PP_ENOMEM);   /* all pinned */
    for (size_t i = 0; i < n; i++)
        assert_rc(pp_unpin(pool, refs[i]), 0);
    int rc;
    cr_assert(WAIT_UNTIL((rc = pp_put(pool, p, ESIZE, &flat, PP_PUT_NOWAIT, &r)) != PP_EAGAIN,
                         TEST_WAIT_MS));
    assert_rc(rc, 0);
    assert_rc(pp_release(pool, r), 0);
    for (size_t i = 0; i < n; i++)
        assert_rc(pp_release(pool, refs[i]), 0);
    test_drain(pool);
    test_destroy(pool);
    sig_destroy(&g_gate.open);
}

/* A PP_PUT_NOWAIT of more than the room between the low watermark and the
 * limit, with the pool just under its high watermark: each refusal asks
 * the swap threads for a pass that makes room for that size, so a retry
 * fits (it used to only kick them, and below the high watermark they ran
 * no pass: the caller retried forever). */
Test(backlog, nowait_retry_gets_room_below_the_high_watermark, .timeout = 60)
{
    pp_options_t o = PP_OPTIONS_INIT;
    o.mem_limit = 16 * ESIZE;            /* high watermark 15, low 14 */
    o.swap_dir = test_swap_parent();
    pp_pool_t *pool = test_pool(&o);
    static const pp_type_t flat = {0};
    pp_ref_t refs[14];
    for (size_t n = 0; n < 14; n++) {
        void *p = malloc(ESIZE);
        cr_assert_not_null(p);
        memset(p, (int)n, ESIZE);
        assert_rc(pp_put(pool, p, ESIZE, &flat, 0, &refs[n]), 0);
    }
    size_t big = 3 * ESIZE;              /* 14 + 3 > 16: does not fit now */
    void *p = malloc(big);
    cr_assert_not_null(p);
    memset(p, 0x5a, big);
    pp_ref_t r;
    int rc;
    cr_assert(WAIT_UNTIL((rc = pp_put(pool, p, big, &flat, PP_PUT_NOWAIT, &r)) != PP_EAGAIN,
                         TEST_WAIT_MS),
              "a NOWAIT put never got room");
    assert_rc(rc, 0);
    assert_rc(pp_release(pool, r), 0);
    for (size_t i = 0; i < 14; i++)
        assert_rc(pp_release(pool, refs[i]), 0);
    test_drain(pool);
    test_destroy(pool);
}

/* ---- a free that puts ------------------------------------------------------- */

/* A free function that puts one entry into the pool it belongs to (on its
 * first call only), then frees its data. */
typedef struct reput {
    pp_pool_t *pool;
    size_t size;                         /* of the entry it puts */
    atomic_uint calls;                   /* frees that returned */
    atomic_int rc;                       /* its pp_put's */
    _Atomic pp_ref_t ref;                /* what it put */
} reput_t;

static reput_t g_reput;

static void reput_free(void *data, size_t size, void *ctx)
{
    reput_t *r = ctx;
    (void)size;
    if (atomic_load(&r->calls) == 0) {
        void *p = malloc(r->size);
        pp_ref_t ref = PP_REF_NONE;
        int rc = p != NULL ? pp_put(r->pool, p, r->size, NULL, PP_ON_NODE(0), &ref) : PP_ENOMEM;
        if (rc != 0)
            free(p);
        atomic_store(&r->ref, ref);
        atomic_store(&r->rc, rc);
    }
    free(data);
    atomic_fetch_add(&r->calls, 1);
}

static const pp_type_t reput_type = {.name = "reput", .free = reput_free, .ctx = &g_reput};

/* A 2 KiB entry's charge is past the mark of a 4 KiB backlog, and its free
 * puts: that put must not wait for the backlog to fall, which only this
 * same reclaimer, busy in the free, can make it do. */
Test(backlog, a_free_that_puts_never_waits_for_its_own_reclaimer, .timeout = 60)
{
    pp_options_t o = PP_OPTIONS_INIT;
    o.reclaim_backlog = 4096;
    pp_pool_t *pool = test_pool(&o);
    g_reput.pool = pool;
    g_reput.size = 64;
    atomic_store(&g_reput.calls, 0);
    atomic_store(&g_reput.rc, 1);
    void *p = malloc(2048);
    cr_assert_not_null(p);
    pp_ref_t r;
    assert_rc(pp_put(pool, p, 2048, &reput_type, PP_ON_NODE(0), &r), 0);
    assert_rc(pp_release(pool, r), 0);
    cr_assert(WAIT_UNTIL(atomic_load(&g_reput.calls) == 1, TEST_WAIT_MS),
              "the free's pp_put never returned: it waits for the backlog its own "
              "reclaimer drains");
    assert_rc(atomic_load(&g_reput.rc), 0, "the free's pp_put");
    /* The node's reclaimer goes on: a put on the main thread, past the
     * mark again, waits for it and returns. */
    assert_rc(pp_release(pool, atomic_load(&g_reput.ref)), 0);
    p = malloc(2048);
    cr_assert_not_null(p);
    assert_rc(pp_put(pool, p, 2048, NULL, PP_ON_NODE(0), &r), 0);
    assert_rc(pp_release(pool, r), 0);
    test_drain(pool);
    cr_assert_eq(STAT_TOTAL(pool, backlog_bytes), 0);
    test_destroy(pool);
}
