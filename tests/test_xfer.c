/*
 * test_xfer.c -- the io_uring engine (src/xfer.c, src/ring.c): which
 * engine a pool runs and why, the options and the environment variable
 * that choose it and their errors, write-outs handed to the kernel
 * together (and never more than the depth allows), queued loads kept
 * within their budget, a pin of a load still held in the queue, and
 * releases and destroy while loads wait, and queued loads read into the
 * memory of flat entries evicted for them (never a typed load, never on
 * the thread engine).
 *
 * The swap suites (test_swap, test_swap_direct, test_evict, test_advise)
 * run every fault, gate and race of the swap path through both engines:
 * under io_uring by default, and again as their ".threads" runs.
 *
 * Determinism.  The engine hands requests to the kernel only when its
 * thread next reaps (a pass that waits, the loop that waits for loads),
 * so the victims a pass claims before it waits are counted in flight
 * together whatever the disk's speed.  The fault device's read gate holds
 * the swap thread inside the first request of a load, while the test
 * queues the others behind it.
 */
#include "helpers.h"
#include "support/swaptest.h"
#include "support/faultdev.h"

#include "ring.h"

#define MiB ((size_t)1 << 20)
#define KiB ((size_t)1 << 10)

static pp_pool_t *g_xf_pool;

static void xf_fini(void) { test_swap_dir_remove(g_xf_pool); }

TestSuite(xfer, .fini = xf_fini);

/* Whether io_uring can be used here, and if not why (ring.c's probe). */
static bool uring_here(char *why, size_t n) { return pp__ring_probe(why, n) == 0; }

static pp_options_t xf_options(size_t limit)
{
    pp_options_t o = PP_OPTIONS_INIT;
    o.mem_limit = limit;
    o.swap_dir = test_swap_parent();
    return o;
}

/* A swapping pool on the fault device (*fd valid until destroy). */
static pp_pool_t *xf_pool(const pp_options_t *o, faultdev_t **fd)
{
    faultdev_t *f = faultdev_new();
    cr_assert_not_null(f);
    pp_pool_t *pool = NULL;
    int rc = faultdev_pool_create(o, f, &pool);
    cr_assert_eq(rc, 0, "faultdev_pool_create: %s", pp_err_name(rc));
    if (fd != NULL)
        *fd = f;
    g_xf_pool = pool;
    return pool;
}

static void xf_finish(pp_pool_t *pool, const pp_ref_t *refs, size_t n)
{
    test_release_and_check_empty(pool, refs, n);
    test_destroy(pool);
    g_xf_pool = NULL;
}

static pp_ref_t put_pattern(pp_pool_t *pool, size_t size, uint64_t seed, const pp_type_t *type)
{
    void *buf = malloc(size);
    cr_assert_not_null(buf);
    fill_pattern(buf, size, seed);
    pp_ref_t ref = PP_REF_NONE;
    assert_rc(pp_put(pool, buf, size, type, 0, &ref), 0);
    return ref;
}

static void check_pattern_of(pp_pool_t *pool, pp_ref_t ref, size_t size, uint64_t seed)
{
    void *d = NULL;
    assert_rc(pp_pin(pool, ref, 0, &d), 0);
    cr_assert(check_pattern(d, size, seed), "entry of seed %" PRIu64 " lost its bytes", seed);
    assert_rc(pp_unpin(pool, ref), 0);
}

static bool is_swapped(pp_pool_t *pool, pp_ref_t ref)
{
    unsigned st = test_stat(pool, ref).state;
    return (st & PP_STATE_SWAPPED) && !(st & PP_STATE_RESIDENT) && !(st & PP_STATE_EVICTING);
}

static bool is_resident(pp_pool_t *pool, pp_ref_t ref)
{
    unsigned st = test_stat(pool, ref).state;
    return (st & PP_STATE_RESIDENT) && !(st & PP_STATE_LOADING);
}

static const pp_type_t noswap_type = {.name = "noswap", .flags = PP_TYPE_NOSWAP};

/* ------------------------------------------------------------------------ */
/* Which engine                                                              */
/* ------------------------------------------------------------------------ */

/* Left to the pool, it runs io_uring where it works, and says so; where it
 * does not, the thread engine and the reason. */
