/* test_inline.c -- the inline fast path of pp_pin and pp_unpin
 * (include/pinpool_inline.h): every pp_pin and pp_unpin below is inlined,
 * and each test holds it to what the library's calls promise. */
#include "helpers.h"

#include <pinpool_inline.h>

#include "testing/testhooks.h" /* pp__debug_hot, pp__test_point_hook */

static uint32_t pins_of(pp_pool_t *pool, pp_ref_t r)
{
    return test_stat(pool, r).pins;
}

/* The pool's counts of pins and unpins, all nodes, all threads. */
static void assert_counts(pp_pool_t *pool, uint64_t pins, uint64_t unpins)
{
    pp_stats_t s;
    test_stats(pool, &s);
    cr_assert_eq(s.total.pins, pins);
    cr_assert_eq(s.total.unpins, unpins);
}

/* Entry id of ct, of size bytes, put; *buf: its data. */
static pp_ref_t put_kept(pp_pool_t *pool, ct_t *ct, size_t id, size_t size, void **buf)
{
    *buf = ct_buf(ct, id, size);
    pp_ref_t r = PP_REF_NONE;
    assert_rc(pp_put(pool, *buf, size, &ct->type, 0, &r), 0);
    return r;
}

Test(inline, pins_and_unpins_count_as_the_library_s, .timeout = 30)
{
    pp_pool_t *pool = test_pool(NULL);
    ct_t *ct = ct_new(2);
    void *abuf, *bbuf;
    pp_ref_t a = put_kept(pool, ct, 0, 100, &abuf), b = put_kept(pool, ct, 1, 300, &bbuf);
    void *p = NULL;
    assert_rc(pp_pin(pool, a, 0, &p), 0);
    cr_assert_eq(p, abuf);
    assert_rc(pp_pin(pool, a, 0, NULL), 0);          /* data may be NULL */
    assert_rc(pp_pin(pool, b, PP_PIN_NOWAIT, &p), 0);
    cr_assert_eq(p, bbuf);
    cr_assert(ct_check(p, 1, 300));
    cr_assert_eq(pins_of(pool, a), 2);
    cr_assert_eq(pins_of(pool, b), 1);
    /* The inlined calls and the library's, mixed, on the same counts. */
    assert_rc((pp_pin)(pool, b, 0, NULL), 0);
    assert_rc(pp_unpin(pool, b), 0);
    assert_rc((pp_unpin)(pool, b), 0);
    assert_rc(pp_unpin(pool, a), 0);
    assert_rc(pp_unpin(pool, a), 0);
    assert_rc(pp_unpin(pool, a), PP_ENOTPINNED);
    cr_assert_eq(pins_of(pool, a), 0);
    assert_counts(pool, 4, 4);
    test_destroy(pool);
    cr_assert_eq(ct_frees(ct, 0), 1);
    cr_assert_eq(ct_frees(ct, 1), 1);
    ct_delete(ct);
}

