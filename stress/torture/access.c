/*
 * stress/torture/access.c -- the torture's checked access to entries it
 * holds: records, the reader/writer token, the pin and escape budgets,
 * pins (taken and dropped with the program's counts, checked), pp_stat of
 * a live entry, private owners, held pins, and pp_get pointers kept under
 * QSBR until the next pp_quiescent.
 */
#include "torture.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Records, tokens and budgets                                               */
/* ------------------------------------------------------------------------ */

/* A record for a new entry: its id, and *out (NULL past the bound). */
uint64_t rec_new(thr_t *t, rec_t **out)
{
    uint64_t k;
    *out = rectab_new(&g_recs, &k);
    if (*out == NULL)
        failf(t, "internal: more ids than the bound %" PRIu64, g_recs.max);
    return k;
}

/* Read token: 1 if taken (the contents may be read until read_untoken). */
int read_token(rec_t *r)
{
    int32_t v = atomic_load_explicit(&r->rw, memory_order_relaxed);
    while (v >= 0) {
        /* acquire: the writer's rewrite and version happen before our reads */
        if (atomic_compare_exchange_weak_explicit(&r->rw, &v, v + 1, memory_order_acquire,
                                                  memory_order_relaxed))
            return 1;
    }
    return 0;
}

void read_untoken(rec_t *r)
{
    /* release: our reads of the contents happen before a writer's rewrite */
    atomic_fetch_sub_explicit(&r->rw, 1, memory_order_release);
}

int write_token(rec_t *r)
{
    int32_t z = 0;
    /* acquire: the last readers' reads happen before our rewrite */
    return atomic_compare_exchange_strong_explicit(&r->rw, &z, -1, memory_order_acquire,
                                                   memory_order_relaxed);
}

void write_untoken(rec_t *r)
{
    /* release: the rewrite and the new version happen before later readers */
    atomic_store_explicit(&r->rw, 0, memory_order_release);
}

/* Budgets (swap mode only; always granted otherwise). */
int budget_take(_Atomic int64_t *b, int64_t limit, int64_t n)
{
    if (!g_swap)
        return 1;
    int64_t cur = atomic_fetch_add_explicit(b, n, memory_order_relaxed);
    if (cur + n > limit) {
        atomic_fetch_sub_explicit(b, n, memory_order_relaxed);
        return 0;
    }
    return 1;
}

void budget_put(_Atomic int64_t *b, int64_t n)
{
    if (g_swap)
        atomic_fetch_sub_explicit(b, n, memory_order_relaxed);
}

/* ------------------------------------------------------------------------ */
/* Pins                                                                      */
/* ------------------------------------------------------------------------ */

/* What the pool held at the first few PP_ENOMEMs (for --verbose). */
char g_enomem_note[ENOMEM_NOTES][256];
atomic_int g_enomem_notes;

void note_enomem(thr_t *t, const char *call, size_t size)
{
    t->enomem++;
    int i = atomic_fetch_add(&g_enomem_notes, 1);
    if (i >= ENOMEM_NOTES)
        return;
    pp_stats_t *st = malloc(sizeof *st);
    if (st != NULL)
        *st = (pp_stats_t)PP_STATS_INIT;
    if (st == NULL || pp_pool_stats(g_pool, st) != 0) {
        free(st);
        return;
    }
    snprintf(g_enomem_note[i], sizeof g_enomem_note[i],
             "%s of %zu bytes: resident_reserved %" PRIu64 " (entries resident %" PRIu64
             "), reclaim queue %" PRIu64 " entries, program pins %" PRId64 " bytes, escaped "
             "or never-evicted %" PRId64 " bytes", call, size, st->resident_reserved,
             st->total.resident_bytes, st->total.reclaim_queue_depth,
             atomic_load(&g_pin_bytes), atomic_load(&g_forever_bytes));
    free(st);
}

