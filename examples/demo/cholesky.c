/*
 * pinpool-demo -- out-of-core tiled Cholesky factorisation on OpenMP tasks.
 *
 * cholesky.c: the matrix, the task graph and the residual.
 *
 * The matrix A (order n, symmetric positive definite) is stored as its
 * lower triangle of b-by-b tiles, each tile an entry in the pool (or, with
 * --no-pool, a plain malloc'd array).  The factorisation A = L L^T is the
 * right-looking tiled algorithm of PLASMA, StarPU, PaRSEC and Dagger: for
 * each step k, POTRF of the diagonal tile, TRSM of the tiles under it, and
 * SYRK/GEMM updates of the trailing matrix -- one OpenMP task each, ordered
 * by `depend` clauses on the tiles they read and write.
 *
 * Every task follows the pattern of docs/scheduler.md:
 *   1. prefetch the tiles of the next few tasks (pp_prefetch: a swapped
 *      tile starts loading on its node's swap thread, nothing waits);
 *   2. pin its tiles, all or none (pp_pin_many; the output PP_PIN_WRITE),
 *      first with PP_PIN_NOWAIT, yielding the worker to other tasks while
 *      a tile loads, then waiting;
 *   3. run the kernel (OpenBLAS / LAPACKE, one BLAS thread per task);
 *   4. unpin (pp_unpin_many) and pp_quiescent: the worker holds nothing
 *      between tasks.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "demo.h"
#include "tiles.h"

#include <cblas.h>
#include <omp.h>

#include <dlfcn.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---------------------------------------------------------------------------
 * ThreadSanitizer and LLVM's OpenMP runtime.
 *
 * Archer (libarcher.so, loaded by libomp when the program runs under TSan)
 * tells TSan about OpenMP's own ordering: task creation, dependences,
 * taskwait, barriers.  What it does not model in LLVM 14 is libomp reusing
 * the memory of a finished task's descriptor (its firstprivate copies) for
 * a task created later: the reuse is ordered by libomp's own atomics, which
 * TSan cannot see, so TSan reports the creating thread's write of the new
 * task's arguments against the finished task's read of its own.
 *
 * In TSan builds the demo states that ordering with one (recursive) mutex:
 * the creating thread holds it around each `#pragma omp task`, and each
 * task passes through it as its last action.  A descriptor that the
 * creation reuses was freed by a task that had passed through the mutex
 * before the creation took it -- no task can end while a creation holds it
 * -- so TSan sees that task's accesses ordered before the reuse.  (An
 * acquire before each creation and a release at the end of each task was
 * tried first: a task could release after the acquire and still be freed
 * before the allocation, and a 15-minute soak found that window.)  The
 * price: a task that ended before another was created is ordered before
 * it (through the creating thread), so TSan no longer reports races
 * between such a pair; races between tasks alive at the same time are
 * still reported (demo.seeded_race.caught).  Recursive, because libomp may
 * run a task inline inside the creation.
 * ------------------------------------------------------------------------- */
#if defined(__SANITIZE_THREAD__)
#define DEMO_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define DEMO_TSAN 1
#endif
#endif
#ifdef DEMO_TSAN
static pthread_mutex_t task_memory_mu = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
#define TASK_CREATE_BEGIN() pthread_mutex_lock(&task_memory_mu)
#define TASK_CREATE_END() pthread_mutex_unlock(&task_memory_mu)
#define TASK_BODY_END()                          \
    do {                                         \
        pthread_mutex_lock(&task_memory_mu);     \
        pthread_mutex_unlock(&task_memory_mu);   \
    } while (0)
#else
#define TASK_CREATE_BEGIN() ((void)0)
#define TASK_CREATE_END() ((void)0)
#define TASK_BODY_END() ((void)0)
#endif

/* Pins retried after PP_ENOMEM (every resident byte pinned by other
 * workers' tasks) before the run gives up. */
#define ENOMEM_TRIES 100000

/* ---------------------------------------------------------------------------
 * Small things
 * ------------------------------------------------------------------------- */

double demo_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static pthread_mutex_t progress_mu = PTHREAD_MUTEX_INITIALIZER;
void demo_progress_lock(void) { pthread_mutex_lock(&progress_mu); }
void demo_progress_unlock(void) { pthread_mutex_unlock(&progress_mu); }

const char *demo_omp_runtime(void)
{
    Dl_info info;
    if (dladdr((void *)omp_get_max_threads, &info) == 0 || info.dli_fname == NULL)
        return "?";
    if (strstr(info.dli_fname, "libgomp") != NULL)
        return "libgomp";
    if (strstr(info.dli_fname, "libomp") != NULL || strstr(info.dli_fname, "libiomp") != NULL)
        return "libomp";
    return "?";
}

/* ---------------------------------------------------------------------------
 * The run
 * ------------------------------------------------------------------------- */

/* One task of the factorisation: the tiles it reads and the one it writes
 * (indices of stored tiles). */
typedef struct task {
    int kind, nin;
    int in[2];
    int out;
    int group;                  /* right-looking: the step k; left: the panel */
    int wave;                   /* left: the column k whose updates (or, in the
                                   panel, whose factorisation) the task does */
    int left[3];                /* in[0], in[1], out: index of the count of the
                                   group's tasks still to touch that tile
                                   (run_t.left, set_advice) */
} task_t;

