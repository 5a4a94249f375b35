/*
 * stress/torture/use.c -- the torture's operations on an entry it holds an
 * owner of (borrowed from a slot or private): batches of pins with
 * pp_pin_many, rewrites under a write pin, PP_PIN_NOWAIT pins, pp_get,
 * pp_stat, pp_prefetch, pp_retain; and the operations on held pins
 * (hand-offs through the mailboxes, unpin_many).
 */
#include "torture.h"

#include <stdlib.h>
#include <string.h>

#include "testing/testhooks.h"   /* pp__debug_hot */

/* Pins 1..MAX_BATCH refs (borrowed slots and private owners, duplicates
 * allowed) with pp_pin_many, checks them, then drops or keeps the pins. */
static void batch_pin(thr_t *t)
{
    unsigned bslots[MAX_BATCH];
    int nb = 0;
    uint64_t ks[MAX_BATCH];
    pp_ref_t refs[MAX_BATCH];
    void *data[MAX_BATCH];
    hpin_t hs[MAX_BATCH];
    int n = 0;
    int want = 1 + (int)rndn(t, 4);
    for (int i = 0; i < want; i++) {
        if (t->nowned > 0 && rndn(t, 3) == 0) {
            ks[n++] = t->owned[rndn(t, (unsigned)t->nowned)];
        } else {
            unsigned s = rndn(t, g_nslots);
            int64_t k = borrow(t, s);
            if (k < 0)
                continue;
            bslots[nb++] = s;
            ks[n++] = (uint64_t)k;
        }
        if (n < MAX_BATCH && rndn(t, 6) == 0) {   /* the same ref twice */
            ks[n] = ks[n - 1];
            n++;
        }
    }
    int64_t bytes = 0;
    for (int i = 0; i < n; i++)
        bytes += (int64_t)rec_size(rec_get(ks[i]));
    if (n > 0 && !budget_take(&g_pin_bytes, g_pin_budget, bytes)) {
        t->budget_skips++;
        n = 0;
    }
    if (n > 0) {
        unsigned flags = rndn(t, 4) == 0 ? PP_PIN_WRITE : 0;
        if (g_swap && rndn(t, 4) == 0)
            flags |= PP_PIN_NOWAIT;
        for (int i = 0; i < n; i++) {
            rec_t *r = rec_get(ks[i]);
            refs[i] = rec_ref(r);
            hs[i].k = ks[i];
            hs[i].origin = t->idx;
            hs[i].budget = 1;
            hs[i].checked = (unsigned char)read_token(r);
            atomic_fetch_add(&r->pins, 1);
            data[i] = NULL;
        }
        t->pin_many_calls++;
        if (g_swap) {
            if (flags & PP_PIN_NOWAIT)
                t->nowait_calls++;
            else
                t->room_calls++;
        }
        int rc = pp_pin_many(g_pool, refs, (size_t)n, flags, data);
        if (rc != 0) {
            for (int i = 0; i < n; i++) {
                rec_t *r = rec_get(ks[i]);
                atomic_fetch_sub_explicit(&r->pins, 1, memory_order_relaxed);
                if (hs[i].checked)
                    read_untoken(r);
            }
            budget_put(&g_pin_bytes, bytes);
            pin_error(t, rc, "pp_pin_many", flags, ks[0]);
        } else {
            atomic_fetch_add_explicit(&g_outstanding[t->idx], n, memory_order_relaxed);
            for (int i = 0; i < n; i++) {
                rec_t *r = rec_get(ks[i]);
                hs[i].ptr = data[i];
                t->cnt[rec_node(r)].pins++;
                if (!hs[i].checked)
                    t->blind_pins++;
                if (has_blk(r) && data[i] != NULL)
                    atomic_fetch_add(&blk_of(data[i])->pins, 1);
                check_pin(t, &hs[i], "after pp_pin_many");
                if (i > 0 && ks[i] == ks[i - 1] && data[i] != data[i - 1])
                    failf(t, "pp_pin_many gave pointers %p and %p for the same entry %" PRIu64,
                          data[i - 1], data[i], ks[i]);
            }
            unsigned how = rndn(t, 8);
            if (how < 4) {
                for (int i = 0; i < n; i++) {
                    rec_t *r = rec_get(ks[i]);
                    check_pin(t, &hs[i], "before pp_unpin_many");
                    if (has_blk(r) && data[i] != NULL)
                        atomic_fetch_sub_explicit(&blk_of(data[i])->pins, 1, memory_order_relaxed);
                    if (hs[i].checked)
                        read_untoken(r);
                    atomic_fetch_sub_explicit(&r->pins, 1, memory_order_relaxed);
                }
                rc = pp_unpin_many(g_pool, refs, (size_t)n, NULL);
                if (rc != 0)
                    failf(t, "pp_unpin_many of %d pinned refs: %s", n, pp_err_name(rc));
                else
                    for (int i = 0; i < n; i++)
                        t->cnt[rec_node(rec_get(ks[i]))].unpins++;
                budget_put(&g_pin_bytes, bytes);
                atomic_fetch_sub_explicit(&g_outstanding[t->idx], n, memory_order_release);
            } else if (how < 7) {
                for (int i = n - 1; i >= 0; i--)
                    pin_drop(t, &hs[i]);
            } else {
                for (int i = 0; i < n; i++)
                    hold_pin(t, &hs[i]);
            }
        }
    }
    for (int i = 0; i < nb; i++)
        unborrow(bslots[i]);
}

