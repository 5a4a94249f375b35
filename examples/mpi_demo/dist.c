/*
 * pinpool-mpi-demo -- tiled Cholesky across MPI ranks on pinpool_mpi.
 *
 * dist.c: one rank's run, apart from the factorisation (factor.c).
 *
 *  1. Each rank makes its pool and its pp_mpi_t (on its own duplicate of
 *     MPI_COMM_WORLD: the demo's own MPI calls below do not mix with the
 *     layer's), generates its tiles from (i, j) exactly as the
 *     single-node demo does (tiles.c) and pp_mpi_put's them.
 *  2. Names: every rank's global refs go to every rank (MPI_Allgather).
 *  3. Owners: a name is not an owner.  Each home exports one token per
 *     tile for every other rank that will read it (pp_mpi_export), the
 *     tokens travel in the demo's own message (MPI_Alltoallv), and each
 *     receiver imports them (pp_mpi_import): the way a scheduler carries
 *     owners in the messages it already sends.  A rank caches copies only
 *     of refs it owns, so these owners are also what lets a tile fetched
 *     once be read many times.
 *  4. The factorisation (factor.c), between barriers.
 *  5. The residual: each rank computes (L L^T)(i, j) for its own tiles,
 *     reading remote L tiles by remote pins of their final versions; the
 *     sums are reduced by main.c.
 *  6. The end: every rank releases what it holds (its tiles' owners and
 *     the imported ones: the weight goes home in batched messages), then
 *     pp_mpi_destroy, collective, drains what is still in flight.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "mpi_demo.h"
#include "tiles.h"

#include <mpi.h>
#include <omp.h>

#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Pins retried after PP_ENOMEM (every resident byte pinned) before the
 * run gives up. */
#define ENOMEM_TRIES 100000

/* ---- small things shared with factor.c ------------------------------------ */

void md_failed(md_run_t *r, int rc, const char *what)
{
    int expected = 0;
    if (atomic_compare_exchange_strong_explicit(&r->failed, &expected, rc,
                                                memory_order_relaxed, memory_order_relaxed))
        fprintf(stderr, "pinpool-mpi-demo: rank %d: %s: %s (%s)\n", r->rank, what,
                pp_strerror(rc), pp_err_name(rc));
}

void md_count_done(md_run_t *r, double flops)
{
    atomic_fetch_add_explicit(&r->prog->flops, (uint64_t)flops, memory_order_relaxed);
    atomic_fetch_add_explicit(&r->prog->tasks_done, 1, memory_order_relaxed);
}

void md_start_phase(md_run_t *r, md_phase_t phase, uint64_t tasks)
{
    atomic_store_explicit(&r->prog->tasks_total, tasks, memory_order_relaxed);
    atomic_store_explicit(&r->prog->tasks_done, 0, memory_order_relaxed);
    atomic_store_explicit(&r->prog->flops, 0, memory_order_relaxed);
    atomic_store_explicit(&r->prog->phase_start, md_now(), memory_order_relaxed);
    atomic_store_explicit(&r->prog->phase, (int)phase, memory_order_relaxed);
}

int md_pin(md_run_t *r, int x, uint32_t v, unsigned flags, double **data)
{
    pp_gref_t g = r->gref[x];
    g.version = v;
    for (int tries = 0;; tries++) {
        void *d = NULL;
        uint32_t got = 0;
        int rc = pp_mpi_pin(r->mpi, g, flags, &d, &got);
        if (rc == PP_ENOMEM && tries < ENOMEM_TRIES) {
            /* every resident byte pinned by other tasks: let them end */
            atomic_fetch_add_explicit(&r->enomem_retries, 1, memory_order_relaxed);
            sched_yield();
            continue;
        }
        if (rc != 0)
            return rc;
        /* Final versions are never written again and a write pin comes
         * after its tile's earlier writers: any other version is a bug in
         * the dataflow (or in the layer). */
        if (v != 0 && got != v &&
            atomic_fetch_add_explicit(&r->version_errors, 1, memory_order_relaxed) == 0)
            fprintf(stderr, "pinpool-mpi-demo: rank %d: a pin of tile %d (home %u) at "
                    "version %u got version %u\n", r->rank, x, g.rank, v, got);
        *data = d;
        return 0;
    }
}

