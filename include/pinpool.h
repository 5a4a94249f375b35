/*
 * pinpool.h -- a lock-free, NUMA-aware pool of data for multithreaded task
 * schedulers.  This is pinpool's only public header.
 *
 * A scheduler puts each piece of data (a matrix tile, a buffer, a GPU array)
 * into the pool and gets a 64-bit ref back.  A task *pins* its inputs before
 * it runs and *unpins* them after.  Because pins make lifetimes explicit, the
 * pool acts the moment data stops being used: when the last owner is gone
 * and the last pin is dropped, the entry is queued for the reclaimer thread
 * of its home NUMA node, which calls the type's free function after an epoch
 * grace period.
 *
 * ---------------------------------------------------------------------------
 * Lifetimes
 * ---------------------------------------------------------------------------
 *  - pp_put() creates an entry with ONE OWNER and no pins.  pp_retain() adds
 *    an owner, pp_release() drops one.  When the last owner is released the
 *    entry is DEAD: new pins, retains and gets fail with PP_ESTALE, and as
 *    soon as it holds no pins it is queued for reclamation.
 *  - pp_pin() guarantees that the entry's data pointer stays valid and
 *    unmoved until the matching pp_unpin().  Pins nest and may be taken on
 *    one thread and dropped on another.  A pinned entry is never freed.
 *  - pp_get() is escaped access: it returns the data without a pin and marks
 *    the entry ESCAPED (never evicted from then on).  The data stays valid as
 *    long as the caller holds an owner; in addition a thread in QSBR mode
 *    (see pp_quiescent) may use it until its next pp_quiescent() even if the
 *    last owner is released concurrently.
 *  - A ref is a plain value: copying it does not retain.  A ref to an entry
 *    that has been reclaimed is detected (PP_ESTALE), never dereferenced:
 *    the slot table is never freed while the pool lives, and every ref
 *    carries a 32-bit generation that is checked in the same atomic word as
 *    the count it changes.  A slot whose generation would wrap is retired,
 *    so a stale ref can never name a later entry.
 *  - The free function runs on the reclaimer thread of the entry's home node
 *    (or, for entries still owned at pp_pool_destroy, on that reclaimer
 *    during destroy), exactly once for the data the entry holds in memory
 *    when it dies.  The thread that did the final unpin or release never
 *    calls it and never waits for it.  With swap (see "Swap"), data that is
 *    evicted is freed by the node's swap thread after it was written out,
 *    and data that is loaded back comes from the type's load (or malloc).
 *
 * ---------------------------------------------------------------------------
 * Swap (pp_options_t.swap_dir and mem_limit)
 * ---------------------------------------------------------------------------
 *  With a memory limit and a swap directory, each node domain also runs a
 *  swap thread (and a read helper thread, which reads the second half of a
 *  large copy that a thread loads through the page cache while that thread
 *  reads and checks the first).  When the resident bytes of the pool pass 15/16 of
 *  mem_limit (the high watermark), the swap threads evict unpinned, alive,
 *  not escaped entries of swappable types, chosen by CLOCK with a second
 *  chance (each pin sets a recency bit), in batches, until resident bytes
 *  are back under 7/8 of the limit (the low watermark).  A dirty entry (new,
 *  or pinned with PP_PIN_WRITE since its last write) is written to the swap
 *  store with an XXH3 checksum (and LZ4-compressed with PP_SWAP_COMPRESS);
 *  a clean entry whose swap copy is still valid is dropped without a write.
 *  Its memory is then freed with the type's free function.  An entry of a
 *  PP_TYPE_DISCARD type (a cache of data held elsewhere) is never written:
 *  the hand that chooses it drops it, and it dies (see PP_TYPE_DISCARD).
 *  Without swap_dir, DISCARD entries are the only ones the pool evicts: a
 *  put that does not fit under mem_limit has them dropped by the same
 *  CLOCK hand, on the calling thread, instead of failing.
 *
 *  A pin always wins: a pin that races with an eviction succeeds at once
 *  and the eviction is abandoned (a PP_PIN_WRITE pin, or a pp_get, that
 *  arrives while the bytes are being written waits until the swap thread
 *  has stopped reading them: within one 256 KiB chunk for flat entries, one
 *  1 MiB request under the io_uring engine or with direct I/O; a
 *  type's save sees PP_EAGAIN from pp_write and should return).  A pinned
 *  entry is never written out, freed or moved.  pp_pin() of a swapped entry loads it on the calling thread
 *  (other pinners of that entry wait for that load); a load that needs room
 *  first has the swap threads evict, and returns PP_ENOMEM at once if
 *  nothing can be evicted (every resident byte pinned, escaped, being
 *  loaded, of a type that cannot be evicted, or dirty with the swap store
 *  full or failing).  Bytes of dead entries waiting for their reclaimer's
 *  grace period are waited for, not counted as lost -- except by a QSBR
 *  thread between two pp_quiescent() calls, whose own section holds that
 *  grace period back (it gets PP_ENOMEM), and only while reclaimers that
 *  poll their epoch free something at least every 10 ms (another QSBR
 *  thread may hold the grace period back, for instance while it waits for
 *  a load the caller makes; a reclaimer that had no CPU to poll, under
 *  overload, is waited for).  Reserved resident bytes never exceed
 *  mem_limit: an entry being loaded counts from before its memory is
 *  allocated.
 *
 *  Nothing acknowledged is ever lost: a write that fails (EIO, ENOSPC, a
 *  short write) leaves the entry resident and counts an I/O error; a read
 *  that fails returns PP_EIO and keeps the swap copy for a retry; a copy
 *  whose checksum does not match is PP_ECORRUPT (never returned as data).
 *  Each is counted in the node's stats (io_errors, checksum_failures) and
 *  reported through the report hook the 1st, 2nd, 4th, 8th... time on a
 *  node, with the count, so a copy pinned again and again cannot flood it.
 *  Swap files live in a private directory made with mkdtemp under
 *  swap_dir (mode 0700; files 0600, created O_EXCL), removed by
 *  pp_pool_destroy().
 *
 *  I/O engines (pp_options_t.io_engine, io_depth).  Where the kernel
 *  allows io_uring (PP_IO_ENGINE_AUTO, the default, and
 *  PP_IO_ENGINE_URING), each node's swap thread keeps many requests in
 *  flight on its own ring: a pass of the hand claims its victims one
 *  after another and hands their write-outs to the kernel together, up to
 *  three quarters of io_depth requests (so queued loads always find one
 *  free), and frees each victim's memory as its own write-out ends.  A
 *  victim is written in requests of 1 MiB, one at a time, so a
 *  PP_PIN_WRITE pin or a pp_get that meets a write-out still waits for at
 *  most one request, and a pin of any kind that arrives during it makes
 *  the eviction give up, as without the engine.  Queued loads (pp_prefetch,
 *  PP_ADVISE_WILLNEED, PP_PIN_NOWAIT) run on the swap thread many at a
 *  time, each read in 1 MiB requests all in flight at once, its checksum
 *  checked when the last one ends; the bytes of queued loads in flight
 *  are bounded by a sixteenth of mem_limit (at least one entry), so
 *  prefetching never pushes out what is in use faster than the device
 *  brings it back, and those beyond the bound wait in the order they were
 *  queued.  The memory of a flat entry (no save/load, no free) that the
 *  swap thread evicts is kept, within mem_limit, for the next queued load
 *  of the same size (its pages are already mapped: no page faults on the
 *  way in); what no load takes is freed once the swap thread has idled a
 *  second, or as soon as resident entries need the room it was kept in
 *  (at most 16 buffers per node).  A pin waits for a queued load of its
 *  entry wherever that load is.  A pin of a swapped entry that no load holds still loads it on the
 *  pinning thread, blocking (it waits for its own bytes only, never
 *  behind a queue).  Failures are those of the thread engine: a failed or
 *  short write leaves the entry resident (short counts are carried on), a
 *  failed read or a bad checksum keeps the copy, each counted and
 *  reported.  PP_IO_ENGINE_THREADS (or, with PP_IO_ENGINE_AUTO, the
 *  environment variable PINPOOL_IO_ENGINE=threads; =uring, =auto; any
 *  other value: PP_EINVAL) keeps the blocking engine: one request at a
 *  time per swap thread.  Where io_uring cannot be used (a seccomp filter,
 *  kernel.io_uring_disabled, a kernel before 5.6), PP_IO_ENGINE_AUTO runs
 *  the thread engine and pp_pool_stats says why (io_engine_why);
 *  PP_IO_ENGINE_URING makes pp_pool_create fail with PP_ENOTSUP and says
 *  why through the report hook.  The stats count each node's requests,
 *  the calls that handed them to the kernel, and the most in flight at
 *  once (io_requests, io_submits, io_inflight_peak, io_load_bytes_peak),
 *  and the loads that read into kept memory (io_load_recycled).
 *
 *  Direct I/O (PP_SWAP_DIRECT).  The swap files are opened with O_DIRECT,
 *  so swapped bytes do not also sit in the page cache: the memory that
 *  swapping costs the machine is mem_limit, not mem_limit plus the cache of
 *  everything written or read.  The price is that every write and read
 *  waits for the device (no write-behind, no read cache).  Needs a file
 *  system that does direct I/O with alignment of at most 4096 bytes (ext4,
 *  XFS, btrfs; tmpfs from Linux 6.6); where statx reports it
 *  (STATX_DIOALIGN), the alignment is checked at create.  Space is handed
 *  out in 4096-byte pages anyway, so copies start on a page; the last page
 *  of a copy is padded with zeros on disk, and its checksum covers the
 *  copy's own bytes only.  Data the pool allocates (entries it loads, LZ4
 *  copies, copies read whole for a type's load) is page-aligned and
 *  padded to whole pages, and goes straight between memory and the file;
 *  an entry put in memory that is not page-aligned is written through a
 *  1 MiB bounce buffer that each swap thread makes at its first write
 *  (copied and hashed there; freed when the pool is destroyed).  Writes
 *  and reads go in 1 MiB requests, so a PP_PIN_WRITE pin or a pp_get that
 *  meets a write-out waits for at most one such request.  Nothing else
 *  changes: I/O still runs on the swap threads (through either engine) and
 *  on the pinning threads that load (blocking as described above), short
 *  writes and reads are carried on from the block they stopped in, and the
 *  errors are those above.  If the file system refuses O_DIRECT (open fails with EINVAL, as
 *  on tmpfs before Linux 6.6) or needs more than 4096-byte alignment,
 *  pp_pool_create returns PP_ENOTSUP and says why through the report hook
 *  -- it does not quietly fall back to the page cache, because a pool
 *  sized on the promise that swapped data leaves memory would then grow
 *  the page cache behind its limit; a caller that prefers buffered I/O
 *  retries without the flag.
 *
 * ---------------------------------------------------------------------------
 * Overload: the reclaim backlog (pp_options_t.reclaim_backlog)
 * ---------------------------------------------------------------------------
 *  A final unpin or release never calls a free function and never waits:
 *  it queues the entry for its home node's reclaimer, which frees it after
 *  a grace period.  When busy threads outnumber the CPUs, that one thread
 *  per node gets only its share of a CPU, and without a bound the memory
 *  of dead entries would grow as long as the threads that kill entries
 *  outrun it.  So each node bounds its backlog: the dead entries queued
 *  for its reclaimer or in their grace period, each counted as the bytes
 *  it holds in memory (its size if resident, at most 64 GiB, nothing for
 *  data only on disk) plus 64 for its slot.
 *
 *  The back-pressure goes to the producer of new memory, pp_put: a put
 *  waits while its home node's backlog is at or above a quarter of the
 *  bound (the wait mark, pp_stats_t.backlog_mark), and goes on as soon as
 *  the reclaimer brings it below (it wakes waiters then; the waiting
 *  thread sleeps on a futex, so its CPU goes to the reclaimer and the
 *  others).  A final unpin or release never waits, so entries that were
 *  live can still die while puts wait: the other three quarters of the
 *  bound are room for them.  The backlog therefore passes the bound only
 *  if more than three quarters of it in live entries die while puts wait;
 *  pp_node_stats_t.backlog_peak shows how close it came.  Under overload
 *  the backlog sits near the mark, so the reclaim lag is about the mark
 *  divided by the rate the reclaimer frees at.  Loads do
 *  not wait for the backlog: with swap the bytes of dead entries count
 *  against mem_limit until they are freed, so a load cannot take memory
 *  past the limit however long the backlog (it waits for room instead, as
 *  described under "Swap").
 *
 *  No deadlock: a put waits only for the reclaimer, and the reclaimer only
 *  for epoch sections to end.  Pins are counters, not sections, so a
 *  thread holding pins (of live or dead entries: a pinned entry is not in
 *  the backlog) waits safely.  A QSBR thread that has called pp_get() or
 *  pp_stat() since its last pp_quiescent() is inside an epoch section (the
 *  other calls enter none) that may hold the grace period back: its put
 *  returns PP_EDEADLK instead of waiting (call pp_quiescent() and retry).
 *  With PP_PUT_NOWAIT a put returns PP_EAGAIN instead of waiting.  No other
 *  wait inside the pool depends on a put, so none can close a cycle; a
 *  QSBR thread must not, inside its section, wait for another thread's
 *  put (the rule of every RCU: do not wait for a grace period, or for
 *  what waits for one, inside a read section).  A put made inside a
 *  type's callback never waits (see "Callbacks").
 *
 *  Default 16 MiB per node (PP_RECLAIM_BACKLOG_DEFAULT).  A smaller bound
 *  keeps less memory dead and the reclaim lag shorter under overload (the
 *  lag is about the backlog divided by the rate the reclaimer frees at);
 *  a bound smaller than a few entries makes puts wait for nearly every
 *  free.  pp_node_stats_t counts the backlog, its peak and the puts that
 *  waited (and for how long) or were refused.
 *
 * ---------------------------------------------------------------------------
 * Callbacks: what a type's free, save and load may do
 * ---------------------------------------------------------------------------
 *  The pool calls a type's free, save and load on its own threads: a
 *  node's reclaimer, its swap thread, destroy's sweep.  load also runs on
 *  a thread whose pin finds the entry swapped out.  A callback may call
 *  the pool: put, retain, release, pin, unpin, get, stat, advise and
 *  prefetch entries other than the one it is called for, on any node, of
 *  this pool or another.  No call made inside a callback waits:
 *   - pp_put never waits for the reclaim backlog, and returns PP_EAGAIN
 *     where it would wait for room, as with PP_PUT_NOWAIT.
 *   - pp_pin, pp_pin_many and pp_get act as with PP_PIN_NOWAIT: PP_EAGAIN
 *     for an entry not in memory (its load is started), or for a write
 *     pin or pp_get of one being written out.
 *   - pp_pool_drain and pp_pool_destroy return PP_EDEADLK.  pp_quiescent
 *     does nothing.
 *  So a callback never waits on its own thread's progress: a reclaimer on
 *  its own frees, a swap thread on its own pass or load.  The entry it is
 *  called for: free's is dead (PP_ESTALE), or after an eviction only on
 *  disk (a pin gets PP_EAGAIN); a pin of save's or load's gets PP_EAGAIN,
 *  except a read pin during save, which wins (the eviction is abandoned).
 *
 *  At destroy the reclaimers free what is still owned, and the callbacks
 *  may call the pool as above.  What a free releases is freed too, on
 *  any node.  An entry it puts and keeps is a leaked owner: freed and
 *  reported.  A pin or prefetch of an entry not in memory returns
 *  PP_EAGAIN and starts no load.  Entries still owned are freed in no set
 *  order, so a release of one by another's free may find it freed
 *  already: PP_ESTALE.
 *
 *  A callback must not wait for a thread that may be waiting in the pool:
 *  in pp_put for room or the backlog, or in pp_pin for a load.  That
 *  thread may be waiting for the very pool thread the callback runs on.
 *  So a lock that a callback takes must not be held across such calls;
 *  a thread that holds it calls with PP_PUT_NOWAIT and PP_PIN_NOWAIT.
 *
 * ---------------------------------------------------------------------------
 * Threads, progress and memory ordering
 * ---------------------------------------------------------------------------
 *  Threads need no registration: a thread is registered with a pool on its
 *  first call (one allocation, once per thread and pool) and unregistered
 *  when it exits or calls pp_thread_exit().
 *
 *  | call                         | progress            | blocks? | may run concurrently with   |
 *  |------------------------------|---------------------|---------|-----------------------------|
 *  | pp_pin, pp_pin_many, pp_get  | lock-free if        | only to | every call but destroy      |
 *  |                              | resident            | load *  |                             |
 *  | pp_unpin, pp_unpin_many      | lock-free           | never   | every call but destroy      |
 *  | pp_retain, pp_release        | lock-free           | never   | every call but destroy      |
 *  | pp_stat, pp_prefetch         | lock-free           | never   | every call but destroy      |
 *  | pp_advise                    | lock-free           | never   | every call but destroy      |
 *  | pp_put                       | lock-free           | only for| every call but destroy      |
 *  |                              |                     | room or |                             |
 *  |                              |                     | backlog*|                             |
 *  | pp_quiescent                 | wait-free           | never   | every call but destroy      |
 *  | pp_pool_stats                | takes a short lock  | briefly | every call but destroy      |
 *  | pp_thread_exit               | takes a short lock  | briefly | every call but destroy      |
 *  | pp_pool_drain                | blocking (polls)    | yes     | every call but destroy      |
 *  | pp_pool_create               | blocking            | yes     | anything (other pools)      |
 *  | pp_pool_destroy              | blocking (joins)    | yes     | NOTHING on the same pool    |
 *
 *  (*) Only with swap: pp_pin/pp_pin_many/pp_get of an entry that is not
 *  resident load it (I/O, allocation) or wait for the load in progress, and
 *  pp_put/a load over the memory limit wait for the swap threads to make
 *  room.  Without swap, a pp_put over the memory limit drops
 *  PP_TYPE_DISCARD entries and waits for their reclaimer to free them.
 *  With any pool, pp_put waits while its node's reclaim backlog is
 *  at its wait mark (see "Overload").  PP_PIN_NOWAIT and PP_PUT_NOWAIT
 *  never wait.
 *
 *  "Lock-free" calls take no lock, make no system call and allocate nothing
 *  (except a thread's one-time registration, and with PP_TRACK_PINS, which
 *  is a debugging mode that allocates and locks).  A final unpin or release
 *  may wake its node's reclaimer with a futex if, and only if, the reclaimer
 *  is asleep: at most one system call per reclaimer wake-up, never one per
 *  final unpin.
 *
 *  Memory ordering: pp_pin() acquires and pp_unpin() releases on the entry,
 *  so everything a thread wrote to the data before pp_unpin() is visible to
 *  any thread after a later pp_pin() of the same entry, and to the free
 *  function.  pp_put() releases: a thread that obtained the ref through any
 *  synchronisation sees the initialised entry.  Unpins and releases happen
 *  before the free function runs.  Write to an entry's data only under a
 *  PP_PIN_WRITE pin (or through pp_get): read pins of a hot entry (below)
 *  order only what was written under write pins.
 * ---------------------------------------------------------------------------
 * What a pin touches
 * ---------------------------------------------------------------------------
 *  An entry's metadata is 64 bytes in two records on its home node: a
 *  16-byte hot record, its pins word (count, generation, state flags) and
 *  its data pointer, and a 48-byte cold one (owners, size, type, queue
 *  links).  pp_pin and pp_unpin read and write the hot record only, with
 *  one compare-and-swap each that validates the ref's generation, plus a
 *  counter of the calling thread's own; hot records are four to a cache
 *  line, so a million entries' hot state is 16 MB.  Tables grow in 2 MiB
 *  segments of 32768 entries; from a node's fifth segment on (tables of
 *  more than 131072 entries), each has transparent huge pages advised: one
 *  TLB entry for 32768 entries where the system has huge pages.
 *  pp_pin_many and pp_unpin_many find and prefetch every record of a batch
 *  before the first compare-and-swap, so their cache misses overlap, and
 *  pp_pin_many prefetches the first line of each entry's data.
 *
 * ---------------------------------------------------------------------------
 * Hot entries
 * ---------------------------------------------------------------------------
 *  An entry's pins are one counter in its hot record.  When many threads
 *  pin the same entry at once (a broadcast input of a task graph), that
 *  cache line moves from core to core on every pin and unpin.  So a pin whose
 *  compare-and-swap fails twice makes the entry HOT: from then on each
 *  thread counts its pins on a shard of its own (a cache line per thread,
 *  in a hot slot on the entry's node; 64 slots per node), and pins of a hot
 *  entry scale with the threads.  Nothing else changes: a pin may still be
 *  dropped on any thread; PP_ENOTPINNED, PP_EOVERFLOW (PP_MAX_PINS) and the
 *  final unpin are decided exactly, on the one counter, after the shards
 *  are summed back into it.  That happens, lock-free, when a PP_PIN_WRITE
 *  pin arrives (write pins are never sharded), at the last release, when
 *  the eviction hand passes the entry, on an overflow, and when an unpin
 *  finds no pin left on the shards.  An entry becomes hot only while no
 *  write pin may be held on it.  pp_stat's pins of a hot entry is a sum
 *  taken while other threads may change it.  pp_node_stats_t counts hot
 *  entries, promotions and demotions.
 *
 * ---------------------------------------------------------------------------
 * Errors
 * ---------------------------------------------------------------------------
 *  Every int-returning call returns 0 on success or a negative PP_E* code.
 *  A failed call has no effect (except where its documentation says so).
 *  Misuse of a ref (stale, garbage, unbalanced unpin) is an error code,
 *  never a crash or a silent corruption.
 */
