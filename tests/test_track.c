/* test_track.c -- pin-leak tracking and reports, and pp_pins_dump
 * (src/core/track.c). */
#include "helpers.h"
#include "testing/testhooks.h" /* pp__alloc_fail_after */

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

/* ---- pp_pins_dump ----------------------------------------------------------- */

/* What pp_pins_dump wrote, as a string to free; *rc gets its return. */
static char *dump_text(pp_pool_t *pool, int *rc)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    cr_assert_not_null(f);
    *rc = pp_pins_dump(pool, f);
    cr_assert_eq(fclose(f), 0);
    return text;
}

/* The start of line k (from 0) of text, and its length; NULL if none. */
static const char *nth_line(const char *text, size_t k, size_t *len)
{
    for (; k > 0; k--) {
        text = strchr(text, '\n');
        if (text == NULL)
            return NULL;
        text++;
    }
    if (*text == '\0')
        return NULL;
    const char *end = strchr(text, '\n');
    *len = end != NULL ? (size_t)(end - text) : strlen(text);
    return text;
}

/* Line k is prefix, any age, then suffix: "<prefix><ms>.<3 digits> ms<suffix>".
 * Returns the age in microseconds. */
static uint64_t assert_line(const char *text, size_t k, const char *prefix,
                            const char *suffix)
{
    size_t len;
    const char *line = nth_line(text, k, &len);
    cr_assert_not_null(line, "no line %zu in:\n%s", k, text);
    size_t np = strlen(prefix), ns = strlen(suffix);
    cr_assert(len > np + ns && strncmp(line, prefix, np) == 0 &&
                  strncmp(line + len - ns, suffix, ns) == 0,
              "line %zu is not \"%sA ms%s\":\n%s", k, prefix, suffix, text);
    uint64_t ms = 0, frac = 0;
    int used = 0;
    cr_assert_eq(sscanf(line + np, "%" SCNu64 ".%" SCNu64 "%n", &ms, &frac, &used), 2,
                 "line %zu has no age:\n%s", k, text);
    cr_assert(used >= 5 && line[np + (size_t)used - 4] == '.' && (size_t)used + np + ns == len,
              "line %zu: not an age with three decimals:\n%s", k, text);
    return ms * 1000 + frac;
}

/* "pin ref 0x... node N slot S gen G tid T age " of a pin line. */
static void pin_prefix(char *buf, size_t size, pp_ref_t r, int tid)
{
    snprintf(buf, size, "pin ref 0x%016" PRIx64 " node %u slot %" PRIu32 " gen %" PRIu32
             " tid %d age ", r, pp_ref_node(r), pp_ref_slot(r), pp_ref_gen(r), tid);
}

/* "held ref 0x... node N slot S gen G pins P age " of a held line. */
static void held_prefix(char *buf, size_t size, pp_ref_t r, unsigned pins)
{
    snprintf(buf, size, "held ref 0x%016" PRIx64 " node %u slot %" PRIu32 " gen %" PRIu32
             " pins %u age ", r, pp_ref_node(r), pp_ref_slot(r), pp_ref_gen(r), pins);
}

/* " ms at test_track.c:<line>", the end of a pin line with a call site. */
static void at_site(char *buf, size_t size, int line)
{
    snprintf(buf, size, " ms at %s:%d", __FILE__, line);
}

/* Waits until the clock has moved past t: the next pin is strictly
 * younger than one taken before t.  A spin, not a sleep. */
static void clock_past(uint64_t t)
{
    while (now_ns() <= t)
        ;
}

Test(track, dump_without_tracking_is_enotsup_and_writes_nothing, .timeout = 30)
{
    unsetenv("PINPOOL_TRACK_PINS");
    report_cap_t rep;
    report_cap_init(&rep);
    pp_pool_t *pool = tracked_pool(&rep, 0);
    ct_t *ct = ct_new(1);
    pp_ref_t r = ct_put(pool, ct, 0, 64, 0);
    assert_rc(pp_pin(pool, r, 0, NULL), 0);
    int rc;
    char *text = dump_text(pool, &rc);
    assert_rc(rc, PP_ENOTSUP);
    cr_assert_str_empty(text);
    free(text);
    assert_rc(pp_unpin(pool, r), 0);
    test_destroy(pool);
    ct_delete(ct);
    report_cap_free(&rep);
}

