/*
 * test_remote.c -- the remote side of the MPI layer in the orders that
 * random timing only makes likely: the layer's test points (layer.h) hold
 * a thread at a named place while the test makes the other side move, so
 * each race here happens on every run.  Also what a remote pin gets when
 * its home cannot give it the data.
 */
#include "world.h"

TestSuite(remote, .timeout = 60);

/* ---- a miss racing an install ------------------------------------------ */

/* At the pin's MISS point (once), on the pinning thread: ends the home's
 * write pin that holds the fetch back, then waits until that fetch is
 * installed and finished, so the pin takes req_mu only after the copy is
 * in the table and the request is gone. */
typedef struct miss_gate {
    world_t *W;
    pp_gref_t g;
    void *wd;                      /* the home's write pin */
    _Atomic int reached;
} miss_gate_t;

static void finish_fetch_at_miss(pp_mpi_t *m, enum pp__mpi_tp where, void *arg, void *ctx)
{
    (void)arg;
    miss_gate_t *gate = ctx;
    if (where != PP__MPI_TP_MISS || atomic_fetch_add(&gate->reached, 1) != 0)
        return;
    assert_rc(pp_mpi_unpin(gate->W->m[0], gate->g, PP_PIN_WRITE, gate->wd), 0);
    pthread_mutex_lock(&m->req_mu);
    while (m->reqs != NULL)
        pthread_cond_wait(&m->req_cv, &m->req_mu);   /* finish_req broadcasts */
    pthread_mutex_unlock(&m->req_mu);
}

Test(remote, miss_racing_an_install_takes_the_installed_copy)
{
    world_t W;
    world_up(&W, 2, 31, 3, 0);
    pp_gref_t g = put_on(&W, 0, 1, 4096);
    give(&W, 0, 1, g);
    /* The home's write pin holds every serve of g back: the fetch below
     * parks at the home, so no copy can be here before the next pin looks. */
    miss_gate_t gate = { .W = &W, .g = g };
    assert_rc(pp_mpi_pin(W.m[0], g, PP_PIN_WRITE, &gate.wd, NULL), 0);
    /* a fetch without a waiter: the progress thread will install its copy */
    void *d = NULL;
    uint32_t got = 0;
    assert_rc(pp_mpi_pin(W.m[1], g, PP_PIN_NOWAIT, &d, &got), PP_EAGAIN);
    world_tp(W.m[1], finish_fetch_at_miss, &gate);
    /* misses (no copy yet); at its MISS point the fetch is let go and ends */
    assert_rc(pp_mpi_pin(W.m[1], g, 0, &d, &got), 0);
    world_tp(W.m[1], NULL, NULL);
    cr_assert_eq(atomic_load(&gate.reached), 1, "the pin missed once");
    cr_assert(ct_check(d, 1, 4096));
    cr_assert_eq(got, 2u, "the version the write unpin published");
    assert_rc(pp_mpi_unpin(W.m[1], g, 0, d), 0);
    pp_mpi_stats_t st;
    pp_mpi_stats(W.m[1], &st);
    cr_assert_eq(st.misses, 1, "%llu fetches: the copy installed while the pin looked "
                 "was fetched again", (unsigned long long)st.misses);
    assert_rc(pp_mpi_release(W.m[1], g), 0);
    assert_rc(pp_mpi_release(W.m[0], g), 0);
    cr_assert_eq(world_down(&W), 0);
    world_free_ct(&W);
}

/* ---- weight returns past 2^32 messages --------------------------------- */

Test(remote, weight_returns_past_two_to_the_32_are_not_duplicates)
{
    enum { N = 4 };
    world_t W;
    world_up(&W, 2, 32, 3, 0);
    pp_gref_t g[N];
    for (int i = 0; i < N; i++) {
        g[i] = put_on(&W, 0, (size_t)i + 1, 256);
        give(&W, 0, 1, g[i]);
        assert_rc(pp_mpi_release(W.m[0], g[i]), 0);
    }
    /* By hand, before any return: rank 1 has sent 2^32 - 2 returns to
     * rank 0, and rank 0 has seen every one of them.  Each release below
     * is one return message (the next waits for the home's free), with
     * the sequence numbers 2^32 - 2, 2^32 - 1, 2^32 and 2^32 + 1.  The
     * queue of commands orders these stores before the progress threads
     * read them. */
    const uint64_t start = UINT32_MAX - 1u;
    W.m[1]->outbox[0].seq = start;
    assert_rc(pp__wset_add(&W.m[0]->seen_seq[1], (pp__wiv_t){ 0, start }), 0);
    for (int i = 0; i < N; i++) {
        assert_rc(pp_mpi_release(W.m[1], g[i]), 0);
        cr_assert(WAIT_UNTIL((test_drain(W.pool[0]), ct_frees(W.ct[0], (size_t)i + 1) == 1),
                             TEST_WAIT_MS),
                  "return %d (sequence number %#llx) never freed its entry: taken for a "
                  "duplicate", i, (unsigned long long)(start + (uint64_t)i));
    }
    pp_mpi_stats_t st;
    pp_mpi_stats(W.m[0], &st);
    cr_assert_eq(st.refused_returns, 0);
    cr_assert_eq(world_down(&W), 0);
    cr_assert_eq(report_cap_count(&W.rep[0]), 0, "no report at the home");
    world_free_ct(&W);
}
