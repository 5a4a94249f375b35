/*
 * stress/torture/ops.c -- the torture's operations on the shared slots
 * (publish, take; borrows for the others), with stale and invalid refs
 * (every call must fail with PP_ESTALE), and pp_put with the checks of a
 * fresh, private, unpinned entry; one put in 8 with PP_PUT_NOWAIT, and
 * QSBR workers' puts refused with PP_EDEADLK made again after pp_quiescent.
 */
#include "torture.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Slots                                                                     */
/* ------------------------------------------------------------------------ */

/* Borrows slot s's owner (handoff.h): its k, or -1 (counted) if empty. */
int64_t borrow(thr_t *t, unsigned s)
{
    int64_t k = slots_borrow(&g_slots, s);
    if (k < 0)
        t->borrow_misses++;
    return k;
}

void unborrow(unsigned s)
{
    slots_unborrow(&g_slots, s);
}

/* Publishes a random private owner into an empty slot. */
void op_publish(thr_t *t)
{
    if (t->nowned == 0)
        return;
    int i = (int)rndn(t, (unsigned)t->nowned);
    if (slots_publish(&g_slots, t->owned[i], &t->rng))
        t->owned[i] = t->owned[--t->nowned];
}

/* Takes the owner of a random slot nobody borrows. */
void op_take(thr_t *t)
{
    int64_t k = slots_take(&g_slots, rndn(t, g_nslots));
    if (k >= 0)
        owned_push(t, (uint64_t)k);
}

/* ------------------------------------------------------------------------ */
/* Stale and invalid refs                                                    */
/* ------------------------------------------------------------------------ */

/* A ref whose entry has been reclaimed, or PP_REF_NONE. */
static pp_ref_t find_stale(thr_t *t, uint64_t *kout)
{
    uint64_t n = atomic_load_explicit(&g_recs.nids, memory_order_relaxed);
    if (n == 0)
        return PP_REF_NONE;
    for (int tries = 0; tries < 6; tries++) {
        uint64_t k = rnd(t) % n;
        rec_t *r = rec_get(k);
        /* acquire: pairs with the free function's acq_rel exchange */
        if (r && atomic_load_explicit(&r->reclaimed, memory_order_acquire) != 0) {
            *kout = k;
            return rec_ref(r);
        }
    }
    return PP_REF_NONE;
}

static void expect_stale(thr_t *t, int rc, const char *call, pp_ref_t ref, uint64_t k)
{
    if (rc != PP_ESTALE)
        failf(t, "%s of a reclaimed ref %#" PRIx64 " (entry %" PRIu64 "): got %s, expected PP_ESTALE",
              call, ref, k, pp_err_name(rc));
}

