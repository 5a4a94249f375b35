/*
 * pinstress -- randomized multithreaded torture test for pinpool.
 *
 *   pinstress [--threads N] [--ops N] [--seed S] [--topology STR]
 *             [--track] [--qsbr] [--slots N] [--timeout SEC] [--verbose]
 *
 * T worker threads run random operations on one pool and check every
 * documented guarantee they can observe.  The seed and the parameters are
 * printed first so that a failure can be replayed; exit status 0 means
 * every check passed, 1 that at least one failed (each failure prints what,
 * the seed and the thread).
 *
 * Sharing protocol (the program never calls the pool with a ref it does not
 * legitimately hold, except the deliberately stale and invalid refs):
 *
 *  - Every entry the program puts gets a program-wide id k and a record
 *    rec(k) (ref, size, content version, and the program's own count of
 *    owners and pins it holds).  Contents are a function of (seed, k,
 *    version): the first 8 bytes hold k, the rest come from splitmix64.
 *  - An OWNER is held either privately by one thread (its `owned` list) or
 *    by a shared slot.  A slot is one atomic word: (k + 1) << 32 | borrowers.
 *    A thread BORROWS a slot's owner by incrementing the borrower count
 *    (CAS, only while the slot is non-empty) and may then pin, get, stat,
 *    prefetch or retain the entry; the slot's owner can only be TAKEN (CAS
 *    from exactly (k + 1) << 32 to 0) while nobody borrows it, so a borrowed
 *    entry always has at least one owner.  PUBLISH moves a private owner
 *    into an empty slot, TAKE moves a slot's owner to the taker's list.
 *  - A pin, once taken, is a private "held pin" that may outlive every
 *    owner; it may be handed to another thread through a mailbox (atomic
 *    pointer exchange) and unpinned there.
 *  - rec(k).owners / rec(k).pins are decremented BEFORE pp_release /
 *    pp_unpin and incremented before pp_retain / pp_pin, so the free
 *    function (which must run after the matching release / unpin) sees
 *    them at 0 -- otherwise the pool freed an entry that is still owned or
 *    pinned.
 *  - Contents are rewritten (version + 1, PP_PIN_WRITE) only while the
 *    entry was never made visible to another thread (rec.shared == 0).
 *  - Stale refs: any rec whose free function has run (rec.frees == 1,
 *    read with acquire) names a reclaimed entry; every call with it must
 *    fail with PP_ESTALE (pp_stat included: it describes an entry only
 *    until the entry is queued for reclamation).
 *  - With --qsbr, threads are in QSBR mode: pointers from pp_get() are kept
 *    (and re-verified) after the owner is dropped, until the next
 *    pp_quiescent(); rec.qsbr_holders lets the free function check that
 *    the pool waited for that quiescent state.
 *
 * At the end everything still owned or pinned is dropped, pp_pool_drain()
 * must succeed, every entry must have been freed exactly once (on its home
 * node's reclaimer thread), and pp_pool_stats() must match the program's
 * own counts exactly, per node and in total.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pinpool.h>

#include "internal.h" /* pp__pool_is_valid */

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------------------ */
/* Parameters and globals                                                    */
/* ------------------------------------------------------------------------ */

#define OWN_CAP   32    /* private owners per thread */
#define HELD_CAP  8     /* held pins per thread */
#define ESC_CAP   32    /* QSBR escaped pointers per thread */
#define MAILBOXES 64    /* pin hand-off mailboxes */
#define MAX_BATCH 8     /* refs per pin_many */
#define CHUNK_BITS 16
#define CHUNK (1u << CHUNK_BITS)
#define MAX_FAIL_MSGS 20

static unsigned g_threads = 4;
static uint64_t g_ops = 200000;
static uint64_t g_seed;
static const char *g_topology;
static int g_track, g_qsbr, g_verbose;
static unsigned g_nslots = 1024;
static unsigned g_timeout_s = 300;

static pp_pool_t *g_pool;
static unsigned g_nnodes;

static atomic_int g_failed;
static atomic_int g_stop;
static atomic_int g_fail_msgs;
static pthread_mutex_t g_print_lock = PTHREAD_MUTEX_INITIALIZER;

/* Per-entry record. */
typedef struct rec {
    _Atomic uint64_t ref;
    _Atomic uint32_t state;        /* 0 unused, 1 putting, 2 put ok, 3 put failed */
    _Atomic uint32_t size;
    _Atomic uint32_t version;
    _Atomic uint32_t node;
    _Atomic int32_t owners;        /* owners the program holds */
    _Atomic int32_t pins;          /* pins the program holds */
    _Atomic int32_t qsbr_holders;  /* QSBR threads still using a pp_get pointer */
    _Atomic uint32_t shared;       /* ever visible to another thread */
    _Atomic uint32_t frees;        /* free function calls */
    _Atomic int32_t free_tid;      /* thread that ran the free function */
} rec_t;

static _Atomic(rec_t *) *g_chunks;
static size_t g_nchunks;
static _Atomic uint64_t g_nids;     /* ids handed out */
static uint64_t g_max_ids;

static _Atomic uint64_t *g_slots;

typedef struct hpin { uint64_t k; void *ptr; unsigned origin; } hpin_t;
static _Atomic(hpin_t *) g_mbox[MAILBOXES];
static _Atomic int64_t *g_outstanding;   /* pins taken by thread i, not yet dropped */

static _Atomic uint64_t g_frees_total;
static _Atomic uint64_t g_frees_node[PP_MAX_NODES];
static _Atomic uint64_t g_report_lines;
static char g_report_first[8][256];
static atomic_int g_report_saved;

static const pp_type_t g_type;      /* defined below (needs the free fn) */

/* ------------------------------------------------------------------------ */
/* Counters                                                                  */
/* ------------------------------------------------------------------------ */

typedef struct cnt {
    uint64_t puts, pins, unpins, retains, releases, gets;
} cnt_t;

enum { OP_PUT, OP_PUBLISH, OP_TAKE, OP_BORROW, OP_OWNED, OP_RELEASE,
       OP_HELD, OP_STALE, OP_QUIESCE, OP_N };
static const char *const op_names[OP_N] = {
    "put", "publish", "take", "borrow", "owned", "release", "held", "stale",
    "quiesce"
};

typedef struct esc { uint64_t k; const void *ptr; } esc_t;

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
    uint64_t writes, handoffs, pin_many_calls, borrow_misses;
    uint64_t failed_many_live;    /* live refs before the stale one in failed pin_many calls */
    _Atomic uint64_t progress;
    int explicit_exit;
} thr_t;

static thr_t *g_thr;           /* g_threads workers + main at the end */

/* ------------------------------------------------------------------------ */
/* Failure reporting                                                         */
/* ------------------------------------------------------------------------ */

