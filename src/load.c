/*
 * load.c -- loads from swap: the load itself and its commit, which makes
 * the entry resident and, for a pinning loader, pins it in the same CAS.
 * The transitions are drawn in entry.h; the bytes are read by swap.c.
 *
 * The first pinner of a swapped entry claims LOADING and loads it on its
 * own thread (pp__load_pin, from pin.c); later pinners wait on the node's
 * io_done event count for that load to end.  PP_PIN_NOWAIT and
 * pp_prefetch claim LOADING and queue the entry for the node's swap thread
 * (pp__load_start), which loads it without a pin (pp__load_only).
 */
#include "internal.h"

enum pp__load_mode { PP__LOAD_PIN, PP__LOAD_ONLY };

static int pp__load_commit(pp_pool_t *pool, unsigned n, pp__entry_t *e, enum pp__load_mode mode,
                           unsigned flags, int rc, void *mem, pp__thread_t *t, void **data);

/* Loads e (claimed LOADING by the caller) and commits.  PP__LOAD_PIN takes
 * a pin in the commit (and DIRTY with PP_PIN_WRITE); evictor is the node
 * whose swap thread runs the load (it may evict for it, never waits). */
static int pp__load_run(pp_pool_t *pool, unsigned n, pp__entry_t *e, enum pp__load_mode mode,
                        unsigned flags, pp__node_t *evictor, pp__thread_t *t, void **data)
{
    /* Pre (internal.h): the caller claimed LOADING on a swapped entry of
     * node n. */
    PP__ASSERT((pp__atomic_load_relaxed(&e->pw) &
                (PP__F_LIVE | PP__F_LOADING | PP__F_SWAPPED | PP__F_RESIDENT)) ==
               (PP__F_LIVE | PP__F_LOADING | PP__F_SWAPPED));
    pp__node_t *node = pool->nodes[n];
    size_t size = pp__cold(e)->size;
    int rc = pp__mem_reserve(pool, size, evictor == NULL);
    if (rc != 0 && evictor != NULL && size <= pool->mem_limit) {
        pp__atomic_add_relaxed(&pool->room_want, size);
        bool stuck;
        (void)pp__evict_pass(pool, evictor, true, &stuck, evictor->sw.st);
        pp__atomic_sub_relaxed(&pool->room_want, size);
        rc = pp__mem_reserve(pool, size, false);
    }
    void *mem = NULL;
    if (rc == 0) {
        rc = pp__swap_load(pool, node, e, &mem);
        if (rc != 0)
            pp__mem_unreserve(pool, size);
    }
    return pp__load_commit(pool, n, e, mode, flags, rc, mem, t, data);
}

/* Ends a load of e that got rc (0: mem holds its data, its bytes
 * reserved): makes the entry resident, pinned in the same CAS for
 * PP__LOAD_PIN, or leaves it swapped on failure; then ends the I/O. */
static int pp__load_commit(pp_pool_t *pool, unsigned n, pp__entry_t *e, enum pp__load_mode mode,
                           unsigned flags, int rc, void *mem, pp__thread_t *t, void **data)
{
    pp__node_t *node = pool->nodes[n];
    if (rc == 0) {
        size_t size = pp__cold(e)->size;
        e->data = mem;                   /* nobody reads it while LOADING */
        /* Counted before the commit: once it is made, the entry may be
         * queued and its reclaimer subtract these. */
        pp__atomic_add_relaxed(&node->put.resident_bytes, size);
        pp__atomic_sub_relaxed(&node->sw.swapped_bytes, size);
        pp__atomic_add_relaxed(&node->sw.loads, 1);
    }
    PP__YIELD(LOAD);
    bool pin = mode == PP__LOAD_PIN;
    uint64_t pw = pp__atomic_load_relaxed(&e->pw), next;
    while (rc == 0 ? !pp__pw_commit_load(e, &pw, pin, pp__pin_bits(flags), &next)
                   : !pp__pw_fail_load(e, &pw, &next))
        ;
    pp__io_end(pool, n, e, next, t);
    if (rc == 0 && pin) {
        if (pw & PP__F_DEAD)
            return PP_ESTALE;            /* it died while loading */
        if (data != NULL)
            *data = mem;
    }
    return rc;
}

int pp__load_end(pp_pool_t *pool, unsigned n, pp__entry_t *e, int rc, void *mem,
                 pp__thread_t *t)
{
    return pp__load_commit(pool, n, e, PP__LOAD_ONLY, 0, rc, mem, t, NULL);
}

/* Queues a load (pp__load_start); e is claimed LOADING. */
static int pp__load_queue(pp_pool_t *pool, pp__entry_t *e, pp_ref_t ref)
{
    uint64_t pw = pp__atomic_load_relaxed(&e->pw);
    for (;;) {
        if (!pp__pw_alive(pw, pp_ref_gen(ref)))
            return PP_ESTALE;
        if (pw & (PP__F_RESIDENT | PP__F_LOADING))
            return 0;
        if (pp__pw_claim_load(e, &pw))
            break;
    }
    PP__YIELD(LOAD);
    pp__node_t *node = pool->nodes[pp_ref_node(ref)];
    /* The push's CAS hands the claimed entry to the swap thread. */
    ck_stack_push_upmc(&node->sw.load_q, &pp__cold(e)->q.link);
    ck_ec32_inc(&node->sw.io_wake, &pp__ec_mode);
    return 0;
}

int pp__load_start(pp_pool_t *pool, pp__entry_t *e, pp_ref_t ref)
{
    /* Only a callback may call while destroy stops the swap threads
     * (docs/api.md, "Callbacks"): it counts itself in cb_loads, then looks
     * at io_closed.  seq_cst: against destroy's store of io_closed before
     * its read of the count (pp_pool_destroy): either destroy waits for
     * this push, which the swap thread's last round then cancels, or this
     * call sees the pool closed and queues nothing. */
    if (!pp__in_callback())
        return pp__load_queue(pool, e, ref);
    pp__atomic_add_seq_cst(&pool->cb_loads, 1);
    int rc = pp__atomic_load_seq_cst(&pool->io_closed) ? PP_EAGAIN : pp__load_queue(pool, e, ref);
    /* release: the push happens before destroy's acquire of the count. */
    pp__atomic_sub_release(&pool->cb_loads, 1);
    return rc;
}

int pp__load_pin(pp_pool_t *pool, unsigned n, pp__entry_t *e, unsigned flags, pp__thread_t *t,
                 void **data)
{
    return pp__load_run(pool, n, e, PP__LOAD_PIN, flags, NULL, t, data);
}

int pp__load_only(pp_pool_t *pool, unsigned n, pp__entry_t *e, pp__node_t *evictor,
                  pp__thread_t *t)
{
    return pp__load_run(pool, n, e, PP__LOAD_ONLY, 0, evictor, t, NULL);
}
