/*
 * pinpool-mpi-demo -- tiled Cholesky across MPI ranks on pinpool_mpi.
 *
 * factor.c: the factorisation.  Each rank runs exactly the tasks whose
 * output tile it homes, in the right-looking order (step k: POTRF of
 * tile (k, k), TRSM of the tiles under it, SYRK and GEMM updates of the
 * trailing matrix), as OpenMP tasks ordered by `depend` clauses on its
 * own tiles, as in the single-node demo.
 *
 * Across ranks there is no message but the layer's: versions are the
 * dataflow.  Tile (i, j) starts at version 1 (the put); each home write
 * pin's unpin publishes the next version, so after update k (k < j) it is
 * at version k + 2 and the final L(i, j) is version j + 2.  A task reads
 * L(i, k) by pinning {ref, home, version k + 2}: on another rank the pin
 * waits until the home has published that version (the request is
 * parked at the home until then), on the home it waits for the local
 * publish.  Every pin checks that it got exactly the version it named.
 *
 * Why no write-after-read hazard across ranks: a tile is read by other
 * ranks only at its final version, and nothing writes it after that; a
 * remote pin gets a copy (a snapshot) and the home refuses a write pin
 * while a send of the tile is in flight.  In general (examples/mpi_demo/README.md)
 * a scheduler lets the writer of version v + 1 run only after the
 * readers of version v have pinned it.
 *
 * Why a scheduler thread, rather than creating every task at once and
 * letting each block in its remote pins: OpenMP sees only the local
 * dependences, so it may start a task whose remote input is not yet
 * computed while the local task that (through another rank) leads to
 * that input waits behind it.  With every worker of the ranks blocked so,
 * each waiting for a task another has not started, the run deadlocks (an
 * unlucky order, not a bug in the layer: a build that created every task
 * at once hung in 10 of 10 runs at -np 4, order 2048, 64x64 tiles, one
 * worker per rank; examples/mpi_demo/README.md).  So the scheduler
 * thread (the OpenMP thread that runs `single`) hands a task to OpenMP
 * only once its remote inputs are published: it looks at a window of the
 * next tasks in the order above (cfg->window), prefetches their remote
 * inputs as they enter the window (the requests wait at the homes:
 * versions are futures), and creates each task whose inputs have arrived
 * and whose own tiles' earlier writers are created, so `depend` still
 * orders them.  A created task never waits for another rank's
 * computation, and the first task not yet created, over all ranks, can
 * always be created: no deadlock, whatever order OpenMP picks.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "mpi_demo.h"
#include "tiles.h"

#include <omp.h>

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The scheduler's idle sleep doubles from SLEEP_MIN_NS to SLEEP_MAX_NS
 * while no task can be created (a remote tile it waits for is seen at
 * most that late). */
#define SLEEP_MIN_NS 5000L
#define SLEEP_MAX_NS 200000L
/* Tasks created and not finished, per thread of the team: libgomp runs a
 * new task on the creating thread once more than 64 per thread are
 * queued, which would make the scheduler a worker. */
#define OUTSTANDING_PER_THREAD 32

typedef struct task {
    int kind, nin;
    int in[2];                  /* stored tiles read (final versions) */
    int out;                    /* the stored tile written */
    uint32_t out_version;       /* the version the write pin finds: writes before + 1 */
} task_t;

typedef struct sched {
    md_run_t *r;
    task_t *tasks;              /* this rank's, in the right-looking order */
    int ntasks;
    uint8_t *created;           /* per task */
    int *writes_created;        /* per stored tile (this rank's): writers created */
    uint8_t *arrived;           /* per stored tile (remote): its final version is here */
    uint8_t *prefetched;        /* per stored tile (remote) */
    uint32_t *probed;           /* per stored tile: the scan that last probed it */
    uint32_t scan;
    int *col;                   /* per stored tile: its column */
    char *dep;                  /* one dependence token per stored tile */
    char dep_none;
    _Atomic int done;           /* tasks finished */
    int ncreated;
    uint64_t remote_inputs;
} sched_t;

static int homed_here(const md_run_t *r, int x)
{
    return r->gref[x].rank == (uint32_t)r->rank;
}

/* ---- the task list -------------------------------------------------------- */

