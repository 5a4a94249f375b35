/* test_track.c -- pin-leak tracking and reports (src/core/track.c). */
#include "helpers.h"

static pp_pool_t *tracked_pool(report_cap_t *rep, unsigned flags)
{
    pp_options_t o = PP_OPTIONS_INIT;
    o.flags = flags;
    report_cap_attach(rep, &o);
    return test_pool(&o);
}

static void site(char *buf, size_t len, int line)
{
    snprintf(buf, len, "test_track.c:%d", line);
}

/* A report line (from index `from`) names ref and the call site. */
static void assert_reported(report_cap_t *rep, size_t from, pp_ref_t ref,
                            int line, int tid)
{
    char hex[32], where[64], tids[32];
    ref_hex(ref, hex);
    site(where, sizeof where, line);
    snprintf(tids, sizeof tids, "%d", tid);
    char *dump = report_dump(rep);
    cr_assert(report_has(rep, from, hex, where, tid > 0 ? tids : NULL),
              "no report line with %s, %s and thread %d; lines:%s", hex, where,
              tid, dump);
    free(dump);
    cr_assert(!rep->newline_seen, "a report line holds a newline");
}

/* ---- a thread leaks a pin and calls pp_thread_exit ---------------------- */

typedef struct leak {
    pp_pool_t *pool;
    pp_ref_t a, b, c;
    int line_a, line_many;
    int rc_exit;
    int tid;
    bool balanced; /* pin and unpin c too */
} leak_t;

static void *leaker(void *arg)
{
    leak_t *l = arg;
    l->tid = (int)gettid();
    int rc;
    l->line_a = __LINE__; rc = pp_pin(l->pool, l->a, 0, NULL);
    TCHECK(rc == 0, "pin a: %s", pp_err_name(rc));
    pp_ref_t many[1] = {l->b};
    l->line_many = __LINE__; rc = pp_pin_many(l->pool, many, 1, 0, NULL);
    TCHECK(rc == 0, "pin_many b: %s", pp_err_name(rc));
    if (l->balanced) {
        rc = pp_pin(l->pool, l->c, 0, NULL);
        TCHECK(rc == 0, "pin c: %s", pp_err_name(rc));
        rc = pp_unpin(l->pool, l->c);
        TCHECK(rc == 0, "unpin c: %s", pp_err_name(rc));
    }
    l->rc_exit = pp_thread_exit(l->pool);
    return NULL;
}

/* Puts entries a, b, c and runs leaker on a thread of its own: it leaves a
 * pin on a (pp_pin) and on b (pp_pin_many), and with balanced also pins
 * and unpins c, then calls pp_thread_exit. */
static void run_leaker(pp_pool_t *pool, ct_t *ct, leak_t *l, bool balanced)
{
    memset(l, 0, sizeof *l);
    l->pool = pool;
    l->a = ct_put(pool, ct, 0, 64, 0);
    l->b = ct_put(pool, ct, 1, 64, 0);
    l->c = ct_put(pool, ct, 2, 64, 0);
    l->balanced = balanced;
    pthread_t t;
    test_thread_start(&t, leaker, l);
    test_thread_join(t);
    TCHECK_NONE();
}

Test(track, thread_exit_reports_leaked_pins, .timeout = 30)
{
    report_cap_t rep;
    report_cap_init(&rep);
    pp_pool_t *pool = tracked_pool(&rep, PP_TRACK_PINS);
    ct_t *ct = ct_new(3);
    leak_t l;
    run_leaker(pool, ct, &l, true);
    assert_rc(l.rc_exit, PP_EBUSY);
    assert_reported(&rep, 0, l.a, l.line_a, l.tid);
    assert_reported(&rep, 0, l.b, l.line_many, l.tid);
    /* The balanced pin of c is not reported. */
    char hex[32];
    ref_hex(l.c, hex);
    cr_assert(!report_has(&rep, 0, hex, NULL, NULL), "c was reported");

    /* The pins may legitimately be dropped by another thread later. */
    assert_rc(pp_unpin(pool, l.a), 0);
    assert_rc(pp_unpin(pool, l.b), 0);
    size_t before = report_cap_count(&rep);
    test_destroy(pool);
    /* Nothing pinned any more: destroy reports no pin. */
    ref_hex(l.a, hex);
    cr_assert(!report_has(&rep, before, hex, "test_track.c", NULL));
    ct_delete(ct);
    report_cap_free(&rep);
}

