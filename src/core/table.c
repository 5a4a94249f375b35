/*
 * table.c -- each node's table of entry slots.
 *
 * A table is one reserved range of address space (4 GiB, no memory:
 * pp__topology_table_reserve) with room for the hot records of every slot
 * a ref can name, then for their cold records (entry.h).  It is committed
 * a segment (PP__SEG_SLOTS slots) at a time, the first time a slot in the
 * segment is handed out: the segment's cold records, and the hot records
 * of four segments at once (2 MiB, one huge page), on the node's memory,
 * huge pages advised from the fifth segment on.  Segments are committed in
 * order, under the node's seg_lock, and never moved or uncommitted while
 * the pool lives; the count of committed slots (pool->fast.lim[n])
 * is published after each.  So the table grows without stopping or even
 * slowing readers: a lookup is the base plus the slot times 16, beside
 * one bounds check (pp__lookup), and a lookup with any ref, stale or
 * garbage, reads only memory that is committed.  The walks of the swap
 * thread and of pp__table_foreach find a segment the same way
 * (pp__table_segment): lim is the one word that says what is committed,
 * published by one release store per segment.
 *
 * Slot allocation, fastest first:
 *   1. the thread's magazine for the node (private list, no atomics);
 *   2. the node's free-slot stack, taken whole (ck_stack batch pop: one
 *      atomic exchange; ABA-free because nobody pops single entries);
 *   3. PP__SLOT_CHUNK fresh slots from the node's bump index.
 * The reclaimer pushes recycled slots onto the free-slot stack, one by one
 * (ck_stack push: multi-producer safe, so exiting threads can push their
 * magazines back too).
 *
 * Space: a magazine keeps what one batch pop gave it until the thread puts
 * on that node again or exits, so a node's table holds at most its peak of
 * live entries plus the slots parked in magazines -- each 64 bytes (16 hot,
 * 48 cold), never data.
 */
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

int pp__table_init(pp_pool_t *pool, pp__node_t *node)
{
    if ((node->table = pp__topology_table_reserve()) == NULL ||
        (pool->swap && (node->adv = pp__alloc_zeroed(PP__SEG_MAX, sizeof *node->adv)) == NULL) ||
        pthread_mutex_init(&node->seg_lock, NULL) != 0) {
        pp__alloc_free((void *)node->adv);
        node->adv = NULL;
        pp__topology_table_release(node->table);
        node->table = NULL;
        return PP_ENOMEM;
    }
    pool->fast.base[node->index] = node->table;
    pp__atomic_plain_store_relaxed(&pool->fast.lim[node->index], 0);
    pp__atomic_store_relaxed(&node->mem_bound, 1);   /* until a commit is not */
    ck_stack_init(&node->free_slots);
    pp__atomic_store_relaxed(&node->put.next_slot, 0);
    return 0;
}

void pp__table_free(pp_pool_t *pool, pp__node_t *node)
{
    if (node->table == NULL)
        return;
    pp__atomic_plain_store_relaxed(&pool->fast.lim[node->index], 0);
    pool->fast.base[node->index] = NULL;
    pp__topology_table_release(node->table);
    node->table = NULL;
    pthread_mutex_destroy(&node->seg_lock);
    if (node->adv != NULL) {
        for (uint32_t s = 0; s < PP__SEG_MAX; s++)
            pp__alloc_free(pp__atomic_load_relaxed(&node->adv[s]));
        pp__alloc_free((void *)node->adv);
        node->adv = NULL;
    }
}

/* Makes sure advice segment s of node exists (swap pools): before the
 * entry segment, so that every entry a lookup finds has its advice. */
