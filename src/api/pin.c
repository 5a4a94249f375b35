/*
 * pin.c -- the hot path: pin, unpin, their batched forms, escaped access and
 * prefetch.  Transitions are drawn in entry.h.
 *
 * A pin or unpin is: decode the ref, two dependent loads to find the entry
 * (table.c), one compare-and-swap on its pins word that validates the
 * generation and changes the count together, and one single-writer counter
 * increment in the thread's record.  No lock, no system call, no
 * allocation, no epoch section (tests/test_pin.c shows the first two).
 */
#include "api/api.h"

#define PP__PIN_FLAGS (PP_PIN_WRITE | PP_PIN_NOWAIT)

static inline int unpin_any(pp_pool_t *pool, pp__entry_t *e, pp_ref_t ref,
                            pp__thread_t *t, bool count);

/* A pin whose CAS failed pool->hot_after times: the entry is contended,
 * try to make it HOT (hot.c). */
static PP__COLD void pin_contended(pp_pool_t *pool, pp__entry_t *e, pp_ref_t ref)
{
    pp__hot_promote(pool, pp_ref_node(ref), e, pp_ref_gen(ref));
}

/* The pin on the word; returns 0, an error, PP__SLOW (the caller takes
 * pp__pin_slow) or PP__HOT (the caller takes pin_when_hot), nothing
 * done unless 0; *data set on success. */
static inline int pin_on_word(pp_pool_t *pool, pp__entry_t *e, pp_ref_t ref,
                              unsigned flags, void **data, unsigned fails)
{
    uint32_t gen = pp_ref_gen(ref);
    uint64_t bits = pp__pin_bits(flags);
    /* A write pin must not write while the swap thread reads the bytes. */
    uint64_t slow = (flags & PP_PIN_WRITE) ? PP__F_EVICTING : 0;
    /* The fast path's failed CAS counts (pp_pin_loc). */
    if (PP__UNLIKELY(fails != 0 && fails >= pool->hot_after && pool->hot_after != 0))
        pin_contended(pool, e, ref);
    uint64_t pw = pp__atomic_load_relaxed(&e->pw);
    do {
        if (PP__UNLIKELY(!pp__pw_alive(pw, gen)))
            return PP_ESTALE;
        if (PP__UNLIKELY(pw & PP__F_HOT))
            return PP__HOT;
        if (PP__UNLIKELY(!(pw & PP__F_RESIDENT) || (pw & slow)))
            return PP__SLOW;
        if (PP__UNLIKELY(pp__pw_pins(pw) == PP_MAX_PINS))
            return PP_EOVERFLOW;
        PP__YIELD(PIN);
        if (pp__pw_try_pin(e, &pw, bits))
            break;
        if (PP__UNLIKELY(++fails == pool->hot_after)) {
            pin_contended(pool, e, ref);
            pw = pp__atomic_load_relaxed(&e->pw);
        }
    } while (true);
    if (data != NULL)
        *data = e->data;   /* stable: the pin keeps the entry resident and unmoved */
    return 0;
}

/* The pin of an entry that pin_on_word found HOT: one CAS on the
 * thread's cached shard, else pp__hot_pin (on the word if it is no longer
 * HOT).  Out of line, so the cold paths keep few registers. */
static PP__NOINLINE int pin_when_hot(pp_pool_t *pool, pp__entry_t *e, pp_ref_t ref,
                                     unsigned flags, unsigned hflags, pp__thread_t *t,
                                     void **data)
{
    /* The cached shard serves the ref's own entry only: a stale ref goes
     * to pp__hot_pin, which refuses it. */
    uint64_t pw = pp__atomic_load_relaxed(&e->pw);
    if (!(hflags & PP_PIN_WRITE) && pp__word_gen(pw) == pp_ref_gen(ref) &&
        pp__hot_cached(t, e, pw, 1)) {
        if (data != NULL)
            *data = e->data;
        return 0;
    }
    int rc = PP__HOT;
    while (rc == PP__HOT) {
        rc = pp__hot_pin(pool, pp_ref_node(ref), e, pp_ref_gen(ref), hflags, t, data);
        if (rc == PP__RETRY)
            rc = pin_on_word(pool, e, ref, flags, data, 0);
    }
    return rc;
}

/* A pin on the word or, for a HOT entry, on its hot counters.  hflags are
 * the flags the hot path sees: with PP_PIN_WRITE it demotes the entry, and
 * the pin is taken on the word (pp_pin_many pins without PP_PIN_WRITE on
 * the word, but must not pin a written entry hot). */
