/*
 * mpibench -- a remote pin of libpinpool_mpi against what MPI itself gives
 * for the same bytes, between rank 0 (the client) and rank 1 (the home),
 * in one run, interleaved round by round; medians and their ratios
 * (docs/performance.md, "The MPI layer", says more).  Per reply size
 * (default 4 KiB to 4 MiB):
 *
 *   floor      a small MPI_Send request and an MPI_Recv reply of the size,
 *              on the application's own communicator; rank 1's main thread
 *              answers in a loop, always waiting in MPI: the best two-sided.
 *   get        MPI_Get from a window of rank 1 (MPI_Win_allocate; passive
 *              target, lock/get/unlock per op); rank 1 polls meanwhile
 *              (--get-home sleep: it sleeps instead), as Open MPI has no
 *              asynchronous progress.
 *   miss       pp_mpi_pin + pp_mpi_unpin of a ref homed on rank 1 that rank
 *              0 does not own: nothing is cached, every pin is a fetch.
 *   hit        the same of a ref rank 0 owns (a token imported) after its
 *              first pin: every pin a hit.
 *   local-pin  pp_pin + pp_unpin of an entry of rank 0's own pool.
 *
 * Each method runs --ms per size and round, in an order that rotates;
 * round 0 is a warm-up.  Each run checks the bytes of one op.  Then the
 * owners' traffic: rank 0 imports --refs tokens and releases every ref;
 * reported: weight-return messages per ref, and that the home freed them.
 * No timing is asserted: exit 0 means every check passed (bytes, and the
 * layer's counters against the ops made).  A watchdog ends a run that
 * stops moving after --timeout seconds, saying what it was doing.
 *
 *   mpiexec --allow-run-as-root --oversubscribe -np 2 mpibench
 *           [--rounds R] [--ms MS] [--sizes LIST] [--refs N]
 *           [--get-home poll|sleep] [--timeout S] [--quick]
 */
#define _GNU_SOURCE
#include <pinpool.h>
#include <pinpool_mpi.h>

#include "machine.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include <mpi.h>

enum { FLOOR, GET, MISS, HIT, LOCAL, NMETH };
static const char *const meth_name[NMETH] = { "floor", "get", "miss", "hit", "local-pin" };

enum { TAG_REQ = 1, TAG_REPLY, TAG_DONE, TAG_SETUP };

#define MAX_SIZES 16
#define MAX_ROUNDS 64
#define MIN_OPS 3

static size_t sizes[MAX_SIZES] = { 4u << 10, 16u << 10, 64u << 10, 256u << 10, 1u << 20,
                                   4u << 20 };
static int n_sizes = 6, n_rounds = 7, run_ms = 100, timeout_s = 30, get_home_polls = 1;
static long n_refs = 4096;

static MPI_Comm comm;                  /* the application's: a dup of MPI_COMM_WORLD */
static int rank;

/* ------------------------------------------------------------------------ */
/* Failures and the watchdog                                                */
/* ------------------------------------------------------------------------ */

__attribute__((format(printf, 1, 2))) static _Noreturn void die(const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "mpibench: rank %d: %s\n", rank, line);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    _exit(1);
}

static void check_mpi(int rc, const char *call)
{
    if (rc != MPI_SUCCESS) {
        char s[MPI_MAX_ERROR_STRING];
        int len = 0;
        if (MPI_Error_string(rc, s, &len) != MPI_SUCCESS)
            snprintf(s, sizeof s, "error %d", rc);
        die("%s: %s", call, s);
    }
}

static void check_pp(int rc, const char *call)
{
    if (rc != 0)
        die("%s: %s (%s)", call, pp_strerror(rc), pp_err_name(rc));
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The watchdog: a thread that ends the job if the step armed last has not
 * been disarmed by its deadline (a passive-target MPI_Get whose target
 * makes no progress would otherwise hang the run for good). */
static pthread_mutex_t watch_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t watch_deadline;        /* 0: disarmed */
static char watch_what[160];

__attribute__((format(printf, 1, 2))) static void arm(const char *fmt, ...)
{
    pthread_mutex_lock(&watch_mu);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(watch_what, sizeof watch_what, fmt, ap);
    va_end(ap);
    watch_deadline = now_ns() + (uint64_t)timeout_s * 1000000000ull;
    pthread_mutex_unlock(&watch_mu);
}

static void disarm(void)
{
    pthread_mutex_lock(&watch_mu);
    watch_deadline = 0;
    pthread_mutex_unlock(&watch_mu);
}

/* Every thread's stack of this process on stderr, from gdb if it is
 * installed (what a hang report needs); nothing otherwise. */
static void backtrace_all(void)
{
    fflush(stderr);
    if (system("command -v gdb >/dev/null 2>&1") != 0)
        return;
    (void)prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "gdb -p %ld -batch -ex 'thread apply all bt' 2>/dev/null"
             " | grep -E '^(#|Thread)' | sed 's/^/mpibench: rank %d: /' >&2", (long)getpid(),
             rank);
    if (system(cmd) != 0)
        fprintf(stderr, "mpibench: rank %d: gdb gave no backtrace\n", rank);
}

