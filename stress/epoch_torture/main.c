/*
 * epoch_torture -- torture test of pinpool's epoch reclamation, in the
 * spirit of Concurrency Kit's ck_epoch regressions (validate/torture.c and
 * ck_epoch_poll.c): readers inside epoch-protected sections must never see
 * memory that the reclaimer has already freed, and a reader that lags
 * holds reclamation back, exactly, until it quiesces.
 *
 *   epoch_torture [--threads N] [--ops N | --duration SEC] [--seed S]
 *                 [--topology STR] [--lag-ops N] [--quarantine N]
 *                 [--timeout SEC] [--reclaim-backlog BYTES|none] [--verbose]
 *
 * Every entry is a block of 32..1024 bytes whose every word is a function of
 * (seed, entry id, word index).  The type's free function checks the block,
 * then POISONS it (fills it with 0xdb) before releasing it, and keeps the
 * last freed blocks of each node in a quarantine ring, so that a read of a
 * freed block keeps seeing poison for a while even in a build without
 * AddressSanitizer (under ASan the ring is off by default: the block is
 * freed at once and ASan reports any later read).  Whoever reads an entry
 * checks its bytes, so a free that comes too early is seen as poison (or as
 * another entry's bytes), as an ASan heap-use-after-free, or as a TSan race
 * with the poisoning memset.
 *
 * Threads (oversubscription is expected: 2..16 threads on two cores):
 *  - thread 0 is the LAGGING READER (a QSBR thread, see below) that now and
 *    then keeps its epoch section open for a long stretch;
 *  - odd threads are QSBR threads (pp_quiescent): they keep the pointers
 *    pp_get returns across many operations, re-checking their bytes after
 *    every operation, and quiesce (drop them, pp_quiescent) about 1 op in
 *    16;
 *  - even threads other than 0 run in the default mode: a pp_get pointer is
 *    used only while the thread holds an owner of the entry.
 *  All threads put, pin (checking the bytes on every pin, holding pins across
 *  operations, handing pins to other threads through mailboxes), retain and
 *  release; owners are handed between threads through shared slots and
 *  "release boxes", so the last owner of an entry is released by any thread,
 *  while other threads still hold pins or pp_get pointers to it.
 *
 * Bookkeeping (never calls the pool with a ref it does not legitimately
 * hold, except the deliberately stale ones):
 *  - an OWNER is held privately (a thread's list), by a shared slot (one
 *    word: (id + 1) << 32 | borrowers; a thread BORROWS the slot's owner by
 *    incrementing the borrower count, and the owner can only be TAKEN while
 *    nobody borrows it), or by a release box (taken by exchange);
 *  - rec.owners / rec.pins are decremented before pp_release / pp_unpin and
 *    incremented before pp_retain / pp_pin, so the free function must see
 *    them at 0; rec.owners_out / rec.pins_out are decremented only after the
 *    call returned (0 for both: the entry is certainly queued);
 *  - rec.qsbr counts QSBR threads holding a pp_get pointer to the entry; it
 *    is decremented just before their pp_quiescent, so the free function
 *    must see it at 0.
 *
 * The lagging reader (thread 0), lag L:
 *  1. pp_quiescent, then pp_get of up to 8 entries (one it puts itself, so
 *     that its section is certainly open; others borrowed from the slots);
 *     then it publishes L in g_lag_cur.  From here on, any thread that
 *     releases the LAST owner of an entry after reading g_lag_cur == L tags
 *     the entry with L (and logs it) before calling pp_release: that entry
 *     died after the lagger's section began.
 *  2. It hands the owners of its own entries to other threads (release
 *     boxes), and goes on with ordinary operations, WITHOUT quiescing, for
 *     --lag-ops operations of the other threads, re-checking the bytes of
 *     every entry it holds after each operation: (a) they stay intact for
 *     the whole lag.
 *  3. (b) Exact, not timing-based: ck_epoch cannot complete a grace period
 *     for an entry deferred after the lagger's section began, so no entry
 *     tagged L may be freed while L is open.  The free function fails on
 *     such a free the moment it happens, and at the end of the lag every
 *     logged entry of L must still be unfreed.
 *  4. It clears g_lag_cur, drops its pointers and calls pp_quiescent.  (c)
 *     Reclamation resumes: every entry of L whose final pp_release/pp_unpin
 *     has returned (so it is queued) must be freed; the lagger waits for it
 *     with pp_pool_drain(pool, 20 ms) in a loop bounded by 30 s.  When a
 *     drain returns 0 all of them must already be freed (its contract).
 *
 * Overload (docs/api.md, "Overload").  A put waits while its node's reclaim
 * backlog is at the wait mark, and the lag keeps every entry that dies
 * during it in the backlog, so lags and waiting puts meet:
 *  - a QSBR thread's put inside its section is refused with PP_EDEADLK
 *    instead of waiting.  A QSBR worker (and the lagger between lags) then
 *    drops its pp_get pointers, calls pp_quiescent and puts again (that put
 *    may wait: the thread holds nothing back now).  Inside an open lag the
 *    lagger must not quiesce: the refusal is the documented outcome, and
 *    the put is skipped.  PP_EDEADLK for a thread that made no pool call
 *    since its last pp_quiescent (the retry, a put right after a quiesce),
 *    or for a thread that never quiesces, fails the run;
 *  - the other threads' puts WAIT while the lag lasts.  The lag lasts for
 *    --lag-ops operations of the others, which they cannot do while they
 *    wait: so a lag also ends when every other thread is parked or inside
 *    pp_put while a node's backlog is at the mark (lag_over; counted as a
 *    "blocked" lag).  Nothing else the lagger waits for during a lag
 *    depends on the others; its (c) wait comes after its pp_quiescent.
 *  At each round's end the backlog must be empty, the pool's refusals
 *  must equal the program's, and the backlog's peak must stay within the
 *  bound (within bound + the live data if the live data could be more
 *  than the bound's room above the wait mark, three quarters of it: the
 *  condition of the pool's promise).
 *
 * The free function also checks that it runs exactly once per entry, on the
 * reclaimer of the entry's home node (thread ids from pp_pool_stats), with
 * no owner, pin or QSBR pointer left, and that the bytes are intact.
 *
 * The run is made of ROUNDS (the records of a round are bounded, so a
 * --duration run has bounded memory): at the end of each round the threads
 * drop everything and park, the main thread empties the slots and
 * mailboxes, pp_pool_drain must succeed, every entry must have been freed
 * exactly once on its home reclaimer, pp_pool_stats must match the
 * program's own counts exactly (per node and in total, cumulative), and
 * pp__pool_is_valid must hold.  At the end pp_pool_destroy must free and
 * report nothing.
 *
 * No sleep is used as synchronisation: every wait is on a condition, with a
 * bounded timeout that fails the run loudly.
 *
 * Output: the seed and a replay command first; one "epoch_torture: FAIL:"
 * line per failed check; the last line is "epoch_torture: PASS ..." or
 * "epoch_torture: FAIL ..." with the figures.  Exit status 0 only if every
 * check passed.
 */