#ifndef PINPOOL_H
#define PINPOOL_H

#include <stddef.h>
#include <stdint.h>

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
/* Errors                                                                    */
/* ------------------------------------------------------------------------ */

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

/* Message for an error code ("unknown error" for other values). Never NULL. */
PP_API const char *pp_strerror(int err);
/* Name of an error code, e.g. "PP_ESTALE" ("PP_OK" for 0, "PP_E?" for
 * unknown values). Never NULL. */
PP_API const char *pp_err_name(int err);

/* ------------------------------------------------------------------------ */
/* Types                                                                     */
/* ------------------------------------------------------------------------ */

typedef struct pp_pool pp_pool_t;      /* opaque */
/* Reports one line through pool's report hook (pp_options_t.report) or to
 * standard error: for layers built on a pool, such as libpinpool_mpi,
 * whose misuse reports belong with the pool's.  pool may be NULL. */
PP_API void pp_pool_report(pp_pool_t *pool, const char *line);
typedef uint64_t pp_ref_t;             /* 0 never names an entry */
#define PP_REF_NONE ((pp_ref_t)0)

typedef struct pp_writer pp_writer_t;  /* opaque, passed to a type's save */
typedef struct pp_reader pp_reader_t;  /* opaque, passed to a type's load */

/* How the pool handles one kind of data.  The pool keeps the pointer you
 * give to pp_put(): a type must stay valid (typically `static const`) until
 * every entry that uses it has been freed or the pool destroyed. */
