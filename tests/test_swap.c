/*
 * test_swap.c -- the swap store (src/swap.c, src/swapdev.c): copies that
 * survive any number of evict/load round trips, clean entries dropped
 * without a write, checksums, compression, failing devices, swap_limit,
 * the private directory, types with save/load, and what is freed when.
 *
 * Eviction is made to happen when the test wants it, not when the swap
 * threads feel like it: sw_squeeze() puts a PP_TYPE_NOSWAP entry as large
 * as the memory limit minus what the test keeps pinned, which fits only
 * once every evictable entry is out; pp_put waits for the swap threads to
 * make that room (or fails with PP_ENOMEM when they cannot), so when it
 * returns 0 every unpinned swappable entry is SWAPPED and not RESIDENT.
 * The squeeze entry is then released and drained.  No sleeps anywhere.
 *
 * The swap threads' scheduling (CLOCK, racing pins, waits) is
 * tests/test_evict.c's concern; here the store is.
 */
#include "helpers.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "support/faultdev.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

/* ------------------------------------------------------------------------ */
/* Contents                                                                  */
/* ------------------------------------------------------------------------ */

/* Incompressible (fill_pattern) or compressible (runs of one byte value)
 * contents, both derived from a seed. */
typedef struct content {
    const char *name;
    void (*fill)(void *p, size_t n, uint64_t seed);
    bool (*check)(const void *p, size_t n, uint64_t seed);
} content_t;

#define RUN 512

static void fill_runs(void *p, size_t n, uint64_t seed)
{
    unsigned char *b = p;
    for (size_t i = 0; i < n; i += RUN) {
        uint64_t st = seed ^ (i / RUN);
        memset(b + i, (int)(splitmix64(&st) & 0xff), n - i < RUN ? n - i : RUN);
    }
}

static bool check_runs(const void *p, size_t n, uint64_t seed)
{
    const unsigned char *b = p;
    unsigned char want[RUN];
    for (size_t i = 0; i < n; i += RUN) {
        uint64_t st = seed ^ (i / RUN);
        size_t k = n - i < RUN ? n - i : RUN;
        memset(want, (int)(splitmix64(&st) & 0xff), k);
        if (memcmp(b + i, want, k) != 0)
            return false;
    }
    return true;
}

static void fill_random(void *p, size_t n, uint64_t seed) { fill_pattern(p, n, seed); }
static bool check_random(const void *p, size_t n, uint64_t seed) { return check_pattern(p, n, seed); }

static const content_t RANDOM = {"random", fill_random, check_random};
static const content_t RUNS = {"runs", fill_runs, check_runs};

static uint64_t seed_of(size_t i, unsigned version)
{
    return (uint64_t)(i + 1) * 0x9e3779b97f4a7c15ull + (uint64_t)version * 0x632be59bd9b4e019ull + 1;
}

/* ------------------------------------------------------------------------ */
/* Pools with swap                                                           */
/* ------------------------------------------------------------------------ */

typedef struct sw {
    char dir[64];              /* swap_dir: a fresh directory, empty at the end */
    pp_pool_t *pool;
    faultdev_t *fd;            /* the fault device, or NULL (the file device) */
    size_t limit;
    unsigned nodes;
    report_cap_t rep;          /* the pool's reports (kept off stderr) */
} sw_t;

static size_t dir_count(const char *path)
{
    DIR *d = opendir(path);
    cr_assert_not_null(d, "opendir %s: %s", path, strerror(errno));
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
            n++;
    }
    closedir(d);
    return n;
}

/* The swap_dir of the test's open pool, removed by the suite's fini if the
 * test failed before sw_close (so failing runs leave nothing in /tmp). */
static char g_open_dir[64];

static void rm_tree(const char *path, int depth)
{
    DIR *d = opendir(path);
    if (d != NULL) {
        struct dirent *de;
        while ((de = readdir(d)) != NULL) {
            if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                continue;
            char sub[4200];
            snprintf(sub, sizeof sub, "%s/%s", path, de->d_name);
            if (unlink(sub) != 0 && depth > 0)
                rm_tree(sub, depth - 1);
        }
        closedir(d);
    }
    rmdir(path);
}

static void sw_fini(void)
{
    if (g_open_dir[0] != '\0')
        rm_tree(g_open_dir, 1);
    g_open_dir[0] = '\0';
}

/* Built twice: test_swap (suite swap), and test_swap_direct (suite
 * swap_direct), which defines PP_TEST_POOL_FLAGS=PP_SWAP_DIRECT, so that
 * every pool made here -- through test_pool_create or faultdev_pool_create
 * -- uses direct I/O, every fault case included. */
#ifdef PP_TEST_SUITE
#define SW_SUITE PP_TEST_SUITE
#else
#define SW_SUITE swap
#endif
#ifdef PP_TEST_POOL_FLAGS
#define SW_DIRECT ((PP_TEST_POOL_FLAGS & PP_SWAP_DIRECT) != 0)
#else
#define SW_DIRECT false
#endif

TestSuite(SW_SUITE, .fini = sw_fini);

/* The bytes the device moves for a copy of n bytes: with direct I/O, whole
 * pages (the last one padded). */
static uint64_t dev_bytes(uint64_t n)
{
    return SW_DIRECT ? (n + 4095) / 4096 * 4096 : n;
}

static void sw_open(sw_t *s, size_t mem_limit, uint64_t swap_limit, unsigned flags, bool fault)
{
    memset(s, 0, sizeof *s);
    strcpy(s->dir, "/tmp/pp-swaptest-XXXXXX");
    cr_assert_not_null(mkdtemp(s->dir), "mkdtemp: %s", strerror(errno));
    snprintf(g_open_dir, sizeof g_open_dir, "%s", s->dir);
    report_cap_init(&s->rep);
    pp_options_t o = PP_OPTIONS_INIT;
    o.mem_limit = mem_limit;
    o.swap_dir = s->dir;
    o.swap_limit = swap_limit;
    o.flags = flags;
    report_cap_attach(&s->rep, &o);
    int rc;
    if (fault) {
        s->fd = faultdev_new();
        cr_assert_not_null(s->fd);
        rc = faultdev_pool_create(&o, s->fd, &s->pool);
    } else {
        rc = test_pool_create(&o, &s->pool);
    }
    cr_assert_eq(rc, 0, "pp_pool_create: %s", pp_err_name(rc));
    s->limit = mem_limit;
    pp_stats_t st;
    test_stats(s->pool, &st);
    cr_assert_eq(st.swap, 1);
    cr_assert_eq(st.mem_limit, mem_limit);
    cr_assert_eq(st.swap_limit, swap_limit);
    s->nodes = st.nodes;
}

/* Destroys the pool; swap_dir must be left empty (then it is removed). */
static void sw_close(sw_t *s)
{
    test_destroy(s->pool);
    s->pool = NULL;
    s->fd = NULL;                        /* the pool owned it */
    cr_assert_eq(dir_count(s->dir), 0, "swap_dir %s not empty after destroy", s->dir);
    cr_assert_eq(rmdir(s->dir), 0, "rmdir %s: %s", s->dir, strerror(errno));
    g_open_dir[0] = '\0';
    report_cap_free(&s->rep);
}

static const pp_type_t squeeze_type = {.name = "squeeze", .flags = PP_TYPE_NOSWAP};

/* Puts a NOSWAP entry of mem_limit - keep bytes, which fits only once every
 * evictable entry is out (keep: the bytes that cannot go, i.e. what the
 * test holds pinned), then releases it and waits until it is freed.
 * Returns pp_put's code. */
static int sw_squeeze(sw_t *s, size_t keep)
{
    size_t size = s->limit - keep;
    void *buf = malloc(size);            /* never touched: NOSWAP */
    cr_assert_not_null(buf);
    pp_ref_t ref;
    int rc = pp_put(s->pool, buf, size, &squeeze_type, 0, &ref);
    if (rc != 0) {
        free(buf);
        return rc;
    }
    assert_rc(pp_release(s->pool, ref), 0);
    test_drain(s->pool);
    return 0;
}

static void sw_stats(sw_t *s, pp_stats_t *st) { test_stats(s->pool, st); }

#define STATE_MASK (PP_STATE_RESIDENT | PP_STATE_SWAPPED | PP_STATE_LOADING | PP_STATE_EVICTING)

/* Only on disk. */
static void assert_swapped(sw_t *s, pp_ref_t ref, const char *what)
{
    unsigned st = test_stat(s->pool, ref).state;
    cr_assert_eq(st & STATE_MASK, PP_STATE_SWAPPED, "%s: state 0x%x, want SWAPPED only", what, st);
}

/* In memory, with no copy on disk. */
static void assert_resident_no_copy(sw_t *s, pp_ref_t ref, const char *what)
{
    unsigned st = test_stat(s->pool, ref).state;
    cr_assert_eq(st & (PP_STATE_RESIDENT | PP_STATE_SWAPPED | PP_STATE_LOADING),
                 PP_STATE_RESIDENT, "%s: state 0x%x, want RESIDENT without a copy", what, st);
}

static pp_ref_t put_flat(pp_pool_t *pool, size_t size, const pp_type_t *type, const content_t *c,
                         uint64_t seed, unsigned flags)
{
    void *buf = malloc(size);
    cr_assert_not_null(buf);
    c->fill(buf, size, seed);
    pp_ref_t ref = PP_REF_NONE;
    int rc = pp_put(pool, buf, size, type, flags, &ref);
    cr_assert_eq(rc, 0, "pp_put(%zu bytes): %s", size, pp_err_name(rc));
    return ref;
}

/* Pins (loading it if swapped), checks the contents, unpins. */
static void pin_check(pp_pool_t *pool, pp_ref_t ref, size_t size, const content_t *c, uint64_t seed)
{
    void *d = NULL;
    int rc = pp_pin(pool, ref, 0, &d);
    cr_assert_eq(rc, 0, "pin of %zu-byte entry 0x%016" PRIx64 ": %s", size, ref, pp_err_name(rc));
    bool ok = c->check(d, size, seed);
    assert_rc(pp_unpin(pool, ref), 0);
    cr_assert(ok, "%zu-byte entry 0x%016" PRIx64 " (%s) does not hold its contents", size, ref,
              c->name);
}

/* Pins for write, checks the old contents, writes new ones, unpins. */
static void pin_rewrite(pp_pool_t *pool, pp_ref_t ref, size_t size, const content_t *c,
                        uint64_t old_seed, uint64_t new_seed)
{
    void *d = NULL;
    int rc = pp_pin(pool, ref, PP_PIN_WRITE, &d);
    cr_assert_eq(rc, 0, "write pin of %zu-byte entry: %s", size, pp_err_name(rc));
    bool ok = c->check(d, size, old_seed);
    if (ok)
        c->fill(d, size, new_seed);
    assert_rc(pp_unpin(pool, ref), 0);
    cr_assert(ok, "%zu-byte entry 0x%016" PRIx64 " (%s) does not hold its contents", size, ref,
              c->name);
}

static void release_all(pp_pool_t *pool, const pp_ref_t *refs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        assert_rc(pp_release(pool, refs[i]), 0);
    test_drain(pool);
}

/* Flips (xor) one byte of ref's swap copy in its node's file, at `at`
 * bytes into the copy. */
static void flip_byte(sw_t *s, pp_ref_t ref, uint64_t at)
{
    uint64_t off = 0, len = 0;
    assert_rc(pp__debug_swap_where(s->pool, ref, &off, &len), 0);
    cr_assert_lt(at, len);
    char path[4200];
    snprintf(path, sizeof path, "%s/node%u.swap", pp__swap_path(s->pool), pp_ref_node(ref));
    int f = open(path, O_RDWR | O_CLOEXEC);
    cr_assert_geq(f, 0, "open %s: %s", path, strerror(errno));
    unsigned char b = 0;
    cr_assert_eq(pread(f, &b, 1, (off_t)(off + at)), 1);
    b ^= 0x5a;
    cr_assert_eq(pwrite(f, &b, 1, (off_t)(off + at)), 1);
    close(f);
}

/* ------------------------------------------------------------------------ */
/* A type with save/load: a struct with an out-of-line buffer                */
/* ------------------------------------------------------------------------ */

#define BLOB_MAGIC 0x626c6f6221626c6full

typedef struct blob {
    uint64_t magic;
    size_t n;
    uint64_t seed;
    unsigned char *bytes;                /* n bytes of content(seed) */
} blob_t;

static size_t blob_size(size_t n) { return sizeof(blob_t) + n; }

/* The type and what its functions saw (they run on pool threads). */
typedef struct bt {
    pp_type_t type;                      /* type.ctx == this */
    const content_t *content;
    atomic_int fail_save, fail_load;     /* make save / load return nonzero */
    atomic_int save_calls, load_calls;
    atomic_int saves, loads;             /* successful ones */
    atomic_int frees, frees_reclaimer, frees_main;
    atomic_int write_fail_rc;            /* first failure of pp_write but PP_EAGAIN */
    atomic_int bad;                      /* a check inside save/load/free failed */
    const char *_Atomic why;             /* the first such check */
    atomic_int reclaimer_tid[PP_MAX_NODES];
    int main_tid;
} bt_t;

static void bt_bad(bt_t *bt, const char *why)
{
    const char *none = NULL;
    atomic_compare_exchange_strong(&bt->why, &none, why);
    atomic_fetch_add(&bt->bad, 1);
}

