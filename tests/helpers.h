/*
 * helpers.h -- shared test helpers for pinpool's unit tests.
 *
 * Every test creates its pool with test_pool(): when the options name no
 * topology, the environment variable PINPOOL_TEST_TOPOLOGY (if set) gives
 * one, so that each suite runs both on this machine and on the synthetic
 * 4-node topology (ctest registers every binary twice).
 *
 * Also here:
 *  - ct_t, a counting type: its free function counts calls per entry with
 *    C11 atomics, records the OS thread id (gettid) of the caller, checks
 *    the buffer header and size, then poisons and frees the buffer;
 *  - a seeded content generator and checker (fill_pattern/check_pattern);
 *  - WAIT_UNTIL(cond, ms): a bounded poll with sched_yield();
 *  - TCHECK: failure recording for worker threads (Criterion asserts must
 *    only run on the test's main thread); TCHECK_NONE() asserts on it;
 *  - report_cap_t: captures pool report lines (options.report).
 *
 * Include this header first in every test file.
 */
#ifndef PINPOOL_TESTS_HELPERS_H
#define PINPOOL_TESTS_HELPERS_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <criterion/criterion.h>

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <pinpool.h>

/* ------------------------------------------------------------------------ */
/* Criterion under ThreadSanitizer                                           */
/* ------------------------------------------------------------------------ */

#if defined(__SANITIZE_THREAD__)
#define HELPERS_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define HELPERS_TSAN 1
#endif
#endif

/* A suite built from several files defines HELPERS_NO_RAND_R in all of
 * them but one, so that its binary holds one rand_r. */
#if defined(HELPERS_TSAN) && !defined(HELPERS_NO_RAND_R)
#include <errno.h>
#include <sys/mman.h>
/*
 * Criterion 2.4.1 cannot start under ThreadSanitizer ("Could not initialize
 * inheritable arena", a known Criterion bug): BoxFort maps its arena at
 * 0x200000000000 + ((rand_r() & 0x3fffff) << 24), tries 10 such addresses,
 * and TSan has reserved nearly all of them.  rand_r is used by nothing else
 * in a test binary (pinpool and the tests never call it), so in TSan builds
 * the test binary supplies its own: it still returns pseudo-random values,
 * but only ones whose BoxFort address range is unmapped (mincore fails with
 * ENOMEM on each of its pages); TSan maps everything it reserves, so what
 * is left unmapped there is application memory.  Non-TSan builds are
 * untouched.
 */
int rand_r(unsigned *seedp);
int rand_r(unsigned *seedp)
{
    unsigned v = 0;
    for (int i = 0; i < 1000000; i++) {
        unsigned x = *seedp ? *seedp : 0x9e3779b9u;
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        *seedp = x;
        v = x & 0x7fffffffu;
        uintptr_t base = (uintptr_t)0x200000000000ull +
                         ((uintptr_t)(v & 0x3fffffu) << 24);
        bool free_range = true;
        for (uintptr_t a = base; a < base + ((uintptr_t)1 << 22); a += 4096) {
            unsigned char vec;
            if (mincore((void *)a, 4096, &vec) == 0 || errno != ENOMEM) {
                free_range = false;
                break;
            }
        }
        if (free_range)
            break;
    }
    return (int)v;
}
#endif

#define TEST_SYNTH4 "pack:2 numa:2 core:2 pu:1"
#define TEST_WAIT_MS 10000 /* bound of every wait; reaching it fails */

#define HELPERS_UNUSED __attribute__((unused))

/* ------------------------------------------------------------------------ */
/* Time and bounded waits                                                    */
/* ------------------------------------------------------------------------ */

static inline uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Evaluates cond repeatedly (yielding in between) until it is true or ms
 * milliseconds have passed.  Yields the final value of cond: callers assert
 * it, so reaching the deadline fails the test. */
