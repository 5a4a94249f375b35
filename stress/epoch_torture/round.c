/*
 * stress/epoch_torture/round.c -- the end of a round of epoch_torture: the
 * main thread empties the slots and mailboxes, pp_pool_drain must succeed,
 * every entry must have been freed exactly once on its home reclaimer,
 * pp_pool_stats must match the program's own counts exactly (per node and
 * in total, cumulative), and pp__pool_is_valid must hold.
 */
#include "epoch_torture.h"

#include <string.h>

#include "testing/testhooks.h"   /* pp__pool_is_valid */

/* Entries alive at once: the shared slots and boxes, and per thread its
 * private owners, held pins, the entry it is putting and a pin it is
 * taking over from a box.  Entries read through pp_get pointers only
 * (QSBR, the lagger's) are dead and in the backlog already. */

uint64_t live_charge_bound(void)
{
    uint64_t count = NSLOTS + NPBOX + NRBOX + (uint64_t)(g_threads + 1) * (OWN_CAP + HELD_CAP + 2);
    return count * (BLK_MAX + 64);
}

uint64_t backlog_peak_limit(void)
{
    if (g_backlog_bound == UINT64_MAX)
        return UINT64_MAX;
    uint64_t live = live_charge_bound();
    uint64_t room = g_backlog_bound - (g_backlog_bound / 4 + (g_backlog_bound % 4 != 0));
    return live <= room ? g_backlog_bound : g_backlog_bound + live;
}

/* pp_pool_stats, per node and in total, against the program's counts
 * (cumulative over the rounds). */
static void check_stats(thr_t *m, const pp_stats_t *st)
{
    cnt_t exp[PP_MAX_NODES], tot;
    memset(exp, 0, sizeof exp);
    memset(&tot, 0, sizeof tot);
    for (unsigned i = 0; i <= g_threads; i++)
        for (unsigned n = 0; n < g_nnodes; n++)
            cnt_add(&exp[n], &g_thr[i].cnt[n]);
    statloc_t l = { "main", "", NULL };
    uint64_t frees_tot = 0;
    for (unsigned n = 0; n < g_nnodes; n++) {
        const pp_node_stats_t *s = &g_nst[n];
        uint64_t frees = atomic_load(&g_frees_node[n]);
        frees_tot += frees;
        cnt_add(&tot, &exp[n]);
        statloc_at(&l, n, g_nnodes);
        STAT_EQ(&l, s, puts, exp[n].puts);
        STAT_EQ(&l, s, pins, exp[n].pins);
        STAT_EQ(&l, s, unpins, exp[n].unpins);
        STAT_EQ(&l, s, retains, exp[n].retains);
        STAT_EQ(&l, s, releases, exp[n].releases);
        STAT_EQ(&l, s, gets, exp[n].gets);
        STAT_EQ(&l, s, frees, frees);
        STAT_EQ(&l, s, frees, exp[n].puts);
        STAT_EQ(&l, s, queued, frees);
        /* Timed on a sample: the first of every PP__LAG_SAMPLE entries each
         * thread queues for the node. */
        if (!stat_lag_count_ok(s->lag_count, frees))
            failf(m, "pp_pool_stats node %u: lag_count = %" PRIu64 " for %" PRIu64 " frees",
                  n, (uint64_t)s->lag_count, frees);
        STAT_EQ(&l, s, entries, 0);
        STAT_EQ(&l, s, resident_bytes, 0);
        STAT_EQ(&l, s, swapped_bytes, 0);
        STAT_EQ(&l, s, reclaim_queue_depth, 0);
        STAT_EQ(&l, s, evictions_written, 0);
        STAT_EQ(&l, s, evictions_clean, 0);
        STAT_EQ(&l, s, loads, 0);
        if (s->reclaimer_tid != g_rtid[n])
            failf(m, "pp_pool_stats node %u: reclaimer_tid %d, was %d", n, s->reclaimer_tid,
                  g_rtid[n]);
    }
    const pp_node_stats_t *s = &st->total;
    statloc_at(&l, g_nnodes, g_nnodes);
    /* The backlog: empty once drained; every put refused (PP_EDEADLK: this
     * program never uses PP_PUT_NOWAIT) was refused by the pool's count;
     * its peak within the bound (live_charge_bound). */
    uint64_t refused = 0;
    for (unsigned i = 0; i <= g_threads; i++)
        refused += g_thr[i].refused_retried + g_thr[i].refused_in_lag;
    /* Exact: every refusal the pool counts is one the program saw. */
    if (s->backlog_refused != refused)
        failf(m, "pp_pool_stats total: backlog_refused = %" PRIu64 ", but the program's puts "
              "were refused %" PRIu64 " times", (uint64_t)s->backlog_refused, refused);
    uint64_t limit = backlog_peak_limit();
    for (unsigned n = 0; n < g_nnodes; n++) {
        statloc_at(&l, n, g_nnodes);
        STAT_EQ(&l, &g_nst[n], backlog_bytes, 0);
        if (g_nst[n].backlog_peak > limit)
            failf(m, "pp_pool_stats node %u: backlog_peak %" PRIu64 " > %" PRIu64 " (the bound "
                  "%" PRIu64 "%s)", n, g_nst[n].backlog_peak, limit, g_backlog_bound,
                  limit == g_backlog_bound ? ""
                  : " + the live data: it may be more than the room above the mark");
    }
    stat_check_sums("main", st, g_nst, g_nnodes);
    statloc_at(&l, g_nnodes, g_nnodes);
    STAT_EQ(&l, s, puts, tot.puts);
    STAT_EQ(&l, s, pins, tot.pins);
    STAT_EQ(&l, s, unpins, tot.unpins);
    STAT_EQ(&l, s, retains, tot.retains);
    STAT_EQ(&l, s, releases, tot.releases);
    STAT_EQ(&l, s, gets, tot.gets);
    STAT_EQ(&l, s, frees, frees_tot);
    STAT_EQ(&l, s, frees, tot.puts);
    STAT_EQ(&l, s, queued, frees_tot);
    if (!stat_lag_count_ok(s->lag_count, frees_tot))
        failf(m, "pp_pool_stats total: lag_count = %" PRIu64 " for %" PRIu64 " frees",
              (uint64_t)s->lag_count, frees_tot);
    STAT_EQ(&l, s, entries, 0);
    STAT_EQ(&l, s, resident_bytes, 0);
    STAT_EQ(&l, s, reclaim_queue_depth, 0);
    cnt_check_balanced("main", &tot);
}

