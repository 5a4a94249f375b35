/*
 * perthread.h -- what each application thread keeps for the MPI layer, so
 * that a remote cache hit and its unpin touch no shared cache line but the
 * copy's own (docs/mpi.md, "Inside the layer"):
 *
 *  - hints: a small direct-mapped array per thread, (layer, home rank,
 *    home ref) -> the local ref of the copy the thread last found in the
 *    cache table.  A hint is only a guess: the hit path pins the copy it
 *    names with PP_PIN_NOWAIT and checks the copy's header as it does for
 *    the table's answer (remote.c, pin_copy), so a stale hint costs a
 *    failed pin and a table lookup, never a wrong copy;
 *  - counters: a block per (thread, layer), {hits, pins}, written by its
 *    thread alone with relaxed loads and stores (no read-modify-write),
 *    linked into the layer's list (thr_mu, taken once per thread and
 *    layer) and summed by pp_mpi_stats and pp_mpi_destroy;
 *  - home write pins: (layer, home ref) -> how many write pins of it this
 *    thread holds.  A write unpin is taken only from a thread that holds
 *    one: a read pin's data pointer is the same as a write pin's, so the
 *    thread is what tells the write pin apart (home.c).
 *
 * A layer is named by its id, unique in the process (never reused, unlike
 * its address), in hints and in the thread's cache of its blocks: once a
 * layer is destroyed no thread-local entry can match it, so none is ever
 * followed into freed memory.  The thread-local part is the thread's own
 * (allocated at its first remote pin, freed at its exit), never the
 * layer's.
 */
#ifndef PP_MPI_PERTHREAD_H
#define PP_MPI_PERTHREAD_H

#include <pthread.h>
#include <stdint.h>

#include "os/atomics.h"

#define PP__HINTS 64u           /* per thread: a power of two */
#define PP__THR_CACHED 4u       /* layers whose block a thread finds without a lock */

typedef struct pp__hint {
    uint64_t layer;             /* 0: empty */
    uint64_t home_ref;
    uint64_t local;             /* the copy's ref in the layer's pool */
    uint32_t rank;              /* the home */
} pp__hint_t;

/* A thread's counters in one layer; one cache line, so that two threads'
 * blocks never share one. */
typedef struct pp__thr {
    _Atomic uint64_t hits;      /* cache hits of this thread */
    _Atomic int64_t pins;       /* remote pins taken minus remote pins dropped
                                   by this thread (negative: it dropped pins
                                   other threads took) */
    uint64_t tid;               /* its thread's serial (pp__tls_t.tid) */
    struct pp__thr *next;       /* the layer's list (thr_mu) */
} __attribute__((aligned(64))) pp__thr_t;

/* Home write pins a thread holds of one ref; n == 0: a free slot. */
typedef struct pp__wpin {
    uint64_t layer;
    uint64_t ref;
    uint32_t n;
} pp__wpin_t;

typedef struct pp__perthread_tls {
    uint64_t tid;               /* this thread's serial: unique in the process */
    pp__wpin_t *wpin;           /* nwpin slots, grown by doubling (its own memory) */
    uint32_t nwpin;
    uint64_t layer[PP__THR_CACHED];   /* [0]: the layer used last */
    pp__thr_t *thr[PP__THR_CACHED];   /* followed only while layer[i] is live:
                                         the caller's layer has that id */
    pp__hint_t hint[PP__HINTS];
} pp__tls_t;

extern __thread pp__tls_t *pp__perthread_tls __attribute__((tls_model("initial-exec")));

struct pp_mpi;
uint64_t pp__perthread_layer_id(void);
pp__tls_t *pp__perthread_tls_make(void);                   /* NULL: no memory */
pp__thr_t *pp__perthread_thr_slow(struct pp_mpi *m);       /* NULL: no memory */
void pp__perthread_sum(struct pp_mpi *m, uint64_t *hits, int64_t *pins);
void pp__perthread_free(struct pp_mpi *m);             /* destroy */
/* The calling thread's count of home write pins of ref through the layer
 * of that id, or NULL if it holds none.  No lock, no allocation. */
uint32_t *pp__perthread_wpin_find(uint64_t layer, uint64_t ref);
/* Counts one more such pin for the calling thread.  0, or PP_ENOMEM (its
 * state, or a bigger array, could not be made). */
int pp__perthread_wpin_add(uint64_t layer, uint64_t ref);

/* This thread's state, made at its first use; NULL: no memory. */
static inline pp__tls_t *pp__perthread_tls_get(void)
{
    pp__tls_t *t = pp__perthread_tls;
    return __builtin_expect(t != NULL, 1) ? t : pp__perthread_tls_make();
}

/* The slot of (rank, home ref) in this thread's hints: a multiplicative
 * hash, its top bits. */
static inline pp__hint_t *pp__perthread_hint_slot(pp__tls_t *t, uint32_t rank, uint64_t home_ref)
{
    uint64_t x = (home_ref ^ ((uint64_t)rank << 58)) * 0x9e3779b97f4a7c15ull;
    return &t->hint[x >> (64 - 6)];
}
_Static_assert(PP__HINTS == 64u, "pp__perthread_hint_slot takes 6 bits");

#endif /* PP_MPI_PERTHREAD_H */
