/*
 * test_evict_race.c -- evict suite: a pin or a get racing an eviction
 * always wins, entries that die during I/O are reclaimed once, and
 * re-eviction drops clean entries and rewrites dirty ones.
 */
#include "test_evict.h"

/* ======================================================================== */
/* 3. A pin always wins                                                      */
/* ======================================================================== */

/* A read pin of an entry whose write-out is frozen returns at once; the
 * eviction is abandoned and the entry stays where it was. */
Test(evict, pin_wins_over_eviction_in_progress, .timeout = 60)
{
    faultdev_t *f;
    pp_pool_t *pool = ev_pool(SMALL_LIMIT, NULL, &f);
    pp_ref_t refs[16];
    void *bufs[16];
    size_t x = freeze_eviction(pool, f, refs, bufs);
    uint64_t abandoned0 = STAT_TOTAL(pool, evictions_abandoned);

    void *d = NULL;
    assert_rc(pp_pin(pool, refs[x], 0, &d), 0);   /* on this thread: it did not wait */
    cr_assert_eq(d, bufs[x]);
    cr_assert_eq(faultdev_blocked(f), 1, "the write is no longer blocked");
    pp_entry_info_t info = test_stat(pool, refs[x]);
    cr_assert_eq(info.pins, 1);
    cr_assert(info.state & PP_STATE_EVICTING);

    faultdev_gate_open(f);
    cr_assert(WAIT_UNTIL(!(state_of(pool, refs[x]) & PP_STATE_EVICTING), TEST_WAIT_MS));
    cr_assert_gt(STAT_TOTAL(pool, evictions_abandoned), abandoned0);
    info = test_stat(pool, refs[x]);
    cr_assert(info.state & PP_STATE_RESIDENT, "state 0x%x", info.state);
    cr_assert_eq(info.pins, 1);
    void *d2 = NULL;
    assert_rc(pp_pin(pool, refs[x], PP_PIN_NOWAIT, &d2), 0);
    cr_assert_eq(d2, bufs[x], "the pinned entry moved");
    cr_assert(buf_check(d2, x, PAGE, ct_seed(x)));
    assert_rc(pp_unpin(pool, refs[x]), 0);
    assert_rc(pp_unpin(pool, refs[x]), 0);
    ev_finish(pool, refs, 16);
}

/* A read pin taken and dropped again while the write-out is frozen still
 * wins: the entry was used, so the eviction is abandoned and the data
 * stays where it is (the claim clears the recency bit; the pin sets it). */
Test(evict, pin_and_unpin_during_eviction_keeps_entry, .timeout = 60)
{
    faultdev_t *f;
    pp_pool_t *pool = ev_pool(SMALL_LIMIT, NULL, &f);
    pp_ref_t refs[16];
    void *bufs[16];
    size_t x = freeze_eviction(pool, f, refs, bufs);
    uint64_t abandoned0 = STAT_TOTAL(pool, evictions_abandoned);

    void *d = NULL;
    assert_rc(pp_pin(pool, refs[x], 0, &d), 0);
    cr_assert_eq(d, bufs[x]);
    cr_assert(buf_check(d, x, PAGE, ct_seed(x)));
    assert_rc(pp_unpin(pool, refs[x]), 0);
    pp_entry_info_t info = test_stat(pool, refs[x]);
    cr_assert_eq(info.pins, 0);
    cr_assert(info.state & PP_STATE_EVICTING, "state 0x%x", info.state);

    faultdev_gate_open(f);
    cr_assert(WAIT_UNTIL(!(state_of(pool, refs[x]) & PP_STATE_EVICTING), TEST_WAIT_MS));
    cr_assert_gt(STAT_TOTAL(pool, evictions_abandoned), abandoned0);
    info = test_stat(pool, refs[x]);
    cr_assert(info.state & PP_STATE_RESIDENT, "state 0x%x", info.state);
    void *d2 = NULL;
    assert_rc(pp_pin(pool, refs[x], PP_PIN_NOWAIT, &d2), 0);
    cr_assert_eq(d2, bufs[x], "the entry was evicted though it was pinned during its write-out");
    cr_assert(buf_check(d2, x, PAGE, ct_seed(x)));
    assert_rc(pp_unpin(pool, refs[x]), 0);
    ev_finish(pool, refs, 16);
}

