/* test_scope.c -- scopes: the ledger of a task's pins (src/api/scope.c). */
#include "helpers.h"

#include "testing/testhooks.h" /* pp__alloc_fail_after, pp__alloc_count, pp__alloc_fault_hook */
#include "support/steal.h"

/* Puts n counted entries; refs[i] is entry i. */
static void put_n(pp_pool_t *pool, ct_t *ct, pp_ref_t *refs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        refs[i] = ct_put(pool, ct, i, 64, 0);
}

static uint32_t pins_of(pp_pool_t *pool, pp_ref_t ref)
{
    return test_stat(pool, ref).pins;
}

/* ---- the common case -------------------------------------------------------- */

Test(scope, end_drops_every_pin_taken_through_it, .timeout = 30)
{
    pp_pool_t *pool = test_pool(NULL);
    ct_t *ct = ct_new(4);
    pp_ref_t r[4];
    put_n(pool, ct, r, 4);
    assert_rc(pp_pin(pool, r[3], 0, NULL), 0);   /* a pin not taken through the scope */

    pp_scope_t s;
    pp_scope_init(&s, pool);
    cr_assert_eq(pp_scope_count(&s), 0);
    void *d0 = NULL, *d[2] = {NULL, NULL};
    assert_rc(pp_scope_pin(&s, r[0], 0, &d0), 0);
    void *direct;
    assert_rc(pp_pin(pool, r[0], 0, &direct), 0);
    cr_assert_eq(d0, direct, "the scope's pin hands out the entry's data");
    assert_rc(pp_unpin(pool, r[0]), 0);
    assert_rc(pp_scope_pin_many(&s, &r[1], 2, PP_PIN_WRITE, d), 0);
    cr_assert(d[0] != NULL && d[1] != NULL);
    assert_rc(pp_scope_pin(&s, r[0], 0, NULL), 0);   /* the same ref twice */
    cr_assert_eq(pp_scope_count(&s), 4);
    cr_assert_eq(pins_of(pool, r[0]), 2);
    cr_assert_eq(pins_of(pool, r[1]), 1);
    cr_assert(test_stat(pool, r[1]).state & PP_STATE_DIRTY, "write pins mark dirty");

    assert_rc(pp_scope_end(&s), 0);
    cr_assert_eq(pp_scope_count(&s), 0);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(pins_of(pool, r[i]), 0, "entry %d", i);
    cr_assert_eq(pins_of(pool, r[3]), 1, "a pin taken outside the scope is not its");
    assert_rc(pp_unpin(pool, r[3]), 0);

    /* An ended scope may be initialized again. */
    pp_scope_init(&s, pool);
    assert_rc(pp_scope_pin(&s, r[2], 0, NULL), 0);
    assert_rc(pp_scope_end(&s), 0);
    cr_assert_eq(pins_of(pool, r[2]), 0);
    release_each(pool, r, 4);
    test_destroy(pool);
    ct_delete(ct);
}

Test(scope, pins_are_counted_as_pins, .timeout = 30)
{
    pp_pool_t *pool = test_pool(NULL);
    ct_t *ct = ct_new(2);
    pp_ref_t r[2];
    put_n(pool, ct, r, 2);
    uint64_t pins0 = STAT_TOTAL(pool, pins), unpins0 = STAT_TOTAL(pool, unpins);
    pp_scope_t s;
    pp_scope_init(&s, pool);
    assert_rc(pp_scope_pin(&s, r[0], 0, NULL), 0);
    assert_rc(pp_scope_pin_many(&s, r, 2, 0, NULL), 0);
    assert_rc(pp_scope_unpin(&s, r[1]), 0);
    assert_rc(pp_scope_end(&s), 0);
    cr_assert_eq(STAT_TOTAL(pool, pins) - pins0, 3);
    cr_assert_eq(STAT_TOTAL(pool, unpins) - unpins0, 3);
    release_each(pool, r, 2);
    test_destroy(pool);
    ct_delete(ct);
}

/* ---- pp_pin's errors, and nothing recorded ---------------------------------- */

