/* test_env.c -- options from the environment (src/api/env.c): each
 * PINPOOL_* variable applies only where the caller left the option at its
 * default, a value that cannot be read fails pp_pool_create with PP_EINVAL
 * and a report line that names it, and PINPOOL_VERBOSE=1 reports each
 * value taken.  Criterion runs each test in its own process, so setenv
 * here changes no other test. */
#include "helpers.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>

#include "os/swapdev.h"        /* the pool's device: direct or not */
#include "testing/testhooks.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

static size_t mem_limit_of(pp_pool_t *pool)
{
    pp_stats_t st = PP_STATS_INIT;
    cr_assert_eq(pp_pool_stats(pool, &st), 0);
    return st.mem_limit;
}

static bool swap_of(pp_pool_t *pool)
{
    pp_stats_t st = PP_STATS_INIT;
    cr_assert_eq(pp_pool_stats(pool, &st), 0);
    return st.swap != 0;
}

/* A pool made with opt (NULL: the defaults) and the environment as set. */
static pp_pool_t *env_pool(pp_options_t *opt)
{
    pp_pool_t *pool = NULL;
    int rc = test_pool_create(opt, &pool);
    cr_assert_eq(rc, 0, "pp_pool_create: %s", pp_err_name(rc));
    return pool;
}

/* pp_pool_create fails with PP_EINVAL, writes no pool, and reports one
 * line holding each needle. */
static void env_refused(pp_options_t *opt, const char *a, const char *b)
{
    report_cap_t rep;
    report_cap_init(&rep);
    pp_options_t o = PP_OPTIONS_INIT;
    if (opt != NULL)
        o = *opt;
    report_cap_attach(&rep, &o);
    pp_pool_t *pool = NULL;
    int rc = test_pool_create(&o, &pool);
    cr_assert_eq(rc, PP_EINVAL, "pp_pool_create: %s, not PP_EINVAL", pp_err_name(rc));
    cr_assert_null(pool);
    cr_assert_eq(report_cap_count(&rep), 1, "%zu report lines", report_cap_count(&rep));
    cr_assert(report_has(&rep, 0, a, b, "pool not created"), "report: %s", rep.lines[0]);
    report_cap_free(&rep);
}

static char *fresh_dir(char *buf, size_t len)
{
    snprintf(buf, len, "/tmp/pp-envtest-XXXXXX");
    cr_assert_not_null(mkdtemp(buf), "mkdtemp: %s", strerror(errno));
    return buf;
}

/* ---- PINPOOL_MEMORY_LIMIT ----------------------------------------------- */

