/*
 * internal.h -- pinpool's internal structures and the small API between its
 * parts.  One part per source file:
 *
 *   alloc.c     pinpool's own allocations, counted (hook for fault injection)
 *   error.c     error names and messages, internal aborts (pp__die)
 *   topology.c  hwloc: node domains, CPU->node map, binding, node memory
 *   table.c     segmented slot tables, refs, lookup, slot allocation
 *   owner.c     put, retain, release
 *   pin.c       every pin path, unpin, pin_many, unpin_many, get, prefetch
 *   hot.c       sharded pin counts for contended entries (HOT)
 *   thread.c    thread records, their thread-local cache, the pool registry
 *   epoch.c     ck_epoch sections and QSBR
 *   wait.c      how threads sleep and wake (ck_ec on futexes), the clock
 *   reclaim.c   reclaim queues, reclaimer threads, grace periods, free
 *   mem.c       memory reservations against mem_limit, room for puts, loads
 *   load.c      loads from swap, committed with a pin or without
 *   evict.c     swap threads: CLOCK eviction, queued loads
 *   ioend.c     the end of an entry's I/O, and the wait for it
 *   swap.c      swap store: records, space, checksums, compression, streams
 *   swapdev.c   the default swap device (files in a private directory)
 *   stats.c     pp_stat, pp_pool_stats, lag histograms
 *   track.c     pin-leak tracking and reports
 *   scope.c     scopes: the ledger of a task's pins
 *   pool.c      create, destroy, drain, validation
 *   yield.c     random yields in debug builds (PP__YIELD); testing only
 *   testhooks.c hooks for the tests (testhooks.h), test points; testing only
 *
 * The headers: atomics.h (every shared word's access, with its order in
 * the name), checks.h (assertions, hints, yields, test points), entry.h
 * (an entry, its state words and their transitions), types.h (every other
 * structure), swapdev.h (the swap device), and testhooks.h, which only the
 * tests and the files that define a hook include.
 *
 * The sources are compiled twice (checks.h): the product, without test
 * points, yields or allocation hooks, and the testing variant
 * pinpool_testing (PP__TESTING=1), with them and with yield.c and
 * testhooks.c.  Nothing here is exported (hidden visibility); the tests
 * link pinpool_testing, a static library, and may call pp__* functions.
 */
#ifndef PP_INTERNAL_H
#define PP_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "atomics.h"
#include "checks.h"
#include "entry.h"
#include "pinpool.h"
#include "types.h"

/* ------------------------------------------------------------------------ */
/* Part APIs                                                                 */
/* ------------------------------------------------------------------------ */

/* alloc.c -- pinpool's own allocations, counted (never the entries' data). */
void *pp__malloc(size_t size);
void *pp__calloc(size_t n, size_t size);
void *pp__realloc(void *p, size_t size);
void *pp__aligned_alloc(size_t align, size_t size);   /* zeroed */
void pp__free(void *p);
bool pp__alloc_note(void);        /* counts one made elsewhere; false: fail it */
/* Memory the swap store reads into or writes from, freed with free():
 * page-aligned and padded to pages if direct; from 2 MiB up aligned to
 * 2 MiB and advised MADV_HUGEPAGE. */
void *pp__io_alloc(size_t n, bool direct);

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
/* A table segment of node n: PP__SEG_BYTES, zero, aligned to its size,
 * huge pages advised if huge (entry.h, table.c); pp__node_free_seg unmaps
 * it. */
void *pp__node_alloc_seg(pp_pool_t *pool, unsigned n, bool huge, bool *bound);
void pp__node_free_seg(void *p);
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
/* The type callbacks (free, save, load) running on the calling thread, of
 * any pool.  Inside one, no pool call waits (docs/api.md, "Callbacks"): a
 * put never waits for the backlog and fails with PP_EAGAIN where it would
 * wait for room, a pin is PP_PIN_NOWAIT.  The callback may run on a pool
 * thread that the wait would be for. */