static void add_task(sched_t *s, int kind, int nin, int in0, int in1, int out, int writes_before)
{
    md_run_t *r = s->r;
    if (!homed_here(r, out))
        return;
    s->tasks[s->ntasks++] = (task_t){ kind, nin, { in0, in1 }, out, (uint32_t)writes_before + 1 };
}

/* Step k's panel: POTRF of tile (k, k), then TRSM of the tiles under it. */
static void add_panel(sched_t *s, int k)
{
    int kk = demo_tile_index(k, k);
    add_task(s, K_POTRF, 0, 0, 0, kk, k);
    for (int i = k + 1; i < s->r->T; i++)
        add_task(s, K_TRSM, 1, kk, 0, demo_tile_index(i, k), k);
}

/* Step k's updates of columns j0..j1 (SYRK on the diagonal, GEMM below). */
static void add_updates(sched_t *s, int k, int j0, int j1)
{
    for (int j = j0; j <= j1; j++) {
        add_task(s, K_SYRK, 1, demo_tile_index(j, k), 0, demo_tile_index(j, j), k);
        for (int i = j + 1; i < s->r->T; i++)
            add_task(s, K_GEMM, 2, demo_tile_index(i, k), demo_tile_index(j, k),
                     demo_tile_index(i, j), k);
    }
}

/* The right-looking order (StarPU's mpi_cholesky_distributed submits it
 * too).  With a lookahead of one panel (cfg->lookahead), step k updates
 * column k + 1 first, then comes panel k + 1, then the rest of step k:
 * the next panel, on which every rank soon waits, is not created (nor,
 * OpenMP running ready tasks about first come first served, run) behind
 * the whole trailing update.  Either way a tile's writers come in the
 * order of their step k, which is the order of its versions. */
static int build_tasks(sched_t *s)
{
    int T = s->r->T;
    size_t n = 0;
    for (int k = 0; k < T; k++) {
        size_t m = (size_t)(T - k - 1);
        n += 1 + m + m + m * (m - 1) / 2;
    }
    s->tasks = calloc(n, sizeof *s->tasks);
    if (s->tasks == NULL)
        return -1;
    if (!s->r->cfg->lookahead) {
        for (int k = 0; k < T; k++) {
            add_panel(s, k);
            add_updates(s, k, k + 1, T - 1);
        }
        return 0;
    }
    add_panel(s, 0);
    for (int k = 0; k + 1 < T; k++) {
        add_updates(s, k, k + 1, k + 1);
        add_panel(s, k + 1);
        add_updates(s, k, k + 2, T - 1);
    }
    return 0;
}

/* ---- the tasks ------------------------------------------------------------ */

static void run_task(sched_t *s, int t)
{
    md_run_t *r = s->r;
    const task_t *task = &s->tasks[t];
    if (atomic_load_explicit(&r->failed, memory_order_relaxed) != 0)
        return;
    double *in[2] = { NULL, NULL }, *out = NULL;
    int rc = 0, pinned = 0;
    /* Inputs at their final version (remote: the copy; home: the tile),
     * then the output for writing at the version its earlier writers
     * left. */
    for (; pinned < task->nin && rc == 0; pinned++) {
        int x = task->in[pinned];
        rc = md_pin(r, x, md_final_version(s->col[x]), 0, &in[pinned]);
        if (rc != 0)
            break;
    }
    if (rc == 0)
        rc = md_pin(r, task->out, task->out_version, PP_PIN_WRITE, &out);
    if (rc != 0) {
        md_failed(r, rc, "pinning a task's tiles");
    } else {
        int info = demo_kernel(task->kind, r->cfg->b, in[0], in[1], out);
        if (info != 0) {
            int expected = 0;
            atomic_compare_exchange_strong_explicit(&r->potrf_info, &expected, info,
                                                    memory_order_relaxed, memory_order_relaxed);
        }
        /* The write pin's unpin publishes version out_version + 1: the
         * remote readers' parked requests are served from here on. */
        rc = md_unpin(r, task->out, PP_PIN_WRITE, out);
        if (rc != 0)
            md_failed(r, rc, "pp_mpi_unpin (write)");
    }
    for (int x = 0; x < pinned; x++) {
        int urc = md_unpin(r, task->in[x], 0, in[x]);
        if (urc != 0)
            md_failed(r, urc, "pp_mpi_unpin");
    }
    pp_quiescent(r->pool);
    md_count_done(r, rc == 0 ? demo_kernel_flops(task->kind, r->cfg->b) : 0);
}