static void failf(const thr_t *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void failf(const thr_t *t, const char *fmt, ...)
{
    atomic_store(&g_failed, 1);
    atomic_store(&g_stop, 1);
    if (atomic_fetch_add(&g_fail_msgs, 1) >= MAX_FAIL_MSGS)
        return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    char who[64];
    if (t == NULL)
        snprintf(who, sizeof who, "reclaimer tid %ld", (long)syscall(SYS_gettid));
    else if (t->idx == g_threads)
        snprintf(who, sizeof who, "main");
    else
        snprintf(who, sizeof who, "%u", t->idx);
    pthread_mutex_lock(&g_print_lock);
    if (t != NULL)
        fprintf(stdout, "pinstress: FAIL: %s [seed=%" PRIu64 " thread=%s op=%" PRIu64 "]\n",
                msg, g_seed, who, t->op);
    else
        fprintf(stdout, "pinstress: FAIL: %s [seed=%" PRIu64 " thread=%s]\n", msg, g_seed, who);
    fflush(stdout);
    pthread_mutex_unlock(&g_print_lock);
}

#define CHECK_RC(t, rc, want, what, k)                                        \
    do {                                                                       \
        int rc__ = (rc);                                                       \
        if (rc__ != (want))                                                    \
            failf((t), "%s: got %s (%d), expected %s, entry %" PRIu64,         \
                  (what), pp_err_name(rc__), rc__, pp_err_name(want),          \
                  (uint64_t)(k));                                              \
    } while (0)

/* ------------------------------------------------------------------------ */
/* PRNG and contents                                                         */
/* ------------------------------------------------------------------------ */

static inline uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static inline uint64_t mix3(uint64_t a, uint64_t b, uint64_t c)
{
    uint64_t x = a ^ (b * 0xD6E8FEB86659FD93ull) ^ (c * 0xA0761D6478BD642Full);
    return splitmix64(&x);
}

static inline uint64_t rnd(thr_t *t) { return splitmix64(&t->rng); }
static inline unsigned rndn(thr_t *t, unsigned n) { return (unsigned)(rnd(t) % n); }

static size_t entry_size(uint64_t k)
{
    return 16 + (size_t)(mix3(g_seed, k, 0x5157u) % (4096 - 16 + 1));
}

static void fill(unsigned char *p, size_t size, uint64_t k, uint32_t ver)
{
    memcpy(p, &k, 8);
    uint64_t x = mix3(g_seed, k, 0x1000000ull + ver);
    for (size_t i = 8; i < size; i += 8) {
        uint64_t v = splitmix64(&x);
        size_t n = size - i < 8 ? size - i : 8;
        memcpy(p + i, &v, n);
    }
}

/* Returns the offset of the first wrong byte, or -1. */
static long verify(const unsigned char *p, size_t size, uint64_t k, uint32_t ver)
{
    uint64_t h;
    memcpy(&h, p, 8);
    if (h != k) {
        for (long i = 0; i < 8; i++)
            if (p[i] != ((const unsigned char *)&k)[i])
                return i;
    }
    uint64_t x = mix3(g_seed, k, 0x1000000ull + ver);
    for (size_t i = 8; i < size; i += 8) {
        uint64_t v = splitmix64(&x);
        size_t n = size - i < 8 ? size - i : 8;
        if (memcmp(p + i, &v, n) != 0) {
            for (size_t j = 0; j < n; j++)
                if (p[i + j] != ((const unsigned char *)&v)[j])
                    return (long)(i + j);
        }
    }
    return -1;
}

/* ------------------------------------------------------------------------ */
/* Records                                                                   */
/* ------------------------------------------------------------------------ */

static rec_t *rec_get(uint64_t k)
{
    if (k >= g_max_ids)
        return NULL;
    rec_t *c = atomic_load_explicit(&g_chunks[k >> CHUNK_BITS], memory_order_acquire);
    return c ? &c[k & (CHUNK - 1)] : NULL;
}

static uint64_t rec_new(thr_t *t, rec_t **out)
{
    uint64_t k = atomic_fetch_add_explicit(&g_nids, 1, memory_order_relaxed);
    if (k >= g_max_ids) {
        failf(t, "internal: more ids than the bound %" PRIu64, g_max_ids);
        *out = NULL;
        return k;
    }
    size_t ci = (size_t)(k >> CHUNK_BITS);
    rec_t *c = atomic_load_explicit(&g_chunks[ci], memory_order_acquire);
    if (c == NULL) {
        rec_t *n = calloc(CHUNK, sizeof *n);
        if (n == NULL) {
            fprintf(stderr, "pinstress: out of memory\n");
            exit(2);
        }
        rec_t *exp = NULL;
        /* release: the zeroed records are visible to whoever loads it */
        if (atomic_compare_exchange_strong_explicit(&g_chunks[ci], &exp, n,
                                                    memory_order_acq_rel,
                                                    memory_order_acquire))
            c = n;
        else {
            free(n);
            c = exp;
        }
    }
    *out = &c[k & (CHUNK - 1)];
    return k;
}

static inline pp_ref_t rec_ref(rec_t *r)
{
    return atomic_load_explicit(&r->ref, memory_order_relaxed);
}

static inline unsigned rec_node(rec_t *r)
{
    return atomic_load_explicit(&r->node, memory_order_relaxed);
}

/* ------------------------------------------------------------------------ */
/* The type's free function (runs on a reclaimer thread)                     */
/* ------------------------------------------------------------------------ */

static void stress_free(void *data, size_t size, void *ctx)
{
    if (ctx != (void *)&g_nids)
        failf(NULL, "free function got ctx %p, expected %p", ctx, (void *)&g_nids);
    if (data == NULL || size < 16) {
        failf(NULL, "free function called with data %p size %zu", data, size);
        return;
    }
    uint64_t k;
    memcpy(&k, data, 8);
    rec_t *r = k < atomic_load(&g_nids) ? rec_get(k) : NULL;
    if (r == NULL) {
        failf(NULL, "free function: buffer %p (size %zu) names no entry (header %#" PRIx64 ")",
              data, size, k);
        return;
    }
    uint32_t prev = atomic_fetch_add_explicit(&r->frees, 1, memory_order_acq_rel);
    if (prev != 0) {
        failf(NULL, "entry %" PRIu64 " (ref %#" PRIx64 ") freed %u times",
              k, rec_ref(r), prev + 1);
        return;
    }
    if (atomic_load(&r->state) != 2)
        failf(NULL, "entry %" PRIu64 " freed but its pp_put never returned success", k);
    int32_t o = atomic_load(&r->owners), p = atomic_load(&r->pins);
    int32_t q = atomic_load(&r->qsbr_holders);
    if (o != 0)
        failf(NULL, "entry %" PRIu64 " (ref %#" PRIx64 ") freed while the program holds %d owner(s)",
              k, rec_ref(r), o);
    if (p != 0)
        failf(NULL, "entry %" PRIu64 " (ref %#" PRIx64 ") freed while the program holds %d pin(s)",
              k, rec_ref(r), p);
    if (q != 0)
        failf(NULL, "entry %" PRIu64 " (ref %#" PRIx64 ") freed while %d QSBR thread(s) still use its "
              "pp_get pointer (before their pp_quiescent)", k, rec_ref(r), q);
    if (size != atomic_load(&r->size))
        failf(NULL, "entry %" PRIu64 " freed with size %zu, put with %u", k, size,
              atomic_load(&r->size));
    else {
        long off = verify(data, size, k, atomic_load(&r->version));
        if (off >= 0)
            failf(NULL, "entry %" PRIu64 " corrupted when freed: byte %ld of %zu is %#x",
                  k, off, size, ((unsigned char *)data)[off]);
    }
    atomic_store(&r->free_tid, (int32_t)syscall(SYS_gettid));
    unsigned node = rec_node(r);
    if (node < PP_MAX_NODES)
        atomic_fetch_add(&g_frees_node[node], 1);
    atomic_fetch_add(&g_frees_total, 1);
    memset(data, 0xDD, size);
    free(data);
}

static const pp_type_t g_type = {
    "stress", stress_free, NULL, NULL, (void *)&g_nids, 0u
};

static void report_cb(const char *line, void *ctx)
{
    (void)ctx;
    atomic_fetch_add(&g_report_lines, 1);
    pthread_mutex_lock(&g_print_lock);
    int i = atomic_fetch_add(&g_report_saved, 1);
    if (i < 8)
        snprintf(g_report_first[i], sizeof g_report_first[i], "%s", line);
    pthread_mutex_unlock(&g_print_lock);
}

/* ------------------------------------------------------------------------ */
/* Checked wrappers                                                          */
/* ------------------------------------------------------------------------ */

static void check_contents(thr_t *t, uint64_t k, const void *ptr, const char *where)
{
    rec_t *r = rec_get(k);
    if (ptr == NULL) {
        failf(t, "%s: NULL data pointer for entry %" PRIu64, where, k);
        return;
    }
    size_t size = atomic_load_explicit(&r->size, memory_order_relaxed);
    uint32_t ver = atomic_load_explicit(&r->version, memory_order_relaxed);
    long off = verify(ptr, size, k, ver);
    if (off >= 0)
        failf(t, "%s: entry %" PRIu64 " (ref %#" PRIx64 ", size %zu, version %u) corrupted: "
              "byte %ld is %#x%s", where, k, rec_ref(r), size, ver, off,
              ((const unsigned char *)ptr)[off],
              ((const unsigned char *)ptr)[off] == 0xDD ? " (poisoned: freed)" : "");
}

/* Pins entry k, which the caller holds an owner of (private or borrowed). */
static void *pin1(thr_t *t, uint64_t k, unsigned flags)
{
    rec_t *r = rec_get(k);
    atomic_fetch_add(&r->pins, 1);
    void *d = NULL;
    int rc = pp_pin(g_pool, rec_ref(r), flags, &d);
    if (rc != 0) {
        atomic_fetch_sub(&r->pins, 1);
        failf(t, "pp_pin(flags %#x) of an owned entry %" PRIu64 " (ref %#" PRIx64 "): %s",
              flags, k, rec_ref(r), pp_err_name(rc));
        return NULL;
    }
    atomic_fetch_add_explicit(&g_outstanding[t->idx], 1, memory_order_relaxed);
    t->cnt[rec_node(r)].pins++;
    check_contents(t, k, d, "after pp_pin");
    return d;
}

/* Drops one pin on k taken by thread `origin`; ptr is what the pin gave. */
static void unpin1(thr_t *t, uint64_t k, const void *ptr, unsigned origin)
{
    rec_t *r = rec_get(k);
    check_contents(t, k, ptr, "before pp_unpin");
    atomic_fetch_sub(&r->pins, 1);
    int rc = pp_unpin(g_pool, rec_ref(r));
    if (rc != 0)
        failf(t, "pp_unpin of a pinned entry %" PRIu64 " (ref %#" PRIx64 "): %s",
              k, rec_ref(r), pp_err_name(rc));
    else
        t->cnt[rec_node(r)].unpins++;
    /* release: the unpin is complete before the pin's thread sees 0 */
    atomic_fetch_sub_explicit(&g_outstanding[origin], 1, memory_order_release);
}

static void stat_live(thr_t *t, uint64_t k, int expect_escaped)
{
    rec_t *r = rec_get(k);
    pp_entry_info_t in;
    memset(&in, 0xA5, sizeof in);
    int rc = pp_stat(g_pool, rec_ref(r), &in);
    if (rc != 0) {
        failf(t, "pp_stat of a live entry %" PRIu64 ": %s", k, pp_err_name(rc));
        return;
    }
    if (in.size != atomic_load(&r->size) || in.node != rec_node(r) || in.type != &g_type ||
        in.owners < 1 || in.pins > PP_MAX_PINS ||
        !(in.state & PP_STATE_RESIDENT) || (in.state & PP_STATE_DEAD) ||
        (expect_escaped && !(in.state & PP_STATE_ESCAPED)))
        failf(t, "pp_stat of live entry %" PRIu64 " (ref %#" PRIx64 "): size %zu (put %u) "
              "node %u (expected %u) type %p owners %u pins %u state %#x%s", k, rec_ref(r),
              in.size, atomic_load(&r->size), in.node, rec_node(r), (const void *)in.type,
              in.owners, in.pins, in.state, expect_escaped ? " (expected ESCAPED)" : "");
}

/* ------------------------------------------------------------------------ */
/* Private owners                                                            */
/* ------------------------------------------------------------------------ */

static void release_owner(thr_t *t, uint64_t k)
{
    rec_t *r = rec_get(k);
    int32_t before = atomic_fetch_sub(&r->owners, 1);
    if (before < 1)
        failf(t, "internal: entry %" PRIu64 " owner count %d", k, before);
    int rc = pp_release(g_pool, rec_ref(r));
    if (rc != 0)
        failf(t, "pp_release of an owned entry %" PRIu64 " (ref %#" PRIx64 "): %s",
              k, rec_ref(r), pp_err_name(rc));
    else
        t->cnt[rec_node(r)].releases++;
}

static void release_owned_at(thr_t *t, int i)
{
    uint64_t k = t->owned[i];
    t->owned[i] = t->owned[--t->nowned];
    release_owner(t, k);
}

static void owned_push(thr_t *t, uint64_t k)
{
    if (t->nowned == OWN_CAP)
        release_owned_at(t, (int)rndn(t, OWN_CAP));
    t->owned[t->nowned++] = k;
}

/* Caller holds an owner of k (private or borrowed): add a private one. */
static void retain_owner(thr_t *t, uint64_t k)
{
    rec_t *r = rec_get(k);
    atomic_fetch_add(&r->owners, 1);
    int rc = pp_retain(g_pool, rec_ref(r));
    if (rc != 0) {
        atomic_fetch_sub(&r->owners, 1);
        failf(t, "pp_retain of an owned entry %" PRIu64 ": %s", k, pp_err_name(rc));
        return;
    }
    t->cnt[rec_node(r)].retains++;
    owned_push(t, k);
}

/* ------------------------------------------------------------------------ */
/* Held pins                                                                 */
/* ------------------------------------------------------------------------ */

static void held_drop_at(thr_t *t, int i)
{
    hpin_t *h = t->held[i];
    t->held[i] = t->held[--t->nheld];
    unpin1(t, h->k, h->ptr, h->origin);
    free(h);
}

static void held_push(thr_t *t, hpin_t *h)
{
    if (t->nheld == HELD_CAP)
        held_drop_at(t, (int)rndn(t, HELD_CAP));
    t->held[t->nheld++] = h;
}

static void hold_pin(thr_t *t, uint64_t k, void *ptr)
{
    hpin_t *h = malloc(sizeof *h);
    if (h == NULL) {
        fprintf(stderr, "pinstress: out of memory\n");
        exit(2);
    }
    h->k = k;
    h->ptr = ptr;
    h->origin = t->idx;
    held_push(t, h);
}

/* ------------------------------------------------------------------------ */
/* QSBR escaped pointers                                                     */
/* ------------------------------------------------------------------------ */

static void quiesce(thr_t *t)
{
    for (int i = 0; i < t->nesc; i++) {
        check_contents(t, t->esc[i].k, t->esc[i].ptr, "QSBR pp_get pointer before pp_quiescent");
        atomic_fetch_sub(&rec_get(t->esc[i].k)->qsbr_holders, 1);
    }
    t->nesc = 0;
    pp_quiescent(g_pool);
    t->opcount[OP_QUIESCE]++;
}

/* pp_get on k (caller holds an owner); keeps the pointer under QSBR. */
static void get1(thr_t *t, uint64_t k)
{
    rec_t *r = rec_get(k);
    void *d = NULL;
    int rc = pp_get(g_pool, rec_ref(r), &d);
    if (rc != 0) {
        failf(t, "pp_get of an owned entry %" PRIu64 ": %s", k, pp_err_name(rc));
        return;
    }
    t->cnt[rec_node(r)].gets++;
    check_contents(t, k, d, "after pp_get");
    if (g_qsbr) {
        if (t->nesc == ESC_CAP)
            quiesce(t);
        atomic_fetch_add(&r->qsbr_holders, 1);
        t->esc[t->nesc].k = k;
        t->esc[t->nesc].ptr = d;
        t->nesc++;
    }
}

/* ------------------------------------------------------------------------ */
/* Slots                                                                     */
/* ------------------------------------------------------------------------ */

static int64_t borrow(thr_t *t, unsigned s)
{
    uint64_t w = atomic_load_explicit(&g_slots[s], memory_order_relaxed);
    for (;;) {
        if ((w >> 32) == 0) {
            t->borrow_misses++;
            return -1;
        }
        /* acquire: pairs with the publisher's release (record and contents) */
        if (atomic_compare_exchange_weak_explicit(&g_slots[s], &w, w + 1,
                                                  memory_order_acquire,
                                                  memory_order_relaxed))
            return (int64_t)((w >> 32) - 1);
    }
}

static void unborrow(unsigned s)
{
    /* release: everything done under the borrow precedes a later take */
    atomic_fetch_sub_explicit(&g_slots[s], 1, memory_order_release);
}

static void op_publish(thr_t *t)
{
    if (t->nowned == 0)
        return;
    int i = (int)rndn(t, (unsigned)t->nowned);
    uint64_t k = t->owned[i];
    atomic_store(&rec_get(k)->shared, 1);
    for (int tries = 0; tries < 4; tries++) {
        unsigned s = rndn(t, g_nslots);
        uint64_t exp = 0;
        /* release: the record, contents and owner are handed over */
        if (atomic_compare_exchange_strong_explicit(&g_slots[s], &exp, (k + 1) << 32,
                                                    memory_order_release,
                                                    memory_order_relaxed)) {
            t->owned[i] = t->owned[--t->nowned];
            return;
        }
    }
}

static void op_take(thr_t *t)
{
    unsigned s = rndn(t, g_nslots);
    uint64_t w = atomic_load_explicit(&g_slots[s], memory_order_relaxed);
    if ((w >> 32) == 0 || (w & 0xFFFFFFFFu) != 0)
        return;
    if (atomic_compare_exchange_strong_explicit(&g_slots[s], &w, 0,
                                                memory_order_acq_rel,
                                                memory_order_relaxed))
        owned_push(t, (w >> 32) - 1);
}

/* ------------------------------------------------------------------------ */
/* Stale and invalid refs                                                    */
/* ------------------------------------------------------------------------ */

/* A ref whose free function has run, or PP_REF_NONE. */
static pp_ref_t find_stale(thr_t *t, uint64_t *kout)
{
    uint64_t n = atomic_load_explicit(&g_nids, memory_order_relaxed);
    if (n == 0)
        return PP_REF_NONE;
    for (int tries = 0; tries < 6; tries++) {
        uint64_t k = rnd(t) % n;
        rec_t *r = rec_get(k);
        /* acquire: pairs with the free function's acq_rel increment */
        if (r && atomic_load_explicit(&r->frees, memory_order_acquire) != 0) {
            *kout = k;
            return rec_ref(r);
        }
    }
    return PP_REF_NONE;
}

static void expect_stale(thr_t *t, int rc, const char *call, pp_ref_t ref, uint64_t k)
{
    if (rc != PP_ESTALE)
        failf(t, "%s of a reclaimed ref %#" PRIx64 " (entry %" PRIu64 "): got %s, expected PP_ESTALE",
              call, ref, k, pp_err_name(rc));
}

static void stale_call(thr_t *t, pp_ref_t ref, uint64_t k)
{
    void *d = NULL;
    void *dv[2] = { NULL, NULL };
    pp_entry_info_t in;
    t->stale_checks++;
    switch (rndn(t, 12)) {
    case 0:
        expect_stale(t, pp_pin(g_pool, ref, 0, &d), "pp_pin", ref, k);
        break;
    case 1:
        expect_stale(t, pp_pin(g_pool, ref, PP_PIN_WRITE, NULL), "pp_pin(WRITE)", ref, k);
        break;
    case 2:
        expect_stale(t, pp_retain(g_pool, ref), "pp_retain", ref, k);
        break;
    case 3:
        expect_stale(t, pp_release(g_pool, ref), "pp_release", ref, k);
        break;
    case 4:
        expect_stale(t, pp_get(g_pool, ref, &d), "pp_get", ref, k);
        break;
    case 5:
        expect_stale(t, pp_prefetch(g_pool, ref), "pp_prefetch", ref, k);
        break;
    case 6:
        expect_stale(t, pp_unpin(g_pool, ref), "pp_unpin", ref, k);
        break;
    case 7:
        expect_stale(t, pp_unpin_many(g_pool, &ref, 1), "pp_unpin_many", ref, k);
        break;
    case 8: {
        pp_ref_t two[2] = { ref, ref };
        expect_stale(t, pp_pin_many(g_pool, two, 2, 0, dv), "pp_pin_many", ref, k);
        break;
    }
    case 9:
    case 10:
        /* Documented: pp_stat describes an entry until it is queued for
         * its reclaimer; a freed entry was queued, so PP_ESTALE. */
        expect_stale(t, pp_stat(g_pool, ref, &in), "pp_stat", ref, k);
        break;
    default: {
        /* A live owned entry and a stale one: all or none. */
        if (t->nowned == 0) {
            expect_stale(t, pp_pin(g_pool, ref, 0, NULL), "pp_pin", ref, k);
            break;
        }
        uint64_t ok = t->owned[rndn(t, (unsigned)t->nowned)];
        pp_ref_t two[2] = { rec_ref(rec_get(ok)), ref };
        expect_stale(t, pp_pin_many(g_pool, two, 2, 0, dv), "pp_pin_many(live, stale)", ref, k);
        t->failed_many_live++;
        break;
    }
    }
}

static void invalid_call(thr_t *t)
{
    pp_ref_t ref;
    switch (rndn(t, 3)) {
    case 0:
        ref = PP_REF_NONE;
        break;
    case 1: /* a node that does not exist */
        if (g_nnodes < 64) {
            ref = ((uint64_t)(g_nnodes + rndn(t, 64 - g_nnodes)) << 58) |
                  ((uint64_t)rndn(t, 16) << 32) | (1 + rndn(t, 1000));
            break;
        }
        /* fall through */
    default: /* a slot far beyond any table */
        ref = ((uint64_t)rndn(t, g_nnodes) << 58) | ((uint64_t)(0x3FFFFFFu - rndn(t, 16)) << 32) |
              (1 + rndn(t, 1000));
        break;
    }
    t->invalid_checks++;
    void *d = NULL;
    int rc;
    switch (rndn(t, 5)) {
    case 0: rc = pp_pin(g_pool, ref, 0, &d); break;
    case 1: rc = pp_retain(g_pool, ref); break;
    case 2: rc = pp_release(g_pool, ref); break;
    case 3: rc = pp_unpin(g_pool, ref); break;
    default: rc = pp_get(g_pool, ref, &d); break;
    }
    if (rc != PP_ESTALE)
        failf(t, "call with invalid ref %#" PRIx64 ": got %s, expected PP_ESTALE", ref,
              pp_err_name(rc));
}

static void op_stale(thr_t *t)
{
    if (rndn(t, 8) == 0) {
        invalid_call(t);
        return;
    }
    uint64_t k = 0;
    pp_ref_t ref = find_stale(t, &k);
    if (ref != PP_REF_NONE)
        stale_call(t, ref, k);
}

/* ------------------------------------------------------------------------ */
/* Put and the checks on a fresh (private, unpinned) entry                   */
/* ------------------------------------------------------------------------ */

static int stat_pins(thr_t *t, uint64_t k, uint32_t want, const char *after)
{
    pp_entry_info_t in;
    rec_t *r = rec_get(k);
    int rc = pp_stat(g_pool, rec_ref(r), &in);
    if (rc != 0) {
        failf(t, "pp_stat of a live private entry %" PRIu64 ": %s", k, pp_err_name(rc));
        return -1;
    }
    if (in.pins != want || in.owners != 1) {
        failf(t, "after %s: private entry %" PRIu64 " has %u pins and %u owners, expected %u and 1",
              after, k, in.pins, in.owners, want);
        return -1;
    }
    return 0;
}

static void fresh_checks(thr_t *t, uint64_t k)
{
    rec_t *r = rec_get(k);
    pp_ref_t ref = rec_ref(r);
    unsigned node = rec_node(r);
    pp_entry_info_t in;
    int rc;
    t->fresh_checks++;

    rc = pp_stat(g_pool, ref, &in);
    if (rc != 0) {
        failf(t, "pp_stat of a fresh entry %" PRIu64 ": %s", k, pp_err_name(rc));
        return;
    }
    if (in.size != atomic_load(&r->size) || in.owners != 1 || in.pins != 0 ||
        in.node != node || in.type != &g_type || in.state != PP_STATE_RESIDENT)
        failf(t, "pp_stat of a fresh entry %" PRIu64 " (ref %#" PRIx64 "): size %zu owners %u "
              "pins %u node %u type %p state %#x; expected size %u owners 1 pins 0 node %u "
              "state RESIDENT only", k, ref, in.size, in.owners, in.pins, in.node,
              (const void *)in.type, in.state, atomic_load(&r->size), node);

    /* Unbalanced unpins fail and change nothing. */
    CHECK_RC(t, pp_unpin(g_pool, ref), PP_ENOTPINNED, "pp_unpin of an unpinned entry", k);
    CHECK_RC(t, pp_unpin_many(g_pool, &ref, 1), PP_ENOTPINNED,
             "pp_unpin_many of an unpinned entry", k);
    if (stat_pins(t, k, 0, "unbalanced unpin") != 0)
        return;

    /* Unknown pin flags. */
    CHECK_RC(t, pp_pin(g_pool, ref, 0x40000000u, NULL), PP_EINVAL, "pp_pin with unknown flags", k);
    if (stat_pins(t, k, 0, "pp_pin with unknown flags") != 0)
        return;

    /* pin_many is all or none. */
    uint64_t sk = 0;
    pp_ref_t stale = find_stale(t, &sk);
    if (stale != PP_REF_NONE) {
        pp_ref_t two[3] = { ref, stale, ref };
        void *dv[3] = { NULL, NULL, NULL };
        rc = pp_pin_many(g_pool, two, 3, 0, dv);
        t->failed_many_live++;
        if (rc != PP_ESTALE)
            failf(t, "pp_pin_many(fresh %" PRIu64 ", stale %#" PRIx64 ", fresh): got %s, expected "
                  "PP_ESTALE", k, stale, pp_err_name(rc));
        if (stat_pins(t, k, 0, "a failed pp_pin_many") != 0)
            return;
    }

    /* Nested pins, and unpin_many checks counts before unpinning. */
    void *d = pin1(t, k, 0);
    if (d == NULL)
        return;
    pp_ref_t two[2] = { ref, ref };
    CHECK_RC(t, pp_unpin_many(g_pool, two, 2), PP_ENOTPINNED,
             "pp_unpin_many(x, x) of an entry with one pin", k);
    if (stat_pins(t, k, 1, "a failed pp_unpin_many") != 0)
        return;
    pp_ref_t three[3] = { ref, ref, ref };
    void *dv[3] = { NULL, NULL, NULL };
    atomic_fetch_add(&r->pins, 3);
    rc = pp_pin_many(g_pool, three, 3, PP_PIN_WRITE, dv);
    if (rc != 0) {
        atomic_fetch_sub(&r->pins, 3);
        failf(t, "pp_pin_many(x, x, x) of a live entry %" PRIu64 ": %s", k, pp_err_name(rc));
    } else {
        t->cnt[node].pins += 3;
        for (int i = 0; i < 3; i++) {
            if (dv[i] != d)
                failf(t, "pp_pin_many gave pointer %p for entry %" PRIu64 ", pp_pin gave %p",
                      dv[i], k, d);
        }
        if (stat_pins(t, k, 4, "pp_pin + pp_pin_many x3") == 0) {
            rc = pp_stat(g_pool, ref, &in);
            if (rc == 0 && !(in.state & PP_STATE_DIRTY))
                failf(t, "entry %" PRIu64 " pinned with PP_PIN_WRITE is not DIRTY (state %#x)",
                      k, in.state);
        }
        atomic_fetch_sub(&r->pins, 3);
        rc = pp_unpin_many(g_pool, three, 3);
        if (rc != 0)
            failf(t, "pp_unpin_many(x, x, x) of an entry with 4 pins: %s", pp_err_name(rc));
        else
            t->cnt[node].unpins += 3;
        stat_pins(t, k, 1, "pp_unpin_many x3");
    }
    unpin1(t, k, d, t->idx);
    stat_pins(t, k, 0, "the last unpin");
}

static void op_put(thr_t *t)
{
    rec_t *r;
    uint64_t k = rec_new(t, &r);
    if (r == NULL)
        return;
    size_t size = entry_size(k);
    unsigned char *buf = malloc(size);
    if (buf == NULL) {
        fprintf(stderr, "pinstress: out of memory\n");
        exit(2);
    }
    fill(buf, size, k, 0);
    atomic_store_explicit(&r->size, (uint32_t)size, memory_order_relaxed);
    atomic_store_explicit(&r->owners, 1, memory_order_relaxed);
    atomic_store_explicit(&r->state, 1, memory_order_relaxed);
    unsigned flags = 0, want = 0;
    if (rnd(t) & 1) {
        want = rndn(t, g_nnodes);
        flags = PP_ON_NODE(want);
    }
    pp_ref_t ref = PP_REF_NONE;
    int rc = pp_put(g_pool, buf, size, &g_type, flags, &ref);
    if (rc != 0) {
        failf(t, "pp_put(size %zu, flags %#x): %s", size, flags, pp_err_name(rc));
        atomic_store(&r->owners, 0);
        atomic_store(&r->state, 3);
        free(buf);
        return;
    }
    unsigned node = pp_ref_node(ref);
    if (ref == PP_REF_NONE || node >= g_nnodes || (flags && node != want))
        failf(t, "pp_put(flags %#x) gave ref %#" PRIx64 " (node %u of %u)", flags, ref, node,
              g_nnodes);
    atomic_store_explicit(&r->ref, ref, memory_order_relaxed);
    atomic_store_explicit(&r->node, node < g_nnodes ? node : 0, memory_order_relaxed);
    atomic_store_explicit(&r->state, 2, memory_order_relaxed);
    t->cnt[node < g_nnodes ? node : 0].puts++;
    if (rndn(t, 16) == 0)
        fresh_checks(t, k);
    owned_push(t, k);
}

/* ------------------------------------------------------------------------ */
/* Operations through a borrowed slot or a private owner                     */
/* ------------------------------------------------------------------------ */

/* Pins 1..MAX_BATCH refs (borrowed slots and private owners, duplicates
 * allowed) with pp_pin_many, checks them, then drops or keeps the pins. */
static void batch_pin(thr_t *t)
{
    unsigned bslots[MAX_BATCH];
    int nb = 0;
    uint64_t ks[MAX_BATCH];
    pp_ref_t refs[MAX_BATCH];
    void *data[MAX_BATCH];
    int n = 0;
    int want = 1 + (int)rndn(t, 4);
    for (int i = 0; i < want; i++) {
        if (t->nowned > 0 && rndn(t, 3) == 0) {
            ks[n++] = t->owned[rndn(t, (unsigned)t->nowned)];
        } else {
            unsigned s = rndn(t, g_nslots);
            int64_t k = borrow(t, s);
            if (k < 0)
                continue;
            bslots[nb++] = s;
            ks[n++] = (uint64_t)k;
        }
        if (n < MAX_BATCH && rndn(t, 6) == 0) {   /* the same ref twice */
            ks[n] = ks[n - 1];
            n++;
        }
    }
    if (n > 0) {
        unsigned flags = rndn(t, 4) == 0 ? PP_PIN_WRITE : 0;
        for (int i = 0; i < n; i++) {
            refs[i] = rec_ref(rec_get(ks[i]));
            atomic_fetch_add(&rec_get(ks[i])->pins, 1);
            data[i] = NULL;
        }
        t->pin_many_calls++;
        int rc = pp_pin_many(g_pool, refs, (size_t)n, flags, data);
        if (rc != 0) {
            for (int i = 0; i < n; i++)
                atomic_fetch_sub(&rec_get(ks[i])->pins, 1);
            failf(t, "pp_pin_many of %d owned refs: %s", n, pp_err_name(rc));
        } else {
            atomic_fetch_add_explicit(&g_outstanding[t->idx], n, memory_order_relaxed);
            for (int i = 0; i < n; i++) {
                t->cnt[rec_node(rec_get(ks[i]))].pins++;
                check_contents(t, ks[i], data[i], "after pp_pin_many");
            }
            unsigned how = rndn(t, 8);
            if (how < 4) {
                for (int i = 0; i < n; i++)
                    check_contents(t, ks[i], data[i], "before pp_unpin_many");
                for (int i = 0; i < n; i++)
                    atomic_fetch_sub(&rec_get(ks[i])->pins, 1);
                rc = pp_unpin_many(g_pool, refs, (size_t)n);
                if (rc != 0)
                    failf(t, "pp_unpin_many of %d pinned refs: %s", n, pp_err_name(rc));
                else
                    for (int i = 0; i < n; i++)
                        t->cnt[rec_node(rec_get(ks[i]))].unpins++;
                atomic_fetch_sub_explicit(&g_outstanding[t->idx], n, memory_order_release);
            } else if (how < 7) {
                for (int i = n - 1; i >= 0; i--)
                    unpin1(t, ks[i], data[i], t->idx);
            } else {
                for (int i = 0; i < n; i++) {
                    hpin_t *h = malloc(sizeof *h);
                    if (h == NULL) {
                        fprintf(stderr, "pinstress: out of memory\n");
                        exit(2);
                    }
                    h->k = ks[i];
                    h->ptr = data[i];
                    h->origin = t->idx;
                    held_push(t, h);
                }
            }
        }
    }
    for (int i = 0; i < nb; i++)
        unborrow(bslots[i]);
}

/* One operation on entry k, of which the caller holds an owner. */
static void use_entry(thr_t *t, uint64_t k, int is_private)
{
    rec_t *r = rec_get(k);
    unsigned sub = rndn(t, 100);
    void *d;
    if (sub < 30) {                                  /* pin, check, unpin */
        d = pin1(t, k, rndn(t, 4) == 0 ? PP_PIN_WRITE : 0);
        if (d)
            unpin1(t, k, d, t->idx);
    } else if (sub < 42) {                           /* pin and keep */
        d = pin1(t, k, 0);
        if (d)
            hold_pin(t, k, d);
    } else if (sub < 57) {                           /* escaped access */
        get1(t, k);
        stat_live(t, k, 1);
    } else if (sub < 67) {
        stat_live(t, k, 0);
    } else if (sub < 72) {
        int rc = pp_prefetch(g_pool, rec_ref(r));
        if (rc != 0)
            failf(t, "pp_prefetch of a live entry %" PRIu64 ": %s", k, pp_err_name(rc));
    } else if (sub < 85) {
        retain_owner(t, k);
    } else if (is_private && !atomic_load_explicit(&r->shared, memory_order_relaxed)) {
        /* Exclusive: nobody else can see k.  Rewrite it under a write pin. */
        d = pin1(t, k, PP_PIN_WRITE);
        if (d) {
            uint32_t v = atomic_load_explicit(&r->version, memory_order_relaxed) + 1;
            atomic_store_explicit(&r->version, v, memory_order_relaxed);
            fill(d, atomic_load(&r->size), k, v);
            t->writes++;
            pp_entry_info_t in;
            int rc = pp_stat(g_pool, rec_ref(r), &in);
            if (rc != 0 || !(in.state & PP_STATE_DIRTY))
                failf(t, "entry %" PRIu64 " pinned for write: pp_stat %s, state %#x (expected DIRTY)",
                      k, pp_err_name(rc), rc == 0 ? in.state : 0);
            unpin1(t, k, d, t->idx);
        }
    } else {
        d = pin1(t, k, PP_PIN_WRITE);
        if (d)
            unpin1(t, k, d, t->idx);
    }
}

static void op_borrow(thr_t *t)
{
    if (rndn(t, 5) == 0) {
        batch_pin(t);
        return;
    }
    unsigned s = rndn(t, g_nslots);
    int64_t k = borrow(t, s);
    if (k < 0)
        return;
    use_entry(t, (uint64_t)k, 0);
    unborrow(s);
}

static void op_owned(thr_t *t)
{
    if (t->nowned == 0) {
        op_put(t);
        return;
    }
    int i = (int)rndn(t, (unsigned)t->nowned);
    uint64_t k = t->owned[i];
    if (rndn(t, 6) == 0) {
        /* escaped access, then drop the owner: under QSBR the pointer must
         * stay valid until our next pp_quiescent (checked there). */
        get1(t, k);
        release_owned_at(t, i);
        return;
    }
    use_entry(t, k, 1);
}

static void op_release(thr_t *t)
{
    if (t->nowned == 0)
        return;
    release_owned_at(t, (int)rndn(t, (unsigned)t->nowned));
    if (t->nowned > OWN_CAP * 3 / 4)
        release_owned_at(t, (int)rndn(t, (unsigned)t->nowned));
}

static void op_held(thr_t *t)
{
    unsigned sub = rndn(t, 100);
    if (sub < 20 && t->nheld > 0) {                  /* hand a pin to another thread */
        int i = (int)rndn(t, (unsigned)t->nheld);
        hpin_t *h = t->held[i];
        atomic_store(&rec_get(h->k)->shared, 1);
        unsigned m = rndn(t, MAILBOXES);
        hpin_t *exp = NULL;
        /* release: the hpin and the entry's contents are handed over */
        if (atomic_compare_exchange_strong_explicit(&g_mbox[m], &exp, h,
                                                    memory_order_release,
                                                    memory_order_relaxed)) {
            t->held[i] = t->held[--t->nheld];
            t->handoffs++;
        }
    } else if (sub < 45) {                           /* take a handed-off pin */
        unsigned m = rndn(t, MAILBOXES);
        hpin_t *h = atomic_exchange_explicit(&g_mbox[m], NULL, memory_order_acquire);
        if (h)
            held_push(t, h);
    } else if (sub < 52 && t->nheld > 1) {           /* drop all with unpin_many */
        pp_ref_t refs[HELD_CAP];
        int n = t->nheld;
        for (int i = 0; i < n; i++) {
            hpin_t *h = t->held[i];
            check_contents(t, h->k, h->ptr, "before pp_unpin_many");
            refs[i] = rec_ref(rec_get(h->k));
            atomic_fetch_sub(&rec_get(h->k)->pins, 1);
        }
        int rc = pp_unpin_many(g_pool, refs, (size_t)n);
        if (rc != 0)
            failf(t, "pp_unpin_many of %d held pins: %s", n, pp_err_name(rc));
        for (int i = 0; i < n; i++) {
            hpin_t *h = t->held[i];
            if (rc == 0)
                t->cnt[rec_node(rec_get(h->k))].unpins++;
            atomic_fetch_sub_explicit(&g_outstanding[h->origin], 1, memory_order_release);
            free(h);
        }
        t->nheld = 0;
    } else if (t->nheld > 0) {
        held_drop_at(t, (int)rndn(t, (unsigned)t->nheld));
    }
}

/* ------------------------------------------------------------------------ */
/* Worker                                                                    */
/* ------------------------------------------------------------------------ */

static pthread_mutex_t g_done_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_done_cond = PTHREAD_COND_INITIALIZER;
static unsigned g_done;

static void thread_cleanup(thr_t *t)
{
    while (t->nheld > 0)
        held_drop_at(t, t->nheld - 1);
    while (t->nowned > 0)
        release_owned_at(t, t->nowned - 1);
    if (g_qsbr)
        quiesce(t);
}

static void *worker(void *arg)
{
    thr_t *t = arg;
    if (g_qsbr)
        quiesce(t);
    for (uint64_t i = 0; i < g_ops && !atomic_load_explicit(&g_stop, memory_order_relaxed); i++) {
        t->op = i;
        unsigned r = rndn(t, 1000);
        int op;
        if (r < 120)      op = OP_PUT;
        else if (r < 220) op = OP_PUBLISH;
        else if (r < 300) op = OP_TAKE;
        else if (r < 640) op = OP_BORROW;
        else if (r < 770) op = OP_OWNED;
        else if (r < 870) op = OP_RELEASE;
        else if (r < 960) op = OP_HELD;
        else              op = OP_STALE;
        t->opcount[op]++;
        switch (op) {
        case OP_PUT:     op_put(t); break;
        case OP_PUBLISH: op_publish(t); break;
        case OP_TAKE:    op_take(t); break;
        case OP_BORROW:  op_borrow(t); break;
        case OP_OWNED:   op_owned(t); break;
        case OP_RELEASE: op_release(t); break;
        case OP_HELD:    op_held(t); break;
        default:         op_stale(t); break;
        }
        if (g_qsbr && rndn(t, 16) == 0)
            quiesce(t);
        atomic_store_explicit(&t->progress, i + 1, memory_order_relaxed);
    }
    t->op = g_ops;
    thread_cleanup(t);
    if (t->explicit_exit) {
        /* acquire: pairs with the release after other threads' unpins */
        int64_t left = atomic_load_explicit(&g_outstanding[t->idx], memory_order_acquire);
        int rc = pp_thread_exit(g_pool);
        if (!(rc == 0 || (g_track && left > 0 && rc == PP_EBUSY)))
            failf(t, "pp_thread_exit with %" PRId64 " of its pins still held elsewhere (track %d): %s",
                  left, g_track, pp_err_name(rc));
    }
    pthread_mutex_lock(&g_done_lock);
    g_done++;
    pthread_cond_signal(&g_done_cond);
    pthread_mutex_unlock(&g_done_lock);
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* Main                                                                      */
/* ------------------------------------------------------------------------ */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: pinstress [--threads N] [--ops N] [--seed S] [--topology STR]\n"
            "                 [--track] [--qsbr] [--slots N] [--timeout SEC] [--verbose]\n"
            "  --threads N     worker threads (default 4)\n"
            "  --ops N         operations per thread (default 200000)\n"
            "  --seed S        seed (default: from the clock, printed)\n"
            "  --topology STR  hwloc synthetic string or XML path (default: this machine)\n"
            "  --track         create the pool with PP_TRACK_PINS\n"
            "  --qsbr          workers use QSBR mode (pp_quiescent between ops)\n"
            "  --slots N       shared slots (default 1024)\n"
            "  --timeout SEC   fail if the workers take longer (default 300)\n"
            "  --verbose       progress and per-operation counts\n");
}

