/*
 * pinpool-basic -- a small tour of pinpool.
 *
 *   pinpool-basic [--topology STR] [--tiles N] [--threads N] [--tasks N]
 *
 * Puts N tiles (arrays of doubles) into a pool, spread over its NUMA node
 * domains; worker threads run "tasks" that pin a few tiles with
 * pp_pin_many, sum them, unpin them and call pp_quiescent between tasks.
 * Then the owners are released, the pool is drained, and its statistics
 * are printed per node.  Exit status 0 only if every check passed.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pinpool.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TILE_DOUBLES 512                  /* 4 KiB per tile */
#define TILES_PER_TASK 3

static atomic_ulong g_frees;
static atomic_int g_errors;
static int g_ntiles = 64, g_nthreads = 4, g_ntasks = 200;
static pp_pool_t *g_pool;
static pp_ref_t *g_refs;
static double *g_expect;                  /* expected sum of each tile */
static atomic_ulong g_pins_done;

static void tile_free(void *data, size_t size, void *ctx)
{
    (void)ctx;
    atomic_fetch_add(&g_frees, 1);
    memset(data, 0, size);
    free(data);
}

static const pp_type_t tile_type = { "tile", tile_free, NULL, NULL, NULL, 0u };

static double tile_value(int tile, int i) { return (double)(tile + 1) * 0.5 + (double)i * 0.25; }

static void error(const char *fmt, const char *what, int a, int rc)
{
    fprintf(stderr, "pinpool-basic: error: ");
    fprintf(stderr, fmt, what, a);
    if (rc)
        fprintf(stderr, ": %s (%s)", pp_err_name(rc), pp_strerror(rc));
    fprintf(stderr, "\n");
    atomic_fetch_add(&g_errors, 1);
}

typedef struct worker { int id; unsigned long tasks, pins; double total; } worker_t;

static void *worker_main(void *arg)
{
    worker_t *w = arg;
    uint64_t x = 0x9E3779B97F4A7C15ull * (uint64_t)(w->id + 1);
    for (int t = 0; t < g_ntasks; t++) {
        pp_ref_t refs[TILES_PER_TASK];
        void *data[TILES_PER_TASK];
        int idx[TILES_PER_TASK];
        for (int j = 0; j < TILES_PER_TASK; j++) {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;     /* xorshift64 */
            idx[j] = (int)(x % (uint64_t)g_ntiles);
            refs[j] = g_refs[idx[j]];
        }
        int rc = pp_pin_many(g_pool, refs, TILES_PER_TASK, 0, data);
        if (rc != 0) {
            error("%s of task %d", "pp_pin_many", t, rc);
            break;
        }
        for (int j = 0; j < TILES_PER_TASK; j++) {
            const double *a = data[j];
            double s = 0;
            for (int i = 0; i < TILE_DOUBLES; i++)
                s += a[i];
            if (s != g_expect[idx[j]])
                error("%s: tile %d has the wrong sum", "checksum", idx[j], 0);
            w->total += s;
        }
        rc = pp_unpin_many(g_pool, refs, TILES_PER_TASK, NULL);
        if (rc != 0)
            error("%s of task %d", "pp_unpin_many", t, rc);
        w->tasks++;
        w->pins += TILES_PER_TASK;
        pp_quiescent(g_pool);               /* between tasks */
    }
    atomic_fetch_add(&g_pins_done, w->pins);
    return NULL;
}

static int parse_int(const char *opt, const char *s, int lo, int hi)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "pinpool-basic: %s must be %d..%d\n", opt, lo, hi);
        exit(2);
    }
    return (int)v;
}

static void us(char *buf, size_t n, uint64_t ns)
{
    snprintf(buf, n, "%.1f", (double)ns / 1000.0);
}

static void print_row(const char *name, const pp_node_stats_t *s, int show_tid)
{
    char p50[32], p99[32], mx[32], tid[32];
    us(p50, sizeof p50, s->lag_p50_ns);
    us(p99, sizeof p99, s->lag_p99_ns);
    us(mx, sizeof mx, s->lag_max_ns);
    if (show_tid)
        snprintf(tid, sizeof tid, "%d%s", s->reclaimer_tid, s->cpu_bound ? " (bound)" : "");
    else
        snprintf(tid, sizeof tid, "-");
    printf("  %-6s %8" PRIu64 " %10" PRIu64 " %6" PRIu64 " %7" PRIu64 " %7" PRIu64 " %6" PRIu64
           " %9s %9s %9s  %s\n", name, s->entries, s->resident_bytes, s->puts, s->pins,
           s->unpins, s->frees, p50, p99, mx, tid);
}