Test(inline, misuse_gets_the_library_s_errors, .timeout = 30)
{
    pp_pool_t *pool = test_pool(NULL);
    ct_t *ct = ct_new(1);
    pp_ref_t r = ct_put(pool, ct, 0, 64, 0);
    void *p = &p;
    assert_rc(pp_pin(NULL, r, 0, &p), PP_EINVAL);
    assert_rc(pp_unpin(NULL, r), PP_EINVAL);
    assert_rc(pp_pin(pool, r, 0x40000000u, &p), PP_EINVAL);
    cr_assert_eq(p, &p, "a failed pin leaves *data alone");
    assert_rc(pp_pin(pool, PP_REF_NONE, 0, &p), PP_ESTALE);
    assert_rc(pp_unpin(pool, PP_REF_NONE), PP_ESTALE);
    /* Garbage: the last node, a slot far past the table's commit, and a
     * live slot under a generation it never had. */
    pp_ref_t far = ((pp_ref_t)63 << 58) | ((pp_ref_t)0x3FFFFFF << 32) | 7u;
    assert_rc(pp_pin(pool, far, 0, &p), PP_ESTALE);
    assert_rc(pp_unpin(pool, far), PP_ESTALE);
    pp_ref_t wrong_gen = (r & ~(pp_ref_t)0xFFFFFFFFu) | (uint32_t)(pp_ref_gen(r) + 1u);
    assert_rc(pp_pin(pool, wrong_gen, 0, &p), PP_ESTALE);
    assert_rc(pp_unpin(pool, wrong_gen), PP_ESTALE);
    assert_rc(pp_unpin(pool, r), PP_ENOTPINNED);
    /* A stale ref, once its entry is freed. */
    assert_rc(pp_release(pool, r), 0);
    test_drain(pool);
    cr_assert_eq(ct_frees(ct, 0), 1);
    assert_rc(pp_pin(pool, r, 0, &p), PP_ESTALE);
    assert_rc(pp_unpin(pool, r), PP_ESTALE);
    cr_assert_eq(p, &p);
    assert_counts(pool, 0, 0);                       /* no failed call counts */
    test_destroy(pool);
    ct_delete(ct);
}

Test(inline, write_pin_marks_the_entry_dirty, .timeout = 30)
{
    pp_pool_t *pool = test_pool(NULL);
    ct_t *ct = ct_new(1);
    pp_ref_t r = ct_put(pool, ct, 0, 64, 0);
    cr_assert_eq(test_stat(pool, r).state & PP_STATE_DIRTY, 0);
    assert_rc(pp_pin(pool, r, PP_PIN_WRITE, NULL), 0);
    cr_assert_neq(test_stat(pool, r).state & PP_STATE_DIRTY, 0);
    assert_rc(pp_unpin(pool, r), 0);
    test_destroy(pool);
    ct_delete(ct);
}

/* The final unpin of a dead entry queues it, as the library's does. */
Test(inline, final_unpin_of_a_dead_entry_frees_it, .timeout = 30)
{
    pp_pool_t *pool = test_pool(NULL);
    ct_t *ct = ct_new(1);
    pp_ref_t r = ct_put(pool, ct, 0, 64, 0);
    assert_rc(pp_pin(pool, r, 0, NULL), 0);
    assert_rc(pp_pin(pool, r, 0, NULL), 0);
    assert_rc(pp_release(pool, r), 0);
    assert_rc(pp_pin(pool, r, 0, NULL), PP_ESTALE);   /* dead: no new pin */
    assert_rc(pp_unpin(pool, r), 0);
    test_drain(pool);
    cr_assert_eq(ct_frees(ct, 0), 0, "freed while still pinned");
    assert_rc(pp_unpin(pool, r), 0);
    test_drain(pool);
    cr_assert_eq(ct_frees(ct, 0), 1);
    assert_rc(pp_unpin(pool, r), PP_ESTALE);
    test_destroy(pool);
    ct_delete(ct);
}

static void *pin_on_new_thread(void *arg)
{
    void **a = arg;
    pp_pool_t *pool = a[0];
    pp_ref_t r = *(pp_ref_t *)a[1];
    void *p = NULL;
    intptr_t ok = pp_pin(pool, r, 0, &p) == 0 && p == a[2] && pp_unpin(pool, r) == 0 &&
                  pp_pin(pool, r, 0, NULL) == 0 && pp_unpin(pool, r) == 0;
    return (void *)ok;
}

/* A thread's first call on a pool registers it (the full way); its next
 * ones are inline; both are counted. */
Test(inline, first_call_of_a_thread_registers_it, .timeout = 30)
{
    pp_pool_t *pool = test_pool(NULL);
    ct_t *ct = ct_new(1);
    void *buf;
    pp_ref_t r = put_kept(pool, ct, 0, 64, &buf);
    void *arg[3] = { pool, &r, buf };
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, pin_on_new_thread, arg), 0);
    void *ok = NULL;
    cr_assert_eq(pthread_join(th, &ok), 0);
    cr_assert(ok != NULL, "the new thread's pins failed");
    assert_counts(pool, 2, 2);
    test_destroy(pool);
    ct_delete(ct);
}

