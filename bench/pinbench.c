/*
 * pinbench -- the cost of pinning data with pinpool, against six baselines,
 * over scenarios x implementations x thread counts (docs/performance.md).
 *
 * Machines here are shared and noisy, so an absolute time means little and
 * a ratio between two things measured in the same run, interleaved, means a
 * lot.  For each (scenario, thread count) cell the implementations run in
 * turn, round after round (A B C ... A B C ...), each run lasting a fixed
 * time, and the median round of each is reported.
 *
 * Implementations (one small interface, pinbench.h; one file each):
 *   pinpool       the library, default options: pp_pin / pp_unpin of a ref,
 *                 pp_pin_many / pp_unpin_many for a task
 *   pinpool-qsbr  the same, each worker calling pp_quiescent after every op
 *                 (a scheduler between two tasks)
 *   pinpool-scope the task scenario only, each task a scope: pp_scope_init,
 *                 pp_scope_pin_many of its inputs, the reads, pp_scope_end
 *   atomic-limit  one atomic add (acquire) + sub (release) on a line private
 *                 to the thread, no lookup: the physical limit of a counted pin
 *   naive-array   an array of atomic counters indexed by entry: no validation
 *                 of the index, no reclamation -- the cost of doing it unsafely
 *   cas-floor     16-byte records {word, data} laid out as the pool's hot state
 *                 (2 MiB aligned, huge pages advised): a pin checks the ref's
 *                 slot, generation and LIVE bit and CASes the count up, then
 *                 returns the data pointer; a task prefetches its 4 records
 *                 first -- the floor of any validated pin, with no flags,
 *                 statistics or reclamation
 *   mutex-dict    one pthread mutex around a hash map (ck_ht) of refcounted
 *                 entries, locked for every pin and every unpin: how MemPool.jl's
 *                 datastore works
 *   urcu-lfht     liburcu's lock-free hash table, looked up under
 *                 rcu_read_lock, with an atomic refcount in the node: the best
 *                 ready-made lock-free C alternative
 * and, only in a build made by bench/sidebyside (PINBENCH_HAVE_OLD):
 *   pinpool-old, pinpool-qsbr-old
 *                 the first two calling an older commit of the library,
 *                 linked into the same program with its symbols renamed, each
 *                 run right after its new counterpart; the report adds new /
 *                 old per cell, and the reclaim figures run for both
 *
 * Scenarios (an op is one pin + one unpin unless said):
 *   hot           every thread pins the same single entry
 *   uniform       random entries of 1,000,000 (uniform-10k: of 10,000;
 *                 uniform-10m: of 10,000,000)
 *   zipf          entries drawn Zipf(0.99) over 1,000,000 (popular ranks
 *                 scattered over the table)
 *   task          an op pins 4 random inputs of 1,000,000, reads 64 bytes of
 *                 each, unpins them (a scheduler's task)
 *   churn         an op puts a new entry, pins it, unpins it, releases it
 *                 (reclaimed) -- next to 10,000 entries that stay
 * The draws are made before the timed region, the same for every
 * implementation: each thread cycles through its own array of 2^20 keys
 * (a pinpool ref, or the entry's index for the others).
 *
 * Each scenario starts with an unrecorded warm-up run of each
 * implementation.  In each run, worker i is bound to CPU i mod (the CPUs
 * this process may use), registers with the library and waits on a
 * barrier; the main thread sleeps for the run's duration and raises a stop
 * flag that workers check every 64 ops.  Threads 1, 2, 4, 8 by default: on
 * a 2-core machine 4 and 8 are oversubscribed on purpose (a thread may be
 * descheduled holding a lock, or between pin and unpin).  Tables, data
 * layout and draws are the same for every implementation: each entry's 64
 * bytes of data sit in one array, 64-byte aligned.
 *
 * Reading the output.  First the machine (machine.h): lines "machine: key:
 * value" naming the CPU model (and its family, model and stepping), the
 * caches (size of one instance x how many), the cores and PUs this process
 * may use and those there are, NUMA nodes, whether a hypervisor is
 * reported, the kernel, the transparent huge page mode, the date (UTC) and
 * the commit the build was configured at; "unknown" for what could not be
 * read.  Then for each scenario, a row per implementation and a
 * column per thread count: Mops/s, all threads together, and in parentheses
 * ns per op per thread (threads x seconds / ops; with more threads than
 * CPUs it includes the time a thread waits for a CPU).  "-" marks a cell
 * that does not apply (churn of atomic-limit, naive-array and cas-floor,
 * which cannot create or reclaim; everything but the task of pinpool-scope).
 * Then the ratios the project tracks, each with its target; then,
 * informational, a pin's cost split in two at cas-floor (cas-floor /
 * naive-array: what validation and a data pointer cost any pin; pinpool /
 * cas-floor: what pinpool adds) and what a scope costs a task (pinpool-scope
 * / pinpool); and the reclaim
 * figures: the lag from the final unpin to the free call, what a final
 * unpin costs against an ordinary one, and the memory each entry costs.  --csv writes the same machine lines as comments
 * ("# key: value", before the header; readers skip lines starting with
 * '#'), then one line per (scenario, impl, threads); --plot draws
 * throughput against threads, one panel per scenario.
 *
 * Every call's return code is checked; any failure exits 1 with a message.
 * No timing is asserted.  Run pinbench --help for the options.
 */
