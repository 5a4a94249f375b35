/* test_hot.c -- hot entries: sharded pin counts for contended entries
 * (src/core/hot.c).  Promotion and demotion are driven through pp__debug_hot so
 * every test knows the mode it checks; one test checks that contention
 * alone promotes. */
#include "helpers.h"

#include "testing/testhooks.h" /* pp__debug_hot, pp__debug_hot_after, pp__pool_is_valid */

enum { HOT_ASK = -1, HOT_OFF = 0, HOT_ON = 1 };

static int hot(pp_pool_t *pool, pp_ref_t r, int op)
{
    return pp__debug_hot(pool, r, op);
}

static uint32_t pins_of(pp_pool_t *pool, pp_ref_t r)
{
    return test_stat(pool, r).pins;
}

Test(hot, promote_and_demote_keep_the_count, .timeout = 30)
{
    pp_pool_t *pool = test_pool(NULL);
    ct_t *ct = ct_new(1);
    pp_ref_t r = ct_put(pool, ct, 0, 128, 0);
    cr_assert_eq(hot(pool, r, HOT_ON), 1);
    cr_assert(pp__pool_is_valid(pool));
    void *p = NULL;
    for (uint32_t i = 1; i <= 5; i++) {
        assert_rc(pp_pin(pool, r, 0, &p), 0);
        cr_assert(ct_check(p, 0, 128));
        cr_assert_eq(pins_of(pool, r), i);
    }
    cr_assert_eq(hot(pool, r, HOT_OFF), 0);     /* counters back to the word */
    cr_assert_eq(pins_of(pool, r), 5);
    for (uint32_t i = 5; i-- > 0;) {
        assert_rc(pp_unpin(pool, r), 0);
        cr_assert_eq(pins_of(pool, r), i);
    }
    assert_rc(pp_unpin(pool, r), PP_ENOTPINNED);
    pp_stats_t s;
    test_stats(pool, &s);
    cr_assert_eq(s.total.hot_promotions, 1);
    cr_assert_eq(s.total.hot_demotions, 1);
    cr_assert_eq(s.total.hot_entries, 0);
    cr_assert_eq(s.total.pins, 5);
    cr_assert_eq(s.total.unpins, 5);
    test_destroy(pool);
    cr_assert_eq(ct_frees(ct, 0), 1);
    ct_delete(ct);
}

/* ------------------------------------------------------------------------ */
/* A demoter stopped before it installs its sum                             */
/* ------------------------------------------------------------------------ */

/* The test point PP__TP_HOT_INSTALL stops one thread (the first to reach
 * it, the "late" demoter) until the test lets it go. */
typedef struct late {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool armed, arrived, go;
    pp_pool_t *pool;
    pp_ref_t ref;
} late_t;

static void late_point(enum pp__test_point where, void *arg, void *ctx)
{
    (void)arg;
    late_t *l = ctx;
    if (where != PP__TP_HOT_INSTALL)
        return;
    pthread_mutex_lock(&l->mu);
    if (l->armed) {
        l->armed = false;                    /* this thread is the late one */
        l->arrived = true;
        pthread_cond_broadcast(&l->cv);
        while (!l->go)
            pthread_cond_wait(&l->cv, &l->mu);
    }
    pthread_mutex_unlock(&l->mu);
}

static void *late_main(void *arg)
{
    late_t *l = arg;
    (void)pp__debug_hot(l->pool, l->ref, HOT_OFF);
    return NULL;
}

/* Two demoters of one promotion: the first closes the counters, sums them
 * and stops just before its CAS on the word; the second finishes, the slot
 * is freed, and the entry is promoted again into the same slot, so its
 * word is the very value the first one read.  A pin dropped on the new
 * promotion's counters must still count when the first one goes on: its
 * CAS may not install the old sum over the new promotion.  (Before the
 * fix it did: the entry kept a pin nobody held -- dead, it was never
 * queued, drain left it and destroy refused with PP_EBUSY.) */
