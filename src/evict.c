/*
 * evict.c -- the swap tier's state machine: memory reservations, each
 * node's swap thread (CLOCK eviction and asynchronous loads), and loads on
 * the pinning thread.  The transitions are drawn in entry.h; the bytes are
 * moved by swap.c.
 *
 * Memory.  pool->resident counts the bytes reserved for resident data,
 * loads in progress included, and never passes mem_limit: a put or a load
 * reserves before its memory exists.  A reservation that crosses the high
 * watermark (15/16 of the limit) wakes the swap threads; one that does not
 * fit asks them for room (a numbered request), waits until every node's
 * thread has run a pass after the request, and gives up with PP_ENOMEM if
 * every node's last pass was stuck (still needed, nothing freed) twice in
 * a row with no eviction or load anywhere in between.  Swap threads never wait for room: a load
 * they run that does not fit after a pass of their own is dropped (the pin
 * that needs it loads it).
 *
 * Eviction.  Each swap thread sweeps its node's slots with a CLOCK hand
 * until the pool is under the low watermark (7/8, minus the bytes waited
 * for).  A candidate is resident, alive, unpinned, not escaped, not busy
 * and of a swappable type; if its recency bit is set the hand clears it and
 * moves on (second chance).  Otherwise the thread claims it (EVICTING, with
 * DIRTY cleared), writes it if it has no valid copy, and commits with one
 * CAS that expects exactly the claimed word: any pin, unpin, get or release
 * in between changed the word, so the commit fails and the eviction is
 * abandoned -- a pin always wins.  Only after the commit is the memory
 * freed; a pinned entry is never written out, freed or moved.
 *
 * Loads.  The first pinner of a swapped entry claims LOADING and loads it
 * on its own thread; later pinners wait on the node's io_done event count
 * for that load to end.  PP_PIN_NOWAIT and pp_prefetch claim LOADING and
 * push the entry on the node's load queue (its queue link is unused while
 * the entry lives) for the swap thread.
 */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "internal.h"
#include "swapdev.h"

enum pp__load_mode { PP__LOAD_PIN, PP__LOAD_ONLY };

/* Writeback of swapped bytes is started (device sync) only when a swap
 * thread has had nothing to do for this long after writing: so swapped
 * data does not linger as dirty page cache until the kernel's 30 s expiry,
 * and evictions never queue behind writeback they started themselves
 * (starting it after every batch cut swap-out throughput by half to three
 * quarters on this project's machine, measured with swapbench). */
#define PP__SYNC_IDLE_NS 1000000000L

/* How long a put or load short of room waits for reclaimers that free
 * nothing before it gives up (PP_ENOMEM). */
#define PP__DYING_WAIT_NS 10000000L

/* ------------------------------------------------------------------------ */
/* Memory reservations                                                       */
/* ------------------------------------------------------------------------ */

static void pp__kick_all(pp_pool_t *pool)
{
    for (unsigned n = 0; n < pool->nnodes; n++)
        ck_ec32_inc(&pool->nodes[n]->io_wake, &pp__ec_mode);
}

static bool pp__mem_try(pp_pool_t *pool, size_t size)
{
    uint64_t limit = pool->mem_limit;
    uint64_t cur = pp__atomic_load_relaxed(&pool->resident);
    do {
        if (size > limit || cur > limit - size)
            return false;
        /* relaxed: a counter checked against a limit; the memory it stands
         * for is published by the entry's own word. */
    } while (!pp__atomic_cas_weak_relaxed(&pool->resident, &cur, cur + size));
    uint64_t peak = pp__atomic_load_relaxed(&pool->resident_peak);
    while (cur + size > peak &&
           !pp__atomic_cas_weak_relaxed(&pool->resident_peak, &peak, cur + size))
        ;
    if (pool->swap && cur <= pool->high_wm && cur + size > pool->high_wm)
        pp__kick_all(pool);              /* evict ahead of need */
    return true;
}

void pp__mem_unreserve(pp_pool_t *pool, size_t size)
{
    if (pool->mem_limit == 0)
        return;
    pp__atomic_sub_relaxed(&pool->resident, size);
    if (pool->swap && pp__atomic_load_relaxed(&pool->room_want) != 0)
        ck_ec32_inc(&pool->room_ec, &pp__ec_mode);
}

