/*
 * stress/epoch_torture/epoch_torture.h -- what the files of epoch_torture
 * share: its parameters and global state, the entry record, the threads,
 * and the functions each file gives the others.  The program, its usage,
 * its bookkeeping and the lagging reader's checks are described in main.c.
 *
 *   main.c      main: parse, set up, the rounds, the end; failf
 *   options.c   usage, options, the parameters and replay lines
 *   content.c   contents (seed, k), poison, the content checks
 *   free.c      the free function, the quarantine of poisoned blocks
 *   access.c    checked puts, owners, pins, pp_get pointers; slots and boxes
 *   ops.c       the random operations
 *   lag.c       the lagging reader: checks (a), (b) and (c)
 *   worker.c    the workers, parking between rounds, the main thread's wait
 *   round.c     the end of a round: drop, drain, per-entry and exact stats checks
 *   final.c     the end of the run: destroy, the quarantine, the figures
 */
#ifndef PP_STRESS_EPOCH_TORTURE_H
#define PP_STRESS_EPOCH_TORTURE_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pinpool.h>

#include "common/cli.h"
#include "common/content.h"
#include "common/fail.h"
#include "common/handoff.h"
#include "common/progress.h"
#include "common/records.h"
#include "common/report.h"
#include "common/statcheck.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#if defined(__SANITIZE_ADDRESS__)
#define ET_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ET_ASAN 1
#endif
#endif

/* ------------------------------------------------------------------------ */
/* Parameters and globals                                                    */
/* ------------------------------------------------------------------------ */

#define NSLOTS       256       /* shared owner slots */
#define NPBOX        16        /* pin hand-off mailboxes */
#define NRBOX        16        /* owner hand-off "release boxes" */
#define OWN_CAP      16        /* private owners per thread */
#define HELD_CAP     4         /* held pins per thread */
#define ESC_CAP      32        /* pp_get pointers a QSBR thread keeps */
#define LAG_HOLD     8         /* entries the lagger holds by pp_get at a lag's start */
#define LAGLOG_CAP   65536     /* entries of one lag checked one by one */
#define REC_CAP      (1u << 17) /* records (entries put) per round */
#define BLK_MIN     32
#define BLK_MAX     1024
#define POISON       0xDBu
#define HDR_MAGIC    0x45504F43484C4956ull   /* "EPOCHLIV" */
#define QUARANTINE_DEFAULT 1024 /* freed blocks kept poisoned, per node */
#define STALL_S      30.0      /* a wait for frees fails when none happens for this long */
#define NONE         UINT64_MAX

extern unsigned g_threads;
extern uint64_t g_ops;                  /* per thread; NONE with --duration only */
extern double g_duration_s;             /* 0: run --ops */
extern const char *g_topology;
extern uint64_t g_lag_ops;              /* ops of the other threads during a lag */
extern unsigned g_timeout_s;
extern unsigned g_quarantine;           /* per node */
extern int g_verbose;
extern int g_keep_going;                /* --keep-going: do not stop at the first failure */
extern size_t g_backlog;                /* --reclaim-backlog (0: the pool's default) */
extern int g_expect_overload;           /* --expect-overload: the overload paths must have run */

extern pp_pool_t *g_pool;
extern unsigned g_nnodes;
extern int g_rtid[PP_MAX_NODES];        /* reclaimer thread ids */
extern pp_node_stats_t g_nst[PP_MAX_NODES]; /* main's per-node figures, read with its
                                               pp_stats_t (stat_read) */

extern atomic_int g_round_stop;         /* threads finish the round and park */
/* Threads inside a pp_put call now (a put may wait for the reclaim
 * backlog, which an open lag holds up: lag.c). */
extern _Atomic unsigned g_in_put;
extern uint64_t g_backlog_bound;        /* the pool's, per node (UINT64_MAX: none) */
extern double g_t0;

/* The lag in progress (0: none) and the log of the entries that died
 * during it (lag << 40 | id). */
