/*
 * evict.c -- the hand: CLOCK eviction and drops of PP_TYPE_DISCARD
 * entries.  The swap thread runs it (swapper.c), and so does a loader or,
 * without swap, a putter that needs room (load.c, room.c).
 * The transitions are drawn in entry.h; the bytes are moved by swap.c, or
 * by the io_uring engine (xfer.c); each eviction ends in ioend.c.
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
 * Drops.  A claimed entry of a PP_TYPE_DISCARD type (pp__droppable) is not
 * written: one CAS that expects exactly the claimed word makes it DEAD,
 * with EVICTING kept (evict_drop) -- as the commit, a pin in between
 * makes it fail, and the drop is abandoned.  From that CAS on, pins, gets
 * and advice fail (dead), and retains and releases too (they check the
 * word, owner.c); the drop then takes the owners that are left and ends
 * its claim, which queues the entry for its reclaimer like a last
 * release.  Its bytes are freed there, after a grace period, and until
 * then count in pool->discard_dying: the hand does not evict for bytes on
 * their way out (is_above), or it would drop every cache entry before
 * the first is freed.  Without swap the same hand runs on a putter that
 * needs room (room.c), where only DISCARD entries are candidates (every
 * other entry is NOSWAP there).
 *
 * Advice (advise.c).  Before the hand turns, a pass evicts the entries
 * advised PP_ADVISE_WONTNEED, clean ones first, through the same claim and
 * commit (evict_advised); the hand gives them no second chance and
 * spares PP_ADVISE_WILLNEED ones once more.  With advice in use the hand
 * evicts only down to the high watermark: the rest of the batch comes from
 * advised entries as tasks end.
 */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "swap/swap.h"
#include "os/swapdev.h"

/* ------------------------------------------------------------------------ */
/* Eviction                                                                  */
/* ------------------------------------------------------------------------ */

/* Drops e, a PP_TYPE_DISCARD entry claimed by the hand (claimed: the word
 * the claim set; slot: the hand's): it dies as if its last owner had been
 * released, and t queues it for its reclaimer.  Returns its bytes, now on
 * their way out (the push counted them in discard_dying), or 0 if a pin,
 * get or release changed the word since the claim (abandoned). */
static uint64_t evict_drop(pp_pool_t *pool, pp__node_t *node, pp__entry_t *e,
                           uint32_t slot, uint64_t claimed, pp__thread_t *t)
{
    pp__cold_t *c = pp__cold(e);
    size_t size = c->size;               /* ours to read: the claim keeps the slot */
    bool held = false;
    /* Counted before the death, as a release that finds an I/O in flight
     * counts itself: a drain that starts once the entry reads dead waits
     * for its push (pp__ioend_finish gives the count back). */
    pp__dead_in_io_note(pool, node->index, true, &held);
    PP__TEST_POINT(DROP_CLAIMED, e);
    PP__YIELD(EVICT);
    uint64_t expect = claimed;
    /* The death, EVICTING kept (the slot stays ours until the end below). */
    if (!pp__pw_drop_kill(e, &expect)) {
        pp__dead_in_io_note(pool, node->index, false, &held);
        pp__ioend_abandon(pool, node, e, false, true, t);   /* a pin won */
        return 0;
    }
    PP__TEST_POINT(DROP_DEAD, e);
    PP__YIELD(EVICT);
    /* Its owners go with it.  A release that read the word alive before
     * the death may still take the last one: it then finds the entry dead
     * and leaves it to us (pp__retire_kill).  acquire (the load, and the
     * CAS that takes the rest): pairs with the releases' acq_rel, so what
     * the owners wrote before their releases reaches the free through the
     * push, as a last release's kill carries it. */
    uint64_t ow = pp__atomic_load_acquire(&c->ow);
    while (pp__ow_owners(ow) != 0 &&
           !pp__atomic_cas_weak_acquire(&c->ow, &ow, ow & ~PP__OWNERS_MASK))
        ;
    pp__counter_add(&node->sw.drops, 1);
    if (pp__advise_of(node, slot, claimed) == PP_ADVISE_WONTNEED) {
        pp__advise_consume(node, slot, claimed, PP_ADVISE_WONTNEED);
        pp__counter_add(&node->sw.ev_advised, 1);   /* advice in use (pp__evict_pass) */
    }
    /* The end of the claim: dead, no pin (none can come), so QUEUED and
     * the push, on t's queue. */
    uint64_t pw = pp__atomic_load_relaxed(&e->pw), next;
    while (!pp__pw_drop_end(e, &pw, &next))
        ;
    pp__ioend_finish(pool, node->index, e, next, t);
    return size;
}