/* ---- the scheduler -------------------------------------------------------- */

/* Has remote tile x's final version arrived?  A pin with PP_PIN_NOWAIT
 * answers without waiting: a hit (the prefetch's copy is cached here) or
 * PP_EAGAIN (the request is still parked at the home, or in flight).  A
 * tile once seen stays arrived: its final version is never written again,
 * so a task's pin of it never waits for computation, at worst for a new
 * fetch if the copy was dropped meanwhile.  Each tile is probed at most
 * once per scan. */
static int arrived(sched_t *s, int x)
{
    md_run_t *r = s->r;
    if (s->arrived[x])
        return 1;
    if (s->probed[x] == s->scan)
        return 0;
    s->probed[x] = s->scan;
    pp_gref_t g = r->gref[x];
    g.version = md_final_version(s->col[x]);
    void *d = NULL;
    int rc = pp_mpi_pin(r->mpi, g, PP_PIN_NOWAIT, &d, NULL);
    if (rc == PP_EAGAIN || rc == PP_ENOMEM)
        return 0;
    if (rc != 0) {
        md_failed(r, rc, "pp_mpi_pin (PP_PIN_NOWAIT) of a remote input");
        return 0;
    }
    rc = pp_mpi_unpin(r->mpi, g, 0, d);
    if (rc != 0)
        md_failed(r, rc, "pp_mpi_unpin");
    s->arrived[x] = 1;
    return 1;
}

/* A task enters the window: its remote inputs' fetches start now (each
 * tile once); the home parks a request until the version is published. */
static void prefetch_inputs(sched_t *s, int t)
{
    md_run_t *r = s->r;
    const task_t *task = &s->tasks[t];
    for (int k = 0; k < task->nin; k++) {
        int x = task->in[k];
        if (homed_here(r, x) || s->prefetched[x])
            continue;
        s->prefetched[x] = 1;
        s->remote_inputs++;
        pp_gref_t g = r->gref[x];
        g.version = md_final_version(s->col[x]);
        int rc = pp_mpi_prefetch(r->mpi, g);
        if (rc != 0)
            md_failed(r, rc, "pp_mpi_prefetch");
    }
}

/* Can task t be handed to OpenMP now?  Its own tiles' earlier writers
 * must be created (so that `depend` orders it after them: OpenMP orders
 * by creation), and its remote inputs must have arrived. */
static int ready(sched_t *s, int t)
{
    md_run_t *r = s->r;
    const task_t *task = &s->tasks[t];
    if (s->writes_created[task->out] != (int)task->out_version - 1)
        return 0;
    for (int k = 0; k < task->nin; k++) {
        int x = task->in[k];
        if (homed_here(r, x) ? s->writes_created[x] != s->col[x] + 1 : !arrived(s, x))
            return 0;
    }
    return 1;
}

static void create_task(sched_t *s, int t)
{
    md_run_t *r = s->r;
    const task_t *task = &s->tasks[t];
    int l0 = task->nin > 0 && homed_here(r, task->in[0]);
    int l1 = task->nin > 1 && homed_here(r, task->in[1]);
    char *in0 = l0 ? &s->dep[task->in[0]] : &s->dep_none;
    char *in1 = l1 ? &s->dep[task->in[1]] : &s->dep_none;
    char *out = &s->dep[task->out];
    /* With a memory limit, the home tiles start loading now if they were
     * swapped out (a no-op when resident). */
    if (r->cfg->mem_limit != 0) {
        pp_mpi_prefetch(r->mpi, r->gref[task->out]);
        if (l0)
            pp_mpi_prefetch(r->mpi, r->gref[task->in[0]]);
        if (l1)
            pp_mpi_prefetch(r->mpi, r->gref[task->in[1]]);
    }
#pragma omp task firstprivate(t) depend(in: *in0, *in1) depend(inout: *out)
    {
        run_task(s, t);
        /* release: the scheduler's acquire load of done orders the task's
         * effects before the end of the factorisation */
        atomic_fetch_add_explicit(&s->done, 1, memory_order_release);
    }
    s->created[t] = 1;
    s->writes_created[task->out]++;
    s->ncreated++;
}