static void *watchdog(void *arg)
{
    (void)arg;
    for (;;) {
        struct timespec ts = { 0, 100000000L };
        nanosleep(&ts, NULL);
        pthread_mutex_lock(&watch_mu);
        int late = watch_deadline != 0 && now_ns() > watch_deadline;
        char what[sizeof watch_what];
        memcpy(what, watch_what, sizeof what);
        pthread_mutex_unlock(&watch_mu);
        if (late) {
            fprintf(stderr, "mpibench: rank %d: %s: not finished after %d s (--timeout):"
                            " no progress, ending the job\n", rank, what, timeout_s);
            backtrace_all();
            /* The other rank's watchdog fires within about a second of
             * this one (the steps' deadlines differ by that much): let it
             * print its own before the job ends. */
            struct timespec pause = { 3, 0 };
            nanosleep(&pause, NULL);
            MPI_Abort(MPI_COMM_WORLD, 3);
            _exit(3);
        }
    }
    return NULL;
}

/* Waits for r with MPI_Test and a sleep that doubles from 1 us to 1 ms:
 * the waiting rank's main thread takes little CPU from the threads being
 * measured (a blocking MPI_Wait polls without a pause). */
static void sleep_wait(MPI_Request *r)
{
    long us = 1;
    for (;;) {
        int done = 0;
        check_mpi(MPI_Test(r, &done, MPI_STATUS_IGNORE), "MPI_Test");
        if (done)
            return;
        struct timespec ts = { 0, us * 1000L };
        nanosleep(&ts, NULL);
        if (us < 1000)
            us *= 2;
    }
}

static void send_done(void)
{
    int zero = 0;
    check_mpi(MPI_Send(&zero, 1, MPI_INT, 1, TAG_DONE, comm), "MPI_Send (done)");
}

static void wait_done(void)
{
    int v;
    MPI_Request r;
    check_mpi(MPI_Irecv(&v, 1, MPI_INT, 0, TAG_DONE, comm, &r), "MPI_Irecv (done)");
    sleep_wait(&r);
}

/* ------------------------------------------------------------------------ */
/* The bytes                                                                */
/* ------------------------------------------------------------------------ */

static uint64_t word(uint64_t seed, size_t i)
{
    uint64_t z = seed * 0x9E3779B97F4A7C15u + (uint64_t)i + 1;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    return z ^ (z >> 31);
}

static void fill(void *p, size_t n, uint64_t seed)
{
    unsigned char *b = p;
    for (size_t i = 0; i * 8 < n; i++) {
        uint64_t w = word(seed, i);
        memcpy(b + i * 8, &w, n - i * 8 < 8 ? n - i * 8 : 8);
    }
}

static void check_bytes(const void *p, size_t n, uint64_t seed, const char *what)
{
    const unsigned char *b = p;
    for (size_t i = 0; i * 8 < n; i++) {
        uint64_t w = word(seed, i);
        if (memcmp(b + i * 8, &w, n - i * 8 < 8 ? n - i * 8 : 8) != 0)
            die("%s of %zu bytes: wrong data at byte %zu or after it (8-byte word %zu)", what,
                n, i * 8, i);
    }
}

/* Seeds of the bytes: the floor's reply buffer and the window (one
 * pattern, a prefix of it per size), the miss entries, the hit entries,
 * the local ones. */
#define SEED_WIRE 7u
#define SEED_MISS(s) (1000u + (unsigned)(s))
#define SEED_HIT(s) (2000u + (unsigned)(s))
#define SEED_LOCAL(s) (3000u + (unsigned)(s))

/* ------------------------------------------------------------------------ */
/* The state of a run                                                       */
/* ------------------------------------------------------------------------ */

typedef struct setup {                 /* rank 1 -> rank 0 */
    pp_gref_t miss[MAX_SIZES];         /* values: rank 0 owns none of them */
    pp_mpi_token_t hit[MAX_SIZES];     /* tokens: rank 0 imports them */
} setup_t;

static pp_pool_t *pool;
static pp_mpi_t *layer;
static MPI_Win win = MPI_WIN_NULL;   /* MPI_WIN_NULL: no get (no window could be made) */
static char win_note[256];             /* what the window is, or why there is none */
static unsigned char *wire;            /* the floor's and the get's buffer, max size */
static setup_t setup;
static pp_gref_t hit_ref[MAX_SIZES];   /* rank 0: imported */
static pp_ref_t local_ref[MAX_SIZES];  /* rank 0 */
static size_t max_size;

/* Rank 0's count of its own ops, against the layer's counters. */
static uint64_t miss_ops[MAX_SIZES], hit_ops;

/* ------------------------------------------------------------------------ */
/* One op of each method (rank 0), and rank 1's side of a run              */
/* ------------------------------------------------------------------------ */

static void op_floor(size_t n)
{
    int want = 1;
    check_mpi(MPI_Send(&want, 1, MPI_INT, 1, TAG_REQ, comm), "MPI_Send (request)");
    check_mpi(MPI_Recv(wire, (int)n, MPI_BYTE, 1, TAG_REPLY, comm, MPI_STATUS_IGNORE),
              "MPI_Recv (reply)");
}

static void op_get(size_t n)
{
    check_mpi(MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, win), "MPI_Win_lock");
    check_mpi(MPI_Get(wire, (int)n, MPI_BYTE, 1, 0, (int)n, MPI_BYTE, win), "MPI_Get");
    check_mpi(MPI_Win_unlock(1, win), "MPI_Win_unlock");
}