extern _Atomic uint32_t g_lag_cur;
extern _Atomic uint64_t g_lag_log[LAGLOG_CAP];
extern _Atomic uint64_t g_lag_log_n;
/* Failures by kind (a run stops soon after the first unless --keep-going). */
extern _Atomic uint64_t g_lag_early;    /* frees of entries of the open lag: (b) */
extern _Atomic uint64_t g_early_qsbr;   /* frees while a QSBR reader holds a pointer */
extern _Atomic uint64_t g_early_held;   /* frees while the program holds an owner or pin */
extern _Atomic uint64_t g_read_poison;  /* reads that found poison */
extern _Atomic uint64_t g_read_other;   /* reads that found other wrong bytes */

/* Set on the workers and the main thread: the free function must never run
 * on one of them. */
extern __thread int tl_user;

/* ------------------------------------------------------------------------ */
/* Entries                                                                   */
/* ------------------------------------------------------------------------ */

/* Per-entry record; reset between rounds (state: REC_LIVE once pp_put
 * returned success, REC_PUT_FAILED; frees: free function calls). */
typedef struct rec {
    REC_FIELDS
    _Atomic(unsigned char *) data;
    _Atomic int32_t owners_out;    /* owners, counting releases still in their call */
    _Atomic int32_t pins_out;      /* pins, counting unpins still in their call */
    _Atomic uint32_t lag;          /* lag its last owner was released in (0: none) */
} rec_t;

extern rectab_t g_recs;                 /* REC_CAP records, made at the start */
extern slots_t g_slots;                 /* NSLOTS shared owners */
extern mbox_t g_pbox;                   /* id + 1 of a held pin, or 0 */
extern mbox_t g_rbox;                   /* id + 1 of an owner, or 0 */

extern _Atomic uint64_t g_frees_node[PP_MAX_NODES];   /* free function calls */

static inline rec_t *rec_get(uint64_t k) { return rectab_get(&g_recs, k); }
static inline unsigned char *rec_data(rec_t *r)
{
    return atomic_load_explicit(&r->data, memory_order_relaxed);
}
static inline uint64_t ids_used(void) { return rectab_used(&g_recs); }

extern const pp_type_t g_type;

/* ------------------------------------------------------------------------ */
/* Threads                                                                   */
/* ------------------------------------------------------------------------ */

enum { OP_PUT, OP_PUBLISH, OP_TAKE, OP_RELEASE, OP_RBOX, OP_RETAIN, OP_PIN, OP_HELD,
       OP_PBOX, OP_GET, OP_STAT, OP_STALE, OP_QUIESCE, OP_N };
extern const char *const op_names[OP_N];

typedef struct esc { uint64_t k; const unsigned char *p; } esc_t;

typedef struct thr {
    unsigned idx;                 /* g_threads for the main thread */
    pthread_t th;
    uint64_t rng;
    int qsbr, lagger;
    uint64_t op;                  /* ops done so far (all rounds) */
    _Atomic uint64_t progress;    /* the same, for the others to read */
    uint64_t owned[OWN_CAP];
    int nowned;
    uint64_t held[HELD_CAP];
    int nheld;
    esc_t esc[ESC_CAP];
    int nesc;
    unsigned esc_rr;
    cnt_t cnt[PP_MAX_NODES];
    uint64_t opcount[OP_N];
    uint64_t full_checks, quick_checks, stale_checks, borrow_misses, pin_handoffs,
        owner_handoffs, budget_skips;
    /* QSBR: a pool call since the last pp_quiescent (set after every
     * operation, so a superset of "inside its section"): only then may a
     * put be refused with PP_EDEADLK. */
    int insec;
    uint64_t refused_retried;     /* PP_EDEADLK: pointers dropped, pp_quiescent, put again */
    uint64_t refused_in_lag;      /* PP_EDEADLK inside an open lag: the put is skipped */
    /* The lagging reader. */
    int lagging;
    uint32_t lag_id;
    uint64_t lag_start_others;
    double lag_t0;
    esc_t lag_held[LAG_HOLD];
    int nlag_held;
    unsigned lag_rr;
    uint64_t next_lag_at;
    uint64_t *lag_q;              /* [LAGLOG_CAP] entries queued when a lag ended */
    int lag_blocked;              /* this lag ended because the others all wait for it */
    uint64_t lags, lags_full, lags_blocked, lag_released, lag_held_released, lag_resumed,
        lag_others_ops, lag_log_lost;
    double lag_len_max, resume_max;
} thr_t;

