/*
 * evict.c -- each node's swap thread: CLOCK eviction, drops of
 * PP_TYPE_DISCARD entries, and the loads queued for it (ioend.c ends the
 * I/O).
 * The transitions are drawn in entry.h; the bytes are moved by swap.c;
 * memory is reserved by mem.c, and loads run by load.c.
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
 * with EVICTING kept (pp__evict_drop) -- as the commit, a pin in between
 * makes it fail, and the drop is abandoned.  From that CAS on, pins, gets
 * and advice fail (dead), and retains and releases too (they check the
 * word, owner.c); the drop then takes the owners that are left and ends
 * its claim, which queues the entry for its reclaimer like a last
 * release.  Its bytes are freed there, after a grace period, and until
 * then count in pool->discard_dying: the hand does not evict for bytes on
 * their way out (pp__above), or it would drop every cache entry before
 * the first is freed.  Without swap the same hand runs on a putter that
 * needs room (mem.c), where only DISCARD entries are candidates (every
 * other entry is NOSWAP there).
 *
 * Advice (advise.c).  Before the hand turns, a pass evicts the entries
 * advised PP_ADVISE_WONTNEED, clean ones first, through the same claim and
 * commit (pp__evict_advised); the hand gives them no second chance and
 * spares PP_ADVISE_WILLNEED ones once more.  With advice in use the hand
 * evicts only down to the high watermark: the rest of the batch comes from
 * advised entries as tasks end.
 *
 * Queued loads.  PP_PIN_NOWAIT and pp_prefetch claim LOADING and push the
 * entry on the node's load queue (its queue link is unused while the entry
 * lives); the swap thread runs those loads (load.c) between passes.
 */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "internal.h"
#include "swapdev.h"

/* Writeback of swapped bytes is started (device sync) only when a swap
 * thread has had nothing to do for this long after writing: so swapped
 * data does not linger as dirty page cache until the kernel's 30 s expiry,
 * and evictions never queue behind writeback they started themselves
 * (starting it after every batch cut swap-out throughput by half to three
 * quarters on this project's machine, measured with swapbench). */
#define PP__SYNC_IDLE_NS 1000000000L

/* ------------------------------------------------------------------------ */
/* Eviction                                                                  */
/* ------------------------------------------------------------------------ */

static void pp__data_free(const pp_type_t *type, void *data, size_t size)
{
    if (type != NULL && type->free != NULL) {
        pp__callback_enter();
        type->free(data, size, type->ctx);
        pp__callback_leave();
    } else {
        free(data);
    }
}

/* Gives up a claim; kept: the record now holds a written copy (valid
 * unless a write pin set DIRTY); lost: a pin, get or release won the race
 * (else the write failed).  The I/O ends; the entry goes on t's queue if
 * it died meanwhile and holds no pin. */
static void pp__evict_abandon(pp_pool_t *pool, pp__node_t *node, pp__entry_t *e, bool kept,
                              bool lost, pp__thread_t *t)
{
    if (lost)
        pp__counter_add(&node->sw.ev_abandoned, 1);
    uint64_t pw = pp__atomic_load_relaxed(&e->pw), next;
    while (!pp__pw_abandon_evict(e, &pw, kept, &next))
        ;
    pp__io_end(pool, node->index, e, next, t);
}

/* Drops e, a PP_TYPE_DISCARD entry claimed by the hand (claimed: the word
 * the claim set; slot: the hand's): it dies as if its last owner had been
 * released, and t queues it for its reclaimer.  Returns its bytes, now on
 * their way out (the push counted them in discard_dying), or 0 if a pin,
 * get or release changed the word since the claim (abandoned). */