#include "epoch_torture.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char stress_prog[] = "epoch_torture";

pp_pool_t *g_pool;
unsigned g_nnodes;
int g_rtid[PP_MAX_NODES];
pp_node_stats_t g_nst[PP_MAX_NODES];
atomic_int g_round_stop;
double g_t0;
_Atomic unsigned g_in_put;
uint64_t g_backlog_bound;

_Atomic uint32_t g_lag_cur;
_Atomic uint64_t g_lag_log[LAGLOG_CAP];
_Atomic uint64_t g_lag_log_n;
_Atomic uint64_t g_lag_early;
_Atomic uint64_t g_early_qsbr;
_Atomic uint64_t g_early_held;
_Atomic uint64_t g_read_poison;
_Atomic uint64_t g_read_other;

__thread int tl_user;

rectab_t g_recs;
static _Atomic uint64_t g_slot_words[NSLOTS];
static _Atomic uint64_t g_pbox_words[NPBOX];
static _Atomic uint64_t g_rbox_words[NRBOX];
slots_t g_slots = { g_slot_words, NSLOTS, 0 };   /* the take only acquires */
mbox_t g_pbox = { g_pbox_words, NPBOX };
mbox_t g_rbox = { g_rbox_words, NRBOX };

_Atomic uint64_t g_frees_node[PP_MAX_NODES];

