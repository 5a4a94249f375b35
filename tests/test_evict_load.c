/*
 * test_evict_load.c -- evict suite: loads of swapped entries, shared by
 * concurrent pins, and PP_PIN_NOWAIT, pp_prefetch and pp_pin_many, which
 * never block.
 */
#include "test_evict.h"

/* ======================================================================== */
/* 4. Loading                                                                */
/* ======================================================================== */

/* A pin of a swapped entry loads it, on the pinning thread, with its
 * bytes; flat and save/load entries, sizes not a multiple of a page. */
Test(evict, pin_loads_swapped_entry, .timeout = 60)
{
    pp_pool_t *pool = ev_pool(SMALL_LIMIT, NULL, NULL);
    sw_t *sw = sw_new(4);
    const size_t size[4] = {sizeof(ct_hdr_t), 1000, PAGE + 17, 3 * PAGE - 5};
    pp_ref_t refs[4];
    for (size_t id = 0; id < 4; id++)
        refs[id] = id % 2 ? put_sw(pool, sw, id, size[id], 0)
                          : put_flat(pool, id, size[id], 0, NULL);
    swap_out(pool, 0, refs, 4);
    cr_assert_eq(test_reserved(pool), 0, "nothing is resident after swap_out");
    uint64_t loads0 = STAT_TOTAL(pool, loads);
    for (size_t id = 0; id < 4; id++) {
        void *d = NULL;
        assert_rc(pp_pin(pool, refs[id], 0, &d), 0);
        cr_assert(buf_check(d, id, size[id], ct_seed(id)), "entry %zu: wrong bytes", id);
        pp_entry_info_t info = test_stat(pool, refs[id]);
        cr_assert(info.state & PP_STATE_RESIDENT);
        cr_assert_eq(info.pins, 1);
    }
    cr_assert_eq(STAT_TOTAL(pool, loads), loads0 + 4);
    cr_assert_eq(test_reserved(pool), size[0] + size[1] + size[2] + size[3]);
    for (size_t id = 1; id < 4; id += 2) {
        cr_assert_eq(atomic_load(&sw->loads[id]), 1);
        cr_assert_eq(atomic_load(&sw->load_tid[id]), my_tid(), "not loaded on the pinning thread");
    }
    for (size_t id = 0; id < 4; id++)
        assert_rc(pp_unpin(pool, refs[id]), 0);
    ev_finish(pool, refs, 4);
    sw_check_delete(sw, 4);
}

#define SL_PINNERS 4

/* Several threads pin the same swapped entry while its load is frozen in
 * the device read: one load, the others wait for it, all get its bytes. */
Test(evict, concurrent_pins_share_one_load, .timeout = 60)
{
    faultdev_t *f;
    pp_pool_t *pool = ev_pool(SMALL_LIMIT, NULL, &f);
    sw_t *sw = sw_new(1);
    pp_ref_t x = put_sw(pool, sw, 0, 2 * PAGE, 0);
    swap_out(pool, 0, &x, 1);
    pp_stats_t *s0 = test_stats_new(pool);

    faultdev_gate_close(f, true, false);
    call_t c[SL_PINNERS];
    pthread_t th[SL_PINNERS];
    for (int k = 0; k < SL_PINNERS; k++)
        call_start(&c[k], &th[k], pool, f, x, CALL_PIN, 0);
    faultdev_wait_blocked(f, 1);            /* the first pinner's load */
    cr_assert(state_of(pool, x) & PP_STATE_LOADING);
    cr_assert(WAIT_UNTIL(STAT_TOTAL(pool, load_waits) >= s0->total.load_waits + SL_PINNERS - 1,
                         TEST_WAIT_MS),
              "the other pinners never waited for the load");
    cr_assert_eq(faultdev_blocked(f), 1, "more than one load of the entry");
    faultdev_gate_open(f);
    for (int k = 0; k < SL_PINNERS; k++) {
        test_thread_join(th[k]);
        assert_rc(c[k].rc, 0);
        cr_assert_eq(c[k].data, c[0].data, "pinners got different pointers");
        sig_destroy(&c[k].done);
    }
    cr_assert(buf_check(c[0].data, 0, 2 * PAGE, ct_seed(0)));
    pp_stats_t *s1 = test_stats_new(pool);
    cr_assert_eq(s1->total.loads, s0->total.loads + 1, "loads %" PRIu64 " -> %" PRIu64,
                 s0->total.loads, s1->total.loads);
    cr_assert_geq(s1->total.load_waits, s0->total.load_waits + SL_PINNERS - 1);
    cr_assert_eq(atomic_load(&sw->loads[0]), 1);
    cr_assert_eq(test_stat(pool, x).pins, SL_PINNERS);
    free(s0);
    free(s1);
    for (int k = 0; k < SL_PINNERS; k++)
        assert_rc(pp_unpin(pool, x), 0);
    ev_finish(pool, &x, 1);
    sw_check_delete(sw, 1);
}

