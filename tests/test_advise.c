/*
 * test_advise.c -- eviction advice (src/swap/advise.c, and its use by the
 * hand in src/swap/evict.c): pp_advise's errors, WONTNEED entries evicted
 * before any other (clean before dirty, highest slot first), a pin winning
 * over any advice, WILLNEED loading a swapped entry and sparing a resident
 * one once more, NORMAL dropping either, advice dying with its entry, and
 * advice given at random while pins, puts and releases race.
 *
 * How one eviction is forced, deterministically.  A pool of ROW entries of
 * ENT bytes sits under both watermarks; one more ENT-sized entry crosses
 * the high one (15/16 of the limit) and still fits, so the put does not
 * wait, and the node's swap thread evicts until the pool is under the low
 * watermark (7/8) again: exactly one entry, since ROW entries fit under
 * it.  Such a limit exists only for ROW < 14 (one entry must be larger
 * than the 1/16 between the watermarks while ROW of them fit under 7/8),
 * hence 12 entries of 64 KiB under 880 KiB.  The entry that forces the
 * eviction is of a PP_TYPE_NOSWAP type, so the only candidates are the
 * ROW entries, whose recency bits the test sets or leaves.  Every entry
 * lives on one node (the last one: node 3 in the numa4 runs), so one swap
 * thread makes every eviction, with a hand that starts at slot 0 in a
 * fresh pool.  Waits are bounded polls (WAIT_UNTIL) on the pool's state;
 * the fault device's read gate freezes a load to show where it runs.
 */
#include "helpers.h"
#include "support/swaptest.h"
#include "support/faultdev.h" /* faultdev_*; testhooks.h: pp__pool_is_valid */

#include <dirent.h>

#define PAGE 4096u
#define ENT (64u * 1024u)                       /* the entries of a row */
#define ROW 12                                  /* entries resident at rest */
#define LIMIT (880u * 1024u)                    /* 13.75 entries */
#define HIGH_WM(l) ((uint64_t)(l) - (uint64_t)(l) / 16)
#define LOW_WM(l) ((uint64_t)(l) - (uint64_t)(l) / 8)
#define FILL_ID 0xF111u                         /* content id of fillers */

_Static_assert((uint64_t)ROW * ENT <= LOW_WM(LIMIT), "a row rests under the low watermark");
_Static_assert((uint64_t)(ROW + 1) * ENT > HIGH_WM(LIMIT), "one more crosses the high one");
_Static_assert((uint64_t)(ROW + 1) * ENT <= LIMIT, "and fits: the put does not wait");

/* ------------------------------------------------------------------------ */
/* Pools                                                                     */
/* ------------------------------------------------------------------------ */

/* The pool of the running test, until ad_finish destroys it: a test that
 * fails leaves it behind, and the suite's fini removes its swap files. */
static pp_pool_t *g_ad_pool;

static void ad_fini(void) { test_swap_dir_remove(g_ad_pool); }

TestSuite(advise, .fini = ad_fini);

/* A swapping pool on the fault device; *fd (if asked) is valid until
 * pp_pool_destroy. */
static pp_pool_t *ad_pool(size_t limit, faultdev_t **fd)
{
    pp_options_t o = PP_OPTIONS_INIT;
    o.mem_limit = limit;
    o.swap_dir = test_swap_parent();
    faultdev_t *f = faultdev_new();
    cr_assert_not_null(f);
    pp_pool_t *pool = NULL;
    int rc = faultdev_pool_create(&o, f, &pool);
    cr_assert_eq(rc, 0, "faultdev_pool_create: %s", pp_err_name(rc));
    if (fd != NULL)
        *fd = f;
    g_ad_pool = pool;
    return pool;
}

static uint64_t evictions(pp_pool_t *pool)
{
    return STAT_TOTAL(pool, evictions_written) + STAT_TOTAL(pool, evictions_clean);
}

/* Releases refs, drains, checks that nothing is left
 * (test_release_and_check_empty), and destroys the pool. */
static void ad_finish(pp_pool_t *pool, const pp_ref_t *refs, size_t n)
{
    test_release_and_check_empty(pool, refs, n);
    cr_assert_leq(STAT_TOTAL(pool, evictions_advised),
                  STAT_TOTAL(pool, evictions_written) + STAT_TOTAL(pool, evictions_clean));
    test_destroy(pool);
    g_ad_pool = NULL;
}

/* The node every entry of the ordering tests lives on. */
static unsigned last_node(pp_pool_t *pool) { return test_nodes(pool) - 1; }

/* ------------------------------------------------------------------------ */
/* Contents                                                                  */
/* ------------------------------------------------------------------------ */

/* An entry's bytes: ct_hdr_t (magic, id, size, seed) and a pattern.  NULL
 * if malloc fails (worker threads must not assert). */
static void *buf_make(size_t id, size_t size)
{
    ct_hdr_t *h = malloc(size);
    if (h == NULL)
        return NULL;
    h->magic = CT_MAGIC;
    h->id = id;
    h->size = size;
    h->seed = ct_seed(id);
    fill_pattern(h + 1, size - sizeof *h, h->seed);
    return h;
}