int md_unpin(md_run_t *r, int x, unsigned flags, const double *data)
{
    return pp_mpi_unpin(r->mpi, r->gref[x], flags, data);
}

static int phase_failed(md_run_t *r, const char *phase)
{
    /* Every rank learns whether any rank failed, so that all of them take
     * the same way out (the collective calls that follow need it). */
    int mine = atomic_load_explicit(&r->failed, memory_order_relaxed) != 0, any = 0;
    MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (mine)
        fprintf(stderr, "pinpool-mpi-demo: rank %d: %s failed\n", r->rank, phase);
    return any;
}

/* ---- 1. pool, layer, tiles ------------------------------------------------ */

static int make_pool(md_run_t *r)
{
    const md_config_t *cfg = r->cfg;
    pp_options_t opt = PP_OPTIONS_INIT;
    opt.mem_limit = cfg->mem_limit;
    opt.swap_dir = cfg->mem_limit != 0 ? cfg->swap_dir : NULL;
    int rc = pp_pool_create(&opt, &r->pool);
    if (rc != 0) {
        fprintf(stderr, "pinpool-mpi-demo: rank %d: pp_pool_create: %s (%s)\n", r->rank,
                pp_strerror(rc), pp_err_name(rc));
        return -1;
    }
    return 0;
}

static void generate(md_run_t *r)
{
    const md_config_t *cfg = r->cfg;
    int T = r->T;
    md_start_phase(r, MD_GENERATE, r->res->tiles);
#pragma omp parallel for schedule(dynamic) num_threads(cfg->workers)
    for (int x = 0; x < T * (T + 1) / 2; x++) {
        int i = 0;
        while ((i + 1) * (i + 2) / 2 <= x)
            i++;
        int j = x - demo_tile_index(i, 0);
        if (md_owner(cfg, i, j) != r->rank)
            continue;
        void *mem = NULL;
        if (posix_memalign(&mem, 64, r->tile_bytes) != 0) {
            md_failed(r, PP_ENOMEM, "allocating a tile");
            continue;
        }
        demo_a_tile(cfg->seed, cfg->n, cfg->b, i, j, mem);
        /* The pool owns the tile from here: version 1 of its global ref. */
        int rc = pp_mpi_put(r->mpi, mem, r->tile_bytes, NULL, 0, &r->gref[x]);
        if (rc != 0) {
            free(mem);
            md_failed(r, rc, "pp_mpi_put");
            continue;
        }
        r->held[x] = 1;
        pp_quiescent(r->pool);
        md_count_done(r, 0);
    }
}

/* Every rank learns whether all ranks can go on: before a collective
 * call, a rank that failed must still take part or say so here. */
static int all_ok(int ok)
{
    int all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return all;
}

/* ---- 2. names ------------------------------------------------------------- */

/* Every rank's refs, in the order of their tile index, padded to the
 * largest rank's count: one MPI_Allgather. */
static int exchange_refs(md_run_t *r)
{
    int T = r->T, ntiles = T * (T + 1) / 2, most = 0;
    int *count = calloc((size_t)r->size, sizeof *count);
    if (count != NULL) {
        for (int i = 0; i < T; i++)
            for (int j = 0; j <= i; j++)
                count[md_owner(r->cfg, i, j)]++;
        for (int q = 0; q < r->size; q++)
            most = count[q] > most ? count[q] : most;
    }
    pp_gref_t *mine = calloc((size_t)most + 1, sizeof *mine);
    pp_gref_t *all = calloc((size_t)most * r->size + 1, sizeof *all);
    if (!all_ok(count != NULL && mine != NULL && all != NULL)) {
        free(count), free(mine), free(all);
        return -1;
    }
    int k = 0;
    for (int x = 0; x < ntiles; x++)
        if (r->gref[x].ref != PP_REF_NONE && r->gref[x].rank == (uint32_t)r->rank)
            mine[k++] = r->gref[x];
    MPI_Allgather(mine, most * (int)sizeof *mine, MPI_BYTE, all, most * (int)sizeof *all,
                  MPI_BYTE, MPI_COMM_WORLD);
    memset(count, 0, (size_t)r->size * sizeof *count);
    for (int i = 0; i < T; i++)
        for (int j = 0; j <= i; j++) {
            int q = md_owner(r->cfg, i, j);
            pp_gref_t g = all[(size_t)q * most + count[q]++];
            g.version = 0;
            r->gref[demo_tile_index(i, j)] = g;
        }
    free(count), free(mine), free(all);
    return 0;
}

