/*
 * stress/torture/options.c -- the torture's command line: usage, the
 * options and the values they imply (swap mode's sizes, budgets and
 * slots), and the first lines of a run (the parameters, and the command
 * that replays it).
 */
#include "torture.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testing/testhooks.h"   /* pp__debug_yield_available */

unsigned g_threads = 4;
uint64_t g_ops = 200000;
const char *g_topology;
int g_track, g_qsbr, g_verbose;
unsigned g_nslots = 1024;
unsigned g_timeout_s = 300;
double g_duration_s;
unsigned g_faults;
unsigned g_yield;
int g_hot = 1;
int g_held_cap = HELD_CAP;
unsigned g_nmbox = MAILBOXES;

int g_swap;
const char *g_swap_parent;
char g_rundir[4096];
size_t g_mem_limit;
uint64_t g_swap_limit;
int g_compress;
unsigned g_io_engine;                    /* PP_IO_ENGINE_*: --io-engine */
size_t g_size_min = 16, g_size_max = 4096;
unsigned g_flat_pct = 25;
double g_enomem_max = 1.0;
int64_t g_pin_budget, g_forever_budget;
size_t g_backlog;
int g_expect_overload;

/* The options given (the others take their defaults, and stay out of the
 * replay line). */
static struct {
    int seed, slots, size, mem, swap_limit, flat, enomem, timeout, ops, backlog;
} g_given;

static double g_mean_size;          /* swap mode: of the first 4096 entries */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: torture [--threads N] [--ops N] [--seed S] [--topology STR]\n"
            "                 [--track] [--qsbr] [--slots N] [--timeout SEC] [--verbose]\n"
            "                 [--duration SEC] [--faults N] [--yield N]\n"
            "                 [--swap [DIR]] [--mem-limit BYTES] [--swap-limit BYTES]\n"
            "                 [--compress] [--io-engine auto|uring|threads]\n"
            "                 [--entry-size MIN[-MAX]] [--flat PCT]\n"
            "                 [--enomem-max PCT] [--reclaim-backlog BYTES|none]\n"
            "                 [--expect-overload] [--reentrant PCT]\n"
            "  --threads N        worker threads (default 4)\n"
            "  --ops N            operations per thread (default 200000)\n"
            "  --seed S           seed (default: from the clock, printed)\n"
            "  --topology STR     hwloc synthetic string or XML path (default: this machine)\n"
            "  --track            create the pool with PP_TRACK_PINS\n"
            "  --qsbr             workers use QSBR mode (pp_quiescent between ops)\n"
            "  --slots N          shared slots (default 1024; with --swap: sized so that\n"
            "                     the live data is several times --mem-limit)\n"
            "  --timeout SEC      fail if the workers take longer (default 300; with\n"
            "                     --duration, 300 more than it)\n"
            "  --duration SEC     run for SEC seconds (--ops, if given, still caps it)\n"
            "  --faults N         inject faults: 1 in N of the pool's own allocations and\n"
            "                     (with --swap) of its device writes, reads and syncs fails;\n"
            "                     calls may then return PP_ENOMEM, PP_EIO or PP_ECORRUPT,\n"
            "                     and no data may be lost or come back wrong\n"
            "  --yield N          debug builds: yield 1 in N times at the race points of\n"
            "                     pin, unpin, release, eviction, load and reclaim\n"
            "  --no-hot           never make entries hot (default: a pin promotes on its\n"
            "                     first failed CAS, and stats promote and demote at random)\n"
            "  --verbose          progress and per-operation counts\n"
            "  --entry-size R     entry sizes: N, or MIN-MAX (suffixes K, M; default\n"
            "                     16-4096 uniform; with --swap 2K-64K log-uniform)\n"
            "  --reclaim-backlog BYTES  the pool's reclaim_backlog per node (K, M, G; 0:\n"
            "                     the pool's default, 64M; none: no bound); the run checks\n"
            "                     each node's backlog_peak and the peak resident set\n"
            "  --expect-overload  fail unless puts waited for the backlog, PP_PUT_NOWAIT puts\n"
            "                     got PP_EAGAIN and (with --qsbr) puts got PP_EDEADLK\n"
            "  --reentrant PCT    PCT percent of free calls call back into the pool: put a\n"
            "                     child entry on a random node, release it or stash it; pin,\n"
            "                     unpin and release a stashed one (reentrant.c)\n"
            "swap mode:\n"
            "  --swap [DIR]       swap to a fresh directory made under DIR (default\n"
            "                     $TMPDIR, else /tmp); removed at the end\n"
            "  --mem-limit BYTES  the pool's mem_limit (default 1M)\n"
            "  --swap-limit BYTES the pool's swap_limit (default 0: none)\n"
            "  --compress         PP_SWAP_COMPRESS\n"
            "  --io-engine E      the swap I/O engine: auto (default; io_uring where it\n"
            "                     works), uring (PP_IO_ENGINE_URING), threads\n"
            "  --flat PCT         percent of entries of type NULL (default 25)\n"
            "  --enomem-max PCT   PP_ENOMEM allowed in at most PCT percent of the calls\n"
            "                     that may return it (default 1; 5 with --qsbr)\n");
}