Test(xfer, the_engine_a_pool_runs_is_reported)
{
    unsetenv("PINPOOL_IO_ENGINE");
    char why[96];
    bool uring = uring_here(why, sizeof why);
    pp_options_t o = xf_options(4 * MiB);
    pp_pool_t *pool = xf_pool(&o, NULL);
    pp_stats_t *s = test_stats_new(pool);
    if (uring) {
        cr_assert_eq(s->io_engine, PP_IO_ENGINE_URING);
        cr_assert_str_eq(s->io_engine_why, "io_uring");
        cr_assert_eq(s->io_depth, PP_IO_DEPTH_DEFAULT);
    } else {
        cr_assert_eq(s->io_engine, PP_IO_ENGINE_THREADS);
        cr_assert_str_eq(s->io_engine_why, why);
        cr_assert_eq(s->io_depth, 1);
    }
    free(s);
    xf_finish(pool, NULL, 0);

    /* A pool without swap runs none. */
    pp_options_t plain = PP_OPTIONS_INIT;
    pool = test_pool(&plain);
    s = test_stats_new(pool);
    cr_assert_eq(s->io_engine, 0);
    cr_assert_eq(s->io_depth, 0);
    cr_assert_str_eq(s->io_engine_why, "");
    free(s);
    test_destroy(pool);
}

Test(xfer, threads_asked_for_by_option_or_environment)
{
    unsetenv("PINPOOL_IO_ENGINE");
    pp_options_t o = xf_options(4 * MiB);
    o.io_engine = PP_IO_ENGINE_THREADS;
    pp_pool_t *pool = xf_pool(&o, NULL);
    pp_stats_t *s = test_stats_new(pool);
    cr_assert_eq(s->io_engine, PP_IO_ENGINE_THREADS);
    cr_assert_str_eq(s->io_engine_why, "asked for");
    cr_assert_eq(s->io_depth, 1);
    free(s);
    xf_finish(pool, NULL, 0);

    setenv("PINPOOL_IO_ENGINE", "threads", 1);
    o.io_engine = PP_IO_ENGINE_AUTO;
    pool = xf_pool(&o, NULL);
    s = test_stats_new(pool);
    cr_assert_eq(s->io_engine, PP_IO_ENGINE_THREADS);
    cr_assert_str_eq(s->io_engine_why, "asked for (PINPOOL_IO_ENGINE)");
    free(s);
    xf_finish(pool, NULL, 0);

    /* An option the caller set wins over the environment. */
    char why[96];
    if (uring_here(why, sizeof why)) {
        o.io_engine = PP_IO_ENGINE_URING;
        o.io_depth = 8;
        pool = xf_pool(&o, NULL);
        s = test_stats_new(pool);
        cr_assert_eq(s->io_engine, PP_IO_ENGINE_URING);
        cr_assert_eq(s->io_depth, 8);
        free(s);
        xf_finish(pool, NULL, 0);
    }
    unsetenv("PINPOOL_IO_ENGINE");
}

Test(xfer, bad_engine_depth_or_environment_is_einval)
{
    unsetenv("PINPOOL_IO_ENGINE");
    pp_options_t o = xf_options(4 * MiB);
    pp_pool_t *pool = NULL;
    o.io_engine = PP_IO_ENGINE_THREADS + 1;
    assert_rc(pp_pool_create(&o, &pool), PP_EINVAL);
    cr_assert_null(pool);
    o.io_engine = PP_IO_ENGINE_AUTO;
    o.io_depth = PP_IO_DEPTH_MAX + 1;
    assert_rc(pp_pool_create(&o, &pool), PP_EINVAL);
    o.io_depth = PP_IO_DEPTH_MAX;        /* the largest is taken */
    char why[96];
    if (uring_here(why, sizeof why)) {
        pool = xf_pool(&o, NULL);
        cr_assert_eq(STAT_TOTAL(pool, io_inflight), 0);
        xf_finish(pool, NULL, 0);
    }

    report_cap_t rc;
    report_cap_init(&rc);
    o.io_depth = 0;
    report_cap_attach(&rc, &o);
    setenv("PINPOOL_IO_ENGINE", "fast", 1);
    pool = NULL;
    assert_rc(pp_pool_create(&o, &pool), PP_EINVAL);
    cr_assert_null(pool);
    cr_assert(report_has(&rc, 0, "PINPOOL_IO_ENGINE=fast", "uring, threads or auto", NULL));
    unsetenv("PINPOOL_IO_ENGINE");
    report_cap_free(&rc);
}

/* A device that cannot give a file descriptor: the pool says why it runs
 * the thread engine, or refuses PP_IO_ENGINE_URING with PP_ENOTSUP. */
