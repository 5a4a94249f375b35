/*
 * torture -- randomized multithreaded torture test for pinpool.
 *
 *   torture [--threads N] [--ops N] [--seed S] [--topology STR]
 *             [--track] [--qsbr] [--slots N] [--timeout SEC] [--verbose]
 *             [--swap [DIR]] [--mem-limit BYTES] [--swap-limit BYTES]
 *             [--compress] [--io-engine auto|uring|threads]
 *             [--entry-size MIN[-MAX]] [--flat PCT]
 *             [--enomem-max PCT] [--reclaim-backlog BYTES|none]
 *             [--expect-overload] [--reentrant PCT]
 *
 * T worker threads run random operations on one pool and check every
 * documented guarantee they can observe.  The seed and the parameters are
 * printed first so that a failure can be replayed; exit status 0 means
 * every check passed, 1 that at least one failed (each failure prints what,
 * the seed and the thread).
 *
 * Sharing protocol (the program never calls the pool with a ref it does not
 * legitimately hold, except the deliberately stale and invalid refs):
 *
 *  - Every entry the program puts gets a program-wide id k and a record
 *    rec(k) (ref, size, kind, content version, and the program's own count
 *    of owners and pins it holds).  Contents are a function of (seed, k,
 *    version): the first 8 bytes hold k (never rewritten), the rest come
 *    from splitmix64 (in swap mode some entries are made compressible).
 *  - An OWNER is held either privately by one thread (its `owned` list) or
 *    by a shared slot.  A slot is one atomic word: (k + 1) << 32 | borrowers.
 *    A thread BORROWS a slot's owner by incrementing the borrower count
 *    (CAS, only while the slot is non-empty) and may then pin, get, stat,
 *    prefetch or retain the entry; the slot's owner can only be TAKEN (CAS
 *    from exactly (k + 1) << 32 to 0) while nobody borrows it, so a borrowed
 *    entry always has at least one owner.  PUBLISH moves a private owner
 *    into an empty slot, TAKE moves a slot's owner to the taker's list.
 *  - A pin, once taken, is a private "held pin" that may outlive every
 *    owner; it may be handed to another thread through a mailbox (atomic
 *    pointer exchange) and unpinned there.
 *  - rec(k).owners / rec(k).pins are decremented BEFORE pp_release /
 *    pp_unpin and incremented before pp_retain / pp_pin, so the free
 *    function (which must run after the matching release / unpin) sees
 *    them at 0 -- otherwise the pool freed an entry that is still owned or
 *    pinned.
 *  - Writers are serialized by the program (rec.rw, a reader/writer token
 *    that never blocks): a thread that reads the contents under a pin or a
 *    pp_get pointer holds a read token (rw > 0) for as long as it may read
 *    them; a thread rewrites an entry (version + 1, under PP_PIN_WRITE)
 *    only if it turned rw from 0 to -1.  A pin taken while a writer holds
 *    the token is "blind": it checks only the first 8 bytes (k), which
 *    writers never touch, so pins of the pool still overlap write pins.
 *    rec.version changes only under the writer's write pin, before its
 *    unpin: whenever the entry is unpinned, its bytes are that version.
 *  - Stale refs: any rec whose free function has run on its home node's
 *    reclaimer (rec.reclaimed == 1, read with acquire) names a reclaimed
 *    entry; every call with it must fail with PP_ESTALE (pp_stat included:
 *    it describes an entry only until the entry is queued for reclamation).
 *  - With --qsbr, threads are in QSBR mode: pointers from pp_get() are kept
 *    (and re-verified) after the owner is dropped, until the next
 *    pp_quiescent(); rec.qsbr_holders lets the free function check that
 *    the pool waited for that quiescent state.
 *
 * Data blocks and the free-once invariant.  Entries of the program's types
 * are allocated with a hidden 64-byte header in front of the data (the
 * block: magic, k, the version its bytes hold, and the program's pins on
 * that very block).  Without swap every entry is one block, freed once, on
 * its home node's reclaimer, after the program dropped its last owner and
 * pin.  With swap an entry is a sequence of blocks: the one pp_put was
 * given, then one per load (the type's load makes it).  The invariant
 * checked is per block and per entry:
 *   - every block is freed exactly once, by the free function, with no
 *     program pin on it, with its bytes intact (its own version);
 *   - a block freed on the home reclaimer is the entry's last (the entry
 *     died resident: once, after the last owner, pin and QSBR reader);
 *     any other block is freed by an eviction, on a pool thread that is
 *     not a reclaimer nor a user thread, and never for an entry that was
 *     escaped (pp_get) or of a never-evicted type;
 *   - at the end, per entry: blocks made (1 + loads) == blocks freed ==
 *     evicted + reclaimed, reclaimed <= 1 (0 if it died swapped: the pool
 *     then only drops its swap copy).
 * Flat entries (type NULL: the pool reloads them into posix_memalign
 * memory and frees them with free()) have no free hook; they are checked
 * by contents on every pin, by the sanitizers, and by the pool's counters.
 *
 * At the end everything still owned or pinned is dropped, the pool is
 * drained until no entry, queue or reservation is left, and
 * pp_pool_stats() must match the program's own counts exactly, per node
 * and in total.
 */