#define _GNU_SOURCE               /* pthread_attr_setaffinity_np, CPU_* */
#include "pinbench.h"

#include <pinpool.h>

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */
/* ------------------------------------------------------------------------ */

static int progress_tty;          /* stderr is a terminal: redraw in place */
static int progress_shown;        /* a progress line is on the terminal */

void pb_progress_clear(void)
{
    if (progress_tty && progress_shown) {
        fputs("\r\033[K", stderr);
        progress_shown = 0;
    }
}

_Noreturn void pb_die(const char *fmt, ...)
{
    pb_progress_clear();
    fflush(stdout);
    va_list ap;
    va_start(ap, fmt);
    fputs("pinbench: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

_Noreturn void pb_die_pp(const char *call, int rc)
{
    pb_die("%s: %s (%s)", call, pp_strerror(rc), pp_err_name(rc));
}

_Noreturn void pb_die_errno(const char *call, int err)
{
    pb_die("%s: %s", call, strerror(err));
}

void *pb_malloc(size_t n)
{
    void *p = malloc(n);
    if (p == NULL)
        pb_die("out of memory (malloc of %zu bytes)", n);
    return p;
}

void *pb_calloc(size_t n, size_t size)
{
    void *p = calloc(n, size);
    if (p == NULL)
        pb_die("out of memory (calloc of %zu x %zu bytes)", n, size);
    return p;
}

void *pb_zalloc(size_t n)
{
    unsigned char *p = pb_calloc(1, n);
    /* A large calloc maps zero pages that fault on first use: touch each
     * page now, so that no timed access pays for it. */
    for (size_t off = 0; off < n; off += 4096)
        ((volatile unsigned char *)p)[off] = 0;
    return p;
}

uint64_t pb_now_ns(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
        pb_die_errno("clock_gettime(CLOCK_MONOTONIC)", errno);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void pb_progress(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (progress_tty)
        fputs("\r\033[K", stderr);
    fputs("pinbench: ", stderr);
    vfprintf(stderr, fmt, ap);
    if (!progress_tty)
        fputc('\n', stderr);
    fflush(stderr);
    progress_shown = 1;
    va_end(ap);
}

/* splitmix64: the draws' random numbers. */
static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15u);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    return z ^ (z >> 31);
}

/* ------------------------------------------------------------------------ */
/* Scenarios and implementations                                             */
/* ------------------------------------------------------------------------ */

enum pb_kind { PB_PAIRS, PB_TASK, PB_CHURN };
enum pb_dist { PB_HOT, PB_UNIFORM, PB_ZIPF, PB_NODRAW };

typedef struct pb_scenario {
    const char *name;
    const char *what;
    enum pb_kind kind;
    enum pb_dist dist;
    size_t entries;             /* full run */
    size_t quick_entries;       /* --quick; 0: not run by --quick */
} pb_scenario_t;

#define PB_ZIPF_S 0.99
#define PB_CHURN_BACKGROUND 10000u

static const pb_scenario_t scenarios[] = {
    { "hot", "every thread pins the same entry; op = pin + unpin",
      PB_PAIRS, PB_HOT, 1, 1 },
    { "uniform", "random entries of 1,000,000; op = pin + unpin",
      PB_PAIRS, PB_UNIFORM, 1000000, 100000 },
    { "uniform-10k", "random entries of 10,000; op = pin + unpin",
      PB_PAIRS, PB_UNIFORM, 10000, 10000 },
    { "uniform-10m", "random entries of 10,000,000; op = pin + unpin",
      PB_PAIRS, PB_UNIFORM, 10000000, 0 },
    { "zipf", "Zipf(0.99) entries of 1,000,000; op = pin + unpin",
      PB_PAIRS, PB_ZIPF, 1000000, 100000 },
    { "task", "op = pin 4 random inputs of 1,000,000, read 64 bytes of each, unpin",
      PB_TASK, PB_UNIFORM, 1000000, 100000 },
    { "churn", "op = put a new entry, pin, unpin, release (10,000 others stay)",
      PB_CHURN, PB_NODRAW, PB_CHURN_BACKGROUND, PB_CHURN_BACKGROUND },
};
#define NSCEN (sizeof scenarios / sizeof scenarios[0])

static const pb_impl_t *const impls[] = {
#ifdef PINBENCH_HAVE_OLD
    &pb_impl_pinpool, &pb_impl_pinpool_old, &pb_impl_pinpool_qsbr, &pb_impl_pinpool_qsbr_old,
#else
    &pb_impl_pinpool, &pb_impl_pinpool_qsbr,
#endif
    &pb_impl_pinpool_scope, &pb_impl_pinpool_inline,
    &pb_impl_atomic_limit, &pb_impl_naive_array, &pb_impl_cas_floor, &pb_impl_mutex_dict,
    &pb_impl_urcu_lfht,
};
#define NIMPL (sizeof impls / sizeof impls[0])

static int applies(const pb_impl_t *im, const pb_scenario_t *sc)
{
    switch (sc->kind) {
    case PB_PAIRS: return im->pairs != NULL;
    case PB_TASK:  return im->tasks != NULL;
    default:       return im->churn != NULL;
    }
}

/* ------------------------------------------------------------------------ */
/* Options                                                                   */
/* ------------------------------------------------------------------------ */

#define PB_MAX_THREADS 256u
#define PB_BATCH 64u              /* ops between two looks at the stop flag */

static struct {
    int quick, reclaim, check_csv;
    unsigned rounds, ms;
    const char *csv, *plot;
    int scen_on[NSCEN], impl_on[NIMPL];
    unsigned threads[16], nthreads;
} opt = { .reclaim = 1 };

static void usage(FILE *f)
{
    fprintf(f,
"usage: pinbench [--quick] [--scenarios A,B] [--impls A,B] [--threads 1,2]\n"
"                [--rounds R] [--ms M] [--csv FILE [--check-csv]] [--plot FILE.png]\n"
"                [--no-reclaim] [--help]\n"
"\n"
"Pins with pinpool against baselines; see the comment at the top of\n"
"bench/pinbench.c for what each implementation and scenario is.\n"
"\n"
"  --scenarios LIST  of:");
    for (unsigned s = 0; s < NSCEN; s++)
        fprintf(f, " %s", scenarios[s].name);
    fprintf(f, "\n                    (default: all)\n  --impls LIST      of:");
    for (unsigned i = 0; i < NIMPL; i++)
        fprintf(f, " %s", impls[i]->name);
    fprintf(f, "\n                    (default: all)\n");
    int w = 13;
    for (unsigned i = 0; i < NIMPL; i++)
        if ((int)strlen(impls[i]->name) > w)
            w = (int)strlen(impls[i]->name);
    for (unsigned i = 0; i < NIMPL; i++)
        fprintf(f, "                      %-*s %s\n", w, impls[i]->name, impls[i]->what);
    fprintf(f,
"  --threads LIST    worker threads per run (default 1,2,4,8; at most %u)\n"
"  --rounds R        interleaved rounds per cell, median reported (default 9)\n"
"  --ms M            duration of one run in milliseconds (default 250)\n"
"  --csv FILE        the machine as \"# key: value\" lines, then one line per\n"
"                    (scenario, impl, threads), the median round:\n"
"                    scenario,impl,threads,ops,seconds,mops_per_s,ns_per_op_thread\n"
"  --check-csv       after the run, read FILE back and check it (the machine's\n"
"                    \"# cpu: \" line, exact header, well-formed positive numbers,\n"
"                    a row for every scenario run)\n"
"  --plot FILE.png   throughput against threads, one panel per scenario\n"
"                    (needs gnuplot: Debian package gnuplot-nox)\n"
"  --no-reclaim      skip the reclaim figures (lag, final unpin cost, bytes per\n"
"                    entry), which run by default after the scenarios\n"
"  --quick           a smoke run of well under a minute (CI): 3 rounds of 20 ms;\n"
"                    uniform, zipf and task over 100,000 entries instead of\n"
"                    1,000,000; uniform-10m skipped; 2^16 draws per thread;\n"
"                    reclaim figures on fewer entries (bytes per entry with\n"
"                    100,000 and 1,000,000 instead of 1 and 10 million).\n"
"                    Explicit --rounds, --ms and --scenarios still apply.\n"
"\n"
"The full run (no options) takes about 7 to 8 minutes on 2 cores.\n", PB_MAX_THREADS);
}

static _Noreturn void bad_usage(const char *fmt, const char *arg)
{
    fprintf(stderr, "pinbench: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\npinbench: pinbench --help lists the options\n");
    exit(2);
}

static unsigned number(const char *s, const char *what)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || s[0] == '-' || v == 0 || v > 1000000)
        bad_usage("bad %s (a positive integer)", what);
    return (unsigned)v;
}

