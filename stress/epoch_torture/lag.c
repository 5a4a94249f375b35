/*
 * stress/epoch_torture/lag.c -- the lagging reader (thread 0; main.c): a
 * QSBR thread that keeps its epoch section open for --lag-ops operations
 * of the others, then checks (a) its blocks stayed intact, (b) no entry
 * that died during the lag was freed, (c) reclamation resumes once it
 * quiesces.
 */
#include "epoch_torture.h"

uint64_t others_progress(const thr_t *t)
{
    uint64_t s = 0;
    for (unsigned i = 0; i < g_threads; i++)
        if (i != t->idx)
            s += atomic_load_explicit(&g_thr[i].progress, memory_order_relaxed);
    return s;
}

static uint32_t g_lag_next;   /* lagger only */

static void lag_hold(thr_t *t, uint64_t k)
{
    const unsigned char *p = get_checked(t, k);
    if (p != NULL)
        esc_hold(t->lag_held, &t->nlag_held, k, p);
}

void lag_begin(thr_t *t)
{
    /* From a quiescent state: no pointer kept, no section open. */
    quiesce(t);
    uint64_t own[LAG_HOLD];
    int nown = 0;
    t->nlag_held = 0;
    /* The first pp_get opens the section; an entry of our own makes sure
     * there is one. */
    for (int i = 0; i < LAG_HOLD; i++) {
        if (i == 0 || rndn(t, 3) == 0) {
            uint64_t k = entry_put(t);
            if (k == NONE)
                continue;
            own[nown++] = k;
            lag_hold(t, k);
        } else {
            unsigned s;
            uint64_t k;
            if (!slot_borrow(t, &s, &k))
                continue;
            lag_hold(t, k);
            slot_unborrow(s);
        }
    }
    if (t->nlag_held == 0) {
        /* Nothing to hold (record budget used up): no lag this time. */
        for (int i = 0; i < nown; i++)
            release_owner(t, own[i]);
        t->next_lag_at = t->op + 64;
        return;
    }
    if (++g_lag_next >= (1u << 23))
        g_lag_next = 1;
    t->lag_id = g_lag_next;
    atomic_store(&g_lag_log_n, 0);
    t->lag_start_others = others_progress(t);
    t->lag_t0 = now_s();
    t->lagging = 1;
    /* seq_cst: the section opened by the pp_get calls above began before
     * any thread can read this id (release_owner reads it seq_cst). */
    atomic_store(&g_lag_cur, t->lag_id);
    /* Hand the owners of our own entries to other threads: they release
     * the last owner while we still read the blocks. */
    for (int i = 0; i < nown; i++) {
        if (box_put(t, &g_rbox, own[i]) || slot_publish(t, own[i]))
            t->owner_handoffs++;
        else
            release_owner(t, own[i]);
    }
}

/* True when every other thread is parked or inside pp_put while some
 * node's backlog is at its wait mark: their puts wait for the reclaimer,
 * which waits for this lag's section, so their progress, which the lag
 * counts, cannot go on until the lag ends.  A false positive (a put about
 * to return) only makes the lag shorter. */
static int others_blocked(const thr_t *t)
{
    pp_stats_t st = PP_STATS_INIT;
    unsigned in_put = atomic_load(&g_in_put), parked = atomic_load(&g_parked);
    (void)t;
    if (g_backlog_bound == UINT64_MAX || in_put == 0 || in_put + parked < g_threads - 1)
        return 0;
    if (pp_pool_stats(g_pool, &st) != 0)
        return 0;
    for (unsigned n = 0; n < g_nnodes; n++) {
        pp_node_stats_t ns = PP_NODE_STATS_INIT;
        if (pp_node_stats(g_pool, n, &ns) == 0 && ns.backlog_bytes >= st.backlog_mark)
            return 1;
    }
    return 0;
}

int lag_over(thr_t *t)
{
    if (others_progress(t) - t->lag_start_others >= g_lag_ops ||
        atomic_load(&g_parked) >= g_threads - 1 || atomic_load(&g_failed))
        return 1;
    if (others_blocked(t)) {
        t->lag_blocked = 1;
        return 1;
    }
    return 0;
}

void lag_recheck(thr_t *t)
{
    esc_recheck(t, t->lag_held, t->nlag_held, &t->lag_rr, "(a) lagging reader's pointer");
}