Test(scope, failed_pins_are_not_recorded, .timeout = 30)
{
    pp_pool_t *pool = test_pool(NULL);
    ct_t *ct = ct_new(4);
    pp_ref_t r[3];
    put_n(pool, ct, r, 3);
    pp_ref_t dead = ct_put(pool, ct, 3, 64, 0);
    assert_rc(pp_release(pool, dead), 0);
    test_drain(pool);

    pp_scope_t s;
    pp_scope_init(&s, pool);
    assert_rc(pp_scope_pin(&s, r[0], 0x80u, NULL), PP_EINVAL);
    assert_rc(pp_scope_pin(&s, dead, 0, NULL), PP_ESTALE);
    assert_rc(pp_scope_pin(&s, PP_REF_NONE, 0, NULL), PP_ESTALE);
    cr_assert_eq(pp_scope_count(&s), 0);
    cr_assert_eq(pins_of(pool, r[0]), 0);

    /* pin_many: all or none, so a stale ref in the middle leaves nothing. */
    pp_ref_t three[3] = {r[0], dead, r[1]};
    assert_rc(pp_scope_pin_many(&s, three, 3, 0, NULL), PP_ESTALE);
    assert_rc(pp_scope_pin_many(&s, NULL, 1, 0, NULL), PP_EINVAL);
    assert_rc(pp_scope_pin_many(&s, r, 2, 0x80u, NULL), PP_EINVAL);
    assert_rc(pp_scope_pin_many(&s, NULL, 0, 0, NULL), 0);
    cr_assert_eq(pp_scope_count(&s), 0);
    cr_assert_eq(pins_of(pool, r[0]), 0);
    cr_assert_eq(pins_of(pool, r[1]), 0);
    assert_rc(pp_scope_end(&s), 0);
    release_each(pool, r, 3);
    test_destroy(pool);
    ct_delete(ct);
}

/* ---- misuse ----------------------------------------------------------------- */

Test(scope, ended_and_zeroed_scopes_refuse_every_call, .timeout = 30)
{
    pp_pool_t *pool = test_pool(NULL);
    ct_t *ct = ct_new(1);
    pp_ref_t r = ct_put(pool, ct, 0, 64, 0);

    pp_scope_t s;
    pp_scope_init(&s, pool);
    assert_rc(pp_scope_pin(&s, r, 0, NULL), 0);
    assert_rc(pp_scope_end(&s), 0);
    assert_rc(pp_scope_end(&s), PP_EINVAL);            /* ended twice */
    assert_rc(pp_scope_pin(&s, r, 0, NULL), PP_EINVAL);
    assert_rc(pp_scope_pin_many(&s, &r, 1, 0, NULL), PP_EINVAL);
    assert_rc(pp_scope_unpin(&s, r), PP_EINVAL);
    cr_assert_eq(pp_scope_count(&s), 0);
    cr_assert_eq(pins_of(pool, r), 0, "no call on an ended scope pinned");

    pp_scope_t z;
    memset(&z, 0, sizeof z);                          /* never initialized */
    assert_rc(pp_scope_pin(&z, r, 0, NULL), PP_EINVAL);
    assert_rc(pp_scope_unpin(&z, r), PP_EINVAL);
    assert_rc(pp_scope_end(&z), PP_EINVAL);
    cr_assert_eq(pp_scope_count(&z), 0);

    assert_rc(pp_scope_pin(NULL, r, 0, NULL), PP_EINVAL);
    assert_rc(pp_scope_pin_many(NULL, &r, 1, 0, NULL), PP_EINVAL);
    assert_rc(pp_scope_unpin(NULL, r), PP_EINVAL);
    assert_rc(pp_scope_end(NULL), PP_EINVAL);
    cr_assert_eq(pp_scope_count(NULL), 0);

    pp_scope_t np;
    pp_scope_init(&np, NULL);                         /* no pool */
    assert_rc(pp_scope_pin(&np, r, 0, NULL), PP_EINVAL);
    assert_rc(pp_scope_end(&np), PP_EINVAL);
    cr_assert_eq(pins_of(pool, r), 0);

    assert_rc(pp_release(pool, r), 0);
    test_destroy(pool);
    ct_delete(ct);
}

