/*
 * pinpool-demo -- out-of-core tiled Cholesky factorisation on OpenMP tasks.
 *
 *   pinpool-demo [-n N] [-b B] [-m SIZE] [-t THREADS] [--no-pool | --no-limit]
 *                [--compare [--rounds R]] [--plot FILE.png] [--swap-dir DIR]
 *                [--require-swap] [--seed S] [--io-engine E] [--io-depth D]
 *                [--quiet]
 *
 * Factorises a symmetric positive definite matrix A = L L^T, tile by tile,
 * as OpenMP tasks whose tiles live in a pinpool pool.  By default the pool
 * may hold only a quarter of the matrix in memory: the rest is written to
 * a private swap directory under $TMPDIR (else /tmp) and loaded back when a
 * task pins it.  Then ||A - L L^T|| / ||A|| is computed tile by tile
 * through the pool.
 *
 * Exit status: 0 when every check passed (residual below 1e-10; with a
 * limit, the pool's peak resident bytes within the limit plus one tile;
 * with --require-swap, at least the whole matrix written to swap); 1 when
 * a check failed; 2 for a usage error; 3 when a run could not complete.
 *
 * main.c: options, the progress line, the plot, the summary, --compare.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "demo.h"
#include "tiles.h"

#include <cblas.h>
#include <omp.h>

#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <inttypes.h>
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define RESIDUAL_MAX 1e-10
#define MIB (1024.0 * 1024.0)
#define MB 1e6

enum { EXIT_CHECK = 1, EXIT_USAGE = 2, EXIT_RUN = 3 };

static const char *const phase_names[] = {
    "idle", "generate", "factorize", "check", "release"
};

/* ---------------------------------------------------------------------------
 * Options
 * ------------------------------------------------------------------------- */

typedef struct options {
    demo_config_t cfg;
    int limit_given, no_limit, compare, rounds, quiet, require_swap, lookahead_given;
    int return_memory, result_line, io_given;
    const char *plot;
} options_t;

extern char **environ;

/* The script that draws a trace (tools/trace_plot.py of the source tree). */
#ifndef DEMO_TRACE_PLOT
#define DEMO_TRACE_PLOT "tools/trace_plot.py"
#endif

static void usage(FILE *f)
{
    fprintf(f,
        "usage: pinpool-demo [options]\n"
        "  -n, --size N          matrix order (default 8192; a multiple of the tile)\n"
        "  -b, --tile B          tile order (default 512)\n"
        "  -m, --mem-limit SIZE  bytes the pool may hold in memory, with a K, M or G\n"
        "                        suffix (default: a quarter of the matrix)\n"
        "  -t, --threads N       OpenMP threads (default: OMP_NUM_THREADS, else the CPUs)\n"
        "      --no-pool         raw pointers instead of the pool (same task graph)\n"
        "      --no-limit        the pool without a memory limit (nothing swapped)\n"
        "      --compare         raw pointers, the pool without and with the limit, in\n"
        "                        one run, with their times and ratios\n"
        "      --rounds R        with --compare: R rounds, medians reported (default 1)\n"
        "      --plot FILE.png   draw resident and swapped bytes over time (gnuplot)\n"
        "      --trace FILE      write the pool's timeline trace to FILE (Chrome trace\n"
        "                        JSON: open it in ui.perfetto.dev) and draw it into\n"
        "                        FILE.png (tools/trace_plot.py, gnuplot)\n"
        "      --swap-dir DIR    where the private swap directory is made\n"
        "                        (default: $TMPDIR, else /tmp)\n"
        "      --require-swap    fail unless the whole matrix was written to swap\n"
        "      --seed S          seed of the matrix (default 1)\n"
        "      --lookahead N     tasks ahead (in creation order) whose tiles a task\n"
        "                        prefetches (default: twice the number of threads\n"
        "                        with libgomp, 0 with libomp)\n"
        "      --nowait-tries N  PP_PIN_NOWAIT attempts before a pin waits (default 2)\n"
        "      --topology STR    the pool's topology: an hwloc synthetic string such as\n"
        "                        \"pack:2 numa:2 core:2 pu:1\" (tiles spread over its\n"
        "                        nodes) or an XML file; default: this machine's\n"
        "      --return-memory   give freed tiles back to the kernel at once (glibc\n"
        "                        keeps them for reuse otherwise): the process's\n"
        "                        resident set follows the pool's, tiles cost page\n"
        "                        faults\n"
        "      --result          after each run, one line of key=value figures for\n"
        "                        scripts (examples/demo/compare reads it)\n"
        "      --order ORDER     the factorisation's task order: left (default: by\n"
        "                        panels of columns, made for out-of-core work: each\n"
        "                        tile is written back about once) or right (step by\n"
        "                        step, the trailing matrix swept each step)\n"
        "      --panel TILES     left order: tiles a panel may hold (default: half\n"
        "                        the memory limit)\n"
        "      --no-hints        no pp_advise: no PP_ADVISE_WONTNEED after a tile's\n"
        "                        last use in a group, pp_prefetch for the lookahead\n"
        "      --direct          swap with PP_SWAP_DIRECT (O_DIRECT: swapped tiles\n"
        "                        do not also sit in the page cache)\n"
        "      --io-engine E     how the swap threads move bytes: uring (io_uring, or\n"
        "                        the pool is refused), threads (blocking reads and\n"
        "                        writes) or auto (default: io_uring where it works)\n"
        "      --io-depth D      swap I/O requests in flight per node (io_uring\n"
        "                        engine; default 0: the library's)\n"
        "      --check HOW       tiles (default): ||A - L*L^T|| / ||A|| tile by tile,\n"
        "                        O(n^3); vector: ||A*x - L*L^T*x|| / ||A*x||, O(n^2),\n"
        "                        each tile read twice (for matrices far larger than\n"
        "                        the limit)\n"
        "  -q, --quiet           no progress line\n"
        "  -h, --help\n");
}

