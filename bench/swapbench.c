/*
 * swapbench -- swap-out and swap-in throughput of pinpool's swap tier for
 * 1 MiB entries, against plain pwrite/pread of the same bytes to a file in
 * the same directory, and against raw io_uring at the same queue depth
 * (--depth, default 16; swapbench_io.c, as fio's io_uring engine with
 * bs = the entry size and iodepth = the depth); buffered, and with
 * O_DIRECT against PP_SWAP_DIRECT.  The pool runs twice: on its io_uring
 * engine at io_depth = the depth, its swap-in prefetching that many
 * entries ahead of each pin; and on its thread engine (one blocking
 * request at a time, each pin loading on this thread), the engine it had
 * before.  Same process, same run, interleaved round by round (the order
 * turns; an unrecorded warm-up round first), medians and their ratios
 * reported (docs/performance.md).  MB is 10^6 bytes.
 *
 * swap-out, pinpool: a fresh pool (mem_limit --limit, swap_dir --dir) gets
 *   N filled buffers by pp_put.  Past the limit a put waits for the swap
 *   threads to write older entries out and free them, so the puts run at
 *   the pace of the writes; the timer stops when the last put returns.
 *   Bytes: swap_raw_written meanwhile (before compression, so --compress
 *   counts the same logical bytes as the baseline; device bytes are shown).
 * swap-out, pwrite: the same bytes written by pwrite at i*size into a new
 *   file (O_EXCL) in the same directory, each buffer freed right after its
 *   write, as an eviction frees it.
 * swap-in, pinpool: every entry pinned and unpinned in put order; a swapped
 *   one is loaded on this thread, the room for it made by dropping a clean
 *   entry (a free, no write).  Bytes: loads x size.  An untimed pass before
 *   it pins every entry and checks its bytes against the seeded pattern:
 *   that checks the round trip, and it writes out the entries the puts left
 *   resident and dirty, so the timed pass measures loads only.
 * swap-in, pread: for each entry, malloc(size) (a load makes fresh memory)
 *   and pread.  Like the pool, which drops a clean entry for each load, it
 *   holds at most limit/size buffers: entry i's replaces entry i-limit/size's,
 *   freed first.  It too makes an untimed checking pass first, so both
 *   timed passes start with limit/size entries in memory.  (--keep-all
 *   keeps every buffer until after the timer, starting empty: its reads
 *   then land in pages new to the process, which flatters the pool.)
 *
 * So both sides do the same memory work (free after a write, a fresh
 * allocation before a read) and the same I/O through the page cache of the
 * same file system; each timed swap-out starts after an untimed syncfs, so
 * neither is throttled for what the other left dirty.  What the ratio
 * prices is what the baseline lacks: checksums, compression, bookkeeping,
 * thread hand-offs.  No timing is asserted: exit 0 means the run completed
 * and every byte came back.
 *
 * Direct I/O, in the same rounds (unless --buffered; --direct runs only
 * this pair): the pool with PP_SWAP_DIRECT against the same baselines on
 * an O_DIRECT file, from and into page-aligned buffers (posix_memalign,
 * padded to whole pages), each entry written and read with one call.  The
 * pool's entries are put from malloc'd memory, as a user's would be, so
 * its writes go through its bounce buffer; what it loads is page-aligned.
 * Reported as their own ratios: direct pool / direct baseline.
 *
 * Defaults: 512 entries of 1 MiB through a 64 MiB memory limit (8x), so
 * the resident set is larger than the CPU's caches, as it is wherever a
 * swap tier is used.  With a limit that fits in the last-level cache
 * (--limit 8388608 here, where L3 is 32 MiB), the baseline's reads land in
 * cache-hot buffers and the checksum the pool computes on every load
 * weighs more: that case is reported too (docs/performance.md, swapbench).
 * --quick (the CI smoke run): 48 entries of 256 KiB through 4 MiB, 2
 * rounds.
 *
 * The output starts with the machine (machine.h: CPU, caches, cores,
 * kernel, transparent huge pages, date, commit), one "machine: key: value"
 * line each; --csv FILE starts with the same lines as "# key: value"
 * comments, then the header phase,impl,round,bytes,seconds,mb_per_s and a
 * row per timed pass.
 *
 *   swapbench [--entries N] [--size BYTES] [--rounds R] [--dir DIR]
 *             [--limit BYTES] [--depth D] [--compress] [--keep-all]
 *             [--csv FILE] [--buffered | --direct] [--quick]
 */