/* A pin and an unpin; check: the bytes are checked in between. */
static void op_miss(int s, int check)
{
    void *d;
    uint32_t got = 0;
    check_pp(pp_mpi_pin(layer, setup.miss[s], 0, &d, &got), "pp_mpi_pin (remote miss)");
    if (check) {
        if (got != 1)
            die("pp_mpi_pin (remote miss): version %" PRIu32 ", the home has 1", got);
        check_bytes(d, sizes[s], SEED_MISS(s), "a remote miss's copy");
    }
    check_pp(pp_mpi_unpin(layer, setup.miss[s], 0, d), "pp_mpi_unpin (remote miss)");
    miss_ops[s]++;
}

static void op_hit(int s, int check)
{
    void *d;
    check_pp(pp_mpi_pin(layer, hit_ref[s], 0, &d, NULL), "pp_mpi_pin (cache hit)");
    if (check)
        check_bytes(d, sizes[s], SEED_HIT(s), "a cached copy");
    check_pp(pp_mpi_unpin(layer, hit_ref[s], 0, d), "pp_mpi_unpin (cache hit)");
    hit_ops++;
}

static void op_local(int s, int check)
{
    void *d;
    check_pp(pp_pin(pool, local_ref[s], 0, &d), "pp_pin (local)");
    if (check)
        check_bytes(d, sizes[s], SEED_LOCAL(s), "a local entry");
    check_pp(pp_unpin(pool, local_ref[s]), "pp_unpin (local)");
}

/* Rank 0: one run of method k at size s: an untimed checked op, then ops
 * for run_ms (at least MIN_OPS).  Returns ns per op. */
static double run(int k, int s)
{
    size_t n = sizes[s];
    switch (k) {                       /* the checked op */
    case FLOOR:
    case GET:
        memset(wire, 0, n);
        if (k == FLOOR)
            op_floor(n);
        else
            op_get(n);
        check_bytes(wire, n, SEED_WIRE, k == FLOOR ? "a two-sided reply" : "an MPI_Get");
        break;
    case MISS:
        op_miss(s, 1);
        break;
    case HIT:
        op_hit(s, 1);
        break;
    case LOCAL:
        op_local(s, 1);
        break;
    }
    /* Fast ops read the clock every 256. */
    uint64_t mask = k == HIT || k == LOCAL ? 255 : 0;
    uint64_t dur = (uint64_t)run_ms * 1000000ull, ops = 0;
    uint64_t t0 = now_ns(), t = t0;
    do {
        switch (k) {
        case FLOOR:
            op_floor(n);
            break;
        case GET:
            op_get(n);
            break;
        case MISS:
            op_miss(s, 0);
            break;
        case HIT:
            op_hit(s, 0);
            break;
        case LOCAL:
            op_local(s, 0);
            break;
        }
        ops++;
        if ((ops & mask) == 0)
            t = now_ns();
    } while (t - t0 < dur || ops < MIN_OPS);
    t = now_ns();
    if (k == FLOOR) {
        int stop = 0;
        check_mpi(MPI_Send(&stop, 1, MPI_INT, 1, TAG_REQ, comm), "MPI_Send (stop)");
    } else {
        send_done();
    }
    return (double)(t - t0) / (double)ops;
}

/* Rank 1's side of the same run. */
static void serve(int k, int s)
{
    size_t n = sizes[s];
    if (k == FLOOR) {
        for (;;) {
            int want;
            check_mpi(MPI_Recv(&want, 1, MPI_INT, 0, TAG_REQ, comm, MPI_STATUS_IGNORE),
                      "MPI_Recv (request)");
            if (want == 0)
                return;
            check_mpi(MPI_Send(wire, (int)n, MPI_BYTE, 0, TAG_REPLY, comm),
                      "MPI_Send (reply)");
        }
    }
    if (k == GET && get_home_polls) {
        /* In MPI all along, as the floor's home is: passive-target
         * progress needs the target to enter MPI here. */
        int flag = 0;
        while (!flag)
            check_mpi(MPI_Iprobe(0, TAG_DONE, comm, &flag, MPI_STATUS_IGNORE), "MPI_Iprobe");
        int v;
        check_mpi(MPI_Recv(&v, 1, MPI_INT, 0, TAG_DONE, comm, MPI_STATUS_IGNORE),
                  "MPI_Recv (done)");
        return;
    }
    wait_done();                       /* the layer's progress threads serve misses */
}

/* ------------------------------------------------------------------------ */
/* Set-up and the owners' phase                                             */
/* ------------------------------------------------------------------------ */

static void *alloc_filled(size_t n, uint64_t seed)
{
    void *p = malloc(n);
    if (p == NULL)
        die("malloc(%zu): %s", n, strerror(errno));
    fill(p, n, seed);
    return p;
}

/* The get's window, on every rank (collective); if Open MPI cannot make
 * one (--mca osc pt2pt refuses MPI_THREAD_MULTIPLE, osc rdma needs a BTL
 * with RDMA), the run goes on without the get and says why. */
