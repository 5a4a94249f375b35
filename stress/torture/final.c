/*
 * stress/torture/final.c -- the end of a torture run, once every worker
 * has stopped: everything still owned or pinned is dropped, the pool is
 * drained until no entry, queue or reservation is left, every block must
 * have been freed exactly once (per entry: blocks made == blocks freed ==
 * evicted + reclaimed), pp_pool_stats must match the program's own counts
 * exactly, per node and in total, pp_pool_destroy must free and report
 * nothing; then the last line, PASS or FAIL, with the figures.
 */
#include "torture.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testing/testhooks.h"   /* pp__lookup, pp__entry_t, pp__pool_is_valid */

/* Per node: what the program saw of evictions and loads (typed entries). */
typedef struct swapcnt { uint64_t evict_frees, loads; } swapcnt_t;

/* The program's own figures at the end: sums over the entries and the
 * threads (main included). */
typedef struct totals {
    swapcnt_t sw[PP_MAX_NODES], swtot;
    uint64_t died_swapped;        /* typed entries that died swapped */
    cnt_t exp[PP_MAX_NODES], tot;
    uint64_t opsum[OP_N];
    uint64_t stale, invalid, fresh, writes, write_busy, blind;
    uint64_t handoffs, pin_many, ops_done, failed_many_live;
    uint64_t room, enomem, nowait, eagain, nowait_pinned, prefetches;
    uint64_t f_eio, f_ecorrupt, f_enomem;
    uint64_t skips, escape_skips;
    uint64_t put_nowait, put_eagain, put_edeadlk;
    uint64_t re_frees[PP_MAX_NODES], re_frees_tot;   /* --reentrant: children freed */
    uint64_t peak_rss, rss_bound;
    double drain_s;               /* the final drain's time */
} totals_t;

static uint64_t progress_now(unsigned i)
{
    return atomic_load(&g_thr[i].progress);
}

/* A check failed while the workers ran: the pool is in an unknown state,
 * so it is not torn down (nor checked further). */
static void fail_during_run(const run_t *run)
{
    uint64_t done = progress_sum(g_threads, progress_now);
    printf("torture: FAIL seed=%" PRIu64 " ops=%" PRIu64 " threads=%u seconds=%.2f: failed "
           "during the run, final checks skipped%s%s\n", g_seed, done, g_threads,
           run->t1 - run->t0, g_swap ? "; swap files left in " : "", g_swap ? g_rundir : "");
    fflush(stdout);
    _exit(1);   /* the pool is in an unknown state: do not tear it down */
}

/* Drops everything the program still holds: the slots' owners, the pins
 * waiting in mailboxes. */
static void drop_everything(thr_t *m)
{
    m->op = g_ops;
    for (unsigned s = 0; s < g_nslots; s++) {
        int borrowed;
        int64_t k = slots_clear(&g_slots, s, &borrowed);
        if (borrowed)
            failf(m, "internal: slot %u still borrowed at the end", s);
        if (k >= 0)
            release_owner(m, (uint64_t)k);
    }
    for (unsigned i = 0; i < MAILBOXES; i++) {
        hpin_t *h = (hpin_t *)(uintptr_t)mbox_clear(&g_mbox, i);
        if (h) {
            pin_drop(m, h);
            free(h);
        }
    }
}

/* Drain: it waits for entries whose I/O was in flight when they died and
 * for evictions finishing their free after their commit, so once it
 * returns nothing may be left: no entry, no queue, no reserved byte,
 * every free function called. */
