/*
 * test_discard.c -- PP_TYPE_DISCARD (src/swap/evict.c's drops,
 * src/swap/room.c's room without swap, the owner side in src/api/owner.c
 * and src/core/retire.c): a cache entry dropped
 * under memory pressure dies (its refs read PP_ESTALE, its free runs once
 * on its reclaimer), a pinned, escaped or NOSWAP one never goes, other
 * entries still swap as before, with and without a swap directory; a pin
 * that races a drop wins or gets PP_ESTALE, a release after the drop's
 * death gets PP_ESTALE; and pins, retains and releases racing the drops
 * that puts force, on several threads.
 *
 * How a drop is forced.  A pool of LIMIT bytes is filled with PAGE-sized
 * entries; one more put does not fit.  Without swap the putter itself runs
 * the nodes' CLOCK hands and drops DISCARD entries down to the low
 * watermark (7/8), then waits for their reclaimer; with swap the swap
 * threads do the same.  Puts do not set the recency bit and every entry
 * lives on node 0 (PP_ON_NODE(0)), so the hand drops in slot order from
 * a fresh pool.  The races that must go one way are set up by the drop's
 * test points (PP__TP_DROP_CLAIMED, PP__TP_DROP_DEAD: the hook runs on the
 * dropping thread, between the claim and the death, or between the death
 * and the taking of the owners), never by sleeping.
 */
#include "helpers.h"
#include "support/swaptest.h" /* test_swap_dir_remove; testhooks.h: test points */

#define PAGE 4096u
#define LIMIT (16u * PAGE)                  /* 16 one-page entries */
#define LOW_WM(l) ((uint64_t)(l) - (uint64_t)(l) / 8)

/* ------------------------------------------------------------------------ */
/* Pools and types                                                           */
/* ------------------------------------------------------------------------ */

/* The pool of the running test: a test that fails leaves it behind, and
 * the suite's fini removes its swap files. */
static pp_pool_t *g_ds_pool;

static void ds_fini(void) { test_swap_dir_remove(g_ds_pool); }

TestSuite(discard, .fini = ds_fini);

/* A pool with a memory limit, swapping into $TMPDIR if swap. */
static pp_pool_t *ds_pool(size_t limit, bool swap)
{
    pp_options_t o = PP_OPTIONS_INIT;
    o.mem_limit = limit;
    o.swap_dir = swap ? test_swap_parent() : NULL;
    pp_pool_t *pool = test_pool(&o);
    g_ds_pool = pool;
    return pool;
}

static void ds_destroy(pp_pool_t *pool)
{
    cr_assert(pp__pool_is_valid(pool));
    test_destroy(pool);
    g_ds_pool = NULL;
}

/* The counting type of helpers.h as a cache: its own free, no save/load
 * (a type the pool never evicted before DISCARD). */
static ct_t *ds_type(size_t cap, unsigned flags)
{
    ct_t *ct = ct_new(cap);
    ct->type.name = "cache";
    ct->type.flags = flags;
    return ct;
}

/* A one-page flat entry (type NULL: swapped as raw bytes). */
static pp_ref_t put_flat(pp_pool_t *pool, uint64_t seed)
{
    void *p = malloc(PAGE);
    cr_assert_not_null(p);
    fill_pattern(p, PAGE, seed);
    pp_ref_t ref = PP_REF_NONE;
    int rc = pp_put(pool, p, PAGE, NULL, PP_ON_NODE(0), &ref);
    cr_assert_eq(rc, 0, "pp_put(flat): %s", pp_err_name(rc));
    return ref;
}

static bool flat_intact(pp_pool_t *pool, pp_ref_t ref, uint64_t seed)
{
    void *p = NULL;
    if (pp_pin(pool, ref, 0, &p) != 0)
        return false;
    bool ok = check_pattern(p, PAGE, seed);
    assert_rc(pp_unpin(pool, ref), 0);
    return ok;
}

/* A dropped entry, as any dead one: every call with its ref says so. */
static void assert_dropped(pp_pool_t *pool, pp_ref_t ref)
{
    void *p = NULL;
    pp_entry_info_t info;
    assert_rc(pp_pin(pool, ref, 0, &p), PP_ESTALE);
    assert_rc(pp_pin(pool, ref, PP_PIN_WRITE, &p), PP_ESTALE);
    assert_rc(pp_pin_many(pool, &ref, 1, 0, &p), PP_ESTALE);
    assert_rc(pp_get(pool, ref, &p), PP_ESTALE);
    assert_rc(pp_retain(pool, ref), PP_ESTALE);
    assert_rc(pp_release(pool, ref), PP_ESTALE);
    assert_rc(pp_unpin(pool, ref), PP_ESTALE);
    assert_rc(pp_prefetch(pool, ref), PP_ESTALE);
    assert_rc(pp_advise(pool, ref, PP_ADVISE_WONTNEED), PP_ESTALE);
    assert_rc(pp_stat(pool, ref, &info), PP_ESTALE);
}

