/*
 * backlog.c -- the bound on each node's reclaim backlog: the dead entries
 * queued for its reclaimer or in their grace period (pinpool.h,
 * "Overload").
 *
 * The backlog is one counter per node, beside resident_bytes on the line
 * every put writes (types.h): a push adds an entry's charge (its bytes in
 * memory and its slot), the reclaimer subtracts it after the free.  A put
 * reads the counter on that line, and only if it is at or above the wait
 * mark (a quarter of the bound) takes the slow path here: it counts itself in
 * `waiters`, then sleeps on the node's event count until the reclaimer,
 * whose subtraction takes the backlog below the mark, bumps it.  Final
 * unpins and releases only add: they never wait.  The reclaimer depends
 * on epoch sections only, so the one wait that could close a cycle, a
 * QSBR thread's put inside its own section, is refused (PP_EDEADLK).
 */
#include "core/core.h"

void pp__backlog_init(pp_pool_t *pool, size_t bound)
{
    if (bound == 0)
        bound = PP_RECLAIM_BACKLOG_DEFAULT;
    if (bound == PP_RECLAIM_BACKLOG_NONE) {
        pool->backlog_bound = pool->backlog_mark = UINT64_MAX;
        return;
    }
    pool->backlog_bound = bound;
    pool->backlog_mark = bound / 4 + (bound % 4 != 0);   /* a quarter, at least 1 */
    for (unsigned n = 0; n < pool->nnodes; n++)
        ck_ec32_init(&pool->nodes[n]->bl.ec, 0);
}

static void max_relaxed(_Atomic uint64_t *max, uint64_t v)
{
    uint64_t cur = pp__atomic_load_relaxed(max);
    while (v > cur && !pp__atomic_cas_weak_relaxed(max, &cur, v))
        ;
}

void pp__backlog_add(pp__node_t *node, uint64_t charge)
{
    /* relaxed: a count; the push that follows (a release CAS) orders it
     * before the reclaimer's subtraction. */
    uint64_t now = pp__atomic_add_relaxed(&node->put.backlog, charge) + charge;
    if (now > pp__atomic_load_relaxed(&node->put.backlog_peak))
        max_relaxed(&node->put.backlog_peak, now);
}

void pp__backlog_sub(pp_pool_t *pool, pp__node_t *node, uint64_t charge)
{
    uint64_t mark = pool->backlog_mark;
    uint64_t old = pp__atomic_sub_relaxed(&node->put.backlog, charge);
    PP__CHECK(old >= charge);
    if (old < mark || old - charge >= mark)
        return;                          /* did not cross the mark */
    /* seq_cst: orders the subtraction before the read of `waiters`,
     * against a waiter's seq_cst increment of `waiters` before its read of
     * the backlog (pp__backlog_wait): either it sees the backlog below the
     * mark, or we see it waiting and bump the event count. */
    pp__atomic_fence_seq_cst();
    if (pp__atomic_load_relaxed(&node->bl.waiters) != 0)
        ck_ec32_inc(&node->bl.ec, &pp__wait_ec_mode);
}

int pp__backlog_wait(pp_pool_t *pool, unsigned n, pp__thread_t *t, unsigned flags)
{
    pp__node_t *node = pool->nodes[n];
    uint64_t mark = pool->backlog_mark;
    if ((flags & PP_PUT_NOWAIT) || t->in_section) {
        pp__atomic_add_relaxed(&node->bl.refused, 1);   /* any putter */
        return (flags & PP_PUT_NOWAIT) ? PP_EAGAIN : PP_EDEADLK;
    }
    uint64_t t0 = pp__wait_now_ns();
    /* seq_cst: see pp__backlog_sub. */
    pp__atomic_add_seq_cst(&node->bl.waiters, 1);
    for (;;) {
        /* Snapshot before the look: a bump after the look changes it, so
         * the wait cannot miss it.  The acquire fence keeps the look after
         * the snapshot; it pairs with the bump in pp__backlog_sub, which
         * follows the subtraction, so a snapshot that sees the bump also
         * sees the backlog it lowered. */
        uint32_t seen = ck_ec32_value(&node->bl.ec);
        pp__atomic_fence_acquire();
        if (pp__atomic_load_seq_cst(&node->put.backlog) < mark)
            break;
        ck_ec32_wait(&node->bl.ec, &pp__wait_ec_mode, seen, NULL);
    }
    pp__atomic_sub_relaxed(&node->bl.waiters, 1);
    uint64_t dt = pp__wait_now_ns() - t0;
    pp__atomic_add_relaxed(&node->bl.waits, 1);
    pp__atomic_add_relaxed(&node->bl.wait_ns, dt);
    max_relaxed(&node->bl.wait_max_ns, dt);
    return 0;
}