Test(hot, late_demoter_does_not_install_over_a_new_promotion, .timeout = 30)
{
    pp_pool_t *pool = test_pool(NULL);
    ct_t *ct = ct_new(1);
    pp_ref_t r = ct_put(pool, ct, 0, 128, 0);
    late_t l = {.armed = true, .pool = pool, .ref = r};
    pthread_mutex_init(&l.mu, NULL);
    pthread_cond_init(&l.cv, NULL);
    cr_assert_eq(hot(pool, r, HOT_ON), 1);
    void *p = NULL;
    assert_rc(pp_pin(pool, r, 0, &p), 0);            /* one pin, counted hot */
    pp__test_point_hook(late_point, &l);
    pthread_t late;
    cr_assert_eq(pthread_create(&late, NULL, late_main, &l), 0);
    pthread_mutex_lock(&l.mu);
    while (!l.arrived)
        pthread_cond_wait(&l.cv, &l.mu);
    pthread_mutex_unlock(&l.mu);
    /* The late demoter holds the sum 1.  This thread demotes (the word
     * takes the count 1), promotes again if the pool lets it, and drops
     * the pin: wherever it is counted, the entry then holds none. */
    cr_assert_eq(hot(pool, r, HOT_OFF), 0);
    cr_assert_eq(pins_of(pool, r), 1);
    (void)hot(pool, r, HOT_ON);
    assert_rc(pp_unpin(pool, r), 0);
    pthread_mutex_lock(&l.mu);
    l.go = true;
    pthread_cond_broadcast(&l.cv);
    pthread_mutex_unlock(&l.mu);
    cr_assert_eq(pthread_join(late, NULL), 0);
    pp__test_point_hook(NULL, NULL);
    cr_assert_eq(hot(pool, r, HOT_OFF), 0);
    cr_assert_eq(pins_of(pool, r), 0, "the entry holds %u pin(s) nobody took", pins_of(pool, r));
    assert_rc(pp_unpin(pool, r), PP_ENOTPINNED);
    cr_assert(pp__pool_is_valid(pool));
    /* Dead and unpinned: reclaimed, and destroy has nothing to refuse. */
    assert_rc(pp_release(pool, r), 0);
    test_drain(pool);
    cr_assert_eq(ct_frees(ct, 0), 1);
    test_destroy(pool);
    pthread_cond_destroy(&l.cv);
    pthread_mutex_destroy(&l.mu);
    ct_delete(ct);
}

Test(hot, no_promotion_while_pinned_or_dead, .timeout = 30)
{
    pp_pool_t *pool = test_pool(NULL);
    ct_t *ct = ct_new(1);
    pp_ref_t r = ct_put(pool, ct, 0, 64, 0);
    /* A pin held now could be a write pin: no promotion. */
    assert_rc(pp_pin(pool, r, PP_PIN_WRITE, NULL), 0);
    cr_assert_eq(hot(pool, r, HOT_ON), 0);
    assert_rc(pp_unpin(pool, r), 0);
    cr_assert_eq(hot(pool, r, HOT_ON), 1);
    /* A write pin demotes it and is counted on the word. */
    assert_rc(pp_pin(pool, r, PP_PIN_WRITE, NULL), 0);
    cr_assert_eq(hot(pool, r, HOT_ASK), 0);
    cr_assert_eq(pins_of(pool, r), 1);
    cr_assert(test_stat(pool, r).state & PP_STATE_DIRTY);
    assert_rc(pp_unpin(pool, r), 0);
    assert_rc(pp_release(pool, r), 0);
    cr_assert_neq(hot(pool, r, HOT_ON), 1);      /* dead: queued or freed */
    test_destroy(pool);
    cr_assert_eq(ct_frees(ct, 0), 1);
    ct_delete(ct);
}