Test(env, memory_limit_with_each_suffix, .timeout = 60)
{
    static const struct {
        const char *text;
        size_t bytes;
    } cases[] = {
        {"4096", 4096},          {"64K", 64 * KiB},      {"64k", 64 * KiB},
        {"3M", 3 * MiB},         {"8MiB", 8 * MiB},      {"8mb", 8 * MiB},
        {"2G", 2048 * MiB},      {"1T", (size_t)1 << 40}, {"0", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cr_assert_eq(setenv("PINPOOL_MEMORY_LIMIT", cases[i].text, 1), 0);
        pp_pool_t *pool = env_pool(NULL);
        cr_assert_eq(mem_limit_of(pool), cases[i].bytes, "PINPOOL_MEMORY_LIMIT=%s: %zu bytes",
                     cases[i].text, mem_limit_of(pool));
        cr_assert_eq(pp_pool_destroy(pool), 0);
    }
}

Test(env, memory_limit_set_by_the_caller_wins, .timeout = 60)
{
    cr_assert_eq(setenv("PINPOOL_MEMORY_LIMIT", "64M", 1), 0);
    pp_options_t o = PP_OPTIONS_INIT;
    o.mem_limit = 1 * MiB;
    pp_pool_t *pool = env_pool(&o);
    cr_assert_eq(mem_limit_of(pool), 1 * MiB);
    cr_assert_eq(pp_pool_destroy(pool), 0);
}

Test(env, memory_limit_that_cannot_be_read_fails_the_create, .timeout = 60)
{
    static const char *bad[] = {"12Q",   "-5",  "1.5G", "99999999999999999999",
                                "16777216T", "8 M", "M",    "0x10",
                                "64KK"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert_eq(setenv("PINPOOL_MEMORY_LIMIT", bad[i], 1), 0);
        char needle[64];
        snprintf(needle, sizeof needle, "PINPOOL_MEMORY_LIMIT=%s:", bad[i]);
        env_refused(NULL, needle, "not a size");
    }
}

Test(env, empty_is_unset, .timeout = 60)
{
    cr_assert_eq(setenv("PINPOOL_MEMORY_LIMIT", "", 1), 0);
    cr_assert_eq(setenv("PINPOOL_SWAP_DIR", "", 1), 0);
    cr_assert_eq(setenv("PINPOOL_VERBOSE", "", 1), 0);
    pp_pool_t *pool = env_pool(NULL);
    cr_assert_eq(mem_limit_of(pool), 0);
    cr_assert(!swap_of(pool));
    cr_assert_eq(pp_pool_destroy(pool), 0);
}

/* ---- PINPOOL_SWAP_DIR, PINPOOL_SWAP_DIRECT ------------------------------- */

Test(env, swap_dir_makes_a_swapping_pool, .timeout = 120)
{
    char dir[64];
    cr_assert_eq(setenv("PINPOOL_SWAP_DIR", fresh_dir(dir, sizeof dir), 1), 0);
    cr_assert_eq(setenv("PINPOOL_MEMORY_LIMIT", "4M", 1), 0);
    pp_pool_t *pool = env_pool(NULL);
    cr_assert(swap_of(pool));
    cr_assert_eq(dir_entries(dir), 1, "the pool's private directory under %s", dir);
    /* Four times the limit in, every byte back. */
    enum { N = 16 };
    pp_ref_t refs[N];
    for (int i = 0; i < N; i++) {
        void *buf = malloc(MiB);
        cr_assert_not_null(buf);
        fill_pattern(buf, MiB, (uint64_t)i);
        cr_assert_eq(pp_put(pool, buf, MiB, NULL, 0, &refs[i]), 0);
    }
    for (int i = 0; i < N; i++) {
        void *p;
        cr_assert_eq(pp_pin(pool, refs[i], 0, &p), 0);
        cr_assert(check_pattern(p, MiB, (uint64_t)i), "entry %d", i);
        cr_assert_eq(pp_unpin(pool, refs[i]), 0);
        cr_assert_eq(pp_release(pool, refs[i]), 0);
    }
    pp_stats_t st = PP_STATS_INIT;
    cr_assert_eq(pp_pool_stats(pool, &st), 0);
    cr_assert_gt(st.total.evictions_written, 0);
    cr_assert_eq(pp_pool_destroy(pool), 0);
    cr_assert_eq(dir_entries(dir), 0, "the private directory is removed");
    rmdir(dir);
}

Test(env, swap_dir_needs_a_memory_limit, .timeout = 60)
{
    char dir[64];
    cr_assert_eq(setenv("PINPOOL_SWAP_DIR", fresh_dir(dir, sizeof dir), 1), 0);
    env_refused(NULL, "PINPOOL_SWAP_DIR=", "needs a memory limit");
    cr_assert_eq(dir_entries(dir), 0);
    rmdir(dir);
}

Test(env, swap_dir_set_by_the_caller_wins, .timeout = 60)
{
    char mine[64], env[64];
    fresh_dir(mine, sizeof mine);
    cr_assert_eq(setenv("PINPOOL_SWAP_DIR", fresh_dir(env, sizeof env), 1), 0);
    pp_options_t o = PP_OPTIONS_INIT;
    o.mem_limit = 4 * MiB;
    o.swap_dir = mine;
    pp_pool_t *pool = env_pool(&o);
    cr_assert_eq(dir_entries(mine), 1);
    cr_assert_eq(dir_entries(env), 0);
    cr_assert_eq(pp_pool_destroy(pool), 0);
    rmdir(mine);
    rmdir(env);
}

/* The pool's device opens its files O_DIRECT exactly when asked. */
static bool direct_of(pp_pool_t *pool) { return pool->dev != NULL && pool->dev->direct; }

Test(env, swap_direct, .timeout = 60)
{
    char dir[64];
    cr_assert_eq(setenv("PINPOOL_SWAP_DIR", fresh_dir(dir, sizeof dir), 1), 0);
    cr_assert_eq(setenv("PINPOOL_MEMORY_LIMIT", "4M", 1), 0);
    cr_assert_eq(setenv("PINPOOL_SWAP_DIRECT", "1", 1), 0);
    pp_pool_t *pool = env_pool(NULL);
    cr_assert(direct_of(pool));
    cr_assert_eq(pp_pool_destroy(pool), 0);
    cr_assert_eq(setenv("PINPOOL_SWAP_DIRECT", "0", 1), 0);
    pool = env_pool(NULL);
    cr_assert(!direct_of(pool));
    cr_assert_eq(pp_pool_destroy(pool), 0);
    /* 0 does not take back what the caller asked for. */
    pp_options_t o = PP_OPTIONS_INIT;
    o.flags = PP_SWAP_DIRECT;
    pool = env_pool(&o);
    cr_assert(direct_of(pool));
    cr_assert_eq(pp_pool_destroy(pool), 0);
    cr_assert_eq(setenv("PINPOOL_SWAP_DIRECT", "yes", 1), 0);
    env_refused(NULL, "PINPOOL_SWAP_DIRECT=yes:", "not 1 or 0");
    rmdir(dir);
}

/* ---- PINPOOL_VERBOSE ------------------------------------------------------ */

Test(env, verbose_reports_each_value_taken_once, .timeout = 60)
{
    char dir[64];
    cr_assert_eq(setenv("PINPOOL_VERBOSE", "1", 1), 0);
    cr_assert_eq(setenv("PINPOOL_MEMORY_LIMIT", "16M", 1), 0);
    cr_assert_eq(setenv("PINPOOL_SWAP_DIR", fresh_dir(dir, sizeof dir), 1), 0);
    report_cap_t rep;
    report_cap_init(&rep);
    pp_options_t o = PP_OPTIONS_INIT;
    report_cap_attach(&rep, &o);
    pp_pool_t *pool = env_pool(&o);
    cr_assert_eq(report_cap_count(&rep), 2, "%zu lines", report_cap_count(&rep));
    cr_assert(report_has(&rep, 0, "PINPOOL_MEMORY_LIMIT=16M:", "16777216 bytes", NULL));
    cr_assert(report_has(&rep, 0, "PINPOOL_SWAP_DIR=", dir, NULL));
    cr_assert_eq(pp_pool_destroy(pool), 0);
    report_cap_free(&rep);
    rmdir(dir);
    /* What the caller set is not taken, so not reported. */
    report_cap_t quiet;
    report_cap_init(&quiet);
    o = (pp_options_t)PP_OPTIONS_INIT;
    o.mem_limit = 1 * MiB;
    report_cap_attach(&quiet, &o);
    cr_assert_eq(unsetenv("PINPOOL_SWAP_DIR"), 0);
    pool = env_pool(&o);
    cr_assert_eq(report_cap_count(&quiet), 0);
    cr_assert_eq(pp_pool_destroy(pool), 0);
    report_cap_free(&quiet);
}

Test(env, verbose_off_reports_nothing, .timeout = 60)
{
    cr_assert_eq(setenv("PINPOOL_VERBOSE", "0", 1), 0);
    cr_assert_eq(setenv("PINPOOL_MEMORY_LIMIT", "16M", 1), 0);
    report_cap_t rep;
    report_cap_init(&rep);
    pp_options_t o = PP_OPTIONS_INIT;
    report_cap_attach(&rep, &o);
    pp_pool_t *pool = env_pool(&o);
    cr_assert_eq(mem_limit_of(pool), 16 * MiB);
    cr_assert_eq(report_cap_count(&rep), 0);
    cr_assert_eq(pp_pool_destroy(pool), 0);
    report_cap_free(&rep);
    cr_assert_eq(setenv("PINPOOL_VERBOSE", "2", 1), 0);
    env_refused(NULL, "PINPOOL_VERBOSE=2:", "not 1 or 0");
}

Test(env, swap_direct_without_swap_is_read_and_not_reported, .timeout = 60)
{
    cr_assert_eq(setenv("PINPOOL_VERBOSE", "1", 1), 0);
    cr_assert_eq(setenv("PINPOOL_SWAP_DIRECT", "1", 1), 0);
    report_cap_t rep;
    report_cap_init(&rep);
    pp_options_t o = PP_OPTIONS_INIT;
    report_cap_attach(&rep, &o);
    pp_pool_t *pool = env_pool(&o);
    cr_assert(!swap_of(pool));
    cr_assert_eq(report_cap_count(&rep), 0, "%zu lines: no swap files to open",
                 report_cap_count(&rep));
    cr_assert_eq(pp_pool_destroy(pool), 0);
    report_cap_free(&rep);
    cr_assert_eq(setenv("PINPOOL_SWAP_DIRECT", "on", 1), 0);
    env_refused(NULL, "PINPOOL_SWAP_DIRECT=on:", "not 1 or 0");
}