typedef struct pp_type {
    const char *name;                  /* for reports; may be NULL */
    /* Frees the data.  NULL: free(data).  Called exactly once per entry, on
     * its home node's reclaimer thread (with swap, also on its swap thread
     * for data evicted).  May call the pool: see "Callbacks". */
    void (*free)(void *data, size_t size, void *ctx);
    /* Swap support.  Both NULL: the bytes [data, data+size) are written
     * straight from memory, and read back into memory from malloc(),
     * freed with free() (from 2 MiB up aligned to 2 MiB and advised
     * MADV_HUGEPAGE, in either I/O mode: a huge page's first touch is one
     * page fault, where 4 KiB pages take 512) -- so such a type must have
     * free == NULL too; a type with its own free but no save/load is never
     * evicted (the pool could not hand its free memory it understands),
     * unless it is PP_TYPE_DISCARD (below), which needs neither.
     * Otherwise both must be set (pp_put: PP_EINVAL if only one is): save
     * writes the entry with pp_write() (any number of calls, any total
     * length; the pool collects the copy in its own memory, then writes
     * it) and returns 0, or nonzero to abandon this eviction (the entry
     * stays resident).  load allocates new data, reads what save wrote
     * with pp_read() and stores the pointer in *data; it returns 0, or
     * nonzero to fail the load (having freed what it allocated; the swap
     * copy is kept).  The bytes load reads have already passed their
     * checksum.  Both run on pool threads (the node's swap thread, or a
     * thread that pins) while the entry holds no pin, or only read pins;
     * they may call the pool as "Callbacks" says.  With swap, free is also called
     * for the data of every entry evicted, on the node's swap thread.
     * Neither is ever called for a PP_TYPE_DISCARD type. */
    int (*save)(const void *data, size_t size, pp_writer_t *w, void *ctx);
    int (*load)(void **data, size_t size, pp_reader_t *r, void *ctx);
    void *ctx;                         /* passed to free, save and load */
    unsigned flags;                    /* PP_TYPE_* */
} pp_type_t;

