/*
 * torture -- randomized multithreaded torture test for pinpool.
 *
 *   torture [--threads N] [--ops N] [--seed S] [--topology STR]
 *             [--track] [--qsbr] [--slots N] [--timeout SEC] [--verbose]
 *             [--swap [DIR]] [--mem-limit BYTES] [--swap-limit BYTES]
 *             [--compress] [--entry-size MIN[-MAX]] [--flat PCT]
 *             [--enomem-max PCT]
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
 *    rec(k) (ref, size, kind, content version, and the program's own count
 *    of owners and pins it holds).  Contents are a function of (seed, k,
 *    version): the first 8 bytes hold k (never rewritten), the rest come
 *    from splitmix64 (in swap mode some entries are made compressible).
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
 *  - Writers are serialized by the program (rec.rw, a reader/writer token
 *    that never blocks): a thread that reads the contents under a pin or a
 *    pp_get pointer holds a read token (rw > 0) for as long as it may read
 *    them; a thread rewrites an entry (version + 1, under PP_PIN_WRITE)
 *    only if it turned rw from 0 to -1.  A pin taken while a writer holds
 *    the token is "blind": it checks only the first 8 bytes (k), which
 *    writers never touch, so pins of the pool still overlap write pins.
 *    rec.version changes only under the writer's write pin, before its
 *    unpin: whenever the entry is unpinned, its bytes are that version.
 *  - Stale refs: any rec whose free function has run on its home node's
 *    reclaimer (rec.reclaimed == 1, read with acquire) names a reclaimed
 *    entry; every call with it must fail with PP_ESTALE (pp_stat included:
 *    it describes an entry only until the entry is queued for reclamation).
 *  - With --qsbr, threads are in QSBR mode: pointers from pp_get() are kept
 *    (and re-verified) after the owner is dropped, until the next
 *    pp_quiescent(); rec.qsbr_holders lets the free function check that
 *    the pool waited for that quiescent state.
 *
 * Data blocks and the free-once invariant.  Entries of the program's types
 * are allocated with a hidden 64-byte header in front of the data (the
 * block: magic, k, the version its bytes hold, and the program's pins on
 * that very block).  Without swap every entry is one block, freed once, on
 * its home node's reclaimer, after the program dropped its last owner and
 * pin.  With swap an entry is a sequence of blocks: the one pp_put was
 * given, then one per load (the type's load makes it).  The invariant
 * checked is per block and per entry:
 *   - every block is freed exactly once, by the free function, with no
 *     program pin on it, with its bytes intact (its own version);
 *   - a block freed on the home reclaimer is the entry's last (the entry
 *     died resident: once, after the last owner, pin and QSBR reader);
 *     any other block is freed by an eviction, on a pool thread that is
 *     not a reclaimer nor a user thread, and never for an entry that was
 *     escaped (pp_get) or of a never-evicted type;
 *   - at the end, per entry: blocks made (1 + loads) == blocks freed ==
 *     evicted + reclaimed, reclaimed <= 1 (0 if it died swapped: the pool
 *     then only drops its swap copy).
 * Flat entries (type NULL: the pool reloads them into posix_memalign
 * memory and frees them with free()) have no free hook; they are checked
 * by contents on every pin, by the sanitizers, and by the pool's counters.
 *
 * At the end everything still owned or pinned is dropped, the pool is
 * drained until no entry, queue or reservation is left, and
 * pp_pool_stats() must match the program's own counts exactly, per node
 * and in total.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pinpool.h>

#define STRESS_PROG "torture"
#include "stress_common.h"

#include "../tests/support/faultdev.h"   /* --faults: the fault-injecting swap device */
#include "testhooks.h"   /* pp__pool_is_valid, pp__swap_path, pp__alloc_fault_hook */

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------------------ */
/* Parameters and globals                                                    */
/* ------------------------------------------------------------------------ */

#define OWN_CAP   32    /* private owners per thread */
#define HELD_CAP  8     /* held pins per thread (array size) */
#define ESC_CAP   32    /* QSBR escaped pointers per thread */
#define MAILBOXES 64    /* pin hand-off mailboxes (array size) */
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
static double g_duration_s;         /* --duration: stop after this long (0: run all ops) */
static unsigned g_faults;           /* --faults N: 1 in N allocations and device calls fail */
static unsigned g_yield;            /* --yield N: debug builds yield 1 in N at race points */
static int g_hot = 1;               /* hot entries: promote on the first contention, and
                                       at random (--no-hot: never) */
static faultdev_t *g_fd;            /* the fault device (--faults with --swap) */
static _Atomic int g_faults_armed;  /* allocation faults on (after every worker registered) */
static _Atomic uint64_t g_alloc_calls, g_alloc_faults;
static _Atomic unsigned g_registered;
static int g_held_cap = HELD_CAP; /* held pins per thread; fewer with swap */
static unsigned g_nmbox = MAILBOXES; /* mailboxes used; fewer with swap */

/* Swap mode (--swap). */
static int g_swap;
static const char *g_swap_parent;   /* DIR: a fresh directory is made under it */
static char g_rundir[4096];         /* DIR/torture-XXXXXX, the pool's swap_dir */
static size_t g_mem_limit;
static uint64_t g_swap_limit;
static int g_compress;
static size_t g_size_min = 16, g_size_max = 4096;
static unsigned g_flat_pct = 25;    /* flat (type NULL) entries, percent */
static double g_enomem_max = 1.0;   /* PP_ENOMEM allowed, percent of the calls
                                       (5 with --qsbr: longer grace periods) */
/* The program's own bounds on memory the pool cannot evict, so that
 * PP_ENOMEM stays rare: bytes it pins at once (each pin counted), and
 * bytes that stay resident until the entry dies (escaped entries, entries
 * of the never-evicted type). */
static int64_t g_pin_budget, g_forever_budget;
static _Atomic int64_t g_pin_bytes, g_forever_bytes;

static pp_pool_t *g_pool;
static unsigned g_nnodes;
static int g_rtid[PP_MAX_NODES];    /* reclaimer thread ids */

static atomic_int g_failed;
static atomic_int g_stop;
static atomic_int g_fail_msgs;
static pthread_mutex_t g_print_lock = PTHREAD_MUTEX_INITIALIZER;

/* Set on the workers and the main thread: the free function and the type's
 * save must never run on one of them. */
static __thread int tl_user;

/* Entry kinds. */
enum { KIND_FREE, KIND_SWAP, KIND_FLAT };
/* KIND_FREE: g_type, a free function and no save/load: never evicted (the
 *            only kind without --swap).
 * KIND_SWAP: g_swap_type, free + save + load: evicted and loaded.
 * KIND_FLAT: type NULL: the pool writes the bytes and reloads them into
 *            its own memory. */

/* Per-entry record. */
typedef struct rec {
    _Atomic uint64_t ref;
    _Atomic uint32_t state;        /* 0 unused, 1 putting, 2 put ok, 3 put failed */
    _Atomic uint32_t size;
    _Atomic uint32_t version;
    _Atomic uint32_t node;
    _Atomic uint32_t kind;
    _Atomic int32_t owners;        /* owners the program holds */
    _Atomic int32_t pins;          /* pins the program holds */
    _Atomic int32_t qsbr_holders;  /* QSBR threads still using a pp_get pointer */
    _Atomic int32_t rw;            /* read tokens held (> 0), or -1: a writer */
    _Atomic uint32_t forever;      /* counted in g_forever_bytes */
    _Atomic uint32_t blocks;       /* data blocks made: the put's, one per load */
    _Atomic uint32_t frees;        /* free function calls (blocks freed) */
    _Atomic uint32_t evict_frees;  /* ... by an eviction */
    _Atomic uint32_t reclaimed;    /* ... by the home reclaimer (0 or 1) */
    _Atomic uint32_t loads;        /* successful calls of the type's load */
    _Atomic int32_t free_tid;      /* thread that reclaimed it */
} rec_t;

static _Atomic(rec_t *) *g_chunks;
static size_t g_nchunks;
static _Atomic uint64_t g_nids;     /* ids handed out */
static uint64_t g_max_ids;

static _Atomic uint64_t *g_slots;

/* A held pin: checked says it holds a read token of rec.rw; budget that
 * its bytes are counted in g_pin_bytes. */
typedef struct hpin {
    uint64_t k;
    void *ptr;
    unsigned origin;
    unsigned char checked, budget;
} hpin_t;
static _Atomic(hpin_t *) g_mbox[MAILBOXES];
static _Atomic int64_t *g_outstanding;   /* pins taken by thread i, not yet dropped */

static _Atomic uint64_t g_frees_total;   /* reclaimer frees seen by the free function */
static _Atomic uint64_t g_frees_node[PP_MAX_NODES];
static _Atomic uint64_t g_evict_frees;   /* eviction frees seen by the free function */
static _Atomic uint64_t g_saves, g_saves_ok, g_saves_lost, g_load_calls;
static _Atomic uint64_t g_report_lines;
static char g_report_first[8][256];
static atomic_int g_report_saved;

/* Types; defined below (they need the callbacks). */
static const pp_type_t g_type;      /* KIND_FREE */
static const pp_type_t g_swap_type; /* KIND_SWAP */

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
        snprintf(who, sizeof who, "pool thread tid %ld", (long)syscall(SYS_gettid));
    else if (t->idx == g_threads)
        snprintf(who, sizeof who, "main");
    else
        snprintf(who, sizeof who, "%u", t->idx);
    pthread_mutex_lock(&g_print_lock);
    if (t != NULL)
        fprintf(stdout, "torture: FAIL: %s [seed=%" PRIu64 " thread=%s op=%" PRIu64 "]\n",
                msg, g_seed, who, t->op);
    else
        fprintf(stdout, "torture: FAIL: %s [seed=%" PRIu64 " thread=%s]\n", msg, g_seed, who);
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

static inline uint64_t rnd(thr_t *t) { return splitmix64(&t->rng); }
static inline unsigned rndn(thr_t *t, unsigned n) { return (unsigned)(rnd(t) % n); }

/* Without swap: uniform in [min, max].  With swap: log-uniform (a uniform
 * power-of-two octave, then uniform inside it), so that most entries are
 * small and a few are large. */
static size_t entry_size(uint64_t k)
{
    uint64_t h = mix3(g_seed, k, 0x5157u);
    if (!g_swap || g_size_min == g_size_max)
        return g_size_min + (size_t)(h % (g_size_max - g_size_min + 1));
    unsigned octaves = 0;
    while (octaves < 40 && (g_size_min << (octaves + 1)) <= g_size_max)
        octaves++;
    unsigned e = (unsigned)(h % (octaves + 1));
    size_t lo = g_size_min << e;
    size_t hi = e == octaves ? g_size_max : (g_size_min << (e + 1)) - 1;
    return lo + (size_t)(mix3(g_seed, k, 0x5158u) % (hi - lo + 1));
}

/* Content style of an entry.  0: random words.  With swap also 1: each
 * random word repeated 16 times, 2: one random word in 8, zeros between
 * (both compress well with LZ4). */
static inline unsigned style_of(uint64_t k)
{
    return g_swap ? (unsigned)(mix3(g_seed, k, 0xC0u) % 3) : 0u;
}

/* The body word w (w >= 1: bytes 8w .. 8w+7) of a stream. */
static inline uint64_t body_word(unsigned style, uint64_t *x, uint64_t *cur, size_t w)
{
    switch (style) {
    case 1:
        if ((w - 1) % 16 == 0)
            *cur = splitmix64(x);
        return *cur;
    case 2:
        return w % 8 == 0 ? splitmix64(x) : 0;
    default:
        return splitmix64(x);
    }
}

/* Writes bytes [8, size) of version ver (writers never touch bytes 0..7). */
static void fill_body(unsigned char *p, size_t size, uint64_t k, uint32_t ver)
{
    uint64_t x = mix3(g_seed, k, 0x1000000ull + ver), cur = 0;
    unsigned style = style_of(k);
    for (size_t i = 8; i < size; i += 8) {
        uint64_t v = body_word(style, &x, &cur, i / 8);
        size_t n = size - i < 8 ? size - i : 8;
        memcpy(p + i, &v, n);
    }
}