static void make_window(void)
{
    void *base = NULL;
    int rc = MPI_Win_allocate(rank == 1 ? (MPI_Aint)max_size : 0, 1, MPI_INFO_NULL, comm,
                              &base, &win);
    int ok = rc == MPI_SUCCESS, all = 0;
    check_mpi(MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm), "MPI_Allreduce");
    if (!all) {
        char e[MPI_MAX_ERROR_STRING] = "";
        int len = 0;
        if (rc != MPI_SUCCESS && MPI_Error_string(rc, e, &len) != MPI_SUCCESS)
            snprintf(e, sizeof e, "error %d", rc);
        snprintf(win_note, sizeof win_note, "none: MPI_Win_allocate failed (%s): no get in"
                 " this run", rc != MPI_SUCCESS ? e : "on the other rank");
        if (ok)
            check_mpi(MPI_Win_free(&win), "MPI_Win_free");
        win = MPI_WIN_NULL;
        return;
    }
    check_mpi(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN), "MPI_Win_set_errhandler");
    /* Which component made it: Open MPI 4.1's osc sm (load and store in
     * shared memory) puts alloc_shared_noncontig in the window's info,
     * osc rdma (gets through the BTL) does not. */
    MPI_Info info;
    int nkeys = 0, sm = 0;
    size_t n = 0;
    n += (size_t)snprintf(win_note + n, sizeof win_note - n, "info");
    if (MPI_Win_get_info(win, &info) == MPI_SUCCESS) {
        MPI_Info_get_nkeys(info, &nkeys);
        for (int i = 0; i < nkeys && n < sizeof win_note; i++) {
            char key[MPI_MAX_INFO_KEY + 1] = "", val[64] = "";
            int flag = 0;
            MPI_Info_get_nthkey(info, i, key);
            MPI_Info_get(info, key, (int)sizeof val - 1, val, &flag);
            sm |= strcmp(key, "alloc_shared_noncontig") == 0;
            n += (size_t)snprintf(win_note + n, sizeof win_note - n, " %s=%s", key, val);
        }
        MPI_Info_free(&info);
    }
    if (n < sizeof win_note)
        snprintf(win_note + n, sizeof win_note - n, "%s: %s", nkeys ? "" : " (none)",
                 sm ? "osc sm, load and store in shared memory"
                    : "not osc sm (Open MPI 4.1 over vader: osc rdma, gets through the BTL)");
    if (rank == 1) {
        check_mpi(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 1, 0, win), "MPI_Win_lock (home)");
        fill(base, max_size, SEED_WIRE);
        check_mpi(MPI_Win_unlock(1, win), "MPI_Win_unlock (home)");
    }
}

static void set_up(void)
{
    for (int s = 0; s < n_sizes; s++)
        if (sizes[s] > max_size)
            max_size = sizes[s];
    wire = malloc(max_size);
    if (wire == NULL)
        die("malloc(%zu): %s", max_size, strerror(errno));
    make_window();
    if (rank == 1) {
        fill(wire, max_size, SEED_WIRE);
        for (int s = 0; s < n_sizes; s++) {
            check_pp(pp_mpi_put(layer, alloc_filled(sizes[s], SEED_MISS(s)), sizes[s], NULL, 0,
                                &setup.miss[s]), "pp_mpi_put");
            pp_gref_t g;
            check_pp(pp_mpi_put(layer, alloc_filled(sizes[s], SEED_HIT(s)), sizes[s], NULL, 0,
                                &g), "pp_mpi_put");
            check_pp(pp_mpi_export(layer, g, &setup.hit[s]), "pp_mpi_export");
            /* The home keeps its own owner of both until the end. */
        }
        check_mpi(MPI_Send(&setup, (int)sizeof setup, MPI_BYTE, 0, TAG_SETUP, comm),
                  "MPI_Send (setup)");
    } else {
        check_mpi(MPI_Recv(&setup, (int)sizeof setup, MPI_BYTE, 1, TAG_SETUP, comm,
                           MPI_STATUS_IGNORE), "MPI_Recv (setup)");
        for (int s = 0; s < n_sizes; s++) {
            check_pp(pp_mpi_import(layer, &setup.hit[s], &hit_ref[s]), "pp_mpi_import");
            check_pp(pp_put(pool, alloc_filled(sizes[s], SEED_LOCAL(s)), sizes[s], NULL, 0,
                            &local_ref[s]), "pp_put (local)");
        }
    }
    check_mpi(MPI_Barrier(comm), "MPI_Barrier");
}

static void tear_down(void)
{
    if (rank == 0) {
        for (int s = 0; s < n_sizes; s++) {
            check_pp(pp_mpi_release(layer, hit_ref[s]), "pp_mpi_release");
            check_pp(pp_release(pool, local_ref[s]), "pp_release (local)");
        }
    } else {
        for (int s = 0; s < n_sizes; s++) {
            check_pp(pp_mpi_release(layer, setup.miss[s]), "pp_mpi_release (home)");
            check_pp(pp_mpi_release(layer, setup.hit[s].gref), "pp_mpi_release (home)");
        }
    }
    if (win != MPI_WIN_NULL)
        check_mpi(MPI_Win_free(&win), "MPI_Win_free");
    free(wire);
}

typedef struct owners_result {         /* rank 1 -> rank 0 */
    uint64_t freed, refs;              /* of the home's entries */
    pp_mpi_stats_t home;
} owners_result_t;

