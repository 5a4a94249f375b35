/*
 * steal.h -- a concurrent unpin made deterministic: at the test point
 * after pp_unpin_many's check (PP__TP_UNPIN_MANY_CHECKED), the hook drops
 * one pin of a ref of the batch, once, as another thread's unpin racing
 * with the batch would (test_pin, test_scope).
 */
#ifndef PP_TEST_STEAL_H
#define PP_TEST_STEAL_H

#include "../helpers.h"

#include "testing/testhooks.h"   /* pp__test_point_hook, PP__TP_UNPIN_MANY_CHECKED */

typedef struct steal {
    pp_pool_t *pool;
    pp_ref_t ref;                        /* whose pin is taken */
    atomic_int done;                     /* 1 once taken */
} steal_t;

static void steal_at_point(enum pp__test_point where, void *arg, void *ctx)
{
    steal_t *st = ctx;
    (void)arg;
    if (where == PP__TP_UNPIN_MANY_CHECKED && atomic_exchange(&st->done, 1) == 0)
        TCHECK(pp_unpin(st->pool, st->ref) == 0, "the stolen unpin");
}

/* Runs call with the hook installed; the hook is removed after it, and
 * the stolen unpin's own check is asserted. */
#define WITH_STEAL(st, call)                                                   \
    __extension__({                                                            \
        pp__test_point_hook(steal_at_point, (st));                             \
        int _rc = (call);                                                      \
        pp__test_point_hook(NULL, NULL);                                       \
        TCHECK_NONE();                                                         \
        cr_assert_eq(atomic_load(&(st)->done), 1, "the test point was reached"); \
        _rc;                                                                   \
    })

#endif /* PP_TEST_STEAL_H */
