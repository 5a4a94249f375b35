/*
 * stress/torture/torture.h -- what the files of the torture share: its
 * parameters and global state, the entry record, the threads, the data
 * blocks, and the functions each file gives the others.  The program, its
 * usage and its sharing protocol are described in main.c.
 *
 *   main.c       main: parse, set up, run, final checks; failf
 *   options.c    usage, options, the parameters and replay lines
 *   content.c    contents (seed, k, version), data blocks, content checks
 *   types.c      the types' callbacks: free, save, load (on pool threads)
 *   access.c     checked pins, gets, owners, held pins, QSBR pointers
 *   ops.c        slots, stale and invalid refs, put and fresh-entry checks
 *   use.c        operations on an owned or borrowed entry, held pins
 *   worker.c     the workers and the main thread's watch while they run
 *   faults.c     --faults: the allocation fault hook, the fault device
 *   preflight.c  argument validation checks, the swap directory
 *   bounds.c     the memory bounds: the backlog's peak, the peak resident set
 *   reentrant.c  --reentrant: free functions that put, pin and release entries
 *   final.c      the end: drop, drain, per-entry and exact stats checks
 */
#ifndef PP_STRESS_TORTURE_H
#define PP_STRESS_TORTURE_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pinpool.h>
/* Every pp_pin and pp_unpin of the torture is the inline fast path, as a
 * program that includes it gets (its misses call the library), and
 * pp_pool_create checks the header's layout version: the seeds of the fast
 * path (tests/seeded/) are caught through it. */
#include <pinpool_inline.h>

#include "common/cli.h"
#include "common/content.h"
#include "common/fail.h"
#include "common/handoff.h"
#include "common/memstat.h"
#include "common/progress.h"
#include "common/records.h"
#include "common/report.h"
#include "common/statcheck.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* ------------------------------------------------------------------------ */
/* Parameters and globals                                                    */
/* ------------------------------------------------------------------------ */

#define OWN_CAP   32    /* private owners per thread */
#define HELD_CAP  8     /* held pins per thread (array size) */
#define ESC_CAP   32    /* QSBR escaped pointers per thread */
#define MAILBOXES 64    /* pin hand-off mailboxes (array size) */
#define MAX_BATCH 8     /* refs per pin_many */

extern unsigned g_threads;
extern uint64_t g_ops;
extern const char *g_topology;
extern int g_track, g_qsbr, g_verbose;
extern unsigned g_nslots;
extern unsigned g_timeout_s;
extern double g_duration_s;         /* --duration: stop after this long (0: run all ops) */
extern unsigned g_faults;
extern unsigned g_reentrant;         /* --reentrant PCT: frees that call the pool */           /* --faults N: 1 in N allocations and device calls fail */
extern unsigned g_yield;            /* --yield N: debug builds yield 1 in N at race points */
extern int g_hot;                   /* hot entries: promote on the first contention, and
                                       at random (--no-hot: never) */
extern int g_held_cap;              /* held pins per thread; fewer with swap */
extern unsigned g_nmbox;            /* mailboxes used; fewer with swap */
extern size_t g_backlog;            /* --reclaim-backlog (0: the pool's default; SIZE_MAX: none) */
extern int g_expect_overload;       /* --expect-overload: the run must have made puts wait */

/* Swap mode (--swap). */
extern int g_swap;
extern const char *g_swap_parent;   /* DIR: a fresh directory is made under it */
extern char g_rundir[4096];         /* DIR/torture-XXXXXX, the pool's swap_dir */
extern size_t g_mem_limit;
extern uint64_t g_swap_limit;
extern int g_compress;
extern unsigned g_io_engine;
extern size_t g_size_min, g_size_max;
extern unsigned g_flat_pct;         /* flat (type NULL) entries, percent */
extern double g_enomem_max;         /* PP_ENOMEM allowed, percent of the calls
                                       (5 with --qsbr: longer grace periods) */
/* The program's own bounds on memory the pool cannot evict, so that
 * PP_ENOMEM stays rare: bytes it pins at once (each pin counted), and
 * bytes that stay resident until the entry dies (escaped entries, entries
 * of the never-evicted type). */
extern int64_t g_pin_budget, g_forever_budget;
extern _Atomic int64_t g_pin_bytes, g_forever_bytes;

extern pp_pool_t *g_pool;
extern unsigned g_nnodes;
extern int g_rtid[PP_MAX_NODES];    /* reclaimer thread ids */