static uint64_t parse_u64(const char *opt, const char *s)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || end == s || *end || s[0] == '-') {
        fprintf(stderr, "pinstress: bad value for %s: '%s'\n", opt, s);
        exit(2);
    }
    return (uint64_t)v;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Checks of argument validation, done once by the main thread. */
static void preflight(thr_t *m)
{
    unsigned char buf[16];
    pp_ref_t ref = 123;
    void *d = NULL;
    pp_entry_info_t in;
    memset(buf, 0, sizeof buf);
    CHECK_RC(m, pp_put(NULL, buf, 16, &g_type, 0, &ref), PP_EINVAL, "pp_put(NULL pool)", 0);
    CHECK_RC(m, pp_put(g_pool, NULL, 16, &g_type, 0, &ref), PP_EINVAL, "pp_put(NULL data)", 0);
    CHECK_RC(m, pp_put(g_pool, buf, 16, &g_type, 0, NULL), PP_EINVAL, "pp_put(NULL out)", 0);
    CHECK_RC(m, pp_put(g_pool, buf, 16, &g_type, 0x2u, &ref), PP_EINVAL,
             "pp_put(unknown flags 0x2)", 0);
    if (g_nnodes < 256)
        CHECK_RC(m, pp_put(g_pool, buf, 16, &g_type, PP_ON_NODE(g_nnodes), &ref), PP_EINVAL,
                 "pp_put(PP_ON_NODE(number of nodes))", 0);
    CHECK_RC(m, pp_pool_stats(g_pool, NULL), PP_EINVAL, "pp_pool_stats(NULL out)", 0);
    CHECK_RC(m, pp_stat(g_pool, PP_REF_NONE, &in), PP_ESTALE, "pp_stat(PP_REF_NONE)", 0);
    CHECK_RC(m, pp_pin(g_pool, PP_REF_NONE, 0, &d), PP_ESTALE, "pp_pin(PP_REF_NONE)", 0);
    CHECK_RC(m, pp_unpin(g_pool, PP_REF_NONE), PP_ESTALE, "pp_unpin(PP_REF_NONE)", 0);
    CHECK_RC(m, pp_retain(g_pool, PP_REF_NONE), PP_ESTALE, "pp_retain(PP_REF_NONE)", 0);
    CHECK_RC(m, pp_release(g_pool, PP_REF_NONE), PP_ESTALE, "pp_release(PP_REF_NONE)", 0);
    CHECK_RC(m, pp_get(g_pool, PP_REF_NONE, &d), PP_ESTALE, "pp_get(PP_REF_NONE)", 0);
    CHECK_RC(m, pp_prefetch(g_pool, PP_REF_NONE), PP_ESTALE, "pp_prefetch(PP_REF_NONE)", 0);
    CHECK_RC(m, pp_pin_many(g_pool, &ref, 0, 0, NULL), 0, "pp_pin_many(n = 0)", 0);
    CHECK_RC(m, pp_unpin_many(g_pool, &ref, 0), 0, "pp_unpin_many(n = 0)", 0);
    if (strcmp(pp_err_name(PP_ESTALE), "PP_ESTALE") != 0 || strcmp(pp_err_name(0), "PP_OK") != 0 ||
        pp_strerror(-12345) == NULL || pp_strerror(PP_ENOMEM) == NULL)
        failf(m, "pp_err_name / pp_strerror: unexpected names");
}