Test(track, dump_of_no_pins_is_the_summary_alone, .timeout = 30)
{
    report_cap_t rep;
    report_cap_init(&rep);
    pp_pool_t *pool = tracked_pool(&rep, PP_TRACK_PINS);
    int rc;
    char *text = dump_text(pool, &rc);
    assert_rc(rc, 0);
    cr_assert_str_eq(text, "pinpool: 0 pins on 0 entries\n");
    free(text);
    test_destroy(pool);
    report_cap_free(&rep);
}

Test(track, dump_null_arguments, .timeout = 30)
{
    report_cap_t rep;
    report_cap_init(&rep);
    pp_pool_t *pool = tracked_pool(&rep, PP_TRACK_PINS);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    cr_assert_not_null(f);
    assert_rc(pp_pins_dump(NULL, f), PP_EINVAL);
    assert_rc(pp_pins_dump(pool, NULL), PP_EINVAL);
    assert_rc(pp_pins_dump(NULL, NULL), PP_EINVAL);
    cr_assert_eq(fclose(f), 0);
    cr_assert_str_empty(text);
    free(text);
    test_destroy(pool);
    report_cap_free(&rep);
}

/* A thread of its own pins r at a line of its own, and ends. */
typedef struct dump_pinner {
    pp_pool_t *pool;
    pp_ref_t r;
    int line, tid;
    uint64_t after;                   /* the clock after its pin */
} dump_pinner_t;

static void *dump_pin_thread(void *arg)
{
    dump_pinner_t *d = arg;
    d->tid = (int)gettid();
    int rc;
    d->line = __LINE__; rc = pp_pin(d->pool, d->r, 0, NULL);
    TCHECK(rc == 0, "pin: %s", pp_err_name(rc));
    d->after = now_ns();
    return NULL;
}

Test(track, dump_lists_pins_of_two_threads_oldest_first, .timeout = 30)
{
    report_cap_t rep;
    report_cap_init(&rep);
    pp_pool_t *pool = tracked_pool(&rep, PP_TRACK_PINS);
    ct_t *ct = ct_new(3);
    pp_ref_t a = ct_put(pool, ct, 0, 64, 0);
    pp_ref_t b = ct_put(pool, ct, 1, 64, 0);
    pp_ref_t c = ct_put(pool, ct, 2, 64, 0);
    int me = (int)gettid();

    int line_a = __LINE__; assert_rc(pp_pin(pool, a, 0, NULL), 0);
    uint64_t t0 = now_ns();
    clock_past(t0);
    dump_pinner_t d = {.pool = pool, .r = b};
    pthread_t t;
    test_thread_start(&t, dump_pin_thread, &d);
    test_thread_join(t);
    TCHECK_NONE();
    clock_past(d.after);
    assert_rc((pp_pin)(pool, c, 0, NULL), 0);       /* no call site */
    /* The oldest pin is at least 1 ms old, by the test's own clock. */
    while (now_ns() - t0 < 1000000u)
        ;

    int rc;
    char *text = dump_text(pool, &rc);
    assert_rc(rc, 0);
    char pre[160], post[160];
    size_t len;
    const char *first = nth_line(text, 0, &len);
    cr_assert(first != NULL && strncmp(first, "pinpool: 3 pins on 3 entries\n", len + 1) == 0,
              "summary:\n%s", text);
    pin_prefix(pre, sizeof pre, a, me);
    at_site(post, sizeof post, line_a);
    uint64_t age_a = assert_line(text, 1, pre, post);
    cr_assert_geq(age_a, 1000, "age %" PRIu64 " us < 1 ms:\n%s", age_a, text);
    pin_prefix(pre, sizeof pre, b, d.tid);
    at_site(post, sizeof post, d.line);
    cr_assert_neq(d.tid, me);
    assert_line(text, 2, pre, post);
    pin_prefix(pre, sizeof pre, c, me);
    assert_line(text, 3, pre, " ms at (pp_pin without call site)");
    size_t lines = 0;
    while (nth_line(text, lines, &len) != NULL)
        lines++;
    cr_assert_eq(lines, 8, "lines:\n%s", text);       /* and 4 of the held list */
    free(text);

    /* The thread's end reported its pin; any thread may drop it. */
    assert_rc(pp_unpin(pool, a), 0);
    assert_rc(pp_unpin(pool, b), 0);
    assert_rc(pp_unpin(pool, c), 0);
    test_destroy(pool);
    ct_delete(ct);
    report_cap_free(&rep);
}