static bool buf_check(const void *p, size_t id, size_t size)
{
    const ct_hdr_t *h = p;
    return p != NULL && h->magic == CT_MAGIC && h->id == id && h->size == size &&
           h->seed == ct_seed(id) && check_pattern(h + 1, size - sizeof *h, h->seed);
}

/* Never evicted: what forces an eviction without being a candidate. */
static const pp_type_t noswap_type = {.name = "noswap", .flags = PP_TYPE_NOSWAP};

static pp_ref_t put_typed(pp_pool_t *pool, size_t id, size_t size, unsigned node,
                          const pp_type_t *type)
{
    void *p = buf_make(id, size);
    cr_assert_not_null(p);
    pp_ref_t ref = PP_REF_NONE;
    int rc = pp_put(pool, p, size, type, PP_ON_NODE(node), &ref);
    cr_assert_eq(rc, 0, "pp_put(%zu): %s", id, pp_err_name(rc));
    return ref;
}

/* A flat entry: swapped as raw bytes, loaded back into malloc'd memory. */
static pp_ref_t put_flat(pp_pool_t *pool, size_t id, size_t size, unsigned node)
{
    return put_typed(pool, id, size, node, NULL);
}

/* Pins ref, checks its bytes, unpins: it is resident now, recency bit set. */
static void touch(pp_pool_t *pool, pp_ref_t ref, size_t id, size_t size)
{
    void *d = NULL;
    assert_rc(pp_pin(pool, ref, 0, &d), 0);
    cr_assert(buf_check(d, id, size), "entry %zu: wrong bytes", id);
    assert_rc(pp_unpin(pool, ref), 0);
}

/* A put from a thread of its own, whose empty slot magazine takes the
 * node's free-slot stack: the put reuses the slot reclaimed last. */
typedef struct put_call {
    pp_pool_t *pool;
    size_t id;
    unsigned node;
    pp_ref_t ref;
    int rc;
} put_call_t;

static void *put_main(void *arg)
{
    put_call_t *c = arg;
    void *p = buf_make(c->id, ENT);
    c->rc = p == NULL ? PP_ENOMEM : pp_put(c->pool, p, ENT, NULL, PP_ON_NODE(c->node), &c->ref);
    if (c->rc != 0)
        free(p);
    return NULL;
}

static pp_ref_t put_on_new_thread(pp_pool_t *pool, size_t id, unsigned node)
{
    put_call_t c = {pool, id, node, PP_REF_NONE, 0};
    pthread_t th;
    test_thread_start(&th, put_main, &c);
    test_thread_join(th);
    assert_rc(c.rc, 0);
    return c.ref;
}

/* ------------------------------------------------------------------------ */
/* States                                                                    */
/* ------------------------------------------------------------------------ */

static unsigned state_of(pp_pool_t *pool, pp_ref_t ref) { return test_stat(pool, ref).state; }

static bool is_swapped_out(pp_pool_t *pool, pp_ref_t ref)
{
    unsigned s = state_of(pool, ref);
    return (s & (PP_STATE_RESIDENT | PP_STATE_SWAPPED | PP_STATE_LOADING)) == PP_STATE_SWAPPED;
}

/*
 * Makes target (unpinned, on node) swapped out, as test_evict's swap_out:
 * puts one-page fillers until it is, releasing each filler once it is
 * swapped out, then releases the rest and waits until all are freed (so
 * the pool holds what it held before, target swapped).
 */
#define SWAP_OUT_MAX 1024
static void swap_out(pp_pool_t *pool, unsigned node, pp_ref_t target)
{
    pp_ref_t *fill = calloc(SWAP_OUT_MAX, sizeof *fill);
    cr_assert_not_null(fill);
    uint64_t frees0 = STAT_TOTAL(pool, frees);
    size_t nf = 0, released = 0;
    while (!is_swapped_out(pool, target)) {
        cr_assert_lt(nf, SWAP_OUT_MAX, "target still resident after %zu fillers", nf);
        fill[nf++] = put_flat(pool, FILL_ID, PAGE, node);
        size_t before = released;
        for (size_t i = 0; i < nf; i++) {
            if (fill[i] != PP_REF_NONE && is_swapped_out(pool, fill[i])) {
                assert_rc(pp_release(pool, fill[i]), 0);
                fill[i] = PP_REF_NONE;
                released++;
            }
        }
        if (released != before)
            cr_assert(WAIT_UNTIL(STAT_TOTAL(pool, frees) >= frees0 + released, TEST_WAIT_MS));
    }
    for (size_t i = 0; i < nf; i++) {
        if (fill[i] != PP_REF_NONE)
            assert_rc(pp_release(pool, fill[i]), 0);
    }
    cr_assert(WAIT_UNTIL(STAT_TOTAL(pool, frees) >= frees0 + nf, TEST_WAIT_MS));
    /* The target's eviction commits (its state reads swapped out) before
     * the swap thread frees its bytes and returns their reservation; the
     * drain waits for that tail, so the caller may count reserved bytes. */
    test_drain(pool);
    free(fill);
}

/* Puts a row of ROW flat entries (ids 0..ROW-1) on node, in increasing
 * slots; touched: each pinned once (recency bit set), else none is. */
