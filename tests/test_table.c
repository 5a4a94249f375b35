/* test_table.c -- slot tables, refs, generations, growth (src/core/table.c). */
#include "helpers.h"
#include "testing/testhooks.h" /* pp__debug_set_gen */

static int cmp_ref(const void *a, const void *b)
{
    pp_ref_t x = *(const pp_ref_t *)a, y = *(const pp_ref_t *)b;
    return x < y ? -1 : x > y;
}

/* Every ref-taking call on ref fails with PP_ESTALE. */
static void assert_all_stale(pp_pool_t *pool, pp_ref_t ref)
{
    void *p = (void *)0x1;
    pp_entry_info_t info;
    cr_assert_eq(pp_pin(pool, ref, 0, &p), PP_ESTALE, "pin 0x%016" PRIx64, ref);
    cr_assert_eq(pp_pin(pool, ref, PP_PIN_WRITE, NULL), PP_ESTALE,
                 "pin write 0x%016" PRIx64, ref);
    cr_assert_eq(pp_unpin(pool, ref), PP_ESTALE, "unpin 0x%016" PRIx64, ref);
    cr_assert_eq(pp_retain(pool, ref), PP_ESTALE, "retain 0x%016" PRIx64, ref);
    cr_assert_eq(pp_release(pool, ref), PP_ESTALE, "release 0x%016" PRIx64, ref);
    cr_assert_eq(pp_get(pool, ref, &p), PP_ESTALE, "get 0x%016" PRIx64, ref);
    cr_assert_eq(pp_stat(pool, ref, &info), PP_ESTALE, "stat 0x%016" PRIx64, ref);
    cr_assert_eq(pp_prefetch(pool, ref), PP_ESTALE, "prefetch 0x%016" PRIx64, ref);
    cr_assert_eq(pp_pin_many(pool, &ref, 1, 0, NULL), PP_ESTALE,
                 "pin_many 0x%016" PRIx64, ref);
    cr_assert_eq(pp_unpin_many(pool, &ref, 1, NULL), PP_ESTALE,
                 "unpin_many 0x%016" PRIx64, ref);
}

/* The entry is live and untouched: one owner, no pins, its data intact. */
static void assert_live(pp_pool_t *pool, ct_t *ct, pp_ref_t ref, size_t id,
                        size_t size)
{
    pp_entry_info_t info = test_stat(pool, ref);
    cr_assert_eq(info.owners, 1, "owners %u", info.owners);
    cr_assert_eq(info.pins, 0, "pins %u", info.pins);
    cr_assert_eq(info.state & PP_STATE_DEAD, 0);
    void *p = NULL;
    assert_rc(pp_pin(pool, ref, 0, &p), 0);
    cr_assert(ct_check(p, id, size));
    assert_rc(pp_unpin(pool, ref), 0);
    cr_assert_eq(ct_frees(ct, id), 0);
}

#define N_REFS 2000

Test(table, refs_are_nonzero_and_distinct, .timeout = 30)
{
    pp_pool_t *pool = test_pool(NULL);
    unsigned nodes = test_nodes(pool);
    ct_t *ct = ct_new(N_REFS);
    pp_ref_t *refs = calloc(N_REFS, sizeof *refs);
    for (size_t i = 0; i < N_REFS; i++) {
        unsigned fl = (i % 2) ? PP_ON_NODE(i % nodes) : 0;
        refs[i] = ct_put(pool, ct, i, 40, fl);
        cr_assert_neq(refs[i], PP_REF_NONE);
        cr_assert_lt(pp_ref_node(refs[i]), nodes);
        cr_assert_neq(pp_ref_gen(refs[i]), 0);
        if (fl)
            cr_assert_eq(pp_ref_node(refs[i]), i % nodes);
    }
    pp_ref_t *sorted = malloc(N_REFS * sizeof *sorted);
    memcpy(sorted, refs, N_REFS * sizeof *sorted);
    qsort(sorted, N_REFS, sizeof *sorted, cmp_ref);
    for (size_t i = 1; i < N_REFS; i++)
        cr_assert_neq(sorted[i - 1], sorted[i], "duplicate ref 0x%016" PRIx64,
                      sorted[i]);
    /* Distinct live entries also have distinct (node, slot). */
    for (size_t i = 0; i < N_REFS; i++)
        sorted[i] = refs[i] & ~(pp_ref_t)0xFFFFFFFFu;
    qsort(sorted, N_REFS, sizeof *sorted, cmp_ref);
    for (size_t i = 1; i < N_REFS; i++)
        cr_assert_neq(sorted[i - 1], sorted[i], "two live entries share a slot");

    /* Each ref names its own entry. */
    for (size_t i = 0; i < N_REFS; i++) {
        cr_assert_eq(test_stat(pool, refs[i]).size, 40);
        void *p = NULL;
        assert_rc(pp_pin(pool, refs[i], 0, &p), 0);
        cr_assert(ct_check(p, i, 40), "entry %zu", i);
        assert_rc(pp_unpin(pool, refs[i]), 0);
    }
    test_destroy(pool);
    for (size_t i = 0; i < N_REFS; i++)
        cr_assert_eq(ct_frees(ct, i), 1);
    free(sorted);
    free(refs);
    ct_delete(ct);
}