typedef struct run {
    const demo_config_t *cfg;
    demo_progress_t *prog;
    demo_result_t *res;
    int T;                      /* tiles per side */
    int b;
    size_t tile_bytes;
    pp_pool_t *pool;            /* NULL: raw pointers */
    unsigned nodes;             /* of the pool */
    pp_ref_t *ref;              /* pool: ref of each stored tile */
    double **raw;               /* raw: each stored tile */
    task_t *tasks;              /* the factorisation, in creation order */
    int ntasks;
    char *dep;                  /* one dependence token per stored tile */
    char dep_none;              /* for a task with fewer than two inputs */
    double *err2, *norm2;       /* the check, per stored tile */
    _Atomic int failed;         /* first error seen by a task (0: none) */
    _Atomic int potrf_info;     /* first nonzero LAPACKE_dpotrf info */
    _Atomic uint64_t nowait_eagain, enomem_retries, prefetches;
    _Atomic int *left;          /* per tile and group: its tasks not yet run */
} run_t;

/* The run's flags and counters are relaxed: tasks only read them to stop
 * early, and the end of each parallel region orders them before the run
 * reads them.  The progress figures are for display only. */
static void task_failed(run_t *r, int rc, const char *what)
{
    int expected = 0;
    if (atomic_compare_exchange_strong_explicit(&r->failed, &expected, rc,
                                                memory_order_relaxed, memory_order_relaxed))
        fprintf(stderr, "pinpool-demo: %s: %s (%s)\n", what, pp_strerror(rc),
                pp_err_name(rc));
}

static void count_done(run_t *r, double flops)
{
    atomic_fetch_add_explicit(&r->prog->flops, (uint64_t)flops, memory_order_relaxed);
    atomic_fetch_add_explicit(&r->prog->tasks_done, 1, memory_order_relaxed);
}

static void start_phase(run_t *r, demo_phase_t phase, uint64_t tasks)
{
    atomic_store_explicit(&r->prog->tasks_total, tasks, memory_order_relaxed);
    atomic_store_explicit(&r->prog->tasks_done, 0, memory_order_relaxed);
    atomic_store_explicit(&r->prog->flops, 0, memory_order_relaxed);
    atomic_store_explicit(&r->prog->phase_start, demo_now(), memory_order_relaxed);
    atomic_store_explicit(&r->prog->phase, (int)phase, memory_order_relaxed);
}

/* Pins a task's tiles before it runs, all or none: n_in tiles to read and,
 * unless out is PP_REF_NONE, one tile to write.  A tile that is not
 * resident is first asked for with PP_PIN_NOWAIT, which starts its load
 * on the swap thread and returns PP_EAGAIN at once: the worker yields to
 * other ready tasks (taskyield) and tries again.  After cfg->nowait_tries
 * such attempts it waits for the loads.  PP_ENOMEM (every resident byte
 * pinned by running tasks) is retried once other tasks have had a chance
 * to finish.  Returns 0 or the pool's error. */
static int pin_task_tiles(run_t *r, const pp_ref_t *in, int n_in, pp_ref_t out,
                          double **in_data, double **out_data)
{
    void *pinned_in[2] = { NULL, NULL }, *pinned_out = NULL;
    for (int attempt = 0, enomem = 0;; attempt++) {
        unsigned nowait = attempt < r->cfg->nowait_tries ? PP_PIN_NOWAIT : 0u;
        int rc = pp_pin_many(r->pool, in, (size_t)n_in, nowait, pinned_in);
        if (rc == 0 && out != PP_REF_NONE) {
            rc = pp_pin_many(r->pool, &out, 1, PP_PIN_WRITE | nowait, &pinned_out);
            if (rc != 0) {
                int urc = pp_unpin_many(r->pool, in, (size_t)n_in, NULL);
                if (urc != 0)
                    return urc;
            }
        }
        if (rc == 0) {
            for (int x = 0; x < n_in; x++)
                in_data[x] = pinned_in[x];
            if (out != PP_REF_NONE)
                *out_data = pinned_out;
            return 0;
        }
        if (rc == PP_EAGAIN && nowait) {
            atomic_fetch_add_explicit(&r->nowait_eagain, 1, memory_order_relaxed);
#pragma omp taskyield
            continue;
        }
        if (rc == PP_ENOMEM && ++enomem < ENOMEM_TRIES) {
            atomic_fetch_add_explicit(&r->enomem_retries, 1, memory_order_relaxed);
#pragma omp taskyield
            sched_yield();
            continue;
        }
        return rc;
    }
}

/* Starts loading the tiles of the cfg->lookahead factorisation tasks
 * created after task t: libgomp runs ready tasks in about creation order
 * (main.c sets the lookahead to 0 on libomp, which does not).  With hints,
 * PP_ADVISE_WILLNEED: the load, and the hand spares the tile until the
 * task pins it. */
static void prefetch_after(run_t *r, int t)
{
    for (int u = t + 1; u <= t + r->cfg->lookahead && u < r->ntasks; u++) {
        const task_t *next = &r->tasks[u];
        for (int x = 0; x <= next->nin; x++) {
            pp_ref_t ref = r->ref[x < next->nin ? next->in[x] : next->out];
            if (r->cfg->hints)
                pp_advise(r->pool, ref, PP_ADVISE_WILLNEED);
            else
                pp_prefetch(r->pool, ref);
        }
        atomic_fetch_add_explicit(&r->prefetches, (uint64_t)next->nin + 1, memory_order_relaxed);
    }
}