/* A write pin of an entry whose write-out is frozen is counted at once but
 * returns only once the swap thread has stopped reading the bytes; then
 * the entry is dirty, and what is written under that pin is what a later
 * eviction writes out. */
Test(evict, write_pin_waits_for_writer_then_wins, .timeout = 60)
{
    faultdev_t *f;
    pp_pool_t *pool = ev_pool(SMALL_LIMIT, NULL, &f);
    pp_ref_t refs[16];
    void *bufs[16];
    size_t x = freeze_eviction(pool, f, refs, bufs);
    uint64_t abandoned0 = STAT_TOTAL(pool, evictions_abandoned);

    call_t c;
    pthread_t th;
    call_start(&c, &th, pool, f, refs[x], CALL_PIN, PP_PIN_WRITE);
    /* The pin is taken (counted, dirty) while the write is still blocked... */
    cr_assert(WAIT_UNTIL(test_stat(pool, refs[x]).pins == 1, TEST_WAIT_MS),
              "the write pin was never counted");
    pp_entry_info_t info = test_stat(pool, refs[x]);
    cr_assert(info.state & PP_STATE_EVICTING);
    /* ...but the call has not returned: the swap thread still reads. */
    cr_assert_not(call_returned(&c), "the write pin returned while the bytes were being written");
    cr_assert_eq(faultdev_blocked(f), 1);

    faultdev_gate_open(f);
    test_thread_join(th);
    assert_rc(c.rc, 0);
    cr_assert_not(c.gate_closed_at_return, "returned while the write was blocked");
    cr_assert_eq(c.data, bufs[x]);
    info = test_stat(pool, refs[x]);
    cr_assert_eq(info.state & (PP_STATE_RESIDENT | PP_STATE_DIRTY | PP_STATE_EVICTING),
                 PP_STATE_RESIDENT | PP_STATE_DIRTY, "state 0x%x", info.state);
    cr_assert_eq(info.pins, 1);
    cr_assert_gt(STAT_TOTAL(pool, evictions_abandoned), abandoned0);
    cr_assert(buf_check(c.data, x, PAGE, ct_seed(x)));

    /* Write a new version under the pin; evicted again and reloaded, the
     * entry has it (the abandoned write's copy was not taken as valid). */
    buf_fill(c.data, x, PAGE, ct_seed(x) + 1);
    assert_rc(pp_unpin(pool, refs[x]), 0);
    swap_out(pool, 0, &refs[x], 1);
    void *d = NULL;
    assert_rc(pp_pin(pool, refs[x], 0, &d), 0);
    cr_assert(buf_check(d, x, PAGE, ct_seed(x) + 1), "the write made under the pin was lost");
    assert_rc(pp_unpin(pool, refs[x]), 0);
    sig_destroy(&c.done);
    ev_finish(pool, refs, 16);
}

/* PP_PIN_NOWAIT never waits -- not even a write pin for an eviction's
 * device write.  (It may fail with PP_EAGAIN and no pin; it must not block,
 * and it must not pin for write while the swap thread reads the bytes.) */
static void nowait_write_never_waits(enum call_kind kind)
{
    faultdev_t *f;
    pp_pool_t *pool = ev_pool(SMALL_LIMIT, NULL, &f);
    pp_ref_t refs[16];
    void *bufs[16];
    size_t x = freeze_eviction(pool, f, refs, bufs);

    call_t c;
    pthread_t th;
    call_start(&c, &th, pool, f, refs[x], kind, PP_PIN_WRITE | PP_PIN_NOWAIT);
    bool returned = sig_wait(&c.done, 1);      /* bounded: a hang fails */
    pp_entry_info_t info = test_stat(pool, refs[x]);
    faultdev_gate_open(f);
    test_thread_join(th);
    cr_assert(returned, "%s(PP_PIN_WRITE|PP_PIN_NOWAIT) blocked until the eviction's write "
                        "ended (%s once the gate opened)",
              kind == CALL_PIN ? "pp_pin" : "pp_pin_many", pp_err_name(c.rc));
    cr_assert_neq(c.rc, 0, "PP_PIN_WRITE|PP_PIN_NOWAIT pinned for write while the swap "
                           "thread read the bytes (pins %u, state 0x%x)", info.pins, info.state);
    assert_rc(c.rc, PP_EAGAIN);
    cr_assert_eq(info.pins, 0, "the failed NOWAIT pin left a pin");
    sig_destroy(&c.done);
    ev_finish(pool, refs, 16);
}

