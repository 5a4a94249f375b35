/*
 * stress/torture/bounds.c -- the torture's memory bounds under the reclaim
 * backlog (docs/api.md, "Overload").
 *
 * Before the workers start (they have registered with the pool and wait at
 * the gate), the program prints the bounds it will check, all computed from
 * its own structures and the pool's figures:
 *
 *  - the backlog bound per node (pp_pool_stats reclaim_backlog);
 *  - LIVE: the entries the program can keep alive at once.  An entry is
 *    alive while the program holds an owner or a pin of it (a pinned dead
 *    entry is not in the backlog): the shared slots' owners, the pins in
 *    the mailboxes, and per worker its private owners (OWN_CAP), held pins
 *    (g_held_cap), the entry it is putting (its buffer exists before the
 *    put and through a put that waits) and one pin on its way between a
 *    mailbox and its held pins.  Every other pin of an operation is of an
 *    entry the thread owns or borrows from a slot, counted there.  Entries
 *    read through a QSBR pointer only are dead, queued: in the backlog.
 *    In the backlog's units each weighs at most its size + 64, so
 *    live_charge = LIVE x (max size + 64) (with swap at most mem_limit +
 *    LIVE x 64: a dying entry is charged its resident bytes, and those of
 *    all entries stay within mem_limit); in memory each weighs its size
 *    plus the block header (BLK_HDR), glibc's chunk overhead and its table
 *    slot (live_rss), plus a malloc'ed record per held pin.  With swap the
 *    pool's resident bytes, live or dead, never pass mem_limit (checked
 *    during the run), so the data part of live_rss is at most mem_limit
 *    (with the same per-entry overhead) plus the buffers being put;
 *  - the pool's promise holds if live_charge <= the bound's room above
 *    the wait mark (bound - mark, three quarters of it): then no node's
 *    backlog_peak may pass the bound; otherwise (more than that room may
 *    die while puts wait) the check is backlog_peak <= bound +
 *    live_charge.  The line says which;
 *  - the peak resident set: VmRSS measured at the gate (the pool, its
 *    tables' directories, the program's tables, the threads) + live_rss +
 *    nodes x the backlog's peak limit in memory (the bound, or bound +
 *    live_charge when the promise does not hold) + an allowance (below),
 *    times the
 *    sanitizer's cost per byte; plus, measured at the end, the program's
 *    records (one per put: a cost of the program, not of the pool, that
 *    grows with the run: a chunk of 65536 records at a time).  With no
 *    bound (--reclaim-backlog none) the backlog term is the default bound's
 *    (16 MiB per node): what the pool promises by default, so that the old
 *    unbounded growth fails the check.
 *
 * The backlog in memory: a dead entry is charged its size (if resident)
 * + 64, and holds its block (size + BLK_HDR + glibc's overhead) and its
 * slot (64): at most (min size + BLK_HDR + MALLOC_OH + SLOT) / (min size +
 * 64) times its charge, which is largest for the smallest entries (2.1 for
 * the default 16-byte minimum).  With swap a dead entry's resident bytes
 * are inside mem_limit (counted in live_rss), and what the backlog holds
 * beyond them is its slots: at most its charge.
 *
 * The allowance (ALLOW_* below, measured on this machine with the
 * --verbose breakdown; see stress/long-runs.md): glibc gives each thread an
 * arena, and the reclaimer frees a block into the arena of the thread that
 * allocated it: each arena keeps the free chunks of its own peak, so the
 * peaks of 16 arenas do not add up to the peak of their sum exactly
 * (ALLOW_FRAG_PCT of the data terms, and ALLOW_PER_THREAD per thread: its
 * arena's top and tcache, its stack's pages below the gate's depth);
 * table segments are mapped 32768 slots (2 MiB) at a time per node, their
 * pages touched as slots are handed out (huge pages, 2 MiB at a touch,
 * only from a node's fifth segment on, past what these runs use), and
 * slots parked in threads' magazines are not reused by other threads
 * (ALLOW_PER_NODE); with swap, the swap and read-helper threads' buffers
 * (a chunk being written, LZ4 buffers; ALLOW_SWAP_PER_NODE); and
 * ALLOW_FIXED for the rest (stdio, the first use of code and libraries'
 * pages, hwloc).
 *
 * Sanitizers (measured with --verbose's breakdown and TSan's
 * profile_memory; stress/long-runs.md has the figures).  Four terms:
 *  - SAN_PER_BYTE scales the data terms and the allowance.  ThreadSanitizer
 *    (clang 14's runtime) gives every application byte 2 bytes of shadow
 *    and half a byte of meta shadow: 3.5, rounded up to 4.
 *    AddressSanitizer gives each allocation a 16-byte header and a redzone
 *    (16 bytes up to 2 KiB, growing with the size), rounds it to a size
 *    class and adds 1/8 of shadow: for the smallest blocks (16 + BLK_HDR
 *    bytes) that is 144 bytes for glibc's 96, for the largest less: 2.5
 *    covers it with the fragmentation of its per-thread caches;
 *  - SAN_PER_ENTRY, per entry that can exist at once (LIVE, plus the most
 *    dead entries the backlog's peak limit allows: limit / (min size +
 *    64)): TSan makes a sync object with a vector clock for every atomic
 *    that synchronises, and each block's header has three (freed with the
 *    block), each entry's slot two: 2 KiB, an estimate (a few hundred
 *    bytes per sync object and clock), not measured apart from the
 *    records: the runs measured stayed well within the sum;
 *  - SAN_PER_RECORD, per record (never freed): 72 bytes in the default
 *    build; TSan's sync objects for a record's atomics, measured at 3.1 to
 *    3.5 KiB per put (the growth of TSan's "intalloc" + "syncobj" over a
 *    run divided by its puts), 4 KiB; ASan adds 1/8 of shadow to the
 *    records' chunks;
 *  - ASan's quarantines: freed blocks wait in a quarantine of
 *    quarantine_size_mb (ASAN_OPTIONS; default 256 MiB) plus a per-thread
 *    one of thread_local_quarantine_size_kb (default 1 MiB) before reuse.
 *    They count requested bytes: x 2 for the header, redzone, size class
 *    and shadow of our smallest blocks (1.8).  With the default quarantine
 *    this term dominates, so under ASan the RSS check only catches a leak
 *    of several hundred MiB.
 */