/* ---- 3. owners ------------------------------------------------------------ */

/* The ranks that read L(i, k): the factorisation's SYRK and GEMM updates
 * of row i and of column i (TRSM of column k, for a diagonal tile), and
 * the check of tiles (i, b), b >= k, and (a, i), a >= i -- the same set,
 * the check's being the larger.  reads[q] is set for each such rank q. */
static void readers(const md_config_t *c, int T, int i, int k, uint8_t *reads)
{
    for (int b = k; b <= i; b++)
        reads[md_owner(c, i, b)] = 1;
    for (int a = i; a < T; a++)
        reads[md_owner(c, a, i)] = 1;
}

/* This rank's tokens, one per (tile it homes, other rank that reads it),
 * grouped by destination: counted (out == NULL) or exported into out at
 * disp[q].  count[q]: the tokens for rank q.  0, or the first error. */
static int make_tokens(md_run_t *r, int *count, const int *disp, pp_mpi_token_t *out,
                       uint8_t *reads)
{
    int T = r->T, size = r->size;
    memset(count, 0, (size_t)size * sizeof *count);
    for (int i = 0; i < T; i++)
        for (int k = 0; k <= i; k++) {
            if (md_owner(r->cfg, i, k) != r->rank)
                continue;
            memset(reads, 0, (size_t)size);
            readers(r->cfg, T, i, k, reads);
            for (int q = 0; q < size; q++) {
                if (q == r->rank || !reads[q])
                    continue;
                if (out != NULL) {
                    int rc = pp_mpi_export(r->mpi, r->gref[demo_tile_index(i, k)],
                                           &out[disp[q] + count[q]]);
                    if (rc != 0)
                        return rc;
                }
                count[q]++;
            }
        }
    return 0;
}

/* Imports the tokens that came from rank q, in the order of q's tile
 * index, and marks their tiles held. */
static int import_tokens(md_run_t *r, int q, const pp_mpi_token_t *in, int n)
{
    int ntiles = r->T * (r->T + 1) / 2, x = 0;
    for (int t = 0; t < n; t++) {
        pp_gref_t g;
        int rc = pp_mpi_import(r->mpi, &in[t], &g);
        if (rc != 0) {
            md_failed(r, rc, "pp_mpi_import");
            return -1;
        }
        /* The token names a tile that step 2 named too. */
        while (x < ntiles && (r->gref[x].ref != g.ref || r->gref[x].rank != g.rank))
            x++;
        if (x == ntiles || g.rank != (uint32_t)q || r->held[x]) {
            md_failed(r, PP_EINVAL, "a token of a tile the names did not give");
            return -1;
        }
        r->held[x] = 1;
    }
    return 0;
}

/* Tokens out by MPI_Alltoallv, imported on arrival.  Each is one owner of
 * one tile for one rank, minted by its home without a message: the
 * weight is counted out at the home until it comes back. */