extern __thread unsigned pp__cb_depth __attribute__((tls_model("initial-exec")));
static inline bool pp__in_callback(void) { return PP__UNLIKELY(pp__cb_depth != 0); }
static inline void pp__callback_enter(void) { pp__cb_depth++; }
static inline void pp__callback_leave(void) { pp__cb_depth--; }
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

/* wait.c */
extern const struct ck_ec_mode pp__ec_mode;   /* futex ops, many producers */
uint64_t pp__now_ns(void);                    /* CLOCK_MONOTONIC, in ns */

/* reclaim.c */
int pp__reclaim_start(pp_pool_t *pool);
void pp__reclaim_stop(pp_pool_t *pool);
/* Queues a dead, unpinned entry (the caller made it QUEUED) and returns at
 * once.  Never blocks; wakes the reclaimer only if it sleeps. */
void pp__reclaim_push(pp_pool_t *pool, unsigned n, pp__entry_t *e, pp__thread_t *t);

/* backlog.c -- the bound on the reclaim backlog (docs/api.md, "Overload").
 * What one dead entry counts: its bytes in memory plus its slot.  pw is
 * its word once QUEUED (RESIDENT no longer changes). */
#define PP__BACKLOG_SLOT_BYTES 64u
/* An entry counts at most 2^36 bytes (64 GiB): 2^26 slots per node of that
 * cannot overflow the node's 64-bit count, whatever sizes callers claim
 * (up to PTRDIFF_MAX); so large an entry is far over any bound anyway. */
#define PP__BACKLOG_MAX_CHARGE ((uint64_t)1 << 36)
static inline uint64_t pp__backlog_charge(const pp__entry_t *e, uint64_t pw)
{
    uint64_t size = (pw & PP__F_RESIDENT) ? (uint64_t)pp__cold(e)->size : 0;
    return (size < PP__BACKLOG_MAX_CHARGE ? size : PP__BACKLOG_MAX_CHARGE) + PP__BACKLOG_SLOT_BYTES;
}
void pp__backlog_init(pp_pool_t *pool, size_t bound);
/* A push adds the entry's charge (before the push: the reclaimer's
 * subtraction comes after it); the reclaimer subtracts it once the entry
 * is freed, and wakes waiting puts when the backlog falls below the mark. */
void pp__backlog_add(pp__node_t *node, uint64_t charge);
void pp__backlog_sub(pp_pool_t *pool, pp__node_t *node, uint64_t charge);
/* A put's wait for node n's backlog to fall below the mark (the caller saw
 * it at or above): 0, PP_EAGAIN (PP_PUT_NOWAIT) or PP_EDEADLK (t is a QSBR
 * thread inside its section). */
int pp__backlog_wait(pp_pool_t *pool, unsigned n, pp__thread_t *t, unsigned flags);

/* track.c */
int pp__track_pin(pp_pool_t *pool, pp__thread_t *t, pp_ref_t ref,
                  const char *file, int line);
void pp__track_unpin(pp_pool_t *pool, pp__thread_t *t, pp_ref_t ref);
size_t pp__track_report_thread(pp_pool_t *pool, pp__thread_t *t);
size_t pp__track_report_ref(pp_pool_t *pool, pp_ref_t ref);
void pp__track_free(pp_pool_t *pool);

/* owner.c -- put, retain, release.  The transition to DEAD after the last
 * release (pushes the entry if it holds no pins); pin.c's unpin of a dead
 * entry is its other half. */
void pp__entry_kill(pp_pool_t *pool, unsigned n, pp__entry_t *e, uint32_t gen,
                    pp__thread_t *t);

/* pin.c -- every pin path (fast, full, slow, after a load), unpin, their
 * batched forms, escaped access, prefetch. */
/* An unpin by thread t, tracked if the pool tracks pins. */
int pp__unpin(pp_pool_t *pool, pp_ref_t ref, pp__thread_t *t);
/* The slow path of a pin, get or pin_many: the entry is not resident, or a
 * write pin met an eviction in progress.  Pins (pin true) or makes
 * resident (pin false), loading it if needed (load.c).  0 or an error, as
 * pp_pin documents. */