Test(table, garbage_refs_are_stale, .timeout = 30)
{
    pp_pool_t *pool = test_pool(NULL);
    unsigned nodes = test_nodes(pool);
    ct_t *ct = ct_new(PP_MAX_NODES);
    pp_ref_t live[PP_MAX_NODES];
    for (unsigned n = 0; n < nodes; n++)
        live[n] = ct_put(pool, ct, n, 64, PP_ON_NODE(n));
    pp_ref_t r = live[0];
    uint32_t gen = pp_ref_gen(r);

    /* Zero. */
    assert_all_stale(pool, PP_REF_NONE);

    /* Wrong generation of a live slot. */
    pp_ref_t base = r & ~(pp_ref_t)0xFFFFFFFFu;
    static const uint32_t deltas[] = {1, 2, 0x80000000u, 0xFFFFFFFFu, 0x12345u};
    for (size_t i = 0; i < sizeof deltas / sizeof deltas[0]; i++)
        assert_all_stale(pool, base | (uint32_t)(gen + deltas[i]));
    assert_all_stale(pool, base); /* generation 0 */

    /* Node out of range. */
    for (unsigned n = nodes; n < 64; n++)
        assert_all_stale(pool, ((pp_ref_t)n << 58) | (r & ((1ull << 58) - 1)));

    /* Slot beyond the table, on every node. */
    static const uint32_t slots[] = {0x3FFFFFFu, 0x2000000u, 0x100000u,
                                     100000u, 8191u + 64u};
    for (unsigned n = 0; n < nodes; n++)
        for (size_t i = 0; i < sizeof slots / sizeof slots[0]; i++)
            for (uint32_t g = 0; g < 3; g++)
                assert_all_stale(pool, ((pp_ref_t)n << 58) |
                                           ((pp_ref_t)slots[i] << 32) | g);

    /* Random 64-bit values. */
    uint64_t st = 0x5eed;
    for (int i = 0; i < 20000; i++) {
        pp_ref_t g = splitmix64(&st);
        bool is_live = false;
        for (unsigned n = 0; n < nodes; n++)
            is_live |= g == live[n];
        if (!is_live)
            assert_all_stale(pool, g);
    }
    /* Random values on a valid node, small slots, small generations: the
     * ones most likely to land on a real slot. */
    for (int i = 0; i < 20000; i++) {
        uint64_t x = splitmix64(&st);
        pp_ref_t g = ((pp_ref_t)(x % nodes) << 58) |
                     ((pp_ref_t)((x >> 8) % 128) << 32) | ((x >> 32) % 4);
        bool is_live = false;
        for (unsigned n = 0; n < nodes; n++)
            is_live |= g == live[n];
        if (!is_live)
            assert_all_stale(pool, g);
    }

    /* The live entries are untouched. */
    for (unsigned n = 0; n < nodes; n++)
        assert_live(pool, ct, live[n], n, 64);
    pp_stats_t s;
    test_stats(pool, &s);
    cr_assert_eq(s.total.entries, nodes);
    cr_assert_eq(s.total.frees, 0);
    test_destroy(pool);
    for (unsigned n = 0; n < nodes; n++)
        cr_assert_eq(ct_frees(ct, n), 1);
    cr_assert_eq(atomic_load(&ct->bad), 0);
    ct_delete(ct);
}