Test(hot, unbalanced_unpin_is_refused_exactly, .timeout = 30)
{
    pp_pool_t *pool = test_pool(NULL);
    ct_t *ct = ct_new(1);
    pp_ref_t r = ct_put(pool, ct, 0, 64, 0);
    cr_assert_eq(hot(pool, r, HOT_ON), 1);
    assert_rc(pp_unpin(pool, r), PP_ENOTPINNED);   /* decided on the word */
    cr_assert_eq(pins_of(pool, r), 0);
    cr_assert_eq(hot(pool, r, HOT_ON), 1);
    assert_rc(pp_pin(pool, r, 0, NULL), 0);
    assert_rc(pp_pin(pool, r, 0, NULL), 0);
    pp_ref_t three[3] = {r, r, r};
    assert_rc(pp_unpin_many(pool, three, 3, NULL), PP_ENOTPINNED);
    cr_assert_eq(pins_of(pool, r), 2);            /* nothing unpinned */
    assert_rc(pp_unpin_many(pool, three, 2, NULL), 0);
    cr_assert_eq(pins_of(pool, r), 0);
    assert_rc(pp_release(pool, r), 0);
    assert_rc(pp_unpin(pool, r), PP_ESTALE);
    cr_assert(pp__pool_is_valid(pool));
    test_destroy(pool);
    cr_assert_eq(ct_frees(ct, 0), 1);
    ct_delete(ct);
}

/* ------------------------------------------------------------------------ */
/* Pins taken on some threads, dropped on others                            */
/* ------------------------------------------------------------------------ */

#define XT_THREADS 4
#define XT_PINS 2000

typedef struct xt {
    pp_pool_t *pool;
    pp_ref_t ref;
    pthread_barrier_t *bar;
    int role;              /* even: pins, odd: unpins its partner's pins */
} xt_t;

static void *xt_main(void *arg)
{
    xt_t *x = arg;
    pthread_barrier_wait(x->bar);            /* everyone registered */
    if (x->role % 2 == 0) {
        for (int i = 0; i < XT_PINS; i++) {
            void *p = NULL;
            TCHECK(pp_pin(x->pool, x->ref, 0, &p) == 0 && ct_check(p, 0, 256), "pin %d", i);
        }
    }
    pthread_barrier_wait(x->bar);            /* all pins taken */
    if (x->role % 2 == 1) {
        for (int i = 0; i < XT_PINS; i++)
            TCHECK(pp_unpin(x->pool, x->ref) == 0, "unpin %d", i);
    }
    return NULL;
}

Test(hot, pins_dropped_on_other_threads, .timeout = 60)
{
    pp_pool_t *pool = test_pool(NULL);
    ct_t *ct = ct_new(1);
    pp_ref_t r = ct_put(pool, ct, 0, 256, 0);
    cr_assert_eq(hot(pool, r, HOT_ON), 1);
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, XT_THREADS);
    pthread_t th[XT_THREADS];
    xt_t x[XT_THREADS];
    for (int i = 0; i < XT_THREADS; i++) {
        x[i] = (xt_t){pool, r, &bar, i};
        pthread_create(&th[i], NULL, xt_main, &x[i]);
    }
    for (int i = 0; i < XT_THREADS; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&bar);
    TCHECK_NONE();
    /* The unpinners found no pins on their own shards: they took them from
     * the pinners' shards, or demoted and unpinned on the word. */
    cr_assert_eq(pins_of(pool, r), 0);
    assert_rc(pp_unpin(pool, r), PP_ENOTPINNED);
    cr_assert(pp__pool_is_valid(pool));
    pp_stats_t s;
    test_stats(pool, &s);
    cr_assert_eq(s.total.pins, (uint64_t)XT_PINS * XT_THREADS / 2);
    cr_assert_eq(s.total.unpins, (uint64_t)XT_PINS * XT_THREADS / 2);
    test_destroy(pool);
    cr_assert_eq(ct_frees(ct, 0), 1);
    ct_delete(ct);
}

/* ------------------------------------------------------------------------ */
/* The last release of a hot entry, and its final unpin                      */
/* ------------------------------------------------------------------------ */

typedef struct fu {
    pp_pool_t *pool;
    pp_ref_t ref;
    pthread_barrier_t *bar;
    int pins;
} fu_t;

