/*
 * pinpool-starpu-cholesky -- the demo's tiled Cholesky factorisation on
 * StarPU, for comparison with pinpool-demo (examples/demo/compare).
 *
 *   pinpool-starpu-cholesky [-n N] [-b B] [-m SIZE | --no-limit] [-t THREADS]
 *                           [--sched NAME] [--order right|left] [--wont-use]
 *                           [--direct] [--swap-dir DIR] [--require-swap]
 *                           [--seed S] [--result] [--quiet]
 *
 * The same computation as pinpool-demo: the matrix, the four kernels and
 * the check come from tiles.c; the tiles of the lower triangle are StarPU
 * matrix handles registered with no home node (-1), so StarPU allocates
 * them itself and may evict them.  With a memory limit (default: a quarter
 * of the matrix), STARPU_LIMIT_CPU_MEM caps the memory StarPU allocates in
 * RAM and a disk memory node (StarPU's unistd back end, or unistd_o_direct
 * with --direct) in a private directory receives what does not fit.  Tasks
 * are submitted in the order of the demo's task list; StarPU infers their
 * dependences from the data modes (sequential consistency).
 *
 * Exit status: 0 when every check passed (residual below 1e-10; with a
 * limit, the peak of StarPU's memory use in RAM within the limit; with
 * --require-swap, at least the part of the matrix that does not fit under
 * the limit written to the disk node); 1 when a check failed; 2 for a usage
 * error; 3 when the run could not complete.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "tiles.h"

#include <starpu.h>
#include <cblas.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define RESIDUAL_MAX 1e-10
#define MIB (1024.0 * 1024.0)
#define PROG "pinpool-starpu-cholesky"

enum { EXIT_CHECK = 1, EXIT_USAGE = 2, EXIT_RUN = 3 };
enum { ORDER_RIGHT, ORDER_LEFT };

/* ---------------------------------------------------------------------------
 * Options
 * ------------------------------------------------------------------------- */

typedef struct options {
    int n, b, threads, order, wont_use, direct, no_limit, require_swap;
    int result_line, quiet;
    size_t mem_limit;           /* bytes asked for (-m or the default) */
    const char *sched, *swap_dir;
    uint64_t seed;
} options_t;

static void usage(FILE *f)
{
    fprintf(f,
        "usage: " PROG " [options]\n"
        "  -n, --size N          matrix order (default 8192; a multiple of the tile)\n"
        "  -b, --tile B          tile order (default 512)\n"
        "  -m, --mem-limit SIZE  memory StarPU may use in RAM, with a K, M or G suffix\n"
        "                        (default: a quarter of the matrix; STARPU_LIMIT_CPU_MEM\n"
        "                        takes whole MiB, so it is rounded down)\n"
        "      --no-limit        no limit and no disk node: everything in memory\n"
        "  -t, --threads N       CPU workers (default 2)\n"
        "      --sched NAME      StarPU scheduler (default dmdas)\n"
        "      --order ORDER     right (default: the demo's task order) or left\n"
        "      --wont-use        starpu_data_wont_use on each tile after its last use\n"
        "                        in the factorisation\n"
        "      --direct          the disk node opens its files with O_DIRECT\n"
        "                        (starpu_disk_unistd_o_direct_ops)\n"
        "      --swap-dir DIR    where the private disk directory is made\n"
        "                        (default: $TMPDIR, else /tmp)\n"
        "      --require-swap    fail unless what does not fit under the limit was\n"
        "                        written to the disk node\n"
        "      --seed S          seed of the matrix (default 1)\n"
        "      --result          one line of key=value figures for scripts\n"
        "  -q, --quiet           StarPU's messages off (STARPU_SILENT=1, unless set);\n"
        "                        this program draws no progress line\n"
        "  -h, --help\n"
        "StarPU's performance models go to $STARPU_HOME/.starpu; when STARPU_HOME is\n"
        "unset, to starpu-home/ beside this program.\n");
}

/* 1 if StarPU was built with a scheduler of that name.  Checked up front:
 * StarPU itself would only warn and fall back to eager. */
static int sched_exists(const char *name)
{
    struct starpu_sched_policy **p = starpu_sched_get_predefined_policies();
    for (; p != NULL && *p != NULL; p++)
        if ((*p)->policy_name != NULL && strcmp((*p)->policy_name, name) == 0)
            return 1;
    return 0;
}

