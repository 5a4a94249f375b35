/*
 * pinpool-starpu-mpi-cholesky -- the distributed tiled Cholesky of
 * pinpool-mpi-demo on StarPU-MPI, in double precision, for
 * examples/mpi_demo/compare: a port of StarPU's own mpi_cholesky_distributed
 * (Debian starpu-examples), which works in single precision, to the demo's
 * arithmetic, so that the two compare like for like.
 *
 *   mpiexec -np R pinpool-starpu-mpi-cholesky [-n N] [-b B] [--grid PxQ]
 *                                             [--seed S] [--check]
 *
 * What is the same as pinpool-mpi-demo: the matrix (tiles.c, demo_a_tile),
 * the four kernels (demo_kernel: LAPACKE_dpotrf, cblas_dtrsm, dsyrk, dgemm
 * on b-by-b column-major tiles), the block-cyclic map of tiles to ranks
 * (tile (i, j) on rank i % P + (j % Q) * P, P the smallest divisor of R
 * with P * P >= R, unless --grid says), and the factorisation's timing
 * between two barriers.  What is StarPU-MPI's, as in its example: tasks
 * inserted on every rank in the right-looking order with
 * starpu_mpi_task_insert (each runs on the rank that owns the tile it
 * writes; StarPU-MPI sends the tiles it reads), the priorities of its
 * example (the critical path first), its cache of received tiles flushed
 * once a panel is used, and StarPU's scheduler (STARPU_SCHED; STARPU_NCPU
 * workers per rank).
 *
 * Rank 0 prints "Computation time (in ms): T" and "Synthetic GFlops : G"
 * (the lines of StarPU's example, which compare reads), then, with
 * --check, the residual ||A - L L^T|| / ||A|| over the whole matrix, every
 * tile gathered to rank 0 (slow: a check, not part of the time), and
 * "pinpool-starpu-mpi-cholesky: all checks passed" when it is below 1e-10
 * and every POTRF succeeded.  Exit 0 then, 1 if a check failed, 2 for a
 * usage error.
 */
#include "tiles.h"

#include <starpu.h>
#include <starpu_mpi.h>

#include <getopt.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROG "pinpool-starpu-mpi-cholesky"
#define RESIDUAL_MAX 1e-10

static atomic_int g_potrf_failed;   /* a POTRF whose info was not 0 */
static atomic_int g_bad_layout;     /* a tile StarPU laid out otherwise than b x b, ld b */

/* ---- the codelets: the demo's kernels ------------------------------------- */

static double *tile(void *buffer, int b)
{
    if ((int)STARPU_MATRIX_GET_NX(buffer) != b || (int)STARPU_MATRIX_GET_NY(buffer) != b ||
        (int)STARPU_MATRIX_GET_LD(buffer) != b)
        atomic_store(&g_bad_layout, 1);
    return (double *)STARPU_MATRIX_GET_PTR(buffer);
}

static int nb_of(void *buffer) { return (int)STARPU_MATRIX_GET_NX(buffer); }

static void cpu_potrf(void *buffers[], void *arg)
{
    (void)arg;
    int b = nb_of(buffers[0]);
    if (demo_kernel(K_POTRF, b, NULL, NULL, tile(buffers[0], b)) != 0)
        atomic_store(&g_potrf_failed, 1);
}

static void cpu_trsm(void *buffers[], void *arg)
{
    (void)arg;
    int b = nb_of(buffers[0]);
    demo_kernel(K_TRSM, b, tile(buffers[0], b), NULL, tile(buffers[1], b));
}

static void cpu_syrk(void *buffers[], void *arg)
{
    (void)arg;
    int b = nb_of(buffers[0]);
    demo_kernel(K_SYRK, b, tile(buffers[0], b), NULL, tile(buffers[1], b));
}

static void cpu_gemm(void *buffers[], void *arg)
{
    (void)arg;
    int b = nb_of(buffers[0]);
    demo_kernel(K_GEMM, b, tile(buffers[0], b), tile(buffers[1], b), tile(buffers[2], b));
}