Test(scope, unpin_drops_one_pin_it_holds_and_no_other, .timeout = 30)
{
    pp_pool_t *pool = test_pool(NULL);
    ct_t *ct = ct_new(3);
    pp_ref_t r[3];
    put_n(pool, ct, r, 3);
    assert_rc(pp_pin(pool, r[1], 0, NULL), 0);       /* outside the scope */

    pp_scope_t s;
    pp_scope_init(&s, pool);
    assert_rc(pp_scope_pin(&s, r[0], 0, NULL), 0);
    assert_rc(pp_scope_pin(&s, r[0], 0, NULL), 0);
    assert_rc(pp_scope_pin(&s, r[2], 0, NULL), 0);
    assert_rc(pp_scope_unpin(&s, r[1]), PP_ENOTPINNED);   /* pinned, but not through s */
    cr_assert_eq(pins_of(pool, r[1]), 1);
    cr_assert_eq(pp_scope_count(&s), 3);

    assert_rc(pp_scope_unpin(&s, r[0]), 0);
    cr_assert_eq(pins_of(pool, r[0]), 1);
    cr_assert_eq(pp_scope_count(&s), 2);
    assert_rc(pp_scope_unpin(&s, r[0]), 0);
    assert_rc(pp_scope_unpin(&s, r[0]), PP_ENOTPINNED);   /* both dropped */
    cr_assert_eq(pins_of(pool, r[0]), 0);
    cr_assert_eq(pp_scope_count(&s), 1);

    assert_rc(pp_scope_end(&s), 0);
    cr_assert_eq(pins_of(pool, r[2]), 0);
    cr_assert_eq(pins_of(pool, r[1]), 1);
    assert_rc(pp_unpin(pool, r[1]), 0);
    release_each(pool, r, 3);
    test_destroy(pool);
    ct_delete(ct);
}

/* A pin of the scope dropped behind its back with pp_unpin: the scope's
 * unpin reports it and keeps its record; the end drops every other pin,
 * ends the scope and reports the first error. */
Test(scope, pin_dropped_behind_its_back, .timeout = 30)
{
    pp_pool_t *pool = test_pool(NULL);
    ct_t *ct = ct_new(3);
    pp_ref_t r[3];
    put_n(pool, ct, r, 3);
    pp_scope_t s;
    pp_scope_init(&s, pool);
    assert_rc(pp_scope_pin(&s, r[0], 0, NULL), 0);
    assert_rc(pp_scope_pin(&s, r[1], 0, NULL), 0);
    assert_rc(pp_scope_pin(&s, r[2], 0, NULL), 0);
    assert_rc(pp_unpin(pool, r[1]), 0);               /* the misuse */

    assert_rc(pp_scope_unpin(&s, r[1]), PP_ENOTPINNED);
    cr_assert_eq(pp_scope_count(&s), 3, "a failed unpin leaves the record");
    assert_rc(pp_scope_end(&s), PP_ENOTPINNED);
    cr_assert_eq(pins_of(pool, r[0]), 0);
    cr_assert_eq(pins_of(pool, r[1]), 0, "no count went below zero");
    cr_assert_eq(pins_of(pool, r[2]), 0);
    assert_rc(pp_scope_end(&s), PP_EINVAL, "it is ended all the same");
    release_each(pool, r, 3);
    test_destroy(pool);
    ct_delete(ct);
}

/* ---- capacity --------------------------------------------------------------- */

#define MANY 100

