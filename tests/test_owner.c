/* test_owner.c -- put, retain, release (src/api/owner.c). */
#include "helpers.h"

#include "testing/testhooks.h" /* pp__debug_set_owners */

Test(owner, put_has_one_owner, .timeout = 30)
{
    pp_pool_t *pool = test_pool(NULL);
    ct_t *ct = ct_new(1);
    pp_ref_t r = ct_put(pool, ct, 0, 100, 0);
    pp_entry_info_t info = test_stat(pool, r);
    cr_assert_eq(info.owners, 1);
    cr_assert_eq(info.pins, 0);
    cr_assert_eq(info.size, 100);
    cr_assert_eq(info.type, &ct->type);
    cr_assert_eq(info.state & PP_STATE_RESIDENT, PP_STATE_RESIDENT);
    cr_assert_eq(info.state, PP_STATE_RESIDENT);
    test_destroy(pool);
    cr_assert_eq(ct_frees(ct, 0), 1);
    ct_delete(ct);
}

Test(owner, retain_release_counts, .timeout = 30)
{
    pp_pool_t *pool = test_pool(NULL);
    ct_t *ct = ct_new(1);
    pp_ref_t r = ct_put(pool, ct, 0, 64, 0);
    for (uint32_t i = 2; i <= 5; i++) {
        assert_rc(pp_retain(pool, r), 0);
        cr_assert_eq(test_stat(pool, r).owners, i);
    }
    for (uint32_t i = 4; i >= 1; i--) {
        assert_rc(pp_release(pool, r), 0);
        pp_entry_info_t info = test_stat(pool, r);
        cr_assert_eq(info.owners, i);
        cr_assert_eq(info.state & PP_STATE_DEAD, 0);
    }
    /* Still alive with one owner: nothing freed, even after a drain. */
    test_drain(pool);
    cr_assert_eq(ct_frees(ct, 0), 0);
    void *p = NULL;
    assert_rc(pp_pin(pool, r, 0, &p), 0);
    cr_assert(ct_check(p, 0, 64));
    assert_rc(pp_unpin(pool, r), 0);

    assert_rc(pp_release(pool, r), 0);
    test_drain(pool);
    cr_assert_eq(ct_frees(ct, 0), 1);
    pp_stats_t s;
    test_stats(pool, &s);
    cr_assert_eq(s.total.retains, 4);
    cr_assert_eq(s.total.releases, 5);
    cr_assert_eq(s.total.entries, 0);
    test_destroy(pool);
    cr_assert_eq(ct_frees(ct, 0), 1);
    ct_delete(ct);
}

Test(owner, release_past_zero_is_stale, .timeout = 30)
{
    pp_pool_t *pool = test_pool(NULL);
    ct_t *ct = ct_new(1);
    pp_ref_t r = ct_put(pool, ct, 0, 64, 0);
    assert_rc(pp_release(pool, r), 0);
    /* At once (queued or being reclaimed) and after the reclaim. */
    assert_rc(pp_release(pool, r), PP_ESTALE);
    test_drain(pool);
    assert_rc(pp_release(pool, r), PP_ESTALE);
    cr_assert_eq(ct_frees(ct, 0), 1);
    pp_stats_t s;
    test_stats(pool, &s);
    cr_assert_eq(s.total.releases, 1);
    cr_assert_eq(s.total.frees, 1);
    test_destroy(pool);
    cr_assert_eq(ct_frees(ct, 0), 1);
    cr_assert_eq(atomic_load(&ct->bad), 0);
    ct_delete(ct);
}