static bool advseg_get(pp__node_t *node, uint32_t s)
{
    /* acquire: pairs with the release-install below. */
    if (node->adv == NULL || pp__atomic_load_acquire(&node->adv[s]) != NULL)
        return true;
    pp__advseg_t *fresh = pp__alloc_zeroed(1, sizeof *fresh);
    if (fresh == NULL)
        return false;
    pp__advseg_t *expected = NULL;
    /* acq_rel: release publishes the zeroed segment (and, through the
     * entry segment's release-install that follows, to every lookup). */
    if (!pp__atomic_cas_strong_acq_rel(&node->adv[s], &expected, fresh))
        pp__alloc_free(fresh);
    return true;
}

/* Segments from this one on get huge pages.  A table's first four, 8 MiB
 * of records, fit a 2048-entry TLB in 4 KiB pages anyway, while a huge
 * page's first touch zeroes 2 MiB at once, in the put that takes its first
 * slot, and may have the kernel compact memory: small pools, of which a
 * process may have many, are spared that. */
#define PP__SEG_HUGE_FROM 4u
/* Segments whose hot records share a huge page (2 MiB). */
#define PP__SEG_PER_HOT_PAGE ((uint32_t)((2u << 20) / PP__SEG_HOT_BYTES))

/* Commits segment k of node: its cold records, and the hot records of the
 * huge page it starts, if it starts one. */
static bool segment_commit(pp_pool_t *pool, pp__node_t *node, uint32_t k)
{
    bool huge = k >= PP__SEG_HUGE_FROM, bound_hot = true, bound_cold;
    if (k % PP__SEG_PER_HOT_PAGE == 0 &&
        !pp__topology_table_commit(pool, node->index, node->table + (size_t)k * PP__SEG_HOT_BYTES,
                                   PP__SEG_PER_HOT_PAGE * PP__SEG_HOT_BYTES, huge, &bound_hot))
        return false;
    char *cold = node->table + PP__TABLE_HOT_BYTES + (size_t)k * PP__SEG_COLD_BYTES;
    if (!pp__topology_table_commit(pool, node->index, cold, PP__SEG_COLD_BYTES, huge, &bound_cold))
        return false;   /* a hot page committed stays so: the next try commits it again */
    if (!bound_hot || !bound_cold)
        pp__atomic_store_relaxed(&node->mem_bound, 0);   /* read only by stats */
    return true;
}

/* Makes sure segment s of node exists: commits it and every segment
 * before it not yet committed, in order, so that the slots below lim are
 * always committed ones. */
static pp__entry_t *segment_get(pp_pool_t *pool, pp__node_t *node, uint32_t s)
{
    pp__entry_t *seg = (pp__entry_t *)(void *)(node->table + (size_t)s * PP__SEG_HOT_BYTES);
    /* A slot handed out must be one that lookups find, whoever committed
     * its segment: the test is theirs.  acquire: pairs with the release of
     * lim below (the segment's records, zeroed, and its advice). */
    if (s < pp__atomic_plain_load_acquire(&pool->fast.lim[node->index]) >> PP__SEG_SHIFT)
        return seg;
    PP__TEST_POINT(SEG_LOCK, node);
    pthread_mutex_lock(&node->seg_lock);
    uint32_t k = pool->fast.lim[node->index] >> PP__SEG_SHIFT;   /* under seg_lock */
    for (; k <= s; k++) {
        if (!advseg_get(node, k) || !segment_commit(pool, node, k))
            break;
        PP__TEST_POINT(SEG_PUBLISH, node);
        /* release: publishes the committed segment (and its advice) to
         * lookups, to the puts above and to the walks (pp__table_segment). */
        pp__atomic_plain_store_release(&pool->fast.lim[node->index], (k + 1) << PP__SEG_SHIFT);
    }
    pthread_mutex_unlock(&node->seg_lock);
    return k > s ? seg : NULL;
}

