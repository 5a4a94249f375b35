/*
 * stress/epoch_torture/access.c -- epoch_torture's checked access to the
 * entries it holds: puts, owners (the last release of an entry during an
 * open lag tags it with the lag), pins, pp_get pointers kept by QSBR
 * threads until their next pp_quiescent; and the hand-offs: slots, pin
 * mailboxes and release boxes (common/handoff.h).
 */
#include "epoch_torture.h"

#include <stdlib.h>

/* ------------------------------------------------------------------------ */
/* Owners, pins, escaped pointers                                            */
/* ------------------------------------------------------------------------ */

/* Puts a new entry; the caller gets its owner.  NONE if the round's record
 * budget is used up (the round then ends). */
uint64_t entry_put(thr_t *t)
{
    uint64_t k;
    rec_t *r = rectab_new(&g_recs, &k);
    if (k >= REC_CAP * 7 / 8)
        atomic_store(&g_round_stop, 1);
    if (r == NULL) {
        t->budget_skips++;
        return NONE;
    }
    size_t size = BLK_MIN + 8 * (size_t)rndn(t, (BLK_MAX - BLK_MIN) / 8 + 1);
    unsigned char *p = malloc(size);
    if (p == NULL)
        oom();
    fill(p, size, k);
    atomic_store_explicit(&r->size, (uint32_t)size, memory_order_relaxed);
    atomic_store_explicit(&r->data, p, memory_order_relaxed);
    atomic_store_explicit(&r->owners, 1, memory_order_relaxed);
    atomic_store_explicit(&r->owners_out, 1, memory_order_relaxed);
    unsigned flags = 0;
    int want = -1;
    if (g_nnodes > 1 && rndn(t, 2) == 0) {
        want = (int)rndn(t, g_nnodes);
        flags = PP_ON_NODE(want);
    }
    pp_ref_t ref;
    int rc;
    for (;;) {
        /* Counted while in the call: the lagger ends a lag when every
         * other thread waits in pp_put (lag_over). */
        atomic_fetch_add(&g_in_put, 1);
        rc = pp_put(g_pool, p, size, &g_type, flags, &ref);
        atomic_fetch_sub(&g_in_put, 1);
        if (rc != PP_EDEADLK)
            break;
        /* Refused instead of waiting for the backlog, because this thread's
         * own section may hold the reclaimer back: only ever for a QSBR
         * thread that made a pool call since its last pp_quiescent. */
        if (!t->qsbr || t->idx == g_threads || !t->insec) {
            failf(t, "pp_put(%zu bytes, node %d): PP_EDEADLK for a thread %s", size, want,
                  !t->qsbr || t->idx == g_threads ? "that never called pp_quiescent"
                                                  : "that made no pool call since its "
                                                    "pp_quiescent (outside its section)");
            break;
        }
        if (t->lagging || t->nlag_held > 0) {
            /* Inside an open lag: the section must stay open, so the put
             * is skipped (the documented outcome, counted). */
            t->refused_in_lag++;
            t->insec = 1;
            atomic_store(&r->owners, 0);
            atomic_store(&r->owners_out, 0);
            atomic_store(&r->state, REC_PUT_FAILED);
            free(p);
            return NONE;
        }
        /* Drop the pp_get pointers, quiesce, put again: outside any
         * section that put may wait, and must not be refused. */
        t->refused_retried++;
        quiesce(t);
    }
    if (t->qsbr)
        t->insec = 1;   /* a pool call: inside the section from here */
    if (rc != 0) {
        failf(t, "pp_put(%zu bytes, node %d): %s", size, want, pp_err_name(rc));
        atomic_store(&r->state, REC_PUT_FAILED);
        free(p);
        return NONE;
    }
    unsigned node = pp_ref_node(ref);
    if (node >= g_nnodes || (want >= 0 && node != (unsigned)want))
        failf(t, "pp_put: ref %#" PRIx64 " names node %u (asked for %d, %u nodes)", ref, node,
              want, g_nnodes);
    atomic_store_explicit(&r->ref, ref, memory_order_relaxed);
    atomic_store_explicit(&r->node, node < g_nnodes ? node : 0, memory_order_relaxed);
    /* release: the record is complete for whoever acquires it */
    atomic_store_explicit(&r->state, REC_LIVE, memory_order_release);
    t->cnt[node < g_nnodes ? node : 0].puts++;
    return k;
}