Test(owner, dead_entry_refuses_retain_pin_get, .timeout = 30)
{
    pp_pool_t *pool = test_pool(NULL);
    ct_t *ct = ct_new(1);
    pp_ref_t r = ct_put(pool, ct, 0, 64, 0);
    void *p = NULL;
    /* A pin keeps the dead entry from being reclaimed, so the calls below
     * meet a dead entry, not a recycled slot. */
    assert_rc(pp_pin(pool, r, 0, &p), 0);
    assert_rc(pp_release(pool, r), 0);

    pp_entry_info_t info = test_stat(pool, r);
    cr_assert_eq(info.owners, 0);
    cr_assert_eq(info.pins, 1);
    cr_assert_eq(info.state & PP_STATE_DEAD, PP_STATE_DEAD);

    void *q = NULL;
    assert_rc(pp_retain(pool, r), PP_ESTALE);
    assert_rc(pp_pin(pool, r, 0, &q), PP_ESTALE);
    assert_rc(pp_pin(pool, r, PP_PIN_WRITE, &q), PP_ESTALE);
    assert_rc(pp_get(pool, r, &q), PP_ESTALE);
    assert_rc(pp_release(pool, r), PP_ESTALE);
    assert_rc(pp_prefetch(pool, r), PP_ESTALE);
    info = test_stat(pool, r);
    cr_assert_eq(info.owners, 0);
    cr_assert_eq(info.pins, 1);

    /* None of this freed it. */
    test_drain(pool);
    cr_assert_eq(ct_frees(ct, 0), 0);
    cr_assert(ct_check(p, 0, 64));

    assert_rc(pp_unpin(pool, r), 0);
    test_drain(pool);
    cr_assert_eq(ct_frees(ct, 0), 1);
    assert_rc(pp_retain(pool, r), PP_ESTALE);
    assert_rc(pp_pin(pool, r, 0, &q), PP_ESTALE);
    assert_rc(pp_get(pool, r, &q), PP_ESTALE);
    test_destroy(pool);
    cr_assert_eq(ct_frees(ct, 0), 1);
    ct_delete(ct);
}

Test(owner, owner_overflow, .timeout = 30)
{
    pp_pool_t *pool = test_pool(NULL);
    ct_t *ct = ct_new(1);
    pp_ref_t r = ct_put(pool, ct, 0, 64, 0);

    assert_rc(pp__debug_set_owners(pool, r, PP_MAX_OWNERS - 1), 0);
    cr_assert_eq(test_stat(pool, r).owners, PP_MAX_OWNERS - 1);
    assert_rc(pp_retain(pool, r), 0); /* reaches the maximum */
    cr_assert_eq(test_stat(pool, r).owners, PP_MAX_OWNERS);
    assert_rc(pp_retain(pool, r), PP_EOVERFLOW);
    assert_rc(pp_retain(pool, r), PP_EOVERFLOW);
    cr_assert_eq(test_stat(pool, r).owners, PP_MAX_OWNERS);
    /* A release from the maximum works. */
    assert_rc(pp_release(pool, r), 0);
    cr_assert_eq(test_stat(pool, r).owners, PP_MAX_OWNERS - 1);

    assert_rc(pp__debug_set_owners(pool, r, 1), 0);
    cr_assert_eq(test_stat(pool, r).owners, 1);
    test_drain(pool);
    cr_assert_eq(ct_frees(ct, 0), 0);
    assert_rc(pp_release(pool, r), 0);
    test_drain(pool);
    cr_assert_eq(ct_frees(ct, 0), 1);
    test_destroy(pool);
    cr_assert_eq(ct_frees(ct, 0), 1);
    cr_assert_eq(atomic_load(&ct->bad), 0);
    ct_delete(ct);
}

Test(owner, put_argument_errors, .timeout = 30)
{
    pp_pool_t *pool = test_pool(NULL);
    unsigned nodes = test_nodes(pool);
    ct_t *ct = ct_new(1);
    void *buf = ct_buf(ct, 0, 64);
    pp_ref_t r = 0x1234;

    assert_rc(pp_put(NULL, buf, 64, &ct->type, 0, &r), PP_EINVAL);
    assert_rc(pp_put(pool, NULL, 64, &ct->type, 0, &r), PP_EINVAL);
    assert_rc(pp_put(pool, NULL, 0, NULL, 0, &r), PP_EINVAL);
    assert_rc(pp_put(pool, buf, 64, &ct->type, 0, NULL), PP_EINVAL);
    assert_rc(pp_put(pool, buf, (size_t)PTRDIFF_MAX + 1, &ct->type, 0, &r),
              PP_EINVAL);
    assert_rc(pp_put(pool, buf, SIZE_MAX, &ct->type, 0, &r), PP_EINVAL);
    static const unsigned bad_flags[] = {0x2u, 0x4u, 0x8u, 0x80u, 0x200u,
                                         0x1000000u, 0x80000000u,
                                         PP_ON_NODE(0) | 0x2u,
                                         PP_PUT_NOWAIT | 0x2u};
    for (size_t i = 0; i < sizeof bad_flags / sizeof bad_flags[0]; i++)
        cr_assert_eq(pp_put(pool, buf, 64, &ct->type, bad_flags[i], &r),
                     PP_EINVAL, "flags 0x%x", bad_flags[i]);
    cr_assert_eq(pp_put(pool, buf, 64, &ct->type, PP_ON_NODE(nodes), &r),
                 PP_EINVAL);

    /* Nothing was taken, nothing counted. */
    pp_stats_t s;
    test_stats(pool, &s);
    cr_assert_eq(s.total.entries, 0);
    cr_assert_eq(s.total.puts, 0);
    cr_assert_eq(s.total.resident_bytes, 0);
    test_destroy(pool);
    cr_assert_eq(atomic_load(&ct->total), 0);
    cr_assert(ct_check(buf, 0, 64));
    free(buf); /* ASan reports a double free if the pool had kept it */
    ct_delete(ct);
}

