/* test_pin.c -- pin, unpin, pin_many, unpin_many, get, prefetch (src/api/pin.c). */
#include "helpers.h"

#include <string.h>

static uint32_t pins_of(pp_pool_t *pool, pp_ref_t r)
{
    return test_stat(pool, r).pins;
}

Test(pin, pin_returns_data_pointer, .timeout = 30)
{
    pp_pool_t *pool = test_pool(NULL);
    ct_t *ct = ct_new(1);
    void *buf = ct_buf(ct, 0, 200);
    pp_ref_t r;
    assert_rc(pp_put(pool, buf, 200, &ct->type, 0, &r), 0);
    void *p = NULL;
    assert_rc(pp_pin(pool, r, 0, &p), 0);
    cr_assert_eq(p, buf);
    cr_assert(ct_check(p, 0, 200));
    assert_rc(pp_pin(pool, r, 0, NULL), 0); /* data may be NULL */
    cr_assert_eq(pins_of(pool, r), 2);
    assert_rc(pp_unpin(pool, r), 0);
    assert_rc(pp_unpin(pool, r), 0);
    cr_assert_eq(pins_of(pool, r), 0);
    test_destroy(pool);
    cr_assert_eq(ct_frees(ct, 0), 1);
    ct_delete(ct);
}

Test(pin, nested_pins_and_unbalanced_unpin, .timeout = 30)
{
    pp_pool_t *pool = test_pool(NULL);
    ct_t *ct = ct_new(1);
    pp_ref_t r = ct_put(pool, ct, 0, 64, 0);
    assert_rc(pp_unpin(pool, r), PP_ENOTPINNED);
    for (uint32_t i = 1; i <= 5; i++) {
        assert_rc(pp_pin(pool, r, 0, NULL), 0);
        cr_assert_eq(pins_of(pool, r), i);
    }
    for (uint32_t i = 5; i-- > 0;) {
        assert_rc(pp_unpin(pool, r), 0);
        cr_assert_eq(pins_of(pool, r), i);
    }
    assert_rc(pp_unpin(pool, r), PP_ENOTPINNED);
    assert_rc(pp_unpin(pool, r), PP_ENOTPINNED);
    pp_entry_info_t info = test_stat(pool, r);
    cr_assert_eq(info.pins, 0);
    cr_assert_eq(info.owners, 1);
    cr_assert_eq(info.state & PP_STATE_DEAD, 0);
    pp_stats_t s;
    test_stats(pool, &s);
    cr_assert_eq(s.total.pins, 5);
    cr_assert_eq(s.total.unpins, 5);
    test_destroy(pool);
    cr_assert_eq(ct_frees(ct, 0), 1);
    ct_delete(ct);
}

Test(pin, pin_overflow, .timeout = 60)
{
    pp_pool_t *pool = test_pool(NULL);
    ct_t *ct = ct_new(1);
    pp_ref_t r = ct_put(pool, ct, 0, 64, 0);
    for (uint32_t i = 0; i < PP_MAX_PINS; i++) {
        int rc = pp_pin(pool, r, 0, NULL);
        if (rc != 0)
            cr_assert_fail("pin %u of %u: %s", i + 1, PP_MAX_PINS,
                           pp_err_name(rc));
    }
    cr_assert_eq(pins_of(pool, r), PP_MAX_PINS);
    void *p = &p;
    assert_rc(pp_pin(pool, r, 0, &p), PP_EOVERFLOW);
    assert_rc(pp_pin(pool, r, PP_PIN_WRITE, &p), PP_EOVERFLOW);
    cr_assert_eq(p, &p, "a failed pin leaves *data untouched");
    assert_rc(pp_pin_many(pool, &r, 1, 0, NULL), PP_EOVERFLOW);
    pp_entry_info_t info = test_stat(pool, r);
    cr_assert_eq(info.pins, PP_MAX_PINS);
    cr_assert_eq(info.owners, 1);
    cr_assert_eq(info.state & (PP_STATE_DEAD | PP_STATE_DIRTY), 0);
    /* The other calls still work on a fully pinned entry. */
    assert_rc(pp_retain(pool, r), 0);
    assert_rc(pp_release(pool, r), 0);
    /* One unpin makes room for one pin. */
    assert_rc(pp_unpin(pool, r), 0);
    assert_rc(pp_pin(pool, r, 0, &p), 0);
    cr_assert(ct_check(p, 0, 64));
    for (uint32_t i = 0; i < PP_MAX_PINS; i++) {
        int rc = pp_unpin(pool, r);
        if (rc != 0)
            cr_assert_fail("unpin %u: %s", i + 1, pp_err_name(rc));
    }
    assert_rc(pp_unpin(pool, r), PP_ENOTPINNED);
    info = test_stat(pool, r);
    cr_assert_eq(info.pins, 0);
    cr_assert_eq(info.owners, 1);
    assert_rc(pp_release(pool, r), 0);
    test_drain(pool);
    cr_assert_eq(ct_frees(ct, 0), 1);
    test_destroy(pool);
    ct_delete(ct);
}