static int blob_save(const void *data, size_t size, pp_writer_t *w, void *ctx)
{
    bt_t *bt = ctx;
    const blob_t *b = data;
    atomic_fetch_add(&bt->save_calls, 1);
    if (b->magic != BLOB_MAGIC || size != blob_size(b->n))
        bt_bad(bt, "save: bad blob or size");
    /* The documented argument checks, on a real stream. */
    if (pp_write(w, NULL, 1) != PP_EINVAL)
        bt_bad(bt, "save: pp_write(w, NULL, 1) != PP_EINVAL");
    if (pp_write(w, NULL, 0) != 0)
        bt_bad(bt, "save: pp_write(w, NULL, 0) != 0");
    int rc = pp_write(w, &b->n, sizeof b->n);
    if (rc == 0 && atomic_load(&bt->fail_save))
        return 1;                        /* refused half-way */
    if (rc == 0)
        rc = pp_write(w, &b->seed, sizeof b->seed);
    /* In two pieces, to append across calls. */
    if (rc == 0)
        rc = pp_write(w, b->bytes, b->n / 3);
    if (rc == 0)
        rc = pp_write(w, b->bytes + b->n / 3, b->n - b->n / 3);
    if (rc != 0) {
        /* Remembered for pp_write_failure_codes_are_documented. */
        int none = 0;
        if (rc != PP_EAGAIN)
            atomic_compare_exchange_strong(&bt->write_fail_rc, &none, rc);
        return 1;
    }
    atomic_fetch_add(&bt->saves, 1);
    return 0;
}

static int blob_load(void **data, size_t size, pp_reader_t *r, void *ctx)
{
    bt_t *bt = ctx;
    atomic_fetch_add(&bt->load_calls, 1);
    if (atomic_load(&bt->fail_load))
        return 1;                        /* nothing allocated */
    size_t left = pp_read_left(r), n = 0;
    uint64_t seed = 0;
    if (pp_read(r, &n, sizeof n) != 0) {
        bt_bad(bt, "load: reading n failed");
        return 1;
    }
    if (left != sizeof n + sizeof seed + n || pp_read_left(r) != sizeof seed + n ||
        size != blob_size(n)) {
        bt_bad(bt, "load: pp_read_left or size wrong");
        return 1;
    }
    if (pp_read(r, &seed, sizeof seed) != 0) {
        bt_bad(bt, "load: reading seed failed");
        return 1;
    }
    blob_t *b = malloc(sizeof *b);
    unsigned char *bytes = malloc(n > 0 ? n : 1);
    if (b == NULL || bytes == NULL) {
        free(b);
        free(bytes);
        return 1;
    }
    /* More than is left, and NULL: PP_EINVAL, and nothing consumed. */
    if (pp_read(r, bytes, n + 1) != PP_EINVAL || pp_read_left(r) != n)
        bt_bad(bt, "load: pp_read past the end not PP_EINVAL, or it consumed");
    if (n > 0 && (pp_read(r, NULL, 1) != PP_EINVAL || pp_read_left(r) != n))
        bt_bad(bt, "load: pp_read(r, NULL, 1) not PP_EINVAL, or it consumed");
    if (pp_read(r, bytes, n) != 0 || pp_read_left(r) != 0) {
        bt_bad(bt, "load: reading the bytes failed");
        free(b);
        free(bytes);
        return 1;
    }
    unsigned char extra;
    if (pp_read(r, &extra, 1) != PP_EINVAL)
        bt_bad(bt, "load: pp_read at the end not PP_EINVAL");
    b->magic = BLOB_MAGIC;
    b->n = n;
    b->seed = seed;
    b->bytes = bytes;
    *data = b;
    atomic_fetch_add(&bt->loads, 1);
    return 0;
}

static void blob_free(void *data, size_t size, void *ctx)
{
    bt_t *bt = ctx;
    blob_t *b = data;
    if (b->magic != BLOB_MAGIC || size != blob_size(b->n))
        bt_bad(bt, "free: bad blob or size (double free?)");
    int tid = (int)gettid();
    if (tid == bt->main_tid)
        atomic_fetch_add(&bt->frees_main, 1);
    for (unsigned k = 0; k < PP_MAX_NODES; k++) {
        if (atomic_load(&bt->reclaimer_tid[k]) == tid) {
            atomic_fetch_add(&bt->frees_reclaimer, 1);
            break;
        }
    }
    b->magic = 0;
    free(b->bytes);
    free(b);
    atomic_fetch_add(&bt->frees, 1);
}

static bt_t *bt_new(const content_t *c)
{
    bt_t *bt = calloc(1, sizeof *bt);
    cr_assert_not_null(bt);
    bt->type.name = "blob";
    bt->type.free = blob_free;
    bt->type.save = blob_save;
    bt->type.load = blob_load;
    bt->type.ctx = bt;
    bt->content = c;
    bt->main_tid = (int)gettid();
    return bt;
}

/* Remembers the pool's reclaimer threads (before any free can run). */
static void bt_note_reclaimers(bt_t *bt, pp_pool_t *pool)
{
    pp_stats_t st;
    test_stats(pool, &st);
    for (unsigned k = 0; k < st.nodes; k++)
        atomic_store(&bt->reclaimer_tid[k], st.node[k].reclaimer_tid);
}

#define BT_OK(bt)                                                              \
    cr_assert_eq(atomic_load(&(bt)->bad), 0, "blob type: %d bad; first: %s",   \
                 atomic_load(&(bt)->bad), atomic_load(&(bt)->why))

static pp_ref_t blob_put(pp_pool_t *pool, bt_t *bt, size_t n, uint64_t seed)
{
    blob_t *b = malloc(sizeof *b);
    cr_assert_not_null(b);
    b->magic = BLOB_MAGIC;
    b->n = n;
    b->seed = seed;
    b->bytes = malloc(n > 0 ? n : 1);
    cr_assert_not_null(b->bytes);
    bt->content->fill(b->bytes, n, seed);
    pp_ref_t ref = PP_REF_NONE;
    int rc = pp_put(pool, b, blob_size(n), &bt->type, 0, &ref);
    cr_assert_eq(rc, 0, "pp_put(blob of %zu): %s", n, pp_err_name(rc));
    return ref;
}

static bool blob_ok(const bt_t *bt, const blob_t *b, size_t n, uint64_t seed)
{
    return b != NULL && b->magic == BLOB_MAGIC && b->n == n && b->seed == seed &&
           bt->content->check(b->bytes, n, seed);
}

static void blob_pin_check(pp_pool_t *pool, bt_t *bt, pp_ref_t ref, size_t n, uint64_t seed)
{
    void *d = NULL;
    int rc = pp_pin(pool, ref, 0, &d);
    cr_assert_eq(rc, 0, "pin of blob(%zu): %s", n, pp_err_name(rc));
    bool ok = blob_ok(bt, d, n, seed);
    assert_rc(pp_unpin(pool, ref), 0);
    cr_assert(ok, "blob of %zu bytes does not hold its contents", n);
}

/* Pins for write, checks, gives the blob new contents (same n). */
static void blob_pin_rewrite(pp_pool_t *pool, bt_t *bt, pp_ref_t ref, size_t n, uint64_t old_seed,
                             uint64_t new_seed)
{
    void *d = NULL;
    int rc = pp_pin(pool, ref, PP_PIN_WRITE, &d);
    cr_assert_eq(rc, 0, "write pin of blob(%zu): %s", n, pp_err_name(rc));
    blob_t *b = d;
    bool ok = blob_ok(bt, b, n, old_seed);
    if (ok) {
        b->seed = new_seed;
        bt->content->fill(b->bytes, n, new_seed);
    }
    assert_rc(pp_unpin(pool, ref), 0);
    cr_assert(ok, "blob of %zu bytes does not hold its contents", n);
}

/* ------------------------------------------------------------------------ */
/* 1. Round trips                                                            */
/* ------------------------------------------------------------------------ */

/* 1 byte, around a block and a page, not page multiples, around and over
 * the 1 MiB I/O chunk (buffered reads, and direct writes and reads), over
 * two: about 9 MiB in all, for a 4 MiB limit.  In test_swap_direct, with
 * direct I/O: the entries put are written through the bounce buffer, those
 * loaded (page-aligned) straight from memory, their tails padded. */
static const size_t rt_sizes[] = {
    1, 7, 100, 511, 4095, 4096, 4097, 65537, 300001,
    MiB - 1, MiB + 1, MiB + 3, 3 * MiB / 2 + 3, 2 * MiB + 5, 2 * MiB + 123,
};
#define RT_N (sizeof rt_sizes / sizeof rt_sizes[0])
#define RT_ROUNDS 4

static void round_trips(unsigned flags, const content_t *c, bool expect_smaller)
{
    sw_t s;
    sw_open(&s, 4 * MiB, 0, flags, false);
    pp_ref_t ref[RT_N];
    unsigned ver[RT_N] = {0};
    for (size_t i = 0; i < RT_N; i++)
        ref[i] = put_flat(s.pool, rt_sizes[i], NULL, c, seed_of(i, 0), 0);
    for (unsigned r = 0; r < RT_ROUNDS; r++) {
        /* Everything out, then every entry back in turn (loading one
         * evicts others), a third of them rewritten. */
        assert_rc(sw_squeeze(&s, 0), 0);
        for (size_t i = 0; i < RT_N; i++)
            assert_swapped(&s, ref[i], "after a squeeze");
        for (size_t i = 0; i < RT_N; i++) {
            if ((i + r) % 3 == 0) {
                pin_rewrite(s.pool, ref[i], rt_sizes[i], c, seed_of(i, ver[i]),
                            seed_of(i, ver[i] + 1));
                ver[i]++;
            } else {
                pin_check(s.pool, ref[i], rt_sizes[i], c, seed_of(i, ver[i]));
            }
        }
    }
    assert_rc(sw_squeeze(&s, 0), 0);
    for (size_t i = 0; i < RT_N; i++)
        pin_check(s.pool, ref[i], rt_sizes[i], c, seed_of(i, ver[i]));

    pp_stats_t st;
    sw_stats(&s, &st);
    /* Each squeeze left every entry on disk: each pin after it loaded. */
    cr_assert_eq(st.total.loads, (RT_ROUNDS + 1) * RT_N, "loads %" PRIu64, st.total.loads);
    cr_assert_gt(st.total.evictions_written, 0);
    cr_assert_gt(st.total.evictions_clean, 0);
    cr_assert_gt(st.total.swap_bytes_read, 0);
    cr_assert_eq(st.total.checksum_failures, 0);
    cr_assert_eq(st.total.io_errors, 0);
    cr_assert_leq(st.resident_peak, s.limit, "peak %" PRIu64, st.resident_peak);
    if (expect_smaller)
        cr_assert_lt(st.total.swap_bytes_written, st.total.swap_raw_written);
    else
        cr_assert_eq(st.total.swap_bytes_written, st.total.swap_raw_written);
    cr_assert(pp__pool_is_valid(s.pool));
    release_all(s.pool, ref, RT_N);
    cr_assert_eq(STAT_TOTAL(s.pool, swap_used_bytes), 0);
    sw_close(&s);
}

Test(SW_SUITE, round_trips_raw, .timeout = 60)
{
    round_trips(0, &RANDOM, false);
}

Test(SW_SUITE, round_trips_compressed_compressible, .timeout = 60)
{
    round_trips(PP_SWAP_COMPRESS, &RUNS, true);
}

Test(SW_SUITE, round_trips_compressed_incompressible, .timeout = 60)
{
    round_trips(PP_SWAP_COMPRESS, &RANDOM, false);
}

/* Each copy is the entry's bytes, stored raw at the place the store says,
 * in the file of the entry's home node. */
Test(SW_SUITE, copies_are_in_their_home_node_file, .timeout = 60)
{
    sw_t s;
    sw_open(&s, 1 * MiB, 0, 0, false);
    pp_ref_t ref[PP_MAX_NODES];
    size_t size[PP_MAX_NODES];
    for (unsigned k = 0; k < s.nodes; k++) {
        size[k] = 10000 + 4096 * k + 3;
        ref[k] = put_flat(s.pool, size[k], NULL, &RANDOM, seed_of(k, 0), PP_ON_NODE(k));
        cr_assert_eq(pp_ref_node(ref[k]), k);
    }
    assert_rc(sw_squeeze(&s, 0), 0);
    for (unsigned k = 0; k < s.nodes; k++) {
        uint64_t off, len;
        assert_rc(pp__debug_swap_where(s.pool, ref[k], &off, &len), 0);
        cr_assert_eq(len, size[k]);
        cr_assert_eq(STAT_NODE(s.pool, k, swap_used_bytes), (size[k] + 4095) / 4096 * 4096);
        char path[4200];
        snprintf(path, sizeof path, "%s/node%u.swap", pp__swap_path(s.pool), k);
        int f = open(path, O_RDONLY | O_CLOEXEC);
        cr_assert_geq(f, 0, "open %s: %s", path, strerror(errno));
        char *buf = malloc(len);
        cr_assert_not_null(buf);
        ssize_t got = pread(f, buf, len, (off_t)off);
        close(f);
        bool ok = got == (ssize_t)len && check_pattern(buf, len, seed_of(k, 0));
        free(buf);
        cr_assert(ok, "node %u: the bytes at %" PRIu64 " in %s are not the entry's", k, off,
                  path);
    }
    for (unsigned k = 0; k < s.nodes; k++)
        pin_check(s.pool, ref[k], size[k], &RANDOM, seed_of(k, 0));
    release_all(s.pool, ref, s.nodes);
    sw_close(&s);
}