static int parse_options(int argc, char **argv, options_t *o)
{
    enum { OPT_NO_LIMIT = 256, OPT_SCHED, OPT_ORDER, OPT_WONT_USE, OPT_DIRECT, OPT_SWAP_DIR,
           OPT_REQUIRE_SWAP, OPT_SEED, OPT_RESULT };
    static const struct option longopts[] = {
        { "size", required_argument, NULL, 'n' },
        { "tile", required_argument, NULL, 'b' },
        { "mem-limit", required_argument, NULL, 'm' },
        { "threads", required_argument, NULL, 't' },
        { "no-limit", no_argument, NULL, OPT_NO_LIMIT },
        { "sched", required_argument, NULL, OPT_SCHED },
        { "order", required_argument, NULL, OPT_ORDER },
        { "wont-use", no_argument, NULL, OPT_WONT_USE },
        { "direct", no_argument, NULL, OPT_DIRECT },
        { "swap-dir", required_argument, NULL, OPT_SWAP_DIR },
        { "require-swap", no_argument, NULL, OPT_REQUIRE_SWAP },
        { "seed", required_argument, NULL, OPT_SEED },
        { "result", no_argument, NULL, OPT_RESULT },
        { "quiet", no_argument, NULL, 'q' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    o->n = 8192;
    o->b = 512;
    o->threads = 2;
    o->sched = "dmdas";
    o->seed = 1;
    const char *tmp = getenv("TMPDIR");
    o->swap_dir = tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp";
    int opt, seed, li = -1, limit_given = 0;
    while ((opt = getopt_long(argc, argv, "n:b:m:t:qh", longopts, &li)) != -1) {
        switch (opt) {
        case 'n':
            if (demo_parse_int(optarg, 1, 1 << 20, &o->n) != 0)
                goto bad;
            break;
        case 'b':
            if (demo_parse_int(optarg, 1, 1 << 14, &o->b) != 0)
                goto bad;
            break;
        case 'm':
            if (demo_parse_size(optarg, &o->mem_limit) != 0 || o->mem_limit == 0)
                goto bad;
            limit_given = 1;
            break;
        case 't':
            /* StarPU was built for at most STARPU_MAXCPUS CPU workers. */
            if (demo_parse_int(optarg, 1, STARPU_MAXCPUS, &o->threads) != 0)
                goto bad;
            break;
        case OPT_NO_LIMIT: o->no_limit = 1; break;
        case OPT_SCHED: o->sched = optarg; break;
        case OPT_ORDER:
            if (strcmp(optarg, "right") == 0)
                o->order = ORDER_RIGHT;
            else if (strcmp(optarg, "left") == 0)
                o->order = ORDER_LEFT;
            else
                goto bad;
            break;
        case OPT_WONT_USE: o->wont_use = 1; break;
        case OPT_DIRECT: o->direct = 1; break;
        case OPT_SWAP_DIR: o->swap_dir = optarg; break;
        case OPT_REQUIRE_SWAP: o->require_swap = 1; break;
        case OPT_SEED:
            if (demo_parse_int(optarg, 0, 0x7fffffff, &seed) != 0)
                goto bad;
            o->seed = (uint64_t)seed;
            break;
        case OPT_RESULT: o->result_line = 1; break;
        case 'q': o->quiet = 1; break;
        case 'h': usage(stdout); exit(0);
        default: usage(stderr); return -1;
        }
    }
    if (optind != argc) {
        fprintf(stderr, PROG ": unexpected argument '%s'\n", argv[optind]);
        return -1;
    }
    if (o->n % o->b != 0) {
        fprintf(stderr, PROG ": the matrix order (%d) must be a multiple of the tile "
                "order (%d)\n", o->n, o->b);
        return -1;
    }
    if (o->no_limit && (limit_given || o->direct || o->require_swap)) {
        fprintf(stderr, PROG ": --no-limit takes no --mem-limit, --direct or --require-swap\n");
        return -1;
    }
    if (!sched_exists(o->sched)) {
        fprintf(stderr, PROG ": StarPU has no scheduler '%s'; it has:", o->sched);
        struct starpu_sched_policy **p = starpu_sched_get_predefined_policies();
        for (; p != NULL && *p != NULL; p++)
            fprintf(stderr, " %s", (*p)->policy_name);
        fprintf(stderr, "\n");
        return -1;
    }
    int T = o->n / o->b;
    uint64_t tile = (uint64_t)o->b * o->b * sizeof(double);
    uint64_t matrix = (uint64_t)T * (T + 1) / 2 * tile;
    if (o->no_limit) {
        o->mem_limit = 0;
        return 0;
    }
    if (!limit_given)
        o->mem_limit = (size_t)(matrix / 4);
    /* STARPU_LIMIT_CPU_MEM is a number of MiB: round down, so that StarPU
     * never gets more than was asked for. */
    o->mem_limit = o->mem_limit / (1024 * 1024) * (1024 * 1024);
    /* As in pinpool-demo: each worker holds up to three tiles for a task
     * (the check's tasks also a scratch tile), and StarPU fetches the next
     * task's tiles ahead; below four tiles per worker it cannot make
     * progress. */
    uint64_t need = (uint64_t)o->threads * 4 * tile;
    if (o->mem_limit < need) {
        fprintf(stderr, PROG ": a memory limit of %.1f MiB (whole MiB: STARPU_LIMIT_CPU_MEM) "
                "is too small: %d workers hold up to 4 tiles of %.1f MiB each; give at "
                "least %.1f MiB (-m), or fewer threads or a smaller tile\n",
                (double)o->mem_limit / MIB, o->threads, (double)tile / MIB,
                ceil((double)need / MIB));
        return -1;
    }
    long page = sysconf(_SC_PAGESIZE);
    if (o->direct && page > 0 && tile % (uint64_t)page != 0) {
        fprintf(stderr, PROG ": --direct: a tile (%" PRIu64 " bytes) must be a multiple of "
                "the page size (%ld) for O_DIRECT\n", tile, page);
        return -1;
    }
    return 0;
bad:
    if (opt < 256)
        fprintf(stderr, PROG ": bad value '%s' for -%c\n", optarg, opt);
    else
        fprintf(stderr, PROG ": bad value '%s' for --%s\n", optarg,
                li >= 0 ? longopts[li].name : "?");
    usage(stderr);
    return -1;
}

/* ---------------------------------------------------------------------------
 * What the codelets share (set before the first task, read-only after)
 * ------------------------------------------------------------------------- */

static int g_n, g_b;
static uint64_t g_seed;
static double *g_err2, *g_norm2;        /* the check, per stored tile */
static _Atomic int g_potrf_info;        /* first nonzero LAPACKE_dpotrf info */
static _Atomic int g_bad_layout;        /* a tile StarPU gave with ld != b */
static _Atomic long long g_peak_used;   /* bytes, see sample_used() */

/* StarPU reports the bytes it has allocated on a memory node as its total
 * minus what is available (STARPU_LIMIT_CPU_MEM sets the total), but keeps
 * no peak.  Each task samples it as it starts, when its own tiles are
 * allocated; the maximum is a lower bound of the true peak, which may fall
 * between two samples. */
static void sample_used(void)
{
    long long used = 0;
    unsigned nodes = starpu_memory_nodes_get_count();
    for (unsigned node = 0; node < nodes; node++) {
        if (starpu_node_get_kind(node) != STARPU_CPU_RAM)
            continue;
        starpu_ssize_t total = starpu_memory_get_total(node);
        starpu_ssize_t avail = starpu_memory_get_available(node);
        if (total > 0 && avail >= 0)
            used += (long long)(total - avail);
    }
    long long peak = atomic_load_explicit(&g_peak_used, memory_order_relaxed);
    while (used > peak &&
           !atomic_compare_exchange_weak_explicit(&g_peak_used, &peak, used,
                                                  memory_order_relaxed, memory_order_relaxed))
        ;
}

/* A tile's pointer; StarPU allocates tiles itself (home node -1), so their
 * leading dimension is checked against what tiles.c assumes. */
static double *tile_ptr(void *buffer)
{
    if ((int)STARPU_MATRIX_GET_LD(buffer) != g_b)
        atomic_store_explicit(&g_bad_layout, 1, memory_order_relaxed);
    return (double *)STARPU_MATRIX_GET_PTR(buffer);
}

/* ---------------------------------------------------------------------------
 * Codelets
 * ------------------------------------------------------------------------- */

static void generate_cpu(void *buffers[], void *cl_arg)
{
    int i, j;
    starpu_codelet_unpack_args(cl_arg, &i, &j);
    sample_used();
    demo_a_tile(g_seed, g_n, g_b, i, j, tile_ptr(buffers[0]));
}

/* The kernel's kind is the codelet's (kind_of_task); in0/in1 as tiles.h. */
static void kernel_cpu(int kind, void *buffers[])
{
    sample_used();
    double *in0 = NULL, *in1 = NULL, *out;
    switch (kind) {
    case K_POTRF: out = tile_ptr(buffers[0]); break;
    case K_GEMM:
        in0 = tile_ptr(buffers[0]);
        in1 = tile_ptr(buffers[1]);
        out = tile_ptr(buffers[2]);
        break;
    default:
        in0 = tile_ptr(buffers[0]);
        out = tile_ptr(buffers[1]);
        break;
    }
    int info = demo_kernel(kind, g_b, in0, in1, out);
    if (info != 0) {
        int expected = 0;
        atomic_compare_exchange_strong_explicit(&g_potrf_info, &expected, info,
                                                memory_order_relaxed, memory_order_relaxed);
    }
}

static void potrf_cpu(void *buffers[], void *cl_arg) { (void)cl_arg; kernel_cpu(K_POTRF, buffers); }
static void trsm_cpu(void *buffers[], void *cl_arg) { (void)cl_arg; kernel_cpu(K_TRSM, buffers); }
static void syrk_cpu(void *buffers[], void *cl_arg) { (void)cl_arg; kernel_cpu(K_SYRK, buffers); }
static void gemm_cpu(void *buffers[], void *cl_arg) { (void)cl_arg; kernel_cpu(K_GEMM, buffers); }

/* The check of tile (i, j) is a chain of tasks on an accumulator tile:
 * zero it, one step per k <= j (acc += L_ik L_jk^T), then compare with A_ij
 * regenerated.  On the diagonal L_ik and L_jk are one handle, passed once. */
static void zero_cpu(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    sample_used();
    memset(tile_ptr(buffers[0]), 0, (size_t)g_b * g_b * sizeof(double));
}

static void step_cpu(void *buffers[], void *cl_arg)
{
    int i, j, k;
    starpu_codelet_unpack_args(cl_arg, &i, &j, &k);
    sample_used();
    double *x = tile_ptr(buffers[0]), *y = tile_ptr(buffers[1]);
    demo_check_step(g_b, i, j, k, x, y, tile_ptr(buffers[3]), tile_ptr(buffers[2]));
}

static void step_diag_cpu(void *buffers[], void *cl_arg)
{
    int i, j, k;
    starpu_codelet_unpack_args(cl_arg, &i, &j, &k);
    sample_used();
    double *x = tile_ptr(buffers[0]);
    demo_check_step(g_b, i, j, k, x, x, tile_ptr(buffers[2]), tile_ptr(buffers[1]));
}

static void end_cpu(void *buffers[], void *cl_arg)
{
    int i, j;
    starpu_codelet_unpack_args(cl_arg, &i, &j);
    sample_used();
    int idx = demo_tile_index(i, j);
    double e2 = 0, n2 = 0;
    demo_check_end(g_seed, g_n, g_b, i, j, tile_ptr(buffers[0]), tile_ptr(buffers[1]), &e2, &n2);
    g_err2[idx] = e2;       /* one task per tile: no other writer */
    g_norm2[idx] = n2;
}

/* History-based models: dmdas needs the expected length of each task.
 * STARPU_CALIBRATE's default (unset) measures a model until it has enough
 * samples for a tile size, then only reads it. */
#define MODEL(var, sym) \
    static struct starpu_perfmodel var = { .type = STARPU_HISTORY_BASED, .symbol = sym }
MODEL(generate_model, "pinpool_generate");
MODEL(potrf_model, "pinpool_potrf");
MODEL(trsm_model, "pinpool_trsm");
MODEL(syrk_model, "pinpool_syrk");
MODEL(gemm_model, "pinpool_gemm");
MODEL(zero_model, "pinpool_check_zero");
MODEL(step_model, "pinpool_check_step");
MODEL(step_diag_model, "pinpool_check_step_diag");
MODEL(end_model, "pinpool_check_end");

static struct starpu_codelet generate_cl = {
    .cpu_funcs = { generate_cpu }, .nbuffers = 1, .modes = { STARPU_W },
    .model = &generate_model, .name = "generate" };
static struct starpu_codelet potrf_cl = {
    .cpu_funcs = { potrf_cpu }, .nbuffers = 1, .modes = { STARPU_RW },
    .model = &potrf_model, .name = "potrf" };
static struct starpu_codelet trsm_cl = {
    .cpu_funcs = { trsm_cpu }, .nbuffers = 2, .modes = { STARPU_R, STARPU_RW },
    .model = &trsm_model, .name = "trsm" };
static struct starpu_codelet syrk_cl = {
    .cpu_funcs = { syrk_cpu }, .nbuffers = 2, .modes = { STARPU_R, STARPU_RW },
    .model = &syrk_model, .name = "syrk" };
static struct starpu_codelet gemm_cl = {
    .cpu_funcs = { gemm_cpu }, .nbuffers = 3, .modes = { STARPU_R, STARPU_R, STARPU_RW },
    .model = &gemm_model, .name = "gemm" };
static struct starpu_codelet zero_cl = {
    .cpu_funcs = { zero_cpu }, .nbuffers = 1, .modes = { STARPU_W },
    .model = &zero_model, .name = "check_zero" };
static struct starpu_codelet step_cl = {
    .cpu_funcs = { step_cpu }, .nbuffers = 4,
    .modes = { STARPU_R, STARPU_R, STARPU_RW, STARPU_SCRATCH },
    .model = &step_model, .name = "check_step" };
static struct starpu_codelet step_diag_cl = {
    .cpu_funcs = { step_diag_cpu }, .nbuffers = 3,
    .modes = { STARPU_R, STARPU_RW, STARPU_SCRATCH },
    .model = &step_diag_model, .name = "check_step_diag" };
static struct starpu_codelet end_cl = {
    .cpu_funcs = { end_cpu }, .nbuffers = 2, .modes = { STARPU_R, STARPU_SCRATCH },
    .model = &end_model, .name = "check_end" };

static struct starpu_codelet *const kernel_cls[] = {
    [K_POTRF] = &potrf_cl, [K_TRSM] = &trsm_cl, [K_SYRK] = &syrk_cl, [K_GEMM] = &gemm_cl };

/* ---------------------------------------------------------------------------
 * The task list (as examples/demo/cholesky.c's build_tasks)
 * ------------------------------------------------------------------------- */

typedef struct task {
    int kind, nin;
    int in[2];
    int out;
} task_t;

static task_t mk(int kind, int nin, int in0, int in1, int out)
{
    return (task_t){ kind, nin, { in0, in1 }, out };
}

/* Fills tasks (room for every task of the factorisation) in submission
 * order; returns their number. */
static int build_tasks(int T, int order, task_t *tasks)
{
    int t = 0;
    if (order == ORDER_RIGHT) {
        /* Right-looking, as the demo: for each step k, POTRF of (k, k), the
         * TRSMs under it, then SYRK/GEMM updates of the trailing matrix. */
        for (int k = 0; k < T; k++) {
            tasks[t++] = mk(K_POTRF, 0, 0, 0, demo_tile_index(k, k));
            for (int i = k + 1; i < T; i++)
                tasks[t++] = mk(K_TRSM, 1, demo_tile_index(k, k), 0, demo_tile_index(i, k));
            for (int i = k + 1; i < T; i++) {
                tasks[t++] = mk(K_SYRK, 1, demo_tile_index(i, k), 0, demo_tile_index(i, i));
                for (int j = k + 1; j < i; j++)
                    tasks[t++] = mk(K_GEMM, 2, demo_tile_index(i, k), demo_tile_index(j, k),
                                    demo_tile_index(i, j));
            }
        }
    } else {
        /* Left-looking, panel by panel: column j gets all its updates from
         * the columns before it, then is factorised. */
        for (int j = 0; j < T; j++) {
            for (int k = 0; k < j; k++)
                tasks[t++] = mk(K_SYRK, 1, demo_tile_index(j, k), 0, demo_tile_index(j, j));
            for (int i = j + 1; i < T; i++)
                for (int k = 0; k < j; k++)
                    tasks[t++] = mk(K_GEMM, 2, demo_tile_index(i, k), demo_tile_index(j, k),
                                    demo_tile_index(i, j));
            tasks[t++] = mk(K_POTRF, 0, 0, 0, demo_tile_index(j, j));
            for (int i = j + 1; i < T; i++)
                tasks[t++] = mk(K_TRSM, 1, demo_tile_index(j, j), 0, demo_tile_index(i, j));
        }
    }
    return t;
}

/* ---------------------------------------------------------------------------
 * Bytes moved
 * ------------------------------------------------------------------------- */

/* rchar and wchar of /proc/self/io: the bytes this process (all threads,
 * StarPU's and glibc's AIO threads included) has passed through read and
 * write system calls.  *self: bytes this read itself returned, counted in
 * rchar from then on. */
static int proc_io(uint64_t *rchar, uint64_t *wchar, uint64_t *self)
{
    char buf[1024];
    int fd = open("/proc/self/io", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t len = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (len <= 0)
        return -1;
    buf[len] = '\0';
    const char *r = strstr(buf, "rchar:"), *w = strstr(buf, "wchar:");
    if (r == NULL || w == NULL)
        return -1;
    *rchar = strtoull(r + 6, NULL, 10);
    *wchar = strtoull(w + 6, NULL, 10);
    *self = (uint64_t)len;
    return 0;
}

/* StarPU's own count of the bytes it copied between RAM and the disk node
 * (its bus profiling counters, kept whether profiling is on or not).
 * Reading a bus's counters resets them. */
static void bus_bytes(int disk_node, uint64_t *to_disk, uint64_t *from_disk)
{
    *to_disk = *from_disk = 0;
    int nbus = starpu_bus_get_count();
    for (int bus = 0; bus < nbus; bus++) {
        struct starpu_profiling_bus_info info;
        int src = starpu_bus_get_src(bus), dst = starpu_bus_get_dst(bus);
        if (starpu_bus_get_profiling_info(bus, &info) != 0 || disk_node < 0)
            continue;
        if (dst == disk_node && src != disk_node)
            *to_disk += (uint64_t)info.transferred_bytes;
        else if (src == disk_node && dst != disk_node)
            *from_disk += (uint64_t)info.transferred_bytes;
    }
}

/* StarPU loads a codelet's history-based model from $STARPU_HOME the first
 * time a task of it is submitted, which would put that file's read inside
 * the measured span.  Asking for a task's expected length loads it now. */
static void load_model(struct starpu_codelet *cl, starpu_data_handle_t h)
{
    struct starpu_task task;
    starpu_task_init(&task);
    task.cl = cl;
    for (int x = 0; x < cl->nbuffers; x++)
        task.handles[x] = h;       /* only the sizes matter: the footprint */
    (void)starpu_task_expected_length(&task, starpu_worker_get_perf_archtype(0, 0), 0);
    starpu_task_clean(&task);
}

/* ---------------------------------------------------------------------------
 * The private disk directory
 * ------------------------------------------------------------------------- */

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    if ((flag == FTW_DP ? rmdir(path) : unlink(path)) != 0)
        fprintf(stderr, PROG ": removing %s: %s\n", path, strerror(errno));
    return 0;
}

/* Removes the directory made by mkdtemp and what StarPU left in it (its
 * unistd back end spreads files over subdirectories); never follows a
 * symbolic link out of it. */
static void remove_dir(const char *dir)
{
    if (nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS) != 0)
        fprintf(stderr, PROG ": removing %s: %s\n", dir, strerror(errno));
}

/* STARPU_HOME beside the program (the build tree's examples/) unless the
 * caller chose one, so runs never depend on the state of $HOME/.starpu. */
static void default_starpu_home(void)
{
    const char *home = getenv("STARPU_HOME");
    if (home != NULL && home[0] != '\0')
        return;
    char exe[PATH_MAX], dir[PATH_MAX + 16];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0)
        return;
    exe[len] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash == NULL)
        return;
    *slash = '\0';
    snprintf(dir, sizeof dir, "%s/starpu-home", exe);
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return;         /* StarPU's own default then */
    setenv("STARPU_HOME", dir, 1);
}

