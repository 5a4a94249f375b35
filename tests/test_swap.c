/*
 * test_swap.c -- the swap side as it stands (src/swap.c): not built yet,
 * and saying so instead of pretending.
 */
#include "helpers.h"

Test(swap, pool_with_swap_dir_is_not_supported, .timeout = 30)
{
    pp_options_t o = PP_OPTIONS_INIT;
    o.swap_dir = "/tmp";
    pp_pool_t *pool = (pp_pool_t *)(uintptr_t)1;
    assert_rc(test_pool_create(&o, &pool), PP_ENOTSUP);
    cr_assert_null(pool);
}

Test(swap, stream_calls_are_not_supported, .timeout = 30)
{
    char buf[16] = {0};
    /* Only meaningful inside a type's save/load, which the pool never calls
     * while swap is not built. */
    assert_rc(pp_write(NULL, buf, sizeof buf), PP_ENOTSUP);
    assert_rc(pp_read(NULL, buf, sizeof buf), PP_ENOTSUP);
}

/* A type with save/load is accepted and its entries behave as resident
 * entries: save and load are never called, free is. */
static _Atomic int saves, loads;

static int never_save(const void *data, size_t size, pp_writer_t *w, void *ctx)
{
    (void)data; (void)size; (void)w; (void)ctx;
    atomic_fetch_add(&saves, 1);
    return PP_EIO;
}

static int never_load(void **data, size_t size, pp_reader_t *r, void *ctx)
{
    (void)data; (void)size; (void)r; (void)ctx;
    atomic_fetch_add(&loads, 1);
    return PP_EIO;
}

Test(swap, entries_stay_resident_and_never_block, .timeout = 30)
{
    pp_options_t o = PP_OPTIONS_INIT;
    o.mem_limit = 1 << 20;
    pp_pool_t *pool = test_pool(&o);
    static pp_type_t type = { .name = "swappable", .save = never_save, .load = never_load };
    void *buf = malloc(4096);
    cr_assert_not_null(buf);
    pp_ref_t ref;
    assert_rc(pp_put(pool, buf, 4096, &type, 0, &ref), 0);
    pp_entry_info_t info;
    assert_rc(pp_stat(pool, ref, &info), 0);
    cr_assert_eq(info.state & (PP_STATE_RESIDENT | PP_STATE_SWAPPED), PP_STATE_RESIDENT);
    /* Resident: a NOWAIT pin succeeds, prefetch has nothing to do. */
    void *d;
    assert_rc(pp_pin(pool, ref, PP_PIN_NOWAIT | PP_PIN_WRITE, &d), 0);
    cr_assert_eq(d, buf);
    assert_rc(pp_unpin(pool, ref), 0);
    assert_rc(pp_prefetch(pool, ref), 0);
    assert_rc(pp_release(pool, ref), 0);
    test_drain(pool);
    assert_rc(pp_prefetch(pool, ref), PP_ESTALE);
    cr_assert_eq(atomic_load(&saves), 0);
    cr_assert_eq(atomic_load(&loads), 0);
    pp_stats_t s;
    test_stats(pool, &s);
    cr_assert_eq(s.total.frees, 1);
    cr_assert_eq(s.total.swapped_bytes, 0);
    cr_assert_eq(s.total.evictions_written + s.total.evictions_clean + s.total.loads, 0);
    test_destroy(pool);
}
