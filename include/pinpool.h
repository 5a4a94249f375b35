#ifndef PINPOOL_H
#define PINPOOL_H

/*
 * pinpool.h -- the C API of pinpool, a lock-free, NUMA-aware pool of data
 * for multithreaded task schedulers.
 *
 * Lifecycle: pp_put() hands data to the pool and returns a 64-bit ref that
 * holds one owner.  A task pins its inputs with pp_pin() before it runs and
 * unpins them with pp_unpin() after.  pp_release() drops an owner.  Once the
 * last owner is gone and the last pin dropped, a reclaimer thread frees the
 * data after an epoch grace period.  With a memory limit and a swap
 * directory, unpinned data may go to disk, and the next pin loads it back.
 *
 * This header is the contract in short.  docs/api.md gives each call's full
 * contract, one section for each section below; docs/design.md says why.
 * pinpool_inline.h gives pp_pin and pp_unpin an inline fast path.
 */

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PINPOOL_VERSION_MAJOR 0
#define PINPOOL_VERSION_MINOR 1
#define PINPOOL_VERSION_PATCH 0

#if defined(_WIN32)
#define PP_API
#elif defined(__GNUC__)
#define PP_API __attribute__((visibility("default")))
#else
#define PP_API
#endif

/* ------------------------------------------------------------------------ */
/* Errors and basic types (docs/api.md, section "Errors and basic types")  */
/* ------------------------------------------------------------------------ */

/* Every int-returning call returns 0 or a negative PP_E* code.  A failed
 * call has no effect, unless its comment says otherwise.  Misuse of a ref
 * is an error code, never a crash.  Every call that takes a pool returns
 * PP_EINVAL for a NULL pool.  It returns PP_ENOMEM if it is the thread's
 * first call on the pool and the thread cannot register. */

/* X(name, value, message).  Values are stable. */
#define PP_ERRNO_MAP(X)                                                        \
    X(EINVAL,     -1, "invalid argument")                                      \
    X(ESTALE,     -2, "stale, dead or never valid ref")                        \
    X(ENOTPINNED, -3, "unpin of an entry that holds no pin")                   \
    X(EOVERFLOW,  -4, "pin or owner count would overflow")                     \
    X(ENOMEM,     -5, "out of memory, or memory limit reached")                \
    X(EAGAIN,     -6, "entry not resident (PP_PIN_NOWAIT); a load was started")\
    X(EIO,        -7, "swap I/O failed; nothing was lost")                     \
    X(ECORRUPT,   -8, "swap copy failed its checksum")                         \
    X(ENOTSUP,    -9, "not supported by this build or this pool")              \
    X(EBUSY,     -10, "entries are still pinned")                              \
    X(ETOPOLOGY, -11, "topology could not be loaded")                          \
    X(EDEADLK,   -12, "waiting would deadlock: the caller holds reclamation back")\
    X(EINUSE,    -13, "in use by another call at the same time")

enum {
#define PP__ERR_ENUM(name, value, msg) PP_##name = (value),
    PP_ERRNO_MAP(PP__ERR_ENUM)
#undef PP__ERR_ENUM
    PP_OK = 0
};

/* Message for an error code: "success" for 0, "unknown error" for other
 * values.  A static string, never NULL; safe on any thread. */
PP_API const char *pp_strerror(int err);
/* Name of an error code, e.g. "PP_ESTALE": "PP_OK" for 0, "PP_E?" for
 * unknown values.  A static string, never NULL; safe on any thread. */
PP_API const char *pp_err_name(int err);

/* Threads need no registration: a thread's first call on a pool registers
 * it, and its exit unregisters it.  Pins, unpins, retains and releases are
 * lock-free.  Calls that may wait say so.  No call may run concurrently
 * with pp_pool_destroy() of the same pool.  The table of every call's
 * progress is in docs/api.md, section "Errors and basic types". */

typedef struct pp_pool pp_pool_t;      /* opaque */
typedef uint64_t pp_ref_t;             /* 0 never names an entry */
#define PP_REF_NONE ((pp_ref_t)0)

