/*
 * types.h -- pinpool's internal structures: refs and slot tables, thread
 * records, hot slots, swap records, node domains and the pool.  The entry
 * and its state words are drawn in entry.h; what each part does with these
 * is declared in internal.h.
 *
 * The padding rule (checks.h, PP__PAD): fields written by different threads
 * are kept PP__PAD (128) bytes apart, since CPUs prefetch cache lines in
 * adjacent pairs.  A node's state is one sub-struct per writer, each
 * aligned to PP__PAD.
 */
#ifndef PP_TYPES_H
#define PP_TYPES_H

#include <ck_ec.h>
#include <ck_epoch.h>
#include <ck_stack.h>
#include <hwloc.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "os/checks.h"
#include "core/entry.h"
#include "pinpool.h"

/* ------------------------------------------------------------------------ */
/* Refs and tables                                                           */
/* ------------------------------------------------------------------------ */

/* ref = node:6 | slot:26 | gen:32 (see pp_ref_node/slot/gen in pinpool.h) */
#define PP__SLOT_BITS   26u
#define PP__MAX_SLOTS   ((uint32_t)1 << PP__SLOT_BITS)
_Static_assert(PP__SLOT_BITS == PP__TABLE_SLOT_BITS, "a table has room for every slot");
#define PP__SEG_MAX     (PP__MAX_SLOTS >> PP__SEG_SHIFT)  /* 2048 segments (entry.h) */
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
_Static_assert(PP__HOT_CLOSED == PP__INLINE_HOT_CLOSED && PP__HOT_COUNT == PP__INLINE_HOT_COUNT,
               "pinpool_inline.h's counter word is hot.c's");

/* Per thread and node counters.  Single writer (the thread), read by stats. */
typedef struct pp__tcount {
    _Atomic uint64_t puts, pins, unpins, retains, releases, gets, queued;
} pp__tcount_t;

_Static_assert(sizeof(pp__tcount_t) == PP__INLINE_COUNT_WORDS * sizeof(uint64_t) &&
                   offsetof(pp__tcount_t, pins) == PP__INLINE_COUNT_PINS * sizeof(uint64_t) &&
                   offsetof(pp__tcount_t, unpins) == PP__INLINE_COUNT_UNPINS * sizeof(uint64_t),
               "pinpool_inline.h's counters are the thread's");

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
     * word then, its shard's counter and the promotion's tag (hot.c);
     * pinpool_inline.h's fast paths pin and unpin there too. */
    pp__inline_hot_t hc;
    _Atomic int tid;                     /* OS thread id of the current user */
    bool in_use;                         /* under reg_lock */
    bool is_reclaimer;
    struct pp__tbuf *tbuf;               /* its trace events (tevent.c), made
                                            at its first event; kept with the
                                            record until destroy */
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

/* Eviction advice (advise.c), by slot, beside the table: one word per slot,
 * (generation << 32) | PP_ADVISE_*, so advice given to an entry never
 * applies to a later entry of the same slot; and one bit per slot set while
 * the word says PP_ADVISE_WONTNEED, so the swap thread finds those entries
 * without reading every word.  Allocated with the table's segment (swap
 * pools only), never freed before destroy. */
typedef struct advseg {
    _Atomic uint64_t word[PP__SEG_SLOTS];
    _Atomic uint64_t wontneed[PP__SEG_SLOTS / 64];
} pp__advseg_t;

typedef struct pp__extent {
    uint64_t off, len;
} pp__extent_t;

/* ------------------------------------------------------------------------ */
/* Node domains                                                              */
/* ------------------------------------------------------------------------ */

#define PP__LAG_BUCKETS 128
#define PP__LAG_SAMPLE  64           /* one queued entry in 64 carries its time */
#define PP__LAG_NONE    UINT32_MAX   /* queued_us of an entry not sampled */

#define PP__HOT_SLOTS      64u    /* per node: one bit each in hot.used */
#define PP__HOT_MAX_SHARDS 256u

/* One node domain.  Each sub-struct holds what one side writes and starts
 * PP__PAD bytes after the one before it (the padding rule, above). */
