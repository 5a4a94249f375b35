/*
 * mpi_torture.c -- randomized multi-rank torture of the MPI layer.
 *
 * Each rank runs worker threads that put entries, pin them (at home and
 * remotely, one at a time and in batches, waiting and not), write them on
 * their home (publishing versions), export tokens and send them to other
 * ranks in the program's own messages, import what arrives, prefetch,
 * drop tokens and release.  What is checked, always:
 *  - every byte of every pin: an entry's contents are a function of its
 *    home, its id and its version, so a pin that reports version v must
 *    hold exactly version v's bytes (a torn or stale copy fails);
 *  - a pin of a ref the thread owns never fails (no early free), and the
 *    version it gets is at least the one the thread knows;
 *  - importing a token a second time on the rank holding it is refused;
 *  - at the end (everything released, destroy collective), every entry
 *    was freed exactly once, on its home, every typed copy exactly once
 *    by its type, and nothing was reported.
 * A quarter of the entries are typed (boxes: the contents out of line),
 * which cross ranks packed by the box type's save and load.
 *
 *   mpi_torture --ranks 3 [options]        ranks as threads (in-process
 *                                          transport: delays, reordering,
 *                                          duplicates from the seed)
 *   mpiexec -np 4 mpi_torture --mpi [...]  one rank per MPI process
 *
 * Options: --threads T (workers per rank, 2), --seconds S (2), --seed N,
 * --mem-limit BYTES (0: none) with --swap DIR, --delay D and --dup P
 * (in-process chaos: polls and per mille), --home-ops 0|1 (1: workers
 * also write batches of their home entries with pp_mpi_pin_many
 * (PP_PIN_WRITE | PP_PIN_NOWAIT), some made to fail half-way, and release
 * entries while they hold pins of them: worker.c), --load-faults N (with
 * swap: one device call in N fails, so loads fail at homes; faults.c).
 * Exit 0: nothing found.
 */
#include "mpi_torture.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/content.h"   /* mix3 */

opts_t g_opt = { .ranks = 3, .threads = 2, .seconds = 2, .seed = 1, .delay = 4, .dup = 100,
                 .home_ops = true };
atomic_int g_failed;

void failf(int rank, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "FAIL: seed %llu rank %d: %s\n", (unsigned long long)g_opt.seed, rank, line);
    atomic_store(&g_failed, 1);
}

/* ---- contents ---------------------------------------------------------- */

void content_fill(void *data, size_t size, uint32_t home, uint64_t id, uint32_t version)
{
    ent_hdr_t *h = data;
    *h = (ent_hdr_t){ ENT_MAGIC, id, home, version };
    uint64_t *w = (uint64_t *)(h + 1);
    size_t n = (size - sizeof *h) / 8;
    uint64_t s = mix3(home, id, version);
    for (size_t i = 0; i < n; i++)
        w[i] = s + i * 0x100000001b3ull;
}

/* 0, or a description of the first difference. */
const char *content_check(const void *data, size_t size, uint32_t home, uint64_t id,
                          uint32_t version)
{
    const ent_hdr_t *h = data;
    if (h->magic != ENT_MAGIC || h->id != id || h->home != home)
        return "header names another entry";
    if (h->version != version)
        return "header names another version than the pin reported";
    const uint64_t *w = (const uint64_t *)(h + 1);
    size_t n = (size - sizeof *h) / 8;
    uint64_t s = mix3(home, id, version);
    for (size_t i = 0; i < n; i++)
        if (w[i] != s + i * 0x100000001b3ull)
            return "bytes of another version (a torn or stale copy)";
    return NULL;
}

/* ---- the type: counts frees per id ------------------------------------- */

static void ent_free(void *data, size_t size, void *ctx)
{
    rank_t *R = ctx;
    const ent_hdr_t *h = data;
    if (size < sizeof *h || h->magic != ENT_MAGIC || h->home != (uint32_t)R->rank ||
        h->id >= MAX_IDS) {
        failf(R->rank, "free of a buffer that is not one of this rank's entries");
    } else {
        atomic_fetch_add(&R->frees[h->id], 1);
    }
    free(data);
}

/* ---- the box type: typed entries ------------------------------------------ */

static int box_save(const void *data, size_t size, pp_writer_t *w, void *ctx)
{
    rank_t *R = ctx;
    const box_t *b = data;
    if (b->magic != BOX_MAGIC || b->size != size) {
        failf(R->rank, "save of a box that is not one (or of another size)");
        return -1;
    }
    int rc = pp_write(w, b, sizeof *b);   /* the pointer inside is rewritten by load */
    if (rc == 0)
        rc = pp_write(w, b->bytes, b->size);
    return rc;
}

