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
    /* Rank 1's progress thread is held at its next request check (it takes
     * req_mu every turn, after taking its commands) while the 200 releases
     * queue their returns: it can have taken some of them before it
     * stopped, and takes the rest in its next turn, so they go home in at
     * most two messages, whatever the timing.  A return sent per release
     * would be 200. */
    pthread_mutex_lock(&W.m[1]->req_mu);
    for (int i = 0; i < N; i++)
        assert_rc(pp_mpi_release(W.m[1], g[i]), 0);
    pthread_mutex_unlock(&W.m[1]->req_mu);
    /* every interval goes home exactly once */
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
    cr_assert(st.weight_messages >= 1 && st.weight_messages <= 2,
              "%llu messages for %d returns", (unsigned long long)st.weight_messages, N);
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
    assert_rc(pp_mpi_import(W.m[2], &t, &got), PP_EINVAL);   /* the same token: refused */
    /* The same weight under another identity (a forged token, which the
     * claims cannot see): its return is the duplicate. */
    pp_mpi_token_t forged = t;
    forged.seq += 1000;
    assert_rc(pp_mpi_import(W.m[2], &forged, &got), 0);
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
    t = (pp_mpi_token_t){ g, 5, 5, 0, 0, 1 };
    pp_gref_t got;
    assert_rc(pp_mpi_import(W.m[1], &t, &got), PP_EINVAL);
    t = (pp_mpi_token_t){ g, 1ull << 40, (1ull << 40) + 9, 1, 0, 1 };
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

/* ---- the hit path: per-thread hints and counters (perthread.h) ---------- */

/* Pins g on m, checks the bytes of id and the version, unpins. */
static void pin_check(pp_mpi_t *m, pp_gref_t g, size_t id, size_t size, uint32_t want)
{
    void *d = NULL;
    uint32_t got = 0;
    assert_rc(pp_mpi_pin(m, g, 0, &d, &got), 0);
    cr_assert(ct_check(d, id, size), "the copy holds entry %zu's bytes", id);
    cr_assert_eq(got, want, "version %u, expected %u", got, want);
    assert_rc(pp_mpi_unpin(m, g, 0, d), 0);
}

Test(layer, hint_to_a_replaced_copy_never_answers_a_newer_version)
{
    world_t W;
    world_up(&W, 2, 21, 3, 0);
    pp_gref_t g = put_on(&W, 0, 1, 4096);
    give(&W, 0, 1, g);
    /* a miss, then a hit: this thread's hint names the version-1 copy */
    pin_check(W.m[1], g, 1, 4096, 1);
    void *d1 = NULL;
    assert_rc(pp_mpi_pin(W.m[1], g, 0, &d1, NULL), 0);   /* held: the copy stays alive */
    pp_gref_t v2 = g;
    v2.version = 2;
    void *d;
    uint32_t got = 0;
    int rc = pp_mpi_pin(W.m[1], v2, PP_PIN_NOWAIT, &d, &got);
    cr_assert_eq(rc, PP_EAGAIN, "%s (version %u) from a hint to version 1", pp_err_name(rc),
                 got);
    /* the home publishes version 2 */
    assert_rc(pp_mpi_pin(W.m[0], g, PP_PIN_WRITE, &d, NULL), 0);
    memset((char *)d + 1024, 0xcd, 1024);
    assert_rc(pp_mpi_unpin(W.m[0], g, PP_PIN_WRITE, d), 0);
    assert_rc(pp_mpi_pin(W.m[1], v2, 0, &d, &got), 0);
    cr_assert_eq(got, 2u);
    cr_assert_eq(((unsigned char *)d)[1024], 0xcd, "the version-2 bytes");
    cr_assert_neq(d, d1, "a new copy");
    assert_rc(pp_mpi_unpin(W.m[1], g, 0, d), 0);
    /* The version-1 copy left the table and was released, so it is dead
     * (pinned, but no pp_pin succeeds on it): the stale hint fails its pin
     * and even a version-1 pin gets the newer copy, twice (the second from
     * the refilled hint). */
    for (int i = 0; i < 2; i++) {
        assert_rc(pp_mpi_pin(W.m[1], g, 0, &d, &got), 0);
        cr_assert_eq(got, 2u, "pin %d: a version-1 pin got version %u", i, got);
        cr_assert_eq(((unsigned char *)d)[1024], 0xcd);
        assert_rc(pp_mpi_unpin(W.m[1], g, 0, d), 0);
    }
    /* the snapshot still pinned never changed */
    cr_assert(ct_check(d1, 1, 4096), "the version-1 copy is intact while pinned");
    assert_rc(pp_mpi_unpin(W.m[1], g, 0, d1), 0);
    pp_mpi_stats_t st;
    pp_mpi_stats(W.m[1], &st);
    cr_assert_eq(st.misses, 2, "version 1 and version 2");
    cr_assert_geq(st.hits, 3);   /* the version-2 pin may find its copy installed */
    assert_rc(pp_mpi_release(W.m[1], g), 0);
    assert_rc(pp_mpi_release(W.m[0], g), 0);
    cr_assert_eq(world_down(&W), 0);
    world_free_ct(&W);
}