/* History-based models, as StarPU's example has, for the dm* schedulers. */
static struct starpu_perfmodel m_potrf = { .type = STARPU_HISTORY_BASED, .symbol = "pp_dpotrf" };
static struct starpu_perfmodel m_trsm = { .type = STARPU_HISTORY_BASED, .symbol = "pp_dtrsm" };
static struct starpu_perfmodel m_syrk = { .type = STARPU_HISTORY_BASED, .symbol = "pp_dsyrk" };
static struct starpu_perfmodel m_gemm = { .type = STARPU_HISTORY_BASED, .symbol = "pp_dgemm" };

static struct starpu_codelet cl_potrf = {
    .cpu_funcs = { cpu_potrf }, .nbuffers = 1, .modes = { STARPU_RW }, .model = &m_potrf,
    .name = "dpotrf" };
static struct starpu_codelet cl_trsm = {
    .cpu_funcs = { cpu_trsm }, .nbuffers = 2, .modes = { STARPU_R, STARPU_RW },
    .model = &m_trsm, .name = "dtrsm" };
static struct starpu_codelet cl_syrk = {
    .cpu_funcs = { cpu_syrk }, .nbuffers = 2, .modes = { STARPU_R, STARPU_RW },
    .model = &m_syrk, .name = "dsyrk" };
static struct starpu_codelet cl_gemm = {
    .cpu_funcs = { cpu_gemm }, .nbuffers = 3, .modes = { STARPU_R, STARPU_R, STARPU_RW },
    .model = &m_gemm, .name = "dgemm" };

/* ---- options ---------------------------------------------------------------- */

typedef struct opts {
    int n, b, P, Q, grid_given, check;
    uint64_t seed;
} opts_t;

static void usage(FILE *f)
{
    fprintf(f, "usage: mpiexec -np R " PROG " [-n N] [-b B] [--grid PxQ] [--seed S] [--check]\n"
               "  -n N         matrix order (default 8192; a multiple of the tile)\n"
               "  -b B         tile order (default 512)\n"
               "  --grid PxQ   the ranks' grid (default: P the smallest divisor of R with\n"
               "               P*P >= R), as pinpool-mpi-demo's\n"
               "  --seed S     seed of the matrix (default 1)\n"
               "  --check      gather L to rank 0 and check the residual\n");
}