Test(pin, pin_keeps_dead_entry_alive, .timeout = 30)
{
    pp_pool_t *pool = test_pool(NULL);
    ct_t *ct = ct_new(1);
    pp_ref_t r = ct_put(pool, ct, 0, 512, 0);
    void *p = NULL;
    assert_rc(pp_pin(pool, r, 0, &p), 0);
    assert_rc(pp_pin(pool, r, 0, NULL), 0);
    assert_rc(pp_release(pool, r), 0); /* last owner: dead, but pinned */

    void *q = &q;
    assert_rc(pp_pin(pool, r, 0, &q), PP_ESTALE);
    cr_assert_eq(q, &q, "a failed pin leaves *data untouched");
    assert_rc(pp_pin_many(pool, &r, 1, 0, NULL), PP_ESTALE);
    cr_assert_eq(pins_of(pool, r), 2);

    /* No free while pinned: nothing is queued, so a drain returns and the
     * data is still there. */
    test_drain(pool);
    cr_assert_eq(ct_frees(ct, 0), 0);
    cr_assert(ct_check(p, 0, 512));
    assert_rc(pp_unpin(pool, r), 0);
    test_drain(pool);
    cr_assert_eq(ct_frees(ct, 0), 0);
    cr_assert(ct_check(p, 0, 512));
    pp_entry_info_t info = test_stat(pool, r);
    cr_assert_eq(info.pins, 1);
    cr_assert_eq(info.state, PP_STATE_RESIDENT | PP_STATE_DEAD);

    /* The last unpin queues it: from then on it is no longer described. */
    assert_rc(pp_unpin(pool, r), 0);
    assert_rc(pp_stat(pool, r, &info), PP_ESTALE);
    test_drain(pool);
    cr_assert_eq(ct_frees(ct, 0), 1);
    cr_assert_neq(ct_tid(ct, 0), (int)gettid());
    assert_rc(pp_unpin(pool, r), PP_ESTALE);
    assert_rc(pp_pin(pool, r, 0, &q), PP_ESTALE);
    test_destroy(pool);
    cr_assert_eq(ct_frees(ct, 0), 1);
    ct_delete(ct);
}

/* ---- pin on one thread, unpin on another ------------------------------- */

typedef struct xarg {
    pp_pool_t *pool;
    pp_ref_t ref;
    int rc;
    void *p;
} xarg_t;

static void *do_unpin(void *arg)
{
    xarg_t *a = arg;
    a->rc = pp_unpin(a->pool, a->ref);
    return NULL;
}

static void *do_pin(void *arg)
{
    xarg_t *a = arg;
    a->rc = pp_pin(a->pool, a->ref, 0, &a->p);
    return NULL;
}

Test(pin, pin_and_unpin_on_different_threads, .timeout = 30)
{
    pp_pool_t *pool = test_pool(NULL);
    ct_t *ct = ct_new(1);
    pp_ref_t r = ct_put(pool, ct, 0, 64, 0);
    pthread_t t;

    /* Pinned here, unpinned there. */
    assert_rc(pp_pin(pool, r, 0, NULL), 0);
    xarg_t a = {pool, r, -100, NULL};
    test_thread_start(&t, do_unpin, &a);
    test_thread_join(t);
    assert_rc(a.rc, 0);
    cr_assert_eq(pins_of(pool, r), 0);

    /* Pinned there, unpinned here. */
    xarg_t b = {pool, r, -100, NULL};
    test_thread_start(&t, do_pin, &b);
    test_thread_join(t);
    assert_rc(b.rc, 0);
    cr_assert(ct_check(b.p, 0, 64));
    cr_assert_eq(pins_of(pool, r), 1);

    /* The final unpin, after the last release, on another thread. */
    assert_rc(pp_release(pool, r), 0);
    xarg_t c = {pool, r, -100, NULL};
    test_thread_start(&t, do_unpin, &c);
    test_thread_join(t);
    assert_rc(c.rc, 0);
    test_drain(pool);
    cr_assert_eq(ct_frees(ct, 0), 1);
    test_destroy(pool);
    ct_delete(ct);
}

/* ---- pin_many / unpin_many -------------------------------------------- */

Test(pin, pin_many_all_or_none, .timeout = 30)
{
    pp_pool_t *pool = test_pool(NULL);
    unsigned nodes = test_nodes(pool);
    ct_t *ct = ct_new(5);
    pp_ref_t v[4];
    for (int i = 0; i < 4; i++)
        v[i] = ct_put(pool, ct, i, 64, PP_ON_NODE(i % nodes));
    pp_ref_t dead = ct_put(pool, ct, 4, 64, 0);
    assert_rc(pp_release(pool, dead), 0);
    test_drain(pool);

    /* The stale ref first, in the middle, last. */
    for (int pos = 0; pos < 5; pos++) {
        pp_ref_t refs[5];
        for (int i = 0, k = 0; i < 5; i++)
            refs[i] = i == pos ? dead : v[k++];
        void *data[5] = {0};
        assert_rc(pp_pin_many(pool, refs, 5, 0, data), PP_ESTALE);
        for (int i = 0; i < 4; i++)
            cr_assert_eq(pins_of(pool, v[i]), 0, "pos %d ref %d", pos, i);
        /* Garbage instead of a reclaimed ref. */
        refs[pos] = 0xdeadbeefcafef00dull;
        assert_rc(pp_pin_many(pool, refs, 5, PP_PIN_WRITE, data), PP_ESTALE);
        for (int i = 0; i < 4; i++)
            cr_assert_eq(pins_of(pool, v[i]), 0, "pos %d ref %d", pos, i);
    }
    /* Unknown flags: nothing pinned. */
    assert_rc(pp_pin_many(pool, v, 4, 0x80u, NULL), PP_EINVAL);
    for (int i = 0; i < 4; i++)
        cr_assert_eq(pins_of(pool, v[i]), 0);

    /* All valid: all pinned, pointers filled in order. */
    void *data[4] = {0};
    assert_rc(pp_pin_many(pool, v, 4, 0, data), 0);
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(pins_of(pool, v[i]), 1);
        cr_assert(ct_check(data[i], i, 64), "data[%d]", i);
    }
    assert_rc(pp_unpin_many(pool, v, 4, NULL), 0);
    for (int i = 0; i < 4; i++)
        cr_assert_eq(pins_of(pool, v[i]), 0);
    /* n == 0 succeeds, data NULL too. */
    assert_rc(pp_pin_many(pool, v, 0, 0, NULL), 0);
    assert_rc(pp_unpin_many(pool, v, 0, NULL), 0);
    assert_rc(pp_pin_many(pool, v, 4, 0, NULL), 0);
    assert_rc(pp_unpin_many(pool, v, 4, NULL), 0);

    pp_stats_t s;
    test_stats(pool, &s);
    cr_assert_eq(s.total.pins, s.total.unpins);
    test_destroy(pool);
    for (int i = 0; i < 5; i++)
        cr_assert_eq(ct_frees(ct, i), 1);
    ct_delete(ct);
}

