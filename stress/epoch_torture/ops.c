/*
 * stress/epoch_torture/ops.c -- epoch_torture's random operations: put,
 * publish, take, release (or hand the owner to another thread's release
 * box), retain, pin (and keep, or hand the pin over), get, stat, and calls
 * with stale refs, which must fail with PP_ESTALE.
 */
#include "epoch_torture.h"

/* Weights of the random operations (percent); quiesce is not drawn. */
static const unsigned op_weight[OP_QUIESCE] = { 12, 8, 8, 10, 6, 4, 18, 7, 6, 14, 3, 4 };

static void op_release(thr_t *t);

static void op_put(thr_t *t)
{
    if (t->nowned >= OWN_CAP)
        op_release(t);
    uint64_t k = entry_put(t);
    if (k != NONE && !owned_push(t, k))
        release_owner(t, k);
}

static void op_publish(thr_t *t)
{
    if (t->nowned == 0)
        return;
    int i = (int)rndn(t, (unsigned)t->nowned);
    if (slot_publish(t, t->owned[i]))
        (void)owned_take(t, i);
}

static void op_take(thr_t *t)
{
    if (t->nowned >= OWN_CAP)
        return;
    int64_t k = slots_take(&g_slots, rndn(t, NSLOTS));
    if (k >= 0)
        owned_push(t, (uint64_t)k);
}

static void op_release(thr_t *t)
{
    if (t->nowned == 0)
        return;
    uint64_t k = owned_take(t, (int)rndn(t, (unsigned)t->nowned));
    if (rndn(t, 4) == 0 && box_put(t, &g_rbox, k)) {
        t->owner_handoffs++;   /* another thread releases it */
        return;
    }
    release_owner(t, k);
}

static void op_rbox(thr_t *t)
{
    uint64_t k = box_take(t, &g_rbox);
    if (k == NONE)
        return;
    if (rndn(t, 3) == 0 && owned_push(t, k))
        return;
    release_owner(t, k);
}

static void op_retain(thr_t *t)
{
    unsigned s;
    uint64_t k;
    if (t->nowned >= OWN_CAP || !slot_borrow(t, &s, &k))
        return;
    rec_t *r = rec_get(k);
    atomic_fetch_add(&r->owners, 1);
    atomic_fetch_add(&r->owners_out, 1);
    int rc = pp_retain(g_pool, rec_ref(r));
    if (rc == 0) {
        cnt_of(t, r)->retains++;
        owned_push(t, k);
    } else {
        failf(t, "pp_retain of a borrowed entry %" PRIu64 ": %s", k, pp_err_name(rc));
        atomic_fetch_sub(&r->owners, 1);
        atomic_fetch_sub(&r->owners_out, 1);
    }
    slot_unborrow(s);
}

static void op_pin(thr_t *t)
{
    src_t s;
    if (!src_get(t, &s))
        return;
    const unsigned char *p = pin_take(t, s.k);
    if (p != NULL) {
        unsigned c = rndn(t, 10);
        if (c >= 5 && c < 8 && t->nheld < HELD_CAP)
            t->held[t->nheld++] = s.k;       /* keep it across operations */
        else if (c >= 8 && box_put(t, &g_pbox, s.k))
            t->pin_handoffs++;               /* another thread unpins it */
        else
            pin_drop(t, s.k);
    }
    src_put(&s);
}

static void op_held(thr_t *t)
{
    if (t->nheld == 0)
        return;
    unsigned i = rndn(t, (unsigned)t->nheld);
    uint64_t k = t->held[i];
    t->held[i] = t->held[--t->nheld];
    /* The pin keeps the block valid even if every owner is gone. */
    check_full(t, k, rec_data(rec_get(k)), "held pin");
    pin_drop(t, k);
}

static void op_pbox(thr_t *t)
{
    uint64_t k = box_take(t, &g_pbox);
    if (k == NONE)
        return;
    check_full(t, k, rec_data(rec_get(k)), "pin handed over");
    if (rndn(t, 3) == 0 && t->nheld < HELD_CAP)
        t->held[t->nheld++] = k;
    else
        pin_drop(t, k);
}