static inline int pin_any(pp_pool_t *pool, pp__entry_t *e, pp_ref_t ref,
                          unsigned flags, unsigned hflags, pp__thread_t *t,
                          void **data, unsigned fails)
{
    int rc = pin_on_word(pool, e, ref, flags, data, fails);
    if (PP__UNLIKELY(rc == PP__HOT))
        rc = pin_when_hot(pool, e, ref, flags, hflags, t, data);
    return rc;
}

/* The slow path of a pin, get or pin_many (see internal.h): waits for a
 * load in flight, or loads the entry itself (load.c), or pins an entry that
 * became resident; a write pin waits for an eviction's write-out. */
static int pin_slow(pp_pool_t *pool, pp__entry_t *e, pp_ref_t ref, unsigned flags, bool pin,
                    void **data, uint64_t *waited_at)
{
    unsigned n = pp_ref_node(ref);
    pp__node_t *node = pool->nodes[n];
    uint32_t gen = pp_ref_gen(ref);
    pp__thread_t *t = pp__thread_get(pool);
    bool waited = false;
    if (t == NULL)
        return PP_ENOMEM;
    if (pp__in_callback())
        flags |= PP_PIN_NOWAIT;          /* docs/api.md, "Callbacks" */
    for (;;) {
        uint32_t seen = ck_ec32_value(&node->sw.io_done);
        /* acquire: pairs with the load commit's release (data pointer). */
        uint64_t pw = pp__atomic_load_acquire(&e->pw);
        if (!pp__pw_alive(pw, gen))
            return PP_ESTALE;
        if (pw & PP__F_RESIDENT) {
            if (!pin)
                return 0;                /* resident now: the caller goes on */
            if (pw & PP__F_HOT) {
                int rc = pp__hot_pin(pool, n, e, gen, flags, t, data);
                if (rc != PP__RETRY)
                    return rc;
                continue;
            }
            if (pp__pw_pins(pw) == PP_MAX_PINS)
                return PP_EOVERFLOW;
            if ((flags & PP_PIN_NOWAIT) && (flags & PP_PIN_WRITE) && (pw & PP__F_EVICTING))
                return PP_EAGAIN;        /* it would wait for the write-out */
            PP__YIELD(PIN);
            if (!pp__pw_try_pin(e, &pw, pp__pin_bits(flags)))
                continue;
            /* pw: the word pinned, whose EVICTING the pin kept. */
            if ((flags & PP_PIN_WRITE) && (pw & PP__F_EVICTING))
                pp__ioend_wait_evict(pool, n, e);
            if (data != NULL)
                *data = e->data;
            return 0;
        }
        if (pw & PP__F_LOADING) {
            if (flags & PP_PIN_NOWAIT)
                return PP_EAGAIN;
            if (!waited) {
                pp__atomic_add_relaxed(&node->sw.load_waits, 1);
                *waited_at = pp__tevent_start(pool);
                waited = true;
            }
            ck_ec32_wait(&node->sw.io_done, &pp__wait_ec_mode, seen, NULL);
            continue;
        }
        if (flags & PP_PIN_NOWAIT) {
            int rc = pp__load_start(pool, e, ref);
            return rc != 0 ? rc : PP_EAGAIN;
        }
        if (!pp__pw_claim_load(e, &pw))
            continue;
        PP__YIELD(LOAD);
        int rc = pin ? pp__load_pin(pool, n, e, flags, t, data)
                     : pp__load_only(pool, n, e, NULL, t);
        if (rc != 0 || pin)
            return rc;
        /* Loaded for a get: go round to see it resident (it may already
         * have been evicted again, then we load again). */
    }
}

int pp__pin_slow(pp_pool_t *pool, pp__entry_t *e, pp_ref_t ref, unsigned flags, bool pin,
                 void **data)
{
    uint64_t waited_at = 0;
    int rc = pin_slow(pool, e, ref, flags, pin, data, &waited_at);
    if (waited_at != 0)                  /* a wait for another's load, traced */
        pp__tevent_span(pool, pp__thread_get(pool), PP__TEV_LOAD_WAIT, waited_at, ref, 0,
                        pp_ref_node(ref), 0, rc);
    return rc;
}

/* Every pin that the fast path below does not finish: the full checks,
 * tracking, the first call of a thread, loads.  The fast path has had no
 * effect when it comes here; fails: its CASes that failed (contention). */