int pp__pin_slow(pp_pool_t *pool, pp__entry_t *e, pp_ref_t ref, unsigned flags,
                 bool pin, void **data);

/* mem.c -- memory reservations.  Reserves size bytes against mem_limit.
 * With wait false a hard cap: PP_ENOMEM if it does not fit.  With swap
 * and wait, has the swap threads evict and waits for room; without swap,
 * drops PP_TYPE_DISCARD entries on the calling thread (the nodes' hands,
 * one putter at a time) and waits for their reclaimer to free them; either
 * way PP_ENOMEM once nothing evictable is left.  0 on success (always
 * without a limit). */
int pp__mem_reserve(pp_pool_t *pool, size_t size, bool wait);
/* The same for PP_PUT_NOWAIT: where it would wait, PP_EAGAIN at once (the
 * swap threads are asked for a pass; without swap, the calling thread
 * drops DISCARD entries first, unless another putter is at it). */
int pp__mem_reserve_nowait(pp_pool_t *pool, size_t size);
void pp__mem_unreserve(pp_pool_t *pool, size_t size);
/* After the reclaimer freed a DISCARD entry (unreserved, then no longer
 * counted dying): wakes the swap threads if the pool is past its high
 * watermark still. */
void pp__mem_discard_freed(pp_pool_t *pool);

/* load.c -- loads from swap.  Pre for both: the caller claimed LOADING on
 * e (n is its home node).  pp__load_pin loads and commits with a pin (and
 * DIRTY with PP_PIN_WRITE, WPIN with PP__PIN_WPIN) in one CAS: 0 and *data,
 * PP_ESTALE if the entry died meanwhile (no pin), or the load's error.
 * pp__load_only loads and commits it resident; evictor is the node whose
 * swap thread runs the load (it may evict for room, never waits), or NULL
 * on a pinning thread.  Both end the I/O (pp__io_end). */
int pp__load_pin(pp_pool_t *pool, unsigned n, pp__entry_t *e, unsigned flags, pp__thread_t *t,
                 void **data);
int pp__load_only(pp_pool_t *pool, unsigned n, pp__entry_t *e, pp__node_t *evictor,
                  pp__thread_t *t);
/* Starts a load on the swap thread if the entry is swapped and no load
 * runs.  Never blocks.  0, PP_ESTALE, or PP_EAGAIN once destroy has
 * stopped the swap threads (a callback of its sweep). */
int pp__load_start(pp_pool_t *pool, pp__entry_t *e, pp_ref_t ref);
/* Ends a load made elsewhere (the io_uring engine, xfer.c) that got rc: 0
 * and mem, the entry's new data (its bytes reserved), commits it resident;
 * else (the caller gave the reservation back) it stays swapped.  Then ends
 * the I/O as pp__load_only does, and returns rc, or PP_ESTALE. */
int pp__load_end(pp_pool_t *pool, unsigned n, pp__entry_t *e, int rc, void *mem,
                 pp__thread_t *t);

/* advise.c -- eviction advice beside the table (swap pools). */
/* The advice of the entry in slot whose word is pw (PP_ADVISE_NORMAL if
 * none or stale).  slot is the caller's (the hand's, the ref's): the
 * entry's own field is read only under the orderings entry.h lists. */
unsigned pp__advice_of(const pp__node_t *node, uint32_t slot, uint64_t pw);
/* Drops the advice of the entry in slot (generation of pw) if it still is
 * that advice. */
void pp__advice_consume(pp__node_t *node, uint32_t slot, uint64_t pw, unsigned advice);
/* Clears slot's wontneed bit (the entry has nothing to evict). */
void pp__advice_forget(pp__node_t *node, uint32_t slot);
/* The next slot below *slot (UINT32_MAX: the top) whose wontneed bit is
 * set, into *slot; false when there is none. */