typedef struct pp_writer pp_writer_t;  /* opaque, passed to a type's save */
typedef struct pp_reader pp_reader_t;  /* opaque, passed to a type's load */

/* ------------------------------------------------------------------------ */
/* Pool (docs/api.md, section "Pool")                                        */
/* ------------------------------------------------------------------------ */

/* Pool options.  Always start from PP_OPTIONS_INIT: fields may be added at
 * the end in later versions, and the macro gives them their defaults. */
typedef struct pp_options {
    /* Resident bytes the pool may hold; 0: no limit. */
    size_t mem_limit;
    /* Where the private swap directory is made; NULL: no swap. */
    const char *swap_dir;
    /* Bytes the swap copies may hold on disk; 0: no limit. */
    uint64_t swap_limit;
    /* NULL: this machine.  Else an hwloc synthetic string or XML file. */
    const char *topology;
    /* PP_TRACK_PINS, and the swap flags PP_SWAP_COMPRESS, PP_SWAP_DIRECT. */
    unsigned flags;
    /* Gets leak and misuse reports, one line a call; NULL: stderr. */
    void (*report)(const char *line, void *ctx);
    void *report_ctx;                  /* passed to report */
    /* Dead bytes per node before puts wait; 0: the default. */
    size_t reclaim_backlog;
    /* PP_IO_ENGINE_AUTO, _URING or _THREADS; ignored without swap_dir. */
    unsigned io_engine;
    /* I/O requests in flight per node; 0: PP_IO_DEPTH_DEFAULT. */
    unsigned io_depth;
} pp_options_t;

#define PP_OPTIONS_INIT { 0, NULL, 0, NULL, 0u, NULL, NULL, 0, 0u, 0u }

#define PP_RECLAIM_BACKLOG_DEFAULT ((size_t)16 << 20)  /* 16 MiB per node */
#define PP_RECLAIM_BACKLOG_NONE    SIZE_MAX            /* no bound */

/* Pool flags (pp_options_t.flags).  The swap flags are in section Swap. */
#define PP_TRACK_PINS 0x1u   /* remember thread and call site of each pin;
                                also enabled by env PINPOOL_TRACK_PINS=1 */

/* Who pins what, under PP_TRACK_PINS.  Writes to out a first line
 * "pinpool: N pins on M entries", then a line per pin, oldest first:
 *   pin ref 0x<16 hex> node N slot S gen G tid T age A ms at FILE:LINE
 * A pin taken by the function pp_pin() ends in "at (pp_pin without call
 * site)".  If M > 0, "longest held, oldest pin first:" follows, with the
 * 10 entries whose oldest pin is oldest: "held ref ... gen G pins P age A
 * ms".  Then "and K more entries" if M > 10.  A is in ms, three decimals.
 * Writes after copying the records, without their lock, then flushes.
 * Errors: PP_EINVAL (NULL argument), PP_ENOTSUP (tracking is off: nothing
 * written), PP_ENOMEM, PP_EIO (out's error flag is set after the writes).
 * Format and sample: docs/api.md, "pp_pins_dump". */
PP_API int pp_pins_dump(pp_pool_t *pool, FILE *out);

#define PP_MAX_NODES   64u          /* node domains per pool */

/* Creates a pool: one node domain per NUMA node, each with its tables and
 * reclaimer thread.  With swap_dir, also swap files and swap threads.  opt
 * may be NULL for the defaults.  Options left at their default are taken
 * from PINPOOL_MEMORY_LIMIT, PINPOOL_SWAP_DIR and PINPOOL_SWAP_DIRECT if
 * set (docs/api.md, "Environment").  Errors: PP_EINVAL (bad options or
 * environment), PP_ETOPOLOGY, PP_ENOTSUP (too many nodes; PP_SWAP_DIRECT
 * or PP_IO_ENGINE_URING impossible here), PP_EIO (swap files), PP_ENOMEM.
 * Blocking.  May run concurrently with anything on other pools. */
PP_API int pp_pool_create(const pp_options_t *opt, pp_pool_t **out);