static PP__COLD int pin_full(pp_pool_t *pool, pp_ref_t ref, unsigned flags,
                                 void **data, const char *file, int line,
                                 unsigned fails)
{
    if (PP__UNLIKELY((flags & ~PP__PIN_FLAGS) != 0))
        return PP_EINVAL;
    pp__entry_t *e;
    pp__thread_t *t;
    int rc = pp__begin(pool, ref, &e, &t);
    if (PP__UNLIKELY(rc != 0))
        return rc;
    /* Tracking (debug mode) may fail to allocate: its record is made before
     * the pin, so that failure leaves no trace.  Undoing a pin taken first
     * would leave DIRTY (a write pin) and any load it made. */
    if (PP__UNLIKELY(pool->fast.full) && pp__track_pin(pool, t, ref, file, line) != 0)
        return PP_ENOMEM;
    rc = pin_any(pool, e, ref, flags, flags, t, data, fails);
    if (PP__UNLIKELY(rc == PP__SLOW))
        rc = pp__pin_slow(pool, e, ref, flags, true, data);
    if (PP__UNLIKELY(rc != 0)) {
        if (PP__UNLIKELY(pool->fast.full))
            pp__track_unpin(pool, t, ref);   /* a record of this thread for ref */
        return rc;
    }
    pp__counter_add(&t->count[pp_ref_node(ref)].pins, 1);
    return 0;
}

/* The fast paths' prologue (pp__inline_find): the entry a ref names and
 * the calling thread's record, if the pool does not track pins and the
 * thread is the one it saw last; false: take the full way.  The caller
 * still checks the ref's generation against the entry's word. */
static inline bool fast_begin(pp_pool_t *pool, pp_ref_t ref, pp__entry_t **e,
                              pp__thread_t **t)
{
    pp__inline_thread_t *ft;
    pp__inline_entry_t *fe;
    if (PP__UNLIKELY(!pp__inline_find(pool, ref, &ft, &fe)))
        return false;
    *e = (pp__entry_t *)(void *)fe;
    *t = (pp__thread_t *)ft->thread;
    return true;
}

/* Whatever the fast path did not do (why: PP__INLINE_MISS, _HOT_ENTRY or
 * _CONTENDED; it changed nothing): the full way.  A failed CAS
 * (contention) is counted there: it may make the entry HOT.  Inlined pins
 * call it too. */
PP__NOINLINE int pp_inline_pin_slow(pp_pool_t *pool, pp_ref_t ref, unsigned flags,
                                    void **data, const char *file, int line, int why)
{
    PP__TEST_POINT(FAST_MISS, (void *)(uintptr_t)ref);
    return pin_full(pool, ref, flags, data, file, line, why == PP__INLINE_CONTENDED);
}

int pp_pin_loc(pp_pool_t *pool, pp_ref_t ref, unsigned flags, void **data,
               const char *file, int line)
{
    /* The fast path (pinpool_inline.h, which callers may inline too): a
     * resident entry, a registered thread, no tracking, no contention; a
     * HOT entry's read pin on the thread's cached shard.  Whatever it does
     * not finish, it leaves untouched. */
    return pp__inline_pin_call(pool, ref, flags, data, file, line);
}

#undef pp_pin
int pp_pin(pp_pool_t *pool, pp_ref_t ref, unsigned flags, void **data)
{
    return pp_pin_loc(pool, ref, flags, data, NULL, 0);
}

/* The unpin of a dead entry (its last owner is gone), off the fast path:
 * the last pin queues it for its reclaimer, or, with an I/O in flight,
 * leaves it to whoever ends that I/O (counted in dead_in_io first). */
static PP__NOINLINE int unpin_dead(pp_pool_t *pool, pp__entry_t *e, pp_ref_t ref,
                                      pp__thread_t *t, bool count)
{
    uint32_t gen = pp_ref_gen(ref);
    unsigned n = pp_ref_node(ref);
    uint64_t pw = pp__atomic_load_relaxed(&e->pw);
    uint64_t next;
    bool held = false;
    do {
        if (pp__word_gen(pw) != gen || !(pw & PP__F_LIVE) || pp__pw_pins(pw) == 0) {
            /* A dead entry without pins is queued or being freed: the ref
             * is stale, whatever pins it once had. */
            pp__dead_in_io_note(pool, n, false, &held);
            return PP_ESTALE;
        }
        bool last = pp__pw_pins(pw) == 1;
        pp__dead_in_io_note(pool, n, last && (pw & PP__F_BUSY), &held);
        PP__YIELD(UNPIN);
    } while (!pp__pw_try_unpin_dead(e, &pw, &next));
    if (count)
        pp__counter_add(&t->count[n].unpins, 1);
    if (next & PP__F_QUEUED) {
        PP__YIELD(UNPIN);
        pp__retire_push(pool, n, e, t);
    }
    return 0;
}