/* An entry still alive, owned once, unpinned, with its bytes. */
static void assert_alive(pp_pool_t *pool, ct_t *ct, pp_ref_t ref, size_t id)
{
    pp_entry_info_t info = test_stat(pool, ref);
    cr_assert_eq(info.state & PP_STATE_DEAD, 0, "entry %zu is dead", id);
    cr_assert_eq(info.owners, 1, "entry %zu has %u owners", id, info.owners);
    void *p = NULL;
    assert_rc(pp_pin(pool, ref, 0, &p), 0);
    cr_assert(ct_check(p, id, PAGE), "entry %zu: bytes changed", id);
    assert_rc(pp_unpin(pool, ref), 0);
    cr_assert_eq(ct_frees(ct, id), 0, "entry %zu freed while alive", id);
}

/* Sorts refs[0..n) (entry ids 0..n-1) into dropped and alive: each one
 * pins with its bytes intact, or reads dropped (PP_ESTALE).  Then, after a
 * drain, checks each dropped one as assert_dropped, and its free: once,
 * on its reclaimer.  Returns how many were dropped and marks them in
 * gone[].  Without swap nothing drops meanwhile; with swap the swap
 * threads may go on (down to the low watermark), so a caller compares
 * the count with the drops counted before and after. */
static size_t check_drops(pp_pool_t *pool, ct_t *ct, const pp_ref_t *refs, size_t n, bool *gone)
{
    size_t dropped = 0;
    for (size_t i = 0; i < n; i++) {
        pp_entry_info_t info;
        if (pp_stat(pool, refs[i], &info) == 0)
            cr_assert_eq(info.state & PP_STATE_SWAPPED, 0, "cache entry %zu was written", i);
        void *p = NULL;
        int rc = pp_pin(pool, refs[i], 0, &p);
        gone[i] = rc == PP_ESTALE;
        if (gone[i]) {
            dropped++;
            continue;
        }
        assert_rc(rc, 0);
        cr_assert(ct_check(p, i, PAGE), "entry %zu: bytes changed", i);
        assert_rc(pp_unpin(pool, refs[i]), 0);
    }
    test_drain(pool);
    int tid = (int)STAT_NODE(pool, 0, reclaimer_tid);
    for (size_t i = 0; i < n; i++) {
        if (!gone[i])
            continue;
        assert_dropped(pool, refs[i]);
        cr_assert_eq(ct_frees(ct, i), 1, "dropped entry %zu: %u frees", i, ct_frees(ct, i));
        cr_assert_eq(ct_tid(ct, i), tid, "dropped entry %zu freed off its reclaimer", i);
    }
    return dropped;
}

/* check_drops, and the count against the drops counted (exactly, without
 * swap). */
static size_t check_drops_counted(pp_pool_t *pool, ct_t *ct, const pp_ref_t *refs, size_t n,
                                  bool swap, bool *gone)
{
    uint64_t before = STAT_TOTAL(pool, drops);
    size_t dropped = check_drops(pool, ct, refs, n, gone);
    uint64_t after = STAT_TOTAL(pool, drops);
    cr_assert(before <= dropped && dropped <= after, "%zu entries read dropped, %" PRIu64
              " drops counted before, %" PRIu64 " after", dropped, before, after);
    cr_assert(swap || before == after);
    return dropped;
}

/* After the puts: with swap, waits until the swap threads have brought the
 * pool back under its high watermark (they may go on dropping down to the
 * low one meanwhile), then drains. */
static void settle(pp_pool_t *pool, size_t limit, bool swap)
{
    uint64_t high = (uint64_t)limit - (uint64_t)limit / 16;
    cr_assert(!swap || WAIT_UNTIL(test_reserved(pool) <= high, TEST_WAIT_MS),
              "reserved %" PRIu64 " stays above the high watermark", test_reserved(pool));
    test_drain(pool);
}

/* ------------------------------------------------------------------------ */
/* Drops under pressure                                                      */
/* ------------------------------------------------------------------------ */

/* Twelve cache pages, then ordinary pages up to past the limit: every put
 * succeeds, cache entries making room in slot order, and nothing but
 * cache entries goes.  swap: the swap thread drops; else the putter. */