/* Several threads at once, each pinning (and now and then rewriting) its
 * own entries, all competing for one memory limit: every pin sees the last
 * version its thread wrote, whatever was evicted and loaded in between. */
#define CC_THREADS 4
#define CC_PER 6
#define CC_OPS 200

typedef struct cc_arg {
    pp_pool_t *pool;
    const content_t *c;
    pp_ref_t ref[CC_PER];
    size_t size[CC_PER];
    unsigned ver[CC_PER];
    int k;
} cc_arg_t;

static uint64_t cc_seed(int k, size_t i, unsigned v) { return seed_of((size_t)k * 100 + i, v); }

static void *cc_worker(void *arg)
{
    cc_arg_t *a = arg;
    uint64_t st = (uint64_t)a->k * 7919 + 13;
    for (int op = 0; op < CC_OPS; op++) {
        size_t i = (size_t)(splitmix64(&st) % CC_PER);
        bool write = splitmix64(&st) % 3 == 0;
        void *d = NULL;
        int rc = pp_pin(a->pool, a->ref[i], write ? PP_PIN_WRITE : 0, &d);
        TCHECK(rc == 0, "thread %d op %d: pin: %s", a->k, op, pp_err_name(rc));
        if (rc != 0)
            return NULL;
        bool ok = a->c->check(d, a->size[i], cc_seed(a->k, i, a->ver[i]));
        if (ok && write)
            a->c->fill(d, a->size[i], cc_seed(a->k, i, ++a->ver[i]));
        rc = pp_unpin(a->pool, a->ref[i]);
        TCHECK(rc == 0, "thread %d: unpin: %s", a->k, pp_err_name(rc));
        TCHECK(ok, "thread %d op %d: entry %zu (version %u) lost its contents", a->k, op, i,
               a->ver[i]);
        if (!ok)
            return NULL;
    }
    return NULL;
}

static void concurrent_round_trips(unsigned flags)
{
    sw_t s;
    sw_open(&s, 1 * MiB, 0, flags, false);
    cc_arg_t a[CC_THREADS];
    for (int k = 0; k < CC_THREADS; k++) {
        a[k] = (cc_arg_t){.pool = s.pool, .c = k % 2 ? &RUNS : &RANDOM, .k = k};
        for (size_t i = 0; i < CC_PER; i++) {
            a[k].size[i] = 60000 + 15000 * i + (size_t)k;    /* 2.3 MB in all */
            a[k].ref[i] = put_flat(s.pool, a[k].size[i], NULL, a[k].c, cc_seed(k, i, 0),
                                   PP_ON_NODE((unsigned)(k + i) % s.nodes));
        }
    }
    pthread_t th[CC_THREADS];
    for (int k = 0; k < CC_THREADS; k++)
        test_thread_start(&th[k], cc_worker, &a[k]);
    for (int k = 0; k < CC_THREADS; k++)
        test_thread_join(th[k]);
    TCHECK_NONE();
    assert_rc(sw_squeeze(&s, 0), 0);
    for (int k = 0; k < CC_THREADS; k++) {
        for (size_t i = 0; i < CC_PER; i++)
            pin_check(s.pool, a[k].ref[i], a[k].size[i], a[k].c, cc_seed(k, i, a[k].ver[i]));
    }
    pp_stats_t st;
    sw_stats(&s, &st);
    cr_assert_gt(st.total.loads, 0);
    cr_assert_eq(st.total.checksum_failures, 0);
    cr_assert_eq(st.total.io_errors, 0);
    cr_assert_leq(st.resident_peak, s.limit);
    cr_assert(pp__pool_is_valid(s.pool));
    for (int k = 0; k < CC_THREADS; k++)
        release_all(s.pool, a[k].ref, CC_PER);
    cr_assert_eq(STAT_TOTAL(s.pool, swap_used_bytes), 0);
    sw_close(&s);
}

Test(SW_SUITE, concurrent_round_trips_raw, .timeout = 60)
{
    concurrent_round_trips(0);
}

Test(SW_SUITE, concurrent_round_trips_compressed, .timeout = 60)
{
    concurrent_round_trips(PP_SWAP_COMPRESS);
}

/* ------------------------------------------------------------------------ */
/* 2. Clean entries are not rewritten                                        */
/* ------------------------------------------------------------------------ */

#define CL_N 8
#define CL_SIZE (64 * KiB + 1)

Test(SW_SUITE, clean_entries_are_not_rewritten, .timeout = 60)
{
    sw_t s;
    sw_open(&s, 1 * MiB, 0, 0, true);
    pp_ref_t ref[CL_N];
    unsigned ver[CL_N] = {0};
    for (size_t i = 0; i < CL_N; i++)
        ref[i] = put_flat(s.pool, CL_SIZE, NULL, &RANDOM, seed_of(i, 0), 0);
    assert_rc(sw_squeeze(&s, 0), 0);
    pp_stats_t s0, s1, s2;
    sw_stats(&s, &s0);
    cr_assert_eq(s0.total.evictions_written, CL_N);
    cr_assert_eq(s0.total.swap_bytes_written, (uint64_t)CL_N * CL_SIZE);

    /* Read pins: loaded, clean, with a valid copy; evicted without a write. */
    for (size_t i = 0; i < CL_N; i++) {
        pin_check(s.pool, ref[i], CL_SIZE, &RANDOM, seed_of(i, 0));
        unsigned state = test_stat(s.pool, ref[i]).state;
        cr_assert_eq(state & (PP_STATE_RESIDENT | PP_STATE_SWAPPED | PP_STATE_DIRTY),
                     PP_STATE_RESIDENT | PP_STATE_SWAPPED, "state 0x%x", state);
    }
    unsigned long writes0 = atomic_load(&s.fd->writes), wbytes0 = atomic_load(&s.fd->write_bytes);
    assert_rc(sw_squeeze(&s, 0), 0);
    sw_stats(&s, &s1);
    cr_assert_eq(s1.total.evictions_clean - s0.total.evictions_clean, CL_N);
    cr_assert_eq(s1.total.evictions_written, s0.total.evictions_written);
    cr_assert_eq(s1.total.swap_bytes_written, s0.total.swap_bytes_written);
    cr_assert_eq(atomic_load(&s.fd->writes), writes0, "a clean eviction wrote");
    cr_assert_eq(atomic_load(&s.fd->write_bytes), wbytes0);

    /* Write pins: entry 0 while swapped (its load takes the pin), entry 1
     * once resident.  Both are written again, the others are not. */
    pin_check(s.pool, ref[1], CL_SIZE, &RANDOM, seed_of(1, 0));
    for (size_t i = 0; i < 2; i++) {
        pin_rewrite(s.pool, ref[i], CL_SIZE, &RANDOM, seed_of(i, 0), seed_of(i, 1));
        ver[i] = 1;
        unsigned state = test_stat(s.pool, ref[i]).state;
        cr_assert(state & PP_STATE_DIRTY, "entry %zu: state 0x%x, not DIRTY", i, state);
    }
    for (size_t i = 2; i < CL_N; i++)
        pin_check(s.pool, ref[i], CL_SIZE, &RANDOM, seed_of(i, 0));
    assert_rc(sw_squeeze(&s, 0), 0);
    sw_stats(&s, &s2);
    cr_assert_eq(s2.total.evictions_written - s1.total.evictions_written, 2);
    cr_assert_eq(s2.total.evictions_clean - s1.total.evictions_clean, CL_N - 2);
    cr_assert_eq(s2.total.swap_bytes_written - s1.total.swap_bytes_written, 2 * CL_SIZE);
    cr_assert_eq(atomic_load(&s.fd->write_bytes) - wbytes0, 2 * dev_bytes(CL_SIZE));
    /* The stale copies were given back: one copy per entry. */
    cr_assert_eq(s2.total.swap_used_bytes, (uint64_t)CL_N * ((CL_SIZE + 4095) / 4096 * 4096));

    for (size_t i = 0; i < CL_N; i++)
        pin_check(s.pool, ref[i], CL_SIZE, &RANDOM, seed_of(i, ver[i]));
    release_all(s.pool, ref, CL_N);
    sw_close(&s);
}

/* pp_pin_many with PP_PIN_WRITE of swapped entries (loaded by the swap
 * threads, then pinned): they are dirty, so written again. */
Test(SW_SUITE, pin_many_write_makes_loaded_entries_dirty, .timeout = 60)
{
    sw_t s;
    sw_open(&s, 1 * MiB, 0, 0, false);
    enum { N = 3 };
    pp_ref_t ref[N];
    void *d[N];
    for (size_t i = 0; i < N; i++)
        ref[i] = put_flat(s.pool, CL_SIZE, NULL, &RANDOM, seed_of(i, 0), 0);
    assert_rc(sw_squeeze(&s, 0), 0);
    uint64_t written = STAT_TOTAL(s.pool, evictions_written);
    assert_rc(pp_pin_many(s.pool, ref, N, PP_PIN_WRITE, d), 0);
    bool ok = true;
    for (size_t i = 0; i < N; i++) {
        ok &= check_pattern(d[i], CL_SIZE, seed_of(i, 0));
        fill_pattern(d[i], CL_SIZE, seed_of(i, 1));
        cr_assert(test_stat(s.pool, ref[i]).state & PP_STATE_DIRTY);
    }
    assert_rc(pp_unpin_many(s.pool, ref, N, NULL), 0);
    cr_assert(ok, "pp_pin_many loaded wrong contents");
    assert_rc(sw_squeeze(&s, 0), 0);
    cr_assert_eq(STAT_TOTAL(s.pool, evictions_written) - written, N);
    for (size_t i = 0; i < N; i++)
        pin_check(s.pool, ref[i], CL_SIZE, &RANDOM, seed_of(i, 1));
    release_all(s.pool, ref, N);
    sw_close(&s);
}

/* ------------------------------------------------------------------------ */
/* 3. Corruption                                                             */
/* ------------------------------------------------------------------------ */

static const size_t cr_sizes[] = {3 * 4096 + 5, 20000, 2 * MiB + 4097};
#define CR_N (sizeof cr_sizes / sizeof cr_sizes[0])

static void corruption(unsigned flags, const content_t *c)
{
    sw_t s;
    sw_open(&s, 4 * MiB, 0, flags, false);
    pp_ref_t ref[CR_N];
    for (size_t i = 0; i < CR_N; i++)       /* one node: neighbours in one file */
        ref[i] = put_flat(s.pool, cr_sizes[i], NULL, c, seed_of(i, 0), PP_ON_NODE(0));
    assert_rc(sw_squeeze(&s, 0), 0);
    uint64_t fails = 0;
    /* The middle small entry, then the big one (raw: in its second chunk). */
    for (size_t v = 1; v < CR_N; v++) {
        uint64_t off = 0, len = 0, off2 = 0, len2 = 0;
        assert_rc(pp__debug_swap_where(s.pool, ref[v], &off, &len), 0);
        if (flags & PP_SWAP_COMPRESS)
            cr_assert_lt(len, cr_sizes[v], "the copy is not compressed");
        else
            cr_assert_eq(len, cr_sizes[v]);
        flip_byte(&s, ref[v], len / 2);
        pp_stats_t st;
        sw_stats(&s, &st);
        uint64_t reserved = st.resident_reserved;
        for (int k = 0; k < 2; k++) {
            void *d = (void *)1;
            assert_rc(pp_pin(s.pool, ref[v], 0, &d), PP_ECORRUPT);
            fails++;
        }
        sw_stats(&s, &st);
        cr_assert_eq(st.total.checksum_failures, fails);
        cr_assert_eq(st.node[0].checksum_failures, fails);
        cr_assert_eq(st.resident_reserved, reserved, "a failed load kept its reservation");
        /* Still alive, still on disk, same copy. */
        pp_entry_info_t info = test_stat(s.pool, ref[v]);
        cr_assert_eq(info.owners, 1);
        cr_assert_eq(info.pins, 0);
        assert_swapped(&s, ref[v], "after PP_ECORRUPT");
        assert_rc(pp__debug_swap_where(s.pool, ref[v], &off2, &len2), 0);
        cr_assert(off2 == off && len2 == len);
        /* The others are not affected. */
        for (size_t i = 0; i < CR_N; i++) {
            if (i != v)
                pin_check(s.pool, ref[i], cr_sizes[i], c, seed_of(i, 0));
        }
        /* Repaired: loads with the right contents. */
        flip_byte(&s, ref[v], len / 2);
        pin_check(s.pool, ref[v], cr_sizes[v], c, seed_of(v, 0));
        assert_rc(sw_squeeze(&s, 0), 0);
    }
    cr_assert(report_has(&s.rep, 0, "checksum", NULL, NULL));
    cr_assert_eq(STAT_TOTAL(s.pool, io_errors), 0);
    cr_assert(pp__pool_is_valid(s.pool));
    release_all(s.pool, ref, CR_N);
    sw_close(&s);
}

Test(SW_SUITE, corrupt_copy_is_ecorrupt_raw, .timeout = 60)
{
    corruption(0, &RANDOM);
}

Test(SW_SUITE, corrupt_copy_is_ecorrupt_compressed, .timeout = 60)
{
    corruption(PP_SWAP_COMPRESS, &RUNS);
}

