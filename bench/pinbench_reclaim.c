/*
 * pinbench_reclaim.c -- the reclaim figures (docs/performance.md), each from
 * a fresh pool with default options:
 *
 * (a) Reclaim lag: the time from the final pp_unpin of an entry to the call
 *     of its free function.  Entries are puts of a one-line probe; each is
 *     pinned, released (dead but pinned), then stamped with CLOCK_MONOTONIC
 *     just before its final pp_unpin; the type's free function, on the
 *     reclaimer thread, records now - stamp.  Batches of 256, one after the
 *     other, so the reclaimer sees a steady stream; p50, p99 and max of
 *     every entry, next to the pool's own histogram (pp_pool_stats).  The
 *     producing thread is bound to a CPU: first one the reclaimer is not
 *     bound to (the reclaimer has a CPU to itself, as with a spare core),
 *     then the reclaimer's own (it waits for the producer's time slice: what
 *     a reclaimer sharing its CPU with a busy worker sees).
 * (b) What a final unpin costs against an ordinary one: each round puts N
 *     entries and pins each; "ordinary" times the loop of pp_unpin over them
 *     while they are still owned; "final" releases each first and then times
 *     the loop of pp_unpin, each of which queues its entry for the
 *     reclaimer.  The two variants alternate in order, round by round; the
 *     pool is drained between them (pp_pool_drain); medians of ns per unpin.
 *     The thread runs on a CPU the reclaimer is not bound to (on the same
 *     one, the reclaimer's frees would be timed with the unpins).
 * (c) Memory per entry: resident-set growth (/proc/self/statm, after
 *     malloc_trim so that freed memory is not silently reused) while N
 *     entries are made, divided by N.  Every entry points at one shared,
 *     already touched buffer (pinpool: size 0), so only the structure's own
 *     memory counts: pinpool's table (the caller's ref array is allocated
 *     and touched before the first reading), mutex-dict's ck_ht and entry
 *     structs, urcu-lfht's buckets and nodes (those two when selected with
 *     --impls, as they are by default).
 *
 * bench/sidebyside compiles this file a second time with PB_OLD=1 against
 * an older library (as pinbench_pinpool.c): that copy defines
 * pb_reclaim_pinpool_old, the figures (a) to (c) of the older library, and
 * pb_reclaim_figures runs each figure for both, one after the other, in
 * the same process.  It must see the older library's own header: this file
 * reads pp_stats_t, whose layout changes between versions.
 */
#define _GNU_SOURCE
#include "pinbench.h"

#include <pinpool.h>

#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pp_pool_t *new_pool(void)
{
    pp_pool_t *pool;
    int rc = pp_pool_create(NULL, &pool);
    if (rc != 0)
        pb_die_pp("pp_pool_create", rc);
    return pool;
}

static void drain(pp_pool_t *pool)
{
    int rc = pp_pool_drain(pool, 60000);
    if (rc != 0)
        pb_die_pp("pp_pool_drain", rc);
}

static void destroy_pool(pp_pool_t *pool)
{
    int rc = pp_pool_destroy(pool);
    if (rc != 0)
        pb_die_pp("pp_pool_destroy", rc);
}

/* Headers since pinpool_stats.h want the size and version of the stats
 * set; older ones (the PB_OLD copy may see one) have neither. */
#ifdef PP_STATS_VERSION
#define PB_STATS_INIT PP_STATS_INIT
#else
#define PB_STATS_INIT {0}
#endif

/* The thread id of node 0's reclaimer: pp_node_stats, or node[0] of
 * pp_pool_stats in headers older than it. */
