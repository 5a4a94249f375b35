/*
 * test_layer.c -- the MPI layer's protocol on the in-process transport:
 * ranks are threads of this process, each with its own pool and layer;
 * the transport delays, reorders and duplicates messages from a seed, so
 * the orders these tests meet are many and each replays.
 *
 * Every promise of pinpool_mpi.h that does not need MPI itself is here:
 * remote pins and the cache, versions, owners by weight (early frees,
 * duplicate tokens, mints), bad input, destroy's drain and reports.
 */
#include "world.h"

TestSuite(layer, .timeout = 60);

Test(layer, remote_pin_fetches_then_hits)
{
    world_t W;
    world_up(&W, 2, 1, 3, 0);
    pp_gref_t g = put_on(&W, 0, 1, 100000);
    give(&W, 0, 1, g);
    void *d = NULL;
    uint32_t got = 0;
    assert_rc(pp_mpi_pin(W.m[1], g, 0, &d, &got), 0);
    cr_assert(ct_check(d, 1, 100000), "the copy holds the home's bytes");
    cr_assert_eq(got, 1u);
    cr_assert_eq((uintptr_t)d % 64, 0, "a copy's data is 64-byte aligned");
    void *d2 = NULL;
    assert_rc(pp_mpi_pin(W.m[1], g, 0, &d2, NULL), 0);
    cr_assert_eq(d2, d, "the second pin is a hit on the same copy");
    pp_mpi_stats_t st;
    pp_mpi_stats(W.m[1], &st);
    cr_assert_eq(st.misses, 1);
    cr_assert_eq(st.hits, 1);
    cr_assert_eq(st.bytes_fetched, 100000);
    assert_rc(pp_mpi_unpin(W.m[1], g, 0, d2), 0);
    assert_rc(pp_mpi_unpin(W.m[1], g, 0, d), 0);
    assert_rc(pp_mpi_unpin(W.m[1], g, 0, d), PP_ENOTPINNED);
    /* the home's own pins are plain pins */
    assert_rc(pp_mpi_pin(W.m[0], g, 0, &d, &got), 0);
    cr_assert(ct_check(d, 1, 100000));
    assert_rc(pp_mpi_unpin(W.m[0], g, 0, d), 0);
    assert_rc(pp_mpi_release(W.m[1], g), 0);
    assert_rc(pp_mpi_release(W.m[0], g), 0);
    cr_assert_eq(world_down(&W), 0);
    cr_assert_eq(ct_frees(W.ct[0], 1), 1, "freed exactly once");
    world_free_ct(&W);
}

Test(layer, unowned_pin_is_served_but_not_cached)
{
    world_t W;
    world_up(&W, 2, 2, 2, 0);
    pp_gref_t g = put_on(&W, 0, 1, 4096);
    void *d;
    for (int i = 0; i < 3; i++) {
        assert_rc(pp_mpi_pin(W.m[1], g, 0, &d, NULL), 0);
        cr_assert(ct_check(d, 1, 4096));
        assert_rc(pp_mpi_unpin(W.m[1], g, 0, d), 0);
    }
    pp_mpi_stats_t st;
    pp_mpi_stats(W.m[1], &st);
    cr_assert_eq(st.misses, 3, "without an owner here, every pin asks the home");
    assert_rc(pp_mpi_release(W.m[0], g), 0);
    cr_assert_eq(world_down(&W), 0);
    cr_assert_eq(ct_frees(W.ct[0], 1), 1);
    world_free_ct(&W);
}

