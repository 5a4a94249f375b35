/*
 * mem.c -- the count of memory reserved against the pool's mem_limit.
 *
 * pool->resident counts the bytes reserved for resident data, loads in
 * progress included, and never passes mem_limit: a put or a load reserves
 * before its memory exists.  A reservation that crosses the high watermark
 * (15/16 of the limit) wakes the swap threads, so they evict ahead of
 * need.  Nothing here waits: a reservation that does not fit fails, and
 * room.c decides whether to wait for room, ask for it, or give up.
 */
#include "swap/swap.h"

void pp__mem_kick_all(pp_pool_t *pool)
{
    for (unsigned n = 0; n < pool->nnodes; n++)
        ck_ec32_inc(&pool->nodes[n]->sw.io_wake, &pp__wait_ec_mode);
}

void pp__mem_discard_freed(pp_pool_t *pool)
{
    /* Between the unreserve and the end of its count in discard_dying, a
     * free of a DISCARD entry makes the pool look lower than it is to a
     * pass (is_above: resident bytes minus dying ones), which may have
     * stopped there; past the high watermark nothing else would start
     * another. */
    if (pool->swap && pp__atomic_load_relaxed(&pool->resident) > pool->high_wm)
        pp__mem_kick_all(pool);
}

bool pp__mem_try(pp_pool_t *pool, size_t size)
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
        pp__mem_kick_all(pool);              /* evict ahead of need */
    return true;
}

void pp__mem_unreserve(pp_pool_t *pool, size_t size)
{
    if (pool->mem_limit == 0)
        return;
    pp__atomic_sub_relaxed(&pool->resident, size);
    if (pp__atomic_load_relaxed(&pool->room_want) != 0)
        ck_ec32_inc(&pool->room_ec, &pp__wait_ec_mode);   /* room waiters, swap or drops */
}

int pp__mem_take(pp_pool_t *pool, size_t size)
{
    return pool->mem_limit == 0 || pp__mem_try(pool, size) ? 0 : PP_ENOMEM;
}
