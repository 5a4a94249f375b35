/*
 * ioend.c -- how an entry's I/O ends, and the wait for it.
 *
 * An eviction ends with its commit, which frees the memory, or its
 * abandon, which leaves the entry resident (pp__ioend_evict).  A load ends
 * with its commit, which makes the entry resident, or its failure, which
 * leaves it swapped (pp__ioend_load).  Each ends with the CAS that clears
 * its BUSY flag (entry.h).  Then pp__ioend_finish queues the entry if it died
 * meanwhile and wakes the node's waiters.  pp__ioend_wait_evict is such a
 * waiter: a pinner, or pp_get, whose entry is being written out waits
 * until the eviction lets go.
 *
 * Both engines end here: the thread engine on the thread that did the
 * I/O (evict.c, load.c), the io_uring engine on the swap thread when the
 * last request completes (xfer.c).  Nothing here calls back into them.
 */
#include <stdlib.h>

#include "swap/swap.h"

void pp__ioend_finish(pp_pool_t *pool, unsigned n, pp__entry_t *e, uint64_t next, pp__thread_t *t)
{
    /* Pre (internal.h): next, the word the ender installed, has no I/O in
     * flight; QUEUED only on a dead, unpinned entry. */
    PP__ASSERT(!(next & PP__F_BUSY));
    PP__ASSERT(!(next & PP__F_QUEUED) || ((next & PP__F_DEAD) && pp__pw_pins(next) == 0));
    if (next & PP__F_QUEUED) {
        /* Only an entry that died during the I/O, or was dropped, is
         * queued here, and its final release or unpin, or its drop,
         * counted it in dead_in_io. */
        pp__retire_push(pool, n, e, t);
        /* release: orders the push (and its queued count) before the
         * decrement, for pp_pool_drain, which reads this count first. */
        pp__atomic_add_release(&pool->nodes[n]->prod.dead_in_io, -1);
    }
    ck_ec32_inc(&pool->nodes[n]->sw.io_done, &pp__wait_ec_mode);
}

void pp__ioend_wait_evict(pp_pool_t *pool, unsigned n, pp__entry_t *e)
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
        ck_ec32_wait(&node->sw.io_done, &pp__wait_ec_mode, seen, NULL);
    }
}

static void data_free(const pp_type_t *type, void *data, size_t size)
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
void pp__ioend_abandon(pp_pool_t *pool, pp__node_t *node, pp__entry_t *e, bool kept,
                       bool lost, pp__thread_t *t)
{
    if (lost)
        pp__counter_add(&node->sw.ev_abandoned, 1);
    uint64_t pw = pp__atomic_load_relaxed(&e->pw), next;
    while (!pp__pw_abandon_evict(e, &pw, kept, &next))
        ;
    pp__ioend_finish(pool, node->index, e, next, t);
}

/* The end of an eviction of e (claimed: the word its claim set; slot: the
 * hand's), once its copy is written (rc 0), or was already (write false),
 * or its write failed (rc): commits it swapped, freeing its memory, or
 * gives the claim up with the entry resident.  Returns the bytes freed. */
uint64_t pp__ioend_evict(pp_pool_t *pool, pp__node_t *node, pp__entry_t *e, uint32_t slot,
                         uint64_t claimed, bool write, int rc, pp__thread_t *t, pp__keep_fn keep)
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
            /* Flat memory goes to a queued load if one waits: keep, the
             * io_uring engine's (xfer.c), takes it. */
            if ((type != NULL && type->free != NULL) || keep == NULL ||
                !keep(pool, node, t, data, size))
                data_free(type, data, size);
            pp__atomic_sub_relaxed(&node->put.resident_bytes, size);
            pp__counter_add(write ? &node->sw.ev_written : &node->sw.ev_clean, 1);
            if (pp__advise_of(node, slot, done) == PP_ADVISE_WONTNEED) {
                pp__advise_consume(node, slot, done, PP_ADVISE_WONTNEED);
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
    pp__ioend_abandon(pool, node, e, write && rc == 0, rc == 0 || rc == PP_EAGAIN, t);
    return 0;
}

/* Ends a load of e that got rc (0: mem holds its data, its bytes
 * reserved): makes the entry resident, pinned in the same CAS for
 * PP__LOAD_PIN, or leaves it swapped on failure; then ends the I/O. */
int pp__ioend_load(pp_pool_t *pool, unsigned n, pp__entry_t *e, enum pp__load_mode mode,
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
    pp__ioend_finish(pool, n, e, next, t);
    if (rc == 0 && pin) {
        if (pw & PP__F_DEAD)
            return PP_ESTALE;            /* it died while loading */
        if (data != NULL)
            *data = mem;
    }
    return rc;
}

int pp__ioend_load_only(pp_pool_t *pool, unsigned n, pp__entry_t *e, int rc, void *mem,
                        pp__thread_t *t)
{
    return pp__ioend_load(pool, n, e, PP__LOAD_ONLY, 0, rc, mem, t, NULL);
}

void pp__ioend_cancel_load(pp_pool_t *pool, pp__node_t *node, pp__entry_t *e)
{
    uint64_t pw = pp__atomic_load_relaxed(&e->pw), next;
    while (!pp__pw_fail_load(e, &pw, &next))
        ;
    pp__ioend_finish(pool, node->index, e, next, node->sw.st);
}
