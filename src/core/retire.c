/*
 * retire.c -- an entry's death, and its hand-over to its node's reclaimer.
 *
 * The last release kills the entry (pp__retire_kill): one CAS on its word
 * makes it DEAD, and QUEUED too if no pin and no I/O holds it.  Whoever
 * makes it QUEUED -- that release, the final unpin (pin.c), or the end of
 * the I/O that held it (ioend.c) -- pushes it (pp__retire_push).
 *
 * A push goes onto the calling thread's own queue for the entry's home
 * node -- a ck_stack per thread and node (pp__thread_t.rq), so a push is
 * one CAS on a line no other pusher writes -- and wakes the node's
 * reclaimer only if it has declared itself asleep (`sleeping`, then the
 * node's event count, a ck_ec): a burst of final unpins costs one futex
 * wake at most, and none while the reclaimer is busy.  The reclaimer's
 * side of the queues is reclaim.c.
 */
#include "core/core.h"

void pp__retire_push(pp_pool_t *pool, unsigned n, pp__entry_t *e, pp__thread_t *t)
{
    pp__node_t *node = pool->nodes[n];
    PP__ASSERT(n < pool->nnodes && t != NULL);
    PP__ASSERT((pp__atomic_load_relaxed(&e->pw) & (PP__F_LIVE | PP__F_DEAD | PP__F_QUEUED)) ==
               (PP__F_LIVE | PP__F_DEAD | PP__F_QUEUED));
    PP__ASSERT(pp__pw_pins(pp__atomic_load_relaxed(&e->pw)) == 0);
    /* The lag is sampled: a clock read costs more than the rest of a final
     * unpin.  The first of every PP__LAG_SAMPLE entries this thread queues
     * for node n carries its time. */
    uint64_t seq = pp__atomic_load_relaxed(&t->count[n].queued);
    pp__cold_t *c = pp__cold(e);
    c->queued_us = PP__LAG_NONE;
    if (seq % PP__LAG_SAMPLE == 0) {
        uint32_t us = (uint32_t)(pp__wait_now_ns() / 1000u);
        c->queued_us = us == PP__LAG_NONE ? us - 1 : us;
    }
    pp__counter_add(&t->count[n].queued, 1);
    pp__backlog_add(node, pp__backlog_charge(e, pp__atomic_load_relaxed(&e->pw)));
    /* With swap, a put or load short of room waits for these bytes instead
     * of failing.  QUEUED is ours: RESIDENT cannot change any more. */
    if (pool->swap && (pp__atomic_load_relaxed(&e->pw) & PP__F_RESIDENT))
        pp__atomic_add_relaxed(&node->prod.dying_bytes, c->size);
    /* A DISCARD entry (dropped or released; always resident) is room on
     * its way: the hands do not evict for it (evict.c, is_above). */
    if (pp__droppable(pool, c->type, c->size))
        pp__atomic_add_relaxed(&pool->discard_dying, c->size);
    /* The push's CAS publishes queued_us and everything this thread (and,
     * through its acq_rel CAS on pw, every earlier unpinner) did to the
     * entry to the reclaimer's batch pop.  After it, this thread must not
     * touch e: the reclaimer may already be freeing it.  The queue is the
     * thread's own: no other thread pushes to it. */
    ck_stack_push_upmc(&t->rq[n].s, &c->q.link);
    /* Orders the push's CAS before the read of `sleeping`, against the
     * reclaimer's store of `sleeping` before its last look at the queues
     * (reclaimer_wait): either it sees our entry, or we see it about
     * to wait and bump `wake`, which ends the wait.  No write to a shared
     * line unless the reclaimer waits.  ck's atomic-to-load fence: free
     * where a CAS already is a full barrier (x86), a fence elsewhere. */
    ck_pr_fence_atomic_load();
    /* The first pusher that finds it waiting wakes it, once. */
    if (pp__atomic_load_relaxed(&node->prod.sleeping) &&
        pp__atomic_exchange_relaxed(&node->prod.sleeping, 0))
        ck_ec32_inc(&node->prod.wake, &pp__wait_ec_mode);
}

void pp__retire_kill(pp_pool_t *pool, unsigned n, pp__entry_t *e, uint32_t gen,
                     pp__thread_t *t)
{
    uint64_t pw = pp__atomic_load_relaxed(&e->pw);
    uint64_t next;
    bool held = false;
    for (;;) {
        if (PP__UNLIKELY(pp__word_gen(pw) != gen ||
                         (pw & (PP__F_LIVE | PP__F_DEAD)) != PP__F_LIVE)) {
            /* Owners just reached 0 by our CAS, so only a drop (evict.c,
             * evict_drop) can have killed the entry: it made the word
             * DEAD after our release read it alive, and queues the entry
             * itself -- which may be reclaimed, its slot even reused, by
             * now.  Nothing is ours to do.  Only a pool with a limit
             * drops. */
            PP__CHECK(pool->mem_limit != 0);
            pp__dead_in_io_note(pool, n, false, &held);
            return;
        }
        if (pw & PP__F_HOT) {
            /* The final unpin is found on the word only; a promotion needs
             * !DEAD, so none comes after our CAS. */
            pp__hot_demote(pool, n, e);
            pw = pp__atomic_load_relaxed(&e->pw);
            continue;
        }
        pp__dead_in_io_note(pool, n, pp__pw_pins(pw) == 0 && (pw & PP__F_BUSY), &held);
        PP__YIELD(OWNER);
        if (pp__pw_kill(e, &pw, &next))
            break;
    }
    if (next & PP__F_QUEUED) {
        PP__YIELD(OWNER);
        pp__retire_push(pool, n, e, t);
    }
}