bool pp__advised_next(pp__node_t *node, uint32_t *slot);

/* evict.c -- each node's swap thread: CLOCK eviction, drops of
 * PP_TYPE_DISCARD entries, queued loads. */
int pp__evict_start(pp_pool_t *pool);
void pp__evict_stop(pp_pool_t *pool);
/* One pass of node's hand; returns the bytes freed, or dropped (on their
 * way out, see evict.c).  t is the record whose reclaim queues get the
 * entries the pass kills or ends the I/O of: the node's swap thread's, or
 * without swap the putter's that runs the hand (mem.c). */
uint64_t pp__evict_pass(pp_pool_t *pool, pp__node_t *node, bool force, bool *stuck,
                        pp__thread_t *t);
/* The end of an eviction whose copy is written (rc 0), needs none (write
 * false) or failed (rc): commits e swapped and frees its memory, or gives
 * the claim up.  Returns the bytes freed. */
uint64_t pp__evict_end(pp_pool_t *pool, pp__node_t *node, pp__entry_t *e, uint32_t slot,
                       uint64_t claimed, bool write, int rc, pp__thread_t *t);
/* Ends a queued load that never started (its entry died, or the pool
 * stops): clears LOADING, the entry left swapped. */
void pp__io_clear_loading(pp_pool_t *pool, pp__node_t *node, pp__entry_t *e);
/* Whether the pool drops entries of this type and size when it needs room
 * (pinpool.h, PP_TYPE_DISCARD): a DISCARD type without PP_TYPE_NOSWAP, in a
 * pool with a limit, and bytes to free.  The same for an entry's whole
 * life (size and type do not change): put, push and reclaimer agree. */
static inline bool pp__droppable(const pp_pool_t *pool, const pp_type_t *type, size_t size)
{
    return pool->mem_limit != 0 && size != 0 && type != NULL &&
           (type->flags & (PP_TYPE_DISCARD | PP_TYPE_NOSWAP)) == PP_TYPE_DISCARD;
}
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
        pp__atomic_add_relaxed(&pool->nodes[n]->prod.dead_in_io, defer ? 1 : -1);
        *held = defer;
    }
}

/* ioend.c */
/* After an I/O's CAS cleared BUSY (next is the word it installed): queues
 * a dead, unpinned entry (next has QUEUED set; its death, or its drop,
 * counted it in dead_in_io) and wakes whoever waits for the node's I/O. */
void pp__io_end(pp_pool_t *pool, unsigned n, pp__entry_t *e, uint64_t next,
                pp__thread_t *t);
/* Waits until no eviction holds e (a write pin's data must not be read by
 * the swap thread while the caller writes).  Pre: the caller holds a pin,
 * or escaped the entry (pp_get). */
void pp__evict_wait(pp_pool_t *pool, unsigned n, pp__entry_t *e);

/* xfer.c -- the io_uring engine (one per node, run by its swap thread
 * only; see xfer.c).  open picks the engine (opt->io_engine, and whether
 * io_uring works here) and makes each node's ring: 0, PP_ENOMEM, or
 * PP_ENOTSUP when PP_IO_ENGINE_URING was asked for and cannot be had.
 * close frees what open made (the swap threads drained it). */
typedef struct pp__xfer pp__xfer_t;
int pp__xfer_open(pp_pool_t *pool, const pp_options_t *opt);
void pp__xfer_close(pp_pool_t *pool);
/* The engine t may use on node: the node's, if t is its swap thread. */
static inline pp__xfer_t *pp__xfer_of(const pp__node_t *node, const pp__thread_t *t)
{
    return t == node->sw.st ? node->sw.xf : NULL;
}
/* Hands what is queued to the kernel and takes the requests that ended
 * (with wait, at least one if any is in flight), carrying their jobs on. */