static void drain_all(run_t *run, totals_t *T)
{
    thr_t *m = run->m;
    pp_stats_t *st = run->st;
    double d0 = now_s();
    int rc = pp_pool_drain(g_pool, 30000);
    if (rc != 0)
        failf(m, "pp_pool_drain(30000) after dropping everything: %s", pp_err_name(rc));
    if (rc == 0 && (rc = stat_read(g_pool, st, run->node)) != 0)
        failf(m, "pp_pool_stats at the end: %s", pp_err_name(rc));
    if (rc == 0 && (st->total.entries != 0 || st->total.reclaim_queue_depth != 0 ||
                    st->total.dead_in_io != 0 || st->resident_reserved != 0))
        failf(m, "after pp_pool_drain returned 0: %" PRIu64 " entries, queue %" PRIu64
              ", dead_in_io %" PRIu64 ", resident_reserved %" PRIu64, st->total.entries,
              st->total.reclaim_queue_depth, st->total.dead_in_io, st->resident_reserved);
    T->drain_s = now_s() - d0;
}

/* Every block freed exactly once; typed entries reclaimed at most once
 * (exactly once without swap), on their home node's reclaimer. */
static void check_entries(thr_t *m, totals_t *T)
{
    uint64_t nids = rectab_used(&g_recs), bad = 0, reclaimed = 0;
    for (uint64_t k = 0; k < nids; k++) {
        rec_t *r = rec_get(k);
        if (r == NULL)
            continue;
        uint32_t state = atomic_load(&r->state);
        uint32_t f = atomic_load(&r->frees), nb = atomic_load(&r->blocks);
        uint32_t ef = atomic_load(&r->evict_frees), rf = atomic_load(&r->reclaimed);
        uint32_t ld = atomic_load(&r->loads);
        int32_t o = atomic_load(&r->owners), p = atomic_load(&r->pins);
        int32_t rw = atomic_load(&r->rw);
        unsigned node = rec_node(r), kind = rec_kind(r);
        if (state != REC_LIVE) {
            if (state == REC_PUT_FAILED && (f != 0 || nb != 0) && bad++ < 10)
                failf(m, "entry %" PRIu64 " whose pp_put failed: freed %u times", k, f);
            continue;
        }
        /* Counted for every entry, failed or not: the checks of these sums
         * below speak of the free function's own counts only. */
        reclaimed += rf;
        if (node < g_nnodes) {
            T->sw[node].evict_frees += ef;
            T->sw[node].loads += ld;
        }
        T->swtot.evict_frees += ef;
        T->swtot.loads += ld;
        int ok = o == 0 && p == 0 && rw == 0;
        if (kind == KIND_FLAT)
            ok = ok && f == 0 && nb == 0 && ld == 0;
        else if (kind == KIND_FREE)
            ok = ok && nb == 1 && f == 1 && rf == 1 && ef == 0 && ld == 0;
        else
            ok = ok && nb == 1 + ld && f == nb && ef + rf == f && rf <= 1;
        if (!ok) {
            if (bad++ < 10)
                failf(m, "entry %" PRIu64 " (ref %#" PRIx64 ", node %u, %s) after drain: blocks "
                      "made %u (loads %u), freed %u (by evictions %u, reclaimed %u); program "
                      "owners %d pins %d rw %d", k, rec_ref(r), node,
                      kind == KIND_FLAT ? "type NULL" : kind == KIND_SWAP ? "swappable type"
                                                                          : "never-evicted type",
                      nb, ld, f, ef, rf, o, p, rw);
            pp__entry_t *pe = pp__lookup(g_pool, rec_ref(r));
            if (bad <= 10 && pe != NULL)
                failf(m, "entry %" PRIu64 ": pool's words pw %#" PRIx64 " ow %#" PRIx64, k,
                      (uint64_t)atomic_load(&pe->pw), (uint64_t)atomic_load(&pp__cold(pe)->ow));
            continue;
        }
        if (kind == KIND_SWAP && rf == 0)
            T->died_swapped++;
    }
    if (bad > 10)
        failf(m, "%" PRIu64 " entries in all failed the end-of-run checks", bad);
    if (reclaimed != atomic_load(&g_frees_total))
        failf(m, "internal: %" PRIu64 " entries reclaimed, free function counted %" PRIu64,
              reclaimed, atomic_load(&g_frees_total));
    if (T->swtot.evict_frees != atomic_load(&g_evict_frees))
        failf(m, "internal: entries count %" PRIu64 " eviction frees, free function %" PRIu64,
              T->swtot.evict_frees, atomic_load(&g_evict_frees));
    for (unsigned i = 0; i <= g_threads; i++)
        if (atomic_load(&g_outstanding[i]) != 0)
            failf(m, "internal: thread %u has %" PRId64 " outstanding pins at the end", i,
                  atomic_load(&g_outstanding[i]));
    if (atomic_load(&g_pin_bytes) != 0)
        failf(m, "internal: pin budget holds %" PRId64 " bytes at the end",
              atomic_load(&g_pin_bytes));
}