static void *fu_main(void *arg)
{
    fu_t *f = arg;
    for (int i = 0; i < f->pins; i++)
        TCHECK(pp_pin(f->pool, f->ref, 0, NULL) == 0, "pin %d", i);
    pthread_barrier_wait(f->bar);            /* pinned; main releases */
    pthread_barrier_wait(f->bar);            /* released */
    for (int i = 0; i < f->pins; i++)
        TCHECK(pp_unpin(f->pool, f->ref) == 0, "unpin %d", i);
    return NULL;
}

Test(hot, last_release_then_final_unpin_frees_once, .timeout = 60)
{
    pp_pool_t *pool = test_pool(NULL);
    ct_t *ct = ct_new(1);
    pp_ref_t r = ct_put(pool, ct, 0, 64, 0);
    cr_assert_eq(hot(pool, r, HOT_ON), 1);
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, 4);
    pthread_t th[3];
    fu_t f[3];
    for (int i = 0; i < 3; i++) {
        f[i] = (fu_t){pool, r, &bar, 10 + i};
        pthread_create(&th[i], NULL, fu_main, &f[i]);
    }
    pthread_barrier_wait(&bar);
    cr_assert_eq(pins_of(pool, r), 33);
    assert_rc(pp_release(pool, r), 0);       /* demotes: the word has 33 */
    cr_assert_eq(hot(pool, r, HOT_ASK), 0);
    pp_entry_info_t info = test_stat(pool, r);
    cr_assert(info.state & PP_STATE_DEAD);
    cr_assert_eq(info.pins, 33);
    cr_assert_eq(hot(pool, r, HOT_ON), 0);   /* dead: never hot again */
    assert_rc(pp_pin(pool, r, 0, NULL), PP_ESTALE);
    pthread_barrier_wait(&bar);
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&bar);
    TCHECK_NONE();
    test_drain(pool);
    cr_assert_eq(ct_frees(ct, 0), 1);
    assert_rc(pp_unpin(pool, r), PP_ESTALE);
    test_destroy(pool);
    cr_assert_eq(ct_frees(ct, 0), 1);
    ct_delete(ct);
}

Test(hot, overflow_is_exact, .timeout = 120)
{
    pp_pool_t *pool = test_pool(NULL);
    ct_t *ct = ct_new(1);
    pp_ref_t r = ct_put(pool, ct, 0, 64, 0);
    cr_assert_eq(hot(pool, r, HOT_ON), 1);
    /* One thread fills its shard, then the central counter, then demotes
     * and meets the word's exact limit. */
    for (uint32_t i = 0; i < PP_MAX_PINS; i++) {
        int rc = pp_pin(pool, r, 0, NULL);
        if (rc != 0)
            cr_assert_fail("pin %" PRIu32 ": %s", i, pp_err_name(rc));
    }
    assert_rc(pp_pin(pool, r, 0, NULL), PP_EOVERFLOW);
    cr_assert_eq(pins_of(pool, r), PP_MAX_PINS);
    cr_assert_eq(hot(pool, r, HOT_ASK), 0);
    for (uint32_t i = 0; i < PP_MAX_PINS; i++) {
        int rc = pp_unpin(pool, r);
        if (rc != 0)
            cr_assert_fail("unpin %" PRIu32 ": %s", i, pp_err_name(rc));
    }
    cr_assert_eq(pins_of(pool, r), 0);
    test_destroy(pool);
    ct_delete(ct);
}