/* The options; 0 to go on, or the exit status (--help, a bad one). */
static int parse_args(int argc, char **argv, const char **topology)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            printf("usage: pinpool-basic [--topology STR] [--tiles N] [--threads N] [--tasks N]\n"
                   "  --topology STR  hwloc synthetic string (e.g. \"pack:2 numa:2 core:2 pu:1\")\n"
                   "                  or XML path; default: this machine\n");
            return 0;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "pinpool-basic: unknown or incomplete argument '%s'\n", a);
            return 2;
        }
        if (!strcmp(a, "--topology"))
            *topology = argv[++i];
        else if (!strcmp(a, "--tiles"))
            g_ntiles = parse_int(a, argv[++i], 1, 1 << 20);
        else if (!strcmp(a, "--threads"))
            g_nthreads = parse_int(a, argv[++i], 1, 256);
        else if (!strcmp(a, "--tasks"))
            g_ntasks = parse_int(a, argv[++i], 0, 1 << 24);
        else {
            fprintf(stderr, "pinpool-basic: unknown argument '%s'\n", a);
            return 2;
        }
    }
    return -1;
}

/* Creates the pool and says what it is made of: its node domains, and
 * whether their reclaimers are bound to the node's CPUs.  0, or the exit
 * status. */
static int create_pool(const char *topology, pp_stats_t *st)
{
    pp_options_t opt = PP_OPTIONS_INIT;
    opt.topology = topology;
    int rc = pp_pool_create(&opt, &g_pool);
    if (rc != 0) {
        fprintf(stderr, "pinpool-basic: pp_pool_create(topology %s): %s (%s)\n",
                topology ? topology : "this machine", pp_err_name(rc), pp_strerror(rc));
        return 1;
    }
    rc = pp_pool_stats(g_pool, st);
    if (rc != 0) {
        fprintf(stderr, "pinpool-basic: pp_pool_stats: %s\n", pp_err_name(rc));
        return 1;
    }
    unsigned nodes = st->nodes;
    int bound = 0;
    for (unsigned n = 0; n < nodes; n++) {
        pp_node_stats_t ns = PP_NODE_STATS_INIT;
        if (pp_node_stats(g_pool, n, &ns) == 0)
            bound += ns.cpu_bound != 0;
    }
    printf("pinpool %d.%d.%d basic demo\n", PINPOOL_VERSION_MAJOR, PINPOOL_VERSION_MINOR,
           PINPOOL_VERSION_PATCH);
    printf("pool: %u node domain(s), topology %s (%s); reclaimers bound to their node's CPUs: %d of %u\n",
           nodes, topology ? topology : "of this machine",
           st->topology_is_this_system ? "this system" : "synthetic or XML: no binding", bound,
           nodes);
    return 0;
}

/* Puts the tiles, round-robin over the nodes.  0, or the exit status. */
static int put_tiles(unsigned nodes)
{
    g_refs = calloc((size_t)g_ntiles, sizeof *g_refs);
    g_expect = calloc((size_t)g_ntiles, sizeof *g_expect);
    if (!g_refs || !g_expect)
        return 2;
    for (int t = 0; t < g_ntiles; t++) {
        double *a = malloc(TILE_DOUBLES * sizeof *a);
        if (!a)
            return 2;
        double s = 0;
        for (int i = 0; i < TILE_DOUBLES; i++) {
            a[i] = tile_value(t, i);
            s += a[i];
        }
        g_expect[t] = s;
        int rc = pp_put(g_pool, a, TILE_DOUBLES * sizeof *a, &tile_type,
                        PP_ON_NODE((unsigned)t % nodes), &g_refs[t]);
        if (rc != 0) {
            error("%s of tile %d", "pp_put", t, rc);
            free(a);
            return 1;
        }
    }
    printf("put %d tiles of %zu bytes (type \"%s\") over %u node(s)\n", g_ntiles,
           TILE_DOUBLES * sizeof(double), tile_type.name, nodes);
    return 0;
}

/* Workers: pin a few tiles per task, sum them, unpin.  The tasks run, in
 * *tasks; 0, or the exit status. */
static int run_workers(worker_t *w, pthread_t *th, unsigned long *tasks)
{
    for (int i = 0; i < g_nthreads; i++) {
        w[i].id = i;
        if (pthread_create(&th[i], NULL, worker_main, &w[i]) != 0) {
            fprintf(stderr, "pinpool-basic: pthread_create failed\n");
            return 2;
        }
    }
    *tasks = 0;
    for (int i = 0; i < g_nthreads; i++) {
        pthread_join(th[i], NULL);
        printf("worker %d: %lu tasks, %lu pins, sum of sums %.1f\n", i, w[i].tasks, w[i].pins,
               w[i].total);
        *tasks += w[i].tasks;
    }
    return 0;
}

/* Mid-run view of one tile, then every owner released (each tile is
 * queued for its node's reclaimer) and the pool drained: tile 0 is gone. */
