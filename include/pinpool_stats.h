/*
 * pinpool_stats.h -- a pool's statistics: totals, pool-wide figures and
 * per-node figures.  pinpool.h includes it; it may also be included on its
 * own (it includes pinpool.h).
 *
 * ---------------------------------------------------------------------------
 * A stable ABI: size and version
 * ---------------------------------------------------------------------------
 *  Both structs begin with the caller's size and version.  Start from
 *  PP_STATS_INIT or PP_NODE_STATS_INIT, which set them to this header's:
 *
 *      pp_stats_t s = PP_STATS_INIT;
 *      if (pp_pool_stats(pool, &s) == 0)
 *          printf("%" PRIu64 " entries\n", s.total.entries);
 *
 *  The library fills a struct only if it knows the pair: version 2 (this
 *  header's) with the size of version 2's struct, or version 1 with the
 *  size of version 1's, which is filled up to its end and no further.  Any
 *  other pair (size 0, a version it does not know, a size that is not its
 *  version's) gets PP_EINVAL and a line through the pool's report hook
 *  that names the size and version it expects; nothing is written to out
 *  then.  Counters are only ever appended at the end of a struct, and each
 *  addition bumps PP_STATS_VERSION, so a program built against an older
 *  header keeps its layout and its figures.  pp_stats_t ends with total,
 *  so a version's pp_stats_t is the one before it with a longer total.
 *
 *  Version 1: up to reclaimer_tid, cpu_bound and mem_bound.
 *  Version 2: swap_write_ns and swap_read_ns appended.
 */
#ifndef PINPOOL_STATS_H
#define PINPOOL_STATS_H

#include "pinpool.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The version of pp_stats_t and pp_node_stats_t that this header declares. */
#define PP_STATS_VERSION 2u

/* The tag is not pp_node_stats: in C++ that function would hide it. */
typedef struct pp_node_stats_s {
    size_t size;                 /* sizeof(pp_node_stats_t): set by the caller */
    unsigned version;            /* PP_STATS_VERSION: set by the caller */
    uint64_t entries;            /* put and not yet freed */
    uint64_t resident_bytes;     /* bytes of those entries in memory */
    uint64_t swapped_bytes;      /* bytes of those entries only on disk */
    uint64_t puts, retains, releases, gets;
    uint64_t pins, unpins;       /* counted on the entry's home node */
    uint64_t evictions_written;  /* evicted after writing a new copy */
    uint64_t evictions_clean;    /* evicted without a write (valid copy) */
    uint64_t evictions_advised;  /* of those two and of drops, entries
                                    advised PP_ADVISE_WONTNEED */
    uint64_t evictions_abandoned;/* a pin (or get, or death) won the race
                                    (drops abandoned included) */
    uint64_t drops;              /* PP_TYPE_DISCARD entries dropped to make
                                    room: killed, not written (their frees
                                    are counted in frees, not above) */
    uint64_t loads;              /* successful loads from swap */
    uint64_t load_waits;         /* pins that waited for another's load */
    uint64_t swap_bytes_written; /* bytes written to the device */
    uint64_t swap_raw_written;   /* the same copies' bytes before compression */
    uint64_t swap_bytes_read;    /* bytes read from the device */
    uint64_t swap_used_bytes;    /* bytes the node's swap copies hold now */
    uint64_t checksum_failures;  /* loads that found a bad checksum */
    uint64_t io_errors;          /* failed device writes, reads */
    uint64_t queued;             /* entries pushed to the reclaim queue */
    uint64_t frees;              /* entries reclaimed, once each (free function
                                    called for data in memory, swap copy
                                    dropped); frees of evicted data are
                                    counted as evictions */
    uint64_t reclaim_queue_depth;/* queued and not yet freed */
    uint64_t dead_in_io;         /* dead and unpinned, but an eviction or load
                                    of theirs is in flight: queued when it
                                    ends (pp_pool_drain waits for them too) */
    uint64_t grace_polls;        /* epoch polls made by the reclaimer */
    /* The reclaim backlog (docs/api.md, "Overload"): */
    uint64_t backlog_bytes;      /* dead entries queued or in their grace
                                    period: resident bytes + 64 each */
    uint64_t backlog_peak;       /* the highest backlog_bytes so far */
    uint64_t backlog_waiting;    /* puts waiting for it now */
    uint64_t backlog_waits;      /* puts that waited for it (their wait over) */
    uint64_t backlog_wait_ns;    /* their time waiting, in total */
    uint64_t backlog_wait_max_ns;/* the longest such wait */
    uint64_t backlog_refused;    /* puts that returned PP_EAGAIN or
                                    PP_EDEADLK instead of waiting for it */
    uint64_t slots;              /* table slots allocated on the node */
    uint64_t retired_slots;      /* slots whose generations ran out: never reused */
    /* Hot entries (docs/api.md, "Hot entries"): */
    uint64_t hot_entries;        /* entries whose pins are sharded now */
    uint64_t hot_promotions;     /* entries made hot so far */
    uint64_t hot_demotions;      /* hot entries back to one counter so far */
    uint64_t hot_full;           /* promotions not made: all hot slots taken */
    /* Reclaim lag: time from the final unpin/release to the free call,
     * sampled (a clock read costs more than the rest of a final unpin):
     * the first of every 64 entries a thread queues for a node is timed. */
    uint64_t lag_count, lag_total_ns, lag_max_ns;
    uint64_t lag_p50_ns, lag_p99_ns;  /* from a histogram with 4 buckets
                                         per power of two: the bucket's upper
                                         bound, capped at lag_max_ns */
    /* The I/O engine (docs/api.md, "I/O engines"; the thread engine counts its
     * swap threads' and loaders' requests too, one per call, and none in
     * flight): */
    uint64_t io_requests;        /* reads and writes handed to the device
                                    (a short count carried on: one more) */
    uint64_t io_submits;         /* calls that handed them over (io_uring:
                                    fewer than io_requests when batched) */
    uint64_t io_inflight;        /* requests queued or in flight now */
    uint64_t io_inflight_peak;   /* the most at once so far */
    uint64_t io_load_bytes;      /* bytes of queued loads (prefetch,
                                    WILLNEED, NOWAIT) in flight now */
    uint64_t io_load_bytes_peak; /* the most at once so far */
    uint64_t io_load_recycled;   /* queued loads read into the memory of an
                                    evicted entry (no page faults) */
    int reclaimer_tid;           /* OS thread id of the node's reclaimer */
    int cpu_bound;               /* reclaimer bound to one CPU of the node */
    int mem_bound;               /* table memory bound to the node */
    /* Version 2.  The device's busy time: how long at least one write
     * (read) of the node's swap copies was with it, from the request's
     * start (the thread engine) or its queueing on the ring (io_uring) to
     * its result, a request there now included.  So the device's write
     * bandwidth while it wrote is swap_bytes_written / swap_write_ns
     * bytes per ns (x 1000: MB/s), and the same for reads.  In total:
     * the nodes' sum (their streams are separate files). */
    uint64_t swap_write_ns;
    uint64_t swap_read_ns;
} pp_node_stats_t;