Test(layer, weight_keeps_the_entry_until_it_comes_home)
{
    for (uint64_t seed = 1; seed <= 8; seed++) {
        world_t W;
        world_up(&W, 3, seed, 8, 300);
        pp_gref_t g = put_on(&W, 0, 1, 256);
        give(&W, 0, 1, g);
        give(&W, 1, 2, g);   /* a holder passes weight on: no message */
        assert_rc(pp_mpi_release(W.m[0], g), 0);
        assert_rc(pp_mpi_release(W.m[1], g), 0);
        test_drain(W.pool[0]);
        /* rank 2 still owns it: the home keeps it whatever the order */
        void *d;
        assert_rc(pp_mpi_pin(W.m[2], g, 0, &d, NULL), 0);
        cr_assert(ct_check(d, 1, 256));
        assert_rc(pp_mpi_unpin(W.m[2], g, 0, d), 0);
        cr_assert_eq(ct_frees(W.ct[0], 1), 0, "seed %llu: freed while rank 2 owns it",
                     (unsigned long long)seed);
        assert_rc(pp_mpi_release(W.m[2], g), 0);
        assert_rc(pp_mpi_release(W.m[2], g), PP_ESTALE);
        cr_assert_eq(world_down(&W), 0);
        cr_assert_eq(ct_frees(W.ct[0], 1), 1, "seed %llu", (unsigned long long)seed);
        for (int r = 0; r < 3; r++)
            cr_assert_eq(report_cap_count(&W.rep[r]), 0, "seed %llu rank %d: a report",
                         (unsigned long long)seed, r);
        world_free_ct(&W);
    }
}

Test(layer, last_release_frees_without_destroy)
{
    world_t W;
    world_up(&W, 2, 3, 4, 0);
    pp_gref_t g = put_on(&W, 0, 1, 256);
    give(&W, 0, 1, g);
    assert_rc(pp_mpi_release(W.m[0], g), 0);
    assert_rc(pp_mpi_release(W.m[1], g), 0);
    /* the return goes out within the batching delay; the home frees */
    cr_assert(WAIT_UNTIL((test_drain(W.pool[0]), ct_frees(W.ct[0], 1) == 1), TEST_WAIT_MS),
              "the home frees once the weight is back");
    void *d;
    assert_rc(pp_mpi_pin(W.m[1], g, 0, &d, NULL), PP_ESTALE);
    assert_rc(pp_mpi_pin(W.m[0], g, 0, &d, NULL), PP_ESTALE);
    cr_assert_eq(world_down(&W), 0);
    cr_assert_eq(ct_frees(W.ct[0], 1), 1);
    world_free_ct(&W);
}

Test(layer, returns_are_batched)
{
    world_t W;
    world_up(&W, 2, 4, 0, 0);
    enum { N = 200 };
    pp_gref_t g[N];
    for (int i = 0; i < N; i++) {
        g[i] = put_on(&W, 0, (size_t)i, 64);
        give(&W, 0, 1, g[i]);
        assert_rc(pp_mpi_release(W.m[0], g[i]), 0);
    }
    for (int i = 0; i < N; i++)
        assert_rc(pp_mpi_release(W.m[1], g[i]), 0);
    /* every interval goes home exactly once, in messages of many records
     * (how many messages depends on timing: the benchmark counts them) */
    cr_assert(WAIT_UNTIL(({
                             test_drain(W.pool[0]);
                             bool all = true;
                             for (int i = 0; i < N; i++)
                                 all = all && ct_frees(W.ct[0], (size_t)i) == 1;
                             all;
                         }),
                         TEST_WAIT_MS));
    pp_mpi_stats_t st;
    pp_mpi_stats(W.m[1], &st);
    cr_assert_eq(st.weight_records, N);
    cr_assert(st.weight_messages >= 1 && st.weight_messages <= st.weight_records);
    cr_assert_eq(world_down(&W), 0);
    for (int i = 0; i < N; i++)
        cr_assert_eq(ct_frees(W.ct[0], (size_t)i), 1);
    world_free_ct(&W);
}