/* With --faults: rc is a documented error that an injected fault explains
 * (counted).  The data is checked again by every later pin. */
int fault_rc(thr_t *t, int rc)
{
    if (!g_faults)
        return 0;
    switch (rc) {
    case PP_EIO:      t->fault_eio++; return 1;
    case PP_ECORRUPT: t->fault_ecorrupt++; return 1;
    case PP_ENOMEM:   t->fault_enomem++; return 1;
    default:          return 0;
    }
}

/* A pin call failed with rc; PP_ENOMEM (swap mode) and PP_EAGAIN (with
 * PP_PIN_NOWAIT) are allowed and counted, anything else fails the run. */
void pin_error(thr_t *t, int rc, const char *call, unsigned flags, uint64_t k)
{
    if (fault_rc(t, rc))
        return;
    if (g_swap && rc == PP_ENOMEM) {
        note_enomem(t, call, rec_size(rec_get(k)));
        return;
    }
    if (g_swap && rc == PP_EAGAIN && (flags & PP_PIN_NOWAIT)) {
        t->eagain++;
        return;
    }
    rec_t *r = rec_get(k);
    failf(t, "%s(flags %#x) of an owned entry %" PRIu64 " (ref %#" PRIx64 "): %s", call, flags,
          k, rec_ref(r), pp_err_name(rc));
}

/* Pins entry k, which the caller holds an owner of (private or borrowed).
 * budget: count its bytes against the pin budget (swap mode).  Returns 0
 * (h filled, contents checked), PIN_SKIPPED (over the budget), or the
 * pool's error (already counted or reported by pin_error). */
int pin_take(thr_t *t, uint64_t k, unsigned flags, int budget, hpin_t *h)
{
    rec_t *r = rec_get(k);
    size_t size = rec_size(r);
    if (budget && !budget_take(&g_pin_bytes, g_pin_budget, (int64_t)size)) {
        t->budget_skips++;
        return PIN_SKIPPED;
    }
    int checked = read_token(r);
    atomic_fetch_add(&r->pins, 1);
    void *d = NULL;
    if (g_swap && !(flags & PP_PIN_NOWAIT))
        t->room_calls++;
    int rc = pp_pin(g_pool, rec_ref(r), flags, &d);
    if (rc != 0) {
        atomic_fetch_sub_explicit(&r->pins, 1, memory_order_relaxed);
        if (checked)
            read_untoken(r);
        if (budget)
            budget_put(&g_pin_bytes, (int64_t)size);
        pin_error(t, rc, "pp_pin", flags, k);
        return rc;
    }
    atomic_fetch_add_explicit(&g_outstanding[t->idx], 1, memory_order_relaxed);
    t->cnt[rec_node(r)].pins++;
    if (!checked)
        t->blind_pins++;
    h->k = k;
    h->ptr = d;
    h->origin = t->idx;
    h->checked = (unsigned char)checked;
    h->budget = (unsigned char)budget;
    if (has_blk(r) && d != NULL)
        atomic_fetch_add(&blk_of(d)->pins, 1);
    check_pin(t, h, "after pp_pin");
    return 0;
}

/* Drops a pin taken by pin_take (on any thread). */
void pin_drop(thr_t *t, const hpin_t *h)
{
    rec_t *r = rec_get(h->k);
    check_pin(t, h, "before pp_unpin");
    if (has_blk(r) && h->ptr != NULL)
        atomic_fetch_sub_explicit(&blk_of(h->ptr)->pins, 1, memory_order_relaxed);
    if (h->checked)
        read_untoken(r);
    atomic_fetch_sub_explicit(&r->pins, 1, memory_order_relaxed);
    int rc = pp_unpin(g_pool, rec_ref(r));
    if (rc != 0)
        failf(t, "pp_unpin of a pinned entry %" PRIu64 " (ref %#" PRIx64 "): %s",
              h->k, rec_ref(r), pp_err_name(rc));
    else
        t->cnt[rec_node(r)].unpins++;
    if (h->budget)
        budget_put(&g_pin_bytes, (int64_t)rec_size(r));
    /* release: the unpin is complete before the pin's thread sees 0 */
    atomic_fetch_sub_explicit(&g_outstanding[h->origin], 1, memory_order_release);
}

