/*
 * swap.h -- the swap layer, from the bottom up: the store (swap.c), the
 * count of reserved memory (mem.c), advice (advise.c), the ends of I/O
 * (ioend.c), the io_uring engine (xfer.c), the hand (evict.c), waiting
 * for room (room.c), loads (load.c) and the swap threads (swapper.c).
 * It calls core/ and os/, and within it each file calls only those listed
 * before it.
 */
#ifndef PP_SWAP_H
#define PP_SWAP_H

#include "core/core.h"

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
/* busy.c: the device's busy time (pp_node_stats_t.swap_write_ns,
 * swap_read_ns), the time with at least one request of a direction there.
 * init: 0 or PP_ENOMEM.  mark: a request went to the device (start) or
 * came back; takes the node's busy lock, on the I/O path only.  ns: that
 * time so far, a request there now included (pools with swap only). */
int pp__busy_init(pp__node_t *node);
void pp__busy_destroy(pp__node_t *node);
void pp__busy_mark(pp__node_t *node, bool write, bool start);
uint64_t pp__busy_ns(pp__node_t *node, bool write);
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
bool pp__swap_type_ok(const pp_type_t *type);

/* mem.c -- the count of reserved memory.  pp__mem_try reserves size bytes
 * if they fit under mem_limit (true), never waiting; pp__mem_take is the
 * same as an error code, 0 or PP_ENOMEM, and 0 always without a limit. */
bool pp__mem_try(pp_pool_t *pool, size_t size);
int pp__mem_take(pp_pool_t *pool, size_t size);
void pp__mem_unreserve(pp_pool_t *pool, size_t size);
/* Wakes every node's swap thread. */
void pp__mem_kick_all(pp_pool_t *pool);
/* After the reclaimer freed a DISCARD entry (unreserved, then no longer
 * counted dying): wakes the swap threads if the pool is past its high
 * watermark still. */
void pp__mem_discard_freed(pp_pool_t *pool);

/* advise.c -- eviction advice beside the table (swap pools). */
/* The advice of the entry in slot whose word is pw (PP_ADVISE_NORMAL if
 * none or stale).  slot is the caller's (the hand's, the ref's): the
 * entry's own field is read only under the orderings entry.h lists. */
unsigned pp__advise_of(const pp__node_t *node, uint32_t slot, uint64_t pw);
/* Drops the advice of the entry in slot (generation of pw) if it still is
 * that advice. */
void pp__advise_consume(pp__node_t *node, uint32_t slot, uint64_t pw, unsigned advice);
/* Clears slot's wontneed bit (the entry has nothing to evict). */
void pp__advise_forget(pp__node_t *node, uint32_t slot);
/* The next slot below *slot (UINT32_MAX: the top) whose wontneed bit is
 * set, into *slot; false when there is none. */
bool pp__advise_next_wontneed(pp__node_t *node, uint32_t *slot);
/* Sets the advice of the entry in slot, of generation gen (pp_advise). */
void pp__advise_set(pp__node_t *node, uint32_t slot, uint32_t gen, unsigned advice);

/* ioend.c */
/* After an I/O's CAS cleared BUSY (next is the word it installed): queues
 * a dead, unpinned entry (next has QUEUED set; its death, or its drop,
 * counted it in dead_in_io) and wakes whoever waits for the node's I/O. */
void pp__ioend_finish(pp_pool_t *pool, unsigned n, pp__entry_t *e, uint64_t next,
                      pp__thread_t *t);
/* Waits until no eviction holds e (a write pin's data must not be read by
 * the swap thread while the caller writes).  Pre: the caller holds a pin,
 * or escaped the entry (pp_get). */
void pp__ioend_wait_evict(pp_pool_t *pool, unsigned n, pp__entry_t *e);
enum pp__load_mode { PP__LOAD_PIN, PP__LOAD_ONLY };
/* Ends a load of e that got rc (0: mem holds its data, its bytes
 * reserved): makes the entry resident, pinned in the same CAS for
 * PP__LOAD_PIN (and DIRTY, WPIN as flags say), or leaves it swapped on
 * failure; then ends the I/O.  Returns rc, or PP_ESTALE if the entry died
 * while loading (no pin); *data gets mem for a pin. */
int pp__ioend_load(pp_pool_t *pool, unsigned n, pp__entry_t *e, enum pp__load_mode mode,
                   unsigned flags, int rc, void *mem, pp__thread_t *t, void **data);
/* Ends a load made elsewhere (the io_uring engine, xfer.c) that got rc: 0
 * and mem, the entry's new data (its bytes reserved), commits it resident;
 * else (the caller gave the reservation back) it stays swapped.  Then ends
 * the I/O as pp__load_only does, and returns rc, or PP_ESTALE. */
int pp__ioend_load_only(pp_pool_t *pool, unsigned n, pp__entry_t *e, int rc, void *mem,
                        pp__thread_t *t);
/* What takes the memory a flat entry's eviction freed, instead of free():
 * true if it kept it. */
typedef bool (*pp__keep_fn)(pp_pool_t *pool, pp__node_t *node, const pp__thread_t *t,
                            void *data, size_t size);
/* The end of an eviction whose copy is written (rc 0), needs none (write
 * false) or failed (rc): commits e swapped and frees its memory, or gives
 * the claim up.  Returns the bytes freed.  keep, if not NULL, may
 * take the freed memory of a flat entry instead (pp__xfer_keep). */