const char *const op_names[OP_N] = {
    "put", "publish", "take", "release", "rbox", "retain", "pin", "held", "pbox",
    "get", "stat", "stale", "quiesce"
};

thr_t *g_thr;

/* ------------------------------------------------------------------------ */
/* Failure reporting                                                         */
/* ------------------------------------------------------------------------ */

void failf(const thr_t *t, const char *fmt, ...)
{
    char who[64];
    va_list ap;
    va_start(ap, fmt);
    if (t == NULL)
        fail_vat(NULL, fmt, ap);
    else if (t->idx == g_threads)
        fail_vat("main", fmt, ap);
    else {
        snprintf(who, sizeof who, "%u op=%" PRIu64, t->idx, t->op);
        fail_vat(who, fmt, ap);
    }
    va_end(ap);
}

/* ------------------------------------------------------------------------ */
/* Main                                                                      */
/* ------------------------------------------------------------------------ */

/* The records, the threads, the pool and its nodes (with their quarantine
 * rings); the main thread in *mout, the pool's figures in *stout.  0, or
 * the exit status. */
static int setup(thr_t **mout, pp_stats_t **stout)
{
    memset(g_poison, POISON, sizeof g_poison);
    rectab_init(&g_recs, sizeof(rec_t), REC_CAP, 1);
    g_thr = calloc(g_threads + 1, sizeof *g_thr);
    if (g_thr == NULL)
        oom();
    tl_user = 1;

    pp_options_t opt = PP_OPTIONS_INIT;
    opt.topology = g_topology;
    opt.report = report_cb;
    opt.reclaim_backlog = g_backlog;
    int rc = pp_pool_create(&opt, &g_pool);
    if (rc != 0) {
        printf("epoch_torture: FAIL: pp_pool_create(topology %s): %s [seed=%" PRIu64
               " thread=main]\n", g_topology ? g_topology : "NULL", pp_err_name(rc), g_seed);
        return 1;
    }
    pp_stats_t *st = calloc(1, sizeof *st);
    if (st == NULL)
        oom();
    thr_t *m = &g_thr[g_threads];
    m->idx = g_threads;
    m->rng = mix3(g_seed, 0, 0x3A1Full);
    rc = stat_read(g_pool, st, g_nst);
    if (rc != 0 || st->nodes < 1 || st->nodes > PP_MAX_NODES) {
        failf(m, "pp_pool_stats after create: %s, nodes %u", pp_err_name(rc), st->nodes);
        return 1;
    }
    g_nnodes = st->nodes;
    /* The bound as documented: 0 is the default, none is UINT64_MAX; the
     * wait mark is a quarter of it, rounded up. */
    uint64_t want = g_backlog == 0 ? PP_RECLAIM_BACKLOG_DEFAULT
                    : g_backlog == PP_RECLAIM_BACKLOG_NONE ? UINT64_MAX : g_backlog;
    g_backlog_bound = st->reclaim_backlog;
    if (st->reclaim_backlog != want ||
        (want != UINT64_MAX && st->backlog_mark != want / 4 + (want % 4 != 0)) ||
        (want == UINT64_MAX && st->backlog_mark != UINT64_MAX))
        failf(m, "pp_pool_stats: reclaim_backlog %" PRIu64 " backlog_mark %" PRIu64 " for "
              "reclaim_backlog %zu (expected %" PRIu64 " and a quarter of it)", st->reclaim_backlog,
              st->backlog_mark, g_backlog, want);
    for (unsigned n = 0; n < g_nnodes; n++) {
        g_rtid[n] = g_nst[n].reclaimer_tid;
        if (g_rtid[n] <= 0)
            failf(m, "node %u: reclaimer_tid %d", n, g_rtid[n]);
        quarantine_init(n);
    }
    char bl[24], mk[24];
    printf("epoch_torture: pool: %u node(s), topology_is_this_system=%d, reclaim_backlog=%s "
           "backlog_mark=%s per node\n", g_nnodes, st->topology_is_this_system,
           backlog_str(st->reclaim_backlog, bl, sizeof bl),
           backlog_str(st->backlog_mark, mk, sizeof mk));
    fflush(stdout);
    *mout = m;
    *stout = st;
    return 0;
}