/* The threads' counts, summed (main included). */
static void sum_threads(totals_t *T)
{
    for (unsigned i = 0; i <= g_threads; i++) {
        thr_t *t = &g_thr[i];
        for (unsigned n = 0; n < g_nnodes; n++)
            cnt_add(&T->exp[n], &t->cnt[n]);
        for (int o = 0; o < OP_N; o++)
            T->opsum[o] += t->opcount[o];
        T->stale += t->stale_checks;
        T->invalid += t->invalid_checks;
        T->fresh += t->fresh_checks;
        T->writes += t->writes;
        T->write_busy += t->write_busy;
        T->blind += t->blind_pins;
        T->handoffs += t->handoffs;
        T->pin_many += t->pin_many_calls;
        T->failed_many_live += t->failed_many_live;
        T->room += t->room_calls;
        T->enomem += t->enomem;
        T->nowait += t->nowait_calls;
        T->eagain += t->eagain;
        T->nowait_pinned += t->nowait_pinned;
        T->prefetches += t->prefetches;
        T->f_eio += t->fault_eio;
        T->f_ecorrupt += t->fault_ecorrupt;
        T->f_enomem += t->fault_enomem;
        T->skips += t->budget_skips;
        T->escape_skips += t->escape_skips;
        T->put_nowait += t->put_nowait;
        T->put_eagain += t->put_eagain;
        T->put_edeadlk += t->put_edeadlk;
        if (i < g_threads)
            T->ops_done += atomic_load(&t->progress);
    }
    re_add_counts(T->exp, g_nnodes, T->re_frees);
    for (unsigned n = 0; n < g_nnodes; n++) {
        cnt_add(&T->tot, &T->exp[n]);
        T->re_frees_tot += T->re_frees[n];
    }
}

/* The pool-wide swap figures. */
static void check_swap_figures(thr_t *m, const pp_stats_t *st)
{
    if (st->swap != g_swap || st->mem_limit != g_mem_limit || st->swap_limit != g_swap_limit)
        failf(m, "pp_pool_stats: swap %d mem_limit %zu swap_limit %" PRIu64 ", created with "
              "%d, %zu, %" PRIu64, st->swap, st->mem_limit, st->swap_limit, g_swap,
              g_mem_limit, g_swap_limit);
    if (st->resident_reserved != 0)
        failf(m, "pp_pool_stats: resident_reserved = %" PRIu64 " with nothing left",
              st->resident_reserved);
    if (g_swap) {
        if (st->resident_peak > g_mem_limit)
            failf(m, "pp_pool_stats: resident_peak %" PRIu64 " > mem_limit %zu",
                  st->resident_peak, g_mem_limit);
        if (st->total.loads == 0 || st->total.evictions_written == 0)
            failf(m, "the run never swapped (loads %" PRIu64 ", evictions_written %" PRIu64
                  "): it tested nothing; raise --ops or lower --mem-limit",
                  st->total.loads, st->total.evictions_written);
        if (st->total.loads > 0 && st->total.swap_bytes_read == 0)
            failf(m, "pp_pool_stats: %" PRIu64 " loads but swap_bytes_read = 0", st->total.loads);
        if (g_compress && st->total.swap_bytes_written > 0 &&
            st->total.swap_bytes_written >= st->total.swap_raw_written)
            failf(m, "--compress: swap_bytes_written %" PRIu64 " >= swap_raw_written %" PRIu64
                  " though two thirds of the entries compress well",
                  st->total.swap_bytes_written, st->total.swap_raw_written);
    }
}