/* ---------------------------------------------------------------------------
 * The run
 * ------------------------------------------------------------------------- */

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int insert_failed(int rc, const char *what)
{
    if (rc == 0)
        return 0;
    fprintf(stderr, PROG ": starpu_task_insert (%s): %s\n", what, strerror(-rc));
    return -1;
}

typedef struct result {
    double t_generate, t_factorize, t_check, t_total, residual;
    uint64_t written, read;             /* /proc/self/io, generate..factorize */
    uint64_t disk_written, disk_read;   /* StarPU's bus counters, same span */
    long long peak_used;                /* sampled, see sample_used() */
    int ntasks;
} result_t;

/* Submits the factorisation's tasks in order (StarPU orders them by their
 * data modes); with --wont-use, starpu_data_wont_use after each tile's last
 * task.  0, or -1 after printing why. */
static int submit_factorize(const options_t *o, const task_t *tasks, int ntasks,
                            const int *last_use, starpu_data_handle_t *h)
{
    for (int t = 0; t < ntasks; t++) {
        const task_t *k = &tasks[t];
        int r;
        switch (k->nin) {
        case 0:
            r = starpu_task_insert(kernel_cls[k->kind], STARPU_RW, h[k->out], 0);
            break;
        case 1:
            r = starpu_task_insert(kernel_cls[k->kind], STARPU_R, h[k->in[0]],
                                   STARPU_RW, h[k->out], 0);
            break;
        default:
            r = starpu_task_insert(kernel_cls[k->kind], STARPU_R, h[k->in[0]],
                                   STARPU_R, h[k->in[1]], STARPU_RW, h[k->out], 0);
            break;
        }
        if (insert_failed(r, "factorize"))
            return -1;
        if (o->wont_use) {
            /* Ordered after the tasks submitted so far on the tile. */
            for (int x = 0; x < k->nin; x++)
                if (last_use[k->in[x]] == t)
                    starpu_data_wont_use(h[k->in[x]]);
            if (last_use[k->out] == t)
                starpu_data_wont_use(h[k->out]);
        }
    }
    return 0;
}