/* Rank 1 puts n_refs entries, exports a token of each and sends them;
 * rank 0 imports them all, then releases them all.  Rank 0's weight
 * returns are counted; rank 1 checks every entry dies once its weight is
 * back (it drops its own owner right after exporting). */
static void owners_phase(pp_mpi_stats_t *before, pp_mpi_stats_t *after, owners_result_t *res)
{
    size_t n = (size_t)n_refs;
    pp_mpi_token_t *tok = calloc(n, sizeof *tok);
    if (tok == NULL)
        die("calloc(%zu tokens): %s", n, strerror(errno));
    arm("the owners' phase (%zu refs)", n);
    if (rank == 1) {
        pp_gref_t *g = calloc(n, sizeof *g);
        if (g == NULL)
            die("calloc(%zu grefs): %s", n, strerror(errno));
        for (size_t i = 0; i < n; i++) {
            check_pp(pp_mpi_put(layer, alloc_filled(64, i), 64, NULL, 0, &g[i]), "pp_mpi_put");
            check_pp(pp_mpi_export(layer, g[i], &tok[i]), "pp_mpi_export");
            check_pp(pp_mpi_release(layer, g[i]), "pp_mpi_release (home)");
        }
        check_mpi(MPI_Send(tok, (int)(n * sizeof *tok), MPI_BYTE, 0, TAG_SETUP, comm),
                  "MPI_Send (tokens)");
        wait_done();
        /* Every entry dies when its weight is home: a pin says PP_ESTALE. */
        uint64_t freed = 0, t0 = now_ns();
        while (freed < n && now_ns() - t0 < (uint64_t)timeout_s * 500000000ull) {
            freed = 0;
            for (size_t i = 0; i < n; i++) {
                void *d;
                int rc = pp_mpi_pin(layer, g[i], 0, &d, NULL);
                if (rc == 0)
                    check_pp(pp_mpi_unpin(layer, g[i], 0, d), "pp_mpi_unpin (home)");
                else if (rc == PP_ESTALE)
                    freed++;
                else
                    check_pp(rc, "pp_mpi_pin (home)");
            }
            if (freed < n) {
                struct timespec ts = { 0, 1000000L };
                nanosleep(&ts, NULL);
            }
        }
        *res = (owners_result_t){ .freed = freed, .refs = n };
        check_pp(pp_mpi_stats(layer, &res->home), "pp_mpi_stats");
        check_mpi(MPI_Send(res, (int)sizeof *res, MPI_BYTE, 0, TAG_SETUP, comm),
                  "MPI_Send (owners result)");
        free(g);
    } else {
        pp_gref_t *g = calloc(n, sizeof *g);
        if (g == NULL)
            die("calloc(%zu grefs): %s", n, strerror(errno));
        check_mpi(MPI_Recv(tok, (int)(n * sizeof *tok), MPI_BYTE, 1, TAG_SETUP, comm,
                           MPI_STATUS_IGNORE), "MPI_Recv (tokens)");
        check_pp(pp_mpi_stats(layer, before), "pp_mpi_stats");
        for (size_t i = 0; i < n; i++)
            check_pp(pp_mpi_import(layer, &tok[i], &g[i]), "pp_mpi_import");
        for (size_t i = 0; i < n; i++)
            check_pp(pp_mpi_release(layer, g[i]), "pp_mpi_release");
        /* The returns leave in batches: wait until every record is sent. */
        do {
            struct timespec ts = { 0, 100000L };
            nanosleep(&ts, NULL);
            check_pp(pp_mpi_stats(layer, after), "pp_mpi_stats");
        } while (after->weight_records - before->weight_records < n);
        send_done();
        check_mpi(MPI_Recv(res, (int)sizeof *res, MPI_BYTE, 1, TAG_SETUP, comm,
                           MPI_STATUS_IGNORE), "MPI_Recv (owners result)");
        free(g);
    }
    disarm();
    free(tok);
}

/* ------------------------------------------------------------------------ */
/* Report                                                                   */
/* ------------------------------------------------------------------------ */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void size_text(char *dst, size_t len, size_t n)
{
    if (n >= (1u << 20) && n % (1u << 20) == 0)
        snprintf(dst, len, "%zu MiB", n >> 20);
    else if (n >= 1024 && n % 1024 == 0)
        snprintf(dst, len, "%zu KiB", n >> 10);
    else
        snprintf(dst, len, "%zu B", n);
}

