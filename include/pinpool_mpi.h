/*
 * pinpool_mpi.h -- pinpool across ranks on MPI.
 *
 * A separate library, libpinpool_mpi (CMake target pinpool::mpi,
 * pkg-config pinpool-mpi), over the core library and MPI; the core has no
 * MPI dependency.
 *
 * ---------------------------------------------------------------------------
 * Concepts
 * ---------------------------------------------------------------------------
 *  Home         the rank whose local pool holds an entry.  Only the home
 *               writes it.
 *  Global ref   pp_gref_t: home rank, the home's local ref, a version.  A
 *               value: copying it owns nothing, as a pp_ref_t.
 *  Version      each home write pin, when unpinned, publishes a new
 *               version (the put publishes version 1).  A pin names the
 *               version it needs at least (0 or 1: any, so a cached copy
 *               answers it even when the home has a newer one; a miss
 *               gets the home's current one) and is told which one it
 *               got: a versioned ref is also a dataflow future.
 *  Owner        as in pinpool.h: an entry lives while it has owners.
 *               Owners on other ranks are counted by weight, never by
 *               increment messages: see "Owners across ranks".
 *  Token        an owner in transit: pp_mpi_export makes one, the
 *               scheduler carries it in its own messages (it is a plain
 *               struct of bytes), pp_mpi_import on the receiving rank turns
 *               it into an owner there.
 *  Cached copy  a remote pin's local, read-only copy: an entry of the local
 *               pool (counted against its memory limit, evicted by its
 *               CLOCK hand, never while pinned, dropped rather than swapped:
 *               the home has the data).
 *
 * ---------------------------------------------------------------------------
 * Owners across ranks
 * ---------------------------------------------------------------------------
 *  The home mints weight for every export it makes: a fresh interval of
 *  the entry's 2^64 weight space, never reused.  A token carries an
 *  interval; a rank holds the intervals of the tokens it imported (and
 *  exports by splitting one of them, with no message); when its last local
 *  owner of a global ref is released, its intervals go back to the home in
 *  the next batch (one message per home per batch, many refs in it).  The
 *  home drops the owner it keeps for the other ranks when every interval
 *  it minted has come back exactly once.  Consequences:
 *   - no order of messages frees an entry early: the weight of a token in
 *     flight is still out;
 *   - a token is used once: its import (or its drop) claims it at its
 *     home, and a token claimed before, on any rank, is refused
 *     (PP_EINVAL, counted in refused_imports) before the rank holds its
 *     weight.  So the same token on two ranks (an MPI_Bcast of a task
 *     descriptor holding one) is an error on the second, never an early
 *     free;
 *   - weight that comes home twice anyway (a token forged with another
 *     identity) is refused there and reported (refused_returns); the
 *     entry is never freed twice, but may be freed while the forger
 *     holds it.  Weight a rank owns comes home even when it was merged
 *     with such a duplicate: only the duplicate part is refused;
 *   - a token that is never imported is weight that never comes back: the
 *     entry stays until pp_mpi_token_drop returns it, or until destroy,
 *     which reports it.
 *  Entries put with pp_mpi_put are owned through pp_mpi_retain and
 *  pp_mpi_release on every rank, the home included (the layer holds one
 *  pool owner of its own; pp_release of such a ref is a misuse, reported).
 *
 * ---------------------------------------------------------------------------
 * Remote pins and cached copies
 * ---------------------------------------------------------------------------
 *  A copy is kept in the cache only while this rank owns the ref (it is
 *  dropped with the rank's last owner); a pin of a ref this rank does not
 *  own is served with a copy that dies when it is unpinned.  A copy is a
 *  snapshot: a home write pin and a serve of the same entry exclude each
 *  other.  An entry without save/load is sent as its bytes, and its copy
 *  is those bytes.  An entry whose type has save/load is sent packed: the
 *  home's progress thread runs save (under the serve's read pin), the
 *  pinning rank runs load to make the copy, whose data is what load made,
 *  freed with the type's free when the copy dies.  For that, every rank
 *  that puts or pins such entries registers the type under one id
 *  (pp_mpi_type_register); a remote pin of an entry whose type is not
 *  registered at its home, or not here, is PP_ENOTSUP (and reported where
 *  it is missing).  Once a type is registered here, every remote unpin
 *  makes one lock-free lookup (a typed copy is found from its data that
 *  way); without one, a remote unpin makes none.
 *
 * ---------------------------------------------------------------------------
 * Threads and MPI
 * ---------------------------------------------------------------------------
 *  The layer calls MPI only from its progress thread (one per pp_mpi_t),
 *  on a communicator it duplicates, with MPI_ERRORS_RETURN: an MPI failure
 *  is a PP_EIO and a report line, never an abort of the job.  MPI must be
 *  initialized with MPI_THREAD_MULTIPLE if the application calls MPI while
 *  the layer runs, and at least MPI_THREAD_SERIALIZED otherwise
 *  (pp_mpi_create returns PP_ENOTSUP below that).  pp_mpi_create and
 *  pp_mpi_destroy are collective over the communicator and call MPI from
 *  the calling thread, before the progress thread starts and after it
 *  stops.  Every other call may be made from any thread; a home write pin
 *  is dropped on the thread that took it (pp_mpi_unpin).  An idle
 *  progress thread polls with a backoff to 1 ms sleeps: little CPU, and
 *  up to that long for the first request after an idle spell.  A home
 *  that must load a swapped entry to serve it does so on a second thread
 *  (made at the first such request), so the progress thread never waits
 *  on I/O.
 * ---------------------------------------------------------------------------
 */