/* Splits a comma list; calls pick(name) for each item. */
static void each_item(const char *list, void (*pick)(const char *))
{
    char buf[1024];
    if (strlen(list) >= sizeof buf)
        bad_usage("list too long: %s", list);
    strcpy(buf, list);
    for (char *save = NULL, *p = strtok_r(buf, ",", &save); p != NULL;
         p = strtok_r(NULL, ",", &save))
        pick(p);
}

static void pick_scenario(const char *name)
{
    for (unsigned s = 0; s < NSCEN; s++)
        if (strcmp(name, scenarios[s].name) == 0) {
            opt.scen_on[s] = 1;
            return;
        }
    bad_usage("unknown scenario: %s", name);
}

static void pick_impl(const char *name)
{
    for (unsigned i = 0; i < NIMPL; i++)
        if (strcmp(name, impls[i]->name) == 0) {
            opt.impl_on[i] = 1;
            return;
        }
    bad_usage("unknown implementation: %s", name);
}

static void pick_threads(const char *s)
{
    unsigned n = number(s, "thread count");
    if (n > PB_MAX_THREADS)
        bad_usage("too many threads: %s", s);
    if (opt.nthreads == sizeof opt.threads / sizeof opt.threads[0])
        bad_usage("too many thread counts: %s", s);
    for (unsigned t = 0; t < opt.nthreads; t++)
        if (opt.threads[t] == n)
            bad_usage("thread count given twice: %s", s);
    opt.threads[opt.nthreads++] = n;
}