static void dropped_under_pressure(bool swap)
{
    pp_pool_t *pool = ds_pool(LIMIT, swap);
    ct_t *ct = ds_type(12, PP_TYPE_DISCARD);
    pp_ref_t cache[12], flat[10];
    for (size_t i = 0; i < 12; i++)
        cache[i] = ct_put(pool, ct, i, PAGE, PP_ON_NODE(0));
    for (size_t i = 0; i < 10; i++)
        flat[i] = put_flat(pool, 100 + i);   /* 22 pages put under a 16-page limit */
    settle(pool, LIMIT, swap);
    pp_stats_t *s = test_stats_new(pool);
    cr_assert_leq(s->resident_peak, (uint64_t)LIMIT);
    cr_assert_geq(s->total.drops, 6, "only %" PRIu64 " drops", s->total.drops);
    /* The hand starts at slot 0 and takes cache entries in slot order: it
     * never came to the flat ones (slots 12 on) while cache ones were left
     * (at most 22 - 14 go). */
    cr_assert_eq(s->total.evictions_written + s->total.evictions_clean, 0,
                 "a flat entry went while cache entries were left");
    cr_assert_eq(s->total.swap_bytes_written, 0);
    free(s);
    bool gone[12];
    size_t dropped = check_drops_counted(pool, ct, cache, 12, swap, gone);
    if (!swap) {
        /* Nothing else ran: the first ones put went first, and only
         * they were freed. */
        cr_assert_eq(STAT_TOTAL(pool, frees), dropped);
        for (size_t i = 0; i < 12; i++)
            cr_assert_eq(gone[i], i < dropped, "entry %zu: %s", i, gone[i] ? "gone" : "kept");
    }
    for (size_t i = 0; i < 10; i++)
        cr_assert(flat_intact(pool, flat[i], 100 + i));
    for (size_t i = 0; i < 12; i++)
        (void)pp_release(pool, cache[i]);    /* PP_ESTALE for the dropped */
    for (size_t i = 0; i < 10; i++)
        assert_rc(pp_release(pool, flat[i]), 0);
    test_drain(pool);
    cr_assert_eq(test_reserved(pool), 0);
    ds_destroy(pool);
    for (size_t i = 0; i < 12; i++)
        cr_assert_eq(ct_frees(ct, i), 1, "entry %zu", i);
    cr_assert_eq(atomic_load(&ct->bad), 0);
    ct_delete(ct);
}

Test(discard, dropped_under_pressure_without_swap, .timeout = 60)
{
    dropped_under_pressure(false);
}

Test(discard, dropped_under_pressure_with_swap, .timeout = 60)
{
    dropped_under_pressure(true);
}

/* With swap, cache and flat entries side by side, and more than the limit
 * of flat ones: the hand writes flat entries out (they load back intact)
 * and drops cache entries, never writing one. */
Test(discard, flat_entries_still_swap_beside_drops, .timeout = 60)
{
    pp_pool_t *pool = ds_pool(LIMIT, true);
    ct_t *ct = ds_type(8, PP_TYPE_DISCARD);
    pp_ref_t cache[8], flat[24];
    for (size_t i = 0; i < 8; i++) {
        cache[i] = ct_put(pool, ct, i, PAGE, PP_ON_NODE(0));
        flat[i] = put_flat(pool, 200 + i);
    }
    for (size_t i = 8; i < 24; i++)
        flat[i] = put_flat(pool, 200 + i);
    settle(pool, LIMIT, true);
    pp_stats_t *s = test_stats_new(pool);
    cr_assert_leq(s->resident_peak, (uint64_t)LIMIT);
    cr_assert_gt(s->total.drops, 0);
    cr_assert_gt(s->total.evictions_written, 0);
    free(s);
    bool gone[8];
    cr_assert_gt(check_drops_counted(pool, ct, cache, 8, true, gone), 0);
    for (size_t i = 0; i < 24; i++)
        cr_assert(flat_intact(pool, flat[i], 200 + i), "flat entry %zu", i);
    cr_assert_gt(STAT_TOTAL(pool, loads), 0);
    for (size_t i = 0; i < 8; i++)
        (void)pp_release(pool, cache[i]);
    test_release_and_check_empty(pool, flat, 24);
    ds_destroy(pool);
    cr_assert_eq(atomic_load(&ct->bad), 0);
    ct_delete(ct);
}

/* The advised entry goes first: with WONTNEED on one cache entry, the
 * pass that the put crossing the high watermark (15/16) starts drops that
 * one before the hand turns, and (advice in use) the hand stops at the
 * high watermark, which the drop already brought the pool to. */
