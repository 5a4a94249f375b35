/*
 * test_swap_types.c -- swap suite: types with save/load, types that are
 * never evicted, and the compression stats.
 */
#include "test_swap.h"

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