Test(hot, stale_refs_and_slot_reuse, .timeout = 60)
{
    pp_pool_t *pool = test_pool(NULL);
    ct_t *ct = ct_new(80);
    pp_ref_t refs[80];
    /* More entries than hot slots: the last ones find none free. */
    for (int i = 0; i < 80; i++) {
        refs[i] = ct_put(pool, ct, (size_t)i, 64, PP_ON_NODE(0));
        int h = hot(pool, refs[i], HOT_ON);
        cr_assert_eq(h, i < (int)PP__HOT_SLOTS ? 1 : 0, "entry %d: %d", i, h);
    }
    pp_node_stats_t s;
    test_node_stats(pool, 0, &s);
    cr_assert_eq(s.hot_entries, PP__HOT_SLOTS);
    cr_assert_eq(s.hot_full, 80 - PP__HOT_SLOTS);
    for (int i = 0; i < 80; i++)
        assert_rc(pp_release(pool, refs[i]), 0);
    test_drain(pool);
    test_node_stats(pool, 0, &s);
    cr_assert_eq(s.hot_entries, 0);   /* every slot given back */
    for (int i = 0; i < 80; i++) {
        assert_rc(pp_pin(pool, refs[i], 0, NULL), PP_ESTALE);
        assert_rc(pp_unpin(pool, refs[i]), PP_ESTALE);
    }
    /* Slots (entry and hot) are reused: the old refs stay stale. */
    pp_ref_t again = ct_put(pool, ct, 0, 64, PP_ON_NODE(0));
    cr_assert_eq(hot(pool, again, HOT_ON), 1);
    for (int i = 0; i < 80; i++)
        assert_rc(pp_pin(pool, refs[i], 0, NULL), PP_ESTALE);
    assert_rc(pp_pin(pool, again, 0, NULL), 0);
    cr_assert_eq(pins_of(pool, again), 1);
    assert_rc(pp_unpin(pool, again), 0);
    cr_assert(pp__pool_is_valid(pool));
    test_destroy(pool);
    for (int i = 0; i < 80; i++)
        cr_assert_eq(ct_frees(ct, (size_t)i), i == 0 ? 2 : 1);
    ct_delete(ct);
}

Test(hot, destroy_reports_hot_pins, .timeout = 30)
{
    report_cap_t cap;
    report_cap_init(&cap);
    pp_options_t opt = PP_OPTIONS_INIT;
    report_cap_attach(&cap, &opt);
    pp_pool_t *pool = test_pool(&opt);
    ct_t *ct = ct_new(1);
    pp_ref_t r = ct_put(pool, ct, 0, 64, 0);
    cr_assert_eq(hot(pool, r, HOT_ON), 1);
    assert_rc(pp_pin(pool, r, 0, NULL), 0);
    assert_rc(pp_pin(pool, r, 0, NULL), 0);
    assert_rc(pp_pool_destroy(pool), PP_EBUSY);
    cr_assert_geq(report_cap_count(&cap), 1);
    cr_assert(report_has(&cap, 0, "still holds 2 pin(s)", NULL, NULL));
    assert_rc(pp_unpin(pool, r), 0);
    assert_rc(pp_unpin(pool, r), 0);
    test_destroy(pool);
    cr_assert_eq(ct_frees(ct, 0), 1);
    ct_delete(ct);
    report_cap_free(&cap);
}

Test(hot, pin_many_write_demotes, .timeout = 30)
{
    pp_pool_t *pool = test_pool(NULL);
    ct_t *ct = ct_new(2);
    pp_ref_t r[2] = {ct_put(pool, ct, 0, 64, 0), ct_put(pool, ct, 1, 64, 0)};
    cr_assert_eq(hot(pool, r[0], HOT_ON), 1);
    cr_assert_eq(hot(pool, r[1], HOT_ON), 1);
    void *d[2];
    assert_rc(pp_pin_many(pool, r, 2, 0, d), 0);         /* read: stays hot */
    cr_assert_eq(hot(pool, r[0], HOT_ASK), 1);
    cr_assert(ct_check(d[0], 0, 64) && ct_check(d[1], 1, 64));
    assert_rc(pp_unpin_many(pool, r, 2, NULL), 0);
    assert_rc(pp_pin_many(pool, r, 2, PP_PIN_WRITE, d), 0);
    cr_assert_eq(hot(pool, r[0], HOT_ASK), 0);
    cr_assert_eq(hot(pool, r[1], HOT_ASK), 0);
    cr_assert_eq(pins_of(pool, r[0]), 1);
    cr_assert(test_stat(pool, r[1]).state & PP_STATE_DIRTY);
    assert_rc(pp_unpin_many(pool, r, 2, NULL), 0);
    test_destroy(pool);
    ct_delete(ct);
}

/* ------------------------------------------------------------------------ */
/* Contention promotes; many threads on one hot entry                        */
/* ------------------------------------------------------------------------ */

