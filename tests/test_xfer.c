/*
 * test_xfer.c -- the io_uring engine (src/swap/xfer.c, src/os/ring.c): which
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

#include "os/ring.h"

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

/*
 * Kept memory over an idle moment.  The swap thread keeps what it evicts
 * of flat entries; the hook below stops it at its first idle point after
 * the QL_N loads of the first burst (PP__TP_SWAP_IDLE), records what it
 * still keeps, and holds it there until the test lets it go: so the test
 * acts while the thread is idle, whatever the timing.  It keeps at least
 * one buffer of the fill there, whatever order the burst ran in: its
 * first eviction is always kept (nothing kept yet, the pool within its
 * limit), the loads (of another size) take none, a trim leaves what fits
 * beside the resident bytes, and at the idle point those are at most the
 * high watermark (else the pass would have evicted, and kept, more).
 */
typedef struct idle_hook {
    pp_pool_t *pool;
    _Atomic int armed;                   /* 1: stop at the next idle point */
    _Atomic int empty_only;              /* 1: only at one with nothing kept */
    _Atomic int inside;                  /* the hook runs on the swap thread */
    int hits;                            /* stops so far (the swap thread's) */
    uint64_t kept;                       /* spare bytes at the last stop */
    uint64_t resident;                   /* the pool's resident bytes there */
    test_sig_t at, go;                   /* at: stops made; go: stops let go */
} idle_hook_t;

static void idle_point(enum pp__test_point where, void *arg, void *ctx)
{
    idle_hook_t *h = ctx;
    pp__node_t *node = arg;
    if (where != PP__TP_SWAP_IDLE || node->pool != h->pool ||
        pp__atomic_load_relaxed(&node->sw.loads) < QL_N ||
        (atomic_load(&h->empty_only) && pp__xfer_spare_bytes(node) > 0) ||
        atomic_exchange(&h->armed, 0) == 0)
        return;
    atomic_store(&h->inside, 1);
    h->kept = pp__xfer_spare_bytes(node);
    h->resident = pp__atomic_load_relaxed(&h->pool->resident);
    sig_set(&h->at, ++h->hits);
    (void)sig_wait(&h->go, h->hits);     /* bounded: TEST_WAIT_MS */
    atomic_store(&h->inside, 0);
}

/* Entries of the fill of the idle tests: twice a load's size, so that the
 * first burst's loads, of QL_SIZE, cannot take what their evictions kept;
 * IDLE_FILL of them fill the pool to its high watermark, as RC_FILL do. */
#define IDLE_SIZE (2 * QL_SIZE)
#define IDLE_FILL (RC_FILL / 2)

/* The burst of recycled_by_queued_loads with a fill of IDLE_FILL entries
 * of IDLE_SIZE, stopped at the idle point after it (the hook installed,
 * armed once), where the thread must still keep at least one fill entry's
 * worth of evicted memory; the fill's refs in fill. */
static pp_pool_t *first_burst_then_idle(idle_hook_t *h, pp_ref_t *refs, pp_ref_t *fill)
{
    faultdev_t *f;
    pp_pool_t *pool = queued_loads_pool_on(PP_IO_ENGINE_URING, NULL, &f, refs);
    for (size_t i = 0; i < IDLE_FILL; i++)
        fill[i] = put_pattern(pool, IDLE_SIZE, 600 + i, NULL);
    h->pool = pool;
    sig_init(&h->at);
    sig_init(&h->go);
    atomic_store(&h->armed, 1);
    pp__test_point_hook(idle_point, h);
    queue_behind_the_first(pool, f, refs, false);
    faultdev_gate_open(f);
    cr_assert(sig_wait(&h->at, 1), "the swap thread never idled after the loads");
    cr_assert_geq(h->kept, IDLE_SIZE, "the swap thread keeps %" PRIu64 " bytes over its idle "
                  "moment: it gave back what the next loads could read into", h->kept);
    return pool;
}

/* Lets the swap thread go on and waits until it stops at its next idle
 * point (the hook records what it keeps there). */
static void idle_hook_next(idle_hook_t *h, const char *what)
{
    atomic_store(&h->armed, 1);
    sig_set(&h->go, 1);
    cr_assert(sig_wait(&h->at, 2), "%s", what);
}

/* Lets the swap thread go for good and removes the hook. */
static void idle_hook_end(idle_hook_t *h)
{
    sig_set(&h->go, 1000);
    cr_assert(WAIT_UNTIL(atomic_load(&h->inside) == 0, TEST_WAIT_MS));
    pp__test_point_hook(NULL, NULL);
    sig_destroy(&h->at);
    sig_destroy(&h->go);
}