static void row_put(pp_pool_t *pool, unsigned node, pp_ref_t row[ROW], bool touched)
{
    for (size_t i = 0; i < ROW; i++) {
        row[i] = put_flat(pool, i, ENT, node);
        if (i > 0)
            cr_assert_gt(pp_ref_slot(row[i]), pp_ref_slot(row[i - 1]), "a fresh pool's slots");
    }
    if (touched) {
        for (size_t i = 0; i < ROW; i++)
            touch(pool, row[i], i, ENT);
    }
    cr_assert_eq(test_reserved(pool), (uint64_t)ROW * ENT);
}

/* Puts one more (never evicted) entry: the swap thread evicts exactly one
 * entry of ENT bytes.  Returns the new entry's ref. */
static pp_ref_t push(pp_pool_t *pool, unsigned node, size_t id)
{
    uint64_t ev0 = evictions(pool);
    pp_ref_t ref = put_typed(pool, id, ENT, node, &noswap_type);
    cr_assert(WAIT_UNTIL(test_reserved(pool) <= LOW_WM(LIMIT), TEST_WAIT_MS),
              "the swap thread never got under the low watermark");
    cr_assert_eq(test_reserved(pool), (uint64_t)ROW * ENT, "more than one entry evicted");
    cr_assert_eq(evictions(pool), ev0 + 1);
    return ref;
}

/* The one entry of refs swapped out (asserts the others are resident). */
static size_t victim(pp_pool_t *pool, const pp_ref_t *refs, size_t n)
{
    size_t v = n;
    for (size_t i = 0; i < n; i++) {
        if (refs[i] == PP_REF_NONE)
            continue;
        unsigned s = state_of(pool, refs[i]);
        if (is_swapped_out(pool, refs[i])) {
            cr_assert_eq(v, n, "entries %zu and %zu both evicted", v, i);
            v = i;
        } else {
            cr_assert(s & PP_STATE_RESIDENT, "entry %zu: state 0x%x", i, s);
        }
    }
    cr_assert_lt(v, n, "no entry of the row evicted");
    return v;
}

static uint64_t advised(pp_pool_t *pool, unsigned node)
{
    uint64_t total = STAT_TOTAL(pool, evictions_advised);
    cr_assert_eq(STAT_NODE(pool, node, evictions_advised), total, "counted on another node");
    return total;
}

/* ======================================================================== */
/* 1. Errors                                                                 */
/* ======================================================================== */

static const unsigned all_advice[3] = {PP_ADVISE_NORMAL, PP_ADVISE_WILLNEED, PP_ADVISE_WONTNEED};

static void assert_stale(pp_pool_t *pool, pp_ref_t ref, const char *what)
{
    for (int a = 0; a < 3; a++) {
        int rc = pp_advise(pool, ref, all_advice[a]);
        cr_assert_eq(rc, PP_ESTALE, "%s (0x%016" PRIx64 "), advice %u: %s", what, ref,
                     all_advice[a], pp_err_name(rc));
    }
}

/* Garbage refs, each naming nothing: no node, no segment, an unused slot,
 * generation 0, or a live slot with the wrong generation. */
static void assert_garbage_stale(pp_pool_t *pool, pp_ref_t live)
{
    unsigned node = pp_ref_node(live);
    pp_ref_t slot_of_live = live & ~(pp_ref_t)0xffffffffu;
    const pp_ref_t garbage[] = {
        ((pp_ref_t)63 << 58) | ((pp_ref_t)1 << 32) | 1u,
        ((pp_ref_t)node << 58) | ((pp_ref_t)0x3FFFFFFu << 32) | 1u,
        ((pp_ref_t)node << 58) | ((pp_ref_t)63 << 32) | 1u,
        slot_of_live,
        slot_of_live | (uint32_t)(pp_ref_gen(live) + 1u),
        slot_of_live | (uint32_t)(pp_ref_gen(live) ^ 0x80000000u),
        0xdeadbeefcafef00dull,
        ~(pp_ref_t)0,
    };
    assert_stale(pool, PP_REF_NONE, "PP_REF_NONE");
    for (size_t i = 0; i < sizeof garbage / sizeof garbage[0]; i++)
        assert_stale(pool, garbage[i], "a garbage ref");
}

/* Errors common to pools with and without swap; entries on node. */
static void errors_in(pp_pool_t *pool, unsigned node)
{
    pp_ref_t x = put_flat(pool, 0, PAGE, node);
    for (int a = 0; a < 3; a++) {
        assert_rc(pp_advise(NULL, x, all_advice[a]), PP_EINVAL);
        assert_rc(pp_advise(pool, x, all_advice[a]), 0);
    }
    assert_rc(pp_advise(NULL, PP_REF_NONE, PP_ADVISE_NORMAL), PP_EINVAL);
    assert_rc(pp_advise(pool, x, 3u), PP_EINVAL);
    assert_rc(pp_advise(pool, x, 0xffffffffu), PP_EINVAL);
    assert_garbage_stale(pool, x);
    touch(pool, x, 0, PAGE);                                   /* nothing changed the entry */

    /* Dead but still pinned (pp_stat still describes it), then reclaimed. */
    void *d = NULL;
    assert_rc(pp_pin(pool, x, 0, &d), 0);
    assert_rc(pp_release(pool, x), 0);
    cr_assert(state_of(pool, x) & PP_STATE_DEAD);
    assert_stale(pool, x, "a dead, pinned entry");
    cr_assert(buf_check(d, 0, PAGE));
    assert_rc(pp_unpin(pool, x), 0);
    test_drain(pool);
    assert_stale(pool, x, "a reclaimed entry");

    /* The slot in use again, by a new entry: the old ref stays stale. */
    pp_ref_t y = put_on_new_thread(pool, 1, node);
    cr_assert_eq(pp_ref_slot(y), pp_ref_slot(x), "the reclaimed slot was not reused");
    cr_assert_neq(pp_ref_gen(y), pp_ref_gen(x));
    assert_stale(pool, x, "a recycled slot's old ref");
    for (int a = 0; a < 3; a++)
        assert_rc(pp_advise(pool, y, all_advice[a]), 0);
    touch(pool, y, 1, ENT);
    assert_rc(pp_release(pool, y), 0);
    test_drain(pool);
    assert_stale(pool, y, "a reclaimed entry");
}