typedef struct pp__node {
    /* Read-mostly: set at create, read by everyone. */
    pp_pool_t *pool;
    unsigned index;
    hwloc_cpuset_t cpuset;               /* the node's CPUs */
    hwloc_nodeset_t nodeset;             /* the node itself */
    char *table;                         /* the reserved range of its table: segments
                                            are committed in it, never uncommitted
                                            before destroy (table.c) */
    pthread_mutex_t seg_lock;            /* commits segments in order (table.c) */
    pp__advseg_t *_Atomic *adv;          /* [PP__SEG_MAX] advice (swap pools), by segment */
    _Atomic int mem_bound;               /* node and segments bound to the node */

    /* Producers -- final unpins and releases on any thread, and the ends
     * of I/O -- and the reclaimer that consumes what they queue (their
     * queues are their threads' own: pp__thread_t.rq). */
    struct {
        _Atomic int sleeping;            /* the reclaimer is about to wait or
                                            waits: a push must bump `wake` */
        _Atomic uint64_t dying_bytes;    /* swap: resident bytes queued, not yet freed */
        _Atomic int64_t dead_in_io;      /* dead, unpinned, queued when their I/O ends
                                            (pp__dead_in_io_note, pp__ioend_finish) */
        /* Wakes the reclaimer; written by its waits, so apart from what
         * every final unpin reads (`sleeping`). */
        struct ck_ec32 wake __attribute__((aligned(PP__PAD)));
    } __attribute__((aligned(PP__PAD))) prod;

    /* Putters (and whoever frees: the counts go down there).  The backlog
     * shares the line of resident_bytes, which every put writes anyway:
     * a put reads it there for nothing, and a put followed by a final
     * release moves one line, not two (backlog.c). */
    struct {
        _Atomic uint32_t next_slot;      /* the bump index of never-used slots */
        _Atomic uint64_t resident_bytes; /* put minus freed */
        _Atomic uint64_t backlog;        /* charge of dead entries queued, not yet freed */
        _Atomic uint64_t backlog_peak;   /* the highest backlog so far */
    } __attribute__((aligned(PP__PAD))) put;

    /* Puts waiting for the backlog (backlog.c): written by them, read by
     * the reclaimer at each free while any waits. */
    struct {
        _Atomic uint32_t waiters;        /* puts waiting now */
        struct ck_ec32 ec;               /* bumped when the backlog falls below the mark */
        _Atomic uint64_t waits, wait_ns, wait_max_ns, refused;
    } __attribute__((aligned(PP__PAD))) bl;

    /* Free slots: pushed by the reclaimer, popped by putters. */
    ck_stack_t free_slots __attribute__((aligned(PP__PAD)));

    /* The reclaimer only writes these (stats read them). */
    struct {
        _Atomic uint64_t frees;
        _Atomic uint64_t grace_polls;
        _Atomic uint64_t retired_slots;
        _Atomic uint64_t lag_count, lag_total_ns, lag_max_ns;
        _Atomic uint64_t lag_hist[PP__LAG_BUCKETS];
        _Atomic uint64_t leaked_owned;   /* entries freed by destroy's sweep */
        pp_ref_t leaked_first[4];        /* a few of them, for the report */
        _Atomic int tid;
        _Atomic int cpu_bound;
        _Atomic int stop;
        _Atomic int round_work;          /* destroy: the last round did something */
        pp__thread_t *rt;                /* the reclaimer's epoch record */
        pthread_t thread;
        bool started;
    } __attribute__((aligned(PP__PAD))) rc;

    /* Hot slots (hot.c): PP__HOT_SLOTS x (1 + pool->hot_shards) lines;
     * used is written by promoters and demoters. */
    struct {
        pp__hot_line_t *lines;
        size_t bytes;
        _Atomic uint64_t used;           /* bit i: slot i taken (or retired) */
        _Atomic uint64_t promotions, demotions, full;
    } __attribute__((aligned(PP__PAD))) hot;

    /* Swap (swap/); untouched without swap, but for the
     * CLOCK hand (hand, hand_end), the drop and abandon counts and io_done,
     * which putters that drop PP_TYPE_DISCARD entries use one at a time
     * (room.c, pool->drop_busy).  The load queue and io_done are written by
     * pinning threads, the rest mostly by the node's swap thread. */
    struct {
        ck_stack_t load_q __attribute__((aligned(PP__PAD)));  /* queued loads */
        struct ck_ec32 io_wake;          /* wakes the swap thread */
        struct ck_ec32 io_done __attribute__((aligned(PP__PAD)));
                                         /* bumped when an entry's I/O ends */
        _Atomic uint64_t loads, load_waits; /* counted by loaders */
        _Atomic uint32_t evict_tail __attribute__((aligned(PP__PAD)));
                                         /* evictions between their commit and the
                                            end of their free and accounting */
        pp__swaprec_t *_Atomic *sdir;    /* [PP__SEG_MAX] records, by slot */
        pthread_mutex_t space_lock;      /* the stream's free extents */
        /* The device's busy time per direction ([0] reads, [1] writes):
         * requests with the device now, since when, and the time so far
         * with at least one there (busy.c). */
        pthread_mutex_t busy_lock;
        uint32_t busy_n[2];
        uint64_t busy_since[2], busy_ns[2];
        pp__extent_t *ext;               /* free extents, unordered */
        size_t next, ncap;
        uint64_t end;                    /* first byte never handed out */
        _Atomic uint64_t swapped_bytes;  /* entry bytes only on disk */
        _Atomic uint64_t ev_written, ev_clean, ev_abandoned;
        _Atomic uint64_t drops;          /* PP_TYPE_DISCARD entries dropped */
        _Atomic uint64_t sw_written, sw_raw, sw_read, sw_used;
        _Atomic uint64_t csum_fail, io_errors;
        _Atomic uint64_t advised;        /* wontneed bits set (advise.c) */
        _Atomic uint64_t ev_advised;     /* evictions and drops of WONTNEED entries */
        _Atomic uint64_t pass_seq;       /* last room request a pass served */
        _Atomic int pass_stuck;          /* that pass could free nothing */
        /* The largest PP_PUT_NOWAIT/PP_PIN_NOWAIT size refused since this
         * node's last pass: one per node, as a pass that ends on one node
         * must not clear what another's has yet to see (evict.c). */
        _Atomic uint64_t room_hint;
        uint32_t hand, hand_end;         /* CLOCK hand, end of its turn (swap thread) */
        uint64_t synced;                 /* sw_written at the last sync (swap thread) */
        _Atomic int io_stop;
        pp__thread_t *st;                /* the swap thread's record (counters) */
        struct pp__reader *reader;       /* swap.c: the node's read helper */
        struct pp__xfer *xf;             /* xfer.c: the io_uring engine, or NULL */
        /* The engine's counts (pinpool.h, pp_node_stats_t.io_*): */
        _Atomic uint64_t io_requests, io_submits, io_inflight, io_inflight_peak;
        _Atomic uint64_t io_load_bytes, io_load_bytes_peak, io_load_recycled;
        _Atomic uint64_t io_write_bytes; /* the engine's write-outs in flight */
        pthread_t io_thread;
        bool io_started;
    } __attribute__((aligned(PP__PAD))) sw;
} pp__node_t;