/* After a task: PP_ADVISE_WONTNEED for each of its tiles that no other task
 * of its group still has to touch, so that when memory is short the pool
 * evicts those before the tiles the group still works on.  Counted, not
 * taken from the creation order: the runtime runs a group's ready tasks in
 * any order (a tile's last task in creation order often ran before the
 * others, and the hint then evicted it under their feet). */
static void advise_after(run_t *r, const task_t *task)
{
    for (int x = 0; x <= task->nin; x++) {
        /* relaxed: a count of tasks; the hint orders nothing. */
        if (atomic_fetch_sub_explicit(&r->left[task->left[x < task->nin ? x : 2]], 1,
                                      memory_order_relaxed) != 1)
            continue;
        int rc = pp_advise(r->pool, r->ref[x < task->nin ? task->in[x] : task->out],
                           PP_ADVISE_WONTNEED);
        if (rc != 0)
            task_failed(r, rc, "pp_advise");
    }
}

/* ---- generate ------------------------------------------------------------ */

static void generate_tile(run_t *r, int i, int j)
{
    const demo_config_t *cfg = r->cfg;
    int idx = demo_tile_index(i, j);
    void *mem = NULL;
    if (posix_memalign(&mem, 64, r->tile_bytes) != 0) {
        task_failed(r, PP_ENOMEM, "allocating a tile");
        return;
    }
    double *t = mem;
    demo_a_tile(cfg->seed, cfg->n, r->b, i, j, t);
    if (r->pool == NULL) {
        r->raw[idx] = t;
    } else {
        /* On this machine's topology a tile lives on the node of the thread
         * that made it (and first touched it); on a synthetic one, threads
         * are not bound, so tiles are spread over the nodes round-robin. */
        unsigned flags = r->cfg->topology != NULL ? PP_ON_NODE((unsigned)idx % r->nodes) : 0u;
        /* The pool owns the tile from here (type NULL: released with free). */
        int rc = pp_put(r->pool, t, r->tile_bytes, NULL, flags, &r->ref[idx]);
        if (rc != 0) {
            free(t);
            task_failed(r, rc, "pp_put");
            return;
        }
        pp_quiescent(r->pool);
    }
    count_done(r, 0);
}

/* ---- factorize ----------------------------------------------------------- */

static void kernel(run_t *r, const task_t *t, double *const in[2], double *out)
{
    int info = demo_kernel(t->kind, r->b, in[0], in[1], out);
    if (info != 0) {
        int expected = 0;
        atomic_compare_exchange_strong_explicit(&r->potrf_info, &expected, info,
                                                memory_order_relaxed, memory_order_relaxed);
    }
}

/* The body of factorisation task number t. */
static void run_task(run_t *r, int t)
{
    const task_t *task = &r->tasks[t];
    double *in[2] = { NULL, NULL }, *out = NULL;
    if (atomic_load_explicit(&r->failed, memory_order_relaxed) != 0)
        return;
    if (r->pool == NULL) {
        for (int x = 0; x < task->nin; x++)
            in[x] = r->raw[task->in[x]];
        kernel(r, task, in, r->raw[task->out]);
        count_done(r, demo_kernel_flops(task->kind, r->b));
        return;
    }
    pp_ref_t in_refs[2] = { PP_REF_NONE, PP_REF_NONE };
    for (int x = 0; x < task->nin; x++)
        in_refs[x] = r->ref[task->in[x]];
    prefetch_after(r, t);
    int rc = pin_task_tiles(r, in_refs, task->nin, r->ref[task->out], in, &out);
    if (rc != 0) {
        task_failed(r, rc, "pinning a task's tiles");
        return;
    }
#if DEMO_SEED_SKIP_TASK
    /* Seeded bug (demo.seeded_wrong.caught): one update of the
     * factorisation is skipped, so L is wrong and each check must say so. */
    if (t != r->ntasks / 2)
#endif
    kernel(r, task, in, out);
    pp_ref_t all[3] = { in_refs[0], in_refs[1], PP_REF_NONE };
    all[task->nin] = r->ref[task->out];
    rc = pp_unpin_many(r->pool, all, (size_t)task->nin + 1, NULL);
    if (rc != 0)
        task_failed(r, rc, "pp_unpin_many");
    if (r->cfg->hints)
        advise_after(r, task);
    pp_quiescent(r->pool);
    count_done(r, demo_kernel_flops(task->kind, r->b));
}

/* The right-looking order (PLASMA, StarPU's examples, Dagger): step k
 * factors column k and updates the whole trailing matrix with it, so each
 * step sweeps every tile right of k -- with a matrix larger than memory,
 * each tile is written and read back once per step. */
static int build_right(run_t *r, task_t *tk)
{
    int T = r->T, t = 0;
    for (int k = 0; k < T; k++) {
        tk[t++] = (task_t){ K_POTRF, 0, { 0, 0 }, demo_tile_index(k, k), k, k, { 0, 0, 0 } };
        for (int i = k + 1; i < T; i++)
            tk[t++] = (task_t){ K_TRSM, 1, { demo_tile_index(k, k), 0 }, demo_tile_index(i, k),
                                k, k, { 0, 0, 0 } };
        for (int i = k + 1; i < T; i++) {
            tk[t++] = (task_t){ K_SYRK, 1, { demo_tile_index(i, k), 0 }, demo_tile_index(i, i),
                                k, k, { 0, 0, 0 } };
            for (int j = k + 1; j < i; j++)
                tk[t++] = (task_t){ K_GEMM, 2, { demo_tile_index(i, k), demo_tile_index(j, k) },
                                    demo_tile_index(i, j), k, k, { 0, 0, 0 } };
        }
    }
    return t;
}

