/*
 * stress/epoch_torture/final.c -- the end of an epoch_torture run, after
 * the last round: pp_pool_destroy must free and report nothing, the
 * quarantined blocks must still be poison, the lags must not have been
 * vacuous; then the figures and the last line, PASS or FAIL.
 */
#include "epoch_torture.h"

#include <stdlib.h>

/* How the failures were caught, for the last line. */
const char *caught_by(void)
{
    static char buf[400];
    snprintf(buf, sizeof buf, "reads_of_poison=%" PRIu64 " reads_of_other_bytes=%" PRIu64
             " frees_with_qsbr_reader=%" PRIu64 " frees_in_open_lag=%" PRIu64
             " frees_while_owned_or_pinned=%" PRIu64 " failed_checks=%d",
             atomic_load(&g_read_poison), atomic_load(&g_read_other),
             atomic_load(&g_early_qsbr), atomic_load(&g_lag_early), atomic_load(&g_early_held),
             atomic_load(&g_fail_msgs));
    return buf;
}

/* Destroy: nothing is left, so nothing is reported or freed. */
static void destroy_and_check(thr_t *m)
{
    uint64_t frees_before = 0;
    for (unsigned n = 0; n < g_nnodes; n++)
        frees_before += atomic_load(&g_frees_node[n]);
    uint64_t lines_before = atomic_load(&g_report_lines);
    int rc = pp_pool_destroy(g_pool);
    if (rc != 0)
        failf(m, "pp_pool_destroy: %s", pp_err_name(rc));
    uint64_t frees_after = 0;
    for (unsigned n = 0; n < g_nnodes; n++)
        frees_after += atomic_load(&g_frees_node[n]);
    if (frees_after != frees_before)
        failf(m, "pp_pool_destroy called the free function %" PRIu64 " more time(s)",
              frees_after - frees_before);
    if (atomic_load(&g_report_lines) != lines_before)
        failf(m, "pp_pool_destroy reported %" PRIu64 " line(s) though nothing was left: %s",
              atomic_load(&g_report_lines) - lines_before, g_report_first[0]);
}

/* The figures of the run: sums over the threads (main included). */
typedef struct figures {
    uint64_t opsum[OP_N], full, quick, stale, ph, oh, misses, skips;
    uint64_t refused_retried, refused_in_lag;
} figures_t;

static void sum_threads(figures_t *fg)
{
    for (unsigned i = 0; i <= g_threads; i++) {
        thr_t *t = &g_thr[i];
        for (int o = 0; o < OP_N; o++)
            fg->opsum[o] += t->opcount[o];
        fg->full += t->full_checks;
        fg->quick += t->quick_checks;
        fg->stale += t->stale_checks;
        fg->ph += t->pin_handoffs;
        fg->oh += t->owner_handoffs;
        fg->misses += t->borrow_misses;
        fg->skips += t->budget_skips;
        fg->refused_retried += t->refused_retried;
        fg->refused_in_lag += t->refused_in_lag;
    }
}

/* The lags must have tested something. */
static void check_lags(thr_t *m, const thr_t *lg)
{
    /* A lag that ended because every other thread waited for the backlog
     * it held up was as long as it could be. */
    if (lg->lags_full + lg->lags_blocked == 0)
        failf(m, "the lagging reader never kept its section open for --lag-ops (%" PRIu64
              ") operations of the other threads, nor until they all waited for the reclaim "
              "backlog (%" PRIu64 " lags): too few operations for this --lag-ops", g_lag_ops,
              lg->lags);
    else if (lg->lag_released == 0 || lg->lag_resumed == 0)
        failf(m, "lag checks were vacuous: %" PRIu64 " lags, %" PRIu64 " entries died during "
              "them, %" PRIu64 " checked after", lg->lags, lg->lag_released, lg->lag_resumed);
}

/* --verbose: per-operation counts, the checks made, the lags, per-node
 * figures. */
