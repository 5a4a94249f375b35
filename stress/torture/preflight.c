/*
 * stress/torture/preflight.c -- the torture's checks that are not about
 * entries: the argument validation of the API, done once by the main
 * thread before the workers start, and the pool's private swap directory
 * (its place and modes while the pool lives; gone after pp_pool_destroy).
 */
#include "torture.h"

#include <dirent.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testing/testhooks.h"   /* pp__swap_path */

static void quiet_report(const char *line, void *ctx)
{
    (void)line;
    (void)ctx;
}

/* Checks of argument validation, done once by the main thread. */
void preflight(thr_t *m)
{
    unsigned char buf[16];
    pp_ref_t ref = 123;
    void *d = NULL;
    pp_entry_info_t in;
    memset(buf, 0, sizeof buf);
    CHECK_RC(m, pp_put(NULL, buf, 16, &g_type, 0, &ref), PP_EINVAL, "pp_put(NULL pool)", 0);
    CHECK_RC(m, pp_put(g_pool, NULL, 16, &g_type, 0, &ref), PP_EINVAL, "pp_put(NULL data)", 0);
    CHECK_RC(m, pp_put(g_pool, buf, 16, &g_type, 0, NULL), PP_EINVAL, "pp_put(NULL out)", 0);
    CHECK_RC(m, pp_put(g_pool, buf, 16, &g_type, 0x2u, &ref), PP_EINVAL,
             "pp_put(unknown flags 0x2)", 0);
    if (g_nnodes < 256)
        CHECK_RC(m, pp_put(g_pool, buf, 16, &g_type, PP_ON_NODE(g_nnodes), &ref), PP_EINVAL,
                 "pp_put(PP_ON_NODE(number of nodes))", 0);
    CHECK_RC(m, pp_pool_stats(g_pool, NULL), PP_EINVAL, "pp_pool_stats(NULL out)", 0);
    CHECK_RC(m, pp_stat(g_pool, PP_REF_NONE, &in), PP_ESTALE, "pp_stat(PP_REF_NONE)", 0);
    CHECK_RC(m, pp_pin(g_pool, PP_REF_NONE, 0, &d), PP_ESTALE, "pp_pin(PP_REF_NONE)", 0);
    CHECK_RC(m, pp_unpin(g_pool, PP_REF_NONE), PP_ESTALE, "pp_unpin(PP_REF_NONE)", 0);
    CHECK_RC(m, pp_retain(g_pool, PP_REF_NONE), PP_ESTALE, "pp_retain(PP_REF_NONE)", 0);
    CHECK_RC(m, pp_release(g_pool, PP_REF_NONE), PP_ESTALE, "pp_release(PP_REF_NONE)", 0);
    CHECK_RC(m, pp_get(g_pool, PP_REF_NONE, &d), PP_ESTALE, "pp_get(PP_REF_NONE)", 0);
    CHECK_RC(m, pp_prefetch(g_pool, PP_REF_NONE), PP_ESTALE, "pp_prefetch(PP_REF_NONE)", 0);
    CHECK_RC(m, pp_pin_many(g_pool, &ref, 0, 0, NULL), 0, "pp_pin_many(n = 0)", 0);
    CHECK_RC(m, pp_unpin_many(g_pool, &ref, 0, NULL), 0, "pp_unpin_many(n = 0, NULL)", 0);
    if (strcmp(pp_err_name(PP_ESTALE), "PP_ESTALE") != 0 || strcmp(pp_err_name(0), "PP_OK") != 0 ||
        pp_strerror(-12345) == NULL || pp_strerror(PP_ENOMEM) == NULL)
        failf(m, "pp_err_name / pp_strerror: unexpected names");
    if (g_swap) {
        /* A type must save and load, or neither. */
        static const pp_type_t half = { "half", NULL, stress_save, NULL, NULL, 0u };
        CHECK_RC(m, pp_put(g_pool, buf, 16, &half, 0, &ref), PP_EINVAL,
                 "pp_put(type with save and no load)", 0);
        CHECK_RC(m, pp_write(NULL, buf, 1), PP_EINVAL, "pp_write(NULL writer)", 0);
        CHECK_RC(m, pp_read(NULL, buf, 1), PP_EINVAL, "pp_read(NULL reader)", 0);
        if (pp_read_left(NULL) != 0)
            failf(m, "pp_read_left(NULL) = %zu, expected 0", pp_read_left(NULL));
        /* swap_dir needs mem_limit; a swap_dir that does not exist is PP_EIO. */
        pp_options_t o = PP_OPTIONS_INIT;
        pp_pool_t *p = NULL;
        o.report = quiet_report;
        char missing[sizeof g_rundir + 32];
        snprintf(missing, sizeof missing, "%s/does-not-exist", g_rundir);
        o.topology = g_topology;
        o.swap_dir = g_rundir;
        int rc = pp_pool_create(&o, &p);
        CHECK_RC(m, rc, PP_EINVAL, "pp_pool_create(swap_dir without mem_limit)", 0);
        if (rc == 0)
            pp_pool_destroy(p);
        o.mem_limit = g_mem_limit;
        o.swap_dir = missing;
        p = NULL;
        rc = pp_pool_create(&o, &p);
        CHECK_RC(m, rc, PP_EIO, "pp_pool_create(swap_dir that does not exist)", 0);
        if (rc == 0)
            pp_pool_destroy(p);
    }
}