Test(evict, nowait_write_pin_never_waits_for_eviction, .timeout = 60)
{
    nowait_write_never_waits(CALL_PIN);
}

Test(evict, nowait_write_pin_many_never_waits_for_eviction, .timeout = 60)
{
    nowait_write_never_waits(CALL_PIN_MANY);
}

/* A pin that arrives during a long write-out stops it within one chunk
 * (1 MiB): the rest of the entry is never written, no copy is kept. */
#define LW_CHUNK ((size_t)1 << 20)
#define LW_LIMIT (4 * LW_CHUNK)

Test(evict, pin_stops_long_write_within_one_chunk, .timeout = 60)
{
    faultdev_t *f;
    pp_pool_t *pool = ev_pool(LW_LIMIT, NULL, &f);
    pp_ref_t refs[2];
    void *big = NULL;
    faultdev_gate_close(f, false, true);
    refs[0] = put_flat(pool, 0, 3 * LW_CHUNK, 0, &big);      /* under 15/16 */
    refs[1] = put_flat(pool, 1, LW_CHUNK, 0, NULL);          /* crosses it, fits */
    faultdev_wait_blocked(f, 1);
    cr_assert(state_of(pool, refs[0]) & PP_STATE_EVICTING, "CLOCK from slot 0: the big one first");
    void *d = NULL;
    assert_rc(pp_pin(pool, refs[0], 0, &d), 0);
    cr_assert_eq(d, big);
    faultdev_gate_open(f);

    /* The swap thread gives the big entry up and evicts the other one. */
    cr_assert(WAIT_UNTIL(!(state_of(pool, refs[0]) & PP_STATE_EVICTING) &&
                             test_reserved(pool) <= LOW_WM(LW_LIMIT),
                         TEST_WAIT_MS));
    unsigned st = state_of(pool, refs[0]);
    cr_assert_eq(st & (PP_STATE_RESIDENT | PP_STATE_SWAPPED), PP_STATE_RESIDENT,
                 "state 0x%x: a copy was kept of a write that was stopped", st);
    unsigned long written = atomic_load(&f->write_bytes);
    cr_assert_leq(written, 2 * LW_CHUNK, "%lu bytes written: the big entry's write went on "
                                         "after its pin", written);
    pp_stats_t *s = test_stats_new(pool);
    cr_assert_geq(s->total.evictions_abandoned, 1);
    cr_assert_eq(s->total.swap_used_bytes, LW_CHUNK, "the stopped write's space was kept");
    free(s);
    cr_assert(buf_check(d, 0, 3 * LW_CHUNK, ct_seed(0)));
    assert_rc(pp_unpin(pool, refs[0]), 0);
    ev_finish(pool, refs, 2);
}

/* pp_get during an eviction wins too: the entry is escaped, stays where it
 * was, and is never evicted afterwards. */