/* Evictions and loads done so far, all nodes: passes that each found
 * nothing may have run at different moments, and between them loads may
 * have made entries resident that can go now. */
static uint64_t pp__swap_progress(pp_pool_t *pool)
{
    uint64_t p = 0;
    for (unsigned n = 0; n < pool->nnodes; n++) {
        pp__node_t *node = pool->nodes[n];
        p += pp__atomic_load_relaxed(&node->ev_written) +
             pp__atomic_load_relaxed(&node->ev_clean) + pp__atomic_load_relaxed(&node->loads);
    }
    return p;
}

/* Asks every swap thread for a pass and waits for room. */
static int pp__room_wait(pp_pool_t *pool, size_t size)
{
    int rc = PP_ENOMEM;
    uint64_t progress = UINT64_MAX;      /* at the last round of stuck passes */
    pp__atomic_add_relaxed(&pool->room_waits, 1);
    pp__atomic_add_relaxed(&pool->room_want, size);
    for (;;) {
        uint64_t seq = pp__atomic_add_relaxed(&pool->room_req, 1) + 1;
        pp__kick_all(pool);
        bool served = false;
        while (!served) {
            /* Snapshot first: a pass that ends after it changes the value,
             * so the wait below cannot miss it. */
            uint32_t seen = ck_ec32_value(&pool->room_ec);
            if (pp__mem_try(pool, size)) {
                rc = 0;
                goto out;
            }
            served = true;
            for (unsigned n = 0; n < pool->nnodes && served; n++) {
                /* acquire: pairs with the pass's release, so its
                 * pass_stuck is the one of that pass (or a later one). */
                served = pp__atomic_load_acquire(&pool->nodes[n]->pass_seq) >= seq;
            }
            if (!served)
                ck_ec32_wait(&pool->room_ec, &pp__ec_mode, seen, NULL);
        }
        if (pp__mem_try(pool, size)) {
            rc = 0;
            break;
        }
        bool stuck = true;
        for (unsigned n = 0; n < pool->nnodes && stuck; n++)
            stuck = pp__atomic_load_relaxed(&pool->nodes[n]->pass_stuck) != 0;
        if (stuck) {
            /* Every node's pass found nothing.  Passes on different nodes
             * run at different moments: unless nothing was evicted or
             * loaded anywhere since the last such round, ask again. */
            uint64_t now = pp__swap_progress(pool);
            if (now != progress) {
                progress = now;
                continue;
            }
            /* Nothing evictable.  Bytes of dead entries on their way to
             * their reclaimers will be free after a grace period: wait for
             * them, unless this thread's own QSBR section holds that grace
             * period back. */
            uint32_t seen = ck_ec32_value(&pool->room_ec);
            if (pp__mem_try(pool, size)) {
                rc = 0;
                break;
            }
            uint64_t dying = 0, frees = 0;
            for (unsigned n = 0; n < pool->nnodes; n++) {
                dying += pp__atomic_load_relaxed(&pool->nodes[n]->dying_bytes);
                frees += pp__atomic_load_relaxed(&pool->nodes[n]->frees);
            }
            pp__thread_t *t = pp__thread_get(pool);
            if (dying == 0 || t == NULL || t->in_section)
                break;                   /* PP_ENOMEM */
            /* Only while the reclaimers make progress: a grace period held
             * back by a QSBR thread that is itself blocked in the pool
             * (waiting for a load this thread makes, say) would otherwise
             * never end. */
            struct timespec deadline;
            clock_gettime(CLOCK_MONOTONIC, &deadline);
            deadline.tv_nsec += PP__DYING_WAIT_NS;
            if (deadline.tv_nsec >= 1000000000L) {
                deadline.tv_sec++;
                deadline.tv_nsec -= 1000000000L;
            }
            if (ck_ec32_wait(&pool->room_ec, &pp__ec_mode, seen, &deadline) != 0) {
                uint64_t later = 0;
                for (unsigned n = 0; n < pool->nnodes; n++)
                    later += pp__atomic_load_relaxed(&pool->nodes[n]->frees);
                if (later == frees)
                    break;               /* no reclaim for 10 ms: PP_ENOMEM */
            }
        }
        /* Others took what was freed, or dead entries were freed: ask
         * again. */
    }
out:
    pp__atomic_sub_relaxed(&pool->room_want, size);
    if (rc != 0)
        pp__atomic_add_relaxed(&pool->room_enomem, 1);
    return rc;
}