/* A type's load is never handed bytes that failed their checksum. */
Test(SW_SUITE, corrupt_copy_never_reaches_load, .timeout = 60)
{
    sw_t s;
    sw_open(&s, 1 * MiB, 0, 0, false);
    bt_t *bt = bt_new(&RANDOM);
    pp_ref_t ref = blob_put(s.pool, bt, 50000, 11);
    assert_rc(sw_squeeze(&s, 0), 0);
    uint64_t off, len;
    assert_rc(pp__debug_swap_where(s.pool, ref, &off, &len), 0);
    flip_byte(&s, ref, len - 1);
    assert_rc(pp_pin(s.pool, ref, 0, NULL), PP_ECORRUPT);
    cr_assert_eq(atomic_load(&bt->load_calls), 0, "load ran on a corrupt copy");
    cr_assert_eq(STAT_TOTAL(s.pool, checksum_failures), 1);
    assert_swapped(&s, ref, "after PP_ECORRUPT");
    flip_byte(&s, ref, len - 1);
    blob_pin_check(s.pool, bt, ref, 50000, 11);
    BT_OK(bt);
    release_all(s.pool, &ref, 1);
    sw_close(&s);
    free(bt);
}

/* Pins of a corrupt copy, again and again (a remote rank's pins can do
 * that): each is PP_ECORRUPT and counted, but reported only the 1st, 2nd,
 * 4th, 8th... time on the node, with the count in the line. */
Test(SW_SUITE, corrupt_copy_pinned_again_and_again_is_reported_at_powers_of_two,
     .timeout = 60)
{
    sw_t s;
    sw_open(&s, 1 * MiB, 0, 0, false);
    pp_ref_t ref = put_flat(s.pool, 70000, NULL, &RANDOM, seed_of(0, 0), 0);
    assert_rc(sw_squeeze(&s, 0), 0);
    flip_byte(&s, ref, 4321);
    size_t before = report_cap_count(&s.rep);
    for (int k = 0; k < 20; k++)
        assert_rc(pp_pin(s.pool, ref, 0, NULL), PP_ECORRUPT);
    cr_assert_eq(STAT_TOTAL(s.pool, checksum_failures), 20);
    size_t lines = report_cap_count(&s.rep) - before;
    cr_assert_eq(lines, 5, "20 failures reported %zu times (1, 2, 4, 8, 16: 5)", lines);
    cr_assert(report_has(&s.rep, before, "checksum failure 16 on this node", NULL, NULL),
              "%s", report_dump(&s.rep));
    flip_byte(&s, ref, 4321);
    pin_check(s.pool, ref, 70000, &RANDOM, seed_of(0, 0));
    release_all(s.pool, &ref, 1);
    sw_close(&s);
}

static unsigned state_of(pp_pool_t *pool, pp_ref_t ref)
{
    pp_entry_info_t info;
    memset(&info, 0, sizeof info);
    return pp_stat(pool, ref, &info) == 0 ? info.state : 0xffffffffu;
}

/* The swap thread's loads (pp_prefetch, PP_PIN_NOWAIT) check the copy the
 * same way: a corrupt one is counted, never made resident, and kept. */
Test(SW_SUITE, prefetch_of_a_corrupt_copy_keeps_it, .timeout = 60)
{
    sw_t s;
    sw_open(&s, 1 * MiB, 0, 0, false);
    pp_ref_t ref = put_flat(s.pool, 70000, NULL, &RANDOM, seed_of(0, 0), 0);
    assert_rc(sw_squeeze(&s, 0), 0);
    flip_byte(&s, ref, 12345);
    assert_rc(pp_prefetch(s.pool, ref), 0);
    cr_assert(WAIT_UNTIL(STAT_TOTAL(s.pool, checksum_failures) == 1 &&
                             !(state_of(s.pool, ref) & PP_STATE_LOADING),
                         TEST_WAIT_MS),
              "the prefetch did not end (state 0x%x)", state_of(s.pool, ref));
    assert_swapped(&s, ref, "after a corrupt prefetch");
    assert_rc(pp_pin(s.pool, ref, PP_PIN_NOWAIT, NULL), PP_EAGAIN);
    cr_assert(WAIT_UNTIL(STAT_TOTAL(s.pool, checksum_failures) == 2 &&
                             !(state_of(s.pool, ref) & PP_STATE_LOADING),
                         TEST_WAIT_MS));
    assert_rc(pp_pin(s.pool, ref, 0, NULL), PP_ECORRUPT);
    cr_assert_eq(STAT_TOTAL(s.pool, checksum_failures), 3);
    assert_swapped(&s, ref, "after PP_ECORRUPT");
    /* Repaired: the swap thread loads it. */
    flip_byte(&s, ref, 12345);
    assert_rc(pp_prefetch(s.pool, ref), 0);
    cr_assert(WAIT_UNTIL(state_of(s.pool, ref) & PP_STATE_RESIDENT, TEST_WAIT_MS));
    void *d = NULL;
    assert_rc(pp_pin(s.pool, ref, PP_PIN_NOWAIT, &d), 0);
    bool ok = check_pattern(d, 70000, seed_of(0, 0));
    assert_rc(pp_unpin(s.pool, ref), 0);
    cr_assert(ok);
    cr_assert_eq(STAT_TOTAL(s.pool, checksum_failures), 3);
    release_all(s.pool, &ref, 1);
    sw_close(&s);
}

/* ------------------------------------------------------------------------ */
/* 4. A failing device on write                                              */
/* ------------------------------------------------------------------------ */

#define WF_SIZE (64 * KiB)
#define WF_A 4                   /* written before the fault */
#define WF_B 16                  /* fill the 1 MiB limit exactly */

enum wfault { WF_EIO, WF_ENOSPC, WF_SHORT };

static void write_fault(enum wfault kind)
{
    sw_t s;
    sw_open(&s, 1 * MiB, 0, 0, true);
    pp_ref_t a[WF_A], b[WF_B];
    for (size_t i = 0; i < WF_A; i++)
        a[i] = put_flat(s.pool, WF_SIZE, NULL, &RANDOM, seed_of(i, 0), 0);
    assert_rc(sw_squeeze(&s, 0), 0);
    pp_stats_t s0, s1;
    sw_stats(&s, &s0);
    cr_assert_eq(s0.total.swap_used_bytes, WF_A * WF_SIZE);

    if (kind == WF_EIO)
        atomic_store(&s.fd->write_err, -EIO);
    else if (kind == WF_ENOSPC)
        atomic_store(&s.fd->write_err, -ENOSPC);
    else
        atomic_store(&s.fd->write_short, 1);
    for (size_t i = 0; i < WF_B; i++)
        b[i] = put_flat(s.pool, WF_SIZE, NULL, &RANDOM, seed_of(100 + i, 0), 0);

    /* A put that needs room, and a load that needs room: nothing can be
     * written, so PP_ENOMEM (not a hang, nothing lost). */
    void *buf = malloc(WF_SIZE);
    cr_assert_not_null(buf);
    pp_ref_t extra;
    assert_rc(pp_put(s.pool, buf, WF_SIZE, NULL, 0, &extra), PP_ENOMEM);
    free(buf);
    assert_rc(pp_pin(s.pool, a[0], 0, NULL), PP_ENOMEM);
    assert_swapped(&s, a[0], "a[0] after PP_ENOMEM");

    sw_stats(&s, &s1);
    cr_assert_gt(s1.total.io_errors, s0.total.io_errors, "failed writes not counted");
    cr_assert_gt(atomic_load(&s.fd->write_fails), 0);
    cr_assert_eq(s1.total.swap_used_bytes, s0.total.swap_used_bytes, "failed writes hold space");
    cr_assert_eq(s1.total.evictions_written, s0.total.evictions_written);
    cr_assert_eq(s1.total.swapped_bytes, WF_A * WF_SIZE);
    for (size_t i = 0; i < WF_B; i++) {
        assert_resident_no_copy(&s, b[i], "b after failed writes");
        pin_check(s.pool, b[i], WF_SIZE, &RANDOM, seed_of(100 + i, 0));
    }
    cr_assert(report_has(&s.rep, 0, "write", "failed", NULL));
    cr_assert(pp__pool_is_valid(s.pool));

    /* The pool keeps working: reads are fine, a release makes room. */
    assert_rc(pp_release(s.pool, b[WF_B - 1]), 0);
    test_drain(s.pool);
    pin_check(s.pool, a[0], WF_SIZE, &RANDOM, seed_of(0, 0));

    /* Fault cleared: eviction works again, everything round-trips. */
    atomic_store(&s.fd->write_err, 0);
    atomic_store(&s.fd->write_short, 0);
    assert_rc(sw_squeeze(&s, 0), 0);
    for (size_t i = 0; i < WF_A; i++)
        assert_swapped(&s, a[i], "a after the fault");
    for (size_t i = 0; i < WF_B - 1; i++)
        assert_swapped(&s, b[i], "b after the fault");
    cr_assert_eq(STAT_TOTAL(s.pool, swap_used_bytes), (WF_A + WF_B - 1) * WF_SIZE);
    for (size_t i = 0; i < WF_A; i++)
        pin_check(s.pool, a[i], WF_SIZE, &RANDOM, seed_of(i, 0));
    for (size_t i = 0; i < WF_B - 1; i++)
        pin_check(s.pool, b[i], WF_SIZE, &RANDOM, seed_of(100 + i, 0));
    cr_assert_eq(STAT_TOTAL(s.pool, checksum_failures), 0);
    release_all(s.pool, a, WF_A);
    release_all(s.pool, b, WF_B - 1);
    cr_assert_eq(STAT_TOTAL(s.pool, swap_used_bytes), 0);
    sw_close(&s);
}

Test(SW_SUITE, write_eio_keeps_entries_resident, .timeout = 60)
{
    write_fault(WF_EIO);
}

Test(SW_SUITE, write_enospc_keeps_entries_resident, .timeout = 60)
{
    write_fault(WF_ENOSPC);
}

Test(SW_SUITE, short_write_keeps_entries_resident, .timeout = 60)
{
    write_fault(WF_SHORT);
}

/* A rewrite that fails: the stale copy is gone, the new contents stay in
 * memory, and no space is held for either. */
Test(SW_SUITE, failed_rewrite_keeps_new_contents_resident, .timeout = 60)
{
    sw_t s;
    sw_open(&s, 1 * MiB, 0, 0, true);
    enum { N = 4 };
    pp_ref_t ref[N];
    for (size_t i = 0; i < N; i++)
        ref[i] = put_flat(s.pool, WF_SIZE, NULL, &RANDOM, seed_of(i, 0), 0);
    assert_rc(sw_squeeze(&s, 0), 0);
    pin_rewrite(s.pool, ref[0], WF_SIZE, &RANDOM, seed_of(0, 0), seed_of(0, 1));
    atomic_store(&s.fd->write_err, -EIO);
    assert_rc(sw_squeeze(&s, 0), PP_ENOMEM);
    assert_resident_no_copy(&s, ref[0], "after a failed rewrite");
    cr_assert_eq(STAT_TOTAL(s.pool, swap_used_bytes), (N - 1) * WF_SIZE);
    assert_rc(pp__debug_swap_where(s.pool, ref[0], &(uint64_t){0}, &(uint64_t){0}), PP_EAGAIN);
    pin_check(s.pool, ref[0], WF_SIZE, &RANDOM, seed_of(0, 1));
    atomic_store(&s.fd->write_err, 0);
    assert_rc(sw_squeeze(&s, 0), 0);
    assert_swapped(&s, ref[0], "after the fault");
    cr_assert_eq(STAT_TOTAL(s.pool, swap_used_bytes), N * WF_SIZE);
    pin_check(s.pool, ref[0], WF_SIZE, &RANDOM, seed_of(0, 1));
    for (size_t i = 1; i < N; i++)
        pin_check(s.pool, ref[i], WF_SIZE, &RANDOM, seed_of(i, 0));
    release_all(s.pool, ref, N);
    sw_close(&s);
}

/* Starting write-back may fail: it costs nothing but page cache.  A swap
 * thread starts it once it has been idle for a second after writing, so
 * the test waits (for the call, not for a time) until it has happened. */
Test(SW_SUITE, failing_sync_loses_nothing, .timeout = 60)
{
    sw_t s;
    sw_open(&s, 1 * MiB, 0, 0, true);
    atomic_store(&s.fd->sync_err, -EIO);
    enum { N = 6 };
    pp_ref_t ref[N];
    for (size_t i = 0; i < N; i++)
        ref[i] = put_flat(s.pool, WF_SIZE, NULL, &RANDOM, seed_of(i, 0), 0);
    assert_rc(sw_squeeze(&s, 0), 0);
    cr_assert(WAIT_UNTIL(atomic_load(&s.fd->syncs) > 0, TEST_WAIT_MS), "no sync was started");
    for (size_t i = 0; i < N; i++)
        assert_swapped(&s, ref[i], "with sync failing");
    for (size_t i = 0; i < N; i++)
        pin_check(s.pool, ref[i], WF_SIZE, &RANDOM, seed_of(i, 0));
    release_all(s.pool, ref, N);
    sw_close(&s);
}

/* ------------------------------------------------------------------------ */
/* 5. A failing device on read                                               */
/* ------------------------------------------------------------------------ */

static const size_t rf_sizes[] = {5000, 2 * 65536 + 3, 300000};
#define RF_N (sizeof rf_sizes / sizeof rf_sizes[0])