Test(evict, get_during_eviction_escapes_for_good, .timeout = 60)
{
    faultdev_t *f;
    pp_pool_t *pool = ev_pool(SMALL_LIMIT, NULL, &f);
    pp_ref_t refs[16 + 64];
    void *bufs[16];
    size_t x = freeze_eviction(pool, f, refs, bufs);
    uint64_t abandoned0 = STAT_TOTAL(pool, evictions_abandoned);

    call_t c;
    pthread_t th;
    call_start(&c, &th, pool, f, refs[x], CALL_GET, 0);
    cr_assert(WAIT_UNTIL(state_of(pool, refs[x]) & PP_STATE_ESCAPED, TEST_WAIT_MS),
              "pp_get never marked the entry escaped");
    faultdev_gate_open(f);
    test_thread_join(th);
    assert_rc(c.rc, 0);
    cr_assert_eq(c.data, bufs[x]);
    cr_assert(WAIT_UNTIL(!(state_of(pool, refs[x]) & PP_STATE_EVICTING), TEST_WAIT_MS));
    cr_assert_gt(STAT_TOTAL(pool, evictions_abandoned), abandoned0);

    /* Four limits' worth of new entries, each released once swapped out
     * (so the CLOCK hand keeps coming round): the escaped one is never
     * claimed again, never moves. */
    uint64_t ev0 = STAT_TOTAL(pool, evictions_written);
    for (size_t i = 16; i < 16 + 64; i++) {
        refs[i] = put_flat(pool, i, PAGE, 0, NULL);
        for (size_t j = 0; j <= i; j++) {
            if (j != x && refs[j] != PP_REF_NONE && is_swapped_out(pool, refs[j])) {
                assert_rc(pp_release(pool, refs[j]), 0);
                refs[j] = PP_REF_NONE;
            }
        }
        unsigned st = state_of(pool, refs[x]);
        cr_assert_eq(st & (PP_STATE_RESIDENT | PP_STATE_EVICTING | PP_STATE_ESCAPED),
                     PP_STATE_RESIDENT | PP_STATE_ESCAPED, "state 0x%x after put %zu", st, i);
    }
    cr_assert_geq(STAT_TOTAL(pool, evictions_written), ev0 + 48);
    void *d = NULL;
    assert_rc(pp_get(pool, refs[x], &d), 0);
    cr_assert_eq(d, bufs[x]);
    cr_assert(buf_check(d, x, PAGE, ct_seed(x)));
    sig_destroy(&c.done);
    ev_finish(pool, refs, 16 + 64);
}

/* ======================================================================== */
/* 9. Entries that die during I/O                                            */
/* ======================================================================== */

/* The last owner goes while the entry's write-out is frozen: once the
 * write ends the entry is reclaimed exactly once (its data freed once,
 * its copy dropped). */
Test(evict, dead_during_eviction_reclaimed_once, .timeout = 60)
{
    faultdev_t *f;
    pp_pool_t *pool = ev_pool(SMALL_LIMIT, NULL, &f);
    sw_t *sw = sw_new(16);
    pp_ref_t refs[16];
    faultdev_gate_close(f, false, true);
    for (size_t i = 0; i < 16; i++)
        refs[i] = put_sw(pool, sw, i, PAGE, 0);
    faultdev_wait_blocked(f, 1);
    size_t x = find_one(pool, refs, 16, PP_STATE_EVICTING);
    uint64_t frees0 = STAT_TOTAL(pool, frees);

    assert_rc(pp_release(pool, refs[x]), 0);
    pp_entry_info_t info = test_stat(pool, refs[x]);   /* dead, not yet queued */
    cr_assert_eq(info.state & (PP_STATE_DEAD | PP_STATE_EVICTING | PP_STATE_RESIDENT),
                 PP_STATE_DEAD | PP_STATE_EVICTING | PP_STATE_RESIDENT, "state 0x%x", info.state);
    cr_assert_eq(STAT_TOTAL(pool, queued), 0, "queued during its eviction");
    cr_assert_eq(STAT_TOTAL(pool, dead_in_io), 1);
    assert_rc(pp_pin(pool, refs[x], 0, NULL), PP_ESTALE);
    /* The write cannot end while the gate is closed: drain must wait for
     * the entry, and so times out. */
    assert_rc(pp_pool_drain(pool, 20), PP_EBUSY);
    faultdev_gate_open(f);

    /* Drain waits for the write to end and the entry to be freed. */
    test_drain(pool);
    cr_assert_eq(STAT_TOTAL(pool, frees), frees0 + 1,
                 "drain returned before the entry that died during its eviction was freed");
    cr_assert_eq(STAT_TOTAL(pool, dead_in_io), 0);
    cr_assert_eq(atomic_load(&sw->frees[x]), 1);
    assert_rc(pp_stat(pool, refs[x], &info), PP_ESTALE);
    refs[x] = PP_REF_NONE;
    ev_finish(pool, refs, 16);
    cr_assert_eq(atomic_load(&sw->allocs[x]), 1);
    cr_assert_eq(atomic_load(&sw->frees[x]), 1, "freed %u times", atomic_load(&sw->frees[x]));
    sw_check_delete(sw, 16);
}

/* The last owner goes while a pin's load of the entry is frozen: the pin
 * fails (or wins and unpins), and the loaded data is freed exactly once. */