static int box_load(void **data, size_t size, pp_reader_t *r, void *ctx)
{
    rank_t *R = ctx;
    box_t *b = malloc(sizeof *b);
    if (b == NULL || pp_read(r, b, sizeof *b) != 0 || b->magic != BOX_MAGIC ||
        b->size != size || pp_read_left(r) != size) {
        failf(R->rank, "load of a box: what save wrote is not a box of %zu bytes", size);
        free(b);
        return -1;
    }
    b->bytes = malloc(size);
    if (b->bytes == NULL || pp_read(r, b->bytes, size) != 0) {
        failf(R->rank, "load of a box: no memory, or short");
        free(b->bytes);
        free(b);
        return -1;
    }
    if (b->home != (uint32_t)R->rank)
        atomic_fetch_add(&R->copy_loads, 1);
    *data = b;
    return 0;
}

/* A box of this rank (its home entry) counts as the entry's free; a box of
 * another rank is a copy this rank's load made. */
static void box_free(void *data, size_t size, void *ctx)
{
    rank_t *R = ctx;
    box_t *b = data;
    if (b->magic != BOX_MAGIC || b->size != size || b->home >= (uint32_t)R->size ||
        b->id >= MAX_IDS) {
        failf(R->rank, "free of a box that is not one");
    } else if (b->home == (uint32_t)R->rank) {
        atomic_fetch_add(&R->frees[b->id], 1);
    } else {
        atomic_fetch_add(&R->copy_frees, 1);
    }
    free(b->bytes);
    free(b);
}

/* ---- a rank -------------------------------------------------------------- */

static void rank_report(const char *line, void *ctx)
{
    rank_t *R = ctx;
    if (faults_report(R, line))
        return;   /* an injected fault's, expected */
    atomic_fetch_add(&R->reports, 1);
    fprintf(stderr, "report (rank %d): %s\n", R->rank, line);
}

int rank_setup(rank_t *R, int rank, int size)
{
    R->rank = rank;
    R->size = size;
    R->frees = calloc(MAX_IDS, sizeof *R->frees);
    R->put_ids = 0;
    R->type = (pp_type_t){ .name = "torture entry", .free = ent_free, .ctx = R };
    R->box_type = (pp_type_t){ .name = "torture box", .free = box_free, .save = box_save,
                               .load = box_load, .ctx = R };
    pp_options_t opt = PP_OPTIONS_INIT;
    opt.report = rank_report;
    opt.report_ctx = R;
    opt.mem_limit = g_opt.mem_limit;
    opt.swap_dir = g_opt.swap;
    int rc = g_opt.load_faults != 0 ? faults_pool_create(R, &opt)
                                    : pp_pool_create(&opt, &R->pool);
    if (rc != 0)
        fprintf(stderr, "rank %d: pp_pool_create: %s\n", rank, pp_strerror(rc));
    return rc;
}

void rank_register(rank_t *R)
{
    int rc = pp_mpi_type_register(R->m, BOX_TYPE_ID, &R->box_type);
    if (rc != 0)
        failf(R->rank, "pp_mpi_type_register: %s", pp_err_name(rc));
}

/* After the layer's destroy, before the pool's: nothing is left alive
 * (every entry and copy was freed; with swap, the only check of frees). */
void rank_check_empty(rank_t *R)
{
    faults_pool_closing(R);
    /* Long: after a run of minutes with swap, a rank may hold gigabytes of
     * swapped entries whose frees each punch a hole in the swap file (seen:
     * 5 GB, reclaimed at 20 MB/s beside a sanitizer build; under TSan at 4
     * ranks, 7,554 entries and copies left 30 s into a drain). */
    int rc = pp_pool_drain(R->pool, 600000);
    pp_stats_t st = PP_STATS_INIT;
    if (rc != 0 || pp_pool_stats(R->pool, &st) != 0) {
        failf(R->rank, "drain: %s", pp_err_name(rc));
        return;
    }
    uint64_t loads = atomic_load(&R->copy_loads), frees = atomic_load(&R->copy_frees);
    if (loads != frees)
        failf(R->rank, "%llu typed copies made here, %llu freed by their type",
              (unsigned long long)loads, (unsigned long long)frees);
    if (st.total.entries != 0)
        failf(R->rank, "%llu entries still alive after destroy (puts %llu, frees %llu)",
              (unsigned long long)st.total.entries, (unsigned long long)st.total.puts,
              (unsigned long long)st.total.frees);
}