/* Submits the check's tasks, tile by tile, column by column as the demo;
 * each tile's accumulator is a tile StarPU allocates (and may evict),
 * freed once its chain is done.  0, or -1 after printing why. */
static int submit_check(int T, int b, starpu_data_handle_t *h, starpu_data_handle_t tri,
                        starpu_data_handle_t scratch_a)
{
    for (int j = 0; j < T; j++)
        for (int i = j; i < T; i++) {
            starpu_data_handle_t acc;
            starpu_matrix_data_register(&acc, -1, 0, (uint32_t)b, (uint32_t)b, (uint32_t)b,
                                        sizeof(double));
            if (insert_failed(starpu_task_insert(&zero_cl, STARPU_W, acc, 0), "check"))
                return -1;
            for (int k = 0; k <= j; k++) {
                int r;
                if (i == j)
                    r = starpu_task_insert(&step_diag_cl, STARPU_R, h[demo_tile_index(i, k)],
                                           STARPU_RW, acc, STARPU_SCRATCH, tri,
                                           STARPU_VALUE, &i, sizeof i, STARPU_VALUE, &j, sizeof j,
                                           STARPU_VALUE, &k, sizeof k, 0);
                else
                    r = starpu_task_insert(&step_cl, STARPU_R, h[demo_tile_index(i, k)],
                                           STARPU_R, h[demo_tile_index(j, k)], STARPU_RW, acc,
                                           STARPU_SCRATCH, tri,
                                           STARPU_VALUE, &i, sizeof i, STARPU_VALUE, &j, sizeof j,
                                           STARPU_VALUE, &k, sizeof k, 0);
                if (insert_failed(r, "check"))
                    return -1;
            }
            if (insert_failed(starpu_task_insert(&end_cl, STARPU_R, acc, STARPU_SCRATCH, scratch_a,
                                                 STARPU_VALUE, &i, sizeof i,
                                                 STARPU_VALUE, &j, sizeof j, 0), "check"))
                return -1;
            starpu_data_unregister_submit(acc);
        }
    return 0;
}