static int exchange_tokens(md_run_t *r)
{
    int size = r->size, ok = 0, total_out = 0, total_in = 0;
    int *scount = calloc((size_t)size, sizeof *scount);
    int *rcount = calloc((size_t)size, sizeof *rcount);
    int *sdisp = calloc((size_t)size, sizeof *sdisp), *rdisp = calloc((size_t)size, sizeof *rdisp);
    uint8_t *reads = calloc((size_t)size, 1);
    pp_mpi_token_t *out = NULL, *in = NULL;
    if (scount != NULL && rcount != NULL && sdisp != NULL && rdisp != NULL && reads != NULL) {
        make_tokens(r, scount, NULL, NULL, reads);
        for (int q = 0; q < size; q++) {
            sdisp[q] = total_out;
            total_out += scount[q];
        }
        out = calloc((size_t)total_out + 1, sizeof *out);
        int rc = out != NULL ? make_tokens(r, scount, sdisp, out, reads) : PP_ENOMEM;
        if (rc != 0)
            md_failed(r, rc, "pp_mpi_export");
        ok = rc == 0;
    }
    if (!all_ok(ok))
        goto done;
    r->res->tokens_out = (uint64_t)total_out;
    MPI_Alltoall(scount, 1, MPI_INT, rcount, 1, MPI_INT, MPI_COMM_WORLD);
    for (int q = 0; q < size; q++) {
        rdisp[q] = total_in;
        total_in += rcount[q];
    }
    in = calloc((size_t)total_in + 1, sizeof *in);
    if (!all_ok(in != NULL))
        goto done;
    /* As bytes: a token is plain bytes (pinpool_mpi.h). */
    const int tb = (int)sizeof(pp_mpi_token_t);
    int *sb = calloc((size_t)size * 4, sizeof *sb);
    if (!all_ok(sb != NULL)) {
        free(sb);
        goto done;
    }
    for (int q = 0; q < size; q++) {
        sb[q] = scount[q] * tb, sb[size + q] = sdisp[q] * tb;
        sb[2 * size + q] = rcount[q] * tb, sb[3 * size + q] = rdisp[q] * tb;
    }
    MPI_Alltoallv(out, sb, sb + size, MPI_BYTE, in, sb + 2 * size, sb + 3 * size, MPI_BYTE,
                  MPI_COMM_WORLD);
    free(sb);
    r->res->tokens_in = (uint64_t)total_in;
    ok = 1;
    for (int q = 0; q < size && ok; q++)
        ok = import_tokens(r, q, in + rdisp[q], rcount[q]) == 0;
    ok = all_ok(ok);
done:
    free(scount), free(rcount), free(sdisp), free(rdisp), free(reads), free(out), free(in);
    return ok ? 0 : -1;
}

/* ---- 5. the residual ------------------------------------------------------ */

/* Tile (i, j) of L L^T against tile (i, j) of A regenerated: (L L^T)_ij =
 * sum over k <= j of L_ik L_jk^T.  Each step pins the two tiles at their
 * final versions (a remote one: a copy, fetched once and cached while
 * this rank owns it) and prefetches the next two.  A remote pin may wait
 * here for its version: that is safe, every rank's factorisation is done
 * (and a home serves from its progress thread, never from a worker). */
static void check_tile(md_run_t *r, int i, int j, double *acc, double *tri, double *a,
                       double *err2, double *norm2)
{
    int b = r->cfg->b;
    memset(acc, 0, (size_t)b * b * sizeof *acc);
    for (int k = 0; k <= j; k++) {
        int x = demo_tile_index(i, k), y = demo_tile_index(j, k);
        uint32_t v = md_final_version(k);
        if (k < j) {
            pp_gref_t nx = r->gref[demo_tile_index(i, k + 1)];
            pp_gref_t ny = r->gref[demo_tile_index(j, k + 1)];
            nx.version = ny.version = md_final_version(k + 1);
            (void)pp_mpi_prefetch(r->mpi, nx);
            (void)pp_mpi_prefetch(r->mpi, ny);
        }
        double *px = NULL, *py = NULL;
        int rc = md_pin(r, x, v, 0, &px);
        if (rc == 0) {
            rc = md_pin(r, y, v, 0, &py);   /* x again when i == j: two pins */
            if (rc != 0)
                (void)md_unpin(r, x, 0, px);
        }
        if (rc != 0) {
            md_failed(r, rc, "pinning tiles for the check");
            return;
        }
        demo_check_step(b, i, j, k, px, py, tri, acc);
        if ((rc = md_unpin(r, x, 0, px)) != 0 || (rc = md_unpin(r, y, 0, py)) != 0) {
            md_failed(r, rc, "pp_mpi_unpin");
            return;
        }
    }
    demo_check_end(r->cfg->seed, r->cfg->n, b, i, j, acc, a, err2, norm2);
    pp_quiescent(r->pool);
    md_count_done(r, 2.0 * (double)b * b * b * (j + 1));
}

