/*
 * pinpool-mpi-demo -- tiled Cholesky across MPI ranks on pinpool_mpi.
 *
 *   mpiexec -np R pinpool-mpi-demo [-n N] [-b B] [-t WORKERS] [-m SIZE]
 *                                  [--grid PxQ] [--window N] [--lookahead L]
 *                                  [--result] [-q]
 *
 * Factorises a symmetric positive definite matrix A = L L^T whose tiles
 * are spread block-cyclically over a P x Q grid of ranks.  Each rank keeps
 * its tiles in its own pinpool pool, runs the tasks whose output tile it
 * homes on OpenMP, and reads other ranks' tiles by remote pins of
 * versioned global refs: the versions are the only dataflow between
 * ranks (factor.c).  Then ||A - L L^T||_F / ||A||_F is computed the same
 * way, each rank for its own tiles, and reduced.
 *
 * Exit status (every rank): 0 when every check passed (residual below
 * 1e-10; every pin got the version it named; the layer refused no weight
 * return and no import); 1 when a check failed; 2 for a usage error; 3
 * when the run could not complete.
 *
 * main.c: options, MPI, the progress line and the summary (rank 0).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "mpi_demo.h"
#include "tiles.h"

#include <cblas.h>
#include <mpi.h>
#include <omp.h>

#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define RESIDUAL_MAX 1e-10
#define MIB (1024.0 * 1024.0)

enum { EXIT_CHECK = 1, EXIT_USAGE = 2, EXIT_RUN = 3 };

static const char *const phase_names[] = {
    "idle", "generate", "factorize", "check", "release"
};

double md_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static pthread_mutex_t progress_mu = PTHREAD_MUTEX_INITIALIZER;
void md_progress_lock(void) { pthread_mutex_lock(&progress_mu); }
void md_progress_unlock(void) { pthread_mutex_unlock(&progress_mu); }

static const char *omp_runtime(void)
{
    Dl_info info;
    if (dladdr((void *)omp_get_max_threads, &info) == 0 || info.dli_fname == NULL)
        return "?";
    if (strstr(info.dli_fname, "libgomp") != NULL)
        return "libgomp";
    if (strstr(info.dli_fname, "libomp") != NULL || strstr(info.dli_fname, "libiomp") != NULL)
        return "libomp";
    return "?";
}

/* ---------------------------------------------------------------------------
 * Options
 * ------------------------------------------------------------------------- */

typedef struct options {
    md_config_t cfg;
    int quiet, result_line, grid_given;
} options_t;

static void usage(FILE *f)
{
    fprintf(f,
        "usage: mpiexec -np R pinpool-mpi-demo [options]\n"
        "  -n, --size N          matrix order (default 2048; a multiple of the tile)\n"
        "  -b, --tile B          tile order (default 256)\n"
        "  -t, --workers N       OpenMP threads that run kernels, per rank (default:\n"
        "                        OMP_NUM_THREADS, else 1); each rank also has a\n"
        "                        scheduler thread and the layer's progress thread\n"
        "  -m, --mem-limit SIZE  each rank's pool may hold SIZE bytes in memory, its\n"
        "                        tiles and its cached copies of other ranks' (K, M or G\n"
        "                        suffix; default: no limit)\n"
        "      --swap-dir DIR    with -m: where each rank's private swap directory is\n"
        "                        made (default: $TMPDIR, else /tmp)\n"
        "      --grid PxQ        the ranks' grid (default: P the smallest divisor of R\n"
        "                        with P*P >= R: 2 -> 2x1, 4 -> 2x2, 6 -> 3x2)\n"
        "      --window N        tasks ahead (in the right-looking order) that the\n"
        "                        scheduler prefetches and may start (default: as many\n"
        "                        as stored tiles, T(T+1)/2 for T tiles per side)\n"
        "      --lookahead L     1 (default): step k updates column k+1 first, then\n"
        "                        comes panel k+1, then the rest of step k; 0: the\n"
        "                        plain right-looking order, panel by panel\n"
        "      --seed S          seed of the matrix (default 1)\n"
        "      --result          one line of key=value figures for scripts (rank 0;\n"
        "                        examples/mpi_demo/compare reads it)\n"
        "  -q, --quiet           no progress line\n"
        "  -h, --help\n");
}