Test(track, thread_exit_without_leak_returns_zero, .timeout = 30)
{
    report_cap_t rep;
    report_cap_init(&rep);
    pp_pool_t *pool = tracked_pool(&rep, PP_TRACK_PINS);
    ct_t *ct = ct_new(1);
    pp_ref_t r = ct_put(pool, ct, 0, 64, 0);
    for (int i = 0; i < 3; i++)
        assert_rc(pp_pin(pool, r, 0, NULL), 0);
    for (int i = 0; i < 3; i++)
        assert_rc(pp_unpin(pool, r), 0);
    assert_rc(pp_thread_exit(pool), 0);
    cr_assert_eq(report_cap_count(&rep), 0);
    test_destroy(pool);
    ct_delete(ct);
    report_cap_free(&rep);
}

/* Pins dropped by another thread than the one that took them are not
 * reported against the taker. */
typedef struct cross {
    pp_pool_t *pool;
    pp_ref_t r;
    int rc_exit;
} cross_t;

static void *cross_unpin_then_exit(void *arg)
{
    cross_t *c = arg;
    int rc = pp_unpin(c->pool, c->r);
    TCHECK(rc == 0, "unpin: %s", pp_err_name(rc));
    c->rc_exit = pp_thread_exit(c->pool);
    return NULL;
}

Test(track, pin_dropped_by_another_thread, .timeout = 30)
{
    report_cap_t rep;
    report_cap_init(&rep);
    pp_pool_t *pool = tracked_pool(&rep, PP_TRACK_PINS);
    ct_t *ct = ct_new(1);
    cross_t c = {pool, ct_put(pool, ct, 0, 64, 0), -100};
    assert_rc(pp_pin(pool, c.r, 0, NULL), 0);
    pthread_t t;
    test_thread_start(&t, cross_unpin_then_exit, &c);
    test_thread_join(t);
    TCHECK_NONE();
    assert_rc(c.rc_exit, 0);
    assert_rc(pp_thread_exit(pool), 0); /* main's pin was dropped */
    cr_assert_eq(report_cap_count(&rep), 0);
    test_destroy(pool);
    ct_delete(ct);
    report_cap_free(&rep);
}

/* ---- destroy with a leaked pin ------------------------------------------ */

Test(track, destroy_reports_leaked_pin_with_site, .timeout = 30)
{
    report_cap_t rep;
    report_cap_init(&rep);
    pp_pool_t *pool = tracked_pool(&rep, PP_TRACK_PINS);
    ct_t *ct = ct_new(2);
    pp_ref_t r = ct_put(pool, ct, 0, 64, 0);
    pp_ref_t ok = ct_put(pool, ct, 1, 64, 0);
    assert_rc(pp_pin(pool, ok, 0, NULL), 0);
    assert_rc(pp_unpin(pool, ok), 0);
    int line = __LINE__; assert_rc(pp_pin(pool, r, PP_PIN_WRITE, NULL), 0);

    assert_rc(pp_pool_destroy(pool), PP_EBUSY);
    assert_reported(&rep, 0, r, line, (int)gettid());
    char hex[32];
    ref_hex(ok, hex);
    cr_assert(!report_has(&rep, 0, hex, NULL, NULL), "an unpinned entry was reported");
    cr_assert_eq(ct_frees(ct, 0), 0);

    /* Reported again at a second attempt; then unpinned, destroy works. */
    size_t before = report_cap_count(&rep);
    assert_rc(pp_pool_destroy(pool), PP_EBUSY);
    assert_reported(&rep, before, r, line, (int)gettid());
    assert_rc(pp_unpin(pool, r), 0);
    test_destroy(pool);
    cr_assert_eq(ct_frees(ct, 0), 1);
    cr_assert_eq(ct_frees(ct, 1), 1);
    ct_delete(ct);
    report_cap_free(&rep);
}

/* Without tracking destroy still names the pinned ref (no call site). */
Test(track, destroy_without_tracking_names_ref, .timeout = 30)
{
    unsetenv("PINPOOL_TRACK_PINS");
    report_cap_t rep;
    report_cap_init(&rep);
    pp_pool_t *pool = tracked_pool(&rep, 0);
    ct_t *ct = ct_new(1);
    pp_ref_t r = ct_put(pool, ct, 0, 64, 0);
    assert_rc(pp_pin(pool, r, 0, NULL), 0);
    assert_rc(pp_pool_destroy(pool), PP_EBUSY);
    char hex[32];
    ref_hex(r, hex);
    char *dump = report_dump(&rep);
    cr_assert(report_has(&rep, 0, hex, NULL, NULL), "lines:%s", dump);
    free(dump);
    assert_rc(pp_unpin(pool, r), 0);
    test_destroy(pool);
    ct_delete(ct);
    report_cap_free(&rep);
}

/* ---- the environment switch, and no tracking ----------------------------- */

