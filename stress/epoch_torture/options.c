/*
 * stress/epoch_torture/options.c -- epoch_torture's command line: usage,
 * the options and their checks, and the first lines of a run (the
 * parameters, and the command that replays it).
 */
#include "epoch_torture.h"

#include <stdlib.h>
#include <string.h>

unsigned g_threads = 4;
uint64_t g_ops = 20000;
double g_duration_s;
const char *g_topology;
uint64_t g_lag_ops = 10000;
unsigned g_timeout_s = 300;
unsigned g_quarantine;
int g_verbose;
int g_keep_going;
size_t g_backlog;
int g_expect_overload;

/* The options given (the others take their defaults, and stay out of the
 * replay line). */
static struct {
    int seed, ops, lag, quar, backlog;
} g_given;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: epoch_torture [--threads N] [--ops N | --duration SEC] [--seed S]\n"
            "                     [--topology STR] [--lag-ops N] [--quarantine N]\n"
            "                     [--timeout SEC] [--reclaim-backlog BYTES|none]\n"
            "                     [--expect-overload] [--verbose] [--keep-going]\n"
            "  --threads N      threads, at least 2 (default 4): thread 0 lags, odd threads\n"
            "                   are QSBR readers, the others run in the default mode\n"
            "  --ops N          operations per thread (default 20000)\n"
            "  --duration SEC   run until SEC seconds have passed instead (with --ops too:\n"
            "                   whichever comes first)\n"
            "  --seed S         seed (default: from the clock; printed)\n"
            "  --topology STR   hwloc synthetic string or XML path (default: this machine)\n"
            "  --lag-ops N      operations of the other threads during one lag (default 10000)\n"
            "  --quarantine N   freed blocks kept poisoned per node before free() (default\n"
            "                   %u; 0 in ASan builds, where ASan then reports the read)\n"
            "  --timeout SEC    fail if the run (or a wait) takes longer (default 300)\n"
            "  --reclaim-backlog BYTES  the pool's reclaim_backlog per node (K, M, G; 0: the\n"
            "                   pool's default, 64M; none: no bound)\n"
            "  --expect-overload  fail unless puts waited for the backlog, QSBR workers' puts\n"
            "                   were refused (PP_EDEADLK) and retried, the lagger's were\n"
            "                   refused inside a lag, and a lag ended with the others waiting\n"
            "  --verbose        one line per lag, per-operation counts, per-node figures\n"
            "  --keep-going     do not stop at the first failure (to see which checks catch\n"
            "                   a broken library; the failure counts are in the last line)\n",
            QUARANTINE_DEFAULT);
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
        } else if (!strcmp(a, "--duration")) {
            g_duration_s = parse_secs(a, ARG());
        } else if (!strcmp(a, "--seed")) {
            g_seed = parse_u64(a, ARG());
            g_given.seed = 1;
        } else if (!strcmp(a, "--topology")) {
            g_topology = ARG();
        } else if (!strcmp(a, "--lag-ops")) {
            g_lag_ops = parse_u64(a, ARG());
            g_given.lag = 1;
        } else if (!strcmp(a, "--quarantine")) {
            g_quarantine = (unsigned)parse_u64(a, ARG());
            g_given.quar = 1;
        } else if (!strcmp(a, "--timeout")) {
            g_timeout_s = (unsigned)parse_u64(a, ARG());
        } else if (!strcmp(a, "--reclaim-backlog")) {
            g_backlog = parse_backlog(a, ARG());
            g_given.backlog = 1;
        } else if (!strcmp(a, "--expect-overload")) {
            g_expect_overload = 1;
        } else if (!strcmp(a, "--verbose") || !strcmp(a, "-v")) {
            g_verbose = 1;
        } else if (!strcmp(a, "--keep-going")) {
            g_keep_going = 1;
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "epoch_torture: unknown argument '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
#undef ARG
    }
    return -1;
}

int parse_args(int argc, char **argv)
{
#ifdef ET_ASAN
    g_quarantine = 0;
#else
    g_quarantine = QUARANTINE_DEFAULT;
#endif
    int rc = parse_options(argc, argv);
    if (rc >= 0)
        return rc;
    if (g_duration_s > 0 && !g_given.ops)
        g_ops = NONE;
    if (g_threads < 2 || g_threads > 256 || g_lag_ops < 1 || g_quarantine > (1u << 20) ||
        g_timeout_s < 1 || g_ops < 1) {
        fprintf(stderr, "epoch_torture: --threads must be 2..256, --lag-ops and --ops at least "
                        "1, --quarantine at most 1048576, --timeout at least 1\n");
        return 2;
    }
    if (!g_given.seed)
        g_seed = seed_from_clock();
    return -1;
}

/* The parameters, and the command that replays the run. */
void print_params(void)
{
    char opsarg[64] = "", lagarg[48] = "", quararg[48] = "", blarg[64] = "", bl[32];
    if (g_ops != NONE)
        snprintf(opsarg, sizeof opsarg, " --ops %" PRIu64, g_ops);
    if (g_duration_s > 0)
        snprintf(opsarg + strlen(opsarg), sizeof opsarg - strlen(opsarg), " --duration %g",
                 g_duration_s);
    if (g_given.lag)
        snprintf(lagarg, sizeof lagarg, " --lag-ops %" PRIu64, g_lag_ops);
    if (g_given.quar)
        snprintf(quararg, sizeof quararg, " --quarantine %u", g_quarantine);
    if (g_given.backlog)
        snprintf(blarg, sizeof blarg, " --reclaim-backlog %s", backlog_str(g_backlog, bl, sizeof bl));
    char opsdesc[32];
    if (g_ops == NONE)
        snprintf(opsdesc, sizeof opsdesc, "unlimited");
    else
        snprintf(opsdesc, sizeof opsdesc, "%" PRIu64, g_ops);
    printf("epoch_torture: seed=%" PRIu64 " threads=%u ops=%s duration=%g topology=%s "
           "lag_ops=%" PRIu64 " quarantine=%u reclaim_backlog=%s%s\n", g_seed, g_threads, opsdesc,
           g_duration_s, g_topology ? g_topology : "(this machine)", g_lag_ops, g_quarantine,
           g_backlog ? backlog_str(g_backlog, bl, sizeof bl) : "default",
#ifdef ET_ASAN
           " (ASan build: freed blocks go straight to free())"
#else
           ""
#endif
    );
    printf("epoch_torture: replay: epoch_torture --threads %u%s --seed %" PRIu64 "%s%s%s%s%s%s%s%s\n",
           g_threads, opsarg, g_seed, g_topology ? " --topology '" : "",
           g_topology ? g_topology : "", g_topology ? "'" : "", lagarg, quararg, blarg,
           g_expect_overload ? " --expect-overload" : "", g_keep_going ? " --keep-going" : "");
    fflush(stdout);
}