void stat_live(thr_t *t, uint64_t k, int expect_escaped)
{
    rec_t *r = rec_get(k);
    pp_entry_info_t in;
    memset(&in, 0xA5, sizeof in);
    int rc = pp_stat(g_pool, rec_ref(r), &in);
    if (rc != 0) {
        failf(t, "pp_stat of a live entry %" PRIu64 ": %s", k, pp_err_name(rc));
        return;
    }
    /* Without swap a live entry is resident; with swap it is resident or
     * has a swap copy (or both), and it is never both loading and resident. */
    unsigned where = g_swap ? (PP_STATE_RESIDENT | PP_STATE_SWAPPED) : PP_STATE_RESIDENT;
    int bad_state = !(in.state & where) || (in.state & PP_STATE_DEAD) ||
                    ((in.state & PP_STATE_LOADING) && (in.state & PP_STATE_RESIDENT)) ||
                    ((in.state & PP_STATE_EVICTING) && !(in.state & PP_STATE_RESIDENT)) ||
                    (!g_swap && (in.state & (PP_STATE_SWAPPED | PP_STATE_LOADING |
                                             PP_STATE_EVICTING)));
    if (in.size != rec_size(r) || in.node != rec_node(r) || in.type != type_of(rec_kind(r)) ||
        in.owners < 1 || in.pins > PP_MAX_PINS || bad_state ||
        (expect_escaped && !(in.state & PP_STATE_ESCAPED)))
        failf(t, "pp_stat of live entry %" PRIu64 " (ref %#" PRIx64 "): size %zu (put %zu) "
              "node %u (expected %u) type %p (expected %p) owners %u pins %u state %#x%s", k,
              rec_ref(r), in.size, rec_size(r), in.node, rec_node(r), (const void *)in.type,
              (const void *)type_of(rec_kind(r)), in.owners, in.pins, in.state,
              expect_escaped ? " (expected ESCAPED)" : "");
}

/* ------------------------------------------------------------------------ */
/* Private owners                                                            */
/* ------------------------------------------------------------------------ */

void release_owner(thr_t *t, uint64_t k)
{
    rec_t *r = rec_get(k);
    int32_t before = atomic_fetch_sub(&r->owners, 1);
    if (before < 1)
        failf(t, "internal: entry %" PRIu64 " owner count %d", k, before);
    int rc = pp_release(g_pool, rec_ref(r));
    if (rc != 0)
        failf(t, "pp_release of an owned entry %" PRIu64 " (ref %#" PRIx64 "): %s",
              k, rec_ref(r), pp_err_name(rc));
    else
        t->cnt[rec_node(r)].releases++;
}

void release_owned_at(thr_t *t, int i)
{
    uint64_t k = t->owned[i];
    t->owned[i] = t->owned[--t->nowned];
    release_owner(t, k);
}

void owned_push(thr_t *t, uint64_t k)
{
    if (t->nowned == OWN_CAP)
        release_owned_at(t, (int)rndn(t, OWN_CAP));
    t->owned[t->nowned++] = k;
}

/* Caller holds an owner of k (private or borrowed): add a private one. */
void retain_owner(thr_t *t, uint64_t k)
{
    rec_t *r = rec_get(k);
    atomic_fetch_add(&r->owners, 1);
    int rc = pp_retain(g_pool, rec_ref(r));
    if (rc != 0) {
        atomic_fetch_sub(&r->owners, 1);
        failf(t, "pp_retain of an owned entry %" PRIu64 ": %s", k, pp_err_name(rc));
        return;
    }
    t->cnt[rec_node(r)].retains++;
    owned_push(t, k);
}