Test(pin, pin_many_all_or_none_on_overflow, .timeout = 60)
{
    pp_pool_t *pool = test_pool(NULL);
    ct_t *ct = ct_new(2);
    pp_ref_t a = ct_put(pool, ct, 0, 64, 0);
    pp_ref_t b = ct_put(pool, ct, 1, 64, 0);
    for (uint32_t i = 0; i < PP_MAX_PINS - 1; i++) {
        int rc = pp_pin(pool, a, 0, NULL);
        if (rc != 0)
            cr_assert_fail("pin %u: %s", i, pp_err_name(rc));
    }
    /* a can take one more pin, not two. */
    pp_ref_t refs[3] = {b, a, a};
    assert_rc(pp_pin_many(pool, refs, 3, 0, NULL), PP_EOVERFLOW);
    cr_assert_eq(pins_of(pool, a), PP_MAX_PINS - 1);
    cr_assert_eq(pins_of(pool, b), 0);
    assert_rc(pp_pin_many(pool, refs, 2, 0, NULL), 0);
    cr_assert_eq(pins_of(pool, a), PP_MAX_PINS);
    cr_assert_eq(pins_of(pool, b), 1);
    assert_rc(pp_unpin_many(pool, refs, 2, NULL), 0);
    for (uint32_t i = 0; i < PP_MAX_PINS - 1; i++) {
        int rc = pp_unpin(pool, a);
        if (rc != 0)
            cr_assert_fail("unpin %u: %s", i, pp_err_name(rc));
    }
    cr_assert_eq(pins_of(pool, a), 0);
    cr_assert_eq(pins_of(pool, b), 0);
    test_destroy(pool);
    ct_delete(ct);
}

Test(pin, pin_many_duplicates, .timeout = 30)
{
    pp_pool_t *pool = test_pool(NULL);
    ct_t *ct = ct_new(2);
    pp_ref_t a = ct_put(pool, ct, 0, 64, 0);
    pp_ref_t b = ct_put(pool, ct, 1, 64, 0);
    pp_ref_t refs[5] = {a, a, b, a, b};
    void *data[5] = {0};
    assert_rc(pp_pin_many(pool, refs, 5, 0, data), 0);
    cr_assert_eq(pins_of(pool, a), 3);
    cr_assert_eq(pins_of(pool, b), 2);
    for (int i = 0; i < 5; i++)
        cr_assert(ct_check(data[i], refs[i] == a ? 0 : 1, 64), "data[%d]", i);
    cr_assert_eq(data[0], data[1]);
    cr_assert_eq(data[2], data[4]);

    /* Unpinning a three times when it holds 3 pins works; a duplicate list
     * with more occurrences than pins does not (and changes nothing). */
    pp_ref_t too_many[4] = {a, a, a, a};
    assert_rc(pp_unpin_many(pool, too_many, 4, NULL), PP_ENOTPINNED);
    cr_assert_eq(pins_of(pool, a), 3);
    assert_rc(pp_unpin_many(pool, refs, 5, NULL), 0);
    cr_assert_eq(pins_of(pool, a), 0);
    cr_assert_eq(pins_of(pool, b), 0);
    test_destroy(pool);
    ct_delete(ct);
}

Test(pin, unpin_many_checks_first, .timeout = 30)
{
    pp_pool_t *pool = test_pool(NULL);
    ct_t *ct = ct_new(4);
    pp_ref_t a = ct_put(pool, ct, 0, 64, 0);
    pp_ref_t b = ct_put(pool, ct, 1, 64, 0);
    pp_ref_t c = ct_put(pool, ct, 2, 64, 0);
    pp_ref_t d = ct_put(pool, ct, 3, 64, 0);
    assert_rc(pp_release(pool, d), 0);
    test_drain(pool);
    assert_rc(pp_pin(pool, a, 0, NULL), 0);
    assert_rc(pp_pin(pool, b, 0, NULL), 0);

    /* c holds no pin: nothing is unpinned, wherever c stands. */
    pp_ref_t l1[3] = {a, b, c};
    assert_rc(pp_unpin_many(pool, l1, 3, NULL), PP_ENOTPINNED);
    pp_ref_t l2[3] = {c, a, b};
    assert_rc(pp_unpin_many(pool, l2, 3, NULL), PP_ENOTPINNED);
    cr_assert_eq(pins_of(pool, a), 1);
    cr_assert_eq(pins_of(pool, b), 1);
    /* A reclaimed ref: PP_ESTALE, nothing unpinned. */
    pp_ref_t l3[3] = {a, d, b};
    assert_rc(pp_unpin_many(pool, l3, 3, NULL), PP_ESTALE);
    cr_assert_eq(pins_of(pool, a), 1);
    cr_assert_eq(pins_of(pool, b), 1);
    /* Twice a ref that holds one pin. */
    pp_ref_t l4[3] = {a, b, a};
    assert_rc(pp_unpin_many(pool, l4, 3, NULL), PP_ENOTPINNED);
    cr_assert_eq(pins_of(pool, a), 1);
    cr_assert_eq(pins_of(pool, b), 1);

    pp_ref_t ok[2] = {b, a};
    assert_rc(pp_unpin_many(pool, ok, 2, NULL), 0);
    cr_assert_eq(pins_of(pool, a), 0);
    cr_assert_eq(pins_of(pool, b), 0);
    pp_stats_t s;
    test_stats(pool, &s);
    cr_assert_eq(s.total.pins, 2);
    cr_assert_eq(s.total.unpins, 2);
    test_destroy(pool);
    ct_delete(ct);
}