void lag_end(thr_t *t)
{
    uint32_t L = t->lag_id;
    uint64_t blocked_before = t->lags_blocked;
    double len = now_s() - t->lag_t0;
    uint64_t others = others_progress(t) - t->lag_start_others;

    /* (a) Every byte of every block we hold is intact at the end of the lag. */
    for (int i = 0; i < t->nlag_held; i++)
        check_full(t, t->lag_held[i].k, t->lag_held[i].p, "(a) lagging reader's pointer");
    for (int i = 0; i < t->nesc; i++)
        check_full(t, t->esc[i].k, t->esc[i].p, "(a) lagging reader's pointer");

    /* (b) No entry that died during this lag has been freed. */
    uint64_t n = atomic_load(&g_lag_log_n), released = 0, nq = 0, lost = 0;
    if (n > LAGLOG_CAP) {
        lost = n - LAGLOG_CAP;
        n = LAGLOG_CAP;
    }
    for (uint64_t i = 0; i < n; i++) {
        uint64_t e = atomic_load(&g_lag_log[i]);
        if ((e >> 40) != L)
            continue;   /* a late entry of an earlier lag */
        uint64_t k = e & ((1ull << 40) - 1);
        rec_t *r = rec_get(k);
        released++;
        if (atomic_load(&r->frees) != 0)
            failf(t, "(b) entry %" PRIu64 " (ref %#" PRIx64 ") died during lag %u (after the "
                  "lagging reader's section began) and was freed before that section ended",
                  k, rec_ref(r), L);
        /* acquire: pairs with the decrements after pp_release/pp_unpin
         * returned: both 0 means the entry is queued now. */
        if (atomic_load_explicit(&r->owners_out, memory_order_acquire) == 0 &&
            atomic_load_explicit(&r->pins_out, memory_order_acquire) == 0)
            t->lag_q[nq++] = k;
    }
    uint64_t held_released = 0;
    for (int i = 0; i < t->nlag_held; i++)
        held_released += atomic_load(&rec_get(t->lag_held[i].k)->lag) == L;

    /* End the lag: the id first, then the section. */
    atomic_store(&g_lag_cur, 0);
    esc_drop_all(t, t->lag_held, &t->nlag_held, "(a) lagging reader's pointer");
    quiesce(t);
    t->lagging = 0;

    /* (c) Reclamation resumes: everything queued during the lag is freed.
     * The wait is bounded by progress, not by a fixed time: it fails when
     * no entry at all is freed for STALL_S seconds (the reclaimers are
     * stuck), or after --timeout in all.  On a machine loaded by other
     * work a starved reclaimer is slow, but it frees. */
    double r0 = now_s(), waited = 0;
    if (nq > 0 && !atomic_load(&g_failed)) {
        uint64_t left = nq;
        stall_t stall = stall_begin(frees_so_far());
        for (;;) {
            int rc = pp_pool_drain(g_pool, 20);
            left = 0;
            for (uint64_t i = 0; i < nq; i++)
                left += atomic_load_explicit(&rec_get(t->lag_q[i])->frees,
                                             memory_order_acquire) == 0;
            if (left == 0)
                break;
            if (rc == 0) {
                failf(t, "(c) pp_pool_drain returned 0 after lag %u, but %" PRIu64 " of the %"
                      PRIu64 " entries queued before it are not freed", L, left, nq);
                break;
            }
            if (rc != PP_EBUSY) {
                failf(t, "(c) pp_pool_drain: %s", pp_err_name(rc));
                break;
            }
            double now = now_s();
            if (stall_check(&stall, frees_so_far(), now, STALL_S, g_timeout_s)) {
                failf(t, "(c) reclamation did not resume: %" PRIu64 " of the %" PRIu64
                      " entries that died during lag %u are still not freed %.0f s after the "
                      "lagging reader quiesced, and nothing at all was freed in the last %.0f s",
                      left, nq, L, now - r0, now - stall.moved);
                break;
            }
        }
        waited = now_s() - r0;
    }
    t->lags++;
    t->lags_full += others >= g_lag_ops;
    t->lags_blocked += others < g_lag_ops && t->lag_blocked;
    t->lag_blocked = 0;
    t->lag_released += released;
    t->lag_held_released += held_released;
    t->lag_resumed += nq;
    t->lag_others_ops += others;
    t->lag_log_lost += lost;
    if (len > t->lag_len_max)
        t->lag_len_max = len;
    if (waited > t->resume_max)
        t->resume_max = waited;
    if (g_verbose)
        printf("epoch_torture: lag %u: %.3f s, %" PRIu64 " ops of the others%s, %" PRIu64
               " entries died during it (%" PRIu64 " held by the lagger), none freed; %" PRIu64
               " freed %.3f s after pp_quiescent\n", L, len, others,
               others < g_lag_ops && t->lags_blocked > blocked_before
                   ? " (ended early: every other thread waited for the backlog)" : "",
               released, held_released, nq, waited);
    t->next_lag_at = t->op + 64 + rndn(t, 256);
}
