/*
 * test_swap_support.c -- the swap suite's shared code (test_swap.h): the
 * contents, the pools with swap and the save/load type, and the suite's
 * fini, which removes a failed test's swap_dir.
 */
#define SW_SUPPORT 1
#include "test_swap.h"

/* ------------------------------------------------------------------------ */
/* Contents                                                                  */
/* ------------------------------------------------------------------------ */

#define RUN 512

static void fill_runs(void *p, size_t n, uint64_t seed)
{
    unsigned char *b = p;
    for (size_t i = 0; i < n; i += RUN) {
        uint64_t st = seed ^ (i / RUN);
        memset(b + i, (int)(splitmix64(&st) & 0xff), n - i < RUN ? n - i : RUN);
    }
}

bool check_runs(const void *p, size_t n, uint64_t seed)
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

const content_t RANDOM = {"random", fill_random, check_random};
const content_t RUNS = {"runs", fill_runs, check_runs};

uint64_t seed_of(size_t i, unsigned version)
{
    return (uint64_t)(i + 1) * 0x9e3779b97f4a7c15ull + (uint64_t)version * 0x632be59bd9b4e019ull + 1;
}

/* ------------------------------------------------------------------------ */
/* Pools with swap                                                           */
/* ------------------------------------------------------------------------ */

size_t dir_count(const char *path)
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

TestSuite(SW_SUITE, .fini = sw_fini);

/* The bytes the device moves for a copy of n bytes: with direct I/O, whole
 * pages (the last one padded). */
uint64_t dev_bytes(uint64_t n)
{
    return SW_DIRECT ? (n + 4095) / 4096 * 4096 : n;
}

void sw_open(sw_t *s, size_t mem_limit, uint64_t swap_limit, unsigned flags, bool fault)
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
void sw_close(sw_t *s)
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
int sw_squeeze(sw_t *s, size_t keep)
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

void sw_stats(sw_t *s, pp_stats_t *st) { test_stats(s->pool, st); }

#define STATE_MASK (PP_STATE_RESIDENT | PP_STATE_SWAPPED | PP_STATE_LOADING | PP_STATE_EVICTING)

/* Only on disk. */
void assert_swapped(sw_t *s, pp_ref_t ref, const char *what)
{
    unsigned st = test_stat(s->pool, ref).state;
    cr_assert_eq(st & STATE_MASK, PP_STATE_SWAPPED, "%s: state 0x%x, want SWAPPED only", what, st);
}

/* In memory, with no copy on disk. */
void assert_resident_no_copy(sw_t *s, pp_ref_t ref, const char *what)
{
    unsigned st = test_stat(s->pool, ref).state;
    cr_assert_eq(st & (PP_STATE_RESIDENT | PP_STATE_SWAPPED | PP_STATE_LOADING),
                 PP_STATE_RESIDENT, "%s: state 0x%x, want RESIDENT without a copy", what, st);
}

pp_ref_t put_flat(pp_pool_t *pool, size_t size, const pp_type_t *type, const content_t *c,
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
void pin_check(pp_pool_t *pool, pp_ref_t ref, size_t size, const content_t *c, uint64_t seed)
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
void pin_rewrite(pp_pool_t *pool, pp_ref_t ref, size_t size, const content_t *c,
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

void release_all(pp_pool_t *pool, const pp_ref_t *refs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        assert_rc(pp_release(pool, refs[i]), 0);
    test_drain(pool);
}

/* Flips (xor) one byte of ref's swap copy in its node's file, at `at`
 * bytes into the copy. */
void flip_byte(sw_t *s, pp_ref_t ref, uint64_t at)
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

static size_t blob_size(size_t n) { return sizeof(blob_t) + n; }

static void bt_bad(bt_t *bt, const char *why)
{
    const char *none = NULL;
    atomic_compare_exchange_strong(&bt->why, &none, why);
    atomic_fetch_add(&bt->bad, 1);
}

int blob_save(const void *data, size_t size, pp_writer_t *w, void *ctx)
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

int blob_load(void **data, size_t size, pp_reader_t *r, void *ctx)
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

bt_t *bt_new(const content_t *c)
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
void bt_note_reclaimers(bt_t *bt, pp_pool_t *pool)
{
    unsigned nodes = test_nodes(pool);
    for (unsigned k = 0; k < nodes; k++)
        atomic_store(&bt->reclaimer_tid[k], test_node(pool, k).reclaimer_tid);
}

pp_ref_t blob_put(pp_pool_t *pool, bt_t *bt, size_t n, uint64_t seed)
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

bool blob_ok(const bt_t *bt, const blob_t *b, size_t n, uint64_t seed)
{
    return b != NULL && b->magic == BLOB_MAGIC && b->n == n && b->seed == seed &&
           bt->content->check(b->bytes, n, seed);
}

void blob_pin_check(pp_pool_t *pool, bt_t *bt, pp_ref_t ref, size_t n, uint64_t seed)
{
    void *d = NULL;
    int rc = pp_pin(pool, ref, 0, &d);
    cr_assert_eq(rc, 0, "pin of blob(%zu): %s", n, pp_err_name(rc));
    bool ok = blob_ok(bt, d, n, seed);
    assert_rc(pp_unpin(pool, ref), 0);
    cr_assert(ok, "blob of %zu bytes does not hold its contents", n);
}

/* Pins for write, checks, gives the blob new contents (same n). */
void blob_pin_rewrite(pp_pool_t *pool, bt_t *bt, pp_ref_t ref, size_t n, uint64_t old_seed,
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