static void no_free(void *data, size_t size, void *ctx)
{
    (void)data, (void)size, (void)ctx;   /* the fillers' data is static */
}

/* Batches are taken in chunks (16 records prefetched at a time, pin.c):
 * across chunks the promises are the same -- all or none, the exact check
 * before any unpin, and each ref validated against its own generation. */
Test(pin, many_larger_than_a_chunk, .timeout = 30)
{
    enum { N = 41 };                        /* two full chunks and one more ref */
    pp_pool_t *pool = test_pool(NULL);
    unsigned nodes = test_nodes(pool);
    ct_t *ct = ct_new(N + 2);
    pp_ref_t v[N], refs[N];
    for (int i = 0; i < N; i++)
        v[i] = ct_put(pool, ct, i, 64, PP_ON_NODE(i % nodes));
    pp_ref_t dead = ct_put(pool, ct, N, 64, 0);
    assert_rc(pp_release(pool, dead), 0);
    test_drain(pool);
    /* Put until an entry takes the dead one's slot (once the thread's
     * magazine is used up): the record prefetched for the stale ref then
     * holds a live entry of another generation. */
    enum { FILL = 4096 };
    static char filler;
    static const pp_type_t static_data = {.name = "static", .free = no_free};
    pp_ref_t *fill = calloc(FILL, sizeof *fill);
    cr_assert_not_null(fill);
    pp_ref_t fresh = PP_REF_NONE;
    size_t nfill = 0;
    while (nfill < FILL) {
        pp_ref_t r;
        assert_rc(pp_put(pool, &filler, 0, &static_data, PP_ON_NODE(pp_ref_node(dead)), &r), 0);
        if (pp_ref_node(r) == pp_ref_node(dead) && pp_ref_slot(r) == pp_ref_slot(dead)) {
            fresh = r;
            break;
        }
        fill[nfill++] = r;
    }
    cr_assert_neq(fresh, PP_REF_NONE, "the dead entry's slot was not reused in %d puts", FILL);

    const int at[] = { 0, 15, 16, 31, 32, 40 };
    for (size_t a = 0; a < sizeof at / sizeof at[0]; a++) {
        memcpy(refs, v, sizeof refs);
        refs[at[a]] = dead;
        void *data[N] = {0};
        assert_rc(pp_pin_many(pool, refs, N, 0, data), PP_ESTALE);
        for (int i = 0; i < N; i++)
            cr_assert_eq(pins_of(pool, v[i]), 0, "stale at %d: ref %d pinned", at[a], i);
        cr_assert_eq(pins_of(pool, fresh), 0, "stale at %d pinned the slot's new entry", at[a]);
    }
    void *data[N] = {0};
    assert_rc(pp_pin_many(pool, v, N, 0, data), 0);
    for (int i = 0; i < N; i++) {
        cr_assert_eq(pins_of(pool, v[i]), 1);
        cr_assert(ct_check(data[i], i, 64), "data[%d]", i);
    }
    /* One ref, in the last chunk, twice: it holds one pin only. */
    memcpy(refs, v, sizeof refs);
    refs[3] = v[37];
    assert_rc(pp_unpin_many(pool, refs, N, NULL), PP_ENOTPINNED);
    for (int i = 0; i < N; i++)
        cr_assert_eq(pins_of(pool, v[i]), 1, "ref %d unpinned by a failed call", i);
    refs[3] = dead;
    assert_rc(pp_unpin_many(pool, refs, N, NULL), PP_ESTALE);
    for (int i = 0; i < N; i++)
        cr_assert_eq(pins_of(pool, v[i]), 1, "ref %d unpinned by a failed call", i);
    /* The first failing ref's error, in order: an unpinned live entry
     * before a ref that names no slot at all. */
    refs[2] = fresh;
    refs[3] = 0xdeadbeefcafef00dull;
    assert_rc(pp_unpin_many(pool, refs, N, NULL), PP_ENOTPINNED);
    for (int i = 0; i < N; i++)
        cr_assert_eq(pins_of(pool, v[i]), 1, "ref %d unpinned by a failed call", i);
    assert_rc(pp_unpin_many(pool, v, N, NULL), 0);
    for (int i = 0; i < N; i++)
        cr_assert_eq(pins_of(pool, v[i]), 0);

    pp_stats_t s;
    test_stats(pool, &s);
    cr_assert_eq(s.total.pins, N);
    cr_assert_eq(s.total.unpins, N);
    assert_rc(pp_release(pool, fresh), 0);
    for (int i = 0; i < N; i++)
        assert_rc(pp_release(pool, v[i]), 0);
    for (size_t i = 0; i < nfill; i++)
        assert_rc(pp_release(pool, fill[i]), 0);
    free(fill);
    test_destroy(pool);
    ct_delete(ct);
}