/* The io_uring engine: waits until every write-out in flight ended;
 * returns the bytes they freed (async false: none in flight, 0). */
static uint64_t evict_drain(pp_pool_t *pool, pp__node_t *node, bool async)
{
    if (!async)
        return 0;
    while (pp__xfer_writes(node) > 0)
        pp__xfer_reap(pool, node, true);
    return pp__xfer_freed(node);
}

/* Tries to evict e; returns the bytes freed (or dropped: on their way
 * out).  *spared counts a candidate passed over for its recency bit or its
 * WILLNEED advice; with ignore_ref it is taken anyway, and so is one
 * advised WONTNEED.  t queues what dies here (pp__evict_pass). */
static uint64_t evict_one(pp_pool_t *pool, pp__node_t *node, pp__entry_t *e,
                          uint32_t slot, bool ignore_ref, uint64_t *spared,
                          pp__thread_t *t)
{
    const uint64_t want = PP__F_LIVE | PP__F_RESIDENT;
    const uint64_t bad = PP__F_DEAD | PP__F_QUEUED | PP__F_ESCAPED | PP__F_BUSY | PP__F_NOSWAP;
    /* The io_uring engine takes one more write-out only when it has room
     * for it: made before the claim, so that no claim waits. */
    while (pp__xfer_of(node, t) != NULL && pp__xfer_writes_full(node))
        pp__xfer_reap(pool, node, true);
    uint64_t pw = pp__atomic_load_relaxed(&e->pw);
    if ((pw & (want | bad)) == want) {
        unsigned advice = pp__advise_of(node, slot, pw);
        if (advice == PP_ADVISE_WONTNEED) {
            ignore_ref = true;
        } else if (advice == PP_ADVISE_WILLNEED && !ignore_ref) {
            pp__advise_consume(node, slot, pw, advice);   /* spared once more */
            (*spared)++;
            return 0;
        }
    }
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
        if (pp__pw_second_chance(e, &pw)) {
            (*spared)++;
            return 0;
        }
    }
    bool write = !(pw & PP__F_SWAPPED) || (pw & PP__F_DIRTY);
    uint64_t claimed;
    PP__YIELD(EVICT);
    if (!pp__pw_claim_evict(e, &pw, write, &claimed))
        return 0;                        /* it changed: next time round */
    PP__YIELD(EVICT);
    /* The type is ours to read now (the claim's acquire, the slot kept). */
    if (pp__droppable(pool, pp__cold(e)->type, pp__cold(e)->size))
        return evict_drop(pool, node, e, slot, claimed, t);
    if (write && (pw & PP__F_SWAPPED))
        pp__swap_drop(pool, node, e);    /* the stale copy */
    if (write && pp__xfer_of(node, t) != NULL) {
        /* The io_uring engine writes it out while the hand goes on; the
         * write-out ends in pp__ioend_evict when its last request does
         * (xfer.c), its bytes counted by the pass when they are freed. */
        int rc = pp__xfer_write(pool, node, e, slot, claimed);
        if (rc == 0)
            return 0;
        return pp__ioend_evict(pool, node, e, slot, claimed, write, rc, t, pp__xfer_keep);
    }
    uint64_t t0 = write ? pp__tevent_start(pool) : 0;
    int rc = write ? pp__swap_save(pool, node, e, claimed) : 0;
    /* Before the commit, as every span of an I/O; the claim keeps the
     * slot until then. */
    pp__tevent_span(pool, t, PP__TEV_WRITE, t0,
                    pp__ref_make(node->index, slot, pp__word_gen(claimed)), pp__cold(e)->size,
                    node->index, 0, rc);
    return pp__ioend_evict(pool, node, e, slot, claimed, write, rc, t, pp__xfer_keep);
}