int pp__mem_reserve(pp_pool_t *pool, size_t size, bool wait)
{
    if (pool->mem_limit == 0)
        return 0;
    if (pp__mem_try(pool, size))
        return 0;
    if (!pool->swap || !wait || size > pool->mem_limit)
        return PP_ENOMEM;                /* never fits: evict nothing for it */
    return pp__room_wait(pool, size);
}

/* ------------------------------------------------------------------------ */
/* Ends of I/O                                                               */
/* ------------------------------------------------------------------------ */

void pp__io_end(pp_pool_t *pool, unsigned n, pp__entry_t *e, uint64_t next, pp__thread_t *t)
{
    if (next & PP__F_QUEUED) {
        /* Only an entry that died during the I/O is queued here, and its
         * final release or unpin counted it in dead_in_io. */
        pp__reclaim_push(pool, n, e, t);
        /* release: orders the push (and its queued count) before the
         * decrement, for pp_pool_drain, which reads this count first. */
        pp__atomic_add_release(&pool->nodes[n]->dead_in_io, -1);
    }
    ck_ec32_inc(&pool->nodes[n]->io_done, &pp__ec_mode);
}

void pp__evict_wait(pp_pool_t *pool, unsigned n, pp__entry_t *e)
{
    pp__node_t *node = pool->nodes[n];
    for (;;) {
        uint32_t seen = ck_ec32_value(&node->io_done);
        /* acquire: pairs with the abandon's release, so the swap thread's
         * reads of the data happen before the caller's writes. */
        if (!(pp__atomic_load_acquire(&e->pw) & PP__F_EVICTING))
            return;
        ck_ec32_wait(&node->io_done, &pp__ec_mode, seen, NULL);
    }
}

/* ------------------------------------------------------------------------ */
/* Eviction                                                                  */
/* ------------------------------------------------------------------------ */

static void pp__data_free(const pp_type_t *type, void *data, size_t size)
{
    if (type != NULL && type->free != NULL)
        type->free(data, size, type->ctx);
    else
        free(data);
}

/* Ends an I/O on e without making it resident: clears its BUSY bit
 * (clear), adds set, and queues the entry if it died meanwhile and holds
 * no pin. */
static void pp__busy_clear(pp_pool_t *pool, pp__node_t *node, pp__entry_t *e, uint64_t clear,
                           uint64_t set)
{
    uint64_t pw = pp__atomic_load_relaxed(&e->pw), next;
    do {
        next = (pw & ~clear) | set;
        if ((next & PP__F_DEAD) && pp__pw_pins(next) == 0)
            next |= PP__F_QUEUED;
        /* acq_rel: release orders the swap thread's reads of the data
         * before a waiting write pinner's acquire of the cleared EVICTING,
         * and publishes the record with SWAPPED; acquire takes the pins,
         * unpins and releases made meanwhile, so that when this CAS queues
         * the entry, the push carries them on to the reclaimer's free (as
         * a final unpin's acq_rel does). */
    } while (!pp__atomic_cas_weak_acq_rel(&e->pw, &pw, next));
    pp__io_end(pool, node->index, e, next, node->st);
}

/* Gives up a claim; kept: the record now holds a written copy (valid
 * unless a write pin set DIRTY); lost: a pin, get or release won the race
 * (else the write failed). */
static void pp__evict_abandon(pp_pool_t *pool, pp__node_t *node, pp__entry_t *e, bool kept,
                              bool lost)
{
    if (lost)
        pp__counter_add(&node->ev_abandoned, 1);
    pp__busy_clear(pool, node, e, PP__F_EVICTING, kept ? PP__F_SWAPPED : 0);
}

/* Tries to evict e; returns the bytes freed.  *spared counts a candidate
 * passed over for its recency bit; with ignore_ref it is taken anyway. */