/* The options, one by one; -1, or the exit status (--help, a bad one). */
static int parse_options(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = NULL;
        char name[32];
        stress_opt_split(&a, &v, name, sizeof name);
#define ARG() STRESS_ARG()
        if (!strcmp(a, "--threads")) {
            g_threads = (unsigned)parse_u64(a, ARG());
        } else if (!strcmp(a, "--ops")) {
            g_ops = parse_u64(a, ARG());
            g_given.ops = 1;
        } else if (!strcmp(a, "--seed")) {
            g_seed = parse_u64(a, ARG());
            g_given.seed = 1;
        } else if (!strcmp(a, "--topology")) {
            g_topology = ARG();
        } else if (!strcmp(a, "--slots")) {
            g_nslots = (unsigned)parse_u64(a, ARG());
            g_given.slots = 1;
        } else if (!strcmp(a, "--timeout")) {
            g_timeout_s = (unsigned)parse_u64(a, ARG());
            g_given.timeout = 1;
        } else if (!strcmp(a, "--duration")) {
            g_duration_s = (double)parse_u64(a, ARG());
        } else if (!strcmp(a, "--faults")) {
            g_faults = (unsigned)parse_u64(a, ARG());
        } else if (!strcmp(a, "--yield")) {
            g_yield = (unsigned)parse_u64(a, ARG());
        } else if (!strcmp(a, "--no-hot")) {
            g_hot = 0;
        } else if (!strcmp(a, "--track")) {
            g_track = 1;
        } else if (!strcmp(a, "--qsbr")) {
            g_qsbr = 1;
        } else if (!strcmp(a, "--verbose") || !strcmp(a, "-v")) {
            g_verbose = 1;
        } else if (!strcmp(a, "--swap")) {
            /* DIR is optional: taken if the next argument is not an option */
            g_swap = 1;
            if (v)
                g_swap_parent = v;
            else if (i + 1 < argc && argv[i + 1][0] != '-')
                g_swap_parent = argv[++i];
        } else if (!strcmp(a, "--mem-limit")) {
            g_mem_limit = (size_t)parse_size(a, ARG());
            g_given.mem = 1;
        } else if (!strcmp(a, "--swap-limit")) {
            g_swap_limit = parse_size(a, ARG());
            g_given.swap_limit = 1;
        } else if (!strcmp(a, "--compress")) {
            g_compress = 1;
        } else if (!strcmp(a, "--io-engine")) {
            const char *e = ARG();
            if (!strcmp(e, "auto")) {
                g_io_engine = PP_IO_ENGINE_AUTO;
            } else if (!strcmp(e, "uring")) {
                g_io_engine = PP_IO_ENGINE_URING;
            } else if (!strcmp(e, "threads")) {
                g_io_engine = PP_IO_ENGINE_THREADS;
            } else {
                fprintf(stderr, "torture: --io-engine %s: not auto, uring or threads\n", e);
                return 2;
            }
        } else if (!strcmp(a, "--entry-size")) {
            const char *s = ARG(), *end;
            g_size_min = (size_t)parse_size_part(a, s, &end);
            g_size_max = g_size_min;
            if (*end == '-')
                g_size_max = (size_t)parse_size(a, end + 1);
            else if (*end) {
                fprintf(stderr, "torture: bad value for --entry-size: '%s'\n", s);
                return 2;
            }
            g_given.size = 1;
        } else if (!strcmp(a, "--flat")) {
            g_flat_pct = (unsigned)parse_u64(a, ARG());
            g_given.flat = 1;
        } else if (!strcmp(a, "--enomem-max")) {
            const char *s = ARG();
            char *end;
            g_enomem_max = strtod(s, &end);
            if (end == s || *end || !(g_enomem_max >= 0 && g_enomem_max <= 100)) {
                fprintf(stderr, "torture: bad value for --enomem-max: '%s'\n", s);
                return 2;
            }
            g_given.enomem = 1;
        } else if (!strcmp(a, "--reclaim-backlog")) {
            g_backlog = parse_backlog(a, ARG());
            g_given.backlog = 1;
        } else if (!strcmp(a, "--expect-overload")) {
            g_expect_overload = 1;
        } else if (!strcmp(a, "--reentrant")) {
            g_reentrant = (unsigned)parse_u64(a, ARG());
            if (g_reentrant > 100) {
                fprintf(stderr, "torture: --reentrant takes a percentage (0-100)\n");
                return 2;
            }
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "torture: unknown argument '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
#undef ARG
    }
    return -1;
}