void pp__xfer_reap(pp_pool_t *pool, pp__node_t *node, bool wait);
/* The bytes write-outs freed since the last call. */
uint64_t pp__xfer_freed(pp__node_t *node);
/* Write-outs in flight; whether another may start (full: it may not). */
unsigned pp__xfer_writes(const pp__node_t *node);
bool pp__xfer_writes_full(const pp__node_t *node);
/* Starts writing out e (claimed: the word the hand's claim set, on slot;
 * pre: not full).  0: in flight, it ends in pp__evict_end; else an error
 * with nothing started (the caller ends the eviction with it). */
int pp__xfer_write(pp_pool_t *pool, pp__node_t *node, pp__entry_t *e, uint32_t slot,
                   uint64_t claimed);
/* Takes the node's queued loads and starts those the budget allows (with
 * stop, cancels all not started); whether any were queued. */
bool pp__xfer_loads(pp_pool_t *pool, pp__node_t *node, bool stop);
/* Whether requests are in flight, or queued loads wait for their turn. */
bool pp__xfer_busy(const pp__node_t *node);
/* The memory of a flat entry that t's eviction just freed: kept for the
 * node's next queued load of that size when t is the node's swap thread
 * on the io_uring engine and there is room (true), else not taken
 * (false).
 * What no load takes stays kept while the swap thread idles, and
 * pp__xfer_spares_free frees it once the thread has idled a second
 * (PP__SYNC_IDLE_NS, evict.c), pp__xfer_spares_trim as soon as the resident
 * bytes and the kept ones together pass the limit. */
bool pp__xfer_keep(pp_pool_t *pool, pp__node_t *node, const pp__thread_t *t, void *data,
                   size_t size);
void pp__xfer_spares_free(pp__node_t *node);
void pp__xfer_spares_trim(pp_pool_t *pool, pp__node_t *node);
/* Bytes kept for loads (0 on the thread engine).  The swap thread's own,
 * and tests' at its idle test point. */
uint64_t pp__xfer_spare_bytes(const pp__node_t *node);
/* Cancels the loads not started and waits for every request in flight. */
void pp__xfer_stop(pp_pool_t *pool, pp__node_t *node);

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
/* A write-out in parts (the io_uring engine, xfer.c; pp__swap_save does
 * the same in one call): begin prepares the copy (a type's save, LZ4),
 * hands out its space and starts its hash; next gives each request in
 * turn (hashing its bytes; through bounce, PP__SWAP_CHUNK bytes, where
 * direct I/O needs a copy), and end records the copy (rc 0) or gives its
 * space back.  begin: 0, or an error with nothing held. */
#define PP__SWAP_CHUNK ((size_t)1 << 20)
typedef struct pp__wout {
    pp__swaprec_t *rec;
    const char *out;                     /* the bytes to store */
    size_t outlen, raw;                  /* their length, before compression */
    size_t done;                         /* of them, written (the caller's) */
    uint64_t off, cap;                   /* their extent */
    bool padded;                         /* out is the pool's, zeroed to cap */
    char *cbuf;                          /* the compressed copy, owned */
    void *wbuf;                          /* a type's saved stream, owned */
    struct XXH3_state_s *xs;
} pp__wout_t;
int pp__swap_save_begin(pp_pool_t *pool, pp__node_t *node, pp__entry_t *e, uint64_t claimed,
                        pp__wout_t *w);
/* The next request of w from w->done: its buffer and the length to ask
 * (*buf, *iolen); returns the copy's bytes it covers, 0 once all are
 * written, PP_ENOMEM if it needs bounce and there is none. */
ssize_t pp__swap_save_next(pp_pool_t *pool, pp__wout_t *w, char *bounce, const char **buf,
                           size_t *iolen);