static void parse_options(int argc, char **argv)
{
    int scen_given = 0, impl_given = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int more = i + 1 < argc;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            exit(0);
        } else if (strcmp(a, "--quick") == 0) {
            opt.quick = 1;
        } else if (strcmp(a, "--no-reclaim") == 0) {
            opt.reclaim = 0;
        } else if (strcmp(a, "--check-csv") == 0) {
            opt.check_csv = 1;
        } else if (strcmp(a, "--scenarios") == 0 && more) {
            each_item(argv[++i], pick_scenario);
            scen_given = 1;
        } else if (strcmp(a, "--impls") == 0 && more) {
            each_item(argv[++i], pick_impl);
            impl_given = 1;
        } else if (strcmp(a, "--threads") == 0 && more) {
            each_item(argv[++i], pick_threads);
        } else if (strcmp(a, "--rounds") == 0 && more) {
            opt.rounds = number(argv[++i], "--rounds");
        } else if (strcmp(a, "--ms") == 0 && more) {
            opt.ms = number(argv[++i], "--ms");
        } else if (strcmp(a, "--csv") == 0 && more) {
            opt.csv = argv[++i];
        } else if (strcmp(a, "--plot") == 0 && more) {
            opt.plot = argv[++i];
        } else {
            bad_usage("unknown or incomplete option: %s", a);
        }
    }
    if (opt.check_csv && opt.csv == NULL)
        bad_usage("%s needs --csv FILE", "--check-csv");
    for (unsigned s = 0; s < NSCEN; s++)
        if (!scen_given)
            opt.scen_on[s] = !opt.quick || scenarios[s].quick_entries != 0;
    for (unsigned i = 0; i < NIMPL; i++)
        if (!impl_given)
            opt.impl_on[i] = 1;
    if (opt.nthreads == 0) {
        static const unsigned def[] = { 1, 2, 4, 8 };
        for (unsigned t = 0; t < 4; t++)
            opt.threads[opt.nthreads++] = def[t];
    }
    if (opt.rounds == 0)
        opt.rounds = opt.quick ? 3 : 9;
    if (opt.ms == 0)
        opt.ms = opt.quick ? 20 : 250;
    /* Fail before the run, not after it. */
    if (opt.plot != NULL && !pb_gnuplot_found())
        pb_die("--plot needs gnuplot, which is not on PATH (Debian: apt-get install"
               " gnuplot-nox)");
}