static void op_get(thr_t *t)
{
    if (t->qsbr && t->nesc >= ESC_CAP) {
        if (t->lagging)
            return;
        quiesce(t);
    }
    src_t s;
    if (!src_get(t, &s))
        return;
    const unsigned char *p = get_checked(t, s.k);
    if (p != NULL && t->qsbr)
        esc_hold(t->esc, &t->nesc, s.k, p);
    /* Default mode: the pointer is valid only while we hold the owner or
     * the borrow, and it was checked under it. */
    src_put(&s);
}

static void op_stat(thr_t *t)
{
    src_t s;
    if (!src_get(t, &s))
        return;
    rec_t *r = rec_get(s.k);
    pp_entry_info_t info;
    int rc = pp_stat(g_pool, rec_ref(r), &info);
    if (rc != 0)
        failf(t, "pp_stat of a live entry %" PRIu64 ": %s", s.k, pp_err_name(rc));
    else if (info.size != rec_size(r) || info.node != rec_node(r) || info.type != &g_type ||
             info.owners < 1 || !(info.state & PP_STATE_RESIDENT) ||
             (info.state & (PP_STATE_DEAD | PP_STATE_SWAPPED)))
        failf(t, "pp_stat of live entry %" PRIu64 ": size %zu node %u owners %u state %#x type "
              "%p (expected size %zu node %u owners >= 1, resident, not dead)", s.k, info.size,
              info.node, info.owners, info.state, (const void *)info.type, rec_size(r),
              rec_node(r));
    src_put(&s);
}

/* Calls with the ref of an entry whose free function has run: PP_ESTALE. */
static void op_stale(thr_t *t)
{
    uint64_t n = ids_used();
    if (n == 0)
        return;
    uint64_t k = rnd(t) % n;
    rec_t *r = rec_get(k);
    /* acquire: pairs with the free function's acq_rel (the entry is gone) */
    if (r == NULL || atomic_load_explicit(&r->state, memory_order_acquire) != REC_LIVE ||
        atomic_load_explicit(&r->frees, memory_order_acquire) == 0)
        return;
    pp_ref_t ref = rec_ref(r);
    void *p = NULL;
    pp_entry_info_t info;
    t->stale_checks++;
    switch (rndn(t, 6)) {
    case 0: CHECK_RC(t, pp_pin(g_pool, ref, 0, &p), PP_ESTALE, "pp_pin (stale)", k); break;
    case 1: CHECK_RC(t, pp_get(g_pool, ref, &p), PP_ESTALE, "pp_get (stale)", k); break;
    case 2: CHECK_RC(t, pp_retain(g_pool, ref), PP_ESTALE, "pp_retain (stale)", k); break;
    case 3: CHECK_RC(t, pp_release(g_pool, ref), PP_ESTALE, "pp_release (stale)", k); break;
    case 4: CHECK_RC(t, pp_unpin(g_pool, ref), PP_ESTALE, "pp_unpin (stale)", k); break;
    default: CHECK_RC(t, pp_stat(g_pool, ref, &info), PP_ESTALE, "pp_stat (stale)", k); break;
    }
}

void do_op(thr_t *t)
{
    unsigned x = rndn(t, 100), o = 0;
    while (o < OP_QUIESCE - 1 && x >= op_weight[o])
        x -= op_weight[o++];
    t->opcount[o]++;
    switch (o) {
    case OP_PUT:     op_put(t); break;
    case OP_PUBLISH: op_publish(t); break;
    case OP_TAKE:    op_take(t); break;
    case OP_RELEASE: op_release(t); break;
    case OP_RBOX:    op_rbox(t); break;
    case OP_RETAIN:  op_retain(t); break;
    case OP_PIN:     op_pin(t); break;
    case OP_HELD:    op_held(t); break;
    case OP_PBOX:    op_pbox(t); break;
    case OP_GET:     op_get(t); break;
    case OP_STAT:    op_stat(t); break;
    default:         op_stale(t); break;
    }
}