#include "torture.h"

#include <stdlib.h>
#include <string.h>

#define MALLOC_OH   24u       /* glibc: an 8-byte chunk header, rounded up to 16 */
#define SLOT_BYTES  64u       /* a table slot (pp__entry_t) per entry, live or dead */

#define ALLOW_FIXED          ((uint64_t)16 << 20)
#define ALLOW_PER_THREAD     ((uint64_t)512 << 10)
#define ALLOW_PER_NODE       ((uint64_t)2 << 20)
#define ALLOW_SWAP_PER_NODE  ((uint64_t)4 << 20)
#define ALLOW_FRAG_PCT       25u

#if defined(STRESS_TSAN)
#define SAN_PER_BYTE    4.0
#define SAN_PER_ENTRY   2048u
#define SAN_PER_RECORD  4096u
#elif defined(STRESS_ASAN)
#define SAN_PER_BYTE    2.5
#define SAN_PER_ENTRY   0u
#define SAN_PER_RECORD  0u          /* the chunks' shadow: records_rss */
#define SAN_QUARANTINE_COST 2u
#else
#define SAN_PER_BYTE    1.0
#define SAN_PER_ENTRY   0u
#define SAN_PER_RECORD  0u
#endif

/* ASan's quarantines (ASAN_OPTIONS, or their defaults): bytes. */
static uint64_t asan_quarantine(void)
{
#if defined(STRESS_ASAN)
    uint64_t global_mb = 256, local_kb = 1024;
    const char *o = getenv("ASAN_OPTIONS");
    for (const char *p = o; p != NULL && *p; p++) {
        if (p != o && p[-1] != ':' && p[-1] != ',' && p[-1] != ' ')
            continue;
        long long v;
        if (sscanf(p, "quarantine_size_mb=%lld", &v) == 1 && v >= 0)
            global_mb = (uint64_t)v;
        else if (sscanf(p, "thread_local_quarantine_size_kb=%lld", &v) == 1 && v >= 0)
            local_kb = (uint64_t)v;
    }
    return SAN_QUARANTINE_COST *
           ((global_mb << 20) + (uint64_t)(g_threads + g_nnodes * 3 + 2) * (local_kb << 10));
#else
    return 0;
#endif
}

/* A bound's room above its wait mark, the mark being a quarter of the bound
 * rounded up (pinpool.h, pp_stats_t.backlog_mark): the live data that may
 * die while puts wait without the backlog passing the bound. */
static uint64_t room_above_mark(uint64_t bound)
{
    return bound - (bound / 4 + (bound % 4 != 0));
}

static double mib(uint64_t b)
{
    return (double)b / (1024.0 * 1024.0);
}