/* ------------------------------------------------------------------------ */
/* Draws                                                                     */
/* ------------------------------------------------------------------------ */

static size_t draws_per_thread(void)
{
    return opt.quick ? (size_t)1 << 16 : (size_t)1 << 20;
}

/* Popular Zipf ranks are spread over the table (rank r is entry
 * r * PB_SCATTER mod n), as they would be in a real pool, rather than packed
 * into the first cache lines. */
#define PB_SCATTER 2654435761u

static uint64_t gcd(uint64_t a, uint64_t b)
{
    while (b != 0) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* cdf[k] = P(rank <= k) for Zipf(s) over n ranks. */
static double *zipf_cdf(size_t n, double s)
{
    double *cdf = pb_malloc(n * sizeof *cdf);
    double sum = 0;
    for (size_t k = 0; k < n; k++)
        cdf[k] = (sum += pow((double)(k + 1), -s));
    for (size_t k = 0; k < n; k++)
        cdf[k] /= sum;
    cdf[n - 1] = 1.0;
    return cdf;
}

/* Fills draws[t][0 .. d-1] with entry indexes for thread t. */
static void make_draws(const pb_scenario_t *sc, size_t n, uint64_t **draws, unsigned nthr,
                       size_t d, unsigned scen_index)
{
    double *cdf = sc->dist == PB_ZIPF ? zipf_cdf(n, PB_ZIPF_S) : NULL;
    if (cdf != NULL && gcd(PB_SCATTER, n) != 1)
        pb_die("zipf: %zu entries share a factor with the scatter multiplier", n);
    for (unsigned t = 0; t < nthr; t++) {
        uint64_t seed = ((uint64_t)scen_index << 32) ^ ((uint64_t)t * 0x2545F4914F6CDD1Du) ^ 1;
        for (size_t k = 0; k < d; k++) {
            uint64_t r = splitmix64(&seed), idx = 0;
            if (sc->dist == PB_UNIFORM) {
                idx = ((r >> 32) * (uint64_t)n) >> 32;
            } else if (sc->dist == PB_ZIPF) {
                double u = (double)(r >> 11) * 0x1.0p-53;
                size_t lo = 0, hi = n - 1;            /* first k with cdf[k] > u */
                while (lo < hi) {
                    size_t mid = lo + (hi - lo) / 2;
                    if (cdf[mid] > u)
                        hi = mid;
                    else
                        lo = mid + 1;
                }
                idx = (uint64_t)lo * PB_SCATTER % n;
            }
            draws[t][k] = idx;
        }
    }
    free(cdf);
}

/* ------------------------------------------------------------------------ */
/* One timed run                                                             */
/* ------------------------------------------------------------------------ */

typedef struct pb_thread {
    pb_worker_t *w;
    const pb_impl_t *impl;
    enum pb_kind kind;
    const uint64_t *keys;
    size_t mask;                /* draws per thread - 1 */
    pthread_barrier_t *barrier;
    uint64_t ops, start_ns, end_ns;
} pb_thread_t;

static _Atomic int stop_flag;
static cpu_set_t cpus;            /* the CPUs this process may use */
static unsigned ncpus;
static int cpu_list[CPU_SETSIZE];

static void barrier_wait(pthread_barrier_t *b)
{
    int rc = pthread_barrier_wait(b);
    if (rc != 0 && rc != PTHREAD_BARRIER_SERIAL_THREAD)
        pb_die_errno("pthread_barrier_wait", rc);
}

static void *worker_main(void *arg)
{
    pb_thread_t *t = arg;
    const pb_impl_t *im = t->impl;
    pb_worker_t *w = t->w;
    if (im->thread_init != NULL)
        im->thread_init(w);
    barrier_wait(t->barrier);
    uint64_t ops = 0;
    size_t pos = 0;
    t->start_ns = pb_now_ns();
    /* Every worker makes at least one batch, however late it gets a CPU.
     * relaxed: the flag only says when to stop; the ops counted meanwhile
     * are read after pthread_join. */
    switch (t->kind) {
    case PB_PAIRS:
        do {
            im->pairs(w, t->keys + pos, PB_BATCH);
            pos = (pos + PB_BATCH) & t->mask;
            ops += PB_BATCH;
        } while (!atomic_load_explicit(&stop_flag, memory_order_relaxed));
        break;
    case PB_TASK:
        do {
            im->tasks(w, t->keys + pos, PB_BATCH);
            pos = (pos + PB_BATCH * PB_TASK_INPUTS) & t->mask;
            ops += PB_BATCH;
        } while (!atomic_load_explicit(&stop_flag, memory_order_relaxed));
        break;
    case PB_CHURN:
        do {
            im->churn(w, PB_BATCH);
            ops += PB_BATCH;
        } while (!atomic_load_explicit(&stop_flag, memory_order_relaxed));
        break;
    }
    t->end_ns = pb_now_ns();
    t->ops = ops;
    if (im->thread_exit != NULL)
        im->thread_exit(w);
    return NULL;
}

static void sleep_ms(unsigned ms)
{
    struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };
    int rc;
    while ((rc = clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts)) == EINTR)
        ;
    if (rc != 0)
        pb_die_errno("clock_nanosleep", rc);
}

