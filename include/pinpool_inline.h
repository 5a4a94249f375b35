#ifndef PINPOOL_INLINE_H
#define PINPOOL_INLINE_H

/*
 * pinpool_inline.h -- opt-in inline fast paths of pp_pin, pp_unpin,
 * pp_pin_many and pp_unpin_many (docs/api.md, section "Inline fast path").
 *
 * Include it after pinpool.h (it includes it) in the files whose pins
 * count.  pp_pin and pp_unpin then pin and unpin a resident entry in the
 * caller's own code: the ref's entry is found by address arithmetic, its
 * pins word is validated and changed by one compare-and-swap, and the
 * thread's pin count goes up by one.  A HOT entry's read pins (an entry
 * many threads pin at once) are the same, one compare-and-swap on the
 * thread's own shard of its counters, once the thread has pinned it
 * through the library.  Anything else -- a first call of the thread on the
 * pool, an entry that is swapped, being written out or dead, a stale ref,
 * contention, tracking (PP_TRACK_PINS), unknown flags -- goes to the
 * library, which starts over.  pp_pin_many and pp_unpin_many
 * do the same for batches of up to PP__INLINE_BATCH refs whose length is
 * a constant where they are called (read pins; an unpin batch without a
 * ref twice), any other length calling the library's copy of the code:
 * all records are found before the first compare-and-swap, so that
 * their cache misses overlap, and a batch the fast path cannot
 * finish is handed to the library with what it did (pins it took, to be
 * dropped uncounted; pins it dropped after the whole check), so that a
 * failed pp_pin_many still leaves no trace.  Every promise of pinpool.h
 * holds unchanged: the same errors, the same memory order, the same
 * statistics; the library's own fast paths are this code.
 *
 * The code below reads a part of the pool and of the thread's registration
 * whose layout is versioned: PP_INLINE_ABI.  pp_pool_create, under this
 * header, passes the version the caller was compiled with, and the library
 * refuses a pool to a caller whose header does not match (PP_ENOTSUP, with
 * a report line).  A pool made elsewhere is safe too: each call compares
 * the pool's version with its own and, if they differ, calls the library.
 *
 * Everything named pp__inline_* or PP__INLINE_* here is the layout or the
 * code, not API: use the calls above.  pp_inline_thread_last and the
 * functions pp_inline_*_slow are the library's side of it, exported for
 * the inlined code only.  C11 or C++11, GCC or Clang.
 */

#include <pinpool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The fast-path layout's version: changes with any change of the layout
 * below (the words read and their meaning). */
#define PP_INLINE_ABI 3u

/* The pins word of an entry: generation above bit 32, flags, pin count in
 * bits 0..18 (the library's src/core/entry.h draws it). */
#define PP__INLINE_PINS     ((uint64_t)0x7FFFF)
#define PP__INLINE_WPIN     ((uint64_t)1 << 19)
#define PP__INLINE_LIVE     ((uint64_t)1 << 20)
#define PP__INLINE_RESIDENT ((uint64_t)1 << 21)
#define PP__INLINE_DEAD     ((uint64_t)1 << 22)
#define PP__INLINE_DIRTY    ((uint64_t)1 << 25)
#define PP__INLINE_EVICTING ((uint64_t)1 << 27)
#define PP__INLINE_REF      ((uint64_t)1 << 29)
#define PP__INLINE_HOT      ((uint64_t)1 << 31)
#define PP__INLINE_GEN_SHIFT 32
/* A HOT entry's counter word (a shard of its hot slot): the promotion's tag
 * above bit 32, CLOSED, the count in bits 0..30. */
#define PP__INLINE_HOT_CLOSED ((uint64_t)1 << 31)
#define PP__INLINE_HOT_COUNT  (PP__INLINE_HOT_CLOSED - 1u)
/* A thread's counters for one node: 7 words, pins the second, unpins the
 * third. */
#define PP__INLINE_COUNT_WORDS 7u
#define PP__INLINE_COUNT_PINS 1u
#define PP__INLINE_COUNT_UNPINS 2u

/* An entry's hot record: what a pin reads and changes. */
typedef struct pp__inline_entry {
    uint64_t pw;                 /* pins word; atomic */
    void *data;
} pp__inline_entry_t;