Test(layer, token_imported_twice_here_is_refused)
{
    world_t W;
    world_up(&W, 2, 5, 2, 0);
    pp_gref_t g = put_on(&W, 0, 1, 64);
    pp_mpi_token_t t;
    assert_rc(pp_mpi_export(W.m[0], g, &t), 0);
    pp_gref_t got;
    assert_rc(pp_mpi_import(W.m[1], &t, &got), 0);
    assert_rc(pp_mpi_import(W.m[1], &t, &got), PP_EINVAL);
    pp_mpi_stats_t st;
    pp_mpi_stats(W.m[1], &st);
    cr_assert_eq(st.refused_imports, 1);
    /* at the home too: weight that is not out */
    assert_rc(pp_mpi_release(W.m[1], g), 0);
    assert_rc(pp_mpi_release(W.m[0], g), 0);
    cr_assert_eq(world_down(&W), 0);
    cr_assert_eq(ct_frees(W.ct[0], 1), 1);
    world_free_ct(&W);
}

Test(layer, duplicate_return_is_refused_and_frees_once)
{
    world_t W;
    world_up(&W, 3, 6, 2, 0);
    pp_gref_t g = put_on(&W, 0, 1, 64);
    pp_mpi_token_t t, t2;
    assert_rc(pp_mpi_export(W.m[0], g, &t), 0);
    assert_rc(pp_mpi_export(W.m[0], g, &t2), 0);
    pp_gref_t got;
    assert_rc(pp_mpi_import(W.m[1], &t, &got), 0);
    assert_rc(pp_mpi_import(W.m[2], &t, &got), 0);   /* the same bytes: a misuse */
    assert_rc(pp_mpi_release(W.m[1], g), 0);
    assert_rc(pp_mpi_release(W.m[2], g), 0);
    /* t2 is still out: the home must keep the entry */
    cr_assert(WAIT_UNTIL(({
                             pp_mpi_stats_t st;
                             pp_mpi_stats(W.m[0], &st);
                             st.refused_returns == 1;
                         }),
                         TEST_WAIT_MS),
              "the second return of one interval is refused");
    cr_assert(report_has(&W.rep[0], 0, "returned weight", "refused", NULL));
    test_drain(W.pool[0]);
    cr_assert_eq(ct_frees(W.ct[0], 1), 0, "a duplicate never frees early");
    assert_rc(pp_mpi_token_drop(W.m[0], &t2), 0);
    assert_rc(pp_mpi_release(W.m[0], g), 0);
    cr_assert_eq(world_down(&W), 0);
    cr_assert_eq(ct_frees(W.ct[0], 1), 1);
    world_free_ct(&W);
}

Test(layer, export_past_unit_weight_mints_more)
{
    world_t W;
    world_up(&W, 3, 7, 3, 0);
    pp_gref_t g = put_on(&W, 0, 1, 64);
    give(&W, 0, 1, g);
    enum { K = 70 };   /* more than the 32 splits an interval of 2^32 allows */
    for (int i = 0; i < K; i++)
        give(&W, 1, 2, g);
    for (int i = 0; i < K; i++)
        assert_rc(pp_mpi_release(W.m[2], g), 0);
    assert_rc(pp_mpi_release(W.m[1], g), 0);
    test_drain(W.pool[0]);
    cr_assert_eq(ct_frees(W.ct[0], 1), 0, "the home still owns it");
    assert_rc(pp_mpi_release(W.m[0], g), 0);
    cr_assert_eq(world_down(&W), 0);
    cr_assert_eq(ct_frees(W.ct[0], 1), 1);
    for (int r = 0; r < 3; r++)
        cr_assert_eq(report_cap_count(&W.rep[r]), 0);
    world_free_ct(&W);
}

typedef struct pinner {
    pp_mpi_t *m;
    pp_gref_t g;
    void *d;
    uint32_t got;
    int rc;
} pinner_t;

static void *pinner_main(void *arg)
{
    pinner_t *p = arg;
    p->rc = pp_mpi_pin(p->m, p->g, 0, &p->d, &p->got);
    return NULL;
}