/* ------------------------------------------------------------------------ */
/* Pool                                                                      */
/* ------------------------------------------------------------------------ */

typedef struct pp__pinrec pp__pinrec_t;  /* track.c */

struct pp_pool {
    /* What every pin and unpin reads, first (pinpool_inline.h): the pool's
     * serial (unique per pool instance), the layout's version, whether
     * every pin goes the full way (track), and node n's table (table.c):
     * how many of its slots are committed (lim[n]) and its reserved range
     * (base[n]).  A lookup computes the entry's address from the base and
     * the slot alone and checks the slot against lim[n]: no load on the
     * way to the entry but the base's.  Nodes past nnodes have lim 0.
     * fast.full is the pool's PP_TRACK_PINS: tracked pins go the full way. */
    pp__inline_pool_t fast;
    unsigned nnodes;
    pp__node_t *nodes[PP_MAX_NODES];
    size_t mem_limit;
    /* The reclaim backlog (backlog.c): its bound per node and the mark at
     * which puts wait (UINT64_MAX both: no bound).  Read by every put. */
    uint64_t backlog_bound, backlog_mark;
    _Atomic uint64_t resident;           /* reserved resident bytes, for mem_limit */
    _Atomic uint64_t resident_peak;

    /* Swap (swap/). */
    bool swap;
    bool compress;
    struct pp__swapdev *dev;
    uint64_t swap_limit;
    _Atomic uint64_t swap_used;          /* extent bytes held, all nodes */
    uint64_t high_wm, low_wm;            /* eviction starts / stops */
    _Atomic uint64_t room_req;           /* room requests made (sequence) */
    _Atomic uint64_t room_want;          /* bytes waited for */
    _Atomic uint64_t room_waits, room_enomem;
    /* The I/O engine (xfer.c): PP_IO_ENGINE_URING or _THREADS, its depth,
     * why it was chosen; bytes of victims whose write-out is in flight
     * (resident still, on their way out: is_above). */
    unsigned io_engine, io_depth;
    char io_why[96];
    _Atomic uint64_t evict_inflight;
    struct ck_ec32 room_ec;              /* a pass ended, or bytes were freed */

    /* PP_TYPE_DISCARD entries (evict.c drops them, room.c makes room with
     * them), in pools with a limit; written only for those entries. */
    _Atomic uint64_t discard_entries;    /* droppable entries put, not yet freed */
    _Atomic uint64_t discard_dying;      /* their bytes queued, not yet freed: on
                                            their way out, so the hands do not
                                            evict for them (pp__retire_push adds,
                                            the reclaimer subtracts) */
    _Atomic int drop_busy;               /* without swap: a putter runs the hands */
    _Atomic int io_closed;               /* destroy stops the swap threads: no
                                            load may be queued (pp__load_start) */
    _Atomic uint32_t cb_loads;           /* callbacks in pp__load_start */
    /* Destroy's last rounds (reclaim.c, pp__reclaim_stop): the round the
     * reclaimers are asked to run (PP__ROUND_EXIT: leave). */
    _Atomic uint32_t stop_round;
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
    hwloc_bitmap_t run_cpus;             /* this system: the CPUs the process was
                                            bound to at pool creation (taskset,
                                            mpiexec), within its cgroup's */
    int ncpus;
    uint8_t *cpu_node;                   /* [ncpus] OS cpu index -> node */

    /* Epochs and threads (epoch.c, thread.c). */
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

    /* The timeline trace: recorded by tevent.c, written by trace.c. */
    _Atomic int trace_on;                /* events are recorded */
    struct pp__tbuf *_Atomic tbufs;      /* every thread's events, newest first */
    _Atomic uint64_t trace_lost;         /* events of threads whose buffer
                                            could not be made */
    struct pp__trace *trace;             /* the running trace (trace.c) */
    pthread_mutex_t trace_lock;          /* start, stop */

    sem_t started;                       /* reclaimers up */
    struct pp_pool *next_live;           /* global registry, thread.c */
};

#endif /* PP_TYPES_H */