static void print_figures(const figures_t *fg, const thr_t *lg)
{
    printf("epoch_torture: ops:");
    for (int o = 0; o < OP_N; o++)
        printf(" %s=%" PRIu64, op_names[o], fg->opsum[o]);
    printf("\nepoch_torture: checks: full=%" PRIu64 " quick=%" PRIu64 " stale=%" PRIu64
           " quarantine=%" PRIu64 " pin_handoffs=%" PRIu64 " owner_handoffs=%" PRIu64
           " borrow_misses=%" PRIu64 " budget_skips=%" PRIu64 "\n", fg->full, fg->quick,
           fg->stale, atomic_load(&g_quar_checked), fg->ph, fg->oh, fg->misses, fg->skips);
    printf("epoch_torture: lags=%" PRIu64 " (full %" PRIu64 ", ended by waiting puts %" PRIu64
           ") others_ops=%" PRIu64 " died=%" PRIu64
           " (held by the lagger %" PRIu64 ", not logged %" PRIu64 ") freed_after=%" PRIu64
           " longest=%.3fs resume_max=%.3fs\n", lg->lags, lg->lags_full, lg->lags_blocked,
           lg->lag_others_ops,
           lg->lag_released, lg->lag_held_released, lg->lag_log_lost, lg->lag_resumed,
           lg->lag_len_max, lg->resume_max);
    for (unsigned n = 0; n < g_nnodes; n++)
        printf("epoch_torture: node %u: puts %" PRIu64 " frees %" PRIu64 " grace_polls %"
               PRIu64 " lag p50 %.1f us p99 %.1f us max %.1f us backlog peak %" PRIu64
               " waits %" PRIu64 " (%.1f ms, max %.3f ms) refused %" PRIu64
               " reclaimer tid %d\n", n,
               g_nst[n].puts, g_nst[n].frees, g_nst[n].grace_polls,
               g_nst[n].lag_p50_ns / 1e3, g_nst[n].lag_p99_ns / 1e3,
               g_nst[n].lag_max_ns / 1e3, g_nst[n].backlog_peak,
               g_nst[n].backlog_waits, g_nst[n].backlog_wait_ns / 1e6,
               g_nst[n].backlog_wait_max_ns / 1e6, g_nst[n].backlog_refused, g_rtid[n]);
}

int final_checks(thr_t *m, pp_stats_t *st, unsigned round, double secs)
{
    destroy_and_check(m);
    quarantine_drain(m);
    static figures_t fg;
    sum_threads(&fg);
    thr_t *lg = &g_thr[0];
    check_lags(m, lg);
    if (g_expect_overload &&
        (st->total.backlog_waits == 0 || fg.refused_retried == 0 || fg.refused_in_lag == 0 ||
         lg->lags_blocked == 0))
        failf(m, "--expect-overload: backlog_waits %" PRIu64 ", PP_EDEADLK retried %" PRIu64
              ", inside a lag %" PRIu64 ", lags ended by waiting puts %" PRIu64 ": the overload "
              "was not exercised; lower --reclaim-backlog", st->total.backlog_waits,
              fg.refused_retried, fg.refused_in_lag, lg->lags_blocked);
    if (g_verbose)
        print_figures(&fg, lg);
    int failed = atomic_load(&g_failed);
    char lim[24];
    printf("epoch_torture: %s seed=%" PRIu64 " ops=%" PRIu64 " threads=%u seconds=%.2f "
           "rounds=%u nodes=%u lags=%" PRIu64 " full_lags=%" PRIu64 " lag_died=%" PRIu64 " lag_freed_after=%" PRIu64
           " lag_max_s=%.3f resume_max_s=%.3f puts=%" PRIu64 " frees=%" PRIu64 " pins=%" PRIu64
           " gets=%" PRIu64 " releases=%" PRIu64 " full_checks=%" PRIu64 " stale_checks=%" PRIu64
           " lag_p99_us=%.1f lag_max_us=%.1f blocked_lags=%" PRIu64 " backlog_peak=%" PRIu64
           " backlog_limit=%s backlog_waits=%" PRIu64 " backlog_wait_max_ms=%.3f"
           " refused=%" PRIu64 " (retried %" PRIu64 ", in a lag %" PRIu64 ")\n",
           failed ? "FAIL" : "PASS", g_seed, total_progress(), g_threads, secs, round, g_nnodes,
           lg->lags, lg->lags_full, lg->lag_released, lg->lag_resumed, lg->lag_len_max,
           lg->resume_max,
           st->total.puts, st->total.frees, st->total.pins, st->total.gets, st->total.releases,
           fg.full, fg.stale, st->total.lag_p99_ns / 1e3, st->total.lag_max_ns / 1e3,
           lg->lags_blocked, st->total.backlog_peak,
           backlog_str(backlog_peak_limit(), lim, sizeof lim), st->total.backlog_waits,
           st->total.backlog_wait_max_ns / 1e6,
           fg.refused_retried + fg.refused_in_lag, fg.refused_retried, fg.refused_in_lag);
    if (failed)
        printf("epoch_torture: caught by: %s\n", caught_by());
    fflush(stdout);
    free(lg->lag_q);
    rectab_free(&g_recs);
    free(g_thr);
    free(st);
    return failed ? 1 : 0;
}