/* Destroys a pool.  If an entry is still pinned, it reports it, returns
 * PP_EBUSY and leaves the pool usable.  Otherwise it frees every entry once,
 * reports owners still held as leaks, and removes the swap files.  No other
 * call on the pool may run meanwhile.  Pointers from pp_get() die here.
 * Errors: PP_EINVAL, PP_EBUSY, PP_EDEADLK (inside a type's callback).
 * Blocking: joins the pool's threads. */
PP_API int pp_pool_destroy(pp_pool_t *pool);

/* Reports one line through the pool's report hook, or to standard error.
 * For layers built on a pool, such as libpinpool_mpi.  pool may be NULL. */
PP_API void pp_pool_report(pp_pool_t *pool, const char *line);

/* ------------------------------------------------------------------------ */
/* Owners (docs/api.md, section "Owners")                                    */
/* ------------------------------------------------------------------------ */

/* How the pool handles one kind of data.  The pool keeps the pointer given
 * to pp_put(): the type must outlive its entries, or the pool.  What save,
 * load and free may do: docs/api.md, sections "Types" and "Callbacks". */
typedef struct pp_type {
    const char *name;                  /* for reports; may be NULL */
    /* Frees the data once per entry, on a pool thread.  NULL: free(). */
    void (*free)(void *data, size_t size, void *ctx);
    /* Writes the data with pp_write(); NULL, with load NULL: flat bytes. */
    int (*save)(const void *data, size_t size, pp_writer_t *w, void *ctx);
    /* Makes new data with pp_read(); set both save and load, or neither. */
    int (*load)(void **data, size_t size, pp_reader_t *r, void *ctx);
    void *ctx;                         /* passed to free, save and load */
    unsigned flags;                    /* PP_TYPE_*, in section Swap */
} pp_type_t;

/* pp_put flags: choose the home node (0 <= n < number of nodes). */
#define PP_ON_NODE(n) (0x100u | (((unsigned)(n) & 0xffu) << 16))
#define PP_PUT_NOWAIT 0x1u   /* PP_EAGAIN instead of waiting for the
                                reclaim backlog or for room (swap) */

/* Puts data in the pool and writes its ref to *out.  The entry has one
 * owner and no pins.  Its home is the caller's node, or PP_ON_NODE(n).
 * type NULL: a flat buffer, freed with free().  On success the pool owns
 * data; on failure nothing changed and the caller keeps it.  Errors:
 * PP_EINVAL, PP_ENOMEM (table full or memory limit), PP_EAGAIN, PP_EDEADLK.
 * Lock-free, unless the node's reclaim backlog is at its wait mark or the
 * memory limit is reached: then it waits, or fails with PP_PUT_NOWAIT.
 * Never waits inside a type's callback. */
PP_API int pp_put(pp_pool_t *pool, void *data, size_t size,
                  const pp_type_t *type, unsigned flags, pp_ref_t *out);

#define PP_MAX_OWNERS  0xFFFFFFFFu  /* owners of one entry */

/* Adds an owner.  Errors: PP_ESTALE (dead or invalid ref), PP_EOVERFLOW.
 * Lock-free, never blocks. */
PP_API int pp_retain(pp_pool_t *pool, pp_ref_t ref);

/* Drops an owner.  The last release makes the entry dead: pins, retains and
 * gets of it fail with PP_ESTALE.  A dead entry is queued for reclamation
 * once it holds no pin.  Errors: PP_ESTALE (dead or invalid ref).
 * Lock-free, never blocks, never calls the free function. */
PP_API int pp_release(pp_pool_t *pool, pp_ref_t ref);

/* ------------------------------------------------------------------------ */
/* Pins (docs/api.md, section "Pins")                                        */
/* ------------------------------------------------------------------------ */

/* pp_pin flags. */
#define PP_PIN_WRITE  0x1u   /* the task will write: marks the entry dirty */
#define PP_PIN_NOWAIT 0x2u   /* PP_EAGAIN instead of waiting for a load */

#define PP_MAX_PINS    0x7FFFFu     /* pins held at once on one entry */