#ifndef PINPOOL_MPI_H
#define PINPOOL_MPI_H

#include <mpi.h>
#include <stdint.h>

#include "pinpool.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pp_mpi pp_mpi_t;          /* opaque */

typedef struct pp_gref {
    pp_ref_t ref;                        /* the home's local ref */
    uint32_t rank;                       /* the home */
    uint32_t version;                    /* needed at least; 0 (or 1): any */
} pp_gref_t;

typedef struct pp_mpi_token {            /* an owner in transit (plain bytes) */
    pp_gref_t gref;
    uint64_t lo, hi;                     /* its weight: [lo, hi) */
    uint32_t from;                       /* the rank that exported it */
    uint32_t pad;
    uint64_t seq;                        /* from's count of exports toward the home (> 0) */
} pp_mpi_token_t;

/* PP_TYPE_DISCARD (pinpool.h): the type flag of the cached copies, which
 * eviction drops instead of writing (the home holds the data). */

/* Collective.  pool: this rank's local pool (it must outlive m).  Errors:
 * PP_EINVAL, PP_ENOTSUP (MPI not initialized, or a thread level below
 * MPI_THREAD_SERIALIZED), PP_EIO (an MPI call failed), PP_ENOMEM. */
PP_API int pp_mpi_create(MPI_Comm comm, pp_pool_t *pool, pp_mpi_t **out);
/* Collective.  Drains what is in flight, returns the weight this rank
 * holds (reporting owners of other ranks' entries never released here),
 * and reports home entries whose weight never came back (owners other
 * ranks never released, tokens never imported), then drops them.
 * PP_EBUSY: a remote pin is still held here (nothing done; call it again
 * on every rank).  PP_EIO: an MPI call failed while the layer ran (the
 * layer is destroyed all the same). */
PP_API int pp_mpi_destroy(pp_mpi_t *m);

/* pp_put on this rank; *out names it, version 1, with one owner (this
 * rank's, released with pp_mpi_release).  Errors: those of pp_put, and
 * PP_ENOMEM (no home record); on failure data is still the caller's. */
PP_API int pp_mpi_put(pp_mpi_t *m, void *data, size_t size, const pp_type_t *type,
                      unsigned flags, pp_gref_t *out);