#define PP_TYPE_NOSWAP 0x1u            /* never evict entries of this type */
/* Entries of this type are caches of data held elsewhere (the MPI layer's
 * copies of remote data): when the pool needs room, such an entry is
 * dropped, never written to swap.  An entry is dropped only when the
 * CLOCK hand (or, with swap, PP_ADVISE_WONTNEED) chooses it as it would
 * choose an entry to evict: resident, alive, unpinned, not escaped, no
 * I/O in flight, size > 0.  A dropped entry dies as if its last owner had
 * been released: from then on pins, gets, retains, releases, prefetches
 * and advice of its refs return PP_ESTALE (owners the caller still
 * counted are gone with it), and the type's free is called exactly once,
 * on the entry's home reclaimer after a grace period, as for any dead
 * entry.  Its bytes count against mem_limit until that free, like any
 * dead entry's; the hand does not evict other entries for bytes already
 * on their way out.  A pin always wins: a pin that races with a drop either
 * succeeds, and the entry stays alive and owned (the drop is abandoned),
 * or fails with PP_ESTALE; a pinned entry is never dropped.  Works with
 * swap (the swap threads drop) and without: in a pool with mem_limit but
 * no swap_dir, DISCARD entries are all the pool can evict, and a put that
 * does not fit drops them on the calling thread and waits for their
 * reclaimer (see pp_put).  save and load are never called (they may be
 * NULL with free set).  Ignored in a pool without mem_limit (nothing ever
 * needs room); PP_TYPE_NOSWAP wins over it (never dropped).  Drops are
 * counted in pp_node_stats_t.drops, their frees in frees. */
#define PP_TYPE_DISCARD 0x2u

/* Pool options.  Always start from PP_OPTIONS_INIT: fields may be added at
 * the end in later versions, and the macro gives them their defaults. */