uint64_t records_rss(void)
{
    uint64_t n = rectab_used(&g_recs);
    uint64_t chunks = (n + REC_CHUNK - 1) / REC_CHUNK;
    uint64_t b = chunks * REC_CHUNK * (uint64_t)sizeof(rec_t);
#if defined(STRESS_ASAN)
    b += b / 8;
#endif
    return b + n * SAN_PER_RECORD;
}

void bounds_start(run_t *run)
{
    const pp_stats_t *st = run->st;
    uint64_t bound = st->reclaim_backlog;
    run->backlog_bound = bound;

    /* The entries alive at once, and what they weigh. */
    uint64_t per_thread = OWN_CAP + (uint64_t)g_held_cap + 2;
    run->live_count = g_nslots + g_nmbox + (uint64_t)g_threads * per_thread;
    run->live_charge = run->live_count * (g_size_max + 64);
    if (g_swap) {
        /* A dying entry is charged its resident bytes, and the resident
         * bytes of all entries, live or dead, stay within mem_limit. */
        uint64_t c = (uint64_t)g_mem_limit + run->live_count * 64;
        if (c < run->live_charge)
            run->live_charge = c;
    }
    uint64_t oh = BLK_HDR + MALLOC_OH + SLOT_BYTES;
    uint64_t hpins = ((uint64_t)g_threads * (uint64_t)g_held_cap + g_nmbox) *
                     (sizeof(hpin_t) + MALLOC_OH);
    run->live_rss = run->live_count * (g_size_max + oh) + hpins;
    if (g_swap) {
        /* Resident data, live or dead, within mem_limit (each resident
         * entry at least g_size_min bytes, with its header and chunk), the
         * buffers being put, every live entry's slot. */
        uint64_t resident = (uint64_t)g_mem_limit +
                            (uint64_t)g_mem_limit / g_size_min * (BLK_HDR + MALLOC_OH);
        uint64_t swap_live = resident + (uint64_t)g_threads * (g_size_max + oh) +
                             run->live_count * SLOT_BYTES + hpins;
        if (swap_live < run->live_rss)
            run->live_rss = swap_live;
    }

    /* The check of backlog_peak. */
    run->promise = bound != UINT64_MAX && run->live_charge <= bound - st->backlog_mark;
    run->peak_limit = bound == UINT64_MAX ? UINT64_MAX
                      : run->promise      ? bound
                                          : bound + run->live_charge;

    /* The backlog in memory, per node (see the top): what its peak may
     * reach, the default bound's with none. */
    uint64_t b = bound == UINT64_MAX ? PP_RECLAIM_BACKLOG_DEFAULT : bound;
    bool over = run->live_charge > room_above_mark(b);
    if (over)
        b += run->live_charge;
    double ratio = g_swap ? 1.0
                          : (double)(g_size_min + BLK_HDR + MALLOC_OH + SLOT_BYTES) /
                                (double)(g_size_min + 64);
    run->backlog_rss = (uint64_t)((double)b * ratio) * g_nnodes;
    uint64_t entries = run->live_count + b / (g_size_min + 64) * g_nnodes;

    uint64_t data = run->live_rss + run->backlog_rss;
    run->allowance = ALLOW_FIXED + (uint64_t)g_threads * ALLOW_PER_THREAD +
                     (uint64_t)g_nnodes * (ALLOW_PER_NODE + (g_swap ? ALLOW_SWAP_PER_NODE : 0)) +
                     data / 100 * ALLOW_FRAG_PCT;
    run->san_factor = SAN_PER_BYTE;
    run->san_extra = asan_quarantine() + entries * SAN_PER_ENTRY;
    run->baseline_rss = proc_status_bytes("VmRSS");
    run->rss_bound_start = run->baseline_rss +
                           (uint64_t)((double)(data + run->allowance) * run->san_factor) +
                           run->san_extra;

    char bl[24], mk[24], lim[24];
    printf("torture: bounds: backlog_bound=%s per node (mark %s), live: %" PRIu64 " entries "
           "(%u slots, %u mailboxes, %" PRIu64 " per thread) live_charge=%" PRIu64 " "
           "(%.1f MiB); promise %s: %s%s; peak RSS bound = baseline %.1f MiB + live %.1f MiB "
           "+ %u node(s) x backlog %.1f MiB (%s%s x %.2f in memory) + allowance %.1f MiB%s = "
           "%.1f MiB, + the "
           "records at the end (%.1f MiB per 65536 puts)\n",
           backlog_str(bound, bl, sizeof bl), backlog_str(st->backlog_mark, mk, sizeof mk),
           run->live_count, g_nslots, g_nmbox, per_thread, run->live_charge,
           mib(run->live_charge),
           bound == UINT64_MAX ? "void (no bound)"
           : run->promise      ? "holds (live_charge <= bound - mark)"
                               : "does not hold (live_charge > bound - mark)",
           bound == UINT64_MAX ? "backlog_peak unchecked"
           : run->promise      ? "check backlog_peak <= bound"
                               : "check backlog_peak <= bound + live_charge = ",
           bound == UINT64_MAX || run->promise ? ""
                                               : backlog_str(run->peak_limit, lim, sizeof lim),
           mib(run->baseline_rss), mib(run->live_rss), g_nnodes,
           mib(run->backlog_rss / g_nnodes),
           bound == UINT64_MAX ? "none: the default bound" : "the bound",
           over ? " + live_charge" : "", ratio, mib(run->allowance),
           run->san_factor != 1.0 || run->san_extra
               ? " (data and allowance x the sanitizer's factor, + its costs: next line)"
               : "",
           mib(run->rss_bound_start),
           mib((uint64_t)REC_CHUNK * (sizeof(rec_t) + SAN_PER_RECORD)));
    if (run->san_factor != 1.0 || run->san_extra) {
        char what[160];
        if (SAN_PER_ENTRY)
            snprintf(what, sizeof what, "%" PRIu64 " entries at once x %u bytes", entries,
                     SAN_PER_ENTRY);
        else
            snprintf(what, sizeof what, "its quarantines: %.1f MiB", mib(asan_quarantine()));
#if defined(STRESS_ASAN)
        const char *rec_note = " + 1/8 of shadow";
#else
        const char *rec_note = "";
#endif
        printf("torture: bounds: sanitizer %s: data and allowance x %.1f, + %.1f MiB (%s), "
               "records %zu bytes each%s\n", sanitizer_name(), run->san_factor,
               mib(run->san_extra), what, sizeof(rec_t) + SAN_PER_RECORD, rec_note);
    }
    fflush(stdout);
}