static uint64_t pp__evict_drop(pp_pool_t *pool, pp__node_t *node, pp__entry_t *e,
                               uint32_t slot, uint64_t claimed, pp__thread_t *t)
{
    pp__cold_t *c = pp__cold(e);
    size_t size = c->size;               /* ours to read: the claim keeps the slot */
    bool held = false;
    /* Counted before the death, as a release that finds an I/O in flight
     * counts itself: a drain that starts once the entry reads dead waits
     * for its push (pp__io_end gives the count back). */
    pp__dead_in_io_note(pool, node->index, true, &held);
    PP__TEST_POINT(DROP_CLAIMED, e);
    PP__YIELD(EVICT);
    uint64_t expect = claimed;
    /* The death, EVICTING kept (the slot stays ours until the end below). */
    if (!pp__pw_drop_kill(e, &expect)) {
        pp__dead_in_io_note(pool, node->index, false, &held);
        pp__evict_abandon(pool, node, e, false, true, t);   /* a pin won */
        return 0;
    }
    PP__TEST_POINT(DROP_DEAD, e);
    PP__YIELD(EVICT);
    /* Its owners go with it.  A release that read the word alive before
     * the death may still take the last one: it then finds the entry dead
     * and leaves it to us (pp__entry_kill).  acquire (the load, and the
     * CAS that takes the rest): pairs with the releases' acq_rel, so what
     * the owners wrote before their releases reaches the free through the
     * push, as a last release's kill carries it. */
    uint64_t ow = pp__atomic_load_acquire(&c->ow);
    while (pp__ow_owners(ow) != 0 &&
           !pp__atomic_cas_weak_acquire(&c->ow, &ow, ow & ~PP__OWNERS_MASK))
        ;
    pp__counter_add(&node->sw.drops, 1);
    if (pp__advice_of(node, slot, claimed) == PP_ADVISE_WONTNEED) {
        pp__advice_consume(node, slot, claimed, PP_ADVISE_WONTNEED);
        pp__counter_add(&node->sw.ev_advised, 1);   /* advice in use (pp__evict_pass) */
    }
    /* The end of the claim: dead, no pin (none can come), so QUEUED and
     * the push, on t's queue. */
    uint64_t pw = pp__atomic_load_relaxed(&e->pw), next;
    while (!pp__pw_drop_end(e, &pw, &next))
        ;
    pp__io_end(pool, node->index, e, next, t);
    return size;
}

/* The io_uring engine: waits until every write-out in flight ended;
 * returns the bytes they freed (async false: none in flight, 0). */