/* With PP_TRACK_PINS every call goes the full way: the pin records the
 * inlined call's own site. */
Test(inline, tracked_pool_records_the_inlined_call_site, .timeout = 30)
{
    pp_options_t o = PP_OPTIONS_INIT;
    o.flags = PP_TRACK_PINS;
    pp_pool_t *pool = test_pool(&o);
    ct_t *ct = ct_new(1);
    pp_ref_t r = ct_put(pool, ct, 0, 64, 0);
    int line = __LINE__ + 1;
    assert_rc(pp_pin(pool, r, 0, NULL), 0);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    cr_assert_not_null(f);
    assert_rc(pp_pins_dump(pool, f), 0);
    cr_assert_eq(fclose(f), 0);
    char site[64];
    snprintf(site, sizeof site, "test_inline.c:%d", line);
    cr_assert_not_null(strstr(text, site), "no %s in:\n%s", site, text);
    free(text);
    assert_rc(pp_unpin(pool, r), 0);
    test_destroy(pool);
    ct_delete(ct);
}

/* Counts what the fast paths leave to the library. */
static void count_miss(enum pp__test_point where, void *arg, void *ctx)
{
    (void)arg;
    if (where == PP__TP_FAST_MISS)
        (*(unsigned *)ctx)++;
}

/* A HOT entry's pins are on its shards.  Once the thread has pinned it
 * through the library, the inlined read pins and unpins take the thread's
 * shard themselves, and the count stays exact; a write pin, an unpin too
 * many and a stale ref go to the library. */
Test(inline, hot_entry_pins_on_the_thread_s_shard, .timeout = 30)
{
    pp_pool_t *pool = test_pool(NULL);
    ct_t *ct = ct_new(1);
    void *buf;
    pp_ref_t r = put_kept(pool, ct, 0, 64, &buf);
    pp_ref_t wrong_gen = (r & ~(pp_ref_t)0xFFFFFFFFu) | (uint32_t)(pp_ref_gen(r) + 1u);
    cr_assert_eq(pp__debug_hot(pool, r, 1), 1);
    unsigned misses = 0;
    pp__test_point_hook(count_miss, &misses);
    void *p = NULL;
    for (uint32_t i = 1; i <= 3; i++) {
        assert_rc(pp_pin(pool, r, 0, &p), 0);
        cr_assert_eq(p, buf);
        cr_assert_eq(pins_of(pool, r), i);
        cr_assert_eq(misses, 1, "pin %u: only the first goes to the library", i);
    }
    cr_assert_eq(pp__debug_hot(pool, r, -1), 1, "still HOT");
    /* The shard the fast path pins on is the promotion's: a ref of
     * another generation is refused, whatever the thread's cache holds. */
    p = &p;
    assert_rc(pp_pin(pool, wrong_gen, 0, &p), PP_ESTALE);
    assert_rc(pp_unpin(pool, wrong_gen), PP_ESTALE);
    cr_assert_eq(p, &p);
    cr_assert_eq(misses, 3);
    for (uint32_t i = 3; i-- > 0;) {
        assert_rc(pp_unpin(pool, r), 0);
        cr_assert_eq(pins_of(pool, r), i);
    }
    cr_assert_eq(misses, 3, "the unpins stay on the shard");
    assert_rc(pp_unpin(pool, r), PP_ENOTPINNED);   /* the exact check is the word's */
    cr_assert_eq(pp__debug_hot(pool, r, -1), 0, "demoted to decide it");
    cr_assert_eq(misses, 4);
    /* A write pin demotes a HOT entry, and is then the word's. */
    cr_assert_eq(pp__debug_hot(pool, r, 1), 1);
    assert_rc(pp_pin(pool, r, PP_PIN_WRITE, NULL), 0);
    cr_assert_eq(pp__debug_hot(pool, r, -1), 0);
    cr_assert_neq(test_stat(pool, r).state & PP_STATE_DIRTY, 0);
    assert_rc(pp_unpin(pool, r), 0);
    pp__test_point_hook(NULL, NULL);
    cr_assert_eq(pins_of(pool, r), 0);
    assert_counts(pool, 4, 4);
    test_destroy(pool);
    ct_delete(ct);
}