/* ======================================================================== */
/* 5. PP_PIN_NOWAIT, pp_prefetch and pp_pin_many never block                 */
/* ======================================================================== */

/* The device's busy time (pp_node_stats_t.swap_write_ns, swap_read_ns) is
 * the time a request is with the device, not the CPU time of a call: a
 * read held at the device's gate is busy all the while, a stats call
 * during it counts the time so far, and the count stops when the read
 * comes back.  A pool that has not swapped has both at 0; neither can
 * exceed the pool's age. */
Test(evict, swap_busy_time_counts_requests_in_flight, .timeout = 60)
{
    uint64_t born = now_ns();
    faultdev_t *f;
    pp_pool_t *pool = ev_pool(SMALL_LIMIT, NULL, &f);
    cr_assert_eq(STAT_TOTAL(pool, swap_write_ns), 0);
    cr_assert_eq(STAT_TOTAL(pool, swap_read_ns), 0);
    sw_t *sw = sw_new(1);
    pp_ref_t x = put_sw(pool, sw, 0, PAGE, 0);
    swap_out(pool, 0, &x, 1);
    cr_assert_gt(STAT_NODE(pool, 0, swap_bytes_written), 0);
    cr_assert_gt(STAT_NODE(pool, 0, swap_write_ns), 0, "a write took no time");
    cr_assert_eq(STAT_NODE(pool, 0, swap_read_ns), 0);

    faultdev_gate_close(f, true, false);
    void *d = NULL;
    assert_rc(pp_pin(pool, x, PP_PIN_NOWAIT, &d), PP_EAGAIN);
    faultdev_wait_blocked(f, 1);             /* the load's read is with the device */
    uint64_t r0 = STAT_NODE(pool, 0, swap_read_ns);
    uint64_t ta = now_ns();
    uint64_t t1 = ta;
    while (t1 - ta < 2000000)                /* an interval of 2 ms to count */
        t1 = now_ns();
    uint64_t r1 = STAT_NODE(pool, 0, swap_read_ns);
    cr_assert_geq(r1 - r0, t1 - ta, "a held read counted %" PRIu64 " ns of the %" PRIu64
                  " it was held", r1 - r0, t1 - ta);
    faultdev_gate_open(f);
    assert_rc(pp_pin(pool, x, 0, &d), 0);     /* waits for that load */
    assert_rc(pp_unpin(pool, x), 0);
    uint64_t r2 = STAT_NODE(pool, 0, swap_read_ns);
    cr_assert_geq(r2, r1);
    uint64_t tb = now_ns();
    while (now_ns() - tb < 2000000)          /* nothing is read meanwhile */
        ;
    cr_assert_eq(STAT_NODE(pool, 0, swap_read_ns), r2, "the count went on after the read");
    pp_stats_t *s = test_stats_new(pool);
    uint64_t age = now_ns() - born;
    cr_assert_leq(s->total.swap_read_ns, age);
    cr_assert_leq(s->total.swap_write_ns, age);
    cr_assert_eq(s->total.swap_read_ns, r2, "total is node 0's (the only one with I/O)");
    free(s);
    ev_finish(pool, &x, 1);
    sw_check_delete(sw, 1);
}

/* The timeline trace of one entry's trip out and back (trace.c): its
 * write-back, the flow from the NOWAIT pin that queued its load to the
 * swap thread's load, the load, and the wait of a pin for that load, each
 * with the entry's ref; the tracks they are on are named. */
static bool has(const char *s, const char *a, const char *b)
{
    for (const char *p = strstr(s, a); p != NULL; p = strstr(p + 1, a)) {
        const char *eol = strchr(p, '\n');
        size_t n = eol != NULL ? (size_t)(eol - p) : strlen(p);
        const char *q = strstr(p, b);
        if (q != NULL && (size_t)(q - p) < n)
            return true;
    }
    return false;
}