static int reclaimer_tid0(pp_pool_t *pool)
{
#ifdef PP_STATS_VERSION
    pp_node_stats_t ns = PP_NODE_STATS_INIT;
    int rc = pp_node_stats(pool, 0, &ns);
    if (rc != 0)
        pb_die_pp("pp_node_stats", rc);
    return ns.reclaimer_tid;
#else
    pp_stats_t st;
    int rc = pp_pool_stats(pool, &st);
    if (rc != 0)
        pb_die_pp("pp_pool_stats", rc);
    return st.node[0].reclaimer_tid;
#endif
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* "850 ns", "12.3 us", "4.56 ms" */
static const char *fmt_ns(double ns, char buf[32])
{
    if (ns < 1e3)
        snprintf(buf, 32, "%.0f ns", ns);
    else if (ns < 1e6)
        snprintf(buf, 32, "%.1f us", ns * 1e-3);
    else
        snprintf(buf, 32, "%.2f ms", ns * 1e-6);
    return buf;
}

/* ---- (a) reclaim lag ---------------------------------------------------- */

typedef struct probe {
    _Alignas(64) uint64_t stamp;      /* ns, just before the final unpin */
} probe_t;

typedef struct lag_log {
    _Atomic size_t n;
    size_t cap;
    uint64_t *lag;                    /* written by the reclaimer */
} lag_log_t;

static lag_log_t lag_log;

/* On the reclaimer thread.  The pool orders the final unpin (and so the
 * stamp) before this call, and this call before pp_pool_drain returns. */
static void probe_free(void *data, size_t size, void *ctx)
{
    (void)size;
    uint64_t now = pb_now_ns();
    lag_log_t *log = ctx;
    size_t i = atomic_fetch_add_explicit(&log->n, 1, memory_order_relaxed);
    if (i < log->cap)
        log->lag[i] = now - ((const probe_t *)data)->stamp;
}

static const pp_type_t probe_type = { .name = "pinbench-lag-probe", .free = probe_free,
                                      .ctx = &lag_log };

/* Binds the calling thread to a CPU that the reclaimer of node 0 is bound
 * to (same true) or is not; *cpu says which, -1 if none qualifies (then the
 * thread stays as it is).  Returns the thread's previous mask in *old. */
static void bind_near_reclaimer(pp_pool_t *pool, bool same, int *cpu, cpu_set_t *old)
{
    *cpu = -1;
    if (pthread_getaffinity_np(pthread_self(), sizeof *old, old) != 0)
        pb_die("pthread_getaffinity_np failed");
    int tid = reclaimer_tid0(pool);
    cpu_set_t rec;
    if (tid <= 0 || sched_getaffinity(tid, sizeof rec, &rec) != 0)
        return;
    for (int c = 0; c < CPU_SETSIZE && *cpu < 0; c++)
        if (CPU_ISSET(c, old) && (CPU_ISSET(c, &rec) != 0) == same)
            *cpu = c;
    if (*cpu < 0)
        return;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(*cpu, &one);
    int rc = pthread_setaffinity_np(pthread_self(), sizeof one, &one);
    if (rc != 0)
        pb_die_errno("pthread_setaffinity_np", rc);
}

static void reclaim_lag(size_t m, int same_cpu, const char *label, double *p50, double *p99)
{
    enum { BATCH = 256 };
    pp_pool_t *pool = new_pool();
    int cpu;
    cpu_set_t old;
    bind_near_reclaimer(pool, same_cpu, &cpu, &old);
    probe_t *probes = aligned_alloc(64, m * sizeof *probes);
    if (probes == NULL)
        pb_die("out of memory (probes)");
    memset(probes, 0, m * sizeof *probes);
    lag_log.cap = m;
    lag_log.lag = pb_calloc(m, sizeof *lag_log.lag);
    atomic_store_explicit(&lag_log.n, 0, memory_order_relaxed);

    pp_ref_t refs[BATCH];
    int rc;
    for (size_t b = 0; b < m; b += BATCH) {
        size_t k = m - b < BATCH ? m - b : BATCH;
        for (size_t i = 0; i < k; i++) {
            if ((rc = pp_put(pool, &probes[b + i], sizeof *probes, &probe_type, 0, &refs[i])) != 0)
                pb_die_pp("pp_put", rc);
            if ((rc = pp_pin(pool, refs[i], 0, NULL)) != 0)
                pb_die_pp("pp_pin", rc);
            if ((rc = pp_release(pool, refs[i])) != 0)     /* dead, still pinned */
                pb_die_pp("pp_release", rc);
        }
        for (size_t i = 0; i < k; i++) {
            probes[b + i].stamp = pb_now_ns();
            if ((rc = pp_unpin(pool, refs[i])) != 0)       /* final: queues it */
                pb_die_pp("pp_unpin", rc);
        }
    }
    drain(pool);
    int rc2 = pthread_setaffinity_np(pthread_self(), sizeof old, &old);
    if (rc2 != 0)
        pb_die_errno("pthread_setaffinity_np", rc2);
    size_t got = atomic_load_explicit(&lag_log.n, memory_order_relaxed);
    if (got != m)
        pb_die("reclaim lag: %zu entries freed after the drain, expected %zu", got, m);
    pp_stats_t st = PB_STATS_INIT;
    if ((rc = pp_pool_stats(pool, &st)) != 0)
        pb_die_pp("pp_pool_stats", rc);
    destroy_pool(pool);

    qsort(lag_log.lag, m, sizeof *lag_log.lag, cmp_u64);
    double sum = 0;
    for (size_t i = 0; i < m; i++)
        sum += (double)lag_log.lag[i];
    char a[32], b[32], c[32], d[32], e[32], f[32];
    char where[64];
    if (cpu < 0)
        snprintf(where, sizeof where, "producer unbound: no CPU %s the reclaimer's",
                 same_cpu ? "is" : "but");
    else
        snprintf(where, sizeof where, "producer on CPU %d, %s", cpu,
                 same_cpu ? "the reclaimer's own" : "not the reclaimer's");
    printf("  (a%s) %s%sreclaim lag, final pp_unpin to the free call, %zu entries in batches"
           " of %d, %s:\n", same_cpu ? "'" : "", label != NULL ? label : "",
           label != NULL ? ": " : "", m, (int)BATCH, where);
    printf("      measured by the free function:  p50 %s, p99 %s, max %s, mean %s\n",
           fmt_ns((double)lag_log.lag[m / 2], a), fmt_ns((double)lag_log.lag[m * 99 / 100], b),
           fmt_ns((double)lag_log.lag[m - 1], c), fmt_ns(sum / (double)m, d));
    printf("      the pool's own (pp_pool_stats): p50 %s, p99 %s (histogram bucket bounds;"
           " %llu lags)\n", fmt_ns((double)st.total.lag_p50_ns, e),
           fmt_ns((double)st.total.lag_p99_ns, f), (unsigned long long)st.total.lag_count);
    *p50 = (double)lag_log.lag[m / 2];
    *p99 = (double)lag_log.lag[m * 99 / 100];
    free(lag_log.lag);
    lag_log.lag = NULL;
    free(probes);
}

/* ---- (b) final against ordinary unpin ----------------------------------- */

/* Puts n entries of PB_DATA_BYTES and pins each. */
static void put_pinned(pp_pool_t *pool, pp_ref_t *refs, size_t n)
{
    int rc;
    for (size_t i = 0; i < n; i++) {
        if ((rc = pp_put(pool, pb_calloc(1, PB_DATA_BYTES), PB_DATA_BYTES, NULL, 0, &refs[i])) != 0)
            pb_die_pp("pp_put", rc);
        if ((rc = pp_pin(pool, refs[i], 0, NULL)) != 0)
            pb_die_pp("pp_pin", rc);
    }
}

static void release_all(pp_pool_t *pool, const pp_ref_t *refs, size_t n)
{
    int rc;
    for (size_t i = 0; i < n; i++)
        if ((rc = pp_release(pool, refs[i])) != 0)
            pb_die_pp("pp_release", rc);
}

/* Times the loop of pp_unpin over refs; ns per unpin. */
static double unpin_loop(pp_pool_t *pool, const pp_ref_t *refs, size_t n)
{
    int rc;
    uint64_t t0 = pb_now_ns();
    for (size_t i = 0; i < n; i++)
        if ((rc = pp_unpin(pool, refs[i])) != 0)
            pb_die_pp("pp_unpin", rc);
    return (double)(pb_now_ns() - t0) / (double)n;
}

static double run_ordinary(pp_pool_t *pool, pp_ref_t *refs, size_t n)
{
    put_pinned(pool, refs, n);
    double ns = unpin_loop(pool, refs, n);
    release_all(pool, refs, n);
    drain(pool);
    return ns;
}

static double run_final(pp_pool_t *pool, pp_ref_t *refs, size_t n)
{
    put_pinned(pool, refs, n);
    release_all(pool, refs, n);          /* each now dead, still pinned */
    double ns = unpin_loop(pool, refs, n);
    drain(pool);
    return ns;
}

static void final_unpin_cost(size_t n, unsigned rounds, const char *label, double *ordinary,
                             double *final)
{
    pp_pool_t *pool = new_pool();
    pp_ref_t *refs = pb_calloc(n, sizeof *refs);
    double *ord = pb_calloc(rounds, sizeof *ord), *fin = pb_calloc(rounds, sizeof *fin);
    /* On a CPU the reclaimer is not bound to: sharing one, the reclaimer's
     * own work (the frees) lands inside the timed loop. */
    int cpu;
    cpu_set_t old;
    bind_near_reclaimer(pool, false, &cpu, &old);
    run_ordinary(pool, refs, n);         /* warm-up: table segments, caches */
    run_final(pool, refs, n);
    for (unsigned r = 0; r < rounds; r++) {
        if (r % 2 == 0) {
            ord[r] = run_ordinary(pool, refs, n);
            fin[r] = run_final(pool, refs, n);
        } else {
            fin[r] = run_final(pool, refs, n);
            ord[r] = run_ordinary(pool, refs, n);
        }
    }
    destroy_pool(pool);
    int rc = pthread_setaffinity_np(pthread_self(), sizeof old, &old);
    if (rc != 0)
        pb_die_errno("pthread_setaffinity_np", rc);
    qsort(ord, rounds, sizeof *ord, cmp_double);
    qsort(fin, rounds, sizeof *fin, cmp_double);
    double mo = ord[(rounds - 1) / 2], mf = fin[(rounds - 1) / 2], ratio = mf / mo;
    printf("  (b) %s%sfinal pp_unpin against an ordinary one, %zu entries, %u interleaved"
           " rounds, median ns per unpin [min, max], %s:\n", label != NULL ? label : "",
           label != NULL ? ": " : "", n, rounds,
           cpu < 0 ? "unbound (no CPU but the reclaimer's)" : "on a CPU not the reclaimer's");
    printf("      ordinary (entry still owned)      %7.2f  [%.2f, %.2f]\n", mo, ord[0],
           ord[rounds - 1]);
    printf("      final (dead entry: queues it)     %7.2f  [%.2f, %.2f]\n", mf, fin[0],
           fin[rounds - 1]);
    printf("      final / ordinary = %.2f  (target <= 2.0: %s)\n", ratio,
           ratio <= 2.0 ? "met" : "NOT met");
    *ordinary = mo;
    *final = mf;
    free(ord);
    free(fin);
    free(refs);
}

/* ---- (c) memory per entry ----------------------------------------------- */

static double rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    if (f == NULL)
        pb_die("cannot open /proc/self/statm: %s", strerror(errno));
    unsigned long size, resident;
    int ok = fscanf(f, "%lu %lu", &size, &resident) == 2;
    if (fclose(f) != 0 || !ok)
        pb_die("cannot read /proc/self/statm");
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0)
        pb_die_errno("sysconf(_SC_PAGESIZE)", errno);
    return (double)resident * (double)page;
}