Test(advise, errors, .timeout = 60)
{
    /* With swap: also a swapped entry takes advice. */
    pp_pool_t *pool = ad_pool(LIMIT, NULL);
    unsigned node = last_node(pool);
    errors_in(pool, node);
    pp_ref_t s = put_flat(pool, 2, PAGE, node);
    swap_out(pool, node, s);
    assert_rc(pp_advise(pool, s, PP_ADVISE_WONTNEED), 0);
    assert_rc(pp_advise(pool, s, PP_ADVISE_NORMAL), 0);
    ad_finish(pool, &s, 1);

    /* Without swap (with and without a limit): only the ref is checked. */
    for (int limited = 0; limited < 2; limited++) {
        pp_options_t o = PP_OPTIONS_INIT;
        o.mem_limit = limited ? LIMIT : 0;
        pp_pool_t *plain = test_pool(&o);
        errors_in(plain, test_nodes(plain) - 1);
        pp_stats_t *st = test_stats_new(plain);
        cr_assert_eq(st->swap, 0);
        cr_assert_eq(st->total.loads + st->total.evictions_advised, 0);
        free(st);
        test_destroy(plain);
    }
}

/* ======================================================================== */
/* 2. WONTNEED: evicted before any other                                     */
/* ======================================================================== */

static void wontneed_first(bool touched)
{
    pp_pool_t *pool = ad_pool(LIMIT, NULL);
    unsigned node = last_node(pool);
    pp_ref_t row[ROW + 1];
    row_put(pool, node, row, touched);
    const size_t mid = ROW / 2;
    assert_rc(pp_advise(pool, row[mid], PP_ADVISE_WONTNEED), 0);
    cr_assert_eq(test_reserved(pool), (uint64_t)ROW * ENT, "nothing evicted before memory is short");
    cr_assert_eq(evictions(pool), 0);

    row[ROW] = push(pool, node, ROW);
    cr_assert_eq(victim(pool, row, ROW), mid, "the CLOCK hand chose, not the advice");
    cr_assert_eq(advised(pool, node), 1);
    cr_assert_eq(STAT_TOTAL(pool, evictions_written), 1);
    touch(pool, row[mid], mid, ENT);                 /* its bytes come back */
    ad_finish(pool, row, ROW + 1);
}

/* A row of equal entries, all unpinned: the one advised WONTNEED goes
 * first, whether the others' recency bits are set (it gets no second
 * chance) or not (the hand, from slot 0, would take entry 0). */
Test(advise, wontneed_evicted_first, .timeout = 60)
{
    wontneed_first(false);
}

Test(advise, wontneed_evicted_first_without_second_chance, .timeout = 60)
{
    wontneed_first(true);
}

/* Three advised entries: one clean (its swap copy is still valid: evicted
 * and loaded back, then only read) in the lowest slot, two dirty (never
 * written out).  They go clean first, then the dirty ones highest slot
 * first, one per forced eviction, before any entry without advice. */