extern atomic_int g_stop;           /* workers stop (a failure, or --duration is up) */

/* Set on the workers and the main thread: the free function and the type's
 * save must never run on one of them. */
extern __thread int tl_user;

/* ------------------------------------------------------------------------ */
/* Entries                                                                   */
/* ------------------------------------------------------------------------ */

/* Entry kinds. */
enum { KIND_FREE, KIND_SWAP, KIND_FLAT };
/* KIND_FREE: g_type, a free function and no save/load: never evicted (the
 *            only kind without --swap).
 * KIND_SWAP: g_swap_type, free + save + load: evicted and loaded.
 * KIND_FLAT: type NULL: the pool writes the bytes and reloads them into
 *            its own memory. */

/* Per-entry record (state: REC_PUTTING in pp_put, then REC_LIVE or
 * REC_PUT_FAILED; frees: blocks freed by the free function). */
typedef struct rec {
    REC_FIELDS
    _Atomic uint32_t version;
    _Atomic uint32_t kind;
    _Atomic int32_t rw;            /* read tokens held (> 0), or -1: a writer */
    _Atomic uint32_t forever;      /* counted in g_forever_bytes */
    _Atomic uint32_t blocks;       /* data blocks made: the put's, one per load */
    _Atomic uint32_t evict_frees;  /* blocks freed by an eviction */
    _Atomic uint32_t reclaimed;    /* ... by the home reclaimer (0 or 1) */
    _Atomic uint32_t loads;        /* successful calls of the type's load */
} rec_t;

extern rectab_t g_recs;             /* one record per put; ids in put order */
extern slots_t g_slots;             /* shared owners */
extern mbox_t g_mbox;               /* held pins handed between threads */

static inline rec_t *rec_get(uint64_t k) { return rectab_get(&g_recs, k); }

static inline unsigned rec_kind(rec_t *r)
{
    return atomic_load_explicit(&r->kind, memory_order_relaxed);
}

static inline int has_blk(rec_t *r) { return rec_kind(r) != KIND_FLAT; }

/* Types; in types.c. */
extern const pp_type_t g_type;      /* KIND_FREE */
extern const pp_type_t g_swap_type; /* KIND_SWAP */

static inline const pp_type_t *type_of(unsigned kind)
{
    return kind == KIND_FREE ? &g_type : kind == KIND_SWAP ? &g_swap_type : NULL;
}

/* A held pin: checked says it holds a read token of rec.rw; budget that
 * its bytes are counted in g_pin_bytes. */
typedef struct hpin {
    uint64_t k;
    void *ptr;
    unsigned origin;
    unsigned char checked, budget;
} hpin_t;
extern _Atomic int64_t *g_outstanding;   /* pins taken by thread i, not yet dropped */

extern _Atomic uint64_t g_frees_total;   /* reclaimer frees seen by the free function */
extern _Atomic uint64_t g_frees_node[PP_MAX_NODES];
extern _Atomic uint64_t g_evict_frees;   /* eviction frees seen by the free function */
extern _Atomic uint64_t g_saves, g_saves_ok, g_saves_lost, g_load_calls;

/* ------------------------------------------------------------------------ */
/* Data blocks (KIND_FREE and KIND_SWAP)                                     */
/* ------------------------------------------------------------------------ */

#define BLK_HDR   64
#define BLK_LIVE  0xB10C5AFEB10C5AFEull
#define BLK_DEAD  0xDEADB10CDEADB10Cull

typedef struct blk {
    uint64_t magic;               /* BLK_LIVE; BLK_DEAD once freed */
    uint64_t k;
    _Atomic uint32_t version;     /* the version the bytes hold */
    _Atomic int32_t pins;         /* program pins that gave this block */
    _Atomic uint32_t escaped;     /* pp_get returned this block */
    uint32_t loaded;              /* made by the type's load (0: by the put) */
} blk_t;

_Static_assert(sizeof(blk_t) <= BLK_HDR, "block header fits");

static inline blk_t *blk_of(const void *data)
{
    return (blk_t *)(void *)((char *)(uintptr_t)data - BLK_HDR);
}

/* ------------------------------------------------------------------------ */
/* Threads                                                                   */
/* ------------------------------------------------------------------------ */

enum { OP_PUT, OP_PUBLISH, OP_TAKE, OP_BORROW, OP_OWNED, OP_RELEASE,
       OP_HELD, OP_STALE, OP_QUIESCE, OP_N };
extern const char *const op_names[OP_N];

