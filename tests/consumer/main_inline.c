/* Uses an installed pinpool through pinpool_inline.h, as C and (through
 * main_inline.cpp) as C++: pp_pool_create checks the header's layout
 * version, pp_pin and pp_unpin are inlined, and the library counts them
 * and refuses another layout's pool.  Built by cmake/consumer_test.cmake
 * against pinpool::pinpool and pinpool::pinpool_static. */
#include <pinpool_inline.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(const char *what, int rc)
{
    fprintf(stderr, "consumer (inline): %s: %s\n", what, pp_err_name(rc));
    return 1;
}

int main(void)
{
    pp_pool_t *pool = NULL;
    int rc = pp_pool_create(NULL, &pool);
    if (rc != 0)
        return fail("pp_pool_create", rc);
    char *buf = (char *)malloc(64);
    if (buf == NULL)
        return fail("malloc", 0);
    strcpy(buf, "hello");
    pp_ref_t ref = PP_REF_NONE;
    if ((rc = pp_put(pool, buf, 64, NULL, 0, &ref)) != 0)
        return fail("pp_put", rc);
    for (int i = 0; i < 3; i++) {
        void *data = NULL;
        if ((rc = pp_pin(pool, ref, 0, &data)) != 0)
            return fail("pp_pin", rc);
        if (data != buf || strcmp((const char *)data, "hello") != 0)
            return fail("pp_pin's data", 0);
        if ((rc = pp_unpin(pool, ref)) != 0)
            return fail("pp_unpin", rc);
    }
    if ((rc = pp_unpin(pool, ref)) != PP_ENOTPINNED)
        return fail("pp_unpin of an unpinned entry", rc);
    pp_stats_t s = PP_STATS_INIT;
    if ((rc = pp_pool_stats(pool, &s)) != 0)
        return fail("pp_pool_stats", rc);
    if (s.total.pins != 3 || s.total.unpins != 3)
        return fail("the inlined pins were not counted", 0);
    if ((rc = pp_release(pool, ref)) != 0)
        return fail("pp_release", rc);
    if ((rc = pp_pin(pool, ref, 0, NULL)) != PP_ESTALE)
        return fail("pp_pin of a released entry", rc);
    if ((rc = pp_pool_destroy(pool)) != 0)
        return fail("pp_pool_destroy", rc);
    pp_pool_t *other = NULL;
    if ((rc = pp_pool_create_inline(NULL, &other, PP_INLINE_ABI + 1)) != PP_ENOTSUP ||
        other != NULL)
        return fail("a pool for another layout version", rc);
    puts("consumer (inline): ok");
    return 0;
}