Test(advise, wontneed_clean_first_then_highest_slot, .timeout = 60)
{
    pp_pool_t *pool = ad_pool(LIMIT, NULL);
    unsigned node = last_node(pool);
    pp_ref_t row[ROW + 3];
    row[0] = put_flat(pool, 0, ENT, node);
    swap_out(pool, node, row[0]);
    cr_assert_eq(test_reserved(pool), 0);
    for (size_t i = 1; i < ROW; i++)
        row[i] = put_flat(pool, i, ENT, node);
    for (size_t i = 0; i < ROW; i++)
        touch(pool, row[i], i, ENT);                 /* loads row[0]; all recency bits set */
    cr_assert_eq(test_reserved(pool), (uint64_t)ROW * ENT);
    unsigned s0 = state_of(pool, row[0]);
    cr_assert_eq(s0 & (PP_STATE_RESIDENT | PP_STATE_SWAPPED | PP_STATE_DIRTY),
                 PP_STATE_RESIDENT | PP_STATE_SWAPPED, "row[0] is not clean: 0x%x", s0);

    /* The dirty ones: the lowest and the highest slot of the others. */
    size_t lo = 1, hi = 1;
    for (size_t i = 1; i < ROW; i++) {
        cr_assert_not(state_of(pool, row[i]) & PP_STATE_SWAPPED);
        lo = pp_ref_slot(row[i]) < pp_ref_slot(row[lo]) ? i : lo;
        hi = pp_ref_slot(row[i]) > pp_ref_slot(row[hi]) ? i : hi;
    }
    cr_assert_lt(pp_ref_slot(row[0]), pp_ref_slot(row[lo]), "the clean one is lowest");
    assert_rc(pp_advise(pool, row[lo], PP_ADVISE_WONTNEED), 0);
    assert_rc(pp_advise(pool, row[0], PP_ADVISE_WONTNEED), 0);
    assert_rc(pp_advise(pool, row[hi], PP_ADVISE_WONTNEED), 0);

    /* Each victim stays swapped out (loading it back would force another
     * eviction) and leaves the candidates. */
    pp_ref_t cand[ROW];
    memcpy(cand, row, sizeof cand);
    const size_t order[3] = {0, hi, lo};
    for (size_t k = 0; k < 3; k++) {
        uint64_t clean0 = STAT_TOTAL(pool, evictions_clean);
        row[ROW + k] = push(pool, node, ROW + k);
        size_t v = victim(pool, cand, ROW);
        cr_assert_eq(v, order[k], "eviction %zu took entry %zu (slot %u), expected %zu (slot %u)",
                     k, v, pp_ref_slot(row[v]), order[k], pp_ref_slot(row[order[k]]));
        cr_assert_eq(STAT_TOTAL(pool, evictions_clean), clean0 + (k == 0),
                     "the clean one was written again, or a dirty one dropped");
        cr_assert_eq(advised(pool, node), k + 1);
        cand[v] = PP_REF_NONE;
    }
    for (size_t i = 0; i < 3; i++)
        touch(pool, row[order[i]], order[i], ENT);   /* the bytes of each come back */
    ad_finish(pool, row, ROW + 3);
}

/* ======================================================================== */
/* 3. A pin wins over any advice                                             */
/* ======================================================================== */

#define PN_FILLERS (4 * LIMIT / ENT)   /* put through the pool: 4x the limit */

/* A pinned WONTNEED entry stays resident, its bytes untouched, while
 * fillers worth four times the limit pass through the pool (each one is
 * released once evicted); once it is unpinned, the next eviction takes
 * it, though its recency bit is set. */
Test(advise, pinned_entry_never_evicted_whatever_its_advice, .timeout = 60)
{
    pp_pool_t *pool = ad_pool(LIMIT, NULL);
    unsigned node = last_node(pool);
    pp_ref_t p = put_flat(pool, 0, ENT, node);
    void *d = NULL;
    assert_rc(pp_pin(pool, p, 0, &d), 0);
    assert_rc(pp_advise(pool, p, PP_ADVISE_WONTNEED), 0);

    pp_ref_t fill[PN_FILLERS + 1];
    for (size_t k = 0; k < PN_FILLERS; k++) {
        fill[k] = put_flat(pool, FILL_ID + k, ENT, node);
        cr_assert(WAIT_UNTIL(test_reserved(pool) <= LOW_WM(LIMIT), TEST_WAIT_MS));
        size_t resident = k + 2 < ROW ? k + 2 : ROW;   /* P and the fillers, then a row */
        cr_assert_eq(test_reserved(pool), (uint64_t)resident * ENT, "filler %zu", k);
        for (size_t i = 0; i <= k; i++) {
            if (fill[i] != PP_REF_NONE && is_swapped_out(pool, fill[i])) {
                assert_rc(pp_release(pool, fill[i]), 0);
                fill[i] = PP_REF_NONE;
            }
        }
        unsigned s = state_of(pool, p);
        cr_assert_eq(s & (PP_STATE_RESIDENT | PP_STATE_SWAPPED | PP_STATE_EVICTING),
                     PP_STATE_RESIDENT, "after filler %zu the pinned entry is 0x%x", k, s);
    }
    cr_assert_eq(evictions(pool), PN_FILLERS - (ROW - 1), "one eviction per filler past a row");
    cr_assert_eq(advised(pool, node), 0);
    cr_assert(buf_check(d, 0, ENT), "the pinned entry's bytes changed");
    cr_assert_eq(test_stat(pool, p).pins, 1);
    cr_assert_eq(test_reserved(pool), (uint64_t)ROW * ENT);

    assert_rc(pp_unpin(pool, p), 0);
    fill[PN_FILLERS] = push(pool, node, FILL_ID + PN_FILLERS);
    cr_assert(is_swapped_out(pool, p), "unpinned, the advised entry was not evicted first");
    for (size_t i = 0; i < PN_FILLERS; i++)
        cr_assert(fill[i] == PP_REF_NONE || (state_of(pool, fill[i]) & PP_STATE_RESIDENT));
    cr_assert_eq(advised(pool, node), 1);
    touch(pool, p, 0, ENT);
    assert_rc(pp_release(pool, p), 0);
    ad_finish(pool, fill, PN_FILLERS + 1);
}

/* ======================================================================== */
/* 4. WILLNEED: loads, and spares once more                                  */
/* ======================================================================== */