Test(evict, dead_during_load_reclaimed_once, .timeout = 60)
{
    faultdev_t *f;
    pp_pool_t *pool = ev_pool(SMALL_LIMIT, NULL, &f);
    sw_t *sw = sw_new(1);
    pp_ref_t x = put_sw(pool, sw, 0, PAGE, 0);
    swap_out(pool, 0, &x, 1);
    uint64_t frees0 = STAT_TOTAL(pool, frees);

    faultdev_gate_close(f, true, false);
    call_t c;
    pthread_t th;
    call_start(&c, &th, pool, f, x, CALL_PIN, 0);
    faultdev_wait_blocked(f, 1);
    assert_rc(pp_release(pool, x), 0);
    pp_entry_info_t info = test_stat(pool, x);
    cr_assert_eq(info.state & (PP_STATE_DEAD | PP_STATE_LOADING | PP_STATE_RESIDENT),
                 PP_STATE_DEAD | PP_STATE_LOADING, "state 0x%x", info.state);
    cr_assert_eq(STAT_TOTAL(pool, dead_in_io), 1);
    assert_rc(pp_pool_drain(pool, 20), PP_EBUSY);   /* the load cannot end */
    faultdev_gate_open(f);
    test_thread_join(th);
    if (c.rc == 0) {
        cr_assert(buf_check(c.data, 0, PAGE, ct_seed(0)));
        assert_rc(pp_unpin(pool, x), 0);
    } else {
        assert_rc(c.rc, PP_ESTALE);
    }
    sig_destroy(&c.done);
    cr_assert(WAIT_UNTIL(STAT_TOTAL(pool, frees) == frees0 + 1, TEST_WAIT_MS),
              "the entry that died during its load was never freed");
    ev_finish(pool, NULL, 0);
    cr_assert_eq(atomic_load(&sw->loads[0]), 1);
    cr_assert_eq(atomic_load(&sw->allocs[0]), 2);   /* the put's, the load's */
    cr_assert_eq(atomic_load(&sw->frees[0]), 2);    /* at the eviction, at the reclaim */
    sw_check_delete(sw, 1);
}

/* The same for a load the swap thread runs (PP_PIN_NOWAIT). */
Test(evict, dead_during_async_load_reclaimed_once, .timeout = 60)
{
    faultdev_t *f;
    pp_pool_t *pool = ev_pool(SMALL_LIMIT, NULL, &f);
    sw_t *sw = sw_new(1);
    pp_ref_t x = put_sw(pool, sw, 0, PAGE, 0);
    swap_out(pool, 0, &x, 1);
    uint64_t frees0 = STAT_TOTAL(pool, frees);

    faultdev_gate_close(f, true, false);
    assert_rc(pp_pin(pool, x, PP_PIN_NOWAIT, NULL), PP_EAGAIN);
    faultdev_wait_blocked(f, 1);
    assert_rc(pp_release(pool, x), 0);
    cr_assert_eq(state_of(pool, x) & (PP_STATE_DEAD | PP_STATE_LOADING),
                 PP_STATE_DEAD | PP_STATE_LOADING);
    faultdev_gate_open(f);
    cr_assert(WAIT_UNTIL(STAT_TOTAL(pool, frees) == frees0 + 1, TEST_WAIT_MS),
              "the entry that died during its load was never freed");
    ev_finish(pool, NULL, 0);
    cr_assert_eq(atomic_load(&sw->allocs[0]), 2);
    cr_assert_eq(atomic_load(&sw->frees[0]), 2);
    sw_check_delete(sw, 1);
}

/* The last owner goes while the entry waits in its swap thread's load
 * queue (the thread is busy with another load): the load is never run,
 * and the entry is reclaimed once, without a free call (no data in
 * memory). */