/* What MPI says of itself, and where the ranks are. */
static void print_mpi(void)
{
    char lib[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    int len = 0;
    if (MPI_Get_library_version(lib, &len) == MPI_SUCCESS) {
        lib[len > 0 && len < (int)sizeof lib ? len : 0] = '\0';
        char *nl = strchr(lib, '\n');
        if (nl != NULL)
            *nl = '\0';
    }
    printf("mpi: library: %s\n", lib[0] ? lib : "unknown");
    /* What the run asked for: mpiexec's --mca X Y reaches each rank as
     * OMPI_MCA_X=Y.  Unset, Open MPI chooses: on one host with no network
     * adapter UCX would take, pml ob1 over the vader BTL (shared memory).
     * Which one-sided component made the get's window is printed after it
     * is made (make_window). */
    static const char *const params[] = { "btl", "pml", "mtl", "osc" };
    printf("mpi: mca:");
    for (size_t i = 0; i < sizeof params / sizeof params[0]; i++) {
        char var[32];
        snprintf(var, sizeof var, "OMPI_MCA_%s", params[i]);
        const char *v = getenv(var);
        printf("%s %s %s", i ? "," : "", params[i], v != NULL && *v != '\0' ? v : "(default)");
    }
    const char *btl = getenv("OMPI_MCA_btl");
    int tcp = btl != NULL && strstr(btl, "tcp") != NULL && strstr(btl, "vader") == NULL &&
              strstr(btl, "sm") == NULL;
    printf("\nmpi: two-sided transport: %s\n",
           btl == NULL || *btl == '\0' ? "Open MPI's default (vader, shared memory, between"
                                         " ranks of one host)"
           : tcp ? "TCP (OMPI_MCA_btl has tcp and no shared-memory BTL)"
                 : "as OMPI_MCA_btl says");
}

static void print_hosts(void)
{
    char name[MPI_MAX_PROCESSOR_NAME + 1] = "", other[MPI_MAX_PROCESSOR_NAME + 1] = "";
    int len = 0;
    check_mpi(MPI_Get_processor_name(name, &len), "MPI_Get_processor_name");
    name[len > 0 && len <= MPI_MAX_PROCESSOR_NAME ? len : 0] = '\0';
    if (rank == 1) {
        check_mpi(MPI_Send(name, (int)sizeof name, MPI_CHAR, 0, TAG_SETUP, comm),
                  "MPI_Send (host)");
        return;
    }
    check_mpi(MPI_Recv(other, (int)sizeof other, MPI_CHAR, 1, TAG_SETUP, comm,
                       MPI_STATUS_IGNORE), "MPI_Recv (host)");
    other[MPI_MAX_PROCESSOR_NAME] = '\0';
    printf("mpi: rank 0 (client) on %s, rank 1 (home) on %s%s\n", name, other,
           strcmp(name, other) == 0 ? " (one host)" : "");
}

static void print_load(void)
{
    char buf[128] = "";
    FILE *f = fopen("/proc/loadavg", "r");
    if (f != NULL) {
        if (fgets(buf, sizeof buf, f) == NULL)
            buf[0] = '\0';
        fclose(f);
    }
    buf[strcspn(buf, "\n")] = '\0';
    printf("mpibench: load average at the start (/proc/loadavg): %s\n",
           buf[0] ? buf : "unknown");
}

static _Noreturn void usage(void)
{
    fprintf(stderr,
            "usage: mpiexec -np 2 mpibench [--rounds R] [--ms MS] [--sizes LIST] [--refs N]\n"
            "                 [--get-home poll|sleep] [--timeout S] [--quick]\n"
            "  --rounds R    recorded rounds, after a warm-up one (default 7)\n"
            "  --ms MS       duration of one method's run per size and round (default 100)\n"
            "  --sizes LIST  reply sizes, e.g. 4k,64k,1m (default 4k,16k,64k,256k,1m,4m)\n"
            "  --refs N      refs imported and released in the owners' phase (default 4096)\n"
            "  --get-home H  what rank 1 does during MPI_Get: poll (MPI_Iprobe, default)\n"
            "                or sleep (MPI_Test and sleeps up to 1 ms)\n"
            "  --timeout S   end the job if one step takes longer (default 30)\n"
            "  --quick       a smoke run: 2 sizes (4k, 1m), 2 rounds of 10 ms, 512 refs\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
    exit(2);
}

static long number(const char *s, long lo, long hi)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi)
        usage();
    return v;
}

static void parse_sizes(const char *list)
{
    n_sizes = 0;
    for (const char *p = list; *p != '\0';) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(p, &end, 10);
        if (errno != 0 || end == p || n_sizes == MAX_SIZES)
            usage();
        if (*end == 'k' || *end == 'K')
            v <<= 10, end++;
        else if (*end == 'm' || *end == 'M')
            v <<= 20, end++;
        if (v == 0 || v > (1ull << 30) || (*end != ',' && *end != '\0'))
            usage();
        sizes[n_sizes++] = (size_t)v;
        p = *end == ',' ? end + 1 : end;
    }
    if (n_sizes == 0)
        usage();
}

static void parse_args(int argc, char **argv)
{
    const char *sizes_arg = NULL;
    int quick = 0, rounds_set = 0, ms_set = 0, refs_set = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int more = i + 1 < argc;
        if (strcmp(a, "--rounds") == 0 && more)
            n_rounds = (int)number(argv[++i], 1, MAX_ROUNDS), rounds_set = 1;
        else if (strcmp(a, "--ms") == 0 && more)
            run_ms = (int)number(argv[++i], 1, 60000), ms_set = 1;
        else if (strcmp(a, "--sizes") == 0 && more)
            sizes_arg = argv[++i];
        else if (strcmp(a, "--refs") == 0 && more)
            n_refs = number(argv[++i], 1, 1L << 22), refs_set = 1;
        else if (strcmp(a, "--timeout") == 0 && more)
            timeout_s = (int)number(argv[++i], 1, 3600);
        else if (strcmp(a, "--get-home") == 0 && more) {
            const char *h = argv[++i];
            if (strcmp(h, "poll") == 0)
                get_home_polls = 1;
            else if (strcmp(h, "sleep") == 0)
                get_home_polls = 0;
            else
                usage();
        } else if (strcmp(a, "--quick") == 0)
            quick = 1;
        else
            usage();
    }
    if (quick) {                       /* a CI smoke run: a few seconds */
        n_sizes = 2, sizes[0] = 4u << 10, sizes[1] = 1u << 20;
        if (!rounds_set)
            n_rounds = 2;
        if (!ms_set)
            run_ms = 10;
        if (!refs_set)
            n_refs = 512;
    }
    if (sizes_arg != NULL)
        parse_sizes(sizes_arg);
}