Test(evict, trace_of_a_write_back_and_a_queued_load, .timeout = 60)
{
    faultdev_t *f;
    pp_pool_t *pool = ev_pool(SMALL_LIMIT, NULL, &f);
    char path[512];
    snprintf(path, sizeof path, "%s/pinpool-trace-%d.json", test_swap_parent(), (int)getpid());
    assert_rc(pp_trace_start(pool, path, 0), 0);
    sw_t *sw = sw_new(1);
    pp_ref_t x = put_sw(pool, sw, 0, PAGE, 0);
    swap_out(pool, 0, &x, 1);
    faultdev_gate_close(f, true, false);
    void *d = NULL;
    assert_rc(pp_pin(pool, x, PP_PIN_NOWAIT, &d), PP_EAGAIN);   /* queued */
    faultdev_wait_blocked(f, 1);
    call_t c;
    pthread_t th;
    call_start(&c, &th, pool, f, x, CALL_PIN, 0);   /* waits for that load */
    cr_assert(WAIT_UNTIL(STAT_TOTAL(pool, load_waits) == 1, TEST_WAIT_MS));
    faultdev_gate_open(f);
    pthread_join(th, NULL);
    sig_destroy(&c.done);
    assert_rc(c.rc, 0);
    assert_rc(pp_unpin(pool, x), 0);
    assert_rc(pp_trace_stop(pool), 0);

    FILE *in = fopen(path, "r");
    cr_assert_not_null(in);
    static char s[1 << 20];
    size_t n = fread(s, 1, sizeof s - 1, in);
    s[n] = '\0';
    fclose(in);
    char ref[40];
    snprintf(ref, sizeof ref, "0x%016" PRIx64, x);
    cr_assert(has(s, "\"name\":\"write-back\"", ref), "no write-back of %s", ref);
    cr_assert(has(s, "\"name\":\"load\",\"cat\":\"swap\",\"ph\":\"X\"", ref), "no load of %s", ref);
    cr_assert(has(s, "\"ph\":\"s\"", ref), "no flow start for %s", ref);
    cr_assert(has(s, "\"ph\":\"f\"", ref), "no flow end for %s", ref);
    cr_assert(has(s, "\"name\":\"wait for load\"", ref), "no wait for the load of %s", ref);
    cr_assert(has(s, "\"name\":\"load\",\"cat\":\"swap\",\"ph\":\"X\"", "\"result\":\"PP_OK\""));
    cr_assert_not_null(strstr(s, "pinpool swap node 0"), "the swap thread's track is unnamed");
    cr_assert_not_null(strstr(s, "user thread (tid"), "no user thread's track");
    cr_assert_not_null(strstr(s, "\"otherData\":{\"events_dropped\":\"0\"}"));
    unlink(path);
    ev_finish(pool, &x, 1);
    sw_check_delete(sw, 1);
}

Test(evict, nowait_pin_starts_load_and_never_blocks, .timeout = 60)
{
    faultdev_t *f;
    pp_pool_t *pool = ev_pool(SMALL_LIMIT, NULL, &f);
    sw_t *sw = sw_new(1);
    pp_ref_t x = put_sw(pool, sw, 0, PAGE, 0);
    swap_out(pool, 0, &x, 1);
    uint64_t loads0 = STAT_TOTAL(pool, loads);

    /* With reads frozen no load can finish: every call below returns only
     * because it does not wait. */
    faultdev_gate_close(f, true, false);
    void *d = NULL;
    assert_rc(pp_pin(pool, x, PP_PIN_NOWAIT, &d), PP_EAGAIN);
    faultdev_wait_blocked(f, 1);            /* the load runs, not on this thread */
    pp_entry_info_t info = test_stat(pool, x);
    cr_assert_eq(info.state & (PP_STATE_RESIDENT | PP_STATE_LOADING), PP_STATE_LOADING);
    cr_assert_eq(info.pins, 0);
    assert_rc(pp_pin(pool, x, PP_PIN_NOWAIT, &d), PP_EAGAIN);
    assert_rc(pp_pin(pool, x, PP_PIN_NOWAIT | PP_PIN_WRITE, &d), PP_EAGAIN);
    assert_rc(pp_prefetch(pool, x), 0);
    cr_assert_eq(test_stat(pool, x).pins, 0);
    cr_assert_eq(faultdev_blocked(f), 1, "a second load of the entry started");

    faultdev_gate_open(f);
    /* A waiting pin: it waits for the load in progress, never starts its own. */
    assert_rc(pp_pin(pool, x, 0, &d), 0);
    cr_assert(buf_check(d, 0, PAGE, ct_seed(0)));
    cr_assert_eq(STAT_TOTAL(pool, loads), loads0 + 1);
    cr_assert_eq(atomic_load(&sw->loads[0]), 1);
    cr_assert_neq(atomic_load(&sw->load_tid[0]), my_tid(), "a NOWAIT load ran on the caller");
    /* Resident now: NOWAIT pins succeed. */
    void *d2 = NULL;
    assert_rc(pp_pin(pool, x, PP_PIN_NOWAIT, &d2), 0);
    cr_assert_eq(d2, d);
    assert_rc(pp_unpin(pool, x), 0);
    assert_rc(pp_unpin(pool, x), 0);
    ev_finish(pool, &x, 1);
    sw_check_delete(sw, 1);
}