Test(track, env_enables_tracking, .timeout = 30)
{
    cr_assert_eq(setenv("PINPOOL_TRACK_PINS", "1", 1), 0);
    report_cap_t rep;
    report_cap_init(&rep);
    pp_pool_t *pool = tracked_pool(&rep, 0);
    ct_t *ct = ct_new(3);
    leak_t l;
    run_leaker(pool, ct, &l, false);
    assert_rc(l.rc_exit, PP_EBUSY);
    assert_reported(&rep, 0, l.a, l.line_a, l.tid);
    assert_reported(&rep, 0, l.b, l.line_many, l.tid);
    assert_rc(pp_unpin(pool, l.a), 0);
    assert_rc(pp_unpin(pool, l.b), 0);
    test_destroy(pool);
    unsetenv("PINPOOL_TRACK_PINS");
    ct_delete(ct);
    report_cap_free(&rep);
}

Test(track, no_tracking_thread_exit_returns_zero, .timeout = 30)
{
    unsetenv("PINPOOL_TRACK_PINS");
    report_cap_t rep;
    report_cap_init(&rep);
    pp_pool_t *pool = tracked_pool(&rep, 0);
    ct_t *ct = ct_new(3);
    leak_t l;
    run_leaker(pool, ct, &l, false);
    assert_rc(l.rc_exit, 0);
    cr_assert_eq(report_cap_count(&rep), 0);
    /* The leaked pins are still there (untracked), and can be dropped. */
    cr_assert_eq(test_stat(pool, l.a).pins, 1);
    cr_assert_eq(test_stat(pool, l.b).pins, 1);
    assert_rc(pp_unpin(pool, l.a), 0);
    assert_rc(pp_unpin(pool, l.b), 0);
    test_destroy(pool);
    ct_delete(ct);
    report_cap_free(&rep);
}

Test(track, env_other_than_one_does_not_track, .timeout = 30)
{
    cr_assert_eq(setenv("PINPOOL_TRACK_PINS", "0", 1), 0);
    report_cap_t rep;
    report_cap_init(&rep);
    pp_pool_t *pool = tracked_pool(&rep, 0);
    ct_t *ct = ct_new(3);
    leak_t l;
    run_leaker(pool, ct, &l, false);
    assert_rc(l.rc_exit, 0);
    assert_rc(pp_unpin(pool, l.a), 0);
    assert_rc(pp_unpin(pool, l.b), 0);
    test_destroy(pool);
    unsetenv("PINPOOL_TRACK_PINS");
    ct_delete(ct);
    report_cap_free(&rep);
}

/* Tracked pins in bulk: many pins and unpins from several threads leave
 * nothing behind. */
#define TR_THREADS 4
#define TR_ITERS 2000

typedef struct tr_arg {
    pp_pool_t *pool;
    pp_ref_t *refs;
    int k;
    int rc_exit;
} tr_arg_t;

static void *tr_worker(void *arg)
{
    tr_arg_t *a = arg;
    for (int i = 0; i < TR_ITERS; i++) {
        pp_ref_t r = a->refs[(i + a->k) % 8];
        int rc = pp_pin(a->pool, r, 0, NULL);
        TCHECK(rc == 0, "pin: %s", pp_err_name(rc));
        rc = pp_unpin(a->pool, r);
        TCHECK(rc == 0, "unpin: %s", pp_err_name(rc));
    }
    a->rc_exit = pp_thread_exit(a->pool);
    return NULL;
}

Test(track, tracked_pins_balanced_under_threads, .timeout = 60)
{
    report_cap_t rep;
    report_cap_init(&rep);
    pp_pool_t *pool = tracked_pool(&rep, PP_TRACK_PINS);
    ct_t *ct = ct_new(8);
    pp_ref_t refs[8];
    for (int i = 0; i < 8; i++)
        refs[i] = ct_put(pool, ct, (size_t)i, 64, 0);
    tr_arg_t a[TR_THREADS];
    pthread_t th[TR_THREADS];
    for (int k = 0; k < TR_THREADS; k++) {
        a[k] = (tr_arg_t){pool, refs, k, -100};
        test_thread_start(&th[k], tr_worker, &a[k]);
    }
    for (int k = 0; k < TR_THREADS; k++)
        test_thread_join(th[k]);
    TCHECK_NONE();
    for (int k = 0; k < TR_THREADS; k++)
        assert_rc(a[k].rc_exit, 0);
    char *dump = report_dump(&rep);
    cr_assert_eq(report_cap_count(&rep), 0, "lines:%s", dump);
    free(dump);
    test_destroy(pool);
    ct_delete(ct);
    report_cap_free(&rep);
}