Test(discard, wontneed_cache_entry_dropped_first, .timeout = 60)
{
    pp_pool_t *pool = ds_pool(LIMIT, true);
    ct_t *ct = ds_type(16, PP_TYPE_DISCARD);
    pp_ref_t cache[16];
    for (size_t i = 0; i < 15; i++)
        cache[i] = ct_put(pool, ct, i, PAGE, PP_ON_NODE(0));   /* 15 pages: at the mark */
    assert_rc(pp_advise(pool, cache[9], PP_ADVISE_WONTNEED), 0);
    cache[15] = ct_put(pool, ct, 15, PAGE, PP_ON_NODE(0));   /* past it */
    cr_assert(WAIT_UNTIL(STAT_TOTAL(pool, drops) >= 1, TEST_WAIT_MS));
    test_drain(pool);
    bool gone[16];
    cr_assert_eq(check_drops_counted(pool, ct, cache, 16, false, gone), 1);
    cr_assert_eq(ct_frees(ct, 9), 1, "another entry went before the advised one");
    for (size_t i = 0; i < 16; i++)
        (void)pp_release(pool, cache[i]);
    test_drain(pool);
    ds_destroy(pool);
    for (size_t i = 0; i < 16; i++)
        cr_assert_eq(ct_frees(ct, i), 1, "entry %zu", i);
    ct_delete(ct);
}

/* ------------------------------------------------------------------------ */
/* What is never dropped                                                     */
/* ------------------------------------------------------------------------ */

/* A full pool of pinned (and one escaped) cache entries: a put that does
 * not fit gets PP_ENOMEM, with or without PP_PUT_NOWAIT, and nothing is
 * dropped.  Unpinning one makes room: that one goes, no other. */
static void pinned_never_dropped(bool swap)
{
    pp_pool_t *pool = ds_pool(LIMIT, swap);
    ct_t *ct = ds_type(17, PP_TYPE_DISCARD);
    pp_ref_t cache[16];
    void *p = NULL;
    for (size_t i = 0; i < 16; i++) {
        cache[i] = ct_put(pool, ct, i, PAGE, PP_ON_NODE(0));
        if (i == 15)
            assert_rc(pp_get(pool, cache[i], &p), 0);           /* escaped */
        else
            assert_rc(pp_pin(pool, cache[i], i % 2 ? PP_PIN_WRITE : 0, &p), 0);
    }
    void *extra = ct_buf(ct, 16, PAGE);
    pp_ref_t r = PP_REF_NONE;
    assert_rc(pp_put(pool, extra, PAGE, &ct->type, PP_ON_NODE(0), &r), PP_ENOMEM);
    assert_rc(pp_put(pool, extra, PAGE, &ct->type, PP_ON_NODE(0) | PP_PUT_NOWAIT, &r),
              swap ? PP_EAGAIN : PP_ENOMEM);
    cr_assert_eq(STAT_TOTAL(pool, drops), 0);
    for (size_t i = 0; i < 16; i++) {
        pp_entry_info_t info = test_stat(pool, cache[i]);
        cr_assert_eq(info.state & PP_STATE_DEAD, 0, "pinned entry %zu died", i);
        cr_assert_eq(ct_frees(ct, i), 0);
    }
    /* One unpinned: it makes the room, alone (with swap the swap thread,
     * back at the limit, may then drop the new entry too: the only other
     * candidate). */
    assert_rc(pp_unpin(pool, cache[4]), 0);
    assert_rc(pp_put(pool, extra, PAGE, &ct->type, PP_ON_NODE(0), &r), 0);
    test_drain(pool);
    cr_assert_geq(STAT_TOTAL(pool, drops), 1);
    cr_assert_leq(STAT_TOTAL(pool, drops), swap ? 2 : 1);
    assert_dropped(pool, cache[4]);
    cr_assert_eq(ct_frees(ct, 4), 1);
    for (size_t i = 0; i < 16; i++) {
        if (i == 4)
            continue;
        cr_assert(ct_check(pp_get(pool, cache[i], &p) == 0 ? p : NULL, i, PAGE),
                  "entry %zu", i);
        if (i != 15)
            assert_rc(pp_unpin(pool, cache[i]), 0);
        assert_rc(pp_release(pool, cache[i]), 0);
    }
    int rc = pp_release(pool, r);
    cr_assert(rc == 0 || (swap && rc == PP_ESTALE), "got %s", pp_err_name(rc));
    test_drain(pool);
    ds_destroy(pool);
    for (size_t i = 0; i < 17; i++)
        cr_assert_eq(ct_frees(ct, i), 1, "entry %zu", i);
    cr_assert_eq(atomic_load(&ct->bad), 0);
    ct_delete(ct);
}

Test(discard, pinned_or_escaped_never_dropped_without_swap, .timeout = 60)
{
    pinned_never_dropped(false);
}

Test(discard, pinned_or_escaped_never_dropped_with_swap, .timeout = 60)
{
    pinned_never_dropped(true);
}