Test(xfer, uring_where_it_cannot_be_had_is_refused_auto_falls_back)
{
    unsetenv("PINPOOL_IO_ENGINE");
    pp_options_t o = xf_options(4 * MiB);
    faultdev_t *f = faultdev_new();
    cr_assert_not_null(f);
    f->dev.fd = NULL;
    pp_pool_t *pool = NULL;
    assert_rc(faultdev_pool_create(&o, f, &pool), 0);
    g_xf_pool = pool;
    pp_stats_t *s = test_stats_new(pool);
    cr_assert_eq(s->io_engine, PP_IO_ENGINE_THREADS);
    cr_assert_str_eq(s->io_engine_why, "the swap device has no file descriptor");
    free(s);
    /* and it swaps all the same */
    pp_ref_t refs[8];
    for (size_t i = 0; i < 8; i++)
        refs[i] = put_pattern(pool, MiB, 100 + i, NULL);
    for (size_t i = 0; i < 8; i++)
        check_pattern_of(pool, refs[i], MiB, 100 + i);
    cr_assert_gt(STAT_TOTAL(pool, evictions_written), 0);
    xf_finish(pool, refs, 8);

    report_cap_t rc;
    report_cap_init(&rc);
    report_cap_attach(&rc, &o);
    o.io_engine = PP_IO_ENGINE_URING;
    f = faultdev_new();
    cr_assert_not_null(f);
    f->dev.fd = NULL;
    pool = NULL;
    assert_rc(faultdev_pool_create(&o, f, &pool), PP_ENOTSUP);
    cr_assert_null(pool);
    cr_assert(report_has(&rc, 0, "PP_IO_ENGINE_URING", "no file descriptor", "not created"));
    report_cap_free(&rc);
}

/* ------------------------------------------------------------------------ */
/* Write-outs                                                                */
/* ------------------------------------------------------------------------ */

/*
 * Forty entries of 256 KiB (10 MiB) under a 16 MiB limit, each advised
 * WONTNEED; a put of 6 MiB (of a type never swapped) fits and takes the
 * pool to its limit, over the high watermark (15/16).  The swap thread's
 * pass brings it to the low one (7/8: 14 MiB): it claims eight victims,
 * one after another, before it waits for any, and the eight write-outs
 * go to the kernel together.
 */
#define WT_N 40
#define WT_SIZE (256 * KiB)
static void write_outs_together(unsigned depth, uint64_t *peak, uint64_t *requests,
                                uint64_t *submits)
{
    unsetenv("PINPOOL_IO_ENGINE");
    pp_options_t o = xf_options(16 * MiB);
    o.io_engine = PP_IO_ENGINE_URING;
    o.io_depth = depth;
    pp_pool_t *pool = xf_pool(&o, NULL);
    pp_ref_t refs[WT_N + 1];
    for (size_t i = 0; i < WT_N; i++) {
        refs[i] = put_pattern(pool, WT_SIZE, 200 + i, NULL);
        assert_rc(pp_advise(pool, refs[i], PP_ADVISE_WONTNEED), 0);
    }
    cr_assert_eq(STAT_TOTAL(pool, evictions_written), 0, "evicted before memory was short");
    refs[WT_N] = put_pattern(pool, 6 * MiB, 300, &noswap_type);
    cr_assert(WAIT_UNTIL(test_reserved(pool) <= 14 * MiB, TEST_WAIT_MS));
    test_drain(pool);
    uint64_t written = STAT_TOTAL(pool, evictions_written);
    cr_assert_eq(written, 8, "%" PRIu64 " written out to go from 16 to 14 MiB", written);
    pp_stats_t *s = test_stats_new(pool);
    *peak = s->total.io_inflight_peak;
    *requests = s->total.io_requests;
    *submits = s->total.io_submits;
    cr_assert_eq(s->total.io_inflight, 0);
    free(s);
    for (size_t i = 0; i < WT_N; i++)
        check_pattern_of(pool, refs[i], WT_SIZE, 200 + i);
    check_pattern_of(pool, refs[WT_N], 6 * MiB, 300);
    xf_finish(pool, refs, WT_N + 1);
}

Test(xfer, victims_of_one_pass_are_written_out_together)
{
    char why[96];
    cr_assert(uring_here(why, sizeof why), "io_uring is not usable here: %s", why);
    uint64_t peak, requests, submits;
    write_outs_together(0, &peak, &requests, &submits);
    cr_assert_eq(peak, 8, "%" PRIu64 " requests in flight at most (8 victims)", peak);
    cr_assert_lt(submits, requests, "%" PRIu64 " submits for %" PRIu64 " requests", submits,
                 requests);
}

Test(xfer, the_depth_bounds_the_requests_in_flight)
{
    char why[96];
    cr_assert(uring_here(why, sizeof why), "io_uring is not usable here: %s", why);
    uint64_t peak, requests, submits;
    write_outs_together(2, &peak, &requests, &submits);
    cr_assert_eq(peak, 2, "%" PRIu64 " requests in flight with a depth of 2", peak);
    cr_assert_geq(requests, 8);
}