/* The width of the panel that starts at column j0: as many columns as fit
 * in budget tiles (at least one), each column's tiles and the one tile of
 * the panel's row that the updates by a column k read with it. */
static int panel_width(int T, int j0, int budget)
{
    int w = 0, tiles = 0;
    while (j0 + w < T && (w == 0 || tiles + (T - j0 - w) + 1 <= budget)) {
        tiles += T - j0 - w + 1;
        w++;
    }
    return w;
}

/* The left-looking order, by panels of columns [j0, j0 + w): first every
 * update of the panel by the columns left of it, column k by column k
 * (each factored tile L_ik is read once per panel), then the panel is
 * factored in place, right-looking within it.  A panel is sized to half
 * the pool's limit (cfg->panel_tiles), so it stays resident while the
 * factored tiles stream past it: each tile is written back about once
 * after it is final, and read once per panel to its right -- against once
 * per step in the right-looking order. */
static int build_left(run_t *r, task_t *tk)
{
    int T = r->T, t = 0;
    for (int j0 = 0; j0 < T;) {
        int w = panel_width(T, j0, r->cfg->panel_tiles), j1 = j0 + w;
        /* Column k's tile L_ik updates row i of the panel, then is done
         * with for this panel; the panel's row of column k, L_jk for j in
         * the panel, is read by every row. */
        for (int k = 0; k < j0; k++)
            for (int i = j0; i < T; i++)
                for (int j = j0; j < j1 && j <= i; j++)
                    tk[t++] = i == j ? (task_t){ K_SYRK, 1, { demo_tile_index(j, k), 0 },
                                                 demo_tile_index(j, j), j0, k, { 0, 0, 0 } }
                                     : (task_t){ K_GEMM, 2, { demo_tile_index(i, k),
                                                              demo_tile_index(j, k) },
                                                 demo_tile_index(i, j), j0, k, { 0, 0, 0 } };
        for (int k = j0; k < j1; k++) {
            tk[t++] = (task_t){ K_POTRF, 0, { 0, 0 }, demo_tile_index(k, k), j0, k, { 0, 0, 0 } };
            for (int i = k + 1; i < T; i++)
                tk[t++] = (task_t){ K_TRSM, 1, { demo_tile_index(k, k), 0 },
                                    demo_tile_index(i, k), j0, k, { 0, 0, 0 } };
            for (int j = k + 1; j < j1; j++) {
                tk[t++] = (task_t){ K_SYRK, 1, { demo_tile_index(j, k), 0 },
                                    demo_tile_index(j, j), j0, k, { 0, 0, 0 } };
                for (int i = j + 1; i < T; i++)
                    tk[t++] = (task_t){ K_GEMM, 2, { demo_tile_index(i, k), demo_tile_index(j, k) },
                                        demo_tile_index(i, j), j0, k, { 0, 0, 0 } };
            }
        }
        j0 = j1;
    }
    return t;
}

/* task_t.left and run_t.left: walking the tasks in creation order, a
 * tile's touches by one group share one count (a group's tasks are made
 * together), which starts at the number of them. */
static int set_advice(run_t *r, int ntiles)
{
    int *count_of = malloc((size_t)ntiles * sizeof *count_of);
    int *group_of = malloc((size_t)ntiles * sizeof *group_of);
    r->left = calloc((size_t)r->ntasks * 3, sizeof *r->left);
    if (count_of == NULL || group_of == NULL || r->left == NULL) {
        free(count_of);
        free(group_of);
        return -1;
    }
    int counts = 0;
    for (int x = 0; x < ntiles; x++)
        group_of[x] = -1;
    for (int t = 0; t < r->ntasks; t++) {
        task_t *task = &r->tasks[t];
        for (int x = 0; x <= task->nin; x++) {
            int tile = x < task->nin ? task->in[x] : task->out;
            if (group_of[tile] != task->group) {
                group_of[tile] = task->group;
                count_of[tile] = counts++;
            }
            task->left[x < task->nin ? x : 2] = count_of[tile];
            atomic_fetch_add_explicit(&r->left[count_of[tile]], 1, memory_order_relaxed);
        }
    }
    free(count_of);
    free(group_of);
    return 0;
}

/* The task list of the factorisation, in creation order (cfg->order). */
static int build_tasks(run_t *r)
{
    int T = r->T;
    size_t n = 0;
    for (int k = 0; k < T; k++) {
        int m = T - k - 1;
        n += 1 + (size_t)m + (size_t)m + (size_t)m * (m - 1) / 2;
    }
    r->tasks = calloc(n, sizeof *r->tasks);
    if (r->tasks == NULL)
        return -1;
    r->ntasks = r->cfg->order == DEMO_ORDER_LEFT ? build_left(r, r->tasks)
                                                 : build_right(r, r->tasks);
    if ((size_t)r->ntasks != n) {
        fprintf(stderr, "pinpool-demo: internal error: %d tasks made, %zu expected\n",
                r->ntasks, n);
        abort();
    }
    return set_advice(r, T * (T + 1) / 2);
}