static void stale_call(thr_t *t, pp_ref_t ref, uint64_t k)
{
    void *d = NULL;
    void *dv[2] = { NULL, NULL };
    pp_entry_info_t in;
    t->stale_checks++;
    switch (rndn(t, 13)) {
    case 0:
        expect_stale(t, pp_pin(g_pool, ref, 0, &d), "pp_pin", ref, k);
        break;
    case 1:
        expect_stale(t, pp_pin(g_pool, ref, PP_PIN_WRITE, NULL), "pp_pin(WRITE)", ref, k);
        break;
    case 2:
        expect_stale(t, pp_retain(g_pool, ref), "pp_retain", ref, k);
        break;
    case 3:
        expect_stale(t, pp_release(g_pool, ref), "pp_release", ref, k);
        break;
    case 4:
        expect_stale(t, pp_get(g_pool, ref, &d), "pp_get", ref, k);
        break;
    case 5:
        expect_stale(t, pp_prefetch(g_pool, ref), "pp_prefetch", ref, k);
        break;
    case 6:
        expect_stale(t, pp_unpin(g_pool, ref), "pp_unpin", ref, k);
        break;
    case 7:
        expect_stale(t, pp_unpin_many(g_pool, &ref, 1, NULL), "pp_unpin_many", ref, k);
        break;
    case 8: {
        pp_ref_t two[2] = { ref, ref };
        expect_stale(t, pp_pin_many(g_pool, two, 2, 0, dv), "pp_pin_many", ref, k);
        break;
    }
    case 9:
    case 10:
        /* Documented: pp_stat describes an entry until it is queued for
         * its reclaimer; a freed entry was queued, so PP_ESTALE. */
        expect_stale(t, pp_stat(g_pool, ref, &in), "pp_stat", ref, k);
        break;
    case 11:
        expect_stale(t, pp_pin(g_pool, ref, PP_PIN_NOWAIT, &d), "pp_pin(NOWAIT)", ref, k);
        break;
    default: {
        /* A live owned entry and a stale one: all or none. */
        if (t->nowned == 0) {
            expect_stale(t, pp_pin(g_pool, ref, 0, NULL), "pp_pin", ref, k);
            break;
        }
        uint64_t ok = t->owned[rndn(t, (unsigned)t->nowned)];
        pp_ref_t two[2] = { rec_ref(rec_get(ok)), ref };
        int rc = pp_pin_many(g_pool, two, 2, 0, dv);
        t->failed_many_live++;
        /* The first error is returned: with swap the live entry may be
         * loaded first and find no room. */
        if (fault_rc(t, rc)) {
            ;
        } else if (g_swap && rc == PP_ENOMEM) {
            t->room_calls++;
            t->enomem++;
        } else {
            expect_stale(t, rc, "pp_pin_many(live, stale)", ref, k);
        }
        break;
    }
    }
}

static void invalid_call(thr_t *t)
{
    pp_ref_t ref;
    switch (rndn(t, 3)) {
    case 0:
        ref = PP_REF_NONE;
        break;
    case 1: /* a node that does not exist */
        if (g_nnodes < 64) {
            ref = ((uint64_t)(g_nnodes + rndn(t, 64 - g_nnodes)) << 58) |
                  ((uint64_t)rndn(t, 16) << 32) | (1 + rndn(t, 1000));
            break;
        }
        /* fall through */
    default: /* a slot far beyond any table */
        ref = ((uint64_t)rndn(t, g_nnodes) << 58) | ((uint64_t)(0x3FFFFFFu - rndn(t, 16)) << 32) |
              (1 + rndn(t, 1000));
        break;
    }
    t->invalid_checks++;
    void *d = NULL;
    int rc;
    const char *call;
    switch (rndn(t, 6)) {
    case 0: call = "pp_pin"; rc = pp_pin(g_pool, ref, 0, &d); break;
    case 1: call = "pp_retain"; rc = pp_retain(g_pool, ref); break;
    case 2: call = "pp_release"; rc = pp_release(g_pool, ref); break;
    case 3: call = "pp_unpin"; rc = pp_unpin(g_pool, ref); break;
    case 4: call = "pp_prefetch"; rc = pp_prefetch(g_pool, ref); break;
    default: call = "pp_get"; rc = pp_get(g_pool, ref, &d); break;
    }
    if (rc != PP_ESTALE)
        failf(t, "%s with invalid ref %#" PRIx64 ": got %s, expected PP_ESTALE", call, ref,
              pp_err_name(rc));
}

void op_stale(thr_t *t)
{
    if (rndn(t, 8) == 0) {
        invalid_call(t);
        return;
    }
    uint64_t k = 0;
    pp_ref_t ref = find_stale(t, &k);
    if (ref != PP_REF_NONE)
        stale_call(t, ref, k);
}

/* ------------------------------------------------------------------------ */
/* Put and the checks on a fresh (private, unpinned) entry                   */
/* ------------------------------------------------------------------------ */