/* The unpin of an entry found HOT (out of line, as pin_when_hot): 0, an
 * error, or PP__RETRY (no longer HOT: unpin on the word). */
static PP__NOINLINE int unpin_when_hot(pp_pool_t *pool, pp__entry_t *e, pp_ref_t ref,
                                       pp__thread_t *t, uint64_t pw)
{
    if (pp__hot_cached(t, e, pw, -1))
        return 0;
    return pp__hot_unpin(pool, pp_ref_node(ref), e, pp_ref_gen(ref), t);
}

/* The unpin transition, without argument checks or tracking; count is
 * false when undoing a pin the caller never saw succeed. */
static inline int unpin_any(pp_pool_t *pool, pp__entry_t *e, pp_ref_t ref,
                            pp__thread_t *t, bool count)
{
    uint32_t gen = pp_ref_gen(ref);
    uint64_t pw = pp__atomic_load_relaxed(&e->pw);
    for (;;) {
        if (PP__UNLIKELY(pp__word_gen(pw) != gen || !(pw & PP__F_LIVE)))
            return PP_ESTALE;
        if (PP__UNLIKELY(pw & PP__F_HOT)) {
            int rc = unpin_when_hot(pool, e, ref, t, pw);
            if (rc != PP__RETRY) {
                if (rc == 0 && count)
                    pp__counter_add(&t->count[pp_ref_node(ref)].unpins, 1);
                return rc;
            }
            pw = pp__atomic_load_relaxed(&e->pw);
            continue;
        }
        if (PP__UNLIKELY(pp__pw_pins(pw) == 0))
            /* A dead entry without pins is queued or being freed: the ref
             * is stale, whatever pins it once had. */
            return (pw & PP__F_DEAD) ? PP_ESTALE : PP_ENOTPINNED;
        if (PP__UNLIKELY(pw & PP__F_DEAD))
            return unpin_dead(pool, e, ref, t, count);
        PP__YIELD(UNPIN);
        if (pp__pw_try_unpin(e, &pw))
            break;
    }
    if (count)
        pp__counter_add(&t->count[pp_ref_node(ref)].unpins, 1);
    return 0;
}

int pp__pin_unpin(pp_pool_t *pool, pp_ref_t ref, pp__thread_t *t)
{
    pp__entry_t *e = pp__lookup(pool, ref);
    if (PP__UNLIKELY(e == NULL))
        return PP_ESTALE;
    int rc = unpin_any(pool, e, ref, t, true);
    if (PP__UNLIKELY(pool->fast.full) && rc == 0)
        pp__track_unpin(pool, t, ref);
    return rc;
}

static PP__COLD int unpin_full(pp_pool_t *pool, pp_ref_t ref)
{
    if (PP__UNLIKELY(pool == NULL))
        return PP_EINVAL;
    pp__thread_t *t = pp__thread_get(pool);
    if (PP__UNLIKELY(t == NULL))
        return PP_ENOMEM;
    return pp__pin_unpin(pool, ref, t);
}

/* Whatever the fast path did not do: the final unpin of a dead entry,
 * else the full way (which also takes that, slower).  Inlined unpins call
 * it too. */
PP__NOINLINE int pp_inline_unpin_slow(pp_pool_t *pool, pp_ref_t ref)
{
    PP__TEST_POINT(FAST_MISS, (void *)(uintptr_t)ref);
    pp__entry_t *e;
    pp__thread_t *t;
    if (fast_begin(pool, ref, &e, &t)) {
        uint64_t pw = pp__atomic_load_relaxed(&e->pw);
        if (pp__word_gen(pw) == pp_ref_gen(ref) &&
            (pw & (PP__F_LIVE | PP__F_DEAD)) == (PP__F_LIVE | PP__F_DEAD) &&
            pp__pw_pins(pw) != 0 && !PP__YIELD_ON(UNPIN))
            return unpin_dead(pool, e, ref, t, true);
    }
    return unpin_full(pool, ref);
}