/* ---- check --------------------------------------------------------------- */

/* Tile (i, j) of L L^T, compared with tile (i, j) of A regenerated:
 * (L L^T)_ij = sum over k <= j of L_ik L_jk^T, where L_jj is the lower
 * triangle of the factorised diagonal tile (its upper part still holds A).
 * Pins the two tiles of one step at a time and prefetches the next two. */
static void check_tile(run_t *r, int i, int j)
{
    int b = r->b;
    size_t bb = (size_t)b * b;
    double *acc = calloc(bb, sizeof *acc), *tri = calloc(bb, sizeof *tri);
    double *a = malloc(bb * sizeof *a);
    if (acc == NULL || tri == NULL || a == NULL) {
        task_failed(r, PP_ENOMEM, "allocating the check's scratch tiles");
        goto out;
    }
    for (int k = 0; k <= j; k++) {
        double *p[2];
        pp_ref_t refs[2] = { PP_REF_NONE, PP_REF_NONE };
        if (r->pool == NULL) {
            p[0] = r->raw[demo_tile_index(i, k)];
            p[1] = r->raw[demo_tile_index(j, k)];
        } else {
            refs[0] = r->ref[demo_tile_index(i, k)];
            refs[1] = r->ref[demo_tile_index(j, k)];   /* == refs[0] when i == j */
            if (k < j) {
                pp_prefetch(r->pool, r->ref[demo_tile_index(i, k + 1)]);
                pp_prefetch(r->pool, r->ref[demo_tile_index(j, k + 1)]);
                atomic_fetch_add_explicit(&r->prefetches, 2, memory_order_relaxed);
            }
            int rc = pin_task_tiles(r, refs, 2, PP_REF_NONE, p, NULL);
            if (rc != 0) {
                task_failed(r, rc, "pinning tiles for the check");
                goto out;
            }
        }
        demo_check_step(b, i, j, k, p[0], p[1], tri, acc);
        if (r->pool != NULL) {
            int rc = pp_unpin_many(r->pool, refs, 2, NULL);
            if (rc != 0) {
                task_failed(r, rc, "pp_unpin_many");
                goto out;
            }
        }
    }
    double e2 = 0, n2 = 0;
    demo_check_end(r->cfg->seed, r->cfg->n, b, i, j, acc, a, &e2, &n2);
#if DEMO_SEED_RACY_SUM
    /* Seeded bug (the TSan build's demo.seeded_race.caught): every check
     * task adds into one shared sum, unsynchronised -- a race between
     * sibling tasks that TSan with Archer must report. */
    r->err2[0] += e2;
    r->norm2[0] += n2;
#else
    r->err2[demo_tile_index(i, j)] = e2;
    r->norm2[demo_tile_index(i, j)] = n2;
#endif
    count_done(r, 2.0 * (double)b * b * b * (j + 1));
out:
    free(acc);
    free(tri);
    free(a);
    if (r->pool != NULL)
        pp_quiescent(r->pool);
}

/* ---- check by a vector (--check vector) --------------------------------- */

/* The tile (i, j) of L, pinned (pool) or as is (raw) into *t; its ref in
 * *ref (PP_REF_NONE for raw).  0 or the pool's error. */
static int tile_get(run_t *r, int i, int j, const double **t, pp_ref_t *ref)
{
    int idx = demo_tile_index(i, j);
    *ref = PP_REF_NONE;
    if (r->pool == NULL) {
        *t = r->raw[idx];
        return 0;
    }
    double *p = NULL;
    *ref = r->ref[idx];
    int rc = pin_task_tiles(r, ref, 1, PP_REF_NONE, &p, NULL);
    *t = p;
    return rc;
}

static void tile_put(run_t *r, pp_ref_t ref)
{
    if (ref == PP_REF_NONE)
        return;
    int rc = pp_unpin(r->pool, ref);
    if (rc != 0)
        task_failed(r, rc, "pp_unpin");
}

/* ||A x - L (L^T x)|| / ||A x|| for a fixed x: each tile of L read twice
 * and A regenerated once, O(n^2) work against the tile check's O(n^3) --
 * what a matrix far larger than memory can afford (the tile check reads
 * every tile once per tile to its right). */