/* The pool's private swap directory: under our run directory, mode 0700,
 * holding only regular files of mode 0600. */
void check_swap_dir(thr_t *m)
{
    const char *path = pp__swap_path(g_pool);
    size_t rl = strlen(g_rundir);
    if (strncmp(path, g_rundir, rl) != 0 || strncmp(path + rl, "/pinpool-", 9) != 0 ||
        strchr(path + rl + 1, '/') != NULL) {
        failf(m, "the pool's swap directory is '%s', expected %s/pinpool-XXXXXX", path, g_rundir);
        return;
    }
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode) || (sb.st_mode & 07777) != 0700) {
        failf(m, "swap directory %s: %s, mode %#o (expected a directory of mode 0700)", path,
              strerror(errno), (unsigned)(sb.st_mode & 07777));
        return;
    }
    DIR *dir = opendir(path);
    if (dir == NULL) {
        failf(m, "opendir(%s): %s", path, strerror(errno));
        return;
    }
    unsigned files = 0;
    for (struct dirent *de; (de = readdir(dir)) != NULL;) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        char f[sizeof g_rundir + 512];
        snprintf(f, sizeof f, "%s/%s", path, de->d_name);
        if (lstat(f, &sb) != 0 || !S_ISREG(sb.st_mode) || (sb.st_mode & 07777) != 0600)
            failf(m, "swap file %s: mode %#o (expected a regular file of mode 0600)", f,
                  (unsigned)(sb.st_mode & 07777));
        files++;
    }
    closedir(dir);
    if (files == 0)
        failf(m, "swap directory %s holds no file", path);
}

/* After pp_pool_destroy: the run directory must be empty (the pool removed
 * its pinpool-XXXXXX directory); then it is removed. */
void check_rundir_gone(thr_t *m)
{
    DIR *dir = opendir(g_rundir);
    if (dir == NULL) {
        failf(m, "opendir(%s) after pp_pool_destroy: %s", g_rundir, strerror(errno));
        return;
    }
    unsigned left = 0;
    for (struct dirent *de; (de = readdir(dir)) != NULL;) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        if (left++ < 4)
            failf(m, "pp_pool_destroy left %s/%s behind", g_rundir, de->d_name);
    }
    closedir(dir);
    if (left == 0 && rmdir(g_rundir) != 0)
        failf(m, "rmdir(%s): %s", g_rundir, strerror(errno));
}