/* 0, or -1 after a message (rank 0 prints it). */
static int parse(int argc, char **argv, int rank, int size, opts_t *o)
{
    static const struct option lo[] = {
        { "grid", required_argument, NULL, 'g' }, { "seed", required_argument, NULL, 's' },
        { "check", no_argument, NULL, 'c' },      { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    *o = (opts_t){ .n = 8192, .b = 512, .seed = 1 };
    int c, v;
    while ((c = getopt_long(argc, argv, "n:b:h", lo, NULL)) != -1) {
        switch (c) {
        case 'n': if (demo_parse_int(optarg, 1, 1 << 20, &o->n) != 0) goto bad; break;
        case 'b': if (demo_parse_int(optarg, 1, 1 << 14, &o->b) != 0) goto bad; break;
        case 'g':
            if (sscanf(optarg, "%dx%d", &o->P, &o->Q) != 2 || o->P < 1 || o->Q < 1)
                goto bad;
            o->grid_given = 1;
            break;
        case 's': if (demo_parse_int(optarg, 0, 0x7fffffff, &v) != 0) goto bad; o->seed = (uint64_t)v; break;
        case 'c': o->check = 1; break;
        case 'h': if (rank == 0) usage(stdout); return -1;
        default: goto bad;
        }
    }
    if (!o->grid_given) {
        o->P = 1;
        while (o->P * o->P < size || size % o->P != 0)
            o->P++;
        o->Q = size / o->P;
    }
    if (optind != argc || o->n % o->b != 0 || o->P * o->Q != size)
        goto bad;
    return 0;
bad:
    if (rank == 0) {
        fprintf(stderr, PROG ": bad arguments (the order must be a multiple of the tile, "
                        "the grid P*Q the number of ranks)\n");
        usage(stderr);
    }
    return -1;
}

/* ---- the run -------------------------------------------------------------- */

typedef struct run {
    opts_t o;
    int rank, T;
    starpu_data_handle_t *h;         /* [T(T+1)/2], tiles of the lower triangle */
    double **mine;                   /* [T(T+1)/2], the tiles this rank owns */
} run_t;

static int owner(const run_t *r, int i, int j) { return (i % r->o.P) + (j % r->o.Q) * r->o.P; }
static starpu_data_handle_t H(const run_t *r, int i, int j) { return r->h[demo_tile_index(i, j)]; }

static void register_tiles(run_t *r)
{
    int T = r->T, b = r->o.b;
    size_t nt = (size_t)T * (T + 1) / 2;
    r->h = calloc(nt, sizeof *r->h);
    r->mine = calloc(nt, sizeof *r->mine);
    if (r->h == NULL || r->mine == NULL) {
        fprintf(stderr, PROG ": out of memory\n");
        exit(1);
    }
    for (int i = 0; i < T; i++) {
        for (int j = 0; j <= i; j++) {
            int id = demo_tile_index(i, j);
            if (owner(r, i, j) == r->rank) {
                double *t = NULL;
                if (starpu_malloc((void **)&t, (size_t)b * b * sizeof *t) != 0) {
                    fprintf(stderr, PROG ": out of memory for tile (%d, %d)\n", i, j);
                    exit(1);
                }
                demo_a_tile(r->o.seed, r->o.n, b, i, j, t);
                r->mine[id] = t;
                starpu_matrix_data_register(&r->h[id], STARPU_MAIN_RAM, (uintptr_t)t, b, b, b,
                                            sizeof(double));
            } else {
                starpu_matrix_data_register(&r->h[id], -1, 0, b, b, b, sizeof(double));
            }
            starpu_mpi_data_register(r->h[id], id, owner(r, i, j));
        }
    }
}

/* The right-looking order, with the priorities of StarPU's example (the
 * diagonal and the next panel first), each task on its output's owner. */
static void factorize(run_t *r)
{
    int T = r->T;
    for (int k = 0; k < T; k++) {
        starpu_mpi_task_insert(MPI_COMM_WORLD, &cl_potrf, STARPU_RW, H(r, k, k),
                               STARPU_PRIORITY, 3 * T - 3 * k, 0);
        for (int i = k + 1; i < T; i++)
            starpu_mpi_task_insert(MPI_COMM_WORLD, &cl_trsm, STARPU_R, H(r, k, k), STARPU_RW,
                                   H(r, i, k), STARPU_PRIORITY, 3 * T - 3 * k - i, 0);
        starpu_mpi_cache_flush(MPI_COMM_WORLD, H(r, k, k));
        for (int j = k + 1; j < T; j++) {
            starpu_mpi_task_insert(MPI_COMM_WORLD, &cl_syrk, STARPU_R, H(r, j, k), STARPU_RW,
                                   H(r, j, j), STARPU_PRIORITY, 3 * T - 2 * k - j, 0);
            for (int i = j + 1; i < T; i++)
                starpu_mpi_task_insert(MPI_COMM_WORLD, &cl_gemm, STARPU_R, H(r, i, k), STARPU_R,
                                       H(r, j, k), STARPU_RW, H(r, i, j), STARPU_PRIORITY,
                                       3 * T - 2 * k - i - j, 0);
        }
        for (int i = k + 1; i < T; i++)
            starpu_mpi_cache_flush(MPI_COMM_WORLD, H(r, i, k));
    }
    starpu_task_wait_for_all();
}

/* Every tile to rank 0, then the residual there (rank 0's return). */
static double residual(run_t *r)
{
    int T = r->T, b = r->o.b;
    for (int i = 0; i < T; i++)
        for (int j = 0; j <= i; j++)
            starpu_mpi_get_data_on_node(MPI_COMM_WORLD, H(r, i, j), 0);
    if (r->rank != 0)
        return 0.0;
    size_t nt = (size_t)T * (T + 1) / 2;
    const double **L = calloc(nt, sizeof *L);
    double *tri = malloc((size_t)b * b * sizeof *tri), *acc = malloc((size_t)b * b * sizeof *acc),
           *a = malloc((size_t)b * b * sizeof *a);
    if (L == NULL || tri == NULL || acc == NULL || a == NULL) {
        fprintf(stderr, PROG ": out of memory for the check\n");
        exit(1);
    }
    for (int i = 0; i < T; i++) {
        for (int j = 0; j <= i; j++) {
            starpu_data_acquire(H(r, i, j), STARPU_R);
            L[demo_tile_index(i, j)] = starpu_data_get_local_ptr(H(r, i, j));
        }
    }
    double e2 = 0.0, n2 = 0.0;
    for (int i = 0; i < T; i++) {
        for (int j = 0; j <= i; j++) {
            memset(acc, 0, (size_t)b * b * sizeof *acc);
            for (int k = 0; k <= j; k++)
                demo_check_step(b, i, j, k, L[demo_tile_index(i, k)], L[demo_tile_index(j, k)],
                                tri, acc);
            demo_check_end(r->o.seed, r->o.n, b, i, j, acc, a, &e2, &n2);
        }
    }
    for (int i = 0; i < T; i++)
        for (int j = 0; j <= i; j++)
            starpu_data_release(H(r, i, j));
    free(L);
    free(tri);
    free(acc);
    free(a);
    return sqrt(e2) / sqrt(n2);
}

int main(int argc, char **argv)
{
    int rank = 0, size = 1;
    if (starpu_mpi_init_conf(&argc, &argv, 1, MPI_COMM_WORLD, NULL) != 0) {
        fprintf(stderr, PROG ": starpu_mpi_init_conf failed\n");
        return 1;
    }
    starpu_mpi_comm_rank(MPI_COMM_WORLD, &rank);
    starpu_mpi_comm_size(MPI_COMM_WORLD, &size);
    run_t r = { .rank = rank };
    if (parse(argc, argv, rank, size, &r.o) != 0) {
        starpu_mpi_shutdown();
        return 2;
    }
    r.T = r.o.n / r.o.b;
    register_tiles(&r);

    starpu_mpi_barrier(MPI_COMM_WORLD);
    double t0 = starpu_timing_now();
    factorize(&r);
    starpu_mpi_barrier(MPI_COMM_WORLD);
    double t1 = starpu_timing_now();

    int failed = 0;
    if (rank == 0) {
        double ms = (t1 - t0) / 1000.0, flops = (double)r.o.n * r.o.n * r.o.n / 3.0;
        printf(PROG ": order %d, tiles of %d, %d ranks as a %dx%d grid, %u worker(s) per rank\n",
               r.o.n, r.o.b, size, r.o.P, r.o.Q, starpu_cpu_worker_get_count());
        printf("Computation time (in ms): %.2f\n", ms);
        printf("Synthetic GFlops : %.2f\n", flops / ms / 1e6);
    }
    if (r.o.check) {
        double res = residual(&r);
        int bad = atomic_load(&g_potrf_failed) || atomic_load(&g_bad_layout), any = 0;
        MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        if (rank == 0) {
            printf("  residual  ||A - L*L^T|| / ||A|| = %.3e  (below %.0e: %s)\n", res,
                   RESIDUAL_MAX, res < RESIDUAL_MAX ? "ok" : "FAILED");
            if (any)
                printf("  a POTRF failed, or StarPU laid out a tile with another shape: FAILED\n");
            failed = !(res < RESIDUAL_MAX) || any;
            if (!failed)
                printf(PROG ": all checks passed\n");
        }
    }
    for (size_t id = 0; id < (size_t)r.T * (r.T + 1) / 2; id++)
        starpu_data_unregister(r.h[id]);
    for (size_t id = 0; id < (size_t)r.T * (r.T + 1) / 2; id++)
        if (r.mine[id] != NULL)
            starpu_free(r.mine[id]);
    free(r.h);
    free(r.mine);
    MPI_Bcast(&failed, 1, MPI_INT, 0, MPI_COMM_WORLD);
    starpu_mpi_shutdown();
    return failed ? 1 : 0;
}