typedef struct pp_options {
    /* Resident bytes the pool may hold; 0: no limit.  Without swap_dir it
     * is a hard cap: pp_put returns PP_ENOMEM rather than pass it (after
     * dropping PP_TYPE_DISCARD entries, if any can go).  With swap_dir,
     * entries are evicted to stay under it (see "Swap"). */
    size_t mem_limit;
    /* Directory under which the private swap directory is made; NULL: no
     * swap.  Needs mem_limit != 0 (else PP_EINVAL).  Must exist and be
     * writable, else pp_pool_create returns PP_EIO. */
    const char *swap_dir;
    /* Bytes the swap copies may hold on disk; 0: no limit.  Over it, dirty
     * entries are no longer evicted, and puts and loads that need room get
     * PP_ENOMEM once nothing else can be evicted. */
    uint64_t swap_limit;
    /* NULL: this machine's topology.  Otherwise an hwloc synthetic
     * description such as "pack:2 numa:2 core:2 pu:1", or the path of an
     * hwloc XML file (a string containing '/' or ending in ".xml").  A
     * topology that is not this machine's gives the same node domains,
     * reclaimers and tables, without CPU or memory binding. */
    const char *topology;
    unsigned flags;                    /* PP_TRACK_PINS, PP_SWAP_COMPRESS,
                                          PP_SWAP_DIRECT */
    /* Where leak and misuse reports go, one line per call without a
     * trailing newline; NULL: standard error.  Called from the reporting
     * thread; must not call into the pool. */
    void (*report)(const char *line, void *ctx);
    void *report_ctx;
    /* Bytes of dead entries each node may hold while they wait for its
     * reclaimer (see "Overload"); 0: PP_RECLAIM_BACKLOG_DEFAULT;
     * PP_RECLAIM_BACKLOG_NONE: no bound (puts never wait for it). */
    size_t reclaim_backlog;
    /* How the swap threads move bytes (see "I/O engines" under "Swap"):
     * PP_IO_ENGINE_AUTO (0) takes io_uring where the kernel allows it and
     * the blocking thread engine otherwise; PP_IO_ENGINE_URING fails
     * pp_pool_create with PP_ENOTSUP where io_uring cannot be used;
     * PP_IO_ENGINE_THREADS always takes the blocking engine.  Ignored
     * without swap_dir.  pp_pool_stats says which engine runs, and why. */
    unsigned io_engine;
    /* I/O requests in flight per node (io_uring engine): write-outs (at
     * most three quarters of it) and queued loads together; 0:
     * PP_IO_DEPTH_DEFAULT; above PP_IO_DEPTH_MAX: PP_EINVAL.  Each node's
     * ring is made at pp_pool_create with this many entries. */
    unsigned io_depth;
} pp_options_t;

#define PP_OPTIONS_INIT { 0, NULL, 0, NULL, 0u, NULL, NULL, 0, 0u, 0u }

#define PP_IO_ENGINE_AUTO    0u   /* io_uring if it works here, else threads */
#define PP_IO_ENGINE_URING   1u   /* io_uring, or PP_ENOTSUP */
#define PP_IO_ENGINE_THREADS 2u   /* blocking reads and writes on pool threads */
#define PP_IO_DEPTH_DEFAULT  32u
#define PP_IO_DEPTH_MAX      4096u

#define PP_RECLAIM_BACKLOG_DEFAULT ((size_t)16 << 20)  /* 16 MiB per node */
#define PP_RECLAIM_BACKLOG_NONE    SIZE_MAX

/* Pool flags (pp_options_t.flags). */
#define PP_TRACK_PINS 0x1u   /* remember thread and call site of each pin;
                                also enabled by env PINPOOL_TRACK_PINS=1 */
#define PP_SWAP_COMPRESS 0x2u /* LZ4-compress swap copies (kept raw when
                                compression saves less than 1/16) */
#define PP_SWAP_DIRECT   0x4u /* swap files opened O_DIRECT: swapped data
                                bypasses the page cache (see "Direct I/O"
                                under "Swap"); ignored without swap_dir */

/* pp_put flags: choose the home node (0 <= n < number of nodes). */
#define PP_ON_NODE(n) (0x100u | (((unsigned)(n) & 0xffu) << 16))
#define PP_PUT_NOWAIT 0x1u   /* PP_EAGAIN instead of waiting for the
                                reclaim backlog or for room (swap) */

/* pp_pin flags. */
#define PP_PIN_WRITE  0x1u   /* the task will write: marks the entry dirty */
#define PP_PIN_NOWAIT 0x2u   /* PP_EAGAIN instead of waiting for a load */

#define PP_MAX_NODES   64u          /* node domains per pool */
#define PP_MAX_PINS    0x7FFFFu     /* pins held at once on one entry */
#define PP_MAX_OWNERS  0xFFFFFFFFu  /* owners of one entry */

/* ------------------------------------------------------------------------ */
/* Pool                                                                      */
/* ------------------------------------------------------------------------ */

/* Creates a pool: loads the topology, makes one node domain per NUMA node
 * (tables, reclaim queues, a reclaimer thread bound, where binding is
 * possible, to one CPU of the node: the last one this process may use, so
 * that the kernel cannot move it onto the busy CPU of a thread that wakes
 * it).  opt may be NULL for the defaults.
 * With swap_dir, also makes the private swap directory and one swap file
 * per node, and starts one swap thread per node.
 * Errors: PP_EINVAL (NULL out, unknown flags, swap_dir without mem_limit;
 * see below),
 * PP_ETOPOLOGY (topology string or file not loadable), PP_ENOTSUP (more
 * than PP_MAX_NODES nodes; or PP_SWAP_DIRECT on a file system that refuses
 * O_DIRECT or needs more than 4096-byte alignment, or PP_IO_ENGINE_URING
 * where io_uring cannot be used, each reported through the report hook),
 * PP_EINVAL also for an unknown io_engine, io_depth above PP_IO_DEPTH_MAX,
 * or a PINPOOL_IO_ENGINE other than uring, threads or auto; PP_EIO (swap
 * directory or files could not be made), PP_ENOMEM.  Blocking. */
PP_API int pp_pool_create(const pp_options_t *opt, pp_pool_t **out);

/* Destroys a pool.  If any entry is still pinned, reports each pinned entry
 * (with thread and call site under PP_TRACK_PINS), returns PP_EBUSY and
 * leaves the pool intact and usable.  Otherwise stops the reclaimers after
 * each has freed, exactly once, every entry of its node still alive or
 * queued (entries still owned are reported as leaked owners), removes
 * everything (swap directory and files included) and returns 0.  No other
 * call on this pool may run
 * concurrently, and data obtained through pp_get() is invalid afterwards.
 * The free functions it calls may release other entries, on any node:
 * those are freed too (see "Callbacks").  pool == NULL: PP_EINVAL; inside
 * a type's callback: PP_EDEADLK. */
PP_API int pp_pool_destroy(pp_pool_t *pool);

/* ------------------------------------------------------------------------ */
/* Owners                                                                    */
/* ------------------------------------------------------------------------ */

/* Common to every call taking a pool: PP_EINVAL if pool is NULL, and
 * PP_ENOMEM if this is the calling thread's first call on the pool and its
 * one-time registration cannot allocate (nothing else happened then). */