#define _GNU_SOURCE               /* syncfs */
#include <pinpool.h>

#include "machine.h"
#include "swapbench.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { OUT, IN };             /* phases */
/* Implementations, buffered then direct (+ NBUF): the pool on its io_uring
 * engine, the pool on its thread engine, pwrite/pread, raw io_uring. */
enum { POOL, TPOOL, BASE, UBASE, NBUF, NIMPL = 2 * NBUF };
static const char *phase_name[2] = { "swap-out", "swap-in" };
static const char *impl_name[2][NIMPL] = {
    { "pinpool", "pinpool-threads", "pwrite", "io_uring", "pinpool-direct",
      "pinpool-thr-direct", "pwrite-direct", "io_uring-direct" },
    { "pinpool", "pinpool-threads", "pread", "io_uring", "pinpool-direct",
      "pinpool-thr-direct", "pread-direct", "io_uring-direct" },
};

size_t n_entries = 512, entry_size = 1u << 20, mem_limit = 64u << 20;
int keep_all;
const char *swap_dir;
static int n_rounds = 5, compress;
static unsigned depth = 16;              /* --depth: requests in flight */
static int run_buffered = 1, run_direct = 1;  /* --buffered, --direct: only that pair */
static FILE *csv;
static int dir_fd = -1;                  /* swap_dir, for syncfs */
static unsigned char *scratch;           /* one entry's expected bytes */

static _Noreturn void usage(void)
{
    fprintf(stderr, "usage: swapbench [--entries N] [--size BYTES] [--rounds R] [--dir DIR]\n"
                    "                 [--limit BYTES] [--depth D] [--compress] [--keep-all]\n"
                    "                 [--csv FILE] [--buffered | --direct] [--quick]\n");
    exit(2);
}

static _Noreturn void fail_pp(const char *call, int rc)
{
    fprintf(stderr, "swapbench: %s: %s (%s)\n", call, pp_strerror(rc), pp_err_name(rc));
    exit(1);
}

_Noreturn void fail_sys(const char *call, const char *what)
{
    fprintf(stderr, "swapbench: %s(%s): %s\n", call, what, strerror(errno));
    exit(1);
}