#define WAIT_UNTIL(cond, ms)                                                   \
    __extension__({                                                            \
        uint64_t wu_deadline_ = now_ns() + (uint64_t)(ms) * 1000000ull;       \
        bool wu_ok_;                                                           \
        while (!(wu_ok_ = (cond)) && now_ns() < wu_deadline_)                  \
            sched_yield();                                                     \
        wu_ok_;                                                                \
    })

/* ------------------------------------------------------------------------ */
/* Failures seen on worker threads                                           */
/* ------------------------------------------------------------------------ */

static atomic_int g_tfail_count HELPERS_UNUSED;
static pthread_mutex_t g_tfail_mu HELPERS_UNUSED = PTHREAD_MUTEX_INITIALIZER;
static char g_tfail_msg[512] HELPERS_UNUSED;

static inline void tfail_record(int line, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static inline void tfail_record(int line, const char *fmt, ...)
{
    if (atomic_fetch_add(&g_tfail_count, 1) == 0) {
        pthread_mutex_lock(&g_tfail_mu);
        int k = snprintf(g_tfail_msg, sizeof g_tfail_msg, "line %d: ", line);
        va_list ap;
        va_start(ap, fmt);
        if (k > 0 && (size_t)k < sizeof g_tfail_msg)
            vsnprintf(g_tfail_msg + k, sizeof g_tfail_msg - (size_t)k, fmt, ap);
        va_end(ap);
        pthread_mutex_unlock(&g_tfail_mu);
    }
}

/* For worker threads: records a failure instead of aborting. */
#define TCHECK(cond, ...)                                                      \
    do {                                                                       \
        if (!(cond))                                                           \
            tfail_record(__LINE__, __VA_ARGS__);                               \
    } while (0)

/* On the test's main thread, after joining the workers. */
#define TCHECK_NONE()                                                          \
    do {                                                                       \
        int tn_ = atomic_load(&g_tfail_count);                                 \
        pthread_mutex_lock(&g_tfail_mu);                                       \
        char tm_[sizeof g_tfail_msg];                                          \
        memcpy(tm_, g_tfail_msg, sizeof tm_);                                  \
        pthread_mutex_unlock(&g_tfail_mu);                                     \
        cr_assert_eq(tn_, 0, "%d failure(s) in worker threads; first: %s",     \
                     tn_, tm_);                                                \
    } while (0)

/* ------------------------------------------------------------------------ */
/* Seeded content                                                            */
/* ------------------------------------------------------------------------ */

static inline uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Whole 64-bit words where possible: ThreadSanitizer's shadow keeps only a
 * few accesses per 8-byte granule, so byte-by-byte loops hide races from it;
 * word accesses do not. */
static inline void fill_pattern(void *p, size_t n, uint64_t seed)
{
    unsigned char *b = p;
    uint64_t st = seed;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w = splitmix64(&st);
        memcpy(b + i, &w, 8);
    }
    uint64_t w = splitmix64(&st);
    for (; i < n; i++)
        b[i] = (unsigned char)(w >> (8 * (i % 8)));
}

static inline bool check_pattern(const void *p, size_t n, uint64_t seed)
{
    const unsigned char *b = p;
    uint64_t st = seed;
    size_t i = 0;
    bool ok = true;
    for (; i + 8 <= n; i += 8) {
        uint64_t w = splitmix64(&st), got;
        memcpy(&got, b + i, 8);
        ok &= got == w;
    }
    uint64_t w = splitmix64(&st);
    for (; i < n; i++)
        ok &= b[i] == (unsigned char)(w >> (8 * (i % 8)));
    return ok;
}

/* Entries of a directory, but . and .. (a pool's private swap directory
 * under its swap_dir, the files in it). */
static inline size_t dir_entries(const char *path)
{
    DIR *d = opendir(path);
    cr_assert_not_null(d, "opendir %s: %s", path, strerror(errno));
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        n += strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0;
    closedir(d);
    return n;
}

/* ------------------------------------------------------------------------ */
/* Pools                                                                     */
/* ------------------------------------------------------------------------ */