/* A demotion ends the promotion the thread's HOT cache holds.  The next
 * promotion of the entry, in the same slot, may show the very same pins
 * word; its counters carry a new tag, so the cached step fails and the
 * library pins (and fills the cache again): a pin is never counted on the
 * counters of a promotion that is over. */
Test(inline, hot_cache_of_an_ended_promotion_is_not_used, .timeout = 30)
{
    pp_pool_t *pool = test_pool(NULL);
    ct_t *ct = ct_new(1);
    void *buf;
    pp_ref_t r = put_kept(pool, ct, 0, 64, &buf);
    cr_assert_eq(pp__debug_hot(pool, r, 1), 1);
    unsigned misses = 0;
    pp__test_point_hook(count_miss, &misses);
    assert_rc(pp_pin(pool, r, 0, NULL), 0);            /* the library: fills the cache */
    assert_rc(pp_pin(pool, r, 0, NULL), 0);            /* the cached step */
    cr_assert_eq(misses, 1);
    cr_assert_eq(pp__debug_hot(pool, r, 0), 0, "demoted, both pins in the word");
    cr_assert_eq(pins_of(pool, r), 2);
    cr_assert_eq(pp__debug_hot(pool, r, 1), 1, "promoted again, the same slot");
    void *p = NULL;
    assert_rc(pp_pin(pool, r, 0, &p), 0);
    cr_assert_eq(p, buf);
    cr_assert_eq(misses, 2, "the old promotion's cache must not pin");
    cr_assert_eq(pins_of(pool, r), 3);
    assert_rc(pp_pin(pool, r, 0, NULL), 0);            /* cached again: the new promotion */
    cr_assert_eq(misses, 2);
    for (uint32_t i = 4; i-- > 0;)
        assert_rc(pp_unpin(pool, r), 0);
    pp__test_point_hook(NULL, NULL);
    cr_assert_eq(pp__debug_hot(pool, r, 0), 0);
    cr_assert_eq(pins_of(pool, r), 0);
    assert_counts(pool, 4, 4);
    assert_rc(pp_release(pool, r), 0);
    test_drain(pool);
    cr_assert_eq(ct_frees(ct, 0), 1, "freed once, with no pin left on any counter");
    test_destroy(pool);
    ct_delete(ct);
}

/* pp_pool_create under this header passes its layout version: a library
 * of another refuses the pool, with a report line. */
Test(inline, another_layout_version_is_refused, .timeout = 30)
{
    report_cap_t rc;
    report_cap_init(&rc);
    pp_options_t o = PP_OPTIONS_INIT;
    report_cap_attach(&rc, &o);
    pp_pool_t *pool = (pp_pool_t *)&rc;
    assert_rc(pp_pool_create_inline(&o, &pool, PP_INLINE_ABI + 1), PP_ENOTSUP);
    cr_assert_null(pool);
    cr_assert(report_has(&rc, 0, "pinpool_inline.h", "fast-path layout", "rebuild"));
    assert_rc(pp_pool_create_inline(NULL, NULL, PP_INLINE_ABI + 1), PP_ENOTSUP);
    /* The macro passes this header's version, which the library has. */
    assert_rc(pp_pool_create(&o, &pool), 0);
    assert_rc(pp_pool_destroy(pool), 0);
    report_cap_free(&rc);
}

/* A pool whose layout version is not the caller's (a pool made by another
 * library in the process): every inlined call goes to the library, which
 * serves it. */
