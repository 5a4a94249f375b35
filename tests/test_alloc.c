/*
 * test_alloc.c -- pinpool's own allocations (src/os/alloc.c): every one that
 * fails gives a clean PP_ENOMEM, with no partial effect and no leak (the
 * ASan build's LeakSanitizer checks each test process).
 *
 * pp__alloc_fail_after(k) makes the allocation k allocations from now fail
 * once.  Each test sweeps k from 0 until the call succeeds, so every
 * allocation the call makes is failed once.
 */
#include "helpers.h"
#include "testing/testhooks.h" /* pp__alloc_fail_after, pp__alloc_count */

#define SWEEP_MAX 64   /* far more allocations than any of these calls makes */

Test(alloc, pool_create_survives_each_failure, .timeout = 60)
{
    int k;
    for (k = 0; k < SWEEP_MAX; k++) {
        pp__alloc_fail_after(k);
        pp_pool_t *pool = (pp_pool_t *)(uintptr_t)1;   /* must be cleared */
        int rc = test_pool_create(NULL, &pool);
        pp__alloc_fail_after(-1);
        if (rc == 0) {
            test_destroy(pool);
            break;
        }
        assert_rc(rc, PP_ENOMEM, "allocation %d of pp_pool_create failed", k);
        cr_assert_null(pool, "a failed create leaves *out NULL");
    }
    /* The pool, its nodes' memory, tables, reclaimer records...: several. */
    cr_assert_geq(k, 4, "only %d allocation(s) in pp_pool_create?", k);
    cr_assert_lt(k, SWEEP_MAX);
}

/* ---- a thread's one-time registration ------------------------------------- */

typedef struct reg_try {
    pp_pool_t *pool;
    pp_ref_t ref;
    int fail_at;
    int rc_pin, rc_again;
} reg_try_t;

static void *first_call(void *arg)
{
    reg_try_t *r = arg;
    void *d;
    pp__alloc_fail_after(r->fail_at);
    r->rc_pin = pp_pin(r->pool, r->ref, 0, &d);
    pp__alloc_fail_after(-1);
    /* Unpins the pin if it was taken; finds none if it was not. */
    r->rc_again = pp_unpin(r->pool, r->ref);
    return NULL;
}

Test(alloc, thread_registration_failure_is_clean, .timeout = 60)
{
    pp_pool_t *pool = test_pool(NULL);
    ct_t *ct = ct_new(1);
    pp_ref_t ref = ct_put(pool, ct, 0, 64, 0);
    int k;
    for (k = 0; k < SWEEP_MAX; k++) {
        reg_try_t r = { .pool = pool, .ref = ref, .fail_at = k };
        pthread_t th;
        cr_assert_eq(pthread_create(&th, NULL, first_call, &r), 0);
        cr_assert_eq(pthread_join(th, NULL), 0);
        if (r.rc_pin == 0) {
            assert_rc(r.rc_again, 0);
            break;
        }
        assert_rc(r.rc_pin, PP_ENOMEM, "allocation %d of a registration failed", k);
        /* The pin did not happen: its unpin (which registered the thread
         * for real) finds no pin. */
        assert_rc(r.rc_again, PP_ENOTPINNED);
        pp_entry_info_t info;
        assert_rc(pp_stat(pool, ref, &info), 0);
        cr_assert_eq(info.pins, 0);
    }
    cr_assert_geq(k, 1, "registration made no allocation?");
    cr_assert_lt(k, SWEEP_MAX);
    pp_stats_t s;
    test_stats(pool, &s);
    cr_assert_eq(s.total.pins, 1);
    cr_assert_eq(s.total.unpins, 1);
    assert_rc(pp_release(pool, ref), 0);
    test_destroy(pool);
    cr_assert_eq(ct_frees(ct, 0), 1);
    ct_delete(ct);
}

/* ---- table growth in pp_put ----------------------------------------------- */

/* Puts n entries of 16 malloc'd bytes on node 0, so that the table's first
 * n slots are taken; refs: room for n. */
static void fill_node0(pp_pool_t *pool, pp_ref_t *refs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        void *buf = malloc(16);
        cr_assert_not_null(buf);
        assert_rc(pp_put(pool, buf, 16, NULL, PP_ON_NODE(0), &refs[i]), 0);
    }
}

Test(alloc, put_needing_a_segment_fails_cleanly, .timeout = 60)
{
    pp_options_t o = PP_OPTIONS_INIT;
    o.mem_limit = 1u << 30;                 /* the cap is released on failure too */
    pp_pool_t *pool = test_pool(&o);
    const size_t SEG = pp__table_seg_slots();
    pp_ref_t *refs = calloc(SEG + 1, sizeof *refs);
    cr_assert_not_null(refs);
    fill_node0(pool, refs, SEG);             /* fills segment 0 of node 0 */
    pp_stats_t before;
    test_stats(pool, &before);

    void *buf = malloc(16);
    cr_assert_not_null(buf);
    pp_ref_t ref = PP_REF_NONE;
    pp__alloc_fail_after(0);                 /* the segment's allocation */
    int rc = pp_put(pool, buf, 16, NULL, PP_ON_NODE(0), &ref);
    pp__alloc_fail_after(-1);
    assert_rc(rc, PP_ENOMEM);
    cr_assert_eq(ref, PP_REF_NONE, "a failed put writes no ref");
    pp_stats_t after;
    test_stats(pool, &after);
    cr_assert_eq(after.total.puts, before.total.puts);
    cr_assert_eq(after.total.resident_bytes, before.total.resident_bytes);

    /* The caller still owns buf; the pool works once memory is back. */
    assert_rc(pp_put(pool, buf, 16, NULL, PP_ON_NODE(0), &refs[SEG]), 0);
    void *d;
    assert_rc(pp_pin(pool, refs[SEG], 0, &d), 0);
    cr_assert_eq(d, buf);
    assert_rc(pp_unpin(pool, refs[SEG]), 0);
    for (size_t i = 0; i <= SEG; i++)
        assert_rc(pp_release(pool, refs[i]), 0);
    test_drain(pool);
    test_stats(pool, &after);
    cr_assert_eq(after.total.frees, SEG + 1);
    cr_assert_eq(after.total.resident_bytes, 0);
    free(refs);
    test_destroy(pool);
}