/* Rank 0: the table, the ratios, the weight figures and the counters'
 * checks.  Returns nonzero if a check failed. */
static int report(double ns[NMETH][MAX_SIZES][MAX_ROUNDS], const pp_mpi_stats_t *st1p,
                  const pp_mpi_stats_t *home1p, const pp_mpi_stats_t *wbp,
                  const pp_mpi_stats_t *wap, const owners_result_t *ownp)
{
    pp_mpi_stats_t st1 = *st1p, home1 = *home1p, wb = *wbp, wa = *wap;
    owners_result_t own = *ownp;
    int bad = 0;
    printf("\nmpibench: time per op, median of %d rounds (min - max): floor, get and miss"
           " in us per request and reply, hit and local-pin in ns per pin+unpin\n",
           n_rounds);
    printf("  %-8s %24s %24s %24s %22s %22s\n", "size", "floor us", "get us", "miss us",
           "hit ns", "local-pin ns");
    double med[NMETH][MAX_SIZES];
    for (int s = 0; s < n_sizes; s++) {
        char sz[32];
        size_text(sz, sizeof sz, sizes[s]);
        printf("  %-8s", sz);
        for (int k = 0; k < NMETH; k++) {
            if (k == GET && win == MPI_WIN_NULL) {
                med[k][s] = NAN;
                printf(" %24s", "-");
                continue;
            }
            double v[MAX_ROUNDS];
            memcpy(v, ns[k][s], sizeof v);
            qsort(v, (size_t)n_rounds, sizeof *v, cmp_double);
            int n = n_rounds;
            med[k][s] = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
            double scale = k == HIT || k == LOCAL ? 1.0 : 1e-3;
            char cell[64];
            snprintf(cell, sizeof cell, "%.*f (%.*f - %.*f)", k >= HIT ? 1 : 2,
                     med[k][s] * scale, k >= HIT ? 1 : 2, v[0] * scale, k >= HIT ? 1 : 2,
                     v[n - 1] * scale);
            printf(" %*s", k >= HIT ? 22 : 24, cell);
            if (!(v[0] > 0) || !isfinite(v[n - 1]))
                bad = 1;
        }
        printf("\n");
    }
    printf("\n");
    for (int s = 0; s < n_sizes; s++) {
        char sz[32];
        size_text(sz, sizeof sz, sizes[s]);
        char get[32] = "-";
        if (win != MPI_WIN_NULL)
            snprintf(get, sizeof get, "%.2f", med[GET][s] / med[FLOOR][s]);
        printf("ratio %s: miss/floor %.2f, get/floor %s, hit/local-pin %.2f"
               "  (floor %.2f GB/s, miss %.2f GB/s)\n", sz,
               med[MISS][s] / med[FLOOR][s], get, med[HIT][s] / med[LOCAL][s],
               (double)sizes[s] / med[FLOOR][s], (double)sizes[s] / med[MISS][s]);
    }

    uint64_t wmsg = wa.weight_messages - wb.weight_messages;
    uint64_t wrec = wa.weight_records - wb.weight_records;
    printf("\nweight: %ld refs imported, then released: %" PRIu64 " weight-return"
           " messages, %.4f per ref (%" PRIu64 " records); the home freed %" PRIu64
           " of its %" PRIu64 " entries, refused %" PRIu64 " returns\n",
           n_refs, wmsg, (double)wmsg / (double)n_refs, wrec, own.freed, own.refs,
           own.home.refused_returns);

    /* Sanity: the counters agree with the ops made. */
    uint64_t misses = 0, bytes = 0;
    for (int s = 0; s < n_sizes; s++) {
        misses += miss_ops[s] + 1;            /* + the first pin of the owned ref */
        bytes += (miss_ops[s] + 1) * sizes[s];
    }
    uint64_t hits = hit_ops - (uint64_t)n_sizes;
    printf("layer: rank 0 misses %" PRIu64 " (ops %" PRIu64 "), hits %" PRIu64 " (ops %"
           PRIu64 "), bytes fetched %" PRIu64 " (ops' bytes %" PRIu64 "); rank 1 served %"
           PRIu64 " requests, %" PRIu64 " bytes\n",
           st1.misses, misses, st1.hits, hits, st1.bytes_fetched, bytes,
           home1.requests_served, home1.bytes_served);
    if (st1.misses != misses || st1.hits != hits || st1.bytes_fetched != bytes ||
        home1.requests_served != misses || home1.bytes_served != bytes) {
        fprintf(stderr, "mpibench: the layer's counters do not match the ops made\n");
        bad = 1;
    }
    if (wrec != (uint64_t)n_refs || wmsg == 0 || wmsg > wrec || own.freed != own.refs ||
        own.home.refused_returns != 0 || wa.refused_imports != 0) {
        fprintf(stderr, "mpibench: the owners' phase is wrong: %" PRIu64 " records for %ld"
                        " refs, %" PRIu64 " messages, %" PRIu64 " of %" PRIu64 " freed, %"
                        PRIu64 " refused returns, %" PRIu64 " refused imports\n", wrec,
                n_refs, wmsg, own.freed, own.refs, own.home.refused_returns,
                wa.refused_imports);
        bad = 1;
    }
    if (bad)
        fprintf(stderr, "mpibench: FAILED a check (above)\n");
    fflush(stdout);
    return bad;
}