Test(scope, inline_capacity_then_the_heap, .timeout = 60)
{
    pp_pool_t *pool = test_pool(NULL);
    ct_t *ct = ct_new(MANY);
    pp_ref_t r[MANY];
    put_n(pool, ct, r, MANY);

    pp_scope_t s;
    pp_scope_init(&s, pool);
    uint64_t a0 = pp__alloc_count();
    for (unsigned i = 0; i < PP_SCOPE_INLINE; i++)
        assert_rc(pp_scope_pin(&s, r[i], 0, NULL), 0);
    cr_assert_eq(pp__alloc_count(), a0, "the inline capacity allocates nothing");

    /* The first pin past it needs the heap; if that fails, no pin. */
    pp__alloc_fail_after(0);
    int rc = pp_scope_pin(&s, r[PP_SCOPE_INLINE], 0, NULL);
    pp__alloc_fail_after(-1);
    assert_rc(rc, PP_ENOMEM);
    cr_assert_eq(pins_of(pool, r[PP_SCOPE_INLINE]), 0);
    cr_assert_eq(pp_scope_count(&s), PP_SCOPE_INLINE);

    for (unsigned i = PP_SCOPE_INLINE; i < MANY / 2; i++)
        assert_rc(pp_scope_pin(&s, r[i], 0, NULL), 0);
    cr_assert(pp__alloc_count() > a0);
    /* A batch that needs the ledger to grow and cannot: no pin of it. */
    uint64_t a1 = pp__alloc_count();
    pp__alloc_fail_after(0);
    rc = pp_scope_pin_many(&s, &r[MANY / 2], MANY / 2, 0, NULL);
    pp__alloc_fail_after(-1);
    assert_rc(rc, PP_ENOMEM);
    for (unsigned i = MANY / 2; i < MANY; i++)
        cr_assert_eq(pins_of(pool, r[i]), 0, "entry %u", i);
    assert_rc(pp_scope_pin_many(&s, &r[MANY / 2], MANY / 2, 0, NULL), 0);
    cr_assert(pp__alloc_count() > a1);
    cr_assert_eq(pp_scope_count(&s), MANY);

    /* Early unpins from both ends of the ledger, then the end drops the rest. */
    assert_rc(pp_scope_unpin(&s, r[0]), 0);
    assert_rc(pp_scope_unpin(&s, r[MANY - 1]), 0);
    cr_assert_eq(pp_scope_count(&s), MANY - 2);
    for (unsigned i = 1; i < MANY - 1; i++)
        cr_assert_eq(pins_of(pool, r[i]), 1, "entry %u", i);
    assert_rc(pp_scope_end(&s), 0);
    for (unsigned i = 0; i < MANY; i++)
        cr_assert_eq(pins_of(pool, r[i]), 0, "entry %u", i);
    release_each(pool, r, MANY);
    test_destroy(pool);
    ct_delete(ct);
}

/* ---- threads ---------------------------------------------------------------- */

typedef struct hand {
    pp_pool_t *pool;
    pp_scope_t *s;
    const pp_ref_t *refs;
    size_t from, n;
    int rc;
} hand_t;

static void *pin_part(void *arg)
{
    hand_t *h = arg;
    h->rc = 0;
    for (size_t i = h->from; i < h->from + h->n && h->rc == 0; i++)
        h->rc = pp_scope_pin(h->s, h->refs[i], 0, NULL);
    return NULL;
}

static void *end_scope(void *arg)
{
    hand_t *h = arg;
    h->rc = pp_scope_end(h->s);
    return NULL;
}

/* A task pinned on two workers in turn and ended on a third: the scope
 * passes from thread to thread (the joins hand it over). */
Test(scope, pinned_on_two_threads_ended_on_a_third, .timeout = 30)
{
    pp_pool_t *pool = test_pool(NULL);
    ct_t *ct = ct_new(40);
    pp_ref_t r[40];
    put_n(pool, ct, r, 40);
    pp_scope_t s;
    pp_scope_init(&s, pool);
    hand_t a = {pool, &s, r, 0, 20, -1}, b = {pool, &s, r, 20, 20, -1}, c = {pool, &s, r, 0, 0, -1};
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, pin_part, &a), 0);
    pthread_join(t, NULL);
    cr_assert_eq(pthread_create(&t, NULL, pin_part, &b), 0);
    pthread_join(t, NULL);
    assert_rc(a.rc, 0);
    assert_rc(b.rc, 0);
    cr_assert_eq(pp_scope_count(&s), 40);
    cr_assert_eq(pthread_create(&t, NULL, end_scope, &c), 0);
    pthread_join(t, NULL);
    assert_rc(c.rc, 0);
    for (int i = 0; i < 40; i++)
        cr_assert_eq(pins_of(pool, r[i]), 0, "entry %d", i);
    release_each(pool, r, 40);
    test_destroy(pool);
    ct_delete(ct);
}

/* Two calls on one scope at once: a thread is held inside pp_scope_pin
 * (at the ledger's allocation, through the fault hook) while the test
 * calls every function on the same scope; each gets PP_EINUSE and does
 * nothing. */
