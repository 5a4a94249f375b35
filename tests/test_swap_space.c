/*
 * test_swap_space.c -- swap suite: swap_limit and the memory limit, reuse
 * of the space of dead copies, and the private swap directory.
 */
#include "test_swap.h"

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
