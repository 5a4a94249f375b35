/*
 * pinbench.h -- what the parts of pinbench share: the interface every
 * implementation fills in (pb_impl_t), a worker thread's state
 * (pb_worker_t), and the few helpers (fatal errors, clock) all files use.
 *
 *   pinbench.c          options, scenarios, draws, the timed runs, medians
 *   pinbench_report.c   the table, the ratios, the CSV (and its check), the plot
 *   pinbench_reclaim.c  reclaim lag, final against ordinary unpin, bytes per entry
 *   pinbench_pinpool.c  pinpool and pinpool-qsbr (and, built by bench/sidebyside,
 *                       pinpool-old and pinpool-qsbr-old: the same file compiled
 *                       a second time against an older library, PB_OLD=1)
 *   pinbench_atomic.c   atomic-limit and naive-array
 *   pinbench_floor.c    cas-floor (the floor of a validated pin with a data pointer)
 *   pinbench_mutex.c    mutex-dict (a pthread mutex around a ck_ht)
 *   pinbench_urcu.c     urcu-lfht (liburcu's cds_lfht + an atomic refcount)
 *   machine.c           where it ran (shared with swapbench, machine.h)
 *
 * Every failure is fatal: the helpers below print "pinbench: ..." and exit 1,
 * so an implementation never returns an error code to the harness.
 */
#ifndef PINBENCH_H
#define PINBENCH_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "machine.h"

/* 1 in the second copies of pinbench_pinpool.c and pinbench_reclaim.c that
 * bench/sidebyside builds against an older library (bench/CMakeLists.txt,
 * PINBENCH_OLD_LIB); 0 everywhere else. */
#ifndef PB_OLD
#define PB_OLD 0
#endif
/* 1 in the second copy of pinbench_pinpool.c that includes pinpool_inline.h
 * (pinpool-inline, bench/CMakeLists.txt); 0 everywhere else. */
#ifndef PB_INLINE
#define PB_INLINE 0
#endif

/* Bytes of data each entry holds, and that a task reads from each input. */
#define PB_DATA_BYTES 64u
/* Inputs of one task. */
#define PB_TASK_INPUTS 4u

/*
 * One worker thread of one timed run.  The harness fills in table, id and
 * keys; the rest belongs to the implementation (zeroed at the start of each
 * run).  Each worker is allocated on its own cache lines.
 */
typedef struct pb_worker {
    void *table;                /* what the implementation's create returned */
    unsigned id;                /* 0 .. threads-1 */
    uint64_t next_key;          /* churn: this thread's next fresh key */
    uint64_t sink;              /* sums of the bytes tasks read (keeps the reads) */
    /* atomic-limit: the thread-private counter, alone on its cache line, and
     * the thread-private buffers its tasks read. */
    _Alignas(64) _Atomic uint64_t line;
    _Alignas(64) unsigned char priv[PB_TASK_INPUTS][PB_DATA_BYTES];
} pb_worker_t;

/*
 * An implementation.  A table holds entries 0 .. n-1, each with PB_DATA_BYTES
 * of data.  Keys are what a caller holds to name an entry: key(table, i) for
 * entry i, computed before the timed region (a pinpool ref; the index itself
 * when key is NULL).  Every operation either succeeds or exits the program.
 */
typedef struct pb_impl {
    const char *name;
    const char *what;           /* one line, for --help */
    /* Makes a table of n entries.  shared == NULL: each entry gets its own
     * zeroed PB_DATA_BYTES buffer (malloc'd where the implementation
     * allocates per entry).  Otherwise every entry points at shared and no
     * per-entry data is allocated (the metadata measurement). */
    void *(*create)(size_t n, void *shared);
    void (*destroy)(void *table);
    uint64_t (*key)(void *table, size_t index);          /* NULL: the index */
    /* On the worker thread, before the start barrier and after the stop
     * flag (registration with the library; NULL: nothing). */
    void (*thread_init)(pb_worker_t *w);
    void (*thread_exit)(pb_worker_t *w);
    /* On the main thread after each run, untimed: waits for the work the run
     * queued (frees on a reclaimer or call_rcu thread), so that it does not
     * run during the next implementation's run.  NULL: nothing. */
    void (*settle)(void *table);
    /* n ops, each a pin and an unpin of keys[i].  NULL: not applicable
     * (nor is tasks, below, when NULL). */
    void (*pairs)(pb_worker_t *w, const uint64_t *keys, unsigned n);
    /* n tasks, task i pins keys[4i .. 4i+3], reads PB_DATA_BYTES of each
     * input, and unpins them. */
    void (*tasks)(pb_worker_t *w, const uint64_t *keys, unsigned n);
    /* n ops, each puts a new entry (a fresh PB_DATA_BYTES buffer), pins it,
     * unpins it and releases it, so it is reclaimed.  NULL: not applicable. */
    void (*churn)(pb_worker_t *w, unsigned n);
} pb_impl_t;

extern const pb_impl_t pb_impl_pinpool;
extern const pb_impl_t pb_impl_pinpool_qsbr;
extern const pb_impl_t pb_impl_pinpool_scope;
extern const pb_impl_t pb_impl_pinpool_inline;   /* pinbench_pinpool.c, PB_INLINE=1 */
extern const pb_impl_t pb_impl_atomic_limit;
extern const pb_impl_t pb_impl_naive_array;
extern const pb_impl_t pb_impl_cas_floor;
extern const pb_impl_t pb_impl_mutex_dict;
extern const pb_impl_t pb_impl_urcu_lfht;
/* Only with PINBENCH_HAVE_OLD (bench/sidebyside, PINBENCH_OLD_LIB): the
 * same two, calling an older library linked beside this one with its
 * symbols renamed to old_*. */