Test(evict, prefetch_never_blocks_and_loads, .timeout = 60)
{
    faultdev_t *f;
    pp_pool_t *pool = ev_pool(SMALL_LIMIT, NULL, &f);
    sw_t *sw = sw_new(1);
    pp_ref_t x = put_sw(pool, sw, 0, PAGE, 0);
    swap_out(pool, 0, &x, 1);
    pp_stats_t *s0 = test_stats_new(pool);

    faultdev_gate_close(f, true, false);
    assert_rc(pp_prefetch(pool, x), 0);
    faultdev_wait_blocked(f, 1);
    cr_assert(state_of(pool, x) & PP_STATE_LOADING);
    assert_rc(pp_prefetch(pool, x), 0);     /* already loading: nothing more */
    cr_assert_eq(faultdev_blocked(f), 1);
    faultdev_gate_open(f);

    /* The swap thread finishes the load by itself: no pin waits for it. */
    cr_assert(WAIT_UNTIL(state_of(pool, x) & PP_STATE_RESIDENT, TEST_WAIT_MS),
              "the prefetched entry never became resident");
    void *d = NULL;
    assert_rc(pp_pin(pool, x, PP_PIN_NOWAIT, &d), 0);
    cr_assert(buf_check(d, 0, PAGE, ct_seed(0)));
    pp_stats_t *s1 = test_stats_new(pool);
    cr_assert_eq(s1->total.loads, s0->total.loads + 1);
    cr_assert_eq(s1->total.load_waits, s0->total.load_waits);
    cr_assert_neq(atomic_load(&sw->load_tid[0]), my_tid());
    assert_rc(pp_prefetch(pool, x), 0);     /* resident: nothing to do */
    free(s0);
    free(s1);
    assert_rc(pp_unpin(pool, x), 0);
    /* Dead: stale. */
    assert_rc(pp_release(pool, x), 0);
    assert_rc(pp_prefetch(pool, x), PP_ESTALE);
    ev_finish(pool, NULL, 0);
    sw_check_delete(sw, 1);
}

/* pp_pin_many: with NOWAIT and a swapped entry among resident ones, all or
 * none -- PP_EAGAIN and no pin held; without NOWAIT, all pinned. */
Test(evict, pin_many_nowait_all_or_none, .timeout = 60)
{
    faultdev_t *f;
    pp_pool_t *pool = ev_pool(SMALL_LIMIT, NULL, &f);
    sw_t *sw = sw_new(4);
    pp_ref_t refs[4];
    refs[1] = put_sw(pool, sw, 1, PAGE, 0);
    refs[3] = put_flat(pool, 3, PAGE, 0, NULL);
    pp_ref_t swapped[2] = {refs[1], refs[3]};
    swap_out(pool, 0, swapped, 2);
    refs[0] = put_sw(pool, sw, 0, PAGE, 0);
    refs[2] = put_flat(pool, 2, PAGE, 0, NULL);
    cr_assert(state_of(pool, refs[0]) & PP_STATE_RESIDENT);
    cr_assert(state_of(pool, refs[2]) & PP_STATE_RESIDENT);
    uint64_t loads0 = STAT_TOTAL(pool, loads);

    faultdev_gate_close(f, true, false);
    void *d[4] = {NULL};
    assert_rc(pp_pin_many(pool, refs, 4, PP_PIN_NOWAIT, d), PP_EAGAIN);
    for (size_t i = 0; i < 4; i++)
        cr_assert_eq(test_stat(pool, refs[i]).pins, 0, "entry %zu kept a pin", i);
    faultdev_wait_blocked(f, 1);            /* a load was started */
    assert_rc(pp_pin_many(pool, refs, 4, PP_PIN_NOWAIT | PP_PIN_WRITE, d), PP_EAGAIN);
    for (size_t i = 0; i < 4; i++) {
        pp_entry_info_t info = test_stat(pool, refs[i]);
        cr_assert_eq(info.pins, 0, "entry %zu kept a pin", i);
        cr_assert_not(info.state & PP_STATE_DIRTY, "a failed pin_many marked %zu dirty", i);
    }
    faultdev_gate_open(f);

    assert_rc(pp_pin_many(pool, refs, 4, 0, d), 0);
    for (size_t i = 0; i < 4; i++) {
        cr_assert(buf_check(d[i], i, PAGE, ct_seed(i)), "entry %zu: wrong bytes", i);
        cr_assert_eq(test_stat(pool, refs[i]).pins, 1);
    }
    cr_assert_eq(STAT_TOTAL(pool, loads), loads0 + 2);
    assert_rc(pp_unpin_many(pool, refs, 4, NULL), 0);
    ev_finish(pool, refs, 4);
    sw_check_delete(sw, 4);
}