/* pp_pool_stats, per node and in total, against the program's counts. */
static void check_stats(thr_t *m, const pp_stats_t *st, const pp_node_stats_t *node,
                        const totals_t *T)
{
    char who[64];
    statloc_t l = { thr_who(m, who, sizeof who), "", g_topology ? g_topology : "this machine" };
    for (unsigned n = 0; n <= g_nnodes; n++) {
        const pp_node_stats_t *s = n < g_nnodes ? &node[n] : &st->total;
        const cnt_t *e = n < g_nnodes ? &T->exp[n] : &T->tot;
        const swapcnt_t *w = n < g_nnodes ? &T->sw[n] : &T->swtot;
        uint64_t frees = n < g_nnodes ? atomic_load(&g_frees_node[n]) + T->re_frees[n]
                                      : atomic_load(&g_frees_total) + T->re_frees_tot;
        statloc_at(&l, n, g_nnodes);
        const char *where = l.where, *topo = l.topo;
        STAT_EQ(&l, s, entries, 0);
        STAT_EQ(&l, s, resident_bytes, 0);
        STAT_EQ(&l, s, swapped_bytes, 0);
        STAT_EQ(&l, s, swap_used_bytes, 0);
        STAT_EQ(&l, s, reclaim_queue_depth, 0);
        STAT_EQ(&l, s, puts, e->puts);
        STAT_EQ(&l, s, pins, e->pins);
        STAT_EQ(&l, s, unpins, e->unpins);
        STAT_EQ(&l, s, retains, e->retains);
        STAT_EQ(&l, s, releases, e->releases);
        STAT_EQ(&l, s, gets, e->gets);
        STAT_EQ(&l, s, frees, e->puts);
        STAT_EQ(&l, s, queued, e->puts);
        if (!stat_lag_count_ok(s->lag_count, s->frees))
            failf(m, "%s: lag_count %" PRIu64 " against %" PRIu64 " frees", where,
                  s->lag_count, s->frees);
        if (!faults_on_device()) {
            STAT_EQ(&l, s, io_errors, 0);
            STAT_EQ(&l, s, checksum_failures, 0);
        } else if (n == g_nnodes) {
            /* Every device call that failed was counted once; a corrupted
             * read fails at most one load's checksum. */
            STAT_EQ(&l, s, io_errors, faults_io_errors());
            if (s->checksum_failures > faults_read_corrupt())
                failf(m, "pp_pool_stats total.checksum_failures = %" PRIu64 ", but only %lu "
                      "reads were corrupted", s->checksum_failures, faults_read_corrupt());
        }
        if (!g_swap) {
            STAT_EQ(&l, s, frees, frees);
            STAT_EQ(&l, s, loads, 0);
            STAT_EQ(&l, s, evictions_written, 0);
            STAT_EQ(&l, s, evictions_clean, 0);
            STAT_EQ(&l, s, swap_bytes_written, 0);
        } else {
            /* Flat entries are evicted and loaded unseen: without them the
             * counts are exact, with them the program sees a part. */
            uint64_t ev = s->evictions_written + s->evictions_clean;
            int exact = g_flat_pct == 0;
            if (exact ? s->loads != w->loads : s->loads < w->loads)
                failf(m, "pp_pool_stats %s.loads = %" PRIu64 ", but the type's load made %"
                      PRIu64 " blocks (topology %s)", where, s->loads, w->loads, topo);
            if (exact ? ev != w->evict_frees : ev < w->evict_frees)
                failf(m, "pp_pool_stats %s: evictions written %" PRIu64 " + clean %" PRIu64
                      ", but the free function freed %" PRIu64 " evicted blocks (topology %s)",
                      where, s->evictions_written, s->evictions_clean, w->evict_frees, topo);
            STAT_GE(&l, s, frees, frees, "reclaimer frees of typed entries");
        }
        if (g_swap && s->swap_raw_written < s->swap_bytes_written)
            failf(m, "pp_pool_stats %s: swap_raw_written %" PRIu64 " < swap_bytes_written %" PRIu64,
                  where, s->swap_raw_written, s->swap_bytes_written);
        if (g_swap && !g_compress)
            STAT_EQ(&l, s, swap_bytes_written, s->swap_raw_written);
        if (s->lag_count && s->lag_p50_ns > s->lag_p99_ns)
            failf(m, "pp_pool_stats %s: lag p50 %" PRIu64 " ns, p99 %" PRIu64 " ns, max %" PRIu64 " ns",
                  where, s->lag_p50_ns, s->lag_p99_ns, s->lag_max_ns);
    }
    /* The backlog: empty once drained.  Every refusal is a PP_EAGAIN of a
     * PP_PUT_NOWAIT put or a PP_EDEADLK; without swap every PP_EAGAIN of a
     * put is one (with swap it may have been for room, not counted).  So
     * without swap the pool's count is exact, and with swap it lies
     * between the PP_EDEADLKs and all the refusals. */
    for (unsigned n = 0; n < g_nnodes; n++) {
        statloc_at(&l, n, g_nnodes);
        STAT_EQ(&l, &node[n], backlog_bytes, 0);
    }
    statloc_at(&l, g_nnodes, g_nnodes);
    STAT_EQ(&l, &st->total, backlog_bytes, 0);
    uint64_t refused = T->put_eagain + T->put_edeadlk;
    if (st->total.backlog_refused > refused || st->total.backlog_refused < T->put_edeadlk ||
        (!g_swap && st->total.backlog_refused != refused))
        failf(m, "pp_pool_stats total.backlog_refused = %" PRIu64 ", but %" PRIu64
              " puts got PP_EAGAIN and %" PRIu64 " PP_EDEADLK%s", st->total.backlog_refused,
              T->put_eagain, T->put_edeadlk, g_swap ? "" : " (without swap: exactly their sum)");
    /* total is the sum of the nodes */
    stat_check_sums(l.who, st, node, g_nnodes);
    if (st->total.reclaimer_tid != 0 || st->total.cpu_bound != 0 || st->total.mem_bound != 0)
        failf(m, "pp_pool_stats total: reclaimer_tid %d cpu_bound %d mem_bound %d (expected 0)",
              st->total.reclaimer_tid, st->total.cpu_bound, st->total.mem_bound);
    check_swap_figures(m, st);
}

