/*
 * test_swap_free.c -- swap suite: everything freed after release, drain and
 * destroy, entries that die while loading, and allocation failures.
 */
#include "test_swap.h"

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