/* Pins an entry and writes its data pointer to *data (data may be NULL; on
 * failure *data is untouched).  The pointer stays valid and unmoved until
 * the matching pp_unpin().  Pins nest, and another thread may drop them.
 * Acquire: sees every write made before the entry's last pp_unpin.  Write
 * to the data only under PP_PIN_WRITE.  A swapped entry is loaded first,
 * on this thread.  Errors: PP_ESTALE, PP_EOVERFLOW, PP_EINVAL, PP_EAGAIN
 * (PP_PIN_NOWAIT), PP_ENOMEM, PP_EIO, PP_ECORRUPT.  Resident entry:
 * lock-free, no system call, no allocation. */
PP_API int pp_pin(pp_pool_t *pool, pp_ref_t ref, unsigned flags, void **data);

/* Drops one pin.  Release: publishes the caller's writes to the data.  The
 * last unpin of a dead entry queues it for reclamation and returns at once.
 * Errors: PP_ENOTPINNED (a live entry with no pin), PP_ESTALE.  Lock-free,
 * no system call, no allocation. */
PP_API int pp_unpin(pp_pool_t *pool, pp_ref_t ref);

/* Pins n refs, all or none: on failure it drops the pins it took and
 * returns the first error.  data is NULL or an array of n pointers.  A ref
 * may appear more than once.  n == 0 succeeds.  The guarantees of pp_pin,
 * faster than n calls.  Loads of swapped entries all start before it waits. */
PP_API int pp_pin_many(pp_pool_t *pool, const pp_ref_t *refs, size_t n,
                       unsigned flags, void **data);

/* Unpins n refs, in order.  First it checks that each ref holds as many pins
 * as it appears.  If one does not, it returns that error and unpins nothing.
 * *done counts the leading refs it is through with; done may be NULL.  A pin
 * dropped by another thread after the check stops the call there, with that
 * ref's error.  Lock-free. */
PP_API int pp_unpin_many(pp_pool_t *pool, const pp_ref_t *refs, size_t n, size_t *done);

/* Starts loading a swapped entry on its node's swap thread and returns at
 * once: 0 for a live entry, PP_ESTALE otherwise.  A failed load is not seen
 * here: the next pin retries it and returns its error.  Never blocks, no
 * allocation. */
PP_API int pp_prefetch(pp_pool_t *pool, pp_ref_t ref);

/* Eviction advice (pp_advise). */
#define PP_ADVISE_NORMAL   0u  /* no advice: the CLOCK hand decides */
#define PP_ADVISE_WILLNEED 1u  /* needed soon: load it now, spare it longer */
#define PP_ADVISE_WONTNEED 2u  /* not needed soon: evict it before others */

/* Tells the pool how soon an entry will be pinned again, so that it evicts
 * what is needed last.  Advice only orders evictions: a pin always wins,
 * and never sees a difference.  Advice dies with its entry.  Without swap
 * the call only checks ref.  Errors: PP_EINVAL (unknown advice), PP_ESTALE.
 * Lock-free, never blocks, no allocation. */
PP_API int pp_advise(pp_pool_t *pool, pp_ref_t ref, unsigned advice);

/* Escaped access: writes the data pointer to *data without a pin, and marks
 * the entry escaped, never evicted from then on.  The pointer stays valid
 * while the caller holds an owner.  In QSBR mode it also stays valid until
 * the next pp_quiescent().  Loads a swapped entry as pp_pin does.  Errors:
 * PP_ESTALE, PP_EINVAL, and the load errors of pp_pin.  Lock-free for a
 * resident entry that is not being written out. */
PP_API int pp_get(pp_pool_t *pool, pp_ref_t ref, void **data);

/* Call-site variants: the same calls, recording file and line for the pin
 * leak report (PP_TRACK_PINS).  The macros below route pp_pin and
 * pp_pin_many through them; define PP_NO_CALLSITE before including this
 * header to call the plain functions. */
PP_API int pp_pin_loc(pp_pool_t *pool, pp_ref_t ref, unsigned flags,
                      void **data, const char *file, int line);
