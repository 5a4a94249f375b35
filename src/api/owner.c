/*
 * owner.c -- put, retain, release: the owner side of an entry's lifetime.
 * The transitions are drawn in entry.h.
 *
 * A PP_TYPE_DISCARD entry may also die without a release: the hand that
 * drops it (evict.c, evict_drop) makes its pins word DEAD first and
 * takes its owners after.  So retains and releases check the pins word
 * too, and refuse a dead entry whatever its owners word still says: from
 * the drop's CAS on they fail as for any dead entry.
 */
#include <stdint.h>

#include "api/api.h"

#define PP__PUT_FLAGS (PP_ON_NODE(0xff) | PP_PUT_NOWAIT)

int pp_put(pp_pool_t *pool, void *data, size_t size, const pp_type_t *type,
           unsigned flags, pp_ref_t *out)
{
    if (pool == NULL || data == NULL || out == NULL || size > (size_t)PTRDIFF_MAX ||
        (flags & ~PP__PUT_FLAGS) != 0)
        return PP_EINVAL;
    if (type != NULL && (type->save == NULL) != (type->load == NULL))
        return PP_EINVAL;   /* a type saves and loads, or neither */
    pp__thread_t *t = pp__thread_get(pool);
    if (t == NULL)
        return PP_ENOMEM;
    unsigned n;
    if (flags & PP_ON_NODE(0)) {
        n = (flags >> 16) & 0xffu;
        if (n >= pool->nnodes)
            return PP_EINVAL;
    } else {
        n = pp__topology_current_node(pool, t);
    }
    /* The backlog first, so that a put waiting for it holds no reservation
     * (relaxed: a threshold; the line is the one the put writes below).
     * A put from a callback never waits (docs/api.md, "Callbacks"): not for
     * the backlog, which the reclaimer it may run on drains, and not for
     * room, which a swap thread it may run on makes. */
    int rc;
    bool cb = pp__in_callback();
    if (PP__UNLIKELY(pp__atomic_load_relaxed(&pool->nodes[n]->put.backlog) >= pool->backlog_mark) &&
        !cb) {
        rc = pp__backlog_wait(pool, n, t, flags);
        if (rc != 0)
            return rc;
    }
    rc = ((flags & PP_PUT_NOWAIT) || cb) ? pp__room_reserve_nowait(pool, size)
                                         : pp__room_reserve(pool, size);
    if (rc != 0)
        return rc;
    pp__entry_t *e = pp__table_slot_alloc(pool, n, t);
    if (e == NULL) {
        pp__mem_unreserve(pool, size);
        return PP_ENOMEM;
    }
    /* Evictable: written out (a swappable type, with swap) or dropped (a
     * DISCARD type, with a limit, swap or not). */
    bool drop = pp__droppable(pool, type, size);
    uint64_t noswap = !drop && (!pool->swap || size == 0 || !pp__swap_type_ok(type))
                          ? PP__F_NOSWAP : 0;
    if (drop)
        pp__atomic_add_relaxed(&pool->discard_entries, 1);   /* the reclaimer takes it off */

    /* The slot is ours alone: it came from a magazine. */
    uint64_t pw = pp__atomic_load_relaxed(&e->pw);
    PP__CHECK(!(pw & PP__F_LIVE) && pp__word_gen(pw) != UINT32_MAX);
    uint32_t gen = pp__word_gen(pw) + 1;
    e->data = data;
    pp__cold_t *c = pp__cold(e);
    c->size = size;
    c->type = type;
    pp__atomic_store_relaxed(&c->ow, ((uint64_t)gen << PP__GEN_SHIFT) | 1u);
    pp__pw_put(e, gen, noswap);
    pp__atomic_add_relaxed(&pool->nodes[n]->put.resident_bytes, size);
    pp__counter_add(&t->count[n].puts, 1);
    *out = pp__ref_make(n, c->slot, gen);
    return 0;
}

int pp_retain(pp_pool_t *pool, pp_ref_t ref)
{
    pp__entry_t *e;
    pp__thread_t *t;
    int rc = pp__begin(pool, ref, &e, &t);
    if (rc != 0)
        return rc;
    uint32_t gen = pp_ref_gen(ref);
    pp__cold_t *c = pp__cold(e);
    uint64_t ow = pp__atomic_load_relaxed(&c->ow);
    do {
        if (pp__word_gen(ow) != gen || pp__ow_owners(ow) == 0)
            return PP_ESTALE;
        /* Dropped (or recycled) since: see the top of this file. */
        if (PP__UNLIKELY(!pp__pw_alive(pp__atomic_load_relaxed(&e->pw), gen)))
            return PP_ESTALE;
        if (pp__ow_owners(ow) == PP_MAX_OWNERS)
            return PP_EOVERFLOW;
        /* relaxed: a new owner publishes nothing; the caller already holds
         * an owner or a pin that keeps the entry alive. */
    } while (!pp__atomic_cas_weak_relaxed(&c->ow, &ow, ow + 1));
    pp__counter_add(&t->count[pp_ref_node(ref)].retains, 1);
    return 0;
}

int pp_release(pp_pool_t *pool, pp_ref_t ref)
{
    pp__entry_t *e;
    pp__thread_t *t;
    int rc = pp__begin(pool, ref, &e, &t);
    if (rc != 0)
        return rc;
    uint32_t gen = pp_ref_gen(ref);
    pp__cold_t *c = pp__cold(e);
    uint64_t ow = pp__atomic_load_relaxed(&c->ow);
    do {
        if (pp__word_gen(ow) != gen || pp__ow_owners(ow) == 0)
            return PP_ESTALE;
        /* Dropped (or recycled) since: see the top of this file. */
        if (PP__UNLIKELY(!pp__pw_alive(pp__atomic_load_relaxed(&e->pw), gen)))
            return PP_ESTALE;
        PP__YIELD(OWNER);
        /* acq_rel: release orders this owner's writes before the death of
         * the entry; acquire lets the last releaser carry every owner's
         * writes on to the reclaimer. */
    } while (!pp__atomic_cas_weak_acq_rel(&c->ow, &ow, ow - 1));
    unsigned n = pp_ref_node(ref);
    pp__counter_add(&t->count[n].releases, 1);
    if (pp__ow_owners(ow) == 1)
        pp__retire_kill(pool, n, e, gen, t);
    return 0;
}