/* Whether the pool is above mark, counting the room loaders wait for and
 * not the bytes of DISCARD entries already dropped (or dead) and waiting
 * for their reclaimer, nor those of victims being written out: evicting
 * for those would drop every cache entry
 * before the first one is freed. */
static bool is_above(pp_pool_t *pool, pp__node_t *node, uint64_t mark)
{
    uint64_t want = pp__atomic_load_relaxed(&pool->room_want) +
                    pp__atomic_load_relaxed(&node->sw.room_hint);
    /* Victims being written out (the io_uring engine) are on their way
     * out as these are. */
    uint64_t dying = pp__atomic_load_relaxed(&pool->discard_dying) +
                     pp__atomic_load_relaxed(&pool->evict_inflight);
    return pp__atomic_load_relaxed(&pool->resident) + want > mark + dying;
}

bool pp__evict_needed(pp_pool_t *pool, pp__node_t *node)
{
    return is_above(pool, node, pool->low_wm);
}

/* Whether t has write-outs in flight on node (the io_uring engine). */
static bool evict_writing(const pp__node_t *node, const pp__thread_t *t)
{
    return pp__xfer_of(node, t) != NULL && pp__xfer_writes(node) > 0;
}

/* Evicts entries advised PP_ADVISE_WONTNEED (advise.c), before the hand
 * turns: clean ones first (no write), then dirty ones, highest slot first;
 * until eviction is no longer needed (or, with *force, one was freed).
 * An advised entry that has nothing to evict (swapped, dead) loses its bit;
 * a pinned or busy one keeps it and is tried again next pass. */
static uint64_t evict_advised(pp_pool_t *pool, pp__node_t *node, bool *force,
                              pp__thread_t *t)
{
    uint64_t freed = 0, spared = 0;
    for (int clean_only = 1; clean_only >= 0; clean_only--) {
        uint32_t slot = UINT32_MAX;
        /* Forced: until one is freed, or (io_uring) on its way out. */
        while (pp__atomic_load_relaxed(&node->sw.advised) != 0 &&
               ((*force && !evict_writing(node, t)) || pp__evict_needed(pool, node)) &&
               pp__advise_next_wontneed(node, &slot)) {
            /* Advice is given to entries, which are in committed segments. */
            pp__entry_t *seg = pp__table_segment(pool, node->index, slot >> PP__SEG_SHIFT);
            PP__CHECK(seg != NULL);
            pp__entry_t *e = &seg[slot & (PP__SEG_SLOTS - 1)];
            uint64_t pw = pp__atomic_load_relaxed(&e->pw);
            unsigned advice = pp__advise_of(node, slot, pw);
            if (advice != PP_ADVISE_WONTNEED) {
                pp__advise_forget(node, slot);   /* advised again, or stale */
                continue;
            }
            if ((pw & (PP__F_LIVE | PP__F_RESIDENT | PP__F_DEAD)) != (PP__F_LIVE | PP__F_RESIDENT)) {
                /* Nothing to evict: dead, or swapped (the advice to an
                 * entry not in memory is dropped); a load in flight may
                 * make it resident, so its advice waits for the next pass. */
                if (!(pw & PP__F_BUSY))
                    pp__advise_consume(node, slot, pw, PP_ADVISE_WONTNEED);
                continue;
            }
            bool clean = (pw & PP__F_SWAPPED) && !(pw & PP__F_DIRTY);
            if (clean_only && !clean)
                continue;
            uint64_t got = evict_one(pool, node, e, slot, true, &spared, t);
            if (got > 0) {
                freed += got;
                *force = false;
            }
        }
    }
    return freed;
}

/* One pass of the hand: at most two sweeps of the node's slots (the first
 * may only clear recency bits).  If those free nothing while candidates
 * kept being spared for their recency bit (pins keep setting it), a third
 * sweep takes them anyway: second chance is a preference, never a reason
 * to fail for lack of room.  *stuck: all sweeps ran, eviction was still
 * needed, and nothing was freed -- nothing on this node can go now. */