extern thr_t *g_thr;              /* g_threads workers, then main */

static inline uint64_t rnd(thr_t *t) { return rng_next(&t->rng); }
static inline unsigned rndn(thr_t *t, unsigned n) { return rng_below(&t->rng, n); }

static inline cnt_t *cnt_of(thr_t *t, rec_t *r) { return &t->cnt[rec_node(r)]; }

/* An entry the thread may touch: a private owner (slot -1) or a borrow. */
typedef struct src { uint64_t k; int slot; } src_t;

/* ------------------------------------------------------------------------ */
/* Functions                                                                 */
/* ------------------------------------------------------------------------ */

/* main.c: a failed check of thread t (NULL: a pool thread). */
void failf(const thr_t *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* options.c */
int parse_args(int argc, char **argv);   /* -1: run; else the exit status */
void print_params(void);

/* content.c */
extern unsigned char g_poison[BLK_MAX];  /* a block of poison, to compare freed blocks with */
void fill(unsigned char *p, size_t size, uint64_t k);
long verify(const unsigned char *p, size_t size, uint64_t k);
long poison_intact(const unsigned char *p, size_t size);
void check_full(thr_t *t, uint64_t k, const unsigned char *p, const char *what);
void check_quick(thr_t *t, uint64_t k, const unsigned char *p, const char *what);

/* free.c */
extern _Atomic uint64_t g_quar_checked;
void quarantine_init(unsigned node);
void quarantine_drain(thr_t *m);        /* the end: still poison, then freed */
uint64_t frees_so_far(void);

/* access.c */
uint64_t entry_put(thr_t *t);
void release_owner(thr_t *t, uint64_t k);
int owned_push(thr_t *t, uint64_t k);
uint64_t owned_take(thr_t *t, int i);
const unsigned char *pin_take(thr_t *t, uint64_t k);
void pin_drop(thr_t *t, uint64_t k);
const unsigned char *get_checked(thr_t *t, uint64_t k);
void esc_hold(esc_t *arr, int *n, uint64_t k, const unsigned char *p);
void esc_drop_all(thr_t *t, esc_t *arr, int *n, const char *what);
void esc_recheck(thr_t *t, esc_t *arr, int n, unsigned *rr, const char *what);
void quiesce(thr_t *t);
int slot_borrow(thr_t *t, unsigned *sout, uint64_t *kout);
void slot_unborrow(unsigned s);
int slot_publish(thr_t *t, uint64_t k);
int box_put(thr_t *t, mbox_t *box, uint64_t k);
uint64_t box_take(thr_t *t, mbox_t *box);
int src_get(thr_t *t, src_t *s);
void src_put(const src_t *s);

/* ops.c */
void do_op(thr_t *t);

/* lag.c */
uint64_t others_progress(const thr_t *t);
void lag_begin(thr_t *t);
int lag_over(thr_t *t);
void lag_recheck(thr_t *t);
void lag_end(thr_t *t);

/* worker.c */
extern _Atomic unsigned g_parked;       /* workers parked (written under the gate's lock) */
extern int g_tty, g_printed_progress;   /* stderr is a terminal; a progress line was printed */
extern double g_last_print;
void *worker(void *arg);
uint64_t total_progress(void);
void wait_parked(pp_stats_t *st, unsigned round);
void open_gate(int more);

/* round.c */
void round_end(thr_t *m, pp_stats_t *st, unsigned round);
/* The most the live entries (owned, pinned, being put) can weigh in the
 * backlog's units (size + 64 each) at once; the pool's promise holds when
 * it is at most half the bound. */
uint64_t live_charge_bound(void);
/* What a node's backlog_peak may reach: the bound, or bound + the live
 * data when that is more than half the bound. */
uint64_t backlog_peak_limit(void);

/* final.c */
const char *caught_by(void);
int final_checks(thr_t *m, pp_stats_t *st, unsigned rounds, double secs);   /* the exit status */

#endif /* PP_STRESS_EPOCH_TORTURE_H */