/* PP_TYPE_NOSWAP wins over PP_TYPE_DISCARD; a pool without swap and
 * without cache entries keeps its hard cap; without a limit the flag
 * changes nothing. */
Test(discard, noswap_wins_and_hard_cap_kept, .timeout = 60)
{
    pp_pool_t *pool = ds_pool(LIMIT, false);
    ct_t *ct = ds_type(17, PP_TYPE_DISCARD | PP_TYPE_NOSWAP);
    pp_ref_t r[16];
    for (size_t i = 0; i < 16; i++)
        r[i] = ct_put(pool, ct, i, PAGE, PP_ON_NODE(0));
    void *extra = ct_buf(ct, 16, PAGE);
    pp_ref_t x = PP_REF_NONE;
    assert_rc(pp_put(pool, extra, PAGE, &ct->type, PP_ON_NODE(0), &x), PP_ENOMEM);
    assert_rc(pp_put(pool, extra, PAGE, &ct->type, PP_PUT_NOWAIT, &x), PP_ENOMEM);
    assert_rc(pp_put(pool, extra, PAGE, NULL, 0, &x), PP_ENOMEM);
    pp_stats_t *s = test_stats_new(pool);
    cr_assert_eq(s->total.drops, 0);
    cr_assert_eq(s->room_waits, 0, "a pool with nothing to drop waited");
    free(s);
    for (size_t i = 0; i < 16; i++)
        assert_rc(pp_release(pool, r[i]), 0);
    test_drain(pool);
    ds_destroy(pool);
    free(extra);
    ct_delete(ct);

    pool = ds_pool(0, false);                /* no limit: nothing ever drops */
    ct = ds_type(64, PP_TYPE_DISCARD);
    for (size_t i = 0; i < 64; i++)
        assert_rc(pp_release(pool, ct_put(pool, ct, i, PAGE, 0)), 0);
    test_drain(pool);
    cr_assert_eq(STAT_TOTAL(pool, drops), 0);
    ds_destroy(pool);
    ct_delete(ct);
}

/* PP_PUT_NOWAIT without swap: the putter drops, and gets PP_EAGAIN until
 * the reclaimer has freed what it dropped (or 0 if that was quick). */
Test(discard, nowait_put_drops_then_fits, .timeout = 60)
{
    pp_pool_t *pool = ds_pool(LIMIT, false);
    ct_t *ct = ds_type(17, PP_TYPE_DISCARD);
    pp_ref_t r[16];
    for (size_t i = 0; i < 16; i++)
        r[i] = ct_put(pool, ct, i, PAGE, PP_ON_NODE(0));
    void *extra = ct_buf(ct, 16, PAGE);
    pp_ref_t x = PP_REF_NONE;
    int rc = pp_put(pool, extra, PAGE, &ct->type, PP_ON_NODE(0) | PP_PUT_NOWAIT, &x);
    cr_assert(rc == 0 || rc == PP_EAGAIN, "got %s", pp_err_name(rc));
    cr_assert_geq(STAT_TOTAL(pool, drops), 1);
    uint64_t drops = STAT_TOTAL(pool, drops);
    cr_assert(WAIT_UNTIL(rc == 0 || (rc = pp_put(pool, extra, PAGE, &ct->type,
                                                 PP_ON_NODE(0) | PP_PUT_NOWAIT, &x)) == 0,
                         TEST_WAIT_MS), "last %s", pp_err_name(rc));
    /* Retries drop nothing more: the first drops are counted as room. */
    cr_assert_eq(STAT_TOTAL(pool, drops), drops);
    pp_stats_t *s = test_stats_new(pool);
    cr_assert_eq(s->room_waits, 0, "a PP_PUT_NOWAIT put waited");
    free(s);
    bool gone[16];
    check_drops_counted(pool, ct, r, 16, false, gone);
    for (size_t i = 0; i < 16; i++)
        (void)pp_release(pool, r[i]);
    assert_rc(pp_release(pool, x), 0);
    test_drain(pool);
    ds_destroy(pool);
    for (size_t i = 0; i < 17; i++)
        cr_assert_eq(ct_frees(ct, i), 1, "entry %zu", i);
    ct_delete(ct);
}

/* A QSBR thread inside its section holds back the grace period the
 * dropped bytes wait for: its put gets PP_ENOMEM rather than wait on
 * itself, and fits once it has quiesced. */