static void release_tiles(void)
{
    pp_entry_info_t in;
    int rc = pp_stat(g_pool, g_refs[0], &in);
    if (rc != 0)
        error("%s of tile %d", "pp_stat", 0, rc);
    else
        printf("tile 0: %zu bytes, node %u, %u owner(s), %u pin(s), state %#x\n", in.size, in.node,
               in.owners, in.pins, in.state);

    for (int t = 0; t < g_ntiles; t++) {
        rc = pp_release(g_pool, g_refs[t]);
        if (rc != 0)
            error("%s of tile %d", "pp_release", t, rc);
    }
    rc = pp_pool_drain(g_pool, 10000);
    if (rc != 0)
        error("%s%d", "pp_pool_drain: timed out after 10000 ms", 0, rc);
    rc = pp_stat(g_pool, g_refs[0], &in);
    printf("after release and drain, pp_stat(tile 0) = %s\n", pp_err_name(rc));
    if (rc != PP_ESTALE && !(rc == 0 && (in.state & PP_STATE_DEAD)))
        error("%s%d: expected PP_ESTALE", "pp_stat after drain", 0, rc);
}

/* The pool's statistics, per node (pp_node_stats) and in total. */
static void print_stats(const pp_stats_t *st)
{
    printf("\n  %-6s %8s %10s %6s %7s %7s %6s %9s %9s %9s  %s\n", "node", "entries",
           "resident", "puts", "pins", "unpins", "frees", "lag p50", "lag p99", "lag max",
           "reclaimer tid");
    printf("  %-6s %8s %10s %6s %7s %7s %6s %9s %9s %9s\n", "", "", "(bytes)", "", "", "", "",
           "(us)", "(us)", "(us)");
    for (unsigned n = 0; n < st->nodes; n++) {
        char name[16];
        snprintf(name, sizeof name, "%u", n);
        pp_node_stats_t ns = PP_NODE_STATS_INIT;
        if (pp_node_stats(g_pool, n, &ns) == 0)
            print_row(name, &ns, 1);
    }
    print_row("total", &st->total, 0);
    printf("\n");
}

/* Checks: every task ran, every tile was put and freed exactly once, every
 * pin unpinned, nothing is left.  1 if one failed. */
static int check_counts(const pp_stats_t *st, unsigned long tasks, unsigned long pins)
{
    unsigned long frees = atomic_load(&g_frees);
    struct { const char *what; uint64_t got, want; } checks[] = {
        { "tasks run", tasks, (uint64_t)g_nthreads * (uint64_t)g_ntasks },
        { "puts", st->total.puts, (uint64_t)g_ntiles },
        { "frees (stats)", st->total.frees, (uint64_t)g_ntiles },
        { "frees (free function calls)", frees, (uint64_t)g_ntiles },
        { "pins", st->total.pins, pins },
        { "unpins", st->total.unpins, pins },
        { "releases", st->total.releases, (uint64_t)g_ntiles },
        { "entries left", st->total.entries, 0 },
        { "resident bytes left", st->total.resident_bytes, 0 },
        { "reclaim queue depth", st->total.reclaim_queue_depth, 0 },
    };
    int failed = atomic_load(&g_errors) != 0;
    for (size_t i = 0; i < sizeof checks / sizeof checks[0]; i++) {
        if (checks[i].got != checks[i].want) {
            printf("check failed: %s = %" PRIu64 ", expected %" PRIu64 "\n", checks[i].what,
                   checks[i].got, checks[i].want);
            failed = 1;
        }
    }
    return failed;
}

int main(int argc, char **argv)
{
    const char *topology = NULL;
    int rc = parse_args(argc, argv, &topology);
    if (rc >= 0)
        return rc;

    pp_stats_t st = PP_STATS_INIT;     /* the size and version of what we read */
    if ((rc = create_pool(topology, &st)) != 0)
        return rc;
    if ((rc = put_tiles(st.nodes)) != 0)
        return rc;

    worker_t *w = calloc((size_t)g_nthreads, sizeof *w);
    pthread_t *th = calloc((size_t)g_nthreads, sizeof *th);
    if (!w || !th)
        return 2;
    unsigned long tasks;
    if ((rc = run_workers(w, th, &tasks)) != 0)
        return rc;

    release_tiles();
    rc = pp_pool_stats(g_pool, &st);
    if (rc != 0) {
        error("%s%d", "pp_pool_stats", 0, rc);
        return 1;
    }
    print_stats(&st);

    unsigned long pins = atomic_load(&g_pins_done);
    int failed = check_counts(&st, tasks, pins);
    rc = pp_pool_destroy(g_pool);
    if (rc != 0) {
        printf("check failed: pp_pool_destroy: %s\n", pp_err_name(rc));
        failed = 1;
    }
    printf("%s: %lu tasks on %d threads, %lu pins, %d tiles put and freed exactly once\n",
           failed ? "FAIL" : "OK", tasks, g_nthreads, pins, g_ntiles);
    free(w);
    free(th);
    free(g_refs);
    free(g_expect);
    return failed ? 1 : 0;
}