int pp_unpin(pp_pool_t *pool, pp_ref_t ref)
{
    /* The fast path (pinpool_inline.h), as in pp_pin_loc: a live entry,
     * not dead, that holds a pin, on its word or its cached shard. */
    return pp__inline_unpin_call(pool, ref);
}

/* Batches take their entries PP__BATCH at a time: every record of a chunk
 * is looked up and prefetched for write before the first CAS, so their
 * cache misses overlap instead of following one another (a pin's CAS
 * waits for its record; four records out of cache cost about one miss,
 * not four). */
#define PP__BATCH 16

/* The records refs[0..m) name, each prefetched for write; false at the
 * first ref that names no slot (*bad: its index). */
static inline bool batch_find(pp_pool_t *pool, const pp_ref_t *refs, size_t m,
                              pp__entry_t **e, size_t *bad)
{
    for (size_t i = 0; i < m; i++) {
        e[i] = pp__lookup(pool, refs[i]);
        if (PP__UNLIKELY(e[i] == NULL)) {
            *bad = i;
            return false;
        }
        __builtin_prefetch(e[i], 1, 3);
    }
    return true;
}

/* Drops the first k pins taken by pp_pin_many_loc, uncounted. */
static void pin_many_undo(pp_pool_t *pool, const pp_ref_t *refs, size_t k,
                          pp__thread_t *t)
{
    while (k-- > 0) {
        pp__entry_t *e = pp__lookup(pool, refs[k]);
        PP__CHECK(e != NULL && unpin_any(pool, e, refs[k], t, false) == 0);
    }
}

/* With swap: starts the loads of every swapped entry of the batch at once,
 * so they overlap instead of running one after the other.  0, PP_ESTALE
 * (before any load starts, if a ref is stale at the first look), or
 * PP_EAGAIN (NOWAIT, something is not resident: its load is started). */
static int pin_many_loads(pp_pool_t *pool, const pp_ref_t *refs, size_t n, unsigned flags)
{
    bool all_resident = true;
    for (size_t i = 0; i < n; i++) {
        pp__entry_t *e = pp__lookup(pool, refs[i]);
        uint64_t pw = e != NULL ? pp__atomic_load_relaxed(&e->pw) : 0;
        if (e == NULL || !pp__pw_alive(pw, pp_ref_gen(refs[i])))
            return PP_ESTALE;
        all_resident = all_resident && (pw & PP__F_RESIDENT);
    }
    for (size_t i = 0; i < n && !all_resident; i++) {
        pp__entry_t *e = pp__lookup(pool, refs[i]);
        int rc = (pp__atomic_load_relaxed(&e->pw) & PP__F_RESIDENT) ? 0
                                                                      : pp__load_start(pool, e, refs[i]);
        if (rc != 0)
            return rc;               /* died meanwhile, or no swap thread runs */
    }
    return !all_resident && (flags & PP_PIN_NOWAIT) ? PP_EAGAIN : 0;
}

/* Step 1 of pp_pin_many_loc: pins refs[0..n) without marking anything
 * dirty (f has WPIN for DIRTY), chunk by chunk; on failure drops what it
 * pinned and returns the error. */
static int pin_many_take(pp_pool_t *pool, const pp_ref_t *refs, size_t n, unsigned f,
                         unsigned flags, void **data, pp__thread_t *t)
{
    for (size_t base = 0; base < n; base += PP__BATCH) {
        size_t m = n - base < PP__BATCH ? n - base : PP__BATCH;
        pp__entry_t *e[PP__BATCH];
        size_t bad = m;
        /* The records of the chunk up to the first that names no slot. */
        bool found = batch_find(pool, refs + base, m, e, &bad);
        for (size_t i = 0; i < m; i++) {
            size_t k = base + i;
            void **d = data != NULL ? &data[k] : NULL;
            /* Every prefetched record is validated like any other: its
             * pins word against the ref's generation, in the CAS. */
            int rc = !found && i == bad ? PP_ESTALE
                                        : pin_any(pool, e[i], refs[k], f, flags, t, d, 0);
            if (PP__UNLIKELY(rc == PP__SLOW))
                rc = pp__pin_slow(pool, e[i], refs[k], f, true, d);
            if (PP__UNLIKELY(rc != 0)) {
                pin_many_undo(pool, refs, k, t);
                return rc;
            }
            /* The caller is about to read the data: its first line comes
             * in while the next records are pinned (a hint, never a
             * fault, whatever the pointer). */
            if (d != NULL)
                __builtin_prefetch(*d, 0, 3);
        }
    }
    return 0;
}