static void check(md_run_t *r)
{
    int T = r->T, b = r->cfg->b;
    double e2 = 0, n2 = 0;
    md_start_phase(r, MD_CHECK, r->res->tiles);
#pragma omp parallel num_threads(r->cfg->workers) reduction(+ : e2, n2)
    {
        size_t bb = (size_t)b * b;
        double *acc = malloc(bb * sizeof *acc), *tri = calloc(bb, sizeof *tri);
        double *a = malloc(bb * sizeof *a);
        if (acc == NULL || tri == NULL || a == NULL)
            md_failed(r, PP_ENOMEM, "allocating the check's scratch tiles");
#pragma omp for schedule(dynamic)
        for (int x = 0; x < T * (T + 1) / 2; x++) {
            int i = 0;
            while ((i + 1) * (i + 2) / 2 <= x)
                i++;
            int j = x - demo_tile_index(i, 0);
            if (md_owner(r->cfg, i, j) == r->rank && acc != NULL && tri != NULL && a != NULL &&
                atomic_load_explicit(&r->failed, memory_order_relaxed) == 0)
                check_tile(r, i, j, acc, tri, a, &e2, &n2);
        }
        free(acc), free(tri), free(a);
    }
    r->res->err2 = e2;
    r->res->norm2 = n2;
}

/* ---- 6. the end ----------------------------------------------------------- */

/* Drops every owner this rank holds: its own tiles' (each home entry then
 * lives until the other ranks' weight is back) and the imported ones,
 * whose weight the progress thread sends home, batched per home.  Waits
 * (up to 2 s) until those returns are sent, so that the stats count
 * them; what is still in flight then, pp_mpi_destroy drains. */
static void release_all(md_run_t *r)
{
    int ntiles = r->T * (r->T + 1) / 2;
    md_start_phase(r, MD_RELEASE, (uint64_t)ntiles);
    for (int x = 0; x < ntiles; x++) {
        if (!r->held[x])
            continue;
        int rc = pp_mpi_release(r->mpi, r->gref[x]);
        if (rc != 0)
            md_failed(r, rc, "pp_mpi_release");
        r->held[x] = 0;
        md_count_done(r, 0);
    }
    double until = md_now() + 2.0;
    do {
        pp_mpi_stats(r->mpi, &r->res->mpi);
        if (r->res->mpi.weight_records >= r->res->tokens_in)
            break;
        struct timespec ts = { 0, 200000 };
        nanosleep(&ts, NULL);
    } while (md_now() < until);
}