Test(discard, qsbr_caller_inside_its_section_gets_enomem, .timeout = 60)
{
    pp_pool_t *pool = ds_pool(LIMIT, false);
    ct_t *ct = ds_type(17, PP_TYPE_DISCARD);
    pp_ref_t r[16];
    for (size_t i = 0; i < 16; i++)
        r[i] = ct_put(pool, ct, i, PAGE, PP_ON_NODE(0));
    pp_quiescent(pool);
    pp_entry_info_t info;
    assert_rc(pp_stat(pool, r[15], &info), 0);   /* a section, until the next quiescent */
    void *extra = ct_buf(ct, 16, PAGE);
    pp_ref_t x = PP_REF_NONE;
    assert_rc(pp_put(pool, extra, PAGE, &ct->type, PP_ON_NODE(0), &x), PP_ENOMEM);
    cr_assert_geq(STAT_TOTAL(pool, drops), 1);
    pp_quiescent(pool);
    assert_rc(pp_put(pool, extra, PAGE, &ct->type, PP_ON_NODE(0), &x), 0);
    bool gone[16];
    check_drops_counted(pool, ct, r, 16, false, gone);
    for (size_t i = 0; i < 16; i++)
        (void)pp_release(pool, r[i]);
    assert_rc(pp_release(pool, x), 0);
    test_drain(pool);
    ds_destroy(pool);
    ct_delete(ct);
}

/* ------------------------------------------------------------------------ */
/* Races with a drop, set up at its test points                              */
/* ------------------------------------------------------------------------ */

typedef struct at_point {
    enum pp__test_point where;
    pp_pool_t *pool;
    pp_ref_t ref;
    _Atomic int hits;
    int pin, retain, release, stat;          /* what the calls returned there */
    pp_entry_info_t info;
} at_point_t;

/* Runs on the dropping thread: pins (at the claim), or tries every owner
 * call (at the death), on the ref the test names, once. */
static void at_point_fn(enum pp__test_point where, void *arg, void *ctx)
{
    (void)arg;
    at_point_t *a = ctx;
    if (where != a->where || atomic_fetch_add(&a->hits, 1) != 0)
        return;
    void *p = NULL;
    a->pin = pp_pin(a->pool, a->ref, 0, &p);
    if (where == PP__TP_DROP_DEAD) {
        a->retain = pp_retain(a->pool, a->ref);
        a->release = pp_release(a->pool, a->ref);
        a->stat = pp_stat(a->pool, a->ref, &a->info);
    }
}

/* One cache entry among ordinary ones, in a full pool without swap: the
 * put that does not fit claims it. */
static pp_pool_t *one_cache_entry(ct_t *ct, pp_ref_t *cache, pp_ref_t *flat)
{
    pp_pool_t *pool = ds_pool(4 * PAGE, false);
    *cache = ct_put(pool, ct, 0, PAGE, PP_ON_NODE(0));
    for (size_t i = 0; i < 3; i++)
        flat[i] = put_flat(pool, 300 + i);
    return pool;
}

/* A pin between the drop's claim and its death wins: the drop is
 * abandoned, the entry stays alive and owned, and the put (nothing else to
 * drop) gets PP_ENOMEM.  Once unpinned, the entry goes. */
Test(discard, pin_during_drop_claim_wins, .timeout = 60)
{
    ct_t *ct = ds_type(2, PP_TYPE_DISCARD);
    pp_ref_t cache, flat[3];
    pp_pool_t *pool = one_cache_entry(ct, &cache, flat);
    at_point_t a = {.where = PP__TP_DROP_CLAIMED, .pool = pool, .ref = cache, .pin = 1};
    pp__test_point_hook(at_point_fn, &a);
    void *extra = ct_buf(ct, 1, PAGE);
    pp_ref_t x = PP_REF_NONE;
    assert_rc(pp_put(pool, extra, PAGE, &ct->type, PP_ON_NODE(0), &x), PP_ENOMEM);
    pp__test_point_hook(NULL, NULL);
    cr_assert_geq(atomic_load(&a.hits), 1, "the drop never claimed the cache entry");
    assert_rc(a.pin, 0);
    pp_entry_info_t info = test_stat(pool, cache);
    cr_assert_eq(info.state & PP_STATE_DEAD, 0, "the pinned entry was dropped");
    cr_assert_eq(info.owners, 1);
    cr_assert_eq(info.pins, 1);
    cr_assert_eq(STAT_TOTAL(pool, drops), 0);
    cr_assert_geq(STAT_TOTAL(pool, evictions_abandoned), 1);
    assert_rc(pp_retain(pool, cache), 0);
    assert_rc(pp_release(pool, cache), 0);
    assert_rc(pp_unpin(pool, cache), 0);
    assert_alive(pool, ct, cache, 0);
    /* Unpinned, it makes the room. */
    assert_rc(pp_put(pool, extra, PAGE, &ct->type, PP_ON_NODE(0), &x), 0);
    test_drain(pool);
    assert_dropped(pool, cache);
    cr_assert_eq(ct_frees(ct, 0), 1);
    (void)pp_release(pool, x);                /* the new entry: may have been dropped too */
    test_release_and_check_empty(pool, flat, 3);
    ds_destroy(pool);
    cr_assert_eq(ct_frees(ct, 1), 1);
    cr_assert_eq(atomic_load(&ct->bad), 0);
    ct_delete(ct);
}

