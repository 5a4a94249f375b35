/*
 * test_evict_threads.c -- evict suite: each node's swap thread evicts its
 * own entries, and frees run on a swap thread that put or pin never wait
 * for its own pass.
 */
#include "test_evict.h"

/* ======================================================================== */
/* 10. Per-node swap threads                                                 */
/* ======================================================================== */

#define MN_PER_NODE 16                   /* the 16th crosses the high watermark */

/* Entries of node n are evicted by node n's swap thread (counted on n) and
 * their loads are counted on n; nothing happens on the other nodes. */
Test(evict, each_node_swaps_its_own_entries, .timeout = 60)
{
    pp_pool_t *pool = ev_pool(SMALL_LIMIT, TEST_SYNTH4, NULL);
    cr_assert_eq(test_nodes(pool), 4);
    const unsigned use[2] = {1, 3};
    sw_t *sw = sw_new(2 * MN_PER_NODE);
    int swap_tid[2] = {0, 0};
    for (int p = 0; p < 2; p++) {
        unsigned n = use[p];
        pp_node_stats_t s0[4], s1[4], s2[4];
        for (unsigned m = 0; m < 4; m++)
            test_node_stats(pool, m, &s0[m]);
        pp_ref_t refs[MN_PER_NODE];
        size_t base = (size_t)p * MN_PER_NODE;
        for (size_t i = 0; i < MN_PER_NODE; i++) {
            refs[i] = put_sw(pool, sw, base + i, PAGE, n);
            cr_assert_eq(pp_ref_node(refs[i]), n);
        }
        /* One node's entries: its swap thread alone evicts, down to 7/8
         * (two entries), and then stops. */
        cr_assert(WAIT_UNTIL(test_reserved(pool) <= LOW_WM(SMALL_LIMIT), TEST_WAIT_MS));
        cr_assert_eq(test_reserved(pool), LOW_WM(SMALL_LIMIT));
        size_t swapped = 0, victim = MN_PER_NODE, victim2 = MN_PER_NODE;
        for (size_t i = 0; i < MN_PER_NODE; i++) {
            if (!is_swapped_out(pool, refs[i]))
                continue;
            swapped++;
            if (victim == MN_PER_NODE)
                victim = i;
            else if (victim2 == MN_PER_NODE)
                victim2 = i;
            int tid = atomic_load(&sw->save_tid[base + i]);
            if (swap_tid[p] == 0)
                swap_tid[p] = tid;
            cr_assert_eq(tid, swap_tid[p], "node %u's entries saved by two threads", n);
        }
        cr_assert_eq(swapped, 2);
        cr_assert_neq(swap_tid[p], my_tid());

        for (unsigned m = 0; m < 4; m++) {
            test_node_stats(pool, m, &s1[m]);
            uint64_t ev = s1[m].evictions_written - s0[m].evictions_written;
            if (m == n) {
                cr_assert_eq(ev, swapped, "node %u counted %" PRIu64 " evictions", m, ev);
                cr_assert_gt(s1[m].swap_used_bytes, 0);
                cr_assert_eq(s1[m].swapped_bytes, swapped * PAGE);
            } else {
                cr_assert_eq(ev, 0, "node %u counted evictions of node %u's entries", m, n);
                cr_assert_eq(s1[m].swap_used_bytes, 0);
                cr_assert_eq(s1[m].swap_bytes_written, s0[m].swap_bytes_written);
            }
        }

        /* A pin's load (on this thread) and a NOWAIT load (on node n's swap
         * thread) are both counted on node n. */
        void *d = NULL;
        assert_rc(pp_pin(pool, refs[victim], 0, &d), 0);
        cr_assert(buf_check(d, base + victim, PAGE, ct_seed(base + victim)));
        cr_assert_eq(atomic_load(&sw->load_tid[base + victim]), my_tid());
        assert_rc(pp_unpin(pool, refs[victim]), 0);
        assert_rc(pp_pin(pool, refs[victim2], PP_PIN_NOWAIT, &d), PP_EAGAIN);
        cr_assert(WAIT_UNTIL(atomic_load(&sw->loads[base + victim2]) == 1, TEST_WAIT_MS));
        cr_assert_eq(atomic_load(&sw->load_tid[base + victim2]), swap_tid[p],
                     "node %u's NOWAIT load ran on another thread (%d) than its swap thread "
                     "(%d; main %d; loads %u; state 0x%x)", n,
                     atomic_load(&sw->load_tid[base + victim2]), swap_tid[p], my_tid(),
                     atomic_load(&sw->loads[base + victim2]), state_of(pool, refs[victim2]));
        cr_assert(WAIT_UNTIL(STAT_NODE(pool, n, loads) == s1[n].loads + 2, TEST_WAIT_MS));
        for (unsigned m = 0; m < 4; m++) {
            test_node_stats(pool, m, &s2[m]);
            if (m != n)
                cr_assert_eq(s2[m].loads, s0[m].loads, "node %u counted a load", m);
        }
        for (size_t i = 0; i < MN_PER_NODE; i++)
            assert_rc(pp_release(pool, refs[i]), 0);
        cr_assert(WAIT_UNTIL(all_freed(pool), TEST_WAIT_MS));
    }
    cr_assert_neq(swap_tid[0], swap_tid[1], "nodes 1 and 3 share a swap thread");
    ev_finish(pool, NULL, 0);
    sw_check_delete(sw, 2 * MN_PER_NODE);
}

