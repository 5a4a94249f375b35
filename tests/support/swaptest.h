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

#include "testhooks.h"   /* pp__swap_path */

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

/* The pool's statistics, on the heap (pp_stats_t is large). */
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

#endif /* PP_TEST_SWAPTEST_H */