/* The program's counts against each other and against pp_pool_stats. */
static void check_counts(run_t *run, const totals_t *T)
{
    thr_t *m = run->m;
    const pp_stats_t *st = run->st;
    char who[64];
    if (!g_swap && atomic_load(&g_frees_total) + T->re_frees_tot != T->tot.puts)
        failf(m, "free functions ran %" PRIu64 " times for %" PRIu64 " puts",
              atomic_load(&g_frees_total) + T->re_frees_tot, T->tot.puts);
    cnt_check_balanced(thr_who(m, who, sizeof who), &T->tot);
    check_stats(m, st, run->node, T);
    if (st->total.pins != T->tot.pins)
        failf(m, "note: stats count %" PRId64 " pins more than the program took; %" PRIu64
              " live refs were pinned and rolled back by failed pp_pin_many calls (a failed call "
              "must have no effect)", (int64_t)(st->total.pins - T->tot.pins),
              T->failed_many_live);
    if (g_swap && !g_faults && (double)T->enomem > (double)T->room * g_enomem_max / 100.0)
        failf(m, "PP_ENOMEM in %" PRIu64 " of %" PRIu64 " calls that may return it (%.2f%%; "
              "allowed %.2f%%): the pool found nothing to evict though the program pins at most "
              "%" PRId64 " and escapes at most %" PRId64 " of the %zu bytes", T->enomem, T->room,
              T->room ? 100.0 * (double)T->enomem / (double)T->room : 0.0, g_enomem_max,
              g_pin_budget, g_forever_budget, g_mem_limit);
}

