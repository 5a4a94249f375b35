/*
 * pinpool-demo -- out-of-core tiled Cholesky factorisation on OpenMP tasks.
 *
 * demo.h: what main.c (options, progress line, plot, summary) and
 * cholesky.c (the matrix, the task graph, the residual) share.
 */
#ifndef PINPOOL_DEMO_H
#define PINPOOL_DEMO_H

#include <pinpool.h>

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* One run of the demo: a matrix, a tile size and where the tiles live. */
typedef struct demo_config {
    int n;                  /* matrix order (a multiple of b) */
    int b;                  /* tile order */
    int threads;            /* OpenMP threads */
    int use_pool;           /* 0: raw pointers (--no-pool) */
    size_t mem_limit;       /* pool mode: resident bytes allowed; 0: none */
    const char *swap_dir;   /* pool mode with a limit: where to swap */
    int nowait_tries;       /* PP_PIN_NOWAIT attempts before a blocking pin */
    int lookahead;          /* tasks ahead whose tiles a task prefetches */
    uint64_t seed;          /* of the matrix's entries */
    int order;              /* DEMO_ORDER_RIGHT or DEMO_ORDER_LEFT */
    int panel_tiles;        /* left-looking: tiles a panel may hold */
    int hints;              /* pool mode: pp_advise (WONTNEED, WILLNEED) */
    int direct;             /* pool mode with a limit: PP_SWAP_DIRECT */
    unsigned io_engine;     /* pool mode with a limit: pp_options_t.io_engine
                               (PP_IO_ENGINE_AUTO, _URING or _THREADS) */
    unsigned io_depth;      /* pool mode with a limit: pp_options_t.io_depth
                               (0: the library's default) */
    int check_vector;       /* the check by a vector, not tile by tile */
    const char *trace;      /* pool mode: the file of the pool's timeline
                               trace (pp_trace_start), or NULL */
    const char *topology;   /* pool mode: NULL (this machine) or an hwloc
                               synthetic string / XML file; then tiles are
                               spread over its nodes round-robin */
} demo_config_t;

enum { DEMO_ORDER_RIGHT, DEMO_ORDER_LEFT };

/* What the progress thread reads while a run goes on.  Written by the run
 * (phase, totals) and by its tasks (done, flops); read at any time. */
typedef enum demo_phase {
    PHASE_IDLE, PHASE_GENERATE, PHASE_FACTORIZE, PHASE_CHECK, PHASE_RELEASE
} demo_phase_t;

typedef struct demo_progress {
    _Atomic int phase;              /* demo_phase_t */
    _Atomic uint64_t tasks_total;   /* of the phase */
    _Atomic uint64_t tasks_done;
    _Atomic uint64_t flops;         /* kernel flops done in the phase */
    _Atomic double phase_start;     /* demo_now() when the phase began */
    /* The pool of the run, for pp_pool_stats; set and cleared under
     * demo_progress_lock()/unlock() so it is never read after destroy. */
    pp_pool_t *pool;
} demo_progress_t;

typedef struct demo_result {
    double t_generate, t_factorize, t_check, t_total;   /* seconds */
    double residual;            /* ||A - L L^T||_F / ||A||_F */
    double factor_flops;        /* n^3/3 */
    uint64_t matrix_bytes;      /* bytes of the stored (lower) tiles */
    uint64_t tile_bytes;
    int tiles;                  /* stored tiles */
    uint64_t tasks;             /* of the factorisation */
    pp_stats_t stats;           /* pool mode: after the check (before release) */
    uint64_t node_loads[PP_MAX_NODES];    /* pool mode: each node's loads and swap */
    uint64_t node_written[PP_MAX_NODES];  /* bytes written, read with stats */
    uint64_t run_written, run_read;  /* pool mode: swap bytes written and read
                                        from the start of generate to the end
                                        of factorize */
    uint64_t fact_written, fact_read;  /* pool mode: swap bytes written and
                                          read during factorize alone (the
                                          pool's counters just before and
                                          just after it) */
    uint64_t fact_write_ns, fact_read_ns;  /* pool mode: during factorize, the
                                              time the swap device had a write
                                              (read) in flight */
    uint64_t lag_p50_ns, lag_p99_ns, lag_count;  /* reclaim lag, after release */
    uint64_t frees;             /* tiles freed by the reclaimers */
    uint64_t nowait_eagain;     /* PP_PIN_NOWAIT pins that found a tile not resident */
    uint64_t enomem_retries;    /* pins retried after PP_ENOMEM */
    uint64_t prefetches;        /* pp_prefetch calls */
    unsigned nodes;             /* pool mode: node domains of the pool */
    char trace_counts[96];      /* --trace: " trace_loads=lo-hi trace_written=lo-hi"
                                   for the --result line */
} demo_result_t;

/* Runs generate, factorize, check and release; fills *res.  Returns 0, or
 * -1 after printing why (a pool error, no memory).  The residual is in
 * res->residual: the caller judges it. */
int demo_run(const demo_config_t *cfg, demo_progress_t *prog, demo_result_t *res);

/* Seconds on a monotonic clock. */
double demo_now(void);

/* The progress lock (see demo_progress_t.pool). */
void demo_progress_lock(void);
void demo_progress_unlock(void);

/* The OpenMP runtime this binary runs on: "libgomp", "libomp" or "?". */
const char *demo_omp_runtime(void);

#endif /* PINPOOL_DEMO_H */