/* Takes PP__SLOT_CHUNK fresh slots into the magazine. */
static bool slots_bump(pp_pool_t *pool, pp__node_t *node, pp__magazine_t *mag)
{
    uint32_t start = pp__atomic_load_relaxed(&node->put.next_slot);
    do {
        if (start > PP__MAX_SLOTS - PP__SLOT_CHUNK)
            return false;   /* table full */
    } while (!pp__atomic_cas_weak_relaxed(&node->put.next_slot, &start, start + PP__SLOT_CHUNK));

    pp__entry_t *seg = segment_get(pool, node, start >> PP__SEG_SHIFT);
    if (seg == NULL)
        return false;   /* those slots stay unused: no entry ever named them */
    /* PP__SEG_SLOTS is a multiple of PP__SLOT_CHUNK: one segment. */
    pp__entry_t *base = &seg[start & (PP__SEG_SLOTS - 1)];
    for (uint32_t i = PP__SLOT_CHUNK; i-- > 0;) {
        pp__cold_t *c = pp__cold(&base[i]);
        c->slot = start + i;
        c->q.link.next = mag->head;
        mag->head = &c->q.link;
    }
    return true;
}

pp__entry_t *pp__table_slot_alloc(pp_pool_t *pool, unsigned n, pp__thread_t *t)
{
    pp__node_t *node = pool->nodes[n];
    pp__magazine_t *mag = &t->mag[n];
    if (mag->head == NULL) {
        /* Whole stack at once; the entries' links were written by the
         * pushers before their CAS, which this exchange acquires. */
        mag->head = ck_stack_batch_pop_upmc(&node->free_slots);
        if (mag->head == NULL && !slots_bump(pool, node, mag))
            return NULL;
    }
    ck_stack_entry_t *s = mag->head;
    mag->head = s->next;
    pp__entry_t *e = pp__entry_of_link(s);
    /* The next put's records come in meanwhile: its cold record (the next
     * link is in it) and its hot one, both last written by the reclaimer,
     * often on another CPU. */
    if (mag->head != NULL) {
        __builtin_prefetch(mag->head, 1, 3);
        __builtin_prefetch(pp__entry_of_link(mag->head), 1, 3);
    }
    /* A slot handed out is free, in its node's range, in an existing segment. */
    PP__ASSERT(!(pp__atomic_load_relaxed(&e->pw) & PP__F_LIVE));
    PP__ASSERT(pp__cold(e)->slot < pp__atomic_load_relaxed(&node->put.next_slot));
    PP__ASSERT(pp__lookup(pool, pp__ref_make(n, pp__cold(e)->slot, 1)) == e);
    return e;
}

void pp__table_slot_free(pp_pool_t *pool, unsigned n, pp__entry_t *e)
{
    ck_stack_push_upmc(&pool->nodes[n]->free_slots, &pp__cold(e)->q.link);
}

void pp__table_magazine_return(pp_pool_t *pool, pp__thread_t *t)
{
    for (unsigned n = 0; n < pool->nnodes; n++) {
        ck_stack_entry_t *s = t->mag[n].head;
        while (s != NULL) {
            ck_stack_entry_t *next = s->next;
            ck_stack_push_upmc(&pool->nodes[n]->free_slots, s);
            s = next;
        }
        t->mag[n].head = NULL;
    }
}

void pp__table_foreach(pp_pool_t *pool, unsigned n,
                       void (*fn)(pp_pool_t *, unsigned, pp__entry_t *, void *),
                       void *arg)
{
    pp__node_t *node = pool->nodes[n];
    /* Single-threaded use (destroy, validation); acquire anyway so a caller
     * that synchronised with the putters sees every bumped chunk. */
    uint32_t end = pp__atomic_load_acquire(&node->put.next_slot);
    if (end > PP__MAX_SLOTS)
        end = PP__MAX_SLOTS;
    for (uint32_t s = 0; s < end; s += PP__SEG_SLOTS) {
        pp__entry_t *seg = pp__table_segment(pool, n, s >> PP__SEG_SHIFT);
        if (seg == NULL)
            continue;
        uint32_t stop = end - s < PP__SEG_SLOTS ? end - s : PP__SEG_SLOTS;
        for (uint32_t i = 0; i < stop; i++)
            fn(pool, n, &seg[i], arg);
    }
}