/* ------------------------------------------------------------------------ */
/* Held pins                                                                 */
/* ------------------------------------------------------------------------ */

void held_drop_at(thr_t *t, int i)
{
    hpin_t *h = t->held[i];
    t->held[i] = t->held[--t->nheld];
    pin_drop(t, h);
    free(h);
}

void held_push(thr_t *t, hpin_t *h)
{
    if (t->nheld >= g_held_cap)
        held_drop_at(t, (int)rndn(t, (unsigned)t->nheld));
    t->held[t->nheld++] = h;
}

void hold_pin(thr_t *t, const hpin_t *src)
{
    hpin_t *h = malloc(sizeof *h);
    if (h == NULL)
        oom();
    *h = *src;
    held_push(t, h);
}

/* ------------------------------------------------------------------------ */
/* QSBR escaped pointers                                                     */
/* ------------------------------------------------------------------------ */

void quiesce(thr_t *t)
{
    for (int i = 0; i < t->nesc; i++) {
        rec_t *r = rec_get(t->esc[i].k);
        if (t->esc[i].checked) {
            check_contents(t, t->esc[i].k, t->esc[i].ptr,
                           "QSBR pp_get pointer before pp_quiescent");
            read_untoken(r);
        } else {
            check_header(t, t->esc[i].k, t->esc[i].ptr, "QSBR pp_get pointer before pp_quiescent");
        }
        atomic_fetch_sub(&r->qsbr, 1);
    }
    t->nesc = 0;
    pp_quiescent(g_pool);
    t->insec = 0;
    t->opcount[OP_QUIESCE]++;
}

/* In swap mode an escaped entry stays resident until it dies: count it in
 * the forever budget once (released when it is reclaimed).  Flat entries
 * are never escaped there (their reclamation cannot be observed). */
static int escape_budget(thr_t *t, rec_t *r)
{
    if (!g_swap || atomic_load(&r->forever))
        return 1;
    if (rec_kind(r) == KIND_FLAT ||
        !budget_take(&g_forever_bytes, g_forever_budget, (int64_t)rec_size(r))) {
        t->escape_skips++;
        return 0;
    }
    uint32_t z = 0;
    if (!atomic_compare_exchange_strong(&r->forever, &z, 1))
        budget_put(&g_forever_bytes, (int64_t)rec_size(r));
    return 1;
}

/* pp_get on k (caller holds an owner); keeps the pointer under QSBR.
 * Returns 1 if pp_get succeeded. */
int get1(thr_t *t, uint64_t k)
{
    rec_t *r = rec_get(k);
    if (!escape_budget(t, r))
        return 0;
    int checked = read_token(r);
    void *d = NULL;
    if (g_swap)
        t->room_calls++;
    int rc = pp_get(g_pool, rec_ref(r), &d);
    if (rc != 0) {
        if (checked)
            read_untoken(r);
        if (fault_rc(t, rc))
            ;
        else if (g_swap && rc == PP_ENOMEM)
            note_enomem(t, "pp_get", rec_size(r));
        else
            failf(t, "pp_get of an owned entry %" PRIu64 ": %s", k, pp_err_name(rc));
        return 0;
    }
    t->cnt[rec_node(r)].gets++;
    if (has_blk(r) && d != NULL)
        atomic_store(&blk_of(d)->escaped, 1);
    if (checked)
        check_contents(t, k, d, "after pp_get");
    else
        check_header(t, k, d, "after pp_get");
    if (g_qsbr) {
        if (t->nesc == ESC_CAP)
            quiesce(t);
        atomic_fetch_add(&r->qsbr, 1);
        t->esc[t->nesc].k = k;
        t->esc[t->nesc].ptr = d;
        t->esc[t->nesc].checked = checked;
        t->nesc++;
    } else if (checked) {
        read_untoken(r);
    }
    return 1;
}