Test(inline, pool_of_another_layout_is_served_by_the_library, .timeout = 30)
{
    pp_pool_t *pool = test_pool(NULL);
    ct_t *ct = ct_new(1);
    void *buf;
    pp_ref_t r = put_kept(pool, ct, 0, 64, &buf);
    pp__inline_pool_t *f = (pp__inline_pool_t *)(void *)pool;
    uint32_t abi = f->abi;
    f->abi = PP_INLINE_ABI + 1;        /* as another version would have it */
    pp__inline_thread_t *t;
    pp__inline_entry_t *e;
    cr_assert(!pp__inline_find(pool, r, &t, &e), "the fast path must not read it");
    void *p = NULL;
    assert_rc(pp_pin(pool, r, 0, &p), 0);
    cr_assert_eq(p, buf);
    cr_assert_eq(pins_of(pool, r), 1);
    assert_rc(pp_unpin(pool, r), 0);
    assert_rc(pp_unpin(pool, r), PP_ENOTPINNED);
    f->abi = abi;
    cr_assert(pp__inline_find(pool, r, &t, &e));
    cr_assert_eq((void *)e, (void *)(f->base[pp_ref_node(r)] +
                                     sizeof(pp__inline_entry_t) * (size_t)pp_ref_slot(r)));
    test_destroy(pool);
    ct_delete(ct);
}

/* ---- batches ---------------------------------------------------------------- */

/* Four entries of ct put (ids 0 to 3, 64 bytes each), refs in r. */
static void put_four(pp_pool_t *pool, ct_t *ct, pp_ref_t *r, void **buf)
{
    for (size_t i = 0; i < 4; i++)
        r[i] = put_kept(pool, ct, i, 64, &buf[i]);
}

Test(inline, batches_pin_and_unpin_as_the_library_s, .timeout = 30)
{
    pp_pool_t *pool = test_pool(NULL);
    ct_t *ct = ct_new(4);
    pp_ref_t r[4];
    void *buf[4], *d[4] = { NULL };
    put_four(pool, ct, r, buf);
    assert_rc(pp_pin_many(pool, r, 4, 0, d), 0);
    for (size_t i = 0; i < 4; i++) {
        cr_assert_eq(d[i], buf[i], "data of ref %zu", i);
        cr_assert_eq(pins_of(pool, r[i]), 1);
    }
    size_t done = 99;
    assert_rc(pp_unpin_many(pool, r, 4, &done), 0);
    cr_assert_eq(done, 4);
    assert_counts(pool, 4, 4);
    /* A ref twice (the library's count), NOWAIT, data NULL, n == 0. */
    pp_ref_t twice[3] = { r[0], r[1], r[0] };
    assert_rc(pp_pin_many(pool, twice, 3, PP_PIN_NOWAIT, NULL), 0);
    cr_assert_eq(pins_of(pool, r[0]), 2);
    assert_rc(pp_pin_many(pool, r, 0, 0, NULL), 0);
    assert_rc(pp_unpin_many(pool, r, 0, &done), 0);
    cr_assert_eq(done, 0);
    /* No refs: the library's error, before any is read. */
    assert_rc(pp_pin_many(pool, NULL, 2, 0, d), PP_EINVAL);
    assert_rc(pp_unpin_many(pool, NULL, 2, &done), PP_EINVAL);
    assert_rc(pp_unpin_many(pool, twice, 3, NULL), 0);
    assert_counts(pool, 7, 7);
    /* A write batch marks every entry dirty; the library's unpin drops it. */
    assert_rc(pp_pin_many(pool, r, 2, PP_PIN_WRITE, NULL), 0);
    cr_assert_neq(test_stat(pool, r[1]).state & PP_STATE_DIRTY, 0);
    assert_rc((pp_unpin_many)(pool, r, 2, &done), 0);
    /* Longer than the fast path takes: the library's, the same result. */
    pp_ref_t many[PP__INLINE_BATCH + 1];
    for (size_t i = 0; i <= PP__INLINE_BATCH; i++)
        many[i] = r[i % 4];
    assert_rc(pp_pin_many(pool, many, PP__INLINE_BATCH + 1, 0, NULL), 0);
    cr_assert_eq(pins_of(pool, r[0]), 5);
    assert_rc(pp_unpin_many(pool, many, PP__INLINE_BATCH + 1, &done), 0);
    cr_assert_eq(done, PP__INLINE_BATCH + 1);
    assert_counts(pool, 9 + PP__INLINE_BATCH + 1, 9 + PP__INLINE_BATCH + 1);
    release_each(pool, r, 4);
    test_destroy(pool);
    for (size_t i = 0; i < 4; i++)
        cr_assert_eq(ct_frees(ct, i), 1);
    ct_delete(ct);
}