/* The start of every pool.  Node n's bound and base are each an element
 * of an array, so that the node's index scales into one load of each. */
typedef struct pp__inline_pool {
    uint64_t serial;             /* the pool's instance, never reused */
    uint32_t abi;                /* the library's PP_INLINE_ABI */
    uint32_t full;               /* nonzero: every call goes to the library */
    uint32_t lim[PP_MAX_NODES];  /* node n's slots below lim[n] are committed; atomic */
    char *base[PP_MAX_NODES];    /* node n's table: slot s's entry at base[n] + 16 s */
} pp__inline_pool_t;

/* A thread's HOT cache: the last HOT entry it pinned or unpinned through
 * the library, that entry's pins word then (the promotion), and the
 * thread's shard counter of that promotion.  Written by the library, on
 * the owner thread only. */
typedef struct pp__inline_hot {
    const void *e;               /* the entry's hot record, or NULL */
    uint64_t pw;                 /* its pins word then: HOT and the slot */
    uint64_t *w;                 /* the counter word; atomic */
    uint32_t tag;                /* the promotion's tag, in the counter word */
    uint32_t cap;                /* pins a shard may hold */
} pp__inline_hot_t;

/* The start of a thread's registration with a pool. */
typedef struct pp__inline_thread {
    uint64_t serial;             /* the pool's */
    void *thread;                /* the library's record */
    uint64_t *count;             /* [node * PP__INLINE_COUNT_WORDS + ...]; single
                                    writer (this thread), atomic for readers */
    pp__inline_hot_t *hot;       /* the record's HOT cache */
} pp__inline_thread_t;

/* The calling thread's registration it used last, with any pool.  The
 * library's own code reads it as initial-exec, which already asks for
 * static TLS: callers may as well (a load at a fixed offset from the
 * thread pointer). */
extern __thread pp__inline_thread_t *pp_inline_thread_last
    __attribute__((tls_model("initial-exec"), visibility("default")));

/* What a fast path did: PP__INLINE_DONE, or nothing at all and the caller
 * must go the full way -- PP__INLINE_MISS (the state asks for it),
 * PP__INLINE_CONTENDED (the CAS lost to another thread's) or
 * PP__INLINE_HOT_ENTRY (the entry is HOT: its pins are the library's). */
#define PP__INLINE_DONE 0
#define PP__INLINE_MISS 1
#define PP__INLINE_CONTENDED 2
#define PP__INLINE_HOT_ENTRY 3

/* A hook of the library's test builds: whether its yield points are on,
 * where the fast path steps aside for the paths that have them. */
#ifndef PP__INLINE_YIELD_ON
#define PP__INLINE_YIELD_ON(what) 0
#endif
/* Another: a yield point there, where the fast path keeps its place. */
#ifndef PP__INLINE_YIELD
#define PP__INLINE_YIELD(what) ((void)0)
#endif
/* Another: a test point there (what the library's own fast paths reach). */
#ifndef PP__INLINE_POINT
#define PP__INLINE_POINT(where, arg) ((void)0)
#endif

/* The calling thread's registration with pool, if the fast paths may run
 * there (the library's layout, no tracking, the pool the thread used
 * last); NULL: the full way. */
static inline pp__inline_thread_t *pp__inline_ready(pp_pool_t *pool)
{
    const pp__inline_pool_t *f = (const pp__inline_pool_t *)(const void *)pool;
    pp__inline_thread_t *t = pp_inline_thread_last;
    if (__builtin_expect(pool == NULL || f->abi != PP_INLINE_ABI || f->full != 0 || t == NULL ||
                             t->serial != f->serial,
                         0))
        return NULL;
    return t;
}

/* Where ref's record is in pool's table, whether its slot is committed
 * or not: an address to prefetch, to read only once pp__inline_entry has
 * checked it.  An integer, as the ref's node may have no table. */
static inline uintptr_t pp__inline_entry_addr(const pp__inline_pool_t *f, pp_ref_t ref)
{
    /* pp_ref_node: < PP_MAX_NODES, 6 bits. */
    return (uintptr_t)f->base[pp_ref_node(ref)] +
           (uintptr_t)pp_ref_slot(ref) * sizeof(pp__inline_entry_t);
}