static uint64_t pp__evict_one(pp_pool_t *pool, pp__node_t *node, pp__entry_t *e,
                              bool ignore_ref, uint64_t *spared)
{
    const uint64_t want = PP__F_LIVE | PP__F_RESIDENT;
    const uint64_t bad = PP__F_DEAD | PP__F_QUEUED | PP__F_ESCAPED | PP__F_BUSY | PP__F_NOSWAP;
    uint64_t pw = pp__atomic_load_relaxed(&e->pw);
    if ((pw & PP__F_HOT) && !(pw & (PP__F_ESCAPED | PP__F_NOSWAP))) {
        /* In use by many threads, or was: back to one word, and a second
         * chance. */
        pp__hot_demote(pool, node->index, e);
        (*spared)++;
        return 0;
    }
    for (;;) {
        if (pw & PP__F_HOT)
            return 0;                    /* promoted again meanwhile */
        if ((pw & (want | bad)) != want || pp__pw_pins(pw) != 0)
            return 0;

        if (!(pw & PP__F_REF) || ignore_ref)
            break;
        /* relaxed: the recency bit is a hint for the hand; a second
         * chance.  A failed CAS rereads and decides again. */
        if (pp__atomic_cas_weak_relaxed(&e->pw, &pw, pw & ~PP__F_REF)) {
            (*spared)++;
            return 0;
        }
    }
    bool write = !(pw & PP__F_SWAPPED) || (pw & PP__F_DIRTY);
    /* The claim clears REF as well as DIRTY: every pin sets REF, so a pin
     * taken during the write-out changes the word for good, even once it
     * is dropped again, and the commit below fails (the entry was in use:
     * it stays).  Were REF left set (a third sweep takes entries with it),
     * a read pin and its unpin would restore the claimed word exactly. */
    uint64_t claimed = (pw | PP__F_EVICTING) &
                       ~(PP__F_DIRTY | PP__F_REF | (write ? PP__F_SWAPPED : 0));
    PP__YIELD(EVICT);
    /* acquire: pairs with the putter's release (data, size, type) and with
     * every unpin's release, so the bytes written are the last ones
     * written under a pin. */
    if (!pp__atomic_cas_weak_acquire(&e->pw, &pw, claimed))
        return 0;                        /* it changed: next time round */
    PP__YIELD(EVICT);
    if (write && (pw & PP__F_SWAPPED))
        pp__swap_drop(pool, node, e);    /* the stale copy */
    int rc = write ? pp__swap_save(pool, node, e, claimed) : 0;
    if (rc == 0) {
        void *data = e->data;
        size_t size = e->size;
        const pp_type_t *type = e->type;
        uint64_t expect = claimed;
        uint64_t done = (claimed & ~(PP__F_EVICTING | PP__F_RESIDENT)) | PP__F_SWAPPED;
        /* Counted before the commit: once it is made, the entry may die
         * and its reclaimer subtract these bytes.  The tail count makes
         * pp_pool_drain wait for the free and accounting below, which an
         * entry released right after the commit is owed too. */
        pp__atomic_add_relaxed(&node->swapped_bytes, size);
        pp__atomic_add_relaxed(&node->evict_tail, 1);
        PP__YIELD(EVICT);
        /* acq_rel: release publishes the record to the next loader's
         * acquire; acquire takes the release of every unpin made since
         * the claim read the word (a pin and its unpin in between leave
         * REF set, which fails this CAS; acquire orders them before the
         * free all the same, should the word ever come back unchanged). */
        if (pp__atomic_cas_strong_acq_rel(&e->pw, &expect, done)) {
            /* No pin existed since the claim, and none can start now (the
             * entry is not resident): the memory is ours to free. */
            PP__YIELD(EVICT);
            pp__data_free(type, data, size);
            pp__atomic_sub_relaxed(&node->resident_bytes, size);
            pp__counter_add(write ? &node->ev_written : &node->ev_clean, 1);
            pp__mem_unreserve(pool, size);
            /* release: the free and the counts above happen before a
             * drain's acquire of the tail count. */
            pp__atomic_sub_release(&node->evict_tail, 1);
            return size;
        }
        pp__atomic_sub_relaxed(&node->swapped_bytes, size);
        pp__atomic_sub_relaxed(&node->evict_tail, 1);
    }
    /* rc != 0 and not PP_EAGAIN: the write failed (counted by the store)
     * or swap space ran out; the entry stays resident with no copy and is
     * tried again on a later pass. */
    pp__evict_abandon(pool, node, e, write && rc == 0, rc == 0 || rc == PP_EAGAIN);
    return 0;
}

static bool pp__evict_needed(pp_pool_t *pool)
{
    uint64_t want = pp__atomic_load_relaxed(&pool->room_want);
    return pp__atomic_load_relaxed(&pool->resident) + want > pool->low_wm;
}