PP_API int pp_pin_many_loc(pp_pool_t *pool, const pp_ref_t *refs, size_t n,
                           unsigned flags, void **data,
                           const char *file, int line);
#ifndef PP_NO_CALLSITE
#define pp_pin(pool, ref, flags, data) \
    pp_pin_loc((pool), (ref), (flags), (data), __FILE__, __LINE__)
#define pp_pin_many(pool, refs, n, flags, data) \
    pp_pin_many_loc((pool), (refs), (n), (flags), (data), __FILE__, __LINE__)
#endif

/* ------------------------------------------------------------------------ */
/* Scopes (docs/api.md, section "Scopes")                                    */
/* ------------------------------------------------------------------------ */

/* A scope is a ledger of the pins a task takes through it: pp_scope_end()
 * drops those still held, so a task that fails halfway drops its own pins.
 * The caller owns its memory; a scope must not be copied.  One call at a
 * time: a concurrent call gets PP_EINUSE and does nothing.  Other misuse
 * gets PP_EINVAL or PP_ENOTPINNED and changes nothing. */
#define PP_SCOPE_INLINE 16u   /* pins a scope records without allocating */

typedef struct pp_scope {
    /* Private: use the functions below. */
    pp_pool_t *pool_;
    pp_ref_t *heap_;          /* the ledger once past PP_SCOPE_INLINE, or NULL */
    uint32_t n_;              /* pins held through the scope */
    uint32_t cap_;            /* room of heap_ */
    uint32_t state_;          /* open or ended (a magic number each) */
    uint32_t busy_;           /* a call is in progress (atomic) */
    const char *file_;        /* creation site, for PP_TRACK_PINS */
    int line_;
    pp_ref_t inline_[PP_SCOPE_INLINE];
} pp_scope_t;

/* Makes s an open scope of pool, holding no pins.  file and line name the
 * creation site; the macro below passes the caller's.  Never fails.  s and
 * pool must not be NULL: with a NULL pool, later calls on s get PP_EINVAL. */
PP_API void pp_scope_init_loc(pp_scope_t *s, pp_pool_t *pool, const char *file, int line);
PP_API void pp_scope_init(pp_scope_t *s, pp_pool_t *pool);
#ifndef PP_NO_CALLSITE
#define pp_scope_init(s, pool) pp_scope_init_loc((s), (pool), __FILE__, __LINE__)
#endif

/* pp_pin through s: the same flags, guarantees and errors.  Also PP_ENOMEM
 * (the ledger cannot grow), PP_EINVAL (not an open scope) and PP_EINUSE.
 * On success the pin is recorded in s. */
PP_API int pp_scope_pin(pp_scope_t *s, pp_ref_t ref, unsigned flags, void **data);

/* pp_pin_many through s: all or none.  Room in the ledger is made first, so
 * PP_ENOMEM takes no pin.  On success all n pins are recorded in s. */
PP_API int pp_scope_pin_many(pp_scope_t *s, const pp_ref_t *refs, size_t n,
                             unsigned flags, void **data);

/* Drops one pin of ref held through s: the most recent one.  Errors:
 * PP_ENOTPINNED (s holds no pin of ref), PP_EINVAL, PP_EINUSE, and the
 * errors of pp_unpin, after which the pin stays recorded. */
PP_API int pp_scope_unpin(pp_scope_t *s, pp_ref_t ref);

/* Ends s: drops every pin still held through it, from any thread, and frees
 * its heap memory.  Each pin is dropped once at most.  If one was dropped
 * behind the scope's back, the rest are dropped and the first error is
 * returned.  Errors: PP_EINVAL (not open), PP_EINUSE, PP_ENOMEM (nothing
 * ended: retry), and the errors of pp_unpin. */
PP_API int pp_scope_end(pp_scope_t *s);

/* Pins held through s, 0 for an ended scope.  Call it only between calls
 * on s: it reads the ledger without claiming it. */
PP_API size_t pp_scope_count(const pp_scope_t *s);

/* ------------------------------------------------------------------------ */
/* Threads and epochs (docs/api.md, section "Threads and epochs")            */
/* ------------------------------------------------------------------------ */

