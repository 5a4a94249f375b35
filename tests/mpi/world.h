/*
 * world.h -- the in-process world of the layer's Criterion tests: ranks
 * as threads of the test process, each with its own pool (reports
 * captured), a counting type and a layer over the in-process transport,
 * which delays, reorders and duplicates messages from a seed.
 */
#ifndef PP_TESTS_MPI_WORLD_H
#define PP_TESTS_MPI_WORLD_H

#include "helpers.h"

#include "layer.h"
#include "transport_inproc.h"   /* tests/mpi/support: ranks as threads */

#define MAXR 4

typedef struct world {
    int n;
    pp__inproc_world_t *w;
    pp_pool_t *pool[MAXR];
    pp_mpi_t *m[MAXR];
    report_cap_t rep[MAXR];
    ct_t *ct[MAXR];
    unsigned dup;      /* duplicates: one may still be in flight after destroy */
} world_t;

/* n ranks; rank r's pool limited to limit[r] bytes (0: none; no swap);
 * limit may be NULL. */
static inline void world_up_limit(world_t *W, int n, uint64_t seed, unsigned max_delay,
                                  unsigned dup, const size_t *limit)
{
    memset(W, 0, sizeof *W);
    W->n = n;
    W->dup = dup;
    pp__inproc_chaos_t chaos = { seed, max_delay, dup };
    cr_assert_eq(pp__inproc_world_create(n, &chaos, &W->w), 0);
    for (int r = 0; r < n; r++) {
        pp_options_t opt = PP_OPTIONS_INIT;
        opt.mem_limit = limit != NULL ? limit[r] : 0;
        report_cap_init(&W->rep[r]);
        report_cap_attach(&W->rep[r], &opt);
        W->pool[r] = test_pool(&opt);
        W->ct[r] = ct_new(4096);
        cr_assert_eq(pp__layer_create_on(pp__inproc_rank(W->w, r), false, W->pool[r], &W->m[r]),
                     0);
    }
}

static inline void world_up(world_t *W, int n, uint64_t seed, unsigned max_delay, unsigned dup)
{
    world_up_limit(W, n, seed, max_delay, dup, NULL);
}

/* world_up, with rank 1's pool capped at mem_limit bytes (0: no cap), so
 * that a put there drops cached copies (PP_TYPE_DISCARD). */
static inline void world_up_capped(world_t *W, int n, uint64_t seed, unsigned max_delay,
                                   unsigned dup, size_t mem_limit)
{
    size_t limit[MAXR] = { 0, mem_limit, 0, 0 };
    world_up_limit(W, n, seed, max_delay, dup, limit);
}

typedef struct down_arg {
    pp_mpi_t *m;
    int rc;
} down_arg_t;

static inline void *down_main(void *arg)
{
    down_arg_t *a = arg;
    a->rc = pp_mpi_destroy(a->m);
    return NULL;
}

/* Collective destroy (a thread per rank; rank here's on the calling thread,
 * -1: none), then the pools; returns the messages the transport still
 * held: 0, since destroy drains -- except a duplicate the transport made
 * of a message whose first copy was counted (only with W->dup), which is
 * still 0 for the caller. */
static inline size_t world_down_here(world_t *W, int here)
{
    pthread_t th[MAXR];
    down_arg_t a[MAXR];
    for (int r = 0; r < W->n; r++) {
        a[r] = (down_arg_t){ W->m[r], -1 };
        if (r != here)
            cr_assert_eq(pthread_create(&th[r], NULL, down_main, &a[r]), 0);
    }
    if (here >= 0)
        down_main(&a[here]);
    for (int r = 0; r < W->n; r++) {
        if (r != here)
            pthread_join(th[r], NULL);
        cr_assert_eq(a[r].rc, 0, "rank %d destroy: %s", r, pp_err_name(a[r].rc));
    }
    for (int r = 0; r < W->n; r++)
        test_destroy(W->pool[r]);
    size_t left = pp__inproc_world_destroy(W->w);
    return W->dup != 0 ? 0 : left;
}

static inline size_t world_down(world_t *W) { return world_down_here(W, -1); }

static inline void world_free_ct(world_t *W)
{
    for (int r = 0; r < W->n; r++) {
        ct_delete(W->ct[r]);
        report_cap_free(&W->rep[r]);
    }
}

/* A home entry of rank r: id's pattern, size bytes. */
static inline pp_gref_t put_on(world_t *W, int r, size_t id, size_t size)
{
    pp_gref_t g;
    void *buf = ct_buf(W->ct[r], id, size);
    assert_rc(pp_mpi_put(W->m[r], buf, size, &W->ct[r]->type, 0, &g), 0);
    cr_assert_eq(g.rank, (uint32_t)r);
    cr_assert_eq(g.version, 1u);
    return g;
}

/* Gives rank to an owner of g: an export on from, an import on to. */
static inline void give(world_t *W, int from, int to, pp_gref_t g)
{
    pp_mpi_token_t t;
    assert_rc(pp_mpi_export(W->m[from], g, &t), 0);
    pp_gref_t got;
    assert_rc(pp_mpi_import(W->m[to], &t, &got), 0);
    cr_assert_eq(got.ref, g.ref);
}

/* Installs fn as m's test point hook (layer.h), with ctx; NULL removes it. */
static inline void world_tp(pp_mpi_t *m, pp__mpi_tp_fn fn, void *ctx)
{
    m->tp_ctx = ctx;
    /* release: tp_ctx is set before a thread can see fn */
    atomic_store_explicit(&m->tp, fn, memory_order_release);
}

#endif /* PP_TESTS_MPI_WORLD_H */