Test(owner, put_size_zero_and_null_type, .timeout = 30)
{
    pp_pool_t *pool = test_pool(NULL);
    void *a = malloc(1), *b = malloc(100);
    pp_ref_t ra, rb;
    assert_rc(pp_put(pool, a, 0, NULL, 0, &ra), 0);
    assert_rc(pp_put(pool, b, 100, NULL, 0, &rb), 0);
    cr_assert_neq(ra, rb);
    pp_entry_info_t info = test_stat(pool, ra);
    cr_assert_eq(info.size, 0);
    cr_assert_null(info.type);
    cr_assert_eq(info.owners, 1);
    void *p = NULL;
    assert_rc(pp_pin(pool, ra, 0, &p), 0);
    cr_assert_eq(p, a);
    assert_rc(pp_unpin(pool, ra), 0);
    pp_stats_t s;
    test_stats(pool, &s);
    cr_assert_eq(s.total.resident_bytes, 100);
    assert_rc(pp_release(pool, ra), 0);
    assert_rc(pp_release(pool, rb), 0);
    test_drain(pool);
    test_stats(pool, &s);
    cr_assert_eq(s.total.frees, 2);
    cr_assert_eq(s.total.entries, 0);
    cr_assert_eq(s.total.resident_bytes, 0);
    test_destroy(pool);
}

/* ---- concurrent retains and releases ----------------------------------- */

#define OWN_THREADS 4
#define OWN_ITERS 5000

typedef struct own_arg {
    pp_pool_t *pool;
    pp_ref_t ref;
    pthread_barrier_t *bar;
} own_arg_t;

static void *own_worker(void *arg)
{
    own_arg_t *a = arg;
    pthread_barrier_wait(a->bar);
    for (int i = 0; i < OWN_ITERS; i++) {
        int rc = pp_retain(a->pool, a->ref);
        TCHECK(rc == 0, "retain: %s", pp_err_name(rc));
        if (i % 3 == 0) {
            rc = pp_retain(a->pool, a->ref);
            TCHECK(rc == 0, "retain: %s", pp_err_name(rc));
            rc = pp_release(a->pool, a->ref);
            TCHECK(rc == 0, "release: %s", pp_err_name(rc));
        }
        rc = pp_release(a->pool, a->ref);
        TCHECK(rc == 0, "release: %s", pp_err_name(rc));
    }
    return NULL;
}

Test(owner, concurrent_retain_release, .timeout = 60)
{
    pp_pool_t *pool = test_pool(NULL);
    ct_t *ct = ct_new(1);
    pp_ref_t r = ct_put(pool, ct, 0, 64, 0);
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, OWN_THREADS);
    pthread_t th[OWN_THREADS];
    own_arg_t a = {pool, r, &bar};
    for (int i = 0; i < OWN_THREADS; i++)
        test_thread_start(&th[i], own_worker, &a);
    for (int i = 0; i < OWN_THREADS; i++)
        test_thread_join(th[i]);
    pthread_barrier_destroy(&bar);
    TCHECK_NONE();
    /* The main thread's owner held it alive the whole time. */
    cr_assert_eq(ct_frees(ct, 0), 0);
    cr_assert_eq(test_stat(pool, r).owners, 1);
    uint64_t extra = (OWN_ITERS + 2) / 3;
    pp_stats_t s;
    test_stats(pool, &s);
    cr_assert_eq(s.total.retains, OWN_THREADS * (OWN_ITERS + extra));
    cr_assert_eq(s.total.releases, OWN_THREADS * (OWN_ITERS + extra));
    assert_rc(pp_release(pool, r), 0);
    test_drain(pool);
    cr_assert_eq(ct_frees(ct, 0), 1);
    test_destroy(pool);
    cr_assert_eq(ct_frees(ct, 0), 1);
    ct_delete(ct);
}