/* Registers type under id (1 .. PP_MPI_TYPES_MAX-1) on this rank, for
 * typed entries across ranks (see "Remote pins and cached copies"): every
 * rank that puts or pins entries of the type registers it, before its
 * first such put or pin, with the same id, and with a type whose load
 * reads what the home's save writes (the same code, typically).  A
 * pp_mpi_put of a type with save/load that is not registered makes an
 * entry the home alone may pin.  save runs on the progress thread, load
 * on the thread that installs the copy (the pinning thread, or the
 * progress thread for a prefetch); neither may call into the pool or the
 * layer.  load must return new data: a load that returns data another
 * copy here still holds is refused (the pin gets PP_EIO, reported), since
 * the two copies' unpins could not be told apart.  The type must stay valid until the local pool is destroyed (a
 * copy may be freed after pp_mpi_destroy).  Not collective; no message.
 * Errors: PP_EINVAL (NULL m or type, id out of range, a type without save
 * or load or with PP_TYPE_DISCARD, id taken by another type, type
 * registered under another id).  Registering a type again under its own
 * id is 0.  There is no unregistering. */
#define PP_MPI_TYPES_MAX 64u
PP_API int pp_mpi_type_register(pp_mpi_t *m, uint32_t id, const pp_type_t *type);

/* Owners.  export: a token of one owner of ref, taken from this rank's
 * (the caller keeps its own owner); import: the token's owner, here.
 * export splits the weight this rank holds, with no message; a rank that
 * holds unit weight of ref (after 32 splits of one token) asks the home
 * for more and waits for its answer: one round trip, on the calling
 * thread.  No minted weight is lost on any error.
 * import and drop claim the token at the ref's home first: on a rank
 * other than the home, one round trip on the calling thread.  drop: a
 * token that will never be imported goes home.  retain and release: local
 * while this rank holds weight of ref (no message).
 * Errors: PP_ESTALE (ref of a dead entry, or one this rank holds no owner
 * of: no message is sent), PP_EINVAL (garbage rank or ref; import, drop:
 * a token imported or dropped before, on any rank), PP_ENOMEM, PP_EIO
 * (MPI failed).  An import that fails after its claim (PP_ENOMEM,
 * PP_EOVERFLOW) sends the token's weight home: the token is used up. */
PP_API int pp_mpi_export(pp_mpi_t *m, pp_gref_t ref, pp_mpi_token_t *out);
PP_API int pp_mpi_import(pp_mpi_t *m, const pp_mpi_token_t *token, pp_gref_t *out);
PP_API int pp_mpi_token_drop(pp_mpi_t *m, const pp_mpi_token_t *token);
PP_API int pp_mpi_retain(pp_mpi_t *m, pp_gref_t ref);
PP_API int pp_mpi_release(pp_mpi_t *m, pp_gref_t ref);

/* Pins.  On the home, pp_pin (PP_PIN_WRITE allowed; its unpin publishes a
 * new version).  Elsewhere, a read-only cached copy of at least
 * ref.version: a hit is a local lookup and a local pin, no MPI call; a
 * miss asks the home and waits (PP_PIN_NOWAIT: PP_EAGAIN at once, the
 * request sent).  A home pin of a version not yet published waits for
 * it the same way (PP_ESTALE if the entry dies meanwhile); a home
 * PP_PIN_WRITE also waits (PP_PIN_NOWAIT: PP_EAGAIN) while a copy of the
 * entry is being sent.  A home write pin belongs to the thread that took
 * it: only that thread's write unpin drops it (docs/mpi.md).  A thread
 * counts its home write pins in memory of its own, made at its first one
 * and grown as it holds more (PP_ENOMEM if that fails: no pin taken).
 * *got: the version pinned (may be NULL; a home write pin: the version
 * it writes over).  A home write pin that fails publishes nothing.
 * Errors: those of pp_pin, PP_EINVAL (garbage rank, PP_REF_NONE, unknown
 * flags), PP_ENOTSUP (PP_PIN_WRITE of a remote ref; a typed entry whose type
 * is not registered at its home or here), PP_ESTALE (the home's entry is
 * dead or never was), PP_EIO (MPI failed; or the type's save failed at
 * the home, or its load here: both reported).  A remote pin of an entry
 * swapped out at its home gets the error of the home's load: PP_EIO,
 * PP_ECORRUPT, PP_ENOMEM (the swap copy stays; a later pin tries again).
 * A miss makes the copy with pp_put, whose errors are the caller's alone:
 * PP_EDEADLK (a QSBR thread inside its section, the reclaim backlog at
 * its mark: call pp_quiescent and pin again), PP_ENOMEM, PP_EAGAIN (with
 * PP_PIN_NOWAIT).  The fetched bytes are then kept for the other threads
 * waiting for them, or for the next pin.
 * A hit takes no lock, makes no MPI call and allocates nothing, once the
 * calling thread has pinned a remote ref through m before: a thread's
 * first remote pin through a layer allocates its per-thread state (hints
 * and counters; freed at thread exit and at pp_mpi_destroy) under a lock
 * (without memory for it, pins still work, without hints, counted in
 * shared counters). */