static void read_fault(bool zero, unsigned flags, const content_t *c)
{
    sw_t s;
    sw_open(&s, 1 * MiB, 0, flags, true);
    pp_ref_t ref[RF_N];
    for (size_t i = 0; i < RF_N; i++)
        ref[i] = put_flat(s.pool, rf_sizes[i], NULL, c, seed_of(i, 0), 0);
    assert_rc(sw_squeeze(&s, 0), 0);
    if (zero)
        atomic_store(&s.fd->read_zero, 1);
    else
        atomic_store(&s.fd->read_err, -EIO);
    for (size_t i = 0; i < RF_N; i++) {
        uint64_t off, len, off2, len2;
        assert_rc(pp__debug_swap_where(s.pool, ref[i], &off, &len), 0);
        pp_stats_t st;
        sw_stats(&s, &st);
        uint64_t io = st.total.io_errors, reserved = st.resident_reserved;
        assert_rc(pp_pin(s.pool, ref[i], 0, NULL), PP_EIO);
        sw_stats(&s, &st);
        cr_assert_eq(st.total.io_errors, io + 1);
        cr_assert_eq(st.resident_reserved, reserved, "a failed load kept its reservation");
        cr_assert_eq(st.total.checksum_failures, 0);
        assert_swapped(&s, ref[i], "after PP_EIO");
        assert_rc(pp__debug_swap_where(s.pool, ref[i], &off2, &len2), 0);
        cr_assert(off2 == off && len2 == len, "the copy moved");
    }
    cr_assert_gt(atomic_load(&s.fd->read_fails), 0);
    cr_assert(report_has(&s.rep, 0, "read", "failed", NULL));
    atomic_store(&s.fd->read_zero, 0);
    atomic_store(&s.fd->read_err, 0);
    for (size_t i = 0; i < RF_N; i++)
        pin_check(s.pool, ref[i], rf_sizes[i], c, seed_of(i, 0));
    cr_assert(pp__pool_is_valid(s.pool));
    release_all(s.pool, ref, RF_N);
    sw_close(&s);
}

Test(SW_SUITE, read_eio_keeps_the_copy, .timeout = 60)
{
    read_fault(false, 0, &RANDOM);
    read_fault(false, PP_SWAP_COMPRESS, &RUNS);
}

Test(SW_SUITE, read_of_missing_bytes_keeps_the_copy, .timeout = 60)
{
    read_fault(true, 0, &RANDOM);
    read_fault(true, PP_SWAP_COMPRESS, &RUNS);
}

/* ------------------------------------------------------------------------ */
/* 6. swap_limit, memory limit, space                                        */
/* ------------------------------------------------------------------------ */

#define SL_SIZE (64 * KiB)
#define SL_LIMIT (256 * KiB)     /* four copies */
#define SL_MAX 64

Test(SW_SUITE, swap_limit_stops_eviction_and_loses_nothing, .timeout = 60)
{
    sw_t s;
    sw_open(&s, 1 * MiB, SL_LIMIT, 0, false);
    pp_ref_t ref[SL_MAX];
    bool alive[SL_MAX] = {false};
    size_t n = 0;
    int rc = 0;
    /* Put until the pool refuses: 16 entries in memory, 4 on disk. */
    for (; n < SL_MAX; n++) {
        void *buf = malloc(SL_SIZE);
        cr_assert_not_null(buf);
        fill_pattern(buf, SL_SIZE, seed_of(n, 0));
        rc = pp_put(s.pool, buf, SL_SIZE, NULL, 0, &ref[n]);
        cr_assert_leq(STAT_TOTAL(s.pool, swap_used_bytes), SL_LIMIT);
        if (rc != 0) {
            free(buf);
            break;
        }
        alive[n] = true;
    }
    assert_rc(rc, PP_ENOMEM);
    cr_assert_eq(n, 1 * MiB / SL_SIZE + SL_LIMIT / SL_SIZE, "%zu entries put", n);
    pp_stats_t st;
    sw_stats(&s, &st);
    cr_assert_eq(st.total.swap_used_bytes, SL_LIMIT);
    cr_assert_eq(st.total.io_errors, 0, "a full store is not an I/O error");
    size_t swapped[SL_MAX], nsw = 0;
    for (size_t i = 0; i < n; i++) {
        if (!(test_stat(s.pool, ref[i]).state & PP_STATE_RESIDENT))
            swapped[nsw++] = i;
    }
    cr_assert_eq(nsw, SL_LIMIT / SL_SIZE);

    /* A load that needs room: nothing can go, so PP_ENOMEM; still on disk. */
    size_t v = swapped[0];
    assert_rc(pp_pin(s.pool, ref[v], 0, NULL), PP_ENOMEM);
    assert_swapped(&s, ref[v], "after PP_ENOMEM");
    cr_assert_leq(STAT_TOTAL(s.pool, swap_used_bytes), SL_LIMIT);

    /* Two copies die: their space comes back.  (Everything in memory is
     * held pinned meanwhile, so no eviction can take that space before it
     * is seen free.) */
    bool held[SL_MAX] = {false};
    for (size_t i = 0; i < n; i++) {
        if (test_stat(s.pool, ref[i]).state & PP_STATE_RESIDENT) {
            assert_rc(pp_pin(s.pool, ref[i], 0, NULL), 0);
            held[i] = true;
        }
    }
    cr_assert_eq(STAT_TOTAL(s.pool, swap_used_bytes), SL_LIMIT);
    for (size_t k = 1; k <= 2; k++) {
        assert_rc(pp_release(s.pool, ref[swapped[k]]), 0);
        alive[swapped[k]] = false;
    }
    test_drain(s.pool);
    cr_assert_eq(STAT_TOTAL(s.pool, swap_used_bytes), SL_LIMIT - 2 * SL_SIZE);
    for (size_t i = 0; i < n; i++) {
        if (held[i])
            assert_rc(pp_unpin(s.pool, ref[i]), 0);
    }
    /* And eviction resumes: v's load needs room, made by writing dirty
     * entries into the freed space. */
    uint64_t written = STAT_TOTAL(s.pool, evictions_written);
    pin_check(s.pool, ref[v], SL_SIZE, &RANDOM, seed_of(v, 0));
    cr_assert_gt(STAT_TOTAL(s.pool, evictions_written), written, "eviction did not resume");
    cr_assert_leq(STAT_TOTAL(s.pool, swap_used_bytes), SL_LIMIT);
    /* 18 entries live; room for 20 (16 in memory, 4 on disk).  v is clean
     * (its copy is valid), so it can go without a write: two more puts
     * succeed (the last one at the latest by dropping v), a third finds
     * nothing that can go. */
    for (int k = 0; k < 3; k++) {
        void *buf = malloc(SL_SIZE);
        cr_assert_not_null(buf);
        fill_pattern(buf, SL_SIZE, seed_of(n, 0));
        rc = pp_put(s.pool, buf, SL_SIZE, NULL, 0, &ref[n]);
        if (k < 2) {
            assert_rc(rc, 0);
            alive[n++] = true;
        } else {
            assert_rc(rc, PP_ENOMEM);
            free(buf);
        }
    }
    assert_swapped(&s, ref[v], "the clean entry");
    cr_assert_eq(STAT_TOTAL(s.pool, swap_used_bytes), SL_LIMIT);
    cr_assert_eq(STAT_TOTAL(s.pool, evictions_clean), 1);

    /* Nothing was lost: what is in memory first (released as it is
     * checked, which makes room), then what is on disk. */
    for (size_t i = 0; i < n; i++) {
        if (!alive[i])
            continue;
        void *d = NULL;
        rc = pp_pin(s.pool, ref[i], 0, &d);
        if (rc == PP_ENOMEM)
            continue;
        assert_rc(rc, 0);
        bool ok = check_pattern(d, SL_SIZE, seed_of(i, 0));
        assert_rc(pp_unpin(s.pool, ref[i]), 0);
        cr_assert(ok, "entry %zu lost its contents", i);
        assert_rc(pp_release(s.pool, ref[i]), 0);
        alive[i] = false;
    }
    test_drain(s.pool);
    for (size_t i = 0; i < n; i++) {
        if (!alive[i])
            continue;
        pin_check(s.pool, ref[i], SL_SIZE, &RANDOM, seed_of(i, 0));
        assert_rc(pp_release(s.pool, ref[i]), 0);
    }
    test_drain(s.pool);
    sw_stats(&s, &st);
    cr_assert_eq(st.total.swap_used_bytes, 0);
    cr_assert_eq(st.total.checksum_failures, 0);
    cr_assert_eq(st.total.io_errors, 0);
    sw_close(&s);
}

/* An entry larger than mem_limit can never fit: its put fails at once,
 * without writing the whole pool out first. */
Test(SW_SUITE, put_larger_than_mem_limit_evicts_nothing, .timeout = 60)
{
    sw_t s;
    sw_open(&s, 1 * MiB, 0, 0, true);
    enum { N = 4 };
    pp_ref_t ref[N];
    for (size_t i = 0; i < N; i++)
        ref[i] = put_flat(s.pool, 100000, NULL, &RANDOM, seed_of(i, 0), 0);
    void *big = malloc(2 * MiB);             /* never touched */
    cr_assert_not_null(big);
    pp_ref_t x;
    assert_rc(pp_put(s.pool, big, 2 * MiB, NULL, 0, &x), PP_ENOMEM);
    free(big);
    pp_stats_t st;
    sw_stats(&s, &st);
    cr_assert_eq(st.total.evictions_written, 0,
                 "a put that could never fit evicted %" PRIu64 " entries first",
                 st.total.evictions_written);
    cr_assert_eq(atomic_load(&s.fd->write_bytes), 0);
    for (size_t i = 0; i < N; i++)
        assert_resident_no_copy(&s, ref[i], "after a put larger than the limit");
    release_all(s.pool, ref, N);
    sw_close(&s);
}

/* Freed extents are handed out again: the stream does not grow. */
Test(SW_SUITE, space_is_reused_as_entries_die, .timeout = 60)
{
    sw_t s;
    sw_open(&s, 1 * MiB, 0, 0, false);
    enum { N = 6 };
    pp_ref_t a[N], b[N];
    uint64_t end = 0;
    for (size_t i = 0; i < N; i++)
        a[i] = put_flat(s.pool, 64 * KiB, NULL, &RANDOM, seed_of(i, 0), PP_ON_NODE(0));
    assert_rc(sw_squeeze(&s, 0), 0);
    for (size_t i = 0; i < N; i++) {
        uint64_t off, len;
        assert_rc(pp__debug_swap_where(s.pool, a[i], &off, &len), 0);
        if (off + len > end)
            end = off + len;
    }
    cr_assert_eq(end, N * 64 * KiB);
    release_all(s.pool, a, N);
    cr_assert_eq(STAT_TOTAL(s.pool, swap_used_bytes), 0);
    /* Different sizes, to need splitting and merging. */
    for (size_t i = 0; i < N; i++)
        b[i] = put_flat(s.pool, (i % 2 ? 96 : 32) * KiB, NULL, &RANDOM, seed_of(50 + i, 0),
                        PP_ON_NODE(0));
    assert_rc(sw_squeeze(&s, 0), 0);
    for (size_t i = 0; i < N; i++) {
        uint64_t off, len;
        assert_rc(pp__debug_swap_where(s.pool, b[i], &off, &len), 0);
        cr_assert_leq(off + len, end, "copy %zu at %" PRIu64 "+%" PRIu64 ": space not reused", i,
                      off, len);
    }
    for (size_t i = 0; i < N; i++)
        pin_check(s.pool, b[i], (i % 2 ? 96 : 32) * KiB, &RANDOM, seed_of(50 + i, 0));
    release_all(s.pool, b, N);
    sw_close(&s);
}

/* Neighbouring free extents merge, and a copy goes to the extent that fits
 * it best; every freed extent is dropped on the device. */
Test(SW_SUITE, freed_extents_merge_and_fit_best, .timeout = 60)
{
    sw_t s;
    sw_open(&s, 1 * MiB, 0, 0, true);
    enum { N = 8 };
    const size_t sz = 64 * KiB;
    pp_ref_t a[N];
    uint64_t off[N];
    for (size_t i = 0; i < N; i++)
        a[i] = put_flat(s.pool, sz, NULL, &RANDOM, seed_of(i, 0), PP_ON_NODE(0));
    assert_rc(sw_squeeze(&s, 0), 0);
    /* by[j]: the entry whose copy is the j-th of the stream. */
    size_t by[N];
    for (size_t i = 0; i < N; i++) {
        uint64_t len;
        assert_rc(pp__debug_swap_where(s.pool, a[i], &off[i], &len), 0);
        cr_assert_eq(off[i] % sz, 0);
        cr_assert_lt(off[i] / sz, N);
        by[off[i] / sz] = i;
    }
    unsigned long drops = atomic_load(&s.fd->drops);
    /* Holes: [64K, 192K) (two neighbours, merged) and [320K, 384K). */
    size_t gone[3] = {by[1], by[2], by[5]};
    for (size_t k = 0; k < 3; k++)
        assert_rc(pp_release(s.pool, a[gone[k]]), 0);
    test_drain(s.pool);
    cr_assert_eq(atomic_load(&s.fd->drops) - drops, 3);
    cr_assert_eq(STAT_TOTAL(s.pool, swap_used_bytes), (N - 3) * sz);
    pp_ref_t big = put_flat(s.pool, 2 * sz, NULL, &RANDOM, seed_of(20, 0), PP_ON_NODE(0));
    pp_ref_t small = put_flat(s.pool, sz, NULL, &RANDOM, seed_of(21, 0), PP_ON_NODE(0));
    assert_rc(sw_squeeze(&s, 0), 0);
    uint64_t o, len;
    assert_rc(pp__debug_swap_where(s.pool, big, &o, &len), 0);
    cr_assert_eq(o, 1 * sz, "the 128 KiB copy is at %" PRIu64 ", not in the merged hole", o);
    assert_rc(pp__debug_swap_where(s.pool, small, &o, &len), 0);
    cr_assert_eq(o, 5 * sz, "the 64 KiB copy is at %" PRIu64 ", not in the hole that fits", o);
    cr_assert_eq(STAT_TOTAL(s.pool, swap_used_bytes), N * sz);
    pin_check(s.pool, big, 2 * sz, &RANDOM, seed_of(20, 0));
    pin_check(s.pool, small, sz, &RANDOM, seed_of(21, 0));
    for (size_t i = 0; i < N; i++) {
        if (i != gone[0] && i != gone[1] && i != gone[2]) {
            pin_check(s.pool, a[i], sz, &RANDOM, seed_of(i, 0));
            assert_rc(pp_release(s.pool, a[i]), 0);
        }
    }
    assert_rc(pp_release(s.pool, big), 0);
    assert_rc(pp_release(s.pool, small), 0);
    test_drain(s.pool);
    cr_assert_eq(STAT_TOTAL(s.pool, swap_used_bytes), 0);
    sw_close(&s);
}