/* pp_pin_many the full way. */
static int pin_many_full(pp_pool_t *pool, const pp_ref_t *refs, size_t n,
                         unsigned flags, void **data, const char *file, int line)
{
    if (pool == NULL || (refs == NULL && n != 0) || (flags & ~PP__PIN_FLAGS) != 0)
        return PP_EINVAL;
    pp__thread_t *t = pp__thread_get(pool);
    if (t == NULL)
        return PP_ENOMEM;
    if (pp__in_callback())
        flags |= PP_PIN_NOWAIT;          /* docs/api.md, "Callbacks" */
    /* 0. With swap: the loads of the batch, overlapped. */
    if (pool->swap) {
        int rc = pin_many_loads(pool, refs, n, flags);
        if (rc != 0)
            return rc;
    }
    /* 1. Pin everything, without marking dirty: a failed call must leave no
     * trace (counts, flags), so the effects come only after all succeeded.
     * WPIN (not DIRTY) already: no promotion while we may write. */
    unsigned f = (flags & ~PP_PIN_WRITE) | ((flags & PP_PIN_WRITE) ? PP__PIN_WPIN : 0);
    int rc = pin_many_take(pool, refs, n, f, flags, data, t);
    if (rc != 0)
        return rc;
    PP__YIELD(PIN);
    /* 1b. A NOWAIT write must not wait for a write-out in progress.  Our
     * pins keep any entry from being claimed now, so this check holds. */
    if ((flags & PP_PIN_WRITE) && (flags & PP_PIN_NOWAIT)) {
        for (size_t i = 0; i < n; i++) {
            if (pp__atomic_load_relaxed(&pp__lookup(pool, refs[i])->pw) & PP__F_EVICTING) {
                pin_many_undo(pool, refs, n, t);
                return PP_EAGAIN;
            }
        }
    }
    /* 2. Tracking (debug mode) may fail to allocate: undo everything. */
    if (PP__UNLIKELY(pool->fast.full)) {
        for (size_t i = 0; i < n; i++) {
            if (pp__track_pin(pool, t, refs[i], file, line) != 0) {
                while (i-- > 0)
                    pp__track_unpin(pool, t, refs[i]);
                pin_many_undo(pool, refs, n, t);
                return PP_ENOMEM;
            }
        }
    }
    /* 3. The effects. */
    for (size_t i = 0; i < n; i++) {
        if (flags & PP_PIN_WRITE) {
            pp__entry_t *e = pp__lookup(pool, refs[i]);
            uint64_t old = pp__pw_mark_dirty(e);
            if (old & PP__F_EVICTING)
                pp__ioend_wait_evict(pool, pp_ref_node(refs[i]), e);
        }
        pp__counter_add(&t->count[pp_ref_node(refs[i])].pins, 1);
    }
    return 0;
}

/* Whatever pp_pin_many's fast path did not finish: it leaves the first
 * done refs pinned, uncounted, by the thread registered with pool, which
 * is dropped the way a failed batch drops its pins (the last pin of an
 * entry that died meanwhile queues it), and the call starts over.
 * Inlined batches call it too. */
PP__NOINLINE int pp_inline_pin_many_slow(pp_pool_t *pool, const pp_ref_t *refs, size_t n,
                                         unsigned flags, void **data, const char *file,
                                         int line, size_t done)
{
    if (done > 0) {
        pp__thread_t *t = pp__thread_get(pool);
        PP__CHECK(t != NULL && done <= n);   /* registered: the fast path pinned */
        PP__TEST_POINT(PIN_MANY_UNDO, (void *)refs);
        pin_many_undo(pool, refs, done, t);
    }
    return pin_many_full(pool, refs, n, flags, data, file, line);
}

int pp_pin_many_loc(pp_pool_t *pool, const pp_ref_t *refs, size_t n,
                    unsigned flags, void **data, const char *file, int line)
{
    /* The fast path (pinpool_inline.h): resident cold entries, a read pin,
     * a registered thread, no tracking, no contention. */
    return pp__inline_pin_many_call(pool, refs, n, flags, data, file, line);
}

#undef pp_pin_many
int pp_pin_many(pp_pool_t *pool, const pp_ref_t *refs, size_t n,
                unsigned flags, void **data)
{
    return pp_pin_many_loc(pool, refs, n, flags, data, NULL, 0);
}