/* ------------------------------------------------------------------------ */
/* A free that puts, on the swap thread                                      */
/* ------------------------------------------------------------------------ */

typedef struct evput {
    pp_pool_t *pool;
    size_t size;                         /* of the entry the first free puts */
    atomic_uint calls;                   /* frees that returned */
    atomic_int rc;                       /* the first free's pp_put */
    _Atomic pp_ref_t ref;
    atomic_int tid;                      /* the thread of the first free */
} evput_t;

static evput_t g_evput;

static int evput_save(const void *data, size_t size, pp_writer_t *w, void *ctx)
{
    (void)ctx;
    return pp_write(w, data, size) == 0 ? 0 : 1;
}

static int evput_load(void **data, size_t size, pp_reader_t *r, void *ctx)
{
    (void)ctx;
    void *p = malloc(size);
    if (p == NULL || pp_read(r, p, size) != 0) {
        free(p);
        return 1;
    }
    *data = p;
    return 0;
}

static void evput_free(void *data, size_t size, void *ctx)
{
    evput_t *ep = ctx;
    (void)size;
    if (atomic_load(&ep->calls) == 0) {
        atomic_store(&ep->tid, my_tid());
        void *p = malloc(ep->size);
        pp_ref_t ref = PP_REF_NONE;
        int rc = p != NULL ? pp_put(ep->pool, p, ep->size, NULL, PP_ON_NODE(0), &ref)
                           : PP_ENOMEM;
        if (rc != 0)
            free(p);
        atomic_store(&ep->ref, ref);
        atomic_store(&ep->rc, rc);
    }
    free(data);
    atomic_fetch_add(&ep->calls, 1);
}

static const pp_type_t evput_type = {.name = "evput", .free = evput_free,
                                     .save = evput_save, .load = evput_load,
                                     .ctx = &g_evput};

/* An entry of size bytes (each set to fill) of type on node 0. */
static pp_ref_t put_node0(pp_pool_t *pool, size_t size, const pp_type_t *type, int fill)
{
    void *p = malloc(size);
    cr_assert_not_null(p);
    memset(p, fill, size);
    pp_ref_t r;
    assert_rc(pp_put(pool, p, size, type, PP_ON_NODE(0), &r), 0);
    return r;
}

/* Two entries past the high watermark: node 0's swap thread evicts one and
 * calls its free, which puts an entry that needs room.  That put must not
 * wait for a pass of the swap thread it runs on: PP_EAGAIN. */