/* A copy that could never fit under swap_limit is not attempted. */
Test(SW_SUITE, entry_larger_than_swap_limit_stays_resident, .timeout = 60)
{
    sw_t s;
    sw_open(&s, 1 * MiB, 128 * KiB, 0, true);
    pp_ref_t big = put_flat(s.pool, 200 * KiB, NULL, &RANDOM, seed_of(0, 0), 0);
    pp_ref_t small = put_flat(s.pool, 100 * KiB, NULL, &RANDOM, seed_of(1, 0), 0);
    /* Only the small one can go. */
    assert_rc(sw_squeeze(&s, 200 * KiB), 0);
    assert_swapped(&s, small, "the small entry");
    assert_resident_no_copy(&s, big, "the entry larger than swap_limit");
    assert_rc(sw_squeeze(&s, 0), PP_ENOMEM);
    assert_resident_no_copy(&s, big, "the entry larger than swap_limit");
    pp_stats_t st;
    sw_stats(&s, &st);
    cr_assert_eq(st.total.swap_used_bytes, 100 * KiB);
    cr_assert_eq(st.total.io_errors, 0);
    cr_assert_eq(atomic_load(&s.fd->write_bytes), 100 * KiB, "bytes written for a copy that cannot fit");
    pin_check(s.pool, big, 200 * KiB, &RANDOM, seed_of(0, 0));
    pin_check(s.pool, small, 100 * KiB, &RANDOM, seed_of(1, 0));
    assert_rc(pp_release(s.pool, big), 0);
    assert_rc(pp_release(s.pool, small), 0);
    test_drain(s.pool);
    sw_close(&s);
}

/* ------------------------------------------------------------------------ */
/* 7. The private directory                                                  */
/* ------------------------------------------------------------------------ */

Test(SW_SUITE, private_directory_modes_and_cleanup, .timeout = 60)
{
    mode_t old = umask(0);               /* the modes are the library's own */
    sw_t s;
    sw_open(&s, 1 * MiB, 0, 0, false);
    umask(old);
    char priv[4096];
    snprintf(priv, sizeof priv, "%s", pp__swap_path(s.pool));
    size_t dl = strlen(s.dir);
    cr_assert(strncmp(priv, s.dir, dl) == 0 && priv[dl] == '/' && strchr(priv + dl + 1, '/') == NULL,
              "private directory %s not directly under %s", priv, s.dir);

    /* The only thing made in swap_dir. */
    DIR *d = opendir(s.dir);
    cr_assert_not_null(d);
    struct dirent *de;
    size_t count = 0;
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        count++;
        cr_assert_str_eq(de->d_name, priv + dl + 1);
    }
    closedir(d);
    cr_assert_eq(count, 1);
    struct stat sb;
    cr_assert_eq(lstat(priv, &sb), 0);
    cr_assert(S_ISDIR(sb.st_mode));
    cr_assert_eq(sb.st_mode & 07777, 0700, "directory mode %o", (unsigned)(sb.st_mode & 07777));

    /* One 0600 regular file per node, nothing else. */
    cr_assert_eq(dir_count(priv), s.nodes);
    for (unsigned k = 0; k < s.nodes; k++) {
        char f[4200];
        snprintf(f, sizeof f, "%s/node%u.swap", priv, k);
        cr_assert_eq(lstat(f, &sb), 0, "%s: %s", f, strerror(errno));
        cr_assert(S_ISREG(sb.st_mode), "%s is not a regular file", f);
        cr_assert_eq(sb.st_mode & 07777, 0600, "%s mode %o", f, (unsigned)(sb.st_mode & 07777));
        cr_assert_eq(sb.st_nlink, 1);
    }

    /* Used, then destroyed with copies on disk: all gone. */
    pp_ref_t ref[4];
    for (size_t i = 0; i < 4; i++)
        ref[i] = put_flat(s.pool, 100 * KiB, NULL, &RANDOM, seed_of(i, 0), 0);
    assert_rc(sw_squeeze(&s, 0), 0);
    for (size_t i = 0; i < 4; i++)
        assert_swapped(&s, ref[i], "before destroy");
    cr_assert_gt(STAT_TOTAL(s.pool, swap_used_bytes), 0);
    sw_close(&s);                        /* asserts swap_dir is empty */
    cr_assert_neq(lstat(priv, &sb), 0);
    cr_assert_eq(errno, ENOENT);
}

Test(SW_SUITE, two_pools_get_their_own_directories, .timeout = 60)
{
    sw_t s;
    sw_open(&s, 1 * MiB, 0, 0, false);
    pp_options_t o = PP_OPTIONS_INIT;
    o.mem_limit = 1 * MiB;
    o.swap_dir = s.dir;
    pp_pool_t *p2 = test_pool(&o);
    cr_assert_str_neq(pp__swap_path(s.pool), pp__swap_path(p2));
    cr_assert_eq(dir_count(s.dir), 2);
    test_destroy(p2);
    cr_assert_eq(dir_count(s.dir), 1);
    sw_close(&s);
}