/* After destroy: every entry this rank put was freed exactly once. */
void rank_final_checks(rank_t *R)
{
    for (uint64_t id = 0; g_opt.swap == NULL && id < (uint64_t)atomic_load(&R->put_ids) && id < MAX_IDS; id++) {
        unsigned f = atomic_load(&R->frees[id]);
        if (f != 1)
            failf(R->rank, "entry %llu was freed %u times", (unsigned long long)id, f);
    }
    if (atomic_load(&R->reports) != 0)
        failf(R->rank, "%d report line(s)", atomic_load(&R->reports));
}

void rank_summary(rank_t *R, pp_mpi_stats_t *st)
{
    printf("rank %d: %llu puts, %llu pins (%llu remote: %llu misses, %llu hits), %llu writes, "
           "%llu tokens sent, %llu imported; weight: %llu records in %llu messages; "
           "%llu bytes fetched; %llu typed copies\n",
           R->rank, (unsigned long long)R->n.puts, (unsigned long long)R->n.pins,
           (unsigned long long)(st->misses + st->hits), (unsigned long long)st->misses,
           (unsigned long long)st->hits, (unsigned long long)R->n.writes,
           (unsigned long long)R->n.sent, (unsigned long long)R->n.imported,
           (unsigned long long)st->weight_records, (unsigned long long)st->weight_messages,
           (unsigned long long)st->bytes_fetched,
           (unsigned long long)atomic_load(&R->copy_loads));
    if (g_opt.home_ops)
        printf("rank %d: home ops: %llu write batches (%llu refs written; failed: %llu on a "
               "dead ref, %llu on a remote ref, %llu busy; %llu write pins rolled back, no "
               "version published); owners released under a pin: %llu read, %llu write "
               "(%llu records dead under the pin)\n",
               R->rank, (unsigned long long)atomic_load(&R->hx.batches),
               (unsigned long long)atomic_load(&R->hx.written),
               (unsigned long long)atomic_load(&R->hx.fail_stale),
               (unsigned long long)atomic_load(&R->hx.fail_remote),
               (unsigned long long)atomic_load(&R->hx.fail_busy),
               (unsigned long long)atomic_load(&R->hx.rolled_back),
               (unsigned long long)atomic_load(&R->hx.pinned_release),
               (unsigned long long)atomic_load(&R->hx.write_pinned_release),
               (unsigned long long)atomic_load(&R->hx.died_pinned));
    faults_summary(R);
}

static void usage(void)
{
    fprintf(stderr, "usage: mpi_torture [--mpi | --ranks N] [--threads T] [--seconds S] "
                     "[--seed N] [--mem-limit B --swap DIR [--load-faults N]] [--delay D] "
                     "[--dup P] [--home-ops 0|1]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    static const struct option lo[] = {
        { "mpi", no_argument, NULL, 'M' },       { "ranks", required_argument, NULL, 'r' },
        { "threads", required_argument, NULL, 't' }, { "seconds", required_argument, NULL, 's' },
        { "seed", required_argument, NULL, 'S' },  { "mem-limit", required_argument, NULL, 'm' },
        { "swap", required_argument, NULL, 'w' },  { "delay", required_argument, NULL, 'd' },
        { "dup", required_argument, NULL, 'u' },   { "home-ops", required_argument, NULL, 'H' },
        { "load-faults", required_argument, NULL, 'F' },
        { NULL, 0, NULL, 0 },
    };
    int c;
    while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (c) {
        case 'M': g_opt.mpi = true; break;
        case 'r': g_opt.ranks = atoi(optarg); break;
        case 't': g_opt.threads = atoi(optarg); break;
        case 's': g_opt.seconds = atof(optarg); break;
        case 'S': g_opt.seed = strtoull(optarg, NULL, 0); break;
        case 'm': g_opt.mem_limit = strtoull(optarg, NULL, 0); break;
        case 'w': g_opt.swap = optarg; break;
        case 'd': g_opt.delay = (unsigned)atoi(optarg); break;
        case 'u': g_opt.dup = (unsigned)atoi(optarg); break;
        case 'H': g_opt.home_ops = atoi(optarg) != 0; break;
        case 'F': g_opt.load_faults = (unsigned)atoi(optarg); break;
        default: usage();
        }
    }
    if (g_opt.ranks < 1 || g_opt.ranks > MAX_RANKS || g_opt.threads < 1 ||
        g_opt.threads > MAX_THREADS || g_opt.seconds <= 0 ||
        (g_opt.load_faults != 0 && (g_opt.swap == NULL || g_opt.mem_limit == 0)))
        usage();
    int rc = g_opt.mpi ? run_mpi(&argc, &argv) : run_inproc();
    if (rc == 0 && atomic_load(&g_failed) == 0) {
        printf("mpi_torture: seed %llu: nothing found\n", (unsigned long long)g_opt.seed);
        return 0;
    }
    return 1;
}