/* Drops an owner.  If it is the last one and a lag is open, the entry is
 * tagged with the lag first: it dies after the lagger's section began. */
void release_owner(thr_t *t, uint64_t k)
{
    rec_t *r = rec_get(k);
    /* seq_cst: reading the lag id orders this release after the lagger's
     * pp_get that opened its section (the id is stored after it). */
    uint32_t lag = atomic_load(&g_lag_cur);
    int32_t prev = atomic_fetch_sub_explicit(&r->owners, 1, memory_order_acq_rel);
    if (prev <= 0)
        failf(t, "internal: release of entry %" PRIu64 " with %d program owners", k, prev);
    if (prev == 1 && lag != 0) {
        atomic_store(&r->lag, lag);
        uint64_t i = atomic_fetch_add(&g_lag_log_n, 1);
        if (i < LAGLOG_CAP)
            atomic_store(&g_lag_log[i], ((uint64_t)lag << 40) | k);
    }
    CHECK_RC(t, pp_release(g_pool, rec_ref(r)), 0, "pp_release", k);
    cnt_of(t, r)->releases++;
    /* release: whoever sees 0 here also sees the entry queued (if unpinned) */
    atomic_fetch_sub_explicit(&r->owners_out, 1, memory_order_release);
}

int owned_push(thr_t *t, uint64_t k)
{
    if (t->nowned >= OWN_CAP)
        return 0;
    t->owned[t->nowned++] = k;
    return 1;
}

uint64_t owned_take(thr_t *t, int i)
{
    uint64_t k = t->owned[i];
    t->owned[i] = t->owned[--t->nowned];
    return k;
}

/* Pins entry k (the caller holds an owner or a borrow) and checks it. */
const unsigned char *pin_take(thr_t *t, uint64_t k)
{
    rec_t *r = rec_get(k);
    atomic_fetch_add(&r->pins, 1);
    atomic_fetch_add(&r->pins_out, 1);
    void *p = NULL;
    unsigned flags = rndn(t, 4) == 0 ? PP_PIN_WRITE : 0;
    int rc = pp_pin(g_pool, rec_ref(r), flags, &p);
    if (rc != 0) {
        failf(t, "pp_pin of a live entry %" PRIu64 " (ref %#" PRIx64 "): %s", k, rec_ref(r),
              pp_err_name(rc));
        atomic_fetch_sub(&r->pins, 1);
        atomic_fetch_sub(&r->pins_out, 1);
        return NULL;
    }
    cnt_of(t, r)->pins++;
    if (p != rec_data(r)) {
        failf(t, "pp_pin of entry %" PRIu64 " returned %p, put with %p", k, p,
              (void *)rec_data(r));
        return rec_data(r);
    }
    check_full(t, k, p, "pin");
    return p;
}

void pin_drop(thr_t *t, uint64_t k)
{
    rec_t *r = rec_get(k);
    atomic_fetch_sub(&r->pins, 1);
    CHECK_RC(t, pp_unpin(g_pool, rec_ref(r)), 0, "pp_unpin", k);
    cnt_of(t, r)->unpins++;
    /* release: whoever sees 0 here also sees the entry queued (if dead) */
    atomic_fetch_sub_explicit(&r->pins_out, 1, memory_order_release);
}

/* pp_get of entry k (the caller holds an owner or a borrow), checked. */
const unsigned char *get_checked(thr_t *t, uint64_t k)
{
    rec_t *r = rec_get(k);
    void *p = NULL;
    int rc = pp_get(g_pool, rec_ref(r), &p);
    if (rc != 0) {
        failf(t, "pp_get of a live entry %" PRIu64 " (ref %#" PRIx64 "): %s", k, rec_ref(r),
              pp_err_name(rc));
        return NULL;
    }
    cnt_of(t, r)->gets++;
    if (t->qsbr)
        t->insec = 1;
    if (p != rec_data(r)) {
        failf(t, "pp_get of entry %" PRIu64 " returned %p, put with %p", k, p,
              (void *)rec_data(r));
        return NULL;
    }
    check_full(t, k, p, "pp_get");
    return p;
}