Test(pin, unpin_many_final_unpins_queue, .timeout = 30)
{
    pp_pool_t *pool = test_pool(NULL);
    ct_t *ct = ct_new(3);
    pp_ref_t v[3];
    for (int i = 0; i < 3; i++)
        v[i] = ct_put(pool, ct, i, 64, 0);
    assert_rc(pp_pin_many(pool, v, 3, 0, NULL), 0);
    for (int i = 0; i < 3; i++)
        assert_rc(pp_release(pool, v[i]), 0);
    test_drain(pool);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(ct_frees(ct, i), 0);
    assert_rc(pp_unpin_many(pool, v, 3, NULL), 0);
    test_drain(pool);
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(ct_frees(ct, i), 1);
        cr_assert_neq(ct_tid(ct, i), (int)gettid());
    }
    test_destroy(pool);
    ct_delete(ct);
}

/* ---- flags --------------------------------------------------------------- */

Test(pin, pin_write_sets_dirty, .timeout = 30)
{
    pp_pool_t *pool = test_pool(NULL);
    ct_t *ct = ct_new(2);
    pp_ref_t r = ct_put(pool, ct, 0, 64, 0);
    cr_assert_eq(test_stat(pool, r).state & PP_STATE_DIRTY, 0);
    assert_rc(pp_pin(pool, r, 0, NULL), 0);
    cr_assert_eq(test_stat(pool, r).state & PP_STATE_DIRTY, 0,
                 "a read pin made the entry dirty");
    assert_rc(pp_unpin(pool, r), 0);
    void *p = NULL;
    assert_rc(pp_pin(pool, r, PP_PIN_WRITE, &p), 0);
    cr_assert(ct_check(p, 0, 64));
    cr_assert_eq(test_stat(pool, r).state & PP_STATE_DIRTY, PP_STATE_DIRTY);
    assert_rc(pp_unpin(pool, r), 0);
    cr_assert_eq(test_stat(pool, r).state & PP_STATE_DIRTY, PP_STATE_DIRTY);

    /* Through pp_pin_many too. */
    pp_ref_t r2 = ct_put(pool, ct, 1, 64, 0);
    assert_rc(pp_pin_many(pool, &r2, 1, PP_PIN_WRITE | PP_PIN_NOWAIT, NULL), 0);
    cr_assert_eq(test_stat(pool, r2).state & PP_STATE_DIRTY, PP_STATE_DIRTY);
    assert_rc(pp_unpin(pool, r2), 0);
    test_destroy(pool);
    ct_delete(ct);
}

Test(pin, pin_nowait_on_resident_entry, .timeout = 30)
{
    pp_pool_t *pool = test_pool(NULL);
    ct_t *ct = ct_new(1);
    pp_ref_t r = ct_put(pool, ct, 0, 64, 0);
    cr_assert_eq(test_stat(pool, r).state & PP_STATE_RESIDENT, PP_STATE_RESIDENT);
    void *p = NULL;
    assert_rc(pp_pin(pool, r, PP_PIN_NOWAIT, &p), 0);
    cr_assert(ct_check(p, 0, 64));
    assert_rc(pp_pin(pool, r, PP_PIN_NOWAIT | PP_PIN_WRITE, &p), 0);
    cr_assert_eq(pins_of(pool, r), 2);
    assert_rc(pp_unpin(pool, r), 0);
    assert_rc(pp_unpin(pool, r), 0);
    test_destroy(pool);
    ct_delete(ct);
}

Test(pin, unknown_pin_flags, .timeout = 30)
{
    pp_pool_t *pool = test_pool(NULL);
    ct_t *ct = ct_new(1);
    pp_ref_t r = ct_put(pool, ct, 0, 64, 0);
    static const unsigned bad[] = {0x4u, 0x8u, 0x100u, 0x80000000u,
                                   PP_PIN_WRITE | 0x10u, ~0u};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        void *p = &p;
        cr_assert_eq(pp_pin(pool, r, bad[i], &p), PP_EINVAL, "flags 0x%x",
                     bad[i]);
        cr_assert_eq(p, &p, "flags 0x%x: *data untouched", bad[i]);
    }
    pp_entry_info_t info = test_stat(pool, r);
    cr_assert_eq(info.pins, 0);
    cr_assert_eq(info.state & PP_STATE_DIRTY, 0);
    pp_stats_t s;
    test_stats(pool, &s);
    cr_assert_eq(s.total.pins, 0);
    test_destroy(pool);
    ct_delete(ct);
}

Test(pin, prefetch, .timeout = 30)
{
    pp_pool_t *pool = test_pool(NULL);
    ct_t *ct = ct_new(1);
    pp_ref_t r = ct_put(pool, ct, 0, 64, 0);
    assert_rc(pp_prefetch(pool, r), 0);
    assert_rc(pp_prefetch(pool, PP_REF_NONE), PP_ESTALE);
    assert_rc(pp_prefetch(pool, r ^ 0x1), PP_ESTALE);
    pp_entry_info_t info = test_stat(pool, r);
    cr_assert_eq(info.pins, 0);
    cr_assert_eq(info.state & PP_STATE_RESIDENT, PP_STATE_RESIDENT);
    assert_rc(pp_release(pool, r), 0);
    assert_rc(pp_prefetch(pool, r), PP_ESTALE); /* dead */
    test_drain(pool);
    assert_rc(pp_prefetch(pool, r), PP_ESTALE); /* reclaimed */
    test_destroy(pool);
    ct_delete(ct);
}

/* ---- escaped access ------------------------------------------------------ */