#include "torture.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testing/testhooks.h"   /* pp__debug_yield_set, pp__debug_hot_after */

const char stress_prog[] = "torture";

pp_pool_t *g_pool;
unsigned g_nnodes;
int g_rtid[PP_MAX_NODES];
atomic_int g_stop;
__thread int tl_user;

rectab_t g_recs;
slots_t g_slots = { NULL, 0, 1 };        /* the take also releases (acq_rel) */
static _Atomic uint64_t g_mbox_words[MAILBOXES];
mbox_t g_mbox = { g_mbox_words, MAILBOXES };
_Atomic int64_t *g_outstanding;
_Atomic int64_t g_pin_bytes, g_forever_bytes;

_Atomic uint64_t g_frees_total;
_Atomic uint64_t g_frees_node[PP_MAX_NODES];
_Atomic uint64_t g_evict_frees;
_Atomic uint64_t g_saves, g_saves_ok, g_saves_lost, g_load_calls;

const char *const op_names[OP_N] = {
    "put", "publish", "take", "borrow", "owned", "release", "held", "stale",
    "quiesce"
};

thr_t *g_thr;

/* ------------------------------------------------------------------------ */
/* Failure reporting                                                         */
/* ------------------------------------------------------------------------ */

const char *thr_who(const thr_t *t, char *buf, size_t size)
{
    if (t->idx == g_threads)
        snprintf(buf, size, "main op=%" PRIu64, t->op);
    else
        snprintf(buf, size, "%u op=%" PRIu64, t->idx, t->op);
    return buf;
}

void failf(const thr_t *t, const char *fmt, ...)
{
    char who[64];
    va_list ap;
    va_start(ap, fmt);
    fail_vat(t != NULL ? thr_who(t, who, sizeof who) : NULL, fmt, ap);
    va_end(ap);
}

/* ------------------------------------------------------------------------ */
/* Main                                                                      */
/* ------------------------------------------------------------------------ */

/* The program's own tables: records (one per put; at most one put per op,
 * + slack), slots, pin counts, threads (the workers and main). */
static void setup_tables(void)
{
    rectab_init(&g_recs, sizeof(rec_t), (uint64_t)g_threads * g_ops + 64, 0);
    g_slots.w = calloc(g_nslots, sizeof *g_slots.w);
    g_slots.n = g_nslots;
    g_mbox.n = g_nmbox;
    g_outstanding = calloc(g_threads + 1, sizeof *g_outstanding);
    g_thr = calloc(g_threads + 1, sizeof *g_thr);
    if (!g_slots.w || !g_outstanding || !g_thr)
        oom();
    tl_user = 1;
}

/* The pool (with --swap in a fresh directory under DIR); 0, or the exit
 * status. */