uint64_t pp__ioend_evict(pp_pool_t *pool, pp__node_t *node, pp__entry_t *e, uint32_t slot,
                         uint64_t claimed, bool write, int rc, pp__thread_t *t, pp__keep_fn keep);
/* Gives up the claim of an eviction; kept: the record now holds a written
 * copy; lost: a pin, get or release won the race.  Ends the I/O. */
void pp__ioend_abandon(pp_pool_t *pool, pp__node_t *node, pp__entry_t *e, bool kept,
                       bool lost, pp__thread_t *t);
/* Ends a queued load that never started (its entry died, or the pool
 * stops): clears LOADING, the entry left swapped. */
void pp__ioend_cancel_load(pp_pool_t *pool, pp__node_t *node, pp__entry_t *e);

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
 * pre: not full).  0: in flight, it ends in pp__ioend_evict; else an error
 * with nothing started (the caller ends the eviction with it). */
int pp__xfer_write(pp_pool_t *pool, pp__node_t *node, pp__entry_t *e, uint32_t slot,
                   uint64_t claimed);
/* What makes room for a queued load of size bytes on node: 0, or an error
 * that ends the load (pp__evict_room). */
typedef int (*pp__room_fn)(pp_pool_t *pool, pp__node_t *node, size_t size);
/* Takes the node's queued loads and starts those the budget allows (with
 * stop, cancels all not started); whether any were queued. */
bool pp__xfer_loads(pp_pool_t *pool, pp__node_t *node, bool stop, pp__room_fn room);
/* Whether requests are in flight, or queued loads wait for their turn. */
bool pp__xfer_busy(const pp__node_t *node);
/* The memory of a flat entry that t's eviction just freed: kept for the
 * node's next queued load of that size when t is the node's swap thread
 * on the io_uring engine and there is room (true), else not taken
 * (false).
 * What no load takes stays kept while the swap thread idles, and
 * pp__xfer_spares_free frees it once the thread has idled a second
 * (PP__SYNC_IDLE_NS, swapper.c), pp__xfer_spares_trim as soon as the resident
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

/* evict.c -- the hand: CLOCK eviction, drops of PP_TYPE_DISCARD entries. */
/* Whether the pool is above its low watermark, counting the room waited
 * for and not the bytes already on their way out. */
bool pp__evict_needed(pp_pool_t *pool, pp__node_t *node);
/* Reserves room for a load of size bytes that node's swap thread runs: it
 * never waits, and if none is left the hand evicts for it first, then
 * tries once more.  0 or PP_ENOMEM. */
int pp__evict_room(pp_pool_t *pool, pp__node_t *node, size_t size);
/* One pass of node's hand; returns the bytes freed, or dropped (on their
 * way out, see evict.c).  t is the record whose reclaim queues get the
 * entries the pass kills or ends the I/O of: the node's swap thread's, or
 * without swap the putter's that runs the hand (room.c). */
uint64_t pp__evict_pass(pp_pool_t *pool, pp__node_t *node, bool force, bool *stuck,
                        pp__thread_t *t);

/* room.c -- reserving with a wait for room.  Reserves size bytes against
 * mem_limit.  With swap, has the swap threads evict and waits for room;
 * without swap, drops PP_TYPE_DISCARD entries on the calling thread (the
 * nodes' hands, one putter at a time) and waits for their reclaimer to
 * free them.  Either way PP_ENOMEM once nothing evictable is left.  0 on
 * success, always without a limit. */
int pp__room_reserve(pp_pool_t *pool, size_t size);
/* The same for PP_PUT_NOWAIT: where it would wait, PP_EAGAIN at once (the
 * swap threads are asked for a pass; without swap, the calling thread
 * drops DISCARD entries first, unless another putter is at it). */
int pp__room_reserve_nowait(pp_pool_t *pool, size_t size);

/* load.c -- loads from swap.  Pre for both: the caller claimed LOADING on
 * e (n is its home node).  pp__load_pin loads and commits with a pin (and
 * DIRTY with PP_PIN_WRITE, WPIN with PP__PIN_WPIN) in one CAS: 0 and *data,
 * PP_ESTALE if the entry died meanwhile (no pin), or the load's error.
 * pp__load_only loads and commits it resident; evictor is the node whose
 * swap thread runs the load (it may evict for room, never waits), or NULL
 * on a pinning thread.  Both end the I/O (pp__ioend_finish). */
int pp__load_pin(pp_pool_t *pool, unsigned n, pp__entry_t *e, unsigned flags, pp__thread_t *t,
                 void **data);
int pp__load_only(pp_pool_t *pool, unsigned n, pp__entry_t *e, pp__node_t *evictor,
                  pp__thread_t *t);
/* Starts a load on the swap thread if the entry is swapped and no load
 * runs.  Never blocks.  0, PP_ESTALE, or PP_EAGAIN once destroy has
 * stopped the swap threads (a callback of its sweep). */
int pp__load_start(pp_pool_t *pool, pp__entry_t *e, pp_ref_t ref);

/* swapper.c -- each node's swap thread. */
int pp__swapper_start(pp_pool_t *pool);
void pp__swapper_stop(pp_pool_t *pool);

#endif /* PP_SWAP_H */
