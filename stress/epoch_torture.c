/*
 * epoch_torture -- torture test of pinpool's epoch reclamation, in the
 * spirit of Concurrency Kit's ck_epoch regressions (validate/torture.c and
 * ck_epoch_poll.c): readers inside epoch-protected sections must never see
 * memory that the reclaimer has already freed, and a reader that lags
 * holds reclamation back, exactly, until it quiesces.
 *
 *   epoch_torture [--threads N] [--ops N | --duration SEC] [--seed S]
 *                 [--topology STR] [--lag-ops N] [--quarantine N]
 *                 [--timeout SEC] [--verbose]
 *
 * Every entry is a block of 32..1024 bytes whose every word is a function of
 * (seed, entry id, word index).  The type's free function checks the block,
 * then POISONS it (fills it with 0xdb) before releasing it, and keeps the
 * last freed blocks of each node in a quarantine ring, so that a read of a
 * freed block keeps seeing poison for a while even in a build without
 * AddressSanitizer (under ASan the ring is off by default: the block is
 * freed at once and ASan reports any later read).  Whoever reads an entry
 * checks its bytes, so a free that comes too early is seen as poison (or as
 * another entry's bytes), as an ASan heap-use-after-free, or as a TSan race
 * with the poisoning memset.
 *
 * Threads (oversubscription is expected: 2..16 threads on two cores):
 *  - thread 0 is the LAGGING READER (a QSBR thread, see below) that now and
 *    then keeps its epoch section open for a long stretch;
 *  - odd threads are QSBR threads (pp_quiescent): they keep the pointers
 *    pp_get returns across many operations, re-checking their bytes after
 *    every operation, and quiesce (drop them, pp_quiescent) about 1 op in
 *    16;
 *  - even threads other than 0 run in the default mode: a pp_get pointer is
 *    used only while the thread holds an owner of the entry.
 *  All threads put, pin (checking the bytes on every pin, holding pins across
 *  operations, handing pins to other threads through mailboxes), retain and
 *  release; owners are handed between threads through shared slots and
 *  "release boxes", so the last owner of an entry is released by any thread,
 *  while other threads still hold pins or pp_get pointers to it.
 *
 * Bookkeeping (never calls the pool with a ref it does not legitimately
 * hold, except the deliberately stale ones):
 *  - an OWNER is held privately (a thread's list), by a shared slot (one
 *    word: (id + 1) << 32 | borrowers; a thread BORROWS the slot's owner by
 *    incrementing the borrower count, and the owner can only be TAKEN while
 *    nobody borrows it), or by a release box (taken by exchange);
 *  - rec.owners / rec.pins are decremented before pp_release / pp_unpin and
 *    incremented before pp_retain / pp_pin, so the free function must see
 *    them at 0; rec.owners_out / rec.pins_out are decremented only after the
 *    call returned (0 for both: the entry is certainly queued);
 *  - rec.qsbr counts QSBR threads holding a pp_get pointer to the entry; it
 *    is decremented just before their pp_quiescent, so the free function
 *    must see it at 0.
 *
 * The lagging reader (thread 0), lag L:
 *  1. pp_quiescent, then pp_get of up to 8 entries (one it puts itself, so
 *     that its section is certainly open; others borrowed from the slots);
 *     then it publishes L in g_lag_cur.  From here on, any thread that
 *     releases the LAST owner of an entry after reading g_lag_cur == L tags
 *     the entry with L (and logs it) before calling pp_release: that entry
 *     died after the lagger's section began.
 *  2. It hands the owners of its own entries to other threads (release
 *     boxes), and goes on with ordinary operations, WITHOUT quiescing, for
 *     --lag-ops operations of the other threads, re-checking the bytes of
 *     every entry it holds after each operation: (a) they stay intact for
 *     the whole lag.
 *  3. (b) Exact, not timing-based: ck_epoch cannot complete a grace period
 *     for an entry deferred after the lagger's section began, so no entry
 *     tagged L may be freed while L is open.  The free function fails on
 *     such a free the moment it happens, and at the end of the lag every
 *     logged entry of L must still be unfreed.
 *  4. It clears g_lag_cur, drops its pointers and calls pp_quiescent.  (c)
 *     Reclamation resumes: every entry of L whose final pp_release/pp_unpin
 *     has returned (so it is queued) must be freed; the lagger waits for it
 *     with pp_pool_drain(pool, 20 ms) in a loop bounded by 30 s.  When a
 *     drain returns 0 all of them must already be freed (its contract).
 *
 * The free function also checks that it runs exactly once per entry, on the
 * reclaimer of the entry's home node (thread ids from pp_pool_stats), with
 * no owner, pin or QSBR pointer left, and that the bytes are intact.
 *
 * The run is made of ROUNDS (the records of a round are bounded, so a
 * --duration run has bounded memory): at the end of each round the threads
 * drop everything and park, the main thread empties the slots and
 * mailboxes, pp_pool_drain must succeed, every entry must have been freed
 * exactly once on its home reclaimer, pp_pool_stats must match the
 * program's own counts exactly (per node and in total, cumulative), and
 * pp__pool_is_valid must hold.  At the end pp_pool_destroy must free and
 * report nothing.
 *
 * No sleep is used as synchronisation: every wait is on a condition, with a
 * bounded timeout that fails the run loudly.
 *
 * Output: the seed and a replay command first; one "epoch_torture: FAIL:"
 * line per failed check; the last line is "epoch_torture: PASS ..." or
 * "epoch_torture: FAIL ..." with the figures.  Exit status 0 only if every
 * check passed.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pinpool.h>

#define STRESS_PROG "epoch_torture"
#include "stress_common.h"

#include "testhooks.h" /* pp__pool_is_valid */

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

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
#define MAX_FAIL_MSGS 20
#define NONE         UINT64_MAX

static unsigned g_threads = 4;
static uint64_t g_ops = 20000;          /* per thread; NONE with --duration only */
static double g_duration_s;             /* 0: run --ops */
static uint64_t g_seed;
static const char *g_topology;
static uint64_t g_lag_ops = 10000;      /* ops of the other threads during a lag */
static unsigned g_timeout_s = 300;
static unsigned g_quarantine;           /* per node; set in main */
static int g_verbose;
static int g_keep_going;                /* --keep-going: do not stop at the first failure */

static pp_pool_t *g_pool;
static unsigned g_nnodes;
static int g_rtid[PP_MAX_NODES];        /* reclaimer thread ids */

static atomic_int g_failed;
static atomic_int g_fail_msgs;
static atomic_int g_round_stop;         /* threads finish the round and park */
static pthread_mutex_t g_print_lock = PTHREAD_MUTEX_INITIALIZER;
static double g_t0;

/* Parking between rounds. */
static pthread_mutex_t g_gate_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_gate_cond = PTHREAD_COND_INITIALIZER;   /* workers wait */
static pthread_cond_t g_park_cond = PTHREAD_COND_INITIALIZER;   /* main waits */
static _Atomic unsigned g_parked;       /* written under g_gate_lock */
static unsigned g_round;                /* under g_gate_lock */
static int g_exit;                      /* under g_gate_lock */

/* The lag in progress (0: none) and the log of the entries that died
 * during it (lag << 40 | id). */
static _Atomic uint32_t g_lag_cur;
static _Atomic uint64_t g_lag_log[LAGLOG_CAP];
static _Atomic uint64_t g_lag_log_n;
/* Failures by kind (a run stops soon after the first unless --keep-going). */
static _Atomic uint64_t g_lag_early;    /* frees of entries of the open lag: (b) */
static _Atomic uint64_t g_early_qsbr;   /* frees while a QSBR reader holds a pointer */
static _Atomic uint64_t g_early_held;   /* frees while the program holds an owner or pin */
static _Atomic uint64_t g_read_poison;  /* reads that found poison */
static _Atomic uint64_t g_read_other;   /* reads that found other wrong bytes */

/* Set on the workers and the main thread: the free function must never run
 * on one of them. */
static __thread int tl_user;

/* Per-entry record; reset between rounds. */
typedef struct rec {
    _Atomic uint64_t ref;
    _Atomic(unsigned char *) data;
    _Atomic uint32_t size;
    _Atomic uint32_t node;
    _Atomic uint32_t state;        /* 0 unused, 1 put ok, 2 put failed */
    _Atomic int32_t owners;        /* owners the program holds */
    _Atomic int32_t owners_out;    /* ... counting releases still in their call */
    _Atomic int32_t pins;          /* pins the program holds */
    _Atomic int32_t pins_out;      /* ... counting unpins still in their call */
    _Atomic int32_t qsbr;          /* QSBR threads holding a pp_get pointer */
    _Atomic uint32_t lag;          /* lag its last owner was released in (0: none) */
    _Atomic uint32_t freed;        /* free function calls */
    _Atomic int32_t free_tid;
} rec_t;

static rec_t *g_recs;
static _Atomic uint64_t g_nids;         /* ids handed out this round */

static _Atomic uint64_t g_slots[NSLOTS];
static _Atomic uint64_t g_pbox[NPBOX];  /* id + 1 of a held pin, or 0 */
static _Atomic uint64_t g_rbox[NRBOX];  /* id + 1 of an owner, or 0 */

static _Atomic uint64_t g_frees_node[PP_MAX_NODES];   /* free function calls */
static _Atomic uint64_t g_report_lines;
static char g_report_first[4][256];
static atomic_int g_report_saved;

/* Quarantine: the last freed (poisoned) blocks of each node. */
typedef struct quar {
    pthread_mutex_t lock;
    unsigned char **p;
    uint32_t *size;
    uint64_t *id;
    unsigned head, n;
} quar_t;
static quar_t g_quar[PP_MAX_NODES];
static _Atomic uint64_t g_quar_checked;

static void et_free(void *data, size_t size, void *ctx);
static char g_type_ctx;
static const pp_type_t g_type = {
    .name = "epoch_torture", .free = et_free, .save = NULL, .load = NULL,
    .ctx = &g_type_ctx, .flags = 0
};

/* ------------------------------------------------------------------------ */
/* Threads                                                                   */
/* ------------------------------------------------------------------------ */

typedef struct cnt {
    uint64_t puts, pins, unpins, retains, releases, gets;
} cnt_t;

enum { OP_PUT, OP_PUBLISH, OP_TAKE, OP_RELEASE, OP_RBOX, OP_RETAIN, OP_PIN, OP_HELD,
       OP_PBOX, OP_GET, OP_STAT, OP_STALE, OP_QUIESCE, OP_N };
