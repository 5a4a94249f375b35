/*
 * internal.h -- pinpool's internal structures and the small API between its
 * parts.  One part per source file:
 *
 *   alloc.c     pinpool's own allocations, counted (hook for fault injection)
 *   error.c     error names and messages, internal aborts (pp__die)
 *   topology.c  hwloc: node domains, CPU->node map, binding, node memory
 *   table.c     segmented slot tables, refs, lookup, slot allocation
 *   owner.c     put, retain, release
 *   pin.c       pin, unpin, pin_many, unpin_many, get, prefetch
 *   epoch.c     thread registry, ck_epoch records, sections, QSBR, TLS
 *   reclaim.c   reclaim queues, reclaimer threads, grace periods, free
 *   stats.c     pp_stat, pp_pool_stats, lag histograms
 *   track.c     pin-leak tracking and reports
 *   pool.c      create, destroy, drain, validation
 *   evict.c     swap threads: CLOCK eviction, loads, room for puts and loads
 *   swap.c      swap store: records, space, checksums, compression, streams
 *   swapdev.c   the default swap device (files in a private directory)
 *   debug.c     random yields in debug builds (PP__YIELD)
 *   hot.c       sharded pin counts for contended entries (HOT)
 *
 * Nothing here is exported (the library is built with hidden visibility);
 * tests link the static library and may call pp__* functions.
 */
#ifndef PP_INTERNAL_H
#define PP_INTERNAL_H

#include <ck_ec.h>
#include <ck_epoch.h>
#include <ck_stack.h>
#include <hwloc.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "atomics.h"
#include "entry.h"
#include "pinpool.h"

#ifndef PINPOOL_DEBUG
#define PINPOOL_DEBUG 0
#endif

/* Debug checks are compiled in every build and removed as dead code when
 * off (jemalloc's config_debug).  Tiers: PP__CHECK is always on (cheap,
 * guards internal invariants whose violation would corrupt memory);
 * PP__ASSERT only in debug builds; pp__pool_is_valid() walks everything. */
static const bool pp__config_debug = PINPOOL_DEBUG != 0;