/* One pass of the hand: at most two sweeps of the node's slots (the first
 * may only clear recency bits).  If those free nothing while candidates
 * kept being spared for their recency bit (pins keep setting it), a third
 * sweep takes them anyway: second chance is a preference, never a reason
 * to fail for lack of room.  *stuck: all sweeps ran, eviction was still
 * needed, and nothing was freed -- nothing on this node can go now. */
static uint64_t pp__evict_pass(pp_pool_t *pool, pp__node_t *node, bool force, bool *stuck)
{
    uint32_t slots = pp__atomic_load_relaxed(&node->next_slot);
    if (slots > PP__MAX_SLOTS)
        slots = PP__MAX_SLOTS;
    uint64_t freed = 0, spared = 0, i = 0, sweeps = 2 * (uint64_t)slots;
    bool ignore_ref = false;
    for (;;) {
        if (i == sweeps) {
            if (freed != 0 || spared == 0 || ignore_ref)
                break;
            ignore_ref = true;           /* the third sweep */
            sweeps += slots;
        }
        if (!force && !pp__evict_needed(pool))
            break;
        i++;
        /* A turn of the hand covers the slots there were when it began:
         * slots handed out since (new entries) wait for the next turn, as
         * pages inserted behind a CLOCK hand do, and the hand always comes
         * round to the old ones however fast new ones arrive. */
        if (node->hand >= node->hand_end) {
            node->hand = 0;
            node->hand_end = slots;
        }
        uint32_t slot = node->hand++;
        /* acquire: pairs with the segment's release-install. */
        pp__entry_t *seg = pp__atomic_load_acquire(&node->dir[slot >> PP__SEG_SHIFT]);
        if (seg == NULL)
            continue;
        uint64_t got = pp__evict_one(pool, node, &seg[slot & (PP__SEG_SLOTS - 1)], ignore_ref,
                                     &spared);
        if (got > 0) {
            freed += got;
            force = false;
        }
    }
    *stuck = freed == 0 && i == sweeps && (force || pp__evict_needed(pool));
    return freed;
}

/* ------------------------------------------------------------------------ */
/* Loads                                                                     */
/* ------------------------------------------------------------------------ */

/* Loads e (claimed LOADING by the caller) and commits.  PP__LOAD_PIN takes
 * a pin in the commit (and DIRTY with PP_PIN_WRITE); evictor is the node
 * whose swap thread runs the load (it may evict for it, never waits). */
static int pp__load_run(pp_pool_t *pool, unsigned n, pp__entry_t *e, enum pp__load_mode mode,
                        unsigned flags, pp__node_t *evictor, pp__thread_t *t, void **data)
{
    pp__node_t *node = pool->nodes[n];
    size_t size = e->size;
    int rc = pp__mem_reserve(pool, size, evictor == NULL);
    if (rc != 0 && evictor != NULL && size <= pool->mem_limit) {
        pp__atomic_add_relaxed(&pool->room_want, size);
        bool stuck;
        (void)pp__evict_pass(pool, evictor, true, &stuck);
        pp__atomic_sub_relaxed(&pool->room_want, size);
        rc = pp__mem_reserve(pool, size, false);
    }
    void *mem = NULL;
    if (rc == 0) {
        rc = pp__swap_load(pool, node, e, &mem);
        if (rc != 0) {
            pp__mem_unreserve(pool, size);
        } else {
            e->data = mem;               /* nobody reads it while LOADING */
            /* Counted before the commit: once it is made, the entry may be
             * queued and its reclaimer subtract these. */
            pp__atomic_add_relaxed(&node->resident_bytes, size);
            pp__atomic_sub_relaxed(&node->swapped_bytes, size);
            pp__atomic_add_relaxed(&node->loads, 1);
        }
    }
    PP__YIELD(LOAD);
    uint64_t pw = pp__atomic_load_relaxed(&e->pw), next;
    bool pinned;
    do {
        next = pw & ~PP__F_LOADING;
        pinned = false;
        if (rc == 0) {
            next |= PP__F_RESIDENT | PP__F_REF;
            if (mode == PP__LOAD_PIN && !(pw & PP__F_DEAD)) {
                next = (next + 1u) | ((flags & PP_PIN_WRITE) ? PP__F_DIRTY | PP__F_WPIN : 0) |
                       ((flags & PP__PIN_WPIN) ? PP__F_WPIN : 0);
                pinned = true;
            }
        }
        if ((next & PP__F_DEAD) && pp__pw_pins(next) == 0)
            next |= PP__F_QUEUED;
        /* acq_rel: release orders e->data and the loaded bytes before
         * every later pin's acquire of RESIDENT; acquire takes the release
         * of an owner who let go meanwhile, so a push below carries it on
         * to the reclaimer's free. */
    } while (!pp__atomic_cas_weak_acq_rel(&e->pw, &pw, next));
    pp__io_end(pool, n, e, next, t);
    if (rc == 0 && mode == PP__LOAD_PIN) {
        if (!pinned)
            return PP_ESTALE;            /* it died while loading */
        if (data != NULL)
            *data = mem;
    }
    return rc;
}

