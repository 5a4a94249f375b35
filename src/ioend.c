/*
 * ioend.c -- the end of an entry's I/O, and the wait for it.  An eviction,
 * a drop or a load ends with the CAS that clears its BUSY flag (entry.h);
 * then pp__io_end queues the entry if it died meanwhile and wakes the
 * node's waiters.  pp__evict_wait is such a waiter: a pinner, or pp_get,
 * whose entry is being written out waits until the eviction lets go.
 */
#include "internal.h"

void pp__io_end(pp_pool_t *pool, unsigned n, pp__entry_t *e, uint64_t next, pp__thread_t *t)
{
    /* Pre (internal.h): next, the word the ender installed, has no I/O in
     * flight; QUEUED only on a dead, unpinned entry. */
    PP__ASSERT(!(next & PP__F_BUSY));
    PP__ASSERT(!(next & PP__F_QUEUED) || ((next & PP__F_DEAD) && pp__pw_pins(next) == 0));
    if (next & PP__F_QUEUED) {
        /* Only an entry that died during the I/O, or was dropped, is
         * queued here, and its final release or unpin, or its drop,
         * counted it in dead_in_io. */
        pp__reclaim_push(pool, n, e, t);
        /* release: orders the push (and its queued count) before the
         * decrement, for pp_pool_drain, which reads this count first. */
        pp__atomic_add_release(&pool->nodes[n]->prod.dead_in_io, -1);
    }
    ck_ec32_inc(&pool->nodes[n]->sw.io_done, &pp__ec_mode);
}

void pp__evict_wait(pp_pool_t *pool, unsigned n, pp__entry_t *e)
{
    /* Pre (internal.h): the caller holds a pin, counted on the word (a
     * write pin is never counted hot), or escaped the entry (pp_get). */
    uint64_t held = pp__atomic_load_relaxed(&e->pw);
    PP__ASSERT((held & PP__F_ESCAPED) || (!(held & PP__F_HOT) && pp__pw_pins(held) > 0));
    (void)held;
    pp__node_t *node = pool->nodes[n];
    for (;;) {
        uint32_t seen = ck_ec32_value(&node->sw.io_done);
        /* acquire: pairs with the abandon's release, so the swap thread's
         * reads of the data happen before the caller's writes. */
        if (!(pp__atomic_load_acquire(&e->pw) & PP__F_EVICTING))
            return;
        ck_ec32_wait(&node->sw.io_done, &pp__ec_mode, seen, NULL);
    }
}
