/*
 * swaptest.h -- what the eviction tests (test_evict, test_advise) share:
 * where their pools' swap directories go, how a suite's fini removes the
 * directory of a pool a failed test left, and the pool's statistics.
 */
#ifndef PP_TEST_SWAPTEST_H
#define PP_TEST_SWAPTEST_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <pinpool.h>

#include "../helpers.h"   /* test_stats, Criterion */

#include "testing/testhooks.h"   /* pp__swap_path, pp__pool_is_valid */

/* $TMPDIR, else /tmp. */
static inline const char *test_swap_parent(void)
{
    const char *t = getenv("TMPDIR");
    return t != NULL && *t != '\0' ? t : "/tmp";
}

/* Removes pool's private swap directory and its files (pool may be NULL):
 * a test that fails leaves its pool behind when the process ends, and the
 * suite's fini calls this so failures do not litter the swap directory. */
static inline void test_swap_dir_remove(pp_pool_t *pool)
{
    if (pool == NULL)
        return;
    const char *dir = pp__swap_path(pool);
    DIR *d = dir[0] != '\0' ? opendir(dir) : NULL;
    if (d == NULL)
        return;
    struct dirent *de;
    char path[4096 + 256];
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        (void)unlink(path);
    }
    closedir(d);
    (void)rmdir(dir);
}

/* The pool's statistics, on the heap (free it). */
static inline pp_stats_t *test_stats_new(pp_pool_t *pool)
{
    pp_stats_t *s = malloc(sizeof *s);
    cr_assert_not_null(s);
    test_stats(pool, s);
    return s;
}

/* The pool's reserved resident bytes. */
static inline uint64_t test_reserved(pp_pool_t *pool)
{
    pp_stats_t *s = test_stats_new(pool);
    uint64_t v = s->resident_reserved;
    free(s);
    return v;
}

/* Releases refs (skipping PP_REF_NONE) and drains -- which waits for
 * entries that died during an eviction or a load too -- then checks that
 * everything put has been freed and nothing is left: no entries, no
 * resident, swapped or reserved bytes, no swap space, no I/O error, the
 * peak within the limit, a valid table.  The pool stays for the caller's
 * own checks and test_destroy. */
static inline void test_release_and_check_empty(pp_pool_t *pool, const pp_ref_t *refs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (refs[i] != PP_REF_NONE)
            assert_rc(pp_release(pool, refs[i]), 0);
    }
    test_drain(pool);
    pp_stats_t *s = test_stats_new(pool);
    cr_assert_eq(s->total.frees, s->total.puts, "pp_pool_drain returned before every entry "
                 "was freed: %" PRIu64 " puts, %" PRIu64 " frees", s->total.puts, s->total.frees);
    cr_assert_eq(s->total.entries, 0);
    cr_assert_eq(s->total.dead_in_io, 0);
    cr_assert_eq(s->total.resident_bytes, 0, "resident_bytes %" PRIu64, s->total.resident_bytes);
    cr_assert_eq(s->total.swapped_bytes, 0, "swapped_bytes %" PRIu64, s->total.swapped_bytes);
    cr_assert_eq(s->total.swap_used_bytes, 0, "swap_used_bytes %" PRIu64,
                 s->total.swap_used_bytes);
    cr_assert_eq(s->resident_reserved, 0, "resident_reserved %" PRIu64, s->resident_reserved);
    cr_assert_leq(s->resident_peak, s->mem_limit);
    cr_assert_eq(s->total.checksum_failures + s->total.io_errors, 0);
    free(s);
    cr_assert(pp__pool_is_valid(pool));
}

#endif /* PP_TEST_SWAPTEST_H */