/* Rewrites entry k (version + 1) under a write pin, if no other thread
 * reads or writes it (the write token). */
static void rewrite(thr_t *t, uint64_t k)
{
    rec_t *r = rec_get(k);
    if (!write_token(r)) {
        t->write_busy++;
        /* Someone reads it: a write pin without a rewrite still marks the
         * entry dirty (and is checked like any pin). */
        hpin_t h;
        if (pin_take(t, k, PP_PIN_WRITE, 1, &h) == 0)
            pin_drop(t, &h);
        return;
    }
    size_t size = rec_size(r);
    if (!budget_take(&g_pin_bytes, g_pin_budget, (int64_t)size)) {
        t->budget_skips++;
        write_untoken(r);
        return;
    }
    atomic_fetch_add(&r->pins, 1);
    void *d = NULL;
    if (g_swap)
        t->room_calls++;
    int rc = pp_pin(g_pool, rec_ref(r), PP_PIN_WRITE, &d);
    if (rc != 0) {
        atomic_fetch_sub_explicit(&r->pins, 1, memory_order_relaxed);
        budget_put(&g_pin_bytes, (int64_t)size);
        write_untoken(r);
        pin_error(t, rc, "pp_pin", PP_PIN_WRITE, k);
        return;
    }
    atomic_fetch_add_explicit(&g_outstanding[t->idx], 1, memory_order_relaxed);
    t->cnt[rec_node(r)].pins++;
    if (has_blk(r))
        atomic_fetch_add(&blk_of(d)->pins, 1);
    check_contents(t, k, d, "after pp_pin(WRITE)");
    uint32_t v = atomic_load_explicit(&r->version, memory_order_relaxed) + 1;
    fill_body(d, size, k, v);
    if (has_blk(r))
        atomic_store_explicit(&blk_of(d)->version, v, memory_order_relaxed);
    atomic_store_explicit(&r->version, v, memory_order_relaxed);
    t->writes++;
    pp_entry_info_t in;
    rc = pp_stat(g_pool, rec_ref(r), &in);
    if (rc != 0 || !(in.state & PP_STATE_DIRTY) || !(in.state & PP_STATE_RESIDENT))
        failf(t, "entry %" PRIu64 " pinned for write: pp_stat %s, state %#x (expected "
              "DIRTY and RESIDENT)", k, pp_err_name(rc), rc == 0 ? in.state : 0);
    hpin_t h = { k, d, t->idx, 1, 1 };
    check_pin(t, &h, "before pp_unpin of a rewrite");
    if (has_blk(r))
        atomic_fetch_sub_explicit(&blk_of(d)->pins, 1, memory_order_relaxed);
    atomic_fetch_sub_explicit(&r->pins, 1, memory_order_relaxed);
    rc = pp_unpin(g_pool, rec_ref(r));
    if (rc != 0)
        failf(t, "pp_unpin of a pinned entry %" PRIu64 ": %s", k, pp_err_name(rc));
    else
        t->cnt[rec_node(r)].unpins++;
    budget_put(&g_pin_bytes, (int64_t)size);
    atomic_fetch_sub_explicit(&g_outstanding[t->idx], 1, memory_order_release);
    write_untoken(r);
}