PP_API int pp_mpi_pin(pp_mpi_t *m, pp_gref_t ref, unsigned flags, void **data, uint32_t *got);
/* Pins n refs, all or none: on failure the pins taken are dropped and the
 * first error returned.  A write pin dropped so publishes no version.
 * data: n pointers, got: n versions or NULL.  The remote misses are all
 * requested before the first wait. */
PP_API int pp_mpi_pin_many(pp_mpi_t *m, const pp_gref_t *refs, size_t n, unsigned flags,
                           void **data, uint32_t *got);
/* Drops a pin taken by pp_mpi_pin or pp_mpi_pin_many.  flags: the pin's
 * flags (PP_PIN_WRITE matters: a home write pin's unpin publishes the next
 * version); data: the pointer the pin gave (a remote pin's copy is found
 * from it, with no lookup: several versions of one ref may be pinned here
 * at once).  With PP_PIN_WRITE, the calling thread must hold a write pin
 * of ref; if it holds none (a read pin, or another thread's write pin),
 * the call is PP_ENOTPINNED and changes nothing: every writer keeps its
 * pin.  Errors: PP_EINVAL (data is not a pin of ref), PP_ENOTPINNED,
 * those of pp_unpin.  No MPI call; no lock, but a home write unpin takes
 * one to wake threads or requests waiting for what it publishes.
 * A home read pin is one of the entry's pins in the local pool, as with
 * pp_pin: it may be dropped on any thread, and a read unpin is checked
 * as pp_unpin checks it, on the entry's one count.  That count also holds
 * the pin of a copy being sent to another rank, so a read unpin by a
 * caller that holds no read pin is PP_ENOTPINNED only when no pin is left;
 * otherwise it drops someone else's, as an unbalanced pp_unpin would
 * (the pool cannot tell pins apart), and the entry may then be swapped
 * out or freed under that holder. */
PP_API int pp_mpi_unpin(pp_mpi_t *m, pp_gref_t ref, unsigned flags, const void *data);
/* Starts fetching a remote ref's copy of at least ref.version, without
 * waiting (a home ref: pp_prefetch).  The copy is installed when it
 * arrives if there is room then (otherwise at the next pin).  Errors:
 * PP_EINVAL (garbage rank or ref), PP_ENOMEM. */
PP_API int pp_mpi_prefetch(pp_mpi_t *m, pp_gref_t ref);

typedef struct pp_mpi_stats {
    uint64_t misses, hits;               /* remote pins */
    uint64_t requests_served;            /* as a home */
    uint64_t bytes_fetched, bytes_served;
    uint64_t weight_messages;            /* weight-return messages sent */
    uint64_t weight_records;             /* intervals they carried (refs x holders) */
    uint64_t refused_returns;            /* duplicate or garbage weight, as a home */
    uint64_t refused_imports;            /* tokens refused here */
} pp_mpi_stats_t;
PP_API int pp_mpi_stats(pp_mpi_t *m, pp_mpi_stats_t *out);

#ifdef __cplusplus
}
#endif

#endif /* PINPOOL_MPI_H */