Test(pin, get_marks_escaped, .timeout = 30)
{
    pp_pool_t *pool = test_pool(NULL);
    ct_t *ct = ct_new(1);
    void *buf = ct_buf(ct, 0, 64);
    pp_ref_t r;
    assert_rc(pp_put(pool, buf, 64, &ct->type, 0, &r), 0);
    cr_assert_eq(test_stat(pool, r).state & PP_STATE_ESCAPED, 0);
    assert_rc(pp_get(pool, r, NULL), PP_EINVAL);
    cr_assert_eq(test_stat(pool, r).state & PP_STATE_ESCAPED, 0);
    void *p = NULL;
    assert_rc(pp_get(pool, r, &p), 0);
    cr_assert_eq(p, buf);
    pp_entry_info_t info = test_stat(pool, r);
    cr_assert_eq(info.state & PP_STATE_ESCAPED, PP_STATE_ESCAPED);
    cr_assert_eq(info.pins, 0, "pp_get took a pin");
    cr_assert_eq(info.owners, 1);
    pp_stats_t s;
    test_stats(pool, &s);
    cr_assert_eq(s.total.gets, 1);
    test_destroy(pool);
    cr_assert_eq(ct_frees(ct, 0), 1);
    ct_delete(ct);
}

Test(pin, escaped_entry_lives_until_last_release, .timeout = 30)
{
    pp_pool_t *pool = test_pool(NULL);
    ct_t *ct = ct_new(1);
    pp_ref_t r = ct_put(pool, ct, 0, 256, 0);
    assert_rc(pp_retain(pool, r), 0);
    void *p = NULL;
    assert_rc(pp_get(pool, r, &p), 0);
    assert_rc(pp_release(pool, r), 0);
    /* One owner left: alive and readable, even after a drain. */
    test_drain(pool);
    cr_assert_eq(ct_frees(ct, 0), 0);
    cr_assert(ct_check(p, 0, 256));
    pp_entry_info_t info = test_stat(pool, r);
    cr_assert_eq(info.owners, 1);
    cr_assert_eq(info.state & PP_STATE_DEAD, 0);
    assert_rc(pp_release(pool, r), 0);
    test_drain(pool);
    cr_assert_eq(ct_frees(ct, 0), 1);
    assert_rc(pp_get(pool, r, &p), PP_ESTALE);
    test_destroy(pool);
    cr_assert_eq(ct_frees(ct, 0), 1);
    cr_assert_eq(atomic_load(&ct->bad), 0);
    ct_delete(ct);
}

/* ---- memory ordering ---------------------------------------------------- */

#define ORD_ROUNDS 2000
#define ORD_SIZE 4096

typedef struct ord {
    pp_pool_t *pool;
    pp_ref_t ref;
    /* Relaxed on purpose: the flags only say *when* to pin; the data must
     * be ordered by pp_unpin (release) and pp_pin (acquire) alone, so a
     * missing acquire or release shows up as a wrong pattern here and as a
     * data race under ThreadSanitizer. */
    atomic_int written; /* round whose data the writer has unpinned */
    atomic_int checked; /* round the reader has checked and unpinned */
} ord_t;

static bool ord_wait(atomic_int *v, int want)
{
    return WAIT_UNTIL(atomic_load_explicit(v, memory_order_relaxed) >= want,
                      TEST_WAIT_MS);
}

static void *ord_writer(void *arg)
{
    ord_t *o = arg;
    for (int round = 1; round <= ORD_ROUNDS; round++) {
        if (!ord_wait(&o->checked, round - 1)) {
            TCHECK(false, "writer: reader stuck before round %d", round);
            break;
        }
        void *p = NULL;
        int rc = pp_pin(o->pool, o->ref, PP_PIN_WRITE, &p);
        TCHECK(rc == 0, "writer pin: %s", pp_err_name(rc));
        if (rc != 0)
            break;
        fill_pattern(p, ORD_SIZE, (uint64_t)round);
        rc = pp_unpin(o->pool, o->ref);
        TCHECK(rc == 0, "writer unpin: %s", pp_err_name(rc));
        atomic_store_explicit(&o->written, round, memory_order_relaxed);
    }
    return NULL;
}

static void *ord_reader(void *arg)
{
    ord_t *o = arg;
    for (int round = 1; round <= ORD_ROUNDS; round++) {
        if (!ord_wait(&o->written, round)) {
            TCHECK(false, "reader: writer stuck before round %d", round);
            break;
        }
        void *p = NULL;
        int rc = pp_pin(o->pool, o->ref, 0, &p);
        TCHECK(rc == 0, "reader pin: %s", pp_err_name(rc));
        if (rc != 0)
            break;
        TCHECK(check_pattern(p, ORD_SIZE, (uint64_t)round),
               "round %d: the reader does not see the writer's data", round);
        rc = pp_unpin(o->pool, o->ref);
        TCHECK(rc == 0, "reader unpin: %s", pp_err_name(rc));
        atomic_store_explicit(&o->checked, round, memory_order_relaxed);
    }
    return NULL;
}

Test(pin, unpin_publishes_writes_to_next_pin, .timeout = 60)
{
    ord_t o;
    o.pool = test_pool(NULL);
    void *buf = calloc(1, ORD_SIZE);
    assert_rc(pp_put(o.pool, buf, ORD_SIZE, NULL, 0, &o.ref), 0);
    atomic_init(&o.written, 0);
    atomic_init(&o.checked, 0);
    pthread_t w, r;
    test_thread_start(&r, ord_reader, &o);
    test_thread_start(&w, ord_writer, &o);
    test_thread_join(w);
    test_thread_join(r);
    TCHECK_NONE();
    cr_assert_eq(atomic_load(&o.checked), ORD_ROUNDS);
    pp_entry_info_t info = test_stat(o.pool, o.ref);
    cr_assert_eq(info.pins, 0);
    cr_assert_eq(info.state & PP_STATE_DIRTY, PP_STATE_DIRTY);
    assert_rc(pp_release(o.pool, o.ref), 0);
    test_drain(o.pool);
    test_destroy(o.pool);
}

