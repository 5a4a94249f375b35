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
#include "swap/swap.h"

/* Loads e (claimed LOADING by the caller) and commits.  PP__LOAD_PIN takes
 * a pin in the commit (and DIRTY with PP_PIN_WRITE); evictor is the node
 * whose swap thread runs the load (it may evict for it, never waits). */
static int load_run(pp_pool_t *pool, unsigned n, pp__entry_t *e, enum pp__load_mode mode,
                    unsigned flags, pp__node_t *evictor, pp__thread_t *t, void **data)
{
    /* Pre (internal.h): the caller claimed LOADING on a swapped entry of
     * node n. */
    PP__ASSERT((pp__atomic_load_relaxed(&e->pw) &
                (PP__F_LIVE | PP__F_LOADING | PP__F_SWAPPED | PP__F_RESIDENT)) ==
               (PP__F_LIVE | PP__F_LOADING | PP__F_SWAPPED));
    pp__node_t *node = pool->nodes[n];
    size_t size = pp__cold(e)->size;
    uint64_t t0 = pp__tevent_start(pool);
    pp_ref_t ref = t0 == 0 ? 0 : pp__ref_make(n, pp__cold(e)->slot,
                                              pp__word_gen(pp__atomic_load_relaxed(&e->pw)));
    int rc = evictor != NULL ? pp__evict_room(pool, evictor, size) : pp__room_reserve(pool, size);
    void *mem = NULL;
    if (rc == 0) {
        rc = pp__swap_load(pool, node, e, &mem);
        if (rc != 0)
            pp__mem_unreserve(pool, size);
    }
    /* Before the commit: whoever waits for this load sees its span. */
    pp__tevent_span(pool, t, PP__TEV_LOAD, t0, ref, size, n, 0, rc);
    return pp__ioend_load(pool, n, e, mode, flags, rc, mem, t, data);
}

/* Queues a load (pp__load_start); e is claimed LOADING. */
static int load_queue(pp_pool_t *pool, pp__entry_t *e, pp_ref_t ref)
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
    pp__thread_t *t = pp__tevent_on(pool) ? pp__thread_get(pool) : NULL;
    if (t != NULL) {
        /* Before the push: the flow starts before the load can. */
        uint64_t now = pp__wait_now_ns();
        pp__tev_t ev = {.t0 = now, .t1 = now, .ref = ref, .kind = PP__TEV_QUEUE,
                        .node = (uint16_t)node->index};
        pp__tevent_add(pool, t, &ev);
    }
    /* The push's CAS hands the claimed entry to the swap thread. */
    ck_stack_push_upmc(&node->sw.load_q, &pp__cold(e)->q.link);
    ck_ec32_inc(&node->sw.io_wake, &pp__wait_ec_mode);
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
        return load_queue(pool, e, ref);
    pp__atomic_add_seq_cst(&pool->cb_loads, 1);
    int rc = pp__atomic_load_seq_cst(&pool->io_closed) ? PP_EAGAIN : load_queue(pool, e, ref);
    /* release: the push happens before destroy's acquire of the count. */
    pp__atomic_sub_release(&pool->cb_loads, 1);
    return rc;
}

int pp__load_pin(pp_pool_t *pool, unsigned n, pp__entry_t *e, unsigned flags, pp__thread_t *t,
                 void **data)
{
    return load_run(pool, n, e, PP__LOAD_PIN, flags, NULL, t, data);
}

int pp__load_only(pp_pool_t *pool, unsigned n, pp__entry_t *e, pp__node_t *evictor,
                  pp__thread_t *t)
{
    return load_run(pool, n, e, PP__LOAD_ONLY, 0, evictor, t, NULL);
}