/* Keeps a pp_get pointer until the next quiescent point (QSBR threads). */
void esc_hold(esc_t *arr, int *n, uint64_t k, const unsigned char *p)
{
    /* The caller still holds an owner or a borrow: the entry cannot be
     * freed before this count is seen by the free function. */
    atomic_fetch_add(&rec_get(k)->qsbr, 1);
    arr[*n].k = k;
    arr[*n].p = p;
    (*n)++;
}

void esc_drop_all(thr_t *t, esc_t *arr, int *n, const char *what)
{
    for (int i = 0; i < *n; i++) {
        check_full(t, arr[i].k, arr[i].p, what);
        /* release: our reads of the block happen before its free */
        atomic_fetch_sub_explicit(&rec_get(arr[i].k)->qsbr, 1, memory_order_release);
    }
    *n = 0;
}

/* After every operation of a QSBR thread: every kept pointer still reads
 * its entry (header and last word of all, every byte of one). */
void esc_recheck(thr_t *t, esc_t *arr, int n, unsigned *rr, const char *what)
{
    if (n == 0)
        return;
    for (int i = 0; i < n; i++)
        check_quick(t, arr[i].k, arr[i].p, what);
    unsigned i = (*rr)++ % (unsigned)n;
    check_full(t, arr[i].k, arr[i].p, what);
}

void quiesce(thr_t *t)
{
    esc_drop_all(t, t->esc, &t->nesc, "QSBR pointer before pp_quiescent");
    pp_quiescent(g_pool);
    t->insec = 0;
    t->opcount[OP_QUIESCE]++;
}

/* ------------------------------------------------------------------------ */
/* Slots and mailboxes                                                       */
/* ------------------------------------------------------------------------ */

/* Borrows the owner of a random slot (common/handoff.h): 1, with the slot
 * and the entry, or 0 (counted) if the slot is empty. */
int slot_borrow(thr_t *t, unsigned *sout, uint64_t *kout)
{
    unsigned s = rndn(t, NSLOTS);
    int64_t k = slots_borrow(&g_slots, s);
    if (k < 0) {
        t->borrow_misses++;
        return 0;
    }
    *sout = s;
    *kout = (uint64_t)k;
    return 1;
}

void slot_unborrow(unsigned s)
{
    slots_unborrow(&g_slots, s);
}

/* Publishes the owner of k into an empty slot (4 tries): 1 if it was. */
int slot_publish(thr_t *t, uint64_t k)
{
    return slots_publish(&g_slots, k, &t->rng);
}

/* Hands a pin or an owner of k over through a box (4 tries): 1 if it was. */
int box_put(thr_t *t, mbox_t *box, uint64_t k)
{
    return mbox_put(box, k + 1, 4, &t->rng);
}

/* What a random box held, or NONE. */
uint64_t box_take(thr_t *t, mbox_t *box)
{
    uint64_t v = mbox_take(box, &t->rng);
    return v ? v - 1 : NONE;
}

/* An entry the thread may touch: a private owner or a borrow (src_t). */
int src_get(thr_t *t, src_t *s)
{
    unsigned sl;
    if (t->nowned > 0 && rndn(t, 3) == 0) {
        s->k = t->owned[rndn(t, (unsigned)t->nowned)];
        s->slot = -1;
        return 1;
    }
    if (slot_borrow(t, &sl, &s->k)) {
        s->slot = (int)sl;
        return 1;
    }
    if (t->nowned > 0) {
        s->k = t->owned[rndn(t, (unsigned)t->nowned)];
        s->slot = -1;
        return 1;
    }
    return 0;
}

void src_put(const src_t *s)
{
    if (s->slot >= 0)
        slot_unborrow((unsigned)s->slot);
}