/* A batch's pins and unpins are counted on each ref's node: with one
 * store where all refs are of one node, one each where they are not; and
 * a batch whose length is known only at run time (the library's copy of
 * the code) counts the same. */
static void assert_node_counts(pp_pool_t *pool, const uint64_t *pins, const uint64_t *unpins,
                               unsigned nodes)
{
    for (unsigned n = 0; n < nodes; n++) {
        pp_node_stats_t s;
        test_node_stats(pool, n, &s);
        cr_assert_eq(s.pins, pins[n], "node %u pins %" PRIu64, n, (uint64_t)s.pins);
        cr_assert_eq(s.unpins, unpins[n], "node %u unpins %" PRIu64, n, (uint64_t)s.unpins);
    }
}

Test(inline, batch_counts_each_ref_on_its_node, .timeout = 30)
{
    pp_pool_t *pool = test_pool_synth4();
    ct_t *ct = ct_new(4);
    const unsigned node[4] = { 0, 1, 1, 2 };
    pp_ref_t r[4];
    void *d[4];
    for (size_t i = 0; i < 4; i++)
        r[i] = ct_put(pool, ct, i, 64, PP_ON_NODE(node[i]));
    assert_rc(pp_pin_many(pool, r, 4, 0, d), 0);
    assert_rc(pp_unpin_many(pool, r, 4, NULL), 0);
    uint64_t want[4] = { 1, 2, 1, 0 };
    assert_node_counts(pool, want, want, 4);
    /* All of node 1: counted there, not on the first node. */
    assert_rc(pp_pin_many(pool, r + 1, 2, 0, d), 0);
    assert_rc(pp_unpin_many(pool, r + 1, 2, NULL), 0);
    want[1] += 2;
    assert_node_counts(pool, want, want, 4);
    /* A run-time length. */
    volatile size_t n = 4;
    for (size_t i = 0; i < 4; i++)
        d[i] = NULL;
    assert_rc(pp_pin_many(pool, r, n, 0, d), 0);
    for (size_t i = 0; i < 4; i++)
        cr_assert(ct_check(d[i], i, 64), "data of ref %zu", i);
    assert_rc(pp_unpin_many(pool, r, n, NULL), 0);
    want[0]++, want[1] += 2, want[2]++;
    assert_node_counts(pool, want, want, 4);
    release_each(pool, r, 4);
    test_destroy(pool);
    ct_delete(ct);
}

/* Single pins and unpins, inlined and the library's, each counted on its
 * ref's node: node 0's counter by the fast path's branch, the others' by
 * its index (pp__inline_counter). */