void bounds_check(run_t *run, uint64_t *peak_rss, uint64_t *rss_bound)
{
    thr_t *m = run->m;
    const pp_stats_t *st = run->st;
    for (unsigned n = 0; n < g_nnodes; n++)
        if (run->node[n].backlog_peak > run->peak_limit)
            failf(m, "node %u: backlog_peak %" PRIu64 " > %" PRIu64 " (%s)", n,
                  run->node[n].backlog_peak, run->peak_limit,
                  run->promise ? "the bound: the live data fits in the room above the mark, "
                                 "so the pool promises the bound"
                               : "the bound + the live data: the live data may be more than "
                                 "the room above the mark");
    uint64_t rec = records_rss();
    *rss_bound = run->rss_bound_start + rec;
    *peak_rss = proc_status_bytes("VmHWM");
    if (*peak_rss == 0)
        failf(m, "cannot read VmHWM from /proc/self/status");
    else if (*peak_rss > *rss_bound)
        failf(m, "peak RSS %.1f MiB > its bound %.1f MiB (baseline %.1f + live %.1f + "
              "backlog %.1f + allowance %.1f%s + records %.1f MiB%s)", mib(*peak_rss),
              mib(*rss_bound), mib(run->baseline_rss), mib(run->live_rss),
              mib(run->backlog_rss), mib(run->allowance),
              run->san_factor != 1.0 ? ", x the sanitizer's factor, + its costs" : "", mib(rec),
              run->backlog_bound == UINT64_MAX
                  ? "; the pool has no backlog bound: its backlog grew past the default one"
                  : "");
    if (g_verbose)
        printf("torture: memory: peak RSS %.1f MiB, bound %.1f MiB: baseline %.1f, live %.1f, "
               "backlog %.1f, allowance %.1f, records %.1f (%" PRIu64 " records), sanitizer "
               "factor %.1f + %.1f; backlog_peak %" PRIu64 " (limit %" PRIu64 "), slots %" PRIu64
               " (%.1f MiB of table)\n", mib(*peak_rss), mib(*rss_bound),
               mib(run->baseline_rss), mib(run->live_rss), mib(run->backlog_rss),
               mib(run->allowance), mib(rec), rectab_used(&g_recs), run->san_factor,
               mib(run->san_extra), st->total.backlog_peak, run->peak_limit, st->total.slots,
               mib(st->total.slots * SLOT_BYTES));
}