/* ---- the hot path makes no system call ------------------------------------ */

#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define HOT_ROUNDS 100000

/* In a forked child under seccomp's strict mode -- any system call but
 * read, write, _exit and sigreturn kills the process with SIGKILL -- run
 * every lock-free call on resident entries many times: pin, pin for write,
 * unpin, pin_many, unpin_many, non-final retain/release, get, stat,
 * prefetch.  (The child has no reclaimer threads; nothing here is a final
 * unpin, which may wake one.) */
Test(pin, hot_path_makes_no_system_call, .timeout = 60)
{
    pp_pool_t *pool = test_pool(NULL);
    ct_t *ct = ct_new(2);
    pp_ref_t refs[2] = { ct_put(pool, ct, 0, 256, 0), ct_put(pool, ct, 1, 256, 0) };
    void *d;
    /* Register this thread with the pool (its one-time allocation). */
    assert_rc(pp_pin(pool, refs[0], 0, &d), 0);
    assert_rc(pp_unpin(pool, refs[0]), 0);

    fflush(NULL);
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_STRICT) != 0)
            syscall(SYS_exit, 3);
        int bad = 0;
        void *dv[2];
        pp_entry_info_t info;
        for (int i = 0; i < HOT_ROUNDS; i++) {
            bad |= pp_pin(pool, refs[i & 1], (i & 2) ? PP_PIN_WRITE : 0, &d);
            bad |= pp_unpin(pool, refs[i & 1]);
            bad |= pp_pin_many(pool, refs, 2, 0, dv);
            bad |= pp_unpin_many(pool, refs, 2, NULL);
            bad |= pp_retain(pool, refs[0]);
            bad |= pp_release(pool, refs[0]);
            bad |= pp_get(pool, refs[1], &d);
            bad |= pp_stat(pool, refs[1], &info);
            bad |= pp_prefetch(pool, refs[0]);
            bad |= pp_pin(pool, PP_REF_NONE, 0, &d) != PP_ESTALE;   /* errors too */
        }
        syscall(SYS_exit, bad ? 2 : 0);
    }
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(!WIFSIGNALED(status),
              "the hot path made a system call (child killed by signal %d)",
              WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    cr_assert(WIFEXITED(status));
    cr_assert_eq(WEXITSTATUS(status), 0, "child exit %d (2: a call failed, 3: no seccomp)",
                 WEXITSTATUS(status));

    for (size_t i = 0; i < 2; i++)
        assert_rc(pp_release(pool, refs[i]), 0);
    test_destroy(pool);
    ct_delete(ct);
}

/* ---- the hot path allocates nothing ---------------------------------------- */

#include "testing/testhooks.h" /* pp__alloc_count: every allocation pinpool makes */

/* The final unpin and the final release in the common case -- the node's
 * reclaimer is busy, not asleep -- make no system call either: the push,
 * the backlog's count, the lag's clock read (1 push in 64: 512 here, so it
 * is read) are all user space.  In the forked child there is no reclaimer
 * thread; the test marks every node's reclaimer awake there
 * (prod.sleeping = 0, what a busy reclaimer leaves), so what the child runs
 * is the path a final unpin takes while its reclaimer works.  (A reclaimer
 * that sleeps costs the first push after it one futex wake: the header's
 * "at most one system call per wake-up".)  A seccomp filter, not strict
 * mode: on this project's kernel (6.18) strict mode makes the vDSO's
 * clock_gettime fault (SIGSEGV, with no system call made), while a filter
 * that kills on every system call but write and exit lets it run, as it
 * runs everywhere else: in user space. */
#include <linux/filter.h>
#include <stddef.h>

static int no_syscalls_but_write_and_exit(void)
{
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_write, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_exit, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
    };
    struct sock_fprog prog = {.len = sizeof f / sizeof f[0], .filter = f};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        return -1;
    return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
}

#define FINAL_N 512

Test(pin, final_unpin_makes_no_system_call_while_the_reclaimer_works, .timeout = 60)
{
    pp_pool_t *pool = test_pool(NULL);
    static pp_ref_t dead[FINAL_N], live[FINAL_N];
    for (size_t i = 0; i < FINAL_N; i++) {
        void *a = malloc(64), *b = malloc(64);
        cr_assert(a != NULL && b != NULL);
        assert_rc(pp_put(pool, a, 64, NULL, 0, &dead[i]), 0);
        assert_rc(pp_put(pool, b, 64, NULL, 0, &live[i]), 0);
        assert_rc(pp_pin(pool, dead[i], 0, NULL), 0);
        assert_rc(pp_release(pool, dead[i]), 0);       /* dead, held by our pin */
    }
    pp_stats_t before;
    test_stats(pool, &before);

    fflush(NULL);
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        for (unsigned n = 0; n < pool->nnodes; n++)
            pp__atomic_store_relaxed(&pool->nodes[n]->prod.sleeping, 0);
        if (no_syscalls_but_write_and_exit() != 0)
            syscall(SYS_exit, 3);
        int bad = 0;
        for (size_t i = 0; i < FINAL_N; i++) {
            bad |= pp_unpin(pool, dead[i]);             /* the final unpin */
            bad |= pp_release(pool, live[i]);           /* the final release */
        }
        /* Both queued, and counted in the backlog. */
        uint64_t backlog = 0;
        for (unsigned n = 0; n < pool->nnodes; n++)
            backlog += pp__atomic_load_relaxed(&pool->nodes[n]->put.backlog);
        if (backlog < before.total.backlog_bytes + 2u * FINAL_N * (64 + PP__BACKLOG_SLOT_BYTES))
            bad |= 4;
        syscall(SYS_exit, bad & 4 ? 4 : bad ? 2 : 0);
    }
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(!WIFSIGNALED(status),
              "a final unpin or release made a system call (child killed by signal %d)",
              WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    cr_assert(WIFEXITED(status));
    cr_assert_eq(WEXITSTATUS(status), 0,
                 "child exit %d (2: a call failed, 3: no seccomp, 4: not in the backlog)",
                 WEXITSTATUS(status));

    for (size_t i = 0; i < FINAL_N; i++) {
        assert_rc(pp_unpin(pool, dead[i]), 0);
        assert_rc(pp_release(pool, live[i]), 0);
    }
    test_drain(pool);
    test_destroy(pool);
}

