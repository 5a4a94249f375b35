/*
 * test_swap_io.c -- swap suite: copies that survive evict/load round trips,
 * alone and from several threads, clean entries dropped without a write,
 * and corrupt copies reported as PP_ECORRUPT.
 */
#include "test_swap.h"

/* ------------------------------------------------------------------------ */
/* 1. Round trips                                                            */
/* ------------------------------------------------------------------------ */

/* 1 byte, around a block and a page, not page multiples, around and over
 * the 1 MiB I/O chunk (buffered reads, and direct writes and reads), over
 * two: about 9 MiB in all, for a 4 MiB limit.  In test_swap_direct, with
 * direct I/O: the entries put are written through the bounce buffer, those
 * loaded (page-aligned) straight from memory, their tails padded. */
static const size_t rt_sizes[] = {
    1, 7, 100, 511, 4095, 4096, 4097, 65537, 300001,
    MiB - 1, MiB + 1, MiB + 3, 3 * MiB / 2 + 3, 2 * MiB + 5, 2 * MiB + 123,
};
#define RT_N (sizeof rt_sizes / sizeof rt_sizes[0])
#define RT_ROUNDS 4

static void round_trips(unsigned flags, const content_t *c, bool expect_smaller)
{
    sw_t s;
    sw_open(&s, 4 * MiB, 0, flags, false);
    pp_ref_t ref[RT_N];
    unsigned ver[RT_N] = {0};
    for (size_t i = 0; i < RT_N; i++)
        ref[i] = put_flat(s.pool, rt_sizes[i], NULL, c, seed_of(i, 0), 0);
    for (unsigned r = 0; r < RT_ROUNDS; r++) {
        /* Everything out, then every entry back in turn (loading one
         * evicts others), a third of them rewritten. */
        assert_rc(sw_squeeze(&s, 0), 0);
        for (size_t i = 0; i < RT_N; i++)
            assert_swapped(&s, ref[i], "after a squeeze");
        for (size_t i = 0; i < RT_N; i++) {
            if ((i + r) % 3 == 0) {
                pin_rewrite(s.pool, ref[i], rt_sizes[i], c, seed_of(i, ver[i]),
                            seed_of(i, ver[i] + 1));
                ver[i]++;
            } else {
                pin_check(s.pool, ref[i], rt_sizes[i], c, seed_of(i, ver[i]));
            }
        }
    }
    assert_rc(sw_squeeze(&s, 0), 0);
    for (size_t i = 0; i < RT_N; i++)
        pin_check(s.pool, ref[i], rt_sizes[i], c, seed_of(i, ver[i]));

    pp_stats_t st;
    sw_stats(&s, &st);
    /* Each squeeze left every entry on disk: each pin after it loaded. */
    cr_assert_eq(st.total.loads, (RT_ROUNDS + 1) * RT_N, "loads %" PRIu64, st.total.loads);
    cr_assert_gt(st.total.evictions_written, 0);
    cr_assert_gt(st.total.evictions_clean, 0);
    cr_assert_gt(st.total.swap_bytes_read, 0);
    cr_assert_eq(st.total.checksum_failures, 0);
    cr_assert_eq(st.total.io_errors, 0);
    cr_assert_leq(st.resident_peak, s.limit, "peak %" PRIu64, st.resident_peak);
    if (expect_smaller)
        cr_assert_lt(st.total.swap_bytes_written, st.total.swap_raw_written);
    else
        cr_assert_eq(st.total.swap_bytes_written, st.total.swap_raw_written);
    cr_assert(pp__pool_is_valid(s.pool));
    release_all(s.pool, ref, RT_N);
    cr_assert_eq(STAT_TOTAL(s.pool, swap_used_bytes), 0);
    sw_close(&s);
}

Test(SW_SUITE, round_trips_raw, .timeout = 60)
{
    round_trips(0, &RANDOM, false);
}

Test(SW_SUITE, round_trips_compressed_compressible, .timeout = 60)
{
    round_trips(PP_SWAP_COMPRESS, &RUNS, true);
}

Test(SW_SUITE, round_trips_compressed_incompressible, .timeout = 60)
{
    round_trips(PP_SWAP_COMPRESS, &RANDOM, false);
}