Test(layer, hint_to_a_dropped_copy_fetches_again)
{
    /* rank 1's pool holds 256 KiB: a local put of 200 KiB drops the cached
     * copy (PP_TYPE_DISCARD) that this thread's hint names */
    enum { SZ = 64 << 10, BIG = 200 << 10 };
    world_t W;
    world_up_capped(&W, 2, 22, 3, 0, 256u << 10);
    pp_gref_t g = put_on(&W, 0, 1, SZ);
    give(&W, 0, 1, g);
    pin_check(W.m[1], g, 1, SZ, 1);
    pin_check(W.m[1], g, 1, SZ, 1);   /* a hit: the hint is set */
    pp_ref_t big = ct_put(W.pool[1], W.ct[1], 7, BIG, 0);
    test_drain(W.pool[1]);            /* the dropped copy is reclaimed: its slot is free */
    assert_rc(pp_release(W.pool[1], big), 0);
    test_drain(W.pool[1]);
    pp_ref_t other = ct_put(W.pool[1], W.ct[1], 8, 4096, 0);   /* may take that slot */
    /* the hint and the table both name the dropped copy: a miss, the
     * home's bytes again, never the local entry's */
    pin_check(W.m[1], g, 1, SZ, 1);
    pin_check(W.m[1], g, 1, SZ, 1);
    pp_mpi_stats_t st;
    pp_mpi_stats(W.m[1], &st);
    cr_assert_eq(st.misses, 2, "the drop made one more fetch");
    cr_assert_eq(st.hits, 2);
    assert_rc(pp_release(W.pool[1], other), 0);
    assert_rc(pp_mpi_release(W.m[1], g), 0);
    assert_rc(pp_mpi_release(W.m[0], g), 0);
    cr_assert_eq(world_down(&W), 0);
    world_free_ct(&W);
}

Test(layer, hints_of_colliding_refs_never_mix_copies)
{
    /* more refs than a thread has hint slots: each pin gets its own bytes */
    enum { N = 300 };
    world_t W;
    world_up(&W, 3, 23, 2, 0);
    pp_gref_t g[N];
    for (int i = 0; i < N; i++) {
        int home = i % 2 == 0 ? 0 : 2;   /* two homes: equal refs of two ranks */
        g[i] = put_on(&W, home, (size_t)i, 256);
        give(&W, home, 1, g[i]);
    }
    for (int round = 0; round < 3; round++)
        for (int i = 0; i < N; i++)
            pin_check(W.m[1], g[(i * 7 + round) % N], (size_t)((i * 7 + round) % N), 256, 1);
    pp_mpi_stats_t st;
    pp_mpi_stats(W.m[1], &st);
    cr_assert_eq(st.misses, N);
    cr_assert_eq(st.hits, 2 * N);
    for (int i = 0; i < N; i++) {
        assert_rc(pp_mpi_release(W.m[1], g[i]), 0);
        assert_rc(pp_mpi_release(W.m[i % 2 == 0 ? 0 : 2], g[i]), 0);
    }
    cr_assert_eq(world_down(&W), 0);
    world_free_ct(&W);
}

Test(layer, a_new_layer_sees_no_hint_or_count_of_an_old_one)
{
    /* Worlds one after the other, on this thread: a new world's layer often
     * gets the address of the old world's client layer (freed last on this
     * thread, it is then the client), and its refs the same values (fresh
     * pools hand out slots in the same order); hints and counts must not
     * carry over. */
    pp_mpi_t *old_client = NULL;
    pp_ref_t old_ref = PP_REF_NONE;
    int reused = 0;
    enum { LIVES = 8 };
    for (int life = 0; life < LIVES; life++) {
        world_t W;
        world_up(&W, 2, 24, 2, 0);
        int c = W.m[0] == old_client ? 0 : 1, home = 1 - c;
        reused += W.m[c] == old_client;
        size_t id = (size_t)life + 1;   /* other bytes in each life */
        pp_gref_t g = put_on(&W, home, id, 4096);
        if (life > 0)
            cr_log_info("life %d: client layer at the old one's address: %s, home ref %s", life,
                        W.m[c] == old_client ? "yes" : "no",
                        g.ref == old_ref ? "the same" : "another");
        give(&W, home, c, g);
        pin_check(W.m[c], g, id, 4096, 1);
        pin_check(W.m[c], g, id, 4096, 1);
        void *d;
        assert_rc(pp_mpi_pin(W.m[c], g, 0, &d, NULL), 0);
        cr_assert(ct_check(d, id, 4096), "life %d: this layer's copy", life);
        pp_mpi_stats_t st;
        pp_mpi_stats(W.m[c], &st);
        cr_assert_eq(st.misses, 1, "life %d", life);
        cr_assert_eq(st.hits, 2, "life %d: exact, none counted into an old layer", life);
        assert_rc(pp_mpi_destroy(W.m[c]), PP_EBUSY, "life %d: a pin is held", life);
        assert_rc(pp_mpi_unpin(W.m[c], g, 0, d), 0);
        old_client = W.m[c];
        old_ref = g.ref;
        assert_rc(pp_mpi_release(W.m[c], g), 0);
        assert_rc(pp_mpi_release(W.m[home], g), 0);
        /* glibc: with this thread's cache of freed blocks of a layer's size
         * full, the client's block goes back to the heap's bins, where the
         * next world's calloc finds it (calloc skips that cache) */
        void *fill[8];
        for (int i = 0; i < 8; i++)
            fill[i] = malloc(sizeof(pp_mpi_t));
        for (int i = 0; i < 8; i++)
            free(fill[i]);
        cr_assert_eq(world_down_here(&W, c), 0);
        world_free_ct(&W);
    }
    cr_log_info("%d of %d new client layers at the old one's address", reused, LIVES - 1);
}