/* The exact check of pp_unpin_many for refs[i], whose record is e and
 * which appears times times in the batch: 0 if its entry holds at least
 * that many pins, else PP_ENOTPINNED or PP_ESTALE. */
static int unpin_many_check(pp_pool_t *pool, pp__entry_t *e, pp_ref_t ref, size_t times)
{
    unsigned node = pp_ref_node(ref);
    uint64_t pw;
    uint32_t pins;
    for (;;) {
        pw = pp__atomic_load_relaxed(&e->pw);
        if (pp__word_gen(pw) != pp_ref_gen(ref) || !(pw & PP__F_LIVE))
            return PP_ESTALE;
        pins = pp__hot_pins(pool, node, e, pw);   /* the word's, if not HOT */
        if (pins >= times || !(pw & PP__F_HOT))
            break;
        /* A snapshot of the hot counters may miss pins that move between
         * them (pins dropped on other threads): only the word's count is
         * exact.  Again if it was made hot again. */
        pp__hot_demote(pool, node, e);
    }
    if (pins < times)
        return (pw & PP__F_DEAD) && pins == 0 ? PP_ESTALE : PP_ENOTPINNED;
    return 0;
}

/* The checks of pp_unpin_many for refs[base..base+m), whose records are e:
 * each distinct ref must hold as many pins as it appears in the whole
 * batch (quadratic in n, without allocating: n is a task's inputs, a
 * handful). */