static void idle_sleep(long *ns)
{
    struct timespec ts = { 0, *ns };
    nanosleep(&ts, NULL);
    if (*ns < SLEEP_MAX_NS)
        *ns = *ns * 2 < SLEEP_MAX_NS ? *ns * 2 : SLEEP_MAX_NS;
}

/* The scheduler's loop (on the thread that runs `single`): scan the window
 * [lo, lo + window) in order, create what is ready, sleep when nothing
 * was.  Returns once every created task has finished. */
static void schedule(sched_t *s, int nthreads)
{
    md_run_t *r = s->r;
    int lo = 0, seen = 0, cap = OUTSTANDING_PER_THREAD * nthreads;
    int window = r->cfg->window;
    long sleep_ns = SLEEP_MIN_NS;
    while (lo < s->ntasks && atomic_load_explicit(&r->failed, memory_order_relaxed) == 0) {
        int hi = lo + window < s->ntasks ? lo + window : s->ntasks, made = 0, capped = 0;
        s->scan++;
        for (; seen < hi; seen++)
            prefetch_inputs(s, seen);
        for (int t = lo; t < hi; t++) {
            if (s->created[t])
                continue;
            if (s->ncreated - atomic_load_explicit(&s->done, memory_order_relaxed) >= cap) {
                capped = 1;
                break;
            }
            if (ready(s, t)) {
                create_task(s, t);
                made++;
            }
        }
        while (lo < s->ntasks && s->created[lo])
            lo++;
        /* The probes' pins made this thread a reader of the pool: end its
         * epoch section before it sleeps. */
        pp_quiescent(r->pool);
        if (made != 0) {
            sleep_ns = SLEEP_MIN_NS;
            continue;
        }
        if (!capped)
            r->res->gate_waits++;
        idle_sleep(&sleep_ns);
    }
    /* Wait here rather than in the barrier, where this thread would run
     * kernels too: a rank runs exactly cfg->workers of them at once. */
    sleep_ns = SLEEP_MIN_NS;
    while (atomic_load_explicit(&s->done, memory_order_acquire) < s->ncreated)
        idle_sleep(&sleep_ns);
}

int md_factorize(md_run_t *r)
{
    int ntiles = r->T * (r->T + 1) / 2, rc = -1;
    sched_t s_, *s = &s_;
    memset(s, 0, sizeof *s);
    s->r = r;
    s->writes_created = calloc((size_t)ntiles, sizeof *s->writes_created);
    s->arrived = calloc((size_t)ntiles, 1);
    s->prefetched = calloc((size_t)ntiles, 1);
    s->probed = calloc((size_t)ntiles, sizeof *s->probed);
    s->dep = calloc((size_t)ntiles, 1);
    s->col = malloc((size_t)ntiles * sizeof *s->col);
    if (s->writes_created == NULL || s->arrived == NULL || s->prefetched == NULL ||
        s->probed == NULL || s->dep == NULL || s->col == NULL || build_tasks(s) != 0)
        goto out;
    for (int i = 0; i < r->T; i++)
        for (int j = 0; j <= i; j++)
            s->col[demo_tile_index(i, j)] = j;
    s->created = calloc((size_t)s->ntasks + 1, 1);
    if (s->created == NULL)
        goto out;
    r->res->tasks = (uint64_t)s->ntasks;
    md_start_phase(r, MD_FACTORIZE, (uint64_t)s->ntasks);
    /* The workers, plus the scheduler thread, which runs no kernel. */
    int nthreads = r->cfg->workers + 1;
#pragma omp parallel num_threads(nthreads)
#pragma omp single
    schedule(s, nthreads);
    r->res->remote_inputs = s->remote_inputs;
    rc = 0;
out:
    if (rc != 0)
        fprintf(stderr, "pinpool-mpi-demo: rank %d: out of memory for the task list\n", r->rank);
    free(s->tasks);
    free(s->created);
    free(s->writes_created);
    free(s->arrived);
    free(s->prefetched);
    free(s->probed);
    free(s->dep);
    free(s->col);
    return rc;
}