int main(int argc, char **argv)
{
    int provided = 0;
    if (MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
        fprintf(stderr, "mpibench: MPI_Init_thread failed\n");
        return 1;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int nranks = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);

    parse_args(argc, argv);
    if (nranks != 2) {
        if (rank == 0)
            fprintf(stderr, "mpibench: run it on 2 ranks (mpiexec -np 2), not %d\n", nranks);
        MPI_Finalize();
        return 2;
    }
    if (provided < MPI_THREAD_MULTIPLE)
        die("MPI_Init_thread gave thread level %d, not MPI_THREAD_MULTIPLE (%d): the"
            " benchmark calls MPI while the layer's progress thread does", provided,
            MPI_THREAD_MULTIPLE);
    check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &comm), "MPI_Comm_dup");
    /* Errors come back to check_mpi, which says which call failed. */
    check_mpi(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    pthread_t wd;
    if (pthread_create(&wd, NULL, watchdog, NULL) != 0)
        die("pthread_create (watchdog) failed");
    pthread_detach(wd);

    machine_t machine;
    if (rank == 0) {
        machine_describe(&machine);
        machine_print(stdout, &machine, "machine: ");
        print_mpi();
    }
    print_hosts();

    pp_options_t opt = PP_OPTIONS_INIT;
    check_pp(pp_pool_create(&opt, &pool), "pp_pool_create");
    check_pp(pp_mpi_create(comm, pool, &layer), "pp_mpi_create");
    arm("set-up");
    set_up();
    disarm();

    pp_mpi_stats_t st0;
    check_pp(pp_mpi_stats(layer, &st0), "pp_mpi_stats");
    if (rank == 0) {
        /* The first pin of each owned ref is its miss: the copy is cached. */
        arm("the first pins of the owned refs");
        for (int s = 0; s < n_sizes; s++)
            op_hit(s, 1);
        disarm();
        printf("mpi: MPI_Get's window: %s\n", win_note);
        print_load();
        printf("mpibench: rank 0 client, rank 1 home; %d rounds after a warm-up, %d ms per"
               " method, size and round; MPI_Get's home %s\n", n_rounds, run_ms,
               get_home_polls ? "polls (MPI_Iprobe)" : "sleeps (MPI_Test, sleeps to 1 ms)");
        fflush(stdout);
    }
    check_mpi(MPI_Barrier(comm), "MPI_Barrier");

    static double ns[NMETH][MAX_SIZES][MAX_ROUNDS];
    for (int r = -1; r < n_rounds; r++) {
        for (int s = 0; s < n_sizes; s++) {
            for (int j = 0; j < NMETH; j++) {
                int k = (j + r + 1 + s) % NMETH;   /* the order rotates */
                if (k == GET && win == MPI_WIN_NULL)
                    continue;
                arm("round %d, %s, %zu bytes", r + 1, meth_name[k], sizes[s]);
                if (rank == 0) {
                    double v = run(k, s);
                    if (r >= 0)
                        ns[k][s][r] = v;
                } else {
                    serve(k, s);
                }
                disarm();
            }
        }
        if (rank == 0 && r >= 0) {
            printf("  round %d done\n", r + 1);
            fflush(stdout);
        }
    }

    pp_mpi_stats_t st1;
    check_pp(pp_mpi_stats(layer, &st1), "pp_mpi_stats");
    pp_mpi_stats_t wb = { 0 }, wa = { 0 };
    owners_result_t own = { 0 };
    owners_phase(&wb, &wa, &own);

    /* The layer's counters against the ops rank 0 made. */
    pp_mpi_stats_t home1 = { 0 };
    if (rank == 1) {
        check_pp(pp_mpi_stats(layer, &home1), "pp_mpi_stats");
        check_mpi(MPI_Send(&home1, (int)sizeof home1, MPI_BYTE, 0, TAG_SETUP, comm),
                  "MPI_Send (stats)");
    } else {
        check_mpi(MPI_Recv(&home1, (int)sizeof home1, MPI_BYTE, 1, TAG_SETUP, comm,
                           MPI_STATUS_IGNORE), "MPI_Recv (stats)");
    }

    int bad = rank == 0 ? report(ns, &st1, &home1, &wb, &wa, &own) : 0;

    arm("tear-down (pp_mpi_destroy, MPI_Win_free)");
    tear_down();
    check_pp(pp_mpi_destroy(layer), "pp_mpi_destroy");
    check_pp(pp_pool_destroy(pool), "pp_pool_destroy");
    disarm();
    MPI_Bcast(&bad, 1, MPI_INT, 0, comm);
    MPI_Comm_free(&comm);
    MPI_Finalize();
    return bad ? 1 : 0;
}