/* On a swapped entry, WILLNEED starts its load on the swap thread and
 * returns: with the device's reads frozen the load is stuck in the swap
 * thread, not in pp_advise.  The entry becomes resident with no pin. */
Test(advise, willneed_loads_swapped_entry, .timeout = 60)
{
    faultdev_t *f;
    pp_pool_t *pool = ad_pool(LIMIT, &f);
    unsigned node = last_node(pool);
    pp_ref_t w = put_flat(pool, 0, ENT, node);
    swap_out(pool, node, w);
    pp_stats_t *s0 = test_stats_new(pool);

    faultdev_gate_close(f, true, false);
    assert_rc(pp_advise(pool, w, PP_ADVISE_WILLNEED), 0);
    cr_assert(WAIT_UNTIL(faultdev_blocked(f) >= 1, TEST_WAIT_MS), "WILLNEED started no load");
    pp_entry_info_t info = test_stat(pool, w);
    cr_assert_eq(info.state & (PP_STATE_RESIDENT | PP_STATE_LOADING), PP_STATE_LOADING);
    cr_assert_eq(info.pins, 0);
    assert_rc(pp_advise(pool, w, PP_ADVISE_WILLNEED), 0);   /* loading: nothing more */
    faultdev_gate_open(f);

    cr_assert(WAIT_UNTIL(state_of(pool, w) & PP_STATE_RESIDENT, TEST_WAIT_MS),
              "the entry advised WILLNEED never became resident");
    info = test_stat(pool, w);
    cr_assert_eq(info.pins, 0);
    cr_assert_not(info.state & PP_STATE_LOADING);
    pp_stats_t *s1 = test_stats_new(pool);
    cr_assert_eq(s1->total.loads, s0->total.loads + 1);
    cr_assert_eq(s1->total.load_waits, s0->total.load_waits);
    void *d = NULL;
    assert_rc(pp_pin(pool, w, PP_PIN_NOWAIT, &d), 0);
    cr_assert(buf_check(d, 0, ENT));
    assert_rc(pp_unpin(pool, w), 0);
    /* Resident: nothing to load. */
    assert_rc(pp_advise(pool, w, PP_ADVISE_WILLNEED), 0);
    cr_assert_eq(STAT_TOTAL(pool, loads), s1->total.loads);
    free(s0);
    free(s1);
    ad_finish(pool, &w, 1);
}

/* row[0] (slot 0, where a fresh pool's hand starts) is advised WILLNEED,
 * row[1] is not, both in the same recency state.  The forced eviction
 * takes row[1]: the hand passes row[0] over once more.  Only once: with
 * fillers passing through, the hand comes round and takes row[0] too. */
#define WS_FILLERS 512                 /* bound: the hand comes round well before */

static void willneed_spared_once(bool touched)
{
    pp_pool_t *pool = ad_pool(LIMIT, NULL);
    unsigned node = last_node(pool);
    pp_ref_t row[ROW + 1];
    row_put(pool, node, row, touched);
    uint64_t loads0 = STAT_TOTAL(pool, loads);
    assert_rc(pp_advise(pool, row[0], PP_ADVISE_WILLNEED), 0);
    cr_assert_eq(STAT_TOTAL(pool, loads), loads0, "a resident entry was loaded");

    row[ROW] = push(pool, node, ROW);
    cr_assert_eq(victim(pool, row, ROW), 1, "the hand took the entry advised WILLNEED");
    cr_assert_eq(advised(pool, node), 0);

    pp_ref_t *fill = calloc(WS_FILLERS, sizeof *fill);
    cr_assert_not_null(fill);
    size_t k = 0;
    for (; k < WS_FILLERS && !is_swapped_out(pool, row[0]); k++) {
        fill[k] = put_flat(pool, FILL_ID + k, ENT, node);
        cr_assert(WAIT_UNTIL(test_reserved(pool) <= LOW_WM(LIMIT), TEST_WAIT_MS));
        for (size_t i = 0; i <= k; i++) {
            if (fill[i] != PP_REF_NONE && is_swapped_out(pool, fill[i])) {
                assert_rc(pp_release(pool, fill[i]), 0);
                fill[i] = PP_REF_NONE;
            }
        }
    }
    cr_assert(is_swapped_out(pool, row[0]), "spared for good: still resident after %zu fillers",
              k);
    for (size_t i = 0; i <= ROW; i++)
        assert_rc(pp_release(pool, row[i]), 0);
    ad_finish(pool, fill, k);
    free(fill);
}

Test(advise, willneed_spared_once_more, .timeout = 60)
{
    willneed_spared_once(false);
}

Test(advise, willneed_spared_once_more_than_second_chance, .timeout = 60)
{
    willneed_spared_once(true);
}

/* ======================================================================== */
/* 5. NORMAL drops the advice                                                */
/* ======================================================================== */

/* WONTNEED then NORMAL on a middle entry, WILLNEED then NORMAL on row[0]:
 * neither is preferred or spared any more, and the hand takes row[0]. */
