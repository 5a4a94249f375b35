/*
 * tevent.c -- the events of the timeline trace (core.h): each thread's
 * buffer, appended to by the thread and emptied by the trace's writer
 * (api/trace.c).
 *
 * A buffer is two arrays of PP__TBUF_EVENTS events: the thread fills one,
 * the writer swaps it for the other it has written out.  Both take the
 * buffer's lock, the thread for one append, the writer for one swap, so
 * neither waits for long; events are recorded on slow paths only (an
 * I/O, a wait, a reclaim round), never by a pin that finds its entry
 * resident.  An event that finds its array full is dropped and counted:
 * the writer says how many in the trace.
 */
#include <stdlib.h>

#include "core/core.h"

struct pp__tbuf {
    pthread_mutex_t lock;
    pp__tev_t *ev;                       /* the thread's array (under lock) */
    pp__tev_t *spare;                    /* the writer's */
    uint32_t n;                          /* events in ev (under lock) */
    uint64_t dropped;                    /* since the last take (under lock) */
    unsigned role, node;                 /* pp__tevent_role */
    struct pp__tbuf *next;
};

static pp__tbuf_t *tbuf_new(pp_pool_t *pool, pp__thread_t *t)
{
    pp__tbuf_t *b = pp__alloc_zeroed(1, sizeof *b);
    if (b == NULL)
        return NULL;
    b->ev = pp__alloc_zeroed(PP__TBUF_EVENTS, sizeof *b->ev);
    b->spare = pp__alloc_zeroed(PP__TBUF_EVENTS, sizeof *b->spare);
    if (b->ev == NULL || b->spare == NULL || pthread_mutex_init(&b->lock, NULL) != 0) {
        pp__alloc_free(b->ev);
        pp__alloc_free(b->spare);
        pp__alloc_free(b);
        return NULL;
    }
    for (unsigned n = 0; n < pool->nnodes; n++) {
        if (pool->nodes[n]->sw.st == t)
            b->role = 1, b->node = n;
        else if (pool->nodes[n]->rc.rt == t)
            b->role = 2, b->node = n;
    }
    /* release: the buffer is made before the writer can find it. */
    pp__tbuf_t *head = pp__atomic_load_relaxed(&pool->tbufs);
    do {
        b->next = head;
    } while (!pp__atomic_cas_weak_release(&pool->tbufs, &head, b));
    t->tbuf = b;
    return b;
}

void pp__tevent_add(pp_pool_t *pool, pp__thread_t *t, pp__tev_t *ev)
{
    pp__tbuf_t *b = t->tbuf;
    if (b == NULL && (b = tbuf_new(pool, t)) == NULL) {
        pp__atomic_add_relaxed(&pool->trace_lost, 1);
        return;
    }
    ev->tid = pp__atomic_load_relaxed(&t->tid);
    pthread_mutex_lock(&b->lock);
    if (b->n < PP__TBUF_EVENTS)
        b->ev[b->n++] = *ev;
    else
        b->dropped++;
    pthread_mutex_unlock(&b->lock);
}

void pp__tevent_span(pp_pool_t *pool, pp__thread_t *t, unsigned kind, uint64_t t0,
                     pp_ref_t ref, uint64_t bytes, unsigned node, unsigned lane, int rc)
{
    if (t0 == 0 || t == NULL || !pp__tevent_on(pool))
        return;
    pp__tev_t ev = {.t0 = t0, .t1 = pp__wait_now_ns(), .ref = ref, .bytes = bytes,
                    .rc = rc, .kind = (uint16_t)kind, .node = (uint16_t)node,
                    .lane = (uint16_t)lane};
    pp__tevent_add(pool, t, &ev);
}

pp__tev_t *pp__tevent_take(pp__tbuf_t *b, uint32_t *n, uint64_t *dropped)
{
    pthread_mutex_lock(&b->lock);
    pp__tev_t *full = b->ev;
    b->ev = b->spare;
    b->spare = full;
    *n = b->n;
    *dropped = b->dropped;
    b->n = 0;
    b->dropped = 0;
    pthread_mutex_unlock(&b->lock);
    return full;
}

void pp__tevent_role(const pp__tbuf_t *b, unsigned *role, unsigned *node)
{
    *role = b->role;
    *node = b->node;
}

pp__tbuf_t *pp__tevent_next(const pp__tbuf_t *b) { return b->next; }

void pp__tevent_free_all(pp_pool_t *pool)
{
    /* Destroy: no thread records events any more. */
    pp__tbuf_t *b = pp__atomic_load_relaxed(&pool->tbufs);
    while (b != NULL) {
        pp__tbuf_t *next = b->next;
        pthread_mutex_destroy(&b->lock);
        pp__alloc_free(b->ev);
        pp__alloc_free(b->spare);
        pp__alloc_free(b);
        b = next;
    }
    pp__atomic_store_relaxed(&pool->tbufs, NULL);
}