static int stat_pins(thr_t *t, uint64_t k, uint32_t want, const char *after)
{
    pp_entry_info_t in;
    rec_t *r = rec_get(k);
    int rc = pp_stat(g_pool, rec_ref(r), &in);
    if (rc != 0) {
        failf(t, "pp_stat of a live private entry %" PRIu64 ": %s", k, pp_err_name(rc));
        return -1;
    }
    if (in.pins != want || in.owners != 1) {
        failf(t, "after %s: private entry %" PRIu64 " has %u pins and %u owners, expected %u and 1",
              after, k, in.pins, in.owners, want);
        return -1;
    }
    return 0;
}

static void fresh_checks(thr_t *t, uint64_t k)
{
    rec_t *r = rec_get(k);
    pp_ref_t ref = rec_ref(r);
    unsigned node = rec_node(r);
    pp_entry_info_t in;
    int rc;
    t->fresh_checks++;

    rc = pp_stat(g_pool, ref, &in);
    if (rc != 0) {
        failf(t, "pp_stat of a fresh entry %" PRIu64 ": %s", k, pp_err_name(rc));
        return;
    }
    /* With swap, a fresh entry may already be evicted (or being evicted),
     * or evicted and loaded back by our own earlier calls: never dirty
     * (nobody pinned it for write), escaped, dead or loading. */
    int state_ok = g_swap ? (in.state & ~(unsigned)(PP_STATE_RESIDENT | PP_STATE_SWAPPED |
                                                    PP_STATE_EVICTING)) == 0 &&
                                (in.state & (PP_STATE_RESIDENT | PP_STATE_SWAPPED)) != 0
                          : in.state == PP_STATE_RESIDENT;
    if (in.size != rec_size(r) || in.owners != 1 || in.pins != 0 || in.node != node ||
        in.type != type_of(rec_kind(r)) || !state_ok)
        failf(t, "pp_stat of a fresh entry %" PRIu64 " (ref %#" PRIx64 "): size %zu owners %u "
              "pins %u node %u type %p state %#x; expected size %zu owners 1 pins 0 node %u "
              "state %s", k, ref, in.size, in.owners, in.pins, in.node,
              (const void *)in.type, in.state, rec_size(r), node,
              g_swap ? "RESIDENT and/or SWAPPED (EVICTING)" : "RESIDENT only");

    /* Unbalanced unpins fail and change nothing. */
    CHECK_RC(t, pp_unpin(g_pool, ref), PP_ENOTPINNED, "pp_unpin of an unpinned entry", k);
    CHECK_RC(t, pp_unpin_many(g_pool, &ref, 1, NULL), PP_ENOTPINNED,
             "pp_unpin_many of an unpinned entry", k);
    if (stat_pins(t, k, 0, "unbalanced unpin") != 0)
        return;

    /* Unknown pin flags. */
    CHECK_RC(t, pp_pin(g_pool, ref, 0x40000000u, NULL), PP_EINVAL, "pp_pin with unknown flags", k);
    if (stat_pins(t, k, 0, "pp_pin with unknown flags") != 0)
        return;

    /* pin_many is all or none. */
    uint64_t sk = 0;
    pp_ref_t stale = find_stale(t, &sk);
    if (stale != PP_REF_NONE) {
        pp_ref_t two[3] = { ref, stale, ref };
        void *dv[3] = { NULL, NULL, NULL };
        rc = pp_pin_many(g_pool, two, 3, 0, dv);
        t->failed_many_live++;
        if (fault_rc(t, rc)) {
            ;
        } else if (g_swap && rc == PP_ENOMEM) { /* the fresh one first: no room */
            t->room_calls++;
            t->enomem++;
        } else if (rc != PP_ESTALE)
            failf(t, "pp_pin_many(fresh %" PRIu64 ", stale %#" PRIx64 ", fresh): got %s, expected "
                  "PP_ESTALE", k, stale, pp_err_name(rc));
        if (stat_pins(t, k, 0, "a failed pp_pin_many") != 0)
            return;
    }

    /* Nested pins, and unpin_many checks counts before unpinning. */
    hpin_t h;
    if (pin_take(t, k, 0, 1, &h) != 0)
        return;
    void *d = h.ptr;
    pp_ref_t two[2] = { ref, ref };
    CHECK_RC(t, pp_unpin_many(g_pool, two, 2, NULL), PP_ENOTPINNED,
             "pp_unpin_many(x, x, NULL) of an entry with one pin", k);
    if (stat_pins(t, k, 1, "a failed pp_unpin_many") != 0)
        return;
    /* Pinned, so resident: PP_PIN_NOWAIT must not say PP_EAGAIN. */
    if (g_swap) {
        void *dn = NULL;
        atomic_fetch_add(&r->pins, 1);
        rc = pp_pin(g_pool, ref, PP_PIN_NOWAIT, &dn);
        t->nowait_pinned++;
        if (rc != 0 || dn != d) {
            atomic_fetch_sub_explicit(&r->pins, 1, memory_order_relaxed);
            failf(t, "pp_pin(NOWAIT) of fresh entry %" PRIu64 " while pinned (resident): %s, "
                  "pointer %p (pin gave %p)", k, pp_err_name(rc), dn, d);
        } else {
            t->cnt[node].pins++;
            atomic_fetch_sub_explicit(&r->pins, 1, memory_order_relaxed);
            rc = pp_unpin(g_pool, ref);
            if (rc != 0)
                failf(t, "pp_unpin after pp_pin(NOWAIT): %s", pp_err_name(rc));
            else
                t->cnt[node].unpins++;
        }
    }
    pp_ref_t three[3] = { ref, ref, ref };
    void *dv[3] = { NULL, NULL, NULL };
    atomic_fetch_add(&r->pins, 3);
    rc = pp_pin_many(g_pool, three, 3, PP_PIN_WRITE, dv);
    if (rc != 0) {
        atomic_fetch_sub_explicit(&r->pins, 3, memory_order_relaxed);
        failf(t, "pp_pin_many(x, x, x) of a live entry %" PRIu64 ": %s", k, pp_err_name(rc));
    } else {
        t->cnt[node].pins += 3;
        for (int i = 0; i < 3; i++) {
            if (dv[i] != d)
                failf(t, "pp_pin_many gave pointer %p for entry %" PRIu64 ", pp_pin gave %p",
                      dv[i], k, d);
        }
        if (stat_pins(t, k, 4, "pp_pin + pp_pin_many x3") == 0) {
            rc = pp_stat(g_pool, ref, &in);
            if (rc == 0 && !(in.state & PP_STATE_DIRTY))
                failf(t, "entry %" PRIu64 " pinned with PP_PIN_WRITE is not DIRTY (state %#x)",
                      k, in.state);
            if (rc == 0 && (!(in.state & PP_STATE_RESIDENT) || (in.state & PP_STATE_LOADING)))
                failf(t, "pinned entry %" PRIu64 " is not resident (state %#x)", k, in.state);
        }
        atomic_fetch_sub_explicit(&r->pins, 3, memory_order_relaxed);
        rc = pp_unpin_many(g_pool, three, 3, NULL);
        if (rc != 0)
            failf(t, "pp_unpin_many(x, x, x, NULL) of an entry with 4 pins: %s", pp_err_name(rc));
        else
            t->cnt[node].unpins += 3;
        stat_pins(t, k, 1, "pp_unpin_many x3");
    }
    pin_drop(t, &h);
    stat_pins(t, k, 0, "the last unpin");
}