static const char *const op_names[OP_N] = {
    "put", "publish", "take", "release", "rbox", "retain", "pin", "held", "pbox",
    "get", "stat", "stale", "quiesce"
};
/* Weights of the random operations (percent); quiesce is not drawn. */
static const unsigned op_weight[OP_QUIESCE] = { 12, 8, 8, 10, 6, 4, 18, 7, 6, 14, 3, 4 };

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
    uint64_t lags, lags_full, lag_released, lag_held_released, lag_resumed, lag_others_ops,
        lag_log_lost;
    double lag_len_max, resume_max;
} thr_t;

static thr_t *g_thr;              /* g_threads workers, then main */

/* ------------------------------------------------------------------------ */
/* Failure reporting                                                         */
/* ------------------------------------------------------------------------ */

static void failf(const thr_t *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void failf(const thr_t *t, const char *fmt, ...)
{
    atomic_store(&g_failed, 1);
    if (!g_keep_going)
        atomic_store(&g_round_stop, 1);
    if (atomic_fetch_add(&g_fail_msgs, 1) >= MAX_FAIL_MSGS)
        return;
    char msg[1200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&g_print_lock);
    if (t == NULL)
        printf("epoch_torture: FAIL: %s [seed=%" PRIu64 " thread=pool tid %ld]\n", msg, g_seed,
               (long)syscall(SYS_gettid));
    else if (t->idx == g_threads)
        printf("epoch_torture: FAIL: %s [seed=%" PRIu64 " thread=main]\n", msg, g_seed);
    else
        printf("epoch_torture: FAIL: %s [seed=%" PRIu64 " thread=%u op=%" PRIu64 "]\n", msg,
               g_seed, t->idx, t->op);
    fflush(stdout);
    pthread_mutex_unlock(&g_print_lock);
}

#define EXPECT_RC(t, rc, want, what, k)                                        \
    do {                                                                       \
        int rc__ = (rc);                                                       \
        if (rc__ != (want))                                                    \
            failf((t), "%s: got %s (%d), expected %s, entry %" PRIu64,         \
                  (what), pp_err_name(rc__), rc__, pp_err_name(want),          \
                  (uint64_t)(k));                                              \
    } while (0)

static void report_cb(const char *line, void *ctx)
{
    (void)ctx;
    atomic_fetch_add(&g_report_lines, 1);
    pthread_mutex_lock(&g_print_lock);
    int i = atomic_fetch_add(&g_report_saved, 1);
    if (i < 4)
        snprintf(g_report_first[i], sizeof g_report_first[i], "%s", line);
    pthread_mutex_unlock(&g_print_lock);
}

/* ------------------------------------------------------------------------ */
/* Random numbers and contents                                               */
/* ------------------------------------------------------------------------ */

static inline uint64_t rnd(thr_t *t) { return splitmix64(&t->rng); }
static inline unsigned rndn(thr_t *t, unsigned n) { return (unsigned)(rnd(t) % n); }

/* Word w of entry k's block (sizes are multiples of 8): a header (magic,
 * id, size), then a sequence that starts at a value derived from the seed
 * and the id (cheap to check: the free function checks every byte too, and
 * it runs on the reclaimer, whose time is the pool's reclaim lag). */
#define WORD_STEP 0x9E3779B97F4A7C15ull
static inline uint64_t body_base(uint64_t k) { return mix3(g_seed, k, 0xB0D1ull); }

static inline uint64_t word_of(uint64_t k, size_t size, size_t w)
{
    switch (w) {
    case 0: return HDR_MAGIC;
    case 1: return k;
    case 2: return (uint64_t)size;
    default: return body_base(k) + (uint64_t)w * WORD_STEP;
    }
}

static void fill(unsigned char *p, size_t size, uint64_t k)
{
    for (size_t w = 0; w < 3; w++) {
        uint64_t v = word_of(k, size, w);
        memcpy(p + 8 * w, &v, 8);
    }
    uint64_t v = body_base(k) + 3 * WORD_STEP;
    for (size_t w = 3; w < size / 8; w++, v += WORD_STEP)
        memcpy(p + 8 * w, &v, 8);
}

/* Offset of the first wrong byte of word w, or -1. */
static inline long check_word(const unsigned char *p, uint64_t k, size_t size, size_t w)
{
    uint64_t v = word_of(k, size, w), got;
    memcpy(&got, p + 8 * w, 8);
    if (got == v)
        return -1;
    for (unsigned j = 0; j < 8; j++)
        if (p[8 * w + j] != ((const unsigned char *)&v)[j])
            return (long)(8 * w + j);
    return -1;
}

/* Full check: offset of the first wrong byte, or -1. */
static long verify(const unsigned char *p, size_t size, uint64_t k)
{
    for (size_t w = 0; w < 3; w++) {
        long off = check_word(p, k, size, w);
        if (off >= 0)
            return off;
    }
    uint64_t v = body_base(k) + 3 * WORD_STEP, got;
    for (size_t w = 3; w < size / 8; w++, v += WORD_STEP) {
        memcpy(&got, p + 8 * w, 8);
        if (got != v)
            return check_word(p, k, size, w);
    }
    return -1;
}

/* A block of poison, to compare freed blocks with. */
static unsigned char g_poison[BLK_MAX];

/* Offset of the first byte of a freed block that is not poison, or -1. */
static long poison_intact(const unsigned char *p, size_t size)
{
    if (memcmp(p, g_poison, size) == 0)
        return -1;
    for (size_t j = 0; j < size; j++)
        if (p[j] != POISON)
            return (long)j;
    return -1;
}

/* Quick check: the header and the last word. */
static long verify_quick(const unsigned char *p, size_t size, uint64_t k)
{
    long off;
    if ((off = check_word(p, k, size, 0)) >= 0 || (off = check_word(p, k, size, 1)) >= 0 ||
        (off = check_word(p, k, size, size / 8 - 1)) >= 0)
        return off;
    return -1;
}

/* ------------------------------------------------------------------------ */
/* Records                                                                   */
/* ------------------------------------------------------------------------ */

static inline rec_t *rec_get(uint64_t k) { return k < REC_CAP ? &g_recs[k] : NULL; }
static inline pp_ref_t rec_ref(rec_t *r)
{
    return atomic_load_explicit(&r->ref, memory_order_relaxed);
}
static inline unsigned rec_node(rec_t *r)
{
    return atomic_load_explicit(&r->node, memory_order_relaxed);
}
static inline size_t rec_size(rec_t *r)
{
    return atomic_load_explicit(&r->size, memory_order_relaxed);
}
static inline unsigned char *rec_data(rec_t *r)
{
    return atomic_load_explicit(&r->data, memory_order_relaxed);
}

static inline uint64_t ids_used(void)
{
    uint64_t n = atomic_load(&g_nids);
    return n < REC_CAP ? n : REC_CAP;
}

/* A bad block: says whether it is poison, i.e. a free that came too early. */
static void bad_bytes(thr_t *t, const char *what, uint64_t k, const unsigned char *p, long off)
{
    rec_t *r = rec_get(k);
    size_t size = rec_size(r);
    size_t w = (size_t)off / 8;
    uint64_t want = word_of(k, size, w);
    int poison = 1;
    for (unsigned j = 0; j < 8; j++)
        poison = poison && p[8 * w + j] == POISON;
    atomic_fetch_add(poison ? &g_read_poison : &g_read_other, 1);
    failf(t, "%s: entry %" PRIu64 " (ref %#" PRIx64 ", node %u, %zu bytes) byte %ld is %#04x, "
          "expected %#04x%s; program: freed %u, owners %d, pins %d, QSBR holders %d, died in lag "
          "%u, lag open now %u", what, k, rec_ref(r), rec_node(r), size, off, p[off],
          ((const unsigned char *)&want)[off % 8],
          poison ? " -- POISON: the block was freed while this reader could still use it"
                 : " (not poison: freed and reused, or corrupted)",
          atomic_load(&r->freed), atomic_load(&r->owners), atomic_load(&r->pins),
          atomic_load(&r->qsbr), atomic_load(&r->lag), atomic_load(&g_lag_cur));
}

static void check_full(thr_t *t, uint64_t k, const unsigned char *p, const char *what)
{
    long off = verify(p, rec_size(rec_get(k)), k);
    t->full_checks++;
    if (off >= 0)
        bad_bytes(t, what, k, p, off);
}

static void check_quick(thr_t *t, uint64_t k, const unsigned char *p, const char *what)
{
    long off = verify_quick(p, rec_size(rec_get(k)), k);
    t->quick_checks++;
    if (off >= 0)
        bad_bytes(t, what, k, p, off);
}

/* ------------------------------------------------------------------------ */
/* The free function (runs on the home node's reclaimer)                     */
/* ------------------------------------------------------------------------ */

static void quarantine_push(unsigned node, unsigned char *p, size_t size, uint64_t k)
{
    if (g_quarantine == 0 || node >= g_nnodes) {
        free(p);
        return;
    }
    quar_t *q = &g_quar[node];
    unsigned char *old = NULL;
    uint32_t old_size = 0;
    uint64_t old_id = 0;
    pthread_mutex_lock(&q->lock);
    unsigned i = (q->head + q->n) % g_quarantine;
    if (q->n == g_quarantine) {
        old = q->p[q->head];
        old_size = q->size[q->head];
        old_id = q->id[q->head];
        q->head = (q->head + 1) % g_quarantine;
        q->n--;
        i = (q->head + q->n) % g_quarantine;
    }
    q->p[i] = p;
    q->size[i] = (uint32_t)size;
    q->id[i] = k;
    q->n++;
    pthread_mutex_unlock(&q->lock);
    if (old != NULL) {
        /* Nobody may write a freed block: its poison must be intact. */
        long j = poison_intact(old, old_size);
        if (j >= 0)
            failf(NULL, "freed block of entry %" PRIu64 " (%u bytes) was written after its "
                  "free: byte %ld is %#04x, not poison", old_id, old_size, j, old[j]);
        atomic_fetch_add_explicit(&g_quar_checked, 1, memory_order_relaxed);
        free(old);
    }
}

static void et_free(void *data, size_t size, void *ctx)
{
    if (ctx != &g_type_ctx)
        failf(NULL, "free function got ctx %p, expected %p", ctx, (void *)&g_type_ctx);
    if (tl_user)
        failf(NULL, "free function called on a user thread");
    unsigned char *p = data;
    if (p == NULL || size < BLK_MIN || size % 8 != 0) {
        failf(NULL, "free function called with data %p size %zu", data, size);
        return;
    }
    uint64_t magic, k;
    memcpy(&magic, p, 8);
    memcpy(&k, p + 8, 8);
    rec_t *r = magic == HDR_MAGIC ? rec_get(k) : NULL;
    if (r == NULL || rec_data(r) != p) {
        failf(NULL, "free function: block %p (%zu bytes) is not a live entry (magic %#" PRIx64
              ", id %" PRIu64 "): a double free or a foreign pointer", data, size, magic, k);
        return;   /* do not touch it further */
    }
    uint32_t f = atomic_fetch_add_explicit(&r->freed, 1, memory_order_acq_rel);
    if (f != 0) {
        failf(NULL, "entry %" PRIu64 " (ref %#" PRIx64 ") freed %u times", k, rec_ref(r), f + 1);
        return;
    }
    unsigned node = rec_node(r);
    int tid = (int)syscall(SYS_gettid);
    if (node >= g_nnodes || tid != g_rtid[node]) {
        int other = -1;
        for (unsigned n = 0; n < g_nnodes; n++)
            if (tid == g_rtid[n])
                other = (int)n;
        failf(NULL, "entry %" PRIu64 " of node %u freed on thread %d (%s%d), not on its home "
              "reclaimer %d", k, node, tid, other >= 0 ? "the reclaimer of node " : "",
              other >= 0 ? other : tid, node < g_nnodes ? g_rtid[node] : -1);
    }
    if (atomic_load(&r->state) != 1)
        failf(NULL, "entry %" PRIu64 " freed but its pp_put never returned success", k);
    if (size != rec_size(r))
        failf(NULL, "entry %" PRIu64 " freed with size %zu, put with %zu", k, size, rec_size(r));
    int32_t o = atomic_load(&r->owners), pi = atomic_load(&r->pins), q = atomic_load(&r->qsbr);
    if (o != 0 || pi != 0)
        atomic_fetch_add(&g_early_held, 1);
    if (q != 0)
        atomic_fetch_add(&g_early_qsbr, 1);
    if (o != 0)
        failf(NULL, "entry %" PRIu64 " (ref %#" PRIx64 ") freed while the program holds %d "
              "owner(s)", k, rec_ref(r), o);
    if (pi != 0)
        failf(NULL, "entry %" PRIu64 " (ref %#" PRIx64 ") freed while the program holds %d "
              "pin(s)", k, rec_ref(r), pi);
    if (q != 0)
        failf(NULL, "entry %" PRIu64 " (ref %#" PRIx64 ") freed while %d QSBR thread(s) still "
              "use its pp_get pointer (before their pp_quiescent): no grace period", k,
              rec_ref(r), q);
    /* (b) A free of an entry that died during the open lag: the lagger's
     * section began before that death and has not ended (it clears
     * g_lag_cur before its pp_quiescent), so no grace period can have
     * passed. */
    uint32_t lag = atomic_load(&r->lag), cur = atomic_load(&g_lag_cur);
    if (lag != 0 && lag == cur) {
        atomic_fetch_add(&g_lag_early, 1);
        failf(NULL, "(b) entry %" PRIu64 " (ref %#" PRIx64 ") freed during lag %u: its last owner "
              "was released after the lagging reader's section began, and that section is "
              "still open", k, rec_ref(r), lag);
    }
    long off = verify(p, size, k);
    if (off >= 0)
        failf(NULL, "entry %" PRIu64 " (ref %#" PRIx64 ") corrupted when freed: byte %ld of %zu "
              "is %#04x", k, rec_ref(r), off, size, p[off]);
    atomic_store(&r->free_tid, tid);
    /* Poison, then free (through the quarantine ring). */
    memset(p, POISON, size);
    if (node < g_nnodes)
        atomic_fetch_add(&g_frees_node[node], 1);
    quarantine_push(node, p, size, k);
}

/* Free function calls so far (the progress of reclamation). */
static uint64_t frees_so_far(void)
{
    uint64_t f = 0;
    for (unsigned n = 0; n < g_nnodes; n++)
        f += atomic_load_explicit(&g_frees_node[n], memory_order_relaxed);
    return f;
}

/* ------------------------------------------------------------------------ */
/* Owners, pins, escaped pointers                                            */
/* ------------------------------------------------------------------------ */

static inline cnt_t *cnt_of(thr_t *t, rec_t *r) { return &t->cnt[rec_node(r)]; }

/* Puts a new entry; the caller gets its owner.  NONE if the round's record
 * budget is used up (the round then ends). */
static uint64_t entry_put(thr_t *t)
{
    uint64_t k = atomic_fetch_add_explicit(&g_nids, 1, memory_order_relaxed);
    if (k >= REC_CAP * 7 / 8)
        atomic_store(&g_round_stop, 1);
    if (k >= REC_CAP) {
        t->budget_skips++;
        return NONE;
    }
    rec_t *r = &g_recs[k];
    size_t size = BLK_MIN + 8 * (size_t)rndn(t, (BLK_MAX - BLK_MIN) / 8 + 1);
    unsigned char *p = malloc(size);
    if (p == NULL)
        oom();
    fill(p, size, k);
    atomic_store_explicit(&r->size, (uint32_t)size, memory_order_relaxed);
    atomic_store_explicit(&r->data, p, memory_order_relaxed);
    atomic_store_explicit(&r->owners, 1, memory_order_relaxed);
    atomic_store_explicit(&r->owners_out, 1, memory_order_relaxed);
    unsigned flags = 0;
    int want = -1;
    if (g_nnodes > 1 && rndn(t, 2) == 0) {
        want = (int)rndn(t, g_nnodes);
        flags = PP_ON_NODE(want);
    }
    pp_ref_t ref;
    int rc = pp_put(g_pool, p, size, &g_type, flags, &ref);
    if (rc != 0) {
        failf(t, "pp_put(%zu bytes, node %d): %s", size, want, pp_err_name(rc));
        atomic_store(&r->state, 2);
        free(p);
        return NONE;
    }
    unsigned node = pp_ref_node(ref);
    if (node >= g_nnodes || (want >= 0 && node != (unsigned)want))
        failf(t, "pp_put: ref %#" PRIx64 " names node %u (asked for %d, %u nodes)", ref, node,
              want, g_nnodes);
    atomic_store_explicit(&r->ref, ref, memory_order_relaxed);
    atomic_store_explicit(&r->node, node < g_nnodes ? node : 0, memory_order_relaxed);
    /* release: the record is complete for whoever acquires it */
    atomic_store_explicit(&r->state, 1, memory_order_release);
    t->cnt[node < g_nnodes ? node : 0].puts++;
    return k;
}

/* Drops an owner.  If it is the last one and a lag is open, the entry is
 * tagged with the lag first: it dies after the lagger's section began. */
static void release_owner(thr_t *t, uint64_t k)
{
    rec_t *r = rec_get(k);
    /* seq_cst: reading the lag id orders this release after the lagger's
     * pp_get that opened its section (the id is stored after it). */
    uint32_t lag = atomic_load(&g_lag_cur);
    int32_t prev = atomic_fetch_sub_explicit(&r->owners, 1, memory_order_acq_rel);
    if (prev <= 0)
        failf(t, "internal: release of entry %" PRIu64 " with %d program owners", k, prev);
    if (prev == 1 && lag != 0) {
        atomic_store(&r->lag, lag);
        uint64_t i = atomic_fetch_add(&g_lag_log_n, 1);
        if (i < LAGLOG_CAP)
            atomic_store(&g_lag_log[i], ((uint64_t)lag << 40) | k);
    }
    EXPECT_RC(t, pp_release(g_pool, rec_ref(r)), 0, "pp_release", k);
    cnt_of(t, r)->releases++;
    /* release: whoever sees 0 here also sees the entry queued (if unpinned) */
    atomic_fetch_sub_explicit(&r->owners_out, 1, memory_order_release);
}

static int owned_push(thr_t *t, uint64_t k)
{
    if (t->nowned >= OWN_CAP)
        return 0;
    t->owned[t->nowned++] = k;
    return 1;
}

static uint64_t owned_take(thr_t *t, int i)
{
    uint64_t k = t->owned[i];
    t->owned[i] = t->owned[--t->nowned];
    return k;
}

/* Pins entry k (the caller holds an owner or a borrow) and checks it. */
static const unsigned char *pin_take(thr_t *t, uint64_t k)
{
    rec_t *r = rec_get(k);
    atomic_fetch_add(&r->pins, 1);
    atomic_fetch_add(&r->pins_out, 1);
    void *p = NULL;
    unsigned flags = rndn(t, 4) == 0 ? PP_PIN_WRITE : 0;
    int rc = pp_pin(g_pool, rec_ref(r), flags, &p);
    if (rc != 0) {
        failf(t, "pp_pin of a live entry %" PRIu64 " (ref %#" PRIx64 "): %s", k, rec_ref(r),
              pp_err_name(rc));
        atomic_fetch_sub(&r->pins, 1);
        atomic_fetch_sub(&r->pins_out, 1);
        return NULL;
    }
    cnt_of(t, r)->pins++;
    if (p != rec_data(r)) {
        failf(t, "pp_pin of entry %" PRIu64 " returned %p, put with %p", k, p,
              (void *)rec_data(r));
        return rec_data(r);
    }
    check_full(t, k, p, "pin");
    return p;
}

static void pin_drop(thr_t *t, uint64_t k)
{
    rec_t *r = rec_get(k);
    atomic_fetch_sub(&r->pins, 1);
    EXPECT_RC(t, pp_unpin(g_pool, rec_ref(r)), 0, "pp_unpin", k);
    cnt_of(t, r)->unpins++;
    /* release: whoever sees 0 here also sees the entry queued (if dead) */
    atomic_fetch_sub_explicit(&r->pins_out, 1, memory_order_release);
}

/* pp_get of entry k (the caller holds an owner or a borrow), checked. */
static const unsigned char *get_checked(thr_t *t, uint64_t k)
{
    rec_t *r = rec_get(k);
    void *p = NULL;
    int rc = pp_get(g_pool, rec_ref(r), &p);
    if (rc != 0) {
        failf(t, "pp_get of a live entry %" PRIu64 " (ref %#" PRIx64 "): %s", k, rec_ref(r),
              pp_err_name(rc));
        return NULL;
    }
    cnt_of(t, r)->gets++;
    if (p != rec_data(r)) {
        failf(t, "pp_get of entry %" PRIu64 " returned %p, put with %p", k, p,
              (void *)rec_data(r));
        return NULL;
    }
    check_full(t, k, p, "pp_get");
    return p;
}

/* Keeps a pp_get pointer until the next quiescent point (QSBR threads). */
static void esc_hold(esc_t *arr, int *n, uint64_t k, const unsigned char *p)
{
    /* The caller still holds an owner or a borrow: the entry cannot be
     * freed before this count is seen by the free function. */
    atomic_fetch_add(&rec_get(k)->qsbr, 1);
    arr[*n].k = k;
    arr[*n].p = p;
    (*n)++;
}

static void esc_drop_all(thr_t *t, esc_t *arr, int *n, const char *what)
{
    for (int i = 0; i < *n; i++) {
        check_full(t, arr[i].k, arr[i].p, what);
        /* release: our reads of the block happen before its free */
        atomic_fetch_sub_explicit(&rec_get(arr[i].k)->qsbr, 1, memory_order_release);
    }
    *n = 0;
}

/* After every operation of a QSBR thread: every kept pointer still reads
 * its entry (header and last word of all, every byte of one). */
static void esc_recheck(thr_t *t, esc_t *arr, int n, unsigned *rr, const char *what)
{
    if (n == 0)
        return;
    for (int i = 0; i < n; i++)
        check_quick(t, arr[i].k, arr[i].p, what);
    unsigned i = (*rr)++ % (unsigned)n;
    check_full(t, arr[i].k, arr[i].p, what);
}

static void quiesce(thr_t *t)
{
    esc_drop_all(t, t->esc, &t->nesc, "QSBR pointer before pp_quiescent");
    pp_quiescent(g_pool);
    t->opcount[OP_QUIESCE]++;
}

/* ------------------------------------------------------------------------ */
/* Slots and mailboxes                                                       */
/* ------------------------------------------------------------------------ */

static int slot_borrow(thr_t *t, unsigned *sout, uint64_t *kout)
{
    unsigned s = rndn(t, NSLOTS);
    uint64_t w = atomic_load_explicit(&g_slots[s], memory_order_relaxed);
    for (;;) {
        if ((w >> 32) == 0) {
            t->borrow_misses++;
            return 0;
        }
        /* acquire: pairs with the publisher's release (record and bytes) */
        if (atomic_compare_exchange_weak_explicit(&g_slots[s], &w, w + 1, memory_order_acquire,
                                                  memory_order_relaxed))
            break;
    }
    *sout = s;
    *kout = (w >> 32) - 1;
    return 1;
}

static void slot_unborrow(unsigned s)
{
    /* release: what we did under the borrow happens before a TAKE */
    atomic_fetch_sub_explicit(&g_slots[s], 1, memory_order_release);
}

static int slot_publish(thr_t *t, uint64_t k)
{
    for (int tries = 0; tries < 4; tries++) {
        uint64_t z = 0;
        unsigned s = rndn(t, NSLOTS);
        /* release: the record and the bytes are visible to the borrowers */
        if (atomic_compare_exchange_strong_explicit(&g_slots[s], &z, (k + 1) << 32,
                                                    memory_order_release, memory_order_relaxed))
            return 1;
    }
    return 0;
}

static int box_put(thr_t *t, _Atomic uint64_t *box, unsigned n, uint64_t k)
{
    for (int tries = 0; tries < 4; tries++) {
        uint64_t z = 0;
        /* release: our pin / owner and what we did are handed over */
        if (atomic_compare_exchange_strong_explicit(&box[rndn(t, n)], &z, k + 1,
                                                    memory_order_release, memory_order_relaxed))
            return 1;
    }
    return 0;
}

static uint64_t box_take(thr_t *t, _Atomic uint64_t *box, unsigned n)
{
    /* acquire: pairs with box_put */
    uint64_t v = atomic_exchange_explicit(&box[rndn(t, n)], 0, memory_order_acquire);
    return v ? v - 1 : NONE;
}

/* An entry the thread may touch: a private owner (slot -1) or a borrow. */
typedef struct src { uint64_t k; int slot; } src_t;

static int src_get(thr_t *t, src_t *s)
{
    unsigned sl;
    if (t->nowned > 0 && rndn(t, 3) == 0) {
        s->k = t->owned[rndn(t, (unsigned)t->nowned)];
        s->slot = -1;
        return 1;
    }
    if (slot_borrow(t, &sl, &s->k)) {
        s->slot = (int)sl;
        return 1;
    }
    if (t->nowned > 0) {
        s->k = t->owned[rndn(t, (unsigned)t->nowned)];
        s->slot = -1;
        return 1;
    }
    return 0;
}

static void src_put(const src_t *s)
{
    if (s->slot >= 0)
        slot_unborrow((unsigned)s->slot);
}

/* ------------------------------------------------------------------------ */
/* Operations                                                                */
/* ------------------------------------------------------------------------ */

static void op_release(thr_t *t);

static void op_put(thr_t *t)
{
    if (t->nowned >= OWN_CAP)
        op_release(t);
    uint64_t k = entry_put(t);
    if (k != NONE && !owned_push(t, k))
        release_owner(t, k);
}

static void op_publish(thr_t *t)
{
    if (t->nowned == 0)
        return;
    int i = (int)rndn(t, (unsigned)t->nowned);
    if (slot_publish(t, t->owned[i]))
        (void)owned_take(t, i);
}

static void op_take(thr_t *t)
{
    if (t->nowned >= OWN_CAP)
        return;
    unsigned s = rndn(t, NSLOTS);
    uint64_t w = atomic_load_explicit(&g_slots[s], memory_order_relaxed);
    if ((w >> 32) == 0 || (w & 0xFFFFFFFFu) != 0)
        return;
    /* acquire: the borrowers' and publisher's work happens before ours */
    if (atomic_compare_exchange_strong_explicit(&g_slots[s], &w, 0, memory_order_acquire,
                                                memory_order_relaxed))
        owned_push(t, (w >> 32) - 1);
}

static void op_release(thr_t *t)
{
    if (t->nowned == 0)
        return;
    uint64_t k = owned_take(t, (int)rndn(t, (unsigned)t->nowned));
    if (rndn(t, 4) == 0 && box_put(t, g_rbox, NRBOX, k)) {
        t->owner_handoffs++;   /* another thread releases it */
        return;
    }
    release_owner(t, k);
}

static void op_rbox(thr_t *t)
{
    uint64_t k = box_take(t, g_rbox, NRBOX);
    if (k == NONE)
        return;
    if (rndn(t, 3) == 0 && owned_push(t, k))
        return;
    release_owner(t, k);
}

static void op_retain(thr_t *t)
{
    unsigned s;
    uint64_t k;
    if (t->nowned >= OWN_CAP || !slot_borrow(t, &s, &k))
        return;
    rec_t *r = rec_get(k);
    atomic_fetch_add(&r->owners, 1);
    atomic_fetch_add(&r->owners_out, 1);
    int rc = pp_retain(g_pool, rec_ref(r));
    if (rc == 0) {
        cnt_of(t, r)->retains++;
        owned_push(t, k);
    } else {
        failf(t, "pp_retain of a borrowed entry %" PRIu64 ": %s", k, pp_err_name(rc));
        atomic_fetch_sub(&r->owners, 1);
        atomic_fetch_sub(&r->owners_out, 1);
    }
    slot_unborrow(s);
}

static void op_pin(thr_t *t)
{
    src_t s;
    if (!src_get(t, &s))
        return;
    const unsigned char *p = pin_take(t, s.k);
    if (p != NULL) {
        unsigned c = rndn(t, 10);
        if (c >= 5 && c < 8 && t->nheld < HELD_CAP)
            t->held[t->nheld++] = s.k;       /* keep it across operations */
        else if (c >= 8 && box_put(t, g_pbox, NPBOX, s.k))
            t->pin_handoffs++;               /* another thread unpins it */
        else
            pin_drop(t, s.k);
    }
    src_put(&s);
}

static void op_held(thr_t *t)
{
    if (t->nheld == 0)
        return;
    unsigned i = rndn(t, (unsigned)t->nheld);
    uint64_t k = t->held[i];
    t->held[i] = t->held[--t->nheld];
    /* The pin keeps the block valid even if every owner is gone. */
    check_full(t, k, rec_data(rec_get(k)), "held pin");
    pin_drop(t, k);
}

static void op_pbox(thr_t *t)
{
    uint64_t k = box_take(t, g_pbox, NPBOX);
    if (k == NONE)
        return;
    check_full(t, k, rec_data(rec_get(k)), "pin handed over");
    if (rndn(t, 3) == 0 && t->nheld < HELD_CAP)
        t->held[t->nheld++] = k;
    else
        pin_drop(t, k);
}

static void op_get(thr_t *t)
{
    if (t->qsbr && t->nesc >= ESC_CAP) {
        if (t->lagging)
            return;
        quiesce(t);
    }
    src_t s;
    if (!src_get(t, &s))
        return;
    const unsigned char *p = get_checked(t, s.k);
    if (p != NULL && t->qsbr)
        esc_hold(t->esc, &t->nesc, s.k, p);
    /* Default mode: the pointer is valid only while we hold the owner or
     * the borrow, and it was checked under it. */
    src_put(&s);
}

static void op_stat(thr_t *t)
{
    src_t s;
    if (!src_get(t, &s))
        return;
    rec_t *r = rec_get(s.k);
    pp_entry_info_t info;
    int rc = pp_stat(g_pool, rec_ref(r), &info);
    if (rc != 0)
        failf(t, "pp_stat of a live entry %" PRIu64 ": %s", s.k, pp_err_name(rc));
    else if (info.size != rec_size(r) || info.node != rec_node(r) || info.type != &g_type ||
             info.owners < 1 || !(info.state & PP_STATE_RESIDENT) ||
             (info.state & (PP_STATE_DEAD | PP_STATE_SWAPPED)))
        failf(t, "pp_stat of live entry %" PRIu64 ": size %zu node %u owners %u state %#x type "
              "%p (expected size %zu node %u owners >= 1, resident, not dead)", s.k, info.size,
              info.node, info.owners, info.state, (const void *)info.type, rec_size(r),
              rec_node(r));
    src_put(&s);
}

/* Calls with the ref of an entry whose free function has run: PP_ESTALE. */
static void op_stale(thr_t *t)
{
    uint64_t n = ids_used();
    if (n == 0)
        return;
    uint64_t k = rnd(t) % n;
    rec_t *r = rec_get(k);
    /* acquire: pairs with the free function's acq_rel (the entry is gone) */
    if (atomic_load_explicit(&r->state, memory_order_acquire) != 1 ||
        atomic_load_explicit(&r->freed, memory_order_acquire) == 0)
        return;
    pp_ref_t ref = rec_ref(r);
    void *p = NULL;
    pp_entry_info_t info;
    t->stale_checks++;
    switch (rndn(t, 6)) {
    case 0: EXPECT_RC(t, pp_pin(g_pool, ref, 0, &p), PP_ESTALE, "pp_pin (stale)", k); break;
    case 1: EXPECT_RC(t, pp_get(g_pool, ref, &p), PP_ESTALE, "pp_get (stale)", k); break;
    case 2: EXPECT_RC(t, pp_retain(g_pool, ref), PP_ESTALE, "pp_retain (stale)", k); break;
    case 3: EXPECT_RC(t, pp_release(g_pool, ref), PP_ESTALE, "pp_release (stale)", k); break;
    case 4: EXPECT_RC(t, pp_unpin(g_pool, ref), PP_ESTALE, "pp_unpin (stale)", k); break;
    default: EXPECT_RC(t, pp_stat(g_pool, ref, &info), PP_ESTALE, "pp_stat (stale)", k); break;
    }
}

static void do_op(thr_t *t)
{
    unsigned x = rndn(t, 100), o = 0;
    while (o < OP_QUIESCE - 1 && x >= op_weight[o])
        x -= op_weight[o++];
    t->opcount[o]++;
    switch (o) {
    case OP_PUT:     op_put(t); break;
    case OP_PUBLISH: op_publish(t); break;
    case OP_TAKE:    op_take(t); break;
    case OP_RELEASE: op_release(t); break;
    case OP_RBOX:    op_rbox(t); break;
    case OP_RETAIN:  op_retain(t); break;
    case OP_PIN:     op_pin(t); break;
    case OP_HELD:    op_held(t); break;
    case OP_PBOX:    op_pbox(t); break;
    case OP_GET:     op_get(t); break;
    case OP_STAT:    op_stat(t); break;
    default:         op_stale(t); break;
    }
}

/* ------------------------------------------------------------------------ */
/* The lagging reader                                                        */
/* ------------------------------------------------------------------------ */

static uint64_t others_progress(const thr_t *t)
{
    uint64_t s = 0;
    for (unsigned i = 0; i < g_threads; i++)
        if (i != t->idx)
            s += atomic_load_explicit(&g_thr[i].progress, memory_order_relaxed);
    return s;
}

static uint32_t g_lag_next;   /* lagger only */

static void lag_hold(thr_t *t, uint64_t k)
{
    const unsigned char *p = get_checked(t, k);
    if (p != NULL)
        esc_hold(t->lag_held, &t->nlag_held, k, p);
}

static void lag_begin(thr_t *t)
{
    /* From a quiescent state: no pointer kept, no section open. */
    quiesce(t);
    uint64_t own[LAG_HOLD];
    int nown = 0;
    t->nlag_held = 0;
    /* The first pp_get opens the section; an entry of our own makes sure
     * there is one. */
    for (int i = 0; i < LAG_HOLD; i++) {
        if (i == 0 || rndn(t, 3) == 0) {
            uint64_t k = entry_put(t);
            if (k == NONE)
                continue;
            own[nown++] = k;
            lag_hold(t, k);
        } else {
            unsigned s;
            uint64_t k;
            if (!slot_borrow(t, &s, &k))
                continue;
            lag_hold(t, k);
            slot_unborrow(s);
        }
    }
    if (t->nlag_held == 0) {
        /* Nothing to hold (record budget used up): no lag this time. */
        for (int i = 0; i < nown; i++)
            release_owner(t, own[i]);
        t->next_lag_at = t->op + 64;
        return;
    }
    if (++g_lag_next >= (1u << 23))
        g_lag_next = 1;
    t->lag_id = g_lag_next;
    atomic_store(&g_lag_log_n, 0);
    t->lag_start_others = others_progress(t);
    t->lag_t0 = now_s();
    t->lagging = 1;
    /* seq_cst: the section opened by the pp_get calls above began before
     * any thread can read this id (release_owner reads it seq_cst). */
    atomic_store(&g_lag_cur, t->lag_id);
    /* Hand the owners of our own entries to other threads: they release
     * the last owner while we still read the blocks. */
    for (int i = 0; i < nown; i++) {
        if (box_put(t, g_rbox, NRBOX, own[i]) || slot_publish(t, own[i]))
            t->owner_handoffs++;
        else
            release_owner(t, own[i]);
    }
}

static int lag_over(const thr_t *t)
{
    return others_progress(t) - t->lag_start_others >= g_lag_ops ||
           atomic_load(&g_parked) >= g_threads - 1 || atomic_load(&g_failed);
}

static void lag_recheck(thr_t *t)
{
    esc_recheck(t, t->lag_held, t->nlag_held, &t->lag_rr, "(a) lagging reader's pointer");
}

static void lag_end(thr_t *t)
{
    uint32_t L = t->lag_id;
    double len = now_s() - t->lag_t0;
    uint64_t others = others_progress(t) - t->lag_start_others;

    /* (a) Every byte of every block we hold is intact at the end of the lag. */
    for (int i = 0; i < t->nlag_held; i++)
        check_full(t, t->lag_held[i].k, t->lag_held[i].p, "(a) lagging reader's pointer");
    for (int i = 0; i < t->nesc; i++)
        check_full(t, t->esc[i].k, t->esc[i].p, "(a) lagging reader's pointer");

    /* (b) No entry that died during this lag has been freed. */
    uint64_t n = atomic_load(&g_lag_log_n), released = 0, nq = 0, lost = 0;
    if (n > LAGLOG_CAP) {
        lost = n - LAGLOG_CAP;
        n = LAGLOG_CAP;
    }
    for (uint64_t i = 0; i < n; i++) {
        uint64_t e = atomic_load(&g_lag_log[i]);
        if ((e >> 40) != L)
            continue;   /* a late entry of an earlier lag */
        uint64_t k = e & ((1ull << 40) - 1);
        rec_t *r = rec_get(k);
        released++;
        if (atomic_load(&r->freed) != 0)
            failf(t, "(b) entry %" PRIu64 " (ref %#" PRIx64 ") died during lag %u (after the "
                  "lagging reader's section began) and was freed before that section ended",
                  k, rec_ref(r), L);
        /* acquire: pairs with the decrements after pp_release/pp_unpin
         * returned: both 0 means the entry is queued now. */
        if (atomic_load_explicit(&r->owners_out, memory_order_acquire) == 0 &&
            atomic_load_explicit(&r->pins_out, memory_order_acquire) == 0)
            t->lag_q[nq++] = k;
    }
    uint64_t held_released = 0;
    for (int i = 0; i < t->nlag_held; i++)
        held_released += atomic_load(&rec_get(t->lag_held[i].k)->lag) == L;

    /* End the lag: the id first, then the section. */
    atomic_store(&g_lag_cur, 0);
    esc_drop_all(t, t->lag_held, &t->nlag_held, "(a) lagging reader's pointer");
    quiesce(t);
    t->lagging = 0;

    /* (c) Reclamation resumes: everything queued during the lag is freed.
     * The wait is bounded by progress, not by a fixed time: it fails when
     * no entry at all is freed for STALL_S seconds (the reclaimers are
     * stuck), or after --timeout in all.  On a machine loaded by other
     * work a starved reclaimer is slow, but it frees. */
    double r0 = now_s(), waited = 0;
    if (nq > 0 && !atomic_load(&g_failed)) {
        uint64_t left = nq, seen = frees_so_far();
        double moved = r0;
        for (;;) {
            int rc = pp_pool_drain(g_pool, 20);
            left = 0;
            for (uint64_t i = 0; i < nq; i++)
                left += atomic_load_explicit(&rec_get(t->lag_q[i])->freed,
                                             memory_order_acquire) == 0;
            if (left == 0)
                break;
            if (rc == 0) {
                failf(t, "(c) pp_pool_drain returned 0 after lag %u, but %" PRIu64 " of the %"
                      PRIu64 " entries queued before it are not freed", L, left, nq);
                break;
            }
            if (rc != PP_EBUSY) {
                failf(t, "(c) pp_pool_drain: %s", pp_err_name(rc));
                break;
            }
            double now = now_s();
            uint64_t f = frees_so_far();
            if (f != seen) {
                seen = f;
                moved = now;
            } else if (now - moved > STALL_S || now - r0 > g_timeout_s) {
                failf(t, "(c) reclamation did not resume: %" PRIu64 " of the %" PRIu64
                      " entries that died during lag %u are still not freed %.0f s after the "
                      "lagging reader quiesced, and nothing at all was freed in the last %.0f s",
                      left, nq, L, now - r0, now - moved);
                break;
            }
        }
        waited = now_s() - r0;
    }
    t->lags++;
    t->lags_full += others >= g_lag_ops;
    t->lag_released += released;
    t->lag_held_released += held_released;
    t->lag_resumed += nq;
    t->lag_others_ops += others;
    t->lag_log_lost += lost;
    if (len > t->lag_len_max)
        t->lag_len_max = len;
    if (waited > t->resume_max)
        t->resume_max = waited;
    if (g_verbose)
        printf("epoch_torture: lag %u: %.3f s, %" PRIu64 " ops of the others, %" PRIu64
               " entries died during it (%" PRIu64 " held by the lagger), none freed; %" PRIu64
               " freed %.3f s after pp_quiescent\n", L, len, others, released, held_released,
               nq, waited);
    t->next_lag_at = t->op + 64 + rndn(t, 256);
}

/* ------------------------------------------------------------------------ */
/* Workers                                                                   */
/* ------------------------------------------------------------------------ */

/* Drops everything the thread holds at the end of a round. */
static void round_cleanup(thr_t *t)
{
    while (t->nheld > 0) {
        uint64_t k = t->held[--t->nheld];
        check_full(t, k, rec_data(rec_get(k)), "held pin");
        pin_drop(t, k);
    }
    while (t->nowned > 0)
        release_owner(t, owned_take(t, t->nowned - 1));
    if (t->qsbr)
        quiesce(t);
}

/* Parks until the next round; 0 when the run is over. */
static int park(thr_t *t)
{
    pthread_mutex_lock(&g_gate_lock);
    atomic_store(&g_parked, atomic_load(&g_parked) + 1);
    pthread_cond_broadcast(&g_park_cond);
    unsigned r = g_round;
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += g_timeout_s;
    while (g_round == r && !g_exit) {
        int rc = pthread_cond_timedwait(&g_gate_cond, &g_gate_lock, &dl);
        if (rc == ETIMEDOUT && g_round == r && !g_exit) {
            printf("epoch_torture: FAIL: thread %u parked for %u s without a next round "
                   "[seed=%" PRIu64 "]\n", t->idx, g_timeout_s, g_seed);
            fflush(stdout);
            _exit(1);
        }
    }
    int go = !g_exit;
    pthread_mutex_unlock(&g_gate_lock);
    return go;
}

static void *worker(void *arg)
{
    thr_t *t = arg;
    tl_user = 1;
    /* A thread is in QSBR mode only from its first pp_quiescent on; before
     * that a pp_get pointer is valid only under an owner. */
    if (t->qsbr)
        pp_quiescent(g_pool);
    if (!park(t))   /* the start gate: every thread begins together */
        return NULL;
    for (;;) {
        while (!atomic_load_explicit(&g_round_stop, memory_order_relaxed) && t->op < g_ops) {
            /* A lag needs other threads at work. */
            if (t->lagger && !t->lagging && t->op >= t->next_lag_at &&
                atomic_load(&g_parked) < g_threads - 1)
                lag_begin(t);
            do_op(t);
            t->op++;
            atomic_store_explicit(&t->progress, t->op, memory_order_relaxed);
            if (t->qsbr && !t->lagging && rndn(t, 16) == 0)
                quiesce(t);
            if (t->qsbr)
                esc_recheck(t, t->esc, t->nesc, &t->esc_rr, "QSBR pointer");
            if (t->lagging) {
                lag_recheck(t);
                if (lag_over(t))
                    lag_end(t);
            }
        }
        if (t->lagging) {
            /* Out of operations (or the round ends): keep the section open
             * until the others have done their part, re-checking. */
            double dl = now_s() + g_timeout_s;
            while (!lag_over(t)) {
                lag_recheck(t);
                esc_recheck(t, t->esc, t->nesc, &t->esc_rr, "(a) lagging reader's pointer");
                if (now_s() > dl) {
                    failf(t, "the other threads did %" PRIu64 " of the %" PRIu64 " operations "
                          "of lag %u in %u s", others_progress(t) - t->lag_start_others,
                          g_lag_ops, t->lag_id, g_timeout_s);
                    break;
                }
                sched_yield();
            }
            lag_end(t);
        }
        round_cleanup(t);
        if (!park(t))
            break;
        /* A new round: the next lag comes soon. */
        t->next_lag_at = t->op + 32;
    }
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* End of a round: drop, drain, check                                        */
/* ------------------------------------------------------------------------ */

static void check_stats(thr_t *m, const pp_stats_t *st)
{
    cnt_t exp[PP_MAX_NODES], tot;
    memset(exp, 0, sizeof exp);
    memset(&tot, 0, sizeof tot);
    for (unsigned i = 0; i <= g_threads; i++) {
        for (unsigned n = 0; n < g_nnodes; n++) {
            const cnt_t *c = &g_thr[i].cnt[n];
            exp[n].puts += c->puts;
            exp[n].pins += c->pins;
            exp[n].unpins += c->unpins;
            exp[n].retains += c->retains;
            exp[n].releases += c->releases;
            exp[n].gets += c->gets;
        }
    }
    uint64_t frees_tot = 0;
    for (unsigned n = 0; n < g_nnodes; n++) {
        const pp_node_stats_t *s = &st->node[n];
        uint64_t frees = atomic_load(&g_frees_node[n]);
        frees_tot += frees;
        tot.puts += exp[n].puts;
        tot.pins += exp[n].pins;
        tot.unpins += exp[n].unpins;
        tot.retains += exp[n].retains;
        tot.releases += exp[n].releases;
        tot.gets += exp[n].gets;
#define EQ(field, want)                                                        \
        if (s->field != (uint64_t)(want))                                      \
            failf(m, "pp_pool_stats node %u: " #field " = %" PRIu64 ", expected %" PRIu64, \
                  n, (uint64_t)s->field, (uint64_t)(want));
        EQ(puts, exp[n].puts)
        EQ(pins, exp[n].pins)
        EQ(unpins, exp[n].unpins)
        EQ(retains, exp[n].retains)
        EQ(releases, exp[n].releases)
        EQ(gets, exp[n].gets)
        EQ(frees, frees)
        EQ(frees, exp[n].puts)
        EQ(queued, frees)
        /* Timed on a sample: the first of every PP__LAG_SAMPLE entries each
         * thread queues for the node. */
        if (s->lag_count > frees || s->lag_count < frees / PP__LAG_SAMPLE)
            failf(m, "pp_pool_stats node %u: lag_count = %" PRIu64 " for %" PRIu64 " frees",
                  n, (uint64_t)s->lag_count, frees);
        EQ(entries, 0)
        EQ(resident_bytes, 0)
        EQ(swapped_bytes, 0)
        EQ(reclaim_queue_depth, 0)
        EQ(evictions_written, 0)
        EQ(evictions_clean, 0)
        EQ(loads, 0)
#undef EQ
        if (s->reclaimer_tid != g_rtid[n])
            failf(m, "pp_pool_stats node %u: reclaimer_tid %d, was %d", n, s->reclaimer_tid,
                  g_rtid[n]);
    }
    const pp_node_stats_t *s = &st->total;
#define EQT(field, want)                                                       \
    if (s->field != (uint64_t)(want))                                          \
        failf(m, "pp_pool_stats total: " #field " = %" PRIu64 ", expected %" PRIu64, \
              (uint64_t)s->field, (uint64_t)(want));
    EQT(puts, tot.puts)
    EQT(pins, tot.pins)
    EQT(unpins, tot.unpins)
    EQT(retains, tot.retains)
    EQT(releases, tot.releases)
    EQT(gets, tot.gets)
    EQT(frees, frees_tot)
    EQT(frees, tot.puts)
    EQT(queued, frees_tot)
    if (s->lag_count > frees_tot || s->lag_count < frees_tot / PP__LAG_SAMPLE)
        failf(m, "pp_pool_stats total: lag_count = %" PRIu64 " for %" PRIu64 " frees",
              (uint64_t)s->lag_count, frees_tot);
    EQT(entries, 0)
    EQT(resident_bytes, 0)
    EQT(reclaim_queue_depth, 0)
#undef EQT
    if (tot.pins != tot.unpins)
        failf(m, "internal: program pins %" PRIu64 " != unpins %" PRIu64, tot.pins, tot.unpins);
    if (tot.puts + tot.retains != tot.releases)
        failf(m, "internal: puts %" PRIu64 " + retains %" PRIu64 " != releases %" PRIu64,
              tot.puts, tot.retains, tot.releases);
}

static void round_end(thr_t *m, pp_stats_t *st, unsigned round)
{
    /* Drop what the program still holds in shared places. */
    for (unsigned s = 0; s < NSLOTS; s++) {
        uint64_t w = atomic_exchange_explicit(&g_slots[s], 0, memory_order_acquire);
        if ((w & 0xFFFFFFFFu) != 0)
            failf(m, "internal: slot %u still borrowed at the end of round %u", s, round);
        if (w >> 32)
            release_owner(m, (w >> 32) - 1);
    }
    for (unsigned b = 0; b < NPBOX; b++) {
        uint64_t v = atomic_exchange_explicit(&g_pbox[b], 0, memory_order_acquire);
        if (v) {
            check_full(m, v - 1, rec_data(rec_get(v - 1)), "pin handed over");
            pin_drop(m, v - 1);
        }
    }
    for (unsigned b = 0; b < NRBOX; b++) {
        uint64_t v = atomic_exchange_explicit(&g_rbox[b], 0, memory_order_acquire);
        if (v)
            release_owner(m, v - 1);
    }

    /* Everything is dead and unpinned, hence queued: drains free it all.
     * Bounded by progress, as in lag_end: fails when nothing is freed for
     * STALL_S seconds, or after --timeout. */
    int rc;
    double d0 = now_s(), moved = d0;
    uint64_t seen = frees_so_far();
    for (;;) {
        rc = pp_pool_drain(g_pool, 1000);
        if (rc == 0)
            break;
        if (rc != PP_EBUSY) {
            failf(m, "pp_pool_drain at the end of round %u: %s", round, pp_err_name(rc));
            break;
        }
        double now = now_s();
        uint64_t f = frees_so_far();
        if (f != seen) {
            seen = f;
            moved = now;
        } else if (now - moved > STALL_S || now - d0 > g_timeout_s) {
            failf(m, "pp_pool_drain at the end of round %u: still PP_EBUSY after %.0f s, "
                  "nothing freed in the last %.0f s", round, now - d0, now - moved);
            break;
        }
    }
    rc = pp_pool_stats(g_pool, st);
    if (rc != 0) {
        failf(m, "pp_pool_stats: %s", pp_err_name(rc));
        return;
    }

    /* Every entry freed exactly once, on its home reclaimer, with nothing
     * of the program left on it. */
    uint64_t n = ids_used(), bad = 0;
    for (uint64_t k = 0; k < n; k++) {
        rec_t *r = &g_recs[k];
        uint32_t state = atomic_load(&r->state);
        if (state != 1)
            continue;
        uint32_t f = atomic_load(&r->freed);
        unsigned node = rec_node(r);
        int ok = f == 1 && atomic_load(&r->owners) == 0 && atomic_load(&r->owners_out) == 0 &&
                 atomic_load(&r->pins) == 0 && atomic_load(&r->pins_out) == 0 &&
                 atomic_load(&r->qsbr) == 0 && atomic_load(&r->free_tid) == g_rtid[node];
        if (!ok && bad++ < 10)
            failf(m, "round %u: entry %" PRIu64 " (ref %#" PRIx64 ", node %u) after drain: freed "
                  "%u times (on thread %d, home reclaimer %d); program owners %d (%d in calls) "
                  "pins %d (%d in calls) QSBR holders %d", round, k, rec_ref(r), node, f,
                  atomic_load(&r->free_tid), g_rtid[node], atomic_load(&r->owners),
                  atomic_load(&r->owners_out), atomic_load(&r->pins),
                  atomic_load(&r->pins_out), atomic_load(&r->qsbr));
    }
    if (bad > 10)
        failf(m, "round %u: %" PRIu64 " entries failed the end-of-round checks", round, bad);
    check_stats(m, st);
    if (!pp__pool_is_valid(g_pool))
        failf(m, "pp__pool_is_valid: an entry's state breaks entry.h's invariants");
    if (atomic_load(&g_report_lines) != 0)
        failf(m, "the pool reported %" PRIu64 " line(s) during the run, first: %s",
              atomic_load(&g_report_lines), g_report_first[0]);
}

/* ------------------------------------------------------------------------ */
/* Main                                                                      */
/* ------------------------------------------------------------------------ */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: epoch_torture [--threads N] [--ops N | --duration SEC] [--seed S]\n"
            "                     [--topology STR] [--lag-ops N] [--quarantine N]\n"
            "                     [--timeout SEC] [--verbose] [--keep-going]\n"
            "  --threads N      threads, at least 2 (default 4): thread 0 lags, odd threads\n"
            "                   are QSBR readers, the others run in the default mode\n"
            "  --ops N          operations per thread (default 20000)\n"
            "  --duration SEC   run until SEC seconds have passed instead (with --ops too:\n"
            "                   whichever comes first)\n"
            "  --seed S         seed (default: from the clock; printed)\n"
            "  --topology STR   hwloc synthetic string or XML path (default: this machine)\n"
            "  --lag-ops N      operations of the other threads during one lag (default 10000)\n"
            "  --quarantine N   freed blocks kept poisoned per node before free() (default\n"
            "                   %u; 0 in ASan builds, where ASan then reports the read)\n"
            "  --timeout SEC    fail if the run (or a wait) takes longer (default 300)\n"
            "  --verbose        one line per lag, per-operation counts, per-node figures\n"
            "  --keep-going     do not stop at the first failure (to see which checks catch\n"
            "                   a broken library; the failure counts are in the last line)\n",
            QUARANTINE_DEFAULT);
}