Test(advise, normal_drops_advice, .timeout = 60)
{
    pp_pool_t *pool = ad_pool(LIMIT, NULL);
    unsigned node = last_node(pool);
    pp_ref_t row[ROW + 1];
    row_put(pool, node, row, false);
    const size_t mid = ROW / 2;
    assert_rc(pp_advise(pool, row[mid], PP_ADVISE_WONTNEED), 0);
    assert_rc(pp_advise(pool, row[mid], PP_ADVISE_NORMAL), 0);
    assert_rc(pp_advise(pool, row[0], PP_ADVISE_WILLNEED), 0);
    assert_rc(pp_advise(pool, row[0], PP_ADVISE_NORMAL), 0);

    row[ROW] = push(pool, node, ROW);
    size_t v = victim(pool, row, ROW);
    cr_assert_neq(v, mid, "NORMAL did not drop WONTNEED");
    cr_assert_eq(v, 0, "NORMAL did not drop WILLNEED (evicted %zu)", v);
    cr_assert_eq(advised(pool, node), 0);
    ad_finish(pool, row, ROW + 1);
}

/* ======================================================================== */
/* 6. Advice dies with its entry                                             */
/* ======================================================================== */

/* The middle entry is advised WONTNEED, released and reclaimed; a new
 * entry takes its slot (new generation).  The advice does not pass to it:
 * the hand takes row[0], and the new entry stays. */
Test(advise, advice_dies_with_entry, .timeout = 60)
{
    pp_pool_t *pool = ad_pool(LIMIT, NULL);
    unsigned node = last_node(pool);
    pp_ref_t row[ROW + 1];
    row_put(pool, node, row, false);
    const size_t mid = ROW / 2;
    pp_ref_t old = row[mid];
    assert_rc(pp_advise(pool, old, PP_ADVISE_WONTNEED), 0);
    assert_rc(pp_release(pool, old), 0);
    test_drain(pool);
    cr_assert_eq(test_reserved(pool), (uint64_t)(ROW - 1) * ENT);
    cr_assert_eq(evictions(pool), 0);

    row[mid] = put_on_new_thread(pool, mid, node);
    cr_assert_eq(pp_ref_slot(row[mid]), pp_ref_slot(old), "the reclaimed slot was not reused");
    cr_assert_neq(pp_ref_gen(row[mid]), pp_ref_gen(old));
    assert_rc(pp_advise(pool, old, PP_ADVISE_WONTNEED), PP_ESTALE);
    cr_assert_eq(test_reserved(pool), (uint64_t)ROW * ENT);

    row[ROW] = push(pool, node, ROW);
    size_t v = victim(pool, row, ROW);
    cr_assert_neq(v, mid, "the new entry of the slot inherited WONTNEED");
    cr_assert_eq(v, 0);
    cr_assert_eq(advised(pool, node), 0);
    touch(pool, row[mid], mid, ENT);
    ad_finish(pool, row, ROW + 1);
}

/* ======================================================================== */
/* 7. Random advice under concurrent pins, puts and releases                 */
/* ======================================================================== */

#define CC_LIMIT (32u * PAGE)
#define CC_SHARED 24                 /* pinned and advised by every pinner */
#define CC_PINNERS 3
#define CC_CHURNERS 2
#define CC_RING 8                    /* live entries per churner: 24 + 8 pages cross 15/16 */
#define CC_PIN_OPS 20000
#define CC_CHURN_OPS 6000
#define CC_CHURN_ID 1000000u

/* PP_ENOMEM is a documented outcome for a put or a load here: when the
 * limit is full of released entries waiting for their grace period and
 * the reclaimers free nothing for 10 ms (on a loaded machine, a starved
 * reclaimer).  Such a call has no effect; it is counted, not failed. */
typedef struct cc {
    pp_pool_t *pool;
    const pp_ref_t *shared;
    unsigned nodes;
    int k;
    uint64_t pins, advice, puts, enomem;
} cc_t;

static unsigned cc_advice(uint64_t r) { return (unsigned)(r % 3); }

/* Pins shared entries (waiting or NOWAIT) and checks their bytes; advises
 * them at random, pinned or not. */
static void *cc_pinner(void *arg)
{
    cc_t *a = arg;
    uint64_t rng = 0x5eed0000ull + (uint64_t)a->k;
    for (int op = 0; op < CC_PIN_OPS; op++) {
        uint64_t r = splitmix64(&rng);
        size_t id = (size_t)(r % CC_SHARED);
        pp_ref_t ref = a->shared[id];
        unsigned kind = (unsigned)((r >> 16) % 8);
        int rc;
        if (kind < 2) {
            rc = pp_advise(a->pool, ref, cc_advice(r >> 24));
            TCHECK(rc == 0, "advise %zu: %s", id, pp_err_name(rc));
            a->advice++;
            continue;
        }
        void *d = NULL;
        rc = pp_pin(a->pool, ref, kind == 2 ? PP_PIN_NOWAIT : 0, &d);
        if (kind == 2 && rc == PP_EAGAIN)
            continue;
        a->enomem += rc == PP_ENOMEM;
        TCHECK(rc == 0 || rc == PP_ENOMEM, "pin %zu: %s", id, pp_err_name(rc));
        if (rc != 0)
            continue;
        a->pins++;
        TCHECK(buf_check(d, id, PAGE), "entry %zu: wrong bytes under a pin", id);
        if (kind == 3) {
            rc = pp_advise(a->pool, ref, cc_advice(r >> 24));
            TCHECK(rc == 0, "advise %zu (pinned): %s", id, pp_err_name(rc));
            TCHECK(buf_check(d, id, PAGE), "entry %zu: wrong bytes after advice", id);
        }
        rc = pp_unpin(a->pool, ref);
        TCHECK(rc == 0, "unpin %zu: %s", id, pp_err_name(rc));
    }
    return NULL;
}