void op_put(thr_t *t)
{
    rec_t *r;
    uint64_t k = rec_new(t, &r);
    if (r == NULL)
        return;
    size_t size = entry_size(k);
    unsigned kind = KIND_FREE;
    if (g_swap) {
        unsigned c = rndn(t, 100);
        kind = c < g_flat_pct ? KIND_FLAT : KIND_SWAP;
        /* A few never-evicted entries, within the forever budget. */
        if (kind == KIND_SWAP && c >= 95 &&
            budget_take(&g_forever_bytes, g_forever_budget, (int64_t)size)) {
            kind = KIND_FREE;
            atomic_store_explicit(&r->forever, 1, memory_order_relaxed);
        }
    }
    unsigned char *buf = kind == KIND_FLAT ? malloc(size) : blk_new(k, size, 0, 0);
    if (buf == NULL)
        oom();
    fill(buf, size, k, 0);
    atomic_store_explicit(&r->size, (uint32_t)size, memory_order_relaxed);
    atomic_store_explicit(&r->kind, kind, memory_order_relaxed);
    atomic_store_explicit(&r->owners, 1, memory_order_relaxed);
    atomic_store_explicit(&r->state, REC_PUTTING, memory_order_relaxed);
    /* Counted before the pool has it: an eviction may free it at once. */
    if (kind != KIND_FLAT)
        atomic_store_explicit(&r->blocks, 1, memory_order_relaxed);
    unsigned flags = 0, want = 0;
    if (rnd(t) & 1) {
        want = rndn(t, g_nnodes);
        flags = PP_ON_NODE(want);
    }
    /* One put in 8 does not wait (for the backlog, or with swap for room):
     * PP_EAGAIN leaves the data with us. */
    int nowait = rndn(t, 8) == 0;
    if (nowait) {
        flags |= PP_PUT_NOWAIT;
        t->put_nowait++;
    }
    pp_ref_t ref = PP_REF_NONE;
    int rc;
    for (;;) {
        if (g_swap && !nowait)
            t->room_calls++;
        rc = pp_put(g_pool, buf, size, type_of(kind), flags, &ref);
        if (rc != PP_EDEADLK || nowait || !g_qsbr || t->idx >= g_threads || !t->insec)
            break;
        /* A QSBR worker inside its section: the put would wait for a
         * reclaimer that may wait for this very section.  Drop the
         * pointers, quiesce, put again (outside any section: it may wait,
         * and must not be refused). */
        t->put_edeadlk++;
        quiesce(t);
    }
    if (rc != 0) {
        if (fault_rc(t, rc))
            ;
        else if (g_swap && rc == PP_ENOMEM)
            note_enomem(t, "pp_put", size);
        else if (rc == PP_EAGAIN && nowait)
            t->put_eagain++;
        else if (rc == PP_EDEADLK)
            failf(t, "pp_put(size %zu, flags %#x): PP_EDEADLK for a thread %s", size, flags,
                  nowait ? "that asked for PP_PUT_NOWAIT (PP_EAGAIN, if anything)"
                  : !g_qsbr || t->idx >= g_threads ? "that never called pp_quiescent"
                  : "that made no pool call since its pp_quiescent (outside its section)");
        else
            failf(t, "pp_put(size %zu, flags %#x): %s", size, flags, pp_err_name(rc));
        atomic_store(&r->owners, 0);
        atomic_store(&r->blocks, 0);
        atomic_store(&r->state, REC_PUT_FAILED);
        if (atomic_load(&r->forever)) {
            budget_put(&g_forever_bytes, (int64_t)size);
            atomic_store(&r->forever, 0);
        }
        if (kind == KIND_FLAT)
            free(buf);
        else
            blk_del(buf, size);
        return;
    }
    unsigned node = pp_ref_node(ref);
    if (ref == PP_REF_NONE || node >= g_nnodes || ((flags & PP_ON_NODE(0)) && node != want))
        failf(t, "pp_put(flags %#x) gave ref %#" PRIx64 " (node %u of %u)", flags, ref, node,
              g_nnodes);
    atomic_store_explicit(&r->ref, ref, memory_order_relaxed);
    atomic_store_explicit(&r->node, node < g_nnodes ? node : 0, memory_order_relaxed);
    atomic_store_explicit(&r->state, REC_LIVE, memory_order_relaxed);
    t->cnt[node < g_nnodes ? node : 0].puts++;
    if (rndn(t, 16) == 0)
        fresh_checks(t, k);
    owned_push(t, k);
}