static double parse_secs(const char *opt, const char *s)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end != '\0' || !(v > 0 && v < 1e7)) {
        fprintf(stderr, "epoch_torture: bad value for %s: '%s'\n", opt, s);
        exit(2);
    }
    return v;
}

static uint64_t total_progress(void)
{
    uint64_t s = 0;
    for (unsigned i = 0; i < g_threads; i++)
        s += atomic_load_explicit(&g_thr[i].progress, memory_order_relaxed);
    return s;
}

/* How the failures were caught, for the last line. */
static const char *caught_by(void)
{
    static char buf[400];
    snprintf(buf, sizeof buf, "reads_of_poison=%" PRIu64 " reads_of_other_bytes=%" PRIu64
             " frees_with_qsbr_reader=%" PRIu64 " frees_in_open_lag=%" PRIu64
             " frees_while_owned_or_pinned=%" PRIu64 " failed_checks=%d",
             atomic_load(&g_read_poison), atomic_load(&g_read_other),
             atomic_load(&g_early_qsbr), atomic_load(&g_lag_early), atomic_load(&g_early_held),
             atomic_load(&g_fail_msgs));
    return buf;
}

/* The main thread waits until every worker is parked; it wakes every
 * 100 ms for the time limits and the progress line. */
static int g_tty, g_printed_progress;
static double g_last_print;

