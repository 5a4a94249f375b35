/*
 * pinpool-mpi-demo -- tiled Cholesky across MPI ranks on pinpool_mpi.
 *
 * mpi_demo.h: what main.c (options, progress line, summary), dist.c (the
 * ranks' grid, the tiles, refs and owners, the residual, the end) and
 * factor.c (the task list, the scheduler that hands ready tasks to
 * OpenMP, the tasks) share.  examples/mpi_demo/README.md describes the whole.
 */
#ifndef PINPOOL_MPI_DEMO_H
#define PINPOOL_MPI_DEMO_H

#include <pinpool.h>
#include <pinpool_mpi.h>

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* One run: the matrix, the tiles, the ranks' grid, the workers. */
typedef struct md_config {
    int n;                  /* matrix order (a multiple of b) */
    int b;                  /* tile order */
    int workers;            /* OpenMP threads that run kernels, per rank */
    size_t mem_limit;       /* per rank: the pool's resident bytes; 0: none */
    const char *swap_dir;   /* with a limit: where each rank's pool swaps */
    int window;             /* tasks ahead the scheduler looks at (> 0) */
    int lookahead;          /* 1: the next panel before the trailing update */
    uint64_t seed;          /* of the matrix's entries */
    int P, Q;               /* the grid: ranks = P * Q */
} md_config_t;

/* What the progress thread reads while a run goes on (this rank's). */
typedef enum md_phase {
    MD_IDLE, MD_GENERATE, MD_FACTORIZE, MD_CHECK, MD_RELEASE
} md_phase_t;

typedef struct md_progress {
    _Atomic int phase;              /* md_phase_t */
    _Atomic uint64_t tasks_total;   /* this rank's, in the phase */
    _Atomic uint64_t tasks_done;
    _Atomic uint64_t flops;         /* this rank's kernel flops in the phase */
    _Atomic double phase_start;
    /* Set and cleared under md_progress_lock(), so never read after
     * destroy. */
    pp_pool_t *pool;
    pp_mpi_t *mpi;
} md_progress_t;

/* Figures of one rank; main.c sums or takes the maximum over ranks. */
typedef struct md_result {
    double t_generate, t_factorize, t_check, t_release;   /* seconds, between barriers */
    double err2, norm2;             /* this rank's tiles' share of the residual */
    uint64_t tasks;                 /* factorisation tasks run here */
    uint64_t tiles;                 /* tiles homed here */
    uint64_t tokens_out, tokens_in; /* exported for other ranks, imported here */
    uint64_t remote_inputs;         /* distinct remote tiles the factorisation read */
    uint64_t gate_waits;            /* scheduler scans that created nothing */
    uint64_t enomem_retries;        /* pins retried after PP_ENOMEM */
    uint64_t version_errors;        /* pins that got another version than expected */
    uint64_t resident_peak;         /* with a limit: the pool's peak (home tiles and copies) */
    uint64_t resident_end;          /* the pool's resident bytes after the check */
    uint64_t swap_written, swap_read;
    pp_mpi_stats_t mpi;             /* read after the releases, before destroy */
} md_result_t;

/* The grid and the home of tile (i, j), j <= i: block-cyclic, rows over P
 * and columns over Q (StarPU's examples distribute the same way). */
static inline int md_owner(const md_config_t *c, int i, int j)
{
    return (i % c->P) + (j % c->Q) * c->P;
}

/* The version of tile (i, j) once it is final, L(i, j): written once by
 * each update k < j and then by POTRF (i == j) or TRSM, after the put's
 * version 1. */
static inline uint32_t md_final_version(int j) { return (uint32_t)j + 2u; }

/* ---- dist.c ---- */

/* One rank's share of a run.  Collective over MPI_COMM_WORLD (every rank
 * calls it with the same cfg).  Returns 0, or -1 after printing why; the
 * residual's sums are in res (the caller reduces them). */
int md_run(const md_config_t *cfg, int rank, int size, md_progress_t *prog, md_result_t *res);

/* The state of one rank's run, shared by dist.c and factor.c. */
typedef struct md_run md_run_t;
struct md_run {
    const md_config_t *cfg;
    md_progress_t *prog;
    int rank, size;
    int T;                      /* tiles per side */
    size_t tile_bytes;
    pp_pool_t *pool;
    pp_mpi_t *mpi;
    pp_gref_t *gref;            /* every stored tile's global ref (version 0) */
    uint8_t *held;              /* tiles this rank holds an owner of: its own
                                   (the put's) and the imported ones */
    _Atomic int failed;         /* first error seen (0: none) */
    _Atomic int potrf_info;
    _Atomic uint64_t enomem_retries, version_errors;
    md_result_t *res;
};

void md_failed(md_run_t *r, int rc, const char *what);
void md_count_done(md_run_t *r, double flops);
void md_start_phase(md_run_t *r, md_phase_t phase, uint64_t tasks);

/* Pins tile x (index of a stored tile) at version v (0: any) for reading,
 * or with PP_PIN_WRITE; retries PP_ENOMEM.  A pin that gets another
 * version than v counts a version error (the dataflow is wrong).  0 or
 * the layer's error. */
int md_pin(md_run_t *r, int x, uint32_t v, unsigned flags, double **data);
int md_unpin(md_run_t *r, int x, unsigned flags, const double *data);

/* ---- factor.c ---- */

/* The factorisation: this rank's tasks (those whose output tile it
 * homes), handed to OpenMP as their inputs become ready.  Returns 0, or -1
 * (no memory; a task's error is in r->failed). */
int md_factorize(md_run_t *r);

/* ---- main.c ---- */

double md_now(void);
void md_progress_lock(void);
void md_progress_unlock(void);

#endif /* PINPOOL_MPI_DEMO_H */