/* pp_pool_create with PINPOOL_TEST_TOPOLOGY applied (and the build's
 * PP_TEST_POOL_FLAGS ORed into the flags, if it defines them); returns its
 * code. */
static inline int test_pool_create(const pp_options_t *opt, pp_pool_t **out)
{
    pp_options_t o = PP_OPTIONS_INIT;
    if (opt)
        o = *opt;
    if (o.topology == NULL) {
        const char *t = getenv("PINPOOL_TEST_TOPOLOGY");
        if (t && *t)
            o.topology = t;
    }
#ifdef PP_TEST_POOL_FLAGS
    o.flags |= PP_TEST_POOL_FLAGS;       /* e.g. test_swap_direct: PP_SWAP_DIRECT */
#endif
    return pp_pool_create(&o, out);
}

/* Creates a pool (PINPOOL_TEST_TOPOLOGY applied); fails the test on error. */
static inline pp_pool_t *test_pool(pp_options_t *opt)
{
    pp_pool_t *pool = NULL;
    int rc = test_pool_create(opt, &pool);
    cr_assert_eq(rc, 0, "pp_pool_create: %s (%s)", pp_err_name(rc),
                 pp_strerror(rc));
    cr_assert_not_null(pool);
    return pool;
}

/* Creates a pool on this machine's topology, whatever the environment says
 * (for the tests of the real topology). */
static inline pp_pool_t *test_pool_native(pp_options_t *opt)
{
    pp_options_t o = PP_OPTIONS_INIT;
    if (opt)
        o = *opt;
    o.topology = NULL;
    pp_pool_t *pool = NULL;
    int rc = pp_pool_create(&o, &pool);
    cr_assert_eq(rc, 0, "pp_pool_create: %s", pp_err_name(rc));
    cr_assert_not_null(pool);
    return pool;
}

static inline void test_destroy(pp_pool_t *pool)
{
    int rc = pp_pool_destroy(pool);
    cr_assert_eq(rc, 0, "pp_pool_destroy: %s", pp_err_name(rc));
}

static inline void test_drain(pp_pool_t *pool)
{
    int rc = pp_pool_drain(pool, TEST_WAIT_MS);
    cr_assert_eq(rc, 0, "pp_pool_drain: %s", pp_err_name(rc));
}

/* The pool's statistics into s (its size and version set here). */
static inline void test_stats(pp_pool_t *pool, pp_stats_t *s)
{
    *s = (pp_stats_t)PP_STATS_INIT;
    int rc = pp_pool_stats(pool, s);
    cr_assert_eq(rc, 0, "pp_pool_stats: %s", pp_err_name(rc));
}

/* One node's statistics into s (its size and version set here). */
static inline void test_node_stats(pp_pool_t *pool, unsigned node, pp_node_stats_t *s)
{
    *s = (pp_node_stats_t)PP_NODE_STATS_INIT;
    int rc = pp_node_stats(pool, node, s);
    cr_assert_eq(rc, 0, "pp_node_stats(%u): %s", node, pp_err_name(rc));
}

/* One node's statistics, by value. */
static inline pp_node_stats_t test_node(pp_pool_t *pool, unsigned node)
{
    pp_node_stats_t s;
    test_node_stats(pool, node, &s);
    return s;
}

static inline unsigned test_nodes(pp_pool_t *pool)
{
    pp_stats_t s;
    test_stats(pool, &s);
    cr_assert(s.nodes >= 1 && s.nodes <= PP_MAX_NODES, "nodes = %u", s.nodes);
    return s.nodes;
}

/* A pool with default options on the synthetic topology of four nodes,
 * whatever the environment says. */
static inline pp_pool_t *test_pool_synth4(void)
{
    pp_options_t o = PP_OPTIONS_INIT;
    o.topology = TEST_SYNTH4;
    pp_pool_t *pool = test_pool(&o);
    cr_assert_eq(test_nodes(pool), 4);
    return pool;
}