Test(table, ref_is_stale_after_reclaim, .timeout = 30)
{
    pp_pool_t *pool = test_pool(NULL);
    ct_t *ct = ct_new(2);
    pp_ref_t r = ct_put(pool, ct, 0, 64, 0);
    pp_ref_t keep = ct_put(pool, ct, 1, 64, 0);
    assert_rc(pp_release(pool, r), 0);
    test_drain(pool);
    cr_assert_eq(ct_frees(ct, 0), 1);
    assert_all_stale(pool, r);
    assert_live(pool, ct, keep, 1, 64);
    /* Still stale after more activity on the node. */
    for (int i = 0; i < 10; i++)
        assert_all_stale(pool, r);
    test_destroy(pool);
    cr_assert_eq(ct_frees(ct, 0), 1);
    cr_assert_eq(ct_frees(ct, 1), 1);
    cr_assert_eq(atomic_load(&ct->bad), 0);
    ct_delete(ct);
}

#define REUSE_BATCH 500
#define REUSE_ROUNDS 40

Test(table, slot_reuse_keeps_old_refs_stale, .timeout = 60)
{
    pp_pool_t *pool = test_pool(NULL);
    ct_t *ct = ct_new(REUSE_BATCH * REUSE_ROUNDS + 1);
    size_t total = REUSE_BATCH * REUSE_ROUNDS;
    pp_ref_t *old = calloc(total, sizeof *old);
    size_t nold = 0, id = 0;
    size_t reused = 0;

    for (int round = 0; round < REUSE_ROUNDS && reused == 0; round++) {
        pp_ref_t batch[REUSE_BATCH];
        for (size_t i = 0; i < REUSE_BATCH; i++, id++) {
            batch[i] = ct_put(pool, ct, id, 48, PP_ON_NODE(0));
            cr_assert_eq(pp_ref_node(batch[i]), 0);
            /* Does it reuse the slot of an earlier (reclaimed) entry? */
            for (size_t k = 0; k < nold; k++) {
                if (pp_ref_slot(old[k]) != pp_ref_slot(batch[i]))
                    continue;
                reused++;
                cr_assert_neq(pp_ref_gen(old[k]), pp_ref_gen(batch[i]),
                              "slot %u reissued with the same generation",
                              pp_ref_slot(batch[i]));
                cr_assert_neq(old[k], batch[i]);
                /* The old ref names nothing: every call fails and leaves the
                 * new entry alone (a release must not drop its owner). */
                assert_all_stale(pool, old[k]);
                assert_live(pool, ct, batch[i], id, 48);
            }
        }
        for (size_t i = 0; i < REUSE_BATCH; i++) {
            assert_rc(pp_release(pool, batch[i]), 0);
            old[nold++] = batch[i];
        }
        test_drain(pool);
    }
    cr_assert_gt(reused, 0, "no slot reused after %zu put/release cycles", id);
    test_destroy(pool);
    for (size_t i = 0; i < id; i++)
        cr_assert_eq(ct_frees(ct, i), 1, "entry %zu", i);
    cr_assert_eq(atomic_load(&ct->bad), 0);
    free(old);
    ct_delete(ct);
}

/* ---- generation exhausted: the slot is retired ------------------------------ */

#define RETIRE_PUTS 300   /* more than a magazine: a freed slot would come back */