Test(evict, a_free_after_an_eviction_that_puts_never_waits_for_its_own_pass, .timeout = 60)
{
    const size_t limit = 1u << 20;
    pp_pool_t *pool = ev_pool(limit, NULL, NULL);
    g_evput.pool = pool;
    g_evput.size = limit;                /* fits only in an empty pool */
    atomic_store(&g_evput.calls, 0);
    atomic_store(&g_evput.rc, 1);
    atomic_store(&g_evput.tid, 0);
    pp_ref_t r[2];
    const size_t sizes[2] = {500u << 10, 480u << 10};   /* past 15/16 together */
    for (int i = 0; i < 2; i++)
        r[i] = put_node0(pool, sizes[i], &evput_type, i + 1);
    cr_assert(WAIT_UNTIL(atomic_load(&g_evput.calls) >= 1, TEST_WAIT_MS),
              "the free's pp_put never returned: it waits for a pass of the swap "
              "thread it runs on");
    cr_assert_neq(atomic_load(&g_evput.tid), my_tid(), "the free ran on the swap thread");
    assert_rc(atomic_load(&g_evput.rc), PP_EAGAIN, "a put from a callback that needs room");
    ev_finish(pool, r, 2);
}

/* A free after an eviction that pins a swapped entry: the load would have
 * to wait for room that only a pass of this same swap thread makes.  The
 * pin returns PP_EAGAIN instead (a load is queued for later). */
typedef struct evpin {
    atomic_uint calls;                   /* frees that returned */
    _Atomic pp_ref_t target;             /* what the second free pins */
    pp_pool_t *pool;
    atomic_int rc;
} evpin_t;

static evpin_t g_evpin;

static void evpin_free(void *data, size_t size, void *ctx)
{
    evpin_t *ep = ctx;
    (void)size;
    if (atomic_load(&ep->calls) == 1) {
        pp_ref_t t = atomic_load(&ep->target);
        int rc = pp_pin(ep->pool, t, 0, NULL);
        if (rc == 0)
            rc = pp_unpin(ep->pool, t) == 0 ? 0 : -100;
        atomic_store(&ep->rc, rc);
    }
    free(data);
    atomic_fetch_add(&ep->calls, 1);
}

static const pp_type_t evpin_type = {.name = "evpin", .free = evpin_free,
                                     .save = evput_save, .load = evput_load,
                                     .ctx = &g_evpin};

Test(evict, a_free_after_an_eviction_that_pins_a_swapped_entry_never_waits, .timeout = 60)
{
    const size_t limit = 1u << 20;
    pp_pool_t *pool = ev_pool(limit, NULL, NULL);
    g_evpin.pool = pool;
    atomic_store(&g_evpin.calls, 0);
    atomic_store(&g_evpin.rc, 1);
    const size_t sizes[3] = {500u << 10, 480u << 10, 500u << 10};
    pp_ref_t r[3];
    for (int i = 0; i < 3; i++) {
        r[i] = put_node0(pool, sizes[i], &evpin_type, i + 1);
        if (i == 0)
            atomic_store(&g_evpin.target, r[0]);
        if (i == 1) {
            /* Past 15/16: the swap thread evicts r[0] (slot 0 comes first). */
            cr_assert(WAIT_UNTIL(atomic_load(&g_evpin.calls) == 1, TEST_WAIT_MS),
                      "the first eviction did not happen");
            cr_assert(WAIT_UNTIL(!(test_stat(pool, r[0]).state & PP_STATE_RESIDENT),
                                 TEST_WAIT_MS));
        }
    }
    /* Past 15/16 again: r[1] is evicted, and its free pins r[0]. */
    /* (r[2] may be evicted too, and r[0] loaded again, meanwhile.) */
    cr_assert(WAIT_UNTIL(atomic_load(&g_evpin.calls) >= 2, TEST_WAIT_MS),
              "the free's pp_pin never returned: its load waits for a pass of the swap "
              "thread it runs on");
    assert_rc(atomic_load(&g_evpin.rc), PP_EAGAIN, "a pin from a callback that needs a load");
    ev_finish(pool, r, 3);
}