static uint64_t pp__evict_drain(pp_pool_t *pool, pp__node_t *node, bool async)
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
static uint64_t pp__evict_one(pp_pool_t *pool, pp__node_t *node, pp__entry_t *e,
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
        unsigned advice = pp__advice_of(node, slot, pw);
        if (advice == PP_ADVISE_WONTNEED) {
            ignore_ref = true;
        } else if (advice == PP_ADVISE_WILLNEED && !ignore_ref) {
            pp__advice_consume(node, slot, pw, advice);   /* spared once more */
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
        return pp__evict_drop(pool, node, e, slot, claimed, t);
    if (write && (pw & PP__F_SWAPPED))
        pp__swap_drop(pool, node, e);    /* the stale copy */
    if (write && pp__xfer_of(node, t) != NULL) {
        /* The io_uring engine writes it out while the hand goes on; the
         * write-out ends in pp__evict_end (xfer.c), its bytes counted by
         * the pass when they are freed. */
        int rc = pp__xfer_write(pool, node, e, slot, claimed);
        if (rc == 0)
            return 0;
        return pp__evict_end(pool, node, e, slot, claimed, write, rc, t);
    }
    int rc = write ? pp__swap_save(pool, node, e, claimed) : 0;
    return pp__evict_end(pool, node, e, slot, claimed, write, rc, t);
}

/* The end of an eviction of e (claimed: the word its claim set; slot: the
 * hand's), once its copy is written (rc 0), or was already (write false),
 * or its write failed (rc): commits it swapped, freeing its memory, or
 * gives the claim up with the entry resident.  Returns the bytes freed. */
uint64_t pp__evict_end(pp_pool_t *pool, pp__node_t *node, pp__entry_t *e, uint32_t slot,
                       uint64_t claimed, bool write, int rc, pp__thread_t *t)
{
    if (rc == 0) {
        void *data = e->data;
        pp__cold_t *c = pp__cold(e);
        size_t size = c->size;
        const pp_type_t *type = c->type;
        uint64_t expect = claimed;
        uint64_t done;
        /* Counted before the commit: once it is made, the entry may die
         * and its reclaimer subtract these bytes.  The tail count makes
         * pp_pool_drain wait for the free and accounting below, which an
         * entry released right after the commit is owed too. */
        pp__atomic_add_relaxed(&node->sw.swapped_bytes, size);
        pp__atomic_add_relaxed(&node->sw.evict_tail, 1);
        PP__YIELD(EVICT);
        if (pp__pw_commit_evict(e, &expect, &done)) {
            /* No pin existed since the claim, and none can start now (the
             * entry is not resident): the memory is ours to free. */
            PP__YIELD(EVICT);
            /* Flat memory goes to a queued load if one waits (xfer.c). */
            if ((type != NULL && type->free != NULL) || !pp__xfer_keep(pool, node, t, data, size))
                pp__data_free(type, data, size);
            pp__atomic_sub_relaxed(&node->put.resident_bytes, size);
            pp__counter_add(write ? &node->sw.ev_written : &node->sw.ev_clean, 1);
            if (pp__advice_of(node, slot, done) == PP_ADVISE_WONTNEED) {
                pp__advice_consume(node, slot, done, PP_ADVISE_WONTNEED);
                pp__counter_add(&node->sw.ev_advised, 1);
            }
            pp__mem_unreserve(pool, size);
            /* release: the free and the counts above happen before a
             * drain's acquire of the tail count. */
            pp__atomic_sub_release(&node->sw.evict_tail, 1);
            return size;
        }
        pp__atomic_sub_relaxed(&node->sw.swapped_bytes, size);
        pp__atomic_sub_relaxed(&node->sw.evict_tail, 1);
    }
    /* rc != 0 and not PP_EAGAIN: the write failed (counted by the store)
     * or swap space ran out; the entry stays resident with no copy and is
     * tried again on a later pass. */
    pp__evict_abandon(pool, node, e, write && rc == 0, rc == 0 || rc == PP_EAGAIN, t);
    return 0;
}

/* Whether the pool is above mark, counting the room loaders wait for and
 * not the bytes of DISCARD entries already dropped (or dead) and waiting
 * for their reclaimer, nor those of victims being written out: evicting
 * for those would drop every cache entry
 * before the first one is freed. */
static bool pp__above(pp_pool_t *pool, uint64_t mark)
{
    uint64_t want = pp__atomic_load_relaxed(&pool->room_want) +
                    pp__atomic_load_relaxed(&pool->room_hint);
    /* Victims being written out (the io_uring engine) are on their way
     * out as these are. */
    uint64_t dying = pp__atomic_load_relaxed(&pool->discard_dying) +
                     pp__atomic_load_relaxed(&pool->evict_inflight);
    return pp__atomic_load_relaxed(&pool->resident) + want > mark + dying;
}

static bool pp__evict_needed(pp_pool_t *pool) { return pp__above(pool, pool->low_wm); }

/* Whether t has write-outs in flight on node (the io_uring engine). */
static bool pp__evict_writing(const pp__node_t *node, const pp__thread_t *t)
{
    return pp__xfer_of(node, t) != NULL && pp__xfer_writes(node) > 0;
}

/* Evicts entries advised PP_ADVISE_WONTNEED (advise.c), before the hand
 * turns: clean ones first (no write), then dirty ones, highest slot first;
 * until eviction is no longer needed (or, with *force, one was freed).
 * An advised entry that has nothing to evict (swapped, dead) loses its bit;
 * a pinned or busy one keeps it and is tried again next pass. */
static uint64_t pp__evict_advised(pp_pool_t *pool, pp__node_t *node, bool *force,
                                  pp__thread_t *t)
{
    uint64_t freed = 0, spared = 0;
    for (int clean_only = 1; clean_only >= 0; clean_only--) {
        uint32_t slot = UINT32_MAX;
        /* Forced: until one is freed, or (io_uring) on its way out. */
        while (pp__atomic_load_relaxed(&node->sw.advised) != 0 &&
               ((*force && !pp__evict_writing(node, t)) || pp__evict_needed(pool)) &&
               pp__advised_next(node, &slot)) {
            /* acquire: pairs with the segment's release-install. */
            pp__entry_t *seg = pp__atomic_load_acquire(&node->dir[slot >> PP__SEG_SHIFT]);
            pp__entry_t *e = &seg[slot & (PP__SEG_SLOTS - 1)];
            uint64_t pw = pp__atomic_load_relaxed(&e->pw);
            unsigned advice = pp__advice_of(node, slot, pw);
            if (advice != PP_ADVISE_WONTNEED) {
                pp__advice_forget(node, slot);   /* advised again, or stale */
                continue;
            }
            if ((pw & (PP__F_LIVE | PP__F_RESIDENT | PP__F_DEAD)) != (PP__F_LIVE | PP__F_RESIDENT)) {
                /* Nothing to evict: dead, or swapped (the advice to an
                 * entry not in memory is dropped); a load in flight may
                 * make it resident, so its advice waits for the next pass. */
                if (!(pw & PP__F_BUSY))
                    pp__advice_consume(node, slot, pw, PP_ADVISE_WONTNEED);
                continue;
            }
            bool clean = (pw & PP__F_SWAPPED) && !(pw & PP__F_DIRTY);
            if (clean_only && !clean)
                continue;
            uint64_t got = pp__evict_one(pool, node, e, slot, true, &spared, t);
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
        freed = pp__evict_advised(pool, node, &force, t);
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
            freed += pp__evict_drain(pool, node, async);
            if (freed != 0 || spared == 0 || ignore_ref)
                break;
            ignore_ref = true;           /* the third sweep */
            sweeps += slots;
        }
        bool above = pp__above(pool, hand_mark);
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
         * round to the old ones however fast new ones arrive. */
        if (node->sw.hand >= node->sw.hand_end) {
            node->sw.hand = 0;
            node->sw.hand_end = slots;
        }
        uint32_t slot = node->sw.hand++;
        /* acquire: pairs with the segment's release-install. */
        pp__entry_t *seg = pp__atomic_load_acquire(&node->dir[slot >> PP__SEG_SHIFT]);
        if (seg == NULL)
            continue;
        uint64_t got = pp__evict_one(pool, node, &seg[slot & (PP__SEG_SLOTS - 1)], slot,
                                     ignore_ref, &spared, t);
        if (got > 0) {
            freed += got;
            force = false;
        }
    }
    freed += pp__evict_drain(pool, node, async);
    *stuck = freed == 0 && i == sweeps && (force || pp__above(pool, hand_mark));
    return freed;
}


/* ------------------------------------------------------------------------ */
/* Swap threads                                                              */
/* ------------------------------------------------------------------------ */

void pp__io_clear_loading(pp_pool_t *pool, pp__node_t *node, pp__entry_t *e)
{
    uint64_t pw = pp__atomic_load_relaxed(&e->pw), next;
    while (!pp__pw_fail_load(e, &pw, &next))
        ;
    pp__io_end(pool, node->index, e, next, node->sw.st);
}

/* The thread engine's queued loads: each in turn, blocking, as they come. */
static bool pp__swap_loads(pp_pool_t *pool, pp__node_t *node, bool stop)
{
    ck_stack_entry_t *batch = ck_stack_batch_pop_upmc(&node->sw.load_q);
    for (ck_stack_entry_t *s = batch; s != NULL;) {
        ck_stack_entry_t *next = s->next;
        pp__entry_t *e = pp__entry_of_link(s);
        if (stop || (pp__atomic_load_relaxed(&e->pw) & PP__F_DEAD))
            pp__io_clear_loading(pool, node, e);
        else
            (void)pp__load_only(pool, node->index, e, node, node->sw.st);
        s = next;
    }
    return batch != NULL;
}

static void *pp__swap_main(void *arg)
{
    pp__node_t *node = arg;
    pp_pool_t *pool = node->pool;
    uint64_t served = 0;
    (void)pp__bind_thread_to_node(pool, node->index, false);
    for (;;) {
        uint32_t seen = ck_ec32_value(&node->sw.io_wake);
        /* acquire: pairs with destroy's release of io_stop. */
        bool stop = pp__atomic_load_acquire(&node->sw.io_stop) != 0;
        bool loads;
        if (node->sw.xf != NULL) {
            if (stop) {
                pp__xfer_stop(pool, node);   /* cancels what has not started */
                break;
            }
            /* Starts queued loads, takes what has ended (xfer.c). */
            loads = pp__xfer_loads(pool, node, false);
            pp__xfer_reap(pool, node, false);
            pp__xfer_spares_trim(pool, node);
        } else {
            loads = pp__swap_loads(pool, node, stop);
            if (stop)
                break;
        }
        uint64_t req = pp__atomic_load_relaxed(&pool->room_req);
        if (req != served || pp__atomic_load_relaxed(&pool->resident) > pool->high_wm) {
            bool stuck;
            uint64_t freed = pp__evict_pass(pool, node, false, &stuck, node->sw.st);
            /* the NOWAIT sizes this pass made room for: a caller still
             * short retries, and asks again */
            pp__atomic_store_relaxed(&pool->room_hint, 0);
            served = req;
            pp__atomic_store_relaxed(&node->sw.pass_stuck, stuck);
            /* release: pass_stuck is read after an acquire of pass_seq. */
            pp__atomic_store_release(&node->sw.pass_seq, req);
            ck_ec32_inc(&pool->room_ec, &pp__ec_mode);
            if (freed > 0 && pp__evict_needed(pool))
                continue;
        }
        if (loads)
            continue;
        if (node->sw.xf != NULL && pp__xfer_busy(node)) {
            /* Loads in flight, or held for their turn: the next
             * completion, then round again to start those held (a load
             * queued meanwhile is seen then too; no request takes long). */
            pp__xfer_reap(pool, node, true);
            continue;
        }
        PP__TEST_POINT(SWAP_IDLE, node);
        uint64_t written = pp__atomic_load_relaxed(&node->sw.sw_written);
        /* Memory kept for loads stays over idle moments: the next burst
         * of prefetches reads into it instead of into fresh pages. */
        bool kept = pp__xfer_spare_bytes(node) > 0;
        if (written == node->sw.synced && !kept) {
            ck_ec32_wait(&node->sw.io_wake, &pp__ec_mode, seen, NULL);
            continue;
        }
        struct timespec deadline;
        clock_gettime(CLOCK_MONOTONIC, &deadline);
        deadline.tv_sec += PP__SYNC_IDLE_NS / 1000000000L;
        if (ck_ec32_wait(&node->sw.io_wake, &pp__ec_mode, seen, &deadline) != 0) {
            /* idle since: start writeback, give back what no load took */
            if (written != node->sw.synced) {
                node->sw.synced = written;
                (void)pool->dev->sync(pool->dev, node->index);
            }
            if (kept)
                pp__xfer_spares_free(node);
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
        ck_stack_init(&node->sw.load_q);
        ck_ec32_init(&node->sw.io_wake, 0);
        ck_ec32_init(&node->sw.io_done, 0);
        node->sw.st = pp__thread_new_reclaimer(pool);
        if (node->sw.st == NULL)
            return PP_ENOMEM;
        if (pthread_create(&node->sw.io_thread, NULL, pp__swap_main, node) != 0)
            return PP_ENOMEM;
        node->sw.io_started = true;
    }
    return 0;
}

void pp__evict_stop(pp_pool_t *pool)
{
    for (unsigned n = 0; n < pool->nnodes; n++) {
        pp__node_t *node = pool->nodes[n];
        if (node == NULL || !node->sw.io_started)
            continue;
        /* release: everything the pool's users did happens before the swap
         * thread's last round. */
        pp__atomic_store_release(&node->sw.io_stop, 1);
        ck_ec32_inc(&node->sw.io_wake, &pp__ec_mode);
    }
    for (unsigned n = 0; n < pool->nnodes; n++) {
        pp__node_t *node = pool->nodes[n];
        if (node == NULL || !node->sw.io_started)
            continue;
        pthread_join(node->sw.io_thread, NULL);
        node->sw.io_started = false;
    }
}