Test(table, slot_retired_when_generation_exhausted, .timeout = 60)
{
    pp_pool_t *pool = test_pool(NULL);
    ct_t *ct = ct_new(RETIRE_PUTS + 1);
    pp_ref_t first = ct_put(pool, ct, 0, 48, PP_ON_NODE(0));
    pp_ref_t last;
    /* The slot's last generation (pp__debug_set_gen: tests only). */
    assert_rc(pp__debug_set_gen(pool, first, UINT32_MAX, &last), 0);
    cr_assert_eq(pp_ref_gen(last), UINT32_MAX);
    cr_assert_eq(pp_ref_slot(last), pp_ref_slot(first));
    assert_all_stale(pool, first);            /* the old generation names nothing */
    assert_live(pool, ct, last, 0, 48);
    assert_rc(pp_release(pool, last), 0);
    test_drain(pool);
    cr_assert_eq(ct_frees(ct, 0), 1);
    assert_all_stale(pool, last);
    pp_stats_t st;
    test_stats(pool, &st);
    pp_node_stats_t n0;
    test_node_stats(pool, 0, &n0);
    cr_assert_eq(n0.retired_slots, 1);
    cr_assert_eq(st.total.retired_slots, 1);

    /* Enough puts on the same node, from the same thread, that a recycled
     * slot would be handed out again; this one never is, and so no ref
     * with a wrapped generation (0 or a reissued one) ever exists. */
    pp_ref_t refs[RETIRE_PUTS];
    for (size_t i = 0; i < RETIRE_PUTS; i++) {
        refs[i] = ct_put(pool, ct, i + 1, 48, PP_ON_NODE(0));
        cr_assert_neq(pp_ref_slot(refs[i]), pp_ref_slot(last),
                      "retired slot %u handed out again (put %zu, gen %u)",
                      pp_ref_slot(last), i, pp_ref_gen(refs[i]));
    }
    assert_all_stale(pool, last);
    for (size_t i = 0; i < RETIRE_PUTS; i++)
        assert_rc(pp_release(pool, refs[i]), 0);
    test_destroy(pool);
    for (size_t i = 0; i <= RETIRE_PUTS; i++)
        cr_assert_eq(ct_frees(ct, i), 1, "entry %zu", i);
    ct_delete(ct);
}

/* ---- growth under concurrent pins ---------------------------------------- */

#define GROW_N 100000
#define GROW_PINNERS 3
#define GROW_SIZE 32

typedef struct grow {
    pp_pool_t *pool;
    ct_t *ct;
    pp_ref_t *refs;            /* refs[i] written before `published` passes i */
    atomic_size_t published;
    atomic_bool done;
    atomic_uint_fast64_t pins; /* successful pin/unpin pairs */
    int seed;
} grow_t;

typedef struct grow_arg {
    grow_t *g;
    int seed;
} grow_arg_t;

static void *grow_pinner(void *arg)
{
    grow_arg_t *a = arg;
    grow_t *g = a->g;
    uint64_t st = (uint64_t)a->seed;
    uint64_t mine = 0;
    for (;;) {
        /* Read done first: after it is seen, every ref is published. */
        bool last = atomic_load(&g->done);
        size_t n = atomic_load(&g->published); /* acquire: refs[0..n) */
        if (n == 0) {
            if (last)
                break;
            sched_yield();
            continue;
        }
        for (int k = 0; k < 64; k++) {
            uint64_t x = splitmix64(&st);
            /* Half of the pins on the newest entries, racing the growth. */
            size_t i = (k & 1) ? (size_t)(x % n)
                               : n - 1 - (size_t)(x % (n < 256 ? n : 256));
            void *p = NULL;
            int rc = pp_pin(g->pool, g->refs[i], 0, &p);
            TCHECK(rc == 0, "pin of entry %zu: %s", i, pp_err_name(rc));
            if (rc != 0)
                continue;
            TCHECK(ct_check(p, i, GROW_SIZE), "entry %zu data wrong", i);
            rc = pp_unpin(g->pool, g->refs[i]);
            TCHECK(rc == 0, "unpin of entry %zu: %s", i, pp_err_name(rc));
            mine++;
        }
        if (last)
            break;
    }
    atomic_fetch_add(&g->pins, mine);
    return NULL;
}