/* Says the calling thread holds no pp_get() pointer without an owner or a
 * pin.  The first call puts the thread in QSBR mode: its pp_get() pointers
 * then stay valid until its next pp_quiescent().  A QSBR thread holds
 * reclamation back until it calls this: call it between tasks and before
 * blocking.  Wait-free.  Does nothing inside a type's callback. */
PP_API void pp_quiescent(pp_pool_t *pool);

/* Unregisters the calling thread now; thread exit does it too.  Under
 * PP_TRACK_PINS it reports the pins this thread took and still holds, and
 * returns PP_EBUSY; otherwise 0.  A later call on the pool registers the
 * thread again.  Takes a short lock. */
PP_API int pp_thread_exit(pp_pool_t *pool);

/* Waits until every entry queued for reclamation before the call is freed,
 * on all nodes, or for timeout_ms; a negative timeout waits without limit.
 * It first ends the caller's epoch section, as pp_quiescent() does.  Returns
 * 0, or PP_EBUSY on timeout.  On 0, what those free functions did happens
 * before the return.  Blocking: polls with short sleeps.  Inside a type's
 * callback: PP_EDEADLK. */
PP_API int pp_pool_drain(pp_pool_t *pool, int timeout_ms);

/* ------------------------------------------------------------------------ */
/* Timeline trace (docs/api.md, section "Timeline trace")                     */
/* ------------------------------------------------------------------------ */

/* Writes what the pool does over time to the file at path, as Chrome
 * Trace Event JSON (ui.perfetto.dev and chrome://tracing open it): spans
 * of loads, write-backs, reclaimer rounds and waits for a load or for
 * room, on the track of the thread that ran them; flows from each queued
 * load to its load; per-node counters every 10 ms (resident, backlog, I/O
 * in flight, swap MB/s).  A pin that finds its entry resident records
 * nothing.  A writer thread of the pool formats the events that threads
 * record into buffers of their own; a thread that records over 2048 in
 * 10 ms loses the rest, and the file and a report line count them.
 * PINPOOL_TRACE=path traces from pp_pool_create to pp_pool_destroy (a
 * process's later pools: path.2, path.3 ...).
 * flags: 0.  Errors: PP_EINVAL (NULL or empty path, flags not 0),
 * PP_EINUSE (a trace runs already: reported), PP_EIO (the file cannot be
 * made: reported), PP_ENOMEM. */
PP_API int pp_trace_start(pp_pool_t *pool, const char *path, unsigned flags);

/* Ends the trace and leaves the file a complete JSON document.  Waits for
 * the writer's round in progress.  pp_pool_destroy ends one still
 * running.  Errors: PP_EINVAL (none runs), PP_EIO (a write failed:
 * reported; the file is incomplete). */
PP_API int pp_trace_stop(pp_pool_t *pool);

/* ------------------------------------------------------------------------ */
/* Swap (docs/api.md, section "Swap")                                        */
/* ------------------------------------------------------------------------ */

/* With mem_limit and swap_dir, each node's swap thread writes unpinned
 * entries to disk when memory is short, and a pin loads them back.  A pin
 * always wins against an eviction.  Nothing acknowledged is ever lost: a
 * failed write keeps the data in memory, a failed read keeps the copy. */

/* pp_type_t.flags */
#define PP_TYPE_NOSWAP 0x1u            /* never evict entries of this type */
/* A cache of data held elsewhere: when room is needed, the entry is dropped
 * instead of written, and dies as if released.  Needs mem_limit only. */
#define PP_TYPE_DISCARD 0x2u

/* Swap flags (pp_options_t.flags); ignored without swap_dir. */
#define PP_SWAP_COMPRESS 0x2u /* LZ4-compress swap copies (kept raw when
                                compression saves less than 1/16) */
#define PP_SWAP_DIRECT   0x4u /* swap files opened O_DIRECT: swapped data
                                bypasses the page cache */