/* Puts entries, advises and pins some, and releases each CC_RING puts
 * later; a released entry's ref is stale for pp_advise. */
static void *cc_churner(void *arg)
{
    cc_t *a = arg;
    uint64_t rng = 0xc4a70000ull + (uint64_t)a->k;
    pp_ref_t ring[CC_RING] = {0};
    size_t ring_id[CC_RING] = {0};
    for (int op = 0; op < CC_CHURN_OPS; op++) {
        uint64_t r = splitmix64(&rng);
        size_t slot = (size_t)op % CC_RING;
        if (ring[slot] != PP_REF_NONE) {
            int rc = pp_release(a->pool, ring[slot]);
            TCHECK(rc == 0, "release: %s", pp_err_name(rc));
            rc = pp_advise(a->pool, ring[slot], cc_advice(r >> 8));
            TCHECK(rc == PP_ESTALE, "advise of a released entry: %s", pp_err_name(rc));
        }
        size_t id = CC_CHURN_ID * (size_t)(a->k + 1) + (size_t)op;
        void *p = buf_make(id, PAGE);
        TCHECK(p != NULL, "malloc");
        if (p == NULL)
            break;
        int rc = pp_put(a->pool, p, PAGE, NULL, PP_ON_NODE((unsigned)(r % a->nodes)), &ring[slot]);
        TCHECK(rc == 0 || rc == PP_ENOMEM, "put: %s", pp_err_name(rc));
        if (rc != 0) {
            a->enomem++;
            free(p);                     /* a failed put leaves it to the caller */
            ring[slot] = PP_REF_NONE;
            continue;
        }
        a->puts++;
        ring_id[slot] = id;
        rc = pp_advise(a->pool, ring[slot], cc_advice(r >> 16));
        TCHECK(rc == 0, "advise: %s", pp_err_name(rc));
        a->advice++;
        size_t other = (size_t)((r >> 24) % CC_RING);
        if (ring[other] == PP_REF_NONE)
            continue;
        void *d = NULL;
        rc = pp_pin(a->pool, ring[other], 0, &d);
        a->enomem += rc == PP_ENOMEM;
        TCHECK(rc == 0 || rc == PP_ENOMEM, "pin: %s", pp_err_name(rc));
        if (rc == 0) {
            a->pins++;
            TCHECK(buf_check(d, ring_id[other], PAGE), "churned entry: wrong bytes");
            TCHECK(pp_unpin(a->pool, ring[other]) == 0, "unpin");
        }
    }
    for (size_t i = 0; i < CC_RING; i++) {
        if (ring[i] != PP_REF_NONE)
            TCHECK(pp_release(a->pool, ring[i]) == 0, "final release");
    }
    return NULL;
}

Test(advise, random_advice_under_concurrent_pins_puts_releases, .timeout = 120)
{
    pp_pool_t *pool = ad_pool(CC_LIMIT, NULL);
    unsigned nodes = test_nodes(pool);
    pp_ref_t shared[CC_SHARED];
    for (size_t id = 0; id < CC_SHARED; id++)
        shared[id] = put_flat(pool, id, PAGE, (unsigned)(id % nodes));

    cc_t a[CC_PINNERS + CC_CHURNERS];
    pthread_t th[CC_PINNERS + CC_CHURNERS];
    for (int k = 0; k < CC_PINNERS + CC_CHURNERS; k++) {
        a[k] = (cc_t){pool, shared, nodes, k, 0, 0, 0, 0};
        test_thread_start(&th[k], k < CC_PINNERS ? cc_pinner : cc_churner, &a[k]);
    }
    uint64_t pins = 0, advice = 0, puts = 0, enomem = 0;
    for (int k = 0; k < CC_PINNERS + CC_CHURNERS; k++) {
        test_thread_join(th[k]);
        pins += a[k].pins;
        advice += a[k].advice;
        puts += a[k].puts;
        enomem += a[k].enomem;
    }
    TCHECK_NONE();
    cr_log_info("%" PRIu64 " pins, %" PRIu64 " advice, %" PRIu64 " puts, %" PRIu64 " PP_ENOMEM",
                pins, advice, puts, enomem);
    cr_assert_gt(pins, 0);
    cr_assert_gt(advice, 0);
    cr_assert_gt(puts, 0);
    pp_stats_t *s = test_stats_new(pool);
    cr_assert_gt(s->total.evictions_written, 0, "the churn never pressed on the limit");
    cr_assert_leq(s->resident_peak, CC_LIMIT);
    free(s);
    /* Every shared entry still holds its bytes, resident or loaded now
     * (after the drain, every resident byte is a live, unpinned entry's). */
    test_drain(pool);
    for (size_t id = 0; id < CC_SHARED; id++)
        touch(pool, shared[id], id, PAGE);
    ad_finish(pool, shared, CC_SHARED);
}