static int check_vector(run_t *r, double *residual)
{
    int T = r->T, b = r->b, n = r->cfg->n;
    double *x = malloc((size_t)n * sizeof *x), *y = calloc((size_t)n, sizeof *y);
    double *z = calloc((size_t)n, sizeof *z), *w = calloc((size_t)n, sizeof *w);
    if (x == NULL || y == NULL || z == NULL || w == NULL) {
        free(x), free(y), free(z), free(w);
        return -1;
    }
    for (int k = 0; k < n; k++)
        x[k] = (double)((uint32_t)k * 2654435761u % 2001u) / 1000.0 - 1.0;
    /* y = L^T x, by column j of tiles: y_j = sum over i >= j of L_ij^T x_i. */
#pragma omp parallel for schedule(dynamic) num_threads(r->cfg->threads)
    for (int j = 0; j < T; j++)
        for (int i = j; i < T; i++) {
            const double *t;
            pp_ref_t ref;
            int rc = tile_get(r, i, j, &t, &ref);
            if (rc != 0) {
                task_failed(r, rc, "pinning a tile for the check");
                break;
            }
            const double *xi = x + (size_t)i * b;
            double *yj = y + (size_t)j * b;
            if (i == j) {               /* the lower triangle only */
                for (int c = 0; c < b; c++)
                    for (int row = c; row < b; row++)
                        yj[c] += t[(size_t)c * b + row] * xi[row];
            } else {
                cblas_dgemv(CblasColMajor, CblasTrans, b, b, 1.0, t, b, xi, 1, 1.0, yj, 1);
            }
            tile_put(r, ref);
            if (r->pool != NULL)
                pp_quiescent(r->pool);
        }
    /* z = L y and w = A x, by row i of tiles. */
#pragma omp parallel num_threads(r->cfg->threads)
    {
        double *a = malloc((size_t)b * b * sizeof *a);
#pragma omp for schedule(dynamic)
        for (int i = 0; i < T; i++) {
            double *zi = z + (size_t)i * b, *wi = w + (size_t)i * b;
            for (int j = 0; j <= i && a != NULL; j++) {
                const double *t;
                pp_ref_t ref;
                int rc = tile_get(r, i, j, &t, &ref);
                if (rc != 0) {
                    task_failed(r, rc, "pinning a tile for the check");
                    break;
                }
                const double *yj = y + (size_t)j * b;
                if (i == j) {
                    for (int c = 0; c < b; c++)
                        for (int row = c; row < b; row++)
                            zi[row] += t[(size_t)c * b + row] * yj[c];
                } else {
                    cblas_dgemv(CblasColMajor, CblasNoTrans, b, b, 1.0, t, b, yj, 1, 1.0, zi, 1);
                }
                tile_put(r, ref);
            }
            for (int j = 0; j < T && a != NULL; j++) {   /* A is symmetric: any tile */
                demo_a_tile(r->cfg->seed, n, b, i, j, a);
                cblas_dgemv(CblasColMajor, CblasNoTrans, b, b, 1.0, a, b, x + (size_t)j * b, 1,
                            1.0, wi, 1);
            }
            if (a == NULL)
                task_failed(r, PP_ENOMEM, "allocating the check's scratch tile");
            if (r->pool != NULL)
                pp_quiescent(r->pool);
            count_done(r, 0);
        }
        free(a);
    }
    double e2 = 0, n2 = 0;
    for (int k = 0; k < n; k++) {
        e2 += (w[k] - z[k]) * (w[k] - z[k]);
        n2 += w[k] * w[k];
    }
    *residual = sqrt(e2) / sqrt(n2);
    free(x), free(y), free(z), free(w);
    return 0;
}

/* ---- the phases ---------------------------------------------------------- */

/* Runs fn(r, i, j) as one task per stored tile (i >= j), created column
 * by column, first to last or (backwards) last to first; returns when all
 * have run. */
static void tile_tasks(run_t *r, int backwards, void (*fn)(run_t *, int, int))
{
    int T = r->T;
#pragma omp parallel num_threads(r->cfg->threads)
#pragma omp single
    for (int c = 0; c < T; c++)
        for (int d = 0; d < T - (backwards ? T - 1 - c : c); d++) {
            /* column j, its tiles from the diagonal down (backwards: the
             * last column first, each from the bottom up) */
            int j = backwards ? T - 1 - c : c, i = backwards ? T - 1 - d : j + d;
            TASK_CREATE_BEGIN();
#pragma omp task firstprivate(i, j)
            {
                fn(r, i, j);
                TASK_BODY_END();
            }
            TASK_CREATE_END();
        }
}

static int make_pool(run_t *r)
{
    const demo_config_t *cfg = r->cfg;
    pp_options_t opt = PP_OPTIONS_INIT;
    opt.mem_limit = cfg->mem_limit;
    opt.swap_dir = cfg->mem_limit != 0 ? cfg->swap_dir : NULL;
    opt.topology = cfg->topology;
#ifdef PP_SWAP_DIRECT
    if (cfg->direct)
        opt.flags |= PP_SWAP_DIRECT;
#endif
    opt.io_engine = cfg->io_engine;
    opt.io_depth = cfg->io_depth;
    int rc = pp_pool_create(&opt, &r->pool);
    if (rc != 0) {
        fprintf(stderr, "pinpool-demo: pp_pool_create (swap under %s, topology %s, I/O engine "
                "%s, depth %u): %s (%s)\n",
                opt.swap_dir ? opt.swap_dir : "-", opt.topology ? opt.topology : "this machine's",
                opt.io_engine == PP_IO_ENGINE_URING     ? "uring"
                : opt.io_engine == PP_IO_ENGINE_THREADS ? "threads"
                                                        : "auto",
                opt.io_depth, pp_strerror(rc), pp_err_name(rc));
        return -1;
    }
    if (cfg->trace != NULL && (rc = pp_trace_start(r->pool, cfg->trace, 0)) != 0) {
        fprintf(stderr, "pinpool-demo: pp_trace_start(%s): %s (%s)\n", cfg->trace,
                pp_strerror(rc), pp_err_name(rc));
        (void)pp_pool_destroy(r->pool);
        r->pool = NULL;
        return -1;
    }
    pp_stats_t st = PP_STATS_INIT;
    rc = pp_pool_stats(r->pool, &st);
    r->nodes = rc == 0 && st.nodes > 0 ? st.nodes : 1;
    demo_progress_lock();
    r->prog->pool = r->pool;
    demo_progress_unlock();
    return 0;
}