/* Each node's reclaimer thread id into tid[node]; returns the nodes. */
static inline unsigned test_reclaimer_tids(pp_pool_t *pool, int tid[PP_MAX_NODES])
{
    unsigned nodes = test_nodes(pool);
    for (unsigned n = 0; n < nodes; n++) {
        pp_node_stats_t s;
        test_node_stats(pool, n, &s);
        tid[n] = s.reclaimer_tid;
    }
    return nodes;
}

/* One counter of pp_pool_stats, for polls: total or one node. */
#define STAT_TOTAL(pool, field)                                                \
    __extension__({                                                            \
        pp_stats_t st_;                                                        \
        test_stats((pool), &st_);                                              \
        (uint64_t)st_.total.field;                                             \
    })
#define STAT_NODE(pool, n, field)                                              \
    __extension__({                                                            \
        pp_node_stats_t st_;                                                   \
        test_node_stats((pool), (n), &st_);                                    \
        (uint64_t)st_.field;                                                   \
    })

static inline pp_entry_info_t test_stat(pp_pool_t *pool, pp_ref_t ref)
{
    pp_entry_info_t info;
    memset(&info, 0, sizeof info);
    int rc = pp_stat(pool, ref, &info);
    cr_assert_eq(rc, 0, "pp_stat(0x%016" PRIx64 "): %s", ref, pp_err_name(rc));
    return info;
}