static void wait_parked(pp_stats_t *st, unsigned round)
{
    pthread_mutex_lock(&g_gate_lock);
    while (atomic_load(&g_parked) < g_threads) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 100 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&g_park_cond, &g_gate_lock, &ts);
        if (atomic_load(&g_parked) >= g_threads)
            break;
        pthread_mutex_unlock(&g_gate_lock);
        double now = now_s();
        if (g_duration_s > 0 && now - g_t0 >= g_duration_s)
            atomic_store(&g_round_stop, 1);
        if (now - g_t0 > g_timeout_s) {
            printf("epoch_torture: FAIL: threads still running after %u s [seed=%" PRIu64
                   "]; progress:", g_timeout_s, g_seed);
            for (unsigned i = 0; i < g_threads; i++)
                printf(" %u:%" PRIu64, i, atomic_load(&g_thr[i].progress));
            printf("\n");
            fflush(stdout);
            _exit(1);
        }
        if (now - g_last_print >= (g_tty ? 1.0 : 5.0)) {
            if (pp_pool_stats(g_pool, st) == 0)
                fprintf(stderr, "%sepoch_torture: %.0fs round %u ops %" PRIu64 " puts %" PRIu64
                        " frees %" PRIu64 " queue %" PRIu64 " lag %s%s", g_tty ? "\r" : "",
                        now - g_t0, round, total_progress(), st->total.puts, st->total.frees,
                        st->total.reclaim_queue_depth,
                        atomic_load(&g_lag_cur) ? "open  " : "closed", g_tty ? "" : "\n");
            g_printed_progress = 1;
            g_last_print = now;
        }
        pthread_mutex_lock(&g_gate_lock);
    }
    pthread_mutex_unlock(&g_gate_lock);
}