#define NODE_FIELDS(X) \
    X(entries) X(resident_bytes) X(swapped_bytes) X(puts) X(retains) X(releases) \
    X(gets) X(pins) X(unpins) X(evictions_written) X(evictions_clean) X(loads) \
    X(io_errors) X(queued) X(frees) X(reclaim_queue_depth) X(grace_polls) X(slots) \
    X(lag_count) X(lag_total_ns)

static void check_stats(thr_t *m, const pp_stats_t *st, const cnt_t *exp, const cnt_t *tot)
{
    const char *topo = g_topology ? g_topology : "this machine";
    for (unsigned n = 0; n <= g_nnodes; n++) {
        const pp_node_stats_t *s = n < g_nnodes ? &st->node[n] : &st->total;
        const cnt_t *e = n < g_nnodes ? &exp[n] : tot;
        uint64_t frees = n < g_nnodes ? atomic_load(&g_frees_node[n]) : atomic_load(&g_frees_total);
        char where[32];
        if (n < g_nnodes)
            snprintf(where, sizeof where, "node %u", n);
        else
            snprintf(where, sizeof where, "total");
#define EXPECT(field, want)                                                              \
        do {                                                                             \
            uint64_t got__ = (uint64_t)s->field, want__ = (uint64_t)(want);                \
            if (got__ != want__)                                                         \
                failf(m, "pp_pool_stats %s.%s = %" PRIu64 ", expected %" PRIu64            \
                      " (topology %s)", where, #field, got__, want__, topo);             \
        } while (0)
        EXPECT(entries, 0);
        EXPECT(resident_bytes, 0);
        EXPECT(swapped_bytes, 0);
        EXPECT(reclaim_queue_depth, 0);
        EXPECT(puts, e->puts);
        EXPECT(pins, e->pins);
        EXPECT(unpins, e->unpins);
        EXPECT(retains, e->retains);
        EXPECT(releases, e->releases);
        EXPECT(gets, e->gets);
        EXPECT(frees, e->puts);
        EXPECT(frees, frees);
        EXPECT(queued, e->puts);
        EXPECT(lag_count, frees);
        EXPECT(io_errors, 0);
        EXPECT(loads, 0);
        EXPECT(evictions_written, 0);
        if (s->lag_count && s->lag_p50_ns > s->lag_p99_ns)
            failf(m, "pp_pool_stats %s: lag p50 %" PRIu64 " ns, p99 %" PRIu64 " ns, max %" PRIu64 " ns",
                  where, s->lag_p50_ns, s->lag_p99_ns, s->lag_max_ns);
#undef EXPECT
    }
    /* total is the sum of the nodes */
#define SUMCHECK(f)                                                                      \
    do {                                                                                 \
        uint64_t sum__ = 0;                                                              \
        for (unsigned n = 0; n < g_nnodes; n++)                                          \
            sum__ += st->node[n].f;                                                      \
        if (sum__ != st->total.f)                                                        \
            failf(m, "pp_pool_stats total.%s = %" PRIu64 " but the nodes sum to %" PRIu64, \
                  #f, (uint64_t)st->total.f, sum__);                                     \
    } while (0);
    NODE_FIELDS(SUMCHECK)
#undef SUMCHECK
    if (st->total.reclaimer_tid != 0 || st->total.cpu_bound != 0 || st->total.mem_bound != 0)
        failf(m, "pp_pool_stats total: reclaimer_tid %d cpu_bound %d mem_bound %d (expected 0)",
              st->total.reclaimer_tid, st->total.cpu_bound, st->total.mem_bound);
}

int main(int argc, char **argv)
{
    int seed_given = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = NULL;
        const char *eq = strchr(a, '=');
        char name[32];
        if (strncmp(a, "--", 2) == 0 && eq && (size_t)(eq - a) < sizeof name) {
            memcpy(name, a, (size_t)(eq - a));
            name[eq - a] = 0;
            v = eq + 1;
            a = name;
        }
#define ARG() (v ? v : (i + 1 < argc ? argv[++i] : (fprintf(stderr, "pinstress: %s needs a value\n", a), exit(2), "")))
        if (!strcmp(a, "--threads")) {
            g_threads = (unsigned)parse_u64(a, ARG());
        } else if (!strcmp(a, "--ops")) {
            g_ops = parse_u64(a, ARG());
        } else if (!strcmp(a, "--seed")) {
            g_seed = parse_u64(a, ARG());
            seed_given = 1;
        } else if (!strcmp(a, "--topology")) {
            g_topology = ARG();
        } else if (!strcmp(a, "--slots")) {
            g_nslots = (unsigned)parse_u64(a, ARG());
        } else if (!strcmp(a, "--timeout")) {
            g_timeout_s = (unsigned)parse_u64(a, ARG());
        } else if (!strcmp(a, "--track")) {
            g_track = 1;
        } else if (!strcmp(a, "--qsbr")) {
            g_qsbr = 1;
        } else if (!strcmp(a, "--verbose") || !strcmp(a, "-v")) {
            g_verbose = 1;
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "pinstress: unknown argument '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
#undef ARG
    }
    if (g_threads < 1 || g_threads > 1024 || g_nslots < 1 || g_nslots > (1u << 24)) {
        fprintf(stderr, "pinstress: --threads must be 1..1024 and --slots 1..16777216\n");
        return 2;
    }
    if (!seed_given) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t x = (uint64_t)ts.tv_sec * 1000003u ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32);
        g_seed = splitmix64(&x) % 1000000000u;
    }
    const char *env = getenv("PINPOOL_TRACK_PINS");
    int track_env = env && env[0] == '1';
    printf("pinstress: seed=%" PRIu64 " threads=%u ops=%" PRIu64 " slots=%u topology=%s%s%s%s\n",
           g_seed, g_threads, g_ops, g_nslots, g_topology ? g_topology : "(this machine)",
           g_track ? " track" : "", track_env && !g_track ? " track(env)" : "",
           g_qsbr ? " qsbr" : "");
    printf("pinstress: replay: pinstress --threads %u --ops %" PRIu64 " --seed %" PRIu64 "%s%s%s%s%s\n",
           g_threads, g_ops, g_seed, g_topology ? " --topology '" : "",
           g_topology ? g_topology : "", g_topology ? "'" : "", g_track ? " --track" : "",
           g_qsbr ? " --qsbr" : "");
    fflush(stdout);

    /* Records: one per put; at most one put per op (+ slack). */
    g_max_ids = (uint64_t)g_threads * g_ops + 64;
    g_nchunks = (size_t)((g_max_ids + CHUNK - 1) >> CHUNK_BITS);
    g_chunks = calloc(g_nchunks, sizeof *g_chunks);
    g_slots = calloc(g_nslots, sizeof *g_slots);
    g_outstanding = calloc(g_threads + 1, sizeof *g_outstanding);
    g_thr = calloc(g_threads + 1, sizeof *g_thr);
    if (!g_chunks || !g_slots || !g_outstanding || !g_thr) {
        fprintf(stderr, "pinstress: out of memory\n");
        return 2;
    }

    pp_options_t opt = PP_OPTIONS_INIT;
    opt.topology = g_topology;
    opt.flags = g_track ? PP_TRACK_PINS : 0u;
    opt.report = report_cb;
    int rc = pp_pool_create(&opt, &g_pool);
    if (rc != 0) {
        printf("pinstress: FAIL: pp_pool_create(topology %s): %s [seed=%" PRIu64 " thread=main]\n",
               g_topology ? g_topology : "NULL", pp_err_name(rc), g_seed);
        return 1;
    }
    thr_t *m = &g_thr[g_threads];
    m->idx = g_threads;
    m->rng = g_seed ^ 0xA11CEull;

    pp_stats_t *st = calloc(1, sizeof *st);
    if (!st)
        return 2;
    rc = pp_pool_stats(g_pool, st);
    if (rc != 0 || st->nodes < 1 || st->nodes > PP_MAX_NODES) {
        failf(m, "pp_pool_stats after create: %s, nodes %u", pp_err_name(rc), st->nodes);
        return 1;
    }
    g_nnodes = st->nodes;
    if (st->topology_is_this_system != (g_topology == NULL))
        failf(m, "topology_is_this_system = %d for topology %s", st->topology_is_this_system,
              g_topology ? g_topology : "NULL");
    printf("pinstress: pool: %u node(s), topology_is_this_system=%d, reclaimers bound:",
           g_nnodes, st->topology_is_this_system);
    for (unsigned n = 0; n < g_nnodes; n++)
        printf(" %d", st->node[n].cpu_bound);
    printf("\n");
    fflush(stdout);
    preflight(m);

    /* Workers. */
    uint64_t xs = g_seed;
    for (unsigned i = 0; i < g_threads; i++) {
        thr_t *t = &g_thr[i];
        t->idx = i;
        t->rng = mix3(g_seed, i + 1, 0x7EAD);
        t->explicit_exit = (int)(splitmix64(&xs) & 1);
    }
    double t0 = now_s();
    for (unsigned i = 0; i < g_threads; i++) {
        rc = pthread_create(&g_thr[i].th, NULL, worker, &g_thr[i]);
        if (rc != 0) {
            fprintf(stderr, "pinstress: pthread_create: %s\n", strerror(rc));
            return 2;
        }
    }

    /* Watch: pool stats and drains concurrently with the workers. */
    unsigned polls = 0, mid_drains = 0, mid_drain_busy = 0;
    double last_print = t0, last_drain = t0;
    pthread_mutex_lock(&g_done_lock);
    while (g_done < g_threads) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 20 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&g_done_cond, &g_done_lock, &ts);
        if (g_done >= g_threads)
            break;
        pthread_mutex_unlock(&g_done_lock);
        double now = now_s();
        rc = pp_pool_stats(g_pool, st);
        polls++;
        if (rc != 0 || st->nodes != g_nnodes)
            failf(m, "pp_pool_stats during the run: %s, nodes %u", pp_err_name(rc), st->nodes);
        if (now - last_drain > 0.5) {
            rc = pp_pool_drain(g_pool, 200);
            mid_drains++;
            if (rc == PP_EBUSY)
                mid_drain_busy++;
            else if (rc != 0)
                failf(m, "pp_pool_drain during the run: %s", pp_err_name(rc));
            last_drain = now_s();
        }
        if (g_verbose && now - last_print >= 1.0) {
            uint64_t done = 0;
            for (unsigned i = 0; i < g_threads; i++)
                done += atomic_load_explicit(&g_thr[i].progress, memory_order_relaxed);
            printf("pinstress: %.1fs ops %" PRIu64 " entries %" PRIu64 " puts %" PRIu64
                   " frees %" PRIu64 " queue %" PRIu64 "\n", now - t0, done, st->total.entries,
                   st->total.puts, st->total.frees, st->total.reclaim_queue_depth);
            fflush(stdout);
            last_print = now;
        }
        if (now - t0 > g_timeout_s) {
            printf("pinstress: FAIL: workers still running after %u s [seed=%" PRIu64 "]; progress:",
                   g_timeout_s, g_seed);
            for (unsigned i = 0; i < g_threads; i++)
                printf(" %u:%" PRIu64, i, atomic_load(&g_thr[i].progress));
            printf("\n");
            fflush(stdout);
            _exit(1);
        }
        pthread_mutex_lock(&g_done_lock);
    }
    pthread_mutex_unlock(&g_done_lock);
    for (unsigned i = 0; i < g_threads; i++)
        pthread_join(g_thr[i].th, NULL);
    double t1 = now_s();

    if (atomic_load(&g_failed)) {
        uint64_t done = 0;
        for (unsigned i = 0; i < g_threads; i++)
            done += atomic_load(&g_thr[i].progress);
        printf("pinstress: FAIL seed=%" PRIu64 " ops=%" PRIu64 " threads=%u seconds=%.2f: failed "
               "during the run, final checks skipped\n", g_seed, done, g_threads, t1 - t0);
        fflush(stdout);
        _exit(1);   /* the pool is in an unknown state: do not tear it down */
    }

    /* Drop everything the program still holds. */
    m->op = g_ops;
    for (unsigned s = 0; s < g_nslots; s++) {
        uint64_t w = atomic_exchange_explicit(&g_slots[s], 0, memory_order_acquire);
        if ((w & 0xFFFFFFFFu) != 0)
            failf(m, "internal: slot %u still borrowed at the end", s);
        if (w >> 32)
            release_owner(m, (w >> 32) - 1);
    }
    for (unsigned i = 0; i < MAILBOXES; i++) {
        hpin_t *h = atomic_exchange_explicit(&g_mbox[i], NULL, memory_order_acquire);
        if (h) {
            unpin1(m, h->k, h->ptr, h->origin);
            free(h);
        }
    }

    rc = pp_pool_drain(g_pool, 30000);
    if (rc != 0)
        failf(m, "pp_pool_drain(30000) after dropping everything: %s", pp_err_name(rc));

    /* Every entry freed exactly once, after its last owner and pin, on its
     * home node's reclaimer. */
    rc = pp_pool_stats(g_pool, st);
    if (rc != 0)
        failf(m, "pp_pool_stats at the end: %s", pp_err_name(rc));
    uint64_t nids = atomic_load(&g_nids), bad = 0;
    for (uint64_t k = 0; k < nids && k < g_max_ids; k++) {
        rec_t *r = rec_get(k);
        if (r == NULL || atomic_load(&r->state) != 2)
            continue;
        uint32_t f = atomic_load(&r->frees);
        int32_t o = atomic_load(&r->owners), p = atomic_load(&r->pins);
        int tid = atomic_load(&r->free_tid);
        unsigned node = rec_node(r);
        if (f != 1 || o != 0 || p != 0) {
            if (bad++ < 10)
                failf(m, "entry %" PRIu64 " (ref %#" PRIx64 ", node %u) after drain: freed %u "
                      "times, program owners %d pins %d", k, rec_ref(r), node, f, o, p);
        } else if (tid != st->node[node].reclaimer_tid) {
            if (bad++ < 10)
                failf(m, "entry %" PRIu64 " of node %u freed on thread %d, node's reclaimer is %d",
                      k, node, tid, st->node[node].reclaimer_tid);
        }
    }
    if (bad > 10)
        failf(m, "%" PRIu64 " entries in all failed the end-of-run checks", bad);
    for (unsigned i = 0; i <= g_threads; i++)
        if (atomic_load(&g_outstanding[i]) != 0)
            failf(m, "internal: thread %u has %" PRId64 " outstanding pins at the end", i,
                  atomic_load(&g_outstanding[i]));

    /* Stats exact. */
    cnt_t exp[PP_MAX_NODES], tot;
    memset(exp, 0, sizeof exp);
    memset(&tot, 0, sizeof tot);
    uint64_t opsum[OP_N] = { 0 };
    uint64_t stale = 0, invalid = 0, fresh = 0, writes = 0, handoffs = 0;
    uint64_t pin_many = 0, ops_done = 0, failed_many_live = 0;
    for (unsigned i = 0; i <= g_threads; i++) {
        thr_t *t = &g_thr[i];
        for (unsigned n = 0; n < g_nnodes; n++) {
            const cnt_t *c = &t->cnt[n];
            exp[n].puts += c->puts;
            exp[n].pins += c->pins;
            exp[n].unpins += c->unpins;
            exp[n].retains += c->retains;
            exp[n].releases += c->releases;
            exp[n].gets += c->gets;
        }
        for (int o = 0; o < OP_N; o++)
            opsum[o] += t->opcount[o];
        stale += t->stale_checks;
        invalid += t->invalid_checks;
        fresh += t->fresh_checks;
        writes += t->writes;
        handoffs += t->handoffs;
        pin_many += t->pin_many_calls;
        failed_many_live += t->failed_many_live;
        if (i < g_threads)
            ops_done += atomic_load(&t->progress);
    }
    for (unsigned n = 0; n < g_nnodes; n++) {
        tot.puts += exp[n].puts;
        tot.pins += exp[n].pins;
        tot.unpins += exp[n].unpins;
        tot.retains += exp[n].retains;
        tot.releases += exp[n].releases;
        tot.gets += exp[n].gets;
    }
    if (atomic_load(&g_frees_total) != tot.puts)
        failf(m, "free function ran %" PRIu64 " times for %" PRIu64 " puts",
              atomic_load(&g_frees_total), tot.puts);
    if (tot.pins != tot.unpins)
        failf(m, "internal: program pins %" PRIu64 " != unpins %" PRIu64, tot.pins, tot.unpins);
    if (tot.puts + tot.retains != tot.releases)
        failf(m, "internal: puts %" PRIu64 " + retains %" PRIu64 " != releases %" PRIu64,
              tot.puts, tot.retains, tot.releases);
    check_stats(m, st, exp, &tot);
    if (st->total.pins != tot.pins)
        failf(m, "note: stats count %" PRId64 " pins more than the program took; %" PRIu64
              " live refs were pinned and rolled back by failed pp_pin_many calls (a failed call "
              "must have no effect)", (int64_t)(st->total.pins - tot.pins), failed_many_live);

    double secs = t1 - t0;
    if (g_verbose) {
        printf("pinstress: ops:");
        for (int o = 0; o < OP_N; o++)
            printf(" %s=%" PRIu64, op_names[o], opsum[o]);
        printf("\npinstress: checks: fresh=%" PRIu64 " stale=%" PRIu64 " invalid=%" PRIu64 " writes=%" PRIu64 " handoffs=%" PRIu64 " pin_many=%" PRIu64
               " stats_polls=%u mid_drains=%u (busy %u) report_lines=%" PRIu64 "\n",
               fresh, stale, invalid, writes, handoffs, pin_many, polls, mid_drains,
               mid_drain_busy, atomic_load(&g_report_lines));
        pthread_mutex_lock(&g_print_lock);
        int saved = atomic_load(&g_report_saved);
        for (int i = 0; i < saved && i < 8; i++)
            printf("pinstress: report: %s\n", g_report_first[i]);
        pthread_mutex_unlock(&g_print_lock);
        for (unsigned n = 0; n < g_nnodes; n++)
            printf("pinstress: node %u: puts %" PRIu64 " frees %" PRIu64 " pins %" PRIu64
                   " lag p50 %.1f us p99 %.1f us max %.1f us grace_polls %" PRIu64
                   " slots %" PRIu64 " reclaimer tid %d cpu_bound %d mem_bound %d\n", n,
                   st->node[n].puts, st->node[n].frees, st->node[n].pins,
                   st->node[n].lag_p50_ns / 1e3, st->node[n].lag_p99_ns / 1e3,
                   st->node[n].lag_max_ns / 1e3, st->node[n].grace_polls, st->node[n].slots,
                   st->node[n].reclaimer_tid, st->node[n].cpu_bound, st->node[n].mem_bound);
    }

    /* Every slot's state words obey entry.h's invariants (pinpool's own
     * whole-structure validation; all threads have stopped). */
    if (!pp__pool_is_valid(g_pool))
        failf(m, "pp__pool_is_valid: an entry's state breaks entry.h's invariants");

    /* Destroy: nothing is left, so nothing is reported or freed. */
    uint64_t lines_before = atomic_load(&g_report_lines);
    uint64_t frees_before = atomic_load(&g_frees_total);
    rc = pp_pool_destroy(g_pool);
    if (rc != 0)
        failf(m, "pp_pool_destroy: %s", pp_err_name(rc));
    if (atomic_load(&g_report_lines) != lines_before)
        failf(m, "pp_pool_destroy reported %" PRIu64 " line(s) though nothing was left",
              atomic_load(&g_report_lines) - lines_before);
    if (atomic_load(&g_frees_total) != frees_before)
        failf(m, "pp_pool_destroy called the free function %" PRIu64 " more time(s)",
              atomic_load(&g_frees_total) - frees_before);

    int failed = atomic_load(&g_failed);
    printf("pinstress: %s seed=%" PRIu64 " ops=%" PRIu64 " threads=%u seconds=%.2f nodes=%u "
           "puts=%" PRIu64 " frees=%" PRIu64 " pins=%" PRIu64 " unpins=%" PRIu64
           " retains=%" PRIu64 " releases=%" PRIu64 " gets=%" PRIu64 " stale_checks=%" PRIu64
           " entries=%" PRIu64 " resident_bytes=%" PRIu64 " queue_depth=%" PRIu64
           " lag_p50_us=%.1f lag_p99_us=%.1f lag_max_us=%.1f\n",
           failed ? "FAIL" : "PASS", g_seed, ops_done, g_threads, secs, g_nnodes,
           st->total.puts, st->total.frees, st->total.pins, st->total.unpins, st->total.retains,
           st->total.releases, st->total.gets, stale, st->total.entries,
           st->total.resident_bytes, st->total.reclaim_queue_depth, st->total.lag_p50_ns / 1e3,
           st->total.lag_p99_ns / 1e3, st->total.lag_max_ns / 1e3);
    for (size_t c = 0; c < g_nchunks; c++)
        free(atomic_load(&g_chunks[c]));
    free(g_chunks);
    free(g_slots);
    free(g_outstanding);
    free(g_thr);
    free(st);
    return failed ? 1 : 0;
}