/* Each copy is the entry's bytes, stored raw at the place the store says,
 * in the file of the entry's home node. */
Test(SW_SUITE, copies_are_in_their_home_node_file, .timeout = 60)
{
    sw_t s;
    sw_open(&s, 1 * MiB, 0, 0, false);
    pp_ref_t ref[PP_MAX_NODES];
    size_t size[PP_MAX_NODES];
    for (unsigned k = 0; k < s.nodes; k++) {
        size[k] = 10000 + 4096 * k + 3;
        ref[k] = put_flat(s.pool, size[k], NULL, &RANDOM, seed_of(k, 0), PP_ON_NODE(k));
        cr_assert_eq(pp_ref_node(ref[k]), k);
    }
    assert_rc(sw_squeeze(&s, 0), 0);
    for (unsigned k = 0; k < s.nodes; k++) {
        uint64_t off, len;
        assert_rc(pp__debug_swap_where(s.pool, ref[k], &off, &len), 0);
        cr_assert_eq(len, size[k]);
        cr_assert_eq(STAT_NODE(s.pool, k, swap_used_bytes), (size[k] + 4095) / 4096 * 4096);
        char path[4200];
        snprintf(path, sizeof path, "%s/node%u.swap", pp__swap_path(s.pool), k);
        int f = open(path, O_RDONLY | O_CLOEXEC);
        cr_assert_geq(f, 0, "open %s: %s", path, strerror(errno));
        char *buf = malloc(len);
        cr_assert_not_null(buf);
        ssize_t got = pread(f, buf, len, (off_t)off);
        close(f);
        bool ok = got == (ssize_t)len && check_pattern(buf, len, seed_of(k, 0));
        free(buf);
        cr_assert(ok, "node %u: the bytes at %" PRIu64 " in %s are not the entry's", k, off,
                  path);
    }
    for (unsigned k = 0; k < s.nodes; k++)
        pin_check(s.pool, ref[k], size[k], &RANDOM, seed_of(k, 0));
    release_all(s.pool, ref, s.nodes);
    sw_close(&s);
}

/* Several threads at once, each pinning (and now and then rewriting) its
 * own entries, all competing for one memory limit: every pin sees the last
 * version its thread wrote, whatever was evicted and loaded in between. */
#define CC_THREADS 4
#define CC_PER 6
#define CC_OPS 200

typedef struct cc_arg {
    pp_pool_t *pool;
    const content_t *c;
    pp_ref_t ref[CC_PER];
    size_t size[CC_PER];
    unsigned ver[CC_PER];
    int k;
} cc_arg_t;

static uint64_t cc_seed(int k, size_t i, unsigned v) { return seed_of((size_t)k * 100 + i, v); }

static void *cc_worker(void *arg)
{
    cc_arg_t *a = arg;
    uint64_t st = (uint64_t)a->k * 7919 + 13;
    for (int op = 0; op < CC_OPS; op++) {
        size_t i = (size_t)(splitmix64(&st) % CC_PER);
        bool write = splitmix64(&st) % 3 == 0;
        void *d = NULL;
        int rc = pp_pin(a->pool, a->ref[i], write ? PP_PIN_WRITE : 0, &d);
        TCHECK(rc == 0, "thread %d op %d: pin: %s", a->k, op, pp_err_name(rc));
        if (rc != 0)
            return NULL;
        bool ok = a->c->check(d, a->size[i], cc_seed(a->k, i, a->ver[i]));
        if (ok && write)
            a->c->fill(d, a->size[i], cc_seed(a->k, i, ++a->ver[i]));
        rc = pp_unpin(a->pool, a->ref[i]);
        TCHECK(rc == 0, "thread %d: unpin: %s", a->k, pp_err_name(rc));
        TCHECK(ok, "thread %d op %d: entry %zu (version %u) lost its contents", a->k, op, i,
               a->ver[i]);
        if (!ok)
            return NULL;
    }
    return NULL;
}