/* Runs nthr workers of im for opt.ms; returns total ops and the seconds from
 * the first worker's start to the last worker's stop. */
static void timed_run(const pb_impl_t *im, void *table, enum pb_kind kind,
                      const uint64_t *const *keys, size_t ndraws, unsigned nthr,
                      uint64_t *ops, double *seconds)
{
    pb_worker_t *w = aligned_alloc(64, nthr * sizeof *w);
    if (w == NULL)
        pb_die("out of memory (workers)");
    memset(w, 0, nthr * sizeof *w);
    pb_thread_t th[PB_MAX_THREADS];
    pthread_t tid[PB_MAX_THREADS];
    pthread_barrier_t barrier;
    int rc;
    if ((rc = pthread_barrier_init(&barrier, NULL, nthr + 1)) != 0)
        pb_die_errno("pthread_barrier_init", rc);
    atomic_store_explicit(&stop_flag, 0, memory_order_relaxed);

    for (unsigned i = 0; i < nthr; i++) {
        w[i].table = table;
        w[i].id = i;
        th[i] = (pb_thread_t){ .w = &w[i], .impl = im, .kind = kind,
                               .keys = keys != NULL ? keys[i] : NULL,
                               .mask = ndraws - 1, .barrier = &barrier };
        pthread_attr_t attr;
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpu_list[i % ncpus], &one);
        if ((rc = pthread_attr_init(&attr)) != 0)
            pb_die_errno("pthread_attr_init", rc);
        if ((rc = pthread_attr_setaffinity_np(&attr, sizeof one, &one)) != 0)
            pb_die_errno("pthread_attr_setaffinity_np", rc);
        if ((rc = pthread_create(&tid[i], &attr, worker_main, &th[i])) != 0)
            pb_die_errno("pthread_create", rc);
        if ((rc = pthread_attr_destroy(&attr)) != 0)
            pb_die_errno("pthread_attr_destroy", rc);
    }
    barrier_wait(&barrier);
    sleep_ms(opt.ms);
    atomic_store_explicit(&stop_flag, 1, memory_order_relaxed);
    uint64_t total = 0, first = UINT64_MAX, last = 0;
    for (unsigned i = 0; i < nthr; i++) {
        if ((rc = pthread_join(tid[i], NULL)) != 0)
            pb_die_errno("pthread_join", rc);
        total += th[i].ops;
        if (th[i].start_ns < first)
            first = th[i].start_ns;
        if (th[i].end_ns > last)
            last = th[i].end_ns;
    }
    if ((rc = pthread_barrier_destroy(&barrier)) != 0)
        pb_die_errno("pthread_barrier_destroy", rc);
    free(w);
    if (im->settle != NULL)
        im->settle(table);
    if (last <= first)
        pb_die("%s: a run of %u threads took no time (clock?)", im->name, nthr);
    *ops = total;
    *seconds = (double)(last - first) * 1e-9;
}

/* ------------------------------------------------------------------------ */
/* The whole run                                                             */
/* ------------------------------------------------------------------------ */

typedef struct pb_round {
    uint64_t ops;
    double seconds, mops;
} pb_round_t;