/* The end of an idle test: the first burst's entries still hold their
 * bytes, and the pool ends with every entry freed. */
static void idle_test_end(pp_pool_t *pool, pp_ref_t *refs)
{
    for (size_t i = 0; i < QL_N; i++)
        check_pattern_of(pool, refs[i], QL_SIZE, 400 + i);
    xf_finish(pool, refs, QL_N + IDLE_FILL);
}

/* The next burst of loads reads into memory kept from the one before,
 * though the swap thread idled in between (it freed it there before: one
 * fresh buffer per load of the demo's bursts of prefetches). */
Test(xfer, memory_kept_for_loads_outlasts_an_idle_moment)
{
    idle_hook_t h = {0};
    pp_ref_t refs[QL_N + IDLE_FILL], *fill = refs + QL_N;
    pp_pool_t *pool = first_burst_then_idle(&h, refs, fill);
    uint64_t recycled = STAT_TOTAL(pool, io_load_recycled);
    /* The next burst: entries of the fill evicted in the first (swapped
     * now), as many as the kept buffers hold, queued while it idles. */
    size_t n = 0;
    pp_ref_t next[IDLE_FILL];
    for (size_t i = 0; i < IDLE_FILL && n < h.kept / IDLE_SIZE; i++) {
        if (is_swapped(pool, fill[i])) {
            assert_rc(pp_prefetch(pool, fill[i]), 0);
            next[n++] = fill[i];
        }
    }
    cr_assert_gt(n, 0, "no entry of the fill was evicted for the first loads");
    idle_hook_end(&h);
    for (size_t i = 0; i < n; i++)
        cr_assert(WAIT_UNTIL(!is_swapped(pool, next[i]), TEST_WAIT_MS), "prefetch %zu stays", i);
    cr_assert_gt(STAT_TOTAL(pool, io_load_recycled), recycled, "none of %zu loads after the idle "
                 "moment read into the %" PRIu64 " bytes kept", n, h.kept);
    for (size_t i = 0; i < IDLE_FILL; i++)
        check_pattern_of(pool, fill[i], IDLE_SIZE, 600 + i);
    idle_test_end(pool, refs);
}

/* What no load takes is given back once the thread has idled a while,
 * without a destroy or another load to make it. */
Test(xfer, memory_no_load_takes_is_freed_when_the_thread_idles)
{
    idle_hook_t h = {0};
    pp_ref_t refs[QL_N + IDLE_FILL], *fill = refs + QL_N;
    pp_pool_t *pool = first_burst_then_idle(&h, refs, fill);
    /* Go on, and stop at the first idle point with nothing kept: within
     * TEST_WAIT_MS, with nothing more for the thread to do. */
    atomic_store(&h.empty_only, 1);
    idle_hook_next(&h, "the swap thread idles and still keeps memory no load took");
    cr_assert_eq(h.kept, 0);
    idle_hook_end(&h);
    idle_test_end(pool, refs);
}

/* Kept memory gives way to entries: once puts take the room it was kept
 * in, the swap thread frees it, and the pool's bytes and the kept ones
 * together are back within the limit at its next idle point. */
Test(xfer, memory_kept_for_loads_gives_way_to_puts)
{
    idle_hook_t h = {0};
    pp_ref_t refs[QL_N + IDLE_FILL], *fill = refs + QL_N;
    pp_pool_t *pool = first_burst_then_idle(&h, refs, fill);
    cr_assert_leq(h.resident + h.kept, pool->mem_limit);
    /* Puts into the room the kept bytes were within, up to the limit
     * (not over it: a put over it would wait for the stopped thread). */
    size_t n = (size_t)((pool->mem_limit - h.resident) / QL_SIZE);
    pp_ref_t more[64];
    cr_assert(n > 0 && n <= 64, "%zu puts", n);
    for (size_t i = 0; i < n; i++)
        more[i] = put_pattern(pool, QL_SIZE, 700 + i, NULL);
    idle_hook_next(&h, "the swap thread never idled after the puts");
    cr_assert_leq(h.resident + h.kept, pool->mem_limit, "%" PRIu64 " bytes kept beside %"
                  PRIu64 " resident, over the limit of %zu", h.kept, h.resident, pool->mem_limit);
    idle_hook_end(&h);
    for (size_t i = 0; i < n; i++)
        check_pattern_of(pool, more[i], QL_SIZE, 700 + i);
    for (size_t i = 0; i < n; i++)
        assert_rc(pp_release(pool, more[i]), 0);
    idle_test_end(pool, refs);
}