/* Between the drop's death and the taking of its owners, the owners word
 * still counts one; a pin, retain and release all get PP_ESTALE, and
 * pp_stat shows the entry dead with no owner.  The free runs once. */
Test(discard, calls_after_drop_death_are_stale, .timeout = 60)
{
    ct_t *ct = ds_type(2, PP_TYPE_DISCARD);
    pp_ref_t cache, flat[3];
    pp_pool_t *pool = one_cache_entry(ct, &cache, flat);
    at_point_t a = {.where = PP__TP_DROP_DEAD, .pool = pool, .ref = cache, .pin = 1,
                    .retain = 1, .release = 1, .stat = 1};
    pp__test_point_hook(at_point_fn, &a);
    void *extra = ct_buf(ct, 1, PAGE);
    pp_ref_t x = PP_REF_NONE;
    assert_rc(pp_put(pool, extra, PAGE, &ct->type, PP_ON_NODE(0), &x), 0);
    pp__test_point_hook(NULL, NULL);
    cr_assert_eq(atomic_load(&a.hits), 1);
    assert_rc(a.pin, PP_ESTALE);
    assert_rc(a.retain, PP_ESTALE);
    assert_rc(a.release, PP_ESTALE);
    assert_rc(a.stat, 0);                     /* not queued yet: described */
    cr_assert(a.info.state & PP_STATE_DEAD);
    cr_assert_eq(a.info.owners, 0);
    cr_assert_eq(a.info.pins, 0);
    test_drain(pool);
    assert_dropped(pool, cache);
    cr_assert_eq(ct_frees(ct, 0), 1);
    cr_assert_eq(STAT_TOTAL(pool, drops), 1);
    assert_rc(pp_release(pool, x), 0);
    test_release_and_check_empty(pool, flat, 3);
    ds_destroy(pool);
    cr_assert_eq(atomic_load(&ct->bad), 0);
    ct_delete(ct);
}

/* ------------------------------------------------------------------------ */
/* Pins, retains and releases racing the drops puts force                    */
/* ------------------------------------------------------------------------ */

#define RACE_SLOTS 96                        /* refs live at once, of 64 that fit */
#define RACE_ENT 1024u
#define RACE_LIMIT (64u * RACE_ENT)
#define RACE_PUTTERS 2
#define RACE_PINNERS 3

typedef struct race {
    pp_pool_t *pool;
    ct_t *ct;
    size_t per_putter;
    _Atomic pp_ref_t slot[RACE_SLOTS];
    _Atomic int putters_left;
    _Atomic uint64_t pins, stale, retained;
} race_t;

typedef struct race_arg {
    race_t *r;
    unsigned index;
} race_arg_t;

/* Puts cache entries into its half of the slots, releasing the entry it
 * replaces (which may have been dropped: PP_ESTALE). */
static void *race_putter(void *arg)
{
    race_arg_t *ra = arg;
    race_t *r = ra->r;
    for (size_t k = 0; k < r->per_putter; k++) {
        size_t id = ra->index * r->per_putter + k;
        size_t s = ra->index + RACE_PUTTERS * (k % (RACE_SLOTS / RACE_PUTTERS));
        void *buf = ct_buf(r->ct, id, RACE_ENT);
        pp_ref_t ref = PP_REF_NONE;
        int rc = pp_put(r->pool, buf, RACE_ENT, &r->ct->type, k % 3 ? 0 : PP_ON_NODE(0), &ref);
        TCHECK(rc == 0, "pp_put(%zu): %s", id, pp_err_name(rc));
        if (rc != 0) {
            free(buf);
            break;
        }
        pp_ref_t old = atomic_exchange(&r->slot[s], ref);
        if (old != PP_REF_NONE) {
            rc = pp_release(r->pool, old);
            TCHECK(rc == 0 || rc == PP_ESTALE, "pp_release: %s", pp_err_name(rc));
        }
    }
    atomic_fetch_sub(&r->putters_left, 1);
    return NULL;
}

/* Pins whatever the slots hold (read, write, in pairs with pp_pin_many),
 * checks the bytes under the pin, and retains and releases now and then. */