static void concurrent_round_trips(unsigned flags)
{
    sw_t s;
    sw_open(&s, 1 * MiB, 0, flags, false);
    cc_arg_t a[CC_THREADS];
    for (int k = 0; k < CC_THREADS; k++) {
        a[k] = (cc_arg_t){.pool = s.pool, .c = k % 2 ? &RUNS : &RANDOM, .k = k};
        for (size_t i = 0; i < CC_PER; i++) {
            a[k].size[i] = 60000 + 15000 * i + (size_t)k;    /* 2.3 MB in all */
            a[k].ref[i] = put_flat(s.pool, a[k].size[i], NULL, a[k].c, cc_seed(k, i, 0),
                                   PP_ON_NODE((unsigned)(k + i) % s.nodes));
        }
    }
    pthread_t th[CC_THREADS];
    for (int k = 0; k < CC_THREADS; k++)
        test_thread_start(&th[k], cc_worker, &a[k]);
    for (int k = 0; k < CC_THREADS; k++)
        test_thread_join(th[k]);
    TCHECK_NONE();
    assert_rc(sw_squeeze(&s, 0), 0);
    for (int k = 0; k < CC_THREADS; k++) {
        for (size_t i = 0; i < CC_PER; i++)
            pin_check(s.pool, a[k].ref[i], a[k].size[i], a[k].c, cc_seed(k, i, a[k].ver[i]));
    }
    pp_stats_t st;
    sw_stats(&s, &st);
    cr_assert_gt(st.total.loads, 0);
    cr_assert_eq(st.total.checksum_failures, 0);
    cr_assert_eq(st.total.io_errors, 0);
    cr_assert_leq(st.resident_peak, s.limit);
    cr_assert(pp__pool_is_valid(s.pool));
    for (int k = 0; k < CC_THREADS; k++)
        release_all(s.pool, a[k].ref, CC_PER);
    cr_assert_eq(STAT_TOTAL(s.pool, swap_used_bytes), 0);
    sw_close(&s);
}

Test(SW_SUITE, concurrent_round_trips_raw, .timeout = 60)
{
    concurrent_round_trips(0);
}

Test(SW_SUITE, concurrent_round_trips_compressed, .timeout = 60)
{
    concurrent_round_trips(PP_SWAP_COMPRESS);
}

/* ------------------------------------------------------------------------ */
/* 2. Clean entries are not rewritten                                        */
/* ------------------------------------------------------------------------ */

#define CL_N 8
#define CL_SIZE (64 * KiB + 1)

Test(SW_SUITE, clean_entries_are_not_rewritten, .timeout = 60)
{
    sw_t s;
    sw_open(&s, 1 * MiB, 0, 0, true);
    pp_ref_t ref[CL_N];
    unsigned ver[CL_N] = {0};
    for (size_t i = 0; i < CL_N; i++)
        ref[i] = put_flat(s.pool, CL_SIZE, NULL, &RANDOM, seed_of(i, 0), 0);
    assert_rc(sw_squeeze(&s, 0), 0);
    pp_stats_t s0, s1, s2;
    sw_stats(&s, &s0);
    cr_assert_eq(s0.total.evictions_written, CL_N);
    cr_assert_eq(s0.total.swap_bytes_written, (uint64_t)CL_N * CL_SIZE);

    /* Read pins: loaded, clean, with a valid copy; evicted without a write. */
    for (size_t i = 0; i < CL_N; i++) {
        pin_check(s.pool, ref[i], CL_SIZE, &RANDOM, seed_of(i, 0));
        unsigned state = test_stat(s.pool, ref[i]).state;
        cr_assert_eq(state & (PP_STATE_RESIDENT | PP_STATE_SWAPPED | PP_STATE_DIRTY),
                     PP_STATE_RESIDENT | PP_STATE_SWAPPED, "state 0x%x", state);
    }
    unsigned long writes0 = atomic_load(&s.fd->writes), wbytes0 = atomic_load(&s.fd->write_bytes);
    assert_rc(sw_squeeze(&s, 0), 0);
    sw_stats(&s, &s1);
    cr_assert_eq(s1.total.evictions_clean - s0.total.evictions_clean, CL_N);
    cr_assert_eq(s1.total.evictions_written, s0.total.evictions_written);
    cr_assert_eq(s1.total.swap_bytes_written, s0.total.swap_bytes_written);
    cr_assert_eq(atomic_load(&s.fd->writes), writes0, "a clean eviction wrote");
    cr_assert_eq(atomic_load(&s.fd->write_bytes), wbytes0);

    /* Write pins: entry 0 while swapped (its load takes the pin), entry 1
     * once resident.  Both are written again, the others are not. */
    pin_check(s.pool, ref[1], CL_SIZE, &RANDOM, seed_of(1, 0));
    for (size_t i = 0; i < 2; i++) {
        pin_rewrite(s.pool, ref[i], CL_SIZE, &RANDOM, seed_of(i, 0), seed_of(i, 1));
        ver[i] = 1;
        unsigned state = test_stat(s.pool, ref[i]).state;
        cr_assert(state & PP_STATE_DIRTY, "entry %zu: state 0x%x, not DIRTY", i, state);
    }
    for (size_t i = 2; i < CL_N; i++)
        pin_check(s.pool, ref[i], CL_SIZE, &RANDOM, seed_of(i, 0));
    assert_rc(sw_squeeze(&s, 0), 0);
    sw_stats(&s, &s2);
    cr_assert_eq(s2.total.evictions_written - s1.total.evictions_written, 2);
    cr_assert_eq(s2.total.evictions_clean - s1.total.evictions_clean, CL_N - 2);
    cr_assert_eq(s2.total.swap_bytes_written - s1.total.swap_bytes_written, 2 * CL_SIZE);
    cr_assert_eq(atomic_load(&s.fd->write_bytes) - wbytes0, 2 * dev_bytes(CL_SIZE));
    /* The stale copies were given back: one copy per entry. */
    cr_assert_eq(s2.total.swap_used_bytes, (uint64_t)CL_N * ((CL_SIZE + 4095) / 4096 * 4096));

    for (size_t i = 0; i < CL_N; i++)
        pin_check(s.pool, ref[i], CL_SIZE, &RANDOM, seed_of(i, ver[i]));
    release_all(s.pool, ref, CL_N);
    sw_close(&s);
}