typedef struct esc { uint64_t k; const void *ptr; int checked; } esc_t;

typedef struct thr {
    unsigned idx;                 /* g_threads for the main thread */
    pthread_t th;
    uint64_t rng;
    uint64_t op;                  /* current op index, for reports */
    uint64_t owned[OWN_CAP];
    int nowned;
    hpin_t *held[HELD_CAP];
    int nheld;
    esc_t esc[ESC_CAP];
    int nesc;
    cnt_t cnt[PP_MAX_NODES];
    uint64_t opcount[OP_N];
    uint64_t stale_checks, invalid_checks, fresh_checks;
    uint64_t writes, write_busy, blind_pins, handoffs, pin_many_calls, borrow_misses;
    uint64_t failed_many_live;    /* live refs before the stale one in failed pin_many calls */
    /* Swap mode. */
    uint64_t room_calls;          /* calls that may return PP_ENOMEM */
    uint64_t enomem;              /* ... and did */
    uint64_t nowait_calls, eagain, nowait_pinned, prefetches, budget_skips, escape_skips;
    /* --faults: calls that got a documented error caused by an injected
     * fault (PP_EIO, PP_ECORRUPT from a device read; PP_ENOMEM from a
     * failed allocation). */
    uint64_t fault_eio, fault_ecorrupt, fault_enomem;
    /* The reclaim backlog: puts with PP_PUT_NOWAIT and their PP_EAGAINs;
     * PP_EDEADLKs (QSBR: pointers dropped, pp_quiescent, put again). */
    uint64_t put_nowait, put_eagain, put_edeadlk;
    /* QSBR: set after every operation, cleared by quiesce: a superset of
     * "inside its section" (a pool call since the last pp_quiescent), the
     * only state in which a put may be refused with PP_EDEADLK. */
    int insec;
    _Atomic uint64_t progress;
    int explicit_exit;
} thr_t;

extern thr_t *g_thr;           /* g_threads workers + main at the end */

static inline uint64_t rnd(thr_t *t) { return rng_next(&t->rng); }
static inline unsigned rndn(thr_t *t, unsigned n) { return rng_below(&t->rng, n); }

/* What main's steps hand each other. */
typedef struct run {
    thr_t *m;                     /* the main thread */
    pp_stats_t *st;               /* the pool's figures, last read */
    pp_node_stats_t *node;        /* each node's, read with them (stat_read) */
    double t0, t1;                /* the workers' start and end */
    unsigned polls, mid_drains, mid_drain_busy;
    uint64_t live_peak;           /* swap mode: resident + swapped bytes, highest seen */
    /* The memory bounds (bounds.c), fixed before the workers start. */
    uint64_t backlog_bound;       /* the pool's, per node (UINT64_MAX: none) */
    uint64_t live_count;          /* entries the program can keep alive at once */
    uint64_t live_charge;         /* ... in the backlog's units (size + 64 each) */
    uint64_t live_rss;            /* ... in memory (headers, malloc, slots) */
    uint64_t backlog_rss;         /* nodes x the bound, in memory */
    uint64_t peak_limit;          /* what each node's backlog_peak may reach */
    int promise;                  /* live_charge <= bound / 2: peak_limit is the bound */
    uint64_t baseline_rss;        /* VmRSS once the pool and the workers were set up */
    uint64_t allowance;           /* fragmentation, table segments, stacks (bounds.c) */
    double san_factor;            /* memory per byte of data under the sanitizer */
    uint64_t san_extra;           /* the sanitizer's own fixed costs (ASan's quarantine) */
    uint64_t rss_bound_start;     /* all of it but the records */
} run_t;

/* ------------------------------------------------------------------------ */
/* Functions                                                                 */
/* ------------------------------------------------------------------------ */