static int finish_options(options_t *o);

/* --io-engine's argument: 0, or -1 if it is none of the three. */
static int parse_engine(const char *arg, unsigned *engine)
{
    static const char *const names[] = {"auto", "uring", "threads"};
    static const unsigned values[] = {PP_IO_ENGINE_AUTO, PP_IO_ENGINE_URING,
                                      PP_IO_ENGINE_THREADS};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (strcmp(arg, names[i]) == 0) {
            *engine = values[i];
            return 0;
        }
    }
    return -1;
}

static int parse_options(int argc, char **argv, options_t *o)
{
    enum { O_NO_POOL = 256, O_NO_LIMIT, O_COMPARE, O_ROUNDS, O_PLOT, O_SWAP_DIR,
           O_REQUIRE_SWAP, O_SEED, O_LOOKAHEAD, O_NOWAIT_TRIES, O_TOPOLOGY,
           O_RETURN_MEMORY, O_RESULT, O_ORDER, O_PANEL, O_NO_HINTS, O_DIRECT, O_CHECK,
           O_IO_ENGINE, O_IO_DEPTH, O_TRACE };
    static const struct option longopts[] = {
        { "size", required_argument, NULL, 'n' },
        { "tile", required_argument, NULL, 'b' },
        { "mem-limit", required_argument, NULL, 'm' },
        { "threads", required_argument, NULL, 't' },
        { "no-pool", no_argument, NULL, O_NO_POOL },
        { "no-limit", no_argument, NULL, O_NO_LIMIT },
        { "compare", no_argument, NULL, O_COMPARE },
        { "rounds", required_argument, NULL, O_ROUNDS },
        { "plot", required_argument, NULL, O_PLOT },
        { "trace", required_argument, NULL, O_TRACE },
        { "swap-dir", required_argument, NULL, O_SWAP_DIR },
        { "require-swap", no_argument, NULL, O_REQUIRE_SWAP },
        { "seed", required_argument, NULL, O_SEED },
        { "lookahead", required_argument, NULL, O_LOOKAHEAD },
        { "nowait-tries", required_argument, NULL, O_NOWAIT_TRIES },
        { "topology", required_argument, NULL, O_TOPOLOGY },
        { "return-memory", no_argument, NULL, O_RETURN_MEMORY },
        { "result", no_argument, NULL, O_RESULT },
        { "order", required_argument, NULL, O_ORDER },
        { "panel", required_argument, NULL, O_PANEL },
        { "no-hints", no_argument, NULL, O_NO_HINTS },
        { "direct", no_argument, NULL, O_DIRECT },
        { "check", required_argument, NULL, O_CHECK },
        { "io-engine", required_argument, NULL, O_IO_ENGINE },
        { "io-depth", required_argument, NULL, O_IO_DEPTH },
        { "quiet", no_argument, NULL, 'q' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    demo_config_t *c = &o->cfg;
    c->n = 8192;
    c->b = 512;
    c->threads = omp_get_max_threads();
    c->order = DEMO_ORDER_LEFT;
    c->hints = 1;
    c->use_pool = 1;
    c->nowait_tries = 2;
    c->seed = 1;
    o->rounds = 1;
    const char *tmp = getenv("TMPDIR");
    c->swap_dir = tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp";
    int opt, seed, depth, li = -1;
    while ((opt = getopt_long(argc, argv, "n:b:m:t:qh", longopts, &li)) != -1) {
        switch (opt) {
        case 'n':
            if (demo_parse_int(optarg, 1, 1 << 20, &c->n) != 0)
                goto bad;
            break;
        case 'b':
            if (demo_parse_int(optarg, 1, 1 << 14, &c->b) != 0)
                goto bad;
            break;
        case 'm':
            if (demo_parse_size(optarg, &c->mem_limit) != 0 || c->mem_limit == 0)
                goto bad;
            o->limit_given = 1;
            break;
        case 't':
            if (demo_parse_int(optarg, 1, 1024, &c->threads) != 0)
                goto bad;
            break;
        case O_NO_POOL: c->use_pool = 0; break;
        case O_NO_LIMIT: o->no_limit = 1; break;
        case O_COMPARE: o->compare = 1; break;
        case O_ROUNDS:
            if (demo_parse_int(optarg, 1, 99, &o->rounds) != 0)
                goto bad;
            break;
        case O_PLOT: o->plot = optarg; break;
        case O_TRACE: o->cfg.trace = optarg; break;
        case O_SWAP_DIR: c->swap_dir = optarg; break;
        case O_REQUIRE_SWAP: o->require_swap = 1; break;
        case O_SEED:
            if (demo_parse_int(optarg, 0, 0x7fffffff, &seed) != 0)
                goto bad;
            c->seed = (uint64_t)seed;
            break;
        case O_LOOKAHEAD:
            if (demo_parse_int(optarg, 0, 1 << 20, &c->lookahead) != 0)
                goto bad;
            o->lookahead_given = 1;
            break;
        case O_NOWAIT_TRIES:
            if (demo_parse_int(optarg, 0, 1 << 20, &c->nowait_tries) != 0)
                goto bad;
            break;
        case O_TOPOLOGY: c->topology = optarg; break;
        case O_RETURN_MEMORY: o->return_memory = 1; break;
        case O_RESULT: o->result_line = 1; break;
        case O_ORDER:
            if (strcmp(optarg, "left") == 0)
                c->order = DEMO_ORDER_LEFT;
            else if (strcmp(optarg, "right") == 0)
                c->order = DEMO_ORDER_RIGHT;
            else
                goto bad;
            break;
        case O_PANEL:
            if (demo_parse_int(optarg, 1, 1 << 30, &c->panel_tiles) != 0)
                goto bad;
            break;
        case O_NO_HINTS: c->hints = 0; break;
        case O_DIRECT: c->direct = 1; break;
        case O_CHECK:
            if (strcmp(optarg, "vector") == 0)
                c->check_vector = 1;
            else if (strcmp(optarg, "tiles") == 0)
                c->check_vector = 0;
            else
                goto bad;
            break;
        case O_IO_ENGINE:
            if (parse_engine(optarg, &c->io_engine) != 0)
                goto bad;
            o->io_given = 1;
            break;
        case O_IO_DEPTH:
            if (demo_parse_int(optarg, 0, (int)PP_IO_DEPTH_MAX, &depth) != 0)
                goto bad;
            c->io_depth = (unsigned)depth;
            o->io_given = 1;
            break;
        case 'q': o->quiet = 1; break;
        case 'h': usage(stdout); exit(0);
        default: usage(stderr); return -1;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "pinpool-demo: unexpected argument '%s'\n", argv[optind]);
        return -1;
    }
    return finish_options(o);
bad:
    if (opt < 256)
        fprintf(stderr, "pinpool-demo: bad value '%s' for -%c\n", optarg, opt);
    else
        fprintf(stderr, "pinpool-demo: bad value '%s' for --%s\n", optarg,
                li >= 0 ? longopts[li].name : "?");
    usage(stderr);
    return -1;
}

/* The checks between options, and the defaults that depend on others. */
static int finish_options(options_t *o)
{
    demo_config_t *c = &o->cfg;
    if (c->n % c->b != 0) {
        fprintf(stderr, "pinpool-demo: the matrix order (%d) must be a multiple of the "
                "tile order (%d)\n", c->n, c->b);
        return -1;
    }
    if (!c->use_pool && (o->limit_given || o->no_limit || o->compare || c->topology)) {
        fprintf(stderr, "pinpool-demo: --no-pool takes no --mem-limit, --no-limit, --compare "
                "or --topology\n");
        return -1;
    }
    if (c->trace != NULL && (!c->use_pool || o->compare)) {
        fprintf(stderr, "pinpool-demo: --trace traces one pool: not with --no-pool or "
                "--compare\n");
        return -1;
    }
    if (!c->use_pool && o->plot != NULL) {
        fprintf(stderr, "pinpool-demo: --plot draws the pool's bytes: not with --no-pool\n");
        return -1;
    }
    if (o->no_limit && (o->limit_given || o->compare)) {
        fprintf(stderr, "pinpool-demo: --no-limit takes no --mem-limit or --compare\n");
        return -1;
    }
    if (o->require_swap && (o->no_limit || !c->use_pool)) {
        fprintf(stderr, "pinpool-demo: --require-swap needs the pool with a limit\n");
        return -1;
    }
    int T = c->n / c->b;
    uint64_t tile = (uint64_t)c->b * c->b * sizeof(double);
    uint64_t matrix = (uint64_t)T * (T + 1) / 2 * tile;
    if (!o->limit_given)
        c->mem_limit = (size_t)(matrix / 4);
    /* Each worker pins at most three tiles at once; a fourth per worker
     * leaves room for the loads that prefetching starts. */
    uint64_t need = (uint64_t)c->threads * 4 * tile;
    if (c->use_pool && !o->no_limit && c->mem_limit < need) {
        fprintf(stderr, "pinpool-demo: a memory limit of %.1f MiB is too small: %d threads "
                "pin up to 3 tiles of %.1f MiB each at once; give at least %.1f MiB "
                "(-m), or fewer threads or a smaller tile\n",
                (double)c->mem_limit / MIB, c->threads, (double)tile / MIB, (double)need / MIB);
        return -1;
    }
    /* Panels of half the limit (or of the default limit, so raw pointers
     * and the pool without a limit run the same task graph). */
    if (c->panel_tiles == 0) {
        /* Half the limit: the other half holds the workers' input tiles,
         * the loads in flight and the slack below the pool's watermarks.
         * At order 8192 with a quarter limit, panels of 14, 18 and 24
         * tiles wrote 0.49, 0.57 and 0.69 GB and read 1.47, 1.42 and 1.49
         * GB: larger panels are evicted while they are updated. */
        int64_t half = (int64_t)(c->mem_limit / 2 / tile);
        c->panel_tiles = half > 1 ? (int)half : 1;
    }
    if (c->direct && (o->no_limit || !c->use_pool)) {
        fprintf(stderr, "pinpool-demo: --direct is for the pool with a limit\n");
        return -1;
    }
    if (o->io_given && (o->no_limit || !c->use_pool)) {
        fprintf(stderr, "pinpool-demo: --io-engine and --io-depth are for the pool with a "
                "limit\n");
        return -1;
    }
#ifndef PP_SWAP_DIRECT
    if (c->direct) {
        fprintf(stderr, "pinpool-demo: --direct: this pinpool has no PP_SWAP_DIRECT\n");
        return -1;
    }
#endif
    if (o->no_limit || !c->use_pool)
        c->mem_limit = 0;
    /* Prefetching the tiles of the next tasks in creation order pays when
     * the runtime runs ready tasks in about that order (libgomp's queue:
     * 10% faster here) and costs when it does not (libomp runs a worker's
     * own newest task first: the guessed tiles were loaded for nothing and
     * evicted others, 2x the loads, 35% slower). */
    /* In the left order too, with the buffered store as with --direct: the
     * tiles of the next tasks are read a little more often for nothing
     * (1.14 GB read at order 8192 against 1.02 GB), but their loads
     * overlap the kernels (factorize 2.31 s against 2.70 s buffered, 4
     * interleaved runs; with --direct 4.3 s against 5.6 s). */
    /* Two tasks a thread: since the swap thread reads loads into the memory
     * of tiles it evicts, a deeper lookahead keeps the device busy at no
     * cost in faults.  Order 8192, 2 threads, left order, 8 interleaved
     * rounds: 4 ahead was faster than 2 in every round, buffered (median
     * 0.96x) and with --direct (0.95x); right order, 3 rounds, 0.95x to
     * 0.99x.  6 and 8 ahead were about as fast as 4, 16 slower than 2.  At
     * order 16384 with --direct, 5 rounds, 0.97x to 1.02x. */
    if (!o->lookahead_given)
        c->lookahead = strcmp(demo_omp_runtime(), "libgomp") == 0 ? 2 * c->threads : 0;
    return 0;
}

/* ---------------------------------------------------------------------------
 * Progress line and plot samples (a thread of their own)
 * ------------------------------------------------------------------------- */

typedef struct sample {
    double t;
    int phase;                   /* demo_phase_t */
    double resident, swapped;    /* bytes */
} sample_t;

typedef struct progress_thread {
    pthread_t tid;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop;
    int tty, quiet;
    demo_progress_t *prog;
    double t0;                  /* of the samples */
    sample_t *samples;
    size_t nsamples, cap;
    int line_open;              /* a redrawn line is on the terminal */
} progress_thread_t;

static void progress_tick(progress_thread_t *p, int print)
{
    demo_progress_t *g = p->prog;
    int phase = atomic_load_explicit(&g->phase, memory_order_relaxed);
    if (phase == PHASE_IDLE)
        return;
    pp_stats_t st = PP_STATS_INIT;
    int have = 0;
    demo_progress_lock();
    if (g->pool != NULL)
        have = pp_pool_stats(g->pool, &st) == 0;
    demo_progress_unlock();
    double now = demo_now();
    if (have) {
        if (p->nsamples == p->cap) {
            size_t cap = p->cap ? 2 * p->cap : 1024;
            sample_t *s = realloc(p->samples, cap * sizeof *s);
            if (s != NULL) {
                p->samples = s;
                p->cap = cap;
            }
        }
        if (p->nsamples < p->cap)
            p->samples[p->nsamples++] = (sample_t){ now - p->t0, phase,
                (double)st.total.resident_bytes, (double)st.total.swapped_bytes };
    }
    if (!print || p->quiet)
        return;
    double el = now - atomic_load_explicit(&g->phase_start, memory_order_relaxed);
    double gf = el > 0 ? (double)atomic_load_explicit(&g->flops, memory_order_relaxed) / el * 1e-9 : 0;
    char line[256], tasks[64];
    snprintf(tasks, sizeof tasks, "%" PRIu64 "/%" PRIu64 " tasks", atomic_load_explicit(&g->tasks_done, memory_order_relaxed),
             atomic_load_explicit(&g->tasks_total, memory_order_relaxed));
    int len = snprintf(line, sizeof line, "%-9s %17s", phase_names[phase], tasks);
    if (have)
        len += snprintf(line + len, sizeof line - (size_t)len,
                        "  resident %7.1f MiB  swapped %7.1f MiB",
                        (double)st.total.resident_bytes / MIB,
                        (double)st.total.swapped_bytes / MIB);
    if (phase == PHASE_FACTORIZE || phase == PHASE_CHECK)
        snprintf(line + len, sizeof line - (size_t)len, "  %6.1f GFLOP/s", gf);
    if (p->tty) {
        fprintf(stderr, "\r%s\033[K", line);
        p->line_open = 1;
    } else {
        fprintf(stderr, "%s\n", line);
    }
    fflush(stderr);
}

static void *progress_main(void *arg)
{
    progress_thread_t *p = arg;
    /* Redrawn 10 times a second on a terminal; otherwise one line every 2 s.
     * Plot samples are taken every 50 ms either way. */
    const int print_every = p->tty ? 2 : 40;
    int tick = 0;
    pthread_mutex_lock(&p->mu);
    while (!p->stop) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += 50 * 1000 * 1000;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        while (!p->stop && pthread_cond_timedwait(&p->cv, &p->mu, &ts) != ETIMEDOUT)
            ;
        if (p->stop)
            break;
        pthread_mutex_unlock(&p->mu);
        progress_tick(p, ++tick % print_every == 0);
        pthread_mutex_lock(&p->mu);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

static int progress_start(progress_thread_t *p, demo_progress_t *prog, int quiet)
{
    memset(p, 0, sizeof *p);
    p->prog = prog;
    p->quiet = quiet;
    p->tty = isatty(STDERR_FILENO);
    p->t0 = demo_now();
    pthread_mutex_init(&p->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&p->cv, &ca);
    pthread_condattr_destroy(&ca);
    return pthread_create(&p->tid, NULL, progress_main, p) == 0 ? 0 : -1;
}

/* Stops the thread; its samples stay for the plot. */
static void progress_stop(progress_thread_t *p)
{
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->tid, NULL);
    if (p->line_open)
        fprintf(stderr, "\r\033[K");
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
}

/* Draws resident and swapped MiB over time into png with gnuplot. */
static int plot(const char *png, const sample_t *s, size_t n, double limit, const char *title)
{
    if (n == 0) {
        fprintf(stderr, "pinpool-demo: --plot: no samples (the run was too short)\n");
        return -1;
    }
    FILE *g = popen("gnuplot", "w");
    if (g == NULL) {
        fprintf(stderr, "pinpool-demo: --plot: cannot run gnuplot: %s\n", strerror(errno));
        return -1;
    }
    fprintf(g, "set terminal pngcairo size 900,480 noenhanced\n"
               "set output '%s'\n"
               "set title '%s'\n"
               "set xlabel 'seconds'\nset ylabel 'MiB'\nset grid\n"
               "set key outside bottom center horizontal\nset yrange [0:*]\n", png, title);
    /* A dotted line and a label where each phase begins. */
    for (size_t i = 0, k = 0; i < n; i++)
        if (i == 0 || s[i].phase != s[i - 1].phase) {
            fprintf(g, "set arrow from %.3f, graph 0 to %.3f, graph 1 nohead dt 3 lc rgb 'gray50'\n"
                       "set label '%s' at %.3f, graph %.2f offset 0.5,0 tc rgb 'gray40'\n",
                    s[i].t, s[i].t, phase_names[s[i].phase], s[i].t, k % 2 ? 0.90 : 0.96);
            k++;
        }
    fprintf(g, "$d << EOD\n");
    for (size_t i = 0; i < n; i++)
        fprintf(g, "%.3f %.3f %.3f\n", s[i].t, s[i].resident / MIB, s[i].swapped / MIB);
    fprintf(g, "EOD\n");
    if (limit > 0)
        fprintf(g, "plot $d using 1:2 with lines lw 2 title 'resident', "
                   "$d using 1:3 with lines lw 2 title 'swapped', "
                   "%.3f with lines dt 2 lc 'black' title 'memory limit'\n", limit / MIB);
    else
        fprintf(g, "plot $d using 1:2 with lines lw 2 title 'resident', "
                   "$d using 1:3 with lines lw 2 title 'swapped'\n");
    int st = pclose(g);
    if (st != 0) {
        fprintf(stderr, "pinpool-demo: --plot: gnuplot failed (status %d); is gnuplot "
                "installed (Debian: gnuplot-nox)?\n", st);
        return -1;
    }
    fprintf(stderr, "pinpool-demo: plot written to %s\n", png);
    return 0;
}

/* ---------------------------------------------------------------------------
 * Summary
 * ------------------------------------------------------------------------- */

static const char *run_name(const demo_config_t *c)
{
    return !c->use_pool ? "raw pointers" : c->mem_limit == 0 ? "pool, no limit"
                                                               : "pool, limit";
}

/* An I/O engine's name: pp_stats_t.io_engine (1 io_uring, 2 threads, 0
 * no swap) or pp_options_t.io_engine (0 auto); buf for other values. */
static const char *engine_name(unsigned e, int asked, char buf[16])
{
    switch (e) {
    case PP_IO_ENGINE_URING: return asked ? "uring" : "io_uring";
    case PP_IO_ENGINE_THREADS: return "threads";
    case 0: return asked ? "auto" : "none";
    default: snprintf(buf, 16, "%u", e); return buf;
    }
}

/* MB/s (1e6 bytes a second) of bytes moved in s seconds. */
static double mbps(uint64_t bytes, double s)
{
    return s > 0 ? (double)bytes / MB / s : 0.0;
}

/* Prints one run's figures; returns the number of failed checks. */
static int summary(const options_t *o, const demo_config_t *c, const demo_result_t *r)
{
    int failed = 0;
    printf("  generate  %8.2f s\n", r->t_generate);
    printf("  factorize %8.2f s  %6.1f GFLOP/s  (%" PRIu64 " tasks)\n", r->t_factorize,
           r->factor_flops / r->t_factorize * 1e-9, r->tasks);
    if (c->use_pool && c->mem_limit != 0) {
        printf("  swap I/O during factorize: read %.1f MB/s (%.1f MB), written %.1f MB/s "
               "(%.1f MB)\n", mbps(r->fact_read, r->t_factorize), (double)r->fact_read / MB,
               mbps(r->fact_written, r->t_factorize), (double)r->fact_written / MB);
        /* The device's own rate: bytes over the time it had a request. */
        double rs = (double)r->fact_read_ns / 1e9, ws = (double)r->fact_write_ns / 1e9;
        printf("  swap device busy: reading %.1f%% of factorize (%.1f MB/s while reading), "
               "writing %.1f%% (%.1f MB/s while writing)\n",
               r->t_factorize > 0 ? 100.0 * rs / r->t_factorize : 0.0, mbps(r->fact_read, rs),
               r->t_factorize > 0 ? 100.0 * ws / r->t_factorize : 0.0,
               mbps(r->fact_written, ws));
    }
    printf("  check     %8.2f s\n", r->t_check);
    printf("  total     %8.2f s\n", r->t_total);
    int res_ok = r->residual < RESIDUAL_MAX;
    failed += !res_ok;
    printf("  residual  %s = %.3e  (below %.0e: %s)\n",
           c->check_vector ? "||A*x - L*L^T*x|| / ||A*x||" : "||A - L*L^T|| / ||A||", r->residual,
           RESIDUAL_MAX, res_ok ? "ok" : "FAILED");
    if (!c->use_pool)
        return failed;
    const pp_node_stats_t *t = &r->stats.total;
    if (r->nodes > 1) {
        printf("  per node:");
        for (unsigned n = 0; n < r->nodes && n < PP_MAX_NODES; n++)
            printf("%s %" PRIu64 " loads, %.1f MiB written", n ? ";" : "",
                   r->node_loads[n], (double)r->node_written[n] / MIB);
        printf("\n");
    }
    printf("  pins %" PRIu64 ", evictions %" PRIu64 " (%" PRIu64 " written, %" PRIu64
           " clean), loads %" PRIu64 " (%" PRIu64 " waited for another's)\n",
           t->pins, t->evictions_written + t->evictions_clean, t->evictions_written,
           t->evictions_clean, t->loads, t->load_waits);
    printf("  evictions of tiles advised PP_ADVISE_WONTNEED %" PRIu64 "\n", t->evictions_advised);
    printf("  NOWAIT pins that found a tile loading %" PRIu64 ", prefetches %" PRIu64
           ", PP_ENOMEM retries %" PRIu64 "\n", r->nowait_eagain, r->prefetches,
           r->enomem_retries);
    if (c->mem_limit != 0) {
        char b1[16];
        const pp_stats_t *s = &r->stats;
        /* As the pool reports them (the header says what was asked for). */
        printf("  swap I/O engine: %s (io_engine %u), depth %u, why \"%.*s\"\n",
               engine_name(s->io_engine, 0, b1), s->io_engine, s->io_depth,
               (int)sizeof s->io_engine_why, s->io_engine_why);
        printf("  loads into the memory of an evicted tile %" PRIu64 " of %" PRIu64 "\n",
               t->io_load_recycled, t->loads);
        double mat = (double)r->matrix_bytes;
        int sw_ok = (double)t->swap_bytes_written >= mat;
        printf("  swap: written %.1f MiB, read %.1f MiB  (%.2fx the matrix written%s)\n",
               (double)t->swap_bytes_written / MIB, (double)t->swap_bytes_read / MIB,
               (double)t->swap_bytes_written / mat,
               o->require_swap ? (sw_ok ? ": ok" : ": FAILED, --require-swap") : "");
        if (o->require_swap)
            failed += !sw_ok;
        uint64_t bound = (uint64_t)c->mem_limit + r->tile_bytes;
        int peak_ok = r->stats.resident_peak <= bound;
        failed += !peak_ok;
        printf("  peak resident %.1f MiB  (limit %.1f MiB + one tile %.1f MiB: %s)\n",
               (double)r->stats.resident_peak / MIB, (double)c->mem_limit / MIB,
               (double)r->tile_bytes / MIB, peak_ok ? "ok" : "FAILED");
    } else {
        printf("  resident %.1f MiB, nothing swapped\n", (double)t->resident_bytes / MIB);
    }
    if (!o->compare) {
        struct rusage ru;
        if (getrusage(RUSAGE_SELF, &ru) == 0)
            printf("  process: peak RSS %.1f MiB: the pool's %.1f MiB, plus %s, scratch "
                   "tiles, OpenBLAS and the program\n", (double)ru.ru_maxrss / 1024.0,
                   (double)(c->mem_limit != 0 ? r->stats.resident_peak
                                              : r->stats.total.resident_bytes) / MIB,
                   o->return_memory ? "no freed tile (--return-memory)"
                                    : "freed tiles the allocator keeps for reuse (see "
                                      "--return-memory)");
    }
    printf("  reclaim lag p50 %.1f us, p99 %.1f us  (%" PRIu64 " tiles freed, %" PRIu64
           " timed)\n", (double)r->lag_p50_ns / 1e3, (double)r->lag_p99_ns / 1e3, r->frees,
           r->lag_count);
    return failed;
}

/* The --result line: one run's figures as key=value pairs, for scripts.
 * written and read: swap bytes from the start of generate to the end of
 * factorize; fact_written_bytes and fact_read_bytes: during factorize
 * alone, write_mbps and read_mbps those over its time (MB = 1e6 bytes);
 * write_busy_s and read_busy_s: the time the swap device had a write
 * (read) in flight during factorize;
 * io_engine (io_uring, threads, none, or the number) and io_depth: as the
 * pool reports them; peak_rss: the process's so far.  With --trace:
 * trace_loads and trace_written, the pool's loads and evictions written
 * just before pp_trace_stop and just after ("lo-hi"): the trace has
 * between lo and hi of each. */
static void result_line(const demo_config_t *c, const demo_result_t *r, int failed)
{
    struct rusage ru;
    long rss = getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_maxrss : 0;
    int swap = c->use_pool && c->mem_limit != 0;
    char b1[16];
    printf("result: impl=%s order=%s hints=%d direct=%d n=%d b=%d threads=%d limit=%zu factorize_s=%.4f total_s=%.4f "
           "written=%" PRIu64 " read=%" PRIu64 " fact_written_bytes=%" PRIu64
           " fact_read_bytes=%" PRIu64 " write_mbps=%.1f read_mbps=%.1f write_busy_s=%.4f "
           "read_busy_s=%.4f io_engine=%s io_depth=%u "
           "peak_resident=%" PRIu64 " peak_rss=%ld residual=%.3e%s ok=%d\n",
           !c->use_pool ? "raw" : c->mem_limit == 0 ? "pool-nolimit" : "pool-limit",
           c->order == DEMO_ORDER_LEFT ? "left" : "right", c->use_pool && c->hints, c->direct,
           c->n, c->b,
           c->threads, c->mem_limit, r->t_factorize, r->t_total, r->run_written, r->run_read,
           r->fact_written, r->fact_read, mbps(r->fact_written, r->t_factorize),
           mbps(r->fact_read, r->t_factorize), (double)r->fact_write_ns / 1e9,
           (double)r->fact_read_ns / 1e9,
           swap ? engine_name(r->stats.io_engine, 0, b1) : "none", swap ? r->stats.io_depth : 0u,
           c->use_pool ? r->stats.resident_peak : 0, rss * 1024L, r->residual,
           r->trace_counts, failed == 0);
}

static void header(const demo_config_t *c, int tiles, uint64_t matrix, uint64_t tile)
{
    int T = c->n / c->b;
    printf("pinpool-demo: tiled Cholesky of an SPD matrix of order %d, tiles of %dx%d "
           "(%d per side, %d stored: %.1f MiB, %.1f MiB each)\n",
           c->n, c->b, c->b, T, tiles, (double)matrix / MIB, (double)tile / MIB);
    printf("  %d threads on %s, one BLAS thread per task (OpenBLAS %s)\n", c->threads,
           demo_omp_runtime(), openblas_get_corename());
    if (c->order == DEMO_ORDER_LEFT)
        printf("  task order: left-looking, panels of up to %d tiles\n", c->panel_tiles);
    else
        printf("  task order: right-looking\n");
    if (c->use_pool)
        printf("  eviction hints: %s\n", c->hints ? "PP_ADVISE_WONTNEED after a tile's last use "
               "in its panel or step, PP_ADVISE_WILLNEED ahead" : "none (--no-hints)");
    if (c->use_pool && c->mem_limit != 0) {
        char b1[16];
        printf("  swap I/O engine asked for: %s, depth %u%s\n", engine_name(c->io_engine, 1, b1),
               c->io_depth, c->io_depth == 0 ? " (the library's default)" : "");
    }
    if (c->use_pool && c->lookahead > 0)
        printf("  tasks prefetch the tiles of the next %d task%s in creation order\n",
               c->lookahead, c->lookahead == 1 ? "" : "s");
    else if (c->use_pool)
        printf("  tasks prefetch no other task's tiles (--lookahead 0)\n");
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* ---------------------------------------------------------------------------
 * main
 * ------------------------------------------------------------------------- */

/* Draws the trace into TRACE.png with tools/trace_plot.py, and says where
 * both are. */
static void trace_picture(const char *trace)
{
    size_t len = strlen(trace) + 5;
    char *png = malloc(len);
    pid_t pid;
    int st = -1;
    if (png == NULL)
        return;
    snprintf(png, len, "%s.png", trace);
    char *argv[] = {"python3", DEMO_TRACE_PLOT, (char *)trace, png, NULL};
    if (posix_spawnp(&pid, "python3", NULL, NULL, argv, environ) == 0 &&
        waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0)
        printf("  trace: %s (ui.perfetto.dev opens it), picture %s\n", trace, png);
    else
        printf("  trace: %s (ui.perfetto.dev opens it); no picture: python3 %s failed\n", trace,
               DEMO_TRACE_PLOT);
    free(png);
}

int main(int argc, char **argv)
{
    options_t o;
    memset(&o, 0, sizeof o);
    if (parse_options(argc, argv, &o) != 0)
        return EXIT_USAGE;
    /* One BLAS thread per task: the tasks are the parallelism. */
    openblas_set_num_threads(1);
    setvbuf(stdout, NULL, _IOLBF, 0);
    /* --return-memory: every tile-sized block is its own mapping, returned
     * to the kernel when freed (glibc otherwise raises its mmap threshold
     * after the first frees and keeps freed tiles in its heap for reuse). */
    if (o.return_memory && mallopt(M_MMAP_THRESHOLD, 256 * 1024) != 1) {
        fprintf(stderr, "pinpool-demo: --return-memory: mallopt(M_MMAP_THRESHOLD) refused (a "
                "sanitizer's allocator?); freed memory may stay in the process\n");
        o.return_memory = 0;
    }

    demo_config_t base = o.cfg;
    int T = base.n / base.b, tiles = T * (T + 1) / 2;
    uint64_t tile = (uint64_t)base.b * base.b * sizeof(double);
    uint64_t matrix = (uint64_t)tiles * tile;
    header(&base, tiles, matrix, tile);

    /* The runs: one, or the three of --compare (R rounds, interleaved). */
    demo_config_t runs[3];
    int nruns = 0;
    if (o.compare) {
        runs[0] = base;
        runs[0].use_pool = 0;
        runs[0].mem_limit = 0;
        runs[1] = base;
        runs[1].mem_limit = 0;
        runs[2] = base;
        nruns = 3;
    } else {
        runs[0] = base;
        nruns = 1;
    }
    if (base.topology != NULL)
        printf("  pool topology: \"%s\" (tiles spread over its nodes)\n", base.topology);
    for (int i = 0; i < nruns; i++) {
        if (runs[i].use_pool && runs[i].mem_limit != 0)
            printf("  pool: memory limit %.1f MiB (%.2f of the matrix), swap under %s\n",
                   (double)runs[i].mem_limit / MIB, (double)runs[i].mem_limit / (double)matrix,
                   runs[i].swap_dir);
    }

    int rounds = o.compare ? o.rounds : 1;
    demo_result_t *res = calloc((size_t)rounds * 3, sizeof *res);
    if (res == NULL)
        return EXIT_RUN;
    demo_progress_t prog;
    memset(&prog, 0, sizeof prog);
    progress_thread_t pt;
    int failed = 0;
    sample_t *plot_samples = NULL;
    size_t plot_n = 0;
    for (int round = 0; round < rounds; round++) {
        for (int i = 0; i < nruns; i++) {
            demo_result_t *r = &res[round * 3 + i];
            if (o.compare)
                printf("\n%s (round %d of %d):\n", run_name(&runs[i]), round + 1, rounds);
            if (progress_start(&pt, &prog, o.quiet) != 0) {
                fprintf(stderr, "pinpool-demo: cannot start the progress thread\n");
                return EXIT_RUN;
            }
            int rc = demo_run(&runs[i], &prog, r);
            progress_stop(&pt);
            if (rc != 0) {
                free(pt.samples);
                return EXIT_RUN;
            }
            int run_failed = summary(&o, &runs[i], r);
            failed += run_failed;
            if (o.result_line)
                result_line(&runs[i], r, run_failed);
            /* The plot shows the last run with a limit (or the only run). */
            if (runs[i].mem_limit != 0 || nruns == 1) {
                free(plot_samples);
                plot_samples = pt.samples;
                plot_n = pt.nsamples;
            } else {
                free(pt.samples);
            }
        }
    }

    if (o.compare) {
        double fac[3][99], tot[3][99];
        for (int i = 0; i < 3; i++)
            for (int round = 0; round < rounds; round++) {
                fac[i][round] = res[round * 3 + i].t_factorize;
                tot[i][round] = res[round * 3 + i].t_total;
            }
        double mf[3], mt[3];
        for (int i = 0; i < 3; i++) {
            mf[i] = median(fac[i], rounds);
            mt[i] = median(tot[i], rounds);
        }
        printf("\ncompare (%s of %d round%s; ratios against raw pointers in this run):\n",
               rounds > 1 ? "medians" : "one", rounds, rounds > 1 ? "s" : "");
        printf("  %-22s %12s %8s %10s %8s\n", "run", "factorize s", "ratio", "total s",
               "ratio");
        for (int i = 0; i < 3; i++) {
            char name[64];
            if (runs[i].mem_limit != 0)
                snprintf(name, sizeof name, "pool, limit %.0f MiB", (double)runs[i].mem_limit / MIB);
            else
                snprintf(name, sizeof name, "%s", run_name(&runs[i]));
            printf("  %-22s %12.2f %7.3fx %10.2f %7.3fx\n", name, mf[i], mf[i] / mf[0], mt[i],
                   mt[i] / mt[0]);
        }
        printf("  factorize GFLOP/s: raw %.1f, pool no limit %.1f, pool with limit %.1f\n",
               res[0].factor_flops / mf[0] * 1e-9, res[0].factor_flops / mf[1] * 1e-9,
               res[0].factor_flops / mf[2] * 1e-9);
        double rd[99], wr[99];
        for (int round = 0; round < rounds; round++) {
            const demo_result_t *r = &res[round * 3 + 2];
            rd[round] = mbps(r->fact_read, r->t_factorize);
            wr[round] = mbps(r->fact_written, r->t_factorize);
        }
        printf("  swap I/O during factorize, pool with limit: read %.1f MB/s, written %.1f "
               "MB/s\n", median(rd, rounds), median(wr, rounds));
    }

    if (o.plot != NULL) {
        char title[160];
        snprintf(title, sizeof title, "pinpool-demo: Cholesky n=%d, tile %d, limit %.0f MiB",
                 base.n, base.b, (double)base.mem_limit / MIB);
        if (plot(o.plot, plot_samples, plot_n, (double)base.mem_limit, title) != 0)
            failed++;
    }
    if (o.cfg.trace != NULL)
        trace_picture(o.cfg.trace);
    free(plot_samples);
    free(res);
    if (failed) {
        printf("pinpool-demo: %d check%s FAILED\n", failed, failed > 1 ? "s" : "");
        return EXIT_CHECK;
    }
    printf("pinpool-demo: all checks passed\n");
    return 0;
}