static void *race_pinner(void *arg)
{
    race_arg_t *ra = arg;
    race_t *r = ra->r;
    uint64_t st = 0x9e37u + ra->index;
    while (atomic_load(&r->putters_left) > 0) {
        uint64_t x = splitmix64(&st);
        pp_ref_t ref = atomic_load(&r->slot[x % RACE_SLOTS]);
        if (ref == PP_REF_NONE)
            continue;
        void *p = NULL;
        unsigned flags = (x >> 8) % 4 == 0 ? PP_PIN_WRITE : 0;
        int rc = pp_pin(r->pool, ref, flags, &p);
        if (rc == PP_ESTALE) {
            atomic_fetch_add(&r->stale, 1);
            continue;
        }
        TCHECK(rc == 0, "pp_pin: %s", pp_err_name(rc));
        if (rc != 0)
            continue;
        const ct_hdr_t *h = p;
        TCHECK(ct_check(p, h->id, RACE_ENT), "bytes of entry %" PRIu64 " changed under a pin",
               h->id);
        if ((x >> 16) % 8 == 0)
            sched_yield();                   /* hold it across a drop pass */
        if ((x >> 20) % 4 == 0) {
            /* A second owner: its release may find the entry dropped. */
            rc = pp_retain(r->pool, ref);
            TCHECK(rc == 0 || rc == PP_ESTALE, "pp_retain: %s", pp_err_name(rc));
            if (rc == 0) {
                atomic_fetch_add(&r->retained, 1);
                rc = pp_release(r->pool, ref);
                TCHECK(rc == 0 || rc == PP_ESTALE, "pp_release: %s", pp_err_name(rc));
            }
        }
        TCHECK(ct_check(p, h->id, RACE_ENT), "bytes changed under a pin");
        rc = pp_unpin(r->pool, ref);
        TCHECK(rc == 0, "pp_unpin of a pinned entry: %s", pp_err_name(rc));
        atomic_fetch_add(&r->pins, 1);
    }
    return NULL;
}

static void pins_race_drops(bool swap, size_t per_putter)
{
    pp_pool_t *pool = ds_pool(RACE_LIMIT, swap);
    race_t *r = calloc(1, sizeof *r);
    cr_assert_not_null(r);
    r->pool = pool;
    r->ct = ds_type(RACE_PUTTERS * per_putter, PP_TYPE_DISCARD);
    r->per_putter = per_putter;
    atomic_store(&r->putters_left, RACE_PUTTERS);
    pthread_t th[RACE_PUTTERS + RACE_PINNERS];
    race_arg_t args[RACE_PUTTERS + RACE_PINNERS];
    for (unsigned i = 0; i < RACE_PUTTERS + RACE_PINNERS; i++) {
        args[i] = (race_arg_t){r, i < RACE_PUTTERS ? i : i - RACE_PUTTERS};
        test_thread_start(&th[i], i < RACE_PUTTERS ? race_putter : race_pinner, &args[i]);
    }
    for (unsigned i = 0; i < RACE_PUTTERS + RACE_PINNERS; i++)
        test_thread_join(th[i]);
    TCHECK_NONE();
    for (size_t s = 0; s < RACE_SLOTS; s++) {
        pp_ref_t ref = atomic_load(&r->slot[s]);
        if (ref != PP_REF_NONE) {
            int rc = pp_release(pool, ref);
            cr_assert(rc == 0 || rc == PP_ESTALE, "pp_release: %s", pp_err_name(rc));
        }
    }
    test_drain(pool);
    pp_stats_t *s = test_stats_new(pool);
    cr_assert_eq(s->total.puts, RACE_PUTTERS * per_putter);
    cr_assert_eq(s->total.frees, s->total.puts);
    cr_assert_eq(s->total.entries, 0);
    cr_assert_gt(s->total.drops, 0, "no drop: the race did not happen");
    cr_assert_leq(s->resident_peak, (uint64_t)RACE_LIMIT);
    cr_assert_eq(s->resident_reserved, 0);
    cr_assert_eq(s->total.swap_bytes_written, 0);
    cr_assert_gt(atomic_load(&r->pins), 0);
    free(s);
    ds_destroy(pool);
    for (size_t i = 0; i < RACE_PUTTERS * per_putter; i++)
        cr_assert_eq(ct_frees(r->ct, i), 1, "entry %zu freed %u times", i, ct_frees(r->ct, i));
    cr_assert_eq(atomic_load(&r->ct->bad), 0);
    ct_delete(r->ct);
    free(r);
}

Test(discard, pins_race_drops_without_swap, .timeout = 120)
{
    pins_race_drops(false, 3000);
}

Test(discard, pins_race_drops_with_swap, .timeout = 120)
{
    pins_race_drops(true, 3000);
}