int pp__load_start(pp_pool_t *pool, pp__entry_t *e, pp_ref_t ref)
{
    uint64_t pw = pp__atomic_load_relaxed(&e->pw);
    for (;;) {
        if (pp__word_gen(pw) != pp_ref_gen(ref) ||
            (pw & (PP__F_LIVE | PP__F_DEAD)) != PP__F_LIVE)
            return PP_ESTALE;
        if (pw & (PP__F_RESIDENT | PP__F_LOADING))
            return 0;
        /* acquire: pairs with the eviction commit's release (the record). */
        if (pp__atomic_cas_weak_acquire(&e->pw, &pw, pw | PP__F_LOADING))
            break;
    }
    PP__YIELD(LOAD);
    pp__node_t *node = pool->nodes[pp_ref_node(ref)];
    /* The push's CAS hands the claimed entry to the swap thread. */
    ck_stack_push_upmc(&node->load_q, &e->q.link);
    ck_ec32_inc(&node->io_wake, &pp__ec_mode);
    return 0;
}

int pp__pin_slow(pp_pool_t *pool, pp__entry_t *e, pp_ref_t ref, unsigned flags, bool pin,
                 void **data)
{
    unsigned n = pp_ref_node(ref);
    pp__node_t *node = pool->nodes[n];
    uint32_t gen = pp_ref_gen(ref);
    pp__thread_t *t = pp__thread_get(pool);
    bool waited = false;
    if (t == NULL)
        return PP_ENOMEM;
    for (;;) {
        uint32_t seen = ck_ec32_value(&node->io_done);
        /* acquire: pairs with the load commit's release (data pointer). */
        uint64_t pw = pp__atomic_load_acquire(&e->pw);
        if (pp__word_gen(pw) != gen || (pw & (PP__F_LIVE | PP__F_DEAD)) != PP__F_LIVE)
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
            uint64_t next = (pw + 1u) | PP__F_REF |
                            ((flags & PP_PIN_WRITE) ? PP__F_DIRTY | PP__F_WPIN : 0) |
                            ((flags & PP__PIN_WPIN) ? PP__F_WPIN : 0);
            PP__YIELD(PIN);
            /* acquire: as in the fast path (pin.c). */
            if (!pp__atomic_cas_weak_acquire(&e->pw, &pw, next))
                continue;
            if ((flags & PP_PIN_WRITE) && (next & PP__F_EVICTING))
                pp__evict_wait(pool, n, e);
            if (data != NULL)
                *data = e->data;
            return 0;
        }
        if (pw & PP__F_LOADING) {
            if (flags & PP_PIN_NOWAIT)
                return PP_EAGAIN;
            if (!waited) {
                pp__atomic_add_relaxed(&node->load_waits, 1);
                waited = true;
            }
            ck_ec32_wait(&node->io_done, &pp__ec_mode, seen, NULL);
            continue;
        }
        if (flags & PP_PIN_NOWAIT) {
            int rc = pp__load_start(pool, e, ref);
            return rc != 0 ? rc : PP_EAGAIN;
        }
        /* acquire: pairs with the eviction commit's release (the record). */
        if (!pp__atomic_cas_weak_acquire(&e->pw, &pw, pw | PP__F_LOADING))
            continue;
        PP__YIELD(LOAD);
        int rc = pp__load_run(pool, n, e, pin ? PP__LOAD_PIN : PP__LOAD_ONLY, flags, NULL, t,
                              data);
        if (rc != 0 || pin)
            return rc;
        /* Loaded for a get: go round to see it resident (it may already
         * have been evicted again, then we load again). */
    }
}