/* The resident set before a measurement: freed memory given back first. */
static double rss_settled(void)
{
    malloc_trim(0);
    return rss_bytes();
}

static void no_free(void *data, size_t size, void *ctx)
{
    (void)data, (void)size, (void)ctx;
}

static const pp_type_t shared_type = { .name = "pinbench-shared", .free = no_free };

static double pinpool_bytes_per_entry(size_t n, void *shared)
{
    pp_pool_t *pool = new_pool();
    pp_ref_t *refs = pb_malloc(n * sizeof *refs);
    memset(refs, 0xff, n * sizeof *refs);         /* touched: not the pool's */
    double before = rss_settled();
    int rc;
    for (size_t i = 0; i < n; i++)
        if ((rc = pp_put(pool, shared, 0, &shared_type, 0, &refs[i])) != 0)
            pb_die_pp("pp_put", rc);
    double after = rss_bytes();
    release_all(pool, refs, n);
    destroy_pool(pool);
    free(refs);
    return (after - before) / (double)n;
}

#if PB_OLD
const pb_reclaim_lib_t pb_reclaim_pinpool_old = {
    .name = "pinpool-old",
#else
const pb_reclaim_lib_t pb_reclaim_pinpool = {
    .name = "pinpool",
#endif
    .lag = reclaim_lag,
    .final_unpin = final_unpin_cost,
    .bytes_per_entry = pinpool_bytes_per_entry,
};

/* ---- the driver (only in the library's copy) ----------------------------- */

#if !PB_OLD
static double impl_bytes_per_entry(const pb_impl_t *im, size_t n, void *shared)
{
    double before = rss_settled();
    void *t = im->create(n, shared);
    double after = rss_bytes();
    im->destroy(t);
    return (after - before) / (double)n;
}

static void bytes_per_entry(const size_t sizes[2], const pb_reclaim_lib_t *const *libs,
                            unsigned nlibs, const pb_impl_t *const *others, unsigned ncompare)
{
    unsigned char *shared = pb_malloc(4096);
    memset(shared, 1, 4096);
    printf("  (c) memory per entry: resident-set growth / entries (every entry points at"
           " one shared buffer):\n");
    printf("      %-12s", "impl");
    for (int k = 0; k < 2; k++) {
        char head[48];
        snprintf(head, sizeof head, "%zu entries", sizes[k]);
        printf(" %20s", head);
    }
    printf("\n");
    double marginal[2];
    for (unsigned l = 0; l < nlibs; l++) {
        double pp[2];
        for (int k = 0; k < 2; k++) {
            pb_progress("reclaim figures: bytes per entry, %s, %zu entries", libs[l]->name,
                        sizes[k]);
            pp[k] = libs[l]->bytes_per_entry(sizes[k], shared);
        }
        pb_progress_clear();
        /* What one more cold entry costs: the slope from the smaller table
         * to the larger, without the fixed part (directory, the unused tail
         * of the last 512 KiB table segment, thread records). */
        marginal[l] = (pp[1] * (double)sizes[1] - pp[0] * (double)sizes[0]) /
                      (double)(sizes[1] - sizes[0]);
        printf("      %-12s %18.1f B %18.1f B\n", libs[l]->name, pp[0], pp[1]);
    }
    for (unsigned o = 0; o < ncompare; o++) {
        double v[2];
        for (int k = 0; k < 2; k++) {
            pb_progress("reclaim figures: bytes per entry, %s, %zu entries", others[o]->name,
                        sizes[k]);
            v[k] = impl_bytes_per_entry(others[o], sizes[k], shared);
        }
        pb_progress_clear();
        printf("      %-12s %18.1f B %18.1f B\n", others[o]->name, v[0], v[1]);
    }
    for (unsigned l = 0; l < nlibs; l++)
        printf("      %s, each further entry (%zu to %zu entries): %.1f B  (target <= 64: %s)\n",
               libs[l]->name, sizes[0], sizes[1], marginal[l],
               marginal[l] <= 64.0 ? "met" : "NOT met");
    free(shared);
}

void pb_reclaim_figures(int quick, const pb_reclaim_lib_t *const *libs, unsigned nlibs,
                        const pb_impl_t *const *compare, unsigned ncompare)
{
    if (nlibs < 1 || nlibs > 2)
        pb_die("pb_reclaim_figures: %u libraries (1 or 2)", nlibs);
    /* With two libraries each figure runs for one, then the other, and
     * their lines are labelled with the library's name. */
    const char *label[2] = { NULL, NULL };
    if (nlibs > 1)
        for (unsigned l = 0; l < nlibs; l++)
            label[l] = libs[l]->name;
    double p50[2], p99[2], ord[2], fin[2];
    printf("\nreclaim figures (fresh pools, default options):\n");
    fflush(stdout);
    for (int same = 0; same <= 1; same++) {
        for (unsigned l = 0; l < nlibs; l++) {
            pb_progress("reclaim figures: %s%slag%s", label[l] != NULL ? label[l] : "",
                        label[l] != NULL ? ", " : "",
                        same ? ", sharing the reclaimer's CPU" : "");
            libs[l]->lag(quick ? 5000 : 50000, same, label[l], &p50[l], &p99[l]);
            pb_progress_clear();
            fflush(stdout);
        }
        if (nlibs > 1)
            printf("      %s / %s: p50 %.2f, p99 %.2f\n", libs[0]->name, libs[1]->name,
                   p50[0] / p50[1], p99[0] / p99[1]);
    }
    for (unsigned l = 0; l < nlibs; l++) {
        pb_progress("reclaim figures: %s%sfinal against ordinary unpin",
                    label[l] != NULL ? label[l] : "", label[l] != NULL ? ", " : "");
        libs[l]->final_unpin(quick ? 2000 : 20000, quick ? 3 : 11, label[l], &ord[l], &fin[l]);
        pb_progress_clear();
        fflush(stdout);
    }
    if (nlibs > 1)
        printf("      %s / %s: final %.2f, ordinary %.2f\n", libs[0]->name, libs[1]->name,
               fin[0] / fin[1], ord[0] / ord[1]);
    static const size_t full[2] = { 1000000, 10000000 }, small[2] = { 100000, 1000000 };
    bytes_per_entry(quick ? small : full, libs, nlibs, compare, ncompare);
    fflush(stdout);
}
#endif /* !PB_OLD */