Test(layer, versions_are_futures)
{
    world_t W;
    world_up(&W, 2, 8, 3, 0);
    pp_gref_t g = put_on(&W, 0, 1, 4096);
    give(&W, 0, 1, g);
    pp_gref_t v2 = g;
    v2.version = 2;
    void *d;
    /* a copy of version 1 in the cache does not answer a pin of version 2 */
    assert_rc(pp_mpi_pin(W.m[1], g, 0, &d, NULL), 0);
    assert_rc(pp_mpi_unpin(W.m[1], g, 0, d), 0);
    uint32_t early = 0;
    int rc = pp_mpi_pin(W.m[1], v2, PP_PIN_NOWAIT, &d, &early);
    cr_assert_eq(rc, PP_EAGAIN, "%s (version %u) for a pin of version 2", pp_err_name(rc), early);
    pinner_t p = { W.m[1], v2, NULL, 0, -99 };
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, pinner_main, &p), 0);
    /* the home writes version 2 */
    uint32_t got;
    assert_rc(pp_mpi_pin(W.m[0], g, PP_PIN_WRITE, &d, &got), 0);
    cr_assert_eq(got, 1u);
    memset((char *)d + 2048, 0xab, 2048);
    assert_rc(pp_mpi_unpin(W.m[0], g, PP_PIN_WRITE, d), 0);
    pthread_join(th, NULL);
    assert_rc(p.rc, 0);
    cr_assert_eq(p.got, 2u, "the pin waited for version 2");
    unsigned char *c = p.d;
    cr_assert_eq(c[4095], 0xab);
    assert_rc(pp_mpi_unpin(W.m[1], g, 0, p.d), 0);
    /* a version-1 pin now is a hit on the newer copy */
    assert_rc(pp_mpi_pin(W.m[1], g, 0, &d, &got), 0);
    cr_assert_eq(got, 2u);
    assert_rc(pp_mpi_unpin(W.m[1], g, 0, d), 0);
    /* a home write pin excludes nothing of the home's own, but a remote
     * write is refused */
    assert_rc(pp_mpi_pin(W.m[1], g, PP_PIN_WRITE, &d, NULL), PP_ENOTSUP);
    assert_rc(pp_mpi_unpin(W.m[0], g, PP_PIN_WRITE, d), PP_ENOTPINNED);
    assert_rc(pp_mpi_release(W.m[1], g), 0);
    assert_rc(pp_mpi_release(W.m[0], g), 0);
    cr_assert_eq(world_down(&W), 0);
    world_free_ct(&W);
}

Test(layer, snapshot_waits_for_the_writer)
{
    /* While a home write pin is held, a remote pin of the version it will
     * publish is parked, then served with the written bytes, never torn. */
    for (uint64_t seed = 10; seed < 14; seed++) {
        world_t W;
        world_up(&W, 2, seed, 4, 0);
        pp_gref_t g = put_on(&W, 0, 1, 65536);
        void *d;
        assert_rc(pp_mpi_pin(W.m[0], g, PP_PIN_WRITE, &d, NULL), 0);
        pp_gref_t v2 = g;
        v2.version = 2;
        pinner_t p = { W.m[1], v2, NULL, 0, -99 };
        pthread_t th;
        cr_assert_eq(pthread_create(&th, NULL, pinner_main, &p), 0);
        memset(d, 0x5a, 65536);
        assert_rc(pp_mpi_unpin(W.m[0], g, PP_PIN_WRITE, d), 0);
        pthread_join(th, NULL);
        assert_rc(p.rc, 0);
        const unsigned char *c = p.d;
        for (size_t i = 0; i < 65536; i++)
            cr_assert_eq(c[i], 0x5a, "seed %llu byte %zu", (unsigned long long)seed, i);
        assert_rc(pp_mpi_unpin(W.m[1], g, 0, p.d), 0);
        assert_rc(pp_mpi_release(W.m[0], g), 0);
        cr_assert_eq(world_down(&W), 0);
        world_free_ct(&W);
    }
}