/* The values the options imply, and their checks; -1, or the exit status. */
static int settle_options(void)
{
    if (g_duration_s > 0) {
        if (!g_given.ops)
            g_ops = 1000000000u;         /* bounded by time */
        if (!g_given.timeout)
            g_timeout_s = (unsigned)g_duration_s + 300;
    }
    if (g_yield && !pp__debug_yield_available()) {
        fprintf(stderr, "torture: --yield needs a debug build (PINPOOL_DEBUG=ON: the debug, "
                        "asan and tsan presets)\n");
        return 2;
    }
    if (!g_swap && (g_given.mem || g_given.swap_limit || g_compress || g_given.flat ||
                    g_given.enomem || g_io_engine != PP_IO_ENGINE_AUTO)) {
        fprintf(stderr, "torture: --mem-limit, --swap-limit, --compress, --io-engine, --flat and "
                        "--enomem-max need --swap\n");
        return 2;
    }
    if (g_swap) {
        if (g_swap_parent == NULL) {
            const char *tmp = getenv("TMPDIR");
            g_swap_parent = tmp && tmp[0] ? tmp : "/tmp";
        }
        if (!g_given.mem)
            g_mem_limit = (size_t)1 << 20;
        if (!g_given.size) {
            g_size_min = 2048;
            g_size_max = 65536;
        }
    }
    if (g_size_min < 16 || g_size_max < g_size_min || g_size_max > ((size_t)1 << 30)) {
        fprintf(stderr, "torture: --entry-size must be 16 bytes .. 1 GiB, MIN <= MAX\n");
        return 2;
    }
    if (g_swap && g_mem_limit < 8 * g_size_max) {
        fprintf(stderr, "torture: --mem-limit must be at least 8 times the largest entry "
                        "(%zu)\n", g_size_max);
        return 2;
    }
    if (g_flat_pct > 100) {
        fprintf(stderr, "torture: --flat must be 0..100\n");
        return 2;
    }
    if (g_swap && g_qsbr && !g_given.enomem)
        g_enomem_max = 5.0;
    if (g_swap) {
        g_pin_budget = (int64_t)(g_mem_limit / 2);
        g_forever_budget = (int64_t)(g_mem_limit / 8);
        /* Held pins (and pins waiting in mailboxes) stay pinned for a
         * while: few of them, so that most pins fit in the budget. */
        g_held_cap = 2;
        g_nmbox = g_threads / 2 < 2 ? 2 : g_threads / 2;
    }
    if (!g_given.seed)
        g_seed = seed_from_clock();
    if (g_swap) {
        for (uint64_t k = 0; k < 4096; k++)
            g_mean_size += (double)entry_size(k);
        g_mean_size /= 4096;
        if (!g_given.slots) {
            /* Live data about 5x the limit: the slots (most are full) plus
             * the threads' private owners (about 16 each). */
            double want = 5.0 * (double)g_mem_limit / g_mean_size - 16.0 * g_threads;
            g_nslots = want < 16 ? 16 : want > (1 << 20) ? (1u << 20) : (unsigned)want;
        }
    }
    if (g_threads < 1 || g_threads > 1024 || g_nslots < 1 || g_nslots > (1u << 24)) {
        fprintf(stderr, "torture: --threads must be 1..1024 and --slots 1..16777216\n");
        return 2;
    }
    return -1;
}