static void destroy_pool(run_t *r)
{
    if (r->pool == NULL)
        return;
    demo_progress_lock();
    r->prog->pool = NULL;
    demo_progress_unlock();
    int rc;
    if (r->cfg->trace != NULL) {
        /* The pool's counts just before the trace ends and just after:
         * the trace holds between the two of each (--result).  The drain
         * waits for the I/O of released tiles still in flight, so that
         * the two are the same. */
        pp_stats_t a = PP_STATS_INIT, b = PP_STATS_INIT;
        (void)pp_pool_drain(r->pool, -1);
        int ok = pp_pool_stats(r->pool, &a) == 0;
        if ((rc = pp_trace_stop(r->pool)) != 0)
            fprintf(stderr, "pinpool-demo: pp_trace_stop: %s\n", pp_strerror(rc));
        if (ok && pp_pool_stats(r->pool, &b) == 0)
            snprintf(r->res->trace_counts, sizeof r->res->trace_counts,
                     " trace_loads=%" PRIu64 "-%" PRIu64 " trace_written=%" PRIu64 "-%" PRIu64,
                     a.total.loads, b.total.loads, a.total.evictions_written,
                     b.total.evictions_written);
    }
    rc = pp_pool_destroy(r->pool);
    if (rc != 0)
        fprintf(stderr, "pinpool-demo: pp_pool_destroy: %s\n", pp_strerror(rc));
    r->pool = NULL;
}

static int phase_failed(run_t *r, const char *phase)
{
    if (atomic_load_explicit(&r->failed, memory_order_relaxed) == 0)
        return 0;
    fprintf(stderr, "pinpool-demo: %s failed\n", phase);
    return -1;
}

/* Runs the factorisation's tasks, ordered by the tiles' dependence
 * tokens; returns when all have run. */
static void factorize(run_t *r)
{
    const demo_config_t *cfg = r->cfg;
#pragma omp parallel num_threads(cfg->threads)
#pragma omp single
    for (int t = 0; t < r->ntasks; t++) {
        const task_t *task = &r->tasks[t];
        char *in0 = task->nin > 0 ? &r->dep[task->in[0]] : &r->dep_none;
        char *in1 = task->nin > 1 ? &r->dep[task->in[1]] : &r->dep_none;
        char *out_dep = &r->dep[task->out];
        TASK_CREATE_BEGIN();
#pragma omp task firstprivate(t) depend(in: *in0, *in1) depend(inout: *out_dep)
        {
            run_task(r, t);
            TASK_BODY_END();
        }
        TASK_CREATE_END();
        /* Left-looking: the tasks of one column k (its updates of the
         * panel, or its step of the panel's factorisation) all run before
         * the next column's.  The runtime would otherwise run any task
         * whose tiles are ready: the updates of later panels as soon as a
         * column is done (the right-looking order again, with its I/O), and
         * within a panel each tile's chain of updates depth first (libgomp
         * runs the task a finished one made ready first), which reads
         * every column left of the panel for each tile instead of once. */
        if (cfg->order == DEMO_ORDER_LEFT && t + 1 < r->ntasks &&
            (r->tasks[t + 1].group != task->group || r->tasks[t + 1].wave != task->wave)) {
#pragma omp taskwait
        }
    }
}

/* Factorizes, timed, with the swap counters read just before and just
 * after: the bytes the device moved while it ran (write-backs of
 * generate's tiles still under way count too), and those of the whole run
 * so far. */
static void timed_factorize(run_t *r, demo_result_t *res)
{
    pp_stats_t before = PP_STATS_INIT, st = PP_STATS_INIT;
    int before_ok = r->pool != NULL && pp_pool_stats(r->pool, &before) == 0;
    start_phase(r, PHASE_FACTORIZE, (uint64_t)r->ntasks);
    double t0 = demo_now();
    factorize(r);
    res->t_factorize = demo_now() - t0;
    if (r->pool == NULL || pp_pool_stats(r->pool, &st) != 0)
        return;
    res->run_written = st.total.swap_bytes_written;
    res->run_read = st.total.swap_bytes_read;
    if (before_ok) {
        res->fact_written = st.total.swap_bytes_written - before.total.swap_bytes_written;
        res->fact_read = st.total.swap_bytes_read - before.total.swap_bytes_read;
        res->fact_write_ns = st.total.swap_write_ns - before.total.swap_write_ns;
        res->fact_read_ns = st.total.swap_read_ns - before.total.swap_read_ns;
    }
}