Test(inline, pins_count_each_ref_on_its_node, .timeout = 30)
{
    pp_pool_t *pool = test_pool_synth4();
    ct_t *ct = ct_new(4);
    pp_ref_t r[4];
    for (size_t i = 0; i < 4; i++)
        r[i] = ct_put(pool, ct, i, 64, PP_ON_NODE((unsigned)(3 - i)));   /* nodes 3, 2, 1, 0 */
    uint64_t pins[4] = { 0 }, unpins[4] = { 0 };
    for (size_t i = 0; i < 4; i++) {
        void *p = NULL;
        for (size_t k = 0; k <= i; k++) {   /* ref i: i + 1 pins */
            assert_rc(pp_pin(pool, r[i], 0, &p), 0);
            cr_assert(ct_check(p, i, 64), "data of ref %zu", i);
        }
        pins[3 - i] += i + 1;
        assert_node_counts(pool, pins, unpins, 4);
        assert_rc(pp_unpin(pool, r[i]), 0);
        assert_rc((pp_unpin)(pool, r[i]), i == 0 ? PP_ENOTPINNED : 0);   /* the library's */
        unpins[3 - i] += i == 0 ? 1 : 2;
        assert_node_counts(pool, pins, unpins, 4);
    }
    for (size_t i = 1; i < 4; i++)
        for (size_t k = 2; k <= i; k++) {
            assert_rc(pp_unpin(pool, r[i]), 0);
            unpins[3 - i]++;
        }
    assert_node_counts(pool, pins, unpins, 4);
    assert_counts(pool, 10, 10);   /* and the totals, every node summed */
    release_each(pool, r, 4);
    test_destroy(pool);
    ct_delete(ct);
}

/* A batch that fails after the fast path pinned some of it: the library
 * drops those pins uncounted, and the call leaves no trace. */
static unsigned undo_points;
static void count_undo(enum pp__test_point where, void *arg, void *ctx)
{
    (void)arg;
    (void)ctx;
    if (where == PP__TP_PIN_MANY_UNDO)
        undo_points++;
}

Test(inline, batch_failing_half_way_leaves_no_trace, .timeout = 30)
{
    pp_pool_t *pool = test_pool(NULL);
    ct_t *ct = ct_new(5);
    pp_ref_t r[4];
    void *buf[4], *d[4];
    put_four(pool, ct, r, buf);
    pp_ref_t gone = ct_put(pool, ct, 4, 64, 0);
    assert_rc(pp_release(pool, gone), 0);
    test_drain(pool);
    pp_ref_t far = ((pp_ref_t)63 << 58) | ((pp_ref_t)0x3FFFFFF << 32) | 7u;
    undo_points = 0;
    pp__test_point_hook(count_undo, NULL);
    /* Stale in the middle: the first two are pinned by the fast path. */
    pp_ref_t bad[4] = { r[0], r[1], gone, r[2] };
    assert_rc(pp_pin_many(pool, bad, 4, 0, d), PP_ESTALE);
    cr_assert_eq(undo_points, 1, "the fast path pinned, and its pins were dropped");
    /* Garbage in the middle: no record, found before any pin. */
    pp_ref_t garbage[3] = { r[0], far, r[1] };
    assert_rc(pp_pin_many(pool, garbage, 3, 0, d), PP_ESTALE);
    /* The same refs through the library. */
    assert_rc((pp_pin_many)(pool, bad, 4, 0, d), PP_ESTALE);
    pp__test_point_hook(NULL, NULL);
    for (size_t i = 0; i < 4; i++)
        cr_assert_eq(pins_of(pool, r[i]), 0, "ref %zu keeps a pin", i);
    assert_counts(pool, 0, 0);
    /* An unpin batch with one ref unpinned unpins nothing. */
    assert_rc(pp_pin_many(pool, r, 2, 0, NULL), 0);
    size_t done = 99;
    assert_rc(pp_unpin_many(pool, r, 3, &done), PP_ENOTPINNED);
    cr_assert_eq(done, 0);
    assert_rc(pp_unpin_many(pool, bad, 3, &done), PP_ESTALE);
    cr_assert_eq(pins_of(pool, r[0]), 1);
    cr_assert_eq(pins_of(pool, r[1]), 1);
    assert_rc(pp_unpin_many(pool, r, 2, &done), 0);
    assert_counts(pool, 2, 2);
    release_each(pool, r, 4);
    test_destroy(pool);
    for (size_t i = 0; i < 5; i++)
        cr_assert_eq(ct_frees(ct, i), 1);
    ct_delete(ct);
}