/* Starts the next round (more) or ends the run. */
static void open_gate(int more)
{
    pthread_mutex_lock(&g_gate_lock);
    atomic_store(&g_parked, 0);
    if (more)
        g_round++;
    else
        g_exit = 1;
    pthread_cond_broadcast(&g_gate_cond);
    pthread_mutex_unlock(&g_gate_lock);
}

int main(int argc, char **argv)
{
    int seed_given = 0, ops_given = 0, lag_given = 0, quar_given = 0;
#ifdef ET_ASAN
    g_quarantine = 0;
#else
    g_quarantine = QUARANTINE_DEFAULT;
#endif
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = NULL;
        char name[32];
        stress_opt_split(&a, &v, name, sizeof name);
#define ARG() STRESS_ARG()
        if (!strcmp(a, "--threads")) {
            g_threads = (unsigned)parse_u64(a, ARG());
        } else if (!strcmp(a, "--ops")) {
            g_ops = parse_u64(a, ARG());
            ops_given = 1;
        } else if (!strcmp(a, "--duration")) {
            g_duration_s = parse_secs(a, ARG());
        } else if (!strcmp(a, "--seed")) {
            g_seed = parse_u64(a, ARG());
            seed_given = 1;
        } else if (!strcmp(a, "--topology")) {
            g_topology = ARG();
        } else if (!strcmp(a, "--lag-ops")) {
            g_lag_ops = parse_u64(a, ARG());
            lag_given = 1;
        } else if (!strcmp(a, "--quarantine")) {
            g_quarantine = (unsigned)parse_u64(a, ARG());
            quar_given = 1;
        } else if (!strcmp(a, "--timeout")) {
            g_timeout_s = (unsigned)parse_u64(a, ARG());
        } else if (!strcmp(a, "--verbose") || !strcmp(a, "-v")) {
            g_verbose = 1;
        } else if (!strcmp(a, "--keep-going")) {
            g_keep_going = 1;
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "epoch_torture: unknown argument '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
#undef ARG
    }
    if (g_duration_s > 0 && !ops_given)
        g_ops = NONE;
    if (g_threads < 2 || g_threads > 256 || g_lag_ops < 1 || g_quarantine > (1u << 20) ||
        g_timeout_s < 1 || g_ops < 1) {
        fprintf(stderr, "epoch_torture: --threads must be 2..256, --lag-ops and --ops at least "
                        "1, --quarantine at most 1048576, --timeout at least 1\n");
        return 2;
    }
    if (!seed_given) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t x = (uint64_t)ts.tv_sec * 1000003u ^ (uint64_t)ts.tv_nsec ^
                     ((uint64_t)getpid() << 32);
        g_seed = splitmix64(&x) % 1000000000u;
    }

    char opsarg[64] = "", lagarg[48] = "", quararg[48] = "";
    if (g_ops != NONE)
        snprintf(opsarg, sizeof opsarg, " --ops %" PRIu64, g_ops);
    if (g_duration_s > 0)
        snprintf(opsarg + strlen(opsarg), sizeof opsarg - strlen(opsarg), " --duration %g",
                 g_duration_s);
    if (lag_given)
        snprintf(lagarg, sizeof lagarg, " --lag-ops %" PRIu64, g_lag_ops);
    if (quar_given)
        snprintf(quararg, sizeof quararg, " --quarantine %u", g_quarantine);
    char opsdesc[32];
    if (g_ops == NONE)
        snprintf(opsdesc, sizeof opsdesc, "unlimited");
    else
        snprintf(opsdesc, sizeof opsdesc, "%" PRIu64, g_ops);
    printf("epoch_torture: seed=%" PRIu64 " threads=%u ops=%s duration=%g topology=%s "
           "lag_ops=%" PRIu64 " quarantine=%u%s\n", g_seed, g_threads, opsdesc, g_duration_s,
           g_topology ? g_topology : "(this machine)", g_lag_ops, g_quarantine,
#ifdef ET_ASAN
           " (ASan build: freed blocks go straight to free())"
#else
           ""
#endif
    );
    printf("epoch_torture: replay: epoch_torture --threads %u%s --seed %" PRIu64 "%s%s%s%s%s%s\n",
           g_threads, opsarg, g_seed, g_topology ? " --topology '" : "",
           g_topology ? g_topology : "", g_topology ? "'" : "", lagarg, quararg,
           g_keep_going ? " --keep-going" : "");
    fflush(stdout);

    memset(g_poison, POISON, sizeof g_poison);
    g_recs = calloc(REC_CAP, sizeof *g_recs);
    g_thr = calloc(g_threads + 1, sizeof *g_thr);
    if (g_recs == NULL || g_thr == NULL)
        oom();
    tl_user = 1;

    pp_options_t opt = PP_OPTIONS_INIT;
    opt.topology = g_topology;
    opt.report = report_cb;
    int rc = pp_pool_create(&opt, &g_pool);
    if (rc != 0) {
        printf("epoch_torture: FAIL: pp_pool_create(topology %s): %s [seed=%" PRIu64
               " thread=main]\n", g_topology ? g_topology : "NULL", pp_err_name(rc), g_seed);
        return 1;
    }
    pp_stats_t *st = calloc(1, sizeof *st);
    if (st == NULL)
        oom();
    thr_t *m = &g_thr[g_threads];
    m->idx = g_threads;
    m->rng = mix3(g_seed, 0, 0x3A1Full);
    rc = pp_pool_stats(g_pool, st);
    if (rc != 0 || st->nodes < 1 || st->nodes > PP_MAX_NODES) {
        failf(m, "pp_pool_stats after create: %s, nodes %u", pp_err_name(rc), st->nodes);
        return 1;
    }
    g_nnodes = st->nodes;
    for (unsigned n = 0; n < g_nnodes; n++) {
        g_rtid[n] = st->node[n].reclaimer_tid;
        if (g_rtid[n] <= 0)
            failf(m, "node %u: reclaimer_tid %d", n, g_rtid[n]);
        pthread_mutex_init(&g_quar[n].lock, NULL);
        if (g_quarantine > 0) {
            g_quar[n].p = calloc(g_quarantine, sizeof *g_quar[n].p);
            g_quar[n].size = calloc(g_quarantine, sizeof *g_quar[n].size);
            g_quar[n].id = calloc(g_quarantine, sizeof *g_quar[n].id);
            if (!g_quar[n].p || !g_quar[n].size || !g_quar[n].id)
                oom();
        }
    }
    printf("epoch_torture: pool: %u node(s), topology_is_this_system=%d\n", g_nnodes,
           st->topology_is_this_system);
    fflush(stdout);

    for (unsigned i = 0; i < g_threads; i++) {
        thr_t *t = &g_thr[i];
        t->idx = i;
        t->rng = mix3(g_seed, i + 1, 0xE90C4ull);
        t->lagger = i == 0;
        t->qsbr = i == 0 || (i & 1);
        t->next_lag_at = 32;
        if (t->lagger) {
            t->lag_q = calloc(LAGLOG_CAP, sizeof *t->lag_q);
            if (t->lag_q == NULL)
                oom();
        }
    }
    g_t0 = now_s();
    g_tty = isatty(2);
    for (unsigned i = 0; i < g_threads; i++) {
        rc = pthread_create(&g_thr[i].th, NULL, worker, &g_thr[i]);
        if (rc != 0) {
            fprintf(stderr, "epoch_torture: pthread_create: %s\n", strerror(rc));
            return 2;
        }
    }

    /* The start gate: every thread is parked, then all begin together. */
    wait_parked(st, 0);
    g_t0 = now_s();
    g_last_print = g_t0;
    open_gate(1);

    /* Rounds. */
    unsigned round = 0;
    for (;;) {
        wait_parked(st, round);
        if (atomic_load(&g_failed)) {
            if (g_printed_progress && g_tty)
                fprintf(stderr, "\n");
            printf("epoch_torture: FAIL seed=%" PRIu64 " ops=%" PRIu64 " threads=%u seconds=%.2f "
                   "rounds=%u: failed during the run, final checks skipped; caught by: "
                   "%s\n", g_seed, total_progress(), g_threads, now_s() - g_t0, round + 1,
                   caught_by());
            fflush(stdout);
            _exit(1);   /* the pool is in an unknown state: do not tear it down */
        }
        round_end(m, st, round);
        int more = !atomic_load(&g_failed) &&
                   !(g_duration_s > 0 && now_s() - g_t0 >= g_duration_s);
        if (more) {
            more = 0;
            for (unsigned i = 0; i < g_threads; i++)
                more = more || g_thr[i].op < g_ops;
        }
        if (more) {
            /* Next round: fresh records (every entry is freed). */
            memset(g_recs, 0, (size_t)REC_CAP * sizeof *g_recs);
            atomic_store(&g_nids, 0);
            atomic_store(&g_lag_log_n, 0);
            atomic_store(&g_round_stop, 0);
        }
        open_gate(more);
        round++;
        if (!more)
            break;
    }
    for (unsigned i = 0; i < g_threads; i++)
        pthread_join(g_thr[i].th, NULL);
    double secs = now_s() - g_t0;
    if (g_printed_progress && g_tty)
        fprintf(stderr, "\n");

    /* Destroy: nothing is left, so nothing is reported or freed. */
    uint64_t frees_before = 0;
    for (unsigned n = 0; n < g_nnodes; n++)
        frees_before += atomic_load(&g_frees_node[n]);
    uint64_t lines_before = atomic_load(&g_report_lines);
    rc = pp_pool_destroy(g_pool);
    if (rc != 0)
        failf(m, "pp_pool_destroy: %s", pp_err_name(rc));
    uint64_t frees_after = 0;
    for (unsigned n = 0; n < g_nnodes; n++)
        frees_after += atomic_load(&g_frees_node[n]);
    if (frees_after != frees_before)
        failf(m, "pp_pool_destroy called the free function %" PRIu64 " more time(s)",
              frees_after - frees_before);
    if (atomic_load(&g_report_lines) != lines_before)
        failf(m, "pp_pool_destroy reported %" PRIu64 " line(s) though nothing was left: %s",
              atomic_load(&g_report_lines) - lines_before, g_report_first[0]);
    /* The quarantined blocks: still poison, then freed for good. */
    for (unsigned n = 0; n < g_nnodes; n++) {
        quar_t *q = &g_quar[n];
        for (unsigned i = 0; i < q->n; i++) {
            unsigned j = (q->head + i) % (g_quarantine ? g_quarantine : 1);
            if (poison_intact(q->p[j], q->size[j]) >= 0)
                failf(m, "freed block of entry %" PRIu64 " was written after its free",
                      q->id[j]);
            free(q->p[j]);
        }
        atomic_fetch_add(&g_quar_checked, q->n);
        free(q->p);
        free(q->size);
        free(q->id);
    }

    /* Figures. */
    cnt_t tot;
    memset(&tot, 0, sizeof tot);
    uint64_t opsum[OP_N] = { 0 }, full = 0, quick = 0, stale = 0, ph = 0, oh = 0, misses = 0;
    uint64_t skips = 0;
    for (unsigned i = 0; i <= g_threads; i++) {
        thr_t *t = &g_thr[i];
        for (unsigned n = 0; n < g_nnodes; n++) {
            tot.puts += t->cnt[n].puts;
            tot.pins += t->cnt[n].pins;
            tot.gets += t->cnt[n].gets;
            tot.releases += t->cnt[n].releases;
        }
        for (int o = 0; o < OP_N; o++)
            opsum[o] += t->opcount[o];
        full += t->full_checks;
        quick += t->quick_checks;
        stale += t->stale_checks;
        ph += t->pin_handoffs;
        oh += t->owner_handoffs;
        misses += t->borrow_misses;
        skips += t->budget_skips;
    }
    thr_t *lg = &g_thr[0];
    if (lg->lags_full == 0)
        failf(m, "the lagging reader never kept its section open for --lag-ops (%" PRIu64
              ") operations of the other threads (%" PRIu64 " lags): too few operations for "
              "this --lag-ops", g_lag_ops, lg->lags);
    else if (lg->lag_released == 0 || lg->lag_resumed == 0)
        failf(m, "lag checks were vacuous: %" PRIu64 " lags, %" PRIu64 " entries died during "
              "them, %" PRIu64 " checked after", lg->lags, lg->lag_released, lg->lag_resumed);
    if (g_verbose) {
        printf("epoch_torture: ops:");
        for (int o = 0; o < OP_N; o++)
            printf(" %s=%" PRIu64, op_names[o], opsum[o]);
        printf("\nepoch_torture: checks: full=%" PRIu64 " quick=%" PRIu64 " stale=%" PRIu64
               " quarantine=%" PRIu64 " pin_handoffs=%" PRIu64 " owner_handoffs=%" PRIu64
               " borrow_misses=%" PRIu64 " budget_skips=%" PRIu64 "\n", full, quick, stale,
               atomic_load(&g_quar_checked), ph, oh, misses, skips);
        printf("epoch_torture: lags=%" PRIu64 " (full %" PRIu64 ") others_ops=%" PRIu64 " died=%" PRIu64
               " (held by the lagger %" PRIu64 ", not logged %" PRIu64 ") freed_after=%" PRIu64
               " longest=%.3fs resume_max=%.3fs\n", lg->lags, lg->lags_full, lg->lag_others_ops,
               lg->lag_released, lg->lag_held_released, lg->lag_log_lost, lg->lag_resumed,
               lg->lag_len_max, lg->resume_max);
        for (unsigned n = 0; n < g_nnodes; n++)
            printf("epoch_torture: node %u: puts %" PRIu64 " frees %" PRIu64 " grace_polls %"
                   PRIu64 " lag p50 %.1f us p99 %.1f us max %.1f us reclaimer tid %d\n", n,
                   st->node[n].puts, st->node[n].frees, st->node[n].grace_polls,
                   st->node[n].lag_p50_ns / 1e3, st->node[n].lag_p99_ns / 1e3,
                   st->node[n].lag_max_ns / 1e3, g_rtid[n]);
    }
    int failed = atomic_load(&g_failed);
    printf("epoch_torture: %s seed=%" PRIu64 " ops=%" PRIu64 " threads=%u seconds=%.2f "
           "rounds=%u nodes=%u lags=%" PRIu64 " full_lags=%" PRIu64 " lag_died=%" PRIu64 " lag_freed_after=%" PRIu64
           " lag_max_s=%.3f resume_max_s=%.3f puts=%" PRIu64 " frees=%" PRIu64 " pins=%" PRIu64
           " gets=%" PRIu64 " releases=%" PRIu64 " full_checks=%" PRIu64 " stale_checks=%" PRIu64
           " lag_p99_us=%.1f lag_max_us=%.1f\n",
           failed ? "FAIL" : "PASS", g_seed, total_progress(), g_threads, secs, round, g_nnodes,
           lg->lags, lg->lags_full, lg->lag_released, lg->lag_resumed, lg->lag_len_max,
           lg->resume_max,
           st->total.puts, st->total.frees, st->total.pins, st->total.gets, st->total.releases,
           full, stale, st->total.lag_p99_ns / 1e3, st->total.lag_max_ns / 1e3);
    if (failed)
        printf("epoch_torture: caught by: %s\n", caught_by());
    fflush(stdout);
    free(lg->lag_q);
    free(g_recs);
    free(g_thr);
    free(st);
    return failed ? 1 : 0;
}
