/*
 * testhooks.c -- the hooks declared in testhooks.h that reach into several
 * parts: states set by hand (owners, generations, hot mode), where a swap
 * copy is, and the test points' switch.  The tests, the stress programs
 * and the fuzz target call these; nothing in the library does.  (The
 * allocation hooks live in alloc.c and the yield switch in yield.c, beside
 * what they switch.)  Compiled into the testing variant only
 * (pinpool_testing, PP__TESTING=1, checks.h).
 */
#include "internal.h"
#include "os/swapdev.h"
#include "testing/testhooks.h"

/* ------------------------------------------------------------------------ */
/* States set by hand, looks inside                                          */
/* ------------------------------------------------------------------------ */

int pp__debug_set_owners(pp_pool_t *pool, pp_ref_t ref, uint32_t owners)
{
    pp__entry_t *e = pool != NULL ? pp__lookup(pool, ref) : NULL;
    if (e == NULL || owners == 0)
        return PP_EINVAL;
    uint64_t ow = pp__atomic_load_relaxed(&pp__cold(e)->ow);
    do {
        if (pp__word_gen(ow) != pp_ref_gen(ref) || pp__ow_owners(ow) == 0)
            return PP_ESTALE;
    } while (!pp__atomic_cas_weak_relaxed(&pp__cold(e)->ow, &ow,
                                          ((uint64_t)pp_ref_gen(ref) << PP__GEN_SHIFT) | owners));
    return 0;
}

int pp__debug_set_gen(pp_pool_t *pool, pp_ref_t ref, uint32_t gen, pp_ref_t *out)
{
    pp__entry_t *e = pool != NULL ? pp__lookup(pool, ref) : NULL;
    if (e == NULL || gen == 0 || out == NULL)
        return PP_EINVAL;
    pp__hot_demote(pool, pp_ref_node(ref), e);
    uint64_t pw = pp__atomic_load_relaxed(&e->pw);
    uint64_t ow = pp__atomic_load_relaxed(&pp__cold(e)->ow);
    if (pp__word_gen(pw) != pp_ref_gen(ref) || !(pw & PP__F_LIVE) || (pw & PP__F_DEAD) ||
        pp__pw_pins(pw) != 0)
        return PP_ESTALE;
    uint64_t low = ((uint64_t)1 << PP__GEN_SHIFT) - 1;
    pp__atomic_store_relaxed(&pp__cold(e)->ow, (ow & low) | ((uint64_t)gen << PP__GEN_SHIFT));
    pp__pw_test_set_gen(e, pw, gen);
    *out = pp__ref_make(pp_ref_node(ref), pp_ref_slot(ref), gen);
    return 0;
}

int pp__debug_hot(pp_pool_t *pool, pp_ref_t ref, int op)
{
    pp__entry_t *e = pool != NULL ? pp__lookup(pool, ref) : NULL;
    if (e == NULL)
        return PP_ESTALE;
    if (op > 0)
        pp__hot_promote(pool, pp_ref_node(ref), e, pp_ref_gen(ref));
    else if (op == 0)
        pp__hot_demote(pool, pp_ref_node(ref), e);
    uint64_t pw = pp__atomic_load_relaxed(&e->pw);
    if (pp__word_gen(pw) != pp_ref_gen(ref) || !(pw & PP__F_LIVE))
        return PP_ESTALE;
    return (pw & PP__F_HOT) ? 1 : 0;
}

void pp__debug_hot_after(pp_pool_t *pool, unsigned fails)
{
    pool->hot_after = fails;
}

int pp__debug_swap_where(pp_pool_t *pool, pp_ref_t ref, uint64_t *off, uint64_t *len)
{
    pp__entry_t *e = pool != NULL ? pp__lookup(pool, ref) : NULL;
    if (e == NULL)
        return PP_ESTALE;
    uint64_t pw = pp__atomic_load_acquire(&e->pw);
    if (pp__word_gen(pw) != pp_ref_gen(ref) || !(pw & PP__F_LIVE))
        return PP_ESTALE;
    if (!(pw & PP__F_SWAPPED))
        return PP_EAGAIN;
    const pp__swaprec_t *rec = pp__swap_rec_find(pool->nodes[pp_ref_node(ref)], pp__cold(e)->slot);
    *off = rec->off;
    *len = rec->len;
    return 0;
}

const char *pp__swap_path(pp_pool_t *pool)
{
    return pool->dev != NULL ? pool->dev->path : "";
}

/* ------------------------------------------------------------------------ */
/* Test points (checks.h)                                                    */
/* ------------------------------------------------------------------------ */

_Atomic(pp__test_point_fn) pp__test_point_fn_;
static void *_Atomic test_point_ctx;

void pp__test_point_hook(pp__test_point_fn fn, void *ctx)
{
    pp__atomic_store_relaxed(&test_point_ctx, ctx);
    /* release: the context is stored before the hook that reads it. */
    pp__atomic_store_release(&pp__test_point_fn_, fn);
}

void pp__test_point_run(enum pp__test_point where, void *arg)
{
    /* acquire: pairs with the hook's release (its context). */
    pp__test_point_fn fn = pp__atomic_load_acquire(&pp__test_point_fn_);
    if (fn != NULL)
        fn(where, arg, pp__atomic_load_relaxed(&test_point_ctx));
}

uint32_t pp__table_seg_slots(void)
{
    return PP__SEG_SLOTS;
}