static void fill(unsigned char *p, size_t size, uint64_t k, uint32_t ver)
{
    memcpy(p, &k, 8);
    fill_body(p, size, k, ver);
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
    uint64_t x = mix3(g_seed, k, 0x1000000ull + ver), cur = 0;
    unsigned style = style_of(k);
    for (size_t i = 8; i < size; i += 8) {
        uint64_t v = body_word(style, &x, &cur, i / 8);
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

/* A new block for entry k (header set, bytes not). */
static unsigned char *blk_new(uint64_t k, size_t size, uint32_t ver, uint32_t loaded)
{
    char *m = malloc(BLK_HDR + size);
    if (m == NULL)
        oom();
    blk_t *b = (blk_t *)(void *)m;
    memset(b, 0, BLK_HDR);
    b->magic = BLK_LIVE;
    b->k = k;
    atomic_init(&b->version, ver);
    atomic_init(&b->pins, 0);
    atomic_init(&b->escaped, 0);
    b->loaded = loaded;
    return (unsigned char *)m + BLK_HDR;
}

static void blk_del(void *data, size_t size)
{
    blk_t *b = blk_of(data);
    b->magic = BLK_DEAD;
    memset(data, 0xDD, size);
    free(b);
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
        if (n == NULL)
            oom();
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

static inline unsigned rec_kind(rec_t *r)
{
    return atomic_load_explicit(&r->kind, memory_order_relaxed);
}

static inline size_t rec_size(rec_t *r)
{
    return atomic_load_explicit(&r->size, memory_order_relaxed);
}

static inline int has_blk(rec_t *r) { return rec_kind(r) != KIND_FLAT; }

static const pp_type_t *type_of(unsigned kind)
{
    return kind == KIND_FREE ? &g_type : kind == KIND_SWAP ? &g_swap_type : NULL;
}

/* Read token: 1 if taken (the contents may be read until read_untoken). */
static int read_token(rec_t *r)
{
    int32_t v = atomic_load_explicit(&r->rw, memory_order_relaxed);
    while (v >= 0) {
        /* acquire: the writer's rewrite and version happen before our reads */
        if (atomic_compare_exchange_weak_explicit(&r->rw, &v, v + 1, memory_order_acquire,
                                                  memory_order_relaxed))
            return 1;
    }
    return 0;
}

static void read_untoken(rec_t *r)
{
    /* release: our reads of the contents happen before a writer's rewrite */
    atomic_fetch_sub_explicit(&r->rw, 1, memory_order_release);
}

static int write_token(rec_t *r)
{
    int32_t z = 0;
    /* acquire: the last readers' reads happen before our rewrite */
    return atomic_compare_exchange_strong_explicit(&r->rw, &z, -1, memory_order_acquire,
                                                   memory_order_relaxed);
}

static void write_untoken(rec_t *r)
{
    /* release: the rewrite and the new version happen before later readers */
    atomic_store_explicit(&r->rw, 0, memory_order_release);
}

/* Budgets (swap mode only; always granted otherwise). */
static int budget_take(_Atomic int64_t *b, int64_t limit, int64_t n)
{
    if (!g_swap)
        return 1;
    int64_t cur = atomic_fetch_add_explicit(b, n, memory_order_relaxed);
    if (cur + n > limit) {
        atomic_fetch_sub_explicit(b, n, memory_order_relaxed);
        return 0;
    }
    return 1;
}

static void budget_put(_Atomic int64_t *b, int64_t n)
{
    if (g_swap)
        atomic_fetch_sub_explicit(b, n, memory_order_relaxed);
}

/* ------------------------------------------------------------------------ */
/* The types' callbacks (run on pool threads)                                */
/* ------------------------------------------------------------------------ */

/* The entry a buffer names (its first 8 bytes), or NULL. */
static rec_t *rec_of_data(const void *data, uint64_t *kout)
{
    uint64_t k;
    memcpy(&k, data, 8);
    *kout = k;
    return k < atomic_load(&g_nids) ? rec_get(k) : NULL;
}

static void stress_free(void *data, size_t size, void *ctx)
{
    if (ctx != (void *)&g_nids)
        failf(NULL, "free function got ctx %p, expected %p", ctx, (void *)&g_nids);
    if (tl_user)
        failf(NULL, "free function called on a user thread (it runs on pool threads only)");
    if (data == NULL || size < 16) {
        failf(NULL, "free function called with data %p size %zu", data, size);
        return;
    }
    uint64_t k;
    rec_t *r = rec_of_data(data, &k);
    blk_t *b = blk_of(data);
    if (r == NULL || b->magic != BLK_LIVE || b->k != k) {
        failf(NULL, "free function: buffer %p (size %zu) names no live block (header %#" PRIx64
              ", block magic %#" PRIx64 " k %" PRIu64 ")", data, size, k, b->magic, b->k);
        return;
    }
    unsigned kind = rec_kind(r);
    uint32_t f = atomic_fetch_add_explicit(&r->frees, 1, memory_order_acq_rel) + 1;
    uint32_t made = atomic_load(&r->blocks);
    if (kind == KIND_FLAT)
        failf(NULL, "entry %" PRIu64 " of type NULL freed with the free function of a type", k);
    if (f > made) {
        failf(NULL, "entry %" PRIu64 " (ref %#" PRIx64 "): free function called %u times for "
              "%u block(s) made", k, rec_ref(r), f, made);
        return;
    }
    /* Relaxed, as every decrement of the program's pin counts: only the
     * pool's unpin (release) and reclaim (acquire) may order a pinner's
     * uses before this free, so that TSan sees a pool that fails to
     * (seeded.relaxed_unpin) rather than the program's own ordering. */
    int32_t bp = atomic_load_explicit(&b->pins, memory_order_relaxed);
    if (bp != 0)
        failf(NULL, "entry %" PRIu64 " (ref %#" PRIx64 "): block %p freed while the program "
              "holds %d pin(s) that returned it", k, rec_ref(r), data, bp);
    if (size != rec_size(r))
        failf(NULL, "entry %" PRIu64 " freed with size %zu, put with %zu", k, size, rec_size(r));
    else {
        uint32_t ver = atomic_load(&b->version);
        long off = verify(data, size, k, ver);
        if (off >= 0)
            failf(NULL, "entry %" PRIu64 " corrupted when freed: byte %ld of %zu is %#x "
                  "(version %u)", k, off, size, ((unsigned char *)data)[off], ver);
    }
    int tid = (int)syscall(SYS_gettid);
    unsigned node = rec_node(r);
    int reclaim = node < g_nnodes && tid == g_rtid[node];
    for (unsigned n = 0; n < g_nnodes && !reclaim; n++)
        if (tid == g_rtid[n])
            failf(NULL, "entry %" PRIu64 " of node %u freed on node %u's reclaimer", k, node, n);
    if (reclaim) {
        uint32_t z = 0;
        /* release: pairs with find_stale's acquire (the entry is gone) */
        if (!atomic_compare_exchange_strong_explicit(&r->reclaimed, &z, 1, memory_order_acq_rel,
                                                     memory_order_relaxed))
            failf(NULL, "entry %" PRIu64 " (ref %#" PRIx64 ") reclaimed twice", k, rec_ref(r));
        if (atomic_load(&r->state) != 2)
            failf(NULL, "entry %" PRIu64 " reclaimed but its pp_put never returned success", k);
        int32_t o = atomic_load(&r->owners), p = atomic_load_explicit(&r->pins, memory_order_relaxed);
        int32_t q = atomic_load(&r->qsbr_holders);
        if (o != 0)
            failf(NULL, "entry %" PRIu64 " (ref %#" PRIx64 ") freed while the program holds %d "
                  "owner(s)", k, rec_ref(r), o);
        if (p != 0)
            failf(NULL, "entry %" PRIu64 " (ref %#" PRIx64 ") freed while the program holds %d "
                  "pin(s)", k, rec_ref(r), p);
        if (q != 0)
            failf(NULL, "entry %" PRIu64 " (ref %#" PRIx64 ") freed while %d QSBR thread(s) still "
                  "use its pp_get pointer (before their pp_quiescent)", k, rec_ref(r), q);
        atomic_store(&r->free_tid, tid);
        if (atomic_load(&r->forever))
            budget_put(&g_forever_bytes, (int64_t)size);
        atomic_fetch_add(&g_frees_node[node], 1);
        atomic_fetch_add(&g_frees_total, 1);
    } else {
        /* An eviction: only on the entry's swap thread, never for data the
         * pool must keep resident. */
        if (!g_swap)
            failf(NULL, "entry %" PRIu64 " of node %u freed on thread %d, not on the node's "
                  "reclaimer %d, in a pool without swap", k, node, tid,
                  node < g_nnodes ? g_rtid[node] : -1);
        else if (kind != KIND_SWAP)
            failf(NULL, "entry %" PRIu64 " of a type that is never evicted (no save/load) "
                  "freed outside its reclaimer (thread %d)", k, tid);
        if (atomic_load(&b->escaped))
            failf(NULL, "entry %" PRIu64 " (ref %#" PRIx64 "): block %p returned by pp_get "
                  "(escaped: never evicted) freed by an eviction", k, rec_ref(r), data);
        atomic_fetch_add(&r->evict_frees, 1);
        atomic_fetch_add(&g_evict_frees, 1);
    }
    blk_del(data, size);
}

#define TRAILER_MAGIC 0x7A11E5u
typedef struct trailer { uint64_t k; uint32_t version; uint32_t magic; } trailer_t;

/* Writes the entry in chunks of random sizes, then a trailer naming the
 * version: the copy's length is not the entry's size. */
static int stress_save(const void *data, size_t size, pp_writer_t *w, void *ctx)
{
    atomic_fetch_add(&g_saves, 1);
    if (ctx != (void *)&g_nids)
        failf(NULL, "save got ctx %p, expected %p", ctx, (void *)&g_nids);
    if (tl_user)
        failf(NULL, "save called on a user thread (evictions run on the swap threads)");
    if (data == NULL || size < 16) {
        failf(NULL, "save called with data %p size %zu", data, size);
        return 1;
    }
    uint64_t k;
    rec_t *r = rec_of_data(data, &k);
    const blk_t *b = blk_of(data);
    if (r == NULL || b->magic != BLK_LIVE || b->k != k || rec_kind(r) != KIND_SWAP ||
        size != rec_size(r)) {
        failf(NULL, "save: buffer %p (size %zu) names no live block of a swappable entry "
              "(header %#" PRIx64 ")", data, size, k);
        return 1;
    }
    /* No pin is held: the bytes are the entry's last version. */
    uint32_t ver = atomic_load(&r->version);
    uint32_t bver = atomic_load(&b->version);
    long off = verify(data, size, k, ver);
    if (bver != ver || off >= 0) {
        failf(NULL, "save of entry %" PRIu64 " (ref %#" PRIx64 "): block version %u, entry "
              "version %u, first wrong byte %ld (a write under a pin lost, or the data changed "
              "while unpinned)", k, rec_ref(r), bver, ver, off);
        return 1;
    }
    uint64_t x = mix3(k, ver, atomic_load(&g_saves));
    size_t done = 0;
    int rc = 0;
    while (done < size && rc == 0) {
        size_t n = 1 + (size_t)(splitmix64(&x) % (size / 3 + 1));
        if (n > size - done)
            n = size - done;
        rc = pp_write(w, (const char *)data + done, n);
        done += n;
        if (rc == 0 && (splitmix64(&x) & 15) == 0)
            rc = pp_write(w, NULL, 0);
    }
    trailer_t tr = { k, ver, TRAILER_MAGIC };
    if (rc == 0)
        rc = pp_write(w, &tr, sizeof tr);
    if (rc == PP_EAGAIN) {               /* pinned meanwhile: abandon */
        atomic_fetch_add(&g_saves_lost, 1);
        return 1;
    }
    if (rc != 0) {
        if (!(rc == PP_EIO && g_swap_limit != 0) && !(g_faults && rc == PP_ENOMEM))
            failf(NULL, "pp_write in save of entry %" PRIu64 ": %s", k, pp_err_name(rc));
        return 1;
    }
    atomic_fetch_add(&g_saves_ok, 1);
    return 0;
}

static int stress_load(void **data, size_t size, pp_reader_t *rd, void *ctx)
{
    atomic_fetch_add(&g_load_calls, 1);
    if (ctx != (void *)&g_nids)
        failf(NULL, "load got ctx %p, expected %p", ctx, (void *)&g_nids);
    size_t left = pp_read_left(rd);
    if (data == NULL || size < 16 || left != size + sizeof(trailer_t)) {
        failf(NULL, "load called with data %p size %zu and %zu bytes to read (save wrote %zu)",
              (void *)data, size, left, size + sizeof(trailer_t));
        return 1;
    }
    unsigned char *d = blk_new(0, size, 0, 1);
    uint64_t x = mix3(size, left, 0x10ADu);
    size_t done = 0;
    while (done < size) {
        size_t n = 1 + (size_t)(splitmix64(&x) % (size / 2 + 1));
        if (n > size - done)
            n = size - done;
        int rc = pp_read(rd, d + done, n);
        if (rc != 0) {
            failf(NULL, "pp_read of %zu bytes at %zu of %zu: %s", n, done, size, pp_err_name(rc));
            blk_del(d, size);
            return 1;
        }
        done += n;
    }
    trailer_t tr;
    unsigned char extra;
    int rc = pp_read(rd, &tr, sizeof tr);
    int rc2 = pp_read(rd, &extra, 1);
    if (rc != 0 || rc2 != PP_EINVAL || pp_read_left(rd) != 0) {
        failf(NULL, "load: trailer pp_read %s, read past the end %s (expected PP_EINVAL), "
              "%zu left", pp_err_name(rc), pp_err_name(rc2), pp_read_left(rd));
        blk_del(d, size);
        return 1;
    }
    uint64_t k;
    rec_t *r = rec_of_data(d, &k);
    if (r == NULL || rec_kind(r) != KIND_SWAP || rec_size(r) != size) {
        failf(NULL, "load: the copy names entry %" PRIu64 " (size %zu), not a swappable entry "
              "of that size", k, size);
        blk_del(d, size);
        return 1;
    }
    /* The entry is not resident, so nobody can be writing it: the copy
     * must be of its last version (a lost write shows here). */
    uint32_t ver = atomic_load(&r->version);
    long off = verify(d, size, k, ver);
    if (tr.k != k || tr.version != ver || tr.magic != TRAILER_MAGIC || off >= 0)
        failf(NULL, "load of entry %" PRIu64 " (ref %#" PRIx64 "): copy of version %u "
              "(trailer k %" PRIu64 " magic %#x), entry is at version %u, first wrong byte %ld",
              k, rec_ref(r), tr.version, tr.k, tr.magic, ver, off);
    blk_t *b = blk_of(d);
    b->k = k;
    atomic_store_explicit(&b->version, ver, memory_order_relaxed);
    /* Counted before the pool can see the block (and free it). */
    atomic_fetch_add(&r->blocks, 1);
    atomic_fetch_add(&r->loads, 1);
    *data = d;
    return 0;
}

static const pp_type_t g_type = {
    "stress", stress_free, NULL, NULL, (void *)&g_nids, 0u
};

static const pp_type_t g_swap_type = {
    "stress-swap", stress_free, stress_save, stress_load, (void *)&g_nids, 0u
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

/* Full check: the caller holds a read token (or the write token). */
static void check_contents(thr_t *t, uint64_t k, const void *ptr, const char *where)
{
    rec_t *r = rec_get(k);
    if (ptr == NULL) {
        failf(t, "%s: NULL data pointer for entry %" PRIu64, where, k);
        return;
    }
    size_t size = rec_size(r);
    uint32_t ver = atomic_load_explicit(&r->version, memory_order_relaxed);
    if (has_blk(r)) {
        const blk_t *b = blk_of(ptr);
        uint32_t bver = atomic_load_explicit(&b->version, memory_order_relaxed);
        if (b->magic != BLK_LIVE || b->k != k || bver != ver) {
            failf(t, "%s: entry %" PRIu64 " (ref %#" PRIx64 "): pointer %p is not a live block "
                  "of it (magic %#" PRIx64 "%s, k %" PRIu64 ", block version %u, entry version "
                  "%u)", where, k, rec_ref(r), ptr, b->magic,
                  b->magic == BLK_DEAD ? ": freed" : "", b->k, bver, ver);
            return;
        }
    }
    long off = verify(ptr, size, k, ver);
    if (off >= 0)
        failf(t, "%s: entry %" PRIu64 " (ref %#" PRIx64 ", size %zu, version %u) corrupted: "
              "byte %ld is %#x%s", where, k, rec_ref(r), size, ver, off,
              ((const unsigned char *)ptr)[off],
              ((const unsigned char *)ptr)[off] == 0xDD ? " (poisoned: freed)" : "");
}

/* Blind check: only the bytes no writer touches. */
static void check_header(thr_t *t, uint64_t k, const void *ptr, const char *where)
{
    uint64_t h;
    if (ptr == NULL) {
        failf(t, "%s: NULL data pointer for entry %" PRIu64, where, k);
        return;
    }
    memcpy(&h, ptr, 8);
    if (h != k)
        failf(t, "%s: entry %" PRIu64 " (ref %#" PRIx64 "): first 8 bytes hold %#" PRIx64,
              where, k, rec_ref(rec_get(k)), h);
}

static void check_pin(thr_t *t, const hpin_t *h, const char *where)
{
    if (h->checked)
        check_contents(t, h->k, h->ptr, where);
    else
        check_header(t, h->k, h->ptr, where);
}

/* A pin call failed with rc; PP_ENOMEM (swap mode) and PP_EAGAIN (with
 * PP_PIN_NOWAIT) are allowed and counted, anything else fails the run. */
/* What the pool held at the first few PP_ENOMEMs (for --verbose). */
#define ENOMEM_NOTES 6
static char g_enomem_note[ENOMEM_NOTES][256];
static atomic_int g_enomem_notes;

static void note_enomem(thr_t *t, const char *call, size_t size)
{
    t->enomem++;
    int i = atomic_fetch_add(&g_enomem_notes, 1);
    if (i >= ENOMEM_NOTES)
        return;
    pp_stats_t *st = malloc(sizeof *st);
    if (st == NULL || pp_pool_stats(g_pool, st) != 0) {
        free(st);
        return;
    }
    snprintf(g_enomem_note[i], sizeof g_enomem_note[i],
             "%s of %zu bytes: resident_reserved %" PRIu64 " (entries resident %" PRIu64
             "), reclaim queue %" PRIu64 " entries, program pins %" PRId64 " bytes, escaped "
             "or never-evicted %" PRId64 " bytes", call, size, st->resident_reserved,
             st->total.resident_bytes, st->total.reclaim_queue_depth,
             atomic_load(&g_pin_bytes), atomic_load(&g_forever_bytes));
    free(st);
}

/* With --faults: rc is a documented error that an injected fault explains
 * (counted).  The data is checked again by every later pin. */
static int fault_rc(thr_t *t, int rc)
{
    if (!g_faults)
        return 0;
    switch (rc) {
    case PP_EIO:      t->fault_eio++; return 1;
    case PP_ECORRUPT: t->fault_ecorrupt++; return 1;
    case PP_ENOMEM:   t->fault_enomem++; return 1;
    default:          return 0;
    }
}

static void pin_error(thr_t *t, int rc, const char *call, unsigned flags, uint64_t k)
{
    if (fault_rc(t, rc))
        return;
    if (g_swap && rc == PP_ENOMEM) {
        note_enomem(t, call, rec_size(rec_get(k)));
        return;
    }
    if (g_swap && rc == PP_EAGAIN && (flags & PP_PIN_NOWAIT)) {
        t->eagain++;
        return;
    }
    rec_t *r = rec_get(k);
    failf(t, "%s(flags %#x) of an owned entry %" PRIu64 " (ref %#" PRIx64 "): %s", call, flags,
          k, rec_ref(r), pp_err_name(rc));
}

#define PIN_SKIPPED 1

/* Pins entry k, which the caller holds an owner of (private or borrowed).
 * budget: count its bytes against the pin budget (swap mode).  Returns 0
 * (h filled, contents checked), PIN_SKIPPED (over the budget), or the
 * pool's error (already counted or reported by pin_error). */
static int pin_take(thr_t *t, uint64_t k, unsigned flags, int budget, hpin_t *h)
{
    rec_t *r = rec_get(k);
    size_t size = rec_size(r);
    if (budget && !budget_take(&g_pin_bytes, g_pin_budget, (int64_t)size)) {
        t->budget_skips++;
        return PIN_SKIPPED;
    }
    int checked = read_token(r);
    atomic_fetch_add(&r->pins, 1);
    void *d = NULL;
    if (g_swap && !(flags & PP_PIN_NOWAIT))
        t->room_calls++;
    int rc = pp_pin(g_pool, rec_ref(r), flags, &d);
    if (rc != 0) {
        atomic_fetch_sub_explicit(&r->pins, 1, memory_order_relaxed);
        if (checked)
            read_untoken(r);
        if (budget)
            budget_put(&g_pin_bytes, (int64_t)size);
        pin_error(t, rc, "pp_pin", flags, k);
        return rc;
    }
    atomic_fetch_add_explicit(&g_outstanding[t->idx], 1, memory_order_relaxed);
    t->cnt[rec_node(r)].pins++;
    if (!checked)
        t->blind_pins++;
    h->k = k;
    h->ptr = d;
    h->origin = t->idx;
    h->checked = (unsigned char)checked;
    h->budget = (unsigned char)budget;
    if (has_blk(r) && d != NULL)
        atomic_fetch_add(&blk_of(d)->pins, 1);
    check_pin(t, h, "after pp_pin");
    return 0;
}

/* Drops a pin taken by pin_take (on any thread). */
static void pin_drop(thr_t *t, const hpin_t *h)
{
    rec_t *r = rec_get(h->k);
    check_pin(t, h, "before pp_unpin");
    if (has_blk(r) && h->ptr != NULL)
        atomic_fetch_sub_explicit(&blk_of(h->ptr)->pins, 1, memory_order_relaxed);
    if (h->checked)
        read_untoken(r);
    atomic_fetch_sub_explicit(&r->pins, 1, memory_order_relaxed);
    int rc = pp_unpin(g_pool, rec_ref(r));
    if (rc != 0)
        failf(t, "pp_unpin of a pinned entry %" PRIu64 " (ref %#" PRIx64 "): %s",
              h->k, rec_ref(r), pp_err_name(rc));
    else
        t->cnt[rec_node(r)].unpins++;
    if (h->budget)
        budget_put(&g_pin_bytes, (int64_t)rec_size(r));
    /* release: the unpin is complete before the pin's thread sees 0 */
    atomic_fetch_sub_explicit(&g_outstanding[h->origin], 1, memory_order_release);
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
    /* Without swap a live entry is resident; with swap it is resident or
     * has a swap copy (or both), and it is never both loading and resident. */
    unsigned where = g_swap ? (PP_STATE_RESIDENT | PP_STATE_SWAPPED) : PP_STATE_RESIDENT;
    int bad_state = !(in.state & where) || (in.state & PP_STATE_DEAD) ||
                    ((in.state & PP_STATE_LOADING) && (in.state & PP_STATE_RESIDENT)) ||
                    ((in.state & PP_STATE_EVICTING) && !(in.state & PP_STATE_RESIDENT)) ||
                    (!g_swap && (in.state & (PP_STATE_SWAPPED | PP_STATE_LOADING |
                                             PP_STATE_EVICTING)));
    if (in.size != rec_size(r) || in.node != rec_node(r) || in.type != type_of(rec_kind(r)) ||
        in.owners < 1 || in.pins > PP_MAX_PINS || bad_state ||
        (expect_escaped && !(in.state & PP_STATE_ESCAPED)))
        failf(t, "pp_stat of live entry %" PRIu64 " (ref %#" PRIx64 "): size %zu (put %zu) "
              "node %u (expected %u) type %p (expected %p) owners %u pins %u state %#x%s", k,
              rec_ref(r), in.size, rec_size(r), in.node, rec_node(r), (const void *)in.type,
              (const void *)type_of(rec_kind(r)), in.owners, in.pins, in.state,
              expect_escaped ? " (expected ESCAPED)" : "");
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
    pin_drop(t, h);
    free(h);
}

static void held_push(thr_t *t, hpin_t *h)
{
    if (t->nheld >= g_held_cap)
        held_drop_at(t, (int)rndn(t, (unsigned)t->nheld));
    t->held[t->nheld++] = h;
}

static void hold_pin(thr_t *t, const hpin_t *src)
{
    hpin_t *h = malloc(sizeof *h);
    if (h == NULL)
        oom();
    *h = *src;
    held_push(t, h);
}

/* ------------------------------------------------------------------------ */
/* QSBR escaped pointers                                                     */
/* ------------------------------------------------------------------------ */

static void quiesce(thr_t *t)
{
    for (int i = 0; i < t->nesc; i++) {
        rec_t *r = rec_get(t->esc[i].k);
        if (t->esc[i].checked) {
            check_contents(t, t->esc[i].k, t->esc[i].ptr,
                           "QSBR pp_get pointer before pp_quiescent");
            read_untoken(r);
        } else {
            check_header(t, t->esc[i].k, t->esc[i].ptr, "QSBR pp_get pointer before pp_quiescent");
        }
        atomic_fetch_sub(&r->qsbr_holders, 1);
    }
    t->nesc = 0;
    pp_quiescent(g_pool);
    t->opcount[OP_QUIESCE]++;
}

/* In swap mode an escaped entry stays resident until it dies: count it in
 * the forever budget once (released when it is reclaimed).  Flat entries
 * are never escaped there (their reclamation cannot be observed). */
static int escape_budget(thr_t *t, rec_t *r)
{
    if (!g_swap || atomic_load(&r->forever))
        return 1;
    if (rec_kind(r) == KIND_FLAT ||
        !budget_take(&g_forever_bytes, g_forever_budget, (int64_t)rec_size(r))) {
        t->escape_skips++;
        return 0;
    }
    uint32_t z = 0;
    if (!atomic_compare_exchange_strong(&r->forever, &z, 1))
        budget_put(&g_forever_bytes, (int64_t)rec_size(r));
    return 1;
}

/* pp_get on k (caller holds an owner); keeps the pointer under QSBR.
 * Returns 1 if pp_get succeeded. */
static int get1(thr_t *t, uint64_t k)
{
    rec_t *r = rec_get(k);
    if (!escape_budget(t, r))
        return 0;
    int checked = read_token(r);
    void *d = NULL;
    if (g_swap)
        t->room_calls++;
    int rc = pp_get(g_pool, rec_ref(r), &d);
    if (rc != 0) {
        if (checked)
            read_untoken(r);
        if (fault_rc(t, rc))
            ;
        else if (g_swap && rc == PP_ENOMEM)
            note_enomem(t, "pp_get", rec_size(r));
        else
            failf(t, "pp_get of an owned entry %" PRIu64 ": %s", k, pp_err_name(rc));
        return 0;
    }
    t->cnt[rec_node(r)].gets++;
    if (has_blk(r) && d != NULL)
        atomic_store(&blk_of(d)->escaped, 1);
    if (checked)
        check_contents(t, k, d, "after pp_get");
    else
        check_header(t, k, d, "after pp_get");
    if (g_qsbr) {
        if (t->nesc == ESC_CAP)
            quiesce(t);
        atomic_fetch_add(&r->qsbr_holders, 1);
        t->esc[t->nesc].k = k;
        t->esc[t->nesc].ptr = d;
        t->esc[t->nesc].checked = checked;
        t->nesc++;
    } else if (checked) {
        read_untoken(r);
    }
    return 1;
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

/* A ref whose entry has been reclaimed, or PP_REF_NONE. */
static pp_ref_t find_stale(thr_t *t, uint64_t *kout)
{
    uint64_t n = atomic_load_explicit(&g_nids, memory_order_relaxed);
    if (n == 0)
        return PP_REF_NONE;
    for (int tries = 0; tries < 6; tries++) {
        uint64_t k = rnd(t) % n;
        rec_t *r = rec_get(k);
        /* acquire: pairs with the free function's acq_rel exchange */
        if (r && atomic_load_explicit(&r->reclaimed, memory_order_acquire) != 0) {
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
    switch (rndn(t, 13)) {
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
    case 11:
        expect_stale(t, pp_pin(g_pool, ref, PP_PIN_NOWAIT, &d), "pp_pin(NOWAIT)", ref, k);
        break;
    default: {
        /* A live owned entry and a stale one: all or none. */
        if (t->nowned == 0) {
            expect_stale(t, pp_pin(g_pool, ref, 0, NULL), "pp_pin", ref, k);
            break;
        }
        uint64_t ok = t->owned[rndn(t, (unsigned)t->nowned)];
        pp_ref_t two[2] = { rec_ref(rec_get(ok)), ref };
        int rc = pp_pin_many(g_pool, two, 2, 0, dv);
        t->failed_many_live++;
        /* The first error is returned: with swap the live entry may be
         * loaded first and find no room. */
        if (fault_rc(t, rc)) {
            ;
        } else if (g_swap && rc == PP_ENOMEM) {
            t->room_calls++;
            t->enomem++;
        } else {
            expect_stale(t, rc, "pp_pin_many(live, stale)", ref, k);
        }
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
    switch (rndn(t, 6)) {
    case 0: rc = pp_pin(g_pool, ref, 0, &d); break;
    case 1: rc = pp_retain(g_pool, ref); break;
    case 2: rc = pp_release(g_pool, ref); break;
    case 3: rc = pp_unpin(g_pool, ref); break;
    case 4: rc = pp_prefetch(g_pool, ref); break;
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
    /* With swap, a fresh entry may already be evicted (or being evicted),
     * or evicted and loaded back by our own earlier calls: never dirty
     * (nobody pinned it for write), escaped, dead or loading. */
    int state_ok = g_swap ? (in.state & ~(unsigned)(PP_STATE_RESIDENT | PP_STATE_SWAPPED |
                                                    PP_STATE_EVICTING)) == 0 &&
                                (in.state & (PP_STATE_RESIDENT | PP_STATE_SWAPPED)) != 0
                          : in.state == PP_STATE_RESIDENT;
    if (in.size != rec_size(r) || in.owners != 1 || in.pins != 0 || in.node != node ||
        in.type != type_of(rec_kind(r)) || !state_ok)
        failf(t, "pp_stat of a fresh entry %" PRIu64 " (ref %#" PRIx64 "): size %zu owners %u "
              "pins %u node %u type %p state %#x; expected size %zu owners 1 pins 0 node %u "
              "state %s", k, ref, in.size, in.owners, in.pins, in.node,
              (const void *)in.type, in.state, rec_size(r), node,
              g_swap ? "RESIDENT and/or SWAPPED (EVICTING)" : "RESIDENT only");

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
        if (fault_rc(t, rc)) {
            ;
        } else if (g_swap && rc == PP_ENOMEM) { /* the fresh one first: no room */
            t->room_calls++;
            t->enomem++;
        } else if (rc != PP_ESTALE)
            failf(t, "pp_pin_many(fresh %" PRIu64 ", stale %#" PRIx64 ", fresh): got %s, expected "
                  "PP_ESTALE", k, stale, pp_err_name(rc));
        if (stat_pins(t, k, 0, "a failed pp_pin_many") != 0)
            return;
    }

    /* Nested pins, and unpin_many checks counts before unpinning. */
    hpin_t h;
    if (pin_take(t, k, 0, 1, &h) != 0)
        return;
    void *d = h.ptr;
    pp_ref_t two[2] = { ref, ref };
    CHECK_RC(t, pp_unpin_many(g_pool, two, 2), PP_ENOTPINNED,
             "pp_unpin_many(x, x) of an entry with one pin", k);
    if (stat_pins(t, k, 1, "a failed pp_unpin_many") != 0)
        return;
    /* Pinned, so resident: PP_PIN_NOWAIT must not say PP_EAGAIN. */
    if (g_swap) {
        void *dn = NULL;
        atomic_fetch_add(&r->pins, 1);
        rc = pp_pin(g_pool, ref, PP_PIN_NOWAIT, &dn);
        t->nowait_pinned++;
        if (rc != 0 || dn != d) {
            atomic_fetch_sub_explicit(&r->pins, 1, memory_order_relaxed);
            failf(t, "pp_pin(NOWAIT) of fresh entry %" PRIu64 " while pinned (resident): %s, "
                  "pointer %p (pin gave %p)", k, pp_err_name(rc), dn, d);
        } else {
            t->cnt[node].pins++;
            atomic_fetch_sub_explicit(&r->pins, 1, memory_order_relaxed);
            rc = pp_unpin(g_pool, ref);
            if (rc != 0)
                failf(t, "pp_unpin after pp_pin(NOWAIT): %s", pp_err_name(rc));
            else
                t->cnt[node].unpins++;
        }
    }
    pp_ref_t three[3] = { ref, ref, ref };
    void *dv[3] = { NULL, NULL, NULL };
    atomic_fetch_add(&r->pins, 3);
    rc = pp_pin_many(g_pool, three, 3, PP_PIN_WRITE, dv);
    if (rc != 0) {
        atomic_fetch_sub_explicit(&r->pins, 3, memory_order_relaxed);
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
            if (rc == 0 && (!(in.state & PP_STATE_RESIDENT) || (in.state & PP_STATE_LOADING)))
                failf(t, "pinned entry %" PRIu64 " is not resident (state %#x)", k, in.state);
        }
        atomic_fetch_sub_explicit(&r->pins, 3, memory_order_relaxed);
        rc = pp_unpin_many(g_pool, three, 3);
        if (rc != 0)
            failf(t, "pp_unpin_many(x, x, x) of an entry with 4 pins: %s", pp_err_name(rc));
        else
            t->cnt[node].unpins += 3;
        stat_pins(t, k, 1, "pp_unpin_many x3");
    }
    pin_drop(t, &h);
    stat_pins(t, k, 0, "the last unpin");
}

static void op_put(thr_t *t)
{
    rec_t *r;
    uint64_t k = rec_new(t, &r);
    if (r == NULL)
        return;
    size_t size = entry_size(k);
    unsigned kind = KIND_FREE;
    if (g_swap) {
        unsigned c = rndn(t, 100);
        kind = c < g_flat_pct ? KIND_FLAT : KIND_SWAP;
        /* A few never-evicted entries, within the forever budget. */
        if (kind == KIND_SWAP && c >= 95 &&
            budget_take(&g_forever_bytes, g_forever_budget, (int64_t)size)) {
            kind = KIND_FREE;
            atomic_store_explicit(&r->forever, 1, memory_order_relaxed);
        }
    }
    unsigned char *buf = kind == KIND_FLAT ? malloc(size) : blk_new(k, size, 0, 0);
    if (buf == NULL)
        oom();
    fill(buf, size, k, 0);
    atomic_store_explicit(&r->size, (uint32_t)size, memory_order_relaxed);
    atomic_store_explicit(&r->kind, kind, memory_order_relaxed);
    atomic_store_explicit(&r->owners, 1, memory_order_relaxed);
    atomic_store_explicit(&r->state, 1, memory_order_relaxed);
    /* Counted before the pool has it: an eviction may free it at once. */
    if (kind != KIND_FLAT)
        atomic_store_explicit(&r->blocks, 1, memory_order_relaxed);
    unsigned flags = 0, want = 0;
    if (rnd(t) & 1) {
        want = rndn(t, g_nnodes);
        flags = PP_ON_NODE(want);
    }
    pp_ref_t ref = PP_REF_NONE;
    if (g_swap)
        t->room_calls++;
    int rc = pp_put(g_pool, buf, size, type_of(kind), flags, &ref);
    if (rc != 0) {
        if (fault_rc(t, rc))
            ;
        else if (g_swap && rc == PP_ENOMEM)
            note_enomem(t, "pp_put", size);
        else
            failf(t, "pp_put(size %zu, flags %#x): %s", size, flags, pp_err_name(rc));
        atomic_store(&r->owners, 0);
        atomic_store(&r->blocks, 0);
        atomic_store(&r->state, 3);
        if (atomic_load(&r->forever)) {
            budget_put(&g_forever_bytes, (int64_t)size);
            atomic_store(&r->forever, 0);
        }
        if (kind == KIND_FLAT)
            free(buf);
        else
            blk_del(buf, size);
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
    hpin_t hs[MAX_BATCH];
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
    int64_t bytes = 0;
    for (int i = 0; i < n; i++)
        bytes += (int64_t)rec_size(rec_get(ks[i]));
    if (n > 0 && !budget_take(&g_pin_bytes, g_pin_budget, bytes)) {
        t->budget_skips++;
        n = 0;
    }
    if (n > 0) {
        unsigned flags = rndn(t, 4) == 0 ? PP_PIN_WRITE : 0;
        if (g_swap && rndn(t, 4) == 0)
            flags |= PP_PIN_NOWAIT;
        for (int i = 0; i < n; i++) {
            rec_t *r = rec_get(ks[i]);
            refs[i] = rec_ref(r);
            hs[i].k = ks[i];
            hs[i].origin = t->idx;
            hs[i].budget = 1;
            hs[i].checked = (unsigned char)read_token(r);
            atomic_fetch_add(&r->pins, 1);
            data[i] = NULL;
        }
        t->pin_many_calls++;
        if (g_swap) {
            if (flags & PP_PIN_NOWAIT)
                t->nowait_calls++;
            else
                t->room_calls++;
        }
        int rc = pp_pin_many(g_pool, refs, (size_t)n, flags, data);
        if (rc != 0) {
            for (int i = 0; i < n; i++) {
                rec_t *r = rec_get(ks[i]);
                atomic_fetch_sub_explicit(&r->pins, 1, memory_order_relaxed);
                if (hs[i].checked)
                    read_untoken(r);
            }
            budget_put(&g_pin_bytes, bytes);
            pin_error(t, rc, "pp_pin_many", flags, ks[0]);
        } else {
            atomic_fetch_add_explicit(&g_outstanding[t->idx], n, memory_order_relaxed);
            for (int i = 0; i < n; i++) {
                rec_t *r = rec_get(ks[i]);
                hs[i].ptr = data[i];
                t->cnt[rec_node(r)].pins++;
                if (!hs[i].checked)
                    t->blind_pins++;
                if (has_blk(r) && data[i] != NULL)
                    atomic_fetch_add(&blk_of(data[i])->pins, 1);
                check_pin(t, &hs[i], "after pp_pin_many");
                if (i > 0 && ks[i] == ks[i - 1] && data[i] != data[i - 1])
                    failf(t, "pp_pin_many gave pointers %p and %p for the same entry %" PRIu64,
                          data[i - 1], data[i], ks[i]);
            }
            unsigned how = rndn(t, 8);
            if (how < 4) {
                for (int i = 0; i < n; i++) {
                    rec_t *r = rec_get(ks[i]);
                    check_pin(t, &hs[i], "before pp_unpin_many");
                    if (has_blk(r) && data[i] != NULL)
                        atomic_fetch_sub_explicit(&blk_of(data[i])->pins, 1, memory_order_relaxed);
                    if (hs[i].checked)
                        read_untoken(r);
                    atomic_fetch_sub_explicit(&r->pins, 1, memory_order_relaxed);
                }
                rc = pp_unpin_many(g_pool, refs, (size_t)n);
                if (rc != 0)
                    failf(t, "pp_unpin_many of %d pinned refs: %s", n, pp_err_name(rc));
                else
                    for (int i = 0; i < n; i++)
                        t->cnt[rec_node(rec_get(ks[i]))].unpins++;
                budget_put(&g_pin_bytes, bytes);
                atomic_fetch_sub_explicit(&g_outstanding[t->idx], n, memory_order_release);
            } else if (how < 7) {
                for (int i = n - 1; i >= 0; i--)
                    pin_drop(t, &hs[i]);
            } else {
                for (int i = 0; i < n; i++)
                    hold_pin(t, &hs[i]);
            }
        }
    }
    for (int i = 0; i < nb; i++)
        unborrow(bslots[i]);
}

/* Rewrites entry k (version + 1) under a write pin, if no other thread
 * reads or writes it (the write token). */
static void rewrite(thr_t *t, uint64_t k)
{
    rec_t *r = rec_get(k);
    if (!write_token(r)) {
        t->write_busy++;
        /* Someone reads it: a write pin without a rewrite still marks the
         * entry dirty (and is checked like any pin). */
        hpin_t h;
        if (pin_take(t, k, PP_PIN_WRITE, 1, &h) == 0)
            pin_drop(t, &h);
        return;
    }
    size_t size = rec_size(r);
    if (!budget_take(&g_pin_bytes, g_pin_budget, (int64_t)size)) {
        t->budget_skips++;
        write_untoken(r);
        return;
    }
    atomic_fetch_add(&r->pins, 1);
    void *d = NULL;
    if (g_swap)
        t->room_calls++;
    int rc = pp_pin(g_pool, rec_ref(r), PP_PIN_WRITE, &d);
    if (rc != 0) {
        atomic_fetch_sub_explicit(&r->pins, 1, memory_order_relaxed);
        budget_put(&g_pin_bytes, (int64_t)size);
        write_untoken(r);
        pin_error(t, rc, "pp_pin", PP_PIN_WRITE, k);
        return;
    }
    atomic_fetch_add_explicit(&g_outstanding[t->idx], 1, memory_order_relaxed);
    t->cnt[rec_node(r)].pins++;
    if (has_blk(r))
        atomic_fetch_add(&blk_of(d)->pins, 1);
    check_contents(t, k, d, "after pp_pin(WRITE)");
    uint32_t v = atomic_load_explicit(&r->version, memory_order_relaxed) + 1;
    fill_body(d, size, k, v);
    if (has_blk(r))
        atomic_store_explicit(&blk_of(d)->version, v, memory_order_relaxed);
    atomic_store_explicit(&r->version, v, memory_order_relaxed);
    t->writes++;
    pp_entry_info_t in;
    rc = pp_stat(g_pool, rec_ref(r), &in);
    if (rc != 0 || !(in.state & PP_STATE_DIRTY) || !(in.state & PP_STATE_RESIDENT))
        failf(t, "entry %" PRIu64 " pinned for write: pp_stat %s, state %#x (expected "
              "DIRTY and RESIDENT)", k, pp_err_name(rc), rc == 0 ? in.state : 0);
    hpin_t h = { k, d, t->idx, 1, 1 };
    check_pin(t, &h, "before pp_unpin of a rewrite");
    if (has_blk(r))
        atomic_fetch_sub_explicit(&blk_of(d)->pins, 1, memory_order_relaxed);
    atomic_fetch_sub_explicit(&r->pins, 1, memory_order_relaxed);
    rc = pp_unpin(g_pool, rec_ref(r));
    if (rc != 0)
        failf(t, "pp_unpin of a pinned entry %" PRIu64 ": %s", k, pp_err_name(rc));
    else
        t->cnt[rec_node(r)].unpins++;
    budget_put(&g_pin_bytes, (int64_t)size);
    atomic_fetch_sub_explicit(&g_outstanding[t->idx], 1, memory_order_release);
    write_untoken(r);
}

/* A PP_PIN_NOWAIT pin: PP_EAGAIN is allowed (the entry is not resident;
 * a load was started); then, half the time, a blocking pin, which must
 * succeed (or find no room). */
static void nowait_pin(thr_t *t, uint64_t k)
{
    hpin_t h;
    t->nowait_calls++;
    int rc = pin_take(t, k, PP_PIN_NOWAIT, 1, &h);
    if (rc == 0) {
        pin_drop(t, &h);
        return;
    }
    if (rc == PP_EAGAIN && rndn(t, 2) == 0 && pin_take(t, k, 0, 1, &h) == 0)
        pin_drop(t, &h);
}

/* A PP_PIN_NOWAIT pin while the caller holds a pin: the entry is resident,
 * so it must succeed, with the same pointer. */
static void nowait_while_pinned(thr_t *t, uint64_t k)
{
    hpin_t h, h2;
    if (pin_take(t, k, 0, 1, &h) != 0)
        return;
    t->nowait_pinned++;
    int rc = pin_take(t, k, PP_PIN_NOWAIT, 0, &h2);
    if (rc != 0)
        failf(t, "pp_pin(NOWAIT) of entry %" PRIu64 " (ref %#" PRIx64 ") while this thread "
              "pins it (so it is resident): %s", k, rec_ref(rec_get(k)), pp_err_name(rc));
    else {
        if (h2.ptr != h.ptr)
            failf(t, "pp_pin(NOWAIT) of pinned entry %" PRIu64 " gave %p, the held pin %p",
                  k, h2.ptr, h.ptr);
        pin_drop(t, &h2);
    }
    pin_drop(t, &h);
}

enum { U_PIN, U_HOLD, U_NOWAIT, U_NOWAIT_PINNED, U_GET, U_STAT, U_PREFETCH, U_RETAIN,
       U_WRITE, U_N };
/* Cumulative percentages of use_entry's operations. */
static const unsigned use_mix[U_N] = { 30, 42, 42, 42, 57, 67, 72, 85, 100 };
static const unsigned use_mix_swap[U_N] = { 22, 30, 38, 42, 50, 56, 66, 78, 100 };

/* One operation on entry k, of which the caller holds an owner. */
static void use_entry(thr_t *t, uint64_t k)
{
    rec_t *r = rec_get(k);
    const unsigned *mix = g_swap ? use_mix_swap : use_mix;
    unsigned sub = rndn(t, 100), op = 0;
    while (sub >= mix[op])
        op++;
    hpin_t h;
    switch (op) {
    case U_PIN:                                      /* pin, check, unpin */
        if (pin_take(t, k, rndn(t, 4) == 0 ? PP_PIN_WRITE : 0, 1, &h) == 0)
            pin_drop(t, &h);
        break;
    case U_HOLD:                                     /* pin and keep */
        if (pin_take(t, k, 0, 1, &h) == 0)
            hold_pin(t, &h);
        break;
    case U_NOWAIT:
        nowait_pin(t, k);
        break;
    case U_NOWAIT_PINNED:
        nowait_while_pinned(t, k);
        break;
    case U_GET:                                      /* escaped access */
        if (get1(t, k))
            stat_live(t, k, 1);
        break;
    case U_STAT:
        stat_live(t, k, 0);
        if (g_hot && rndn(t, 2) == 0) {
            /* Promote (if no write pin may be held) or demote, while other
             * threads pin, unpin, write and release the entry. */
            int rc = pp__debug_hot(g_pool, rec_ref(r), (int)rndn(t, 2));
            if (rc < 0)
                failf(t, "pp__debug_hot of a live entry %" PRIu64 ": %s", k, pp_err_name(rc));
        }
        break;
    case U_PREFETCH: {
        int rc = pp_prefetch(g_pool, rec_ref(r));
        t->prefetches++;
        if (rc != 0)
            failf(t, "pp_prefetch of a live entry %" PRIu64 ": %s", k, pp_err_name(rc));
        else if (g_swap && rndn(t, 2) == 0)
            nowait_pin(t, k);
        break;
    }
    case U_RETAIN:
        retain_owner(t, k);
        break;
    default:
        rewrite(t, k);
        break;
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
    use_entry(t, (uint64_t)k);
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
    use_entry(t, k);
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
        unsigned m = rndn(t, g_nmbox);
        hpin_t *exp = NULL;
        /* release: the hpin and the entry's contents are handed over */
        if (atomic_compare_exchange_strong_explicit(&g_mbox[m], &exp, h,
                                                    memory_order_release,
                                                    memory_order_relaxed)) {
            t->held[i] = t->held[--t->nheld];
            t->handoffs++;
        }
    } else if (sub < 45) {                           /* take a handed-off pin */
        unsigned m = rndn(t, g_nmbox);
        hpin_t *h = atomic_exchange_explicit(&g_mbox[m], NULL, memory_order_acquire);
        if (h)
            held_push(t, h);
    } else if (sub < 52 && t->nheld > 1) {           /* drop all with unpin_many */
        pp_ref_t refs[HELD_CAP];
        int n = t->nheld;
        for (int i = 0; i < n; i++) {
            hpin_t *h = t->held[i];
            rec_t *r = rec_get(h->k);
            check_pin(t, h, "before pp_unpin_many");
            refs[i] = rec_ref(r);
            if (has_blk(r) && h->ptr != NULL)
                atomic_fetch_sub_explicit(&blk_of(h->ptr)->pins, 1, memory_order_relaxed);
            if (h->checked)
                read_untoken(r);
            atomic_fetch_sub_explicit(&r->pins, 1, memory_order_relaxed);
        }
        int rc = pp_unpin_many(g_pool, refs, (size_t)n);
        if (rc != 0)
            failf(t, "pp_unpin_many of %d held pins: %s", n, pp_err_name(rc));
        for (int i = 0; i < n; i++) {
            hpin_t *h = t->held[i];
            rec_t *r = rec_get(h->k);
            if (rc == 0)
                t->cnt[rec_node(r)].unpins++;
            if (h->budget)
                budget_put(&g_pin_bytes, (int64_t)rec_size(r));
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

/* The allocation fault hook (--faults): once armed, 1 allocation in
 * g_faults fails, decided by the seed and a call counter. */
static bool alloc_fault(size_t size, void *ctx)
{
    (void)size;
    (void)ctx;
    if (!atomic_load_explicit(&g_faults_armed, memory_order_relaxed))
        return false;
    uint64_t n = atomic_fetch_add_explicit(&g_alloc_calls, 1, memory_order_relaxed) + 1;
    if (mix3(g_seed, n, 0xA110CFA17ull) % g_faults != 0)
        return false;
    atomic_fetch_add_explicit(&g_alloc_faults, 1, memory_order_relaxed);
    return true;
}

static void *worker(void *arg)
{
    thr_t *t = arg;
    tl_user = 1;
    /* Registers this thread before allocation faults are armed: a first
     * call's registration failing is documented, but not what the torture
     * is after. */
    (void)pp_pool_drain(g_pool, 0);
    if (atomic_fetch_add(&g_registered, 1) + 1 == g_threads && g_faults)
        atomic_store(&g_faults_armed, 1);   /* the last one to register arms */
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
        /* With swap, dead entries still in their grace period hold
         * resident bytes that nothing can evict (puts and loads then get
         * PP_ENOMEM): QSBR threads quiesce more often, as a user would
         * before calls that may wait for room. */
        if (g_qsbr && rndn(t, g_swap ? 4 : 16) == 0)
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
            "usage: torture [--threads N] [--ops N] [--seed S] [--topology STR]\n"
            "                 [--track] [--qsbr] [--slots N] [--timeout SEC] [--verbose]\n"
            "                 [--duration SEC] [--faults N] [--yield N]\n"
            "                 [--swap [DIR]] [--mem-limit BYTES] [--swap-limit BYTES]\n"
            "                 [--compress] [--entry-size MIN[-MAX]] [--flat PCT]\n"
            "                 [--enomem-max PCT]\n"
            "  --threads N        worker threads (default 4)\n"
            "  --ops N            operations per thread (default 200000)\n"
            "  --seed S           seed (default: from the clock, printed)\n"
            "  --topology STR     hwloc synthetic string or XML path (default: this machine)\n"
            "  --track            create the pool with PP_TRACK_PINS\n"
            "  --qsbr             workers use QSBR mode (pp_quiescent between ops)\n"
            "  --slots N          shared slots (default 1024; with --swap: sized so that\n"
            "                     the live data is several times --mem-limit)\n"
            "  --timeout SEC      fail if the workers take longer (default 300; with\n"
            "                     --duration, 300 more than it)\n"
            "  --duration SEC     run for SEC seconds (--ops, if given, still caps it)\n"
            "  --faults N         inject faults: 1 in N of the pool's own allocations and\n"
            "                     (with --swap) of its device writes, reads and syncs fails;\n"
            "                     calls may then return PP_ENOMEM, PP_EIO or PP_ECORRUPT,\n"
            "                     and no data may be lost or come back wrong\n"
            "  --yield N          debug builds: yield 1 in N times at the race points of\n"
            "                     pin, unpin, release, eviction, load and reclaim\n"
            "  --no-hot           never make entries hot (default: a pin promotes on its\n"
            "                     first failed CAS, and stats promote and demote at random)\n"
            "  --verbose          progress and per-operation counts\n"
            "  --entry-size R     entry sizes: N, or MIN-MAX (suffixes K, M; default\n"
            "                     16-4096 uniform; with --swap 2K-64K log-uniform)\n"
            "swap mode:\n"
            "  --swap [DIR]       swap to a fresh directory made under DIR (default\n"
            "                     $TMPDIR, else /tmp); removed at the end\n"
            "  --mem-limit BYTES  the pool's mem_limit (default 1M)\n"
            "  --swap-limit BYTES the pool's swap_limit (default 0: none)\n"
            "  --compress         PP_SWAP_COMPRESS\n"
            "  --flat PCT         percent of entries of type NULL (default 25)\n"
            "  --enomem-max PCT   PP_ENOMEM allowed in at most PCT percent of the calls\n"
            "                     that may return it (default 1; 5 with --qsbr)\n");
}

/* A byte count with an optional binary suffix K, M or G; *end past it. */
static uint64_t parse_size_part(const char *opt, const char *s, const char **endp)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || s[0] == '-') {
        fprintf(stderr, "torture: bad size for %s: '%s'\n", opt, s);
        exit(2);
    }
    unsigned shift = 0;
    switch (*end) {
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    case 'g': case 'G': shift = 30; end++; break;
    default: break;
    }
    if (shift && *end == 'i')
        end++;
    if (shift && (*end == 'b' || *end == 'B'))
        end++;
    if (v > (UINT64_MAX >> shift)) {
        fprintf(stderr, "torture: size too large for %s: '%s'\n", opt, s);
        exit(2);
    }
    *endp = end;
    return (uint64_t)v << shift;
}

static uint64_t parse_size(const char *opt, const char *s)
{
    const char *end;
    uint64_t v = parse_size_part(opt, s, &end);
    if (*end) {
        fprintf(stderr, "torture: bad size for %s: '%s'\n", opt, s);
        exit(2);
    }
    return v;
}

static void quiet_report(const char *line, void *ctx)
{
    (void)line;
    (void)ctx;
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
    if (g_swap) {
        /* A type must save and load, or neither. */
        static const pp_type_t half = { "half", NULL, stress_save, NULL, NULL, 0u };
        CHECK_RC(m, pp_put(g_pool, buf, 16, &half, 0, &ref), PP_EINVAL,
                 "pp_put(type with save and no load)", 0);
        CHECK_RC(m, pp_write(NULL, buf, 1), PP_EINVAL, "pp_write(NULL writer)", 0);
        CHECK_RC(m, pp_read(NULL, buf, 1), PP_EINVAL, "pp_read(NULL reader)", 0);
        if (pp_read_left(NULL) != 0)
            failf(m, "pp_read_left(NULL) = %zu, expected 0", pp_read_left(NULL));
        /* swap_dir needs mem_limit; a swap_dir that does not exist is PP_EIO. */
        pp_options_t o = PP_OPTIONS_INIT;
        pp_pool_t *p = NULL;
        o.report = quiet_report;
        char missing[sizeof g_rundir + 32];
        snprintf(missing, sizeof missing, "%s/does-not-exist", g_rundir);
        o.topology = g_topology;
        o.swap_dir = g_rundir;
        int rc = pp_pool_create(&o, &p);
        CHECK_RC(m, rc, PP_EINVAL, "pp_pool_create(swap_dir without mem_limit)", 0);
        if (rc == 0)
            pp_pool_destroy(p);
        o.mem_limit = g_mem_limit;
        o.swap_dir = missing;
        p = NULL;
        rc = pp_pool_create(&o, &p);
        CHECK_RC(m, rc, PP_EIO, "pp_pool_create(swap_dir that does not exist)", 0);
        if (rc == 0)
            pp_pool_destroy(p);
    }
}

#define NODE_FIELDS(X) \
    X(entries) X(resident_bytes) X(swapped_bytes) X(puts) X(retains) X(releases) \
    X(gets) X(pins) X(unpins) X(evictions_written) X(evictions_clean) \
    X(evictions_abandoned) X(loads) X(load_waits) X(swap_bytes_written) \
    X(swap_raw_written) X(swap_bytes_read) X(swap_used_bytes) X(checksum_failures) \
    X(io_errors) X(queued) X(frees) X(reclaim_queue_depth) X(dead_in_io) X(grace_polls) X(slots) \
    X(lag_count) X(lag_total_ns)

/* Per node: what the program saw of evictions and loads (typed entries). */
typedef struct swapcnt { uint64_t evict_frees, loads; } swapcnt_t;

static void check_stats(thr_t *m, const pp_stats_t *st, const cnt_t *exp, const cnt_t *tot,
                        const swapcnt_t *sw, const swapcnt_t *swtot)
{
    const char *topo = g_topology ? g_topology : "this machine";
    for (unsigned n = 0; n <= g_nnodes; n++) {
        const pp_node_stats_t *s = n < g_nnodes ? &st->node[n] : &st->total;
        const cnt_t *e = n < g_nnodes ? &exp[n] : tot;
        const swapcnt_t *w = n < g_nnodes ? &sw[n] : swtot;
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
#define EXPECT_GE(field, want, what)                                                     \
        do {                                                                             \
            uint64_t got__ = (uint64_t)s->field, want__ = (uint64_t)(want);                \
            if (got__ < want__)                                                          \
                failf(m, "pp_pool_stats %s.%s = %" PRIu64 ", but the program saw %" PRIu64 \
                      " %s (topology %s)", where, #field, got__, want__, what, topo);    \
        } while (0)
        EXPECT(entries, 0);
        EXPECT(resident_bytes, 0);
        EXPECT(swapped_bytes, 0);
        EXPECT(swap_used_bytes, 0);
        EXPECT(reclaim_queue_depth, 0);
        EXPECT(puts, e->puts);
        EXPECT(pins, e->pins);
        EXPECT(unpins, e->unpins);
        EXPECT(retains, e->retains);
        EXPECT(releases, e->releases);
        EXPECT(gets, e->gets);
        EXPECT(frees, e->puts);
        EXPECT(queued, e->puts);
        /* The lag is timed on a sample (at least one in PP__LAG_SAMPLE of
         * each thread's queued entries per node): never more than the frees. */
        if (s->lag_count > s->frees || s->lag_count < s->frees / PP__LAG_SAMPLE)
            failf(m, "%s: lag_count %" PRIu64 " against %" PRIu64 " frees", where,
                  s->lag_count, s->frees);
        if (g_fd == NULL) {
            EXPECT(io_errors, 0);
            EXPECT(checksum_failures, 0);
        } else if (n == g_nnodes) {
            /* Every device call that failed was counted once; a corrupted
             * read fails at most one load's checksum. */
            EXPECT(io_errors, atomic_load(&g_fd->write_fails) + atomic_load(&g_fd->read_fails));
            if (s->checksum_failures > atomic_load(&g_fd->inj_read_corrupt))
                failf(m, "pp_pool_stats total.checksum_failures = %" PRIu64 ", but only %lu "
                      "reads were corrupted", s->checksum_failures,
                      atomic_load(&g_fd->inj_read_corrupt));
        }
        if (!g_swap) {
            EXPECT(frees, frees);
            EXPECT(loads, 0);
            EXPECT(evictions_written, 0);
            EXPECT(evictions_clean, 0);
            EXPECT(swap_bytes_written, 0);
        } else {
            /* Flat entries are evicted and loaded unseen: without them the
             * counts are exact, with them the program sees a part. */
            uint64_t ev = s->evictions_written + s->evictions_clean;
            int exact = g_flat_pct == 0;
            if (exact ? s->loads != w->loads : s->loads < w->loads)
                failf(m, "pp_pool_stats %s.loads = %" PRIu64 ", but the type's load made %"
                      PRIu64 " blocks (topology %s)", where, s->loads, w->loads, topo);
            if (exact ? ev != w->evict_frees : ev < w->evict_frees)
                failf(m, "pp_pool_stats %s: evictions written %" PRIu64 " + clean %" PRIu64
                      ", but the free function freed %" PRIu64 " evicted blocks (topology %s)",
                      where, s->evictions_written, s->evictions_clean, w->evict_frees, topo);
            EXPECT_GE(frees, frees, "reclaimer frees of typed entries");
        }
        if (g_swap && s->swap_raw_written < s->swap_bytes_written)
            failf(m, "pp_pool_stats %s: swap_raw_written %" PRIu64 " < swap_bytes_written %" PRIu64,
                  where, s->swap_raw_written, s->swap_bytes_written);
        if (g_swap && !g_compress)
            EXPECT(swap_bytes_written, s->swap_raw_written);
        if (s->lag_count && s->lag_p50_ns > s->lag_p99_ns)
            failf(m, "pp_pool_stats %s: lag p50 %" PRIu64 " ns, p99 %" PRIu64 " ns, max %" PRIu64 " ns",
                  where, s->lag_p50_ns, s->lag_p99_ns, s->lag_max_ns);
#undef EXPECT_GE
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

    /* The pool-wide swap figures. */
    if (st->swap != g_swap || st->mem_limit != g_mem_limit || st->swap_limit != g_swap_limit)
        failf(m, "pp_pool_stats: swap %d mem_limit %zu swap_limit %" PRIu64 ", created with "
              "%d, %zu, %" PRIu64, st->swap, st->mem_limit, st->swap_limit, g_swap,
              g_mem_limit, g_swap_limit);
    if (st->resident_reserved != 0)
        failf(m, "pp_pool_stats: resident_reserved = %" PRIu64 " with nothing left",
              st->resident_reserved);
    if (g_swap) {
        if (st->resident_peak > g_mem_limit)
            failf(m, "pp_pool_stats: resident_peak %" PRIu64 " > mem_limit %zu",
                  st->resident_peak, g_mem_limit);
        if (st->total.loads == 0 || st->total.evictions_written == 0)
            failf(m, "the run never swapped (loads %" PRIu64 ", evictions_written %" PRIu64
                  "): it tested nothing; raise --ops or lower --mem-limit",
                  st->total.loads, st->total.evictions_written);
        if (st->total.loads > 0 && st->total.swap_bytes_read == 0)
            failf(m, "pp_pool_stats: %" PRIu64 " loads but swap_bytes_read = 0", st->total.loads);
        if (g_compress && st->total.swap_bytes_written > 0 &&
            st->total.swap_bytes_written >= st->total.swap_raw_written)
            failf(m, "--compress: swap_bytes_written %" PRIu64 " >= swap_raw_written %" PRIu64
                  " though two thirds of the entries compress well",
                  st->total.swap_bytes_written, st->total.swap_raw_written);
    }
}

/* The pool's private swap directory: under our run directory, mode 0700,
 * holding only regular files of mode 0600. */
static void check_swap_dir(thr_t *m)
{
    const char *path = pp__swap_path(g_pool);
    size_t rl = strlen(g_rundir);
    if (strncmp(path, g_rundir, rl) != 0 || strncmp(path + rl, "/pinpool-", 9) != 0 ||
        strchr(path + rl + 1, '/') != NULL) {
        failf(m, "the pool's swap directory is '%s', expected %s/pinpool-XXXXXX", path, g_rundir);
        return;
    }
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode) || (sb.st_mode & 07777) != 0700) {
        failf(m, "swap directory %s: %s, mode %#o (expected a directory of mode 0700)", path,
              strerror(errno), (unsigned)(sb.st_mode & 07777));
        return;
    }
    DIR *dir = opendir(path);
    if (dir == NULL) {
        failf(m, "opendir(%s): %s", path, strerror(errno));
        return;
    }
    unsigned files = 0;
    for (struct dirent *de; (de = readdir(dir)) != NULL;) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        char f[sizeof g_rundir + 512];
        snprintf(f, sizeof f, "%s/%s", path, de->d_name);
        if (lstat(f, &sb) != 0 || !S_ISREG(sb.st_mode) || (sb.st_mode & 07777) != 0600)
            failf(m, "swap file %s: mode %#o (expected a regular file of mode 0600)", f,
                  (unsigned)(sb.st_mode & 07777));
        files++;
    }
    closedir(dir);
    if (files == 0)
        failf(m, "swap directory %s holds no file", path);
}

/* After pp_pool_destroy: the run directory must be empty (the pool removed
 * its pinpool-XXXXXX directory); then it is removed. */
static void check_rundir_gone(thr_t *m)
{
    DIR *dir = opendir(g_rundir);
    if (dir == NULL) {
        failf(m, "opendir(%s) after pp_pool_destroy: %s", g_rundir, strerror(errno));
        return;
    }
    unsigned left = 0;
    for (struct dirent *de; (de = readdir(dir)) != NULL;) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        if (left++ < 4)
            failf(m, "pp_pool_destroy left %s/%s behind", g_rundir, de->d_name);
    }
    closedir(dir);
    if (left == 0 && rmdir(g_rundir) != 0)
        failf(m, "rmdir(%s): %s", g_rundir, strerror(errno));
}

int main(int argc, char **argv)
{
    int seed_given = 0, slots_given = 0, size_given = 0;
    int mem_given = 0, swap_limit_given = 0, flat_given = 0, enomem_given = 0;
    int timeout_given = 0, ops_given = 0;
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
        } else if (!strcmp(a, "--seed")) {
            g_seed = parse_u64(a, ARG());
            seed_given = 1;
        } else if (!strcmp(a, "--topology")) {
            g_topology = ARG();
        } else if (!strcmp(a, "--slots")) {
            g_nslots = (unsigned)parse_u64(a, ARG());
            slots_given = 1;
        } else if (!strcmp(a, "--timeout")) {
            g_timeout_s = (unsigned)parse_u64(a, ARG());
            timeout_given = 1;
        } else if (!strcmp(a, "--duration")) {
            g_duration_s = (double)parse_u64(a, ARG());
        } else if (!strcmp(a, "--faults")) {
            g_faults = (unsigned)parse_u64(a, ARG());
        } else if (!strcmp(a, "--yield")) {
            g_yield = (unsigned)parse_u64(a, ARG());
        } else if (!strcmp(a, "--no-hot")) {
            g_hot = 0;
        } else if (!strcmp(a, "--track")) {
            g_track = 1;
        } else if (!strcmp(a, "--qsbr")) {
            g_qsbr = 1;
        } else if (!strcmp(a, "--verbose") || !strcmp(a, "-v")) {
            g_verbose = 1;
        } else if (!strcmp(a, "--swap")) {
            /* DIR is optional: taken if the next argument is not an option */
            g_swap = 1;
            if (v)
                g_swap_parent = v;
            else if (i + 1 < argc && argv[i + 1][0] != '-')
                g_swap_parent = argv[++i];
        } else if (!strcmp(a, "--mem-limit")) {
            g_mem_limit = (size_t)parse_size(a, ARG());
            mem_given = 1;
        } else if (!strcmp(a, "--swap-limit")) {
            g_swap_limit = parse_size(a, ARG());
            swap_limit_given = 1;
        } else if (!strcmp(a, "--compress")) {
            g_compress = 1;
        } else if (!strcmp(a, "--entry-size")) {
            const char *s = ARG(), *end;
            g_size_min = (size_t)parse_size_part(a, s, &end);
            g_size_max = g_size_min;
            if (*end == '-')
                g_size_max = (size_t)parse_size(a, end + 1);
            else if (*end) {
                fprintf(stderr, "torture: bad value for --entry-size: '%s'\n", s);
                return 2;
            }
            size_given = 1;
        } else if (!strcmp(a, "--flat")) {
            g_flat_pct = (unsigned)parse_u64(a, ARG());
            flat_given = 1;
        } else if (!strcmp(a, "--enomem-max")) {
            const char *s = ARG();
            char *end;
            g_enomem_max = strtod(s, &end);
            if (end == s || *end || !(g_enomem_max >= 0 && g_enomem_max <= 100)) {
                fprintf(stderr, "torture: bad value for --enomem-max: '%s'\n", s);
                return 2;
            }
            enomem_given = 1;
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "torture: unknown argument '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
#undef ARG
    }
    if (g_duration_s > 0) {
        if (!ops_given)
            g_ops = 1000000000u;         /* bounded by time */
        if (!timeout_given)
            g_timeout_s = (unsigned)g_duration_s + 300;
    }
    if (g_yield && !pp__debug_yield_available()) {
        fprintf(stderr, "torture: --yield needs a debug build (PINPOOL_DEBUG=ON: the debug, "
                        "asan and tsan presets)\n");
        return 2;
    }
    if (!g_swap && (mem_given || swap_limit_given || g_compress || flat_given || enomem_given)) {
        fprintf(stderr, "torture: --mem-limit, --swap-limit, --compress, --flat and "
                        "--enomem-max need --swap\n");
        return 2;
    }
    if (g_swap) {
        if (g_swap_parent == NULL) {
            const char *tmp = getenv("TMPDIR");
            g_swap_parent = tmp && tmp[0] ? tmp : "/tmp";
        }
        if (!mem_given)
            g_mem_limit = (size_t)1 << 20;
        if (!size_given) {
            g_size_min = 2048;
            g_size_max = 65536;
        }
    }
    if (g_size_min < 16 || g_size_max < g_size_min || g_size_max > ((size_t)1 << 30)) {
        fprintf(stderr, "torture: --entry-size must be 16 bytes .. 1 GiB, MIN <= MAX\n");
        return 2;
    }
    if (g_swap && g_mem_limit < 8 * g_size_max) {
        fprintf(stderr, "torture: --mem-limit must be at least 8 times the largest entry "
                        "(%zu)\n", g_size_max);
        return 2;
    }
    if (g_flat_pct > 100) {
        fprintf(stderr, "torture: --flat must be 0..100\n");
        return 2;
    }
    if (g_swap && g_qsbr && !enomem_given)
        g_enomem_max = 5.0;
    if (g_swap) {
        g_pin_budget = (int64_t)(g_mem_limit / 2);
        g_forever_budget = (int64_t)(g_mem_limit / 8);
        /* Held pins (and pins waiting in mailboxes) stay pinned for a
         * while: few of them, so that most pins fit in the budget. */
        g_held_cap = 2;
        g_nmbox = g_threads / 2 < 2 ? 2 : g_threads / 2;
    }
    if (!seed_given) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t x = (uint64_t)ts.tv_sec * 1000003u ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32);
        g_seed = splitmix64(&x) % 1000000000u;
    }
    double mean_size = 0;
    if (g_swap) {
        for (uint64_t k = 0; k < 4096; k++)
            mean_size += (double)entry_size(k);
        mean_size /= 4096;
        if (!slots_given) {
            /* Live data about 5x the limit: the slots (most are full) plus
             * the threads' private owners (about 16 each). */
            double want = 5.0 * (double)g_mem_limit / mean_size - 16.0 * g_threads;
            g_nslots = want < 16 ? 16 : want > (1 << 20) ? (1u << 20) : (unsigned)want;
        }
    }
    if (g_threads < 1 || g_threads > 1024 || g_nslots < 1 || g_nslots > (1u << 24)) {
        fprintf(stderr, "torture: --threads must be 1..1024 and --slots 1..16777216\n");
        return 2;
    }
    const char *env = getenv("PINPOOL_TRACK_PINS");
    int track_env = env && env[0] == '1';
    char sizes[64];
    snprintf(sizes, sizeof sizes, "%zu-%zu", g_size_min, g_size_max);
    char swapargs[4300] = "";
    if (g_swap) {
        char lim[64] = "", flat[32] = "", enm[48] = "";
        if (g_swap_limit)
            snprintf(lim, sizeof lim, " --swap-limit %" PRIu64, g_swap_limit);
        if (flat_given)
            snprintf(flat, sizeof flat, " --flat %u", g_flat_pct);
        if (enomem_given)
            snprintf(enm, sizeof enm, " --enomem-max %g", g_enomem_max);
        snprintf(swapargs, sizeof swapargs, " --swap '%s' --mem-limit %zu%s%s%s%s",
                 g_swap_parent, g_mem_limit, lim, g_compress ? " --compress" : "", flat, enm);
    }
    printf("torture: seed=%" PRIu64 " threads=%u ops=%" PRIu64 " slots=%u topology=%s%s%s%s"
           " entry_size=%s\n",
           g_seed, g_threads, g_ops, g_nslots, g_topology ? g_topology : "(this machine)",
           g_track ? " track" : "", track_env && !g_track ? " track(env)" : "",
           g_qsbr ? " qsbr" : "", sizes);
    if (g_swap)
        printf("torture: swap: dir=%s mem_limit=%zu swap_limit=%" PRIu64 " compress=%d "
               "flat=%u%% mean_entry=%.0f pin_budget=%" PRId64 " forever_budget=%" PRId64
               " enomem_max=%g%%\n",
               g_swap_parent, g_mem_limit, g_swap_limit, g_compress, g_flat_pct, mean_size,
               g_pin_budget, g_forever_budget, g_enomem_max);
    char slots[32] = "";
    if (slots_given)
        snprintf(slots, sizeof slots, " --slots %u", g_nslots);
    char extra[128] = "", opsarg[48] = "";
    size_t xl = 0;
    if (g_duration_s > 0)
        xl += (size_t)snprintf(extra + xl, sizeof extra - xl, " --duration %.0f", g_duration_s);
    if (g_faults)
        xl += (size_t)snprintf(extra + xl, sizeof extra - xl, " --faults %u", g_faults);
    if (g_yield)
        xl += (size_t)snprintf(extra + xl, sizeof extra - xl, " --yield %u", g_yield);
    if (g_duration_s <= 0 || ops_given)
        snprintf(opsarg, sizeof opsarg, " --ops %" PRIu64, g_ops);
    printf("torture: replay: torture --threads %u%s --seed %" PRIu64
           "%s%s%s%s%s%s%s%s%s%s\n",
           g_threads, opsarg, g_seed, g_topology ? " --topology '" : "",
           g_topology ? g_topology : "", g_topology ? "'" : "", g_track ? " --track" : "",
           g_qsbr ? " --qsbr" : "", size_given ? " --entry-size " : "", size_given ? sizes : "",
           slots, swapargs, extra);
    fflush(stdout);

    /* Records: one per put; at most one put per op (+ slack). */
    g_max_ids = (uint64_t)g_threads * g_ops + 64;
    g_nchunks = (size_t)((g_max_ids + CHUNK - 1) >> CHUNK_BITS);
    g_chunks = calloc(g_nchunks, sizeof *g_chunks);
    g_slots = calloc(g_nslots, sizeof *g_slots);
    g_outstanding = calloc(g_threads + 1, sizeof *g_outstanding);
    g_thr = calloc(g_threads + 1, sizeof *g_thr);
    if (!g_chunks || !g_slots || !g_outstanding || !g_thr) {
        fprintf(stderr, "torture: out of memory\n");
        return 2;
    }
    tl_user = 1;

    if (g_swap) {
        if (snprintf(g_rundir, sizeof g_rundir, "%s/torture-XXXXXX", g_swap_parent) >=
                (int)sizeof g_rundir ||
            mkdtemp(g_rundir) == NULL) {
            fprintf(stderr, "torture: cannot make a directory under %s: %s\n", g_swap_parent,
                    strerror(errno));
            return 2;
        }
        printf("torture: swap run directory %s\n", g_rundir);
    }

    pp_options_t opt = PP_OPTIONS_INIT;
    opt.topology = g_topology;
    opt.flags = (g_track ? PP_TRACK_PINS : 0u) | (g_compress ? PP_SWAP_COMPRESS : 0u);
    opt.report = report_cb;
    if (g_swap) {
        opt.mem_limit = g_mem_limit;
        opt.swap_dir = g_rundir;
        opt.swap_limit = g_swap_limit;
    }
    if (g_yield)
        pp__debug_yield_set(~0u, g_yield);
    int rc;
    if (g_faults && g_swap) {
        /* The file device under a wrapper that injects random faults. */
        g_fd = faultdev_new();
        if (g_fd == NULL) {
            fprintf(stderr, "torture: out of memory\n");
            return 2;
        }
        faultdev_random(g_fd, g_faults, mix3(g_seed, 0xDE7, 0xFA17));
        rc = pp__pool_create_dev(&opt, &g_fd->dev, &g_pool);
    } else {
        rc = pp_pool_create(&opt, &g_pool);
    }
    if (g_faults)
        pp__alloc_fault_hook(alloc_fault, NULL);
    if (rc == 0)
        pp__debug_hot_after(g_pool, g_hot ? 1 : 0);
    if (rc != 0) {
        printf("torture: FAIL: pp_pool_create(topology %s%s%s): %s [seed=%" PRIu64 " thread=main]\n",
               g_topology ? g_topology : "NULL", g_swap ? ", swap_dir " : "",
               g_swap ? g_rundir : "", pp_err_name(rc), g_seed);
        if (g_swap)
            rmdir(g_rundir);
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
    for (unsigned n = 0; n < g_nnodes; n++)
        g_rtid[n] = st->node[n].reclaimer_tid;
    if (st->topology_is_this_system != (g_topology == NULL))
        failf(m, "topology_is_this_system = %d for topology %s", st->topology_is_this_system,
              g_topology ? g_topology : "NULL");
    printf("torture: pool: %u node(s), topology_is_this_system=%d, reclaimers bound:",
           g_nnodes, st->topology_is_this_system);
    for (unsigned n = 0; n < g_nnodes; n++)
        printf(" %d", st->node[n].cpu_bound);
    printf("\n");
    fflush(stdout);
    preflight(m);
    if (g_swap)
        check_swap_dir(m);

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
            fprintf(stderr, "torture: pthread_create: %s\n", strerror(rc));
            return 2;
        }
    }

    /* Watch: pool stats and drains concurrently with the workers. */
    unsigned polls = 0, mid_drains = 0, mid_drain_busy = 0;
    uint64_t live_peak = 0;
    double last_print = t0, last_drain = t0, last_progress = t0;
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
        if (g_duration_s > 0 && now - t0 >= g_duration_s)
            atomic_store(&g_stop, 1);    /* time is up: workers finish their op */
        if (g_duration_s > 0 && now - last_progress >= 60) {
            uint64_t done = 0;
            for (unsigned i = 0; i < g_threads; i++)
                done += atomic_load_explicit(&g_thr[i].progress, memory_order_relaxed);
            fprintf(stderr, "torture: %.0f of %.0f s, %" PRIu64 " ops, %" PRIu64
                    " allocation faults, %lu device faults\n", now - t0, g_duration_s, done,
                    atomic_load(&g_alloc_faults), faultdev_injected(g_fd));
            last_progress = now;
        }
        rc = pp_pool_stats(g_pool, st);
        polls++;
        if (rc != 0 || st->nodes != g_nnodes)
            failf(m, "pp_pool_stats during the run: %s, nodes %u", pp_err_name(rc), st->nodes);
        if (g_swap) {
            if (st->resident_reserved > g_mem_limit || st->resident_peak > g_mem_limit)
                failf(m, "during the run: resident_reserved %" PRIu64 ", resident_peak %" PRIu64
                      ", mem_limit %zu", st->resident_reserved, st->resident_peak, g_mem_limit);
            uint64_t live = st->total.resident_bytes + st->total.swapped_bytes;
            if (live > live_peak)
                live_peak = live;
        }
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
            printf("torture: %.1fs ops %" PRIu64 " entries %" PRIu64 " puts %" PRIu64
                   " frees %" PRIu64 " queue %" PRIu64, now - t0, done, st->total.entries,
                   st->total.puts, st->total.frees, st->total.reclaim_queue_depth);
            if (g_swap)
                printf(" resident %" PRIu64 " swapped %" PRIu64 " evicted %" PRIu64 "+%" PRIu64
                       " loads %" PRIu64, st->total.resident_bytes, st->total.swapped_bytes,
                       st->total.evictions_written, st->total.evictions_clean, st->total.loads);
            printf("\n");
            fflush(stdout);
            last_print = now;
        }
        if (now - t0 > g_timeout_s) {
            printf("torture: FAIL: workers still running after %u s [seed=%" PRIu64 "]; progress:",
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
    /* Faults off for the end: dropping everything and the exact checks. */
    atomic_store(&g_faults_armed, 0);
    if (g_fd != NULL)
        faultdev_random(g_fd, 0, 0);

    if (atomic_load(&g_failed)) {
        uint64_t done = 0;
        for (unsigned i = 0; i < g_threads; i++)
            done += atomic_load(&g_thr[i].progress);
        printf("torture: FAIL seed=%" PRIu64 " ops=%" PRIu64 " threads=%u seconds=%.2f: failed "
               "during the run, final checks skipped%s%s\n", g_seed, done, g_threads, t1 - t0,
               g_swap ? "; swap files left in " : "", g_swap ? g_rundir : "");
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
            pin_drop(m, h);
            free(h);
        }
    }

    /* Drain: it waits for entries whose I/O was in flight when they died
     * and for evictions finishing their free after their commit, so once
     * it returns nothing may be left: no entry, no queue, no reserved
     * byte, every free function called. */
    double d0 = now_s();
    rc = pp_pool_drain(g_pool, 30000);
    if (rc != 0)
        failf(m, "pp_pool_drain(30000) after dropping everything: %s", pp_err_name(rc));
    if (rc == 0 && (rc = pp_pool_stats(g_pool, st)) != 0)
        failf(m, "pp_pool_stats at the end: %s", pp_err_name(rc));
    if (rc == 0 && (st->total.entries != 0 || st->total.reclaim_queue_depth != 0 ||
                    st->total.dead_in_io != 0 || st->resident_reserved != 0))
        failf(m, "after pp_pool_drain returned 0: %" PRIu64 " entries, queue %" PRIu64
              ", dead_in_io %" PRIu64 ", resident_reserved %" PRIu64, st->total.entries,
              st->total.reclaim_queue_depth, st->total.dead_in_io, st->resident_reserved);
    double drain_s = now_s() - d0;

    /* Every block freed exactly once; typed entries reclaimed at most once
     * (exactly once without swap), on their home node's reclaimer. */
    swapcnt_t sw[PP_MAX_NODES], swtot = { 0, 0 };
    memset(sw, 0, sizeof sw);
    uint64_t nids = atomic_load(&g_nids), bad = 0, died_swapped = 0, reclaimed = 0;
    for (uint64_t k = 0; k < nids && k < g_max_ids; k++) {
        rec_t *r = rec_get(k);
        if (r == NULL)
            continue;
        uint32_t state = atomic_load(&r->state);
        uint32_t f = atomic_load(&r->frees), nb = atomic_load(&r->blocks);
        uint32_t ef = atomic_load(&r->evict_frees), rf = atomic_load(&r->reclaimed);
        uint32_t ld = atomic_load(&r->loads);
        int32_t o = atomic_load(&r->owners), p = atomic_load(&r->pins);
        int32_t rw = atomic_load(&r->rw);
        unsigned node = rec_node(r), kind = rec_kind(r);
        if (state != 2) {
            if (state == 3 && (f != 0 || nb != 0) && bad++ < 10)
                failf(m, "entry %" PRIu64 " whose pp_put failed: freed %u times", k, f);
            continue;
        }
        /* Counted for every entry, failed or not: the checks of these sums
         * below speak of the free function's own counts only. */
        reclaimed += rf;
        if (node < g_nnodes) {
            sw[node].evict_frees += ef;
            sw[node].loads += ld;
        }
        swtot.evict_frees += ef;
        swtot.loads += ld;
        int ok = o == 0 && p == 0 && rw == 0;
        if (kind == KIND_FLAT)
            ok = ok && f == 0 && nb == 0 && ld == 0;
        else if (kind == KIND_FREE)
            ok = ok && nb == 1 && f == 1 && rf == 1 && ef == 0 && ld == 0;
        else
            ok = ok && nb == 1 + ld && f == nb && ef + rf == f && rf <= 1;
        if (!ok) {
            if (bad++ < 10)
                failf(m, "entry %" PRIu64 " (ref %#" PRIx64 ", node %u, %s) after drain: blocks "
                      "made %u (loads %u), freed %u (by evictions %u, reclaimed %u); program "
                      "owners %d pins %d rw %d", k, rec_ref(r), node,
                      kind == KIND_FLAT ? "type NULL" : kind == KIND_SWAP ? "swappable type"
                                                                          : "never-evicted type",
                      nb, ld, f, ef, rf, o, p, rw);
            pp__entry_t *pe = pp__lookup(g_pool, rec_ref(r));
            if (bad <= 10 && pe != NULL)
                failf(m, "entry %" PRIu64 ": pool's words pw %#" PRIx64 " ow %#" PRIx64, k,
                      (uint64_t)atomic_load(&pe->pw), (uint64_t)atomic_load(&pe->ow));
            continue;
        }
        if (kind == KIND_SWAP && rf == 0)
            died_swapped++;
    }
    if (bad > 10)
        failf(m, "%" PRIu64 " entries in all failed the end-of-run checks", bad);
    if (reclaimed != atomic_load(&g_frees_total))
        failf(m, "internal: %" PRIu64 " entries reclaimed, free function counted %" PRIu64,
              reclaimed, atomic_load(&g_frees_total));
    if (swtot.evict_frees != atomic_load(&g_evict_frees))
        failf(m, "internal: entries count %" PRIu64 " eviction frees, free function %" PRIu64,
              swtot.evict_frees, atomic_load(&g_evict_frees));
    for (unsigned i = 0; i <= g_threads; i++)
        if (atomic_load(&g_outstanding[i]) != 0)
            failf(m, "internal: thread %u has %" PRId64 " outstanding pins at the end", i,
                  atomic_load(&g_outstanding[i]));
    if (atomic_load(&g_pin_bytes) != 0)
        failf(m, "internal: pin budget holds %" PRId64 " bytes at the end",
              atomic_load(&g_pin_bytes));

    /* Stats exact. */
    cnt_t exp[PP_MAX_NODES], tot;
    memset(exp, 0, sizeof exp);
    memset(&tot, 0, sizeof tot);
    uint64_t opsum[OP_N] = { 0 };
    uint64_t stale = 0, invalid = 0, fresh = 0, writes = 0, write_busy = 0, blind = 0;
    uint64_t handoffs = 0, pin_many = 0, ops_done = 0, failed_many_live = 0;
    uint64_t room = 0, enomem = 0, nowait = 0, eagain = 0, nowait_pinned = 0, prefetches = 0;
    uint64_t f_eio = 0, f_ecorrupt = 0, f_enomem = 0;
    uint64_t skips = 0, escape_skips = 0;
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
        write_busy += t->write_busy;
        blind += t->blind_pins;
        handoffs += t->handoffs;
        pin_many += t->pin_many_calls;
        failed_many_live += t->failed_many_live;
        room += t->room_calls;
        enomem += t->enomem;
        nowait += t->nowait_calls;
        eagain += t->eagain;
        nowait_pinned += t->nowait_pinned;
        prefetches += t->prefetches;
        f_eio += t->fault_eio;
        f_ecorrupt += t->fault_ecorrupt;
        f_enomem += t->fault_enomem;
        skips += t->budget_skips;
        escape_skips += t->escape_skips;
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
    if (!g_swap && atomic_load(&g_frees_total) != tot.puts)
        failf(m, "free function ran %" PRIu64 " times for %" PRIu64 " puts",
              atomic_load(&g_frees_total), tot.puts);
    if (tot.pins != tot.unpins)
        failf(m, "internal: program pins %" PRIu64 " != unpins %" PRIu64, tot.pins, tot.unpins);
    if (tot.puts + tot.retains != tot.releases)
        failf(m, "internal: puts %" PRIu64 " + retains %" PRIu64 " != releases %" PRIu64,
              tot.puts, tot.retains, tot.releases);
    check_stats(m, st, exp, &tot, sw, &swtot);
    if (st->total.pins != tot.pins)
        failf(m, "note: stats count %" PRId64 " pins more than the program took; %" PRIu64
              " live refs were pinned and rolled back by failed pp_pin_many calls (a failed call "
              "must have no effect)", (int64_t)(st->total.pins - tot.pins), failed_many_live);
    if (g_swap && !g_faults && (double)enomem > (double)room * g_enomem_max / 100.0)
        failf(m, "PP_ENOMEM in %" PRIu64 " of %" PRIu64 " calls that may return it (%.2f%%; "
              "allowed %.2f%%): the pool found nothing to evict though the program pins at most "
              "%" PRId64 " and escapes at most %" PRId64 " of the %zu bytes", enomem, room,
              room ? 100.0 * (double)enomem / (double)room : 0.0, g_enomem_max, g_pin_budget,
              g_forever_budget, g_mem_limit);

    double secs = t1 - t0;
    if (g_verbose) {
        printf("torture: ops:");
        for (int o = 0; o < OP_N; o++)
            printf(" %s=%" PRIu64, op_names[o], opsum[o]);
        printf("\ntorture: checks: fresh=%" PRIu64 " stale=%" PRIu64 " invalid=%" PRIu64
               " writes=%" PRIu64 " write_busy=%" PRIu64 " blind_pins=%" PRIu64
               " handoffs=%" PRIu64 " pin_many=%" PRIu64
               " stats_polls=%u mid_drains=%u (busy %u) drain_s=%.3f report_lines=%" PRIu64 "\n",
               fresh, stale, invalid, writes, write_busy, blind, handoffs, pin_many, polls,
               mid_drains, mid_drain_busy, drain_s, atomic_load(&g_report_lines));
        for (int i = 0; i < atomic_load(&g_enomem_notes) && i < ENOMEM_NOTES; i++)
            printf("torture: PP_ENOMEM: %s\n", g_enomem_note[i]);
        pthread_mutex_lock(&g_print_lock);
        int saved = atomic_load(&g_report_saved);
        for (int i = 0; i < saved && i < 8; i++)
            printf("torture: report: %s\n", g_report_first[i]);
        pthread_mutex_unlock(&g_print_lock);
        for (unsigned n = 0; n < g_nnodes; n++) {
            printf("torture: node %u: puts %" PRIu64 " frees %" PRIu64 " pins %" PRIu64
                   " lag p50 %.1f us p99 %.1f us max %.1f us grace_polls %" PRIu64
                   " slots %" PRIu64 " reclaimer tid %d cpu_bound %d mem_bound %d\n", n,
                   st->node[n].puts, st->node[n].frees, st->node[n].pins,
                   st->node[n].lag_p50_ns / 1e3, st->node[n].lag_p99_ns / 1e3,
                   st->node[n].lag_max_ns / 1e3, st->node[n].grace_polls, st->node[n].slots,
                   st->node[n].reclaimer_tid, st->node[n].cpu_bound, st->node[n].mem_bound);
            if (g_swap)
                printf("torture: node %u swap: evictions written %" PRIu64 " clean %" PRIu64
                       " abandoned %" PRIu64 " (typed blocks evicted %" PRIu64 ") loads %" PRIu64
                       " (typed %" PRIu64 ") load_waits %" PRIu64 " written %" PRIu64 " (raw %"
                       PRIu64 ") read %" PRIu64 "\n", n, st->node[n].evictions_written,
                       st->node[n].evictions_clean, st->node[n].evictions_abandoned,
                       sw[n].evict_frees, st->node[n].loads, sw[n].loads, st->node[n].load_waits,
                       st->node[n].swap_bytes_written, st->node[n].swap_raw_written,
                       st->node[n].swap_bytes_read);
        }
        if (g_swap)
            printf("torture: swap: saves %" PRIu64 " (ok %" PRIu64 ", lost to a pin %" PRIu64
                   ") load calls %" PRIu64 " typed entries that died swapped %" PRIu64
                   " skipped: pins %" PRIu64 " gets %" PRIu64 " nowait %" PRIu64 " (EAGAIN %" PRIu64
                   ", while pinned %" PRIu64 ") prefetches %" PRIu64 "\n",
                   atomic_load(&g_saves), atomic_load(&g_saves_ok), atomic_load(&g_saves_lost),
                   atomic_load(&g_load_calls), died_swapped, skips, escape_skips, nowait, eagain,
                   nowait_pinned, prefetches);
    }

    /* Every slot's state words obey entry.h's invariants (pinpool's own
     * whole-structure validation; all threads have stopped). */
    if (!pp__pool_is_valid(g_pool))
        failf(m, "pp__pool_is_valid: an entry's state breaks entry.h's invariants");

    /* Destroy: nothing is left, so nothing is reported or freed. */
    /* The fault device's counts (it goes with the pool). */
    unsigned long inj[7] = { 0 };
    if (g_fd != NULL) {
        inj[0] = atomic_load(&g_fd->inj_write_eio);
        inj[1] = atomic_load(&g_fd->inj_write_enospc);
        inj[2] = atomic_load(&g_fd->inj_write_short);
        inj[3] = atomic_load(&g_fd->inj_read_eio);
        inj[4] = atomic_load(&g_fd->inj_read_missing);
        inj[5] = atomic_load(&g_fd->inj_read_corrupt);
        inj[6] = atomic_load(&g_fd->inj_sync);
        g_fd = NULL;
    }
    uint64_t lines_before = atomic_load(&g_report_lines);
    uint64_t frees_before = atomic_load(&g_frees_total) + atomic_load(&g_evict_frees);
    rc = pp_pool_destroy(g_pool);
    if (rc != 0)
        failf(m, "pp_pool_destroy: %s", pp_err_name(rc));
    if (atomic_load(&g_report_lines) != lines_before)
        failf(m, "pp_pool_destroy reported %" PRIu64 " line(s) though nothing was left",
              atomic_load(&g_report_lines) - lines_before);
    if (atomic_load(&g_frees_total) + atomic_load(&g_evict_frees) != frees_before)
        failf(m, "pp_pool_destroy called the free function %" PRIu64 " more time(s)",
              atomic_load(&g_frees_total) + atomic_load(&g_evict_frees) - frees_before);
    if (g_swap && rc == 0)
        check_rundir_gone(m);

    int failed = atomic_load(&g_failed);
    printf("torture: %s seed=%" PRIu64 " ops=%" PRIu64 " threads=%u seconds=%.2f nodes=%u "
           "puts=%" PRIu64 " frees=%" PRIu64 " pins=%" PRIu64 " unpins=%" PRIu64
           " retains=%" PRIu64 " releases=%" PRIu64 " gets=%" PRIu64 " stale_checks=%" PRIu64
           " entries=%" PRIu64 " resident_bytes=%" PRIu64 " queue_depth=%" PRIu64
           " lag_p50_us=%.1f lag_p99_us=%.1f lag_max_us=%.1f hot_promotions=%" PRIu64
           " hot_demotions=%" PRIu64,
           failed ? "FAIL" : "PASS", g_seed, ops_done, g_threads, secs, g_nnodes,
           st->total.puts, st->total.frees, st->total.pins, st->total.unpins, st->total.retains,
           st->total.releases, st->total.gets, stale, st->total.entries,
           st->total.resident_bytes, st->total.reclaim_queue_depth, st->total.lag_p50_ns / 1e3,
           st->total.lag_p99_ns / 1e3, st->total.lag_max_ns / 1e3, st->total.hot_promotions,
           st->total.hot_demotions);
    if (g_swap)
        printf(" writes=%" PRIu64 " evictions_written=%" PRIu64 " evictions_clean=%" PRIu64
               " evictions_abandoned=%" PRIu64 " loads=%" PRIu64 " load_waits=%" PRIu64
               " swap_written=%" PRIu64 " swap_raw=%" PRIu64 " swap_read=%" PRIu64
               " resident_peak=%" PRIu64 " live_peak=%" PRIu64 " (%.1fx mem_limit) enomem=%"
               PRIu64 "/%" PRIu64 " eagain=%" PRIu64 "/%" PRIu64,
               writes, st->total.evictions_written, st->total.evictions_clean,
               st->total.evictions_abandoned, st->total.loads, st->total.load_waits,
               st->total.swap_bytes_written, st->total.swap_raw_written,
               st->total.swap_bytes_read, st->resident_peak, live_peak,
               (double)live_peak / (double)g_mem_limit, enomem, room, eagain, nowait);
    if (g_faults)
        printf(" faults: allocations=%" PRIu64 "/%" PRIu64 " write_eio=%lu write_enospc=%lu"
               " write_short=%lu read_eio=%lu read_missing=%lu read_corrupt=%lu sync=%lu"
               " got: PP_EIO=%" PRIu64 " PP_ECORRUPT=%" PRIu64 " PP_ENOMEM=%" PRIu64
               " checksum_failures=%" PRIu64 " io_errors=%" PRIu64,
               atomic_load(&g_alloc_faults), atomic_load(&g_alloc_calls), inj[0], inj[1], inj[2],
               inj[3], inj[4], inj[5], inj[6], f_eio, f_ecorrupt, f_enomem,
               st->total.checksum_failures, st->total.io_errors);
    printf("\n");
    for (size_t c = 0; c < g_nchunks; c++)
        free(atomic_load(&g_chunks[c]));
    free(g_chunks);
    free(g_slots);
    free(g_outstanding);
    free(g_thr);
    free(st);
    return failed ? 1 : 0;
}