static int cmp_round(const void *a, const void *b)
{
    double x = ((const pb_round_t *)a)->mops, y = ((const pb_round_t *)b)->mops;
    return (x > y) - (x < y);
}

static void init_cpus(void)
{
    CPU_ZERO(&cpus);
    if (sched_getaffinity(0, sizeof cpus, &cpus) != 0)
        pb_die_errno("sched_getaffinity", errno);
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &cpus))
            cpu_list[ncpus++] = c;
    if (ncpus == 0)
        pb_die("no CPU in this process's affinity mask");
}

/* Runs every cell of scenario s, fills in res. */
static void run_scenario(const pb_results_t *res, unsigned si, unsigned s, unsigned *cell_k,
                         unsigned cells)
{
    const pb_scenario_t *sc = &scenarios[s];
    size_t n = opt.quick ? sc->quick_entries : sc->entries;
    size_t nd = draws_per_thread();
    unsigned maxthr = 0;
    for (unsigned t = 0; t < opt.nthreads; t++)
        if (opt.threads[t] > maxthr)
            maxthr = opt.threads[t];

    /* Draws (entry indexes), shared by every implementation. */
    uint64_t **draws = NULL;
    if (sc->dist != PB_NODRAW) {
        pb_progress("%s: drawing %zu keys for each of %u threads", sc->name, nd, maxthr);
        draws = pb_calloc(maxthr, sizeof *draws);
        for (unsigned t = 0; t < maxthr; t++)
            draws[t] = pb_malloc(nd * sizeof **draws);
        make_draws(sc, n, draws, maxthr, nd, s);
    }

    /* Tables, and each implementation's keys for the draws. */
    void *tables[NIMPL] = { 0 };
    uint64_t **keys[NIMPL] = { 0 };
    for (unsigned i = 0; i < NIMPL; i++) {
        if (!opt.impl_on[i] || !applies(impls[i], sc))
            continue;
        pb_progress("%s: making the %s table of %zu entries", sc->name, impls[i]->name, n);
        tables[i] = impls[i]->create(n, NULL);
        if (draws == NULL)
            continue;
        if (impls[i]->key == NULL) {
            keys[i] = draws;
            continue;
        }
        keys[i] = pb_calloc(maxthr, sizeof *keys[i]);
        for (unsigned t = 0; t < maxthr; t++) {
            keys[i][t] = pb_malloc(nd * sizeof **keys[i]);
            for (size_t k = 0; k < nd; k++)
                keys[i][t][k] = impls[i]->key(tables[i], (size_t)draws[t][k]);
        }
    }

    /* One unrecorded run of each first: caches, TLBs, the allocator and the
     * libraries' lazy set-up (call_rcu threads, per-thread magazines). */
    pb_progress("%s: a warm-up run of each implementation", sc->name);
    for (unsigned i = 0; i < NIMPL; i++) {
        uint64_t ops;
        double seconds;
        if (tables[i] != NULL)
            timed_run(impls[i], tables[i], sc->kind, (const uint64_t *const *)keys[i], nd,
                      opt.threads[0], &ops, &seconds);
    }

    pb_round_t *rounds = pb_calloc((size_t)NIMPL * opt.rounds, sizeof *rounds);
    for (unsigned t = 0; t < opt.nthreads; t++) {
        unsigned nthr = opt.threads[t];
        ++*cell_k;
        for (unsigned r = 0; r < opt.rounds; r++) {
            pb_progress("cell %u of %u: %s, %u thread%s, round %u of %u", *cell_k, cells,
                     sc->name, nthr, nthr == 1 ? "" : "s", r + 1, opt.rounds);
            for (unsigned i = 0; i < NIMPL; i++) {
                if (tables[i] == NULL)
                    continue;
                pb_round_t *rd = &rounds[i * opt.rounds + r];
                timed_run(impls[i], tables[i], sc->kind, (const uint64_t *const *)keys[i],
                          nd, nthr, &rd->ops, &rd->seconds);
                rd->mops = (double)rd->ops / rd->seconds * 1e-6;
            }
        }
        for (unsigned i = 0; i < NIMPL; i++) {
            if (tables[i] == NULL)
                continue;
            pb_round_t *rd = &rounds[i * opt.rounds];
            qsort(rd, opt.rounds, sizeof *rd, cmp_round);
            const pb_round_t *m = &rd[(opt.rounds - 1) / 2];
            *pb_cell(res, si, i, t) = (pb_result_t){
                .run = 1, .ops = m->ops, .seconds = m->seconds, .mops = m->mops,
                .ns_per_op = (double)nthr * m->seconds * 1e9 / (double)m->ops };
        }
    }
    free(rounds);

    pb_progress("%s: destroying the tables", sc->name);
    for (unsigned i = 0; i < NIMPL; i++) {
        if (tables[i] == NULL)
            continue;
        impls[i]->destroy(tables[i]);
        if (keys[i] != NULL && keys[i] != draws) {
            for (unsigned t = 0; t < maxthr; t++)
                free(keys[i][t]);
            free(keys[i]);
        }
    }
    if (draws != NULL) {
        for (unsigned t = 0; t < maxthr; t++)
            free(draws[t]);
        free(draws);
    }
    pb_progress_clear();
}