extern const pb_impl_t pb_impl_pinpool_old;
extern const pb_impl_t pb_impl_pinpool_qsbr_old;

/* Helpers (pinbench.c).  The pb_die* functions print one line on stderr,
 * prefixed "pinbench: ", and exit 1. */
_Noreturn void pb_die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
_Noreturn void pb_die_pp(const char *call, int rc);         /* a pinpool error code */
_Noreturn void pb_die_errno(const char *call, int err);     /* an errno value */
void *pb_malloc(size_t n);                                  /* exits on failure */
void *pb_calloc(size_t n, size_t size);
void *pb_zalloc(size_t n);        /* zeroed, every page already touched */
uint64_t pb_now_ns(void);                                   /* CLOCK_MONOTONIC */
/* The progress line on stderr: redrawn in place on a terminal, one line
 * each otherwise.  pb_progress_clear erases it before output on stdout. */
void pb_progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void pb_progress_clear(void);
/* Reads PB_DATA_BYTES at p as 64-bit words and returns their sum. */
static inline uint64_t pb_read_data(const void *p)
{
    const uint64_t *w = (const uint64_t *)p;
    uint64_t s = 0;
    for (unsigned i = 0; i < PB_DATA_BYTES / sizeof *w; i++)
        s += w[i];
    return s;
}

/* The median round of one (scenario, implementation, thread count) cell. */
typedef struct pb_result {
    int run;                    /* 0: not run (not selected, or n/a) */
    uint64_t ops;               /* of the median round */
    double seconds;             /* of the median round */
    double mops;                /* ops / seconds / 1e6 */
    double ns_per_op;           /* ns per op per thread: threads * seconds / ops */
} pb_result_t;

/* Everything a report needs: the machine, names, and a result for each
 * cell. */
typedef struct pb_results {
    const machine_t *machine;    /* where the run was made */
    unsigned nscen, nimpl, nthreads;
    const char *const *scen;     /* scenario names, in run order */
    const char *const *scen_what;/* one line describing each scenario */
    const char *const *impl;     /* implementation names */
    const unsigned *threads;     /* thread counts */
    pb_result_t *cell;           /* [scen][impl][threads] */
} pb_results_t;

static inline pb_result_t *pb_cell(const pb_results_t *r, unsigned s, unsigned i, unsigned t)
{
    return &r->cell[((size_t)s * r->nimpl + i) * r->nthreads + t];
}

/* pinbench_report.c */
void pb_print_table(const pb_results_t *r, unsigned s);     /* one scenario, stdout */
/* The project's targets; then, informational, a pin's cost split at
 * cas-floor (cas-floor / naive-array, pinpool / cas-floor). */
void pb_print_ratios(const pb_results_t *r);
/* For every implementation X-old run beside X (bench/sidebyside): X / X-old,
 * Mops/s, per cell, their geometric mean and the cells outside 0.9-1.1. */
void pb_print_old_ratios(const pb_results_t *r);
/* The machine as "# key: value" lines, then the header and one row per
 * cell run. */
void pb_write_csv(const pb_results_t *r, const char *path);
/* Reads path back: "# " comment lines first, among them the machine's
 * "# cpu: " line; then the exact header; every field of every row well
 * formed and the numbers positive, at least one row for each scenario of
 * r.  Exits 1 with a message if not. */
void pb_check_csv(const pb_results_t *r, const char *path);
int pb_gnuplot_found(void);                                 /* on PATH? */
void pb_plot(const pb_results_t *r, const char *path);      /* needs gnuplot */

/* pinbench_reclaim.c: the reclaim figures of one library, each printing its
 * own lines on stdout (label: NULL, or a name to print with them) and
 * returning its medians.  pb_reclaim_pinpool measures the library;
 * pb_reclaim_pinpool_old (only with PINBENCH_HAVE_OLD) is the same file
 * compiled a second time against the older library. */
typedef struct pb_reclaim_lib {
    const char *name;
    /* (a) reclaim lag of m entries; p50 and p99 in ns. */
    void (*lag)(size_t m, int same_cpu, const char *label, double *p50, double *p99);
    /* (b) final against ordinary unpin; median ns per unpin of each. */
    void (*final_unpin)(size_t n, unsigned rounds, const char *label, double *ordinary,
                        double *final);
    /* (c) resident-set growth per entry of n entries pointing at shared. */
    double (*bytes_per_entry)(size_t n, void *shared);
} pb_reclaim_lib_t;

extern const pb_reclaim_lib_t pb_reclaim_pinpool;
extern const pb_reclaim_lib_t pb_reclaim_pinpool_old;

/* The reclaim figures, printed on stdout: each figure for each of the nlibs
 * (1 or 2) libraries in turn, libs[0] being the library; with two, also
 * libs[0] / libs[1] of the lag's p50 and p99 and of the unpins' medians.
 * The memory per entry is compared with that of the ncompare
 * implementations given (mutex-dict and urcu-lfht, when selected). */
void pb_reclaim_figures(int quick, const pb_reclaim_lib_t *const *libs, unsigned nlibs,
                        const pb_impl_t *const *compare, unsigned ncompare);

#endif /* PINBENCH_H */