/* Registers the tiles, generates, factorises and checks.  Returns 0, or -1
 * after printing why. */
static int run(const options_t *o, int disk_node, result_t *res)
{
    int T = o->n / o->b, ntiles = T * (T + 1) / 2, b = o->b, rc = -1;
    size_t nt = 0;
    for (int k = 0; k < T; k++) {
        size_t m = (size_t)(T - k - 1);
        nt += 1 + m + m + m * (m - 1) / 2;
    }
    starpu_data_handle_t *h = calloc((size_t)ntiles, sizeof *h);
    task_t *tasks = calloc(nt, sizeof *tasks);
    int *last_use = malloc((size_t)ntiles * sizeof *last_use);
    g_err2 = calloc((size_t)ntiles, sizeof *g_err2);
    g_norm2 = calloc((size_t)ntiles, sizeof *g_norm2);
    starpu_data_handle_t tri = NULL, scratch_a = NULL;
    if (h == NULL || tasks == NULL || last_use == NULL || g_err2 == NULL || g_norm2 == NULL) {
        fprintf(stderr, PROG ": out of memory\n");
        goto out;
    }
    res->ntasks = build_tasks(T, o->order, tasks);
    /* The last factorisation task to use each tile, for --wont-use. */
    for (int x = 0; x < ntiles; x++)
        last_use[x] = -1;
    for (int t = 0; t < res->ntasks; t++) {
        for (int x = 0; x < tasks[t].nin; x++)
            last_use[tasks[t].in[x]] = t;
        last_use[tasks[t].out] = t;
    }

    /* No home node (-1): StarPU allocates each tile where a task first
     * needs it, and may write it to the disk node to make room. */
    for (int x = 0; x < ntiles; x++)
        starpu_matrix_data_register(&h[x], -1, 0, (uint32_t)b, (uint32_t)b, (uint32_t)b,
                                    sizeof(double));
    starpu_matrix_data_register(&tri, -1, 0, (uint32_t)b, (uint32_t)b, (uint32_t)b,
                                sizeof(double));
    starpu_matrix_data_register(&scratch_a, -1, 0, (uint32_t)b, (uint32_t)b, (uint32_t)b,
                                sizeof(double));
    struct starpu_codelet *all_cls[] = { &generate_cl, &potrf_cl, &trsm_cl, &syrk_cl, &gemm_cl,
                                         &zero_cl, &step_cl, &step_diag_cl, &end_cl };
    for (size_t c = 0; c < sizeof all_cls / sizeof all_cls[0]; c++)
        load_model(all_cls[c], h[0]);

    /* The measured span: from here to the end of the factorisation the
     * program itself does no I/O (no progress line, nothing printed, the
     * models already loaded), so the growth of rchar and wchar is what
     * StarPU read from and wrote to its disk node (plus the bytes of the
     * first read of /proc/self/io, subtracted). */
    uint64_t r0, w0, self0, r1, w1, self1, dw, dr;
    int io_ok = proc_io(&r0, &w0, &self0) == 0;
    bus_bytes(disk_node, &dw, &dr);             /* resets StarPU's counters */
    double t0 = now(), t1;

    /* Generate: one task a tile (STARPU_W: nothing to fetch). */
    for (int i = 0; i < T; i++)
        for (int j = 0; j <= i; j++)
            if (insert_failed(starpu_task_insert(&generate_cl, STARPU_W, h[demo_tile_index(i, j)],
                                                 STARPU_VALUE, &i, sizeof i,
                                                 STARPU_VALUE, &j, sizeof j, 0), "generate"))
                goto out;
    starpu_task_wait_for_all();
    t1 = now();
    res->t_generate = t1 - t0;

    /* Factorize: the task list in order; StarPU orders the tasks by their
     * data modes. */
    t0 = now();
    if (submit_factorize(o, tasks, res->ntasks, last_use, h) != 0)
        goto out;
    starpu_task_wait_for_all();
    t1 = now();
    res->t_factorize = t1 - t0;
    if (io_ok && proc_io(&r1, &w1, &self1) == 0) {
        res->read = r1 - r0 - self0;
        res->written = w1 - w0;
    }
    bus_bytes(disk_node, &res->disk_written, &res->disk_read);
    (void)self1;
    if (atomic_load_explicit(&g_potrf_info, memory_order_relaxed) != 0) {
        fprintf(stderr, PROG ": dpotrf: the matrix is not positive definite (info %d)\n",
                atomic_load_explicit(&g_potrf_info, memory_order_relaxed));
        goto out;
    }

    /* Check: ||A - L L^T|| tile by tile, column by column as the demo; each
     * tile's accumulator is a tile StarPU allocates (and may evict), freed
     * once its chain is done. */
    t0 = now();
    if (submit_check(T, b, h, tri, scratch_a) != 0)
        goto out;
    starpu_task_wait_for_all();
    t1 = now();
    res->t_check = t1 - t0;
    if (atomic_load_explicit(&g_bad_layout, memory_order_relaxed)) {
        fprintf(stderr, PROG ": StarPU gave a tile whose leading dimension is not %d\n", b);
        goto out;
    }
    double e2 = 0, n2 = 0;
    for (int x = 0; x < ntiles; x++) {
        e2 += g_err2[x];
        n2 += g_norm2[x];
    }
    res->residual = sqrt(e2) / sqrt(n2);

    /* Release: the tiles' contents are not needed back anywhere. */
    t0 = now();
    for (int x = 0; x < ntiles; x++) {
        starpu_data_unregister_no_coherency(h[x]);
        h[x] = NULL;
    }
    res->t_total = res->t_generate + res->t_factorize + res->t_check + (now() - t0);
    res->peak_used = atomic_load_explicit(&g_peak_used, memory_order_relaxed);
    rc = 0;
out:
    if (rc != 0)
        starpu_task_wait_for_all();
    if (h != NULL)
        for (int x = 0; x < ntiles; x++)
            if (h[x] != NULL)
                starpu_data_unregister_no_coherency(h[x]);
    if (tri != NULL)
        starpu_data_unregister_no_coherency(tri);
    if (scratch_a != NULL)
        starpu_data_unregister_no_coherency(scratch_a);
    free(h);
    free(tasks);
    free(last_use);
    free(g_err2);
    free(g_norm2);
    g_err2 = g_norm2 = NULL;
    return rc;
}