/* Puts data in the pool and writes its ref to *out.  The pool takes
 * ownership of data (it will be freed with type->free) only on success; on
 * failure the caller still owns it.  The entry has one owner, no pins, and
 * lives on the calling thread's node unless flags carry PP_ON_NODE(n).
 * type may be NULL (flat buffer released with free()).  size may be 0.
 * Errors: PP_EINVAL (NULL pool, data or out; unknown flags; node out of
 * range; size > PTRDIFF_MAX), PP_ENOMEM (table full, no memory for a new
 * table segment, or the memory limit: when the entry does not fit and
 * nothing can be evicted -- without swap, nothing but PP_TYPE_DISCARD
 * entries ever is: a put that does not fit drops them on the calling
 * thread, CLOCK as the swap threads do, and waits for their reclaimer to
 * free them; PP_ENOMEM at once if none can go, and for a QSBR caller
 * inside its section, which would hold that free back).
 * PP_EAGAIN (PP_PUT_NOWAIT, and the call would have waited: for the
 * backlog, or with swap for room -- the swap threads are then asked to
 * make room, so a retry may fit), PP_EDEADLK (the backlog is at its wait
 * mark and the caller is a QSBR thread inside its section -- it called
 * pp_get or pp_stat since its last pp_quiescent -- which may hold the
 * reclaimer back: call pp_quiescent() and retry).  A failed put leaves
 * data with the caller and the pool unchanged.  Inside a type's callback
 * it never waits (see "Callbacks").
 * Lock-free when the entry fits under the limit and the node's reclaim
 * backlog is below its wait mark.  Otherwise it waits (see "Overload"):
 * for the reclaimer to bring the backlog under the mark, then, with swap,
 * for the swap threads to evict (without swap, for the DISCARD entries it
 * dropped to be freed).  Once per 64 puts on a node it
 * may take slots from a fresh table segment, and once per 32768 slots it
 * maps that segment (mmap, bound to the node; see "What a pin touches"). */
PP_API int pp_put(pp_pool_t *pool, void *data, size_t size,
                  const pp_type_t *type, unsigned flags, pp_ref_t *out);

/* Adds an owner.  Errors: PP_ESTALE (dead or invalid ref), PP_EOVERFLOW.
 * Lock-free, never blocks. */
PP_API int pp_retain(pp_pool_t *pool, pp_ref_t ref);

/* Drops an owner.  The last release makes the entry dead, and queues it for
 * its reclaimer if it holds no pins (otherwise the last unpin does).
 * Errors: PP_ESTALE (dead or invalid ref: a release past zero, or of a
 * PP_TYPE_DISCARD entry the pool dropped).
 * Lock-free, never blocks. */
PP_API int pp_release(pp_pool_t *pool, pp_ref_t ref);

/* ------------------------------------------------------------------------ */
/* Pins                                                                      */
/* ------------------------------------------------------------------------ */

/* Pins an entry and writes its data pointer to *data (data may be NULL).
 * The pointer stays valid and unmoved until the matching pp_unpin().
 * PP_PIN_WRITE marks the entry dirty.  Acquire: sees every write made
 * before the last pp_unpin of the entry.
 * A swapped entry is loaded first, on the calling thread (or the call waits
 * for the load another thread does); with PP_PIN_NOWAIT the call returns
 * PP_EAGAIN at once instead and the entry's swap thread loads it.
 * Errors: PP_ESTALE (dead, reclaimed or invalid ref), PP_EOVERFLOW
 * (PP_MAX_PINS pins held), PP_EINVAL (unknown flags), PP_EAGAIN (with
 * PP_PIN_NOWAIT, not resident: a load was started or is in progress; or,
 * with PP_PIN_WRITE too, the entry is being written out -- also when the
 * caller already holds a read pin of it, taken while that write-out was
 * under way: the swap thread may still be reading the bytes; the call
 * takes no pin),
 * PP_ENOMEM (no room to load it and nothing evictable), PP_EIO (the read
 * failed; the swap copy is kept, a later pin retries), PP_ECORRUPT (the
 * swap copy failed its checksum).
 * Resident entry: lock-free, no system call, no allocation. */
PP_API int pp_pin(pp_pool_t *pool, pp_ref_t ref, unsigned flags, void **data);

/* Drops one pin.  Release: publishes the caller's writes to the data.  The
 * last unpin of a dead entry queues it for its reclaimer and returns at once.
 * Errors: PP_ENOTPINNED (a live entry that holds no pin), PP_ESTALE
 * (invalid or reclaimed ref, or a dead entry with no pin left: it is
 * already queued).  Lock-free, no system call, no allocation. */
PP_API int pp_unpin(pp_pool_t *pool, pp_ref_t ref);

/* Pins n refs, all or none: on failure every pin taken by this call is
 * dropped again and the first error is returned.  data may be NULL, or an
 * array of n pointers.  A ref may appear several times (it is pinned that
 * many times).  n == 0 succeeds.  Same guarantees as pp_pin: every ref is
 * validated against its entry's generation in the compare-and-swap that
 * pins it.  Faster than n calls of pp_pin: the records are prefetched
 * together (see "What a pin touches") and the thread is looked up once.
 * Swapped entries: loads of all of them are started first (on their swap
 * threads) and then waited for; with PP_PIN_NOWAIT, PP_EAGAIN if any is
 * not resident (loads of those are started). */
PP_API int pp_pin_many(pp_pool_t *pool, const pp_ref_t *refs, size_t n,
                       unsigned flags, void **data);

/* Unpins n refs, in order.  First checks that every ref holds at least as
 * many pins as it appears in refs; if not, returns that ref's error
 * (PP_ENOTPINNED or PP_ESTALE) and unpins nothing.  *done (done may be
 * NULL) says how many leading refs the call is through with: n on
 * success, 0 if it unpinned nothing.  If another thread drops one of the
 * batch's pins after the check, the call stops at that ref and returns its
 * error: refs[0 .. *done-1) were unpinned, refs[*done-1] had lost its pin,
 * and refs[*done ..] still hold theirs.  So a caller never unpins a ref
 * twice.  Lock-free. */
PP_API int pp_unpin_many(pp_pool_t *pool, const pp_ref_t *refs, size_t n, size_t *done);

/* Starts loading a swapped entry on its node's swap thread and returns at
 * once: 0 for a live entry (resident, loading, or a load now queued),
 * PP_ESTALE otherwise.  A load that fails is not reported here; the next
 * pin retries it and returns its error.  Never blocks, no allocation. */
PP_API int pp_prefetch(pp_pool_t *pool, pp_ref_t ref);

/* Eviction advice (pp_advise). */
#define PP_ADVISE_NORMAL   0u  /* no advice: the CLOCK hand decides */
#define PP_ADVISE_WILLNEED 1u  /* needed soon: load it now, spare it longer */
#define PP_ADVISE_WONTNEED 2u  /* not needed soon: evict it before others */