/* pp_pin_many with PP_PIN_WRITE of swapped entries (loaded by the swap
 * threads, then pinned): they are dirty, so written again. */
Test(SW_SUITE, pin_many_write_makes_loaded_entries_dirty, .timeout = 60)
{
    sw_t s;
    sw_open(&s, 1 * MiB, 0, 0, false);
    enum { N = 3 };
    pp_ref_t ref[N];
    void *d[N];
    for (size_t i = 0; i < N; i++)
        ref[i] = put_flat(s.pool, CL_SIZE, NULL, &RANDOM, seed_of(i, 0), 0);
    assert_rc(sw_squeeze(&s, 0), 0);
    uint64_t written = STAT_TOTAL(s.pool, evictions_written);
    assert_rc(pp_pin_many(s.pool, ref, N, PP_PIN_WRITE, d), 0);
    bool ok = true;
    for (size_t i = 0; i < N; i++) {
        ok &= check_pattern(d[i], CL_SIZE, seed_of(i, 0));
        fill_pattern(d[i], CL_SIZE, seed_of(i, 1));
        cr_assert(test_stat(s.pool, ref[i]).state & PP_STATE_DIRTY);
    }
    assert_rc(pp_unpin_many(s.pool, ref, N, NULL), 0);
    cr_assert(ok, "pp_pin_many loaded wrong contents");
    assert_rc(sw_squeeze(&s, 0), 0);
    cr_assert_eq(STAT_TOTAL(s.pool, evictions_written) - written, N);
    for (size_t i = 0; i < N; i++)
        pin_check(s.pool, ref[i], CL_SIZE, &RANDOM, seed_of(i, 1));
    release_all(s.pool, ref, N);
    sw_close(&s);
}

/* ------------------------------------------------------------------------ */
/* 3. Corruption                                                             */
/* ------------------------------------------------------------------------ */

static const size_t cr_sizes[] = {3 * 4096 + 5, 20000, 2 * MiB + 4097};
#define CR_N (sizeof cr_sizes / sizeof cr_sizes[0])