typedef struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool inside, go;
} gate_t;

static gate_t g_gate = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, false};

static __thread bool t_held;   /* this thread is the one to hold */

static bool hold_inside(size_t size, void *ctx)
{
    (void)size, (void)ctx;
    if (!t_held)
        return false;                     /* another thread's allocation */
    pthread_mutex_lock(&g_gate.mu);
    if (!g_gate.inside) {
        g_gate.inside = true;
        pthread_cond_broadcast(&g_gate.cv);
        while (!g_gate.go)
            pthread_cond_wait(&g_gate.cv, &g_gate.mu);
    }
    pthread_mutex_unlock(&g_gate.mu);
    return false;                         /* the allocation succeeds */
}

static void *pin_held(void *arg)
{
    t_held = true;
    return pin_part(arg);
}

Test(scope, two_calls_at_once_are_refused, .timeout = 30)
{
    pp_pool_t *pool = test_pool(NULL);
    ct_t *ct = ct_new(PP_SCOPE_INLINE + 2);
    pp_ref_t r[PP_SCOPE_INLINE + 2];
    put_n(pool, ct, r, PP_SCOPE_INLINE + 2);
    pp_scope_t s;
    pp_scope_init(&s, pool);
    for (unsigned i = 0; i < PP_SCOPE_INLINE; i++)
        assert_rc(pp_scope_pin(&s, r[i], 0, NULL), 0);

    pp__alloc_fault_hook(hold_inside, NULL);
    hand_t h = {pool, &s, r, PP_SCOPE_INLINE, 1, -1};
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, pin_held, &h), 0);
    pthread_mutex_lock(&g_gate.mu);
    while (!g_gate.inside)
        pthread_cond_wait(&g_gate.cv, &g_gate.mu);
    pthread_mutex_unlock(&g_gate.mu);

    pp_ref_t last = r[PP_SCOPE_INLINE + 1];
    int rc_pin = pp_scope_pin(&s, last, 0, NULL);
    int rc_many = pp_scope_pin_many(&s, &last, 1, 0, NULL);
    int rc_unpin = pp_scope_unpin(&s, r[0]);
    int rc_end = pp_scope_end(&s);
    uint32_t last_pins = pins_of(pool, last), first_pins = pins_of(pool, r[0]);

    pthread_mutex_lock(&g_gate.mu);
    g_gate.go = true;
    pthread_cond_broadcast(&g_gate.cv);
    pthread_mutex_unlock(&g_gate.mu);
    pthread_join(t, NULL);
    pp__alloc_fault_hook(NULL, NULL);

    assert_rc(rc_pin, PP_EINUSE);
    assert_rc(rc_many, PP_EINUSE);
    assert_rc(rc_unpin, PP_EINUSE);
    assert_rc(rc_end, PP_EINUSE);
    cr_assert_eq(last_pins, 0);
    cr_assert_eq(first_pins, 1);
    assert_rc(h.rc, 0, "the call in progress completes");
    cr_assert_eq(pp_scope_count(&s), PP_SCOPE_INLINE + 1);
    assert_rc(pp_scope_end(&s), 0);
    for (unsigned i = 0; i < PP_SCOPE_INLINE + 2; i++)
        cr_assert_eq(pins_of(pool, r[i]), 0, "entry %u", i);
    release_each(pool, r, PP_SCOPE_INLINE + 2);
    test_destroy(pool);
    ct_delete(ct);
}

/* Many tasks at once, each with its own scope, over shared entries: every
 * count returns to zero. */
#define TASKS_THREADS 4
#define TASKS_ENTRIES 64

typedef struct tasks {
    pp_pool_t *pool;
    const pp_ref_t *refs;
    unsigned seed;
} tasks_t;