/* Tells the pool how soon an entry will be pinned again, so that when
 * memory is short it evicts what is needed last.  Advice only orders
 * evictions; it never changes what a pin sees, and a pin always wins: a
 * pinned entry is never evicted, whatever its advice.
 *   PP_ADVISE_WONTNEED: the swap thread evicts entries with this advice
 *     before any other, clean ones (their swap copy is still valid: no
 *     write needed) before dirty ones, and among those the highest slots
 *     first (a fixed order, so that data swept again and again keeps a
 *     fixed part resident); the CLOCK hand gives them no second chance.
 *     An eviction consumes the advice; a pin does not (advise again after
 *     the last use).  Advice to an entry that is not in memory when the
 *     swap thread next looks is dropped (it has nothing to evict; advise
 *     it again once loaded).  Nothing is evicted before memory is short.
 *   PP_ADVISE_WILLNEED: starts loading a swapped entry (as pp_prefetch),
 *     and the hand passes it over once before its usual second chance, so
 *     a tile prefetched for a task is not evicted before the task pins it.
 *     The hand consumes the advice when it first meets the entry.
 *   PP_ADVISE_NORMAL: drops the advice.
 * Advice given to an entry dies with it (it never applies to a later entry
 * of the same slot).  In a pool without swap the call only validates ref.
 * Errors: PP_EINVAL (NULL pool, unknown advice), PP_ESTALE (invalid ref, or
 * a dead entry).  A failed load started by WILLNEED is reported by the
 * next pin, as for pp_prefetch.  Lock-free, never blocks, no allocation;
 * may run concurrently with every call but destroy. */
PP_API int pp_advise(pp_pool_t *pool, pp_ref_t ref, unsigned advice);

/* Escaped access: writes the data pointer to *data without taking a pin and
 * marks the entry escaped (it will never be evicted).  See "Lifetimes" for
 * how long the pointer is valid.  A swapped entry is loaded first, as by
 * pp_pin; an entry being written out is escaped at once (the write-out is
 * abandoned) and the call returns when the swap thread has stopped reading
 * it (the caller may write).  Errors: PP_ESTALE, PP_EINVAL (data NULL), and
 * the load errors of pp_pin.  Lock-free for a resident entry not being
 * written out. */
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
/* Scopes: a ledger of the pins a task holds                                 */
/* ------------------------------------------------------------------------ */

/*
 * A scope remembers every pin taken through it, so that one pp_scope_end()
 * undoes all that are still held: a task that fails halfway, or returns
 * early, drops exactly its own pins and no others (as Spark releases every
 * lock of a failed task, or PostgreSQL every buffer pin of a ResourceOwner).
 *
 *     pp_scope_t s;
 *     pp_scope_init(&s, pool);
 *     if (pp_scope_pin(&s, a, 0, &pa) != 0 || pp_scope_pin(&s, b, PP_PIN_WRITE, &pb) != 0)
 *         goto out;                       // whatever was pinned is in s
 *     ...
 * out:
 *     pp_scope_end(&s);                   // unpins a and b, if held
 *
 * The caller owns the memory (a stack variable, a field of its task
 * object); pp_scope_init() makes it a scope, pp_scope_end() ends it, and
 * it may be initialized again after that.  A scope must not be copied.
 *
 * Capacity: PP_SCOPE_INLINE pins are recorded inside the scope itself, with
 * no allocation.  Beyond that the ledger moves to the heap (malloc, doubling);
 * the pin that needs more room and cannot get it fails with PP_ENOMEM and
 * takes no pin.  pp_scope_end() frees that memory.
 *
 * Threads: one call at a time.  A scope may pass from thread to thread (a
 * task that is pinned on one worker and ended on another), as the
 * scheduler hands the task over; two calls on one scope at the same time
 * are refused: the later one gets PP_EINUSE and does nothing.  Each call
 * costs one uncontended compare-and-swap on the scope for that check, on
 * top of the pins (docs/performance.md gives the figure).
 *
 * With PP_TRACK_PINS, each pin taken through a scope is recorded with the
 * scope's creation site (the line of pp_scope_init), so a scope that is
 * never ended shows up in the leak report where it was made.
 *
 * Misuse changes nothing and gets an error: a call on a scope that has
 * ended, or on zeroed memory that was never initialized (PP_EINVAL;
 * pp_scope_end of an ended scope included), pp_scope_unpin of a ref the scope holds no pin of
 * (PP_ENOTPINNED), a call while another is in progress (PP_EINUSE).
 */
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

/* Makes s an open scope of pool, holding no pins; file and line name the
 * creation site (the macro below passes the caller's).  Never fails:
 * s and pool must not be NULL (a NULL pool makes every later call on s
 * return PP_EINVAL). */
PP_API void pp_scope_init_loc(pp_scope_t *s, pp_pool_t *pool, const char *file, int line);
PP_API void pp_scope_init(pp_scope_t *s, pp_pool_t *pool);
#ifndef PP_NO_CALLSITE
#define pp_scope_init(s, pool) pp_scope_init_loc((s), (pool), __FILE__, __LINE__)
#endif

/* pp_pin through the scope: the same flags, guarantees and errors, plus
 * PP_ENOMEM when the ledger is past PP_SCOPE_INLINE and cannot grow,
 * PP_EINVAL (not an open scope) and PP_EINUSE.  On success the pin is
 * recorded in s. */
PP_API int pp_scope_pin(pp_scope_t *s, pp_ref_t ref, unsigned flags, void **data);

/* pp_pin_many through the scope: all or none, as pp_pin_many; on success
 * all n pins are recorded in s (room for them is made first, so PP_ENOMEM
 * takes no pin). */
PP_API int pp_scope_pin_many(pp_scope_t *s, const pp_ref_t *refs, size_t n,
                             unsigned flags, void **data);

/* Drops one pin of ref held through s, early (the most recent one if ref
 * was pinned through s several times).  Errors: PP_ENOTPINNED (s holds no
 * pin of ref: nothing is unpinned), PP_EINVAL, PP_EINUSE, and pp_unpin's
 * (then the pin stays recorded). */
PP_API int pp_scope_unpin(pp_scope_t *s, pp_ref_t ref);

/* Ends s: drops every pin still held through it, from whichever thread
 * calls (the pins need not have been taken there), and frees the ledger's
 * heap memory.  Each pin is dropped once at most.  PP_ENOMEM (the calling
 * thread could not register) ends nothing: s stays open with its pins
 * listed, and a retry may end it.  If one of its pins was dropped behind
 * its back (pp_unpin on the ref), the scope is ended all the same: every
 * other pin is dropped, and the first error is returned.  Errors:
 * PP_EINVAL (not an open scope: never initialized, or already ended),
 * PP_EINUSE (a call on s is in progress; nothing is done), PP_ENOMEM,
 * pp_unpin's. */
PP_API int pp_scope_end(pp_scope_t *s);

/* Pins held through s (0 for an ended scope).  Between calls on s only:
 * it reads the ledger without claiming it. */
PP_API size_t pp_scope_count(const pp_scope_t *s);

/* ------------------------------------------------------------------------ */
/* Threads and epochs                                                        */
/* ------------------------------------------------------------------------ */