/* --verbose: per-operation counts, the checks made, per-node figures. */
static void print_figures(const run_t *run, const totals_t *T)
{
    printf("torture: ops:");
    for (int o = 0; o < OP_N; o++)
        printf(" %s=%" PRIu64, op_names[o], T->opsum[o]);
    printf("\ntorture: checks: fresh=%" PRIu64 " stale=%" PRIu64 " invalid=%" PRIu64
           " writes=%" PRIu64 " write_busy=%" PRIu64 " blind_pins=%" PRIu64
           " handoffs=%" PRIu64 " pin_many=%" PRIu64
           " stats_polls=%u mid_drains=%u (busy %u) drain_s=%.3f report_lines=%" PRIu64 "\n",
           T->fresh, T->stale, T->invalid, T->writes, T->write_busy, T->blind, T->handoffs,
           T->pin_many, run->polls, run->mid_drains, run->mid_drain_busy, T->drain_s,
           atomic_load(&g_report_lines));
    for (int i = 0; i < atomic_load(&g_enomem_notes) && i < ENOMEM_NOTES; i++)
        printf("torture: PP_ENOMEM: %s\n", g_enomem_note[i]);
    pthread_mutex_lock(&g_print_lock);
    int saved = atomic_load(&g_report_saved);
    for (int i = 0; i < saved && i < 8; i++)
        printf("torture: report: %s\n", g_report_first[i]);
    pthread_mutex_unlock(&g_print_lock);
    for (unsigned n = 0; n < g_nnodes; n++) {
        const pp_node_stats_t *nd = &run->node[n];
        printf("torture: node %u: puts %" PRIu64 " frees %" PRIu64 " pins %" PRIu64
               " lag p50 %.1f us p99 %.1f us max %.1f us grace_polls %" PRIu64
               " slots %" PRIu64 " reclaimer tid %d cpu_bound %d mem_bound %d\n", n,
               nd->puts, nd->frees, nd->pins,
               nd->lag_p50_ns / 1e3, nd->lag_p99_ns / 1e3,
               nd->lag_max_ns / 1e3, nd->grace_polls, nd->slots,
               nd->reclaimer_tid, nd->cpu_bound, nd->mem_bound);
        if (g_swap)
            printf("torture: node %u swap: evictions written %" PRIu64 " clean %" PRIu64
                   " abandoned %" PRIu64 " (typed blocks evicted %" PRIu64 ") loads %" PRIu64
                   " (typed %" PRIu64 ") load_waits %" PRIu64 " written %" PRIu64 " (raw %"
                   PRIu64 ") read %" PRIu64 "\n", n, nd->evictions_written,
                   nd->evictions_clean, nd->evictions_abandoned,
                   T->sw[n].evict_frees, nd->loads, T->sw[n].loads,
                   nd->load_waits,
                   nd->swap_bytes_written, nd->swap_raw_written,
                   nd->swap_bytes_read);
    }
    if (g_swap)
        printf("torture: swap: saves %" PRIu64 " (ok %" PRIu64 ", lost to a pin %" PRIu64
               ") load calls %" PRIu64 " typed entries that died swapped %" PRIu64
               " skipped: pins %" PRIu64 " gets %" PRIu64 " nowait %" PRIu64 " (EAGAIN %" PRIu64
               ", while pinned %" PRIu64 ") prefetches %" PRIu64 "\n",
               atomic_load(&g_saves), atomic_load(&g_saves_ok), atomic_load(&g_saves_lost),
               atomic_load(&g_load_calls), T->died_swapped, T->skips, T->escape_skips,
               T->nowait, T->eagain, T->nowait_pinned, T->prefetches);
}