/* ------------------------------------------------------------------------ */
/* Queued loads                                                              */
/* ------------------------------------------------------------------------ */

#define QL_N 8
#define QL_SIZE (256 * KiB)

/* QL_N entries of QL_SIZE (and type) swapped out of a 16 MiB pool on
 * engine (their budget for queued loads: 1 MiB, four of them), then
 * nothing else resident. */
static pp_pool_t *queued_loads_pool_on(unsigned engine, const pp_type_t *type, faultdev_t **f,
                                       pp_ref_t *refs)
{
    char why[96];
    if (engine == PP_IO_ENGINE_URING)
        cr_assert(uring_here(why, sizeof why), "io_uring is not usable here: %s", why);
    unsetenv("PINPOOL_IO_ENGINE");
    pp_options_t o = xf_options(16 * MiB);
    o.io_engine = engine;
    pp_pool_t *pool = xf_pool(&o, f);
    for (size_t i = 0; i < QL_N; i++) {
        refs[i] = put_pattern(pool, QL_SIZE, 400 + i, type);
        assert_rc(pp_advise(pool, refs[i], PP_ADVISE_WONTNEED), 0);
    }
    /* 2 + 14 MiB: fits, above the high watermark: the pass takes the
     * advised ones down to the low one, all eight. */
    pp_ref_t big = put_pattern(pool, 14 * MiB, 500, &noswap_type);
    for (size_t i = 0; i < QL_N; i++)
        cr_assert(WAIT_UNTIL(is_swapped(pool, refs[i]), TEST_WAIT_MS), "entry %zu stays", i);
    assert_rc(pp_release(pool, big), 0);
    test_drain(pool);
    return pool;
}

static pp_pool_t *queued_loads_pool(faultdev_t **f, pp_ref_t *refs)
{
    return queued_loads_pool_on(PP_IO_ENGINE_URING, NULL, f, refs);
}

/* The first load holds the swap thread in its first request (the read
 * gate closed) while the others are queued behind it; with release, each
 * of those is released right after its prefetch.  The gate stays closed. */
static void queue_behind_the_first(pp_pool_t *pool, faultdev_t *f, const pp_ref_t *refs,
                                   bool release)
{
    faultdev_gate_close(f, true, false);
    assert_rc(pp_prefetch(pool, refs[0]), 0);
    faultdev_wait_blocked(f, 1);
    for (size_t i = 1; i < QL_N; i++) {
        assert_rc(pp_prefetch(pool, refs[i]), 0);
        if (release)
            assert_rc(pp_release(pool, refs[i]), 0);
    }
}

Test(xfer, queued_loads_stay_within_their_budget_and_run_together)
{
    faultdev_t *f;
    pp_ref_t refs[QL_N];
    pp_pool_t *pool = queued_loads_pool(&f, refs);
    queue_behind_the_first(pool, f, refs, false);
    faultdev_gate_open(f);
    /* A pin of the last, held in the queue until the budget lets it go. */
    check_pattern_of(pool, refs[QL_N - 1], QL_SIZE, 400 + QL_N - 1);
    for (size_t i = 0; i < QL_N; i++)
        cr_assert(WAIT_UNTIL(is_resident(pool, refs[i]), TEST_WAIT_MS), "entry %zu", i);
    pp_stats_t *s = test_stats_new(pool);
    cr_assert_leq(s->total.io_load_bytes_peak, MiB, "%" PRIu64 " bytes of queued loads at "
                  "once: over their budget", s->total.io_load_bytes_peak);
    cr_assert_geq(s->total.io_load_bytes_peak, 2 * QL_SIZE, "%" PRIu64 " bytes of queued loads "
                  "at most: one at a time", s->total.io_load_bytes_peak);
    cr_assert_eq(s->total.io_load_bytes, 0);
    cr_assert_eq(s->total.loads, QL_N);
    free(s);
    for (size_t i = 0; i < QL_N; i++)
        check_pattern_of(pool, refs[i], QL_SIZE, 400 + i);
    xf_finish(pool, refs, QL_N);
}

/* Entries released while their loads wait in the queue are freed, once;
 * the one still wanted loads. */
