/*
 * room.c -- waiting for room under the pool's mem_limit (mem.c counts it).
 *
 * A put or a pinning load that does not fit asks the swap threads for
 * room (a numbered request), waits until every node's thread has run a
 * pass after the request, and gives up with PP_ENOMEM if every node's last
 * pass was stuck (still needed, nothing freed) twice in a row with no
 * eviction or load anywhere in between.  Swap threads never wait for room:
 * a load they run that does not fit after a pass of their own is dropped
 * (the pin that needs it loads it).
 *
 * PP_TYPE_DISCARD entries.  A pass drops them rather than write them
 * (evict.c).  Their bytes are freed by the reclaimer after a grace period,
 * and until then the passes count them as room on its way.  So a waiter
 * whose room is among them waits for their frees (dying_wait) instead
 * of asking again.  Without swap there are no swap threads, and nothing
 * but those entries to evict: a put that does not fit runs the nodes'
 * hands itself, one putter at a time (drop_pass), then waits for the
 * frees the same way.  A pool without DISCARD entries keeps its hard cap:
 * PP_ENOMEM at once.
 */
#include <time.h>

#include "swap/swap.h"

/* How long a put or load short of room waits for reclaimers that free
 * nothing before it gives up (PP_ENOMEM). */
#define PP__DYING_WAIT_NS 10000000L

/* Evictions, drops and loads done so far, all nodes: passes that each
 * found nothing may have run at different moments, and between them loads
 * may have made entries resident that can go now. */
static uint64_t room_progress(pp_pool_t *pool)
{
    uint64_t p = 0;
    for (unsigned n = 0; n < pool->nnodes; n++) {
        pp__node_t *node = pool->nodes[n];
        p += pp__atomic_load_relaxed(&node->sw.ev_written) +
             pp__atomic_load_relaxed(&node->sw.ev_clean) + pp__atomic_load_relaxed(&node->sw.drops) +
             pp__atomic_load_relaxed(&node->sw.loads);
    }
    return p;
}

/* After passes that left no room: waits for bytes of dead entries on their
 * way to their reclaimers -- those of DISCARD entries only (discard: the
 * passes did not evict for them, is_above), or every dying byte (the
 * passes found nothing to evict).  1: size fits now (reserved); 0: bytes
 * were freed, or the reclaimers are still at it, or (discard) none is
 * dying any more: ask again; PP_ENOMEM: nothing is dying (not discard),
 * or this thread's own QSBR section holds that grace period back, or
 * reclaimers that poll their epoch freed nothing for 10 ms. */
static int dying_wait(pp_pool_t *pool, size_t size, bool discard)
{
    uint32_t seen = ck_ec32_value(&pool->room_ec);
    if (pp__mem_try(pool, size))
        return 1;
    /* acquire: pairs with the reclaimer's release of these counts, so a
     * byte no longer counted dying was unreserved before the last try. */
    uint64_t dying = discard ? pp__atomic_load_acquire(&pool->discard_dying) : 0;
    uint64_t frees = 0, polls = 0;
    for (unsigned n = 0; n < pool->nnodes; n++) {
        if (!discard) {
            /* acquire: as above. */
            dying += pp__atomic_load_acquire(&pool->nodes[n]->prod.dying_bytes);
        }
        frees += pp__atomic_load_relaxed(&pool->nodes[n]->rc.frees);
        polls += pp__atomic_load_relaxed(&pool->nodes[n]->rc.grace_polls);
    }
    if (dying == 0) {
        /* Freed since the try?  Of DISCARD bytes, those may have been
         * taken by others: ask again (the callers stop when nothing is
         * left to drop). */
        return pp__mem_try(pool, size) ? 1 : discard ? 0 : PP_ENOMEM;
    }
    pp__thread_t *t = pp__thread_get(pool);
    if (t == NULL || t->in_section)
        return PP_ENOMEM;
    /* Only while the reclaimers make progress: a grace period held back
     * by a QSBR thread that is itself blocked in the pool (waiting for a
     * load this thread makes, say) would otherwise never end. */
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_nsec += PP__DYING_WAIT_NS;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    if (ck_ec32_wait(&pool->room_ec, &pp__wait_ec_mode, seen, &deadline) != 0) {
        uint64_t later = 0, later_polls = 0;
        for (unsigned n = 0; n < pool->nnodes; n++) {
            later += pp__atomic_load_relaxed(&pool->nodes[n]->rc.frees);
            later_polls += pp__atomic_load_relaxed(&pool->nodes[n]->rc.grace_polls);
        }
        /* Nothing freed for 10 ms although the reclaimers polled the
         * epoch: a grace period is held back, PP_ENOMEM.  A reclaimer that
         * did not poll at all had no CPU (busy threads outnumber the
         * CPUs): wait for it again. */
        if (later == frees && later_polls >= polls + 2)
            return PP_ENOMEM;
    }
    return 0;
}