typedef struct hitter {
    pp_mpi_t *m;
    pp_gref_t g;
    int k;
    void **held;   /* [k] pins left for another thread to drop */
    int rc;
} hitter_t;

static void *hitter_main(void *arg)
{
    hitter_t *h = arg;
    h->rc = 0;
    for (int i = 0; i < h->k && h->rc == 0; i++)
        h->rc = pp_mpi_pin(h->m, h->g, 0, &h->held[i], NULL);
    return NULL;
}

Test(layer, hits_and_pins_add_up_across_threads)
{
    /* Threads pin and exit holding their pins; this thread drops them:
     * each thread's count is +k, this one's -T*k; the sums are exact, and
     * destroy is busy until the last unpin. */
    enum { T = 4, K = 500 };
    world_t W;
    world_up(&W, 2, 25, 2, 0);
    pp_gref_t g = put_on(&W, 0, 1, 4096);
    give(&W, 0, 1, g);
    pin_check(W.m[1], g, 1, 4096, 1);   /* the one miss */
    static void *held[T][K];
    hitter_t h[T];
    pthread_t th[T];
    for (int t = 0; t < T; t++) {
        h[t] = (hitter_t){ W.m[1], g, K, held[t], -99 };
        cr_assert_eq(pthread_create(&th[t], NULL, hitter_main, &h[t]), 0);
    }
    for (int t = 0; t < T; t++) {
        pthread_join(th[t], NULL);
        assert_rc(h[t].rc, 0, "thread %d", t);
    }
    pp_mpi_stats_t st;
    pp_mpi_stats(W.m[1], &st);
    cr_assert_eq(st.misses, 1);
    cr_assert_eq(st.hits, T * K, "every pin of the threads was a hit");
    for (int t = 0; t < T; t++) {
        for (int i = 0; i < K; i++) {
            assert_rc(pp_mpi_destroy(W.m[1]), PP_EBUSY, "%d pins still held",
                      (T - t) * K - i);
            cr_assert(ct_check(held[t][i], 1, 4096));
            assert_rc(pp_mpi_unpin(W.m[1], g, 0, held[t][i]), 0);
        }
    }
    pp_mpi_stats(W.m[1], &st);
    cr_assert_eq(st.hits, T * K, "unpins count no hit");
    assert_rc(pp_mpi_release(W.m[1], g), 0);
    assert_rc(pp_mpi_release(W.m[0], g), 0);
    cr_assert_eq(world_down(&W), 0, "no pin held: destroy goes on");
    world_free_ct(&W);
}

Test(layer, pin_many_of_a_cached_ref_keeps_the_pin_count)
{
    /* pp_mpi_pin_many prefetches first; a prefetch that hits pins and
     * unpins the copy, and must count both: else the unpin alone makes
     * the count fall below the pins held and destroy misses one. */
    world_t W;
    world_up(&W, 2, 26, 2, 0);
    pp_gref_t g = put_on(&W, 0, 1, 4096);
    give(&W, 0, 1, g);
    pin_check(W.m[1], g, 1, 4096, 1);
    void *d[2];
    for (int i = 0; i < 3; i++) {
        assert_rc(pp_mpi_pin_many(W.m[1], (pp_gref_t[]){ g, g }, 2, 0, d, NULL), 0);
        assert_rc(pp_mpi_unpin(W.m[1], g, 0, d[0]), 0);
        assert_rc(pp_mpi_unpin(W.m[1], g, 0, d[1]), 0);
    }
    assert_rc(pp_mpi_pin(W.m[1], g, 0, &d[0], NULL), 0);
    uint64_t hits;
    int64_t pins;
    pp__perthread_sum(W.m[1], &hits, &pins);   /* what destroy looks at */
    cr_assert_eq(pins, 1, "remote pins held: %lld", (long long)pins);
    assert_rc(pp_mpi_destroy(W.m[1]), PP_EBUSY, "a remote pin is held");
    assert_rc(pp_mpi_unpin(W.m[1], g, 0, d[0]), 0);
    assert_rc(pp_mpi_release(W.m[1], g), 0);
    assert_rc(pp_mpi_release(W.m[0], g), 0);
    cr_assert_eq(world_down(&W), 0);
    world_free_ct(&W);
}