/* A PP_PIN_NOWAIT pin: PP_EAGAIN is allowed (the entry is not resident;
 * a load was started); then, half the time, a blocking pin, which must
 * succeed (or find no room). */
static void nowait_pin(thr_t *t, uint64_t k)
{
    hpin_t h;
    t->nowait_calls++;
    int rc = pin_take(t, k, PP_PIN_NOWAIT, 1, &h);
    if (rc == 0) {
        pin_drop(t, &h);
        return;
    }
    if (rc == PP_EAGAIN && rndn(t, 2) == 0 && pin_take(t, k, 0, 1, &h) == 0)
        pin_drop(t, &h);
}

/* A PP_PIN_NOWAIT pin while the caller holds a pin: the entry is resident,
 * so it must succeed, with the same pointer. */
static void nowait_while_pinned(thr_t *t, uint64_t k)
{
    hpin_t h, h2;
    if (pin_take(t, k, 0, 1, &h) != 0)
        return;
    t->nowait_pinned++;
    int rc = pin_take(t, k, PP_PIN_NOWAIT, 0, &h2);
    if (rc != 0)
        failf(t, "pp_pin(NOWAIT) of entry %" PRIu64 " (ref %#" PRIx64 ") while this thread "
              "pins it (so it is resident): %s", k, rec_ref(rec_get(k)), pp_err_name(rc));
    else {
        if (h2.ptr != h.ptr)
            failf(t, "pp_pin(NOWAIT) of pinned entry %" PRIu64 " gave %p, the held pin %p",
                  k, h2.ptr, h.ptr);
        pin_drop(t, &h2);
    }
    pin_drop(t, &h);
}

enum { U_PIN, U_HOLD, U_NOWAIT, U_NOWAIT_PINNED, U_GET, U_STAT, U_PREFETCH, U_RETAIN,
       U_WRITE, U_N };
/* Cumulative percentages of use_entry's operations. */
static const unsigned use_mix[U_N] = { 30, 42, 42, 42, 57, 67, 72, 85, 100 };
static const unsigned use_mix_swap[U_N] = { 22, 30, 38, 42, 50, 56, 66, 78, 100 };

/* One operation on entry k, of which the caller holds an owner. */
static void use_entry(thr_t *t, uint64_t k)
{
    rec_t *r = rec_get(k);
    const unsigned *mix = g_swap ? use_mix_swap : use_mix;
    unsigned sub = rndn(t, 100), op = 0;
    while (sub >= mix[op])
        op++;
    hpin_t h;
    switch (op) {
    case U_PIN:                                      /* pin, check, unpin */
        if (pin_take(t, k, rndn(t, 4) == 0 ? PP_PIN_WRITE : 0, 1, &h) == 0)
            pin_drop(t, &h);
        break;
    case U_HOLD:                                     /* pin and keep */
        if (pin_take(t, k, 0, 1, &h) == 0)
            hold_pin(t, &h);
        break;
    case U_NOWAIT:
        nowait_pin(t, k);
        break;
    case U_NOWAIT_PINNED:
        nowait_while_pinned(t, k);
        break;
    case U_GET:                                      /* escaped access */
        if (get1(t, k))
            stat_live(t, k, 1);
        break;
    case U_STAT:
        stat_live(t, k, 0);
        if (g_hot && rndn(t, 2) == 0) {
            /* Promote (if no write pin may be held) or demote, while other
             * threads pin, unpin, write and release the entry. */
            int rc = pp__debug_hot(g_pool, rec_ref(r), (int)rndn(t, 2));
            if (rc < 0)
                failf(t, "pp__debug_hot of a live entry %" PRIu64 ": %s", k, pp_err_name(rc));
        }
        break;
    case U_PREFETCH: {
        int rc = pp_prefetch(g_pool, rec_ref(r));
        t->prefetches++;
        if (rc != 0)
            failf(t, "pp_prefetch of a live entry %" PRIu64 ": %s", k, pp_err_name(rc));
        else if (g_swap && rndn(t, 2) == 0)
            nowait_pin(t, k);
        break;
    }
    case U_RETAIN:
        retain_owner(t, k);
        break;
    default:
        rewrite(t, k);
        break;
    }
}