static void *run_tasks(void *arg)
{
    tasks_t *w = arg;
    uint64_t st = w->seed;
    for (int task = 0; task < 400; task++) {
        pp_scope_t s;
        pp_scope_init(&s, w->pool);
        unsigned k = (unsigned)(splitmix64(&st) % 40);   /* past the inline capacity too */
        for (unsigned i = 0; i < k; i++) {
            pp_ref_t ref = w->refs[splitmix64(&st) % TASKS_ENTRIES];
            int rc = (i % 5 == 4) ? pp_scope_pin_many(&s, w->refs, 3, 0, NULL)
                                  : pp_scope_pin(&s, ref, (i & 1) ? PP_PIN_WRITE : 0, NULL);
            TCHECK(rc == 0, "task pin: %s", pp_err_name(rc));
            if (i % 7 == 6) {
                rc = pp_scope_unpin(&s, ref);
                TCHECK(rc == 0 || rc == PP_ENOTPINNED, "task unpin: %s", pp_err_name(rc));
            }
        }
        int rc = pp_scope_end(&s);
        TCHECK(rc == 0, "task end: %s", pp_err_name(rc));
    }
    return NULL;
}

Test(scope, many_tasks_at_once_leave_no_pin, .timeout = 120)
{
    pp_pool_t *pool = test_pool(NULL);
    ct_t *ct = ct_new(TASKS_ENTRIES);
    pp_ref_t r[TASKS_ENTRIES];
    put_n(pool, ct, r, TASKS_ENTRIES);
    tasks_t w[TASKS_THREADS];
    pthread_t t[TASKS_THREADS];
    for (unsigned i = 0; i < TASKS_THREADS; i++) {
        w[i] = (tasks_t){pool, r, 17u + i};
        cr_assert_eq(pthread_create(&t[i], NULL, run_tasks, &w[i]), 0);
    }
    for (unsigned i = 0; i < TASKS_THREADS; i++)
        pthread_join(t[i], NULL);
    TCHECK_NONE();
    for (unsigned i = 0; i < TASKS_ENTRIES; i++)
        cr_assert_eq(pins_of(pool, r[i]), 0, "entry %u", i);
    release_each(pool, r, TASKS_ENTRIES);
    test_destroy(pool);
    cr_assert_eq(ct_frees(ct, 0), 1);
    ct_delete(ct);
}

/* ---- leaks under PP_TRACK_PINS ------------------------------------------- */

typedef struct leaky {
    pp_pool_t *pool;
    pp_scope_t *s;
    pp_ref_t a, b;
    int line;
    int tid;
    int rc_exit;
} leaky_t;

static void *leak_scope(void *arg)
{
    leaky_t *l = arg;
    l->tid = (int)gettid();
    l->line = __LINE__; pp_scope_init(l->s, l->pool);
    int rc = pp_scope_pin(l->s, l->a, 0, NULL);
    TCHECK(rc == 0, "scope pin: %s", pp_err_name(rc));
    rc = pp_scope_pin_many(l->s, &l->b, 1, 0, NULL);
    TCHECK(rc == 0, "scope pin_many: %s", pp_err_name(rc));
    l->rc_exit = pp_thread_exit(l->pool);            /* the scope never ended */
    return NULL;
}

Test(scope, a_scope_never_ended_is_reported_where_it_was_made, .timeout = 30)
{
    report_cap_t rep;
    report_cap_init(&rep);
    pp_options_t o = PP_OPTIONS_INIT;
    o.flags = PP_TRACK_PINS;
    report_cap_attach(&rep, &o);
    pp_pool_t *pool = test_pool(&o);
    ct_t *ct = ct_new(2);
    pp_scope_t s;
    leaky_t l = {.pool = pool, .s = &s};
    l.a = ct_put(pool, ct, 0, 64, 0);
    l.b = ct_put(pool, ct, 1, 64, 0);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, leak_scope, &l), 0);
    pthread_join(t, NULL);
    TCHECK_NONE();
    assert_rc(l.rc_exit, PP_EBUSY, "pp_thread_exit reports the scope's pins");

    char where[64], tid[32];
    snprintf(where, sizeof where, "test_scope.c:%d", l.line);
    snprintf(tid, sizeof tid, "%d", l.tid);
    pp_ref_t both[2] = {l.a, l.b};
    for (int i = 0; i < 2; i++) {
        char hex[32];
        ref_hex(both[i], hex);
        char *dump = report_dump(&rep);
        cr_assert(report_has(&rep, 0, hex, where, tid),
                  "no report of %s at the scope's creation site %s; lines:%s", hex, where, dump);
        free(dump);
    }
    /* At destroy too, until the scope is ended (on this thread). */
    size_t before = report_cap_count(&rep);
    assert_rc(pp_pool_destroy(pool), PP_EBUSY);
    char hex[32];
    ref_hex(l.a, hex);
    cr_assert(report_has(&rep, before, hex, where, NULL));
    assert_rc(pp_scope_end(&s), 0);
    assert_rc(pp_release(pool, l.a), 0);
    assert_rc(pp_release(pool, l.b), 0);
    test_destroy(pool);
    ct_delete(ct);
    report_cap_free(&rep);
}