/* The entry dies while the fast path's pin holds it (its last owner is
 * released just before the undo): the undo drops its last pin, which
 * queues it, and it is freed once. */
typedef struct undo_kill {
    pp_pool_t *pool;
    pp_ref_t ref;
    int rc;
} undo_kill_t;

static void kill_at_undo(enum pp__test_point where, void *arg, void *ctx)
{
    (void)arg;
    undo_kill_t *k = ctx;
    if (where == PP__TP_PIN_MANY_UNDO && k->ref != PP_REF_NONE) {
        k->rc = pp_release(k->pool, k->ref);
        k->ref = PP_REF_NONE;
    }
}

Test(inline, batch_undo_frees_an_entry_that_died_meanwhile, .timeout = 30)
{
    pp_pool_t *pool = test_pool(NULL);
    ct_t *ct = ct_new(5);
    pp_ref_t r[4];
    void *buf[4];
    put_four(pool, ct, r, buf);
    pp_ref_t gone = ct_put(pool, ct, 4, 64, 0);
    assert_rc(pp_release(pool, gone), 0);
    test_drain(pool);
    undo_kill_t k = { .pool = pool, .ref = r[0], .rc = 1 };
    pp__test_point_hook(kill_at_undo, &k);
    pp_ref_t bad[3] = { r[0], r[1], gone };
    assert_rc(pp_pin_many(pool, bad, 3, 0, NULL), PP_ESTALE);
    pp__test_point_hook(NULL, NULL);
    assert_rc(k.rc, 0, "the release at the undo");
    test_drain(pool);
    cr_assert_eq(ct_frees(ct, 0), 1, "the undo's unpin was the last: freed");
    assert_rc(pp_pin(pool, r[0], 0, NULL), PP_ESTALE);
    cr_assert_eq(pins_of(pool, r[1]), 0);
    assert_counts(pool, 0, 0);
    release_each(pool, r + 1, 3);
    test_destroy(pool);
    for (size_t i = 0; i < 5; i++)
        cr_assert_eq(ct_frees(ct, i), 1);
    ct_delete(ct);
}

/* pp_unpin_many's fast path checked every ref and dropped the first, then
 * lost a compare-and-swap: the library drops the rest as pp_unpin_many
 * does after its check, stopping at a pin another thread took away. */
Test(inline, batch_unpin_after_contention_drops_the_rest, .timeout = 30)
{
    pp_pool_t *pool = test_pool(NULL);
    ct_t *ct = ct_new(4);
    pp_ref_t r[4];
    void *buf[4];
    put_four(pool, ct, r, buf);
    size_t done = 99;
    assert_rc(pp_pin_many(pool, r, 3, 0, NULL), 0);
    assert_rc(pp_unpin(pool, r[0]), 0);               /* the fast path's drop */
    assert_rc(pp_inline_unpin_many_slow(pool, r, 3, &done, 1, PP__INLINE_CONTENDED), 0);
    cr_assert_eq(done, 3);
    for (size_t i = 0; i < 3; i++)
        cr_assert_eq(pins_of(pool, r[i]), 0);
    /* The third's pin dropped behind the batch's back (after its check). */
    assert_rc(pp_pin_many(pool, r, 3, 0, NULL), 0);
    assert_rc(pp_unpin(pool, r[0]), 0);
    assert_rc(pp_unpin(pool, r[2]), 0);
    assert_rc(pp_inline_unpin_many_slow(pool, r, 3, &done, 1, PP__INLINE_CONTENDED), PP_ENOTPINNED);
    cr_assert_eq(done, 3, "through with the failing ref too");
    cr_assert_eq(pins_of(pool, r[1]), 0);
    assert_counts(pool, 6, 6);
    release_each(pool, r, 4);
    test_destroy(pool);
    ct_delete(ct);
}