/* Prints one run's figures; returns the number of failed checks. */
static int report(const options_t *op, const result_t *rp, uint64_t matrix)
{
    const options_t o = *op;
    const result_t res = *rp;
    int failed = 0;
    double flops = (double)o.n * o.n * o.n / 3.0;
    printf("  generate  %8.2f s\n", res.t_generate);
    printf("  factorize %8.2f s  %6.1f GFLOP/s  (%d tasks)\n", res.t_factorize,
           flops / res.t_factorize * 1e-9, res.ntasks);
    printf("  check     %8.2f s\n", res.t_check);
    printf("  total     %8.2f s\n", res.t_total);
    int res_ok = res.residual < RESIDUAL_MAX;
    failed += !res_ok;
    printf("  residual  ||A - L*L^T|| / ||A|| = %.3e  (below %.0e: %s)\n", res.residual,
           RESIDUAL_MAX, res_ok ? "ok" : "FAILED");
    printf("  process I/O (/proc/self/io, generate and factorize): written %.1f MiB, "
           "read %.1f MiB\n", (double)res.written / MIB, (double)res.read / MIB);
    if (o.mem_limit != 0) {
        printf("  disk node (StarPU's bus counters, same span): written %.1f MiB, read %.1f MiB"
               "  (%.2fx the matrix written; process I/O less these: %+lld and %+lld bytes)\n",
               (double)res.disk_written / MIB, (double)res.disk_read / MIB,
               (double)res.disk_written / (double)matrix,
               (long long)res.written - (long long)res.disk_written,
               (long long)res.read - (long long)res.disk_read);
        if (o.require_swap) {
            /* What does not fit under the limit must have gone to disk at
             * least once: every tile is written by generate. */
            uint64_t must = matrix > o.mem_limit ? matrix - o.mem_limit : 0;
            int sw_ok = res.disk_written >= must;
            failed += !sw_ok;
            printf("  --require-swap: at least %.1f MiB (the matrix less the limit) written "
                   "to disk: %s\n", (double)must / MIB, sw_ok ? "ok" : "FAILED");
        }
        int peak_ok = res.peak_used <= (long long)o.mem_limit;
        failed += !peak_ok;
        printf("  peak used by StarPU in RAM %.1f MiB, sampled at each task's start "
               "(limit %.1f MiB: %s)\n", (double)res.peak_used / MIB,
               (double)o.mem_limit / MIB, peak_ok ? "ok" : "FAILED");
    } else {
        printf("  peak used by StarPU in RAM %.1f MiB, sampled at each task's start\n",
               (double)res.peak_used / MIB);
    }
    return failed;
}