/* 0, 1 (--help printed), or -1 (usage error, printed by rank 0). */
static int parse_options(int argc, char **argv, int rank, int size, options_t *o)
{
    enum { O_SWAP_DIR = 256, O_GRID, O_WINDOW, O_LOOKAHEAD, O_SEED, O_RESULT };
    static const struct option longopts[] = {
        { "size", required_argument, NULL, 'n' },
        { "tile", required_argument, NULL, 'b' },
        { "workers", required_argument, NULL, 't' },
        { "mem-limit", required_argument, NULL, 'm' },
        { "swap-dir", required_argument, NULL, O_SWAP_DIR },
        { "grid", required_argument, NULL, O_GRID },
        { "window", required_argument, NULL, O_WINDOW },
        { "lookahead", required_argument, NULL, O_LOOKAHEAD },
        { "seed", required_argument, NULL, O_SEED },
        { "result", no_argument, NULL, O_RESULT },
        { "quiet", no_argument, NULL, 'q' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    md_config_t *c = &o->cfg;
    c->n = 2048;
    c->b = 256;
    const char *env = getenv("OMP_NUM_THREADS");
    c->workers = 1;
    if (env != NULL && demo_parse_int(env, 1, 1024, &c->workers) != 0)
        c->workers = 1;
    c->seed = 1;
    c->lookahead = 1;
    const char *tmp = getenv("TMPDIR");
    c->swap_dir = tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp";
    int opt, seed, li = -1;
    opterr = rank == 0;
    while ((opt = getopt_long(argc, argv, "n:b:t:m:qh", longopts, &li)) != -1) {
        switch (opt) {
        case 'n':
            if (demo_parse_int(optarg, 1, 1 << 20, &c->n) != 0)
                goto bad;
            break;
        case 'b':
            if (demo_parse_int(optarg, 1, 1 << 14, &c->b) != 0)
                goto bad;
            break;
        case 't':
            if (demo_parse_int(optarg, 1, 1024, &c->workers) != 0)
                goto bad;
            break;
        case 'm':
            if (demo_parse_size(optarg, &c->mem_limit) != 0 || c->mem_limit == 0)
                goto bad;
            break;
        case O_SWAP_DIR: c->swap_dir = optarg; break;
        case O_GRID:
            if (sscanf(optarg, "%dx%d", &c->P, &c->Q) != 2 || c->P < 1 || c->Q < 1)
                goto bad;
            o->grid_given = 1;
            break;
        case O_WINDOW:
            if (demo_parse_int(optarg, 1, 1 << 30, &c->window) != 0)
                goto bad;
            break;
        case O_LOOKAHEAD:
            if (demo_parse_int(optarg, 0, 1, &c->lookahead) != 0)
                goto bad;
            break;
        case O_SEED:
            if (demo_parse_int(optarg, 0, 0x7fffffff, &seed) != 0)
                goto bad;
            c->seed = (uint64_t)seed;
            break;
        case O_RESULT: o->result_line = 1; break;
        case 'q': o->quiet = 1; break;
        case 'h':
            if (rank == 0)
                usage(stdout);
            return 1;
        default:
            if (rank == 0)
                usage(stderr);
            return -1;
        }
    }
    if (optind != argc) {
        if (rank == 0)
            fprintf(stderr, "pinpool-mpi-demo: unexpected argument '%s'\n", argv[optind]);
        return -1;
    }
    if (c->window == 0)
        c->window = c->n / c->b * (c->n / c->b + 1) / 2;
    if (!o->grid_given) {
        c->P = 1;
        while (c->P * c->P < size || size % c->P != 0)
            c->P++;
        c->Q = size / c->P;
    }
    const char *why = NULL;
    char msg[256];
    int T = c->n / c->b;
    uint64_t tile = (uint64_t)c->b * c->b * sizeof(double);
    /* A worker pins up to three tiles; the scheduler's probe one; a fourth
     * per worker leaves room for the copies that prefetches bring.  And at
     * least 16 copies (a copy is a tile and a 64-byte header): the
     * scheduler's probes pin with PP_PIN_NOWAIT, whose copy goes in with
     * PP_PUT_NOWAIT, and the pool's swap threads make room for such a put
     * only once the pool is above its high watermark (15/16 of the
     * limit): a copy larger than a 16th of the limit could then never find
     * room (examples/mpi_demo/README.md, "Problems seen"). */
    uint64_t need = ((uint64_t)c->workers * 4 + 2) * tile;
    if (need < 16 * (tile + 64))
        need = 16 * (tile + 64);
    if (c->n % c->b != 0) {
        why = "the matrix order must be a multiple of the tile order";
    } else if (c->P * c->Q != size) {
        snprintf(msg, sizeof msg, "a %dx%d grid needs %d ranks, not %d", c->P, c->Q,
                 c->P * c->Q, size);
        why = msg;
    } else if (T < c->P || T < c->Q) {
        why = "fewer tiles per side than ranks along one side of the grid";
    } else if (c->mem_limit != 0 && c->mem_limit < need) {
        snprintf(msg, sizeof msg, "a memory limit of %.1f MiB is too small for tiles of %.1f "
                 "MiB and %d worker%s; give at least %.2f MiB (-m: 16 copies of a tile, or "
                 "4 tiles per worker and 2)", (double)c->mem_limit / MIB, (double)tile / MIB,
                 c->workers, c->workers == 1 ? "" : "s", ceil((double)need / MIB * 100) / 100);
        why = msg;
    }
    if (why != NULL) {
        if (rank == 0)
            fprintf(stderr, "pinpool-mpi-demo: %s\n", why);
        return -1;
    }
    return 0;
bad:
    if (rank == 0) {
        if (opt < 256)
            fprintf(stderr, "pinpool-mpi-demo: bad value '%s' for -%c\n", optarg, opt);
        else
            fprintf(stderr, "pinpool-mpi-demo: bad value '%s' for --%s\n", optarg,
                    li >= 0 ? longopts[li].name : "?");
        usage(stderr);
    }
    return -1;
}

/* ---------------------------------------------------------------------------
 * The progress line (rank 0, its own figures, a thread of its own)
 * ------------------------------------------------------------------------- */

typedef struct progress_thread {
    pthread_t tid;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop, tty, line_open, size;
    md_progress_t *prog;
} progress_thread_t;

static void progress_tick(progress_thread_t *p)
{
    md_progress_t *g = p->prog;
    int phase = atomic_load_explicit(&g->phase, memory_order_relaxed);
    if (phase == MD_IDLE)
        return;
    pp_stats_t st = PP_STATS_INIT;
    pp_mpi_stats_t ms;
    int have = 0;
    md_progress_lock();
    if (g->pool != NULL && g->mpi != NULL)
        have = pp_pool_stats(g->pool, &st) == 0 && pp_mpi_stats(g->mpi, &ms) == 0;
    md_progress_unlock();
    double el = md_now() - atomic_load_explicit(&g->phase_start, memory_order_relaxed);
    double gf = el > 0 ? (double)atomic_load_explicit(&g->flops, memory_order_relaxed) / el * 1e-9
                       : 0;
    char line[256], tasks[64];
    snprintf(tasks, sizeof tasks, "%" PRIu64 "/%" PRIu64 " tasks",
             atomic_load_explicit(&g->tasks_done, memory_order_relaxed),
             atomic_load_explicit(&g->tasks_total, memory_order_relaxed));
    int len = snprintf(line, sizeof line, "rank 0/%d %-9s %17s", p->size, phase_names[phase],
                       tasks);
    if (have)
        len += snprintf(line + len, sizeof line - (size_t)len,
                        "  resident %7.1f MiB  fetched %7.1f MiB (%" PRIu64 " misses, %" PRIu64
                        " hits)", (double)st.total.resident_bytes / MIB,
                        (double)ms.bytes_fetched / MIB, ms.misses, ms.hits);
    if (phase == MD_FACTORIZE || phase == MD_CHECK)
        snprintf(line + len, sizeof line - (size_t)len, "  %6.1f GFLOP/s", gf);
    if (p->tty) {
        fprintf(stderr, "\r%s\033[K", line);
        p->line_open = 1;
    } else {
        fprintf(stderr, "%s\n", line);
    }
    fflush(stderr);
}

static void *progress_main(void *arg)
{
    progress_thread_t *p = arg;
    /* Redrawn 10 times a second on a terminal; otherwise one line every 2 s. */
    const long period_ms = p->tty ? 100 : 2000;
    pthread_mutex_lock(&p->mu);
    while (!p->stop) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += period_ms % 1000 * 1000000L;
        ts.tv_sec += period_ms / 1000 + ts.tv_nsec / 1000000000L;
        ts.tv_nsec %= 1000000000L;
        while (!p->stop && pthread_cond_timedwait(&p->cv, &p->mu, &ts) != ETIMEDOUT)
            ;
        if (p->stop)
            break;
        pthread_mutex_unlock(&p->mu);
        progress_tick(p);
        pthread_mutex_lock(&p->mu);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

static int progress_start(progress_thread_t *p, md_progress_t *prog, int size)
{
    memset(p, 0, sizeof *p);
    p->prog = prog;
    p->size = size;
    p->tty = isatty(STDERR_FILENO);
    pthread_mutex_init(&p->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&p->cv, &ca);
    pthread_condattr_destroy(&ca);
    return pthread_create(&p->tid, NULL, progress_main, p) == 0 ? 0 : -1;
}

static void progress_stop(progress_thread_t *p)
{
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->tid, NULL);
    if (p->line_open)
        fprintf(stderr, "\r\033[K");
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
}

/* ---------------------------------------------------------------------------
 * Summary (rank 0): sums and maxima over the ranks
 * ------------------------------------------------------------------------- */

typedef struct totals {
    md_result_t sum, max;       /* of each field over the ranks */
    double residual;
} totals_t;

/* The uint64_t fields of md_result_t, in one list for the reductions. */
#define MD_U64_FIELDS(X) \
    X(tasks) X(tiles) X(tokens_out) X(tokens_in) X(remote_inputs) X(gate_waits) \
    X(enomem_retries) X(version_errors) X(resident_peak) X(resident_end) X(swap_written) \
    X(swap_read) \
    X(mpi.misses) X(mpi.hits) X(mpi.requests_served) X(mpi.bytes_fetched) \
    X(mpi.bytes_served) X(mpi.weight_messages) X(mpi.weight_records) \
    X(mpi.refused_returns) X(mpi.refused_imports)
#define MD_DOUBLE_FIELDS(X) \
    X(t_generate) X(t_factorize) X(t_check) X(t_release) X(err2) X(norm2)

static void reduce(const md_result_t *r, totals_t *t)
{
    enum {
#define X(f) +1
        NU = 0 MD_U64_FIELDS(X), ND = 0 MD_DOUBLE_FIELDS(X)
#undef X
    };
    uint64_t u[NU], us[NU], um[NU];
    double d[ND], ds[ND], dm[ND];
    int k = 0;
#define X(f) u[k++] = r->f;
    MD_U64_FIELDS(X)
#undef X
    k = 0;
#define X(f) d[k++] = r->f;
    MD_DOUBLE_FIELDS(X)
#undef X
    MPI_Reduce(u, us, NU, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(u, um, NU, MPI_UINT64_T, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(d, ds, ND, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(d, dm, ND, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    memset(t, 0, sizeof *t);
    k = 0;
#define X(f) t->sum.f = us[k], t->max.f = um[k], k++;
    MD_U64_FIELDS(X)
#undef X
    k = 0;
#define X(f) t->sum.f = ds[k], t->max.f = dm[k], k++;
    MD_DOUBLE_FIELDS(X)
#undef X
    t->residual = sqrt(t->sum.err2) / sqrt(t->sum.norm2);
}

static void header(const md_config_t *c, int size)
{
    int T = c->n / c->b, tiles = T * (T + 1) / 2;
    double tile = (double)c->b * c->b * sizeof(double);
    printf("pinpool-mpi-demo: tiled Cholesky of an SPD matrix of order %d, tiles of %dx%d "
           "(%d per side, %d stored: %.1f MiB, %.1f MiB each)\n",
           c->n, c->b, c->b, T, tiles, tiles * tile / MIB, tile / MIB);
    printf("  %d rank%s as a %dx%d grid (tile (i, j) on rank i %% %d + (j %% %d) * %d), "
           "%d worker%s each on %s, one BLAS thread per task (OpenBLAS %s)\n",
           size, size == 1 ? "" : "s", c->P, c->Q, c->P, c->Q, c->P, c->workers,
           c->workers == 1 ? "" : "s", omp_runtime(), openblas_get_corename());
    if (c->mem_limit != 0)
        printf("  each rank's pool: memory limit %.1f MiB (its tiles and its cached copies), "
               "swap under %s\n", (double)c->mem_limit / MIB, c->swap_dir);
    else
        printf("  each rank's pool: no memory limit\n");
    printf("  task order: right-looking%s; a task goes to OpenMP once its remote inputs are "
           "published, window %d tasks ahead\n", c->lookahead ? ", the next panel first" : "",
           c->window);
}

/* Prints the figures; returns the number of failed checks. */
static int summary(const md_config_t *c, int size, const totals_t *t)
{
    const md_result_t *s = &t->sum, *m = &t->max;
    int failed = 0;
    double flops = (double)c->n * c->n * c->n / 3.0;
    printf("  generate  %8.2f s  (%" PRIu64 " tiles put; refs by MPI_Allgather; %" PRIu64
           " tokens by MPI_Alltoallv)\n", m->t_generate, s->tiles, s->tokens_out);
    printf("  factorize %8.2f s  %6.1f GFLOP/s  (%" PRIu64 " tasks, up to %" PRIu64
           " on one rank)\n", m->t_factorize, flops / m->t_factorize * 1e-9, s->tasks, m->tasks);
    printf("  check     %8.2f s\n", m->t_check);
    printf("  release   %8.2f s  (owners released, pp_mpi_destroy)\n", m->t_release);
    printf("  total     %8.2f s\n", m->t_generate + m->t_factorize + m->t_check + m->t_release);
    int res_ok = t->residual < RESIDUAL_MAX;
    failed += !res_ok;
    printf("  residual  ||A - L*L^T|| / ||A|| = %.3e  (below %.0e: %s)\n", t->residual,
           RESIDUAL_MAX, res_ok ? "ok" : "FAILED");
    int ver_ok = s->version_errors == 0;
    failed += !ver_ok;
    printf("  versions  every pin got the version it named: %s (%" PRIu64 " did not)\n",
           ver_ok ? "ok" : "FAILED", s->version_errors);
    const pp_mpi_stats_t *l = &s->mpi;
    printf("  layer, summed over %d ranks: remote pins %" PRIu64 " (%" PRIu64 " misses, %" PRIu64
           " hits), requests served %" PRIu64 "\n", size, l->misses + l->hits, l->misses,
           l->hits, l->requests_served);
    printf("    fetched %.1f MiB, served %.1f MiB; weight-return messages %" PRIu64
           " (%" PRIu64 " records, for %" PRIu64 " tokens imported)\n",
           (double)l->bytes_fetched / MIB, (double)l->bytes_served / MIB, l->weight_messages,
           l->weight_records, s->tokens_in);
    int ref_ok = l->refused_returns == 0 && l->refused_imports == 0;
    failed += !ref_ok;
    printf("    refused weight returns %" PRIu64 ", refused imports %" PRIu64 ": %s\n",
           l->refused_returns, l->refused_imports, ref_ok ? "ok" : "FAILED");
    printf("  scheduler: %" PRIu64 " distinct remote tiles read by the factorisation; %" PRIu64
           " scans found no task ready (summed)\n", s->remote_inputs, s->gate_waits);
    if (c->mem_limit != 0) {
        int peak_ok = m->resident_peak <= c->mem_limit + (uint64_t)c->b * c->b * sizeof(double);
        failed += !peak_ok;
        printf("  pools: peak resident %.1f MiB on the largest rank (limit %.1f MiB + one tile: "
               "%s); swap written %.1f MiB, read %.1f MiB (summed); PP_ENOMEM retries %" PRIu64
               "\n", (double)m->resident_peak / MIB, (double)c->mem_limit / MIB,
               peak_ok ? "ok" : "FAILED", (double)s->swap_written / MIB,
               (double)s->swap_read / MIB, s->enomem_retries);
    } else {
        printf("  pools: resident after the check %.1f MiB on the largest rank (its tiles and "
               "its cached copies), %.1f MiB summed\n", (double)m->resident_end / MIB,
               (double)s->resident_end / MIB);
    }
    return failed;
}

static void result_line(const md_config_t *c, int size, const totals_t *t, int failed)
{
    printf("result: impl=pinpool-mpi ranks=%d grid=%dx%d n=%d b=%d workers=%d lookahead=%d "
           "limit=%zu "
           "factorize_s=%.4f total_s=%.4f residual=%.3e misses=%" PRIu64 " hits=%" PRIu64
           " fetched=%" PRIu64 " served=%" PRIu64 " weight_messages=%" PRIu64 " ok=%d\n",
           size, c->P, c->Q, c->n, c->b, c->workers, c->lookahead, c->mem_limit,
           t->max.t_factorize,
           t->max.t_generate + t->max.t_factorize + t->max.t_check + t->max.t_release,
           t->residual, t->sum.mpi.misses, t->sum.mpi.hits, t->sum.mpi.bytes_fetched,
           t->sum.mpi.bytes_served, t->sum.mpi.weight_messages, failed == 0);
}

/* ---------------------------------------------------------------------------
 * main
 * ------------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    /* The demo calls MPI (barriers, the exchanges, the reductions) while
     * the layer's progress thread does too. */
    int provided = 0, rank = 0, size = 1;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (provided < MPI_THREAD_MULTIPLE) {
        if (rank == 0)
            fprintf(stderr, "pinpool-mpi-demo: MPI gives thread level %d, not "
                    "MPI_THREAD_MULTIPLE\n", provided);
        MPI_Finalize();
        return EXIT_RUN;
    }
    options_t o;
    memset(&o, 0, sizeof o);
    int prc = parse_options(argc, argv, rank, size, &o);
    if (prc != 0) {
        MPI_Finalize();
        return prc > 0 ? 0 : EXIT_USAGE;
    }
    /* One BLAS thread per task: the tasks are the parallelism. */
    openblas_set_num_threads(1);
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (rank == 0)
        header(&o.cfg, size);

    md_progress_t prog;
    memset(&prog, 0, sizeof prog);
    progress_thread_t pt;
    int show = rank == 0 && !o.quiet;
    if (show && progress_start(&pt, &prog, size) != 0) {
        fprintf(stderr, "pinpool-mpi-demo: cannot start the progress thread\n");
        show = 0;
    }
    md_result_t res;
    int rc = md_run(&o.cfg, rank, size, &prog, &res);
    if (show)
        progress_stop(&pt);
    if (rc != 0) {
        if (rank == 0)
            printf("pinpool-mpi-demo: the run FAILED (see above)\n");
        MPI_Finalize();
        return EXIT_RUN;
    }
    totals_t t;
    reduce(&res, &t);
    int failed = 0;
    if (rank == 0) {
        failed = summary(&o.cfg, size, &t);
        if (o.result_line)
            result_line(&o.cfg, size, &t, failed);
        if (failed)
            printf("pinpool-mpi-demo: %d check%s FAILED\n", failed, failed > 1 ? "s" : "");
        else
            printf("pinpool-mpi-demo: all checks passed\n");
    }
    MPI_Bcast(&failed, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Finalize();
    return failed ? EXIT_CHECK : 0;
}