static int setup_pool(void)
{
    if (g_swap) {
        if (snprintf(g_rundir, sizeof g_rundir, "%s/torture-XXXXXX", g_swap_parent) >=
                (int)sizeof g_rundir ||
            mkdtemp(g_rundir) == NULL) {
            fprintf(stderr, "torture: cannot make a directory under %s: %s\n", g_swap_parent,
                    strerror(errno));
            return 2;
        }
        printf("torture: swap run directory %s\n", g_rundir);
    }

    pp_options_t opt = PP_OPTIONS_INIT;
    opt.topology = g_topology;
    opt.flags = (g_track ? PP_TRACK_PINS : 0u) | (g_compress ? PP_SWAP_COMPRESS : 0u);
    opt.report = report_cb;
    opt.reclaim_backlog = g_backlog;
    if (g_swap) {
        opt.mem_limit = g_mem_limit;
        opt.swap_dir = g_rundir;
        opt.swap_limit = g_swap_limit;
        opt.io_engine = g_io_engine;
    }
    if (g_yield)
        pp__debug_yield_set(~0u, g_yield);
    int rc = pool_create(&opt);
    if (rc == 0)
        pp__debug_hot_after(g_pool, g_hot ? 1 : 0);
    if (rc != 0) {
        printf("torture: FAIL: pp_pool_create(topology %s%s%s): %s [seed=%" PRIu64 " thread=main]\n",
               g_topology ? g_topology : "NULL", g_swap ? ", swap_dir " : "",
               g_swap ? g_rundir : "", pp_err_name(rc), g_seed);
        if (g_swap)
            rmdir(g_rundir);
        return 1;
    }
    return 0;
}

/* The main thread, the pool's nodes and reclaimers, and the checks made
 * before the workers start; 0, or the exit status. */
static int setup_main(run_t *run)
{
    thr_t *m = &g_thr[g_threads];
    m->idx = g_threads;
    m->rng = g_seed ^ 0xA11CEull;

    pp_stats_t *st = calloc(1, sizeof *st);
    pp_node_stats_t *node = calloc(PP_MAX_NODES, sizeof *node);
    if (!st || !node)
        return 2;
    int rc = stat_read(g_pool, st, node);
    if (rc != 0 || st->nodes < 1 || st->nodes > PP_MAX_NODES) {
        failf(m, "pp_pool_stats after create: %s, nodes %u", pp_err_name(rc), st->nodes);
        return 1;
    }
    g_nnodes = st->nodes;
    for (unsigned n = 0; n < g_nnodes; n++)
        g_rtid[n] = node[n].reclaimer_tid;
    if (st->topology_is_this_system != (g_topology == NULL))
        failf(m, "topology_is_this_system = %d for topology %s", st->topology_is_this_system,
              g_topology ? g_topology : "NULL");
    printf("torture: pool: %u node(s), topology_is_this_system=%d, reclaimers bound:",
           g_nnodes, st->topology_is_this_system);
    for (unsigned n = 0; n < g_nnodes; n++)
        printf(" %d", node[n].cpu_bound);
    if (g_swap)
        printf(", I/O engine: %s, depth %u (%s)",
               st->io_engine == PP_IO_ENGINE_URING ? "io_uring" : "threads", st->io_depth,
               st->io_engine_why);
    printf("\n");
    fflush(stdout);
    if (g_swap && g_io_engine != PP_IO_ENGINE_AUTO && st->io_engine != g_io_engine)
        failf(m, "--io-engine asked for engine %u, the pool runs %u", g_io_engine, st->io_engine);
    preflight(m);
    if (g_swap)
        check_swap_dir(m);
    run->m = m;
    run->st = st;
    run->node = node;
    return 0;
}

int main(int argc, char **argv)
{
    fail_setup(&g_stop, 1024, "pool thread tid");
    int rc = parse_args(argc, argv);
    if (rc >= 0)
        return rc;
    print_params();
    setup_tables();
    if ((rc = setup_pool()) != 0)
        return rc;
    run_t run = { 0 };
    if ((rc = setup_main(&run)) != 0)
        return rc;
    if ((rc = start_workers(&run)) != 0)
        return rc;
    bounds_start(&run);
    go_workers(&run);
    watch_workers(&run);
    return final_checks(&run);
}