static void corruption(unsigned flags, const content_t *c)
{
    sw_t s;
    sw_open(&s, 4 * MiB, 0, flags, false);
    pp_ref_t ref[CR_N];
    for (size_t i = 0; i < CR_N; i++)       /* one node: neighbours in one file */
        ref[i] = put_flat(s.pool, cr_sizes[i], NULL, c, seed_of(i, 0), PP_ON_NODE(0));
    assert_rc(sw_squeeze(&s, 0), 0);
    uint64_t fails = 0;
    /* The middle small entry, then the big one (raw: in its second chunk). */
    for (size_t v = 1; v < CR_N; v++) {
        uint64_t off = 0, len = 0, off2 = 0, len2 = 0;
        assert_rc(pp__debug_swap_where(s.pool, ref[v], &off, &len), 0);
        if (flags & PP_SWAP_COMPRESS)
            cr_assert_lt(len, cr_sizes[v], "the copy is not compressed");
        else
            cr_assert_eq(len, cr_sizes[v]);
        flip_byte(&s, ref[v], len / 2);
        pp_stats_t st;
        sw_stats(&s, &st);
        uint64_t reserved = st.resident_reserved;
        for (int k = 0; k < 2; k++) {
            void *d = (void *)1;
            assert_rc(pp_pin(s.pool, ref[v], 0, &d), PP_ECORRUPT);
            fails++;
        }
        sw_stats(&s, &st);
        cr_assert_eq(st.total.checksum_failures, fails);
        cr_assert_eq(test_node(s.pool, 0).checksum_failures, fails);
        cr_assert_eq(st.resident_reserved, reserved, "a failed load kept its reservation");
        /* Still alive, still on disk, same copy. */
        pp_entry_info_t info = test_stat(s.pool, ref[v]);
        cr_assert_eq(info.owners, 1);
        cr_assert_eq(info.pins, 0);
        assert_swapped(&s, ref[v], "after PP_ECORRUPT");
        assert_rc(pp__debug_swap_where(s.pool, ref[v], &off2, &len2), 0);
        cr_assert(off2 == off && len2 == len);
        /* The others are not affected. */
        for (size_t i = 0; i < CR_N; i++) {
            if (i != v)
                pin_check(s.pool, ref[i], cr_sizes[i], c, seed_of(i, 0));
        }
        /* Repaired: loads with the right contents. */
        flip_byte(&s, ref[v], len / 2);
        pin_check(s.pool, ref[v], cr_sizes[v], c, seed_of(v, 0));
        assert_rc(sw_squeeze(&s, 0), 0);
    }
    cr_assert(report_has(&s.rep, 0, "checksum", NULL, NULL));
    cr_assert_eq(STAT_TOTAL(s.pool, io_errors), 0);
    cr_assert(pp__pool_is_valid(s.pool));
    release_all(s.pool, ref, CR_N);
    sw_close(&s);
}

Test(SW_SUITE, corrupt_copy_is_ecorrupt_raw, .timeout = 60)
{
    corruption(0, &RANDOM);
}

Test(SW_SUITE, corrupt_copy_is_ecorrupt_compressed, .timeout = 60)
{
    corruption(PP_SWAP_COMPRESS, &RUNS);
}

/* A type's load is never handed bytes that failed their checksum. */
Test(SW_SUITE, corrupt_copy_never_reaches_load, .timeout = 60)
{
    sw_t s;
    sw_open(&s, 1 * MiB, 0, 0, false);
    bt_t *bt = bt_new(&RANDOM);
    pp_ref_t ref = blob_put(s.pool, bt, 50000, 11);
    assert_rc(sw_squeeze(&s, 0), 0);
    uint64_t off, len;
    assert_rc(pp__debug_swap_where(s.pool, ref, &off, &len), 0);
    flip_byte(&s, ref, len - 1);
    assert_rc(pp_pin(s.pool, ref, 0, NULL), PP_ECORRUPT);
    cr_assert_eq(atomic_load(&bt->load_calls), 0, "load ran on a corrupt copy");
    cr_assert_eq(STAT_TOTAL(s.pool, checksum_failures), 1);
    assert_swapped(&s, ref, "after PP_ECORRUPT");
    flip_byte(&s, ref, len - 1);
    blob_pin_check(s.pool, bt, ref, 50000, 11);
    BT_OK(bt);
    release_all(s.pool, &ref, 1);
    sw_close(&s);
    free(bt);
}