/* I/O engines (pp_options_t.io_engine and io_depth). */
#define PP_IO_ENGINE_AUTO    0u   /* io_uring if it works here, else threads */
#define PP_IO_ENGINE_URING   1u   /* io_uring, or PP_ENOTSUP */
#define PP_IO_ENGINE_THREADS 2u   /* blocking reads and writes on pool threads */
#define PP_IO_DEPTH_DEFAULT  32u
#define PP_IO_DEPTH_MAX      4096u

/* Inside a type's save: appends n bytes to the entry's swap copy.  Device
 * errors show in the stats, not here.  Errors: PP_EAGAIN (the entry was
 * pinned: stop and return nonzero), PP_ENOMEM (the eviction is abandoned),
 * PP_EINVAL.  After PP_EAGAIN or PP_ENOMEM, every later call fails alike. */
PP_API int pp_write(pp_writer_t *w, const void *buf, size_t n);
/* Inside a type's load: reads the next n bytes of what save wrote, already
 * checksummed.  Errors: PP_EINVAL (NULL argument, or fewer than n left). */
PP_API int pp_read(pp_reader_t *r, void *buf, size_t n);
/* Inside a type's load: the bytes left for pp_read, 0 for a NULL r.  Bytes
 * that load leaves unread are not an error. */
PP_API size_t pp_read_left(const pp_reader_t *r);

/* A type's save and load outside swap, on the calling thread, for layers
 * that move entries between processes.  The caller keeps data unchanged
 * while save runs.  pack: *buf and *len get what save wrote; free() *buf.
 * unpack: *data gets what load made of [buf, buf+len).  Errors: PP_EINVAL
 * (NULL or unfit type or argument), PP_ENOMEM (pack), PP_EIO (save or load
 * failed).  On failure the outputs are untouched. */
PP_API int pp_type_pack(const pp_type_t *type, const void *data, size_t size, void **buf,
                        size_t *len);
PP_API int pp_type_unpack(const pp_type_t *type, const void *buf, size_t len, size_t size,
                          void **data);

/* ------------------------------------------------------------------------ */
/* Introspection (docs/api.md, section "Introspection")                      */
/* ------------------------------------------------------------------------ */

/* pp_entry_info_t.state bits */
#define PP_STATE_RESIDENT 0x01u  /* data is in memory */
#define PP_STATE_SWAPPED  0x02u  /* a swap copy exists (valid unless DIRTY) */
#define PP_STATE_ESCAPED  0x04u  /* pp_get() was called: never evicted */
#define PP_STATE_DIRTY    0x08u  /* pinned for write since last save */
#define PP_STATE_DEAD     0x10u  /* last owner released (still pinned) */
#define PP_STATE_LOADING  0x20u  /* a load is in progress */
#define PP_STATE_EVICTING 0x40u  /* an eviction is in progress */

typedef struct pp_entry_info {
    size_t size;                 /* as given to pp_put */
    uint32_t pins;               /* pins held now; a hot entry's is a sum */
    uint32_t owners;             /* owners held now */
    unsigned state;              /* PP_STATE_* */
    unsigned node;               /* home node */
    const pp_type_t *type;       /* as given to pp_put (may be NULL) */
} pp_entry_info_t;

/* A snapshot of one entry.  Works while the entry lives, and while it is
 * dead but pinned, with PP_STATE_DEAD.  With swap, a dead entry whose
 * eviction or load is in flight is still described.  Errors: PP_ESTALE,
 * PP_EINVAL (out NULL).  Lock-free.  Statistics of the whole pool:
 * pp_pool_stats() (docs/api.md, section "Statistics"). */
PP_API int pp_stat(pp_pool_t *pool, pp_ref_t ref, pp_entry_info_t *out);

#include "pinpool_stats.h"

/* Ref decoding, for reports and tests. */
static inline unsigned pp_ref_node(pp_ref_t ref) { return (unsigned)(ref >> 58); }
static inline uint32_t pp_ref_slot(pp_ref_t ref) { return (uint32_t)(ref >> 32) & 0x3FFFFFFu; }
static inline uint32_t pp_ref_gen(pp_ref_t ref)  { return (uint32_t)ref; }

#ifdef __cplusplus
}
#endif

#endif /* PINPOOL_H */