int demo_run(const demo_config_t *cfg, demo_progress_t *prog, demo_result_t *res)
{
    run_t r_, *r = &r_;
    memset(r, 0, sizeof *r);
    memset(res, 0, sizeof *res);
    r->res = res;
    r->cfg = cfg;
    r->prog = prog;
    r->b = cfg->b;
    r->T = cfg->n / cfg->b;
    r->tile_bytes = (size_t)cfg->b * cfg->b * sizeof(double);
    int T = r->T, ntiles = T * (T + 1) / 2, rc = -1;
    res->tiles = ntiles;
    res->tile_bytes = r->tile_bytes;
    res->matrix_bytes = (uint64_t)ntiles * r->tile_bytes;
    res->factor_flops = (double)cfg->n * cfg->n * cfg->n / 3.0;

    r->dep = calloc((size_t)ntiles, 1);
    r->err2 = calloc((size_t)ntiles, sizeof *r->err2);
    r->norm2 = calloc((size_t)ntiles, sizeof *r->norm2);
    if (cfg->use_pool)
        r->ref = calloc((size_t)ntiles, sizeof *r->ref);
    else
        r->raw = calloc((size_t)ntiles, sizeof *r->raw);
    if (r->dep == NULL || r->err2 == NULL || r->norm2 == NULL ||
        (r->ref == NULL && r->raw == NULL) || build_tasks(r) != 0) {
        fprintf(stderr, "pinpool-demo: out of memory\n");
        goto out;
    }
    res->tasks = (uint64_t)r->ntasks;
    if (cfg->use_pool && make_pool(r) != 0)
        goto out;

    double t0 = demo_now(), t1;

    /* Generate: one task a tile.  Each put may wait for the swap threads
     * to make room under the limit. */
    start_phase(r, PHASE_GENERATE, (uint64_t)ntiles);
    /* Backwards, so that the tiles the factorisation starts with (the
     * first column) are made last and are still in memory. */
    tile_tasks(r, 1, generate_tile);
    t1 = demo_now();
    res->t_generate = t1 - t0;
    if (phase_failed(r, "generate"))
        goto out;

    /* Factorize: the task graph, ordered by the tiles' dependence tokens. */
    timed_factorize(r, res);
    if (phase_failed(r, "factorize"))
        goto out;
    if (atomic_load_explicit(&r->potrf_info, memory_order_relaxed) != 0) {
        fprintf(stderr, "pinpool-demo: dpotrf: the matrix is not positive definite (info %d)\n",
                atomic_load_explicit(&r->potrf_info, memory_order_relaxed));
        goto out;
    }

    /* Check, through the pool: ||A - L L^T|| / ||A|| tile by tile, or
     * (--check vector) ||A x - L L^T x|| / ||A x||. */
    t0 = demo_now();
    if (cfg->check_vector) {
        start_phase(r, PHASE_CHECK, (uint64_t)T);
        if (check_vector(r, &res->residual) != 0) {
            fprintf(stderr, "pinpool-demo: out of memory for the check\n");
            goto out;
        }
    } else {
        start_phase(r, PHASE_CHECK, (uint64_t)ntiles);
        tile_tasks(r, 0, check_tile);
    }
    t1 = demo_now();
    res->t_check = t1 - t0;
    if (phase_failed(r, "check"))
        goto out;
    if (!cfg->check_vector) {
        double e2 = 0, n2 = 0;
        for (int x = 0; x < ntiles; x++) {
            e2 += r->err2[x];
            n2 += r->norm2[x];
        }
        res->residual = sqrt(e2) / sqrt(n2);
    }

    /* Release: the last owner of each tile goes; the reclaimers free them. */
    start_phase(r, PHASE_RELEASE, (uint64_t)ntiles);
    t0 = demo_now();
    if (r->pool != NULL) {
        res->stats = (pp_stats_t)PP_STATS_INIT;
        pp_pool_stats(r->pool, &res->stats);
        for (unsigned n = 0; n < res->stats.nodes && n < PP_MAX_NODES; n++) {
            pp_node_stats_t ns = PP_NODE_STATS_INIT;
            if (pp_node_stats(r->pool, n, &ns) == 0) {
                res->node_loads[n] = ns.loads;
                res->node_written[n] = ns.swap_bytes_written;
            }
        }
        for (int x = 0; x < ntiles; x++) {
            int prc = pp_release(r->pool, r->ref[x]);
            if (prc != 0) {
                task_failed(r, prc, "pp_release");
                goto out;
            }
            r->ref[x] = PP_REF_NONE;
            count_done(r, 0);
        }
        int drc = pp_pool_drain(r->pool, -1);
        if (drc != 0) {
            task_failed(r, drc, "pp_pool_drain");
            goto out;
        }
        pp_stats_t after = PP_STATS_INIT;
        pp_pool_stats(r->pool, &after);
        res->lag_p50_ns = after.total.lag_p50_ns;
        res->lag_p99_ns = after.total.lag_p99_ns;
        res->lag_count = after.total.lag_count;
        res->frees = after.total.frees;
    } else {
        for (int x = 0; x < ntiles; x++) {
            free(r->raw[x]);
            r->raw[x] = NULL;
            count_done(r, 0);
        }
    }
    res->t_total = res->t_generate + res->t_factorize + res->t_check + (demo_now() - t0);
    rc = 0;
out:
    if (rc != 0 && r->pool != NULL)      /* the owners of the tiles made so far */
        for (int x = 0; x < ntiles; x++)
            if (r->ref[x] != PP_REF_NONE && pp_release(r->pool, r->ref[x]) == 0)
                r->ref[x] = PP_REF_NONE;
    res->nowait_eagain = atomic_load_explicit(&r->nowait_eagain, memory_order_relaxed);
    res->enomem_retries = atomic_load_explicit(&r->enomem_retries, memory_order_relaxed);
    res->prefetches = atomic_load_explicit(&r->prefetches, memory_order_relaxed);
    res->nodes = r->nodes;
    atomic_store_explicit(&prog->phase, (int)PHASE_IDLE, memory_order_relaxed);
    destroy_pool(r);
    if (r->raw != NULL)
        for (int x = 0; x < ntiles; x++)
            free(r->raw[x]);
    free(r->raw);
    free(r->ref);
    free(r->tasks);
    free((void *)r->left);
    free(r->dep);
    free(r->err2);
    free(r->norm2);
    return rc;
}