Test(pin, hot_path_allocates_nothing, .timeout = 60)
{
    pp_pool_t *pool = test_pool(NULL);
    ct_t *ct = ct_new(2);
    pp_ref_t refs[2] = { ct_put(pool, ct, 0, 256, 0), ct_put(pool, ct, 1, 256, 0) };
    void *d, *dv[2];
    pp_entry_info_t info;
    /* Registration is the thread's one allocation: before counting. */
    assert_rc(pp_pin(pool, refs[0], 0, &d), 0);
    assert_rc(pp_unpin(pool, refs[0]), 0);

    uint64_t before = pp__alloc_count();
    for (int i = 0; i < HOT_ROUNDS; i++) {
        assert_rc(pp_pin(pool, refs[i & 1], (i & 2) ? PP_PIN_WRITE : 0, &d), 0);
        assert_rc(pp_unpin(pool, refs[i & 1]), 0);
        assert_rc(pp_pin_many(pool, refs, 2, 0, dv), 0);
        assert_rc(pp_unpin_many(pool, refs, 2, NULL), 0);
        assert_rc(pp_retain(pool, refs[0]), 0);
        assert_rc(pp_release(pool, refs[0]), 0);
        assert_rc(pp_get(pool, refs[1], &d), 0);
        assert_rc(pp_stat(pool, refs[1], &info), 0);
        assert_rc(pp_prefetch(pool, refs[0]), 0);
    }
    cr_assert_eq(pp__alloc_count(), before, "%" PRIu64 " allocation(s) on the hot path",
                 pp__alloc_count() - before);

    /* pp_put allocates only when its node's table needs a new segment:
     * two and a half segments' worth of puts, at most 3 segments. */
    const size_t PUTS = pp__table_seg_slots() * 5 / 2;
    pp_ref_t *many = calloc(PUTS, sizeof *many);
    cr_assert_not_null(many);
    before = pp__alloc_count();
    for (size_t i = 0; i < PUTS; i++) {
        void *buf = malloc(8);   /* the caller's data: not pinpool's allocation */
        cr_assert_not_null(buf);
        assert_rc(pp_put(pool, buf, 8, NULL, PP_ON_NODE(0), &many[i]), 0);
    }
    uint64_t put_allocs = pp__alloc_count() - before;
    cr_assert_leq(put_allocs, 3, "%" PRIu64 " allocations for %zu puts", put_allocs, PUTS);
    for (size_t i = 0; i < PUTS; i++)
        assert_rc(pp_release(pool, many[i]), 0);
    free(many);

    for (size_t i = 0; i < 2; i++)
        assert_rc(pp_release(pool, refs[i]), 0);
    test_destroy(pool);
    ct_delete(ct);
}

/* pp_unpin_many says how far it got: n on success, 0 when its check fails,
 * and, when another thread drops one of the batch's pins after the check
 * (made deterministic by the test point), the refs up to and including
 * that one: the pins after it are still the caller's. */
#include "support/steal.h"

Test(pin, unpin_many_says_how_many_refs_it_is_through_with, .timeout = 30)
{
    pp_pool_t *pool = test_pool(NULL);
    ct_t *ct = ct_new(3);
    pp_ref_t r[3];
    for (int i = 0; i < 3; i++)
        r[i] = ct_put(pool, ct, (size_t)i, 64, 0);
    size_t done = 99;
    assert_rc(pp_pin_many(pool, r, 3, 0, NULL), 0);
    assert_rc(pp_unpin_many(pool, r, 3, &done), 0);
    cr_assert_eq(done, 3);
    done = 99;
    assert_rc(pp_unpin_many(pool, r, 3, &done), PP_ENOTPINNED);
    cr_assert_eq(done, 0, "a failed check unpins nothing");

    assert_rc(pp_pin_many(pool, r, 3, 0, NULL), 0);
    steal_t st = {pool, r[1], 0};
    done = 99;
    assert_rc(WITH_STEAL(&st, pp_unpin_many(pool, r, 3, &done)), PP_ENOTPINNED);
    cr_assert_eq(done, 2, "through with r[0] (unpinned) and r[1] (its pin was gone)");
    cr_assert_eq(pins_of(pool, r[0]), 0);
    cr_assert_eq(pins_of(pool, r[1]), 0);
    cr_assert_eq(pins_of(pool, r[2]), 1, "r[2] is still pinned: the caller's to drop");
    assert_rc(pp_unpin_many(pool, r + done, 3 - done, &done), 0);
    cr_assert_eq(done, 1);
    /* Every unpin counted once: the fast path's of r[0] before it lost
     * the compare-and-swap of r[1], the stolen one, the last batch's. */
    pp_stats_t s;
    test_stats(pool, &s);
    cr_assert_eq(s.total.pins, 6);
    cr_assert_eq(s.total.unpins, 6);
    for (int i = 0; i < 3; i++)
        assert_rc(pp_release(pool, r[i]), 0);
    test_destroy(pool);
    ct_delete(ct);
}