static int setup(md_run_t *r)
{
    if (!all_ok(make_pool(r) == 0)) {
        if (r->pool != NULL)
            pp_pool_destroy(r->pool);
        r->pool = NULL;
        return -1;
    }
    int rc = pp_mpi_create(MPI_COMM_WORLD, r->pool, &r->mpi);
    if (!all_ok(rc == 0)) {
        /* A layer made on some ranks only cannot be destroyed (that is
         * collective): give up the whole job. */
        fprintf(stderr, "pinpool-mpi-demo: rank %d: pp_mpi_create: %s (%s)\n", r->rank,
                rc ? pp_strerror(rc) : "ok here, failed on another rank",
                rc ? pp_err_name(rc) : "-");
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    md_progress_lock();
    r->prog->pool = r->pool;
    r->prog->mpi = r->mpi;
    md_progress_unlock();
    return 0;
}

static void teardown(md_run_t *r)
{
    int ntiles = r->T * (r->T + 1) / 2;
    for (int x = 0; x < ntiles; x++)       /* what a failed run still holds */
        if (r->held[x])
            (void)pp_mpi_release(r->mpi, r->gref[x]);
    md_progress_lock();
    r->prog->pool = NULL;
    r->prog->mpi = NULL;
    md_progress_unlock();
    int rc = pp_mpi_destroy(r->mpi);
    if (rc != 0)
        md_failed(r, rc, "pp_mpi_destroy");
    rc = pp_pool_destroy(r->pool);
    if (rc != 0)
        md_failed(r, rc, "pp_pool_destroy");
}

/* Seconds from a barrier to a barrier: every rank's share of a phase. */
static double barrier_now(void)
{
    MPI_Barrier(MPI_COMM_WORLD);
    return md_now();
}

int md_run(const md_config_t *cfg, int rank, int size, md_progress_t *prog, md_result_t *res)
{
    md_run_t r_, *r = &r_;
    memset(r, 0, sizeof *r);
    memset(res, 0, sizeof *res);
    r->cfg = cfg, r->prog = prog, r->res = res;
    r->rank = rank, r->size = size;
    r->T = cfg->n / cfg->b;
    r->tile_bytes = (size_t)cfg->b * cfg->b * sizeof(double);
    int T = r->T, ntiles = T * (T + 1) / 2, rc = -1;
    for (int i = 0; i < T; i++)
        for (int j = 0; j <= i; j++)
            res->tiles += md_owner(cfg, i, j) == rank;
    r->gref = calloc((size_t)ntiles, sizeof *r->gref);
    r->held = calloc((size_t)ntiles, 1);
    if (!all_ok(r->gref != NULL && r->held != NULL) || setup(r) != 0) {
        fprintf(stderr, "pinpool-mpi-demo: rank %d: could not start\n", rank);
        free(r->gref), free(r->held);
        return -1;
    }

    double t0 = barrier_now();
    generate(r);
    if (phase_failed(r, "generate") || exchange_refs(r) != 0 || exchange_tokens(r) != 0)
        goto end;
    res->t_generate = barrier_now() - t0;

    t0 = barrier_now();
    int frc = md_factorize(r);
    res->t_factorize = barrier_now() - t0;
    if (frc != 0)
        md_failed(r, PP_ENOMEM, "the factorisation's task list");
    if (phase_failed(r, "factorize"))
        goto end;
    int info = atomic_load_explicit(&r->potrf_info, memory_order_relaxed), any = 0;
    MPI_Allreduce(&info, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any != 0) {
        if (info != 0)
            fprintf(stderr, "pinpool-mpi-demo: rank %d: dpotrf: the matrix is not positive "
                    "definite (info %d)\n", rank, info);
        goto end;
    }

    t0 = barrier_now();
    check(r);
    res->t_check = barrier_now() - t0;
    if (phase_failed(r, "check"))
        goto end;

    pp_stats_t st = PP_STATS_INIT;
    if (pp_pool_stats(r->pool, &st) == 0) {
        res->resident_peak = st.resident_peak;
        res->resident_end = st.total.resident_bytes;
        res->swap_written = st.total.swap_bytes_written;
        res->swap_read = st.total.swap_bytes_read;
    }
    t0 = barrier_now();
    release_all(r);
    rc = 0;
end:
    if (rc != 0)
        pp_mpi_stats(r->mpi, &res->mpi);
    teardown(r);
    if (rc == 0)
        res->t_release = barrier_now() - t0;
    res->enomem_retries = atomic_load_explicit(&r->enomem_retries, memory_order_relaxed);
    res->version_errors = atomic_load_explicit(&r->version_errors, memory_order_relaxed);
    atomic_store_explicit(&prog->phase, (int)MD_IDLE, memory_order_relaxed);
    if (atomic_load_explicit(&r->failed, memory_order_relaxed) != 0)
        rc = -1;
    free(r->gref), free(r->held);
    return all_ok(rc == 0) ? 0 : -1;
}