/* Starts the workers and opens the start gate once every one is parked;
 * 0, or the exit status. */
static int start_workers(pp_stats_t *st)
{
    for (unsigned i = 0; i < g_threads; i++) {
        thr_t *t = &g_thr[i];
        t->idx = i;
        t->rng = mix3(g_seed, i + 1, 0xE90C4ull);
        t->lagger = i == 0;
        t->qsbr = i == 0 || (i & 1);
        t->next_lag_at = 32;
        if (t->lagger) {
            t->lag_q = calloc(LAGLOG_CAP, sizeof *t->lag_q);
            if (t->lag_q == NULL)
                oom();
        }
    }
    g_t0 = now_s();
    g_tty = isatty(2);
    for (unsigned i = 0; i < g_threads; i++) {
        int rc = pthread_create(&g_thr[i].th, NULL, worker, &g_thr[i]);
        if (rc != 0) {
            fprintf(stderr, "epoch_torture: pthread_create: %s\n", strerror(rc));
            return 2;
        }
    }

    /* The start gate: every thread is parked, then all begin together. */
    wait_parked(st, 0);
    g_t0 = now_s();
    g_last_print = g_t0;
    open_gate(1);
    return 0;
}

/* The rounds, until the time or the operations run out (or a check
 * fails), then the workers' end; the number of rounds run, and in *secs
 * their seconds. */
static unsigned run_rounds(thr_t *m, pp_stats_t *st, double *secs)
{
    unsigned round = 0;
    for (;;) {
        wait_parked(st, round);
        if (atomic_load(&g_failed)) {
            if (g_printed_progress && g_tty)
                fprintf(stderr, "\n");
            printf("epoch_torture: FAIL seed=%" PRIu64 " ops=%" PRIu64 " threads=%u seconds=%.2f "
                   "rounds=%u: failed during the run, final checks skipped; caught by: "
                   "%s\n", g_seed, total_progress(), g_threads, now_s() - g_t0, round + 1,
                   caught_by());
            fflush(stdout);
            _exit(1);   /* the pool is in an unknown state: do not tear it down */
        }
        round_end(m, st, round);
        int more = !atomic_load(&g_failed) &&
                   !(g_duration_s > 0 && now_s() - g_t0 >= g_duration_s);
        if (more) {
            more = 0;
            for (unsigned i = 0; i < g_threads; i++)
                more = more || g_thr[i].op < g_ops;
        }
        if (more) {
            /* Next round: fresh records (every entry is freed). */
            rectab_reset(&g_recs);
            atomic_store(&g_lag_log_n, 0);
            atomic_store(&g_round_stop, 0);
        }
        open_gate(more);
        round++;
        if (!more)
            break;
    }
    for (unsigned i = 0; i < g_threads; i++)
        pthread_join(g_thr[i].th, NULL);
    *secs = now_s() - g_t0;
    if (g_printed_progress && g_tty)
        fprintf(stderr, "\n");
    return round;
}

int main(int argc, char **argv)
{
    int rc = parse_args(argc, argv);
    if (rc >= 0)
        return rc;
    fail_setup(g_keep_going ? NULL : &g_round_stop, 1200, "pool tid");
    report_keep(4);
    print_params();
    thr_t *m;
    pp_stats_t *st;
    if ((rc = setup(&m, &st)) != 0)
        return rc;
    if ((rc = start_workers(st)) != 0)
        return rc;
    double secs;
    unsigned rounds = run_rounds(m, st, &secs);
    return final_checks(m, st, rounds, secs);
}