Test(SW_SUITE, create_rejects_bad_swap_options, .timeout = 60)
{
    char dir[] = "/tmp/pp-swaptest-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    report_cap_t rep;
    report_cap_init(&rep);
    pp_options_t o = PP_OPTIONS_INIT;
    report_cap_attach(&rep, &o);
    pp_pool_t *pool = NULL;

    o.swap_dir = dir;                    /* without mem_limit */
    assert_rc(test_pool_create(&o, &pool), PP_EINVAL);
    cr_assert_null(pool);
    cr_assert_eq(dir_count(dir), 0);

    char missing[128];
    snprintf(missing, sizeof missing, "%s/missing", dir);
    o.mem_limit = 1 * MiB;
    o.swap_dir = missing;
    assert_rc(test_pool_create(&o, &pool), PP_EIO);
    cr_assert_null(pool);

    char file[128];
    snprintf(file, sizeof file, "%s/file", dir);
    int f = open(file, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
    cr_assert_geq(f, 0);
    close(f);
    o.swap_dir = file;                   /* not a directory */
    assert_rc(test_pool_create(&o, &pool), PP_EIO);
    cr_assert_null(pool);
    cr_assert_eq(dir_count(dir), 1, "a failed create left something behind");
    cr_assert(report_has(&rep, 0, "swap", missing, NULL));

    cr_assert_eq(unlink(file), 0);
    cr_assert_eq(rmdir(dir), 0);
    report_cap_free(&rep);
}

/* Every allocation pp_pool_create makes for swap (device, directory,
 * records) may fail: PP_ENOMEM, and nothing left behind in swap_dir. */
Test(SW_SUITE, create_survives_each_allocation_failure, .timeout = 60)
{
    char dir[] = "/tmp/pp-swaptest-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    pp_options_t o = PP_OPTIONS_INIT;
    o.mem_limit = 1 * MiB;
    o.swap_dir = dir;
    report_cap_t rep;
    report_cap_init(&rep);
    report_cap_attach(&rep, &o);
    int k;
    for (k = 0; k < 256; k++) {
        pp_pool_t *pool = NULL;
        pp__alloc_fail_after(k);
        int rc = test_pool_create(&o, &pool);
        pp__alloc_fail_after(-1);
        if (rc == 0) {
            test_destroy(pool);
            break;
        }
        assert_rc(rc, PP_ENOMEM);
        cr_assert_null(pool);
        cr_assert_eq(dir_count(dir), 0, "allocation %d failed: swap_dir not empty", k);
    }
    cr_assert_lt(k, 256);
    cr_assert_eq(dir_count(dir), 0);
    cr_assert_eq(rmdir(dir), 0);
    report_cap_free(&rep);
}

/* ------------------------------------------------------------------------ */
/* 8. Types                                                                  */
/* ------------------------------------------------------------------------ */

static const size_t ty_n[] = {0, 1, 4096, 100000, 3 * MiB / 2 + 17};
#define TY_N (sizeof ty_n / sizeof ty_n[0])
#define TY_ROUNDS 3

static void type_round_trips(unsigned flags, const content_t *c)
{
    sw_t s;
    sw_open(&s, 4 * MiB, 0, flags, false);
    bt_t *bt = bt_new(c);
    pp_ref_t ref[TY_N];
    unsigned ver[TY_N] = {0};
    for (size_t i = 0; i < TY_N; i++)
        ref[i] = blob_put(s.pool, bt, ty_n[i], seed_of(i, 0));
    for (unsigned r = 0; r < TY_ROUNDS; r++) {
        assert_rc(sw_squeeze(&s, 0), 0);
        for (size_t i = 0; i < TY_N; i++)
            assert_swapped(&s, ref[i], "blob after a squeeze");
        for (size_t i = 0; i < TY_N; i++) {
            if ((i + r) % 2 == 0) {
                blob_pin_rewrite(s.pool, bt, ref[i], ty_n[i], seed_of(i, ver[i]),
                                 seed_of(i, ver[i] + 1));
                ver[i]++;
            } else {
                blob_pin_check(s.pool, bt, ref[i], ty_n[i], seed_of(i, ver[i]));
            }
        }
    }
    BT_OK(bt);
    pp_stats_t st;
    sw_stats(&s, &st);
    cr_assert_eq(atomic_load(&bt->loads), TY_ROUNDS * TY_N);
    cr_assert_eq(st.total.loads, TY_ROUNDS * TY_N);
    /* Written once when new, then once per rewrite; clean ones never. */
    cr_assert_eq((uint64_t)atomic_load(&bt->saves), st.total.evictions_written);
    cr_assert_gt(st.total.evictions_clean, 0);
    cr_assert_eq(st.total.checksum_failures, 0);
    if (flags & PP_SWAP_COMPRESS)
        cr_assert_lt(st.total.swap_bytes_written, st.total.swap_raw_written);
    release_all(s.pool, ref, TY_N);
    sw_close(&s);
    BT_OK(bt);
    free(bt);
}

Test(SW_SUITE, type_save_load_round_trips, .timeout = 60)
{
    type_round_trips(0, &RANDOM);
}

Test(SW_SUITE, type_save_load_round_trips_compressed, .timeout = 60)
{
    type_round_trips(PP_SWAP_COMPRESS, &RUNS);
}

Test(SW_SUITE, type_save_failure_keeps_entry_resident, .timeout = 60)
{
    sw_t s;
    sw_open(&s, 1 * MiB, 0, 0, false);
    bt_t *bt = bt_new(&RANDOM);
    enum { N = 4 };
    pp_ref_t ref[N];
    for (size_t i = 0; i < N; i++)
        ref[i] = blob_put(s.pool, bt, 30000, seed_of(i, 0));
    atomic_store(&bt->fail_save, 1);
    /* Nothing can be saved: the room is not there. */
    assert_rc(sw_squeeze(&s, 0), PP_ENOMEM);
    pp_stats_t st;
    sw_stats(&s, &st);
    cr_assert_gt(atomic_load(&bt->save_calls), 0);
    cr_assert_eq(atomic_load(&bt->saves), 0);
    /* Abandoned, but not a lost race (that counter is for pins). */
    cr_assert_eq(st.total.evictions_abandoned, 0);
    cr_assert_eq(st.total.evictions_written, 0);
    cr_assert_eq(st.total.swap_used_bytes, 0);
    cr_assert_eq(st.total.swapped_bytes, 0);
    for (size_t i = 0; i < N; i++) {
        assert_resident_no_copy(&s, ref[i], "after a refused save");
        blob_pin_check(s.pool, bt, ref[i], 30000, seed_of(i, 0));
    }
    atomic_store(&bt->fail_save, 0);
    assert_rc(sw_squeeze(&s, 0), 0);
    for (size_t i = 0; i < N; i++)
        assert_swapped(&s, ref[i], "after the save succeeded");
    for (size_t i = 0; i < N; i++)
        blob_pin_check(s.pool, bt, ref[i], 30000, seed_of(i, 0));
    BT_OK(bt);
    release_all(s.pool, ref, N);
    sw_close(&s);
    free(bt);
}

Test(SW_SUITE, type_load_failure_keeps_the_copy, .timeout = 60)
{
    sw_t s;
    sw_open(&s, 1 * MiB, 0, 0, false);
    bt_t *bt = bt_new(&RANDOM);
    pp_ref_t ref = blob_put(s.pool, bt, 70000, 5);
    assert_rc(sw_squeeze(&s, 0), 0);
    uint64_t off, len, off2, len2;
    assert_rc(pp__debug_swap_where(s.pool, ref, &off, &len), 0);
    atomic_store(&bt->fail_load, 1);
    uint64_t reserved = 0;
    {
        pp_stats_t st;
        sw_stats(&s, &st);
        reserved = st.resident_reserved;
    }
    for (int k = 0; k < 2; k++)
        assert_rc(pp_pin(s.pool, ref, 0, NULL), PP_EIO);
    cr_assert_eq(atomic_load(&bt->load_calls), 2);
    assert_swapped(&s, ref, "after a failed load");
    assert_rc(pp__debug_swap_where(s.pool, ref, &off2, &len2), 0);
    cr_assert(off2 == off && len2 == len);
    pp_stats_t st;
    sw_stats(&s, &st);
    cr_assert_eq(st.resident_reserved, reserved, "a failed load kept its reservation");
    cr_assert_eq(st.total.loads, 0);
    cr_assert_eq(st.total.checksum_failures, 0);
    atomic_store(&bt->fail_load, 0);
    blob_pin_check(s.pool, bt, ref, 70000, 5);
    cr_assert_eq(STAT_TOTAL(s.pool, loads), 1);
    BT_OK(bt);
    release_all(s.pool, &ref, 1);
    sw_close(&s);
    /* One incarnation from the put, one from the successful load. */
    cr_assert_eq(atomic_load(&bt->frees), 2);
    free(bt);
}

/* A save that writes nothing: an empty copy, which still round-trips. */
static _Atomic int empty_loads;

static int empty_save(const void *data, size_t size, pp_writer_t *w, void *ctx)
{
    (void)data; (void)size; (void)w; (void)ctx;
    return 0;
}

static int empty_load(void **data, size_t size, pp_reader_t *r, void *ctx)
{
    (void)ctx;
    if (pp_read_left(r) != 0 || size != sizeof(uint64_t))
        return 1;
    uint64_t *p = malloc(sizeof *p);
    if (p == NULL)
        return 1;
    *p = 0x5eed;
    *data = p;
    atomic_fetch_add(&empty_loads, 1);
    return 0;
}

Test(SW_SUITE, type_saving_nothing_round_trips, .timeout = 60)
{
    static const pp_type_t empty = {.name = "empty", .save = empty_save, .load = empty_load};
    sw_t s;
    sw_open(&s, 1 * MiB, 0, 0, false);
    uint64_t *p = malloc(sizeof *p);
    cr_assert_not_null(p);
    *p = 0x5eed;
    pp_ref_t ref;
    assert_rc(pp_put(s.pool, p, sizeof *p, &empty, 0, &ref), 0);
    assert_rc(sw_squeeze(&s, 0), 0);
    assert_swapped(&s, ref, "empty copy");
    uint64_t off, len;
    assert_rc(pp__debug_swap_where(s.pool, ref, &off, &len), 0);
    cr_assert_eq(len, 0);
    void *d = NULL;
    assert_rc(pp_pin(s.pool, ref, 0, &d), 0);
    cr_assert_eq(*(uint64_t *)d, 0x5eed);
    assert_rc(pp_unpin(s.pool, ref), 0);
    cr_assert_eq(atomic_load(&empty_loads), 1);
    release_all(s.pool, &ref, 1);
    cr_assert_eq(STAT_TOTAL(s.pool, swap_used_bytes), 0);
    sw_close(&s);
}

/* Fills the 1 MiB limit with 64 KiB entries of `type`; none may ever be
 * evicted, so a put that needs room gets PP_ENOMEM. */
#define NE_SIZE (64 * KiB)
#define NE_N 16

static void never_evicted(const pp_type_t *type)
{
    sw_t s;
    sw_open(&s, 1 * MiB, 0, 0, false);
    pp_ref_t ref[NE_N];
    for (size_t i = 0; i < NE_N; i++)
        ref[i] = put_flat(s.pool, NE_SIZE, type, &RANDOM, seed_of(i, 0), 0);
    void *buf = malloc(NE_SIZE);
    cr_assert_not_null(buf);
    pp_ref_t extra;
    assert_rc(pp_put(s.pool, buf, NE_SIZE, NULL, 0, &extra), PP_ENOMEM);
    free(buf);
    assert_rc(sw_squeeze(&s, 0), PP_ENOMEM);
    pp_stats_t st;
    sw_stats(&s, &st);
    cr_assert_eq(st.total.evictions_written + st.total.evictions_clean, 0);
    cr_assert_eq(st.total.evictions_abandoned, 0, "an unswappable entry was claimed");
    cr_assert_eq(st.total.swap_bytes_written, 0);
    cr_assert_eq(st.total.swap_used_bytes, 0);
    cr_assert_eq(st.total.resident_bytes, NE_N * NE_SIZE);
    for (size_t i = 0; i < NE_N; i++) {
        assert_resident_no_copy(&s, ref[i], "unswappable");
        pin_check(s.pool, ref[i], NE_SIZE, &RANDOM, seed_of(i, 0));
    }
    release_all(s.pool, ref, NE_N);
    sw_close(&s);
}

static _Atomic int counted_frees, noswap_saves, noswap_loads;

static void counted_free(void *data, size_t size, void *ctx)
{
    (void)size; (void)ctx;
    atomic_fetch_add(&counted_frees, 1);
    free(data);
}

static int noswap_save(const void *data, size_t size, pp_writer_t *w, void *ctx)
{
    (void)data; (void)size; (void)w; (void)ctx;
    atomic_fetch_add(&noswap_saves, 1);
    return 1;
}

static int noswap_load(void **data, size_t size, pp_reader_t *r, void *ctx)
{
    (void)data; (void)size; (void)r; (void)ctx;
    atomic_fetch_add(&noswap_loads, 1);
    return 1;
}

Test(SW_SUITE, type_with_free_only_is_never_evicted, .timeout = 60)
{
    static const pp_type_t free_only = {.name = "free-only", .free = counted_free};
    never_evicted(&free_only);
    cr_assert_eq(atomic_load(&counted_frees), NE_N);
}

Test(SW_SUITE, noswap_type_is_never_evicted, .timeout = 60)
{
    static const pp_type_t noswap = {.name = "noswap", .save = noswap_save,
                                     .load = noswap_load, .flags = PP_TYPE_NOSWAP};
    never_evicted(&noswap);
    cr_assert_eq(atomic_load(&noswap_saves), 0);
    cr_assert_eq(atomic_load(&noswap_loads), 0);
}

Test(SW_SUITE, noswap_flat_type_is_never_evicted, .timeout = 60)
{
    static const pp_type_t noswap_flat = {.name = "noswap-flat", .flags = PP_TYPE_NOSWAP};
    never_evicted(&noswap_flat);
}

/* Entries of size 0 have nothing to swap: they stay, and cost no room. */
Test(SW_SUITE, empty_entries_are_never_evicted, .timeout = 60)
{
    sw_t s;
    sw_open(&s, 1 * MiB, 0, 0, false);
    pp_ref_t ref[4];
    for (size_t i = 0; i < 4; i++) {
        void *buf = malloc(1);
        cr_assert_not_null(buf);
        assert_rc(pp_put(s.pool, buf, 0, NULL, 0, &ref[i]), 0);
    }
    pp_ref_t other = put_flat(s.pool, 64 * KiB, NULL, &RANDOM, seed_of(9, 0), 0);
    assert_rc(sw_squeeze(&s, 0), 0);
    assert_swapped(&s, other, "the 64 KiB entry");
    for (size_t i = 0; i < 4; i++) {
        assert_resident_no_copy(&s, ref[i], "an empty entry");
        assert_rc(pp_pin(s.pool, ref[i], 0, NULL), 0);
        assert_rc(pp_unpin(s.pool, ref[i]), 0);
    }
    cr_assert_eq(STAT_TOTAL(s.pool, evictions_written), 1);
    release_all(s.pool, ref, 4);
    release_all(s.pool, &other, 1);
    sw_close(&s);
}

Test(SW_SUITE, put_with_only_save_or_only_load_is_einval, .timeout = 60)
{
    static const pp_type_t only_save = {.name = "only-save", .save = noswap_save};
    static const pp_type_t only_load = {.name = "only-load", .load = noswap_load};
    sw_t s;
    sw_open(&s, 1 * MiB, 0, 0, false);
    pp_pool_t *plain = test_pool(NULL);      /* the rule holds without swap too */
    char *buf = malloc(64);
    cr_assert_not_null(buf);
    pp_ref_t ref = PP_REF_NONE;
    assert_rc(pp_put(s.pool, buf, 64, &only_save, 0, &ref), PP_EINVAL);
    assert_rc(pp_put(s.pool, buf, 64, &only_load, 0, &ref), PP_EINVAL);
    assert_rc(pp_put(plain, buf, 64, &only_save, 0, &ref), PP_EINVAL);
    assert_rc(pp_put(plain, buf, 64, &only_load, 0, &ref), PP_EINVAL);
    cr_assert_eq(ref, PP_REF_NONE);
    cr_assert_eq(STAT_TOTAL(s.pool, puts), 0);
    cr_assert_eq(STAT_TOTAL(s.pool, resident_bytes), 0);
    pp_stats_t st;
    sw_stats(&s, &st);
    cr_assert_eq(st.resident_reserved, 0, "a refused put kept its reservation");
    free(buf);                               /* still ours */
    test_destroy(plain);
    sw_close(&s);
}

Test(SW_SUITE, stream_calls_reject_null, .timeout = 60)
{
    char buf[8] = {0};
    assert_rc(pp_write(NULL, buf, 1), PP_EINVAL);
    assert_rc(pp_write(NULL, buf, 0), PP_EINVAL);
    assert_rc(pp_write(NULL, NULL, 0), PP_EINVAL);
    assert_rc(pp_read(NULL, buf, 1), PP_EINVAL);
    assert_rc(pp_read(NULL, buf, 0), PP_EINVAL);
    cr_assert_eq(pp_read_left(NULL), 0);
    /* NULL buffers on real streams: blob_save and blob_load check them
     * (pp_write(w, NULL, 1), pp_read(r, NULL, 1) -> PP_EINVAL). */
    sw_t s;
    sw_open(&s, 1 * MiB, 0, 0, false);
    bt_t *bt = bt_new(&RANDOM);
    pp_ref_t ref = blob_put(s.pool, bt, 1000, 3);
    assert_rc(sw_squeeze(&s, 0), 0);
    blob_pin_check(s.pool, bt, ref, 1000, 3);
    cr_assert_eq(atomic_load(&bt->saves), 1);
    cr_assert_eq(atomic_load(&bt->loads), 1);
    BT_OK(bt);
    release_all(s.pool, &ref, 1);
    sw_close(&s);
    free(bt);
}

/* ------------------------------------------------------------------------ */
/* 9. Compression stats                                                      */
/* ------------------------------------------------------------------------ */

#define CS_N 8
#define CS_SIZE (96 * KiB + 5)

static void compression_stats(unsigned flags, const content_t *c, bool smaller)
{
    sw_t s;
    sw_open(&s, 1 * MiB, 0, flags, false);
    pp_ref_t ref[CS_N];
    for (size_t i = 0; i < CS_N; i++)
        ref[i] = put_flat(s.pool, CS_SIZE, NULL, c, seed_of(i, 0), 0);
    assert_rc(sw_squeeze(&s, 0), 0);
    pp_stats_t st;
    sw_stats(&s, &st);
    cr_assert_eq(st.total.evictions_written, CS_N);
    cr_assert_eq(st.total.swap_raw_written, (uint64_t)CS_N * CS_SIZE);
    if (smaller)
        cr_assert_lt(st.total.swap_bytes_written, st.total.swap_raw_written);
    else
        cr_assert_eq(st.total.swap_bytes_written, st.total.swap_raw_written);
    for (size_t i = 0; i < CS_N; i++) {
        uint64_t off, len;
        assert_rc(pp__debug_swap_where(s.pool, ref[i], &off, &len), 0);
        if (smaller)
            cr_assert_lt(len, CS_SIZE - CS_SIZE / 16);
        else
            cr_assert_eq(len, CS_SIZE);
    }
    /* Space held follows the stored bytes, not the raw ones. */
    if (smaller)
        cr_assert_lt(st.total.swap_used_bytes, (uint64_t)CS_N * CS_SIZE);
    for (size_t i = 0; i < CS_N; i++)
        pin_check(s.pool, ref[i], CS_SIZE, c, seed_of(i, 0));
    cr_assert_eq(STAT_TOTAL(s.pool, swap_bytes_read), st.total.swap_bytes_written);
    release_all(s.pool, ref, CS_N);
    sw_close(&s);
}

Test(SW_SUITE, compress_shrinks_compressible_copies, .timeout = 60)
{
    compression_stats(PP_SWAP_COMPRESS, &RUNS, true);
}

Test(SW_SUITE, compress_stores_incompressible_copies_raw, .timeout = 60)
{
    compression_stats(PP_SWAP_COMPRESS, &RANDOM, false);
}

Test(SW_SUITE, no_compression_without_the_flag, .timeout = 60)
{
    compression_stats(0, &RUNS, false);
}

/* ------------------------------------------------------------------------ */
/* 10. Everything freed                                                      */
/* ------------------------------------------------------------------------ */

#define EF_N 32
#define EF_BYTES 40000

Test(SW_SUITE, everything_freed_after_release_and_drain, .timeout = 60)
{
    sw_t s;
    sw_open(&s, 1 * MiB, 0, 0, false);
    bt_t *bt = bt_new(&RANDOM);
    bt_note_reclaimers(bt, s.pool);
    pp_ref_t ref[EF_N];
    unsigned ver[EF_N] = {0};
    /* 32 x 40 KB: more than the limit, so the puts already evict. */
    for (size_t i = 0; i < EF_N; i++)
        ref[i] = blob_put(s.pool, bt, EF_BYTES, seed_of(i, 0));
    for (size_t i = 0; i < EF_N; i++) {
        if (i % 3 == 0) {
            blob_pin_rewrite(s.pool, bt, ref[i], EF_BYTES, seed_of(i, 0), seed_of(i, 1));
            ver[i] = 1;
        } else {
            blob_pin_check(s.pool, bt, ref[i], EF_BYTES, seed_of(i, 0));
        }
    }
    assert_rc(sw_squeeze(&s, 0), 0);
    /* Deaths in every state: resident (0-7), pinned (8-11), on disk. */
    for (size_t i = 0; i < 12; i++)
        blob_pin_check(s.pool, bt, ref[i], EF_BYTES, seed_of(i, ver[i]));
    for (size_t i = 8; i < 12; i++)
        assert_rc(pp_pin(s.pool, ref[i], 0, NULL), 0);
    for (size_t i = 0; i < 4; i++)
        assert_rc(pp_release(s.pool, ref[i]), 0);
    for (size_t i = 8; i < EF_N; i++)
        assert_rc(pp_release(s.pool, ref[i]), 0);
    for (size_t i = 8; i < 12; i++)
        assert_rc(pp_unpin(s.pool, ref[i]), 0);
    for (size_t i = 4; i < 8; i++)
        assert_rc(pp_release(s.pool, ref[i]), 0);
    test_drain(s.pool);

    pp_stats_t st;
    sw_stats(&s, &st);
    cr_assert_eq(st.total.entries, 0);
    cr_assert_eq(st.total.resident_bytes, 0);
    cr_assert_eq(st.total.swapped_bytes, 0);
    cr_assert_eq(st.total.swap_used_bytes, 0);
    cr_assert_eq(st.resident_reserved, 0);
    cr_assert_eq(st.total.reclaim_queue_depth, 0);
    cr_assert_eq(st.total.frees, st.total.puts);
    cr_assert_leq(st.resident_peak, s.limit);
    BT_OK(bt);
    /* One free per incarnation: one from each put, one from each load. */
    int frees = atomic_load(&bt->frees), loads = atomic_load(&bt->loads);
    cr_assert_eq(frees, EF_N + loads, "frees %d, loads %d", frees, loads);
    cr_assert_eq((uint64_t)loads, st.total.loads);
    /* Evicted data is freed by the swap thread, the rest by the reclaimer;
     * never by the thread that released. */
    int evicted = (int)(st.total.evictions_written + st.total.evictions_clean);
    cr_assert_eq(atomic_load(&bt->frees_main), 0);
    cr_assert_eq(frees - atomic_load(&bt->frees_reclaimer), evicted,
                 "frees %d, by reclaimers %d, evictions %d", frees,
                 atomic_load(&bt->frees_reclaimer), evicted);
    cr_assert_geq(atomic_load(&bt->frees_reclaimer), 4);
    cr_assert(pp__pool_is_valid(s.pool));
    sw_close(&s);
    cr_assert_eq(atomic_load(&bt->frees), frees, "a free after the pool was drained");
    free(bt);
}

Test(SW_SUITE, destroy_with_swapped_entries_frees_once, .timeout = 60)
{
    sw_t s;
    sw_open(&s, 1 * MiB, 0, PP_SWAP_COMPRESS, false);
    bt_t *bt = bt_new(&RUNS);
    bt_note_reclaimers(bt, s.pool);
    enum { N = 8 };
    pp_ref_t ref[N];
    for (size_t i = 0; i < N; i++)
        ref[i] = blob_put(s.pool, bt, 50000, seed_of(i, 0));
    assert_rc(sw_squeeze(&s, 0), 0);
    blob_pin_check(s.pool, bt, ref[0], 50000, seed_of(0, 0));
    blob_pin_check(s.pool, bt, ref[1], 50000, seed_of(1, 0));
    pp_stats_t st;
    sw_stats(&s, &st);
    cr_assert_eq(st.total.evictions_written, N);
    /* Still owned: destroy frees the two in memory and drops six copies. */
    sw_close(&s);
    BT_OK(bt);
    cr_assert_eq(atomic_load(&bt->loads), 2);
    cr_assert_eq(atomic_load(&bt->frees), N + 2);
    cr_assert_eq(atomic_load(&bt->frees_reclaimer), 2);
    free(bt);
}

/* The last owner goes while a pin is loading the entry (the pinner is held
 * inside the device's read): the entry is freed once, after the load ends,
 * its copy dropped, whether the load succeeds or fails. */
typedef struct dl_arg {
    pp_pool_t *pool;
    pp_ref_t ref;
    int rc;
} dl_arg_t;

static void *dl_pinner(void *arg)
{
    dl_arg_t *a = arg;
    a->rc = pp_pin(a->pool, a->ref, 0, NULL);
    if (a->rc == 0)
        (void)pp_unpin(a->pool, a->ref);
    return NULL;
}

static void dies_while_loading(bool load_fails)
{
    sw_t s;
    sw_open(&s, 1 * MiB, 0, 0, true);
    bt_t *bt = bt_new(&RANDOM);
    dl_arg_t a = {.pool = s.pool, .ref = blob_put(s.pool, bt, 100000, 7)};
    assert_rc(sw_squeeze(&s, 0), 0);
    faultdev_gate_close(s.fd, true, false);
    pthread_t th;
    test_thread_start(&th, dl_pinner, &a);
    faultdev_wait_blocked(s.fd, 1);          /* the pinner is in the read */
    cr_assert(test_stat(s.pool, a.ref).state & PP_STATE_LOADING);
    assert_rc(pp_release(s.pool, a.ref), 0);
    if (load_fails)
        atomic_store(&s.fd->read_err, -EIO);
    faultdev_gate_open(s.fd);
    test_thread_join(th);
    if (load_fails)
        cr_assert(a.rc == PP_EIO || a.rc == PP_ESTALE, "pin: %s", pp_err_name(a.rc));
    else
        assert_rc(a.rc, PP_ESTALE);
    test_drain(s.pool);
    pp_entry_info_t info;
    assert_rc(pp_stat(s.pool, a.ref, &info), PP_ESTALE);
    pp_stats_t st;
    sw_stats(&s, &st);
    cr_assert_eq(st.total.entries, 0);
    cr_assert_eq(st.total.resident_bytes, 0);
    cr_assert_eq(st.total.swapped_bytes, 0);
    cr_assert_eq(st.total.swap_used_bytes, 0);
    cr_assert_eq(st.resident_reserved, 0);
    BT_OK(bt);
    cr_assert_eq(atomic_load(&bt->loads), load_fails ? 0 : 1);
    cr_assert_eq(atomic_load(&bt->frees), 1 + atomic_load(&bt->loads));
    cr_assert(pp__pool_is_valid(s.pool));
    sw_close(&s);
    free(bt);
}

Test(SW_SUITE, dies_while_loading, .timeout = 60)
{
    dies_while_loading(false);
}

Test(SW_SUITE, dies_while_a_load_fails, .timeout = 60)
{
    dies_while_loading(true);
}

/* Destroy with loads still queued for the swap threads: they are dropped,
 * every incarnation is freed once, the directory is removed. */
Test(SW_SUITE, destroy_with_loads_queued, .timeout = 60)
{
    sw_t s;
    sw_open(&s, 1 * MiB, 0, 0, true);
    bt_t *bt = bt_new(&RANDOM);
    enum { N = 6 };
    pp_ref_t ref[N];
    for (size_t i = 0; i < N; i++)
        ref[i] = blob_put(s.pool, bt, 50000, seed_of(i, 0));
    assert_rc(sw_squeeze(&s, 0), 0);
    faultdev_gate_close(s.fd, true, false);
    for (size_t i = 0; i < N; i++)
        assert_rc(pp_prefetch(s.pool, ref[i]), 0);
    faultdev_wait_blocked(s.fd, 1);          /* a swap thread is in a read */
    faultdev_gate_open(s.fd);
    sw_close(&s);
    BT_OK(bt);
    cr_assert_eq(atomic_load(&bt->frees), N + atomic_load(&bt->loads));
    free(bt);
}

/* ------------------------------------------------------------------------ */
/* 11. Allocation failures                                                   */
/* ------------------------------------------------------------------------ */

/* Allocation failures inside the store (records, write buffers,
 * compression and read buffers), whichever thread meets them: a put or a
 * load may get PP_ENOMEM, nothing is ever lost or corrupted. */
#define AF_BLOBS 4
#define AF_FLAT 4
#define AF_SWEEP 24

Test(SW_SUITE, store_allocation_failures_lose_nothing, .timeout = 60)
{
    sw_t s;
    sw_open(&s, 1 * MiB, 0, PP_SWAP_COMPRESS, false);
    bt_t *bt = bt_new(&RUNS);
    pp_ref_t blob[AF_BLOBS], flat[AF_FLAT];
    for (size_t i = 0; i < AF_BLOBS; i++)
        blob[i] = blob_put(s.pool, bt, 40000, seed_of(i, 0));
    for (size_t i = 0; i < AF_FLAT; i++)
        flat[i] = put_flat(s.pool, 50000, NULL, &RUNS, seed_of(10 + i, 0), 0);
    int squeezes_failed = 0, loads_failed = 0;
    for (int k = 0; k < AF_SWEEP; k++) {
        /* Eviction with one allocation failing. */
        pp__alloc_fail_after(k);
        int rc = sw_squeeze(&s, 0);
        pp__alloc_fail_after(-1);
        cr_assert(rc == 0 || rc == PP_ENOMEM, "squeeze: %s", pp_err_name(rc));
        squeezes_failed += rc != 0;
        assert_rc(sw_squeeze(&s, 0), 0);
        /* Loads with one allocation failing; write pins, so that the next
         * squeeze writes every entry again. */
        pp__alloc_fail_after(k / 4);
        for (size_t i = 0; i < AF_BLOBS + AF_FLAT; i++) {
            pp_ref_t ref = i < AF_BLOBS ? blob[i] : flat[i - AF_BLOBS];
            void *d = NULL;
            rc = pp_pin(s.pool, ref, PP_PIN_WRITE, &d);
            if (rc == PP_ENOMEM) {
                loads_failed++;
                assert_swapped(&s, ref, "after a load that could not allocate");
                continue;
            }
            assert_rc(rc, 0);
            bool ok = i < AF_BLOBS ? blob_ok(bt, d, 40000, seed_of(i, 0))
                                   : check_runs(d, 50000, seed_of(10 + i - AF_BLOBS, 0));
            assert_rc(pp_unpin(s.pool, ref), 0);
            cr_assert(ok, "k %d: entry %zu lost its contents", k, i);
        }
        pp__alloc_fail_after(-1);
    }
    /* The sweep did hit the store. */
    cr_assert_gt(squeezes_failed + loads_failed, 0);
    assert_rc(sw_squeeze(&s, 0), 0);
    for (size_t i = 0; i < AF_BLOBS; i++)
        blob_pin_check(s.pool, bt, blob[i], 40000, seed_of(i, 0));
    for (size_t i = 0; i < AF_FLAT; i++)
        pin_check(s.pool, flat[i], 50000, &RUNS, seed_of(10 + i, 0));
    pp_stats_t st;
    sw_stats(&s, &st);
    cr_assert_eq(st.total.checksum_failures, 0);
    cr_assert_eq(st.total.io_errors, 0);
    BT_OK(bt);
    cr_assert(pp__pool_is_valid(s.pool));
    release_all(s.pool, blob, AF_BLOBS);
    release_all(s.pool, flat, AF_FLAT);
    cr_assert_eq(STAT_TOTAL(s.pool, swap_used_bytes), 0);
    sw_close(&s);
    free(bt);
}

/* pinpool.h: pp_write returns 0, PP_EIO, PP_EAGAIN or PP_EINVAL.  Make
 * its buffer fail to grow (the first allocation a rewrite's save makes)
 * and look at what it says. */
Test(SW_SUITE, pp_write_failure_codes_are_documented, .timeout = 60)
{
    sw_t s;
    sw_open(&s, 1 * MiB, 0, 0, false);
    bt_t *bt = bt_new(&RANDOM);
    pp_ref_t ref = blob_put(s.pool, bt, 100000, seed_of(0, 0));
    assert_rc(sw_squeeze(&s, 0), 0);
    for (int k = 0; k < 16 && atomic_load(&bt->write_fail_rc) == 0; k++) {
        blob_pin_rewrite(s.pool, bt, ref, 100000, seed_of(0, (unsigned)k),
                         seed_of(0, (unsigned)k + 1));
        pp__alloc_fail_after(k % 4);
        int rc = sw_squeeze(&s, 0);
        pp__alloc_fail_after(-1);
        cr_assert(rc == 0 || rc == PP_ENOMEM);
        if (rc != 0)
            assert_rc(sw_squeeze(&s, 0), 0);
        blob_pin_check(s.pool, bt, ref, 100000, seed_of(0, (unsigned)k + 1));
    }
    int wrc = atomic_load(&bt->write_fail_rc);
    cr_assert_neq(wrc, 0, "no pp_write failed: the test did not test");
    cr_assert(wrc == PP_ENOMEM || wrc == PP_EAGAIN || wrc == PP_EINVAL,
              "pp_write returned %s, which pinpool.h does not list for it", pp_err_name(wrc));
    BT_OK(bt);
    release_all(s.pool, &ref, 1);
    sw_close(&s);
    free(bt);
}