void round_end(thr_t *m, pp_stats_t *st, unsigned round)
{
    /* Drop what the program still holds in shared places. */
    for (unsigned s = 0; s < NSLOTS; s++) {
        int borrowed;
        int64_t k = slots_clear(&g_slots, s, &borrowed);
        if (borrowed)
            failf(m, "internal: slot %u still borrowed at the end of round %u", s, round);
        if (k >= 0)
            release_owner(m, (uint64_t)k);
    }
    for (unsigned b = 0; b < NPBOX; b++) {
        uint64_t v = mbox_clear(&g_pbox, b);
        if (v) {
            check_full(m, v - 1, rec_data(rec_get(v - 1)), "pin handed over");
            pin_drop(m, v - 1);
        }
    }
    for (unsigned b = 0; b < NRBOX; b++) {
        uint64_t v = mbox_clear(&g_rbox, b);
        if (v)
            release_owner(m, v - 1);
    }

    /* Everything is dead and unpinned, hence queued: drains free it all.
     * Bounded by progress, as in lag_end: fails when nothing is freed for
     * STALL_S seconds, or after --timeout. */
    int rc;
    stall_t stall = stall_begin(frees_so_far());
    for (;;) {
        rc = pp_pool_drain(g_pool, 1000);
        if (rc == 0)
            break;
        if (rc != PP_EBUSY) {
            failf(m, "pp_pool_drain at the end of round %u: %s", round, pp_err_name(rc));
            break;
        }
        double now = now_s();
        if (stall_check(&stall, frees_so_far(), now, STALL_S, g_timeout_s)) {
            failf(m, "pp_pool_drain at the end of round %u: still PP_EBUSY after %.0f s, "
                  "nothing freed in the last %.0f s", round, now - stall.start,
                  now - stall.moved);
            break;
        }
    }
    rc = stat_read(g_pool, st, g_nst);
    if (rc != 0) {
        failf(m, "pp_pool_stats or pp_node_stats: %s", pp_err_name(rc));
        return;
    }

    /* Every entry freed exactly once, on its home reclaimer, with nothing
     * of the program left on it. */
    uint64_t n = ids_used(), bad = 0;
    for (uint64_t k = 0; k < n; k++) {
        rec_t *r = rec_get(k);
        uint32_t state = atomic_load(&r->state);
        if (state != REC_LIVE)
            continue;
        uint32_t f = atomic_load(&r->frees);
        unsigned node = rec_node(r);
        int ok = f == 1 && atomic_load(&r->owners) == 0 && atomic_load(&r->owners_out) == 0 &&
                 atomic_load(&r->pins) == 0 && atomic_load(&r->pins_out) == 0 &&
                 atomic_load(&r->qsbr) == 0 && atomic_load(&r->free_tid) == g_rtid[node];
        if (!ok && bad++ < 10)
            failf(m, "round %u: entry %" PRIu64 " (ref %#" PRIx64 ", node %u) after drain: freed "
                  "%u times (on thread %d, home reclaimer %d); program owners %d (%d in calls) "
                  "pins %d (%d in calls) QSBR holders %d", round, k, rec_ref(r), node, f,
                  atomic_load(&r->free_tid), g_rtid[node], atomic_load(&r->owners),
                  atomic_load(&r->owners_out), atomic_load(&r->pins),
                  atomic_load(&r->pins_out), atomic_load(&r->qsbr));
    }
    if (bad > 10)
        failf(m, "round %u: %" PRIu64 " entries failed the end-of-round checks", round, bad);
    check_stats(m, st);
    if (!pp__pool_is_valid(g_pool))
        failf(m, "pp__pool_is_valid: an entry's state breaks entry.h's invariants");
    if (atomic_load(&g_report_lines) != 0)
        failf(m, "the pool reported %" PRIu64 " line(s) during the run, first: %s",
              atomic_load(&g_report_lines), g_report_first[0]);
}