uint64_t pp__evict_pass(pp_pool_t *pool, pp__node_t *node, bool force, bool *stuck,
                        pp__thread_t *t)
{
    uint32_t slots = pp__atomic_load_relaxed(&node->put.next_slot);
    if (slots > PP__MAX_SLOTS)
        slots = PP__MAX_SLOTS;
    uint64_t freed = 0, spared = 0, i = 0, sweeps = 2 * (uint64_t)slots;
    bool ignore_ref = false;
    /* With advice, the hand evicts only down to the high watermark: the
     * batch down to the low one is for advised entries, which keep coming
     * as tasks end.  Taking it from the hand would evict entries still in
     * use between two of their pins (a Cholesky's panel while it is
     * updated: at order 16384 under a 256 MiB limit, 490 of its tiles
     * written out and read back, against 0 advised ones left to take). */
    uint64_t hand_mark = pool->low_wm;
    if (pp__atomic_load_relaxed(&node->sw.advised) != 0 ||
        pp__atomic_load_relaxed(&node->sw.ev_advised) != 0) {
        freed = evict_advised(pool, node, &force, t);
        hand_mark = pool->high_wm;
    }
    /* The io_uring engine (xfer.c) writes victims out while the hand
     * goes on: they are handed to the kernel together when the pass next
     * waits, and their bytes counted here as they end.  The pass waits
     * for one to end when the engine has all the write-outs it may have,
     * or when those in flight would do (a write-out that loses its claim
     * frees nothing, and the hand goes on); it waits for the rest before
     * it decides whether to sweep again, and before it ends. */
    bool async = pp__xfer_of(node, t) != NULL;
    for (;;) {
        if (i == sweeps) {
            freed += evict_drain(pool, node, async);
            if (freed != 0 || spared == 0 || ignore_ref)
                break;
            ignore_ref = true;           /* the third sweep */
            sweeps += slots;
        }
        bool above = is_above(pool, node, hand_mark);
        if (async && pp__xfer_writes(node) > 0 && (pp__xfer_writes_full(node) || !above)) {
            pp__xfer_reap(pool, node, true);
            freed += pp__xfer_freed(node);
            if (freed != 0)
                force = false;
            continue;
        }
        if (!force && !above)
            break;
        i++;
        /* A turn of the hand covers the slots there were when it began:
         * slots handed out since (new entries) wait for the next turn, as
         * pages inserted behind a CLOCK hand do, and the hand always comes
         * round to the old ones however fast new ones arrive.  A turn that
         * begins inside this pass counts the slots as they are then, and
         * the pass sweeps the new ones as often as the old: with the count
         * of the pass's start, entries put during a turn stayed out of the
         * next, and the pass swept the old slots again and took an entry
         * whose second chance it had just given (a hot one, pinned once
         * per turn). */
        if (node->sw.hand >= node->sw.hand_end) {
            PP__TEST_POINT(HAND_WRAP, node);
            uint32_t now = pp__atomic_load_relaxed(&node->put.next_slot);
            if (now > PP__MAX_SLOTS)
                now = PP__MAX_SLOTS;
            if (now > slots) {
                sweeps += (ignore_ref ? 1u : 2u) * (uint64_t)(now - slots);
                slots = now;
            }
            node->sw.hand = 0;
            node->sw.hand_end = slots;
        }
        uint32_t slot = node->sw.hand++;
        pp__entry_t *seg = pp__table_segment(pool, node->index, slot >> PP__SEG_SHIFT);
        if (seg == NULL)
            continue;
        uint64_t got = evict_one(pool, node, &seg[slot & (PP__SEG_SLOTS - 1)], slot,
                                 ignore_ref, &spared, t);
        if (got > 0) {
            freed += got;
            force = false;
        }
    }
    freed += evict_drain(pool, node, async);
    *stuck = freed == 0 && i == sweeps && (force || is_above(pool, node, hand_mark));
    return freed;
}


int pp__evict_room(pp_pool_t *pool, pp__node_t *node, size_t size)
{
    int rc = pp__mem_take(pool, size);
    if (rc != 0 && size <= pool->mem_limit) {
        /* The pass evicts for these bytes too (is_above). */
        pp__atomic_add_relaxed(&pool->room_want, size);
        bool stuck;
        (void)pp__evict_pass(pool, node, true, &stuck, node->sw.st);
        pp__atomic_sub_relaxed(&pool->room_want, size);
        rc = pp__mem_take(pool, size);
    }
    return rc;
}