/* ---- ends that fail ------------------------------------------------------------ */

/* Opens s on pool and pins each of the n refs through it. */
static void scope_pin_each(pp_scope_t *s, pp_pool_t *pool, const pp_ref_t *r, size_t n)
{
    pp_scope_init(s, pool);
    for (size_t i = 0; i < n; i++)
        assert_rc(pp_scope_pin(s, r[i], 0, NULL), 0);
}

/* Every allocation of the thread that sets this fails. */
static __thread bool t_no_memory;

static bool fail_on_this_thread(size_t size, void *ctx)
{
    (void)size, (void)ctx;
    return t_no_memory;
}

/* Ends the scope on a thread new to the pool, whose registration (its
 * first call) cannot allocate. */
static void *end_without_memory(void *arg)
{
    t_no_memory = true;
    end_scope(arg);
    t_no_memory = false;
    return NULL;
}

Test(scope, an_end_that_cannot_register_keeps_the_pins_for_a_retry, .timeout = 30)
{
    pp_pool_t *pool = test_pool(NULL);
    ct_t *ct = ct_new(2);
    pp_ref_t r[2];
    put_n(pool, ct, r, 2);
    pp_scope_t s;
    scope_pin_each(&s, pool, r, 2);

    hand_t a = {pool, &s, r, 0, 0, 1};
    pthread_t th;
    pp__alloc_fault_hook(fail_on_this_thread, NULL);
    cr_assert_eq(pthread_create(&th, NULL, end_without_memory, &a), 0);
    test_thread_join(th);
    pp__alloc_fault_hook(NULL, NULL);
    assert_rc(a.rc, PP_ENOMEM);
    cr_assert_eq(pins_of(pool, r[0]), 1, "the pins are still held");
    cr_assert_eq(pins_of(pool, r[1]), 1);
    cr_assert_eq(pp_scope_count(&s), 2, "an end that failed for memory keeps its ledger");

    assert_rc(pp_scope_end(&s), 0, "the retry ends it");
    cr_assert_eq(pins_of(pool, r[0]), 0);
    cr_assert_eq(pins_of(pool, r[1]), 0);
    release_each(pool, r, 2);
    test_destroy(pool);
    ct_delete(ct);
}

/* pp_unpin_many passed its check, then another thread unpins one of the
 * scope's refs before the batch drops it (the misuse this test point makes
 * deterministic).  The end must drop each of its other pins exactly once:
 * the pin another holder has on b stays. */
Test(scope, an_end_after_a_concurrent_unpin_drops_each_pin_once, .timeout = 30)
{
    pp_pool_t *pool = test_pool(NULL);
    ct_t *ct = ct_new(2);
    pp_ref_t r[2];
    put_n(pool, ct, r, 2);
    pp_scope_t s;
    scope_pin_each(&s, pool, r, 2);
    assert_rc(pp_pin(pool, r[1], 0, NULL), 0);        /* another holder of b */

    steal_t st = {pool, r[0], 0};
    assert_rc(WITH_STEAL(&st, pp_scope_end(&s)), PP_ENOTPINNED);
    cr_assert_eq(pins_of(pool, r[0]), 0);
    cr_assert_eq(pins_of(pool, r[1]), 1, "the other holder's pin on b was taken");
    cr_assert_eq(pp_scope_count(&s), 0, "nothing is left to drop");
    assert_rc(pp_unpin(pool, r[1]), 0);
    release_each(pool, r, 2);
    test_destroy(pool);
    ct_delete(ct);
}