/* Asks every swap thread for a pass and waits for room. */
static int room_wait(pp_pool_t *pool, size_t size)
{
    int rc = PP_ENOMEM;
    uint64_t progress = UINT64_MAX;      /* at the last round of stuck passes */
    uint64_t t0 = pp__tevent_start(pool);
    pp__atomic_add_relaxed(&pool->room_waits, 1);
    pp__atomic_add_relaxed(&pool->room_want, size);
    for (;;) {
        uint64_t seq = pp__atomic_add_relaxed(&pool->room_req, 1) + 1;
        pp__mem_kick_all(pool);
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
                ck_ec32_wait(&pool->room_ec, &pp__wait_ec_mode, seen, NULL);
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
            uint64_t now = room_progress(pool);
            if (now != progress) {
                progress = now;
                continue;
            }
            /* Nothing evictable.  Bytes of dead entries on their way to
             * their reclaimers will be free after a grace period: wait for
             * them (below). */
        } else if (pp__atomic_load_relaxed(&pool->discard_dying) == 0) {
            continue;                    /* others took what was freed: ask again */
        }
        /* Stuck, or the room is on its way: DISCARD entries dropped (or
         * dead) and not yet freed, which the passes do not evict for.
         * Asking again at once would only spin until their free. */
        int w = dying_wait(pool, size, !stuck);
        if (w != 0) {
            rc = w > 0 ? 0 : PP_ENOMEM;
            break;
        }
        /* Dead entries were freed, or the reclaimers are at it: ask
         * again. */
    }
out:
    pp__atomic_sub_relaxed(&pool->room_want, size);
    if (rc != 0)
        pp__atomic_add_relaxed(&pool->room_enomem, 1);
    if (t0 != 0)
        pp__tevent_span(pool, pp__thread_get(pool), PP__TEV_ROOM_WAIT, t0, 0, size, 0, 0, rc);
    return rc;
}

/* The reclaimers' frees so far, all nodes. */
static uint64_t frees_so_far(pp_pool_t *pool)
{
    uint64_t f = 0;
    for (unsigned n = 0; n < pool->nnodes; n++)
        f += pp__atomic_load_relaxed(&pool->nodes[n]->rc.frees);
    return f;
}

#define PP__DROP_OTHER UINT64_MAX        /* drop_pass: another putter ran it */

/* Without swap: runs every node's CLOCK hand on the calling thread t,
 * which drops PP_TYPE_DISCARD entries (every other entry is NOSWAP here)
 * down to the low watermark, counting room_want and not the DISCARD bytes
 * already dying (evict.c); returns the bytes it dropped.  One putter at a
 * time: the hands and the counters they write are the swap threads' own
 * in a pool with swap, and have no thread here.  A putter that finds
 * another at it waits for the end of that pass if it may wait (and at once
 * if not), and returns PP__DROP_OTHER. */
static uint64_t drop_pass(pp_pool_t *pool, pp__thread_t *t, bool wait)
{
    uint32_t seen = ck_ec32_value(&pool->room_ec);
    int free_ = 0;
    /* acquire: pairs with the release below, so this pass finds the hands,
     * counters and advice bits as the last putter's pass left them. */
    if (!pp__atomic_cas_strong_acquire(&pool->drop_busy, &free_, 1)) {
        if (wait)
            ck_ec32_wait(&pool->room_ec, &pp__wait_ec_mode, seen, NULL);   /* bumped below */
        return PP__DROP_OTHER;
    }
    uint64_t dropped = 0;
    for (unsigned n = 0; n < pool->nnodes; n++) {
        bool stuck;
        dropped += pp__evict_pass(pool, pool->nodes[n], false, &stuck, t);
    }
    /* release: see the acquire above. */
    pp__atomic_store_release(&pool->drop_busy, 0);
    ck_ec32_inc(&pool->room_ec, &pp__wait_ec_mode);
    return dropped;
}