Test(xfer, entries_released_while_their_loads_wait_are_freed_once)
{
    faultdev_t *f;
    pp_ref_t refs[QL_N];
    pp_pool_t *pool = queued_loads_pool(&f, refs);
    uint64_t puts = STAT_TOTAL(pool, puts);
    queue_behind_the_first(pool, f, refs, true);
    faultdev_gate_open(f);
    check_pattern_of(pool, refs[0], QL_SIZE, 400);
    test_drain(pool);
    cr_assert_eq(STAT_TOTAL(pool, frees), puts - 1, "every released entry freed, once");

    assert_rc(pp_release(pool, refs[0]), 0);
    test_drain(pool);
    cr_assert_eq(STAT_TOTAL(pool, frees), puts);
    xf_finish(pool, NULL, 0);
}

Test(xfer, destroy_with_loads_queued_and_in_flight)
{
    faultdev_t *f;
    pp_ref_t refs[QL_N];
    pp_pool_t *pool = queued_loads_pool(&f, refs);
    queue_behind_the_first(pool, f, refs, true);
    assert_rc(pp_release(pool, refs[0]), 0);
    faultdev_gate_open(f);
    test_destroy(pool);                  /* no hang, nothing leaked (ASan) */
    g_xf_pool = NULL;
}

/* ------------------------------------------------------------------------ */
/* Memory for queued loads                                                   */
/* ------------------------------------------------------------------------ */

/* A type whose bytes go through save and load: its loads make their own
 * memory. */
static int saved_save(const void *data, size_t size, pp_writer_t *w, void *ctx)
{
    (void)ctx;
    return pp_write(w, data, size);
}

static int saved_load(void **data, size_t size, pp_reader_t *r, void *ctx)
{
    (void)ctx;
    void *p = malloc(size);
    if (p == NULL)
        return PP_ENOMEM;
    int rc = pp_read(r, p, size);
    if (rc != 0) {
        free(p);
        return rc;
    }
    *data = p;
    return 0;
}

static const pp_type_t saved_type = {.name = "saved", .save = saved_save, .load = saved_load};

/* 15 MiB of flat entries of QL_SIZE: the high watermark, not over it. */
#define RC_FILL 60

/*
 * The QL_N entries (of type) on disk under engine; RC_FILL flat entries
 * of the same size fill the pool to its high watermark without an
 * eviction.  The QL_N loads are queued behind the first (held in its
 * read): 2 MiB where 1 MiB is left, so the hand must evict at least four
 * of the fill while loads wait or run.  Every byte is checked after;
 * returns the pool's io_load_recycled.
 */
static uint64_t recycled_by_queued_loads(unsigned engine, const pp_type_t *type)
{
    faultdev_t *f;
    pp_ref_t refs[QL_N + RC_FILL];
    pp_pool_t *pool = queued_loads_pool_on(engine, type, &f, refs);
    uint64_t written = STAT_TOTAL(pool, evictions_written);
    for (size_t i = 0; i < RC_FILL; i++)
        refs[QL_N + i] = put_pattern(pool, QL_SIZE, 600 + i, NULL);
    cr_assert_eq(STAT_TOTAL(pool, evictions_written), written, "the fill was evicted before "
                 "the loads: it went over the high watermark");
    queue_behind_the_first(pool, f, refs, false);
    faultdev_gate_open(f);
    for (size_t i = 0; i < QL_N; i++)
        check_pattern_of(pool, refs[i], QL_SIZE, 400 + i);
    for (size_t i = 0; i < RC_FILL; i++)
        check_pattern_of(pool, refs[QL_N + i], QL_SIZE, 600 + i);
    test_drain(pool);
    pp_stats_t *s = test_stats_new(pool);
    cr_assert_geq(s->total.evictions_written - written, 4, "%" PRIu64 " of the fill evicted "
                  "for 1 MiB of loads", s->total.evictions_written - written);
    uint64_t recycled = s->total.io_load_recycled;
    cr_assert_leq(recycled, s->total.loads);
    free(s);
    xf_finish(pool, refs, QL_N + RC_FILL);  /* spares no load took: freed (ASan) */
    return recycled;
}

Test(xfer, queued_loads_read_into_memory_evicted_for_them)
{
    uint64_t n = recycled_by_queued_loads(PP_IO_ENGINE_URING, NULL);
    cr_assert_gt(n, 0, "no queued load took the memory of an entry evicted for it");
}

Test(xfer, typed_loads_make_their_own_memory)
{
    uint64_t n = recycled_by_queued_loads(PP_IO_ENGINE_URING, &saved_type);
    cr_assert_eq(n, 0, "%" PRIu64 " loads of a type with its own load read into kept memory", n);
}

Test(xfer, the_thread_engine_keeps_no_memory_for_loads)
{
    uint64_t n = recycled_by_queued_loads(PP_IO_ENGINE_THREADS, NULL);
    cr_assert_eq(n, 0, "%" PRIu64 " loads recycled on the thread engine", n);
}
