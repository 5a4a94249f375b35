/*
 * mem.c -- memory reservations against the pool's mem_limit.
 *
 * pool->resident counts the bytes reserved for resident data, loads in
 * progress included, and never passes mem_limit: a put or a load reserves
 * before its memory exists.  A reservation that crosses the high watermark
 * (15/16 of the limit) wakes the swap threads; one that does not fit asks
 * them for room (a numbered request), waits until every node's thread has
 * run a pass after the request, and gives up with PP_ENOMEM if every
 * node's last pass was stuck (still needed, nothing freed) twice in a row
 * with no eviction or load anywhere in between.  Swap threads never wait
 * for room: a load they run that does not fit after a pass of their own is
 * dropped (the pin that needs it loads it).
 */
#include <time.h>

#include "internal.h"

/* How long a put or load short of room waits for reclaimers that free
 * nothing before it gives up (PP_ENOMEM). */
#define PP__DYING_WAIT_NS 10000000L

static void pp__kick_all(pp_pool_t *pool)
{
    for (unsigned n = 0; n < pool->nnodes; n++)
        ck_ec32_inc(&pool->nodes[n]->sw.io_wake, &pp__ec_mode);
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
        p += pp__atomic_load_relaxed(&node->sw.ev_written) +
             pp__atomic_load_relaxed(&node->sw.ev_clean) + pp__atomic_load_relaxed(&node->sw.loads);
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
                served = pp__atomic_load_acquire(&pool->nodes[n]->sw.pass_seq) >= seq;
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
            stuck = pp__atomic_load_relaxed(&pool->nodes[n]->sw.pass_stuck) != 0;
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
            uint64_t dying = 0, frees = 0, polls = 0;
            for (unsigned n = 0; n < pool->nnodes; n++) {
                dying += pp__atomic_load_relaxed(&pool->nodes[n]->prod.dying_bytes);
                frees += pp__atomic_load_relaxed(&pool->nodes[n]->rc.frees);
                polls += pp__atomic_load_relaxed(&pool->nodes[n]->rc.grace_polls);
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
                uint64_t later = 0, later_polls = 0;
                for (unsigned n = 0; n < pool->nnodes; n++) {
                    later += pp__atomic_load_relaxed(&pool->nodes[n]->rc.frees);
                    later_polls += pp__atomic_load_relaxed(&pool->nodes[n]->rc.grace_polls);
                }
                /* Nothing freed for 10 ms although the reclaimers polled
                 * the epoch: a grace period is held back, PP_ENOMEM.  A
                 * reclaimer that did not poll at all had no CPU (busy
                 * threads outnumber the CPUs): wait for it again. */
                if (later == frees && later_polls >= polls + 2)
                    break;
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

int pp__mem_reserve_nowait(pp_pool_t *pool, size_t size)
{
    if (pool->mem_limit == 0 || pp__mem_try(pool, size))
        return 0;
    if (!pool->swap || size > pool->mem_limit)
        return PP_ENOMEM;
    /* It would have waited: have the swap threads make room for a retry. */
    pp__kick_all(pool);
    return PP_EAGAIN;
}