void op_borrow(thr_t *t)
{
    if (rndn(t, 5) == 0) {
        batch_pin(t);
        return;
    }
    unsigned s = rndn(t, g_nslots);
    int64_t k = borrow(t, s);
    if (k < 0)
        return;
    use_entry(t, (uint64_t)k);
    unborrow(s);
}

void op_owned(thr_t *t)
{
    if (t->nowned == 0) {
        op_put(t);
        return;
    }
    int i = (int)rndn(t, (unsigned)t->nowned);
    uint64_t k = t->owned[i];
    if (rndn(t, 6) == 0) {
        /* escaped access, then drop the owner: under QSBR the pointer must
         * stay valid until our next pp_quiescent (checked there). */
        get1(t, k);
        release_owned_at(t, i);
        return;
    }
    use_entry(t, k);
}

void op_release(thr_t *t)
{
    if (t->nowned == 0)
        return;
    release_owned_at(t, (int)rndn(t, (unsigned)t->nowned));
    if (t->nowned > OWN_CAP * 3 / 4)
        release_owned_at(t, (int)rndn(t, (unsigned)t->nowned));
}

void op_held(thr_t *t)
{
    unsigned sub = rndn(t, 100);
    if (sub < 20 && t->nheld > 0) {                  /* hand a pin to another thread */
        int i = (int)rndn(t, (unsigned)t->nheld);
        hpin_t *h = t->held[i];
        /* the hpin and the entry's contents are handed over (one try) */
        if (mbox_put(&g_mbox, (uint64_t)(uintptr_t)h, 1, &t->rng)) {
            t->held[i] = t->held[--t->nheld];
            t->handoffs++;
        }
    } else if (sub < 45) {                           /* take a handed-off pin */
        hpin_t *h = (hpin_t *)(uintptr_t)mbox_take(&g_mbox, &t->rng);
        if (h)
            held_push(t, h);
    } else if (sub < 52 && t->nheld > 1) {           /* drop all with unpin_many */
        pp_ref_t refs[HELD_CAP];
        int n = t->nheld;
        for (int i = 0; i < n; i++) {
            hpin_t *h = t->held[i];
            rec_t *r = rec_get(h->k);
            check_pin(t, h, "before pp_unpin_many");
            refs[i] = rec_ref(r);
            if (has_blk(r) && h->ptr != NULL)
                atomic_fetch_sub_explicit(&blk_of(h->ptr)->pins, 1, memory_order_relaxed);
            if (h->checked)
                read_untoken(r);
            atomic_fetch_sub_explicit(&r->pins, 1, memory_order_relaxed);
        }
        int rc = pp_unpin_many(g_pool, refs, (size_t)n, NULL);
        if (rc != 0)
            failf(t, "pp_unpin_many of %d held pins: %s", n, pp_err_name(rc));
        for (int i = 0; i < n; i++) {
            hpin_t *h = t->held[i];
            rec_t *r = rec_get(h->k);
            if (rc == 0)
                t->cnt[rec_node(r)].unpins++;
            if (h->budget)
                budget_put(&g_pin_bytes, (int64_t)rec_size(r));
            atomic_fetch_sub_explicit(&g_outstanding[h->origin], 1, memory_order_release);
            free(h);
        }
        t->nheld = 0;
    } else if (t->nheld > 0) {
        held_drop_at(t, (int)rndn(t, (unsigned)t->nheld));
    }
}