Test(table, growth_under_concurrent_pins, .timeout = 120)
{
    grow_t g;
    memset(&g, 0, sizeof g);
    g.pool = test_pool(NULL);
    g.ct = ct_new(GROW_N);
    g.refs = calloc(GROW_N, sizeof *g.refs);
    atomic_init(&g.published, 0);
    atomic_init(&g.done, false);
    atomic_init(&g.pins, 0);

    pthread_t th[GROW_PINNERS];
    grow_arg_t args[GROW_PINNERS];
    for (int i = 0; i < GROW_PINNERS; i++) {
        args[i].g = &g;
        args[i].seed = 1000 + i;
        test_thread_start(&th[i], grow_pinner, &args[i]);
    }
    pp_node_stats_t s0;
    test_node_stats(g.pool, 0, &s0);
    for (size_t i = 0; i < GROW_N; i++) {
        void *buf = ct_buf(g.ct, i, GROW_SIZE);
        pp_ref_t r = PP_REF_NONE;
        int rc = pp_put(g.pool, buf, GROW_SIZE, &g.ct->type, PP_ON_NODE(0), &r);
        if (rc != 0) {
            free(buf);
            atomic_store(&g.done, true);
            for (int k = 0; k < GROW_PINNERS; k++)
                test_thread_join(th[k]);
            cr_assert_fail("put %zu: %s", i, pp_err_name(rc));
        }
        g.refs[i] = r;
        atomic_store(&g.published, i + 1); /* release: refs[i] */
    }
    atomic_store(&g.done, true);
    for (int i = 0; i < GROW_PINNERS; i++)
        test_thread_join(th[i]);
    TCHECK_NONE();
    cr_assert_gt(atomic_load(&g.pins), 0);

    pp_node_stats_t s;
    test_node_stats(g.pool, 0, &s);
    cr_assert_eq(s.entries, GROW_N);
    cr_assert_geq(s.slots, GROW_N);
    cr_assert_eq(s.pins - s0.pins, atomic_load(&g.pins));
    cr_assert_eq(s.unpins - s0.unpins, atomic_load(&g.pins));

    /* Every ref still distinct and working after the growth. */
    pp_ref_t *sorted = malloc(GROW_N * sizeof *sorted);
    memcpy(sorted, g.refs, GROW_N * sizeof *sorted);
    qsort(sorted, GROW_N, sizeof *sorted, cmp_ref);
    for (size_t i = 1; i < GROW_N; i++)
        cr_assert_neq(sorted[i - 1], sorted[i]);
    free(sorted);
    for (size_t i = 0; i < GROW_N; i += 997) {
        void *p = NULL;
        assert_rc(pp_pin(g.pool, g.refs[i], 0, &p), 0);
        cr_assert(ct_check(p, i, GROW_SIZE));
        assert_rc(pp_unpin(g.pool, g.refs[i]), 0);
    }
    for (size_t i = 0; i < GROW_N; i++)
        assert_rc(pp_release(g.pool, g.refs[i]), 0);
    test_drain(g.pool);
    pp_stats_t t;
    test_stats(g.pool, &t);
    cr_assert_eq(t.total.entries, 0);
    cr_assert_eq(t.total.frees, GROW_N);
    test_destroy(g.pool);
    for (size_t i = 0; i < GROW_N; i++)
        cr_assert_eq(ct_frees(g.ct, i), 1, "entry %zu", i);
    cr_assert_eq(atomic_load(&g.ct->bad), 0);
    free(g.refs);
    ct_delete(g.ct);
}

/* ---- two puts in one new segment ------------------------------------------ */

typedef struct seg_race {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool armed, arrived, go, waited;
    pp_pool_t *pool;
    ct_t *ct;
    void *buf;
    pp_ref_t ref;
    int rc;
} seg_race_t;

static void seg_race_point(enum pp__test_point where, void *arg, void *ctx)
{
    (void)arg;
    seg_race_t *r = ctx;
    pthread_mutex_lock(&r->mu);
    if (where == PP__TP_SEG_PUBLISH && r->armed) {
        r->armed = false;                /* this put is the committing one */
        r->arrived = true;
        pthread_cond_broadcast(&r->cv);
        while (!r->go)
            pthread_cond_wait(&r->cv, &r->mu);
    } else if (where == PP__TP_SEG_LOCK && r->arrived && !r->go) {
        r->waited = true;                /* the second put will wait: let the first go */
        r->go = true;
        pthread_cond_broadcast(&r->cv);
    }
    pthread_mutex_unlock(&r->mu);
}