/* Without swap: room for a put that does not fit, by dropping DISCARD
 * entries (drop_pass) and waiting for their reclaimers to free them
 * (dying_wait).  PP_ENOMEM at once if no DISCARD entry is left (the
 * hard cap of a pool that has none), or once a pass of this thread's
 * dropped nothing with nothing dying, twice with no free in between (a
 * pass may stop short while a free is between its two counts, as evict.c's
 * is_above says, and others may take what was freed).  Without wait
 * (PP_PUT_NOWAIT): one pass, then PP_EAGAIN if something is on its way (a
 * retry may fit). */
static int room_drop(pp_pool_t *pool, size_t size, bool wait)
{
    if (pp__atomic_load_relaxed(&pool->discard_entries) == 0)
        return PP_ENOMEM;
    pp__thread_t *t = pp__thread_get(pool);
    if (t == NULL)
        return PP_ENOMEM;
    int rc;
    uint64_t progress = UINT64_MAX;      /* frees at the last empty pass */
    if (wait)
        pp__atomic_add_relaxed(&pool->room_waits, 1);
    pp__atomic_add_relaxed(&pool->room_want, size);
    for (;;) {
        uint64_t dropped = drop_pass(pool, t, wait);
        if (pp__mem_try(pool, size)) {
            rc = 0;
            break;
        }
        /* acquire: as in dying_wait. */
        bool dying = pp__atomic_load_acquire(&pool->discard_dying) != 0;
        if (!wait) {
            rc = !dying && pp__mem_try(pool, size) ? 0
                 : dropped == 0 && !dying          ? PP_ENOMEM
                                                   : PP_EAGAIN;
            break;
        }
        if (dropped == PP__DROP_OTHER)
            continue;                    /* another putter's pass ended: run ours */
        if (!dying && dropped == 0) {
            uint64_t now = frees_so_far(pool);
            if (now == progress) {
                rc = pp__mem_try(pool, size) ? 0 : PP_ENOMEM;
                break;
            }
            progress = now;
            continue;
        }
        rc = dying_wait(pool, size, true);
        if (rc != 0) {
            rc = rc > 0 ? 0 : PP_ENOMEM;
            break;
        }
    }
    pp__atomic_sub_relaxed(&pool->room_want, size);
    if (rc == PP_ENOMEM && wait)
        pp__atomic_add_relaxed(&pool->room_enomem, 1);
    return rc;
}

int pp__room_reserve(pp_pool_t *pool, size_t size)
{
    if (pp__mem_take(pool, size) == 0)
        return 0;
    if (size > pool->mem_limit)
        return PP_ENOMEM;                /* never fits: evict nothing for it */
    return pool->swap ? room_wait(pool, size) : room_drop(pool, size, true);
}

int pp__room_reserve_nowait(pp_pool_t *pool, size_t size)
{
    if (pp__mem_take(pool, size) == 0)
        return 0;
    if (size > pool->mem_limit)
        return PP_ENOMEM;
    if (!pool->swap)
        return room_drop(pool, size, false);
    /* It would have waited: have the swap threads make room for a retry.
     * A kick alone is not enough: below the high watermark a swap thread
     * runs a pass only for a new request, and a pass evicts down to the low
     * watermark only, so a NOWAIT caller of more than limit - low_wm bytes
     * between limit - size and the high watermark would retry forever.
     * The request makes a pass run; the hint makes it evict for size too
     * (the pass clears it). */
    for (unsigned n = 0; n < pool->nnodes; n++) {
        _Atomic uint64_t *h = &pool->nodes[n]->sw.room_hint;
        uint64_t hint = pp__atomic_load_relaxed(h);
        while (hint < size && !pp__atomic_cas_weak_relaxed(h, &hint, size))
            ;
    }
    pp__atomic_add_relaxed(&pool->room_req, 1);
    pp__mem_kick_all(pool);
    return PP_EAGAIN;
}