/* ------------------------------------------------------------------------ */
/* Swap threads                                                              */
/* ------------------------------------------------------------------------ */

static void pp__load_cancel(pp_pool_t *pool, pp__node_t *node, pp__entry_t *e)
{
    pp__busy_clear(pool, node, e, PP__F_LOADING, 0);
}

static void *pp__swap_main(void *arg)
{
    pp__node_t *node = arg;
    pp_pool_t *pool = node->pool;
    uint64_t served = 0;
    (void)pp__bind_thread_to_node(pool, node->index, false);
    for (;;) {
        uint32_t seen = ck_ec32_value(&node->io_wake);
        /* acquire: pairs with destroy's release of io_stop. */
        bool stop = pp__atomic_load_acquire(&node->io_stop) != 0;
        ck_stack_entry_t *batch = ck_stack_batch_pop_upmc(&node->load_q);
        for (ck_stack_entry_t *s = batch; s != NULL;) {
            ck_stack_entry_t *next = s->next;
            pp__entry_t *e = pp__entry_of_link(s);
            if (stop || (pp__atomic_load_relaxed(&e->pw) & PP__F_DEAD))
                pp__load_cancel(pool, node, e);
            else
                (void)pp__load_run(pool, node->index, e, PP__LOAD_ONLY, 0, node, node->st, NULL);
            s = next;
        }
        if (stop)
            break;
        uint64_t req = pp__atomic_load_relaxed(&pool->room_req);
        if (req != served || pp__atomic_load_relaxed(&pool->resident) > pool->high_wm) {
            bool stuck;
            uint64_t freed = pp__evict_pass(pool, node, false, &stuck);
            served = req;
            pp__atomic_store_relaxed(&node->pass_stuck, stuck);
            /* release: pass_stuck is read after an acquire of pass_seq. */
            pp__atomic_store_release(&node->pass_seq, req);
            ck_ec32_inc(&pool->room_ec, &pp__ec_mode);
            if (freed > 0 && pp__evict_needed(pool))
                continue;
        }
        if (batch != NULL)
            continue;
        uint64_t written = pp__atomic_load_relaxed(&node->sw_written);
        if (written == node->synced) {
            ck_ec32_wait(&node->io_wake, &pp__ec_mode, seen, NULL);
            continue;
        }
        struct timespec deadline;
        clock_gettime(CLOCK_MONOTONIC, &deadline);
        deadline.tv_sec += PP__SYNC_IDLE_NS / 1000000000L;
        if (ck_ec32_wait(&node->io_wake, &pp__ec_mode, seen, &deadline) != 0) {
            node->synced = written;       /* idle since: start writeback */
            (void)pool->dev->sync(pool->dev, node->index);
        }
    }
    return NULL;
}

int pp__evict_start(pp_pool_t *pool)
{
    if (!pool->swap)
        return 0;
    for (unsigned n = 0; n < pool->nnodes; n++) {
        pp__node_t *node = pool->nodes[n];
        ck_stack_init(&node->load_q);
        ck_ec32_init(&node->io_wake, 0);
        ck_ec32_init(&node->io_done, 0);
        node->st = pp__thread_new_reclaimer(pool);
        if (node->st == NULL)
            return PP_ENOMEM;
        if (pthread_create(&node->io_thread, NULL, pp__swap_main, node) != 0)
            return PP_ENOMEM;
        node->io_started = true;
    }
    return 0;
}

void pp__evict_stop(pp_pool_t *pool)
{
    for (unsigned n = 0; n < pool->nnodes; n++) {
        pp__node_t *node = pool->nodes[n];
        if (node == NULL || !node->io_started)
            continue;
        /* release: everything the pool's users did happens before the swap
         * thread's last round. */
        pp__atomic_store_release(&node->io_stop, 1);
        ck_ec32_inc(&node->io_wake, &pp__ec_mode);
    }
    for (unsigned n = 0; n < pool->nnodes; n++) {
        pp__node_t *node = pool->nodes[n];
        if (node == NULL || !node->io_started)
            continue;
        pthread_join(node->io_thread, NULL);
        node->io_started = false;
    }
}