void pp__swap_save_end(pp_pool_t *pool, pp__node_t *node, pp__wout_t *w, int rc);
/* A load in parts: begin makes the memory the copy is read into (l->dst,
 * the entry's memory being spare if not NULL: flat data only, malloc'd,
 * of the entry's size and, in direct mode, whole pages; begin owns it),
 * l->iolen bytes to ask for l->len of copy, at l->off), end checks the
 * checksum (sum: the caller's hash of dst, or NULL to hash it now) and
 * makes the entry's data (*data) from it, or frees what begin made.  The
 * caller holds LOADING.  0, PP_EIO, PP_ECORRUPT, PP_ENOMEM. */
typedef struct pp__lin {
    const pp__swaprec_t *rec;
    bool custom;                         /* a type's load makes the data */
    void *mem;                           /* flat: the entry's new memory */
    char *stored, *dst;                  /* a copy read whole; where it is read */
    size_t len, iolen;
    uint64_t off;
} pp__lin_t;
int pp__swap_load_begin(pp_pool_t *pool, pp__node_t *node, pp__entry_t *e, pp__lin_t *l,
                        void *spare);
int pp__swap_load_end(pp_pool_t *pool, pp__node_t *node, pp__entry_t *e, pp__lin_t *l, int rc,
                      const uint64_t *sum, void **data);
/* A request of iolen bytes of which need must come (a read: the copy's
 * bytes; a write: all) made progress k and then got result r: the new
 * progress (iolen: done; k: none, a failure), in direct mode from the
 * block a short count stopped in. */
size_t pp__swap_progress(const pp_pool_t *pool, size_t iolen, size_t need, size_t k, ssize_t r);
/* Counts and reports (rate-limited) a failed request of n bytes at off. */
void pp__swap_io_failed(pp_pool_t *pool, pp__node_t *node, bool write, size_t n, uint64_t off,
                        ssize_t r);
/* A blocking request was made (the thread engine's count of requests). */
static inline void pp__io_count_sync(pp__node_t *node)
{
    pp__atomic_add_relaxed(&node->sw.io_requests, 1);
    pp__atomic_add_relaxed(&node->sw.io_submits, 1);
}
/* The record of slot's swap copy, or NULL if none was ever made. */
const pp__swaprec_t *pp__swap_rec_find(pp__node_t *node, uint32_t slot);
/* Frees e's extent (its record must hold one). */
void pp__swap_drop(pp_pool_t *pool, pp__node_t *node, pp__entry_t *e);
/* Whether entries of this type can be evicted. */
bool pp__type_swappable(const pp_type_t *type);

/* hot.c -- see there.  Internal results besides 0 and PP_E*: */
#define PP__SLOW  1   /* pin: not resident, or a write pin meets an eviction */
#define PP__HOT   2   /* pin/unpin: the entry is HOT: pp__hot_pin/unpin */
#define PP__RETRY 3   /* hot pin/unpin: no longer HOT, do it on the word */
static inline unsigned pp__hot_index(uint64_t pw) { return (unsigned)(pw & PP__PINS_MASK); }
/* The fast path of a hot pin (inc 1) or unpin (inc -1): one CAS on the
 * caller's shard, if e's word is still the one the thread last saw (so the
 * cached line and tag are that promotion's: a later promotion has a larger
 * tag, and the CAS checks it).  false: nothing done, take pp__hot_pin or
 * pp__hot_unpin. */
static inline bool pp__hot_cached(pp__thread_t *t, pp__entry_t *e, uint64_t pw, int inc,
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
/* pp_pool_create with the given swap device instead of the file device
 * (NULL: the file device); it takes dev over, closing it on failure.  The
 * tests give devices that fail or stop on purpose. */
int pp__pool_create_dev(const pp_options_t *opt, struct pp__swapdev *dev, pp_pool_t **out);
/* Every entry and every node's hot slots obey the invariants drawn in
 * entry.h and hot.c.  Only while no call runs (tests, destroy). */
bool pp__pool_is_valid(pp_pool_t *pool);
/* Every entry's state word obeys the invariants that hold at every instant
 * (each transition is one CAS): safe while other calls run (drain). */
bool pp__pool_words_valid(pp_pool_t *pool);

#endif /* PP_INTERNAL_H */