static void *seg_race_committer(void *arg)
{
    seg_race_t *r = arg;
    r->rc = pp_put(r->pool, r->buf, 64, &r->ct->type, PP_ON_NODE(0), &r->ref);
    return NULL;
}

/* A put that commits a segment of the table commits its memory, then
 * publishes it under the lookups' bound.  A second put whose slots lie in
 * the same segment may not take them in between: the ref it handed out
 * would be stale to every lookup until the bound moves (the lookup finds
 * the slot out of bounds), and in debug builds the slot's own check
 * aborts.  Here the committing put stops just before it publishes; the
 * second put must wait for it, and both entries pin.  (A put used to take
 * its slots once an earlier store, to a list of segments now gone, named
 * the segment.) */
Test(table, put_in_a_segment_being_published_waits_for_it, .timeout = 60)
{
    seg_race_t r = { .armed = true };
    pthread_mutex_init(&r.mu, NULL);
    pthread_cond_init(&r.cv, NULL);
    r.pool = test_pool(NULL);
    r.ct = ct_new(2);
    const size_t SEG = pp__table_seg_slots();
    pp_ref_t *fill = calloc(SEG, sizeof *fill);
    cr_assert_not_null(fill);
    /* Segment 0 of node 0, whole: this thread's magazine is left empty. */
    for (size_t i = 0; i < SEG; i++) {
        void *buf = malloc(16);
        cr_assert_not_null(buf);
        assert_rc(pp_put(r.pool, buf, 16, NULL, PP_ON_NODE(0), &fill[i]), 0);
    }
    r.buf = ct_buf(r.ct, 1, 64);
    pp__test_point_hook(seg_race_point, &r);
    pthread_t th;
    test_thread_start(&th, seg_race_committer, &r);
    pthread_mutex_lock(&r.mu);
    while (!r.arrived)
        pthread_cond_wait(&r.cv, &r.mu);
    pthread_mutex_unlock(&r.mu);

    /* The next chunk of slots is in segment 1, which the other put holds
     * half published. */
    void *buf = ct_buf(r.ct, 0, 64), *d = NULL;
    pp_ref_t mine = PP_REF_NONE;
    int rc = pp_put(r.pool, buf, 64, &r.ct->type, PP_ON_NODE(0), &mine);
    /* Pinned before the other put may go on: with the bug, it is still
     * stopped, and the ref just handed out is stale. */
    int rc_pin = rc == 0 ? pp_pin(r.pool, mine, 0, &d) : rc;
    pthread_mutex_lock(&r.mu);
    r.go = true;                         /* if the put did not wait, let the other go */
    pthread_cond_broadcast(&r.cv);
    pthread_mutex_unlock(&r.mu);
    test_thread_join(th);
    pp__test_point_hook(NULL, NULL);
    assert_rc(rc, 0);
    assert_rc(r.rc, 0);
    assert_rc(rc_pin, 0, "the pin of a ref that pp_put just gave");
    cr_assert(r.waited, "the put took slots of a segment not yet published");
    cr_assert_eq(pp_ref_slot(mine) / SEG, 1, "slot %u", pp_ref_slot(mine));
    cr_assert_eq(pp_ref_slot(r.ref) / SEG, 1, "slot %u", pp_ref_slot(r.ref));
    cr_assert(ct_check(d, 0, 64));
    assert_rc(pp_unpin(r.pool, mine), 0);
    assert_live(r.pool, r.ct, r.ref, 1, 64);
    cr_assert(pp__pool_is_valid(r.pool));

    assert_rc(pp_release(r.pool, mine), 0);
    assert_rc(pp_release(r.pool, r.ref), 0);
    for (size_t i = 0; i < SEG; i++)
        assert_rc(pp_release(r.pool, fill[i]), 0);
    test_drain(r.pool);
    test_destroy(r.pool);
    cr_assert_eq(ct_frees(r.ct, 0), 1);
    cr_assert_eq(ct_frees(r.ct, 1), 1);
    free(fill);
    ct_delete(r.ct);
    pthread_cond_destroy(&r.cv);
    pthread_mutex_destroy(&r.mu);
}