double now_s(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
        fail_sys("clock_gettime", "CLOCK_MONOTONIC");
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t xorshift64(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

/* Entry i of round r: xorshift64 words (incompressible), or with --compress
 * runs of 4..67 bytes over a 4-letter alphabet (LZ4 shrinks it a lot). */
static void fill(unsigned char *p, size_t i, int r)
{
    uint64_t s = ((uint64_t)i + 1) * 0x9E3779B97F4A7C15u ^ ((uint64_t)r + 1) * 0xD1B54A32D192ED03u;
    if (s == 0)
        s = 1;
    for (size_t off = 0; off < entry_size;) {
        uint64_t v = xorshift64(&s);
        size_t n = compress ? 4 + (size_t)(v >> 58) : sizeof v;
        if (n > entry_size - off)
            n = entry_size - off;
        if (compress)
            memset(p + off, "ACGT"[v & 3], n);
        else
            memcpy(p + off, &v, n);
        off += n;
    }
}

void check(const unsigned char *p, size_t i, int r, const char *impl)
{
    fill(scratch, i, r);
    if (memcmp(p, scratch, entry_size) != 0) {
        size_t at = 0;
        while (p[at] == scratch[at])
            at++;
        fprintf(stderr, "swapbench: %s, round %d, entry %zu: contents differ at byte %zu\n",
                impl, r, i, at);
        exit(1);
    }
}

/* Before each timed swap-out: writes back whatever the file system still
 * holds dirty (the other side's files included), so that neither side is
 * throttled for the other's writes.  Untimed. */
void settle(void)
{
    if (syncfs(dir_fd) != 0)
        fail_sys("syncfs", swap_dir);
}

/* The bytes an O_DIRECT baseline moves per entry: whole blocks (4096). */
size_t padded(void)
{
    return (entry_size + 4095) / 4096 * 4096;
}

/* An entry's buffer: malloc (what a user hands the pool), or for the
 * O_DIRECT baseline page-aligned and padded to whole pages (zeros). */
unsigned char *entry_alloc(int aligned)
{
    if (!aligned)
        return malloc(entry_size);
    void *p = NULL;
    if (posix_memalign(&p, 4096, padded()) != 0)
        return NULL;
    memset((unsigned char *)p + entry_size, 0, padded() - entry_size);
    return p;
}

unsigned char **make_buffers(int r, int aligned)
{
    unsigned char **b = calloc(n_entries, sizeof *b);
    if (b == NULL)
        fail_sys("calloc", "buffer table");
    for (size_t i = 0; i < n_entries; i++) {
        if ((b[i] = entry_alloc(aligned)) == NULL)
            fail_sys("malloc", "entry buffer");
        fill(b[i], i, r);
    }
    return b;
}

static void record(double mbps[2][NIMPL][64], int ph, int impl, int r, uint64_t bytes, double secs)
{
    if (bytes == 0 || secs <= 0) {
        fprintf(stderr, "swapbench: %s %s, round %d: nothing was %s\n", phase_name[ph],
                impl_name[ph][impl], r, ph == OUT ? "written" : "read");
        exit(1);
    }
    if (r < 0)                          /* the warm-up round */
        return;
    mbps[ph][impl][r] = (double)bytes / secs / 1e6;
    if (csv != NULL && fprintf(csv, "%s,%s,%d,%" PRIu64 ",%.6f,%.1f\n", phase_name[ph],
                               impl_name[ph][impl], r, bytes, secs, mbps[ph][impl][r]) < 0)
        fail_sys("fprintf", "csv file");
}

static void stats(pp_pool_t *pool, pp_stats_t *s)
{
    *s = (pp_stats_t)PP_STATS_INIT;
    int rc = pp_pool_stats(pool, s);
    if (rc != 0)
        fail_pp("pp_pool_stats", rc);
}

static pp_node_stats_t sum;             /* swap counters over every round */
static uint64_t peak;

/* The pool: its io_uring engine at io_depth --depth, whose swap-in pass
 * prefetches --depth entries ahead of the pin (as a scheduler does for its
 * next tasks' inputs; at most half the entries that fit); or (threads) its thread engine as it was measured
 * before the io_uring engine: each pin loads on this thread (the read
 * helper reading the second half of a buffered copy). */
static void run_pool(double mbps[2][NIMPL][64], int r, int direct, int threads)
{
    int impl = (threads ? TPOOL : POOL) + (direct ? NBUF : 0);
    unsigned char **b = make_buffers(r, 0);
    pp_ref_t *refs = calloc(n_entries, sizeof *refs);
    if (refs == NULL)
        fail_sys("calloc", "ref table");
    pp_options_t opt = PP_OPTIONS_INIT;
    opt.mem_limit = mem_limit;
    opt.swap_dir = swap_dir;
    opt.flags = (compress ? PP_SWAP_COMPRESS : 0u) | (direct ? PP_SWAP_DIRECT : 0u);
    opt.io_engine = threads ? PP_IO_ENGINE_THREADS : PP_IO_ENGINE_URING;
    opt.io_depth = depth;
    pp_pool_t *pool;
    int rc = pp_pool_create(&opt, &pool);
    if (rc != 0)
        fail_pp("pp_pool_create (with swap_dir and mem_limit)", rc);

    pp_stats_t s0, s1;
    void *p;
    settle();
    stats(pool, &s0);
    double t0 = now_s();
    for (size_t i = 0; i < n_entries; i++) {
        if ((rc = pp_put(pool, b[i], entry_size, NULL, 0, &refs[i])) != 0)
            fail_pp("pp_put", rc);
        b[i] = NULL;                    /* the pool owns it now */
    }
    double t1 = now_s();
    stats(pool, &s1);
    record(mbps, OUT, impl, r, s1.total.swap_raw_written - s0.total.swap_raw_written, t1 - t0);

    for (size_t i = 0; i < n_entries; i++) {          /* untimed check */
        if ((rc = pp_pin(pool, refs[i], 0, &p)) != 0)
            fail_pp("pp_pin (check pass)", rc);
        check(p, i, r, "pinpool");
        if ((rc = pp_unpin(pool, refs[i])) != 0)
            fail_pp("pp_unpin (check pass)", rc);
    }

    stats(pool, &s0);
    t0 = now_s();
    /* The lookahead: --depth entries, at most half of those that fit
     * (prefetched entries must not push out each other before their pin). */
    size_t ahead = threads ? 0 : depth < mem_limit / entry_size / 2 ? depth
                                                                    : mem_limit / entry_size / 2;
    for (size_t i = 0; i < n_entries; i++) {
        for (size_t j = i == 0 ? 1 : i + ahead; ahead > 0 && j <= i + ahead && j < n_entries; j++)
            if ((rc = pp_prefetch(pool, refs[j])) != 0)
                fail_pp("pp_prefetch", rc);
        if ((rc = pp_pin(pool, refs[i], 0, &p)) != 0)
            fail_pp("pp_pin", rc);
        if ((rc = pp_unpin(pool, refs[i])) != 0)
            fail_pp("pp_unpin", rc);
    }
    t1 = now_s();
    stats(pool, &s1);
    record(mbps, IN, impl, r, (s1.total.loads - s0.total.loads) * entry_size, t1 - t0);

#define ADD(f) (sum.f += s1.total.f)
    ADD(evictions_written), ADD(evictions_clean), ADD(evictions_abandoned), ADD(loads);
    ADD(load_waits), ADD(swap_bytes_written), ADD(swap_raw_written), ADD(swap_bytes_read);
    ADD(checksum_failures), ADD(io_errors);
#undef ADD
    if (s1.resident_peak > peak)
        peak = s1.resident_peak;

    for (size_t i = 0; i < n_entries; i++)
        if ((rc = pp_release(pool, refs[i])) != 0)
            fail_pp("pp_release", rc);
    if ((rc = pp_pool_destroy(pool)) != 0)
        fail_pp("pp_pool_destroy", rc);
    free(refs);
    free(b);
}

/* Reads every entry back from the baseline file into fresh memory, held in
 * a ring of keep buffers that outlives the call, as the pool's resident
 * entries do: entry i replaces entry i - keep.  With verify, checks each. */
static void read_back(int fd, const char *path, unsigned char **ring, size_t keep, int r,
                      int verify, int direct)
{
    size_t len = direct ? padded() : entry_size;
    for (size_t i = 0; i < n_entries; i++) {
        unsigned char **slot = &ring[i % keep];
        free(*slot);                    /* the pool's clean drop */
        if ((*slot = entry_alloc(direct)) == NULL)   /* a swap-in makes fresh memory */
            fail_sys("malloc", "entry buffer");
        for (size_t done = 0; done < len;) {
            ssize_t n = pread(fd, *slot + done, len - done, (off_t)(i * len + done));
            if (n == 0)
                errno = ENODATA;
            if (n <= 0 && errno != EINTR)
                fail_sys("pread", path);
            done += n > 0 ? (size_t)n : 0;
        }
        if (verify)
            check(*slot, i, r, direct ? "pread O_DIRECT" : "pread");
    }
}

void free_ring(unsigned char **ring, size_t keep)
{
    for (size_t k = 0; k < keep; k++) {
        free(ring[k]);
        ring[k] = NULL;
    }
}

size_t swapin_keep(void)
{
    return keep_all ? n_entries : mem_limit / entry_size;
}

int open_base(char *path, size_t size, const char *tag, int r, int direct)
{
    if (snprintf(path, size, "%s/swapbench-%ld-%s-%d.bin", swap_dir, (long)getpid(), tag, r)
        >= (int)size) {
        fprintf(stderr, "swapbench: --dir too long\n");
        exit(1);
    }
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_TRUNC | (direct ? O_DIRECT : 0), 0600);
    if (fd < 0)
        fail_sys("open", path);
    return fd;
}

void close_base(int fd, const char *path)
{
    if (close(fd) != 0)
        fail_sys("close", path);
    if (unlink(path) != 0)
        fail_sys("unlink", path);
}

static void run_base(double mbps[2][NIMPL][64], int r, int direct)
{
    int impl = BASE + (direct ? NBUF : 0);
    size_t len = direct ? padded() : entry_size;
    unsigned char **b = make_buffers(r, direct);
    char path[4096];
    int fd = open_base(path, sizeof path, "pwrite", r, direct);

    settle();
    double t0 = now_s();
    for (size_t i = 0; i < n_entries; i++) {
        for (size_t done = 0; done < len;) {
            ssize_t n = pwrite(fd, b[i] + done, len - done, (off_t)(i * len + done));
            if (n == 0)
                errno = EIO;
            if (n <= 0 && errno != EINTR)
                fail_sys("pwrite", path);
            done += n > 0 ? (size_t)n : 0;
        }
        free(b[i]);                     /* a swap-out releases the memory */
        b[i] = NULL;
    }
    double t1 = now_s();
    record(mbps, OUT, impl, r, (uint64_t)n_entries * entry_size, t1 - t0);

    /* An untimed pass that checks every entry, as the pool's, then the
     * timed one; b[] is now the ring. */
    size_t keep = swapin_keep();
    read_back(fd, path, b, keep, r, 1, direct);
    if (keep_all)
        free_ring(b, keep);
    t0 = now_s();
    read_back(fd, path, b, keep, r, 0, direct);
    t1 = now_s();
    free_ring(b, keep);
    record(mbps, IN, impl, r, (uint64_t)n_entries * entry_size, t1 - t0);
    free(b);
    close_base(fd, path);
}

static void run_raw_uring(double mbps[2][NIMPL][64], int r, int direct)
{
    double secs[2];
    run_uring(r, direct, depth, secs);
    int impl = UBASE + (direct ? NBUF : 0);
    record(mbps, OUT, impl, r, (uint64_t)n_entries * entry_size, secs[0]);
    record(mbps, IN, impl, r, (uint64_t)n_entries * entry_size, secs[1]);
}

/* One round of a pair's four implementations, in an order that turns
 * round by round (the first goes last in the next round). */
static void run_round(double mbps[2][NIMPL][64], int r, int direct)
{
    for (int k = 0; k < NBUF; k++) {
        int impl = (k + (r < 0 ? 0 : r)) % NBUF;
        if (impl == POOL || impl == TPOOL)
            run_pool(mbps, r, direct, impl == TPOOL);
        else if (impl == BASE)
            run_base(mbps, r, direct);
        else
            run_raw_uring(mbps, r, direct);
    }
}

/* The CSV file: the machine as "# key: value" lines (readers skip lines
 * that start with '#'), then the header. */
static void open_csv(const char *path, const machine_t *m)
{
    if ((csv = fopen(path, "w")) == NULL)
        fail_sys("fopen", path);
    if (machine_print(csv, m, "# ") != 0 ||
        fprintf(csv, "phase,impl,round,bytes,seconds,mb_per_s\n") < 0)
        fail_sys("fprintf", path);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static unsigned long long number(const char *s)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || s[0] == '-')
        usage();
    return v;
}