int parse_args(int argc, char **argv)
{
    int rc = parse_options(argc, argv);
    return rc >= 0 ? rc : settle_options();
}

/* The parameters, and the command that replays the run. */
void print_params(void)
{
    const char *env = getenv("PINPOOL_TRACK_PINS");
    int track_env = env && env[0] == '1';
    char sizes[64];
    snprintf(sizes, sizeof sizes, "%zu-%zu", g_size_min, g_size_max);
    char swapargs[4300] = "";
    if (g_swap) {
        char lim[64] = "", flat[32] = "", enm[48] = "";
        if (g_swap_limit)
            snprintf(lim, sizeof lim, " --swap-limit %" PRIu64, g_swap_limit);
        if (g_given.flat)
            snprintf(flat, sizeof flat, " --flat %u", g_flat_pct);
        if (g_given.enomem)
            snprintf(enm, sizeof enm, " --enomem-max %g", g_enomem_max);
        static const char *const engines[] = {"", " --io-engine uring", " --io-engine threads"};
        snprintf(swapargs, sizeof swapargs, " --swap '%s' --mem-limit %zu%s%s%s%s%s",
                 g_swap_parent, g_mem_limit, lim, g_compress ? " --compress" : "",
                 engines[g_io_engine], flat, enm);
    }
    printf("torture: seed=%" PRIu64 " threads=%u ops=%" PRIu64 " slots=%u topology=%s%s%s%s"
           " entry_size=%s\n",
           g_seed, g_threads, g_ops, g_nslots, g_topology ? g_topology : "(this machine)",
           g_track ? " track" : "", track_env && !g_track ? " track(env)" : "",
           g_qsbr ? " qsbr" : "", sizes);
    if (g_swap)
        printf("torture: swap: dir=%s mem_limit=%zu swap_limit=%" PRIu64 " compress=%d "
               "flat=%u%% mean_entry=%.0f pin_budget=%" PRId64 " forever_budget=%" PRId64
               " enomem_max=%g%%\n",
               g_swap_parent, g_mem_limit, g_swap_limit, g_compress, g_flat_pct, g_mean_size,
               g_pin_budget, g_forever_budget, g_enomem_max);
    char slots[32] = "";
    if (g_given.slots)
        snprintf(slots, sizeof slots, " --slots %u", g_nslots);
    char extra[160] = "", opsarg[48] = "", bl[24];
    size_t xl = 0;
    if (g_duration_s > 0)
        xl += (size_t)snprintf(extra + xl, sizeof extra - xl, " --duration %.0f", g_duration_s);
    if (g_faults)
        xl += (size_t)snprintf(extra + xl, sizeof extra - xl, " --faults %u", g_faults);
    if (g_yield)
        xl += (size_t)snprintf(extra + xl, sizeof extra - xl, " --yield %u", g_yield);
    if (g_given.backlog)
        xl += (size_t)snprintf(extra + xl, sizeof extra - xl, " --reclaim-backlog %s",
                               backlog_str(g_backlog, bl, sizeof bl));
    if (!g_hot)
        xl += (size_t)snprintf(extra + xl, sizeof extra - xl, " --no-hot");
    if (g_expect_overload)
        xl += (size_t)snprintf(extra + xl, sizeof extra - xl, " --expect-overload");
    if (g_reentrant)
        xl += (size_t)snprintf(extra + xl, sizeof extra - xl, " --reentrant %u", g_reentrant);
    if (g_duration_s <= 0 || g_given.ops)
        snprintf(opsarg, sizeof opsarg, " --ops %" PRIu64, g_ops);
    printf("torture: replay: torture --threads %u%s --seed %" PRIu64
           "%s%s%s%s%s%s%s%s%s%s\n",
           g_threads, opsarg, g_seed, g_topology ? " --topology '" : "",
           g_topology ? g_topology : "", g_topology ? "'" : "", g_track ? " --track" : "",
           g_qsbr ? " --qsbr" : "", g_given.size ? " --entry-size " : "",
           g_given.size ? sizes : "",
           slots, swapargs, extra);
    fflush(stdout);
}