Test(track, dump_groups_pins_of_an_entry_by_their_oldest, .timeout = 30)
{
    report_cap_t rep;
    report_cap_init(&rep);
    pp_pool_t *pool = tracked_pool(&rep, PP_TRACK_PINS);
    ct_t *ct = ct_new(3);
    pp_ref_t a = ct_put(pool, ct, 0, 64, 0);
    pp_ref_t b = ct_put(pool, ct, 1, 64, 0);
    pp_ref_t c = ct_put(pool, ct, 2, 64, 0);
    /* b first, then a twice, b again, c: b's oldest pin is the oldest. */
    pp_ref_t order[5] = {b, a, a, b, c};
    int lines[5];
    uint64_t t0 = 0;
    for (int i = 0; i < 5; i++) {
        lines[i] = __LINE__; assert_rc(pp_pin(pool, order[i], 0, NULL), 0);
        uint64_t t = now_ns();
        if (i == 0)
            t0 = t;
        clock_past(t);
    }
    while (now_ns() - t0 < 1000000u)
        ;

    int rc;
    char *text = dump_text(pool, &rc);
    assert_rc(rc, 0);
    cr_assert(strncmp(text, "pinpool: 5 pins on 3 entries\n", 29) == 0, "summary:\n%s", text);
    char pre[160], post[160];
    int me = (int)gettid();
    for (size_t i = 0; i < 5; i++) {
        pin_prefix(pre, sizeof pre, order[i], me);
        at_site(post, sizeof post, lines[i]);
        assert_line(text, 1 + i, pre, post);
    }
    size_t len;
    const char *head = nth_line(text, 6, &len);
    cr_assert(head != NULL && strncmp(head, "longest held, oldest pin first:\n", len + 1) == 0,
              "no held list:\n%s", text);
    held_prefix(pre, sizeof pre, b, 2);
    uint64_t age_b = assert_line(text, 7, pre, " ms");
    cr_assert_geq(age_b, 1000, "age %" PRIu64 " us < 1 ms:\n%s", age_b, text);
    held_prefix(pre, sizeof pre, a, 2);
    uint64_t age_a = assert_line(text, 8, pre, " ms");
    held_prefix(pre, sizeof pre, c, 1);
    uint64_t age_c = assert_line(text, 9, pre, " ms");
    cr_assert(age_b >= age_a && age_a >= age_c, "ages not descending:\n%s", text);
    cr_assert_null(nth_line(text, 10, &len), "more lines:\n%s", text);
    free(text);

    for (int i = 0; i < 5; i++)
        assert_rc(pp_unpin(pool, order[i]), 0);
    test_destroy(pool);
    ct_delete(ct);
    report_cap_free(&rep);
}

Test(track, dump_lists_ten_held_entries_and_counts_the_rest, .timeout = 30)
{
    report_cap_t rep;
    report_cap_init(&rep);
    pp_pool_t *pool = tracked_pool(&rep, PP_TRACK_PINS);
    enum { N = 13 };
    ct_t *ct = ct_new(N);
    pp_ref_t r[N];
    for (int i = 0; i < N; i++) {
        r[i] = ct_put(pool, ct, (size_t)i, 64, 0);
        assert_rc(pp_pin(pool, r[i], 0, NULL), 0);
        clock_past(now_ns());
    }
    int rc;
    char *text = dump_text(pool, &rc);
    assert_rc(rc, 0);
    char pre[160];
    /* The summary, 13 pin lines, the head, 10 held lines, the rest. */
    for (size_t i = 0; i < 10; i++) {
        held_prefix(pre, sizeof pre, r[i], 1);
        assert_line(text, 15 + i, pre, " ms");
    }
    size_t len;
    const char *rest = nth_line(text, 25, &len);
    cr_assert(rest != NULL && strcmp(rest, "and 3 more entries\n") == 0, "end:\n%s", text);
    free(text);
    for (int i = 0; i < N; i++)
        assert_rc(pp_unpin(pool, r[i]), 0);
    test_destroy(pool);
    ct_delete(ct);
    report_cap_free(&rep);
}