_Noreturn void pp__die(const char *file, int line, const char *what);
#define PP__CHECK(cond)                                                        \
    do { if (__builtin_expect(!(cond), 0)) pp__die(__FILE__, __LINE__, #cond); } while (0)
#define PP__ASSERT(cond)                                                       \
    do { if (pp__config_debug && !(cond)) pp__die(__FILE__, __LINE__, #cond); } while (0)

#define PP__LIKELY(x)   __builtin_expect(!!(x), 1)
#define PP__UNLIKELY(x) __builtin_expect(!!(x), 0)
#define PP__NOINLINE __attribute__((noinline, cold))
#define PP__NOINLINE_HOT __attribute__((noinline))   /* out of line, not cold */
#define PP__CACHELINE   64
/* Data written by one thread and never by another is kept PP__PAD bytes
 * apart: CPUs prefetch cache lines in adjacent pairs, so two threads
 * writing neighbouring lines still contend. */
#define PP__PAD         128
static inline size_t pp__pad(size_t n) { return (n + PP__PAD - 1) & ~(size_t)(PP__PAD - 1); }

/*
 * Random yields (liburcu's DEBUG_YIELD), debug builds only.  PP__YIELD(X)
 * marks a point of class PP__YIELD_X where a race window is worth
 * widening; when that class is enabled the calling thread calls
 * sched_yield() there with probability 1/one_in (a thread-local PRNG).
 * Off until enabled by pp__debug_yield_set() or by the environment:
 *
 *   PINPOOL_YIELD=CLASSES[:ONE_IN]   read at the first pp_pool_create of
 *                                    the process, unless
 *                                    pp__debug_yield_set was called first
 *
 * CLASSES is "all", a list of class names separated by ',' or '+' (pin,
 * unpin, owner, reclaim, evict, load) or a mask (0x3f); ONE_IN defaults to
 * 8 (1: yield every time).  E.g. PINPOOL_YIELD=all:4,
 * PINPOOL_YIELD=evict,load:2.  In other builds PP__YIELD compiles to
 * nothing (the hot paths stay free of calls), pp__debug_yield_set does
 * nothing and pp__debug_yield_available() is false.  debug.c.
 */
#define PP__YIELD_PIN     (1u << 0)  /* pin, get, pin_many: before the pin's CAS */
#define PP__YIELD_UNPIN   (1u << 1)  /* unpin: before its CAS; a final unpin before its push */
#define PP__YIELD_OWNER   (1u << 2)  /* release and the transition to DEAD, before the push */
#define PP__YIELD_RECLAIM (1u << 3)  /* reclaimer: after the pop, after a grace period,
                                        before the free, before the slot's recycling */
#define PP__YIELD_EVICT   (1u << 4)  /* eviction: before and after the claim, between
                                        chunks of the write, before and after the commit */
#define PP__YIELD_LOAD    (1u << 5)  /* load: after the claim, before the commit */
#define PP__YIELD_ALL     0x3fu

/* mask: classes to enable (0: none); one_in: yield with probability
 * 1/one_in (0 is taken as 1). */
void pp__debug_yield_set(unsigned mask, unsigned one_in);
bool pp__debug_yield_available(void);
/* pp_pool_create: applies PINPOOL_YIELD (first call of the process only). */
void pp__debug_yield_env(void);

#if PINPOOL_DEBUG
extern _Atomic unsigned pp__yield_mask;
void pp__yield_maybe(void);
/* relaxed: an on/off switch; no data is published through it. */
#define PP__YIELD(cls)                                                         \
    do {                                                                       \
        if (PP__UNLIKELY(pp__atomic_load_relaxed(&pp__yield_mask) & PP__YIELD_##cls)) \
            pp__yield_maybe();                                                 \
    } while (0)
/* Whether class cls yields: the fast paths, which have no yield points,
 * step aside for the paths that do. */
#define PP__YIELD_ON(cls) ((pp__atomic_load_relaxed(&pp__yield_mask) & PP__YIELD_##cls) != 0)
#else
#define PP__YIELD(cls) do { } while (0)
#define PP__YIELD_ON(cls) 0
#endif

/*
 * Test points (every build): named places on cold paths where a test can
 * run code of its own on the thread that reaches them -- to stop that
 * thread there and drive an interleaving deterministically, which random
 * yields only make likely.  pp__test_point_hook(fn, ctx) installs fn (NULL
 * removes it); PP__TEST_POINT(X, arg) calls fn(PP__TP_X, arg, ctx) when one
 * is installed.  Off, a point costs one relaxed load and a branch, and
 * none sits on a hot path (pin, unpin, lookup).  debug.c.
 */
enum pp__test_point {
    PP__TP_HOT_INSTALL,   /* hot.c, demote: the counters are closed and summed,
                             just before the CAS that installs the sum (arg: entry) */
};
typedef void (*pp__test_point_fn)(enum pp__test_point where, void *arg, void *ctx);
void pp__test_point_hook(pp__test_point_fn fn, void *ctx);
void pp__test_point_run(enum pp__test_point where, void *arg);
extern _Atomic(pp__test_point_fn) pp__test_point_fn_;
/* relaxed: a switch; pp__test_point_run acquires the hook and its context. */
#define PP__TEST_POINT(where, arg)                                             \
    do {                                                                       \
        if (PP__UNLIKELY(pp__atomic_load_relaxed(&pp__test_point_fn_) != NULL)) \
            pp__test_point_run(PP__TP_##where, (arg));                         \
    } while (0)

/* ------------------------------------------------------------------------ */
/* Refs and tables                                                           */
/* ------------------------------------------------------------------------ */

/* ref = node:6 | slot:26 | gen:32 (see pp_ref_node/slot/gen in pinpool.h) */
#define PP__SLOT_BITS   26u
#define PP__MAX_SLOTS   ((uint32_t)1 << PP__SLOT_BITS)
#define PP__SEG_SHIFT   13u                               /* 8192 entries, 512 KiB */
#define PP__SEG_SLOTS   ((uint32_t)1 << PP__SEG_SHIFT)
#define PP__SEG_MAX     (PP__MAX_SLOTS >> PP__SEG_SHIFT)  /* 8192 segments */
#define PP__SEG_BYTES   ((size_t)PP__SEG_SLOTS * sizeof(pp__entry_t))
#define PP__SLOT_CHUNK  64u                               /* slots taken at once from the bump index */

static inline pp_ref_t pp__ref_make(unsigned node, uint32_t slot, uint32_t gen)
{
    return ((pp_ref_t)node << 58) | ((pp_ref_t)slot << 32) | gen;
}

/* One counter of a hot slot, alone on a pair of cache lines (hot.c).
 * demoters is used in a slot's line 0 only: the demotions of the slot's
 * promotion in flight; no promotion of the slot completes while any is. */
typedef struct pp__hot_line {
    _Atomic uint64_t w;
    _Atomic uint32_t demoters;
} __attribute__((aligned(PP__PAD))) pp__hot_line_t;

#define PP__HOT_CLOSED   ((uint64_t)1 << 31)
#define PP__HOT_COUNT    ((uint64_t)PP__HOT_CLOSED - 1)

/* Per thread and node counters.  Single writer (the thread), read by stats. */
typedef struct pp__tcount {
    _Atomic uint64_t puts, pins, unpins, retains, releases, gets, queued;
} pp__tcount_t;

/* A thread's reclaim queue for one node: pushed by the thread only (its
 * final unpins and releases), batch-popped by the node's reclaimer; one per
 * PP__PAD bytes, so a push is a CAS on a line of the thread's own.  (A
 * ck_ring here, two plain stores a push, cost more: the reclaimer's takes
 * wrote the line a push reads, once per entry; a final unpin took 18-24 ns
 * against 9.5-10.7.) */
typedef struct pp__rq {
    ck_stack_t s;
} __attribute__((aligned(PP__PAD))) pp__rq_t;

/* A thread's private cache of free slots of one node. */
typedef struct pp__magazine {
    ck_stack_entry_t *head;
} pp__magazine_t;

/*
 * A thread's registration with one pool.  The ck_epoch record comes first
 * so the record ck_epoch_recycle() hands back converts to its thread.
 * Records are never freed before the pool: a thread that exits leaves its
 * record (and its counters) for the next thread to recycle.
 */
typedef struct pp__thread {
    ck_epoch_record_t rec;               /* cache-line aligned by ck */
    pp_pool_t *pool;
    struct pp__thread *next;             /* pool's list, under reg_lock */
    pp__tcount_t *count;                 /* [nnodes] */
    struct pp__rq *rq;                   /* [nnodes]: entries this thread queued
                                            for node n's reclaimer (reclaim.c) */
    pp__magazine_t *mag;                 /* [nnodes] */
    unsigned node;                       /* home node for synthetic topologies */
    unsigned shard;                      /* its counter in hot slots (hot.c) */
    /* Owner-thread only: the last HOT entry it pinned or unpinned, its
     * word then, its shard's line and the promotion's tag (hot.c). */
    struct {
        pp__entry_t *e;
        uint64_t pw;
        struct pp__hot_line *line;
        uint32_t tag;
    } hc;
    _Atomic int tid;                     /* OS thread id of the current user */
    bool in_use;                         /* under reg_lock */
    bool is_reclaimer;
    /* Owner-thread only: */
    bool qsbr;                           /* pp_quiescent was called */
    bool in_section;                     /* inside a ck_epoch section */
} pp__thread_t;

/* ------------------------------------------------------------------------ */
/* Swap records and space                                                    */
/* ------------------------------------------------------------------------ */

/* Where an entry's swap copy is, by slot, beside the table (the entry's own
 * cache line has no room).  Written by the node's swap thread while it has
 * the entry claimed (EVICTING) and published by the release that sets
 * SWAPPED; read by loaders after the acquire that claims LOADING; freed by
 * the reclaimer of a queued entry or by the swap thread before a rewrite. */
typedef struct pp__swaprec {
    uint64_t off;                        /* extent in the node's stream */
    uint64_t cap;                        /* extent length (whole pages) */
    uint64_t len;                        /* bytes stored */
    uint64_t raw;                        /* bytes before compression (> len: LZ4) */
    uint64_t sum;                        /* XXH3-64 of the stored bytes */
} pp__swaprec_t;

typedef struct pp__extent {
    uint64_t off, len;
} pp__extent_t;

/* ------------------------------------------------------------------------ */
/* Node domains                                                              */
/* ------------------------------------------------------------------------ */

#define PP__LAG_BUCKETS 128
#define PP__LAG_SAMPLE  64           /* one queued entry in 64 carries its time */
#define PP__LAG_NONE    UINT32_MAX   /* queued_us of an entry not sampled */

#define PP__HOT_SLOTS      64u    /* per node: one bit each in hot_used */
#define PP__HOT_MAX_SHARDS 256u

typedef struct pp__node {
    /* Read-mostly. */
    pp_pool_t *pool;
    unsigned index;
    hwloc_cpuset_t cpuset;               /* the node's CPUs */
    hwloc_nodeset_t nodeset;             /* the node itself */
    pp__entry_t *_Atomic *dir;           /* [PP__SEG_MAX] segments, never freed before destroy */
    _Atomic int mem_bound;               /* dir, node and segments bound to the node */

    /* Producers (final unpins and releases, any thread); their queues are
     * their threads' own (pp__thread_t.rq). */
    _Atomic int sleeping __attribute__((aligned(PP__CACHELINE)));
                                         /* the reclaimer is about to wait or
                                            waits: a push must bump `wake` */
    _Atomic uint64_t dying_bytes;        /* swap: resident bytes queued, not yet freed */
    _Atomic int64_t dead_in_io;          /* dead, unpinned, queued when their I/O ends
                                            (pp__dead_in_io_note, pp__io_end) */
    _Atomic uint32_t evict_tail;         /* evictions between their commit and the
                                            end of their free and accounting */
    struct ck_ec32 wake __attribute__((aligned(PP__CACHELINE)));

    /* Putters. */
    _Atomic uint32_t next_slot __attribute__((aligned(PP__CACHELINE)));
    _Atomic uint64_t resident_bytes;     /* put minus freed */

    /* Reclaimer -> putters. */
    ck_stack_t free_slots __attribute__((aligned(PP__CACHELINE)));

    /* Reclaimer only writes these (stats read them). */
    _Atomic uint64_t frees __attribute__((aligned(PP__CACHELINE)));
    _Atomic uint64_t grace_polls;
    _Atomic uint64_t retired_slots;
    _Atomic uint64_t lag_count, lag_total_ns, lag_max_ns;
    _Atomic uint64_t lag_hist[PP__LAG_BUCKETS];
    _Atomic uint64_t leaked_owned;       /* entries freed by destroy's sweep */
    pp_ref_t leaked_first[4];            /* a few of them, for the report */
    _Atomic int tid;
    _Atomic int cpu_bound;
    _Atomic int stop;
    pp__thread_t *rt;                    /* the reclaimer's epoch record */
    pthread_t thread;
    bool started;

    /* Hot slots (hot.c): PP__HOT_SLOTS x (1 + pool->hot_shards) lines. */
    pp__hot_line_t *hot;
    size_t hot_bytes;
    _Atomic uint64_t hot_used __attribute__((aligned(PP__CACHELINE)));
                                         /* bit i: slot i taken (or retired) */
    _Atomic uint64_t hot_promotions, hot_demotions, hot_full;

    /* Swap (evict.c, swap.c); untouched without swap. */
    ck_stack_t load_q __attribute__((aligned(PP__CACHELINE)));  /* async loads */
    struct ck_ec32 io_wake;              /* wakes the swap thread */
    struct ck_ec32 io_done __attribute__((aligned(PP__CACHELINE)));
                                         /* bumped when an entry's I/O ends */
    pp__swaprec_t *_Atomic *sdir;        /* [PP__SEG_MAX] records, by slot */
    pthread_mutex_t space_lock;          /* the stream's free extents */
    pp__extent_t *ext;                   /* free extents, unordered */
    size_t next, ncap;
    uint64_t end;                        /* first byte never handed out */
    _Atomic uint64_t swapped_bytes;      /* entry bytes only on disk */
    _Atomic uint64_t ev_written, ev_clean, ev_abandoned;
    _Atomic uint64_t loads, load_waits, sw_written, sw_raw, sw_read, sw_used;
    _Atomic uint64_t csum_fail, io_errors;
    _Atomic uint64_t pass_seq;           /* last room request a pass served */
    _Atomic int pass_stuck;              /* that pass could free nothing */
    uint32_t hand, hand_end;             /* CLOCK hand, end of its turn (swap thread) */
    uint64_t synced;                     /* sw_written at the last sync (swap thread) */
    _Atomic int io_stop;
    pp__thread_t *st;                    /* the swap thread's record (counters) */
    pthread_t io_thread;
    bool io_started;
} pp__node_t;

/* ------------------------------------------------------------------------ */
/* Pool                                                                      */
/* ------------------------------------------------------------------------ */

typedef struct pp__pinrec pp__pinrec_t;  /* track.c */

struct pp_pool {
    uint64_t serial;                     /* unique per pool instance */
    unsigned nnodes;
    /* dir[n] is nodes[n]->dir, kept here so a lookup is two dependent
     * loads (directory, segment) before the entry, not three. */
    pp__entry_t *_Atomic *dir[PP_MAX_NODES];
    pp__node_t *nodes[PP_MAX_NODES];
    bool track;
    size_t mem_limit;
    _Atomic uint64_t resident;           /* reserved resident bytes, for mem_limit */
    _Atomic uint64_t resident_peak;

    /* Swap (evict.c, swap.c). */
    bool swap;
    bool compress;
    struct pp__swapdev *dev;
    uint64_t swap_limit;
    _Atomic uint64_t swap_used;          /* extent bytes held, all nodes */
    uint64_t high_wm, low_wm;            /* eviction starts / stops */
    _Atomic uint64_t room_req;           /* room requests made (sequence) */
    _Atomic uint64_t room_want;          /* bytes waited for */
    _Atomic uint64_t room_waits, room_enomem;
    struct ck_ec32 room_ec;              /* a pass ended, or bytes were freed */
    void (*report)(const char *line, void *ctx);
    void *report_ctx;

    /* Hot entries (hot.c); set by the first pp__hot_init. */
    unsigned hot_shards;                 /* S: a power of two */
    uint64_t hot_scap, hot_ccap;         /* a shard's and the central counter's
                                            capacity: S * scap + ccap = PP_MAX_PINS */
    unsigned hot_after;                  /* failed CASes in one pin before it
                                            tries to promote (0: never) */
    _Atomic unsigned next_shard;         /* shards given to threads in turn */

    /* Topology (topology.c). */
    hwloc_topology_t topo;
    bool thissystem;
    int ncpus;
    uint8_t *cpu_node;                   /* [ncpus] OS cpu index -> node */

    /* Epochs and threads (epoch.c). */
    ck_epoch_t epoch;
    pthread_mutex_t reg_lock;            /* thread list, recycling */
    pp__thread_t *_Atomic threads;       /* every record, newest first; added
                                            under reg_lock, read lock-free by
                                            the reclaimers */
    _Atomic unsigned next_rr;            /* round-robin node for synthetic topologies */
    char tsan_token;                     /* TSan: grace-period happens-before token */

    /* Pin tracking (track.c). */
    pthread_mutex_t track_lock;
    pp__pinrec_t *track_recs;
    size_t track_n, track_cap;

    sem_t started;                       /* reclaimers up */
    struct pp_pool *next_live;           /* global registry, epoch.c */
};

/* ------------------------------------------------------------------------ */
/* Part APIs                                                                 */
/* ------------------------------------------------------------------------ */

/* alloc.c -- pinpool's own allocations, counted (never the entries' data). */
void *pp__malloc(size_t size);
void *pp__calloc(size_t n, size_t size);
void *pp__realloc(void *p, size_t size);
void *pp__aligned_alloc(size_t align, size_t size);   /* zeroed */
void pp__free(void *p);
uint64_t pp__alloc_count(void);   /* allocations so far, all pools */
bool pp__alloc_note(void);        /* counts one made elsewhere; false: fail it */
/* Test hook: the allocation n allocations from now fails (0: the next);
 * n < 0: none does. */
void pp__alloc_fail_after(int64_t n);
/* Fault-injection hook (the torture's --faults): while set, every
 * allocation above -- and the flat loads' data (swap.c) -- asks fail(size,
 * ctx) first and fails if it returns true.  NULL removes it.  Set it while
 * no pool call runs, or make fail() itself safe to call from any thread
 * (it is called from the pool's swap threads too). */
typedef bool (*pp__alloc_fault_fn)(size_t size, void *ctx);
void pp__alloc_fault_hook(pp__alloc_fault_fn fail, void *ctx);

/* error.c */
void pp__report(pp_pool_t *pool, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* topology.c -- pre: pool zeroed; post: nnodes >= 1, cpusets filled. */
int pp__topology_load(pp_pool_t *pool, const char *spec);
void pp__topology_free(pp_pool_t *pool);
/* Memory for node n: bound to the node where the OS allows (*bound says),
 * else ordinary pages.  Zeroed.  NULL on failure. */
void *pp__node_alloc(pp_pool_t *pool, unsigned n, size_t len, bool *bound);
void pp__node_free(pp_pool_t *pool, void *p, size_t len);
/* Binds the calling thread to node n's CPUs, or (one_cpu) to the last of
 * them this process may run on; false where impossible. */
bool pp__bind_thread_to_node(pp_pool_t *pool, unsigned n, bool one_cpu);
/* Node of the calling thread (real topology: the CPU it runs on). */
unsigned pp__current_node(pp_pool_t *pool, pp__thread_t *t);

/* table.c */
int pp__table_init(pp_pool_t *pool, pp__node_t *node);
void pp__table_free(pp_pool_t *pool, pp__node_t *node);
/* Entry named by ref, or NULL if the ref cannot name a slot (the caller
 * still validates the generation).  Lock-free, no allocation. */
static inline pp__entry_t *pp__lookup(pp_pool_t *pool, pp_ref_t ref)
{
    unsigned n = pp_ref_node(ref);
    uint32_t slot = pp_ref_slot(ref);
    if (PP__UNLIKELY(n >= pool->nnodes || pp_ref_gen(ref) == 0))
        return NULL;
    /* acquire: pairs with the segment's release-install, so the zeroed
     * segment is seen before any state word in it. */
    pp__entry_t *seg = pp__atomic_load_acquire(&pool->dir[n][slot >> PP__SEG_SHIFT]);
    if (PP__UNLIKELY(seg == NULL))
        return NULL;
    return &seg[slot & (PP__SEG_SLOTS - 1)];
}
pp__entry_t *pp__slot_alloc(pp_pool_t *pool, unsigned n, pp__thread_t *t);
void pp__slot_free(pp_pool_t *pool, unsigned n, pp__entry_t *e);
void pp__magazine_return(pp_pool_t *pool, pp__thread_t *t);
/* Calls fn on every slot ever handed out on node n (single-threaded use). */
void pp__table_foreach(pp_pool_t *pool, unsigned n,
                       void (*fn)(pp_pool_t *, unsigned, pp__entry_t *, void *),
                       void *arg);

/* epoch.c */
extern __thread struct pp__tls_node *pp__tls_last
    __attribute__((tls_model("initial-exec")));
struct pp__tls_node {
    uint64_t serial;
    pp__thread_t *t;
    struct pp__tls_node *next;
};
pp__thread_t *pp__thread_get_slow(pp_pool_t *pool);
/* The calling thread's record if it is the one it used last, else NULL. */
static inline pp__thread_t *pp__thread_cached(pp_pool_t *pool)
{
    struct pp__tls_node *n = pp__tls_last;
    return PP__LIKELY(n != NULL && n->serial == pool->serial) ? n->t : NULL;
}
/* The calling thread's record for pool, registering it on first use.
 * NULL only if that one-time registration could not allocate. */
static inline pp__thread_t *pp__thread_get(pp_pool_t *pool)
{
    struct pp__tls_node *n = pp__tls_last;
    if (PP__LIKELY(n != NULL && n->serial == pool->serial))
        return n->t;
    return pp__thread_get_slow(pool);
}
/* The prologue of every call that takes a ref: the entry the ref names and
 * the calling thread's record.  0, PP_EINVAL, PP_ESTALE or PP_ENOMEM. */
static inline int pp__begin(pp_pool_t *pool, pp_ref_t ref, pp__entry_t **e,
                            pp__thread_t **t)
{
    if (PP__UNLIKELY(pool == NULL))
        return PP_EINVAL;
    *e = pp__lookup(pool, ref);
    if (PP__UNLIKELY(*e == NULL))
        return PP_ESTALE;
    *t = pp__thread_get(pool);
    if (PP__UNLIKELY(*t == NULL))
        return PP_ENOMEM;
    return 0;
}
int pp__epoch_init(pp_pool_t *pool);
pp__thread_t *pp__thread_new_reclaimer(pp_pool_t *pool);
void pp__section_enter(pp__thread_t *t);
void pp__section_leave(pp__thread_t *t);
void pp__section_end(pp__thread_t *t);   /* ends it even in QSBR mode */
void pp__registry_add(pp_pool_t *pool);
void pp__registry_remove(pp_pool_t *pool);
void pp__tls_forget(pp_pool_t *pool);
void pp__threads_free(pp_pool_t *pool);
unsigned pp__threads_in_use(pp_pool_t *pool);

/* reclaim.c */
extern const struct ck_ec_mode pp__ec_mode;   /* futex ops, many producers */
int pp__reclaim_start(pp_pool_t *pool);
void pp__reclaim_stop(pp_pool_t *pool);
/* Queues a dead, unpinned entry (the caller made it QUEUED) and returns at
 * once.  Never blocks; wakes the reclaimer only if it sleeps. */
void pp__reclaim_push(pp_pool_t *pool, unsigned n, pp__entry_t *e, pp__thread_t *t);
uint64_t pp__now_ns(void);

/* track.c */
int pp__track_pin(pp_pool_t *pool, pp__thread_t *t, pp_ref_t ref,
                  const char *file, int line);
void pp__track_unpin(pp_pool_t *pool, pp__thread_t *t, pp_ref_t ref);
size_t pp__track_report_thread(pp_pool_t *pool, pp__thread_t *t);
size_t pp__track_report_ref(pp_pool_t *pool, pp_ref_t ref);
void pp__track_free(pp_pool_t *pool);

/* owner.c / pin.c shared helper: the transition to DEAD after the last
 * release (pushes the entry if it holds no pins). */
void pp__entry_kill(pp_pool_t *pool, unsigned n, pp__entry_t *e, uint32_t gen,
                    pp__thread_t *t);
int pp__unpin(pp_pool_t *pool, pp_ref_t ref, pp__thread_t *t);

/* evict.c -- memory reservations, swap threads, loads. */
/* Reserves size bytes against mem_limit.  Without swap (or wait false) a
 * hard cap: PP_ENOMEM if it does not fit.  With swap and wait, has the swap
 * threads evict and waits for room; PP_ENOMEM once nothing evictable is
 * left.  0 on success (always without a limit). */
int pp__mem_reserve(pp_pool_t *pool, size_t size, bool wait);
void pp__mem_unreserve(pp_pool_t *pool, size_t size);
int pp__evict_start(pp_pool_t *pool);
void pp__evict_stop(pp_pool_t *pool);
/* The slow path of a pin, get or pin_many: the entry is not resident, or a
 * write pin met an eviction in progress.  Pins (pin true) or makes
 * resident and escaped (pin false), loading it if needed.  0 or an error,
 * as pp_pin documents. */
int pp__pin_slow(pp_pool_t *pool, pp__entry_t *e, pp_ref_t ref, unsigned flags,
                 bool pin, void **data);
/* Starts a load on the swap thread if the entry is swapped and no load
 * runs.  Never blocks.  0 or PP_ESTALE. */
int pp__load_start(pp_pool_t *pool, pp__entry_t *e, pp_ref_t ref);
/* Waits until no eviction holds e (a write pin's data must not be read by
 * the swap thread while the caller writes).  The caller holds a pin. */
void pp__evict_wait(pp_pool_t *pool, unsigned n, pp__entry_t *e);
/* After clearing BUSY: queues a dead, unpinned entry (next has QUEUED set)
 * and wakes whoever waits for the node's I/O. */
/* A final release or unpin that finds an I/O in flight (BUSY) leaves the
 * entry to whoever ends the I/O (pp__io_end).  It counts the entry in its
 * node's dead_in_io before its CAS (defer: the CAS about to be tried
 * defers), so the count never lags behind the queueing and a drain that
 * starts after the release returned waits for it.  *held says the count is
 * taken; a retry that no longer defers gives it back.  Relaxed: the count
 * only has to be coherent with the caller's own later calls (drain), and
 * the ender's decrement orders its push (pp__io_end). */
static inline void pp__dead_in_io_note(pp_pool_t *pool, unsigned n, bool defer, bool *held)
{
    if (PP__UNLIKELY(defer != *held)) {
        pp__atomic_add_relaxed(&pool->nodes[n]->dead_in_io, defer ? 1 : -1);
        *held = defer;
    }
}

void pp__io_end(pp_pool_t *pool, unsigned n, pp__entry_t *e, uint64_t next,
                pp__thread_t *t);

/* swap.c -- the store.  Pre for save: the caller (node's swap thread) has
 * e claimed EVICTING with SWAPPED clear; claimed is the word it set. */
int pp__swap_open(pp_pool_t *pool, const pp_options_t *opt, struct pp__swapdev *dev);
void pp__swap_close(pp_pool_t *pool);
/* Writes e's data as its swap copy.  0, PP_EAGAIN (e's word changed: a pin
 * won, nothing kept), PP_EIO (device failed), PP_ENOMEM (swap_limit or no
 * memory); on failure no extent is kept. */
int pp__swap_save(pp_pool_t *pool, pp__node_t *node, pp__entry_t *e, uint64_t claimed);
/* Reads e's copy into new memory (*data), checksum verified.  The caller
 * holds LOADING.  0, PP_EIO, PP_ECORRUPT, PP_ENOMEM; the copy is kept. */
int pp__swap_load(pp_pool_t *pool, pp__node_t *node, pp__entry_t *e, void **data);
/* Frees e's extent (its record must hold one). */
void pp__swap_drop(pp_pool_t *pool, pp__node_t *node, pp__entry_t *e);
/* Whether entries of this type can be evicted. */
bool pp__type_swappable(const pp_type_t *type);

/* hot.c -- see there.  Internal results besides 0 and PP_E*: */
#define PP__SLOW  1   /* pin: not resident, or a write pin meets an eviction */
#define PP__HOT   2   /* pin/unpin: the entry is HOT: pp__hot_pin/unpin */
#define PP__RETRY 3   /* hot pin/unpin: no longer HOT, do it on the word */
#define PP__PIN_WPIN 0x100u  /* pin flag (internal): set WPIN, not DIRTY (pp_pin_many) */
static inline unsigned pp__hot_index(uint64_t pw) { return (unsigned)(pw & PP__PINS_MASK); }
/* The fast path of a hot pin (inc 1) or unpin (inc -1): one CAS on the
 * caller's shard, if e's word is still the one the thread last saw (so the
 * cached line and tag are that promotion's: a later promotion has a larger
 * tag, and the CAS checks it).  false: nothing done, take pp__hot_pin or
 * pp__hot_unpin. */
static inline bool pp__hot_fast(pp__thread_t *t, pp__entry_t *e, uint64_t pw, int inc,
                                uint64_t cap)
{
    if (t->hc.e != e || t->hc.pw != pw)
        return false;
    _Atomic uint64_t *l = &t->hc.line->w;
    uint64_t w = pp__atomic_load_relaxed(l);
    while ((uint32_t)(w >> 32) == t->hc.tag && !(w & PP__HOT_CLOSED) &&
           (inc > 0 ? (w & PP__HOT_COUNT) < cap : (w & PP__HOT_COUNT) != 0)) {
        PP__YIELD(PIN);
        /* acq_rel: a pin's acquire and an unpin's release, as in
         * pp__hot_pin and pp__hot_take (hot.c). */
        if (pp__atomic_cas_weak_acq_rel(l, &w, w + (uint64_t)(int64_t)inc))
            return true;
    }
    return false;
}
int pp__hot_init(pp_pool_t *pool, pp__node_t *node);
void pp__hot_free(pp_pool_t *pool, pp__node_t *node);
/* Tries to make e HOT (a pin met contention); does nothing if it cannot. */
void pp__hot_promote(pp_pool_t *pool, unsigned n, pp__entry_t *e, uint32_t gen);
/* Ends the HOT mode of e, helping anyone else at it. */
void pp__hot_demote(pp_pool_t *pool, unsigned n, pp__entry_t *e);
/* Pin and unpin of a HOT entry: 0, PP_ESTALE, or PP__RETRY (not HOT: do
 * it on the word).  A write pin demotes and returns PP__RETRY. */
int pp__hot_pin(pp_pool_t *pool, unsigned n, pp__entry_t *e, uint32_t gen,
                unsigned flags, pp__thread_t *t, void **data);
int pp__hot_unpin(pp_pool_t *pool, unsigned n, pp__entry_t *e, uint32_t gen,
                  pp__thread_t *t);
/* The pins e holds: the word's count, or a snapshot of its hot counters. */
uint32_t pp__hot_pins(pp_pool_t *pool, unsigned n, pp__entry_t *e, uint64_t pw);
/* Hot slots taken on node n. */
unsigned pp__hot_in_use(pp_pool_t *pool, unsigned n);
/* With no call running: each taken slot of node n has holders[i] == 1 (or
 * 0 if retired), each free one 0, and none has a demoter registered. */
bool pp__hot_slots_valid(pp_pool_t *pool, unsigned n, const uint32_t *holders);

/* stats.c */
unsigned pp__lag_bucket(uint64_t ns);
uint64_t pp__lag_bucket_upper(unsigned b);

/* pool.c */
bool pp__pool_is_valid(pp_pool_t *pool);

/* Test hooks (used only by tests/). */
int pp__debug_set_owners(pp_pool_t *pool, pp_ref_t ref, uint32_t owners);
/* Gives a live, unpinned entry generation gen; its new ref in *out.
 * Single-threaded use only (no other call may touch the entry). */
int pp__debug_set_gen(pp_pool_t *pool, pp_ref_t ref, uint32_t gen, pp_ref_t *out);
/* pp_pool_create with the given swap device instead of the file device
 * (it takes dev over, closing it on failure).  Tests only. */
int pp__pool_create_dev(const pp_options_t *opt, struct pp__swapdev *dev, pp_pool_t **out);
/* The swap copy of a live entry: its stream offset and stored length.
 * PP_ESTALE, or PP_EAGAIN if it has no copy.  Tests only. */
int pp__debug_swap_where(pp_pool_t *pool, pp_ref_t ref, uint64_t *off, uint64_t *len);
/* op > 0: tries to make ref's entry HOT (only while it holds no pin);
 * op == 0: ends its HOT mode; op < 0: only asks.  Returns 1 if it is HOT
 * now, 0 if not, PP_ESTALE.  Tests only. */
int pp__debug_hot(pp_pool_t *pool, pp_ref_t ref, int op);
/* Failed CASes in one pin before it tries to promote (0: never; default 2). */
void pp__debug_hot_after(pp_pool_t *pool, unsigned fails);
/* The pool's private swap directory ("" without swap). */
const char *pp__swap_path(pp_pool_t *pool);

#endif /* PP_INTERNAL_H */