/* Whether ref's slot in pool is committed, and in *e where its record is
 * (to read only if it is).  A flag, not a NULL entry, so that the caller
 * branches on the bound's test alone. */
static inline int pp__inline_entry(pp_pool_t *pool, pp_ref_t ref, pp__inline_entry_t **e)
{
    const pp__inline_pool_t *f = (const pp__inline_pool_t *)(const void *)pool;
    *e = (pp__inline_entry_t *)pp__inline_entry_addr(f, ref);
    /* acquire: pairs with the release that publishes a segment's commit,
     * so the zeroed segment is seen before any word in it. */
    return __builtin_expect(pp_ref_slot(ref) <
                                __atomic_load_n(&f->lim[pp_ref_node(ref)], __ATOMIC_ACQUIRE),
                            1);
}

/* Whether the fast paths may run for ref: in *t the thread's registration
 * with pool (NULL: it may not), and in *e the entry ref names (read it only
 * if the call returned true). */
static inline int pp__inline_find(pp_pool_t *pool, pp_ref_t ref, pp__inline_thread_t **t,
                                  pp__inline_entry_t **e)
{
    *e = NULL;   /* never read then; GCC cannot tell (no code: the store is dead) */
    *t = pp__inline_ready(pool);
    return *t != NULL && pp__inline_entry(pool, ref, e);
}

/* The thread's counter which (PP__INLINE_COUNT_PINS, ...) of ref's node.
 * Node 0's is reached by a branch, not by an index: an address indexed by
 * the ref's node made the counts cost up to 23 ns per pin+unpin in a loop
 * whose refs miss the cache, a few ns through the branch (docs/design.md,
 * "Counters").
 * The branch is never taken on a one-node machine; another node's refs
 * pay for it only where the nodes alternate. */
static inline uint64_t *pp__inline_counter(pp__inline_thread_t *t, pp_ref_t ref, unsigned which)
{
    uint64_t *c = &t->count[which];
    unsigned node = pp_ref_node(ref);
    if (__builtin_expect(node != 0, 0))
        c += (size_t)node * PP__INLINE_COUNT_WORDS;
    return c;
}