typedef struct pp_stats {
    size_t size;                 /* sizeof(pp_stats_t): set by the caller */
    unsigned version;            /* PP_STATS_VERSION: set by the caller */
    unsigned nodes;              /* number of node domains */
    unsigned threads;            /* threads registered now */
    int topology_is_this_system; /* 0 for synthetic or XML topologies */
    size_t mem_limit;
    uint64_t swap_limit;
    uint64_t resident_reserved;  /* resident bytes counted against mem_limit,
                                    loads in progress included (0 without a
                                    limit) */
    uint64_t resident_peak;      /* the highest resident_reserved so far */
    uint64_t room_waits;         /* puts and loads that waited for the swap
                                    threads to make room (without swap:
                                    puts that dropped DISCARD entries) */
    uint64_t room_enomem;        /* of those, the ones that got PP_ENOMEM */
    uint64_t reclaim_backlog;    /* the backlog bound per node (UINT64_MAX:
                                    none) */
    uint64_t backlog_mark;       /* where puts start to wait: a quarter of it,
                                    rounded up */
    int swap;                    /* swap enabled */
    /* The I/O engine that runs (PP_IO_ENGINE_URING or _THREADS; 0 without
     * swap), its depth, and why it was chosen ("io_uring", "asked for",
     * or why io_uring could not be used). */
    unsigned io_engine;
    unsigned io_depth;
    char io_engine_why[96];
    pp_node_stats_t total;       /* sums (tid/bound fields: 0; peaks and
                                    maxima: the largest node's); its size
                                    and version are set by the library to
                                    the caller's version's */
} pp_stats_t;

/* Initializers that set size and version: pp_stats_t s = PP_STATS_INIT;
 * every other field starts at 0.  In C++ they call an inline function (an
 * aggregate that names two fields of many is warned about there). */
#ifdef __cplusplus
static inline pp_stats_t pp__stats_init(void)
{
    pp_stats_t s = pp_stats_t();
    s.size = sizeof s;
    s.version = PP_STATS_VERSION;
    return s;
}
static inline pp_node_stats_t pp__node_stats_init(void)
{
    pp_node_stats_t s = pp_node_stats_t();
    s.size = sizeof s;
    s.version = PP_STATS_VERSION;
    return s;
}
#define PP_STATS_INIT (pp__stats_init())
#define PP_NODE_STATS_INIT (pp__node_stats_init())
#else
#define PP_STATS_INIT { .size = sizeof(pp_stats_t), .version = PP_STATS_VERSION }
#define PP_NODE_STATS_INIT \
    { .size = sizeof(pp_node_stats_t), .version = PP_STATS_VERSION }
#endif

/* Totals and pool-wide figures (per node: pp_node_stats).  Counters are
 * exact once every thread has returned from its calls (and, for frees,
 * once the reclaimers are idle); while calls run they are a
 * consistent-enough snapshot.  Takes the pool's registry lock briefly.
 * Errors: PP_EINVAL (pool or out NULL; out->size and out->version not a
 * pair this library knows: reported, out not written). */
PP_API int pp_pool_stats(pp_pool_t *pool, pp_stats_t *out);

/* The figures of node domain node (0 to pp_stats_t.nodes - 1), the same
 * as pp_pool_stats adds up into total.  Reads that node's counters only,
 * under the registry lock, briefly.  Errors: PP_EINVAL (pool or out NULL;
 * node >= nodes; out->size and out->version not a pair this library
 * knows: reported, out not written). */
PP_API int pp_node_stats(pp_pool_t *pool, unsigned node, pp_node_stats_t *out);

#ifdef __cplusplus
}
#endif

#endif /* PINPOOL_STATS_H */