/* Declares that the calling thread holds no pointer obtained through
 * pp_get() without an owner or a pin.  The first call puts the thread in
 * QSBR mode: from then on the epoch section it enters on its next pp_get or
 * pp_stat (the calls that enter one)
 * lasts until its next pp_quiescent(), so pointers from pp_get() stay valid
 * in between even if the last owner is released concurrently.  A QSBR
 * thread that stops calling pp_quiescent holds reclamation back: call it
 * between tasks and before blocking.  Wait-free, never blocks.  No effect
 * inside a type's callback (see "Callbacks"). */
PP_API void pp_quiescent(pp_pool_t *pool);

/* Unregisters the calling thread now (it is also done at thread exit).  Its
 * epoch record is released, its cached free slots returned.  Under
 * PP_TRACK_PINS, pins taken by this thread and not yet dropped are reported
 * (they may legitimately be dropped by another thread later) and the call
 * returns PP_EBUSY; otherwise 0.  A later call on the pool re-registers. */
PP_API int pp_thread_exit(pp_pool_t *pool);

/* Waits until every entry queued for reclamation before the call has been
 * freed (all nodes) -- including entries whose last owner or pin was
 * dropped while an eviction or load of theirs was in flight, which are
 * queued when that I/O ends -- or until timeout_ms milliseconds have passed (a
 * negative timeout waits without limit).  The calling thread's epoch
 * section is ended first, as by pp_quiescent(), so a QSBR caller cannot
 * wait on itself; another QSBR thread that does not quiesce makes it wait.
 * Returns 0, or PP_EBUSY on timeout.  On 0, everything those entries' free
 * functions did happens before the return, and their reclamation is
 * complete: pp_pool_stats counts it (frees, retired_slots, lag).
 * Blocking (polls with short sleeps).  Inside a type's callback:
 * PP_EDEADLK (see "Callbacks"). */
PP_API int pp_pool_drain(pp_pool_t *pool, int timeout_ms);

/* ------------------------------------------------------------------------ */
/* Swap stream (used inside a type's save/load)                              */
/* ------------------------------------------------------------------------ */

/* Inside a type's save: appends n bytes to the entry's swap copy (the pool
 * collects the copy in its memory and writes it after save returns, so
 * device errors and swap_limit show in the stats, not here).  Returns 0,
 * PP_EAGAIN (the entry was pinned meanwhile: the eviction is abandoned,
 * stop writing and return nonzero), PP_ENOMEM (no memory to collect the
 * copy: the eviction is abandoned), PP_EINVAL (NULL w, or NULL buf with
 * n > 0).  After PP_EAGAIN or PP_ENOMEM every later call returns the same
 * error; PP_EINVAL has no effect (nothing is appended, later calls go on). */
PP_API int pp_write(pp_writer_t *w, const void *buf, size_t n);
/* Inside a type's load: reads the next n bytes of what save wrote (already
 * checksummed).  Returns 0, PP_EINVAL (NULL r, NULL buf with n > 0, or
 * fewer than n bytes left: the copy holds less than load asks for). */
PP_API int pp_read(pp_reader_t *r, void *buf, size_t n);
/* Bytes left for pp_read (0 for NULL r). */
PP_API size_t pp_read_left(const pp_reader_t *r);

/* A type's save and load outside swap, for layers that move entries
 * between processes (libpinpool_mpi packs a typed entry with them to send
 * it to another rank, which unpacks it with the same type registered
 * there).  They run on the calling thread, with none of the pool's locks
 * or pins: the caller keeps data from changing while save runs (a read
 * pin does).  Both need a type with save and load, not PP_TYPE_DISCARD.
 *
 * pp_type_pack: calls type->save(data, size) and collects what it writes
 * with pp_write (which never returns PP_EAGAIN here: there is no eviction
 * to lose) in one buffer: *buf, to release with free() (NULL if save
 * wrote nothing), and *len.  Returns 0, PP_EINVAL (NULL or unfit type,
 * NULL buf or len), PP_ENOMEM (no memory for the buffer), PP_EIO (save
 * returned nonzero).  On failure *buf and *len are untouched.
 *
 * pp_type_unpack: calls type->load(size) over [buf, buf+len) and stores
 * the data it made in *data.  Returns 0, PP_EINVAL (NULL or unfit type,
 * NULL buf with len > 0, NULL data), PP_EIO (load returned nonzero,
 * having freed what it allocated; *data is untouched).  Bytes load leaves
 * unread are not an error (pp_read_left tells load how many there are). */
PP_API int pp_type_pack(const pp_type_t *type, const void *data, size_t size, void **buf,
                        size_t *len);
PP_API int pp_type_unpack(const pp_type_t *type, const void *buf, size_t len, size_t size,
                          void **data);

/* ------------------------------------------------------------------------ */
/* Introspection                                                             */
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
    size_t size;
    uint32_t pins;
    uint32_t owners;
    unsigned state;              /* PP_STATE_* */
    unsigned node;               /* home node */
    const pp_type_t *type;       /* as given to pp_put (may be NULL) */
} pp_entry_info_t;

/* A snapshot of one entry.  Works until the entry is queued for its
 * reclaimer: a dead entry that is still pinned is described (with
 * PP_STATE_DEAD); once its last pin is dropped, PP_ESTALE -- except, with
 * swap, while an eviction or load of it is still in flight: until that I/O
 * ends (and queues it) it is described too, with PP_STATE_DEAD, no pins
 * and PP_STATE_EVICTING or PP_STATE_LOADING.
 * Errors: PP_ESTALE, PP_EINVAL (out NULL).  Lock-free. */
PP_API int pp_stat(pp_pool_t *pool, pp_ref_t ref, pp_entry_info_t *out);

typedef struct pp_node_stats {
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
    /* The reclaim backlog (see "Overload"): */
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
    /* Hot entries (see "Hot entries"): */
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
    /* The I/O engine (see "I/O engines"; the thread engine counts its
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
} pp_node_stats_t;

typedef struct pp_stats {
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
                                    maxima: the largest node's) */
    pp_node_stats_t node[PP_MAX_NODES];
} pp_stats_t;

/* Totals and per-node figures.  Counters are exact once every thread has
 * returned from its calls (and, for frees, once the reclaimers are idle);
 * while calls run they are a consistent-enough snapshot.  Takes the pool's
 * registry lock briefly.  Errors: PP_EINVAL. */
PP_API int pp_pool_stats(pp_pool_t *pool, pp_stats_t *out);

/* Ref decoding, for reports and tests. */
static inline unsigned pp_ref_node(pp_ref_t ref) { return (unsigned)(ref >> 58); }
static inline uint32_t pp_ref_slot(pp_ref_t ref) { return (uint32_t)(ref >> 32) & 0x3FFFFFFu; }
static inline uint32_t pp_ref_gen(pp_ref_t ref)  { return (uint32_t)ref; }

#ifdef __cplusplus
}
#endif

#endif /* PINPOOL_H */