typedef struct ct_arg {
    pp_pool_t *pool;
    pp_ref_t ref;
    _Atomic int *stop;
    long done;
} hammer_t;

static void *hammer_main(void *arg)
{
    hammer_t *h = arg;
    long n = 0;
    while (!atomic_load_explicit(h->stop, memory_order_relaxed) && n < 20000000) {
        void *p = NULL;
        int rc = pp_pin(h->pool, h->ref, 0, &p);
        TCHECK(rc == 0, "pin: %s", pp_err_name(rc));
        if (rc != 0)
            break;
        TCHECK(ct_check(p, 0, 64), "bytes");
        rc = pp_unpin(h->pool, h->ref);
        TCHECK(rc == 0, "unpin: %s", pp_err_name(rc));
        n++;
    }
    h->done = n;
    return NULL;
}

Test(hot, contention_promotes, .timeout = 120)
{
    pp_pool_t *pool = test_pool(NULL);
    pp__debug_hot_after(pool, 1);
    /* Debug builds: a yield before each pin's CAS, so that the CASes fail
     * even when the hammers share one CPU (a loaded machine); release
     * builds count on the two CPUs. */
    if (pp__debug_yield_available())
        pp__debug_yield_set(PP__YIELD_PIN, 2);
    ct_t *ct = ct_new(1);
    pp_ref_t r = ct_put(pool, ct, 0, 64, 0);
    _Atomic int stop = 0;
    enum { T = 8 };
    pthread_t th[T];
    hammer_t h[T];
    for (int i = 0; i < T; i++) {
        h[i] = (hammer_t){pool, r, &stop, 0};
        pthread_create(&th[i], NULL, hammer_main, &h[i]);
    }
    /* Bounded: the hammers stop on their own after 20 M pairs each. */
    bool promoted = WAIT_UNTIL(STAT_TOTAL(pool, hot_promotions) > 0, 60000);
    atomic_store(&stop, 1);
    pp__debug_yield_set(0, 0);
    long total = 0;
    for (int i = 0; i < T; i++) {
        pthread_join(th[i], NULL);
        total += h[i].done;
    }
    TCHECK_NONE();
    cr_assert(promoted, "no promotion after %ld pin+unpin pairs on 8 threads", total);
    cr_assert_eq(pins_of(pool, r), 0);
    pp_stats_t s;
    test_stats(pool, &s);
    cr_assert_eq(s.total.pins, (uint64_t)total);
    cr_assert_eq(s.total.unpins, (uint64_t)total);
    cr_assert(pp__pool_is_valid(pool));
    test_destroy(pool);
    cr_assert_eq(ct_frees(ct, 0), 1);
    ct_delete(ct);
}

/* ------------------------------------------------------------------------ */
/* Promotions and demotions racing each other and the pins                   */
/* ------------------------------------------------------------------------ */

/* Each pinner runs at least STORM_PAIRS pairs and until the entry has been
 * promoted STORM_PROMOTIONS times, STORM_MAX_PAIRS pairs at most (a
 * registered demoter holds promotions back, so the count is not sure to
 * be reached). */
enum { STORM_PAIRS = 20000, STORM_PROMOTIONS = 200, STORM_MAX_PAIRS = 2000000,
       STORM_PINNERS = 3 };

typedef struct storm {
    pp_pool_t *pool;
    pp_ref_t ref;
    _Atomic int pinners_left;
    _Atomic long pairs;                  /* done by all pinners */
} storm_t;

/* Pins twice, drops both: every unpin must find its pin, wherever the
 * entry counts it at that moment. */