/* Pins of a corrupt copy, again and again (a remote rank's pins can do
 * that): each is PP_ECORRUPT and counted, but reported only the 1st, 2nd,
 * 4th, 8th... time on the node, with the count in the line. */
Test(SW_SUITE, corrupt_copy_pinned_again_and_again_is_reported_at_powers_of_two,
     .timeout = 60)
{
    sw_t s;
    sw_open(&s, 1 * MiB, 0, 0, false);
    pp_ref_t ref = put_flat(s.pool, 70000, NULL, &RANDOM, seed_of(0, 0), 0);
    assert_rc(sw_squeeze(&s, 0), 0);
    flip_byte(&s, ref, 4321);
    size_t before = report_cap_count(&s.rep);
    for (int k = 0; k < 20; k++)
        assert_rc(pp_pin(s.pool, ref, 0, NULL), PP_ECORRUPT);
    cr_assert_eq(STAT_TOTAL(s.pool, checksum_failures), 20);
    size_t lines = report_cap_count(&s.rep) - before;
    cr_assert_eq(lines, 5, "20 failures reported %zu times (1, 2, 4, 8, 16: 5)", lines);
    cr_assert(report_has(&s.rep, before, "checksum failure 16 on this node", NULL, NULL),
              "%s", report_dump(&s.rep));
    flip_byte(&s, ref, 4321);
    pin_check(s.pool, ref, 70000, &RANDOM, seed_of(0, 0));
    release_all(s.pool, &ref, 1);
    sw_close(&s);
}

static unsigned state_of(pp_pool_t *pool, pp_ref_t ref)
{
    pp_entry_info_t info;
    memset(&info, 0, sizeof info);
    return pp_stat(pool, ref, &info) == 0 ? info.state : 0xffffffffu;
}

/* The swap thread's loads (pp_prefetch, PP_PIN_NOWAIT) check the copy the
 * same way: a corrupt one is counted, never made resident, and kept. */
Test(SW_SUITE, prefetch_of_a_corrupt_copy_keeps_it, .timeout = 60)
{
    sw_t s;
    sw_open(&s, 1 * MiB, 0, 0, false);
    pp_ref_t ref = put_flat(s.pool, 70000, NULL, &RANDOM, seed_of(0, 0), 0);
    assert_rc(sw_squeeze(&s, 0), 0);
    flip_byte(&s, ref, 12345);
    assert_rc(pp_prefetch(s.pool, ref), 0);
    cr_assert(WAIT_UNTIL(STAT_TOTAL(s.pool, checksum_failures) == 1 &&
                             !(state_of(s.pool, ref) & PP_STATE_LOADING),
                         TEST_WAIT_MS),
              "the prefetch did not end (state 0x%x)", state_of(s.pool, ref));
    assert_swapped(&s, ref, "after a corrupt prefetch");
    assert_rc(pp_pin(s.pool, ref, PP_PIN_NOWAIT, NULL), PP_EAGAIN);
    cr_assert(WAIT_UNTIL(STAT_TOTAL(s.pool, checksum_failures) == 2 &&
                             !(state_of(s.pool, ref) & PP_STATE_LOADING),
                         TEST_WAIT_MS));
    assert_rc(pp_pin(s.pool, ref, 0, NULL), PP_ECORRUPT);
    cr_assert_eq(STAT_TOTAL(s.pool, checksum_failures), 3);
    assert_swapped(&s, ref, "after PP_ECORRUPT");
    /* Repaired: the swap thread loads it. */
    flip_byte(&s, ref, 12345);
    assert_rc(pp_prefetch(s.pool, ref), 0);
    cr_assert(WAIT_UNTIL(state_of(s.pool, ref) & PP_STATE_RESIDENT, TEST_WAIT_MS));
    void *d = NULL;
    assert_rc(pp_pin(s.pool, ref, PP_PIN_NOWAIT, &d), 0);
    bool ok = check_pattern(d, 70000, seed_of(0, 0));
    assert_rc(pp_unpin(s.pool, ref), 0);
    cr_assert(ok);
    cr_assert_eq(STAT_TOTAL(s.pool, checksum_failures), 3);
    release_all(s.pool, &ref, 1);
    sw_close(&s);
}