int main(int argc, char **argv)
{
    parse_options(argc, argv);
    progress_tty = isatty(STDERR_FILENO);
    init_cpus();
    uint64_t t0 = pb_now_ns();
    machine_t machine;
    machine_describe(&machine);

    /* The results: rows for the selected scenarios and implementations. */
    const char *scen_names[NSCEN], *scen_what[NSCEN], *impl_names[NIMPL];
    unsigned scen_index[NSCEN], nscen = 0;
    for (unsigned s = 0; s < NSCEN; s++)
        if (opt.scen_on[s]) {
            scen_names[nscen] = scenarios[s].name;
            scen_what[nscen] = scenarios[s].what;
            scen_index[nscen++] = s;
        }
    for (unsigned i = 0; i < NIMPL; i++)
        impl_names[i] = impls[i]->name;
    pb_results_t res = { .machine = &machine, .nscen = nscen, .nimpl = NIMPL,
                         .nthreads = opt.nthreads, .scen = scen_names, .scen_what = scen_what,
                         .impl = impl_names, .threads = opt.threads };
    res.cell = pb_calloc((size_t)nscen * NIMPL * opt.nthreads, sizeof *res.cell);

    machine_print(stdout, &machine, "machine: ");   /* stdout's errors: the final fflush */
    printf("pinbench: %u interleaved rounds of %u ms per cell, median round reported;"
           " %u CPUs; threads", opt.rounds, opt.ms, ncpus);
    for (unsigned t = 0; t < opt.nthreads; t++)
        printf("%s%u", t ? "," : " ", opt.threads[t]);
    printf("%s\n", opt.quick ? " (--quick: smaller tables, see --help)" : "");
    fflush(stdout);

    unsigned cells = nscen * opt.nthreads, cell_k = 0;
    for (unsigned si = 0; si < nscen; si++) {
        run_scenario(&res, si, scen_index[si], &cell_k, cells);
        pb_print_table(&res, si);
        fflush(stdout);
    }
    if (nscen > 0) {
        pb_print_ratios(&res);
        pb_print_old_ratios(&res);
    }
    if (opt.csv != NULL)
        pb_write_csv(&res, opt.csv);
    if (opt.plot != NULL)
        pb_plot(&res, opt.plot);
    if (opt.reclaim) {
        const pb_impl_t *compare[2];
        unsigned ncompare = 0;
        for (unsigned i = 0; i < NIMPL; i++)
            if (opt.impl_on[i] && (impls[i] == &pb_impl_mutex_dict || impls[i] == &pb_impl_urcu_lfht))
                compare[ncompare++] = impls[i];
        const pb_reclaim_lib_t *libs[2] = { &pb_reclaim_pinpool };
        unsigned nlibs = 1;
#ifdef PINBENCH_HAVE_OLD
        /* The older library's figures too, when one of its two is run. */
        for (unsigned i = 0; i < NIMPL; i++)
            if (opt.impl_on[i] && (impls[i] == &pb_impl_pinpool_old ||
                                   impls[i] == &pb_impl_pinpool_qsbr_old)) {
                libs[nlibs++] = &pb_reclaim_pinpool_old;
                break;
            }
#endif
        pb_reclaim_figures(opt.quick, libs, nlibs, compare, ncompare);
    }
    if (opt.check_csv)
        pb_check_csv(&res, opt.csv);
    free(res.cell);

    printf("\npinbench: total wall time %.1f s\n", (double)(pb_now_ns() - t0) * 1e-9);
    if (fflush(stdout) != 0)
        pb_die_errno("fflush(stdout)", errno);
    return 0;
}