/* The thread's own counter: a relaxed load and store, no read-modify-write. */
static inline void pp__inline_count(pp__inline_thread_t *t, pp_ref_t ref, unsigned which)
{
    uint64_t *c = pp__inline_counter(t, ref, which);
    __atomic_store_n(c, __atomic_load_n(c, __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
}

/* One pin (inc 1) or unpin (inc -1) of a HOT entry e, whose pins word is
 * pw, on the calling thread's shard of its promotion -- if h, the thread's
 * HOT cache, holds that promotion (the same record, the very same word) and
 * the shard counts for it, open, with room for a pin or a pin to drop.
 * One compare-and-swap; false: nothing done, the library's way (hot.c).
 * A HOT word is live, resident and not dead: no other check is needed. */
static inline int pp__inline_hot_step(pp__inline_hot_t *h, const pp__inline_entry_t *e,
                                      uint64_t pw, int inc)
{
    if (__builtin_expect(h->e != (const void *)e || h->pw != pw, 0))
        return 0;
    uint64_t w = __atomic_load_n(h->w, __ATOMIC_RELAXED);
    while ((uint32_t)(w >> 32) == h->tag && !(w & PP__INLINE_HOT_CLOSED) &&
           (inc > 0 ? (w & PP__INLINE_HOT_COUNT) < h->cap : (w & PP__INLINE_HOT_COUNT) != 0)) {
        PP__INLINE_YIELD(PIN);
        /* acq_rel: a pin acquires, as a cold pin does (pairs with the
         * release of the data's last writer, through the promotion); an
         * unpin releases, for the demotion whose close of this counter
         * acquires it. */
        if (__atomic_compare_exchange_n(h->w, &w, w + (uint64_t)(int64_t)inc, 1,
                                        __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
            return 1;
    }
    return 0;
}

/* A pin (inc 1) or unpin (inc -1) that the fast path did not find plain,
 * pw the word it read, not yet counted: a HOT entry's, on the thread's
 * shard, if the ref is of the entry's generation and the thread's HOT
 * cache holds its promotion (pp__inline_hot_step), else
 * PP__INLINE_HOT_ENTRY; anything else PP__INLINE_MISS.  Apart, so that
 * the plain pin's and unpin's code runs straight through. */
static inline int pp__inline_hot(pp__inline_thread_t *t, pp__inline_entry_t *e, uint64_t pw,
                                 pp_ref_t ref, int inc)
{
    if (!(pw & PP__INLINE_HOT))
        return PP__INLINE_MISS;
    if ((uint32_t)(pw >> PP__INLINE_GEN_SHIFT) != pp_ref_gen(ref) ||
        !pp__inline_hot_step(t->hot, e, pw, inc))
        return PP__INLINE_HOT_ENTRY;
    return PP__INLINE_DONE;
}

/* The pin of a live, resident entry, not dead, e as pp__inline_find found
 * it, not yet counted; flags: PP_PIN_WRITE, PP_PIN_NOWAIT.  A cold entry's
 * pin is on its word; a HOT entry's read pin on the thread's shard
 * (pp__inline_hot). */
static inline int pp__inline_pin_word(pp__inline_thread_t *t, pp__inline_entry_t *e,
                                      pp_ref_t ref, unsigned flags, void **data)
{
    if (__builtin_expect((flags & ~(unsigned)(PP_PIN_WRITE | PP_PIN_NOWAIT)) != 0, 0))
        return PP__INLINE_MISS;
    uint64_t pw = __atomic_load_n(&e->pw, __ATOMIC_RELAXED);
    /* A write pin must not write while the swap thread reads the bytes. */
    uint64_t slow = (flags & PP_PIN_WRITE) ? PP__INLINE_EVICTING : 0;
    /* ref's generation, live and resident, neither dead nor HOT (nor
     * evicting, for a write pin): one test of the bits that differ. */
    uint64_t want = ((uint64_t)pp_ref_gen(ref) << PP__INLINE_GEN_SHIFT) | PP__INLINE_LIVE |
                    PP__INLINE_RESIDENT;
    uint64_t care = (~(uint64_t)0 << PP__INLINE_GEN_SHIFT) | PP__INLINE_LIVE | PP__INLINE_DEAD |
                    PP__INLINE_RESIDENT | PP__INLINE_HOT | slow;
    if (__builtin_expect(((pw ^ want) & care) != 0 || ((pw + 1u) & PP__INLINE_PINS) == 0 ||
                             PP__INLINE_YIELD_ON(PIN),
                         0)) {
        /* A write pin demotes a HOT entry first: the library's. */
        int why = (flags & PP_PIN_WRITE) && (pw & PP__INLINE_HOT)
                      ? PP__INLINE_HOT_ENTRY
                      : pp__inline_hot(t, e, pw, ref, 1);
        if (why == PP__INLINE_DONE && data != NULL)
            *data = e->data;   /* stable: HOT entries are resident and pinned */
        return why;
    }
    uint64_t bits = (flags & PP_PIN_WRITE) ? PP__INLINE_DIRTY | PP__INLINE_WPIN : 0;
    /* acquire: pairs with the release of whoever last wrote the data -- the
     * putter, a load's commit, a write pinner's unpin -- so this pinner's
     * reads see it.  One try: contention goes the full way, which counts it. */
    if (__builtin_expect(!__atomic_compare_exchange_n(&e->pw, &pw, (pw + 1u) | bits | PP__INLINE_REF,
                                                      0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED),
                         0))
        return PP__INLINE_CONTENDED;
    if (data != NULL)
        *data = e->data;   /* stable: the pin keeps the entry resident and unmoved */
    return PP__INLINE_DONE;
}

/* pp__inline_pin_word, counted: the pin of a thread registered with the
 * pool, e and t as pp__inline_find found them. */
static inline int pp__inline_pin_at(pp__inline_entry_t *e, pp__inline_thread_t *t, pp_ref_t ref,
                                    unsigned flags, void **data)
{
    int why = pp__inline_pin_word(t, e, ref, flags, data);
    if (__builtin_expect(why == PP__INLINE_DONE, 1))
        pp__inline_count(t, ref, PP__INLINE_COUNT_PINS);
    return why;
}

/* The pin of ref by the calling thread, whatever the pool. */
static inline int pp__inline_pin(pp_pool_t *pool, pp_ref_t ref, unsigned flags, void **data)
{
    pp__inline_thread_t *t;
    pp__inline_entry_t *e;
    if (__builtin_expect(!pp__inline_find(pool, ref, &t, &e), 0))
        return PP__INLINE_MISS;
    return pp__inline_pin_at(e, t, ref, flags, data);
}

/* Whether pins word pw lets ref's unpin be the fast one: a live cold
 * entry of ref's generation, not dead, that holds a pin. */
static inline int pp__inline_unpin_ok(uint64_t pw, pp_ref_t ref)
{
    /* ref's generation, live, neither dead nor HOT: one test, as a pin's. */
    uint64_t want = ((uint64_t)pp_ref_gen(ref) << PP__INLINE_GEN_SHIFT) | PP__INLINE_LIVE;
    uint64_t care = (~(uint64_t)0 << PP__INLINE_GEN_SHIFT) | PP__INLINE_LIVE | PP__INLINE_DEAD |
                    PP__INLINE_HOT;
    return __builtin_expect(((pw ^ want) & care) == 0 && (pw & PP__INLINE_PINS) != 0 &&
                                !PP__INLINE_YIELD_ON(UNPIN),
                            1);
}

/* pp__inline_unpin_many's second loop drops the pins whose words its
 * first loop read: GCC, once the loops are unrolled, cannot see that and
 * warns that the words and records may be unset (zeroing them to quiet it
 * costs the library's copy a string store on every call). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
/* Drops one pin of e, whose pins word was pw (pp__inline_unpin_ok), by
 * one compare-and-swap; false if the word changed meanwhile. */
static inline int pp__inline_unpin_cas(pp__inline_entry_t *e, uint64_t pw)
{
    /* The last pin takes WPIN with it. */
    uint64_t next = pw - 1u;
    if ((next & PP__INLINE_PINS) == 0)
        next &= ~PP__INLINE_WPIN;
    /* acq_rel: release orders this holder's reads and writes of the data
     * before whatever the unpin lets happen next (a write-out, a free, the
     * next pinner's reads); acquire pairs with the other pinners' releases,
     * for the swap thread that may act on this word. */
    return __builtin_expect(__atomic_compare_exchange_n(&e->pw, &pw, next, 0, __ATOMIC_ACQ_REL,
                                                        __ATOMIC_RELAXED),
                            1);
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

/* The unpin of a live cold entry, not dead, that holds a pin, or of a HOT
 * one whose promotion the thread's HOT cache holds and whose shard holds a
 * pin; e and t as pp__inline_find found them.  PP__INLINE_HOT_ENTRY as for
 * a pin. */
static inline int pp__inline_unpin_at(pp__inline_entry_t *e, pp__inline_thread_t *t, pp_ref_t ref)
{
    uint64_t pw = __atomic_load_n(&e->pw, __ATOMIC_RELAXED);
    if (!pp__inline_unpin_ok(pw, ref)) {
        int why = pp__inline_hot(t, e, pw, ref, -1);
        if (why == PP__INLINE_DONE)
            pp__inline_count(t, ref, PP__INLINE_COUNT_UNPINS);
        return why;
    }
    if (!pp__inline_unpin_cas(e, pw))
        return PP__INLINE_CONTENDED;
    pp__inline_count(t, ref, PP__INLINE_COUNT_UNPINS);
    return PP__INLINE_DONE;
}

/* The unpin of ref by the calling thread, whatever the pool. */
static inline int pp__inline_unpin(pp_pool_t *pool, pp_ref_t ref)
{
    pp__inline_thread_t *t;
    pp__inline_entry_t *e;
    if (__builtin_expect(!pp__inline_find(pool, ref, &t, &e), 0))
        return PP__INLINE_MISS;
    return pp__inline_unpin_at(e, t, ref);
}

/* The longest batch the fast paths of pp_pin_many and pp_unpin_many take
 * (a task's inputs); a longer one goes to the library. */
#define PP__INLINE_BATCH 16u

/* The batch loops are unrolled, so that the records and words of a batch
 * stay in registers: in the library's copy (any length up to
 * PP__INLINE_BATCH), and in a caller's where the length is a constant (a
 * task's 4 inputs); a caller's batch of another length calls the library
 * (pp__inline_pin_many_call).  A store between two compare-and-swaps makes
 * the second wait until it is written, so the loops that swap store
 * nothing. */
#if defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 8)
#define PP__INLINE_UNROLL _Pragma("GCC unroll 16")
#else
#define PP__INLINE_UNROLL
#endif

/* The batch fast paths' prologue: the calling thread's registration with
 * pool (pp__inline_ready) and in e the records of refs[0..n); in *nodes,
 * zero if every ref is of refs[0]'s node (pp__inline_count_batch).  NULL:
 * the full way (a batch too long, no refs, a ref that names no committed
 * slot). */
static inline pp__inline_thread_t *pp__inline_batch_find(pp_pool_t *pool, const pp_ref_t *refs,
                                                         size_t n, pp__inline_entry_t **e,
                                                         uint64_t *nodes)
{
    pp__inline_thread_t *t = pp__inline_ready(pool);
    uint64_t differ = 0;
    size_t i;
    if (__builtin_expect(t == NULL || n > PP__INLINE_BATCH || (refs == NULL && n != 0), 0))
        return NULL;
    PP__INLINE_UNROLL
    for (i = 0; i < n; i++) {
        if (__builtin_expect(!pp__inline_entry(pool, refs[i], &e[i]), 0))
            return NULL;
        differ |= refs[i] ^ refs[0];
    }
    *nodes = differ >> 58;   /* the node bits of pp_ref_t */
    return t;
}

/* Counts k pins or unpins (which) of refs[0..k): one store if all are of
 * one node (nodes as pp__inline_batch_find gave it), else one each. */
static inline void pp__inline_count_batch(pp__inline_thread_t *t, const pp_ref_t *refs, size_t k,
                                          uint64_t nodes, unsigned which)
{
    size_t i;
    if (__builtin_expect(nodes == 0 && k != 0, 1)) {
        uint64_t *c = pp__inline_counter(t, refs[0], which);
        __atomic_store_n(c, __atomic_load_n(c, __ATOMIC_RELAXED) + k, __ATOMIC_RELAXED);
        return;
    }
    for (i = 0; i < k; i++)
        pp__inline_count(t, refs[i], which);
}

/* pp_pin_many's fast path: pins refs[0..n), all resident cold entries, for
 * a registered thread; flags 0 or PP_PIN_NOWAIT (a write pin marks its
 * entries dirty only once all are pinned: the library's).  Every record is
 * prefetched before anything is checked, so that their misses overlap
 * each other and whatever the caller did last; the data pointers are
 * written, and the data prefetched, once all are pinned.
 * PP__INLINE_DONE: all pinned and counted.  Otherwise
 * the first *done refs are pinned, not counted, and the call is not over:
 * pp_inline_pin_many_slow drops those pins and starts over. */
static inline int pp__inline_pin_many(pp_pool_t *pool, const pp_ref_t *refs, size_t n,
                                      unsigned flags, void **data, size_t *done)
{
    const pp__inline_pool_t *f = (const pp__inline_pool_t *)(const void *)pool;
    pp__inline_entry_t *e[PP__INLINE_BATCH];
    pp__inline_thread_t *t;
    uint64_t nodes;
    size_t i;
    *done = 0;
    /* A hint, never a fault: the record of a ref not yet checked. */
    if (__builtin_expect(pool != NULL && refs != NULL && n <= PP__INLINE_BATCH, 1)) {
        PP__INLINE_UNROLL
        for (i = 0; i < n; i++)
            __builtin_prefetch((const void *)pp__inline_entry_addr(f, refs[i]), 1, 3);
    }
    if (__builtin_expect((flags & ~(unsigned)PP_PIN_NOWAIT) != 0, 0) ||
        (t = pp__inline_batch_find(pool, refs, n, e, &nodes)) == NULL)
        return PP__INLINE_MISS;
    PP__INLINE_UNROLL
    for (i = 0; i < n; i++) {
        int why = pp__inline_pin_word(t, e[i], refs[i], flags, NULL);
        if (__builtin_expect(why != PP__INLINE_DONE, 0)) {
            *done = i;
            return why;
        }
    }
    if (data != NULL) {
        PP__INLINE_UNROLL
        for (i = 0; i < n; i++) {
            data[i] = e[i]->data;   /* stable: pinned (pp__inline_pin_word) */
            /* The caller is about to read the data: a hint, never a fault. */
            __builtin_prefetch(data[i], 0, 3);
        }
    }
    pp__inline_count_batch(t, refs, n, nodes, PP__INLINE_COUNT_PINS);
    return PP__INLINE_DONE;
}

/* pp_unpin_many's fast path: refs[0..n), distinct, each naming a live cold
 * entry, not dead, that holds a pin, for a registered thread.  All are
 * checked before the first pin is dropped.  PP__INLINE_DONE: all dropped
 * and counted.  PP__INLINE_MISS: nothing done, the library does the whole
 * call.  PP__INLINE_CONTENDED: all passed the check and the first *done
 * are dropped and counted, but the next one's word changed since: the
 * library drops the others, one by one, as pp_unpin_many does after its
 * check. */
static inline int pp__inline_unpin_many(pp_pool_t *pool, const pp_ref_t *refs, size_t n,
                                        size_t *done)
{
    pp__inline_entry_t *e[PP__INLINE_BATCH];
    uint64_t pw[PP__INLINE_BATCH];
    uint64_t nodes;
    pp__inline_thread_t *t = pp__inline_batch_find(pool, refs, n, e, &nodes);
    size_t i, j;
    *done = 0;
    if (t == NULL)
        return PP__INLINE_MISS;
    PP__INLINE_UNROLL
    for (i = 0; i < n; i++) {
        pw[i] = __atomic_load_n(&e[i]->pw, __ATOMIC_RELAXED);
        if (!pp__inline_unpin_ok(pw[i], refs[i]))
            return PP__INLINE_MISS;
        PP__INLINE_UNROLL
        for (j = 0; j < i; j++)
            if (__builtin_expect(refs[j] == refs[i], 0))
                return PP__INLINE_MISS;   /* each must hold as many pins as it appears */
    }
    PP__INLINE_POINT(UNPIN_MANY_CHECKED, (void *)(uintptr_t)refs);
    PP__INLINE_UNROLL
    for (i = 0; i < n; i++) {
        if (__builtin_expect(!pp__inline_unpin_cas(e[i], pw[i]), 0)) {
            pp__inline_count_batch(t, refs, i, nodes, PP__INLINE_COUNT_UNPINS);
            *done = i;
            return PP__INLINE_CONTENDED;
        }
    }
    pp__inline_count_batch(t, refs, n, nodes, PP__INLINE_COUNT_UNPINS);
    *done = n;
    return PP__INLINE_DONE;
}

/* pp_pool_create, for a caller compiled with layout version abi (the
 * macro below passes PP_INLINE_ABI): PP_ENOTSUP and a report line (the
 * options' report hook, else stderr) if the library's differs. */
PP_API int pp_pool_create_inline(const pp_options_t *opt, pp_pool_t **out, unsigned abi);

/* What pp_pin_loc and pp_unpin do after their fast path, for an inlined
 * call whose fast path did not finish (why: what it returned). */
PP_API int pp_inline_pin_slow(pp_pool_t *pool, pp_ref_t ref, unsigned flags, void **data,
                              const char *file, int line, int why);
PP_API int pp_inline_unpin_slow(pp_pool_t *pool, pp_ref_t ref);
/* What pp_pin_many_loc and pp_unpin_many do after their fast paths: for a
 * pin, drops the first done pins (uncounted) and starts over; for an
 * unpin, after PP__INLINE_CONTENDED drops refs[done..n) as pp_unpin_many
 * does after its check, else does the whole call (why: what the fast path
 * returned). */
PP_API int pp_inline_pin_many_slow(pp_pool_t *pool, const pp_ref_t *refs, size_t n,
                                   unsigned flags, void **data, const char *file, int line,
                                   size_t done);
PP_API int pp_inline_unpin_many_slow(pp_pool_t *pool, const pp_ref_t *refs, size_t n,
                                     size_t *done, size_t dropped, int why);

/* pp_pin and pp_unpin: the fast path, else the library's rest (the
 * library's own functions are these too).  The data pointer goes through
 * locals of its own, written to *data on success only (as the library
 * does): the caller's variable, whose address no call then takes, may stay
 * in a register, and no store of it comes between the pin's
 * compare-and-swap and whatever the caller does next (docs/design.md,
 * "Counters"). */
static inline int pp__inline_pin_call(pp_pool_t *pool, pp_ref_t ref, unsigned flags,
                                      void **data, const char *file, int line)
{
    void *d, *slow;
    int why = pp__inline_pin(pool, ref, flags, &d);
    if (__builtin_expect(why == PP__INLINE_DONE, 1)) {
        if (data != NULL)
            *data = d;
        return 0;
    }
    int rc = pp_inline_pin_slow(pool, ref, flags, data != NULL ? &slow : NULL, file, line, why);
    if (rc == 0 && data != NULL)
        *data = slow;
    return rc;
}

static inline int pp__inline_unpin_call(pp_pool_t *pool, pp_ref_t ref)
{
    if (__builtin_expect(pp__inline_unpin(pool, ref) == PP__INLINE_DONE, 1))
        return 0;
    return pp_inline_unpin_slow(pool, ref);
}

/* pp_pin_many and pp_unpin_many: the fast path, else the library's rest
 * (the library's own functions are these too); in a caller, a batch whose
 * length is not a constant goes to the library's copy at once. */
static inline int pp__inline_pin_many_call(pp_pool_t *pool, const pp_ref_t *refs, size_t n,
                                           unsigned flags, void **data, const char *file,
                                           int line)
{
    size_t done;
#ifndef PP__INLINE_LIBRARY
    if (!__builtin_constant_p(n))
        return pp_pin_many_loc(pool, refs, n, flags, data, file, line);
#endif
    if (__builtin_expect(pp__inline_pin_many(pool, refs, n, flags, data, &done) == PP__INLINE_DONE,
                         1))
        return 0;
    return pp_inline_pin_many_slow(pool, refs, n, flags, data, file, line, done);
}

static inline int pp__inline_unpin_many_call(pp_pool_t *pool, const pp_ref_t *refs, size_t n,
                                             size_t *done)
{
    size_t dropped;
#ifndef PP__INLINE_LIBRARY
    if (!__builtin_constant_p(n))
        return (pp_unpin_many)(pool, refs, n, done);
#endif
    int why = pp__inline_unpin_many(pool, refs, n, &dropped);
    if (__builtin_expect(why == PP__INLINE_DONE, 1)) {
        if (done != NULL)
            *done = n;
        return 0;
    }
    return pp_inline_unpin_many_slow(pool, refs, n, done, dropped, why);
}

#ifndef PP__INLINE_LIBRARY

#undef pp_pin
#undef pp_unpin
#undef pp_pin_many
#undef pp_unpin_many
#undef pp_pool_create
#ifndef PP_NO_CALLSITE
#define pp_pin(pool, ref, flags, data) \
    pp__inline_pin_call((pool), (ref), (flags), (data), __FILE__, __LINE__)
#define pp_pin_many(pool, refs, n, flags, data) \
    pp__inline_pin_many_call((pool), (refs), (n), (flags), (data), __FILE__, __LINE__)
#else
#define pp_pin(pool, ref, flags, data) \
    pp__inline_pin_call((pool), (ref), (flags), (data), NULL, 0)
#define pp_pin_many(pool, refs, n, flags, data) \
    pp__inline_pin_many_call((pool), (refs), (n), (flags), (data), NULL, 0)
#endif
#define pp_unpin(pool, ref) pp__inline_unpin_call((pool), (ref))
#define pp_unpin_many(pool, refs, n, done) pp__inline_unpin_many_call((pool), (refs), (n), (done))
#define pp_pool_create(opt, out) pp_pool_create_inline((opt), (out), PP_INLINE_ABI)

#endif /* !PP__INLINE_LIBRARY */

#ifdef __cplusplus
}
#endif

#endif /* PINPOOL_INLINE_H */
