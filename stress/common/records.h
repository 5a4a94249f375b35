/*
 * stress/common/records.h -- the records of the entries a stress program
 * puts.
 *
 * Every entry the program puts gets a program-wide id k (in put order) and
 * a record rec(k).  Each program's struct rec begins with REC_FIELDS, the
 * part of the ownership model both programs share:
 *  - ref, size and home node, set by the putter before it hands the owner
 *    on (the hand-offs of handoff.h order them for every later reader, so
 *    they are read relaxed: rec_ref, rec_size, rec_node);
 *  - owners / pins: the owners and pins the program holds.  They are
 *    decremented BEFORE pp_release / pp_unpin and incremented before
 *    pp_retain / pp_pin, so the free function (which must run after the
 *    matching release or unpin) sees them at 0 -- otherwise the pool freed
 *    an entry that is still owned or pinned (rec_check_free_holders);
 *  - qsbr: the QSBR threads still using a pp_get pointer to the entry,
 *    decremented just before their pp_quiescent: 0 at the free too;
 *  - frees (free function calls) and free_tid (the thread of the last).
 * The memory orders of these counts are each program's (see there): the
 * program's own ordering must not hide a pool that fails to order.
 *
 * The records live in a table of chunks (rectab_t), made on first use or
 * all at once, read without locks; an id is handed out once per table (or
 * per reset, for a program that runs in rounds).
 */
#ifndef PP_STRESS_RECORDS_H
#define PP_STRESS_RECORDS_H

#include <pinpool.h>

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* rec.state */
enum {
    REC_UNUSED,        /* no put yet */
    REC_PUTTING,       /* in pp_put (the torture marks it) */
    REC_LIVE,          /* pp_put returned success */
    REC_PUT_FAILED     /* pp_put failed: the pool never had it */
};

#define REC_FIELDS                                                             \
    _Atomic uint64_t ref;                                                      \
    _Atomic uint32_t state;        /* REC_* */                                 \
    _Atomic uint32_t size;                                                     \
    _Atomic uint32_t node;         /* the ref's home node */                   \
    _Atomic int32_t owners;        /* owners the program holds */              \
    _Atomic int32_t pins;          /* pins the program holds */                \
    _Atomic int32_t qsbr;          /* QSBR threads still using a pp_get pointer */ \
    _Atomic uint32_t frees;        /* free function calls (blocks freed) */    \
    _Atomic int32_t free_tid;      /* thread that reclaimed it */

#define rec_ref(r)  ((pp_ref_t)atomic_load_explicit(&(r)->ref, memory_order_relaxed))
#define rec_node(r) ((unsigned)atomic_load_explicit(&(r)->node, memory_order_relaxed))
#define rec_size(r) ((size_t)atomic_load_explicit(&(r)->size, memory_order_relaxed))

/* At a free of entry k: o owners, p pins and q QSBR readers of the program
 * (read by the caller) must all be 0; each that is not fails the run, as a
 * pool thread.  qsbr_note ends the QSBR message (may be ""). */
void rec_check_free_holders(uint64_t k, pp_ref_t ref, int32_t o, int32_t p, int32_t q,
                            const char *qsbr_note);

#define REC_CHUNK_BITS 16
#define REC_CHUNK (1u << REC_CHUNK_BITS)

typedef struct rectab {
    _Atomic(unsigned char *) *chunks;   /* REC_CHUNK records each */
    size_t nchunks;
    size_t elem;                        /* sizeof the program's struct rec */
    uint64_t max;                       /* ids below this bound only */
    _Atomic uint64_t nids;              /* ids handed out */
} rectab_t;

/* A table of up to max records of elem bytes; all chunks made now if
 * eager (no chunk is published while threads run), else on first use.
 * Exits 2 if out of memory. */
void rectab_init(rectab_t *t, size_t elem, uint64_t max, int eager);

/* Record k, or NULL (k over the bound, or its chunk not made yet). */
static inline void *rectab_get(rectab_t *t, uint64_t k)
{
    if (k >= t->max)
        return NULL;
    unsigned char *c = atomic_load_explicit(&t->chunks[k >> REC_CHUNK_BITS],
                                            memory_order_acquire);
    return c ? c + (size_t)(k & (REC_CHUNK - 1)) * t->elem : NULL;
}

/* The next id in *k and its (zeroed) record; NULL if k is over the bound. */
void *rectab_new(rectab_t *t, uint64_t *k);

/* Ids handed out so far, at most the bound. */
static inline uint64_t rectab_used(rectab_t *t)
{
    uint64_t n = atomic_load(&t->nids);
    return n < t->max ? n : t->max;
}

/* Every record back to zero, no id handed out (no thread may use it). */
void rectab_reset(rectab_t *t);

void rectab_free(rectab_t *t);

#endif /* PP_STRESS_RECORDS_H */