int main(int argc, char **argv)
{
    unsigned long long entries = 0, rounds = 0;
    int quick = 0, entries_set = 0, rounds_set = 0;
    size_t size = 0;
    const char *csv_path = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int more = i + 1 < argc;
        if (strcmp(a, "--entries") == 0 && more)
            entries = number(argv[++i]), entries_set = 1;
        else if (strcmp(a, "--size") == 0 && more)
            size = (size_t)number(argv[++i]);
        else if (strcmp(a, "--rounds") == 0 && more)
            rounds = number(argv[++i]), rounds_set = 1;
        else if (strcmp(a, "--dir") == 0 && more)
            swap_dir = argv[++i];
        else if (strcmp(a, "--limit") == 0 && more)
            mem_limit = (size_t)number(argv[++i]);
        else if (strcmp(a, "--depth") == 0 && more)
            depth = (unsigned)number(argv[++i]);
        else if (strcmp(a, "--csv") == 0 && more)
            csv_path = argv[++i];
        else if (strcmp(a, "--compress") == 0)
            compress = 1;
        else if (strcmp(a, "--keep-all") == 0)
            keep_all = 1;
        else if (strcmp(a, "--quick") == 0)
            quick = 1;
        else if (strcmp(a, "--buffered") == 0)
            run_direct = 0;
        else if (strcmp(a, "--direct") == 0)
            run_buffered = 0;
        else
            usage();
    }
    if (quick)                          /* a CI smoke run: a few seconds */
        n_entries = 48, n_rounds = 2, entry_size = 256u << 10, mem_limit = 4u << 20;
    if (size != 0)
        entry_size = size;
    if (entries_set)
        n_entries = (size_t)entries;
    if (rounds_set)
        n_rounds = rounds > 64 ? 0 : (int)rounds;
    if (swap_dir == NULL)
        swap_dir = getenv("TMPDIR") != NULL && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    if (!run_buffered && !run_direct)
        usage();                        /* --buffered and --direct */
    if (n_rounds < 1 || entry_size == 0 || mem_limit / 2 < entry_size ||
        n_entries / 2 < mem_limit / entry_size || depth < 1 || depth > PP_IO_DEPTH_MAX) {
        fprintf(stderr, "swapbench: need 1 <= rounds <= 64, size <= limit/2,"
                        " entries*size >= 2*limit (so most entries are swapped) and"
                        " 1 <= depth <= %u\n", PP_IO_DEPTH_MAX);
        usage();
    }
    char why[128];
    if (uring_probe(why, sizeof why) != 0) {
        fprintf(stderr, "swapbench: io_uring cannot be used here: %s\n", why);
        return 1;
    }
    if ((dir_fd = open(swap_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
        fail_sys("open", swap_dir);
    if ((scratch = malloc(entry_size)) == NULL)
        fail_sys("malloc", "scratch buffer");
    machine_t machine;
    machine_describe(&machine);
    if (csv_path != NULL)
        open_csv(csv_path, &machine);

    machine_print(stdout, &machine, "machine: ");   /* stdout's errors: the final fflush */
    printf("swapbench: %zu entries x %zu bytes (%s), mem_limit %zu, depth %u, %d rounds,"
           " dir %s, baselines keep %s, %s\n", n_entries, entry_size,
           compress ? "compressible, PP_SWAP_COMPRESS" : "incompressible", mem_limit, depth,
           n_rounds, swap_dir, keep_all ? "every buffer" : "limit/size buffers",
           run_buffered && run_direct ? "buffered and direct (O_DIRECT, PP_SWAP_DIRECT)"
           : run_direct ? "direct only (O_DIRECT, PP_SWAP_DIRECT)" : "buffered only");
    fflush(stdout);
    static double mbps[2][NIMPL][64];
    /* Round -1 warms up the allocator, page cache and files; not recorded.
     * The four implementations of each pair take turns (run_round). */
    for (int r = -1; r < n_rounds; r++) {
        for (int direct = 0; direct < 2; direct++) {
            if (!(direct ? run_direct : run_buffered))
                continue;
            run_round(mbps, r, direct);
            if (r < 0)
                continue;
            int o = direct ? NBUF : 0;
            printf("  round %d%s: MB/s pinpool / threads / pwrite,pread / io_uring:"
                   "  out %.0f / %.0f / %.0f / %.0f,  in %.0f / %.0f / %.0f / %.0f\n", r,
                   direct ? ", direct" : "", mbps[OUT][o + POOL][r], mbps[OUT][o + TPOOL][r],
                   mbps[OUT][o + BASE][r], mbps[OUT][o + UBASE][r], mbps[IN][o + POOL][r],
                   mbps[IN][o + TPOOL][r], mbps[IN][o + BASE][r], mbps[IN][o + UBASE][r]);
            fflush(stdout);
        }
    }

    printf("\n  %-9s %-14s %12s %12s %12s\n", "phase", "impl", "median MB/s", "min", "max");
    double med[2][NIMPL];
    for (int ph = 0; ph < 2; ph++) {
        for (int im = 0; im < NIMPL; im++) {
            if (!((im >= NBUF) ? run_direct : run_buffered))
                continue;
            double v[64];
            memcpy(v, mbps[ph][im], sizeof v);
            qsort(v, (size_t)n_rounds, sizeof *v, cmp_double);
            int n = n_rounds;
            med[ph][im] = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
            printf("  %-9s %-14s %12.1f %12.1f %12.1f\n", phase_name[ph], impl_name[ph][im],
                   med[ph][im], v[0], v[n_rounds - 1]);
        }
    }
    printf("\n  pool, all rounds and the warm-up: evictions_written %" PRIu64
           ", evictions_clean %" PRIu64 ", evictions_abandoned %" PRIu64 ", loads %" PRIu64
           ", load_waits %" PRIu64 "\n",
           sum.evictions_written, sum.evictions_clean, sum.evictions_abandoned, sum.loads,
           sum.load_waits);
    printf("  swap_bytes_written %" PRIu64 " (raw %" PRIu64 ", %.3f of raw), swap_bytes_read %"
           PRIu64 ", checksum_failures %" PRIu64 ", io_errors %" PRIu64 ", resident_peak %"
           PRIu64 " (limit %zu)\n\n", sum.swap_bytes_written, sum.swap_raw_written,
           sum.swap_raw_written ? (double)sum.swap_bytes_written / (double)sum.swap_raw_written
                                : 0.0,
           sum.swap_bytes_read, sum.checksum_failures, sum.io_errors, peak, mem_limit);
    for (int direct = 0; direct < 2; direct++) {
        if (!(direct ? run_direct : run_buffered))
            continue;
        int o = direct ? NBUF : 0;
        const char *d = direct ? ", direct" : "";
        for (int ph = 0; ph < 2; ph++)
            printf("%s ratio%s, depth %u: pinpool/io_uring %.2f, pinpool/%s %.2f,"
                   " pinpool/pinpool-threads %.2f\n", phase_name[ph], d, depth,
                   med[ph][o + POOL] / med[ph][o + UBASE], ph == OUT ? "pwrite" : "pread",
                   med[ph][o + POOL] / med[ph][o + BASE], med[ph][o + POOL] / med[ph][o + TPOOL]);
    }

    if (csv != NULL && fclose(csv) != 0)
        fail_sys("fclose", csv_path);
    if (fflush(stdout) != 0)
        fail_sys("fflush", "stdout");
    if (sum.io_errors != 0 || sum.checksum_failures != 0 || peak > mem_limit) {
        fprintf(stderr, "swapbench: the pool reported %" PRIu64 " I/O errors, %" PRIu64
                " checksum failures, resident peak %" PRIu64 " for a limit of %zu\n",
                sum.io_errors, sum.checksum_failures, peak, mem_limit);
        return 1;
    }
    free(scratch);
    if (close(dir_fd) != 0)
        fail_sys("close", swap_dir);
    return 0;
}
