/*
 * test_swap_faults.c -- swap suite: a device that fails on write (EIO,
 * ENOSPC, short writes, sync) or on read, and what each keeps.
 */
#include "test_swap.h"

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