/* main.c: a failed check of thread t (NULL: a pool thread). */
void failf(const thr_t *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The name of thread t in FAIL lines ("3 op=17", "main op=17"). */
const char *thr_who(const thr_t *t, char *buf, size_t size);

/* options.c */
int parse_args(int argc, char **argv);   /* -1: run; else the exit status */
void print_params(void);

/* content.c */
size_t entry_size(uint64_t k);
void fill_body(unsigned char *p, size_t size, uint64_t k, uint32_t ver);
void fill(unsigned char *p, size_t size, uint64_t k, uint32_t ver);
long verify(const unsigned char *p, size_t size, uint64_t k, uint32_t ver);
unsigned char *blk_new(uint64_t k, size_t size, uint32_t ver, uint32_t loaded);
void blk_del(void *data, size_t size);
void check_contents(thr_t *t, uint64_t k, const void *ptr, const char *where);
void check_header(thr_t *t, uint64_t k, const void *ptr, const char *where);
void check_pin(thr_t *t, const hpin_t *h, const char *where);

/* types.c */
int stress_save(const void *data, size_t size, pp_writer_t *w, void *ctx);

/* access.c */
uint64_t rec_new(thr_t *t, rec_t **out);
int read_token(rec_t *r);
void read_untoken(rec_t *r);
int write_token(rec_t *r);
void write_untoken(rec_t *r);
int budget_take(_Atomic int64_t *b, int64_t limit, int64_t n);
void budget_put(_Atomic int64_t *b, int64_t n);
#define ENOMEM_NOTES 6
extern char g_enomem_note[ENOMEM_NOTES][256];   /* what the pool held at the first */
extern atomic_int g_enomem_notes;               /* ... PP_ENOMEMs (for --verbose) */
void note_enomem(thr_t *t, const char *call, size_t size);
int fault_rc(thr_t *t, int rc);
void pin_error(thr_t *t, int rc, const char *call, unsigned flags, uint64_t k);
#define PIN_SKIPPED 1
int pin_take(thr_t *t, uint64_t k, unsigned flags, int budget, hpin_t *h);
void pin_drop(thr_t *t, const hpin_t *h);
void stat_live(thr_t *t, uint64_t k, int expect_escaped);
void release_owner(thr_t *t, uint64_t k);
void release_owned_at(thr_t *t, int i);
void owned_push(thr_t *t, uint64_t k);
void retain_owner(thr_t *t, uint64_t k);
void held_drop_at(thr_t *t, int i);
void held_push(thr_t *t, hpin_t *h);
void hold_pin(thr_t *t, const hpin_t *src);
void quiesce(thr_t *t);
int get1(thr_t *t, uint64_t k);

/* ops.c */
int64_t borrow(thr_t *t, unsigned s);
void unborrow(unsigned s);
void op_publish(thr_t *t);
void op_take(thr_t *t);
void op_stale(thr_t *t);
void op_put(thr_t *t);

/* use.c */
void op_borrow(thr_t *t);
void op_owned(thr_t *t);
void op_release(thr_t *t);
void op_held(thr_t *t);

/* worker.c */
int start_workers(run_t *run);      /* registered, at the gate; 0, or the exit status */
void go_workers(run_t *run);        /* opens the gate (run->t0) */
void watch_workers(run_t *run);     /* until every worker is done */

/* faults.c */
bool alloc_fault(size_t size, void *ctx);
extern _Atomic int g_faults_armed;  /* allocation faults on (after every worker registered) */
extern _Atomic uint64_t g_alloc_calls, g_alloc_faults;
int pool_create(const pp_options_t *opt);   /* g_pool, on the fault device with --faults --swap */
int faults_on_device(void);         /* the pool runs on the fault device */
unsigned long faults_injected(void);
void faults_off(void);              /* no more injected faults (the end) */
uint64_t faults_io_errors(void);    /* device calls that failed */
unsigned long faults_read_corrupt(void);   /* reads that were corrupted */
void faults_counts(unsigned long inj[7]);  /* then forgets the device (it goes with the pool) */

/* preflight.c */
void preflight(thr_t *m);
void check_swap_dir(thr_t *m);
void check_rundir_gone(thr_t *m);

/* bounds.c */
void bounds_start(run_t *run);      /* computes and prints the bounds (workers registered) */
uint64_t records_rss(void);         /* the program's records so far, in memory */
/* The end: FAIL if a node's backlog_peak or the peak resident set went past
 * its bound; the figures for the last line in *peak_rss, *rss_bound. */
void bounds_check(run_t *run, uint64_t *peak_rss, uint64_t *rss_bound);

/* final.c */
int final_checks(run_t *run);       /* the exit status */

/* reentrant.c -- --reentrant: the callbacks that call the pool. */
extern const pp_type_t g_child_type;
void re_on_free(void);                       /* from the free function */
void re_finish(thr_t *m);                    /* before the end: no more children */
/* Adds the children's puts, pins, unpins and releases per node into exp,
 * and their frees per node into frees[nnodes]. */
void re_add_counts(cnt_t *exp, unsigned nnodes, uint64_t *frees);
uint64_t re_frees_total(void);
void re_print(void);

#endif /* PP_STRESS_TORTURE_H */