Test(track, dump_forgets_an_unpinned_pin, .timeout = 30)
{
    report_cap_t rep;
    report_cap_init(&rep);
    pp_pool_t *pool = tracked_pool(&rep, PP_TRACK_PINS);
    ct_t *ct = ct_new(2);
    pp_ref_t a = ct_put(pool, ct, 0, 64, 0);
    pp_ref_t b = ct_put(pool, ct, 1, 64, 0);
    assert_rc(pp_pin(pool, a, 0, NULL), 0);
    int line_b = __LINE__; assert_rc(pp_pin(pool, b, 0, NULL), 0);
    int rc;
    char *text = dump_text(pool, &rc);
    assert_rc(rc, 0);
    char hex[32];
    ref_hex(a, hex);
    cr_assert(strstr(text, hex) != NULL, "a is not listed:\n%s", text);
    free(text);

    assert_rc(pp_unpin(pool, a), 0);
    text = dump_text(pool, &rc);
    assert_rc(rc, 0);
    cr_assert(strstr(text, hex) == NULL, "a is still listed:\n%s", text);
    cr_assert(strncmp(text, "pinpool: 1 pins on 1 entries\n", 29) == 0, "summary:\n%s", text);
    char pre[160], post[160];
    pin_prefix(pre, sizeof pre, b, (int)gettid());
    at_site(post, sizeof post, line_b);
    assert_line(text, 1, pre, post);
    free(text);

    assert_rc(pp_unpin(pool, b), 0);
    text = dump_text(pool, &rc);
    assert_rc(rc, 0);
    cr_assert_str_eq(text, "pinpool: 0 pins on 0 entries\n");
    free(text);
    test_destroy(pool);
    ct_delete(ct);
    report_cap_free(&rep);
}

Test(track, dump_to_a_failing_stream_is_eio, .timeout = 30)
{
    report_cap_t rep;
    report_cap_init(&rep);
    pp_pool_t *pool = tracked_pool(&rep, PP_TRACK_PINS);
    ct_t *ct = ct_new(1);
    pp_ref_t r = ct_put(pool, ct, 0, 64, 0);
    assert_rc(pp_pin(pool, r, 0, NULL), 0);
    /* Unbuffered: the first write fails.  Buffered: the flush does. */
    for (int buffered = 0; buffered < 2; buffered++) {
        FILE *f = fopen("/dev/full", "w");
        cr_assert_not_null(f, "/dev/full: %s", strerror(errno));
        if (!buffered)
            cr_assert_eq(setvbuf(f, NULL, _IONBF, 0), 0);
        assert_rc(pp_pins_dump(pool, f), PP_EIO);
        fclose(f);
    }
    assert_rc(pp_unpin(pool, r), 0);
    test_destroy(pool);
    ct_delete(ct);
    report_cap_free(&rep);
}

Test(track, dump_without_memory_is_enomem_and_writes_nothing, .timeout = 30)
{
    report_cap_t rep;
    report_cap_init(&rep);
    pp_pool_t *pool = tracked_pool(&rep, PP_TRACK_PINS);
    ct_t *ct = ct_new(1);
    pp_ref_t r = ct_put(pool, ct, 0, 64, 0);
    assert_rc(pp_pin(pool, r, 0, NULL), 0);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    cr_assert_not_null(f);
    pp__alloc_fail_after(0);
    int rc = pp_pins_dump(pool, f);
    pp__alloc_fail_after(-1);
    assert_rc(rc, PP_ENOMEM);
    cr_assert_eq(fclose(f), 0);
    cr_assert_str_empty(text);
    free(text);
    assert_rc(pp_unpin(pool, r), 0);
    test_destroy(pool);
    ct_delete(ct);
    report_cap_free(&rep);
}