Test(evict, dead_while_queued_for_load_reclaimed_once, .timeout = 60)
{
    faultdev_t *f;
    pp_pool_t *pool = ev_pool(SMALL_LIMIT, NULL, &f);
    sw_t *sw = sw_new(2);
    pp_ref_t refs[2];
    refs[0] = put_sw(pool, sw, 0, PAGE, 0);
    refs[1] = put_sw(pool, sw, 1, PAGE, 0);
    swap_out(pool, 0, refs, 2);
    uint64_t frees0 = STAT_TOTAL(pool, frees);

    faultdev_gate_close(f, true, false);
    assert_rc(pp_prefetch(pool, refs[0]), 0);
    faultdev_wait_blocked(f, 1);            /* the swap thread is in entry 0's read */
    assert_rc(pp_prefetch(pool, refs[1]), 0);   /* queued behind it */
    assert_rc(pp_release(pool, refs[1]), 0);
    cr_assert_eq(state_of(pool, refs[1]) & (PP_STATE_DEAD | PP_STATE_LOADING),
                 PP_STATE_DEAD | PP_STATE_LOADING);
    faultdev_gate_open(f);
    cr_assert(WAIT_UNTIL(STAT_TOTAL(pool, frees) == frees0 + 1, TEST_WAIT_MS),
              "the entry that died in the load queue was never freed");
    cr_assert(WAIT_UNTIL(state_of(pool, refs[0]) & PP_STATE_RESIDENT, TEST_WAIT_MS));
    cr_assert_eq(atomic_load(&sw->loads[1]), 0, "a dead entry was loaded");
    cr_assert_eq(atomic_load(&sw->frees[1]), 1);   /* only at its eviction */
    refs[1] = PP_REF_NONE;
    ev_finish(pool, refs, 2);
    sw_check_delete(sw, 2);
}

/* ======================================================================== */
/* Re-eviction: clean entries are dropped, dirty ones written                */
/* ======================================================================== */

Test(evict, clean_entry_dropped_dirty_entry_rewritten, .timeout = 60)
{
    faultdev_t *f;
    pp_pool_t *pool = ev_pool(SMALL_LIMIT, NULL, &f);
    sw_t *sw = sw_new(1);
    pp_ref_t x = put_sw(pool, sw, 0, PAGE, 0);
    swap_out(pool, 0, &x, 1);
    cr_assert_eq(atomic_load(&sw->saves[0]), 1);

    /* Loaded and only read: its copy is still valid, evicted without a write. */
    void *d = NULL;
    assert_rc(pp_pin(pool, x, 0, &d), 0);
    assert_rc(pp_unpin(pool, x), 0);
    cr_assert_not(state_of(pool, x) & PP_STATE_DIRTY);
    pp_stats_t *s0 = test_stats_new(pool);
    swap_out(pool, 0, &x, 1);
    pp_stats_t *s1 = test_stats_new(pool);
    cr_assert_eq(s1->total.evictions_clean, s0->total.evictions_clean + 1);
    cr_assert_eq(atomic_load(&sw->saves[0]), 1, "a clean entry was saved again");

    /* Loaded and written: dirty, written out again with the new bytes. */
    assert_rc(pp_pin(pool, x, PP_PIN_WRITE, &d), 0);
    cr_assert(state_of(pool, x) & PP_STATE_DIRTY);
    buf_fill(d, 0, PAGE, ct_seed(0) + 7);
    assert_rc(pp_unpin(pool, x), 0);
    swap_out(pool, 0, &x, 1);
    pp_stats_t *s2 = test_stats_new(pool);
    cr_assert_eq(s2->total.evictions_clean, s1->total.evictions_clean, "a dirty entry was dropped");
    cr_assert_eq(atomic_load(&sw->saves[0]), 2);
    /* Pinned for write while swapped: loaded dirty, written out again. */
    assert_rc(pp_pin(pool, x, PP_PIN_WRITE, &d), 0);
    cr_assert(buf_check(d, 0, PAGE, ct_seed(0) + 7), "the write was lost");
    cr_assert(state_of(pool, x) & PP_STATE_DIRTY, "loaded for write but not dirty");
    buf_fill(d, 0, PAGE, ct_seed(0) + 8);
    assert_rc(pp_unpin(pool, x), 0);
    swap_out(pool, 0, &x, 1);
    cr_assert_eq(atomic_load(&sw->saves[0]), 3);
    assert_rc(pp_pin(pool, x, 0, &d), 0);
    cr_assert(buf_check(d, 0, PAGE, ct_seed(0) + 8), "the write after a load was lost");
    assert_rc(pp_unpin(pool, x), 0);
    free(s0);
    free(s1);
    free(s2);
    ev_finish(pool, &x, 1);
    sw_check_delete(sw, 1);
}