Test(layer, bad_input_is_an_error)
{
    world_t W;
    world_up(&W, 2, 9, 1, 0);
    pp_gref_t g = put_on(&W, 0, 1, 64);
    void *d;
    pp_gref_t bad = g;
    bad.rank = 7;
    assert_rc(pp_mpi_pin(W.m[1], bad, 0, &d, NULL), PP_EINVAL);
    assert_rc(pp_mpi_retain(W.m[1], bad), PP_EINVAL);
    bad = g;
    bad.ref ^= 0x5555;   /* a slot the home never had */
    assert_rc(pp_mpi_pin(W.m[1], bad, 0, &d, NULL), PP_ESTALE);
    bad = g;
    bad.ref = PP_REF_NONE;
    assert_rc(pp_mpi_pin(W.m[1], bad, 0, &d, NULL), PP_EINVAL);
    /* releasing a ref this rank never imported: an error, no message */
    assert_rc(pp_mpi_release(W.m[1], g), PP_ESTALE);
    assert_rc(pp_mpi_retain(W.m[1], g), PP_ESTALE);
    pp_mpi_token_t t;
    assert_rc(pp_mpi_export(W.m[1], g, &t), PP_ESTALE);
    /* a garbage token */
    t = (pp_mpi_token_t){ g, 5, 5 };
    pp_gref_t got;
    assert_rc(pp_mpi_import(W.m[1], &t, &got), PP_EINVAL);
    t = (pp_mpi_token_t){ g, 1ull << 40, (1ull << 40) + 9 };
    assert_rc(pp_mpi_import(W.m[0], &t, &got), PP_EINVAL);   /* never minted */
    /* unpin with a pointer that is no copy of this ref */
    pp_gref_t g2 = put_on(&W, 0, 2, 64);
    assert_rc(pp_mpi_pin(W.m[1], g, 0, &d, NULL), 0);
    assert_rc(pp_mpi_unpin(W.m[1], g2, 0, d), PP_EINVAL);
    assert_rc(pp_mpi_unpin(W.m[1], g, 0, d), 0);
    /* a dead entry */
    assert_rc(pp_mpi_release(W.m[0], g2), 0);
    assert_rc(pp_mpi_pin(W.m[1], g2, 0, &d, NULL), PP_ESTALE);
    assert_rc(pp_mpi_pin(W.m[1], g2, PP_PIN_NOWAIT, &d, NULL), PP_EAGAIN);
    assert_rc(pp_mpi_release(W.m[0], g), 0);
    pp_mpi_stats_t st;
    pp_mpi_stats(W.m[1], &st);
    cr_assert_eq(st.weight_messages, 0, "no release of rank 1 sent weight");
    cr_assert_eq(world_down(&W), 0);
    world_free_ct(&W);
}

Test(layer, destroy_reports_what_was_never_returned)
{
    world_t W;
    world_up(&W, 2, 11, 2, 0);
    pp_gref_t g = put_on(&W, 0, 1, 64);
    pp_gref_t h = put_on(&W, 0, 2, 64);
    give(&W, 0, 1, g);                     /* rank 1 never releases it */
    pp_mpi_token_t t;
    assert_rc(pp_mpi_export(W.m[0], h, &t), 0);   /* never imported */
    assert_rc(pp_mpi_release(W.m[0], g), 0);
    assert_rc(pp_mpi_release(W.m[0], h), 0);
    void *d;
    assert_rc(pp_mpi_pin(W.m[1], g, 0, &d, NULL), 0);
    assert_rc(pp_mpi_destroy(W.m[1]), PP_EBUSY);   /* a remote pin is held */
    assert_rc(pp_mpi_unpin(W.m[1], g, 0, d), 0);
    cr_assert_eq(world_down(&W), 0);
    cr_assert(report_has(&W.rep[1], 0, "never", "released", NULL));
    cr_assert(report_has(&W.rep[0], 0, "never came back", NULL, NULL));
    cr_assert_eq(ct_frees(W.ct[0], 1), 1, "its weight went home at destroy");
    cr_assert_eq(ct_frees(W.ct[0], 2), 1, "freed by destroy, and reported");
    world_free_ct(&W);
}