/* Destroy: nothing is left, so nothing is reported or freed.  inj: the
 * fault device's counts (it goes with the pool). */
static void destroy_and_check(thr_t *m, unsigned long inj[7])
{
    faults_counts(inj);
    uint64_t lines_before = atomic_load(&g_report_lines);
    uint64_t frees_before = atomic_load(&g_frees_total) + atomic_load(&g_evict_frees) +
                            re_frees_total();
    int rc = pp_pool_destroy(g_pool);
    if (rc != 0)
        failf(m, "pp_pool_destroy: %s", pp_err_name(rc));
    if (atomic_load(&g_report_lines) != lines_before)
        failf(m, "pp_pool_destroy reported %" PRIu64 " line(s) though nothing was left",
              atomic_load(&g_report_lines) - lines_before);
    uint64_t frees_after = atomic_load(&g_frees_total) + atomic_load(&g_evict_frees) +
                           re_frees_total();
    if (frees_after != frees_before)
        failf(m, "pp_pool_destroy called the free functions %" PRIu64 " more time(s)",
              frees_after - frees_before);
    if (g_swap && rc == 0)
        check_rundir_gone(m);
}

/* The last line: PASS or FAIL, with the figures. */
static void print_result(const run_t *run, const totals_t *T, const unsigned long inj[7],
                         int failed)
{
    const pp_stats_t *st = run->st;
    double secs = run->t1 - run->t0;
    char bl[24], lim[48];
    printf("torture: %s seed=%" PRIu64 " ops=%" PRIu64 " threads=%u seconds=%.2f nodes=%u "
           "puts=%" PRIu64 " frees=%" PRIu64 " pins=%" PRIu64 " unpins=%" PRIu64
           " retains=%" PRIu64 " releases=%" PRIu64 " gets=%" PRIu64 " stale_checks=%" PRIu64
           " entries=%" PRIu64 " resident_bytes=%" PRIu64 " queue_depth=%" PRIu64
           " lag_p50_us=%.1f lag_p99_us=%.1f lag_max_us=%.1f hot_promotions=%" PRIu64
           " hot_demotions=%" PRIu64 " backlog_peak=%" PRIu64 " backlog_bound=%s (%s)"
           " backlog_waits=%" PRIu64 " backlog_wait_ms=%.1f backlog_wait_max_ms=%.3f"
           " backlog_refused=%" PRIu64 " nowait_eagain=%" PRIu64 "/%" PRIu64 " edeadlk=%" PRIu64
           " peak_rss_mb=%.1f rss_bound_mb=%.1f",
           failed ? "FAIL" : "PASS", g_seed, T->ops_done, g_threads, secs, g_nnodes,
           st->total.puts, st->total.frees, st->total.pins, st->total.unpins, st->total.retains,
           st->total.releases, st->total.gets, T->stale, st->total.entries,
           st->total.resident_bytes, st->total.reclaim_queue_depth, st->total.lag_p50_ns / 1e3,
           st->total.lag_p99_ns / 1e3, st->total.lag_max_ns / 1e3, st->total.hot_promotions,
           st->total.hot_demotions, st->total.backlog_peak,
           backlog_str(run->backlog_bound, bl, sizeof bl),
           run->backlog_bound == UINT64_MAX ? "unchecked"
           : run->promise ? "checked: peak <= bound"
                          : (snprintf(lim, sizeof lim, "checked: peak <= %" PRIu64,
                                      run->peak_limit), lim),
           st->total.backlog_waits, st->total.backlog_wait_ns / 1e6,
           st->total.backlog_wait_max_ns / 1e6, st->total.backlog_refused, T->put_eagain,
           T->put_nowait, T->put_edeadlk, T->peak_rss / 1048576.0, T->rss_bound / 1048576.0);
    if (g_swap)
        printf(" writes=%" PRIu64 " evictions_written=%" PRIu64 " evictions_clean=%" PRIu64
               " evictions_abandoned=%" PRIu64 " loads=%" PRIu64 " load_waits=%" PRIu64
               " swap_written=%" PRIu64 " swap_raw=%" PRIu64 " swap_read=%" PRIu64
               " resident_peak=%" PRIu64 " live_peak=%" PRIu64 " (%.1fx mem_limit) enomem=%"
               PRIu64 "/%" PRIu64 " eagain=%" PRIu64 "/%" PRIu64 " io_engine=%s io_requests=%"
               PRIu64 " io_submits=%" PRIu64 " io_inflight_peak=%" PRIu64
               " io_load_bytes_peak=%" PRIu64,
               T->writes, st->total.evictions_written, st->total.evictions_clean,
               st->total.evictions_abandoned, st->total.loads, st->total.load_waits,
               st->total.swap_bytes_written, st->total.swap_raw_written,
               st->total.swap_bytes_read, st->resident_peak, run->live_peak,
               (double)run->live_peak / (double)g_mem_limit, T->enomem, T->room, T->eagain,
               T->nowait, st->io_engine == PP_IO_ENGINE_URING ? "io_uring" : "threads",
               st->total.io_requests, st->total.io_submits, st->total.io_inflight_peak,
               st->total.io_load_bytes_peak);
    if (g_faults)
        printf(" faults: allocations=%" PRIu64 "/%" PRIu64 " write_eio=%lu write_enospc=%lu"
               " write_short=%lu read_eio=%lu read_missing=%lu read_corrupt=%lu sync=%lu"
               " got: PP_EIO=%" PRIu64 " PP_ECORRUPT=%" PRIu64 " PP_ENOMEM=%" PRIu64
               " checksum_failures=%" PRIu64 " io_errors=%" PRIu64,
               atomic_load(&g_alloc_faults), atomic_load(&g_alloc_calls), inj[0], inj[1], inj[2],
               inj[3], inj[4], inj[5], inj[6], T->f_eio, T->f_ecorrupt, T->f_enomem,
               st->total.checksum_failures, st->total.io_errors);
    printf("\n");
}