/* Asserts rc == expected, naming both codes. */
#define assert_rc(rc, expected, ...)                                           \
    do {                                                                       \
        int ar_rc_ = (rc), ar_ex_ = (expected);                                \
        cr_assert_eq(ar_rc_, ar_ex_, "got %s, expected %s: %s",                \
                     pp_err_name(ar_rc_), pp_err_name(ar_ex_),                 \
                     #rc);                                                     \
    } while (0)

/* ------------------------------------------------------------------------ */
/* Counting type                                                             */
/* ------------------------------------------------------------------------ */

#define CT_MAGIC 0x70696e706f6f6c31ull /* "pinpool1" */
#define CT_POISON 0xDB

typedef struct ct_hdr {
    uint64_t magic;
    uint64_t id;   /* index into ct_t.rec */
    uint64_t size; /* the size given to pp_put */
    uint64_t seed; /* content seed of the bytes after the header */
} ct_hdr_t;

typedef struct ct_rec {
    atomic_uint frees; /* free calls for this entry */
    atomic_int tid;    /* gettid() of the last caller */
} ct_rec_t;

typedef struct ct {
    pp_type_t type;        /* type.ctx == this */
    size_t cap;
    ct_rec_t *rec;
    atomic_uint_fast64_t total;  /* all free calls */
    atomic_uint_fast64_t bad;    /* bad ctx, header, size, id or double free */
} ct_t;

static void ct_free_fn(void *data, size_t size, void *ctx)
{
    ct_t *ct = ctx;
    ct_hdr_t *h = data;
    if (ct == NULL || data == NULL) {
        /* Nothing sensible to count against; make the failure visible. */
        abort();
    }
    size_t poison = sizeof *h;
    if (h->magic != CT_MAGIC || h->id >= ct->cap || h->size != size) {
        atomic_fetch_add(&ct->bad, 1);
    } else {
        poison = size;
        ct_rec_t *r = &ct->rec[h->id];
        atomic_store(&r->tid, (int)gettid());
        if (atomic_fetch_add(&r->frees, 1) != 0)
            atomic_fetch_add(&ct->bad, 1);
    }
    atomic_fetch_add(&ct->total, 1);
    /* Poison, then free: a reader still using the data sees garbage (and
     * the sanitizers see the race or the use after free). */
    memset(data, CT_POISON, poison);
    free(data);
}

static inline ct_t *ct_new(size_t cap)
{
    ct_t *ct = calloc(1, sizeof *ct);
    cr_assert_not_null(ct);
    ct->rec = calloc(cap ? cap : 1, sizeof *ct->rec);
    cr_assert_not_null(ct->rec);
    ct->cap = cap;
    ct->type.name = "counted";
    ct->type.free = ct_free_fn;
    ct->type.ctx = ct;
    return ct;
}

/* Call only once no free can run any more (after pp_pool_destroy). */
static inline void ct_delete(ct_t *ct)
{
    free(ct->rec);
    free(ct);
}

static inline uint64_t ct_seed(uint64_t id) { return id * 0x100000001b3ull + 7; }

/* A buffer of `size` bytes (>= sizeof(ct_hdr_t)) for entry `id`. */
static inline void *ct_buf(ct_t *ct, size_t id, size_t size)
{
    cr_assert(id < ct->cap, "id %zu >= cap %zu", id, ct->cap);
    if (size < sizeof(ct_hdr_t))
        size = sizeof(ct_hdr_t);
    ct_hdr_t *h = malloc(size);
    cr_assert_not_null(h);
    h->magic = CT_MAGIC;
    h->id = id;
    h->size = size;
    h->seed = ct_seed(id);
    fill_pattern(h + 1, size - sizeof *h, h->seed);
    return h;
}

/* True if data holds entry id's intact buffer of `size` bytes. */
static inline bool ct_check(const void *data, size_t id, size_t size)
{
    const ct_hdr_t *h = data;
    if (data == NULL || size < sizeof *h)
        return false;
    return h->magic == CT_MAGIC && h->id == id && h->size == size &&
           h->seed == ct_seed(id) &&
           check_pattern(h + 1, size - sizeof *h, h->seed);
}

static inline unsigned ct_frees(ct_t *ct, size_t id)
{
    return atomic_load(&ct->rec[id].frees);
}

static inline int ct_tid(ct_t *ct, size_t id)
{
    return atomic_load(&ct->rec[id].tid);
}

/* Puts entry `id` (buffer of `size` bytes) with the counting type. */
static inline pp_ref_t ct_put(pp_pool_t *pool, ct_t *ct, size_t id,
                              size_t size, unsigned flags)
{
    if (size < sizeof(ct_hdr_t))
        size = sizeof(ct_hdr_t);
    void *buf = ct_buf(ct, id, size);
    pp_ref_t ref = PP_REF_NONE;
    int rc = pp_put(pool, buf, size, &ct->type, flags, &ref);
    cr_assert_eq(rc, 0, "pp_put(id %zu): %s", id, pp_err_name(rc));
    cr_assert_neq(ref, PP_REF_NONE);
    return ref;
}

/* Drops one owner of each of refs[0..n). */
static inline void release_each(pp_pool_t *pool, const pp_ref_t *refs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        assert_rc(pp_release(pool, refs[i]), 0);
}

/* Waits (bounded) until the counting type has seen n free calls. */
#define CT_WAIT_TOTAL(ct, n)                                                   \
    cr_assert(WAIT_UNTIL(atomic_load(&(ct)->total) >= (uint64_t)(n),           \
                         TEST_WAIT_MS),                                        \
              "timed out waiting for %" PRIu64 " frees (have %" PRIu64 ")",    \
              (uint64_t)(n), (uint64_t)atomic_load(&(ct)->total))

/* ------------------------------------------------------------------------ */
/* Report capture (options.report)                                           */
/* ------------------------------------------------------------------------ */

typedef struct report_cap {
    pthread_mutex_t mu;
    char **lines;
    size_t n, cap;
    bool newline_seen; /* a line contained '\n' (must not) */
} report_cap_t;

static inline void report_cap_init(report_cap_t *rc)
{
    memset(rc, 0, sizeof *rc);
    pthread_mutex_init(&rc->mu, NULL);
}

static void report_cap_cb(const char *line, void *ctx)
{
    report_cap_t *rc = ctx;
    pthread_mutex_lock(&rc->mu);
    if (line == NULL)
        line = "(null line)";
    if (strchr(line, '\n'))
        rc->newline_seen = true;
    if (rc->n == rc->cap) {
        size_t nc = rc->cap ? rc->cap * 2 : 16;
        char **nl = realloc(rc->lines, nc * sizeof *nl);
        if (nl == NULL)
            abort();
        rc->lines = nl;
        rc->cap = nc;
    }
    rc->lines[rc->n] = strdup(line);
    if (rc->lines[rc->n] == NULL)
        abort();
    rc->n++;
    pthread_mutex_unlock(&rc->mu);
}

static inline void report_cap_attach(report_cap_t *rc, pp_options_t *opt)
{
    opt->report = report_cap_cb;
    opt->report_ctx = rc;
}

static inline size_t report_cap_count(report_cap_t *rc)
{
    pthread_mutex_lock(&rc->mu);
    size_t n = rc->n;
    pthread_mutex_unlock(&rc->mu);
    return n;
}

/* True if one line (from index `from` on) contains every non-NULL needle. */
static inline bool report_has(report_cap_t *rc, size_t from, const char *a,
                              const char *b, const char *c)
{
    bool found = false;
    pthread_mutex_lock(&rc->mu);
    for (size_t i = from; i < rc->n && !found; i++) {
        const char *l = rc->lines[i];
        found = (!a || strstr(l, a)) && (!b || strstr(l, b)) &&
                (!c || strstr(l, c));
    }
    pthread_mutex_unlock(&rc->mu);
    return found;
}

/* All lines, joined, for assertion messages (caller frees). */
static inline char *report_dump(report_cap_t *rc)
{
    pthread_mutex_lock(&rc->mu);
    size_t len = 1;
    for (size_t i = 0; i < rc->n; i++)
        len += strlen(rc->lines[i]) + 3;
    char *s = malloc(len);
    if (s == NULL)
        abort();
    s[0] = 0;
    for (size_t i = 0; i < rc->n; i++) {
        strcat(s, "\n  ");
        strcat(s, rc->lines[i]);
    }
    pthread_mutex_unlock(&rc->mu);
    return s;
}

static inline void report_cap_free(report_cap_t *rc)
{
    for (size_t i = 0; i < rc->n; i++)
        free(rc->lines[i]);
    free(rc->lines);
    pthread_mutex_destroy(&rc->mu);
    memset(rc, 0, sizeof *rc);
}

/* The ref as the reports print it. */
static inline void ref_hex(pp_ref_t ref, char buf[32])
{
    snprintf(buf, 32, "0x%016" PRIx64, ref);
}

/* ------------------------------------------------------------------------ */
/* Threads                                                                   */
/* ------------------------------------------------------------------------ */

static inline void test_thread_start(pthread_t *t, void *(*fn)(void *),
                                     void *arg)
{
    int rc = pthread_create(t, NULL, fn, arg);
    cr_assert_eq(rc, 0, "pthread_create: %s", strerror(rc));
}

static inline void test_thread_join(pthread_t t)
{
    int rc = pthread_join(t, NULL);
    cr_assert_eq(rc, 0, "pthread_join: %s", strerror(rc));
}

/* A simple one-way signal between threads (mutex + condvar), never a
 * sleep.  sig_wait is bounded and returns false on timeout. */
typedef struct test_sig {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int value;
} test_sig_t;

static inline void sig_init(test_sig_t *s)
{
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    s->value = 0;
}

static inline void sig_destroy(test_sig_t *s)
{
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
}

static inline void sig_set(test_sig_t *s, int v)
{
    pthread_mutex_lock(&s->mu);
    s->value = v;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

/* Waits until the value is >= v; false after TEST_WAIT_MS. */
static inline bool sig_wait(test_sig_t *s, int v)
{
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += TEST_WAIT_MS / 1000;
    bool ok = true;
    pthread_mutex_lock(&s->mu);
    while (s->value < v) {
        if (pthread_cond_timedwait(&s->cv, &s->mu, &dl) != 0 && s->value < v) {
            ok = false;
            break;
        }
    }
    pthread_mutex_unlock(&s->mu);
    return ok;
}

#endif /* PINPOOL_TESTS_HELPERS_H */