static void *storm_pinner(void *arg)
{
    storm_t *s = arg;
    for (int i = 0; i < STORM_MAX_PAIRS; i++) {
        if (i >= STORM_PAIRS && i % 1024 == 0 &&
            STAT_TOTAL(s->pool, hot_promotions) >= STORM_PROMOTIONS)
            break;
        void *p = NULL;
        int rc1 = pp_pin(s->pool, s->ref, 0, &p);
        int rc2 = pp_pin(s->pool, s->ref, 0, &p);
        int rc3 = pp_unpin(s->pool, s->ref);
        int rc4 = pp_unpin(s->pool, s->ref);
        TCHECK(rc1 == 0 && rc2 == 0 && rc3 == 0 && rc4 == 0,
               "pair %d: pin %s, pin %s, unpin %s, unpin %s", i, pp_err_name(rc1),
               pp_err_name(rc2), pp_err_name(rc3), pp_err_name(rc4));
        if (rc1 != 0 || rc2 != 0 || rc3 != 0 || rc4 != 0)
            break;
        atomic_fetch_add_explicit(&s->pairs, 1, memory_order_relaxed);
    }
    atomic_fetch_sub(&s->pinners_left, 1);
    return NULL;
}

/* Demotes (op 0) or promotes (op 1) the entry until the pinners are done,
 * as the eviction hand, a write pin and contended pins do. */
typedef struct storm_mode {
    storm_t *s;
    int op;
} storm_mode_t;

static void *storm_mode(void *arg)
{
    storm_mode_t *m = arg;
    while (atomic_load(&m->s->pinners_left) > 0)
        (void)hot(m->s->pool, m->s->ref, m->op);
    return NULL;
}

/* Every build: a demoter about to install its sum lets others run. */
static void storm_point(enum pp__test_point where, void *arg, void *ctx)
{
    (void)where, (void)arg, (void)ctx;
    sched_yield();
}

/* Two demoters and a promoter against three pinners, with a yield before
 * each demoter's install and, in debug builds, yields in the pin and unpin
 * paths.  Without the demoters' registration in their slot (hot.c), a
 * late demoter put its old sum over a new promotion in every one of 10
 * runs (default build): a PP_ENOTPINNED for a pin that was held, or pins
 * left that nobody held. */
Test(hot, promotions_and_demotions_race_the_pins, .timeout = 120)
{
    pp_pool_t *pool = test_pool(NULL);
    if (pp__debug_yield_available())
        pp__debug_yield_set(PP__YIELD_PIN | PP__YIELD_UNPIN, 3);
    pp__test_point_hook(storm_point, NULL);
    ct_t *ct = ct_new(1);
    storm_t s = {pool, ct_put(pool, ct, 0, 64, 0), STORM_PINNERS, 0};
    storm_mode_t modes[3] = {{&s, HOT_OFF}, {&s, HOT_OFF}, {&s, HOT_ON}};
    pthread_t th[STORM_PINNERS + 3];
    for (int i = 0; i < STORM_PINNERS; i++)
        cr_assert_eq(pthread_create(&th[i], NULL, storm_pinner, &s), 0);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(pthread_create(&th[STORM_PINNERS + i], NULL, storm_mode, &modes[i]), 0);
    for (int i = 0; i < STORM_PINNERS + 3; i++)
        pthread_join(th[i], NULL);
    pp__debug_yield_set(0, 0);
    pp__test_point_hook(NULL, NULL);
    TCHECK_NONE();
    cr_assert(pp__pool_is_valid(pool));
    cr_assert_eq(hot(pool, s.ref, HOT_OFF), 0);
    cr_assert_eq(pins_of(pool, s.ref), 0, "%u pin(s) nobody holds", pins_of(pool, s.ref));
    pp_stats_t st;
    test_stats(pool, &st);
    cr_assert_gt(st.total.hot_promotions, 0, "%" PRIu64 " promotions in %ld pairs",
                  st.total.hot_promotions, atomic_load(&s.pairs));
    cr_assert_eq(st.total.hot_promotions, st.total.hot_demotions);
    cr_assert_eq(st.total.pins, 2u * (uint64_t)atomic_load(&s.pairs));
    cr_assert_eq(st.total.unpins, 2u * (uint64_t)atomic_load(&s.pairs));
    assert_rc(pp_release(pool, s.ref), 0);
    test_drain(pool);
    cr_assert_eq(ct_frees(ct, 0), 1);
    test_destroy(pool);
    ct_delete(ct);
}