/* The fifth segment is the first of a new page of hot records: its commit
 * is two (the page, then the segment's cold records).  Each failing leaves
 * nothing half done: the next put commits what is missing, and its entry
 * pins and frees as any other. */
Test(alloc, put_committing_a_hot_page_survives_each_failure, .timeout = 120)
{
    pp_pool_t *pool = test_pool(NULL);
    const size_t n = 4 * pp__table_seg_slots();   /* segments 0 to 3 */
    pp_ref_t *refs = calloc(n + 1, sizeof *refs);
    cr_assert_not_null(refs);
    fill_node0(pool, refs, n);
    void *buf = malloc(16);
    cr_assert_not_null(buf);
    int k;
    for (k = 0; k < SWEEP_MAX; k++) {
        pp__alloc_fail_after(k);
        refs[n] = PP_REF_NONE;
        int rc = pp_put(pool, buf, 16, NULL, PP_ON_NODE(0), &refs[n]);
        pp__alloc_fail_after(-1);
        if (rc == 0)
            break;
        assert_rc(rc, PP_ENOMEM, "allocation %d of the put failed", k);
        cr_assert_eq(refs[n], PP_REF_NONE, "a failed put writes no ref");
    }
    cr_assert_eq(k, 2, "the hot page and the cold records: %d allocations", k);
    void *d;
    assert_rc(pp_pin(pool, refs[n], 0, &d), 0);
    cr_assert_eq(d, buf);
    assert_rc(pp_unpin(pool, refs[n]), 0);
    for (size_t i = 0; i <= n; i++)
        assert_rc(pp_release(pool, refs[i]), 0);
    test_drain(pool);
    pp_stats_t after;
    test_stats(pool, &after);
    cr_assert_eq(after.total.frees, n + 1);
    free(refs);
    test_destroy(pool);
}

/* ---- pin tracking (a debugging mode that allocates) ----------------------- */

Test(alloc, tracked_pin_failure_undoes_the_pin, .timeout = 60)
{
    pp_options_t o = PP_OPTIONS_INIT;
    o.flags = PP_TRACK_PINS;
    pp_pool_t *pool = test_pool(&o);
    ct_t *ct = ct_new(2);
    pp_ref_t refs[2] = { ct_put(pool, ct, 0, 64, 0), ct_put(pool, ct, 1, 64, 0) };
    void *d, *dv[2];
    assert_rc(pp_pin(pool, refs[0], 0, &d), 0);    /* registers, grows the record array */
    assert_rc(pp_unpin(pool, refs[0]), 0);

    pp_stats_t before, after;
    test_stats(pool, &before);
    int failed = 0;
    /* The record array grows by doubling: pin until a growth is failed. */
    pp_ref_t held[200];
    size_t nheld = 0;
    for (; nheld < 200 && !failed; nheld++) {
        pp__alloc_fail_after(0);
        int rc = pp_pin(pool, refs[0], 0, &d);
        pp__alloc_fail_after(-1);
        if (rc != 0) {
            assert_rc(rc, PP_ENOMEM);
            failed = 1;
            break;
        }
        held[nheld] = refs[0];
    }
    cr_assert(failed, "no pin needed to grow the tracking records");
    pp_entry_info_t info;
    assert_rc(pp_stat(pool, refs[0], &info), 0);
    cr_assert_eq(info.pins, nheld, "the failed pin was undone");
    /* pp_pin_many: all or none when tracking cannot record. */
    int rc = 0;
    for (int k = 0; k < SWEEP_MAX; k++) {
        pp__alloc_fail_after(k);
        rc = pp_pin_many(pool, refs, 2, PP_PIN_WRITE, dv);
        pp__alloc_fail_after(-1);
        if (rc == 0)
            break;
        assert_rc(rc, PP_ENOMEM);
        assert_rc(pp_stat(pool, refs[1], &info), 0);
        cr_assert_eq(info.pins, 0);
        cr_assert_eq(info.state & PP_STATE_DIRTY, 0, "a failed pin_many marks nothing dirty");
    }
    assert_rc(rc, 0);
    assert_rc(pp_unpin_many(pool, refs, 2, NULL), 0);
    assert_rc(pp_unpin_many(pool, held, nheld, NULL), 0);
    test_stats(pool, &after);
    cr_assert_eq(after.total.pins - before.total.pins, nheld + 2);
    cr_assert_eq(after.total.unpins - before.total.unpins, nheld + 2);
    for (size_t i = 0; i < 2; i++)
        assert_rc(pp_release(pool, refs[i]), 0);
    test_destroy(pool);
    ct_delete(ct);
}