/* ---------------------------------------------------------------------------
 * main
 * ------------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    options_t o;
    memset(&o, 0, sizeof o);
    if (parse_options(argc, argv, &o) != 0)
        return EXIT_USAGE;
    setvbuf(stdout, NULL, _IOLBF, 0);
    /* One BLAS thread per task: the tasks are the parallelism. */
    openblas_set_num_threads(1);
    g_n = o.n;
    g_b = o.b;
    g_seed = o.seed;
    int T = o.n / o.b, tiles = T * (T + 1) / 2;
    uint64_t tile = (uint64_t)o.b * o.b * sizeof(double);
    uint64_t matrix = (uint64_t)tiles * tile;

    /* StarPU reads its configuration from the environment at starpu_init:
     * the command line's choices replace whatever the caller had set. */
    char num[32];
    snprintf(num, sizeof num, "%d", o.threads);
    setenv("STARPU_NCPU", num, 1);
    setenv("STARPU_NCUDA", "0", 1);
    setenv("STARPU_NOPENCL", "0", 1);
    setenv("STARPU_SCHED", o.sched, 1);
    unsetenv("STARPU_LIMIT_CPU_NUMA_MEM");      /* would take precedence */
    if (o.mem_limit != 0) {
        snprintf(num, sizeof num, "%zu", o.mem_limit / (1024 * 1024));
        setenv("STARPU_LIMIT_CPU_MEM", num, 1);
    } else {
        unsetenv("STARPU_LIMIT_CPU_MEM");
    }
    default_starpu_home();
    /* StarPU's own messages (calibration notices, warnings) go to stderr,
     * and inside the measured span they would count as written bytes in
     * /proc/self/io: -q silences them unless the caller chose otherwise. */
    if (o.quiet)
        setenv("STARPU_SILENT", "1", 0);

    char dir[PATH_MAX];
    dir[0] = '\0';
    if (o.mem_limit != 0) {
        snprintf(dir, sizeof dir, "%s/pinpool-starpu-XXXXXX", o.swap_dir);
        if (mkdtemp(dir) == NULL) {
            fprintf(stderr, PROG ": cannot make a directory under %s: %s\n", o.swap_dir,
                    strerror(errno));
            return EXIT_RUN;
        }
    }
    int ret = starpu_init(NULL);
    if (ret != 0) {
        fprintf(stderr, PROG ": starpu_init: %s\n", strerror(-ret));
        if (dir[0] != '\0')
            remove_dir(dir);
        return EXIT_RUN;
    }
    int disk_node = -1;
    /* Room on disk for the whole matrix twice: StarPU keeps a tile's disk
     * copy allocated while the tile is in RAM too. */
    starpu_ssize_t disk_size = (starpu_ssize_t)(2 * matrix);
    if (disk_size < STARPU_DISK_SIZE_MIN)
        disk_size = STARPU_DISK_SIZE_MIN;
    if (o.mem_limit != 0) {
        disk_node = starpu_disk_register(o.direct ? &starpu_disk_unistd_o_direct_ops
                                                  : &starpu_disk_unistd_ops,
                                         dir, disk_size);
        if (disk_node < 0) {
            fprintf(stderr, PROG ": starpu_disk_register (%s): %s\n", dir, strerror(-disk_node));
            starpu_shutdown();
            remove_dir(dir);
            return EXIT_RUN;
        }
    }

    int major, minor, release;
    starpu_get_version(&major, &minor, &release);
    printf(PROG ": tiled Cholesky of an SPD matrix of order %d, tiles of %dx%d "
           "(%d per side, %d stored: %.1f MiB, %.1f MiB each)\n",
           o.n, o.b, o.b, T, tiles, (double)matrix / MIB, (double)tile / MIB);
    printf("  StarPU %d.%d.%d, scheduler %s, %u CPU workers, one BLAS thread per task "
           "(OpenBLAS %s), %s-looking task order%s\n", major, minor, release, o.sched,
           starpu_cpu_worker_get_count(), openblas_get_corename(),
           o.order == ORDER_RIGHT ? "right" : "left", o.wont_use ? ", --wont-use" : "");
    if (o.mem_limit != 0)
        printf("  memory limit %.1f MiB (%.2f of the matrix; STARPU_LIMIT_CPU_MEM=%zu), "
               "disk node %s under %s (%.1f MiB)\n", (double)o.mem_limit / MIB,
               (double)o.mem_limit / (double)matrix, o.mem_limit / (1024 * 1024),
               o.direct ? "unistd_o_direct" : "unistd", dir, (double)disk_size / MIB);
    else
        printf("  no memory limit, no disk node\n");
    printf("  performance models under STARPU_HOME=%s\n",
           getenv("STARPU_HOME") ? getenv("STARPU_HOME") : "(StarPU's default: $HOME)");

    result_t res;
    memset(&res, 0, sizeof res);
    int rc = run(&o, disk_node, &res);
    starpu_shutdown();
    if (dir[0] != '\0')
        remove_dir(dir);
    if (rc != 0)
        return EXIT_RUN;

    int failed = report(&o, &res, matrix);
    struct rusage ru;
    long rss = getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_maxrss : 0;
    printf("  process: peak RSS %.1f MiB (%.2fx the matrix)\n", (double)rss / 1024.0,
           (double)rss * 1024.0 / (double)matrix);
    if (o.result_line)
        printf("result: impl=starpu-%s%s n=%d b=%d threads=%d limit=%zu factorize_s=%.4f "
               "total_s=%.4f written=%" PRIu64 " read=%" PRIu64 " peak_resident=%lld "
               "peak_rss=%ld residual=%.3e ok=%d\n",
               o.sched, o.mem_limit == 0 ? "-nolimit" : "", o.n, o.b, o.threads, o.mem_limit,
               res.t_factorize, res.t_total, res.written, res.read, res.peak_used, rss * 1024L,
               res.residual, failed == 0);
    if (failed) {
        printf(PROG ": %d check%s FAILED\n", failed, failed > 1 ? "s" : "");
        return EXIT_CHECK;
    }
    printf(PROG ": all checks passed\n");
    return 0;
}