static int unpin_many_chunk(pp_pool_t *pool, const pp_ref_t *refs, size_t n, size_t base,
                            size_t m, pp__entry_t **e)
{
    for (size_t i = base; i < base + m; i++) {
        size_t times = 0;
        bool first = true;
        for (size_t j = 0; j < n; j++) {
            if (refs[j] == refs[i]) {
                first = first && j >= i;
                times++;
            }
        }
        if (!first)
            continue;
        int rc = unpin_many_check(pool, e[i - base], refs[i], times);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* Drops one pin of each of refs[from..n), all checked by pp_unpin_many,
 * in order.  One can fail only if another thread dropped one of our pins
 * since the check: the call stops there, so that the caller knows which
 * pins are still its own (*done). */
static int unpin_many_drop(pp_pool_t *pool, const pp_ref_t *refs, size_t n, size_t from,
                           pp__thread_t *t, size_t *done)
{
    for (size_t i = from; i < n; i++) {
        /* Found before (by the check): in cache now. */
        pp__entry_t *e = pp__lookup(pool, refs[i]);
        PP__CHECK(e != NULL);
        int rc = unpin_any(pool, e, refs[i], t, true);
        if (PP__UNLIKELY(rc != 0)) {
            if (done != NULL)
                *done = i + 1;
            return rc;
        }
        if (PP__UNLIKELY(pool->fast.full))
            pp__track_unpin(pool, t, refs[i]);
    }
    if (done != NULL)
        *done = n;
    return 0;
}

/* pp_unpin_many the full way. */
static int unpin_many_full(pp_pool_t *pool, const pp_ref_t *refs, size_t n, size_t *done)
{
    if (done != NULL)
        *done = 0;
    if (pool == NULL || (refs == NULL && n != 0))
        return PP_EINVAL;
    pp__thread_t *t = pp__thread_get(pool);
    if (t == NULL)
        return PP_ENOMEM;
    /* Check first, so a bad ref unpins nothing; each chunk's records are
     * prefetched before its first check, and in cache for the unpins. */
    pp__entry_t *e[PP__BATCH];
    for (size_t base = 0; base < n; base += PP__BATCH) {
        size_t m = n - base < PP__BATCH ? n - base : PP__BATCH;
        size_t bad = m;
        bool found = batch_find(pool, refs + base, m, e, &bad);
        /* The refs before one that names no slot are checked first: the
         * error returned is the first failing ref's, in order. */
        int rc = unpin_many_chunk(pool, refs, n, base, found ? m : bad, e);
        if (rc != 0)
            return rc;
        if (!found)
            return PP_ESTALE;
    }
    PP__TEST_POINT(UNPIN_MANY_CHECKED, (void *)refs);
    return unpin_many_drop(pool, refs, n, 0, t, done);
}

/* Whatever pp_unpin_many's fast path did not finish (why): after
 * PP__INLINE_CONTENDED it checked every ref and dropped the first
 * `dropped`, and the others are dropped here; else it did nothing, and
 * the whole call is done here.  Inlined batches call it too. */
PP__NOINLINE int pp_inline_unpin_many_slow(pp_pool_t *pool, const pp_ref_t *refs, size_t n,
                                           size_t *done, size_t dropped, int why)
{
    if (why != PP__INLINE_CONTENDED)
        return unpin_many_full(pool, refs, n, done);
    pp__thread_t *t = pp__thread_get(pool);
    PP__CHECK(t != NULL && dropped < n);   /* registered: the fast path unpinned */
    return unpin_many_drop(pool, refs, n, dropped, t, done);
}

int pp_unpin_many(pp_pool_t *pool, const pp_ref_t *refs, size_t n, size_t *done)
{
    /* The fast path (pinpool_inline.h): distinct refs of live cold entries,
     * not dead, that hold pins; a registered thread, no tracking. */
    return pp__inline_unpin_many_call(pool, refs, n, done);
}

int pp_get(pp_pool_t *pool, pp_ref_t ref, void **data)
{
    if (data == NULL)
        return PP_EINVAL;
    pp__entry_t *e;
    pp__thread_t *t;
    int rc = pp__begin(pool, ref, &e, &t);
    if (rc != 0)
        return rc;
    uint32_t gen = pp_ref_gen(ref);
again:
    /* The section keeps the slot from being recycled between the check of
     * the state word and the read of e->data. */
    pp__epoch_enter(t);
    PP__YIELD(PIN);
    /* acquire: pairs with the putter's release, so e->data is initialised
     * when the generation matches (also when ESCAPED is already set and no
     * CAS follows). */
    uint64_t pw = pp__atomic_load_acquire(&e->pw);
    for (;;) {
        if (!pp__pw_alive(pw, gen)) {
            rc = PP_ESTALE;
            break;
        }
        if (!(pw & PP__F_RESIDENT)) {
            rc = PP__SLOW;
            break;
        }
        if ((pw & PP__F_EVICTING) && pp__in_callback()) {
            rc = PP_EAGAIN;              /* it would wait for the write-out */
            break;
        }
        if (pw & PP__F_ESCAPED)
            break;
        if (pp__pw_escape(e, &pw))
            break;
    }
    if (rc == 0) {
        *data = e->data;
        pp__counter_add(&t->count[pp_ref_node(ref)].gets, 1);
    }
    pp__epoch_leave(t);
    if (rc == PP__SLOW) {
        /* Swapped: load it (outside the section), then escape it. */
        rc = pp__pin_slow(pool, e, ref, 0, false, NULL);
        if (rc != 0)
            return rc;
        goto again;
    }
    if (rc == 0 && (pw & PP__F_EVICTING))
        pp__ioend_wait_evict(pool, pp_ref_node(ref), e);   /* the caller may write */
    return rc;
}

/* The entry ref names and its word, if it is alive: 0, or PP_ESTALE.  No
 * pin and no section: a hint needs no more (pp_prefetch, pp_advise). */
static int hinted(pp_pool_t *pool, pp_ref_t ref, pp__entry_t **e, uint64_t *pw)
{
    *e = pp__lookup(pool, ref);
    if (*e == NULL)
        return PP_ESTALE;
    *pw = pp__atomic_load_relaxed(&(*e)->pw);
    return pp__pw_alive(*pw, pp_ref_gen(ref)) ? 0 : PP_ESTALE;
}

int pp_prefetch(pp_pool_t *pool, pp_ref_t ref)
{
    if (pool == NULL)
        return PP_EINVAL;
    pp__entry_t *e;
    uint64_t pw;
    int rc = hinted(pool, ref, &e, &pw);
    if (rc != 0 || (pw & PP__F_RESIDENT))
        return rc;
    return pp__load_start(pool, e, ref);
}

int pp_advise(pp_pool_t *pool, pp_ref_t ref, unsigned advice)
{
    if (pool == NULL || advice > PP_ADVISE_WONTNEED)
        return PP_EINVAL;
    pp__entry_t *e;
    uint64_t pw;
    int rc = hinted(pool, ref, &e, &pw);
    if (rc != 0 || !pool->swap)
        return rc;                       /* without swap nothing is ever evicted */
    pp__node_t *node = pool->nodes[pp_ref_node(ref)];
    uint32_t slot = pp_ref_slot(ref);    /* the ref's, not the cold record's: no ordering needed */
    pp__advise_set(node, slot, pp_ref_gen(ref), advice);
    if (advice == PP_ADVISE_WILLNEED && !(pw & PP__F_RESIDENT))
        return pp__load_start(pool, e, ref);
    return 0;
}