int final_checks(run_t *run)
{
    if (atomic_load(&g_failed))
        fail_during_run(run);
    thr_t *m = run->m;
    re_finish(m);
    drop_everything(m);
    static totals_t T;
    drain_all(run, &T);
    check_entries(m, &T);
    sum_threads(&T);
    check_counts(run, &T);
    bounds_check(run, &T.peak_rss, &T.rss_bound);
    if (g_expect_overload &&
        (run->st->total.backlog_waits == 0 || T.put_eagain == 0 || (g_qsbr && T.put_edeadlk == 0)))
        failf(m, "--expect-overload: backlog_waits %" PRIu64 ", PP_EAGAIN for %" PRIu64
              " of %" PRIu64 " PP_PUT_NOWAIT puts, PP_EDEADLK %" PRIu64 "%s: the overload was "
              "not exercised; lower --reclaim-backlog or raise --threads",
              run->st->total.backlog_waits, T.put_eagain, T.put_nowait, T.put_edeadlk,
              g_qsbr ? "" : " (not expected without --qsbr)");
    if (g_verbose)
        print_figures(run, &T);
    re_print();

    /* Every slot's state words obey entry.h's invariants (pinpool's own
     * whole-structure validation; all threads have stopped). */
    if (!pp__pool_is_valid(g_pool))
        failf(m, "pp__pool_is_valid: an entry's state breaks entry.h's invariants");

    unsigned long inj[7] = { 0 };
    destroy_and_check(m, inj);
    int failed = atomic_load(&g_failed);
    print_result(run, &T, inj, failed);
    rectab_free(&g_recs);
    free(g_slots.w);
    free(g_outstanding);
    free(g_thr);
    free(run->st);
    free(run->node);
    return failed ? 1 : 0;
}
